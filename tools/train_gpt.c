// tools/train_gpt.c — torc-train --model gpt: nanoGPT's training loop in C on torc/gpt.h. Random
// windows of a token file (torc_get_batch), AdamW with weight decay on the matrices only, linear
// warmup then cosine decay, gradient clipping, accumulation, bf16/f16 autocast, val loss, samples,
// exact checkpoints, and a summary of what a step costs (FLOPs against the standard estimate,
// memory by category, MFU).
//
// Shapes: B = --batch, T = --block-size, C = --n-embd, L = --n-layer, NH = --n-head, V the vocab,
// Vp its padding to 128. A step is A = --grad-accum rounds of a (B, T) batch, each cut into
// M = --micro-batches pieces of B / M rows (one backward each): A M micro-batches a step.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "torc/gpt.h"
#include "torc/torc.h"

#include "train_args.h"
#include "train_gpt.h"

// ---- exit-on-error helpers: tools only, never the library ----
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (torc_dist_world_size() > 1) fprintf(stderr, "torc-train: rank %d: %s\n", torc_dist_rank(), msg);
    else fprintf(stderr, "torc-train: %s\n", msg);
    if (torc_dist_world_size() > 1) torc_dist_abort(1);  // the other ranks would wait for this one
    exit(1);
}
#define CHECK(call) do { if ((call) != TORC_OK) die("%s", torc_last_error()); } while (0)
#define CHECK_PTR(p) do { if (!(p)) die("%s", torc_last_error()); } while (0)

// ---- data ----
// Opens a token file, reads every token once (a vocabulary that does not fit the data is refused
// before the first step) and checks that it holds a window of T + 1 tokens.
static torc_dataset *open_tokens(const char *flag, const char *path, int64_t T, int64_t *max_token) {
    torc_dataset *ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 0);
    if (!ds) die("%s: %s", flag, torc_last_error());
    if (torc_tokens_check(ds, max_token)) die("%s: %s", flag, torc_last_error());
    const int64_t n = torc_dataset_numel(ds);
    if (n < T + 1)
        die("%s %s holds %lld tokens: --block-size %lld needs at least %lld (one window and its target)", flag, path,
            (long long)n, (long long)T, (long long)T + 1);
    return ds;
}

// ---- checkpoints ----
// One safetensors file, the format torc_checkpoint_save writes (so torc_checkpoint_load reads it):
// the model under Hugging Face's names (wte with its padding rows), the optimizer, the step and
// the generator (which also places the next batch: batches are drawn from it), plus the config as
// "gpt.*" metadata, so a resume of another config is refused by name, and torc-generate needs
// nothing else. With f16 autocast the GradScaler's state too.
static void save(const char *path, const torc_gpt *m, const torc_optimizer *opt, int64_t step, const torc_generator *gen,
                 const torc_grad_scaler *scaler) {
    if (torc_dist_rank() != 0) return;  // every rank holds the same state: rank 0 writes it
    torc_state_dict *sd = torc_state_dict_new();
    CHECK_PTR(sd);
    char v[32];
    uint64_t seed, offset;
    torc_generator_get_state(gen, &seed, &offset);
    CHECK(torc_gpt_state_dict(m, sd, false));
    CHECK(torc_optimizer_state_dict(opt, sd, "optimizer."));
    CHECK(torc_state_dict_set_meta(sd, "torc.format", "torc-checkpoint/1"));
    snprintf(v, sizeof v, "%lld", (long long)step);
    CHECK(torc_state_dict_set_meta(sd, "step", v));
    snprintf(v, sizeof v, "%llu", (unsigned long long)seed);
    CHECK(torc_state_dict_set_meta(sd, "generator.seed", v));
    snprintf(v, sizeof v, "%llu", (unsigned long long)offset);
    CHECK(torc_state_dict_set_meta(sd, "generator.offset", v));
    if (scaler) CHECK(torc_grad_scaler_state_dict(scaler, sd, NULL));
    CHECK(torc_save(sd, path));
    torc_state_dict_free(sd);
}

// The command line's config against the checkpoint's, field by field, then everything else by
// torc_checkpoint_load (which changes nothing unless all of it fits).
static void resume(const char *path, const torc_gpt_config *want, torc_gpt *m, torc_optimizer *opt, int64_t *step,
                   torc_generator *gen, torc_grad_scaler *scaler) {
    torc_state_dict *sd = torc_load(path, NULL);
    if (!sd) die("--resume: %s", torc_last_error());
    if (!torc_state_dict_get_meta(sd, "gpt.n_layer"))
        die("--resume %s: not a torc-train GPT checkpoint (no gpt.* config in its metadata)", path);
    torc_gpt_config have = {0};
    if (torc_gpt_config_from_state_dict(sd, &have)) die("--resume %s: %s", path, torc_last_error());
    const struct { const char *field, *flag; int64_t file, cmd; } f[] = {
        {"vocab_size", "--vocab-size", have.vocab_size, want->vocab_size},
        {"block_size", "--block-size", have.block_size, want->block_size},
        {"n_layer", "--n-layer", have.n_layer, want->n_layer},
        {"n_head", "--n-head", have.n_head, want->n_head},
        {"n_embd", "--n-embd", have.n_embd, want->n_embd},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].file != f[i].cmd)
            die("--resume %s: the checkpoint's %s is %lld, this run's %s is %lld (give the checkpoint's sizes)", path,
                f[i].field, (long long)f[i].file, f[i].flag, (long long)f[i].cmd);
    const int n = torc_gpt_param_count(m);
    const char *names[1024 * 12 + 8];
    torc_tensor *params[1024 * 12 + 8];
    for (int i = 0; i < n; i++) names[i] = torc_gpt_param_name(m, i), params[i] = torc_gpt_param(m, i);
    if (torc_checkpoint_load(path, n, names, params, opt, step, gen)) die("--resume: %s", torc_last_error());
    if (scaler && torc_grad_scaler_load_state_dict(scaler, sd, NULL))
        die("--resume %s: %s (a checkpoint of a run without --autocast f16?)", path, torc_last_error());
    torc_state_dict_free(sd);
}

// ---- which rows, which dropout masks ----
// Micro-batch g of a step (0 <= g < M A) is piece j = g / A (rows [j B / M, (j + 1) B / M)) of
// round k = g % A's batch, so a rank running M / N pieces holds a contiguous range of g, the one
// torc_ddp_micro_batches names, and plain DDP's rank r (pieces r M / N ...) runs the same
// micro-batches as deterministic mode's. Round k's batch is what torc_get_batch draws from the
// generator at the step's starting (seed, offset) moved past k batches: it depends on g alone,
// never on which rank draws it or on what ran before on that rank.
static void micro_batch(torc_dataset *ds, int64_t B, int64_t T, int64_t M, int64_t A, int64_t g, torc_generator *gen,
                        uint64_t seed, uint64_t offset, torc_tensor **x, torc_tensor **y) {
    torc_generator_set_state(gen, seed, offset + (uint64_t)(g % A * B));
    CHECK(torc_get_batch_shard(ds, B, T, (int)(g / A), (int)M, NULL, gen, x, y));
}

// splitmix64's finaliser (Steele, Lea and Flood 2014): every input bit reaches every output bit.
static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// The dropout masks of micro-batch g at step `step` come from a generator of their own, keyed by
// (seed, step, g) and starting at counter 0: each micro-batch its own masks (ranks no longer
// repeat each other's), the same on every process count and after a resume (the checkpoint holds
// seed and step). A key of its own rather than a range of the training generator's counters: one
// micro-batch's forward draws B / M x T x (C + L (2 C + NH T)) numbers, more than a fixed 2^32
// stride holds at GPT-2 XL's sizes.
static uint64_t dropout_key(uint64_t seed, int64_t step, int64_t g) {
    return mix64(mix64(mix64(seed) ^ (uint64_t)step) ^ (uint64_t)g);
}

// The matmuls' FLOPs so far, forward and backward: MATMUL's, and the fused attention's
// (ATTENTION and ATTENTION_BACKWARD count as the composed path's matmuls would, core/attention.c).
static uint64_t matmul_flops(void) {
    uint64_t f = 0;
    for (int p = 0; p < 2; p++) {
        const torc_phase ph = p ? TORC_PHASE_BACKWARD : TORC_PHASE_FORWARD;
        f += torc_flops(ph, TORC_OP_MATMUL, -1) + torc_flops(ph, TORC_OP_ATTENTION, -1) +
             torc_flops(ph, TORC_OP_ATTENTION_BACKWARD, -1);
    }
    return f;
}

// ---- evaluation and samples ----
// The mean loss over n random windows of ds, in eval mode under no_grad. The windows come from a
// generator of their own seeded alike at every evaluation: each val loss is over the same tokens,
// and training's generator (its batches, its dropout) does not move.
static double evaluate(torc_gpt *m, torc_dataset *ds, int64_t B, int64_t T, int64_t n, uint64_t seed, torc_dtype autocast) {
    torc_generator *g = torc_generator_new(seed);
    CHECK_PTR(g);
    torc_gpt_set_training(m, false);
    torc_no_grad_begin();
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        torc_scope_push();
        torc_tensor *x, *y, *loss;
        CHECK(torc_get_batch(ds, B, T, NULL, g, &x, &y));
        if (autocast != TORC_DTYPE_F32) CHECK(torc_autocast_begin(autocast));
        CHECK(torc_gpt_forward(m, x, y, NULL, NULL, &loss));
        if (autocast != TORC_DTYPE_F32) CHECK(torc_autocast_end());
        double l;
        CHECK(torc_item(loss, &l));
        sum += l;
        torc_scope_pop();
    }
    torc_no_grad_end();
    torc_gpt_set_training(m, true);
    torc_generator_free(g);
    return sum / (double)n;
}

// n tokens after the start of a document (byte 0 in torc-tokens' byte-level files, GPT-2's
// <|endoftext|> 50256 in its BPE's), temperature 0.8 and top-k 40 (nanoGPT's sample.py's
// settings, top-k lowered for small vocabularies), printed as text for a byte-level vocab (byte 0,
// the documents' separator, as a line of dashes) and as token ids otherwise.
static void print_sample(torc_gpt *m, int64_t n, uint64_t seed) {
    if (n <= 0) return;
    const int64_t V = torc_gpt_get_config(m)->vocab_size, start = V == 50257 ? 50256 : 0;
    torc_generator *g = torc_generator_new(seed);
    CHECK_PTR(g);
    torc_scope_push();
    torc_tensor *prompt = torc_tensor_from((int64_t[]){start}, TORC_SHAPE(1, 1), TORC_DTYPE_I64);
    torc_tensor *out = torc_gpt_generate(m, prompt, n, 0.8, V < 40 ? 0 : 40, g);
    CHECK_PTR(out);
    int64_t *tok = malloc(sizeof *tok * (size_t)(n + 1));
    if (!tok) die("out of memory");
    CHECK(torc_copy_to_host(out, tok, sizeof *tok * (size_t)(n + 1)));
    printf("---- sample (%lld tokens, temperature 0.8, top-k %d, seed %llu) ----\n", (long long)n, V < 40 ? 0 : 40,
           (unsigned long long)seed);
    for (int64_t i = 1; i <= n; i++) {
        if (V == 256) {
            if (tok[i] == 0) printf("\n--------\n");
            else putchar((int)tok[i]);
        } else printf("%lld%c", (long long)tok[i], i % 16 ? ' ' : '\n');
    }
    printf("\n----\n");
    free(tok);
    torc_scope_pop();
    torc_generator_free(g);
}

int train_gpt(const train_options *o) {
    // ---- data parallel: on under mpirun (or with TORC_COMM, --dist, --deterministic) ----
    // --batch is the global batch, cut into M pieces (default one a process): rank r trains on
    // pieces [r M / N, (r + 1) M / N) of each round's batch (micro_batch above), DDP averages the
    // gradients, rank 0 prints and saves. --deterministic sums the M A micro-batches' gradients in
    // one fixed tree (torc_ddp_options.deterministic), so the run is the same bits on any N.
    const bool under_mpirun = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
    const char *tc = getenv("TORC_COMM");
    const bool dist = strcmp(o->dist, "off") && (strcmp(o->dist, "auto") || under_mpirun || (tc && *tc) || o->deterministic);
    if (!dist && o->deterministic) die("--deterministic needs data parallel (--dist auto, mpi or nccl)");
    const char *launched = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_SIZE") : getenv("PMI_SIZE");
    if (!dist && launched && atoi(launched) > 1)
        die("--dist off, but this process is one of %d that mpirun started: it would train alone", atoi(launched));
    if (dist) CHECK(torc_dist_init(strcmp(o->dist, "auto") ? o->dist : NULL));
    const int rank = torc_dist_rank(), world = torc_dist_world_size();
    if (rank != 0 && !freopen("/dev/null", "w", stdout)) die("cannot silence rank %d's output", rank);
    // The Cruncher's rules and messages (torc-train.c), and deterministic mode's tree over M A
    // micro-batches needs A a power of two as M is.
    const int64_t M = o->micro_batches ? o->micro_batches : o->deterministic ? 4 : world;
    if (o->deterministic && (M % world || o->batch % M))
        die("--deterministic: --micro-batches %lld must be a multiple of the %d processes and divide --batch %lld",
            (long long)M, world, (long long)o->batch);
    if (!o->micro_batches && o->batch % M)
        die("--batch %lld (the global batch) must be divisible by the %d processes", (long long)o->batch, world);
    if (M % world || o->batch % M)
        die("--micro-batches %lld must be a multiple of the %d process%s and divide --batch %lld", (long long)M, world,
            world > 1 ? "es" : "", (long long)o->batch);
    if (o->deterministic && (o->grad_accum & (o->grad_accum - 1)))
        die("--deterministic: --grad-accum %lld must be a power of two (the step's --micro-batches x --grad-accum "
            "gradients are summed in one pairwise tree)", (long long)o->grad_accum);
    if (o->deterministic && M * o->grad_accum > 1 << 20)
        die("--deterministic: --micro-batches %lld x --grad-accum %lld micro-batches a step, more than the %d the "
            "tree takes", (long long)M, (long long)o->grad_accum, 1 << 20);
    // A checkpoint that could not be written would fail only at the first save, minutes in.
    if (o->checkpoint) {
        char d[4096];
        snprintf(d, sizeof d, "%s", o->checkpoint);
        char *slash = strrchr(d, '/');
        if (slash) *(slash == d ? slash + 1 : slash) = '\0';
        if (access(slash ? d : ".", W_OK))
            die("--checkpoint %s: cannot write in %s (%s)", o->checkpoint, slash ? d : ".", strerror(errno));
    }
    // ---- device, data ----
    torc_device *dev = train_open_device(o->backend, dist);
    CHECK_PTR(dev);
    torc_device_info info;
    CHECK(torc_device_info_get(dev, &info));
    const int64_t B = o->batch, T = o->block_size, A = o->grad_accum;
    int64_t max_train = -1, max_val = -1;
    torc_dataset *train = open_tokens("--data", o->data, T, &max_train);
    torc_dataset *val = o->val_data ? open_tokens("--val-data", o->val_data, T, &max_val) : NULL;
    const int64_t max_token = max_train > max_val ? max_train : max_val;
    int64_t V = o->vocab_size;
    if (!V) V = max_token < 256 ? 256 : max_token < 50257 ? 50257 : max_token + 1;
    if (max_token >= V)
        die("%s holds token %lld, which --vocab-size %lld does not have (the largest token id must be below it)",
            max_train >= V ? o->data : o->val_data, (long long)max_token, (long long)V);
    // ---- model, optimizer ----
    const int64_t L_ = o->n_layer;
    torc_gpt_config cfg = {V, 0, T, L_, o->n_head, o->n_embd, o->dropout, true};
    if (torc_gpt_config_check(&cfg)) die("%s", torc_last_error());
    torc_generator *gen = torc_generator_new(o->seed);
    CHECK_PTR(gen);
    torc_gpt *m = torc_gpt_new(&cfg, gen);
    CHECK_PTR(m);
    cfg = *torc_gpt_get_config(m);
    const int n = torc_gpt_param_count(m);
    const char **names = malloc(sizeof *names * (size_t)n);
    torc_tensor **params = malloc(sizeof *params * (size_t)n);
    if (!names || !params) die("out of memory");
    for (int i = 0; i < n; i++) names[i] = torc_gpt_param_name(m, i), params[i] = torc_gpt_param(m, i);
    // nanoGPT's AdamW: betas (0.9, 0.95) unless --hp sets them; decay on the 2-D parameters only.
    const double max_lr = o->lr_given ? o->lr : 1e-3, min_lr = o->min_lr_given ? o->min_lr : max_lr / 10;
    char settings[1400];
    snprintf(settings, sizeof settings, "lr=%.17g%s%s", max_lr,
             !strcmp(o->optim, "adamw") && !strstr(o->hparams, "betas=") ? " betas=0.9,0.95" : "", o->hparams);
    int n_decay = 0;
    torc_optimizer *opt =
        torc_optimizer_new_decay_groups(o->optim, n, names, params, settings, o->weight_decay, NULL, NULL, &n_decay);
    CHECK_PTR(opt);
    torc_grad_scaler *scaler = NULL;
    if (o->autocast == TORC_DTYPE_F16) {
        torc_grad_scaler_options so = TORC_GRAD_SCALER_DEFAULTS;
        so.init_scale = o->loss_scale;
        CHECK_PTR(scaler = torc_grad_scaler_new(&so));
    }
    int64_t step = 0;
    if (o->resume) resume(o->resume, &cfg, m, opt, &step, gen, scaler);
    torc_ddp *ddp = NULL;
    if (dist) {  // the same run on every rank (refused by name otherwise), then rank 0's weights everywhere
        enum { NF = 14 };
        char v[NF][64];
        const char *fields[NF] = {"--n-layer", "--n-head", "--n-embd", "--block-size", "--vocab-size", "--batch",
                                  "--steps", "the starting step (--resume)", "--micro-batches", "--grad-accum",
                                  "--deterministic", "--seed", "--dropout", "--autocast"};
        const int64_t vals[10] = {L_, cfg.n_head, cfg.n_embd, T, V, B, o->steps, step, M, A};
        const char *values[NF];
        for (int i = 0; i < 10; i++) snprintf(v[i], sizeof v[i], "%lld", (long long)vals[i]);
        snprintf(v[10], sizeof v[10], "%s", o->deterministic ? "on" : "off");
        snprintf(v[11], sizeof v[11], "%llu", (unsigned long long)o->seed);
        for (int digits = 6; digits <= 17; digits++)  // the fewest digits that read back: 0.1, not 0.10000000000000001
            if (snprintf(v[12], sizeof v[12], "%.*g", digits, o->dropout), strtod(v[12], NULL) == o->dropout) break;
        snprintf(v[13], sizeof v[13], "%s", o->autocast == TORC_DTYPE_F32 ? "off" : torc_dtype_name(o->autocast));
        for (int i = 0; i < NF; i++) values[i] = v[i];
        if (torc_dist_check_same(NF, fields, values)) die("%s (start every rank with the same options)", torc_last_error());
        torc_ddp_options dopt = TORC_DDP_OPTIONS_DEFAULT;
        dopt.bucket_cap_bytes = (int64_t)(o->bucket_cap_mb * 1048576.0);
        if (dopt.first_bucket_bytes > dopt.bucket_cap_bytes) dopt.first_bucket_bytes = dopt.bucket_cap_bytes;
        dopt.deterministic = o->deterministic;
        dopt.micro_batches = (int)(M * A);
        CHECK_PTR(ddp = torc_ddp_new(n, params, &dopt));
    }
    // This rank's micro-batches: [first, first + count) of the step's M A (micro_batch above).
    int first = (int)(rank * (M / world) * A), count = (int)(M / world * A);
    if (ddp && o->deterministic) torc_ddp_micro_batches(ddp, &first, &count);
    double *losses = malloc(sizeof *losses * (size_t)count);  // this rank's micro-batch losses, in order
    torc_generator *drop = torc_generator_new(0);             // the masks' (dropout_key)
    if (!losses) die("out of memory");
    CHECK_PTR(drop);

    // ---- what this run is ----
    const int64_t N = torc_gpt_num_parameters(m, false), N_est = torc_gpt_num_parameters(m, true);
    const int64_t C = cfg.n_embd, L = cfg.n_layer, tokens = B * T * A;
    char b1[32], b2[32], b3[32];
    printf("torc-train: GPT(n_layer=%lld, n_head=%lld, n_embd=%lld, block_size=%lld, vocab_size=%lld padded to %lld%s), "
           "%s parameters\n", (long long)L, (long long)cfg.n_head, (long long)C, (long long)T, (long long)V,
           (long long)cfg.padded_vocab_size, cfg.dropout > 0 ? ", dropout" : "", train_si_str(4, (double)N, "", b1, sizeof b1));
    printf("  data: %s (%s, %lld tokens)", o->data, torc_token_format_name(torc_tokens_format(train)),
           (long long)torc_dataset_numel(train));
    if (val) printf(", val %s (%lld tokens)", o->val_data, (long long)torc_dataset_numel(val));
    printf("; batch %lld x %lld tokens%s = %lld tokens a step\n", (long long)B, (long long)T,
           A > 1 ? " x grad-accum" : "", (long long)tokens);
    if (ddp)
        printf("  data parallel: %d process%s, %lld rows each of every batch%s\n", world, world > 1 ? "es" : "",
               (long long)(B / world), o->deterministic ? ", deterministic" : "");
    if (M > world)
        printf("  micro-batches: %lld of %lld rows, %lld a process%s\n", (long long)M, (long long)(B / M),
               (long long)(M / world), A > 1 ? " in each round of --grad-accum" : "");
    printf("  %s (lr %g -> %g: %lld warmup steps, cosine to step %lld; weight decay %g on %d of %d tensors; clip %g) "
           "on %s (%s)\n", torc_optimizer_name(opt), max_lr, min_lr, (long long)o->warmup, (long long)o->steps,
           o->weight_decay, n_decay, n, o->grad_clip, torc_device_name(dev), info.name);
    if (o->autocast != TORC_DTYPE_F32)
        printf("  autocast %s, float32 master weights%s\n", torc_dtype_name(o->autocast),
               scaler ? ", dynamic loss scaling" : "");
    if (o->resume) printf("  resumed from %s at step %lld\n", o->resume, (long long)step);

    // ---- the loop ----
    torc_flops_reset();
    torc_memory_reset_peak(dev);
    const int64_t todo = o->steps > step ? o->steps - step : 0;
    const int64_t log_every = o->log_every ? o->log_every : todo >= 20 ? todo / 20 : 1;
    const torc_dtype mm_dtype = o->autocast;
    const double peak = info.peak_flops[mm_dtype];
    uint64_t fwd = 0, bwd = 0, mm = 0;
    double first_loss = NAN, loss = NAN, val_loss = NAN, t1 = 0, first_flops = 0;
    const double t0 = train_now();
    double last_t = t0;
    int64_t last_done = 0, skipped = 0;
    int64_t kept = -1;  // activation bytes the first micro-batch's forward kept for backward
    for (int64_t done = 0; step < o->steps; step++, done++) {
        const double lr = torc_lr_cosine_warmup(step, max_lr, min_lr, o->warmup, o->steps);
        CHECK(torc_optimizer_set_lr(opt, lr));
        const uint64_t f0 = torc_flops(TORC_PHASE_FORWARD, -1, -1), g0 = torc_flops(TORC_PHASE_BACKWARD, -1, -1);
        const uint64_t m0 = matmul_flops();
        torc_scope_push();
        uint64_t seed, offset;
        torc_generator_get_state(gen, &seed, &offset);
        for (int i = 0; i < count; i++) {  // gradients add up in .grad (deterministic: in DDP's tree)
            torc_tensor *x, *y, *l;
            micro_batch(train, B, T, M, A, first + i, gen, seed, offset, &x, &y);
            torc_generator_set_state(drop, dropout_key(seed, step, first + i), 0);
            if (o->autocast != TORC_DTYPE_F32) CHECK(torc_autocast_begin(o->autocast));
            torc_memory_stats ka;
            if (kept < 0) CHECK(torc_memory_stats_get(dev, &ka));
            CHECK(torc_gpt_forward(m, x, y, drop, NULL, &l));
            if (kept < 0) {
                torc_memory_stats kb;
                CHECK(torc_memory_stats_get(dev, &kb));
                kept = (int64_t)(kb.in_use[TORC_MEM_ACTIVATION] - ka.in_use[TORC_MEM_ACTIVATION]);
            }
            if (o->autocast != TORC_DTYPE_F32) CHECK(torc_autocast_end());
            // Accumulated gradients are a sum: each loss counts 1 / count for their mean (the DDP
            // average over ranks makes it the global batch's). Deterministic mode divides its
            // tree's sum by M A itself.
            torc_tensor *lb = count > 1 && !o->deterministic ? torc_div_scalar(l, torc_s((double)count)) : l;
            if (scaler) lb = torc_grad_scaler_scale(scaler, lb);
            CHECK_PTR(lb);
            // Plain: the last backward reduces the sum; deterministic: every micro-batch announced.
            if (ddp && (o->deterministic || i == count - 1)) CHECK(torc_ddp_begin(ddp, first + i));
            CHECK(torc_backward(lb, NULL, false));
            CHECK(torc_item(l, &losses[i]));
        }
        torc_generator_set_state(gen, seed, offset + (uint64_t)(A * B));  // past the step's A batches
        if (ddp) {  // the averaged gradients, and the global batch's loss
            CHECK(torc_ddp_finish(ddp));
            CHECK(torc_ddp_reduce_loss(ddp, losses, count, &loss));
        } else {
            double sum = 0;
            for (int i = 0; i < count; i++) sum += losses[i];
            loss = sum / (double)count;
        }
        const uint64_t f1 = torc_flops(TORC_PHASE_FORWARD, -1, -1);
        fwd += f1 - f0, bwd += torc_flops(TORC_PHASE_BACKWARD, -1, -1) - g0;
        mm += matmul_flops() - m0;
        if (!isfinite(loss))
            die("the loss is %g at step %lld: stopped%s%s%s (lower --lr?)", loss, (long long)step + 1,
                o->checkpoint ? "; " : "", o->checkpoint ? o->checkpoint : "", o->checkpoint ? " keeps the last good step" : "");
        if (scaler) CHECK(torc_grad_scaler_unscale_(scaler, opt));  // clip the true gradients
        torc_tensor *norm = torc_clip_grad_norm_(n, params, o->grad_clip > 0 ? o->grad_clip : INFINITY, 2.0, false);
        CHECK_PTR(norm);
        double gnorm;
        CHECK(torc_item(norm, &gnorm));
        CHECK(train_optimizer_step(opt, scaler, &skipped));  // the scaler skips a step with inf/NaN gradients
        torc_scope_pop();
        if (done == 0) {
            first_loss = loss;
            CHECK(torc_device_synchronize(dev));
            t1 = last_t = train_now(), last_done = 1, first_flops = (double)(fwd + bwd);
        }
        const double t = train_now();
        if ((done + 1) % log_every == 0 || step + 1 == o->steps) {
            const double dt = done + 1 > last_done && t > last_t ? (t - last_t) / (double)(done + 1 - last_done) : t - t0;
            const double per_step = (double)(fwd + bwd) / (double)(done + 1);
            char mfu[32] = "?";
            if (peak > 0) snprintf(mfu, sizeof mfu, "%.2f%%", 100.0 * per_step / dt / peak);
            printf("step %5lld/%lld | loss %.4f | lr %.3e | norm %.4f | %.0f tok/s | MFU %s | %.0f ms\n",
                   (long long)step + 1, (long long)o->steps, loss, lr, gnorm, (double)tokens / dt, mfu, 1e3 * dt);
            fflush(stdout);
            last_t = t, last_done = done + 1;
        }
        if (val && o->eval_every && (step + 1) % o->eval_every == 0 && step + 1 < o->steps) {
            val_loss = evaluate(m, val, B, T, o->eval_batches, o->seed + 1, o->autocast);
            printf("step %5lld/%lld | val loss %.4f\n", (long long)step + 1, (long long)o->steps, val_loss);
            last_t = train_now();  // the evaluation is not the training's time
        }
        if (rank == 0 && o->sample_every && (step + 1) % o->sample_every == 0 && step + 1 < o->steps) {
            print_sample(m, o->sample_tokens, o->sample_seed);
            last_t = train_now();
        }
        if (o->checkpoint && o->every && (step + 1) % o->every == 0) save(o->checkpoint, m, opt, step + 1, gen, scaler);
    }
    CHECK(torc_device_synchronize(dev));
    const double done_t = train_now(), elapsed = done_t - t0;
    if (o->checkpoint && !(o->every && step % o->every == 0 && todo)) save(o->checkpoint, m, opt, step, gen, scaler);
    torc_memory_stats ms;
    CHECK(torc_memory_stats_get(dev, &ms));  // before the evaluation and the sample add their own
    if (val) val_loss = evaluate(m, val, B, T, o->eval_batches, o->seed + 1, o->autocast);

    // ---- summary ----
    printf("\nsummary\n");
    printf("  parameters        %lld (%s as float32); N = %lld without wpe, nanoGPT's count\n", (long long)N,
           train_bytes_str((uint64_t)N * 4, b1, sizeof b1), (long long)N_est);
    if (todo) printf("  loss              %.4f at the first step -> %.4f at step %lld\n", first_loss, loss, (long long)step);
    if (val) printf("  val loss          %.4f (%lld batches of %s)\n", val_loss, (long long)o->eval_batches, o->val_data);
    const double steady = todo > 1 ? done_t - t1 : elapsed, steady_flops = todo > 1 ? (double)(fwd + bwd) - first_flops : (double)(fwd + bwd);
    if (todo > 1)
        printf("  steps             %lld in %.1f s: the first %.2f s, then %.2f steps/s, %.0f tok/s\n", (long long)todo,
               elapsed, t1 - t0, (double)(todo - 1) / steady, (double)(todo - 1) * (double)tokens / steady);
    if (scaler)
        printf("  grad scaler       scale %g at the end, %lld of %lld steps skipped (inf/NaN gradients)\n",
               torc_grad_scaler_get_scale(scaler), (long long)skipped, (long long)todo);
    if (todo) {
        // The standard estimate (Kaplan et al., PaLM's appendix B, nanoGPT's estimate_mfu) counts
        // 6 FLOPs per parameter per token (2 forward, 4 backward) and 12 L C T per token for
        // attention's two (T, T) matmuls. torc counts what runs: every matmul as 2 M N K (so
        // attention over the full (T, T) square, causal or not, as the estimate does; the fused
        // attention op as those two matmuls, its backward as their four), plus the
        // elementwise work (LayerNorm, GELU, softmax, residual adds, the loss), which the
        // estimate leaves out. Its matmuls come to the estimate less 6 FLOPs per token for each
        // bias and LayerNorm parameter (13 L C + 2 C of them, which multiply nothing) and for
        // wte's (Vp - V) C padding, which the training head (torc_linear_cross_entropy) leaves out.
        // The embedding lookups cost nothing: wte counts once, as the tied head's (C, V) matmul.
        const double per = 1.0 / (double)todo, tok = (double)tokens;
        const double est = 6.0 * (double)N_est * tok + 12.0 * (double)(L * C * T) * tok;
        const double vec = 6.0 * (double)(13 * L * C + 2 * C + (cfg.padded_vocab_size - cfg.vocab_size) * C) * tok;
        char b4[32];
        printf("  FLOPs per step    torc counted %s: forward %s, backward %s; matmuls %s\n",
               train_si_str(4, (double)(fwd + bwd) * per, "", b1, sizeof b1), train_si_str(4, (double)fwd * per, "", b2, sizeof b2),
               train_si_str(4, (double)bwd * per, "", b3, sizeof b3), train_si_str(4, (double)mm * per, "", b4, sizeof b4));
        printf("    estimate        6 N tokens + 12 L C T tokens = %s (6 N tokens %s, attention %s)\n",
               train_si_str(4, est, "", b1, sizeof b1), train_si_str(4, 6.0 * (double)N_est * tok, "", b2, sizeof b2),
               train_si_str(4, 12.0 * (double)(L * C * T) * tok, "", b3, sizeof b3));
        const double mm_step = (double)mm * per;
        printf("    matmuls         = estimate - 6 (13 L C + 2 C + (Vp - V) C) tokens (biases, LayerNorms and the "
               "vocabulary's padding multiply nothing) = %s: %s\n",
               train_si_str(4, est - vec, "", b1, sizeof b1), fabs(mm_step - (est - vec)) <= 1e-9 * est ? "exact" : "differs");
        printf("    other ops       %s (%.1f%% of torc's count: LayerNorm, GELU, softmax, adds, the loss)\n",
               train_si_str(4, (double)(fwd + bwd) * per - mm_step, "", b1, sizeof b1),
               100.0 * (1.0 - mm_step / ((double)(fwd + bwd) * per)));
        const double achieved = steady > 0 ? steady_flops / steady : 0;
        printf("  achieved          %s (torc's count over the wall time of the steps after the first)\n",
               train_si_str(4, achieved, "FLOP/s", b1, sizeof b1));
        if (peak > 0)
            printf("  MFU               %.2f%% of %s promised for %s (%s)\n", 100.0 * achieved / peak,
                   train_si_str(4, peak, "FLOP/s", b2, sizeof b2), torc_dtype_name(mm_dtype), info.peak_source);
        else
            printf("  MFU               unknown: %s promises no FLOP/s for %s\n", torc_device_name(dev), torc_dtype_name(mm_dtype));
    }
    // Memory: parameters, gradients and AdamW's two moments are 4 N, 4 N and 8 N bytes exactly;
    // a forward keeps torc_gpt_activation_bytes for backward (f32 without dropout; its formula in
    // gpt.h), the rest of the activations' peak is transient (the head's chunks, the backward's
    // gradients in flight).
    static const struct { torc_mem_tag tag; const char *label; double per_param; } cats[] = {
        {TORC_MEM_PARAMETER, "params", 4}, {TORC_MEM_GRADIENT, "grads", 4},
        {TORC_MEM_OPTIMIZER_STATE, "optimizer state", 8}, {TORC_MEM_ACTIVATION, "activations", 0},
    };
    printf("  memory on %s     now / peak\n", torc_device_name(dev));
    for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++) {
        char note[128] = "";
        const uint64_t want = (uint64_t)(cats[i].per_param * (double)N);
        const bool adam = !strcmp(torc_optimizer_name(opt), "adamw") || !strcmp(torc_optimizer_name(opt), "adam");
        if (cats[i].per_param && (i < 2 || adam) && todo)
            snprintf(note, sizeof note, "  (%.0f N = %llu B: %s)", cats[i].per_param, (unsigned long long)want,
                     ms.peak[cats[i].tag] == want ? "as counted" : "differs");
        if (cats[i].tag == TORC_MEM_ACTIVATION && kept >= 0) {
            const int64_t f = torc_gpt_activation_bytes(&cfg, B / M, T);
            const bool formula = o->autocast == TORC_DTYPE_F32 && !(cfg.dropout > 0) && f >= 0;
            snprintf(note, sizeof note, "  (a forward of %lld x %lld tokens kept %s for backward%s%s)",
                     (long long)(B / M), (long long)T, train_bytes_str((uint64_t)kept, b3, sizeof b3),
                     formula ? ": the formula's, " : "", formula ? (kept == f ? "as counted" : "differs") : "");
        }
        printf("    %-16s %10s / %s%s\n", cats[i].label, train_bytes_str(ms.in_use[cats[i].tag], b1, sizeof b1),
               train_bytes_str(ms.peak[cats[i].tag], b2, sizeof b2), note);
    }
    printf("    %-16s %10s / %s\n", "total", train_bytes_str(ms.total_in_use, b1, sizeof b1), train_bytes_str(ms.total_peak, b2, sizeof b2));
    if (o->checkpoint) printf("  checkpoint        %s (step %lld)\n", o->checkpoint, (long long)step);
    if (rank == 0) print_sample(m, o->sample_tokens, o->sample_seed);

    free(losses);
    torc_generator_free(drop);
    torc_ddp_free(ddp);
    if (dist) CHECK(torc_dist_shutdown());
    torc_grad_scaler_free(scaler);
    torc_optimizer_free(opt);
    free(names);
    free(params);
    torc_gpt_free(m);
    torc_generator_free(gen);
    torc_dataset_close(train);
    torc_dataset_close(val);
    return 0;
}
