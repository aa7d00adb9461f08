// backends/cpu_onednn/cross_entropy.c — CROSS_ENTROPY (backend ABI 2.5) on f32 / bf16 / f16 logits
// whose rows are unit-stride: each row read once into cache, then its loss and gradient written.
//
// Per row (one thread a row, rows split by onednn__thread_range, so the bits do not depend on the
// thread count): the max; exp(x - max) stored (over the gradient's row for f32, in a float row of
// the thread's for bf16 / f16, converted once) and summed in double; loss = max + log(sum) - x[t]
// in double; then the gradient e * (w / sum) (the product in double) and the target's element
// w (exp(x[t] - max) / sum - 1) in double, each rounded once to its dtype. x - max is taken exactly
// (its rounding error, up to 16 float ulps of exp at a spread of 30, is added back as e * err).
// Loops in plain C that `omp simd` vectorises, compiled for AVX-512, AVX2 and below, picked by
// torc's ISA (TORC_MAX_CPU_ISA); exp is Cephes' expf polynomial (gelu_backward.c's, < 1 ulp), on
// AVX-512 in intrinsics (ce_exp_sum_avx512).
// Against the reference (tests/test_cross_entropy_op.c on each ISA path, torc-xcheck --op
// cross_entropy): the loss within 2^-23 |loss| + 4e-7, the f32 gradient within 3 float ulps (xcheck:
// 1.7 at most), bf16 / f16 within one ulp of their own.
// Speed (Xeon Sapphire Rapids class, loaded 2-vCPU VM, one thread, in place, (1024, 50257), best of
// 40): f32 75-93 ms, bf16 53 ms on AVX-512 (the plain-C exp loop compiled for it: 126-137 and 137);
// f32 191 ms capped to AVX2, 400 ms plain C. The LM head's loss and gradients at N 1024, C 256,
// V 50257 (torc_linear_cross_entropy and backward, TORC_NUM_THREADS=1, CPU time, the minimum of 5,
// three interleaved runs against fc3fbf1's composition): f32 1228-1423 ms -> 797-985 ms, bf16
// autocast 876-914 -> 337-431 ms; the op is then 6% of the bf16 figure (perf), the GEMMs most of it.
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <immintrin.h>

#include "onednn-impl.h"

bool onednn__cross_entropy_takes(const torc_op *op) { return op->code == TORC_OP_CROSS_ENTROPY; }

// What the loops take: logits and grad of one dtype T (f32, bf16, f16) with unit stride along V
// (rows any stride), target i64, weight and loss f32 (any strides).
int onednn__cross_entropy_check(const torc_op *op) {
    if (op->n_in != 3 || op->n_out != 2)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: cross_entropy takes 3 inputs and 2 outputs, got %d and %d",
                             op->n_in, op->n_out);
    int st;
    for (int i = 0; i < 3; i++)
        if ((st = onednn__check_operand(&op->in[i], "in"))) return st;
    for (int i = 0; i < 2; i++)
        if ((st = onednn__check_operand(&op->out[i], "out"))) return st;
    const torc_operand *x = &op->in[0], *g = &op->out[1];
    if (x->ndim != 2 || g->ndim != 2 || op->in[1].ndim != 1 || op->in[2].ndim != 1 || op->out[0].ndim != 1 ||
        g->shape[0] != x->shape[0] || g->shape[1] != x->shape[1] || op->in[1].shape[0] != x->shape[0] ||
        op->in[2].shape[0] != x->shape[0] || op->out[0].shape[0] != x->shape[0])
        return onednn__error(TORC_ERR_SHAPE, "onednn: cross_entropy: logits (N, V), target (N), weight (N), loss (N) "
                             "and grad (N, V) do not fit");
    const torc_dtype t = x->dtype;
    const bool ok = (t == TORC_DTYPE_F32 || t == TORC_DTYPE_BF16 || t == TORC_DTYPE_F16) && g->dtype == t &&
                    op->in[1].dtype == TORC_DTYPE_I64 && op->in[2].dtype == TORC_DTYPE_F32 &&
                    op->out[0].dtype == TORC_DTYPE_F32 && (x->shape[1] <= 1 || (x->stride[1] == 1 && g->stride[1] == 1));
    if (!ok)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: cross_entropy runs f32, bf16 and f16 logits with rows of "
                             "unit stride (f64 and strided rows go to the reference backend)");
    return 0;
}

// ---- float loops that vectorise (onednn__exp_f: onednn-impl.h) ----
// max (NaN is left to the sum: exp of a NaN x - max is NaN), the scaling, and the exps and their sum.
#define CE_LOOPS(suffix, attr)                                                                             \
    attr static float ce_max_##suffix(const float *x, int64_t n) {                                        \
        float m = -INFINITY;                                                                               \
        _Pragma("omp simd reduction(max:m)") for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;      \
        return m;                                                                                          \
    }                                                                                                      \
    /* out[i] = e[i] * scale, the product in double, rounded once */                                       \
    attr static void ce_scale_##suffix(const float *e, float *out, int64_t n, double scale) {            \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) out[i] = (float)((double)e[i] * scale);        \
    }
#define CE_EXP_SUM(suffix, attr)                                                                           \
    /* e[i] = exp(x[i] - m) (e may be x); returns their sum, in double */                                  \
    attr static double ce_exp_sum_##suffix(const float *x, float *e, int64_t n, float m) {                \
        double s = 0.0;                                                                                    \
        _Pragma("omp simd reduction(+:s)") for (int64_t i = 0; i < n; i++) {                               \
            const float xi = x[i], d = xi - m;                                                             \
            /* TwoSum: d + err = xi - m exactly (both finite where d > -88; else err 0) */                 \
            const float bb = d - xi, err0 = (xi - (d - bb)) + (-m - bb);                                   \
            const float err = d > -88.0f ? err0 : 0.0f;                                                    \
            const float v = onednn__exp_f(d);                                                                      \
            const float ev = v + v * err;                                                                  \
            e[i] = ev;                                                                                     \
            s += (double)ev;                                                                               \
        }                                                                                                  \
        return s;                                                                                          \
    }
#define TGT512 "avx512f,avx512dq,avx2,fma"
CE_LOOPS(avx512, __attribute__((target(TGT512))))
CE_LOOPS(avx2, __attribute__((target("avx2,fma"))))
CE_EXP_SUM(avx2, __attribute__((target("avx2,fma"))))
CE_LOOPS(any, )
CE_EXP_SUM(any, )

// The exp pass on AVX-512 in intrinsics: onednn__exp_f's steps with fused multiply-adds, the power of two
// by vscalefps, results below exp(-87.3) masked to 0 (never computed: a subnormal result costs a
// microcode assist on Intel cores, attention.c), 16 exps a step summed into two lanes of 8 doubles.
// The plain-C loop compiled for AVX-512 (no fma under ISO C, masks for every select) took 1.6 ns a
// logit in the op here, 60% of it; this one about a third of that.
// e = exp(x - m) (with TwoSum's correction, as onednn__exp_f's loop) for the lanes of keep (others 0).
__attribute__((target(TGT512), always_inline)) static inline __m512 ce_exp16(__m512 xi, __m512 vm, __mmask16 keep) {
    const __m512 d = _mm512_sub_ps(xi, vm), bb = _mm512_sub_ps(d, xi);
    const __m512 err = _mm512_add_ps(_mm512_sub_ps(xi, _mm512_sub_ps(d, bb)), _mm512_sub_ps(_mm512_setzero_ps(), _mm512_add_ps(vm, bb)));
    // lanes kept: d >= -87.3 or NaN (a NaN d gives NaN through the polynomial; its err is not used)
    const __mmask16 k = _mm512_mask_cmp_ps_mask(keep, d, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ);
    const __mmask16 fin = _mm512_cmp_ps_mask(d, _mm512_set1_ps(-88.0f), _CMP_GT_OQ);
    const __m512 x = _mm512_max_ps(_mm512_set1_ps(-87.3f), d);  // NaN d stays NaN (max's second operand)
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    const __m512 v = _mm512_maskz_scalef_ps(k, y, n);
    return _mm512_mask_fmadd_ps(v, fin, _mm512_maskz_mov_ps(fin, err), v);  // v + v err where d is finite
}

__attribute__((target(TGT512))) static double ce_exp_sum_avx512(const float *x, float *e, int64_t n, float m) {
    const __m512 vm = _mm512_set1_ps(m);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = ce_exp16(_mm512_loadu_ps(x + i), vm, 0xFFFF);
        _mm512_storeu_ps(e + i, v);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
    }
    if (i < n) {  // the tail: lanes past n load nothing and add 0
        const __mmask16 t = (__mmask16)((1u << (n - i)) - 1);
        const __m512 v = ce_exp16(_mm512_maskz_loadu_ps(t, x + i), vm, t);
        _mm512_mask_storeu_ps(e + i, t, v);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
    }
    double lanes[8];
    _mm512_storeu_pd(lanes, _mm512_add_pd(s0, s1));
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

typedef struct ce_fns {
    float (*max)(const float *, int64_t);
    double (*exp_sum)(const float *, float *, int64_t, float);
    void (*scale)(const float *, float *, int64_t, double);
} ce_fns;

static ce_fns pick(void) {
    const int isa = onednn__isa();  // TORC_MAX_CPU_ISA caps it
    if (isa >= ONEDNN_ISA_AVX512_CORE) return (ce_fns){ce_max_avx512, ce_exp_sum_avx512, ce_scale_avx512};
    if (isa >= ONEDNN_ISA_AVX2) return (ce_fns){ce_max_avx2, ce_exp_sum_avx2, ce_scale_avx2};
    return (ce_fns){ce_max_any, ce_exp_sum_any, ce_scale_any};
}

// One row i: logits at x (unit stride), gradient at g (may be x), buf a float row of V for bf16 /
// f16 (NULL for f32).
static void ce_row(const torc_op *op, const ce_fns *f, int64_t i, float *buf) {
    const torc_operand *xo = &op->in[0], *go = &op->out[1];
    const int64_t V = xo->shape[1];
    const torc_dtype T = xo->dtype;
    const size_t es = T == TORC_DTYPE_F32 ? 4 : 2;
    const char *x = (const char *)xo->data + i * xo->stride[0] * (int64_t)es;
    char *g = (char *)go->data + i * go->stride[0] * (int64_t)es;
    int64_t t;
    memcpy(&t, (const char *)op->in[1].data + i * op->in[1].stride[0] * 8, 8);
    float *loss = (float *)op->out[0].data + i * op->out[0].stride[0];
    if (t < 0) {  // ignored: loss 0, a zero row (+0.0 is all-zero bits in every dtype)
        *loss = 0.0f;
        memset(g, 0, (size_t)V * es);
        return;
    }
    const float w = ((const float *)op->in[2].data)[i * op->in[2].stride[0]];
    const float *xf;  // the row as float
    float *e;         // where the exps go
    if (T == TORC_DTYPE_F32) {
        xf = (const float *)x, e = (float *)g;
    } else {
        (T == TORC_DTYPE_BF16 ? onednn__bf16_to_f32 : onednn__f16_to_f32)(buf, (const uint16_t *)x, V);
        xf = e = buf;
    }
    const float m = f->max(xf, V);
    const double xt = xf[t];  // before the exps overwrite it (in place)
    const double sum = f->exp_sum(xf, e, V, m);
    *loss = (float)((double)m + log(sum) - xt);
    const double gt = (double)w * (exp(xt - (double)m) / sum - 1.0);
    const double scale = (double)w / sum;
    const float gtf = (float)gt;
    if (T == TORC_DTYPE_F32) {
        f->scale(e, (float *)g, V, scale);
        ((float *)g)[t] = gtf;
        return;
    }
    f->scale(e, e, V, scale);
    e[t] = gtf;
    (T == TORC_DTYPE_BF16 ? onednn__f32_to_bf16 : onednn__f32_to_f16)((uint16_t *)g, e, V);
}

// Rows split as onednn__run_chunks splits elements (one chunk per thread; small ops on the
// calling thread): row r goes to the thread whose element range holds r * V.
int onednn__cross_entropy_run(const torc_op *op) {
    const int64_t N = op->in[0].shape[0], V = op->in[0].shape[1];
    for (int64_t i = 0; i < N; i++) {  // every target first: nothing is written when one is out of range
        int64_t t;
        memcpy(&t, (const char *)op->in[1].data + i * op->in[1].stride[0] * 8, 8);
        if (t >= V) return onednn__error(TORC_ERR_INDEX, "onednn: cross_entropy: Target %lld is out of bounds.", (long long)t);
    }
    if (N == 0) return 0;
    const int64_t n = N * (V > 0 ? V : 1);
    const int nthr = onednn__single_thread(op->code, n) ? 1 : omp_get_max_threads();
    const bool half = op->in[0].dtype != TORC_DTYPE_F32;
    float *bufs = NULL;
    if (half && V > 0 && !(bufs = malloc((size_t)nthr * (size_t)V * sizeof *bufs)))
        return onednn__error(TORC_ERR_OOM, "onednn: cross_entropy: cannot allocate %d rows of %lld floats", nthr,
                             (long long)V);
    const ce_fns f = pick();
    const int64_t per = V > 0 ? V : 1;
    if (nthr <= 1) {
        for (int64_t i = 0; i < N; i++) ce_row(op, &f, i, bufs);
    } else {
#pragma omp parallel num_threads(nthr)
        {
            int64_t i0, i1;
            onednn__thread_range(n, &i0, &i1);
            float *buf = bufs ? bufs + (size_t)omp_get_thread_num() * (size_t)V : NULL;
            for (int64_t i = (i0 + per - 1) / per; i < (i1 + per - 1) / per; i++) ce_row(op, &f, i, buf);
        }
    }
    free(bufs);
    return 0;
}
