// backends/reference/softmax.c — the reference SOFTMAX and LOG_SOFTMAX along params.dim.dim:
// max-shifted, accumulated in double, rounded once to out's dtype.
#include "ref-impl.h"

bool ref_softmax_dtypes(const torc_op *op) { return ref_dt_in(op->out[0].dtype, REF_DT_FLOAT); }

typedef struct softmax_ctx {
    bool log;
    torc_dtype in, out;
    int64_t len;                 // size of the softmax dim
    int64_t in_step, out_step;   // its strides, in bytes
} softmax_ctx;

// One row along the dim: max (NaN propagates through every result), sum of exp(x - max),
// then the outputs. A row whose max is -inf or +inf gives NaN (x - max is NaN), as PyTorch.
static void softmax_row(const softmax_ctx *c, const char *in, char *out) {
    double m = -INFINITY;
    for (int64_t i = 0; i < c->len; i++) {
        const double x = ref_load_f(in + i * c->in_step, c->in);
        if (isnan(x) || x > m) m = x;
        if (isnan(m)) break;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < c->len; i++) sum += exp(ref_load_f(in + i * c->in_step, c->in) - m);
    const double log_sum = log(sum);
    for (int64_t i = 0; i < c->len; i++) {
        const double d = ref_load_f(in + i * c->in_step, c->in) - m;
        ref_store_f(out + i * c->out_step, c->out, c->log ? d - log_sum : exp(d) / sum);
    }
}

static void outer_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    for (int64_t i = 0; i < n; i++) softmax_row(vctx, ptr[1] + i * step[1], ptr[0] + i * step[0]);
}

int ref_softmax_run(const torc_op *op) {
    const torc_operand *in = &op->in[0], *out = &op->out[0];
    int st = ref_check_same_shape(in, "in0", out, "out");
    if (st) return st;
    const int dim = op->params.dim.dim;
    if (in->ndim == 0 ? dim != 0 : (dim < 0 || dim >= in->ndim))
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s: dim %d out of range for %d dims",
                         ref_kernel_of(op->code)->name, dim, in->ndim);
    softmax_ctx c = {op->code == TORC_OP_LOG_SOFTMAX, in->dtype, out->dtype, 1, 0, 0};
    int64_t rows[TORC_MAX_DIMS];
    for (int d = 0; d < in->ndim; d++) rows[d] = d == dim ? 1 : in->shape[d];
    if (in->ndim > 0) {  // a 0-dim tensor is one row of one element
        c.len = in->shape[dim];
        c.in_step = in->stride[dim] * (int64_t)torc_abi_dtype_size(in->dtype);
        c.out_step = out->stride[dim] * (int64_t)torc_abi_dtype_size(out->dtype);
    }
    if (c.len == 0) return TORC_OK;
    const torc_operand *ops[2] = {out, in};
    ref_iter it;
    ref_iter_ops(&it, in->ndim, rows, 2, ops);
    ref_iter_run(&it, outer_loop, &c);
    return TORC_OK;
}
