// plugins/optim/adam-impl.h — the Adam update shared by adam.c and adamw.c (which differ only in
// how weight decay is applied and its default): torch.optim's _single_tensor_adam, line by line.
#ifndef TORC_ADAM_IMPL_H
#define TORC_ADAM_IMPL_H

#include <math.h>
#include <stdlib.h>

#include "torc/backend.h"  // TORC_ADAM_* flags
#include "torc/optim.h"

enum { LR, BETA1, BETA2, EPS, WEIGHT_DECAY, AMSGRAD, MAXIMIZE };  // offsets into hp (betas is 2 values)
enum { EXP_AVG, EXP_AVG_SQ, MAX_EXP_AVG_SQ, N_STATES };

#define ADAM_HPARAMS(default_weight_decay)                                                        \
    {                                                                                           \
        {"lr", 1, TORC_OPTIM_HP_REAL, {1e-3}, 0.0, HUGE_VAL, 0, "learning rate"},               \
        {"betas", 2, TORC_OPTIM_HP_REAL, {0.9, 0.999}, 0.0, 1.0, TORC_OPTIM_HP_MAX_OPEN, "beta parameter"}, \
        {"eps", 1, TORC_OPTIM_HP_REAL, {1e-8}, 0.0, HUGE_VAL, 0, "epsilon value"},              \
        {"weight_decay", 1, TORC_OPTIM_HP_REAL, {default_weight_decay}, 0.0, HUGE_VAL, 0, "weight_decay value"}, \
        {"amsgrad", 1, TORC_OPTIM_HP_BOOL, {0.0}, 0.0, 1.0, 0, "amsgrad value"},                \
        {"maximize", 1, TORC_OPTIM_HP_BOOL, {0.0}, 0.0, 1.0, 0, "maximize value"},              \
    }

static const char *const adam_state_names[N_STATES] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};

#define OK(x) do { if ((x) != 0) return 1; } while (0)
#define NN(x) do { if ((x) == NULL) return 1; } while (0)

// decoupled: AdamW's p *= 1 - lr*wd instead of Adam's L2 term g += wd*p.
// A host with adam_step_ (optimizer ABI 1.2) runs each update as one fused op; an older one gets
// the same update composed from its ops below, which is also what the fused op's bits are. So
// does a device whose backend cannot run the fused op (TORC_ERR_NOT_SUPPORTED, nothing written:
// a backend built before ABI 2.1, or a layout it does not take, such as strided tensors on cuda).
static int adam_update(const torc_optim_host *h, const double *hp, bool decoupled, int n, torc_tensor *const *params,
                       torc_tensor *const *grads, torc_tensor **states, const int64_t *step_index) {
    const double lr = hp[LR], beta1 = hp[BETA1], beta2 = hp[BETA2], wd = hp[WEIGHT_DECAY];
    const bool amsgrad = hp[AMSGRAD] != 0.0;
    const unsigned flags = (decoupled ? TORC_ADAM_DECOUPLED : 0u) | (amsgrad ? TORC_ADAM_AMSGRAD : 0u) |
                           (hp[MAXIMIZE] != 0.0 ? TORC_ADAM_MAXIMIZE : 0u);
    for (int i = 0; i < n; i++) {
        torc_tensor *p = params[i], **st = &states[i * N_STATES];
        if (!st[EXP_AVG]) NN(st[EXP_AVG] = h->zeros_like(p));
        if (!st[EXP_AVG_SQ]) NN(st[EXP_AVG_SQ] = h->zeros_like(p));
        if (amsgrad && !st[MAX_EXP_AVG_SQ]) NN(st[MAX_EXP_AVG_SQ] = h->zeros_like(p));
    }
    // A host with adam_step_list_ (optimizer ABI 1.3) runs the whole step as one call: one backend op
    // per device and dtype, the same bits as adam_step_ on each parameter. Its refusal
    // (TORC_ERR_NOT_SUPPORTED, nothing written) leaves the per-parameter path below, as does an
    // older host.
    if (TORC_OPTIM_HOST_HAS(h, adam_step_list_) && n > 0) {
        torc_tensor **lists = malloc(3 * (size_t)n * sizeof *lists);
        if (!lists) return h->error(TORC_ERR_OOM, "adam: out of memory") != 0;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < N_STATES; k++) lists[k * n + i] = states[i * N_STATES + k];
        const torc_status listed = h->adam_step_list_(n, params, grads, lists, lists + n, amsgrad ? lists + 2 * n : NULL,
                                                      step_index, lr, beta1, beta2, hp[EPS], wd, flags);
        free(lists);
        if (listed == TORC_OK) return 0;
        if (listed != TORC_ERR_NOT_SUPPORTED) return 1;
    }
    for (int i = 0; i < n; i++) {
        torc_tensor *p = params[i], **st = &states[i * N_STATES];
        const torc_tensor *g = grads[i];
        if (TORC_OPTIM_HOST_HAS(h, adam_step_)) {
            const torc_status fused = h->adam_step_(p, g, st[EXP_AVG], st[EXP_AVG_SQ], amsgrad ? st[MAX_EXP_AVG_SQ] : NULL,
                                                    lr, beta1, beta2, hp[EPS], wd, step_index[i], flags);
            if (fused == TORC_OK) continue;
            if (fused != TORC_ERR_NOT_SUPPORTED) return 1;
        }
        if (hp[MAXIMIZE] != 0.0) NN(g = h->neg(g));
        if (wd != 0.0) {
            if (decoupled) OK(h->mul_scalar_(p, 1.0 - lr * wd));
            else NN(g = h->add_scaled(g, p, wd));
        }
        // Decay the first and second moment running averages.
        OK(h->lerp_(st[EXP_AVG], g, 1.0 - beta1));
        OK(h->mul_scalar_(st[EXP_AVG_SQ], beta2));
        OK(h->addcmul_(st[EXP_AVG_SQ], g, g, 1.0 - beta2));
        const double step = (double)step_index[i];
        const double bias_correction1 = 1.0 - h->pow(beta1, step);
        const double bias_correction2 = 1.0 - h->pow(beta2, step);
        const double step_size = lr / bias_correction1;
        const double bias_correction2_sqrt = h->pow(bias_correction2, 0.5);  // Python's ** 0.5
        torc_tensor *denom;
        if (amsgrad) {
            OK(h->maximum_(st[MAX_EXP_AVG_SQ], st[EXP_AVG_SQ]));
            NN(denom = h->sqrt(st[MAX_EXP_AVG_SQ]));
        } else {
            NN(denom = h->sqrt(st[EXP_AVG_SQ]));
        }
        OK(h->div_scalar_(denom, bias_correction2_sqrt));
        OK(h->add_scalar_(denom, hp[EPS]));
        OK(h->addcdiv_(p, st[EXP_AVG], denom, -step_size));
    }
    return 0;
}

#endif
