// tests/onednn_pointwise_test.c — the oneDNN backend's fused pointwise loops (addcmul, addcdiv,
// lerp) and the other Adam passes run natively on large float32 tensors, bit for bit as the reference.
#include "testutil.h"

static torc_device *g_ref, *g_dnn;

static void setup(void) {
    g_ref = torc_device_get("reference");
    g_dnn = torc_device_get("onednn");
    ck_assert_msg(g_ref && g_dnn, "%s", torc_last_error());
}

// Same values on both devices (host backends share the storage; no copy is made).
static void pair(int64_t n, double lo, double hi, uint64_t seed, torc_tensor **r, torc_tensor **d) {
    torc_generator *g = torc_generator_new(seed);
    torc_tensor *u = torc_rand(TORC_SHAPE(n), TORC_DTYPE_F32, g);
    torc_generator_free(g);
    ck_assert_ptr_nonnull(u);
    u = torc_add_scalar(torc_mul_scalar(u, torc_s(hi - lo)), torc_s(lo));
    *r = torc_clone(torc_to_device(u, g_ref));
    *d = torc_clone(torc_to_device(u, g_dnn));
    ck_assert_ptr_eq(torc_get_device(*d), g_dnn);
}

static void assert_same_bits(torc_tensor *a, torc_tensor *b, const char *what) {
    ck_assert_msg(a && b, "%s: %s", what, torc_last_error());
    const int64_t n = torc_numel(a);
    ck_assert_int_eq(torc_numel(b), n);
    double *x = tu_values(a), *y = tu_values(b);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&x[i], &y[i], sizeof x[i])) bad = i;
    if (bad >= 0) ck_abort_msg("%s: element %lld is %.9g on onednn, %.9g on the reference", what, (long long)bad, y[bad], x[bad]);
    free(x);
    free(y);
}

// What the backend itself says about an op on dense float32 operands of n elements (the last
// error says why when it declines).
static bool backend_runs(torc_opcode code, int n_in, int64_t n, torc_dtype dt) {
    torc_scope_push();
    torc_op_call call = {.code = code, .n_in = n_in, .n_out = 1};
    for (int i = 0; i <= n_in; i++) {
        const bool scalar = i == 1 && (code == TORC_OP_MUL || code == TORC_OP_DIV || code == TORC_OP_ADD);
        torc_tensor *t = torc_to_device(torc_zeros(TORC_SHAPE(scalar ? 1 : n), dt), g_dnn);
        if (scalar) t = torc_expand(t, TORC_SHAPE(n));
        ck_assert_msg(t != NULL, "%s", torc_last_error());
        if (i < n_in) call.in[i] = t;
        else call.out[0] = t;
    }
    call.params.scalar.value = code == TORC_OP_ADD ? 1.0 : 0.5;
    const bool native = torc_op_supported(g_dnn, &call) == TORC_OK;
    torc_scope_pop();
    return native;
}

// The sizes: above TORC_ONEDNN_MIN_WORK on one thread, and past the parallel threshold (64K,
// ONEDNN_SMALL_STREAM) with a tail that no vector width divides.
static const int64_t SIZES[] = {5000, (INT64_C(1) << 16) + 37, (INT64_C(1) << 20) + 37};

START_TEST(fused_ops_match_the_reference_bit_for_bit) {
    setup();
    const int64_t n = SIZES[_i];
    torc_scope_push();
    torc_tensor *sr, *sd, *ar, *ad, *br, *bd;
    pair(n, -2, 2, 1, &sr, &sd);
    pair(n, -2, 2, 2, &ar, &ad);
    pair(n, 0.5, 2, 3, &br, &bd);
    ck_assert(backend_runs(TORC_OP_ADDCMUL, 3, n, TORC_DTYPE_F32));
    ck_assert(backend_runs(TORC_OP_ADDCDIV, 3, n, TORC_DTYPE_F32));
    ck_assert(backend_runs(TORC_OP_LERP, 2, n, TORC_DTYPE_F32));
    const double values[] = {0.3, -1.7, 1e-3};
    for (int k = 0; k < 3; k++) {
        assert_same_bits(torc_addcmul(sr, ar, br, torc_s(values[k])), torc_addcmul(sd, ad, bd, torc_s(values[k])), "addcmul");
        assert_same_bits(torc_addcdiv(sr, ar, br, torc_s(values[k])), torc_addcdiv(sd, ad, bd, torc_s(values[k])), "addcdiv");
    }
    const double weights[] = {0.1, 0.49, 0.5, 0.9, -0.3, 1.7};
    for (int k = 0; k < 6; k++)
        assert_same_bits(torc_lerp(sr, ar, torc_s(weights[k])), torc_lerp(sd, ad, torc_s(weights[k])), "lerp");
    // in place, as Adam runs them
    ck_assert_int_eq(torc_lerp_(sr, ar, torc_s(0.1)), TORC_OK);
    ck_assert_int_eq(torc_lerp_(sd, ad, torc_s(0.1)), TORC_OK);
    assert_same_bits(sr, sd, "lerp_");
    ck_assert_int_eq(torc_addcmul_(sr, ar, ar, torc_s(0.001)), TORC_OK);
    ck_assert_int_eq(torc_addcmul_(sd, ad, ad, torc_s(0.001)), TORC_OK);
    assert_same_bits(sr, sd, "addcmul_");
    ck_assert_int_eq(torc_addcdiv_(sr, ar, br, torc_s(-0.01)), TORC_OK);
    ck_assert_int_eq(torc_addcdiv_(sd, ad, bd, torc_s(-0.01)), TORC_OK);
    assert_same_bits(sr, sd, "addcdiv_");
    torc_scope_pop();
}
END_TEST

// Adam's other passes (mul_scalar_, sqrt, div_scalar_, add_scalar_) and SGD's scaled add run on
// oneDNN's primitives for large float32 tensors, and round as the reference.
START_TEST(adam_passes_run_natively_and_match) {
    setup();
    const int64_t n = SIZES[1];
    ck_assert(backend_runs(TORC_OP_MUL, 2, n, TORC_DTYPE_F32));
    ck_assert(backend_runs(TORC_OP_DIV, 2, n, TORC_DTYPE_F32));
    ck_assert(backend_runs(TORC_OP_ADD, 2, n, TORC_DTYPE_F32));
    ck_assert(backend_runs(TORC_OP_SQRT, 1, n, TORC_DTYPE_F32));
    torc_scope_push();
    torc_tensor *vr, *vd;
    pair(n, 0, 3, 4, &vr, &vd);
    ck_assert_int_eq(torc_mul_scalar_(vr, torc_s(0.999)), TORC_OK);
    ck_assert_int_eq(torc_mul_scalar_(vd, torc_s(0.999)), TORC_OK);
    assert_same_bits(vr, vd, "mul_scalar_");
    torc_tensor *dr = torc_sqrt(vr), *dd = torc_sqrt(vd);
    assert_same_bits(dr, dd, "sqrt");
    ck_assert_int_eq(torc_div_scalar_(dr, torc_s(0.3)), TORC_OK);
    ck_assert_int_eq(torc_div_scalar_(dd, torc_s(0.3)), TORC_OK);
    assert_same_bits(dr, dd, "div_scalar_");
    ck_assert_int_eq(torc_add_scalar_(dr, torc_s(1e-8)), TORC_OK);
    ck_assert_int_eq(torc_add_scalar_(dd, torc_s(1e-8)), TORC_OK);
    assert_same_bits(dr, dd, "add_scalar_");
    torc_scope_pop();
}
END_TEST

START_TEST(other_layouts_and_dtypes_go_to_the_reference) {
    setup();
    ck_assert(!backend_runs(TORC_OP_ADDCMUL, 3, 1 << 20, TORC_DTYPE_BF16));
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "contiguous float32 operands only"));
    torc_scope_push();
    // a transposed operand: the frontend's result is still right (the reference ran it)
    torc_tensor *a = torc_to_device(torc_reshape(torc_arange(0, 8192, 1, TORC_DTYPE_F32), TORC_SHAPE(64, 128)), g_dnn);
    torc_tensor *t = torc_transpose(torc_reshape(a, TORC_SHAPE(128, 64)), 0, 1);
    torc_tensor *r = torc_addcmul(a, t, a, torc_s(0.5));
    ck_assert_ptr_nonnull(r);
    double *v = tu_values(r);
    ck_assert_double_eq(v[1], 1 + 0.5 * 64 * 1);  // a[0][1] = 1, t[0][1] = a[1][0] = 64
    free(v);
    torc_scope_pop();
}
END_TEST

// Optimizer trajectories on onednn (tensors of at least 16K elements, so every pass runs on the
// backend's own kernels) equal the reference's bit for bit: the same gradients (loss =
// sum(W * G), dW = G exactly) and 50 steps of each bundled optimizer, weight decay included.
static const struct { const char *name, *hparams; int64_t rows, cols; } trajectories[] = {
    {"sgd", "lr=0.01 weight_decay=0.1", 128, 96},  // the case
    {"sgd", "lr=0.01 momentum=0.9 weight_decay=0.01 nesterov=1", 128, 128},
    {"adam", "lr=0.001 weight_decay=0.01", 128, 128},
    {"adamw", "lr=0.001 weight_decay=0.1", 128, 128},
    {"adagrad", "lr=0.01 weight_decay=0.01", 128, 128},
    {"rmsprop", "lr=0.001 momentum=0.9 weight_decay=0.01", 128, 128},
};

static torc_tensor *train(torc_device *dev, int k) {
    torc_set_default_device(dev);
    torc_generator *g = torc_generator_new(7);
    torc_tensor *w = torc_randn(TORC_SHAPE(trajectories[k].rows, trajectories[k].cols), TORC_DTYPE_F32, g);
    ck_assert_ptr_nonnull(w);
    torc_keep(w);
    ck_assert_int_eq(torc_set_requires_grad(w, true), TORC_OK);
    torc_optimizer *opt = torc_optimizer_new(trajectories[k].name, 1, &w, trajectories[k].hparams);
    ck_assert_msg(opt != NULL, "%s: %s", trajectories[k].name, torc_last_error());
    for (int step = 0; step < 50; step++) {
        torc_scope_push();
        torc_tensor *G = torc_randn(TORC_SHAPE(trajectories[k].rows, trajectories[k].cols), TORC_DTYPE_F32, g);
        torc_tensor *loss = torc_sum(torc_mul(w, G), 0, NULL, false);
        ck_assert_msg(loss && torc_backward(loss, NULL, false) == TORC_OK, "%s", torc_last_error());
        ck_assert_msg(torc_optimizer_step(opt) == TORC_OK, "%s", torc_last_error());
        ck_assert_int_eq(torc_optimizer_zero_grad(opt, true), TORC_OK);
        torc_scope_pop();
    }
    torc_optimizer_free(opt);
    torc_generator_free(g);
    torc_set_default_device(NULL);
    return w;
}

START_TEST(optimizer_trajectories_match_the_reference_bit_for_bit) {
    setup();
    torc_scope_push();
    torc_tensor *r = train(g_ref, _i), *d = train(g_dnn, _i);
    ck_assert_ptr_eq(torc_get_device(d), g_dnn);
    char what[128];
    snprintf(what, sizeof what, "%s (%s) after 50 steps", trajectories[_i].name, trajectories[_i].hparams);
    assert_same_bits(torc_detach(r), torc_detach(d), what);
    torc_release(r);
    torc_release(d);
    torc_scope_pop();
}
END_TEST

int main(void) {
    Suite *s = suite_create("onednn_pointwise");
    TCase *tc = tcase_create("onednn_pointwise");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, fused_ops_match_the_reference_bit_for_bit, 0, 3);
    tcase_add_test(tc, adam_passes_run_natively_and_match);
    tcase_add_test(tc, other_layouts_and_dtypes_go_to_the_reference);
    tcase_add_loop_test(tc, optimizer_trajectories_match_the_reference_bit_for_bit, 0,
                        (int)(sizeof trajectories / sizeof trajectories[0]));
    suite_add_tcase(s, tc);
    return tu_run(s);
}
