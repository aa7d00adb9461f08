// backends/cuda/gemm.c — matmul through cuBLAS (f32 with opt-in TF32, f16, bf16, f64; batched and
// broadcast through strided batches, transposes through op flags) or the generic kernel.
#include <string.h>

#include "blas_api.h"
#include "cuda_impl.h"
#include "kernels.h"

static cudaDataType blas_type(torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F64: return CUDA_R_64F;
    case TORC_DTYPE_F16: return CUDA_R_16F;
    case TORC_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

static const char *blas_status_name(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
    }
}

// cuBLAS's workspace: PyTorch's default sizes (CUBLAS_WORKSPACE_CONFIG :4096:8 on Hopper, about
// 4 MiB before). It comes from the caching allocator, so that under memory pressure cuBLAS does
// not fail on its own cudaMalloc while the cache holds free blocks, and the bytes are counted.
static size_t blas_workspace_size(const tcu_device *d) { return (size_t)(d->cc_major >= 9 ? 32 : 4) << 20; }

// The device's handle, created once: two threads' first matmuls on one device take the lock.
static int blas_handle(tcu_device *d, const tcu_blas_api *api) {
    pthread_mutex_lock(&d->lib_mu);
    int rc = TORC_OK;
    if (!d->blas) {
        cublasHandle_t h;
        void *ws = NULL;
        const size_t ws_size = blas_workspace_size(d);
        char err[256];
        bool oom = false;
        cublasStatus_t s = api->create(&h);
        if (s != CUBLAS_STATUS_SUCCESS) {
            pthread_mutex_unlock(&d->lib_mu);
            return tcu_error(TORC_ERR_BACKEND, "cublasCreate: %s", blas_status_name(s));
        }
        if ((s = api->set_stream(h, d->stream)) != CUBLAS_STATUS_SUCCESS)
            rc = tcu_error(TORC_ERR_BACKEND, "cublasSetStream: %s", blas_status_name(s));
        else if (!(ws = tcu_allocator_alloc(&d->alloc, ws_size, 0, &oom, err, sizeof err)))
            rc = tcu_error(oom ? TORC_ERR_OOM : TORC_ERR_BACKEND, "%s", err);
        else if ((s = api->set_workspace(h, ws, ws_size)) != CUBLAS_STATUS_SUCCESS)
            rc = tcu_error(TORC_ERR_BACKEND, "cublasSetWorkspace: %s", blas_status_name(s));
        if (rc == TORC_OK) {
            d->blas = h;
            d->blas_ws = ws;
        } else {
            api->destroy(h);
            if (ws) tcu_allocator_free(&d->alloc, ws);
        }
    }
    pthread_mutex_unlock(&d->lib_mu);
    return rc;
}

void tcu_gemm_release(tcu_device *d) {
    if (d->blas) tcu_blas_api_get()->destroy(d->blas);  // a handle exists only if the API loaded
    d->blas = NULL;
    if (d->blas_ws) tcu_scratch_free(d, d->blas_ws);   // the stream was synchronised: no gemm uses it
    d->blas_ws = NULL;
}

static int run_blas(tcu_device *d, const torc_op *op, const tcu_gemm_plan *pl) {
    const tcu_blas_api *api = tcu_blas_api_get();
    if (!api) return TORC_ERR_BACKEND;
    int rc = blas_handle(d, api);
    if (rc != TORC_OK) return rc;
    const torc_dtype in_dt = op->in[0].dtype, out_dt = op->out[0].dtype;
    const torc_operand *pa = pl->swap ? &op->in[1] : &op->in[0];
    const torc_operand *pb = pl->swap ? &op->in[0] : &op->in[1];
    const size_t ea = (size_t)torc_abi_dtype_size(in_dt), ec = (size_t)torc_abi_dtype_size(out_dt);
    cublasComputeType_t ct;
    const void *alpha, *beta;
    static const float one_f = 1.0f, zero_f = 0.0f;
    static const double one_d = 1.0, zero_d = 0.0;
    if (in_dt == TORC_DTYPE_F64) {
        ct = CUBLAS_COMPUTE_64F;
        alpha = &one_d;
        beta = &zero_d;
    } else {
        ct = (in_dt == TORC_DTYPE_F32 && tcu_allow_tf32()) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        alpha = &one_f;
        beta = &zero_f;
    }
    const cublasOperation_t ta = pl->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = pl->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cudaDataType tin = blas_type(in_dt), tout = blas_type(out_dt);
    for (int64_t ob = 0; ob < pl->outer.numel; ob++) {
        int64_t off[TCU_MAX_OPS];
        tcu_offsets64(&pl->outer, ob, off);
        const char *A = (const char *)pa->data + (size_t)off[1] * ea;
        const char *B = (const char *)pb->data + (size_t)off[2] * ea;
        char *C = (char *)op->out[0].data + (size_t)off[0] * ec;
        cublasStatus_t s;
        if (pl->batch == 1) {
            s = api->gemm_ex(d->blas, ta, tb, (int)pl->m, (int)pl->n, (int)pl->k, alpha, A, tin, (int)pl->lda, B, tin,
                             (int)pl->ldb, beta, C, tout, (int)pl->ldc, ct, CUBLAS_GEMM_DEFAULT);
        } else {
            s = api->gemm_strided_batched_ex(d->blas, ta, tb, (int)pl->m, (int)pl->n, (int)pl->k, alpha, A, tin,
                                           (int)pl->lda, pl->stride_a, B, tin, (int)pl->ldb, pl->stride_b, beta,
                                           C, tout, (int)pl->ldc, pl->stride_c, (int)pl->batch, ct,
                                           CUBLAS_GEMM_DEFAULT);
        }
        if (s != CUBLAS_STATUS_SUCCESS)
            return tcu_error(TORC_ERR_BACKEND, "matmul: cublasGemm%sEx (m=%lld n=%lld k=%lld): %s",
                             pl->batch == 1 ? "" : "StridedBatched", (long long)pl->m, (long long)pl->n,
                             (long long)pl->k, blas_status_name(s));
    }
    return TORC_OK;
}

int tcu_matmul(tcu_device *d, const torc_op *op) {
    const torc_operand *a = &op->in[0], *b = &op->in[1], *c = &op->out[0];
    const int nd = c->ndim;
    int64_t numel = 1;
    for (int i = 0; i < nd; i++) numel *= c->shape[i];
    if (numel == 0) return TORC_OK;
    if (a->shape[nd - 1] == 0) return tcu_fill_zero(d, c);  // empty sum
    if (tcu_gemm_blas_dtypes(a->dtype, b->dtype, c->dtype)) {
        tcu_gemm_plan pl;
        tcu_gemm_plan_build(&pl, a, b, c);
        if (pl.use_blas) return run_blas(d, op, &pl);
    }
    tcu_mm_args m;
    if (!tcu_mm_args_build(&m, a, b, c)) return tcu_error(TORC_ERR_INVALID_ARG, "matmul: bad operands");
    const int rc = tcu_launch_mm(&m, d->sm_count, d->stream);
    return rc == 0 ? TORC_OK : tcu_cuda_error((cudaError_t)rc, "matmul (generic kernel)");
}
