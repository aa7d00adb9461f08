// tests/test_ops_reduce.c — reductions (sum ... logsumexp, argmax/argmin) and softmax against PyTorch
// goldens (tests/golden/ops_reduce.txt): dims, negative dims, keepdim, strided inputs, result dtypes, errors.
#include "opsgolden.h"

#define FILE_ "ops_reduce.txt"

typedef torc_tensor *(*reduce_fn)(const torc_tensor *, int, const int *, bool);
static const struct {
    const char *name;
    reduce_fn fn;
    og_tol tol;
} g_reduce[] = {
    {"sum", torc_sum, OG_CLOSE},   {"mean", torc_mean, OG_CLOSE}, {"prod", torc_prod, OG_CLOSE},
    {"amax", torc_amax, OG_EXACT}, {"amin", torc_amin, OG_EXACT}, {"logsumexp", torc_logsumexp, OG_LOOSE},
};
#define N_REDUCE ((int)(sizeof g_reduce / sizeof g_reduce[0]))

static reduce_fn g_cur;
static torc_tensor *run_reduce(const og_case *c, torc_tensor **in) {
    int dims[TORC_MAX_DIMS];
    const int n = og_param_dims(c, dims);
    return g_cur(in[0], n, n ? dims : NULL, og_param_int(c, "keepdim", 0));
}
START_TEST(reductions_match_pytorch) {
    g_cur = g_reduce[_i].fn;
    og_run_cases(FILE_, g_reduce[_i].name, run_reduce, g_reduce[_i].tol);
}
END_TEST

static torc_tensor *run_var(const og_case *c, torc_tensor **in) {
    int dims[TORC_MAX_DIMS];
    const int n = og_param_dims(c, dims);
    const double corr = og_param_double(c, "correction", 1);
    return !strcmp(c->op, "var") ? torc_var(in[0], n, n ? dims : NULL, corr, og_param_int(c, "keepdim", 0))
                                 : torc_std(in[0], n, n ? dims : NULL, corr, og_param_int(c, "keepdim", 0));
}
START_TEST(var_std_match_pytorch) {
    og_run_cases(FILE_, "var", run_var, OG_CLOSE);
    og_run_cases(FILE_, "std", run_var, OG_CLOSE);
}
END_TEST

static torc_tensor *run_norm(const og_case *c, torc_tensor **in) {
    int dims[TORC_MAX_DIMS];
    const int n = og_param_dims(c, dims);
    return torc_norm(in[0], og_param_double(c, "p", 2), n, n ? dims : NULL, og_param_int(c, "keepdim", 0));
}
START_TEST(norm_matches_pytorch) { og_run_cases(FILE_, "norm", run_norm, OG_CLOSE); }
END_TEST

static torc_tensor *run_arg(const og_case *c, torc_tensor **in) {
    const char *d = og_param(c, "dim");
    const int dim = !strncmp(d, "none", 4) ? TORC_DIM_NONE : atoi(d);
    const bool keep = og_param_int(c, "keepdim", 0);
    return !strcmp(c->op, "argmax") ? torc_argmax(in[0], dim, keep) : torc_argmin(in[0], dim, keep);
}
START_TEST(argmax_argmin_match_pytorch) {
    og_run_cases(FILE_, "argmax", run_arg, OG_EXACT);
    og_run_cases(FILE_, "argmin", run_arg, OG_EXACT);
}
END_TEST

static torc_tensor *run_softmax(const og_case *c, torc_tensor **in) {
    const int dim = (int)og_param_int(c, "dim", 0);
    return !strcmp(c->op, "softmax") ? torc_softmax(in[0], dim) : torc_log_softmax(in[0], dim);
}
START_TEST(softmax_log_softmax_match_pytorch) {
    og_run_cases(FILE_, "softmax", run_softmax, OG_LOOSE);
    og_run_cases(FILE_, "log_softmax", run_softmax, OG_LOOSE);
}
END_TEST

// ---- hand-written checks ----
START_TEST(result_dtypes_and_shapes) {
    torc_scope_push();
    torc_tensor *i = torc_reshape(torc_arange(0, 24, 1, TORC_DTYPE_I32), TORC_SHAPE(2, 3, 4));
    torc_tensor *b = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_BOOL), *h = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F16);
    torc_tensor *s = torc_sum(i, TORC_ALL_DIMS, false);
    ck_assert_int_eq(torc_get_dtype(s), TORC_DTYPE_I64);  // sum(int) -> int64
    ck_assert_int_eq(torc_ndim(s), 0);
    tu_assert_values(s, TU_ARR(276), 0);
    ck_assert_int_eq(torc_get_dtype(torc_sum(b, TORC_ALL_DIMS, false)), TORC_DTYPE_I64);
    ck_assert_int_eq(torc_get_dtype(torc_prod(b, TORC_ALL_DIMS, false)), TORC_DTYPE_I64);
    ck_assert_int_eq(torc_get_dtype(torc_amax(i, TORC_ALL_DIMS, false)), TORC_DTYPE_I32);
    ck_assert_int_eq(torc_get_dtype(torc_argmax(h, 0, false)), TORC_DTYPE_I64);
    ck_assert_int_eq(torc_get_dtype(torc_mean(h, TORC_ALL_DIMS, false)), TORC_DTYPE_F16);
    ck_assert_int_eq(torc_get_dtype(torc_logsumexp(i, 1, (int[]){0}, false)), TORC_DTYPE_F32);
    // keepdim, several dims, negative dims
    torc_tensor *k = torc_sum(i, 2, (int[]){0, -1}, true);
    tu_assert_shape(k, 1, 3, 1);
    tu_assert_values(k, TU_ARR(60, 92, 124), 0);
    tu_assert_shape(torc_sum(i, 2, (int[]){-1, 0}, false), 3);
    tu_assert_shape(torc_amax(i, 1, (int[]){1}, false), 2, 4);
    tu_assert_shape(torc_argmin(i, TORC_DIM_NONE, true), 1, 1, 1);
    tu_assert_shape(torc_argmin(i, TORC_DIM_NONE, false));
    torc_scope_pop();
}
END_TEST

START_TEST(refusals_use_pytorch_messages) {
    torc_scope_push();
    torc_tensor *i = torc_arange(0, 6, 1, TORC_DTYPE_I64), *f = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    ck_assert_ptr_null(torc_mean(i, TORC_ALL_DIMS, false));
    tu_assert_error(TORC_ERR_DTYPE, "mean(): could not infer output dtype. Input dtype must be either a floating point or "
                                    "complex dtype. Got: Long");
    ck_assert_ptr_null(torc_sum(f, 1, (int[]){2}, false));
    tu_assert_error(TORC_ERR_INDEX, "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    ck_assert_ptr_null(torc_sum(f, 2, (int[]){1, -1}, false));
    tu_assert_error(TORC_ERR_INVALID_ARG, "dim 1 appears multiple times in the list of dims");
    ck_assert_ptr_null(torc_var(i, TORC_ALL_DIMS, 1, false));
    tu_assert_error(TORC_ERR_DTYPE, "std and var only support floating point and complex dtypes");
    ck_assert_ptr_null(torc_softmax(f, -3));
    tu_assert_error(TORC_ERR_INDEX, "Dimension out of range (expected to be in range of [-2, 1], but got -3)");
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("ops_reduce");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, reductions_match_pytorch, 0, N_REDUCE);
    tcase_add_test(tc, var_std_match_pytorch);
    tcase_add_test(tc, norm_matches_pytorch);
    tcase_add_test(tc, argmax_argmin_match_pytorch);
    tcase_add_test(tc, softmax_log_softmax_match_pytorch);
    suite_add_tcase(s, tc);
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, result_dtypes_and_shapes);
    tcase_add_test(rules, refusals_use_pytorch_messages);
    suite_add_tcase(s, rules);
    return s;
}

int main(void) { return tu_run(make_suite()); }
