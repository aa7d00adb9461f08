// torc/types.h — the small vocabulary shared by the frontend, backends and plugins:
// the export macro, dtypes, status codes and dimension limits. Included by every torc header.
#ifndef TORC_TYPES_H
#define TORC_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define TORC_API __declspec(dllexport)
#else
#define TORC_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#define TORC__STATIC_ASSERT static_assert
#else
#define TORC__STATIC_ASSERT _Static_assert
#endif

// A tensor has at most this many dimensions (PyTorch allows more; 8 covers every model here
// and keeps views fixed-size, so op descriptors need no allocation).
#define TORC_MAX_DIMS 8

// ---- dtypes: the one description ----
// Every dtype, in enum order: X(ID, name, size, category, c10_name, minor).
//   name      PyTorch's: str(torch.float32) without "torch."
//   size      bytes per element
//   category  TORC_DTYPE_CAT_FLOATING, _INTEGER or _BOOL
//   c10_name  c10::ScalarType's name, which PyTorch's error messages print
//   minor     the backend ABI minor (of TORC_BACKEND_ABI_MAJOR) it appeared in: the core never
//             sends a plugin built for an older minor an operand of this dtype.
// The enum, the core's tables, the backends' size/name helpers and the minor gate are all
// generated from this list, so it is append only: a value, once shipped, keeps its meaning.
#define TORC_DTYPE_LIST_V2_0(X)                                               \
    X(F64, "float64", 8, TORC_DTYPE_CAT_FLOATING, "Double", 0)                \
    X(F32, "float32", 4, TORC_DTYPE_CAT_FLOATING, "Float", 0)                 \
    X(F16, "float16", 2, TORC_DTYPE_CAT_FLOATING, "Half", 0)                  \
    X(BF16, "bfloat16", 2, TORC_DTYPE_CAT_FLOATING, "BFloat16", 0)            \
    X(F8_E4M3FN, "float8_e4m3fn", 1, TORC_DTYPE_CAT_FLOATING, "Float8_e4m3fn", 0) \
    X(F8_E5M2, "float8_e5m2", 1, TORC_DTYPE_CAT_FLOATING, "Float8_e5m2", 0)   \
    X(I64, "int64", 8, TORC_DTYPE_CAT_INTEGER, "Long", 0)                     \
    X(I32, "int32", 4, TORC_DTYPE_CAT_INTEGER, "Int", 0)                      \
    X(I16, "int16", 2, TORC_DTYPE_CAT_INTEGER, "Short", 0)                    \
    X(I8, "int8", 1, TORC_DTYPE_CAT_INTEGER, "Char", 0)                       \
    X(U8, "uint8", 1, TORC_DTYPE_CAT_INTEGER, "Byte", 0)                      \
    X(BOOL, "bool", 1, TORC_DTYPE_CAT_BOOL, "Bool", 0)

// A test build (-DTORC_TEST_EXTRA_ABI, tests/abi/) appends one dtype of a newer minor to prove
// that an older plugin is never sent it.
#ifdef TORC_TEST_EXTRA_ABI
#define TORC_DTYPE_LIST(X) TORC_DTYPE_LIST_V2_0(X) X(TEST_EXTRA, "test_extra", 4, TORC_DTYPE_CAT_FLOATING, "TestExtra", 7)
#else
#define TORC_DTYPE_LIST(X) TORC_DTYPE_LIST_V2_0(X)
#endif

typedef enum torc_dtype_category {
    TORC_DTYPE_CAT_BOOL = 0,
    TORC_DTYPE_CAT_INTEGER,
    TORC_DTYPE_CAT_FLOATING
} torc_dtype_category;

// Element types. The order is part of the ABI (append only).
typedef enum torc_dtype {
#define TORC__DTYPE_ENUM(ID, name, size, cat, c10, minor) TORC_DTYPE_##ID,
    TORC_DTYPE_LIST(TORC__DTYPE_ENUM)
#undef TORC__DTYPE_ENUM
    TORC_DTYPE_COUNT
} torc_dtype;

// Size in bytes and PyTorch's name of a dtype, for backends (which do not link libtorc);
// 0 and "unknown dtype" for a value this header does not know (a newer dtype). The size is
// callable from CUDA kernels too.
#ifdef __CUDACC__
#define TORC__ABI_INLINE __host__ __device__ static inline
#else
#define TORC__ABI_INLINE static inline
#endif
TORC__ABI_INLINE size_t torc_abi_dtype_size(torc_dtype d) {
    switch (d) {
#define TORC__DTYPE_SIZE(ID, name, size, cat, c10, minor) case TORC_DTYPE_##ID: return size;
    TORC_DTYPE_LIST(TORC__DTYPE_SIZE)
#undef TORC__DTYPE_SIZE
    default: return 0;
    }
}

static inline const char *torc_abi_dtype_name(torc_dtype d) {
    switch (d) {
#define TORC__DTYPE_NAME(ID, name, size, cat, c10, minor) case TORC_DTYPE_##ID: return name;
    TORC_DTYPE_LIST(TORC__DTYPE_NAME)
#undef TORC__DTYPE_NAME
    default: return "unknown dtype";
    }
}

// c10::ScalarType's name ("Float", "BFloat16"), as PyTorch's messages print it.
static inline const char *torc_abi_dtype_c10_name(torc_dtype d) {
    switch (d) {
#define TORC__DTYPE_C10(ID, name, size, cat, c10, minor) case TORC_DTYPE_##ID: return c10;
    TORC_DTYPE_LIST(TORC__DTYPE_C10)
#undef TORC__DTYPE_C10
    default: return "Unknown";
    }
}

// Status codes. TORC_OK is 0; every failure also sets torc_last_error()'s message.
typedef enum torc_status {
    TORC_OK = 0,
    TORC_ERR_INVALID_ARG,   // a bad argument: NULL, out-of-range dim, bad hyperparameter
    TORC_ERR_SHAPE,         // shapes that do not fit together (the message names both)
    TORC_ERR_DTYPE,         // a dtype an op does not take, or fp8 mixed without a cast
    TORC_ERR_INDEX,         // an index out of range
    TORC_ERR_OOM,           // an allocation failed
    TORC_ERR_BACKEND,       // a backend failed to load or to run an op
    TORC_ERR_NOT_SUPPORTED, // the device's backend cannot run this op and has no fallback (TORC_DEVICE_FALLBACK)
    TORC_ERR_IO,            // file missing, truncated, corrupted or unwritable
    TORC_ERR_AUTOGRAD,      // autograd misuse (second backward, in-place on a saved tensor, ...)
    TORC_ERR_RUNTIME,       // anything else
    TORC_STATUS_COUNT
} torc_status;

#ifdef __cplusplus
}
#endif
#endif
