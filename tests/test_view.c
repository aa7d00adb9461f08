// tests/test_view.c — views share storage (the course's examples): strides, offsets, writes
// seen through every view, view vs reshape vs contiguous, as_strided, expand, squeeze.
#include "testutil.h"

static torc_tensor *arange_f32(int64_t n) { return torc_arange(0, (double)n, 1, TORC_DTYPE_F32); }

START_TEST(strides_of_4x4_and_element_index) {
    torc_scope_push();
    torc_tensor *x = torc_reshape(arange_f32(16), TORC_SHAPE(4, 4));
    tu_assert_strides(x, 4, 1);
    // Element [1, 2] lives at 1*4 + 2*1 = 6 in storage.
    const int64_t idx = 1 * torc_stride(x, 0) + 2 * torc_stride(x, 1);
    ck_assert_int_eq(idx, 6);
    double v;
    ck_assert_int_eq(torc_item(torc_select(torc_select(x, 0, 1), 0, 2), &v), TORC_OK);
    ck_assert_double_eq(v, 6.0);
    torc_scope_pop();
}
END_TEST

START_TEST(row_column_view_transpose_share_storage_and_see_writes) {
    torc_scope_push();
    torc_tensor *x = torc_tensor_from((float[]){1, 2, 3, 4, 5, 6}, TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    torc_tensor *row = torc_select(x, 0, 0), *col = torc_select(x, 1, 1);
    torc_tensor *v = torc_view(x, TORC_SHAPE(3, 2)), *t = torc_transpose(x, 0, 1);
    ck_assert(torc_same_storage(x, row) && torc_same_storage(x, col));
    ck_assert(torc_same_storage(x, v) && torc_same_storage(x, t));
    tu_assert_values(row, TU_ARR(1, 2, 3), 0);
    tu_assert_values(col, TU_ARR(2, 5), 0);
    // A write through one view is seen by the base and every other view.
    ck_assert_int_eq(torc_fill_(torc_select(row, 0, 1), torc_s(100.0)), TORC_OK);
    tu_assert_values(x, TU_ARR(1, 100, 3, 4, 5, 6), 0);
    tu_assert_values(col, TU_ARR(100, 5), 0);
    tu_assert_values(v, TU_ARR(1, 100, 3, 4, 5, 6), 0);
    tu_assert_values(t, TU_ARR(1, 4, 100, 5, 3, 6), 0);
    ck_assert_int_eq(torc_fill_(torc_select(torc_select(t, 0, 2), 0, 1), torc_s(-6.0)), TORC_OK);
    tu_assert_values(x, TU_ARR(1, 100, 3, 4, 5, -6), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(transpose_is_not_contiguous_and_view_fails) {
    torc_scope_push();
    torc_tensor *x = torc_reshape(arange_f32(6), TORC_SHAPE(2, 3));
    torc_tensor *t = torc_transpose(x, 1, 0);
    ck_assert(torc_is_contiguous(x));
    ck_assert(!torc_is_contiguous(t));
    tu_assert_strides(t, 1, 3);
    ck_assert_ptr_null(torc_view(t, TORC_SHAPE(2, 3)));
    tu_assert_error(TORC_ERR_SHAPE, "view size is not compatible with input tensor's size and stride (at least one "
                                    "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
    torc_tensor *c = torc_view(torc_contiguous(t), TORC_SHAPE(2, 3));
    ck_assert_ptr_nonnull(c);
    ck_assert(!torc_same_storage(c, x));
    tu_assert_values(c, TU_ARR(0, 3, 1, 4, 2, 5), 0);
    // reshape copies only when it must.
    torc_tensor *r1 = torc_reshape(x, TORC_SHAPE(6)), *r2 = torc_reshape(t, TORC_SHAPE(6));
    ck_assert(torc_same_storage(r1, x));
    ck_assert(!torc_same_storage(r2, x));
    tu_assert_values(r2, TU_ARR(0, 3, 1, 4, 2, 5), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(slice_offset_and_strides) {
    torc_scope_push();
    torc_tensor *x = torc_reshape(torc_arange(0, 12, 1, TORC_DTYPE_I64), TORC_SHAPE(3, 4));
    torc_tensor *y = torc_slice(torc_slice(x, 0, 1, INT64_MAX, 1), 1, 1, 3, 1);  // x[1:, 1:3]
    ck_assert_int_eq(torc_storage_offset(y), 5);
    tu_assert_strides(y, 4, 1);
    tu_assert_shape(y, 2, 2);
    tu_assert_values(y, TU_ARR(5, 6, 9, 10), 0);
    ck_assert(!torc_is_contiguous(y));
    torc_tensor *s = torc_slice(x, 1, 0, INT64_MAX, 2);  // x[:, ::2]
    tu_assert_strides(s, 4, 2);
    tu_assert_values(s, TU_ARR(0, 2, 4, 6, 8, 10), 0);
    tu_assert_values(torc_narrow(x, 0, 1, 2), TU_ARR(4, 5, 6, 7, 8, 9, 10, 11), 0);
    ck_assert_ptr_null(torc_slice(x, 0, 0, 2, 0));
    tu_assert_error(TORC_ERR_INVALID_ARG, "slice step must be positive");
    ck_assert_ptr_null(torc_narrow(x, 1, 3, 2));
    tu_assert_error(TORC_ERR_INDEX, "start (3) + length (2) exceeds dimension size (4).");
    torc_scope_pop();
}
END_TEST

START_TEST(as_strided_windows) {
    torc_scope_push();
    torc_tensor *x = arange_f32(6);
    torc_tensor *w = torc_as_strided(x, TORC_SHAPE(4, 3), (int64_t[]){1, 1}, 0);
    tu_assert_values(w, TU_ARR(0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5), 0);
    ck_assert(torc_same_storage(w, x));
    ck_assert_ptr_null(torc_as_strided(x, TORC_SHAPE(5, 3), (int64_t[]){1, 1}, 0));
    tu_assert_error(TORC_ERR_INVALID_ARG, "out of bounds for storage of size 24");
    torc_scope_pop();
}
END_TEST

START_TEST(expand_has_stride_zero) {
    torc_scope_push();
    torc_tensor *x = torc_tensor_from((float[]){1, 2, 3}, TORC_SHAPE(3, 1), TORC_DTYPE_F32);
    torc_tensor *e = torc_expand(x, TORC_SHAPE(3, 4));
    tu_assert_strides(e, 1, 0);
    tu_assert_values(e, TU_ARR(1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), 0);
    torc_tensor *e2 = torc_expand(x, TORC_SHAPE(2, -1, 4));
    tu_assert_shape(e2, 2, 3, 4);
    tu_assert_strides(e2, 0, 1, 0);
    ck_assert_ptr_null(torc_expand(x, TORC_SHAPE(4, 4)));
    tu_assert_error(TORC_ERR_SHAPE, "The expanded size of the tensor (4) must match the existing size (3) at "
                                    "non-singleton dimension 0.  Target sizes: [4, 4].  Tensor sizes: [3, 1]");
    torc_scope_pop();
}
END_TEST

START_TEST(unsqueeze_squeeze_flatten_permute) {
    torc_scope_push();
    torc_tensor *x = torc_reshape(arange_f32(24), TORC_SHAPE(2, 3, 4));
    torc_tensor *u = torc_unsqueeze(x, 1);
    tu_assert_shape(u, 2, 1, 3, 4);
    tu_assert_strides(u, 12, 12, 4, 1);
    tu_assert_shape(torc_unsqueeze(x, -1), 2, 3, 4, 1);
    tu_assert_shape(torc_squeeze(u, 1), 2, 3, 4);
    tu_assert_shape(torc_squeeze(x, 0), 2, 3, 4);
    tu_assert_shape(torc_squeeze_all(torc_reshape(x, TORC_SHAPE(1, 2, 1, 12, 1))), 2, 12);
    tu_assert_shape(torc_flatten(x, 1, -1), 2, 12);
    torc_tensor *p = torc_permute(x, 3, (int[]){2, 0, 1});
    tu_assert_shape(p, 4, 2, 3);
    tu_assert_strides(p, 1, 12, 4);
    ck_assert_ptr_null(torc_permute(x, 3, (int[]){0, 0, 1}));
    tu_assert_error(TORC_ERR_INVALID_ARG, "permute(): duplicate dims are not allowed.");
    ck_assert_ptr_null(torc_transpose(x, 0, 3));
    tu_assert_error(TORC_ERR_INDEX, "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
    torc_scope_pop();
}
END_TEST

START_TEST(view_shape_inference_and_errors) {
    torc_scope_push();
    torc_tensor *x = arange_f32(6);
    tu_assert_shape(torc_view(x, TORC_SHAPE(-1, 2)), 3, 2);
    ck_assert_ptr_null(torc_view(x, TORC_SHAPE(4, -1)));
    tu_assert_error(TORC_ERR_SHAPE, "shape '[4, -1]' is invalid for input of size 6");
    ck_assert_ptr_null(torc_view(x, TORC_SHAPE(-1, -1)));
    tu_assert_error(TORC_ERR_SHAPE, "only one dimension can be inferred");
    torc_scope_pop();
}
END_TEST

START_TEST(advanced_indexing_copies) {
    torc_scope_push();
    torc_tensor *x = torc_reshape(arange_f32(12), TORC_SHAPE(3, 4));
    torc_tensor *idx = torc_tensor_from((int64_t[]){2, 0}, TORC_SHAPE(2), TORC_DTYPE_I64);
    torc_tensor *rows = torc_index_select(x, 0, idx);
    ck_assert(!torc_same_storage(rows, x));
    tu_assert_values(rows, TU_ARR(8, 9, 10, 11, 0, 1, 2, 3), 0);
    ck_assert_int_eq(torc_fill_(rows, torc_s(-1.0)), TORC_OK);
    tu_assert_values(torc_select(x, 0, 2), TU_ARR(8, 9, 10, 11), 0);  // the base is unchanged
    torc_scope_pop();
}
END_TEST

START_TEST(detach_and_clone) {
    torc_scope_push();
    torc_tensor *x = arange_f32(3);
    torc_tensor *d = torc_detach(x), *c = torc_clone(x);
    ck_assert(torc_same_storage(d, x));
    ck_assert(!torc_same_storage(c, x));
    ck_assert_int_eq(torc_fill_(d, torc_s(7.0)), TORC_OK);
    tu_assert_values(x, TU_ARR(7, 7, 7), 0);
    tu_assert_values(c, TU_ARR(0, 1, 2), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(inplace_ops_bump_the_version) {
    torc_scope_push();
    torc_tensor *x = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F32);
    torc_tensor *v = torc_view(x, TORC_SHAPE(3));
    const uint64_t v0 = torc_version(x);
    ck_assert_int_eq(torc_add_scalar_(v, torc_s(1.0)), TORC_OK);
    ck_assert_uint_eq(torc_version(x), v0 + 1);
    ck_assert_uint_eq(torc_version(v), v0 + 1);
    ck_assert_int_eq(torc_mul_(x, v), TORC_OK);
    ck_assert_uint_eq(torc_version(x), v0 + 2);
    torc_scope_pop();
}
END_TEST

int main(void) {
    Suite *s = suite_create("view");
    TCase *tc = tcase_create("view");
    tcase_add_test(tc, strides_of_4x4_and_element_index);
    tcase_add_test(tc, row_column_view_transpose_share_storage_and_see_writes);
    tcase_add_test(tc, transpose_is_not_contiguous_and_view_fails);
    tcase_add_test(tc, slice_offset_and_strides);
    tcase_add_test(tc, as_strided_windows);
    tcase_add_test(tc, expand_has_stride_zero);
    tcase_add_test(tc, unsqueeze_squeeze_flatten_permute);
    tcase_add_test(tc, view_shape_inference_and_errors);
    tcase_add_test(tc, advanced_indexing_copies);
    tcase_add_test(tc, detach_and_clone);
    tcase_add_test(tc, inplace_ops_bump_the_version);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
