// tests/test_matmul.c — torch.matmul's rules (1-D, 2-D, batched, broadcast batch dims) against PyTorch
// goldens (tests/golden/ops_matmul.txt) on contiguous and strided operands, plus the course examples.
#include "opsgolden.h"

static torc_tensor *run_matmul(const og_case *c, torc_tensor **in) {
    (void)c;
    return torc_matmul(in[0], in[1]);
}
START_TEST(matmul_matches_pytorch) { og_run_cases("ops_matmul.txt", "matmul", run_matmul, OG_CLOSE); }
END_TEST

START_TEST(ones_16x32_times_ones_32x2_is_32) {
    torc_scope_push();
    torc_tensor *r = torc_matmul(torc_ones(TORC_SHAPE(16, 32), TORC_DTYPE_F32), torc_ones(TORC_SHAPE(32, 2), TORC_DTYPE_F32));
    tu_assert_shape(r, 16, 2);
    ck_assert_int_eq(torc_get_dtype(r), TORC_DTYPE_F32);
    double *v = tu_values(r);
    for (int i = 0; i < 32; i++) ck_assert_double_eq(v[i], 32.0);
    free(v);
    torc_scope_pop();
}
END_TEST

START_TEST(batched_4x8x16x32_times_32x2) {
    torc_scope_push();
    torc_tensor *a = torc_ones(TORC_SHAPE(4, 8, 16, 32), TORC_DTYPE_F32), *b = torc_ones(TORC_SHAPE(32, 2), TORC_DTYPE_F32);
    torc_flops_reset();
    torc_tensor *r = torc_matmul(a, b);
    tu_assert_shape(r, 4, 8, 16, 2);
    tu_assert_strides(r, 256, 32, 2, 1);
    double *v = tu_values(r);
    for (int i = 0; i < 4 * 8 * 16 * 2; i++) ck_assert_double_eq(v[i], 32.0);
    free(v);
    // 2*M*N*K per matrix, times the batch
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, TORC_OP_MATMUL, TORC_DTYPE_F32), 2ull * 4 * 8 * 16 * 2 * 32);
    torc_scope_pop();
}
END_TEST

// A batched a times one matrix b is one GEMM of all the batch's rows where a's batch dims and rows
// form one run of rows (torch.matmul's fold); a batch that does not (a permuted, a sliced batch,
// b with a batch dim of 1) keeps the batched GEMM. Each result row equals its row of a times b.
START_TEST(batched_times_one_matrix_folds_or_not) {
    torc_scope_push();
    torc_tensor *base = torc_reshape(torc_arange(0, 3 * 4 * 5, 1, TORC_DTYPE_F32), TORC_SHAPE(3, 4, 5));
    torc_tensor *b = torc_reshape(torc_arange(-7, 23, 1, TORC_DTYPE_F32), TORC_SHAPE(5, 6));
    torc_tensor *as[4] = {
        base,                                                       // contiguous: folds
        torc_contiguous(torc_transpose(base, 0, 1)),                // (4, 3, 5) contiguous: folds
        torc_transpose(base, 0, 1),                                 // (4, 3, 5) permuted batch: does not fold
        torc_slice(base, 0, 0, 3, 2),                               // (2, 4, 5), batch stride 40: does not fold
    };
    torc_tensor *bs[2] = {b, torc_unsqueeze(b, 0)};                 // (5, 6) and (1, 5, 6)
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) {
            torc_tensor *r = torc_matmul(as[i], bs[j]);
            ck_assert_ptr_nonnull(r);
            const int64_t nb = torc_size(as[i], 0), M = torc_size(as[i], 1);
            tu_assert_shape(r, nb, M, 6);
            for (int64_t k = 0; k < nb; k++) {
                double *want = tu_values(torc_matmul(torc_select(as[i], 0, k), b));  // one 2-D product
                double *got = tu_values(torc_select(r, 0, k));
                for (int64_t e = 0; e < M * 6; e++) ck_assert_double_eq(got[e], want[e]);
                free(want);
                free(got);
            }
        }
    torc_scope_pop();
}
END_TEST

START_TEST(one_dim_rules) {
    torc_scope_push();
    torc_tensor *v = torc_arange(1, 4, 1, TORC_DTYPE_F32);                                 // (3)
    torc_tensor *m = torc_reshape(torc_arange(0, 12, 1, TORC_DTYPE_F32), TORC_SHAPE(3, 4)); // (3, 4)
    torc_tensor *dot = torc_matmul(v, v);  // (3) @ (3) -> zero-dim
    tu_assert_shape(dot);
    tu_assert_values(dot, TU_ARR(14), 0);
    torc_tensor *vm = torc_matmul(v, m);  // (3) @ (3, 4) -> (4): a row vector, the unit dim dropped
    tu_assert_shape(vm, 4);
    tu_assert_values(vm, TU_ARR(32, 38, 44, 50), 0);
    torc_tensor *mv = torc_matmul(torc_transpose(m, 0, 1), v);  // (4, 3) @ (3) -> (4), transposed operand
    tu_assert_shape(mv, 4);
    tu_assert_values(mv, TU_ARR(32, 38, 44, 50), 0);
    torc_tensor *bv = torc_matmul(torc_ones(TORC_SHAPE(2, 4, 3), TORC_DTYPE_F32), v);  // (2, 4, 3) @ (3) -> (2, 4)
    tu_assert_shape(bv, 2, 4);
    torc_tensor *vb = torc_matmul(v, torc_ones(TORC_SHAPE(5, 3, 2), TORC_DTYPE_F32));  // (3) @ (5, 3, 2) -> (5, 2)
    tu_assert_shape(vb, 5, 2);
    tu_assert_values(vb, TU_ARR(6, 6, 6, 6, 6, 6, 6, 6, 6, 6), 0);
    // broadcast batch dims: (2, 1, 4, 3) @ (5, 3, 2) -> (2, 5, 4, 2)
    tu_assert_shape(torc_matmul(torc_ones(TORC_SHAPE(2, 1, 4, 3), TORC_DTYPE_F32), torc_ones(TORC_SHAPE(5, 3, 2), TORC_DTYPE_F32)),
                    2, 5, 4, 2);
    torc_scope_pop();
}
END_TEST

START_TEST(transposed_and_sliced_operands) {
    torc_scope_push();
    torc_tensor *a = torc_reshape(torc_arange(0, 6, 1, TORC_DTYPE_F32), TORC_SHAPE(2, 3));
    torc_tensor *at = torc_transpose(a, 0, 1);  // (3, 2), strides (1, 3)
    ck_assert(!torc_is_contiguous(at));
    tu_assert_values(torc_matmul(a, at), TU_ARR(5, 14, 14, 50), 0);       // a @ a.T
    tu_assert_values(torc_matmul(at, a), TU_ARR(9, 12, 15, 12, 17, 22, 15, 22, 29), 0);
    torc_tensor *cols = torc_slice(a, 1, 0, INT64_MAX, 2);  // columns 0 and 2: (2, 2), strides (3, 2)
    tu_assert_values(torc_matmul(cols, cols), TU_ARR(6, 10, 15, 31), 0);
    // the operands are read, never written
    tu_assert_values(a, TU_ARR(0, 1, 2, 3, 4, 5), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(out_dtype_widens) {
    torc_scope_push();
    torc_tensor *a = torc_full(TORC_SHAPE(2, 257), 1.0, TORC_DTYPE_BF16), *b = torc_full(TORC_SHAPE(257, 2), 1.0, TORC_DTYPE_BF16);
    torc_tensor *r = torc_matmul_out_dtype(a, b, TORC_DTYPE_F32);
    ck_assert_int_eq(torc_get_dtype(r), TORC_DTYPE_F32);
    tu_assert_values(r, TU_ARR(257, 257, 257, 257), 0);  // 257 needs 9 significant bits: not rounded to bf16
    r = torc_matmul(a, b);
    ck_assert_int_eq(torc_get_dtype(r), TORC_DTYPE_BF16);
    tu_assert_values(r, TU_ARR(256, 256, 256, 256), 0);  // one rounding of the exact sum to bf16
    torc_scope_pop();
}
END_TEST

START_TEST(errors_use_pytorch_messages) {
    torc_scope_push();
    torc_tensor *f = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32), *d = torc_ones(TORC_SHAPE(3, 2), TORC_DTYPE_F64);
    ck_assert_ptr_null(torc_matmul(f, d));
    tu_assert_error(TORC_ERR_DTYPE, "expected m1 and m2 to have the same dtype, but got: float != double");
    ck_assert_ptr_null(torc_matmul(f, f));
    tu_assert_error(TORC_ERR_SHAPE, "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)");
    ck_assert_ptr_null(torc_matmul(torc_scalar_tensor(1, TORC_DTYPE_F32), f));
    tu_assert_error(TORC_ERR_SHAPE, "both arguments to matmul need to be at least 1D, but they are 0D and 2D");
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("matmul");
    TCase *tc = tcase_create("matmul");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, matmul_matches_pytorch);
    tcase_add_test(tc, ones_16x32_times_ones_32x2_is_32);
    tcase_add_test(tc, batched_4x8x16x32_times_32x2);
    tcase_add_test(tc, batched_times_one_matrix_folds_or_not);
    tcase_add_test(tc, one_dim_rules);
    tcase_add_test(tc, transposed_and_sliced_operands);
    tcase_add_test(tc, out_dtype_widens);
    tcase_add_test(tc, errors_use_pytorch_messages);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
