// backends/cpu_onednn/layer_norm.c — LAYER_NORM and LAYER_NORM_BACKWARD on contiguous f32, bf16 and
// f16 rows (and f32 parameters of a bf16/f16 x): the reference's double formulas, each output
// rounded once, rows on every core. f32 (all that reaches it in training: autocast runs
// layer_norm in f32) runs AVX-512 or AVX2 loops in double lanes; bf16, f16 and CPUs below AVX2
// run plain C in the reference's order. dweight and dbias sum fixed blocks of rows, added in
// block order: the same values at every thread count.
// Measured (x (1024, 384) f32 with weight and bias, TORC_NUM_THREADS=1, a loaded 2-vCPU Sapphire
// Rapids class Xeon; a driver timing torc_run_op, best of 200, old and new plugin interleaved):
// forward 0.93 -> 0.17 ms, backward 1.15 -> 0.23 ms (capped to AVX2: 0.27, 0.29 ms); a memcpy of
// the 1.5 MiB x took 0.12 ms there. In GPT config B's f32 step (perf record -- torc-bench
// --gpt-child 6,6,384,256,256,4, where x comes from memory): 13.6 -> 3.4 ms a step forward,
// 18.8 -> 5.7 ms backward. Rows of 64K elements are slower an element, their row buffers (16
// bytes an element) out of L2: 16 x 65536 forward 2.4 -> 1.27 ms, backward 3.3 -> 2.2 ms.
// oneDNN's layer_normalization primitive is not used: it accumulates in float and gives
// other answers than the reference (1e-4 relative on rows of a large mean), and its backward
// reduces dweight over threads in an order of its own. Anything else goes to the reference.
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <torc/convert.h>

#include "onednn-impl.h"

bool onednn__layer_norm_takes(const torc_op *op) {
    return op->code == TORC_OP_LAYER_NORM || op->code == TORC_OP_LAYER_NORM_BACKWARD;
}

static bool is_backward(const torc_op *op) { return op->code == TORC_OP_LAYER_NORM_BACKWARD; }

// Rows (M) and row length (N) of x, whose dims from params.norm.axis on are normalized.
static void rows_of(const torc_op *op, int64_t *M, int64_t *N) {
    const torc_operand *x = &op->in[is_backward(op) ? 1 : 0];
    *M = 1;
    *N = 1;
    for (int d = 0; d < x->ndim; d++) *(d < op->params.norm.axis ? M : N) *= x->shape[d];
}

// The dtypes taken: x f32, bf16 or f16; weight, bias (and their gradients), mean and rstd x's
// dtype or, for a bf16/f16 x, f32 (PyTorch's CPU mixed dtype).
static bool x_dtype(torc_dtype d) { return d == TORC_DTYPE_F32 || d == TORC_DTYPE_BF16 || d == TORC_DTYPE_F16; }
static bool side_dtype(torc_dtype d, torc_dtype x) { return d == x || (d == TORC_DTYPE_F32 && x_dtype(x)); }

int onednn__layer_norm_check(const torc_op *op) {
    const uint32_t a = op->params.norm.affine;
    const int w = (int)(a & 1), b = (int)(a >> 1 & 1);
    const bool bw = is_backward(op);
    const int n_in = bw ? 4 + w : 1 + w + b, n_out = bw ? 1 + w + b : 3;
    if ((a & ~3u) || op->n_in != n_in || op->n_out != n_out)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s: unexpected operand counts (the reference says why)",
                             onednn__op_name(op->code));
    int st = 0;
    for (int i = 0; i < op->n_in && !st; i++) st = onednn__check_operand(&op->in[i], "in");
    for (int i = 0; i < op->n_out && !st; i++) st = onednn__check_operand(&op->out[i], "out");
    if (st) return st;
    const torc_operand *x = &op->in[bw ? 1 : 0];
    const torc_dtype xd = x->dtype, sd = bw ? op->in[2].dtype : op->out[1].dtype;
    const torc_dtype pd = bw ? (w ? op->in[4].dtype : op->n_out > 1 ? op->out[1].dtype : xd)
                             : (op->n_in > 1 ? op->in[1].dtype : xd);
    const int axis = op->params.norm.axis;
    bool ok = axis >= 0 && axis < x->ndim && x_dtype(xd) && side_dtype(sd, xd) && side_dtype(pd, xd);
    int64_t M = 0, N = 0;
    if (ok) rows_of(op, &M, &N);
    // Every operand dense; x-shaped ones x's shape and dtype, the others M (mean, rstd) or N
    // (parameters) elements (the reference checks their exact shapes when it gets the op instead).
    for (int i = 0; ok && i < op->n_in + op->n_out; i++) {
        const torc_operand *t = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        if (!t->data && onednn__numel(t) > 0)
            return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s: operand %d's data is NULL", onednn__op_name(op->code),
                                 i);
        const bool is_stat = bw ? (i == 2 || i == 3) : (i == op->n_in + 1 || i == op->n_in + 2);
        const bool is_x = bw ? (i <= 1 || i == op->n_in) : (i == 0 || i == op->n_in);
        ok = onednn__dense(t) && (is_x ? onednn__same_shape(t, x) && t->dtype == xd
                                       : onednn__numel(t) == (is_stat ? M : N) && t->dtype == (is_stat ? sd : pd));
    }
    if (!ok)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs contiguous float32, bfloat16 or float16 "
                             "operands (others go to the reference backend)", onednn__op_name(op->code));
    return 0;
}

// Element i as the reference loads it (exact) and a double stored as it rounds: once, through
// float (c10's conversions).
static inline __attribute__((always_inline)) double ld(const void *p, int64_t i, torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_BF16: return torc_bf16_to_f32(((const uint16_t *)p)[i]);
    case TORC_DTYPE_F16: return torc_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}
static inline __attribute__((always_inline)) void st(void *p, int64_t i, torc_dtype dt, double v) {
    switch (dt) {
    case TORC_DTYPE_BF16: ((uint16_t *)p)[i] = torc_f32_to_bf16((float)v); break;
    case TORC_DTYPE_F16: ((uint16_t *)p)[i] = torc_f32_to_f16((float)v); break;
    default: ((float *)p)[i] = (float)v; break;
    }
}

// ---- the row loops ----
// Each runs rows [r0, r1) of op (M rows of N elements) with the op's scratch (ln_ctx); the
// backward also adds the rows' terms of dweight and dbias to aw, ab (N doubles each, NULL when
// not wanted). buf: this thread's 2 * c->np doubles.
typedef struct ln_ctx {
    const torc_op *op;
    int64_t M, N, np;       // rows, row length, and it rounded up to 8
    const double *wd, *bd;  // f32 weight and bias as doubles, zeros up to np (NULL: none, or not f32)
} ln_ctx;
typedef void (*ln_fn)(const ln_ctx *c, int64_t r0, int64_t r1, double *aw, double *ab, double *buf);

// ---- any dtype, plain C: the reference's formulas in its order ----
// The row loops take the dtypes as arguments and are forced inline: called with constants for
// all-f32 operands, the conversions fold away (the f32 path below the AVX2 family).
#define LN_INLINE static inline __attribute__((always_inline))

LN_INLINE void fwd_row(const char *xr, char *yr, void *mean, void *rstd, int64_t r, const void *w, const void *b,
                       int64_t N, double eps, torc_dtype xd, torc_dtype pd, torc_dtype sd) {
    double sum = 0, ss = 0;
    for (int64_t i = 0; i < N; i++) sum += ld(xr, i, xd);
    const double mu = N ? sum / (double)N : 0.0;  // no elements: mean 0, rstd NaN (PyTorch's)
    for (int64_t i = 0; i < N; i++) {
        const double c = ld(xr, i, xd) - mu;
        ss += c * c;
    }
    const double rs = 1.0 / sqrt((N ? ss / (double)N : NAN) + eps);
    st(mean, r, sd, mu);
    st(rstd, r, sd, rs);
    for (int64_t i = 0; i < N; i++) {
        double v = (ld(xr, i, xd) - mu) * rs;
        if (w) v *= ld(w, i, pd);
        if (b) v += ld(b, i, pd);
        st(yr, i, xd, v);
    }
}

LN_INLINE void bwd_row(const char *dyr, const char *xr, char *dxr, double mu, double rs, const void *w, double *aw,
                       double *ab, int64_t N, torc_dtype xd, torc_dtype pd) {
    double sg = 0, sgx = 0;  // sums of g = dy*w and of g*xhat over the row
    for (int64_t i = 0; i < N; i++) {
        const double d = ld(dyr, i, xd), xh = (ld(xr, i, xd) - mu) * rs;
        const double g = w ? d * ld(w, i, pd) : d;
        sg += g;
        sgx += g * xh;
        if (aw) aw[i] += d * xh;
        if (ab) ab[i] += d;
    }
    const double a = sg / (double)N, c = sgx / (double)N;
    for (int64_t i = 0; i < N; i++) {
        const double g = w ? ld(dyr, i, xd) * ld(w, i, pd) : ld(dyr, i, xd);
        st(dxr, i, xd, rs * (g - a - (ld(xr, i, xd) - mu) * rs * c));
    }
}

#define LN_OPERANDS_FWD                                                                                     \
    const torc_op *op = c->op;                                                                              \
    const int64_t N = c->N;                                                                                 \
    const uint32_t affine = op->params.norm.affine;                                                         \
    const void *x = op->in[0].data;                                                                         \
    const void *w = affine & 1 ? op->in[1].data : NULL, *b = affine & 2 ? op->in[1 + (affine & 1)].data : NULL; \
    void *y = op->out[0].data, *mean = op->out[1].data, *rstd = op->out[2].data;                            \
    const double eps = op->params.norm.eps;                                                                 \
    (void)w, (void)b, (void)aw, (void)ab, (void)buf;
#define LN_OPERANDS_BWD                                                                                     \
    const torc_op *op = c->op;                                                                              \
    const int64_t N = c->N;                                                                                 \
    const void *dy = op->in[0].data, *x = op->in[1].data, *mean = op->in[2].data, *rstd = op->in[3].data;   \
    const void *w = op->params.norm.affine & 1 ? op->in[4].data : NULL;                                     \
    void *dx = op->out[0].data;                                                                             \
    (void)w, (void)buf;

static void fwd_generic(const ln_ctx *c, int64_t r0, int64_t r1, double *aw, double *ab, double *buf) {
    LN_OPERANDS_FWD
    const torc_dtype xd = op->in[0].dtype, sd = op->out[1].dtype, pd = op->n_in > 1 ? op->in[1].dtype : xd;
    const size_t xs = torc_abi_dtype_size(xd);
    for (int64_t r = r0; r < r1; r++) {
        const char *xr = (const char *)x + (size_t)(r * N) * xs;
        char *yr = (char *)y + (size_t)(r * N) * xs;
        const torc_dtype f = TORC_DTYPE_F32;
        if (xd == f) fwd_row(xr, yr, mean, rstd, r, w, b, N, eps, f, f, f);
        else fwd_row(xr, yr, mean, rstd, r, w, b, N, eps, xd, pd, sd);
    }
}

static void bwd_generic(const ln_ctx *c, int64_t r0, int64_t r1, double *aw, double *ab, double *buf) {
    LN_OPERANDS_BWD
    const torc_dtype xd = op->in[1].dtype, sd = op->in[2].dtype;
    const torc_dtype pd = w ? op->in[4].dtype : op->n_out > 1 ? op->out[1].dtype : xd;
    const size_t xs = torc_abi_dtype_size(xd);
    for (int64_t r = r0; r < r1; r++) {
        const size_t o = (size_t)(r * N) * xs;
        const char *dyr = (const char *)dy + o, *xr = (const char *)x + o;
        const double mu = ld(mean, r, sd), rs = ld(rstd, r, sd);
        const torc_dtype f = TORC_DTYPE_F32;
        if (xd == f) bwd_row(dyr, xr, (char *)dx + o, mu, rs, w, aw, ab, N, f, f);
        else bwd_row(dyr, xr, (char *)dx + o, mu, rs, w, aw, ab, N, xd, pd);
    }
}

// ---- f32 on AVX-512 and AVX2: the same formulas in double lanes ----
// The generic loops add one double at a time, a chain of dependent adds (4 cycles each), and
// convert each element once a pass: ~1 ms for a (1024, 384) x. Here each sum keeps 8 (AVX-512)
// or 4 (AVX2) lanes per accumulator, combined in an order fixed by N; the first pass leaves the
// row's doubles (forward: x; backward: xhat and g) in buf for the others, and weight and bias
// are converted once an op. Each output is the double formula (a fused multiply-add for w and b,
// and in dx) rounded once to f32, so it differs from the reference only where the last bits of
// the double sums move it across a rounding boundary of f32.
#define LN_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))
#define LN_AVX2 __attribute__((target("avx2,fma")))

LN_AVX512 static inline __m512d ld8(const float *p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
LN_AVX512 static inline __m512d ld8m(const float *p, __mmask8 m) {
    return _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, p));
}

// y = xhat * w + b of the doubles in v (wd, bd at i, or none).
#define LN_AFFINE(mul, add, fmadd, load, v, wd, bd, i)                          \
    ((wd) && (bd) ? fmadd(v, load((wd) + (i)), load((bd) + (i)))                \
     : (wd)       ? mul(v, load((wd) + (i)))                                    \
     : (bd)       ? add(v, load((bd) + (i)))                                    \
                  : (v))

LN_AVX512 static void fwd_avx512(const ln_ctx *c, int64_t r0, int64_t r1, double *aw, double *ab, double *buf) {
    LN_OPERANDS_FWD
    const double *wd = c->wd, *bd = c->bd;
    const int64_t nv = N & ~(int64_t)7;
    const __mmask8 tm = (__mmask8)((1u << (N & 7)) - 1);  // the last N % 8 elements
    const __m512d z = _mm512_setzero_pd();
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = (const float *)x + r * N;
        float *yr = (float *)y + r * N;
        __m512d s0 = z, s1 = z, s2 = z, s3 = z;  // four chains: the adds' latency, not their count
        int64_t i = 0;
        for (; i + 32 <= N; i += 32) {
            const __m512d v0 = ld8(xr + i), v1 = ld8(xr + i + 8), v2 = ld8(xr + i + 16), v3 = ld8(xr + i + 24);
            _mm512_storeu_pd(buf + i, v0);
            _mm512_storeu_pd(buf + i + 8, v1);
            _mm512_storeu_pd(buf + i + 16, v2);
            _mm512_storeu_pd(buf + i + 24, v3);
            s0 = _mm512_add_pd(s0, v0);
            s1 = _mm512_add_pd(s1, v1);
            s2 = _mm512_add_pd(s2, v2);
            s3 = _mm512_add_pd(s3, v3);
        }
        for (; i < N; i += 8) {  // the tail's lanes past the row are 0
            const __m512d v = i < nv ? ld8(xr + i) : ld8m(xr + i, tm);
            _mm512_storeu_pd(buf + i, v);
            s0 = _mm512_add_pd(s0, v);
        }
        const double sum = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3)));
        const double mu = N ? sum / (double)N : 0.0;  // no elements: mean 0, rstd NaN (PyTorch's)
        const __m512d vmu = _mm512_set1_pd(mu);
        s0 = s1 = s2 = s3 = z;
        for (i = 0; i + 32 <= N; i += 32) {
            const __m512d c0 = _mm512_sub_pd(_mm512_loadu_pd(buf + i), vmu);
            const __m512d c1 = _mm512_sub_pd(_mm512_loadu_pd(buf + i + 8), vmu);
            const __m512d c2 = _mm512_sub_pd(_mm512_loadu_pd(buf + i + 16), vmu);
            const __m512d c3 = _mm512_sub_pd(_mm512_loadu_pd(buf + i + 24), vmu);
            s0 = _mm512_fmadd_pd(c0, c0, s0);
            s1 = _mm512_fmadd_pd(c1, c1, s1);
            s2 = _mm512_fmadd_pd(c2, c2, s2);
            s3 = _mm512_fmadd_pd(c3, c3, s3);
        }
        for (; i < N; i += 8) {
            const __m512d d = _mm512_maskz_sub_pd(i < nv ? 0xFF : tm, _mm512_loadu_pd(buf + i), vmu);
            s0 = _mm512_fmadd_pd(d, d, s0);
        }
        const double ss = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3)));
        const double rs = 1.0 / sqrt((N ? ss / (double)N : NAN) + eps);
        ((float *)mean)[r] = (float)mu;
        ((float *)rstd)[r] = (float)rs;
        const __m512d vrs = _mm512_set1_pd(rs);
        for (i = 0; i < N; i += 8) {
            if (r + 1 < c->M) _mm_prefetch((const char *)(xr + N + i), _MM_HINT_T0);  // the next row's x
            const __m512d h = _mm512_mul_pd(_mm512_sub_pd(_mm512_loadu_pd(buf + i), vmu), vrs);
            const __m256 v = _mm512_cvtpd_ps(LN_AFFINE(_mm512_mul_pd, _mm512_add_pd, _mm512_fmadd_pd, _mm512_loadu_pd,
                                                       h, wd, bd, i));
            if (i < nv) _mm256_storeu_ps(yr + i, v);
            else _mm256_mask_storeu_ps(yr + i, tm, v);
        }
    }
}

LN_AVX512 static void bwd_avx512(const ln_ctx *c, int64_t r0, int64_t r1, double *aw, double *ab, double *buf) {
    LN_OPERANDS_BWD
    const double *wd = c->wd;
    double *xb = buf, *gb = buf + c->np;  // the row's xhat and g
    const int64_t nv = N & ~(int64_t)7;
    const __mmask8 tm = (__mmask8)((1u << (N & 7)) - 1);
    for (int64_t r = r0; r < r1; r++) {
        const float *dyr = (const float *)dy + r * N, *xr = (const float *)x + r * N;
        float *dxr = (float *)dx + r * N;
        const __m512d vmu = _mm512_set1_pd(((const float *)mean)[r]), vrs = _mm512_set1_pd(((const float *)rstd)[r]);
        __m512d sg = _mm512_setzero_pd(), sgx = sg;  // sums of g = dy*w and of g*xhat over the row
        for (int64_t i = 0; i < N; i += 8) {
            const __mmask8 m = i < nv ? 0xFF : tm;  // d, g and xhat 0 past the row
            const __m512d d = i < nv ? ld8(dyr + i) : ld8m(dyr + i, tm);
            const __m512d xh = _mm512_maskz_mul_pd(m, _mm512_sub_pd(i < nv ? ld8(xr + i) : ld8m(xr + i, tm), vmu), vrs);
            const __m512d g = wd ? _mm512_mul_pd(d, _mm512_loadu_pd(wd + i)) : d;
            _mm512_storeu_pd(xb + i, xh);
            _mm512_storeu_pd(gb + i, g);
            sg = _mm512_add_pd(sg, g);
            sgx = _mm512_fmadd_pd(g, xh, sgx);
            if (aw) _mm512_mask_storeu_pd(aw + i, m, _mm512_fmadd_pd(d, xh, _mm512_maskz_loadu_pd(m, aw + i)));
            if (ab) _mm512_mask_storeu_pd(ab + i, m, _mm512_add_pd(_mm512_maskz_loadu_pd(m, ab + i), d));
        }
        const __m512d va = _mm512_set1_pd(_mm512_reduce_add_pd(sg) / (double)N);
        const __m512d vc = _mm512_set1_pd(_mm512_reduce_add_pd(sgx) / (double)N);
        for (int64_t i = 0; i < N; i += 8) {  // rs * (g - a - xhat * c)
            const __m512d ga = _mm512_sub_pd(_mm512_loadu_pd(gb + i), va);
            const __m256 v = _mm512_cvtpd_ps(_mm512_mul_pd(vrs, _mm512_fnmadd_pd(_mm512_loadu_pd(xb + i), vc, ga)));
            if (i < nv) _mm256_storeu_ps(dxr + i, v);
            else _mm256_mask_storeu_ps(dxr + i, tm, v);
        }
    }
}

// AVX2: 4 doubles a vector; the last N % 4 elements in scalar code, added after the vectors.
LN_AVX2 static inline __m256d ld4(const float *p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
LN_AVX2 static inline double hsum4(__m256d v) {
    const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

LN_AVX2 static void fwd_avx2(const ln_ctx *c, int64_t r0, int64_t r1, double *aw, double *ab, double *buf) {
    LN_OPERANDS_FWD
    const double *wd = c->wd, *bd = c->bd;
    const int64_t nv = N & ~(int64_t)3;
    const __m256d z = _mm256_setzero_pd();
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = (const float *)x + r * N;
        float *yr = (float *)y + r * N;
        __m256d s0 = z, s1 = z, s2 = z, s3 = z;
        int64_t i = 0;
        for (; i + 16 <= N; i += 16) {
            const __m256d v0 = ld4(xr + i), v1 = ld4(xr + i + 4), v2 = ld4(xr + i + 8), v3 = ld4(xr + i + 12);
            _mm256_storeu_pd(buf + i, v0);
            _mm256_storeu_pd(buf + i + 4, v1);
            _mm256_storeu_pd(buf + i + 8, v2);
            _mm256_storeu_pd(buf + i + 12, v3);
            s0 = _mm256_add_pd(s0, v0);
            s1 = _mm256_add_pd(s1, v1);
            s2 = _mm256_add_pd(s2, v2);
            s3 = _mm256_add_pd(s3, v3);
        }
        for (; i < nv; i += 4) {
            const __m256d v = ld4(xr + i);
            _mm256_storeu_pd(buf + i, v);
            s0 = _mm256_add_pd(s0, v);
        }
        double sum = hsum4(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
        for (i = nv; i < N; i++) sum += buf[i] = xr[i];
        const double mu = N ? sum / (double)N : 0.0;
        const __m256d vmu = _mm256_set1_pd(mu);
        s0 = s1 = z;
        for (i = 0; i + 8 <= N; i += 8) {
            const __m256d c0 = _mm256_sub_pd(_mm256_loadu_pd(buf + i), vmu);
            const __m256d c1 = _mm256_sub_pd(_mm256_loadu_pd(buf + i + 4), vmu);
            s0 = _mm256_fmadd_pd(c0, c0, s0);
            s1 = _mm256_fmadd_pd(c1, c1, s1);
        }
        if (i < nv) {
            const __m256d d = _mm256_sub_pd(_mm256_loadu_pd(buf + i), vmu);
            s0 = _mm256_fmadd_pd(d, d, s0);
        }
        double ss = hsum4(_mm256_add_pd(s0, s1));
        for (i = nv; i < N; i++) ss += (buf[i] - mu) * (buf[i] - mu);
        const double rs = 1.0 / sqrt((N ? ss / (double)N : NAN) + eps);
        ((float *)mean)[r] = (float)mu;
        ((float *)rstd)[r] = (float)rs;
        const __m256d vrs = _mm256_set1_pd(rs);
        for (i = 0; i < nv; i += 4) {
            const __m256d h = _mm256_mul_pd(_mm256_sub_pd(_mm256_loadu_pd(buf + i), vmu), vrs);
            _mm_storeu_ps(yr + i, _mm256_cvtpd_ps(LN_AFFINE(_mm256_mul_pd, _mm256_add_pd, _mm256_fmadd_pd,
                                                            _mm256_loadu_pd, h, wd, bd, i)));
        }
        for (i = nv; i < N; i++) {
            const double h = (buf[i] - mu) * rs;
            yr[i] = (float)(wd && bd ? fma(h, wd[i], bd[i]) : wd ? h * wd[i] : bd ? h + bd[i] : h);
        }
    }
}

LN_AVX2 static void bwd_avx2(const ln_ctx *c, int64_t r0, int64_t r1, double *aw, double *ab, double *buf) {
    LN_OPERANDS_BWD
    const double *wd = c->wd;
    double *xb = buf, *gb = buf + c->np;
    const int64_t nv = N & ~(int64_t)3;
    for (int64_t r = r0; r < r1; r++) {
        const float *dyr = (const float *)dy + r * N, *xr = (const float *)x + r * N;
        float *dxr = (float *)dx + r * N;
        const double mu = ((const float *)mean)[r], rs = ((const float *)rstd)[r];
        const __m256d vmu = _mm256_set1_pd(mu), vrs = _mm256_set1_pd(rs);
        __m256d vsg = _mm256_setzero_pd(), vsgx = vsg;
        for (int64_t i = 0; i < nv; i += 4) {
            const __m256d d = ld4(dyr + i), xh = _mm256_mul_pd(_mm256_sub_pd(ld4(xr + i), vmu), vrs);
            const __m256d g = wd ? _mm256_mul_pd(d, _mm256_loadu_pd(wd + i)) : d;
            _mm256_storeu_pd(xb + i, xh);
            _mm256_storeu_pd(gb + i, g);
            vsg = _mm256_add_pd(vsg, g);
            vsgx = _mm256_fmadd_pd(g, xh, vsgx);
            if (aw) _mm256_storeu_pd(aw + i, _mm256_fmadd_pd(d, xh, _mm256_loadu_pd(aw + i)));
            if (ab) _mm256_storeu_pd(ab + i, _mm256_add_pd(_mm256_loadu_pd(ab + i), d));
        }
        double sg = hsum4(vsg), sgx = hsum4(vsgx);
        for (int64_t i = nv; i < N; i++) {
            const double d = dyr[i], xh = xb[i] = (xr[i] - mu) * rs, g = gb[i] = wd ? d * wd[i] : d;
            sg += g;
            sgx = fma(g, xh, sgx);
            if (aw) aw[i] = fma(d, xh, aw[i]);
            if (ab) ab[i] += d;
        }
        const double a = sg / (double)N, cc = sgx / (double)N;
        const __m256d va = _mm256_set1_pd(a), vc = _mm256_set1_pd(cc);
        for (int64_t i = 0; i < nv; i += 4) {
            const __m256d ga = _mm256_sub_pd(_mm256_loadu_pd(gb + i), va);
            const __m256d v = _mm256_mul_pd(vrs, _mm256_fnmadd_pd(_mm256_loadu_pd(xb + i), vc, ga));
            _mm_storeu_ps(dxr + i, _mm256_cvtpd_ps(v));
        }
        for (int64_t i = nv; i < N; i++) dxr[i] = (float)(rs * fma(-xb[i], cc, gb[i] - a));
    }
}

// The f32 loops on what torc's ISA allows (TORC_MAX_CPU_ISA caps it); every other dtype generic.
static ln_fn pick(torc_dtype xd, bool bw) {
    const int isa = xd == TORC_DTYPE_F32 ? onednn__isa() : ONEDNN_ISA_NONE;
    if (isa >= ONEDNN_ISA_AVX512_CORE) return bw ? bwd_avx512 : fwd_avx512;
    if (isa >= ONEDNN_ISA_AVX2) return bw ? bwd_avx2 : fwd_avx2;
    return bw ? bwd_generic : fwd_generic;
}

// ---- the ops ----
// A backward of one block: dweight and dbias (part, part + N) summed over all rows in order by
// the reference's arithmetic, this thread's range of columns (all of them outside a parallel
// region), the loops generic, their order fixed: the same values whichever thread runs a column.
typedef struct param_args {
    const torc_op *op;
    int64_t M, N;
    double *part;
    bool w, b;
} param_args;

LN_INLINE void param_cols(const char *dyr, const char *xr, double mu, double rs, double *aw, double *ab, int64_t j0,
                          int64_t j1, torc_dtype xd) {
    for (int64_t j = j0; j < j1; j++) {
        const double d = ld(dyr, j, xd);
        if (aw) aw[j] += d * ((ld(xr, j, xd) - mu) * rs);
        if (ab) ab[j] += d;
    }
}

// Compiled for AVX-512, AVX2 and any x86-64: the loop over columns vectorises, each column's
// arithmetic the same in every lane (the values do not depend on the ISA either).
#define PARAM_SUMS(suffix, attr)                                                                         \
    attr static void param_sums_##suffix(const param_args *a) {                                          \
        const torc_op *op = a->op;                                                                       \
        const char *dy = op->in[0].data, *x = op->in[1].data;                                            \
        const void *mean = op->in[2].data, *rstd = op->in[3].data;                                       \
        const torc_dtype xd = op->in[1].dtype, sd = op->in[2].dtype;                                     \
        const size_t xs = torc_abi_dtype_size(xd);                                                       \
        const int64_t N = a->N;                                                                          \
        double *aw = a->w ? a->part : NULL, *ab = a->b ? a->part + N : NULL;                             \
        int64_t j0, j1;                                                                                  \
        onednn__thread_range(N, &j0, &j1);                                                               \
        for (int64_t j = j0; j < j1; j++) a->part[j] = a->part[N + j] = 0.0;                             \
        for (int64_t r = 0; r < a->M; r++) {                                                             \
            const size_t o = (size_t)(r * N) * xs;                                                       \
            const double mu = ld(mean, r, sd), rs = ld(rstd, r, sd);                                     \
            if (xd == TORC_DTYPE_F32) param_cols(dy + o, x + o, mu, rs, aw, ab, j0, j1, TORC_DTYPE_F32); \
            else param_cols(dy + o, x + o, mu, rs, aw, ab, j0, j1, xd);                                  \
        }                                                                                                \
    }
PARAM_SUMS(avx512, LN_AVX512)
PARAM_SUMS(avx2, LN_AVX2)
PARAM_SUMS(any, )

static void param_sums(const param_args *a) {
    const int isa = onednn__isa();
    if (isa >= ONEDNN_ISA_AVX512_CORE) param_sums_avx512(a);
    else if (isa >= ONEDNN_ISA_AVX2) param_sums_avx2(a);
    else param_sums_any(a);
}

// The backward's rows per block: the unit of work a thread takes, and of dweight and dbias:
// each block sums its rows in order into partial sums of its own, added in block order after.
// The blocks depend on the shape only, so the sums do not depend on the thread count: 64 rows
// or more, at most 64 blocks, at most 2^20 doubles of partials a parameter (very long rows run
// as fewer blocks). One block (64 rows or fewer, or rows of 2^19 elements or more) of a
// parallel op takes param_sums instead, so that its rows still spread over the threads (both
// choices are the shape's).
static int64_t block_rows(int64_t M, int64_t N) {
    int64_t nb = (M + 63) / 64;
    if (nb > 64) nb = 64;
    const int64_t cap = N > 0 ? (INT64_C(1) << 20) / N : 64;
    if (nb > cap) nb = cap;
    if (nb < 1) nb = 1;
    return M > 0 ? (M + nb - 1) / nb : 1;
}

int onednn__layer_norm_run(const torc_op *op) {
    const bool bw = is_backward(op);
    const uint32_t affine = op->params.norm.affine;
    int64_t M, N;
    rows_of(op, &M, &N);
    const torc_dtype xd = op->in[bw ? 1 : 0].dtype;
    const ln_fn fn = pick(xd, bw);
    const bool simd = fn != fwd_generic && fn != bwd_generic;
    const bool par = M * N >= ONEDNN_SMALL_STREAM;
    const int nthr = par ? omp_get_max_threads() : 1;
    // The forward's blocks change no value: 16 rows, fewer where there are few rows a thread.
    int64_t rb = bw ? block_rows(M, N) : M / (2 * nthr);
    if (!bw) rb = rb < 1 ? 1 : rb > 16 ? 16 : rb;
    const int64_t nb = (M + rb - 1) / rb, np = (N + 7) & ~(int64_t)7;
    const void *w = affine & 1 ? op->in[bw ? 4 : 1].data : NULL;
    const void *b = !bw && affine & 2 ? op->in[1 + (affine & 1)].data : NULL;
    void *dw = bw && affine & 1 ? op->out[1].data : NULL;
    void *db = bw && affine & 2 ? op->out[1 + (affine & 1)].data : NULL;
    const torc_dtype pd = bw ? (w ? op->in[4].dtype : op->n_out > 1 ? op->out[1].dtype : xd)
                             : (op->n_in > 1 ? op->in[1].dtype : xd);
    // Scratch, in doubles: weight and bias (np each), each thread's row buffer (2 np), then the
    // backward's partial sums (2 N a block: block k's dweight at 2 N k, its dbias N after).
    const bool sums = (dw || db) && M > 0 && N > 0;
    const size_t nrow = simd ? 2 * (size_t)np * (size_t)(nthr + 1) : 0, npart = sums ? 2 * (size_t)N * (size_t)nb : 0;
    double *scratch = NULL;
    if (nrow + npart > 0 && M > 0) {
        const size_t bytes = ((nrow + npart) * sizeof(double) + 63) / 64 * 64;
        scratch = aligned_alloc(64, bytes);
        if (!scratch) return onednn__error(TORC_ERR_OOM, "onednn: %s: out of memory", onednn__op_name(op->code));
    }
    ln_ctx c = {.op = op, .M = M, .N = N, .np = np};
    if (simd && scratch) {
        double *wd = scratch, *bd = scratch + np;
        for (int64_t j = 0; j < np; j++) {
            wd[j] = w && j < N ? ((const float *)w)[j] : 0.0;
            bd[j] = b && j < N ? ((const float *)b)[j] : 0.0;
        }
        c.wd = w ? wd : NULL;
        c.bd = b ? bd : NULL;
    }
    double *part = sums ? scratch + nrow : NULL;
    if (sums && nb == 1 && par) {  // one block: dx a row a task, then the sums a column range a thread
        ONEDNN_FOR(par, r, M, {
            fn(&c, r, r + 1, NULL, NULL, simd ? scratch + 2 * np * (1 + (par ? omp_get_thread_num() : 0)) : NULL);
        });
        const param_args pa = {op, M, N, part, dw != NULL, db != NULL};
        if (par) {
#pragma omp parallel
            param_sums(&pa);
        } else {
            param_sums(&pa);
        }
    } else {
        ONEDNN_FOR(par, k, nb, {
            double *buf = simd && scratch ? scratch + 2 * np * (1 + (par ? omp_get_thread_num() : 0)) : NULL;
            double *aw = part ? part + 2 * N * k : NULL;
            if (aw) memset(aw, 0, sizeof(double) * 2 * (size_t)N);
            fn(&c, k * rb, k * rb + rb < M ? k * rb + rb : M, dw ? aw : NULL, db && aw ? aw + N : NULL, buf);
        });
    }
    if (dw || db) {
        for (int64_t k = 1; part && k < nb; k++)
            for (int64_t j = 0; j < 2 * N; j++) part[j] += part[2 * N * k + j];
        for (int64_t j = 0; j < N; j++) {  // no rows: zeros (PyTorch's)
            if (dw) st(dw, j, pd, part ? part[j] : 0.0);
            if (db) st(db, j, pd, part ? part[N + j] : 0.0);
        }
    }
    free(scratch);
    return 0;
}
