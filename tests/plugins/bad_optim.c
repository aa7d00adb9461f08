// tests/plugins/bad_optim.c — deliberately broken optimizer plugins for test_optim, built once per
// flaw: BAD_MAJOR (a future ABI major), BAD_SIZE (a truncated vtable), BAD_REFUSE (entry NULL),
// BAD_NAME (a vtable named "othername" in libtorc_optim_badname.so), BAD_STATE (stores a state
// buffer shaped like the first parameter it saw, not like the one it updates), BAD_HPARAM (a
// hyperparameter with n_values = 0).
#include <string.h>

#include "torc/optim.h"

static int no_step(const torc_optim_host *h, const torc_optim_group *g, int n, torc_tensor *const *p,
                   torc_tensor *const *gr, torc_tensor **s, const int64_t *i) {
    (void)h, (void)g, (void)n, (void)p, (void)gr, (void)s, (void)i;
    return 0;
}

#if defined(BAD_STATE)
static const char *const state_names[] = {"buf"};
static const torc_tensor *g_first;  // the first parameter this plugin was given

static int bad_state_step(const torc_optim_host *h, const torc_optim_group *g, int n, torc_tensor *const *p,
                          torc_tensor *const *gr, torc_tensor **s, const int64_t *i) {
    (void)g, (void)gr, (void)i;
    for (int k = 0; k < n; k++) {
        if (!g_first) g_first = p[k];
        if (!s[k] && !(s[k] = h->zeros_like(g_first))) return 1;
    }
    return 0;
}
#endif

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
#elif defined(BAD_NAME)
    g_vt.abi_version = TORC_OPTIM_ABI_VERSION;
    g_vt.struct_size = sizeof g_vt;
    g_vt.name = "othername";
#elif defined(BAD_HPARAM)
    static const torc_optim_hparam hp[] = {{"lr", 0, TORC_OPTIM_HP_REAL, {0.1}, 0.0, 1.0, 0, "learning rate"}};
    g_vt.abi_version = TORC_OPTIM_ABI_VERSION;
    g_vt.struct_size = sizeof g_vt;
    g_vt.name = "badhparam";
    g_vt.n_hparams = 1;
    g_vt.hparams = hp;
#elif defined(BAD_STATE)
    g_vt.abi_version = TORC_OPTIM_ABI_VERSION;
    g_vt.struct_size = sizeof g_vt;
    g_vt.name = "badstate";
    g_vt.n_states = 1;
    g_vt.state_names = state_names;
    g_vt.step = bad_state_step;
#else
    return NULL;
#endif
    return &g_vt;
}
