// backends/cpu_onednn/attention.c — ATTENTION and ATTENTION_BACKWARD (backend ABI 2.4) on f32, f16
// and bf16: FlashAttention-2's tiles on the CPU, f32 accumulation, memory linear in the sequence.
//
// Names: B batch, H heads, L query rows, S key rows, E the q / k features, Ev the v features; q and
// k are read as scale * q and k, so a score is one dot product (dk = sum ds (scale q) is then exact
// to the formula, dq is scaled once at the end).
// Forward, per (b, h, tile of ATT_BR query rows): over key tiles of ATT_BC rows (only up to the
// diagonal when causal), S^T = K (scale Q)^T, the online softmax down each query's column (running
// max m, running sum l, the accumulator rescaled when m grows), O += P V; at the end o = O / l and
// lse = m + log(l). Backward, in one pass where B H tasks keep the threads busy (one_pass): per
// (b, h), D_i = do_i . o_i, then the key tiles in order, each over the query tiles that see it: P
// recomputed from lse, dK and dV of the key tile and dQ of each query tile accumulated (dQ in an
// L x E buffer): 5 tile products and one exp a pair of tiles. Else in two (more, smaller tasks): per
// (b, h, key tile) dK and dV, per (b, h, query tile) dQ over its key tiles: 7 products, two exps.
// Both add the same terms in the same order and give the same bits (onednn_attention_test checks);
// each output is one task of one thread, its sums in a fixed order: no atomics, and the result does
// not depend on the thread count. Per thread: tile buffers (att_ws_floats), the one pass's dQ, scale
// q and do of a (b, h) (L (2 E + Ev) floats); the backward adds D (B H L floats).
// Decode (a forward of at most ATT_DEC_L query rows, a sampler's step against its KV cache): per
// (b, h), each key's scores as L dot products, the online softmax along the rows, O += P V with L
// rows; keys and values of dense rows read where they lie: f32 rows, and from AVX2 up bf16 and f16
// rows converted in registers (exact: the bits of the f32 tiles they were converted into before),
// each row's scores 4 keys at a time summed across lanes together. Config B's sampler (6 layers x 6
// heads, E 64) at 900 cached positions on one Sapphire Rapids core: its attention 5.3-5.5 ms a token
// as 64-row query tiles, 1.7-1.9 with this path (streaming the 16.6 MB of keys and values alone:
// 1.4 ms). The 16-bit rows in registers and the 4-key sums (torc_scaled_dot_product_attention
// alone, one query over 900 cached keys, every layer's cache in turn so that it comes from L3; a
// Sapphire / Emerald Rapids class Xeon, one core, min of 40, the builds alternating): B's six layers
// bf16 1.03 -> 0.54 ms, f32 0.95 -> 0.91; A's four (4 heads, E 64) bf16 0.65 -> 0.23, f32 0.43 ->
// 0.34 (a sum over the same f32 bytes: 0.74 and 0.31). Inside a token (the weights streamed between
// one layer's attention and the next) B's bf16 attention at 900 positions took 1.08-1.29 ms before,
// 0.61-0.63 after. Tried, not kept: software prefetch of the next tile's rows (all at once, or 16
// keys' rows between 16 keys' dot products): 10-20% faster from DRAM, 10% slower from L3, no change
// inside a token; 256-key tiles: no change.
// Operands of any strides (0 too) are converted to f32 a row at a time while a tile is loaded, each
// tile in the layout its products want: the tile a task keeps (its Q, or its K and V) transposed
// once, the tiles it streams through read as they lie (dense f32 rows of 16k features where they
// are), else converted for each task that streams them. Outputs are rounded once, dense bf16 and f16
// rows by the cast loops (cast.c). On the causal diagonal the products skip the masked entries.
// The tile products run on a register-blocked kernel (6 rows x 2 vectors of C, A broadcast, B
// row-major) compiled for AVX-512 and AVX2 + FMA with target attributes and chosen by torc's ISA
// (isa.c: TORC_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA cap it), and below AVX2 in plain C on GCC's generic
// 4-float vectors (SSE2; the B 4, H 6, T 256 causal pair 159 -> 69-82 ms with scalars' 6 x 2 tile);
// exp is a Cephes-style polynomial on the AVX paths, expf on the plain one. A 64 x 64 score tile from L1
// on one Sapphire Rapids core: this kernel 159-162 GFLOP/s for E = 32, 64, 128 (AVX2: 81), 4 x 4
// blocks of 16-wide dot products summed across lanes 28, 48, 74.
// B 4, H 6, T 256, E 64 causal f32 on one core of a shared Sapphire Rapids class Xeon
// (TORC_NUM_THREADS=1 FUSED_ONLY=1 onednn_attention_bench 256 20, alternating with the two-pass
// build): forward+backward 9.0-9.7 ms against 13.6-14.9, the forward 2.75-3.0 against 3.4-3.8 (72
// against 59 GFLOP/s of its 201 M), the backward 6.2-6.7 against 10.1-11.1 (80 against 48 GFLOP/s
// of FlashAttention-2's 2.5 forwards). The kernel takes 56% of it, the tile loads and D 17% (mostly
// waiting for the operands' first reads from memory), the stores 8%, exp 7%.
// bf16 and f16 cost what f32 does, or less (half the bytes to read and write), on the same core
// (an Intel Xeon of the Sapphire / Emerald Rapids class: AVX-512 BF16 / FP16, AMX; onednn_attention_bench
// 256 20 1 f32,bf16,f16 dense|split, each rep every dtype in turn, alternating with the build that
// rounded outputs through store1; min-median of 8): forward+backward, dense q, k, v: f32 9.7-10.2 ms,
// bf16 9.1-9.5 (before: 11.0-11.4), f16 9.0-9.4 (12.3-12.7); GPT's split heads: f32 10.7-11.0, bf16
// 9.5-9.7 (11.6-12.0), f16 9.3-9.6 (13.0-13.3). bf16 dense forward 3.1-3.2 (3.5-3.6), backward
// 6.0-6.2 (7.5-7.7).
// Tried and not kept, with no gain past the noise: each thread holding the f32 rows of the (b, h)
// it streams, converted once (the forward's K and V, a task a (b, h), instead of once a query tile
// that reads them; the two passes' Q, dO, K, V): bf16 split forward 2.9-3.1 ms against 2.9-3.2 at
// T 256, 37.6 against 37.2-38.8 at T 1024, the two passes' backward 8.7-9.6 against 8.6-9.0; the rows
// converted in AVX-512 vectors instead of SSE2's: forward+backward 8.8-9.5 either way. The
// conversions are 1/64 of the products' elements; rounding the outputs one element at a time was
// the difference.
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "onednn-impl.h"
#include "torc/convert.h"
#include "vec16.h"

#define ATT_BR 64        // query rows per tile
#define ATT_BC 64        // key rows per tile
#define ATT_MAX_E 256    // the largest E and Ev taken (larger: the core composes)
#define ATT_PAD 16       // f32 rows of a tile buffer are padded to this many (one zmm)
#define ATT_DEC_L 4      // forward with at most this many query rows: the decode path (dots, not tiles)

static int pad16(int64_t n) { return (int)((n + ATT_PAD - 1) / ATT_PAD * ATT_PAD); }

// ---- the ISA-specific kernels ----
// gemm: C (M x N, row stride ldc) = or += A (M x K; element (i, k) at a[i * ars + k * acs]) x B
// (K x N, row stride ldb); N a multiple of 16, M and K any (0 too).
// The rest take n a multiple of 16:
// colmax: m[i] = max(m[i], x[r * ld + i]) over rows r < rows, for i < n.
// exp_row: x[j] = exp(x[j] - sub) for j < n (-inf - sub gives 0).
// exp_vec: x[j] = exp(x[j] - sub[j]) for j < n (sub[j] = +inf gives 0); acc[j] += x[j] where acc.
// dots: s[i * lds + c] = q_i . k_c (q_i at q + i * ldq, k_c at k + c * ldk, n features) for i < nq
// (<= ATT_DEC_L), c < nk: the decode path's scores, one vector sum reduced across lanes a key.
typedef struct att_isa {
    void (*gemm)(int M, int N, int K, const float *a, int ars, int acs, const float *b, int ldb, float *c, int ldc,
                 int accumulate);
    void (*colmax)(const float *x, int rows, int ld, int n, float *m);
    void (*exp_row)(float *x, int n, float sub);
    void (*exp_vec)(float *x, int n, const float *sub, float *acc);
    void (*dots)(const float *q, int nq, int ldq, const float *k, int nk, int ldk, int n, float *s, int lds);
    // The decode path over dense bf16 / f16 keys and values read as they lie (AVX-512 and AVX2;
    // NULL below): dots_h as dots over n padded features of keys with e real ones (row stride ldk
    // elements), pv_h as gemm(nq, n, nk, p, ldp, 1, v, ldv, o, ldo, 1) over values with e real
    // features; the 16-bit rows converted in registers, the same products in the same order.
    void (*dots_h)(const float *q, int nq, int ldq, const uint16_t *k, int nk, int64_t ldk, int e, int n, bool f16,
                   float *s, int lds);
    void (*pv_h)(const float *p, int nq, int ldp, const uint16_t *v, int nk, int64_t ldv, int e, int n, bool f16,
                 float *o, int ldo);
} att_isa;

// The register tile: mr (<= 6) rows x nv (<= 2) vectors of W columns, accumulated over all of K.
// Called with constant mr and nv (by the driver below), so the accumulators stay in registers.
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

// The decode path's scores: per key, one accumulator a query row over the features (the key's
// vectors loaded once for all rows), then summed across lanes in a fixed order.
#define ATT_DOTS_FN(NAME, ATTR, V, W, LOAD, FMA, ZERO, REDUCE)                                                        \
    ATTR static void NAME(const float *q, int nq, int ldq, const float *k, int nk, int ldk, int n, float *s,         \
                          int lds) {                                                                                  \
        for (int c = 0; c < nk; c++) {                                                                                \
            const float *kc = k + (size_t)c * (size_t)ldk;                                                            \
            V acc[ATT_DEC_L];                                                                                         \
            _Pragma("GCC unroll 4") for (int r = 0; r < ATT_DEC_L; r++) acc[r] = ZERO();                            \
            for (int e = 0; e < n; e += W) {                                                                          \
                const V kv = LOAD(kc + e);                                                                            \
                _Pragma("GCC unroll 4") for (int r = 0; r < ATT_DEC_L; r++) if (r < nq) acc[r] =                     \
                    FMA(LOAD(q + (size_t)r * (size_t)ldq + e), kv, acc[r]);                                           \
            }                                                                                                         \
            _Pragma("GCC unroll 4") for (int r = 0; r < ATT_DEC_L; r++) if (r < nq) s[(size_t)r * (size_t)lds + c] = \
                REDUCE(acc[r]);                                                                                       \
        }                                                                                                             \
    }

// The decode path's kernels on AVX-512 and AVX2 (vec16.h's loads: keys and values of f32, bf16
// or f16 rows read as they lie, 16-bit ones converted in registers, exactly):
// dots##SFX / dots_h##SFX: att_isa's dots / dots_h, for nq (constant) query rows, 4 keys at a time,
// each row's 4 accumulators summed across lanes together (single reductions were most of a bf16
// token's attention); pv_h##SFX: blocks of nq rows x up to 4 vectors of O over every key, each O
// element's products added in key order (gemm##SFX's order).
#define ATT_DEC_FNS(SFX, TGT, V, W, ROW, SUM4, REDUCE, LOAD, STORE, FMA, SET1, ZERO)                                \
    __attribute__((target(TGT), always_inline)) static inline void dots_rows##SFX(                                   \
        const int nq, const int kind, const float *q, int ldq, const void *k, int nk, int64_t ldk, int e, int n,       \
        float *s, int lds) {                                                                                          \
        const size_t es = kind ? 2 : 4;                                                                               \
        int c = 0;                                                                                                    \
        for (; c + 4 <= nk; c += 4) {                                                                                 \
            const char *kc = (const char *)k + (size_t)c * (size_t)ldk * es;                                          \
            V acc[ATT_DEC_L][4];                                                                                      \
            for (int r = 0; r < ATT_DEC_L; r++)                                                                       \
                for (int i = 0; i < 4; i++) acc[r][i] = ZERO();                                                       \
            for (int f = 0; f < n; f += W)                                                                            \
                for (int i = 0; i < 4; i++) {                                                                         \
                    const V kv = ROW(kind, kc + (size_t)i * (size_t)ldk * es, f, e);                                 \
                    for (int r = 0; r < ATT_DEC_L; r++)                                                               \
                        if (r < nq) acc[r][i] = FMA(LOAD(q + (size_t)r * (size_t)ldq + f), kv, acc[r][i]);           \
                }                                                                                                     \
            for (int r = 0; r < ATT_DEC_L; r++)                                                                       \
                if (r < nq)                                                                                           \
                    _mm_storeu_ps(s + (size_t)r * (size_t)lds + c, SUM4(acc[r][0], acc[r][1], acc[r][2], acc[r][3])); \
        }                                                                                                             \
        for (; c < nk; c++) {                                                                                         \
            const char *kc = (const char *)k + (size_t)c * (size_t)ldk * es;                                          \
            V acc[ATT_DEC_L];                                                                                         \
            for (int r = 0; r < ATT_DEC_L; r++) acc[r] = ZERO();                                                      \
            for (int f = 0; f < n; f += W) {                                                                          \
                const V kv = ROW(kind, kc, f, e);                                                                     \
                for (int r = 0; r < ATT_DEC_L; r++)                                                                   \
                    if (r < nq) acc[r] = FMA(LOAD(q + (size_t)r * (size_t)ldq + f), kv, acc[r]);                     \
            }                                                                                                         \
            for (int r = 0; r < ATT_DEC_L; r++)                                                                       \
                if (r < nq) s[(size_t)r * (size_t)lds + c] = REDUCE(acc[r]);                                          \
        }                                                                                                             \
    }                                                                                                                 \
    __attribute__((target(TGT))) static void dots_k##SFX(int kind, const float *q, int nq, int ldq, const void *k,    \
                                                         int nk, int64_t ldk, int e, int n, float *s, int lds) {     \
        switch (nq * 4 + kind) {                                                                                      \
        case 18: dots_rows##SFX(4, 2, q, ldq, k, nk, ldk, e, n, s, lds); break;                                      \
        case 17: dots_rows##SFX(4, 1, q, ldq, k, nk, ldk, e, n, s, lds); break;                                      \
        case 16: dots_rows##SFX(4, 0, q, ldq, k, nk, ldk, e, n, s, lds); break;                                      \
        case 14: dots_rows##SFX(3, 2, q, ldq, k, nk, ldk, e, n, s, lds); break;                                      \
        case 13: dots_rows##SFX(3, 1, q, ldq, k, nk, ldk, e, n, s, lds); break;                                      \
        case 12: dots_rows##SFX(3, 0, q, ldq, k, nk, ldk, e, n, s, lds); break;                                      \
        case 10: dots_rows##SFX(2, 2, q, ldq, k, nk, ldk, e, n, s, lds); break;                                      \
        case 9: dots_rows##SFX(2, 1, q, ldq, k, nk, ldk, e, n, s, lds); break;                                       \
        case 8: dots_rows##SFX(2, 0, q, ldq, k, nk, ldk, e, n, s, lds); break;                                       \
        case 6: dots_rows##SFX(1, 2, q, ldq, k, nk, ldk, e, n, s, lds); break;                                       \
        case 5: dots_rows##SFX(1, 1, q, ldq, k, nk, ldk, e, n, s, lds); break;                                       \
        default: dots_rows##SFX(1, 0, q, ldq, k, nk, ldk, e, n, s, lds); break;                                      \
        }                                                                                                             \
    }                                                                                                                 \
    static void dots##SFX(const float *q, int nq, int ldq, const float *k, int nk, int ldk, int n, float *s,          \
                          int lds) {                                                                                  \
        dots_k##SFX(0, q, nq, ldq, k, nk, ldk, n, n, s, lds);                                                         \
    }                                                                                                                 \
    static void dots_h##SFX(const float *q, int nq, int ldq, const uint16_t *k, int nk, int64_t ldk, int e, int n,    \
                            bool f16, float *s, int lds) {                                                            \
        dots_k##SFX(f16 ? 2 : 1, q, nq, ldq, k, nk, ldk, e, n, s, lds);                                               \
    }                                                                                                                 \
    __attribute__((target(TGT), always_inline)) static inline void pv_block##SFX(                                    \
        const int nq, const int nv, const int kind, const float *p, int ldp, const uint16_t *v, int nk, int64_t ldv,  \
        int left, float *o, int ldo) {                                                                                \
        V acc[ATT_DEC_L][4];                                                                                          \
        for (int r = 0; r < ATT_DEC_L; r++)                                                                           \
            for (int u = 0; u < 4; u++)                                                                               \
                if (r < nq && u < nv) acc[r][u] = LOAD(o + (size_t)r * (size_t)ldo + W * u);                         \
        for (int c = 0; c < nk; c++) {                                                                                \
            const uint16_t *vc = v + (size_t)c * (size_t)ldv;                                                         \
            V vv[4];                                                                                                  \
            for (int u = 0; u < 4; u++)                                                                               \
                if (u < nv) vv[u] = ROW(kind, vc, W * u, left);                                                       \
            for (int r = 0; r < ATT_DEC_L; r++)                                                                       \
                if (r < nq) {                                                                                         \
                    const V pr = SET1(p[(size_t)r * (size_t)ldp + c]);                                                \
                    for (int u = 0; u < 4; u++)                                                                       \
                        if (u < nv) acc[r][u] = FMA(pr, vv[u], acc[r][u]);                                            \
                }                                                                                                     \
        }                                                                                                             \
        for (int r = 0; r < ATT_DEC_L; r++)                                                                           \
            for (int u = 0; u < 4; u++)                                                                               \
                if (r < nq && u < nv) STORE(o + (size_t)r * (size_t)ldo + W * u, acc[r][u]);                         \
    }                                                                                                                 \
    __attribute__((target(TGT))) static void pv_h##SFX(const float *p, int nq, int ldp, const uint16_t *v, int nk,    \
                                                       int64_t ldv, int e, int n, bool f16, float *o, int ldo) {     \
        const int kind = f16 ? 2 : 1;                                                                                 \
        for (int f = 0; f < n; f += 4 * W) {                                                                          \
            const int nv = n - f >= 4 * W ? 4 : (n - f) / W, left = e - f;                                            \
            const uint16_t *vf = v + f;                                                                               \
            float *of = o + f;                                                                                        \
            switch (nq * 16 + nv * 4 + kind) {                                                                        \
            ATT_PV_CASES(SFX, 4) ATT_PV_CASES(SFX, 3) ATT_PV_CASES(SFX, 2) ATT_PV_CASES(SFX, 1)                       \
            default: break;                                                                                           \
            }                                                                                                         \
        }                                                                                                             \
    }
#define ATT_PV_CASE(SFX, NQ, NV)                                                                                      \
    case NQ * 16 + NV * 4 + 1: pv_block##SFX(NQ, NV, 1, p, ldp, vf, nk, ldv, left, of, ldo); break;                   \
    case NQ * 16 + NV * 4 + 2: pv_block##SFX(NQ, NV, 2, p, ldp, vf, nk, ldv, left, of, ldo); break;
#define ATT_PV_CASES(SFX, NQ)                                                                                         \
    ATT_PV_CASE(SFX, NQ, 4) ATT_PV_CASE(SFX, NQ, 3) ATT_PV_CASE(SFX, NQ, 2) ATT_PV_CASE(SFX, NQ, 1)

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

// Below -87.3 the result is 0 (masked, never computed): a result in the subnormal range, or one
// that underflows to 0, costs a microcode assist on Intel cores, and every masked score of a
// causal tile is exp(-inf) (B 4, H 6, T 256, E 64 forward on one core: causal 4.85 ms, as long as
// non-causal's 4.77; masked, 3.1 against 4.7). NaN passes through (max / min return x for NaN x,
// and the mask keeps it).
__attribute__((target(TGT512), always_inline)) static inline __m512 exp512(__m512 x) {
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ);
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ATT_EXP_C1), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ATT_EXP_C2), r);
    const __m512 p = ATT_EXP_POLY(F512, B512, r);  // exp(r) = 1 + r + r^2 p(r)
    const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(keep, y, n);
}

__attribute__((target(TGT512))) static void colmax512(const float *x, int rows, int ld, int n, float *m) {
    for (int i = 0; i < n; i += 16) {
        __m512 v = _mm512_loadu_ps(m + i);
        for (int r = 0; r < rows; r++) v = _mm512_max_ps(_mm512_loadu_ps(x + (size_t)r * ld + i), v);
        _mm512_storeu_ps(m + i, v);
    }
}
__attribute__((target(TGT512))) static void exp_row512(float *x, int n, float sub) {
    const __m512 s = _mm512_set1_ps(sub);
    for (int j = 0; j < n; j += 16) _mm512_storeu_ps(x + j, exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), s)));
}
__attribute__((target(TGT512))) static void exp_vec512(float *x, int n, const float *sub, float *acc) {
    for (int j = 0; j < n; j += 16) {
        const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), _mm512_loadu_ps(sub + j)));
        _mm512_storeu_ps(x + j, e);
        if (acc) _mm512_storeu_ps(acc + j, _mm512_add_ps(_mm512_loadu_ps(acc + j), e));
    }
}

ATT_DEC_FNS(512, VEC16_TGT512, __m512, 16, vec16_row512, vec16_sum4_512, _mm512_reduce_add_ps, _mm512_loadu_ps,
            _mm512_storeu_ps, _mm512_fmadd_ps, _mm512_set1_ps, _mm512_setzero_ps)

// ---- AVX2 + FMA ----
#define TGT256 "avx2,fma"
#define L256(p) _mm256_loadu_ps(p)
#define S256(p, v) _mm256_storeu_ps((p), (v))
#define F256(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define B256(x) _mm256_set1_ps(x)
#define Z256() _mm256_setzero_ps()
ATT_TILE_FN(tile256, __attribute__((target(TGT256))), __m256, 8, L256, S256, F256, B256, Z256)
ATT_GEMM_FN(gemm256, tile256, __attribute__((target(TGT256))), 8)

ATT_DEC_FNS(256, VEC16_TGT256, __m256, 8, vec16_row256, vec16_sum4_256, vec16_sum256, _mm256_loadu_ps,
            _mm256_storeu_ps, _mm256_fmadd_ps, _mm256_set1_ps, _mm256_setzero_ps)

// Below -87.3 (where 2^n would leave the normal range) the result is 0, no subnormal ever made
// (exp512 says why); NaN passes through.
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

__attribute__((target(TGT256))) static void colmax256(const float *x, int rows, int ld, int n, float *m) {
    for (int i = 0; i < n; i += 8) {
        __m256 v = _mm256_loadu_ps(m + i);
        for (int r = 0; r < rows; r++) v = _mm256_max_ps(_mm256_loadu_ps(x + (size_t)r * ld + i), v);
        _mm256_storeu_ps(m + i, v);
    }
}
__attribute__((target(TGT256))) static void exp_row256(float *x, int n, float sub) {
    const __m256 s = _mm256_set1_ps(sub);
    for (int j = 0; j < n; j += 8) _mm256_storeu_ps(x + j, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + j), s)));
}
__attribute__((target(TGT256))) static void exp_vec256(float *x, int n, const float *sub, float *acc) {
    for (int j = 0; j < n; j += 8) {
        const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(sub + j)));
        _mm256_storeu_ps(x + j, e);
        if (acc) _mm256_storeu_ps(acc + j, _mm256_add_ps(_mm256_loadu_ps(acc + j), e));
    }
}

// ---- plain C, below AVX2 ----
// Vectors of 4 floats in GCC's generic vector type: SSE2 registers on any x86-64 (12 of the 16 hold
// the tile), and scalar code elsewhere. Multiply and add stay two roundings (no contraction in ISO C).
typedef float att_v4 __attribute__((vector_size(16)));
static inline att_v4 att_v4_load(const float *p) {
    att_v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void att_v4_store(float *p, att_v4 v) { memcpy(p, &v, sizeof v); }
#define LC(p) att_v4_load(p)
#define SC(p, v) att_v4_store((p), (v))
#define FC(a, b, c) ((a) * (b) + (c))
#define BC1(x) ((att_v4){(x), (x), (x), (x)})
#define ZC() ((att_v4){0, 0, 0, 0})
ATT_TILE_FN(tile_c, , att_v4, 4, LC, SC, FC, BC1, ZC)
ATT_GEMM_FN(gemm_c, tile_c, , 4)
#define RC(v) (((v)[0] + (v)[2]) + ((v)[1] + (v)[3]))
ATT_DOTS_FN(dots_c, , att_v4, 4, LC, FC, ZC, RC)

static void colmax_c(const float *x, int rows, int ld, int n, float *m) {
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) m[i] = x[(size_t)r * ld + i] > m[i] ? x[(size_t)r * ld + i] : m[i];
}
static void exp_row_c(float *x, int n, float sub) {
    for (int j = 0; j < n; j++) x[j] = expf(x[j] - sub);
}
static void exp_vec_c(float *x, int n, const float *sub, float *acc) {
    for (int j = 0; j < n; j++) {
        x[j] = expf(x[j] - sub[j]);
        if (acc) acc[j] += x[j];
    }
}

static const att_isa k_isa512 = {gemm512, colmax512, exp_row512, exp_vec512, dots512, dots_h512, pv_h512};
static const att_isa k_isa256 = {gemm256, colmax256, exp_row256, exp_vec256, dots256, dots_h256, pv_h256};
static const att_isa k_isa_c = {gemm_c, colmax_c, exp_row_c, exp_vec_c, dots_c, NULL, NULL};

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
    bool one_pass;       // backward: one task a (b, h), dQ in a buffer (backward_bh), else dkv_tile + dq_tile
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

// n f16 values as f32 times mul, 8 at a time with F16C (exact, as torc_f16_to_f32).
__attribute__((target("avx2,f16c"))) static void f16_row_f16c(const uint16_t *s, int n, float mul, float *d) {
    const __m256 m = _mm256_set1_ps(mul);
    int e = 0;
    for (; e + 8 <= n; e += 8)
        _mm256_storeu_ps(d + e, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + e))), m));
    for (; e < n; e++) d[e] = torc_f16_to_f32(s[e]) * mul;
}

// One row of n features at src (es: their stride in bytes, 0 for contiguous) as f32 times mul.
// Contiguous f32 loops vectorise as they are; bf16 takes cast.c's conversion loop (this file is
// built for baseline x86-64: its own loop ran 4 lanes wide, and a bf16 sampler's token at 900
// positions spent most of its attention converting the cache); f16 takes F16C where torc's ISA
// has AVX2.
// (Converting element by element cost an f16 forward+backward at B 4, H 6, T 256, E 64 54 ms
// against f32's 21 on one core.)
static void convert_row(torc_dtype dt, const char *src, int n, int64_t es, float mul, float *d, bool f16c) {
    if (es == 0 && dt == TORC_DTYPE_F32) {
        for (int e = 0; e < n; e++) d[e] = ((const float *)src)[e] * mul;
    } else if (es == 0 && dt == TORC_DTYPE_BF16) {
        onednn__bf16_to_f32(d, (const uint16_t *)src, n);  // cast.c's loop for the ISA (exact)
        if (mul != 1.0f)
            for (int e = 0; e < n; e++) d[e] *= mul;
    } else if (es == 0 && f16c) {
        f16_row_f16c((const uint16_t *)src, n, mul, d);
    } else {
        const int64_t step = es ? es : (int64_t)torc_abi_dtype_size(dt);
        for (int e = 0; e < n; e++) d[e] = load1(src + e * step, dt) * mul;
    }
}

// Rows r0 .. r0 + nr of t at (b, h), times mul, as f32: row-major (dst[r * ld + e], the columns
// from t's features to ld zeroed) or transposed (dst[e * ld + r], the columns from nr to ld zeroed).
static void load_tile(const torc_operand *t, int64_t b, int64_t h, int64_t r0, int nr, float mul, float *dst, int ld,
                      bool transposed) {
    const int ne = (int)t->shape[3];
    const int64_t es = t->stride[3] * (int64_t)torc_abi_dtype_size(t->dtype);
    const bool f16c = t->dtype == TORC_DTYPE_F16 && onednn__isa() >= ONEDNN_ISA_AVX2 && onednn__cpu_has_f16c();
    float row[ATT_MAX_E];
    int r = 0;
    if (transposed) {
        for (int e = 0; e < ne; e++) memset(dst + (size_t)e * ld + nr, 0, sizeof(float) * (size_t)(ld - nr));
        // 4 rows at a time, written as 4 x 4 blocks (SSE's transpose) instead of a float a column.
        // (Loading every transposed tile of a B 4, H 6, T 256, E 64 forward+backward a float at a
        // time was 6% of it on one core.)
        float rows[4][ATT_MAX_E];
        for (; r + 4 <= nr; r += 4) {
            for (int k = 0; k < 4; k++)
                convert_row(t->dtype, row_at(t, b, h, r0 + r + k), ne, t->stride[3] == 1 ? 0 : es, mul, rows[k], f16c);
            int e = 0;
            for (; e + 4 <= ne; e += 4) {
                __m128 v0 = _mm_loadu_ps(rows[0] + e), v1 = _mm_loadu_ps(rows[1] + e), v2 = _mm_loadu_ps(rows[2] + e),
                       v3 = _mm_loadu_ps(rows[3] + e);
                _MM_TRANSPOSE4_PS(v0, v1, v2, v3);
                _mm_storeu_ps(dst + (size_t)e * ld + r, v0);
                _mm_storeu_ps(dst + (size_t)(e + 1) * ld + r, v1);
                _mm_storeu_ps(dst + (size_t)(e + 2) * ld + r, v2);
                _mm_storeu_ps(dst + (size_t)(e + 3) * ld + r, v3);
            }
            for (; e < ne; e++)
                for (int k = 0; k < 4; k++) dst[(size_t)e * ld + r + k] = rows[k][e];
        }
    }
    for (; r < nr; r++) {
        float *d = transposed ? row : dst + (size_t)r * ld;
        convert_row(t->dtype, row_at(t, b, h, r0 + r), ne, t->stride[3] == 1 ? 0 : es, mul, d, f16c);
        if (!transposed)
            for (int e = ne; e < ld; e++) d[e] = 0;
        else
            for (int e = 0; e < ne; e++) dst[(size_t)e * ld + r] = row[e];
    }
}

// Rows of an f32 tile (row stride ld; scaled by mul in place) rounded once into t's rows r0 .. r0 + nr
// at (b, h); dense bf16 and f16 rows by cast.c's vectorised loops (store1's bits), which cost a bf16
// forward+backward at B 4, H 6, T 256, E 64 causal 20% less than store1's element loop on one core,
// f16 35% less (the header's figures).
static void store_tile(const torc_operand *t, int64_t b, int64_t h, int64_t r0, int nr, float *src, int ld,
                       float mul) {
    const int ne = (int)t->shape[3];
    const int64_t es = t->stride[3] * (int64_t)torc_abi_dtype_size(t->dtype);
    for (int r = 0; r < nr; r++) {
        char *d = (char *)row_at(t, b, h, r0 + r);
        float *s = src + (size_t)r * ld;
        if (mul != 1.0f)
            for (int e = 0; e < ne; e++) s[e] *= mul;
        if (t->stride[3] != 1)
            for (int e = 0; e < ne; e++) store1(d + e * es, t->dtype, s[e]);
        else if (t->dtype == TORC_DTYPE_BF16)
            onednn__f32_to_bf16((uint16_t *)d, s, ne);
        else if (t->dtype == TORC_DTYPE_F16)
            onednn__f32_to_f16((uint16_t *)d, s, ne);
        else
            memcpy(d, s, sizeof(float) * (size_t)ne);
    }
}

// The keys query row i attends: 0 .. attended(i) - 1 (top-left aligned when causal, as PyTorch).
static inline int64_t attended(const att_job *j, int64_t i) { return j->causal ? (i + 1 < j->S ? i + 1 : j->S) : j->S; }

// The forward of at most ATT_DEC_L query rows: forward_decode, one task a (b, h).
static inline bool decode(const att_job *j) { return j->op->code == TORC_OP_ATTENTION && j->L <= ATT_DEC_L; }

// The floats one thread's tiles take (the largest task's: dK / dV's seven E- or Ev-wide tiles, two
// score tiles, and per-row vectors; the one pass adds its (b, h)'s dQ, scale q and do, L x (Ep, Ep,
// Evp); forward_decode's five buffers), with room to start each buffer on a cache line.
static size_t att_ws_floats(const att_job *j) {
    if (decode(j)) return (size_t)(ATT_DEC_L + ATT_BC) * (size_t)(j->Ep + j->Evp) + ATT_DEC_L * ATT_BC + 5 * 16;
    const size_t e = (size_t)(j->Ep > j->Evp ? j->Ep : j->Evp), t = ATT_BR > ATT_BC ? ATT_BR : ATT_BC;
    const size_t one = j->one_pass ? (size_t)j->L * (size_t)(2 * j->Ep + j->Evp) : 0;
    return 7 * t * e + 2 * t * t + 8 * t + 16 * 16 + one;
}

// Carves n floats off *w, 64-byte aligned.
static float *carve(float **w, size_t n) {
    float *p = *w;
    *w += (n + 15) / 16 * 16;
    return p;
}

// Causal: the entries of a transposed score tile (row c: key j0 + c; column i: query i0 + i) whose
// query comes before the key, set to x (-inf for scores: exp gives 0 there).
static void mask_transposed(const att_job *j, float *st, int bc, int64_t i0, int64_t j0, float x) {
    if (!j->causal) return;
    for (int c = 0; c < bc; c++) {
        const int64_t first = j0 + c - i0;  // the first query of the tile that sees key j0 + c
        const int n = first <= 0 ? 0 : first < ATT_BR ? (int)first : ATT_BR;
        for (int i = 0; i < n; i++) st[(size_t)c * ATT_BR + i] = x;
    }
}

// ---- the causal diagonal: products cut to the keys attended ----
// Where a query tile and a key tile straddle the diagonal, about half of each product is with
// masked entries (p = 0, ds = 0). The products run in the kernel's blocks of ATT_MR rows there, each
// cut to what its rows need: scores to the 16-column blocks some row attends, and the sums over
// queries or keys to the terms of attended pairs. A term left out is p = 0 or ds = 0 times a finite
// value, which leaves a sum as it is (a sum starts at +0 and never becomes -0), so the results are
// those of the whole products; non-finite operands at masked entries no longer reach them (as in the
// reference, which sums over the attended keys only).
#define ATT_MR 6  // the kernel's rows (ATT_TILE_FN)

// The keys of key tile j0 (bc of them) that query i0 + r attends: the first lim of the tile.
static inline int att_lim(const att_job *j, int64_t i0, int64_t j0, int bc, int r) {
    const int64_t n = attended(j, i0 + r) - j0;
    return n <= 0 ? 0 : n < bc ? (int)n : bc;
}

// The first query row r of tile i0 (up to ATT_BR) that attends key j0 + c.
static inline int att_first(const att_job *j, int64_t i0, int64_t j0, int bc, int c) {
    int r = 0;
    while (r < ATT_BR && att_lim(j, i0, j0, bc, r) <= c) r++;
    return r;
}

// C (M query rows of tile i0, row stride ldc) += A B over key tile j0 (bc keys): A (M x keys) is p or
// ds, each row's sum over the keys it attends only (what forward's O += P V and dQ += dS K need).
static void gemm_keys(const att_job *j, int64_t i0, int64_t j0, int bc, int M, int N, const float *a, int ars,
                      int acs, const float *b, int ldb, float *c, int ldc) {
    if (att_lim(j, i0, j0, bc, 0) == bc) {  // every row attends every key
        j->isa->gemm(M, N, bc, a, ars, acs, b, ldb, c, ldc, 1);
        return;
    }
    for (int r0 = 0; r0 < M; r0 += ATT_MR) {
        const int m = M - r0 < ATT_MR ? M - r0 : ATT_MR, n = att_lim(j, i0, j0, bc, r0 + m - 1);
        if (n) j->isa->gemm(m, N, n, a + (size_t)r0 * ars, ars, acs, b, ldb, c + (size_t)r0 * ldc, ldc, 1);
    }
}

// C (bc key rows of tile j0, row stride ldc) += A B over query tile i0 (br queries): A (keys x br) is
// p^T or ds^T, each key's sum over the queries that attend it only (backward's dV and dK).
static void gemm_queries(const att_job *j, int64_t i0, int64_t j0, int bc, int br, int N, const float *a, int ars,
                         int acs, const float *b, int ldb, float *c, int ldc) {
    if (att_lim(j, i0, j0, bc, 0) == bc) {
        j->isa->gemm(bc, N, br, a, ars, acs, b, ldb, c, ldc, 1);
        return;
    }
    for (int c0 = 0; c0 < bc; c0 += ATT_MR) {
        const int m = bc - c0 < ATT_MR ? bc - c0 : ATT_MR, r = att_first(j, i0, j0, bc, c0);
        if (r < br)
            j->isa->gemm(m, N, br - r, a + (size_t)c0 * ars + (size_t)r * acs, ars, acs, b + (size_t)r * ldb, ldb,
                         c + (size_t)c0 * ldc, ldc, 1);
    }
}

// Rows r0.. of t at (b, h) as they lie, where they are f32 rows of exactly `width` dense features
// (*ld: their stride), else NULL (then they are loaded into a tile).
static const float *f32_rows(const torc_operand *t, int64_t b, int64_t h, int64_t r0, int width, int *ld) {
    if (t->dtype != TORC_DTYPE_F32 || t->shape[3] != width || t->stride[3] != 1 || t->stride[2] < 0 ||
        t->stride[2] > INT32_MAX)
        return NULL;
    *ld = (int)t->stride[2];
    return (const float *)row_at(t, b, h, r0);
}

// Rows r0 .. r0 + nr of t at (b, h) as f32 rows of `width` features: where they lie (f32_rows),
// else loaded into buf (row stride width). *ld: the row stride of the rows returned.
static const float *rows_or_load(const torc_operand *t, int64_t b, int64_t h, int64_t r0, int nr, int width,
                                 float *buf, int *ld) {
    const float *p = f32_rows(t, b, h, r0, width, ld);
    if (p) return p;
    load_tile(t, b, h, r0, nr, 1.0f, buf, width, false);
    *ld = width;
    return buf;
}

// ---- forward: one (b, h, query tile) ----
// The scores are computed transposed, S^T = K (scale Q)^T (bc x ATT_BR), so that (scale Q)^T is
// transposed once a query tile and each key tile is read as it lies; the softmax then runs down the
// columns, vectorised across queries, and O += P V reads P = (S^T)^T through the kernel's strides.
static void forward_tile(const att_job *j, float *w, int64_t task) {
    const torc_op *op = j->op;
    const torc_operand *q = &op->in[0], *k = &op->in[1], *v = &op->in[2], *o = &op->out[0], *lse = &op->out[1];
    const int64_t bh = task / j->nqt, i0 = task % j->nqt * ATT_BR, b = bh / j->H, h = bh % j->H;
    const int br = (int)(j->L - i0 < ATT_BR ? j->L - i0 : ATT_BR), E = j->E, Ep = j->Ep, Evp = j->Evp;
    float *Qt = carve(&w, (size_t)Ep * ATT_BR), *Kr = carve(&w, (size_t)ATT_BC * Ep), *Vr = carve(&w, (size_t)ATT_BC * Evp),
          *St = carve(&w, (size_t)ATT_BC * ATT_BR), *O = carve(&w, (size_t)ATT_BR * Evp), *m = carve(&w, ATT_BR),
          *l = carve(&w, ATT_BR), *mn = carve(&w, ATT_BR), *sub = carve(&w, ATT_BR), *al = carve(&w, ATT_BR),
          *zero = carve(&w, ATT_BR);
    load_tile(q, b, h, i0, br, j->scale, Qt, ATT_BR, true);
    memset(O, 0, sizeof(float) * (size_t)br * Evp);
    for (int i = 0; i < ATT_BR; i++) m[i] = -INFINITY, l[i] = 0, zero[i] = 0;
    const int64_t kend = attended(j, i0 + br - 1);
    for (int64_t j0 = 0; j0 < kend; j0 += ATT_BC) {
        const int bc = (int)(kend - j0 < ATT_BC ? kend - j0 : ATT_BC);
        int ldk, ldv;
        const float *Kp = rows_or_load(k, b, h, j0, bc, Ep, Kr, &ldk),
                    *Vp = rows_or_load(v, b, h, j0, bc, Evp, Vr, &ldv);
        if (att_lim(j, i0, j0, bc, 0) == bc) {
            j->isa->gemm(bc, ATT_BR, E, Kp, ldk, 1, Qt, ATT_BR, St, ATT_BR, 0);
        } else {  // on the diagonal: each key's scores from the 16-column block of its first query
            for (int c0 = 0; c0 < bc; c0 += ATT_MR) {
                const int m = bc - c0 < ATT_MR ? bc - c0 : ATT_MR, n0 = att_first(j, i0, j0, bc, c0) / 16 * 16;
                j->isa->gemm(m, ATT_BR - n0, E, Kp + (size_t)c0 * ldk, ldk, 1, Qt + n0, ATT_BR,
                             St + (size_t)c0 * ATT_BR + n0, ATT_BR, 0);
            }
        }
        mask_transposed(j, St, bc, i0, j0, -INFINITY);
        // The online softmax: m grows to mn, l and O are rescaled by alpha = exp(m - mn), then
        // P = exp(S - mn) is added to l. (A column whose max is still -inf has no key yet: its P is 0.)
        memcpy(mn, m, sizeof(float) * ATT_BR);
        j->isa->colmax(St, bc, ATT_BR, ATT_BR, mn);
        for (int i = 0; i < ATT_BR; i++) {
            sub[i] = mn[i] == -INFINITY ? 0.0f : mn[i];
            al[i] = m[i] == -INFINITY ? -INFINITY : m[i] - mn[i];
        }
        j->isa->exp_vec(al, ATT_BR, zero, NULL);
        for (int i = 0; i < ATT_BR; i++) l[i] *= al[i];
        for (int c = 0; c < bc; c++) j->isa->exp_vec(St + (size_t)c * ATT_BR, ATT_BR, sub, l);
        for (int r = 0; r < br; r++)
            if (al[r] != 1.0f)
                for (int e = 0; e < Evp; e++) O[(size_t)r * Evp + e] *= al[r];
        memcpy(m, mn, sizeof(float) * ATT_BR);
        gemm_keys(j, i0, j0, bc, br, Evp, St, 1, ATT_BR, Vp, ldv, O, Evp);
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

// Dense rows of 16-bit floats (bf16, f16), which the decode path reads as they lie on AVX-512.
static bool half_rows(const torc_operand *t) {
    return (t->dtype == TORC_DTYPE_BF16 || t->dtype == TORC_DTYPE_F16) && t->stride[3] == 1 && t->stride[2] >= 0;
}

// ---- forward, decode: one (b, h) of at most ATT_DEC_L query rows ----
// A sampler's step sends one query row against its whole KV cache; as a 64-row query tile it would
// compute, exponentiate and mask 64 columns for the one it keeps. Here each key tile's scores are
// L dot products a key (dots), the online softmax runs along each query's row and O += P V is the
// tile kernel with L rows. Forward only: a backward recomputes its tiles from lse as for any L.
static void forward_decode(const att_job *j, float *w, int64_t bh) {
    const torc_op *op = j->op;
    const torc_operand *q = &op->in[0], *k = &op->in[1], *v = &op->in[2], *o = &op->out[0], *lse = &op->out[1];
    const int64_t b = bh / j->H, h = bh % j->H;
    const int L = (int)j->L, Ep = j->Ep, Evp = j->Evp;
    float *Q = carve(&w, (size_t)ATT_DEC_L * Ep), *Kr = carve(&w, (size_t)ATT_BC * Ep),
          *Vr = carve(&w, (size_t)ATT_BC * Evp), *P = carve(&w, (size_t)ATT_DEC_L * ATT_BC),
          *O = carve(&w, (size_t)ATT_DEC_L * Evp);
    float m[ATT_DEC_L], l[ATT_DEC_L];
    load_tile(q, b, h, 0, L, j->scale, Q, Ep, false);
    memset(O, 0, sizeof(float) * (size_t)L * Evp);
    for (int r = 0; r < L; r++) m[r] = -INFINITY, l[r] = 0;
    const int64_t kend = attended(j, L - 1);
    const bool f16 = k->dtype == TORC_DTYPE_F16,
               h16 = j->isa->dots_h && half_rows(k) && half_rows(v) && (!f16 || onednn__cpu_has_f16c());
    int ldk, ldv;
    for (int64_t j0 = 0; j0 < kend; j0 += ATT_BC) {
        const int bc = (int)(kend - j0 < ATT_BC ? kend - j0 : ATT_BC), bcp = pad16(bc);
        const float *Kt = NULL, *Vt = NULL;
        if (h16) {
            j->isa->dots_h(Q, L, Ep, (const uint16_t *)row_at(k, b, h, j0), bc, k->stride[2], j->E, Ep, f16, P, ATT_BC);
        } else {
            Kt = rows_or_load(k, b, h, j0, bc, Ep, Kr, &ldk), Vt = rows_or_load(v, b, h, j0, bc, Evp, Vr, &ldv);
            j->isa->dots(Q, L, Ep, Kt, bc, ldk, Ep, P, ATT_BC);
        }
        for (int r = 0; r < L; r++) {
            float *p = P + (size_t)r * ATT_BC;
            const int64_t n = attended(j, r) - j0;  // keys of this tile row r attends
            const int lim = n <= 0 ? 0 : n < bc ? (int)n : bc;
            for (int c = lim; c < bcp; c++) p[c] = -INFINITY;
            // The online softmax as forward_tile's (NaN scores are left out of the max and pass
            // through exp into l and O).
            // (Max and sum in 16 lanes, the masked keys -inf and then 0: the scalar loops' chains of
            // dependent maxss and addss were an eighth of a bf16 token's attention.)
            float lane[16], mn = m[r], sum = 0;
            for (int i = 0; i < 16; i++) lane[i] = -INFINITY;
            for (int c = 0; c < bcp; c += 16)
                for (int i = 0; i < 16; i++) lane[i] = p[c + i] > lane[i] ? p[c + i] : lane[i];
            for (int i = 0; i < 16; i++) mn = lane[i] > mn ? lane[i] : mn;
            const float al = m[r] == -INFINITY ? 0.0f : expf(m[r] - mn);
            j->isa->exp_row(p, bcp, mn == -INFINITY ? 0.0f : mn);
            for (int i = 0; i < 16; i++) lane[i] = 0;
            for (int c = 0; c < bcp; c += 16)
                for (int i = 0; i < 16; i++) lane[i] += p[c + i];
            for (int i = 0; i < 16; i++) sum += lane[i];
            l[r] = l[r] * al + sum;
            if (al != 1.0f)
                for (int e = 0; e < Evp; e++) O[(size_t)r * Evp + e] *= al;
            m[r] = mn;
        }
        if (h16)
            j->isa->pv_h(P, L, ATT_BC, (const uint16_t *)row_at(v, b, h, j0), bc, v->stride[2], j->Ev, Evp, f16, O, Evp);
        else
            j->isa->gemm(L, Evp, bc, P, ATT_BC, 1, Vt, ldv, O, Evp, 1);
    }
    for (int r = 0; r < L; r++) {
        float *orow = O + (size_t)r * Evp;
        if (l[r] > 0)
            for (int e = 0; e < Evp; e++) orow[e] /= l[r];
        else
            memset(orow, 0, sizeof(float) * Evp);
        *(float *)row_at(lse, b, h, r) = l[r] > 0 ? (float)((double)m[r] + log((double)l[r])) : -INFINITY;
    }
    store_tile(o, b, h, 0, L, O, Evp, 1.0f);
}

// ---- backward ----
// D_i = do_i . o_i for every query row, in double over the loaded values (dall, B H L floats), the
// products added in feature order; 64 rows at a time from tiles of do^T and o^T in w (2 Evp x ATT_BR
// floats), so that the rows' sums run side by side in vectors.
static void compute_d(const att_job *j, int64_t bh, float *dall, float *w) {
    const torc_operand *dout = &j->op->in[0], *o = &j->op->in[4];
    const int64_t b = bh / j->H, h = bh % j->H;
    float *gt = carve(&w, (size_t)j->Evp * ATT_BR), *ot = carve(&w, (size_t)j->Evp * ATT_BR);
    for (int64_t i0 = 0; i0 < j->L; i0 += ATT_BR) {
        const int br = (int)(j->L - i0 < ATT_BR ? j->L - i0 : ATT_BR);
        load_tile(dout, b, h, i0, br, 1.0f, gt, ATT_BR, true);
        load_tile(o, b, h, i0, br, 1.0f, ot, ATT_BR, true);
        double d[ATT_BR] = {0};
        for (int e = 0; e < j->Ev; e++)
            for (int r = 0; r < ATT_BR; r++)
                d[r] += (double)gt[(size_t)e * ATT_BR + r] * (double)ot[(size_t)e * ATT_BR + r];
        for (int r = 0; r < br; r++) dall[bh * j->L + i0 + r] = (float)d[r];
    }
}

// A query tile's lse and D (+inf and 0 past the tile, where p is then 0).
static void load_lse_d(const att_job *j, int64_t bh, int64_t i0, int br, const float *dall, float *lse, float *D) {
    const torc_operand *l = &j->op->in[5];
    for (int r = 0; r < ATT_BR; r++) {
        lse[r] = r < br ? *(const float *)row_at(l, bh / j->H, bh % j->H, i0 + r) : INFINITY;
        D[r] = r < br ? dall[bh * j->L + i0 + r] : 0.0f;
    }
}

// The one pass's rows of a whole (b, h) (backward_bh): dQ accumulated (L x Ep), scale q (L x Ep) and
// do (L rows of Ev, row stride lddo: where they lie for dense f32 rows of Evp features) as f32.
typedef struct att_bh_rows {
    float *dQ;
    const float *Q, *dO;
    int lddo;
} att_bh_rows;

// dK and dV of one (b, h, key tile), over the query tiles that see it: K^T and V^T transposed once;
// S = (scale Q) K^T and dP = dO V^T (br x ATT_BC), P = exp(S - lse), dS = P (dP - D);
// dV += P^T dO, dK += dS^T (scale Q). With rows (the one pass, backward_bh), Q and dO read from
// there, and dQ_i += dS K over the keys of the tile that some row of query tile i attends: the terms
// dq_tile adds for this key tile, in its order (an element of dS is the same sum of the same
// products transposed or not: the kernel's sums run over k in order), so dq has its bits.
static void dkv_tile(const att_job *j, float *w, int64_t bh, int64_t j0, const float *dall, const att_bh_rows *rows) {
    const torc_op *op = j->op;
    const torc_operand *dout = &op->in[0], *q = &op->in[1], *k = &op->in[2], *v = &op->in[3], *dk = &op->out[1],
                       *dv = &op->out[2];
    const int64_t b = bh / j->H, h = bh % j->H;
    const int bc = (int)(j->S - j0 < ATT_BC ? j->S - j0 : ATT_BC), E = j->E, Ev = j->Ev, Ep = j->Ep, Evp = j->Evp;
    float *Kt = carve(&w, (size_t)Ep * ATT_BC), *Vt = carve(&w, (size_t)Evp * ATT_BC),
          *Qb = carve(&w, (size_t)ATT_BR * Ep), *Dob = carve(&w, (size_t)ATT_BR * Evp),
          *P = carve(&w, (size_t)ATT_BR * ATT_BC), *dP = carve(&w, (size_t)ATT_BR * ATT_BC),
          *dK = carve(&w, (size_t)ATT_BC * Ep), *dV = carve(&w, (size_t)ATT_BC * Evp), *lse = carve(&w, ATT_BR),
          *D = carve(&w, ATT_BR), *Kb = carve(&w, (size_t)ATT_BC * Ep);
    load_tile(k, b, h, j0, bc, 1.0f, Kt, ATT_BC, true);
    load_tile(v, b, h, j0, bc, 1.0f, Vt, ATT_BC, true);
    int ldk = 0;
    const float *Kr = rows ? rows_or_load(k, b, h, j0, bc, Ep, Kb, &ldk) : NULL;  // dQ's K, row-major
    memset(dK, 0, sizeof(float) * (size_t)bc * Ep);
    memset(dV, 0, sizeof(float) * (size_t)bc * Evp);
    // Causal: query i sees key j when j <= i, so the query tiles from the one holding row j0.
    for (int64_t i0 = j->causal ? j0 / ATT_BR * ATT_BR : 0; i0 < j->L; i0 += ATT_BR) {
        const int br = (int)(j->L - i0 < ATT_BR ? j->L - i0 : ATT_BR);
        const float *Qr = Qb, *Dor;
        int lddo;
        if (rows) {
            Qr = rows->Q + (size_t)i0 * Ep, Dor = rows->dO + (size_t)i0 * rows->lddo, lddo = rows->lddo;
        } else {
            load_tile(q, b, h, i0, br, j->scale, Qb, Ep, false);
            Dor = rows_or_load(dout, b, h, i0, br, Evp, Dob, &lddo);
        }
        load_lse_d(j, bh, i0, br, dall, lse, D);
        if (att_lim(j, i0, j0, bc, 0) == bc) {
            j->isa->gemm(br, ATT_BC, E, Qr, Ep, 1, Kt, ATT_BC, P, ATT_BC, 0);
            j->isa->gemm(br, ATT_BC, Ev, Dor, lddo, 1, Vt, ATT_BC, dP, ATT_BC, 0);
        } else {  // on the diagonal: each row block's scores up to the 16-column block of its last key
            for (int r0 = 0; r0 < br; r0 += ATT_MR) {
                const int m = br - r0 < ATT_MR ? br - r0 : ATT_MR, n = pad16(att_lim(j, i0, j0, bc, r0 + m - 1));
                j->isa->gemm(m, n, E, Qr + (size_t)r0 * Ep, Ep, 1, Kt, ATT_BC, P + (size_t)r0 * ATT_BC, ATT_BC, 0);
                j->isa->gemm(m, n, Ev, Dor + (size_t)r0 * lddo, lddo, 1, Vt, ATT_BC, dP + (size_t)r0 * ATT_BC, ATT_BC,
                             0);
            }
        }
        for (int r = 0; r < br; r++) {
            float *p = P + (size_t)r * ATT_BC, *ds = dP + (size_t)r * ATT_BC;
            const int lim = att_lim(j, i0, j0, bc, r), n = pad16(lim);  // keys of this tile row r attends
            for (int c = lim; c < n; c++) p[c] = -INFINITY;
            j->isa->exp_row(p, n, lse[r]);
            const float Dr = D[r];
            for (int c = 0; c < lim; c++) ds[c] = p[c] * (ds[c] - Dr);
            for (int c = lim; c < ATT_BC; c++) ds[c] = 0;
            for (int c = n; c < ATT_BC; c++) p[c] = 0;
        }
        gemm_queries(j, i0, j0, bc, br, Evp, P, 1, ATT_BC, Dor, lddo, dV, Evp);
        gemm_queries(j, i0, j0, bc, br, Ep, dP, 1, ATT_BC, Qr, Ep, dK, Ep);
        if (rows) gemm_keys(j, i0, j0, bc, br, Ep, dP, ATT_BC, 1, Kr, ldk, rows->dQ + (size_t)i0 * Ep, Ep);
    }
    store_tile(dk, b, h, j0, bc, dK, Ep, 1.0f);
    store_tile(dv, b, h, j0, bc, dV, Evp, 1.0f);
}

// The one-pass backward of one (b, h) (FlashAttention-2's): D, scale q and do as f32 once, then the
// key tiles in order, each adding its terms to every query tile's rows of dQ; dq = scale dQ.
static void backward_bh(const att_job *j, float *w, int64_t bh, float *dall) {
    const int64_t b = bh / j->H, h = bh % j->H;
    const int L = (int)j->L;
    att_bh_rows rows = {.dQ = carve(&w, (size_t)L * j->Ep)};
    float *Q = carve(&w, (size_t)L * j->Ep), *dO = carve(&w, (size_t)L * j->Evp);
    compute_d(j, bh, dall, w);
    memset(rows.dQ, 0, sizeof(float) * (size_t)L * j->Ep);
    load_tile(&j->op->in[1], b, h, 0, L, j->scale, Q, j->Ep, false);
    rows.Q = Q;
    rows.dO = rows_or_load(&j->op->in[0], b, h, 0, L, j->Evp, dO, &rows.lddo);
    for (int64_t t = 0; t < j->nkt; t++) dkv_tile(j, w, bh, t * ATT_BC, dall, &rows);
    store_tile(&j->op->out[0], b, h, 0, L, rows.dQ, j->Ep, j->scale);
}

// dQ of one (b, h, query tile) over its key tiles, transposed as the forward: (scale Q)^T and dO^T
// once; S^T = K (scale Q)^T and dP^T = V dO^T, P^T = exp(S^T - lse), dS^T = P^T (dP^T - D);
// dQ += dS K; dq = scale dQ.
static void dq_tile(const att_job *j, float *w, int64_t task, const float *dall) {
    const torc_op *op = j->op;
    const torc_operand *dout = &op->in[0], *q = &op->in[1], *k = &op->in[2], *v = &op->in[3], *dq = &op->out[0];
    const int64_t bh = task / j->nqt, i0 = task % j->nqt * ATT_BR, b = bh / j->H, h = bh % j->H;
    const int br = (int)(j->L - i0 < ATT_BR ? j->L - i0 : ATT_BR), E = j->E, Ev = j->Ev, Ep = j->Ep, Evp = j->Evp;
    float *Qt = carve(&w, (size_t)Ep * ATT_BR), *Dot = carve(&w, (size_t)Evp * ATT_BR),
          *Kr = carve(&w, (size_t)ATT_BC * Ep), *Vr = carve(&w, (size_t)ATT_BC * Evp),
          *Pt = carve(&w, (size_t)ATT_BC * ATT_BR), *dPt = carve(&w, (size_t)ATT_BC * ATT_BR),
          *dQ = carve(&w, (size_t)ATT_BR * Ep), *lse = carve(&w, ATT_BR), *D = carve(&w, ATT_BR);
    load_tile(q, b, h, i0, br, j->scale, Qt, ATT_BR, true);
    load_tile(dout, b, h, i0, br, 1.0f, Dot, ATT_BR, true);
    load_lse_d(j, bh, i0, br, dall, lse, D);
    memset(dQ, 0, sizeof(float) * (size_t)br * Ep);
    const int64_t kend = attended(j, i0 + br - 1);
    for (int64_t j0 = 0; j0 < kend; j0 += ATT_BC) {
        const int bc = (int)(kend - j0 < ATT_BC ? kend - j0 : ATT_BC);
        int ldk, ldv;
        const float *Kp = rows_or_load(k, b, h, j0, bc, Ep, Kr, &ldk),
                    *Vp = rows_or_load(v, b, h, j0, bc, Evp, Vr, &ldv);
        j->isa->gemm(bc, ATT_BR, E, Kp, ldk, 1, Qt, ATT_BR, Pt, ATT_BR, 0);
        j->isa->gemm(bc, ATT_BR, Ev, Vp, ldv, 1, Dot, ATT_BR, dPt, ATT_BR, 0);
        mask_transposed(j, Pt, bc, i0, j0, -INFINITY);
        for (int c = 0; c < bc; c++) {
            float *p = Pt + (size_t)c * ATT_BR, *ds = dPt + (size_t)c * ATT_BR;
            j->isa->exp_vec(p, ATT_BR, lse, NULL);
            for (int i = 0; i < ATT_BR; i++) ds[i] = p[i] * (ds[i] - D[i]);
        }
        mask_transposed(j, dPt, bc, i0, j0, 0.0f);  // ds = 0 where masked, as dkv_tile's
        gemm_keys(j, i0, j0, bc, br, Ep, dPt, 1, ATT_BR, Kp, ldk, dQ, Ep);
    }
    store_tile(dq, b, h, i0, br, dQ, Ep, j->scale);
}

// ---- the tasks on the thread pool ----
// Forward: B H nqt tasks; backward: D for every (b, h) first, then B H nkt dK / dV tasks and B H nqt
// dQ tasks in one loop (a thread that finishes its key tiles takes query tiles). Each task writes
// its own rows only.
static void run_task(const att_job *j, float *w, int64_t t, float *dall) {
    if (decode(j)) forward_decode(j, w, t);  // nqt is 1: task t is (b, h)
    else if (j->op->code == TORC_OP_ATTENTION) forward_tile(j, w, t);
    else if (j->one_pass) backward_bh(j, w, t, dall);
    else if (t < j->B * j->H * j->nkt) dkv_tile(j, w, t / j->nkt, t % j->nkt * ATT_BC, dall, NULL);
    else dq_tile(j, w, t - j->B * j->H * j->nkt, dall);
}

// The backward's passes: TORC_ONEDNN_ATTENTION_PASSES=1 or 2 (a test's knob: both give the same
// bits), else one where it keeps the threads busy. The one pass does 5 tile products a pair of tiles
// against the two passes' 7, but in B H tasks against B H (nkt + nqt): it is taken when its rounds
// of B H / threads tasks (the last one short) cost at most 7 / 5 of the two passes' balanced share,
// and its rows of a (b, h) (dQ, q, do: L (2 Ep + Evp) floats) are at most ATT_ONE_PASS_MAX a thread
// (16 MiB; as there are then at least 5 / 7 as many (b, h) as threads, all of them together take
// at most about 4 times dq's size). B 1, H 2, T 2048, E 64 causal on one core: one pass 21-22 ms,
// two 30-32; B 1, H 1, T 4096, E 128: 84-103 against 118-119.
#define ATT_ONE_PASS_MAX (INT64_C(1) << 22)
static bool one_pass(const att_job *j, int threads) {
    const char *env = getenv("TORC_ONEDNN_ATTENTION_PASSES");
    if (env && (!strcmp(env, "1") || !strcmp(env, "2"))) return env[0] == '1';
    const int64_t nbh = j->B * j->H, rounds = (nbh + threads - 1) / threads;
    return j->L * (2 * j->Ep + j->Evp) <= ATT_ONE_PASS_MAX && 5 * rounds * threads <= 7 * nbh;
}

int onednn__attention_run(const torc_op *op) {
    const bool bw = op->code == TORC_OP_ATTENTION_BACKWARD;
    const torc_operand *q = &op->in[bw], *k = &op->in[bw + 1], *v = &op->in[bw + 2];
    att_job j = {.op = op, .isa = pick_isa(), .B = q->shape[0], .H = q->shape[1], .L = q->shape[2], .S = k->shape[2],
                 .E = (int)q->shape[3], .Ev = (int)v->shape[3], .scale = (float)op->params.attention.scale,
                 .causal = op->params.attention.causal != 0};
    j.Ep = pad16(j.E), j.Evp = pad16(j.Ev);
    j.nqt = (j.L + ATT_BR - 1) / ATT_BR, j.nkt = (j.S + ATT_BC - 1) / ATT_BC;
    const int64_t nbh = j.B * j.H;
    int64_t ntasks = nbh * (bw ? j.nkt + j.nqt : j.nqt);
    if (ntasks == 0) return 0;
    // Multiply-adds, roughly: L S (E + Ev) forward, about 3.5 times that backward.
    const double work = (double)nbh * (double)j.L * (double)j.S * (double)(j.E + j.Ev) * (bw ? 3.5 : 1.0);
    bool par = ntasks > 1 && work >= (double)ONEDNN_SMALL_WORK && omp_get_max_threads() > 1;
    if (bw && one_pass(&j, par ? omp_get_max_threads() : 1)) {
        j.one_pass = true, ntasks = nbh;
        par = par && ntasks > 1;
    }
    const size_t ws = (att_ws_floats(&j) * sizeof(float) + 63) / 64 * 64;
    float *dall = bw && j.L > 0 ? malloc(sizeof(float) * (size_t)(nbh * j.L)) : NULL;
    if (bw && j.L > 0 && !dall)
        return onednn__error(TORC_ERR_OOM, "onednn: %s: out of memory", onednn__op_name(op->code));
    atomic_bool oom = false;
    if (!par) {
        float *w = aligned_alloc(64, ws);
        if (w) {
            for (int64_t bh = 0; dall && !j.one_pass && bh < nbh; bh++) compute_d(&j, bh, dall, w);
            for (int64_t t = 0; t < ntasks; t++) run_task(&j, w, t, dall);
        }
        atomic_store(&oom, !w);
        free(w);
    } else {
#pragma omp parallel
        {
            float *w = aligned_alloc(64, ws);
            if (!w) atomic_store(&oom, true);
            if (dall && !j.one_pass) {
#pragma omp for schedule(static)
                for (int64_t bh = 0; bh < nbh; bh++)
                    if (w) compute_d(&j, bh, dall, w);
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t t = 0; t < ntasks; t++)
                if (w) run_task(&j, w, t, dall);
            free(w);
        }
    }
    free(dall);
    if (atomic_load(&oom))  // a thread without tiles skipped the tasks it took
        return onednn__error(TORC_ERR_OOM, "onednn: %s: out of memory for %zu bytes of tiles a thread",
                             onednn__op_name(op->code), ws);
    return 0;
}
