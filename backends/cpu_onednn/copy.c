// backends/cpu_onednn/copy.c — TORC_OP_COPY (strided copies and dtype casts) on oneDNN's
// reorder. Only casts whose oneDNN result equals PyTorch's are claimed: oneDNN saturates and
// rounds where PyTorch truncates or wraps (float -> int, int narrowing), so those fall back.
#include "onednn-impl.h"

// Exact, or rounded once to nearest even as PyTorch does. Conversions to or from f16 are left
// to the reference: oneDNN 2.6 converts f16 in generic code at ~60 ns/element.
static bool cast_ok(torc_dtype s, torc_dtype d) {
    if (s == d) return true;
    const bool small_int = s == TORC_DTYPE_I8 || s == TORC_DTYPE_U8 || s == TORC_DTYPE_BOOL;
    switch (d) {
    case TORC_DTYPE_F32: return s == TORC_DTYPE_BF16 || s == TORC_DTYPE_I32 || small_int;
    case TORC_DTYPE_BF16: return s == TORC_DTYPE_F32 || small_int;
    case TORC_DTYPE_I32: return small_int;
    case TORC_DTYPE_I8: case TORC_DTYPE_U8: return s == TORC_DTYPE_BOOL;  // 0/1 either way
    default: return false;
    }
}

static dnnl_data_type_t copy_dt(torc_dtype d) {
    return d == TORC_DTYPE_BOOL ? dnnl_u8 : onednn__dt(d);
}

// A same-dtype copy moves bits, through a carrier type whose oneDNN reorder is fast and
// bit-exact for every pattern (checked for NaN payloads and subnormals): f32 for 4-byte types,
// two f32 for 8-byte ones (an extra innermost dim), bf16 for 2-byte ones (f16 and i16 too),
// u8 for 1-byte ones.
static void bits_view(onednn_view *v, const torc_operand *x) {
    const size_t esz = onednn__dtype_size(x->dtype);
    const dnnl_data_type_t unit = esz >= 4 ? dnnl_f32 : esz == 2 ? dnnl_bf16 : dnnl_u8;
    const dnnl_dim_t k = esz == 8 ? 2 : 1;
    onednn__view(v, x, unit);
    if (k == 1) return;
    for (int d = 0; d < v->ndim; d++) v->strides[d] *= k;
    v->dims[v->ndim] = k;
    v->strides[v->ndim] = 1;
    v->ndim++;
}

int onednn__build_copy(const torc_op *op, onednn_plan *p) {
    if (op->n_in != 1)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: copy takes 1 input, got %d", op->n_in);
    const torc_operand *x = &op->in[0], *y = &op->out;
    if (!onednn__same_shape(x, y))
        return onednn__error(TORC_ERR_SHAPE, "onednn: copy: in and out shapes differ");
    if (!cast_ok(x->dtype, y->dtype))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: copy %s -> %s is left to the reference "
                             "backend (oneDNN's conversion differs from PyTorch's)",
                             onednn__dtype_name(x->dtype), onednn__dtype_name(y->dtype));
    if (onednn__numel(y) == 0) return 0;
    onednn_view vs, vd;
    if (x->dtype == y->dtype || (x->dtype == TORC_DTYPE_BOOL && onednn__dtype_size(y->dtype) == 1)) {
        bits_view(&vs, x);
        bits_view(&vd, y);
    } else {
        onednn__view(&vs, x, copy_dt(x->dtype));
        onednn__view(&vd, y, copy_dt(y->dtype));
    }
    onednn__view_normalize(&vs);
    onednn__view_normalize(&vd);
    // vcvtneps2bf16 flushes subnormals, which c10's conversion keeps (dense casts between f32
    // and bf16 do not come here: cast.c converts them exactly in one pass).
    if (x->dtype == TORC_DTYPE_F32 && y->dtype == TORC_DTYPE_BF16) p->fixup = ONEDNN_FIXUP_ELEMENTWISE;
    return onednn__plan_reorder(p, &vs, ONEDNN_BUF_IN0, &vd, ONEDNN_BUF_OUT);
}
