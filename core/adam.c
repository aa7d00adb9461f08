// core/adam.c — torc_adam_step_: one fused Adam/AdamW update (TORC_OP_ADAM_STEP) of a parameter
// and its state, as torch's _fused_adam_ under no_grad; torc_adam_step_list_, the same over a list of
// parameters (TORC_OP_ADAM_STEP_LIST, one op per device and dtype); the adam plugins run them
// through the host table.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "torc-impl.h"

#define ADAM_FLAGS (TORC_ADAM_DECOUPLED | TORC_ADAM_AMSGRAD | TORC_ADAM_MAXIMIZE)

static const char *const names[5] = {"param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "grad"};

// Operand k's name in messages: "exp_avg" for the single step (i < 0), "exp_avgs[3]" for the list's.
static const char *name_of(int k, int i, char *buf, size_t n) {
    if (i < 0) return names[k];
    snprintf(buf, n, "%ss[%d]", names[k], i);
    return buf;
}

// Every tensor like param: same device, dtype and shape (the kernels walk them together).
static bool check_like(const char *fn, int i, const torc_tensor *p, const torc_tensor *t, int k) {
    if (!torc__same_device(p, t)) return false;
    char n1[48], n2[48];
    if (t->dtype != p->dtype) {
        torc__error(TORC_ERR_DTYPE, "%s: %s has dtype %s but %s has %s", fn, name_of(k, i, n1, sizeof n1),
                    torc_dtype_short_name(t->dtype), name_of(0, i, n2, sizeof n2), torc_dtype_short_name(p->dtype));
        return false;
    }
    bool same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
    if (!same) {
        char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
        torc__error(TORC_ERR_SHAPE, "%s: %s has shape %s but %s has %s", fn, name_of(k, i, n1, sizeof n1),
                    torc__shape_str(t->ndim, t->shape, b1, sizeof b1), name_of(0, i, n2, sizeof n2),
                    torc__shape_str(p->ndim, p->shape, b2, sizeof b2));
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

static bool check_flags(const char *fn, unsigned flags) {
    if (!(flags & ~(unsigned)ADAM_FLAGS)) return true;
    torc__error(TORC_ERR_INVALID_ARG, "%s: unknown flags 0x%x (TORC_ADAM_DECOUPLED, TORC_ADAM_AMSGRAD, "
                "TORC_ADAM_MAXIMIZE)", fn, flags & ~(unsigned)ADAM_FLAGS);
    return false;
}

// The checks of one parameter's update (all[5]: param, exp_avg, exp_avg_sq, max_exp_avg_sq or
// NULL, grad; i its index in a list, -1 alone), made before anything is written.
static bool check_one(const char *fn, int i, const torc_tensor *const *all, int64_t step, unsigned flags) {
    char nb[48];
    for (int k = 0; k < 5; k++)
        if (!all[k] && (k != 3 || (i >= 0 && (flags & TORC_ADAM_AMSGRAD)))) {
            if (i < 0) torc__null_arg("%s: a tensor is NULL", fn);
            else torc__null_arg("%s: %s is NULL", fn, name_of(k, i, nb, sizeof nb));
            return false;
        }
    const bool amsgrad = flags & TORC_ADAM_AMSGRAD;
    if (amsgrad != (all[3] != NULL)) {
        torc__error(TORC_ERR_INVALID_ARG, amsgrad ? "%s: amsgrad needs max_exp_avg_sq"
                                                  : "%s: max_exp_avg_sq is given without TORC_ADAM_AMSGRAD", fn);
        return false;
    }
    if (step < 1) {
        if (i < 0) torc__error(TORC_ERR_INVALID_ARG, "%s: step is %lld; the first step is 1", fn, (long long)step);
        else torc__error(TORC_ERR_INVALID_ARG, "%s: steps[%d] is %lld; the first step is 1", fn, i, (long long)step);
        return false;
    }
    const torc_tensor *param = all[0];
    const torc_dtype dt = param->dtype;
    if (dt != TORC_DTYPE_F64 && dt != TORC_DTYPE_F32 && dt != TORC_DTYPE_F16 && dt != TORC_DTYPE_BF16) {
        torc__error(TORC_ERR_DTYPE, "\"_fused_adam\" not implemented for '%s'", torc_abi_dtype_c10_name(dt));
        return false;
    }
    for (int k = 1; k < 5; k++)
        if (all[k] && !check_like(fn, i, param, all[k], k)) return false;
    // Each written tensor: no element twice, none shared with another operand.
    const int n = amsgrad ? 4 : 3;
    for (int k = 0; k < n; k++) {
        if (!torc__check_no_internal_overlap(all[k])) return false;
        for (int j = 0; j < 5; j++)
            if (j != k && all[j] && !torc__check_no_partial_overlap(all[k], all[j])) return false;
    }
    return check_no_autograd(5, all);
}

// The ADAM_STEP op of one parameter (all as check_one's) and its FLOPs.
static uint64_t build_op(torc_op *op, const torc_tensor *const *all, double lr, double beta1, double beta2,
                         double eps, double weight_decay, int64_t step, unsigned flags) {
    const bool amsgrad = flags & TORC_ADAM_AMSGRAD;
    const int n = amsgrad ? 4 : 3;
    // The bias corrections exactly as the adam plugins compute them (adam-impl.h), in double.
    const double t = (double)step;
    const double bias_correction1 = 1.0 - pow(beta1, t), bias_correction2 = 1.0 - pow(beta2, t);
    *op = (torc_op){.code = TORC_OP_ADAM_STEP, .n_in = 1, .n_out = n};
    op->params.adam.lr = lr;
    op->params.adam.beta1 = beta1;
    op->params.adam.beta2 = beta2;
    op->params.adam.eps = eps;
    op->params.adam.weight_decay = weight_decay;
    op->params.adam.step_size = lr / bias_correction1;
    op->params.adam.bc2_sqrt = pow(bias_correction2, 0.5);  // Python's ** 0.5
    op->params.adam.flags = flags;
    for (int k = 0; k < n; k++) torc__operand(all[k], &op->out[k]);
    torc__operand(all[4], &op->in[0]);
    // FLOPs as the ops it replaces count them: lerp, addcmul and addcdiv 3 each, mul, sqrt, div and
    // add 1 each, and 1 more for each of maximize, weight decay and amsgrad.
    const uint64_t per = 13 + ((flags & TORC_ADAM_MAXIMIZE) != 0) + (weight_decay != 0.0) + amsgrad;
    return per * (uint64_t)torc_numel(all[0]);
}

static void bump_versions(const torc_tensor *const *all, unsigned flags) {
    for (int k = 0; k < (flags & TORC_ADAM_AMSGRAD ? 4 : 3); k++) torc__bump_version((torc_tensor *)all[k]);
}

torc_status torc_adam_step_(torc_tensor *param, const torc_tensor *grad, torc_tensor *exp_avg,
                            torc_tensor *exp_avg_sq, torc_tensor *max_exp_avg_sq, double lr, double beta1,
                            double beta2, double eps, double weight_decay, int64_t step, unsigned flags) {
    static const char fn[] = "torc_adam_step_";
    if (!param || !grad || !exp_avg || !exp_avg_sq) return torc__null_arg("torc_adam_step_: a tensor is NULL");
    if (!check_flags(fn, flags)) return torc_last_status();
    const torc_tensor *all[5] = {param, exp_avg, exp_avg_sq, max_exp_avg_sq, grad};
    if (!check_one(fn, -1, all, step, flags)) return torc_last_status();
    torc_op op;
    const uint64_t flops = build_op(&op, all, lr, beta1, beta2, eps, weight_decay, step, flags);
    torc_status st = torc__dispatch(param->device, &op, flops);
    if (st) return st;
    bump_versions(all, flags);
    return TORC_OK;
}

// ---- the list form ----

// The elements [lo, hi) of storage s that operand t reaches (by its extent: a conservative span).
typedef struct span {
    const torc_storage *s;
    int64_t lo, hi;
    int param;     // index in the list
    bool written;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->s != y->s) return (uintptr_t)x->s < (uintptr_t)y->s ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

// No tensor of one parameter's update shares memory with a tensor of another's where either is
// written (the list's kernels may run the parameters in any order, interleaved). Each tensor is
// taken by its extent in its storage, sorted, and neighbours compared: O(m log m), where pairwise
// partial-overlap checks would be O(m^2) (76 parameters: 140k pairs each step). Two views that
// interleave inside one extent without sharing an element are refused too (clone one of them).
static bool check_disjoint(const char *fn, int n, torc_tensor *const *const lists[5], int nk) {
    size_t m = 0;
    span one[64], *sp = (size_t)n * 5 <= 64 ? one : malloc((size_t)n * 5 * sizeof *sp);
    if (!sp) {
        torc__error(TORC_ERR_OOM, "out of memory");
        return false;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 5; k++) {
            if (k == 3 && nk < 4) continue;
            const torc_tensor *t = lists[k][i];
            if (torc_numel(t) == 0) continue;
            int64_t lo = t->offset, hi = t->offset + 1;
            for (int d = 0; d < t->ndim; d++) hi += (t->shape[d] - 1) * t->stride[d];
            sp[m++] = (span){t->storage, lo, hi, i, k < 4};
        }
    qsort(sp, m, sizeof *sp, span_cmp);
    bool ok = true;
    for (size_t a = 0; ok && a < m; a++)
        for (size_t b = a + 1; ok && b < m && sp[b].s == sp[a].s && sp[b].lo < sp[a].hi; b++)
            if (sp[a].param != sp[b].param && (sp[a].written || sp[b].written)) {
                const int i = sp[a].param < sp[b].param ? sp[a].param : sp[b].param;
                const int j = sp[a].param < sp[b].param ? sp[b].param : sp[a].param;
                torc__error(TORC_ERR_INVALID_ARG, "%s: the tensors of params[%d] and params[%d] share memory; "
                            "every parameter's update must write memory no other one reads or writes", fn, i, j);
                ok = false;
            }
    if (sp != one) free(sp);
    return ok;
}

torc_status torc_adam_step_list_(int n, torc_tensor *const *params, torc_tensor *const *grads,
                                 torc_tensor *const *exp_avgs, torc_tensor *const *exp_avg_sqs,
                                 torc_tensor *const *max_exp_avg_sqs, const int64_t *steps, double lr, double beta1,
                                 double beta2, double eps, double weight_decay, unsigned flags) {
    static const char fn[] = "torc_adam_step_list_";
    if (n < 0) return torc__error(TORC_ERR_INVALID_ARG, "%s: n is %d", fn, n);
    if (n == 0) return TORC_OK;
    if (!params || !grads || !exp_avgs || !exp_avg_sqs || !steps)
        return torc__null_arg("%s: %s is NULL", fn, !params ? "params" : !grads ? "grads" : !exp_avgs ? "exp_avgs"
                                                    : !exp_avg_sqs ? "exp_avg_sqs" : "steps");
    if (!check_flags(fn, flags)) return torc_last_status();
    const bool amsgrad = flags & TORC_ADAM_AMSGRAD;
    if (amsgrad != (max_exp_avg_sqs != NULL))
        return torc__error(TORC_ERR_INVALID_ARG, amsgrad ? "%s: amsgrad needs max_exp_avg_sqs"
                                                         : "%s: max_exp_avg_sqs is given without TORC_ADAM_AMSGRAD", fn);
    for (int i = 0; i < n; i++) {
        const torc_tensor *all[5] = {params[i], exp_avgs[i], exp_avg_sqs[i], amsgrad ? max_exp_avg_sqs[i] : NULL,
                                     grads[i]};
        if (!check_one(fn, i, all, steps[i], flags)) return torc_last_status();
    }
    torc_tensor *const *const lists[5] = {params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, grads};
    if (n > 1 && !check_disjoint(fn, n, lists, amsgrad ? 4 : 3)) return torc_last_status();

    // One list op per (device, dtype) group, in the order of each group's first parameter: the
    // groups' ops are built first, laid out one group after another.
    torc_op *ops = malloc((size_t)n * sizeof *ops);
    uint64_t *flops = malloc((size_t)n * sizeof *flops);
    int *order = malloc((size_t)n * sizeof *order), *group_end = malloc((size_t)n * sizeof *group_end);
    bool *done = calloc((size_t)n, sizeof *done);
    torc_status st = TORC_OK;
    if (!ops || !flops || !order || !group_end || !done) st = torc__error(TORC_ERR_OOM, "out of memory");
    int m = 0, groups = 0;
    for (int i = 0; !st && i < n; i++) {
        if (done[i]) continue;
        for (int j = i; j < n; j++)
            if (!done[j] && params[j]->device == params[i]->device && params[j]->dtype == params[i]->dtype) {
                const torc_tensor *all[5] = {params[j], exp_avgs[j], exp_avg_sqs[j],
                                             amsgrad ? max_exp_avg_sqs[j] : NULL, grads[j]};
                flops[m] = build_op(&ops[m], all, lr, beta1, beta2, eps, weight_decay, steps[j], flags);
                order[m++] = j;
                done[j] = true;
            }
        group_end[groups++] = m;
    }
    // A device backend's refusal of a parameter (cuda: strided tensors) comes before anything is
    // written, as torc_adam_step_'s would: the adam plugins then compose that step from other ops.
    // On host memory the reference takes whatever the device's backend declines.
    for (int k = 0; !st && k < m; k++) {
        torc_device *dev = params[order[k]]->device;
        if (!dev->host_memory && !torc__runs_natively(dev, &ops[k])) st = torc__native_check(dev, &ops[k]);
    }
    for (int g = 0, lo = 0; !st && g < groups; lo = group_end[g++]) {
        st = torc__dispatch_list(params[order[lo]]->device, TORC_OP_ADAM_STEP_LIST, ops + lo, group_end[g] - lo,
                                 flops + lo);
        for (int k = lo; !st && k < group_end[g]; k++) {
            const int j = order[k];
            const torc_tensor *all[4] = {params[j], exp_avgs[j], exp_avg_sqs[j], amsgrad ? max_exp_avg_sqs[j] : NULL};
            bump_versions(all, flags);
        }
    }
    free(ops), free(flops), free(order), free(group_end), free(done);
    return st;
}
