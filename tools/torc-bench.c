// tools/torc-bench.c — the figures users quote: matmul GFLOP/s and MFU per dtype and size, a
// practical FMA peak (and AMX peak, where the CPU has AMX) measured here, dispatch overhead, a tiny
// forward+backward and Cruncher training steps; --peer times PyTorch and numpy (tools/bench_peer.py)
// and OpenBLAS and BLIS from C (this program again, as --blas-peer), and prints each ratio with the
// targets and the CPU's name.
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE  // syscall()

#include <cpuid.h>
#include <dlfcn.h>
#include <errno.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <torc/gpt.h>
#include <torc/torc.h>

// Tools may exit on setup errors (STYLE.md); the library never does.
#define bench_die(...) (fprintf(stderr, "torc-bench: " __VA_ARGS__), fputc('\n', stderr), exit(2))

#ifndef TORC_BENCH_PEER_SCRIPT
#define TORC_BENCH_PEER_SCRIPT "tools/bench_peer.py"
#endif
#ifndef TORC_BENCH_PEER_SCRIPT_INSTALLED
#define TORC_BENCH_PEER_SCRIPT_INSTALLED ""
#endif

// ---- options ----
typedef struct gpt_cfg {  // a GPT of --gpt
    char name[8];
    int64_t L, NH, C, V, T, B;  // n_layer, n_head, n_embd, vocab (padded to 128 by the model), T, batch
} gpt_cfg;

typedef struct options {
    const char *backend;        // NULL: TORC_BACKEND / the default device
    bool quick, tiny, json, peer, train;
    bool cpu_time;              // time by the process's CPU time over the thread count (a loaded machine)
    int64_t sizes[8];           // matmul sizes
    int n_sizes;
    torc_dtype dtypes[4];
    int n_dtypes;
    int threads;                // FMA-loop threads (default: online CPUs)
    int rounds;                 // measurement rounds (each: torc's figures, then the peer's)
    const char *python, *peer_script;
    const char *optim_step;     // --optim-step NAME: time that optimizer's step alone (and its Cruncher step)
    int64_t cr_D, cr_B;         // --cruncher D,L,B: the model --optim-step uses (default 1024,4,512)
    int cr_L;
    // --gpt: the GPT training step beside PyTorch's (gpt_main)
    gpt_cfg gpt[4];
    int n_gpt;
    torc_dtype gpt_dtypes[2];
    int n_gpt_dtypes;
    int gpt_steps, gpt_warmup;  // timed and warm-up steps a round
    bool threads_given;         // --threads N: only N threads (else 1 and every CPU)
    bool gpt_no_extra;          // skip the sampler's and the activations' figures
} options;
static options g_opt;
static bool g_amx;  // the CPU has AMX-BF16 and this process may use it: torc-bench measures its peak

// --cpu-time: on a machine shared with other work, wall time measures the other work too. The
// process's CPU time over the thread count is what the threads ran for; idle threads that spin
// (OpenMP's wait policy) count against the code timed, so it errs on the slow side.
static double now_s(void) {
    struct timespec ts;
    clock_gettime(g_opt.cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    const double t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    return g_opt.cpu_time ? t / g_opt.threads : t;
}

// Wall time whatever --cpu-time says (op tracing's clock, for shares of a step).
static double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static void check(bool ok, const char *what) {
    if (!ok) bench_die("%s failed: %s", what, torc_last_error());
}

// ---- results (the table and --json share them) ----
#define MAX_RESULTS 256
typedef struct result {
    char key[64];       // "matmul_f32_2048_gflops", as bench_peer.py names its figures
    double value;
} result;
static result g_res[MAX_RESULTS];
static int g_n_res;

static void put(const char *key, double v) {
    for (int i = 0; i < g_n_res; i++)
        if (!strcmp(g_res[i].key, key)) {
            g_res[i].value = v;
            return;
        }
    if (g_n_res == MAX_RESULTS) return;
    snprintf(g_res[g_n_res].key, sizeof g_res[0].key, "%s", key);
    g_res[g_n_res++].value = v;
}

static bool get(const result *r, int n, const char *key, double *v) {
    for (int i = 0; i < n; i++)
        if (!strcmp(r[i].key, key)) {
            *v = r[i].value;
            return true;
        }
    return false;
}

// One round: torc's figures, then the peer's (when --peer), taken back to back. Each ratio is
// taken within a round and the rounds' ratios are summarized by their median: on a shared
// machine whose speed drifts over minutes, a ratio of figures taken far apart measures the drift.
#define MAX_ROUNDS 9
typedef struct round_res {
    result torc[MAX_RESULTS], peer[MAX_RESULTS];
    int nt, np;
} round_res;
static round_res g_rounds[MAX_ROUNDS];
static int g_n_rounds;

#define say(...) (g_opt.json ? 0 : printf(__VA_ARGS__))

// ---- the practical peak: an FMA loop in the widest ISA the CPU has ----
// Twelve independent accumulators cover the FMA latency (4 cycles) on two ports; each FMA is
// 2 FLOPs per lane. The loops run the same number of iterations on every thread.
#define FMA_ACC 12
// The accumulators are named variables, not an array: the compiler then keeps all twelve in
// registers instead of round-tripping through memory (which would measure store forwarding).
#define FMA_STEP(f) a0 = f(a0, m, c), a1 = f(a1, m, c), a2 = f(a2, m, c), a3 = f(a3, m, c), a4 = f(a4, m, c), \
                    a5 = f(a5, m, c), a6 = f(a6, m, c), a7 = f(a7, m, c), a8 = f(a8, m, c), a9 = f(a9, m, c), \
                    a10 = f(a10, m, c), a11 = f(a11, m, c)
#define FMA_SUM(add) add(add(add(add(a0, a1), add(a2, a3)), add(add(a4, a5), add(a6, a7))), add(add(a8, a9), add(a10, a11)))

__attribute__((target("avx512f"))) static float fma_loop_avx512(int64_t iters) {
    __m512 a0 = _mm512_set1_ps(1.00f), a1 = _mm512_set1_ps(1.01f), a2 = _mm512_set1_ps(1.02f), a3 = _mm512_set1_ps(1.03f),
           a4 = _mm512_set1_ps(1.04f), a5 = _mm512_set1_ps(1.05f), a6 = _mm512_set1_ps(1.06f), a7 = _mm512_set1_ps(1.07f),
           a8 = _mm512_set1_ps(1.08f), a9 = _mm512_set1_ps(1.09f), a10 = _mm512_set1_ps(1.10f), a11 = _mm512_set1_ps(1.11f);
    const __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
    for (int64_t it = 0; it < iters; it++) FMA_STEP(_mm512_fmadd_ps);
    return _mm512_reduce_add_ps(FMA_SUM(_mm512_add_ps));
}

__attribute__((target("avx2,fma"))) static float fma_loop_avx2(int64_t iters) {
    __m256 a0 = _mm256_set1_ps(1.00f), a1 = _mm256_set1_ps(1.01f), a2 = _mm256_set1_ps(1.02f), a3 = _mm256_set1_ps(1.03f),
           a4 = _mm256_set1_ps(1.04f), a5 = _mm256_set1_ps(1.05f), a6 = _mm256_set1_ps(1.06f), a7 = _mm256_set1_ps(1.07f),
           a8 = _mm256_set1_ps(1.08f), a9 = _mm256_set1_ps(1.09f), a10 = _mm256_set1_ps(1.10f), a11 = _mm256_set1_ps(1.11f);
    const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
    for (int64_t it = 0; it < iters; it++) FMA_STEP(_mm256_fmadd_ps);
    float lanes[8];
    _mm256_storeu_ps(lanes, FMA_SUM(_mm256_add_ps));
    float r = 0;
    for (int i = 0; i < 8; i++) r += lanes[i];
    return r;
}

// The bf16 dot-product loop (AVX512-BF16, no AMX): VDPBF16PS does 16 lanes x 2 pairs of
// multiply-adds into f32. Where it runs at half the FMA loop's rate (Intel cores), the oneDNN
// backend's bf16 matmuls go through f32 FMAs instead, and their peak is the FMA loop's.
#define DPBF16(a, m, c) _mm512_dpbf16_ps(a, (__m512bh)(m), (__m512bh)(c))
__attribute__((target("avx512f,avx512bf16"))) static float dpbf16_loop(int64_t iters) {
    __m512 a0 = _mm512_set1_ps(1.00f), a1 = _mm512_set1_ps(1.01f), a2 = _mm512_set1_ps(1.02f), a3 = _mm512_set1_ps(1.03f),
           a4 = _mm512_set1_ps(1.04f), a5 = _mm512_set1_ps(1.05f), a6 = _mm512_set1_ps(1.06f), a7 = _mm512_set1_ps(1.07f),
           a8 = _mm512_set1_ps(1.08f), a9 = _mm512_set1_ps(1.09f), a10 = _mm512_set1_ps(1.10f), a11 = _mm512_set1_ps(1.11f);
    const __m512i m = _mm512_set1_epi32(0x3f7f3f80), c = _mm512_set1_epi32(0x33d633d6);  // (1 - 2^-8, 1), (1e-7, 1e-7)
    for (int64_t it = 0; it < iters; it++) FMA_STEP(DPBF16);
    return _mm512_reduce_add_ps(FMA_SUM(_mm512_add_ps));
}

static float scalar_fma(float a, float m, float c) { return a * m + c; }
static float scalar_add(float a, float b) { return a + b; }
static float fma_loop_scalar(int64_t iters) {
    float a0 = 1.00f, a1 = 1.01f, a2 = 1.02f, a3 = 1.03f, a4 = 1.04f, a5 = 1.05f, a6 = 1.06f, a7 = 1.07f, a8 = 1.08f,
          a9 = 1.09f, a10 = 1.10f, a11 = 1.11f;
    const float m = 0.9999999f, c = 1e-7f;
    for (int64_t it = 0; it < iters; it++) FMA_STEP(scalar_fma);
    return FMA_SUM(scalar_add);
}

// ---- the bf16 practical peak on AMX: back-to-back tile multiplies, no loads ----
// Four accumulator tiles (16 x 16 f32) take tdpbf16ps from two A and two B tiles (16 x 32 bf16):
// 16 x 16 x 32 multiply-adds each, independent enough to cover the instruction's latency. What a
// GEMM on AMX can reach at most; a real one also loads a tile per multiply.
// Eight nops after each multiply: issued back to back, tile multiplies ran at about half speed on
// the Sapphire Rapids VMs this was written on (median 67 against 38 ns for four); with the gaps
// the loop is as fast as the fastest back-to-back runs.
#define AMX_FLOPS_PER_DP (16 * 16 * 32 * 2)
#define AMX_GAP() __asm__ volatile("nop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop")
typedef struct amx_tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;

__attribute__((target("amx-tile,amx-bf16"))) static float amx_loop(int64_t iters) {
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) cfg.colsb[i] = 64, cfg.rows[i] = 16;
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    for (int64_t it = 0; it < iters; it++) {
        _tile_dpbf16ps(0, 4, 6);
        AMX_GAP();
        _tile_dpbf16ps(1, 4, 7);
        AMX_GAP();
        _tile_dpbf16ps(2, 5, 6);
        AMX_GAP();
        _tile_dpbf16ps(3, 5, 7);
        AMX_GAP();
    }
    float c[16 * 16];
    _tile_stored(0, c, 64);
    _tile_release();
    return c[0];
}

// The ISA cap the backends run under (TORC_MAX_CPU_ISA, else ONEDNN_MAX_CPU_ISA; isa.c's names) as
// a level: a capped run stands for a CPU of that level, so its peaks are that CPU's loops (on a
// CPU with two 512-bit FMA units the AVX2 loop's peak is half the AVX-512 one's).
enum { CAP_SSE41, CAP_AVX, CAP_AVX2, CAP_AVX512_CORE, CAP_AVX512_CORE_BF16, CAP_AMX, CAP_ALL };
static int isa_cap(void) {
    static const char *names[] = {"SSE41", "AVX", "AVX2", "AVX512_CORE", "AVX512_CORE_BF16", "AVX512_CORE_AMX", "ALL"};
    const char *cap = getenv("TORC_MAX_CPU_ISA");
    if (!cap || !*cap) cap = getenv("ONEDNN_MAX_CPU_ISA");
    for (int i = 0; cap && i <= CAP_ALL; i++)
        if (!strcasecmp(cap, names[i])) return i;
    return CAP_ALL;  // none, or a name the backend itself refuses
}

// Whether this CPU has AMX-BF16 and Linux lets this process use the tile data (asked once).
static bool amx_available(void) {
    unsigned a, b, c, d;
    if (isa_cap() < CAP_AMX || __get_cpuid_max(0, NULL) < 7) return false;
    __cpuid_count(7, 0, a, b, c, d);
    if (!((d >> 22) & 1) || !((d >> 24) & 1)) return false;  // AMX-BF16, AMX-TILE
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

typedef struct peak_loop {
    const char *name;
    float (*loop)(int64_t iters);
    int flops_per_iter;  // FMA_ACC accumulators x lanes x 2 (AMX: 4 tile multiplies)
} peak_loop;

static peak_loop pick_isa(void) {
    __builtin_cpu_init();
    const int cap = isa_cap();
    if (cap >= CAP_AVX512_CORE && __builtin_cpu_supports("avx512f"))
        return (peak_loop){"AVX-512", fma_loop_avx512, FMA_ACC * 16 * 2};
    if (cap >= CAP_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (peak_loop){"AVX2+FMA", fma_loop_avx2, FMA_ACC * 8 * 2};
    return (peak_loop){"scalar", fma_loop_scalar, FMA_ACC * 2};
}

static const peak_loop amx_peak_loop = {"AMX-BF16", amx_loop, 4 * AMX_FLOPS_PER_DP};
static const peak_loop dpbf16_peak_loop = {"AVX512-BF16", dpbf16_loop, FMA_ACC * 16 * 2 * 2};

typedef struct loop_job {
    const peak_loop *isa;
    int64_t iters;
    pthread_barrier_t *barrier;
    volatile float sink;
} loop_job;

static void *loop_thread(void *arg) {
    loop_job *j = arg;
    pthread_barrier_wait(j->barrier);
    j->sink = j->isa->loop(j->iters);
    return NULL;
}

// FLOP/s of `threads` threads each running iters iterations, from the common start to the last join.
static double loop_run(const peak_loop *isa, int threads, int64_t iters) {
    pthread_t tid[256];
    loop_job jobs[256];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; t++) {
        jobs[t] = (loop_job){isa, iters, &barrier, 0};
        if (pthread_create(&tid[t], NULL, loop_thread, &jobs[t])) bench_die("pthread_create failed");
    }
    pthread_barrier_wait(&barrier);
    const double t0 = now_s();
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    const double dt = now_s() - t0;
    pthread_barrier_destroy(&barrier);
    return (double)threads * (double)iters * isa->flops_per_iter / dt;
}

static double loop_peak(const peak_loop *isa, int threads) {
    // Calibrate on one thread to about 0.3 s per trial (0.05 s in --tiny), keep the best of 3.
    int64_t iters = 1 << 16;
    double t;
    do {
        const double t0 = now_s();
        volatile float s = isa->loop(iters);
        (void)s;
        t = now_s() - t0;
        if (t < 0.02) iters *= 4;
    } while (t < 0.02);
    iters = (int64_t)((double)iters * (g_opt.tiny ? 0.05 : 0.3) / t) + 1;
    double best = 0;
    for (int trial = 0; trial < 3; trial++) best = fmax(best, loop_run(isa, threads, iters));
    return best;
}

// ---- timing torc ----
// The course's time_matmul: warm up, then time runs each followed by a synchronize; median.
static int reps_for(double t_one, double budget, int lo, int hi) {
    int r = t_one > 0 ? (int)(budget / t_one) : hi;
    return r < lo ? lo : r > hi ? hi : r;
}

static torc_device *g_dev;

static void sync_dev(void) { check(torc_device_synchronize(g_dev) == TORC_OK, "synchronize"); }

// Whether the device's backend runs a 2-D matmul of dtype itself (else the reference does).
// The probe is 64 x 64: backends may leave tiny ops to the reference (oneDNN's
// TORC_ONEDNN_MIN_WORK), and supports() reads shapes, never data.
// Whether the backend itself runs a 64x64 matmul of dt (else the reference would).
static bool native_matmul(torc_dtype dt) {
    torc_scope_push();
    torc_tensor *a = torc_to_device(torc_zeros(TORC_SHAPE(64, 64), dt), g_dev);
    torc_tensor *out = torc_to_device(torc_zeros(TORC_SHAPE(64, 64), dt), g_dev);
    torc_op_call call = {.code = TORC_OP_MATMUL, .n_in = 2, .n_out = 1, .in = {a, a}, .out = {out}};
    const bool native = a && out && torc_op_supported(g_dev, &call) == TORC_OK;
    torc_scope_pop();
    torc_clear_error();
    return native;
}

// One timed product, in a scope of its own: the product is freed at its pop, so the next call writes
// memory this one freed (as a training loop's steps do) instead of pages faulted in fresh. With
// torc_release(torc_keep(c)) the products lived to the outer scope's pop, and every call paid a
// page fault a 4 KiB of its out: 8% of a 1024^3 f32 product on a Zen 4 core (99 -> 108 GFLOP/s).
static double timed_matmul(torc_tensor *a, torc_tensor *b) {
    torc_scope_push();
    const double t0 = now_s();
    check(torc_matmul(a, b) != NULL, "matmul");
    sync_dev();
    const double t = now_s() - t0;
    torc_scope_pop();
    return t;
}

static double time_matmul(int64_t n, torc_dtype dt, int *reps_out) {
    torc_scope_push();
    torc_tensor *a = torc_randn(TORC_SHAPE(n, n), dt, NULL), *b = torc_randn(TORC_SHAPE(n, n), dt, NULL);
    check(a && b, "randn");
    double t_warm = 0;
    for (int i = 0; i < 2; i++) t_warm = timed_matmul(a, b);
    const int reps = g_opt.tiny ? 3 : reps_for(t_warm, g_opt.quick ? 0.5 : 1.5, 3, g_opt.quick ? 7 : 15);
    double t[16];
    for (int r = 0; r < reps; r++) t[r] = timed_matmul(a, b);
    torc_scope_pop();
    *reps_out = reps;
    return median(t, reps);
}

// Median per-call time of fn over batches of `calls` calls.
static double per_call(void (*fn)(void *), void *ctx, int calls, int batches) {
    double t[16];
    fn(ctx);  // warm-up
    for (int bi = 0; bi < batches; bi++) {
        const double t0 = now_s();
        for (int i = 0; i < calls; i++) fn(ctx);
        sync_dev();
        t[bi] = (now_s() - t0) / calls;
    }
    return median(t, batches);
}

typedef struct tiny_ctx { torc_tensor *x, *y, *w; } tiny_ctx;

static void add_call(void *vctx) {
    tiny_ctx *c = vctx;
    torc_tensor *r = torc_add(c->x, c->y);
    check(r != NULL, "add");
    torc_release(r);
}

// relu(x @ w).sum().backward(); w.grad = None — the peer runs the same graph.
static void tiny_fwd_bwd(void *vctx) {
    tiny_ctx *c = vctx;
    torc_scope_push();
    torc_tensor *loss = torc_sum(torc_relu(torc_matmul(c->x, c->w)), TORC_ALL_DIMS, false);
    check(loss && torc_backward(loss, NULL, false) == TORC_OK, "tiny forward+backward");
    torc_set_grad(c->w, NULL);
    torc_scope_pop();
}

// One Cruncher training step as the peer times it: zero_grad, forward, MSE loss, backward, step.
// bf16 / f16: the forward under autocast to that dtype (its matmuls, f32 master weights), the loss
// in f32.
typedef struct cruncher_ctx {
    torc_module *m;
    torc_optimizer *opt;
    torc_tensor *x, *target;
    torc_dtype autocast;  // TORC_DTYPE_F32: none
} cruncher_ctx;

static void cruncher_step(void *vctx) {
    cruncher_ctx *c = vctx;
    torc_scope_push();
    check(torc_optimizer_zero_grad(c->opt, true) == TORC_OK, "zero_grad");
    const bool ac = c->autocast != TORC_DTYPE_F32;
    if (ac) check(torc_autocast_begin(c->autocast) == TORC_OK, "autocast");
    torc_tensor *y = torc_module_forward(c->m, c->x);
    if (ac) {
        check(torc_autocast_end() == TORC_OK, "autocast");
        y = y ? torc_to_dtype(y, TORC_DTYPE_F32) : NULL;
    }
    torc_tensor *loss = y ? torc_mse_loss(y, c->target) : NULL;
    check(loss && torc_backward(loss, NULL, false) == TORC_OK, "Cruncher forward+backward");
    check(torc_optimizer_step(c->opt) == TORC_OK, "optimizer step");
    torc_scope_pop();
}

// The matmul FLOPs torc counted since torc_flops_reset, forward and backward, all dtypes.
static double matmul_flops(void) {
    double f = 0;
    for (int ph = TORC_PHASE_FORWARD; ph <= TORC_PHASE_BACKWARD; ph++)
        f += (double)torc_flops((torc_phase)ph, TORC_OP_MATMUL, -1) + (double)torc_flops((torc_phase)ph, TORC_OP_MATMUL_ROUNDED, -1);
    return f;
}

static void cruncher_setup(cruncher_ctx *c, int64_t D, int L, int64_t B, const char *opt_name, torc_dtype autocast) {
    torc_generator *gen = torc_generator_new(0);  // every model starts from the same weights
    check(gen != NULL, "torc_generator_new");
    memset(c, 0, sizeof *c);
    c->autocast = autocast;
    c->m = torc_cruncher_new(D, L, TORC_DTYPE_F32, gen);
    check(c->m != NULL, "torc_cruncher_new");
    const int np = torc_module_param_count(c->m);
    torc_tensor *params[64];
    for (int i = 0; i < np && i < 64; i++) params[i] = torc_module_param(c->m, i);
    c->opt = torc_optimizer_new(opt_name, np, params, "lr=0.001");
    check(c->opt != NULL, "torc_optimizer_new");
    c->x = torc_randn(TORC_SHAPE(B, D), TORC_DTYPE_F32, gen);
    c->target = torc_randn(TORC_SHAPE(B), TORC_DTYPE_F32, gen);
    check(c->x && c->target, "randn");
    torc_generator_free(gen);
}

static void cruncher_teardown(cruncher_ctx *c) {
    torc_release(c->x);
    torc_release(c->target);
    torc_optimizer_free(c->opt);
    torc_module_free(c->m);
}

static double cruncher_timed_step(cruncher_ctx *c) {
    const double s0 = now_s();
    cruncher_step(c);
    sync_dev();
    return now_s() - s0;
}

#define CRUNCHER_MAX_SET 3
#define CRUNCHER_MAX_REPS 1000

// The median step time of an optimizer's Cruncher in each of n autocast dtypes (TORC_DTYPE_F32:
// none) into t[i], timed side by side: one model each, their timed steps taking turns (f32, bf16,
// f16, f32, ...), each synchronized. The ratios between them are the issue's targets, and taking
// turns keeps a drift in the machine's speed (other tenants, clocks) out of the ratios: timed one
// after the other, the D=256 f16 / f32 ratio swung 0.87-1.03 on a shared 2-vCPU Zen 4. flops[i]
// (if not NULL): the matmul FLOPs of one step as torc counted them (the first layer's input
// gradient is never computed: a formula of 3 x the forward counts one GEMM too many, 9% of a
// D=1024 L=4 step).
static void time_cruncher_set(int64_t D, int L, int64_t B, const char *opt_name, int n, const torc_dtype *autocast,
                              double *t, double *flops) {
    cruncher_ctx c[CRUNCHER_MAX_SET];
    double t_one = 0;
    for (int i = 0; i < n; i++) {
        cruncher_setup(&c[i], D, L, B, opt_name, autocast[i]);
        for (int w = 0; w < 3; w++) cruncher_step(&c[i]);  // warm-up: optimizer state, primitive caches
        sync_dev();
        if (flops) {  // one more step, counted
            torc_flops_reset();
            cruncher_step(&c[i]);
            flops[i] = matmul_flops();
        }
        t_one += cruncher_timed_step(&c[i]);
    }
    const int reps = g_opt.tiny ? 3 : reps_for(t_one, g_opt.quick ? 1.0 : 3.0, 5, CRUNCHER_MAX_REPS);
    double *times = malloc(sizeof(double) * (size_t)(n * reps));
    check(times != NULL, "malloc");
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) times[i * reps + r] = cruncher_timed_step(&c[i]);
    for (int i = 0; i < n; i++) {
        t[i] = median(times + i * reps, reps);
        cruncher_teardown(&c[i]);
    }
    free(times);
}

static double time_cruncher(int64_t D, int L, int64_t B, const char *opt_name, torc_dtype autocast, double *flops) {
    double t;
    time_cruncher_set(D, L, B, opt_name, 1, &autocast, &t, flops);
    return t;
}

// ---- --optim-step: the optimizer step alone ----
// torc_optimizer_step over a Cruncher's parameters (D x D per layer, D x 1 final), with the
// gradients of one forward+backward on a batch of B left in place: 3 warm-up steps (they make the
// optimizer state), then timed steps, each synchronized. Then the whole training step with that
// optimizer (time_cruncher). Both in f32.
static void optim_step_bench(const char *name, int64_t D, int L, int64_t B) {
    torc_generator *gen = torc_generator_new(0);
    torc_module *m = torc_cruncher_new(D, L, TORC_DTYPE_F32, gen);
    check(m != NULL, "torc_cruncher_new");
    const int np = torc_module_param_count(m);
    check(np > 0 && np <= 64, "Cruncher parameters");
    torc_tensor *params[64];
    int64_t numel = 0;
    for (int i = 0; i < np; i++) numel += torc_numel(params[i] = torc_module_param(m, i));
    torc_optimizer *opt = torc_optimizer_new(name, np, params, "lr=0.001");
    check(opt != NULL, "torc_optimizer_new");
    torc_scope_push();
    torc_tensor *x = torc_randn(TORC_SHAPE(B, D), TORC_DTYPE_F32, gen), *y = torc_randn(TORC_SHAPE(B), TORC_DTYPE_F32, gen);
    torc_tensor *loss = x && y ? torc_mse_loss(torc_module_forward(m, x), y) : NULL;
    check(loss && torc_backward(loss, NULL, false) == TORC_OK, "Cruncher forward+backward");
    torc_scope_pop();
    for (int i = 0; i < 3; i++) check(torc_optimizer_step(opt) == TORC_OK, "optimizer step");
    sync_dev();
    double t0 = now_s();
    check(torc_optimizer_step(opt) == TORC_OK, "optimizer step");
    sync_dev();
    const int reps = g_opt.tiny ? 3 : reps_for(now_s() - t0, g_opt.quick ? 1.0 : 3.0, 5, 50);
    double t[64], lo = HUGE_VAL, hi = 0;
    for (int r = 0; r < reps; r++) {
        t0 = now_s();
        check(torc_optimizer_step(opt) == TORC_OK, "optimizer step");
        sync_dev();
        t[r] = now_s() - t0;
        lo = t[r] < lo ? t[r] : lo;
        hi = t[r] > hi ? t[r] : hi;
    }
    const double med = median(t, reps);
    char key[64];
    snprintf(key, sizeof key, "optim_step_%s_%lld_%d_ms", name, (long long)D, L);
    put(key, med * 1e3);
    say("optimizer step alone: %s over the Cruncher's %d parameters (D=%lld L=%d, %lld elements, f32): median %.3f ms "
        "(min %.3f, max %.3f over %d steps)\n", name, np, (long long)D, L, (long long)numel, med * 1e3, lo * 1e3,
        hi * 1e3, reps);
    torc_optimizer_free(opt);
    torc_module_free(m);
    torc_generator_free(gen);
    const double tc = time_cruncher(D, L, B, name, TORC_DTYPE_F32, NULL);
    snprintf(key, sizeof key, "cruncher_%lld_%d_%lld_%s_f32_ms", (long long)D, L, (long long)B, name);
    put(key, tc * 1e3);
    say("Cruncher training step: D=%lld L=%d B=%lld %s f32: median %.3f ms\n", (long long)D, L, (long long)B, name,
        tc * 1e3);
}

// ---- the peers: tools/bench_peer.py, and OpenBLAS and BLIS from C ----
// Runs argv (a peer printing one flat JSON object) with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
// removed from the child's environment only (so OpenBLAS picks its own kernels and cache sizes)
// and returns its stdout; NULL when it failed.
// run_child: the same for a child of torc's own (peer false): the environment left as it is but
// for TORC_NUM_THREADS set to threads (when > 0).
static char *run_child(char *const argv[], bool peer, int threads) {
    int fds[2];
    if (pipe(fds)) bench_die("pipe failed: %s", strerror(errno));
    fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) bench_die("fork failed: %s", strerror(errno));
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        if (peer) {
            unsetenv("OPENBLAS_CORETYPE");
            unsetenv("OPENBLAS_L2_SIZE");
        }
        if (threads > 0) {
            char tb[16];
            snprintf(tb, sizeof tb, "%d", threads);
            setenv("TORC_NUM_THREADS", tb, 1);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "torc-bench: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    ssize_t got;
    while (buf && (got = read(fds[0], buf + n, cap - n - 1)) > 0) {
        n += (size_t)got;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!buf) bench_die("out of memory");
    buf[n] = '\0';
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "torc-bench: the peer (%s %s) failed (status %d)%s\n", argv[0], argv[1],
                WIFEXITED(status) ? WEXITSTATUS(status) : -1, strstr(argv[0], "python") ? "; is PyTorch installed?" : "");
        free(buf);
        return NULL;
    }
    return buf;
}

static char *run_peer(char *const argv[]) { return run_child(argv, true, 0); }

// --blas-peer: f32 GEMM (C = A B, row-major n x n) through OpenBLAS's cblas_sgemm and BLIS's
// bli_sgemm, each loaded with dlopen as the distribution ships it (libopenblas.so.0,
// libblis.so.4; Debian: libopenblas0-openmp, libblis4-openmp), each on --threads threads and
// timed as time_matmul times torc. Prints one flat JSON object (a library that does not load is
// named with dlerror's reason instead of figures). Runs in a child of its own, so neither
// library's threads or kernel choice touch the process that times torc.
typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                               const float *b, int ldb, float beta, float *c, int ldc);
typedef void (*bli_sgemm_fn)(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *alpha, const float *a,
                             int64_t rsa, int64_t csa, const float *b, int64_t rsb, int64_t csb, const float *beta,
                             float *c, int64_t rsc, int64_t csc);
typedef struct blas_lib {
    const char *name, *soname;
    cblas_sgemm_fn cblas;  // OpenBLAS
    bli_sgemm_fn bli;      // BLIS
} blas_lib;

static void blas_call(const blas_lib *l, int64_t n, const float *a, const float *b, float *c) {
    const float one = 1.0f, zero = 0.0f;
    if (l->cblas) l->cblas(101 /* CblasRowMajor */, 111, 111 /* CblasNoTrans */, (int)n, (int)n, (int)n, 1.0f, a,
                           (int)n, b, (int)n, 0.0f, c, (int)n);
    else l->bli(0, 0 /* BLIS_NO_TRANSPOSE */, n, n, n, &one, a, n, 1, b, n, 1, &zero, c, n, 1);
}

static int blas_peer_main(void) {
    blas_lib libs[] = {{"openblas", "libopenblas.so.0", NULL, NULL}, {"blis", "libblis.so.4", NULL, NULL}};
    // Where oneDNN is capped to AVX2 or below (the AVX2 family emulated on a bigger CPU), OpenBLAS is
    // capped alike: its Haswell kernels (AVX2 + FMA) instead of what the CPU has. BLIS cannot be
    // capped that way (Debian's build aborts on most BLIS_ARCH_TYPE values); its choice is printed.
    const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
    if (cap && (!strcasecmp(cap, "AVX2") || !strcasecmp(cap, "AVX"))) setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    else if (cap && !strcasecmp(cap, "SSE41")) setenv("OPENBLAS_CORETYPE", "Nehalem", 1);
    printf("{\n \"blas_threads\": %d", g_opt.threads);
    for (size_t li = 0; li < sizeof libs / sizeof libs[0]; li++) {
        blas_lib *l = &libs[li];
        void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
        const char *why = NULL;
        if (!h) {
            why = dlerror();
        } else if (li == 0) {
            l->cblas = (cblas_sgemm_fn)dlsym(h, "cblas_sgemm");
            void (*set)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
            char *(*core)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
            if (!l->cblas || !set) why = "no cblas_sgemm / openblas_set_num_threads";
            else set(g_opt.threads);
            if (core) printf(",\n \"openblas_core\": \"%s\"", core());
        } else {
            l->bli = (bli_sgemm_fn)dlsym(h, "bli_sgemm");
            void (*set)(int64_t) = (void (*)(int64_t))dlsym(h, "bli_thread_set_num_threads");
            int (*arch)(void) = (int (*)(void))dlsym(h, "bli_arch_query_id");
            const char *(*arch_name)(int) = (const char *(*)(int))dlsym(h, "bli_arch_string");
            if (!l->bli || !set) why = "no bli_sgemm / bli_thread_set_num_threads";
            else set(g_opt.threads);  // BLIS runs one thread unless told
            if (arch && arch_name) printf(",\n \"blis_arch\": \"%s\"", arch_name(arch()));
        }
        if (why) {
            printf(",\n \"%s\": \"not timed: ", l->name);
            for (const char *p = why; *p; p++) putchar(*p == '"' || *p == '\\' ? '\'' : *p);
            printf("\"");
            continue;
        }
        for (int si = 0; si < g_opt.n_sizes; si++) {
            const int64_t n = g_opt.sizes[si];
            float *a = malloc(sizeof(float) * (size_t)(n * n)), *b = malloc(sizeof(float) * (size_t)(n * n)),
                  *c = malloc(sizeof(float) * (size_t)(n * n));
            if (!a || !b || !c) bench_die("out of memory");
            for (int64_t i = 0; i < n * n; i++) a[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f, b[i] = a[i] * 0.5f;
            double t_warm = 0, t[16];
            for (int w = 0; w < 2; w++) {
                const double t0 = now_s();
                blas_call(l, n, a, b, c);
                t_warm = now_s() - t0;
            }
            const int reps = g_opt.tiny ? 3 : reps_for(t_warm, g_opt.quick ? 0.5 : 1.5, 3, g_opt.quick ? 7 : 15);
            for (int r = 0; r < reps; r++) {
                const double t0 = now_s();
                blas_call(l, n, a, b, c);
                t[r] = now_s() - t0;
            }
            printf(",\n \"%s_matmul_f32_%lld_gflops\": %.6g", l->name, (long long)n, 2.0 * (double)(n * n * n) / median(t, reps) * 1e-9);
            free(a), free(b), free(c);
        }
    }
    printf("\n}\n");
    return 0;
}

// The peer prints one flat JSON object; its numbers are kept, its strings skipped.
static int parse_flat_json(const char *s, result *out, int max) {
    int n = 0;
    while (*s && *s != '{') s++;
    if (*s) s++;
    for (;;) {
        while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r' || *s == ',') s++;
        if (*s != '"') break;
        const char *k = ++s;
        while (*s && *s != '"') s++;
        if (!*s) break;
        const int klen = (int)(s - k);
        s++;
        while (*s == ' ' || *s == ':') s++;
        if (*s == '"') {  // a string value
            s++;
            while (*s && *s != '"') s += *s == '\\' && s[1] ? 2 : 1;
            if (*s) s++;
            continue;
        }
        char *end;
        const double v = strtod(s, &end);
        if (end == s) break;
        s = end;
        if (n < max) {
            snprintf(out[n].key, sizeof out[n].key, "%.*s", klen, k);
            out[n++].value = v;
        }
    }
    return n;
}

static const char *find_peer_script(void) {
    if (g_opt.peer_script) return g_opt.peer_script;
    if (access(TORC_BENCH_PEER_SCRIPT, R_OK) == 0) return TORC_BENCH_PEER_SCRIPT;
    if (TORC_BENCH_PEER_SCRIPT_INSTALLED[0] && access(TORC_BENCH_PEER_SCRIPT_INSTALLED, R_OK) == 0)
        return TORC_BENCH_PEER_SCRIPT_INSTALLED;
    return "tools/bench_peer.py";
}

// ---- the issue's targets, each a ratio taken in one run next to the peer ----
typedef struct target {
    const char *what;       // what the ratio compares
    const char *torc_key, *peer_key;  // peer_key NULL: against torc's own figure torc2_key
    const char *torc2_key;
    bool higher_better;     // GFLOP/s (ratio >= goal) or time (ratio <= goal)
    double goal;
    const char *meaning;
    int amx;                // 0: every CPU; 1: only where the CPU has AMX; -1: only where it has not
} target;

// "best_f32_<n>_gflops" is the fastest of PyTorch, numpy, OpenBLAS and BLIS in the round (peer_round).
static const target g_targets[] = {
    {"f32 matmul 512 / FMA-loop peak", "matmul_f32_512_gflops", NULL, "fma_peak_f32_gflops", true, 0.6,
     "torc's f32 GEMM against the FMA throughput this CPU reaches in a loop", 0},
    {"f32 matmul 1024 / FMA-loop peak", "matmul_f32_1024_gflops", NULL, "fma_peak_f32_gflops", true, 0.85,
     "the same at 1024", 0},
    {"f32 matmul 2048 / FMA-loop peak", "matmul_f32_2048_gflops", NULL, "fma_peak_f32_gflops", true, 0.85,
     "the same at 2048", 0},
    {"f32 matmul 4096 / FMA-loop peak", "matmul_f32_4096_gflops", NULL, "fma_peak_f32_gflops", true, 0.85,
     "the same at 4096 (not in --quick)", 0},
    {"f32 matmul 1024 / best peer", "matmul_f32_1024_gflops", "best_f32_1024_gflops", NULL, true, 1.0,
     "against the fastest of torch.mm, numpy, OpenBLAS and BLIS (from C) in the round", 0},
    {"f32 matmul 2048 / best peer", "matmul_f32_2048_gflops", "best_f32_2048_gflops", NULL, true, 1.0,
     "the same at 2048", 0},
    {"f32 matmul 4096 / best peer", "matmul_f32_4096_gflops", "best_f32_4096_gflops", NULL, true, 1.0,
     "the same at 4096 (not in --quick)", 0},
    {"f32 matmul 2048 / OpenBLAS (C)", "matmul_f32_2048_gflops", "openblas_matmul_f32_2048_gflops", NULL, true, 0,
     "(no target) cblas_sgemm of the distribution's OpenBLAS, its own kernel choice", 0},
    {"f32 matmul 2048 / BLIS (C)", "matmul_f32_2048_gflops", "blis_matmul_f32_2048_gflops", NULL, true, 0,
     "(no target) bli_sgemm of the distribution's BLIS, its own kernel choice", 0},
    {"f32 matmul 2048 / PyTorch", "matmul_f32_2048_gflops", "matmul_f32_2048_gflops", NULL, true, 0,
     "(no target) torch.mm", 0},
    {"Cruncher 1024x4 B=512 SGD f32 matmuls / FMA peak", "cruncher_1024_4_512_sgd_f32_gflops", NULL,
     "fma_peak_f32_gflops", true, 0.8, "the step's matmul FLOPs over its whole time, against the FMA loop", 0},
    {"bf16 matmul 2048 / torc f32 matmul 2048", "matmul_bf16_2048_gflops", NULL, "matmul_f32_2048_gflops", true, 8.0,
     "what AMX gives over f32 FMAs", 1},
    {"bf16 AMX-loop peak / f32 FMA-loop peak", "amx_peak_bf16_gflops", NULL, "fma_peak_f32_gflops", true, 0,
     "(no target) the ceiling of the line above: tile multiplies against FMAs, no loads", 1},
    {"bf16 matmul 2048 / AMX-loop peak", "matmul_bf16_2048_gflops", NULL, "amx_peak_bf16_gflops", true, 0,
     "(no target) torc's bf16 GEMM against the tile-multiply throughput reached in a loop", 1},
    {"bf16 dot-product loop / f32 FMA-loop peak", "dpbf16_peak_bf16_gflops", NULL, "fma_peak_f32_gflops", true, 0,
     "(no target) the ceiling of bf16 / f32 on AVX512-BF16 dot products", -1},
    {"bf16 matmul 2048 / torc f32 matmul 2048", "matmul_bf16_2048_gflops", NULL, "matmul_f32_2048_gflops", true, 0,
     "(no target) bf16 GEMM against f32 GEMM without AMX", -1},
    {"f16 matmul 2048 / torc f32 matmul 2048", "matmul_f16_2048_gflops", NULL, "matmul_f32_2048_gflops", true, 0,
     "(no target) f16 GEMM (f32 FMAs on every CPU torc knows) against f32 GEMM", 0},
    {"bf16 matmul 2048 / PyTorch bf16", "matmul_bf16_2048_gflops", "matmul_bf16_2048_gflops", NULL, true, 1.5,
     "torc's bf16 GEMM against torch.mm (oneDNN: AMX where the CPU has it)", 0},
    {"x + y 4x4 per call", "add_4x4_us", "add_4x4_us", NULL, false, 0.2, "dispatch overhead of one tiny op", 0},
    {"tiny forward+backward", "tiny_fwd_bwd_us", "tiny_fwd_bwd_us", NULL, false, 0.1,
     "relu(x @ w).sum().backward() on 4x4: autograd bookkeeping", 0},
    {"Cruncher 1024x4 B=512 SGD f32 step", "cruncher_1024_4_512_sgd_f32_ms", "cruncher_1024_4_512_sgd_f32_ms", NULL,
     false, 0.7, "a training step dominated by GEMMs", 0},
    {"Cruncher 256x2 B=64 SGD f32 step", "cruncher_256_2_64_sgd_f32_ms", "cruncher_256_2_64_sgd_f32_ms", NULL, false,
     0.3, "a small step: framework overhead shows", 0},
    {"Cruncher 1024x4 B=512 Adam f32 step", "cruncher_1024_4_512_adam_f32_ms", "cruncher_1024_4_512_adam_f32_ms", NULL,
     false, 0, "(no target)", 0},
    {"Cruncher 256x2 B=64 Adam f32 step", "cruncher_256_2_64_adam_f32_ms", "cruncher_256_2_64_adam_f32_ms", NULL, false,
     0, "(no target)", 0},
    {"Cruncher 1024x4 B=512 SGD bf16 autocast step", "cruncher_1024_4_512_sgd_bf16_ms", "cruncher_1024_4_512_sgd_bf16_ms",
     NULL, false, 0.7, "bf16 matmuls, f32 master weights, against torch.autocast's step", 0},
    {"Cruncher 1024x4 B=512 SGD bf16 / f32 step", "cruncher_1024_4_512_sgd_bf16_ms", NULL,
     "cruncher_1024_4_512_sgd_f32_ms", false, 1.0 / 3.0, "what bf16 autocast buys a GEMM-bound step on AMX (>= 3x)", 1},
    {"Cruncher 1024x4 B=512 SGD bf16 / f32 step", "cruncher_1024_4_512_sgd_bf16_ms", NULL,
     "cruncher_1024_4_512_sgd_f32_ms", false, 1.0, "without AMX: bf16 autocast never slower than f32", -1},
    {"Cruncher 256x2 B=64 SGD bf16 / f32 step", "cruncher_256_2_64_sgd_bf16_ms", NULL, "cruncher_256_2_64_sgd_f32_ms",
     false, 1.0, "the same on the small step", -1},
    {"Cruncher 1024x4 B=512 SGD f16 / f32 step", "cruncher_1024_4_512_sgd_f16_ms", NULL,
     "cruncher_1024_4_512_sgd_f32_ms", false, 1.0, "without AMX: f16 autocast never slower than f32", -1},
    {"Cruncher 256x2 B=64 SGD f16 / f32 step", "cruncher_256_2_64_sgd_f16_ms", NULL, "cruncher_256_2_64_sgd_f32_ms",
     false, 1.0, "the same on the small step", -1},
    {"Cruncher 256x2 B=64 SGD bf16 autocast step", "cruncher_256_2_64_sgd_bf16_ms", "cruncher_256_2_64_sgd_bf16_ms", NULL,
     false, 0, "(no target)", 0},
};
#define N_TARGETS (int)(sizeof g_targets / sizeof g_targets[0])

static const char *unit_of(const char *key) {
    return strstr(key, "gflops") ? "GFLOP/s" : strstr(key, "_us") ? "us" : "ms";
}

// Target i in round r: torc's figure, the peer's (or torc's own second figure) and their ratio;
// false when a figure is missing.
static bool target_round(int i, const round_res *rr, double *tv, double *pv, double *ratio) {
    const target *t = &g_targets[i];
    if (!get(rr->torc, rr->nt, t->torc_key, tv)) return false;
    if (t->peer_key ? !get(rr->peer, rr->np, t->peer_key, pv) : !get(rr->torc, rr->nt, t->torc2_key, pv)) return false;
    if (!(*pv > 0)) return false;
    *ratio = *tv / *pv;
    return true;
}

// Target i over the rounds: the median of each column and of the per-round ratios (each in
// r[0..n), in round order); false when no round has both figures.
typedef struct target_sum {
    double torc, peer, ratio, r[MAX_ROUNDS];
    int n;
    bool met;
} target_sum;

static bool target_applies(const target *t) { return t->amx == 0 || (t->amx > 0) == g_amx; }

static bool target_eval(int i, target_sum *ts) {
    double tv[MAX_ROUNDS], pv[MAX_ROUNDS], ratio[MAX_ROUNDS];
    ts->n = 0;
    if (!target_applies(&g_targets[i])) return false;
    for (int r = 0; r < g_n_rounds; r++)
        if (target_round(i, &g_rounds[r], &tv[ts->n], &pv[ts->n], &ratio[ts->n])) {
            ts->r[ts->n] = ratio[ts->n];
            ts->n++;
        }
    if (ts->n == 0) return false;
    ts->torc = median(tv, ts->n);
    ts->peer = median(pv, ts->n);
    ts->ratio = median(ratio, ts->n);
    const target *t = &g_targets[i];
    ts->met = t->goal == 0 || (t->higher_better ? ts->ratio >= t->goal : ts->ratio <= t->goal);
    return true;
}

static void print_targets(const torc_device_info *info) {
    printf("\nside by side with the peer on %s (%s%s; ratio = torc / peer, taken within a round", info->name,
           g_amx ? "AMX" : "no AMX", g_opt.cpu_time ? "; timed by CPU time over threads" : "; wall time");
    if (g_n_rounds > 1) printf(";\nwith %d rounds each column is the rounds' median, the ratio the median of the rounds' ratios", g_n_rounds);
    printf("):\n");
    printf("%-44s %14s %20s %8s %8s  %s\n", "comparison", "torc", "peer", "ratio", "goal", "status");
    for (int i = 0; i < N_TARGETS; i++) {
        const target *t = &g_targets[i];
        target_sum ts;
        if (!target_applies(t)) continue;
        if (!target_eval(i, &ts)) {
            printf("%-44s %14s %20s %8s %8s  %s\n", t->what, "-", "-", "-", "-", "not measured");
            continue;
        }
        char tb[32], pb[40], gb[16] = "-";
        snprintf(tb, sizeof tb, "%.4g %s", ts.torc, unit_of(t->torc_key));
        const char *own = t->peer_key               ? ""
                          : strstr(t->torc2_key, "fma") ? "FMA peak "
                          : strstr(t->torc2_key, "amx") ? "AMX peak "
                                                        : "torc f32 ";
        snprintf(pb, sizeof pb, "%s%.4g %s", own, ts.peer, unit_of(t->torc_key));
        if (t->goal > 0) snprintf(gb, sizeof gb, "%s %.3g", t->higher_better ? ">=" : "<=", t->goal);
        printf("%-44s %14s %20s %8.3g %8s  %s\n", t->what, tb, pb, ts.ratio, gb, t->goal == 0 ? "-" : ts.met ? "met" : "NOT MET");
        printf("    %s", t->meaning);
        if (ts.n > 1) {
            printf("; rounds:");
            for (int k = 0; k < ts.n; k++) printf(" %.3g", ts.r[k]);
        }
        printf("\n");
    }
}

// ---- --json ----
static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        if ((unsigned char)*s >= 0x20) putchar(*s);
    }
    putchar('"');
}

static void json_results(const result *r, int n) {
    printf("{");
    for (int i = 0; i < n; i++) printf("%s\n   \"%s\": %.6g", i ? "," : "", r[i].key, r[i].value);
    printf("}");
}

static void print_json(const torc_device_info *info, const char *isa, int threads) {
    printf("{\n \"backend\": ");
    json_str(torc_device_backend_name(g_dev));
    printf(",\n \"device\": ");
    json_str(info->name);
    printf(",\n \"peak_source\": ");
    json_str(info->peak_source);
    printf(",\n \"fma_isa\": ");
    json_str(isa);
    printf(",\n \"threads\": %d,\n \"promised_peak_flops\": {", threads);
    for (int d = 0, first = 1; d < TORC_DTYPE_COUNT; d++)
        if (info->peak_flops[d] > 0) printf("%s\"%s\": %.6g", first ? "" : ", ", torc_dtype_short_name((torc_dtype)d), info->peak_flops[d]), first = 0;
    printf("},\n \"rounds\": [");
    for (int r = 0; r < g_n_rounds; r++) {
        printf("%s\n  {\"results\": ", r ? "," : "");
        json_results(g_rounds[r].torc, g_rounds[r].nt);
        if (g_opt.peer) {
            printf(",\n   \"peer\": ");
            json_results(g_rounds[r].peer, g_rounds[r].np);
        }
        printf("}");
    }
    printf("\n ]");
    if (g_opt.peer) {
        printf(",\n \"targets\": [");
        for (int i = 0, first = 1; i < N_TARGETS; i++) {
            target_sum ts;
            if (!target_eval(i, &ts)) continue;
            printf("%s\n  {\"comparison\": ", first ? "" : ",");
            json_str(g_targets[i].what);
            printf(", \"torc\": %.6g, \"peer\": %.6g, \"ratio\": %.6g, \"round_ratios\": [", ts.torc, ts.peer, ts.ratio);
            for (int k = 0; k < ts.n; k++) printf("%s%.6g", k ? ", " : "", ts.r[k]);
            printf("]");
            if (g_targets[i].goal > 0) printf(", \"goal\": \"%s %.3g\", \"met\": %s", g_targets[i].higher_better ? ">=" : "<=",
                                              g_targets[i].goal, ts.met ? "true" : "false");
            printf("}");
            first = 0;
        }
        printf("\n ]");
    }
    printf("\n}\n");
}

// ---- --gpt: the GPT training step beside PyTorch's eager twin ----
// core/gpt.c's step as tools/train_gpt.c takes it (forward with targets, loss.item(), backward,
// clip_grad_norm_(1.0), AdamW with weight decay 0.1 on the 2-D parameters, zero_grad), timed in
// a child process per configuration, thread count and round (this program as --gpt-child), then
// its twin in tools/bench_peer.py --gpt, the two taking turns. Children of their own so that each
// peak RSS is one framework's alone and the thread count is set before a backend loads.
static const gpt_cfg gpt_cfg_A = {"A", 4, 4, 256, 50257, 256, 4};  // GPT-2's vocabulary
static const gpt_cfg gpt_cfg_B = {"B", 6, 6, 384, 256, 256, 4};    // byte-level
static const gpt_cfg gpt_cfg_tiny = {"tiny", 2, 2, 32, 96, 32, 2}; // --tiny: a smoke run

static bool gpt_parse_cfg(const char *s, gpt_cfg *c) {
    long long v[6];
    if (sscanf(s, "%lld,%lld,%lld,%lld,%lld,%lld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) return false;
    for (int i = 0; i < 6; i++)
        if (v[i] < 1) return false;
    *c = (gpt_cfg){"custom", v[0], v[1], v[2], v[3], v[4], v[5]};
    return c->C % c->NH == 0;
}

static void gpt_cfg_str(const gpt_cfg *c, char *buf, size_t len) {
    snprintf(buf, len, "%lld,%lld,%lld,%lld,%lld,%lld", (long long)c->L, (long long)c->NH, (long long)c->C,
             (long long)c->V, (long long)c->T, (long long)c->B);
}

static long rss_now_kb(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static long rss_peak_kb(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? 0 : ru.ru_maxrss;  // KiB on Linux
}

// The FLOPs torc counted since torc_flops_reset: every op's, and the matmuls' (fused attention's
// included: its two products are what its count is made of).
static double gpt_flops(bool matmuls_only) {
    static const int mm[] = {TORC_OP_MATMUL, TORC_OP_MATMUL_ROUNDED, TORC_OP_ATTENTION, TORC_OP_ATTENTION_BACKWARD};
    double f = 0;
    for (int ph = TORC_PHASE_FORWARD; ph <= TORC_PHASE_BACKWARD; ph++) {
        if (!matmuls_only) f += (double)torc_flops((torc_phase)ph, -1, -1);
        else
            for (size_t k = 0; k < sizeof mm / sizeof mm[0]; k++) f += (double)torc_flops((torc_phase)ph, mm[k], -1);
    }
    return f;
}

typedef struct gpt_run {
    torc_gpt *m;
    torc_optimizer *opt;
    torc_tensor **params;  // borrowed from m
    int n;
    torc_dtype autocast;   // TORC_DTYPE_F32: none
} gpt_run;

static void gpt_setup(gpt_run *r, const gpt_cfg *c, torc_dtype autocast) {
    torc_gpt_config cfg = {c->V, 0, c->T, c->L, c->NH, c->C, 0.0, true};
    torc_generator *gen = torc_generator_new(0);
    check(gen != NULL, "torc_generator_new");
    r->m = torc_gpt_new(&cfg, gen);
    check(r->m != NULL, "torc_gpt_new");
    torc_generator_free(gen);
    r->n = torc_gpt_param_count(r->m);
    r->params = malloc(sizeof *r->params * (size_t)r->n);
    const char **names = malloc(sizeof *names * (size_t)r->n);
    check(r->params && names, "malloc");
    for (int i = 0; i < r->n; i++) r->params[i] = torc_gpt_param(r->m, i), names[i] = torc_gpt_param_name(r->m, i);
    r->opt = torc_optimizer_new_decay_groups("adamw", r->n, names, r->params, "lr=0.001 betas=0.9,0.95", 0.1, NULL,
                                             NULL, NULL);
    check(r->opt != NULL, "AdamW");
    free(names);
    r->autocast = autocast;
}

static void gpt_teardown(gpt_run *r) {
    torc_optimizer_free(r->opt);
    torc_gpt_free(r->m);
    free(r->params);
}

// One training step on (x, y); its loss.
static double gpt_step(gpt_run *r, const torc_tensor *x, const torc_tensor *y) {
    torc_scope_push();
    const bool ac = r->autocast != TORC_DTYPE_F32;
    torc_tensor *loss = NULL;
    if (ac) check(torc_autocast_begin(r->autocast) == TORC_OK, "autocast");
    check(torc_gpt_forward(r->m, x, y, NULL, NULL, &loss) == TORC_OK, "GPT forward");
    if (ac) check(torc_autocast_end() == TORC_OK, "autocast");
    double v;
    check(torc_item(loss, &v) == TORC_OK, "loss.item()");
    check(torc_backward(loss, NULL, false) == TORC_OK, "GPT backward");
    check(torc_clip_grad_norm_(r->n, r->params, 1.0, 2.0, false) != NULL, "clip_grad_norm_");
    check(torc_optimizer_step(r->opt) == TORC_OK, "AdamW step");
    check(torc_optimizer_zero_grad(r->opt, true) == TORC_OK, "zero_grad");
    torc_scope_pop();
    return v;
}

// --gpt-child L,NH,C,V,T,B: the steps of each dtype of --gpt-dtypes (one model each, their timed
// steps taking turns), as one flat JSON object bench_peer.py's keys match: gpt_<dt>_step_ms (and
// _min_ms), rss_base_kb (after the backend loaded), rss_peak_<dt>_kb (the first dtype's, after its
// warm-up, before a second model exists); torc's own: gpt_<dt>_flops and _mm_flops (one step),
// gpt_<dt>_act_peak_b (the activations' peak of one step) and the first dtype's peaks by tag.
// The step's batch: B x T random tokens and targets, the same in every process.
static void gpt_batch(const gpt_cfg *c, torc_tensor **x, torc_tensor **y) {
    torc_generator *gen = torc_generator_new(1);
    *x = torc_randint(0, c->V, TORC_SHAPE(c->B, c->T), TORC_DTYPE_I64, gen);
    *y = torc_randint(0, c->V, TORC_SHAPE(c->B, c->T), TORC_DTYPE_I64, gen);
    check(*x && *y, "randint");
    torc_generator_free(gen);
}

static int gpt_child_main(const gpt_cfg *c) {
    g_dev = g_opt.backend ? torc_device_get(g_opt.backend) : torc_default_device();
    if (!g_dev) bench_die("cannot load backend: %s", torc_last_error());
    torc_set_default_device(g_dev);
    const long base = rss_now_kb();
    torc_tensor *x, *y;
    gpt_batch(c, &x, &y);
    const int nd = g_opt.n_gpt_dtypes;
    gpt_run runs[2];
    printf("{\n \"rss_base_kb\": %ld", base);
    for (int i = 0; i < nd; i++) {
        const torc_dtype dt = g_opt.gpt_dtypes[i];
        const char *dn = torc_dtype_short_name(dt);
        gpt_setup(&runs[i], c, dt);
        double loss = 0;
        for (int w = 0; w < g_opt.gpt_warmup; w++) {
            if (w == g_opt.gpt_warmup - 1) {  // the last warm-up step, optimizer state made: counted
                sync_dev();
                torc_memory_reset_peak(g_dev);
                torc_flops_reset();
            }
            loss = gpt_step(&runs[i], x, y);
        }
        torc_memory_stats ms;
        check(torc_memory_stats_get(g_dev, &ms) == TORC_OK, "memory stats");
        printf(",\n \"gpt_%s_flops\": %.6g,\n \"gpt_%s_mm_flops\": %.6g,\n \"gpt_%s_act_peak_b\": %.6g,\n \"gpt_%s_loss\": %.6g",
               dn, gpt_flops(false), dn, gpt_flops(true), dn, (double)ms.peak[TORC_MEM_ACTIVATION], dn, loss);
        if (i == 0)
            printf(",\n \"rss_peak_%s_kb\": %ld,\n \"mem_total_peak_b\": %.6g,\n \"mem_param_b\": %.6g,\n"
                   " \"mem_grad_peak_b\": %.6g,\n \"mem_optim_b\": %.6g",
                   dn, rss_peak_kb(), (double)ms.total_peak, (double)ms.peak[TORC_MEM_PARAMETER],
                   (double)ms.peak[TORC_MEM_GRADIENT], (double)ms.peak[TORC_MEM_OPTIMIZER_STATE]);
    }
    const int steps = g_opt.gpt_steps;
    // Each timed step traced: the share of its wall time its matmuls spent in the backend
    // (torc_op_trace_seconds) times its time on the bench's clock (CPU time under --cpu-time, which
    // other tenants' load leaves alone) is the matmuls' time in the step.
    double *t = malloc(sizeof *t * (size_t)(nd * steps)), *mm = malloc(sizeof *mm * (size_t)(nd * steps));
    check(t && mm, "malloc");
    for (int s = 0; s < steps; s++)
        for (int i = 0; i < nd; i++) {
            torc_op_trace_start();
            const double w0 = wall_s(), t0 = now_s();
            gpt_step(&runs[i], x, y);
            sync_dev();
            t[i * steps + s] = now_s() - t0;
            const double wall = wall_s() - w0;
            torc_op_trace_stop();
            const double mm_wall = torc_op_trace_seconds(TORC_OP_MATMUL) + torc_op_trace_seconds(TORC_OP_MATMUL_ROUNDED);
            mm[i * steps + s] = wall > 0 ? t[i * steps + s] * mm_wall / wall : NAN;
        }
    for (int i = 0; i < nd; i++) {
        const char *dn = torc_dtype_short_name(g_opt.gpt_dtypes[i]);
        double lo = HUGE_VAL;
        for (int s = 0; s < steps; s++) lo = fmin(lo, t[i * steps + s]);
        printf(",\n \"gpt_%s_step_ms\": %.6g,\n \"gpt_%s_step_min_ms\": %.6g,\n \"gpt_%s_mm_ms\": %.6g", dn,
               median(t + i * steps, steps) * 1e3, dn, lo * 1e3, dn, median(mm + i * steps, steps) * 1e3);
        gpt_teardown(&runs[i]);
    }
    printf("\n}\n");
    free(mm);
    free(t);
    torc_release(x);
    torc_release(y);
    return 0;
}

// The activations' bytes in use now (peak: their peak since the last reset).
static double act_bytes(bool peak) {
    torc_memory_stats ms;
    check(torc_memory_stats_get(g_dev, &ms) == TORC_OK, "memory stats");
    return (double)(peak ? ms.peak[TORC_MEM_ACTIVATION] : ms.in_use[TORC_MEM_ACTIVATION]);
}

// --gpt-extra-child: the sampler's per-token latency with its KV cache at two positions, in f32 and
// under bf16 autocast (torc_gpt_generate of 1 + k tokens less that of 1 token after the same
// prompt, each the fastest of its runs, over k), of config A's model and of B's (--tiny: the tiny
// config), each with block_size 1024 (tiny 128); and the activations' peak of one forward + backward
// at two sequence lengths, of B's model (B = 1) and of torc_scaled_dot_product_attention alone. One
// flat JSON object. Both models' samplers, because how flat a token's time stays in the position is
// a matter of shape: a token reads every weight and the cache, and the cache's share of those bytes
// at 900 positions is 10% for A (its 50257-row head) but 28% for B.
static void gpt_sampler_figures(const gpt_cfg *c, int64_t block, const int64_t pos[2], torc_generator *gen) {
    torc_gpt_config cfg = {c->V, 0, block, c->L, c->NH, c->C, 0.0, true};
    torc_gpt *m = torc_gpt_new(&cfg, gen);
    check(m != NULL, "torc_gpt_new");
    // Each figure: the fastest of the runs of 1 + k tokens less the fastest of the runs of 1, over k. (The
    // median of paired differences over 16 tokens swung 1.1-2.8x for the same build on a shared machine:
    // the prompt's forward, 100-900 positions, dwarfs 16 tokens and carries the noise.) The two
    // positions take turns within each round, so that a change in the machine's load (a token streams
    // tens of MB through a shared L3) falls on both figures of the ratio alike.
    const int64_t k = g_opt.tiny ? 4 : 64;
    const int reps = g_opt.tiny ? 1 : g_opt.quick ? 4 : 6;
    // In f32, and under bf16 autocast (its cache bf16: core/gpt.c).
    for (int a = 0; a < 2; a++) {
        torc_scope_push();
        if (a) check(torc_autocast_begin(TORC_DTYPE_BF16) == TORC_OK, "autocast");
        torc_tensor *prompt[2];
        double one[2] = {HUGE_VAL, HUGE_VAL}, more[2] = {HUGE_VAL, HUGE_VAL};
        for (int p = 0; p < 2; p++) {
            prompt[p] = torc_randint(0, c->V, TORC_SHAPE(1, pos[p]), TORC_DTYPE_I64, gen);
            check(prompt[p] != NULL, "randint");
        }
        for (int r = -1; r < reps; r++)  // r = -1: warm-up
            for (int p = 0; p < 2; p++) {
                torc_scope_push();
                double t0 = now_s();
                check(torc_gpt_generate(m, prompt[p], 1, 0.0, 0, gen) != NULL, "generate");
                sync_dev();
                const double t1 = now_s() - t0;
                t0 = now_s();
                check(torc_gpt_generate(m, prompt[p], 1 + k, 0.0, 0, gen) != NULL, "generate");
                sync_dev();
                const double tk = now_s() - t0;
                torc_scope_pop();
                if (r >= 0) one[p] = fmin(one[p], t1), more[p] = fmin(more[p], tk);
            }
        for (int p = 0; p < 2; p++)
            printf(",\n \"kv_%s_%stoken_%s_ms\": %.6g", c->name, a ? "bf16_" : "", p ? "hi" : "lo",
                   (more[p] - one[p]) / (double)k * 1e3);
        if (a) check(torc_autocast_end() == TORC_OK, "autocast");
        torc_scope_pop();
    }
    torc_gpt_free(m);
}

static int gpt_extra_main(void) {
    g_dev = g_opt.backend ? torc_device_get(g_opt.backend) : torc_default_device();
    if (!g_dev) bench_die("cannot load backend: %s", torc_last_error());
    torc_set_default_device(g_dev);
    const gpt_cfg *c = g_opt.tiny ? &gpt_cfg_tiny : &gpt_cfg_B;
    const int64_t block = g_opt.tiny ? 128 : 1024, pos[2] = {g_opt.tiny ? 12 : 100, g_opt.tiny ? 100 : 900};
    const int64_t Ts[2] = {block / 4, block};
    torc_gpt_config cfg = {c->V, 0, block, c->L, c->NH, c->C, 0.0, true};
    torc_generator *gen = torc_generator_new(0);
    printf("{\n \"kv_block_size\": %lld,\n \"kv_pos_lo\": %lld,\n \"kv_pos_hi\": %lld", (long long)block,
           (long long)pos[0], (long long)pos[1]);
    if (!g_opt.tiny) gpt_sampler_figures(&gpt_cfg_A, block, pos, gen);
    gpt_sampler_figures(c, block, pos, gen);
    torc_gpt *m = torc_gpt_new(&cfg, gen);
    check(m != NULL, "torc_gpt_new");
    for (int i = 0; i < 2; i++) {
        const int64_t T = Ts[i], hs = c->C / c->NH;
        torc_scope_push();
        torc_tensor *x = torc_randint(0, c->V, TORC_SHAPE(1, T), TORC_DTYPE_I64, gen);
        torc_tensor *loss = NULL;
        check(x != NULL, "randint");
        sync_dev();
        double base = act_bytes(false);
        torc_memory_reset_peak(g_dev);
        check(torc_gpt_forward(m, x, x, NULL, NULL, &loss) == TORC_OK && torc_backward(loss, NULL, false) == TORC_OK,
              "GPT forward+backward");
        const double model = act_bytes(true) - base;
        for (int j = 0; j < torc_gpt_param_count(m); j++) torc_set_grad(torc_gpt_param(m, j), NULL);
        torc_tensor *q = torc_randn(TORC_SHAPE(1, c->NH, T, hs), TORC_DTYPE_F32, gen);
        torc_tensor *kk = torc_randn(TORC_SHAPE(1, c->NH, T, hs), TORC_DTYPE_F32, gen);
        torc_tensor *v = torc_randn(TORC_SHAPE(1, c->NH, T, hs), TORC_DTYPE_F32, gen);
        check(q && kk && v, "randn");
        torc_set_requires_grad(q, true), torc_set_requires_grad(kk, true), torc_set_requires_grad(v, true);
        sync_dev();
        base = act_bytes(false);
        torc_memory_reset_peak(g_dev);
        torc_tensor *att = torc_scaled_dot_product_attention(q, kk, v, NULL, 0.0, true, NAN, false, NULL);
        check(att && torc_backward(torc_sum(att, TORC_ALL_DIMS, false), NULL, false) == TORC_OK, "attention");
        const double op = act_bytes(true) - base;
        printf(",\n \"act_model_T%lld_b\": %.6g,\n \"act_attention_T%lld_b\": %.6g", (long long)T, model, (long long)T, op);
        torc_scope_pop();
    }
    printf(",\n \"act_T_lo\": %lld,\n \"act_T_hi\": %lld\n}\n", (long long)Ts[0], (long long)Ts[1]);
    torc_gpt_free(m);
    torc_generator_free(gen);
    return 0;
}

// ---- --gpt-matmuls: the step's matmuls one by one ----
// Each matmul of config c's training step timed alone with its shapes and layouts (forward x @ W,
// the input's gradient dY @ W^T, the weight's X^T @ dY; attention's four products per head as
// batched matmuls), median of timed runs: which of them a step's matmul time goes to, and at what
// rate. Timed in this process (threads: TORC_NUM_THREADS).
typedef struct mm_case {
    const char *what;
    int64_t batch, m, k, n;  // (batch, m, k) @ (batch, k, n)
    bool ta, tb;             // A, B as transposed views of stored (k, m), (n, k)
} mm_case;

static double time_mm_case(const mm_case *mc) {
    torc_scope_push();
    const int64_t b = mc->batch;
    torc_tensor *a = mc->ta ? torc_randn(TORC_SHAPE(b, mc->k, mc->m), TORC_DTYPE_F32, NULL)
                            : torc_randn(TORC_SHAPE(b, mc->m, mc->k), TORC_DTYPE_F32, NULL);
    torc_tensor *w = mc->tb ? torc_randn(TORC_SHAPE(b, mc->n, mc->k), TORC_DTYPE_F32, NULL)
                            : torc_randn(TORC_SHAPE(b, mc->k, mc->n), TORC_DTYPE_F32, NULL);
    check(a && w, "randn");
    if (mc->ta) a = torc_transpose(a, 1, 2);
    if (mc->tb) w = torc_transpose(w, 1, 2);
    if (b == 1) a = torc_select(a, 0, 0), w = torc_select(w, 0, 0);
    double t_warm = 0;
    for (int i = 0; i < 2; i++) t_warm = timed_matmul(a, w);
    const int reps = g_opt.tiny ? 3 : reps_for(t_warm, g_opt.quick ? 0.3 : 1.0, 3, 15);
    double t[16];
    for (int r = 0; r < reps; r++) t[r] = timed_matmul(a, w);
    torc_scope_pop();
    return median(t, reps);
}

static void gpt_matmuls(const gpt_cfg *c) {
    const int64_t M = c->B * c->T, C = c->C, T = c->T, hs = c->C / c->NH, BH = c->B * c->NH, L = c->L;
    const int64_t Vp = (c->V + 127) / 128 * 128;
    // per layer: name, in, out (a Linear (M, in) @ (in, out))
    const struct { const char *name; int64_t in, out, count; } lin[] = {
        {"qkv (c_attn)", C, 3 * C, L}, {"attn proj", C, C, L}, {"mlp c_fc", C, 4 * C, L}, {"mlp c_proj", 4 * C, C, L}};
    say("\nconfig %s: the step's matmuls one at a time (f32, median of timed runs; ms a call, GFLOP/s):\n", c->name);
    say("  %-24s %-22s %9s %9s %9s %9s %10s\n", "matmul", "shape", "forward", "dX", "dW", "GFLOP/s", "ms a step");
    double total = 0;
    for (size_t i = 0; i < sizeof lin / sizeof lin[0] + 1; i++) {
        const bool head = i == sizeof lin / sizeof lin[0];
        const int64_t in = head ? C : lin[i].in, out = head ? Vp : lin[i].out, count = head ? 1 : lin[i].count;
        // forward x (M, in) @ W (in, out); dX = dY (M, out) @ W^T; dW = X^T (in, M) @ dY (M, out). The
        // tied head: x @ wte^T (wte (Vp, C) stored), dX = dY @ wte, dwte = dY^T @ x.
        const mm_case f = {"", 1, M, in, out, false, head}, dx = {"", 1, M, out, in, false, !head},
                      dw = head ? (mm_case){"", 1, out, M, in, true, false} : (mm_case){"", 1, in, M, out, true, false};
        const double tf = time_mm_case(&f), tx = time_mm_case(&dx), tw = time_mm_case(&dw);
        const double flops = 3 * 2.0 * (double)M * (double)in * (double)out;
        char shape[40];
        snprintf(shape, sizeof shape, "(%lld,%lld)x(%lld,%lld)", (long long)M, (long long)in, (long long)in, (long long)out);
        say("  %-24s %-22s %9.3f %9.3f %9.3f %9.4g %10.2f\n", head ? "LM head (tied wte)" : lin[i].name, shape, tf * 1e3,
            tx * 1e3, tw * 1e3, flops / (tf + tx + tw) * 1e-9, (double)count * (tf + tx + tw) * 1e3);
        if (!head) total += (double)count * (tf + tx + tw);
    }
    // The head as the step runs it (core/linear_cross_entropy.c's chunk_rows): chunks of at most 2^24
    // logits, ceil(M / R) of them at R = 2^24 / V rows (V not padded: wte[:V]), cut evenly. Its
    // GEMMs are (rows, C) @ wte[:V]^T, dX = G (rows, V) @ wte[:V], dW = G^T @ x (rows, C) each chunk:
    // thinner than the whole batch's, and the step's total counts these.
    {
        const int64_t R = (INT64_C(1) << 24) / c->V < 8 ? 8 : (INT64_C(1) << 24) / c->V, nch = (M + R - 1) / R,
                      rows = M / nch;
        const mm_case f = {"", 1, rows, C, c->V, false, true}, dx = {"", 1, rows, c->V, C, false, false},
                      dw = {"", 1, c->V, rows, C, true, false};
        const double tf = time_mm_case(&f), tx = time_mm_case(&dx), tw = time_mm_case(&dw);
        char shape[96], name[64];
        snprintf(shape, sizeof shape, "(%lld,%lld)x(%lld,%lld)", (long long)rows, (long long)C, (long long)C,
                 (long long)c->V);
        snprintf(name, sizeof name, "  in the step: %lld chunk%s", (long long)nch, nch > 1 ? "s" : "");
        say("  %-24s %-22s %9.3f %9.3f %9.3f %9.4g %10.2f\n", name, shape, tf * 1e3, tx * 1e3, tw * 1e3,
            3 * 2.0 * (double)rows * (double)C * (double)c->V / (tf + tx + tw) * 1e-9, (double)nch * (tf + tx + tw) * 1e3);
        total += (double)nch * (tf + tx + tw);
    }
    // attention per layer: S = Q K^T, Y = P V; backward dP = dY V^T, dV = P^T dY, dQ = dS K, dK = dS^T Q
    const mm_case qk = {"", BH, T, hs, T, false, true}, pv = {"", BH, T, T, hs, false, false};
    const mm_case dp = {"", BH, T, hs, T, false, true}, dv = {"", BH, T, T, hs, true, false};
    const mm_case dq = {"", BH, T, T, hs, false, false}, dk = {"", BH, T, T, hs, true, false};
    const double tqk = time_mm_case(&qk), tpv = time_mm_case(&pv), tdp = time_mm_case(&dp), tdv = time_mm_case(&dv);
    const double tdq = time_mm_case(&dq), tdk = time_mm_case(&dk);
    const double af = 2.0 * (double)BH * (double)T * (double)T * (double)hs;
    char shape[40];
    snprintf(shape, sizeof shape, "%lldx(%lld,%lld)x(%lld,%lld)", (long long)BH, (long long)T, (long long)hs, (long long)hs,
             (long long)T);
    say("  %-24s %-22s %9.3f %9.3f %9.3f %9.4g %10.2f\n", "attention Q K^T", shape, tqk * 1e3, tdq * 1e3, tdk * 1e3,
        3 * af / (tqk + tdq + tdk) * 1e-9, (double)L * (tqk + tdq + tdk) * 1e3);
    snprintf(shape, sizeof shape, "%lldx(%lld,%lld)x(%lld,%lld)", (long long)BH, (long long)T, (long long)T, (long long)T,
             (long long)hs);
    say("  %-24s %-22s %9.3f %9.3f %9.3f %9.4g %10.2f\n", "attention P V", shape, tpv * 1e3, tdp * 1e3, tdv * 1e3,
        3 * af / (tpv + tdp + tdv) * 1e-9, (double)L * (tpv + tdp + tdv) * 1e3);
    total += (double)L * (tqk + tpv + tdp + tdv + tdq + tdk);
    say("  (attention's backward columns: dQ = dS K and dK = dS^T Q under Q K^T, dP = dY V^T and dV = P^T dY under\n"
        "  P V; the full (T, T) squares, as torc's composed attention computes them)\n");
    say("  all the step's matmuls alone (the head in its chunks): %.2f ms\n", total * 1e3);
}

// ---- --gpt-ops: the step's time by op ----
// After the warm-up, one step a dtype traced (torc_op_trace_*): each opcode's count and wall time in
// its backend, most first, and what the step spent outside the backends (autograd, allocation, the
// core's own loops).
typedef struct op_time {
    int code;
    uint64_t n;
    double s;
} op_time;

static int cmp_op_time(const void *a, const void *b) {
    const double x = ((const op_time *)a)->s, y = ((const op_time *)b)->s;
    return x > y ? -1 : x < y;
}

static void gpt_ops(const gpt_cfg *c) {
    torc_tensor *x, *y;
    gpt_batch(c, &x, &y);
    for (int i = 0; i < g_opt.n_gpt_dtypes; i++) {
        gpt_run run;
        gpt_setup(&run, c, g_opt.gpt_dtypes[i]);
        for (int w = 0; w < g_opt.gpt_warmup; w++) gpt_step(&run, x, y);
        sync_dev();
        torc_op_trace_start();
        const double w0 = wall_s();
        gpt_step(&run, x, y);
        sync_dev();
        const double wall = wall_s() - w0;
        torc_op_trace_stop();
        op_time ops[TORC_OP_COUNT];
        int n = 0;
        for (int o = 0; o < TORC_OP_COUNT; o++) {
            const uint64_t k = torc_op_trace_count(o, -1, -1, -1);
            if (k) ops[n++] = (op_time){o, k, torc_op_trace_seconds(o)};
        }
        qsort(ops, (size_t)n, sizeof *ops, cmp_op_time);
        const double in_ops = torc_op_trace_seconds(-1);
        printf("\nconfig %s, %s: one step %.2f ms (wall), %.2f ms in the backends' ops\n", c->name,
               torc_dtype_short_name(g_opt.gpt_dtypes[i]), wall * 1e3, in_ops * 1e3);
        printf("  %-24s %8s %10s %7s\n", "op", "calls", "ms", "share");
        for (int k = 0; k < n; k++) {
            printf("  %-24s %8llu %10.3f %6.1f%%  ", torc_op_name((torc_opcode)ops[k].code), (unsigned long long)ops[k].n,
                   ops[k].s * 1e3, 100 * ops[k].s / wall);
            for (int a = -2; a < TORC_DTYPE_COUNT; a++)  // the calls by input -> output dtype
                for (int b = 0; b < TORC_DTYPE_COUNT; b++) {
                    const uint64_t m = a == -1 ? 0 : torc_op_trace_count(ops[k].code, a, b, -1);
                    if (m) printf(" %s->%s x%llu", a < 0 ? "()" : torc_dtype_short_name((torc_dtype)a),
                                  torc_dtype_short_name((torc_dtype)b), (unsigned long long)m);
                }
            printf("\n");
        }
        printf("  %-24s %8s %10.3f %6.1f%%\n", "(outside the backends)", "", (wall - in_ops) * 1e3,
               100 * (wall - in_ops) / wall);
        gpt_teardown(&run);
    }
    torc_release(x);
    torc_release(y);
}

// ---- --gpt: the parent ----
// Figures are kept per round as "<config>_t<threads>_<key>" (torc's in g_rounds[r].torc, the peer's
// in .peer); the FMA loop's peak on t threads as "t<threads>_fma_peak_gflops"; the extra child's
// figures in g_gpt_extra.
static result g_gpt_extra[32];
static int g_n_gpt_extra;

static void gpt_key(char *buf, size_t len, const gpt_cfg *c, int t, const char *key) {
    if (snprintf(buf, len, "%s_t%d_%s", c->name, t, key) >= (int)len) buf[len - 1] = '\0';  // keys are short
}

// Figure key of (c, t) in round r, torc's or the peer's.
static bool gpt_get(int r, const gpt_cfg *c, int t, const char *key, bool peer, double *v) {
    char k[64];
    if (c) gpt_key(k, sizeof k, c, t, key);
    else snprintf(k, sizeof k, "%s", key);
    const round_res *rr = &g_rounds[r];
    return peer ? get(rr->peer, rr->np, k, v) : get(rr->torc, rr->nt, k, v);
}

// The median over the rounds of one figure, and of a quotient of two figures of the same round
// (each side torc's or the peer's; c NULL for a key without prefix); the rounds' quotients in q.
static bool gpt_median(const gpt_cfg *c, int t, const char *key, bool peer, double *med) {
    double v[MAX_ROUNDS];
    int n = 0;
    for (int r = 0; r < g_n_rounds; r++)
        if (gpt_get(r, c, t, key, peer, &v[n])) n++;
    if (n) *med = median(v, n);
    return n > 0;
}

typedef double (*gpt_fig_fn)(int r, const gpt_cfg *c, int t, const char *dn, bool peer);  // NAN: missing

static bool gpt_ratio(gpt_fig_fn fa, bool pa, gpt_fig_fn fb, bool pb, const gpt_cfg *c, int t, const char *dn,
                      double *med, double *q, int *nq) {
    double tmp[MAX_ROUNDS];
    int n = 0;
    for (int r = 0; r < g_n_rounds; r++) {
        const double a = fa(r, c, t, dn, pa), b = fb(r, c, t, dn, pb);
        if (isfinite(a) && isfinite(b) && b > 0) q[n] = tmp[n] = a / b, n++;
    }
    *nq = n;
    if (n) *med = median(tmp, n);
    return n > 0;
}

static double fig_step(int r, const gpt_cfg *c, int t, const char *dn, bool peer) {
    char k[48];
    double v;
    snprintf(k, sizeof k, "gpt_%s_step_ms", dn);
    return gpt_get(r, c, t, k, peer, &v) ? v : NAN;
}
static double fig_step_f32(int r, const gpt_cfg *c, int t, const char *dn, bool peer) {
    (void)dn;
    return fig_step(r, c, t, "f32", peer);
}
// The step's matmul GFLOP/s (torc's count over the step's time); the FMA loop's peak on t threads.
static double fig_mm_rate(int r, const gpt_cfg *c, int t, const char *dn, bool peer) {
    char k[48];
    double f;
    snprintf(k, sizeof k, "gpt_%s_mm_flops", dn);
    const double ms = fig_step(r, c, t, dn, peer);
    return gpt_get(r, c, t, k, false, &f) ? f / ms * 1e-6 : NAN;
}
// The same FLOPs over the matmuls' own time in the step (op tracing's wall time in the backend).
static double fig_mm_own_rate(int r, const gpt_cfg *c, int t, const char *dn, bool peer) {
    (void)peer;
    char kf[48], kt[48];
    double f, ms;
    snprintf(kf, sizeof kf, "gpt_%s_mm_flops", dn);
    snprintf(kt, sizeof kt, "gpt_%s_mm_ms", dn);
    return gpt_get(r, c, t, kf, false, &f) && gpt_get(r, c, t, kt, false, &ms) && ms > 0 ? f / ms * 1e-6 : NAN;
}
static double fig_fma_peak(int r, const gpt_cfg *c, int t, const char *dn, bool peer) {
    (void)c, (void)dn, (void)peer;
    char k[48];
    double v;
    snprintf(k, sizeof k, "t%d_fma_peak_gflops", t);
    return gpt_get(r, NULL, t, k, false, &v) ? v : NAN;
}
// Peak RSS over the RSS at start (after torch's import, after torc's backend loaded), KiB.
static double fig_rss_growth(int r, const gpt_cfg *c, int t, const char *dn, bool peer) {
    char k[48];
    double peak, base;
    snprintf(k, sizeof k, "rss_peak_%s_kb", dn);
    return gpt_get(r, c, t, k, peer, &peak) && gpt_get(r, c, t, "rss_base_kb", peer, &base) ? peak - base : NAN;
}

static void print_rounds(const double *q, int n) {
    if (n > 1) {
        printf(" (rounds:");
        for (int k = 0; k < n; k++) printf(" %.3g", q[k]);
        printf(")");
    }
}

// One target line: the median ratio, the goal and whether it is met.
static void gpt_target(const char *what, bool ok, double ratio, const double *q, int nq, bool higher, double goal) {
    char gb[16] = "-";
    if (goal > 0) snprintf(gb, sizeof gb, "%s %.3g", higher ? ">=" : "<=", goal);
    if (!ok) {
        printf("  %-58s %8s %8s  not measured\n", what, "-", gb);
        return;
    }
    const bool met = goal == 0 || (higher ? ratio >= goal : ratio <= goal);
    printf("  %-58s %8.3g %8s  %s", what, ratio, gb, goal == 0 ? "-" : met ? "met" : "NOT MET");
    print_rounds(q, nq);
    printf("\n");
}

static int gpt_threads(int *ts) {
    const int all = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (g_opt.threads_given) return ts[0] = g_opt.threads, 1;
    ts[0] = 1, ts[1] = all;
    return all > 1 ? 2 : 1;
}

static void gpt_print(const torc_device_info *info) {
    int ts[2];
    const int nt = gpt_threads(ts);
    const double peak32 = info->peak_flops[TORC_DTYPE_F32];
    printf("\nGPT training step on %s (%s%s; forward with targets, loss.item(), backward, clip_grad_norm_(1.0), "
           "AdamW (0.9, 0.95) wd 0.1, zero_grad;\n%d round(s), each figure the rounds' median, each ratio the median "
           "of the rounds' ratios):\n", info->name, g_amx ? "AMX" : "no AMX",
           g_opt.cpu_time ? "; timed by CPU time over threads" : "; wall time", g_n_rounds);
    for (int ci = 0; ci < g_opt.n_gpt; ci++) {
        const gpt_cfg *c = &g_opt.gpt[ci];
        const int64_t Vp = (c->V + 127) / 128 * 128, tokens = c->B * c->T;
        double fl = NAN, mm = NAN;
        gpt_median(c, ts[0], "gpt_f32_flops", false, &fl);
        gpt_median(c, ts[0], "gpt_f32_mm_flops", false, &mm);
        printf("\nconfig %s: n_layer %lld, n_head %lld, n_embd %lld, vocab %lld (padded %lld), T %lld, B %lld: "
               "torc counts %.4g GFLOP a step (matmuls %.4g)\n", c->name, (long long)c->L, (long long)c->NH,
               (long long)c->C, (long long)c->V, (long long)Vp, (long long)c->T, (long long)c->B, fl * 1e-9, mm * 1e-9);
        printf("  %-7s %-5s %10s %10s %7s %10s %10s %7s %9s %9s %s\n", "threads", "dtype", "torc ms", "PyTorch ms",
               "ratio", "torc tok/s", "peer tok/s", "MFU", "step/FMA", "mm/FMA", "memory");
        for (int ti = 0; ti < nt; ti++)
            for (int di = 0; di < g_opt.n_gpt_dtypes; di++) {
                const char *dn = torc_dtype_short_name(g_opt.gpt_dtypes[di]);
                char k[48];
                double tt = NAN, tp = NAN, ratio = NAN, q[MAX_ROUNDS], mmr = NAN, mmo = NAN, act = NAN;
                int nq = 0;
                snprintf(k, sizeof k, "gpt_%s_step_ms", dn);
                gpt_median(c, ts[ti], k, false, &tt);
                gpt_median(c, ts[ti], k, true, &tp);
                gpt_ratio(fig_step, false, fig_step, true, c, ts[ti], dn, &ratio, q, &nq);
                gpt_ratio(fig_mm_rate, false, fig_fma_peak, false, c, ts[ti], dn, &mmr, q, &nq);
                gpt_ratio(fig_mm_own_rate, false, fig_fma_peak, false, c, ts[ti], dn, &mmo, q, &nq);
                snprintf(k, sizeof k, "gpt_%s_flops", dn);
                gpt_median(c, ts[ti], k, false, &fl);
                snprintf(k, sizeof k, "gpt_%s_act_peak_b", dn);
                gpt_median(c, ts[ti], k, false, &act);
                char mfu[16] = "-", ratio_s[16] = "-", tp_s[16] = "-", ptok[16] = "-";
                if (peak32 > 0 && isfinite(tt)) snprintf(mfu, sizeof mfu, "%.2f%%", 100 * fl / (tt * 1e-3) / peak32);
                if (isfinite(ratio)) snprintf(ratio_s, sizeof ratio_s, "%.3g", ratio);
                if (isfinite(tp)) snprintf(tp_s, sizeof tp_s, "%.4g", tp), snprintf(ptok, sizeof ptok, "%.0f", tokens / (tp * 1e-3));
                printf("  %-7d %-5s %10.4g %10s %7s %10.0f %10s %7s %9.3g %9.3g activations %.1f MiB", ts[ti], dn, tt,
                       tp_s, ratio_s, tokens / (tt * 1e-3), ptok, mfu, mmr, mmo, act / 1048576.0);
                if (di == 0) {
                    double tot = NAN, rt = NAN, rp = NAN, g = NAN;
                    gpt_median(c, ts[ti], "mem_total_peak_b", false, &tot);
                    snprintf(k, sizeof k, "rss_peak_%s_kb", dn);
                    gpt_median(c, ts[ti], k, false, &rt);
                    gpt_median(c, ts[ti], k, true, &rp);
                    gpt_median(c, ts[ti], "mem_optim_b", false, &g);
                    char rps[24] = "-";
                    if (isfinite(rp)) snprintf(rps, sizeof rps, "%.0f", rp / 1024.0);
                    printf("; torc's peak %.1f MiB (AdamW state %.1f); peak RSS torc %.0f, PyTorch %s MiB", tot / 1048576.0,
                           g / 1048576.0, rt / 1024.0, rps);
                }
                printf("\n");
            }
    }
    printf("  (MFU: torc's whole FLOP count over the step time against the promised f32 peak, %.4g GFLOP/s; step/FMA:\n"
           "  the step's matmul FLOPs over the whole step's time, mm/FMA: over the time its matmuls took in the backend\n"
           "  (op tracing's share of the step's wall time), each against the FMA loop's peak on as many threads; peak RSS: in processes of\n"
           "  their own, f32, the first model's warm-up)\n", peak32 * 1e-9);

    printf("\ntargets (torc / PyTorch unless said; ratio = median of the rounds' ratios):\n");
    printf("  %-58s %8s %8s  %s\n", "comparison", "ratio", "goal", "status");
    for (int ci = 0; ci < g_opt.n_gpt; ci++) {
        const gpt_cfg *c = &g_opt.gpt[ci];
        for (int ti = 0; ti < nt; ti++) {
            const int t = ts[ti];
            char what[96];
            double ratio = NAN, q[MAX_ROUNDS];
            int nq = 0;
            for (int di = 0; di < g_opt.n_gpt_dtypes; di++) {
                const char *dn = torc_dtype_short_name(g_opt.gpt_dtypes[di]);
                snprintf(what, sizeof what, "%s %dT %s step time / PyTorch's", c->name, t, dn);
                bool ok = gpt_ratio(fig_step, false, fig_step, true, c, t, dn, &ratio, q, &nq);
                gpt_target(what, ok, ratio, q, nq, false, 0.9);
                snprintf(what, sizeof what, "%s %dT %s matmuls' GFLOP/s in the step / FMA-loop peak", c->name, t, dn);
                ok = gpt_ratio(fig_mm_own_rate, false, fig_fma_peak, false, c, t, dn, &ratio, q, &nq);
                gpt_target(what, ok, ratio, q, nq, true, g_opt.gpt_dtypes[di] == TORC_DTYPE_F32 ? 0.8 : 0);
                snprintf(what, sizeof what, "%s %dT %s matmul FLOPs / whole step / FMA-loop peak", c->name, t, dn);
                ok = gpt_ratio(fig_mm_rate, false, fig_fma_peak, false, c, t, dn, &ratio, q, &nq);
                gpt_target(what, ok, ratio, q, nq, true, 0);
                if (g_opt.gpt_dtypes[di] != TORC_DTYPE_F32) {
                    snprintf(what, sizeof what, "%s %dT torc %s step / torc f32 step (%s)", c->name, t, dn,
                             g_amx ? "AMX" : "no AMX");
                    ok = gpt_ratio(fig_step, false, fig_step_f32, false, c, t, dn, &ratio, q, &nq);
                    gpt_target(what, ok, ratio, q, nq, false, g_amx ? 0.5 : 1.0);
                    snprintf(what, sizeof what, "%s %dT PyTorch %s step / PyTorch f32 step", c->name, t, dn);
                    ok = gpt_ratio(fig_step, true, fig_step_f32, true, c, t, dn, &ratio, q, &nq);
                    gpt_target(what, ok, ratio, q, nq, false, 0);
                }
            }
            const char *d0 = torc_dtype_short_name(g_opt.gpt_dtypes[0]);
            snprintf(what, sizeof what, "%s %dT %s peak RSS over start / PyTorch's", c->name, t, d0);
            const bool ok = gpt_ratio(fig_rss_growth, false, fig_rss_growth, true, c, t, d0, &ratio, q, &nq);
            gpt_target(what, ok, ratio, q, nq, false, 1.0);
        }
    }
    double lo, hi, v;
    static const char *const sampled[3] = {"A", "B", "tiny"};
    for (int s = 0; s < 3; s++)
        for (int a = 0; a < 2; a++) {
            char klo[40], khi[40];
            snprintf(klo, sizeof klo, "kv_%s_%stoken_lo_ms", sampled[s], a ? "bf16_" : "");
            snprintf(khi, sizeof khi, "kv_%s_%stoken_hi_ms", sampled[s], a ? "bf16_" : "");
            if (!get(g_gpt_extra, g_n_gpt_extra, klo, &lo) || !get(g_gpt_extra, g_n_gpt_extra, khi, &hi)) continue;
            double plo = 0, phi = 0;
            get(g_gpt_extra, g_n_gpt_extra, "kv_pos_lo", &plo);
            get(g_gpt_extra, g_n_gpt_extra, "kv_pos_hi", &phi);
            char what[112];
            snprintf(what, sizeof what, "%s sampler%s, KV cache: a token at %.0f / at %.0f (%.3g / %.3g ms)", sampled[s],
                     a ? " bf16" : " f32", phi, plo, hi, lo);
            gpt_target(what, lo > 0, hi / lo, NULL, 0, false, a ? 0 : 1.2);  // the goal is f32's; bf16 for comparison
        }
    double tlo = 0, thi = 0;
    get(g_gpt_extra, g_n_gpt_extra, "act_T_lo", &tlo);
    get(g_gpt_extra, g_n_gpt_extra, "act_T_hi", &thi);
    static const char *const act_what[2] = {"model", "attention"};
    for (int i = 0; i < 2; i++) {
        char klo[48], khi[48], what[96];
        snprintf(klo, sizeof klo, "act_%s_T%.0f_b", act_what[i], tlo);
        snprintf(khi, sizeof khi, "act_%s_T%.0f_b", act_what[i], thi);
        if (get(g_gpt_extra, g_n_gpt_extra, klo, &lo) && get(g_gpt_extra, g_n_gpt_extra, khi, &v)) {
            snprintf(what, sizeof what, "%s's activations, fwd+bwd, T=%.0f / T=%.0f (%.3g / %.3g MiB)",
                     i ? "attention alone" : "the model (B=1)", thi, tlo, v / 1048576.0, lo / 1048576.0);
            gpt_target(what, lo > 0, v / lo, NULL, 0, false, 4.5);
        }
    }
}

static void gpt_main(const torc_device_info *info, const peak_loop *isa) {
    int ts[2];
    const int nt = gpt_threads(ts);
    const int all_threads = g_opt.threads;
    char dts[32] = "", steps[16], warm[16], cfgs[96], tb[16];
    for (int i = 0; i < g_opt.n_gpt_dtypes; i++)
        snprintf(dts + strlen(dts), sizeof dts - strlen(dts), "%s%s", i ? "," : "", torc_dtype_short_name(g_opt.gpt_dtypes[i]));
    snprintf(steps, sizeof steps, "%d", g_opt.gpt_steps);
    snprintf(warm, sizeof warm, "%d", g_opt.gpt_warmup);
    const char *script = g_opt.peer ? find_peer_script() : NULL;
    for (int r = 0; r < g_opt.rounds; r++) {
        round_res *rr = &g_rounds[r];
        g_n_res = 0;
        rr->np = 0;
        if (g_opt.rounds > 1) say("\n==== round %d of %d ====\n", r + 1, g_opt.rounds);
        for (int ti = 0; ti < nt; ti++) {  // the FMA loop on each thread count (now_s divides CPU time by it)
            char k[48];
            g_opt.threads = ts[ti];
            snprintf(k, sizeof k, "t%d_fma_peak_gflops", ts[ti]);
            put(k, loop_peak(isa, ts[ti]) * 1e-9);
            say("FMA loop (%s) on %d thread(s): %.4g GFLOP/s\n", isa->name, ts[ti], g_res[g_n_res - 1].value);
        }
        for (int ci = 0; ci < g_opt.n_gpt; ci++)
            for (int ti = 0; ti < nt; ti++) {
                const gpt_cfg *c = &g_opt.gpt[ci];
                gpt_cfg_str(c, cfgs, sizeof cfgs);
                snprintf(tb, sizeof tb, "%d", ts[ti]);
                char *argv[24];
                int a = 0;
                argv[a++] = "/proc/self/exe", argv[a++] = "--gpt-child", argv[a++] = cfgs, argv[a++] = "--gpt-dtypes";
                argv[a++] = dts, argv[a++] = "--gpt-steps", argv[a++] = steps, argv[a++] = "--gpt-warmup";
                argv[a++] = warm, argv[a++] = "--threads", argv[a++] = tb;
                if (g_opt.cpu_time) argv[a++] = "--cpu-time";
                if (g_opt.tiny) argv[a++] = "--tiny";
                if (g_opt.backend) argv[a++] = "--backend", argv[a++] = (char *)g_opt.backend;
                argv[a] = NULL;
                result tmp[64];
                char *out = run_child(argv, false, ts[ti]);
                if (!out) bench_die("the GPT step's child failed");
                const int n = parse_flat_json(out, tmp, 64);
                free(out);
                for (int i = 0; i < n; i++) {
                    char k[64];
                    gpt_key(k, sizeof k, c, ts[ti], tmp[i].key);
                    put(k, tmp[i].value);
                }
                double v;
                say("config %s, %d thread(s): torc", c->name, ts[ti]);
                for (int i = 0; i < g_opt.n_gpt_dtypes; i++) {
                    char k[48];
                    snprintf(k, sizeof k, "gpt_%s_step_ms", torc_dtype_short_name(g_opt.gpt_dtypes[i]));
                    if (get(tmp, n, k, &v)) say(" %s %.4g ms", torc_dtype_short_name(g_opt.gpt_dtypes[i]), v);
                }
                if (script) {
                    char *py[20];
                    int b = 0;
                    py[b++] = (char *)g_opt.python, py[b++] = (char *)script, py[b++] = "--gpt", py[b++] = cfgs;
                    py[b++] = "--gpt-dtypes", py[b++] = dts, py[b++] = "--gpt-steps", py[b++] = steps;
                    py[b++] = "--gpt-warmup", py[b++] = warm, py[b++] = "--threads", py[b++] = tb;
                    if (g_opt.cpu_time) py[b++] = "--cpu-time";
                    py[b] = NULL;
                    fflush(stdout);
                    out = run_child(py, true, 0);
                    if (!out) bench_die("the peer failed (%s %s --gpt ...)", g_opt.python, script);
                    const int m = parse_flat_json(out, tmp, 64);
                    free(out);
                    say("; PyTorch");
                    for (int i = 0; i < m && rr->np < MAX_RESULTS; i++) {
                        gpt_key(rr->peer[rr->np].key, sizeof rr->peer[0].key, c, ts[ti], tmp[i].key);
                        rr->peer[rr->np++].value = tmp[i].value;
                    }
                    for (int i = 0; i < g_opt.n_gpt_dtypes; i++) {
                        char k[48];
                        snprintf(k, sizeof k, "gpt_%s_step_ms", torc_dtype_short_name(g_opt.gpt_dtypes[i]));
                        if (get(tmp, m, k, &v)) say(" %s %.4g ms", torc_dtype_short_name(g_opt.gpt_dtypes[i]), v);
                    }
                }
                say("\n");
                fflush(stdout);
            }
        memcpy(rr->torc, g_res, sizeof g_res);
        rr->nt = g_n_res;
        g_n_rounds = r + 1;
    }
    g_opt.threads = all_threads;
    if (!g_opt.gpt_no_extra) {  // the sampler and the activations' growth, on the first thread count
        snprintf(tb, sizeof tb, "%d", ts[0]);
        char *argv[12];
        int a = 0;
        argv[a++] = "/proc/self/exe", argv[a++] = "--gpt-extra-child", argv[a++] = "--threads", argv[a++] = tb;
        if (g_opt.cpu_time) argv[a++] = "--cpu-time";
        argv[a++] = g_opt.tiny ? "--tiny" : g_opt.quick ? "--quick" : "--full";
        if (g_opt.backend) argv[a++] = "--backend", argv[a++] = (char *)g_opt.backend;
        argv[a] = NULL;
        say("sampler and activations (%d thread(s))...\n", ts[0]);
        char *out = run_child(argv, false, ts[0]);
        if (!out) bench_die("the sampler's child failed");
        g_n_gpt_extra = parse_flat_json(out, g_gpt_extra, 32);
        free(out);
        for (int i = 0; i < g_n_gpt_extra; i++) put(g_gpt_extra[i].key, g_gpt_extra[i].value);
        if (g_n_rounds > 0) {  // into the first round's figures, for --json
            round_res *rr = &g_rounds[0];
            for (int i = 0; i < g_n_gpt_extra && rr->nt < MAX_RESULTS; i++) rr->torc[rr->nt++] = g_gpt_extra[i];
        }
    }
    if (!g_opt.json) gpt_print(info);
}

// ---- main ----
static void usage(FILE *f) {
    fprintf(f,
            "usage: torc-bench [--backend NAME] [--quick | --tiny] [--sizes N,N,...] [--dtypes f32,bf16,f16]\n"
            "                  [--no-train] [--json] [--peer] [--python PYTHON] [--peer-script PATH]\n"
            "                  [--threads N] [--rounds N] [--cpu-time]\n"
            "       torc-bench --optim-step NAME [--cruncher D,L,B] [--backend NAME] [--quick | --tiny] [--cpu-time]\n"
            "       torc-bench --gpt[=A|B] [--gpt-config L,NH,C,V,T,B] [--gpt-dtypes f32,bf16] [--peer] [--quick]\n"
            "                  [--rounds N] [--threads N] [--cpu-time] [--gpt-steps N] [--gpt-warmup N]\n"
            "Measures matmul GFLOP/s and MFU per dtype and size (median of timed runs after warm-up,\n"
            "each followed by a synchronize), a practical peak from an FMA loop in the widest ISA the\n"
            "CPU has, per-op dispatch overhead (x + y on 4x4), a tiny forward+backward and Cruncher\n"
            "training steps (D=1024 L=4 B=512 and D=256 L=2 B=64, SGD and Adam, f32 and bf16 autocast,\n"
            "SGD in f16 autocast).\n"
            "  --quick        sizes 512..2048 and shorter timing budgets (default sizes 512..4096)\n"
            "  --tiny         tiny sizes: a smoke run, not a measurement\n"
            "  --peer         also run tools/bench_peer.py (PyTorch and numpy timed the same way) and\n"
            "                 OpenBLAS and BLIS from C (libopenblas.so.0, libblis.so.4 where installed),\n"
            "                 and print each ratio with the peer's figure and the targets met / not met\n"
            "  --cpu-time     time by the process's CPU time over the thread count, not wall time: for a\n"
            "                 machine shared with other work (threads that spin while idle count as busy)\n"
            "  --json         print the results as JSON instead of tables\n"
            "  --threads N    threads of the FMA-peak loop (default TORC_NUM_THREADS, else all CPUs)\n"
            "  --rounds N     measure N times, each round torc then the peer back to back, and report\n"
            "                 the median of the rounds' ratios (default 3 with --peer, else 1; at most 9)\n"
            "  --optim-step NAME  only time optimizer NAME's step alone over a Cruncher's parameters (median,\n"
            "                 min and max of the timed steps), then the Cruncher training step with it\n"
            "  --cruncher D,L,B   the Cruncher --optim-step uses (default 1024,4,512)\n"
            "  --gpt[=A|B|A,B]    only the GPT training step (core/gpt.c: forward with targets, backward, clip,\n"
            "                 AdamW) of config A (4 layers, 4 heads, width 256, GPT-2's vocabulary, T 256, B 4)\n"
            "                 and / or B (6 layers, 6 heads, width 384, bytes, T 256, B 4), each in a child\n"
            "                 process per thread count (1 and every CPU; --threads N: N only) and round; with\n"
            "                 --peer beside its PyTorch twin (bench_peer.py --gpt), rounds taking turns; then\n"
            "                 the sampler's KV-cache latency at positions 100 and 900 and the activations'\n"
            "                 peak at T=256 and 1024; ratios printed with the issue's targets\n"
            "  --gpt-config L,NH,C,V,T,B  a GPT of this shape instead (or besides, with --gpt=A...)\n"
            "  --gpt-dtypes f32,bf16  the step in f32 and / or under bf16 autocast (default both)\n"
            "  --gpt-steps N, --gpt-warmup N  timed and warm-up steps a round (default 6 and 2; --quick 3\n"
            "                 and 1)\n"
            "  --gpt-no-extra skip the sampler's and the activations' figures\n"
            "  --gpt-matmuls  instead: each of the step's matmuls timed alone (its shapes and layouts), in this\n"
            "                 process (threads: TORC_NUM_THREADS)\n"
            "  --gpt-ops      instead: one step's time by op (op tracing: each op's calls and wall time in its\n"
            "                 backend, most first), a step a dtype after the warm-up, in this process\n"
            "  --gpt-child L,NH,C,V,T,B, --gpt-extra-child  --gpt's child processes (one flat JSON object each);\n"
            "                 alone, one config's steps to profile (perf record -g -- torc-bench --gpt-child ...)\n");
}

static void parse_sizes(const char *s) {
    g_opt.n_sizes = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *w = strtok_r(copy, ",", &save); w && g_opt.n_sizes < 8; w = strtok_r(NULL, ",", &save)) {
        const long long v = atoll(w);
        if (v <= 0) bench_die("bad size '%s'", w);
        g_opt.sizes[g_opt.n_sizes++] = v;
    }
    free(copy);
}

static void parse_dtypes(const char *s) {
    g_opt.n_dtypes = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *w = strtok_r(copy, ",", &save); w && g_opt.n_dtypes < 4; w = strtok_r(NULL, ",", &save)) {
        torc_dtype d;
        if (torc_dtype_from_name(w, &d) || !torc_dtype_is_floating(d)) bench_die("bad dtype '%s'", w);
        g_opt.dtypes[g_opt.n_dtypes++] = d;
    }
    free(copy);
}

static const char *arg_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) bench_die("%s needs a value", argv[*i]);
    return argv[++*i];
}

static bool have_size(int64_t n) {
    for (int i = 0; i < g_opt.n_sizes; i++)
        if (g_opt.sizes[i] == n) return true;
    return false;
}

// ---- one round ----
// torc's figures into g_res.
static void measure_round(const torc_device_info *info, const peak_loop *isa) {
    g_n_res = 0;
    // ---- practical peak: the CPU's, so only for a backend computing on it (a GPU has its
    // promised peak, the MFU column) ----
    const bool cpu = info->host_memory;
    const double peak = cpu ? loop_peak(isa, g_opt.threads) : 0;
    double peak_bf16 = peak;  // bf16's own where matmuls run on AMX tiles; elsewhere the FMA loop's
    if (cpu) {
        put("fma_peak_f32_gflops", peak * 1e-9);
        say("practical peak: FMA loop in %s on %d thread(s): %.4g GFLOP/s f32 (best of 3)\n", isa->name,
            g_opt.threads, peak * 1e-9);
    }
    if (cpu && g_amx) {
        peak_bf16 = loop_peak(&amx_peak_loop, g_opt.threads);
        put("amx_peak_bf16_gflops", peak_bf16 * 1e-9);
        say("practical peak: AMX tile-multiply loop on %d thread(s): %.4g GFLOP/s bf16 (best of 3), %.3gx the FMA "
            "loop's\n", g_opt.threads, peak_bf16 * 1e-9, peak_bf16 / peak);
    } else if (cpu && isa_cap() >= CAP_AVX512_CORE_BF16 && __builtin_cpu_supports("avx512bf16")) {
        const double dot = loop_peak(&dpbf16_peak_loop, g_opt.threads);
        put("dpbf16_peak_bf16_gflops", dot * 1e-9);
        say("bf16 dot-product loop (AVX512-BF16, no AMX) on %d thread(s): %.4g GFLOP/s (best of 3), %.3gx the FMA "
            "loop's%s\n", g_opt.threads, dot * 1e-9, dot / peak,
            dot < peak ? ": bf16 matmuls run on f32 FMAs here (bf16 against the FMA loop below)" : "");
        if (dot > peak) peak_bf16 = dot;
    }

    // ---- matmul ----
    say("\nmatmul C = A @ B (n x n; median of timed runs after 2 warm-ups, each synchronized):\n");
    say("%-6s %6s %6s %12s %12s %14s %16s\n", "dtype", "n", "runs", "median ms", "GFLOP/s", "MFU promised",
        !cpu ? "" : g_amx ? "of loop peak (*)" : "of FMA peak");
    for (int di = 0; di < g_opt.n_dtypes; di++) {
        const torc_dtype dt = g_opt.dtypes[di];
        const char *dn = torc_dtype_short_name(dt);
        if (!native_matmul(dt)) {
            say("%-6s (the '%s' backend has no native %s matmul: skipped)\n", dn, torc_device_backend_name(g_dev), dn);
            continue;
        }
        int64_t todo[9];
        int nt = 0;
        for (int i = 0; i < g_opt.n_sizes; i++) todo[nt++] = g_opt.sizes[i];
        if (g_opt.peer && !g_opt.tiny && !have_size(2048)) todo[nt++] = 2048;
        for (int i = 0; i < nt; i++) {
            const int64_t n = todo[i];
            int reps;
            const double t = time_matmul(n, dt, &reps);
            const double gf = 2.0 * (double)n * (double)n * (double)n / t;
            char key[64], mfu[24] = "-", ofpeak[24];
            snprintf(key, sizeof key, "matmul_%s_%lld_gflops", dn, (long long)n);
            put(key, gf * 1e-9);
            if (info->peak_flops[dt] > 0) snprintf(mfu, sizeof mfu, "%.1f%%", 100 * gf / info->peak_flops[dt]);
            if (cpu) snprintf(ofpeak, sizeof ofpeak, "%.1f%%", 100 * gf / (dt == TORC_DTYPE_BF16 ? peak_bf16 : peak));
            else ofpeak[0] = '\0';
            say("%-6s %6lld %6d %12.4g %12.4g %14s %16s\n", dn, (long long)n, reps, t * 1e3, gf * 1e-9, mfu, ofpeak);
        }
    }

    if (cpu && g_amx) say("  (*) bf16 against the AMX loop, the other dtypes against the FMA loop\n");

    // ---- dispatch overhead ----
    say("\ndispatch overhead (median per call over 5 batches):\n");
    // Outside any scope: each result is released right away, as a user's loop would.
    tiny_ctx tc = {torc_randn(TORC_SHAPE(4, 4), TORC_DTYPE_F32, NULL), torc_randn(TORC_SHAPE(4, 4), TORC_DTYPE_F32, NULL),
                   torc_randn(TORC_SHAPE(4, 4), TORC_DTYPE_F32, NULL)};
    check(tc.x && tc.y && tc.w && torc_set_requires_grad(tc.w, true) == TORC_OK, "setup");
    const int calls = g_opt.tiny ? 200 : g_opt.quick ? 2000 : 10000;
    const double t_add = per_call(add_call, &tc, calls, 5);
    put("add_4x4_us", t_add * 1e6);
    say("  x + y on 4x4 f32:                       %9.3f us per call\n", t_add * 1e6);
    const double t_tiny = per_call(tiny_fwd_bwd, &tc, calls / 10, 5);
    put("tiny_fwd_bwd_us", t_tiny * 1e6);
    say("  relu(x @ w).sum().backward() on 4x4:    %9.3f us per iteration\n", t_tiny * 1e6);
    torc_release(tc.x);
    torc_release(tc.y);
    torc_release(tc.w);

    // ---- training steps ----
    if (g_opt.train) {
        say("\nCruncher training step (zero_grad, forward, MSE loss, backward, step; median after 3 warm-ups; each\n"
            "optimizer's dtypes timed side by side, their steps taking turns):\n");
        static const struct { int64_t D; int L; int64_t B; } cfg[] = {{1024, 4, 512}, {256, 2, 64}};
        static const struct { int64_t D; int L; int64_t B; } tiny_cfg[] = {{64, 2, 16}, {32, 1, 8}};
        for (int ci = 0; ci < 2; ci++) {
            const int64_t D = g_opt.tiny ? tiny_cfg[ci].D : cfg[ci].D, B = g_opt.tiny ? tiny_cfg[ci].B : cfg[ci].B;
            const int L = g_opt.tiny ? tiny_cfg[ci].L : cfg[ci].L;
            // sgd in f32, bf16 and f16 autocast side by side, then adam in f32 and bf16 side by side;
            // printed sgd f32, adam f32, sgd bf16, adam bf16, sgd f16.
            static const torc_dtype dts[3] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F16};
            double t_sgd[3], f_sgd[3], t_adam[2], f_adam[2];
            time_cruncher_set(D, L, B, "sgd", 3, dts, t_sgd, f_sgd);
            time_cruncher_set(D, L, B, "adam", 2, dts, t_adam, f_adam);
            const double t_sgd_f32 = t_sgd[0];
            for (int k = 0; k < 5; k++) {
                const char *opt = k % 2 ? "adam" : "sgd";
                const torc_dtype ac = k < 2 ? TORC_DTYPE_F32 : k < 4 ? TORC_DTYPE_BF16 : TORC_DTYPE_F16;
                const char *dn = torc_dtype_short_name(ac);
                const double t = k % 2 ? t_adam[k / 2] : t_sgd[k / 2], flops = k % 2 ? f_adam[k / 2] : f_sgd[k / 2];
                char key[64], label[24];
                snprintf(key, sizeof key, "cruncher_%lld_%d_%lld_%s_%s_ms", (long long)D, L, (long long)B, opt, dn);
                put(key, t * 1e3);
                snprintf(key, sizeof key, "cruncher_%lld_%d_%lld_%s_%s_gflops", (long long)D, L, (long long)B, opt, dn);
                put(key, flops / t * 1e-9);
                snprintf(label, sizeof label, ac == TORC_DTYPE_F32 ? "%s:" : "%s autocast:", dn);
                say("  D=%-5lld L=%d B=%-4lld %-4s %-14s %9.3f ms per step  (%.4g GFLOP/s: its matmuls' FLOPs / step time)\n", (long long)D,
                    L, (long long)B, opt, label, t * 1e3, flops / t * 1e-9);
                if (k == 2 || k == 4) say("  %-26s %-14s %9.2fx the f32 step's speed\n", "", "", t_sgd_f32 / t);
            }
        }
    }

}

// The value of the string member key of a peer's flat JSON, or "?".
static void peer_string(const char *out, const char *key, char *buf, size_t len) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    const char *p = strstr(out, pat);
    snprintf(buf, len, "?");
    if (p) snprintf(buf, len, "%.*s", (int)strcspn(p + strlen(pat), "\""), p + strlen(pat));
}

// The peers' figures into rr: bench_peer.py's, then OpenBLAS's and BLIS's from C (this program
// as --blas-peer), plus best_f32_<n>_gflops, the fastest of them at each size; false when
// bench_peer.py did not run or printed nothing readable (the C peers are optional).
static bool peer_round(round_res *rr) {
    const char *script = find_peer_script();
    char sizes[96] = "", threads[16];
    for (int i = 0, o = 0; i < g_opt.n_sizes; i++)
        o += snprintf(sizes + o, sizeof sizes - (size_t)o, "%s%lld", i ? "," : "", (long long)g_opt.sizes[i]);
    if (!have_size(2048)) strncat(sizes, ",2048", sizeof sizes - strlen(sizes) - 1);
    snprintf(threads, sizeof threads, "%d", g_opt.threads);
    const char *quick = g_opt.quick || g_opt.tiny ? "--quick" : "--full";
    say("\nrunning the peers: %s %s, and OpenBLAS and BLIS from C (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset "
        "for them)...\n", g_opt.python, script);
    char *py_argv[] = {(char *)g_opt.python, (char *)script, (char *)quick, "--sizes", sizes, "--threads", threads,
                       g_opt.cpu_time ? "--cpu-time" : NULL, NULL};
    char *out = run_peer(py_argv);
    if (!out) return false;
    rr->np = parse_flat_json(out, rr->peer, MAX_RESULTS);
    if (rr->np == 0) fprintf(stderr, "torc-bench: could not read the peer's output:\n%s\n", out);
    free(out);
    if (rr->np == 0) return false;
    char *c_argv[] = {"/proc/self/exe", "--blas-peer", "--sizes", sizes, "--threads", threads, (char *)quick,
                      g_opt.cpu_time ? "--cpu-time" : NULL, NULL};
    out = run_peer(c_argv);
    if (out) {
        char core[64], arch[64];
        peer_string(out, "openblas_core", core, sizeof core);
        peer_string(out, "blis_arch", arch, sizeof arch);
        say("OpenBLAS kernels: %s; BLIS kernels: %s\n", core, arch);
        rr->np += parse_flat_json(out, rr->peer + rr->np, MAX_RESULTS - rr->np);
        free(out);
    }
    static const char *const peers[] = {"matmul_f32_%lld_gflops", "numpy_matmul_f32_%lld_gflops",
                                        "openblas_matmul_f32_%lld_gflops", "blis_matmul_f32_%lld_gflops"};
    static const int64_t best_sizes[] = {512, 1024, 2048, 4096};
    for (int si = 0; si < 4; si++) {
        double best = 0, v;
        char key[64];
        for (int k = 0; k < 4; k++) {
            snprintf(key, sizeof key, peers[k], (long long)best_sizes[si]);
            if (get(rr->peer, rr->np, key, &v) && v > best) best = v;
        }
        if (best > 0 && rr->np < MAX_RESULTS) {
            snprintf(rr->peer[rr->np].key, sizeof rr->peer[0].key, "best_f32_%lld_gflops", (long long)best_sizes[si]);
            rr->peer[rr->np++].value = best;
        }
    }
    say("peer figures:");
    for (int i = 0; i < rr->np; i++) say("%s %s = %.4g", i ? ";" : "", rr->peer[i].key, rr->peer[i].value);
    say("\n");
    return true;
}

int main(int argc, char **argv) {
    g_opt.train = true;
    g_opt.python = "python3";
    const char *sizes = NULL, *dtypes = NULL, *gpt_dtypes = "f32,bf16";
    bool blas_peer = false, gpt_all = false, gpt_child_mode = false, gpt_extra_mode = false, gpt_matmuls_mode = false,
         gpt_ops_mode = false;
    gpt_cfg gpt_child;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--backend")) g_opt.backend = arg_value(argc, argv, &i);
        else if (!strcmp(a, "--quick")) g_opt.quick = true;
        else if (!strcmp(a, "--full")) g_opt.quick = false;
        else if (!strcmp(a, "--blas-peer")) blas_peer = true;
        else if (!strcmp(a, "--cpu-time")) g_opt.cpu_time = true;
        else if (!strcmp(a, "--tiny")) g_opt.tiny = true;
        else if (!strcmp(a, "--sizes")) sizes = arg_value(argc, argv, &i);
        else if (!strcmp(a, "--dtypes")) dtypes = arg_value(argc, argv, &i);
        else if (!strcmp(a, "--no-train")) g_opt.train = false;
        else if (!strcmp(a, "--json")) g_opt.json = true;
        else if (!strcmp(a, "--peer")) g_opt.peer = true;
        else if (!strcmp(a, "--python")) g_opt.python = arg_value(argc, argv, &i);
        else if (!strcmp(a, "--peer-script")) g_opt.peer_script = arg_value(argc, argv, &i);
        else if (!strcmp(a, "--threads")) g_opt.threads = atoi(arg_value(argc, argv, &i)), g_opt.threads_given = true;
        else if (!strcmp(a, "--rounds")) g_opt.rounds = atoi(arg_value(argc, argv, &i));
        else if (!strcmp(a, "--optim-step")) g_opt.optim_step = arg_value(argc, argv, &i);
        else if (!strcmp(a, "--cruncher")) {
            long long d, b;
            int l;
            if (sscanf(arg_value(argc, argv, &i), "%lld,%d,%lld", &d, &l, &b) != 3 || d < 1 || l < 0 || b < 1)
                bench_die("--cruncher takes D,L,B (positive; L may be 0)");
            g_opt.cr_D = d, g_opt.cr_L = l, g_opt.cr_B = b;
        }
        else if (!strcmp(a, "--gpt") || !strncmp(a, "--gpt=", 6)) {
            gpt_all = !a[5];
            for (const char *p = a + 5; *p; p++) {
                if (*p == '=' || *p == ',') continue;
                if ((*p == 'A' || *p == 'B') && g_opt.n_gpt < 4) g_opt.gpt[g_opt.n_gpt++] = *p == 'A' ? gpt_cfg_A : gpt_cfg_B;
                else bench_die("--gpt takes A, B or A,B (got '%s')", a + 6);
            }
        } else if (!strcmp(a, "--gpt-config")) {
            gpt_cfg c;
            if (!gpt_parse_cfg(arg_value(argc, argv, &i), &c)) bench_die("--gpt-config takes L,NH,C,V,T,B (NH divides C)");
            if (g_opt.n_gpt < 4) g_opt.gpt[g_opt.n_gpt++] = c;
        } else if (!strcmp(a, "--gpt-child")) {
            if (!gpt_parse_cfg(arg_value(argc, argv, &i), &gpt_child)) bench_die("--gpt-child takes L,NH,C,V,T,B");
            gpt_child_mode = true;
        }
        else if (!strcmp(a, "--gpt-extra-child")) gpt_extra_mode = true;
        else if (!strcmp(a, "--gpt-dtypes")) gpt_dtypes = arg_value(argc, argv, &i);
        else if (!strcmp(a, "--gpt-steps")) g_opt.gpt_steps = atoi(arg_value(argc, argv, &i));
        else if (!strcmp(a, "--gpt-warmup")) g_opt.gpt_warmup = atoi(arg_value(argc, argv, &i));
        else if (!strcmp(a, "--gpt-no-extra")) g_opt.gpt_no_extra = true;
        else if (!strcmp(a, "--gpt-matmuls")) gpt_matmuls_mode = true;
        else if (!strcmp(a, "--gpt-ops")) gpt_ops_mode = true;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        else return usage(stderr), 2;
    }
    parse_sizes(sizes ? sizes : g_opt.tiny ? "64,128" : g_opt.quick ? "512,1024,2048" : "512,1024,2048,4096");
    parse_dtypes(dtypes ? dtypes : "f32,bf16,f16");
    if (g_opt.threads <= 0) {
        const char *env = getenv("TORC_NUM_THREADS");
        g_opt.threads = env && atoi(env) > 0 ? atoi(env) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    }
    if (g_opt.rounds == 0) g_opt.rounds = g_opt.peer && !g_opt.tiny ? 3 : 1;
    if (g_opt.rounds < 1 || g_opt.rounds > MAX_ROUNDS) bench_die("--rounds takes 1..%d", MAX_ROUNDS);
    if (g_opt.threads < 1) g_opt.threads = 1;
    if (g_opt.threads > 256) g_opt.threads = 256;
    if (blas_peer) return blas_peer_main();
    if (gpt_all) {  // --gpt alone: A and B (--tiny: the tiny config)
        g_opt.gpt[0] = g_opt.tiny ? gpt_cfg_tiny : gpt_cfg_A, g_opt.n_gpt = 1;
        if (!g_opt.tiny) g_opt.gpt[g_opt.n_gpt++] = gpt_cfg_B;
    }
    if (g_opt.n_gpt || gpt_child_mode) {
        g_opt.n_gpt_dtypes = 0;
        char *copy = strdup(gpt_dtypes), *save = NULL;
        for (char *w = strtok_r(copy, ",", &save); w && g_opt.n_gpt_dtypes < 2; w = strtok_r(NULL, ",", &save)) {
            torc_dtype d;
            if (torc_dtype_from_name(w, &d) || (d != TORC_DTYPE_F32 && d != TORC_DTYPE_BF16 && d != TORC_DTYPE_F16))
                bench_die("--gpt-dtypes takes f32, bf16 or f16 (autocast), got '%s'", w);
            g_opt.gpt_dtypes[g_opt.n_gpt_dtypes++] = d;
        }
        free(copy);
        if (!g_opt.n_gpt_dtypes) bench_die("--gpt-dtypes names no dtype");
        if (g_opt.gpt_steps <= 0) g_opt.gpt_steps = g_opt.tiny ? 2 : g_opt.quick ? 3 : 6;
        if (g_opt.gpt_warmup <= 0) g_opt.gpt_warmup = g_opt.tiny || g_opt.quick ? 1 : 2;
    }
    if (gpt_child_mode) return gpt_child_main(&gpt_child);
    if (gpt_extra_mode) return gpt_extra_main();

    g_dev = g_opt.backend ? torc_device_get(g_opt.backend) : torc_default_device();
    if (!g_dev) bench_die("cannot load backend '%s': %s", g_opt.backend ? g_opt.backend : "(default)", torc_last_error());
    torc_set_default_device(g_dev);
    torc_device_info info;
    torc_device_info_get(g_dev, &info);
    say("torc-bench: backend '%s' (device %s: %s)\n", torc_device_backend_name(g_dev), torc_device_name(g_dev), info.name);
    say("promised peak (the device table):");
    for (int d = 0; d < TORC_DTYPE_COUNT; d++)
        if (info.peak_flops[d] > 0) say(" %s %.4g GFLOP/s;", torc_dtype_short_name((torc_dtype)d), info.peak_flops[d] * 1e-9);
    say("\n  derived as: %s\n", info.peak_source[0] ? info.peak_source : "(not given)");

    if (g_opt.optim_step) {
        optim_step_bench(g_opt.optim_step, g_opt.cr_D ? g_opt.cr_D : 1024, g_opt.cr_D ? g_opt.cr_L : 4,
                         g_opt.cr_D ? g_opt.cr_B : 512);
        return 0;
    }
    const peak_loop isa = pick_isa();
    g_amx = amx_available();
    if (g_opt.n_gpt && gpt_matmuls_mode) {
        for (int i = 0; i < g_opt.n_gpt; i++) gpt_matmuls(&g_opt.gpt[i]);
        return 0;
    }
    if (g_opt.n_gpt && gpt_ops_mode) {
        for (int i = 0; i < g_opt.n_gpt; i++) gpt_ops(&g_opt.gpt[i]);
        return 0;
    }
    if (g_opt.n_gpt) {
        gpt_main(&info, &isa);
        if (g_opt.json) print_json(&info, isa.name, g_opt.threads);
        return 0;
    }
    bool peer_ok = true;
    for (int r = 0; r < g_opt.rounds; r++) {
        if (g_opt.rounds > 1) say("\n==== round %d of %d ====\n", r + 1, g_opt.rounds);
        measure_round(&info, &isa);
        round_res *rr = &g_rounds[r];
        memcpy(rr->torc, g_res, sizeof g_res);
        rr->nt = g_n_res;
        rr->np = 0;
        g_n_rounds = r + 1;
        if (g_opt.peer && !peer_round(rr)) {
            peer_ok = false;
            break;
        }
    }
    if (g_opt.peer && peer_ok && !g_opt.json) print_targets(&info);
    if (g_opt.json) print_json(&info, isa.name, g_opt.threads);
    return g_opt.peer && !peer_ok ? 1 : 0;
}
