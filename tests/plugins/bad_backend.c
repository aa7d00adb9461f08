// tests/plugins/bad_backend.c — deliberately broken backends for the loader tests, built three
// times: with BAD_MAJOR (a plugin from a future ABI major), BAD_SIZE (a truncated vtable) and
// BAD_MEMBER (a whole vtable whose required copy is NULL).
#include <stdlib.h>
#include <string.h>

#include "torc/backend.h"

static int ok(const char *const *options, void **ctx) {
    (void)options, (void)ctx;
    return 0;
}
static const char *no_error(void *ctx) { return ""; }

#if defined(BAD_MEMBER)
static void down(void *ctx) {}
static int one(void *ctx) { return 1; }
static int info(void *ctx, int device, torc_device_info *i) {
    i->host_memory = true;
    return 0;
}
static void *alloc(void *ctx, int device, size_t n) { return malloc(n); }
static void release(void *ctx, int device, void *p) { free(p); }
static int sync(void *ctx, int device) { return 0; }
static bool supports(void *ctx, int device, const torc_op *op) { return false; }
static int run(void *ctx, int device, const torc_op *op) { return TORC_ERR_NOT_SUPPORTED; }
#endif

static torc_backend_vtable g_vt;

TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    memset(&g_vt, 0, sizeof g_vt);
    g_vt.init = ok;
    g_vt.last_error = no_error;
#if defined(BAD_MAJOR)
    g_vt.abi_version = 99u << 16 | 3u;
    g_vt.struct_size = sizeof g_vt;
    g_vt.name = "badmajor";
#elif defined(BAD_MEMBER)
    g_vt.abi_version = TORC_BACKEND_ABI_VERSION;
    g_vt.struct_size = sizeof g_vt;
    g_vt.name = "badmember";
    g_vt.shutdown = down, g_vt.device_count = one, g_vt.device_info = info, g_vt.alloc = alloc;
    g_vt.free = release, g_vt.synchronize = sync, g_vt.supports = supports, g_vt.run = run;  // copy: NULL
#else
    g_vt.abi_version = TORC_BACKEND_ABI_VERSION;
    g_vt.struct_size = 24;  // abi_version, struct_size, name and nothing else
    g_vt.name = "badsize";
#endif
    return &g_vt;
}
