// backends/cpu_onednn/view.c — torc operands as oneDNN memory descriptors: dtype mapping,
// operand checks, broadcast dims as oneDNN's size-1 dims, stride normalisation.
#include <string.h>

#include "onednn-impl.h"

dnnl_data_type_t onednn__dt(torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F32: return dnnl_f32;
    case TORC_DTYPE_BF16: return dnnl_bf16;
    case TORC_DTYPE_F16: return dnnl_f16;
    case TORC_DTYPE_I32: return dnnl_s32;
    case TORC_DTYPE_I8: return dnnl_s8;
    case TORC_DTYPE_U8: return dnnl_u8;
    default: return dnnl_data_type_undef;
    }
}

bool onednn__is_float(torc_dtype d) {
    return d == TORC_DTYPE_F32 || d == TORC_DTYPE_BF16 || d == TORC_DTYPE_F16;
}

int64_t onednn__numel(const torc_operand *x) {
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++) n *= x->shape[d];
    return n;
}

bool onednn__same_shape(const torc_operand *a, const torc_operand *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

// Row-major contiguous (a size-1 dim's stride has no meaning).
static bool dense(int ndim, const int64_t *shape, const int64_t *stride) {
    int64_t want = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] != 1 && stride[d] != want) return false;
        want *= shape[d];
    }
    return true;
}

bool onednn__dense(const torc_operand *x) { return dense(x->ndim, x->shape, x->stride); }

bool onednn__view_dense(const onednn_view *v) { return dense(v->ndim, v->dims, v->strides); }

bool onednn__has_bcast(const torc_operand *x) {
    for (int d = 0; d < x->ndim; d++)
        if (x->stride[d] == 0 && x->shape[d] > 1) return true;
    return false;
}

int onednn__check_operand(const torc_operand *x, const char *what) {
    if (x->ndim < 0 || x->ndim > TORC_MAX_DIMS)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s has ndim %d (allowed 0..%d)", what,
                             x->ndim, TORC_MAX_DIMS);
    if (torc_abi_dtype_size(x->dtype) == 0)  // a newer dtype: the core falls back to the reference
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s has dtype %d, which this backend does "
                             "not know", what, (int)x->dtype);
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] < 0 || x->stride[d] < 0)
            return onednn__error(TORC_ERR_INVALID_ARG,
                                 "onednn: %s has a negative shape or stride at dim %d", what, d);
    return 0;
}

void onednn__view(onednn_view *v, const torc_operand *x, dnnl_data_type_t dt) {
    memset(v, 0, sizeof *v);
    v->dt = dt;
    if (x->ndim == 0) {  // a 0-d tensor: oneDNN descriptors have at least one dim
        v->ndim = 1;
        v->dims[0] = 1;
        v->strides[0] = 1;
        return;
    }
    v->ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) {
        v->dims[d] = x->shape[d];
        v->strides[d] = x->stride[d];
    }
}

void onednn__view_bcast_to_one(onednn_view *v, int upto) {
    for (int d = 0; d < upto && d < v->ndim; d++)
        if (v->strides[d] == 0) v->dims[d] = 1;
}

void onednn__view_normalize(onednn_view *v) {
    for (int d = 0; d < v->ndim; d++) {
        if (v->dims[d] != 1) continue;
        dnnl_dim_t span = 1;  // what a dense layout puts here: the extent of the inner dims
        for (int e = d + 1; e < v->ndim; e++)
            if (v->dims[e] > 1 && v->strides[e] * v->dims[e] > span)
                span = v->strides[e] * v->dims[e];
        v->strides[d] = span;
    }
}

void onednn__view_transpose_last2(onednn_view *v) {
    const int r = v->ndim - 2, c = v->ndim - 1;
    dnnl_dim_t t = v->dims[r];
    v->dims[r] = v->dims[c];
    v->dims[c] = t;
    t = v->strides[r];
    v->strides[r] = v->strides[c];
    v->strides[c] = t;
}

int onednn__view_md(const onednn_view *v, dnnl_memory_desc_t *md) {
    ONEDNN_CHECK(dnnl_memory_desc_init_by_strides(md, v->ndim, v->dims, v->dt, v->strides));
    return 0;
}
