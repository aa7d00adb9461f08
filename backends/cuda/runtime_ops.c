// backends/cuda/runtime_ops.c — the CUDA runtime calls under the allocator, the staging pool and
// device selection, kept apart from backend.c so the host test runs them over an emulated runtime.
//
// The runtime keeps a per-thread "last error" that every failing call sets and that the kernel
// launchers read back with cudaGetLastError() after each launch. A call whose failure is handled
// here (an event still pending, a pinned allocation that falls back to a synchronous copy, a
// cudaMalloc that the allocator retries) must clear that state, or the next launch on this
// thread reports it as its own failure (PyTorch fixed the same in pytorch#18584 and #61554).
// Sticky errors (a faulted context) are not cleared by cudaGetLastError and still surface.
#include <stdio.h>

#include "cuda_impl.h"

int tcu_make_current(int device) {
    // cudaGetDevice reads the runtime's per-thread current device (no driver call), so this
    // also notices application code that called cudaSetDevice since torc last ran here.
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == device) return TORC_OK;
    const cudaError_t e = cudaSetDevice(device);
    return e == cudaSuccess ? TORC_OK : tcu_cuda_error(e, "cudaSetDevice");   // which clears it
}

static int raw_alloc(void *ctx, size_t n, void **out, char *why, size_t why_n) {
    const tcu_device *d = ctx;
    cudaError_t e = cudaSetDevice(d->index);
    if (e == cudaSuccess) e = cudaMalloc(out, n);
    if (e == cudaSuccess) return 0;
    cudaGetLastError();  // handled here: the allocator retries or reports it
    snprintf(why, why_n, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? TCU_RAW_OOM : TCU_RAW_FAILED;
}

static void raw_free(void *ctx, void *p) {
    const tcu_device *d = ctx;
    cudaSetDevice(d->index);
    if (cudaFree(p) != cudaSuccess) cudaGetLastError();
}

static int host_alloc(void *ctx, size_t n, void **out) {
    (void)ctx;
    if (cudaHostAlloc(out, n, cudaHostAllocDefault) == cudaSuccess) return 0;
    cudaGetLastError();  // the caller copies synchronously instead
    return 1;
}

static void host_free(void *ctx, void *p) {
    (void)ctx;
    if (cudaFreeHost(p) != cudaSuccess) cudaGetLastError();
}

static void *ev_new(void *ctx) {
    (void)ctx;
    cudaEvent_t e;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess) return (void *)e;
    cudaGetLastError();  // the block stays out of reuse instead (pinned.h)
    return NULL;
}

static void ev_free(void *ctx, void *e) {
    (void)ctx;
    if (cudaEventDestroy((cudaEvent_t)e) != cudaSuccess) cudaGetLastError();
}

static int ev_record(void *ctx, void *e, void *stream) {
    (void)ctx;
    if (cudaEventRecord((cudaEvent_t)e, (cudaStream_t)stream) == cudaSuccess) return 0;
    cudaGetLastError();
    return 1;
}

static int ev_done(void *ctx, void *e) {
    (void)ctx;
    const cudaError_t r = cudaEventQuery((cudaEvent_t)e);
    if (r == cudaSuccess) return 1;
    cudaGetLastError();  // "not ready" is an answer, not a failure of the next launch
    return r == cudaErrorNotReady ? 0 : -1;
}

void tcu_device_raw_ops(tcu_device *d, tcu_raw_ops *out) { *out = (tcu_raw_ops){d, raw_alloc, raw_free}; }

void tcu_device_pinned_ops(tcu_device *d, tcu_pinned_ops *out) {
    *out = (tcu_pinned_ops){d, host_alloc, host_free, ev_new, ev_free, ev_record, ev_done};
}
