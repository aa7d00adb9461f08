// backends/cuda/reduce.cu — reduction kernels: `group` threads per output (1, a warp or the
// block), optionally split over gridDim.y into partial states merged by a second kernel.
#include "kernels.h"

namespace {

// The accumulator functions of reduce_ops.h behind one name per compute type.
template <int CT> struct Acc;
template <> struct Acc<TCU_CT_F32> {
    typedef float T;
    typedef tcu_acc_f32 S;
    static __device__ __forceinline__ S init(int op, double p) { return tcu_acc_init_f32(op, p); }
    static __device__ __forceinline__ void push(int op, double p, S *s, T x, int64_t i) { tcu_acc_push_f32(op, p, s, x, i); }
    static __device__ __forceinline__ void combine(int op, double p, S *s, const S *o) { tcu_acc_combine_f32(op, p, s, o); }
    static __device__ __forceinline__ T final_(int op, double p, double c, const S *s, int64_t n) { return tcu_acc_final_f32(op, p, c, s, n); }
    static __device__ __forceinline__ T load(const void *b, int64_t i, torc_dtype d) { return tcu_load_f32(b, i, d); }
    static __device__ __forceinline__ void store(void *b, int64_t i, torc_dtype d, T v) { tcu_store_f32(b, i, d, v); }
};
template <> struct Acc<TCU_CT_F64> {
    typedef double T;
    typedef tcu_acc_f64 S;
    static __device__ __forceinline__ S init(int op, double p) { return tcu_acc_init_f64(op, p); }
    static __device__ __forceinline__ void push(int op, double p, S *s, T x, int64_t i) { tcu_acc_push_f64(op, p, s, x, i); }
    static __device__ __forceinline__ void combine(int op, double p, S *s, const S *o) { tcu_acc_combine_f64(op, p, s, o); }
    static __device__ __forceinline__ T final_(int op, double p, double c, const S *s, int64_t n) { return tcu_acc_final_f64(op, p, c, s, n); }
    static __device__ __forceinline__ T load(const void *b, int64_t i, torc_dtype d) { return tcu_load_f64(b, i, d); }
    static __device__ __forceinline__ void store(void *b, int64_t i, torc_dtype d, T v) { tcu_store_f64(b, i, d, v); }
};
template <> struct Acc<TCU_CT_I64> {
    typedef int64_t T;
    typedef tcu_acc_i64 S;
    static __device__ __forceinline__ S init(int op, double p) { return tcu_acc_init_i64(op, p); }
    static __device__ __forceinline__ void push(int op, double p, S *s, T x, int64_t i) { tcu_acc_push_i64(op, p, s, x, i); }
    static __device__ __forceinline__ void combine(int op, double p, S *s, const S *o) { tcu_acc_combine_i64(op, p, s, o); }
    static __device__ __forceinline__ T final_(int op, double p, double c, const S *s, int64_t n) { return tcu_acc_final_i64(op, p, c, s, n); }
    static __device__ __forceinline__ T load(const void *b, int64_t i, torc_dtype d) { return tcu_load_i64(b, i, d); }
    static __device__ __forceinline__ void store(void *b, int64_t i, torc_dtype d, T v) { tcu_store_i64(b, i, d, v); }
};

// Offsets through either plan width.
__device__ __forceinline__ void offs(const tcu_iter32 &it, int64_t i, int64_t off[TCU_MAX_OPS]) {
    uint32_t o[TCU_MAX_OPS];
    tcu_offsets32(&it, (uint32_t)i, o);
#pragma unroll
    for (int k = 0; k < TCU_MAX_OPS; k++) off[k] = o[k];
}
__device__ __forceinline__ void offs(const tcu_iter &it, int64_t i, int64_t off[TCU_MAX_OPS]) {
    tcu_offsets64(&it, i, off);
}

// MAX_DIM / MIN_DIM: in's element at reduced index n of the output whose outer offsets are ob.
template <typename It>
__device__ __forceinline__ void store_value(const tcu_reduce_args &a, const It &inner, const int64_t *ob, int64_t n) {
    int64_t io[TCU_MAX_OPS];
    offs(inner, n, io);
    tcu_move_raw(a.values, ob[2], a.in, ob[1] + io[0], (int)torc_abi_dtype_size(a.in_dt));
}

template <typename It> struct RPlan {
    It outer, inner;
    int64_t n_out, n_red, chunk;
    int group, per_block, split;
};

template <typename S>
__device__ __forceinline__ S shfl_xor(const S &s, int lane_mask) {
    S o;
    o.a = __shfl_xor_sync(0xFFFFFFFFu, s.a, lane_mask);
    o.b = __shfl_xor_sync(0xFFFFFFFFu, s.b, lane_mask);
    o.n = (int64_t)__shfl_xor_sync(0xFFFFFFFFu, (long long)s.n, lane_mask);
    return o;
}

// Merges the states of the `group` threads sharing an output into lane 0 of the group.
// Every thread of the block calls it (it may synchronise the block).
template <int CT>
__device__ __forceinline__ void group_combine(int op, double p, typename Acc<CT>::S *s, int group) {
    typedef typename Acc<CT>::S S;
    if (group == 1) return;
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
        const S o = shfl_xor(*s, m);
        Acc<CT>::combine(op, p, s, &o);
    }
    if (group == 32) return;
    __shared__ S warp_states[TCU_THREADS / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) warp_states[warp] = *s;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < TCU_THREADS / 32; w++) Acc<CT>::combine(op, p, s, &warp_states[w]);
    __syncthreads();
}

template <int CT, typename It>
__global__ void __launch_bounds__(TCU_THREADS) reduce_kernel(tcu_reduce_args a, RPlan<It> pl) {
    typedef typename Acc<CT>::S S;
    const int op = a.op;
    const int64_t r0 = (int64_t)blockIdx.y * pl.chunk;
    const int64_t r1 = r0 + pl.chunk < pl.n_red ? r0 + pl.chunk : pl.n_red;
    for (int64_t base = (int64_t)blockIdx.x * pl.per_block; base < pl.n_out;
         base += (int64_t)gridDim.x * pl.per_block) {
        const int64_t o = base + threadIdx.y;
        const bool valid = o < pl.n_out;
        S s = Acc<CT>::init(op, a.p);
        int64_t ob[TCU_MAX_OPS] = {0, 0, 0, 0};
        if (valid) {
            offs(pl.outer, o, ob);
            for (int64_t r = r0 + threadIdx.x; r < r1; r += pl.group) {
                int64_t io[TCU_MAX_OPS];
                offs(pl.inner, r, io);
                Acc<CT>::push(op, a.p, &s, Acc<CT>::load(a.in, ob[1] + io[0], a.in_dt), r);
            }
        }
        group_combine<CT>(op, a.p, &s, pl.group);
        if (valid && threadIdx.x == 0) {
            if (pl.split > 1) {
                ((S *)a.partial)[o * pl.split + blockIdx.y] = s;
            } else if (tcu_op_is_arg(op)) {
                tcu_store_i64(a.out, ob[0], a.out_dt, s.n);
                if (a.values) store_value(a, pl.inner, ob, s.n);
            } else {
                Acc<CT>::store(a.out, ob[0], a.out_dt, Acc<CT>::final_(op, a.p, a.correction, &s, a.n_red));
            }
        }
    }
}

// Second pass of a split reduction: one thread per output merges its partial states in order.
template <int CT, typename It>
__global__ void __launch_bounds__(TCU_THREADS) reduce_finish(tcu_reduce_args a, RPlan<It> pl) {
    typedef typename Acc<CT>::S S;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < pl.n_out; o += step) {
        const S *part = (const S *)a.partial + o * pl.split;
        S s = part[0];
        for (int y = 1; y < pl.split; y++) Acc<CT>::combine(a.op, a.p, &s, &part[y]);
        int64_t ob[TCU_MAX_OPS];
        offs(pl.outer, o, ob);
        if (tcu_op_is_arg(a.op)) {
            tcu_store_i64(a.out, ob[0], a.out_dt, s.n);
            if (a.values) store_value(a, pl.inner, ob, s.n);
        } else {
            Acc<CT>::store(a.out, ob[0], a.out_dt, Acc<CT>::final_(a.op, a.p, a.correction, &s, a.n_red));
        }
    }
}

template <int CT, typename It>
int launch(const tcu_reduce_args *a, const RPlan<It> &p, uint32_t grid_x, cudaStream_t s) {
    const dim3 block((unsigned)p.group, (unsigned)p.per_block);
    const dim3 grid(grid_x, (unsigned)p.split);
    reduce_kernel<CT, It><<<grid, block, 0, s>>>(*a, p);
    if (p.split > 1) {
        const tcu_launch l = tcu_launch_1d(p.n_out, 1, 1);
        reduce_finish<CT, It><<<l.blocks, l.threads, 0, s>>>(*a, p);
    }
    return (int)cudaGetLastError();
}

template <typename It>
void fill_common(RPlan<It> &p, const tcu_reduce_plan *pl) {
    p.n_out = pl->n_out;
    p.n_red = pl->n_red;
    p.chunk = pl->chunk;
    p.group = pl->group;
    p.per_block = pl->per_block;
    p.split = pl->split;
}

}  // namespace

extern "C" int tcu_launch_reduce(const tcu_reduce_args *a, const tcu_reduce_plan *pl, cudaStream_t s) {
    if (pl->n_out == 0) return 0;
    if (pl->fits32) {
        RPlan<tcu_iter32> p;
        tcu_iter_to32(&pl->outer, &p.outer);
        tcu_iter_to32(&pl->inner, &p.inner);
        fill_common(p, pl);
        switch (a->ct) {
        case TCU_CT_F32: return launch<TCU_CT_F32>(a, p, pl->grid_x, s);
        case TCU_CT_F64: return launch<TCU_CT_F64>(a, p, pl->grid_x, s);
        default: return launch<TCU_CT_I64>(a, p, pl->grid_x, s);
        }
    }
    RPlan<tcu_iter> p;
    p.outer = pl->outer;
    p.inner = pl->inner;
    fill_common(p, pl);
    switch (a->ct) {
    case TCU_CT_F32: return launch<TCU_CT_F32>(a, p, pl->grid_x, s);
    case TCU_CT_F64: return launch<TCU_CT_F64>(a, p, pl->grid_x, s);
    default: return launch<TCU_CT_I64>(a, p, pl->grid_x, s);
    }
}
