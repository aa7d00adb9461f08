// tests/test_device_fallback.c — the host round trip of a device backend's declined ops
// (TORC_DEVICE_FALLBACK=1, core/dispatch.c) on the fake device backend (tests/plugins/
// fake_device.c: device memory, declines every op): off, a declined op is an error naming the
// variable; on, ops on strided inputs, view outputs, in place and on empty tensors give the
// reference backend's values and are counted per op. TORC_DEVICE_FALLBACK is read once a
// process: each test sets it first (Check runs each test in a process of its own).
#define _GNU_SOURCE  // setenv
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static torc_device *fake_device(const char *fallback) {
    if (fallback) setenv("TORC_DEVICE_FALLBACK", fallback, 1);
    else unsetenv("TORC_DEVICE_FALLBACK");
    setenv("TORC_PLUGIN_PATH", getenv("TORC_TEST_PLUGIN_DIR"), 1);
    torc_device *dev = torc_device_get("fakedev");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    return dev;
}

// t's values read through the reference backend (a copy of the bytes, no op on t's device).
static double *values_of(torc_tensor *t) {
    torc_device *ref = torc_device_get("reference");
    ck_assert_ptr_nonnull(ref);
    torc_tensor *c = torc_contiguous(t);
    ck_assert_msg(c != NULL, "%s", torc_last_error());
    torc_tensor *h = torc_to_device(c, ref);
    ck_assert_msg(h != NULL, "%s", torc_last_error());
    double *v = tu_values(h);
    torc_release(h);
    torc_release(c);
    return v;
}

static void assert_same(torc_tensor *got, torc_tensor *want) {
    ck_assert_int_eq(torc_numel(got), torc_numel(want));
    double *g = values_of(got), *w = values_of(want);
    for (int64_t i = 0; i < torc_numel(want); i++)
        ck_assert_msg(g[i] == w[i], "element %lld: %.17g on the device, %.17g on the reference", (long long)i, g[i], w[i]);
    free(g);
    free(w);
}

static torc_tensor *matrix(int64_t rows, int64_t cols, double scale) {
    float v[64];
    for (int64_t i = 0; i < rows * cols; i++) v[i] = (float)(scale * (double)(i + 1) - 3.0);
    torc_tensor *t = torc_tensor_from(v, 2, (int64_t[]){rows, cols}, TORC_DTYPE_F32);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

START_TEST(declined_without_the_variable) {
    torc_device *dev = fake_device(NULL);
    ck_assert_int_eq(torc_set_default_device(dev), TORC_OK);
    torc_tensor *x = matrix(2, 3, 1.0);  // a copy, no op: fine without the fallback
    ck_assert_ptr_null(torc_neg(x));
    tu_assert_error(TORC_ERR_NOT_SUPPORTED, "TORC_DEVICE_FALLBACK=1");
    ck_assert_msg(strstr(torc_last_error(), "'neg'") != NULL, "%s", torc_last_error());
    ck_assert_uint_eq(torc_fallback_count(-1), 0);
    torc_release(x);
    ck_assert_ptr_null(torc_randn(1, (int64_t[]){4}, TORC_DTYPE_F32, NULL));
    tu_assert_error(TORC_ERR_NOT_SUPPORTED, "TORC_DEVICE_FALLBACK");
}
END_TEST

START_TEST(set_to_zero_is_off) {
    torc_device *dev = fake_device("0");
    ck_assert_int_eq(torc_set_default_device(dev), TORC_OK);
    torc_tensor *x = matrix(2, 3, 1.0);
    ck_assert_ptr_null(torc_neg(x));
    tu_assert_error(TORC_ERR_NOT_SUPPORTED, "TORC_DEVICE_FALLBACK=1");
    torc_release(x);
}
END_TEST

// The same program on the fake device (through the fallback) and on the reference backend.
typedef torc_tensor *(*program)(void);

static void same_on_both(program p, int opcode, uint64_t expect_count) {
    torc_device *dev = fake_device("1"), *ref = torc_device_get("reference");
    ck_assert_ptr_nonnull(ref);
    ck_assert_int_eq(torc_set_default_device(ref), TORC_OK);
    torc_tensor *want = p();
    ck_assert_msg(want != NULL, "%s", torc_last_error());
    ck_assert_uint_eq(torc_fallback_count(-1), 0);  // the reference is host memory: nothing counted
    ck_assert_int_eq(torc_set_default_device(dev), TORC_OK);
    torc_fallback_reset();
    torc_tensor *got = p();
    ck_assert_msg(got != NULL, "%s", torc_last_error());
    ck_assert_ptr_eq(torc_get_device(got), dev);
    if (opcode >= 0) ck_assert_uint_eq(torc_fallback_count(opcode), expect_count);
    ck_assert_uint_ge(torc_fallback_count(-1), expect_count);
    assert_same(got, want);
    torc_release(got);
    torc_release(want);
}

// A strided (transposed) input, a contiguous output.
static torc_tensor *strided_input(void) {
    torc_tensor *x = matrix(3, 4, 0.5), *xt = torc_transpose(x, 0, 1);
    torc_fallback_reset();
    torc_tensor *y = torc_mul(xt, xt);
    torc_release(xt);
    torc_release(x);
    return y;
}
START_TEST(strided_input_gives_the_reference_values) { same_on_both(strided_input, TORC_OP_MUL, 1); }
END_TEST

// An in-place op on a view (a narrowed column block): the columns it leaves alone keep their values.
static torc_tensor *view_output(void) {
    torc_tensor *x = matrix(4, 5, 1.0), *v = torc_narrow(x, 1, 1, 3), *m = matrix(4, 3, 0.25);
    torc_fallback_reset();
    ck_assert_int_eq(torc_mul_(v, m), TORC_OK);
    torc_release(m);
    torc_release(v);
    return x;
}
START_TEST(view_output_keeps_the_rest) { same_on_both(view_output, TORC_OP_MUL, 1); }
END_TEST

// In place with the output aliasing both inputs, then a copy into a transposed view.
static torc_tensor *in_place(void) {
    torc_tensor *x = matrix(3, 3, 1.0), *xt = torc_transpose(x, 0, 1), *s = matrix(3, 3, 2.0);
    torc_fallback_reset();
    ck_assert_int_eq(torc_mul_(x, x), TORC_OK);
    ck_assert_uint_eq(torc_fallback_count(TORC_OP_MUL), torc_get_device(x) == torc_device_get("reference") ? 0 : 1);
    ck_assert_int_eq(torc_add_(xt, s), TORC_OK);  // reads and writes x through the transposed view
    torc_release(s);
    torc_release(xt);
    return x;
}
START_TEST(in_place_aliasing) { same_on_both(in_place, TORC_OP_ADD, 1); }
END_TEST

// Draws and fills: ops without inputs (torc-train's first op is a randn).
static torc_tensor *draws(void) {
    torc_generator *g = torc_generator_new(11);
    torc_fallback_reset();
    torc_tensor *r = torc_randn(2, (int64_t[]){5, 7}, TORC_DTYPE_F32, g);
    torc_generator_free(g);
    return r;
}
START_TEST(draws_without_inputs) { same_on_both(draws, TORC_OP_RAND_NORMAL, 1); }
END_TEST

// Empty operands: nothing to copy, the op still runs (and is counted) where it reaches the backend.
static torc_tensor *empty(void) {
    torc_tensor *x = torc_zeros(2, (int64_t[]){0, 3}, TORC_DTYPE_F32);
    ck_assert_msg(x != NULL, "%s", torc_last_error());
    torc_tensor *y = torc_exp(x);
    torc_release(x);
    ck_assert_msg(y != NULL, "%s", torc_last_error());
    tu_assert_shape(y, 0, 3);
    return y;
}
START_TEST(empty_operands) { same_on_both(empty, -1, 0); }
END_TEST

// A reduction and a matmul from views, the counts per op summed by opcode -1.
static torc_tensor *reductions(void) {
    torc_tensor *a = matrix(4, 6, 0.5), *b = matrix(2, 6, 0.125), *bt = torc_transpose(b, 0, 1);  // (6, 2), strides (1, 6)
    torc_fallback_reset();
    torc_tensor *c = torc_matmul(a, bt);
    ck_assert_msg(c != NULL, "%s", torc_last_error());
    torc_tensor *s = torc_sum(c, 1, (int[]){0}, false);
    ck_assert_msg(s != NULL, "%s", torc_last_error());
    torc_release(c);
    torc_release(bt);
    torc_release(b);
    torc_release(a);
    return s;
}
START_TEST(matmul_and_sum) { same_on_both(reductions, TORC_OP_MATMUL, 1); }
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("device_fallback");
    TCase *tc = tcase_create("device_fallback");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, declined_without_the_variable);
    tcase_add_test(tc, set_to_zero_is_off);
    tcase_add_test(tc, strided_input_gives_the_reference_values);
    tcase_add_test(tc, view_output_keeps_the_rest);
    tcase_add_test(tc, in_place_aliasing);
    tcase_add_test(tc, draws_without_inputs);
    tcase_add_test(tc, empty_operands);
    tcase_add_test(tc, matmul_and_sum);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
