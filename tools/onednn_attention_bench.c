// tools/onednn_attention_bench.c — the onednn backend's fused attention (ATTENTION, then
// ATTENTION_BACKWARD, through torc_run_op) against the composition torc_scaled_dot_product_attention
// falls back to (q sf @ (k^T sf), where(tril) when causal, softmax, @ v, and autograd's backward),
// side by side: alternating, best of reps, in process CPU time (run it with TORC_NUM_THREADS=1 on a
// shared machine), and the peak of the device's tensor memory each takes on top of its inputs.
// Usage: onednn_attention_bench [T (256)] [reps (5)] [causal (1)] [dtypes (f32)] [layout (dense)];
// B = 4, H = 6, E = 64; dtypes a comma-separated list (f32,bf16,f16), each rep running every dtype in
// turn, so that their figures come from the same moments of a shared machine; layout dense (q, k, v
// contiguous (B, H, T, E)) or split (GPT's heads: slices of one (B, T, 3, H, E) tensor, permuted).
// FUSED_ONLY=1 skips the composition (for profiling the kernels).
#define _POSIX_C_SOURCE 200809L  // clock_gettime, strtok_r
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "torc/torc.h"

static double now(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
// Exits with the error: a tool, not the library.
#define CK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, torc_last_error()); exit(1); } } while (0)

static torc_device *dev;
static int64_t B = 4, H = 6, T, E = 64;
static int causal = 1;
static torc_dtype dt = TORC_DTYPE_F32;

static double fused(torc_tensor *q, torc_tensor *k, torc_tensor *v, torc_tensor *dout, double *fwd_s, uint64_t *mem) {
    torc_scope_push();
    torc_memory_stats m0, m1;
    torc_memory_stats_get(dev, &m0);
    torc_memory_reset_peak(dev);
    double t0 = now();
    torc_tensor *o = torc_to_device(torc_empty(4, (int64_t[]){B, H, T, E}, dt), dev);
    torc_tensor *lse = torc_to_device(torc_empty(3, (int64_t[]){B, H, T}, TORC_DTYPE_F32), dev);
    torc_op_params p; memset(&p, 0, sizeof p); p.attention.scale = 1 / sqrt((double)E); p.attention.causal = causal;
    torc_op_call f = {.code = TORC_OP_ATTENTION, .n_in = 3, .n_out = 2, .in = {q, k, v}, .out = {o, lse}, .params = p};
    CK(torc_run_op(dev, &f, TORC_RUN_NATIVE) == TORC_OK);
    double t1 = now();
    torc_tensor *dq = torc_to_device(torc_empty(4, (int64_t[]){B, H, T, E}, dt), dev);
    torc_tensor *dk = torc_to_device(torc_empty(4, (int64_t[]){B, H, T, E}, dt), dev);
    torc_tensor *dv = torc_to_device(torc_empty(4, (int64_t[]){B, H, T, E}, dt), dev);
    torc_op_call b = {.code = TORC_OP_ATTENTION_BACKWARD, .n_in = 6, .n_out = 3, .in = {dout, q, k, v, o, lse},
                      .out = {dq, dk, dv}, .params = p};
    CK(torc_run_op(dev, &b, TORC_RUN_NATIVE) == TORC_OK);
    double t2 = now();
    torc_memory_stats_get(dev, &m1);
    *mem = m1.total_peak - m0.total_in_use;
    torc_scope_pop();
    *fwd_s = t1 - t0;
    return t2 - t0;
}

static double composed(torc_tensor *q, torc_tensor *k, torc_tensor *v, torc_tensor *dout, double *fwd_s, uint64_t *mem) {
    torc_scope_push();
    torc_memory_stats m0, m1;
    torc_memory_stats_get(dev, &m0);
    torc_memory_reset_peak(dev);
    double t0 = now();
    const double sf = sqrt(1 / sqrt((double)E));
    torc_tensor *attn = torc_matmul(torc_mul_scalar(q, torc_s(sf)), torc_mul_scalar(torc_transpose(k, -2, -1), torc_s(sf)));
    if (causal) {
        torc_tensor *tri = torc_tril(torc_to_device(torc_ones(2, (int64_t[]){T, T}, TORC_DTYPE_BOOL), dev), 0);
        torc_tensor *ninf = torc_to_device(torc_full(0, NULL, -INFINITY, dt), dev);
        attn = torc_where(tri, attn, ninf);
    }
    torc_tensor *o = torc_matmul(torc_softmax(attn, -1), v);
    CK(o);
    double t1 = now();
    CK(torc_backward(o, dout, false) == TORC_OK);
    double t2 = now();
    torc_memory_stats_get(dev, &m1);
    *mem = m1.total_peak - m0.total_in_use;
    torc_scope_pop();
    *fwd_s = t1 - t0;
    return t2 - t0;
}

enum { MAX_DT = 3 };

int main(int argc, char **argv) {
    T = argc > 1 ? atoll(argv[1]) : 256;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    causal = argc > 3 ? atoi(argv[3]) : 1;
    torc_dtype dts[MAX_DT];
    int ndt = 0;
    char list[64];
    snprintf(list, sizeof list, "%s", argc > 4 ? argv[4] : "f32");
    for (char *sv = NULL, *name = strtok_r(list, ",", &sv); name && ndt < MAX_DT; name = strtok_r(NULL, ",", &sv))
        CK(torc_dtype_from_name(name, &dts[ndt++]) == TORC_OK);
    const bool split = argc > 5 && !strcmp(argv[5], "split"), fused_only = getenv("FUSED_ONLY") != NULL;
    dev = torc_device_get("onednn");
    CK(dev);
    torc_tensor *in[MAX_DT][4];  // q, k, v, do in each dtype (the same values, rounded)
    for (int d = 0; d < ndt; d++) {
        torc_generator *g = torc_generator_new(1);
        torc_tensor *qkv = NULL;
        if (split) {
            torc_tensor *t = torc_randn(5, (int64_t[]){B, T, 3, H, E}, TORC_DTYPE_F32, g);
            CK(t);
            qkv = torc_to_device(dts[d] == TORC_DTYPE_F32 ? t : torc_to_dtype(t, dts[d]), dev);
            CK(qkv);
            torc_set_requires_grad(qkv, true);
        }
        for (int i = 0; i < 4; i++) {
            if (split && i < 3) {
                in[d][i] = torc_permute(torc_select(qkv, 2, i), 4, (const int[]){0, 2, 1, 3});
                CK(in[d][i]);
                continue;
            }
            torc_tensor *t = torc_randn(4, (int64_t[]){B, H, T, E}, TORC_DTYPE_F32, g);
            CK(t);
            in[d][i] = torc_to_device(dts[d] == TORC_DTYPE_F32 ? t : torc_to_dtype(t, dts[d]), dev);
            CK(in[d][i]);
            if (i < 3) torc_set_requires_grad(in[d][i], true);
        }
        torc_generator_free(g);
    }
    double bf[MAX_DT], bc[MAX_DT], ff[MAX_DT], fc[MAX_DT], bb[MAX_DT];
    uint64_t mf[MAX_DT] = {0}, mc[MAX_DT] = {0};
    for (int d = 0; d < ndt; d++) bf[d] = bc[d] = ff[d] = fc[d] = bb[d] = 1e9;
    for (int r = 0; r < reps; r++)  // alternating, best of reps
        for (int d = 0; d < ndt; d++) {
            dt = dts[d];
            torc_tensor **x = in[d];
            double f1, f2;
            double a = fused(x[0], x[1], x[2], x[3], &f1, &mf[d]);
            double c = fused_only ? (f2 = 1, 1) : composed(x[0], x[1], x[2], x[3], &f2, &mc[d]);
            if (a < bf[d]) bf[d] = a;
            if (c < bc[d]) bc[d] = c;
            if (f1 < ff[d]) ff[d] = f1;
            if (f2 < fc[d]) fc[d] = f2;
            if (a - f1 < bb[d]) bb[d] = a - f1;
        }
    for (int d = 0; d < ndt; d++) {
        printf("B=%lld H=%lld T=%lld E=%lld %s %s causal=%d: fused fwd+bwd %.2f ms, fwd %.2f ms, bwd %.2f ms",
               (long long)B, (long long)H, (long long)T, (long long)E, torc_dtype_name(dts[d]),
               split ? "split" : "dense", causal, bf[d] * 1e3, ff[d] * 1e3, bb[d] * 1e3);
        if (!fused_only)
            printf("; composed fwd+bwd %.2f ms (%.2fx), fwd %.2f ms (%.2fx); peak extra memory fused %.1f MiB "
                   "composed %.1f MiB", bc[d] * 1e3, bc[d] / bf[d], fc[d] * 1e3, fc[d] / ff[d], mf[d] / 1048576.0,
                   mc[d] / 1048576.0);
        printf("\n");
    }
    return 0;
}
