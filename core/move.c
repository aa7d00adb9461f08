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
    if (!t) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "tensor is NULL");
    torc_tensor *r = torc__copy_as(t, t->dtype);
    if (r) r = torc__autograd_unary(r, t, "CloneBackward0");
    return r ? torc__register(r) : NULL;
}

torc_tensor *torc_to_dtype(torc_tensor *t, torc_dtype dtype) {
    if (!t) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "tensor is NULL");
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
    if (!t || !dev) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "torc_to_device: NULL argument");
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
                torc_dtype_name(result), torc_dtype_name(out));
    return false;
}

torc_status torc_copy_(torc_tensor *self, const torc_tensor *src) {
    if (!self || !src) return torc__error(TORC_ERR_INVALID_ARG, "torc_copy_: NULL argument");
    torc_node *rec;
    const torc_tensor *ins[2] = {self, src};
    torc_status st = torc__inplace_begin(self, TORC_OP_COPY, 2, ins, NULL, NULL, &rec);
    if (st) return st;
    torc_operand probe;
    if ((st = torc__broadcast_operand(src, self->ndim, self->shape, &probe))) return torc__inplace_end(self, rec, st);
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

static torc_status fill_(torc_tensor *self, double value, const char *grad_fn) {
    if (!self) return torc__error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    torc_node *rec;
    const torc_tensor *ins[1] = {self};
    torc_status st = torc__inplace_begin(self, TORC_OP_FILL, 1, ins, NULL, grad_fn, &rec);
    if (st) return st;
    st = torc__fill(self, value);
    if (!st) torc__bump_version(self);
    return torc__inplace_end(self, rec, st);
}

torc_status torc_fill_(torc_tensor *self, torc_scalar value) { return fill_(self, value.f, NULL); }
torc_status torc_zero_(torc_tensor *self) { return fill_(self, 0.0, "ZeroBackward0"); }
