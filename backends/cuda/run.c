// backends/cuda/run.c — checks an op descriptor and turns it into a launch: plans from the shared
// headers, compute types, scratch memory, and the memcpy/memset shortcuts.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_impl.h"
#include "kernels.h"

static const char *const OP_NAMES[] = {  // TORC_OP_LIST's names (backend.h)
#define TCU_OP_NAME(ID, name, minor) [TORC_OP_##ID] = name,
    TORC_OP_LIST(TCU_OP_NAME)
#undef TCU_OP_NAME
};

static const char *op_name(int code) {
    return code >= 0 && code < TORC_OP_COUNT ? OP_NAMES[code] : "unknown op";
}

static bool operand_ok(const torc_operand *o, char *why, size_t n, const char *which) {
    if (o->dtype < 0 || o->dtype >= TORC_DTYPE_COUNT) {
        snprintf(why, n, "%s has an invalid dtype %d", which, (int)o->dtype);
        return false;
    }
    if (o->ndim < 0 || o->ndim > TORC_MAX_DIMS) {
        snprintf(why, n, "%s has ndim %d (at most %d)", which, o->ndim, TORC_MAX_DIMS);
        return false;
    }
    for (int d = 0; d < o->ndim; d++)
        if (o->shape[d] < 0 || o->stride[d] < 0) {
            snprintf(why, n, "%s has a negative size or stride in dim %d", which, d);
            return false;
        }
    return true;
}

static bool same_shape(const torc_operand *a, const torc_operand *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

static void ew_args_from(tcu_ew_args *a, const torc_op *op) {
    memset(a, 0, sizeof *a);
    a->op = op->code;
    a->n_in = op->n_in;
    a->dt[0] = op->out[0].dtype;
    a->data[0] = op->out[0].data;
    for (int k = 0; k < op->n_in && k < 3; k++) {
        a->dt[k + 1] = op->in[k].dtype;
        a->data[k + 1] = op->in[k].data;
    }
    switch (op->code) {
    case TORC_OP_FILL: case TORC_OP_POW_SCALAR: case TORC_OP_ADD: case TORC_OP_SUB:
    case TORC_OP_ADDCMUL: case TORC_OP_ADDCDIV: case TORC_OP_LERP:
        a->s0 = op->params.scalar.value;
        break;
    case TORC_OP_ARANGE:
        a->s0 = op->params.range.start;
        a->s1 = op->params.range.step;
        break;
    case TORC_OP_LINSPACE:
        a->s0 = op->params.range.start;
        a->s2 = op->params.range.end;
        a->count = op->params.range.count;
        break;
    case TORC_OP_RAND_UNIFORM: case TORC_OP_RAND_NORMAL: case TORC_OP_RAND_INT:
        a->seed = op->params.rng.seed;
        a->offset = op->params.rng.offset;
        a->s0 = op->params.rng.a;
        a->s1 = op->params.rng.b;
        break;
    case TORC_OP_GELU: case TORC_OP_GELU_BACKWARD:
        a->flag = op->params.gelu.approximate;
        break;
    default:
        break;
    }
}

static bool is_float(torc_dtype d) { return tcu_dtype_is_float(d); }

// The dtype combinations each op takes: the reference backend's (PyTorch's CPU kernels) rules.
static bool dtypes_ok(const torc_op *op) {
    const torc_dtype o = op->out[0].dtype, a = op->in[0].dtype, b = op->in[1].dtype;
    const bool fo = is_float(o);
    switch (op->code) {
    case TORC_OP_ARANGE: case TORC_OP_LINSPACE: return o != TORC_DTYPE_BOOL;
    case TORC_OP_RAND_UNIFORM: case TORC_OP_RAND_NORMAL: return fo;
    case TORC_OP_NEG: case TORC_OP_ABS: case TORC_OP_RELU: return o != TORC_DTYPE_BOOL && a != TORC_DTYPE_BOOL;
    case TORC_OP_SQUARE: case TORC_OP_POW_SCALAR: return o != TORC_DTYPE_BOOL;
    case TORC_OP_SIGN: case TORC_OP_LOGICAL_NOT: return true;
    case TORC_OP_SUB: case TORC_OP_POW:
        return o != TORC_DTYPE_BOOL && !(a == TORC_DTYPE_BOOL && b == TORC_DTYPE_BOOL);
    case TORC_OP_DIV: return fo;
    case TORC_OP_FLOOR_DIVIDE: case TORC_OP_REMAINDER: case TORC_OP_FMOD:  // no bool or fp8 kernels
        return o != TORC_DTYPE_BOOL && !tcu_is_fp8(o) && !tcu_is_fp8(a) && !tcu_is_fp8(b) &&
               !(a == TORC_DTYPE_BOOL && b == TORC_DTYPE_BOOL);
    case TORC_OP_ARGMAX: case TORC_OP_ARGMIN: return o == TORC_DTYPE_I64 && a != TORC_DTYPE_BOOL;
    case TORC_OP_MAX_DIM: case TORC_OP_MIN_DIM: return o == a && op->out[1].dtype == TORC_DTYPE_I64;
    case TORC_OP_MEAN: case TORC_OP_VAR: case TORC_OP_STD: case TORC_OP_NORM: case TORC_OP_LOGSUMEXP:
    case TORC_OP_SOFTMAX: case TORC_OP_LOG_SOFTMAX:
        return fo;
    case TORC_OP_MATMUL:
        if (o == TORC_DTYPE_BOOL || a == TORC_DTYPE_BOOL || b == TORC_DTYPE_BOOL) return false;
        return fo || (!is_float(a) && !is_float(b));
    case TORC_OP_INDEX_SELECT: case TORC_OP_GATHER: case TORC_OP_INDEX_ADD: case TORC_OP_SCATTER_ADD:
        return b == TORC_DTYPE_I64;
    case TORC_OP_MASKED_SELECT: case TORC_OP_MASKED_SCATTER: return b == TORC_DTYPE_BOOL;
    case TORC_OP_ADDCMUL:  // PyTorch's kernels: the floating dtypes but fp8, and integers
        if (o == TORC_DTYPE_BOOL || tcu_is_fp8(o)) return false;
        return true;
    case TORC_OP_ADDCDIV: case TORC_OP_LERP:
        return o == TORC_DTYPE_F64 || o == TORC_DTYPE_F32 || o == TORC_DTYPE_F16 || o == TORC_DTYPE_BF16;
    case TORC_OP_GELU_BACKWARD:  // dy, x and dx of one floating dtype, approximate 0 or 1
        return (o == TORC_DTYPE_F64 || o == TORC_DTYPE_F32 || o == TORC_DTYPE_F16 || o == TORC_DTYPE_BF16) && a == o &&
               b == o && (op->params.gelu.approximate == 0 || op->params.gelu.approximate == 1);
    case TORC_OP_SCALED_MM:
        if (!tcu_is_fp8(a) || !tcu_is_fp8(b) || (a == TORC_DTYPE_F8_E5M2 && b == TORC_DTYPE_F8_E5M2)) return false;
        for (int k = 2; k < op->n_in; k++)
            if (op->in[k].dtype != TORC_DTYPE_F32) return false;  // scale_a, scale_b, scale_out
        if (op->n_out > 1 && op->out[1].dtype != TORC_DTYPE_F32) return false;  // amax
        return o == TORC_DTYPE_F32 || o == TORC_DTYPE_BF16 || o == TORC_DTYPE_F16 || tcu_is_fp8(o);
    default:
        if (op->code >= TORC_OP_SQRT && op->code <= TORC_OP_ERFINV) return fo;  // the floating unary ops
        return true;
    }
}

// ---- layer norm ----
// Rows (M) and row length (N) of x, whose dims from params.norm.axis on are normalized.
static void ln_rows(const torc_op *op, int64_t *M, int64_t *N) {
    const torc_operand *x = &op->in[op->code == TORC_OP_LAYER_NORM_BACKWARD ? 1 : 0];
    *M = 1;
    *N = 1;
    for (int d = 0; d < x->ndim; d++) *(d < op->params.norm.axis ? M : N) *= x->shape[d];
}

static bool dense(const torc_operand *o) {  // row-major contiguous (size-1 dims: any stride)
    int64_t want = 1;
    for (int d = o->ndim - 1; d >= 0; d--) {
        if (o->shape[d] != 1 && o->stride[d] != want) return false;
        want *= o->shape[d];
    }
    return true;
}

static int64_t numel_of(const torc_operand *o) {
    int64_t n = 1;
    for (int d = 0; d < o->ndim; d++) n *= o->shape[d];
    return n;
}

// The contract's counts and dtypes (x f64/f32/f16/bf16 here; weight, bias and their gradients x's
// dtype or f32 for a narrow x; mean, rstd likewise), contiguous operands (the core hands the
// kernels contiguous tensors), and the shapes: x-shaped ones equal, mean/rstd one per row,
// parameters one per normalized element.
static bool ln_supported(const torc_op *op, char *why, size_t n) {
    const bool bw = op->code == TORC_OP_LAYER_NORM_BACKWARD;
    const uint32_t a = op->params.norm.affine;
    const int w = (int)(a & 1);
    if (a & ~3u) {
        snprintf(why, n, "%s: params.norm.affine is %u (bits 1 weight and 2 bias only)", op_name(op->code), a);
        return false;
    }
    for (int i = 0; i < op->n_in + op->n_out; i++)
        if (!operand_ok(i < op->n_in ? &op->in[i] : &op->out[i - op->n_in], why, n, "an operand")) return false;
    const torc_operand *x = &op->in[bw ? 1 : 0];
    const torc_dtype xd = x->dtype;
    const bool narrow = xd == TORC_DTYPE_F16 || xd == TORC_DTYPE_BF16;
    if (op->params.norm.axis < 0 || op->params.norm.axis >= x->ndim ||
        !(narrow || xd == TORC_DTYPE_F32 || xd == TORC_DTYPE_F64)) {
        snprintf(why, n, "%s takes float64, float32, float16 or bfloat16 x with 0 <= axis < ndim", op_name(op->code));
        return false;
    }
    int64_t M, N;
    ln_rows(op, &M, &N);
    const torc_dtype sd = bw ? op->in[2].dtype : op->out[1].dtype;
    const torc_dtype pd = bw ? (w ? op->in[4].dtype : op->n_out > 1 ? op->out[1].dtype : xd)
                             : (op->n_in > 1 ? op->in[1].dtype : xd);
    bool ok = (sd == xd || (narrow && sd == TORC_DTYPE_F32)) && (pd == xd || (narrow && pd == TORC_DTYPE_F32));
    for (int i = 0; ok && i < op->n_in + op->n_out; i++) {
        const torc_operand *t = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        const bool is_stat = bw ? (i == 2 || i == 3) : (i == op->n_in + 1 || i == op->n_in + 2);
        const bool is_x = bw ? (i <= 1 || i == op->n_in) : (i == 0 || i == op->n_in);
        ok = dense(t) && (is_x ? same_shape(t, x) && t->dtype == xd
                               : numel_of(t) == (is_stat ? M : N) && t->dtype == (is_stat ? sd : pd));
    }
    if (!ok) snprintf(why, n, "%s: operands must be contiguous with the contract's shapes and dtypes", op_name(op->code));
    return ok;
}

// ADAM_STEP: out[0..3) param, exp_avg, exp_avg_sq (+ max_exp_avg_sq with amsgrad), in0 grad, all
// dense with one shape and one of the four floating dtypes the kernel takes.
static bool adam_ok(const torc_op *op, char *why, size_t n) {
    const int want = op->n_out;  // 3, or 4 with AMSGRAD (counted by the caller)
    const torc_dtype t = op->out[0].dtype;
    if (t != TORC_DTYPE_F64 && t != TORC_DTYPE_F32 && t != TORC_DTYPE_F16 && t != TORC_DTYPE_BF16) {
        snprintf(why, n, "adam_step does not take dtype %d", (int)t);
        return false;
    }
    for (int k = 0; k <= want; k++) {
        const torc_operand *o = k < want ? &op->out[k] : &op->in[0];
        if (!operand_ok(o, why, n, k < want ? "out" : "in0")) return false;
        if (o->dtype != t || !same_shape(o, &op->out[0])) {
            snprintf(why, n, "adam_step: every operand has param's dtype and shape");
            return false;
        }
        if (!dense(o)) {
            snprintf(why, n, "adam_step on cuda takes contiguous operands only");
            return false;
        }
    }
    return true;
}

// ATTENTION / ATTENTION_BACKWARD: backend.h's shapes and dtypes, T of f32, f16 or bf16 (f64 is
// the reference's), head dims the kernels keep in registers (attention_ops.h), grids in range.
static bool attn_supported(const torc_op *op, char *why, size_t n) {
    const bool bw = op->code == TORC_OP_ATTENTION_BACKWARD;
    const char *name = op_name(op->code);
    for (int i = 0; i < op->n_in + op->n_out; i++)
        if (!operand_ok(i < op->n_in ? &op->in[i] : &op->out[i - op->n_in], why, n, "an operand")) return false;
    const int f = bw ? 1 : 0;
    const torc_operand *q = &op->in[f], *k = &op->in[f + 1], *v = &op->in[f + 2];
    const torc_operand *o = bw ? &op->in[4] : &op->out[0], *lse = bw ? &op->in[5] : &op->out[1];
    const torc_dtype t = q->dtype;
    if (t != TORC_DTYPE_F32 && t != TORC_DTYPE_F16 && t != TORC_DTYPE_BF16) {
        snprintf(why, n, "%s on cuda takes float32, float16 or bfloat16 q, k, v (got dtype %d)", name, (int)t);
        return false;
    }
    for (int i = 0; i < op->n_in + op->n_out; i++) {
        const torc_operand *x = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        if (x->dtype != (x == lse ? TORC_DTYPE_F32 : t)) {
            snprintf(why, n, "%s: every operand has q's dtype but lse, which is float32", name);
            return false;
        }
    }
    bool ok = q->ndim == 4 && k->ndim == 4 && v->ndim == 4 && o->ndim == 4 && lse->ndim == 3;
    for (int d = 0; ok && d < 2; d++)
        ok = k->shape[d] == q->shape[d] && v->shape[d] == q->shape[d] && o->shape[d] == q->shape[d] &&
             lse->shape[d] == q->shape[d];
    ok = ok && k->shape[3] == q->shape[3] && v->shape[2] == k->shape[2] && o->shape[2] == q->shape[2] &&
         o->shape[3] == v->shape[3] && lse->shape[2] == q->shape[2];
    if (ok && bw)
        ok = same_shape(&op->in[0], o) && same_shape(&op->out[0], q) && same_shape(&op->out[1], k) &&
             same_shape(&op->out[2], v);
    if (!ok) {
        snprintf(why, n, "%s: q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev), o (B, H, L, Ev) and lse (B, H, L) "
                 "do not fit", name);
        return false;
    }
    const int64_t E = q->shape[3], Ev = v->shape[3], max_e = bw ? TCU_ATTN_MAX_E_BWD : TCU_ATTN_MAX_E_FWD;
    if (E > max_e || Ev > max_e) {
        snprintf(why, n, "%s on cuda takes head dims up to %lld (got E %lld, Ev %lld)", name, (long long)max_e,
                 (long long)E, (long long)Ev);
        return false;
    }
    const int64_t tiles = TCU_ATTN_TILE * (int64_t)TCU_MAX_BLOCKS;
    if (q->shape[2] > tiles || k->shape[2] > tiles || q->shape[0] * q->shape[1] > INT32_MAX) {
        snprintf(why, n, "%s on cuda takes at most %lld rows and 2^31-1 batch x heads", name, (long long)tiles);
        return false;
    }
    return true;
}

// ADAM_STEP_LIST (ABI 2.6): taken where every element ADAM_STEP is (dense, one dtype), so that
// run() never fails on an element after launching an earlier batch.
static bool adam_list_ok(const torc_op *op, char *why, size_t n) {
    const torc_op_list *l = op->params.ext.data;
    if (!l || !TORC_STRUCT_HAS(l, torc_op_list, ops) || l->n < 1 || !l->ops) {
        snprintf(why, n, "adam_step_list: params.ext.data is not a list of ops");
        return false;
    }
    for (int i = 0; i < l->n; i++) {
        const torc_op *e = &l->ops[i];
        int in_lo, in_hi, out_lo, out_hi;
        torc_op_counts(e, &in_lo, &in_hi, &out_lo, &out_hi);
        if (e->code != TORC_OP_ADAM_STEP || e->n_in != in_lo || e->n_out != out_lo ||
            e->out[0].dtype != l->ops[0].out[0].dtype) {
            snprintf(why, n, "adam_step_list: element %d is not an adam_step of the list's dtype", i);
            return false;
        }
        if (!adam_ok(e, why, n)) return false;
    }
    return true;
}

bool tcu_supports_op(const torc_op *op, int cc, char *why, size_t n) {
    const int code = op->code;
    if (code < 0 || code >= TORC_OP_COUNT) {
        snprintf(why, n, "unknown opcode %d", code);
        return false;
    }
    if (code == TORC_OP_ADAM_STEP_LIST) return adam_list_ok(op, why, n);
    if (code == TORC_OP_NORM_LIST) {  // ABI 2.6: the core sends the elements
        snprintf(why, n, "%s is not taken on cuda: the core sends its elements one by one", op_name(code));
        return false;
    }
    if (code == TORC_OP_CROSS_ENTROPY) {  // ABI 2.5: the core composes it (log_softmax, gather, ...)
        snprintf(why, n, "cross_entropy is not implemented on cuda: the core composes it");
        return false;
    }
    if (code == TORC_OP_MATMUL_ROUNDED) {  // cuBLAS reads its operands as they are: autocast casts (backend.h)
        snprintf(why, n, "matmul_rounded is not taken on cuda: cuBLAS cannot round operands as it reads them");
        return false;
    }
    // The counts of backend.h's contract (scaled_mm's scale_out and amax optional).
    int in_lo, in_hi, out_lo, out_hi;
    torc_op_counts(op, &in_lo, &in_hi, &out_lo, &out_hi);
    if (op->n_in < in_lo || op->n_in > in_hi || op->n_out < out_lo || op->n_out > out_hi) {
        char ins[16], outs[16];
        snprintf(ins, sizeof ins, in_hi > in_lo ? "%d or %d" : "%d", in_lo, in_hi);
        snprintf(outs, sizeof outs, out_hi > out_lo ? "%d or %d" : "%d", out_lo, out_hi);
        snprintf(why, n, "%s takes %s inputs and %s outputs, got %d and %d", op_name(code), ins, outs, op->n_in,
                 op->n_out);
        return false;
    }
    if (code == TORC_OP_LAYER_NORM || code == TORC_OP_LAYER_NORM_BACKWARD) return ln_supported(op, why, n);
    if (code == TORC_OP_ADAM_STEP) return adam_ok(op, why, n);
    if (code == TORC_OP_ATTENTION || code == TORC_OP_ATTENTION_BACKWARD) return attn_supported(op, why, n);
    if (!operand_ok(&op->out[0], why, n, "out")) return false;
    if (op->n_out > 1 && !operand_ok(&op->out[1], why, n, "out1")) return false;
    for (int k = 0; k < op->n_in; k++) {
        char which[16];
        snprintf(which, sizeof which, "in%d", k);
        if (!operand_ok(&op->in[k], why, n, which)) return false;
    }
    if (!dtypes_ok(op)) {
        snprintf(why, n, "%s does not take these dtypes (out %d, in0 %d)", op_name(code), (int)op->out[0].dtype,
                 op->n_in > 0 ? (int)op->in[0].dtype : -1);
        return false;
    }
    if (tcu_op_is_elementwise(code)) {
        for (int k = 0; k < op->n_in; k++)
            if (!same_shape(&op->in[k], &op->out[0])) {
                snprintf(why, n, "%s: input %d is not broadcast to the output's shape", op_name(code), k);
                return false;
            }
        if ((code == TORC_OP_ARANGE || code == TORC_OP_LINSPACE) && op->out[0].ndim != 1) {
            snprintf(why, n, "%s writes a 1-D output", op_name(code));
            return false;
        }
        tcu_ew_args a;
        ew_args_from(&a, op);
        if (!tcu_ew_choose_types(&a)) {
            snprintf(why, n, "%s has no integer form (out dtype %d); the output must be floating",
                     op_name(code), (int)op->out[0].dtype);
            return false;
        }
        return true;
    }
    if (tcu_op_is_reduction(code)) {
        const torc_operand *in = &op->in[0], *out = &op->out[0];
        if (in->ndim != out->ndim) {
            snprintf(why, n, "%s: out must keep in's ndim (reduced dims of size 1)", op_name(code));
            return false;
        }
        for (int d = 0; d < in->ndim; d++) {
            const bool red = (op->params.reduce.mask >> d) & 1;
            if (out->shape[d] != (red ? 1 : in->shape[d])) {
                snprintf(why, n, "%s: out's dim %d must be %s", op_name(code), d, red ? "1 (reduced)" : "in's size");
                return false;
            }
        }
        if (op->params.reduce.mask >> in->ndim) {
            snprintf(why, n, "%s: reduce mask names dims beyond ndim %d", op_name(code), in->ndim);
            return false;
        }
        return true;
    }
    if (code == TORC_OP_MAX_DIM || code == TORC_OP_MIN_DIM) {  // in0 (ndim >= 1) -> values, indices: in0's shape with dim of size 1
        const torc_operand *in = &op->in[0];
        const int dim = op->params.dim.dim;
        bool ok = in->ndim >= 1 && dim >= 0 && dim < in->ndim;
        for (int k = 0; k < 2 && ok; k++) {
            ok = op->out[k].ndim == in->ndim;
            for (int d = 0; d < in->ndim && ok; d++) ok = op->out[k].shape[d] == (d == dim ? 1 : in->shape[d]);
        }
        if (!ok) snprintf(why, n, "%s: dim must be in [0, ndim) and both outputs in0's shape with dim of size 1",
                          op_name(code));
        return ok;
    }
    if (code == TORC_OP_SOFTMAX || code == TORC_OP_LOG_SOFTMAX) {
        const int nd = op->out[0].ndim > 0 ? op->out[0].ndim : 1;   // a 0-dim tensor is one row of one
        if (!same_shape(&op->in[0], &op->out[0]) || op->params.dim.dim < 0 || op->params.dim.dim >= nd) {
            snprintf(why, n, "%s: out must match in and dim be in [0, %d)", op_name(code), nd);
            return false;
        }
        if (!is_float(op->out[0].dtype)) {
            snprintf(why, n, "%s writes a floating output", op_name(code));
            return false;
        }
        return true;
    }
    if (code == TORC_OP_MATMUL) {
        const torc_operand *a = &op->in[0], *b = &op->in[1], *c = &op->out[0];
        const int nd = c->ndim;
        bool ok = nd >= 2 && a->ndim == nd && b->ndim == nd && a->shape[nd - 1] == b->shape[nd - 2] &&
                  a->shape[nd - 2] == c->shape[nd - 2] && b->shape[nd - 1] == c->shape[nd - 1];
        for (int d = 0; ok && d < nd - 2; d++) ok = a->shape[d] == c->shape[d] && b->shape[d] == c->shape[d];
        if (!ok) {
            snprintf(why, n, "matmul: operands must be (..., M, K) @ (..., K, N) -> (..., M, N) with equal batch dims");
            return false;
        }
        return true;
    }
    if (code == TORC_OP_SCALED_MM) {
        const torc_operand *a = &op->in[0], *b = &op->in[1], *c = &op->out[0];
        int64_t n2 = 1, n3 = 1;
        for (int d = 0; d < op->in[2].ndim; d++) n2 *= op->in[2].shape[d];
        for (int d = 0; d < op->in[3].ndim; d++) n3 *= op->in[3].shape[d];
        for (int k = 4; k < op->n_in; k++)
            for (int d = 0; d < op->in[k].ndim; d++) n3 *= op->in[k].shape[d];
        for (int k = 1; k < op->n_out; k++)
            for (int d = 0; d < op->out[k].ndim; d++) n3 *= op->out[k].shape[d];
        if (a->ndim != 2 || b->ndim != 2 || c->ndim != 2 || a->shape[1] != b->shape[0] ||
            c->shape[0] != a->shape[0] || c->shape[1] != b->shape[1] || n2 != 1 || n3 != 1) {
            snprintf(why, n, "_scaled_mm: operands must be (M, K) @ (K, N) -> (M, N) with one-element scales");
            return false;
        }
        if (cc < 89) {  // as PyTorch's _scaled_mm: no fp8 matmul below Ada (sm_89) or Hopper
            snprintf(why, n,
                     "_scaled_mm: fp8 matmul needs compute capability 8.9 or newer (this device is %d.%d); "
                     "fp8 matmuls need an Ada (sm_89) or Hopper (sm_90) GPU", cc / 10, cc % 10);
            return false;
        }
        return true;
    }
    if (tcu_op_is_index(code)) {
        tcu_index_args x;
        if (!tcu_index_plan_build(&x, op)) {
            snprintf(why, n, "%s: operand ranks, dim or index dtype do not fit the op", op_name(code));
            return false;
        }
        if (code == TORC_OP_INDEX_ADD && is_float(op->out[0].dtype) && x.it.numel > 0) {
            const torc_operand ix = tcu_as_1d(&op->in[1]);
            if (ix.shape[0] > INT32_MAX) {  // the sort's item count (index_add.cu)
                snprintf(why, n, "index_add on cuda takes at most %d index entries into a floating tensor, got %lld",
                         INT32_MAX, (long long)ix.shape[0]);
                return false;
            }
        }
        return true;
    }
    snprintf(why, n, "%s is not implemented", op_name(code));
    return false;
}

// ---- argument checks the reference makes (same texts), done on the host before any launch ----
static bool int_mode(const torc_op *op) {
    if (is_float(op->out[0].dtype)) return false;
    for (int k = 0; k < op->n_in; k++)
        if (is_float(op->in[k].dtype)) return false;
    return true;
}

static bool integral(double v) { return v == trunc(v) && fabs(v) < 0x1p63; }

static int check_params(const torc_op *op) {
    const torc_op_params *p = &op->params;
    switch (op->code) {
    case TORC_OP_ARANGE:
        if (!isfinite(p->range.start) || !isfinite(p->range.step))
            return tcu_error(TORC_ERR_INVALID_ARG, "unsupported range: %g -> %g", p->range.start, p->range.end);
        return TORC_OK;
    case TORC_OP_LINSPACE:
        if (p->range.count != op->out[0].shape[0])
            return tcu_error(TORC_ERR_SHAPE, "cuda: linspace: range.count is %lld but out has %lld elements",
                             (long long)p->range.count, (long long)op->out[0].shape[0]);
        return TORC_OK;
    case TORC_OP_RAND_INT:
        if (!(p->rng.a < p->rng.b))
            return tcu_error(TORC_ERR_INVALID_ARG,
                             "random_ expects 'from' to be less than 'to', but got from=%.0f >= to=%.0f", p->rng.a, p->rng.b);
        if (!(p->rng.a >= -0x1p63 && p->rng.b <= 0x1p63) || p->rng.a != trunc(p->rng.a) || p->rng.b != trunc(p->rng.b))
            return tcu_error(TORC_ERR_INVALID_ARG, "cuda: randint bounds must be integers, got [%g, %g)", p->rng.a, p->rng.b);
        return TORC_OK;
    case TORC_OP_RAND_NORMAL:
        if (!(p->rng.b >= 0.0))
            return tcu_error(TORC_ERR_INVALID_ARG, "normal expects std >= 0.0, but found std %g", p->rng.b);
        return TORC_OK;
    case TORC_OP_ADD: case TORC_OP_SUB:
        if (int_mode(op) && !integral(p->scalar.value))
            return tcu_error(TORC_ERR_INVALID_ARG,
                             "For integral input tensors, argument alpha must not be a floating point number.");
        return TORC_OK;
    case TORC_OP_ADDCMUL:
        if (int_mode(op) && !(fabs(p->scalar.value) < 0x1p63))
            return tcu_error(TORC_ERR_INVALID_ARG, "cuda: addcmul: value %g does not fit int64", p->scalar.value);
        return TORC_OK;
    case TORC_OP_POW_SCALAR:
        if (int_mode(op)) {
            if (!integral(p->scalar.value))
                return tcu_error(TORC_ERR_INVALID_ARG, "cuda: pow: an integer out needs an integral exponent, got %g "
                                 "(the frontend promotes to floating)", p->scalar.value);
            if (p->scalar.value < 0) return tcu_error(TORC_ERR_INVALID_ARG, "Integers to negative integer powers are not allowed.");
        }
        return TORC_OK;
    case TORC_OP_MAX_DIM: case TORC_OP_MIN_DIM: {
        const torc_operand *in = &op->in[0];
        int64_t out_numel = 1;
        for (int d = 0; d < op->out[0].ndim; d++) out_numel *= op->out[0].shape[d];
        if (in->shape[p->dim.dim] == 0 && out_numel > 0)
            return tcu_error(TORC_ERR_INDEX, "%s(): Expected reduction dim %d to have non-zero size.",
                             op->code == TORC_OP_MAX_DIM ? "max" : "min", p->dim.dim);
        return TORC_OK;
    }
    default:
        break;
    }
    if (tcu_op_is_reduction(op->code)) {
        const torc_operand *in = &op->in[0];
        int64_t count = 1, out_numel = 1;
        int empty_dim = -1;
        for (int d = 0; d < in->ndim; d++) {
            if ((p->reduce.mask >> d) & 1) {
                count *= in->shape[d];
                if (in->shape[d] == 0 && empty_dim < 0) empty_dim = d;
            } else {
                out_numel *= in->shape[d];
            }
        }
        if (count > 0 || out_numel == 0) return TORC_OK;
        switch (op->code) {
        case TORC_OP_MAX: case TORC_OP_MIN: case TORC_OP_ARGMAX: case TORC_OP_ARGMIN:
            return tcu_error(TORC_ERR_INDEX, "%s(): Expected reduction dim %d to have non-zero size.",
                             op->code == TORC_OP_MAX ? "amax" : op->code == TORC_OP_MIN ? "amin" : op_name(op->code),
                             empty_dim);
        case TORC_OP_NORM:
            if (p->reduce.p < 0.0 || isinf(p->reduce.p))
                return tcu_error(TORC_ERR_RUNTIME, "linalg.vector_norm cannot compute the %g norm on the dimension %d "
                                 "because this dimension is empty and the operation does not have an identity",
                                 p->reduce.p, empty_dim);
            return TORC_OK;
        default:
            return TORC_OK;
        }
    }
    return TORC_OK;
}

// ---- launches ----
static int launched(int rc, const char *what) {
    return rc == 0 ? TORC_OK : tcu_cuda_error((cudaError_t)rc, what);
}

static bool contiguous_run(const tcu_iter *it) {
    for (int k = 0; k < it->nops; k++)
        if (it->stride[k][TCU_D - 1] != 1) return false;
    return it->ndim == 1;
}

static int run_elementwise(tcu_device *d, const torc_op *op) {
    tcu_ew_args a;
    ew_args_from(&a, op);
    tcu_ew_choose_types(&a);
    a.err = d->err_word;  // integer division by zero
    const int64_t *strides[TCU_MAX_OPS] = {op->out[0].stride};
    for (int k = 0; k < op->n_in; k++) strides[k + 1] = op->in[k].stride;
    tcu_iter it;
    if (!tcu_iter_build(&it, op->out[0].ndim, op->out[0].shape, op->n_in + 1, strides, 0))
        return tcu_error(TORC_ERR_INVALID_ARG, "%s: bad operands", op_name(op->code));
    if (it.numel == 0) return TORC_OK;
    const size_t esize = (size_t)torc_abi_dtype_size(op->out[0].dtype);
    // Shortcuts: a same-dtype contiguous copy is a memcpy, a zero fill a memset.
    if (op->code == TORC_OP_COPY && op->in[0].dtype == op->out[0].dtype && contiguous_run(&it))
        return launched(tcu_launch_copy_bytes(op->out[0].data, op->in[0].data, (size_t)it.numel * esize, d->stream),
                        "copy (cudaMemcpyAsync)");
    if (op->code == TORC_OP_FILL && op->params.scalar.value == 0.0 && !signbit(op->params.scalar.value) &&
        contiguous_run(&it))
        return launched(tcu_launch_zero_bytes(op->out[0].data, (size_t)it.numel * esize, d->stream),
                        "fill (cudaMemsetAsync)");
    return launched(tcu_launch_ew(&a, &it, d->sm_count, d->stream), op_name(op->code));
}

int tcu_fill_zero(tcu_device *d, const torc_operand *out) {
    torc_op f;
    memset(&f, 0, sizeof f);
    f.code = TORC_OP_FILL;
    f.n_in = 0, f.n_out = 1;
    f.out[0] = *out;
    f.params.scalar.value = 0.0;
    return run_elementwise(d, &f);
}

// A reduction over mask into out; MAX_DIM / MIN_DIM run as ARGMAX / ARGMIN over their dim into the
// indices, with the element at each index copied into the values.
static int run_reduce(tcu_device *d, const torc_op *op) {
    const bool pair = op->code == TORC_OP_MAX_DIM || op->code == TORC_OP_MIN_DIM;
    const torc_operand *out = &op->out[pair ? 1 : 0], *values = pair ? &op->out[0] : NULL;
    const uint32_t mask = pair ? 1u << op->params.dim.dim : op->params.reduce.mask;
    tcu_reduce_plan pl;
    if (!tcu_reduce_plan_build(&pl, &op->in[0], out, values, mask, d->sm_count))
        return tcu_error(TORC_ERR_INVALID_ARG, "%s: bad operands", op_name(op->code));
    if (pl.n_out == 0) return TORC_OK;
    tcu_reduce_args a;
    memset(&a, 0, sizeof a);
    a.op = !pair ? op->code : op->code == TORC_OP_MAX_DIM ? TORC_OP_ARGMAX : TORC_OP_ARGMIN;
    a.ct = tcu_reduce_ctype(a.op, op->in[0].dtype, out->dtype);
    a.in_dt = op->in[0].dtype;
    a.out_dt = out->dtype;
    a.in = op->in[0].data;
    a.out = out->data;
    a.values = values ? values->data : NULL;
    if (!pair) a.p = op->params.reduce.p, a.correction = op->params.reduce.correction;
    a.n_red = pl.n_red;
    if (pl.split > 1) {
        a.partial = tcu_scratch(d, (size_t)pl.n_out * (size_t)pl.split * TCU_ACC_BYTES);
        if (!a.partial) return TORC_ERR_OOM;
    }
    const int rc = tcu_launch_reduce(&a, &pl, d->stream);
    // Stream order makes the scratch safe to hand out again right away.
    if (a.partial) tcu_scratch_free(d, a.partial);
    return launched(rc, op_name(op->code));
}

static int run_softmax(tcu_device *d, const torc_op *op) {
    tcu_rows_plan pl;
    if (!tcu_rows_plan_build(&pl, &op->in[0], &op->out[0], op->params.dim.dim))
        return tcu_error(TORC_ERR_INVALID_ARG, "%s: bad operands", op_name(op->code));
    const torc_dtype in = op->in[0].dtype, out = op->out[0].dtype;
    const tcu_ctype ct = (!is_float(in) || in == TORC_DTYPE_F64 || out == TORC_DTYPE_F64) ? TCU_CT_F64 : TCU_CT_F32;
    return launched(tcu_launch_softmax(op->code, ct, in, out, op->in[0].data, op->out[0].data, &pl, d->stream),
                    op_name(op->code));
}

static int run_index(tcu_device *d, const torc_op *op) {
    tcu_index_args x;
    if (!tcu_index_plan_build(&x, op))
        return tcu_error(TORC_ERR_INVALID_ARG, "%s: bad operands", op_name(op->code));
    x.err = d->err_word;
    if (op->code == TORC_OP_INDEX_ADD && is_float(op->out[0].dtype)) {  // sorted, in index order (index_ops.h)
        tcu_index_add_args a;
        if (!tcu_index_add_plan_build(&a, op))
            return tcu_error(TORC_ERR_INVALID_ARG, "%s: bad operands", op_name(op->code));
        a.err = d->err_word;
        if (a.n_idx == 0 || a.cols.numel == 0) return TORC_OK;
        const size_t bytes = tcu_index_add_scratch_bytes(&a);
        void *scratch = tcu_scratch(d, bytes);
        if (!scratch) return TORC_ERR_OOM;
        const int rc = tcu_launch_index_add(&a, scratch, bytes, d->sm_count, d->stream);
        tcu_scratch_free(d, scratch);
        return launched(rc, op_name(op->code));
    }
    if (op->code == TORC_OP_MASKED_SELECT || op->code == TORC_OP_MASKED_SCATTER) {
        if (x.it.numel == 0) return TORC_OK;
        void *scratch = tcu_scratch(d, tcu_masked_scratch_bytes(x.it.numel));
        if (!scratch) return TORC_ERR_OOM;
        const int rc = tcu_launch_masked(&x, scratch, d->stream);
        tcu_scratch_free(d, scratch);
        return launched(rc, op_name(op->code));
    }
    return launched(tcu_launch_index(&x, d->sm_count, d->stream), op_name(op->code));
}

static int run_layer_norm(tcu_device *d, const torc_op *op) {
    tcu_ln_args a;
    memset(&a, 0, sizeof a);
    const uint32_t af = op->params.norm.affine;
    a.backward = op->code == TORC_OP_LAYER_NORM_BACKWARD;
    ln_rows(op, &a.rows, &a.n);
    a.eps = (float)op->params.norm.eps;
    if (!a.backward) {
        a.x = op->in[0].data;
        a.w = af & 1 ? op->in[1].data : NULL;
        a.b = af & 2 ? op->in[1 + (af & 1)].data : NULL;
        a.y = op->out[0].data;
        a.mean = op->out[1].data;
        a.rstd = op->out[2].data;
        a.x_dt = op->in[0].dtype;
        a.s_dt = op->out[1].dtype;
        a.p_dt = op->n_in > 1 ? op->in[1].dtype : a.x_dt;
    } else {
        a.dy = op->in[0].data;
        a.x = op->in[1].data;
        a.mean = op->in[2].data;
        a.rstd = op->in[3].data;
        a.w = af & 1 ? op->in[4].data : NULL;
        a.dx = op->out[0].data;
        a.dw = af & 1 ? op->out[1].data : NULL;
        a.db = af & 2 ? op->out[1 + (af & 1)].data : NULL;
        a.x_dt = op->in[1].dtype;
        a.s_dt = op->in[2].dtype;
        a.p_dt = op->n_out > 1 ? op->out[1].dtype : a.x_dt;
        if (a.rows == 0)  // no rows: dweight and dbias are zeros
            for (int k = 1; k < op->n_out; k++) {
                const int rc = tcu_fill_zero(d, &op->out[k]);
                if (rc) return rc;
            }
    }
    return launched(tcu_launch_layer_norm(&a, d->sm_count, d->stream), op_name(op->code));
}

// The flags and the raw scalars; adam_body.h rounds the scalars as the reference does.
static void adam_args_of(const torc_op *op, tcu_adam_args *a) {
    const uint32_t flags = op->params.adam.flags;
    memset(a, 0, sizeof *a);
    a->param = op->out[0].data;
    a->exp_avg = op->out[1].data;
    a->exp_avg_sq = op->out[2].data;
    a->amsgrad = flags & TORC_ADAM_AMSGRAD;
    a->max_exp_avg_sq = a->amsgrad ? op->out[3].data : NULL;
    a->grad = op->in[0].data;
    a->dtype = op->out[0].dtype;
    a->maximize = flags & TORC_ADAM_MAXIMIZE;
    a->lr = op->params.adam.lr;
    a->beta1 = op->params.adam.beta1;
    a->beta2 = op->params.adam.beta2;
    a->eps = op->params.adam.eps;
    a->wd = op->params.adam.weight_decay;
    a->step_size = op->params.adam.step_size;
    a->bc2_sqrt = op->params.adam.bc2_sqrt;
    a->decoupled = (flags & TORC_ADAM_DECOUPLED) && a->wd != 0.0;
    a->l2 = !(flags & TORC_ADAM_DECOUPLED) && a->wd != 0.0;
}

static int run_adam(tcu_device *d, const torc_op *op) {
    tcu_adam_args a;
    adam_args_of(op, &a);
    return launched(tcu_launch_adam(&a, numel_of(&op->out[0]), d->sm_count, d->stream), op_name(op->code));
}

// ADAM_STEP_LIST (supports() took every element): TCU_ADAM_LIST_MAX parameters a launch.
static int run_adam_list(tcu_device *d, const torc_op *op) {
    const torc_op_list *l = op->params.ext.data;
    tcu_adam_list_args b;
    for (int i0 = 0; i0 < l->n; i0 += TCU_ADAM_LIST_MAX) {
        b.n = l->n - i0 < TCU_ADAM_LIST_MAX ? l->n - i0 : TCU_ADAM_LIST_MAX;
        for (int t = 0; t < b.n; t++) {
            adam_args_of(&l->ops[i0 + t], &b.a[t]);
            b.numel[t] = numel_of(&l->ops[i0 + t].out[0]);
        }
        const int rc = launched(tcu_launch_adam_list(&b, d->sm_count, d->stream), op_name(op->code));
        if (rc) return rc;
    }
    return TORC_OK;
}

static int run_attention(tcu_device *d, const torc_op *op) {
    tcu_attn_args a;
    tcu_attn_args_from(&a, op);
    if (a.backward && a.B * a.H * a.L > 0) {
        a.delta = tcu_scratch(d, sizeof(float) * (size_t)(a.B * a.H * a.L));
        if (!a.delta) return TORC_ERR_OOM;
    }
    const int rc = tcu_launch_attention(&a, d->sm_count, d->stream);
    if (a.delta) tcu_scratch_free(d, a.delta);  // stream order: safe to hand out again
    return launched(rc, op_name(op->code));
}

int tcu_run_op(tcu_device *d, const torc_op *op) {
    const int code = op->code;
    const int rc = check_params(op);
    if (rc != TORC_OK) return rc;
    if (tcu_op_is_elementwise(code)) return run_elementwise(d, op);
    if (tcu_op_is_reduction(code) || code == TORC_OP_MAX_DIM || code == TORC_OP_MIN_DIM) return run_reduce(d, op);
    if (code == TORC_OP_SOFTMAX || code == TORC_OP_LOG_SOFTMAX) return run_softmax(d, op);
    if (code == TORC_OP_MATMUL) return tcu_matmul(d, op);
    if (code == TORC_OP_SCALED_MM) return tcu_scaled_mm(d, op);
    if (tcu_op_is_index(code)) return run_index(d, op);
    if (code == TORC_OP_LAYER_NORM || code == TORC_OP_LAYER_NORM_BACKWARD) return run_layer_norm(d, op);
    if (code == TORC_OP_ADAM_STEP) return run_adam(d, op);
    if (code == TORC_OP_ADAM_STEP_LIST) return run_adam_list(d, op);
    if (code == TORC_OP_ATTENTION || code == TORC_OP_ATTENTION_BACKWARD) return run_attention(d, op);
    return tcu_error(TORC_ERR_NOT_SUPPORTED, "cuda: %s is not implemented", op_name(code));
}
