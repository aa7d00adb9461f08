// core/binary.c — elementwise binary ops with broadcasting and PyTorch's type promotion:
// arithmetic, maximum/minimum, comparisons, logical ops, their scalar and in-place forms, where.
#include <math.h>

#include "torc-impl.h"

static bool is_comparison(torc_opcode c) { return c >= TORC_OP_EQ && c <= TORC_OP_GE; }
static bool is_logical(torc_opcode c) { return c == TORC_OP_LOGICAL_AND || c == TORC_OP_LOGICAL_OR; }

// The dtype an op writes (out) from the promoted dtype (common); da and db are the operands'
// own dtypes (a scalar's kind for a scalar operand), which PyTorch's refusals look at.
static bool op_dtypes(torc_opcode code, torc_dtype common, torc_dtype da, torc_dtype db, torc_dtype *out) {
    if (is_comparison(code) || is_logical(code)) *out = TORC_DTYPE_BOOL;
    else if (code == TORC_OP_DIV && !torc_dtype_is_floating(common)) *out = torc_get_default_dtype();
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
    if (code == TORC_OP_POW && common == TORC_DTYPE_BOOL) {
        torc__error(TORC_ERR_DTYPE, "\"pow\" not implemented for 'Bool'");
        return false;
    }
    return true;
}

// Runs out = a (op) b with a and b broadcast to out's shape.
static torc_status run_binary(torc_tensor *out, const torc_tensor *a, const torc_tensor *b, torc_opcode code,
                              double alpha) {
    torc_op op = {.code = code, .n_in = 2};
    torc__operand(out, &op.out);
    torc_status st = torc__broadcast_operand(a, out->ndim, out->shape, &op.in[0]);
    if (!st) st = torc__broadcast_operand(b, out->ndim, out->shape, &op.in[1]);
    if (st) return st;
    // PyTorch casts alpha to the op's dtype: for bool that is `alpha != 0` (so True + -1*True is
    // True); a fractional alpha stays as it is for the backend's integral-alpha error.
    if (out->dtype == TORC_DTYPE_BOOL && alpha == trunc(alpha)) alpha = alpha != 0;
    op.params.scalar.value = alpha;
    return torc__dispatch(out->device, &op, (uint64_t)torc_numel(out));
}

// a (op) b where the result dtype is already decided (common); a or b may be a scalar tensor
// made by the caller (it then has not taken part in promotion, and never requires grad), and
// da, db are the operands' dtypes before that (a scalar's kind).
static torc_tensor *binary_typed(const torc_tensor *a, const torc_tensor *b, torc_opcode code, double alpha,
                                 torc_dtype common, torc_dtype da, torc_dtype db) {
    torc_dtype out_dtype;
    if (!torc__same_device(a, b) || !op_dtypes(code, common, da, db, &out_dtype)) return NULL;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    if (torc__broadcast_shapes(a->ndim, a->shape, b->ndim, b->shape, &ndim, shape)) return NULL;
    torc_tensor *out = torc__new(a->device, out_dtype, ndim, shape);
    if (!out) return NULL;
    if (run_binary(out, a, b, code, alpha)) {
        torc_release(out);
        return NULL;
    }
    if (!is_comparison(code) && !is_logical(code)) {
        torc_op_params p = {.scalar = {alpha}};
        const torc_tensor *ins[2] = {a, b};
        out = torc__autograd_record(out, code, 2, ins, &p);
    }
    return out ? torc__register(out) : NULL;
}

static torc_tensor *binary(const torc_tensor *a, const torc_tensor *b, torc_opcode code, double alpha) {
    if (!a || !b) return TORC_NULL_ARG_FAIL("tensor is NULL");
    const torc_tensor *ts[2] = {a, b};
    torc_dtype common = a->dtype;  // two tensors of one dtype promote to it
    if (a->dtype != b->dtype && torc_result_type(2, ts, 0, NULL, &common)) return NULL;
    return binary_typed(a, b, code, alpha, common, a->dtype, b->dtype);
}

// tensor (op) scalar: the scalar takes part in promotion as a scalar (it only lifts the
// category), then becomes a zero-dim tensor of the common dtype on a's device.
static torc_tensor *binary_scalar(const torc_tensor *a, torc_scalar s, torc_opcode code, bool reversed) {
    if (!a) return TORC_NULL_ARG_FAIL("tensor is NULL");
    torc_dtype common;
    if (torc_result_type(1, &a, 1, &s, &common)) return NULL;
    // Comparisons compare in the common dtype; arithmetic computes in it.
    torc_tensor *st = torc__scalar_on(a->device, s.f, common);
    if (!st) return NULL;
    torc_tensor *r = reversed ? binary_typed(st, a, code, 1.0, common, s.kind, a->dtype)
                              : binary_typed(a, st, code, 1.0, common, a->dtype, s.kind);
    torc_release(st);
    return r;
}

torc_tensor *torc_add(const torc_tensor *a, const torc_tensor *b) { return binary(a, b, TORC_OP_ADD, 1.0); }
torc_tensor *torc_sub(const torc_tensor *a, const torc_tensor *b) { return binary(a, b, TORC_OP_SUB, 1.0); }
torc_tensor *torc_add_scaled(const torc_tensor *a, const torc_tensor *b, torc_scalar alpha) {
    return binary(a, b, TORC_OP_ADD, alpha.f);
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

torc_tensor *torc_pow(const torc_tensor *a, const torc_tensor *b) { return binary(a, b, TORC_OP_POW, 1.0); }
torc_tensor *torc_logical_and(const torc_tensor *a, const torc_tensor *b) { return binary(a, b, TORC_OP_LOGICAL_AND, 1.0); }
torc_tensor *torc_logical_or(const torc_tensor *a, const torc_tensor *b) { return binary(a, b, TORC_OP_LOGICAL_OR, 1.0); }
torc_tensor *torc_add_scalar(const torc_tensor *a, torc_scalar s) { return binary_scalar(a, s, TORC_OP_ADD, false); }
torc_tensor *torc_sub_scalar(const torc_tensor *a, torc_scalar s) { return binary_scalar(a, s, TORC_OP_SUB, false); }
torc_tensor *torc_rsub_scalar(const torc_tensor *a, torc_scalar s) { return binary_scalar(a, s, TORC_OP_SUB, true); }
torc_tensor *torc_rdiv_scalar(const torc_tensor *a, torc_scalar s) { return binary_scalar(a, s, TORC_OP_DIV, true); }

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
    st = run_binary(self, self, other, code, alpha);
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
    torc_tensor *st = torc__scalar_on(self->device, s.f, common);
    if (!st) return torc_last_status();
    torc_status r = binary_(self, st, code, 1.0, common, s.kind, NULL);
    torc_release(st);
    return r;
}

torc_status torc_add_(torc_tensor *self, const torc_tensor *other) { return binary_t_(self, other, TORC_OP_ADD, 1.0); }
torc_status torc_add_scaled_(torc_tensor *self, const torc_tensor *other, torc_scalar alpha) {
    return binary_t_(self, other, TORC_OP_ADD, alpha.f);
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
    if (cond->dtype != TORC_DTYPE_BOOL)
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
    torc_op op = {.code = TORC_OP_WHERE, .n_in = 3};
    torc__operand(out, &op.out);
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
