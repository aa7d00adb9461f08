// backends/cpu_onednn/vec16.h — rows of f32, bf16 or f16 loaded as f32 vectors (16-bit values
// converted in registers, exactly) and lanes summed, for the kernels that read 16-bit rows where
// they lie: attention.c's decode path and gemv.c. AVX-512 (masked tails) and AVX2 + F16C (a tail
// through a zeroed copy); callers pick by torc's ISA (isa.c) and call nothing here below it.
#ifndef TORC_ONEDNN_VEC16_H
#define TORC_ONEDNN_VEC16_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define VEC16_TGT512 "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"
#define VEC16_TGT256 "avx2,fma,f16c"

// The first `left` of 16 lanes (none for left <= 0).
static inline __mmask16 vec16_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
}

// 16 bf16 / f16 values at p as f32, the lanes outside m 0.
__attribute__((target(VEC16_TGT512), always_inline)) static inline __m512 vec16_half512(const uint16_t *p, __mmask16 m,
                                                                                         bool f16) {
    const __m256i x = _mm256_maskz_loadu_epi16(m, p);
    return f16 ? _mm512_cvtph_ps(x) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
}

// Elements f .. f + 15 of a row of f32, bf16 or f16 (kind 0, 1, 2: a constant), those from e on 0.
__attribute__((target(VEC16_TGT512), always_inline)) static inline __m512 vec16_row512(const int kind, const void *row,
                                                                                        int64_t f, int64_t e) {
    if (kind == 0) return _mm512_maskz_loadu_ps(vec16_mask(e - f), (const float *)row + f);
    return vec16_half512((const uint16_t *)row + f, vec16_mask(e - f), kind == 2);
}

// The sums of a, b, c, d's lanes as 4 floats: pairs of lanes, then the 128-bit blocks (8 shuffles and
// 5 adds, where 4 reductions take 16 and 16).
__attribute__((target(VEC16_TGT512), always_inline)) static inline __m128 vec16_sum4_512(__m512 a, __m512 b, __m512 c,
                                                                                          __m512 d) {
    const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));  // a0+a2 b0+b2 a1+a3 b1+b3
    const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    __m512 w = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));  // a b c d of each block
    w = _mm512_add_ps(w, _mm512_shuffle_f32x4(w, w, _MM_SHUFFLE(1, 0, 3, 2)));
    w = _mm512_add_ps(w, _mm512_shuffle_f32x4(w, w, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castps512_ps128(w);
}

// Elements f .. f + 7 of a row of f32, bf16 or f16 (kind 0, 1, 2: a constant), those from e on 0.
__attribute__((target(VEC16_TGT256), always_inline)) static inline __m256 vec16_row256(const int kind, const void *row,
                                                                                        int64_t f, int64_t e) {
    const int64_t n = e - f >= 8 ? 8 : e - f > 0 ? e - f : 0;
    if (kind == 0) {
        if (n == 8) return _mm256_loadu_ps((const float *)row + f);
        float t[8] = {0};
        memcpy(t, (const float *)row + f, sizeof(float) * (size_t)n);
        return _mm256_loadu_ps(t);
    }
    __m128i v;
    if (n == 8) {
        v = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + f));
    } else {
        uint16_t t[8] = {0};
        memcpy(t, (const uint16_t *)row + f, sizeof(uint16_t) * (size_t)n);
        v = _mm_loadu_si128((const __m128i *)t);
    }
    return kind == 2 ? _mm256_cvtph_ps(v) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

// The sum of v's lanes.
__attribute__((target(VEC16_TGT256), always_inline)) static inline float vec16_sum256(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

// The sums of a, b, c, d's lanes as 4 floats (hadd's pairs, then the halves).
__attribute__((target(VEC16_TGT256), always_inline)) static inline __m128 vec16_sum4_256(__m256 a, __m256 b, __m256 c,
                                                                                          __m256 d) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));  // a b c d of each half
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

#endif
