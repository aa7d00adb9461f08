// backends/cpu_onednn/cast.c — dense casts (TORC_OP_COPY) as host loops: float32 <-> bfloat16 and
// float16, the casts autocast makes every step, with c10's rounding (nearest even, subnormals
// kept, bf16 NaN -> 0x7FC0), and float32 <-> fp8 (e4m3fn, e5m2), which fp8 autocast makes for
// every quantized matmul operand; oneDNN 2.6 has no fp8 type and its f16 conversions differ
// from PyTorch's, so the reference's generic loop ran those.
// oneDNN's reorder converts to bf16 with vcvtneps2bf16, which flushes subnormals, so through it
// every f32 -> bf16 cast paid a second pass scanning its input for them (fixup.c); this is one
// pass. Strided casts and every other dtype pair stay on the reorder (copy.c) or the reference.
#include <immintrin.h>
#include <omp.h>

#include "onednn-impl.h"
#include "torc/convert.h"

static bool narrow(torc_dtype d) {
    return d == TORC_DTYPE_BF16 || d == TORC_DTYPE_F16 || d == TORC_DTYPE_F8_E4M3FN || d == TORC_DTYPE_F8_E5M2;
}

bool onednn__cast_takes(const torc_op *op) {
    if (op->code != TORC_OP_COPY || op->n_in != 1) return false;
    const torc_dtype s = op->in[0].dtype, d = op->out[0].dtype;
    return ((s == TORC_DTYPE_F32 && narrow(d)) || (narrow(s) && d == TORC_DTYPE_F32)) &&
           onednn__same_shape(&op->in[0], &op->out[0]) && onednn__dense(&op->in[0]) && onednn__dense(&op->out[0]);
}

// The loops, compiled for AVX-512 (16 elements a step), AVX2 (8) and any x86-64, picked by torc's
// ISA (isa.c: the CPU, capped by TORC_MAX_CPU_ISA); f16 on F16C where the CPU has AVX2 (below).
// The rounding is torc_f32_to_bf16's (convert.h), written on the bits so that it vectorizes.
#define CAST_LOOPS(suffix, attr)                                                                   \
    attr static void to_bf16_##suffix(uint16_t *out, const uint32_t *in, int64_t n) {            \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                      \
            const uint32_t u = in[i];                                                              \
            const uint16_t r = (uint16_t)((u + ((u >> 16) & 1) + UINT32_C(0x7FFF)) >> 16);         \
            out[i] = (u & UINT32_C(0x7FFFFFFF)) > UINT32_C(0x7F800000) ? UINT16_C(0x7FC0) : r;     \
        }                                                                                          \
    }                                                                                              \
    attr static void to_f32_##suffix(uint32_t *out, const uint16_t *in, int64_t n) {             \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) out[i] = (uint32_t)in[i] << 16;        \
    }                                                                                              \
    attr static void to_e4m3_##suffix(uint8_t *out, const float *in, int64_t n) {                \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) out[i] = torc_f32_to_f8e4m3fn(in[i]);  \
    }                                                                                              \
    attr static void to_e5m2_##suffix(uint8_t *out, const float *in, int64_t n) {                \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) out[i] = torc_f32_to_f8e5m2(in[i]);    \
    }
CAST_LOOPS(avx512, __attribute__((target("avx512f,avx512bw,avx512vl"))))
CAST_LOOPS(avx2, __attribute__((target("avx2,fma"))))
CAST_LOOPS(any, )

// f16 <-> f32 with F16C's vcvtps2ph (round to nearest even, subnormals kept, as c10) and vcvtph2ps
// (exact): c10's bit tricks (convert.h) vectorize only with AVX-512 masks; compiled for AVX2 they
// ran at 1.7 and 1.1 ns per element on a Zen 4 core, about what plain x86-64 code does, and made
// f16 autocast steps under the AVX2 family 3.5x slower than f32 ones (Cruncher D=256). F16C: 0.19
// and 0.07 ns (the AVX-512 bit tricks: 0.23 and 0.14). Only NaNs differ: vcvtps2ph keeps payload
// bits that c10 drops (-> sign | 0x7E00), so a block of 8 holding a NaN takes the scalar code.
// Checked equal to convert.h on every f16 value and 2^20 random f32 bit patterns.
__attribute__((target("avx2,f16c"))) static void to_f16_f16c(uint16_t *out, const float *in, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(in + i);
        const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
        if (!_mm256_testz_ps(nan, nan)) {
            for (int k = 0; k < 8; k++) out[i + k] = torc_f32_to_f16(in[i + k]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++) out[i] = torc_f32_to_f16(in[i]);
}

__attribute__((target("avx2,f16c"))) static void from_f16_f16c(float *out, const uint16_t *in, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
    for (; i < n; i++) out[i] = torc_f16_to_f32(in[i]);
}

static void to_f16_any(uint16_t *out, const float *in, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) out[i] = torc_f32_to_f16(in[i]);
}

static void from_f16_any(float *out, const uint16_t *in, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) out[i] = torc_f16_to_f32(in[i]);
}

// TORC_MAX_CPU_ISA caps these (onednn__isa); F16C is its own cpuid bit, on every AVX2 CPU made.
static bool has_avx512(void) { return onednn__isa() >= ONEDNN_ISA_AVX512_CORE; }
static bool has_avx2(void) { return onednn__isa() >= ONEDNN_ISA_AVX2; }
static bool has_f16c(void) { return has_avx2() && onednn__cpu_has_f16c(); }

void onednn__f32_to_bf16(uint16_t *out, const float *in, int64_t n) {
    (has_avx512() ? to_bf16_avx512 : has_avx2() ? to_bf16_avx2 : to_bf16_any)(out, (const uint32_t *)in, n);
}

void onednn__bf16_to_f32(float *out, const uint16_t *in, int64_t n) {
    (has_avx512() ? to_f32_avx512 : has_avx2() ? to_f32_avx2 : to_f32_any)((uint32_t *)out, in, n);
}

void onednn__f32_to_f16(uint16_t *out, const float *in, int64_t n) {
    (has_f16c() ? to_f16_f16c : to_f16_any)(out, in, n);
}

void onednn__f16_to_f32(float *out, const uint16_t *in, int64_t n) {
    (has_f16c() ? from_f16_f16c : from_f16_any)(out, in, n);
}

// fp8 -> f32 by a table of the 256 values (torc/convert.h's decoders).
static void fp8_to_f32(float *out, const uint8_t *in, int64_t n, torc_dtype s) {
    float lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = s == TORC_DTYPE_F8_E4M3FN ? torc_f8e4m3fn_to_f32((uint8_t)v) : torc_f8e5m2_to_f32((uint8_t)v);
    for (int64_t i = 0; i < n; i++) out[i] = lut[in[i]];
}

static void run_range(const torc_op *op, int64_t i0, int64_t i1) {
    const torc_dtype s = op->in[0].dtype, d = op->out[0].dtype;
    const int64_t n = i1 - i0;
    const float *f = (const float *)op->in[0].data + i0;
    uint8_t *q = (uint8_t *)op->out[0].data + i0;
    if (d == TORC_DTYPE_BF16) onednn__f32_to_bf16((uint16_t *)op->out[0].data + i0, f, n);
    else if (s == TORC_DTYPE_BF16) onednn__bf16_to_f32((float *)op->out[0].data + i0, (const uint16_t *)op->in[0].data + i0, n);
    else if (d == TORC_DTYPE_F16) onednn__f32_to_f16((uint16_t *)op->out[0].data + i0, f, n);
    else if (s == TORC_DTYPE_F16) onednn__f16_to_f32((float *)op->out[0].data + i0, (const uint16_t *)op->in[0].data + i0, n);
    else if (d == TORC_DTYPE_F8_E4M3FN) (has_avx512() ? to_e4m3_avx512 : has_avx2() ? to_e4m3_avx2 : to_e4m3_any)(q, f, n);
    else if (d == TORC_DTYPE_F8_E5M2) (has_avx512() ? to_e5m2_avx512 : has_avx2() ? to_e5m2_avx2 : to_e5m2_any)(q, f, n);
    else fp8_to_f32((float *)op->out[0].data + i0, (const uint8_t *)op->in[0].data + i0, n, s);
}

// One chunk per thread; small casts on the calling thread.
int onednn__cast_run(const torc_op *op) {
    onednn__run_chunks(op, onednn__numel(&op->out[0]), run_range);
    return 0;
}
