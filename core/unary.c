// core/unary.c — elementwise unary ops: neg ... erfinv, logical_not, pow by a scalar, and their
// in-place forms. One table says which dtypes an op takes and what dtype it returns.
#include "torc-impl.h"

typedef enum { KEEP, FLOATING, FLOAT_ONLY, TO_BOOL } out_rule;
// KEEP: same dtype (bool allowed unless no_bool); FLOATING: integers promote to the default
// float dtype (torch.sqrt(int) is float); FLOAT_ONLY: integers are an error (gelu); TO_BOOL.
static const struct {
    out_rule rule;
    bool no_bool;       // PyTorch refuses bool input
    const char *kernel; // PyTorch's kernel name for the "not implemented for" message
} g_unary[TORC_OP_COUNT] = {
    [TORC_OP_NEG] = {KEEP, true, "neg"},
    [TORC_OP_ABS] = {KEEP, true, "abs_cpu"},
    [TORC_OP_SIGN] = {KEEP, false, "sign"},
    [TORC_OP_SQUARE] = {KEEP, false, "square"},
    [TORC_OP_RELU] = {KEEP, true, "relu"},
    [TORC_OP_SQRT] = {FLOATING, false, "sqrt"},
    [TORC_OP_RSQRT] = {FLOATING, false, "rsqrt"},
    [TORC_OP_RECIPROCAL] = {FLOATING, false, "reciprocal"},
    [TORC_OP_EXP] = {FLOATING, false, "exp"},
    [TORC_OP_LOG] = {FLOATING, false, "log"},
    [TORC_OP_SIN] = {FLOATING, false, "sin"},
    [TORC_OP_COS] = {FLOATING, false, "cos"},
    [TORC_OP_TANH] = {FLOATING, false, "tanh"},
    [TORC_OP_SIGMOID] = {FLOATING, false, "sigmoid"},
    [TORC_OP_ERF] = {FLOATING, false, "erf"},
    [TORC_OP_ERFINV] = {FLOATING, false, "erfinv"},
    [TORC_OP_GELU] = {FLOAT_ONLY, true, "GeluKernelImpl"},
    [TORC_OP_LOGICAL_NOT] = {TO_BOOL, false, "logical_not"},
};

// The dtype op produces from dtype d, or TORC_DTYPE_COUNT with the error set.
static torc_dtype unary_out_dtype(torc_opcode code, torc_dtype d) {
    if (g_unary[code].no_bool && d == TORC_DTYPE_BOOL) {
        if (code == TORC_OP_NEG)
            torc__error(TORC_ERR_DTYPE, "Negation, the `-` operator, on a bool tensor is not supported. If you are "
                                        "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
        else if (code == TORC_OP_RELU)
            torc__error(TORC_ERR_DTYPE, "Boolean inputs not supported for relu");
        else
            torc__error(TORC_ERR_DTYPE, "\"%s\" not implemented for 'Bool'", g_unary[code].kernel);
        return TORC_DTYPE_COUNT;
    }
    switch (g_unary[code].rule) {
    case KEEP: return code == TORC_OP_SQUARE && d == TORC_DTYPE_BOOL ? TORC_DTYPE_I64 : d;  // square is pow(t, 2)
    case TO_BOOL: return TORC_DTYPE_BOOL;
    case FLOATING: return torc_dtype_is_floating(d) ? d : torc_get_default_dtype();
    case FLOAT_ONLY:
        if (torc_dtype_is_floating(d)) return d;
        torc__error(TORC_ERR_DTYPE, "\"%s\" not implemented for '%s'", g_unary[code].kernel, torc__dtype_c10_name(d));
        return TORC_DTYPE_COUNT;
    }
    return TORC_DTYPE_COUNT;
}

// Runs the unary op with in -> out (same shape; out may be in itself).
static torc_status run_unary(torc_tensor *out, const torc_tensor *in, torc_opcode code, const torc_op_params *p) {
    torc_op op = {.code = code, .n_in = 1, .n_out = 1};
    torc__operand(out, &op.out[0]);
    torc__operand(in, &op.in[0]);
    if (p) op.params = *p;
    return torc__dispatch(out->device, &op, (uint64_t)torc_numel(out));
}

static torc_tensor *unary(const torc_tensor *t, torc_opcode code, const torc_op_params *p, torc_dtype out_dtype) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    TORC__AUTOCAST_F32(code, t, unary(t, code, p, out_dtype));  // autocast.c: exp, log, ... in f32
    if (out_dtype == TORC_DTYPE_COUNT) out_dtype = unary_out_dtype(code, t->dtype);
    if (out_dtype == TORC_DTYPE_COUNT) return NULL;
    torc_tensor *out = torc__new(t->device, out_dtype, t->ndim, t->shape);
    if (!out) return NULL;
    if (run_unary(out, t, code, p)) {
        torc_release(out);
        return NULL;
    }
    out = torc__autograd_record(out, code, 1, &t, p);
    return out ? torc__register(out) : NULL;
}

#define UNARY(name, CODE) \
    torc_tensor *torc_##name(const torc_tensor *t) { return unary(t, CODE, NULL, TORC_DTYPE_COUNT); }
UNARY(neg, TORC_OP_NEG)
UNARY(abs, TORC_OP_ABS)
UNARY(sign, TORC_OP_SIGN)
UNARY(sqrt, TORC_OP_SQRT)
UNARY(rsqrt, TORC_OP_RSQRT)
UNARY(square, TORC_OP_SQUARE)
UNARY(reciprocal, TORC_OP_RECIPROCAL)
UNARY(exp, TORC_OP_EXP)
UNARY(log, TORC_OP_LOG)
UNARY(sin, TORC_OP_SIN)
UNARY(cos, TORC_OP_COS)
UNARY(tanh, TORC_OP_TANH)
UNARY(sigmoid, TORC_OP_SIGMOID)
UNARY(relu, TORC_OP_RELU)
UNARY(erf, TORC_OP_ERF)
UNARY(erfinv, TORC_OP_ERFINV)
UNARY(logical_not, TORC_OP_LOGICAL_NOT)

torc_tensor *torc_gelu(const torc_tensor *t, bool approximate_tanh) {
    torc_op_params p = {.gelu = {approximate_tanh ? 1 : 0}};
    return unary(t, TORC_OP_GELU, &p, TORC_DTYPE_COUNT);
}

// pow(tensor, scalar): the result dtype is result_type(t, exponent) (int ** 2 stays int,
// int ** 0.5 is float).
static torc_status pow_scalar_dtype(const torc_tensor *t, torc_scalar e, torc_dtype *out) {
    torc_status st = torc_result_type(1, &t, 1, &e, out);
    if (!st && torc_dtype_is_integral(*out) && e.kind == TORC_DTYPE_I64 && e.i < 0)
        st = torc__error(TORC_ERR_INVALID_ARG, "Integers to negative integer powers are not allowed.");
    return st;
}

torc_tensor *torc_pow_scalar(const torc_tensor *t, torc_scalar exponent) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    torc_dtype d;
    if (pow_scalar_dtype(t, exponent, &d)) return NULL;
    if (d == TORC_DTYPE_BOOL) {  // bool ** bool stays bool: t ** True is t, t ** False all True
        torc_tensor *out = torc__new(t->device, d, t->ndim, t->shape);
        if (out && (exponent.i ? torc__copy(out, t) : torc__fill(out, 1.0))) {
            torc_release(out);
            return NULL;
        }
        return out ? torc__register(out) : NULL;
    }
    torc_op_params p = {.scalar = {exponent.f}};
    return unary(t, TORC_OP_POW_SCALAR, &p, d);
}

// ---- in place ----
static torc_status unary_(torc_tensor *t, torc_opcode code, const torc_op_params *p, torc_dtype result) {
    if (!t) return torc__null_arg("tensor is NULL");
    if (result == TORC_DTYPE_COUNT) result = unary_out_dtype(code, t->dtype);
    if (result == TORC_DTYPE_COUNT) return torc_last_status();
    if (!torc__check_can_cast(result, t->dtype) || !torc__check_no_internal_overlap(t)) return torc_last_status();
    torc_node *rec;
    const torc_tensor *ins[1] = {t};
    torc_status st = torc__inplace_begin(t, code, 1, ins, p, NULL, &rec);
    if (st) return st;
    st = run_unary(t, t, code, p);
    if (!st) torc__bump_version(t);
    return torc__inplace_end(t, rec, st);
}

torc_status torc_neg_(torc_tensor *t) { return unary_(t, TORC_OP_NEG, NULL, TORC_DTYPE_COUNT); }
torc_status torc_sqrt_(torc_tensor *t) { return unary_(t, TORC_OP_SQRT, NULL, TORC_DTYPE_COUNT); }
torc_status torc_exp_(torc_tensor *t) { return unary_(t, TORC_OP_EXP, NULL, TORC_DTYPE_COUNT); }
torc_status torc_relu_(torc_tensor *t) { return unary_(t, TORC_OP_RELU, NULL, TORC_DTYPE_COUNT); }
torc_status torc_sigmoid_(torc_tensor *t) { return unary_(t, TORC_OP_SIGMOID, NULL, TORC_DTYPE_COUNT); }

torc_status torc_pow_scalar_(torc_tensor *t, torc_scalar e) {
    if (!t) return torc__null_arg("tensor is NULL");
    torc_dtype d;
    if (pow_scalar_dtype(t, e, &d)) return torc_last_status();
    if (d == TORC_DTYPE_BOOL) {  // bool ** bool, as in torc_pow_scalar
        if (!torc__check_no_internal_overlap(t)) return torc_last_status();
        torc_status st = TORC_OK;
        torc__check_inplace(t, &st);
        if (!st && !e.i) st = torc__fill(t, 1.0);
        if (!st) torc__bump_version(t);
        return st;
    }
    torc_op_params p = {.scalar = {e.f}};
    return unary_(t, TORC_OP_POW_SCALAR, &p, d);
}
