// torc/backend.h — the compute-backend plugin ABI: the op descriptor a backend runs and the
// versioned vtable a backend exports. A backend includes this header (and types.h) only.
#ifndef TORC_BACKEND_H
#define TORC_BACKEND_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- versions ----
// abi_version = major << 16 | minor. The loader refuses a plugin whose major differs from its
// own, or whose struct_size is smaller than the v1 vtable. Minor versions only append members
// and opcodes; the core never sends a plugin an opcode appended after the minor it was built
// with (see TORC_OP_FIRST_V1_2).
#define TORC_BACKEND_ABI_MAJOR 1
#define TORC_BACKEND_ABI_MINOR 2
#define TORC_BACKEND_ABI_VERSION ((uint32_t)(TORC_BACKEND_ABI_MAJOR << 16 | TORC_BACKEND_ABI_MINOR))

// ---- ops ----
// The opcode list is append-only: a value, once shipped, keeps its meaning. Semantics below
// are the contract every backend implements and the reference backend defines.
// Conventions:
//  - in[i] and out are strided views (see torc_operand); out never overlaps an input unless the
//    op says "in place", with one exception: an elementwise op (unary, binary, WHERE, COPY,
//    ADDCMUL, ADDCDIV, LERP) may get out identical to an input (same data, dtype and strides), which is how in-place
//    ops such as add_ run; reading element i before writing element i makes that safe. Shapes are already broadcast by the frontend: every input of an
//    elementwise op has out's ndim and shape, broadcast dims having stride 0.
//  - Elementwise ops compute in the output dtype's natural precision or better (the reference
//    uses double for floating and int64 for integer dtypes) and round once to out's dtype,
//    except where an op states PyTorch's own rounding steps (the fused pointwise ops).
//    Inputs may have a dtype different from out (e.g. comparisons write bool); a backend
//    converts on load.
//  - Reductions: out has in[0]'s ndim with each reduced dim of size 1 (params.reduce.mask has
//    bit d set for every reduced dim d).
// X(ID, name, minor): every opcode in enum order, its name (torc_op_name) and the backend ABI minor
// (of TORC_BACKEND_ABI_MAJOR) it appeared in: the core never sends an opcode to a plugin built for
// an older minor. Append only.
#define TORC_OP_LIST_V2_0(X) \
    /* fills and copies */                                                                                               \
    X(FILL, "fill", 0)                  /* out[...] = params.scalar.value (cast to out dtype) */                         \
    X(COPY, "copy", 0)                  /* out = cast(in0): strided copy with dtype conversion */                        \
    X(ARANGE, "arange", 0)              /* out (1-D): out[i] = range.start + i * range.step */                           \
    X(LINSPACE, "linspace", 0)          /* out (1-D, n = range.count): PyTorch's two-sided formula: */                   \
                                        /*   step = (end-start)/(n-1); i < n/2 ? start + i*step : end - (n-1-i)*step */  \
    X(RAND_UNIFORM, "rand", 0)          /* out[i] = a + (b-a) * u(i), u from Philox (see torc_philox_uniform) */         \
    X(RAND_NORMAL, "randn", 0)          /* out[i] = a + b * n(i) (a = mean, b = std), Box-Muller on Philox */            \
    X(RAND_INT, "randint", 0)           /* out[i] = a + floor(u(i) * (b - a)), in [a, b) */                              \
    /* unary (in0 -> out) */                                                                                             \
    X(NEG, "neg", 0)                                                                                                     \
    X(ABS, "abs", 0)                                                                                                     \
    X(SIGN, "sign", 0)                                                                                                   \
    X(SQRT, "sqrt", 0)                                                                                                   \
    X(RSQRT, "rsqrt", 0)                                                                                                 \
    X(SQUARE, "square", 0)                                                                                               \
    X(RECIPROCAL, "reciprocal", 0)                                                                                       \
    X(EXP, "exp", 0)                                                                                                     \
    X(LOG, "log", 0)                                                                                                     \
    X(SIN, "sin", 0)                                                                                                     \
    X(COS, "cos", 0)                                                                                                     \
    X(TANH, "tanh", 0)                                                                                                   \
    X(SIGMOID, "sigmoid", 0)                                                                                             \
    X(RELU, "relu", 0)                                                                                                   \
    X(GELU, "gelu", 0)                  /* params.gelu.approximate: 0 exact (erf), 1 tanh approximation */               \
    X(POW_SCALAR, "pow_scalar", 0)      /* out = in0 ^ params.scalar.value */                                            \
    X(ERF, "erf", 0)                                                                                                     \
    X(ERFINV, "erfinv", 0)                                                                                               \
    X(LOGICAL_NOT, "logical_not", 0)    /* out (bool) = !in0 */                                                          \
    /* binary (in0, in1 -> out), broadcast already applied */                                                            \
    X(ADD, "add", 0)                    /* out = in0 + params.scalar.value * in1   (alpha; 1 for plain add) */           \
    X(SUB, "sub", 0)                    /* out = in0 - params.scalar.value * in1 */                                      \
    X(MUL, "mul", 0)                                                                                                     \
    X(DIV, "div", 0)                    /* true division (integer inputs arrive with a floating out dtype) */            \
    X(POW, "pow", 0)                                                                                                     \
    X(MAXIMUM, "maximum", 0)            /* NaN propagates, as torch.maximum */                                           \
    X(MINIMUM, "minimum", 0)                                                                                             \
    X(EQ, "eq", 0)                      /* comparisons write bool; they compare in in0/in1's common dtype */             \
    X(NE, "ne", 0)                                                                                                       \
    X(LT, "lt", 0)                                                                                                       \
    X(LE, "le", 0)                                                                                                       \
    X(GT, "gt", 0)                                                                                                       \
    X(GE, "ge", 0)                                                                                                       \
    X(LOGICAL_AND, "logical_and", 0)                                                                                     \
    X(LOGICAL_OR, "logical_or", 0)                                                                                       \
    /* ternary */                                                                                                        \
    X(WHERE, "where", 0)                /* out = in0 (bool) ? in1 : in2 */                                               \
    /* reductions over params.reduce.mask (out keeps reduced dims as size 1) */                                          \
    X(SUM, "sum", 0)                                                                                                     \
    X(MEAN, "mean", 0)                                                                                                   \
    X(PROD, "prod", 0)                                                                                                   \
    X(MAX, "max", 0)                    /* NaN propagates */                                                             \
    X(MIN, "min", 0)                                                                                                     \
    X(ARGMAX, "argmax", 0)              /* exactly one reduced dim (or all dims of a flattened view); out i64; */        \
    X(ARGMIN, "argmin", 0)              /*   the first index of the extreme value; NaN counts as the extreme */          \
    X(VAR, "var", 0)                    /* params.reduce.correction (Bessel: 1) */                                       \
    X(STD, "std", 0)                                                                                                     \
    X(NORM, "norm", 0)                  /* params.reduce.p: p-norm (inf = max |x|) */                                    \
    X(LOGSUMEXP, "logsumexp", 0)                                                                                         \
    /* along one dim (params.dim.dim), same shape in and out */                                                          \
    X(SOFTMAX, "softmax", 0)                                                                                             \
    X(LOG_SOFTMAX, "log_softmax", 0)                                                                                     \
    /* linear algebra */                                                                                                 \
    X(MATMUL, "matmul", 0)              /* in0 (..., M, K) @ in1 (..., K, N) -> out (..., M, N); all three */            \
                                        /* have the same ndim >= 2 and batch dims already broadcast (stride 0). */       \
                                        /* out's dtype may be wider than the inputs' (bf16 x bf16 -> f32). */            \
    /* indexing (params.dim.dim is the dim; index tensors are i64) */                                                    \
    X(INDEX_SELECT, "index_select", 0)  /* out = in0.index_select(dim, in1) */                                           \
    X(GATHER, "gather", 0)              /* out = in0.gather(dim, in1) */                                                 \
    X(MASKED_SELECT, "masked_select", 0)/* out (1-D, numel = count of true) = in0[in1]; in0, in1 same shape */           \
    X(INDEX_ADD, "index_add", 0)        /* in place: out.index_add_(dim, in1 (index), in0 (source)) */                   \
    X(SCATTER_ADD, "scatter_add", 0)    /* in place: out.scatter_add_(dim, in1 (index), in0 (source)) */                 \
    X(MASKED_SCATTER, "masked_scatter", 0)/* in place: out[in1] = in0 (1-D source, consumed in order) */                 \
    X(TRIU, "triu", 0)                  /* out = triu(in0, params.tri.k) over the last two dims */                       \
    X(TRIL, "tril", 0)                                                                                                   \
    /* fp8 */                                                                                                               \
    X(SCALED_MM, "scaled_mm", 0)        /* cuBLASLt's fp8 matmul: in0 (M, K) @ in1 (K, N) -> out (M, N), all 2-D. */     \
                                        /* in0/in1 f8_e4m3fn or f8_e5m2 (not both e5m2); in2, in3: one-element */        \
                                        /* f32 scales (scale_a, scale_b). r = scale_a * scale_b * sum_k a*b, */          \
                                        /* accumulated in f32 or better (the reference: exactly, in double). */          \
                                        /* out f32/bf16/f16: r rounded once; out fp8: r * *params.scaled_mm.scale_out */ \
                                        /* (1 when NULL) cast with saturation to the finite range. When */               \
                                        /* params.scaled_mm.amax_out is set, one f32 there receives max |r| */           \
                                        /* (before scale_out; NaN if any r is NaN). */                                   \
    /* fused pointwise. Inputs                    are broadcast to out's shape and may differ in */                      \
    /* dtype from out (converted on load, then rounded to out's dtype); out may be identical to in0 */                   \
    /* (the in-place forms). The math is PyTorch's CPU kernels', in the "opmath" type: float for */                      \
    /* f32/f16/bf16 outs, double for f64, with v = params.scalar.value rounded to that type: */                          \
    X(ADDCMUL, "addcmul", 0)            /* out = fma(v * in1, in2, in0): the product v*in1 rounded, then one fused */    \
                                        /*   multiply-add (PyTorch's vec::fmadd(scalar * t1, t2, self)). Integer */      \
                                        /*   outs too: in0 + v*in1*in2 wrapping, v truncated toward zero. */             \
    X(ADDCDIV, "addcdiv", 0)            /* out = in0 + (v * in1) / in2, each step rounded (floating outs only) */        \
    X(LERP, "lerp", 0)                  /* n_in 2, scalar weight w = params.scalar.value (floating outs only): */        \
                                        /*   |w| < 0.5 ? fma(w, in1 - in0, in0) : fma(w - 1, in1 - in0, in1) */          \
    /* end */

// A test build (-DTORC_TEST_EXTRA_ABI, tests/abi/) appends one opcode of a newer minor: it copies
// in[0] to out[0] (same dtype), to prove that an older plugin is never sent it.
#ifdef TORC_TEST_EXTRA_ABI
#define TORC_OP_LIST(X) TORC_OP_LIST_V2_0(X) X(TEST_EXTRA, "test_extra", 1)
#else
#define TORC_OP_LIST(X) TORC_OP_LIST_V2_0(X)
#endif

typedef enum torc_opcode {
#define TORC__OP_ENUM(ID, name, minor) TORC_OP_##ID,
    TORC_OP_LIST(TORC__OP_ENUM)
#undef TORC__OP_ENUM
    TORC_OP_COUNT
} torc_opcode;

// A strided view of device memory. data points at element [0, 0, ...] (the storage offset is
// already applied). Strides are in elements and may be 0 (broadcast) or negative never.
typedef struct torc_operand {
    void *data;
    torc_dtype dtype;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    int64_t stride[TORC_MAX_DIMS];
} torc_operand;

#define TORC_OP_MAX_INPUTS 4

typedef union torc_op_params {
    struct { double value; } scalar;                     // FILL, POW_SCALAR, ADD/SUB alpha,
                                                         // ADDCMUL/ADDCDIV value, LERP weight
    struct { double start, step, end; int64_t count; } range;
    struct { uint64_t seed, offset; double a, b; } rng;  // RAND_*: Philox key and counter base
    struct { uint32_t mask; double correction, p; } reduce;
    struct { int dim; } dim;
    struct { int64_t k; } tri;
    struct { int approximate; } gelu;
    // SCALED_MM: device pointers (cuBLASLt's D_SCALE / AMAX_D pointer attributes), NULL if absent.
    // They are not operands because in[] holds four views (a, b, scale_a, scale_b) at most.
    struct { const void *scale_out; void *amax_out; } scaled_mm;
    double raw[8];                                       // room to grow without an ABI break
} torc_op_params;

typedef struct torc_op {
    torc_opcode code;
    int n_in;
    torc_operand in[TORC_OP_MAX_INPUTS];
    torc_operand out;
    torc_op_params params;
} torc_op;

// ---- devices ----
typedef struct torc_device_info {
    char name[128];             // "Intel(R) Xeon(R) ...", "NVIDIA H100 80GB HBM3"
    bool host_memory;           // true: pointers are host pointers (reference, onednn)
    uint64_t total_memory;      // bytes, 0 if unknown
    // Promised dense FLOP/s per dtype (0 = unknown); how it was derived in peak_source.
    double peak_flops[TORC_DTYPE_COUNT];
    char peak_source[192];
} torc_device_info;

typedef enum torc_copy_kind {
    TORC_COPY_HOST_TO_DEVICE = 0,
    TORC_COPY_DEVICE_TO_HOST,
    TORC_COPY_DEVICE_TO_DEVICE
} torc_copy_kind;

// ---- the vtable ----
// Every function returns 0 (TORC_OK) or a torc_status; on failure the backend's last_error()
// says why. Members marked optional may be NULL; the comment says what the core does then.
typedef struct torc_backend_vtable {
    uint32_t abi_version;   // TORC_BACKEND_ABI_VERSION the plugin was built with
    uint32_t struct_size;   // sizeof(torc_backend_vtable) the plugin was built with
    const char *name;       // "reference", "onednn", "cuda"

    // v1.0
    int (*init)(void);                          // may fail (no driver, no device): clean error
    void (*shutdown)(void);
    int (*device_count)(void);
    int (*device_info)(int device, torc_device_info *info);
    void *(*alloc)(int device, size_t nbytes);  // NULL on failure
    void (*free)(int device, void *ptr);
    int (*copy)(int device, void *dst, const void *src, size_t nbytes, torc_copy_kind kind,
                bool async);
    int (*synchronize)(int device);
    // Events for timing (optional: NULL on host backends; the core then times with a clock).
    void *(*event_create)(int device);
    int (*event_record)(int device, void *event);
    int (*event_elapsed_ms)(void *start, void *end, float *ms);
    void (*event_destroy)(void *event);
    bool (*supports)(int device, const torc_op *op);
    int (*run)(int device, const torc_op *op);
    const char *(*last_error)(void);            // message of the last failure on this thread
    // Optional: caching allocator statistics (NULL: the core's own counters are used).
    int (*memory_stats)(int device, uint64_t *allocated, uint64_t *reserved,
                        uint64_t *peak_reserved);
    int (*empty_cache)(int device);             // optional

    // added in v1.1
    // Optional: page-locked ("pinned") host memory, which copy(..., async = true) may read after
    // it returns (NULL: the core stages host->device copies in malloc'ed memory instead).
    void *(*host_alloc)(int device, size_t nbytes);
    void (*host_free)(int device, void *ptr);
} torc_backend_vtable;

// The one symbol a backend exports. host_abi_version is the loader's
// TORC_BACKEND_ABI_VERSION; a backend may return NULL if it cannot speak to that host.
typedef const torc_backend_vtable *(*torc_backend_entry_fn)(uint32_t host_abi_version);
#define TORC_BACKEND_ENTRY_SYMBOL "torc_backend_entry"

#ifdef __cplusplus
}
#endif
#endif
