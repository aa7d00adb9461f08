// backends/cpu_onednn/softmax.c — SOFTMAX and LOG_SOFTMAX along params.dim.dim on oneDNN's
// softmax_v2 primitive (src and dst may differ in dtype and layout), and f32 LOG_SOFTMAX as a
// host loop with the reference's formulas.
#include <math.h>
#include <omp.h>

#include "onednn-impl.h"

int onednn__build_softmax(const torc_op *op, onednn_plan *p) {
    const char *name = onednn__op_name(op->code);
    if (op->n_in != 1)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s takes 1 input, got %d", name, op->n_in);
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    if (!onednn__same_shape(x, y))
        return onednn__error(TORC_ERR_SHAPE, "onednn: %s: in and out shapes differ", name);
    const int nd = x->ndim > 0 ? x->ndim : 1;  // a 0-d tensor is a row of one
    int dim = op->params.dim.dim;
    if (dim < 0) dim += nd;
    if (dim < 0 || dim >= nd)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s: dim %d out of range for ndim %d", name,
                             op->params.dim.dim, x->ndim);
    const bool ok_in = x->dtype == TORC_DTYPE_F32 || x->dtype == TORC_DTYPE_BF16;
    const bool ok_out = y->dtype == TORC_DTYPE_F32 || y->dtype == TORC_DTYPE_BF16;
    if (!ok_in || !ok_out)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs float32/bfloat16 here, got "
                             "%s -> %s", name, torc_abi_dtype_name(x->dtype),
                             torc_abi_dtype_name(y->dtype));
    if (onednn__numel(y) == 0) return 0;
    onednn_view vs, vd;
    onednn__view(&vs, x, onednn__dt(x->dtype));
    onednn__view(&vd, y, onednn__dt(y->dtype));
    onednn__view_normalize(&vs);
    onednn__view_normalize(&vd);
    dnnl_memory_desc_t ms, md;
    onednn_view vt;
    int st, dst_buf;
    if ((st = onednn__plan_dst(p, &vd, &vt, &dst_buf))) return st;
    if ((st = onednn__view_md(&vs, &ms)) || (st = onednn__view_md(&vt, &md))) return st;
    dnnl_softmax_v2_desc_t desc;
    ONEDNN_CHECK(dnnl_softmax_v2_forward_desc_init(
        &desc, dnnl_forward_inference,
        op->code == TORC_OP_LOG_SOFTMAX ? dnnl_softmax_log : dnnl_softmax_accurate, &ms, &md, dim));
    dnnl_primitive_attr_t attr;
    if ((st = onednn__attr(&attr))) return st;
    onednn_bind b[2] = {{DNNL_ARG_SRC, ONEDNN_BUF_IN0, NULL}, {DNNL_ARG_DST, dst_buf, NULL}};
    st = onednn__plan_add(p, &desc, attr, false, 2, b);
    dnnl_primitive_attr_destroy(attr);
    if (!st) st = onednn__plan_dst_done(p, &vd, &vt, dst_buf);
    // oneDNN's row max skips NaN and its exp saturates: a row with NaN or +inf must be all NaN.
    p->fixup = ONEDNN_FIXUP_ROWS;
    return st;
}

// ---- LOG_SOFTMAX with a float32 result, on the host ----
// oneDNN's log is off by ~3e-6, so f32 log_softmax (what cross_entropy runs) is computed here with
// the reference's formulas in double (backends/reference/softmax.c), row by row on every core:
// the same bits as the reference, ~4x faster on two cores (512x1000: 6.3 -> ~1.5 ms). Contiguous
// f32 in and out along the last non-trivial dim; anything else goes to the reference.
bool onednn__log_softmax_takes(const torc_op *op) {
    return op->code == TORC_OP_LOG_SOFTMAX && op->out[0].dtype == TORC_DTYPE_F32;
}

// Rows of len elements at unit stride; false when the dim is not innermost.
static bool rows_of(const torc_op *op, int64_t *len) {
    const torc_operand *x = &op->in[0];
    const int dim = op->params.dim.dim;
    *len = x->ndim == 0 ? 1 : x->shape[dim];
    for (int d = dim + 1; d < x->ndim; d++)
        if (x->shape[d] != 1) return false;
    return true;
}

int onednn__log_softmax_check(const torc_op *op) {
    if (op->n_in != 1) return onednn__error(TORC_ERR_INVALID_ARG, "onednn: log_softmax takes 1 input, got %d", op->n_in);
    int st = onednn__check_operand(&op->in[0], "in");
    if (!st) st = onednn__check_operand(&op->out[0], "out");
    if (st) return st;
    const torc_operand *x = &op->in[0];
    const int dim = op->params.dim.dim;
    if (x->ndim == 0 ? dim != 0 : (dim < 0 || dim >= x->ndim))
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: log_softmax: dim %d out of range for ndim %d", dim, x->ndim);
    int64_t len;
    if (x->dtype != TORC_DTYPE_F32 || !onednn__same_shape(x, &op->out[0]) || !onednn__dense(x) ||
        !onednn__dense(&op->out[0]) || !rows_of(op, &len))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: log_softmax into float32 runs contiguous float32 rows "
                             "along the last dim (others go to the reference backend: oneDNN's log is not "
                             "accurate to float32)");
    return 0;
}

int onednn__log_softmax_run(const torc_op *op) {
    const int64_t n = onednn__numel(&op->out[0]);
    int64_t len;
    rows_of(op, &len);
    if (n == 0 || len == 0) return 0;
    const float *in = op->in[0].data;
    float *out = op->out[0].data;
    const int64_t rows = n / len;
    ONEDNN_FOR(n >= ONEDNN_SMALL_STREAM, r, rows, {
        const float *x = in + r * len;
        float *y = out + r * len;
        double m = -INFINITY;  // NaN propagates to every result
        for (int64_t i = 0; i < len; i++) {
            if (isnan(x[i]) || x[i] > m) m = x[i];
            if (isnan(m)) break;
        }
        double sum = 0.0;
        for (int64_t i = 0; i < len; i++) sum += exp((double)x[i] - m);
        const double log_sum = log(sum);
        for (int64_t i = 0; i < len; i++) y[i] = (float)((double)x[i] - m - log_sum);
    });
    return 0;
}
