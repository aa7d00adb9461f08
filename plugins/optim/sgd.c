// plugins/optim/sgd.c — torch.optim.SGD as a torc optimizer plugin: momentum, dampening,
// Nesterov momentum, L2 weight decay and maximize, with PyTorch's defaults and update order.
#include <math.h>

#include "torc/optim.h"

enum { LR, MOMENTUM, DAMPENING, WEIGHT_DECAY, NESTEROV, MAXIMIZE };  // offsets into hp

static const torc_optim_hparam hparams[] = {
    {"lr", 1, TORC_OPTIM_HP_REAL, {1e-3}, 0.0, HUGE_VAL, 0, "learning rate"},
    {"momentum", 1, TORC_OPTIM_HP_REAL, {0.0}, 0.0, HUGE_VAL, 0, "momentum value"},
    {"dampening", 1, TORC_OPTIM_HP_REAL, {0.0}, -HUGE_VAL, HUGE_VAL, 0, "dampening value"},
    {"weight_decay", 1, TORC_OPTIM_HP_REAL, {0.0}, 0.0, HUGE_VAL, 0, "weight_decay value"},
    {"nesterov", 1, TORC_OPTIM_HP_BOOL, {0.0}, 0.0, 1.0, 0, "nesterov value"},
    {"maximize", 1, TORC_OPTIM_HP_BOOL, {0.0}, 0.0, 1.0, 0, "maximize value"},
};
static const char *const state_names[] = {"momentum_buffer"};

static int sgd_check(const torc_optim_host *h, const double *hp) {
    if (hp[NESTEROV] != 0.0 && (hp[MOMENTUM] <= 0.0 || hp[DAMPENING] != 0.0))
        return h->error(TORC_ERR_INVALID_ARG, "Nesterov momentum requires a momentum and zero dampening");
    return 0;
}

// The null check every host call needs: a failed call has set the error already.
#define OK(x) do { if ((x) != 0) return 1; } while (0)
#define NN(x) do { if ((x) == NULL) return 1; } while (0)

static int sgd_step(const torc_optim_host *h, const torc_optim_group *group, int n, torc_tensor *const *params,
                    torc_tensor *const *grads, torc_tensor **states, const int64_t *step_index) {
    (void)step_index;
    const double *hp = group->hp;
    for (int i = 0; i < n; i++) {
        torc_tensor *p = params[i];
        const torc_tensor *g = grads[i];
        if (hp[MAXIMIZE] != 0.0) NN(g = h->neg(g));
        if (hp[WEIGHT_DECAY] != 0.0) NN(g = h->add_scaled(g, p, hp[WEIGHT_DECAY]));
        if (hp[MOMENTUM] != 0.0) {
            torc_tensor **buf = &states[i];
            if (*buf == NULL) {
                NN(*buf = h->clone(g));  // the first step starts the buffer at the gradient
            } else {
                OK(h->mul_scalar_(*buf, hp[MOMENTUM]));
                OK(h->add_scaled_(*buf, g, 1.0 - hp[DAMPENING]));
            }
            if (hp[NESTEROV] != 0.0) NN(g = h->add_scaled(g, *buf, hp[MOMENTUM]));
            else g = *buf;
        }
        OK(h->add_scaled_(p, g, -hp[LR]));
    }
    return 0;
}

static const torc_optim_vtable vtable = {
    .abi_version = TORC_OPTIM_ABI_VERSION,
    .struct_size = sizeof(torc_optim_vtable),
    .name = "sgd",
    .n_hparams = sizeof hparams / sizeof hparams[0],
    .hparams = hparams,
    .n_states = 1,
    .state_names = state_names,
    .check = sgd_check,
    .step = sgd_step,
};

TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t host_abi_version) {
    (void)host_abi_version;  // the loader compares versions and names both on a mismatch
    return &vtable;
}
