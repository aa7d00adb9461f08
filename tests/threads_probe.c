// tests/threads_probe.c — computes a fixed list of ops on seeded inputs and writes each result's
// bytes to DIR/NAME.bin, for tests/threads.sh, which runs it at TORC_NUM_THREADS=1 and 2 (and under
// each ISA cap) and compares the files byte for byte: a host backend's results must not depend on
// its thread count. The shapes are the ones a parallel kernel is tempted to split along a reduced
// dim: GEMMs with a long K and few outputs (M, N small; a GEMV), sums over long rows and columns and
// over everything, softmax / log_softmax / layer_norm over long rows, and a small model's gradients.
// Usage: threads_probe DIR [FILTER]   (FILTER: only cases whose name contains it)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

static const char *g_dir, *g_filter;
static int g_failed, g_written;
static torc_generator *g_gen;

static bool wanted(const char *name) {
    return !g_filter || strstr(name, g_filter);
}

// Writes t's bytes (made contiguous) to DIR/name.bin; a NULL t is a failure named by the error.
static void emit(const char *name, torc_tensor *t) {
    if (!t) {
        fprintf(stderr, "threads_probe: %s: %s\n", name, torc_last_error());
        g_failed = 1;
        return;
    }
    torc_tensor *c = torc_contiguous(t);
    const size_t n = c ? torc_nbytes(c) : 0;
    void *buf = malloc(n ? n : 1);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", g_dir, name);
    FILE *f = NULL;
    if (!c || !buf || torc_copy_to_host(c, buf, n) != TORC_OK || !(f = fopen(path, "wb")) ||
        fwrite(buf, 1, n, f) != n) {
        fprintf(stderr, "threads_probe: %s: cannot write %s: %s\n", name, path, c ? torc_last_error() : "no tensor");
        g_failed = 1;
    } else {
        g_written++;
    }
    if (f) fclose(f);
    free(buf);
}

// Inputs are copies of windows of one pool of uniform values in [-2, 2) (drawing them per case cost
// more than the ops), in the dtype asked for.
#define POOL (INT64_C(1) << 22)
static torc_tensor *g_pool;
static int64_t g_count;
static torc_tensor *randn(int ndim, const int64_t *shape, torc_dtype dt) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    if (n > POOL) return NULL;
    const int64_t at = (g_count++ * 1000003) % (POOL - n + 1);
    torc_tensor *t = torc_reshape(torc_narrow(g_pool, 0, at, n), ndim, shape);
    return dt == TORC_DTYPE_F32 ? torc_clone(t) : torc_to_dtype(t, dt);
}

// With THREADS_PROBE_CHECK=1 (tests/threads.sh sets it for one of the runs) each matmul of up to 16M
// multiply-adds is also computed on the reference backend and compared, so that the paths the
// backend takes for large GEMMs (fixed pieces of C and K) are checked for their values too, not only
// for agreeing with themselves. Tolerance: 1e-5 K (the operands lie in [-2, 2)), plus 1/128 of the
// value for 16-bit results.
static bool g_check;
static void check_matmul(const char *name, torc_tensor *a, torc_tensor *b, torc_tensor *c) {
    if (!g_check || !c) return;
    const int64_t K = torc_size(a, torc_ndim(a) - 1), work = torc_numel(c) * K;
    if (work > (INT64_C(1) << 24)) return;
    torc_scope_push();
    torc_device *ref = torc_device_get("reference");
    torc_tensor *r = ref ? torc_matmul(torc_to_device(a, ref), torc_to_device(b, ref)) : NULL;
    torc_tensor *x = torc_contiguous(torc_to_dtype(c, TORC_DTYPE_F32));
    torc_tensor *y = r ? torc_contiguous(torc_to_dtype(r, TORC_DTYPE_F32)) : NULL;
    const int64_t n = torc_numel(c);
    float *hx = malloc((size_t)n * sizeof(float)), *hy = malloc((size_t)n * sizeof(float));
    if (!x || !y || !hx || !hy || torc_copy_to_host(x, hx, (size_t)n * 4) != TORC_OK ||
        torc_copy_to_host(y, hy, (size_t)n * 4) != TORC_OK) {
        fprintf(stderr, "threads_probe: %s: the reference check failed to run: %s\n", name, torc_last_error());
        g_failed = 1;
    } else {
        const bool wide = torc_get_dtype(c) == TORC_DTYPE_F32;
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n; i++) {
            const double tol = 1e-5 * (double)K + (wide ? 0.0 : fabs(hy[i]) / 128.0);
            if (!(fabs((double)hx[i] - hy[i]) <= tol) && bad++ == 0) first = i;
        }
        if (bad) {
            fprintf(stderr, "threads_probe: %s: %lld of %lld elements off the reference (first at %lld: %.9g, reference %.9g)\n",
                    name, (long long)bad, (long long)n, (long long)first, hx[first], hy[first]);
            g_failed = 1;
        }
    }
    free(hx);
    free(hy);
    torc_scope_pop();
}

// ---- matmul: C (M, N) = A (M, K) B (K, N), A and B each as given or read transposed ----
static void matmul_case(int64_t M, int64_t N, int64_t K, torc_dtype dt, bool at, bool bt) {
    char name[128];
    snprintf(name, sizeof name, "matmul_%s_%lldx%lldx%lld%s%s", torc_dtype_short_name(dt), (long long)M,
             (long long)N, (long long)K, at ? "_at" : "", bt ? "_bt" : "");
    if (!wanted(name)) return;
    torc_scope_push();
    torc_tensor *a = at ? torc_transpose(randn(TORC_SHAPE(K, M), dt), 0, 1) : randn(TORC_SHAPE(M, K), dt);
    torc_tensor *b = bt ? torc_transpose(randn(TORC_SHAPE(N, K), dt), 0, 1) : randn(TORC_SHAPE(K, N), dt);
    torc_tensor *c = torc_matmul(a, b);
    emit(name, c);
    check_matmul(name, a, b, c);
    torc_scope_pop();
}

static void matmuls(void) {
    // (M, N, K): long K against few outputs (a split of K is what a library does there), a GEMV each
    // way, square, odd, and a Linear layer's three GEMMs (forward, input and weight gradient).
    static const int64_t shapes[][3] = {
        {4, 4, 65536}, {16, 16, 16384}, {64, 64, 4096}, {1, 64, 32768}, {64, 1, 32768}, {1, 1, 262144},
        {128, 128, 2048}, {512, 512, 512}, {33, 67, 2049}, {2048, 16, 256}, {16, 2048, 256}, {256, 256, 8192},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int t = 0; t < 4; t++)
            matmul_case(shapes[i][0], shapes[i][1], shapes[i][2], TORC_DTYPE_F32, t & 1, t & 2);
    // f16 and bf16 (the FMA GEMM, AMX tiles, oneDNN's primitive for skinny shapes; its AMX kernels
    // split K by thread count at 512 x 2 x 8192 and more, its AVX512-BF16 ones for weight gradients).
    static const int64_t half[][3] = {{4, 4, 65536}, {64, 64, 4096}, {1, 64, 32768}, {64, 1, 32768}, {512, 512, 512},
                                      {33, 67, 2049}, {512, 2, 8192}, {2, 512, 8192}, {256, 16, 4096}};
    const torc_dtype hdt[] = {TORC_DTYPE_F16, TORC_DTYPE_BF16};
    for (size_t i = 0; i < sizeof half / sizeof half[0]; i++)
        for (int d = 0; d < 2; d++)
            for (int t = 0; t < 4; t++) matmul_case(half[i][0], half[i][1], half[i][2], hdt[d], t & 1, t & 2);
    // Operands whose rows and columns are both strided (no BLAS layout): f32 and bf16.
    for (int d = 0; d < 2; d++) {
        const torc_dtype dt = d ? TORC_DTYPE_BF16 : TORC_DTYPE_F32;
        char name[64];
        snprintf(name, sizeof name, "matmul_strided_%s_64x48x4096", torc_dtype_short_name(dt));
        if (!wanted(name)) continue;
        torc_scope_push();
        torc_tensor *a = torc_slice(torc_slice(randn(TORC_SHAPE(128, 8192), dt), 0, 0, 128, 2), 1, 0, 8192, 2);
        torc_tensor *b = torc_slice(torc_slice(randn(TORC_SHAPE(8192, 96), dt), 0, 0, 8192, 2), 1, 0, 96, 2);
        torc_tensor *c = torc_matmul(a, b);
        emit(name, c);
        check_matmul(name, a, b, c);
        torc_scope_pop();
    }
    // A batch (one matrix per thread where they are small) and a broadcast B.
    if (wanted("matmul_batched")) {
        torc_scope_push();
        torc_tensor *a = randn(TORC_SHAPE(8, 32, 2048), TORC_DTYPE_F32);
        torc_tensor *b = randn(TORC_SHAPE(8, 2048, 32), TORC_DTYPE_F32);
        torc_tensor *c = torc_matmul(a, b), *b0 = torc_select(b, 0, 0), *c0 = torc_matmul(a, b0);
        emit("matmul_batched_f32_8x32x32x2048", c);
        check_matmul("matmul_batched_f32_8x32x32x2048", a, b, c);
        emit("matmul_batched_f32_bcast", c0);
        check_matmul("matmul_batched_f32_bcast", a, b0, c0);
        // Many small matrices: one matrix per thread (each GEMM under 1M multiply-adds), f32 and bf16.
        for (int d = 0; d < 2; d++) {
            const torc_dtype dt = d ? TORC_DTYPE_BF16 : TORC_DTYPE_F32;
            char name[64];
            snprintf(name, sizeof name, "matmul_batched_%s_64x32x48x512", torc_dtype_short_name(dt));
            torc_tensor *x = randn(TORC_SHAPE(64, 32, 512), dt), *y = randn(TORC_SHAPE(64, 512, 48), dt), *z = torc_matmul(x, y);
            emit(name, z);
            check_matmul(name, x, y, z);
        }
        torc_scope_pop();
    }
    // Autocast's fused matmuls (f32 operands rounded to f16 / bf16 on the way).
    const torc_dtype ac[] = {TORC_DTYPE_F16, TORC_DTYPE_BF16};
    for (int d = 0; d < 2; d++) {
        char name[64];
        snprintf(name, sizeof name, "autocast_%s_matmul", torc_dtype_short_name(ac[d]));
        if (!wanted(name)) continue;
        torc_scope_push();
        torc_tensor *a = randn(TORC_SHAPE(64, 4096), TORC_DTYPE_F32), *b = randn(TORC_SHAPE(4096, 64), TORC_DTYPE_F32);
        torc_autocast_begin(ac[d]);
        torc_tensor *c = torc_matmul(a, b);
        torc_autocast_end();
        emit(name, c);
        torc_scope_pop();
    }
    // fp8 scaled_mm (f32 GEMM of the decoded operands, then the scales).
    if (wanted("scaled_mm")) {
        torc_scope_push();
        torc_tensor *one = torc_full(TORC_SHAPE(1), 1.0, TORC_DTYPE_F32);
        torc_tensor *a = torc_to_fp8_scaled(randn(TORC_SHAPE(16, 16384), TORC_DTYPE_F32), one, TORC_DTYPE_F8_E4M3FN);
        torc_tensor *b = torc_to_fp8_scaled(randn(TORC_SHAPE(32, 16384), TORC_DTYPE_F32), one, TORC_DTYPE_F8_E4M3FN);
        emit("scaled_mm_f8_16x32x16384", torc_scaled_mm(a, torc_transpose(b, 0, 1), one, one, TORC_DTYPE_F32, NULL, NULL));
        torc_scope_pop();
    }
}

// ---- reductions over long rows, long columns and everything ----
static void reduce_case(const char *what, int ndim, const int64_t *shape, torc_dtype dt, int n_dims, const int *dims) {
    char name[128];
    int len = snprintf(name, sizeof name, "%s_%s", what, torc_dtype_short_name(dt));
    for (int d = 0; d < ndim; d++) len += snprintf(name + len, sizeof name - (size_t)len, "%s%lld", d ? "x" : "_", (long long)shape[d]);
    len += snprintf(name + len, sizeof name - (size_t)len, "_dims");
    if (n_dims == 0) snprintf(name + len, sizeof name - (size_t)len, "all");
    for (int d = 0; d < n_dims; d++) len += snprintf(name + len, sizeof name - (size_t)len, "%d", dims[d]);
    if (!wanted(name)) return;
    torc_scope_push();
    torc_tensor *x = randn(ndim, shape, dt);
    if (!strcmp(what, "prod")) x = torc_add_scalar(torc_mul_scalar(x, torc_scalar_f(1e-3)), torc_scalar_f(1.0));  // stays near 1
    torc_tensor *y = NULL;
    if (!strcmp(what, "sum")) y = torc_sum(x, n_dims, dims, false);
    else if (!strcmp(what, "mean")) y = torc_mean(x, n_dims, dims, false);
    else if (!strcmp(what, "prod")) y = torc_prod(x, n_dims, dims, false);
    else if (!strcmp(what, "amax")) y = torc_amax(x, n_dims, dims, false);
    else if (!strcmp(what, "var")) y = torc_var(x, n_dims, dims, 1.0, false);
    else if (!strcmp(what, "norm")) y = torc_norm(x, 2.0, n_dims, dims, false);
    else if (!strcmp(what, "logsumexp")) y = torc_logsumexp(x, n_dims, dims, false);
    emit(name, y);
    torc_scope_pop();
}

static void reductions(void) {
    const char *whats[] = {"sum", "mean", "prod", "amax", "var", "norm", "logsumexp"};
    for (size_t w = 0; w < sizeof whats / sizeof whats[0]; w++) {
        const bool all_ok = strcmp(whats[w], "logsumexp") != 0;  // logsumexp needs dims
        if (all_ok) reduce_case(whats[w], TORC_SHAPE(1 << 20), TORC_DTYPE_F32, TORC_ALL_DIMS);
        reduce_case(whats[w], TORC_SHAPE(16, 65536), TORC_DTYPE_F32, 1, (int[]){1});
        reduce_case(whats[w], TORC_SHAPE(65536, 16), TORC_DTYPE_F32, 1, (int[]){0});
        reduce_case(whats[w], TORC_SHAPE(1024, 1024), TORC_DTYPE_F32, 1, (int[]){0});
        reduce_case(whats[w], TORC_SHAPE(1024, 1024), TORC_DTYPE_F32, 1, (int[]){1});
        reduce_case(whats[w], TORC_SHAPE(64, 128, 128), TORC_DTYPE_F32, 2, (int[]){0, 2});
    }
    reduce_case("sum", TORC_SHAPE(1 << 20), TORC_DTYPE_BF16, TORC_ALL_DIMS);
    reduce_case("sum", TORC_SHAPE(16, 65536), TORC_DTYPE_BF16, 1, (int[]){1});
    reduce_case("sum", TORC_SHAPE(65536, 16), TORC_DTYPE_BF16, 1, (int[]){0});
    reduce_case("sum", TORC_SHAPE(1 << 20), TORC_DTYPE_F16, TORC_ALL_DIMS);
    if (wanted("max_dim")) {
        torc_scope_push();
        torc_tensor *x = randn(TORC_SHAPE(64, 16384), TORC_DTYPE_F32), *v = NULL, *ix = NULL;
        if (torc_max_dim(x, 1, false, &v, &ix) != TORC_OK) v = ix = NULL;
        emit("max_dim_f32_64x16384_values", v);
        emit("max_dim_f32_64x16384_indices", ix);
        torc_scope_pop();
    }
}

// ---- softmax, log_softmax, layer_norm over long rows; a loss ----
static void rows(void) {
    static const int64_t shapes[][2] = {{64, 16384}, {4, 262144}, {16384, 64}};
    const torc_dtype dts[] = {TORC_DTYPE_F32, TORC_DTYPE_BF16};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < 2; d++)
            for (int dim = 0; dim < 2; dim++)
                for (int log = 0; log < 2; log++) {
                    char name[128];
                    snprintf(name, sizeof name, "%s_%s_%lldx%lld_dim%d", log ? "log_softmax" : "softmax",
                             torc_dtype_short_name(dts[d]), (long long)shapes[s][0], (long long)shapes[s][1], dim);
                    if (!wanted(name)) continue;
                    torc_scope_push();
                    torc_tensor *x = randn(2, shapes[s], dts[d]);
                    emit(name, log ? torc_log_softmax(x, dim) : torc_softmax(x, dim));
                    torc_scope_pop();
                }
    // layer_norm forward and its gradients (x, weight, bias) over long rows, f32 and bf16 (f32 params).
    static const int64_t ln[][2] = {{256, 4096}, {16, 65536}, {8192, 64}, {1024, 384}};  // the last: a GPT's
    for (size_t s = 0; s < sizeof ln / sizeof ln[0]; s++)
        for (int d = 0; d < 2; d++) {
            char name[128];
            snprintf(name, sizeof name, "layer_norm_%s_%lldx%lld", torc_dtype_short_name(dts[d]), (long long)ln[s][0],
                     (long long)ln[s][1]);
            if (!wanted(name)) continue;
            torc_scope_push();
            const int64_t N = ln[s][1];
            torc_tensor *x = randn(2, ln[s], dts[d]);
            torc_tensor *w = torc_add_scalar(randn(TORC_SHAPE(N), TORC_DTYPE_F32), torc_scalar_f(1.0));
            torc_tensor *b = randn(TORC_SHAPE(N), TORC_DTYPE_F32);
            torc_set_requires_grad(x, true);
            torc_set_requires_grad(w, true);
            torc_set_requires_grad(b, true);
            torc_tensor *y = torc_layer_norm(x, 1, (int64_t[]){N}, w, b, 1e-5);
            char part[160];
            snprintf(part, sizeof part, "%s_y", name);
            emit(part, y);
            if (y && torc_backward(y, randn(2, ln[s], dts[d]), false) == TORC_OK) {
                snprintf(part, sizeof part, "%s_dx", name);
                emit(part, torc_grad(x));
                snprintf(part, sizeof part, "%s_dw", name);
                emit(part, torc_grad(w));
                snprintf(part, sizeof part, "%s_db", name);
                emit(part, torc_grad(b));
            } else {
                emit(name, NULL);
            }
            torc_scope_pop();
        }
    if (wanted("cross_entropy")) {
        torc_scope_push();
        torc_tensor *logits = randn(TORC_SHAPE(512, 1000), TORC_DTYPE_F32);
        torc_tensor *target = torc_randint(0, 1000, TORC_SHAPE(512), TORC_DTYPE_I64, g_gen);
        torc_set_requires_grad(logits, true);
        torc_tensor *loss = torc_cross_entropy(logits, target);
        emit("cross_entropy_f32_512x1000", loss);
        if (loss && torc_backward(loss, NULL, false) == TORC_OK) emit("cross_entropy_f32_512x1000_grad", torc_grad(logits));
        else emit("cross_entropy_f32_512x1000_grad", NULL);
        torc_scope_pop();
    }
}

// ---- a two-layer MLP's loss and gradients: what a training step reduces ----
static void mlp(torc_dtype autocast) {
    char name[64];
    snprintf(name, sizeof name, "mlp%s%s", autocast ? "_autocast_" : "", autocast ? torc_dtype_short_name(autocast) : "");
    if (!wanted(name)) return;
    torc_scope_push();
    const int64_t B = 1024, D = 256;
    torc_tensor *x = randn(TORC_SHAPE(B, D), TORC_DTYPE_F32), *y = randn(TORC_SHAPE(B, 1), TORC_DTYPE_F32);
    torc_tensor *w1 = torc_mul_scalar(randn(TORC_SHAPE(D, D), TORC_DTYPE_F32), torc_scalar_f(0.0625));
    torc_tensor *w2 = torc_mul_scalar(randn(TORC_SHAPE(D, 1), TORC_DTYPE_F32), torc_scalar_f(0.0625));
    torc_set_requires_grad(w1, true);
    torc_set_requires_grad(w2, true);
    if (autocast) torc_autocast_begin(autocast);
    torc_tensor *out = torc_matmul(torc_relu(torc_matmul(x, w1)), w2);
    if (autocast) torc_autocast_end();
    torc_tensor *loss = torc_mse_loss(out ? torc_to_dtype(out, TORC_DTYPE_F32) : NULL, y);
    char part[96];
    snprintf(part, sizeof part, "%s_loss", name);
    emit(part, loss);
    if (loss && torc_backward(loss, NULL, false) == TORC_OK) {
        snprintf(part, sizeof part, "%s_dw1", name);
        emit(part, torc_grad(w1));
        snprintf(part, sizeof part, "%s_dw2", name);
        emit(part, torc_grad(w2));
    } else {
        emit(name, NULL);
    }
    torc_scope_pop();
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: threads_probe DIR [FILTER]\n");
        return 2;
    }
    g_dir = argv[1];
    g_filter = argc > 2 ? argv[2] : NULL;
    const char *check = getenv("THREADS_PROBE_CHECK");
    g_check = check && !strcmp(check, "1");
    g_gen = torc_generator_new(34);
    torc_scope_push();  // the temporaries go at the pop; g_pool is kept out of it
    g_pool = g_gen ? torc_keep(torc_add_scalar(
                         torc_mul_scalar(torc_rand(TORC_SHAPE(POOL), TORC_DTYPE_F32, g_gen), torc_scalar_f(4.0)),
                         torc_scalar_f(-2.0)))
                   : NULL;
    torc_scope_pop();
    if (!g_pool) {
        fprintf(stderr, "threads_probe: %s\n", torc_last_error());
        return 1;
    }
    matmuls();
    reductions();
    rows();
    mlp(0);
    mlp(TORC_DTYPE_F16);
    mlp(TORC_DTYPE_BF16);
    torc_release(g_pool);
    torc_generator_free(g_gen);
    printf("threads_probe: %d results on %s\n", g_written, torc_device_backend_name(torc_default_device()));
    torc_shutdown();
    return g_failed;
}
