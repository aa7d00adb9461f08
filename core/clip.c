// core/clip.c — gradient clipping as torch.nn.utils: get_total_norm, clip_grads_with_norm_ and
// clip_grad_norm_ (the two in a row), with PyTorch's formula and its non-finite error.
#include <math.h>
#include <stdlib.h>

#include "torc-impl.h"

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
        int i = 0;
        for (; i < n; i++) {
            torc_tensor *v = torc_norm(tensors[i], norm_type, TORC_ALL_DIMS, false);
            if (!v || !(norms[i] = v->device == dev ? v : torc_to_device(v, dev))) break;
        }
        if (i == n) total = torc_norm(torc_stack(n, norms, 0), norm_type, TORC_ALL_DIMS, false);
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
