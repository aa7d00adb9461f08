// tests/test_ops_unary.c — unary ops, pow by a scalar and unary in-place ops against PyTorch goldens
// (tests/golden/ops_unary.txt): every dtype, strided/expanded/zero-size/zero-dim inputs, result dtypes, errors.
#include "opsgolden.h"

#define FILE_ "ops_unary.txt"

typedef torc_tensor *(*unary_fn)(const torc_tensor *);
static const struct {
    const char *name;
    unary_fn fn;
    og_tol tol;  // one rounding of the exact result in PyTorch and in the reference: bit for bit
} g_unary[] = {
    {"neg", torc_neg, OG_EXACT},       {"abs", torc_abs, OG_EXACT},         {"sign", torc_sign, OG_EXACT},
    {"sqrt", torc_sqrt, OG_CLOSE},    {"rsqrt", torc_rsqrt, OG_CLOSE},    {"square", torc_square, OG_EXACT},
    {"reciprocal", torc_reciprocal, OG_EXACT}, {"exp", torc_exp, OG_CLOSE}, {"log", torc_log, OG_CLOSE},
    {"sin", torc_sin, OG_CLOSE},      {"cos", torc_cos, OG_CLOSE},        {"tanh", torc_tanh, OG_CLOSE},
    {"sigmoid", torc_sigmoid, OG_CLOSE}, {"relu", torc_relu, OG_EXACT},    {"erf", torc_erf, OG_CLOSE},
    {"erfinv", torc_erfinv, OG_CLOSE}, {"logical_not", torc_logical_not, OG_EXACT},
};
#define N_UNARY ((int)(sizeof g_unary / sizeof g_unary[0]))

static unary_fn g_cur;
static torc_tensor *run_unary(const og_case *c, torc_tensor **in) {
    (void)c;
    return g_cur(in[0]);
}
START_TEST(unary_ops_match_pytorch) {
    g_cur = g_unary[_i].fn;
    og_run_cases(FILE_, g_unary[_i].name, run_unary, g_unary[_i].tol);
}
END_TEST

static torc_tensor *run_gelu(const og_case *c, torc_tensor **in) { return torc_gelu(in[0], og_param_int(c, "approx", 0)); }
START_TEST(gelu_matches_pytorch) { og_run_cases(FILE_, "gelu", run_gelu, OG_CLOSE); }
END_TEST

static torc_tensor *run_pow_scalar(const og_case *c, torc_tensor **in) { return torc_pow_scalar(in[0], c->sc[0]); }
START_TEST(pow_scalar_matches_pytorch) { og_run_cases(FILE_, "pow_scalar", run_pow_scalar, OG_CLOSE); }
END_TEST

// ---- in place ----
typedef torc_status (*unary_inplace_fn)(torc_tensor *);
static const struct {
    const char *name;
    unary_inplace_fn fn;
    og_tol tol;
} g_inplace[] = {
    {"neg_", torc_neg_, OG_EXACT}, {"sqrt_", torc_sqrt_, OG_CLOSE}, {"exp_", torc_exp_, OG_CLOSE},
    {"relu_", torc_relu_, OG_EXACT}, {"sigmoid_", torc_sigmoid_, OG_CLOSE},
};
#define N_INPLACE ((int)(sizeof g_inplace / sizeof g_inplace[0]))

static unary_inplace_fn g_cur_;
static torc_status run_inplace(const og_case *c, torc_tensor *self, torc_tensor **in) {
    (void)c, (void)in;
    return g_cur_(self);
}
START_TEST(unary_inplace_ops_match_pytorch) {
    g_cur_ = g_inplace[_i].fn;
    og_run_inplace_cases(FILE_, g_inplace[_i].name, run_inplace, g_inplace[_i].tol);
}
END_TEST

static torc_status run_pow_scalar_(const og_case *c, torc_tensor *self, torc_tensor **in) {
    (void)in;
    return torc_pow_scalar_(self, c->sc[0]);
}
START_TEST(pow_scalar_inplace_matches_pytorch) { og_run_inplace_cases(FILE_, "pow_scalar_", run_pow_scalar_, OG_CLOSE); }
END_TEST

// ---- hand-written checks ----
START_TEST(result_dtypes) {
    torc_scope_push();
    torc_tensor *i = torc_arange(1, 4, 1, TORC_DTYPE_I32), *b = torc_ones(TORC_SHAPE(2), TORC_DTYPE_BOOL),
                *h = torc_ones(TORC_SHAPE(2), TORC_DTYPE_F16);
    ck_assert_int_eq(torc_get_dtype(torc_sqrt(i)), TORC_DTYPE_F32);         // int -> default float
    ck_assert_int_eq(torc_get_dtype(torc_exp(b)), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_get_dtype(torc_sqrt(h)), TORC_DTYPE_F16);         // floats keep their width
    ck_assert_int_eq(torc_get_dtype(torc_neg(i)), TORC_DTYPE_I32);
    ck_assert_int_eq(torc_get_dtype(torc_square(b)), TORC_DTYPE_I64);       // bool ** 2 -> int64
    ck_assert_int_eq(torc_get_dtype(torc_logical_not(i)), TORC_DTYPE_BOOL);
    ck_assert_int_eq(torc_get_dtype(torc_pow_scalar(i, torc_s(2))), TORC_DTYPE_I32);    // int ** 2 stays int
    ck_assert_int_eq(torc_get_dtype(torc_pow_scalar(i, torc_s(0.5))), TORC_DTYPE_F32);  // int ** 0.5 is float
    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_F64), TORC_OK);
    ck_assert_int_eq(torc_get_dtype(torc_sqrt(i)), TORC_DTYPE_F64);         // the default dtype, not f32
    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_F32), TORC_OK);
    torc_scope_pop();
}
END_TEST

START_TEST(refusals_use_pytorch_messages) {
    torc_scope_push();
    torc_tensor *b = torc_ones(TORC_SHAPE(2), TORC_DTYPE_BOOL), *i = torc_arange(1, 4, 1, TORC_DTYPE_I64);
    ck_assert_ptr_null(torc_neg(b));
    tu_assert_error(TORC_ERR_DTYPE, "Negation, the `-` operator, on a bool tensor is not supported.");
    ck_assert_ptr_null(torc_gelu(i, false));
    tu_assert_error(TORC_ERR_DTYPE, "\"GeluKernelImpl\" not implemented for 'Long'");
    ck_assert_ptr_null(torc_pow_scalar(i, torc_s(-1)));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Integers to negative integer powers are not allowed.");
    const uint64_t v = torc_version(i);
    ck_assert_int_eq(torc_sqrt_(i), TORC_ERR_DTYPE);  // the float result cannot go back into int64
    tu_assert_error(TORC_ERR_DTYPE, "result type Float can't be cast to the desired output type Long");
    ck_assert_uint_eq(torc_version(i), v);
    tu_assert_values(i, TU_ARR(1, 2, 3), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(inplace_bumps_version_and_writes_through_views) {
    torc_scope_push();
    torc_tensor *base = torc_reshape(torc_arange(0, 6, 1, TORC_DTYPE_F32), TORC_SHAPE(2, 3));
    torc_tensor *col = torc_slice(base, 1, 0, INT64_MAX, 2);  // columns 0 and 2
    const uint64_t v = torc_version(base);
    ck_assert_int_eq(torc_neg_(col), TORC_OK);
    ck_assert_uint_gt(torc_version(base), v);
    tu_assert_values(base, TU_ARR(0, 1, -2, -3, 4, -5), 0);
    ck_assert_int_eq(torc_pow_scalar_(base, torc_s(2)), TORC_OK);
    tu_assert_values(base, TU_ARR(0, 1, 4, 9, 16, 25), 0);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("ops_unary");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, unary_ops_match_pytorch, 0, N_UNARY);
    tcase_add_test(tc, gelu_matches_pytorch);
    tcase_add_test(tc, pow_scalar_matches_pytorch);
    tcase_add_loop_test(tc, unary_inplace_ops_match_pytorch, 0, N_INPLACE);
    tcase_add_test(tc, pow_scalar_inplace_matches_pytorch);
    suite_add_tcase(s, tc);
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, result_dtypes);
    tcase_add_test(rules, refusals_use_pytorch_messages);
    tcase_add_test(rules, inplace_bumps_version_and_writes_through_views);
    suite_add_tcase(s, rules);
    return s;
}

int main(void) { return tu_run(make_suite()); }
