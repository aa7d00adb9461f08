// core/clip.c — gradient clipping as torch.nn.utils: get_total_norm, clip_grads_with_norm_ and
// clip_grad_norm_ (the two in a row), with PyTorch's formula and its non-finite error.
#include <math.h>
#include <stdlib.h>

#include "torc-impl.h"

// The per-tensor norms of get_total_norm as one NORM_LIST op (torch._foreach_norm, backend ABI 2.6)
// writing an (n) vector, where every tensor is on one device with one floating dtype, norm_type is
// finite and >= 0 (every such norm has an identity: an empty tensor's is 0) and autocast leaves norm
// alone: the list's elements are the NORM ops torc_norm sends, each writing its entry, so every entry
// has today's bits, and the vector is what torc_stack made of them. The elements the device's
// backend takes alone go to it as one list, the rest (onednn's below TORC_ONEDNN_MIN_WORK) to the
// reference as another: each element runs where torc_norm would run it, so onednn's blocked sum and
// the reference's double sum stay where they were. Otherwise (mixed dtypes or devices, inf or
// negative orders) NULL without an error: the caller keeps one torc_norm per tensor.
// The multiply of clip_grads_with_norm_ stays one mul_ per gradient: each reads and writes its
// gradient once, at memory speed, and the dispatch it would save is a few microseconds a tensor.
static torc_tensor *norm_vector(int n, torc_tensor *const *tensors, double norm_type) {
    torc_device *dev = tensors[0]->device;
    const torc_dtype dt = tensors[0]->dtype;
    if (n < 2 || !isfinite(norm_type) || norm_type < 0 || !torc_dtype_is_floating(dt) ||
        torc__autocast_wants_f32(TORC_OP_NORM, tensors[0], NULL))
        return NULL;
    for (int i = 1; i < n; i++)
        if (tensors[i]->device != dev || tensors[i]->dtype != dt) return NULL;
    torc_tensor *v = torc__new(dev, dt, 1, (int64_t[]){n});
    torc_op *ops = v ? malloc((size_t)n * sizeof *ops) : NULL;
    uint64_t *flops = ops ? malloc((size_t)n * sizeof *flops) : NULL;
    if (!flops) {
        free(ops);
        if (v) torc_release(v), torc__error(TORC_ERR_OOM, "out of memory");
        return NULL;  // the caller's path reports its own errors
    }
    // Natives fill ops from the front, the rest from the back.
    int a = 0, b = n;
    const size_t es = torc_dtype_size(dt);
    for (int i = 0; i < n; i++) {
        const torc_tensor *t = tensors[i];
        torc_op op = {.code = TORC_OP_NORM, .n_in = 1, .n_out = 1};
        op.params.reduce.p = norm_type;
        op.params.reduce.mask = t->ndim ? (1u << t->ndim) - 1 : 0;
        torc__operand(t, &op.in[0]);
        torc__operand(v, &op.out[0]);  // entry i as a tensor of t's ndim, every dim 1
        op.out[0].data = (char *)op.out[0].data + (size_t)i * es;
        op.out[0].ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) op.out[0].shape[d] = 1, op.out[0].stride[d] = 1;
        if (torc__runs_natively(dev, &op)) ops[a] = op, flops[a++] = (uint64_t)torc_numel(t);
        else ops[--b] = op, flops[b] = (uint64_t)torc_numel(t);
    }
    torc_status st = torc__dispatch_list(dev, TORC_OP_NORM_LIST, ops, a, flops);
    if (!st) st = torc__dispatch_list(dev, TORC_OP_NORM_LIST, ops + b, n - b, flops + b);
    free(ops), free(flops);
    if (st) {
        torc_release(v);
        return NULL;
    }
    return torc__register(v);
}

torc_tensor *torc_get_total_norm(int n, torc_tensor *const *tensors, double norm_type, bool error_if_nonfinite) {
    if (n < 0 || (n > 0 && !tensors)) return TORC_NULL_ARG_FAIL("get_total_norm: tensors is NULL");
    for (int i = 0; i < n; i++)
        if (!tensors[i]) return TORC_NULL_ARG_FAIL("get_total_norm: tensor %d is NULL", i);
    torc_device *dev = n ? tensors[0]->device : torc_default_device();
    if (n == 0) {  // torch.tensor(0.0)
        torc_tensor *z = dev ? torc__scalar_on(dev, 0.0, torc_get_default_dtype()) : NULL;
        return z ? torc__register(z) : NULL;
    }
    torc_scope_push();
    torc_no_grad_begin();
    // Each tensor's vector norm, then the norm of those norms (on the first tensor's device,
    // stacked in their promoted dtype), as PyTorch's get_total_norm.
    torc_tensor *one[64], **norms = n <= 64 ? one : malloc((size_t)n * sizeof *norms);
    torc_tensor *total = NULL;
    if (!norms) {
        torc__error(TORC_ERR_OOM, "out of memory");
    } else {
        torc_tensor *vec = norm_vector(n, tensors, norm_type);
        int i = 0;
        for (; !vec && i < n; i++) {
            torc_tensor *v = torc_norm(tensors[i], norm_type, TORC_ALL_DIMS, false);
            if (!v || !(norms[i] = v->device == dev ? v : torc_to_device(v, dev))) break;
        }
        if (vec || i == n) total = torc_norm(vec ? vec : torc_stack(n, norms, 0), norm_type, TORC_ALL_DIMS, false);
        if (norms != one) free(norms);
    }
    if (total && error_if_nonfinite) {
        double v = 0;
        if (torc_item(total, &v)) {
            total = NULL;
        } else if (!isfinite(v)) {
            char b[64];
            torc__error(TORC_ERR_RUNTIME, "The total norm of order %s for gradients from `parameters` is non-finite, "
                                          "so it cannot be clipped. To disable this error and scale the gradients by "
                                          "the non-finite norm anyway, set `error_if_nonfinite=False`",
                        torc__py_float(norm_type, b, sizeof b));
            total = NULL;
        }
    }
    torc_no_grad_end();
    total = torc_keep(total);
    torc_scope_pop();
    return total;
}

torc_status torc_clip_grads_with_norm_(int n, torc_tensor *const *params, double max_norm,
                                       const torc_tensor *total_norm) {
    if (n < 0 || (n > 0 && !params)) return torc__null_arg("clip_grads_with_norm_: parameters is NULL");
    if (!total_norm) return torc__null_arg("clip_grads_with_norm_: total_norm is NULL");
    for (int i = 0; i < n; i++)
        if (!params[i]) return torc__null_arg("clip_grads_with_norm_: parameter %d is NULL", i);
    torc_status st = TORC_OK;
    torc_scope_push();
    torc_no_grad_begin();
    // clip_coef = max_norm / (total_norm + 1e-6), clamped to 1: computed in total_norm's dtype
    // (Python's float / tensor is tensor.reciprocal() * float), and every gradient is multiplied,
    // also when the coefficient is 1.
    torc_tensor *coef = torc_rdiv_scalar(torc_add_scalar(total_norm, torc_s(1e-6)), torc_s(max_norm));
    coef = coef ? torc_minimum_scalar(coef, torc_s(1.0)) : NULL;
    if (!coef) st = torc_last_status();
    for (int i = 0; !st && i < n; i++) {
        torc_tensor *g = params[i]->grad;
        if (!g) continue;
        torc_tensor *c = coef->device == g->device ? coef : torc_to_device(coef, g->device);
        st = c ? torc_mul_(g, c) : torc_last_status();
    }
    torc_no_grad_end();
    torc_scope_pop();
    return st;
}

torc_tensor *torc_clip_grad_norm_(int n, torc_tensor *const *params, double max_norm, double norm_type,
                                  bool error_if_nonfinite) {
    if (n < 0 || (n > 0 && !params)) return TORC_NULL_ARG_FAIL("clip_grad_norm_: parameters is NULL");
    for (int i = 0; i < n; i++)
        if (!params[i]) return TORC_NULL_ARG_FAIL("clip_grad_norm_: parameter %d is NULL", i);
    torc_tensor *one[64], **grads = n <= 64 ? one : malloc((size_t)(n ? n : 1) * sizeof *grads);
    if (!grads) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of memory");
    int m = 0;
    for (int i = 0; i < n; i++)
        if (params[i]->grad) grads[m++] = params[i]->grad;
    torc_scope_push();
    torc_tensor *total = torc_get_total_norm(m, grads, norm_type, error_if_nonfinite);
    if (grads != one) free(grads);
    if (total && m && torc_clip_grads_with_norm_(n, params, max_norm, total)) total = NULL;
    total = torc_keep(total);
    torc_scope_pop();
    return total;
}
