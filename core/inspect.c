// core/inspect.c — read-only questions about a tensor: shape, strides, dtype, device,
// contiguity, storage sharing, versions, item and copies to host memory.
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

int torc_ndim(const torc_tensor *t) { return t ? t->ndim : -1; }
const int64_t *torc_shape(const torc_tensor *t) { return t ? t->shape : NULL; }
const int64_t *torc_strides(const torc_tensor *t) { return t ? t->stride : NULL; }
int64_t torc_storage_offset(const torc_tensor *t) { return t ? t->offset : -1; }
int64_t torc_numel(const torc_tensor *t) { return t ? torc__numel(t->ndim, t->shape) : 0; }
size_t torc_element_size(const torc_tensor *t) { return t ? torc_dtype_size(t->dtype) : 0; }
size_t torc_nbytes(const torc_tensor *t) { return t ? (size_t)torc_numel(t) * torc_dtype_size(t->dtype) : 0; }
torc_dtype torc_get_dtype(const torc_tensor *t) { return t ? t->dtype : TORC_DTYPE_COUNT; }
torc_device *torc_get_device(const torc_tensor *t) { return t ? t->device : NULL; }
uint64_t torc_version(const torc_tensor *t) { return t ? atomic_load(&t->storage->version) : 0; }

int64_t torc_size(const torc_tensor *t, int dim) {
    if (!t) return torc__null_arg("tensor is NULL"), -1;
    if (t->ndim == 0) return torc__error(TORC_ERR_INDEX, "dimension specified as %d but tensor has no dimensions", dim), -1;
    if (!torc__wrap_dim(&dim, t->ndim)) return -1;
    return t->shape[dim];
}

int64_t torc_stride(const torc_tensor *t, int dim) {
    if (!t) return torc__null_arg("tensor is NULL"), -1;
    if (t->ndim == 0) return torc__error(TORC_ERR_INDEX, "dimension specified as %d but tensor has no dimensions", dim), -1;
    if (!torc__wrap_dim(&dim, t->ndim)) return -1;
    return t->stride[dim];
}

// PyTorch's rule: size-1 dims may have any stride; an empty tensor is contiguous.
bool torc_is_contiguous(const torc_tensor *t) {
    if (!t) return false;
    if (torc_numel(t) == 0) return true;
    int64_t expected = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 1) continue;
        if (t->stride[i] != expected) return false;
        expected *= t->shape[i];
    }
    return true;
}

bool torc_same_storage(const torc_tensor *a, const torc_tensor *b) {
    return a && b && a->storage == b->storage;
}

torc_status torc_copy_to_host(const torc_tensor *t, void *dst, size_t nbytes) {
    if (!t || (!dst && torc_nbytes(t))) return torc__null_arg("torc_copy_to_host: NULL argument");
    const size_t need = torc_nbytes(t);
    if (nbytes < need)
        return torc__error(TORC_ERR_INVALID_ARG, "torc_copy_to_host: buffer of %zu bytes is smaller than the tensor's %zu",
                           nbytes, need);
    if (need == 0) return TORC_OK;
    torc_tensor *c = torc_is_contiguous(t) ? torc_retain((torc_tensor *)t) : NULL;
    if (!c) {
        c = torc__copy_as(t, t->dtype);
        if (!c) return torc_last_status();
    }
    const void *src = (const char *)c->storage->data + (size_t)c->offset * torc_dtype_size(c->dtype);
    torc_status st;
    if (c->device->host_memory) {
        memcpy(dst, src, need);
        st = TORC_OK;
    } else {
        st = torc__dev_copy(c->device, dst, src, need, TORC_COPY_DEVICE_TO_HOST);
    }
    torc_release(c);
    return st;
}

// Reads the single element of t as double and int64 (through a host copy).
static torc_status read_one(const torc_tensor *t, double *f, int64_t *i) {
    if (!t) return torc__null_arg("tensor is NULL");
    const int64_t n = torc_numel(t);
    if (n != 1)
        return torc__error(TORC_ERR_INVALID_ARG, "a Tensor with %lld elements cannot be converted to Scalar", (long long)n);
    // Convert on the device to f64 and i64 so every dtype reads the same way.
    torc_status st = TORC_OK;
    if (f) {
        torc_tensor *d = torc__copy_as(t, TORC_DTYPE_F64);
        st = d ? torc_copy_to_host(d, f, sizeof *f) : torc_last_status();
        torc_release(d);
    }
    if (!st && i) {
        torc_tensor *d = torc__copy_as(t, TORC_DTYPE_I64);
        st = d ? torc_copy_to_host(d, i, sizeof *i) : torc_last_status();
        torc_release(d);
    }
    return st;
}

torc_status torc_item(const torc_tensor *t, double *out) {
    if (!out) return torc__null_arg("torc_item: out is NULL");
    return read_one(t, out, NULL);
}

torc_status torc_item_i64(const torc_tensor *t, int64_t *out) {
    if (!out) return torc__null_arg("torc_item_i64: out is NULL");
    return read_one(t, NULL, out);
}
