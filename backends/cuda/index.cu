// backends/cuda/index.cu — indexing kernels: gather/index_select/scatter_add/index_add/triu/tril
// over one walk, and masked_select/masked_scatter through a row-major scan of the mask.
#include "kernels.h"

namespace {

#define MASK_CHUNK 4096   // mask elements per block in the scan (16 rounds of 256)

__device__ __forceinline__ void coords_offsets(const tcu_iter &it, int64_t i, int64_t off[TCU_MAX_OPS],
                                               int64_t *row, int64_t *col) {
    int64_t c[TCU_D];
    tcu_coords64(&it, i, c);
#pragma unroll
    for (int k = 0; k < TCU_MAX_OPS; k++) {
        int64_t o = 0;
#pragma unroll
        for (int d = 0; d < TCU_D; d++) o += c[d] * it.stride[k][d];
        off[k] = o;
    }
    *row = c[TCU_D - 2];
    *col = c[TCU_D - 1];
}

__global__ void __launch_bounds__(TCU_THREADS) index_kernel(tcu_index_args x) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < x.it.numel; i += step) {
        int64_t off[TCU_MAX_OPS], row, col;
        coords_offsets(x.it, i, off, &row, &col);
        tcu_index_element(&x, off, row, col);
    }
}

// ---- masked ops ----
__device__ __forceinline__ int64_t mask_offset(const tcu_iter &it, int64_t i) {
    int64_t off[TCU_MAX_OPS];
    tcu_offsets64(&it, i, off);
    return off[2];
}

// counts[b] = number of true mask elements in chunk b.
__global__ void __launch_bounds__(TCU_THREADS) mask_count(tcu_index_args x, long long *counts) {
    const int64_t start = (int64_t)blockIdx.x * MASK_CHUNK;
    int c = 0;
    for (int r = 0; r < MASK_CHUNK / TCU_THREADS; r++) {
        const int64_t i = start + r * TCU_THREADS + threadIdx.x;
        c += i < x.it.numel && tcu_load_bool(x.idx, mask_offset(x.it, i), x.dt_idx);
    }
    __shared__ int part[TCU_THREADS / 32];
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) c += __shfl_xor_sync(0xFFFFFFFFu, c, m);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long t = 0;
        for (int w = 0; w < TCU_THREADS / 32; w++) t += part[w];
        counts[blockIdx.x] = t;
    }
}

// In place exclusive scan of counts[0..n) by one block, 256 at a time with a running carry.
__global__ void __launch_bounds__(TCU_THREADS) mask_scan(long long *counts, int64_t n) {
    __shared__ long long buf[TCU_THREADS];
    long long carry = 0;
    for (int64_t base = 0; base < n; base += TCU_THREADS) {
        const int64_t i = base + threadIdx.x;
        const long long v = i < n ? counts[i] : 0;
        buf[threadIdx.x] = v;
        __syncthreads();
        for (int off = 1; off < TCU_THREADS; off <<= 1) {   // Hillis-Steele inclusive scan
            const long long add = threadIdx.x >= (unsigned)off ? buf[threadIdx.x - off] : 0;
            __syncthreads();
            buf[threadIdx.x] += add;
            __syncthreads();
        }
        if (i < n) counts[i] = carry + buf[threadIdx.x] - v;
        carry += buf[TCU_THREADS - 1];
        __syncthreads();
    }
}

// Each true element learns its rank (true elements before it in row-major order) and moves.
__global__ void __launch_bounds__(TCU_THREADS) mask_apply(tcu_index_args x, const long long *starts) {
    __shared__ int warp_tot[TCU_THREADS / 32];
    const int64_t start = (int64_t)blockIdx.x * MASK_CHUNK;
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    long long carry = starts[blockIdx.x];
    for (int r = 0; r < MASK_CHUNK / TCU_THREADS; r++) {
        const int64_t i = start + r * TCU_THREADS + threadIdx.x;
        int64_t off[TCU_MAX_OPS] = {0, 0, 0, 0};
        bool flag = false;
        if (i < x.it.numel) {
            tcu_offsets64(&x.it, i, off);
            flag = tcu_load_bool(x.idx, off[2], x.dt_idx);
        }
        const unsigned ballot = __ballot_sync(0xFFFFFFFFu, flag);
        const int before_in_warp = __popc(ballot & ((1u << lane) - 1u));
        if (lane == 0) warp_tot[warp] = __popc(ballot);
        __syncthreads();
        int before_warp = 0, total = 0;
        for (unsigned w = 0; w < TCU_THREADS / 32; w++) {
            if (w < warp) before_warp += warp_tot[w];
            total += warp_tot[w];
        }
        if (flag) tcu_masked_element(&x, off, carry + before_warp + before_in_warp);
        carry += total;
        __syncthreads();   // warp_tot is rewritten next round
    }
}

}  // namespace

extern "C" int tcu_launch_index(const tcu_index_args *x, int sm_count, cudaStream_t s) {
    if (x->it.numel == 0) return 0;
    const tcu_launch l = tcu_launch_1d(x->it.numel, sm_count, 1);
    index_kernel<<<l.blocks, l.threads, 0, s>>>(*x);
    return (int)cudaGetLastError();
}

extern "C" size_t tcu_masked_scratch_bytes(int64_t numel) {
    const int64_t chunks = (numel + MASK_CHUNK - 1) / MASK_CHUNK;
    return (size_t)(chunks > 0 ? chunks : 1) * sizeof(long long);
}

extern "C" int tcu_launch_masked(const tcu_index_args *x, void *scratch, cudaStream_t s) {
    const int64_t n = x->it.numel;
    if (n == 0) return 0;
    const int64_t chunks = (n + MASK_CHUNK - 1) / MASK_CHUNK;
    if (chunks > 0x7FFFFFFF) return (int)cudaErrorInvalidValue;
    long long *counts = (long long *)scratch;
    mask_count<<<(unsigned)chunks, TCU_THREADS, 0, s>>>(*x, counts);
    mask_scan<<<1, TCU_THREADS, 0, s>>>(counts, chunks);
    mask_apply<<<(unsigned)chunks, TCU_THREADS, 0, s>>>(*x, counts);
    return (int)cudaGetLastError();
}
