// backends/cuda/layer_norm.cu — LAYER_NORM and LAYER_NORM_BACKWARD on contiguous rows (run.c checks):
// one block per row, two-pass mean and variance in float; dweight/dbias one thread per column.
#include "kernels.h"

namespace {

// Block-wide sum of v; every thread of the block calls it and gets the total.
__device__ __forceinline__ float block_sum(float v) {
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, m);
    __shared__ float part[TCU_THREADS / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();  // part[] may still be read by the previous call
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = 0;
    for (int w = 0; w < TCU_THREADS / 32; w++) v += part[w];
    return v;
}

__global__ void __launch_bounds__(TCU_THREADS) ln_forward(tcu_ln_args a) {
    const int64_t N = a.n;
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        const int64_t base = r * N;
        float s = 0;
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) s += tcu_load_f32(a.x, base + j, a.x_dt);
        const float total = block_sum(s);
        const float mu = N ? total / (float)N : 0.f;  // no elements: mean 0, rstd NaN (PyTorch's)
        float ss = 0;
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
            const float c = tcu_load_f32(a.x, base + j, a.x_dt) - mu;
            ss += c * c;
        }
        const float var = block_sum(ss);
        const float rs = 1.0f / sqrtf((N ? var / (float)N : NAN) + a.eps);
        if (threadIdx.x == 0) {
            tcu_store_f32(a.mean, r, a.s_dt, mu);
            tcu_store_f32(a.rstd, r, a.s_dt, rs);
        }
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
            float v = (tcu_load_f32(a.x, base + j, a.x_dt) - mu) * rs;
            if (a.w) v *= tcu_load_f32(a.w, j, a.p_dt);
            if (a.b) v += tcu_load_f32(a.b, j, a.p_dt);
            tcu_store_f32(a.y, base + j, a.x_dt, v);
        }
    }
}

// Min. one block per SM: with the default bound ptxas spilled registers here (tools/cuda_resource_check.sh).
__global__ void __launch_bounds__(TCU_THREADS, 1) ln_backward_dx(tcu_ln_args a) {
    const int64_t N = a.n;
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        const int64_t base = r * N;
        const float mu = tcu_load_f32(a.mean, r, a.s_dt), rs = tcu_load_f32(a.rstd, r, a.s_dt);
        float sg = 0, sgx = 0;  // sums of g = dy*w and g*xhat over the row
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
            float g = tcu_load_f32(a.dy, base + j, a.x_dt);
            if (a.w) g *= tcu_load_f32(a.w, j, a.p_dt);
            sg += g;
            sgx += g * ((tcu_load_f32(a.x, base + j, a.x_dt) - mu) * rs);
        }
        const float m1 = block_sum(sg) / (float)N, m2 = block_sum(sgx) / (float)N;
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
            float g = tcu_load_f32(a.dy, base + j, a.x_dt);
            if (a.w) g *= tcu_load_f32(a.w, j, a.p_dt);
            const float xh = (tcu_load_f32(a.x, base + j, a.x_dt) - mu) * rs;
            tcu_store_f32(a.dx, base + j, a.x_dt, rs * (g - m1 - xh * m2));
        }
    }
}

// dweight and dbias: thread j sums column j over the rows in order (coalesced across a warp).
__global__ void __launch_bounds__(TCU_THREADS) ln_backward_params(tcu_ln_args a) {
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < a.n; j += (int64_t)gridDim.x * blockDim.x) {
        float sw = 0, sb = 0;
        for (int64_t r = 0; r < a.rows; r++) {
            const float d = tcu_load_f32(a.dy, r * a.n + j, a.x_dt);
            const float xh = (tcu_load_f32(a.x, r * a.n + j, a.x_dt) - tcu_load_f32(a.mean, r, a.s_dt)) *
                             tcu_load_f32(a.rstd, r, a.s_dt);
            sw += d * xh;
            sb += d;
        }
        if (a.dw) tcu_store_f32(a.dw, j, a.p_dt, sw);
        if (a.db) tcu_store_f32(a.db, j, a.p_dt, sb);
    }
}

unsigned grid_for(int64_t items, int sm_count) {
    const int64_t cap = (int64_t)(sm_count > 0 ? sm_count : 1) * 32;
    return (unsigned)(items < 1 ? 1 : items < cap ? items : cap);
}

}  // namespace

extern "C" int tcu_launch_layer_norm(const tcu_ln_args *a, int sm_count, cudaStream_t s) {
    if (!a->backward) {
        if (a->rows == 0) return 0;
        ln_forward<<<grid_for(a->rows, sm_count), TCU_THREADS, 0, s>>>(*a);
        return (int)cudaGetLastError();
    }
    if (a->rows > 0 && a->n > 0) {
        ln_backward_dx<<<grid_for(a->rows, sm_count), TCU_THREADS, 0, s>>>(*a);
        const int rc = (int)cudaGetLastError();
        if (rc) return rc;
    }
    if ((a->dw || a->db) && a->n > 0) {
        ln_backward_params<<<grid_for((a->n + TCU_THREADS - 1) / TCU_THREADS, sm_count), TCU_THREADS, 0, s>>>(*a);
        return (int)cudaGetLastError();
    }
    return 0;
}
