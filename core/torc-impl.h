// core/torc-impl.h — struct bodies and internal helpers of libtorc. Only core/*.c include it;
// backends and plugins see torc/backend.h and torc/optim.h only.
// Internal functions are named torc__xxx (two underscores) and are not exported.
#ifndef TORC_IMPL_H
#define TORC_IMPL_H

#include <stdatomic.h>

#include "torc/torc.h"

// ---- errors (error.c) ----
// Sets the thread's last error and returns status, so callers write
// `return torc__error(TORC_ERR_SHAPE, "...")`.
torc_status torc__error(torc_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// Same, for functions returning a pointer: sets the error and evaluates to NULL.
#define TORC_FAIL_NULL(status, ...) (torc__error((status), __VA_ARGS__), (void *)0)
// Every "... is NULL" argument check reports through these. A NULL argument usually is the
// result of an earlier call that failed (torc_pow(torc_sub(a, b), 2)), so when an error is
// already set it is kept and its status returned: the user sees the first error of a chain,
// not "tensor is NULL". Otherwise the message is set with TORC_ERR_INVALID_ARG.
torc_status torc__null_arg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define TORC_NULL_ARG_FAIL(...) (torc__null_arg(__VA_ARGS__), (void *)0)
// Python's repr of a float ("2.0", "0.001", "1e-08", "inf", "nan") into buf, for messages that
// quote a Python float as PyTorch's do ("but got 1.5"). Returns buf.
const char *torc__py_float(double v, char *buf, size_t n);

// ---- devices (device.c) ----
typedef struct torc_backend_lib torc_backend_lib;  // one loaded plugin file

struct torc_device {
    const torc_backend_vtable *vt;
    void *ctx;               // the backend instance's context (its init's), passed to every call
    torc_backend_lib *lib;
    int index;               // device index within its backend
    char name[48];           // "cpu", "cuda:0", "reference"
    torc_device_info info;
    bool host_memory;
    // accounting (accounting.c), updated with atomics
    _Atomic uint64_t in_use[TORC_MEM_TAG_COUNT];
    _Atomic uint64_t peak[TORC_MEM_TAG_COUNT];
    _Atomic uint64_t total_in_use, total_peak;
};

// ---- the plugin loader (plugin.c), one for every kind of plugin ----
// A kind names its files <prefix><name>.so and exports entry_symbol.
typedef struct torc__plugin_kind {
    const char *what;          // "backend", "optimizer": in messages
    const char *prefix;        // "libtorc_", "libtorc_optim_"
    const char *entry_symbol;  // the one exported function
} torc__plugin_kind;
extern const torc__plugin_kind torc__plugin_backend, torc__plugin_optimizer, torc__plugin_comm;
// The kind's own checks of a plugin whose entry symbol was found: returns what the kind keeps
// for it, or NULL with the reason in why (then the loader dlcloses handle unless *keep_open).
typedef void *(*torc__plugin_accept_fn)(void *ctx, const char *path, void *handle, void *entry, char *why, size_t n,
                                        bool *keep_open);
// Loads <prefix><name>.so from the directories of TORC_PLUGIN_PATH, then <directory of
// libtorc.so>/torc. The first file of that name decides: if it cannot be loaded (not a file,
// dangling link, unreadable, not a library, no entry symbol, refused by accept) that is the
// error, never a later file. The error (TORC_ERR_BACKEND) lists every file tried and why, and
// the kind's plugins that are there. name must already be checked (no '/').
void *torc__plugin_load(const torc__plugin_kind *kind, const char *name, torc__plugin_accept_fn accept, void *ctx);
// The same for one file given by its path.
void *torc__plugin_load_file(const torc__plugin_kind *kind, const char *path, torc__plugin_accept_fn accept, void *ctx);
// The version rule of every kind: a plugin of another major is refused (the message names both
// versions), one of any minor of the same major is taken if its vtable (struct_size) holds at
// least the x.0 members (min_size). abi names the ABI in messages ("backend", "optimizer").
bool torc__plugin_version_ok(const char *abi, uint32_t host_version, uint32_t plugin_version, uint32_t struct_size,
                             size_t min_size, char *why, size_t n);

// The reference backend's device 0 (loaded on demand): the fallback for host-memory devices
// and the oracle for tools. NULL (with the error set) if it cannot be loaded.
torc_device *torc__reference_device(void);

// ---- storage and tensors (tensor.c) ----
typedef struct torc_storage {
    _Atomic int refcount;
    torc_device *alloc_device;  // the device whose allocator owns data
    void *data;
    size_t nbytes;
    _Atomic uint64_t version;   // bumped by every in-place write
    torc_mem_tag tag;
} torc_storage;

typedef struct torc_node torc_node;  // autograd graph node (autograd.c)
typedef struct torc__fp8_meta torc__fp8_meta;  // fp8 autocast's delayed-scaling state (autocast.c)

struct torc_tensor {
    _Atomic int refcount;
    torc_storage *storage;
    torc_device *device;        // where ops on this tensor run (may differ from
                                // storage->alloc_device between host-memory backends)
    torc_dtype dtype;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    int64_t stride[TORC_MAX_DIMS];
    int64_t offset;             // storage offset in elements
    // autograd (autograd.c)
    bool requires_grad;
    bool retains_grad;
    torc_tensor *grad;          // accumulated gradient (owned), NULL if none
    torc_node *grad_fn;         // owned reference to the node that produced it, NULL for leaves
    int output_nr;              // which output of grad_fn this is
    torc__fp8_meta *fp8_meta;   // owned; set on a parameter by fp8 autocast, else NULL
    // views (PyTorch's _base), kept by torc__autograd_view so that an in-place write through a
    // view rebases its base's history (CopySlices) and other views of it follow (autograd.c)
    torc_tensor *view_base;     // owned: the tensor a view was taken from (never a view), or NULL
    uint64_t view_version;      // storage version when grad_fn was last derived from view_base
    const char *view_no_grad;   // NULL; "" for a view made under no_grad; for a view made from
                                // such a view with grad mode on, its grad_fn name
    _Atomic(struct torc__ident *) ident; // owned: how saved copies of this tensor name its grad_fn
};

// Thread-locals read on every op (the scope stack, the pools, grad mode, the phase, the backend
// being called): the initial-exec model makes each read a plain load instead of a
// __tls_get_addr call. They total under 64 bytes, which fits the static TLS glibc reserves even
// when libtorc is dlopen'ed.
#define TORC__TLS_HOT __attribute__((tls_model("initial-exec")))

// Drops one reference of a refcount and says whether it was the last. When the count reads 1 the
// caller holds the only reference, so no other thread can take one meanwhile: the common unique
// case then costs a load instead of a locked read-modify-write.
static inline bool torc__unref(_Atomic int *refcount) {
    return atomic_load_explicit(refcount, memory_order_acquire) == 1 || atomic_fetch_sub(refcount, 1) == 1;
}

// Free lists of fixed-size objects (tensor.c): per thread, bounded, zeroed on allocation. An
// object may be freed on any thread; size is the object's sizeof, the same for a kind.
typedef enum torc__pool_kind { TORC__POOL_TENSOR, TORC__POOL_STORAGE, TORC__POOL_NODE, TORC__POOL_KINDS } torc__pool_kind;
void *torc__pool_alloc(torc__pool_kind kind, size_t size);
void torc__pool_free(torc__pool_kind kind, void *p, size_t size);

// Ownership inside the core: torc__new / torc__make_view return an UNREGISTERED reference that
// the caller owns (release it on error paths); a public function hands its result to the
// caller's scope with `return torc__register(t)`. Composite functions that call public
// functions wrap them in torc_scope_push / torc_keep(result) / torc_scope_pop.
// Allocates storage for numel elements on dev and wraps it in a contiguous tensor.
torc_tensor *torc__new(torc_device *dev, torc_dtype dtype, int ndim, const int64_t *shape);
// A new tensor header over t's storage (a view); shape/stride/offset given.
torc_tensor *torc__make_view(const torc_tensor *t, int ndim, const int64_t *shape,
                             const int64_t *stride, int64_t offset);
// Hands a freshly created reference to the current scope (if any) and returns t.
torc_tensor *torc__register(torc_tensor *t);
// Row-major strides of shape; false when they overflow int64_t (possible only for an empty
// shape: a nonempty one's strides are below its numel), the strides then being meaningless.
bool torc__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
int64_t torc__numel(int ndim, const int64_t *shape);  // shapes already checked (0 if one overflows)

// ---- overflow-checked sizes (size.c): every size computed from user input or a file ----
// Each returns true with the result, or false with *out untouched; the _err forms also set
// PyTorch's error ("Storage size calculation overflowed with sizes=[...]", TORC_ERR_INVALID_ARG).
static inline bool torc__size_mul(int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}
static inline bool torc__size_add(int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}
// The element count of a shape (dims >= 0; a 0 dim gives 0 whatever the others).
bool torc__numel_checked(int ndim, const int64_t *shape, int64_t *numel);
// numel * itemsize as a byte count that fits int64_t and size_t.
bool torc__nbytes_checked(int64_t numel, size_t itemsize, size_t *nbytes);
// The bytes a strided view needs from its storage's start: (offset + sum (shape-1)*stride + 1)
// * itemsize, 0 when any dim is 0. Strides >= 0, offset >= 0.
bool torc__extent_checked(int ndim, const int64_t *shape, const int64_t *stride, int64_t offset,
                          size_t itemsize, size_t *nbytes);
// The same three, setting the error on overflow (sizes and, for the extent, strides named).
bool torc__numel_err(int ndim, const int64_t *shape, int64_t *numel);
bool torc__nbytes_err(int ndim, const int64_t *shape, size_t itemsize, size_t *nbytes);
bool torc__extent_err(int ndim, const int64_t *shape, const int64_t *stride, int64_t offset,
                      size_t itemsize, size_t *nbytes);
void torc__bump_version(torc_tensor *t);
// The torc_operand a backend sees for t (data pointer with the offset applied).
void torc__operand(const torc_tensor *t, torc_operand *op);
// Normalises dim (negative counts from the end) against ndim; false + error if out of range.
// PyTorch's message: "Dimension out of range (expected to be in range of [-2, 1], but got 2)".
bool torc__wrap_dim(int *dim, int ndim);
// "[2, 3]" into buf, for error messages.
const char *torc__shape_str(int ndim, const int64_t *shape, char *buf, size_t n);
#define TORC_SHAPE_STR_MAX 160

// ---- dispatch (dispatch.c) ----
// Runs op on dev: the device's backend if it supports it, else the reference backend when dev
// is host memory, else TORC_ERR_NOT_SUPPORTED. Counts flops for (phase, opcode, dtype).
torc_status torc__dispatch(torc_device *dev, torc_op *op, uint64_t flops);
// Whether dev's own backend takes op (the minor gate, then supports()): TORC_OK, or
// TORC_ERR_NOT_SUPPORTED naming why. torc__dispatch_native runs it there or fails so.
torc_status torc__native_check(torc_device *dev, torc_op *op);
// The same test as a yes or no, setting no error (for ops with a fallback of their own).
bool torc__runs_natively(torc_device *dev, torc_op *op);
torc_status torc__dispatch_native(torc_device *dev, torc_op *op);
// Runs op on dev's backend, whose supports() the caller has just seen take it (torc__runs_natively),
// counting flops as torc__dispatch does: a MATMUL_ROUNDED asked supports() once instead of twice
// (each a primitive-cache lookup of the op's ~700-byte key in the oneDNN backend).
torc_status torc__dispatch_supported(torc_device *dev, torc_op *op, uint64_t flops);
// Runs elems[0 .. n) (complete ops of one element opcode, one device and one out dtype, none
// writing what another reads: the caller checked) as one list op `code` (backend.h's v2.6) where a
// backend takes it: dev's, or the reference on host memory; else each element through
// torc__dispatch. flops[i] is element i's count. Sets each element's struct_size.
torc_status torc__dispatch_list(torc_device *dev, torc_opcode code, torc_op *elems, int n, const uint64_t *flops);
// The one wrapper per vtable member (SQLite's pattern): version checks live here.
void *torc__dev_alloc(torc_device *dev, size_t nbytes);
void torc__dev_free(torc_device *dev, void *ptr);
torc_status torc__dev_copy(torc_device *dev, void *dst, const void *src, size_t n,
                           torc_copy_kind kind);
torc_status torc__dev_sync(torc_device *dev);
// Pinned host memory from dev's backend (backend ABI v1.1 host_alloc), or NULL without an error
// when the backend has none; free it with torc__dev_host_free.
void *torc__dev_host_alloc(torc_device *dev, size_t nbytes);
void torc__dev_host_free(torc_device *dev, void *ptr);
// A copy that may still run after the call returns (the backend's async flag); synchronize
// before reusing src.
torc_status torc__dev_copy_async(torc_device *dev, void *dst, const void *src, size_t n, torc_copy_kind kind);
// Shutdown (device.c's shutdown_all and torc_shutdown). After it begins on a backend the
// wrappers above make no call on its ctx: free and host_free drop the pointer, alloc fails.
// torc__tls_calling is the backend whose member runs on this thread now (set by the wrappers
// around run, supports and synchronize, where libraries that may call exit() run), so that the
// exit handler leaves that backend, whose locks may be held, alone. torc__pools_drain (tensor.c)
// returns every thread's pooled data buffers, except skip's, to their backends and ends pooling
// (false if the registry is busy and wait is false: the exit handler never waits).
extern TORC__TLS_HOT _Thread_local torc_backend_lib *torc__tls_calling;
bool torc__dev_shut_down(const torc_device *dev);
bool torc__pools_drain(const torc_backend_lib *skip, bool wait);

// ---- random numbers (random.c) ----
// Reserves n counters of g (NULL: the default generator): returns the first and the seed.
uint64_t torc__generator_reserve(torc_generator *g, uint64_t n, uint64_t *seed);

// ---- accounting (accounting.c) ----
void torc__mem_add(torc_device *dev, torc_mem_tag tag, uint64_t bytes);
void torc__mem_sub(torc_device *dev, torc_mem_tag tag, uint64_t bytes);
// Optimizer state is made by a plugin's ordinary host calls, so it is born as an activation; the
// optimizer learns which tensors are state only when the plugin returns. A recording on this
// thread between begin and end notes every storage made and freed; end then moves the storages
// of `adopted` to `tag` and recomputes the activation peak of the recorded stretch as if they
// had had that tag from their creation (exact: an activation peak is reached at an allocation,
// where the recording knows the bytes in use). Allocations by other threads in the meantime
// are counted as they happened. log is zeroed before first use; free it with
// torc__mem_record_free.
typedef struct torc__mem_record torc__mem_record;
struct torc__mem_record {
    struct torc__mem_event *e;
    int n, cap;
    bool lost;  // out of memory while recording: end only retags
};
void torc__mem_record_begin(torc__mem_record *log);
void torc__mem_record_end(torc__mem_record *log, int n_adopted, torc_tensor *const *adopted, torc_mem_tag tag);
void torc__mem_record_free(torc__mem_record *log);
// The same for a backward (torc_backward): begin notes allocations only (false, and nothing is
// noted, inside another backward's recording); retagged says that storage s, made since, takes
// another tag now (a leaf's new .grad), so the activation bytes of every event from its
// creation on drop by its size; end sets the activation peak from the corrected events.
bool torc__mem_backward_begin(torc__mem_record *log);
void torc__mem_backward_retagged(const torc_storage *s);
void torc__mem_backward_end(torc__mem_record *log);
// storage_new calls this before accounting a new storage; storage_release before freeing one.
void torc__mem_note_alloc(const torc_storage *s);
void torc__mem_note_free(const torc_storage *s);
void torc__flops_add(int opcode, torc_dtype dtype, uint64_t flops);
// The phase flops are counted in (the autograd engine sets BACKWARD while it runs).
torc_phase torc__phase(void);
void torc__set_phase(torc_phase p);

// ---- dtypes (dtype.c) ----
bool torc__dtype_valid(torc_dtype d);
// c10::ScalarType's name ("Float", "Long", "Float8_e4m3fn"): PyTorch's error messages print
// dtypes this way ("result type Float can't be cast to the desired output type Long").
const char *torc__dtype_c10_name(torc_dtype d);
// The backend ABI minor each opcode / dtype appeared in, generated from TORC_OP_LIST and
// TORC_DTYPE_LIST (opnames.c, dtype.c): dispatch.c never sends a plugin anything newer.
extern const uint8_t torc_backend_op_minor[TORC_OP_COUNT];
extern const uint8_t torc_backend_dtype_minor[TORC_DTYPE_COUNT];
// caffe2::TypeMeta's name ("float", "c10::Half", "long int"): what matmul's and lerp's dtype
// messages print ("expected m1 and m2 to have the same dtype, but got: float != double").
const char *torc__dtype_typemeta_name(torc_dtype d);

// Scalar::to<T> for an integer dtype (addcmul's value; fills use torc__fill_value): c10's check, NaN
// and values outside the type's range give PyTorch's "value cannot be converted to type int64_t
// without overflow" (TORC_ERR_INVALID_ARG). True for other dtypes; in range, kernels truncate.
bool torc__check_int_scalar(torc_dtype dt, double v);
// What a fill of a dt tensor with s stores, as a double for FILL (core/fill.c has PyTorch's rule):
// false with PyTorch's overflow error if dt cannot take s. torc__fill_scalar then fills t with it
// (an int64 beyond a double's 53 bits exactly). An integral double counts as an integer scalar.
bool torc__fill_value(torc_dtype dt, torc_scalar s, double *out);
torc_status torc__fill_scalar(torc_tensor *t, torc_scalar s, double v);
torc_scalar torc__scalar_of_double(double v);

// ---- in-place and out= argument checks (move.c), with PyTorch's messages ----
bool torc__check_can_cast(torc_dtype result, torc_dtype out);
bool torc__check_no_internal_overlap(const torc_tensor *t);
bool torc__check_inplace_shape(const torc_tensor *self, const torc_tensor *other);
bool torc__check_no_partial_overlap(const torc_tensor *out, const torc_tensor *in);

// ---- ops (op helpers shared by unary.c, binary.c, reduce.c, ...) ----
// Broadcasts shapes a and b (PyTorch's rules, right to left); error names both shapes.
torc_status torc__broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b,
                                   int *nout, int64_t *out);
// A view of t expanded to (ndim, shape) as an operand (stride 0 on broadcast dims).
torc_status torc__broadcast_operand(const torc_tensor *t, int ndim, const int64_t *shape,
                                    torc_operand *op);
// PyTorch's "Expected all tensors to be on the same device" check (sets the error if not).
bool torc__same_device(const torc_tensor *a, const torc_tensor *b);
// Fills out's storage (whole tensor, strided) with value.
torc_status torc__fill(torc_tensor *t, double value);
// Strided copy with cast: dst[...] = src[...], src already of dst's shape or broadcastable.
torc_status torc__copy(torc_tensor *dst, const torc_tensor *src);
// A contiguous copy of t on t's device in dtype, without autograd history (unregistered).
torc_tensor *torc__copy_as(const torc_tensor *t, torc_dtype dtype);
// A tensor holding one scalar, on dev, in dtype, zero-dim (unregistered).
torc_tensor *torc__scalar_on(torc_device *dev, double value, torc_dtype dtype);

// ---- state dicts (state_dict.c) ----
// The tensor called name, borrowed (valid while sd holds it), or NULL without an error.
torc_tensor *torc__state_dict_peek(const torc_state_dict *sd, const char *name);

// ---- autograd hooks (autograd.c) ----
// Op frontends compute their result without history and then call one of these hooks, which
// record a node when grad mode is on and an input requires grad. Each returns out (possibly
// with grad_fn set) or NULL with the error set, having released out.
// True when grad mode is on and any of the n tensors requires grad.
bool torc__any_requires_grad(int n, const torc_tensor *const *ts);
// Composite ops with no opcode of their own record under these pseudo-opcodes.
#define TORC__GRAD_CAT ((torc_opcode)TORC_OP_COUNT) // params.dim.dim; inputs: every tensor
// An op of the opcode table: inputs as the user passed them (before broadcasting), params as
// sent to the backend (alpha, exponent, reduce mask, dim, ...).
torc_tensor *torc__autograd_record(torc_tensor *out, torc_opcode code, int n_in,
                                   const torc_tensor *const *inputs, const torc_op_params *params);
// The same for an op with further outputs that do not require grad but that its backward needs
// (native_layer_norm's mean and rstd): they are saved as outputs of the node, in slots
// TORC__SAVED_AUX.. (at most 2).
torc_tensor *torc__autograd_record_aux(torc_tensor *out, torc_opcode code, int n_in, const torc_tensor *const *inputs,
                                       const torc_op_params *params, int n_aux, const torc_tensor *const *aux);
// A view of base. args by grad_fn: TransposeBackward0 (d0, d1), PermuteBackward0 (dims...),
// SelectBackward0 (dim, index), SliceBackward0 (dim, start, end, step), UnsqueezeBackward0
// (dim); ViewBackward0, ExpandBackward0, SqueezeBackward0, AsStridedBackward0 take none (the
// backward uses base's and view's shapes).
torc_tensor *torc__autograd_view(torc_tensor *view, torc_tensor *base, const char *name, int nargs,
                                 const int64_t *args);
// A copy-like op with one input (clone, to_dtype, to_device): grad flows back unchanged,
// converted to in's dtype and device.
torc_tensor *torc__autograd_unary(torc_tensor *out, const torc_tensor *in, const char *name);
// In-place ops bracket their write with these two hooks (PyTorch's rebase_history):
//   torc_node *rec;
//   if ((st = torc__inplace_begin(self, code, n, inputs, params, NULL, &rec))) return st;
//   st = <write>; if (!st) torc__bump_version(self);
//   return torc__inplace_end(self, rec, st);
// begin, before the write (after the op's own checks): PyTorch's autograd errors (leaf or view
// of a leaf that requires grad, view made under no_grad) and, when grad mode is on and any
// input requires grad, a node for the op saved as PyTorch saves it (inputs at their
// current version, self's old value as a copy when the backward needs it); *rec is NULL when
// nothing is recorded. inputs[0] is self; code is the opcode of the write (TORC_OP_COPY for
// copy_, TORC_OP_FILL / TORC_OP_RAND_* for writes whose gradient to self is zero); name
// overrides the grad_fn name (NULL: torch's name for code).
// end, after the write (st its status, the version already bumped): on success rec becomes
// self's grad_fn (for a view: the base gets a CopySlices node and the view an
// AsStridedBackward0 on it), on failure rec is dropped. Returns st.
torc_status torc__inplace_begin(torc_tensor *self, torc_opcode code, int n_in, const torc_tensor *const *inputs,
                                const torc_op_params *params, const char *name, torc_node **rec);
torc_status torc__inplace_end(torc_tensor *self, torc_node *rec, torc_status st);
// Before a write that records nothing (an op's out= argument): in grad mode, sets *st to
// PyTorch's out= error when t requires grad (leaves *st alone otherwise).
void torc__check_inplace(torc_tensor *t, torc_status *st);
// Called by torc_release when a tensor dies: drops its grad, grad_fn and view base.
void torc__autograd_release(torc_tensor *t);
// Called on this thread by backward after each gradient accumulated into a leaf's .grad (the hook
// may take t->grad); a nonzero status stops backward. NULL removes it. Used by DDP (core/ddp.c).
typedef torc_status (*torc__leaf_grad_hook)(torc_tensor *t, void *ctx);
void torc__set_leaf_grad_hook(torc__leaf_grad_hook hook, void *ctx);

// ---- autocast (autocast.c) ----
// One-line hooks at the top of the frontends autocast changes (matmul.c, reduce.c, unary.c,
// loss.c). Outside an autocast scope, and while backward runs, every check is false and the
// frontend runs as it always does.
// True when opcode code (-1: a loss) runs in f32 under the thread's autocast and t or u (u may
// be NULL) is a floating tensor that must be cast to f32 for it.
bool torc__autocast_wants_f32(int code, const torc_tensor *t, const torc_tensor *u);
// Opens a private scope and replaces *t (and *u unless u is NULL) by an f32 cast recorded by
// autograd; false with the error set on failure. torc__autocast_leave(r) closes that scope and
// hands r to the caller's (the hooks' return value).
bool torc__autocast_cast_f32(const torc_tensor **t, const torc_tensor **u);
torc_tensor *torc__autocast_leave(torc_tensor *r);
// `return call` with t (and u) cast to f32 when autocast wants it; the call re-enters the
// frontend, which then sees f32 operands and runs normally.
#define TORC__AUTOCAST_F32(code, t, call) \
    do { \
        if (torc__autocast_wants_f32((code), (t), NULL)) \
            return torc__autocast_leave(torc__autocast_cast_f32(&(t), NULL) ? (call) : NULL); \
    } while (0)
#define TORC__AUTOCAST_F32_2(code, t, u, call) \
    do { \
        if (torc__autocast_wants_f32((code), (t), (u))) \
            return torc__autocast_leave(torc__autocast_cast_f32(&(t), &(u)) ? (call) : NULL); \
    } while (0)
// True when autocast changes the matmul of a and b; torc__autocast_matmul then runs it (operands
// in the autocast dtype, out_dtype TORC_DTYPE_COUNT meaning that dtype too; or fp8 for a
// parameter under fp8 autocast). The result is registered like any frontend's.
bool torc__autocast_matmul_applies(const torc_tensor *a, const torc_tensor *b);
// t cast to d as autocast casts an operand: grad mode off, a parameter's cast from the weight-cast
// cache (held until the outermost region ends), else torc_to_dtype's, in the caller's scope.
const torc_tensor *torc__autocast_cast(const torc_tensor *t, torc_dtype d);
torc_tensor *torc__autocast_matmul(const torc_tensor *a, const torc_tensor *b, torc_dtype out_dtype);
// a @ b in c (F16 or BF16) as autocast runs it: a and b each c or f32, rounded to c, the result
// rounded to c and returned in out_dtype (c or f32). One MATMUL_ROUNDED where the device's backend
// takes it, else the casts and MATMUL (core/matmul.c); the autograd node is MATMUL_ROUNDED's
// (its backward runs the same way) or the casts' and MATMUL's.
torc_tensor *torc__matmul_rounded(const torc_tensor *a, const torc_tensor *b, torc_dtype c, torc_dtype out_dtype);
// The backward of the fp8 matmul node (code TORC_OP_SCALED_MM, registered in backward.c), and
// the destructor of a parameter's fp8 state (called by torc_release).
torc_status torc__fp8_matmul_backward(const torc_node *n, const torc_tensor *g, const bool *need, torc_tensor **gin);
void torc__fp8_meta_free(torc__fp8_meta *m);

// ---- layer norm (layer_norm.c) ----
// The backward of native_layer_norm's node (code TORC_OP_LAYER_NORM, registered in backward.c):
// one LAYER_NORM_BACKWARD op from the saved x, weight, mean and rstd.
torc_status torc__layer_norm_backward(const torc_node *n, const torc_tensor *g, const bool *need, torc_tensor **gin);

// ---- attention (attention.c) ----
// The backward of the fused attention node (code TORC_OP_ATTENTION, registered in backward.c):
// one ATTENTION_BACKWARD op from the saved q, k, v, o and lse, or its composition where the
// backend declines it.
torc_status torc__attention_backward(const torc_node *n, const torc_tensor *g, const bool *need, torc_tensor **gin);

#endif
