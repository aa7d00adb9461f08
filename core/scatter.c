// core/scatter.c — the out-of-place scatters: index_add, scatter_add, masked_scatter (the
// backward of index_select, gather and masked_select). Each copies self and adds into it.
#include <string.h>

#include "torc-impl.h"

static bool check_index(const torc_tensor *index, const char *op) {
    if (!index) {
        torc__null_arg("%s: index is NULL", op);
        return false;
    }
    if (index->dtype != TORC_DTYPE_I64) {
        torc__error(TORC_ERR_DTYPE, "%s(): Expected dtype int64 for index", op);
        return false;
    }
    return true;
}

static bool same_dtype(const torc_tensor *self, const torc_tensor *src, const char *op, const char *what) {
    if (self->dtype == src->dtype) return true;
    torc__error(TORC_ERR_DTYPE, "%s(): self (%s) and %s (%s) must have the same scalar type", op,
                torc__dtype_c10_name(self->dtype), what, torc__dtype_c10_name(src->dtype));
    return false;
}

// Copies self, runs the in-place op on the copy and records the node.
static torc_tensor *run_into_copy(const torc_tensor *self, torc_op *op, uint64_t flops, int n_in,
                                  const torc_tensor *const *ins) {
    torc_tensor *out = torc__copy_as(self, self->dtype);
    if (!out) return NULL;
    torc__operand(out, &op->out[0]);
    if (torc__dispatch(out->device, op, flops)) {
        torc_release(out);
        return NULL;
    }
    out = torc__autograd_record(out, op->code, n_in, ins, &op->params);
    return out ? torc__register(out) : NULL;
}

torc_tensor *torc_index_add(const torc_tensor *self, int dim, const torc_tensor *index, const torc_tensor *source) {
    if (!self || !source) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (!check_index(index, "index_add") || !same_dtype(self, source, "index_add_", "source") ||
        !torc__same_device(self, source) || !torc__same_device(self, index) || !torc__wrap_dim(&dim, self->ndim))
        return NULL;
    char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
    if (index->ndim > 1)
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "index_add_(): Index is supposed to be a vector, but got dim: %d with type: "
                                              "%s and size: %s", index->ndim, torc__dtype_c10_name(index->dtype),
                              torc__shape_str(index->ndim, index->shape, b1, sizeof b1));
    const int64_t n = torc_numel(index);
    bool ok = source->ndim == self->ndim || (self->ndim <= 1 && source->ndim <= 1);
    for (int d = 0; ok && d < self->ndim && source->ndim; d++) ok = d == dim || source->shape[d] == self->shape[d];
    if (!ok)
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "source tensor shape must match self tensor shape, excluding the specified "
                                              "dimension. Got self.shape = %s source.shape = %s",
                              torc__shape_str(self->ndim, self->shape, b1, sizeof b1),
                              torc__shape_str(source->ndim, source->shape, b2, sizeof b2));
    const int64_t ns = source->ndim ? source->shape[dim] : 1;
    if (ns != n)
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "index_add_(): Number of indices (%lld) should be equal to "
                                              "source.size(dim): (%lld), for dim: %d", (long long)n, (long long)ns, dim);
    torc_op op = {.code = TORC_OP_INDEX_ADD, .n_in = 2, .n_out = 1};
    op.params.dim.dim = dim;
    torc__operand(source, &op.in[0]);
    torc__operand(index, &op.in[1]);
    // Zero-dim operands act as one-element vectors, as in index_select.
    for (int i = 0; i < 2; i++)
        if (op.in[i].ndim == 0 && self->ndim <= 1) op.in[i].ndim = 1, op.in[i].shape[0] = 1, op.in[i].stride[0] = 1;
    const torc_tensor *ins[3] = {self, index, source};
    return run_into_copy(self, &op, (uint64_t)torc_numel(source), 3, ins);
}

torc_tensor *torc_scatter_add(const torc_tensor *self, int dim, const torc_tensor *index, const torc_tensor *src) {
    if (!self || !src) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (!check_index(index, "scatter_add")) return NULL;
    if (self->dtype != src->dtype)
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "scatter(): Expected self.dtype to be equal to src.dtype");
    if (!torc__same_device(self, src) || !torc__same_device(self, index) || !torc__wrap_dim(&dim, self->ndim)) return NULL;
    if (index->ndim != self->ndim || src->ndim != self->ndim)
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "Index tensor must have the same number of dimensions as self tensor");
    for (int d = 0; d < self->ndim; d++)
        if (index->shape[d] > src->shape[d] || (d != dim && index->shape[d] > self->shape[d])) {
            char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX], b3[TORC_SHAPE_STR_MAX];
            return TORC_FAIL_NULL(TORC_ERR_SHAPE,
                                  "Expected index %s to be no larger than self %s apart from dimension %d and to "
                                  "be no larger size than src %s",
                                  torc__shape_str(index->ndim, index->shape, b1, sizeof b1),
                                  torc__shape_str(self->ndim, self->shape, b2, sizeof b2), dim,
                                  torc__shape_str(src->ndim, src->shape, b3, sizeof b3));
        }
    torc_op op = {.code = TORC_OP_SCATTER_ADD, .n_in = 2, .n_out = 1};
    op.params.dim.dim = dim;
    torc__operand(src, &op.in[0]);
    torc__operand(index, &op.in[1]);
    const torc_tensor *ins[3] = {self, index, src};
    return run_into_copy(self, &op, (uint64_t)torc_numel(index), 3, ins);
}

torc_tensor *torc_masked_scatter(const torc_tensor *self, const torc_tensor *mask, const torc_tensor *source) {
    if (!self || !mask || !source) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (mask->dtype != TORC_DTYPE_BOOL)
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "masked_scatter_ only supports boolean masks, but got mask with dtype %s",
                              torc__dtype_c10_name(mask->dtype));
    if (self->dtype != source->dtype)
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "masked_scatter: expected self and source to have same dtypes but got %s and %s",
                              torc__dtype_c10_name(self->dtype), torc__dtype_c10_name(source->dtype));
    if (!torc__same_device(self, source) || !torc__same_device(self, mask)) return NULL;
    int64_t count = 0;
    torc_scope_push();  // the number of true entries (a sync on devices), which source must cover
    torc_tensor *m = torc_expand((torc_tensor *)mask, self->ndim, self->shape);
    torc_tensor *cnt = m ? torc_sum(m, TORC_ALL_DIMS, false) : NULL;
    torc_status st = cnt ? torc_item_i64(cnt, &count) : torc_last_status();
    torc_tensor *flat = st ? NULL : torc_retain(torc_reshape((torc_tensor *)source, 1, (int64_t[]){-1}));
    torc_scope_pop();
    if (!flat) return NULL;
    if (count > torc_numel(source)) {
        torc_release(flat);
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "Number of elements of source < number of ones in mask");
    }
    torc_op op = {.code = TORC_OP_MASKED_SCATTER, .n_in = 2, .n_out = 1};
    torc__operand(flat, &op.in[0]);
    torc_tensor *r = NULL;
    if (!torc__broadcast_operand(mask, self->ndim, self->shape, &op.in[1])) {
        const torc_tensor *ins[3] = {self, mask, source};
        r = run_into_copy(self, &op, 0, 3, ins);
    }
    torc_release(flat);
    return r;
}
