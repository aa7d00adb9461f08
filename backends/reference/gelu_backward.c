// backends/reference/gelu_backward.c — the reference GELU_BACKWARD: PyTorch's GeluBackwardKernelImpl
// (aten/src/ATen/native/cpu/Activation.cpp) for both approximations, in double, rounded once.
#include "ref-impl.h"

bool ref_gelu_backward_dtypes(const torc_op *op) {
    const torc_dtype d = op->out[0].dtype;
    return (d == TORC_DTYPE_F64 || d == TORC_DTYPE_F32 || d == TORC_DTYPE_F16 || d == TORC_DTYPE_BF16) &&
           op->in[0].dtype == d && op->in[1].dtype == d;
}

// dy * d/dx gelu(x), PyTorch's steps in its order (its kernel's names).
static double gelu_backward_d(double dy, double x, int approximate) {
    if (approximate) {
        const double kBeta = 0.79788456080286535588, kKappa = 0.044715;  // sqrt(2 / pi)
        const double x_sq = x * x, x_cube = x_sq * x;
        const double inner = kBeta * (x + kKappa * x_cube), tanh_inner = tanh(inner);
        const double left = 0.5 * x, right = 1.0 + tanh_inner;
        const double left_derivative = 0.5 * right;
        const double right_derivative = left * (1.0 - tanh_inner * tanh_inner) * kBeta * (1.0 + 3.0 * kKappa * x_sq);
        return dy * (left_derivative + right_derivative);
    }
    const double kAlpha = 0.70710678118654752440, kBeta = 0.39894228040143267794;  // 1/sqrt(2), 1/sqrt(2 pi)
    const double cdf = 0.5 * (1.0 + erf(x * kAlpha)), pdf = kBeta * exp(-0.5 * x * x);
    return dy * (cdf + x * pdf);
}

typedef struct gelu_bw_ctx {
    torc_dtype dt;
    int approximate;
} gelu_bw_ctx;

// Both inputs are loaded before out is written, so out may be either of them.
static void gelu_bw_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const gelu_bw_ctx *c = vctx;
    double dy[REF_BLOCK], x[REF_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += REF_BLOCK) {
        const int64_t nb = n - i0 < REF_BLOCK ? n - i0 : REF_BLOCK;
        ref_load_block_f(dy, ptr[1] + i0 * step[1], step[1], nb, c->dt);
        ref_load_block_f(x, ptr[2] + i0 * step[2], step[2], nb, c->dt);
        for (int64_t i = 0; i < nb; i++) dy[i] = gelu_backward_d(dy[i], x[i], c->approximate);
        ref_store_block_f(ptr[0] + i0 * step[0], step[0], dy, nb, c->dt);
    }
}

int ref_gelu_backward_run(const torc_op *op) {
    int st = ref_check_same_shape(&op->in[0], "grad_output", &op->out[0], "grad_input");
    if (!st) st = ref_check_same_shape(&op->in[1], "self", &op->out[0], "grad_input");
    if (st) return st;
    const int a = op->params.gelu.approximate;
    if (a != 0 && a != 1)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: gelu_backward: approximate must be 0 ('none') or "
                         "1 ('tanh'), got %d", a);
    gelu_bw_ctx c = {op->out[0].dtype, a};
    const torc_operand *ops[3] = {&op->out[0], &op->in[0], &op->in[1]};
    ref_iter it;
    ref_iter_ops(&it, op->out[0].ndim, op->out[0].shape, 3, ops);
    ref_iter_run(&it, gelu_bw_loop, &c);
    return TORC_OK;
}
