// backends/cpu_onednn/matmul_fma.c — torc's own f32-FMA GEMM for f16 and bf16 operands (and f32):
// C (f32, f16 or bf16) = A x B, the operands converted to f32 while they are packed (no separate
// conversion pass, no f32 copy of a whole operand), f32 accumulation over all of K, one rounding.
// Products of two f16 or bf16 values are exact in f32, as on the via-f32 path it replaces.
// MATMUL_ROUNDED (autocast's matmul without its casts) runs here too: f32 operands are rounded to
// c while they are packed and the sums to c as they are written out (backend.h).
//
// BLIS-style blocking. B is packed a column block (NC wide) at a time over all of K: micro-panels
// of NR columns, k-major (NR floats per k). Each task (a block of MC rows, and of the block's
// columns) converts its rows of A, KC k at a time, and runs the MR x NR register-blocked
// micro-kernel on each MR rows of A against every B micro-panel of its columns: A broadcast, B
// loaded as vectors, MR x NR accumulators in registers for a run of KC k. A is converted as it lies
// (pack_a): row-major A into rows of k (K up to 256), column-major A into k-runs of rows, others
// packed into MR-row micro-panels. The conversions read f16 / bf16 with F16C and AVX2, which every AVX2 CPU has
// (F16C is checked all the same), and runs of 16 with AVX-512 where torc's ISA has it. On Zen 4 a
// small row-major B is not packed: the kernels read its micro-panels where they are and convert
// them in the loop (b_in_place). The kernels write C itself where its column stride is 1 and it is
// f32 (each run of k adds its sums) or f16 / bf16 of K one run (stored from registers); else each
// run adds into the task's f32 accumulator block, written out (rounded once) after the last run.
// The micro-kernels are compiled with per-function target attributes and chosen at run time by
// torc's ISA (isa.c; TORC_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA cap it): Zen 4 (16 x 16 with 12, 8 and
// 4 rows x 32 for a block's last rows up to K = 256, then 12, 8 and 4 x 32), other AVX-512 (12 x 32, 8 and 4 x 32) and AVX2 + FMA
// (6 x 16, 4 and 2 x 16). Nothing here runs below AVX2 (onednn__fma_usable). Packed B takes at
// most max(FMA_B_FLOATS, NR x K) floats, less than the f32 copy of B the conversions made. GEMMs
// under ONEDNN_SMALL_WORK multiply-adds take a path of their own (small_gemm). On Intel's AVX-512
// cores B blocks are 1 MiB, and a long K whose block is narrower than C runs as GEMMs of 1024 k
// added in order (k_outer).
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_split.h"
#include "onednn-impl.h"
#include "torc/convert.h"

// Measured side by side on one Zen 4 core (AVX-512 kernel, best CPU time of 3-10 alternating
// runs): 1024^3 f32 with KC 1024 / MC 96 103-105 GFLOP/s; KC 512 96-100; KC 384 with the B
// micro-panel kept in L1 (A block in L2, the textbook order) 82-95; KC 128-256 80-92; 2048^3 KC
// 2048 103-105 against KC 1024 100 (AVX2 kernel: 102 against 99). Long runs of k win here: each
// tile's C goes through memory once per run, and the packed A micro-panel and B stream from L1 /
// L2 fast enough at 24 FMAs per k (the kernel alone: 116 GFLOP/s from L1, 110 streaming B from L3).
#define FMA_KC 2048      // k per micro-kernel run (and per packed A block)
#define FMA_MC 96        // rows of A per task (a multiple of every MR)
#define FMA_B_FLOATS (INT64_C(3) << 19)  // packed B column block: at most this many floats (6 MiB)
// ... on Intel's AVX-512 cores (the 12 x 32 kernels of other AVX-512): 1 MiB, half a Sapphire Rapids
// core's 2 MiB L2, since each row of tiles streams the whole block. With 6 MiB the block came from
// L3 for every 12 rows; one loaded Sapphire Rapids class core, f32, best of 5-9 interleaved runs in
// CPU time, GFLOP/s 6 MiB -> 1 MiB: (1024, 384) x (384, 1152) 95 -> 109, x (384, 1536) 106 -> 129, the
// weight gradients (384, 1024) x (1024, 1536) 83 -> 121 and (256, 1024) x (1024, 768) 70 -> 84.
// (512 KiB measured no better; runs of 512 or 256 k instead of 2048 gained nothing at K 1024-1536.)
#define FMA_B_FLOATS_INTEL512 (INT64_C(1) << 18)
#define FMA_K_OUTER 512  // k of k_outer's GEMMs (one 512 KiB B block at N 256)
#define FMA_MR_MAX 16
// A block of A converted as rows of k (pack_a) has rows a_ld(kc) floats apart: an odd number of
// cache lines and 16 bytes, so that a tile's rows fall in different sets of the L1 cache and start
// at different offsets of a line. Rows 4 KiB + 16 bytes apart (kc 1024: every row in one set) ran
// an AVX2 512 x 1024 x 1024 f16 GEMM 3% slower than from panels; rows 1 KiB apart (kc 256, one
// offset for all) the D=256 f16 forward GEMM 1.5 us slower.
#define FMA_A_LD (FMA_KC + 20)  // the most a_ld gives
#define FMA_NR_MAX 32
#define FMA_B_GROUP 128  // columns of a row-major B packed a row at a time (pack_b)

// ---- rounding to f16 / bf16 ----
// How a kernel leaves its sums: as they are, or rounded to f16 or bf16 (MATMUL_ROUNDED's last
// run of k into an f32 C: the sums' rounding done in registers, not in a pass over C), or stored
// as f16 or bf16 (an f16 / bf16 C whose K is one run: c is that C, ldc counted in its elements).
typedef enum fma_round { ROUND_NONE, ROUND_F16, ROUND_BF16, STORE_F16, STORE_BF16 } fma_round;

// f32 values rounded to bf16 and back: torc_f32_to_bf16's rounding (to nearest even, NaN 0x7FC0).
// (round_bf16_8 / _16 below; store16_8 / _16 write them as 16-bit values.)
__attribute__((target("avx2"))) static inline __m256 round_bf16_8(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))),
                                       _mm256_set1_epi32((int)0xFFFF0000u));
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    return _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), nan);
}

#define TGT512 "avx512f,avx512bw,avx512vl,avx2,f16c"
__attribute__((target(TGT512))) static inline __m512 round_bf16_16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))),
                                       _mm512_set1_epi32((int)0xFFFF0000u));
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(nan, _mm512_castsi512_ps(r), _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
}

// ---- element loads: f32, f16 or bf16 read as f32 (packing, and Zen 4's kernels' B) ----
// How packing reads an operand: its dtype, and for an f32 one of MATMUL_ROUNDED the dtype its
// values are rounded to first (as the cast autocast would otherwise make).
typedef enum src_kind { SRC_F32, SRC_F16, SRC_BF16, SRC_F32_AS_F16, SRC_F32_AS_BF16 } src_kind;
enum { SRC_KINDS = SRC_F32_AS_BF16 + 1 };

static src_kind src_of(dnnl_data_type_t dt, dnnl_data_type_t round) {
    if (dt == dnnl_f16) return SRC_F16;
    if (dt == dnnl_bf16) return SRC_BF16;
    return round == dnnl_f16 ? SRC_F32_AS_F16 : round == dnnl_bf16 ? SRC_F32_AS_BF16 : SRC_F32;
}

static int64_t src_size(src_kind k) { return k == SRC_F16 || k == SRC_BF16 ? 2 : 4; }

__attribute__((target("avx2"))) static inline __m128 round_bf16_4(__m128 v) {
    const __m128i u = _mm_castps_si128(v);
    const __m128i lsb = _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(1));
    const __m128i r = _mm_and_si128(_mm_add_epi32(u, _mm_add_epi32(lsb, _mm_set1_epi32(0x7FFF))),
                                    _mm_set1_epi32((int)0xFFFF0000u));
    const __m128 nan = _mm_cmpunord_ps(v, v);
    return _mm_blendv_ps(_mm_castsi128_ps(r), _mm_castsi128_ps(_mm_set1_epi32(0x7FC00000)), nan);
}

static float load_one(src_kind k, const void *src, int64_t i) {
    if (k == SRC_F16 || k == SRC_BF16) {
        const uint16_t h = ((const uint16_t *)src)[i];
        return k == SRC_F16 ? torc_f16_to_f32(h) : torc_bf16_to_f32(h);
    }
    const float f = ((const float *)src)[i];
    if (k == SRC_F32_AS_F16) return torc_f16_to_f32(torc_f32_to_f16(f));
    return k == SRC_F32_AS_BF16 ? torc_bf16_to_f32(torc_f32_to_bf16(f)) : f;
}

// 8 (4) contiguous elements of kind k at p as f32.
__attribute__((target("avx2,f16c"))) static inline __m256 load8(src_kind k, const char *p) {
    if (k == SRC_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    if (k == SRC_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    const __m256 v = _mm256_loadu_ps((const float *)p);
    if (k == SRC_F32_AS_F16) return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    return k == SRC_F32_AS_BF16 ? round_bf16_8(v) : v;
}

__attribute__((target("avx2,f16c"))) static inline __m128 load4(src_kind k, const char *p) {
    if (k == SRC_F16) return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)p));
    if (k == SRC_BF16)
        return _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)p)), 16));
    const __m128 v = _mm_loadu_ps((const float *)p);
    if (k == SRC_F32_AS_F16) return _mm_cvtph_ps(_mm_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    return k == SRC_F32_AS_BF16 ? round_bf16_4(v) : v;
}

// 8 f32 at p rounded to bf16 by split_bf16_8 (the checked kernels' B; k is SRC_F32_AS_BF16).
__attribute__((target("avx2"))) static inline __m256 load8_split(src_kind k, const char *p) {
    (void)k;
    return split_bf16_8(_mm256_loadu_ps((const float *)p));
}

// 16 contiguous elements of kind k at p as f32 (AVX-512: half the instructions of two load8).
__attribute__((target(TGT512))) static inline __m512 load16(src_kind k, const char *p) {
    if (k == SRC_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    if (k == SRC_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
    const __m512 v = _mm512_loadu_ps((const float *)p);
    if (k == SRC_F32_AS_F16) return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    return k == SRC_F32_AS_BF16 ? round_bf16_16(v) : v;
}

// A kernel's row of W sums as the 16-bit values of STORE_F16 / STORE_BF16 (what write_out's
// onednn__f32_to_f16 / _bf16 give).
__attribute__((target("avx2,f16c"))) static inline void store16_8(uint16_t *p, __m256 v, fma_round rnd) {
    if (rnd == STORE_F16) {
        _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        return;
    }
    const __m256i h = _mm256_srli_epi32(_mm256_castps_si256(round_bf16_8(v)), 16);
    _mm_storeu_si128((__m128i *)p, _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
}
__attribute__((target(TGT512))) static inline void store16_16(uint16_t *p, __m512 v, fma_round rnd) {
    if (rnd == STORE_F16) {
        _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        return;
    }
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(round_bf16_16(v)), 16)));
}

// ---- micro-kernels ----
// c (MR x NR, row stride ldc) = (add ? c : 0) + the kc-long dot products of A's MR rows at a and
// B's NR columns at b (k's row bk bytes after k - 1's: a packed micro-panel of f32, or B itself read
// in place), rounded as rnd says. A: a packed micro-panel (MR floats for each k, ak floats apart),
// or, for the _rows kernels, MR rows of k (row i at a + i * ar floats, its k contiguous). The _first
// kernels also store B's micro-panel as they convert it, packed, at pk (NR floats a k; see b_first_row).
// Returns false where a checked kernel (split_bf16_8) left C as it was: its B needs the exact rounding.
typedef bool (*fma_kernel)(int64_t kc, const float *a, int64_t ar, int64_t ak, const void *b, int64_t bk, float *c,
                           int64_t ldc, bool add, fma_round rnd, float *pk);

// acc += A's row i at this k broadcast x bv. Zen 4 (FMA_BCAST512_MEM): the broadcast inside the
// FMA (an EVEX memory operand, {1to16}) instead of a vbroadcastss beside it: there the separate
// broadcasts take the vector pipes that converting B needs, and a 12 x 32 kernel reading f16 B in
// place ran at 109 GFLOP/s with them (f32 rounded to f16: 98) against 118 with the broadcasts in
// the FMAs, as fast as from a packed f32 panel. Elsewhere (FMA_BCAST512: one vbroadcastss a row,
// its register feeding both FMAs): an Intel core with two 512-bit FMA units would need 26 loads a
// k for 24 FMAs in 12 cycles, more than two load ports give (by the count; no such CPU was at hand).
// Panels: row i at a + i. Rows (the _ROW forms): row i at q[i / 3] + (i % 3) * x bytes, a base
// and index register each (a + i * ar as compiled took an lea, and spills, for each FMA: a
// Cruncher D=256 forward GEMM 5% slower than from panels).
#define FMA_BCAST512_MEM(acc, i, bv) __asm__("vfmadd231ps %[x]%{1to16%}, %[y], %[z]" : [z] "+v"(acc) : [y] "v"(bv), [x] "m"(a[i]))
#define FMA_BCAST512(acc, i, bv) (acc) = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), (bv), (acc))
#define FMA_BCAST256(acc, i, bv) (acc) = _mm256_fmadd_ps(_mm256_set1_ps(a[i]), (bv), (acc))
// (The row forms read A without naming it to the compiler: nothing in a kernel writes A.)
#define ROW_Q(i) [q] "r"(q[(i) / 3]), [x] "r"(x)
#define ROW_MEM0 "(%[q])"
#define ROW_MEM1 "(%[q],%[x],1)"
#define ROW_MEM2 "(%[q],%[x],2)"
#define FMA_ROW512_MEM(acc, i, bv)                                                                                   \
    do {                                                                                                             \
        if ((i) % 3 == 0) __asm__("vfmadd231ps " ROW_MEM0 "%{1to16%}, %[y], %[z]" : [z] "+v"(acc) : [y] "v"(bv), ROW_Q(i)); \
        else if ((i) % 3 == 1) __asm__("vfmadd231ps " ROW_MEM1 "%{1to16%}, %[y], %[z]" : [z] "+v"(acc) : [y] "v"(bv), ROW_Q(i)); \
        else __asm__("vfmadd231ps " ROW_MEM2 "%{1to16%}, %[y], %[z]" : [z] "+v"(acc) : [y] "v"(bv), ROW_Q(i));       \
    } while (0)
#define ROW_BCAST(dst, i)                                                                                  \
    do {                                                                                                 \
        if ((i) % 3 == 0) __asm__("vbroadcastss " ROW_MEM0 ", %[t]" : [t] "=v"(dst) : ROW_Q(i));           \
        else if ((i) % 3 == 1) __asm__("vbroadcastss " ROW_MEM1 ", %[t]" : [t] "=v"(dst) : ROW_Q(i));      \
        else __asm__("vbroadcastss " ROW_MEM2 ", %[t]" : [t] "=v"(dst) : ROW_Q(i));                        \
    } while (0)
#define FMA_ROW_BCAST(V, P, acc, i, bv)       \
    do {                                       \
        V t_;                                  \
        ROW_BCAST(t_, i);                      \
        (acc) = P##_fmadd_ps(t_, (bv), (acc)); \
    } while (0)
#define FMA_ROW512(acc, i, bv) FMA_ROW_BCAST(__m512, _mm512, acc, i, bv)
#define FMA_ROW256(acc, i, bv) FMA_ROW_BCAST(__m256, _mm256, acc, i, bv)

// stmt for each accumulator (i, v) of an MR x NV tile.
#define FMA_EACH(MR, NV, stmt) \
    _Pragma("GCC unroll 16") for (int i = 0; i < (MR); i++) _Pragma("GCC unroll 2") for (int v = 0; v < (NV); v++) stmt

// One micro-kernel: MR rows x NV vectors of W floats (NR = NV x W), in the vector type V with the
// intrinsics prefix P (_mm512 / _mm256), compiled for TGT; B's elements of kind KIND read with
// LOAD (load16 / load8: a packed panel is SRC_F32), FMA one row's multiply-add (ROWS: A as rows,
// FMA a _ROW form), RB rounds a V to bf16, ST16 stores a V as 16-bit values, PK: B's vectors
// stored at pk as they are read, CHK: NOCHK, or SPLIT for B read by load8_split (CHK##_OR gathers
// its bits, CHK##_OK tells whether the sums stand).
#define FMA_KERNEL(NAME, TGT, V, P, W, MR, NV, RB, LOAD, KIND, FMA, ST16, ROWS, PK, CHK)                     \
    __attribute__((target(TGT))) static bool NAME(int64_t kc, const float *restrict a, int64_t ar, int64_t ak, \
                                                  const void *restrict b, int64_t bk, float *restrict c,      \
                                                  int64_t ldc, bool add, fma_round rnd, float *restrict pk) { \
        V acc[MR][NV], bv[NV], bits = P##_setzero_ps();                                                   \
        const char *bp = b;                                                                               \
        const int64_t half = W * src_size(KIND), x = ar * (int64_t)sizeof(float);                        \
        const char *q[6];                                                                                 \
        _Pragma("GCC unroll 6") for (int j = 0; j < 6; j++) q[j] = (const char *)a + 3 * j * x;           \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                             \
            _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[i][v] = P##_setzero_ps();            \
        for (int64_t k = 0; k < kc; k++) {                                                                \
            _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) bv[v] = LOAD(KIND, bp + v * half);       \
            _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) CHK##_OR(bits, bv[v]);                   \
            if (PK) {                                                                                     \
                _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) P##_storeu_ps(pk + v * W, bv[v]);    \
                pk += NV * W;                                                                             \
            }                                                                                             \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                         \
                _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) FMA(acc[i][v], i, bv[v]);            \
            if (ROWS) {                                                                                   \
                _Pragma("GCC unroll 6") for (int j = 0; j < (MR + 2) / 3; j++) q[j] += sizeof(float);     \
            } else {                                                                                      \
                a += ak;                                                                                  \
            }                                                                                             \
            bp += bk;                                                                                     \
        }                                                                                                 \
        if (!CHK##_OK(acc, bits)) return false;                                                           \
        /* each case a loop of its own: tested inside, the tests doubled an AVX2 K = 64 tile's epilogue */ \
        if (rnd >= STORE_F16) {                                                                           \
            FMA_EACH(MR, NV, ST16((uint16_t *)(void *)c + i * ldc + v * W, acc[i][v], rnd));              \
            return true;                                                                                  \
        }                                                                                                 \
        if (add) FMA_EACH(MR, NV, acc[i][v] = P##_add_ps(acc[i][v], P##_loadu_ps(c + i * ldc + v * W)));  \
        if (rnd == ROUND_F16)                                                                             \
            FMA_EACH(MR, NV, acc[i][v] = P##_cvtph_ps(P##_cvtps_ph(acc[i][v], _MM_FROUND_TO_NEAREST_INT))); \
        else if (rnd == ROUND_BF16)                                                                       \
            FMA_EACH(MR, NV, acc[i][v] = RB(acc[i][v]));                                                  \
        FMA_EACH(MR, NV, P##_storeu_ps(c + i * ldc + v * W, acc[i][v]));                                  \
        return true;                                                                                      \
    }
#define NOCHK_OR(bits, b) ((void)0)
#define NOCHK_OK(acc, bits) ((void)(bits), true)
#define SPLIT_OR(bits, b) ((bits) = _mm256_or_ps((bits), (b)))
#define SPLIT_OK(acc, bits) split_exact8(&(acc)[0][0], (int)(sizeof(acc) / sizeof((acc)[0][0])), (bits))

// Whether a checked kernel's sums stand: none of the split's results (their bits ORed together in
// bits) had low bits set, and no sum is NaN (a NaN of the split's makes its column's sums NaN, as
// fma(a, NaN, s) is NaN for every a and s; a NaN from A or inf - inf is sent to the exact rounding too).
__attribute__((target("avx2"), always_inline)) static inline bool split_exact8(const __m256 *acc, int n, __m256 bits) {
    __m256 nan = _mm256_setzero_ps();
    for (int i = 0; i < n; i++) nan = _mm256_or_ps(nan, _mm256_cmp_ps(acc[i], acc[i], _CMP_UNORD_Q));
    return split_low_bits_zero(bits) && _mm256_testz_ps(nan, nan);
}

// AVX-512: 12 rows x 32 columns; also 8 and 4 rows for the last rows of a block (64 rows as
// 5 x 12 + 4: the full 12-row tile wasted 11% of a Cruncher D=256 GEMM). For packed f32 panels.
// Zen 4: up to K = FMA_SHORT_K 16 rows x 16 columns (a 32-column micro-panel in two halves), then
// 12, 8 and 4 rows x 32 for a block's last rows; for longer K 12, 8 and 4 x 32. Also for B read in
// place as f32, f16, bf16 or f32 rounded to f16 (b_in_place). One B vector feeds 16 FMAs in the
// 16 x 16 tile against 12, and 64 rows are 4 whole tiles: a Cruncher D=256 f16 forward GEMM (B f32
// rounded as read) 75.7 -> 74.4 us (f32 sgemm 74.4).
#define FMA_K512(NAME, MR, NV, KIND, FMA, FMA_ROW)                                                                    \
    FMA_KERNEL(NAME, TGT512 ",fma", __m512, _mm512, 16, MR, NV, round_bf16_16, load16, KIND, FMA, store16_16, 0, 0, NOCHK) \
    FMA_KERNEL(NAME##_rows, TGT512 ",fma", __m512, _mm512, 16, MR, NV, round_bf16_16, load16, KIND, FMA_ROW, store16_16, 1, 0, NOCHK)
#define FMA_KERNELS_ZEN4(MR, NV)                                                               \
    FMA_K512(kernel_zen4_##MR, MR, NV, SRC_F32, FMA_BCAST512_MEM, FMA_ROW512_MEM)               \
    FMA_K512(kernel_zen4_##MR##_f16, MR, NV, SRC_F16, FMA_BCAST512_MEM, FMA_ROW512_MEM)         \
    FMA_K512(kernel_zen4_##MR##_bf16, MR, NV, SRC_BF16, FMA_BCAST512_MEM, FMA_ROW512_MEM)       \
    FMA_K512(kernel_zen4_##MR##_f32h, MR, NV, SRC_F32_AS_F16, FMA_BCAST512_MEM, FMA_ROW512_MEM)
FMA_KERNELS_ZEN4(16, 1)
FMA_KERNELS_ZEN4(12, 2)
FMA_KERNELS_ZEN4(8, 2)
FMA_KERNELS_ZEN4(4, 2)
FMA_K512(kernel_avx512_12, 12, 2, SRC_F32, FMA_BCAST512, FMA_ROW512)
FMA_K512(kernel_avx512_8, 8, 2, SRC_F32, FMA_BCAST512, FMA_ROW512)
FMA_K512(kernel_avx512_4, 4, 2, SRC_F32, FMA_BCAST512, FMA_ROW512)

// AVX2: 6 rows x 16 columns; also 4 and 2 rows for a block's last rows (64 rows as 10 x 6 + 4).
// Packed panels: AVX2 has no broadcast inside an FMA, and beside vbroadcastss converting B in the
// loop of every row of tiles costs more than packing it once. The _first kernels convert f32 B
// rounded to f16 where it is, for the first row of tiles only, and store the panel packed for the
// others (b_first_row).
#define FMA_K256(NAME, MR, KIND, LOAD, PK, CHK)                                                                            \
    FMA_KERNEL(NAME, "avx2,fma,f16c", __m256, _mm256, 8, MR, 2, round_bf16_8, LOAD, KIND, FMA_BCAST256, store16_8, 0, PK, CHK) \
    FMA_KERNEL(NAME##_rows, "avx2,fma,f16c", __m256, _mm256, 8, MR, 2, round_bf16_8, LOAD, KIND, FMA_ROW256, store16_8, 1, PK, CHK)
FMA_K256(kernel_avx2_6, 6, SRC_F32, load8, 0, NOCHK)
FMA_K256(kernel_avx2_4, 4, SRC_F32, load8, 0, NOCHK)
FMA_K256(kernel_avx2_2, 2, SRC_F32, load8, 0, NOCHK)
FMA_K256(kernel_avx2_6_first, 6, SRC_F32_AS_F16, load8, 1, NOCHK)
FMA_K256(kernel_avx2_4_first, 4, SRC_F32_AS_F16, load8, 1, NOCHK)
FMA_K256(kernel_avx2_2_first, 2, SRC_F32_AS_F16, load8, 1, NOCHK)
FMA_K256(kernel_avx2_6_first_bf16, 6, SRC_F32_AS_BF16, load8_split, 1, SPLIT)
FMA_K256(kernel_avx2_4_first_bf16, 4, SRC_F32_AS_BF16, load8_split, 1, SPLIT)
FMA_K256(kernel_avx2_2_first_bf16, 2, SRC_F32_AS_BF16, load8_split, 1, SPLIT)

#define FMA_TILES 4
typedef struct fma_isa {
    int nr;
    int64_t b_floats;      // the packed B block's floats at most (FMA_B_FLOATS, or less)
    int rows[FMA_TILES];   // tile heights: MR, then smaller ones for a block's last rows (0: none), ascending
    bool halves[FMA_TILES];  // the tile's kernels take NR / 2 columns: two calls a micro-panel
    // by A's layout (0: panels, 1: rows of k), B's kind and tile; [SRC_F32] also packed panels; NULL: pack B
    fma_kernel kern[2][SRC_KINDS][FMA_TILES];
    // by A's layout, B's kind and tile: the first row of tiles' kernels (b_first_row); NULL: none
    fma_kernel first[2][SRC_KINDS][FMA_TILES];
} fma_isa;

// Zen 4's kernels where torc runs at the CPU's own ISA level; a TORC_MAX_CPU_ISA cap below it
// stands for another CPU of the capped level (the isa suites' emulation), which gets the others.
// Zen 4's 16 x 16 tiles only for K up to FMA_SHORT_K, whose 16 rows of A (16 KiB of f32) stay in L1
// while both halves of a panel read them: at K = 1024 (64 KiB, streamed from L2 twice a panel) the
// Cruncher D=1024 f16 step ran ~1% slower with them, and with A as rows (16 streams).
#define FMA_SHORT_K 256
#define ZEN4_TILES(rows, S) {kernel_zen4_16##S##rows, kernel_zen4_4##S##rows, kernel_zen4_8##S##rows, kernel_zen4_12##S##rows}
#define ZEN4_TILES_LONG(rows, S) {kernel_zen4_12##S##rows, kernel_zen4_4##S##rows, kernel_zen4_8##S##rows}
#define ZEN4_KINDS(T, rows)                                                                           \
    {[SRC_F32] = T(rows, ), [SRC_F16] = T(rows, _f16), [SRC_BF16] = T(rows, _bf16),                   \
     [SRC_F32_AS_F16] = T(rows, _f32h)}
static fma_isa pick_isa(int64_t K) {
    if (onednn__cpu_half512() && onednn__isa() == onednn__cpu_isa() && K <= FMA_SHORT_K)
        return (fma_isa){32, FMA_B_FLOATS, {16, 4, 8, 12}, {true}, {ZEN4_KINDS(ZEN4_TILES, ), ZEN4_KINDS(ZEN4_TILES, _rows)}, {{{NULL}}}};
    if (onednn__cpu_half512() && onednn__isa() == onednn__cpu_isa())
        return (fma_isa){32, FMA_B_FLOATS, {12, 4, 8}, {false}, {ZEN4_KINDS(ZEN4_TILES_LONG, ), ZEN4_KINDS(ZEN4_TILES_LONG, _rows)},
                         {{{NULL}}}};
    if (onednn__isa() >= ONEDNN_ISA_AVX512_CORE)
        return (fma_isa){32, onednn__cpu_is_intel() ? FMA_B_FLOATS_INTEL512 : FMA_B_FLOATS, {12, 4, 8}, {false},
                         {{[SRC_F32] = {kernel_avx512_12, kernel_avx512_4, kernel_avx512_8}},
                                                  {[SRC_F32] = {kernel_avx512_12_rows, kernel_avx512_4_rows, kernel_avx512_8_rows}}},
                         {{{NULL}}}};
    return (fma_isa){16, FMA_B_FLOATS, {6, 2, 4}, {false}, {{[SRC_F32] = {kernel_avx2_6, kernel_avx2_2, kernel_avx2_4}},
                                             {[SRC_F32] = {kernel_avx2_6_rows, kernel_avx2_2_rows, kernel_avx2_4_rows}}},
                     {{[SRC_F32_AS_F16] = {kernel_avx2_6_first, kernel_avx2_2_first, kernel_avx2_4_first},
                       [SRC_F32_AS_BF16] = {kernel_avx2_6_first_bf16, kernel_avx2_2_first_bf16, kernel_avx2_4_first_bf16}},
                      {[SRC_F32_AS_F16] = {kernel_avx2_6_first_rows, kernel_avx2_2_first_rows, kernel_avx2_4_first_rows},
                       [SRC_F32_AS_BF16] = {kernel_avx2_6_first_bf16_rows, kernel_avx2_2_first_bf16_rows,
                                            kernel_avx2_4_first_bf16_rows}}}};
}

// The tile for the rows [ir, m) of a block: MR, or the smallest smaller tile that holds them.
// Returns its height; *t: its index in rows / kern.
static int tile_rows(const fma_isa *isa, int64_t left, int *t) {
    for (int i = 1; i < FMA_TILES; i++)
        if (isa->rows[i] && left <= isa->rows[i]) {
            *t = i;
            return isa->rows[i];
        }
    *t = 0;
    return isa->rows[0];
}

// TORC_ONEDNN_FMA_GEMM, read once a process, at the first matmul that asks (README): 0 off, 1
// every f16 / bf16 size on the tiles, all f32 too, else the default. (Read at every GEMM, its
// getenv was 0.4 us of a Cruncher D=256 f16 step on a Zen 4 core.)
typedef enum fma_env { FMA_ENV_DEFAULT, FMA_ENV_OFF, FMA_ENV_TILES, FMA_ENV_ALL } fma_env;
static fma_env fma_env_get(void) {
    static _Atomic int cached = -1;
    int v = atomic_load(&cached);
    if (v < 0) {
        const char *env = getenv("TORC_ONEDNN_FMA_GEMM");
        v = !env ? FMA_ENV_DEFAULT
            : strcmp(env, "0") == 0 ? FMA_ENV_OFF
            : strcmp(env, "1") == 0 ? FMA_ENV_TILES
            : strcmp(env, "all") == 0 ? FMA_ENV_ALL : FMA_ENV_DEFAULT;
        atomic_store(&cached, v);
    }
    return (fma_env)v;
}

bool onednn__fma_usable(void) {
    return fma_env_get() != FMA_ENV_OFF && onednn__isa() >= ONEDNN_ISA_AVX2 && onednn__cpu_has_f16c();
}

int64_t onednn__fma_min_work(void) {
    const fma_env e = fma_env_get();
    return e == FMA_ENV_TILES || e == FMA_ENV_ALL ? 0 : ONEDNN_SMALL_WORK;
}

bool onednn__fma_f32(void) { return fma_env_get() == FMA_ENV_ALL && onednn__isa() >= ONEDNN_ISA_AVX2; }

// ---- sizes ----
typedef struct fma_dims {
    fma_isa isa;
    int64_t nc;         // columns of a packed B block (a multiple of NR)
    int64_t bp_floats;  // the packed B block: ceil(nc / NR) micro-panels of K x NR
    int64_t acc_ld;     // row stride of a task's accumulator block (nc)
    int64_t thread_floats;  // per thread: packed A (MC x KC), accumulator (MC x nc), a conversion line
} fma_dims;

static int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

static fma_dims dims_of(int64_t N, int64_t K) {
    fma_dims d = {.isa = pick_isa(K)};
    const int64_t nr = d.isa.nr, kk = K > 0 ? K : 1;
    int64_t nc = d.isa.b_floats / kk / nr * nr;
    if (nc < nr) nc = nr;
    if (nc > round_up(N, nr)) nc = round_up(N, nr);
    d.nc = nc;
    d.bp_floats = nc * kk;
    d.acc_ld = nc;
    // One line of up to KC converted values; every region a multiple of 16 floats (64 bytes).
    d.thread_floats = FMA_MC * FMA_A_LD + FMA_MC * nc + FMA_KC;
    return d;
}

// A small GEMM's f32 lines (small_gemm): A's row, up to N of B's columns, and B (K x N); M and N
// swapped where it runs C^T = B^T A^T.
static int64_t small_floats(int64_t M, int64_t N, int64_t K) {
    const int64_t n = M > N ? M : N;
    return K + 2 * n * K;  // under 2 x ONEDNN_SMALL_WORK + K: n x K is at most M x N x K
}

static bool k_outer(const onednn_fma_gemm *g, const fma_dims *d);

size_t onednn__fma_scratch_bytes(int64_t M, int64_t N, int64_t K, int nthreads) {
    const fma_dims d = dims_of(N, K), dk = dims_of(N, K < FMA_K_OUTER ? K : FMA_K_OUTER);  // dk: k_outer's GEMMs
    const int64_t whole = d.bp_floats + (int64_t)nthreads * d.thread_floats,
                  runs = dk.bp_floats + (int64_t)nthreads * dk.thread_floats, tiles = whole > runs ? whole : runs;
    const int64_t small = M * N * K < ONEDNN_SMALL_WORK ? small_floats(M, N, K) : 0;
    return (size_t)(tiles > small ? tiles : small) * sizeof(float);
}

// ---- packing: read f32, f16 or bf16, write f32 ----
// A function of k made once for each kind (the kind tests leave the loops).
#define FOR_EACH_KIND(k, call)                              \
    do {                                                    \
        switch (k) {                                        \
        case SRC_F32: call(SRC_F32); break;                 \
        case SRC_F16: call(SRC_F16); break;                 \
        case SRC_BF16: call(SRC_BF16); break;               \
        case SRC_F32_AS_F16: call(SRC_F32_AS_F16); break;   \
        case SRC_F32_AS_BF16: call(SRC_F32_AS_BF16); break; \
        }                                                   \
    } while (0)

// count runs of n contiguous elements (run c at s + c * sb bytes) as f32 into dst + c * R, each
// run's [n, R) zero: the lines of packed panels. One call per panel, not per line (a call per
// 16-32 elements cost 5% of a GEMM).
__attribute__((target("avx2,f16c"), always_inline)) static inline void
load_lines_k(src_kind k, const char *s, int64_t sb, int64_t count, int n, int R, float *restrict dst) {
    const int es = (int)src_size(k);
    if (n == R && n % 8 == 0) {  // whole runs of 8-multiples, no tails: f16 rows 0.35 -> 0.2 cycles an element
        for (int64_t c = 0; c < count; c++, s += sb, dst += R)
            for (int l = 0; l < n; l += 8) _mm256_storeu_ps(dst + l, load8(k, s + l * es));
        return;
    }
    for (int64_t c = 0; c < count; c++, s += sb, dst += R) {
        int l = 0;
        for (; l + 8 <= n; l += 8) _mm256_storeu_ps(dst + l, load8(k, s + l * es));
        for (; l + 4 <= n; l += 4) _mm_storeu_ps(dst + l, load4(k, s + l * es));  // panels of 12 and 6 end in 4
        if (l < n) {  // 1-3 left (AVX2's 6-row panels end in 2): through a zeroed 4-element copy
            char q[16] = {0};
            float v[4];
            memcpy(q, s + l * es, (size_t)((n - l) * es));
            _mm_storeu_ps(v, load4(k, q));
            for (int t = 0; l < n; l++, t++) dst[l] = v[t];
        }
        for (; l < R; l++) dst[l] = 0;
    }
}

// load_lines_k with AVX-512 for each run's first multiple of 16 elements (n >= 16). In isolation on
// a Zen 4 core: 0.27 instead of 0.34 cycles an element for f32 rounded to f16, 0.20 instead of
// 0.29 for f16 and of 0.44 for bf16, about a copy's speed.
__attribute__((target(TGT512), always_inline)) static inline void
load_lines512_k(src_kind k, const char *s, int64_t sb, int64_t count, int n, int R, float *restrict dst) {
    const int es = (int)src_size(k), n16 = n / 16 * 16;
    for (int64_t c = 0; c < count; c++, s += sb, dst += R) {
        for (int l = 0; l < n16; l += 16) _mm512_storeu_ps(dst + l, load16(k, s + l * es));
        if (n16 < R) load_lines_k(k, s + n16 * es, 0, 1, n - n16, R - n16, dst + n16);
    }
}

__attribute__((target(TGT512))) static void load_lines512(src_kind k, const char *s, int64_t sb, int64_t count,
                                                         int n, int R, float *restrict dst) {
#define LOAD_LINES512(kk) load_lines512_k(kk, s, sb, count, n, R, dst)
    FOR_EACH_KIND(k, LOAD_LINES512);
#undef LOAD_LINES512
}

__attribute__((target("avx2,f16c"))) static void load_lines(src_kind k, const char *s, int64_t sb,
                                                            int64_t count, int n, int R, float *restrict dst) {
    if (n >= 16 && onednn__isa() >= ONEDNN_ISA_AVX512_CORE) {
        load_lines512(k, s, sb, count, n, R, dst);
        return;
    }
#define LOAD_LINES(kk) load_lines_k(kk, s, sb, count, n, R, dst)
    FOR_EACH_KIND(k, LOAD_LINES);
#undef LOAD_LINES
}

// The k in [k, kc) a transposing pack's blocks left, one element at a time, for lines [0, lines).
static inline void pack_t_tail(src_kind sk, const char *s, int64_t lb, int64_t k, int64_t kc, int lines, int R,
                               float *restrict dst) {
    for (; k < kc; k++)
        for (int t = 0; t < lines; t++) dst[k * R + t] = load_one(sk, s + t * lb, k);
}

// Lines [0, 8) of a source whose lines are contiguous in k (line t at s + t * lb bytes), k in
// [0, kc), into dst[k * R + t]: 8 x 8 blocks converted in registers and transposed there.
// (Through a converted line buffer and 4 x 4 transposes, packing took 13% of a Cruncher D=256
// f16 step on a Zen 4 core.)
__attribute__((target("avx2,f16c"), always_inline)) static inline void
pack_t8_k(src_kind sk, const char *s, int64_t lb, int64_t kc, int R, float *restrict dst) {
    const int64_t es = src_size(sk);
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        const char *p = s + k * es;
        const __m256 r0 = load8(sk, p), r1 = load8(sk, p + lb), r2 = load8(sk, p + 2 * lb),
                     r3 = load8(sk, p + 3 * lb), r4 = load8(sk, p + 4 * lb), r5 = load8(sk, p + 5 * lb),
                     r6 = load8(sk, p + 6 * lb), r7 = load8(sk, p + 7 * lb);
        const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
                     t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
                     t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
                     t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
        const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
                     u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
                     u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
                     u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
        float *d = dst + k * R;
        _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
        _mm256_storeu_ps(d + R, _mm256_permute2f128_ps(u1, u5, 0x20));
        _mm256_storeu_ps(d + 2 * R, _mm256_permute2f128_ps(u2, u6, 0x20));
        _mm256_storeu_ps(d + 3 * R, _mm256_permute2f128_ps(u3, u7, 0x20));
        _mm256_storeu_ps(d + 4 * R, _mm256_permute2f128_ps(u0, u4, 0x31));
        _mm256_storeu_ps(d + 5 * R, _mm256_permute2f128_ps(u1, u5, 0x31));
        _mm256_storeu_ps(d + 6 * R, _mm256_permute2f128_ps(u2, u6, 0x31));
        _mm256_storeu_ps(d + 7 * R, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    pack_t_tail(sk, s, lb, k, kc, 8, R, dst);
}

// The same for lines [0, 4): 4 x 4 blocks.
__attribute__((target("avx2,f16c"), always_inline)) static inline void
pack_t4_k(src_kind sk, const char *s, int64_t lb, int64_t kc, int R, float *restrict dst) {
    const int64_t es = src_size(sk);
    int64_t k = 0;
    for (; k + 4 <= kc; k += 4) {
        const char *p = s + k * es;
        __m128 r0 = load4(sk, p), r1 = load4(sk, p + lb), r2 = load4(sk, p + 2 * lb), r3 = load4(sk, p + 3 * lb);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        _mm_storeu_ps(dst + k * R, r0);
        _mm_storeu_ps(dst + (k + 1) * R, r1);
        _mm_storeu_ps(dst + (k + 2) * R, r2);
        _mm_storeu_ps(dst + (k + 3) * R, r3);
    }
    pack_t_tail(sk, s, lb, k, kc, 4, R, dst);
}

// The same for lines [0, 2): 2 x 8 blocks interleaved (AVX2's 6-row panels are 4 + 2 lines; one
// line at a time through a converted line buffer they took a third of its packing time).
__attribute__((target("avx2,f16c"), always_inline)) static inline void
pack_t2_k(src_kind sk, const char *s, int64_t lb, int64_t kc, int R, float *restrict dst) {
    const int64_t es = src_size(sk);
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        const char *p = s + k * es;
        const __m256 r0 = load8(sk, p), r1 = load8(sk, p + lb);
        const __m256 lo = _mm256_unpacklo_ps(r0, r1), hi = _mm256_unpackhi_ps(r0, r1);  // k 0 1 4 5 | 2 3 6 7
        const __m128 l0 = _mm256_castps256_ps128(lo), l1 = _mm256_extractf128_ps(lo, 1),
                     h0 = _mm256_castps256_ps128(hi), h1 = _mm256_extractf128_ps(hi, 1);
        float *d = dst + k * R;
        _mm_storel_pi((__m64 *)d, l0);
        _mm_storeh_pi((__m64 *)(d + R), l0);
        _mm_storel_pi((__m64 *)(d + 2 * R), h0);
        _mm_storeh_pi((__m64 *)(d + 3 * R), h0);
        _mm_storel_pi((__m64 *)(d + 4 * R), l1);
        _mm_storeh_pi((__m64 *)(d + 5 * R), l1);
        _mm_storel_pi((__m64 *)(d + 6 * R), h1);
        _mm_storeh_pi((__m64 *)(d + 7 * R), h1);
    }
    pack_t_tail(sk, s, lb, k, kc, 2, R, dst);
}

// Lines [0, nl) of a source whose lines are contiguous in k: 8, then 4, then 2 at a time. Returns
// the lines done (nl rounded down to even).
__attribute__((target("avx2,f16c"), always_inline)) static inline int64_t
pack_t_k(src_kind sk, const char *s, int64_t lb, int64_t nl, int64_t kc, int R, float *restrict dst) {
    int64_t l = 0;
    for (; l + 8 <= nl; l += 8) pack_t8_k(sk, s + l * lb, lb, kc, R, dst + l);
    for (; l + 4 <= nl; l += 4) pack_t4_k(sk, s + l * lb, lb, kc, R, dst + l);
    for (; l + 2 <= nl; l += 2) pack_t2_k(sk, s + l * lb, lb, kc, R, dst + l);
    return l;
}

__attribute__((target("avx2,f16c"))) static int64_t pack_t(src_kind k, const char *s, int64_t lb, int64_t nl,
                                                           int64_t kc, int R, float *restrict dst) {
    int64_t done = 0;
#define PACK_T(kk) done = pack_t_k(kk, s, lb, nl, kc, R, dst)
    FOR_EACH_KIND(k, PACK_T);
#undef PACK_T
    return done;
}

static size_t dt_size(dnnl_data_type_t dt) { return dt == dnnl_f32 ? 4 : 2; }

// A micro-panel: lines [0, nl) of a source (line l, k at element l * ls + k * ks) for k in
// [0, kc), into dst[k * R + l] (R = MR or NR), lines [nl, R) zero. line: scratch of kc floats.
static void pack_panel(src_kind sk, const void *src, int64_t ls, int64_t ks, int64_t nl, int R,
                       int64_t kc, float *restrict dst, float *restrict line) {
    const int64_t es = src_size(sk);
    const char *s = src;
    if (ls == 1 && (ks != 1 || nl == 1)) {  // each k's lines contiguous: one run per k
        load_lines(sk, s, ks * es, kc, (int)nl, R, dst);
        return;
    }
    if (ks == 1) {  // each line's k contiguous: 8 (4, 2) lines at a time, transposed in registers
        const int64_t lb = ls * es;
        for (int64_t l = pack_t(sk, s, lb, nl, kc, R, dst); l < nl; l++) {
            load_lines(sk, s + l * lb, 0, 1, (int)kc, (int)kc, line);
            for (int64_t k = 0; k < kc; k++) dst[k * R + l] = line[k];
        }
        if (nl < R)  // (without the test, the empty loop over k took 1.2% of a Cruncher D=256 f16 step)
            for (int64_t k = 0; k < kc; k++)
                for (int l = (int)nl; l < R; l++) dst[k * R + l] = 0;
        return;
    }
    for (int64_t k = 0; k < kc; k++)
        for (int l = 0; l < R; l++) dst[k * R + l] = l < nl ? load_one(sk, s, l * ls + k * ks) : 0.0f;
}

// ---- one GEMM ----
typedef struct fma_run {
    const onednn_fma_gemm *g;
    fma_dims d;
    int64_t jc, nc;        // this column block
    int64_t n_ic, nsub, sub_cols;  // tasks: n_ic row blocks x nsub column slices of sub_cols
    float *bp;
    float *threads;        // per-thread regions of d.thread_floats
    bool direct;           // the kernels write C itself (see the file's head); else acc, write_out
    fma_round round_last;  // direct: how the last run of k leaves its sums in C (STORE_*: 16-bit C)
    bool accumulate;       // the first run of k adds to C too (k_outer's later runs)
    bool b_in_place;       // the kernels read B's whole micro-panels where B is (b_in_place)
    bool b_first_row;      // the first row of tiles packs B's whole micro-panels as it reads them (b_first_row)
    src_kind b_kind;
} fma_run;

// How MATMUL_ROUNDED's c (round_dt; undef: plain MATMUL) rounds sums.
static fma_round round_of(dnnl_data_type_t round_dt) {
    return round_dt == dnnl_f16 ? ROUND_F16 : round_dt == dnnl_bf16 ? ROUND_BF16 : ROUND_NONE;
}

static float round_one(fma_round rnd, float v) {
    if (rnd == ROUND_F16) return torc_f16_to_f32(torc_f32_to_f16(v));
    return rnd == ROUND_BF16 ? torc_bf16_to_f32(torc_f32_to_bf16(v)) : v;
}

// Element i of C (direct) from an edge tile's sum v, left as a kernel leaves it (rnd; add: onto C's).
static void put_one(void *c, int64_t i, fma_round rnd, bool add, float v) {
    if (rnd == STORE_F16) ((uint16_t *)c)[i] = torc_f32_to_f16(v);
    else if (rnd == STORE_BF16) ((uint16_t *)c)[i] = torc_f32_to_bf16(v);
    else ((float *)c)[i] = round_one(rnd, (add ? ((float *)c)[i] : 0.0f) + v);
}

// Rows [0, m) x columns [0, n) of the f32 block acc (row stride ld) into C at (i0, j0), rounded
// (for an f32 C of MATMUL_ROUNDED, to c).
static void write_out(const onednn_fma_gemm *g, const float *acc, int64_t ld, int64_t i0, int64_t j0, int64_t m,
                      int64_t n) {
    const size_t es = dt_size(g->c_dt);
    for (int64_t i = 0; i < m; i++) {
        const float *src = acc + i * ld;
        char *dst = (char *)g->c + ((i0 + i) * g->c_rs + j0 * g->c_cs) * (int64_t)es;
        if (g->c_dt == dnnl_f32) {
            onednn__round_line(g->round_dt, src, 1, (float *)dst, g->c_cs, n);
        } else if (g->c_cs == 1) {
            if (g->c_dt == dnnl_f16) onednn__f32_to_f16((uint16_t *)dst, src, n);
            else onednn__f32_to_bf16((uint16_t *)dst, src, n);
        } else {
            for (int64_t j = 0; j < n; j++)
                ((uint16_t *)dst)[j * g->c_cs] = g->c_dt == dnnl_f16 ? torc_f32_to_f16(src[j]) : torc_f32_to_bf16(src[j]);
        }
    }
}

// Rows [0, K) of np whole micro-panels of a row-major B (row k at s + k * lb bytes, panel q from
// element q * nr of it) into dst + q * ps floats: each row's np * nr elements read in one go. AVX2:
// the row 4 ahead fetched (a Zen 4 core, AVX2-capped: Cruncher D=1024 forward GEMM, f32 B rounded to
// f16 or bf16, 10.4-10.5 -> 10.1-10.3 ms; the D=256 bf16 step 1.015 -> 1.003 of f32's time, means of 6
// interleaved rounds. The AVX-512 form gained nothing from it.)
__attribute__((target("avx2,f16c"), always_inline)) static inline void
pack_rows_k(src_kind k, const char *s, int64_t lb, int64_t K, int np, int nr, int64_t ps, float *restrict dst) {
    const int es = (int)src_size(k);
    for (int64_t r = 0; r < K; r++, s += lb, dst += nr) {
        if (r + 4 < K)
            for (int b = 0; b < np * nr * es; b += 64) _mm_prefetch(s + 4 * lb + b, _MM_HINT_T0);
        for (int q = 0; q < np; q++)
            for (int l = 0; l < nr; l += 8) _mm256_storeu_ps(dst + q * ps + l, load8(k, s + (q * nr + l) * es));
    }
}

__attribute__((target(TGT512), always_inline)) static inline void
pack_rows512_k(src_kind k, const char *s, int64_t lb, int64_t K, int np, int nr, int64_t ps, float *restrict dst) {
    const int es = (int)src_size(k);
    for (int64_t r = 0; r < K; r++, s += lb, dst += nr)
        for (int q = 0; q < np; q++)
            for (int l = 0; l < nr; l += 16) _mm512_storeu_ps(dst + q * ps + l, load16(k, s + (q * nr + l) * es));
}

__attribute__((target(TGT512))) static void pack_rows512(src_kind k, const char *s, int64_t lb, int64_t K, int np,
                                                         int nr, int64_t ps, float *restrict dst) {
#define PACK_ROWS512(kk) pack_rows512_k(kk, s, lb, K, np, nr, ps, dst)
    FOR_EACH_KIND(k, PACK_ROWS512);
#undef PACK_ROWS512
}

__attribute__((target("avx2,f16c"))) static void pack_rows(src_kind k, const char *s, int64_t lb, int64_t K, int np,
                                                           int nr, int64_t ps, float *restrict dst) {
    if (nr % 16 == 0 && onednn__isa() >= ONEDNN_ISA_AVX512_CORE) {
        pack_rows512(k, s, lb, K, np, nr, ps, dst);
        return;
    }
#define PACK_ROWS(kk) pack_rows_k(kk, s, lb, K, np, nr, ps, dst)
    FOR_EACH_KIND(k, PACK_ROWS);
#undef PACK_ROWS
}

// B's columns [jc, jc + nc) over all of K into micro-panels p0 .. p1 of the packed block.
static void pack_b(const fma_run *r, int tid, int64_t p0, int64_t p1) {
    const onednn_fma_gemm *g = r->g;
    const int nr = r->d.isa.nr;
    const src_kind sk = r->b_kind;
    const int64_t es = src_size(sk);
    float *line = r->threads + tid * r->d.thread_floats + FMA_MC * FMA_A_LD + FMA_MC * r->d.nc;
    // B read in place: the kernels take its whole panels where it is; only a partial one is packed.
    if (r->b_in_place || r->b_first_row)
        while (p0 < p1 && r->jc + (p0 + 1) * nr <= g->N) p0++;
    // Row-major B, whole panels: FMA_B_GROUP columns (8 AVX2 panels, 4 AVX-512 ones) a row at a
    // time, each group a run of K rows (row by row across all the panels, their writes at one
    // offset hit one cache set). One panel at a time read 64 or 128 bytes of each row, and rows a
    // page or more apart each on a page of its own, where the hardware prefetchers stop: on a Zen 4
    // core the Cruncher D=1024 (B=512) forward GEMM's 1024 x 1024 f32 B rounded to f16 packed in
    // 0.73-1.15 ms so, 0.44-0.60 four panels at a time (GEMM 10.2-11.2 -> 9.9-10.7 ms); AVX2-capped
    // 0.55-0.69 -> 0.44-0.62 ms eight at a time. At D=256 (rows 1 KiB apart) no faster with the
    // weights in cache, but with the bench's models taking turns (each step finds its weights out of
    // L2) the AVX2-capped f16 step went from 0.994x to 1.007x the f32 step's speed, bf16 from 0.969x
    // to 0.981x (means of 5 interleaved rounds).
    int64_t pf = p1;  // panels [p0, pf) done so
    if (g->b_cs == 1 && g->b_rs != 1) {
        while (pf > p0 && r->jc + pf * nr > g->N) pf--;
        const int64_t lb = g->b_rs * es, group = FMA_B_GROUP / nr;
        for (int64_t p = p0; p < pf; p += group) {
            const int np = (int)(pf - p < group ? pf - p : group);
            pack_rows(sk, (const char *)g->b + (r->jc + p * nr) * es, lb, g->K, np, nr, g->K * nr, r->bp + p * g->K * nr);
        }
        p0 = pf;
        pf = p1;
    }
    for (int64_t p = p0; p < pf; p++) {
        const int64_t j = r->jc + p * nr, nl = g->N - j < nr ? g->N - j : nr;
        for (int64_t pc = 0; pc < g->K; pc += FMA_KC) {
            const int64_t kc = g->K - pc < FMA_KC ? g->K - pc : FMA_KC;
            const char *src = (const char *)g->b + (pc * g->b_rs + j * g->b_cs) * (int64_t)es;
            pack_panel(sk, src, g->b_cs, g->b_rs, nl, nr, kc, r->bp + p * g->K * nr + pc * nr, line);
        }
    }
}

// Where the kernels read a block of A (pack_a): as rows of k (ak 1: row i at p + i * ar, the _rows
// kernels), as k-runs of rows (ar 1: row i at p + i, k-run ak floats apart), or as micro-panels
// (ak 0: the panel of rows ir at p + ir * kc, R floats a k).
typedef struct a_block {
    const float *p;
    int64_t ar, ak;
} a_block;

// The row stride of A converted as rows of k (FMA_A_LD).
static int64_t a_ld(int64_t kc) {
    int64_t ld = round_up(kc, 16);
    if (ld / 16 % 2 == 0) ld += 16;
    return ld + 4;
}

// The tiles' rows: how many rows [i0, i0 + m) take as tiles (past m where the last tile is partial).
static int64_t tiled_rows(const fma_isa *isa, int64_t m) {
    int64_t ir = 0;
    for (int t; ir < m;) ir += tile_rows(isa, m - ir, &t);
    return ir;
}

// Rows [i0, i0 + m) of A, k in [pc, pc + kc), for the kernels (in ap where converted):
//  - column-major A (each k's rows contiguous, as A^T of a row-major matrix) is converted a k-run
//    of all m rows at a time, and the kernels read it where it lands (dealing each run out to the
//    panels took 3% of an AVX2-capped D=256 bf16 step);
//  - row-major A (each row's k contiguous) in runs of up to FMA_SHORT_K k, and in runs of any
//    length on Intel's AVX-512 cores, is converted row by row (zero rows up to the last tile's end),
//    and the _rows kernels broadcast from its rows as from panels. Packing it into panels transposed
//    it, 0.5-0.6 cycles an element against 0.2 for a row's conversion (one Zen 4 core), 3% of a
//    Cruncher D=256 f16 forward GEMM. On one loaded Emerald Rapids core (bf16 in, best CPU time of
//    12 interleaved runs, over f32 on dnnl_sgemm), panels -> rows: (1024, 1536) x (1536, 384)
//    1.15-1.21 -> 1.08-1.13, (1024, 1024) x (1024, 256) 1.05-1.11 -> 1.01-1.06, (1024, 1536) x
//    (1536, 384)^T 1.07 -> 1.02, the LM head's (256, 50257) x (50257, 256) 1.07-1.19 -> 1.04-1.17;
//  - other layouts, and longer runs elsewhere (whose tile rows, 4 KiB each at k 1024, stream from
//    L2 as 16 streams on Zen 4's 16-row tiles), are packed into MR-row micro-panels.
static a_block pack_a(const onednn_fma_gemm *g, const fma_isa *isa, int64_t i0, int64_t m, int64_t pc, int64_t kc,
                      float *restrict ap, float *restrict line) {
    const src_kind sk = src_of(g->a_dt, g->round_dt);
    const int64_t es = src_size(sk);
    const char *a = (const char *)g->a + (i0 * g->a_rs + pc * g->a_cs) * es;
    if (g->a_rs == 1 && g->a_cs != 1 && m > 1) {
        const int64_t padded = round_up(m, FMA_MR_MAX);  // a tile past m reads zeros
        const int64_t lb = g->a_cs * es, run = m * es;
        // 8 runs a call, the next 8 fetched ahead (runs far apart: without, this took 4% of an AVX2
        // D=1024 f16 step; a call a run, 2% of a Cruncher D=256 weight-gradient GEMM on Zen 4)
        for (int64_t k = 0; k < kc; k += 8) {
            for (int64_t f = k + 8; f < k + 16 && f < kc; f++)
                for (int64_t b = 0; b < run; b += 64) _mm_prefetch(a + f * lb + b, _MM_HINT_T0);
            load_lines(sk, a + k * lb, lb, kc - k < 8 ? kc - k : 8, (int)m, (int)padded, ap + k * padded);
        }
        return (a_block){ap, 1, padded};
    }
    if (g->a_cs == 1 && m > 1 && (kc <= FMA_SHORT_K || isa->b_floats == FMA_B_FLOATS_INTEL512)) {
        const int64_t ld = a_ld(kc);
        load_lines(sk, a, g->a_rs * es, m, (int)kc, (int)ld, ap);
        memset(ap + m * ld, 0, (size_t)((tiled_rows(isa, m) - m) * ld) * sizeof(float));
        return (a_block){ap, ld, 1};
    }
    for (int64_t ir = 0; ir < m;) {
        int t;
        const int R = tile_rows(isa, m - ir, &t);
        const int64_t nl = m - ir < R ? m - ir : R;
        pack_panel(sk, a + ir * g->a_rs * es, g->a_rs, g->a_cs, nl, R, kc, ap + ir * kc, line);
        ir += R;
    }
    return (a_block){ap, 1, 0};
}

// Whether a task's B micro-panels go outside its rows of tiles: on AVX2 (6 x 16 tiles, one B
// vector feeding 6 FMAs, 64 bytes of B every 6 cycles) where the task's packed B (K x n) outgrows
// its share of L2 and a micro-panel's run of k fits in L1. Rows outside streamed all of B from L3
// for each row of tiles: an AVX2-capped Cruncher D=1024 (B=512) weight-gradient GEMM, K = 512,
// 10.4-10.6 ms against 10.1 with the panels outside (f32 on OpenBLAS: 9.8-10.0; a Zen 4 core). Not on
// AVX-512 (24 FMAs a B vector: the same GEMM 9.7 ms, 10.0 with the panels outside), nor for smaller
// B (D=512: B in L2) or longer runs (K = 1024: a micro-panel of 64 KiB, no faster either way).
#define FMA_L1_BYTES (INT64_C(32) << 10)
#define FMA_L2_SHARE_BYTES (INT64_C(512) << 10)
static bool panel_outer(const fma_isa *isa, int64_t kc, int64_t n) {
    const int64_t panel = kc * isa->nr * (int64_t)sizeof(float);
    return isa->nr == 16 && panel <= FMA_L1_BYTES && kc * n * (int64_t)sizeof(float) > FMA_L2_SHARE_BYTES;
}

// One task: rows [i0, i0 + m) x this block's columns [c0, c0 + n) (c0 a multiple of NR).
static void run_task(const fma_run *r, int tid, int64_t i0, int64_t m, int64_t c0, int64_t n) {
    const onednn_fma_gemm *g = r->g;
    const fma_isa *isa = &r->d.isa;
    const int nr = isa->nr;
    float *mine = r->threads + tid * r->d.thread_floats;
    float *ap = mine, *acc = ap + FMA_MC * FMA_A_LD, *line = acc + FMA_MC * r->d.nc;
    float tile[FMA_MR_MAX * FMA_NR_MAX] __attribute__((aligned(64)));

    for (int64_t pc = 0; pc < g->K; pc += FMA_KC) {
        const int64_t kc = g->K - pc < FMA_KC ? g->K - pc : FMA_KC;
        const bool add = pc > 0 || r->accumulate;
        const fma_round rnd = pc + kc == g->K ? r->round_last : ROUND_NONE;  // the sums are whole after the last run
        const a_block blk = pack_a(g, isa, i0, m, pc, kc, ap, line);
        // A micro-panel by A micro-panel, each against every B micro-panel of the task's columns
        // (B streams, A stays in L1 / L2): measured 6-8% faster than the other way round. Except
        // on AVX2 (panel_outer): there B's micro-panels go outside, cols columns at a time.
        const int64_t cols = panel_outer(isa, kc, n) ? nr : n;
        const int64_t bsz = src_size(r->b_kind), b_k_bytes = g->b_rs * bsz;
        for (int64_t j0 = 0, p0 = c0 / nr; j0 < n; j0 += cols, p0 += cols / nr) {
            for (int64_t ir = 0; ir < m;) {
                int t;
                const int R = tile_rows(isa, m - ir, &t);
                const int64_t mm = m - ir < R ? m - ir : R, ak = blk.ak ? blk.ak : R;
                const float *at = blk.p + ir * (blk.ak ? blk.ar : kc);
                // B's micro-panels from the task's first: packed ones K * NR floats apart, in place NR
                // elements (the pointers stepped, not recomputed: a division a kernel call was 2% of an
                // AVX2-capped D=256 f16 step)
                float *packed = r->bp + p0 * g->K * nr + pc * nr;
                const char *placed = (const char *)g->b + (pc * g->b_rs + r->jc + c0 + j0) * bsz;
                const int rows = blk.ak == 1;
                const bool first = r->b_first_row && ir == 0;  // (its kernels store the panels the other rows read)
                const fma_kernel kern_packed = isa->kern[rows][SRC_F32][t],
                                 kern_placed = (first ? isa->first : isa->kern)[rows][r->b_kind][t];
                const int64_t jend = j0 + cols < n ? j0 + cols : n, ec = (int64_t)dt_size(g->c_dt);
                int64_t jr = j0;
                if (!r->direct || mm == R) {
                    // Whole micro-panels into whole tiles (of C, or of the accumulator block): kernel
                    // after kernel, nothing recomputed between them (the general loop below, per tile,
                    // made a Cruncher D=256 weight-gradient GEMM 3% slower, AVX2-capped bf16 on a Zen 4
                    // core). A declined kernel (a first row's, add false) leaves its tile to that loop.
                    const bool in_place = r->b_in_place || first;
                    const fma_kernel kern = in_place ? kern_placed : kern_packed;
                    const int64_t bk = in_place ? b_k_bytes : nr * (int64_t)sizeof(float);
                    const int64_t hb = (nr / 2) * (in_place ? bsz : (int64_t)sizeof(float));
                    const int64_t ce = r->direct ? ec : (int64_t)sizeof(float), ldc = r->direct ? g->c_rs : r->d.acc_ld;
                    const int64_t hc = (nr / 2) * ce, pstep = g->K * nr, bstep = in_place ? nr * bsz : pstep * 4;
                    const int nh = isa->halves[t] ? 2 : 1;
                    const bool pack = first && in_place;
                    const fma_round krnd = r->direct ? rnd : ROUND_NONE;
                    const char *bp = in_place ? placed : (const char *)packed;
                    char *ct = r->direct ? (char *)g->c + ((i0 + ir) * g->c_rs + r->jc + c0 + j0) * ec
                                         : (char *)(acc + ir * r->d.acc_ld + j0);
                    for (bool ok = true; ok && jr + nr <= jend; jr += ok ? nr : 0) {
                        for (int h = 0; h < nh && ok; h++)
                            ok = kern(kc, at, blk.ar, ak, bp + h * hb, bk, (float *)(void *)(ct + h * hc), ldc, add, krnd,
                                      pack ? packed : NULL);
                        if (ok) bp += bstep, ct += nr * ce, packed += pstep, placed += nr * bsz;
                    }
                }
                for (; jr < jend; jr += nr, packed += g->K * nr, placed += nr * bsz) {
                    const int64_t nn = n - jr < nr ? n - jr : nr;
                    // B's micro-panel: where B is (a whole one, b_in_place or the first row), else packed
                    const bool in_place = (r->b_in_place || first) && nn == nr;
                    float *pk = first && in_place ? packed : NULL;
                    const fma_kernel kern = in_place ? kern_placed : kern_packed;
                    const void *bp = in_place ? (const void *)placed : (const void *)packed;
                    const int64_t bk = in_place ? b_k_bytes : nr * (int64_t)sizeof(float);
                    // a tile of NR / 2 columns: twice, B's and C's columns nr / 2 further the second time
                    const int64_t hb = (nr / 2) * (in_place ? bsz : (int64_t)sizeof(float)), hc = nr / 2;
                    const int nh = isa->halves[t] ? 2 : 1;
                    // the tile into the accumulator block (padded to whole tiles), into C, or, an edge
                    // tile of a direct run, into the tile buffer and from there into C
                    char *c = (char *)g->c + ((i0 + ir) * g->c_rs + r->jc + c0 + jr) * ec;
                    const bool edge = r->direct && (mm < R || nn < nr), to_c = r->direct && !edge;
                    float *ct = !r->direct ? acc + ir * r->d.acc_ld + jr : edge ? tile : (float *)(void *)c;
                    const int64_t ldc = !r->direct ? r->d.acc_ld : edge ? nr : g->c_rs, hcb = hc * (to_c ? ec : 4);
                    const bool kadd = add && !edge;
                    const fma_round krnd = to_c ? rnd : ROUND_NONE;
                    bool done = true;
                    for (int h = 0; h < nh; h++)
                        done &= kern(kc, at, blk.ar, ak, (const char *)bp + h * hb, bk, (float *)(void *)((char *)ct + h * hcb),
                                     ldc, kadd, krnd, pk);
                    if (!done) {  // a checked kernel (first row: add is false) declined: B's micro-panel packed exactly
                        pack_panel(r->b_kind, placed, g->b_cs, g->b_rs, nr, nr, kc, packed, line);
                        for (int h = 0; h < nh; h++)
                            kern_packed(kc, at, blk.ar, ak, (const char *)(packed + h * hc), nr * (int64_t)sizeof(float),
                                        (float *)(void *)((char *)ct + h * hcb), ldc, kadd, krnd, NULL);
                    }
                    if (edge)
                        for (int64_t i = 0; i < mm; i++)
                            for (int64_t j = 0; j < nn; j++) put_one(c, i * g->c_rs + j, rnd, add, tile[i * nr + j]);
                }
                ir += R;
            }
        }
    }
    if (!r->direct) write_out(g, acc, r->d.acc_ld, i0, r->jc + c0, m, n);
}

static void one_task(const fma_run *r, int tid, int64_t t) {
    const int64_t i0 = (t / r->nsub) * FMA_MC, c0 = (t % r->nsub) * r->sub_cols;
    const int64_t m = r->g->M - i0 < FMA_MC ? r->g->M - i0 : FMA_MC;
    const int64_t n = r->nc - c0 < r->sub_cols ? r->nc - c0 : r->sub_cols;
    if (n > 0) run_task(r, tid, i0, m, c0, n);
}

// Inside the team's parallel region: B's panels shared out, then the tasks taken in turn.
static void run_team(const fma_run *r) {
    const int tid = omp_get_thread_num();
    const int64_t nb = (r->nc + r->d.isa.nr - 1) / r->d.isa.nr;
    const int nt = omp_get_num_threads();
    pack_b(r, tid, nb * tid / nt, nb * (tid + 1) / nt);  // each thread a run of panels
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < r->n_ic * r->nsub; t++) one_task(r, tid, t);
}

static void zero_out(const onednn_fma_gemm *g) {
    const size_t es = dt_size(g->c_dt);
    for (int64_t i = 0; i < g->M; i++)
        for (int64_t j = 0; j < g->N; j++) memset((char *)g->c + (i * g->c_rs + j * g->c_cs) * (int64_t)es, 0, es);
}

// Whether the kernels read B's whole micro-panels where B is instead of packing them: B row-major
// (n contiguous), of a kind the ISA has in-place kernels for (Zen 4: f32, f16, bf16, f32 rounded
// to f16), and small enough to stay in L2 while every row block reads it. Packing such a B was
// 0.27-0.30 cycles an element (a Zen 4 core), 4% of a D=256 f16 linear layer's input-gradient GEMM.
#define FMA_B_IN_PLACE_BYTES (INT64_C(512) << 10)
static bool b_in_place(const onednn_fma_gemm *g, const fma_isa *isa, src_kind k) {
    return isa->kern[0][k][0] && g->b_cs == 1 && g->K * g->N * src_size(k) <= FMA_B_IN_PLACE_BYTES;
}

// Whether the first row of tiles packs B's whole micro-panels while it reads them where they are
// (the _first kernels), the other rows reading them packed: B row-major of a kind the ISA has _first
// kernels for (AVX2: f32 rounded to f16 or bf16), one block of rows (M up to FMA_MC: a task is then the only
// reader of its columns) and one run of k. The conversions run beside the first row's FMAs instead of in a pass of their own: the
// Cruncher D=256 (B=64) forward GEMM, AVX2-capped, 82.1 -> 78.6-78.8 us, and the step with the
// bench's models taking turns 0.996x -> 1.012x the f32 step's speed (means of 5 interleaved rounds;
// a Zen 4 core). bf16 by the checked split (split_bf16_8: 3 operations a vector, 2 on the adders
// the FMAs leave free, and an OR): that GEMM 82.8 -> 79.0-79.3 us (f32 on OpenBLAS 81.5-82.0), the D=256
// step (its own models, best of 200) 1.013x -> 1.002x the f32 step's time. (The exact rounding, 7
// operations on the FMAs' pipes, took it from 84.3 to 86.5 us.)
static bool b_first_row(const onednn_fma_gemm *g, const fma_isa *isa, src_kind k) {
    return isa->first[0][k][0] && g->b_cs == 1 && g->b_rs != 1 && g->M <= FMA_MC && g->K <= FMA_KC;
}

// ---- small GEMMs ----
// Under onednn__fma_min_work() multiply-adds (ONEDNN_SMALL_WORK: a final layer's N = 1 GEMV, its
// K = 1 and M = 1 gradients) one thread computes C without packing, from registers into C:
//  - where B's rows are contiguous, C's columns 4 (1) vectors at a time: A's row i converted to
//    an f32 line against B's rows where they lie (converted once to f32 first where more than one
//    row of A would convert them again);
//  - the columns past the last whole vector (all of them where B's rows are not contiguous) as
//    dot products along k, each of B's columns converted once to an f32 line: for one column (a
//    GEMV) 4 rows of A at a time, read where they lie, converted as read; else 4 columns at a
//    time against A's row.
// The row part sums over k in order, the dot part in vector lanes: both f32 accumulation, as
// sgemm's. Through f32 temporaries and sgemm (convert.c) such GEMMs paid oneDNN's per-call cost
// and three passes: a Cruncher D=256 f16 step's three final-layer GEMMs took 8.6 us there, 4.1
// here (f32 sgemm 4.2), one Zen 4 core.

// One vector of sums into C at c (elements), left as rnd says (a kernel's epilogue).
#define SMALL_PUT(NAME, TGT, V, P, RB, ST16)                                                                   \
    __attribute__((target(TGT), always_inline)) static inline void NAME(void *c, V v, fma_round rnd) {         \
        if (rnd >= STORE_F16) {                                                                                \
            ST16((uint16_t *)c, v, rnd);                                                                       \
            return;                                                                                            \
        }                                                                                                      \
        if (rnd == ROUND_F16) v = P##_cvtph_ps(P##_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));                    \
        else if (rnd == ROUND_BF16) v = RB(v);                                                                 \
        P##_storeu_ps((float *)c, v);                                                                          \
    }
SMALL_PUT(small_put512, TGT512, __m512, _mm512, round_bf16_16, store16_16)
SMALL_PUT(small_put256, "avx2,f16c", __m256, _mm256, round_bf16_8, store16_8)

// Columns [0, n / W * W) of C's row at c (elements es bytes, contiguous) = a (K floats) x B's rows
// (row k at b + k * bk bytes, of kind kb). Returns the columns done.
#define SMALL_ROWS(NAME, TGT, V, P, W, LOAD, PUT)                                                              \
    __attribute__((target(TGT), always_inline)) static inline int64_t NAME##_k(                                \
        src_kind kb, const float *restrict a, int64_t K, const char *b, int64_t bk, int64_t n, char *c,        \
        int64_t es, fma_round rnd) {                                                                           \
        const int64_t eb = src_size(kb);                                                                       \
        int64_t j = 0;                                                                                         \
        for (; j + 4 * W <= n; j += 4 * W) {                                                                   \
            V c0 = P##_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;                                                \
            const char *p = b + j * eb;                                                                        \
            for (int64_t k = 0; k < K; k++, p += bk) {                                                         \
                const V av = P##_set1_ps(a[k]);                                                                \
                c0 = P##_fmadd_ps(av, LOAD(kb, p), c0);                                                        \
                c1 = P##_fmadd_ps(av, LOAD(kb, p + W * eb), c1);                                               \
                c2 = P##_fmadd_ps(av, LOAD(kb, p + 2 * W * eb), c2);                                           \
                c3 = P##_fmadd_ps(av, LOAD(kb, p + 3 * W * eb), c3);                                           \
            }                                                                                                  \
            PUT(c + j * es, c0, rnd);                                                                          \
            PUT(c + (j + W) * es, c1, rnd);                                                                    \
            PUT(c + (j + 2 * W) * es, c2, rnd);                                                                \
            PUT(c + (j + 3 * W) * es, c3, rnd);                                                                \
        }                                                                                                      \
        for (; j + W <= n; j += W) {                                                                           \
            V c0 = P##_setzero_ps();                                                                           \
            const char *p = b + j * eb;                                                                        \
            for (int64_t k = 0; k < K; k++, p += bk) c0 = P##_fmadd_ps(P##_set1_ps(a[k]), LOAD(kb, p), c0);    \
            PUT(c + j * es, c0, rnd);                                                                          \
        }                                                                                                      \
        return j;                                                                                              \
    }                                                                                                          \
    __attribute__((target(TGT))) static int64_t NAME(src_kind kb, const float *restrict a, int64_t K,          \
                                                     const char *b, int64_t bk, int64_t n, char *c, int64_t es, \
                                                     fma_round rnd) {                                          \
        switch (kb) {                                                                                          \
        case SRC_F16: return NAME##_k(SRC_F16, a, K, b, bk, n, c, es, rnd);                                    \
        case SRC_BF16: return NAME##_k(SRC_BF16, a, K, b, bk, n, c, es, rnd);                                  \
        case SRC_F32_AS_F16: return NAME##_k(SRC_F32_AS_F16, a, K, b, bk, n, c, es, rnd);                      \
        case SRC_F32_AS_BF16: return NAME##_k(SRC_F32_AS_BF16, a, K, b, bk, n, c, es, rnd);                    \
        default: return NAME##_k(SRC_F32, a, K, b, bk, n, c, es, rnd);                                         \
        }                                                                                                      \
    }
SMALL_ROWS(small_rows512, TGT512 ",fma", __m512, _mm512, 16, load16, small_put512)
SMALL_ROWS(small_rows256, "avx2,fma,f16c", __m256, _mm256, 8, load8, small_put256)

__attribute__((target("avx2"))) static inline float hsum8(__m256 s) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

// out[r] = the dot product of rows r < 4 of A (row r at a[r], elements of kind ka, contiguous)
// with the f32 line bl, over K: 8 k at a time in vector lanes, the last K % 8 in order.
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void
small_dot4_k(src_kind ka, const char *const a[4], int64_t K, const float *bl, float out[4]) {
    const int64_t ea = src_size(ka);
    const char *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;  // (an array of four stayed in memory)
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        const __m256 bv = _mm256_loadu_ps(bl + k);
        s0 = _mm256_fmadd_ps(load8(ka, a0 + k * ea), bv, s0);
        s1 = _mm256_fmadd_ps(load8(ka, a1 + k * ea), bv, s1);
        s2 = _mm256_fmadd_ps(load8(ka, a2 + k * ea), bv, s2);
        s3 = _mm256_fmadd_ps(load8(ka, a3 + k * ea), bv, s3);
    }
    const __m256 s[4] = {s0, s1, s2, s3};
    for (int r = 0; r < 4; r++) {
        float v = hsum8(s[r]);
        for (int64_t t = k; t < K; t++) v = fmaf(load_one(ka, a[r], t), bl[t], v);
        out[r] = v;
    }
}

__attribute__((target("avx2,fma,f16c"))) static void small_dot4(src_kind ka, const char *const a[4], int64_t K,
                                                                const float *bl, float out[4]) {
#define SMALL_DOT4(kk) small_dot4_k(kk, a, K, bl, out)
    FOR_EACH_KIND(ka, SMALL_DOT4);
#undef SMALL_DOT4
}

// n elements of kind k, e apart (in elements), as f32 into dst.
static void small_line(src_kind k, const char *s, int64_t e, int64_t n, float *dst) {
    if ((e == 1 || n == 1) && n >= 8) {
        load_lines(k, s, 0, 1, (int)n, (int)n, dst);
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i] = load_one(k, s, i * e);
}

// Whether small_gemm takes g's layout: A's rows contiguous, or B's columns (it runs C^T = B^T A^T),
// or one row of A.
bool onednn__fma_small_takes(const onednn_fma_gemm *g) {
    return g->a_cs == 1 || g->b_rs == 1 || g->K == 1 || g->M == 1;
}

static void small_gemm(const onednn_fma_gemm *g0, float *scratch) {
    onednn_fma_gemm t = *g0;
    const onednn_fma_gemm *g = &t;
    if (t.a_cs != 1 && t.K > 1 && t.b_rs == 1)  // C^T = B^T A^T: its A's rows are B's columns
        t = (onednn_fma_gemm){.M = g0->N, .N = g0->M, .K = g0->K, .a = g0->b, .a_rs = g0->b_cs, .a_cs = g0->b_rs,
                              .b = g0->a, .b_rs = g0->a_cs, .b_cs = g0->a_rs, .c = g0->c, .c_rs = g0->c_cs,
                              .c_cs = g0->c_rs, .a_dt = g0->b_dt, .b_dt = g0->a_dt, .c_dt = g0->c_dt,
                              .round_dt = g0->round_dt};
    const src_kind ka = src_of(g->a_dt, g->round_dt), kb = src_of(g->b_dt, g->round_dt);
    const int64_t K = g->K, ea = src_size(ka), eb = src_size(kb), ec = (int64_t)dt_size(g->c_dt);
    const fma_round rnd = g->c_dt == dnnl_f32 ? round_of(g->round_dt) : g->c_dt == dnnl_f16 ? STORE_F16 : STORE_BF16;
    float *aline = scratch, *bcols = aline + K, *bf = bcols + g->N * K;
    const char *a = g->a, *b = g->b;
    char *c = g->c;
    // The columns the row part takes: whole vectors where C's rows are contiguous and B's are, or
    // B is one row (K = 1), gathered below into an f32 line where its columns are not contiguous
    // (expanded, stride 0, or sliced: read as contiguous, they gave wrong sums and reads past B).
    const bool wide = onednn__isa() >= ONEDNN_ISA_AVX512_CORE;
    const int64_t w = wide ? 16 : 8, j0 = (g->b_cs == 1 || g->K == 1) && g->c_cs == 1 ? g->N / w * w : 0;
    for (int64_t j = j0; j < g->N; j++)
        small_line(kb, b + j * g->b_cs * eb, g->b_rs, K, bcols + (j - j0) * K);
    if (j0 == 0 && g->N == 1 && g->a_cs == 1) {  // a GEMV: 4 rows of A at a time where they lie
        for (int64_t i = 0; i < g->M; i += 4) {
            const char *rows[4];
            float v[4];
            for (int r = 0; r < 4; r++) rows[r] = a + (i + r < g->M ? i + r : i) * g->a_rs * ea;
            small_dot4(ka, rows, g->K, bcols, v);
            for (int r = 0; r < 4 && i + r < g->M; r++) put_one(c, (i + r) * g->c_rs, rnd, false, v[r]);
        }
        return;
    }
    // The row part's B: where it lies, or converted once to f32 where rows of A would convert it again.
    src_kind kr = kb;
    const char *br = b;
    int64_t brk = g->b_rs * eb;
    if (j0 > 0 && g->b_cs != 1) {  // K = 1: B's row, j0 elements b_cs apart
        small_line(kb, b, g->b_cs, j0, bf);
        kr = SRC_F32, br = (const char *)bf, brk = j0 * (int64_t)sizeof(float);
    } else if (j0 > 0 && kb != SRC_F32 && g->M > 1) {
        load_lines(kb, b, g->b_rs * eb, K, (int)j0, (int)j0, bf);
        kr = SRC_F32, br = (const char *)bf, brk = j0 * (int64_t)sizeof(float);
    }
    for (int64_t i = 0; i < g->M; i++) {
        small_line(ka, a + i * g->a_rs * ea, g->a_cs, K, aline);
        char *crow_c = c + i * g->c_rs * ec;
        if (j0 > 0) {
            if (wide) small_rows512(kr, aline, g->K, br, brk, j0, crow_c, ec, rnd);
            else small_rows256(kr, aline, g->K, br, brk, j0, crow_c, ec, rnd);
        }
        for (int64_t j = j0; j < g->N; j += 4) {  // 4 columns at a time: their lines against A's row
            const char *cols[4];
            float v[4];
            for (int r = 0; r < 4; r++) cols[r] = (const char *)(bcols + ((j + r < g->N ? j + r : j) - j0) * K);
            small_dot4(SRC_F32, cols, K, aline, v);
            for (int r = 0; r < 4 && j + r < g->N; r++) put_one(c, i * g->c_rs + (j + r) * g->c_cs, rnd, false, v[r]);
        }
    }
}

// Whether a long K (over 2 x FMA_K_OUTER) runs as GEMMs of FMA_K_OUTER k each, added to C in order,
// each packing its own B block: on Intel's AVX-512 cores (the 1 MiB B block) where B over all of K
// would be packed in column blocks narrower than C, each block converting A again (at K 50257 and N
// 256, blocks of one 32-column micro-panel: A converted 8 times). The LM head's input gradient
// chunk, (79, 50257) x (50257, 256) on one loaded Sapphire Rapids class core, GFLOP/s: 36-38 so, 62
// in runs of 2048 k (two B blocks a run), 75-88 in runs of 1024 (one), 62-70 in runs of 512 or 256
// (dnnl_sgemm 63-80), A then packed into panels; (1024, 1536) x (1536, 384) 114 -> 121. Since A's
// rows are converted as rows (pack_a), the chunk of 256 rows in bf16, its time over f32's on
// dnnl_sgemm (one loaded Emerald Rapids core, CPU time, 5 runs of 6-8 interleaved calls, best /
// mean): runs of 1024 0.99-1.10 / 1.05-1.14, of 512 0.99-1.06 / 1.02-1.09, of 256 1.02-1.09 (likely: a
// 12-row tile's A, 24 KiB at 512 k, stays in L1 beside the streaming B micro-panel; 48 KiB at 1024
// does not). f32 C written in place only (its partial sums stay f32).
static bool k_outer(const onednn_fma_gemm *g, const fma_dims *d) {
    return d->isa.b_floats == FMA_B_FLOATS_INTEL512 && g->K > 2 * FMA_K_OUTER && d->nc < round_up(g->N, d->isa.nr) &&
           g->c_dt == dnnl_f32 && g->c_cs == 1 && g->round_dt == dnnl_data_type_undef;
}

static void fma_gemm_runs(const onednn_fma_gemm *g, void *scratch, int nthreads, bool accumulate);

void onednn__fma_gemm(const onednn_fma_gemm *g, void *scratch, int nthreads) {
    if (g->M == 0 || g->N == 0) return;
    if (g->K == 0) {  // the sum over no k
        zero_out(g);
        return;
    }
    if (g->M * g->N * g->K < onednn__fma_min_work() && onednn__fma_small_takes(g)) {
        small_gemm(g, scratch);
        return;
    }
    const fma_dims d = dims_of(g->N, g->K);
    if (k_outer(g, &d)) {
        const int64_t ea = (int64_t)dt_size(g->a_dt), eb = (int64_t)dt_size(g->b_dt);
        for (int64_t pc = 0; pc < g->K; pc += FMA_K_OUTER) {
            onednn_fma_gemm s = *g;
            s.K = g->K - pc < FMA_K_OUTER ? g->K - pc : FMA_K_OUTER;
            s.a = (const char *)g->a + pc * g->a_cs * ea;
            s.b = (const char *)g->b + pc * g->b_rs * eb;
            fma_gemm_runs(&s, scratch, nthreads, pc > 0);
        }
        return;
    }
    fma_gemm_runs(g, scratch, nthreads, false);
}

// The tiled GEMM (accumulate: C += A B).
static void fma_gemm_runs(const onednn_fma_gemm *g, void *scratch, int nthreads, bool accumulate) {
    fma_run r = {.g = g, .d = dims_of(g->N, g->K), .bp = scratch, .accumulate = accumulate};
    r.threads = r.bp + r.d.bp_floats;
    r.direct = g->c_cs == 1 && (g->c_dt == dnnl_f32 || g->K <= FMA_KC);
    r.round_last = g->c_dt == dnnl_f32 ? round_of(g->round_dt) : g->c_dt == dnnl_f16 ? STORE_F16 : STORE_BF16;
    r.b_kind = src_of(g->b_dt, g->round_dt);
    r.b_in_place = b_in_place(g, &r.d.isa, r.b_kind);
    r.b_first_row = !r.b_in_place && b_first_row(g, &r.d.isa, r.b_kind);
    const int nr = r.d.isa.nr;
    r.n_ic = (g->M + FMA_MC - 1) / FMA_MC;
    for (r.jc = 0; r.jc < g->N; r.jc += r.d.nc) {
        r.nc = g->N - r.jc < r.d.nc ? g->N - r.jc : r.d.nc;
        // Fewer row blocks than two per thread: the block's columns are split too (each slice
        // packs its rows of A again; so not on one thread).
        const int64_t panels = (r.nc + nr - 1) / nr;
        r.nsub = nthreads <= 1 || r.n_ic >= 2 * nthreads ? 1 : (2 * nthreads + r.n_ic - 1) / r.n_ic;
        if (r.nsub > panels) r.nsub = panels;
        r.sub_cols = (panels + r.nsub - 1) / r.nsub * nr;
        if (nthreads <= 1) {  // no worksharing here: the caller may be one thread of a batch loop's team
            pack_b(&r, 0, 0, panels);
            for (int64_t t = 0; t < r.n_ic * r.nsub; t++) one_task(&r, 0, t);
            continue;
        }
#pragma omp parallel num_threads(nthreads)
        run_team(&r);
    }
}

// ---- a step: the matrices of a batch ----
void onednn__fma_matmul_run(const onednn_step *s, const void *a, const void *b, void *c, void *scratch) {
    const onednn_gemm *bt = &s->gemm;
    const int64_t ea = (int64_t)dt_size(s->fma.a_dt), eb = (int64_t)dt_size(s->fma.b_dt), eo = (int64_t)dt_size(s->fma.c_dt);
    int nthreads = omp_get_max_threads();
    if (nthreads > s->fma_nthreads) nthreads = s->fma_nthreads;
    int64_t batch = 1;
    for (int d = 0; d < bt->nbatch; d++) batch *= bt->bdims[d];
    if (!bt->batch_parallel || nthreads <= 1) {
        for (int64_t i = 0; i < batch; i++) {
            int64_t o[3];
            onednn__batch_offsets(bt->nbatch, bt->bdims, bt->sa, bt->sb, bt->sc, i, o);
            onednn_fma_gemm g = s->fma;
            g.a = (const char *)a + o[0] * ea;
            g.b = (const char *)b + o[1] * eb;
            g.c = (char *)c + o[2] * eo;
            onednn__fma_gemm(&g, scratch, nthreads);
        }
        return;
    }
    // Small matrices of a large batch: whole matrices per thread, each with its own scratch.
    const size_t per = onednn__fma_scratch_bytes(s->fma.M, s->fma.N, s->fma.K, 1);
#pragma omp parallel for schedule(static) num_threads(nthreads)
    for (int64_t i = 0; i < batch; i++) {
        int64_t o[3];
        onednn__batch_offsets(bt->nbatch, bt->bdims, bt->sa, bt->sb, bt->sc, i, o);
        onednn_fma_gemm g = s->fma;
        g.a = (const char *)a + o[0] * ea;
        g.b = (const char *)b + o[1] * eb;
        g.c = (char *)c + o[2] * eo;
        onednn__fma_gemm(&g, (char *)scratch + (size_t)omp_get_thread_num() * per, 1);
    }
}
