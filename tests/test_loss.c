// tests/test_loss.c — torc_cross_entropy_ex / torc_nll_loss_ex against PyTorch
// (tests/golden/nn_ops.txt): ignore_index, the three reductions, label smoothing, spatial dims,
// class probabilities, values and gradients, PyTorch's errors; the thin wrappers.
#include "ck.h"
#include <math.h>

#include "nngolden.h"
#include "testutil.h"
#include "torc/torc.h"

static ng_file *g_gold;

static torc_reduction reduction_of(const ng_case *c) {
    char b[16];
    const char *r = ng_param_str(c, "reduction", b, sizeof b);
    ck_assert_ptr_nonnull(r);
    return !strcmp(r, "none") ? TORC_REDUCTION_NONE : !strcmp(r, "sum") ? TORC_REDUCTION_SUM : TORC_REDUCTION_MEAN;
}

static torc_tensor *loss_of(const ng_case *c, torc_tensor *x, torc_tensor *t) {
    char b[32];
    const int64_t ii = (int64_t)ng_param(c, "ignore_index", -100);
    if (!strcmp(ng_param_str(c, "op", b, sizeof b), "nll_loss")) return torc_nll_loss_ex(x, t, ii, reduction_of(c));
    return torc_cross_entropy_ex(x, t, ii, reduction_of(c), ng_param(c, "label_smoothing", 0.0));
}

static void run_case(const char *name) {
    if (!g_gold) g_gold = ng_load("nn_ops.txt");
    const ng_case *c = ng_find(g_gold, name);
    torc_scope_push();
    torc_tensor *x = ng_make(ng_get(c, "logits")), *t = ng_make(ng_get(c, "target"));
    if (c->error[0]) {
        ck_assert_ptr_null(loss_of(c, x, t));
        // log_softmax of an integer tensor: torc names its own kernel
        const char *want = strstr(c->error, "not implemented for") ? "not implemented for 'Long'" : c->error;
        ck_assert_msg(strstr(torc_last_error(), want), "%s: '%s', expected '%s'", name, torc_last_error(), c->error);
        torc_clear_error();
        torc_scope_pop();
        return;
    }
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    torc_tensor *out = loss_of(c, x, t);
    ck_assert_msg(out != NULL, "%s: %s", name, torc_last_error());
    const double tol = torc_get_dtype(x) == TORC_DTYPE_F64 ? 1e-13 : 2e-6;
    ng_assert_close(name, out, ng_get(c, "out"), tol, tol);
    torc_tensor *dy = ng_make(ng_get(c, "dy"));
    ck_assert_int_eq(torc_backward(out, torc_to_dtype(dy, torc_get_dtype(out)), false), TORC_OK);
    if (torc_numel(x)) ng_assert_close("dlogits", torc_grad(x), ng_get(c, "dlogits"), tol, tol);
    torc_scope_pop();
}

static const char *const g_cases[] = {
    "ce_ignore_mean",     "ce_smooth_mean",       "nll_ignore_mean",        "ce_ignore_sum",
    "ce_smooth_sum",      "nll_ignore_sum",       "ce_ignore_none",         "ce_smooth_none",
    "nll_ignore_none",    "ce_f32",               "ce_all_ignored_mean",    "ce_all_ignored_sum",
    "ce_all_ignored_smooth", "ce_ignore_in_range", "ce_ignore_minus_one",   "ce_u8_target",
    "ce_1d",              "ce_1d_none",           "ce_spatial_3d",          "ce_spatial_3d_none",
    "ce_spatial_4d_smooth", "ce_spatial_5d_sum",  "ce_empty_mean",          "ce_empty_sum",
    "ce_probs",           "ce_probs_smooth_none", "ce_probs_spatial_sum",   "ce_negative_smoothing",
    "ce_err_bounds",      "ce_err_negative",      "ce_err_int32",           "ce_err_batch",
    "ce_err_smoothing",   "ce_err_spatial",       "ce_err_spatial_4d",      "ce_err_spatial_4d_size",
    "ce_err_probs_dtype", "ce_err_logits_dtype",  "ce_err_multi_target"};
#define N_CASES ((int)(sizeof g_cases / sizeof g_cases[0]))

NG_GOLDEN_TESTS(run_case, g_cases)

// torc_cross_entropy and torc_nll_loss are the _ex forms with PyTorch's defaults: -100 is ignored.
START_TEST(wrappers_use_pytorchs_defaults) {
    torc_scope_push();
    torc_tensor *x = torc_randn(TORC_SHAPE(4, 3), TORC_DTYPE_F64, NULL);
    torc_tensor *t = torc_tensor_from((int64_t[]){2, -100, 0, 1}, TORC_SHAPE(4), TORC_DTYPE_I64);
    double a, b;
    ck_assert_int_eq(torc_item(torc_cross_entropy(x, t), &a), TORC_OK);
    ck_assert_int_eq(torc_item(torc_cross_entropy_ex(x, t, -100, TORC_REDUCTION_MEAN, 0.0), &b), TORC_OK);
    ck_assert_double_eq(a, b);
    ck_assert_int_eq(torc_item(torc_nll_loss(torc_log_softmax(x, 1), t), &a), TORC_OK);
    ck_assert_double_eq(a, b);
    ck_assert_ptr_null(torc_cross_entropy_ex(x, t, -100, (torc_reduction)7, 0.0));
    tu_assert_error(TORC_ERR_INVALID_ARG, "7 is not a valid value for reduction");
    torc_clear_error();
    ck_assert_ptr_null(torc_cross_entropy_ex(x, torc_softmax(x, 1), 0, TORC_REDUCTION_MEAN, 0.0));
    tu_assert_error(TORC_ERR_INVALID_ARG, "ignore_index is not supported for floating point target");
    torc_clear_error();
    torc_scope_pop();
}
END_TEST

// Under autocast the loss runs in f32 (bf16 logits give an f32 loss), the targets stay integer.
START_TEST(autocast_computes_in_f32) {
    torc_scope_push();
    torc_tensor *x = torc_to_dtype(torc_randn(TORC_SHAPE(4, 3), TORC_DTYPE_F32, NULL), TORC_DTYPE_BF16);
    torc_tensor *t = torc_tensor_from((int64_t[]){2, -100, 0, 1}, TORC_SHAPE(4), TORC_DTYPE_I64);
    ck_assert_int_eq(torc_autocast_begin(TORC_DTYPE_BF16), TORC_OK);
    torc_tensor *l = torc_cross_entropy_ex(x, t, -100, TORC_REDUCTION_SUM, 0.1);
    ck_assert_int_eq(torc_autocast_end(), TORC_OK);
    ck_assert_int_eq(torc_get_dtype(l), TORC_DTYPE_F32);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("loss");
    TCase *tc = tcase_create("loss");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, golden_default_backend, 0, N_CASES);
    tcase_add_loop_test(tc, golden_reference_backend, 0, N_CASES);
    tcase_add_test(tc, wrappers_use_pytorchs_defaults);
    tcase_add_test(tc, autocast_computes_in_f32);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
