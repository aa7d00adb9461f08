// tests/test_embedding.c — torc_embedding against PyTorch (tests/golden/nn_ops.txt): values,
// the weight's gradient (padding_idx's row zero), PyTorch's errors, and a backward whose bits are
// the sequential float sum in index order (PyTorch's CPU kernel) on every host backend.
#include "ck.h"
#include <math.h>

#include "nngolden.h"
#include "testutil.h"
#include "torc/torc.h"

static ng_file *g_gold;

// Runs the golden case on the current default device: out and dweight of sum(out * dy).
static void run_case(const char *name) {
    if (!g_gold) g_gold = ng_load("nn_ops.txt");  // once per test process (Check forks one per test)
    const ng_case *c = ng_find(g_gold, name);
    torc_scope_push();
    torc_tensor *w = ng_make(ng_get(c, "weight")), *idx = ng_make(ng_get(c, "indices"));
    const int64_t pad = (int64_t)ng_param(c, "padding_idx", -1);
    if (c->error[0]) {
        ck_assert_ptr_null(torc_embedding(w, idx, pad));
        ck_assert_msg(!strcmp(torc_last_error(), c->error), "%s: '%s', expected '%s'", name, torc_last_error(),
                      c->error);
        torc_clear_error();
        torc_scope_pop();
        return;
    }
    ck_assert_int_eq(torc_set_requires_grad(w, true), TORC_OK);
    torc_tensor *out = torc_embedding(w, idx, pad);
    ng_assert_close(name, out, ng_get(c, "out"), 0, 0);  // a copy: exact
    ck_assert_int_eq(torc_get_dtype(out), torc_get_dtype(w));
    torc_tensor *loss = torc_sum(torc_mul(out, ng_make(ng_get(c, "dy"))), TORC_ALL_DIMS, false);
    ck_assert_int_eq(torc_backward(loss, NULL, false), TORC_OK);
    // golden sums are exact (f64); f32 adds round once per row added
    const double tol = torc_get_dtype(w) == TORC_DTYPE_F64 ? 1e-15 : 1e-6;
    ng_assert_close(name, torc_grad(w), ng_get(c, "dweight"), tol, tol);
    torc_scope_pop();
}

static const char *const g_cases[] = {"embedding_f32",          "embedding_f64_padding", "embedding_i32_indices",
                                      "embedding_scalar_index", "embedding_3d_indices",  "embedding_empty",
                                      "embedding_err_bounds",   "embedding_err_dtype",   "embedding_err_padding",
                                      "embedding_err_weight_dim"};
#define N_CASES ((int)(sizeof g_cases / sizeof g_cases[0]))

START_TEST(golden_default_backend) { run_case(g_cases[_i]); }
END_TEST

START_TEST(golden_reference_backend) {
    torc_device *ref = torc_device_get("reference"), *def = torc_default_device();
    ck_assert_int_eq(torc_set_default_device(ref), TORC_OK);
    run_case(g_cases[_i]);
    torc_set_default_device(def);
}
END_TEST

// The weight gradient is the rows of dy added in index order into zeros, one float add at a time
// (PyTorch's embedding_dense_backward_cpu): the same bits on every run and backend, whatever the
// thread count (tests/threads.sh runs the probe's embedding at 1, 2 and 3 threads).
START_TEST(backward_is_the_sequential_sum) {
    enum { V = 37, C = 24, N = 3000 };
    torc_scope_push();
    torc_generator *g = torc_generator_new(3);
    torc_tensor *w = torc_randn(TORC_SHAPE(V, C), TORC_DTYPE_F32, g);
    torc_tensor *idx = torc_randint(0, V, TORC_SHAPE(N), TORC_DTYPE_I64, g);
    torc_tensor *dy = torc_randn(TORC_SHAPE(N, C), TORC_DTYPE_F32, g);
    torc_generator_free(g);
    int64_t *hi = malloc(N * sizeof *hi);
    float *hdy = malloc((size_t)N * C * sizeof *hdy), *want = calloc((size_t)V * C, sizeof *want);
    float *got = malloc((size_t)V * C * sizeof *got);
    ck_assert_int_eq(torc_copy_to_host(idx, hi, N * sizeof *hi), TORC_OK);
    ck_assert_int_eq(torc_copy_to_host(dy, hdy, (size_t)N * C * sizeof *hdy), TORC_OK);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < C; k++) want[hi[n] * C + k] += hdy[n * C + k];
    const char *devs[] = {NULL, "reference"};
    for (int d = 0; d < 2; d++) {
        torc_device *dev = devs[d] ? torc_device_get(devs[d]) : torc_default_device();
        torc_tensor *wd = torc_clone(torc_to_device(w, dev));
        ck_assert_int_eq(torc_set_requires_grad(wd, true), TORC_OK);
        torc_tensor *out = torc_embedding(wd, torc_to_device(idx, dev), TORC_EMBEDDING_NO_PADDING);
        ck_assert_int_eq(torc_backward(out, torc_to_device(dy, dev), false), TORC_OK);
        ck_assert_int_eq(torc_copy_to_host(torc_grad(wd), got, (size_t)V * C * sizeof *got), TORC_OK);
        ck_assert_msg(!memcmp(got, want, (size_t)V * C * sizeof *got), "%s: dweight differs from the sequential sum",
                      torc_device_name(dev));
    }
    free(hi), free(hdy), free(want), free(got);
    torc_scope_pop();
}
END_TEST

START_TEST(padding_row_gets_no_gradient_and_no_grad_mode_records_nothing) {
    torc_scope_push();
    torc_tensor *w = torc_randn(TORC_SHAPE(5, 2), TORC_DTYPE_F32, NULL);
    torc_tensor *idx = torc_tensor_from((int32_t[]){4, 0, 4, 4}, TORC_SHAPE(2, 2), TORC_DTYPE_I32);
    ck_assert_int_eq(torc_set_requires_grad(w, true), TORC_OK);
    torc_tensor *out = torc_embedding(w, idx, 4);
    tu_assert_shape(out, 2, 2, 2);
    ck_assert_int_eq(torc_backward(torc_sum(out, TORC_ALL_DIMS, false), NULL, false), TORC_OK);
    tu_assert_values(torc_grad(w), TU_ARR(1, 1, 0, 0, 0, 0, 0, 0, 0, 0), 0);
    torc_no_grad_begin();
    torc_tensor *o2 = torc_embedding(w, idx, 4);
    torc_no_grad_end();
    ck_assert(!torc_requires_grad(o2));
    ck_assert_ptr_null(torc_grad_fn_name(o2));
    torc_tensor *row4 = torc_select(w, 0, 4);
    torc_tensor *got = torc_select(torc_select(o2, 0, 0), 0, 0);
    tu_assert_values(torc_sub(got, row4), TU_ARR(0, 0), 0);  // the padding row's values are read
    torc_scope_pop();
}
END_TEST

START_TEST(errors_name_the_arguments) {
    torc_scope_push();
    torc_tensor *w = torc_zeros(TORC_SHAPE(4, 3), TORC_DTYPE_F32);
    torc_tensor *idx = torc_tensor_from((int64_t[]){0, 1}, TORC_SHAPE(2), TORC_DTYPE_I64);
    ck_assert_ptr_null(torc_embedding(w, idx, -2));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Padding_idx must be within num_embeddings");
    torc_clear_error();
    ck_assert_ptr_null(torc_embedding(NULL, idx, -1));
    tu_assert_error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    torc_clear_error();
    ck_assert_ptr_null(torc_embedding(w, torc_zeros(TORC_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), TORC_DTYPE_I64), -1));
    tu_assert_error(TORC_ERR_SHAPE, "more than 8 dims");
    torc_clear_error();
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("embedding");
    TCase *tc = tcase_create("embedding");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, golden_default_backend, 0, N_CASES);
    tcase_add_loop_test(tc, golden_reference_backend, 0, N_CASES);
    tcase_add_test(tc, backward_is_the_sequential_sum);
    tcase_add_test(tc, padding_row_gets_no_gradient_and_no_grad_mode_records_nothing);
    tcase_add_test(tc, errors_name_the_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
