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
#endif

// A tensor has at most this many dimensions (PyTorch allows more; 8 covers every model here
// and keeps views fixed-size, so op descriptors need no allocation).
#define TORC_MAX_DIMS 8

// Element types. The order is part of the ABI (append only).
typedef enum torc_dtype {
    TORC_DTYPE_F64 = 0,
    TORC_DTYPE_F32,
    TORC_DTYPE_F16,
    TORC_DTYPE_BF16,
    TORC_DTYPE_F8_E4M3FN,
    TORC_DTYPE_F8_E5M2,
    TORC_DTYPE_I64,
    TORC_DTYPE_I32,
    TORC_DTYPE_I16,
    TORC_DTYPE_I8,
    TORC_DTYPE_U8,
    TORC_DTYPE_BOOL,
    TORC_DTYPE_COUNT
} torc_dtype;

// Status codes. TORC_OK is 0; every failure also sets torc_last_error()'s message.
typedef enum torc_status {
    TORC_OK = 0,
    TORC_ERR_INVALID_ARG,   // a bad argument: NULL, out-of-range dim, bad hyperparameter
    TORC_ERR_SHAPE,         // shapes that do not fit together (the message names both)
    TORC_ERR_DTYPE,         // a dtype an op does not take, or fp8 mixed without a cast
    TORC_ERR_INDEX,         // an index out of range
    TORC_ERR_OOM,           // an allocation failed
    TORC_ERR_BACKEND,       // a backend failed to load or to run an op
    TORC_ERR_NOT_SUPPORTED, // the device's backend cannot run this op and has no fallback
    TORC_ERR_IO,            // file missing, truncated, corrupted or unwritable
    TORC_ERR_AUTOGRAD,      // autograd misuse (second backward, in-place on a saved tensor, ...)
    TORC_ERR_RUNTIME,       // anything else
    TORC_STATUS_COUNT
} torc_status;

#ifdef __cplusplus
}
#endif
#endif
