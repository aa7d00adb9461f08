// backends/cpu_onednn/reduce.c — SUM, MEAN, PROD, MAX, MIN over params.reduce.mask on oneDNN's
// reduction primitive (out keeps the reduced dims as size 1, exactly oneDNN's convention).
#include "onednn-impl.h"

static dnnl_data_type_t src_dt(torc_dtype d) {
    return d == TORC_DTYPE_F16 ? dnnl_data_type_undef : onednn__dt(d);  // no f16 reduction in 2.6
}

int onednn__build_reduce(const torc_op *op, onednn_plan *p) {
    const char *name = onednn__op_name(op->code);
    if (op->n_in != 1)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s takes 1 input, got %d", name, op->n_in);
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    const uint32_t mask = op->params.reduce.mask;
    const int nd = x->ndim;
    if (y->ndim != nd || (nd > 0 ? (mask >> nd) != 0 : mask > 1))
        return onednn__error(TORC_ERR_SHAPE, "onednn: %s: reduce mask 0x%x does not fit in (ndim %d) "
                             "-> out (ndim %d)", name, mask, nd, y->ndim);
    for (int d = 0; d < nd; d++) {
        const int64_t want = (mask >> d) & 1 ? 1 : x->shape[d];
        if (y->shape[d] != want)
            return onednn__error(TORC_ERR_SHAPE, "onednn: %s: out dim %d is %lld, expected %lld", name,
                                 d, (long long)y->shape[d], (long long)want);
    }
    const bool extreme = op->code == TORC_OP_MAX || op->code == TORC_OP_MIN;
    const bool float_out = y->dtype == TORC_DTYPE_F32 || y->dtype == TORC_DTYPE_BF16;
    // Integers only where f32 arithmetic is exact: max/min of 8-bit values into the same dtype.
    const bool int_extreme = extreme && y->dtype == x->dtype &&
                             (y->dtype == TORC_DTYPE_I8 || y->dtype == TORC_DTYPE_U8);
    if (src_dt(x->dtype) == dnnl_data_type_undef || !(float_out || int_extreme))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs float32/bfloat16 outputs "
                             "(int8/uint8 for max/min) here, got %s -> %s", name,
                             torc_abi_dtype_name(x->dtype), torc_abi_dtype_name(y->dtype));
    if (onednn__numel(y) == 0) return 0;
    if (onednn__numel(x) == 0)  // an empty reduction: 0, NaN or an error, the reference's call
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s over an empty input is left to the "
                             "reference backend", name);
    dnnl_alg_kind_t alg;
    switch (op->code) {
    case TORC_OP_SUM: alg = dnnl_reduction_sum; break;
    case TORC_OP_MEAN: alg = dnnl_reduction_mean; break;
    case TORC_OP_PROD: alg = dnnl_reduction_mul; break;
    case TORC_OP_MAX: alg = dnnl_reduction_max; break;
    case TORC_OP_MIN: alg = dnnl_reduction_min; break;
    default: return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s is not a reduction here", name);
    }
    onednn_view vs, vd;
    onednn__view(&vs, x, src_dt(x->dtype));
    onednn__view(&vd, y, onednn__dt(y->dtype));
    onednn__view_normalize(&vs);
    onednn__view_normalize(&vd);
    // Every group holds one element (a 0-d input, only size-1 dims reduced): the result is the
    // input converted, and oneDNN's reduction wants at least one dim that shrinks.
    // oneDNN's max/min skip NaN (torch.max returns NaN for a group holding one).
    if (extreme && onednn__is_float(x->dtype)) p->fixup = ONEDNN_FIXUP_REDUCE;
    bool shrinks = false;
    for (int d = 0; d < nd; d++) shrinks = shrinks || ((mask >> d) & 1 && x->shape[d] > 1);
    onednn_view vt;
    int st, dst_buf;
    if ((st = onednn__plan_dst(p, &vd, &vt, &dst_buf))) return st;
    if (!shrinks) {
        if ((st = onednn__plan_reorder(p, &vs, ONEDNN_BUF_IN0, &vt, dst_buf))) return st;
        return onednn__plan_dst_done(p, &vd, &vt, dst_buf);
    }
    dnnl_memory_desc_t ms, md;
    if ((st = onednn__view_md(&vs, &ms)) || (st = onednn__view_md(&vt, &md))) return st;
    dnnl_reduction_desc_t desc;
    ONEDNN_CHECK(dnnl_reduction_desc_init(&desc, alg, &ms, &md, 0.0f, 0.0f));
    dnnl_primitive_attr_t attr;
    if ((st = onednn__attr(&attr))) return st;
    onednn_bind b[2] = {{DNNL_ARG_SRC, ONEDNN_BUF_IN0, NULL}, {DNNL_ARG_DST, dst_buf, NULL}};
    st = onednn__plan_add(p, &desc, attr, false, 2, b);
    dnnl_primitive_attr_destroy(attr);
    return st ? st : onednn__plan_dst_done(p, &vd, &vt, dst_buf);
}
