// backends/cuda/sim_thread_model.h — a CPU model of CUDA's thread hierarchy for tests only: the
// block-cooperative kernels (attention.cu, index_add.cu) compiled as host C++ run on it.
//
// tests/cuda.cmake builds cuda_sim_test: those .cu files copied to .cc and compiled with g++ and
// `-include sim_thread_model.h -DTCU_SIM`, linked into the host suite in place of its emulations, so
// run.c's dispatch drives the kernels' own code against the reference without a GPU. The model:
// blocks run one after another; a block's threads are pthreads; __syncthreads is a barrier over
// the block and a shuffle one over the warp (so every lane of a warp must reach it, as on the
// device with a full mask); dynamic shared memory starts as NaN bytes each block, so a read of a
// slot no thread wrote shows in the results. CUB's radix sort becomes std::stable_sort on its
// key bits. What it cannot show: races the barriers hide by being stricter than the hardware
// (tools/cuda-sanitize.sh's racecheck runs on a GPU), and speed.
#ifndef TCU_SIM_THREAD_MODEL_H
#define TCU_SIM_THREAD_MODEL_H

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

#include <cuda_runtime_api.h>

#undef __global__  // host_defines.h's attributes
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__

struct tcu_sim_dim3 {
    unsigned x, y, z;
};
inline thread_local tcu_sim_dim3 threadIdx;
inline tcu_sim_dim3 blockIdx, blockDim, gridDim;

#define TCU_SIM_SMEM_BYTES (256 * 1024)
#define TCU_SIM_MAX_THREADS 1024
alignas(16) inline float tcu_sim_smem[TCU_SIM_SMEM_BYTES / sizeof(float)];
#define tcu_attn_smem tcu_sim_smem  // attention.cu's dynamic shared memory
inline pthread_barrier_t tcu_sim_block, tcu_sim_warp[TCU_SIM_MAX_THREADS / 32];
inline float tcu_sim_slot[TCU_SIM_MAX_THREADS];

inline void __syncthreads() { pthread_barrier_wait(&tcu_sim_block); }

inline float __shfl_xor_sync(unsigned, float v, int m) {
    const unsigned t = threadIdx.x, w = t / 32;
    tcu_sim_slot[t] = v;
    pthread_barrier_wait(&tcu_sim_warp[w]);
    const float r = tcu_sim_slot[(t & ~31u) | ((t & 31u) ^ (unsigned)m)];
    pthread_barrier_wait(&tcu_sim_warp[w]);
    return r;
}

struct tcu_sim_thread {
    unsigned t;
    const std::function<void()> *body;
};
inline void *tcu_sim_thread_main(void *p) {
    const tcu_sim_thread *a = (const tcu_sim_thread *)p;
    threadIdx = {a->t, 0, 0};
    (*a->body)();
    return nullptr;
}

// Runs body as every thread of a (gx, gy) grid of `threads`-thread blocks, dynamic shared memory
// of smem bytes (at most TCU_SIM_SMEM_BYTES).
inline cudaError_t tcu_sim_launch(unsigned gx, unsigned gy, unsigned threads, size_t smem,
                                  const std::function<void()> &body) {
    if (threads == 0 || threads > TCU_SIM_MAX_THREADS || threads % 32 || smem > TCU_SIM_SMEM_BYTES)
        return cudaErrorInvalidConfiguration;
    gridDim = {gx, gy, 1};
    blockDim = {threads, 1, 1};
    pthread_barrier_init(&tcu_sim_block, nullptr, threads);
    for (unsigned w = 0; w < threads / 32; w++) pthread_barrier_init(&tcu_sim_warp[w], nullptr, 32);
    std::vector<pthread_t> th(threads);
    std::vector<tcu_sim_thread> args(threads);
    for (unsigned y = 0; y < gy; y++)
        for (unsigned x = 0; x < gx; x++) {
            blockIdx = {x, y, 0};
            memset(tcu_sim_smem, 0xFF, smem);  // NaN floats
            for (unsigned t = 0; t < threads; t++) {
                args[t] = {t, &body};
                if (pthread_create(&th[t], nullptr, tcu_sim_thread_main, &args[t]) != 0) abort();
            }
            for (unsigned t = 0; t < threads; t++) pthread_join(th[t], nullptr);
        }
    pthread_barrier_destroy(&tcu_sim_block);
    for (unsigned w = 0; w < threads / 32; w++) pthread_barrier_destroy(&tcu_sim_warp[w]);
    return cudaSuccess;
}

// kernel<<<grid, block, smem, stream>>>(args...) as the kernels write it (kernels.h's TCU_LAUNCH).
#define TCU_LAUNCH(kernel, grid, block, smem, stream, ...)                                               \
    (tcu_sim_last = tcu_sim_launch(dim3(grid).x, dim3(grid).y, dim3(block).x, (smem),                   \
                                   [&] { kernel(__VA_ARGS__); }))
inline cudaError_t tcu_sim_last;
#define cudaGetLastError() (tcu_sim_last)

template <typename T> inline cudaError_t cudaFuncSetAttribute(T *, cudaFuncAttribute, int bytes) {
    return bytes <= TCU_SIM_SMEM_BYTES ? cudaSuccess : cudaErrorInvalidValue;
}

// CUB's DeviceRadixSort::SortPairs: stable on bits [b0, b1) of the keys, as the LSD sort.
namespace cub {
struct DeviceRadixSort {
    template <typename K, typename V>
    static cudaError_t SortPairs(void *temp, size_t &bytes, const K *ki, K *ko, const V *vi, V *vo, int n, int b0,
                                 int b1, cudaStream_t = 0) {
        if (!temp) {
            bytes = 256;
            return cudaSuccess;
        }
        const K mask = b1 - b0 >= (int)(8 * sizeof(K)) ? ~(K)0 : (((K)1 << (b1 - b0)) - 1);
        std::vector<int> ord((size_t)n);
        std::iota(ord.begin(), ord.end(), 0);
        std::stable_sort(ord.begin(), ord.end(),
                         [&](int a, int b) { return ((ki[a] >> b0) & mask) < ((ki[b] >> b0) & mask); });
        for (int i = 0; i < n; i++) ko[i] = ki[ord[(size_t)i]], vo[i] = vi[ord[(size_t)i]];
        return cudaSuccess;
    }
};
}  // namespace cub

#endif
