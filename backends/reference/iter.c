// backends/reference/iter.c — operand validation, the strided N-d iterator that every kernel of
// the reference backend walks memory with, and the block load/store of elementwise loops.
#include <stdio.h>

#include "ref-impl.h"

int64_t ref_numel(const torc_operand *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

int ref_check_operand(const torc_operand *t, const char *what) {
    if (!ref_is_valid_dtype(t->dtype))
        return ref_error(TORC_ERR_DTYPE, "reference backend: %s has an invalid dtype %d", what, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > TORC_MAX_DIMS)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s has ndim %d (expected 0..%d)",
                         what, t->ndim, TORC_MAX_DIMS);
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return ref_error(TORC_ERR_SHAPE, "reference backend: %s has a negative size %lld in dim %d",
                             what, (long long)t->shape[d], d);
        if (t->stride[d] < 0)
            return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s has a negative stride %lld in dim %d",
                             what, (long long)t->stride[d], d);
        // Guard the products below against overflow: no real tensor has 2^62 elements. (A
        // multiply with an overflow check, not n > MAX / shape: a division costs ~40 cycles.)
        int64_t p;
        if (__builtin_mul_overflow(n, t->shape[d], &p) || p > INT64_C(0x3FFFFFFFFFFFFFFF))
            return ref_error(TORC_ERR_SHAPE, "reference backend: %s has too many elements", what);
        n = p;
    }
    if (n > 0 && t->data == NULL)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s has NULL data but %lld elements",
                         what, (long long)n);
    return TORC_OK;
}

bool ref_flat_step(const torc_operand *t, int64_t *step) {
    int64_t expect = 1;
    bool dense = true, zero = true;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 1) continue;
        dense = dense && t->stride[d] == expect;
        zero = zero && t->stride[d] == 0;
        expect *= t->shape[d];
    }
    *step = dense ? 1 : 0;
    return dense || zero;
}

static void format_shape(const torc_operand *t, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

int ref_check_same_shape(const torc_operand *a, const char *an, const torc_operand *b, const char *bn) {
    bool same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
    if (same) return TORC_OK;
    char sa[128], sb[128];
    format_shape(a, sa, sizeof sa);
    format_shape(b, sb, sizeof sb);
    return ref_error(TORC_ERR_SHAPE, "reference backend: %s has shape %s but %s has shape %s", an, sa, bn, sb);
}

void ref_iter_init(ref_iter *it, int ndim, const int64_t *shape, int nops, char *const *data,
                   const size_t *elem_size, const int64_t *const *stride) {
    memset(it, 0, sizeof *it);
    it->nops = nops;
    it->numel = 1;
    for (int k = 0; k < nops; k++) it->data[k] = data[k];
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) {  // nothing to visit; an empty view's other dims and strides may be
            it->numel = 0;    // anything, their byte strides need not even fit int64_t
            it->ndim = 1;
            return;
        }
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        it->numel *= shape[d];
        if (shape[d] == 1) continue;  // a size-1 dim moves no pointer
        bool merge = nd > 0;
        for (int k = 0; merge && k < nops; k++)
            merge = it->stride[k][nd - 1] == stride[k][d] * (int64_t)elem_size[k] * shape[d];
        if (merge) {
            // The previous dim steps over exactly this one: fold them into one longer dim.
            it->shape[nd - 1] *= shape[d];
            for (int k = 0; k < nops; k++) it->stride[k][nd - 1] = stride[k][d] * (int64_t)elem_size[k];
        } else {
            it->shape[nd] = shape[d];
            for (int k = 0; k < nops; k++) it->stride[k][nd] = stride[k][d] * (int64_t)elem_size[k];
            nd++;
        }
    }
    if (nd == 0) it->shape[nd++] = 1;  // a scalar (or all dims of size 1): one run of one
    it->ndim = nd;
}

void ref_iter_ops(ref_iter *it, int ndim, const int64_t *shape, int nops, const torc_operand *const *ops) {
    char *data[REF_MAX_OPERANDS];
    size_t size[REF_MAX_OPERANDS];
    const int64_t *stride[REF_MAX_OPERANDS];
    for (int k = 0; k < nops; k++) {
        data[k] = ops[k]->data;
        size[k] = torc_abi_dtype_size(ops[k]->dtype);
        stride[k] = ops[k]->stride;
    }
    ref_iter_init(it, ndim, shape, nops, data, size, stride);
}

void ref_iter_run(const ref_iter *it, ref_loop_fn fn, void *ctx) {
    if (it->numel == 0) return;
    const int nd = it->ndim, nops = it->nops;
    int64_t idx[TORC_MAX_DIMS] = {0};
    int64_t off[REF_MAX_OPERANDS] = {0};  // byte offsets: pointers are formed only in bounds
    int64_t step[REF_MAX_OPERANDS];
    char *ptr[REF_MAX_OPERANDS];
    for (int k = 0; k < nops; k++) step[k] = it->stride[k][nd - 1];
    for (;;) {
        for (int k = 0; k < nops; k++) ptr[k] = it->data[k] + off[k];
        fn(ptr, step, it->shape[nd - 1], ctx);
        int d = nd - 2;
        for (; d >= 0; d--) {  // odometer over the outer dims
            for (int k = 0; k < nops; k++) off[k] += it->stride[k][d];
            if (++idx[d] < it->shape[d]) break;
            for (int k = 0; k < nops; k++) off[k] -= it->stride[k][d] * it->shape[d];
            idx[d] = 0;
        }
        if (d < 0) return;
    }
}

// ---- block load/store ----
// The switch sits outside the loops, so each loop is a plain conversion the compiler can unroll.
#define BLOCK_LOOP(expr) for (int64_t i = 0; i < n; i++) { const char *p = src + i * step; expr; }
void ref_load_block_f(double *dst, const char *src, int64_t step, int64_t n, torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_F64: BLOCK_LOOP(memcpy(&dst[i], p, 8)) break;
    case TORC_DTYPE_F32: BLOCK_LOOP(float v; memcpy(&v, p, 4); dst[i] = v) break;
    case TORC_DTYPE_BF16: BLOCK_LOOP(uint16_t v; memcpy(&v, p, 2); dst[i] = torc_bf16_to_f32(v)) break;
    default: BLOCK_LOOP(dst[i] = ref_load_f(p, dt)) break;
    }
}
#undef BLOCK_LOOP

void ref_store_block_f(char *dst, int64_t step, const double *src, int64_t n, torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_F64:
        for (int64_t i = 0; i < n; i++) memcpy(dst + i * step, &src[i], 8);
        break;
    case TORC_DTYPE_F32:
        for (int64_t i = 0; i < n; i++) {
            const float v = (float)src[i];
            memcpy(dst + i * step, &v, 4);
        }
        break;
    default:
        for (int64_t i = 0; i < n; i++) ref_store_f(dst + i * step, dt, src[i]);
        break;
    }
}
