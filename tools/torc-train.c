// tools/torc-train.c — the course's training loop as a command: a Cruncher learns y = x @ w
// with w = 0..D-1 (mse_loss, backward, step, zero_grad), with checkpoints and an accounting summary.
// --model gpt (the default with --data) trains a GPT-2 on token files instead: tools/train_gpt.c.
//
// Shapes: B = batch, D = dim, L = layers. x (B, D) ~ randn, y (B) = x @ arange(D).
// The Cruncher is L Linear(D, D) without bias ("layers.i.weight", (D, D)) and a Linear(D, 1)
// ("final.weight", (D, 1)); its forward is x -> x @ W0 @ ... @ W(L-1) @ Wf, squeezed to (B).
// Under `mpirun -np N`, B is the global batch: rank r trains on rows [r*B/N, (r+1)*B/N) of the
// batch one process would draw, with DDP averaging the gradients (--micro-batches M: the batch
// in M pieces, M/N a rank, accumulated before one reduction; --deterministic: their gradients
// summed in one fixed tree whatever N). Rank 0 prints and saves; the ranks first check that
// they were all started with the same settings.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "torc/optim.h"
#include "torc/torc.h"

#include "train_args.h"
#include "train_gpt.h"

// "torc-train: rank 1: " before a message, unless the message names its rank already (the comm
// plugin's errors do).
static void vsay(const char *fmt, va_list ap) {
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    int r, len = 0;
    const bool named = sscanf(msg, "rank %d:%n", &r, &len) == 1 && len > 0;
    if (torc_dist_world_size() > 1 && !named) fprintf(stderr, "torc-train: rank %d: %s\n", torc_dist_rank(), msg);
    else fprintf(stderr, "torc-train: %s\n", msg);
}

// In a data-parallel job a failing rank names itself and ends the job (the others would wait
// for it in their next collective).
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    if (torc_dist_world_size() > 1) torc_dist_abort(1);
    exit(1);
}

// For a failure every rank sees at once (the ranks' settings differ): each says so and leaves
// the job, no abort needed.
static void die_together(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_together(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    torc_dist_shutdown();
    exit(1);
}

// Exit-on-error checks: tools only, never the library.
#define CHECK(call) do { if ((call) != TORC_OK) die("%s", torc_last_error()); } while (0)
#define CHECK_PTR(p) do { if (!(p)) die("%s", torc_last_error()); } while (0)

// ---- the ranks agree on what they train ----
// Every setting that must be the same on every rank (the model, the batch and its split, the
// steps, the seed, the optimizer and its hyperparameters as they stand after a resume, mixed
// precision, the backend, the buckets): compared across the job before training starts, so
// that a rank started with other options is refused by name instead of training something else
// or hanging in a collective.
// x with the fewest digits that read back as x (0.9, not 0.90000000000000002).
static const char *shortest(double x, char buf[32]) {
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, 32, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

static void check_ranks_agree(const train_options *o, int64_t M, const torc_device *dev, const torc_optimizer *opt,
                              int64_t step) {
    enum { MAXF = 64 };
    char name[MAXF][48], value[MAXF][96];
    const char *names[MAXF], *values[MAXF];
    int n = 0;
#define FIELD(nm, ...) \
    do { \
        if (n < MAXF) { \
            snprintf(name[n], sizeof name[n], "%s", nm); \
            snprintf(value[n], sizeof value[n], __VA_ARGS__); \
            n++; \
        } \
    } while (0)
    FIELD("--dim", "%lld", (long long)o->dim);
    FIELD("--layers", "%d", o->layers);
    FIELD("--batch", "%lld", (long long)o->batch);
    FIELD("--deterministic", "%s", o->deterministic ? "on" : "off");
    FIELD("--micro-batches", "%lld", (long long)M);
    FIELD("--steps", "%lld", (long long)o->steps);
    FIELD("--seed", "%llu", (unsigned long long)o->seed);
    FIELD("--autocast", "%s", o->autocast == TORC_DTYPE_F32 ? "off" : o->autocast == TORC_DTYPE_F8_E4M3FN ? "fp8"
                              : torc_dtype_name(o->autocast));
    char num[32];
    FIELD("--loss-scale", "%s", shortest(o->autocast == TORC_DTYPE_F16 ? o->loss_scale : 0.0, num));
    FIELD("--bucket-cap-mb", "%s", shortest(o->bucket_cap_mb, num));
    FIELD("--backend", "%s", torc_device_backend_name(dev));
    FIELD("the starting step (--resume)", "%lld", (long long)step);
    FIELD("--optim", "%s", torc_optimizer_name(opt));
    const torc_optim_vtable *vt = torc_optimizer_vtable(opt);
    for (int i = 0; vt && i < vt->n_hparams; i++) {
        double v[TORC_OPTIM_HP_MAX_VALUES];
        char hp[48], list[96] = "";
        if (torc_optimizer_get_hparam(opt, 0, vt->hparams[i].name, v)) die("%s", torc_last_error());
        for (int k = 0; k < vt->hparams[i].n_values && k < TORC_OPTIM_HP_MAX_VALUES; k++) {
            const size_t u = strlen(list);
            snprintf(list + u, sizeof list - u, "%s%s", k ? "," : "", shortest(v[k], num));
        }
        snprintf(hp, sizeof hp, strcmp(vt->hparams[i].name, "lr") ? "--hp %s" : "--%s", vt->hparams[i].name);
        FIELD(hp, "%s", list);
    }
#undef FIELD
    for (int i = 0; i < n; i++) names[i] = name[i], values[i] = value[i];
    if (torc_dist_check_same(n, names, values))
        die_together("%s (start every rank with the same options)", torc_last_error());
}

// ---- the learning rate ----
// Without --lr (or --hp lr=) an optimizer runs at its own declared default, PyTorch's for the
// bundled ones, except where that default diverges on the Cruncher. SGD's 0.001 does: the
// targets x @ arange(D) start the loss near 1e4 (D=32 L=2 B=64, the default run), and on the
// reference it overflows at step 60; 3e-4 converges and 1e-4, a margin of 10 below the
// divergence, reaches 6e-11 by step 300 (seeds 0 to 4; 6e-8 with momentum 0.9). The other
// bundled defaults converge there as they are: by step 300 adam and adamw (0.001) from 1e4 to 2.5,
// adagrad (0.01) to 2.1, rmsprop (0.01) to 4e-6. A larger --dim needs a smaller SGD lr still.
// The summary's line for the ops the device's backend declined that ran on the host through
// TORC_DEVICE_FALLBACK=1 (the whole run, the model's initialisation included), most first.
static void print_fallbacks(void) {
    const uint64_t total = torc_fallback_count(-1);
    if (!total) return;
    uint64_t n[TORC_OP_COUNT];
    for (int i = 0; i < TORC_OP_COUNT; i++) n[i] = torc_fallback_count(i);
    printf("  fallback          %llu op%s ran on the host (", (unsigned long long)total, total == 1 ? "" : "s");
    for (bool first = true;; first = false) {
        int best = -1;
        for (int i = 0; i < TORC_OP_COUNT; i++)
            if (n[i] && (best < 0 || n[i] > n[best])) best = i;
        if (best < 0) break;
        printf("%s%s %llu", first ? "" : ", ", torc_op_name((torc_opcode)best), (unsigned long long)n[best]);
        n[best] = 0;
    }
    printf("; TORC_DEVICE_FALLBACK=1)\n");
}

static const struct { const char *optim; double lr; } cruncher_lr[] = {{"sgd", 1e-4}};

// The optimizer's declared default for hyperparameter name, or NAN.
static double declared_default(const torc_optimizer *opt, const char *name) {
    const torc_optim_vtable *vt = torc_optimizer_vtable(opt);
    for (int i = 0; vt && i < vt->n_hparams; i++)
        if (!strcmp(vt->hparams[i].name, name)) return vt->hparams[i].defaults[0];
    return NAN;
}

// "lr=0.001 momentum=0.9 nesterov=true": the group's learning rate, then every hyperparameter
// whose value differs from the plugin's default, as read back from the optimizer (so after
// --resume these are the checkpoint's), each number in the fewest digits that read back.
static const char *hparams_str(const torc_optimizer *opt, char *buf, size_t cap) {
    const torc_optim_vtable *vt = torc_optimizer_vtable(opt);
    size_t used = 0;
    buf[0] = '\0';
    for (int pass = 0; pass < 2; pass++)  // lr first
        for (int i = 0; vt && i < vt->n_hparams; i++) {
            const torc_optim_hparam *h = &vt->hparams[i];
            const bool is_lr = !strcmp(h->name, "lr");
            double v[TORC_OPTIM_HP_MAX_VALUES];
            if ((pass == 0) != is_lr || torc_optimizer_get_hparam(opt, 0, h->name, v)) continue;
            bool same = !is_lr;
            for (int k = 0; k < h->n_values && k < TORC_OPTIM_HP_MAX_VALUES; k++) same = same && v[k] == h->defaults[k];
            if (same) continue;
            char item[256], num[32];
            int len = snprintf(item, sizeof item, "%s%s=", used ? " " : "", h->name);
            for (int k = 0; k < h->n_values && k < TORC_OPTIM_HP_MAX_VALUES && len < (int)sizeof item; k++)
                len += snprintf(item + len, sizeof item - (size_t)len, "%s%s", k ? "," : "",
                                h->kind == TORC_OPTIM_HP_BOOL ? (v[k] != 0 ? "true" : "false") : shortest(v[k], num));
            if (used < cap) used += (size_t)snprintf(buf + used, cap - used, "%s", item);
        }
    return buf;
}

// ---- pretrained weights ----
// Whether the file at path reads and carries torc_checkpoint_save's format mark (a file of
// weights alone, from Python for instance, does not).
static bool is_torc_checkpoint(const char *path) {
    torc_state_dict *sd = torc_load(path, NULL);
    const bool marked = sd && torc_state_dict_get_meta(sd, "torc.format");
    torc_state_dict_free(sd);
    return marked;
}

// torc's Linear computes y = x @ W with W (in, out); PyTorch's nn.Linear stores (out, in) and
// computes x @ W.T. A square layer's shape cannot tell the two apart, but the final layer's can:
// final.weight (1, D) instead of (D, 1) is a file in nn.Linear's layout, whose square layers
// would load transposed without an error. Writes " final.weight [1, D] is nn.Linear's (out, in)
// layout: ..." to hint if the file at path holds such a final.weight (D > 1), else "".
static const char *linear_layout(const char *path, int64_t D, char *hint, size_t cap) {
    hint[0] = '\0';
    if (D <= 1) return hint;
    torc_state_dict *sd = torc_load(path, NULL);
    torc_tensor *w = sd ? torc_state_dict_get(sd, "final.weight") : NULL;
    const bool transposed = w && torc_ndim(w) == 2 && torc_size(w, 0) == 1 && torc_size(w, 1) == D;
    torc_release(w);
    torc_state_dict_free(sd);
    if (transposed)
        snprintf(hint, cap, " final.weight [1, %lld] is nn.Linear's (out, in) layout: torc-train reads every weight as "
                 "(in, out), y = x @ W; save each nn.Linear weight transposed (weight.T), the square ones too",
                 (long long)D);
    return hint;
}

static void progress_bar(int64_t step, int64_t total, double loss, double rate) {
    const int width = 30;
    int filled = total ? (int)((double)step / (double)total * width) : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    printf("\r[%s] step %lld/%lld  loss %-11.4e %8.1f steps/s", bar, (long long)step, (long long)total, loss, rate);
    fflush(stdout);
}

// ---- the data: the course's get_batch ----
// x (B, D) ~ randn from gen, y (B) = x @ w with w = arange(D) (B, D) @ (D) -> (B). The data's
// FLOPs are not the model's: they are added to *data_flops, which the summary leaves out.
static void get_batch(int64_t B, int64_t D, const torc_tensor *w, torc_generator *gen, torc_tensor **x, torc_tensor **y,
                      uint64_t *data_flops) {
    const uint64_t f0 = torc_flops(TORC_PHASE_FORWARD, -1, -1);
    *x = torc_randn(TORC_SHAPE(B, D), TORC_DTYPE_F32, gen);
    CHECK_PTR(*x);
    *y = torc_matmul(*x, w);
    CHECK_PTR(*y);
    *data_flops += torc_flops(TORC_PHASE_FORWARD, -1, -1) - f0;
}

// Rows [row0, row0 + rows) of the batch get_batch(B, ...) would draw from gen at (seed, offset):
// element i of a draw uses counter offset + i, so a rank draws only its own rows. The caller
// moves gen past the whole batch afterwards.
static void get_rows(int64_t D, int64_t row0, int64_t rows, const torc_tensor *w, torc_generator *gen, uint64_t seed,
                     uint64_t offset, torc_tensor **x, torc_tensor **y, uint64_t *data_flops) {
    torc_generator_set_state(gen, seed, offset + (uint64_t)(row0 * D));
    get_batch(rows, D, w, gen, x, y, data_flops);
}

// With --autocast f16 a checkpoint also holds the GradScaler's scale (f32) and growth tracker
// (i64) as zero-dim tensors, so a resumed run scales its losses as the straight one does.
static const char *const scaler_names[2] = {"grad_scaler.scale", "grad_scaler._growth_tracker"};

static void scaler_tensors(const torc_grad_scaler *scaler, torc_tensor **t) {
    torc_grad_scaler_state st;
    CHECK(torc_grad_scaler_get_state(scaler, &st));
    t[0] = torc_scalar_tensor(st.scale, TORC_DTYPE_F32);
    t[1] = torc_scalar_tensor((double)st.growth_tracker, TORC_DTYPE_I64);
    CHECK_PTR(t[0]);
    CHECK_PTR(t[1]);
}

static void save(const char *path, torc_module *model, const torc_optimizer *opt, int64_t step, torc_generator *gen,
                 const torc_grad_scaler *scaler) {
    if (torc_dist_rank() != 0) return;  // every rank holds the same state: rank 0 writes it
    const int n = torc_module_param_count(model);
    if (n < 0) die("%s", torc_last_error());
    const char *names[258];
    torc_tensor *tensors[258];
    if (n > 256) die("model has more than 256 parameters");
    for (int i = 0; i < n; i++) {
        names[i] = torc_module_param_name(model, i);
        tensors[i] = torc_module_param(model, i);
    }
    torc_scope_push();
    if (scaler) scaler_tensors(scaler, tensors + n), names[n] = scaler_names[0], names[n + 1] = scaler_names[1];
    CHECK(torc_checkpoint_save(path, n + (scaler ? 2 : 0), names, tensors, opt, step, gen));
    torc_scope_pop();
}

int main(int argc, char **argv) {
    train_options o;
    char err[512];
    switch (train_args_parse(argc, argv, &o, err, sizeof err)) {
    case TRAIN_ARGS_HELP: train_args_usage(stdout); return 0;
    case TRAIN_ARGS_ERROR: die("%s", err); break;
    case TRAIN_ARGS_OK: break;
    }
    if (!strcmp(o.model, "gpt")) return train_gpt(&o);  // tools/train_gpt.c
    // ---- data parallel: on under mpirun (or with TORC_COMM, --dist, --deterministic) ----
    const bool under_mpirun = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
    const char *tc = getenv("TORC_COMM");
    const bool dist = strcmp(o.dist, "off") && (strcmp(o.dist, "auto") || under_mpirun || (tc && *tc) || o.deterministic);
    if (!dist && o.deterministic) die("--deterministic needs data parallel (--dist auto, mpi or nccl)");
    // One process of a larger mpirun job that stays out of it would train alone, and the others
    // would wait for it in MPI_Init with no time limit: refused before anything starts.
    const char *launched = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_SIZE") : getenv("PMI_SIZE");
    if (!dist && launched && atoi(launched) > 1)
        die("--dist off, but this process is one of %d that mpirun started (%s=%s): it would train alone while the "
            "others waited for it; drop --dist off, or run a single process without mpirun",
            atoi(launched), getenv("OMPI_COMM_WORLD_SIZE") ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE", launched);
    if (dist) CHECK(torc_dist_init(strcmp(o.dist, "auto") ? o.dist : NULL));
    const int rank = torc_dist_rank(), world = torc_dist_world_size();
    if (rank != 0 && !freopen("/dev/null", "w", stdout)) die("cannot silence rank %d's output", rank);
    // The global batch in M fixed pieces of B / M rows; each rank runs M / world of them, one
    // backward each, and reduces once (gradient accumulation). Deterministic mode sums the
    // pieces in a fixed tree (default M = 4); otherwise the default is one piece a process.
    const int64_t M = o.micro_batches ? o.micro_batches : o.deterministic ? 4 : world;
    if (o.deterministic && (M % world || o.batch % M))
        die("--deterministic: --micro-batches %lld must be a multiple of the %d processes and divide --batch %lld",
            (long long)M, world, (long long)o.batch);
    if (!o.micro_batches && o.batch % M)
        die("--batch %lld (the global batch) must be divisible by the %d processes", (long long)o.batch, world);
    if (M % world || o.batch % M)
        die("--micro-batches %lld must be a multiple of the %d process%s and divide --batch %lld", (long long)M, world,
            world > 1 ? "es" : "", (long long)o.batch);
    // ---- device, model, optimizer ----
    torc_device *dev = train_open_device(o.backend, dist);
    CHECK_PTR(dev);
    torc_device_info info;
    CHECK(torc_device_info_get(dev, &info));
    torc_generator *gen = torc_generator_new(o.seed);
    CHECK_PTR(gen);
    torc_module *model = torc_cruncher_new(o.dim, o.layers, TORC_DTYPE_F32, gen);
    CHECK_PTR(model);
    const int n_params = torc_module_param_count(model);
    if (n_params < 0) die("%s", torc_last_error());  // out of memory listing them: not an empty list
    torc_tensor *params[258];
    if (n_params > 256) die("model has more than 256 parameters");
    for (int i = 0; i < n_params; i++) params[i] = torc_module_param(model, i);
    // --lr, then the --hp settings (a later setting wins, so --hp lr= does too); neither: the
    // optimizer's own default lr, or cruncher_lr's where the plugin's diverges here.
    char settings[1200];
    if (o.lr_given) snprintf(settings, sizeof settings, "lr=%.17g%s", o.lr, o.hparams);
    else snprintf(settings, sizeof settings, "%.1023s", o.hparams[0] ? o.hparams + 1 : "");  // o.hparams: " a=1 b=2"
    torc_optimizer *opt = torc_optimizer_new(o.optim, n_params, params, settings);
    CHECK_PTR(opt);
    char lr_note[160] = "";  // where the learning rate came from, when not from the command line
    if (!o.lr_given && !strstr(o.hparams, " lr=") && !o.resume) {
        char num[32];
        const double own = declared_default(opt, "lr");
        if (!isnan(own)) snprintf(lr_note, sizeof lr_note, ", %s's default", torc_optimizer_name(opt));
        for (size_t i = 0; i < sizeof cruncher_lr / sizeof cruncher_lr[0]; i++) {
            if (isnan(own) || strcmp(torc_optimizer_name(opt), cruncher_lr[i].optim)) continue;
            CHECK(torc_optimizer_set_lr(opt, cruncher_lr[i].lr));
            snprintf(lr_note, sizeof lr_note, ", torc-train's default for %s: its own %s diverges on the Cruncher",
                     cruncher_lr[i].optim, shortest(own, num));
        }
    }
    torc_grad_scaler *scaler = NULL;  // f16 needs loss scaling; bf16 and fp8 do not
    torc_grad_scaler_options so = TORC_GRAD_SCALER_DEFAULTS;
    so.init_scale = o.loss_scale;
    if (o.autocast == TORC_DTYPE_F16) CHECK_PTR(scaler = torc_grad_scaler_new(&so));
    int64_t skipped = 0;  // steps the scaler skipped (inf/NaN gradients)
    torc_tensor *w = torc_arange(0, (double)o.dim, 1, TORC_DTYPE_F32);  // (D) the true weights
    CHECK_PTR(w);
    int64_t step = 0;
    if (o.resume) {
        const char *names[258];
        for (int i = 0; i < n_params; i++) names[i] = torc_module_param_name(model, i);
        torc_scope_push();
        if (scaler) scaler_tensors(scaler, params + n_params), names[n_params] = scaler_names[0],
                    names[n_params + 1] = scaler_names[1];
        if (torc_checkpoint_load(o.resume, n_params + (scaler ? 2 : 0), names, params, opt, &step, gen)) {
            // Point to --init-from only where it would work: the file holds this model's weights
            // and nothing else torc needs (a truncated or mismatched file fails there the same way).
            char msg[2048];
            snprintf(msg, sizeof msg, "%s", torc_last_error());
            char hint[256];
            const bool weights_alone = !is_torc_checkpoint(o.resume) &&
                                       !torc_checkpoint_load(o.resume, n_params, names, params, NULL, NULL, NULL);
            die("%s%s", msg, weights_alone ? " (the file holds weights alone: start from them with --init-from)"
                                           : linear_layout(o.resume, o.dim, hint, sizeof hint));
        }
        if (scaler) {
            torc_grad_scaler_state st;
            int64_t tracker;
            CHECK(torc_grad_scaler_get_state(scaler, &st));
            CHECK(torc_item(params[n_params], &st.scale));
            CHECK(torc_item_i64(params[n_params + 1], &tracker));
            st.growth_tracker = tracker;
            CHECK(torc_grad_scaler_set_state(scaler, &st));
        }
        torc_scope_pop();
    }
    if (o.init_from) {  // weights only: every model tensor must be there, with its shape and dtype
        const char *names[256];
        for (int i = 0; i < n_params; i++) names[i] = torc_module_param_name(model, i);
        if (torc_checkpoint_load(o.init_from, n_params, names, params, NULL, NULL, NULL)) {
            char msg[2048], hint[256];
            snprintf(msg, sizeof msg, "%s", torc_last_error());
            die("%s%s", msg, linear_layout(o.init_from, o.dim, hint, sizeof hint));
        }
    }
    if (dist) check_ranks_agree(&o, M, dev, opt, step);
    torc_ddp *ddp = NULL;
    if (dist) {  // after a resume: rank 0's weights (all ranks read the same file) go to every rank
        torc_ddp_options dopt = TORC_DDP_OPTIONS_DEFAULT;
        dopt.bucket_cap_bytes = (int64_t)(o.bucket_cap_mb * 1048576.0);
        if (dopt.first_bucket_bytes > dopt.bucket_cap_bytes) dopt.first_bucket_bytes = dopt.bucket_cap_bytes;
        dopt.deterministic = o.deterministic;
        dopt.micro_batches = (int)M;
        CHECK_PTR(ddp = torc_ddp_new(n_params, params, &dopt));
    }
    // No progress bar under a launcher: mpirun hands its processes a terminal of its own even
    // when its output goes to a file or a pipe.
    const bool tty = isatty(STDOUT_FILENO) && rank == 0 && !under_mpirun;
    const int64_t todo = o.steps > step ? o.steps - step : 0;
    const int64_t log_every = o.log_every ? o.log_every : (todo >= 10 ? todo / 10 : 1);
    char hp_text[1024];
    printf("torc-train: Cruncher(dim=%lld, layers=%d), batch %lld, %s (%s%s) on %s (%s)\n", (long long)o.dim, o.layers,
           (long long)o.batch, torc_optimizer_name(opt), hparams_str(opt, hp_text, sizeof hp_text), lr_note,
           torc_device_name(dev), info.name);
    if (o.autocast != TORC_DTYPE_F32)
        printf("  autocast %s, float32 master weights%s\n", o.autocast == TORC_DTYPE_F8_E4M3FN ? "fp8 (e4m3/e5m2)"
               : torc_dtype_name(o.autocast), scaler ? ", dynamic loss scaling" : "");
    if (o.resume) printf("  resumed from %s at step %lld\n", o.resume, (long long)step);
    if (o.init_from) printf("  weights from %s\n", o.init_from);
    if (ddp)
        printf("  data parallel: %d process%s (%s), %lld rows each per step%s\n", world, world > 1 ? "es" : "",
               tc && *tc && !strcmp(o.dist, "auto") ? tc : strcmp(o.dist, "auto") ? o.dist : "mpi",
               (long long)(o.batch / world), o.deterministic ? ", deterministic" : "");
    if (M > world)
        printf("  micro-batches: %lld of %lld rows, %lld a process, gradients accumulated before one reduction\n",
               (long long)M, (long long)(o.batch / M), (long long)(M / world));

    // ---- the loop ----
    torc_flops_reset();
    torc_memory_reset_peak(dev);
    uint64_t model_fwd = 0, model_bwd = 0, optim_flops = 0;
    double first_loss = NAN, loss = NAN;
    const double t0 = train_now();
    // The first step loads libraries and builds kernels and primitives (a GPU's first step took
    // 0.6 s where the others took 0.4 ms): rates and MFU are of the steps after it.
    double t1 = t0, first_flops = 0, last_log_t = t0;
    int64_t last_log_done = 0;
    double last_draw = -1;  // the bar is redrawn at most 20 times a second
    double exposed = 0;     // seconds this rank waited for communication after backward
    // This rank's pieces of the global batch: [micro_first, micro_first + micro_count) of M.
    int micro_count = (int)(M / world), micro_first = rank * micro_count;
    if (ddp && o.deterministic) torc_ddp_micro_batches(ddp, &micro_first, &micro_count);
    const int64_t rows = o.batch / M;
    // Accumulated gradients are a sum: each piece's loss counts 1 / micro_count (a power of two,
    // so exact) for their mean. Deterministic mode divides its fixed tree's sum itself.
    const bool accumulate = micro_count > 1 && !o.deterministic;
    for (int64_t done = 0; step < o.steps; step++, done++) {
        torc_scope_push();
        uint64_t seed, offset;
        torc_generator_get_state(gen, &seed, &offset);
        const uint64_t f0 = torc_flops(TORC_PHASE_FORWARD, -1, -1), b0 = torc_flops(TORC_PHASE_BACKWARD, -1, -1);
        uint64_t data_flops = 0;  // the batch's target y = x @ w: not the model's
        double losses[64];  // this rank's micro-batch losses
        torc_tensor *l = NULL;
        for (int k = 0; k < micro_count; k++) {
            torc_tensor *x, *y;
            get_rows(o.dim, (micro_first + k) * rows, rows, w, gen, seed, offset, &x, &y, &data_flops);
            if (o.autocast != TORC_DTYPE_F32) CHECK(torc_autocast_begin(o.autocast));
            torc_tensor *pred = torc_module_forward(model, x);  // (rows)
            CHECK_PTR(pred);
            l = torc_mse_loss(pred, y);                         // () f32, also under autocast
            CHECK_PTR(l);
            if (o.autocast != TORC_DTYPE_F32) CHECK(torc_autocast_end());
            torc_tensor *lm = accumulate ? torc_mul_scalar(l, torc_scalar_f(1.0 / micro_count)) : l;
            CHECK_PTR(lm);
            torc_tensor *lb = scaler ? torc_grad_scaler_scale(scaler, lm) : lm;
            CHECK_PTR(lb);
            // Plain mode: the pieces before the last only accumulate; the last one's backward
            // reduces (torc_ddp_begin arms it). Deterministic mode: every piece is announced.
            if (ddp && (o.deterministic || k == micro_count - 1)) CHECK(torc_ddp_begin(ddp, micro_first + k));
            CHECK(torc_backward(lb, NULL, false));
            CHECK(torc_item(l, &losses[k]));
        }
        torc_generator_set_state(gen, seed, offset + (uint64_t)(o.batch * o.dim));  // past the whole batch
        if (ddp) {  // the averaged gradients, and the loss of the global batch
            const double tw = train_now();
            CHECK(torc_ddp_finish(ddp));
            CHECK(torc_ddp_reduce_loss(ddp, losses, micro_count, &losses[0]));
            exposed += train_now() - tw;
        } else {
            for (int k = 1; k < micro_count; k++) losses[0] += losses[k];
            losses[0] /= micro_count;
        }
        const uint64_t f1 = torc_flops(TORC_PHASE_FORWARD, -1, -1);
        model_fwd += f1 - f0 - data_flops;
        model_bwd += torc_flops(TORC_PHASE_BACKWARD, -1, -1) - b0;
        CHECK(train_optimizer_step(opt, scaler, &skipped));  // the scaler skips a step with inf/NaN gradients
        optim_flops += torc_flops(TORC_PHASE_FORWARD, -1, -1) - f1;
        loss = losses[0];
        torc_scope_pop();
        if (done == 0) {
            first_loss = loss;
            CHECK(torc_device_synchronize(dev));
            t1 = last_log_t = train_now(), last_log_done = 1, first_flops = (double)(model_fwd + model_bwd);
        }
        if (!isfinite(loss)) {
            if (tty) printf("\n");
            die("the loss is %g at step %lld: diverged (lower --lr?)", loss, (long long)step + 1);
        }
        const double t = train_now();
        if (tty && (t - last_draw >= 0.05 || step + 1 == o.steps)) {
            progress_bar(step + 1, o.steps, loss, done > 0 ? (double)done / (t - t1) : 1.0 / (t - t0));
            last_draw = t;
        } else if ((done + 1) % log_every == 0 || step + 1 == o.steps) {  // the rate since the last line
            const double rate = done + 1 > last_log_done && t > last_log_t ? (double)(done + 1 - last_log_done) / (t - last_log_t)
                                                                           : 1.0 / (t - t0);
            printf("step %lld/%lld  loss %.6e  %.1f steps/s\n", (long long)step + 1, (long long)o.steps, loss, rate);
            last_log_t = t, last_log_done = done + 1;
        }
        if (o.checkpoint && o.every && (step + 1) % o.every == 0) save(o.checkpoint, model, opt, step + 1, gen, scaler);
    }
    CHECK(torc_device_synchronize(dev));
    const double now_done = train_now(), elapsed = now_done - t0, model_flops = (double)(model_fwd + model_bwd);
    if (tty && todo) printf("\n");
    if (o.checkpoint && !(o.every && step % o.every == 0 && todo)) save(o.checkpoint, model, opt, step, gen, scaler);

    // ---- summary ----
    char b1[32], b2[32], b3[32];
    const int64_t n = torc_module_num_parameters(model);
    printf("\nsummary\n");
    printf("  parameters        %lld (%s as float32)\n", (long long)n, train_bytes_str((uint64_t)n * 4, b1, sizeof b1));
    if (todo)
        printf("  loss              %.6e at the first step -> %.6e at step %lld\n", first_loss, loss, (long long)step);
    // after the first step (all of it where there was only one)
    const double steady = todo > 1 ? now_done - t1 : elapsed, steady_flops = todo > 1 ? model_flops - first_flops : model_flops;
    if (todo > 1)
        printf("  steps             %lld in %.3f s: the first %.3f s (loading, building kernels), then %.1f steps/s\n",
               (long long)todo, elapsed, t1 - t0, steady > 0 ? (double)(todo - 1) / steady : 0.0);
    else
        printf("  steps             %lld in %.3f s\n", (long long)todo, elapsed);
    if (scaler)
        printf("  grad scaler       scale %g at the end, %lld of %lld steps skipped (inf/NaN gradients)\n",
               torc_grad_scaler_get_scale(scaler), (long long)skipped, (long long)todo);
    torc_memory_stats ms;
    CHECK(torc_memory_stats_get(dev, &ms));
    static const struct { torc_mem_tag tag; const char *label; } cats[] = {
        {TORC_MEM_PARAMETER, "params"},
        {TORC_MEM_GRADIENT, "grads"},
        {TORC_MEM_OPTIMIZER_STATE, "optimizer state"},
        {TORC_MEM_ACTIVATION, "activations"},
    };
    printf("  memory on %s     now / peak\n", torc_device_name(dev));
    for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++)
        printf("    %-16s %10s / %s\n", cats[i].label, train_bytes_str(ms.in_use[cats[i].tag], b1, sizeof b1),
               train_bytes_str(ms.peak[cats[i].tag], b2, sizeof b2));
    printf("    %-16s %10s / %s\n", "total", train_bytes_str(ms.total_in_use, b1, sizeof b1),
           train_bytes_str(ms.total_peak, b2, sizeof b2));
    printf("  FLOPs             forward %s, backward %s (model), optimizer %s\n", train_si_str(3, (double)model_fwd, "", b1, sizeof b1),
           train_si_str(3, (double)model_bwd, "", b2, sizeof b2), train_si_str(3, (double)optim_flops, "", b3, sizeof b3));
    const double achieved = steady > 0 ? steady_flops / steady : 0;
    printf("  achieved          %s (model forward + backward over the wall time%s)\n", train_si_str(3, achieved, "FLOP/s", b1, sizeof b1),
           todo > 1 ? " of the steps after the first" : "");
    const torc_dtype mm_dtype = o.autocast == TORC_DTYPE_F8_E4M3FN ? TORC_DTYPE_F8_E4M3FN : o.autocast;
    const double peak = info.peak_flops[mm_dtype];
    if (peak > 0)
        printf("  MFU               %.2f%% of %s promised for %s (%s)\n", 100.0 * achieved / peak,
               train_si_str(3, peak, "FLOP/s", b2, sizeof b2), torc_dtype_name(mm_dtype), info.peak_source);
    else {  // the source of the device's promises, where it has some for other dtypes
        bool any = false;
        for (int d = 0; d < TORC_DTYPE_COUNT; d++) any = any || info.peak_flops[d] > 0;
        printf("  MFU               unknown: %s promises no FLOP/s for %s%s%s%s\n", torc_device_name(dev),
               torc_dtype_name(mm_dtype), any && info.peak_source[0] ? " (" : "", any ? info.peak_source : "",
               any && info.peak_source[0] ? ")" : "");
    }
    print_fallbacks();
    if (o.checkpoint) printf("  checkpoint        %s (step %lld)\n", o.checkpoint, (long long)step);
    if (ddp && todo) {
        torc_ddp_stats ds;
        CHECK(torc_ddp_stats_get(ddp, &ds));
        const double per = (double)todo;
        printf("  data parallel     %d processes, global batch %lld%s\n", world, (long long)o.batch,
               o.deterministic ? " (deterministic)" : "");
        printf("    %-16s %s per step (%s)\n", o.deterministic ? "all-gathered" : "all-reduced",
               train_bytes_str((uint64_t)ds.bytes_per_step, b1, sizeof b1), o.deterministic ? "each rank's sums" : "gradients");
        printf("    %-16s %.2f ms per step in flight, %.0f%% of it overlapped backward; %.2f ms per step waited after\n",
               "communication", 1e3 * ds.comm_s / per, ds.comm_s > 0 ? 100.0 * ds.hidden_s / ds.comm_s : 0.0,
               1e3 * exposed / per);
        printf("    %-16s %.0f%% (estimated: 1 - waited / step time; measure against 1 process for the real one)\n",
               "scaling eff.", elapsed > 0 ? 100.0 * (1.0 - exposed / elapsed) : 0.0);
    }

    torc_release(w);
    torc_ddp_free(ddp);
    if (dist) CHECK(torc_dist_shutdown());
    torc_grad_scaler_free(scaler);
    torc_optimizer_free(opt);
    torc_module_free(model);
    torc_generator_free(gen);
    return 0;
}
