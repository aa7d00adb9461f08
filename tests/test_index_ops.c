// tests/test_index_ops.c — the copying ops (index_select ... tril, index_add, scatter_add, masked_scatter)
// against PyTorch goldens (tests/golden/ops_index.txt): every dtype, strided inputs, promotion, errors.
#include "opsgolden.h"

#define FILE_ "ops_index.txt"

static torc_tensor *run_case(const og_case *c, torc_tensor **in) {
    const int dim = (int)og_param_int(c, "dim", 0);
    if (!strcmp(c->op, "index_select")) return torc_index_select(in[0], dim, in[1]);
    if (!strcmp(c->op, "gather")) return torc_gather(in[0], dim, in[1]);
    if (!strcmp(c->op, "masked_select")) return torc_masked_select(in[0], in[1]);
    if (!strcmp(c->op, "where")) return torc_where(in[0], in[1], in[2]);
    if (!strcmp(c->op, "cat")) return torc_cat(c->nin, in, dim);
    if (!strcmp(c->op, "stack")) return torc_stack(c->nin, in, dim);
    if (!strcmp(c->op, "index_add")) return torc_index_add(in[0], dim, in[1], in[2]);
    if (!strcmp(c->op, "scatter_add")) return torc_scatter_add(in[0], dim, in[1], in[2]);
    if (!strcmp(c->op, "masked_scatter")) return torc_masked_scatter(in[0], in[1], in[2]);
    if (!strcmp(c->op, "triu")) return torc_triu(in[0], og_param_int(c, "k", 0));
    if (!strcmp(c->op, "tril")) return torc_tril(in[0], og_param_int(c, "k", 0));
    ck_abort_msg("unknown op %s", c->op);
    return NULL;
}

static const char *const g_ops[] = {"index_select", "gather", "masked_select", "where", "cat", "stack", "triu", "tril",
                                    "index_add", "scatter_add", "masked_scatter"};
#define N_OPS ((int)(sizeof g_ops / sizeof g_ops[0]))

START_TEST(copy_ops_match_pytorch) { og_run_cases(FILE_, g_ops[_i], run_case, OG_EXACT); }
END_TEST

// ---- hand-written checks ----
START_TEST(results_own_new_storage) {
    torc_scope_push();
    torc_tensor *x = torc_reshape(torc_arange(0, 6, 1, TORC_DTYPE_F32), TORC_SHAPE(2, 3));
    const int64_t iv[] = {2, 0};
    torc_tensor *idx = torc_tensor_from(iv, TORC_SHAPE(2), TORC_DTYPE_I64);
    torc_tensor *mask = torc_gt_scalar(x, torc_s(2));
    torc_tensor *outs[] = {torc_index_select(x, 1, idx), torc_masked_select(x, mask), torc_triu(x, 0),
                           torc_cat(2, (torc_tensor *[]){x, x}, 0), torc_stack(1, &x, 0), torc_where(mask, x, x)};
    for (int i = 0; i < 6; i++) {
        ck_assert_ptr_nonnull(outs[i]);
        ck_assert(!torc_same_storage(outs[i], x));
        ck_assert(torc_is_contiguous(outs[i]));
    }
    ck_assert_int_eq(torc_fill_(x, torc_s(-1)), TORC_OK);  // writes to x do not reach the copies
    tu_assert_values(outs[0], TU_ARR(2, 0, 5, 3), 0);
    tu_assert_values(outs[1], TU_ARR(3, 4, 5), 0);
    tu_assert_values(outs[2], TU_ARR(0, 1, 2, 0, 4, 5), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(shapes_and_dtypes) {
    torc_scope_push();
    torc_tensor *a = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F16), *b = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    torc_tensor *i = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_I64);
    tu_assert_shape(torc_cat(2, (torc_tensor *[]){a, b}, -1), 2, 6);
    ck_assert_int_eq(torc_get_dtype(torc_cat(2, (torc_tensor *[]){a, b}, 0)), TORC_DTYPE_F32);  // promoted
    tu_assert_shape(torc_stack(3, (torc_tensor *[]){a, a, a}, 1), 2, 3, 3);
    tu_assert_shape(torc_stack(2, (torc_tensor *[]){a, a}, -1), 2, 3, 2);
    ck_assert_int_eq(torc_get_dtype(torc_where(torc_gt_scalar(i, torc_s(0)), i, b)), TORC_DTYPE_F32);
    tu_assert_shape(torc_masked_select(a, torc_ones(TORC_SHAPE(3), TORC_DTYPE_BOOL)), 6);
    torc_scope_pop();
}
END_TEST

START_TEST(errors_change_nothing) {
    torc_scope_push();
    torc_tensor *x = torc_reshape(torc_arange(0, 6, 1, TORC_DTYPE_F32), TORC_SHAPE(2, 3));
    const int64_t bad[] = {0, 3};
    torc_tensor *idx = torc_tensor_from(bad, TORC_SHAPE(2), TORC_DTYPE_I64);
    ck_assert_ptr_null(torc_index_select(x, 1, idx));
    ck_assert_int_ne(torc_last_status(), TORC_OK);
    ck_assert_str_eq(torc_last_error(), "index out of range in self");
    ck_assert_ptr_null(torc_gather(x, 1, torc_reshape(idx, TORC_SHAPE(1, 2))));
    ck_assert_str_eq(torc_last_error(), "index 3 is out of bounds for dimension 1 with size 3");
    // Indices are int64: torc does not take PyTorch's int32 (nor float) index tensors.
    torc_tensor *i32 = torc_to_dtype(torc_zeros(TORC_SHAPE(1, 2), TORC_DTYPE_I64), TORC_DTYPE_I32);
    ck_assert_ptr_null(torc_index_select(x, 1, torc_reshape(i32, TORC_SHAPE(2))));
    tu_assert_error(TORC_ERR_DTYPE, "index_select(): Expected dtype int64 for index but got int32");
    ck_assert_ptr_null(torc_gather(x, 1, torc_to_dtype(i32, TORC_DTYPE_F32)));
    tu_assert_error(TORC_ERR_DTYPE, "gather(): Expected dtype int64 for index but got float32");
    ck_assert_ptr_null(torc_index_select(x, 2, idx));
    tu_assert_error(TORC_ERR_INDEX, "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    ck_assert_ptr_null(torc_cat(2, (torc_tensor *[]){x, torc_ones(TORC_SHAPE(2, 4), TORC_DTYPE_F32)}, 0));
    tu_assert_error(TORC_ERR_SHAPE, "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 "
                                    "for tensor number 1 in the list.");
    ck_assert_ptr_null(torc_triu(torc_ones(TORC_SHAPE(3), TORC_DTYPE_F32), 0));
    tu_assert_error(TORC_ERR_SHAPE, "triu: input tensor must have at least 2 dimensions");
    tu_assert_values(x, TU_ARR(0, 1, 2, 3, 4, 5), 0);
    ck_assert_uint_eq(torc_version(x), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(cat_skips_legacy_empty_tensors) {
    torc_scope_push();
    torc_tensor *x = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32), *e = torc_zeros(TORC_SHAPE(0), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    torc_tensor *c = torc_cat(3, (torc_tensor *[]){e, x, e}, 1);  // as torch: (0,) is skipped even along dim 1
    tu_assert_shape(c, 2, 3);
    ck_assert_int_eq(torc_backward(torc_sum(torc_mul(c, c), TORC_ALL_DIMS, false), NULL, false), TORC_OK);
    tu_assert_values(torc_grad(x), TU_ARR(2, 2, 2, 2, 2, 2), 0);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("index_ops");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, copy_ops_match_pytorch, 0, N_OPS);
    suite_add_tcase(s, tc);
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, results_own_new_storage);
    tcase_add_test(rules, shapes_and_dtypes);
    tcase_add_test(rules, errors_change_nothing);
    tcase_add_test(rules, cat_skips_legacy_empty_tensors);
    suite_add_tcase(s, rules);
    return s;
}

int main(void) { return tu_run(make_suite()); }
