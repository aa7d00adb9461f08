// core/view.c — views that share storage with their base: view, reshape, transpose, permute,
// select, slice, narrow, expand, unsqueeze, squeeze, flatten, as_strided, detach, contiguous.
// Shapes, strides and error texts follow PyTorch.
#include <string.h>

#include "torc-impl.h"

// Every view goes through here: records autograd history (grad_fn name and the view's
// arguments, which its backward needs) and registers the result.
#define finish_view(v, base, grad_fn, ...) \
    finish_view_((v), (base), (grad_fn), (int)(sizeof((int64_t[]){0, __VA_ARGS__}) / sizeof(int64_t)) - 1, \
                 (int64_t[]){0, __VA_ARGS__} + 1)
static torc_tensor *finish_view_(torc_tensor *v, torc_tensor *base, const char *grad_fn, int nargs,
                                 const int64_t *args) {
    if (!v) return NULL;
    v = torc__autograd_view(v, base, grad_fn, nargs, args);
    return v ? torc__register(v) : NULL;
}

// Resolves one -1 in shape against numel (PyTorch's infer_size).
static bool infer_size(int ndim, const int64_t *shape, int64_t numel, int64_t *out) {
    int infer = -1;
    int64_t prod = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1) {
            if (infer >= 0) {
                torc__error(TORC_ERR_SHAPE, "only one dimension can be inferred");
                return false;
            }
            infer = i;
        } else if (shape[i] < 0) {
            torc__error(TORC_ERR_SHAPE, "invalid shape dimension %lld", (long long)shape[i]);
            return false;
        } else if (!overflow && !torc__size_mul(prod, shape[i], &prod)) {
            overflow = true;  // no tensor has that many elements: the shape is invalid
        }
        out[i] = shape[i];
    }
    if (overflow) prod = -1;  // matches no numel and divides none
    if (numel == prod || (infer >= 0 && prod > 0 && numel % prod == 0)) {
        if (infer >= 0) {
            if (prod == 0) {
                torc__error(TORC_ERR_SHAPE, "cannot reshape tensor of 0 elements into shape with -1 "
                                            "because the unspecified dimension size -1 can be any value and is ambiguous");
                return false;
            }
            out[infer] = numel / prod;
        }
        return true;
    }
    char b[TORC_SHAPE_STR_MAX];
    torc__error(TORC_ERR_SHAPE, "shape '%s' is invalid for input of size %lld",
                torc__shape_str(ndim, shape, b, sizeof b), (long long)numel);
    return false;
}

// PyTorch's computeStride: the strides of a view of (oshape, ostride) with nshape, or false
// when the view would need a copy.
static bool compute_stride(int on, const int64_t *oshape, const int64_t *ostride, int nn,
                           const int64_t *nshape, int64_t *nstride) {
    if (on == 0) {
        for (int i = 0; i < nn; i++) nstride[i] = 1;
        return true;
    }
    const int64_t numel = torc__numel(on, oshape);
    if (numel == 0 && on == nn && !memcmp(oshape, nshape, (size_t)on * sizeof *oshape)) {
        memcpy(nstride, ostride, (size_t)on * sizeof *ostride);
        return true;
    }
    if (numel == 0) return torc__contiguous_strides(nn, nshape, nstride);
    int view_d = nn - 1;
    int64_t chunk_base_stride = ostride[on - 1], tensor_numel = 1, view_numel = 1;
    for (int td = on - 1; td >= 0; td--) {
        tensor_numel *= oshape[td];
        if (td == 0 || (oshape[td - 1] != 1 && ostride[td - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || nshape[view_d] == 1)) {
                nstride[view_d] = view_numel * chunk_base_stride;
                view_numel *= nshape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (td > 0) {
                chunk_base_stride = ostride[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

static bool check_tensor(const torc_tensor *t) {
    if (!t) torc__null_arg("tensor is NULL");
    return t != NULL;
}

static bool check_ndim(int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > TORC_MAX_DIMS || (ndim > 0 && !shape)) {
        torc__error(TORC_ERR_INVALID_ARG, "invalid shape (ndim %d, at most %d)", ndim, TORC_MAX_DIMS);
        return false;
    }
    return true;
}

torc_tensor *torc_view(torc_tensor *t, int ndim, const int64_t *shape) {
    if (!check_tensor(t) || !check_ndim(ndim, shape)) return NULL;
    int64_t ns[TORC_MAX_DIMS], st[TORC_MAX_DIMS];
    if (!infer_size(ndim, shape, torc_numel(t), ns)) return NULL;
    if (!compute_stride(t->ndim, t->shape, t->stride, ndim, ns, st))
        return TORC_FAIL_NULL(TORC_ERR_SHAPE,
                              "view size is not compatible with input tensor's size and stride (at least one "
                              "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
    return finish_view(torc__make_view(t, ndim, ns, st, t->offset), t, "ViewBackward0");
}

torc_tensor *torc_reshape(torc_tensor *t, int ndim, const int64_t *shape) {
    if (!check_tensor(t) || !check_ndim(ndim, shape)) return NULL;
    int64_t ns[TORC_MAX_DIMS], st[TORC_MAX_DIMS];
    if (!infer_size(ndim, shape, torc_numel(t), ns)) return NULL;
    if (compute_stride(t->ndim, t->shape, t->stride, ndim, ns, st))
        return finish_view(torc__make_view(t, ndim, ns, st, t->offset), t, "ViewBackward0");
    torc_scope_push();
    torc_tensor *c = torc_contiguous(t);
    torc_tensor *r = c ? torc_keep(torc_view(c, ndim, ns)) : NULL;
    torc_scope_pop();
    return r;
}

torc_tensor *torc_transpose(torc_tensor *t, int d0, int d1) {
    if (!check_tensor(t) || !torc__wrap_dim(&d0, t->ndim) || !torc__wrap_dim(&d1, t->ndim)) return NULL;
    int64_t sh[TORC_MAX_DIMS], st[TORC_MAX_DIMS];
    memcpy(sh, t->shape, sizeof sh);
    memcpy(st, t->stride, sizeof st);
    if (t->ndim > 0) {
        sh[d0] = t->shape[d1], sh[d1] = t->shape[d0];
        st[d0] = t->stride[d1], st[d1] = t->stride[d0];
    }
    return finish_view(torc__make_view(t, t->ndim, sh, st, t->offset), t, "TransposeBackward0", d0, d1);
}

torc_tensor *torc_permute(torc_tensor *t, int ndim, const int *dims) {
    if (!check_tensor(t)) return NULL;
    if (ndim != t->ndim || (ndim > 0 && !dims))
        return TORC_FAIL_NULL(TORC_ERR_SHAPE,
                              "permute(sparse_coo): number of dimensions in the tensor input does not match the "
                              "length of the desired ordering of dimensions i.e. input.dim() = %d is not equal to "
                              "len(dims) = %d", t->ndim, ndim);
    int64_t sh[TORC_MAX_DIMS], st[TORC_MAX_DIMS];
    bool seen[TORC_MAX_DIMS] = {false};
    for (int i = 0; i < ndim; i++) {
        int d = dims[i];
        if (!torc__wrap_dim(&d, ndim)) return NULL;
        if (seen[d]) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "permute(): duplicate dims are not allowed.");
        seen[d] = true;
        sh[i] = t->shape[d];
        st[i] = t->stride[d];
    }
    int64_t perm[TORC_MAX_DIMS];
    for (int i = 0; i < ndim; i++) perm[i] = dims[i] < 0 ? dims[i] + ndim : dims[i];
    torc_tensor *v = torc__make_view(t, ndim, sh, st, t->offset);
    return v ? finish_view_(v, t, "PermuteBackward0", ndim, perm) : NULL;
}

torc_tensor *torc_select(torc_tensor *t, int dim, int64_t index) {
    if (!check_tensor(t)) return NULL;
    if (t->ndim == 0) return TORC_FAIL_NULL(TORC_ERR_INDEX, "select() cannot be applied to a 0-dim tensor.");
    if (!torc__wrap_dim(&dim, t->ndim)) return NULL;
    const int64_t size = t->shape[dim];
    if (index < -size || index >= size) {
        char b[TORC_SHAPE_STR_MAX];
        return TORC_FAIL_NULL(TORC_ERR_INDEX, "select(): index %lld out of range for tensor of size %s at dimension %d",
                              (long long)index, torc__shape_str(t->ndim, t->shape, b, sizeof b), dim);
    }
    if (index < 0) index += size;
    int64_t sh[TORC_MAX_DIMS], st[TORC_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++)
        if (i != dim) sh[j] = t->shape[i], st[j++] = t->stride[i];
    return finish_view(torc__make_view(t, t->ndim - 1, sh, st, t->offset + index * t->stride[dim]), t,
                       "SelectBackward0", dim, index);
}

torc_tensor *torc_slice(torc_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    if (!check_tensor(t)) return NULL;
    if (t->ndim == 0) return TORC_FAIL_NULL(TORC_ERR_INDEX, "slice() cannot be applied to a 0-dim tensor.");
    if (!torc__wrap_dim(&dim, t->ndim)) return NULL;
    if (step <= 0) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "slice step must be positive");
    const int64_t size = t->shape[dim];
    // Python's clamping of slice bounds.
    if (start < 0) start += size;
    if (end < 0) end += size;
    if (start < 0) start = 0;
    else if (start > size) start = size;
    if (end < start) end = start;
    else if (end > size) end = size;
    int64_t sh[TORC_MAX_DIMS], st[TORC_MAX_DIMS];
    memcpy(sh, t->shape, sizeof sh);
    memcpy(st, t->stride, sizeof st);
    sh[dim] = end == start ? 0 : (end - start - 1) / step + 1;  // ceil((end - start) / step), no overflow
    // A step past the end leaves at most one element, whose stride nothing reads: the product,
    // which may not fit then, is kept only when it does.
    if (__builtin_mul_overflow(t->stride[dim], step, &st[dim])) st[dim] = t->stride[dim];
    // Only an empty result's start may lie past what fits (start == size); nothing reads it.
    int64_t off;
    if (__builtin_mul_overflow(start, t->stride[dim], &off) || __builtin_add_overflow(off, t->offset, &off))
        off = t->offset;
    return finish_view(torc__make_view(t, t->ndim, sh, st, off), t, "SliceBackward0", dim, start, end, step);
}

torc_tensor *torc_narrow(torc_tensor *t, int dim, int64_t start, int64_t length) {
    if (!check_tensor(t)) return NULL;
    if (t->ndim == 0) return TORC_FAIL_NULL(TORC_ERR_INDEX, "narrow() cannot be applied to a 0-dim tensor.");
    if (!torc__wrap_dim(&dim, t->ndim)) return NULL;
    const int64_t size = t->shape[dim];
    if (start < -size || start > size)
        return TORC_FAIL_NULL(TORC_ERR_INDEX, "start out of range (expected to be in range of [%lld, %lld], but got %lld)",
                              (long long)-size, (long long)size, (long long)start);
    if (start < 0) start += size;
    if (length < 0) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "narrow(): length must be non-negative.");
    if (length > size - start)  // start + length, which may overflow
        return TORC_FAIL_NULL(TORC_ERR_INDEX, "start (%lld) + length (%lld) exceeds dimension size (%lld).",
                              (long long)start, (long long)length, (long long)size);
    return torc_slice(t, dim, start, start + length, 1);
}

torc_tensor *torc_expand(torc_tensor *t, int ndim, const int64_t *shape) {
    if (!check_tensor(t) || !check_ndim(ndim, shape)) return NULL;
    char bt[TORC_SHAPE_STR_MAX], bs[TORC_SHAPE_STR_MAX];
    if (ndim < t->ndim)
        return TORC_FAIL_NULL(TORC_ERR_SHAPE,
                              "expand(torch.FloatTensor{%s}, size=%s): the number of sizes provided (%d) must be "
                              "greater or equal to the number of dimensions in the tensor (%d)",
                              torc__shape_str(t->ndim, t->shape, bt, sizeof bt),
                              torc__shape_str(ndim, shape, bs, sizeof bs), ndim, t->ndim);
    int64_t sh[TORC_MAX_DIMS], st[TORC_MAX_DIMS];
    for (int i = ndim - 1; i >= 0; i--) {
        const int j = i - (ndim - t->ndim);
        const int64_t size = j >= 0 ? t->shape[j] : 1, stride = j >= 0 ? t->stride[j] : 0;
        int64_t want = shape[i];
        if (want == -1) {
            if (j < 0)
                return TORC_FAIL_NULL(TORC_ERR_SHAPE, "The expanded size of the tensor (-1) isn't allowed in a "
                                                      "leading, non-existing dimension %d", i);
            want = size;
        }
        if (size == want) sh[i] = want, st[i] = stride;
        else if (size == 1) sh[i] = want, st[i] = 0;
        else
            return TORC_FAIL_NULL(TORC_ERR_SHAPE,
                                  "The expanded size of the tensor (%lld) must match the existing size (%lld) at "
                                  "non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s",
                                  (long long)want, (long long)size, i, torc__shape_str(ndim, shape, bs, sizeof bs),
                                  torc__shape_str(t->ndim, t->shape, bt, sizeof bt));
    }
    int64_t numel;  // stride 0 costs no storage, but the element count must still fit
    if (!torc__numel_err(ndim, sh, &numel)) return NULL;
    return finish_view(torc__make_view(t, ndim, sh, st, t->offset), t, "ExpandBackward0");
}

torc_tensor *torc_expand_as(torc_tensor *t, const torc_tensor *other) {
    if (!check_tensor(other)) return NULL;
    return torc_expand(t, other->ndim, other->shape);
}

torc_tensor *torc_unsqueeze(torc_tensor *t, int dim) {
    if (!check_tensor(t)) return NULL;
    if (t->ndim == TORC_MAX_DIMS)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "torc supports at most %d dims", TORC_MAX_DIMS);
    if (!torc__wrap_dim(&dim, t->ndim + 1)) return NULL;
    int64_t sh[TORC_MAX_DIMS], st[TORC_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == dim) {
            sh[i] = 1;
            // PyTorch's stride for the new dim; nothing reads a size-1 dim's stride, so a product
            // that does not fit (an empty tensor's huge dims) keeps its wrapped value.
            st[i] = 1;
            if (i < t->ndim) __builtin_mul_overflow(t->shape[i], t->stride[i], &st[i]);
        } else {
            sh[i] = t->shape[j];
            st[i] = t->stride[j++];
        }
    }
    return finish_view(torc__make_view(t, t->ndim + 1, sh, st, t->offset), t, "UnsqueezeBackward0", dim);
}

// grad_fn names as torch prints them: squeeze() is SqueezeBackward0, squeeze(dim) SqueezeBackward1.
static torc_tensor *squeeze_mask(torc_tensor *t, uint32_t mask, const char *grad_fn) {
    int64_t sh[TORC_MAX_DIMS], st[TORC_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (!((mask >> i) & 1) || t->shape[i] != 1) sh[n] = t->shape[i], st[n++] = t->stride[i];
    return finish_view(torc__make_view(t, n, sh, st, t->offset), t, grad_fn);
}

torc_tensor *torc_squeeze(torc_tensor *t, int dim) {
    if (!check_tensor(t) || !torc__wrap_dim(&dim, t->ndim)) return NULL;
    return squeeze_mask(t, t->ndim ? 1u << dim : 0, "SqueezeBackward1");
}

torc_tensor *torc_squeeze_all(torc_tensor *t) {
    if (!check_tensor(t)) return NULL;
    return squeeze_mask(t, 0xFFu, "SqueezeBackward0");
}

torc_tensor *torc_flatten(torc_tensor *t, int start_dim, int end_dim) {
    if (!check_tensor(t) || !torc__wrap_dim(&start_dim, t->ndim) || !torc__wrap_dim(&end_dim, t->ndim)) return NULL;
    if (start_dim > end_dim)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "flatten() has invalid args: start_dim cannot come after end_dim");
    if (t->ndim == 0) return torc_reshape(t, 1, (int64_t[]){1});
    int64_t sh[TORC_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < start_dim; i++) sh[n++] = t->shape[i];
    int64_t m;  // overflows only for an empty tensor's other dims
    if (!torc__numel_err(end_dim - start_dim + 1, t->shape + start_dim, &m)) return NULL;
    sh[n++] = m;
    for (int i = end_dim + 1; i < t->ndim; i++) sh[n++] = t->shape[i];
    return torc_reshape(t, n, sh);
}

torc_tensor *torc_as_strided(torc_tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                             int64_t storage_offset) {
    if (!check_tensor(t) || !check_ndim(ndim, shape) || (ndim > 0 && !stride)) return NULL;
    if (storage_offset < 0)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "Tensor: invalid storage offset %lld", (long long)storage_offset);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || stride[i] < 0)
            return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "as_strided: negative sizes and strides are not supported");
    const size_t es = torc_dtype_size(t->dtype);
    size_t need;  // the bytes from the storage's start the view reaches (0 when it is empty)
    int64_t numel;
    if (!torc__extent_err(ndim, shape, stride, storage_offset, es, &need) || !torc__numel_err(ndim, shape, &numel))
        return NULL;
    size_t offset_bytes;  // an empty view reaches nothing, but its data pointer must still be computable
    if (!torc__nbytes_checked(storage_offset, es, &offset_bytes)) {
        char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed with sizes=%s and strides=%s",
                              torc__shape_str(ndim, shape, b1, sizeof b1), torc__shape_str(ndim, stride, b2, sizeof b2));
    }
    if (need > t->storage->nbytes) {
        char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG,
                              "setStorage: sizes %s, strides %s, storage offset %lld, and itemsize %zu requiring a "
                              "storage size of %llu are out of bounds for storage of size %zu",
                              torc__shape_str(ndim, shape, b1, sizeof b1), torc__shape_str(ndim, stride, b2, sizeof b2),
                              (long long)storage_offset, es, (unsigned long long)need, t->storage->nbytes);
    }
    return finish_view(torc__make_view(t, ndim, shape, stride, storage_offset), t, "AsStridedBackward0");
}

torc_tensor *torc_detach(torc_tensor *t) {
    if (!check_tensor(t)) return NULL;
    torc_tensor *v = torc__make_view(t, t->ndim, t->shape, t->stride, t->offset);
    return v ? torc__register(v) : NULL;  // no history: detach is where the graph stops
}

torc_tensor *torc_contiguous(torc_tensor *t) {
    if (!check_tensor(t)) return NULL;
    if (torc_is_contiguous(t)) return torc__register(torc_retain(t));
    return torc_clone(t);
}
