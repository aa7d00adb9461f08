// backends/cuda/layer_norm.cu — LAYER_NORM and LAYER_NORM_BACKWARD on contiguous rows (run.c checks):
// one block per row, two-pass mean and variance in float (in double for f64, as PyTorch's CUDA
// kernels and the reference); dweight/dbias one thread per column.
#include "kernels.h"

namespace {

// Loads and stores in the math's type T (float, or double for f64).
template <typename T> __device__ __forceinline__ T ld(const void *p, int64_t i, torc_dtype d);
template <> __device__ __forceinline__ float ld<float>(const void *p, int64_t i, torc_dtype d) { return tcu_load_f32(p, i, d); }
template <> __device__ __forceinline__ double ld<double>(const void *p, int64_t i, torc_dtype d) { return tcu_load_f64(p, i, d); }
__device__ __forceinline__ void st(void *p, int64_t i, torc_dtype d, float v) { tcu_store_f32(p, i, d, v); }
__device__ __forceinline__ void st(void *p, int64_t i, torc_dtype d, double v) { tcu_store_f64(p, i, d, v); }
__device__ __forceinline__ float rsqrt_of(float v) { return 1.0f / sqrtf(v); }
__device__ __forceinline__ double rsqrt_of(double v) { return 1.0 / sqrt(v); }

// Block-wide sum of v; every thread of the block calls it and gets the total.
template <typename T> __device__ __forceinline__ T block_sum(T v) {
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, m);
    __shared__ T part[TCU_THREADS / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();  // part[] may still be read by the previous call
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = 0;
    for (int w = 0; w < TCU_THREADS / 32; w++) v += part[w];
    return v;
}

template <typename T> __global__ void __launch_bounds__(TCU_THREADS) ln_forward(tcu_ln_args a) {
    const int64_t N = a.n;
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        const int64_t base = r * N;
        T s = 0;
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) s += ld<T>(a.x, base + j, a.x_dt);
        const T total = block_sum(s);
        const T mu = N ? total / (T)N : (T)0;  // no elements: mean 0, rstd NaN (PyTorch's)
        T ss = 0;
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
            const T c = ld<T>(a.x, base + j, a.x_dt) - mu;
            ss += c * c;
        }
        const T var = block_sum(ss);
        const T rs = rsqrt_of((N ? var / (T)N : (T)NAN) + (T)a.eps);
        if (threadIdx.x == 0) {
            st(a.mean, r, a.s_dt, mu);
            st(a.rstd, r, a.s_dt, rs);
        }
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
            T v = (ld<T>(a.x, base + j, a.x_dt) - mu) * rs;
            if (a.w) v *= ld<T>(a.w, j, a.p_dt);
            if (a.b) v += ld<T>(a.b, j, a.p_dt);
            st(a.y, base + j, a.x_dt, v);
        }
    }
}

// Min. one block per SM: with the default bound ptxas spilled registers here (tools/cuda_resource_check.sh).
template <typename T> __global__ void __launch_bounds__(TCU_THREADS, 1) ln_backward_dx(tcu_ln_args a) {
    const int64_t N = a.n;
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        const int64_t base = r * N;
        const T mu = ld<T>(a.mean, r, a.s_dt), rs = ld<T>(a.rstd, r, a.s_dt);
        T sg = 0, sgx = 0;  // sums of g = dy*w and g*xhat over the row
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
            T g = ld<T>(a.dy, base + j, a.x_dt);
            if (a.w) g *= ld<T>(a.w, j, a.p_dt);
            sg += g;
            sgx += g * ((ld<T>(a.x, base + j, a.x_dt) - mu) * rs);
        }
        const T m1 = block_sum(sg) / (T)N, m2 = block_sum(sgx) / (T)N;
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
            T g = ld<T>(a.dy, base + j, a.x_dt);
            if (a.w) g *= ld<T>(a.w, j, a.p_dt);
            const T xh = (ld<T>(a.x, base + j, a.x_dt) - mu) * rs;
            st(a.dx, base + j, a.x_dt, rs * (g - m1 - xh * m2));
        }
    }
}

// dweight and dbias: thread j sums column j over the rows in order (coalesced across a warp).
template <typename T> __global__ void __launch_bounds__(TCU_THREADS) ln_backward_params(tcu_ln_args a) {
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < a.n; j += (int64_t)gridDim.x * blockDim.x) {
        T sw = 0, sb = 0;
        for (int64_t r = 0; r < a.rows; r++) {
            const T d = ld<T>(a.dy, r * a.n + j, a.x_dt);
            const T xh = (ld<T>(a.x, r * a.n + j, a.x_dt) - ld<T>(a.mean, r, a.s_dt)) * ld<T>(a.rstd, r, a.s_dt);
            sw += d * xh;
            sb += d;
        }
        if (a.dw) st(a.dw, j, a.p_dt, sw);
        if (a.db) st(a.db, j, a.p_dt, sb);
    }
}

unsigned grid_for(int64_t items, int sm_count) {
    const int64_t cap = (int64_t)(sm_count > 0 ? sm_count : 1) * 32;
    return (unsigned)(items < 1 ? 1 : items < cap ? items : cap);
}

template <typename T> int launch(const tcu_ln_args *a, int sm_count, cudaStream_t s) {
    if (!a->backward) {
        if (a->rows == 0) return 0;
        ln_forward<T><<<grid_for(a->rows, sm_count), TCU_THREADS, 0, s>>>(*a);
        return (int)cudaGetLastError();
    }
    if (a->rows > 0 && a->n > 0) {
        ln_backward_dx<T><<<grid_for(a->rows, sm_count), TCU_THREADS, 0, s>>>(*a);
        const int rc = (int)cudaGetLastError();
        if (rc) return rc;
    }
    if ((a->dw || a->db) && a->n > 0) {
        ln_backward_params<T><<<grid_for((a->n + TCU_THREADS - 1) / TCU_THREADS, sm_count), TCU_THREADS, 0, s>>>(*a);
        return (int)cudaGetLastError();
    }
    return 0;
}

}  // namespace

extern "C" int tcu_launch_layer_norm(const tcu_ln_args *a, int sm_count, cudaStream_t s) {
    return a->x_dt == TORC_DTYPE_F64 ? launch<double>(a, sm_count, s) : launch<float>(a, sm_count, s);
}
