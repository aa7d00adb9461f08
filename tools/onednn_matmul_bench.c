// tools/onednn_matmul_bench.c — a tiny timing program for the oneDNN backend's matmul: loads
// lib/torc/libtorc_onednn.so next to this binary, times n x n x n matmuls per dtype, prints the
// median GFLOP/s (and the best run's: on a shared machine, what the code does undisturbed) and
// the share of the CPU's promised peak.
// usage: onednn_matmul_bench [n=2048] [runs=5] [dtype...]   dtypes: f32 bf16 bf16f32 f16
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "torc/backend.h"
#include "torc/convert.h"

// Under AddressSanitizer (TORC_SANITIZE): GCC 12's LeakSanitizer crashes at exit scanning the
// dynamic TLS of OpenMP worker threads (libdnnl is dlopen'ed) on glibc 2.36; it must not track
// __tls_get_addr. Ignored in builds without ASan.
const char *__asan_default_options(void);
__attribute__((visibility("default"))) const char *__asan_default_options(void) { return "intercept_tls_get_addr=0"; }

#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond)) {                                     \
            fprintf(stderr, "onednn_matmul_bench: ");      \
            fprintf(stderr, __VA_ARGS__);                  \
            fprintf(stderr, "\n");                         \
            exit(1);                                       \
        }                                                  \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void *vt_ctx;  // the backend's context (init's)

static const torc_backend_vtable *load(void) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0, "cannot read /proc/self/exe");
    exe[n] = '\0';
    char path[8192];
    snprintf(path, sizeof path, "%s/../lib/torc/libtorc_onednn.so", dirname(exe));
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(h, "dlopen %s: %s", path, dlerror());
    torc_backend_entry_fn entry = (torc_backend_entry_fn)dlsym(h, TORC_BACKEND_ENTRY_SYMBOL);
    CHECK(entry, "%s has no %s", path, TORC_BACKEND_ENTRY_SYMBOL);
    const torc_backend_vtable *vt = entry(TORC_BACKEND_ABI_VERSION);
    CHECK(vt, "%s refuses ABI %#x", path, TORC_BACKEND_ABI_VERSION);
    return vt;
}

static void square(torc_operand *x, torc_dtype dt, int64_t n, void *data) {
    memset(x, 0, sizeof *x);
    x->data = data;
    x->dtype = dt;
    x->ndim = 2;
    x->shape[0] = x->shape[1] = n;
    x->stride[0] = n;
    x->stride[1] = 1;
}

static void bench(const torc_backend_vtable *vt, const torc_device_info *info, const char *name,
                  int64_t n, int runs) {
    torc_dtype in, out;
    if (!strcmp(name, "f32")) in = out = TORC_DTYPE_F32;
    else if (!strcmp(name, "bf16")) in = out = TORC_DTYPE_BF16;
    else if (!strcmp(name, "bf16f32")) in = TORC_DTYPE_BF16, out = TORC_DTYPE_F32;
    else if (!strcmp(name, "f16")) in = out = TORC_DTYPE_F16;
    else CHECK(0, "unknown dtype %s (f32 bf16 bf16f32 f16)", name);
    const size_t isz = in == TORC_DTYPE_F32 ? 4 : 2, osz = out == TORC_DTYPE_F32 ? 4 : 2;
    const size_t nn = (size_t)(n * n);
    char *a = vt->alloc(vt_ctx, 0, nn * isz), *b = vt->alloc(vt_ctx, 0, nn * isz), *c = vt->alloc(vt_ctx, 0, nn * osz);
    CHECK(a && b && c, "alloc: %s", vt->last_error(vt_ctx));
    srand(1);
    for (size_t i = 0; i < nn; i++) {
        const float va = (float)((double)rand() / RAND_MAX - 0.5), vb = (float)((double)rand() / RAND_MAX - 0.5);
        if (isz == 4) {
            ((float *)a)[i] = va;
            ((float *)b)[i] = vb;
        } else if (in == TORC_DTYPE_BF16) {
            ((uint16_t *)a)[i] = torc_f32_to_bf16(va);
            ((uint16_t *)b)[i] = torc_f32_to_bf16(vb);
        } else {
            ((uint16_t *)a)[i] = torc_f32_to_f16(va);
            ((uint16_t *)b)[i] = torc_f32_to_f16(vb);
        }
    }
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_MATMUL;
    op.n_out = 1;
    op.n_in = 2;
    square(&op.in[0], in, n, a);
    square(&op.in[1], in, n, b);
    square(&op.out[0], out, n, c);
    CHECK(vt->supports(vt_ctx, 0, &op), "matmul %s not supported: %s", name, vt->last_error(vt_ctx));
    CHECK(vt->run(vt_ctx, 0, &op) == 0, "run: %s", vt->last_error(vt_ctx));  // warm-up (creates the primitive)
    double *t = malloc(sizeof(double) * (size_t)runs);
    for (int r = 0; r < runs; r++) {
        const double t0 = now();
        CHECK(vt->run(vt_ctx, 0, &op) == 0, "run: %s", vt->last_error(vt_ctx));
        CHECK(vt->synchronize(vt_ctx, 0) == 0, "synchronize: %s", vt->last_error(vt_ctx));
        t[r] = now() - t0;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    const double med = t[runs / 2], flops = 2.0 * (double)n * (double)n * (double)n;
    const double peak = info->peak_flops[in];
    printf("%-8s %lld^3: median %.2f ms over %d runs, %.1f GFLOP/s (best %.1f)", name, (long long)n,
           med * 1e3, runs, flops / med * 1e-9, flops / t[0] * 1e-9);
    if (peak > 0) printf(" (%.1f%% of %.0f GFLOP/s promised)", 100.0 * flops / med / peak, peak * 1e-9);
    printf("\n");
    free(t);
    vt->free(vt_ctx, 0, a);
    vt->free(vt_ctx, 0, b);
    vt->free(vt_ctx, 0, c);
}

int main(int argc, char **argv) {
    const int64_t n = argc > 1 ? atoll(argv[1]) : 2048;
    const int runs = argc > 2 ? atoi(argv[2]) : 5;
    CHECK(n > 0 && runs > 0, "usage: %s [n] [runs] [f32|bf16|bf16f32|f16...]", argv[0]);
    const torc_backend_vtable *vt = load();
    CHECK(vt->init(NULL, &vt_ctx) == 0, "init: %s", vt->last_error(vt_ctx));
    torc_device_info info = {.struct_size = sizeof info};  // as the core passes it: zeroed, sized
    CHECK(vt->device_info(vt_ctx, 0, &info) == 0, "device_info: %s", vt->last_error(vt_ctx));
    printf("%s: %s\n", info.name, info.peak_source);
    if (argc > 3)
        for (int i = 3; i < argc; i++) bench(vt, &info, argv[i], n, runs);
    else {
        bench(vt, &info, "f32", n, runs);
        bench(vt, &info, "bf16", n, runs);
    }
    vt->shutdown(vt_ctx);
    return 0;
}
