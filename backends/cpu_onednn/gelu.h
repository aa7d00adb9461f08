// backends/cpu_onednn/gelu.h — the float erf that GELU (gelu.c) and GELU_BACKWARD (gelu_backward.c)
// share: plain C that `omp simd` vectorises, inlined into each file's per-ISA loops.
#ifndef TORC_ONEDNN_GELU_H
#define TORC_ONEDNN_GELU_H

#include <math.h>

#include "onednn-impl.h"  // onednn__exp_f

// A libm call keeps a loop scalar. This is plain C, branch-free (ISO C: no contraction, unless the
// file asks: gelu.c contracts to fmas), so `omp simd` vectorises it; the files that use it build
// with -fno-trapping-math (CMakeLists.txt) and compile it for AVX-512, AVX2 and any x86-64 below,
// picked by the CPU (isa.c).

// erfc(|x|) by Abramowitz and Stegun 7.1.26, the polynomial of PyTorch's Vectorized<float>::erf (its
// AVX2 / AVX-512 GELU kernels' erf): t P(t) exp(-x^2) with t = 1 / (1 + p |x|). Its error is
// absolute, |error| < 1.5e-7 (1.3 float eps of 1), not relative: 3e-5 of erfc(2), 7e-4 of erfc(3),
// 3% of erfc(8) (measured in double). 0 from |x| 9.35 (exp's underflow), and at +-inf (t is 0);
// NaN gives NaN.
static inline float onednn__erfc_abs_f(float x) {
    const float a = fabsf(x);  // one and; x < 0 ? -x : x compiled to a compare and a blend
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float poly = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t +
                        0.254829592f) * t;
    return poly * onednn__exp_f(-a * a);
}

// erf(x) as PyTorch's Vectorized<float>::erf: sign(x) (1 - erfc(|x|)), |error| < 1.5e-7.
static inline float onednn__erf_f(float x) {
    const float r = 1.0f - onednn__erfc_abs_f(x);
    return x < 0.0f ? -r : r;
}

#endif
