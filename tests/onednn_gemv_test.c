// tests/onednn_gemv_test.c — the oneDNN backend's matmuls of 1 to 4 rows of bf16 / f16 operands (a
// sampler's token: gemv.c on AVX-512, the GEMM paths below it) against the reference backend, which
// sums in double: every row count, K and N around the kernels' 16-wide vectors, 64-column blocks
// and 1024-column chunks, the weight as rows (a linear's (in, out) weight) or columns (wte^T), each
// with a row stride past its width, x's rows strided, out in the operands' dtype or float32; and the
// same bits at 1, 2 and 3 threads where the chunks run in parallel.
// ctest runs it natively and under TORC_MAX_CPU_ISA=AVX2 (the GEMM paths).
#include <omp.h>

#include "testutil.h"

static torc_device *g_ref, *g_dnn;

static void setup(void) {
    g_ref = torc_device_get("reference");
    g_dnn = torc_device_get("onednn");
    ck_assert_msg(g_ref && g_dnn, "%s", torc_last_error());
}

// Uniform values in [-1, 1) of dtype dt, shape (rows, cols) with `pad` extra columns (a narrow of
// them is a view with a row stride past its width).
static torc_tensor *rand_matrix(int64_t rows, int64_t cols, int64_t pad, torc_dtype dt, uint64_t seed) {
    torc_generator *g = torc_generator_new(seed);
    torc_tensor *t = torc_rand(TORC_SHAPE(rows, cols + pad), TORC_DTYPE_F32, g);
    torc_generator_free(g);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    t = torc_narrow(torc_add_scalar(torc_mul_scalar(t, torc_s(2.0)), torc_s(-1.0)), 1, 0, cols);
    return torc_to_dtype(t, dt);  // a narrow of a (rows, cols + pad) in dt where pad > 0
}

// x (M, K) @ w (K, N) on dev into a fresh out of dtype odt.
static torc_tensor *run_on(torc_device *dev, torc_tensor *x, torc_tensor *w, torc_dtype odt, bool native) {
    torc_tensor *out = torc_to_device(torc_empty(TORC_SHAPE(torc_size(x, 0), torc_size(w, 1)), odt), dev);
    ck_assert_msg(out != NULL, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_MATMUL, .n_in = 2, .n_out = 1, .in = {torc_to_device(x, dev), torc_to_device(w, dev)},
                         .out = {out}};
    if (native) ck_assert_msg(torc_op_supported(dev, &call) == TORC_OK, "onednn declines: %s", torc_last_error());
    ck_assert_msg(torc_run_op(dev, &call, 0) == TORC_OK, "%s", torc_last_error());
    return out;
}

// Where gemv.c runs: AVX-512 and no cap below it.
static bool avx512(void) {
    const char *cap = getenv("TORC_MAX_CPU_ISA");
    return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && !(cap && *cap);
}

static const int64_t KN[][2] = {{1, 1}, {1, 70}, {16, 16}, {17, 63}, {64, 65}, {100, 1025}, {130, 2100}};
enum { N_KN = sizeof KN / sizeof KN[0] };

START_TEST(rows_match_the_reference) {
    setup();
    const int64_t K = KN[_i][0], N = KN[_i][1];
    const torc_dtype dts[2] = {TORC_DTYPE_BF16, TORC_DTYPE_F16};
    for (int d = 0; d < 2; d++)
        for (int64_t M = 1; M <= 4; M++)
            for (int lay = 0; lay < 4; lay++) {  // bit 0: w as columns (wte^T); bit 1: strided rows
                torc_scope_push();
                const uint64_t seed = (uint64_t)(_i * 100 + d * 40 + M * 8 + lay * 2);
                const int64_t pad = lay & 2 ? 5 : 0;
                torc_tensor *x = rand_matrix(M, K, pad, dts[d], seed);
                torc_tensor *w = lay & 1 ? torc_transpose(rand_matrix(N, K, pad, dts[d], seed + 1), 0, 1)
                                         : rand_matrix(K, N, pad, dts[d], seed + 1);
                ck_assert_msg(x && w, "%s", torc_last_error());
                for (int o = 0; o < 2; o++) {
                    const torc_dtype odt = o ? TORC_DTYPE_F32 : dts[d];
                    torc_tensor *got = run_on(g_dnn, x, w, odt, avx512());
                    torc_tensor *want = run_on(g_ref, x, w, odt, false);
                    torc_tensor *mag = run_on(g_ref, torc_abs(x), torc_abs(w), TORC_DTYPE_F64, false);
                    // The reference sums in double and rounds once; f32 sums of K products (exact
                    // in f32) are within K half-ulps of the products' magnitudes' sum, and a 16-bit
                    // out may then round the other way: one ulp of it.
                    double *g = tu_values(got), *e = tu_values(want), *a = tu_values(mag);
                    const double ulp = o ? 0x1p-23 : d ? 0x1p-10 : 0x1p-7;
                    for (int64_t k = 0; k < M * N; k++) {
                        const double tol = ulp * fabs(e[k]) + (double)K * 0x1p-24 * a[k];
                        ck_assert_msg(fabs(g[k] - e[k]) <= tol, "%s M %lld K %lld N %lld layout %d out %s [%lld]: %.9g, "
                                      "reference %.9g", torc_dtype_name(dts[d]), (long long)M, (long long)K,
                                      (long long)N, lay, torc_dtype_name(odt), (long long)k, g[k], e[k]);
                    }
                    free(g), free(e), free(a);
                }
                torc_scope_pop();
            }
}
END_TEST

// The LM head's shape, large enough that its chunks run in parallel: the same bits at 1, 2, 3 threads.
START_TEST(results_do_not_depend_on_the_thread_count) {
    setup();
    const char *env = getenv("TORC_NUM_THREADS");
    if (env && *env) {
        fprintf(stderr, "onednn_gemv: TORC_NUM_THREADS is set, so the thread counts are not the test's\n");
        return;
    }
    const int nthr0 = omp_get_max_threads();
    for (int lay = 0; lay < 2; lay++) {
        torc_scope_push();
        torc_tensor *x = rand_matrix(1, 256, 0, TORC_DTYPE_BF16, 50);
        torc_tensor *w = lay ? torc_transpose(rand_matrix(8200, 256, 0, TORC_DTYPE_BF16, 51), 0, 1)
                             : rand_matrix(256, 8200, 0, TORC_DTYPE_BF16, 51);
        double *v[3];
        for (int t = 1; t <= 3; t++) {
            omp_set_num_threads(t);
            v[t - 1] = tu_values(run_on(g_dnn, x, w, TORC_DTYPE_BF16, avx512()));
        }
        for (int t = 1; t < 3; t++)
            for (int64_t k = 0; k < 8200; k++)
                ck_assert_msg(v[t][k] == v[0][k], "layout %d, %d threads [%lld]: %.9g, one thread %.9g", lay, t + 1,
                              (long long)k, v[t][k], v[0][k]);
        for (int t = 0; t < 3; t++) free(v[t]);
        torc_scope_pop();
    }
    omp_set_num_threads(nthr0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("onednn_gemv");
    TCase *tc = tcase_create("gemv");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, rows_match_the_reference, 0, N_KN);
    tcase_add_test(tc, results_do_not_depend_on_the_thread_count);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
