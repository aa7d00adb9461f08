// backends/cuda/lt_plan.h — fp8 scaled matmul through cuBLASLt: the layout and capability
// decisions (TN layout, multiples of 16, sm_89+, no e5m2 x e5m2, no e4m3 x e4m3 -> e5m2), the
// descriptors, and a cache of the heuristic's algorithm per problem and alignment. Plain C: the
// decisions are unit-tested on the CPU.
#ifndef TCU_LT_PLAN_H
#define TCU_LT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blas_api.h"

#include <torc/backend.h>

#include "gemm_plan.h"

// out (m, n) = scale_a * scale_b * (a (m, k) @ b (k, n)), row-major views with element strides.
typedef struct tcu_lt_problem {
    torc_dtype a, b, out;
    int64_t m, n, k;
    int64_t a_rs, a_cs, b_rs, b_cs, c_rs, c_cs;
    int cc_major, cc_minor;
    bool fast_accum;      // off by default: fp8 tensor cores accumulate more precisely without it
} tcu_lt_problem;

// The cuBLASLt call: D' (mm x nn, column-major, ld ldc) = op(A') (mm x k) . op(B') (k x nn) with
// op(A') = T and op(B') = N (the only fp8 layout cuBLASLt runs).
typedef struct tcu_lt_plan {
    bool ok;
    char why[200];        // when !ok: what the caller must change, for the user's error
    bool swap;            // A' = b, B' = a, D' = out^T (row-major out); else A' = a, B' = b
    cudaDataType type_a, type_b, type_c, type_d;
    int64_t mm, nn, k, lda, ldb, ldc;
    size_t workspace;     // bytes: 32 MiB on sm_90+, 4 MiB before
} tcu_lt_plan;

#define TCU_LT_WORKSPACE_SM90 ((size_t)32 << 20)
#define TCU_LT_WORKSPACE_OLD ((size_t)4 << 20)

void tcu_lt_plan_build(const tcu_lt_problem *p, tcu_lt_plan *pl);

// Device pointers the descriptors refer to (float scalars on the device; NULL: not used).
typedef struct tcu_lt_ptrs {
    const float *scale_a, *scale_b, *scale_d;
    float *amax_d;        // receives max |D| before scaling to fp8 (fp8 outputs only)
} tcu_lt_ptrs;

typedef struct tcu_lt_descs {
    const tcu_lt_api *api;   // the entry points that created them
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c, d;
} tcu_lt_descs;

// Creates the operation and layout descriptors for a plan (host-side calls only, no device
// work). Returns 0, or a cuBLAS status with err filled; on failure nothing is left allocated.
int tcu_lt_descs_build(const tcu_lt_api *api, const tcu_lt_plan *pl, const tcu_lt_problem *p,
                       const tcu_lt_ptrs *ptrs, tcu_lt_descs *d, char *err, size_t err_n);
void tcu_lt_descs_destroy(tcu_lt_descs *d);

// ---- SCALED_MM: which path runs an op ----
typedef enum tcu_smm_path {
    TCU_SMM_LT,       // cuBLASLt (plan ok, pointers 16-byte aligned, no empty dimension)
    TCU_SMM_GENERIC,  // the generic kernel: any layout or size cuBLASLt does not take
    TCU_SMM_REFUSE    // the device cannot run fp8 matmuls (pl->why says so)
} tcu_smm_path;

// Fills the problem for op (via_f32: plan D as a contiguous f32 buffer, for amax before the
// rounding to a 16-bit out) and decides the path on a device of compute capability cc.
tcu_smm_path tcu_smm_decide(const torc_op *op, int cc_major, int cc_minor, bool via_f32, tcu_lt_problem *p,
                            tcu_lt_plan *pl);
// The generic kernel's arguments for op.
void tcu_smm_args_from_op(const torc_op *op, tcu_smm_args *s);

// ---- the heuristic cache: one algorithm per problem ----
// The largest power of two (at most 256) that divides p's address: what cuBLASLt may assume
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, 256 when not set).
uint32_t tcu_lt_alignment(const void *p);

// Everything the heuristic's choice depends on: the shape, the types, the operands' alignment
// (an algorithm picked for 256-byte aligned pointers may not run on a +16 B view) and the
// epilogue (D scale, amax).
typedef struct tcu_lt_key {
    int64_t mm, nn, k, lda, ldb, ldc;
    int type_a, type_b, type_d;
    int fast_accum, cc;
    uint32_t align_a, align_b, align_d;   // of A', B' and D' (C aliases D)
    int has_scale_d, has_amax;
} tcu_lt_key;

#define TCU_LT_CACHE_SLOTS 64

typedef struct tcu_lt_cache {
    tcu_lt_key key[TCU_LT_CACHE_SLOTS];
    cublasLtMatmulAlgo_t algo[TCU_LT_CACHE_SLOTS];
    uint64_t used[TCU_LT_CACHE_SLOTS];  // last-use tick, 0 = empty
    uint64_t tick;
} tcu_lt_cache;

// A' and B' are the operands as cuBLASLt sees them (b and a when pl->swap), D' the output.
void tcu_lt_key_of(const tcu_lt_plan *pl, const tcu_lt_problem *p, const tcu_lt_ptrs *ptrs, const void *A,
                   const void *B, const void *D, tcu_lt_key *k);
// Copies the cached algorithm for k into *algo; false when there is none.
bool tcu_lt_cache_find(tcu_lt_cache *c, const tcu_lt_key *k, cublasLtMatmulAlgo_t *algo);
// Stores an algorithm, evicting the least recently used entry when full.
void tcu_lt_cache_put(tcu_lt_cache *c, const tcu_lt_key *k, const cublasLtMatmulAlgo_t *algo);

#endif
