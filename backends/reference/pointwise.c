// backends/reference/pointwise.c — the reference kernels of the fused pointwise ops ADDCMUL,
// ADDCDIV and LERP (scalar weight), rounded step by step as PyTorch's CPU kernels round them.
#include "ref-impl.h"

// PyTorch computes these in the "opmath" type (float for f32, f16 and bf16, double for f64),
// with its vectorized kernels' operation order; each C expression below is one IEEE operation
// in that type (the build is ISO C, so nothing is contracted into an fma behind our back).
bool ref_pointwise_dtypes(const torc_op *op) {
    const torc_dtype o = op->out[0].dtype;
    const bool opmath_float = o == TORC_DTYPE_F64 || o == TORC_DTYPE_F32 || o == TORC_DTYPE_F16 || o == TORC_DTYPE_BF16;
    if (op->code == TORC_OP_ADDCMUL) return opmath_float || ref_dt_in(o, REF_DT_INT);
    return opmath_float;
}

typedef struct pointwise_ctx {
    torc_opcode code;
    torc_dtype out, in[3];
    int n_in;
    double value;     // value or weight
    int64_t ivalue;   // ADDCMUL on integers: value truncated
} pointwise_ctx;

static void float_loop(const pointwise_ctx *c, const double *s, const double *a, const double *b, double *r,
                       int64_t n) {
    const float v = (float)c->value;
    switch (c->code) {
    case TORC_OP_ADDCMUL:
        for (int64_t i = 0; i < n; i++) r[i] = fmaf(v * (float)a[i], (float)b[i], (float)s[i]);
        break;
    case TORC_OP_ADDCDIV:
        for (int64_t i = 0; i < n; i++) {
            const float q = v * (float)a[i] / (float)b[i];
            r[i] = (float)s[i] + q;
        }
        break;
    default: {  // LERP: a is end
        const bool small = fabsf(v) < 0.5f;
        const float coeff = small ? v : v - 1.0f;
        for (int64_t i = 0; i < n; i++) {
            const float x = (float)s[i], e = (float)a[i];
            r[i] = fmaf(coeff, e - x, small ? x : e);
        }
        break;
    }
    }
}

static void double_loop(const pointwise_ctx *c, const double *s, const double *a, const double *b, double *r,
                        int64_t n) {
    const double v = c->value;
    switch (c->code) {
    case TORC_OP_ADDCMUL:
        for (int64_t i = 0; i < n; i++) r[i] = fma(v * a[i], b[i], s[i]);
        break;
    case TORC_OP_ADDCDIV:
        for (int64_t i = 0; i < n; i++) {
            const double q = v * a[i] / b[i];
            r[i] = s[i] + q;
        }
        break;
    default: {
        const bool small = fabs(v) < 0.5;
        const double coeff = small ? v : v - 1.0;
        for (int64_t i = 0; i < n; i++) r[i] = fma(coeff, a[i] - s[i], small ? s[i] : a[i]);
        break;
    }
    }
}

// Inputs are loaded in blocks and rounded to out's dtype (PyTorch casts every input to the
// common dtype first), computed, and stored; a whole block is read before it is written, so out
// may be in0 (the in-place forms).
static void pointwise_block_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const pointwise_ctx *c = vctx;
    double x[3][REF_BLOCK], r[REF_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += REF_BLOCK) {
        const int64_t nb = n - i0 < REF_BLOCK ? n - i0 : REF_BLOCK;
        for (int k = 0; k < c->n_in; k++)
            ref_load_block_as(x[k], ptr[k + 1] + i0 * step[k + 1], step[k + 1], nb, c->in[k], c->out);
        if (c->out == TORC_DTYPE_F64) double_loop(c, x[0], x[1], x[2], r, nb);
        else float_loop(c, x[0], x[1], x[2], r, nb);
        ref_store_block_f(ptr[0] + i0 * step[0], step[0], r, nb, c->out);
    }
}

// ADDCMUL on integers: exact in int64 with wraparound, then wrapped to out's width.
static void int_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const pointwise_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++) {
        const int64_t s = ref_load_i(ptr[1] + i * step[1], c->in[0]), a = ref_load_i(ptr[2] + i * step[2], c->in[1]),
                      b = ref_load_i(ptr[3] + i * step[3], c->in[2]);
        ref_store_i(ptr[0] + i * step[0], c->out, ref_wrap_add(s, ref_wrap_mul(ref_wrap_mul(c->ivalue, a), b)));
    }
}

int ref_pointwise_run(const torc_op *op) {
    static const char *const names[3] = {"in0", "in1", "in2"};
    for (int k = 0; k < op->n_in; k++) {
        int st = ref_check_same_shape(&op->in[k], names[k], &op->out[0], "out");
        if (st) return st;
    }
    pointwise_ctx c = {.code = op->code, .out = op->out[0].dtype, .n_in = op->n_in, .value = op->params.scalar.value};
    for (int k = 0; k < op->n_in; k++) c.in[k] = op->in[k].dtype;
    const bool integral = !ref_is_float(c.out);
    if (integral) {
        // Scalar::to<int64_t>: truncation; a value int64 cannot hold is PyTorch's overflow error.
        if (!(fabs(c.value) < 0x1p63))
            return ref_error(TORC_ERR_INVALID_ARG, "reference backend: value %g does not fit int64", c.value);
        c.ivalue = (int64_t)c.value;
    }
    const torc_operand *ops[4] = {&op->out[0], &op->in[0], &op->in[1], &op->in[2]};
    ref_iter it;
    ref_iter_ops(&it, op->out[0].ndim, op->out[0].shape, op->n_in + 1, ops);
    ref_iter_run(&it, integral ? int_loop : pointwise_block_loop, &c);
    return TORC_OK;
}
