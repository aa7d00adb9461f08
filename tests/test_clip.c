// tests/test_clip.c — torc_clip_grad_norm_ against PyTorch's torch.nn.utils.clip_grad_norm_
// (tests/golden/nn_ops.txt): the total norm for norm types 2, inf, 1, 3, the clipped gradients,
// mixed dtypes, a negative max_norm, non-finite norms with and without error_if_nonfinite.
#include "ck.h"
#include <math.h>

#include "nngolden.h"
#include "testutil.h"
#include "torc/torc.h"

static ng_file *g_gold;

static void run_case(const char *name) {
    if (!g_gold) g_gold = ng_load("nn_ops.txt");
    const ng_case *c = ng_find(g_gold, name);
    torc_scope_push();
    const int n = (int)ng_param(c, "n", 0);
    torc_tensor *params[4], *grads[4];
    for (int i = 0; i < n; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "grad%d", i);
        grads[i] = ng_make(ng_get(c, tag));
        params[i] = torc_zeros_like(grads[i]);
        ck_assert_int_eq(torc_set_requires_grad(params[i], true), TORC_OK);
        ck_assert_int_eq(torc_set_grad(params[i], grads[i]), TORC_OK);
    }
    torc_tensor *total = torc_clip_grad_norm_(n, params, ng_param(c, "max_norm", 0), ng_param(c, "norm_type", 2),
                                              ng_param(c, "error_if_nonfinite", 0) != 0);
    if (c->error[0]) {
        ck_assert_ptr_null(total);
        ck_assert_msg(!strcmp(torc_last_error(), c->error), "%s: '%s'", name, torc_last_error());
        ck_assert_int_eq(torc_last_status(), TORC_ERR_RUNTIME);
        torc_clear_error();
        for (int i = 0; i < n; i++) {  // nothing changed
            char tag[32];
            snprintf(tag, sizeof tag, "grad%d", i);
            ng_assert_close("grad", torc_grad(params[i]), ng_get(c, tag), 0, 0);
        }
        torc_scope_pop();
        return;
    }
    ck_assert_msg(total != NULL, "%s: %s", name, torc_last_error());
    const double tol = 2e-7;  // f32 norms and products
    ng_assert_close("total", total, ng_get(c, "total"), tol, 0);
    ck_assert_int_eq(torc_get_dtype(total), ng_get(c, "total")->dtype);
    for (int i = 0; i < n; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "clipped%d", i);
        torc_tensor *g = torc_grad(params[i]);
        ck_assert_ptr_eq(g, grads[i]);  // clipped in place
        const double t = torc_get_dtype(g) == TORC_DTYPE_F16 ? 1e-3 : tol;
        ng_assert_close(tag, g, ng_get(c, tag), t, t);
    }
    torc_scope_pop();
}

static const char *const g_cases[] = {"clip_l2",         "clip_l2_no_clip",        "clip_inf",
                                      "clip_l1",         "clip_l3_f64",            "clip_negative_max",
                                      "clip_mixed_f16",  "clip_nonfinite_allowed", "clip_nonfinite_error",
                                      "clip_nan_error_inf_norm"};
#define N_CASES ((int)(sizeof g_cases / sizeof g_cases[0]))

NG_GOLDEN_TESTS(run_case, g_cases)

// Parameters without a gradient are skipped; none at all gives torch.tensor(0.0) and changes nothing.
START_TEST(parameters_without_gradients) {
    torc_scope_push();
    torc_tensor *a = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F32), *b = torc_zeros(TORC_SHAPE(2), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_requires_grad(a, true), TORC_OK);
    ck_assert_int_eq(torc_set_requires_grad(b, true), TORC_OK);
    torc_tensor *ps[2] = {a, b};
    torc_tensor *t = torc_clip_grad_norm_(2, ps, 1.0, 2.0, true);
    tu_assert_values(t, TU_ARR(0), 0);
    ck_assert_int_eq(torc_ndim(t), 0);
    ck_assert_int_eq(torc_get_dtype(t), TORC_DTYPE_F32);
    ck_assert_ptr_null(torc_grad(a));
    ck_assert_int_eq(torc_set_grad(b, torc_tensor_from((float[]){3, 4}, TORC_SHAPE(2), TORC_DTYPE_F32)), TORC_OK);
    tu_assert_values(torc_clip_grad_norm_(2, ps, 1.0, 2.0, false), TU_ARR(5), 0);
    tu_assert_values(torc_grad(b), TU_ARR(3 / (5 + 1e-6), 4 / (5 + 1e-6)), 1e-7);
    ck_assert_ptr_null(torc_grad(a));
    // the two halves, as torch.nn.utils.get_total_norm and clip_grads_with_norm_
    torc_tensor *g = torc_grad(b);
    torc_tensor *n = torc_get_total_norm(1, &g, INFINITY, false);
    ck_assert_int_eq(torc_clip_grads_with_norm_(2, ps, 0.4, n), TORC_OK);
    double m;
    ck_assert_int_eq(torc_item(torc_amax(torc_abs(torc_grad(b)), TORC_ALL_DIMS, false), &m), TORC_OK);
    ck_assert_double_eq_tol(m, 0.4, 1e-6);
    ck_assert_ptr_null(torc_clip_grad_norm_(2, (torc_tensor *[]){a, NULL}, 1.0, 2.0, false));
    tu_assert_error(TORC_ERR_INVALID_ARG, "parameter 1 is NULL");
    torc_clear_error();
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("clip");
    TCase *tc = tcase_create("clip");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, golden_default_backend, 0, N_CASES);
    tcase_add_loop_test(tc, golden_reference_backend, 0, N_CASES);
    tcase_add_test(tc, parameters_without_gradients);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
