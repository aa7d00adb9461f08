// backends/cpu_onednn/gelu_backward.c — GELU_BACKWARD on dense f32 / bf16 / f16 operands: one
// OpenMP pass computing PyTorch's GeluBackwardKernelImpl in float (its opmath), instead of the
// dozen elementwise primitives (and their temporaries) the core composes otherwise.
// bf16 / f16 are converted to float a block at a time (the cast loops'), rounded once on store.
// Measured (1024 x 1536 f32, one thread, a loaded 2-vCPU Sapphire Rapids, AVX-512): tanh 3.8 ms,
// none 4.0 ms, against 20-42 and 36-77 ms for the composed ops; worst error over x in [-10, 10]
// 1.1 (tanh) and 2.4 (none) float eps of the double formula, on a sweep of 2^20 points.
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gelu.h"  // onednn__erf_f
#include "onednn-impl.h"

bool onednn__gelu_backward_takes(const torc_op *op) { return op->code == TORC_OP_GELU_BACKWARD; }

int onednn__gelu_backward_check(const torc_op *op) {
    if (op->n_in != 2)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: gelu_backward takes 2 inputs, got %d", op->n_in);
    const int a = op->params.gelu.approximate;
    if (a != 0 && a != 1)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: gelu_backward: approximate must be 0 ('none') or 1 "
                             "('tanh'), got %d", a);
    int st = onednn__check_operand(&op->out[0], "out");
    if (st) return st;
    const torc_dtype d = op->out[0].dtype;
    bool ok = (d == TORC_DTYPE_F32 || d == TORC_DTYPE_BF16 || d == TORC_DTYPE_F16) && onednn__dense(&op->out[0]);
    for (int i = 0; i < 2; i++) {
        if ((st = onednn__check_operand(&op->in[i], "in"))) return st;
        if (!onednn__same_shape(&op->in[i], &op->out[0]))
            return onednn__error(TORC_ERR_SHAPE, "onednn: gelu_backward: inputs must arrive broadcast to out's shape");
        ok = ok && op->in[i].dtype == d && onednn__dense(&op->in[i]);
    }
    if (!ok)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: gelu_backward runs contiguous f32, bf16 and f16 "
                             "operands of one dtype only (f64, broadcasts and strided views go to the reference "
                             "backend)");
    return 0;
}

// ---- float math that vectorises ----
// glibc's tanhf took 64 ns an element here (1024 x 1536 in 102 ms at one thread, three times the
// composed ops), and libm calls keep a loop scalar. These are plain C (ISO C: no contraction, no
// reassociation), branch-free, so `omp simd` vectorises them; compiled for AVX-512, AVX2 and any
// x86-64 below, picked by the CPU (isa.c). exp: onednn__exp_f (onednn-impl.h); erf: onednn__erf_f
// (gelu.h, GELU's too).

// t = tanh(u), with 1 + t and 1 - t^2 computed without cancellation: Cephes' tanhf, u + u z P(z)
// (z = u^2) below |u| 0.625 (1 - t^2 is then above 0.69), else from q = 1 - |t| = 2 / (exp(2|u|) + 1)
// (0 from |u| 44, where onednn__exp_f would overflow; q is 1e-38 there, and x^3 of a larger x is no longer
// multiplied by a stale q): t = +-(1 - q), 1 - t^2 = q (2 - q), 1 + t = q or
// 2 - q. PyTorch rounds t first; where t is near 1 in float (u about 8, x about 4.5) its 1 - t^2
// keeps an error of 1 - t's ulp, which 0.5 x (1 + 3 k x^2) multiplies (11 float eps of dy measured
// against the double formula); here each is within a few ulps. NaN passes (the polynomials).
static inline void tanh_f(float u, float *t, float *onep, float *sech2) {
    const float a = u < 0.0f ? -u : u, z = u * u;
    const float ts = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                       1.33314422036e-1f) * z - 3.33332819422e-1f) * z * u + u;
    const float q = a < 44.0f ? 2.0f / (onednn__exp_f(2.0f * (a < 44.0f ? a : 44.0f)) + 1.0f) : 0.0f;
    const bool small = a < 0.625f;
    *t = small ? ts : (u < 0.0f ? q - 1.0f : 1.0f - q);
    *onep = small ? 1.0f + ts : (u < 0.0f ? q : 2.0f - q);
    *sech2 = small ? 1.0f - ts * ts : q * (2.0f - q);
}

// dy[i] = dy[i] * gelu'(x[i]) for i < n: PyTorch's GeluBackwardKernelImpl in float (its names),
// written once and compiled per ISA.
#define GELU_BW_LOOPS(suffix, attr)                                                                          \
    attr static void gelu_bw_tanh_##suffix(float *dy, const float *x, int64_t n) {                          \
        const float kBeta = 0.79788456080286535588f, kKappa = 0.044715f; /* M_SQRT2 M_2_SQRTPI / 2 */       \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                \
            const float x_sq = x[i] * x[i], x_cube = x_sq * x[i];                                            \
            const float inner = kBeta * (x[i] + kKappa * x_cube);                                            \
            float tanh_inner, right, sech2; /* right = 1 + tanh_inner, sech2 = 1 - tanh_inner^2 */           \
            tanh_f(inner, &tanh_inner, &right, &sech2);                                                      \
            const float left = 0.5f * x[i];                                                                  \
            const float left_derivative = 0.5f * right;                                                      \
            /* sech2 0 (|inner| from 44): 0 as in double, where x^2 would overflow float to inf (|x| */      \
            /* from 1.8e19; PyTorch's float kernel gives NaN there); 0 * left keeps x = +-inf's NaN */         \
            const float right_derivative =                                                                   \
                sech2 > 0.0f ? left * sech2 * kBeta * (1.0f + 3.0f * kKappa * x_sq) : 0.0f * left;          \
            dy[i] = dy[i] * (left_derivative + right_derivative);                                            \
        }                                                                                                    \
    }                                                                                                        \
    attr static void gelu_bw_erf_##suffix(float *dy, const float *x, int64_t n) {                           \
        const float kAlpha = 0.70710678118654752440f, kBeta = 0.39894228040143267794f; /* M_SQRT1_2, */     \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                 /* M_2_SQRTPI M_SQRT1_2 / 2 */ \
            const float cdf = 0.5f * (1.0f + onednn__erf_f(x[i] * kAlpha)); /* erf within 1.5e-7 */          \
            const float pdf = kBeta * onednn__exp_f(-0.5f * x[i] * x[i]);                                            \
            dy[i] = dy[i] * (cdf + x[i] * pdf);                                                              \
        }                                                                                                    \
    }
GELU_BW_LOOPS(avx512, __attribute__((target("avx512f,avx512dq,avx2,fma"))))
GELU_BW_LOOPS(avx2, __attribute__((target("avx2,fma"))))
GELU_BW_LOOPS(any, )

typedef void (*gelu_bw_fn)(float *, const float *, int64_t);

static gelu_bw_fn pick(int approximate) {
    const int isa = onednn__isa();  // TORC_MAX_CPU_ISA caps it
    if (isa >= ONEDNN_ISA_AVX512_CORE) return approximate ? gelu_bw_tanh_avx512 : gelu_bw_erf_avx512;
    if (isa >= ONEDNN_ISA_AVX2) return approximate ? gelu_bw_tanh_avx2 : gelu_bw_erf_avx2;
    return approximate ? gelu_bw_tanh_any : gelu_bw_erf_any;
}

enum { BLOCK = 512 };  // elements converted at a time: two float blocks stay in L1

// Elements [i0, i1): out may be dy or x (read before written, block by block).
static void gelu_bw_range(const torc_op *op, int64_t i0, int64_t i1) {
    const torc_dtype d = op->out[0].dtype;
    const gelu_bw_fn fn = pick(op->params.gelu.approximate);
    if (d == TORC_DTYPE_F32) {
        const float *dy = op->in[0].data, *x = op->in[1].data;
        float *out = op->out[0].data, buf[BLOCK];
        for (int64_t b = i0; b < i1; b += BLOCK) {
            const int64_t nb = i1 - b < BLOCK ? i1 - b : BLOCK;
            memcpy(buf, dy + b, (size_t)nb * sizeof *buf);
            fn(buf, x + b, nb);
            memcpy(out + b, buf, (size_t)nb * sizeof *buf);
        }
        return;
    }
    const uint16_t *dy = op->in[0].data, *x = op->in[1].data;
    uint16_t *out = op->out[0].data;
    float fdy[BLOCK], fx[BLOCK];
    const bool bf = d == TORC_DTYPE_BF16;
    for (int64_t b = i0; b < i1; b += BLOCK) {
        const int64_t nb = i1 - b < BLOCK ? i1 - b : BLOCK;
        (bf ? onednn__bf16_to_f32 : onednn__f16_to_f32)(fdy, dy + b, nb);
        (bf ? onednn__bf16_to_f32 : onednn__f16_to_f32)(fx, x + b, nb);
        fn(fdy, fx, nb);
        (bf ? onednn__f32_to_bf16 : onednn__f32_to_f16)(out + b, fdy, nb);
    }
}

// One chunk per thread; small ops on the calling thread.
int onednn__gelu_backward_run(const torc_op *op) {
    onednn__run_chunks(op, onednn__numel(&op->out[0]), gelu_bw_range);
    return 0;
}
