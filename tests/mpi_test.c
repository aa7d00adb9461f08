// tests/mpi_test.c — run under mpirun by tests/mpi.sh: the collectives on tensors (every dtype,
// blocking and not), and data-parallel training of a small Cruncher whose parameters are compared
// across ranks after every step and whose loss curve and final weights are written for the
// script to compare across process counts. Exits non-zero with a message naming the rank.
//   mpi_test collectives
//   mpi_test mismatch      (ranks that disagree: refused on every rank, nothing written)
//   mpi_test train --optim sgd|adam --steps N --batch B [--deterministic] [--out FILE]
//                  [--save PATH --save-at K] [--resume PATH] [--die-at K] [--hang-at K] [--unused]
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "torc/torc.h"

static int g_rank;

#define FAIL(...) \
    do { \
        fprintf(stderr, "mpi_test rank %d: line %d: ", g_rank, __LINE__); \
        fprintf(stderr, __VA_ARGS__); \
        fprintf(stderr, "\n"); \
        torc_dist_abort(1); \
    } while (0)
#define CHECK(call) do { if ((call) != TORC_OK) FAIL("%s: %s", #call, torc_last_error()); } while (0)
#define CHECK_PTR(p) do { if (!(p)) FAIL("%s: %s", #p, torc_last_error()); } while (0)

static double *values(torc_tensor *t) {
    int64_t n = torc_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    torc_scope_push();
    torc_tensor *d = torc_to_dtype(t, TORC_DTYPE_F64);
    CHECK_PTR(d);
    CHECK(torc_copy_to_host(d, v, sizeof(double) * (size_t)n));
    torc_scope_pop();
    return v;
}

// want is the exact result; a dtype that cannot hold it must give it rounded once.
static void expect_values(torc_tensor *t, const double *exact, int64_t n, const char *what) {
    torc_scope_push();
    double *want = values(torc_to_dtype(torc_tensor_from(exact, 1, &n, TORC_DTYPE_F64), torc_get_dtype(t)));
    torc_scope_pop();
    double *v = values(t);
    for (int64_t i = 0; i < n; i++)
        if (v[i] != want[i]) FAIL("%s: element %lld is %.17g, expected %.17g", what, (long long)i, v[i], want[i]);
    free(v);
    free(want);
}

// ---- collectives ----
static void test_collectives(void) {
    const int W = torc_dist_world_size(), r = g_rank;
    const torc_dtype dtypes[] = {TORC_DTYPE_F32, TORC_DTYPE_F64, TORC_DTYPE_BF16, TORC_DTYPE_F16, TORC_DTYPE_I32, TORC_DTYPE_I64};
    for (size_t di = 0; di < sizeof dtypes / sizeof *dtypes; di++) {
        const torc_dtype dt = dtypes[di];
        const bool fl = torc_dtype_is_floating(dt);
        char what[96];
        for (int async = 0; async < 2; async++) {
            torc_scope_push();
            // all_reduce on (3, 4) integer values: rank r holds 10*i + r (exact in every dtype)
            double base[12], want[12];
            for (int op = TORC_REDUCE_SUM; op <= TORC_REDUCE_MIN; op++) {
                if (op == TORC_REDUCE_AVG && !fl) continue;
                for (int i = 0; i < 12; i++) {
                    base[i] = 10.0 * i + r;
                    const double sum = 10.0 * i * W + W * (W - 1) / 2.0;
                    want[i] = op == TORC_REDUCE_SUM ? sum : op == TORC_REDUCE_AVG ? sum / W
                              : op == TORC_REDUCE_MAX ? 10.0 * i + W - 1 : 10.0 * i;
                }
                torc_tensor *t = torc_to_dtype(torc_tensor_from(base, TORC_SHAPE(3, 4), TORC_DTYPE_F64), dt);
                CHECK_PTR(t);
                torc_work *w = NULL;
                CHECK(torc_dist_all_reduce(t, op, async ? &w : NULL));
                if (async && !w) FAIL("no work handle");
                CHECK(torc_dist_wait(w));
                snprintf(what, sizeof what, "all_reduce op %d %s async %d", op, torc_dtype_name(dt), async);
                expect_values(t, want, 12, what);
                // the same on a transposed (non-contiguous) view
                torc_tensor *u = torc_to_dtype(torc_tensor_from(base, TORC_SHAPE(3, 4), TORC_DTYPE_F64), dt);
                torc_tensor *ut = torc_transpose(u, 0, 1);
                CHECK(torc_dist_all_reduce(ut, op, async ? &w : NULL));
                CHECK(torc_dist_wait(async ? w : NULL));
                expect_values(u, want, 12, "all_reduce on a transposed view");
            }
            // broadcast from the last rank
            for (int i = 0; i < 12; i++) base[i] = 7.0 * i + r, want[i] = 7.0 * i + W - 1;
            torc_tensor *b = torc_to_dtype(torc_tensor_from(base, TORC_SHAPE(3, 4), TORC_DTYPE_F64), dt);
            torc_work *w = NULL;
            CHECK(torc_dist_broadcast(b, W - 1, async ? &w : NULL));
            CHECK(torc_dist_wait(w));
            expect_values(b, want, 12, "broadcast");
            // all_gather: rank r contributes (2, 3) of 100 r + i
            double mine[6], all[6 * 8];
            for (int i = 0; i < 6; i++) mine[i] = 100.0 * r + i;
            for (int q = 0; q < W; q++)
                for (int i = 0; i < 6; i++) all[q * 6 + i] = 100.0 * q + i;
            torc_tensor *in = torc_to_dtype(torc_tensor_from(mine, TORC_SHAPE(2, 3), TORC_DTYPE_F64), dt);
            torc_tensor *out = torc_zeros(TORC_SHAPE(2 * W, 3), dt);
            CHECK(torc_dist_all_gather(out, in, async ? &w : NULL));
            CHECK(torc_dist_wait(w));
            expect_values(out, all, 6 * W, "all_gather");
            // reduce_scatter (SUM): in (W*2, 3) of i + r on every rank; out block r
            double big[6 * 8], blk[6];
            for (int i = 0; i < 6 * W; i++) big[i] = i + r;
            for (int i = 0; i < 6; i++) blk[i] = (double)W * (6 * r + i) + W * (W - 1) / 2.0;
            torc_tensor *bin = torc_to_dtype(torc_tensor_from(big, TORC_SHAPE(2 * W, 3), TORC_DTYPE_F64), dt);
            torc_tensor *bout = torc_zeros(TORC_SHAPE(2, 3), dt);
            CHECK(torc_dist_reduce_scatter(bout, bin, TORC_REDUCE_SUM, async ? &w : NULL));
            CHECK(torc_dist_wait(w));
            expect_values(bout, blk, 6, "reduce_scatter");
            torc_scope_pop();
        }
    }
    // bf16: rank r holds 1 + r * 2^-8 (exact in bf16); the average 1 + (W-1)/2 * 2^-8 is
    // computed in f32 and rounded once to bf16 (round to nearest even).
    torc_scope_push();
    torc_tensor *h = torc_full(TORC_SHAPE(4), 1.0 + r / 256.0, TORC_DTYPE_BF16);
    CHECK(torc_dist_all_reduce(h, TORC_REDUCE_AVG, NULL));
    torc_tensor *ref = torc_to_dtype(torc_full(TORC_SHAPE(4), 1.0 + (W - 1) / 2.0 / 256.0, TORC_DTYPE_F32), TORC_DTYPE_BF16);
    double *rv = values(ref);
    expect_values(h, rv, 4, "bf16 avg");
    free(rv);
    // errors: bad dtype, bad shape, AVG on ints, bad root
    torc_tensor *i8 = torc_zeros(TORC_SHAPE(4), TORC_DTYPE_I8);
    if (torc_dist_all_reduce(i8, TORC_REDUCE_SUM, NULL) != TORC_ERR_DTYPE) FAIL("int8 all_reduce accepted");
    torc_tensor *i32 = torc_zeros(TORC_SHAPE(4), TORC_DTYPE_I32);
    if (torc_dist_all_reduce(i32, TORC_REDUCE_AVG, NULL) != TORC_ERR_DTYPE) FAIL("int32 AVG accepted");
    if (torc_dist_broadcast(i32, W, NULL) != TORC_ERR_INVALID_ARG) FAIL("root out of range accepted");
    torc_tensor *o = torc_zeros(TORC_SHAPE(3, 4), TORC_DTYPE_F32), *in = torc_zeros(TORC_SHAPE(2, 4), TORC_DTYPE_F32);
    if (torc_dist_all_gather(o, in, NULL) != TORC_ERR_SHAPE || !strstr(torc_last_error(), "world_size"))
        FAIL("bad all_gather shape accepted: %s", torc_last_error());
    CHECK(torc_dist_barrier());
    torc_scope_pop();
}

// ---- training ----
typedef struct {
    const char *optim, *out, *save, *resume;
    int64_t steps, batch, save_at, die_at, hang_at;
    bool deterministic, unused;
} train_opts;

// FNV-1a of the parameters' bytes: equal on every rank iff MAX == MIN after all-reduce.
static int64_t params_hash(torc_module *m) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < torc_module_param_count(m); i++) {
        torc_tensor *p = torc_module_param(m, i);
        size_t n = torc_nbytes(p);
        unsigned char *buf = malloc(n);
        CHECK(torc_copy_to_host(p, buf, n));
        for (size_t k = 0; k < n; k++) h = (h ^ buf[k]) * 1099511628211ull;
        free(buf);
    }
    return (int64_t)(h >> 1);
}

static void check_equal_across_ranks(torc_module *m, int64_t step) {
    torc_scope_push();
    const int64_t h = params_hash(m);
    torc_tensor *mx = torc_tensor_from(&h, TORC_SHAPE(1), TORC_DTYPE_I64), *mn = torc_clone(mx);
    CHECK(torc_dist_all_reduce(mx, TORC_REDUCE_MAX, NULL));
    CHECK(torc_dist_all_reduce(mn, TORC_REDUCE_MIN, NULL));
    int64_t a, b;
    CHECK(torc_item_i64(mx, &a));
    CHECK(torc_item_i64(mn, &b));
    if (a != b) FAIL("parameters differ across ranks after step %lld (hash max %lld, min %lld)", (long long)step, (long long)a, (long long)b);
    torc_scope_pop();
}

static void train(const train_opts *o) {
    const int W = torc_dist_world_size();
    const int64_t D = 16;
    torc_generator *gen = torc_generator_new(1234), *data = torc_generator_new(99);
    // Only rank 0's initial weights matter: ddp broadcasts them (other ranks start elsewhere).
    if (g_rank) torc_generator_set_state(gen, 5 + (uint64_t)g_rank, 0);
    torc_module *m = torc_cruncher_new(D, 2, TORC_DTYPE_F32, gen);
    CHECK_PTR(m);
    const int np = torc_module_param_count(m);
    torc_tensor *params[16];
    const char *names[16];
    for (int i = 0; i < np; i++) params[i] = torc_module_param(m, i), names[i] = torc_module_param_name(m, i);
    // A parameter no rank ever uses (--unused): a (3) vector outside the model.
    torc_tensor *spare = NULL;
    if (o->unused) {
        spare = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F32);
        CHECK(torc_set_requires_grad(spare, true));
        params[np] = spare;
    }
    const int n_ddp = np + (spare ? 1 : 0);
    torc_optimizer *opt = torc_optimizer_new(o->optim, np, params, !strcmp(o->optim, "sgd") ? "lr=0.001" : "lr=0.01");
    CHECK_PTR(opt);
    torc_ddp_options dopt = TORC_DDP_OPTIONS_DEFAULT;
    dopt.first_bucket_bytes = 16 * 4;  // buckets: final.weight, then one per layer weight
    dopt.bucket_cap_bytes = 16 * 16 * 4;
    dopt.deterministic = o->deterministic;
    dopt.find_unused_parameters = o->unused;
    int64_t step = 0;
    if (o->resume) {  // every rank reads the checkpoint rank 0 wrote
        CHECK(torc_checkpoint_load(o->resume, np, names, params, opt, &step, data));
    }
    torc_ddp *ddp = torc_ddp_new(n_ddp, params, &dopt);
    CHECK_PTR(ddp);
    check_equal_across_ranks(m, step);
    torc_tensor *w = torc_arange(0, (double)D, 1, TORC_DTYPE_F32);
    FILE *out = o->out && g_rank == 0 ? fopen(o->out, "w") : NULL;
    if (o->out && g_rank == 0 && !out) FAIL("cannot write %s", o->out);
    int mfirst, mcount;
    torc_ddp_micro_batches(ddp, &mfirst, &mcount);
    const int64_t B = o->batch, M = o->deterministic ? dopt.micro_batches : W;
    for (; step < o->steps; step++) {
        if (o->die_at && step == o->die_at && g_rank == W - 1) raise(SIGKILL);
        if (o->hang_at && step == o->hang_at && g_rank == W - 1) for (;;) pause();  // alive, silent
        torc_scope_push();
        // The global batch, drawn alike on every rank; this rank takes its rows.
        torc_tensor *x = torc_randn(TORC_SHAPE(B, D), TORC_DTYPE_F32, data), *y = torc_matmul(x, w);
        CHECK_PTR(y);
        double losses[64];
        const int first = o->deterministic ? mfirst : g_rank, count = o->deterministic ? mcount : 1;
        for (int k = 0; k < count; k++) {
            const int64_t rows = B / M, start = (first + k) * rows;
            torc_tensor *xs = torc_narrow(x, 0, start, rows), *ys = torc_narrow(y, 0, start, rows);
            torc_tensor *l = torc_mse_loss(torc_module_forward(m, xs), ys);
            CHECK_PTR(l);
            CHECK(torc_ddp_begin(ddp, first + k));
            CHECK(torc_backward(l, NULL, false));
            CHECK(torc_item(l, &losses[k]));
        }
        CHECK(torc_ddp_finish(ddp));
        if (spare && torc_grad(spare)) FAIL("a parameter no rank used got a gradient");
        double loss;
        CHECK(torc_ddp_reduce_loss(ddp, losses, count, &loss));
        CHECK(torc_optimizer_step(opt));
        CHECK(torc_optimizer_zero_grad(opt, true));
        torc_scope_pop();
        check_equal_across_ranks(m, step + 1);
        if (out) fprintf(out, "loss %lld %a\n", (long long)step + 1, loss);
        if (o->save && step + 1 == o->save_at && g_rank == 0)
            CHECK(torc_checkpoint_save(o->save, np, names, params, opt, step + 1, data));
    }
    if (out) {
        for (int i = 0; i < np; i++) {
            double *v = values(params[i]);
            for (int64_t k = 0; k < torc_numel(params[i]); k++) fprintf(out, "param %d %lld %a\n", i, (long long)k, v[k]);
            free(v);
        }
        fclose(out);
    }
    torc_ddp_stats st;
    CHECK(torc_ddp_stats_get(ddp, &st));
    if (g_rank == 0)
        printf("mpi_test: %d ranks, %lld steps, %lld bytes per step, comm %.3f s, hidden %.3f s\n", W, (long long)st.steps,
               (long long)st.bytes_per_step, st.comm_s, st.hidden_s);
    torc_ddp_free(ddp);
    torc_release(w);
    torc_release(spare);
    torc_optimizer_free(opt);
    torc_module_free(m);
    torc_generator_free(gen);
    torc_generator_free(data);
}

// ---- ranks that disagree ----
// The last error must contain want (every rank gets the same refusal).
static void expect_refused(torc_status st, const char *want, const char *what) {
    if (st == TORC_OK) FAIL("%s: accepted", what);
    if (!strstr(torc_last_error(), want)) FAIL("%s: the error '%s' lacks '%s'", what, torc_last_error(), want);
}

// Every element of t is still v: a refused collective wrote nothing.
static void expect_untouched(torc_tensor *t, double v, const char *what) {
    double *x = values(t);
    for (int64_t i = 0; i < torc_numel(t); i++)
        if (x[i] != v) FAIL("%s: element %lld is %g, the refused collective wrote it (was %g)", what, (long long)i, x[i], v);
    free(x);
}

// Collectives whose element count, kind, root or dtype differ across ranks fail on every rank
// with a message naming the difference, before any data moves (rank r's buffers are sized for
// its own count: MPI would write a larger peer's count past them); the job stays usable.
// torc_ddp_new refuses ranks with other bucket caps or models, naming the setting.
static void test_mismatch(void) {
    const int W = torc_dist_world_size(), r = g_rank;
    char want[160];
    torc_scope_push();
    // count: rank r all-reduces 1000 * (r + 1) elements
    torc_tensor *t = torc_full(TORC_SHAPE(1000 * (r + 1)), 7.0, TORC_DTYPE_F32);
    snprintf(want, sizeof want, "the ranks called different collectives: this rank's all-reduce has %d elements, another rank's %d",
             1000 * (r + 1), r == W - 1 ? 1000 : 1000 * W);  // the extreme other than its own
    expect_refused(torc_dist_all_reduce(t, TORC_REDUCE_SUM, NULL), want, "all_reduce of other counts");
    expect_untouched(t, 7.0, "all_reduce of other counts");
    // the same, not blocking, and all_gather whose per-rank counts differ
    torc_work *w = NULL;
    CHECK(torc_dist_all_reduce(t, TORC_REDUCE_MAX, &w));
    expect_refused(torc_dist_wait(w), "another rank's", "started all_reduce of other counts");
    expect_untouched(t, 7.0, "started all_reduce of other counts");
    torc_tensor *in = torc_full(TORC_SHAPE(3 + r), 1.0, TORC_DTYPE_F32), *out = torc_full(TORC_SHAPE(W * (3 + r)), 5.0, TORC_DTYPE_F32);
    expect_refused(torc_dist_all_gather(out, in, NULL), "this rank's all-gather has", "all_gather of other counts");
    expect_untouched(out, 5.0, "all_gather of other counts");
    // kind: rank 0 broadcasts while the others all-reduce
    torc_tensor *u = torc_full(TORC_SHAPE(8), 3.0, TORC_DTYPE_F32);
    const torc_status st = r == 0 ? torc_dist_broadcast(u, 0, NULL) : torc_dist_all_reduce(u, TORC_REDUCE_SUM, NULL);
    expect_refused(st, r == 0 ? "this rank called broadcast, another rank all-reduce" : "this rank called all-reduce, another rank broadcast",
                   "broadcast against all_reduce");
    expect_untouched(u, 3.0, "broadcast against all_reduce");
    // root: each rank names itself the root
    expect_refused(torc_dist_broadcast(u, r, NULL), "this rank's broadcast is from rank", "broadcasts from other roots");
    // dtype: f64 on rank 0, f32 elsewhere
    torc_tensor *v = torc_full(TORC_SHAPE(8), 2.0, r == 0 ? TORC_DTYPE_F64 : TORC_DTYPE_F32);
    expect_refused(torc_dist_all_reduce(v, TORC_REDUCE_SUM, NULL), "another rank's of", "all_reduce of other dtypes");
    // the job goes on: an agreeing all-reduce works
    torc_tensor *ok = torc_full(TORC_SHAPE(4), 1.0, TORC_DTYPE_F32);
    CHECK(torc_dist_all_reduce(ok, TORC_REDUCE_SUM, NULL));
    expect_untouched(ok, (double)W, "all_reduce after the refusals");
    // torc_dist_check_same: the first setting that differs, rank 0's value and the first other
    char lr[16];
    snprintf(lr, sizeof lr, "%g", r == W - 1 ? 0.02 : 0.01);
    const char *names[] = {"--dim", "--lr"}, *vals[] = {"32", lr};
    CHECK(torc_dist_check_same(1, names, vals));
    snprintf(want, sizeof want, "the ranks disagree on --lr: rank 0 has 0.01, rank %d has 0.02", W - 1);
    expect_refused(torc_dist_check_same(2, names, vals), want, "torc_dist_check_same");
    torc_scope_pop();
    // torc_ddp_new: other bucket caps on each rank, then another model on the last rank
    torc_generator *gen = torc_generator_new(1);
    for (int variant = 0; variant < 2; variant++) {
        const int64_t D = variant == 1 && r == W - 1 ? 8 : 16;
        torc_module *m = torc_cruncher_new(D, 2, TORC_DTYPE_F32, gen);
        CHECK_PTR(m);
        torc_tensor *params[8];
        const int np = torc_module_param_count(m);
        for (int i = 0; i < np; i++) params[i] = torc_module_param(m, i);
        torc_ddp_options dopt = TORC_DDP_OPTIONS_DEFAULT;
        dopt.first_bucket_bytes = 64;
        dopt.bucket_cap_bytes = variant == 0 ? 256 * (r + 1) : 256;
        torc_ddp *ddp = torc_ddp_new(np, params, &dopt);
        if (ddp) FAIL("torc_ddp_new accepted ranks that disagree (variant %d)", variant);
        if (variant == 0) snprintf(want, sizeof want, "torc_ddp_new: the ranks disagree on bucket_cap_bytes: rank 0 has 256, rank 1 has 512");
        else snprintf(want, sizeof want, "torc_ddp_new: the ranks disagree on parameter 0: rank 0 has [16, 16] float32, rank %d has [8, 8] float32", W - 1);
        expect_refused(TORC_ERR_INVALID_ARG, want, "torc_ddp_new");
        torc_module_free(m);
    }
    torc_generator_free(gen);
    if (r == 0) printf("mpi_test: %d ranks that disagree were refused on every rank, nothing written\n", W);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: mpi_test collectives | train [options]\n");
        return 2;
    }
    if (torc_dist_init(NULL)) {
        fprintf(stderr, "mpi_test: %s\n", torc_last_error());
        return 1;
    }
    g_rank = torc_dist_rank();
    // A device-memory plugin (nccl) runs this process's collectives on one device: tensors go
    // there (the default backend's device of that index, as torch.cuda.set_device(local_rank)).
    if (torc_dist_device_index() >= 0) {
        const char *cur = torc_device_name(torc_default_device());
        char name[64];
        snprintf(name, sizeof name, "%.*s:%d", (int)strcspn(cur, ":"), cur, torc_dist_device_index());
        CHECK(torc_set_default_device(torc_device_get(name)));
    }
    if (!strcmp(argv[1], "collectives")) {
        test_collectives();
    } else if (!strcmp(argv[1], "mismatch")) {
        test_mismatch();
    } else if (!strcmp(argv[1], "train")) {
        train_opts o = {.optim = "sgd", .steps = 20, .batch = 32};
        for (int i = 2; i < argc; i++) {
            const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
            if (!strcmp(a, "--deterministic")) o.deterministic = true;
            else if (!strcmp(a, "--unused")) o.unused = true;
            else if (!strcmp(a, "--optim")) o.optim = v, i++;
            else if (!strcmp(a, "--out")) o.out = v, i++;
            else if (!strcmp(a, "--save")) o.save = v, i++;
            else if (!strcmp(a, "--resume")) o.resume = v, i++;
            else if (!strcmp(a, "--steps")) o.steps = atoll(v), i++;
            else if (!strcmp(a, "--batch")) o.batch = atoll(v), i++;
            else if (!strcmp(a, "--save-at")) o.save_at = atoll(v), i++;
            else if (!strcmp(a, "--die-at")) o.die_at = atoll(v), i++;
            else if (!strcmp(a, "--hang-at")) o.hang_at = atoll(v), i++;
            else FAIL("unknown option %s", a);
        }
        train(&o);
    } else {
        FAIL("unknown mode %s", argv[1]);
    }
    CHECK(torc_dist_shutdown());
    return 0;
}
