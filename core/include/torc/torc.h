// torc/torc.h — the public API: tensors, devices, dtypes and promotion, ops, views, autograd,
// accounting. PyTorch is the reference for every semantic question; this header says where
// torc differs and why.
//
// Conventions for every function below:
//  - A function returning torc_tensor* returns a NEW reference, or NULL on failure with
//    torc_last_error() set. Inside a scope (torc_scope_push) the scope owns that reference and
//    frees it at torc_scope_pop unless torc_keep() was called; outside any scope the caller
//    owns it and calls torc_release().
//  - A function returning torc_status returns TORC_OK (0) or an error code, and on error
//    leaves its arguments unchanged and sets torc_last_error().
//  - No function aborts or prints because of a caller's mistake.
//  - Dims may be negative (counted from the end), as in PyTorch.
//  - Shapes are (ndim, const int64_t *shape); TORC_SHAPE(4, 8) expands to both.
#ifndef TORC_TORC_H
#define TORC_TORC_H

#include <stdio.h>
#include "types.h"
#include "backend.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct torc_tensor torc_tensor;       // opaque, refcounted
typedef struct torc_device torc_device;       // opaque, lives as long as the process
typedef struct torc_generator torc_generator; // opaque Philox generator (seed, offset)

#define TORC_SHAPE(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
#define TORC_DIMS(...) (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__} // reduction dims
#define TORC_ALL_DIMS 0, NULL        // "reduce over every dim"
#define TORC_DIM_NONE INT32_MIN      // argmax/argmin over the flattened tensor

// ---- errors ----
// The status and message of the last failed call on this thread (TORC_OK / "" if none since
// torc_clear_error). The string stays valid until the next torc call on this thread.
// A NULL argument while an error is set returns that error unchanged: the NULL is most likely
// the result of a call that failed (torc_mse_loss(torc_module_forward(m, x), y)), and the first
// error of a chain is the one worth reading. Clear an error you have handled (torc_clear_error)
// before relying on "... is NULL" messages.
TORC_API torc_status torc_last_status(void);
TORC_API const char *torc_last_error(void);
TORC_API void torc_clear_error(void);
TORC_API const char *torc_status_name(torc_status s);  // "TORC_ERR_SHAPE"

// ---- dtypes and scalars ----
TORC_API const char *torc_dtype_name(torc_dtype d);    // PyTorch's: "float32", "bfloat16", ...
TORC_API size_t torc_dtype_size(torc_dtype d);         // bytes per element
TORC_API bool torc_dtype_is_floating(torc_dtype d);
TORC_API bool torc_dtype_is_integral(torc_dtype d);    // integers and bool (as torch, include_bool)
TORC_API bool torc_dtype_is_fp8(torc_dtype d);
TORC_API torc_status torc_dtype_from_name(const char *name, torc_dtype *out); // "float32"/"f32"
// Also accepted: PyTorch's aliases ("float", "double", "half", "long", "int", "short") and a
// "torch." prefix. TORC_ERR_INVALID_ARG for an unknown name.
TORC_API const char *torc_dtype_short_name(torc_dtype d); // "f32", "bf16", "f8_e4m3fn", "bool"
// torch.finfo for a floating dtype: lowest, largest finite value, eps (1 ulp above 1.0) and tiny
// (the smallest normal). Any output may be NULL. TORC_ERR_DTYPE for a non-floating dtype.
TORC_API torc_status torc_finfo(torc_dtype d, double *min, double *max, double *eps, double *tiny);
// torch.iinfo for an integer dtype (not bool: TORC_ERR_DTYPE, as torch). Outputs may be NULL.
TORC_API torc_status torc_iinfo(torc_dtype d, int64_t *min, int64_t *max);

// A scalar argument keeps the Python type it stands for, because promotion depends on it:
// int_tensor * 2 stays integer, int_tensor * 2.0 becomes the default float dtype.
// torc_s(2) makes an int scalar, torc_s(2.0) a float scalar, torc_s(b) of a bool variable a bool
// scalar. Careful: in C11 the macro `true` is the int 1, so torc_s(true) is an int scalar; write
// torc_scalar_b(true) (or torc_s((bool)1)).
typedef struct torc_scalar {
    torc_dtype kind;  // TORC_DTYPE_BOOL, TORC_DTYPE_I64 or TORC_DTYPE_F64
    double f;         // the value as a double (always set)
    int64_t i;        // the value as an integer (set for bool and int scalars)
} torc_scalar;
static inline torc_scalar torc_scalar_f(double v) { torc_scalar s = {TORC_DTYPE_F64, v, (int64_t)0}; return s; }
static inline torc_scalar torc_scalar_i(int64_t v) { torc_scalar s = {TORC_DTYPE_I64, (double)v, v}; return s; }
static inline torc_scalar torc_scalar_b(bool v) { torc_scalar s = {TORC_DTYPE_BOOL, v ? 1.0 : 0.0, v ? 1 : 0}; return s; }
#define torc_s(x) _Generic((x), double: torc_scalar_f, float: torc_scalar_f, bool: torc_scalar_b, \
                           default: torc_scalar_i)(x)

// torch.promote_types. Mixing an fp8 dtype with a different dtype is an error (returns
// TORC_ERR_DTYPE): torc never promotes fp8 implicitly, cast first.
TORC_API torc_status torc_promote_types(torc_dtype a, torc_dtype b, torc_dtype *out);
// torch.result_type for an op's operands: tensors (dimensioned ones outrank zero-dim ones) and
// scalars (which only lift the category, never the width). A float scalar counts as the
// default dtype. TORC_ERR_INVALID_ARG for no operands or a NULL tensor; TORC_ERR_DTYPE when
// the winning groups would promote fp8 with another dtype.
TORC_API torc_status torc_result_type(int n_tensors, const torc_tensor *const *tensors,
                                      int n_scalars, const torc_scalar *scalars, torc_dtype *out);
// torch.get_default_dtype (float32 unless changed).
TORC_API torc_dtype torc_get_default_dtype(void);
// The default is process-wide (as in PyTorch) and safe to read and set from any thread.
TORC_API torc_status torc_set_default_dtype(torc_dtype d); // f64/f32/f16/bf16, else TORC_ERR_DTYPE

// ---- devices ----
// Names: "cpu" (the default host backend), "cuda" / "cuda:N", or a backend by name
// ("reference", "onednn", "reference:0"). The backend is loaded on first use. The returned
// pointer is borrowed and valid until the process ends; NULL on failure (the message lists
// every file tried and why it failed).
TORC_API torc_device *torc_device_get(const char *name);
// The default device: TORC_BACKEND's backend if set, else the best that loads (cuda with a
// device, else onednn, else reference). NULL on failure.
TORC_API torc_device *torc_default_device(void);
TORC_API torc_status torc_set_default_device(torc_device *dev); // where factories allocate
TORC_API const char *torc_device_name(const torc_device *dev);  // "cpu", "cuda:0", "reference"
TORC_API const char *torc_device_backend_name(const torc_device *dev); // "onednn"
TORC_API torc_status torc_device_info_get(const torc_device *dev, torc_device_info *info);
TORC_API torc_status torc_device_synchronize(torc_device *dev);
// Loads backend name (as torc_device_get would on first use) with options: a NULL-terminated
// array of "key=value" strings handed to its init (see each backend's README section; the
// backend's environment variables are the defaults they override). TORC_ERR_BACKEND (the
// backend's message naming the key) for an option it does not take; TORC_ERR_INVALID_ARG if the
// backend is already loaded, since options apply only to its one instance.
TORC_API torc_status torc_backend_load(const char *name, const char *const *options);
// Allocator statistics of dev's backend in bytes (a caching allocator's: live blocks, blocks held,
// the most held), or, for a backend without its own (host backends), torc's counters of live
// tensor bytes: allocated = reserved = total in use, peak_reserved = total peak. Any may be NULL.
TORC_API torc_status torc_device_memory_stats(const torc_device *dev, uint64_t *allocated, uint64_t *reserved,
                                              uint64_t *peak_reserved);
// Shuts every loaded backend down (their shutdown(ctx)), once; registered with atexit when the
// first backend loads, so calling it is needed only to release devices before exit. No torc call
// may run on another thread meanwhile, and none may follow it, except that tensors may still be
// released and threads that used torc may exit: their memory is then dropped, not freed (the
// backends are gone). The exit handler never waits: if torc's registry is locked at exit (a
// plugin's constructor called exit()), nothing is shut down.
TORC_API void torc_shutdown(void);
// The backend ABI version (major << 16 | minor) dev's plugin was built with.
TORC_API uint32_t torc_device_backend_abi(const torc_device *dev);

// ---- single backend ops (for backend authors and tools such as torc-xcheck) ----
// One op of backend.h's contract with tensors as operands: no broadcasting, promotion, autograd or
// allocation; the operands are as backend.h says for the opcode (out[] already allocated). It
// goes through the same gate as every frontend: an opcode or dtype newer than dev's plugin never
// reaches it. Every tensor must be on dev. The core checks the operand counts and the shapes the
// contract relates (TORC_ERR_SHAPE / TORC_ERR_INVALID_ARG naming the operand, nothing run); the
// backend checks dtypes and values (index bounds, mask counts) as it does for the frontends.
// Each output's version counter is bumped.
typedef struct torc_op_call {
    torc_opcode code;
    int n_in, n_out;
    const torc_tensor *in[TORC_OP_MAX_INPUTS];
    torc_tensor *out[TORC_OP_MAX_OUTPUTS];
    torc_op_params params;
} torc_op_call;
// Flags of torc_run_op. TORC_RUN_NATIVE: only dev's own backend runs it: TORC_ERR_NOT_SUPPORTED
// where it declines, instead of the reference backend running it on dev's memory (host backends).
#define TORC_RUN_NATIVE 1u
TORC_API torc_status torc_run_op(torc_device *dev, const torc_op_call *call, unsigned flags);
// TORC_OK when dev's own backend takes call (torc_run_op with TORC_RUN_NATIVE would run it),
// TORC_ERR_NOT_SUPPORTED with the backend's reason as the last error when it declines.
TORC_API torc_status torc_op_supported(torc_device *dev, const torc_op_call *call);

// ---- random numbers ----
// A generator is (seed, offset); each draw of n numbers uses counters offset..offset+n-1 and
// advances offset by n, so the same seed gives the same numbers on every backend.
TORC_API void torc_manual_seed(uint64_t seed);            // the default generator
TORC_API torc_generator *torc_default_generator(void);    // borrowed
TORC_API torc_generator *torc_generator_new(uint64_t seed); // caller frees
TORC_API void torc_generator_free(torc_generator *g);
TORC_API void torc_generator_get_state(const torc_generator *g, uint64_t *seed, uint64_t *offset);
TORC_API void torc_generator_set_state(torc_generator *g, uint64_t seed, uint64_t offset);

// ---- creation (on the default device; gen NULL means the default generator) ----
// From a C array of `dtype` elements, row-major, copied.
TORC_API torc_tensor *torc_tensor_from(const void *data, int ndim, const int64_t *shape, torc_dtype dtype);
TORC_API torc_tensor *torc_empty(int ndim, const int64_t *shape, torc_dtype dtype);
TORC_API torc_tensor *torc_zeros(int ndim, const int64_t *shape, torc_dtype dtype);
TORC_API torc_tensor *torc_ones(int ndim, const int64_t *shape, torc_dtype dtype);
TORC_API torc_tensor *torc_full(int ndim, const int64_t *shape, double value, torc_dtype dtype);
TORC_API torc_tensor *torc_scalar_tensor(double value, torc_dtype dtype); // zero-dim
TORC_API torc_tensor *torc_zeros_like(const torc_tensor *t);
TORC_API torc_tensor *torc_ones_like(const torc_tensor *t);
TORC_API torc_tensor *torc_empty_like(const torc_tensor *t);
TORC_API torc_tensor *torc_full_like(const torc_tensor *t, double value);
TORC_API torc_tensor *torc_arange(double start, double end, double step, torc_dtype dtype);
TORC_API torc_tensor *torc_linspace(double start, double end, int64_t steps, torc_dtype dtype);
TORC_API torc_tensor *torc_eye(int64_t n, int64_t m, torc_dtype dtype);
TORC_API torc_tensor *torc_rand(int ndim, const int64_t *shape, torc_dtype dtype, torc_generator *gen);
TORC_API torc_tensor *torc_randn(int ndim, const int64_t *shape, torc_dtype dtype, torc_generator *gen);
TORC_API torc_tensor *torc_randint(int64_t low, int64_t high, int ndim, const int64_t *shape,
                                   torc_dtype dtype, torc_generator *gen);
// In-place initialisers (bump the version counter).
TORC_API torc_status torc_uniform_(torc_tensor *t, double a, double b, torc_generator *gen);
TORC_API torc_status torc_normal_(torc_tensor *t, double mean, double std, torc_generator *gen);
// torch.nn.init.trunc_normal_: normal(mean, std) truncated to [a, b] by inverse-CDF sampling.
TORC_API torc_status torc_trunc_normal_(torc_tensor *t, double mean, double std, double a, double b,
                                        torc_generator *gen);

// ---- ownership ----
TORC_API torc_tensor *torc_retain(torc_tensor *t);  // +1 reference; returns t
TORC_API void torc_release(torc_tensor *t);          // -1 reference; NULL is ignored
// Scopes (autorelease pools, per thread, nestable): tensors returned while a scope is open are
// owned by it and released at its pop. torc_keep(t) takes one reference out of the scope:
// at pop it passes to the enclosing scope, or to the caller when no scope encloses.
TORC_API void torc_scope_push(void);
TORC_API void torc_scope_pop(void);
TORC_API torc_tensor *torc_keep(torc_tensor *t);

// ---- inspection ----
TORC_API int torc_ndim(const torc_tensor *t);
TORC_API const int64_t *torc_shape(const torc_tensor *t);     // ndim entries, borrowed
TORC_API const int64_t *torc_strides(const torc_tensor *t);   // in elements, borrowed
TORC_API int64_t torc_size(const torc_tensor *t, int dim);    // -1 (and an error) if dim is bad
TORC_API int64_t torc_stride(const torc_tensor *t, int dim);
TORC_API int64_t torc_storage_offset(const torc_tensor *t);
TORC_API int64_t torc_numel(const torc_tensor *t);
TORC_API size_t torc_element_size(const torc_tensor *t);
TORC_API size_t torc_nbytes(const torc_tensor *t);            // numel * element_size
TORC_API torc_dtype torc_get_dtype(const torc_tensor *t);
TORC_API torc_device *torc_get_device(const torc_tensor *t);
TORC_API bool torc_is_contiguous(const torc_tensor *t);
TORC_API bool torc_same_storage(const torc_tensor *a, const torc_tensor *b);
TORC_API uint64_t torc_version(const torc_tensor *t);         // storage version counter
// The value of a one-element tensor (any ndim), as double / int64.
TORC_API torc_status torc_item(const torc_tensor *t, double *out);
TORC_API torc_status torc_item_i64(const torc_tensor *t, int64_t *out);
// Copies the elements in row-major order, in the tensor's dtype, into dst (nbytes >= torc_nbytes).
TORC_API torc_status torc_copy_to_host(const torc_tensor *t, void *dst, size_t nbytes);
// PyTorch-like repr ("tensor([[1., 2.],\n        [3., 4.]])"); a malloc'ed string, caller
// frees with free(). NULL on failure.
TORC_API char *torc_repr(const torc_tensor *t);
TORC_API torc_status torc_print(const torc_tensor *t, FILE *f);

// ---- views (share storage with their base) ----
TORC_API torc_tensor *torc_view(torc_tensor *t, int ndim, const int64_t *shape); // one -1 allowed
TORC_API torc_tensor *torc_reshape(torc_tensor *t, int ndim, const int64_t *shape); // copies only when it must
TORC_API torc_tensor *torc_transpose(torc_tensor *t, int dim0, int dim1);
TORC_API torc_tensor *torc_permute(torc_tensor *t, int ndim, const int *dims);
TORC_API torc_tensor *torc_select(torc_tensor *t, int dim, int64_t index);
// Python's t[start:end:step] along dim (clamped like Python; step > 0). end = INT64_MAX for ':'.
TORC_API torc_tensor *torc_slice(torc_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
TORC_API torc_tensor *torc_narrow(torc_tensor *t, int dim, int64_t start, int64_t length);
TORC_API torc_tensor *torc_expand(torc_tensor *t, int ndim, const int64_t *shape); // -1 keeps a size
TORC_API torc_tensor *torc_expand_as(torc_tensor *t, const torc_tensor *other);
TORC_API torc_tensor *torc_unsqueeze(torc_tensor *t, int dim);
TORC_API torc_tensor *torc_squeeze(torc_tensor *t, int dim);  // no-op if size(dim) != 1
TORC_API torc_tensor *torc_squeeze_all(torc_tensor *t);
TORC_API torc_tensor *torc_flatten(torc_tensor *t, int start_dim, int end_dim);
TORC_API torc_tensor *torc_as_strided(torc_tensor *t, int ndim, const int64_t *shape,
                                      const int64_t *stride, int64_t storage_offset);
TORC_API torc_tensor *torc_detach(torc_tensor *t);
TORC_API torc_tensor *torc_contiguous(torc_tensor *t);  // t itself (new ref) if already contiguous
TORC_API torc_tensor *torc_clone(const torc_tensor *t);

// ---- moves ----
// The same tensor (a new reference) when nothing changes, else a new tensor. Between
// host-memory backends to_device shares the storage and copies nothing.
TORC_API torc_tensor *torc_to_device(torc_tensor *t, torc_device *dev);
TORC_API torc_tensor *torc_to_dtype(torc_tensor *t, torc_dtype dtype);

// ---- copies (new storage) ----
TORC_API torc_tensor *torc_index_select(const torc_tensor *t, int dim, const torc_tensor *index);
TORC_API torc_tensor *torc_gather(const torc_tensor *t, int dim, const torc_tensor *index);
TORC_API torc_tensor *torc_masked_select(const torc_tensor *t, const torc_tensor *mask);
// cond is bool or uint8 (nonzero is true; PyTorch deprecates uint8 with a warning, torc accepts
// it silently); anything else is TORC_ERR_DTYPE.
TORC_API torc_tensor *torc_where(const torc_tensor *cond, const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_cat(int n, torc_tensor *const *tensors, int dim);
TORC_API torc_tensor *torc_stack(int n, torc_tensor *const *tensors, int dim);
TORC_API torc_tensor *torc_triu(const torc_tensor *t, int64_t k);
// Out-of-place scatters (the backward of index_select, gather and masked_select); each returns
// a copy of self with source added in: torch.index_add (source.size(dim) == numel(index), the
// other sizes equal self's), torch.scatter_add (index, self and src of equal ndim; index no
// larger than src, nor than self outside dim) and torch.masked_scatter (mask broadcastable to
// self; source's first count(mask) elements fill the true positions in row-major order).
// Index tensors are i64; source has self's dtype. TORC_ERR_DTYPE / TORC_ERR_SHAPE otherwise.
TORC_API torc_tensor *torc_index_add(const torc_tensor *self, int dim, const torc_tensor *index,
                                     const torc_tensor *source);
TORC_API torc_tensor *torc_scatter_add(const torc_tensor *self, int dim, const torc_tensor *index,
                                       const torc_tensor *src);
TORC_API torc_tensor *torc_masked_scatter(const torc_tensor *self, const torc_tensor *mask,
                                          const torc_tensor *source);
TORC_API torc_tensor *torc_tril(const torc_tensor *t, int64_t k);

// ---- unary ops ----
TORC_API torc_tensor *torc_neg(const torc_tensor *t);
TORC_API torc_tensor *torc_abs(const torc_tensor *t);
TORC_API torc_tensor *torc_sign(const torc_tensor *t);
TORC_API torc_tensor *torc_sqrt(const torc_tensor *t);
TORC_API torc_tensor *torc_rsqrt(const torc_tensor *t);
TORC_API torc_tensor *torc_square(const torc_tensor *t);
TORC_API torc_tensor *torc_reciprocal(const torc_tensor *t);
TORC_API torc_tensor *torc_exp(const torc_tensor *t);
TORC_API torc_tensor *torc_log(const torc_tensor *t);
TORC_API torc_tensor *torc_sin(const torc_tensor *t);
TORC_API torc_tensor *torc_cos(const torc_tensor *t);
TORC_API torc_tensor *torc_tanh(const torc_tensor *t);
TORC_API torc_tensor *torc_sigmoid(const torc_tensor *t);
TORC_API torc_tensor *torc_relu(const torc_tensor *t);
TORC_API torc_tensor *torc_gelu(const torc_tensor *t, bool approximate_tanh);
TORC_API torc_tensor *torc_erf(const torc_tensor *t);
TORC_API torc_tensor *torc_erfinv(const torc_tensor *t);
TORC_API torc_tensor *torc_logical_not(const torc_tensor *t);
TORC_API torc_tensor *torc_pow_scalar(const torc_tensor *t, torc_scalar exponent);

// ---- binary ops (broadcasting; result dtype by torc_result_type) ----
// Operands are read as PyTorch's kernels read them: a zero-dim tensor or scalar is first cast to
// the op's dtype (u8 tensor maximum tensor(-5) is 251; u8 / 300 divides by 300.0f, the default
// float), except that mul and div of an f16/bf16 tensor by a one-element right operand compute
// in float32 ("opmath": f16 x * 0.1 is round_f16(float(x) * 0.1f)), and s / a is
// reciprocal(a) * s, Python's Tensor.__rdiv__.
TORC_API torc_tensor *torc_add(const torc_tensor *a, const torc_tensor *b);
// a + alpha * b as torch.add(a, b, alpha=alpha): alpha is cast to the computation dtype (for f16
// and bf16 through float: 0.1 becomes 0.0999755859375 in f16) and the floating result is one
// fused multiply-add in float (f32, f16, bf16) or double (f64), rounded once to the dtype, which
// is PyTorch's CPU kernel bit for bit (for f16/bf16 its vectorised path: PyTorch itself rounds
// alpha * b to the dtype first on strided operands and on the last few elements of a contiguous
// run). TORC_ERR_INVALID_ARG with PyTorch's message for a floating alpha with an integer or bool
// result ("For integral input tensors, argument alpha must not be a floating point number."), a
// bool alpha with a non-bool result, and an alpha the dtype cannot hold ("value cannot be
// converted to type c10::Half without overflow"; uint8 takes -255..255, which wraps).
TORC_API torc_tensor *torc_add_scaled(const torc_tensor *a, const torc_tensor *b, torc_scalar alpha);
TORC_API torc_tensor *torc_sub(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_mul(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_div(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_pow(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_maximum(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_minimum(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_eq(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_ne(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_lt(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_le(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_gt(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_ge(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_logical_and(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_logical_or(const torc_tensor *a, const torc_tensor *b);
// Scalar right-hand sides (tensor op scalar) and the reversed forms (scalar op tensor).
TORC_API torc_tensor *torc_add_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_sub_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_mul_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_div_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_rsub_scalar(const torc_tensor *a, torc_scalar s); // s - a
TORC_API torc_tensor *torc_rdiv_scalar(const torc_tensor *a, torc_scalar s); // s / a
TORC_API torc_tensor *torc_eq_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_ne_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_lt_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_le_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_gt_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_ge_scalar(const torc_tensor *a, torc_scalar s);
// Python's // and % and C's fmod, as torch.floor_divide, torch.remainder and torch.fmod (with a
// scalar: the _scalar forms), broadcasting, the result dtype by torc_result_type:
//  - floor_divide rounds the quotient toward -inf (-5 // 3 is -2; floats by PyTorch's
//    div_floor_floating: 1 // 0.0 is inf, -1 // inf is -1, inf // 2 is nan);
//  - remainder is a - floor(a / b) * b with the sign of b (-5 % 3 is 1, 5 % -3 is -1, -4.0 % 2
//    is -0.0, -1 % inf is inf); fmod is a - trunc(a / b) * b with the sign of a (-5 fmod 3 is -2);
//  - integers compute exactly and wrap (INT64_MIN // -1 is INT64_MIN, INT64_MIN % -1 is 0); an
//    integer division by zero fails with PyTorch's "ZeroDivisionError" (TORC_ERR_INVALID_ARG;
//    an empty tensor has nothing to divide: no error), float division by zero gives inf / nan;
//  - bool results are TORC_ERR_DTYPE ('"div_floor_cpu" not implemented for 'Bool'', likewise
//    "remainder_cpu", "fmod_cpu");
//  - f16/bf16 by a scalar or one-element right operand compute in float32 (opmath), as mul/div.
// Autograd as PyTorch: remainder and fmod pass the gradient to a (RemainderBackward0/1,
// FmodBackward0/1; the tensor forms give b the gradient -grad * floor(a / b), resp.
// -grad * trunc(a / b)); floor_divide has no derivative: its result requires grad when an input
// does, and backward through it fails with "derivative for aten::floor_divide is not implemented".
TORC_API torc_tensor *torc_floor_divide(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_floor_divide_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_remainder(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_remainder_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_fmod(const torc_tensor *a, const torc_tensor *b);
TORC_API torc_tensor *torc_fmod_scalar(const torc_tensor *a, torc_scalar s);
// torch.clamp_min / clamp_max (torch.maximum takes tensors only): TORC_ERR_INVALID_ARG with
// PyTorch's message for a scalar the result dtype cannot hold where the result would need it
// ("Clamp min value 1000 is outside the representable range of Char"; for floating dtypes,
// "value cannot be converted to type c10::Half without overflow").
TORC_API torc_tensor *torc_maximum_scalar(const torc_tensor *a, torc_scalar s);
TORC_API torc_tensor *torc_minimum_scalar(const torc_tensor *a, torc_scalar s);

// ---- fused pointwise ops (one pass each, rounded as PyTorch's CPU kernels round them) ----
// torch.addcmul: self + value * a * b, and torch.addcdiv: self + value * a / b. The three tensors
// broadcast; the result dtype is torc_result_type of the three (value takes no part). addcdiv
// refuses integer a and b together (TORC_ERR_DTYPE, PyTorch's "Integer division with addcdiv is
// no longer supported..."); a bool or fp8 result is TORC_ERR_DTYPE ('"addcmul_cpu_out" not
// implemented for 'Bool''). Differentiable: AddcmulBackward0 / AddcdivBackward0.
TORC_API torc_tensor *torc_addcmul(const torc_tensor *self, const torc_tensor *a, const torc_tensor *b,
                                   torc_scalar value);
TORC_API torc_tensor *torc_addcdiv(const torc_tensor *self, const torc_tensor *a, const torc_tensor *b,
                                   torc_scalar value);
// torch.lerp with a scalar weight: self + weight * (end - self), broadcast. self and end must have
// the same floating dtype (TORC_ERR_DTYPE: "expected dtype float for `end` but got dtype
// c10::Half"). Differentiable: LerpBackward0.
TORC_API torc_tensor *torc_lerp(const torc_tensor *self, const torc_tensor *end, torc_scalar weight);

// ---- in-place ops (bump the version counter; the result must fit self's dtype and shape,
//      as PyTorch: "result type Float can't be cast to the desired output type Long"; in grad
//      mode they record history as PyTorch does, see "autograd" below) ----
TORC_API torc_status torc_copy_(torc_tensor *self, const torc_tensor *src); // broadcast, cast
TORC_API torc_status torc_fill_(torc_tensor *self, torc_scalar value);
TORC_API torc_status torc_zero_(torc_tensor *self);
TORC_API torc_status torc_add_(torc_tensor *self, const torc_tensor *other);
TORC_API torc_status torc_add_scaled_(torc_tensor *self, const torc_tensor *other, torc_scalar alpha);
TORC_API torc_status torc_sub_(torc_tensor *self, const torc_tensor *other);
TORC_API torc_status torc_mul_(torc_tensor *self, const torc_tensor *other);
TORC_API torc_status torc_div_(torc_tensor *self, const torc_tensor *other);
TORC_API torc_status torc_add_scalar_(torc_tensor *self, torc_scalar s);
TORC_API torc_status torc_sub_scalar_(torc_tensor *self, torc_scalar s);
TORC_API torc_status torc_mul_scalar_(torc_tensor *self, torc_scalar s);
TORC_API torc_status torc_div_scalar_(torc_tensor *self, torc_scalar s);
TORC_API torc_status torc_pow_scalar_(torc_tensor *self, torc_scalar s);
TORC_API torc_status torc_neg_(torc_tensor *self);
TORC_API torc_status torc_sqrt_(torc_tensor *self);
TORC_API torc_status torc_exp_(torc_tensor *self);
TORC_API torc_status torc_relu_(torc_tensor *self);
TORC_API torc_status torc_sigmoid_(torc_tensor *self);
TORC_API torc_status torc_maximum_(torc_tensor *self, const torc_tensor *other);
// self += value * a * b ; self += value * a / b ; self += weight * (end - self)
// (torch.addcmul_ / addcdiv_ / lerp_, one fused pass each, as the out-of-place forms above)
TORC_API torc_status torc_addcmul_(torc_tensor *self, const torc_tensor *a, const torc_tensor *b, torc_scalar value);
TORC_API torc_status torc_addcdiv_(torc_tensor *self, const torc_tensor *a, const torc_tensor *b, torc_scalar value);
TORC_API torc_status torc_lerp_(torc_tensor *self, const torc_tensor *end, torc_scalar weight);

// ---- reductions (dims: n_dims entries, or TORC_ALL_DIMS) ----
TORC_API torc_tensor *torc_sum(const torc_tensor *t, int n_dims, const int *dims, bool keepdim);
TORC_API torc_tensor *torc_mean(const torc_tensor *t, int n_dims, const int *dims, bool keepdim);
TORC_API torc_tensor *torc_prod(const torc_tensor *t, int n_dims, const int *dims, bool keepdim);
TORC_API torc_tensor *torc_amax(const torc_tensor *t, int n_dims, const int *dims, bool keepdim); // torch.amax
TORC_API torc_tensor *torc_amin(const torc_tensor *t, int n_dims, const int *dims, bool keepdim);
TORC_API torc_tensor *torc_argmax(const torc_tensor *t, int dim, bool keepdim); // dim may be TORC_DIM_NONE
TORC_API torc_tensor *torc_argmin(const torc_tensor *t, int dim, bool keepdim);
// torch.max(t, dim, keepdim) / torch.min: *values (t's dtype) and *indices (i64) of the largest /
// smallest element along dim, each t's shape without dim (keepdim: with it as size 1; a zero-dim
// t gives zero-dim results). The first index of the extreme wins a tie (-0.0 and +0.0 tie); NaN
// is the extreme (the first NaN wins); values holds t's element at that index, bit for bit.
// Every dtype but fp8 (a zero-dim fp8 tensor is taken, as PyTorch takes it). New references in
// *values and *indices; either pointer may be NULL to skip that result. Autograd: values only
// (the gradient goes to the indices, zero elsewhere); indices are not differentiable.
// Errors, with nothing written to *values / *indices: TORC_ERR_INDEX for dim out of range or an
// empty dim ("max(): Expected reduction dim 1 to have non-zero size."), TORC_ERR_DTYPE for fp8.
TORC_API torc_status torc_max_dim(const torc_tensor *t, int dim, bool keepdim, torc_tensor **values,
                                  torc_tensor **indices);
TORC_API torc_status torc_min_dim(const torc_tensor *t, int dim, bool keepdim, torc_tensor **values,
                                  torc_tensor **indices);
TORC_API torc_tensor *torc_var(const torc_tensor *t, int n_dims, const int *dims, double correction, bool keepdim);
TORC_API torc_tensor *torc_std(const torc_tensor *t, int n_dims, const int *dims, double correction, bool keepdim);
TORC_API torc_tensor *torc_norm(const torc_tensor *t, double p, int n_dims, const int *dims, bool keepdim);
TORC_API torc_tensor *torc_logsumexp(const torc_tensor *t, int n_dims, const int *dims, bool keepdim);
TORC_API torc_tensor *torc_softmax(const torc_tensor *t, int dim);
TORC_API torc_tensor *torc_log_softmax(const torc_tensor *t, int dim);
// torch.max(t) / torch.min(t) over all elements.
#define torc_max_all(t) torc_amax((t), TORC_ALL_DIMS, false)
#define torc_min_all(t) torc_amin((t), TORC_ALL_DIMS, false)

// ---- linear algebra ----
// torch.matmul: 1-D, 2-D, batched with broadcast batch dims; strided operands are passed to
// the backend as they are.
TORC_API torc_tensor *torc_matmul(const torc_tensor *a, const torc_tensor *b);
// matmul writing a wider output dtype (bf16 x bf16 -> f32), for mixed precision.
TORC_API torc_tensor *torc_matmul_out_dtype(const torc_tensor *a, const torc_tensor *b, torc_dtype out_dtype);
// F.linear in torc's weight layout: x (..., in) @ weight (in, out) + bias (out); bias may be NULL.
// Under bf16 / f16 / fp8 autocast the bias is cast to the matmul's 16-bit result too, as PyTorch's
// autocast casts every floating argument of linear, so the result keeps that dtype (the product and
// the sum are each rounded, where PyTorch's fused epilogue rounds once). Linear's forward and the GPT's.
TORC_API torc_tensor *torc_linear(const torc_tensor *x, const torc_tensor *weight, const torc_tensor *bias);

// ---- named dimensions (einsum; einops' rearrange, reduce and repeat) ----
// Patterns name axes instead of counting them: "batch seq hidden" rather than dims 0, 1, 2.
// An axis name is a C identifier that neither starts nor ends with '_'; names are separated
// by whitespace. "..." stands for any number of leading (or middle) dims. All four functions
// compose existing ops (views, reshape, permute, expand, matmul, reductions), so autograd
// flows through them and FLOPs are counted by the ops they run. Errors name the pattern and
// use einops' wording: TORC_ERR_INVALID_ARG for a malformed pattern or axes string, a
// duplicate or unknown axis name or a length that cannot be inferred; TORC_ERR_SHAPE when the
// tensor's shape does not fit the pattern. On error nothing is changed or printed.

// torch.einsum / einops.einsum over n operands (n >= 1) of one dtype and device:
//   torc_einsum("batch seq1 hidden, batch seq2 hidden -> batch seq1 seq2", 2, (torc_tensor *[]){x, y})
// TORC_EINSUM counts the operands for you (any number of them):
//   TORC_EINSUM("b i h, b j h -> b i j", x, y)
// Operand patterns are separated by ',', the output follows "->". An axis named in several
// operands must have the same size in each, or size 1 (which broadcasts, as in torch). An
// axis absent from the output is summed over. A name repeated within one operand takes the
// diagonal ("i i -> i"); a name repeated in the output is an error. "..." covers the dims not
// named, right-aligned and broadcast across operands; if the output omits it, those dims are
// summed. An equation without any whitespace is read torch-style, one letter per axis
// ("bih,bjh->bij"), and may then omit "->" (the output is then "..." followed by the letters
// used exactly once, in ASCII order, as torch does).
// Operands are contracted pairwise from left to right; each contraction is one batched
// torc_matmul on permuted views, reshaped only where axes must be merged (a copy only when
// the strides do not allow a view); a product that sums nothing (outer, elementwise) is one
// broadcasting torc_mul instead. Axes in only one operand and not in the output are summed
// first with torc_sum. A single operand without sums gives a view ("i j -> j i", "i i -> i").
// Returns a new tensor (see the conventions above); errors as the section says, plus
// TORC_ERR_DTYPE for operands of different dtypes (or a dtype torc_matmul refuses).
TORC_API torc_tensor *torc_einsum(const char *equation, int n, torc_tensor *const *operands);
#define TORC_EINSUM(equation, ...) \
    torc_einsum((equation), (int)(sizeof((torc_tensor *[]){__VA_ARGS__}) / sizeof(torc_tensor *)), \
                (torc_tensor *[]){__VA_ARGS__})

// einops.rearrange: "left -> right", where each side lists the tensor's dims; a dim may be a
// group of axes in parentheses, "(heads hidden)", which splits (left) or merges (right) them.
//   torc_rearrange(x, "... (heads hidden) -> ... heads hidden", "heads=2")   split
//   torc_rearrange(y, "b s heads hidden -> b s (heads hidden)", NULL)        merge
//   torc_rearrange(z, "b c h w -> b h w c", NULL)                           permute
//   torc_rearrange(z, "b 1 h w -> b h w ()", NULL)                          remove / insert
// "1" or "()" is a dim of size 1 (removed on the left, inserted on the right). Both sides
// must name the same axes. axes gives lengths the tensor's shape does not determine:
// "heads=2" or "h=2, w=3" (commas and/or spaces between entries), or NULL / "" for none; each
// named axis must appear in the pattern, and a group may hold at most one axis of unknown
// length. The result is a view of x whenever the strides allow (always for split, permute,
// insert and remove); merging axes whose strides do not line up copies, as torc_reshape does.
// With nothing to do it returns x itself (a new reference). After splitting, a pattern may
// have at most TORC_MAX_DIMS axes on each side (else TORC_ERR_INVALID_ARG).
TORC_API torc_tensor *torc_rearrange(torc_tensor *x, const char *pattern, const char *axes);
// einops.reduce: rearrange, with the axes the right side leaves out reduced by reduction,
// one of "sum", "mean", "max", "min", "prod" (torc_sum, torc_mean, torc_amax, torc_amin,
// torc_prod: dtype rules and errors as theirs, e.g. "mean" of an integer tensor is
// TORC_ERR_DTYPE). Anonymous lengths may name reduced axes: "b (h 2) (w 2) -> b h w", "max"
// is 2x2 max-pooling. "1" / "()" on the right keep a reduced dim: "b c h w -> b c () ()".
//   torc_reduce(x, "... hidden -> ...", "sum")      the sum over the last dim
// torc_reduce_axes also takes an axes string as torc_rearrange's. Unknown reduction:
// TORC_ERR_INVALID_ARG. With nothing to reduce the result is the rearrangement alone.
TORC_API torc_tensor *torc_reduce(torc_tensor *x, const char *pattern, const char *reduction);
TORC_API torc_tensor *torc_reduce_axes(torc_tensor *x, const char *pattern, const char *reduction,
                                       const char *axes);
// einops.repeat: rearrange, with new axes on the right whose lengths come from axes
// ("c=3") or are written as numbers ("h w -> h w 3"). New axes are stride-0 expansions (a
// view of x); a copy is made only when a repeated axis is merged into a group with others
// ("h w -> h (w c)", "h w -> (2 h) w"). Every axis of the left side must appear on the right.
TORC_API torc_tensor *torc_repeat(torc_tensor *x, const char *pattern, const char *axes);

// ---- mixed precision: autocast ----
// torch.autocast for the calling thread: between torc_autocast_begin(dtype) and
// torc_autocast_end() (nestable; the innermost scope decides) ops follow PyTorch's autocast
// policy (its CUDA op lists, which torc applies on every device):
//   in the autocast dtype: torc_matmul and torc_matmul_out_dtype, hence Linear's forward and
//     einsum's contractions. Floating operands other than f64 are cast to it; torc_matmul's
//     result has it, torc_matmul_out_dtype keeps the out_dtype asked for (bf16 x bf16 -> f32).
//     Linear (and the GPT's linears) cast their bias too, as F.linear's: their result has it.
//   in f32: sum, mean, prod, norm, logsumexp, softmax, log_softmax, exp, log, reciprocal,
//     rsqrt, erfinv and the losses (mse_loss, nll_loss, cross_entropy): f16/bf16 inputs are
//     cast to f32, so the result is f32.
//   everything else runs in its inputs' dtypes; mixed inputs follow promotion (bf16 + f32 ->
//     f32). In-place ops are never changed.
// Casts are torc_to_dtype calls recorded by autograd, so gradients flow back through them and
// reach f32 parameters as f32. Integer and bool tensors (labels, indices, masks) are never
// cast. Backward formulas do not autocast (they run in the dtypes the forward chose), and
// outside any scope nothing changes.
// Weight casts are cached, as PyTorch's autocast caches them: a matmul (or Linear's bias add) that records no graph
// (grad mode off, as in torc_gpt_generate) casts an f32 parameter (a leaf that requires grad; or
// a transpose or reshape of all of one, as the tied LM head's wte^T) once, and every matmul after
// it on this thread reuses the cast until the outermost torc_autocast_end (nesting depth back to
// 0) or the thread's exit frees it; open the region around a whole generation to reuse them for
// every token. A cast remembers its parameter's storage version: an in-place write (an optimizer
// step, torc_mul_scalar_) makes it again on next use. Values are the uncached cast's, bit for
// bit; the copies (2 bytes an element of each weight) count as activation memory while held. Not
// cached: tensors that do not require grad, slices, and matmuls in grad mode (those fuse their
// casts into the matmul where the backend can, else record them in the graph, as without a cache).
// dtype: TORC_DTYPE_BF16 or TORC_DTYPE_F16; TORC_DTYPE_F32 opens a scope with autocast off
// (torch.autocast(enabled=False)); TORC_DTYPE_F8_E4M3FN is fp8 autocast: a matmul whose
// right operand is a 2-D parameter (a leaf that requires grad: Linear's weight) runs as
// scaled_mm with both operands cast to e4m3 and its output in bf16 (or out_dtype); its backward
// casts the output's gradient to e5m2 and computes both gradients with scaled_mm in f32.
// Scales follow Transformer Engine's delayed scaling (per parameter: scales and an amax
// history for its input, its weight and its gradient; scale = fp8_max / max(history) /
// 2^margin, updated before each forward; see torc_autocast_set_fp8_recipe); a role's first
// cast uses its current amax. Other matmuls run in bf16, and the f32 list applies as above.
// Errors: TORC_ERR_DTYPE for another dtype, TORC_ERR_INVALID_ARG beyond 64 nested scopes or
// for an end without a begin.
TORC_API torc_status torc_autocast_begin(torc_dtype dtype);
TORC_API torc_status torc_autocast_end(void);
TORC_API bool torc_is_autocast_enabled(void);  // the innermost scope casts (not F32, not outside)
TORC_API torc_dtype torc_autocast_dtype(void); // the innermost scope's dtype; TORC_DTYPE_F32 outside
// fp8 delayed scaling's recipe for parameters first used after the call (process-wide):
// amax_history_len (Transformer Engine's default 1024) and margin (scale divided by 2^margin,
// default 0). TORC_ERR_INVALID_ARG outside [1, 2^20] and [0, 64].
TORC_API torc_status torc_autocast_set_fp8_recipe(int amax_history_len, int margin);
// A parameter's fp8 state as copies: its scales (3,) for input, weight and gradient, and its
// amax history (amax_history_len, 3). NULL without an error for a tensor fp8 autocast has not used.
TORC_API torc_tensor *torc_autocast_fp8_scales(const torc_tensor *param);
TORC_API torc_tensor *torc_autocast_fp8_amax_history(const torc_tensor *param);

// ---- mixed precision: fp8 scaled matmul ----
// torch._scaled_mm with cuBLASLt's semantics (the reference backend computes it exactly):
// a (M, K) and b (K, N) in f8_e4m3fn or f8_e5m2 (one may be e5m2, not both, as cuBLASLt),
// any strides; scale_a, scale_b: one-element f32 tensors (the inverse of the scales the
// operands were cast with). r = scale_a * scale_b * (a @ b), accumulated in f32 or better, or
// on fp8 tensor cores within TORC_FP8_MMA_SUM_TOL (backend.h) of scale_a * scale_b * (|a| @ |b|).
// out_dtype f32 / bf16 / f16: r rounded once. out_dtype fp8: r * scale_out (NULL: 1) cast with
// saturation to the finite range (cuBLASLt's D scale multiplies; PyTorch's CPU path divides by
// scale_result instead, see pytorch#190449). amax_out (NULL: skipped) is a one-element f32
// tensor that receives max |r| (before scale_out; NaN if any r is NaN), written in place:
// the delayed-scaling statistic for the next scale. Returns a new (M, N) tensor.
// Errors: TORC_ERR_SHAPE (not 2-D, K mismatch), TORC_ERR_DTYPE (non-fp8 operands, e5m2 x e5m2
// "Multiplication of two Float8_e5m2 matrices is not supported", scales that are not one-element
// f32, another out dtype), TORC_ERR_AUTOGRAD when an operand requires grad (as PyTorch, the op
// has no derivative: train fp8 matmuls through torc_matmul under fp8 autocast).
TORC_API torc_tensor *torc_scaled_mm(const torc_tensor *a, const torc_tensor *b, const torc_tensor *scale_a,
                                     const torc_tensor *scale_b, torc_dtype out_dtype,
                                     const torc_tensor *scale_out, torc_tensor *amax_out);
// The scaled cast that feeds scaled_mm: fp8(clamp(x * scale, -max, max)) with x * scale
// computed in f32, max = 448 (e4m3fn) or 57344 (e5m2); NaN stays NaN. Unlike the plain
// torc_to_dtype, which keeps PyTorch's rules (e5m2 overflows to inf), finite values saturate,
// as in cuBLASLt and Transformer Engine. scale: a one-element f32 tensor. Not differentiable
// (the result never requires grad). TORC_ERR_DTYPE for a non-fp8 dtype, a non-floating x or a
// bad scale.
TORC_API torc_tensor *torc_to_fp8_scaled(const torc_tensor *x, const torc_tensor *scale, torc_dtype dtype);

// ---- autograd ----
// PyTorch's autograd: ops on tensors that require grad (in grad mode) record a node, named as
// torch names it (torc_grad_fn_name: "MulBackward0", "MmBackward0"); backward walks the nodes
// from the output, newest first, and accumulates into the leaves' .grad. Each node keeps the
// tensors its formula needs as detached views plus their storage version, so an in-place
// write to one of them makes backward fail with PyTorch's "modified by an inplace operation"
// error. A backward without retain_graph frees them; a second backward through a node that
// saved something is PyTorch's "Trying to backward through the graph a second time" error.
// Backward formulas are torc ops (they run on every backend) executed under no_grad; their
// FLOPs count in the backward phase. Double backward (create_graph) is not supported.
// In-place ops record history as PyTorch's do: in grad mode, when self or an operand requires
// grad, the op becomes self's grad_fn on top of self's previous history ("AddBackward0",
// "CopyBackwards" for copy_, "FillBackward2", "ZeroBackward0", "UniformBackward0", ...), so
// `y = x * 2; add_(y, 1)` backpropagates 2 to x and `copy_(zeros, x)` makes the zeros require
// grad. The op saves what its backward needs as PyTorch does (a copy of self's old value when
// needed, e.g. mul_ for the other operand's gradient, pow_scalar_), so a later write to a
// tensor some node saved (sigmoid's output, then add_ on it) still fails at backward with the
// "modified by an inplace operation" error, naming the grad_fn that tensor has then. Writing
// through a view (select, slice, narrow, transpose, permute, view, as_strided, ...) rebases the
// view's base: the base gets a CopySlices node (the gradient of the region the view covers
// goes through the op, the rest passes unchanged) and the view, like every other view of the
// base once the storage changed, an AsStridedBackward0 of it. Errors (TORC_ERR_AUTOGRAD):
// writing a leaf that requires grad or a view of one ("a leaf Variable that requires grad is
// being used in an in-place operation."), and writing in grad mode a view made under no_grad
// when the write would be recorded; under no_grad nothing is recorded or checked. torc
// differs in two corners: a view made under no_grad whose base is later written in
// grad mode is left as a detached tensor (PyTorch raises when it is next used), and a tensor
// moved between two host-memory backends shares its storage (torc_to_device), so writing one
// changes the other without rebasing it. A graph is backpropagated by one thread at a time.

// Fails with TORC_ERR_AUTOGRAD for a non-floating dtype (true) or a non-leaf (false).
TORC_API torc_status torc_set_requires_grad(torc_tensor *t, bool requires_grad);
TORC_API bool torc_requires_grad(const torc_tensor *t);
TORC_API bool torc_is_leaf(const torc_tensor *t);  // no grad_fn (every tensor not made by a recorded op)
// The accumulated gradient (a new reference), or NULL without an error when there is none
// (a non-leaf has one only after torc_retain_grad).
TORC_API torc_tensor *torc_grad(const torc_tensor *t);
// Replaces .grad (grad NULL clears it: zero_grad with set_to_none). grad must have t's
// dtype, shape and device (TORC_ERR_DTYPE / TORC_ERR_SHAPE / TORC_ERR_INVALID_ARG); t keeps
// a reference to it.
TORC_API torc_status torc_set_grad(torc_tensor *t, torc_tensor *grad);
// The name of t's grad_fn ("MulBackward0"), or NULL for leaves. Borrowed, static.
TORC_API const char *torc_grad_fn_name(const torc_tensor *t);
// Makes a non-leaf keep its gradient in .grad during backward and torc_autograd_grad
// (accumulating across calls).
// A no-op on leaves; TORC_ERR_AUTOGRAD when t does not require grad.
TORC_API torc_status torc_retain_grad(torc_tensor *t);
// t.backward(gradient, retain_graph): accumulates d t / d leaf into every leaf's .grad (the
// first gradient of a leaf is tagged TORC_MEM_GRADIENT; later ones are added in place).
// gradient must have t's shape (it is cast to t's dtype); NULL only for a one-element t.
// Errors (TORC_ERR_AUTOGRAD): t does not require grad, a non-scalar t without a gradient,
// second backward, a saved tensor modified in place; TORC_ERR_SHAPE for a gradient of
// another shape. After an error, leaves may hold part of the gradient, as in PyTorch.
TORC_API torc_status torc_backward(torc_tensor *t, const torc_tensor *gradient, bool retain_graph);
// torch.autograd.grad: the gradients of the outputs (weighted by grad_outputs, which may be
// NULL or hold NULLs for one-element outputs) with respect to inputs, written as n_inputs new
// references to grads (owned like any returned tensor: by the current scope, if one is open).
// No leaf's .grad is touched, and only the part of the graph that leads to inputs runs; a
// non-leaf with torc_retain_grad whose node runs (or that is one of the inputs) accumulates
// its gradient into .grad, as in PyTorch 2.x.
// An input the outputs do not depend on gets NULL with allow_unused, else TORC_ERR_AUTOGRAD
// ("appears to not have been used in the graph"); every input must require grad. On error
// every grads[i] is NULL.
TORC_API torc_status torc_autograd_grad(int n_outputs, torc_tensor *const *outputs,
                                        torc_tensor *const *grad_outputs, int n_inputs,
                                        torc_tensor *const *inputs, bool retain_graph,
                                        bool allow_unused, torc_tensor **grads);
// no_grad scopes (per thread, nestable): ops record nothing and their results do not
// require grad.
TORC_API void torc_no_grad_begin(void);
TORC_API void torc_no_grad_end(void);
TORC_API bool torc_is_grad_enabled(void);

// ---- nn: parameters, initialisers, modules, losses ----
// A parameter is a leaf that requires grad whose storage is tagged TORC_MEM_PARAMETER.
// Returns a new reference: a detached tensor sharing t's storage when t is contiguous and
// covers its storage exactly (t's storage is then tagged too), else a contiguous copy.
// TORC_ERR_AUTOGRAD for a non-floating t.
TORC_API torc_tensor *torc_parameter(torc_tensor *t);
// In-place initialisers for parameters (they run under no_grad). torc_trunc_normal_ above is
// torch.nn.init.trunc_normal_.
// t = normal(0, 1) / sqrt(fan_in): keeps x @ w of order 1 for x of unit variance (Xavier-
// style). TORC_ERR_INVALID_ARG for fan_in <= 0.
TORC_API torc_status torc_init_normal_fan_in_(torc_tensor *t, int64_t fan_in, torc_generator *gen);

// Modules: a tree of named parameters and children with a forward function. A module owns
// its children and holds a reference to each parameter; torc_module_free releases the tree.
// Parameters are listed in registration order, a module's own before its children's, named
// by their path ("layers.0.weight"), as torch's named_parameters().
typedef struct torc_module torc_module;
// Forward of a custom module: returns a new reference (like any op) or NULL with the error set.
typedef torc_tensor *(*torc_module_forward_fn)(torc_module *m, torc_tensor *x, void *user);

// A custom module; type_name is copied ("MyBlock"). free_user (may be NULL) is called on
// user at torc_module_free. NULL on OOM.
TORC_API torc_module *torc_module_new(const char *type_name, torc_module_forward_fn forward, void *user,
                                      void (*free_user)(void *));
// Adds a parameter (the module takes a reference; use torc_parameter to make one). Names are
// unique within a module and contain no '.': TORC_ERR_INVALID_ARG otherwise.
TORC_API torc_status torc_module_register_parameter(torc_module *m, const char *name, torc_tensor *param);
// Adds a child and takes ownership of it, also on failure, except when child already has a
// parent (TORC_ERR_INVALID_ARG; it stays with that parent).
TORC_API torc_status torc_module_register_module(torc_module *m, const char *name, torc_module *child);
TORC_API void torc_module_free(torc_module *m);  // NULL is ignored

// nn.Linear in the course's layout: weight (in, out) = randn / sqrt(in), y = x @ weight
// (+ bias, (out), uniform(-1/sqrt(in), 1/sqrt(in)) as torch's). gen NULL: default generator.
TORC_API torc_module *torc_linear_new(int64_t in_features, int64_t out_features, bool bias, torc_dtype dtype,
                                      torc_generator *gen);
TORC_API torc_module *torc_relu_module_new(void);
TORC_API torc_module *torc_gelu_module_new(bool approximate_tanh);
// nn.Sequential: children named "0", "1", ... applied in order.
TORC_API torc_module *torc_sequential_new(void);
TORC_API torc_status torc_sequential_append(torc_module *seq, torc_module *child); // takes ownership
// The course's Cruncher: num_layers Linear(dim, dim) without bias ("layers.i"), then a
// Linear(dim, 1) without bias ("final"); forward maps x (B, dim) to (B,).
// torc_module_num_parameters == dim * dim * num_layers + dim.
TORC_API torc_module *torc_cruncher_new(int64_t dim, int num_layers, torc_dtype dtype, torc_generator *gen);

// Runs m's forward on x: a new reference, or NULL with the error set.
TORC_API torc_tensor *torc_module_forward(torc_module *m, torc_tensor *x);
TORC_API const char *torc_module_type(const torc_module *m);  // "Linear", "Sequential", "Cruncher"
// The child registered under name (borrowed), or NULL.
TORC_API torc_module *torc_module_child(const torc_module *m, const char *name);
// Iteration over every parameter of the tree, i in [0, torc_module_param_count): the tensor
// and its path, both borrowed and valid until the tree changes or is freed. The list is
// cached in the module: do not query one tree from several threads at once.
// torc_module_param_count is -1 with the error set when the list cannot be built (out of host
// memory, or m NULL): never 0 for a tree that has parameters.
TORC_API int torc_module_param_count(const torc_module *m);
TORC_API torc_tensor *torc_module_param(const torc_module *m, int i);
TORC_API const char *torc_module_param_name(const torc_module *m, int i);
// The parameter with that path ("final.weight"), borrowed, or NULL.
TORC_API torc_tensor *torc_module_get_parameter(const torc_module *m, const char *path);
TORC_API int64_t torc_module_num_parameters(const torc_module *m);  // elements over all parameters; -1 as above
// Clears every parameter's .grad (set_to_none) or fills it with zeros.
TORC_API torc_status torc_module_zero_grad(torc_module *m, bool set_to_none);

// Losses, differentiable through the ops they are composed of (under autocast they run in f32).
// mean((input - target)^2), broadcasting as torch.nn.functional.mse_loss.
TORC_API torc_tensor *torc_mse_loss(const torc_tensor *input, const torc_tensor *target);
// The reduction of a loss over its elements, PyTorch's at::Reduction numbering.
typedef enum torc_reduction {
    TORC_REDUCTION_NONE = 0,  // one loss per target element, the target's shape
    TORC_REDUCTION_MEAN = 1,  // PyTorch's default 'mean'
    TORC_REDUCTION_SUM = 2
} torc_reduction;
#define TORC_IGNORE_INDEX_DEFAULT (-100)  // PyTorch's default ignore_index
// torch.nn.functional.nll_loss(log_probs, target, ignore_index=, reduction=) without class
// weights: loss = -log_probs[n, target[n, d...], d...] per target element, 0 where target ==
// ignore_index. Shapes: log_probs (C) with target () or (1); (N, C) with (N); (N, C, d1, ..., dk)
// with (N, d1, ..., dk) (the class dim is 1). target holds class indices, int64 or uint8
// (compared with ignore_index as int64). MEAN divides the sum by the number of targets not
// ignored: all ignored (or none at all) gives nan, as PyTorch; SUM of none is 0; NONE gives the
// target's shape. Errors, in PyTorch's words: a target outside [0, C) that is not ignored is
// TORC_ERR_INDEX "Target 5 is out of bounds." naming the first in row-major order (checking it
// reads one number from the device); a target dtype other than Long or Byte TORC_ERR_DTYPE
// ("expected target dtype to be Long or Byte, but got Int"); shape mismatches TORC_ERR_SHAPE
// ("Expected input batch_size (3) to match target batch_size (2).", "Expected target size [2, 3],
// got [2, 2]"); an unknown reduction TORC_ERR_INVALID_ARG. Returns a new reference.
TORC_API torc_tensor *torc_nll_loss_ex(const torc_tensor *log_probs, const torc_tensor *target, int64_t ignore_index,
                                       torc_reduction reduction);
// torc_nll_loss_ex(log_probs, target, TORC_IGNORE_INDEX_DEFAULT, TORC_REDUCTION_MEAN).
TORC_API torc_tensor *torc_nll_loss(const torc_tensor *log_probs, const torc_tensor *target);
// torch.nn.functional.cross_entropy(logits, target, ignore_index=, reduction=, label_smoothing=)
// without class weights: nll_loss_ex(log_softmax(logits, class dim), ...) with the class dim 1
// (0 for 1-D logits) and the shapes and errors of torc_nll_loss_ex. label_smoothing s in (0, 1]
// mixes in the uniform distribution: (1 - s) * nll + s / C * (-sum over classes of log_softmax),
// the second term 0 where ignored and reduced as the first (s > 1 is TORC_ERR_INVALID_ARG
// "label_smoothing must be between 0.0 and 1.0. Got: 1.5"; s <= 0 is no smoothing, as PyTorch).
// A target with the logits' own shape holds class probabilities instead (floating point, else
// TORC_ERR_DTYPE "Expected floating point type for target with class probabilities, got Long";
// an ignore_index >= 0 is TORC_ERR_INVALID_ARG): loss = -sum over classes of target' *
// log_softmax with target' = target * (1 - s) + s / C, MEAN dividing by numel / C.
// Returns a new reference.
TORC_API torc_tensor *torc_cross_entropy_ex(const torc_tensor *logits, const torc_tensor *target,
                                            int64_t ignore_index, torc_reduction reduction, double label_smoothing);
// torc_cross_entropy_ex(logits, target, TORC_IGNORE_INDEX_DEFAULT, TORC_REDUCTION_MEAN, 0.0).
TORC_API torc_tensor *torc_cross_entropy(const torc_tensor *logits, const torc_tensor *target);
// A linear layer and cross-entropy fused (an LM head's loss; PyTorch has no such op, Liger-Kernel's
// LigerFusedLinearCrossEntropy and Apple's Cut Cross-Entropy do this): the value, gradients and
// errors of cross_entropy_ex(x @ weight[:n_classes]^T, target, ignore_index, reduction, 0) over
// x's rows, without storing the (rows, n_classes) logits. x (..., C) with target (...) (x's shape
// without its last dim; class indices, int64 or uint8); weight (V, C) with V >= n_classes
// (n_classes 0: V), its rows n_classes.. take no part and get a zero gradient. The N rows go
// through in ceil(N / R) chunks of equal size (give or take a row), R = max(8, 2^22 / n_classes)
// (16 MiB of f32 logits; the shapes alone decide): per chunk the logits, their log-softmax, the
// loss rows and, when x or weight requires grad, the gradients at once (softmax - onehot, scaled
// by the reduction, through two matmuls), weight's summed chunk after chunk in f32 (f64 for f64);
// backward multiplies the saved dx and dW by the upstream gradient. REDUCTION_NONE while a
// gradient is needed runs the composed ops (per-row upstream gradients would need the logits
// again), and so do a 1-D x, targets of class probabilities, dtypes other than f32/f64/f16/bf16
// (x and weight of one dtype) and fp8 autocast. Under bf16/f16 autocast the matmuls take the
// autocast dtype (the logits rounded to it, as torc_matmul's) and the log-softmax runs in f32.
// Counted FLOPs: the forward matmul 2 N C n_classes, the gradient matmuls (4 N C n_classes) in
// the backward phase, as the composition's. The result's grad_fn is an add (loss + (s -
// s.detach()), s = sum(x * dx) + sum(weight[:n_classes] * dW), whose gradient is dx and dW): not
// twice differentiable (dx and dW are constants), and a non-finite x * dx (inf in a row whose
// target is ignored) makes the loss nan. Errors, with nothing computed: NULL arguments, an
// unknown reduction, n_classes > V (narrow's "start (0) + length (7) exceeds dimension size
// (5)."), weight not 2-D, the matmul's ("mm: mat1 and mat2 shapes cannot be multiplied (4x3 and
// 2x5)", "expected m1 and m2 to have the same dtype, but got: float != double"), and
// torc_cross_entropy_ex's shape, target dtype and "Target 5 is out of bounds." errors. Returns a
// new reference: a zero-dim loss (MEAN: nan when every target is ignored) or the target's shape
// (NONE).
TORC_API torc_tensor *torc_linear_cross_entropy(const torc_tensor *x, const torc_tensor *weight,
                                                const torc_tensor *target, int64_t n_classes, int64_t ignore_index,
                                                torc_reduction reduction);

// torch.nn.functional.layer_norm: normalizes x over its last n_normalized dims, which must equal
// normalized_shape ("Given normalized_shape=[3], expected input with shape [*, 3], but got input
// of size[2, 4]", TORC_ERR_SHAPE; n_normalized >= 1), with the biased variance:
// y = (x - mean) / sqrt(var + eps) * weight + bias. weight and bias may be NULL; each has
// normalized_shape and x's dtype, or float32 when x is float16/bfloat16 (PyTorch's CPU mixed
// dtype; other mixes are PyTorch's "mixed dtype (CPU): ..." errors, TORC_ERR_DTYPE). x is f64,
// f32, f16 or bf16 ('"LayerNormKernelImpl" not implemented for 'Long'', TORC_ERR_DTYPE; fp8 as
// well, as PyTorch). Differentiable in x, weight and bias (NativeLayerNormBackward0, one
// LAYER_NORM_BACKWARD op), on every backend: a backend without the op runs the reference on
// host memory (a device backend gets contiguous copies of x, weight, bias). As every torc
// backward, the gradients do not themselves record a graph (no double backward). Returns a new
// reference, or NULL with the error set.
TORC_API torc_tensor *torc_layer_norm(const torc_tensor *x, int n_normalized, const int64_t *normalized_shape,
                                      const torc_tensor *weight, const torc_tensor *bias, double eps);
// torch.native_layer_norm: the same y and the per-row statistics, mean and rstd =
// 1/sqrt(var + eps), with x's shape and the normalized dims of size 1, in x's dtype (float32 for
// the mixed dtype case), as PyTorch on CPU. A row of no elements has mean 0 and rstd NaN. mean
// and rstd do not require grad (PyTorch's are not differentiable either); y does as above. On
// success *y, *mean, *rstd are new references; on failure they are untouched.
TORC_API torc_status torc_native_layer_norm(const torc_tensor *x, int n_normalized, const int64_t *normalized_shape,
                                            const torc_tensor *weight, const torc_tensor *bias, double eps,
                                            torc_tensor **y, torc_tensor **mean, torc_tensor **rstd);

// ---- nn: embedding, attention, dropout ----
// torch.nn.functional.embedding(indices, weight, padding_idx) (aten's torch.embedding(weight,
// indices, padding_idx) order): the rows of weight (V, C) picked by indices (int64 or int32, any
// shape), a new (..., C) tensor of weight's dtype. padding_idx in [0, V) marks a row whose
// gradient stays zero (its value is still read); TORC_EMBEDDING_NO_PADDING (-1) is none, as in
// aten (Python's negative padding_idx is padding_idx + V here). Composed of index_select, whose
// backward is an index_add into a zero (V, C) gradient: on host backends it adds the rows in
// index order, one after another, so the gradient is the same bits whatever the thread count
// (and PyTorch's CPU embedding backward's). Errors as PyTorch: TORC_ERR_INDEX "index out of range
// in self"; TORC_ERR_DTYPE "Expected tensor for argument #1 'indices' to have one of the
// following scalar types: Long, Int; but got torch.FloatTensor instead (while checking arguments
// for embedding)"; TORC_ERR_SHAPE "'weight' must be 2-D"; TORC_ERR_INVALID_ARG "Padding_idx must
// be within num_embeddings". Returns a new reference.
#define TORC_EMBEDDING_NO_PADDING (-1)
TORC_API torc_tensor *torc_embedding(const torc_tensor *weight, const torc_tensor *indices, int64_t padding_idx);

// torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
// is_causal, scale, enable_gqa): query (..., L, E), key (..., S, E), value (..., S, Ev) with
// broadcasting batch dims, result (..., L, Ev) in query's dtype, a new reference:
//   softmax(query @ key^T * scale + bias) @ value,
// scale NAN meaning 1 / sqrt(E) (any other value is used as given, 0 and negatives included).
// attn_mask (NULL: none) broadcasts to (..., L, S): bool (false: not attended) or floating
// (added to the scores; float32 or query's dtype). is_causal: query i attends keys 0..i (top-left
// aligned, PyTorch's tril of ones(L, S)); with a mask it is TORC_ERR_INVALID_ARG
// "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True". A
// row that attends nothing gives zeros and no gradient (PyTorch's _safe_softmax), not NaN.
// dropout_p > 0 applies torc_dropout(p, training) to the attention weights with gen (NULL: the
// default generator), the same mask on every backend; dropout_p <= 0 none (dropout_p > 1 is
// dropout's error). enable_gqa: key and value have fewer heads (dim -3) than query, each
// repeated for query's heads / theirs consecutive query heads (TORC_ERR_SHAPE "Number of heads in
// key and value must divide the number of heads in query").
// Without a mask, dropout or grouped heads to repeat, where the device's backend takes it, this is
// one fused op (backend ABI 2.4's attention): its grad_fn, ScaledDotProductFlashAttentionForCpuBackward0,
// keeps q, k, v, the result and each query row's log-sum-exp, never the (..., L, S) weights, and
// its backward is one attention_backward; f16 / bf16 inputs go to it as they are. Otherwise it is
// PyTorch's math backend, composed of differentiable ops (matmul, where / add, softmax, dropout,
// matmul; q and k each scaled by sqrt(|scale|) first): float16 and bfloat16 inputs compute in
// float32 and round the result once; the backward is the ops' backward, which keeps the weights.
// The two agree within docs/backends.md's tolerance; the composition is the fused op's oracle.
// Under autocast the floating inputs (not f64) are cast to the autocast dtype first, as PyTorch's
// autocast list has this op.
// Errors in PyTorch's words: TORC_ERR_DTYPE "Expected query, key, and value to have the same
// dtype, but got query.dtype: float key.dtype: double and value.dtype: float instead.", "Expected
// attn_mask dtype to be bool or float or to match query dtype, ...", a non-floating query;
// TORC_ERR_SHAPE "Expected query, key, and value to all be  at least 2 dimensional, ...", a mask
// that does not broadcast to the scores' shape, and matmul's shape errors (E or S mismatch).
TORC_API torc_tensor *torc_scaled_dot_product_attention(const torc_tensor *query, const torc_tensor *key,
                                                        const torc_tensor *value, const torc_tensor *attn_mask,
                                                        double dropout_p, bool is_causal, double scale,
                                                        bool enable_gqa, torc_generator *gen);

// torch.nn.functional.dropout(x, p, training): with training and 0 < p < 1 a new tensor x * noise,
// noise = bernoulli(1 - p) / (1 - p) in x's dtype (an element is kept when its uniform draw from
// gen, NULL: the default generator, is below 1 - p; numel(x) counters, so the same mask on every
// backend, for any strides, and after a checkpoint resume); its gradient is grad * noise. p = 1
// gives x * 0 (zeros; inf and NaN give NaN, as PyTorch); p = 0, !training or an empty x return x
// itself (a new reference, as PyTorch returns its input). TORC_ERR_INVALID_ARG "dropout
// probability has to be between 0 and 1, but got 1.5" for p outside [0, 1] (or NaN);
// TORC_ERR_DTYPE for an integer x with 0 < p < 1 ("result type Float can't be cast to the desired
// output type Long"). The draws are not PyTorch's numbers (see torc_rand).
TORC_API torc_tensor *torc_dropout(const torc_tensor *x, double p, bool training, torc_generator *gen);

// ---- training helpers: gradient clipping, learning-rate schedule, weight-decay groups ----
// torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite): the total norm
// of the .grad of the params that have one (torc_get_total_norm), then every such .grad is
// multiplied in place by min(max_norm / (total + 1e-6), 1) (torc_clip_grads_with_norm_; also when
// the factor is 1). norm_type: 2.0, INFINITY (the largest |g|), or any p torc_norm takes. Returns
// the total norm, a new zero-dim tensor (dtype: the gradients', promoted; torch.tensor(0.0) of the
// default dtype when no param has a gradient), or NULL with nothing changed: TORC_ERR_RUNTIME
// with error_if_nonfinite and a total that is inf or NaN ("The total norm of order 2.0 for
// gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error and
// scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"; the check
// reads the norm from the device). Runs under no_grad. PyTorch's foreach argument only picks a
// kernel; torc runs one norm per gradient and one over their norms, as PyTorch's formula.
TORC_API torc_tensor *torc_clip_grad_norm_(int n, torc_tensor *const *params, double max_norm, double norm_type,
                                           bool error_if_nonfinite);
// torch.nn.utils.get_total_norm(tensors, norm_type, error_if_nonfinite): the norm of the n
// tensors' norms (each torc_norm(t, norm_type) over all elements, stacked on the first tensor's
// device); errors as above. n = 0: torch.tensor(0.0). A new reference, or NULL.
TORC_API torc_tensor *torc_get_total_norm(int n, torc_tensor *const *tensors, double norm_type,
                                          bool error_if_nonfinite);
// torch.nn.utils.clip_grads_with_norm_(params, max_norm, total_norm): multiplies each param's
// .grad (those that have one) by min(max_norm / (total_norm + 1e-6), 1), computed in
// total_norm's dtype; total_norm as torc_get_total_norm returns it. Runs under no_grad.
TORC_API torc_status torc_clip_grads_with_norm_(int n, torc_tensor *const *params, double max_norm,
                                                const torc_tensor *total_norm);

// nanoGPT's learning-rate schedule (train.py's get_lr, with lr_decay_iters = max_steps), in the
// same double arithmetic: step < warmup_steps: max_lr * (step + 1) / (warmup_steps + 1) (linear,
// never 0); step > max_steps: min_lr; in between: min_lr + 0.5 * (1 + cos(pi * r)) * (max_lr -
// min_lr), r = (step - warmup_steps) / (max_steps - warmup_steps), so step = max_steps gives
// min_lr. max_steps <= warmup_steps: min_lr from warmup_steps on (where nanoGPT would divide by
// zero). llm.c's train_gpt2.py warms up as max_lr * (step + 1) / warmup_steps instead (its step
// warmup_steps - 1 reaches max_lr). NAN with TORC_ERR_INVALID_ARG for a negative step or
// warmup_steps. Set it each step with torc_optimizer_set_lr.
TORC_API double torc_lr_cosine_warmup(int64_t step, double max_lr, double min_lr, int64_t warmup_steps,
                                      int64_t max_steps);

// Which parameters get weight decay: true for decay. name may be NULL (no names given).
typedef bool (*torc_decay_fn)(const char *name, const torc_tensor *param, void *user);
// nanoGPT's and llm.c's rule: parameters of 2 or more dims decay (matmul weights and embeddings),
// the others do not (biases, LayerNorm weights). user is unused.
TORC_API bool torc_decay_matrices(const char *name, const torc_tensor *param, void *user);
// The same, except the parameters whose name is in user, a NULL-terminated array of names
// (const char *const *): e.g. {"wte.weight", "wpe.weight", NULL} keeps embeddings out of weight
// decay, as minGPT did.
TORC_API bool torc_decay_matrices_except(const char *name, const torc_tensor *param, void *user);
typedef struct torc_optimizer torc_optimizer;  // see "optimizers" below
// nanoGPT's configure_optimizers: optimizer name_or_path (e.g. "adamw") over the n params (names
// may be NULL) in two groups: first those decay(name, param, user) accepts (NULL decay:
// torc_decay_matrices) with weight_decay, then the others with weight_decay=0, each in the order
// given; a group that would be empty is not made, so group 0 is the decay group when
// *n_decay > 0. hparams as torc_optimizer_new's ("lr=6e-4 betas=0.9,0.95 eps=1e-8"); a
// weight_decay there is replaced by the groups'. *n_decay (may be NULL) receives the number of
// decayed parameters. Returns the optimizer (caller frees with torc_optimizer_free) or NULL with
// torc_optimizer_new's errors.
TORC_API torc_optimizer *torc_optimizer_new_decay_groups(const char *name_or_path, int n, const char *const *names,
                                                         torc_tensor *const *params, const char *hparams,
                                                         double weight_decay, torc_decay_fn decay, void *user,
                                                         int *n_decay);

// ---- accounting ----
typedef enum torc_mem_tag {
    TORC_MEM_ACTIVATION = 0, // activations and everything not tagged otherwise
    TORC_MEM_PARAMETER,
    TORC_MEM_GRADIENT,
    TORC_MEM_OPTIMIZER_STATE,
    TORC_MEM_TAG_COUNT
} torc_mem_tag;
TORC_API const char *torc_mem_tag_name(torc_mem_tag tag);  // "activation", "parameter", ...

typedef struct torc_memory_stats {
    uint64_t in_use[TORC_MEM_TAG_COUNT];   // bytes held now, by tag
    uint64_t peak[TORC_MEM_TAG_COUNT];     // highest in_use per tag since the last reset
    uint64_t total_in_use, total_peak;     // all tags together (peak of the sum)
} torc_memory_stats;
TORC_API torc_status torc_memory_stats_get(const torc_device *dev, torc_memory_stats *out);
TORC_API void torc_memory_reset_peak(const torc_device *dev);
// Returns what dev's backend keeps for reuse (freed blocks of a caching allocator, cached
// primitives, workspaces) to the system, as torch.cuda.empty_cache(); tensors are untouched.
TORC_API torc_status torc_empty_cache(const torc_device *dev);
// Moves t's storage to another tag (accounting only; the bytes stay where they are).
TORC_API torc_status torc_set_mem_tag(torc_tensor *t, torc_mem_tag tag);

typedef enum torc_phase { TORC_PHASE_FORWARD = 0, TORC_PHASE_BACKWARD = 1 } torc_phase;
// FLOPs counted since the last reset. opcode -1 sums every op, dtype -1 every dtype.
// Counted per op: matmul 2*M*N*K*batch, elementwise one per output element, reductions one
// per input element; copies, fills and views count 0 FLOPs.
TORC_API uint64_t torc_flops(torc_phase phase, int opcode, int dtype);
TORC_API void torc_flops_reset(void);
// Ops a device-memory backend declined that ran on the host instead (TORC_DEVICE_FALLBACK=1: the
// operands copied to host buffers, the reference backend runs the op, the outputs copied back),
// since the last reset; opcode -1 sums every op. The host-memory fallback (a host backend's
// declined op run by the reference on the same pointers) is not counted here.
TORC_API uint64_t torc_fallback_count(int opcode);
TORC_API void torc_fallback_reset(void);
TORC_API const char *torc_op_name(torc_opcode op);  // "matmul"
// Op tracing: which ops a workload dispatches. Between torc_op_trace_start (which zeroes the counts)
// and torc_op_trace_stop (which keeps them), every op the core hands to a backend is counted by its
// opcode, its first input's dtype (none for ops without inputs: fills, random draws), its first
// output's dtype, and whether the device's own backend declined it (the reference ran it on host
// memory, TORC_DEVICE_FALLBACK ran it on the host, or it failed as unsupported). Queries
// (torc_op_supported) are not counted. Off, it costs a dispatch one relaxed atomic load; the
// counters are atomic, so ops from any thread count. torc_op_trace_count sums the counts that
// match: -1 matches anything; in_dtype -2 only ops without inputs; declined 0 taken, 1 declined.
TORC_API void torc_op_trace_start(void);
TORC_API void torc_op_trace_stop(void);
TORC_API uint64_t torc_op_trace_count(int opcode, int in_dtype, int out_dtype, int declined);
// Seconds of wall time the traced ops of opcode (-1: every op) spent in their backend's run()
// (torch.profiler's self time of an op): where an op ran, whichever backend ran it. On a CPU
// backend that is the op's time; a GPU backend's run() returns once the work is queued, so there
// it is the launch's time (synchronize before the stop to see the rest in the next op's).
TORC_API double torc_op_trace_seconds(int opcode);

// ---- state dicts: named tensors + string metadata (what checkpoints are made of) ----
// An ordered map name -> tensor (insertion order) plus a string map for everything else, the
// shape of a safetensors file. Names and keys are copied; tensors are retained.
typedef struct torc_state_dict torc_state_dict;
TORC_API torc_state_dict *torc_state_dict_new(void);          // NULL on out of memory
TORC_API void torc_state_dict_free(torc_state_dict *sd);       // releases its tensors; NULL ok
// Adds or replaces name (a new name goes last). TORC_ERR_INVALID_ARG for NULL/empty arguments.
TORC_API torc_status torc_state_dict_set(torc_state_dict *sd, const char *name, torc_tensor *t);
// The tensor called name (a new reference), or NULL with TORC_ERR_INDEX if there is none.
TORC_API torc_tensor *torc_state_dict_get(const torc_state_dict *sd, const char *name);
TORC_API bool torc_state_dict_contains(const torc_state_dict *sd, const char *name);
TORC_API int torc_state_dict_size(const torc_state_dict *sd);  // number of tensors
// The i-th name (borrowed, valid while sd lives and name is not replaced), NULL if out of range.
TORC_API const char *torc_state_dict_name(const torc_state_dict *sd, int i);
TORC_API torc_status torc_state_dict_set_meta(torc_state_dict *sd, const char *key, const char *value);
// The metadata value (borrowed), or NULL without an error when key is absent.
TORC_API const char *torc_state_dict_get_meta(const torc_state_dict *sd, const char *key);
TORC_API int torc_state_dict_meta_size(const torc_state_dict *sd);
TORC_API const char *torc_state_dict_meta_key(const torc_state_dict *sd, int i); // borrowed

// safetensors files (https://huggingface.co/docs/safetensors): an 8-byte little-endian header
// size, a JSON header (dtype, shape, data_offsets per tensor; "__metadata__" string map), the
// raw little-endian data. torc_save writes atomically: a temporary file in the same directory,
// fsync, rename, so a crash never leaves a partial file under path. TORC_ERR_IO with the
// path and the reason on failure (then path is unchanged). fp8 tensors are written as
// F8_E4M3 / F8_E5M2, the names safetensors uses.
TORC_API torc_status torc_save(const torc_state_dict *sd, const char *path);
// torc_save also records a CRC-32 of what the file means (metadata, and each tensor's name, dtype,
// shape and data, in sorted order) as the metadata entry "torc.content_crc32", which
// torc_load checks: a file another tool re-saved with the same contents and metadata (Python's
// safetensors reorders the header and the data) loads; one whose contents changed is refused
// as corrupted (remove that entry to load an intended edit).
// Reads a safetensors file into a new state dict with tensors on dev (NULL: the default device).
// Every check runs before anything is returned: a missing, truncated or corrupted file (bad
// header size, malformed JSON, unknown dtype, offsets outside the data or overlapping, data
// size not matching shape x dtype, trailing bytes, a content checksum that does not match) is
// TORC_ERR_IO naming the file and the problem. U16, U32 and U64 tensors (torc has no such
// dtypes) load widened with unchanged values: U16 as int32, U32 and U64 as int64; a U64 value
// above INT64_MAX is TORC_ERR_IO naming the tensor.
TORC_API torc_state_dict *torc_load(const char *path, torc_device *dev);

// ---- optimizers (plugins; the ABI is in torc/optim.h) ----
typedef struct torc_optimizer torc_optimizer;

// Loads an optimizer plugin by name ("adam": libtorc_optim_adam.so, searched in the directories of
// TORC_PLUGIN_PATH, then in <directory of libtorc.so>/torc, which is <prefix>/lib/torc when
// installed) or by path (any string containing '/'). A plugin stays loaded until the process
// ends; loading it again returns the same vtable (borrowed). NULL on failure with
// TORC_ERR_BACKEND and a message listing every file tried and why it was refused; a version or
// size mismatch names the plugin's ABI version and torc's.
TORC_API const torc_optim_vtable *torc_optim_load(const char *name_or_path);

// Creates an optimizer (torch.optim.<Name>(params, **hparams)) over n_params parameters, which
// form parameter group 0. Parameters are retained; they must be distinct floating-point leaf
// tensors. hparams is NULL or a setting string "name=value ..." (entries separated by spaces or
// ';', tuple values by ','; booleans true/false/1/0), e.g. "lr=0.01 betas=0.9,0.99 amsgrad=true".
// Settings given here become the optimizer's defaults for later groups. Unknown names, values
// that do not parse and values out of range are TORC_ERR_INVALID_ARG with PyTorch's message
// ("Invalid learning rate: -1.0"). Caller frees with torc_optimizer_free. NULL on failure.
TORC_API torc_optimizer *torc_optimizer_new(const char *name_or_path, int n_params,
                                           torc_tensor *const *params, const char *hparams);
TORC_API void torc_optimizer_free(torc_optimizer *opt);  // releases state and parameters; NULL ok
TORC_API const torc_optim_vtable *torc_optimizer_vtable(const torc_optimizer *opt);
TORC_API const char *torc_optimizer_name(const torc_optimizer *opt);  // "adam"
// optimizer.add_param_group: a new group with the optimizer's defaults overridden by hparams.
// Returns the group's index, or -1 on failure (a parameter already in a group is an error, as
// PyTorch's "some parameters appear in more than one parameter group").
TORC_API int torc_optimizer_add_param_group(torc_optimizer *opt, int n_params, torc_tensor *const *params,
                                            const char *hparams);
TORC_API int torc_optimizer_num_groups(const torc_optimizer *opt);
// Parameters are numbered across groups in the order they were given (PyTorch's state_dict order).
TORC_API int torc_optimizer_num_params(const torc_optimizer *opt);
TORC_API torc_tensor *torc_optimizer_param(const torc_optimizer *opt, int index);  // new reference
// Changes hyperparameters of group `group` (-1: every group) between steps, e.g. a learning
// rate schedule. All-or-nothing: on error no group changes.
TORC_API torc_status torc_optimizer_set_hparams(torc_optimizer *opt, int group, const char *settings);
TORC_API torc_status torc_optimizer_set_hparam(torc_optimizer *opt, int group, const char *name, double value);
TORC_API torc_status torc_optimizer_set_lr(torc_optimizer *opt, double lr);  // every group
// Writes the n_values values of hyperparameter name of group into values
// (room for TORC_OPTIM_HP_MAX_VALUES). TORC_ERR_INVALID_ARG for an unknown name or group.
TORC_API torc_status torc_optimizer_get_hparam(const torc_optimizer *opt, int group, const char *name,
                                               double *values);
// optimizer.step(): one update of every parameter that has a gradient (the others are skipped
// and keep their step count), under no_grad, one parameter at a time: each parameter's
// temporaries are freed before the next one's are made, and new state buffers count as
// TORC_MEM_OPTIMIZER_STATE from their creation (never as activations). A plugin that stores a
// state buffer unlike its parameter (shape, dtype, device) is refused with TORC_ERR_SHAPE.
TORC_API torc_status torc_optimizer_step(torc_optimizer *opt);
// optimizer.zero_grad(set_to_none): drops every parameter's .grad (true, PyTorch's default) or
// zeroes it in place (false).
TORC_API torc_status torc_optimizer_zero_grad(torc_optimizer *opt, bool set_to_none);
// One torch.optim Adam / AdamW update of param in place, with its state exp_avg, exp_avg_sq and,
// with TORC_ADAM_AMSGRAD, max_exp_avg_sq (else NULL), in one pass (TORC_OP_ADAM_STEP; backend.h
// gives the per-element arithmetic): bit for bit torch.optim's single-tensor path as the bundled
// adam and adamw plugins compose it. flags: TORC_ADAM_DECOUPLED (AdamW's p *= 1 - lr*weight_decay
// instead of Adam's grad += weight_decay*p), TORC_ADAM_AMSGRAD, TORC_ADAM_MAXIMIZE. step is the
// parameter's step count including this one (1 first); the bias corrections are computed from it.
// All tensors share param's device, dtype (f64, f32, f16 or bf16) and shape; any layout on host
// devices, contiguous ones on cuda (else TORC_ERR_NOT_SUPPORTED, nothing written). Like
// torch's _fused_adam_ it records no history: with grad mode on, a tensor that requires grad is an
// error (TORC_ERR_AUTOGRAD). Bumps the version counters of the tensors it writes. Errors:
// TORC_ERR_INVALID_ARG (a NULL tensor, unknown flags, step < 1, amsgrad without max_exp_avg_sq or
// the reverse, overlapping tensors, tensors on different devices), TORC_ERR_DTYPE, TORC_ERR_SHAPE;
// nothing is written on an error.
TORC_API torc_status torc_adam_step_(torc_tensor *param, const torc_tensor *grad, torc_tensor *exp_avg,
                                     torc_tensor *exp_avg_sq, torc_tensor *max_exp_avg_sq, double lr, double beta1,
                                     double beta2, double eps, double weight_decay, int64_t step, unsigned flags);
// torch's _fused_adam_ over lists: torc_adam_step_ on each of the n parameters params[i] with
// grads[i], exp_avgs[i], exp_avg_sqs[i], max_exp_avg_sqs[i] (the array NULL without
// TORC_ADAM_AMSGRAD) and its own step count steps[i], the same bits as those n calls, in one backend
// op (TORC_OP_ADAM_STEP_LIST) per group of parameters on one device with one dtype, where the
// backend takes it (else one ADAM_STEP per parameter, as torc_adam_step_). Parameters of different
// dtypes or devices may be mixed. n = 0 does nothing. Every check of torc_adam_step_ is made on
// every parameter before anything is written, the message naming the list and index ("exp_avgs[2]");
// also TORC_ERR_INVALID_ARG when the tensors of two parameters share memory that either writes.
// On an error from a backend after the checks, the groups before it have been updated.
TORC_API torc_status torc_adam_step_list_(int n, torc_tensor *const *params, torc_tensor *const *grads,
                                          torc_tensor *const *exp_avgs, torc_tensor *const *exp_avg_sqs,
                                          torc_tensor *const *max_exp_avg_sqs, const int64_t *steps, double lr,
                                          double beta1, double beta2, double eps, double weight_decay,
                                          unsigned flags);
// State buffer `buffer` ("exp_avg") of parameter `index` (a new reference), or NULL: with
// TORC_ERR_INVALID_ARG for an unknown buffer or index, without an error when not created yet.
TORC_API torc_tensor *torc_optimizer_state(const torc_optimizer *opt, int index, const char *buffer);
// How many updates parameter index has had (PyTorch's state["step"]); -1 for a bad index.
TORC_API int64_t torc_optimizer_param_step_count(const torc_optimizer *opt, int index);
// optimizer.state_dict() into sd under prefix (NULL: "optimizer."): tensors
// "<prefix>state.<i>.<buffer>" (retained, not copied) and metadata "<prefix>name",
// "<prefix>state.<i>.step", "<prefix>param_groups" (the count), "<prefix>param_groups.<g>.params"
// ("0,1,2") and "<prefix>param_groups.<g>.<hparam>" (values printed exactly, "%.17g").
TORC_API torc_status torc_optimizer_state_dict(const torc_optimizer *opt, torc_state_dict *sd, const char *prefix);
// optimizer.load_state_dict(): checks everything first (optimizer name, group count and sizes,
// hyperparameter names and values, every state tensor's shape and dtype against its parameter)
// and changes nothing on error; then copies the state into this optimizer's own tensors.
TORC_API torc_status torc_optimizer_load_state_dict(torc_optimizer *opt, const torc_state_dict *sd,
                                                    const char *prefix);

// ---- mixed precision: loss scaling (torch.amp.GradScaler) ----
// Dynamic loss scaling for f16 training (harmless, and unneeded, for bf16): scale the loss
// before backward, unscale the gradients before the step, skip the step when any gradient is
// inf or NaN and lower the scale, raise it after growth_interval clean steps:
//   loss = torc_grad_scaler_scale(gs, loss); torc_backward(loss, NULL, false);
//   torc_grad_scaler_step(gs, opt, NULL);   // unscales (unless unscale_ ran), steps if finite
//   torc_grad_scaler_update(gs);
// The scale is a float32 number, as PyTorch's (its updates round to f32); its state lives on
// the host, and each inf/NaN check reads one number per gradient from its device.
typedef struct torc_grad_scaler torc_grad_scaler;
typedef struct torc_grad_scaler_options {
    double init_scale;        // 65536 (2^16)
    double growth_factor;     // 2.0, > 1
    double backoff_factor;    // 0.5, in (0, 1)
    int64_t growth_interval;  // 2000, >= 1
    bool enabled;             // false: every call passes through (scale() returns the loss)
} torc_grad_scaler_options;
#define TORC_GRAD_SCALER_DEFAULTS {65536.0, 2.0, 0.5, 2000, true}
// A new scaler (opts NULL: the defaults); caller frees with torc_grad_scaler_free. NULL with
// TORC_ERR_INVALID_ARG and PyTorch's message for a bad option ("The growth factor must be > 1.0.").
TORC_API torc_grad_scaler *torc_grad_scaler_new(const torc_grad_scaler_options *opts);
TORC_API void torc_grad_scaler_free(torc_grad_scaler *gs);  // NULL ok
// loss * scale, differentiable (a new reference; loss itself when disabled). The scale is a
// zero-dim f32 tensor and promotion decides the dtype, as in PyTorch: a zero-dim loss becomes
// f32, a dimensioned f16 loss stays f16.
TORC_API torc_tensor *torc_grad_scaler_scale(torc_grad_scaler *gs, const torc_tensor *loss);
// unscale_(optimizer): divides the .grad of every parameter of opt by the scale, in place, and
// records whether any of them holds an inf or NaN. Once per optimizer between updates
// (TORC_ERR_RUNTIME: "unscale_() has already been called on this optimizer since the last
// update()." / "unscale_() is being called after step()."); f16 gradients are refused
// (TORC_ERR_DTYPE "Attempting to unscale FP16 gradients.": keep f32 master parameters).
TORC_API torc_status torc_grad_scaler_unscale_(torc_grad_scaler *gs, torc_optimizer *opt);
// The same for gradients an optimizer does not hold (a hand-written update): grads[i] are
// unscaled in place (NULL entries are skipped); the check is recorded with the optimizers'.
TORC_API torc_status torc_grad_scaler_unscale_grads_(torc_grad_scaler *gs, int n, torc_tensor *const *grads);
// Whether any unscale since the last update found an inf or NaN (false when disabled).
TORC_API bool torc_grad_scaler_found_inf(const torc_grad_scaler *gs);
// step(optimizer): unscales opt's gradients unless unscale_ already did, then runs
// torc_optimizer_step unless an inf/NaN was found for it. *stepped (may be NULL) says
// which. Once per optimizer between updates (TORC_ERR_RUNTIME "step() has already been called
// since the last update()."). Disabled: a plain torc_optimizer_step.
TORC_API torc_status torc_grad_scaler_step(torc_grad_scaler *gs, torc_optimizer *opt, bool *stepped);
// update(): scale *= backoff_factor and the growth tracker resets when any recorded check found
// an inf/NaN; else the tracker counts one more clean step and, reaching growth_interval, the
// scale grows by growth_factor (if the result is finite) and the tracker resets. Clears the
// per-optimizer records. TORC_ERR_RUNTIME "No inf checks were recorded prior to update." when
// nothing was unscaled since the last update. A no-op when disabled.
TORC_API torc_status torc_grad_scaler_update(torc_grad_scaler *gs);
TORC_API double torc_grad_scaler_get_scale(const torc_grad_scaler *gs);  // 1.0 when disabled
// The whole state (torch's state_dict: scale, factors, interval, _growth_tracker) for
// checkpoints. set_state checks the options as torc_grad_scaler_new does (and scale > 0,
// growth_tracker >= 0) and clears the per-optimizer records.
typedef struct torc_grad_scaler_state {
    torc_grad_scaler_options options;
    double scale;
    int64_t growth_tracker;
} torc_grad_scaler_state;
TORC_API torc_status torc_grad_scaler_get_state(const torc_grad_scaler *gs, torc_grad_scaler_state *out);
TORC_API torc_status torc_grad_scaler_set_state(torc_grad_scaler *gs, const torc_grad_scaler_state *st);
// The state as metadata of a state dict under prefix (NULL: "grad_scaler."): "scale",
// "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker", "enabled" (exact,
// "%.17g"); load reads them back (TORC_ERR_INVALID_ARG naming a missing or malformed key,
// changing nothing).
TORC_API torc_status torc_grad_scaler_state_dict(const torc_grad_scaler *gs, torc_state_dict *sd, const char *prefix);
TORC_API torc_status torc_grad_scaler_load_state_dict(torc_grad_scaler *gs, const torc_state_dict *sd,
                                                      const char *prefix);

// ---- checkpoints ----
// One safetensors file with a training run's state: the model's tensors under their own names
// (so Python tools read the weights as they are), the optimizer (torc_optimizer_state_dict
// under "optimizer."), and metadata "torc.format" = "torc-checkpoint/1", "step", and the
// generator's "generator.seed" / "generator.offset". opt and gen may be NULL.
// Written atomically (see torc_save).
TORC_API torc_status torc_checkpoint_save(const char *path, int n, const char *const *names,
                                          torc_tensor *const *tensors, const torc_optimizer *opt, int64_t step,
                                          const torc_generator *gen);
// Restores what torc_checkpoint_save wrote into existing tensors (copied in place under no_grad),
// opt, *step and gen (any of the last three may be NULL to skip it). Refuses, changing nothing:
// an unreadable/truncated/corrupted file (TORC_ERR_IO), a missing or unexpected name, a shape or
// dtype that differs (TORC_ERR_SHAPE / TORC_ERR_DTYPE, naming the tensor), an optimizer that
// does not match (TORC_ERR_INVALID_ARG).
TORC_API torc_status torc_checkpoint_load(const char *path, int n, const char *const *names,
                                          torc_tensor *const *tensors, torc_optimizer *opt, int64_t *step,
                                          torc_generator *gen);

// ---- distributed: collectives across processes and data-parallel training ----
// torc talks to an existing engine through a comm plugin (torc/comm.h), loaded like a backend:
// libtorc_comm_mpi.so (Open MPI, host-memory tensors) or libtorc_comm_nccl.so (NCCL, CUDA
// tensors), from TORC_PLUGIN_PATH then lib/torc/. The first file of the name decides; one that
// cannot load is an error listing every file tried and why. Launch with `mpirun -np N prog`.
// Every rank must call the same collectives in the same order (MPI's rule).
// A collective that does not finish within TORC_COMM_TIMEOUT seconds (default 60; 0: no limit;
// anything but a number from 0 to 1e9 is an error of torc_dist_init) fails with a message naming
// this rank and saying another one died or stopped; torc_dist_abort then ends the job (a rank
// that dies outright is reported by mpirun, which ends the others at once). Ranks whose
// collectives differ (another collective, dtype, op, root or element count at the same point)
// fail together before any data moves, with a message naming the difference: a peer's count
// never writes past a buffer (the plugin checks, torc/comm.h).
typedef enum torc_reduce_op {
    TORC_REDUCE_SUM = 0,
    TORC_REDUCE_AVG,   // the sum divided by the world size (in f32 for f16/bf16, rounded once)
    TORC_REDUCE_MAX,
    TORC_REDUCE_MIN
} torc_reduce_op;
typedef struct torc_work torc_work;  // a started collective (torc_dist_wait frees it)

// Loads comm plugin `name` ("mpi", "nccl"; NULL: $TORC_COMM, else "mpi") and joins the job.
// Once per process; a second call with the same plugin is a no-op, with another an error.
// TORC_ERR_BACKEND when the plugin cannot load or its init fails (the reason included).
TORC_API torc_status torc_dist_init(const char *name);
TORC_API bool torc_dist_is_initialized(void);
// This process's rank, the number of processes, and its rank among those on its host: 0, 1, 0
// before torc_dist_init.
TORC_API int torc_dist_rank(void);
TORC_API int torc_dist_world_size(void);
TORC_API int torc_dist_local_rank(void);
// The index of the device this process's collectives run on, for a plugin on device memory that
// says (nccl: local rank % GPUs on the host, as torch.cuda.set_device(local_rank)); -1 for a
// host-memory plugin (mpi) or before torc_dist_init. Tensors handed to a collective must be on
// that device (e.g. "cuda:1"): others are refused with a message naming it.
TORC_API int torc_dist_device_index(void);
// Leaves the job (MPI_Finalize when the plugin started MPI). Outstanding works must be waited.
TORC_API torc_status torc_dist_shutdown(void);
// Ends every process of the job with exit code `code` (MPI_Abort); exit(code) when not initialised.
TORC_API void torc_dist_abort(int code);
// Checks that every rank passed the same n settings (names and values as strings, e.g. the
// options a training run was started with): digests are compared across the job and the first
// name whose value differs is refused on every rank, TORC_ERR_INVALID_ARG "the ranks disagree
// on --lr: rank 0 has 0.01, rank 1 has 0.02" (rank 0's value and that of the first rank that
// differs from it, up to 95 characters each). A collective: every rank calls it. torc_ddp_new
// runs it on the model's shapes and its options.
TORC_API torc_status torc_dist_check_same(int n, const char *const *names, const char *const *values);

// Collectives on tensors. f32, f64, i32 and i64 reduce natively; f16 and bf16 are widened to
// f32 for the reduction and rounded once into t (AVG divides before rounding); other dtypes are
// TORC_ERR_DTYPE for reductions, and move as bytes in broadcast and all_gather. Any strides: a
// non-contiguous tensor goes through a contiguous copy. The tensors must be on a device the
// plugin serves (host memory for mpi, CUDA for nccl; else TORC_ERR_INVALID_ARG).
// work NULL: blocking. work != NULL: the call only starts the collective and sets *work; the
// tensors must not be read or written until torc_dist_wait(*work) returns (which frees it).
// Errors (any rank's failure, a timeout) are TORC_ERR_RUNTIME naming the rank.
// all_reduce: t = op over ranks of t, in place.
TORC_API torc_status torc_dist_all_reduce(torc_tensor *t, torc_reduce_op op, torc_work **work);
// broadcast: t of rank root into t on every rank (same shape and dtype everywhere).
TORC_API torc_status torc_dist_broadcast(torc_tensor *t, int root, torc_work **work);
// all_gather (torch's all_gather_into_tensor): out (world_size * n, ...) = the `in` (n, ...) of
// ranks 0, 1, ... stacked along dim 0. Same dtype; TORC_ERR_SHAPE otherwise.
TORC_API torc_status torc_dist_all_gather(torc_tensor *out, const torc_tensor *in, torc_work **work);
// reduce_scatter (torch's reduce_scatter_tensor): out (n, ...) = rows [rank*n, (rank+1)*n) of
// op over ranks of in (world_size * n, ...).
TORC_API torc_status torc_dist_reduce_scatter(torc_tensor *out, const torc_tensor *in, torc_reduce_op op,
                                              torc_work **work);
TORC_API torc_status torc_dist_barrier(void);
// Waits for a started collective and frees it (NULL: TORC_OK). The tensors hold the result after.
TORC_API torc_status torc_dist_wait(torc_work *work);

// Distributed data parallel (PyTorch's DDP): each rank holds the whole model and the same
// optimizer; gradients are all-reduced and averaged, so every rank takes the same step.
// torc_ddp_new broadcasts the parameters from rank 0 (all ranks start equal) and groups them in
// buckets in reverse order (backward produces the last layers' gradients first): the first
// bucket holds at most first_bucket_bytes, the others at most bucket_cap_bytes (a parameter
// larger than a cap gets a bucket of its own). During torc_backward, a bucket is all-reduced as
// soon as its last gradient is accumulated, while backward goes on with earlier layers; buckets
// start in order on every rank. torc_ddp_finish waits for them and writes each .grad = the mean
// over ranks. Gradient accumulation (PyTorch's no_sync): backward passes run before
// torc_ddp_begin only add into .grad on this rank; call it before the step's last backward,
// which reduces the sum (scale each micro-batch's loss by 1 / their count for the mean).
// Under fp8 autocast, torc_ddp_finish also takes the max of the step's amax over the ranks, so
// every rank and every world size scales alike (the history gets a row a step, not a forward).
// Gradient memory: plain mode 2x the parameters' f32 bytes (.grad and the buckets); the
// deterministic mode at most (3 + log2(micro_batches / world size))x plus world size - 1
// elements a bucket (its top of the tree goes W chunks at a time).
typedef struct torc_ddp torc_ddp;
typedef struct torc_ddp_options {
    int64_t bucket_cap_bytes;    // default 25 MiB (PyTorch's bucket_cap_mb)
    int64_t first_bucket_bytes;  // default 1 MiB (PyTorch's first bucket)
    // Parameters that may get no gradient in a step (PyTorch's find_unused_parameters): the
    // buckets still reduce (a missing gradient counts as zeros), and a parameter that no rank
    // gave a gradient keeps .grad NULL. Off: finish fails naming the parameters that got none.
    bool find_unused_parameters;
    // Bit-identical results for every world size dividing micro_batches: the global batch is
    // cut into micro_batches fixed pieces, each rank runs its share (torc_ddp_micro_batches says
    // which) with one torc_backward each, and the pieces' gradients are summed in one fixed
    // pairwise tree whatever the process count (subtrees on each rank, the top of the tree after
    // an all-gather), then divided by micro_batches. Loss a mean over its micro-batch.
    bool deterministic;
    int micro_batches;           // deterministic mode: a power of two (default 4)
} torc_ddp_options;
#define TORC_DDP_OPTIONS_DEFAULT {25 << 20, 1 << 20, false, false, 4}
// params: n leaf tensors (borrowed; they must outlive the ddp), the same shapes on every rank
// (checked). Needs torc_dist_init. NULL opts: the defaults. Caller frees with torc_ddp_free.
TORC_API torc_ddp *torc_ddp_new(int n, torc_tensor *const *params, const torc_ddp_options *opts);
TORC_API void torc_ddp_free(torc_ddp *d);  // NULL ok
// Deterministic mode: this rank's micro-batches are [*first, *first + *count) of micro_batches.
TORC_API void torc_ddp_micro_batches(const torc_ddp *d, int *first, int *count);
// Call before this step's (first) backward: arms the gradient hooks. In deterministic mode,
// call it before each micro-batch's backward, with micro the micro-batch's index.
TORC_API torc_status torc_ddp_begin(torc_ddp *d, int micro);
// After the step's last backward: waits for every bucket and sets each .grad to the average.
TORC_API torc_status torc_ddp_finish(torc_ddp *d);
// A loss (or any scalar) as the whole global batch's: the mean over ranks (deterministic mode:
// pass this rank's micro-batch losses in order, count = its micro-batch count; they are summed in
// the same fixed tree as the gradients and divided by micro_batches). Blocking.
TORC_API torc_status torc_ddp_reduce_loss(torc_ddp *d, const double *local, int count, double *global);
// What the last finished steps cost, summed since torc_ddp_new: steps, bytes all-reduced
// (gathered in deterministic mode) per step, seconds collectives were in flight, and how many
// of those seconds lay before backward ended (hidden behind it).
typedef struct torc_ddp_stats {
    int64_t steps;
    int64_t bytes_per_step;
    double comm_s, hidden_s;
} torc_ddp_stats;
TORC_API torc_status torc_ddp_stats_get(const torc_ddp *d, torc_ddp_stats *stats);

// ---- data loading ----
// A token (or value) array on disk, memory-mapped read-only: pages are read when a batch
// touches them, never the whole file (the course's np.memmap).
typedef struct torc_dataset torc_dataset;
// Opens path: a .npy file (recognised by its magic string; dtype NULL takes the header's,
// else the header must match) or a raw little-endian array of `dtype` elements. dtype is a
// NumPy name: "uint8", "int8", "uint16", "int16", "uint32", "int32", "int64", "float16",
// "float32", "float64" (or a .npy descr such as "<u2"). Errors, all TORC_ERR_IO naming the
// file: missing or unreadable, empty, a raw size that is not a whole number of elements, a
// .npy header that is malformed, big-endian, Fortran-ordered (ndim > 1), of another dtype, or
// promising more data than the file holds. TORC_ERR_INVALID_ARG: dtype NULL for a raw file or
// an unknown dtype name. Caller closes with torc_dataset_close.
TORC_API torc_dataset *torc_dataset_open(const char *path, const char *dtype);
TORC_API void torc_dataset_close(torc_dataset *ds);  // NULL ok
TORC_API int64_t torc_dataset_numel(const torc_dataset *ds);  // elements (all dims of a .npy)
TORC_API const char *torc_dataset_dtype(const torc_dataset *ds);  // NumPy name, "uint16"
// The .npy shape (a raw file is 1-D); ndim returned, shape (room for TORC_MAX_DIMS) may be NULL.
TORC_API int torc_dataset_shape(const torc_dataset *ds, int64_t *shape);
// The course's get_batch over the flattened array: batch start indices s uniform in
// [0, numel - seq_len) from gen (NULL: the default generator; `batch` counters are used), then
// x[b] = data[s_b : s_b + seq_len] and y[b] = data[s_b + 1 : s_b + seq_len + 1] (the targets,
// shifted by one). Both are (batch, seq_len) on dev (NULL: the default device): int64 for
// integer data, the file's dtype for floating data. When dev is not host memory the batch is
// gathered into a pinned host buffer and copied asynchronously. *y may be NULL to skip targets.
// New references in *x / *y; TORC_ERR_INVALID_ARG if numel <= seq_len (naming the file) or
// batch/seq_len < 1. From a token file (torc_tokens_open) every token read is checked: TORC_ERR_IO
// naming the file and the bad token's byte offset (the generator has advanced by then).
TORC_API torc_status torc_get_batch(torc_dataset *ds, int64_t batch, int64_t seq_len, torc_device *dev,
                                    torc_generator *gen, torc_tensor **x, torc_tensor **y);
// Data parallel: rank's share of the global batch, rows [rank * global_batch / world, (rank + 1) *
// global_batch / world) of what torc_get_batch(ds, global_batch, ...) draws from the same
// generator state, which advances by global_batch counters on every rank. So the ranks' streams
// stay aligned step after step and their union in rank order is the one-process batch.
// TORC_ERR_INVALID_ARG when world does not divide global_batch or rank is out of range.
TORC_API torc_status torc_get_batch_shard(torc_dataset *ds, int64_t global_batch, int64_t seq_len, int rank, int world,
                                          torc_device *dev, torc_generator *gen, torc_tensor **x, torc_tensor **y);
// llm.c's DataLoader, in order instead of at random: the global batch is global_batch rows of
// seq_len consecutive elements of the flattened data from the dataset's position p, row i =
// data[p + i*seq_len : p + (i+1)*seq_len] and its target row the same shifted by one. rank gets
// rows [rank*global_batch/world, (rank+1)*global_batch/world) (llm.c's current_position =
// p + B*T*rank for B = global_batch/world), then p advances by global_batch*seq_len on every rank
// and returns to 0 where the next global batch and its last target would pass the end (llm.c's
// wrap: a tail shorter than a batch is skipped). So the ranks' batches in rank order are the
// one-process batch, step after step, for every world size dividing global_batch. Tensors and
// token checks as torc_get_batch. TORC_ERR_INVALID_ARG, with p unchanged: numel <
// global_batch*seq_len + 1 (naming the file), batch/seq_len < 1, world not dividing global_batch,
// rank out of range. A dataset's position is not shared between threads' calls.
TORC_API torc_status torc_next_batch(torc_dataset *ds, int64_t batch, int64_t seq_len, torc_device *dev,
                                     torc_tensor **x, torc_tensor **y);  // rank 0 of 1
TORC_API torc_status torc_next_batch_shard(torc_dataset *ds, int64_t global_batch, int64_t seq_len, int rank, int world,
                                           torc_device *dev, torc_tensor **x, torc_tensor **y);
// Where torc_next_batch's next global batch starts (an element index, 0 at open): with the
// generator's state (torc_generator_get_state) what a checkpoint needs for an exact resume.
TORC_API int64_t torc_dataset_position(const torc_dataset *ds);
// TORC_ERR_INVALID_ARG unless 0 <= position <= numel (one too close to the end wraps to 0 at the
// next batch).
TORC_API torc_status torc_dataset_set_position(torc_dataset *ds, int64_t position);

// ---- token files (language models) ----
// llm.c's shards, nanoGPT's raw uint16 .bin and 1-D .npy arrays, opened as datasets of their
// tokens: torc_get_batch / _shard draw random windows from them, torc_next_batch / _shard read
// them in order, and each token a batch reads is checked (>= 0, below vocab_size when given).
// Byte-level files (vocab 256) for any text: the torc-tokens tool (docs/data.md).
typedef enum torc_token_format {
    TORC_TOKENS_AUTO = 0,  // torc_tokens_open: by the content; torc_tokens_format: not a token file
    TORC_TOKENS_LLMC = 1,  // llm.c shard: 256 int32 header (magic 20240520, version 1, token count)
                           // then uint16 tokens; llm.c's llama-3 shards (20240801, 7) hold uint32
    TORC_TOKENS_U16 = 2,   // nanoGPT's .bin: raw little-endian uint16 tokens, no header
    TORC_TOKENS_NPY = 3,   // .npy (format 1, 2 or 3), 1-D, uint16, int32, uint32 or int64 ('<u2' ...)
} torc_token_format;
// Opens a token file (memory-mapped: the header is read, the tokens only when a batch or
// torc_tokens_check touches them). TORC_TOKENS_AUTO: the .npy magic is .npy, an llm.c token
// magic is an llm.c shard, anything else is raw uint16, except a name ending in ".npy" (refused
// without the magic) and the other llm.c files (model 20240326, tokenizer 20240328, eval 20240522:
// refused by name). vocab_size > 0: tokens must be below it; 0: only negative ones are refused.
// Not scanning at open keeps a 10 GB shard's open instant; torc_tokens_check reads all once.
// Errors, TORC_ERR_IO naming the file and the byte offset of what is wrong: missing, unreadable,
// empty; an llm.c header with another magic (offset 0), version (4) or a negative count (8); a
// size other than 1024 + count * token size (short: where the file ends, inside which token);
// a raw file of an odd size; a .npy that is not 1-D or of another dtype, and torc_dataset_open's
// .npy errors. TORC_ERR_INVALID_ARG: path NULL, format or vocab_size out of range. The dataset's
// dtype is the file's ("uint16", ...), its batches int64. Close with torc_dataset_close.
TORC_API torc_dataset *torc_tokens_open(const char *path, torc_token_format format, int64_t vocab_size);
TORC_API torc_token_format torc_tokens_format(const torc_dataset *ds);   // as read (never AUTO for tokens)
TORC_API const char *torc_token_format_name(torc_token_format format); // "llm.c shard", "uint16 .bin", ...
TORC_API int64_t torc_tokens_vocab_size(const torc_dataset *ds);       // as opened; 0: unchecked
// Reads every element once, in order (the whole file: for a token file the check a batch makes,
// so a vocab that does not match the data is refused before the first step; see docs/data.md
// for its cost) and returns the largest in *max_token (may be NULL; -1 when there are none).
// TORC_ERR_IO naming the first bad token's byte offset; TORC_ERR_INVALID_ARG for floating-point data.
TORC_API torc_status torc_tokens_check(torc_dataset *ds, int64_t *max_token);

#ifdef __cplusplus
}
#endif
#endif
