// backends/cuda/lt_matmul.c — the cuBLASLt call behind SCALED_MM: the device's handle, its
// workspace (32 MiB on sm_90+), and the heuristic's algorithm cached per shape.
#include <stdio.h>
#include <stdlib.h>

#include "cuda_impl.h"
#include "lt_plan.h"

static int lt_setup(tcu_device *d, const tcu_lt_api *api, size_t workspace) {
    if (!d->lt) {
        cublasLtHandle_t h;
        const cublasStatus_t s = api->create(&h);
        if (s != CUBLAS_STATUS_SUCCESS) return tcu_error(TORC_ERR_BACKEND, "cublasLtCreate failed (status %d)", (int)s);
        d->lt = h;
    }
    if (!d->lt_cache) {
        d->lt_cache = calloc(1, sizeof *d->lt_cache);
        if (!d->lt_cache) return tcu_error(TORC_ERR_OOM, "out of host memory");
    }
    if (d->lt_ws_size < workspace) {
        if (d->lt_ws) tcu_scratch_free(d, d->lt_ws);
        d->lt_ws_size = 0;
        d->lt_ws = tcu_scratch(d, workspace);
        if (!d->lt_ws) return TORC_ERR_OOM;
        d->lt_ws_size = workspace;
    }
    return TORC_OK;
}

void tcu_lt_release(tcu_device *d) {
    if (d->lt) tcu_lt_api_get()->destroy(d->lt);  // a handle exists only if the API loaded
    d->lt = NULL;
    if (d->lt_ws) tcu_scratch_free(d, d->lt_ws);
    d->lt_ws = NULL;
    d->lt_ws_size = 0;
    free(d->lt_cache);
    d->lt_cache = NULL;
}

int tcu_lt_matmul(tcu_device *d, const tcu_lt_problem *p, const tcu_lt_plan *pl, const tcu_lt_ptrs *ptrs,
                  const void *a, const void *b, void *out) {
    const tcu_lt_api *api = tcu_lt_api_get();
    if (!api) return TORC_ERR_BACKEND;
    int rc = lt_setup(d, api, pl->workspace);
    if (rc != TORC_OK) return rc;
    tcu_lt_descs ds;
    char err[160];
    if (tcu_lt_descs_build(api, pl, p, ptrs, &ds, err, sizeof err) != 0)
        return tcu_error(TORC_ERR_BACKEND, "_scaled_mm: %s", err);
    tcu_lt_key key;
    tcu_lt_key_of(pl, p, &key);
    const cublasLtMatmulAlgo_t *algo = tcu_lt_cache_find(d->lt_cache, &key);
    if (!algo) {
        cublasLtMatmulPreference_t pref;
        cublasStatus_t s = api->pref_create(&pref);
        if (s == CUBLAS_STATUS_SUCCESS) {
            const uint64_t ws = pl->workspace;
            s = api->pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
        }
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        if (s == CUBLAS_STATUS_SUCCESS)
            s = api->heuristic(d->lt, ds.op, ds.a, ds.b, ds.c, ds.d, pref, 1, &res, &found);
        api->pref_destroy(pref);
        if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
            tcu_lt_descs_destroy(&ds);
            return tcu_error(TORC_ERR_NOT_SUPPORTED,
                             "_scaled_mm: cuBLASLt has no algorithm for %lldx%lldx%lld (status %d)", (long long)p->m,
                             (long long)p->n, (long long)p->k, (int)s);
        }
        tcu_lt_cache_put(d->lt_cache, &key, &res.algo);
        algo = tcu_lt_cache_find(d->lt_cache, &key);
    }
    const float alpha = 1.0f, beta = 0.0f;
    const void *A = pl->swap ? b : a, *B = pl->swap ? a : b;
    // beta = 0: C is never read; it aliases D (whose layout descriptor it shares in size).
    const cublasStatus_t s = api->matmul(d->lt, ds.op, &alpha, A, ds.a, B, ds.b, &beta, out, ds.c, out, ds.d, algo,
                                            d->lt_ws, pl->workspace, d->stream);
    tcu_lt_descs_destroy(&ds);
    if (s != CUBLAS_STATUS_SUCCESS)
        return tcu_error(TORC_ERR_BACKEND, "_scaled_mm: cublasLtMatmul %lldx%lldx%lld failed (status %d)",
                         (long long)p->m, (long long)p->n, (long long)p->k, (int)s);
    return TORC_OK;
}
