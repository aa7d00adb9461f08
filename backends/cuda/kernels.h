// backends/cuda/kernels.h — the launchers the .cu files export to the host C code: each takes a
// plan built by the shared headers and returns a cudaError_t (0 = launched).
#ifndef TCU_KERNELS_H
#define TCU_KERNELS_H

#include <cuda_runtime_api.h>

#include "adam_body.h"
#include "attention_ops.h"
#include "ew_ops.h"
#include "gemm_plan.h"
#include "index_ops.h"
#include "reduce_ops.h"

// kernel<<<grid, block, smem, stream>>>(args...) in the one spelling the CPU model of the thread
// hierarchy (sim_thread_model.h, the host suite's cuda_sim_test) replaces.
#if defined(__CUDACC__) && !defined(TCU_LAUNCH)
#define TCU_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#endif

#ifdef __cplusplus
extern "C" {
#endif

// Elementwise ops, fills, ranges and RNG over `it` (out first). a->ct and a->common are set.
int tcu_launch_ew(const tcu_ew_args *a, const tcu_iter *it, int sm_count, cudaStream_t s);

// ADAM_STEP over n elements of dense operands of one dtype (adam_body.h).
int tcu_launch_adam(const tcu_adam_args *a, int64_t n, int sm_count, cudaStream_t s);

// ADAM_STEP_LIST: n <= TCU_ADAM_LIST_MAX parameters of one dtype updated by one launch, each
// element as tcu_launch_adam's. The table travels as the kernel's argument (under CUDA's 4 KiB),
// as PyTorch's multi_tensor_apply packs its lists; run.c launches a longer list in batches.
#define TCU_ADAM_LIST_MAX 16
typedef struct tcu_adam_list_args {
    int n;
    int64_t numel[TCU_ADAM_LIST_MAX];
    tcu_adam_args a[TCU_ADAM_LIST_MAX];
} tcu_adam_list_args;
int tcu_launch_adam_list(const tcu_adam_list_args *l, int sm_count, cudaStream_t s);

// Same-dtype contiguous copies and zero fills: cudaMemcpyAsync / cudaMemsetAsync.
int tcu_launch_copy_bytes(void *dst, const void *src, size_t nbytes, cudaStream_t s);
int tcu_launch_zero_bytes(void *dst, size_t nbytes, cudaStream_t s);

// Reductions. With pl->split > 1, a->partial holds n_out * split * TCU_ACC_BYTES bytes.
int tcu_launch_reduce(const tcu_reduce_args *a, const tcu_reduce_plan *pl, cudaStream_t s);

// Softmax / log_softmax along rows. ct: F32 or F64.
int tcu_launch_softmax(int op, tcu_ctype ct, torc_dtype in_dt, torc_dtype out_dt, const void *in,
                       void *out, const tcu_rows_plan *pl, cudaStream_t s);

// LAYER_NORM / LAYER_NORM_BACKWARD on contiguous operands (run.c checks): rows of n elements,
// float math. Backward writes dx, and dw / db where set (sums over the rows, zeros when none).
typedef struct tcu_ln_args {
    int backward;
    torc_dtype x_dt, p_dt, s_dt;  // x, y, dy, dx; weight, bias and their gradients; mean, rstd
    int64_t rows, n;
    float eps;
    const void *x, *dy, *w, *b;   // w, b NULL when absent; dy backward only
    void *y, *dx, *dw, *db;       // y forward; dx, dw, db backward (dw, db NULL when not asked)
    void *mean, *rstd;            // written by forward, read by backward
} tcu_ln_args;
int tcu_launch_layer_norm(const tcu_ln_args *a, int sm_count, cudaStream_t s);

// index_select, gather, scatter_add, index_add, triu, tril.
int tcu_launch_index(const tcu_index_args *x, int sm_count, cudaStream_t s);

// INDEX_ADD into a floating out, deterministic (index_add.cu): scratch holds
// tcu_index_add_scratch_bytes(x) bytes; x->n_idx is at most INT32_MAX.
size_t tcu_index_add_scratch_bytes(const tcu_index_add_args *x);
int tcu_launch_index_add(const tcu_index_add_args *x, void *scratch, size_t scratch_bytes, int sm_count,
                         cudaStream_t s);

// masked_select / masked_scatter: a row-major scan of the mask. scratch holds
// tcu_masked_scratch_bytes(numel) bytes.
size_t tcu_masked_scratch_bytes(int64_t numel);
int tcu_launch_masked(const tcu_index_args *x, void *scratch, cudaStream_t s);

// ATTENTION / ATTENTION_BACKWARD (attention.cu); the backward's a->delta holds B*H*L floats.
// tcu_attention_smem_bytes: the dynamic shared memory one block takes.
size_t tcu_attention_smem_bytes(const tcu_attn_args *a);
int tcu_launch_attention(const tcu_attn_args *a, int sm_count, cudaStream_t s);

// The generic matmul (any dtypes and strides).
int tcu_launch_mm(const tcu_mm_args *m, int sm_count, cudaStream_t s);

// The generic fp8 scaled matmul; zeroes *m->amax first when it is set.
int tcu_launch_smm(const tcu_smm_args *m, int sm_count, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
