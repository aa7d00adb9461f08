// tests/onednn_gelu_test.c — the oneDNN backend's GELU loops (backends/cpu_onednn/gelu.c) against the
// reference backend: f32 / bf16 / f16, the erf and tanh forms, sizes around the vector widths, special
// values, a sweep of [-12, 12] and of tiny magnitudes; the layouts the loops leave to oneDNN's
// primitive (strided, mixed dtypes); in place; the same bits at every position of a call and at 1 and
// 2 threads. ctest runs it natively and under the AVX2 and SSE4.1 caps (gelu.c's three loop variants),
// with TORC_ONEDNN_MIN_WORK=0 so that every size reaches the loops.
// GELU_TEST_REPORT=1 prints the worst error / tolerance seen for each dtype and form.
#include <float.h>
#include <omp.h>

#include "testutil.h"

static torc_device *g_ref, *g_dnn;

static void setup(void) {
    g_ref = torc_device_get("reference");
    g_dnn = torc_device_get("onednn");
    ck_assert_msg(g_ref && g_dnn, "%s", torc_last_error());
}

static const torc_dtype k_dtypes[3] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F16};

static const char *dt_name(torc_dtype d) {
    return d == TORC_DTYPE_F32 ? "f32" : d == TORC_DTYPE_BF16 ? "bf16" : "f16";
}

// Uniform values in [lo, hi) from a 64-bit LCG (the test's own, so the data is the same everywhere).
static void fill_uniform(float *v, int64_t n, uint64_t seed, double lo, double hi) {
    uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = (float)(lo + (hi - lo) * ((double)(s >> 11) / 9007199254740992.0));
    }
}

static torc_tensor *host_tensor(const float *v, int ndim, const int64_t *shape, torc_dtype dt) {
    torc_tensor *t = torc_tensor_from(v, ndim, shape, TORC_DTYPE_F32);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    if (dt != TORC_DTYPE_F32) t = torc_to_dtype(t, dt);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

// GELU of x on dev into out (a fresh contiguous tensor of dtype od when out is NULL); native: dev's
// own backend must take it.
static torc_tensor *gelu_on(torc_device *dev, torc_tensor *x, torc_tensor *out, torc_dtype od, int approximate,
                            bool native) {
    if (!out) out = torc_to_device(torc_empty(torc_ndim(x), torc_shape(x), od), dev);
    ck_assert_msg(out != NULL, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_GELU, .n_in = 1, .n_out = 1, .in = {torc_to_device(x, dev)}, .out = {out}};
    call.params.gelu.approximate = approximate;
    if (native) ck_assert_msg(torc_op_supported(dev, &call) == TORC_OK, "onednn declines: %s", torc_last_error());
    ck_assert_msg(torc_run_op(dev, &call, native ? TORC_RUN_NATIVE : 0) == TORC_OK, "%s", torc_last_error());
    return out;
}

// The spacing of dtype d's values at w (subnormals: the smallest).
static double ulp_of(torc_dtype d, double w) {
    const int mant = d == TORC_DTYPE_F32 ? 23 : d == TORC_DTYPE_BF16 ? 7 : 10;
    const int emin = d == TORC_DTYPE_F16 ? -14 : -126;
    int e = 0;
    frexp(fabs(w), &e);
    const int lead = w == 0 || e - 1 < emin ? emin : e - 1;
    return ldexp(1.0, lead - mant);
}

// The tolerance against the reference, which computes in double and rounds once to d (gelu.c's
// comment has the measured errors behind it). float: erf form 2 ulps of the result plus |x| / 2 times
// 6e-7, the absolute error of its 1 + erf (5.3e-7 measured, near x = 0: A&S's 1.5e-7 and float
// Horner's rounding); tanh form (4 + 8 |inner|) ulps (for x < 0, 1 + tanh is about 2 exp(2 inner),
// so inner's float rounding is multiplied by 2 |inner|; 0.62 of that measured). Both plus |x| 2^-52:
// the reference's own 1 + erf / 1 + tanh cancels in double (it gives 0 below x = -8.3 / -7.3).
// bf16 / f16: the float result rounded once, so one ulp of the dtype more.
static double tolerance(torc_dtype d, int approximate, double x, double w) {
    const double inner = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
    double tol = approximate ? (4 + (x < 0 ? 8 * fabs(inner) : 0)) * ulp_of(TORC_DTYPE_F32, w)
                             : 2 * ulp_of(TORC_DTYPE_F32, w) + fabs(x) / 2 * 6e-7;
    tol += fabs(x) * 0x1p-52;
    return d == TORC_DTYPE_F32 ? tol : tol + ulp_of(d, w);
}

static double g_worst[3][2];  // [dtype][approximate]: the largest error / tolerance seen

// got against want elementwise for inputs xs: NaN as NaN, inf as the same inf, zeros' signs as the
// reference's, finite values within tolerance(). (Check's ck_assert records each call it passes:
// millions of them cost seconds, so the loops test first.)
static void compare(const char *what, int di, int approximate, const double *xs, const double *got,
                    const double *want, int64_t n) {
    const torc_dtype d = k_dtypes[di];
    for (int64_t i = 0; i < n; i++) {
        const double g = got[i], w = want[i], x = xs[i];
        if (isnan(w) || isinf(w)) {
            if (!((isnan(w) && isnan(g)) || g == w))
                ck_abort_msg("%s: element %lld (x %.9g) is %.9g, the reference's %.9g", what, (long long)i, x, g, w);
            continue;
        }
        const double err = fabs(g - w), tol = tolerance(d, approximate, x, w);
        if (!(err <= tol && (w != 0 || signbit(g) == signbit(w))))
            ck_abort_msg("%s: element %lld (x %.9g) is %.9g, the reference's %.9g (error %.3g, tol %.3g)", what,
                         (long long)i, x, g, w, err, tol);
        if (err / tol > g_worst[di][approximate]) g_worst[di][approximate] = err / tol;
    }
}

// v (n floats, cast to d) through onednn's loops and the reference, compared.
static void check_values(const char *what, const float *v, int64_t n, int di, int approximate) {
    const torc_dtype d = k_dtypes[di];
    torc_scope_push();
    torc_tensor *x = host_tensor(v, 1, (const int64_t[]){n}, d);
    torc_tensor *got = gelu_on(g_dnn, x, NULL, d, approximate, true);
    torc_tensor *want = gelu_on(g_ref, x, NULL, d, approximate, false);
    double *xs = tu_values(x), *g = tu_values(got), *w = tu_values(want);
    char name[160];
    snprintf(name, sizeof name, "%s, %s, %s, n %lld", what, dt_name(d), approximate ? "tanh" : "erf", (long long)n);
    compare(name, di, approximate, xs, g, w, n);
    free(xs), free(g), free(w);
    torc_scope_pop();
}

static const float k_specials[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 10.0f, -10.0f, 1e30f, -1e30f, FLT_MAX, -FLT_MAX,
    1e-40f, -1e-40f, 0x1p-149f, -0x1p-149f, FLT_MIN, -FLT_MIN, 1e-20f, -1e-20f, 3.0f, -3.0f,
    5.0f, -5.0f, 9.34f, -9.34f, 9.36f, -9.36f, 10.1f, -10.1f, 10.2f, -10.2f, 20.0f, -20.0f,
    1e10f, -1e10f, 0.625f, -0.625f, 0.7f, -0.7f, 65504.0f, -65504.0f, 70000.0f, -70000.0f,
};
enum { N_SPECIALS = sizeof k_specials / sizeof k_specials[0] };

// ---- sizes around the vector widths (16 and 8 floats, 1024-element blocks) ----
START_TEST(sizes_around_vector_widths_match_the_reference) {
    setup();
    static const int64_t sizes[] = {0, 1, 15, 16, 17, 31, 33, 1000, 1024, 1025, 100003};
    float *v = malloc(sizeof(float) * 100003);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t n = sizes[k];
        fill_uniform(v, n, (uint64_t)n + 1, -12.0, 12.0);
        // specials at the start, the end (the loops' scalar tails) and in between
        for (int64_t j = 0; j < n && j < N_SPECIALS; j++) {
            v[n - 1 - j] = k_specials[j];
            if (n > 2 * N_SPECIALS) v[(n / 2 + 7 * j) % n] = k_specials[(j + 5) % N_SPECIALS];
        }
        for (int i = 0; i < 3; i++)
            for (int a = 0; a < 2; a++) check_values("sizes", v, n, i, a);
    }
    free(v);
}
END_TEST

// ---- what the specials give, exactly ----
// gelu(+inf) = +inf; gelu(-inf) is the formula's -inf * 0 = NaN (as the reference and PyTorch 2.x's
// kernels); NaN stays NaN; -0 stays -0; a large negative x gives -0, a large positive x itself.
START_TEST(special_values_are_the_formulas) {
    setup();
    const float in[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, -1e30f, 1e30f, -20.0f, 20.0f, -FLT_MAX, FLT_MAX};
    enum { N = sizeof in / sizeof in[0] };
    for (int i = 0; i < 3; i++)
        for (int a = 0; a < 2; a++) {
            const torc_dtype d = k_dtypes[i];
            torc_scope_push();
            torc_tensor *x = host_tensor(in, 1, (const int64_t[]){N}, d);
            double *g = tu_values(gelu_on(g_dnn, x, NULL, d, a, true)), *xs = tu_values(x);
            ck_assert_msg(g[0] == INFINITY, "%s %d: gelu(inf) = %g", dt_name(d), a, g[0]);
            ck_assert_msg(isnan(g[1]), "%s %d: gelu(-inf) = %g", dt_name(d), a, g[1]);
            ck_assert_msg(isnan(g[2]), "%s %d: gelu(NaN) = %g", dt_name(d), a, g[2]);
            ck_assert_msg(g[3] == 0 && !signbit(g[3]), "%s %d: gelu(0) = %g", dt_name(d), a, g[3]);
            ck_assert_msg(g[4] == 0 && signbit(g[4]), "%s %d: gelu(-0) = %g", dt_name(d), a, g[4]);
            for (int k = 5; k < N; k += 2) {  // -1e30, -20, -FLT_MAX (inf in f16: NaN)
                if (isinf(xs[k])) continue;
                ck_assert_msg(g[k] == 0 && signbit(g[k]), "%s %d: gelu(%g) = %g", dt_name(d), a, xs[k], g[k]);
                ck_assert_msg(g[k + 1] == xs[k + 1], "%s %d: gelu(%g) = %.9g", dt_name(d), a, xs[k + 1], g[k + 1]);
            }
            free(g), free(xs);
            torc_scope_pop();
        }
}
END_TEST

// ---- a sweep: [-12, 12] evenly, and tiny magnitudes of either sign (down to f32's subnormals) ----
START_TEST(sweeps_match_the_reference) {
    setup();
    enum { N = 1 << 20, M = 1 << 16 };
    float *v = malloc(sizeof(float) * N);
    for (int64_t i = 0; i < N; i++) v[i] = (float)(-12.0 + 24.0 * (double)i / (double)(N - 1));
    for (int i = 0; i < 3; i++)
        for (int a = 0; a < 2; a++) check_values("sweep", v, N, i, a);
    for (int64_t i = 0; i < M; i++) {  // |x| from 2^-149 to 2^-2, log-spaced
        const float m = (float)exp2(-149.0 + 147.0 * (double)(i / 2) / (double)(M / 2 - 1));
        v[i] = i % 2 ? -m : m;
    }
    for (int i = 0; i < 3; i++)
        for (int a = 0; a < 2; a++) check_values("tiny", v, M, i, a);
    free(v);
    if (getenv("GELU_TEST_REPORT"))
        for (int i = 0; i < 3; i++)
            fprintf(stderr, "onednn_gelu: %s: worst error / tolerance: erf %.3f, tanh %.3f\n", dt_name(k_dtypes[i]),
                    g_worst[i][0], g_worst[i][1]);
}
END_TEST

// ---- layouts the loops leave to oneDNN's primitive (or, f16, to the reference), and in place ----
// xcheck's GELU tolerance for these: 32 eps relative plus 64 eps absolute (of max(|want|, 1)).
static void compare_loose(const char *what, torc_dtype d, const double *g, const double *w, int64_t n) {
    double eps = 0;
    torc_finfo(d, NULL, NULL, &eps, NULL);
    for (int64_t i = 0; i < n; i++) {
        if (isnan(w[i]) || isinf(w[i])) {
            if (!((isnan(w[i]) && isnan(g[i])) || g[i] == w[i]))
                ck_abort_msg("%s: element %lld is %g, the reference's %g", what, (long long)i, g[i], w[i]);
            continue;
        }
        const double tol = 32 * eps * fabs(w[i]) + 64 * eps * fmax(fabs(w[i]), 1.0);
        if (!(fabs(g[i] - w[i]) <= tol))
            ck_abort_msg("%s: element %lld is %.9g, the reference's %.9g", what, (long long)i, g[i], w[i]);
    }
}

START_TEST(strided_and_mixed_layouts_match_the_reference) {
    setup();
    enum { R = 300, C = 257 };
    float *v = malloc(sizeof(float) * R * C);
    fill_uniform(v, R * C, 99, -6.0, 6.0);
    for (int i = 0; i < 3; i++)
        for (int a = 0; a < 2; a++) {
            const torc_dtype d = k_dtypes[i];
            torc_scope_push();
            torc_tensor *x = torc_transpose(host_tensor(v, 2, (const int64_t[]){R, C}, d), 0, 1);  // (C, R) strided
            torc_tensor *want = gelu_on(g_ref, x, NULL, d, a, false);
            double *w = tu_values(want);
            char what[96];
            // into an out of x's strides: oneDNN's primitive takes f32 (bf16 too, where it has bf16
            // kernels: AVX512_CORE); f16 goes to the reference, as before
            torc_tensor *out = torc_transpose(torc_to_device(torc_empty(2, (const int64_t[]){R, C}, d), g_dnn), 0, 1);
            double *g = tu_values(gelu_on(g_dnn, x, out, d, a, d == TORC_DTYPE_F32));
            snprintf(what, sizeof what, "transposed %s %s", dt_name(d), a ? "tanh" : "erf");
            compare_loose(what, d, g, w, R * C);
            free(g);
            // into a contiguous out: whichever backend takes it (oneDNN's reference code is declined)
            g = tu_values(gelu_on(g_dnn, x, NULL, d, a, false));
            snprintf(what, sizeof what, "transposed into contiguous %s %s", dt_name(d), a ? "tanh" : "erf");
            compare_loose(what, d, g, w, R * C);
            free(g), free(w);
            // the first C - 3 columns of an (R, C) tensor (a row stride of C) into a contiguous out
            torc_tensor *wide = host_tensor(v, 2, (const int64_t[]){R, C}, d);
            torc_tensor *rows = torc_slice(wide, 1, 0, C - 3, 1);
            w = tu_values(gelu_on(g_ref, rows, NULL, d, a, false));
            g = tu_values(gelu_on(g_dnn, rows, NULL, d, a, false));
            snprintf(what, sizeof what, "row slices %s %s", dt_name(d), a ? "tanh" : "erf");
            compare_loose(what, d, g, w, R * (C - 3));
            free(g), free(w);
            // in place, dense: out is in (the loops read each block before writing it)
            torc_tensor *y = torc_to_device(torc_contiguous(x), g_dnn), *yw = gelu_on(g_ref, y, NULL, d, a, false);
            ck_assert_ptr_nonnull(gelu_on(g_dnn, y, y, d, a, true));
            double *s = tu_values(yw);
            g = tu_values(y);
            snprintf(what, sizeof what, "in place %s %s", dt_name(d), a ? "tanh" : "erf");
            compare_loose(what, d, g, s, R * C);
            free(g), free(s);
            torc_scope_pop();
        }
    // mixed dtypes, dense: f32 in, bf16 out (oneDNN's primitive where it has bf16 kernels, as before)
    for (int a = 0; a < 2; a++) {
        torc_scope_push();
        torc_tensor *x = host_tensor(v, 2, (const int64_t[]){R, C}, TORC_DTYPE_F32);
        double *g = tu_values(gelu_on(g_dnn, x, NULL, TORC_DTYPE_BF16, a, false));
        double *w = tu_values(gelu_on(g_ref, x, NULL, TORC_DTYPE_BF16, a, false));
        compare_loose("f32 -> bf16", TORC_DTYPE_BF16, g, w, R * C);
        free(g), free(w);
        torc_scope_pop();
    }
    free(v);
}
END_TEST

// ---- an element's bits do not depend on where it sits ----
// In a call of 31 elements the AVX-512 loop runs 16 in its vector body, 8 in its 256-bit epilogue and
// 7 scalar (AVX2: 24 and 7; SSE: 28 and 3): each value, rotated through every position, gives the
// same bits (the fmas the AVX paths contract to are the same in each), so neither the chunking over
// threads nor a tensor's length changes an element's result.
START_TEST(results_do_not_depend_on_the_position) {
    setup();
    enum { L = 31, G = 6 };
    float v[L * G];
    fill_uniform(v, L * G, 11, -12.0, 12.0);
    for (int j = 0; j < N_SPECIALS && j < L * G; j++) v[L * G - 1 - j] = k_specials[j];
    for (int i = 0; i < 3; i++)
        for (int a = 0; a < 2; a++) {
            const torc_dtype d = k_dtypes[i];
            double first[L * G];
            for (int g = 0; g < G; g++)
                for (int r = 0; r < L; r++) {
                    float x[L];
                    for (int k = 0; k < L; k++) x[k] = v[g * L + (k + r) % L];
                    torc_scope_push();
                    torc_tensor *t = host_tensor(x, 1, (const int64_t[]){L}, d);
                    double *y = tu_values(gelu_on(g_dnn, t, NULL, d, a, true));
                    for (int k = 0; k < L; k++) {
                        const int at = g * L + (k + r) % L;
                        if (r == 0) first[at] = y[k];
                        else if (memcmp(&first[at], &y[k], sizeof y[k]) && !(isnan(y[k]) && isnan(first[at])))
                            ck_abort_msg("%s %s: x %.9g gives %.9g at position %d, %.9g at position %d", dt_name(d),
                                         a ? "tanh" : "erf", x[k], y[k], k, first[at], (at - g * L));
                    }
                    free(y);
                    torc_scope_pop();
                }
        }
}
END_TEST

// ---- the same bits at 1 and 2 threads (elementwise: chunk boundaries change nothing) ----
START_TEST(results_do_not_depend_on_the_thread_count) {
    setup();
    const char *env = getenv("TORC_NUM_THREADS");
    if (env && *env) {
        fprintf(stderr, "onednn_gelu: TORC_NUM_THREADS is set, so the thread counts are not the test's\n");
        return;
    }
    const int nthr0 = omp_get_max_threads();
    enum { N = 300007 };  // past the parallel threshold (64K), odd
    float *v = malloc(sizeof(float) * N);
    fill_uniform(v, N, 5, -12.0, 12.0);
    for (int i = 0; i < 3; i++)
        for (int a = 0; a < 2; a++) {
            const torc_dtype d = k_dtypes[i];
            const size_t nb = (size_t)N * (d == TORC_DTYPE_F32 ? 4 : 2);
            unsigned char *one = malloc(nb), *two = malloc(nb);
            torc_scope_push();
            torc_tensor *x = host_tensor(v, 1, (const int64_t[]){N}, d);
            for (int t = 1; t <= 2; t++) {
                omp_set_num_threads(t);
                ck_assert_int_eq(torc_copy_to_host(gelu_on(g_dnn, x, NULL, d, a, true), t == 1 ? one : two, nb),
                                 TORC_OK);
            }
            ck_assert_msg(!memcmp(one, two, nb), "%s %s differs between 1 and 2 threads", dt_name(d),
                          a ? "tanh" : "erf");
            torc_scope_pop();
            free(one), free(two);
        }
    omp_set_num_threads(nthr0);
    free(v);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("onednn_gelu");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, sizes_around_vector_widths_match_the_reference);
    tcase_add_test(tc, special_values_are_the_formulas);
    tcase_add_test(tc, sweeps_match_the_reference);
    tcase_add_test(tc, strided_and_mixed_layouts_match_the_reference);
    tcase_add_test(tc, results_do_not_depend_on_the_position);
    tcase_add_test(tc, results_do_not_depend_on_the_thread_count);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
