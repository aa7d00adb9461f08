// tests/plugins/lion.c — Lion (Chen et al. 2023, "Symbolic Discovery of Optimization
// Algorithms") as an out-of-tree optimizer plugin, written with the v1.1 host table's sign():
//   c = beta1 * m + (1 - beta1) * g ;  p = p * (1 - lr * wd) - lr * sign(c) ;
//   m = beta2 * m + (1 - beta2) * g
#include <math.h>
#include <stddef.h>

#include "torc/optim.h"

enum { LR, BETA1, BETA2, WEIGHT_DECAY };
static const torc_optim_hparam hparams[] = {
    {"lr", 1, TORC_OPTIM_HP_REAL, {1e-4}, 0.0, HUGE_VAL, 0, "learning rate"},
    {"betas", 2, TORC_OPTIM_HP_REAL, {0.9, 0.99}, 0.0, 1.0, TORC_OPTIM_HP_MAX_OPEN, "beta parameter"},
    {"weight_decay", 1, TORC_OPTIM_HP_REAL, {0.0}, 0.0, HUGE_VAL, 0, "weight_decay value"},
};
static const char *const state_names[] = {"exp_avg"};

static int lion_step(const torc_optim_host *h, const torc_optim_group *group, int n, torc_tensor *const *params,
                     torc_tensor *const *grads, torc_tensor **states, const int64_t *step_index) {
    (void)step_index;
    if (h->struct_size < offsetof(torc_optim_host, sign) + sizeof h->sign)
        return h->error(TORC_ERR_BACKEND, "lion needs optimizer ABI 1.1 (sign)");
    const double *hp = group->hp;
    for (int i = 0; i < n; i++) {
        torc_tensor *p = params[i], *g = grads[i], **m = &states[i];
        if (!*m && !(*m = h->zeros_like(p))) return 1;
        torc_tensor *c = h->clone(*m);
        if (!c || h->lerp_(c, g, 1.0 - hp[BETA1])) return 1;  // c = beta1 * m + (1 - beta1) * g
        torc_tensor *u = h->sign(c);
        if (!u) return 1;
        if (hp[WEIGHT_DECAY] != 0.0 && h->mul_scalar_(p, 1.0 - hp[LR] * hp[WEIGHT_DECAY])) return 1;
        if (h->add_scaled_(p, u, -hp[LR])) return 1;
        if (h->lerp_(*m, g, 1.0 - hp[BETA2])) return 1;  // m = beta2 * m + (1 - beta2) * g
    }
    return 0;
}

static const torc_optim_vtable vtable = {
    .abi_version = TORC_OPTIM_ABI_VERSION, .struct_size = sizeof(torc_optim_vtable), .name = "lion",
    .n_hparams = 3, .hparams = hparams, .n_states = 1, .state_names = state_names, .check = NULL,
    .step = lion_step,
};

TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    return &vtable;
}
