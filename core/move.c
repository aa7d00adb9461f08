// core/move.c — copies between devices and dtypes: clone, to_device, to_dtype, copy_.
// Host-memory backends share memory, so moving between them copies nothing.
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

torc_tensor *torc__autograd_unary(torc_tensor *out, const torc_tensor *in, const char *name);  // autograd.c

// A contiguous copy of t on t's device in dtype (no autograd).
torc_tensor *torc__copy_as(const torc_tensor *t, torc_dtype dtype) {
    torc_tensor *r = torc__new(t->device, dtype, t->ndim, t->shape);
    if (r && torc__copy(r, t)) {
        torc_release(r);
        return NULL;
    }
    return r;
}

torc_tensor *torc_clone(const torc_tensor *t) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    torc_tensor *r = torc__copy_as(t, t->dtype);
    if (r) r = torc__autograd_unary(r, t, "CloneBackward0");
    return r ? torc__register(r) : NULL;
}

torc_tensor *torc_to_dtype(torc_tensor *t, torc_dtype dtype) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (!torc__dtype_valid(dtype)) return TORC_FAIL_NULL(TORC_ERR_DTYPE, "invalid dtype %d", (int)dtype);
    if (dtype == t->dtype) return torc__register(torc_retain(t));
    torc_tensor *r = torc__copy_as(t, dtype);
    if (r) r = torc__autograd_unary(r, t, "ToCopyBackward0");
    return r ? torc__register(r) : NULL;
}

// Copies the contiguous tensor src (on its device) into the contiguous dst on another device.
static torc_status copy_across(torc_tensor *dst, const torc_tensor *src) {
    const size_t n = torc_nbytes(src);
    const void *s = (const char *)src->storage->data + (size_t)src->offset * torc_dtype_size(src->dtype);
    void *d = (char *)dst->storage->data + (size_t)dst->offset * torc_dtype_size(dst->dtype);
    if (src->device->host_memory && dst->device->host_memory) {
        memcpy(d, s, n);
        return TORC_OK;
    }
    if (src->device->host_memory) return torc__dev_copy(dst->device, d, s, n, TORC_COPY_HOST_TO_DEVICE);
    if (dst->device->host_memory) return torc__dev_copy(src->device, d, s, n, TORC_COPY_DEVICE_TO_HOST);
    if (src->device == dst->device) return torc__dev_copy(dst->device, d, s, n, TORC_COPY_DEVICE_TO_DEVICE);
    // Two device backends: stage through host memory.
    void *tmp = malloc(n ? n : 1);
    if (!tmp) return torc__error(TORC_ERR_OOM, "out of host memory staging a %zu-byte copy", n);
    torc_status st = torc__dev_copy(src->device, tmp, s, n, TORC_COPY_DEVICE_TO_HOST);
    if (!st) st = torc__dev_copy(dst->device, d, tmp, n, TORC_COPY_HOST_TO_DEVICE);
    free(tmp);
    return st;
}

torc_tensor *torc_to_device(torc_tensor *t, torc_device *dev) {
    if (!t || !dev) return TORC_NULL_ARG_FAIL("torc_to_device: NULL argument");
    if (dev == t->device) return torc__register(torc_retain(t));
    torc_tensor *r;
    if (dev->host_memory && t->device->host_memory) {
        // Same memory: a new header over the same storage, running on the other backend.
        r = torc__make_view(t, t->ndim, t->shape, t->stride, t->offset);
        if (r) r->device = dev;
    } else {
        torc_tensor *c = torc_is_contiguous(t) ? torc_retain(t) : torc__copy_as(t, t->dtype);
        if (!c) return NULL;
        r = torc__new(dev, t->dtype, t->ndim, t->shape);
        if (r && copy_across(r, c)) {
            torc_release(r);
            r = NULL;
        }
        torc_release(c);
    }
    if (r) r = torc__autograd_unary(r, t, "ToCopyBackward0");
    return r ? torc__register(r) : NULL;
}

// PyTorch's canCast: floating -> integral and non-bool -> bool are not allowed in place.
static bool can_cast(torc_dtype from, torc_dtype to) {
    if (torc_dtype_is_floating(from) && !torc_dtype_is_floating(to)) return false;
    if (from != TORC_DTYPE_BOOL && to == TORC_DTYPE_BOOL) return false;
    return true;
}

bool torc__check_can_cast(torc_dtype result, torc_dtype out) {
    if (can_cast(result, out)) return true;
    torc__error(TORC_ERR_DTYPE, "result type %s can't be cast to the desired output type %s",
                torc__dtype_c10_name(result), torc__dtype_c10_name(out));
    return false;
}

// PyTorch's internal-overlap check for a tensor an op writes in place: a stride-0 dim of size
// > 1 (an expanded tensor) would make several results land on one element.
bool torc__check_no_internal_overlap(const torc_tensor *t) {
    for (int i = 0; i < t->ndim; i++)
        if (t->stride[i] == 0 && t->shape[i] > 1) {
            torc__error(TORC_ERR_INVALID_ARG, "unsupported operation: more than one element of the written-to tensor "
                                              "refers to a single memory location. Please clone() the tensor before "
                                              "performing the operation.");
            return false;
        }
    return true;
}

// PyTorch's is_non_overlapping_and_dense: the elements fill a block of memory exactly once, in
// some order of the dims (size-1 dims do not count).
static bool non_overlapping_and_dense(const torc_tensor *t) {
    int perm[TORC_MAX_DIMS], n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] != 1) perm[n++] = i;
    for (int i = 1; i < n; i++)  // insertion sort of the dims by stride
        for (int j = i; j > 0 && t->stride[perm[j]] < t->stride[perm[j - 1]]; j--) {
            const int x = perm[j];
            perm[j] = perm[j - 1], perm[j - 1] = x;
        }
    int64_t expected = 1;
    for (int i = 0; i < n; i++) {
        if (t->stride[perm[i]] != expected) return false;
        expected *= t->shape[perm[i]];
    }
    return true;
}

// PyTorch's partial-overlap check between the tensor an op writes and one it reads: both dense,
// in one storage, covering intersecting but not identical element sets (an identical set read
// with the same strides is fine: x.add_(x)). Tensors that are not dense are not checked, as in
// PyTorch ("too hard").
bool torc__check_no_partial_overlap(const torc_tensor *out, const torc_tensor *in) {
    if (out->storage != in->storage || torc_numel(out) == 0 || torc_numel(in) == 0 ||
        !non_overlapping_and_dense(out) || !non_overlapping_and_dense(in))
        return true;
    // dense tensors start at their lowest element, so [offset, offset + numel) is what they touch
    const int64_t ob = out->offset, oe = ob + torc_numel(out), ib = in->offset, ie = ib + torc_numel(in);
    bool partial = ob < ie && ib < oe;
    if (ob == ib && oe == ie) {
        partial = out->ndim != in->ndim;
        for (int i = 0; !partial && i < out->ndim; i++) partial = out->stride[i] != in->stride[i];
    }
    if (partial)
        torc__error(TORC_ERR_INVALID_ARG, "unsupported operation: some elements of the input tensor and the written-to "
                                          "tensor refer to a single memory location. Please clone() the tensor before "
                                          "performing the operation.");
    return !partial;
}

// An in-place op writes the broadcast of self and other into self, so the broadcast shape must
// be self's (PyTorch's messages: both shapes when they do not broadcast, else the output one).
bool torc__check_inplace_shape(const torc_tensor *self, const torc_tensor *other) {
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    if (torc__broadcast_shapes(self->ndim, self->shape, other->ndim, other->shape, &ndim, shape)) return false;
    bool same = ndim == self->ndim;
    for (int i = 0; same && i < ndim; i++) same = shape[i] == self->shape[i];
    if (!same) {
        char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
        torc__error(TORC_ERR_SHAPE, "output with shape %s doesn't match the broadcast shape %s",
                    torc__shape_str(self->ndim, self->shape, b1, sizeof b1), torc__shape_str(ndim, shape, b2, sizeof b2));
    }
    return same;
}

torc_status torc_copy_(torc_tensor *self, const torc_tensor *src) {
    if (!self || !src) return torc__null_arg("torc_copy_: NULL argument");
    if (!torc__check_inplace_shape(self, src) || !torc__check_no_internal_overlap(self) ||
        !torc__check_no_partial_overlap(self, src))
        return torc_last_status();
    torc_node *rec;
    const torc_tensor *ins[2] = {self, src};
    torc_status st = torc__inplace_begin(self, TORC_OP_COPY, 2, ins, NULL, NULL, &rec);
    if (st) return st;
    if (src->device == self->device || (src->device->host_memory && self->device->host_memory)) {
        st = torc__copy(self, src);
    } else {
        // Across devices: bring src over in its own dtype, then copy with cast on self's device.
        torc_scope_push();
        torc_no_grad_begin();
        torc_tensor *moved = torc_to_device((torc_tensor *)src, self->device);
        st = moved ? torc__copy(self, moved) : torc_last_status();
        torc_no_grad_end();
        torc_scope_pop();
    }
    if (!st) torc__bump_version(self);
    return torc__inplace_end(self, rec, st);
}
