// core/run_op.c — the public single-op API (torc_run_op, torc_op_supported): one op of
// backend.h's contract on tensors, through the same minor-version gate as every frontend. The
// core checks what keeps a backend's memory accesses inside the tensors (the operand counts and
// the shapes the contract relates); a backend checks values (index bounds, mask counts) and
// dtypes (supports()).
#include <stdio.h>
#include <string.h>

#include "torc-impl.h"

typedef struct checker {
    const torc_op *op;
    char *why;
    size_t n;
} checker;

static const torc_operand *operand(const checker *c, int k) {
    return k < c->op->n_in ? &c->op->in[k] : &c->op->out[k - c->op->n_in];
}

static void name_of(const checker *c, int k, char *buf, size_t n) {
    if (k < c->op->n_in) snprintf(buf, n, "in[%d]", k);
    else snprintf(buf, n, "out[%d]", k - c->op->n_in);
}

static bool fail_shape(const checker *c, int k, const char *want) {
    char who[16], got[TORC_SHAPE_STR_MAX];
    name_of(c, k, who, sizeof who);
    const torc_operand *o = operand(c, k);
    snprintf(c->why, c->n, "%s has shape %s; %s", who, torc__shape_str(o->ndim, o->shape, got, sizeof got), want);
    return false;
}

// Operand k has shape (ndim, shape).
static bool want_shape(const checker *c, int k, int ndim, const int64_t *shape) {
    const torc_operand *o = operand(c, k);
    if (o->ndim == ndim && (ndim == 0 || !memcmp(o->shape, shape, (size_t)ndim * sizeof *shape))) return true;
    char want[TORC_SHAPE_STR_MAX + 16];
    char s[TORC_SHAPE_STR_MAX];
    snprintf(want, sizeof want, "the op needs %s", torc__shape_str(ndim, shape, s, sizeof s));
    return fail_shape(c, k, want);
}

static bool want_numel1(const checker *c, int k) {
    const torc_operand *o = operand(c, k);
    int64_t n = 1;
    for (int d = 0; d < o->ndim; d++) n *= o->shape[d];
    return n == 1 || fail_shape(c, k, "the op needs one element");
}

static bool want_ndim(const checker *c, int k, int lo, int hi) {
    const int nd = operand(c, k)->ndim;
    if (nd >= lo && nd <= hi) return true;
    char want[64];
    if (lo == hi) snprintf(want, sizeof want, "the op needs %d dims", lo);
    else snprintf(want, sizeof want, "the op needs %d to %d dims", lo, hi);
    return fail_shape(c, k, want);
}

static bool want_dim(const checker *c, int dim, int ndim) {
    if (dim >= 0 && dim < (ndim > 0 ? ndim : 1)) return true;
    snprintf(c->why, c->n, "params.dim.dim is %d, out of range for %d dims", dim, ndim);
    return false;
}

// The shape of o with the dims in mask (bit d: dim d) set to 1.
static void reduced(const torc_operand *o, uint64_t mask, int64_t *shape) {
    for (int d = 0; d < o->ndim; d++) shape[d] = mask >> d & 1 ? 1 : o->shape[d];
}

// Every operand of an elementwise op has one shape: out[0]'s where another operand agrees with
// it, else in[0]'s, so that an out of [5] with inputs of [4] is named as the odd one, not in[0].
static bool same_shapes(const checker *c) {
    const torc_op *op = c->op;
    const torc_operand *x = op->n_in ? &op->in[0] : &op->out[0], *out = &op->out[0];
    const int n = op->n_in + op->n_out;
    const torc_operand *want = out;
    bool agreed = false;
    for (int k = 0; k < n && !agreed; k++) {
        const torc_operand *o = operand(c, k);
        agreed = o != out && o->ndim == out->ndim && !memcmp(o->shape, out->shape, (size_t)o->ndim * sizeof *o->shape);
    }
    if (!agreed && op->n_in > 0) want = x;
    for (int k = 0; k < n; k++)
        if (!want_shape(c, k, want->ndim, want->shape)) return false;
    return true;
}

// The shapes backend.h's contract relates, per opcode.
static bool shapes_ok(const checker *c) {
    const torc_op *op = c->op;
    const torc_operand *x = op->n_in ? &op->in[0] : &op->out[0], *out = &op->out[0];
    int64_t s[TORC_MAX_DIMS];
    switch (op->code) {
    case TORC_OP_FILL:
    case TORC_OP_RAND_UNIFORM:
    case TORC_OP_RAND_NORMAL:
    case TORC_OP_RAND_INT: return true;
    case TORC_OP_ARANGE: return want_ndim(c, 0, 1, 1);
    case TORC_OP_LINSPACE:
        if (!want_ndim(c, 0, 1, 1)) return false;
        if (out->shape[0] == op->params.range.count) return true;
        snprintf(c->why, c->n, "out has %lld elements but params.range.count is %lld", (long long)out->shape[0],
                 (long long)op->params.range.count);
        return false;
    case TORC_OP_SUM:
    case TORC_OP_MEAN:
    case TORC_OP_PROD:
    case TORC_OP_MAX:
    case TORC_OP_MIN:
    case TORC_OP_ARGMAX:
    case TORC_OP_ARGMIN:
    case TORC_OP_VAR:
    case TORC_OP_STD:
    case TORC_OP_NORM:
    case TORC_OP_LOGSUMEXP: {
        const uint32_t mask = op->params.reduce.mask;
        if (x->ndim < 32 && mask >> x->ndim) {
            snprintf(c->why, c->n, "params.reduce.mask 0x%x names dims past in[0]'s %d", (unsigned)mask, x->ndim);
            return false;
        }
        reduced(x, mask, s);
        return want_shape(c, 1, x->ndim, s);
    }
    case TORC_OP_SOFTMAX:
    case TORC_OP_LOG_SOFTMAX: return want_dim(c, op->params.dim.dim, x->ndim) && want_shape(c, 1, x->ndim, x->shape);
    case TORC_OP_MATMUL:
    case TORC_OP_MATMUL_ROUNDED: {  // in0 (..., M, K) @ in1 (..., K, N) -> out (..., M, N), one batch shape
        const int nd = x->ndim;
        if (!want_ndim(c, 0, 2, TORC_MAX_DIMS) || !want_ndim(c, 1, nd, nd)) return false;
        memcpy(s, x->shape, sizeof s);
        s[nd - 2] = x->shape[nd - 1], s[nd - 1] = op->in[1].shape[nd - 1];
        if (!want_shape(c, 1, nd, s)) return false;
        s[nd - 2] = x->shape[nd - 2];
        return want_shape(c, 2, nd, s);
    }
    case TORC_OP_SCALED_MM: {
        if (!want_ndim(c, 0, 2, 2)) return false;
        const int64_t kn[2] = {x->shape[1], op->in[1].ndim == 2 ? op->in[1].shape[1] : 0};
        if (!want_ndim(c, 1, 2, 2) || !want_shape(c, 1, 2, kn)) return false;
        const int64_t mn[2] = {x->shape[0], kn[1]};
        if (!want_shape(c, op->n_in, 2, mn)) return false;
        for (int k = 2; k < op->n_in; k++)
            if (!want_numel1(c, k)) return false;
        return op->n_out < 2 || want_numel1(c, op->n_in + 1);
    }
    case TORC_OP_INDEX_SELECT:
    case TORC_OP_INDEX_ADD: {
        // INDEX_SELECT: out = in0 with dim's size the index's length; INDEX_ADD: the same of
        // in0 (source) against out (self).
        const bool add = op->code == TORC_OP_INDEX_ADD;
        const torc_operand *self = add ? out : x;
        const int dim = op->params.dim.dim;
        if (!want_dim(c, dim, self->ndim) || !want_ndim(c, 1, 0, 1)) return false;
        memcpy(s, self->shape, sizeof s);
        if (self->ndim > 0) s[dim] = op->in[1].ndim ? op->in[1].shape[0] : 1;
        return want_shape(c, add ? 0 : 2, self->ndim, s);
    }
    case TORC_OP_GATHER:
    case TORC_OP_SCATTER_ADD: {
        // self (GATHER's in0, SCATTER_ADD's out), the index (in1) and the other (GATHER's out,
        // SCATTER_ADD's source in0) have one ndim; the index fits in self off dim and, for a
        // scatter, in the source; GATHER's out has the index's shape.
        const bool scatter = op->code == TORC_OP_SCATTER_ADD;
        const torc_operand *self = scatter ? out : x, *idx = &op->in[1], *src = x;
        const int dim = op->params.dim.dim, nd = self->ndim;
        if (!want_dim(c, dim, nd) || !want_ndim(c, 1, nd, nd) || !want_ndim(c, scatter ? 0 : 2, nd, nd)) return false;
        for (int d = 0; d < nd; d++)
            if ((d != dim && idx->shape[d] > self->shape[d]) || (scatter && idx->shape[d] > src->shape[d]))
                return fail_shape(c, 1, scatter ? "the index must fit in the source, and in out off the dim"
                                                : "the index must fit in in[0] off the dim");
        return scatter || want_shape(c, 2, nd, idx->shape);
    }
    case TORC_OP_MASKED_SELECT: return want_shape(c, 1, x->ndim, x->shape) && want_ndim(c, 2, 1, 1);
    case TORC_OP_MASKED_SCATTER: return want_shape(c, 1, out->ndim, out->shape) && want_ndim(c, 0, 1, 1);
    case TORC_OP_TRIU:
    case TORC_OP_TRIL: return want_ndim(c, 0, 2, TORC_MAX_DIMS) && want_shape(c, 1, x->ndim, x->shape);
    case TORC_OP_LAYER_NORM:
    case TORC_OP_LAYER_NORM_BACKWARD: {
        const bool bwd = op->code == TORC_OP_LAYER_NORM_BACKWARD;
        const torc_operand *xx = bwd ? &op->in[1] : x;
        const int axis = op->params.norm.axis, nd = xx->ndim;
        const uint32_t affine = op->params.norm.affine;
        if (axis < 0 || axis > nd || affine > 3) {
            snprintf(c->why, c->n, "params.norm: axis %d for %d dims, affine %u (0 to 3)", axis, nd, (unsigned)affine);
            return false;
        }
        memcpy(s, xx->shape, sizeof s);
        for (int d = axis; d < nd; d++) s[d] = 1;  // the statistics' shape
        const int64_t *norm = xx->shape + axis;
        int k = bwd ? 4 : 1;  // the first affine input
        for (int b = 0; b < 2; b++)
            if ((affine >> b & 1) && !(bwd && b == 1) && !want_shape(c, k++, nd - axis, norm)) return false;
        if (bwd) {
            if (!want_shape(c, 0, nd, xx->shape) || !want_shape(c, 2, nd, s) || !want_shape(c, 3, nd, s) ||
                !want_shape(c, op->n_in, nd, xx->shape))
                return false;
            for (k = op->n_in + 1; k < op->n_in + op->n_out; k++)
                if (!want_shape(c, k, nd - axis, norm)) return false;
            return true;
        }
        return want_shape(c, op->n_in, nd, xx->shape) && want_shape(c, op->n_in + 1, nd, s) &&
               want_shape(c, op->n_in + 2, nd, s);
    }
    case TORC_OP_ATTENTION:
    case TORC_OP_ATTENTION_BACKWARD: {
        // q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev), o (B, H, L, Ev), lse (B, H, L); the
        // backward's do has o's shape and its dq, dk, dv q's, k's and v's.
        const bool bwd = op->code == TORC_OP_ATTENTION_BACKWARD;
        const int iq = bwd ? 1 : 0, io = bwd ? 4 : op->n_in;  // q's and o's operand numbers
        const torc_operand *q = &op->in[iq], *k = &op->in[iq + 1], *v = &op->in[iq + 2];
        if (op->params.attention.causal != 0 && op->params.attention.causal != 1) {
            snprintf(c->why, c->n, "params.attention.causal is %d (0 or 1)", (int)op->params.attention.causal);
            return false;
        }
        for (int i = 0; i < 3; i++)
            if (!want_ndim(c, iq + i, 4, 4)) return false;
        const int64_t B = q->shape[0], H = q->shape[1], L = q->shape[2], S = k->shape[2];
        const int64_t ks[4] = {B, H, S, q->shape[3]}, vs[4] = {B, H, S, v->shape[3]}, os[4] = {B, H, L, v->shape[3]};
        if (!want_shape(c, iq + 1, 4, ks) || !want_shape(c, iq + 2, 4, vs) || !want_shape(c, io, 4, os) ||
            !want_shape(c, io + 1, 3, os))
            return false;
        return !bwd || (want_shape(c, 0, 4, os) && want_shape(c, 6, 4, q->shape) && want_shape(c, 7, 4, ks) &&
                        want_shape(c, 8, 4, vs));
    }
    case TORC_OP_CROSS_ENTROPY: {
        // logits (N, V), target (N), weight (N) -> loss (N), grad (N, V)
        if (!want_ndim(c, 0, 2, 2)) return false;
        const int64_t n1[1] = {x->shape[0]};
        return want_shape(c, 1, 1, n1) && want_shape(c, 2, 1, n1) && want_shape(c, 3, 1, n1) &&
               want_shape(c, 4, 2, x->shape);
    }
    case TORC_OP_GELU:
    case TORC_OP_GELU_BACKWARD:  // elementwise (dy, x -> dx), params.gelu.approximate 0 or 1
        if (op->params.gelu.approximate != 0 && op->params.gelu.approximate != 1) {
            snprintf(c->why, c->n, "params.gelu.approximate is %d (0 'none' or 1 'tanh')", op->params.gelu.approximate);
            return false;
        }
        return same_shapes(c);
    case TORC_OP_MAX_DIM:
    case TORC_OP_MIN_DIM: {
        const int dim = op->params.dim.dim;
        if (!want_ndim(c, 0, 1, TORC_MAX_DIMS) || !want_dim(c, dim, x->ndim)) return false;  // zero-dim: as (1)
        if (x->shape[dim] == 0) {
            snprintf(c->why, c->n, "dim %d of in[0] is empty", dim);
            return false;
        }
        reduced(x, UINT64_C(1) << dim, s);
        return want_shape(c, 1, x->ndim, s) && want_shape(c, 2, x->ndim, s);
    }
    default: return same_shapes(c);  // elementwise (COPY, unary, binary, WHERE, the fused pointwise ops, ADAM_STEP)
    }
}

// Builds the torc_op of call on dev: the checks every backend relies on the core for.
static torc_status build(torc_device *dev, const torc_op_call *call, const char *fn, torc_op *op) {
    if (!dev) return torc__null_arg("%s: dev is NULL", fn);
    if (!call) return torc__null_arg("%s: call is NULL", fn);
    if ((unsigned)call->code >= TORC_OP_COUNT)
        return torc__error(TORC_ERR_INVALID_ARG, "%s: unknown opcode %d", fn, (int)call->code);
    if (call->code == TORC_OP_ADAM_STEP_LIST || call->code == TORC_OP_NORM_LIST)  // operands behind params.ext
        return torc__error(TORC_ERR_INVALID_ARG, "%s: op '%s' takes a list of ops, not tensors: run its elements "
                           "(torc_adam_step_list_ sends adam_step_list)", fn, torc_op_name(call->code));
    memset(op, 0, sizeof *op);
    op->code = call->code;
    op->params = call->params;
    int in_lo, in_hi, out_lo, out_hi;
    torc_op_counts(op, &in_lo, &in_hi, &out_lo, &out_hi);  // backend.h
    if (call->n_in < in_lo || call->n_in > in_hi || call->n_out < out_lo || call->n_out > out_hi) {
        char ins[16], outs[16];
        snprintf(ins, sizeof ins, in_hi > in_lo ? "%d or %d" : "%d", in_lo, in_hi);
        snprintf(outs, sizeof outs, out_hi > out_lo ? "%d or %d" : "%d", out_lo, out_hi);
        return torc__error(TORC_ERR_INVALID_ARG, "%s: op '%s' takes %s input(s) and %s output(s) here, got %d and %d",
                           fn, torc_op_name(op->code), ins, outs, call->n_in, call->n_out);
    }
    op->n_in = call->n_in, op->n_out = call->n_out;
    for (int k = 0; k < op->n_in + op->n_out; k++) {
        const torc_tensor *t = k < op->n_in ? call->in[k] : call->out[k - op->n_in];
        const char *side = k < op->n_in ? "in" : "out";
        const int i = k < op->n_in ? k : k - op->n_in;
        if (!t) return torc__null_arg("%s: %s[%d] is NULL", fn, side, i);
        if (t->device != dev)
            return torc__error(TORC_ERR_INVALID_ARG, "%s: Expected all tensors to be on the same device, but %s[%d] "
                               "is on %s and the op runs on %s", fn, side, i, torc_device_name(t->device),
                               torc_device_name(dev));
        // an output whose elements share memory (expanded): PyTorch refuses the write, and the
        // contract lets a backend write an output's elements in any order
        if (k >= op->n_in && !torc__check_no_internal_overlap(t)) return torc_last_status();
        torc__operand(t, k < op->n_in ? &op->in[i] : &op->out[i]);
    }
    // CROSS_ENTROPY's grad may be the logits themselves (same strides), never a part of them
    if (op->code == TORC_OP_CROSS_ENTROPY && !torc__check_no_partial_overlap(call->out[1], call->in[0]))
        return torc_last_status();
    const int32_t rd = op->params.matmul.dtype;
    if (op->code == TORC_OP_MATMUL_ROUNDED && rd != TORC_DTYPE_F16 && rd != TORC_DTYPE_BF16)
        return torc__error(TORC_ERR_DTYPE, "%s: op 'matmul_rounded': params.matmul.dtype is %s; it runs in float16 or "
                                           "bfloat16", fn,
                           torc__dtype_valid((torc_dtype)rd) ? torc_dtype_name((torc_dtype)rd) : "not a dtype");
    char why[TORC_SHAPE_STR_MAX + 96];
    checker c = {op, why, sizeof why};
    if (!shapes_ok(&c)) return torc__error(TORC_ERR_SHAPE, "%s: op '%s': %s", fn, torc_op_name(op->code), why);
    return TORC_OK;
}

torc_status torc_run_op(torc_device *dev, const torc_op_call *call, unsigned flags) {
    torc_op op;
    torc_status st = build(dev, call, "torc_run_op", &op);
    if (st) return st;
    if (flags & ~TORC_RUN_NATIVE) return torc__error(TORC_ERR_INVALID_ARG, "torc_run_op: unknown flags 0x%x", flags);
    st = flags & TORC_RUN_NATIVE ? torc__dispatch_native(dev, &op) : torc__dispatch(dev, &op, 0);
    if (st) return st;
    for (int k = 0; k < call->n_out; k++) torc__bump_version(call->out[k]);
    return TORC_OK;
}

torc_status torc_op_supported(torc_device *dev, const torc_op_call *call) {
    torc_op op;
    torc_status st = build(dev, call, "torc_op_supported", &op);
    return st ? st : torc__native_check(dev, &op);
}
