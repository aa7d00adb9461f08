// tests/test_tensor.c — creation, inspection, ownership (scopes), the RNG's reproducibility,
// the printer, and errors that leave everything unchanged.
#include "testutil.h"

START_TEST(zeros_is_f32_and_128_bytes) {
    torc_scope_push();
    torc_tensor *x = torc_zeros(TORC_SHAPE(4, 8), TORC_DTYPE_F32);
    ck_assert_ptr_nonnull(x);
    ck_assert_int_eq(torc_get_dtype(x), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_numel(x), 32);
    ck_assert_uint_eq(torc_element_size(x), 4);
    ck_assert_uint_eq(torc_nbytes(x), 128);
    ck_assert_int_eq(torc_ndim(x), 2);
    ck_assert_int_eq(torc_size(x, -1), 8);
    ck_assert(torc_is_contiguous(x));
    double s;
    ck_assert_int_eq(torc_item(torc_sum(x, TORC_ALL_DIMS, false), &s), TORC_OK);
    ck_assert_double_eq(s, 0.0);
    torc_scope_pop();
}
END_TEST

START_TEST(factories_fill_expected_values) {
    torc_scope_push();
    tu_assert_values(torc_ones(TORC_SHAPE(2, 2), TORC_DTYPE_I32), TU_ARR(1, 1, 1, 1), 0);
    tu_assert_values(torc_full(TORC_SHAPE(3), 2.5, TORC_DTYPE_BF16), TU_ARR(2.5, 2.5, 2.5), 0);
    tu_assert_values(torc_arange(1, 2.5, 0.5, TORC_DTYPE_F64), TU_ARR(1, 1.5, 2), 0);
    tu_assert_values(torc_arange(5, 0, -2, TORC_DTYPE_I64), TU_ARR(5, 3, 1), 0);
    tu_assert_values(torc_linspace(0, 1, 5, TORC_DTYPE_F32), TU_ARR(0, 0.25, 0.5, 0.75, 1), 0);
    tu_assert_values(torc_eye(2, 3, TORC_DTYPE_F32), TU_ARR(1, 0, 0, 0, 1, 0), 0);
    torc_tensor *from = torc_tensor_from((int16_t[]){-3, 7}, TORC_SHAPE(2), TORC_DTYPE_I16);
    tu_assert_values(from, TU_ARR(-3, 7), 0);
    torc_tensor *s = torc_scalar_tensor(4.0, TORC_DTYPE_F64);
    ck_assert_int_eq(torc_ndim(s), 0);
    ck_assert_int_eq(torc_numel(s), 1);
    int64_t iv;
    ck_assert_int_eq(torc_item_i64(s, &iv), TORC_OK);
    ck_assert_int_eq(iv, 4);
    ck_assert_ptr_null(torc_arange(0, 1, 0, TORC_DTYPE_F32));
    tu_assert_error(TORC_ERR_INVALID_ARG, "step must be nonzero");
    ck_assert_ptr_null(torc_zeros(TORC_SHAPE(2, -1), TORC_DTYPE_F32));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Trying to create tensor with negative dimension -1: [2, -1]");
    torc_scope_pop();
}
END_TEST

START_TEST(random_is_reproducible_and_in_range) {
    torc_scope_push();
    torc_manual_seed(42);
    torc_tensor *a = torc_randn(TORC_SHAPE(1000), TORC_DTYPE_F32, NULL);
    torc_manual_seed(42);
    torc_tensor *b = torc_randn(TORC_SHAPE(1000), TORC_DTYPE_F32, NULL);
    double *va = tu_values(a), *vb = tu_values(b);
    double mean = 0, var = 0;
    for (int i = 0; i < 1000; i++) {
        ck_assert_double_eq(va[i], vb[i]);
        mean += va[i];
    }
    mean /= 1000;
    for (int i = 0; i < 1000; i++) var += (va[i] - mean) * (va[i] - mean);
    var /= 999;
    ck_assert_msg(fabs(mean) < 0.15 && fabs(var - 1) < 0.15, "randn mean %g var %g", mean, var);
    free(va), free(vb);

    // An explicit generator: its own stream, and its state round-trips.
    torc_generator *g = torc_generator_new(7);
    torc_tensor *u1 = torc_rand(TORC_SHAPE(100), TORC_DTYPE_F64, g);
    uint64_t seed, off;
    torc_generator_get_state(g, &seed, &off);
    ck_assert_uint_eq(seed, 7);
    ck_assert_uint_eq(off, 100);
    torc_tensor *u2 = torc_rand(TORC_SHAPE(100), TORC_DTYPE_F64, g);
    torc_generator_set_state(g, 7, 100);
    torc_tensor *u3 = torc_rand(TORC_SHAPE(100), TORC_DTYPE_F64, g);
    double *v1 = tu_values(u1), *v2 = tu_values(u2), *v3 = tu_values(u3);
    for (int i = 0; i < 100; i++) {
        ck_assert(v1[i] >= 0 && v1[i] < 1);
        ck_assert_double_eq(v2[i], v3[i]);
    }
    ck_assert(v1[0] != v2[0]);
    free(v1), free(v2), free(v3);
    torc_generator_free(g);

    torc_tensor *r = torc_randint(-2, 3, TORC_SHAPE(500), TORC_DTYPE_I64, NULL);
    double *vr = tu_values(r);
    bool seen[5] = {false};
    for (int i = 0; i < 500; i++) {
        ck_assert(vr[i] >= -2 && vr[i] < 3 && vr[i] == floor(vr[i]));
        seen[(int)vr[i] + 2] = true;
    }
    for (int i = 0; i < 5; i++) ck_assert(seen[i]);
    free(vr);

    torc_tensor *tn = torc_empty(TORC_SHAPE(2000), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_trunc_normal_(tn, 0.0, 1.0, -2.0, 2.0, NULL), TORC_OK);
    double *vt = tu_values(tn);
    for (int i = 0; i < 2000; i++) ck_assert(vt[i] >= -2.0 && vt[i] <= 2.0);
    free(vt);
    torc_scope_pop();
}
END_TEST

START_TEST(scopes_free_what_was_not_kept) {
    torc_tensor *kept;
    torc_scope_push();
    torc_tensor *a = torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32);
    torc_scope_push();
    torc_tensor *b = torc_add(a, a);
    kept = torc_keep(torc_mul(b, b));  // passes to the outer scope
    torc_scope_pop();
    tu_assert_values(kept, TU_ARR(4, 4), 0);
    torc_keep(kept);  // and out of the outer one: now the caller's
    torc_scope_pop();
    tu_assert_values(kept, TU_ARR(4, 4), 0);
    torc_release(kept);
    // Outside any scope the caller owns each result.
    torc_tensor *c = torc_zeros(TORC_SHAPE(1), TORC_DTYPE_F32);
    torc_tensor *d = torc_retain(c);
    torc_release(c);
    tu_assert_values(d, TU_ARR(0), 0);
    torc_release(d);
}
END_TEST

START_TEST(memory_accounting_tracks_tags) {
    torc_device *dev = torc_default_device();
    torc_memory_stats s0, s1, s2;
    ck_assert_int_eq(torc_memory_stats_get(dev, &s0), TORC_OK);
    torc_tensor *p = torc_zeros(TORC_SHAPE(256), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_mem_tag(p, TORC_MEM_PARAMETER), TORC_OK);
    ck_assert_int_eq(torc_memory_stats_get(dev, &s1), TORC_OK);
    ck_assert_uint_eq(s1.in_use[TORC_MEM_PARAMETER] - s0.in_use[TORC_MEM_PARAMETER], 1024);
    ck_assert_uint_eq(s1.in_use[TORC_MEM_ACTIVATION], s0.in_use[TORC_MEM_ACTIVATION]);
    ck_assert(s1.total_peak >= s1.total_in_use);
    torc_release(p);
    ck_assert_int_eq(torc_memory_stats_get(dev, &s2), TORC_OK);
    ck_assert_uint_eq(s2.in_use[TORC_MEM_PARAMETER], s0.in_use[TORC_MEM_PARAMETER]);
    ck_assert(s2.peak[TORC_MEM_PARAMETER] >= s0.in_use[TORC_MEM_PARAMETER] + 1024);
    torc_memory_reset_peak(dev);
    ck_assert_int_eq(torc_memory_stats_get(dev, &s2), TORC_OK);
    ck_assert_uint_eq(s2.peak[TORC_MEM_PARAMETER], s2.in_use[TORC_MEM_PARAMETER]);
    // Kept blocks go back to the system; live tensors stay intact.
    torc_tensor *big = torc_full(TORC_SHAPE(1 << 16), 2.0, TORC_DTYPE_F32), *freed = torc_zeros(TORC_SHAPE(1 << 16), TORC_DTYPE_F32);
    ck_assert(big && freed);
    torc_release(freed);
    ck_assert_int_eq(torc_empty_cache(dev), TORC_OK);
    double v = 0;
    torc_tensor *total = torc_sum(big, 0, NULL, false);
    ck_assert_int_eq(torc_item(total, &v), TORC_OK);
    ck_assert_double_eq(v, 131072.0);
    torc_release(total);
    torc_release(big);
    torc_clear_error();  // an error handled earlier would be kept (the first error of a chain wins)
    ck_assert_int_eq(torc_empty_cache(NULL), TORC_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "dev is NULL"));
}
END_TEST

START_TEST(flops_are_counted_per_op_and_dtype) {
    torc_scope_push();
    torc_flops_reset();
    torc_tensor *a = torc_ones(TORC_SHAPE(3, 5), TORC_DTYPE_F32), *b = torc_ones(TORC_SHAPE(5, 7), TORC_DTYPE_F32);
    torc_matmul(a, b);
    torc_add(a, a);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, TORC_OP_MATMUL, TORC_DTYPE_F32), 2 * 3 * 5 * 7);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, TORC_OP_ADD, -1), 15);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, -1, -1), 2 * 3 * 5 * 7 + 15);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_BACKWARD, -1, -1), 0);
    ck_assert_str_eq(torc_op_name(TORC_OP_MATMUL), "matmul");
    torc_scope_pop();
}
END_TEST

static void assert_repr(torc_tensor *t, const char *expect) {
    char *r = torc_repr(t);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(!strcmp(r, expect), "repr:\n%s\nexpected:\n%s", r, expect);
    free(r);
}

START_TEST(repr_looks_like_pytorch) {
    torc_scope_push();
    assert_repr(torc_tensor_from((float[]){1, 2, 3}, TORC_SHAPE(3), TORC_DTYPE_F32), "tensor([1., 2., 3.])");
    assert_repr(torc_tensor_from((float[]){1, 2.5f, -3, 4}, TORC_SHAPE(2, 2), TORC_DTYPE_F32),
                "tensor([[ 1.0000,  2.5000],\n        [-3.0000,  4.0000]])");
    assert_repr(torc_tensor_from((int64_t[]){1, -20, 300}, TORC_SHAPE(3), TORC_DTYPE_I64), "tensor([  1, -20, 300])");
    assert_repr(torc_tensor_from((int32_t[]){1, 2}, TORC_SHAPE(2), TORC_DTYPE_I32), "tensor([1, 2], dtype=torch.int32)");
    assert_repr(torc_tensor_from((bool[]){true, false}, TORC_SHAPE(2), TORC_DTYPE_BOOL), "tensor([ True, False])");
    assert_repr(torc_scalar_tensor(3.0, TORC_DTYPE_F32), "tensor(3.)");
    assert_repr(torc_tensor_from((float[]){1e-5f, 1.0f}, TORC_SHAPE(2), TORC_DTYPE_F32),
                "tensor([1.0000e-05, 1.0000e+00])");
    assert_repr(torc_zeros(TORC_SHAPE(0, 3), TORC_DTYPE_F16), "tensor([], size=(0, 3), dtype=torch.float16)");
    assert_repr(torc_reshape(torc_arange(0, 8, 1, TORC_DTYPE_I64), TORC_SHAPE(2, 2, 2)),
                "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
    torc_scope_pop();
}
END_TEST

START_TEST(moves_return_the_same_tensor_when_nothing_changes) {
    torc_scope_push();
    torc_tensor *x = torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32);
    ck_assert_ptr_eq(torc_to_dtype(x, TORC_DTYPE_F32), x);
    ck_assert_ptr_eq(torc_to_device(x, torc_get_device(x)), x);
    torc_tensor *h = torc_to_dtype(x, TORC_DTYPE_F16);
    ck_assert_ptr_ne(h, x);
    ck_assert_int_eq(torc_get_dtype(h), TORC_DTYPE_F16);
    // Between host-memory backends the storage is shared: no copy.
    torc_device *ref = torc_device_get("reference");
    ck_assert_ptr_nonnull(ref);
    torc_tensor *r = torc_to_device(x, ref);
    if (torc_get_device(x) != ref) ck_assert_ptr_ne(r, x);
    ck_assert(torc_same_storage(r, x));
    ck_assert_ptr_eq(torc_get_device(r), ref);
    torc_scope_pop();
}
END_TEST

int main(void) {
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("tensor");
    tcase_add_test(tc, zeros_is_f32_and_128_bytes);
    tcase_add_test(tc, factories_fill_expected_values);
    tcase_add_test(tc, random_is_reproducible_and_in_range);
    tcase_add_test(tc, scopes_free_what_was_not_kept);
    tcase_add_test(tc, memory_accounting_tracks_tags);
    tcase_add_test(tc, flops_are_counted_per_op_and_dtype);
    tcase_add_test(tc, repr_looks_like_pytorch);
    tcase_add_test(tc, moves_return_the_same_tensor_when_nothing_changes);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
