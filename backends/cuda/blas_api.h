// backends/cuda/blas_api.h — the cuBLAS and cuBLASLt entry points the backend uses, reached
// through tables filled by dlopen on the first matmul: linking the libraries would map and
// relocate ~600 MB of code in every process that merely loads the plugin (no GPU needed).
#ifndef TCU_BLAS_API_H
#define TCU_BLAS_API_H

#include <cublasLt.h>
#include <cublas_v2.h>

typedef struct tcu_blas_api {
    __typeof__(cublasCreate) *create;
    __typeof__(cublasDestroy) *destroy;
    __typeof__(cublasSetStream) *set_stream;
    __typeof__(cublasSetWorkspace) *set_workspace;
    __typeof__(cublasGemmEx) *gemm_ex;
    __typeof__(cublasGemmStridedBatchedEx) *gemm_strided_batched_ex;
} tcu_blas_api;

typedef struct tcu_lt_api {
    __typeof__(cublasLtCreate) *create;
    __typeof__(cublasLtDestroy) *destroy;
    __typeof__(cublasLtMatmulDescCreate) *desc_create;
    __typeof__(cublasLtMatmulDescDestroy) *desc_destroy;
    __typeof__(cublasLtMatmulDescSetAttribute) *desc_set;
    __typeof__(cublasLtMatrixLayoutCreate) *layout_create;
    __typeof__(cublasLtMatrixLayoutDestroy) *layout_destroy;
    __typeof__(cublasLtMatmulPreferenceCreate) *pref_create;
    __typeof__(cublasLtMatmulPreferenceSetAttribute) *pref_set;
    __typeof__(cublasLtMatmulPreferenceDestroy) *pref_destroy;
    __typeof__(cublasLtMatmulAlgoGetHeuristic) *heuristic;
    __typeof__(cublasLtMatmul) *matmul;
} tcu_lt_api;

// The tables, loaded once (thread-safe). NULL with the backend error set when the libraries
// cannot be loaded (e.g. "cuBLAS not found (libcublas.so.13: ...)").
const tcu_blas_api *tcu_blas_api_get(void);
const tcu_lt_api *tcu_lt_api_get(void);

#endif
