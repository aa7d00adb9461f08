// backends/cpu_onednn/gelu_backward.c — GELU_BACKWARD on dense f32 / bf16 / f16 operands: one
// OpenMP pass computing PyTorch's GeluBackwardKernelImpl in float (its opmath), instead of the
// dozen elementwise primitives (and their temporaries) the core composes otherwise.
// bf16 / f16 are converted to float a block at a time (the cast loops'), rounded once on store.
#include <math.h>
#include <omp.h>
#include <string.h>

#include "onednn-impl.h"

bool onednn__gelu_backward_takes(const torc_op *op) { return op->code == TORC_OP_GELU_BACKWARD; }

int onednn__gelu_backward_check(const torc_op *op) {
    if (op->n_in != 2) return onednn__error(TORC_ERR_INVALID_ARG, "onednn: gelu_backward takes 2 inputs, got %d", op->n_in);
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

// dy[i] = dy[i] * gelu'(x[i]) for i < n, PyTorch's steps in float (its names).
static void gelu_bw_tanh(float *dy, const float *x, int64_t n) {
    const float kBeta = 0.79788456080286535588f, kKappa = 0.044715f;  // M_SQRT2 * M_2_SQRTPI * 0.5
    for (int64_t i = 0; i < n; i++) {
        const float x_sq = x[i] * x[i], x_cube = x_sq * x[i];
        const float inner = kBeta * (x[i] + kKappa * x_cube), tanh_inner = tanhf(inner);
        const float left = 0.5f * x[i], right = 1.0f + tanh_inner;
        const float left_derivative = 0.5f * right;
        const float right_derivative = left * (1.0f - tanh_inner * tanh_inner) * kBeta * (1.0f + 3.0f * kKappa * x_sq);
        dy[i] = dy[i] * (left_derivative + right_derivative);
    }
}

static void gelu_bw_erf(float *dy, const float *x, int64_t n) {
    const float kAlpha = 0.70710678118654752440f, kBeta = 0.39894228040143267794f;  // M_SQRT1_2, M_2_SQRTPI M_SQRT1_2 / 2
    for (int64_t i = 0; i < n; i++) {
        const float cdf = 0.5f * (1.0f + erff(x[i] * kAlpha)), pdf = kBeta * expf(-0.5f * x[i] * x[i]);
        dy[i] = dy[i] * (cdf + x[i] * pdf);
    }
}

enum { BLOCK = 512 };  // elements converted at a time: two float blocks stay in L1

// Elements [i0, i1): out may be dy or x (read before written, block by block).
static void gelu_bw_range(const torc_op *op, int64_t i0, int64_t i1) {
    const torc_dtype d = op->out[0].dtype;
    void (*fn)(float *, const float *, int64_t) = op->params.gelu.approximate ? gelu_bw_tanh : gelu_bw_erf;
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

// One chunk per thread (onednn__thread_range); small ops on the calling thread.
int onednn__gelu_backward_run(const torc_op *op) {
    const int64_t n = onednn__numel(&op->out[0]);
    if (n == 0) return 0;
    const int nthr = onednn__single_thread(op->code, n) ? 1 : omp_get_max_threads();
    if (nthr <= 1) {
        gelu_bw_range(op, 0, n);
        return 0;
    }
#pragma omp parallel num_threads(nthr)
    {
        int64_t i0, i1;
        onednn__thread_range(n, &i0, &i1);
        gelu_bw_range(op, i0, i1);
    }
    return 0;
}
