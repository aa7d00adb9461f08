// tests/plugins/bad_optim.c — deliberately broken optimizer plugins for test_optim, built three
// times: BAD_MAJOR (a future ABI major), BAD_SIZE (a truncated vtable), BAD_REFUSE (entry NULL).
#include <string.h>

#include "torc/optim.h"

static int no_step(const torc_optim_host *h, const torc_optim_group *g, int n, torc_tensor *const *p,
                   torc_tensor *const *gr, torc_tensor **s, const int64_t *i) {
    (void)h, (void)g, (void)n, (void)p, (void)gr, (void)s, (void)i;
    return 0;
}

static torc_optim_vtable g_vt;

TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    memset(&g_vt, 0, sizeof g_vt);
    g_vt.step = no_step;
#if defined(BAD_MAJOR)
    g_vt.abi_version = 99u << 16 | 3u;
    g_vt.struct_size = sizeof g_vt;
    g_vt.name = "badmajor";
#elif defined(BAD_SIZE)
    g_vt.abi_version = TORC_OPTIM_ABI_MAJOR << 16 | 7u;
    g_vt.struct_size = 24;  // abi_version, struct_size, name and nothing else
    g_vt.name = "badsize";
#else
    return NULL;
#endif
    return &g_vt;
}
