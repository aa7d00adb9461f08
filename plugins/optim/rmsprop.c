// plugins/optim/rmsprop.c — torch.optim.RMSprop as a torc optimizer plugin: smoothing constant
// alpha, eps, L2 weight decay, momentum, the centered variant and maximize, as PyTorch's.
#include <math.h>

#include "torc/optim.h"

enum { LR, ALPHA, EPS, WEIGHT_DECAY, MOMENTUM, CENTERED, MAXIMIZE };  // offsets into hp
enum { SQUARE_AVG, MOMENTUM_BUFFER, GRAD_AVG, N_STATES };

static const torc_optim_hparam hparams[] = {
    {"lr", 1, TORC_OPTIM_HP_REAL, {1e-2}, 0.0, HUGE_VAL, 0, "learning rate"},
    {"alpha", 1, TORC_OPTIM_HP_REAL, {0.99}, 0.0, HUGE_VAL, 0, "alpha value"},
    {"eps", 1, TORC_OPTIM_HP_REAL, {1e-8}, 0.0, HUGE_VAL, 0, "epsilon value"},
    {"weight_decay", 1, TORC_OPTIM_HP_REAL, {0.0}, 0.0, HUGE_VAL, 0, "weight_decay value"},
    {"momentum", 1, TORC_OPTIM_HP_REAL, {0.0}, 0.0, HUGE_VAL, 0, "momentum value"},
    {"centered", 1, TORC_OPTIM_HP_BOOL, {0.0}, 0.0, 1.0, 0, "centered value"},
    {"maximize", 1, TORC_OPTIM_HP_BOOL, {0.0}, 0.0, 1.0, 0, "maximize value"},
};
static const char *const state_names[N_STATES] = {"square_avg", "momentum_buffer", "grad_avg"};

#define OK(x) do { if ((x) != 0) return 1; } while (0)
#define NN(x) do { if ((x) == NULL) return 1; } while (0)

static int rmsprop_step(const torc_optim_host *h, const torc_optim_group *group, int n, torc_tensor *const *params,
                        torc_tensor *const *grads, torc_tensor **states, const int64_t *step_index) {
    (void)step_index;
    const double *hp = group->hp;
    const double alpha = hp[ALPHA], momentum = hp[MOMENTUM];
    const bool centered = hp[CENTERED] != 0.0;
    for (int i = 0; i < n; i++) {
        torc_tensor *p = params[i], **st = &states[i * N_STATES];
        const torc_tensor *g = grads[i];
        if (!st[SQUARE_AVG]) NN(st[SQUARE_AVG] = h->zeros_like(p));
        if (momentum > 0.0 && !st[MOMENTUM_BUFFER]) NN(st[MOMENTUM_BUFFER] = h->zeros_like(p));
        if (centered && !st[GRAD_AVG]) NN(st[GRAD_AVG] = h->zeros_like(p));
        if (hp[MAXIMIZE] != 0.0) NN(g = h->neg(g));
        if (hp[WEIGHT_DECAY] != 0.0) NN(g = h->add_scaled(g, p, hp[WEIGHT_DECAY]));
        OK(h->mul_scalar_(st[SQUARE_AVG], alpha));
        OK(h->addcmul_(st[SQUARE_AVG], g, g, 1.0 - alpha));
        torc_tensor *avg;
        if (centered) {
            OK(h->lerp_(st[GRAD_AVG], g, 1.0 - alpha));
            NN(avg = h->addcmul(st[SQUARE_AVG], st[GRAD_AVG], st[GRAD_AVG], -1.0));
            OK(h->sqrt_(avg));
        } else {
            NN(avg = h->sqrt(st[SQUARE_AVG]));
        }
        OK(h->add_scalar_(avg, hp[EPS]));
        if (momentum > 0.0) {
            OK(h->mul_scalar_(st[MOMENTUM_BUFFER], momentum));
            OK(h->addcdiv_(st[MOMENTUM_BUFFER], g, avg, 1.0));
            OK(h->add_scaled_(p, st[MOMENTUM_BUFFER], -hp[LR]));
        } else {
            OK(h->addcdiv_(p, g, avg, -hp[LR]));
        }
    }
    return 0;
}

static const torc_optim_vtable vtable = {
    .abi_version = TORC_OPTIM_ABI_VERSION,
    .struct_size = sizeof(torc_optim_vtable),
    .name = "rmsprop",
    .n_hparams = sizeof hparams / sizeof hparams[0],
    .hparams = hparams,
    .n_states = N_STATES,
    .state_names = state_names,
    .check = NULL,
    .step = rmsprop_step,
};

TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t host_abi_version) {
    (void)host_abi_version;  // the loader compares versions and names both on a mismatch
    return &vtable;
}
