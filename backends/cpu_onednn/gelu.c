// backends/cpu_onednn/gelu.c — GELU on dense f32 / bf16 / f16 (in and out of one dtype): one OpenMP
// pass computing PyTorch's GeluKernelImpl in float (its opmath), both forms, instead of oneDNN's
// binary primitive x * 1 with a gelu eltwise post-op (elementwise.c), which keeps every other layout.
// bf16 / f16 are converted to float a block at a time (the cast loops'), rounded once on store.
// Why: in the GPT-B step (6 calls on (4, 256, 1536), one thread) oneDNN's bf16 gelu took twice its
// f32 time, f16 went to the reference's double loop, and under an AVX2 cap bf16 did too (oneDNN's
// bf16 kernels need AVX-512). Measured on (4, 256, 1536), one thread, a loaded 2-vCPU Emerald Rapids,
// the two plugins side by side in one process (CPU time a call, primitive -> these loops): AVX-512
// f32 erf 1.2-1.6 -> 1.0-1.35 ms, tanh 1.0-1.3 -> 0.9-1.2; bf16 1.4-1.6x faster (erf 2.0-2.9 ->
// 1.3-1.8 ms); f16 22-30x (the reference's 32-53 ms before). AVX2 cap: f32 tanh 2.0-2.4x faster, erf
// even with oneDNN's JIT (0.86-1.04x); bf16 and f16 11-16x (the reference before). GELU's 6 calls in
// torc-bench --gpt=B --gpt-ops (medians of 8 and 6 alternating runs): f32 9.3 -> 7.3 ms, bf16 15.1 ->
// 9.2; AVX2 cap f32 22.5 -> 13.3, bf16 279 -> 16.1 (the step 1.71 -> 1.25 s).
//
// Accuracy, f32, against the exact function on 2^22 points of [-12, 12] (the reference computes in
// double, but its own 1 + erf / 1 + tanh cancels below x = -5: up to 1.7e7 ulps there):
//   erf form: 3 ulps from x = 1, 10 near 0 (the erfc polynomial, A&S 7.1.26 as PyTorch's
//     Vectorized<float>::erf, is accurate to 1.5e-7 absolute, and float Horner adds 3e-7 near x = 0);
//     for x < 0 that absolute error of 1 + erf stays: |error| < 2.2e-7, which is 42 ulps of the
//     result at x = -2, 6e3 at -4, 5e5 at -12 (PyTorch's 1 + (-(1 - erfc)) adds float eps of 1 to
//     it; oneDNN's primitive gave 0 from x = -5.5). -0 below x = -13.2 (exp(-x^2 / 2) underflows).
//   tanh form: 3 ulps for x >= -1; below, about 8 |inner| ulps (inner's float rounding times the
//     2 |inner| of exp(-2 inner)): 7 at x = -2, 36 at -5, 175 at -10 (values below 1e-33), then -0
//     from x = -10.1 (exp(-2 inner) above e^88). A float 1 + tanh is 0 from x = -5.2 (oneDNN's).
// Against the reference: within torc-xcheck's GELU tolerance (32 eps relative + 64 eps absolute) and
// tests/onednn_gelu_test.c's tighter one. The AVX paths contract to fmas (CMakeLists.txt), the plain
// one does not: their bits differ, each path's are the same at every thread count and position.
// Specials as the reference's formula: gelu(+inf) = +inf, gelu(-inf) = -inf * 0 = NaN (PyTorch
// 2.x's CPU and CUDA kernels give NaN there too), NaN stays NaN, -0 stays -0.
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gelu.h"  // onednn__erfc_abs_f
#include "onednn-impl.h"

static bool half_or_float(torc_dtype d) {
    return d == TORC_DTYPE_F32 || d == TORC_DTYPE_BF16 || d == TORC_DTYPE_F16;
}

// The GELUs these loops run: dense in and out of one float dtype (others keep oneDNN's primitive
// or, for f16, the reference). ndim is checked before dense() reads shapes.
bool onednn__gelu_takes(const torc_op *op) {
    if (op->code != TORC_OP_GELU || op->n_in != 1) return false;
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    return x->ndim >= 0 && x->ndim <= TORC_MAX_DIMS && half_or_float(y->dtype) && x->dtype == y->dtype &&
           onednn__same_shape(x, y) && onednn__dense(x) && onednn__dense(y);
}

int onednn__gelu_check(const torc_op *op) {
    const int a = op->params.gelu.approximate;
    if (a != 0 && a != 1)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: gelu approximate must be 0 or 1, got %d", a);
    int st = onednn__check_operand(&op->in[0], "in");
    return st ? st : onednn__check_operand(&op->out[0], "out");
}

// gelu(x) in float as PyTorch's GeluKernelImpl (its names). The erf form's 1 + erf(x kAlpha) is
// erfc(|x| kAlpha) below 0 and 2 - erfc above (PyTorch's 1 + (-(1 - erfc)) rounds erfc to float eps
// of 1 first). The tanh form's 0.5 x (1 + tanh(inner)) is x / (1 + exp(-2 inner)), the same function:
// one exp and one division, no cancellation where tanh is near -1 (a float 1 + tanh is 0 from about
// x = -5.2). exp(-2 inner) above e^88 is inf (exp_f's range ends at 88.3), so x / inf is -0 and
// -inf / inf NaN, as the formula gives.
static inline float gelu_erf_f(float x) {
    const float kAlpha = 0.70710678118654752440f;  // M_SQRT1_2
    const float c = onednn__erfc_abs_f(x * kAlpha);
    return x * 0.5f * (x < 0.0f ? c : 2.0f - c);
}

static inline float gelu_tanh_f(float x) {
    const float kBeta = 0.79788456080286535588f, kKappa = 0.044715f;  // M_SQRT2 M_2_SQRTPI / 2
    const float x_cube = x * x * x;
    const float inner = kBeta * (x + kKappa * x_cube);
    const float m2 = -2.0f * inner;
    const float e = m2 > 88.0f ? (float)INFINITY : onednn__exp_f(m2 > 88.0f ? 88.0f : m2);
    return x / (1.0f + e);
}

// y[i] = gelu(x[i]) for i < n (y may be x), written once and compiled per ISA.
#define GELU_LOOPS(suffix, attr)                                                                             \
    attr static void gelu_erf_##suffix(float *y, const float *x, int64_t n) {                                \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = gelu_erf_f(x[i]);                         \
    }                                                                                                        \
    attr static void gelu_tanh_##suffix(float *y, const float *x, int64_t n) {                               \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = gelu_tanh_f(x[i]);                        \
    }
GELU_LOOPS(avx512, __attribute__((target("avx512f,avx512dq,avx2,fma"))))
GELU_LOOPS(avx2, __attribute__((target("avx2,fma"))))
GELU_LOOPS(any, )

typedef void (*gelu_fn)(float *, const float *, int64_t);

static gelu_fn pick(int approximate) {
    const int isa = onednn__isa();  // TORC_MAX_CPU_ISA caps it
    if (isa >= ONEDNN_ISA_AVX512_CORE) return approximate ? gelu_tanh_avx512 : gelu_erf_avx512;
    if (isa >= ONEDNN_ISA_AVX2) return approximate ? gelu_tanh_avx2 : gelu_erf_avx2;
    return approximate ? gelu_tanh_any : gelu_erf_any;
}

// 16-bit elements converted at a time (the cast loops', cast.c): the float block (4 KiB) stays in
// L1. Converting inside the loops instead (bf16 is a float's upper half) measured 0-16% faster for
// bf16 at AVX-512 and even at AVX2 ((4, 256, 1536), one thread, side by side): not kept.
enum { BLOCK = 1024 };

// Elements [i0, i1); out may be in (each block is read before it is written).
static void gelu_range(const torc_op *op, int64_t i0, int64_t i1) {
    const torc_dtype d = op->out[0].dtype;
    const gelu_fn fn = pick(op->params.gelu.approximate);
    if (d == TORC_DTYPE_F32) {
        fn((float *)op->out[0].data + i0, (const float *)op->in[0].data + i0, i1 - i0);
        return;
    }
    const uint16_t *x = op->in[0].data;
    uint16_t *y = op->out[0].data;
    float buf[BLOCK];
    const bool bf = d == TORC_DTYPE_BF16;
    for (int64_t b = i0; b < i1; b += BLOCK) {
        const int64_t nb = i1 - b < BLOCK ? i1 - b : BLOCK;
        (bf ? onednn__bf16_to_f32 : onednn__f16_to_f32)(buf, x + b, nb);
        fn(buf, buf, nb);
        (bf ? onednn__f32_to_bf16 : onednn__f32_to_f16)(y + b, buf, nb);
    }
}

// One chunk per thread; small ops on the calling thread.
int onednn__gelu_run(const torc_op *op) {
    onednn__run_chunks(op, onednn__numel(&op->out[0]), gelu_range);
    return 0;
}
