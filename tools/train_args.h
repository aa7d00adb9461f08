// tools/train_args.h — torc-train's command line: the options and their parser, kept apart from
// the training loop so that tests/fuzz/fuzz_train_args.c can call the parser on any argv.
#ifndef TORC_TRAIN_ARGS_H
#define TORC_TRAIN_ARGS_H

#include <stdint.h>
#include <stdio.h>

#include "torc/torc.h"

// The ranges the numeric options accept (the parser's errors name them). --layers is capped by
// the 256 parameters a checkpoint of torc-train holds (L hidden weights + the final one).
#define TRAIN_MAX_DIM 1048576LL          // 2^20: one (D, D) f32 weight is then 4 TiB
#define TRAIN_MAX_LAYERS 255LL
#define TRAIN_MAX_BATCH 16777216LL       // 2^24
#define TRAIN_MAX_STEPS 4611686018427387904LL  // 2^62: step + 1 never overflows
#define TRAIN_MAX_WIDTH 65536LL          // --n-embd (torc_gpt_config_check's bound)

typedef struct train_options {
    const char *backend;      // device name, NULL: torc's default
    const char *optim;        // plugin name or path
    double lr;                // with lr_given; otherwise the optimizer's own default (torc-train.c)
    bool lr_given;
    char hparams[1024];       // extra "name=value" settings, space-separated
    int64_t dim, batch, steps;
    int layers;
    uint64_t seed;
    const char *checkpoint;   // save here every `every` steps and at the end
    int64_t every;
    const char *resume;       // start from this checkpoint
    const char *init_from;    // start from these weights alone (fresh optimizer and generator)
    int64_t log_every;        // plain-output lines (0: about 10 over the run)
    torc_dtype autocast;      // F32: off; BF16, F16 (with a GradScaler) or F8_E4M3FN (fp8 matmuls)
    double loss_scale;        // the GradScaler's initial scale under --autocast f16
    // data parallel (torc_dist_*, torc_ddp_*): --batch is the global batch, split across ranks
    const char *dist;         // "auto" (on under mpirun or with TORC_COMM), "off", "mpi", "nccl"
    bool deterministic;       // bit-identical results for any process count dividing micro_batches
    int64_t micro_batches;    // the global batch's fixed pieces, each a backward (0: not given: 4 with
                              // --deterministic, else one a process)
    double bucket_cap_mb;     // gradient bucket cap in MiB (default 25, PyTorch's)
    // --model gpt (tools/train_gpt.c): a GPT-2 language model on token files
    const char *model;        // "cruncher" or "gpt" (default: gpt when --data is given, else cruncher)
    const char *data, *val_data;  // token files (torc_tokens_open: llm.c shards, uint16 .bin, .npy)
    int64_t n_layer, n_head, n_embd, block_size;
    int64_t vocab_size;       // 0: from the data (256 for byte-level files)
    int64_t grad_accum;       // micro-batches of --batch rows per step, one backward each
    double min_lr;            // cosine floor (default lr / 10)
    bool min_lr_given, batch_given, steps_given;
    int64_t warmup;           // linear warmup steps
    double weight_decay, grad_clip, dropout;  // grad_clip 0: off
    int64_t eval_every, eval_batches;  // val loss every N steps (0: at the end only) over M batches
    int64_t sample_every, sample_tokens;  // a sample every N steps (0: at the end only) of K tokens
    uint64_t sample_seed;     // --sample-seed: the sampling generator's seed
    const char *gpt_flag, *cruncher_flag;  // the first flag given that only one model takes
} train_options;

typedef enum train_args_result { TRAIN_ARGS_OK, TRAIN_ARGS_HELP, TRAIN_ARGS_ERROR } train_args_result;

// Parses argv[1..argc-1] into *o (defaults first). TRAIN_ARGS_HELP for -h/--help;
// TRAIN_ARGS_ERROR with a message naming the option (and the range it accepts) in err. Prints
// nothing and never exits; the strings in *o point into argv.
train_args_result train_args_parse(int argc, char **argv, train_options *o, char *err, size_t errcap);
void train_args_usage(FILE *f);

// Output helpers of both trainers (torc-train.c and train_gpt.c): the monotonic clock in seconds;
// a byte count in B/KiB/MiB/GiB/TiB ("%.1f", whole bytes "%.0f"); v with an SI prefix (k to E)
// and unit, to `digits` significant digits. Both return buf.
double train_now(void);
const char *train_bytes_str(uint64_t b, char *buf, size_t n);
const char *train_si_str(int digits, double v, const char *unit, char *buf, size_t n);

// The end of both trainers' steps: the optimizer's step, through the GradScaler when there is
// one (which skips the step when a gradient overflowed, counted in *skipped, then adjusts the
// scale), then the gradients set to None. TORC_OK, else the first failure's status.
torc_status train_optimizer_step(torc_optimizer *opt, torc_grad_scaler *scaler, int64_t *skipped);

// Both trainers' device: --backend's (NULL: the default device), made the default. Under a
// device-memory comm plugin (nccl) a backend named without an index goes to the local rank's
// device (cuda -> cuda:<local rank>), where that plugin runs this process's collectives. NULL on
// failure, with torc's error set.
torc_device *train_open_device(const char *backend, bool dist);

#endif
