// core/plugin.c — the one plugin loader, for every kind of plugin (backends, optimizers, and any
// later kind): where torc looks, which file decides, and the error that lists every file tried.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "torc-impl.h"
#include "torc/backend.h"
#include "torc/comm.h"
#include "torc/optim.h"

const torc__plugin_kind torc__plugin_backend = {"backend", "libtorc_", TORC_BACKEND_ENTRY_SYMBOL};
const torc__plugin_kind torc__plugin_optimizer = {"optimizer", "libtorc_optim_", TORC_OPTIM_ENTRY_SYMBOL};
const torc__plugin_kind torc__plugin_comm = {"comm plugin", "libtorc_comm_", TORC_COMM_ENTRY_SYMBOL};
// Every kind, so that listing one kind's files can leave out another's whose prefix is longer
// ("libtorc_optim_sgd.so" is an optimizer, not the backend "optim_sgd"). A new kind is one line.
static const torc__plugin_kind *const g_kinds[] = {&torc__plugin_backend, &torc__plugin_optimizer, &torc__plugin_comm};

// The directory holding libtorc.so, + "/torc": the install tree and the build tree agree, so an
// installed torc finds its plugins without any environment variable.
static void own_plugin_dir(char *buf, size_t n) {
    Dl_info info;
    buf[0] = '\0';
    if (dladdr((void *)own_plugin_dir, &info) && info.dli_fname) {
        snprintf(buf, n, "%s", info.dli_fname);
        char *slash = strrchr(buf, '/');
        if (slash) snprintf(slash, n - (size_t)(slash - buf), "/torc");
        else snprintf(buf, n, "torc");
    }
}

// Calls fn(dir, ctx) for each plugin directory in order: the entries of TORC_PLUGIN_PATH, then
// <directory of libtorc.so>/torc, until fn returns true. Allocates nothing, so running out of
// memory cannot silently drop TORC_PLUGIN_PATH's directories.
static bool dirs_each(bool (*fn)(const char *dir, void *ctx), void *ctx) {
    const char *env = getenv("TORC_PLUGIN_PATH");
    char dir[512];
    for (const char *p = env; p && *p;) {
        const char *colon = strchr(p, ':');
        const size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (len > 0) {
            snprintf(dir, sizeof dir, "%.*s", (int)len, p);
            if (fn(dir, ctx)) return true;
        }
        p += len + (colon != NULL);
    }
    own_plugin_dir(dir, sizeof dir);
    return dir[0] && fn(dir, ctx);
}

// ---- the version rule every kind shares ----
bool torc__plugin_version_ok(const char *abi, uint32_t host_version, uint32_t plugin_version, uint32_t struct_size,
                             size_t min_size, char *why, size_t n) {
    const unsigned hmaj = host_version >> 16, hmin = host_version & 0xFFFF;
    const unsigned pmaj = plugin_version >> 16, pmin = plugin_version & 0xFFFF;
    if (pmaj != hmaj) {
        snprintf(why, n, "plugin built for %s ABI %u.%u, but this torc speaks %s ABI %u.%u (a different major: "
                 "rebuild the plugin against this torc's headers)", abi, pmaj, pmin, abi, hmaj, hmin);
        return false;
    }
    if (struct_size < min_size) {
        snprintf(why, n, "plugin vtable is %u bytes (%s ABI %u.%u), smaller than the %zu bytes %s ABI %u.0 requires",
                 struct_size, abi, pmaj, pmin, min_size, abi, hmaj);
        return false;
    }
    return true;
}

// ---- loading one file ----
typedef struct search {
    const torc__plugin_kind *kind;
    const char *name;
    torc__plugin_accept_fn accept;
    void *ctx;
    char tried[2048];  // "\n  path: why" per file
    void *loaded;      // what accept returned
    bool decided;      // a file of the right name was found: it decides, loaded or not
} search;

static void tried_append(search *s, const char *path, const char *why) {
    size_t used = strlen(s->tried);
    if (used < sizeof s->tried) snprintf(s->tried + used, sizeof s->tried - used, "\n  %s: %s", path, why);
}

// Tries path. A file that does not exist leaves the search going; anything else under that name
// decides it: loaded, or refused with the reason (never a silent skip to a later directory).
static void try_file(search *s, const char *path) {
    char why[512];
    struct stat lsb, sb;
    if (lstat(path, &lsb) != 0) {
        tried_append(s, path, errno == ENOENT ? "no such file" : strerror(errno));
        return;
    }
    s->decided = true;
    if (stat(path, &sb) != 0) {
        snprintf(why, sizeof why, "%s%s", S_ISLNK(lsb.st_mode) ? "dangling symbolic link: " : "", strerror(errno));
        tried_append(s, path, why);
        return;
    }
    if (S_ISDIR(sb.st_mode)) {
        tried_append(s, path, "is a directory, not a shared library");
        return;
    }
    if (!S_ISREG(sb.st_mode)) {
        tried_append(s, path, "is not a regular file");
        return;
    }
    if (access(path, R_OK) != 0) {
        snprintf(why, sizeof why, "cannot be read: %s", strerror(errno));
        tried_append(s, path, why);
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        tried_append(s, path, e ? e : "cannot be opened");
        return;
    }
    void *entry = dlsym(h, s->kind->entry_symbol);
    if (!entry) {
        snprintf(why, sizeof why, "no symbol %s (not a torc %s plugin)", s->kind->entry_symbol, s->kind->what);
        tried_append(s, path, why);
        dlclose(h);
        return;
    }
    bool keep_open = false;
    why[0] = '\0';
    s->loaded = s->accept(s->ctx, path, h, entry, why, sizeof why, &keep_open);
    if (!s->loaded) {
        tried_append(s, path, why[0] ? why : "refused");
        if (!keep_open) dlclose(h);
    }
}

static bool try_dir(const char *dir, void *vs) {
    search *s = vs;
    char path[768];
    snprintf(path, sizeof path, "%s/%s%s.so", dir, s->kind->prefix, s->name);
    try_file(s, path);
    return s->decided;
}

// ---- what is there (for the error message) ----
typedef struct available {
    const torc__plugin_kind *kind;
    char list[512];
} available;

static bool listed(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = strstr(list, name); p; p = strstr(p + 1, name))
        if ((p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) return true;
    return false;
}

static bool collect_available(const char *dir, void *va) {
    available *a = va;
    DIR *d = opendir(dir);
    if (!d) return false;
    const size_t plen = strlen(a->kind->prefix);
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        const size_t len = strlen(n);
        if (len <= plen + 3 || strncmp(n, a->kind->prefix, plen) || strcmp(n + len - 3, ".so")) continue;
        bool other = false;  // a kind with a longer prefix owns the file
        for (size_t k = 0; k < sizeof g_kinds / sizeof g_kinds[0]; k++) {
            const size_t kl = strlen(g_kinds[k]->prefix);
            other = other || (kl > plen && !strncmp(n, g_kinds[k]->prefix, kl));
        }
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(len - plen - 3), n + plen);
        if (other || listed(a->list, name)) continue;
        size_t used = strlen(a->list);
        snprintf(a->list + used, sizeof a->list - used, "%s%s", used ? ", " : "", name);
    }
    closedir(d);
    return false;
}

void *torc__plugin_load(const torc__plugin_kind *kind, const char *name, torc__plugin_accept_fn accept, void *ctx) {
    search s = {.kind = kind, .name = name, .accept = accept, .ctx = ctx};
    dirs_each(try_dir, &s);
    if (s.loaded) return s.loaded;
    available av = {.kind = kind};
    dirs_each(collect_available, &av);
    if (!s.tried[0]) snprintf(s.tried, sizeof s.tried, "\n  (no plugin directory found)");
    torc__error(TORC_ERR_BACKEND, "%s '%s' could not be loaded; tried:%s\navailable %ss: %s", kind->what, name, s.tried,
                kind->what, av.list[0] ? av.list : "(none found)");
    return NULL;
}

void *torc__plugin_load_file(const torc__plugin_kind *kind, const char *path, torc__plugin_accept_fn accept,
                             void *ctx) {
    search s = {.kind = kind, .name = path, .accept = accept, .ctx = ctx};
    try_file(&s, path);
    if (!s.loaded) torc__error(TORC_ERR_BACKEND, "%s plugin '%s' could not be loaded:%s", kind->what, path, s.tried);
    return s.loaded;
}
