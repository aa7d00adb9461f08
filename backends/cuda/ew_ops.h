// backends/cuda/ew_ops.h — elementwise ops as plain C shared by host and device: the argument
// block a kernel receives, the compute-type choice, and the per-element body the kernels loop over.
#ifndef TCU_EW_OPS_H
#define TCU_EW_OPS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include <torc/backend.h>
#include <torc/philox.h>

#include "dtype_io.h"
#include "index_ops.h"  // the kernels' error codes and tcu_set_err
#include "layout.h"

#ifdef __cplusplus
extern "C" {
#endif

// What an elementwise kernel needs besides the iteration plan. [0] is out, [1..n_in] inputs.
typedef struct tcu_ew_args {
    int op;                        // torc_opcode
    int n_in;
    int flag;                      // GELU: tanh approximation
    tcu_ctype ct;                  // compute type
    torc_dtype common;             // the dtype inputs are rounded to before the math
    torc_dtype dt[TCU_MAX_OPS];
    void *data[TCU_MAX_OPS];
    double s0, s1, s2;             // scalar/alpha/exponent/fill; rng a, b; range start, step, end
    int64_t count;                 // linspace n
    uint64_t seed, offset;         // RNG key and counter base
    int *err;                      // the device's error word: an integer division by zero
                                   // (TCU_KERR_ZERO_DIV); NULL where nothing reads it
} tcu_ew_args;

// ---- op classes ----
TORC_HD static inline bool tcu_op_is_unary(int op) { return op >= TORC_OP_NEG && op <= TORC_OP_LOGICAL_NOT; }
// floor_divide, remainder, fmod (ABI 2.3): binary ops appended after the others.
TORC_HD static inline bool tcu_op_is_divmod(int op) { return op >= TORC_OP_FLOOR_DIVIDE && op <= TORC_OP_FMOD; }
// GELU_BACKWARD (ABI 2.4): dy, x -> dx, a binary arithmetic op of the floating dtypes, in kernels
// of its own (tcu_ew_gelu_backward).
TORC_HD static inline bool tcu_op_is_binary(int op) {
    return (op >= TORC_OP_ADD && op <= TORC_OP_LOGICAL_OR) || tcu_op_is_divmod(op) || op == TORC_OP_GELU_BACKWARD;
}
TORC_HD static inline bool tcu_op_is_compare(int op) { return op >= TORC_OP_EQ && op <= TORC_OP_GE; }
TORC_HD static inline bool tcu_op_is_generator(int op) { return op >= TORC_OP_FILL && op <= TORC_OP_RAND_INT && op != TORC_OP_COPY; }
// The fused pointwise ops: ADDCMUL, ADDCDIV (self, t1, t2) and LERP (self, end), scalar in s0.
TORC_HD static inline bool tcu_op_is_fused(int op) {
    return op == TORC_OP_ADDCMUL || op == TORC_OP_ADDCDIV || op == TORC_OP_LERP;
}
TORC_HD static inline bool tcu_op_is_elementwise(int op) {
    // fills, copy, generators, unary, binary, where, fused
    return op <= TORC_OP_WHERE || tcu_op_is_fused(op) || tcu_op_is_divmod(op) || op == TORC_OP_GELU_BACKWARD;
}
// Ops that have integer semantics (everything else needs a floating compute type).
TORC_HD static inline bool tcu_op_has_int_form(int op) {
    switch (op) {
    case TORC_OP_NEG: case TORC_OP_ABS: case TORC_OP_SIGN: case TORC_OP_SQUARE: case TORC_OP_RELU:
    case TORC_OP_POW_SCALAR: case TORC_OP_ADD: case TORC_OP_SUB: case TORC_OP_MUL: case TORC_OP_POW:
    case TORC_OP_MAXIMUM: case TORC_OP_MINIMUM: case TORC_OP_ADDCMUL:
    case TORC_OP_FLOOR_DIVIDE: case TORC_OP_REMAINDER: case TORC_OP_FMOD:
        return true;
    default:
        return false;
    }
}

// torch.promote_types for two non-fp8 dtypes (fp8 only meets itself here; the frontend refuses
// mixing it). Used for the dtype comparisons compare in.
static inline torc_dtype tcu_promote(torc_dtype a, torc_dtype b) {
    if (a == b) return a;
    const bool fa = tcu_dtype_is_float(a), fb = tcu_dtype_is_float(b);
    if (fa != fb) return fa ? a : b;  // floating wins the category, keeping its width
    if (fa) {
        if (a == TORC_DTYPE_F64 || b == TORC_DTYPE_F64) return TORC_DTYPE_F64;
        return TORC_DTYPE_F32;       // f32 with anything narrower, or f16 + bf16
    }
    if (a == TORC_DTYPE_BOOL) return b;
    if (b == TORC_DTYPE_BOOL) return a;
    if (a == TORC_DTYPE_U8 || b == TORC_DTYPE_U8) {
        const torc_dtype o = a == TORC_DTYPE_U8 ? b : a;   // u8 with a signed type
        return o == TORC_DTYPE_I8 ? TORC_DTYPE_I16 : o;
    }
    return torc_abi_dtype_size(a) >= torc_abi_dtype_size(b) ? a : b;
}

// The type an op's math runs in given its common dtype: PyTorch's opmath (float for the narrow
// floats and f32, double for f64, int64 for integers and bool).
static inline tcu_ctype tcu_ctype_of(torc_dtype common) {
    if (common == TORC_DTYPE_F64) return TCU_CT_F64;
    if (tcu_dtype_is_float(common)) return TCU_CT_F32;
    return TCU_CT_I64;
}

// Fills ct and common for an elementwise op whose operands are already in args (dt, n_in, op).
// Returns false when the op has no form for those dtypes (e.g. sqrt writing an integer).
static inline bool tcu_ew_choose_types(tcu_ew_args *a) {
    const int op = a->op;
    if (op == TORC_OP_COPY) {                 // convert from the source's own precision
        a->common = a->dt[1];
        a->ct = tcu_ctype_of(a->dt[1]);
        return true;
    }
    if (tcu_op_is_generator(op)) {            // computed in double, rounded once on store
        a->common = TORC_DTYPE_F64;
        a->ct = TCU_CT_GEN;
        return true;
    }
    if (op == TORC_OP_LOGICAL_NOT || op == TORC_OP_LOGICAL_AND || op == TORC_OP_LOGICAL_OR) {
        a->common = TORC_DTYPE_BOOL;
        a->ct = TCU_CT_I64;
        return true;
    }
    if (tcu_op_is_compare(op)) {
        a->common = tcu_promote(a->dt[1], a->dt[2]);
        a->ct = tcu_ctype_of(a->common);
        return true;
    }
    // arithmetic and where: inputs are cast to out's dtype first (TensorIterator's common dtype);
    // a binary op computes in the promotion of its inputs' and out's dtypes, which is wider than
    // out for an in-place f16 *= f32 tensor, or an f16 op whose one-element right operand the
    // frontend sends at float32 (PyTorch's opmath: round_f16(float(x) * 0.1f)).
    a->common = a->dt[0];
    if (tcu_op_is_binary(op) && a->n_in == 2) a->common = tcu_promote(tcu_promote(a->dt[1], a->dt[2]), a->dt[0]);
    a->ct = tcu_ctype_of(a->common);
    if (op == TORC_OP_WHERE) return true;
    if (a->ct == TCU_CT_I64 && !tcu_op_has_int_form(op)) return false;
    return true;
}

// The vectorised path: one contiguous run (inputs may be broadcast scalars), every operand of
// the same f32/f16/bf16 dtype, float math, 16-byte aligned, and an op without a dtype change.
// Not floor_divide / remainder / fmod nor gelu_backward: they run in kernels of their own
// (tcu_ew_divmod, tcu_ew_gelu_backward).
static inline bool tcu_ew_fast_ok(const tcu_ew_args *a, const tcu_iter *it) {
    const int op = a->op;
    const torc_dtype dt = a->dt[0];
    if (it->ndim != 1 || a->ct != TCU_CT_F32 || it->numel < 1) return false;
    if (dt != TORC_DTYPE_F32 && dt != TORC_DTYPE_F16 && dt != TORC_DTYPE_BF16) return false;
    const bool unary = tcu_op_is_unary(op) && op != TORC_OP_LOGICAL_NOT;
    const bool binary = tcu_op_is_binary(op) && !tcu_op_is_compare(op) && !tcu_op_is_divmod(op) &&
                        op != TORC_OP_GELU_BACKWARD && op != TORC_OP_LOGICAL_AND && op != TORC_OP_LOGICAL_OR;
    if (!(unary && a->n_in == 1) && !(binary && a->n_in == 2)) return false;
    if (it->stride[0][TCU_D - 1] != 1 || ((uintptr_t)a->data[0] & 15)) return false;
    for (int k = 1; k <= a->n_in; k++) {
        const int64_t s = it->stride[k][TCU_D - 1];
        if (a->dt[k] != dt || (s != 0 && s != 1)) return false;
        if (s == 1 && ((uintptr_t)a->data[k] & 15)) return false;
    }
    return true;
}

// ---- host fallbacks of device-only math ----
#if !defined(__CUDA_ARCH__)
// erfinv for host builds (tests): Giles' approximation refined by two Newton steps on erf.
static inline double tcu_erfinv_host(double y) {
    if (y != y || y < -1.0 || y > 1.0) return NAN;
    if (y == 1.0) return INFINITY;
    if (y == -1.0) return -INFINITY;
    double w = -log((1.0 - y) * (1.0 + y)), x;
    if (w < 5.0) {
        w -= 2.5;
        x = 2.81022636e-08;
        x = 3.43273939e-07 + x * w; x = -3.5233877e-06 + x * w; x = -4.39150654e-06 + x * w;
        x = 0.00021858087 + x * w; x = -0.00125372503 + x * w; x = -0.00417768164 + x * w;
        x = 0.246640727 + x * w; x = 1.50140941 + x * w;
    } else {
        w = sqrt(w) - 3.0;
        x = -0.000200214257;
        x = 0.000100950558 + x * w; x = 0.00134934322 + x * w; x = -0.00367342844 + x * w;
        x = 0.00573950773 + x * w; x = -0.0076224613 + x * w; x = 0.00943887047 + x * w;
        x = 1.00167406 + x * w; x = 2.83297682 + x * w;
    }
    x *= y;
    for (int k = 0; k < 2; k++)
        x -= (erf(x) - y) / (1.1283791670955126 * exp(-x * x));
    return x;
}
static inline float tcu_erfinvf_host(float y) { return (float)tcu_erfinv_host(y); }
#define TCU_ERFINV_F32(x) tcu_erfinvf_host(x)
#define TCU_ERFINV_F64(x) tcu_erfinv_host(x)
#else
#define TCU_ERFINV_F32(x) erfinvf(x)
#define TCU_ERFINV_F64(x) erfinv(x)
#endif

// Double arithmetic that is never fused (nvcc contracts a + b * c into an fma by default; the
// reference, built as ISO C, does not), so RNG and ranges match the reference bit for bit.
TORC_HD static inline double tcu_dmul(double x, double y) {
#if defined(__CUDA_ARCH__)
    return __dmul_rn(x, y);
#else
    return x * y;
#endif
}
TORC_HD static inline double tcu_dadd(double x, double y) {
#if defined(__CUDA_ARCH__)
    return __dadd_rn(x, y);
#else
    return x + y;
#endif
}

// Rounds a float to a narrower floating common dtype (int + f16 tensors add as f16 values).
TORC_HD static inline float tcu_round_to(float v, torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F16: return torc_f16_to_f32(torc_f32_to_f16(v));
    case TORC_DTYPE_BF16: return torc_bf16_to_f32(torc_f32_to_bf16(v));
    case TORC_DTYPE_F8_E4M3FN: return torc_f8e4m3fn_to_f32(torc_f32_to_f8e4m3fn(v));
    case TORC_DTYPE_F8_E5M2: return torc_f8e5m2_to_f32(torc_f32_to_f8e5m2(v));
    default: return v;
    }
}

// TCU_RT(v): v rounded to the op's common dtype (a->common), as that dtype's arithmetic rounds
// each step where backend.h says so (ADD's alpha, the steps of floor_divide and remainder).
#define TCU_T float
#define TCU_F(x) x##_f32
#define TCU_M(fn) fn##f
#define TCU_ERFINV TCU_ERFINV_F32
#define TCU_RT(v) tcu_round_to((v), a->common)
#include "ew_float_body.h"
#undef TCU_T
#undef TCU_F
#undef TCU_M
#undef TCU_ERFINV
#undef TCU_RT

#define TCU_T double
#define TCU_F(x) x##_f64
#define TCU_M(fn) fn
#define TCU_ERFINV TCU_ERFINV_F64
#define TCU_RT(v) (v)
#include "ew_float_body.h"
#undef TCU_T
#undef TCU_F
#undef TCU_M
#undef TCU_ERFINV
#undef TCU_RT

// ---- integer math (int64, wrapping like the narrower C++ types it is stored back to) ----
TORC_HD static inline int64_t tcu_wrap_add(int64_t x, int64_t y) { return (int64_t)((uint64_t)x + (uint64_t)y); }
TORC_HD static inline int64_t tcu_wrap_mul(int64_t x, int64_t y) { return (int64_t)((uint64_t)x * (uint64_t)y); }

// PyTorch's integer pow (powi): negative exponents give 1, +-1 or 0.
TORC_HD static inline int64_t tcu_powi(int64_t b, int64_t e) {
    if (e < 0) {
        if (b == 1) return 1;
        if (b == -1) return (e & 1) ? -1 : 1;
        return 0;
    }
    int64_t r = 1;
    while (e) {
        if (e & 1) r = tcu_wrap_mul(r, b);
        b = tcu_wrap_mul(b, b);
        e >>= 1;
    }
    return r;
}

TORC_HD static inline int64_t tcu_unary_i64(int op, int64_t x, const tcu_ew_args *a) {
    switch (op) {
    case TORC_OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case TORC_OP_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case TORC_OP_SIGN: return (x > 0) - (x < 0);
    case TORC_OP_SQUARE: return tcu_wrap_mul(x, x);
    case TORC_OP_RELU: return x < 0 ? 0 : x;
    case TORC_OP_POW_SCALAR: return tcu_powi(x, tcu_f64_to_i64(a->s0));
    default: return x;
    }
}

// Integer floor_divide (Python's //), remainder (Python's %) and fmod (C's %), exact in int64:
// MIN // -1 wraps, a zero divisor reports TCU_KERR_ZERO_DIV (the result is then 0).
TORC_HD static inline int64_t tcu_divmod_i64(int op, int64_t x, int64_t y, const tcu_ew_args *a) {
    if (y == 0) {
        tcu_set_err(a->err, TCU_KERR_ZERO_DIV);
        return 0;
    }
    if (y == -1) return op == TORC_OP_FLOOR_DIVIDE ? (int64_t)(0 - (uint64_t)x) : 0;
    const int64_t q = x / y, m = x % y;
    const bool fix = m != 0 && (m < 0) != (y < 0);
    if (op == TORC_OP_FLOOR_DIVIDE) return fix ? q - 1 : q;
    if (op == TORC_OP_REMAINDER) return fix ? m + y : m;
    return m;
}

// The binary arithmetic ops but the three above (tcu_arith_f32 / _f64 likewise).
TORC_HD static inline int64_t tcu_arith_i64(int op, int64_t x, int64_t y, const tcu_ew_args *a) {
    const int64_t alpha = tcu_f64_to_i64(a->s0);
    switch (op) {
    case TORC_OP_ADD: return tcu_wrap_add(x, tcu_wrap_mul(alpha, y));
    case TORC_OP_SUB: return tcu_wrap_add(x, (int64_t)(0 - (uint64_t)tcu_wrap_mul(alpha, y)));
    case TORC_OP_MUL: return tcu_wrap_mul(x, y);
    case TORC_OP_POW: return tcu_powi(x, y);
    case TORC_OP_MAXIMUM: return x > y ? x : y;
    case TORC_OP_MINIMUM: return x < y ? x : y;
    default: return x;
    }
}

// Every binary arithmetic op.
TORC_HD static inline int64_t tcu_binary_i64(int op, int64_t x, int64_t y, const tcu_ew_args *a) {
    return tcu_op_is_divmod(op) ? tcu_divmod_i64(op, x, y, a) : tcu_arith_i64(op, x, y, a);
}

TORC_HD static inline bool tcu_compare_i64(int op, int64_t x, int64_t y) {
    switch (op) {
    case TORC_OP_EQ: return x == y;
    case TORC_OP_NE: return x != y;
    case TORC_OP_LT: return x < y;
    case TORC_OP_LE: return x <= y;
    case TORC_OP_GT: return x > y;
    case TORC_OP_GE: return x >= y;
    default: return false;
    }
}

// WHERE picks an element and casts it to out's dtype (no arithmetic, any dtypes).
TCU_HDI void tcu_ew_where(const tcu_ew_args *a, const int64_t *off) {
    // selects, not a run-time index: indexing the argument block would copy it to local memory
    const bool c = tcu_load_bool(a->data[1], off[1], a->dt[1]);
    tcu_cast(a->data[0], off[0], a->dt[0], c ? a->data[2] : a->data[3], c ? off[2] : off[3],
             c ? a->dt[2] : a->dt[3]);
}

// The fused pointwise ops (ADDCMUL, ADDCDIV, LERP) in compute type ct (a constant in each
// kernel): inputs loaded and rounded to the common dtype, then PyTorch's steps (tcu_fused_f32 /
// _f64). They run in kernels of their own: inlined into the generic bodies, their extra loads
// would push those kernels past their register budget.
TCU_HDI void tcu_ew_fused(const tcu_ew_args *a, const int64_t *off, int ct) {
    const int op = a->op;
    const bool three = a->n_in > 2;
    if (ct == TCU_CT_F64) {
        const double s = tcu_load_f64(a->data[1], off[1], a->dt[1]), x = tcu_load_f64(a->data[2], off[2], a->dt[2]);
        const double y = three ? tcu_load_f64(a->data[3], off[3], a->dt[3]) : 0.0;
        tcu_store_f64(a->data[0], off[0], a->dt[0], tcu_fused_f64(op, s, x, y, a));
    } else if (ct == TCU_CT_F32) {
        float s = tcu_load_f32(a->data[1], off[1], a->dt[1]), x = tcu_load_f32(a->data[2], off[2], a->dt[2]);
        float y = three ? tcu_load_f32(a->data[3], off[3], a->dt[3]) : 0.0f;
        if (a->dt[1] != a->common) s = tcu_round_to(s, a->common);
        if (a->dt[2] != a->common) x = tcu_round_to(x, a->common);
        if (three && a->dt[3] != a->common) y = tcu_round_to(y, a->common);
        tcu_store_f32(a->data[0], off[0], a->dt[0], tcu_fused_f32(op, s, x, y, a));
    } else {  // ADDCMUL on integers: wrapping, the value truncated toward zero
        const int64_t s = tcu_load_i64(a->data[1], off[1], a->dt[1]), x = tcu_load_i64(a->data[2], off[2], a->dt[2]),
                      y = tcu_load_i64(a->data[3], off[3], a->dt[3]);
        tcu_store_i64(a->data[0], off[0], a->dt[0], tcu_wrap_add(s, tcu_wrap_mul(tcu_wrap_mul(tcu_f64_to_i64(a->s0), x), y)));
    }
}

// FLOOR_DIVIDE, REMAINDER, FMOD (two inputs) in compute type ct (a constant in each kernel):
// inputs loaded and rounded to the common dtype as the generic bodies load them, then
// tcu_divmod_f32 / _f64 / _i64. Kernels of their own, as the fused ops: fmod's loop and the
// rounding steps inlined into the generic bodies raised every op's register use there, and made
// ew_kernel32<F64> spill.
TCU_HDI void tcu_ew_divmod(const tcu_ew_args *a, const int64_t *off, int ct) {
    const int op = a->op;
    if (ct == TCU_CT_F64) {
        const double x = tcu_load_f64(a->data[1], off[1], a->dt[1]), y = tcu_load_f64(a->data[2], off[2], a->dt[2]);
        tcu_store_f64(a->data[0], off[0], a->dt[0], tcu_divmod_f64(op, x, y, a));
    } else if (ct == TCU_CT_F32) {
        float x = tcu_load_f32(a->data[1], off[1], a->dt[1]), y = tcu_load_f32(a->data[2], off[2], a->dt[2]);
        if (a->dt[1] != a->common) x = tcu_round_to(x, a->common);
        if (a->dt[2] != a->common) y = tcu_round_to(y, a->common);
        tcu_store_f32(a->data[0], off[0], a->dt[0], tcu_divmod_f32(op, x, y, a));
    } else {
        const int64_t x = tcu_load_i64(a->data[1], off[1], a->dt[1]), y = tcu_load_i64(a->data[2], off[2], a->dt[2]);
        tcu_store_i64(a->data[0], off[0], a->dt[0], tcu_divmod_i64(op, x, y, a));
    }
}

// GELU_BACKWARD (dy, x; floating dtypes, so ct is F32 or F64, a constant in each kernel): inputs
// loaded and rounded to the common dtype as the generic bodies load them, then
// tcu_gelu_backward_f32 / _f64. Kernels of their own, as the divmod ops: its exp, erf and tanh
// inlined into the generic and vectorised kernels made ew_kernel32<F64> (8 bytes), ew_fast<F16>
// (4 + 8 bytes) and CUDA's double pow (__internal_accurate_pow) spill on sm_90 (nvcc 13).
TCU_HDI void tcu_ew_gelu_backward(const tcu_ew_args *a, const int64_t *off, int ct) {
    if (ct == TCU_CT_F64) {
        const double dy = tcu_load_f64(a->data[1], off[1], a->dt[1]), x = tcu_load_f64(a->data[2], off[2], a->dt[2]);
        tcu_store_f64(a->data[0], off[0], a->dt[0], tcu_gelu_backward_f64(dy, x, a->flag));
    } else {
        float dy = tcu_load_f32(a->data[1], off[1], a->dt[1]), x = tcu_load_f32(a->data[2], off[2], a->dt[2]);
        if (a->dt[1] != a->common) dy = tcu_round_to(dy, a->common);
        if (a->dt[2] != a->common) x = tcu_round_to(x, a->common);
        tcu_store_f32(a->data[0], off[0], a->dt[0], tcu_gelu_backward_f32(dy, x, a->flag));
    }
}

// ---- the per-element bodies (one per compute type; kernels pick one at compile time) ----
// off[k]: element offsets of out and inputs; linear: the row-major index of the element in out.
// tcu_ew_generic_*: every op of its compute type but FLOOR_DIVIDE / REMAINDER / FMOD and
// GELU_BACKWARD (the device's generic kernels; those go to tcu_ew_divmod's and
// tcu_ew_gelu_backward's kernels); tcu_ew_f32 / _f64 / _i64: every op, dispatched as
// tcu_launch_ew dispatches (the host emulations).

// Fills, ranges and random numbers: out only, computed in double from the row-major index.
TCU_HDI void tcu_ew_gen(const tcu_ew_args *a, const int64_t *off, int64_t linear) {
    double r;
    switch (a->op) {
    case TORC_OP_FILL: r = a->s0; break;
    case TORC_OP_ARANGE:
        if (!tcu_dtype_is_float(a->dt[0])) {  // integer ranges in int64, start and step truncated
            tcu_store_i64(a->data[0], off[0], a->dt[0],
                          tcu_wrap_add(tcu_f64_to_i64(a->s0), tcu_wrap_mul(linear, tcu_f64_to_i64(a->s1))));
            return;
        }
        r = tcu_dadd(a->s0, tcu_dmul((double)linear, a->s1));
        break;
    case TORC_OP_LINSPACE: {
        const int64_t n = a->count;
        if (n == 1) { r = a->s0; break; }
        const double step = (a->s2 - a->s0) / (double)(n - 1);
        r = linear < n / 2 ? tcu_dadd(a->s0, tcu_dmul((double)linear, step))
                           : a->s2 - tcu_dmul((double)(n - 1 - linear), step);
        break;
    }
    case TORC_OP_RAND_UNIFORM:
        r = tcu_dadd(a->s0, tcu_dmul(a->s1 - a->s0, torc_philox_uniform(a->seed, a->offset, (uint64_t)linear)));
        break;
    case TORC_OP_RAND_NORMAL:
        r = tcu_dadd(a->s0, tcu_dmul(a->s1, torc_philox_normal(a->seed, a->offset, (uint64_t)linear)));
        break;
    case TORC_OP_RAND_INT: {  // a + floor(u * (b - a)) in uint64: the range may exceed int64
        const double u = torc_philox_uniform(a->seed, a->offset, (uint64_t)linear);
        const uint64_t k = (uint64_t)floor(tcu_dmul(u, a->s1 - a->s0));
        tcu_store_i64(a->data[0], off[0], a->dt[0], (int64_t)((uint64_t)tcu_f64_to_i64(a->s0) + k));
        return;
    }
    default: r = 0; break;
    }
    tcu_store_f64(a->data[0], off[0], a->dt[0], r);
}

TCU_HDI void tcu_ew_generic_f64(const tcu_ew_args *a, const int64_t *off) {
    const int op = a->op;
    double r;
    switch (op) {
    case TORC_OP_COPY: r = tcu_load_f64(a->data[1], off[1], a->dt[1]); break;
    case TORC_OP_WHERE: tcu_ew_where(a, off); return;
    default: {
        const double x = tcu_load_f64(a->data[1], off[1], a->dt[1]);
        if (a->n_in == 1) {
            r = tcu_unary_f64(op, x, a);
        } else {
            const double y = tcu_load_f64(a->data[2], off[2], a->dt[2]);
            if (tcu_op_is_compare(op)) {
                tcu_store_i64(a->data[0], off[0], a->dt[0], tcu_compare_f64(op, x, y));
                return;
            }
            r = tcu_arith_f64(op, x, y, a);
        }
    }
    }
    tcu_store_f64(a->data[0], off[0], a->dt[0], r);
}

// alpha: tcu_alpha_f32(a) (the kernels compute it once per thread).
TCU_HDI void tcu_ew_generic_f32(const tcu_ew_args *a, const int64_t *off, float alpha) {
    const int op = a->op;
    float r;
    if (op == TORC_OP_COPY) {
        r = tcu_load_f32(a->data[1], off[1], a->dt[1]);
    } else if (op == TORC_OP_WHERE) {
        tcu_ew_where(a, off);
        return;
    } else {
        float x = tcu_load_f32(a->data[1], off[1], a->dt[1]);
        if (a->dt[1] != a->common) x = tcu_round_to(x, a->common);
        if (a->n_in == 1) {
            r = tcu_unary_f32(op, x, a);
        } else {
            float y = tcu_load_f32(a->data[2], off[2], a->dt[2]);
            if (a->dt[2] != a->common) y = tcu_round_to(y, a->common);
            if (tcu_op_is_compare(op)) {
                tcu_store_i64(a->data[0], off[0], a->dt[0], tcu_compare_f32(op, x, y));
                return;
            }
            r = tcu_arith_alpha_f32(op, x, y, a, alpha);
        }
    }
    tcu_store_f32(a->data[0], off[0], a->dt[0], r);
}

TCU_HDI void tcu_ew_generic_i64(const tcu_ew_args *a, const int64_t *off) {
    const int op = a->op;
    int64_t r;
    switch (op) {
    case TORC_OP_COPY: r = tcu_load_i64(a->data[1], off[1], a->dt[1]); break;
    case TORC_OP_WHERE: tcu_ew_where(a, off); return;
    case TORC_OP_LOGICAL_NOT: r = !tcu_load_bool(a->data[1], off[1], a->dt[1]); break;
    case TORC_OP_LOGICAL_AND:
        r = tcu_load_bool(a->data[1], off[1], a->dt[1]) && tcu_load_bool(a->data[2], off[2], a->dt[2]);
        break;
    case TORC_OP_LOGICAL_OR:
        r = tcu_load_bool(a->data[1], off[1], a->dt[1]) || tcu_load_bool(a->data[2], off[2], a->dt[2]);
        break;
    default: {
        const int64_t x = tcu_load_i64(a->data[1], off[1], a->dt[1]);
        if (a->n_in == 1) {
            r = tcu_unary_i64(op, x, a);
        } else {
            const int64_t y = tcu_load_i64(a->data[2], off[2], a->dt[2]);
            r = tcu_op_is_compare(op) ? (int64_t)tcu_compare_i64(op, x, y) : tcu_arith_i64(op, x, y, a);
        }
    }
    }
    tcu_store_i64(a->data[0], off[0], a->dt[0], r);
}

TCU_HDI void tcu_ew_f32(const tcu_ew_args *a, const int64_t *off, int64_t linear) {
    (void)linear;
    if (tcu_op_is_divmod(a->op)) tcu_ew_divmod(a, off, TCU_CT_F32);
    else if (a->op == TORC_OP_GELU_BACKWARD) tcu_ew_gelu_backward(a, off, TCU_CT_F32);
    else tcu_ew_generic_f32(a, off, tcu_alpha_f32(a));
}
TCU_HDI void tcu_ew_f64(const tcu_ew_args *a, const int64_t *off, int64_t linear) {
    (void)linear;
    if (tcu_op_is_divmod(a->op)) tcu_ew_divmod(a, off, TCU_CT_F64);
    else if (a->op == TORC_OP_GELU_BACKWARD) tcu_ew_gelu_backward(a, off, TCU_CT_F64);
    else tcu_ew_generic_f64(a, off);
}
TCU_HDI void tcu_ew_i64(const tcu_ew_args *a, const int64_t *off, int64_t linear) {
    (void)linear;
    if (tcu_op_is_divmod(a->op)) tcu_ew_divmod(a, off, TCU_CT_I64);
    else tcu_ew_generic_i64(a, off);
}

#ifdef __cplusplus
}
#endif
#endif
