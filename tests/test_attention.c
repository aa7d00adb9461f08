// tests/test_attention.c — torc_scaled_dot_product_attention against PyTorch's math backend
// (tests/golden/nn_ops.txt): values and gradients for masks, causal shapes, scales, broadcast and
// grouped-query heads, f16 / bf16; PyTorch's errors; dropout from the generator; autocast.
#include <check.h>
#include <math.h>

#include "nngolden.h"
#include "testutil.h"
#include "torc/torc.h"

static ng_file *g_gold;

// max |a - b| over all elements (b moved to a's device).
static double max_abs_diff(torc_tensor *a, torc_tensor *b) {
    double d = NAN;
    torc_scope_push();
    torc_tensor *m = torc_amax(torc_abs(torc_sub(a, torc_to_device(b, torc_get_device(a)))), TORC_ALL_DIMS, false);
    ck_assert_msg(m && torc_item(m, &d) == TORC_OK, "%s", torc_last_error());
    torc_scope_pop();
    return d;
}

static torc_tensor *sdpa_of(const ng_case *c, torc_tensor *q, torc_tensor *k, torc_tensor *v) {
    const ng_tensor *m = ng_get(c, "mask");
    return torc_scaled_dot_product_attention(q, k, v, m ? ng_make(m) : NULL, ng_param(c, "dropout_p", 0.0),
                                             ng_param(c, "is_causal", 0) != 0, ng_param(c, "scale", NAN),
                                             ng_param(c, "enable_gqa", 0) != 0, NULL);
}

// Tolerances by dtype: the golden is PyTorch in f64 on the same inputs; f16 / bf16 compute in f32
// and round once, so their error is the rounding of the result (and f32's).
static double tol_of(torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F64: return 1e-12;
    case TORC_DTYPE_F32: return 2e-6;
    case TORC_DTYPE_F16: return 1e-3;
    default: return 8e-3;
    }
}

static void run_case(const char *name) {
    if (!g_gold) g_gold = ng_load("nn_ops.txt");
    const ng_case *c = ng_find(g_gold, name);
    torc_scope_push();
    torc_tensor *q = ng_make(ng_get(c, "q")), *k = ng_make(ng_get(c, "k")), *v = ng_make(ng_get(c, "v"));
    if (c->error[0]) {
        ck_assert_ptr_null(sdpa_of(c, q, k, v));
        ck_assert_msg(!strcmp(torc_last_error(), c->error), "%s: '%s', expected '%s'", name, torc_last_error(),
                      c->error);
        torc_clear_error();
        torc_scope_pop();
        return;
    }
    const torc_dtype dt = torc_get_dtype(q);
    const bool grads = dt == TORC_DTYPE_F64 || dt == TORC_DTYPE_F32;
    if (grads) {
        torc_tensor *in[3] = {q, k, v};
        for (int i = 0; i < 3; i++) ck_assert_int_eq(torc_set_requires_grad(in[i], true), TORC_OK);
    }
    torc_tensor *out = sdpa_of(c, q, k, v);
    ck_assert_msg(out != NULL, "%s: %s", name, torc_last_error());
    ck_assert_int_eq(torc_get_dtype(out), dt);
    const double tol = tol_of(dt);
    ng_assert_close(name, out, ng_get(c, "out"), tol, tol);
    if (grads && ng_get(c, "dy")) {
        torc_tensor *dy = ng_make(ng_get(c, "dy"));
        ck_assert_int_eq(torc_backward(out, dy, false), TORC_OK);
        const double gt = dt == TORC_DTYPE_F64 ? 1e-11 : 2e-5;
        ng_assert_close("dq", torc_grad(q), ng_get(c, "dq"), gt, gt);
        ng_assert_close("dk", torc_grad(k), ng_get(c, "dk"), gt, gt);
        ng_assert_close("dv", torc_grad(v), ng_get(c, "dv"), gt, gt);
    }
    torc_scope_pop();
}

static const char *const g_cases[] = {
    "sdpa_basic",          "sdpa_f32",          "sdpa_2d",           "sdpa_causal_square",   "sdpa_causal_wide",
    "sdpa_causal_tall",    "sdpa_bool_mask",    "sdpa_float_mask",   "sdpa_float_mask_f32",  "sdpa_scale",
    "sdpa_negative_scale", "sdpa_broadcast",    "sdpa_gqa",          "sdpa_f16",             "sdpa_bf16",
    "sdpa_empty_keys",     "sdpa_err_causal_mask", "sdpa_err_dtypes", "sdpa_err_dims",       "sdpa_err_mask_dtype",
    "sdpa_err_mask_f64",   "sdpa_err_gqa_heads", "sdpa_err_dropout"};
#define N_CASES ((int)(sizeof g_cases / sizeof g_cases[0]))

NG_GOLDEN_TESTS(run_case, g_cases)

// Dropout on the attention weights: softmax(q k^T / sqrt(E)) through torc_dropout with the same
// generator state, then @ v; the same numbers on the reference backend; the generator advances
// by one draw per weight.
START_TEST(dropout_is_torc_dropout_of_the_weights) {
    torc_scope_push();
    torc_tensor *q = torc_randn(TORC_SHAPE(2, 2, 5, 4), TORC_DTYPE_F32, NULL);
    torc_tensor *k = torc_randn(TORC_SHAPE(2, 2, 6, 4), TORC_DTYPE_F32, NULL);
    torc_tensor *v = torc_randn(TORC_SHAPE(2, 2, 6, 3), TORC_DTYPE_F32, NULL);
    torc_generator *g = torc_generator_new(42);
    torc_tensor *got = torc_scaled_dot_product_attention(q, k, v, NULL, 0.25, false, NAN, false, g);
    uint64_t seed, offset;
    torc_generator_get_state(g, &seed, &offset);
    ck_assert_uint_eq(offset, 2 * 2 * 5 * 6);
    torc_generator_set_state(g, 42, 0);
    torc_tensor *w = torc_softmax(torc_div_scalar(torc_matmul(q, torc_transpose(k, -2, -1)), torc_s(2.0)), -1);
    torc_tensor *want = torc_matmul(torc_dropout(w, 0.25, true, g), v);
    ck_assert_double_le(max_abs_diff(got, want), 1e-6);
    torc_device *ref = torc_device_get("reference");
    torc_generator_set_state(g, 42, 0);
    torc_tensor *on_ref = torc_scaled_dot_product_attention(torc_to_device(q, ref), torc_to_device(k, ref),
                                                            torc_to_device(v, ref), NULL, 0.25, false, NAN, false, g);
    ck_assert_double_le(max_abs_diff(got, on_ref), 1e-6);
    // p = 1: every weight dropped, zeros; p <= 0 or NaN: no dropout, no draws
    tu_assert_values(torc_sum(torc_abs(torc_scaled_dot_product_attention(q, k, v, NULL, 1.0, false, NAN, false, g)),
                              TORC_ALL_DIMS, false),
                     TU_ARR(0), 0);
    torc_generator_get_state(g, &seed, &offset);
    torc_tensor *a = torc_scaled_dot_product_attention(q, k, v, NULL, -0.5, false, NAN, false, g);
    torc_tensor *b = torc_scaled_dot_product_attention(q, k, v, NULL, NAN, false, NAN, false, g);
    torc_tensor *c = torc_scaled_dot_product_attention(q, k, v, NULL, 0.0, false, NAN, false, g);
    uint64_t after;
    torc_generator_get_state(g, &seed, &after);
    ck_assert_uint_eq(after, offset);
    ck_assert_double_eq(max_abs_diff(a, c), 0);
    ck_assert_double_eq(max_abs_diff(b, c), 0);
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

// PyTorch's autocast runs the op in the lower precision: f32 inputs give a bf16 result, the
// gradients reach the f32 leaves as f32.
START_TEST(autocast_runs_in_the_lower_precision) {
    torc_scope_push();
    torc_tensor *q = torc_randn(TORC_SHAPE(1, 2, 4, 8), TORC_DTYPE_F32, NULL);
    torc_tensor *k = torc_randn(TORC_SHAPE(1, 2, 4, 8), TORC_DTYPE_F32, NULL);
    torc_tensor *v = torc_randn(TORC_SHAPE(1, 2, 4, 8), TORC_DTYPE_F32, NULL);
    ck_assert_int_eq(torc_set_requires_grad(q, true), TORC_OK);
    ck_assert_int_eq(torc_autocast_begin(TORC_DTYPE_BF16), TORC_OK);
    torc_tensor *o = torc_scaled_dot_product_attention(q, k, v, NULL, 0.0, true, NAN, false, NULL);
    ck_assert_int_eq(torc_autocast_end(), TORC_OK);
    ck_assert_int_eq(torc_get_dtype(o), TORC_DTYPE_BF16);
    // the same as casting by hand and running without autocast
    torc_tensor *want = torc_scaled_dot_product_attention(torc_to_dtype(q, TORC_DTYPE_BF16), torc_to_dtype(k, TORC_DTYPE_BF16),
                                                          torc_to_dtype(v, TORC_DTYPE_BF16), NULL, 0.0, true, NAN,
                                                          false, NULL);
    ck_assert_double_eq(max_abs_diff(o, want), 0);
    ck_assert_int_eq(torc_backward(torc_sum(torc_to_dtype(o, TORC_DTYPE_F32), TORC_ALL_DIMS, false), NULL, false),
                     TORC_OK);
    ck_assert_int_eq(torc_get_dtype(torc_grad(q)), TORC_DTYPE_F32);
    ck_assert(!torc_is_autocast_enabled());
    torc_scope_pop();
}
END_TEST

START_TEST(mask_must_fit_and_arguments_be_tensors) {
    torc_scope_push();
    torc_tensor *q = torc_zeros(TORC_SHAPE(1, 2, 3, 4), TORC_DTYPE_F32), *k = torc_zeros(TORC_SHAPE(1, 2, 5, 4), TORC_DTYPE_F32);
    torc_tensor *v = torc_zeros(TORC_SHAPE(1, 2, 5, 6), TORC_DTYPE_F32);
    torc_tensor *m = torc_ones(TORC_SHAPE(2, 2, 3, 5), TORC_DTYPE_BOOL);
    ck_assert_ptr_null(torc_scaled_dot_product_attention(q, k, v, m, 0.0, false, NAN, false, NULL));
    tu_assert_error(TORC_ERR_SHAPE, "output with shape [1, 2, 3, 5] doesn't match the broadcast shape [2, 2, 3, 5]");
    torc_clear_error();
    ck_assert_ptr_null(torc_scaled_dot_product_attention(q, NULL, v, NULL, 0.0, false, NAN, false, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    torc_clear_error();
    ck_assert_ptr_null(torc_scaled_dot_product_attention(torc_zeros(TORC_SHAPE(3, 4), TORC_DTYPE_I64),
                                                         torc_zeros(TORC_SHAPE(3, 4), TORC_DTYPE_I64),
                                                         torc_zeros(TORC_SHAPE(3, 4), TORC_DTYPE_I64), NULL, 0.0, false,
                                                         NAN, false, NULL));
    tu_assert_error(TORC_ERR_DTYPE, "expected scalar type Float but found Long");
    torc_clear_error();
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, golden_default_backend, 0, N_CASES);
    tcase_add_loop_test(tc, golden_reference_backend, 0, N_CASES);
    tcase_add_test(tc, dropout_is_torc_dropout_of_the_weights);
    tcase_add_test(tc, autocast_runs_in_the_lower_precision);
    tcase_add_test(tc, mask_must_fit_and_arguments_be_tensors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
