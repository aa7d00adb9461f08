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
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
#define MAX_RESULTS 128
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
// f16, f32, ...), each synchronized. The ratios between them are the targets, and taking
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
static char *run_peer(char *const argv[]) {
    int fds[2];
    if (pipe(fds)) bench_die("pipe failed: %s", strerror(errno));
    fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) bench_die("fork failed: %s", strerror(errno));
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv("OPENBLAS_L2_SIZE");
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

// ---- the targets, each a ratio taken in one run next to the peer ----
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

// ---- main ----
static void usage(FILE *f) {
    fprintf(f,
            "usage: torc-bench [--backend NAME] [--quick | --tiny] [--sizes N,N,...] [--dtypes f32,bf16,f16]\n"
            "                  [--no-train] [--json] [--peer] [--python PYTHON] [--peer-script PATH]\n"
            "                  [--threads N] [--rounds N] [--cpu-time]\n"
            "       torc-bench --optim-step NAME [--cruncher D,L,B] [--backend NAME] [--quick | --tiny] [--cpu-time]\n"
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
            "  --cruncher D,L,B   the Cruncher --optim-step uses (default 1024,4,512)\n");
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
    const char *sizes = NULL, *dtypes = NULL;
    bool blas_peer = false;
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
        else if (!strcmp(a, "--threads")) g_opt.threads = atoi(arg_value(argc, argv, &i));
        else if (!strcmp(a, "--rounds")) g_opt.rounds = atoi(arg_value(argc, argv, &i));
        else if (!strcmp(a, "--optim-step")) g_opt.optim_step = arg_value(argc, argv, &i);
        else if (!strcmp(a, "--cruncher")) {
            long long d, b;
            int l;
            if (sscanf(arg_value(argc, argv, &i), "%lld,%d,%lld", &d, &l, &b) != 3 || d < 1 || l < 0 || b < 1)
                bench_die("--cruncher takes D,L,B (positive; L may be 0)");
            g_opt.cr_D = d, g_opt.cr_L = l, g_opt.cr_B = b;
        }
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
