// backends/cpu_onednn/bf16_split.h — f32 rounded to bf16 on AVX2 by Veltkamp's split, and when it is
// exact. matmul_fma.c's AVX2 kernels use it; tests/onednn_bf16_split_test.c checks it against
// torc_f32_to_bf16 (all 2^32 floats with TORC_BF16_SPLIT_ALL=1).
#ifndef TORC_ONEDNN_BF16_SPLIT_H
#define TORC_ONEDNN_BF16_SPLIT_H

#include <immintrin.h>
#include <stdbool.h>

// f32 values rounded to bf16 and back: p = v * 65537, p - (p - v) (Veltkamp's split at 16 bits),
// three operations on the FP multipliers and adders where the integer rounding (shift, and, two
// adds, and, a NaN compare and a blend) takes seven on the pipes the FMAs share. Wherever a result
// is not NaN and its low 16 bits are zero it is torc_f32_to_bf16's rounding, bit for bit (zeros and
// their signs included), and it is never inf. The others need the exact rounding: NaN and inf (the
// split gives NaN), |v| from about 2^111 (v * 65537 overflows: NaN) and subnormals off bf16's grid
// (left unrounded: low bits set). Compile with -ffp-contract=off: p - v fused into an FMA breaks it.
__attribute__((target("avx2"))) static inline __m256 split_bf16_8(__m256 v) {
    const __m256 p = _mm256_mul_ps(v, _mm256_set1_ps(65537.0f));
    return _mm256_sub_ps(p, _mm256_sub_ps(p, v));
}

// Whether split results whose bits were ORed together into bits have their low 16 bits zero (the
// caller tests for NaN its own way).
__attribute__((target("avx2"))) static inline bool split_low_bits_zero(__m256 bits) {
    return _mm256_testz_si256(_mm256_castps_si256(bits), _mm256_set1_epi32(0xFFFF));
}

#endif
