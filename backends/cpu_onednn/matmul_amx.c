// backends/cpu_onednn/matmul_amx.c — a bf16 GEMM on AMX tiles: C (f32 or bf16) = A x B with
// bf16 A, B of any strides, f32 accumulation over all of K, one rounding at the end.
// Like oneDNN's bf16 matmul, AMX treats subnormal bf16 inputs and f32 results as zero.
// Built with -mamx-tile -mamx-bf16 -mavx512*; nothing here runs before onednn__amx_usable()
// has checked the CPU (cpuid) and asked the kernel for the tile state, so the backend still
// loads on CPUs without AMX.
//
// Layout. B is packed into 16-pair x 16-column VNNI tiles (row p holds (B[2p][n], B[2p+1][n])
// for 16 n), A into 16-row x 32-k tiles (1 KiB, rows of 64 bytes), both zero-padded to M, N
// multiples of 32 and K a multiple of 32, tile (i, t) at (i * KT + t) KiB so the k run of a
// panel is contiguous. A with unit k stride is not packed where whole tiles lie inside it: tile
// loads read it in place with its row stride. The micro-kernel keeps a 32 x 32 block of C in 4
// accumulator tiles (2 A + 2 B tiles fill the other 4 of the 8 tile registers). Cache blocks:
// MC x NC of C per task (its f32 accumulator in L2), K in steps of up to 2048 so that the C tiles
// stay in registers over a long run of k: on this CPU tile loads and stores do not overlap the
// multiplies, so each round trip of C through the accumulator costs as much as it moves.
// Tasks (blocks) are taken in turn by the threads; each packs the panels its block needs on
// first use (see onednn__amx_gemm).
#define _GNU_SOURCE
#include <immintrin.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "onednn-impl.h"

#define AMX_MC 256  // C rows per task (multiple of 32)
#define AMX_NC 256  // C columns per task (multiple of 32): its f32 accumulator is 256 KiB
#define AMX_KCT 64  // k tiles (of 32) per K block (side by side against 16: 2048^3 and 512x1024x1024
                    // 6% faster; against whole K: 4096^3 10% slower, the panels leave L2)
#define TILE_ELEMS 512  // bf16 elements in one packed 1 KiB tile
// Fewer MC x NC blocks than threads: the blocks are halved (columns first) down to this, so that
// every thread has one. The LM head's input-gradient chunk (256 x 256, K 50304) was one block, and
// one of two threads did all of it. Each element's sum runs over K in the same order whatever the
// blocks, so the bits do not change with them (or with the thread count).
#define AMX_MIN_BLOCK 64

// ---- detection ----
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int amx_state = -1;  // -1 unknown, 0 no, 1 yes (set once under the backend's lock)

bool onednn__amx_usable(void) {
    if (amx_state < 0) {
        const char *env = getenv("TORC_ONEDNN_AMX_GEMM");
        bool ok = !(env && strcmp(env, "0") == 0) && onednn__isa() >= ONEDNN_ISA_AVX512_CORE_AMX;
        // Linux hands out the 8 KiB tile data state only on request (once per process).
        if (ok && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) ok = false;
        amx_state = ok;
    }
    return amx_state == 1;
}

// ---- sizes ----
typedef struct dims {
    int64_t MT, NT, KT;  // tiles: 16-row A tiles, 16-column B tiles (even counts), 32-k tiles
    // A with unit k stride is read in place (tile loads take a row stride), not packed, for the
    // rows [0, Mdir) of whole 32-row panels and the k tiles [0, KTdir) inside K; the rest (the
    // last partial panel, a K tail) is packed with zero padding. 0 when A is packed.
    int64_t Mdir, KTdir;
} dims;

static dims tile_dims(int64_t M, int64_t N, int64_t K, bool a_unit_k) {
    dims d = {(M + 31) / 32 * 2, (N + 31) / 32 * 2, (K + 31) / 32, 0, 0};
    if (a_unit_k) {
        d.Mdir = M / 32 * 32;
        d.KTdir = K / 32;
    }
    return d;
}

static size_t acc_bytes(void) { return (size_t)AMX_MC * AMX_NC * sizeof(float); }

size_t onednn__amx_scratch_bytes(int64_t M, int64_t N, int64_t K, int nthreads) {
    const dims d = tile_dims(M, N, K, false);
    const size_t panels = (size_t)((d.MT * 16 + AMX_MIN_BLOCK - 1) / AMX_MIN_BLOCK +
                                   (d.NT * 16 + AMX_MIN_BLOCK - 1) / AMX_MIN_BLOCK);  // blocks at their smallest
    return (size_t)(d.MT + d.NT) * (size_t)d.KT * TILE_ELEMS * 2 + (size_t)nthreads * acc_bytes() +
           panels * 64;  // packed A, B; accumulators; panel states
}

// ---- packing ----
// The 16 dwords of r[0..15] transposed in place: r[j] gets column j.
static inline void transpose16x16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {  // u[4i + j], lane L: column 4L + j of rows 4i..4i+3
        u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int j = 0; j < 4; j++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
        const __m512i v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
        const __m512i v2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        const __m512i v3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
        r[j] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        r[j + 8] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
        r[j + 4] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        r[j + 12] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
    }
}

static inline __mmask32 mask32(int64_t n) { return n >= 32 ? 0xffffffffu : n <= 0 ? 0 : (1u << n) - 1; }
static inline __mmask16 mask16(int64_t n) { return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

// 16 bf16 of a strided line (x[i * s]), zero past n: the generic path.
static inline __m256i load16_strided(const uint16_t *x, int64_t s, int64_t n) {
    if (s == 1) return _mm256_maskz_loadu_epi16(mask16(n), x);
    uint16_t v[16] = {0};
    for (int64_t i = 0; i < n && i < 16; i++) v[i] = x[i * s];
    return _mm256_loadu_si256((const __m256i *)v);
}

// Two lines of 16 bf16 interleaved into 16 dwords (lo[i], hi[i]).
static inline __m512i interleave(__m256i lo, __m256i hi) {
    return _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
}

// A tile (rows m0.., k0..) of A (M x K, strides rs, cs) into dst (16 rows of 32 bf16).
static void pack_a_tile(uint16_t *dst, const uint16_t *a, int64_t rs, int64_t cs, int64_t M,
                        int64_t K, int64_t m0, int64_t k0) {
    const int64_t mn = M - m0, kn = K - k0;
    if (mn <= 0) {  // padding rows
        memset(dst, 0, TILE_ELEMS * 2);
        return;
    }
    if (cs == 1) {  // rows of k: 64-byte copies
        for (int r = 0; r < 16; r++) {
            const __m512i v = r < mn ? _mm512_maskz_loadu_epi16(mask32(kn), a + (m0 + r) * rs + k0)
                                     : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + r * 32, v);
        }
        return;
    }
    // k pairs as dwords over 16 m (a line of m per k), then a dword transpose: row r = its pairs.
    __m512i p[16];
    for (int q = 0; q < 16; q++) {
        const int64_t k = k0 + 2 * q;
        const __m256i lo = k < K ? load16_strided(a + m0 * rs + k * cs, rs, mn) : _mm256_setzero_si256();
        const __m256i hi = k + 1 < K ? load16_strided(a + m0 * rs + (k + 1) * cs, rs, mn) : _mm256_setzero_si256();
        p[q] = interleave(lo, hi);
    }
    transpose16x16(p);
    for (int r = 0; r < 16; r++) _mm512_storeu_si512(dst + r * 32, p[r]);
}

// A VNNI tile (k0.., columns n0..) of B (K x N, strides rs, cs) into dst (16 pair rows x 16 dwords).
static void pack_b_tile(uint16_t *dst, const uint16_t *b, int64_t rs, int64_t cs, int64_t K,
                        int64_t N, int64_t k0, int64_t n0) {
    const int64_t kn = K - k0, nn = N - n0;
    if (nn <= 0) {  // padding columns
        memset(dst, 0, TILE_ELEMS * 2);
        return;
    }
    if (rs == 1 && cs != 1) {  // columns of k: each column's 32 k are 16 pairs, then transpose
        __m512i p[16];
        for (int c = 0; c < 16; c++)
            p[c] = c < nn ? _mm512_maskz_loadu_epi16(mask32(kn), b + (n0 + c) * cs + k0) : _mm512_setzero_si512();
        transpose16x16(p);
        for (int q = 0; q < 16; q++) _mm512_storeu_si512(dst + q * 32, p[q]);
        return;
    }
    for (int q = 0; q < 16; q++) {  // two lines of n per pair
        const int64_t k = k0 + 2 * q;
        const __m256i lo = k < K ? load16_strided(b + k * rs + n0 * cs, cs, nn) : _mm256_setzero_si256();
        const __m256i hi = k + 1 < K ? load16_strided(b + (k + 1) * rs + n0 * cs, cs, nn) : _mm256_setzero_si256();
        _mm512_storeu_si512(dst + q * 32, interleave(lo, hi));
    }
}

// ---- output ----
// 32 f32 -> bf16 (lo = elements 0..15): round to nearest even, NaN -> 0x7FC0 (torc_f32_to_bf16,
// PyTorch). vcvtne2ps2bf16 treats subnormal inputs as zero, which changes nothing here: the
// accumulators hold AMX results, and AMX flushes subnormal results to zero.
static inline __m512i to_bf16x32(__m512 lo, __m512 hi) {
    const __m512i r = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    const __mmask32 nan = _mm512_kunpackw(_mm512_cmp_ps_mask(hi, hi, _CMP_UNORD_Q),
                                          _mm512_cmp_ps_mask(lo, lo, _CMP_UNORD_Q));
    return _mm512_mask_mov_epi16(r, nan, _mm512_set1_epi16(0x7fc0));
}

// Rows [0, mn) x columns [0, nn) (nn <= 32) of the f32 block acc (row stride lda floats) into C
// at (m0, n0).
static void write_out(const onednn_amx_gemm *g, const float *acc, int64_t lda, int64_t m0,
                      int64_t n0, int64_t mn, int64_t nn) {
    for (int64_t i = 0; i < mn; i++) {
        const float *src = acc + i * lda;
        if (g->c_f32) {
            float *dst = (float *)g->c + (m0 + i) * g->c_rs + n0 * g->c_cs;
            if (g->c_cs == 1) {
                for (int64_t j = 0; j < nn; j += 16)
                    _mm512_mask_storeu_ps(dst + j, mask16(nn - j), _mm512_loadu_ps(src + j));
            } else {
                for (int64_t j = 0; j < nn; j++) dst[j * g->c_cs] = src[j];
            }
        } else {
            uint16_t *dst = (uint16_t *)g->c + (m0 + i) * g->c_rs + n0 * g->c_cs;
            const __m512i h = to_bf16x32(_mm512_loadu_ps(src), _mm512_loadu_ps(src + 16));
            if (g->c_cs == 1) {
                _mm512_mask_storeu_epi16(dst, mask32(nn), h);
            } else {
                uint16_t v[32];
                _mm512_storeu_si512(v, h);
                for (int64_t j = 0; j < nn; j++) dst[j * g->c_cs] = v[j];
            }
        }
    }
}

// ---- the kernel ----
typedef struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

// Every tile register is 16 rows x 64 bytes: tmm0-3 C (f32), tmm4-5 A, tmm6-7 B (VNNI).
static void config_tiles(void) {
    tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    _tile_loadconfig(&cfg);
}

// Eight nops after each tile instruction of the inner loop. Issued back to back, tile instructions
// run slower on this CPU (cause unknown: a front-end or TMUL queue effect; loop alignment is not
// it). Side by side: gaps after the multiplies alone made the GEMM 11% faster at 2048^3 and 14-16%
// on Cruncher's shapes (512x1024x1024, 1024x1024x512); gaps after the loads too add 19-20% to
// the inner loop; 4 nops are 8-10% slower than 8, 16 even, 32 4% slower; integer adds work as nops do.
#define TILE_GAP() __asm__ volatile("nop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop")

// K tile t of an A panel into tile register reg (a constant): for t < kdir read in place from src
// (row stride sa bytes), else from the packed tiles at pk.
#define LOAD_A(reg, src, pk, t, kdir, sa)                          \
    do {                                                           \
        if ((t) < (kdir)) _tile_loadd(reg, (src) + (t) * 32, sa);  \
        else _tile_loadd(reg, (pk) + (t) * TILE_ELEMS, 64);        \
    } while (0)

// One MC x NC task of C: rows [m0, m1), columns [n0, n1) of the padded C (multiples of 32).
static void run_block(const onednn_amx_gemm *g, const dims *d, const uint16_t *ap, const uint16_t *bp,
                      float *acc, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const int64_t KT = d->KT, lda = AMX_NC;
    const size_t ldb = AMX_NC * sizeof(float);
    for (int64_t kb = 0; kb < KT; kb += AMX_KCT) {
        const int64_t kn = KT - kb < AMX_KCT ? KT - kb : AMX_KCT;
        const bool first = kb == 0, last = kb + kn == KT;
        for (int64_t m = m0; m < m1; m += 32) {
            const uint16_t *a0 = ap + ((m / 16) * KT + kb) * TILE_ELEMS, *a1 = a0 + KT * TILE_ELEMS;
            // In place: rows m.. of A from k tile kb, row stride sa bytes.
            const bool dir = m + 32 <= d->Mdir;
            const uint16_t *s0 = g->a + m * g->a_rs + kb * 32, *s1 = s0 + 16 * g->a_rs;
            const size_t sa = (size_t)g->a_rs * 2;
            const int64_t kdir = dir ? d->KTdir - kb : 0;  // t < kdir: in place
            for (int64_t n = n0; n < n1; n += 32) {
                const uint16_t *b0 = bp + ((n / 16) * KT + kb) * TILE_ELEMS, *b1 = b0 + KT * TILE_ELEMS;
                float *c = acc + (m - m0) * lda + (n - n0);
                if (first) {
                    _tile_zero(0);
                    _tile_zero(1);
                    _tile_zero(2);
                    _tile_zero(3);
                } else {
                    _tile_loadd(0, c, ldb);
                    _tile_loadd(1, c + 16, ldb);
                    _tile_loadd(2, c + 16 * lda, ldb);
                    _tile_loadd(3, c + 16 * lda + 16, ldb);
                }
                // Tile loads do not overlap tile multiplies on this CPU (measured: four 1 KiB loads
                // cost 0.8x the time of four multiplies, added to it), so the loads of step t + 1
                // follow the multiply that last reads their register: 7-17% faster than loading each
                // step's tiles before its multiplies. (Software prefetch of the next panel measured
                // 15% slower: the tile loads queue behind it.)
                LOAD_A(4, s0, a0, 0, kdir, sa);
                LOAD_A(5, s1, a1, 0, kdir, sa);
                _tile_loadd(6, b0, 64);
                _tile_loadd(7, b1, 64);
                for (int64_t t = 0; t + 1 < kn; t++) {
                    _tile_dpbf16ps(0, 4, 6);
                    TILE_GAP();
                    _tile_dpbf16ps(2, 5, 6);
                    TILE_GAP();
                    _tile_loadd(6, b0 + (t + 1) * TILE_ELEMS, 64);
                    TILE_GAP();
                    _tile_dpbf16ps(1, 4, 7);
                    TILE_GAP();
                    LOAD_A(4, s0, a0, t + 1, kdir, sa);
                    TILE_GAP();
                    _tile_dpbf16ps(3, 5, 7);
                    TILE_GAP();
                    LOAD_A(5, s1, a1, t + 1, kdir, sa);
                    TILE_GAP();
                    _tile_loadd(7, b1 + (t + 1) * TILE_ELEMS, 64);
                    TILE_GAP();
                }
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(3, 5, 7);
                _tile_stored(0, c, ldb);
                _tile_stored(1, c + 16, ldb);
                _tile_stored(2, c + 16 * lda, ldb);
                _tile_stored(3, c + 16 * lda + 16, ldb);
                if (last && m < g->M && n < g->N)
                    write_out(g, c, lda, m, n, g->M - m < 32 ? g->M - m : 32, g->N - n < 32 ? g->N - n : 32);
            }
        }
    }
}

// ---- the GEMM ----
// Panels are packed on first use, not in a phase of their own: a thread about to compute a block
// packs the panels it needs that no one has claimed, then waits for those another thread is
// packing. No barrier: on a shared machine one thread may stall for a whole time slice.
typedef struct panel_state {
    _Atomic int v;  // 0 not packed, 1 being packed, 2 packed
    char pad[60];   // one per cache line
} panel_state;
_Static_assert(sizeof(panel_state) == 64, "a panel state fills one cache line");

static bool claim(panel_state *s) {
    int zero = 0;
    return atomic_load_explicit(&s->v, memory_order_relaxed) == 0 &&
           atomic_compare_exchange_strong(&s->v, &zero, 1);
}

static void wait_packed(panel_state *s) {
    for (int spins = 0; atomic_load_explicit(&s->v, memory_order_acquire) != 2; spins++) {
        if (spins < 4096) _mm_pause();
        else sched_yield();  // the packer may be waiting for this core
    }
}

// Block-row rows [mt0, mt1) (16-row tiles) of A, every k tile, read in the source's order.
static void pack_a_rows(const onednn_amx_gemm *g, const dims *d, uint16_t *ap, int64_t mt0, int64_t mt1) {
    const bool kin = g->a_cs <= g->a_rs;
    const int64_t nm = mt1 - mt0, n = nm * d->KT;
    for (int64_t i = 0; i < n; i++) {
        const int64_t mt = mt0 + (kin ? i / d->KT : i % nm), kt = kin ? i % d->KT : i / nm;
        if (mt * 16 < d->Mdir && kt < d->KTdir) continue;  // read in place
        pack_a_tile(ap + (mt * d->KT + kt) * TILE_ELEMS, g->a, g->a_rs, g->a_cs, g->M, g->K, mt * 16, kt * 32);
    }
}

// Two whole VNNI tiles side by side (k0.., columns n0..n0+31 inside B) of a row-major B (K x N,
// row stride rs): one 64-byte load per row, its pairs interleaved by a two-source permute.
static void pack_b_tile_pair(uint16_t *dst0, uint16_t *dst1, const uint16_t *b, int64_t rs, int64_t k0,
                             int64_t n0) {
    static const uint16_t lo_idx[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                        8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i lo = _mm512_loadu_si512(lo_idx), hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    for (int q = 0; q < 16; q++) {
        const uint16_t *r = b + (k0 + 2 * q) * rs + n0;
        const __m512i r0 = _mm512_loadu_si512(r), r1 = _mm512_loadu_si512(r + rs);
        _mm512_storeu_si512(dst0 + q * 32, _mm512_permutex2var_epi16(r0, lo, r1));
        _mm512_storeu_si512(dst1 + q * 32, _mm512_permutex2var_epi16(r0, hi, r1));
    }
}

static void pack_b_cols(const onednn_amx_gemm *g, const dims *d, uint16_t *bp, int64_t nt0, int64_t nt1) {
    if (g->b_cs == 1 && g->b_rs != 1) {  // row-major: pairs of column tiles, k tile by k tile
        for (int64_t kt = 0; kt < d->KT; kt++)
            for (int64_t nt = nt0; nt < nt1; nt++) {
                uint16_t *dst = bp + (nt * d->KT + kt) * TILE_ELEMS;
                if (nt + 1 < nt1 && (kt + 1) * 32 <= g->K && (nt + 2) * 16 <= g->N) {
                    pack_b_tile_pair(dst, dst + d->KT * TILE_ELEMS, g->b, g->b_rs, kt * 32, nt * 16);
                    nt++;
                } else {
                    pack_b_tile(dst, g->b, g->b_rs, 1, g->K, g->N, kt * 32, nt * 16);
                }
            }
        return;
    }
    const bool kin = g->b_rs <= g->b_cs;
    const int64_t nn = nt1 - nt0, n = nn * d->KT;
    for (int64_t i = 0; i < n; i++) {
        const int64_t nt = nt0 + (kin ? i / d->KT : i % nn), kt = kin ? i % d->KT : i / nn;
        pack_b_tile(bp + (nt * d->KT + kt) * TILE_ELEMS, g->b, g->b_rs, g->b_cs, g->K, g->N, kt * 32, nt * 16);
    }
}

typedef struct gemm_run {
    const onednn_amx_gemm *g;
    dims d;
    int64_t Mp, Np, mc, nc, bm, bn;  // mc x nc: the blocks of C, bm x bn of them
    uint16_t *ap, *bp;
    float *accs;
    panel_state *rows, *cols;
} gemm_run;

// One thread's share: blocks taken in turn (by the dynamic loop when inside a parallel region).
static void gemm_thread(const gemm_run *r, int tid) {
    config_tiles();
    float *acc = r->accs + (size_t)tid * AMX_MC * AMX_NC;
#pragma omp for schedule(dynamic, 1)
    for (int64_t blk = 0; blk < r->bm * r->bn; blk++) {
        const int64_t i = blk / r->bn, j = blk % r->bn, m0 = i * r->mc, n0 = j * r->nc;
        const int64_t m1 = m0 + r->mc < r->Mp ? m0 + r->mc : r->Mp;
        const int64_t n1 = n0 + r->nc < r->Np ? n0 + r->nc : r->Np;
        if (claim(&r->rows[i])) {
            pack_a_rows(r->g, &r->d, r->ap, m0 / 16, m1 / 16);
            atomic_store_explicit(&r->rows[i].v, 2, memory_order_release);
        }
        if (claim(&r->cols[j])) {
            pack_b_cols(r->g, &r->d, r->bp, n0 / 16, n1 / 16);
            atomic_store_explicit(&r->cols[j].v, 2, memory_order_release);
        }
        wait_packed(&r->rows[i]);
        wait_packed(&r->cols[j]);
        run_block(r->g, &r->d, r->ap, r->bp, acc, m0, m1, n0, n1);
    }
    _tile_release();
}

void onednn__amx_gemm(const onednn_amx_gemm *g, void *scratch, int nthreads) {
    // A read in place needs unit k stride. Rows a multiple of 4 KiB apart are packed all the same:
    // a tile's 16 rows would then share one L1 set (12 ways) and lie on 16 pages (measured side
    // by side: 2048^3 7-12% and 4096^3 24% faster packed; rows 2 KiB apart gain nothing from
    // packing).
    const bool in_place = g->a_cs == 1 && g->a_rs * 2 % 4096 != 0;
    gemm_run r = {.g = g, .d = tile_dims(g->M, g->N, g->K, in_place)};
    r.Mp = r.d.MT * 16;
    r.Np = r.d.NT * 16;
    r.mc = AMX_MC, r.nc = AMX_NC;
    for (;;) {
        r.bm = (r.Mp + r.mc - 1) / r.mc;
        r.bn = (r.Np + r.nc - 1) / r.nc;
        if (r.bm * r.bn >= nthreads || (r.mc <= AMX_MIN_BLOCK && r.nc <= AMX_MIN_BLOCK)) break;
        if (r.nc > AMX_MIN_BLOCK && (r.nc >= r.mc || r.mc <= AMX_MIN_BLOCK)) r.nc /= 2;
        else r.mc /= 2;
    }
    r.ap = scratch;
    r.bp = r.ap + (size_t)r.d.MT * r.d.KT * TILE_ELEMS;
    r.accs = (float *)(r.bp + (size_t)r.d.NT * r.d.KT * TILE_ELEMS);
    r.rows = (panel_state *)(r.accs + (size_t)nthreads * AMX_MC * AMX_NC);
    r.cols = r.rows + r.bm;
    for (int64_t i = 0; i < r.bm + r.bn; i++) atomic_init(&r.rows[i].v, 0);
    int nt = nthreads;
    if (nt > r.bm * r.bn) nt = (int)(r.bm * r.bn);
    if (nt <= 1) {  // no parallel region: one block leaves OpenMP's team as it is
        gemm_thread(&r, 0);
        return;
    }
#pragma omp parallel num_threads(nt)
    gemm_thread(&r, omp_get_thread_num());
}
