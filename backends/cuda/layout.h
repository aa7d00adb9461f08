// backends/cuda/layout.h — iteration plans shared by host and device code: dimension merging,
// the 32/64-bit index choice, fast 32-bit division and the 1-D launch configuration.
#ifndef TCU_LAYOUT_H
#define TCU_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include <torc/backend.h>
#include <torc/convert.h>  // TORC_HD

#include "dtype_io.h"  // TCU_HDI

#ifdef __cplusplus
extern "C" {
#endif

// Operands of one iteration: [0] is the output, [1..3] the inputs (WHERE has three).
#define TCU_MAX_OPS 4
#define TCU_D TORC_MAX_DIMS

// ---- fast division by a run-time constant ----
// Granlund-Montgomery as in PyTorch's IntDivider: q = (umulhi(n, m) + n) >> s, exact for every
// divisor d >= 1 and numerator n < 2^31 (then umulhi(n, m) + n < 2^32 cannot overflow).
typedef struct tcu_divider {
    uint32_t d, m, s;
} tcu_divider;

TORC_HD static inline tcu_divider tcu_divider_make(uint32_t d) {
    tcu_divider v;
    uint32_t s = 0;
    while (s < 32 && ((uint64_t)1 << s) < d) s++;
    v.d = d;
    v.s = s;
    v.m = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << s) - d)) / d + 1);
    return v;
}

TCU_HDI uint32_t tcu_div(uint32_t n, tcu_divider v) {
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(n, v.m);
#else
    const uint32_t t = (uint32_t)(((uint64_t)n * v.m) >> 32);
#endif
    return (t + n) >> v.s;
}

// ---- iteration plan ----
// An n-operand walk over one shape in row-major order. Dims are stored RIGHT-ALIGNED: the
// innermost dim is always index TCU_D-1 and the plan uses [TCU_D-ndim, TCU_D), so device loops
// unroll over constant indices and keep everything in registers. Size-1 dims are dropped and
// neighbours that are contiguous for every operand merged, which keeps the linear index equal
// to the row-major index of the original shape (RNG and masked ops rely on that).
typedef struct tcu_iter {
    int ndim;                          // >= 1 (a 0-dim or all-ones shape becomes [1])
    int nops;                          // operands, 1..TCU_MAX_OPS
    int64_t numel;
    int64_t shape[TCU_D];
    int64_t stride[TCU_MAX_OPS][TCU_D];
} tcu_iter;

// 32-bit form, valid when tcu_iter_fits32(): every offset and the numel fit in int32.
typedef struct tcu_iter32 {
    int ndim, nops;
    uint32_t numel;
    tcu_divider div[TCU_D];            // shape as dividers
    uint32_t stride[TCU_MAX_OPS][TCU_D];
} tcu_iter32;

#define TCU_ITER_KEEP_LAST2 1u  // keep the last two dims apart (triu/tril need row, col)

// Builds the plan for `nops` operands sharing (ndim, shape); strides[k] are operand k's strides
// (elements, >= 0). Returns false if the arguments are out of range (ndim > TORC_MAX_DIMS).
static inline bool tcu_iter_build(tcu_iter *it, int ndim, const int64_t *shape, int nops,
                                  const int64_t *const *strides, unsigned flags) {
    if (ndim < 0 || ndim > TCU_D || nops < 1 || nops > TCU_MAX_OPS) return false;
    int64_t sh[TCU_D], st[TCU_MAX_OPS][TCU_D];
    int n = 0;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        numel *= shape[d];
        const bool keep = (flags & TCU_ITER_KEEP_LAST2) && d >= ndim - 2;
        if (shape[d] == 1 && !keep) continue;
        sh[n] = shape[d];
        for (int k = 0; k < nops; k++) st[k][n] = strides[k][d];
        n++;
    }
    // Merge from the inside out: dim j (outer) folds into the current innermost run when every
    // operand's stride[j] == shape[run] * stride[run].
    int64_t msh[TCU_D], mst[TCU_MAX_OPS][TCU_D];
    int m = 0;
    const int first_fixed = (flags & TCU_ITER_KEEP_LAST2) ? n - 2 : n;
    for (int j = n - 1; j >= 0; j--) {
        bool merge = m > 0 && j < first_fixed - 1;
        for (int k = 0; merge && k < nops; k++)
            merge = st[k][j] == msh[m - 1] * mst[k][m - 1];
        if (merge) {
            msh[m - 1] *= sh[j];
        } else {
            msh[m] = sh[j];
            for (int k = 0; k < nops; k++) mst[k][m] = st[k][j];
            m++;
        }
    }
    if (m == 0) {  // a scalar: one element
        msh[0] = 1;
        for (int k = 0; k < nops; k++) mst[k][0] = 0;
        m = 1;
    }
    it->ndim = m;
    it->nops = nops;
    it->numel = numel;
    for (int d = 0; d < TCU_D; d++) {
        it->shape[d] = 1;
        for (int k = 0; k < TCU_MAX_OPS; k++) it->stride[k][d] = 0;
    }
    // msh is innermost-first; store right-aligned (innermost at TCU_D-1).
    for (int i = 0; i < m; i++) {
        it->shape[TCU_D - 1 - i] = msh[i];
        for (int k = 0; k < nops; k++) it->stride[k][TCU_D - 1 - i] = mst[k][i];
    }
    return true;
}

// The largest element offset operand k reaches (0 for an empty iteration).
static inline int64_t tcu_iter_max_offset(const tcu_iter *it, int k) {
    if (it->numel == 0) return 0;
    int64_t off = 0;
    for (int d = TCU_D - it->ndim; d < TCU_D; d++) off += (it->shape[d] - 1) * it->stride[k][d];
    return off;
}

// True when 32-bit index math is exact: numel and every operand's reach below 2^31.
static inline bool tcu_iter_fits32(const tcu_iter *it) {
    if (it->numel > INT32_MAX) return false;
    for (int k = 0; k < it->nops; k++)
        if (tcu_iter_max_offset(it, k) > INT32_MAX) return false;
    return true;
}

static inline void tcu_iter_to32(const tcu_iter *it, tcu_iter32 *o) {
    o->ndim = it->ndim;
    o->nops = it->nops;
    o->numel = (uint32_t)it->numel;
    for (int d = 0; d < TCU_D; d++) {
        o->div[d] = tcu_divider_make((uint32_t)(it->shape[d] > 0 ? it->shape[d] : 1));
        for (int k = 0; k < TCU_MAX_OPS; k++) o->stride[k][d] = (uint32_t)it->stride[k][d];
    }
}

// Element offsets of linear index i for every operand. The loops run over constant bounds so
// nvcc unrolls them; dims outside the plan are skipped by the ndim test.
TCU_HDI void tcu_offsets32(const tcu_iter32 *it, uint32_t i,
                                         uint32_t off[TCU_MAX_OPS]) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int k = 0; k < TCU_MAX_OPS; k++) off[k] = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int d = TCU_D - 1; d >= 0; d--) {
        if (d < TCU_D - it->ndim) break;
        uint32_t c;
        if (d == TCU_D - it->ndim) {
            c = i;  // the outermost dim takes what is left: no division
        } else {
            const uint32_t q = tcu_div(i, it->div[d]);
            c = i - q * it->div[d].d;
            i = q;
        }
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int k = 0; k < TCU_MAX_OPS; k++) off[k] += c * it->stride[k][d];
    }
}

TCU_HDI void tcu_offsets64(const tcu_iter *it, int64_t i, int64_t off[TCU_MAX_OPS]) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int k = 0; k < TCU_MAX_OPS; k++) off[k] = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int d = TCU_D - 1; d >= 0; d--) {
        if (d < TCU_D - it->ndim) break;
        int64_t c;
        if (d == TCU_D - it->ndim) {
            c = i;
        } else {
            const int64_t q = i / it->shape[d];
            c = i - q * it->shape[d];
            i = q;
        }
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int k = 0; k < TCU_MAX_OPS; k++) off[k] += c * it->stride[k][d];
    }
}

// Row-major coordinates of linear index i (right-aligned, like the plan): coord[TCU_D-1] is the
// innermost. Used by ops that need positions (triu/tril, index ops).
TCU_HDI void tcu_coords64(const tcu_iter *it, int64_t i, int64_t coord[TCU_D]) {
    for (int d = TCU_D - 1; d >= 0; d--) {
        if (d < TCU_D - it->ndim) {
            coord[d] = 0;
            continue;
        }
        if (d == TCU_D - it->ndim) {
            coord[d] = i;
        } else {
            const int64_t q = i / it->shape[d];
            coord[d] = i - q * it->shape[d];
            i = q;
        }
    }
}

// ---- launch configuration ----
typedef struct tcu_launch {
    uint32_t blocks, threads;
} tcu_launch;

#define TCU_THREADS 256
#define TCU_MAX_BLOCKS 65535u  // grid-stride loops cover the rest; also fits gridDim.y limits

// A 1-D grid for `n` work items, each thread taking `per_thread` of them in a grid-stride loop:
// enough blocks to fill the device `waves` times (sm_count * blocks_per_sm each), never more than
// the work needs, at least 1. n == 0 gives 0 blocks: the caller launches nothing.
static inline tcu_launch tcu_launch_1d(int64_t n, int sm_count, int per_thread) {
    tcu_launch l;
    l.threads = TCU_THREADS;
    if (n <= 0) {
        l.blocks = 0;
        return l;
    }
    if (per_thread < 1) per_thread = 1;
    if (sm_count < 1) sm_count = 1;
    const int64_t per_block = (int64_t)TCU_THREADS * per_thread;
    int64_t need = (n + per_block - 1) / per_block;
    const int64_t cap = (int64_t)sm_count * 8 * 4;  // 8 blocks of 256 per SM, 4 waves
    if (need > cap) need = cap;
    if (need > (int64_t)TCU_MAX_BLOCKS) need = TCU_MAX_BLOCKS;
    l.blocks = (uint32_t)need;
    return l;
}

#ifdef __cplusplus
}
#endif
#endif
