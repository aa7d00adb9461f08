// tests/test_gelu_backward.c — GELU_BACKWARD (backend ABI 2.4), aten::gelu_backward as one op: hand
// values (mpmath), the composed formula in f64 on the reference and the default backend for f64 /
// f32 / f16 / bf16, strided and broadcast operands, torc_run_op's checks, and GELU's backward
// sending it (its FLOPs counted under the op, the backward's activation peak without temporaries)
// or, on a device backend that declines it, composing the formula there.
#define _POSIX_C_SOURCE 200809L  // setenv
#include "ck.h"
#include <math.h>
#include <stdio.h>

#include "testutil.h"
#include "torc/torc.h"

// A tensor of dtype dt on dev holding v (rounded to dt).
static torc_tensor *make(torc_device *dev, const double *v, int ndim, const int64_t *shape, torc_dtype dt) {
    torc_tensor *t = torc_tensor_from(v, ndim, shape, TORC_DTYPE_F64);
    t = t ? torc_to_device(torc_to_dtype(t, dt), dev) : NULL;
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

// dx = GELU_BACKWARD(dy, x) through torc_run_op (flags: TORC_RUN_NATIVE or 0).
static torc_tensor *run_op(torc_device *dev, torc_tensor *dy, torc_tensor *x, int approximate, unsigned flags,
                           torc_status *st) {
    torc_tensor *dx = torc_to_device(torc_empty(torc_ndim(x), torc_shape(x), torc_get_dtype(x)), dev);
    ck_assert_msg(dx != NULL, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_GELU_BACKWARD, .n_in = 2, .n_out = 1, .in = {dy, x}, .out = {dx}};
    call.params.gelu.approximate = approximate;
    *st = torc_run_op(dev, &call, flags);
    return dx;
}

// The formula core/backward.c composes without the op, on f64 copies (PyTorch's GeluBackward).
static torc_tensor *composed_f64(torc_tensor *dy, torc_tensor *x, int approximate) {
    torc_tensor *g = torc_to_dtype(dy, TORC_DTYPE_F64), *v = torc_to_dtype(x, TORC_DTYPE_F64), *d;
    if (approximate) {
        const double beta = 0.79788456080286535588, kappa = 0.044715;
        torc_tensor *x2 = torc_square(v);
        torc_tensor *th = torc_tanh(torc_mul_scalar(torc_add(v, torc_mul_scalar(torc_mul(x2, v), torc_s(kappa))),
                                                    torc_s(beta)));
        torc_tensor *left = torc_mul_scalar(torc_add_scalar(th, torc_s(1.0)), torc_s(0.5));
        torc_tensor *dinner = torc_mul_scalar(torc_add_scalar(torc_mul_scalar(x2, torc_s(3 * kappa)), torc_s(1.0)),
                                              torc_s(beta));
        torc_tensor *right = torc_mul(torc_mul(torc_mul_scalar(v, torc_s(0.5)),
                                               torc_rsub_scalar(torc_square(th), torc_s(1.0))), dinner);
        d = torc_add(left, right);
    } else {
        torc_tensor *cdf = torc_mul_scalar(torc_add_scalar(torc_erf(torc_mul_scalar(v, torc_s(0.70710678118654752440))),
                                                           torc_s(1.0)), torc_s(0.5));
        torc_tensor *pdf = torc_mul_scalar(torc_exp(torc_mul_scalar(torc_square(v), torc_s(-0.5))),
                                           torc_s(0.39894228040143267794));
        d = torc_add(cdf, torc_mul(v, pdf));
    }
    d = torc_mul(g, d);
    ck_assert_msg(d != NULL, "%s", torc_last_error());
    return d;
}

// |got - want| <= tol |dy| per element: gelu' is at most 1.13 in size, and near its zero (x about
// -0.75) a float computation loses to cancellation what |dy| eps bounds, PyTorch's kernel too. Plus
// f16's smallest subnormal, where a result underflows (dy 1.3e-5, dx -1.3e-8 -> -0).
static void assert_close(const char *what, torc_tensor *got, torc_tensor *want, torc_tensor *dy, double tol) {
    const double atol = torc_get_dtype(got) == TORC_DTYPE_F16 ? 0x1p-24 : 0.0;
    double *g = tu_values(got), *w = tu_values(want), *d = tu_values(dy);
    const int64_t n = torc_numel(want);
    ck_assert_int_eq(torc_numel(got), n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabs(g[i] - w[i]) <= tol * fabs(d[i]) + atol || g[i] == w[i],
                      "%s: element %lld is %.17g, want %.17g (dy %g, tol %g)", what, (long long)i, g[i], w[i], d[i],
                      tol);
    free(g), free(w), free(d);
}

// The bound against the f64 formula: f64 a few ulps; f32 8 eps (opmath float, libm's erff / tanhf
// / expf within 2 ulps); f16 / bf16 the rounding of the result (half an ulp of 1.13) and f32's.
static double tol_of(torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_F64: return 1e-14;
    case TORC_DTYPE_F32: return 8 * 0x1p-23;
    case TORC_DTYPE_F16: return 0x1p-10;
    default: return 0x1p-7;
    }
}

static const torc_dtype g_dtypes[] = {TORC_DTYPE_F64, TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16};

// ---- hand values ----
// mpmath at 40 digits: dy * (Phi(x) + x phi(x)), and the tanh form's derivative.
START_TEST(op_matches_hand_values) {
    static const double x[8] = {-3, -1.5, -0.5, 0, 0.25, 1, 2.5, 6}, dy[8] = {1, 2, -0.5, 3, 1, -1, 0.5, 1};
    static const double want[2][8] = {
        {-0.011945647204183927, -0.25493838445995903, -0.066252437671918574, 1.5, 0.69537335488363605,
         -1.0833154705876864, 0.51880554295407255, 1.0000000354687095},
        {-0.011584166630969726, -0.25542158630286615, -0.06631504823267885, 1.5, 0.69535409515106039,
         -1.0829640838457826, 0.51897578810633305, 1.0000000007709975}};
    torc_device *devs[2] = {torc_device_get("reference"), torc_default_device()};
    for (int k = 0; k < 2; k++)
        for (int a = 0; a < 2; a++)
            for (size_t t = 0; t < sizeof g_dtypes / sizeof *g_dtypes; t++) {
                torc_scope_push();
                torc_status st;
                torc_tensor *dx = run_op(devs[k], make(devs[k], dy, TORC_SHAPE(8), g_dtypes[t]),
                                         make(devs[k], x, TORC_SHAPE(8), g_dtypes[t]), a, 0, &st);
                ck_assert_msg(st == TORC_OK, "%s", torc_last_error());
                ck_assert_int_eq(torc_get_dtype(dx), g_dtypes[t]);
                const double tol = g_dtypes[t] == TORC_DTYPE_F64 ? 1e-15 : tol_of(g_dtypes[t]);
                tu_assert_values(dx, want[a], 8, tol);
                torc_scope_pop();
            }
}
END_TEST

// ---- against the composed formula ----
// (300, 257) values of x over [-8, 8] (both tails, the cancellation near -0.75, exact zeros), dy
// standard normal: enough elements that onednn takes the op (not under TORC_ONEDNN_MIN_WORK).
static void inputs(torc_device *dev, torc_dtype dt, uint64_t seed, torc_tensor **dy, torc_tensor **x) {
    torc_generator *gen = torc_generator_new(seed);
    torc_tensor *u = torc_rand(TORC_SHAPE(300, 257), TORC_DTYPE_F64, gen);
    torc_tensor *n = torc_randn(TORC_SHAPE(300, 257), TORC_DTYPE_F64, gen);
    torc_generator_free(gen);
    ck_assert_msg(u && n, "%s", torc_last_error());
    *x = torc_to_device(torc_to_dtype(torc_sub_scalar(torc_mul_scalar(u, torc_s(16.0)), torc_s(8.0)), dt), dev);
    *dy = torc_to_device(torc_to_dtype(n, dt), dev);
    ck_assert_msg(*x && *dy, "%s", torc_last_error());
}

START_TEST(op_matches_composed_formula) {
    torc_device *devs[2] = {torc_device_get("reference"), torc_default_device()};
    for (int k = 0; k < 2; k++)
        for (int a = 0; a < 2; a++)
            for (size_t t = 0; t < sizeof g_dtypes / sizeof *g_dtypes; t++) {
                torc_scope_push();
                torc_tensor *dy, *x;
                inputs(devs[k], g_dtypes[t], 11 + (uint64_t)t, &dy, &x);
                torc_status st;
                torc_tensor *dx = run_op(devs[k], dy, x, a, 0, &st);
                ck_assert_msg(st == TORC_OK, "%s", torc_last_error());
                char what[96];
                snprintf(what, sizeof what, "%s %s approximate %d", torc_device_backend_name(devs[k]),
                         torc_dtype_name(g_dtypes[t]), a);
                assert_close(what, dx, composed_f64(dy, x, a), dy, tol_of(g_dtypes[t]));
                torc_scope_pop();
            }
}
END_TEST

// onednn runs f32, bf16 and f16 itself (dense operands), and declines f64.
START_TEST(onednn_takes_dense_floats) {
    torc_device *dev = torc_default_device();
    if (strcmp(torc_device_backend_name(dev), "onednn") != 0) return;
    for (size_t t = 0; t < sizeof g_dtypes / sizeof *g_dtypes; t++) {
        torc_scope_push();
        torc_tensor *dy, *x;
        inputs(dev, g_dtypes[t], 5, &dy, &x);
        torc_status st;
        run_op(dev, dy, x, 1, TORC_RUN_NATIVE, &st);
        if (g_dtypes[t] == TORC_DTYPE_F64) {
            ck_assert_int_eq(st, TORC_ERR_NOT_SUPPORTED);
            torc_clear_error();
        } else {
            ck_assert_msg(st == TORC_OK, "%s: %s", torc_dtype_name(g_dtypes[t]), torc_last_error());
        }
        torc_scope_pop();
    }
}
END_TEST

// A transposed x, a dy broadcast along dim 0 (stride 0), a dy with every other column, out one of
// the inputs (in place): each against the formula.
START_TEST(strided_and_broadcast_operands) {
    torc_device *devs[2] = {torc_device_get("reference"), torc_default_device()};
    for (int k = 0; k < 2; k++)
        for (size_t t = 0; t < sizeof g_dtypes / sizeof *g_dtypes; t++) {
            torc_scope_push();
            const torc_dtype dt = g_dtypes[t];
            torc_tensor *dy, *x;
            inputs(devs[k], dt, 23, &dy, &x);
            torc_tensor *xt = torc_transpose(x, 0, 1);                                   // (257, 300), strided
            torc_tensor *row = torc_narrow(torc_transpose(dy, 0, 1), 0, 0, 1);           // (1, 300)
            torc_tensor *dyb = torc_expand(row, TORC_SHAPE(257, 300));                // stride 0 on dim 0
            torc_tensor *dys = torc_narrow(torc_reshape(dy, TORC_SHAPE(150, 514)), 1, 0, 300);  // row stride 514
            ck_assert_msg(xt && dyb && dys, "%s", torc_last_error());
            torc_status st;
            torc_tensor *dx = run_op(devs[k], dyb, xt, 0, 0, &st);
            ck_assert_msg(st == TORC_OK, "%s", torc_last_error());
            assert_close("broadcast dy, transposed x", dx, composed_f64(dyb, xt, 0), dyb, tol_of(dt));
            torc_tensor *x2 = torc_narrow(xt, 0, 0, 150);
            dx = run_op(devs[k], dys, x2, 1, 0, &st);
            ck_assert_msg(st == TORC_OK, "%s", torc_last_error());
            assert_close("strided dy and x", dx, composed_f64(dys, x2, 1), dys, tol_of(dt));
            // in place: out is dy (the contract's elementwise exception)
            torc_tensor *dyc = torc_add_scalar(dy, torc_s(0.0)), *want = composed_f64(dy, x, 1);  // a copy
            torc_op_call call = {.code = TORC_OP_GELU_BACKWARD, .n_in = 2, .n_out = 1, .in = {dyc, x}, .out = {dyc}};
            call.params.gelu.approximate = 1;
            ck_assert_msg(torc_run_op(devs[k], &call, 0) == TORC_OK, "%s", torc_last_error());
            assert_close("in place", dyc, want, dy, tol_of(dt));
            torc_scope_pop();
        }
}
END_TEST

// Special values on the default backend (64K elements: onednn takes it) as on the reference:
// NaN and +-inf give NaN (inf * 0), huge finite x gives dy or 0 as in double (x^2 overflows float).
START_TEST(special_values_match_the_reference) {
    static const double sp[12] = {NAN, INFINITY, -INFINITY, 1e30, -1e30, 1e10, -1e10, 100, -100, -0.0, 44.5, -9.5};
    enum { N = 65536 };
    double *xv = malloc(N * sizeof *xv), *gv = malloc(N * sizeof *gv);
    for (int i = 0; i < N; i++) xv[i] = sp[i % 12], gv[i] = 1.0 + (i % 7) * 0.25;
    torc_device *ref = torc_device_get("reference"), *def = torc_default_device();
    for (int a = 0; a < 2; a++) {
        torc_scope_push();
        torc_status st;
        torc_tensor *want = run_op(ref, make(ref, gv, TORC_SHAPE(N), TORC_DTYPE_F32),
                                   make(ref, xv, TORC_SHAPE(N), TORC_DTYPE_F32), a, 0, &st);
        ck_assert_int_eq(st, TORC_OK);
        torc_tensor *got = run_op(def, make(def, gv, TORC_SHAPE(N), TORC_DTYPE_F32),
                                  make(def, xv, TORC_SHAPE(N), TORC_DTYPE_F32), a, 0, &st);
        ck_assert_int_eq(st, TORC_OK);
        double *g = tu_values(got), *w = tu_values(want);
        for (int i = 0; i < 12; i++)
            ck_assert_msg((isnan(g[i]) && isnan(w[i])) || fabs(g[i] - w[i]) <= 1e-6 * gv[i],
                          "approximate %d, x = %g: %.9g, the reference %.9g", a, xv[i], g[i], w[i]);
        free(g), free(w);
        torc_scope_pop();
    }
    free(xv), free(gv);
}
END_TEST

// ---- torc_run_op's checks ----
START_TEST(run_op_checks_shapes_and_params) {
    torc_device *dev = torc_device_get("reference");
    torc_scope_push();
    torc_tensor *a = torc_to_device(torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32), dev);
    torc_tensor *b = torc_to_device(torc_ones(TORC_SHAPE(3, 2), TORC_DTYPE_F32), dev);
    torc_tensor *o = torc_to_device(torc_empty(TORC_SHAPE(2, 3), TORC_DTYPE_F32), dev);
    torc_op_call call = {.code = TORC_OP_GELU_BACKWARD, .n_in = 2, .n_out = 1, .in = {a, b}, .out = {o}};
    ck_assert_int_ne(torc_run_op(dev, &call, 0), TORC_OK);
    tu_assert_error(TORC_ERR_SHAPE, "in[1] has shape [3, 2]");
    call.in[1] = a;
    call.params.gelu.approximate = 2;
    ck_assert_int_ne(torc_run_op(dev, &call, 0), TORC_OK);
    tu_assert_error(TORC_ERR_SHAPE, "params.gelu.approximate is 2");  // run_op's one status for its checks
    call.params.gelu.approximate = 0;
    call.n_in = 1;
    ck_assert_int_ne(torc_run_op(dev, &call, 0), TORC_OK);
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "gelu_backward"));
    call.n_in = 2;
    ck_assert_int_eq(torc_run_op(dev, &call, 0), TORC_OK);
    double v = 0;
    ck_assert_int_eq(torc_item(torc_sum(o, TORC_ALL_DIMS, false), &v), TORC_OK);
    ck_assert_double_eq_tol(v, 6 * 1.0833154705876864, 1e-5);
    // integer operands: the reference declines (PyTorch's gelu_backward is floating only)
    torc_tensor *i = torc_to_device(torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_I32), dev);
    torc_tensor *io = torc_to_device(torc_empty(TORC_SHAPE(2, 3), TORC_DTYPE_I32), dev);
    torc_op_call ic = {.code = TORC_OP_GELU_BACKWARD, .n_in = 2, .n_out = 1, .in = {i, i}, .out = {io}};
    ck_assert_int_eq(torc_run_op(dev, &ic, 0), TORC_ERR_NOT_SUPPORTED);
    torc_clear_error();
    torc_scope_pop();
}
END_TEST

// ---- GELU's backward sends the op ----
// torc_gelu(x).backward(dy) on the default backend: the gradient is the formula's, and its FLOPs
// are counted under GELU_BACKWARD (one per element), not under the composed ops.
START_TEST(gelu_backward_runs_the_op) {
    torc_device *dev = torc_default_device();
    for (int a = 0; a < 2; a++)
        for (size_t t = 0; t < sizeof g_dtypes / sizeof *g_dtypes; t++) {
            torc_scope_push();
            const torc_dtype dt = g_dtypes[t];
            torc_tensor *dy, *x;
            inputs(dev, dt, 31, &dy, &x);
            ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
            torc_tensor *y = torc_gelu(x, a);
            torc_flops_reset();
            ck_assert_msg(y && torc_backward(y, dy, false) == TORC_OK, "%s", torc_last_error());
            ck_assert_uint_eq(torc_flops(TORC_PHASE_BACKWARD, TORC_OP_GELU_BACKWARD, (int)dt), 300 * 257);
            ck_assert_uint_eq(torc_flops(TORC_PHASE_BACKWARD, TORC_OP_TANH, -1), 0);
            ck_assert_uint_eq(torc_flops(TORC_PHASE_BACKWARD, TORC_OP_ERF, -1), 0);
            assert_close("autograd", torc_grad(x), composed_f64(dy, x, a), dy, tol_of(dt));
            torc_scope_pop();
        }
}
END_TEST

// The backward of gelu over (512, 1024) f32 holds x, dy and dx: its activation peak above what is
// held before it is dx (2 MiB) and nothing else, where the composition held ~8 such temporaries at
// once (the tanh form: x^2, x^3, inner, tanh, its square, ... 16 MiB measured).
START_TEST(gelu_backward_keeps_no_temporaries) {
    torc_device *dev = torc_default_device();
    const uint64_t one = 512 * 1024 * 4;
    for (int a = 0; a < 2; a++) {
        torc_scope_push();
        torc_generator *gen = torc_generator_new(3);
        torc_tensor *x = torc_to_device(torc_randn(TORC_SHAPE(512, 1024), TORC_DTYPE_F32, gen), dev);
        torc_tensor *dy = torc_to_device(torc_randn(TORC_SHAPE(512, 1024), TORC_DTYPE_F32, gen), dev);
        torc_generator_free(gen);
        ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
        torc_tensor *y = torc_gelu(x, a);
        ck_assert_msg(y != NULL, "%s", torc_last_error());
        torc_memory_stats st;
        ck_assert_int_eq(torc_memory_stats_get(dev, &st), TORC_OK);
        const uint64_t before = st.total_in_use;
        torc_memory_reset_peak(dev);
        ck_assert_msg(torc_backward(y, dy, false) == TORC_OK, "%s", torc_last_error());
        ck_assert_int_eq(torc_memory_stats_get(dev, &st), TORC_OK);
        const uint64_t peak = st.total_peak - before;
        ck_assert_msg(peak <= 2 * one, "approximate %d: the backward's peak is %llu bytes above what it started with "
                      "(one tensor is %llu)", a, (unsigned long long)peak, (unsigned long long)one);
        torc_scope_pop();
    }
}
END_TEST

// A device backend that declines the op (tests/plugins/fake_device.c declines every op; its ops
// round-trip to the host under TORC_DEVICE_FALLBACK=1): GELU's backward composes the formula on
// the device, never sending gelu_backward (which would round-trip as one op), and is right.
START_TEST(device_backend_declining_gets_the_composition) {
    char dir[1024];
    const char *build = getenv("TORC_BUILD_DIR");
    snprintf(dir, sizeof dir, "%s/tests/plugins/libtorc_fakedev.so", build ? build : ".");
    FILE *f = fopen(dir, "rb");
    if (!f) {  // built with the tests (tests/data.cmake); absent from a partial build
        fprintf(stderr, "device_backend_declining_gets_the_composition: skipped, %s not built\n", dir);
        return;
    }
    fclose(f);
    snprintf(dir, sizeof dir, "%s/tests/plugins", build ? build : ".");
    ck_assert_int_eq(setenv("TORC_PLUGIN_PATH", dir, 1), 0);
    ck_assert_int_eq(setenv("TORC_DEVICE_FALLBACK", "1", 1), 0);
    torc_device *dev = torc_device_get("fakedev");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    for (int a = 0; a < 2; a++) {
        torc_scope_push();
        torc_fallback_reset();
        static const double xv[6] = {-3, -0.75, 0, 0.5, 1.5, 4}, gv[6] = {1, -2, 0.5, 1, 3, -1};
        torc_tensor *x = make(dev, xv, TORC_SHAPE(6), TORC_DTYPE_F32);
        torc_tensor *dy = make(dev, gv, TORC_SHAPE(6), TORC_DTYPE_F32);
        ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
        torc_tensor *y = torc_gelu(x, a);
        ck_assert_msg(y && torc_backward(y, dy, false) == TORC_OK, "%s", torc_last_error());
        ck_assert_uint_eq(torc_fallback_count(TORC_OP_GELU_BACKWARD), 0);
        ck_assert_uint_gt(torc_fallback_count(a ? TORC_OP_TANH : TORC_OP_ERF), 0);
        torc_device *ref = torc_device_get("reference");
        torc_tensor *gx = torc_to_device(torc_grad(x), ref);
        assert_close("composed on the device", gx, composed_f64(torc_to_device(dy, ref), torc_to_device(x, ref), a),
                     torc_to_device(dy, ref), 4e-6);
        torc_scope_pop();
    }
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("gelu_backward");
    TCase *tc = tcase_create("gelu_backward");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, op_matches_hand_values);
    tcase_add_test(tc, op_matches_composed_formula);
    tcase_add_test(tc, onednn_takes_dense_floats);
    tcase_add_test(tc, strided_and_broadcast_operands);
    tcase_add_test(tc, special_values_match_the_reference);
    tcase_add_test(tc, run_op_checks_shapes_and_params);
    tcase_add_test(tc, gelu_backward_runs_the_op);
    tcase_add_test(tc, gelu_backward_keeps_no_temporaries);
    tcase_add_test(tc, device_backend_declining_gets_the_composition);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
