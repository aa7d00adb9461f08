// backends/cpu_onednn/softmax.c — SOFTMAX and LOG_SOFTMAX along params.dim.dim on oneDNN's
// softmax_v2 primitive (src and dst may differ in dtype and layout).
#include "onednn-impl.h"

int onednn__build_softmax(const torc_op *op, onednn_plan *p) {
    const char *name = onednn__op_name(op->code);
    if (op->n_in != 1)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s takes 1 input, got %d", name, op->n_in);
    const torc_operand *x = &op->in[0], *y = &op->out;
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
                             "%s -> %s", name, onednn__dtype_name(x->dtype),
                             onednn__dtype_name(y->dtype));
    if (op->code == TORC_OP_LOG_SOFTMAX && y->dtype == TORC_DTYPE_F32)  // its log is off by ~3e-6
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: log_softmax with a float32 result is "
                             "left to the reference backend (oneDNN's log is not accurate to float32)");
    if (onednn__numel(y) == 0) return 0;
    onednn_view vs, vd;
    onednn__view(&vs, x, onednn__dt(x->dtype));
    onednn__view(&vd, y, onednn__dt(y->dtype));
    onednn__view_normalize(&vs);
    onednn__view_normalize(&vd);
    dnnl_memory_desc_t ms, md;
    int st;
    if ((st = onednn__view_md(&vs, &ms)) || (st = onednn__view_md(&vd, &md))) return st;
    dnnl_softmax_v2_desc_t desc;
    ONEDNN_CHECK(dnnl_softmax_v2_forward_desc_init(
        &desc, dnnl_forward_inference,
        op->code == TORC_OP_LOG_SOFTMAX ? dnnl_softmax_log : dnnl_softmax_accurate, &ms, &md, dim));
    dnnl_primitive_attr_t attr;
    if ((st = onednn__attr(&attr))) return st;
    onednn_bind b[2] = {{DNNL_ARG_SRC, ONEDNN_BUF_IN0, NULL}, {DNNL_ARG_DST, ONEDNN_BUF_OUT, NULL}};
    st = onednn__plan_add(p, &desc, attr, false, 2, b);
    dnnl_primitive_attr_destroy(attr);
    // oneDNN's row max skips NaN and its exp saturates: a row with NaN or +inf must be all NaN.
    p->fixup = ONEDNN_FIXUP_ROWS;
    return st;
}
