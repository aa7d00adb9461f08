// core/device.c — backends and the device registry: loads libtorc_<name>.so through plugin.c's
// loader, checks its ABI, and names devices like PyTorch.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

// A plugin's vtable holds at least every 2.0 member (the layout is pinned in backend.h).
#define TORC_VTABLE_V2_0_SIZE (offsetof(torc_backend_vtable, host_free) + sizeof(void *))

#define MAX_BACKENDS 16
#define MAX_DEVICES_PER_BACKEND 16

struct torc_backend_lib {
    char name[32];
    char path[512];
    void *handle;
    const torc_backend_vtable *vt;
    void *ctx;  // what vt->init returned: the one instance of this backend
    _Atomic bool shut_down;  // shutdown_all has begun on it: the core calls nothing on ctx now
    int n_devices;
    torc_device *devices[MAX_DEVICES_PER_BACKEND];
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static torc_backend_lib *g_libs[MAX_BACKENDS];
static int g_n_libs;
static torc_device *g_default;       // resolved default device (process-wide)
static _Thread_local torc_device *tls_default;  // torc_set_default_device override

// ---- loading (the search and the file checks are plugin.c's) ----
typedef struct backend_request {
    const char *name;
    const char *const *options;  // for init, NULL-terminated (NULL: none)
} backend_request;

// The backend's own checks: ABI, required members, init. Returns the new lib or NULL with why.
static void *accept_backend(void *vreq, const char *path, void *h, void *entry_sym, char *why, size_t n,
                            bool *keep_open) {
    const backend_request *req = vreq;
    const torc_backend_vtable *vt = ((torc_backend_entry_fn)entry_sym)(TORC_BACKEND_ABI_VERSION);
    if (!vt) {
        snprintf(why, n, "the plugin refused torc's backend ABI %u.%u", TORC_BACKEND_ABI_MAJOR, TORC_BACKEND_ABI_MINOR);
        return NULL;
    }
    if (!torc__plugin_version_ok("backend", TORC_BACKEND_ABI_VERSION, vt->abi_version, vt->struct_size,
                                 TORC_VTABLE_V2_0_SIZE, why, n))
        return NULL;
    // As the optimizer and comm loaders: the file's name is the plugin's own (it names the device).
    if (!vt->name || strcmp(vt->name, req->name)) {
        snprintf(why, n, "file is named for backend '%s' but its vtable says '%s'", req->name,
                 vt->name ? vt->name : "(null)");
        return NULL;
    }
    const char *missing = !vt->init           ? "init"
                          : !vt->shutdown     ? "shutdown"
                          : !vt->device_count ? "device_count"
                          : !vt->device_info  ? "device_info"
                          : !vt->alloc        ? "alloc"
                          : !vt->free         ? "free"
                          : !vt->copy         ? "copy"
                          : !vt->synchronize  ? "synchronize"
                          : !vt->supports     ? "supports"
                          : !vt->run          ? "run"
                          : !vt->last_error   ? "last_error"
                                              : NULL;
    if (missing) {
        snprintf(why, n, "plugin vtable lacks the required member %s (it is NULL)", missing);
        return NULL;
    }
    void *ctx = NULL;
    if (vt->init(req->options, &ctx) != 0) {
        const char *msg = vt->last_error(NULL);
        snprintf(why, n, "init failed: %s", msg && *msg ? msg : "(no reason given)");
        *keep_open = true;  // some runtimes (CUDA) do not survive dlclose after init
        return NULL;
    }
    torc_backend_lib *lib = calloc(1, sizeof *lib);
    if (!lib) {
        snprintf(why, n, "out of memory");
        vt->shutdown(ctx);
        *keep_open = true;  // initialised: as above
        return NULL;
    }
    snprintf(lib->name, sizeof lib->name, "%s", req->name);
    snprintf(lib->path, sizeof lib->path, "%s", path);
    lib->handle = h;
    lib->vt = vt;
    lib->ctx = ctx;
    int count = vt->device_count(ctx);
    lib->n_devices = count < 0 ? 0 : (count > MAX_DEVICES_PER_BACKEND ? MAX_DEVICES_PER_BACKEND : count);
    return lib;
}

static bool valid_backend_name(const char *name) {
    if (!*name || strlen(name) >= 32) return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) return false;
    return true;
}

static void shutdown_all(void);

// Loads (once) the backend called name, its init given options. Caller holds g_lock.
static torc_backend_lib *load_backend_opts_locked(const char *name, const char *const *options) {
    for (int i = 0; i < g_n_libs; i++)
        if (!strcmp(g_libs[i]->name, name)) return g_libs[i];
    if (!valid_backend_name(name)) {
        torc__error(TORC_ERR_INVALID_ARG, "invalid backend name '%s'", name);
        return NULL;
    }
    if (g_n_libs == MAX_BACKENDS) {
        torc__error(TORC_ERR_BACKEND, "too many backends loaded (%d)", MAX_BACKENDS);
        return NULL;
    }
    backend_request req = {name, options};
    torc_backend_lib *lib = torc__plugin_load(&torc__plugin_backend, name, accept_backend, &req);
    if (!lib) return NULL;
    static bool registered;
    if (!registered) registered = atexit(shutdown_all) == 0;
    g_libs[g_n_libs++] = lib;
    return lib;
}

static torc_backend_lib *load_backend_locked(const char *name) { return load_backend_opts_locked(name, NULL); }

torc_status torc_backend_load(const char *name, const char *const *options) {
    if (!name) return torc__null_arg("torc_backend_load: name is NULL");
    pthread_mutex_lock(&g_lock);
    bool loaded = false;
    for (int i = 0; i < g_n_libs; i++) loaded = loaded || !strcmp(g_libs[i]->name, name);
    torc_backend_lib *lib = loaded ? NULL : load_backend_opts_locked(name, options);
    pthread_mutex_unlock(&g_lock);
    if (loaded)
        return torc__error(TORC_ERR_INVALID_ARG, "backend '%s' is already loaded: options apply only when it loads",
                           name);
    return lib ? TORC_OK : torc_last_status();
}

// Each backend's shutdown(ctx), once, in reverse load order. The libraries stay mapped (a
// runtime such as CUDA's may still run its own exit handlers) and the registry keeps them and
// their devices, so pointers handed out earlier do not dangle.
// Before any shutdown runs, every thread's pool of small host buffers (tensor.c) is drained into
// its backend's free(), and each backend is marked shut down: the core makes no later call on its
// ctx (a buffer released later, by a thread that exits or a tensor freed after, is dropped).
// skip: the backend (or NULL) whose call is in progress on this thread: at exit, a library that
// called exit() inside it. It is neither drained nor shut down: its locks may be held right here.
// At exit (wait false) a busy pool registry means another thread is returning buffers to a
// backend right now: then no backend is shut down either. Caller holds g_lock.
static void shutdown_locked(const torc_backend_lib *skip, bool wait) {
    if (!torc__pools_drain(skip, wait)) return;
    for (int i = g_n_libs - 1; i >= 0; i--) {
        torc_backend_lib *lib = g_libs[i];
        if (atomic_exchange(&lib->shut_down, true) || lib == skip) continue;
        lib->vt->shutdown(lib->ctx);
    }
}

// The exit handler never blocks: a lock held now may be held by this very thread (a plugin's
// constructor, its init or one of its calls ran exit(), as libgfortran, libgomp and OpenBLAS do
// when memory runs out), or by another thread that exit() does not wait for. If the registry is
// busy, nothing is shut down: the process is ending and the system reclaims what it holds.
static void shutdown_all(void) {
    if (pthread_mutex_trylock(&g_lock) != 0) return;
    shutdown_locked(torc__tls_calling, false);
    pthread_mutex_unlock(&g_lock);
}

void torc_shutdown(void) {
    pthread_mutex_lock(&g_lock);
    shutdown_locked(NULL, true);
    pthread_mutex_unlock(&g_lock);
}

bool torc__dev_shut_down(const torc_device *dev) {
    return atomic_load_explicit(&dev->lib->shut_down, memory_order_relaxed);
}

static torc_device *lib_device_locked(torc_backend_lib *lib, int index) {
    if (index < 0 || index >= lib->n_devices) {
        torc__error(TORC_ERR_BACKEND, "backend '%s' has %d device(s); device index %d is out of range",
                    lib->name, lib->n_devices, index);
        return NULL;
    }
    if (lib->devices[index]) return lib->devices[index];
    torc_device *d = calloc(1, sizeof *d);
    if (!d) {
        torc__error(TORC_ERR_OOM, "out of memory");
        return NULL;
    }
    d->vt = lib->vt;
    d->ctx = lib->ctx;
    d->lib = lib;
    d->index = index;
    d->info.struct_size = sizeof d->info;  // the rest zeroed by calloc: what a plugin does not fill
    if (lib->vt->device_info(lib->ctx, index, &d->info) != 0) {
        torc__error(TORC_ERR_BACKEND, "backend '%s': device_info(%d) failed: %s", lib->name, index,
                    lib->vt->last_error(lib->ctx));
        free(d);
        return NULL;
    }
    d->host_memory = d->info.host_memory;
    if (d->host_memory && lib->n_devices == 1) snprintf(d->name, sizeof d->name, "%s", lib->name);
    else snprintf(d->name, sizeof d->name, "%s:%d", lib->name, index);
    lib->devices[index] = d;
    return d;
}

// The default backend when TORC_BACKEND is unset: cuda with a device, else onednn, else
// reference. Failures of the optional ones are not errors.
static torc_device *resolve_default_locked(void) {
    const char *env = getenv("TORC_BACKEND");
    if (env && *env) {
        torc_backend_lib *lib = load_backend_locked(env);
        if (!lib) {
            char msg[3072];
            snprintf(msg, sizeof msg, "%s", torc_last_error());
            torc__error(TORC_ERR_BACKEND, "TORC_BACKEND=%s: %s", env, msg);
            return NULL;
        }
        return lib_device_locked(lib, 0);
    }
    static const char *const order[] = {"cuda", "onednn", "reference"};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        torc_backend_lib *lib = load_backend_locked(order[i]);
        if (lib && lib->n_devices > 0) {
            torc_clear_error();
            return lib_device_locked(lib, 0);
        }
    }
    return NULL;  // the reference's error is the one left set
}

torc_device *torc_default_device(void) {
    if (tls_default) return tls_default;
    pthread_mutex_lock(&g_lock);
    if (!g_default) g_default = resolve_default_locked();
    torc_device *d = g_default;
    pthread_mutex_unlock(&g_lock);
    return d;
}

torc_status torc_set_default_device(torc_device *dev) {
    tls_default = dev;  // NULL restores TORC_BACKEND's / the automatic choice
    return TORC_OK;
}

torc_device *torc_device_get(const char *name) {
    if (!name) return TORC_NULL_ARG_FAIL("torc_device_get: name is NULL");
    char backend[64];
    int index = 0;
    const char *colon = strchr(name, ':');
    if (colon) {
        char *end = NULL;
        long v = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || v < 0 || v > 1024)
            return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "Invalid device string: '%s'", name);
        index = (int)v;
        snprintf(backend, sizeof backend, "%.*s", (int)(colon - name), name);
    } else {
        snprintf(backend, sizeof backend, "%s", name);
    }
    if (!strcmp(backend, "cpu")) {
        // The default device when it is host memory, else the best host backend.
        torc_device *d = torc_default_device();
        if (d && d->host_memory && index == 0) return d;
        pthread_mutex_lock(&g_lock);
        torc_backend_lib *lib = load_backend_locked("onednn");
        if (!lib) lib = load_backend_locked("reference");
        torc_device *r = lib ? lib_device_locked(lib, index) : NULL;
        if (r) torc_clear_error();
        pthread_mutex_unlock(&g_lock);
        return r;
    }
    pthread_mutex_lock(&g_lock);
    torc_backend_lib *lib = load_backend_locked(backend);
    torc_device *d = NULL;
    if (lib) {
        if (lib->n_devices == 0)
            torc__error(TORC_ERR_BACKEND, "backend '%s' loaded but reports no devices", backend);
        else
            d = lib_device_locked(lib, index);
    }
    pthread_mutex_unlock(&g_lock);
    return d;
}

torc_device *torc__reference_device(void) {
    // Read on every fallback without the lock: an atomic published once under it.
    static _Atomic(torc_device *) ref;
    torc_device *r = atomic_load_explicit(&ref, memory_order_acquire);
    if (r) return r;
    pthread_mutex_lock(&g_lock);
    torc_backend_lib *lib = load_backend_locked("reference");
    torc_device *d = lib ? lib_device_locked(lib, 0) : NULL;
    if (d) atomic_store_explicit(&ref, d, memory_order_release);
    pthread_mutex_unlock(&g_lock);
    return d;
}

const char *torc_device_name(const torc_device *dev) { return dev ? dev->name : "(null)"; }
const char *torc_device_backend_name(const torc_device *dev) { return dev ? dev->lib->name : "(null)"; }
uint32_t torc_device_backend_abi(const torc_device *dev) { return dev ? dev->vt->abi_version : 0; }

torc_status torc_device_info_get(const torc_device *dev, torc_device_info *info) {
    if (!dev || !info) return torc__error(TORC_ERR_INVALID_ARG, "torc_device_info_get: NULL argument");
    *info = dev->info;
    return TORC_OK;
}

torc_status torc_device_synchronize(torc_device *dev) {
    if (!dev) return torc__null_arg("torc_device_synchronize: device is NULL");
    return torc__dev_sync(dev);
}
