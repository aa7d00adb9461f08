// backends/cuda/blas_api.c — loads cuBLAS and cuBLASLt with dlopen on first use and fills the
// entry-point tables; searched by soname (the plugin's RUNPATH, LD_LIBRARY_PATH, ld.so.cache),
// then in the CUDA toolkit the plugin was built against.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "blas_api.h"
#include "cuda_impl.h"

#ifndef TORC_CUDA_LIBDIR
#define TORC_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static tcu_blas_api g_blas;
static tcu_lt_api g_lt;
static bool g_blas_ok, g_lt_ok;
static char g_why[400];

static void *open_lib(const char *stem, int major) {
    char name[64], path[512];
    snprintf(name, sizeof name, "lib%s.so.%d", stem, major);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    const char *err = dlerror();
    snprintf(path, sizeof path, "%s/%s", TORC_CUDA_LIBDIR, name);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        snprintf(g_why, sizeof g_why, "%s not found (%s); matmul on cuda needs the CUDA %d cuBLAS libraries",
                 stem, err ? err : name, CUBLAS_VER_MAJOR);
    return h;
}

// Resolves every member of a table from h; false (and g_why) if one is missing.
static bool resolve(void *h, void **slots, const char *const *names, int n) {
    for (int i = 0; i < n; i++) {
        slots[i] = dlsym(h, names[i]);
        if (!slots[i]) {
            snprintf(g_why, sizeof g_why, "cuBLAS: symbol %s not found in the loaded library", names[i]);
            return false;
        }
    }
    return true;
}

static void load(void) {
    void *lt = open_lib("cublasLt", CUBLAS_VER_MAJOR);
    if (lt) {
        static const char *const names[] = {
            "cublasLtCreate", "cublasLtDestroy", "cublasLtMatmulDescCreate", "cublasLtMatmulDescDestroy",
            "cublasLtMatmulDescSetAttribute", "cublasLtMatrixLayoutCreate", "cublasLtMatrixLayoutDestroy",
            "cublasLtMatmulPreferenceCreate", "cublasLtMatmulPreferenceSetAttribute",
            "cublasLtMatmulPreferenceDestroy", "cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmul"};
        _Static_assert(sizeof names / sizeof names[0] == sizeof(tcu_lt_api) / sizeof(void *), "one name per slot");
        void *slots[sizeof names / sizeof names[0]];
        g_lt_ok = resolve(lt, slots, names, (int)(sizeof names / sizeof names[0]));
        if (g_lt_ok) memcpy(&g_lt, slots, sizeof g_lt);
    }
    void *blas = lt ? open_lib("cublas", CUBLAS_VER_MAJOR) : NULL;
    if (blas) {
        static const char *const names[] = {"cublasCreate_v2", "cublasDestroy_v2", "cublasSetStream_v2", "cublasSetWorkspace_v2",
                                            "cublasGemmEx",
                                            "cublasGemmStridedBatchedEx"};
        _Static_assert(sizeof names / sizeof names[0] == sizeof(tcu_blas_api) / sizeof(void *), "one name per slot");
        void *slots[sizeof names / sizeof names[0]];
        g_blas_ok = resolve(blas, slots, names, (int)(sizeof names / sizeof names[0]));
        if (g_blas_ok) memcpy(&g_blas, slots, sizeof g_blas);
    }
    // The libraries stay loaded for the life of the process (they register exit handlers).
}

const tcu_blas_api *tcu_blas_api_get(void) {
    pthread_once(&g_once, load);
    if (!g_blas_ok) {
        tcu_error(TORC_ERR_BACKEND, "%s", g_why);
        return NULL;
    }
    return &g_blas;
}

const tcu_lt_api *tcu_lt_api_get(void) {
    pthread_once(&g_once, load);
    if (!g_lt_ok) {
        tcu_error(TORC_ERR_BACKEND, "%s", g_why);
        return NULL;
    }
    return &g_lt;
}
