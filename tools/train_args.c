// tools/train_args.c — torc-train's command-line parser: every value is checked against the
// range its option accepts before the training loop sees it (no silent casts or wraps); and the
// clock, number formatting and optimizer step that torc-train.c and train_gpt.c share.
#define _POSIX_C_SOURCE 200809L
#include "train_args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void train_args_usage(FILE *f) {
    fprintf(f,
            "usage: torc-train [options]\n"
            "Trains a GPT-2 language model on token files (--model gpt, the default with --data) or the\n"
            "course's Cruncher on y = x @ arange(D) with mse_loss (--model cruncher, the default without\n"
            "--data), and prints a summary.\n"
            "  --model NAME        gpt or cruncher (default: gpt when --data is given, else cruncher)\n"
            "  --backend NAME      device: reference, onednn, cuda, cuda:1, cpu (default: torc's best)\n"
            "  --optim NAME|PATH   optimizer plugin: sgd, adagrad, rmsprop, adam, adamw or a .so path\n"
            "                      (default adam)\n"
            "  --lr X              learning rate (default: the optimizer plugin's own: 0.001 for adam\n"
            "                      and adamw, 0.01 for adagrad and rmsprop; 0.0001 for sgd, whose own\n"
            "                      0.001 diverges on the Cruncher)\n"
            "  --hp NAME=VALUE     any other hyperparameter, repeatable (--hp betas=0.9,0.99 --hp amsgrad=true)\n"
            "  --dim D             model width, 1..%lld (default 32)\n"
            "  --layers L          hidden Linear(D, D) layers, 0..%lld (default 2)\n"
            "  --batch B           batch size, 1..%lld (default 64)\n"
            "  --steps N           train until step N (default 300)\n"
            "  --seed S            seed for the weights and the data (default 0)\n"
            "  --checkpoint PATH   save a checkpoint to PATH every --every steps and at the end\n"
            "  --every N           checkpoint interval in steps (default: only at the end)\n"
            "  --resume PATH       continue from a checkpoint: model, optimizer (its hyperparameters\n"
            "                      replace --lr/--hp), step and generator, up to --steps\n"
            "  --init-from PATH    start from the model weights in a safetensors file (e.g. written by\n"
            "                      Python: layers.<i>.weight (D, D), final.weight (D, 1), float32);\n"
            "                      the optimizer, step and generator start fresh. Weights are read\n"
            "                      as (in, out), y = x @ W: transpose nn.Linear's (out, in) weights\n"
            "                      (all of them; a square one's shape cannot tell)\n"
            "  --log-every N       print a line every N steps when stdout is not a terminal\n"
            "  --autocast MODE     bf16, f16 (with dynamic loss scaling) or fp8 (e4m3 matmuls, e5m2\n"
            "                      gradients) for the forward pass; f32 master weights (default: off)\n"
            "  --loss-scale X      initial loss scale under --autocast f16 (default 65536, PyTorch's)\n"
            "  --dist MODE         data parallel across processes: auto (on under mpirun or with\n"
            "                      TORC_COMM set), off, mpi, nccl; `mpirun -np N torc-train ...` splits\n"
            "                      --batch (the global batch) across the N ranks (default auto)\n"
            "  --deterministic     the same loss curve and weights, bit for bit, for every process\n"
            "                      count dividing --micro-batches\n"
            "  --micro-batches M   the batch in M pieces of B/M rows, a power of two to 64: each process\n"
            "                      runs M/N of them, one backward each, and reduces the gradients once\n"
            "                      (accumulation; default 4 with --deterministic, else one a process)\n"
            "  --bucket-cap-mb X   gradient bucket cap in MiB (default 25)\n"
            "GPT (--model gpt; --backend, --optim, --lr, --hp, --batch, --steps, --seed, --checkpoint,\n"
            "--every, --resume, --log-every, --autocast bf16|f16, --loss-scale, --dist, --deterministic,\n"
            "--micro-batches and --bucket-cap-mb apply as well; under mpirun --batch is the global batch,\n"
            "and --deterministic also holds with --grad-accum (a power of two) and --dropout):\n"
            "  --data PATH         training tokens: an llm.c shard, a uint16 .bin or a .npy (torc-tokens\n"
            "                      makes byte-level ones from text); random windows from the seed\n"
            "  --val-data PATH     validation tokens: the val loss at each --eval-every and at the end\n"
            "  --n-layer N         transformer blocks (default 4)\n"
            "  --n-head N          attention heads; must divide --n-embd (default 4)\n"
            "  --n-embd N          model width (default 128)\n"
            "  --block-size N      context length T (default 128)\n"
            "  --vocab-size N      tokens (default: 256 when every token of --data is a byte, 50257 when\n"
            "                      below that, else the largest token + 1); padded to a multiple of 128\n"
            "  --dropout P         dropout probability in [0, 1) (default 0)\n"
            "  --grad-accum N      micro-batches of --batch rows per step, one backward each (default 1)\n"
            "  --min-lr X          the cosine schedule's floor (default --lr / 10)\n"
            "  --warmup N          linear warmup steps (default 0)\n"
            "  --weight-decay X    AdamW weight decay of the 2-D parameters only (default 0.1)\n"
            "  --grad-clip X       clip the gradients' total norm to X; 0: off (default 1.0)\n"
            "  --eval-every N      val loss every N steps (default: at the end only)\n"
            "  --eval-batches N    batches per val loss (default 20)\n"
            "  --sample-every N    print a sample every N steps (default: at the end only)\n"
            "  --sample-tokens N   tokens per sample (default 256)\n"
            "  --sample-seed S     the sampling generator's seed (default 1337)\n"
            "GPT defaults: --batch 16, --steps 500, --optim adamw, --lr 0.001.\n"
            "  -h, --help          this text\n",
            TRAIN_MAX_DIM, TRAIN_MAX_LAYERS, TRAIN_MAX_BATCH);
}

static train_args_result fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static train_args_result fail(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return TRAIN_ARGS_ERROR;
}

// A decimal integer in [min, max], the whole string; false if it is not one.
static bool parse_int(const char *v, long long min, long long max, int64_t *out) {
    char *end = NULL;
    errno = 0;
    const long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < min || x > max) return false;
    *out = x;
    return true;
}

static bool parse_double(const char *v, double *out) {
    char *end = NULL;
    errno = 0;
    *out = strtod(v, &end);
    return end != v && !*end && errno != ERANGE;
}

train_args_result train_args_parse(int argc, char **argv, train_options *o, char *err, size_t errcap) {
    *o = (train_options){.optim = "adam", .dim = 32, .batch = 64, .steps = 300, .layers = 2,
                         .autocast = TORC_DTYPE_F32, .loss_scale = 65536.0, .dist = "auto", .micro_batches = 0,
                         .bucket_cap_mb = 25.0, .n_layer = 4, .n_head = 4, .n_embd = 128, .block_size = 128,
                         .grad_accum = 1, .weight_decay = 0.1, .grad_clip = 1.0, .eval_batches = 20,
                         .sample_tokens = 256, .sample_seed = 1337};
    // The integer options: where each goes and the range it accepts.
    bool optim_given = false;
    int64_t layers = o->layers, seed = 0, sample_seed = (int64_t)o->sample_seed;
    const struct { const char *flag; int64_t *dst; long long min, max; } ints[] = {
        {"--dim", &o->dim, 1, TRAIN_MAX_DIM},       {"--layers", &layers, 0, TRAIN_MAX_LAYERS},
        {"--batch", &o->batch, 1, TRAIN_MAX_BATCH}, {"--steps", &o->steps, 0, TRAIN_MAX_STEPS},
        {"--seed", &seed, 0, INT64_MAX},            {"--every", &o->every, 1, TRAIN_MAX_STEPS},
        {"--log-every", &o->log_every, 1, TRAIN_MAX_STEPS}, {"--micro-batches", &o->micro_batches, 1, 64},
        {"--n-layer", &o->n_layer, 1, 4096},        {"--n-head", &o->n_head, 1, TRAIN_MAX_WIDTH},
        {"--n-embd", &o->n_embd, 1, TRAIN_MAX_WIDTH}, {"--block-size", &o->block_size, 1, 1 << 24},
        {"--vocab-size", &o->vocab_size, 1, 1LL << 31}, {"--grad-accum", &o->grad_accum, 1, 1 << 20},
        {"--warmup", &o->warmup, 0, TRAIN_MAX_STEPS}, {"--eval-every", &o->eval_every, 1, TRAIN_MAX_STEPS},
        {"--eval-batches", &o->eval_batches, 1, 1 << 20}, {"--sample-every", &o->sample_every, 1, TRAIN_MAX_STEPS},
        {"--sample-tokens", &o->sample_tokens, 0, 1 << 24}, {"--sample-seed", &sample_seed, 0, INT64_MAX},
    };
    // Flags only one of the models takes (the first one given is kept for the error).
    static const char *const gpt_only[] = {"--data", "--val-data", "--n-layer", "--n-head", "--n-embd",
                                           "--block-size", "--vocab-size", "--dropout", "--grad-accum", "--min-lr",
                                           "--warmup", "--weight-decay", "--grad-clip", "--eval-every",
                                           "--eval-batches", "--sample-every", "--sample-tokens", "--sample-seed"};
    static const char *const cruncher_only[] = {"--dim", "--layers", "--init-from"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return TRAIN_ARGS_HELP;
        if (strncmp(a, "--", 2))
            return fail(err, errcap, "unexpected argument '%s': options start with -- (try --help)", a);
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        for (size_t k = 0; k < sizeof gpt_only / sizeof gpt_only[0]; k++)
            if (!strcmp(a, gpt_only[k]) && !o->gpt_flag) o->gpt_flag = gpt_only[k];
        for (size_t k = 0; k < sizeof cruncher_only / sizeof cruncher_only[0]; k++)
            if (!strcmp(a, cruncher_only[k]) && !o->cruncher_flag) o->cruncher_flag = cruncher_only[k];
        if (!strcmp(a, "--batch")) o->batch_given = true;
        if (!strcmp(a, "--steps")) o->steps_given = true;
        if (!strcmp(a, "--optim")) optim_given = true;
        bool is_int = false;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
            if (strcmp(a, ints[k].flag)) continue;
            if (!v || !parse_int(v, ints[k].min, ints[k].max, ints[k].dst))
                return fail(err, errcap, "%s expects an integer from %lld to %lld, got '%s'", a, ints[k].min,
                            ints[k].max, v ? v : "");
            is_int = true;
        }
        if (is_int) {
            i++;
            continue;
        }
        if (!strcmp(a, "--deterministic")) {
            o->deterministic = true;
            continue;
        }
        const bool known = !strcmp(a, "--backend") || !strcmp(a, "--optim") || !strcmp(a, "--lr") ||
                           !strcmp(a, "--hp") || !strcmp(a, "--checkpoint") || !strcmp(a, "--resume") || !strcmp(a, "--init-from") ||
                           !strcmp(a, "--autocast") || !strcmp(a, "--loss-scale") || !strcmp(a, "--dist") ||
                           !strcmp(a, "--bucket-cap-mb") || !strcmp(a, "--model") || !strcmp(a, "--data") ||
                           !strcmp(a, "--val-data") || !strcmp(a, "--min-lr") || !strcmp(a, "--weight-decay") ||
                           !strcmp(a, "--grad-clip") || !strcmp(a, "--dropout");
        if (!known) return fail(err, errcap, "unknown option '%s' (try --help)", a);
        if (!v) return fail(err, errcap, "%s needs a value (try --help)", a);
        i++;
        if (!strcmp(a, "--backend")) o->backend = v;
        else if (!strcmp(a, "--optim")) o->optim = v;
        else if (!strcmp(a, "--checkpoint")) o->checkpoint = v;
        else if (!strcmp(a, "--resume")) o->resume = v;
        else if (!strcmp(a, "--init-from")) o->init_from = v;
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--val-data")) o->val_data = v;
        else if (!strcmp(a, "--model")) {
            if (strcmp(v, "gpt") && strcmp(v, "cruncher"))
                return fail(err, errcap, "--model expects gpt or cruncher, got '%s'", v);
            o->model = v;
        } else if (!strcmp(a, "--min-lr")) {
            if (!parse_double(v, &o->min_lr) || !(o->min_lr >= 0) || o->min_lr == INFINITY)
                return fail(err, errcap, "--min-lr expects a number >= 0, got '%s'", v);
            o->min_lr_given = true;
        } else if (!strcmp(a, "--weight-decay")) {
            if (!parse_double(v, &o->weight_decay) || !(o->weight_decay >= 0) || o->weight_decay == INFINITY)
                return fail(err, errcap, "--weight-decay expects a number >= 0, got '%s'", v);
        } else if (!strcmp(a, "--grad-clip")) {
            if (!parse_double(v, &o->grad_clip) || !(o->grad_clip >= 0) || o->grad_clip == INFINITY)
                return fail(err, errcap, "--grad-clip expects a number >= 0 (0: off), got '%s'", v);
        } else if (!strcmp(a, "--dropout")) {
            if (!parse_double(v, &o->dropout) || !(o->dropout >= 0 && o->dropout < 1))
                return fail(err, errcap, "--dropout expects a probability in [0, 1), got '%s'", v);
        }
        else if (!strcmp(a, "--dist")) {
            if (strcmp(v, "auto") && strcmp(v, "off") && strcmp(v, "mpi") && strcmp(v, "nccl"))
                return fail(err, errcap, "--dist expects auto, off, mpi or nccl, got '%s'", v);
            o->dist = v;
        } else if (!strcmp(a, "--bucket-cap-mb")) {
            if (!parse_double(v, &o->bucket_cap_mb) || !(o->bucket_cap_mb > 0) || o->bucket_cap_mb > 1048576)
                return fail(err, errcap, "--bucket-cap-mb expects a number of MiB in (0, 1048576], got '%s'", v);
        } else if (!strcmp(a, "--lr")) {
            if (!parse_double(v, &o->lr)) return fail(err, errcap, "--lr expects a number, got '%s'", v);
            o->lr_given = true;
        } else if (!strcmp(a, "--hp")) {
            const size_t used = strlen(o->hparams), len = strlen(v);
            if (!strchr(v, '=')) return fail(err, errcap, "--hp expects NAME=VALUE, got '%s'", v);
            if (used + 1 + len >= sizeof o->hparams)
                return fail(err, errcap, "--hp: the settings exceed %zu characters in all", sizeof o->hparams - 1);
            o->hparams[used] = ' ';
            memcpy(o->hparams + used + 1, v, len + 1);
        } else if (!strcmp(a, "--autocast")) {
            if (!strcmp(v, "bf16")) o->autocast = TORC_DTYPE_BF16;
            else if (!strcmp(v, "f16")) o->autocast = TORC_DTYPE_F16;
            else if (!strcmp(v, "fp8")) o->autocast = TORC_DTYPE_F8_E4M3FN;
            else if (!strcmp(v, "off") || !strcmp(v, "f32")) o->autocast = TORC_DTYPE_F32;
            else return fail(err, errcap, "--autocast expects bf16, f16, fp8 or off, got '%s'", v);
        } else {  // --loss-scale
            if (!parse_double(v, &o->loss_scale) || !(o->loss_scale > 0) || o->loss_scale == INFINITY)
                return fail(err, errcap, "--loss-scale expects a positive number, got '%s'", v);
        }
    }
    if (o->every && !o->checkpoint) return fail(err, errcap, "--every needs --checkpoint PATH");
    if (o->init_from && o->resume)
        return fail(err, errcap, "--init-from and --resume exclude each other (--resume restores the weights too)");
    if (o->micro_batches & (o->micro_batches - 1))
        return fail(err, errcap, "--micro-batches expects a power of two, got %lld", (long long)o->micro_batches);
    o->layers = (int)layers;
    o->seed = (uint64_t)seed;
    o->sample_seed = (uint64_t)sample_seed;
    if (!o->model) o->model = o->data ? "gpt" : "cruncher";
    const bool gpt = !strcmp(o->model, "gpt");
    if (gpt && o->cruncher_flag)
        return fail(err, errcap, "%s is the Cruncher's (--model cruncher); the GPT's sizes are --n-layer, --n-head, "
                    "--n-embd and --block-size", o->cruncher_flag);
    if (!gpt && o->gpt_flag) return fail(err, errcap, "%s needs --model gpt", o->gpt_flag);
    if (gpt && !o->data) return fail(err, errcap, "--model gpt needs --data PATH (a token file: see torc-tokens)");
    if (gpt && o->autocast == TORC_DTYPE_F8_E4M3FN)
        return fail(err, errcap, "--autocast fp8 is the Cruncher's; the GPT takes bf16 or f16");
    if (gpt && o->n_embd % o->n_head)
        return fail(err, errcap, "--n-embd %lld must be divisible by --n-head %lld", (long long)o->n_embd,
                    (long long)o->n_head);
    if (gpt && (o->eval_every || o->eval_batches != 20) && !o->val_data)
        return fail(err, errcap, "--eval-every and --eval-batches need --val-data PATH");
    if (gpt && !o->batch_given) o->batch = 16;
    if (gpt && !o->steps_given) o->steps = 500;
    if (gpt && !optim_given) o->optim = "adamw";
    return TRAIN_ARGS_OK;
}

double train_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *train_bytes_str(uint64_t b, char *buf, size_t n) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
    return buf;
}

const char *train_si_str(int digits, double v, const char *unit, char *buf, size_t n) {
    const char *prefix[] = {"", "k", "M", "G", "T", "P", "E"};
    int p = 0;
    while (fabs(v) >= 1000 && p < 6) v /= 1000, p++;
    snprintf(buf, n, "%.*g %s%s", digits, v, prefix[p], unit);
    return buf;
}

torc_status train_optimizer_step(torc_optimizer *opt, torc_grad_scaler *scaler, int64_t *skipped) {
    torc_status s;
    if (scaler) {
        bool stepped;
        if ((s = torc_grad_scaler_step(scaler, opt, &stepped)) != TORC_OK) return s;
        if ((s = torc_grad_scaler_update(scaler)) != TORC_OK) return s;
        *skipped += !stepped;
    } else if ((s = torc_optimizer_step(opt)) != TORC_OK) {
        return s;
    }
    return torc_optimizer_zero_grad(opt, true);
}

torc_device *train_open_device(const char *backend, bool dist) {
    torc_device *dev = backend ? torc_device_get(backend) : torc_default_device();
    if (dev && dist && torc_dist_device_index() >= 0 && !(backend && strchr(backend, ':'))) {
        const char *cur = torc_device_name(dev);
        char name[64];
        snprintf(name, sizeof name, "%.*s:%d", (int)strcspn(cur, ":"), cur, torc_dist_device_index());
        dev = torc_device_get(name);
    }
    return dev && !torc_set_default_device(dev) ? dev : NULL;
}
