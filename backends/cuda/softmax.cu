// backends/cuda/softmax.cu — softmax and log_softmax along one dim: three passes per row (max,
// sum of exp(x - max), write), `group` threads per row, float math (double for f64 and integers).
#include "kernels.h"

namespace {

template <typename It> struct RowPlan {
    It rows;
    int64_t n_rows, len, in_step, out_step;
    int group, per_block;
};

__device__ __forceinline__ void offs(const tcu_iter32 &it, int64_t i, int64_t off[TCU_MAX_OPS]) {
    uint32_t o[TCU_MAX_OPS];
    tcu_offsets32(&it, (uint32_t)i, o);
#pragma unroll
    for (int k = 0; k < TCU_MAX_OPS; k++) off[k] = o[k];
}
__device__ __forceinline__ void offs(const tcu_iter &it, int64_t i, int64_t off[TCU_MAX_OPS]) {
    tcu_offsets64(&it, i, off);
}

template <typename T> __device__ __forceinline__ T load(const void *b, int64_t i, torc_dtype d);
template <> __device__ __forceinline__ float load<float>(const void *b, int64_t i, torc_dtype d) { return tcu_load_f32(b, i, d); }
template <> __device__ __forceinline__ double load<double>(const void *b, int64_t i, torc_dtype d) { return tcu_load_f64(b, i, d); }
__device__ __forceinline__ void store(void *b, int64_t i, torc_dtype d, float v) { tcu_store_f32(b, i, d, v); }
__device__ __forceinline__ void store(void *b, int64_t i, torc_dtype d, double v) { tcu_store_f64(b, i, d, v); }
__device__ __forceinline__ float ex(float x) { return expf(x); }
__device__ __forceinline__ double ex(double x) { return exp(x); }
__device__ __forceinline__ float lg(float x) { return logf(x); }
__device__ __forceinline__ double lg(double x) { return log(x); }

// NaN-propagating max, as torch.max.
template <typename T> __device__ __forceinline__ T nanmax(T a, T b) {
    return a != a ? a : (b != b ? b : (b > a ? b : a));
}

// Group-wide max (MAX = true) or sum of v; every thread of the block calls it.
template <typename T, bool MAX>
__device__ __forceinline__ T group_reduce(T v, int group) {
    if (group == 1) return v;
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
        const T o = __shfl_xor_sync(0xFFFFFFFFu, v, m);
        v = MAX ? nanmax(v, o) : v + o;
    }
    if (group == 32) return v;
    __shared__ T part[TCU_THREADS / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();   // part[] may still be read by the previous call
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = part[0];
    for (int w = 1; w < TCU_THREADS / 32; w++) v = MAX ? nanmax(v, part[w]) : v + part[w];
    return v;
}

template <typename T, typename It>
__global__ void __launch_bounds__(TCU_THREADS) softmax_kernel(int log_out, torc_dtype in_dt, torc_dtype out_dt,
                                                              const void *in, void *out, RowPlan<It> pl) {
    for (int64_t base = (int64_t)blockIdx.x * pl.per_block; base < pl.n_rows;
         base += (int64_t)gridDim.x * pl.per_block) {
        const int64_t row = base + threadIdx.y;
        const bool valid = row < pl.n_rows;
        int64_t off[TCU_MAX_OPS] = {0, 0, 0, 0};
        if (valid) offs(pl.rows, row, off);
        const int64_t n = valid ? pl.len : 0;
        T m = -(T)INFINITY;
        for (int64_t j = threadIdx.x; j < n; j += pl.group)
            m = nanmax(m, load<T>(in, off[1] + j * pl.in_step, in_dt));
        m = group_reduce<T, true>(m, pl.group);
        T sum = 0;
        for (int64_t j = threadIdx.x; j < n; j += pl.group)
            sum += ex(load<T>(in, off[1] + j * pl.in_step, in_dt) - m);
        sum = group_reduce<T, false>(sum, pl.group);
        const T lse = lg(sum);
        for (int64_t j = threadIdx.x; j < n; j += pl.group) {
            const T x = load<T>(in, off[1] + j * pl.in_step, in_dt);
            store(out, off[0] + j * pl.out_step, out_dt, log_out ? x - m - lse : ex(x - m) / sum);
        }
    }
}

template <typename T, typename It>
int launch(int op, torc_dtype in_dt, torc_dtype out_dt, const void *in, void *out, const RowPlan<It> &p,
           uint32_t grid_x, cudaStream_t s) {
    const dim3 block((unsigned)p.group, (unsigned)p.per_block);
    softmax_kernel<T, It><<<grid_x, block, 0, s>>>(op == TORC_OP_LOG_SOFTMAX, in_dt, out_dt, in, out, p);
    return (int)cudaGetLastError();
}

template <typename It>
void fill_common(RowPlan<It> &p, const tcu_rows_plan *pl) {
    p.n_rows = pl->n_rows;
    p.len = pl->len;
    p.in_step = pl->in_step;
    p.out_step = pl->out_step;
    p.group = pl->group;
    p.per_block = pl->per_block;
}

}  // namespace

extern "C" int tcu_launch_softmax(int op, tcu_ctype ct, torc_dtype in_dt, torc_dtype out_dt, const void *in,
                                  void *out, const tcu_rows_plan *pl, cudaStream_t s) {
    if (pl->n_rows == 0 || pl->len == 0) return 0;
    if (pl->fits32) {
        RowPlan<tcu_iter32> p;
        tcu_iter_to32(&pl->rows, &p.rows);
        fill_common(p, pl);
        return ct == TCU_CT_F64 ? launch<double>(op, in_dt, out_dt, in, out, p, pl->grid_x, s)
                                : launch<float>(op, in_dt, out_dt, in, out, p, pl->grid_x, s);
    }
    RowPlan<tcu_iter> p;
    p.rows = pl->rows;
    fill_common(p, pl);
    return ct == TCU_CT_F64 ? launch<double>(op, in_dt, out_dt, in, out, p, pl->grid_x, s)
                            : launch<float>(op, in_dt, out_dt, in, out, p, pl->grid_x, s);
}
