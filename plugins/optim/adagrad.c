// plugins/optim/adagrad.c — torch.optim.Adagrad as a torc optimizer plugin: learning-rate decay,
// L2 weight decay, initial accumulator value, eps and maximize, with PyTorch's defaults and order.
#include <math.h>

#include "torc/optim.h"

enum { LR, LR_DECAY, WEIGHT_DECAY, INITIAL_ACCUMULATOR_VALUE, EPS, MAXIMIZE };  // offsets into hp

static const torc_optim_hparam hparams[] = {
    {"lr", 1, TORC_OPTIM_HP_REAL, {1e-2}, 0.0, HUGE_VAL, 0, "learning rate"},
    {"lr_decay", 1, TORC_OPTIM_HP_REAL, {0.0}, 0.0, HUGE_VAL, 0, "lr_decay value"},
    {"weight_decay", 1, TORC_OPTIM_HP_REAL, {0.0}, 0.0, HUGE_VAL, 0, "weight_decay value"},
    {"initial_accumulator_value", 1, TORC_OPTIM_HP_REAL, {0.0}, 0.0, HUGE_VAL, 0, "initial_accumulator_value value"},
    {"eps", 1, TORC_OPTIM_HP_REAL, {1e-10}, 0.0, HUGE_VAL, 0, "epsilon value"},
    {"maximize", 1, TORC_OPTIM_HP_BOOL, {0.0}, 0.0, 1.0, 0, "maximize value"},
};
static const char *const state_names[] = {"sum"};

#define OK(x) do { if ((x) != 0) return 1; } while (0)
#define NN(x) do { if ((x) == NULL) return 1; } while (0)

static int adagrad_step(const torc_optim_host *h, const torc_optim_group *group, int n, torc_tensor *const *params,
                        torc_tensor *const *grads, torc_tensor **states, const int64_t *step_index) {
    const double *hp = group->hp;
    for (int i = 0; i < n; i++) {
        torc_tensor *p = params[i], **sum = &states[i];
        const torc_tensor *g = grads[i];
        if (!*sum) NN(*sum = h->full_like(p, hp[INITIAL_ACCUMULATOR_VALUE]));
        if (hp[MAXIMIZE] != 0.0) NN(g = h->neg(g));
        if (hp[WEIGHT_DECAY] != 0.0) NN(g = h->add_scaled(g, p, hp[WEIGHT_DECAY]));
        const double clr = hp[LR] / (1.0 + ((double)step_index[i] - 1.0) * hp[LR_DECAY]);
        OK(h->addcmul_(*sum, g, g, 1.0));
        torc_tensor *std;
        NN(std = h->sqrt(*sum));
        OK(h->add_scalar_(std, hp[EPS]));
        OK(h->addcdiv_(p, g, std, -clr));
    }
    return 0;
}

static const torc_optim_vtable vtable = {
    .abi_version = TORC_OPTIM_ABI_VERSION,
    .struct_size = sizeof(torc_optim_vtable),
    .name = "adagrad",
    .n_hparams = sizeof hparams / sizeof hparams[0],
    .hparams = hparams,
    .n_states = 1,
    .state_names = state_names,
    .check = NULL,
    .step = adagrad_step,
};

TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t host_abi_version) {
    (void)host_abi_version;  // the loader compares versions and names both on a mismatch
    return &vtable;
}
