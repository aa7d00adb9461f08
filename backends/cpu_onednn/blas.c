// backends/cpu_onednn/blas.c — f32 GEMM on OpenBLAS for the AVX2 family (CPUs whose widest ISA
// oneDNN uses is AVX2, or one capped there): loaded with dlopen at first use, never linked.
// Why: oneDNN 2.6's AVX2 sgemm does not pack its operands at small sizes, so a power-of-two leading
// dimension thrashes its cache sets. One Zen 4 core under ONEDNN_MAX_CPU_ISA=AVX2, page-aligned
// operands as torc allocates them, best of 3 in CPU time: 512^3 53 GFLOP/s against OpenBLAS's
// Haswell kernels' 74 and BLIS's zen3 kernels' 76; 1024^3 90.5 / 90.7 / 87; 2048^3 96 / 93 / 91.
// On an AVX2-only EPYC, two threads at 2048^3: torc 113-120 GFLOP/s against numpy's OpenBLAS
// 128-144 (issue 21). With AVX-512 oneDNN's sgemm stays: it led both libraries on Zen 4 (2048^3:
// 100 against 96 and 99; tools/torc-bench --peer --cpu-time --threads 1).
// OpenBLAS rather than BLIS: faster at 1024 and 2048 in the runs above and in the issue, and its
// OpenMP build follows the caller's omp_set_num_threads (TORC_NUM_THREADS) and runs one thread
// inside a parallel region, as oneDNN's sgemm does. Its sums change with its thread count
// (AVX2-capped, D = 128: a fifth of a model's weights one ulp apart between 1 and 2 threads), so it
// only ever runs on one: onednn__gemm_run hands it a GEMM of 1M multiply-adds and more in fixed
// pieces (pieces.c), and on AMD's CPUs matmuls of that size run on torc's FMA GEMM instead (matmul.c).
#define _POSIX_C_SOURCE 200809L  // setenv, strdup
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "onednn-impl.h"

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void (*cblas_sgemm_fn)(int order, int transa, int transb, int m, int n, int k, float alpha, const float *a,
                               int lda, const float *b, int ldb, float beta, float *c, int ldc);

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cblas_sgemm_fn g_sgemm;  // NULL: f32 GEMMs stay on dnnl_sgemm

// Kernels OpenBLAS may run for the AVX2 family: AVX2 + FMA, nothing wider.
static bool avx2_core(const char *name) {
    return name && (!strcmp(name, "Haswell") || !strcmp(name, "Zen"));
}

static void load(void) {
    // Both caps: oneDNN's ISA (this replaces its sgemm) is AVX2, and torc's own allows AVX2.
    if (onednn__dnnl_isa() != ONEDNN_ISA_AVX2 || onednn__isa() < ONEDNN_ISA_AVX2) return;
    // OpenBLAS picks its kernels from cpuid when it loads (OPENBLAS_CORETYPE overrides): on a CPU
    // above AVX2 capped to it, ask for its Haswell kernels for the load, then put the variable back.
    // (setenv races with a getenv on another thread; only the capped case, a test setup, does it.)
    const bool capped = onednn__cpu_isa() > ONEDNN_ISA_AVX2;
    char *saved = NULL;
    if (capped) {
        const char *old = getenv("OPENBLAS_CORETYPE");
        saved = old ? strdup(old) : NULL;
        setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    }
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (capped) {
        if (saved) setenv("OPENBLAS_CORETYPE", saved, 1);
        else unsetenv("OPENBLAS_CORETYPE");
        free(saved);
    }
    if (!h) return;  // not installed: oneDNN's sgemm
    char *(*core)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    int (*parallel)(void) = (int (*)(void))dlsym(h, "openblas_get_parallel");
    cblas_sgemm_fn f = (cblas_sgemm_fn)dlsym(h, "cblas_sgemm");
    // Only the OpenMP build (2): a pthreads one keeps a thread pool of its own beside libgomp's,
    // and the two spin against each other on the same cores.
    if (f && core && parallel && avx2_core(core()) && parallel() == 2) g_sgemm = f;
    else dlclose(h);
}

bool onednn__blas_sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float *c, int64_t ldc) {
    pthread_once(&g_once, load);
    if (!g_sgemm || M > INT_MAX || N > INT_MAX || K > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
        return false;
    g_sgemm(CBLAS_ROW_MAJOR, transa == 'T' ? CBLAS_TRANS : CBLAS_NO_TRANS, transb == 'T' ? CBLAS_TRANS : CBLAS_NO_TRANS,
            (int)M, (int)N, (int)K, 1.0f, a, (int)lda, b, (int)ldb, 0.0f, c, (int)ldc);
    return true;
}

bool onednn__blas_active(void) {
    pthread_once(&g_once, load);
    return g_sgemm != NULL;
}
