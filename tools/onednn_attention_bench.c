// tools/onednn_attention_bench.c — the onednn backend's fused attention (ATTENTION, then
// ATTENTION_BACKWARD, through torc_run_op) against the composition torc_scaled_dot_product_attention
// falls back to (q sf @ (k^T sf), where(tril) when causal, softmax, @ v, and autograd's backward),
// side by side: alternating, best of reps, in process CPU time (run it with TORC_NUM_THREADS=1 on a
// shared machine), and the peak of the device's tensor memory each takes on top of its inputs.
// Usage: onednn_attention_bench [T (256)] [reps (5)] [causal (1)]; B = 4, H = 6, E = 64, f32.
// FUSED_ONLY=1 skips the composition (for profiling the kernels).
#define _POSIX_C_SOURCE 199309L  // clock_gettime
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

static double fused(torc_tensor *q, torc_tensor *k, torc_tensor *v, torc_tensor *dout, double *fwd_s, uint64_t *mem) {
    torc_scope_push();
    torc_memory_stats m0, m1;
    torc_memory_stats_get(dev, &m0);
    torc_memory_reset_peak(dev);
    double t0 = now();
    torc_tensor *o = torc_to_device(torc_empty(4, (int64_t[]){B, H, T, E}, TORC_DTYPE_F32), dev);
    torc_tensor *lse = torc_to_device(torc_empty(3, (int64_t[]){B, H, T}, TORC_DTYPE_F32), dev);
    torc_op_params p; memset(&p, 0, sizeof p); p.attention.scale = 1 / sqrt((double)E); p.attention.causal = causal;
    torc_op_call f = {.code = TORC_OP_ATTENTION, .n_in = 3, .n_out = 2, .in = {q, k, v}, .out = {o, lse}, .params = p};
    CK(torc_run_op(dev, &f, TORC_RUN_NATIVE) == TORC_OK);
    double t1 = now();
    torc_tensor *dq = torc_to_device(torc_empty(4, (int64_t[]){B, H, T, E}, TORC_DTYPE_F32), dev);
    torc_tensor *dk = torc_to_device(torc_empty(4, (int64_t[]){B, H, T, E}, TORC_DTYPE_F32), dev);
    torc_tensor *dv = torc_to_device(torc_empty(4, (int64_t[]){B, H, T, E}, TORC_DTYPE_F32), dev);
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
        torc_tensor *ninf = torc_to_device(torc_full(0, NULL, -INFINITY, TORC_DTYPE_F32), dev);
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

int main(int argc, char **argv) {
    T = argc > 1 ? atoll(argv[1]) : 256;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    causal = argc > 3 ? atoi(argv[3]) : 1;
    dev = torc_device_get("onednn");
    CK(dev);
    torc_generator *g = torc_generator_new(1);
    torc_tensor *q = torc_to_device(torc_randn(4, (int64_t[]){B, H, T, E}, TORC_DTYPE_F32, g), dev);
    torc_tensor *k = torc_to_device(torc_randn(4, (int64_t[]){B, H, T, E}, TORC_DTYPE_F32, g), dev);
    torc_tensor *v = torc_to_device(torc_randn(4, (int64_t[]){B, H, T, E}, TORC_DTYPE_F32, g), dev);
    torc_tensor *dout = torc_to_device(torc_randn(4, (int64_t[]){B, H, T, E}, TORC_DTYPE_F32, g), dev);
    CK(q && k && v && dout);
    torc_set_requires_grad(q, true), torc_set_requires_grad(k, true), torc_set_requires_grad(v, true);
    double bf = 1e9, bc = 1e9, ff = 1e9, fc = 1e9;
    uint64_t mf = 0, mc = 0;
    for (int r = 0; r < reps; r++) {  // alternating, best of reps
        double f1, f2;
        double a = fused(q, k, v, dout, &f1, &mf);
        double c = getenv("FUSED_ONLY") ? (f2 = 1, 1) : composed(q, k, v, dout, &f2, &mc);
        if (a < bf) bf = a;
        if (c < bc) bc = c;
        if (f1 < ff) ff = f1;
        if (f2 < fc) fc = f2;
    }
    printf("B=%lld H=%lld T=%lld E=%lld f32 causal=%d: fwd+bwd fused %.2f ms composed %.2f ms (%.2fx); fwd fused %.2f ms "
           "composed %.2f ms (%.2fx); peak extra memory fused %.1f MiB composed %.1f MiB\n",
           (long long)B, (long long)H, (long long)T, (long long)E, causal, bf * 1e3, bc * 1e3, bc / bf, ff * 1e3,
           fc * 1e3, fc / ff, mf / 1048576.0, mc / 1048576.0);
    return 0;
}
