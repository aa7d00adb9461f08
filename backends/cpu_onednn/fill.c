// backends/cpu_onednn/fill.c — TORC_OP_FILL into a contiguous out as a host loop: the scalar is
// converted once as the reference converts it (backends/reference/fill.c: through f32 for the
// narrow floats), then stored (memset for zeros). The reference's per-element memcpy took 1.4 ms
// for the 512x1000 zeros cross_entropy's backward starts from. Integer outs take integral values
// inside their range only; other fills go to the reference.
#include <math.h>
#include <string.h>

#include "onednn-impl.h"
#include "torc/convert.h"

bool onednn__fill_takes(const torc_op *op) { return op->code == TORC_OP_FILL; }

// The element's bytes (*size of them) for v in dtype d; false where the reference's conversion
// is not one of these exact cases (integers out of range or not integral).
static bool element_of(torc_dtype d, double v, unsigned char bytes[8], size_t *size) {
    union { double f64; float f32; uint16_t u16; uint8_t u8; int64_t i64; int32_t i32; int16_t i16; int8_t i8; } e;
    memset(&e, 0, sizeof e);
    double lo = 0, hi = 0;  // an integer dtype's range (v must lie in it, integral)
    switch (d) {
    case TORC_DTYPE_F64: e.f64 = v; break;
    case TORC_DTYPE_F32: e.f32 = (float)v; break;
    case TORC_DTYPE_F16: e.u16 = torc_f32_to_f16((float)v); break;
    case TORC_DTYPE_BF16: e.u16 = torc_f32_to_bf16((float)v); break;
    case TORC_DTYPE_F8_E4M3FN: e.u8 = torc_f32_to_f8e4m3fn((float)v); break;
    case TORC_DTYPE_F8_E5M2: e.u8 = torc_f32_to_f8e5m2((float)v); break;
    case TORC_DTYPE_BOOL: e.u8 = v != 0.0; break;
    case TORC_DTYPE_I64: lo = -0x1p63, hi = 0x1p63; break;  // hi excluded below: 2^63 does not fit
    case TORC_DTYPE_I32: lo = INT32_MIN, hi = INT32_MAX; break;
    case TORC_DTYPE_I16: lo = INT16_MIN, hi = INT16_MAX; break;
    case TORC_DTYPE_I8: lo = INT8_MIN, hi = INT8_MAX; break;
    case TORC_DTYPE_U8: lo = 0, hi = UINT8_MAX; break;
    default: return false;
    }
    *size = torc_abi_dtype_size(d);
    if (lo != hi) {  // integers: the reference's truncating conversion is exact only for these
        if (v != trunc(v) || !(v >= lo && v <= hi) || (d == TORC_DTYPE_I64 && v == hi)) return false;
        e.i64 = (int64_t)v;  // little-endian: the low bytes are the narrower integer's
    }
    memcpy(bytes, &e, 8);
    return true;
}

int onednn__fill_check(const torc_op *op) {
    int st = onednn__check_operand(&op->out[0], "out");
    if (st) return st;
    unsigned char b[8];
    size_t size;
    if (op->n_in != 0 || !onednn__dense(&op->out[0]) || !element_of(op->out[0].dtype, op->params.scalar.value, b, &size))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: fill runs contiguous outputs (integers: integral values "
                             "in range); others go to the reference backend");
    return 0;
}

#define FILL_LOOP(T)                                                             \
    do {                                                                         \
        T x;                                                                     \
        memcpy(&x, b, sizeof x);                                                 \
        T *o = op->out[0].data;                                                     \
        ONEDNN_FOR(n >= ONEDNN_SMALL_STREAM, i, n, o[i] = x;);                  \
    } while (0)

int onednn__fill_run(const torc_op *op) {
    const int64_t n = onednn__numel(&op->out[0]);
    if (n == 0) return 0;
    unsigned char b[8];
    size_t size;
    element_of(op->out[0].dtype, op->params.scalar.value, b, &size);
    static const unsigned char zeros[8];
    if (memcmp(b, zeros, size) == 0) {
        memset(op->out[0].data, 0, (size_t)n * size);
        return 0;
    }
    switch (size) {
    case 8: FILL_LOOP(uint64_t); break;
    case 4: FILL_LOOP(uint32_t); break;
    case 2: FILL_LOOP(uint16_t); break;
    default: memset(op->out[0].data, b[0], (size_t)n); break;
    }
    return 0;
}
