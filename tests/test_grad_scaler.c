// tests/test_grad_scaler.c — GradScaler: scaling the loss, unscaling gradients, skipping the
// step and backing off on injected infs/NaNs, growth after clean steps, misuse errors, state.
#include <math.h>

#include "testutil.h"

static void ok(torc_status st) { ck_assert_msg(st == TORC_OK, "status %d: %s", st, torc_last_error()); }

static torc_tensor *param3(double a, double b, double c) {
    const float v[3] = {(float)a, (float)b, (float)c};
    return torc_parameter(torc_tensor_from(v, TORC_SHAPE(3), TORC_DTYPE_F32));
}

// backward of scale(sum(p * p)): p.grad = scale * 2p.
static void backward_scaled(torc_grad_scaler *gs, torc_tensor *p) {
    torc_tensor *loss = torc_sum(torc_mul(p, p), TORC_ALL_DIMS, false);
    ok(torc_backward(torc_grad_scaler_scale(gs, loss), NULL, false));
}

// Replaces p.grad with (scale * 2p) except element 1, which becomes v (inf or NaN).
static void inject(torc_grad_scaler *gs, torc_tensor *p, double v) {
    torc_no_grad_begin();
    torc_tensor *g = torc_clone(torc_mul_scalar(p, torc_s(2.0 * torc_grad_scaler_get_scale(gs))));
    ok(torc_fill_(torc_select(g, 0, 1), torc_s(v)));
    torc_no_grad_end();
    ok(torc_set_grad(p, g));
}

START_TEST(defaults_and_option_errors) {
    torc_grad_scaler *gs = torc_grad_scaler_new(NULL);
    ck_assert_ptr_nonnull(gs);
    torc_grad_scaler_state st;
    ok(torc_grad_scaler_get_state(gs, &st));
    ck_assert_double_eq(st.scale, 65536.0);
    ck_assert_double_eq(st.options.growth_factor, 2.0);
    ck_assert_double_eq(st.options.backoff_factor, 0.5);
    ck_assert_int_eq(st.options.growth_interval, 2000);
    ck_assert_int_eq(st.growth_tracker, 0);
    ck_assert(st.options.enabled);
    ck_assert_double_eq(torc_grad_scaler_get_scale(gs), 65536.0);
    torc_grad_scaler_free(gs);
    torc_grad_scaler_options o = TORC_GRAD_SCALER_DEFAULTS;
    o.growth_factor = 1.0;
    ck_assert_ptr_null(torc_grad_scaler_new(&o));
    tu_assert_error(TORC_ERR_INVALID_ARG, "The growth factor must be > 1.0.");
    o = (torc_grad_scaler_options)TORC_GRAD_SCALER_DEFAULTS;
    o.backoff_factor = 1.0;
    ck_assert_ptr_null(torc_grad_scaler_new(&o));
    tu_assert_error(TORC_ERR_INVALID_ARG, "The backoff factor must be < 1.0");
    o = (torc_grad_scaler_options)TORC_GRAD_SCALER_DEFAULTS;
    o.growth_interval = 0;
    ck_assert_ptr_null(torc_grad_scaler_new(&o));
    tu_assert_error(TORC_ERR_INVALID_ARG, "growth_interval");
    o = (torc_grad_scaler_options)TORC_GRAD_SCALER_DEFAULTS;
    o.init_scale = -1;
    ck_assert_ptr_null(torc_grad_scaler_new(&o));
    tu_assert_error(TORC_ERR_INVALID_ARG, "init_scale");
}
END_TEST

START_TEST(scale_multiplies_the_loss) {
    torc_scope_push();
    torc_grad_scaler *gs = torc_grad_scaler_new(NULL);
    torc_tensor *l = torc_scalar_tensor(3.0, TORC_DTYPE_F32);
    torc_tensor *s = torc_grad_scaler_scale(gs, l);
    ck_assert_int_eq(torc_get_dtype(s), TORC_DTYPE_F32);
    tu_assert_values(s, TU_ARR(196608), 0);
    // The scale is a zero-dim f32, so promotion decides, as in PyTorch: a zero-dim f16 loss
    // becomes f32, a dimensioned f16 one stays f16 (and 2 * 65536 overflows it).
    torc_tensor *h = torc_grad_scaler_scale(gs, torc_scalar_tensor(2.0, TORC_DTYPE_F16));
    ck_assert_int_eq(torc_get_dtype(h), TORC_DTYPE_F32);
    tu_assert_values(h, TU_ARR(131072), 0);
    h = torc_grad_scaler_scale(gs, torc_full(TORC_SHAPE(2), 2.0, TORC_DTYPE_F16));
    ck_assert_int_eq(torc_get_dtype(h), TORC_DTYPE_F16);
    tu_assert_values(h, TU_ARR(INFINITY, INFINITY), 0);
    // The scaled loss is differentiable.
    torc_tensor *p = param3(1, -2, 0.5);
    backward_scaled(gs, p);
    tu_assert_values(torc_grad(p), TU_ARR(131072, -262144, 65536), 0);
    ck_assert_ptr_null(torc_grad_scaler_scale(gs, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "NULL");
    torc_grad_scaler_free(gs);
    torc_scope_pop();
}
END_TEST

START_TEST(clean_step_unscales_and_steps) {
    torc_scope_push();
    torc_tensor *p = param3(1, -2, 0.5);
    torc_optimizer *opt = torc_optimizer_new("sgd", 1, &p, "lr=0.1");
    ck_assert_msg(opt != NULL, "%s", torc_last_error());
    torc_grad_scaler *gs = torc_grad_scaler_new(NULL);
    backward_scaled(gs, p);
    bool stepped = false;
    ok(torc_grad_scaler_step(gs, opt, &stepped));
    ck_assert(stepped);
    ck_assert(!torc_grad_scaler_found_inf(gs));
    tu_assert_values(torc_grad(p), TU_ARR(2, -4, 1), 0);  // unscaled in place
    tu_assert_values(p, TU_ARR(0.8, -1.6, 0.4), 1e-7);    // p - 0.1 * 2p
    ok(torc_grad_scaler_update(gs));
    torc_grad_scaler_state st;
    ok(torc_grad_scaler_get_state(gs, &st));
    ck_assert_double_eq(st.scale, 65536.0);
    ck_assert_int_eq(st.growth_tracker, 1);
    torc_grad_scaler_free(gs);
    torc_optimizer_free(opt);
    torc_scope_pop();
}
END_TEST

START_TEST(injected_inf_or_nan_skips_the_step_and_backs_off) {
    const double bad[2] = {INFINITY, NAN};
    for (int k = 0; k < 2; k++) {
        torc_scope_push();
        torc_tensor *p = param3(1, -2, 0.5);
        torc_optimizer *opt = torc_optimizer_new("adam", 1, &p, "lr=0.1");
        torc_grad_scaler *gs = torc_grad_scaler_new(NULL);
        // One clean step first, so the growth tracker has something to reset.
        backward_scaled(gs, p);
        ok(torc_grad_scaler_step(gs, opt, NULL));
        ok(torc_grad_scaler_update(gs));
        ck_assert_int_eq(torc_optimizer_param_step_count(opt, 0), 1);
        torc_tensor *before = torc_clone(p);
        inject(gs, p, bad[k]);
        bool stepped = true;
        ok(torc_grad_scaler_step(gs, opt, &stepped));
        ck_assert(!stepped);
        ck_assert(torc_grad_scaler_found_inf(gs));
        ck_assert_int_eq(torc_optimizer_param_step_count(opt, 0), 1);  // the optimizer did not run
        double *a = tu_values(p), *b = tu_values(before);
        for (int i = 0; i < 3; i++) ck_assert_double_eq(a[i], b[i]);
        free(a);
        free(b);
        ok(torc_grad_scaler_update(gs));
        torc_grad_scaler_state st;
        ok(torc_grad_scaler_get_state(gs, &st));
        ck_assert_double_eq(st.scale, 32768.0);
        ck_assert_int_eq(st.growth_tracker, 0);
        ck_assert(!torc_grad_scaler_found_inf(gs));  // records cleared by update
        // The next clean step runs again with the lowered scale.
        ok(torc_optimizer_zero_grad(opt, true));
        backward_scaled(gs, p);
        bool again = false;
        ok(torc_grad_scaler_step(gs, opt, &again));
        ck_assert(again);
        ck_assert_int_eq(torc_optimizer_param_step_count(opt, 0), 2);
        ok(torc_grad_scaler_update(gs));
        torc_grad_scaler_free(gs);
        torc_optimizer_free(opt);
        torc_scope_pop();
    }
}
END_TEST

START_TEST(scale_grows_after_growth_interval_clean_steps) {
    torc_scope_push();
    torc_grad_scaler_options o = {8.0, 2.0, 0.25, 3, true};
    torc_grad_scaler *gs = torc_grad_scaler_new(&o);
    torc_tensor *p = param3(1, 2, 3);
    torc_optimizer *opt = torc_optimizer_new("sgd", 1, &p, "lr=0.001");
    const double scales[7] = {8, 8, 16, 16, 16, 32, 8};
    const int64_t trackers[7] = {1, 2, 0, 1, 2, 0, 0};
    for (int step = 0; step < 7; step++) {
        ok(torc_optimizer_zero_grad(opt, true));
        if (step == 6) inject(gs, p, INFINITY);  // backoff 0.25: 32 -> 8
        else backward_scaled(gs, p);
        ok(torc_grad_scaler_step(gs, opt, NULL));
        ok(torc_grad_scaler_update(gs));
        torc_grad_scaler_state st;
        ok(torc_grad_scaler_get_state(gs, &st));
        ck_assert_msg(st.scale == scales[step] && st.growth_tracker == trackers[step],
                      "step %d: scale %g tracker %lld", step, st.scale, (long long)st.growth_tracker);
    }
    torc_grad_scaler_free(gs);
    // Growth that would overflow float32 keeps the scale.
    torc_grad_scaler_options big = {3e38, 2.0, 0.5, 1, true};
    gs = torc_grad_scaler_new(&big);
    ok(torc_optimizer_zero_grad(opt, true));
    ok(torc_set_grad(p, torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F32)));
    ok(torc_grad_scaler_step(gs, opt, NULL));
    ok(torc_grad_scaler_update(gs));
    ck_assert_double_eq(torc_grad_scaler_get_scale(gs), (float)3e38);
    torc_grad_scaler_free(gs);
    torc_optimizer_free(opt);
    torc_scope_pop();
}
END_TEST

START_TEST(unscale_before_step_and_misuse) {
    torc_scope_push();
    torc_tensor *p = param3(1, -2, 0.5);
    torc_optimizer *opt = torc_optimizer_new("sgd", 1, &p, "lr=0.1");
    torc_grad_scaler *gs = torc_grad_scaler_new(NULL);
    ck_assert_int_eq(torc_grad_scaler_update(gs), TORC_ERR_RUNTIME);
    tu_assert_error(TORC_ERR_RUNTIME, "No inf checks were recorded prior to update.");
    backward_scaled(gs, p);
    ok(torc_grad_scaler_unscale_(gs, opt));  // e.g. to clip gradients
    tu_assert_values(torc_grad(p), TU_ARR(2, -4, 1), 0);
    ck_assert_int_eq(torc_grad_scaler_unscale_(gs, opt), TORC_ERR_RUNTIME);
    tu_assert_error(TORC_ERR_RUNTIME, "unscale_() has already been called on this optimizer since the last update().");
    ok(torc_grad_scaler_step(gs, opt, NULL));  // does not unscale a second time
    tu_assert_values(p, TU_ARR(0.8, -1.6, 0.4), 1e-7);
    ck_assert_int_eq(torc_grad_scaler_step(gs, opt, NULL), TORC_ERR_RUNTIME);
    tu_assert_error(TORC_ERR_RUNTIME, "step() has already been called since the last update().");
    ck_assert_int_eq(torc_grad_scaler_unscale_(gs, opt), TORC_ERR_RUNTIME);
    tu_assert_error(TORC_ERR_RUNTIME, "unscale_() is being called after step().");
    ok(torc_grad_scaler_update(gs));
    // f16 gradients are refused (f32 master parameters are the point).
    torc_tensor *h = torc_parameter(torc_ones(TORC_SHAPE(2), TORC_DTYPE_F16));
    torc_optimizer *oh = torc_optimizer_new("sgd", 1, &h, "lr=0.1");
    ok(torc_set_grad(h, torc_ones(TORC_SHAPE(2), TORC_DTYPE_F16)));
    ck_assert_int_eq(torc_grad_scaler_step(gs, oh, NULL), TORC_ERR_DTYPE);
    tu_assert_error(TORC_ERR_DTYPE, "Attempting to unscale FP16 gradients.");
    torc_clear_error();  // a NULL argument keeps an error already set
    ck_assert_int_eq(torc_grad_scaler_step(gs, NULL, NULL), TORC_ERR_INVALID_ARG);
    torc_optimizer_free(oh);
    torc_grad_scaler_free(gs);
    torc_optimizer_free(opt);
    torc_scope_pop();
}
END_TEST

START_TEST(unscale_grads_for_hand_written_updates) {
    torc_scope_push();
    torc_grad_scaler_options o = {1024.0, 2.0, 0.5, 2000, true};
    torc_grad_scaler *gs = torc_grad_scaler_new(&o);
    torc_tensor *p = param3(1, -2, 0.5), *q = param3(3, 0, 1);
    torc_tensor *loss = torc_sum(torc_mul(p, q), TORC_ALL_DIMS, false);
    ok(torc_backward(torc_grad_scaler_scale(gs, loss), NULL, false));
    torc_tensor *grads[3] = {torc_grad(p), NULL, torc_grad(q)};
    ok(torc_grad_scaler_unscale_grads_(gs, 3, grads));
    ck_assert(!torc_grad_scaler_found_inf(gs));
    tu_assert_values(grads[0], TU_ARR(3, 0, 1), 0);
    tu_assert_values(grads[2], TU_ARR(1, -2, 0.5), 0);
    ok(torc_grad_scaler_update(gs));
    ck_assert_double_eq(torc_grad_scaler_get_scale(gs), 1024.0);
    ok(torc_fill_(torc_select(grads[2], 0, 0), torc_s(NAN)));
    ok(torc_grad_scaler_unscale_grads_(gs, 3, grads));
    ck_assert(torc_grad_scaler_found_inf(gs));
    ok(torc_grad_scaler_update(gs));
    ck_assert_double_eq(torc_grad_scaler_get_scale(gs), 512.0);
    torc_grad_scaler_free(gs);
    torc_scope_pop();
}
END_TEST

START_TEST(disabled_scaler_passes_through) {
    torc_scope_push();
    torc_grad_scaler_options o = TORC_GRAD_SCALER_DEFAULTS;
    o.enabled = false;
    torc_grad_scaler *gs = torc_grad_scaler_new(&o);
    torc_tensor *p = param3(1, -2, 0.5);
    torc_optimizer *opt = torc_optimizer_new("sgd", 1, &p, "lr=0.1");
    torc_tensor *loss = torc_sum(torc_mul(p, p), TORC_ALL_DIMS, false);
    ck_assert_ptr_eq(torc_grad_scaler_scale(gs, loss), loss);
    ck_assert_double_eq(torc_grad_scaler_get_scale(gs), 1.0);
    ok(torc_backward(loss, NULL, false));
    bool stepped = false;
    ok(torc_grad_scaler_step(gs, opt, &stepped));
    ck_assert(stepped);
    tu_assert_values(p, TU_ARR(0.8, -1.6, 0.4), 1e-7);
    ok(torc_grad_scaler_update(gs));
    torc_grad_scaler_free(gs);
    torc_optimizer_free(opt);
    torc_scope_pop();
}
END_TEST

START_TEST(state_round_trip) {
    torc_scope_push();
    torc_grad_scaler_options o = {4096.0, 4.0, 0.125, 5, true};
    torc_grad_scaler *a = torc_grad_scaler_new(&o);
    torc_tensor *p = param3(1, 2, 3);
    torc_optimizer *opt = torc_optimizer_new("sgd", 1, &p, "lr=0.001");
    for (int i = 0; i < 3; i++) {  // tracker 3, scale 4096
        ok(torc_optimizer_zero_grad(opt, true));
        backward_scaled(a, p);
        ok(torc_grad_scaler_step(a, opt, NULL));
        ok(torc_grad_scaler_update(a));
    }
    // get/set
    torc_grad_scaler_state st, st2;
    ok(torc_grad_scaler_get_state(a, &st));
    ck_assert_int_eq(st.growth_tracker, 3);
    torc_grad_scaler *b = torc_grad_scaler_new(NULL);
    ok(torc_grad_scaler_set_state(b, &st));
    ok(torc_grad_scaler_get_state(b, &st2));
    ck_assert(memcmp(&st.options, &st2.options, offsetof(torc_grad_scaler_options, enabled)) == 0);
    ck_assert(st2.scale == st.scale && st2.growth_tracker == 3 && st2.options.enabled);
    // state dict (what a checkpoint's metadata holds)
    torc_state_dict *sd = torc_state_dict_new();
    ok(torc_grad_scaler_state_dict(a, sd, NULL));
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "grad_scaler.scale"), "4096");
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "grad_scaler._growth_tracker"), "3");
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "grad_scaler.backoff_factor"), "0.125");
    torc_grad_scaler *c = torc_grad_scaler_new(NULL);
    ok(torc_grad_scaler_load_state_dict(c, sd, NULL));
    // Both continue identically: two more clean steps reach the interval and grow by 4.
    torc_grad_scaler *both[2] = {a, c};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 2; i++) {
            ok(torc_optimizer_zero_grad(opt, true));
            backward_scaled(both[k], p);
            ok(torc_grad_scaler_step(both[k], opt, NULL));
            ok(torc_grad_scaler_update(both[k]));
        }
    ck_assert_double_eq(torc_grad_scaler_get_scale(a), 16384.0);
    ck_assert_double_eq(torc_grad_scaler_get_scale(c), 16384.0);
    // A malformed state changes nothing.
    ok(torc_state_dict_set_meta(sd, "grad_scaler.growth_factor", "abc"));
    ck_assert_int_eq(torc_grad_scaler_load_state_dict(b, sd, NULL), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "grad_scaler.growth_factor");
    ck_assert_double_eq(torc_grad_scaler_get_scale(b), 4096.0);
    ck_assert_int_eq(torc_grad_scaler_load_state_dict(b, sd, "other."), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "missing key 'other.scale'");
    st.growth_tracker = -1;
    ck_assert_int_eq(torc_grad_scaler_set_state(b, &st), TORC_ERR_INVALID_ARG);
    torc_state_dict_free(sd);
    torc_grad_scaler_free(a);
    torc_grad_scaler_free(b);
    torc_grad_scaler_free(c);
    torc_optimizer_free(opt);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("grad_scaler");
    TCase *tc = tcase_create("grad_scaler");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, defaults_and_option_errors);
    tcase_add_test(tc, scale_multiplies_the_loss);
    tcase_add_test(tc, clean_step_unscales_and_steps);
    tcase_add_test(tc, injected_inf_or_nan_skips_the_step_and_backs_off);
    tcase_add_test(tc, scale_grows_after_growth_interval_clean_steps);
    tcase_add_test(tc, unscale_before_step_and_misuse);
    tcase_add_test(tc, unscale_grads_for_hand_written_updates);
    tcase_add_test(tc, disabled_scaler_passes_through);
    tcase_add_test(tc, state_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
