// tests/test_course_ops.c — the op examples of the course notes torc grew from, with the values the
// notes show: arithmetic on [1, 4, 9], triu of ones, f16/bf16 and promotion, matmul shapes, copies.
#include "testutil.h"

static torc_tensor *vec(const double *v, int64_t n, torc_dtype dtype) {
    return torc_to_dtype(torc_tensor_from(v, 1, &n, TORC_DTYPE_F64), dtype);
}
#define VEC(dtype, ...) vec((const double[]){__VA_ARGS__}, (int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)), dtype)

START_TEST(arithmetic_on_1_4_9) {
    torc_scope_push();
    torc_tensor *x = VEC(TORC_DTYPE_F32, 1, 4, 9);
    tu_assert_values(torc_pow_scalar(x, torc_s(2)), TU_ARR(1, 16, 81), 0);
    tu_assert_values(torc_pow_scalar(x, torc_s(0.5)), TU_ARR(1, 2, 3), 0);
    tu_assert_values(torc_sqrt(x), TU_ARR(1, 2, 3), 0);
    tu_assert_values(torc_rsqrt(x), TU_ARR(1, 0.5, 1.0 / 3), 1e-7);
    tu_assert_values(torc_add(x, x), TU_ARR(2, 8, 18), 0);
    tu_assert_values(torc_mul(x, x), TU_ARR(1, 16, 81), 0);
    tu_assert_values(torc_div(x, x), TU_ARR(1, 1, 1), 0);
    tu_assert_values(torc_add_scalar(x, torc_s(1)), TU_ARR(2, 5, 10), 0);
    tu_assert_values(torc_mul_scalar(x, torc_s(2)), TU_ARR(2, 8, 18), 0);
    tu_assert_values(torc_div_scalar(x, torc_s(2)), TU_ARR(0.5, 2, 4.5), 0);
    tu_assert_values(torc_rdiv_scalar(x, torc_s(36)), TU_ARR(36, 9, 4), 0);
    tu_assert_values(torc_sub(x, torc_scalar_tensor(1, TORC_DTYPE_F32)), TU_ARR(0, 3, 8), 0);
    // the same on integers: division is true division, pow by an int stays int
    torc_tensor *xi = VEC(TORC_DTYPE_I64, 1, 4, 9);
    torc_tensor *q = torc_div_scalar(xi, torc_s(2));
    ck_assert_int_eq(torc_get_dtype(q), TORC_DTYPE_F32);
    tu_assert_values(q, TU_ARR(0.5, 2, 4.5), 0);
    torc_tensor *p = torc_pow_scalar(xi, torc_s(2));
    ck_assert_int_eq(torc_get_dtype(p), TORC_DTYPE_I64);
    tu_assert_values(p, TU_ARR(1, 16, 81), 0);
    ck_assert_int_eq(torc_get_dtype(torc_sqrt(xi)), TORC_DTYPE_F32);
    torc_scope_pop();
}
END_TEST

START_TEST(triu_of_ones) {
    torc_scope_push();
    torc_tensor *o = torc_ones(TORC_SHAPE(3, 3), TORC_DTYPE_F32);
    tu_assert_values(torc_triu(o, 0), TU_ARR(1, 1, 1, 0, 1, 1, 0, 0, 1), 0);
    tu_assert_values(torc_tril(o, 0), TU_ARR(1, 0, 0, 1, 1, 0, 1, 1, 1), 0);
    tu_assert_values(torc_triu(o, 1), TU_ARR(0, 1, 1, 0, 0, 1, 0, 0, 0), 0);
    tu_assert_values(torc_tril(o, -1), TU_ARR(0, 0, 0, 1, 0, 0, 1, 1, 0), 0);
    // a causal mask: where(tril(ones) == 0, -inf, 0)
    torc_tensor *mask = torc_eq_scalar(torc_tril(o, 0), torc_s(0));
    torc_tensor *att = torc_where(mask, torc_full(TORC_SHAPE(3, 3), -INFINITY, TORC_DTYPE_F32), torc_zeros(TORC_SHAPE(3, 3), TORC_DTYPE_F32));
    tu_assert_values(att, TU_ARR(0, -INFINITY, -INFINITY, 0, 0, -INFINITY, 0, 0, 0), 0);
    tu_assert_values(torc_softmax(att, -1), TU_ARR(1, 0, 0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3), 1e-7);
    torc_scope_pop();
}
END_TEST

START_TEST(half_and_bfloat16) {
    torc_scope_push();
    torc_tensor *tiny = torc_full(TORC_SHAPE(1), 1e-8, TORC_DTYPE_F32);
    double v;
    ck_assert_int_eq(torc_item(torc_to_dtype(tiny, TORC_DTYPE_F16), &v), TORC_OK);
    ck_assert(v == 0.0);  // below f16's smallest subnormal (~6e-8): underflows
    ck_assert_int_eq(torc_item(torc_to_dtype(tiny, TORC_DTYPE_BF16), &v), TORC_OK);
    ck_assert(v != 0.0);  // bf16 has f32's exponent range
    ck_assert(fabs(v - 1e-8) < 1e-10);
    torc_tensor *h = torc_ones(TORC_SHAPE(2), TORC_DTYPE_F16), *f = torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32);
    torc_tensor *s = torc_add(h, f);
    ck_assert_int_eq(torc_get_dtype(s), TORC_DTYPE_F32);  // f16 + f32 -> f32
    tu_assert_values(s, TU_ARR(2, 2), 0);
    torc_tensor *bf = torc_ones(TORC_SHAPE(2), TORC_DTYPE_BF16);
    ck_assert_int_eq(torc_get_dtype(torc_add(h, bf)), TORC_DTYPE_F32);  // f16 + bf16 -> f32
    ck_assert_int_eq(torc_get_dtype(torc_mul_scalar(h, torc_s(0.5))), TORC_DTYPE_F16);  // a scalar never widens
    // 2048 + 1 is not an f16 value: the sum rounds to even
    torc_tensor *big = torc_full(TORC_SHAPE(1), 2048, TORC_DTYPE_F16);
    tu_assert_values(torc_add_scalar(big, torc_s(1)), TU_ARR(2048), 0);
    tu_assert_values(torc_add_scalar(big, torc_s(3)), TU_ARR(2052), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(matmul_examples) {
    torc_scope_push();
    torc_tensor *r = torc_matmul(torc_ones(TORC_SHAPE(16, 32), TORC_DTYPE_F32), torc_ones(TORC_SHAPE(32, 2), TORC_DTYPE_F32));
    tu_assert_shape(r, 16, 2);
    tu_assert_values(torc_amin(r, TORC_ALL_DIMS, false), TU_ARR(32), 0);
    tu_assert_values(torc_amax(r, TORC_ALL_DIMS, false), TU_ARR(32), 0);
    torc_tensor *b = torc_matmul(torc_ones(TORC_SHAPE(4, 8, 16, 32), TORC_DTYPE_F32), torc_ones(TORC_SHAPE(32, 2), TORC_DTYPE_F32));
    tu_assert_shape(b, 4, 8, 16, 2);
    tu_assert_values(torc_amin(b, TORC_ALL_DIMS, false), TU_ARR(32), 0);
    tu_assert_values(torc_amax(b, TORC_ALL_DIMS, false), TU_ARR(32), 0);
    // 1-D rules: (3) @ (3) is a dot product (zero-dim); (2, 3) @ (3) is (2); (3) @ (3, 2) is (2)
    torc_tensor *v = VEC(TORC_DTYPE_F32, 1, 2, 3);
    torc_tensor *m = torc_reshape(torc_arange(0, 6, 1, TORC_DTYPE_F32), TORC_SHAPE(2, 3));
    torc_tensor *dot = torc_matmul(v, v);
    tu_assert_shape(dot);
    tu_assert_values(dot, TU_ARR(14), 0);
    tu_assert_values(torc_matmul(m, v), TU_ARR(8, 26), 0);
    tu_assert_values(torc_matmul(v, torc_transpose(m, 0, 1)), TU_ARR(8, 26), 0);
    // batch broadcasting: (2, 1, 2, 3) @ (5, 3, 4) -> (2, 5, 2, 4)
    tu_assert_shape(torc_matmul(torc_ones(TORC_SHAPE(2, 1, 2, 3), TORC_DTYPE_F32), torc_ones(TORC_SHAPE(5, 3, 4), TORC_DTYPE_F32)),
                    2, 5, 2, 4);
    // x @ x.T with the transpose as a view
    tu_assert_values(torc_matmul(m, torc_transpose(m, 0, 1)), TU_ARR(5, 14, 14, 50), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(copy_examples) {
    torc_scope_push();
    torc_tensor *x = torc_reshape(torc_arange(0, 6, 1, TORC_DTYPE_F32), TORC_SHAPE(2, 3));  // [[0,1,2],[3,4,5]]
    torc_tensor *y = torc_mul_scalar(x, torc_s(10));
    torc_tensor *c0 = torc_cat(2, (torc_tensor *[]){x, y}, 0);
    tu_assert_shape(c0, 4, 3);
    tu_assert_values(c0, TU_ARR(0, 1, 2, 3, 4, 5, 0, 10, 20, 30, 40, 50), 0);
    torc_tensor *c1 = torc_cat(2, (torc_tensor *[]){x, y}, 1);
    tu_assert_shape(c1, 2, 6);
    tu_assert_values(c1, TU_ARR(0, 1, 2, 0, 10, 20, 3, 4, 5, 30, 40, 50), 0);
    torc_tensor *s0 = torc_stack(2, (torc_tensor *[]){x, y}, 0);
    tu_assert_shape(s0, 2, 2, 3);
    torc_tensor *s2 = torc_stack(2, (torc_tensor *[]){x, y}, 2);
    tu_assert_shape(s2, 2, 3, 2);
    tu_assert_values(s2, TU_ARR(0, 0, 1, 10, 2, 20, 3, 30, 4, 40, 5, 50), 0);
    tu_assert_values(torc_where(torc_gt_scalar(x, torc_s(2)), x, y), TU_ARR(0, 10, 20, 3, 4, 5), 0);
    const int64_t gi[] = {2, 0, 1, 1};
    torc_tensor *g = torc_gather(x, 1, torc_tensor_from(gi, TORC_SHAPE(2, 2), TORC_DTYPE_I64));
    tu_assert_values(g, TU_ARR(2, 0, 4, 4), 0);
    const int64_t si[] = {2, 0, 2};
    torc_tensor *sel = torc_index_select(x, 1, torc_tensor_from(si, TORC_SHAPE(3), TORC_DTYPE_I64));
    tu_assert_shape(sel, 2, 3);
    tu_assert_values(sel, TU_ARR(2, 0, 2, 5, 3, 5), 0);
    torc_tensor *ms = torc_masked_select(x, torc_ge_scalar(x, torc_s(3)));
    tu_assert_shape(ms, 3);
    tu_assert_values(ms, TU_ARR(3, 4, 5), 0);
    tu_assert_values(torc_triu(x, 0), TU_ARR(0, 1, 2, 0, 4, 5), 0);
    tu_assert_values(torc_tril(x, 0), TU_ARR(0, 0, 0, 3, 4, 0), 0);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("course_ops");
    TCase *tc = tcase_create("course");
    tcase_add_test(tc, arithmetic_on_1_4_9);
    tcase_add_test(tc, triu_of_ones);
    tcase_add_test(tc, half_and_bfloat16);
    tcase_add_test(tc, matmul_examples);
    tcase_add_test(tc, copy_examples);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
