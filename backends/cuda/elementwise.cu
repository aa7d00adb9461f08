// backends/cuda/elementwise.cu — the elementwise kernels: a generic strided kernel per compute
// type (dtypes dispatched at run time inside), and a vectorised one for contiguous f32/f16/bf16;
// the fused pointwise ops, floor_divide / remainder / fmod and gelu_backward in strided kernels of
// their own.
#include "kernels.h"

namespace {

// alpha32: tcu_alpha_f32(a) where CT is F32 (computed once per thread, out of the loop).
template <int CT>
__device__ __forceinline__ void ew_apply(const tcu_ew_args *a, const int64_t *off, int64_t linear, float alpha32) {
    if constexpr (CT == TCU_CT_F32) tcu_ew_generic_f32(a, off, alpha32);
    else if constexpr (CT == TCU_CT_F64) tcu_ew_generic_f64(a, off);
    else if constexpr (CT == TCU_CT_GEN) tcu_ew_gen(a, off, linear);
    else tcu_ew_generic_i64(a, off);
}

template <int CT>
__global__ void __launch_bounds__(TCU_THREADS) ew_kernel32(tcu_ew_args a, tcu_iter32 it) {
    const uint32_t step = gridDim.x * blockDim.x;
    const float alpha32 = CT == TCU_CT_F32 ? tcu_alpha_f32(&a) : 0.0f;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < it.numel; i += step) {
        uint32_t o[TCU_MAX_OPS];
        tcu_offsets32(&it, i, o);
        const int64_t off[TCU_MAX_OPS] = {o[0], o[1], o[2], o[3]};
        ew_apply<CT>(&a, off, i, alpha32);
    }
}

// The 64-bit walk (huge tensors) keeps more state live across CUDA's out-of-line double pow and
// trig calls; min-blocks 1 lets ptxas give it the registers instead of spilling.
template <int CT>
__global__ void __launch_bounds__(TCU_THREADS, 1) ew_kernel64(tcu_ew_args a, tcu_iter it) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    const float alpha32 = CT == TCU_CT_F32 ? tcu_alpha_f32(&a) : 0.0f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < it.numel; i += step) {
        int64_t off[TCU_MAX_OPS];
        tcu_offsets64(&it, i, off);
        ew_apply<CT>(&a, off, i, alpha32);
    }
}

// The fused pointwise ops (ADDCMUL, ADDCDIV, LERP): kernels of their own (see tcu_ew_fused).
template <int CT>
__global__ void __launch_bounds__(TCU_THREADS) fused_kernel32(tcu_ew_args a, tcu_iter32 it) {
    const uint32_t step = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < it.numel; i += step) {
        uint32_t o[TCU_MAX_OPS];
        tcu_offsets32(&it, i, o);
        const int64_t off[TCU_MAX_OPS] = {o[0], o[1], o[2], o[3]};
        tcu_ew_fused(&a, off, CT);
    }
}

template <int CT>
__global__ void __launch_bounds__(TCU_THREADS, 1) fused_kernel64(tcu_ew_args a, tcu_iter it) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < it.numel; i += step) {
        int64_t off[TCU_MAX_OPS];
        tcu_offsets64(&it, i, off);
        tcu_ew_fused(&a, off, CT);
    }
}

// FLOOR_DIVIDE, REMAINDER, FMOD: kernels of their own too (see tcu_ew_divmod).
template <int CT>
__global__ void __launch_bounds__(TCU_THREADS) divmod_kernel32(tcu_ew_args a, tcu_iter32 it) {
    const uint32_t step = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < it.numel; i += step) {
        uint32_t o[TCU_MAX_OPS];
        tcu_offsets32(&it, i, o);
        const int64_t off[TCU_MAX_OPS] = {o[0], o[1], o[2], o[3]};
        tcu_ew_divmod(&a, off, CT);
    }
}

template <int CT>
__global__ void __launch_bounds__(TCU_THREADS, 1) divmod_kernel64(tcu_ew_args a, tcu_iter it) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < it.numel; i += step) {
        int64_t off[TCU_MAX_OPS];
        tcu_offsets64(&it, i, off);
        tcu_ew_divmod(&a, off, CT);
    }
}

// GELU_BACKWARD: kernels of their own too (see tcu_ew_gelu_backward); CT is F32 or F64.
template <int CT>
__global__ void __launch_bounds__(TCU_THREADS) gelu_backward_kernel32(tcu_ew_args a, tcu_iter32 it) {
    const uint32_t step = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < it.numel; i += step) {
        uint32_t o[TCU_MAX_OPS];
        tcu_offsets32(&it, i, o);
        const int64_t off[TCU_MAX_OPS] = {o[0], o[1], o[2], o[3]};
        tcu_ew_gelu_backward(&a, off, CT);
    }
}

template <int CT>
__global__ void __launch_bounds__(TCU_THREADS, 1) gelu_backward_kernel64(tcu_ew_args a, tcu_iter it) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < it.numel; i += step) {
        int64_t off[TCU_MAX_OPS];
        tcu_offsets64(&it, i, off);
        tcu_ew_gelu_backward(&a, off, CT);
    }
}

// ---- contiguous fast path ----
template <int DT> struct Elem;
template <> struct Elem<TORC_DTYPE_F32> {
    typedef float T;
    static __device__ __forceinline__ float load(T v) { return v; }
    static __device__ __forceinline__ T store(float v) { return v; }
};
template <> struct Elem<TORC_DTYPE_F16> {
    typedef uint16_t T;
    static __device__ __forceinline__ float load(T v) { return torc_f16_to_f32(v); }
    static __device__ __forceinline__ T store(float v) { return torc_f32_to_f16(v); }
};
template <> struct Elem<TORC_DTYPE_BF16> {
    typedef uint16_t T;
    static __device__ __forceinline__ float load(T v) { return torc_bf16_to_f32(v); }
    static __device__ __forceinline__ T store(float v) { return torc_f32_to_bf16(v); }
};

// alpha: tcu_alpha_f32(a), computed once per thread. No FLOOR_DIVIDE / REMAINDER / FMOD nor
// GELU_BACKWARD here (tcu_ew_fast_ok).
__device__ __forceinline__ float fast_op(const tcu_ew_args *a, float x, float y, float alpha) {
    return a->n_in == 1 ? tcu_unary_f32(a->op, x, a) : tcu_arith_alpha_f32(a->op, x, y, a, alpha);
}

// 16-byte vectors; inputs with stride 0 (bmask bit k) are scalars read once.
template <int DT>
__global__ void __launch_bounds__(TCU_THREADS) ew_fast(tcu_ew_args a, int64_t n, int bmask) {
    typedef typename Elem<DT>::T T;
    constexpr int V = 16 / sizeof(T);
    union Pack { uint4 u; T e[V]; };
    const T *x = (const T *)a.data[1];
    const T *y = (const T *)a.data[2];
    T *o = (T *)a.data[0];
    const float xs = (bmask & 2) ? Elem<DT>::load(x[0]) : 0.0f;
    const float ys = (a.n_in == 2 && (bmask & 4)) ? Elem<DT>::load(y[0]) : 0.0f;
    const float alpha = tcu_alpha_f32(&a);
    const int64_t nv = n / V;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += step) {
        Pack px, py, po;
        if (!(bmask & 2)) px.u = ((const uint4 *)x)[v];
        if (a.n_in == 2 && !(bmask & 4)) py.u = ((const uint4 *)y)[v];
#pragma unroll
        for (int j = 0; j < V; j++) {
            const float xv = (bmask & 2) ? xs : Elem<DT>::load(px.e[j]);
            const float yv = a.n_in == 2 ? ((bmask & 4) ? ys : Elem<DT>::load(py.e[j])) : 0.0f;
            po.e[j] = Elem<DT>::store(fast_op(&a, xv, yv, alpha));
        }
        ((uint4 *)o)[v] = po.u;
    }
    // the tail that does not fill a vector
    for (int64_t i = nv * V + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const float xv = (bmask & 2) ? xs : Elem<DT>::load(x[i]);
        const float yv = a.n_in == 2 ? ((bmask & 4) ? ys : Elem<DT>::load(y[i])) : 0.0f;
        o[i] = Elem<DT>::store(fast_op(&a, xv, yv, alpha));
    }
}

}  // namespace

extern "C" int tcu_launch_ew(const tcu_ew_args *a, const tcu_iter *it, int sm_count, cudaStream_t s) {
    if (it->numel == 0) return 0;
    if (tcu_ew_fast_ok(a, it)) {
        int bmask = 0;
        for (int k = 1; k <= a->n_in; k++)
            if (it->stride[k][TCU_D - 1] == 0) bmask |= 1 << k;
        const int per = a->dt[0] == TORC_DTYPE_F32 ? 4 : 8;
        const tcu_launch l = tcu_launch_1d(it->numel, sm_count, per);
        switch (a->dt[0]) {
        case TORC_DTYPE_F32: ew_fast<TORC_DTYPE_F32><<<l.blocks, l.threads, 0, s>>>(*a, it->numel, bmask); break;
        case TORC_DTYPE_F16: ew_fast<TORC_DTYPE_F16><<<l.blocks, l.threads, 0, s>>>(*a, it->numel, bmask); break;
        default: ew_fast<TORC_DTYPE_BF16><<<l.blocks, l.threads, 0, s>>>(*a, it->numel, bmask); break;
        }
        return (int)cudaGetLastError();
    }
    const tcu_launch l = tcu_launch_1d(it->numel, sm_count, 1);
    if (tcu_op_is_fused(a->op)) {
        if (tcu_iter_fits32(it)) {
            tcu_iter32 it32;
            tcu_iter_to32(it, &it32);
            switch (a->ct) {
            case TCU_CT_F32: fused_kernel32<TCU_CT_F32><<<l.blocks, l.threads, 0, s>>>(*a, it32); break;
            case TCU_CT_F64: fused_kernel32<TCU_CT_F64><<<l.blocks, l.threads, 0, s>>>(*a, it32); break;
            default: fused_kernel32<TCU_CT_I64><<<l.blocks, l.threads, 0, s>>>(*a, it32); break;
            }
        } else {
            switch (a->ct) {
            case TCU_CT_F32: fused_kernel64<TCU_CT_F32><<<l.blocks, l.threads, 0, s>>>(*a, *it); break;
            case TCU_CT_F64: fused_kernel64<TCU_CT_F64><<<l.blocks, l.threads, 0, s>>>(*a, *it); break;
            default: fused_kernel64<TCU_CT_I64><<<l.blocks, l.threads, 0, s>>>(*a, *it); break;
            }
        }
        return (int)cudaGetLastError();
    }
    if (tcu_op_is_divmod(a->op)) {
        if (tcu_iter_fits32(it)) {
            tcu_iter32 it32;
            tcu_iter_to32(it, &it32);
            switch (a->ct) {
            case TCU_CT_F32: divmod_kernel32<TCU_CT_F32><<<l.blocks, l.threads, 0, s>>>(*a, it32); break;
            case TCU_CT_F64: divmod_kernel32<TCU_CT_F64><<<l.blocks, l.threads, 0, s>>>(*a, it32); break;
            default: divmod_kernel32<TCU_CT_I64><<<l.blocks, l.threads, 0, s>>>(*a, it32); break;
            }
        } else {
            switch (a->ct) {
            case TCU_CT_F32: divmod_kernel64<TCU_CT_F32><<<l.blocks, l.threads, 0, s>>>(*a, *it); break;
            case TCU_CT_F64: divmod_kernel64<TCU_CT_F64><<<l.blocks, l.threads, 0, s>>>(*a, *it); break;
            default: divmod_kernel64<TCU_CT_I64><<<l.blocks, l.threads, 0, s>>>(*a, *it); break;
            }
        }
        return (int)cudaGetLastError();
    }
    if (a->op == TORC_OP_GELU_BACKWARD) {  // floating dtypes only (run.c's dtypes_ok): F32 or F64
        if (tcu_iter_fits32(it)) {
            tcu_iter32 it32;
            tcu_iter_to32(it, &it32);
            if (a->ct == TCU_CT_F64) gelu_backward_kernel32<TCU_CT_F64><<<l.blocks, l.threads, 0, s>>>(*a, it32);
            else gelu_backward_kernel32<TCU_CT_F32><<<l.blocks, l.threads, 0, s>>>(*a, it32);
        } else {
            if (a->ct == TCU_CT_F64) gelu_backward_kernel64<TCU_CT_F64><<<l.blocks, l.threads, 0, s>>>(*a, *it);
            else gelu_backward_kernel64<TCU_CT_F32><<<l.blocks, l.threads, 0, s>>>(*a, *it);
        }
        return (int)cudaGetLastError();
    }
    if (tcu_iter_fits32(it)) {
        tcu_iter32 it32;
        tcu_iter_to32(it, &it32);
        switch (a->ct) {
        case TCU_CT_F32: ew_kernel32<TCU_CT_F32><<<l.blocks, l.threads, 0, s>>>(*a, it32); break;
        case TCU_CT_F64: ew_kernel32<TCU_CT_F64><<<l.blocks, l.threads, 0, s>>>(*a, it32); break;
        case TCU_CT_GEN: ew_kernel32<TCU_CT_GEN><<<l.blocks, l.threads, 0, s>>>(*a, it32); break;
        default: ew_kernel32<TCU_CT_I64><<<l.blocks, l.threads, 0, s>>>(*a, it32); break;
        }
    } else {
        switch (a->ct) {
        case TCU_CT_F32: ew_kernel64<TCU_CT_F32><<<l.blocks, l.threads, 0, s>>>(*a, *it); break;
        case TCU_CT_F64: ew_kernel64<TCU_CT_F64><<<l.blocks, l.threads, 0, s>>>(*a, *it); break;
        case TCU_CT_GEN: ew_kernel64<TCU_CT_GEN><<<l.blocks, l.threads, 0, s>>>(*a, *it); break;
        default: ew_kernel64<TCU_CT_I64><<<l.blocks, l.threads, 0, s>>>(*a, *it); break;
        }
    }
    return (int)cudaGetLastError();
}

extern "C" int tcu_launch_copy_bytes(void *dst, const void *src, size_t nbytes, cudaStream_t s) {
    return (int)cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, s);
}

extern "C" int tcu_launch_zero_bytes(void *dst, size_t nbytes, cudaStream_t s) {
    return (int)cudaMemsetAsync(dst, 0, nbytes, s);
}
