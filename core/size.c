// core/size.c — overflow-checked size arithmetic: element counts, byte counts and the storage
// extent of a strided view. Every size that comes from a user or a file goes through here.
#include <stdio.h>

#include "torc-impl.h"

bool torc__numel_checked(int ndim, const int64_t *shape, int64_t *numel) {
    int64_t n = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return false;
        if (shape[i] == 0) {  // an empty tensor, whatever the other dims say
            *numel = 0;
            return true;
        }
        if (!overflow && !torc__size_mul(n, shape[i], &n)) overflow = true;
    }
    if (overflow) return false;
    *numel = n;
    return true;
}

bool torc__nbytes_checked(int64_t numel, size_t itemsize, size_t *nbytes) {
    int64_t b;
    if (!torc__size_mul(numel, (int64_t)itemsize, &b) || (uint64_t)b > (uint64_t)SIZE_MAX) return false;
    *nbytes = (size_t)b;
    return true;
}

bool torc__extent_checked(int ndim, const int64_t *shape, const int64_t *stride, int64_t offset,
                          size_t itemsize, size_t *nbytes) {
    if (offset < 0) return false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || stride[i] < 0) return false;
        if (shape[i] == 0) {
            *nbytes = 0;
            return true;
        }
    }
    int64_t last = offset;  // the element index of the view's last element
    for (int i = 0; i < ndim; i++) {
        int64_t span;
        if (!torc__size_mul(shape[i] - 1, stride[i], &span) || !torc__size_add(last, span, &last))
            return false;
    }
    int64_t count;
    return torc__size_add(last, 1, &count) && torc__nbytes_checked(count, itemsize, nbytes);
}

static bool overflowed(int ndim, const int64_t *shape, const int64_t *stride) {
    char sh[TORC_SHAPE_STR_MAX], st[TORC_SHAPE_STR_MAX];
    torc__shape_str(ndim, shape, sh, sizeof sh);
    if (stride)
        torc__error(TORC_ERR_INVALID_ARG,
                    "Storage size calculation overflowed with sizes=%s and strides=%s", sh,
                    torc__shape_str(ndim, stride, st, sizeof st));
    else
        torc__error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed with sizes=%s", sh);
    return false;
}

bool torc__numel_err(int ndim, const int64_t *shape, int64_t *numel) {
    return torc__numel_checked(ndim, shape, numel) || overflowed(ndim, shape, NULL);
}

bool torc__nbytes_err(int ndim, const int64_t *shape, size_t itemsize, size_t *nbytes) {
    int64_t n;
    return (torc__numel_checked(ndim, shape, &n) && torc__nbytes_checked(n, itemsize, nbytes)) ||
           overflowed(ndim, shape, NULL);
}

bool torc__extent_err(int ndim, const int64_t *shape, const int64_t *stride, int64_t offset,
                      size_t itemsize, size_t *nbytes) {
    return torc__extent_checked(ndim, shape, stride, offset, itemsize, nbytes) ||
           overflowed(ndim, shape, stride);
}
