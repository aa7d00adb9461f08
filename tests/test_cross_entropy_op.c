// tests/test_cross_entropy_op.c — CROSS_ENTROPY (backend ABI 2.5), a row's loss and gradient in one
// op: hand values in double, the default backend against the reference for f64 / f32 / f16 / bf16
// at V = 1, 7, 50257, ignored rows, the gradient over the logits (in place) or apart, NaN and inf
// rows, strided rows, torc_run_op's checks and the out-of-range target's error on both backends.
// tests/cross_entropy_op.cmake runs it again under the AVX2 and plain-C caps.
#define _POSIX_C_SOURCE 200809L  // setenv
#include "ck.h"
#include <math.h>
#include <stdio.h>

#include "testutil.h"
#include "torc/torc.h"

static torc_dtype opmath(torc_dtype t) { return t == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32; }

// A tensor of dtype dt on dev holding v (rounded to dt), with storage of its own.
static torc_tensor *make(torc_device *dev, const double *v, int ndim, const int64_t *shape, torc_dtype dt) {
    torc_tensor *t = torc_tensor_from(v, ndim, shape, TORC_DTYPE_F64);
    t = t ? torc_to_device(torc_to_dtype(t, dt), dev) : NULL;
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

static torc_tensor *make_i64(torc_device *dev, const int64_t *v, int64_t n) {
    torc_tensor *t = torc_tensor_from(v, 1, &n, TORC_DTYPE_I64);
    t = t ? torc_to_device(torc_clone(t), dev) : NULL;
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

typedef struct ce_out {
    torc_tensor *loss, *grad;
} ce_out;

// loss, grad = CROSS_ENTROPY(x, t, w) on dev; in place: grad is x itself.
static torc_status run_ce(torc_device *dev, torc_tensor *x, torc_tensor *t, torc_tensor *w, bool in_place,
                          unsigned flags, ce_out *o) {
    const int64_t N = torc_size(x, 0);
    o->loss = torc_to_device(torc_empty(1, &N, opmath(torc_get_dtype(x))), dev);
    o->grad = in_place ? x : torc_to_device(torc_empty(2, torc_shape(x), torc_get_dtype(x)), dev);
    ck_assert_msg(o->loss && o->grad, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_CROSS_ENTROPY, .n_in = 3, .n_out = 2, .in = {x, t, w}, .out = {o->loss, o->grad}};
    return torc_run_op(dev, &call, flags);
}

// The contract in double on host values: loss and gradient rows (NaN rows give NaN).
static void expected(const double *x, const int64_t *t, const double *w, int64_t N, int64_t V, double *loss,
                     double *grad) {
    for (int64_t i = 0; i < N; i++) {
        const double *r = x + i * V;
        if (t[i] < 0) {
            loss[i] = 0;
            for (int64_t j = 0; j < V; j++) grad[i * V + j] = 0;
            continue;
        }
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < V; j++) m = isnan(r[j]) || isnan(m) ? NAN : fmax(m, r[j]);
        for (int64_t j = 0; j < V; j++) s += exp(r[j] - m);
        loss[i] = m + log(s) - r[t[i]];
        for (int64_t j = 0; j < V; j++) grad[i * V + j] = w[i] * (exp(r[j] - m) / s - (j == t[i]));
    }
}

// One unit in the last place of v in dtype dt (at least the smallest normal's).
static double ulp_of(double v, torc_dtype dt) {
    const int mant = dt == TORC_DTYPE_F64 ? 52 : dt == TORC_DTYPE_F32 ? 23 : dt == TORC_DTYPE_F16 ? 10 : 7;
    const int emin = dt == TORC_DTYPE_F64 ? -1022 : dt == TORC_DTYPE_F16 ? -14 : -126;
    int e;
    frexp(fabs(v), &e);  // |v| in [2^(e-1), 2^e)
    return ldexp(1.0, (e - 1 > emin ? e - 1 : emin) - mant);
}

// The tolerances this backend's kernels hold against the reference (cross_entropy.c's header):
// loss within 2^-23 |loss| + 4e-7 (the sum's float blocks); the gradient within 3 ulps of f32
// (exp's 2, the scaling's 1), one ulp of bf16 / f16 (the float result rounded to them), f64 a
// few ulps; plus |w| 2^-120 where exp underflows.
static void assert_close(const char *what, torc_dtype dt, const double *got_loss, const double *want_loss,
                         const double *got_grad, const double *want_grad, const double *w, int64_t N, int64_t V) {
    const double lrel = dt == TORC_DTYPE_F64 ? 1e-15 : 0x1p-23, labs = dt == TORC_DTYPE_F64 ? 1e-13 : 4e-7;
    const double gulps = dt == TORC_DTYPE_F64 ? 4 : dt == TORC_DTYPE_F32 ? 3 : 1;
    for (int64_t i = 0; i < N; i++) {
        const double a = got_loss[i], b = want_loss[i];
        ck_assert_msg((isnan(a) && isnan(b)) || a == b || fabs(a - b) <= lrel * fabs(b) + labs,
                      "%s: loss[%lld] is %.9g, want %.9g", what, (long long)i, a, b);
        for (int64_t j = 0; j < V; j++) {
            const double g = got_grad[i * V + j], h = want_grad[i * V + j];
            const double tol = gulps * ulp_of(h, dt) + fabs(w[i]) * 0x1p-120;
            ck_assert_msg((isnan(g) && isnan(h)) || g == h || fabs(g - h) <= tol,
                          "%s: grad[%lld, %lld] is %.9g, want %.9g (tol %.3g)", what, (long long)i, (long long)j, g, h,
                          tol);
        }
    }
}

static const torc_dtype g_dtypes[] = {TORC_DTYPE_F64, TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16};

// ---- hand values ----
// Three rows of 4 classes: an ordinary row, an ignored one (NaN logits: still zeros), a sum row
// of weight 1; computed in double here.
START_TEST(op_matches_hand_values) {
    static const double x[12] = {1, 2, 3, 4, NAN, 1, 2, 3, -1, 0.5, 0.25, 2};
    static const int64_t t[3] = {2, -100, 0};
    static const double w[3] = {0.5, 0, 1};
    double loss[3], grad[12];
    expected(x, t, w, 3, 4, loss, grad);
    ck_assert_double_eq_tol(loss[0], 1.4401896985611957, 1e-15);  // log(e + e^2 + e^3 + e^4) - 3
    torc_device *devs[2] = {torc_device_get("reference"), torc_default_device()};
    for (int k = 0; k < 2; k++)
        for (size_t d = 0; d < sizeof g_dtypes / sizeof *g_dtypes; d++)
            for (int ip = 0; ip < 2; ip++) {
                torc_scope_push();
                const torc_dtype dt = g_dtypes[d];
                ce_out o;
                torc_tensor *xt = make(devs[k], x, TORC_SHAPE(3, 4), dt);
                ck_assert_msg(run_ce(devs[k], xt, make_i64(devs[k], t, 3), make(devs[k], w, TORC_SHAPE(3), opmath(dt)),
                                     ip, 0, &o) == TORC_OK, "%s", torc_last_error());
                ck_assert_int_eq(torc_get_dtype(o.loss), opmath(dt));
                ck_assert_int_eq(torc_get_dtype(o.grad), dt);
                // the hand values of the inputs as rounded to dt
                double *xr = tu_values(xt == o.grad ? make(devs[k], x, TORC_SHAPE(3, 4), dt) : xt), wl[3], wg[12];
                expected(xr, t, w, 3, 4, wl, wg);
                free(xr);
                double *gl = tu_values(o.loss), *gg = tu_values(o.grad);
                char what[96];
                snprintf(what, sizeof what, "%s %s%s", torc_device_backend_name(devs[k]), torc_dtype_name(dt),
                         ip ? " in place" : "");
                assert_close(what, dt, gl, wl, gg, wg, w, 3, 4);
                ck_assert(gl[1] == 0.0);
                for (int j = 0; j < 4; j++) ck_assert(gg[4 + j] == 0.0 && !signbit(gg[4 + j]));
                free(gl), free(gg);
                torc_scope_pop();
            }
}
END_TEST

// ---- the default backend against the reference ----
// N rows of V classes: logits N(0, s^2) with s 3 (a spread of ~30 at 50257 classes), targets
// uniform, every fifth row ignored (-1 or -100), weights 1 / count; in place or not.
static void inputs(int64_t N, int64_t V, uint64_t seed, double **x, int64_t **t, double **w) {
    torc_scope_push();
    torc_generator *g = torc_generator_new(seed);
    torc_tensor *xs = torc_mul_scalar(torc_randn(TORC_SHAPE(N, V), TORC_DTYPE_F64, g), torc_s(3.0));
    torc_tensor *ts = torc_randint(0, V, TORC_SHAPE(N), TORC_DTYPE_I64, g);
    torc_generator_free(g);
    ck_assert_msg(xs && ts, "%s", torc_last_error());
    *x = tu_values(xs);
    *t = malloc(sizeof **t * (size_t)N);
    *w = malloc(sizeof **w * (size_t)N);
    ck_assert_int_eq(torc_copy_to_host(ts, *t, sizeof **t * (size_t)N), TORC_OK);
    int64_t count = 0;
    for (int64_t i = 0; i < N; i++) {
        if (i % 5 == 3) (*t)[i] = i % 2 ? -1 : -100;
        count += (*t)[i] >= 0;
    }
    for (int64_t i = 0; i < N; i++) (*w)[i] = (*t)[i] >= 0 ? 1.0 / (double)count : 0.0;
    torc_scope_pop();
}

static void against_reference(int64_t N, int64_t V, torc_dtype dt, bool in_place, const double *x, const int64_t *t,
                              const double *w) {
    torc_scope_push();
    torc_device *ref = torc_device_get("reference"), *def = torc_default_device();
    ce_out r, o;
    ck_assert_msg(run_ce(ref, make(ref, x, TORC_SHAPE(N, V), dt), make_i64(ref, t, N), make(ref, w, TORC_SHAPE(N), opmath(dt)),
                         false, 0, &r) == TORC_OK, "%s", torc_last_error());
    ck_assert_msg(run_ce(def, make(def, x, TORC_SHAPE(N, V), dt), make_i64(def, t, N), make(def, w, TORC_SHAPE(N), opmath(dt)),
                         in_place, 0, &o) == TORC_OK, "%s", torc_last_error());
    double *rl = tu_values(r.loss), *rg = tu_values(r.grad), *ol = tu_values(o.loss), *og = tu_values(o.grad);
    char what[96];
    snprintf(what, sizeof what, "%s %s N %lld V %lld%s", torc_device_backend_name(def), torc_dtype_name(dt),
             (long long)N, (long long)V, in_place ? " in place" : "");
    assert_close(what, dt, ol, rl, og, rg, w, N, V);
    free(rl), free(rg), free(ol), free(og);
    torc_scope_pop();
}

START_TEST(default_backend_matches_the_reference) {
    static const int64_t shapes[][2] = {{40, 1}, {700, 7}, {6, 50257}, {33, 513}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        double *x, *w;
        int64_t *t;
        inputs(shapes[s][0], shapes[s][1], 7 + s, &x, &t, &w);
        for (size_t d = 0; d < sizeof g_dtypes / sizeof *g_dtypes; d++)
            for (int ip = 0; ip < 2; ip++) against_reference(shapes[s][0], shapes[s][1], g_dtypes[d], ip, x, t, w);
        free(x), free(t), free(w);
    }
}
END_TEST

// Rows holding NaN, +inf, -inf (finite result unless at the target), all -inf, huge values, and an
// ignored NaN row: the reference's results (NaN where log_softmax gives NaN) on the default backend.
START_TEST(special_rows_match_the_reference) {
    enum { N = 9, V = 600 };
    double *x, *w;
    int64_t *t;
    inputs(N, V, 3, &x, &t, &w);
    for (int64_t i = 0; i < N; i++) t[i] = (i * 37) % V;
    t[8] = -100;
    x[0 * V + 5] = NAN;
    x[1 * V + 9] = INFINITY;
    x[2 * V + 11] = -INFINITY;                                 // not the target: finite
    x[3 * V + t[3]] = -INFINITY;                               // the target: loss +inf
    for (int j = 0; j < V; j++) x[4 * V + j] = -INFINITY;      // all -inf: NaN
    x[5 * V + 1] = 1e30;                                       // f32 holds it; bf16 too; f16 makes it inf
    x[6 * V + t[6]] = x[6 * V + t[6]] + 200;                   // a certain row: loss ~0, p_t ~1
    for (int j = 0; j < V; j++) x[8 * V + j] = NAN;            // ignored: zeros
    for (size_t d = 0; d < sizeof g_dtypes / sizeof *g_dtypes; d++)
        for (int ip = 0; ip < 2; ip++) against_reference(N, V, g_dtypes[d], ip, x, t, w);
    free(x), free(t), free(w);
}
END_TEST

// Rows of a wider matrix (row stride V + 3) and the logits transposed: what onednn declines (a
// column stride) the reference runs through torc_run_op; both give the dense rows' results.
START_TEST(strided_operands) {
    enum { N = 20, V = 300 };
    double *x, *w;
    int64_t *t;
    inputs(N, V, 5, &x, &t, &w);
    torc_device *def = torc_default_device(), *ref = torc_device_get("reference");
    for (size_t d = 0; d < sizeof g_dtypes / sizeof *g_dtypes; d++) {
        torc_scope_push();
        const torc_dtype dt = g_dtypes[d];
        ce_out r, a, b;
        torc_tensor *tt = make_i64(def, t, N), *wt = make(def, w, TORC_SHAPE(N), opmath(dt));
        ck_assert(run_ce(ref, make(ref, x, TORC_SHAPE(N, V), dt), make_i64(ref, t, N), make(ref, w, TORC_SHAPE(N), opmath(dt)),
                         false, 0, &r) == TORC_OK);
        torc_tensor *wide = torc_zeros(TORC_SHAPE(N, V + 3), dt);
        ck_assert_int_eq(torc_copy_(torc_narrow(wide, 1, 0, V), make(def, x, TORC_SHAPE(N, V), dt)), TORC_OK);
        ck_assert_msg(run_ce(def, torc_narrow(wide, 1, 0, V), tt, wt, false, 0, &a) == TORC_OK, "%s", torc_last_error());
        torc_tensor *xtr = torc_transpose(torc_contiguous(torc_transpose(make(def, x, TORC_SHAPE(N, V), dt), 0, 1)), 0, 1);
        ck_assert_msg(run_ce(def, xtr, tt, wt, false, 0, &b) == TORC_OK, "%s", torc_last_error());
        double *rl = tu_values(r.loss), *rg = tu_values(r.grad);
        for (int k = 0; k < 2; k++) {
            ce_out *o = k ? &b : &a;
            double *ol = tu_values(o->loss), *og = tu_values(o->grad);
            assert_close(k ? "transposed" : "row stride V + 3", dt, ol, rl, og, rg, w, N, V);
            free(ol), free(og);
        }
        free(rl), free(rg);
        torc_scope_pop();
    }
    free(x), free(t), free(w);
}
END_TEST

// onednn runs f32, bf16 and f16 itself and declines f64.
START_TEST(onednn_takes_f32_and_halves) {
    torc_device *dev = torc_default_device();
    if (strcmp(torc_device_backend_name(dev), "onednn") != 0) return;
    double *x, *w;
    int64_t *t;
    inputs(8, 1000, 9, &x, &t, &w);
    for (size_t d = 0; d < sizeof g_dtypes / sizeof *g_dtypes; d++) {
        torc_scope_push();
        const torc_dtype dt = g_dtypes[d];
        ce_out o;
        const torc_status st = run_ce(dev, make(dev, x, TORC_SHAPE(8, 1000), dt), make_i64(dev, t, 8),
                                      make(dev, w, TORC_SHAPE(8), opmath(dt)), false, TORC_RUN_NATIVE, &o);
        if (dt == TORC_DTYPE_F64) {
            ck_assert_int_eq(st, TORC_ERR_NOT_SUPPORTED);
            torc_clear_error();
        } else {
            ck_assert_msg(st == TORC_OK, "%s: %s", torc_dtype_name(dt), torc_last_error());
        }
        torc_scope_pop();
    }
    free(x), free(t), free(w);
}
END_TEST

// A target past the classes: an error on every backend, PyTorch's words; the shapes and the
// overlap torc_run_op checks; the dtypes the reference takes.
START_TEST(errors) {
    torc_device *devs[2] = {torc_device_get("reference"), torc_default_device()};
    static const double x[6] = {1, 2, 3, 4, 5, 6}, w[2] = {1, 1};
    for (int k = 0; k < 2; k++) {
        torc_scope_push();
        torc_device *dev = devs[k];
        ce_out o;
        torc_tensor *xt = make(dev, x, TORC_SHAPE(2, 3), TORC_DTYPE_F32), *wt = make(dev, w, TORC_SHAPE(2), TORC_DTYPE_F32);
        ck_assert_int_eq(run_ce(dev, xt, make_i64(dev, (int64_t[]){0, 3}, 2), wt, false, 0, &o), TORC_ERR_INDEX);
        tu_assert_error(TORC_ERR_INDEX, "Target 3 is out of bounds.");
        torc_clear_error();
        // weight of the wrong dtype: declined by the reference (not an opmath weight)
        ck_assert_int_eq(run_ce(dev, xt, make_i64(dev, (int64_t[]){0, 1}, 2), make(dev, w, TORC_SHAPE(2), TORC_DTYPE_F64),
                                false, 0, &o), TORC_ERR_NOT_SUPPORTED);
        torc_clear_error();
        // shapes: a target of 3 rows, a grad of the wrong shape
        torc_tensor *loss = torc_to_device(torc_empty(TORC_SHAPE(2), TORC_DTYPE_F32), dev);
        torc_tensor *g = torc_to_device(torc_empty(TORC_SHAPE(2, 4), TORC_DTYPE_F32), dev);
        torc_op_call call = {.code = TORC_OP_CROSS_ENTROPY, .n_in = 3, .n_out = 2,
                             .in = {xt, make_i64(dev, (int64_t[]){0, 1, 2}, 3), wt}, .out = {loss, g}};
        ck_assert_int_eq(torc_run_op(dev, &call, 0), TORC_ERR_SHAPE);
        tu_assert_error(TORC_ERR_SHAPE, "in[1] has shape [3]");
        call.in[1] = make_i64(dev, (int64_t[]){0, 1}, 2);
        ck_assert_int_eq(torc_run_op(dev, &call, 0), TORC_ERR_SHAPE);
        tu_assert_error(TORC_ERR_SHAPE, "out[1] has shape [2, 4]; the op needs [2, 3]");
        // the gradient partly over the logits
        torc_tensor *big = torc_to_device(torc_zeros(TORC_SHAPE(9), TORC_DTYPE_F32), dev);
        static const int64_t sh[2] = {2, 3}, sd[2] = {3, 1};
        call.in[0] = torc_as_strided(big, 2, sh, sd, 0);
        call.out[1] = torc_as_strided(big, 2, sh, sd, 1);
        ck_assert_int_eq(torc_run_op(dev, &call, 0), TORC_ERR_INVALID_ARG);
        tu_assert_error(TORC_ERR_INVALID_ARG, "refer to a single memory location");
        torc_clear_error();
        call.n_out = 1;
        ck_assert_int_eq(torc_run_op(dev, &call, 0), TORC_ERR_INVALID_ARG);
        tu_assert_error(TORC_ERR_INVALID_ARG, "op 'cross_entropy' takes 3 input(s) and 2 output(s)");
        torc_clear_error();
        torc_scope_pop();
    }
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("cross_entropy_op");
    TCase *tc = tcase_create("cross_entropy_op");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, op_matches_hand_values);
    tcase_add_test(tc, default_backend_matches_the_reference);
    tcase_add_test(tc, special_rows_match_the_reference);
    tcase_add_test(tc, strided_operands);
    tcase_add_test(tc, onednn_takes_f32_and_halves);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

// Small cases go to onednn's loops too (its TORC_ONEDNN_MIN_WORK would hand them to the reference).
int main(void) {
    setenv("TORC_ONEDNN_MIN_WORK", "0", 0);
    return tu_run(make_suite());
}
