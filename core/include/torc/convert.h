// torc/convert.h — scalar conversions between f32 and the narrow float formats, bit-exact with
// PyTorch's c10 (round to nearest even, subnormals kept; e4m3fn has no infinity: as in PyTorch
// 2.15, finite overflow and +-inf saturate to +-448 there, NaN stays NaN; e5m2 overflows to inf).
// Plain C shared by host and device code: under nvcc every function is __host__ __device__.
#ifndef TORC_CONVERT_H
#define TORC_CONVERT_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define TORC_HD __host__ __device__
#else
#define TORC_HD
#endif

// Every conversion goes through f32, as c10 does (double -> half is double -> float -> half).

TORC_HD static inline uint32_t torc_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
TORC_HD static inline float torc_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// ---- f16 (IEEE binary16) ----
TORC_HD static inline float torc_f16_to_f32(uint16_t h) {
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & UINT32_C(0x80000000);
    const uint32_t two_w = w + w;
    const uint32_t exp_offset = UINT32_C(0xE0) << 23;
    const float exp_scale = torc_f32_from_bits(UINT32_C(0x07800000));  // 2^-112 (no hex floats in C++11)
    const float normalized = torc_f32_from_bits((two_w >> 4) + exp_offset) * exp_scale;
    const uint32_t magic_mask = UINT32_C(126) << 23;
    const float denormalized = torc_f32_from_bits((two_w >> 17) | magic_mask) - 0.5f;
    const uint32_t denormalized_cutoff = UINT32_C(1) << 27;
    return torc_f32_from_bits(sign | (two_w < denormalized_cutoff ? torc_f32_bits(denormalized)
                                                                  : torc_f32_bits(normalized)));
}

TORC_HD static inline uint16_t torc_f32_to_f16(float f) {
    const float scale_to_inf = torc_f32_from_bits(UINT32_C(0x77800000));   // 2^112
    const float scale_to_zero = torc_f32_from_bits(UINT32_C(0x08800000));  // 2^-110
    float base = (__builtin_fabsf(f) * scale_to_inf) * scale_to_zero;
    const uint32_t w = torc_f32_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & UINT32_C(0x80000000);
    uint32_t bias = shl1_w & UINT32_C(0xFF000000);
    if (bias < UINT32_C(0x71000000)) bias = UINT32_C(0x71000000);
    base = torc_f32_from_bits((bias >> 1) + UINT32_C(0x07800000)) + base;
    const uint32_t bits = torc_f32_bits(base);
    const uint32_t exp_bits = (bits >> 13) & UINT32_C(0x00007C00);
    const uint32_t mantissa_bits = bits & UINT32_C(0x00000FFF);
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (uint16_t)((sign >> 16) | (shl1_w > UINT32_C(0xFF000000) ? UINT32_C(0x7E00) : nonsign));
}

// ---- bf16 ----
TORC_HD static inline float torc_bf16_to_f32(uint16_t b) { return torc_f32_from_bits((uint32_t)b << 16); }

TORC_HD static inline uint16_t torc_f32_to_bf16(float f) {
    if (f != f) return UINT16_C(0x7FC0);
    const uint32_t u = torc_f32_bits(f);
    return (uint16_t)((u + ((u >> 16) & 1) + UINT32_C(0x7FFF)) >> 16);
}

// ---- f8 e4m3fn: bias 7, no infinity, 0x7F / 0xFF are NaN, max 448 (overflow saturates) ----
TORC_HD static inline float torc_f8e4m3fn_to_f32(uint8_t b) {
    const uint32_t sign = (uint32_t)(b & 0x80) << 24;
    const uint32_t exp = (b >> 3) & 0xF, mant = b & 0x7;
    if (exp == 0xF && mant == 0x7) return torc_f32_from_bits(sign | UINT32_C(0x7FC00000));
    float v;
    if (exp == 0) v = (float)mant * 0.001953125f; // subnormal: mant/8 * 2^-6
    else v = torc_f32_from_bits(((exp + 120) << 23) | (mant << 20));
    return torc_f32_from_bits(sign | torc_f32_bits(v));
}

TORC_HD static inline uint8_t torc_f32_to_f8e4m3fn(float f) {
    const uint32_t fp8_max = UINT32_C(1087) << 20;   // 480.0f: from here up, inf -> 448, NaN -> NaN
    const uint32_t denorm_mask = UINT32_C(141) << 23;
    uint32_t f_bits = torc_f32_bits(f);
    const uint32_t sign = f_bits & UINT32_C(0x80000000);
    uint8_t result;
    f_bits ^= sign;
    if (f_bits >= fp8_max) {
        result = f_bits > UINT32_C(0x7F800000) ? UINT8_C(0x7F) : UINT8_C(0x7E);
    } else if (f_bits < (UINT32_C(121) << 23)) {     // below 2^-6: subnormal, rounded by an add
        f_bits = torc_f32_bits(torc_f32_from_bits(f_bits) + torc_f32_from_bits(denorm_mask));
        result = (uint8_t)(f_bits - denorm_mask);
    } else {
        const uint32_t mant_odd = (f_bits >> 20) & 1;
        f_bits += ((uint32_t)(7 - 127) << 23) + UINT32_C(0x7FFFF);
        f_bits += mant_odd;
        result = (uint8_t)(f_bits >> 20);
        if (result == 0x7F) result = 0x7E;           // (464, 480) rounds into NaN's pattern
    }
    return (uint8_t)(result | (sign >> 24));
}

// ---- f8 e5m2: the top byte of an f16, bias 15, has infinity, max 57344 ----
TORC_HD static inline float torc_f8e5m2_to_f32(uint8_t b) { return torc_f16_to_f32((uint16_t)((uint16_t)b << 8)); }

TORC_HD static inline uint8_t torc_f32_to_f8e5m2(float f) {
    const uint32_t fp32_inf = UINT32_C(255) << 23;
    const uint32_t fp8_max = UINT32_C(143) << 23;    // 65536.0f
    const uint32_t denorm_mask = UINT32_C(134) << 23;
    uint32_t f_bits = torc_f32_bits(f);
    const uint32_t sign = f_bits & UINT32_C(0x80000000);
    uint8_t result;
    f_bits ^= sign;
    if (f_bits >= fp8_max) {
        result = f_bits > fp32_inf ? UINT8_C(0x7F) : UINT8_C(0x7C);
    } else if (f_bits < (UINT32_C(113) << 23)) {
        f_bits = torc_f32_bits(torc_f32_from_bits(f_bits) + torc_f32_from_bits(denorm_mask));
        result = (uint8_t)(f_bits - denorm_mask);
    } else {
        const uint32_t mant_odd = (f_bits >> 21) & 1;
        f_bits += ((uint32_t)(15 - 127) << 23) + UINT32_C(0xFFFFF);
        f_bits += mant_odd;
        result = (uint8_t)(f_bits >> 21);
    }
    return (uint8_t)(result | (sign >> 24));
}

// Saturating fp8 casts (used by scaled casts, as cuBLASLt and Transformer Engine do): finite
// values beyond the format's range clamp to +-max; NaN stays NaN. (For e4m3fn this is the same
// as the plain cast; e5m2's plain cast overflows to infinity.)
TORC_HD static inline uint8_t torc_f32_to_f8e4m3fn_sat(float f) {
    if (f == f) f = f > 448.0f ? 448.0f : (f < -448.0f ? -448.0f : f);
    return torc_f32_to_f8e4m3fn(f);
}
TORC_HD static inline uint8_t torc_f32_to_f8e5m2_sat(float f) {
    if (f == f) f = f > 57344.0f ? 57344.0f : (f < -57344.0f ? -57344.0f : f);
    return torc_f32_to_f8e5m2(f);
}

#endif
