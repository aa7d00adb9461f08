// backends/cpu_onednn/attention.c — ATTENTION and ATTENTION_BACKWARD (backend ABI 2.4) on f32, f16
// and bf16: FlashAttention-2's tiles on the CPU, f32 accumulation, memory linear in the sequence.
//
// Names: B batch, H heads, L query rows, S key rows, E the q / k features, Ev the v features; q and
// k are read as scale * q and k, so a score is one dot product (dk = sum ds (scale q) is then exact
// to the formula, dq is scaled once at the end).
// Forward, per (b, h, tile of ATT_BR query rows): over key tiles of ATT_BC rows (only up to the
// diagonal when causal), S = (scale Q) K^T, the online softmax (running max m, running sum l, the
// accumulator rescaled when m grows), O += P V; at the end o = O / l and lse = m + log(l).
// Backward: D_i = do_i . o_i; per (b, h, key tile) dK and dV over the query tiles that see it, P
// recomputed from lse; per (b, h, query tile) dQ over its key tiles. Every output tile is one task
// of one thread, its sums in a fixed order and the tiles fixed by the shape: no atomics, and the
// result does not depend on the thread count. Per thread: tile buffers only (att_ws_floats).
// Operands of any strides (0 too) are converted to f32 while a tile is loaded; outputs rounded once.
// The tile products run on a register-blocked kernel (6 rows x 2 vectors of C, A broadcast, B
// row-major) compiled for AVX-512 and AVX2 + FMA with target attributes and chosen by torc's ISA
// (isa.c: TORC_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA cap it), and as plain C below AVX2; exp is a
// Cephes-style polynomial on the vector paths, expf on the plain one.
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "onednn-impl.h"
#include "torc/convert.h"

#define ATT_BR 64        // query rows per tile
#define ATT_BC 64        // key rows per tile
#define ATT_MAX_E 256    // the largest E and Ev taken (larger: the core composes)
#define ATT_PAD 16       // f32 rows of a tile buffer are padded to this many (one zmm)

static int pad16(int64_t n) { return (int)((n + ATT_PAD - 1) / ATT_PAD * ATT_PAD); }

// ---- the ISA-specific kernels ----
// gemm: C (M x N, row stride ldc) = or += A (M x K; element (i, k) at a[i * ars + k * acs]) x B
// (K x N, row stride ldb); N a multiple of 16, M and K any (0 too).
// rowmax: the largest of x[0 .. n); n a multiple of 16.
// exp_sum: x[j] = exp(x[j] - sub) for j < n, returns their sum (-inf - sub gives 0).
// exp_vec: x[j] = exp(x[j] - sub[j]) for j < n (sub[j] = +inf gives 0).
typedef struct att_isa {
    void (*gemm)(int M, int N, int K, const float *a, int ars, int acs, const float *b, int ldb, float *c, int ldc,
                 int accumulate);
    float (*rowmax)(const float *x, int n);
    float (*exp_sum)(float *x, int n, float sub);
    void (*exp_vec)(float *x, int n, const float *sub);
} att_isa;

// The register tile: mr (<= 6) rows x nv (<= 2) vectors of W columns, accumulated over all of K.
// Called with constant mr and nv (att_tiles below), so the accumulators stay in registers.
#define ATT_TILE_FN(NAME, ATTR, V, W, LOAD, STORE, FMA, SET1, ZERO)                                                 \
    ATTR __attribute__((always_inline)) static inline void NAME(const int mr, const int nv, int K,                    \
                                                                        const float *a, int ars, int acs,             \
                                                                        const float *b, int ldb, float *c, int ldc,   \
                                                                        int accumulate) {                             \
        V s[6][2];                                                                                                    \
        _Pragma("GCC unroll 6") for (int r = 0; r < 6; r++) _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++) {    \
            s[r][v] = ZERO();                                                                                         \
            if (r < mr && v < nv && accumulate) s[r][v] = LOAD(c + r * ldc + v * W);                                 \
        }                                                                                                             \
        for (int k = 0; k < K; k++) {                                                                                 \
            const float *bk = b + (size_t)k * (size_t)ldb;                                                            \
            const V b0 = LOAD(bk), b1 = nv > 1 ? LOAD(bk + W) : ZERO();                                               \
            const float *ak = a + (size_t)k * (size_t)acs;                                                            \
            _Pragma("GCC unroll 6") for (int r = 0; r < 6; r++) if (r < mr) {                                        \
                const V av = SET1(ak[r * ars]);                                                                       \
                s[r][0] = FMA(av, b0, s[r][0]);                                                                       \
                if (nv > 1) s[r][1] = FMA(av, b1, s[r][1]);                                                           \
            }                                                                                                         \
        }                                                                                                             \
        _Pragma("GCC unroll 6") for (int r = 0; r < 6; r++) _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++)      \
            if (r < mr && v < nv) STORE(c + r * ldc + v * W, s[r][v]);                                                \
    }

// The driver: 6-row blocks of C, each across N in steps of 2 vectors (a last single one).
#define ATT_GEMM_FN(NAME, TILE, ATTR, W)                                                                             \
    ATTR static void NAME(int M, int N, int K, const float *a, int ars, int acs,                                      \
                                                  const float *b, int ldb, float *c, int ldc, int accumulate) {       \
        for (int i = 0; i < M; i += 6) {                                                                              \
            const int mr = M - i < 6 ? M - i : 6;                                                                     \
            const float *ai = a + (size_t)i * (size_t)ars;                                                            \
            float *ci = c + (size_t)i * (size_t)ldc;                                                                  \
            for (int j = 0; j < N; j += 2 * W) {                                                                      \
                const int nv = N - j >= 2 * W ? 2 : 1;                                                                \
                switch (mr * 2 + nv) {                                                                                \
                case 14: TILE(6, 2, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                    \
                case 13: TILE(6, 1, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                    \
                case 12: TILE(5, 2, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                    \
                case 11: TILE(5, 1, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                    \
                case 10: TILE(4, 2, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                    \
                case 9: TILE(4, 1, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                     \
                case 8: TILE(3, 2, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                     \
                case 7: TILE(3, 1, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                     \
                case 6: TILE(2, 2, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                     \
                case 5: TILE(2, 1, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                     \
                case 4: TILE(1, 2, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                     \
                default: TILE(1, 1, K, ai, ars, acs, b + j, ldb, ci + j, ldc, accumulate); break;                    \
                }                                                                                                     \
            }                                                                                                         \
        }                                                                                                             \
    }

// exp(x) = 2^n p(r), n = round(x log2(e)), r = x - n ln(2) in two parts, p Cephes' expf polynomial
// (within 2 ulp of expf on [-87, 88]).
#define ATT_EXP_C1 0.693359375f
#define ATT_EXP_C2 -2.12194440e-4f
#define ATT_EXP_POLY(FMA, SET1, r)                                                                                   \
    FMA(FMA(FMA(FMA(FMA(SET1(1.9875691500e-4f), r, SET1(1.3981999507e-3f)), r, SET1(8.3334519073e-3f)), r,          \
                SET1(4.1665795894e-2f)),                                                                             \
            r, SET1(1.6666665459e-1f)),                                                                              \
        r, SET1(5.0000001201e-1f))

// ---- AVX-512 ----
#define TGT512 "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"
#define L512(p) _mm512_loadu_ps(p)
#define S512(p, v) _mm512_storeu_ps((p), (v))
#define F512(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define B512(x) _mm512_set1_ps(x)
#define Z512() _mm512_setzero_ps()
ATT_TILE_FN(tile512, __attribute__((target(TGT512))), __m512, 16, L512, S512, F512, B512, Z512)
ATT_GEMM_FN(gemm512, tile512, __attribute__((target(TGT512))), 16)

// Below -110, exp underflows to 0 through scalef; NaN passes through (max / min return x for NaN x).
__attribute__((target(TGT512), always_inline)) static inline __m512 exp512(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-110.0f), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ATT_EXP_C1), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ATT_EXP_C2), r);
    const __m512 p = ATT_EXP_POLY(F512, B512, r);  // exp(r) = 1 + r + r^2 p(r)
    const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(y, n);
}

__attribute__((target(TGT512))) static float rowmax512(const float *x, int n) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + j));
    return _mm512_reduce_max_ps(m);
}
__attribute__((target(TGT512))) static float exp_sum512(float *x, int n, float sub) {
    const __m512 s = _mm512_set1_ps(sub);
    __m512 acc = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
        const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), s));
        _mm512_storeu_ps(x + j, e);
        acc = _mm512_add_ps(acc, e);
    }
    return _mm512_reduce_add_ps(acc);
}
__attribute__((target(TGT512))) static void exp_vec512(float *x, int n, const float *sub) {
    for (int j = 0; j < n; j += 16)
        _mm512_storeu_ps(x + j, exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), _mm512_loadu_ps(sub + j))));
}

// ---- AVX2 + FMA ----
#define TGT256 "avx2,fma"
#define L256(p) _mm256_loadu_ps(p)
#define S256(p, v) _mm256_storeu_ps((p), (v))
#define F256(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define B256(x) _mm256_set1_ps(x)
#define Z256() _mm256_setzero_ps()
ATT_TILE_FN(tile256, __attribute__((target(TGT256))), __m256, 8, L256, S256, F256, B256, Z256)
ATT_GEMM_FN(gemm256, tile256, __attribute__((target(TGT256))), 8)

// Below -87.3 (where 2^n would leave the normal range) the result is 0; NaN passes through.
__attribute__((target(TGT256), always_inline)) static inline __m256 exp256(__m256 x) {
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q), under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
    const __m256 xc = _mm256_min_ps(_mm256_set1_ps(88.3f), _mm256_max_ps(_mm256_set1_ps(-87.3f), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(ATT_EXP_C1), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(ATT_EXP_C2), r);
    const __m256 p = ATT_EXP_POLY(F256, B256, r);
    const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 v = _mm256_andnot_ps(under, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
    return _mm256_blendv_ps(v, x, nan);
}

__attribute__((target(TGT256))) static float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
__attribute__((target(TGT256))) static float rowmax256(const float *x, int n) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (int j = 0; j < n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + j));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
__attribute__((target(TGT256))) static float exp_sum256(float *x, int n, float sub) {
    const __m256 s = _mm256_set1_ps(sub);
    __m256 acc = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8) {
        const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + j), s));
        _mm256_storeu_ps(x + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    return hsum256(acc);
}
__attribute__((target(TGT256))) static void exp_vec256(float *x, int n, const float *sub) {
    for (int j = 0; j < n; j += 8)
        _mm256_storeu_ps(x + j, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(sub + j))));
}

// ---- plain C, below AVX2 ----
#define LC(p) (*(p))
#define SC(p, v) (*(p) = (v))
#define FC(a, b, c) ((a) * (b) + (c))
#define BC1(x) (x)
#define ZC() 0.0f
ATT_TILE_FN(tile_c, , float, 1, LC, SC, FC, BC1, ZC)
// A 6 x 2 tile of scalars: the plain path's C is walked two columns at a time (N is even).
ATT_GEMM_FN(gemm_c, tile_c, , 1)

static float rowmax_c(const float *x, int n) {
    float m = -INFINITY;
    for (int j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}
static float exp_sum_c(float *x, int n, float sub) {
    float acc = 0;
    for (int j = 0; j < n; j++) acc += x[j] = expf(x[j] - sub);
    return acc;
}
static void exp_vec_c(float *x, int n, const float *sub) {
    for (int j = 0; j < n; j++) x[j] = expf(x[j] - sub[j]);
}

static const att_isa k_isa512 = {gemm512, rowmax512, exp_sum512, exp_vec512};
static const att_isa k_isa256 = {gemm256, rowmax256, exp_sum256, exp_vec256};
static const att_isa k_isa_c = {gemm_c, rowmax_c, exp_sum_c, exp_vec_c};

static const att_isa *pick_isa(void) {
    const onednn_isa i = onednn__isa();
    return i >= ONEDNN_ISA_AVX512_CORE ? &k_isa512 : i >= ONEDNN_ISA_AVX2 ? &k_isa256 : &k_isa_c;
}

// ---- which ops ----
bool onednn__attention_takes(const torc_op *op) {
    return op->code == TORC_OP_ATTENTION || op->code == TORC_OP_ATTENTION_BACKWARD;
}

static bool att_dtype(torc_dtype d) { return d == TORC_DTYPE_F32 || d == TORC_DTYPE_F16 || d == TORC_DTYPE_BF16; }

static bool same_bh_rows(const torc_operand *a, const torc_operand *b, int dims) {
    for (int d = 0; d < dims; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

int onednn__attention_check(const torc_op *op) {
    const bool bw = op->code == TORC_OP_ATTENTION_BACKWARD;
    const char *name = onednn__op_name(op->code);
    if (op->n_in != (bw ? 6 : 3) || op->n_out != (bw ? 3 : 2))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s: unexpected operand counts (the reference says why)",
                             name);
    int st = 0;
    for (int i = 0; i < op->n_in && !st; i++) st = onednn__check_operand(&op->in[i], "in");
    for (int i = 0; i < op->n_out && !st; i++) st = onednn__check_operand(&op->out[i], "out");
    if (st) return st;
    const torc_operand *q = &op->in[bw], *k = &op->in[bw + 1], *v = &op->in[bw + 2];
    const torc_operand *o = bw ? &op->in[4] : &op->out[0], *lse = bw ? &op->in[5] : &op->out[1];
    const torc_dtype t = q->dtype;
    if (!att_dtype(t))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs float32, bfloat16 and float16 (%s goes to the "
                             "composed path)", name, t == TORC_DTYPE_F64 ? "float64" : "this dtype");
    bool ok = lse->dtype == TORC_DTYPE_F32;
    for (int i = 0; i < op->n_in; i++) ok = ok && (&op->in[i] == lse || op->in[i].dtype == t);
    for (int i = 0; i < op->n_out; i++) ok = ok && (&op->out[i] == lse || op->out[i].dtype == t);
    // The shapes: q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev), o (B, H, L, Ev), lse (B, H, L),
    // and the gradients their operands' (a mismatch goes to the reference, which says what is wrong).
    ok = ok && q->ndim == 4 && k->ndim == 4 && v->ndim == 4 && o->ndim == 4 && lse->ndim == 3 &&
         same_bh_rows(q, k, 2) && same_bh_rows(q, v, 2) && k->shape[3] == q->shape[3] && v->shape[2] == k->shape[2] &&
         same_bh_rows(o, q, 3) && o->shape[3] == v->shape[3] && same_bh_rows(lse, q, 3);
    if (ok && bw)
        ok = op->in[0].ndim == 4 && same_bh_rows(&op->in[0], o, 4) && op->out[0].ndim == 4 &&
             same_bh_rows(&op->out[0], q, 4) && op->out[1].ndim == 4 && same_bh_rows(&op->out[1], k, 4) &&
             op->out[2].ndim == 4 && same_bh_rows(&op->out[2], v, 4);
    if (!ok)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s: dtypes or shapes outside the op's contract (the "
                             "reference says what is wrong)", name);
    if (q->shape[3] > ATT_MAX_E || v->shape[3] > ATT_MAX_E)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs head sizes up to %d (E = %lld, Ev = %lld: the "
                             "core composes it)", name, ATT_MAX_E, (long long)q->shape[3], (long long)v->shape[3]);
    if (q->shape[2] > INT32_MAX || k->shape[2] > INT32_MAX)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s: more than 2^31 rows", name);
    return 0;
}

// ---- tiles in and out ----
typedef struct att_job {
    const torc_op *op;
    const att_isa *isa;
    int64_t B, H, L, S;
    int E, Ev, Ep, Evp;  // Ep, Evp: E, Ev padded to 16
    float scale;
    bool causal;
    int64_t nqt, nkt;    // query and key tiles per (b, h)
} att_job;

static inline float load1(const char *p, torc_dtype t) {
    switch (t) {
    case TORC_DTYPE_F16: return torc_f16_to_f32(*(const uint16_t *)p);
    case TORC_DTYPE_BF16: return torc_bf16_to_f32(*(const uint16_t *)p);
    default: return *(const float *)p;
    }
}
static inline void store1(char *p, torc_dtype t, float x) {
    switch (t) {
    case TORC_DTYPE_F16: *(uint16_t *)p = torc_f32_to_f16(x); break;
    case TORC_DTYPE_BF16: *(uint16_t *)p = torc_f32_to_bf16(x); break;
    default: *(float *)p = x; break;
    }
}
static inline const char *row_at(const torc_operand *t, int64_t b, int64_t h, int64_t r) {
    return (const char *)t->data +
           (b * t->stride[0] + h * t->stride[1] + r * t->stride[2]) * (int64_t)torc_abi_dtype_size(t->dtype);
}

// Rows r0 .. r0 + nr of t at (b, h), times mul, as f32: row-major (dst[r * ld + e], the columns
// from t's features to ld zeroed) or transposed (dst[e * ld + r], the columns from nr to ld zeroed).
static void load_tile(const torc_operand *t, int64_t b, int64_t h, int64_t r0, int nr, float mul, float *dst, int ld,
                      bool transposed) {
    const int ne = (int)t->shape[3];
    const int64_t es = t->stride[3] * (int64_t)torc_abi_dtype_size(t->dtype);
    const torc_dtype dt = t->dtype;
    if (transposed) {
        for (int e = 0; e < ne; e++) memset(dst + (size_t)e * ld + nr, 0, sizeof(float) * (size_t)(ld - nr));
    }
    for (int r = 0; r < nr; r++) {
        const char *src = row_at(t, b, h, r0 + r);
        if (!transposed) {
            float *d = dst + (size_t)r * ld;
            if (dt == TORC_DTYPE_F32 && t->stride[3] == 1)
                for (int e = 0; e < ne; e++) d[e] = ((const float *)src)[e] * mul;
            else if (dt == TORC_DTYPE_BF16 && t->stride[3] == 1)
                for (int e = 0; e < ne; e++) d[e] = torc_bf16_to_f32(((const uint16_t *)src)[e]) * mul;
            else
                for (int e = 0; e < ne; e++) d[e] = load1(src + e * es, dt) * mul;
            for (int e = ne; e < ld; e++) d[e] = 0;
        } else {
            for (int e = 0; e < ne; e++) dst[(size_t)e * ld + r] = load1(src + e * es, dt) * mul;
        }
    }
}

// Rows of an f32 tile (row stride ld) times mul, rounded once into t's rows r0 .. r0 + nr at (b, h).
static void store_tile(const torc_operand *t, int64_t b, int64_t h, int64_t r0, int nr, const float *src, int ld,
                       float mul) {
    const int ne = (int)t->shape[3];
    const int64_t es = t->stride[3] * (int64_t)torc_abi_dtype_size(t->dtype);
    for (int r = 0; r < nr; r++) {
        char *d = (char *)row_at(t, b, h, r0 + r);
        const float *s = src + (size_t)r * ld;
        if (t->dtype == TORC_DTYPE_F32 && t->stride[3] == 1)
            for (int e = 0; e < ne; e++) ((float *)d)[e] = s[e] * mul;
        else
            for (int e = 0; e < ne; e++) store1(d + e * es, t->dtype, s[e] * mul);
    }
}

// The keys query row i attends: 0 .. attended(i) - 1 (top-left aligned when causal, as PyTorch).
static inline int64_t attended(const att_job *j, int64_t i) { return j->causal ? (i + 1 < j->S ? i + 1 : j->S) : j->S; }

// The floats one thread's tiles take: the largest of the three tasks' sets.
static size_t att_ws_floats(const att_job *j) {
    const size_t br = ATT_BR, bc = ATT_BC, ep = (size_t)j->Ep, evp = (size_t)j->Evp;
    const size_t fwd = br * ep + ep * bc + bc * evp + br * bc + br * evp + 2 * br;
    const size_t dkv = bc * ep + bc * evp + ep * br + br * ep + evp * br + br * evp + 2 * br + 2 * bc * br + bc * ep +
                       bc * evp;
    const size_t dq = br * ep + br * evp + ep * bc + evp * bc + bc * ep + 2 * br * bc + br * ep + 2 * br;
    const size_t m = fwd > dkv ? fwd : dkv;
    return (m > dq ? m : dq) + 16 * 16;  // + room to start each buffer on a cache line
}

// Carves n floats off *w, 64-byte aligned.
static float *carve(float **w, size_t n) {
    float *p = *w;
    *w += (n + 15) / 16 * 16;
    return p;
}

// ---- forward: one (b, h, query tile) ----
static void forward_tile(const att_job *j, float *w, int64_t task) {
    const torc_op *op = j->op;
    const torc_operand *q = &op->in[0], *k = &op->in[1], *v = &op->in[2], *o = &op->out[0], *lse = &op->out[1];
    const int64_t bh = task / j->nqt, i0 = task % j->nqt * ATT_BR, b = bh / j->H, h = bh % j->H;
    const int br = (int)(j->L - i0 < ATT_BR ? j->L - i0 : ATT_BR), E = j->E, Ep = j->Ep, Evp = j->Evp;
    float *Q = carve(&w, (size_t)ATT_BR * Ep), *Kt = carve(&w, (size_t)Ep * ATT_BC), *V = carve(&w, (size_t)ATT_BC * Evp),
          *Sc = carve(&w, (size_t)ATT_BR * ATT_BC), *O = carve(&w, (size_t)ATT_BR * Evp), *m = carve(&w, ATT_BR),
          *l = carve(&w, ATT_BR);
    load_tile(q, b, h, i0, br, j->scale, Q, Ep, false);
    memset(O, 0, sizeof(float) * (size_t)br * Evp);
    for (int r = 0; r < br; r++) m[r] = -INFINITY, l[r] = 0;
    const int64_t kend = attended(j, i0 + br - 1);
    for (int64_t j0 = 0; j0 < kend; j0 += ATT_BC) {
        const int bc = (int)(kend - j0 < ATT_BC ? kend - j0 : ATT_BC);
        load_tile(k, b, h, j0, bc, 1.0f, Kt, ATT_BC, true);
        load_tile(v, b, h, j0, bc, 1.0f, V, Evp, false);
        j->isa->gemm(br, ATT_BC, E, Q, Ep, 1, Kt, ATT_BC, Sc, ATT_BC, 0);
        for (int r = 0; r < br; r++) {
            float *s = Sc + (size_t)r * ATT_BC, *orow = O + (size_t)r * Evp;
            const int64_t n = attended(j, i0 + r) - j0;
            const int lim = n <= 0 ? 0 : n < bc ? (int)n : bc;
            for (int c = lim; c < ATT_BC; c++) s[c] = -INFINITY;
            const float mx = lim ? j->isa->rowmax(s, ATT_BC) : -INFINITY, mnew = mx > m[r] ? mx : m[r];
            if (mnew == -INFINITY) {  // no key of this tile (or only -inf scores) for this row
                memset(s, 0, sizeof(float) * ATT_BC);
                continue;
            }
            const float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - mnew);
            const float sum = j->isa->exp_sum(s, ATT_BC, mnew);
            l[r] = l[r] * alpha + sum;
            if (alpha != 1.0f)
                for (int e = 0; e < Evp; e++) orow[e] *= alpha;
            m[r] = mnew;
        }
        j->isa->gemm(br, Evp, bc, Sc, ATT_BC, 1, V, Evp, O, Evp, 1);
    }
    for (int r = 0; r < br; r++) {
        float *orow = O + (size_t)r * Evp;
        const float lr = l[r];
        if (lr > 0)
            for (int e = 0; e < Evp; e++) orow[e] /= lr;
        else
            memset(orow, 0, sizeof(float) * Evp);  // no key attended: o = 0, lse = -inf
        *(float *)row_at(lse, b, h, i0 + r) = lr > 0 ? (float)((double)m[r] + log((double)lr)) : -INFINITY;
    }
    store_tile(o, b, h, i0, br, O, Evp, 1.0f);
}

// ---- backward ----
// A query tile as both backward tasks read it: scale q row-major (Qr) and transposed (Qt, dkv
// only), do row-major and transposed (Dot, dkv only), lse (+inf past the tile: p = 0 there) and
// D_i = do_i . o_i (0 past the tile), in double over the loaded values.
static void load_query_tile(const att_job *j, int64_t b, int64_t h, int64_t i0, int br, float *Qr, float *Qt,
                            float *Dor, float *Dot, float *lse, float *D) {
    const torc_op *op = j->op;
    const torc_operand *dout = &op->in[0], *q = &op->in[1], *o = &op->in[4], *l = &op->in[5];
    load_tile(q, b, h, i0, br, j->scale, Qr, j->Ep, false);
    load_tile(dout, b, h, i0, br, 1.0f, Dor, j->Evp, false);
    if (Qt) load_tile(q, b, h, i0, br, j->scale, Qt, ATT_BR, true);
    if (Dot) load_tile(dout, b, h, i0, br, 1.0f, Dot, ATT_BR, true);
    const int64_t es = o->stride[3] * (int64_t)torc_abi_dtype_size(o->dtype);
    for (int r = 0; r < ATT_BR; r++) {
        if (r >= br) {
            lse[r] = INFINITY, D[r] = 0;
            continue;
        }
        lse[r] = *(const float *)row_at(l, b, h, i0 + r);
        const char *orow = row_at(o, b, h, i0 + r);
        const float *g = Dor + (size_t)r * j->Evp;
        double d = 0;
        for (int e = 0; e < j->Ev; e++) d += (double)g[e] * load1(orow + e * es, o->dtype);
        D[r] = (float)d;
    }
}

// dK and dV of one (b, h, key tile): S^T = K (scale Q)^T and dP^T = V dO^T for every query tile
// that sees it, P^T = exp(S^T - lse), dS^T = P^T (dP^T - D); dV += P^T dO, dK += dS^T (scale Q).
static void dkv_tile(const att_job *j, float *w, int64_t task) {
    const torc_op *op = j->op;
    const torc_operand *k = &op->in[2], *v = &op->in[3], *dk = &op->out[1], *dv = &op->out[2];
    const int64_t bh = task / j->nkt, j0 = task % j->nkt * ATT_BC, b = bh / j->H, h = bh % j->H;
    const int bc = (int)(j->S - j0 < ATT_BC ? j->S - j0 : ATT_BC), E = j->E, Ev = j->Ev, Ep = j->Ep, Evp = j->Evp;
    float *Kr = carve(&w, (size_t)ATT_BC * Ep), *Vr = carve(&w, (size_t)ATT_BC * Evp),
          *Qt = carve(&w, (size_t)Ep * ATT_BR), *Qr = carve(&w, (size_t)ATT_BR * Ep),
          *Dot = carve(&w, (size_t)Evp * ATT_BR), *Dor = carve(&w, (size_t)ATT_BR * Evp), *lse = carve(&w, ATT_BR),
          *D = carve(&w, ATT_BR), *Pt = carve(&w, (size_t)ATT_BC * ATT_BR), *dPt = carve(&w, (size_t)ATT_BC * ATT_BR),
          *dK = carve(&w, (size_t)ATT_BC * Ep), *dV = carve(&w, (size_t)ATT_BC * Evp);
    load_tile(k, b, h, j0, bc, 1.0f, Kr, Ep, false);
    load_tile(v, b, h, j0, bc, 1.0f, Vr, Evp, false);
    memset(dK, 0, sizeof(float) * (size_t)bc * Ep);
    memset(dV, 0, sizeof(float) * (size_t)bc * Evp);
    // Causal: query i sees key j when j <= i, so the query tiles from the one holding row j0.
    for (int64_t i0 = j->causal ? j0 / ATT_BR * ATT_BR : 0; i0 < j->L; i0 += ATT_BR) {
        const int br = (int)(j->L - i0 < ATT_BR ? j->L - i0 : ATT_BR);
        load_query_tile(j, b, h, i0, br, Qr, Qt, Dor, Dot, lse, D);
        j->isa->gemm(bc, ATT_BR, E, Kr, Ep, 1, Qt, ATT_BR, Pt, ATT_BR, 0);
        j->isa->gemm(bc, ATT_BR, Ev, Vr, Evp, 1, Dot, ATT_BR, dPt, ATT_BR, 0);
        for (int c = 0; c < bc; c++) {
            float *p = Pt + (size_t)c * ATT_BR, *ds = dPt + (size_t)c * ATT_BR;
            if (j->causal) {  // rows i < j0 + c of this tile do not see key j0 + c
                const int64_t first = j0 + c - i0;
                for (int r = 0; r < (first < ATT_BR ? (int)first : ATT_BR); r++) p[r] = -INFINITY;
            }
            j->isa->exp_vec(p, ATT_BR, lse);
            for (int r = 0; r < ATT_BR; r++) ds[r] = p[r] * (ds[r] - D[r]);
        }
        j->isa->gemm(bc, Evp, br, Pt, ATT_BR, 1, Dor, Evp, dV, Evp, 1);
        j->isa->gemm(bc, Ep, br, dPt, ATT_BR, 1, Qr, Ep, dK, Ep, 1);
    }
    store_tile(dk, b, h, j0, bc, dK, Ep, 1.0f);
    store_tile(dv, b, h, j0, bc, dV, Evp, 1.0f);
}

// dQ of one (b, h, query tile): S = (scale Q) K^T and dP = dO V^T over its key tiles, P = exp(S -
// lse), dS = P (dP - D), dQ += dS K; dq = scale dQ.
static void dq_tile(const att_job *j, float *w, int64_t task) {
    const torc_op *op = j->op;
    const torc_operand *k = &op->in[2], *v = &op->in[3], *dq = &op->out[0];
    const int64_t bh = task / j->nqt, i0 = task % j->nqt * ATT_BR, b = bh / j->H, h = bh % j->H;
    const int br = (int)(j->L - i0 < ATT_BR ? j->L - i0 : ATT_BR), E = j->E, Ev = j->Ev, Ep = j->Ep, Evp = j->Evp;
    float *Qr = carve(&w, (size_t)ATT_BR * Ep), *Dor = carve(&w, (size_t)ATT_BR * Evp),
          *Kt = carve(&w, (size_t)Ep * ATT_BC), *Vt = carve(&w, (size_t)Evp * ATT_BC),
          *Kr = carve(&w, (size_t)ATT_BC * Ep), *P = carve(&w, (size_t)ATT_BR * ATT_BC),
          *dP = carve(&w, (size_t)ATT_BR * ATT_BC), *dQ = carve(&w, (size_t)ATT_BR * Ep), *lse = carve(&w, ATT_BR),
          *D = carve(&w, ATT_BR);
    load_query_tile(j, b, h, i0, br, Qr, NULL, Dor, NULL, lse, D);
    memset(dQ, 0, sizeof(float) * (size_t)br * Ep);
    const int64_t kend = attended(j, i0 + br - 1);
    for (int64_t j0 = 0; j0 < kend; j0 += ATT_BC) {
        const int bc = (int)(kend - j0 < ATT_BC ? kend - j0 : ATT_BC);
        load_tile(k, b, h, j0, bc, 1.0f, Kt, ATT_BC, true);
        load_tile(v, b, h, j0, bc, 1.0f, Vt, ATT_BC, true);
        load_tile(k, b, h, j0, bc, 1.0f, Kr, Ep, false);
        j->isa->gemm(br, ATT_BC, E, Qr, Ep, 1, Kt, ATT_BC, P, ATT_BC, 0);
        j->isa->gemm(br, ATT_BC, Ev, Dor, Evp, 1, Vt, ATT_BC, dP, ATT_BC, 0);
        for (int r = 0; r < br; r++) {
            float *p = P + (size_t)r * ATT_BC, *ds = dP + (size_t)r * ATT_BC;
            const int64_t n = attended(j, i0 + r) - j0;
            const int lim = n <= 0 ? 0 : n < bc ? (int)n : bc;
            for (int c = lim; c < ATT_BC; c++) p[c] = -INFINITY;
            j->isa->exp_sum(p, ATT_BC, lse[r]);
            const float Dr = D[r];
            for (int c = 0; c < ATT_BC; c++) ds[c] = p[c] * (ds[c] - Dr);
        }
        j->isa->gemm(br, Ep, bc, dP, ATT_BC, 1, Kr, Ep, dQ, Ep, 1);
    }
    store_tile(dq, b, h, i0, br, dQ, Ep, j->scale);
}

// ---- the tasks on the thread pool ----
// Forward: B H nqt tasks; backward: B H nkt dK / dV tasks, then B H nqt dQ tasks (one loop, so a
// thread that finishes its key tiles takes query tiles). Each task writes its own rows only.
static void run_task(const att_job *j, float *w, int64_t t) {
    if (j->op->code == TORC_OP_ATTENTION) forward_tile(j, w, t);
    else if (t < j->B * j->H * j->nkt) dkv_tile(j, w, t);
    else dq_tile(j, w, t - j->B * j->H * j->nkt);
}

int onednn__attention_run(const torc_op *op) {
    const bool bw = op->code == TORC_OP_ATTENTION_BACKWARD;
    const torc_operand *q = &op->in[bw], *k = &op->in[bw + 1], *v = &op->in[bw + 2];
    att_job j = {.op = op, .isa = pick_isa(), .B = q->shape[0], .H = q->shape[1], .L = q->shape[2], .S = k->shape[2],
                 .E = (int)q->shape[3], .Ev = (int)v->shape[3], .scale = (float)op->params.attention.scale,
                 .causal = op->params.attention.causal != 0};
    j.Ep = pad16(j.E), j.Evp = pad16(j.Ev);
    j.nqt = (j.L + ATT_BR - 1) / ATT_BR, j.nkt = (j.S + ATT_BC - 1) / ATT_BC;
    const int64_t ntasks = j.B * j.H * (bw ? j.nkt + j.nqt : j.nqt);
    if (ntasks == 0) return 0;
    // Multiply-adds, roughly: L S (E + Ev) forward, about 3.5 times that backward.
    const double work = (double)(j.B * j.H) * (double)j.L * (double)j.S * (double)(j.E + j.Ev) * (bw ? 3.5 : 1.0);
    const bool par = ntasks > 1 && work >= (double)ONEDNN_SMALL_WORK && omp_get_max_threads() > 1;
    const size_t ws = att_ws_floats(&j) * sizeof(float);
    atomic_bool oom = false;
    if (!par) {
        float *w = aligned_alloc(64, (ws + 63) / 64 * 64);
        if (!w) return onednn__error(TORC_ERR_OOM, "onednn: %s: out of memory for %zu bytes of tiles",
                                     onednn__op_name(op->code), ws);
        for (int64_t t = 0; t < ntasks; t++) run_task(&j, w, t);
        free(w);
        return 0;
    }
#pragma omp parallel
    {
        float *w = aligned_alloc(64, (ws + 63) / 64 * 64);
        if (!w) atomic_store(&oom, true);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < ntasks; t++)
            if (w) run_task(&j, w, t);
        free(w);
    }
    if (atomic_load(&oom))  // a thread without tiles skipped the tasks it took
        return onednn__error(TORC_ERR_OOM, "onednn: %s: out of memory for %zu bytes of tiles a thread",
                             onednn__op_name(op->code), ws);
    return 0;
}
