// core/dropout.c — torch.nn.functional.dropout as PyTorch's CPU _dropout composes it:
// noise = bernoulli(1 - p) / (1 - p) in x's dtype, out = x * noise; the draws are torc's Philox
// uniforms, so the mask is the same on every backend and after a resume.
#include "torc-impl.h"

torc_tensor *torc_dropout(const torc_tensor *x, double p, bool training, torc_generator *gen) {
    if (!x) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (!(p >= 0 && p <= 1)) {
        char b[64];
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "dropout probability has to be between 0 and 1, but got %s",
                              torc__py_float(p, b, sizeof b));
    }
    if (p == 0 || !training || torc_numel(x) == 0) return torc__register(torc_retain((torc_tensor *)x));  // x itself
    torc_scope_push();
    torc_tensor *r = NULL;
    if (p == 1) {  // x * 0: zeros, except that inf and NaN give NaN, as PyTorch's multiply(input, zeros({}))
        torc_tensor *z = torc__scalar_on(x->device, 0.0, x->dtype);
        r = z ? torc_mul(x, torc__register(z)) : NULL;
    } else if (!torc_dtype_is_floating(x->dtype)) {  // PyTorch's noise.div_(1 - p) on an integer noise tensor
        torc__error(TORC_ERR_DTYPE, "result type Float can't be cast to the desired output type %s",
                    torc__dtype_c10_name(x->dtype));
    } else {
        // One f32 uniform per element (counters offset .. offset + numel - 1 of gen); an element is
        // kept when u < 1 - p, i.e. with probability 1 - p (bernoulli_(1 - p)).
        torc_tensor *u = torc__new(x->device, TORC_DTYPE_F32, x->ndim, x->shape);
        if (u) u = torc__register(u);
        torc_status st = u ? torc_uniform_(u, 0.0, 1.0, gen) : torc_last_status();
        torc_tensor *keep = st ? NULL : torc_lt_scalar(u, torc_s(1.0 - p));
        torc_tensor *noise = keep ? torc_to_dtype(keep, x->dtype) : NULL;
        noise = noise ? torc_div_scalar(noise, torc_s(1.0 - p)) : NULL;  // in x's dtype, as noise.div_(1 - p)
        r = noise ? torc_mul(x, noise) : NULL;
    }
    r = torc_keep(r);
    torc_scope_pop();
    return r;
}
