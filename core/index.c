// core/index.c — ops that copy: index_select, gather, masked_select (advanced indexing), cat,
// stack, triu, tril. Results own new storage, as in PyTorch.
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

static bool check_index(const torc_tensor *index, const char *op) {
    if (!index) {
        torc__null_arg("%s: index is NULL", op);
        return false;
    }
    if (index->dtype != TORC_DTYPE_I64) {
        torc__error(TORC_ERR_DTYPE, "%s(): Expected dtype int64 for index but got %s", op, torc_dtype_name(index->dtype));
        return false;
    }
    return true;
}

static torc_tensor *finish(torc_tensor *out, torc_op *op, torc_opcode code, int n_in, const torc_tensor *const *ins) {
    if (torc__dispatch(out->device, op, 0)) {
        torc_release(out);
        return NULL;
    }
    out = torc__autograd_record(out, code, n_in, ins, &op->params);
    return out ? torc__register(out) : NULL;
}

torc_tensor *torc_index_select(const torc_tensor *t, int dim, const torc_tensor *index) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (!check_index(index, "index_select")) return NULL;
    if (index->ndim > 1) return TORC_FAIL_NULL(TORC_ERR_SHAPE, "index_select(): Index is supposed to be a vector");
    if (!torc__wrap_dim(&dim, t->ndim)) return NULL;
    int64_t shape[TORC_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    if (t->ndim > 0) shape[dim] = torc_numel(index);
    torc_tensor *out = torc__new(t->device, t->dtype, t->ndim, shape);
    if (!out) return NULL;
    torc_op op = {.code = TORC_OP_INDEX_SELECT, .n_in = 2, .n_out = 1};
    op.params.dim.dim = dim;
    torc__operand(out, &op.out[0]);
    torc__operand(t, &op.in[0]);
    torc__operand(index, &op.in[1]);
    if (index->ndim == 0) {  // a scalar index acts as a 1-element vector
        op.in[1].ndim = 1, op.in[1].shape[0] = 1, op.in[1].stride[0] = 1;
    }
    const torc_tensor *ins[2] = {t, index};
    return finish(out, &op, TORC_OP_INDEX_SELECT, 2, ins);
}

torc_tensor *torc_gather(const torc_tensor *t, int dim, const torc_tensor *index) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (!check_index(index, "gather")) return NULL;
    if (!torc__wrap_dim(&dim, t->ndim)) return NULL;
    if (index->ndim != t->ndim && !(t->ndim == 0 && index->ndim <= 1))
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "Index tensor must have the same number of dimensions as input tensor");
    for (int i = 0; i < t->ndim; i++)
        if (i != dim && index->shape[i] > t->shape[i]) {
            char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
            return TORC_FAIL_NULL(TORC_ERR_SHAPE, "Size does not match at dimension %d expected index %s to be no larger "
                                                  "than self %s apart from dimension %d",
                                  i, torc__shape_str(index->ndim, index->shape, b1, sizeof b1),
                                  torc__shape_str(t->ndim, t->shape, b2, sizeof b2), dim);
        }
    torc_tensor *out = torc__new(t->device, t->dtype, index->ndim, index->shape);
    if (!out) return NULL;
    torc_op op = {.code = TORC_OP_GATHER, .n_in = 2, .n_out = 1};
    op.params.dim.dim = dim;
    torc__operand(out, &op.out[0]);
    torc__operand(t, &op.in[0]);
    torc__operand(index, &op.in[1]);
    const torc_tensor *ins[2] = {t, index};
    return finish(out, &op, TORC_OP_GATHER, 2, ins);
}

torc_tensor *torc_masked_select(const torc_tensor *t, const torc_tensor *mask) {
    if (!t || !mask) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (mask->dtype != TORC_DTYPE_BOOL)
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "masked_select: expected BoolTensor for mask");
    int nd;
    int64_t shape[TORC_MAX_DIMS];
    if (torc__broadcast_shapes(mask->ndim, mask->shape, t->ndim, t->shape, &nd, shape)) return NULL;  // PyTorch's order
    // The output size depends on the data: count the true entries first (a sync on devices).
    int64_t count = 0;
    torc_scope_push();
    torc_tensor *n = torc_sum(torc_expand((torc_tensor *)mask, nd, shape), TORC_ALL_DIMS, false);
    torc_status st = n ? torc_item_i64(n, &count) : torc_last_status();
    torc_scope_pop();
    if (st) return NULL;
    torc_tensor *out = torc__new(t->device, t->dtype, 1, &count);
    if (!out) return NULL;
    torc_op op = {.code = TORC_OP_MASKED_SELECT, .n_in = 2, .n_out = 1};
    torc__operand(out, &op.out[0]);
    if (torc__broadcast_operand(t, nd, shape, &op.in[0]) || torc__broadcast_operand(mask, nd, shape, &op.in[1])) {
        torc_release(out);
        return NULL;
    }
    const torc_tensor *ins[2] = {t, mask};
    return finish(out, &op, TORC_OP_MASKED_SELECT, 2, ins);
}

static torc_tensor *tri(const torc_tensor *t, int64_t k, torc_opcode code) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (t->ndim < 2)
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "%s: input tensor must have at least 2 dimensions",
                              code == TORC_OP_TRIU ? "triu" : "tril");
    torc_tensor *out = torc__new(t->device, t->dtype, t->ndim, t->shape);
    if (!out) return NULL;
    torc_op op = {.code = code, .n_in = 1, .n_out = 1};
    op.params.tri.k = k;
    torc__operand(out, &op.out[0]);
    torc__operand(t, &op.in[0]);
    return finish(out, &op, code, 1, &t);
}
torc_tensor *torc_triu(const torc_tensor *t, int64_t k) { return tri(t, k, TORC_OP_TRIU); }
torc_tensor *torc_tril(const torc_tensor *t, int64_t k) { return tri(t, k, TORC_OP_TRIL); }

// cat: copies each input into its slice of the result; autograd flows through the slices
// (narrow + copy are recorded per input by the composite below). As PyTorch, 1-D empty tensors
// (legacy shape (0,)) are skipped whatever the other shapes; they still take part in promotion.
static bool legacy_empty(const torc_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

torc_tensor *torc_cat(int n, torc_tensor *const *ts, int dim) {
    if (n <= 0 || !ts) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "torch.cat(): expected a non-empty list of Tensors");
    int ref = -1, skipped = 0;  // ref: the first tensor that is not skipped (or the last)
    for (int i = 0; i < n; i++) {
        if (!ts[i]) return TORC_NULL_ARG_FAIL("torch.cat(): tensor %d is NULL", i);
        if (ts[i]->ndim == 0)
            return TORC_FAIL_NULL(TORC_ERR_SHAPE, "zero-dimensional tensor (at position %d) cannot be concatenated", i);
        if (ref < 0 && !legacy_empty(ts[i])) ref = i;
    }
    if (ref < 0) ref = n - 1;
    const torc_tensor *first = ts[ref];
    if (!torc__wrap_dim(&dim, first->ndim)) return NULL;
    torc_dtype dtype;
    if (torc_result_type(n, (const torc_tensor *const *)ts, 0, NULL, &dtype)) return NULL;
    int64_t shape[TORC_MAX_DIMS];
    memcpy(shape, first->shape, sizeof shape);
    shape[dim] = 0;
    for (int i = 0; i < n; i++) {
        const torc_tensor *t = ts[i];
        if (t != first && legacy_empty(t)) {
            skipped++;
            continue;
        }
        if (t->ndim != first->ndim)
            return TORC_FAIL_NULL(TORC_ERR_SHAPE, "Tensors must have same number of dimensions: got %d and %d",
                                  first->ndim, t->ndim);
        if (!torc__same_device(first, t)) return NULL;
        for (int d = 0; d < t->ndim; d++)
            if (d != dim && t->shape[d] != first->shape[d])
                return TORC_FAIL_NULL(TORC_ERR_SHAPE, "Sizes of tensors must match except in dimension %d. Expected size "
                                                      "%lld but got size %lld for tensor number %d in the list.",
                                      dim, (long long)first->shape[d], (long long)t->shape[d], i);
        // A sum past int64_t (expanded inputs cost no storage) saturates: torc__new then reports
        // the overflow (or, for 1-byte dtypes, that the memory is not there).
        if (!torc__size_add(shape[dim], t->shape[dim], &shape[dim])) shape[dim] = INT64_MAX;
    }
    // The inputs that take part (all of them unless some were skipped).
    torc_tensor *const *in = ts;
    torc_tensor **kept = NULL;
    if (skipped) {
        if (!(kept = malloc((size_t)n * sizeof *kept))) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of memory");
        for (int i = 0, k = 0; i < n; i++)
            if (ts[i] == first || !legacy_empty(ts[i])) kept[k++] = ts[i];
        in = kept;
    }
    const int nk = n - skipped;
    torc_tensor *out = torc__new(first->device, dtype, first->ndim, shape);
    int64_t at = 0;
    for (int i = 0; out && i < nk; i++) {
        int64_t sh[TORC_MAX_DIMS];
        memcpy(sh, out->shape, sizeof sh);
        sh[dim] = in[i]->shape[dim];
        torc_tensor *slot = torc__make_view(out, out->ndim, sh, out->stride, at * out->stride[dim]);
        torc_status st = slot ? torc__copy(slot, in[i]) : torc_last_status();
        torc_release(slot);
        if (st) {
            torc_release(out);
            out = NULL;
        }
        at += in[i]->shape[dim];
    }
    torc_op_params p = {.dim = {dim}};
    // n inputs may exceed what an op descriptor holds; the autograd node takes them all.
    if (out) out = torc__autograd_record(out, TORC__GRAD_CAT, nk, (const torc_tensor *const *)in, &p);
    free(kept);
    return out ? torc__register(out) : NULL;
}

torc_tensor *torc_stack(int n, torc_tensor *const *ts, int dim) {
    if (n <= 0 || !ts) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "stack expects a non-empty TensorList");
    for (int i = 0; i < n; i++) {
        if (!ts[i]) return TORC_NULL_ARG_FAIL("stack(): tensor %d is NULL", i);
        if (ts[i]->ndim != ts[0]->ndim || memcmp(ts[i]->shape, ts[0]->shape, (size_t)ts[0]->ndim * sizeof(int64_t))) {
            char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
            return TORC_FAIL_NULL(TORC_ERR_SHAPE, "stack expects each tensor to be equal size, but got %s at entry 0 "
                                                  "and %s at entry %d",
                                  torc__shape_str(ts[0]->ndim, ts[0]->shape, b1, sizeof b1),
                                  torc__shape_str(ts[i]->ndim, ts[i]->shape, b2, sizeof b2), i);
        }
    }
    if (!torc__wrap_dim(&dim, ts[0]->ndim + 1)) return NULL;
    torc_scope_push();
    torc_tensor *un[64], **u = n <= 64 ? un : malloc((size_t)n * sizeof *u);
    torc_tensor *r = NULL;
    if (u) {
        int i = 0;
        for (; i < n; i++)
            if (!(u[i] = torc_unsqueeze(ts[i], dim))) break;
        if (i == n) r = torc_keep(torc_cat(n, u, dim));
        if (u != un) free(u);
    } else {
        torc__error(TORC_ERR_OOM, "out of memory");
    }
    torc_scope_pop();
    return r;
}
