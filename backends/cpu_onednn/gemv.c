// backends/cpu_onednn/gemv.c — MATMUL of at most GEMV_MAX_M rows of bf16 / f16 operands on AVX-512
// (on AVX2 + FMA, the columns layout below): a sampler's token (x (1, C) times each weight, the LM
// head's x (1, C) times wte^T). Such a product
// reads each weight once and does two flops a weight element, so its time is the weight's bytes; the
// GEMM paths spent it otherwise (the primitive's bf16 GEMV, config B's token at 21 MB of bf16
// weights: 2.4-2.5 ms against f32 sgemm's 1.95 for twice the bytes).
// x's rows are converted to f32 once (exact); the weight is read as it lies and converted in
// registers (exact), products summed in f32 and rounded once into out (as the GEMM paths: bf16
// products are exact in f32). Two layouts of the weight w (K, N):
//   rows (w's last stride 1: a linear's (in, out) weight): out rows accumulate w's rows, k in order,
//     one FMA chain an output element (y += x[k] w[k, :]), N in chunks of GEMV_CHUNK columns whose
//     f32 sums stay in L1 while w's rows stream past;
//   columns (w's row stride 1: wte^T, the tied head): out[n] = x . w[:, n], 16 k's a lane, each
//     column's lanes summed, 4 columns at a time, across lanes together (attention.c's decode
//     scores).
// Parallel over N's chunks from ONEDNN_SMALL_WORK multiply-adds, each output element one thread's:
// the result does not depend on the thread count.
#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "onednn-impl.h"
#include "vec16.h"

#define GEMV_MAX_M 4
#define GEMV_CHUNK 1024  // columns of out a task: GEMV_MAX_M x 4 KB of f32 sums

static bool half(torc_dtype t) { return t == TORC_DTYPE_BF16 || t == TORC_DTYPE_F16; }

bool onednn__gemv_takes(const torc_op *op) {
    if (op->code != TORC_OP_MATMUL || op->n_in != 2 || op->n_out != 1) return false;
    const torc_operand *x = &op->in[0], *w = &op->in[1], *y = &op->out[0];
    const int nd = y->ndim;
    if (nd < 2 || x->ndim != nd || w->ndim != nd || !half(x->dtype) || w->dtype != x->dtype ||
        (y->dtype != x->dtype && y->dtype != TORC_DTYPE_F32))
        return false;
    const onednn_isa isa = onednn__isa();
    const bool cols = w->stride[nd - 1] != 1 && y->shape[nd - 1] > 1;
    // AVX2 + FMA: the columns only (rows run at the weight's bytes on the FMA GEMM's small path
    // already; the head's wte^T was packed whole every token there: 7.2 ms for 26 MB).
    if (!(isa >= ONEDNN_ISA_AVX512_CORE ||
          (isa >= ONEDNN_ISA_AVX2 && cols && (x->dtype == TORC_DTYPE_BF16 || onednn__cpu_has_f16c()))))
        return false;
    for (int d = 0; d < nd - 2; d++)
        if (y->shape[d] != 1 || x->shape[d] != 1 || w->shape[d] != 1) return false;
    const int64_t M = y->shape[nd - 2], N = y->shape[nd - 1], K = x->shape[nd - 1];
    return M >= 1 && M <= GEMV_MAX_M && N >= 1 && K >= 1 && K <= INT32_MAX && x->shape[nd - 2] == M &&
           w->shape[nd - 2] == K && w->shape[nd - 1] == N && (x->stride[nd - 1] == 1 || K == 1) &&
           (y->stride[nd - 1] == 1 || N == 1) && (w->stride[nd - 1] == 1 || w->stride[nd - 2] == 1) &&
           x->stride[nd - 2] >= 0 && y->stride[nd - 2] >= 0 && w->stride[nd - 2] >= 0 && w->stride[nd - 1] >= 0;
}

// Rows layout: y[r][0..n) = sum over k of xf[r][k] w[k][0..n), w's rows ldw elements apart; nq
// (constant) rows, 4 vectors of columns at a time, the k's in order.
__attribute__((target(VEC16_TGT512), always_inline)) static inline void rows_block(const int nq, const bool f16,
                                                                          const float *xf, int64_t K,
                                                                          const uint16_t *w, int64_t ldw, int n,
                                                                          float *y) {
    for (int j = 0; j < n; j += 64) {
        __m512 acc[GEMV_MAX_M][4];
        __mmask16 m[4];
        for (int u = 0; u < 4; u++) m[u] = vec16_mask(n - j - 16 * u);
        for (int r = 0; r < GEMV_MAX_M; r++)
            for (int u = 0; u < 4; u++) acc[r][u] = _mm512_setzero_ps();
        const uint16_t *wj = w + j;
        for (int64_t k = 0; k < K; k++) {
            const uint16_t *wk = wj + k * ldw;
            __m512 wv[4];
            for (int u = 0; u < 4; u++) wv[u] = vec16_half512(wk + 16 * u, m[u], f16);
            for (int r = 0; r < GEMV_MAX_M; r++)
                if (r < nq) {
                    const __m512 xr = _mm512_set1_ps(xf[r * K + k]);
                    for (int u = 0; u < 4; u++) acc[r][u] = _mm512_fmadd_ps(xr, wv[u], acc[r][u]);
                }
        }
        for (int r = 0; r < GEMV_MAX_M; r++)
            if (r < nq)
                for (int u = 0; u < 4; u++) _mm512_mask_storeu_ps(y + r * GEMV_CHUNK + j + 16 * u, m[u], acc[r][u]);
    }
}

// Columns layout: y[r][c] = xf[r] . w column c (its K elements contiguous, columns ldw apart); nq
// (constant) rows, 4 columns at a time.
__attribute__((target(VEC16_TGT512), always_inline)) static inline void cols_block(const int nq, const bool f16,
                                                                          const float *xf, int64_t K,
                                                                          const uint16_t *w, int64_t ldw, int n,
                                                                          float *y) {
    int c = 0;
    for (; c + 4 <= n; c += 4) {
        __m512 acc[GEMV_MAX_M][4];
        for (int r = 0; r < GEMV_MAX_M; r++)
            for (int i = 0; i < 4; i++) acc[r][i] = _mm512_setzero_ps();
        for (int64_t k = 0; k < K; k += 16) {
            const __mmask16 m = vec16_mask(K - k);
            for (int i = 0; i < 4; i++) {
                const __m512 wv = vec16_half512(w + (c + i) * ldw + k, m, f16);
                for (int r = 0; r < GEMV_MAX_M; r++)
                    if (r < nq) acc[r][i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, xf + r * K + k), wv, acc[r][i]);
            }
        }
        for (int r = 0; r < GEMV_MAX_M; r++)
            if (r < nq) _mm_storeu_ps(y + r * GEMV_CHUNK + c, vec16_sum4_512(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
    }
    for (; c < n; c++) {
        __m512 acc[GEMV_MAX_M];
        for (int r = 0; r < GEMV_MAX_M; r++) acc[r] = _mm512_setzero_ps();
        for (int64_t k = 0; k < K; k += 16) {
            const __mmask16 m = vec16_mask(K - k);
            const __m512 wv = vec16_half512(w + c * ldw + k, m, f16);
            for (int r = 0; r < GEMV_MAX_M; r++)
                if (r < nq) acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, xf + r * K + k), wv, acc[r]);
        }
        for (int r = 0; r < GEMV_MAX_M; r++)
            if (r < nq) y[r * GEMV_CHUNK + c] = _mm512_reduce_add_ps(acc[r]);
    }
}

// ---- AVX2 + FMA: the columns layout ----
// cols_block on 8-wide vectors, a column at a time over nq (constant) rows (xf's rows padded with
// zeros to a multiple of 8).
__attribute__((target(VEC16_TGT256), always_inline)) static inline void cols_block2(const int nq, const bool f16,
                                                                           const float *xf, int64_t K,
                                                                           const uint16_t *w, int64_t ldw, int n,
                                                                           float *y) {
    const int64_t Kp = (K + 7) / 8 * 8;
    for (int c = 0; c < n; c++) {
        __m256 acc[GEMV_MAX_M][2];
        for (int r = 0; r < GEMV_MAX_M; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
        const uint16_t *wc = w + c * ldw;
        int64_t k = 0;
        for (; k + 16 <= K; k += 16) {
            const __m256 w0 = vec16_row256(f16 ? 2 : 1, wc, k, K), w1 = vec16_row256(f16 ? 2 : 1, wc, k + 8, K);
            for (int r = 0; r < GEMV_MAX_M; r++)
                if (r < nq) {
                    acc[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(xf + r * Kp + k), w0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(_mm256_loadu_ps(xf + r * Kp + k + 8), w1, acc[r][1]);
                }
        }
        for (; k < K; k += 8) {
            const __m256 w0 = vec16_row256(f16 ? 2 : 1, wc, k, K);
            for (int r = 0; r < GEMV_MAX_M; r++)
                if (r < nq) acc[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(xf + r * Kp + k), w0, acc[r][0]);
        }
        for (int r = 0; r < GEMV_MAX_M; r++)
            if (r < nq) y[r * GEMV_CHUNK + c] = vec16_sum256(_mm256_add_ps(acc[r][0], acc[r][1]));
    }
}

// One chunk of n columns: the nq x n sums into y (row stride GEMV_CHUNK), by w's layout.
#define GEMV_CASES(FN)                                                                                             \
    switch (nq * 2 + f16) {                                                                                        \
    case 9: FN(4, true, xf, K, w, ldw, n, y); break;                                                               \
    case 8: FN(4, false, xf, K, w, ldw, n, y); break;                                                              \
    case 7: FN(3, true, xf, K, w, ldw, n, y); break;                                                               \
    case 6: FN(3, false, xf, K, w, ldw, n, y); break;                                                              \
    case 5: FN(2, true, xf, K, w, ldw, n, y); break;                                                               \
    case 4: FN(2, false, xf, K, w, ldw, n, y); break;                                                              \
    case 3: FN(1, true, xf, K, w, ldw, n, y); break;                                                               \
    default: FN(1, false, xf, K, w, ldw, n, y); break;                                                             \
    }
__attribute__((target(VEC16_TGT512))) static void chunk512(bool cols, int nq, bool f16, const float *xf, int64_t K,
                                                  const uint16_t *w, int64_t ldw, int n, float *y) {
    if (cols) {
        GEMV_CASES(cols_block)
    } else {
        GEMV_CASES(rows_block)
    }
}
__attribute__((target(VEC16_TGT256))) static void chunk256(int nq, bool f16, const float *xf, int64_t K, const uint16_t *w,
                                                   int64_t ldw, int n, float *y) {
    GEMV_CASES(cols_block2)
}
#undef GEMV_CASES

typedef struct gemv_job {
    const torc_operand *out;
    int nd, M;
    int64_t N, K, ldw;
    bool cols, f16, avx512;
    const float *xf;  // x's rows as f32, each padded with zeros to a multiple of 8 (AVX2's stride)
    const uint16_t *w;
} gemv_job;

// Chunk c of out's columns into y (a thread's sums), then rounded once into out.
static void run_chunk(const gemv_job *j, int64_t c, float *y) {
    const int64_t j0 = c * GEMV_CHUNK;
    const int n = (int)(j->N - j0 < GEMV_CHUNK ? j->N - j0 : GEMV_CHUNK);
    const uint16_t *w = j->w + j0 * (j->cols ? j->ldw : 1);
    if (j->avx512) chunk512(j->cols, j->M, j->f16, j->xf, j->K, w, j->ldw, n, y);
    else chunk256(j->M, j->f16, j->xf, j->K, w, j->ldw, n, y);
    const torc_operand *out = j->out;
    for (int r = 0; r < j->M; r++) {
        char *o = (char *)out->data + (r * out->stride[j->nd - 2] + j0) * (int64_t)torc_abi_dtype_size(out->dtype);
        const float *yr = y + (size_t)r * GEMV_CHUNK;
        if (out->dtype == TORC_DTYPE_F32) memcpy(o, yr, sizeof(float) * (size_t)n);
        else if (j->f16) onednn__f32_to_f16((uint16_t *)o, yr, n);
        else onednn__f32_to_bf16((uint16_t *)o, yr, n);
    }
}

int onednn__gemv_run(const torc_op *op) {
    const torc_operand *x = &op->in[0], *w = &op->in[1];
    const int nd = op->out[0].ndim;
    gemv_job j = {.out = &op->out[0], .nd = nd, .M = (int)op->out[0].shape[nd - 2], .N = op->out[0].shape[nd - 1],
                  .K = x->shape[nd - 1], .f16 = x->dtype == TORC_DTYPE_F16, .w = w->data};
    // Rows unless w's rows are not contiguous (a (K, 1) weight is both: rows).
    j.cols = !(w->stride[nd - 1] == 1 || j.N == 1);
    j.ldw = j.cols ? w->stride[nd - 1] : w->stride[nd - 2];
    j.avx512 = onednn__isa() >= ONEDNN_ISA_AVX512_CORE;
    const int64_t ldx = j.avx512 ? j.K : (j.K + 7) / 8 * 8;
    float *xf = calloc((size_t)(j.M * ldx), sizeof(float));
    if (!xf) return onednn__error(TORC_ERR_OOM, "onednn: matmul: out of memory for %d x %lld floats", j.M, (long long)ldx);
    for (int r = 0; r < j.M; r++) {
        const uint16_t *xr = (const uint16_t *)x->data + r * x->stride[nd - 2];
        if (j.f16) onednn__f16_to_f32(xf + (size_t)r * ldx, xr, j.K);
        else onednn__bf16_to_f32(xf + (size_t)r * ldx, xr, j.K);
    }
    j.xf = xf;
    const int64_t nchunks = (j.N + GEMV_CHUNK - 1) / GEMV_CHUNK;
    const size_t ybytes = sizeof(float) * GEMV_MAX_M * GEMV_CHUNK;
    bool oom = false;
    if (nchunks > 1 && !onednn__single_thread(TORC_OP_MATMUL, (int64_t)j.M * j.N * j.K) && omp_get_max_threads() > 1) {
#pragma omp parallel reduction(|| : oom)
        {
            float *y = aligned_alloc(64, ybytes);
            oom = !y;
#pragma omp for schedule(static)
            for (int64_t c = 0; c < nchunks; c++)
                if (y) run_chunk(&j, c, y);
            free(y);
        }
    } else {
        float *y = aligned_alloc(64, ybytes);
        oom = !y;
        for (int64_t c = 0; y && c < nchunks; c++) run_chunk(&j, c, y);
        free(y);
    }
    free(xf);
    if (oom) return onednn__error(TORC_ERR_OOM, "onednn: matmul: out of memory for its sums");
    return 0;
}
