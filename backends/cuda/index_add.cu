// backends/cuda/index_add.cu — deterministic INDEX_ADD for floating outs (the embedding's
// backward): a stable radix sort of the index positions by destination, then in-order sums.
#ifndef TCU_SIM  // the CPU model (sim_thread_model.h) brings its own sort
#include <cub/device/device_radix_sort.cuh>
#endif

#include "kernels.h"

// The scheme (index_ops.h says why): with N index entries and C elements per slice (every dim but
// dim; the embedding's backward: N = B*T tokens, C = the embedding width),
//  1. keys[j] = idx[j] (limit for a bad index, which also sets the error word), vals[j] = j;
//  2. CUB's DeviceRadixSort::SortPairs over the key bits that limit needs (LSD, hence stable:
//     equal destinations keep j ascending);
//  3. one thread per (sorted position k, slice element c): the first k of each destination run
//     loads out's element, adds the run's source elements in j order, rounding after each add as
//     the reference does, and stores once. Threads of a warp share k and take consecutive c, so
//     the source rows are read coalesced; the others of a run return at once.
// No atomics and no order that depends on scheduling: the same bits on every run, equal to the
// host's serial sum. Cost for the GPT (N = 8192 into (50304, 768), f32): the sort moves 32 N
// bytes over 16 key bits (2 passes), then the sums read the 8192 x 768 source once; a vocabulary
// of 256 gives runs of ~32 rows each, walked 4 rows at a time (independent loads in flight, the
// adds in order). A run of all N rows is serial per element: the price of the host's order.
namespace {

#define IA_UNROLL 4

typedef unsigned long long ia_key;
typedef long long ia_val;

__global__ void __launch_bounds__(TCU_THREADS) ia_keys(tcu_index_add_args x, ia_key *keys, ia_val *vals) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < x.n_idx; j += step) {
        int64_t v = ((const int64_t *)x.idx)[j * x.idx_step];
        if (v < 0 || v >= x.limit) {
            tcu_set_err(x.err, TCU_KERR_INDEX);
            v = x.limit;  // sorts last; the sums skip it
        }
        keys[j] = (ia_key)v;
        vals[j] = (ia_val)j;
    }
}

template <typename T> __device__ __forceinline__ T ia_load(const void *b, int64_t i, torc_dtype d);
template <> __device__ __forceinline__ float ia_load<float>(const void *b, int64_t i, torc_dtype d) {
    return tcu_load_f32(b, i, d);
}
template <> __device__ __forceinline__ double ia_load<double>(const void *b, int64_t i, torc_dtype d) {
    return tcu_load_f64(b, i, d);
}
__device__ __forceinline__ float ia_round(float v, torc_dtype d) { return tcu_round_f32_as(v, d); }
__device__ __forceinline__ double ia_round(double v, torc_dtype d) { return tcu_round_f64_as(v, d); }
__device__ __forceinline__ void ia_store(void *b, int64_t i, torc_dtype d, float v) { tcu_store_f32(b, i, d, v); }
__device__ __forceinline__ void ia_store(void *b, int64_t i, torc_dtype d, double v) { tcu_store_f64(b, i, d, v); }

template <typename T>
__global__ void __launch_bounds__(TCU_THREADS) ia_sums(tcu_index_add_args x, const ia_key *keys, const ia_val *vals) {
    const int64_t ncols = x.cols.numel, total = x.n_idx * ncols;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const int64_t k = i / ncols, c = i - k * ncols;
        const ia_key key = keys[k];
        if (key >= (ia_key)x.limit || (k > 0 && keys[k - 1] == key)) continue;  // a bad index, or not a run's head
        int64_t off[TCU_MAX_OPS];
        tcu_offsets64(&x.cols, c, off);
        const int64_t dst = off[0] + (int64_t)key * x.out_dim_stride;
        T acc = ia_load<T>(x.out, dst, x.dt_out);
        for (int64_t kk = k; kk < x.n_idx;) {
            // IA_UNROLL rows at a time: their loads are independent, their adds stay in order
            T v[IA_UNROLL];
            int n = 0;
#pragma unroll
            for (int u = 0; u < IA_UNROLL; u++) {
                const bool in_run = kk + u < x.n_idx && keys[kk + u] == key;
                v[u] = in_run ? ia_load<T>(x.src, off[1] + vals[kk + u] * x.src_dim_stride, x.dt_src) : T(0);
                n += in_run && n == u;
            }
#pragma unroll
            for (int u = 0; u < IA_UNROLL; u++)
                if (u < n) acc = ia_round(acc + v[u], x.dt_out);
            if (n < IA_UNROLL) break;
            kk += IA_UNROLL;
        }
        ia_store(x.out, dst, x.dt_out, acc);
    }
}

int key_bits(int64_t limit) {  // bits that hold 0 .. limit (limit marks a bad index)
    int b = 1;
    while (b < 64 && ((ia_key)1 << b) <= (ia_key)limit) b++;
    return b;
}

size_t round_up(size_t n) { return (n + 255) / 256 * 256; }

size_t cub_bytes(int64_t n, int bits, cudaStream_t s) {
    size_t bytes = 0;
    if (cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const ia_key *)nullptr, (ia_key *)nullptr,
                                        (const ia_val *)nullptr, (ia_val *)nullptr, (int)n, 0, bits, s) != cudaSuccess)
        return 0;
    return bytes;
}

}  // namespace

extern "C" size_t tcu_index_add_scratch_bytes(const tcu_index_add_args *x) {
    const size_t n = (size_t)(x->n_idx > 0 ? x->n_idx : 1);
    const size_t sort = cub_bytes(x->n_idx, key_bits(x->limit), 0);
    (void)cudaGetLastError();  // a failed size query leaves nothing for the next launch to trip on
    return 4 * round_up(n * 8) + round_up(sort ? sort : 1);
}

extern "C" int tcu_launch_index_add(const tcu_index_add_args *x, void *scratch, size_t scratch_bytes, int sm_count,
                                    cudaStream_t s) {
    const int64_t n = x->n_idx;
    if (n == 0 || x->cols.numel == 0) return 0;
    if (n > 0x7FFFFFFF) return (int)cudaErrorInvalidValue;  // CUB's item count is an int (run.c declines)
    const size_t row = round_up((size_t)n * 8);
    char *p = (char *)scratch;
    ia_key *keys_in = (ia_key *)p, *keys_out = (ia_key *)(p + row);
    ia_val *vals_in = (ia_val *)(p + 2 * row), *vals_out = (ia_val *)(p + 3 * row);
    void *temp = p + 4 * row;
    size_t temp_bytes = scratch_bytes > 4 * row ? scratch_bytes - 4 * row : 0;
    const tcu_launch lk = tcu_launch_1d(n, sm_count, 1);
    TCU_LAUNCH(ia_keys, lk.blocks, lk.threads, 0, s, *x, keys_in, vals_in);
    const int bits = key_bits(x->limit);
    cudaError_t e = cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, vals_in, vals_out, (int)n, 0,
                                                    bits, s);
    if (e != cudaSuccess) return (int)e;
    const tcu_launch ls = tcu_launch_1d(n * x->cols.numel, sm_count, 1);
    if (x->f64) TCU_LAUNCH(ia_sums<double>, ls.blocks, ls.threads, 0, s, *x, keys_out, vals_out);
    else TCU_LAUNCH(ia_sums<float>, ls.blocks, ls.threads, 0, s, *x, keys_out, vals_out);
    return (int)cudaGetLastError();
}
