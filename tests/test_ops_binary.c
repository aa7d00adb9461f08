// tests/test_ops_binary.c — binary ops, their scalar and in-place forms against PyTorch goldens
// (tests/golden/ops_binary.txt): every dtype, strided/broadcast/zero-size/zero-dim operands, promotion, errors.
#include "opsgolden.h"

#define FILE_ "ops_binary.txt"

// ---- tensor (op) tensor ----
typedef torc_tensor *(*binary_fn)(const torc_tensor *, const torc_tensor *);
typedef torc_tensor *(*scalar_fn)(const torc_tensor *, torc_scalar);

static const struct {
    const char *name;
    binary_fn fn;
    og_tol tol;  // f32/f64 results equal PyTorch's bit for bit (one rounding of the exact value)
} g_binary[] = {
    {"add", torc_add, OG_EXACT},       {"sub", torc_sub, OG_EXACT},         {"mul", torc_mul, OG_EXACT},
    {"div", torc_div, OG_EXACT},       {"pow", torc_pow, OG_CLOSE},        {"maximum", torc_maximum, OG_EXACT},
    {"minimum", torc_minimum, OG_EXACT}, {"eq", torc_eq, OG_EXACT},         {"ne", torc_ne, OG_EXACT},
    {"lt", torc_lt, OG_EXACT},         {"le", torc_le, OG_EXACT},           {"gt", torc_gt, OG_EXACT},
    {"ge", torc_ge, OG_EXACT},         {"logical_and", torc_logical_and, OG_EXACT}, {"logical_or", torc_logical_or, OG_EXACT},
};
#define N_BINARY ((int)(sizeof g_binary / sizeof g_binary[0]))

static const struct {
    const char *name;
    scalar_fn fn;
} g_scalar[] = {
    {"add_scalar", torc_add_scalar}, {"sub_scalar", torc_sub_scalar}, {"mul_scalar", torc_mul_scalar},
    {"div_scalar", torc_div_scalar}, {"rsub_scalar", torc_rsub_scalar}, {"rdiv_scalar", torc_rdiv_scalar},
    {"eq_scalar", torc_eq_scalar},   {"ne_scalar", torc_ne_scalar},   {"lt_scalar", torc_lt_scalar},
    {"le_scalar", torc_le_scalar},   {"gt_scalar", torc_gt_scalar},   {"ge_scalar", torc_ge_scalar},
    {"maximum_scalar", torc_maximum_scalar}, {"minimum_scalar", torc_minimum_scalar},
};
#define N_SCALAR ((int)(sizeof g_scalar / sizeof g_scalar[0]))

static binary_fn g_cur_binary;
static torc_tensor *run_binary(const og_case *c, torc_tensor **in) {
    (void)c;
    return g_cur_binary(in[0], in[1]);
}

START_TEST(binary_ops_match_pytorch) {
    g_cur_binary = g_binary[_i].fn;
    og_run_cases(FILE_, g_binary[_i].name, run_binary, g_binary[_i].tol);
}
END_TEST

static scalar_fn g_cur_scalar;
static torc_tensor *run_scalar(const og_case *c, torc_tensor **in) { return g_cur_scalar(in[0], c->sc[0]); }

START_TEST(scalar_ops_match_pytorch) {
    g_cur_scalar = g_scalar[_i].fn;
    og_run_cases(FILE_, g_scalar[_i].name, run_scalar, OG_EXACT);
}
END_TEST

static torc_tensor *run_add_scaled(const og_case *c, torc_tensor **in) { return torc_add_scaled(in[0], in[1], c->sc[0]); }

START_TEST(add_scaled_matches_pytorch) { og_run_cases(FILE_, "add_scaled", run_add_scaled, OG_EXACT); }
END_TEST

// ---- in place ----
typedef torc_status (*inplace_fn)(torc_tensor *, const torc_tensor *);
typedef torc_status (*inplace_scalar_fn)(torc_tensor *, torc_scalar);
static const struct {
    const char *name;
    inplace_fn fn;
} g_inplace[] = {
    {"add_", torc_add_}, {"sub_", torc_sub_}, {"mul_", torc_mul_}, {"div_", torc_div_},
    {"maximum_", torc_maximum_}, {"copy_", torc_copy_},
};
#define N_INPLACE ((int)(sizeof g_inplace / sizeof g_inplace[0]))
static const struct {
    const char *name;
    inplace_scalar_fn fn;
} g_inplace_scalar[] = {
    {"add_scalar_", torc_add_scalar_}, {"sub_scalar_", torc_sub_scalar_}, {"mul_scalar_", torc_mul_scalar_},
    {"div_scalar_", torc_div_scalar_}, {"fill_", torc_fill_},
};
#define N_INPLACE_SCALAR ((int)(sizeof g_inplace_scalar / sizeof g_inplace_scalar[0]))

static inplace_fn g_cur_inplace;
static torc_status run_inplace(const og_case *c, torc_tensor *self, torc_tensor **in) {
    (void)c;
    return g_cur_inplace(self, in[1]);
}
START_TEST(inplace_ops_match_pytorch) {
    g_cur_inplace = g_inplace[_i].fn;
    og_run_inplace_cases(FILE_, g_inplace[_i].name, run_inplace, OG_EXACT);
}
END_TEST

static inplace_scalar_fn g_cur_inplace_scalar;
static torc_status run_inplace_scalar(const og_case *c, torc_tensor *self, torc_tensor **in) {
    (void)in;
    return g_cur_inplace_scalar(self, c->sc[0]);
}
START_TEST(inplace_scalar_ops_match_pytorch) {
    g_cur_inplace_scalar = g_inplace_scalar[_i].fn;
    og_run_inplace_cases(FILE_, g_inplace_scalar[_i].name, run_inplace_scalar, OG_EXACT);
}
END_TEST

static torc_status run_add_scaled_(const og_case *c, torc_tensor *self, torc_tensor **in) {
    return torc_add_scaled_(self, in[1], c->sc[0]);
}
static torc_status run_zero_(const og_case *c, torc_tensor *self, torc_tensor **in) {
    (void)c, (void)in;
    return torc_zero_(self);
}
static torc_status run_addcmul_(const og_case *c, torc_tensor *self, torc_tensor **in) {
    return torc_addcmul_(self, in[1], in[2], c->sc[0]);
}
static torc_status run_addcdiv_(const og_case *c, torc_tensor *self, torc_tensor **in) {
    return torc_addcdiv_(self, in[1], in[2], c->sc[0]);
}
START_TEST(add_scaled_inplace_matches_pytorch) { og_run_inplace_cases(FILE_, "add_scaled_", run_add_scaled_, OG_EXACT); }
END_TEST
START_TEST(zero_inplace_matches_pytorch) { og_run_inplace_cases(FILE_, "zero_", run_zero_, OG_EXACT); }
END_TEST
// addcmul/addcdiv: one fused op each, rounded as PyTorch's kernels (tests/test_pointwise.c has more).
START_TEST(addcmul_addcdiv_match_pytorch) {
    og_run_inplace_cases(FILE_, "addcmul_", run_addcmul_, OG_EXACT);
    og_run_inplace_cases(FILE_, "addcdiv_", run_addcdiv_, OG_EXACT);
}
END_TEST

// ---- floor_divide, remainder, fmod, and add with alpha (tests/golden/ops_divmod.txt) ----
#define DIVMOD "ops_divmod.txt"

// og_match compares zeros without their sign; floor_divide, remainder and fmod pin it (-4.0 % 2
// is -0.0, 0.5 // -3 is -1, -0.0 // 3 is -0.0): a mismatch is described and counted here.
static int g_bad_zero_signs;
static torc_tensor *zero_signs_checked(const og_case *c, torc_tensor *r) {
    if (!r || c->error[0] || !c->has_out || torc_numel(r) != c->out.n || !torc_dtype_is_floating(torc_get_dtype(r)))
        return r;
    double *v = tu_values(r);
    for (int64_t i = 0; i < c->out.n; i++)
        if (v[i] == 0 && c->out.v[i] == 0 && signbit(v[i]) != signbit(c->out.v[i])) {
            char msg[96];
            snprintf(msg, sizeof msg, "element %lld is %s0, expected %s0", (long long)i, signbit(v[i]) ? "-" : "+",
                     signbit(c->out.v[i]) ? "-" : "+");
            og_describe(c, msg);
            g_bad_zero_signs++;
            break;
        }
    free(v);
    return r;
}

static const struct {
    const char *name;
    binary_fn fn;
    scalar_fn sfn;
} g_divmod[] = {
    {"floor_divide", torc_floor_divide, torc_floor_divide_scalar},
    {"remainder", torc_remainder, torc_remainder_scalar},
    {"fmod", torc_fmod, torc_fmod_scalar},
};
static int g_cur_divmod;
static torc_tensor *run_divmod(const og_case *c, torc_tensor **in) {
    return zero_signs_checked(c, g_divmod[g_cur_divmod].fn(in[0], in[1]));
}
static torc_tensor *run_divmod_scalar(const og_case *c, torc_tensor **in) {
    return zero_signs_checked(c, g_divmod[g_cur_divmod].sfn(in[0], c->sc[0]));
}

// Every dtype and layout, signs of zero, inf and NaN, division by zero, promotion, scalar forms:
// bit for bit (PyTorch's steps, each rounded to the dtype).
START_TEST(divmod_ops_match_pytorch) {
    g_cur_divmod = _i;
    g_bad_zero_signs = 0;
    char scalar[48];
    snprintf(scalar, sizeof scalar, "%s_scalar", g_divmod[_i].name);
    og_run_cases(DIVMOD, g_divmod[_i].name, run_divmod, OG_EXACT);
    og_run_cases(DIVMOD, scalar, run_divmod_scalar, OG_EXACT);
    ck_assert_msg(g_bad_zero_signs == 0, "%d cases give a zero of the wrong sign (details on stderr)", g_bad_zero_signs);
}
END_TEST

// d sum(op(a, b)) / da and / db against torch.autograd (remainder: b gets -grad * floor(a / b),
// fmod: -grad * trunc(a / b)), also reduced over a broadcast b.
static torc_tensor *run_divmod_grad(const og_case *c, torc_tensor **in) {
    torc_tensor *a = torc_clone(in[0]), *b = torc_clone(in[1]);
    if (!a || !b || torc_set_requires_grad(a, true) || torc_set_requires_grad(b, true)) return NULL;
    torc_tensor *r = !strncmp(c->op, "remainder", 9) ? torc_remainder(a, b) : torc_fmod(a, b);
    if (!r || torc_backward(torc_sum(r, TORC_ALL_DIMS, false), NULL, false)) return NULL;
    const char *which = og_param(c, "which");
    return zero_signs_checked(c, torc_grad(which && which[0] == 'b' ? b : a));
}
START_TEST(divmod_gradients_match_pytorch) {
    g_bad_zero_signs = 0;
    og_run_cases(DIVMOD, "remainder_grad", run_divmod_grad, OG_EXACT);
    og_run_cases(DIVMOD, "fmod_grad", run_divmod_grad, OG_EXACT);
    ck_assert_msg(g_bad_zero_signs == 0, "%d cases give a zero of the wrong sign (details on stderr)", g_bad_zero_signs);
}
END_TEST

// The nodes PyTorch records: RemainderBackward1 / FmodBackward1 for two tensors, ...Backward0 with
// a scalar (self: grad), and for floor_divide a NotImplemented node that fails when reached.
START_TEST(divmod_autograd_nodes_as_pytorch) {
    torc_scope_push();
    torc_tensor *x = torc_tensor_from((const float[]){5, -5, 7.5f}, TORC_SHAPE(3), TORC_DTYPE_F32);
    torc_tensor *y = torc_tensor_from((const float[]){3, 3, -2}, TORC_SHAPE(3), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    ck_assert_str_eq(torc_grad_fn_name(torc_remainder(x, y)), "RemainderBackward1");
    ck_assert_str_eq(torc_grad_fn_name(torc_fmod(y, x)), "FmodBackward1");
    torc_tensor *r = torc_remainder_scalar(x, torc_s(2.0)), *f = torc_fmod_scalar(x, torc_s(-2));
    ck_assert_str_eq(torc_grad_fn_name(r), "RemainderBackward0");
    ck_assert_str_eq(torc_grad_fn_name(f), "FmodBackward0");
    ck_assert_int_eq(torc_backward(torc_sum(torc_add(r, f), TORC_ALL_DIMS, false), NULL, false), TORC_OK);
    tu_assert_values(torc_grad(x), TU_ARR(2, 2, 2), 0);
    torc_tensor *q = torc_floor_divide(x, y);
    ck_assert(q && torc_requires_grad(q));
    ck_assert_str_eq(torc_grad_fn_name(q), "NotImplemented");
    ck_assert_int_eq(torc_backward(torc_sum(q, TORC_ALL_DIMS, false), NULL, false), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "derivative for aten::floor_divide is not implemented");
    ck_assert(!torc_requires_grad(torc_floor_divide_scalar(torc_arange(0, 3, 1, TORC_DTYPE_I64), torc_s(2))));
    torc_scope_pop();
}
END_TEST

START_TEST(divmod_refuses_fp8_and_bool) {
    torc_scope_push();
    torc_tensor *e = torc_zeros(TORC_SHAPE(2), TORC_DTYPE_F8_E4M3FN), *b = torc_ones(TORC_SHAPE(2), TORC_DTYPE_BOOL);
    ck_assert_ptr_null(torc_floor_divide(e, e));
    tu_assert_error(TORC_ERR_DTYPE, "\"div_floor_cpu\" not implemented for 'Float8_e4m3fn'");
    ck_assert_ptr_null(torc_fmod(e, e));
    tu_assert_error(TORC_ERR_DTYPE, "\"fmod_cpu\" not implemented for 'Float8_e4m3fn'");
    ck_assert_ptr_null(torc_remainder_scalar(b, torc_s((bool)1)));
    tu_assert_error(TORC_ERR_DTYPE, "\"remainder_cpu\" not implemented for 'Bool'");
    torc_scope_pop();
}
END_TEST

// torch.add(x, y, alpha=): alpha in the dtype, then one fused multiply-add (bit for bit with
// PyTorch's kernel; alpha * y in double was one ulp off), and alpha's checks.
static torc_tensor *run_add_scaled_checked(const og_case *c, torc_tensor **in) {
    return torc_add_scaled(in[0], in[1], c->sc[0]);
}
START_TEST(add_scaled_fuses_as_pytorch) {
    og_run_cases(DIVMOD, "add_scaled_fma", run_add_scaled_checked, OG_EXACT);
    og_run_inplace_cases(DIVMOD, "add_scaled_fma_", run_add_scaled_, OG_EXACT);
    og_run_cases(DIVMOD, "add_scaled", run_add_scaled_checked, OG_EXACT);
    og_run_inplace_cases(DIVMOD, "add_scaled_", run_add_scaled_, OG_EXACT);
}
END_TEST

// x + alpha * y rounded once, where rounding alpha * y + x to double first and then to float
// lands on a tie: x = alpha = 1 + 2^-23, y = (1 - 2^-23) 2^-24 is 1 + 2^-23 in PyTorch (1 + 2^-22
// rounded twice). 8192 elements: large enough for the onednn backend's own loop.
START_TEST(add_scaled_rounds_once) {
    static const char *const devices[] = {"reference", "onednn"};
    torc_device *dev = torc_device_get(devices[_i]);
    if (!dev && _i == 1) return;  // a build without the oneDNN backend
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    torc_scope_push();
    const float one_ulp = 1 + 0x1p-23f;
    torc_tensor *x = torc_to_device(torc_full(TORC_SHAPE(8192), one_ulp, TORC_DTYPE_F32), dev);
    torc_tensor *y = torc_to_device(torc_full(TORC_SHAPE(8192), (1 - 0x1p-23) * 0x1p-24, TORC_DTYPE_F32), dev);
    torc_tensor *r = torc_add_scaled(x, y, torc_s((double)one_ulp));
    ck_assert_msg(r != NULL, "%s", torc_last_error());
    torc_tensor *d = torc_sub_scalar(r, torc_s((double)one_ulp));  // 0 everywhere
    double v;
    ck_assert_int_eq(torc_item(torc_amax(torc_abs(d), TORC_ALL_DIMS, false), &v), TORC_OK);
    ck_assert_double_eq(v, 0);
    ck_assert_int_eq(torc_add_scaled_(x, y, torc_s((double)one_ulp)), TORC_OK);
    ck_assert_int_eq(torc_item(torc_amax(torc_abs(torc_sub(x, r)), TORC_ALL_DIMS, false), &v), TORC_OK);
    ck_assert_double_eq(v, 0);
    torc_scope_pop();
}
END_TEST

// ---- where PyTorch's kernels read operands in another dtype (tests/golden/ops_parity.txt) ----
// f16/bf16 by a scalar or one-element right operand in float32, out-of-range integer scalars,
// zero-dim operands of a wider dtype cast first, a uint8 where condition.
#define PARITY "ops_parity.txt"

static binary_fn binary_named(const char *name) {
    for (int i = 0; i < N_BINARY; i++)
        if (!strcmp(g_binary[i].name, name)) return g_binary[i].fn;
    return NULL;
}

START_TEST(parity_binary_ops_match_pytorch) {
    static const char *const ops[] = {"mul", "div", "add", "sub", "pow", "eq", "ne", "lt", "le", "gt", "ge",
                                      "maximum", "minimum"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        g_cur_binary = binary_named(ops[i]);
        og_run_cases(PARITY, ops[i], run_binary, strcmp(ops[i], "pow") ? OG_EXACT : OG_CLOSE);
    }
}
END_TEST

START_TEST(parity_scalar_ops_match_pytorch) {
    static const char *const ops[] = {"mul_scalar", "div_scalar", "rdiv_scalar", "add_scalar", "sub_scalar",
                                      "maximum_scalar", "minimum_scalar"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        for (int k = 0; k < N_SCALAR; k++)
            if (!strcmp(g_scalar[k].name, ops[i])) g_cur_scalar = g_scalar[k].fn;
        og_run_cases(PARITY, ops[i], run_scalar, OG_EXACT);
    }
}
END_TEST

START_TEST(parity_inplace_ops_match_pytorch) {
    g_cur_inplace = torc_mul_;
    og_run_inplace_cases(PARITY, "mul_", run_inplace, OG_EXACT);
    g_cur_inplace = torc_div_;
    og_run_inplace_cases(PARITY, "div_", run_inplace, OG_EXACT);
    g_cur_inplace_scalar = torc_mul_scalar_;
    og_run_inplace_cases(PARITY, "mul_scalar_", run_inplace_scalar, OG_EXACT);
    g_cur_inplace_scalar = torc_div_scalar_;
    og_run_inplace_cases(PARITY, "div_scalar_", run_inplace_scalar, OG_EXACT);
}
END_TEST

static torc_tensor *run_where(const og_case *c, torc_tensor **in) {
    (void)c;
    return torc_where(in[0], in[1], in[2]);
}
START_TEST(parity_where_takes_a_uint8_condition) { og_run_cases(PARITY, "where", run_where, OG_EXACT); }
END_TEST

// Every f16/bf16 value by a scalar against PyTorch (tests/golden/opmath_all_values.txt: 64-bit
// FNV-1a hashes of the results' bits in blocks of 256 input patterns; NaNs as the quiet NaN).
static uint64_t fnv1a64(const uint16_t *v, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 2; b++) h = (h ^ ((v[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    return h;
}

static torc_tensor *opmath_run(const char *op, torc_tensor *x, const char *kind, double v) {
    const torc_scalar s = !strcmp(kind, "i") ? torc_s((int64_t)v) : torc_s(v);
    if (!strcmp(op, "mul_scalar")) return torc_mul_scalar(x, s);
    if (!strcmp(op, "div_scalar")) return torc_div_scalar(x, s);
    if (!strcmp(op, "rdiv_scalar")) return torc_rdiv_scalar(x, s);
    if (!strcmp(op, "add_scalar")) return torc_add_scalar(x, s);
    if (!strcmp(op, "sub_scalar")) return torc_sub_scalar(x, s);
    torc_dtype zd;
    ck_assert_msg(torc_dtype_from_name(kind, &zd) == TORC_OK, "bad dtype %s", kind);
    torc_tensor *z = torc_scalar_tensor(v, zd);
    if (!strcmp(op, "mul_0dim")) return torc_mul(x, z);
    if (!strcmp(op, "div_0dim")) return torc_div(x, z);
    ck_abort_msg("unknown op %s", op);
    return NULL;
}

// On the reference backend (the oracle) and on onednn (65536 elements: its own kernels, bf16
// results through torc's conversion, which keeps subnormals). The ops_parity.txt cases above
// also run on oneDNN (tests/parity.cmake).
START_TEST(opmath_every_half_value_matches_pytorch) {
    static const char *const devices[] = {"reference", "onednn"};
    torc_device *saved = torc_default_device(), *dev = torc_device_get(devices[_i]);
    if (!dev && _i == 1) return;  // a build without the oneDNN backend
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_set_default_device(dev), TORC_OK);
    FILE *f = tu_open_golden("opmath_all_values.txt", "r");
    static uint16_t in[65536], out[65536];
    for (int i = 0; i < 65536; i++) in[i] = (uint16_t)i;
    char line[256], op[32], dt[16], kind[16];
    double v;
    int n_ops = 0, bad_ops = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "all %31s %15s %15s %lf", op, dt, kind, &v) != 4) continue;
        torc_dtype d;
        ck_assert_int_eq(torc_dtype_from_name(dt, &d), TORC_OK);
        torc_scope_push();
        torc_tensor *x = torc_tensor_from(in, TORC_SHAPE(65536), d);
        torc_tensor *r = opmath_run(op, x, kind, v);
        ck_assert_msg(r != NULL, "%s %s %s %g: %s", op, dt, kind, v, torc_last_error());
        ck_assert_int_eq(torc_get_dtype(r), d);
        ck_assert_int_eq(torc_copy_to_host(r, out, sizeof out), TORC_OK);
        torc_scope_pop();
        const uint16_t exp_mask = d == TORC_DTYPE_F16 ? 0x7c00 : 0x7f80, qnan = d == TORC_DTYPE_F16 ? 0x7e00 : 0x7fc0;
        for (int i = 0; i < 65536; i++)
            if ((out[i] & exp_mask) == exp_mask && (out[i] & ~(exp_mask | 0x8000))) out[i] = qnan;
        int bad_blocks = 0, first_bad = -1, b;
        unsigned long long h;
        for (int k = 0; k < 256 && fgets(line, sizeof line, f); k++) {
            ck_assert_msg(sscanf(line, "block %d %llx", &b, &h) == 2 && b == k, "malformed block line: %s", line);
            if (fnv1a64(out + 256 * k, 256) != (uint64_t)h) {
                if (first_bad < 0) first_bad = k;
                bad_blocks++;
            }
        }
        if (bad_blocks) {
            fprintf(stderr, "%s %s by %s %g: %d of 256 blocks differ from PyTorch, first: inputs 0x%04x..0x%04x\n", op,
                    dt, kind, v, bad_blocks, 256 * first_bad, 256 * first_bad + 255);
            bad_ops++;
        }
        n_ops++;
    }
    fclose(f);
    ck_assert_int_eq(torc_set_default_device(saved), TORC_OK);
    ck_assert_int_gt(n_ops, 0);
    ck_assert_msg(bad_ops == 0, "%d of %d ops differ from PyTorch (details on stderr)", bad_ops, n_ops);
}
END_TEST

// The examples of the issue, readable: f16 0.0003765 * 1e5 is 37.66 (not inf: 1e5 stays a float32),
// -0.0 * 1e5 is -0 (not NaN), and the sign of the zero is kept.
START_TEST(half_times_large_scalar_stays_finite) {
    torc_scope_push();
    torc_tensor *x = torc_to_dtype(torc_tensor_from((float[]){0.0003765f, -0.0f}, TORC_SHAPE(2), TORC_DTYPE_F32),
                                   TORC_DTYPE_F16);
    double *v = tu_values(torc_mul_scalar(x, torc_s(1e5)));
    ck_assert_double_eq(v[0], 37.65625);
    ck_assert(v[1] == 0.0 && signbit(v[1]));
    free(v);
    torc_scope_pop();
}
END_TEST

// ---- hand-written checks of the rules the goldens exercise ----
START_TEST(result_dtypes_follow_promotion) {
    torc_scope_push();
    torc_tensor *i = torc_arange(0, 3, 1, TORC_DTYPE_I64), *h = torc_ones(TORC_SHAPE(3), TORC_DTYPE_F16),
                *f = torc_ones(TORC_SHAPE(3), TORC_DTYPE_F32), *b = torc_ones(TORC_SHAPE(3), TORC_DTYPE_BOOL),
                *u = torc_ones(TORC_SHAPE(3), TORC_DTYPE_U8), *bf = torc_ones(TORC_SHAPE(3), TORC_DTYPE_BF16);
    ck_assert_int_eq(torc_get_dtype(torc_div_scalar(i, torc_s(2.5))), TORC_DTYPE_F32);  // int / 2.5 -> f32
    ck_assert_int_eq(torc_get_dtype(torc_mul_scalar(i, torc_s(2))), TORC_DTYPE_I64);    // int * 2 stays int
    ck_assert_int_eq(torc_get_dtype(torc_mul_scalar(u, torc_s(2))), TORC_DTYPE_U8);     // the scalar never widens
    ck_assert_int_eq(torc_get_dtype(torc_div(i, i)), TORC_DTYPE_F32);                    // true division
    ck_assert_int_eq(torc_get_dtype(torc_add(h, f)), TORC_DTYPE_F32);                    // f16 + f32 -> f32
    ck_assert_int_eq(torc_get_dtype(torc_add(h, bf)), TORC_DTYPE_F32);                   // f16 + bf16 -> f32
    ck_assert_int_eq(torc_get_dtype(torc_add(b, u)), TORC_DTYPE_U8);
    ck_assert_int_eq(torc_get_dtype(torc_lt(f, i)), TORC_DTYPE_BOOL);                    // comparisons -> bool
    ck_assert_int_eq(torc_get_dtype(torc_eq_scalar(i, torc_s(2.5))), TORC_DTYPE_BOOL);
    ck_assert_int_eq(torc_get_dtype(torc_add(h, torc_scalar_tensor(1, TORC_DTYPE_F64))), TORC_DTYPE_F16);  // zero-dim
    ck_assert_int_eq(torc_get_dtype(torc_add(i, torc_scalar_tensor(1, TORC_DTYPE_F64))), TORC_DTYPE_F64);
    torc_scope_pop();
}
END_TEST

START_TEST(shape_mismatch_names_both_shapes) {
    torc_scope_push();
    torc_tensor *a = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32), *b = torc_ones(TORC_SHAPE(2, 4), TORC_DTYPE_F32);
    ck_assert_ptr_null(torc_add(a, b));
    tu_assert_error(TORC_ERR_SHAPE, "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1");
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "[2, 3]"));
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "[2, 4]"));
    torc_scope_pop();
}
END_TEST

START_TEST(failed_inplace_changes_nothing) {
    torc_scope_push();
    torc_tensor *a = torc_arange(0, 6, 1, TORC_DTYPE_I64);
    torc_tensor *f = torc_full(TORC_SHAPE(6), 0.5, TORC_DTYPE_F32);
    const uint64_t v = torc_version(a);
    ck_assert_int_eq(torc_add_(a, f), TORC_ERR_DTYPE);
    tu_assert_error(TORC_ERR_DTYPE, "result type Float can't be cast to the desired output type Long");
    ck_assert_int_eq(torc_mul_scalar_(a, torc_s(2.5)), TORC_ERR_DTYPE);
    tu_assert_error(TORC_ERR_DTYPE, "result type Float can't be cast to the desired output type Long");
    ck_assert_int_eq(torc_div_scalar_(a, torc_s(2)), TORC_ERR_DTYPE);  // true division is float
    torc_tensor *big = torc_ones(TORC_SHAPE(2, 6), TORC_DTYPE_I64);
    ck_assert_int_eq(torc_add_(a, big), TORC_ERR_SHAPE);
    tu_assert_error(TORC_ERR_SHAPE, "output with shape [6] doesn't match the broadcast shape [2, 6]");
    ck_assert_uint_eq(torc_version(a), v);
    tu_assert_values(a, TU_ARR(0, 1, 2, 3, 4, 5), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(inplace_through_views_writes_the_base) {
    torc_scope_push();
    torc_tensor *base = torc_reshape(torc_arange(0, 6, 1, TORC_DTYPE_F32), TORC_SHAPE(2, 3));
    torc_tensor *t = torc_transpose(base, 0, 1);                  // (3, 2), not contiguous
    torc_tensor *col = torc_select(base, 1, 1);                   // [1, 4]
    ck_assert_int_eq(torc_mul_scalar_(t, torc_s(10)), TORC_OK);
    ck_assert_int_eq(torc_add_scalar_(col, torc_s(1)), TORC_OK);
    tu_assert_values(base, TU_ARR(0, 11, 20, 30, 41, 50), 0);
    ck_assert_uint_eq(torc_version(base), torc_version(t));  // one storage, one counter
    torc_scope_pop();
}
END_TEST

// PyTorch refuses to write into a tensor while reading a partly overlapping one (the result would
// depend on the order of the loop); the same memory read with the same strides is fine.
START_TEST(inplace_partial_overlap_is_refused) {
    torc_scope_push();
    const char *msg = "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                      "single memory location. Please clone() the tensor before performing the operation.";
    torc_tensor *y = torc_reshape(torc_arange(0, 4, 1, TORC_DTYPE_F32), TORC_SHAPE(2, 2));
    ck_assert_int_eq(torc_add_(y, torc_transpose(y, 0, 1)), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, msg);
    ck_assert_int_eq(torc_copy_(y, torc_transpose(y, 0, 1)), TORC_ERR_INVALID_ARG);
    tu_assert_values(y, TU_ARR(0, 1, 2, 3), 0);
    ck_assert_uint_eq(torc_version(y), 0);
    torc_tensor *v = torc_arange(0, 6, 1, TORC_DTYPE_F32);
    ck_assert_int_eq(torc_add_(torc_slice(v, 0, 0, 3, 1), torc_slice(v, 0, 1, 4, 1)), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_copy_(torc_slice(v, 0, 0, 3, 1), torc_slice(v, 0, 1, 4, 1)), TORC_ERR_INVALID_ARG);
    torc_tensor *x = torc_reshape(v, TORC_SHAPE(2, 3));
    ck_assert_int_eq(torc_add_(x, torc_select(x, 0, 0)), TORC_ERR_INVALID_ARG);  // a broadcast row of itself
    ck_assert_int_eq(torc_addcmul_(x, x, torc_select(x, 0, 0), torc_s(1)), TORC_ERR_INVALID_ARG);
    tu_assert_values(v, TU_ARR(0, 1, 2, 3, 4, 5), 0);
    // allowed: disjoint element sets, strided views (not checked, as PyTorch), the same memory and strides
    ck_assert_int_eq(torc_add_(torc_select(x, 0, 0), torc_select(x, 0, 1)), TORC_OK);
    tu_assert_values(v, TU_ARR(3, 5, 7, 3, 4, 5), 0);
    ck_assert_int_eq(torc_add_(torc_slice(v, 0, 0, INT64_MAX, 2), torc_slice(v, 0, 1, INT64_MAX, 2)), TORC_OK);
    tu_assert_values(v, TU_ARR(8, 5, 10, 3, 9, 5), 0);
    ck_assert_int_eq(torc_add_(v, v), TORC_OK);
    ck_assert_int_eq(torc_copy_(v, torc_slice(v, 0, 0, INT64_MAX, 1)), TORC_OK);
    tu_assert_values(v, TU_ARR(16, 10, 20, 6, 18, 10), 0);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("ops_binary");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, binary_ops_match_pytorch, 0, N_BINARY);
    tcase_add_loop_test(tc, scalar_ops_match_pytorch, 0, N_SCALAR);
    tcase_add_test(tc, add_scaled_matches_pytorch);
    tcase_add_loop_test(tc, inplace_ops_match_pytorch, 0, N_INPLACE);
    tcase_add_loop_test(tc, inplace_scalar_ops_match_pytorch, 0, N_INPLACE_SCALAR);
    tcase_add_test(tc, add_scaled_inplace_matches_pytorch);
    tcase_add_test(tc, zero_inplace_matches_pytorch);
    tcase_add_test(tc, addcmul_addcdiv_match_pytorch);
    tcase_add_loop_test(tc, divmod_ops_match_pytorch, 0, 3);
    tcase_add_test(tc, divmod_gradients_match_pytorch);
    tcase_add_test(tc, divmod_autograd_nodes_as_pytorch);
    tcase_add_test(tc, divmod_refuses_fp8_and_bool);
    tcase_add_test(tc, add_scaled_fuses_as_pytorch);
    tcase_add_loop_test(tc, add_scaled_rounds_once, 0, 2);
    suite_add_tcase(s, tc);
    TCase *parity = tcase_create("parity");
    tcase_set_timeout(parity, 120);
    tcase_add_test(parity, parity_binary_ops_match_pytorch);
    tcase_add_test(parity, parity_scalar_ops_match_pytorch);
    tcase_add_test(parity, parity_inplace_ops_match_pytorch);
    tcase_add_test(parity, parity_where_takes_a_uint8_condition);
    tcase_add_loop_test(parity, opmath_every_half_value_matches_pytorch, 0, 2);
    tcase_add_test(parity, half_times_large_scalar_stays_finite);
    suite_add_tcase(s, parity);
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, result_dtypes_follow_promotion);
    tcase_add_test(rules, shape_mismatch_names_both_shapes);
    tcase_add_test(rules, failed_inplace_changes_nothing);
    tcase_add_test(rules, inplace_through_views_writes_the_base);
    tcase_add_test(rules, inplace_partial_overlap_is_refused);
    suite_add_tcase(s, rules);
    return s;
}

int main(void) { return tu_run(make_suite()); }
