// core/broadcast.c — helpers every op frontend shares: broadcasting shapes (PyTorch's rules,
// right to left), broadcast operands (stride 0), fills, strided copies and scalar tensors.
#include <string.h>

#include "torc-impl.h"

torc_status torc__broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b,
                                   int *nout, int64_t *out) {
    const int n = na > nb ? na : nb;
    int64_t res[TORC_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        const int ia = na - 1 - i, ib = nb - 1 - i;
        const int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char ba[TORC_SHAPE_STR_MAX], bb[TORC_SHAPE_STR_MAX];
            return torc__error(TORC_ERR_SHAPE,
                               "The size of tensor a (%lld) must match the size of tensor b (%lld) "
                               "at non-singleton dimension %d (shapes %s and %s)",
                               (long long)sa, (long long)sb, n - 1 - i,
                               torc__shape_str(na, a, ba, sizeof ba), torc__shape_str(nb, b, bb, sizeof bb));
        }
        res[n - 1 - i] = sa == 1 ? sb : sa;
    }
    *nout = n;
    memcpy(out, res, (size_t)n * sizeof *res);
    return TORC_OK;
}

torc_status torc__broadcast_operand(const torc_tensor *t, int ndim, const int64_t *shape,
                                    torc_operand *op) {
    torc__operand(t, op);
    const int shift = ndim - t->ndim;
    if (shift < 0) return torc__error(TORC_ERR_SHAPE, "cannot broadcast to fewer dims");
    op->ndim = ndim;
    for (int i = ndim - 1; i >= 0; i--) {
        const int j = i - shift;
        const int64_t s = j >= 0 ? t->shape[j] : 1;
        const int64_t st = j >= 0 ? t->stride[j] : 0;
        if (s != shape[i] && s != 1) {
            char bt[TORC_SHAPE_STR_MAX], bs[TORC_SHAPE_STR_MAX];
            return torc__error(TORC_ERR_SHAPE, "tensor of shape %s cannot be broadcast to shape %s",
                               torc__shape_str(t->ndim, t->shape, bt, sizeof bt),
                               torc__shape_str(ndim, shape, bs, sizeof bs));
        }
        op->shape[i] = shape[i];
        op->stride[i] = s == shape[i] ? st : 0;  // a broadcast dim reads one element
    }
    return TORC_OK;
}

bool torc__same_device(const torc_tensor *a, const torc_tensor *b) {
    if (a->device == b->device) return true;
    torc__error(TORC_ERR_INVALID_ARG,
                "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                a->device->name, b->device->name);
    return false;
}

// Fills this small are written here: through a backend the call costs more than the loop.
#define FILL_HERE_MAX 4096

torc_status torc__fill(torc_tensor *t, double value) {
    const int64_t n = torc_numel(t);
    if (t->device->host_memory && n <= FILL_HERE_MAX && torc_is_contiguous(t) &&
        (t->dtype == TORC_DTYPE_F32 || t->dtype == TORC_DTYPE_F64)) {
        // What every backend's FILL writes: the value rounded once to the dtype.
        char *p = (char *)t->storage->data + (size_t)t->offset * torc_dtype_size(t->dtype);
        if (t->dtype == TORC_DTYPE_F32) {
            const float v = (float)value;
            for (int64_t i = 0; i < n; i++) memcpy(p + 4 * i, &v, 4);
        } else {
            for (int64_t i = 0; i < n; i++) memcpy(p + 8 * i, &value, 8);
        }
        return TORC_OK;
    }
    torc_op op = {.code = TORC_OP_FILL, .n_in = 0, .n_out = 1};
    torc__operand(t, &op.out[0]);
    op.params.scalar.value = value;
    return torc__dispatch(t->device, &op, 0);
}

torc_status torc__copy(torc_tensor *dst, const torc_tensor *src) {
    torc_op op = {.code = TORC_OP_COPY, .n_in = 1, .n_out = 1};
    torc__operand(dst, &op.out[0]);
    torc_status st = torc__broadcast_operand(src, dst->ndim, dst->shape, &op.in[0]);
    if (st) return st;
    return torc__dispatch(dst->device, &op, 0);
}

torc_tensor *torc__scalar_on(torc_device *dev, double value, torc_dtype dtype) {
    torc_tensor *t = torc__new(dev, dtype, 0, NULL);
    if (t && torc__fill(t, value) != TORC_OK) {
        torc_release(t);
        return NULL;
    }
    return t;
}
