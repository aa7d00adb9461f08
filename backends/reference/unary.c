// backends/reference/unary.c — the reference elementwise unary kernels: sign-like ops exact in
// int64 for integer dtypes, every transcendental in double, rounded once to out's dtype.
#include "ref-impl.h"

// ---- dtype rules (PyTorch's CPU kernels) ----
static bool int_capable(torc_opcode code) {
    return code == TORC_OP_NEG || code == TORC_OP_ABS || code == TORC_OP_SIGN || code == TORC_OP_SQUARE ||
           code == TORC_OP_RELU || code == TORC_OP_POW_SCALAR || code == TORC_OP_LOGICAL_NOT;
}

bool ref_unary_dtypes(const torc_op *op) {
    const torc_dtype in = op->in[0].dtype, out = op->out[0].dtype;
    switch (op->code) {
    case TORC_OP_NEG:
    case TORC_OP_ABS:
    case TORC_OP_RELU: return ref_dt_in(out, REF_DT_NUM) && in != TORC_DTYPE_BOOL;  // no bool kernel
    case TORC_OP_SIGN:
    case TORC_OP_LOGICAL_NOT: return ref_dt_in(out, REF_DT_ALL);
    case TORC_OP_SQUARE:
    case TORC_OP_POW_SCALAR: return ref_dt_in(out, REF_DT_NUM);
    default: return ref_dt_in(out, REF_DT_FLOAT);  // the rest only make sense in floating point
    }
}

// ---- math in double ----
// Inverse error function: PyTorch's calc_erfinv first guess (a rational approximation, Blair et
// al. via Pavlis' MATLAB erfinv) polished by Newton steps. Unlike PyTorch (two steps on
// erf(x) - y), the residual for |y| > 0.5 is (1 - |y|) - erfc(|x|): 1 - |y| is exact there and
// erfc keeps relative accuracy, and four steps converge even where the first guess is poor
// (|y| within 1e-15 of 1). Checked against mpmath: within 2 ulps over [-1, 1].
static double erfinv_d(double y) {
    static const double a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
    static const double b[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
    static const double c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
    static const double d[2] = {3.543889200, 1.637067800};
    const double ya = fabs(y);
    if (isnan(y) || ya > 1.0) return NAN;
    if (ya == 1.0) return copysign(INFINITY, y);
    double x;  // |result|
    if (ya <= 0.7) {
        const double z = ya * ya;
        const double num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];
        const double den = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0;
        x = ya * num / den;
    } else {
        const double z = sqrt(-log((1.0 - ya) / 2.0));
        const double num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];
        const double den = (d[1] * z + d[0]) * z + 1.0;
        x = num / den;
    }
    const double two_over_sqrt_pi = 1.12837916709551257390;
    for (int step = 0; step < 4; step++) {
        const double r = ya <= 0.5 ? erf(x) - ya : (1.0 - ya) - erfc(x);
        x -= r / (two_over_sqrt_pi * exp(-x * x));
    }
    return copysign(x, y);
}

static double gelu_d(double x, int approximate) {
    if (approximate) {
        const double k = 0.79788456080286535588;  // sqrt(2 / pi)
        return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
    }
    return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
}

// x ^ e with PyTorch's special exponents (pow_tensor_scalar_optimized_kernel): they are not
// pow() on signed zeros (pow(-0.0, 0.5) is +0, sqrt(-0.0) is -0); 1 gives x itself (pow_out
// copies), which a math library's pow need not (CUDA's gives 3^1 = 2.9999999999999996).
static double pow_scalar_d(double x, double e) {
    if (e == 1.0) return x;
    if (e == 2.0) return x * x;
    if (e == 3.0) return x * x * x;
    if (e == 0.5) return sqrt(x);
    if (e == -0.5) return 1.0 / sqrt(x);
    if (e == -1.0) return 1.0 / x;
    if (e == -2.0) return 1.0 / (x * x);
    return pow(x, e);
}

static double unary_f(torc_opcode code, double x, const torc_op_params *p) {
    switch (code) {
    case TORC_OP_NEG: return -x;
    case TORC_OP_ABS: return fabs(x);
    case TORC_OP_SIGN: return (double)((0.0 < x) - (x < 0.0));  // NaN and -0.0 give 0, as PyTorch
    case TORC_OP_SQRT: return sqrt(x);
    case TORC_OP_RSQRT: return 1.0 / sqrt(x);
    case TORC_OP_SQUARE: return x * x;
    case TORC_OP_RECIPROCAL: return 1.0 / x;
    case TORC_OP_EXP: return exp(x);
    case TORC_OP_LOG: return log(x);
    case TORC_OP_SIN: return sin(x);
    case TORC_OP_COS: return cos(x);
    case TORC_OP_TANH: return tanh(x);
    case TORC_OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case TORC_OP_RELU: return x < 0.0 ? 0.0 : x;  // NaN and -0.0 pass through, as clamp_min
    case TORC_OP_GELU: return gelu_d(x, p->gelu.approximate);
    case TORC_OP_POW_SCALAR: return pow_scalar_d(x, p->scalar.value);
    case TORC_OP_ERF: return erf(x);
    case TORC_OP_ERFINV: return erfinv_d(x);
    default: return NAN;
    }
}

static int64_t unary_i(torc_opcode code, int64_t x, int64_t e) {
    switch (code) {
    case TORC_OP_NEG: return ref_wrap_sub(0, x);
    case TORC_OP_ABS: return x < 0 ? ref_wrap_sub(0, x) : x;  // abs(int8 -128) stays -128
    case TORC_OP_SIGN: return (0 < x) - (x < 0);
    case TORC_OP_SQUARE: return ref_wrap_mul(x, x);
    case TORC_OP_RELU: return x < 0 ? 0 : x;
    case TORC_OP_POW_SCALAR: return ref_ipow(x, e);
    default: return 0;
    }
}

// ---- the loops ----
typedef struct unary_ctx {
    torc_opcode code;
    torc_dtype out, in;
    const torc_op_params *params;
    int64_t iexp;  // POW_SCALAR's exponent in integer mode
} unary_ctx;

static void float_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const unary_ctx *c = vctx;
    double x[REF_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += REF_BLOCK) {
        const int64_t nb = n - i0 < REF_BLOCK ? n - i0 : REF_BLOCK;
        ref_load_block_as(x, ptr[1] + i0 * step[1], step[1], nb, c->in, c->out);  // cast to out's dtype first
        for (int64_t i = 0; i < nb; i++) x[i] = unary_f(c->code, x[i], c->params);
        ref_store_block_f(ptr[0] + i0 * step[0], step[0], x, nb, c->out);
    }
}

static void int_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const unary_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++)
        ref_store_i(ptr[0] + i * step[0], c->out, unary_i(c->code, ref_load_i(ptr[1] + i * step[1], c->in), c->iexp));
}

static void not_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const unary_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++)
        ref_store_i(ptr[0] + i * step[0], c->out, !ref_load_b(ptr[1] + i * step[1], c->in));
}

// Contiguous f32 or f64 in and out of one dtype: one flat loop computing what float_loop does.
static bool flat_float(const torc_op *op) {
    const torc_dtype dt = op->out[0].dtype;
    int64_t so, si;
    if ((dt != TORC_DTYPE_F32 && dt != TORC_DTYPE_F64) || op->in[0].dtype != dt || op->code == TORC_OP_LOGICAL_NOT ||
        !ref_flat_step(&op->out[0], &so) || so != 1 || !ref_flat_step(&op->in[0], &si) || si != 1)
        return false;
    const int64_t n = ref_numel(&op->out[0]);
    if (dt == TORC_DTYPE_F32) {
        float *o = op->out[0].data;
        const float *a = op->in[0].data;
        for (int64_t i = 0; i < n; i++) o[i] = (float)unary_f(op->code, a[i], &op->params);
    } else {
        double *o = op->out[0].data;
        const double *a = op->in[0].data;
        for (int64_t i = 0; i < n; i++) o[i] = unary_f(op->code, a[i], &op->params);
    }
    return true;
}

int ref_unary_run(const torc_op *op) {
    int st = ref_check_same_shape(&op->in[0], "in0", &op->out[0], "out");
    if (st) return st;
    if (flat_float(op)) return TORC_OK;
    unary_ctx c = {op->code, op->out[0].dtype, op->in[0].dtype, &op->params, 0};
    ref_loop_fn loop = float_loop;
    if (op->code == TORC_OP_LOGICAL_NOT) {
        loop = not_loop;
    } else if (int_capable(op->code) && !ref_is_float(c.out) && !ref_is_float(c.in)) {
        loop = int_loop;
        if (op->code == TORC_OP_POW_SCALAR) {
            const double e = op->params.scalar.value;
            if (e != trunc(e) || !(fabs(e) < 0x1p63))  // also NaN and inf
                return ref_error(TORC_ERR_INVALID_ARG, "reference backend: pow: an integer out needs an integral "
                                 "exponent, got %g (the frontend promotes to floating)", e);
            if (e < 0) return ref_error(TORC_ERR_INVALID_ARG, "Integers to negative integer powers are not allowed.");
            c.iexp = (int64_t)e;
        }
    }
    const torc_operand *ops[2] = {&op->out[0], &op->in[0]};
    ref_iter it;
    ref_iter_ops(&it, op->out[0].ndim, op->out[0].shape, 2, ops);
    ref_iter_run(&it, loop, &c);
    return TORC_OK;
}
