// backends/cuda/dtype_io.h — loads and stores of any torc dtype as one of the three compute types
// (float, double, int64), shared by host and device code; conversions are convert.h's (c10's).
#ifndef TCU_DTYPE_IO_H
#define TCU_DTYPE_IO_H

#include <stdbool.h>
#include <stdint.h>

#include <torc/convert.h>
#include <torc/types.h>

#ifdef __cplusplus
extern "C" {
#endif

// Forced inlining for the per-element bodies: they take small arrays by pointer, which would
// otherwise live in local memory on the device.
#if defined(__CUDACC__)
#define TCU_HDI static __host__ __device__ __forceinline__
#else
#define TCU_HDI static inline __attribute__((always_inline))
#endif

// The type kernels compute in. Chosen on the host per op (see ops.h): float for f32/f16/bf16/fp8
// work, double when f64 is involved or integers meet floating math, int64 for integer work.
// TCU_CT_GEN marks the generators (fill, ranges, RNG): double math without inputs, in a
// kernel of their own so the heavy RNG math does not weigh on the others' registers.
typedef enum tcu_ctype { TCU_CT_F32 = 0, TCU_CT_F64, TCU_CT_I64, TCU_CT_GEN } tcu_ctype;

TORC_HD static inline bool tcu_dtype_is_float(torc_dtype d) {
    return d == TORC_DTYPE_F64 || d == TORC_DTYPE_F32 || d == TORC_DTYPE_F16 ||
           d == TORC_DTYPE_BF16 || d == TORC_DTYPE_F8_E4M3FN || d == TORC_DTYPE_F8_E5M2;
}

// Floating -> integer as PyTorch on x86 (and the reference backend): truncation toward zero,
// NaN and out-of-range values give INT64_MIN (cvttsd2si). int32/int16/int8 go through a 32-bit
// conversion (INT32_MIN when out of range) and keep the low bits, as c10 does.
TORC_HD static inline int64_t tcu_f64_to_i64(double v) {
    return (v >= -0x1p63 && v < 0x1p63) ? (int64_t)v : INT64_MIN;
}
TORC_HD static inline int32_t tcu_f64_to_i32(double v) {
    return (v > -2147483649.0 && v < 2147483648.0) ? (int32_t)v : INT32_MIN;
}

// ---- loads: element i of base (dtype d) as the compute type ----
TORC_HD static inline double tcu_load_f64(const void *base, int64_t i, torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F64: return ((const double *)base)[i];
    case TORC_DTYPE_F32: return ((const float *)base)[i];
    case TORC_DTYPE_F16: return torc_f16_to_f32(((const uint16_t *)base)[i]);
    case TORC_DTYPE_BF16: return torc_bf16_to_f32(((const uint16_t *)base)[i]);
    case TORC_DTYPE_F8_E4M3FN: return torc_f8e4m3fn_to_f32(((const uint8_t *)base)[i]);
    case TORC_DTYPE_F8_E5M2: return torc_f8e5m2_to_f32(((const uint8_t *)base)[i]);
    case TORC_DTYPE_I64: return (double)((const int64_t *)base)[i];
    case TORC_DTYPE_I32: return ((const int32_t *)base)[i];
    case TORC_DTYPE_I16: return ((const int16_t *)base)[i];
    case TORC_DTYPE_I8: return ((const int8_t *)base)[i];
    case TORC_DTYPE_U8: return ((const uint8_t *)base)[i];
    case TORC_DTYPE_BOOL: return ((const uint8_t *)base)[i] != 0;
    default: return 0;
    }
}

TORC_HD static inline float tcu_load_f32(const void *base, int64_t i, torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F64: return (float)((const double *)base)[i];
    case TORC_DTYPE_F32: return ((const float *)base)[i];
    case TORC_DTYPE_F16: return torc_f16_to_f32(((const uint16_t *)base)[i]);
    case TORC_DTYPE_BF16: return torc_bf16_to_f32(((const uint16_t *)base)[i]);
    case TORC_DTYPE_F8_E4M3FN: return torc_f8e4m3fn_to_f32(((const uint8_t *)base)[i]);
    case TORC_DTYPE_F8_E5M2: return torc_f8e5m2_to_f32(((const uint8_t *)base)[i]);
    case TORC_DTYPE_I64: return (float)((const int64_t *)base)[i];
    case TORC_DTYPE_I32: return (float)((const int32_t *)base)[i];
    case TORC_DTYPE_I16: return ((const int16_t *)base)[i];
    case TORC_DTYPE_I8: return ((const int8_t *)base)[i];
    case TORC_DTYPE_U8: return ((const uint8_t *)base)[i];
    case TORC_DTYPE_BOOL: return ((const uint8_t *)base)[i] != 0;
    default: return 0;
    }
}

TORC_HD static inline int64_t tcu_load_i64(const void *base, int64_t i, torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_I64: return ((const int64_t *)base)[i];
    case TORC_DTYPE_I32: return ((const int32_t *)base)[i];
    case TORC_DTYPE_I16: return ((const int16_t *)base)[i];
    case TORC_DTYPE_I8: return ((const int8_t *)base)[i];
    case TORC_DTYPE_U8: return ((const uint8_t *)base)[i];
    case TORC_DTYPE_BOOL: return ((const uint8_t *)base)[i] != 0;
    default: return tcu_f64_to_i64(tcu_load_f64(base, i, d));
    }
}

// Truthiness without any rounding (a tiny f64 is true even though it rounds to 0.0f).
TORC_HD static inline bool tcu_load_bool(const void *base, int64_t i, torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F64: return ((const double *)base)[i] != 0.0;
    case TORC_DTYPE_F32: return ((const float *)base)[i] != 0.0f;
    case TORC_DTYPE_F16: case TORC_DTYPE_BF16: return (((const uint16_t *)base)[i] & 0x7FFF) != 0;
    case TORC_DTYPE_F8_E4M3FN: case TORC_DTYPE_F8_E5M2: return (((const uint8_t *)base)[i] & 0x7F) != 0;
    case TORC_DTYPE_I64: return ((const int64_t *)base)[i] != 0;
    case TORC_DTYPE_I32: return ((const int32_t *)base)[i] != 0;
    case TORC_DTYPE_I16: return ((const int16_t *)base)[i] != 0;
    default: return ((const uint8_t *)base)[i] != 0;
    }
}

// ---- stores: v rounded once to dtype d into element i of base ----
TORC_HD static inline void tcu_store_i64(void *base, int64_t i, torc_dtype d, int64_t v) {
    switch (d) {
    case TORC_DTYPE_F64: ((double *)base)[i] = (double)v; break;
    case TORC_DTYPE_F32: ((float *)base)[i] = (float)v; break;
    case TORC_DTYPE_F16: ((uint16_t *)base)[i] = torc_f32_to_f16((float)v); break;
    case TORC_DTYPE_BF16: ((uint16_t *)base)[i] = torc_f32_to_bf16((float)v); break;
    case TORC_DTYPE_F8_E4M3FN: ((uint8_t *)base)[i] = torc_f32_to_f8e4m3fn((float)v); break;
    case TORC_DTYPE_F8_E5M2: ((uint8_t *)base)[i] = torc_f32_to_f8e5m2((float)v); break;
    case TORC_DTYPE_I64: ((int64_t *)base)[i] = v; break;
    // narrowing keeps the low bits (two's complement wrap), as C++ and PyTorch do
    case TORC_DTYPE_I32: ((int32_t *)base)[i] = (int32_t)(uint32_t)(uint64_t)v; break;
    case TORC_DTYPE_I16: ((int16_t *)base)[i] = (int16_t)(uint16_t)(uint64_t)v; break;
    case TORC_DTYPE_I8: ((int8_t *)base)[i] = (int8_t)(uint8_t)(uint64_t)v; break;
    case TORC_DTYPE_U8: ((uint8_t *)base)[i] = (uint8_t)(uint64_t)v; break;
    case TORC_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0; break;
    default: break;
    }
}

TORC_HD static inline void tcu_store_f64(void *base, int64_t i, torc_dtype d, double v) {
    switch (d) {
    case TORC_DTYPE_F64: ((double *)base)[i] = v; break;
    case TORC_DTYPE_F32: ((float *)base)[i] = (float)v; break;
    // c10 narrows double -> float -> half; so does convert.h
    case TORC_DTYPE_F16: ((uint16_t *)base)[i] = torc_f32_to_f16((float)v); break;
    case TORC_DTYPE_BF16: ((uint16_t *)base)[i] = torc_f32_to_bf16((float)v); break;
    case TORC_DTYPE_F8_E4M3FN: ((uint8_t *)base)[i] = torc_f32_to_f8e4m3fn((float)v); break;
    case TORC_DTYPE_F8_E5M2: ((uint8_t *)base)[i] = torc_f32_to_f8e5m2((float)v); break;
    case TORC_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0.0; break;
    case TORC_DTYPE_I32: case TORC_DTYPE_I16: case TORC_DTYPE_I8: tcu_store_i64(base, i, d, tcu_f64_to_i32(v)); break;
    default: tcu_store_i64(base, i, d, tcu_f64_to_i64(v)); break;
    }
}

TORC_HD static inline void tcu_store_f32(void *base, int64_t i, torc_dtype d, float v) {
    switch (d) {
    case TORC_DTYPE_F64: ((double *)base)[i] = v; break;
    case TORC_DTYPE_F32: ((float *)base)[i] = v; break;
    case TORC_DTYPE_F16: ((uint16_t *)base)[i] = torc_f32_to_f16(v); break;
    case TORC_DTYPE_BF16: ((uint16_t *)base)[i] = torc_f32_to_bf16(v); break;
    case TORC_DTYPE_F8_E4M3FN: ((uint8_t *)base)[i] = torc_f32_to_f8e4m3fn(v); break;
    case TORC_DTYPE_F8_E5M2: ((uint8_t *)base)[i] = torc_f32_to_f8e5m2(v); break;
    case TORC_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0.0f; break;
    case TORC_DTYPE_I32: case TORC_DTYPE_I16: case TORC_DTYPE_I8: tcu_store_i64(base, i, d, tcu_f64_to_i32(v)); break;
    default: tcu_store_i64(base, i, d, tcu_f64_to_i64(v)); break;
    }
}

// dst = cast(src) between any dtypes, as the reference's ref_cast: bytes when equal, floating
// sources through double, integer ones through int64.
TORC_HD static inline void tcu_cast(void *dst, int64_t di, torc_dtype dd, const void *src, int64_t si, torc_dtype sd) {
    if (dd == sd) {
        switch (torc_abi_dtype_size(dd)) {
        case 8: ((uint64_t *)dst)[di] = ((const uint64_t *)src)[si]; break;
        case 4: ((uint32_t *)dst)[di] = ((const uint32_t *)src)[si]; break;
        case 2: ((uint16_t *)dst)[di] = ((const uint16_t *)src)[si]; break;
        default: ((uint8_t *)dst)[di] = ((const uint8_t *)src)[si]; break;
        }
    } else if (tcu_dtype_is_float(sd)) {
        tcu_store_f64(dst, di, dd, tcu_load_f64(src, si, sd));
    } else {
        tcu_store_i64(dst, di, dd, tcu_load_i64(src, si, sd));
    }
}

// Copies one element of `size` bytes (1, 2, 4 or 8) without conversion.
TORC_HD static inline void tcu_move_raw(void *dst, int64_t di, const void *src, int64_t si, int size) {
    switch (size) {
    case 8: ((uint64_t *)dst)[di] = ((const uint64_t *)src)[si]; break;
    case 4: ((uint32_t *)dst)[di] = ((const uint32_t *)src)[si]; break;
    case 2: ((uint16_t *)dst)[di] = ((const uint16_t *)src)[si]; break;
    default: ((uint8_t *)dst)[di] = ((const uint8_t *)src)[si]; break;
    }
}

#ifdef __cplusplus
}
#endif
#endif
