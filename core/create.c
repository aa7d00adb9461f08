// core/create.c — factories: from a C array, empty/zeros/ones/full, *_like, arange, linspace,
// eye. All allocate on the default device (torc_set_default_device) in the given dtype.
#include <math.h>
#include <string.h>

#include "torc-impl.h"

static torc_tensor *new_default(torc_dtype dtype, int ndim, const int64_t *shape) {
    if (ndim > 0 && !shape) return TORC_NULL_ARG_FAIL("shape is NULL");
    torc_device *dev = torc_default_device();
    return dev ? torc__new(dev, dtype, ndim, shape) : NULL;
}

// value as fill_ takes it (core/fill.c: an integral double counts as an integer scalar).
static torc_tensor *filled(torc_tensor *t, double value) {
    const torc_scalar s = torc__scalar_of_double(value);
    double v;
    if (t && (!torc__fill_value(t->dtype, s, &v) || torc__fill_scalar(t, s, v) != TORC_OK)) {
        torc_release(t);
        return NULL;
    }
    return torc__register(t);
}

torc_tensor *torc_tensor_from(const void *data, int ndim, const int64_t *shape, torc_dtype dtype) {
    torc_tensor *t = new_default(dtype, ndim, shape);
    if (!t) return NULL;
    const size_t n = t->storage->nbytes;
    if (n && !data) {
        torc_release(t);
        return TORC_NULL_ARG_FAIL("torc_tensor_from: data is NULL");
    }
    if (t->device->host_memory) memcpy(t->storage->data, data, n);
    else if (torc__dev_copy(t->device, t->storage->data, data, n, TORC_COPY_HOST_TO_DEVICE)) {
        torc_release(t);
        return NULL;
    }
    return torc__register(t);
}

torc_tensor *torc_empty(int ndim, const int64_t *shape, torc_dtype dtype) {
    torc_tensor *t = new_default(dtype, ndim, shape);
    return t ? torc__register(t) : NULL;
}
torc_tensor *torc_zeros(int ndim, const int64_t *shape, torc_dtype dtype) { return filled(new_default(dtype, ndim, shape), 0.0); }
torc_tensor *torc_ones(int ndim, const int64_t *shape, torc_dtype dtype) { return filled(new_default(dtype, ndim, shape), 1.0); }
torc_tensor *torc_full(int ndim, const int64_t *shape, double value, torc_dtype dtype) {
    return filled(new_default(dtype, ndim, shape), value);
}
torc_tensor *torc_scalar_tensor(double value, torc_dtype dtype) { return filled(new_default(dtype, 0, NULL), value); }

static torc_tensor *like(const torc_tensor *t) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    return torc__new(t->device, t->dtype, t->ndim, t->shape);
}
torc_tensor *torc_empty_like(const torc_tensor *t) {
    torc_tensor *r = like(t);
    return r ? torc__register(r) : NULL;
}
torc_tensor *torc_zeros_like(const torc_tensor *t) { return filled(like(t), 0.0); }
torc_tensor *torc_ones_like(const torc_tensor *t) { return filled(like(t), 1.0); }
torc_tensor *torc_full_like(const torc_tensor *t, double value) { return filled(like(t), value); }

torc_tensor *torc_arange(double start, double end, double step, torc_dtype dtype) {
    if (step == 0) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "step must be nonzero");
    if (!isfinite(start) || !isfinite(end))
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "unsupported range: %g -> %g", start, end);
    if ((step > 0 && end < start) || (step < 0 && end > start))
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "upper bound and larger bound inconsistent with step sign");
    const double count = ceil((end - start) / step);
    if (!(count >= 0 && count < 0x1p63))  // PyTorch's check, before the cast that would overflow
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "invalid size, possible overflow?");
    const int64_t n = (int64_t)count;
    torc_tensor *t = new_default(dtype, 1, &n);
    if (!t) return NULL;
    torc_op op = {.code = TORC_OP_ARANGE, .n_out = 1};
    torc__operand(t, &op.out[0]);
    op.params.range.start = start;
    op.params.range.step = step;
    op.params.range.end = end;
    op.params.range.count = n;
    if (torc__dispatch(t->device, &op, 0)) {
        torc_release(t);
        return NULL;
    }
    return torc__register(t);
}

torc_tensor *torc_linspace(double start, double end, int64_t steps, torc_dtype dtype) {
    if (steps < 0) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "number of steps must be non-negative");
    torc_tensor *t = new_default(dtype, 1, &steps);
    if (!t) return NULL;
    torc_op op = {.code = TORC_OP_LINSPACE, .n_out = 1};
    torc__operand(t, &op.out[0]);
    op.params.range.start = start;
    op.params.range.end = end;
    op.params.range.step = steps > 1 ? (end - start) / (double)(steps - 1) : 0.0;
    op.params.range.count = steps;
    if (torc__dispatch(t->device, &op, 0)) {
        torc_release(t);
        return NULL;
    }
    return torc__register(t);
}

torc_tensor *torc_eye(int64_t n, int64_t m, torc_dtype dtype) {
    if (n < 0 || m < 0)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "n and m must be greater or equal to 0, got %lld and %lld",
                              (long long)n, (long long)m);
    const int64_t shape[2] = {n, m};
    torc_tensor *t = new_default(dtype, 2, shape);
    if (!t) return NULL;
    if (torc__fill(t, 0.0)) goto fail;
    // The diagonal is a strided view: min(n, m) elements, stride m + 1 (which fits when len > 0:
    // n * m elements do).
    const int64_t len = n < m ? n : m, stride = len ? m + 1 : 1;
    torc_tensor *diag = torc__make_view(t, 1, &len, &stride, 0);
    if (!diag) goto fail;
    torc_status st = torc__fill(diag, 1.0);
    torc_release(diag);
    if (st) goto fail;
    return torc__register(t);
fail:
    torc_release(t);
    return NULL;
}
