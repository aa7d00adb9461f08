// core/adam.c — torc_adam_step_: one fused Adam/AdamW update (TORC_OP_ADAM_STEP) of a parameter
// and its state, as torch's _fused_adam_ under no_grad; the adam plugins run it through the host table.
#include <math.h>

#include "torc-impl.h"

#define ADAM_FLAGS (TORC_ADAM_DECOUPLED | TORC_ADAM_AMSGRAD | TORC_ADAM_MAXIMIZE)

static const char *const names[5] = {"param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "grad"};

// Every tensor like param: same device, dtype and shape (the kernels walk them together).
static bool check_like(const torc_tensor *p, const torc_tensor *t, const char *name) {
    if (!torc__same_device(p, t)) return false;
    if (t->dtype != p->dtype) {
        torc__error(TORC_ERR_DTYPE, "torc_adam_step_: %s has dtype %s but param has %s", name,
                    torc_dtype_short_name(t->dtype), torc_dtype_short_name(p->dtype));
        return false;
    }
    bool same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
    if (!same) {
        char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
        torc__error(TORC_ERR_SHAPE, "torc_adam_step_: %s has shape %s but param has %s", name,
                    torc__shape_str(t->ndim, t->shape, b1, sizeof b1), torc__shape_str(p->ndim, p->shape, b2, sizeof b2));
        return false;
    }
    return true;
}

// The update writes without recording history, so it runs only where autograd has nothing to
// record: grad mode off (torch.optim's no_grad) or no tensor requiring grad. PyTorch's messages.
static bool check_no_autograd(int n, const torc_tensor *const *ts) {
    if (!torc_is_grad_enabled()) return true;
    for (int k = 0; k < n; k++) {
        if (!ts[k] || !ts[k]->requires_grad) continue;
        if (k < 4 && !ts[k]->grad_fn)  // a written leaf
            torc__error(TORC_ERR_AUTOGRAD, "a leaf Variable that requires grad is being used in an in-place operation.");
        else
            torc__error(TORC_ERR_AUTOGRAD, "the derivative for '_fused_adam_' is not implemented.");
        return false;
    }
    return true;
}

torc_status torc_adam_step_(torc_tensor *param, const torc_tensor *grad, torc_tensor *exp_avg,
                            torc_tensor *exp_avg_sq, torc_tensor *max_exp_avg_sq, double lr, double beta1,
                            double beta2, double eps, double weight_decay, int64_t step, unsigned flags) {
    if (!param || !grad || !exp_avg || !exp_avg_sq) return torc__null_arg("torc_adam_step_: a tensor is NULL");
    if (flags & ~(unsigned)ADAM_FLAGS)
        return torc__error(TORC_ERR_INVALID_ARG, "torc_adam_step_: unknown flags 0x%x (TORC_ADAM_DECOUPLED, "
                           "TORC_ADAM_AMSGRAD, TORC_ADAM_MAXIMIZE)", flags & ~(unsigned)ADAM_FLAGS);
    const bool amsgrad = flags & TORC_ADAM_AMSGRAD;
    if (amsgrad != (max_exp_avg_sq != NULL))
        return torc__error(TORC_ERR_INVALID_ARG, amsgrad ? "torc_adam_step_: amsgrad needs max_exp_avg_sq"
                                                         : "torc_adam_step_: max_exp_avg_sq is given without TORC_ADAM_AMSGRAD");
    if (step < 1)
        return torc__error(TORC_ERR_INVALID_ARG, "torc_adam_step_: step is %lld; the first step is 1", (long long)step);
    const torc_dtype dt = param->dtype;
    if (dt != TORC_DTYPE_F64 && dt != TORC_DTYPE_F32 && dt != TORC_DTYPE_F16 && dt != TORC_DTYPE_BF16)
        return torc__error(TORC_ERR_DTYPE, "\"_fused_adam\" not implemented for '%s'", torc_abi_dtype_c10_name(dt));
    const int n = amsgrad ? 4 : 3;
    torc_tensor *out[4] = {param, exp_avg, exp_avg_sq, max_exp_avg_sq};
    const torc_tensor *all[5] = {param, exp_avg, exp_avg_sq, max_exp_avg_sq, grad};
    for (int k = 1; k < 5; k++)
        if (all[k] && !check_like(param, all[k], names[k])) return torc_last_status();
    // Each written tensor: no element twice, none shared with another operand.
    for (int k = 0; k < n; k++) {
        if (!torc__check_no_internal_overlap(out[k])) return torc_last_status();
        for (int j = 0; j < 5; j++)
            if (j != k && all[j] && !torc__check_no_partial_overlap(out[k], all[j])) return torc_last_status();
    }
    if (!check_no_autograd(5, all)) return torc_last_status();

    // The bias corrections exactly as the adam plugins compute them (adam-impl.h), in double.
    const double t = (double)step;
    const double bias_correction1 = 1.0 - pow(beta1, t), bias_correction2 = 1.0 - pow(beta2, t);
    torc_op op = {.code = TORC_OP_ADAM_STEP, .n_in = 1, .n_out = n};
    op.params.adam.lr = lr;
    op.params.adam.beta1 = beta1;
    op.params.adam.beta2 = beta2;
    op.params.adam.eps = eps;
    op.params.adam.weight_decay = weight_decay;
    op.params.adam.step_size = lr / bias_correction1;
    op.params.adam.bc2_sqrt = pow(bias_correction2, 0.5);  // Python's ** 0.5
    op.params.adam.flags = flags;
    for (int k = 0; k < n; k++) torc__operand(out[k], &op.out[k]);
    torc__operand(grad, &op.in[0]);
    // FLOPs as the ops it replaces count them: lerp, addcmul and addcdiv 3 each, mul, sqrt, div and
    // add 1 each, and 1 more for each of maximize, weight decay and amsgrad.
    const uint64_t per = 13 + ((flags & TORC_ADAM_MAXIMIZE) != 0) + (weight_decay != 0.0) + amsgrad;
    torc_status st = torc__dispatch(param->device, &op, per * (uint64_t)torc_numel(param));
    if (st) return st;
    for (int k = 0; k < n; k++) torc__bump_version(out[k]);
    return TORC_OK;
}
