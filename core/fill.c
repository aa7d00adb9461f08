// core/fill.c — what a fill stores: PyTorch's rule for a scalar written into a tensor of any
// dtype (fill_, zero_, full, full_like, zeros, ones, scalar_tensor), and fill_ itself.
#include <math.h>
#include <string.h>

#include "torc-impl.h"

// ---- the rule ----
// PyTorch converts the scalar with c10::Scalar::to<T> (checked_convert), which refuses a value
// that overflows T with "value cannot be converted to type T without overflow". Measured on
// PyTorch 2.15 for every dtype and the three scalar kinds (tests/test_fill.c has the table):
//  - bool tensor: any scalar; stored value != 0 (NaN is true).
//  - bool scalar: 0 or 1, into every dtype.
//  - integer tensor, integer scalar: must lie in the dtype's range, except that uint8 also takes
//    -255..-1, which wrap as in two's complement (fill_(-1) stores 255, -256 is refused); int64
//    takes every int64, stored exactly (also beyond 2^53, where a double cannot hold it).
//  - integer tensor, floating scalar: lowest <= v < max + 1, stored truncated toward zero
//    (uint8: 2.7 -> 2, 255.9 -> 255, -0.5 refused; int8: -0.5 -> 0, -128.5 refused; int64:
//    2^63 refused); NaN and infinities are refused.
//  - floating tensor, any scalar: |v| <= the dtype's largest finite value (f16 fill_(65505),
//    even as an integer, is refused); NaN is taken, and so are infinities except by
//    float8_e4m3fn, which has none; stored rounded to nearest even.
// The C entry points that take a double (full, full_like, scalar_tensor) cannot say which kind
// the caller meant: an integral double in int64's range counts as an integer scalar, the rest as
// floating (so torc_full(..., -1, u8) stores 255 as torch.full((n,), -1, dtype=torch.uint8) does;
// -1.0, which PyTorch refuses as a float, is taken too).

// c10's name of the C++ type each dtype converts to (the overflow message names it).
static const char *c10_type_name(torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_F64: return "double";
    case TORC_DTYPE_F32: return "float";
    case TORC_DTYPE_F16: return "c10::Half";
    case TORC_DTYPE_BF16: return "c10::BFloat16";
    case TORC_DTYPE_F8_E4M3FN: return "c10::Float8_e4m3fn";
    case TORC_DTYPE_F8_E5M2: return "c10::Float8_e5m2";
    case TORC_DTYPE_I64: return "int64_t";
    case TORC_DTYPE_I32: return "int";
    case TORC_DTYPE_I16: return "int16_t";
    case TORC_DTYPE_I8: return "int8_t";
    case TORC_DTYPE_U8: return "uint8_t";
    default: return "bool";
    }
}

static bool overflow(torc_dtype dt) {
    torc__error(TORC_ERR_INVALID_ARG, "value cannot be converted to type %s without overflow", c10_type_name(dt));
    return false;
}

bool torc__fill_value(torc_dtype dt, torc_scalar s, double *out) {
    const bool is_int = s.kind == TORC_DTYPE_I64 || s.kind == TORC_DTYPE_BOOL;
    if (s.kind == TORC_DTYPE_BOOL) s.i = s.i != 0;
    if (dt == TORC_DTYPE_BOOL) {
        *out = (is_int ? s.i != 0 : s.f != 0.0) ? 1.0 : 0.0;  // NaN != 0: true
        return true;
    }
    if (torc_dtype_is_floating(dt)) {
        const double v = is_int ? (double)s.i : s.f;
        double max = 0;
        torc_finfo(dt, NULL, &max, NULL, NULL);
        if (isinf(v) ? dt == TORC_DTYPE_F8_E4M3FN : fabs(v) > max) return overflow(dt);  // (false for NaN)
        *out = v;
        return true;
    }
    int64_t lo = 0, hi = 0;
    torc_iinfo(dt, &lo, &hi);
    if (is_int) {
        if (dt == TORC_DTYPE_U8 && s.i >= -255 && s.i < 0) {
            *out = (double)(uint8_t)s.i;  // wraps: -1 -> 255
            return true;
        }
        if (s.i < lo || s.i > hi) return overflow(dt);
        *out = (double)s.i;  // int64 beyond 2^53: torc__fill_scalar stores s.i itself
        return true;
    }
    // lowest <= v < max + 1: both bounds are exact doubles (-2^63 .. 2^63 for int64); NaN fails.
    if (!(s.f >= (double)lo && s.f < (double)hi + 1.0)) return overflow(dt);
    *out = trunc(s.f);
    return true;
}

torc_scalar torc__scalar_of_double(double v) {
    if (v == trunc(v) && v >= -0x1p63 && v < 0x1p63) return torc_scalar_i((int64_t)v);
    return torc_scalar_f(v);
}

// Fills t with s (checked and converted by torc__fill_value into v). An int64 that a double
// cannot hold is copied from a zero-dim tensor holding it, so every backend stores it exactly.
torc_status torc__fill_scalar(torc_tensor *t, torc_scalar s, double v) {
    const bool exact = !(t->dtype == TORC_DTYPE_I64 && s.kind == TORC_DTYPE_I64) ||
                       (s.i >= -(INT64_C(1) << 53) && s.i <= INT64_C(1) << 53);
    if (exact) return torc__fill(t, v);
    torc_tensor *src = torc__new(t->device, TORC_DTYPE_I64, 0, NULL);
    if (!src) return torc_last_status();
    torc_status st = TORC_OK;
    if (t->device->host_memory) memcpy(src->storage->data, &s.i, sizeof s.i);
    else st = torc__dev_copy(t->device, src->storage->data, &s.i, sizeof s.i, TORC_COPY_HOST_TO_DEVICE);
    if (!st) st = torc__copy(t, src);
    torc_release(src);
    return st;
}

// ---- fill_ / zero_ ----
static torc_status fill_(torc_tensor *self, torc_scalar value, const char *grad_fn) {
    if (!self) return torc__null_arg("tensor is NULL");
    double v;
    if (!torc__fill_value(self->dtype, value, &v)) return torc_last_status();
    torc_node *rec;
    const torc_tensor *ins[1] = {self};
    torc_status st = torc__inplace_begin(self, TORC_OP_FILL, 1, ins, NULL, grad_fn, &rec);
    if (st) return st;
    st = torc__fill_scalar(self, value, v);
    if (!st) torc__bump_version(self);
    return torc__inplace_end(self, rec, st);
}

torc_status torc_fill_(torc_tensor *self, torc_scalar value) { return fill_(self, value, NULL); }
torc_status torc_zero_(torc_tensor *self) { return fill_(self, torc_scalar_i(0), "ZeroBackward0"); }
