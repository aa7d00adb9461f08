// backends/cuda/matmul.cu — the generic matmul kernels for what cuBLAS/cuBLASLt cannot take
// (integer and fp8 operands, mixed dtypes, broadcast matrix dims, non-TN fp8 layouts).
#include "kernels.h"

namespace {

__global__ void __launch_bounds__(TCU_THREADS) mm_kernel(tcu_mm_args m) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m.it.numel; i += step) {
        int64_t off[TCU_MAX_OPS];
        tcu_offsets64(&m.it, i, off);
        tcu_mm_element(&m, off);
    }
}

__global__ void __launch_bounds__(TCU_THREADS) smm_kernel(tcu_smm_args m) {
    const int64_t n = m.M * m.N;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        tcu_smm_element(&m, i / m.N, i % m.N);
}

}  // namespace

extern "C" int tcu_launch_mm(const tcu_mm_args *m, int sm_count, cudaStream_t s) {
    if (m->it.numel == 0) return 0;
    const tcu_launch l = tcu_launch_1d(m->it.numel, sm_count, 1);
    mm_kernel<<<l.blocks, l.threads, 0, s>>>(*m);
    return (int)cudaGetLastError();
}

extern "C" int tcu_launch_smm(const tcu_smm_args *m, int sm_count, cudaStream_t s) {
    if (m->amax) {
        const cudaError_t e = cudaMemsetAsync(m->amax, 0, sizeof(float), s);
        if (e != cudaSuccess) return (int)e;
    }
    if (m->M * m->N == 0) return 0;
    const tcu_launch l = tcu_launch_1d(m->M * m->N, sm_count, 1);
    smm_kernel<<<l.blocks, l.threads, 0, s>>>(*m);
    return (int)cudaGetLastError();
}
