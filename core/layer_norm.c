// core/layer_norm.c — torch.nn.functional.layer_norm and torch.native_layer_norm (y, mean, rstd):
// PyTorch's argument checks and texts, one LAYER_NORM op, and its backward (one LAYER_NORM_BACKWARD op).
#include <string.h>

#include "autograd-impl.h"

// FLOPs per element of x: forward sum, square of the centred value and its sum, then centre,
// scale, weight and bias (8); backward the two row sums and dx, dweight, dbias (about 12).
#define LN_FWD_FLOPS 8
#define LN_BWD_FLOPS 12

static bool is_narrow(torc_dtype d) { return d == TORC_DTYPE_F16 || d == TORC_DTYPE_BF16; }

// PyTorch's _check_layer_norm_inputs and layer_norm_cpu's checks, in their order. Sets *axis
// (the first normalized dim) and *stat (mean and rstd's dtype).
static bool check_args(const torc_tensor *x, int nn, const int64_t *ns, const torc_tensor *w, const torc_tensor *b,
                       int *axis, torc_dtype *stat) {
    char s1[TORC_SHAPE_STR_MAX], s2[TORC_SHAPE_STR_MAX], s3[TORC_SHAPE_STR_MAX];
    if (nn < 1 || nn > TORC_MAX_DIMS) {
        if (nn < 1) {
            torc__error(TORC_ERR_SHAPE, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                                        "least one element, but got normalized_shape = []");
        } else {
            torc__error(TORC_ERR_SHAPE, "layer_norm: normalized_shape has %d dims (at most %d)", nn, TORC_MAX_DIMS);
        }
        return false;
    }
    torc__shape_str(nn, ns, s1, sizeof s1);
    const torc_tensor *params[2] = {w, b};
    static const char *const pname[2] = {"weight", "bias"};
    for (int k = 0; k < 2; k++) {
        const torc_tensor *p = params[k];
        if (p && (p->ndim != nn || memcmp(p->shape, ns, (size_t)nn * sizeof *ns))) {
            torc__error(TORC_ERR_SHAPE, "Expected %s to be of same shape as normalized_shape, but got %s of shape %s "
                                        "and normalized_shape = %s", pname[k], pname[k],
                        torc__shape_str(p->ndim, p->shape, s2, sizeof s2), s1);
            return false;
        }
    }
    if (nn > x->ndim || memcmp(x->shape + x->ndim - nn, ns, (size_t)nn * sizeof *ns)) {
        torc__error(TORC_ERR_SHAPE, "Given normalized_shape=%s, expected input with shape [*, %s, but got input of "
                                    "size%s", s1, s1 + 1, torc__shape_str(x->ndim, x->shape, s3, sizeof s3));
        return false;
    }
    *axis = x->ndim - nn;
    // Mixed dtypes (weight or bias not of x's dtype): only f32 parameters of an f16/bf16 x.
    const torc_dtype xd = x->dtype;
    bool mixed = false, non_float = false, has_x = false;
    for (int k = 0; k < 2; k++) {
        if (!params[k]) continue;
        mixed |= params[k]->dtype != xd;
        non_float |= params[k]->dtype != TORC_DTYPE_F32;
        has_x |= params[k]->dtype == xd;
    }
    *stat = xd;
    if (mixed) {
        if (non_float && !(is_narrow(xd) && has_x)) {
            torc__error(TORC_ERR_DTYPE, "mixed dtype (CPU): expect parameter to have scalar type of Float");
            return false;
        }
        if (has_x) {  // one parameter in x's dtype, the other f32
            torc__error(TORC_ERR_DTYPE, "expected scalar type %s but found Float", torc__dtype_c10_name(xd));
            return false;
        }
        if (!is_narrow(xd)) {
            torc__error(TORC_ERR_DTYPE, "mixed dtype (CPU): all inputs must share same datatype.");
            return false;
        }
        *stat = TORC_DTYPE_F32;
    }
    if (xd != TORC_DTYPE_F64 && xd != TORC_DTYPE_F32 && !is_narrow(xd)) {
        torc__error(TORC_ERR_DTYPE, "\"LayerNormKernelImpl\" not implemented for '%s'", torc__dtype_c10_name(xd));
        return false;
    }
    for (int k = 0; k < 2; k++)
        if (params[k] && !torc__same_device(x, params[k])) return false;
    return true;
}

// t as the op gets it: a device backend (CUDA) takes contiguous operands only and has no
// fallback, so it gets a contiguous copy (as PyTorch's layer_norm makes one); host backends take
// t as it is (the reference walks any strides). Registered in the current scope; NULL stays NULL.
static const torc_tensor *as_operand(const torc_tensor *t) {
    if (!t || t->device->host_memory || torc_is_contiguous(t)) return t;
    return torc_contiguous((torc_tensor *)t);
}

// x's shape with the normalized dims of size 1.
static void stat_shape(const torc_tensor *x, int axis, int64_t *shape) {
    for (int d = 0; d < x->ndim; d++) shape[d] = d < axis ? x->shape[d] : 1;
}

torc_status torc_native_layer_norm(const torc_tensor *x, int n_normalized, const int64_t *normalized_shape,
                                   const torc_tensor *weight, const torc_tensor *bias, double eps, torc_tensor **y,
                                   torc_tensor **mean, torc_tensor **rstd) {
    if (!x) return torc__null_arg("torc_native_layer_norm: x is NULL");
    if (!normalized_shape && n_normalized > 0) return torc__null_arg("torc_native_layer_norm: normalized_shape is NULL");
    if (!y || !mean || !rstd) return torc__null_arg("torc_native_layer_norm: an output pointer is NULL");
    // Under autocast layer_norm runs in f32 (PyTorch's CUDA fp32 list, which torc's autocast
    // follows on every device; autocast.c): its floating operands are cast, its outputs are f32.
    if (torc__autocast_wants_f32(TORC_OP_LAYER_NORM, x, weight) || torc__autocast_wants_f32(TORC_OP_LAYER_NORM, bias, NULL)) {
        const torc_tensor *xf = x, *wf = weight, *bf = bias;
        const bool cast = torc__autocast_cast_f32(&xf, &wf);  // each call opens a scope for its casts
        const torc_status st = cast && torc__autocast_cast_f32(&bf, NULL)
                                   ? torc_native_layer_norm(xf, n_normalized, normalized_shape, wf, bf, eps, y, mean, rstd)
                                   : torc_last_status();
        for (int scope = 0; scope < 2; scope++) {
            if (!st) torc_keep(*y), torc_keep(*mean), torc_keep(*rstd);
            torc_scope_pop();
        }
        return st;
    }
    int axis;
    torc_dtype stat;
    if (!check_args(x, n_normalized, normalized_shape, weight, bias, &axis, &stat)) return torc_last_status();
    int64_t sshape[TORC_MAX_DIMS];
    stat_shape(x, axis, sshape);
    torc_tensor *out = torc__new(x->device, x->dtype, x->ndim, x->shape);
    torc_tensor *m = out ? torc__new(x->device, stat, x->ndim, sshape) : NULL;
    torc_tensor *r = m ? torc__new(x->device, stat, x->ndim, sshape) : NULL;
    torc_op op = {.code = TORC_OP_LAYER_NORM, .n_in = 1, .n_out = 3};
    op.params.norm.eps = eps;
    op.params.norm.axis = axis;
    op.params.norm.affine = (weight ? 1u : 0u) | (bias ? 2u : 0u);
    bool ok = r != NULL;
    torc_scope_push();  // the contiguous copies a device backend gets
    torc_no_grad_begin();
    const torc_tensor *xo = ok ? as_operand(x) : NULL, *wo = ok ? as_operand(weight) : NULL;
    const torc_tensor *bo = ok ? as_operand(bias) : NULL;
    ok = ok && xo && (wo || !weight) && (bo || !bias);
    if (ok) {
        torc__operand(xo, &op.in[0]);
        if (wo) torc__operand(wo, &op.in[op.n_in++]);
        if (bo) torc__operand(bo, &op.in[op.n_in++]);
        torc__operand(out, &op.out[0]);
        torc__operand(m, &op.out[1]);
        torc__operand(r, &op.out[2]);
        ok = !torc__dispatch(x->device, &op, LN_FWD_FLOPS * (uint64_t)torc_numel(x));
    }
    torc_no_grad_end();
    torc_scope_pop();
    if (!ok) {
        torc_release(out);
        torc_release(m);
        torc_release(r);
        return torc_last_status();
    }
    const torc_tensor *ins[3] = {x, weight, bias}, *aux[2] = {m, r};
    out = torc__autograd_record_aux(out, TORC_OP_LAYER_NORM, 3, ins, &op.params, 2, aux);
    if (!out) {
        torc_release(m);
        torc_release(r);
        return torc_last_status();
    }
    *y = torc__register(out);
    *mean = torc__register(m);
    *rstd = torc__register(r);
    return TORC_OK;
}

torc_tensor *torc_layer_norm(const torc_tensor *x, int n_normalized, const int64_t *normalized_shape,
                             const torc_tensor *weight, const torc_tensor *bias, double eps) {
    torc_tensor *y = NULL, *mean, *rstd;
    torc_scope_push();  // mean and rstd go with it
    if (!torc_native_layer_norm(x, n_normalized, normalized_shape, weight, bias, eps, &y, &mean, &rstd))
        y = torc_keep(y);
    torc_scope_pop();
    return y;
}

// ---- backward ----
// One LAYER_NORM_BACKWARD from the saved x (slot 0), weight (slot 1, absent without one), mean and
// rstd (TORC__SAVED_AUX..). dx is always computed, and dweight whenever there is a weight (the
// op's contract); dbias only when asked for.
torc_status torc__layer_norm_backward(const torc_node *n, const torc_tensor *g, const bool *need, torc_tensor **gin) {
    const torc_tensor *x = torc__saved_at(n, 0), *w = torc__saved_at(n, 1);
    const torc_tensor *mean = torc__saved_at(n, TORC__SAVED_AUX), *rstd = torc__saved_at(n, TORC__SAVED_AUX + 1);
    const bool has_w = n->params.norm.affine & 1, want_b = (n->params.norm.affine & 2) && need[2];
    torc_op op = {.code = TORC_OP_LAYER_NORM_BACKWARD, .n_in = 4, .n_out = 1};
    op.params = n->params;
    op.params.norm.affine = (has_w ? 1u : 0u) | (want_b ? 2u : 0u);
    torc_tensor *outs[3] = {NULL, NULL, NULL};
    outs[0] = torc__new(x->device, x->dtype, x->ndim, x->shape);
    bool ok = outs[0] != NULL;
    if (ok && has_w) ok = (outs[1] = torc__new(x->device, n->in[1].dtype, n->in[1].ndim, n->in[1].shape)) != NULL;
    if (ok && want_b) ok = (outs[2] = torc__new(x->device, n->in[2].dtype, n->in[2].ndim, n->in[2].shape)) != NULL;
    const torc_tensor *go = ok ? as_operand(g) : NULL, *xo = go ? as_operand(x) : NULL;
    const torc_tensor *wo = xo && has_w ? as_operand(w) : NULL;
    ok = xo && (wo || !has_w);
    if (ok) {
        torc__operand(go, &op.in[0]);
        torc__operand(xo, &op.in[1]);
        torc__operand(mean, &op.in[2]);
        torc__operand(rstd, &op.in[3]);
        if (has_w) torc__operand(wo, &op.in[op.n_in++]);
        torc__operand(outs[0], &op.out[0]);
        for (int i = 1; i < 3; i++)
            if (outs[i]) torc__operand(outs[i], &op.out[op.n_out++]);
        ok = !torc__dispatch(x->device, &op, LN_BWD_FLOPS * (uint64_t)torc_numel(x));
    }
    for (int i = 0; i < 3; i++) {
        if (ok && need[i] && outs[i]) gin[i] = torc__register(outs[i]);
        else torc_release(outs[i]);
    }
    return ok ? TORC_OK : torc_last_status();
}
