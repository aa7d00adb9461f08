// core/binary.c — elementwise binary ops with broadcasting and PyTorch's type promotion:
// arithmetic, maximum/minimum, floor_divide/remainder/fmod, comparisons, logical ops, their scalar
// and in-place forms, where.
#include <math.h>

#include <torc/convert.h>

#include "torc-impl.h"

static bool is_comparison(torc_opcode c) { return c >= TORC_OP_EQ && c <= TORC_OP_GE; }
static bool is_logical(torc_opcode c) { return c == TORC_OP_LOGICAL_AND || c == TORC_OP_LOGICAL_OR; }
// floor_divide, remainder, fmod: PyTorch's CPU kernels have no bool or fp8 form.
static const char *divmod_kernel(torc_opcode c) {
    switch (c) {
    case TORC_OP_FLOOR_DIVIDE: return "div_floor_cpu";
    case TORC_OP_REMAINDER: return "remainder_cpu";
    case TORC_OP_FMOD: return "fmod_cpu";
    default: return NULL;
    }
}

// True division computes in the common dtype when it is floating, else in the default float dtype.
static torc_dtype div_dtype(torc_dtype common) {
    return torc_dtype_is_floating(common) ? common : torc_get_default_dtype();
}

// The dtype an op writes (out) from the promoted dtype (common); da and db are the operands'
// own dtypes (a scalar's kind for a scalar operand), which PyTorch's refusals look at.

static bool op_dtypes(torc_opcode code, torc_dtype common, torc_dtype da, torc_dtype db, torc_dtype *out) {
    if (is_comparison(code) || is_logical(code)) *out = TORC_DTYPE_BOOL;
    else if (code == TORC_OP_DIV) *out = div_dtype(common);
    else *out = common;
    if (code == TORC_OP_SUB && da == TORC_DTYPE_BOOL && db == TORC_DTYPE_BOOL) {
        torc__error(TORC_ERR_DTYPE, "Subtraction, the `-` operator, with two bool tensors is not supported. "
                                    "Use the `^` or `logical_xor()` operator instead.");
        return false;
    }
    if (code == TORC_OP_SUB && (da == TORC_DTYPE_BOOL || db == TORC_DTYPE_BOOL)) {
        torc__error(TORC_ERR_DTYPE, "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                                    "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
        return false;
    }
    const char *kernel = divmod_kernel(code);
    if (kernel && (common == TORC_DTYPE_BOOL || common == TORC_DTYPE_F8_E4M3FN || common == TORC_DTYPE_F8_E5M2)) {
        torc__error(TORC_ERR_DTYPE, "\"%s\" not implemented for '%s'", kernel, torc__dtype_c10_name(common));
        return false;
    }
    if (code == TORC_OP_POW && common == TORC_DTYPE_BOOL) {
        torc__error(TORC_ERR_DTYPE, "\"pow\" not implemented for 'Bool'");
        return false;
    }
    return true;
}

// PyTorch's mul, div and floor_divide kernels read a one-element right operand of an f16/bf16 op
// at float32 (opmath: mul_kernel, div_true_kernel and div_floor_kernel take
// iter.original_scalar_value<float>, the value before any cast to the op's dtype), so x * 0.1 is
// round_f16((float)x * 0.1f) and f16 0.0003765 * 1e5 is 37.66, not 0.0003765 * inf. Only the
// right operand: 0-dim tensor * f16 rounds to f16 first. remainder and fmod cast it to the dtype.
static bool opmath_operand(torc_opcode code, torc_dtype common, int k, int64_t numel) {
    return (code == TORC_OP_MUL || code == TORC_OP_DIV || code == TORC_OP_FLOOR_DIVIDE) && k == 1 && numel == 1 &&
           (common == TORC_DTYPE_F16 || common == TORC_DTYPE_BF16);
}

// The dtype a kernel must read operand k (0: left, 1: right) of a binary op in, given its
// dtype, ndim and numel (a scalar argument counts as a zero-dim tensor). PyTorch casts every
// input to the op's computation dtype (the common one; the default float for integer true
// division) before computing: a zero-dim tensor or scalar wider than that dtype is cast down
// first (u8 tensor maximum tensor(-5) is 251, f16 tensor == tensor(0.1f) compares f16 values, u8
// / 300 divides by 300.f). A dimensioned operand is always narrower and kernels widen it
// exactly, so it is read as it is; opmath_operand says where a narrow dtype reads wider.
static torc_dtype read_dtype(torc_opcode code, torc_dtype common, int k, torc_dtype dtype, int ndim,
                             int64_t numel) {
    // floor_divide's steps round to the dtype, so even an f16 right operand is read at f32 there
    // (for mul and div, f16 x f16 computed in float and rounded once is the same either way)
    if (code == TORC_OP_FLOOR_DIVIDE && opmath_operand(code, common, k, numel)) return TORC_DTYPE_F32;
    if (dtype == common) return dtype;
    if (opmath_operand(code, common, k, numel)) return TORC_DTYPE_F32;
    if (ndim > 0) return dtype;
    return code == TORC_OP_DIV ? div_dtype(common) : common;
}

// v cast to floating dtype d as c10 casts a double: through float for the narrow formats.
static double round_to_dtype(double v, torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F32: return (float)v;
    case TORC_DTYPE_F16: return torc_f16_to_f32(torc_f32_to_f16((float)v));
    case TORC_DTYPE_BF16: return torc_bf16_to_f32(torc_f32_to_bf16((float)v));
    case TORC_DTYPE_F8_E4M3FN: return torc_f8e4m3fn_to_f32(torc_f32_to_f8e4m3fn((float)v));
    case TORC_DTYPE_F8_E5M2: return torc_f8e5m2_to_f32(torc_f32_to_f8e5m2((float)v));
    default: return v;
    }
}

// Sends out = in0 (op) in1 with alpha (ADD/SUB) to out's backend; common is the dtype the op
// computes in.
static torc_status dispatch_binary(torc_tensor *out, torc_op *op, double alpha, torc_dtype common) {
    // PyTorch casts alpha to the op's dtype (Scalar::to<scalar_t>): for bool that is `alpha != 0`
    // (so True + -1*True is True); a fractional alpha stays as it is for the backend's
    // integral-alpha error; a floating one is rounded as a cast rounds it (through float for f16
    // and bf16: f16 alpha 0.1 is 0.0999755859375), which backend.h's ADD then takes as it is.
    if (out->dtype == TORC_DTYPE_BOOL && alpha == trunc(alpha)) alpha = alpha != 0;
    if (alpha != 1.0 && torc_dtype_is_floating(common)) alpha = round_to_dtype(alpha, common);
    op->params.scalar.value = alpha;
    return torc__dispatch(out->device, op, (uint64_t)torc_numel(out));
}

// Runs out = a (op) b with a and b broadcast to out's shape, each read as read_dtype says (a
// one-element copy where that differs from its own dtype).
static torc_status run_binary(torc_tensor *out, const torc_tensor *a, const torc_tensor *b, torc_opcode code,
                              double alpha, torc_dtype common) {
    const torc_tensor *in[2] = {a, b};
    torc_tensor *cast[2] = {NULL, NULL};
    torc_status st = TORC_OK;
    for (int k = 0; k < 2 && !st; k++) {
        const torc_dtype d = read_dtype(code, common, k, in[k]->dtype, in[k]->ndim, torc_numel(in[k]));
        if (d == in[k]->dtype) continue;
        if (!(cast[k] = torc__copy_as(in[k], d))) st = torc_last_status();
        else in[k] = cast[k];
    }
    torc_op op = {.code = code, .n_in = 2, .n_out = 1};
    torc__operand(out, &op.out[0]);
    if (!st) st = torc__broadcast_operand(in[0], out->ndim, out->shape, &op.in[0]);
    if (!st) st = torc__broadcast_operand(in[1], out->ndim, out->shape, &op.in[1]);
    if (!st) st = dispatch_binary(out, &op, alpha, common);
    torc_release(cast[0]);
    torc_release(cast[1]);
    return st;
}

// a (op) b where the result dtype is already decided (common); a or b may be a scalar tensor
// made by the caller (it then has not taken part in promotion, and never requires grad), and
// da, db are the operands' dtypes before that (a scalar's kind); scalar_b: b is a Python scalar
// (torc_*_scalar), for which remainder and fmod record PyTorch's RemainderBackward0 /
// FmodBackward0 (self: grad, nothing saved) instead of the two-tensor node (backward.c).
static torc_tensor *binary_typed(const torc_tensor *a, const torc_tensor *b, torc_opcode code, double alpha,
                                 torc_dtype common, torc_dtype da, torc_dtype db, bool scalar_b) {
    torc_dtype out_dtype;
    if (!torc__same_device(a, b) || !op_dtypes(code, common, da, db, &out_dtype)) return NULL;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    if (torc__broadcast_shapes(a->ndim, a->shape, b->ndim, b->shape, &ndim, shape)) return NULL;
    torc_tensor *out = torc__new(a->device, out_dtype, ndim, shape);
    if (!out) return NULL;
    if (run_binary(out, a, b, code, alpha, common)) {
        torc_release(out);
        return NULL;
    }
    if (!is_comparison(code) && !is_logical(code)) {
        torc_op_params p = {.scalar = {alpha}};
        const torc_tensor *ins[2] = {a, b};
        if (scalar_b && code == TORC_OP_REMAINDER) out = torc__autograd_unary(out, a, "RemainderBackward0");
        else if (scalar_b && code == TORC_OP_FMOD) out = torc__autograd_unary(out, a, "FmodBackward0");
        else out = torc__autograd_record(out, code, 2, ins, &p);
    }
    return out ? torc__register(out) : NULL;
}

static torc_tensor *binary(const torc_tensor *a, const torc_tensor *b, torc_opcode code, double alpha) {
    if (!a || !b) return TORC_NULL_ARG_FAIL("tensor is NULL");
    const torc_tensor *ts[2] = {a, b};
    torc_dtype common = a->dtype;  // two tensors of one dtype promote to it
    if (a->dtype != b->dtype && torc_result_type(2, ts, 0, NULL, &common)) return NULL;
    return binary_typed(a, b, code, alpha, common, a->dtype, b->dtype, false);
}

// torc_maximum_scalar(t, s) is torch.clamp_min(t, s) (torch.maximum takes tensors only) and
// minimum_scalar clamp_max: a scalar the result dtype cannot hold is PyTorch's error where the
// result would need it (an integer min above the range, max below it; for floating dtypes any
// finite value past the largest), and otherwise changes nothing, so it is clamped into the range.
static bool clamp_scalar_in_range(torc_opcode code, torc_dtype common, torc_scalar *s) {
    const bool is_min = code == TORC_OP_MAXIMUM;
    if (torc_dtype_is_floating(common)) {
        double hi;
        if (torc_finfo(common, NULL, &hi, NULL, NULL)) return false;
        if (isfinite(s->f) && fabs(s->f) > hi) {
            torc__error(TORC_ERR_INVALID_ARG, "value cannot be converted to type %s without overflow",
                        torc__dtype_typemeta_name(common));
            return false;
        }
        return true;
    }
    if (common == TORC_DTYPE_BOOL || s->kind != TORC_DTYPE_I64) return true;  // bool scalars fit every dtype
    int64_t lo, hi;
    if (torc_iinfo(common, &lo, &hi)) return false;
    if (is_min ? s->i > hi : s->i < lo) {
        torc__error(TORC_ERR_INVALID_ARG, "Clamp %s value %lld is outside the representable range of %s",
                    is_min ? "min" : "max", (long long)s->i, torc__dtype_c10_name(common));
        return false;
    }
    if (s->i < lo || s->i > hi) *s = torc_scalar_i(s->i < lo ? lo : hi);
    return true;
}

// tensor (op) scalar: the scalar takes part in promotion as a scalar (it only lifts the
// category), then becomes a zero-dim tensor on a's device in the dtype the kernel reads it in.
static torc_tensor *binary_scalar(const torc_tensor *a, torc_scalar s, torc_opcode code, bool reversed) {
    if (!a) return TORC_NULL_ARG_FAIL("tensor is NULL");
    torc_dtype common;
    if (torc_result_type(1, &a, 1, &s, &common)) return NULL;
    if ((code == TORC_OP_MAXIMUM || code == TORC_OP_MINIMUM) && !clamp_scalar_in_range(code, common, &s)) return NULL;
    torc_tensor *st = torc__scalar_on(a->device, s.f, read_dtype(code, common, reversed ? 0 : 1, s.kind, 0, 1));
    if (!st) return NULL;
    torc_tensor *r = reversed ? binary_typed(st, a, code, 1.0, common, s.kind, a->dtype, false)
                              : binary_typed(a, st, code, 1.0, common, a->dtype, s.kind, true);
    torc_release(st);
    return r;
}

torc_tensor *torc_add(const torc_tensor *a, const torc_tensor *b) { return binary(a, b, TORC_OP_ADD, 1.0); }
torc_tensor *torc_sub(const torc_tensor *a, const torc_tensor *b) { return binary(a, b, TORC_OP_SUB, 1.0); }
// PyTorch's alpha_check and Scalar::to<scalar_t> for add(a, b, alpha=) computing in common: a
// bool alpha only for a bool result, no floating alpha for an integer or bool one, and an alpha
// the dtype cannot hold is an overflow error (an unsigned dtype also takes -max .. -1, which wraps).
static bool alpha_ok(torc_dtype common, torc_scalar alpha) {
    if (alpha.kind == TORC_DTYPE_BOOL && common != TORC_DTYPE_BOOL) {
        torc__error(TORC_ERR_INVALID_ARG, "Boolean alpha only supported for Boolean results.");
        return false;
    }
    if (torc_dtype_is_floating(common)) {
        double hi;
        if (torc_finfo(common, NULL, &hi, NULL, NULL)) return false;
        if (!isfinite(alpha.f) || fabs(alpha.f) <= hi) return true;
        torc__error(TORC_ERR_INVALID_ARG, "value cannot be converted to type %s without overflow",
                    torc__dtype_typemeta_name(common));
        return false;
    }
    if (alpha.kind == TORC_DTYPE_F64) {
        torc__error(TORC_ERR_INVALID_ARG, "For integral input tensors, argument alpha must not be a floating point number.");
        return false;
    }
    if (common == TORC_DTYPE_BOOL || common == TORC_DTYPE_I64) return true;
    int64_t lo, hi;
    if (torc_iinfo(common, &lo, &hi)) return false;
    if (common == TORC_DTYPE_U8) lo = -hi;
    if (alpha.i >= lo && alpha.i <= hi) return true;
    static const char *const names[] = {[TORC_DTYPE_I32] = "int", [TORC_DTYPE_I16] = "int16_t",
                                        [TORC_DTYPE_I8] = "int8_t", [TORC_DTYPE_U8] = "uint8_t"};
    torc__error(TORC_ERR_INVALID_ARG, "value cannot be converted to type %s without overflow",
                (unsigned)common < sizeof names / sizeof names[0] && names[common] ? names[common] : "integer");
    return false;
}

torc_tensor *torc_add_scaled(const torc_tensor *a, const torc_tensor *b, torc_scalar alpha) {
    if (!a || !b) return TORC_NULL_ARG_FAIL("tensor is NULL");
    const torc_tensor *ts[2] = {a, b};
    torc_dtype common = a->dtype;
    if (a->dtype != b->dtype && torc_result_type(2, ts, 0, NULL, &common)) return NULL;
    if (!alpha_ok(common, alpha)) return NULL;
    return binary_typed(a, b, TORC_OP_ADD, alpha.f, common, a->dtype, b->dtype, false);
}

#define BINARY(name, CODE) \
    torc_tensor *torc_##name(const torc_tensor *a, const torc_tensor *b) { return binary(a, b, CODE, 1.0); } \
    torc_tensor *torc_##name##_scalar(const torc_tensor *a, torc_scalar s) { return binary_scalar(a, s, CODE, false); }
BINARY(mul, TORC_OP_MUL)
BINARY(div, TORC_OP_DIV)
BINARY(maximum, TORC_OP_MAXIMUM)
BINARY(minimum, TORC_OP_MINIMUM)
BINARY(eq, TORC_OP_EQ)
BINARY(ne, TORC_OP_NE)
BINARY(lt, TORC_OP_LT)
BINARY(le, TORC_OP_LE)
BINARY(gt, TORC_OP_GT)
BINARY(ge, TORC_OP_GE)
BINARY(floor_divide, TORC_OP_FLOOR_DIVIDE)
BINARY(remainder, TORC_OP_REMAINDER)
BINARY(fmod, TORC_OP_FMOD)

torc_tensor *torc_pow(const torc_tensor *a, const torc_tensor *b) { return binary(a, b, TORC_OP_POW, 1.0); }
torc_tensor *torc_logical_and(const torc_tensor *a, const torc_tensor *b) { return binary(a, b, TORC_OP_LOGICAL_AND, 1.0); }
torc_tensor *torc_logical_or(const torc_tensor *a, const torc_tensor *b) { return binary(a, b, TORC_OP_LOGICAL_OR, 1.0); }
torc_tensor *torc_add_scalar(const torc_tensor *a, torc_scalar s) { return binary_scalar(a, s, TORC_OP_ADD, false); }
torc_tensor *torc_sub_scalar(const torc_tensor *a, torc_scalar s) { return binary_scalar(a, s, TORC_OP_SUB, false); }
torc_tensor *torc_rsub_scalar(const torc_tensor *a, torc_scalar s) { return binary_scalar(a, s, TORC_OP_SUB, true); }
// Python's `s / a` is Tensor.__rdiv__: a.reciprocal() * s (so an integer a gives floats, -2 / u8
// 200 is -0.01, and the grad_fn is MulBackward0).
torc_tensor *torc_rdiv_scalar(const torc_tensor *a, torc_scalar s) {
    if (!a) return TORC_NULL_ARG_FAIL("tensor is NULL");
    torc_scope_push();
    torc_tensor *r = torc_reciprocal(a);
    r = r ? torc_keep(torc_mul_scalar(r, s)) : NULL;
    torc_scope_pop();
    return r;
}

// ---- in place: self = self (op) other, result cast into self's dtype and shape ----
static torc_status binary_(torc_tensor *self, const torc_tensor *other, torc_opcode code, double alpha,
                           torc_dtype common, torc_dtype dother, const char *grad_fn) {
    torc_dtype out_dtype;
    if (!torc__same_device(self, other) || !op_dtypes(code, common, self->dtype, dother, &out_dtype) ||
        !torc__check_can_cast(out_dtype, self->dtype) || !torc__check_inplace_shape(self, other) ||
        !torc__check_no_internal_overlap(self) || !torc__check_no_partial_overlap(self, other))
        return torc_last_status();
    torc_node *rec;
    const torc_op_params p = {.scalar = {alpha}};
    const torc_tensor *ins[2] = {self, other};
    torc_status st = torc__inplace_begin(self, code, 2, ins, &p, grad_fn, &rec);
    if (st) return st;
    st = run_binary(self, self, other, code, alpha, common);
    if (!st) torc__bump_version(self);
    return torc__inplace_end(self, rec, st);
}

// grad_fn: the name the op records under (NULL: the opcode's).
static torc_status binary_named_(torc_tensor *self, const torc_tensor *other, torc_opcode code, double alpha,
                                 const char *grad_fn) {
    if (!self || !other) return torc__null_arg("tensor is NULL");
    const torc_tensor *ts[2] = {self, other};
    torc_dtype common;
    if (torc_result_type(2, ts, 0, NULL, &common)) return torc_last_status();
    return binary_(self, other, code, alpha, common, other->dtype, grad_fn);
}

static torc_status binary_t_(torc_tensor *self, const torc_tensor *other, torc_opcode code, double alpha) {
    return binary_named_(self, other, code, alpha, NULL);
}

static torc_status binary_s_(torc_tensor *self, torc_scalar s, torc_opcode code) {
    if (!self) return torc__null_arg("tensor is NULL");
    const torc_tensor *t = self;
    torc_dtype common;
    if (torc_result_type(1, &t, 1, &s, &common)) return torc_last_status();
    torc_tensor *st = torc__scalar_on(self->device, s.f, read_dtype(code, common, 1, s.kind, 0, 1));
    if (!st) return torc_last_status();
    torc_status r = binary_(self, st, code, 1.0, common, s.kind, NULL);
    torc_release(st);
    return r;
}

torc_status torc_add_(torc_tensor *self, const torc_tensor *other) { return binary_t_(self, other, TORC_OP_ADD, 1.0); }
torc_status torc_add_scaled_(torc_tensor *self, const torc_tensor *other, torc_scalar alpha) {
    if (!self || !other) return torc__null_arg("tensor is NULL");
    const torc_tensor *ts[2] = {self, other};
    torc_dtype common;
    if (torc_result_type(2, ts, 0, NULL, &common)) return torc_last_status();
    if (!alpha_ok(common, alpha)) return torc_last_status();
    return binary_(self, other, TORC_OP_ADD, alpha.f, common, other->dtype, NULL);
}
torc_status torc_sub_(torc_tensor *self, const torc_tensor *other) { return binary_t_(self, other, TORC_OP_SUB, 1.0); }
torc_status torc_mul_(torc_tensor *self, const torc_tensor *other) { return binary_t_(self, other, TORC_OP_MUL, 1.0); }
torc_status torc_div_(torc_tensor *self, const torc_tensor *other) { return binary_t_(self, other, TORC_OP_DIV, 1.0); }
torc_status torc_maximum_(torc_tensor *self, const torc_tensor *other) {
    return binary_t_(self, other, TORC_OP_MAXIMUM, 1.0);
}
torc_status torc_add_scalar_(torc_tensor *self, torc_scalar s) { return binary_s_(self, s, TORC_OP_ADD); }
torc_status torc_sub_scalar_(torc_tensor *self, torc_scalar s) { return binary_s_(self, s, TORC_OP_SUB); }
torc_status torc_mul_scalar_(torc_tensor *self, torc_scalar s) { return binary_s_(self, s, TORC_OP_MUL); }
torc_status torc_div_scalar_(torc_tensor *self, torc_scalar s) { return binary_s_(self, s, TORC_OP_DIV); }

// ---- where ----
torc_tensor *torc_where(const torc_tensor *cond, const torc_tensor *a, const torc_tensor *b) {
    if (!cond || !a || !b) return TORC_NULL_ARG_FAIL("tensor is NULL");
    // PyTorch takes a uint8 condition too (nonzero is true), with a deprecation warning that
    // torc, which never prints, leaves out.
    if (cond->dtype != TORC_DTYPE_BOOL && cond->dtype != TORC_DTYPE_U8)
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "where expected condition to be a boolean tensor, but got a tensor with dtype %s",
                              torc__dtype_c10_name(cond->dtype));
    if (!torc__same_device(cond, a) || !torc__same_device(a, b)) return NULL;
    const torc_tensor *ts[2] = {a, b};
    torc_dtype common;
    if (torc_result_type(2, ts, 0, NULL, &common)) return NULL;
    int n1, n2;
    int64_t s1[TORC_MAX_DIMS], s2[TORC_MAX_DIMS];
    if (torc__broadcast_shapes(cond->ndim, cond->shape, a->ndim, a->shape, &n1, s1) ||
        torc__broadcast_shapes(n1, s1, b->ndim, b->shape, &n2, s2))
        return NULL;
    torc_tensor *out = torc__new(a->device, common, n2, s2);
    if (!out) return NULL;
    torc_op op = {.code = TORC_OP_WHERE, .n_in = 3, .n_out = 1};
    torc__operand(out, &op.out[0]);
    torc_status st = torc__broadcast_operand(cond, n2, s2, &op.in[0]);
    if (!st) st = torc__broadcast_operand(a, n2, s2, &op.in[1]);
    if (!st) st = torc__broadcast_operand(b, n2, s2, &op.in[2]);
    if (!st) st = torc__dispatch(out->device, &op, 0);
    if (st) {
        torc_release(out);
        return NULL;
    }
    const torc_tensor *ins[3] = {cond, a, b};
    out = torc__autograd_record(out, TORC_OP_WHERE, 3, ins, NULL);
    return out ? torc__register(out) : NULL;
}
