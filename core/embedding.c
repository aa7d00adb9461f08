// core/embedding.c — torch.nn.functional.embedding: rows of a (V, C) table picked by integer
// indices of any shape. Composed of index_select (and a where for padding_idx), so its backward
// is IndexSelectBackward0's index_add, which every host backend runs serially in index order.
#include <string.h>

#include "torc-impl.h"

// PyTorch's legacy type names, which its checkScalarTypes message uses.
static const char *legacy_name(torc_dtype d) {
    static const char *const n[TORC_DTYPE_COUNT] = {
        "torch.DoubleTensor", "torch.FloatTensor", "torch.HalfTensor", "torch.BFloat16Tensor",
        "torch.Float8_e4m3fnTensor", "torch.Float8_e5m2Tensor", "torch.LongTensor", "torch.IntTensor",
        "torch.ShortTensor", "torch.CharTensor", "torch.ByteTensor", "torch.BoolTensor"};
    return (unsigned)d < TORC_DTYPE_COUNT ? n[d] : "?";
}

torc_tensor *torc_embedding(const torc_tensor *weight, const torc_tensor *indices, int64_t padding_idx) {
    if (!weight || !indices) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (indices->dtype != TORC_DTYPE_I64 && indices->dtype != TORC_DTYPE_I32)
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "Expected tensor for argument #1 'indices' to have one of the following "
                                              "scalar types: Long, Int; but got %s instead (while checking arguments "
                                              "for embedding)", legacy_name(indices->dtype));
    if (weight->ndim != 2) return TORC_FAIL_NULL(TORC_ERR_SHAPE, "'weight' must be 2-D");
    const int64_t V = weight->shape[0], C = weight->shape[1];
    // -1 is "no padding" (aten's convention; F.embedding maps Python's None to it and a
    // negative index to padding_idx + V before calling it).
    if (padding_idx < -1 || padding_idx >= V)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "Padding_idx must be within num_embeddings");
    if (!torc__same_device(weight, indices)) return NULL;
    if (indices->ndim + 1 > TORC_MAX_DIMS)
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "embedding: indices of %d dims give a result of more than %d dims",
                              indices->ndim, TORC_MAX_DIMS);
    int64_t shape[TORC_MAX_DIMS];
    memcpy(shape, indices->shape, (size_t)indices->ndim * sizeof *shape);
    shape[indices->ndim] = C;
    torc_scope_push();
    torc_tensor *idx = (torc_tensor *)indices;
    if (idx->dtype != TORC_DTYPE_I64) idx = torc_to_dtype(idx, TORC_DTYPE_I64);
    torc_tensor *flat = idx ? torc_reshape(idx, 1, (int64_t[]){-1}) : NULL;
    torc_tensor *rows = flat ? torc_index_select(weight, 0, flat) : NULL;  // (N, C)
    torc_tensor *out = rows ? torc_view(rows, indices->ndim + 1, shape) : NULL;
    if (out && padding_idx >= 0 && torc_requires_grad(out)) {
        // The padding row gets no gradient (its forward value is read as any other row): the
        // rows it fills are replaced by a detached copy of themselves, so where's backward
        // sends them nothing and index_add leaves that row of dweight at zero.
        torc_tensor *pad = torc_unsqueeze(torc_eq_scalar(idx, torc_s(padding_idx)), -1);
        out = pad ? torc_where(pad, torc_detach(out), out) : NULL;
    }
    out = torc_keep(out);
    torc_scope_pop();
    return out;
}
