// backends/cuda/backend.c — the CUDA backend's vtable: init without touching a device until asked,
// devices and their info, the caching allocator, copies through pinned staging, events, errors.
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.h"
#include "device_table.h"
#include "index_ops.h"  // the kernels' error codes

// ---- errors ----
static _Thread_local char t_error[512];

int tcu_error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_error, sizeof t_error, fmt, ap);
    va_end(ap);
    return status;
}

int tcu_cuda_error(cudaError_t e, const char *what) {
    cudaGetLastError();  // reported now: the next launch on this thread must not report it again
    return tcu_error(e == cudaErrorMemoryAllocation ? TORC_ERR_OOM : TORC_ERR_BACKEND, "%s: %s (%s)",
                     what, cudaGetErrorName(e), cudaGetErrorString(e));
}

static const char *cuda_last_error(void *ctx) {
    (void)ctx;  // per thread, whatever the context (NULL too: a failed init)
    return t_error;
}

// ---- global state ----
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_state;                 // 0: not initialised, 1: ready, -1: init failed
static char g_init_error[256];
static int g_count;
static tcu_device *g_devs;
static bool g_tf32;

bool tcu_allow_tf32(void) { return g_tf32; }

// allow_tf32 (0/1, -1: not given) wins over TORC_ALLOW_TF32 ("1" allows).
static bool tf_opt_or_env(int opt, const char *env) { return opt >= 0 ? opt == 1 : env && strcmp(env, "1") == 0; }

// Options, each overriding its environment variable (which stays the default):
//   allow_tf32=0|1   TORC_ALLOW_TF32   f32 matmuls on TF32 tensor cores
// Checked before anything touches the driver, so a bad option is the same error on any machine.
static int parse_options(const char *const *options, int *tf32) {
    *tf32 = -1;
    for (int i = 0; options && options[i]; i++) {
        const char *kv = options[i];
        if (!strncmp(kv, "allow_tf32=", 11) && (!strcmp(kv + 11, "0") || !strcmp(kv + 11, "1"))) {
            *tf32 = kv[11] == '1';
            continue;
        }
        if (!strncmp(kv, "allow_tf32=", 11))
            return tcu_error(TORC_ERR_INVALID_ARG, "cuda: option allow_tf32 takes 0 or 1, got '%s'", kv + 11);
        const char *eq = strchr(kv, '=');
        return tcu_error(TORC_ERR_INVALID_ARG, "cuda: unknown option '%.*s' (it takes allow_tf32)",
                         eq ? (int)(eq - kv) : (int)strlen(kv), kv);
    }
    return TORC_OK;
}

// The state is the process's: every context is g_devs' owner, this one.
static char g_context;

static int cuda_init(const char *const *options, void **ctx) {
    int tf32_opt;
    const int prc = parse_options(options, &tf32_opt);
    if (prc != TORC_OK) return prc;
    pthread_mutex_lock(&g_mu);
    if (g_state == 1) {
        if (tf32_opt >= 0) g_tf32 = tf32_opt;
        pthread_mutex_unlock(&g_mu);
        *ctx = &g_context;
        return TORC_OK;
    }
    if (g_state == -1) {  // the cause (no driver, no device) does not go away: same answer
        pthread_mutex_unlock(&g_mu);
        return tcu_error(TORC_ERR_BACKEND, "%s", g_init_error);
    }
    int status = TORC_OK;
    // Ask the loader first: without libcuda the runtime cannot do anything, and this way no
    // CUDA call runs at all on a machine without a driver.
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) {
        const char *why = dlerror();
        snprintf(g_init_error, sizeof g_init_error, "no CUDA driver found (%s)",
                 why ? why : "libcuda.so.1 not found");
        status = TORC_ERR_BACKEND;
    } else {
        dlclose(drv);
        int n = 0;
        const cudaError_t e = cudaGetDeviceCount(&n);
        if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
            snprintf(g_init_error, sizeof g_init_error,
                     "CUDA driver found but no CUDA device (cudaGetDeviceCount: %s)",
                     e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
            status = TORC_ERR_BACKEND;
        } else if (e == cudaErrorInsufficientDriver) {
            snprintf(g_init_error, sizeof g_init_error,
                     "CUDA driver found but it is older than the CUDA %d.%d runtime this backend "
                     "was built with (cudaGetDeviceCount: %s)",
                     CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, cudaGetErrorString(e));
            status = TORC_ERR_BACKEND;
        } else if (e != cudaSuccess) {
            snprintf(g_init_error, sizeof g_init_error, "CUDA initialisation failed (cudaGetDeviceCount: %s: %s)",
                     cudaGetErrorName(e), cudaGetErrorString(e));
            status = TORC_ERR_BACKEND;
        } else {
            g_devs = calloc((size_t)n, sizeof *g_devs);
            if (!g_devs) {
                snprintf(g_init_error, sizeof g_init_error, "out of host memory");
                status = TORC_ERR_OOM;
            }
            for (int i = 0; status == TORC_OK && i < n; i++) {
                struct cudaDeviceProp p;
                const cudaError_t pe = cudaGetDeviceProperties(&p, i);
                if (pe != cudaSuccess) {
                    snprintf(g_init_error, sizeof g_init_error, "cudaGetDeviceProperties(%d): %s", i,
                             cudaGetErrorString(pe));
                    status = TORC_ERR_BACKEND;
                    break;
                }
                tcu_device *d = &g_devs[i];
                d->index = i;
                snprintf(d->name, sizeof d->name, "%.127s", p.name);
                d->cc_major = p.major;
                d->cc_minor = p.minor;
                d->sm_count = p.multiProcessorCount;
                d->total_memory = p.totalGlobalMem;
                atomic_init(&d->ready, false);
                pthread_mutex_init(&d->lib_mu, NULL);
            }
            if (status == TORC_OK) {
                const char *tf = getenv("TORC_ALLOW_TF32");
                g_tf32 = tf_opt_or_env(tf32_opt, tf);
                g_count = n;
            } else {
                for (int i = 0; i < n; i++) pthread_mutex_destroy(&g_devs[i].lib_mu);
                free(g_devs);
                g_devs = NULL;
            }
        }
    }
    g_state = status == TORC_OK ? 1 : -1;
    pthread_mutex_unlock(&g_mu);
    if (status != TORC_OK) return tcu_error(status, "%s", g_init_error);
    *ctx = &g_context;
    return TORC_OK;
}

// Creates the device's stream, allocator, staging pool and error word. Caller holds g_mu.
static int device_setup(tcu_device *d) {
    cudaError_t e = cudaSetDevice(d->index);
    if (e != cudaSuccess) return tcu_cuda_error(e, "cudaSetDevice");
    e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) return tcu_cuda_error(e, "cudaStreamCreate");
    e = cudaHostAlloc((void **)&d->err_word, sizeof(int), cudaHostAllocMapped);
    if (e != cudaSuccess) {
        cudaStreamDestroy(d->stream);
        return tcu_cuda_error(e, "cudaHostAlloc (error word)");
    }
    *d->err_word = 0;
    tcu_raw_ops raw;
    tcu_device_raw_ops(d, &raw);
    tcu_allocator_init(&d->alloc, &raw);
    tcu_pinned_ops pops;
    tcu_device_pinned_ops(d, &pops);
    tcu_pinned_init(&d->pinned, &pops);
    d->blas = NULL;
    atomic_store(&d->ready, true);
    return TORC_OK;
}

tcu_device *tcu_dev(int device) {
    if (g_state != 1) {
        if (g_state == -1) tcu_error(TORC_ERR_BACKEND, "CUDA backend unavailable: %s", g_init_error);
        else tcu_error(TORC_ERR_BACKEND, "CUDA backend used before init()");
        return NULL;
    }
    if (device < 0 || device >= g_count) {
        tcu_error(TORC_ERR_INVALID_ARG, "invalid CUDA device %d (%d available)", device, g_count);
        return NULL;
    }
    tcu_device *d = &g_devs[device];
    if (!atomic_load(&d->ready)) {
        pthread_mutex_lock(&g_mu);
        const int rc = atomic_load(&d->ready) ? TORC_OK : device_setup(d);
        pthread_mutex_unlock(&g_mu);
        if (rc != TORC_OK) return NULL;
    }
    // Asked of the runtime every time (a cheap thread-local read): another thread may have set
    // the device up, and application code may have called cudaSetDevice since.
    return tcu_make_current(device) == TORC_OK ? d : NULL;
}

void *tcu_scratch(tcu_device *d, size_t n) {
    char err[256];
    bool oom;
    void *p = tcu_allocator_alloc(&d->alloc, n, 0, &oom, err, sizeof err);
    if (!p) tcu_error(oom ? TORC_ERR_OOM : TORC_ERR_BACKEND, "%s", err);
    return p;
}

void tcu_scratch_free(tcu_device *d, void *p) { tcu_allocator_free(&d->alloc, p); }

static void device_teardown(tcu_device *d) {
    cudaSetDevice(d->index);
    cudaStreamSynchronize(d->stream);
    tcu_gemm_release(d);
    tcu_lt_release(d);  // before the allocator: its workspace is a block of it
    tcu_allocator_destroy(&d->alloc);
    tcu_pinned_destroy(&d->pinned);
    cudaFreeHost(d->err_word);
    cudaStreamDestroy(d->stream);
    atomic_store(&d->ready, false);
}

static void cuda_shutdown(void *ctx) {
    (void)ctx;
    pthread_mutex_lock(&g_mu);
    if (g_state == 1) {
        for (int i = 0; i < g_count; i++) {
            if (atomic_load(&g_devs[i].ready)) device_teardown(&g_devs[i]);
            pthread_mutex_destroy(&g_devs[i].lib_mu);
        }
        free(g_devs);
        g_devs = NULL;
        g_count = 0;
    }
    g_state = 0;
    pthread_mutex_unlock(&g_mu);
}

static int cuda_device_count(void *ctx) {
    (void)ctx;
    return g_state == 1 ? g_count : 0;
}

// The error for a query on a device index before (or without) a successful init.
static int check_index(int device) {
    if (g_state == -1) return tcu_error(TORC_ERR_BACKEND, "CUDA backend unavailable: %s", g_init_error);
    if (g_state != 1) return tcu_error(TORC_ERR_BACKEND, "CUDA backend used before init()");
    if (device < 0 || device >= g_count)
        return tcu_error(TORC_ERR_INVALID_ARG, "invalid CUDA device %d (%d available)", device, g_count);
    return TORC_OK;
}

static int cuda_device_info(void *ctx, int device, torc_device_info *info) {
    const int rc = check_index(device);
    if (rc != TORC_OK) return rc;
    if (!info) return tcu_error(TORC_ERR_INVALID_ARG, "device_info: NULL info");
    const tcu_device *d = &g_devs[device];
    // Every member is 2.0's: info->struct_size covers them all (the core zeroed the rest).
    snprintf(info->name, sizeof info->name, "%s", d->name);
    info->host_memory = false;
    info->total_memory = d->total_memory;
    tcu_fill_peaks(info, d->name, d->cc_major, d->cc_minor, d->sm_count, g_tf32);
    return TORC_OK;
}

// Reads and clears the error word kernels report into (after a synchronisation).
static int check_kernel_errors(tcu_device *d) {
    const int code = *(volatile int *)d->err_word;
    if (!code) return TORC_OK;
    *(volatile int *)d->err_word = 0;
    if (code == TCU_KERR_SOURCE)
        return tcu_error(TORC_ERR_INVALID_ARG, "masked_scatter: expected source to have at least as many "
                                               "elements as ones in mask (reported by a CUDA kernel)");
    if (code == TCU_KERR_ZERO_DIV)
        return tcu_error(TORC_ERR_INVALID_ARG, "ZeroDivisionError (an integer division by zero, reported by a CUDA "
                                               "kernel at the next synchronisation)");
    return tcu_error(TORC_ERR_INDEX, "index out of range in an indexing op (reported by a CUDA kernel "
                                     "at the next synchronisation)");
}

static void *cuda_alloc(void *ctx, int device, size_t nbytes) {
    tcu_device *d = tcu_dev(device);
    return d ? tcu_scratch(d, nbytes) : NULL;
}

static void cuda_free(void *ctx, int device, void *ptr) {
    if (!ptr) return;
    tcu_device *d = tcu_dev(device);
    if (!d) return;
    if (!tcu_allocator_free(&d->alloc, ptr))
        tcu_error(TORC_ERR_INVALID_ARG, "free of a pointer the CUDA allocator did not hand out");
}

static int sync_stream(tcu_device *d) {
    const cudaError_t e = cudaStreamSynchronize(d->stream);
    if (e != cudaSuccess) return tcu_cuda_error(e, "cudaStreamSynchronize");
    return check_kernel_errors(d);
}

#define TCU_D2H_STAGE_MAX ((size_t)1 << 20)

typedef struct d2h_job {
    void *dst;
    const void *src;
    size_t n;
} d2h_job;

// Runs on the driver's callback thread once the device->pinned copy is done.
static void CUDART_CB d2h_finish(void *p) {
    d2h_job *j = p;
    memcpy(j->dst, j->src, j->n);
    free(j);
}

static bool is_pinned(const void *p) {
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        cudaGetLastError();  // plain pageable memory may report an error on older drivers
        return false;
    }
    return at.type == cudaMemoryTypeHost;
}

static int cuda_copy(void *ctx, int device, void *dst, const void *src, size_t n, torc_copy_kind kind, bool async) {
    tcu_device *d = tcu_dev(device);
    if (!d) return TORC_ERR_BACKEND;
    if (n == 0) return TORC_OK;
    if (!dst || !src) return tcu_error(TORC_ERR_INVALID_ARG, "copy with a NULL pointer");
    cudaError_t e;
    // A page-locked host buffer (host_alloc) needs no staging: the DMA reads or writes it
    // directly, and the caller keeps it alive until synchronize.
    if (async && kind != TORC_COPY_DEVICE_TO_DEVICE && is_pinned(kind == TORC_COPY_HOST_TO_DEVICE ? src : dst)) {
        e = cudaMemcpyAsync(dst, src, n, kind == TORC_COPY_HOST_TO_DEVICE ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                            d->stream);
        return e == cudaSuccess ? TORC_OK : tcu_cuda_error(e, "cudaMemcpyAsync (pinned)");
    }
    if (kind == TORC_COPY_HOST_TO_DEVICE) {
        void *stage;
        const int idx = async ? tcu_pinned_get(&d->pinned, n, &stage) : -1;
        if (idx >= 0) {   // the caller's buffer is free again as soon as this returns
            memcpy(stage, src, n);
            e = cudaMemcpyAsync(dst, stage, n, cudaMemcpyHostToDevice, d->stream);
            tcu_pinned_release(&d->pinned, idx, d->stream);
            return e == cudaSuccess ? TORC_OK : tcu_cuda_error(e, "cudaMemcpyAsync (host to device)");
        }
        e = cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, d->stream);
        if (e != cudaSuccess) return tcu_cuda_error(e, "cudaMemcpyAsync (host to device)");
        return sync_stream(d);
    }
    if (kind == TORC_COPY_DEVICE_TO_HOST) {
        void *stage;
        // The staged copy ends in a host callback whose memcpy holds the stream: fine for small
        // copies, but 256 MiB at ~10 GB/s would stall every later kernel for ~25 ms. Larger
        // copies into pageable memory run synchronously, as cudaMemcpyAsync into pageable
        // memory does in PyTorch.
        const int idx = async && n <= TCU_D2H_STAGE_MAX ? tcu_pinned_get(&d->pinned, n, &stage) : -1;
        if (idx >= 0) {   // dst is written by a stream callback: valid after synchronize()
            d2h_job *j = malloc(sizeof *j);
            if (j) {
                j->dst = dst;
                j->src = stage;
                j->n = n;
                e = cudaMemcpyAsync(stage, src, n, cudaMemcpyDeviceToHost, d->stream);
                if (e == cudaSuccess) e = cudaLaunchHostFunc(d->stream, d2h_finish, j);
                else free(j);
                tcu_pinned_release(&d->pinned, idx, d->stream);
                if (e == cudaSuccess) return TORC_OK;
                return tcu_cuda_error(e, "cudaMemcpyAsync (device to host)");
            }
            tcu_pinned_release(&d->pinned, idx, d->stream);
        }
        e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, d->stream);
        if (e != cudaSuccess) return tcu_cuda_error(e, "cudaMemcpyAsync (device to host)");
        return sync_stream(d);
    }
    if (kind != TORC_COPY_DEVICE_TO_DEVICE) return tcu_error(TORC_ERR_INVALID_ARG, "unknown copy kind %d", (int)kind);
    e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, d->stream);
    if (e != cudaSuccess) return tcu_cuda_error(e, "cudaMemcpyAsync (device to device)");
    return async ? TORC_OK : sync_stream(d);
}

static int cuda_synchronize(void *ctx, int device) {
    tcu_device *d = tcu_dev(device);
    if (!d) return TORC_ERR_BACKEND;
    return sync_stream(d);
}

// ---- ops ----
// A check of the descriptor against the device's compute capability (known since init; no
// context needed); the reason goes to last_error.
static bool cuda_supports(void *ctx, int device, const torc_op *op) {
    char why[160];
    if (!op) {
        tcu_error(TORC_ERR_INVALID_ARG, "supports: NULL op");
        return false;
    }
    if (check_index(device) != TORC_OK) return false;
    const tcu_device *d = &g_devs[device];
    if (tcu_supports_op(op, d->cc_major * 10 + d->cc_minor, why, sizeof why)) return true;
    tcu_error(TORC_ERR_NOT_SUPPORTED, "cuda: %s", why);
    return false;
}

static int cuda_run(void *ctx, int device, const torc_op *op) {
    if (!op) return tcu_error(TORC_ERR_INVALID_ARG, "run: NULL op");
    tcu_device *d = tcu_dev(device);
    if (!d) return TORC_ERR_BACKEND;
    char why[160];
    if (!tcu_supports_op(op, d->cc_major * 10 + d->cc_minor, why, sizeof why))
        return tcu_error(TORC_ERR_NOT_SUPPORTED, "cuda: %s", why);
    return tcu_run_op(d, op);
}

// Page-locked host memory: copies from and to it run asynchronously without staging.
static void *cuda_host_alloc(void *ctx, int device, size_t nbytes) {
    if (!tcu_dev(device)) return NULL;
    void *p = NULL;
    const cudaError_t e = cudaHostAlloc(&p, nbytes ? nbytes : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        tcu_cuda_error(e, "cudaHostAlloc");
        return NULL;
    }
    return p;
}

static void cuda_host_free(void *ctx, int device, void *ptr) {
    (void)device;
    if (ptr && g_state == 1) cudaFreeHost(ptr);
}

static int cuda_memory_stats(void *ctx, int device, uint64_t *allocated, uint64_t *reserved, uint64_t *peak_reserved) {
    const int rc = check_index(device);
    if (rc != TORC_OK) return rc;
    tcu_alloc_stats s = {0};
    if (atomic_load(&g_devs[device].ready)) tcu_allocator_stats(&g_devs[device].alloc, &s);
    if (allocated) *allocated = s.allocated;
    if (reserved) *reserved = s.reserved;
    if (peak_reserved) *peak_reserved = s.peak_reserved;
    return TORC_OK;
}

static int cuda_empty_cache(void *ctx, int device) {
    tcu_device *d = tcu_dev(device);
    if (!d) return TORC_ERR_BACKEND;
    const int rc = sync_stream(d);   // no kernel may still use a block we hand back
    tcu_allocator_empty_cache(&d->alloc);
    tcu_pinned_trim(&d->pinned);
    return rc;
}

static const torc_backend_vtable VTABLE = {
    .abi_version = TORC_BACKEND_ABI_VERSION,
    .struct_size = sizeof(torc_backend_vtable),
    .name = "cuda",
    .init = cuda_init,
    .shutdown = cuda_shutdown,
    .device_count = cuda_device_count,
    .device_info = cuda_device_info,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .synchronize = cuda_synchronize,
    .supports = cuda_supports,
    .run = cuda_run,
    .last_error = cuda_last_error,
    .memory_stats = cuda_memory_stats,
    .empty_cache = cuda_empty_cache,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
};

// Runs no CUDA code: loading the plugin is safe on any machine.
TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t host_abi_version) {
    if ((host_abi_version >> 16) != TORC_BACKEND_ABI_MAJOR) return NULL;
    return &VTABLE;
}
