// backends/cuda/lt_matmul.c — the cuBLASLt call behind SCALED_MM: the device's handle, its
// workspace (32 MiB on sm_90+), and the heuristic's algorithm cached per shape.
#include <stdio.h>
#include <stdlib.h>

#include "cuda_impl.h"
#include "lt_plan.h"

// The device's handle, workspace and cache, created once. Caller holds d->lib_mu.
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

// The heuristic's first algorithm for the descriptors, told the operands' real alignment (it
// assumes 256 bytes otherwise, as PyTorch #98975 found) and the workspace. false: none.
static bool lt_pick(tcu_device *d, const tcu_lt_api *api, const tcu_lt_descs *ds, const tcu_lt_key *key,
                    size_t workspace, cublasLtMatmulAlgo_t *algo, cublasStatus_t *status) {
    cublasLtMatmulPreference_t pref;
    cublasStatus_t s = api->pref_create(&pref);
    if (s != CUBLAS_STATUS_SUCCESS) {
        *status = s;
        return false;
    }
    const uint64_t ws = workspace;
    s = api->pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    const struct { cublasLtMatmulPreferenceAttributes_t attr; uint32_t bytes; } al[4] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key->align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key->align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key->align_d},   // C aliases D
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key->align_d}};
    for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
        s = api->pref_set(pref, al[i].attr, &al[i].bytes, sizeof al[i].bytes);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS) s = api->heuristic(d->lt, ds->op, ds->a, ds->b, ds->c, ds->d, pref, 1, &res, &found);
    api->pref_destroy(pref);
    *status = s;
    if (s != CUBLAS_STATUS_SUCCESS || found == 0) return false;
    *algo = res.algo;
    return true;
}

// A cuBLASLt answer that means "no kernel for this problem" rather than a failure of the device:
// the caller runs the generic kernel instead.
static bool no_kernel(cublasStatus_t s) { return s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE; }

int tcu_lt_matmul(tcu_device *d, const tcu_lt_problem *p, const tcu_lt_plan *pl, const tcu_lt_ptrs *ptrs,
                  const void *a, const void *b, void *out) {
    const tcu_lt_api *api = tcu_lt_api_get();
    if (!api) return TORC_ERR_BACKEND;
    tcu_lt_descs ds;
    char err[160];
    if (tcu_lt_descs_build(api, pl, p, ptrs, &ds, err, sizeof err) != 0)
        return tcu_error(TORC_ERR_BACKEND, "_scaled_mm: %s", err);
    const void *A = pl->swap ? b : a, *B = pl->swap ? a : b;
    tcu_lt_key key;
    tcu_lt_key_of(pl, p, ptrs, A, B, out, &key);
    cublasLtMatmulAlgo_t algo;
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    pthread_mutex_lock(&d->lib_mu);
    int rc = lt_setup(d, api, pl->workspace);
    bool have = rc == TORC_OK && tcu_lt_cache_find(d->lt_cache, &key, &algo);
    if (rc == TORC_OK && !have) {
        have = lt_pick(d, api, &ds, &key, pl->workspace, &algo, &s);
        if (have) tcu_lt_cache_put(d->lt_cache, &key, &algo);
    }
    pthread_mutex_unlock(&d->lib_mu);
    if (rc != TORC_OK) {
        tcu_lt_descs_destroy(&ds);
        return rc;
    }
    if (!have) {
        tcu_lt_descs_destroy(&ds);
        if (s == CUBLAS_STATUS_SUCCESS || no_kernel(s)) return TCU_LT_NO_KERNEL;
        return tcu_error(TORC_ERR_BACKEND, "_scaled_mm: cublasLtMatmulAlgoGetHeuristic %lldx%lldx%lld failed (status %d)",
                         (long long)p->m, (long long)p->n, (long long)p->k, (int)s);
    }
    const float alpha = 1.0f, beta = 0.0f;
    // beta = 0: C is never read; it aliases D (whose layout descriptor it shares in size).
    // The workspace is the device's one block: it is used on the device's one stream only.
    s = api->matmul(d->lt, ds.op, &alpha, A, ds.a, B, ds.b, &beta, out, ds.c, out, ds.d, &algo, d->lt_ws,
                    pl->workspace, d->stream);
    tcu_lt_descs_destroy(&ds);
    if (s == CUBLAS_STATUS_SUCCESS) return TORC_OK;
    if (no_kernel(s)) return TCU_LT_NO_KERNEL;
    return tcu_error(TORC_ERR_BACKEND, "_scaled_mm: cublasLtMatmul %lldx%lldx%lld failed (status %d)",
                     (long long)p->m, (long long)p->n, (long long)p->k, (int)s);
}
