// core/reduce.c — reductions over any dims with keepdim (sum, mean, prod, amax, amin, argmax,
// argmin, var, std, norm, logsumexp), max / min along one dim with their indices, and softmax /
// log_softmax along one dim.
#include <math.h>
#include <string.h>

#include "torc-impl.h"

static const char *reduce_name(torc_opcode code) { return torc_op_name(code); }

// Turns (n_dims, dims) into a bit mask over t's dims; no dims means all of them.
static bool dims_mask(const torc_tensor *t, int n_dims, const int *dims, uint32_t *mask) {
    *mask = 0;
    if (n_dims == 0 || !dims) {
        *mask = t->ndim ? (1u << t->ndim) - 1 : 0;
        return true;
    }
    for (int i = 0; i < n_dims; i++) {
        int d = dims[i];
        if (!torc__wrap_dim(&d, t->ndim)) return false;
        if (t->ndim == 0) continue;
        if (*mask & (1u << d)) {
            torc__error(TORC_ERR_INVALID_ARG, "dim %d appears multiple times in the list of dims", d);
            return false;
        }
        *mask |= 1u << d;
    }
    return true;
}

// The dtype each reduction returns for input dtype d (TORC_DTYPE_COUNT + error if refused).
static torc_dtype reduce_dtype(torc_opcode code, torc_dtype d) {
    const bool fl = torc_dtype_is_floating(d);
    switch (code) {
    case TORC_OP_SUM:
    case TORC_OP_PROD: return fl ? d : TORC_DTYPE_I64;
    case TORC_OP_MAX:
    case TORC_OP_MIN: return d;
    case TORC_OP_ARGMAX:
    case TORC_OP_ARGMIN: return TORC_DTYPE_I64;
    case TORC_OP_LOGSUMEXP: return fl ? d : torc_get_default_dtype();
    case TORC_OP_MEAN:
        if (fl) return d;
        torc__error(TORC_ERR_DTYPE, "mean(): could not infer output dtype. Input dtype must be either a floating "
                                    "point or complex dtype. Got: %s", torc__dtype_c10_name(d));
        return TORC_DTYPE_COUNT;
    case TORC_OP_NORM:
        if (fl) return d;
        torc__error(TORC_ERR_DTYPE, "linalg.vector_norm: Expected a floating point or complex tensor as input. Got %s",
                    torc__dtype_c10_name(d));
        return TORC_DTYPE_COUNT;
    default:  // var, std
        if (fl) return d;
        torc__error(TORC_ERR_DTYPE, "std and var only support floating point and complex dtypes");
        return TORC_DTYPE_COUNT;
    }
}

// Runs the reduction over mask; returns the result with or without the reduced dims.
static torc_tensor *reduce(const torc_tensor *t, torc_opcode code, uint32_t mask, bool keepdim,
                           const torc_op_params *extra) {
    torc_dtype od = reduce_dtype(code, t->dtype);
    if (od == TORC_DTYPE_COUNT) return NULL;
    int64_t kshape[TORC_MAX_DIMS], oshape[TORC_MAX_DIMS];
    int on = 0;
    for (int i = 0; i < t->ndim; i++) {
        const bool red = (mask >> i) & 1;
        if (red && t->shape[i] == 0 && (code == TORC_OP_ARGMAX || code == TORC_OP_ARGMIN))
            return TORC_FAIL_NULL(TORC_ERR_INDEX, "%s(): Expected reduction dim %d to have non-zero size.",
                                  reduce_name(code), i);
        kshape[i] = red ? 1 : t->shape[i];
        if (!red) oshape[on++] = t->shape[i];
    }
    if (t->ndim == 0 && torc_numel(t) == 0) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "empty zero-dim tensor");
    torc_tensor *out = torc__new(t->device, od, t->ndim, kshape);
    if (!out) return NULL;
    torc_op op = {.code = code, .n_in = 1, .n_out = 1};
    if (extra) op.params = *extra;
    op.params.reduce.mask = mask;
    torc__operand(out, &op.out[0]);
    torc__operand(t, &op.in[0]);
    if (torc__dispatch(t->device, &op, (uint64_t)torc_numel(t))) {
        torc_release(out);
        return NULL;
    }
    if (!keepdim && on != t->ndim) {
        int64_t st[TORC_MAX_DIMS];
        torc__contiguous_strides(on, oshape, st);
        torc_tensor *v = torc__make_view(out, on, oshape, st, 0);
        torc_release(out);
        if (!v) return NULL;
        out = v;
    }
    if (code != TORC_OP_ARGMAX && code != TORC_OP_ARGMIN) {
        torc_op_params p = op.params;
        out = torc__autograd_record(out, code, 1, &t, &p);
    }
    return out ? torc__register(out) : NULL;
}

// Reductions without an identity (amax, amin, the inf and negative norms) refuse empty reduced
// dims; PyTorch's messages name the dim as the caller wrote it.
static bool check_identity(const torc_tensor *t, torc_opcode code, int n_dims, const int *dims, double p) {
    const bool norm = code == TORC_OP_NORM && (isinf(p) || p < 0);
    if (!norm && code != TORC_OP_MAX && code != TORC_OP_MIN) return true;
    const char *name = code == TORC_OP_MAX ? "amax" : "amin";
    if (n_dims == 0 || !dims) {
        if (torc_numel(t) != 0) return true;
        if (norm)
            torc__error(TORC_ERR_INVALID_ARG, "linalg.vector_norm cannot compute the %g norm on an empty tensor because "
                                              "the operation does not have an identity", p);
        else
            torc__error(TORC_ERR_INDEX, "%s(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                                        "the reduction dim with the 'dim' argument.", name);
        return false;
    }
    for (int i = 0; i < n_dims; i++) {
        const int d = dims[i] < 0 ? dims[i] + t->ndim : dims[i];  // already validated
        if (t->ndim == 0 || t->shape[d] != 0) continue;
        if (norm)  // PyTorch's text lacks the space before "because"; torc has it
            torc__error(TORC_ERR_INVALID_ARG, "linalg.vector_norm cannot compute the %g norm on the dimension %d because "
                                              "this dimension is empty and the operation does not have an identity",
                        p, dims[i]);
        else
            torc__error(TORC_ERR_INDEX, "%s(): Expected reduction dim %d to have non-zero size.", name, dims[i]);
        return false;
    }
    return true;
}

static torc_tensor *reduce_dims(const torc_tensor *t, torc_opcode code, int n_dims, const int *dims, bool keepdim,
                                const torc_op_params *extra) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    TORC__AUTOCAST_F32(code, t, reduce_dims(t, code, n_dims, dims, keepdim, extra));  // autocast.c
    uint32_t mask;
    if (!dims_mask(t, n_dims, dims, &mask)) return NULL;
    if (!check_identity(t, code, n_dims, dims, extra ? extra->reduce.p : 0)) return NULL;
    return reduce(t, code, mask, keepdim, extra);
}

torc_tensor *torc_sum(const torc_tensor *t, int n, const int *dims, bool keepdim) {
    return reduce_dims(t, TORC_OP_SUM, n, dims, keepdim, NULL);
}
torc_tensor *torc_mean(const torc_tensor *t, int n, const int *dims, bool keepdim) {
    return reduce_dims(t, TORC_OP_MEAN, n, dims, keepdim, NULL);
}
torc_tensor *torc_prod(const torc_tensor *t, int n, const int *dims, bool keepdim) {
    return reduce_dims(t, TORC_OP_PROD, n, dims, keepdim, NULL);
}
torc_tensor *torc_amax(const torc_tensor *t, int n, const int *dims, bool keepdim) {
    return reduce_dims(t, TORC_OP_MAX, n, dims, keepdim, NULL);
}
torc_tensor *torc_amin(const torc_tensor *t, int n, const int *dims, bool keepdim) {
    return reduce_dims(t, TORC_OP_MIN, n, dims, keepdim, NULL);
}
torc_tensor *torc_logsumexp(const torc_tensor *t, int n, const int *dims, bool keepdim) {
    return reduce_dims(t, TORC_OP_LOGSUMEXP, n, dims, keepdim, NULL);
}
torc_tensor *torc_var(const torc_tensor *t, int n, const int *dims, double correction, bool keepdim) {
    torc_op_params p = {.reduce = {0, correction, 0}};
    return reduce_dims(t, TORC_OP_VAR, n, dims, keepdim, &p);
}
torc_tensor *torc_std(const torc_tensor *t, int n, const int *dims, double correction, bool keepdim) {
    torc_op_params p = {.reduce = {0, correction, 0}};
    return reduce_dims(t, TORC_OP_STD, n, dims, keepdim, &p);
}
torc_tensor *torc_norm(const torc_tensor *t, double pnorm, int n, const int *dims, bool keepdim) {
    torc_op_params p = {.reduce = {0, 0, pnorm}};
    return reduce_dims(t, TORC_OP_NORM, n, dims, keepdim, &p);
}

// argmax/argmin over one dim, or over the flattened tensor (dim == TORC_DIM_NONE).
static torc_tensor *arg_reduce(const torc_tensor *t, int dim, bool keepdim, torc_opcode code) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (t->dtype == TORC_DTYPE_BOOL)
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "%s(): does not support bool input", reduce_name(code));
    if (dim != TORC_DIM_NONE) {
        if (!torc__wrap_dim(&dim, t->ndim)) return NULL;
        return reduce(t, code, t->ndim ? 1u << dim : 0, keepdim, NULL);
    }
    if (torc_numel(t) == 0)
        return TORC_FAIL_NULL(TORC_ERR_INDEX, "%s(): Expected reduction dim to be specified for input.numel() == 0.",
                              reduce_name(code));
    torc_scope_push();
    torc_tensor *flat = torc_reshape((torc_tensor *)t, 1, (int64_t[]){-1});
    torc_tensor *r = flat ? reduce(flat, code, 1u, false, NULL) : NULL;
    if (r && keepdim && t->ndim > 0) {
        int64_t ones[TORC_MAX_DIMS];
        for (int i = 0; i < t->ndim; i++) ones[i] = 1;
        r = torc_reshape(r, t->ndim, ones);
    }
    r = torc_keep(r);
    torc_scope_pop();
    return r;
}
torc_tensor *torc_argmax(const torc_tensor *t, int dim, bool keepdim) { return arg_reduce(t, dim, keepdim, TORC_OP_ARGMAX); }
torc_tensor *torc_argmin(const torc_tensor *t, int dim, bool keepdim) { return arg_reduce(t, dim, keepdim, TORC_OP_ARGMIN); }

// ---- max / min along one dim: (values, indices) ----
// The result without dim (keepdim false): a view of t, dropping dim.
static torc_tensor *drop_dim(torc_tensor *t, int dim) {
    int64_t shape[TORC_MAX_DIMS], st[TORC_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != dim) shape[n++] = t->shape[i];
    torc__contiguous_strides(n, shape, st);
    torc_tensor *v = torc__make_view(t, n, shape, st, 0);
    torc_release(t);
    return v;
}

static torc_status minmax_dim(const torc_tensor *t, int dim, bool keepdim, torc_tensor **values,
                              torc_tensor **indices, torc_opcode code) {
    if (!t) return torc__null_arg("tensor is NULL");
    const char *name = code == TORC_OP_MAX_DIM ? "max" : "min";
    if (!torc__wrap_dim(&dim, t->ndim)) return torc_last_status();
    if (t->ndim > 0 && t->shape[dim] == 0)
        return torc__error(TORC_ERR_INDEX, "%s(): Expected reduction dim %d to have non-zero size.", name, dim);
    // PyTorch's CPU kernel has no fp8; a zero-dim tensor never reaches it (it is copied).
    if (torc_dtype_is_fp8(t->dtype) && t->ndim > 0 && torc_numel(t) > 0)
        return torc__error(TORC_ERR_DTYPE, "\"%s_cpu\" not implemented for '%s'", name, torc__dtype_c10_name(t->dtype));
    int64_t kshape[TORC_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) kshape[i] = i == dim ? 1 : t->shape[i];
    torc_tensor *val = torc__new(t->device, t->dtype, t->ndim, kshape);
    torc_tensor *idx = val ? torc__new(t->device, TORC_DTYPE_I64, t->ndim, kshape) : NULL;
    if (!idx) {
        torc_release(val);
        return torc_last_status();
    }
    torc_op op = {.code = code, .n_in = 1, .n_out = 2};
    op.params.dim.dim = dim;
    torc__operand(t, &op.in[0]);
    torc__operand(val, &op.out[0]);
    torc__operand(idx, &op.out[1]);
    for (int k = 0; t->ndim == 0 && k < 3; k++) {  // a zero-dim tensor goes as shape (1)
        torc_operand *o = k == 0 ? &op.in[0] : &op.out[k - 1];
        o->ndim = 1, o->shape[0] = 1, o->stride[0] = 1;
    }
    if (torc__dispatch(t->device, &op, (uint64_t)torc_numel(t))) {
        torc_release(val), torc_release(idx);
        return torc_last_status();
    }
    torc_tensor *idx_keep = torc_retain(idx);  // the backward scatters through the kept dim
    if (!keepdim && t->ndim > 0) {
        val = drop_dim(val, dim);
        idx = drop_dim(idx, dim);
    }
    if (val && idx) {
        const torc_tensor *ins[2] = {t, idx_keep};
        val = torc__autograd_record(val, code, 2, ins, &op.params);  // values only: indices are integers
    }
    torc_release(idx_keep);
    if (!val || !idx) {
        torc_release(val), torc_release(idx);
        return torc_last_status();
    }
    if (values) *values = torc__register(val);
    else torc_release(val);
    if (indices) *indices = torc__register(idx);
    else torc_release(idx);
    return TORC_OK;
}
torc_status torc_max_dim(const torc_tensor *t, int dim, bool keepdim, torc_tensor **values, torc_tensor **indices) {
    return minmax_dim(t, dim, keepdim, values, indices, TORC_OP_MAX_DIM);
}
torc_status torc_min_dim(const torc_tensor *t, int dim, bool keepdim, torc_tensor **values, torc_tensor **indices) {
    return minmax_dim(t, dim, keepdim, values, indices, TORC_OP_MIN_DIM);
}

// ---- softmax ----
static torc_tensor *softmax_op(const torc_tensor *t, int dim, torc_opcode code) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    TORC__AUTOCAST_F32(code, t, softmax_op(t, dim, code));  // autocast.c
    if (!torc__wrap_dim(&dim, t->ndim)) return NULL;
    // PyTorch's softmax_cpu_out returns before its kernels for an empty input, so an empty integer
    // or bool tensor gives an empty result of its own dtype; a non-empty one has no kernel.
    if (!torc_dtype_is_floating(t->dtype) && torc_numel(t) == 0) {
        torc_tensor *out = torc__new(t->device, t->dtype, t->ndim, t->shape);
        return out ? torc__register(out) : NULL;
    }
    if (!torc_dtype_is_floating(t->dtype))
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "\"%s_%skernel_impl\" not implemented for '%s'",
                              code == TORC_OP_SOFTMAX ? "softmax" : "log_softmax",
                              dim >= t->ndim - 1 ? "lastdim_" : "", torc__dtype_c10_name(t->dtype));
    torc_tensor *out = torc__new(t->device, t->dtype, t->ndim, t->shape);
    if (!out) return NULL;
    torc_op op = {.code = code, .n_in = 1, .n_out = 1};
    op.params.dim.dim = dim;
    torc__operand(out, &op.out[0]);
    torc__operand(t, &op.in[0]);
    // exp, sum, divide (and a log): about 4 FLOPs an element, counted as documented in torc.h's
    // rule of one per element per elementwise pass.
    if (torc__dispatch(t->device, &op, 4 * (uint64_t)torc_numel(t))) {
        torc_release(out);
        return NULL;
    }
    out = torc__autograd_record(out, code, 1, &t, &op.params);
    return out ? torc__register(out) : NULL;
}
torc_tensor *torc_softmax(const torc_tensor *t, int dim) { return softmax_op(t, dim, TORC_OP_SOFTMAX); }
torc_tensor *torc_log_softmax(const torc_tensor *t, int dim) { return softmax_op(t, dim, TORC_OP_LOG_SOFTMAX); }
