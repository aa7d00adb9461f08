// tests/onednn_small_ops_test.c — oneDNN hands small ops to the reference backend (its
// primitive overhead exceeds a plain loop), with a reason, and results are unchanged; small ops
// of torc's own host loops (casts, GELU, layer_norm, log_softmax, arithmetic on bf16 / f16: a
// sampler's one-token step) it keeps.
#include "testutil.h"

// Whether onednn itself takes an add of n float32 elements (the last error says why not).
static bool native_add(torc_device *dev, int64_t n) {
    torc_scope_push();
    torc_tensor *a = torc_to_device(torc_zeros(TORC_SHAPE(n), TORC_DTYPE_F32), dev);
    torc_tensor *out = torc_to_device(torc_zeros(TORC_SHAPE(n), TORC_DTYPE_F32), dev);
    ck_assert_msg(a && out, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_ADD, .n_in = 2, .n_out = 1, .in = {a, a}, .out = {out}};
    call.params.scalar.value = 1.0;
    const bool native = torc_op_supported(dev, &call) == TORC_OK;
    torc_scope_pop();
    return native;
}

START_TEST(small_ops_are_declined_large_ones_run) {
    torc_device *dev = torc_device_get("onednn");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    ck_assert(!native_add(dev, 16));
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "smaller than TORC_ONEDNN_MIN_WORK (4096)"));
    ck_assert(native_add(dev, 1 << 14));
    // Through the frontend the small op still runs (on the reference) with the same result.
    torc_scope_push();
    torc_tensor *x = torc_to_device(torc_ones(TORC_SHAPE(4, 4), TORC_DTYPE_F32), dev);
    torc_tensor *y = torc_add(x, x);
    ck_assert_ptr_eq(torc_get_device(y), dev);
    tu_assert_values(y, TU_ARR(2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2), 0);
    torc_scope_pop();
}
END_TEST

// The casts autocast makes at a model's edges (a [64] loss input, a [256, 1] weight) are small:
// the backend's cast loops take them at any size (the reference's generic loop cost ~7 ns an
// element), with the same bits.
START_TEST(small_casts_stay_on_onednn) {
    torc_device *dev = torc_device_get("onednn");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    torc_scope_push();
    const float v[4] = {1.0f, -2.5f, 65504.0f, 1e-7f};
    torc_tensor *x = torc_to_device(torc_tensor_from(v, TORC_SHAPE(4), TORC_DTYPE_F32), dev);
    torc_tensor *h = torc_to_device(torc_zeros(TORC_SHAPE(4), TORC_DTYPE_F16), dev);
    ck_assert_msg(x && h, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_COPY, .n_in = 1, .n_out = 1, .in = {x}, .out = {h}};
    ck_assert_msg(torc_op_supported(dev, &call) == TORC_OK, "%s", torc_last_error());
    torc_tensor *y = torc_to_dtype(torc_to_dtype(x, TORC_DTYPE_F16), TORC_DTYPE_F32);
    ck_assert_ptr_eq(torc_get_device(y), dev);
    // 1e-7 is an f16 subnormal: 2^-24 * round(1e-7 / 2^-24) = 2^-24 * 2
    tu_assert_values(y, TU_ARR(1.0, -2.5, 65504.0, 0x1p-23), 0);
    torc_scope_pop();
}
END_TEST

// A sampler's one-token step (config B: width 384, MLP 1536) is made of small ops: GELU, its
// backward, layer_norm and log_softmax of one row stay on the backend's own loops (the reference's
// libm GELU cost 20-40 ns an element), with the reference's values to a few float ulps.
static torc_tensor *on_host(torc_tensor *t) { return torc_to_device(t, torc_device_get("reference")); }

START_TEST(small_sampler_ops_stay_on_onednn) {
    torc_device *dev = torc_device_get("onednn"), *ref = torc_device_get("reference");
    ck_assert_msg(dev && ref, "%s", torc_last_error());
    torc_scope_push();
    torc_generator *gen = torc_generator_new(7);
    torc_tensor *x = torc_randn(TORC_SHAPE(1, 1, 1536), TORC_DTYPE_F32, gen);
    torc_tensor *r = torc_randn(TORC_SHAPE(1, 1, 384), TORC_DTYPE_F32, gen);
    torc_tensor *w = torc_randn(TORC_SHAPE(384), TORC_DTYPE_F32, gen);
    torc_tensor *b = torc_randn(TORC_SHAPE(384), TORC_DTYPE_F32, gen);
    ck_assert_msg(x && r && w && b, "%s", torc_last_error());
    torc_tensor *xd = torc_to_device(x, dev), *rd = torc_to_device(r, dev), *wd = torc_to_device(w, dev),
                *bd = torc_to_device(b, dev);
    torc_tensor *xr = on_host(x), *rr = on_host(r), *wr = on_host(w), *br = on_host(b);
    ck_assert_msg(xd && rd && wd && bd && xr && rr && wr && br, "%s", torc_last_error());
    const int64_t C = 384;
    torc_op_trace_start();
    torc_tensor *got[4] = {torc_gelu(xd, true), torc_gelu(xd, false), torc_layer_norm(rd, 1, &C, wd, bd, 1e-5),
                           torc_log_softmax(rd, -1)};
    torc_op_trace_stop();
    for (int i = 0; i < 4; i++) ck_assert_msg(got[i] != NULL, "%s", torc_last_error());
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_GELU, -1, -1, 0), 2);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_LAYER_NORM, -1, -1, 0), 1);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_LOG_SOFTMAX, -1, -1, 0), 1);
    ck_assert_uint_eq(torc_op_trace_count(-1, -1, -1, 1), 0);  // none declined
    torc_tensor *want[4] = {torc_gelu(xr, true), torc_gelu(xr, false), torc_layer_norm(rr, 1, &C, wr, br, 1e-5),
                            torc_log_softmax(rr, -1)};
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(want[i] != NULL, "%s", torc_last_error());
        double *g = tu_values(got[i]), *e = tu_values(want[i]);
        const int64_t n = torc_numel(want[i]);
        for (int64_t k = 0; k < n; k++)
            ck_assert_msg(fabs(g[k] - e[k]) <= 4 * 0x1p-23 * fmax(1.0, fabs(e[k])), "op %d [%lld]: %.9g, reference %.9g", i,
                          (long long)k, g[k], e[k]);
        free(g), free(e);
    }
    // A bf16 token's bias adds and residual adds: on pointwise.c's loops, each element exactly
    // PyTorch's (the sum of the two bf16 values rounded once), as the reference's.
    torc_tensor *hb = torc_to_dtype(x, TORC_DTYPE_BF16), *bb = torc_to_dtype(torc_narrow(x, 2, 0, 384), TORC_DTYPE_BF16);
    torc_tensor *hbd = torc_to_device(hb, dev), *bbd = torc_to_device(bb, dev);
    ck_assert_msg(hbd && bbd, "%s", torc_last_error());
    torc_op_trace_start();
    torc_tensor *sum = torc_add(torc_narrow(hbd, 2, 0, 384), bbd), *prod = torc_mul(hbd, hbd);
    torc_op_trace_stop();
    ck_assert_msg(sum && prod, "%s", torc_last_error());
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADD, TORC_DTYPE_BF16, TORC_DTYPE_BF16, 0), 1);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_MUL, TORC_DTYPE_BF16, TORC_DTYPE_BF16, 0), 1);
    ck_assert_uint_eq(torc_op_trace_count(-1, -1, -1, 1), 0);
    torc_tensor *hr = on_host(hb), *brr = on_host(bb);
    torc_tensor *half_want[2] = {torc_add(torc_narrow(hr, 2, 0, 384), brr), torc_mul(hr, hr)}, *half_got[2] = {sum, prod};
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(half_want[i] != NULL, "%s", torc_last_error());
        double *g = tu_values(half_got[i]), *e = tu_values(half_want[i]);
        const int64_t n = torc_numel(half_want[i]);
        for (int64_t k = 0; k < n; k++)
            ck_assert_msg(g[k] == e[k], "bf16 op %d [%lld]: %.9g, reference %.9g", i, (long long)k, g[k], e[k]);
        free(g), free(e);
    }
    torc_generator_free(gen);
    torc_scope_pop();
}
END_TEST

int main(void) {
    Suite *s = suite_create("onednn_small_ops");
    TCase *tc = tcase_create("onednn_small_ops");
    tcase_add_test(tc, small_ops_are_declined_large_ones_run);
    tcase_add_test(tc, small_casts_stay_on_onednn);
    tcase_add_test(tc, small_sampler_ops_stay_on_onednn);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
