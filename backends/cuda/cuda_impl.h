// backends/cuda/cuda_impl.h — state shared by the CUDA backend's host files: the per-device
// record (stream, allocator, staging pool, cuBLAS handle, error word) and error helpers.
#ifndef TCU_CUDA_IMPL_H
#define TCU_CUDA_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <torc/backend.h>

#include "allocator.h"
#include "pinned.h"

typedef struct tcu_device {
    int index;
    // from cudaGetDeviceProperties at init (no context needed)
    char name[128];
    int cc_major, cc_minor, sm_count;
    uint64_t total_memory;
    // created on first use of the device
    atomic_bool ready;
    cudaStream_t stream;         // the device's one default stream (non-blocking)
    tcu_allocator alloc;
    tcu_pinned_pool pinned;
    pthread_mutex_t lib_mu;      // guards the lazy cuBLAS/cuBLASLt state below (handles, workspaces, cache)
    cublasHandle_t blas;         // created on the first matmul, its workspace from the allocator
    void *blas_ws;
    cublasLtHandle_t lt;         // created on the first fp8 matmul, with its workspace and cache
    void *lt_ws;
    size_t lt_ws_size;
    struct tcu_lt_cache *lt_cache;
    int *err_word;               // mapped pinned int the kernels report into (device-visible)
} tcu_device;

// The device ready for use, made current on this thread; NULL with the error set otherwise.
tcu_device *tcu_dev(int device);

// runtime_ops.c: makes device current on this thread unless the runtime says it already is.
int tcu_make_current(int device);
// The allocator's cudaMalloc/cudaFree and the staging pool's pinned memory and events for d;
// each clears the runtime's last error where it handles a failure.
void tcu_device_raw_ops(tcu_device *d, tcu_raw_ops *out);
void tcu_device_pinned_ops(tcu_device *d, tcu_pinned_ops *out);
bool tcu_allow_tf32(void);

// Sets this thread's last error and returns status.
int tcu_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// "what failed: cudaErrorX (the runtime's description)", as TORC_ERR_BACKEND (OOM for
// cudaErrorMemoryAllocation).
int tcu_cuda_error(cudaError_t e, const char *what);

// Scratch memory on the device's stream from the caching allocator (error set on NULL).
void *tcu_scratch(tcu_device *d, size_t nbytes);
void tcu_scratch_free(tcu_device *d, void *p);

// run.c
// cc: the device's compute capability (major * 10 + minor); ops it cannot run are refused.
bool tcu_supports_op(const torc_op *op, int cc, char *why, size_t why_n);
int tcu_run_op(tcu_device *d, const torc_op *op);
int tcu_fill_zero(tcu_device *d, const torc_operand *out);

// gemm.c
int tcu_matmul(tcu_device *d, const torc_op *op);
void tcu_gemm_release(tcu_device *d);

// scaled_mm.c and lt_matmul.c (fp8 matmul through cuBLASLt)
struct tcu_lt_problem;
struct tcu_lt_plan;
struct tcu_lt_ptrs;
int tcu_scaled_mm(tcu_device *d, const torc_op *op);
// TORC_OK, a torc error, or TCU_LT_NO_KERNEL when cuBLASLt has no kernel for the problem (the
// heuristic finds none, or cublasLtMatmul answers NOT_SUPPORTED or INVALID_VALUE): nothing was
// written and the caller runs the generic kernel.
#define TCU_LT_NO_KERNEL 0x10000
int tcu_lt_matmul(tcu_device *d, const struct tcu_lt_problem *p, const struct tcu_lt_plan *pl,
                  const struct tcu_lt_ptrs *ptrs, const void *a, const void *b, void *out);
void tcu_lt_release(tcu_device *d);

#endif
