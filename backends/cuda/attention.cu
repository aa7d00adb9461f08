// backends/cuda/attention.cu — fused scaled-dot-product attention, FlashAttention-2's scheme in
// f32 on CUDA cores: the forward's online softmax, the backward's three deterministic kernels.
#include "kernels.h"

extern __shared__ __align__(16) float tcu_attn_smem[];  // one block's tiles (tcu_attention_smem_bytes)

// Shapes (attention_ops.h): q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev), o (B, H, L, Ev),
// lse (B, H, L); T = f32, f16 or bf16, loaded into shared memory as f32.
//
// Forward: a block of 128 threads owns TILE = 32 query rows of one (b, h), four threads to a row
// (thread t: row t/4, lane t%4). It walks the keys TILE rows at a time (causal: only up to its
// last row): S = scale Q K^T (each thread 8 of its row's scores, keys lane + 4m), the row's running
// max m and sum l (FlashAttention's online softmax: on a new max the old sum and the output are
// rescaled by exp(m_old - m_new)), P through shared memory, then O += P V with each thread
// holding Ev/4 of its row's outputs in registers. At the end o = O / l and lse = m + log l (S = 0:
// o = 0, lse = -inf, as the contract says).
//
// Backward: p_ij is recomputed from lse, so nothing of size (L, S) is stored. Three kernels, none
// with atomics, so the sums run in one fixed order:
//  1. D_i = do_i . o_i per query row (one warp a row) into scratch;
//  2. a block owns a key tile and walks the query tiles (causal: from its own tile on): s, p,
//     dp = do . v, ds = p (dp - D), then dv_j += p_ij do_i and dk_j += ds_ij q_i in registers;
//  3. a block owns a query tile and walks the key tiles: dq_i += ds_ij k_j.
// Kernels 2 and 3 both compute s and dp (FlashAttention-2 computes them once and adds dq with
// atomics): twice the score math, paid for bits that do not change from run to run.
//
// Shared memory rows hold E rounded up to 4 (zeros past E) and are read as float4: a score's dot
// product is E/4 128-bit loads of each side, and a thread's outputs are groups of 4 adjacent
// columns (lane l: columns 4(l + 4m) .. +3), one float4 of V a group. The row pitch is 4 times an
// odd number of floats, so the four lanes' rows and the eight rows of a warp (pitch * r mod 32)
// fall in different banks. Tiles above 48 KiB (E = 128: 68-75 KiB) are opted into
// with cudaFuncAttributeMaxDynamicSharedMemorySize; sm_89's 99 KiB limit bounds E (256 forward,
// 128 backward: attention_ops.h).
//
// Registers (ptxas 13.0, tools/cuda_resource_check.sh): with no minimum of blocks, sm_89's ptxas
// held the scalar-load version's attn_fwd<64> to 128 registers and spilled (sm_80, sm_90 did not);
// with a minimum of 4 blocks (128 registers) the float4 version spills in 8 of 10 kernels. So the
// minimum is 2 (no cap below 255): the GPT's hs = 64 takes 125 registers forward (4 blocks of 128
// threads an SM), 160-168 backward (3); attn_fwd<64> and attn_bwd_dkdv<32>, 64 accumulators a
// thread, take 190 and 220-228 (minimum 1).
namespace {

#define TILE TCU_ATTN_TILE
#define NTHREADS TCU_ATTN_THREADS
#define PER_LANE (TILE / 4)  // scores per thread per tile

__device__ __forceinline__ float ld(const tcu_attn_tensor &t, int64_t off, torc_dtype dt) {
    return tcu_load_f32(t.data, off, dt);
}

__host__ __device__ __forceinline__ int round4(int n) { return (n + 3) & ~3; }
// The pitch of a row of n features: round4(n) + 4 or + 8, 4 times an odd number (see above).
__host__ __device__ __forceinline__ int pitch(int n) {
    const int q = round4(n) / 4 + 1;
    return 4 * (q | 1);
}

__device__ __forceinline__ float4 ld4(const float *p) { return *reinterpret_cast<const float4 *>(p); }
__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
    return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, acc))));
}
__device__ __forceinline__ void axpy4(float a, float4 x, float *y) {  // y[0..4) += a x
    y[0] = fmaf(a, x.x, y[0]), y[1] = fmaf(a, x.y, y[1]), y[2] = fmaf(a, x.z, y[2]), y[3] = fmaf(a, x.w, y[3]);
}

// rows [r0, r0 + TILE) x cols [0, round4(n)) of t (at base, row stride rs, col stride cs) into s
// (pitch p), zeros for rows at or past nrows and columns at or past n.
__device__ __forceinline__ void load_tile(float *s, int p, const tcu_attn_tensor &t, int64_t base, int64_t rs,
                                          int64_t cs, int64_t r0, int64_t nrows, int n, torc_dtype dt) {
    const int n4 = round4(n);
    for (int idx = threadIdx.x; idx < TILE * n4; idx += NTHREADS) {
        const int r = idx / n4, c = idx - r * n4;
        const int64_t row = r0 + r;
        s[r * p + c] = row < nrows && c < n ? ld(t, base + row * rs + c * cs, dt) : 0.0f;
    }
}

// Stores a thread's outputs acc (groups of 4 columns, see above) times f into row `base` of t.
template <int N>
__device__ __forceinline__ void store_row(const tcu_attn_tensor &t, int64_t base, int n, const float *acc, float f,
                                          torc_dtype dt) {
    const int c4 = threadIdx.x & 3;
#pragma unroll
    for (int m = 0; m < N / 4; m++)
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int e = 4 * (c4 + 4 * m) + k;
            if (e < n) tcu_store_f32(t.data, base + e * t.st[3], dt, acc[4 * m + k] * f);
        }
}

// Sum over the four lanes of a row (lanes 4r .. 4r+3 of the warp).
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xFFFFFFFFu, v, 1);
    return v + __shfl_xor_sync(0xFFFFFFFFu, v, 2);
}
__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 2));
}

// ---- forward ----
template <int NV>  // outputs per thread: Ev <= 4 * NV
__global__ void __launch_bounds__(NTHREADS, NV >= 64 ? 1 : 2) attn_fwd(tcu_attn_args a) {
    float *const sm = tcu_attn_smem;
    const int E = (int)a.E, Ev = (int)a.Ev, PE = pitch(E), PV = pitch(Ev), E4 = round4(E), Ev4 = round4(Ev);
    float *Qs = sm, *KV = Qs + TILE * PE, *Ps = KV + TILE * (PE > PV ? PE : PV);
    const int t = threadIdx.x, r = t >> 2, c4 = t & 3;
    const int64_t bh = blockIdx.x, b = bh / a.H, h = bh - b * a.H, i0 = (int64_t)blockIdx.y * TILE, i = i0 + r;
    const int64_t qb = b * a.q.st[0] + h * a.q.st[1], kb = b * a.k.st[0] + h * a.k.st[1],
                  vb = b * a.v.st[0] + h * a.v.st[1];
    load_tile(Qs, PE, a.q, qb, a.q.st[2], a.q.st[3], i0, a.L, E, a.dt);
    float m = -INFINITY, l = 0.0f, acc[NV];
#pragma unroll
    for (int n = 0; n < NV; n++) acc[n] = 0.0f;
    const int64_t kend = a.causal ? (i0 + TILE < a.S ? i0 + TILE : a.S) : a.S;
    for (int64_t j0 = 0; j0 < kend; j0 += TILE) {
        __syncthreads();  // the last tile's V and P are read
        load_tile(KV, PE, a.k, kb, a.k.st[2], a.k.st[3], j0, a.S, E, a.dt);
        __syncthreads();
        float s[PER_LANE];
#pragma unroll
        for (int u = 0; u < PER_LANE; u++) s[u] = 0.0f;
        for (int e = 0; e < E4; e += 4) {
            const float4 qv = ld4(&Qs[r * PE + e]);
#pragma unroll
            for (int u = 0; u < PER_LANE; u++) s[u] = dot4(qv, ld4(&KV[(c4 + 4 * u) * PE + e]), s[u]);
        }
        float mx = -INFINITY;
#pragma unroll
        for (int u = 0; u < PER_LANE; u++) {
            const int64_t j = j0 + c4 + 4 * u;
            s[u] = (j < a.S && !(a.causal && j > i)) ? s[u] * a.scale : -INFINITY;
            mx = fmaxf(mx, s[u]);
        }
        const float m_new = fmaxf(m, quad_max(mx));
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing yet: no NaN from -inf - -inf
        const float alpha = expf(m - m_use);
        float rs = 0.0f;
#pragma unroll
        for (int u = 0; u < PER_LANE; u++) {
            s[u] = expf(s[u] - m_use);
            rs += s[u];
            Ps[r * (TILE + 1) + c4 + 4 * u] = s[u];
        }
        l = l * alpha + quad_sum(rs);
        m = m_new;
#pragma unroll
        for (int n = 0; n < NV; n++) acc[n] *= alpha;
        __syncthreads();  // K read, P written
        load_tile(KV, PV, a.v, vb, a.v.st[2], a.v.st[3], j0, a.S, Ev, a.dt);
        __syncthreads();
        for (int jj = 0; jj < TILE; jj++) {
            const float p = Ps[r * (TILE + 1) + jj];
#pragma unroll
            for (int m = 0; m < NV / 4; m++) {
                const int e = 4 * (c4 + 4 * m);
                if (e < Ev4) axpy4(p, ld4(&KV[jj * PV + e]), &acc[4 * m]);
            }
        }
    }
    if (i >= a.L) return;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    store_row<NV>(a.o, b * a.o.st[0] + h * a.o.st[1] + i * a.o.st[2], Ev, acc, inv, a.dt);
    if (c4 == 0)
        ((float *)a.lse.data)[b * a.lse.st[0] + h * a.lse.st[1] + i * a.lse.st[2]] = l > 0.0f ? m + logf(l) : -INFINITY;
}

// ---- backward ----
// 1. D_i = sum_e do_ie o_ie, one warp a row.
__global__ void __launch_bounds__(256) attn_delta(tcu_attn_args a) {
    const int64_t rows = a.B * a.H * a.L, warps = (int64_t)gridDim.x * (blockDim.x / 32);
    const int lane = threadIdx.x & 31;
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; w < rows; w += warps) {
        const int64_t bh = w / a.L, i = w - bh * a.L, b = bh / a.H, h = bh - b * a.H;
        const int64_t db = b * a.dout.st[0] + h * a.dout.st[1] + i * a.dout.st[2],
                      ob = b * a.o.st[0] + h * a.o.st[1] + i * a.o.st[2];
        float d = 0.0f;
        for (int64_t e = lane; e < a.Ev; e += 32)
            d = fmaf(ld(a.dout, db + e * a.dout.st[3], a.dt), ld(a.o, ob + e * a.o.st[3], a.dt), d);
#pragma unroll
        for (int s = 16; s >= 1; s >>= 1) d += __shfl_xor_sync(0xFFFFFFFFu, d, s);
        if (lane == 0) a.delta[w] = d;
    }
}

// s and dp of query row qi (of Qs, dOs) against key row kj (of Ks, Vs), both in shared memory.
struct bwd_tiles {
    float *Qs, *dOs, *Ks, *Vs, *X, *Y;  // X, Y: the exchanged p / ds (pitch TILE + 1)
    float *lse, *D;                     // per query row of the tile
};

__device__ __forceinline__ bwd_tiles carve(float *sm, int PE, int PV) {
    bwd_tiles s;
    s.Qs = sm;
    s.dOs = s.Qs + TILE * PE;
    s.Ks = s.dOs + TILE * PV;
    s.Vs = s.Ks + TILE * PE;
    s.X = s.Vs + TILE * PV;
    s.Y = s.X + TILE * (TILE + 1);
    s.lse = s.Y + TILE * (TILE + 1);
    s.D = s.lse + TILE;
    return s;
}

// The query tile's lse and D (rows past L: lse +inf makes p 0).
__device__ __forceinline__ void load_rows(const tcu_attn_args &a, const bwd_tiles &s, int64_t b, int64_t h,
                                          int64_t bh, int64_t i0) {
    for (int r = threadIdx.x; r < TILE; r += NTHREADS) {
        const int64_t i = i0 + r;
        s.lse[r] = i < a.L ? ((const float *)a.lse.data)[b * a.lse.st[0] + h * a.lse.st[1] + i * a.lse.st[2]]
                           : INFINITY;
        s.D[r] = i < a.L ? a.delta[bh * a.L + i] : 0.0f;
    }
}

// 2. dk, dv: the block owns keys [j0, j0 + TILE); thread t: key row t/4, columns lane + 4n.
template <int N>  // E, Ev <= 4 * N
__global__ void __launch_bounds__(NTHREADS, N >= 32 ? 1 : 2) attn_bwd_dkdv(tcu_attn_args a) {
    float *const sm = tcu_attn_smem;
    const int E = (int)a.E, Ev = (int)a.Ev, PE = pitch(E), PV = pitch(Ev), E4 = round4(E), Ev4 = round4(Ev);
    const bwd_tiles s = carve(sm, PE, PV);
    const int t = threadIdx.x, r = t >> 2, c4 = t & 3;
    const int64_t bh = blockIdx.x, b = bh / a.H, h = bh - b * a.H, j0 = (int64_t)blockIdx.y * TILE, j = j0 + r;
    const int64_t qb = b * a.q.st[0] + h * a.q.st[1], kb = b * a.k.st[0] + h * a.k.st[1],
                  vb = b * a.v.st[0] + h * a.v.st[1], gb = b * a.dout.st[0] + h * a.dout.st[1];
    load_tile(s.Ks, PE, a.k, kb, a.k.st[2], a.k.st[3], j0, a.S, E, a.dt);
    load_tile(s.Vs, PV, a.v, vb, a.v.st[2], a.v.st[3], j0, a.S, Ev, a.dt);
    float dk[N], dv[N];
#pragma unroll
    for (int n = 0; n < N; n++) dk[n] = dv[n] = 0.0f;
    for (int64_t i0 = a.causal ? j0 / TILE * TILE : 0; i0 < a.L; i0 += TILE) {
        __syncthreads();  // the last tile's Q, dO, p, ds are read
        load_tile(s.Qs, PE, a.q, qb, a.q.st[2], a.q.st[3], i0, a.L, E, a.dt);
        load_tile(s.dOs, PV, a.dout, gb, a.dout.st[2], a.dout.st[3], i0, a.L, Ev, a.dt);
        load_rows(a, s, b, h, bh, i0);
        __syncthreads();
        float sc[PER_LANE], dp[PER_LANE];
#pragma unroll
        for (int u = 0; u < PER_LANE; u++) sc[u] = dp[u] = 0.0f;
        for (int e = 0; e < E4; e += 4) {
            const float4 kv = ld4(&s.Ks[r * PE + e]);
#pragma unroll
            for (int u = 0; u < PER_LANE; u++) sc[u] = dot4(ld4(&s.Qs[(c4 + 4 * u) * PE + e]), kv, sc[u]);
        }
        for (int e = 0; e < Ev4; e += 4) {
            const float4 vv = ld4(&s.Vs[r * PV + e]);
#pragma unroll
            for (int u = 0; u < PER_LANE; u++) dp[u] = dot4(ld4(&s.dOs[(c4 + 4 * u) * PV + e]), vv, dp[u]);
        }
#pragma unroll
        for (int u = 0; u < PER_LANE; u++) {
            const int qi = c4 + 4 * u;
            const int64_t i = i0 + qi;
            const float p = (i < a.L && j < a.S && !(a.causal && j > i)) ? expf(sc[u] * a.scale - s.lse[qi]) : 0.0f;
            s.X[r * (TILE + 1) + qi] = p;
            s.Y[r * (TILE + 1) + qi] = p * (dp[u] - s.D[qi]);
        }
        __syncthreads();
        for (int ii = 0; ii < TILE; ii++) {
            const float p = s.X[r * (TILE + 1) + ii], ds = s.Y[r * (TILE + 1) + ii];
#pragma unroll
            for (int m = 0; m < N / 4; m++) {
                const int e = 4 * (c4 + 4 * m);
                if (e < Ev4) axpy4(p, ld4(&s.dOs[ii * PV + e]), &dv[4 * m]);
                if (e < E4) axpy4(ds, ld4(&s.Qs[ii * PE + e]), &dk[4 * m]);
            }
        }
    }
    if (j >= a.S) return;
    store_row<N>(a.dk, b * a.dk.st[0] + h * a.dk.st[1] + j * a.dk.st[2], E, dk, a.scale, a.dt);
    store_row<N>(a.dv, b * a.dv.st[0] + h * a.dv.st[1] + j * a.dv.st[2], Ev, dv, 1.0f, a.dt);
}

// 3. dq: the block owns queries [i0, i0 + TILE); thread t: query row t/4, columns lane + 4n.
template <int N>  // E <= 4 * N
__global__ void __launch_bounds__(NTHREADS, 2) attn_bwd_dq(tcu_attn_args a) {
    float *const sm = tcu_attn_smem;
    const int E = (int)a.E, Ev = (int)a.Ev, PE = pitch(E), PV = pitch(Ev), E4 = round4(E), Ev4 = round4(Ev);
    const bwd_tiles s = carve(sm, PE, PV);
    const int t = threadIdx.x, r = t >> 2, c4 = t & 3;
    const int64_t bh = blockIdx.x, b = bh / a.H, h = bh - b * a.H, i0 = (int64_t)blockIdx.y * TILE, i = i0 + r;
    const int64_t qb = b * a.q.st[0] + h * a.q.st[1], kb = b * a.k.st[0] + h * a.k.st[1],
                  vb = b * a.v.st[0] + h * a.v.st[1], gb = b * a.dout.st[0] + h * a.dout.st[1];
    load_tile(s.Qs, PE, a.q, qb, a.q.st[2], a.q.st[3], i0, a.L, E, a.dt);
    load_tile(s.dOs, PV, a.dout, gb, a.dout.st[2], a.dout.st[3], i0, a.L, Ev, a.dt);
    load_rows(a, s, b, h, bh, i0);
    float dq[N];
#pragma unroll
    for (int n = 0; n < N; n++) dq[n] = 0.0f;
    const int64_t kend = a.causal ? (i0 + TILE < a.S ? i0 + TILE : a.S) : a.S;
    for (int64_t j0 = 0; j0 < kend; j0 += TILE) {
        __syncthreads();  // the last tile's K and ds are read
        load_tile(s.Ks, PE, a.k, kb, a.k.st[2], a.k.st[3], j0, a.S, E, a.dt);
        load_tile(s.Vs, PV, a.v, vb, a.v.st[2], a.v.st[3], j0, a.S, Ev, a.dt);
        __syncthreads();
        float sc[PER_LANE], dp[PER_LANE];
#pragma unroll
        for (int u = 0; u < PER_LANE; u++) sc[u] = dp[u] = 0.0f;
        for (int e = 0; e < E4; e += 4) {
            const float4 qv = ld4(&s.Qs[r * PE + e]);
#pragma unroll
            for (int u = 0; u < PER_LANE; u++) sc[u] = dot4(qv, ld4(&s.Ks[(c4 + 4 * u) * PE + e]), sc[u]);
        }
        for (int e = 0; e < Ev4; e += 4) {
            const float4 g = ld4(&s.dOs[r * PV + e]);
#pragma unroll
            for (int u = 0; u < PER_LANE; u++) dp[u] = dot4(g, ld4(&s.Vs[(c4 + 4 * u) * PV + e]), dp[u]);
        }
#pragma unroll
        for (int u = 0; u < PER_LANE; u++) {
            const int kj = c4 + 4 * u;
            const int64_t j = j0 + kj;
            const float p = (i < a.L && j < a.S && !(a.causal && j > i)) ? expf(sc[u] * a.scale - s.lse[r]) : 0.0f;
            s.Y[r * (TILE + 1) + kj] = p * (dp[u] - s.D[r]);
        }
        __syncthreads();
        for (int jj = 0; jj < TILE; jj++) {
            const float ds = s.Y[r * (TILE + 1) + jj];
#pragma unroll
            for (int m = 0; m < N / 4; m++) {
                const int e = 4 * (c4 + 4 * m);
                if (e < E4) axpy4(ds, ld4(&s.Ks[jj * PE + e]), &dq[4 * m]);
            }
        }
    }
    if (i >= a.L) return;
    store_row<N>(a.dq, b * a.dq.st[0] + h * a.dq.st[1] + i * a.dq.st[2], E, dq, a.scale, a.dt);
}

// Launches kernel k on (bh, tiles) with `bytes` of dynamic shared memory, opting in above 48 KiB.
template <typename K>
cudaError_t launch(K k, int64_t bh, int64_t tiles, size_t bytes, const tcu_attn_args &a, cudaStream_t s) {
    if (bh == 0 || tiles == 0) return cudaSuccess;
    if (bytes > 48 * 1024) {
        const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
        if (e != cudaSuccess) return e;
    }
    TCU_LAUNCH(k, dim3((unsigned)bh, (unsigned)tiles), NTHREADS, bytes, s, a);
    return cudaGetLastError();
}

int per_thread(int64_t n) { return n <= 32 ? 8 : n <= 64 ? 16 : n <= 128 ? 32 : 64; }

}  // namespace

extern "C" size_t tcu_attention_smem_bytes(const tcu_attn_args *a) {
    const size_t PE = (size_t)pitch((int)a->E), PV = (size_t)pitch((int)a->Ev);
    if (!a->backward) return sizeof(float) * (TILE * PE + TILE * (PE > PV ? PE : PV) + TILE * (TILE + 1));
    return sizeof(float) * (2 * TILE * PE + 2 * TILE * PV + 2 * TILE * (TILE + 1) + 2 * TILE);
}

extern "C" int tcu_launch_attention(const tcu_attn_args *a, int sm_count, cudaStream_t s) {
    const int64_t bh = a->B * a->H, qt = (a->L + TILE - 1) / TILE, kt = (a->S + TILE - 1) / TILE;
    const size_t bytes = tcu_attention_smem_bytes(a);
    cudaError_t e;
    if (!a->backward) {
        switch (per_thread(a->Ev)) {
        case 8: e = launch(attn_fwd<8>, bh, qt, bytes, *a, s); break;
        case 16: e = launch(attn_fwd<16>, bh, qt, bytes, *a, s); break;
        case 32: e = launch(attn_fwd<32>, bh, qt, bytes, *a, s); break;
        default: e = launch(attn_fwd<64>, bh, qt, bytes, *a, s); break;
        }
        return (int)e;
    }
    const int64_t rows = bh * a->L;
    if (rows > 0) {
        int64_t blocks = (rows + 7) / 8, cap = (int64_t)(sm_count > 0 ? sm_count : 1) * 32;
        if (blocks > cap) blocks = cap;
        TCU_LAUNCH(attn_delta, (unsigned)blocks, 256, 0, s, *a);
        if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
    }
    const int64_t big = a->E > a->Ev ? a->E : a->Ev;
    switch (per_thread(big)) {
    case 8: e = launch(attn_bwd_dkdv<8>, bh, kt, bytes, *a, s); break;
    case 16: e = launch(attn_bwd_dkdv<16>, bh, kt, bytes, *a, s); break;
    default: e = launch(attn_bwd_dkdv<32>, bh, kt, bytes, *a, s); break;
    }
    if (e != cudaSuccess) return (int)e;
    switch (per_thread(a->E)) {
    case 8: e = launch(attn_bwd_dq<8>, bh, qt, bytes, *a, s); break;
    case 16: e = launch(attn_bwd_dq<16>, bh, qt, bytes, *a, s); break;
    default: e = launch(attn_bwd_dq<32>, bh, qt, bytes, *a, s); break;
    }
    return (int)e;
}
