// tests/fuzz/fuzz_train_args.c — libFuzzer harness for torc-train's command line
// (tools/train_args.c). Input: the arguments, separated by NUL bytes. Checks: an error comes with
// a message, and accepted options are within the ranges the parser promises.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "train_args.h"

#define MAX_ARGS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);  // exactly the input: ASan sees any read past it
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 1] = {"torc-train"};
    int argc = 1;
    for (size_t i = 0; i <= size && argc < MAX_ARGS; argc++) {
        argv[argc] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    train_options o;
    char err[256];
    err[0] = '\0';
    switch (train_args_parse(argc, argv, &o, err, sizeof err)) {
    case TRAIN_ARGS_ERROR:
        if (!err[0]) abort();
        break;
    case TRAIN_ARGS_OK:
        if (o.dim < 1 || o.dim > TRAIN_MAX_DIM || o.layers < 0 || o.layers > TRAIN_MAX_LAYERS || o.batch < 1 ||
            o.batch > TRAIN_MAX_BATCH || o.steps < 0 || o.steps > TRAIN_MAX_STEPS || o.every < 0 || o.log_every < 0 ||
            strlen(o.hparams) >= sizeof o.hparams || (o.every && !o.checkpoint) || !(o.loss_scale > 0))
            abort();
        break;
    case TRAIN_ARGS_HELP: break;
    }
    free(buf);
    return 0;
}

#ifdef TORC_FUZZ_SEEDS
// The command lines of torc-train's own tests (tests/train.sh) and its --help.
static void fuzz_write_seeds(void) {
    static const char *const seeds[][12] = {
        {"--steps", "20", "--dim", "8", "--layers", "2", "--batch", "16"},
        {"--optim", "sgd", "--lr", "0.05", "--hp", "momentum=0.9", "--hp", "nesterov=true"},
        {"--optim", "adam", "--hp", "betas=0.9,0.99", "--hp", "amsgrad=true"},
        {"--checkpoint", "ck.safetensors", "--every", "5", "--steps", "10"},
        {"--resume", "ck.safetensors", "--steps", "20", "--seed", "7", "--log-every", "2"},
        {"--autocast", "f16", "--loss-scale", "1024", "--backend", "reference"},
        {"--autocast", "bf16", "--dim", "1048576", "--layers", "255"},
        {"--help"},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char buf[512];
        size_t n = 0;
        for (int k = 0; k < 12 && seeds[i][k]; k++) {
            const size_t len = strlen(seeds[i][k]);
            if (k) buf[n++] = '\0';
            memcpy(buf + n, seeds[i][k], len);
            n += len;
        }
        fuzz_seed(buf, n);
    }
}
#endif
