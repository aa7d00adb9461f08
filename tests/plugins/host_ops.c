// tests/plugins/host_ops.c — a probe, not an optimizer: its step() runs the v1.1 host members on
// (param p, gradient g) and stores each result as a state buffer (comparisons turned into 1.0 /
// 0.0 with where), for test_optim to compare with PyTorch's values. p is left unchanged.
#include <math.h>
#include <stddef.h>

#include "torc/optim.h"

static const char *const state_names[] = {"sign", "abs", "clamp", "eq", "ne", "lt", "le", "gt", "ge", "clamp_lo"};

static int probe_step(const torc_optim_host *h, const torc_optim_group *group, int n, torc_tensor *const *params,
                      torc_tensor *const *grads, torc_tensor **states, const int64_t *step_index) {
    (void)group, (void)step_index;
    torc_tensor *(*const cmp[6])(const torc_tensor *, const torc_tensor *) = {h->eq, h->ne, h->lt, h->le, h->gt, h->ge};
    for (int i = 0; i < n; i++) {
        torc_tensor *p = params[i], *g = grads[i], **s = &states[i * 10];
        torc_tensor *one = h->full_like(p, 1.0), *zero = h->zeros_like(p);
        if (!one || !zero) return 1;
        if (!(s[0] = h->sign(g)) || !(s[1] = h->abs(g)) || !(s[2] = h->clamp(g, -0.5, 1.0))) return 1;
        for (int k = 0; k < 6; k++) {
            torc_tensor *b = cmp[k](g, p);
            if (!b || !(s[3 + k] = h->where(b, one, zero))) return 1;
        }
        if (!(s[9] = h->clamp(g, 0.0, HUGE_VAL))) return 1;
    }
    return 0;
}

static const torc_optim_vtable vtable = {
    .abi_version = TORC_OPTIM_ABI_VERSION, .struct_size = sizeof(torc_optim_vtable), .name = "host_ops",
    .n_hparams = 0, .hparams = NULL, .n_states = 10, .state_names = state_names, .check = NULL, .step = probe_step,
};

TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    return &vtable;
}
