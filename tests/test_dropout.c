// tests/test_dropout.c — torc_dropout with PyTorch's semantics (the scale 1/(1-p) in x's dtype,
// p = 1, p = 0 and eval returning x, the error texts) and its mask from the generator: the same
// on every backend and after restoring the generator, about 1 - p kept, gradient through it.
#include "ck.h"
#include <math.h>

#include "testutil.h"
#include "torc/torc.h"

START_TEST(errors_in_pytorchs_words) {
    torc_scope_push();
    torc_tensor *x = torc_ones(TORC_SHAPE(5), TORC_DTYPE_F32);
    const double bad[] = {1.5, -0.1, 2.0, NAN};
    const char *const text[] = {"but got 1.5", "but got -0.1", "but got 2.0", "but got nan"};
    for (int i = 0; i < 4; i++) {
        ck_assert_ptr_null(torc_dropout(x, bad[i], true, NULL));
        tu_assert_error(TORC_ERR_INVALID_ARG, "dropout probability has to be between 0 and 1, ");
        tu_assert_error(TORC_ERR_INVALID_ARG, text[i]);
        torc_clear_error();
    }
    ck_assert_ptr_null(torc_dropout(torc_zeros(TORC_SHAPE(4), TORC_DTYPE_I64), 0.5, true, NULL));
    tu_assert_error(TORC_ERR_DTYPE, "result type Float can't be cast to the desired output type Long");
    torc_clear_error();
    torc_scope_pop();
}
END_TEST

// p = 0, eval mode and empty tensors give x itself; p = 1 gives x * 0 (NaN stays NaN).
START_TEST(identity_and_all_dropped) {
    torc_scope_push();
    torc_tensor *x = torc_tensor_from((float[]){1, NAN, INFINITY, -2}, TORC_SHAPE(4), TORC_DTYPE_F32);
    ck_assert_ptr_eq(torc_dropout(x, 0.0, true, NULL), x);
    ck_assert_ptr_eq(torc_dropout(x, 0.7, false, NULL), x);
    torc_tensor *e = torc_zeros(TORC_SHAPE(0, 3), TORC_DTYPE_F32);
    ck_assert_ptr_eq(torc_dropout(e, 0.7, true, NULL), e);
    tu_assert_values(torc_dropout(x, 1.0, true, NULL), TU_ARR(0, NAN, NAN, -0.0), 0);
    torc_tensor *i = torc_tensor_from((int64_t[]){3, 4}, TORC_SHAPE(2), TORC_DTYPE_I64);
    ck_assert_ptr_eq(torc_dropout(i, 0.0, true, NULL), i);  // integers pass at p = 0, as PyTorch
    tu_assert_values(torc_dropout(i, 1.0, true, NULL), TU_ARR(0, 0), 0);
    torc_scope_pop();
}
END_TEST

// Kept elements are x / (1 - p) as PyTorch rounds it (noise.div_(1 - p) in x's dtype, then x * noise).
static void check_mask(torc_dtype dt, double p, double kept_value) {
    enum { N = 20000 };
    torc_scope_push();
    torc_generator *g = torc_generator_new(99);
    torc_tensor *x = torc_ones(TORC_SHAPE(N), dt);
    torc_tensor *y = torc_dropout(x, p, true, g);
    ck_assert_int_eq(torc_get_dtype(y), dt);
    uint64_t seed, offset;
    torc_generator_get_state(g, &seed, &offset);
    ck_assert_uint_eq(offset, N);  // one draw per element
    double *v = tu_values(y);
    int kept = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_msg(v[i] == 0 || v[i] == kept_value, "element %d is %.17g", i, v[i]);
        kept += v[i] != 0;
    }
    free(v);
    const double want = (1 - p) * N, sd = sqrt(p * (1 - p) * N);
    ck_assert_msg(fabs(kept - want) < 5 * sd, "kept %d of %d at p = %g", kept, N, p);
    // the same mask on the reference backend, for the same generator state
    torc_generator_set_state(g, 99, 0);
    torc_tensor *r = torc_dropout(torc_to_device(x, torc_device_get("reference")), p, true, g);
    torc_tensor *d = torc_amax(torc_abs(torc_sub(torc_to_device(r, torc_get_device(y)), y)), TORC_ALL_DIMS, false);
    tu_assert_values(d, TU_ARR(0), 0);
    torc_generator_free(g);
    torc_scope_pop();
}

START_TEST(mask_scale_and_counts) {
    check_mask(TORC_DTYPE_F32, 0.3, (double)(1.0f / (float)0.7));
    check_mask(TORC_DTYPE_F64, 0.1, 1.0 / 0.9);
    check_mask(TORC_DTYPE_F16, 0.3, 0x1.6dcp+0);  // PyTorch: (torch.ones(1).half() / 0.7) = 1.4287
    check_mask(TORC_DTYPE_BF16, 0.5, 2.0);
}
END_TEST

// The gradient is grad * noise: the kept elements get 1 / (1 - p), the dropped ones 0, on strided x.
START_TEST(gradient_goes_through_the_mask) {
    torc_scope_push();
    torc_generator *g = torc_generator_new(5);
    torc_tensor *x = torc_randn(TORC_SHAPE(6, 4), TORC_DTYPE_F64, g);
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    torc_tensor *xt = torc_transpose(x, 0, 1);
    torc_tensor *y = torc_dropout(xt, 0.5, true, g);
    ck_assert_ptr_nonnull(torc_grad_fn_name(y));
    ck_assert_int_eq(torc_backward(torc_sum(y, TORC_ALL_DIMS, false), NULL, false), TORC_OK);
    double *gy = tu_values(torc_transpose(torc_grad(x), 0, 1)), *vy = tu_values(y), *vx = tu_values(xt);
    for (int i = 0; i < 24; i++) {
        const bool kept = vy[i] != 0;
        ck_assert_double_eq(gy[i], kept ? 2.0 : 0.0);
        if (kept) ck_assert_double_eq(vy[i], vx[i] * 2.0);
    }
    free(gy), free(vy), free(vx);
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("dropout");
    TCase *tc = tcase_create("dropout");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, errors_in_pytorchs_words);
    tcase_add_test(tc, identity_and_all_dropped);
    tcase_add_test(tc, mask_scale_and_counts);
    tcase_add_test(tc, gradient_goes_through_the_mask);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
