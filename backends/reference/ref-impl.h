// backends/reference/ref-impl.h — internals shared by the reference backend's kernels: element
// load/store for every dtype (through convert.h), the strided N-d iterator, the thread-local error.
#ifndef TORC_REF_IMPL_H
#define TORC_REF_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <torc/backend.h>
#include <torc/convert.h>
#include <torc/plugin_error.h>

// ---- errors ----
// The thread-local last error of the backend (vtable.last_error). Returns status, so a kernel
// can `return ref_error(TORC_ERR_INDEX, "...")`.
TORC_PLUGIN_ERROR_DECLARE(ref)  // ref_error and ref_last_error, defined in entry.c

// ---- dtypes ----
static inline bool ref_is_float(torc_dtype dt) {
#ifdef TORC_TEST_EXTRA_ABI
    if (dt == TORC_DTYPE_TEST_EXTRA) return true;  // tests/abi's test build: a float32 in disguise
#endif
    return dt >= TORC_DTYPE_F64 && dt <= TORC_DTYPE_F8_E5M2;
}
static inline bool ref_is_valid_dtype(torc_dtype dt) { return (unsigned)dt < TORC_DTYPE_COUNT; }

// Dtype sets for the kernels' supports() checks, one bit per torc_dtype.
#define REF_DT(d) (1u << (d))
#define REF_DT_FLOAT (REF_DT(TORC_DTYPE_F64) | REF_DT(TORC_DTYPE_F32) | REF_DT(TORC_DTYPE_F16) | \
                      REF_DT(TORC_DTYPE_BF16) | REF_DT(TORC_DTYPE_F8_E4M3FN) | REF_DT(TORC_DTYPE_F8_E5M2))
#define REF_DT_INT (REF_DT(TORC_DTYPE_I64) | REF_DT(TORC_DTYPE_I32) | REF_DT(TORC_DTYPE_I16) | \
                    REF_DT(TORC_DTYPE_I8) | REF_DT(TORC_DTYPE_U8))
#define REF_DT_NUM (REF_DT_FLOAT | REF_DT_INT)
#ifdef TORC_TEST_EXTRA_ABI  // tests/abi's test build: its extra dtype is stored as a float32
#define REF_DT_ALL (REF_DT_NUM | REF_DT(TORC_DTYPE_BOOL) | REF_DT(TORC_DTYPE_TEST_EXTRA))
#else
#define REF_DT_ALL (REF_DT_NUM | REF_DT(TORC_DTYPE_BOOL))
#endif
static inline bool ref_dt_in(torc_dtype dt, uint32_t set) { return ref_is_valid_dtype(dt) && (set >> dt & 1u); }

// ---- scalar conversions (PyTorch on x86 semantics, no undefined behaviour) ----
// Float -> int64 as x86's cvttsd2si: truncation toward zero; NaN and out-of-range give INT64_MIN.
static inline int64_t ref_f2i64(double v) {
    return (v >= -0x1p63 && v < 0x1p63) ? (int64_t)v : INT64_MIN;
}
// Float -> int32 as cvttss2si/cvttsd2si with a 32-bit destination, which c10 uses for int32,
// int16 and int8 (the narrower ones then keep the low bits): NaN and out-of-range give INT32_MIN.
static inline int32_t ref_f2i32(double v) {
    return (v > -2147483649.0 && v < 2147483648.0) ? (int32_t)v : INT32_MIN;
}

// Loads element *p of dtype dt as a double (exact for every dtype except large int64).
static inline double ref_load_f(const void *p, torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_F64: { double v; memcpy(&v, p, 8); return v; }
    case TORC_DTYPE_F32: { float v; memcpy(&v, p, 4); return v; }
    case TORC_DTYPE_F16: { uint16_t v; memcpy(&v, p, 2); return torc_f16_to_f32(v); }
    case TORC_DTYPE_BF16: { uint16_t v; memcpy(&v, p, 2); return torc_bf16_to_f32(v); }
    case TORC_DTYPE_F8_E4M3FN: return torc_f8e4m3fn_to_f32(*(const uint8_t *)p);
    case TORC_DTYPE_F8_E5M2: return torc_f8e5m2_to_f32(*(const uint8_t *)p);
    case TORC_DTYPE_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case TORC_DTYPE_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case TORC_DTYPE_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case TORC_DTYPE_I8: return *(const int8_t *)p;
    case TORC_DTYPE_U8: return *(const uint8_t *)p;
    case TORC_DTYPE_BOOL: return *(const uint8_t *)p != 0;
#ifdef TORC_TEST_EXTRA_ABI
    case TORC_DTYPE_TEST_EXTRA: { float v; memcpy(&v, p, 4); return v; }
#endif
    default: return NAN;
    }
}

// Loads element *p as an int64: exact for integer and bool dtypes; floating values convert as
// PyTorch's cast to int64 does.
static inline int64_t ref_load_i(const void *p, torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    case TORC_DTYPE_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case TORC_DTYPE_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case TORC_DTYPE_I8: return *(const int8_t *)p;
    case TORC_DTYPE_U8: return *(const uint8_t *)p;
    case TORC_DTYPE_BOOL: return *(const uint8_t *)p != 0;
    default: return ref_f2i64(ref_load_f(p, dt));
    }
}

// Loads element *p as a truth value (x != 0; NaN is true).
static inline bool ref_load_b(const void *p, torc_dtype dt) {
    if (dt == TORC_DTYPE_BOOL || dt == TORC_DTYPE_U8 || dt == TORC_DTYPE_I8) return *(const uint8_t *)p != 0;
    if (ref_is_float(dt)) return ref_load_f(p, dt) != 0.0;
    return ref_load_i(p, dt) != 0;
}

// Stores an int64 into *p of dtype dt: integers wrap to the width (two's complement), bool is
// v != 0, floating dtypes round as c10 does (int64 -> float -> narrow).
static inline void ref_store_i(void *p, torc_dtype dt, int64_t v) {
    const uint64_t u = (uint64_t)v;
    switch (dt) {
    case TORC_DTYPE_F64: { double f = (double)v; memcpy(p, &f, 8); return; }
    case TORC_DTYPE_F32: { float f = (float)v; memcpy(p, &f, 4); return; }
    case TORC_DTYPE_F16: { uint16_t h = torc_f32_to_f16((float)v); memcpy(p, &h, 2); return; }
    case TORC_DTYPE_BF16: { uint16_t h = torc_f32_to_bf16((float)v); memcpy(p, &h, 2); return; }
    case TORC_DTYPE_F8_E4M3FN: *(uint8_t *)p = torc_f32_to_f8e4m3fn((float)v); return;
    case TORC_DTYPE_F8_E5M2: *(uint8_t *)p = torc_f32_to_f8e5m2((float)v); return;
    case TORC_DTYPE_I64: memcpy(p, &v, 8); return;
    case TORC_DTYPE_I32: { uint32_t w = (uint32_t)u; memcpy(p, &w, 4); return; }
    case TORC_DTYPE_I16: { uint16_t w = (uint16_t)u; memcpy(p, &w, 2); return; }
    case TORC_DTYPE_I8: case TORC_DTYPE_U8: *(uint8_t *)p = (uint8_t)u; return;
    case TORC_DTYPE_BOOL: *(uint8_t *)p = v != 0; return;
    default: return;
    }
}

// Stores a double into *p of dtype dt, rounding once: narrow floats go double -> float ->
// narrow (as c10), integers as PyTorch's float casts on x86, bool is v != 0 (NaN is true).
static inline void ref_store_f(void *p, torc_dtype dt, double v) {
    switch (dt) {
    case TORC_DTYPE_F64: memcpy(p, &v, 8); return;
    case TORC_DTYPE_F32: { float f = (float)v; memcpy(p, &f, 4); return; }
    case TORC_DTYPE_F16: { uint16_t h = torc_f32_to_f16((float)v); memcpy(p, &h, 2); return; }
    case TORC_DTYPE_BF16: { uint16_t h = torc_f32_to_bf16((float)v); memcpy(p, &h, 2); return; }
    case TORC_DTYPE_F8_E4M3FN: *(uint8_t *)p = torc_f32_to_f8e4m3fn((float)v); return;
    case TORC_DTYPE_F8_E5M2: *(uint8_t *)p = torc_f32_to_f8e5m2((float)v); return;
    case TORC_DTYPE_I64: case TORC_DTYPE_U8: ref_store_i(p, dt, ref_f2i64(v)); return;
    case TORC_DTYPE_I32: case TORC_DTYPE_I16: case TORC_DTYPE_I8: ref_store_i(p, dt, ref_f2i32(v)); return;
    case TORC_DTYPE_BOOL: *(uint8_t *)p = v != 0.0; return;
#ifdef TORC_TEST_EXTRA_ABI
    case TORC_DTYPE_TEST_EXTRA: { float f = (float)v; memcpy(p, &f, 4); return; }
#endif
    default: return;
    }
}

// v rounded to dt's precision and range (v itself for f64 and non-floating dtypes). PyTorch
// casts every input to the op's computation dtype before computing; this is that cast.
static inline double ref_round_to(double v, torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_F32: return (float)v;
    case TORC_DTYPE_F16: return torc_f16_to_f32(torc_f32_to_f16((float)v));
    case TORC_DTYPE_BF16: return torc_bf16_to_f32(torc_f32_to_bf16((float)v));
    case TORC_DTYPE_F8_E4M3FN: return torc_f8e4m3fn_to_f32(torc_f32_to_f8e4m3fn((float)v));
    case TORC_DTYPE_F8_E5M2: return torc_f8e5m2_to_f32(torc_f32_to_f8e5m2((float)v));
    default: return v;
    }
}

// The floating dtype two dtypes compare in when at least one is floating (torch.promote_types:
// a float beats an integer; f64 > f32 > the 16- and 8-bit formats; two different narrow ones
// meet in f32).
static inline torc_dtype ref_common_float(torc_dtype a, torc_dtype b) {
    if (!ref_is_float(a)) return b;
    if (!ref_is_float(b) || a == b) return a;
    if (a == TORC_DTYPE_F64 || b == TORC_DTYPE_F64) return TORC_DTYPE_F64;
    return TORC_DTYPE_F32;
}

// out = cast(in): the one element conversion COPY, WHERE and the index ops use.
static inline void ref_cast(void *dst, torc_dtype dst_dt, const void *src, torc_dtype src_dt) {
    if (dst_dt == src_dt) memcpy(dst, src, torc_abi_dtype_size(dst_dt));
    else if (ref_is_float(src_dt)) ref_store_f(dst, dst_dt, ref_load_f(src, src_dt));
    else ref_store_i(dst, dst_dt, ref_load_i(src, src_dt));
}

// Integer arithmetic that wraps like the fixed-width types PyTorch computes in (no signed
// overflow UB): results are later wrapped again to the out dtype's width.
static inline int64_t ref_wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t ref_wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t ref_wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
// PyTorch's integer pow (binary.c): by squaring with wraparound; negative exponents as powi_impl.
int64_t ref_ipow(int64_t base, int64_t exp);

// ---- blocks ----
// Elementwise loops convert a run in blocks of REF_BLOCK elements: one tight loop per dtype to
// load into doubles, one per op to compute, one to store. Same values as element by element,
// a few times faster (the dtype and opcode switches leave the inner loops).
#define REF_BLOCK 256
void ref_load_block_f(double *dst, const char *src, int64_t step, int64_t n, torc_dtype dt);
void ref_store_block_f(char *dst, int64_t step, const double *src, int64_t n, torc_dtype dt);
// Loads a block and rounds it to the computation dtype `to` (a no-op when from == to).
static inline void ref_load_block_as(double *dst, const char *src, int64_t step, int64_t n, torc_dtype from,
                                     torc_dtype to) {
    ref_load_block_f(dst, src, step, n, from);
    if (from != to && ref_is_float(to))
        for (int64_t i = 0; i < n; i++) dst[i] = ref_round_to(dst[i], to);
}

// ---- operands ----
int64_t ref_numel(const torc_operand *t);
// Validates an operand's structure: dtype, 0 <= ndim <= TORC_MAX_DIMS, shape >= 0,
// stride >= 0, data non-NULL when numel > 0. `what` names it in the message ("in0", "out").
int ref_check_operand(const torc_operand *t, const char *what);
// True when a flat loop over t's elements in row-major order can walk it with one step: 1 when
// t is contiguous (size-1 dims may have any stride), 0 when it repeats one element (a broadcast
// scalar). The fast paths of the elementwise kernels use it.
bool ref_flat_step(const torc_operand *t, int64_t *step);
// Fails unless a and b have the same ndim and shape.
int ref_check_same_shape(const torc_operand *a, const char *an, const torc_operand *b, const char *bn);
// Address of the element at multi-index idx (length t->ndim).
static inline char *ref_elem(const torc_operand *t, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
    return (char *)t->data + off * (int64_t)torc_abi_dtype_size(t->dtype);
}

// ---- the strided N-d iterator ----
// Walks a shape in row-major (logical) order over up to REF_MAX_OPERANDS operands that share
// it, handing each innermost run to a loop function. Dims of size 1 are dropped and adjacent
// dims that are contiguous for every operand are merged, so contiguous operands become one
// long run; dims are never reordered, so the visit order is always row-major (RNG indices,
// masked_select and argmax rely on that).
#define REF_MAX_OPERANDS (TORC_OP_MAX_INPUTS + 1)

typedef struct ref_iter {
    int nops;
    int ndim;                                         // >= 1 after coalescing
    int64_t numel;
    int64_t shape[TORC_MAX_DIMS];
    int64_t stride[REF_MAX_OPERANDS][TORC_MAX_DIMS];  // in bytes
    char *data[REF_MAX_OPERANDS];
} ref_iter;

// A run of n elements: operand k's element i is at ptr[k] + i * step[k] (bytes).
typedef void (*ref_loop_fn)(char *const *ptr, const int64_t *step, int64_t n, void *ctx);

// Sets up an iterator over `shape` (ndim dims) for nops operands: data pointer, element size
// and element strides (each of length ndim) per operand.
void ref_iter_init(ref_iter *it, int ndim, const int64_t *shape, int nops, char *const *data,
                   const size_t *elem_size, const int64_t *const *stride);
// The common case: operands that all have `shape`'s ndim (ops[k]->stride is used as is).
void ref_iter_ops(ref_iter *it, int ndim, const int64_t *shape, int nops, const torc_operand *const *ops);
void ref_iter_run(const ref_iter *it, ref_loop_fn fn, void *ctx);

// ---- kernels (one file per family; each returns TORC_OK or sets the error) ----
// A kernel's dtypes() says whether the op's dtype combination is implemented (no messages);
// run() checks shapes and params and computes. entry.c has already validated the opcode, the
// input count, each operand's structure, and dtypes().
typedef struct ref_kernel {
    const char *name;                     // PyTorch's name for messages ("add", "index_select")
    bool (*dtypes)(const torc_op *op);
    int (*run)(const torc_op *op);
} ref_kernel;

#define REF_KERNEL_DECL(fam) \
    bool ref_##fam##_dtypes(const torc_op *op); \
    int ref_##fam##_run(const torc_op *op);
REF_KERNEL_DECL(fill)
REF_KERNEL_DECL(copy)
REF_KERNEL_DECL(arange)
REF_KERNEL_DECL(linspace)
REF_KERNEL_DECL(random)
REF_KERNEL_DECL(unary)
REF_KERNEL_DECL(binary)
REF_KERNEL_DECL(where)
REF_KERNEL_DECL(reduce)
REF_KERNEL_DECL(minmax_dim)  // reduce.c
REF_KERNEL_DECL(softmax)
REF_KERNEL_DECL(matmul)
bool ref_matmul_rounded_dtypes(const torc_op *op);  // matmul.c: MATMUL_ROUNDED's (its run is ref_matmul_run)
REF_KERNEL_DECL(index)
REF_KERNEL_DECL(scaled_mm)
REF_KERNEL_DECL(pointwise)
REF_KERNEL_DECL(layer_norm)
REF_KERNEL_DECL(adam)
REF_KERNEL_DECL(attention)
REF_KERNEL_DECL(gelu_backward)
REF_KERNEL_DECL(cross_entropy)
#undef REF_KERNEL_DECL

// The kernel table entry of an opcode (entry.c), for messages naming the op.
const ref_kernel *ref_kernel_of(torc_opcode code);

#endif
