// tests/plugins/bad_backend.c — deliberately broken backends for the loader tests, built twice:
// with BAD_MAJOR (a plugin from a future ABI major) and with BAD_SIZE (a truncated vtable).
#include <string.h>

#include "torc/backend.h"

static int ok(const char *const *options, void **ctx) {
    (void)options, (void)ctx;
    return 0;
}
static const char *no_error(void *ctx) { return ""; }

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
#else
    g_vt.abi_version = TORC_BACKEND_ABI_VERSION;
    g_vt.struct_size = 24;  // abi_version, struct_size, name and nothing else
    g_vt.name = "badsize";
#endif
    return &g_vt;
}
