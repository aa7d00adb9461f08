// tests/test_adam.c — the fused Adam/AdamW update (torc_adam_step_, TORC_OP_ADAM_STEP): the bundled
// adam and adamw plugins, which run it, against the same plugins on a v1.1 host table, which
// compose the update from separate ops (tests/plugins/adam_v11.c), bit for bit on every backend
// and dtype; the frontend's checks.
#include "testutil.h"

// ---- fused against composed ----
static const struct { const char *opt, *hparams; } configs[] = {
    {"adam", ""},
    {"adam", "lr=0.01 weight_decay=0.1"},
    {"adam", "lr=0.01 amsgrad=true maximize=true weight_decay=0.05"},
    {"adamw", "lr=0.01 weight_decay=0.1 amsgrad=true"},
    {"adamw", "lr=0.003 maximize=true betas=0.5,0.9 eps=1e-3"},
};
#define N_CONFIGS ((int)(sizeof configs / sizeof configs[0]))

// The onednn backend where this build has it (tests/adam.cmake defines TORC_TEST_ONEDNN).
static const struct { const char *device; torc_dtype dtype; } targets[] = {
    {"reference", TORC_DTYPE_F32}, {"reference", TORC_DTYPE_BF16}, {"reference", TORC_DTYPE_F16},
    {"reference", TORC_DTYPE_F64},
#ifdef TORC_TEST_ONEDNN
    {"onednn", TORC_DTYPE_F32},    {"onednn", TORC_DTYPE_BF16},
#endif
};
#define N_TARGETS ((int)(sizeof targets / sizeof targets[0]))

// Two parameters: one above the onednn backend's parallel threshold (64K elements) with a tail
// no vector width divides, and a transposed (strided) one.
static const int64_t ROWS = 257, COLS = 300;

static torc_tensor *make_params(torc_dtype dt, torc_tensor **out) {
    torc_generator *g = torc_generator_new(11);
    out[0] = torc_detach(torc_randn(TORC_SHAPE(ROWS, COLS), TORC_DTYPE_F32, g));
    out[1] = torc_detach(torc_transpose(torc_randn(TORC_SHAPE(40, 33), TORC_DTYPE_F32, g), 0, 1));
    torc_generator_free(g);
    for (int i = 0; i < 2; i++) {
        ck_assert_ptr_nonnull(out[i]);
        torc_tensor *t = torc_detach(torc_to_dtype(out[i], dt));
        ck_assert_ptr_nonnull(t);
        if (i == 1) t = torc_detach(torc_transpose(torc_contiguous(torc_transpose(t, 0, 1)), 0, 1));  // keep it strided
        ck_assert_int_eq(torc_set_requires_grad(t, true), TORC_OK);
        out[i] = torc_keep(t);
    }
    return out[0];
}

// Gradients whose magnitudes span e^-9 .. e^9, with exact zeros, so that the dtype's rounding
// and the tiny eps matter; the same for both optimizers at each step.
static torc_tensor *make_grad(const torc_tensor *p, torc_generator *g) {
    const torc_dtype dt = torc_get_dtype(p);
    const int64_t *shape = torc_shape(p);
    const int nd = torc_ndim(p);
    torc_tensor *x = torc_randn(nd, shape, TORC_DTYPE_F32, g), *s = torc_randn(nd, shape, TORC_DTYPE_F32, g);
    torc_tensor *keep = torc_gt(torc_randn(nd, shape, TORC_DTYPE_F32, g), torc_scalar_tensor(-1.5, TORC_DTYPE_F32));
    torc_tensor *r = torc_mul(torc_mul(x, torc_exp(torc_mul_scalar(s, torc_s(3.0)))), keep);
    ck_assert_msg(r != NULL, "%s", torc_last_error());
    return torc_to_dtype(r, dt);
}

static void assert_same_bits(torc_tensor *a, torc_tensor *b, const char *what) {
    ck_assert_msg(a && b, "%s: missing (%s)", what, torc_last_error());
    const int64_t n = torc_numel(a);
    ck_assert_int_eq(torc_numel(b), n);
    double *x = tu_values(a), *y = tu_values(b);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&x[i], &y[i], sizeof x[i])) bad = i;
    if (bad >= 0)
        ck_abort_msg("%s: element %lld is %.17g fused, %.17g composed", what, (long long)bad, x[bad], y[bad]);
    free(x);
    free(y);
}

// tests/plugins' build directory: TORC_TEST_PLUGIN_DIR (ctest), else under TORC_BUILD_DIR
// (tools/isa-matrix.sh runs this suite with only that set).
static char *plugin_path(const char *name, char *buf, size_t n) {
    const char *dir = getenv("TORC_TEST_PLUGIN_DIR"), *build = getenv("TORC_BUILD_DIR");
    ck_assert_msg(dir || build, "neither TORC_TEST_PLUGIN_DIR nor TORC_BUILD_DIR is set (run through ctest)");
    if (dir) snprintf(buf, n, "%s/libtorc_optim_%s.so", dir, name);
    else snprintf(buf, n, "%s/tests/plugins/libtorc_optim_%s.so", build, name);
    return buf;
}

START_TEST(fused_update_matches_the_composed_one_bit_for_bit) {
    const int t = _i / N_CONFIGS, c = _i % N_CONFIGS;
    torc_device *dev = torc_device_get(targets[t].device);
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_set_default_device(dev), TORC_OK);
    const torc_dtype dt = targets[t].dtype;
    torc_scope_push();
    torc_tensor *pf[2], *pc[2];
    make_params(dt, pf);
    make_params(dt, pc);
    char path[1024], old_name[32];
    snprintf(old_name, sizeof old_name, "%s_v11", configs[c].opt);
    torc_optimizer *fused = torc_optimizer_new(configs[c].opt, 2, pf, configs[c].hparams);
    torc_optimizer *composed = torc_optimizer_new(plugin_path(old_name, path, sizeof path), 2, pc, configs[c].hparams);
    ck_assert_msg(fused && composed, "%s", torc_last_error());
    torc_generator *g = torc_generator_new(5);
    for (int step = 0; step < 15; step++) {
        torc_scope_push();
        for (int i = 0; i < 2; i++) {
            torc_tensor *grad = make_grad(pf[i], g);
            ck_assert_int_eq(torc_set_grad(pf[i], grad), TORC_OK);
            ck_assert_int_eq(torc_set_grad(pc[i], torc_clone(grad)), TORC_OK);
        }
        ck_assert_msg(torc_optimizer_step(fused) == TORC_OK, "%s", torc_last_error());
        ck_assert_msg(torc_optimizer_step(composed) == TORC_OK, "%s", torc_last_error());
        torc_scope_pop();
    }
    char what[256];
    static const char *const buffers[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    for (int i = 0; i < 2; i++) {
        snprintf(what, sizeof what, "%s (%s) on %s, %s: param %d after 15 steps", configs[c].opt, configs[c].hparams,
                 targets[t].device, torc_dtype_short_name(dt), i);
        ck_assert_ptr_eq(torc_get_device(pf[i]), dev);
        assert_same_bits(torc_detach(pf[i]), torc_detach(pc[i]), what);
        for (int b = 0; b < 3; b++) {
            torc_tensor *sf = torc_optimizer_state(fused, i, buffers[b]), *sc = torc_optimizer_state(composed, i, buffers[b]);
            ck_assert_int_eq(sf == NULL, sc == NULL);
            if (!sf) continue;
            snprintf(what, sizeof what, "%s (%s) on %s, %s: %s %d", configs[c].opt, configs[c].hparams,
                     targets[t].device, torc_dtype_short_name(dt), buffers[b], i);
            assert_same_bits(sf, sc, what);  // sf and sc belong to the scope
        }
    }
    torc_generator_free(g);
    torc_optimizer_free(fused);
    torc_optimizer_free(composed);
    for (int i = 0; i < 2; i++) torc_release(pf[i]), torc_release(pc[i]);
    torc_scope_pop();
    torc_set_default_device(NULL);
}
END_TEST

#ifdef TORC_TEST_ONEDNN
// What the onednn backend itself says about an ADAM_STEP of n elements (3 outputs, or 4 with
// amsgrad), dense, or with grad strided.
static bool onednn_runs(torc_dtype dt, int64_t n, bool amsgrad, bool strided_grad) {
    torc_device *dev = torc_device_get("onednn");
    ck_assert_ptr_nonnull(dev);
    torc_scope_push();
    torc_op_call call = {.code = TORC_OP_ADAM_STEP, .n_in = 1, .n_out = amsgrad ? 4 : 3};
    call.params.adam.flags = amsgrad ? TORC_ADAM_AMSGRAD : 0;
    for (int k = 0; k < call.n_out; k++) call.out[k] = torc_to_device(torc_zeros(TORC_SHAPE(n), dt), dev);
    torc_tensor *g = torc_to_device(torc_zeros(TORC_SHAPE(strided_grad ? 2 * n : n), dt), dev);
    call.in[0] = strided_grad ? torc_slice(g, 0, 0, INT64_MAX, 2) : g;
    ck_assert_msg(call.in[0] && call.out[call.n_out - 1], "%s", torc_last_error());
    const bool native = torc_op_supported(dev, &call) == TORC_OK;
    torc_scope_pop();
    torc_clear_error();
    return native;
}

// The comparisons above ran onednn's own loop for dense float32 and bfloat16 operands (the rest
// goes to the reference).
START_TEST(onednn_runs_dense_f32_and_bf16_itself) {
    ck_assert(onednn_runs(TORC_DTYPE_F32, ROWS * COLS, false, false));
    ck_assert(onednn_runs(TORC_DTYPE_F32, ROWS * COLS, true, false));
    ck_assert(onednn_runs(TORC_DTYPE_BF16, ROWS * COLS, true, false));
    ck_assert(!onednn_runs(TORC_DTYPE_F16, ROWS * COLS, false, false));
    ck_assert(!onednn_runs(TORC_DTYPE_F32, ROWS * COLS, false, true));
}
END_TEST
#endif

// ---- the frontend ----
START_TEST(adam_step_checks_its_arguments_and_writes_nothing_on_error) {
    torc_scope_push();
    torc_tensor *p = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32), *g = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    torc_tensor *m = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F32), *v = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    torc_tensor *vmax = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    const uint64_t pv = torc_version(p);
    ck_assert_int_eq(torc_adam_step_(p, g, m, v, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 0, 0), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "torc_adam_step_: step is 0; the first step is 1");
    ck_assert_int_eq(torc_adam_step_(p, NULL, m, v, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 1, 0), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_adam_step_(p, g, m, v, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 1, 8), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "unknown flags 0x8");
    ck_assert_int_eq(torc_adam_step_(p, g, m, v, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 1, TORC_ADAM_AMSGRAD),
                     TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "torc_adam_step_: amsgrad needs max_exp_avg_sq");
    ck_assert_int_eq(torc_adam_step_(p, g, m, v, vmax, 0.1, 0.9, 0.999, 1e-8, 0, 1, 0), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "max_exp_avg_sq is given without TORC_ADAM_AMSGRAD");
    torc_tensor *small = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_adam_step_(p, g, small, v, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 1, 0), TORC_ERR_SHAPE);
    tu_assert_error(TORC_ERR_SHAPE, "torc_adam_step_: exp_avg has shape [3] but param has [2, 3]");
    torc_tensor *vd = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F64);
    ck_assert_int_eq(torc_adam_step_(p, g, m, vd, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 1, 0), TORC_ERR_DTYPE);
    tu_assert_error(TORC_ERR_DTYPE, "torc_adam_step_: exp_avg_sq has dtype f64 but param has f32");
    torc_tensor *pi = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_I64);
    ck_assert_int_eq(torc_adam_step_(pi, pi, pi, pi, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 1, 0), TORC_ERR_DTYPE);
    tu_assert_error(TORC_ERR_DTYPE, "\"_fused_adam\" not implemented for 'Long'");
    // exp_avg sharing part of param's memory
    torc_tensor *flat = torc_zeros(TORC_SHAPE(12), TORC_DTYPE_F32);
    torc_tensor *a = torc_reshape(torc_narrow(flat, 0, 0, 6), TORC_SHAPE(2, 3));
    torc_tensor *b = torc_reshape(torc_narrow(flat, 0, 3, 6), TORC_SHAPE(2, 3));
    ck_assert_int_eq(torc_adam_step_(a, g, b, v, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 1, 0), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "refer to a single memory location");
    // a leaf that requires grad, with grad mode on: PyTorch's in-place error; under no_grad it runs
    ck_assert_int_eq(torc_set_requires_grad(p, true), TORC_OK);
    ck_assert_int_eq(torc_adam_step_(p, g, m, v, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 1, 0), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "a leaf Variable that requires grad is being used in an in-place operation.");
    ck_assert_uint_eq(torc_version(p), pv);
    tu_assert_values(p, TU_ARR(1, 1, 1, 1, 1, 1), 0);
    tu_assert_values(m, TU_ARR(0, 0, 0, 0, 0, 0), 0);
    torc_no_grad_begin();
    ck_assert_int_eq(torc_adam_step_(p, g, m, v, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 1, 0), TORC_OK);
    torc_no_grad_end();
    ck_assert_uint_gt(torc_version(p), pv);
    // the first step moves every element by lr (m / sqrt(v) is 1 after the bias corrections)
    tu_assert_values(p, TU_ARR(0.9, 0.9, 0.9, 0.9, 0.9, 0.9), 1e-6);
    tu_assert_values(m, TU_ARR(0.1, 0.1, 0.1, 0.1, 0.1, 0.1), 1e-7);
    torc_scope_pop();
}
END_TEST

int main(void) {
    Suite *s = suite_create("adam");
    TCase *tc = tcase_create("fused");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, fused_update_matches_the_composed_one_bit_for_bit, 0, N_TARGETS * N_CONFIGS);
#ifdef TORC_TEST_ONEDNN
    tcase_add_test(tc, onednn_runs_dense_f32_and_bf16_itself);
#endif
    suite_add_tcase(s, tc);
    TCase *fe = tcase_create("frontend");
    tcase_add_test(fe, adam_step_checks_its_arguments_and_writes_nothing_on_error);
    suite_add_tcase(s, fe);
    return tu_run(s);
}
