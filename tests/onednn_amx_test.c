// tests/onednn_amx_test.c — the oneDNN backend's AMX bf16 GEMM (backends/cpu_onednn/matmul_amx.c,
// compiled into this test) against a plain f32-accumulate loop: odd M/N/K, K not a multiple of
// 32, size 1, strided/transposed/sliced inputs and outputs, f32 and bf16 out, NaN, 1 and 2 threads.
#define _GNU_SOURCE
#include "ck.h"
#include <stdarg.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onednn-impl.h"
#include "torc/convert.h"

// Under AddressSanitizer (TORC_SANITIZE): GCC 12's LeakSanitizer crashes at exit scanning the
// dynamic TLS of OpenMP worker threads on glibc 2.36; it must not track __tls_get_addr.
const char *__asan_default_options(void);
__attribute__((visibility("default"))) const char *__asan_default_options(void) { return "intercept_tls_get_addr=0"; }

static bool cpuinfo_has_amx(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[8192];
    bool bf16 = false, tile = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        bf16 = strstr(line, " amx_bf16") != NULL;
        tile = strstr(line, " amx_tile") != NULL;
        break;
    }
    fclose(f);
    return bf16 && tile;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float uniform(void) {  // xorshift64 -> [-1, 1)
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

// One case: A (M x K) and B (K x N) laid out by their strides in buffers filled with bf16
// values (elements outside the matrices hold NaN, which must never reach C), C by its strides.
typedef struct layout {
    int64_t rs, cs;  // strides in elements
} layout;

static size_t span(int64_t rows, int64_t cols, layout l) { return (size_t)((rows - 1) * l.rs + (cols - 1) * l.cs + 1); }

static uint16_t *make_matrix(int64_t rows, int64_t cols, layout l, bool ints) {
    const size_t n = span(rows, cols, l);
    uint16_t *x = malloc(n * 2);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < n; i++) x[i] = 0x7FC0;  // NaN in the gaps
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            x[i * l.rs + j * l.cs] = torc_f32_to_bf16(ints ? (float)((i * 7 + j * 3) % 5 - 2) : uniform());
    return x;
}

static void *scratch_for(int64_t M, int64_t N, int64_t K, int nthreads) {
    const size_t n = onednn__amx_scratch_bytes(M, N, K, nthreads);
    void *s = aligned_alloc(64, (n + 63) / 64 * 64);
    ck_assert_ptr_nonnull(s);
    return s;
}

// Runs C = A x B and checks every element against an f32 loop: f32 out within the bound of two
// f32 summation orders (K * 2^-23 * sum |a b|), bf16 out within that plus half a bf16 ulp; with
// exact (small integer) data the results must be bit-exact, bf16 rounded to nearest even.
static void check_case(int64_t M, int64_t N, int64_t K, layout la, layout lb, layout lc, bool f32,
                       bool ints, int nthreads) {
    uint16_t *a = make_matrix(M, K, la, ints), *b = make_matrix(K, N, lb, ints);
    const size_t es = f32 ? 4 : 2, cn = span(M, N, lc);
    unsigned char *c = malloc(cn * es);
    ck_assert_ptr_nonnull(c);
    memset(c, 0x5A, cn * es);
    void *scratch = scratch_for(M, N, K, nthreads);
    onednn_amx_gemm g = {M, N, K, a, la.rs, la.cs, b, lb.rs, lb.cs, c, lc.rs, lc.cs, f32};
    onednn__amx_gemm(&g, scratch, nthreads);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float acc = 0;
            double mag = 0;
            for (int64_t k = 0; k < K; k++) {
                const float x = torc_bf16_to_f32(a[i * la.rs + k * la.cs]), y = torc_bf16_to_f32(b[k * lb.rs + j * lb.cs]);
                acc += x * y;
                mag += fabs((double)x * y);
            }
            const size_t at = (size_t)(i * lc.rs + j * lc.cs);
            float got;
            if (f32) {
                memcpy(&got, c + at * 4, 4);
            } else {
                uint16_t h;
                memcpy(&h, c + at * 2, 2);
                got = torc_bf16_to_f32(h);
                if (ints) ck_assert_msg(h == torc_f32_to_bf16(acc), "(%lld, %lld) of %lldx%lldx%lld: bf16 %#x, want %#x",
                                        (long long)i, (long long)j, (long long)M, (long long)N, (long long)K,
                                        h, torc_f32_to_bf16(acc));
            }
            // Exact data: f32 out is the sum itself, bf16 out its rounding (checked bit for bit above).
            const float want = ints && !f32 ? torc_bf16_to_f32(torc_f32_to_bf16(acc)) : acc;
            const double tol = ints ? 0 : (double)K * 0x1p-23 * mag + (f32 ? 0 : fabs(acc) * 0x1p-8);
            ck_assert_msg(fabs((double)got - want) <= tol, "(%lld, %lld) of %lldx%lldx%lld (%s out, %d threads): "
                          "%.9g, want %.9g (tol %.3g)", (long long)i, (long long)j, (long long)M,
                          (long long)N, (long long)K, f32 ? "f32" : "bf16", nthreads, got, want, tol);
        }
    // Nothing outside C was written.
    bool *in_c = calloc(cn, 1);
    ck_assert_ptr_nonnull(in_c);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) in_c[i * lc.rs + j * lc.cs] = true;
    for (size_t at = 0; at < cn; at++)
        for (size_t e = 0; e < es && !in_c[at]; e++) ck_assert_uint_eq(c[at * es + e], 0x5A);
    free(in_c);
    free(scratch);
    free(a);
    free(b);
    free(c);
}

static layout row(int64_t ld) { return (layout){ld, 1}; }
static layout col(int64_t ld) { return (layout){1, ld}; }

START_TEST(test_usable_matches_cpu) {
    // No AMX instruction runs unless the CPU has it, the OS grants it (this test's runs) and no
    // ISA cap (TORC_MAX_CPU_ISA, or ONEDNN_MAX_CPU_ISA which torc follows) rules it out.
    if (onednn__isa() >= ONEDNN_ISA_AVX512_CORE_AMX) ck_assert_int_eq(onednn__amx_usable(), cpuinfo_has_amx());
    else ck_assert(!onednn__amx_usable());
    if (!getenv("TORC_MAX_CPU_ISA") && !getenv("ONEDNN_MAX_CPU_ISA"))
        ck_assert_int_eq(onednn__isa() >= ONEDNN_ISA_AVX512_CORE_AMX, cpuinfo_has_amx());
}
END_TEST

static const int64_t sizes[][3] = {  // M, N, K
    {1, 1, 1}, {1, 17, 33}, {16, 16, 32}, {32, 32, 64}, {17, 15, 31}, {33, 47, 65},
    {5, 100, 7}, {100, 5, 96}, {64, 33, 1}, {70, 90, 130}, {300, 260, 45},
};

START_TEST(test_shapes) {
    if (!onednn__amx_usable()) return;  // main() reports the suite as skipped
    const int64_t M = sizes[_i][0], N = sizes[_i][1], K = sizes[_i][2];
    for (int f32 = 0; f32 < 2; f32++)
        for (int threads = 1; threads <= 2; threads++) {
            check_case(M, N, K, row(K), row(N), row(N), f32, false, threads);        // plain
            check_case(M, N, K, col(M), col(K), row(N), f32, false, threads);        // both transposed
            check_case(M, N, K, col(M + 3), row(N + 5), col(M + 1), f32, false, threads);  // A^T B, out^T
            check_case(M, N, K, (layout){2 * K + 3, 2}, (layout){3, 3 * K + 1}, (layout){N + 2, 1}, f32,
                       false, threads);                                              // sliced with steps
            check_case(M, N, K, row(2048), row(N), row(N), f32, false, threads);   // A rows 4 KiB apart: packed
        }
}
END_TEST

START_TEST(test_exact_rounding) {
    if (!onednn__amx_usable()) return;
    // Small integers sum exactly in any order: f32 out equals the loop bit for bit, bf16 out is
    // its round-to-nearest-even (ties included: the sums reach 257, 259, ...).
    for (int f32 = 0; f32 < 2; f32++) {
        check_case(45, 37, 300, row(300), row(37), row(37), f32, true, 2);
        check_case(45, 37, 300, col(45), col(300), col(45), f32, true, 1);
        // K over one K block (2048): the accumulators go through C's block and come back.
        check_case(33, 40, 2100, row(2100), row(40), row(40), f32, true, 2);
        check_case(33, 40, 2100, row(2100), row(40), row(40), f32, false, 1);
    }
    // A bf16 tie: 1 x 257 summed as 256 + 1 -> 256 (even), 259 -> 260.
    uint16_t a[2 * 32], b[32 * 16];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    a[0] = a[1] = torc_f32_to_bf16(1.0f);           // row 0: 1, 1
    a[32] = torc_f32_to_bf16(1.0f);                 // row 1: 1, 3
    a[33] = torc_f32_to_bf16(3.0f);
    b[0] = torc_f32_to_bf16(256.0f);                // B[0][0] = 256, B[1][0] = 1
    b[16] = torc_f32_to_bf16(1.0f);
    uint16_t c[2 * 16];
    void *scratch = scratch_for(2, 16, 32, 1);
    onednn_amx_gemm g = {2, 16, 32, a, 32, 1, b, 16, 1, c, 16, 1, false};
    onednn__amx_gemm(&g, scratch, 1);
    ck_assert_uint_eq(c[0], torc_f32_to_bf16(256.0f));   // 257 -> 256
    ck_assert_uint_eq(c[16], torc_f32_to_bf16(260.0f));  // 259 -> 260
    ck_assert_uint_eq(c[1], 0);
    free(scratch);
}
END_TEST

START_TEST(test_nan_inf) {
    if (!onednn__amx_usable()) return;
    const int64_t M = 20, N = 40, K = 50;
    uint16_t *a = make_matrix(M, K, row(K), false), *b = make_matrix(K, N, row(N), false);
    a[3 * K + 7] = 0x7FC0;                       // NaN in row 3
    b[9 * N + 5] = torc_f32_to_bf16(INFINITY);   // +inf in column 5
    float c32[20 * 40];
    uint16_t c16[20 * 40];
    void *scratch = scratch_for(M, N, K, 2);
    onednn_amx_gemm g = {M, N, K, a, K, 1, b, N, 1, c32, N, 1, true};
    onednn__amx_gemm(&g, scratch, 2);
    g.c = c16;
    g.c_f32 = false;
    onednn__amx_gemm(&g, scratch, 2);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            const float x = c32[i * N + j];
            if (i == 3 || (j == 5 && a[i * K + 9] == 0)) {  // NaN x, or 0 x inf
                ck_assert_msg(isnan(x), "(%lld, %lld): %g, want NaN", (long long)i, (long long)j, x);
                ck_assert_uint_eq(c16[i * N + j], 0x7FC0);
                continue;
            }
            if (j == 5) ck_assert_msg(isinf(x), "(%lld, 5): %g, want inf", (long long)i, x);
            else ck_assert(isfinite(x));
            ck_assert_uint_eq(c16[i * N + j], torc_f32_to_bf16(x));
        }
    free(scratch);
    free(a);
    free(b);
}
END_TEST

START_TEST(test_subnormal_results_flush) {
    if (!onednn__amx_usable()) return;
    // AMX flushes a subnormal result to zero (as oneDNN's bf16 matmul does); the bf16 rounding of
    // the output relies on it (vcvtne2ps2bf16 would flush a subnormal accumulator as well).
    uint16_t a[2] = {torc_f32_to_bf16(1e-20f), torc_f32_to_bf16(1.0f)}, b[4] = {0};
    b[0] = torc_f32_to_bf16(1e-20f);  // row 0 of A x column 0 of B: 1e-40, subnormal in f32
    b[1] = torc_f32_to_bf16(3.0f);    // column 1: 1e-20 * 3 + 1 * 0, normal
    float c[2];
    void *scratch = scratch_for(1, 2, 2, 1);
    onednn_amx_gemm g = {1, 2, 2, a, 2, 1, b, 2, 1, c, 2, 1, true};
    onednn__amx_gemm(&g, scratch, 1);
    ck_assert_float_eq(c[0], 0.0f);
    ck_assert_float_eq_tol(c[1], 3e-20f, 1e-22f);
    free(scratch);
}
END_TEST

static Suite *amx_suite(void) {
    Suite *s = suite_create("onednn_amx");
    TCase *tc = tcase_create("gemm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_usable_matches_cpu);
    tcase_add_loop_test(tc, test_shapes, 0, (int)(sizeof sizes / sizeof sizes[0]));
    tcase_add_test(tc, test_exact_rounding);
    tcase_add_test(tc, test_nan_inf);
    tcase_add_test(tc, test_subnormal_results_flush);
    suite_add_tcase(s, tc);
    return s;
}

// isa.c reports a bad TORC_MAX_CPU_ISA through the backend's error function (backend.c, not
// linked here).
int onednn__error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return status;
}

int main(void) {
    if (onednn__isa_init(NULL) != 0) return EXIT_FAILURE;
    SRunner *sr = srunner_create(amx_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (failed) return EXIT_FAILURE;
    if (!onednn__amx_usable()) {  // ctest reports the GEMM's tests as skipped, not passed
        if (onednn__isa() < ONEDNN_ISA_AVX512_CORE_AMX && cpuinfo_has_amx())
            printf("onednn_amx: skipped: AMX is capped off (torc's ISA is %s: TORC_MAX_CPU_ISA or "
                   "ONEDNN_MAX_CPU_ISA); the GEMM's tests need AMX\n", onednn__isa_name(onednn__isa()));
        else
            printf("onednn_amx: skipped: this CPU has no AMX-BF16 or Linux refused the tile state (the "
                   "detection test passed; the GEMM's tests need AMX)\n");
        return 77;
    }
    return EXIT_SUCCESS;
}
