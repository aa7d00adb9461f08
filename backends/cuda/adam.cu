// backends/cuda/adam.cu — ADAM_STEP: one grid-stride kernel over dense param, grad and state (f32,
// f64, f16, bf16), each element as adam_body.h computes it; ADAM_STEP_LIST: the same over a batch
// of parameters in one launch.
#include "kernels.h"

namespace {

template <bool F64>
// Min. one block per SM: with the default bound ptxas spilled registers here (tools/cuda_resource_check.sh).
__global__ void __launch_bounds__(TCU_THREADS, 1) adam_kernel(tcu_adam_args a, int64_t n) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        if constexpr (F64) tcu_adam_f64(&a, i);
        else tcu_adam_f32(&a, i);
    }
}

// The batch's parameters one after another, each spread over the whole grid (a small one leaves
// most threads idle for its few elements; the list's point is one launch, not 76).
template <bool F64>
__global__ void __launch_bounds__(TCU_THREADS, 1) adam_list_kernel(tcu_adam_list_args l) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int t = 0; t < l.n; t++) {
        const tcu_adam_args a = l.a[t];
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < l.numel[t]; i += step) {
            if constexpr (F64) tcu_adam_f64(&a, i);
            else tcu_adam_f32(&a, i);
        }
    }
}

}  // namespace

extern "C" int tcu_launch_adam_list(const tcu_adam_list_args *l, int sm_count, cudaStream_t s) {
    int64_t total = 0;
    for (int t = 0; t < l->n; t++) total += l->numel[t];
    if (total == 0) return 0;
    const tcu_launch g = tcu_launch_1d(total, sm_count, 4);
    if (l->a[0].dtype == TORC_DTYPE_F64) adam_list_kernel<true><<<g.blocks, g.threads, 0, s>>>(*l);
    else adam_list_kernel<false><<<g.blocks, g.threads, 0, s>>>(*l);
    return (int)cudaGetLastError();
}

extern "C" int tcu_launch_adam(const tcu_adam_args *a, int64_t n, int sm_count, cudaStream_t s) {
    if (n == 0) return 0;
    const tcu_launch l = tcu_launch_1d(n, sm_count, 4);
    if (a->dtype == TORC_DTYPE_F64) adam_kernel<true><<<l.blocks, l.threads, 0, s>>>(*a, n);
    else adam_kernel<false><<<l.blocks, l.threads, 0, s>>>(*a, n);
    return (int)cudaGetLastError();
}
