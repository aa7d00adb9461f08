// backends/cuda/gemm_plan.h — how a strided, batched, broadcast matmul maps onto one column-major
// cuBLAS call (op flags instead of copies), and the generic kernel's per-element body otherwise.
#ifndef TCU_GEMM_PLAN_H
#define TCU_GEMM_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include <torc/backend.h>

#include "dtype_io.h"
#include "layout.h"

#ifdef __cplusplus
extern "C" {
#endif

// A column-major matrix X (rows x cols) whose element (r, c) lives at r*s_row + c*s_col, as
// cuBLAS wants it: trans = false: X itself with leading dim ld; trans = true: X^T is stored
// column-major with leading dim ld and the call passes op = T. Strides of size-1 dims do not
// matter. False when neither fits (broadcast or overlapping rows, both strides > 1).
static inline bool tcu_blas_operand(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col,
                                    bool allow_trans, bool *trans, int64_t *ld) {
    const int64_t min_n = rows > 1 ? rows : 1, min_t = cols > 1 ? cols : 1;
    if ((s_row == 1 || rows == 1) && (cols == 1 || s_col >= min_n)) {
        *trans = false;
        *ld = cols == 1 ? min_n : s_col;
        return true;
    }
    if (allow_trans && (s_col == 1 || cols == 1) && (rows == 1 || s_row >= min_t)) {
        *trans = true;
        *ld = rows == 1 ? min_t : s_row;
        return true;
    }
    return false;
}

typedef struct tcu_gemm_plan {
    bool use_blas;
    const char *why;             // why the generic kernel runs instead (tests read it)
    // The column-major call C' (m x n) = op(A') (m x k) . op(B') (k x n), ld's in elements.
    bool swap;                   // true: A' = in1, B' = in0, C' = out^T (out row-major)
    bool trans_a, trans_b;
    int64_t m, n, k, lda, ldb, ldc;
    // Batches: the innermost merged batch dim is the strided batch, outer ones loop on the host.
    int64_t batch;               // strided batch count (1: a plain gemm)
    int64_t stride_a, stride_b, stride_c;  // per batch, in elements of A', B', C'
    tcu_iter outer;              // remaining batch dims: [0] C', [1] A', [2] B'; numel loops
} tcu_gemm_plan;

#define TCU_INT_MAX 2147483647

// The dtype combinations cuBLAS runs: equal inputs of f32/f16/bf16/f64, out the same or f32
// for the 16-bit inputs (mixed precision writes f32).
static inline bool tcu_gemm_blas_dtypes(torc_dtype a, torc_dtype b, torc_dtype c) {
    if (a != b) return false;
    switch (a) {
    case TORC_DTYPE_F32: case TORC_DTYPE_F64: return c == a;
    case TORC_DTYPE_F16: case TORC_DTYPE_BF16: return c == a || c == TORC_DTYPE_F32;
    default: return false;
    }
}

// Plans out = in0 @ in1 for cuBLAS. Never fails: a layout cuBLAS cannot take gives
// use_blas = false and `why`. Dtype support is the caller's business.
static inline void tcu_gemm_plan_build(tcu_gemm_plan *pl, const torc_operand *a,
                                       const torc_operand *b, const torc_operand *c) {
    const int nd = c->ndim;
    pl->use_blas = false;
    pl->why = "";
    pl->batch = 1;
    pl->stride_a = pl->stride_b = pl->stride_c = 0;
    if (nd < 2 || a->ndim != nd || b->ndim != nd || nd > TORC_MAX_DIMS) {
        pl->why = "operand ranks";
        return;
    }
    const int64_t M = c->shape[nd - 2], N = c->shape[nd - 1], K = a->shape[nd - 1];
    const int64_t am = a->stride[nd - 2], ak = a->stride[nd - 1];
    const int64_t bk = b->stride[nd - 2], bn = b->stride[nd - 1];
    const int64_t cm = c->stride[nd - 2], cn = c->stride[nd - 1];
    bool ok = false;
    // Row-major out (the usual case): C^T = B^T A^T, all column-major.
    bool t;
    int64_t ldc;
    if (tcu_blas_operand(N, M, cn, cm, false, &t, &ldc)) {
        bool ta, tb;
        int64_t lda, ldb;
        if (tcu_blas_operand(N, K, bn, bk, true, &ta, &lda) &&
            tcu_blas_operand(K, M, ak, am, true, &tb, &ldb)) {
            pl->swap = true;
            pl->m = N; pl->n = M; pl->k = K;
            pl->trans_a = ta; pl->trans_b = tb;
            pl->lda = lda; pl->ldb = ldb; pl->ldc = ldc;
            ok = true;
        }
    }
    // Column-major out (a transposed view): C = A B directly.
    if (!ok && tcu_blas_operand(M, N, cm, cn, false, &t, &ldc)) {
        bool ta, tb;
        int64_t lda, ldb;
        if (tcu_blas_operand(M, K, am, ak, true, &ta, &lda) &&
            tcu_blas_operand(K, N, bk, bn, true, &tb, &ldb)) {
            pl->swap = false;
            pl->m = M; pl->n = N; pl->k = K;
            pl->trans_a = ta; pl->trans_b = tb;
            pl->lda = lda; pl->ldb = ldb; pl->ldc = ldc;
            ok = true;
        }
    }
    if (!ok) {
        pl->why = "operand strides (broadcast or overlapping matrix dims)";
        return;
    }
    if (pl->m > TCU_INT_MAX || pl->n > TCU_INT_MAX || pl->k > TCU_INT_MAX || pl->lda > TCU_INT_MAX ||
        pl->ldb > TCU_INT_MAX || pl->ldc > TCU_INT_MAX) {
        pl->why = "a dimension or leading dimension beyond int32";
        return;
    }
    // Batch dims of C', A', B' merged together.
    const torc_operand *pa = pl->swap ? b : a, *pb = pl->swap ? a : b;
    const int64_t *st[3] = {c->stride, pa->stride, pb->stride};
    if (!tcu_iter_build(&pl->outer, nd - 2, c->shape, 3, st, 0)) {
        pl->why = "batch dims";
        return;
    }
    const int64_t total = pl->outer.numel;
    const int64_t inner = pl->outer.shape[TCU_D - 1];
    if (total > 1 && inner > 1) {
        pl->batch = inner;
        pl->stride_c = pl->outer.stride[0][TCU_D - 1];
        pl->stride_a = pl->outer.stride[1][TCU_D - 1];
        pl->stride_b = pl->outer.stride[2][TCU_D - 1];
        // The remaining outer dims: drop the innermost one from the plan.
        pl->outer.shape[TCU_D - 1] = 1;
        for (int k = 0; k < 3; k++) pl->outer.stride[k][TCU_D - 1] = 0;
        int64_t sh[TCU_D], s0[TCU_D], s1[TCU_D], s2[TCU_D];
        const int on = pl->outer.ndim - 1;
        for (int i = 0; i < on; i++) {
            const int d = TCU_D - pl->outer.ndim + i;
            sh[i] = pl->outer.shape[d];
            s0[i] = pl->outer.stride[0][d];
            s1[i] = pl->outer.stride[1][d];
            s2[i] = pl->outer.stride[2][d];
        }
        const int64_t *ss[3] = {s0, s1, s2};
        tcu_iter_build(&pl->outer, on, sh, 3, ss, 0);
    }
    if (pl->batch > TCU_INT_MAX) {
        pl->why = "batch count beyond int32";
        return;
    }
    pl->use_blas = true;
}

// ---- the generic kernel (any dtypes, any strides) ----
typedef struct tcu_mm_args {
    tcu_ctype ct;
    torc_dtype dt_a, dt_b, dt_c;
    const void *a, *b;
    void *c;
    int64_t K, ak, bk;           // reduction length and the k strides of A and B
    tcu_iter it;                 // over out's shape: [0] C, [1] A (n-stride 0), [2] B (m-stride 0)
} tcu_mm_args;

static inline tcu_ctype tcu_mm_ctype(torc_dtype a, torc_dtype b, torc_dtype c) {
    if (a == TORC_DTYPE_F64 || b == TORC_DTYPE_F64 || c == TORC_DTYPE_F64) return TCU_CT_F64;
    if (!tcu_dtype_is_float(a) && !tcu_dtype_is_float(b) && !tcu_dtype_is_float(c)) return TCU_CT_I64;
    return TCU_CT_F32;
}

static inline bool tcu_mm_args_build(tcu_mm_args *m, const torc_operand *a, const torc_operand *b,
                                     const torc_operand *c) {
    const int nd = c->ndim;
    if (nd < 2 || a->ndim != nd || b->ndim != nd || nd > TORC_MAX_DIMS) return false;
    int64_t sa[TORC_MAX_DIMS], sb[TORC_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        sa[d] = a->stride[d];
        sb[d] = b->stride[d];
    }
    sa[nd - 1] = 0;  // A does not move along n
    sb[nd - 2] = 0;  // B does not move along m
    const int64_t *st[3] = {c->stride, sa, sb};
    if (!tcu_iter_build(&m->it, nd, c->shape, 3, st, 0)) return false;
    m->ct = tcu_mm_ctype(a->dtype, b->dtype, c->dtype);
    m->dt_a = a->dtype;
    m->dt_b = b->dtype;
    m->dt_c = c->dtype;
    m->a = a->data;
    m->b = b->data;
    m->c = c->data;
    m->K = a->shape[nd - 1];
    m->ak = a->stride[nd - 1];
    m->bk = b->stride[nd - 2];
    return true;
}

// One output element: offs from tcu_offsets*(&m->it, ...).
TCU_HDI void tcu_mm_element(const tcu_mm_args *m, const int64_t *off) {
    const int64_t K = m->K;
    if (m->ct == TCU_CT_F32) {
        float s = 0;
        for (int64_t k = 0; k < K; k++)
            s += tcu_load_f32(m->a, off[1] + k * m->ak, m->dt_a) * tcu_load_f32(m->b, off[2] + k * m->bk, m->dt_b);
        tcu_store_f32(m->c, off[0], m->dt_c, s);
    } else if (m->ct == TCU_CT_F64) {
        double s = 0;
        for (int64_t k = 0; k < K; k++)
            s += tcu_load_f64(m->a, off[1] + k * m->ak, m->dt_a) * tcu_load_f64(m->b, off[2] + k * m->bk, m->dt_b);
        tcu_store_f64(m->c, off[0], m->dt_c, s);
    } else {
        uint64_t s = 0;   // wraps like int64 arithmetic would
        for (int64_t k = 0; k < K; k++)
            s += (uint64_t)tcu_load_i64(m->a, off[1] + k * m->ak, m->dt_a) *
                 (uint64_t)tcu_load_i64(m->b, off[2] + k * m->bk, m->dt_b);
        tcu_store_i64(m->c, off[0], m->dt_c, (int64_t)s);
    }
}

// ---- fp8 scaled matmul, generic kernel (what cuBLASLt cannot take) ----
// r = scale_a * scale_b * sum_k a*b accumulated in f32 (each fp8 product is exact in f32);
// out fp8: saturating cast of r * scale_out; else r rounded once. amax (optional) gets max |r|.
typedef struct tcu_smm_args {
    torc_dtype dt_a, dt_b, dt_c;
    const void *a, *b;
    void *c;
    const float *scale_a, *scale_b, *scale_out;   // device scalars (scale_out may be NULL)
    unsigned int *amax;                           // f32 bits, or NULL
    int64_t M, N, K, a_rs, a_cs, b_rs, b_cs, c_rs, c_cs;
} tcu_smm_args;

TORC_HD static inline bool tcu_is_fp8(torc_dtype d) {
    return d == TORC_DTYPE_F8_E4M3FN || d == TORC_DTYPE_F8_E5M2;
}

// max into *amax of a non-negative float given as bits (NaN, sign cleared, compares largest).
TORC_HD static inline void tcu_amax_update(unsigned int *amax, float r) {
    const uint32_t bits = torc_f32_bits(r) & UINT32_C(0x7FFFFFFF);
#if defined(__CUDA_ARCH__)
    atomicMax(amax, bits);
#else
    if (bits > *amax) *amax = bits;
#endif
}

TCU_HDI void tcu_smm_element(const tcu_smm_args *s, int64_t i, int64_t j) {
    float acc = 0;
    for (int64_t k = 0; k < s->K; k++)
        acc += tcu_load_f32(s->a, i * s->a_rs + k * s->a_cs, s->dt_a) * tcu_load_f32(s->b, k * s->b_rs + j * s->b_cs, s->dt_b);
    const float r = acc * (*s->scale_a * *s->scale_b);
    if (s->amax) tcu_amax_update(s->amax, r);
    const int64_t o = i * s->c_rs + j * s->c_cs;
    if (tcu_is_fp8(s->dt_c)) {
        const float v = r * (s->scale_out ? *s->scale_out : 1.0f);
        ((uint8_t *)s->c)[o] = s->dt_c == TORC_DTYPE_F8_E4M3FN ? torc_f32_to_f8e4m3fn_sat(v) : torc_f32_to_f8e5m2_sat(v);
    } else {
        tcu_store_f32(s->c, o, s->dt_c, r);
    }
}

#ifdef __cplusplus
}
#endif
#endif
