// tests/fuzz/fuzz_checkpoint.c — libFuzzer harness for torc_checkpoint_load: any bytes as a
// training checkpoint (model, Adam state, step, generator) must resume or give an error that
// leaves model, optimizer, step and generator untouched; never crash, hang or leak.
// its seed program (harness.h) writes the seed corpus (checkpoints saved by torc_checkpoint_save after
// 0..3 Adam steps, and a model-only file) and exits.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <torc/torc.h>

#include "harness.h"

static int g_fd = -1;
static char g_path[64];
static const char *const g_names[] = {"linear.weight", "linear.bias"};

typedef struct model {
    torc_tensor *w, *b;  // (3, 4), (3)
    torc_optimizer *opt;
    torc_generator *gen;
} model;

static void model_new(model *m) {
    m->w = torc_zeros(TORC_SHAPE(3, 4), TORC_DTYPE_F32);
    m->b = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F32);
    torc_set_requires_grad(m->w, true);
    torc_set_requires_grad(m->b, true);
    m->opt = torc_optimizer_new("adam", 2, (torc_tensor *[]){m->w, m->b}, "lr=0.01 amsgrad=true");
    m->gen = torc_generator_new(5);
    if (!m->w || !m->b || !m->opt || !m->gen) {
        fprintf(stderr, "fuzz_checkpoint: %s\n", torc_last_error());
        abort();
    }
}

static void model_step(model *m) {
    torc_scope_push();
    torc_set_grad(m->w, torc_randn(TORC_SHAPE(3, 4), TORC_DTYPE_F32, m->gen));
    torc_set_grad(m->b, torc_randn(TORC_SHAPE(3), TORC_DTYPE_F32, m->gen));
    torc_scope_pop();
    torc_optimizer_step(m->opt);
    torc_optimizer_zero_grad(m->opt, true);
}

static void model_free(model *m) {
    torc_optimizer_free(m->opt);
    torc_release(m->w);
    torc_release(m->b);
    torc_generator_free(m->gen);
}

static void write_seeds(const char *dir) {
    model m;
    model_new(&m);
    char path[4200];
    for (int s = 0; s <= 3; s++) {
        snprintf(path, sizeof path, "%s/adam_step%d.safetensors", dir, s);
        if (torc_checkpoint_save(path, 2, g_names, (torc_tensor *[]){m.w, m.b}, m.opt, s, m.gen))
            fprintf(stderr, "%s\n", torc_last_error());
        model_step(&m);
    }
    snprintf(path, sizeof path, "%s/model_only.safetensors", dir);
    torc_checkpoint_save(path, 2, g_names, (torc_tensor *[]){m.w, m.b}, NULL, 0, NULL);
    model_free(&m);
}

static model g_m;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    setenv("TORC_BACKEND", "reference", 0);
    g_fd = memfd_create("fuzz_checkpoint", 0);
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    model_new(&g_m);
    model_step(&g_m);  // state to lose if a refused load changed anything
    return 0;
}

// The state a refused load must leave alone.
typedef struct snapshot {
    float w[12], b[3];
    int64_t steps[2];
    uint64_t seed, offset;
} snapshot;

static void snap(snapshot *s) {
    memset(s, 0, sizeof *s);
    if (torc_copy_to_host(g_m.w, s->w, sizeof s->w) || torc_copy_to_host(g_m.b, s->b, sizeof s->b)) abort();
    for (int i = 0; i < 2; i++) s->steps[i] = torc_optimizer_param_step_count(g_m.opt, i);
    torc_generator_get_state(g_m.gen, &s->seed, &s->offset);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (ftruncate(g_fd, 0) || pwrite(g_fd, data, size, 0) != (ssize_t)size) abort();
    snapshot before, after;
    snap(&before);
    int64_t step = -7;
    torc_status st = torc_checkpoint_load(g_path, 2, g_names, (torc_tensor *[]){g_m.w, g_m.b}, g_m.opt, &step, g_m.gen);
    if (st != TORC_OK) {
        snap(&after);
        if (memcmp(&before, &after, sizeof before) || step != -7) {
            fprintf(stderr, "a refused checkpoint changed the state: %s\n", torc_last_error());
            abort();
        }
        return 0;
    }
    // Resumed: the optimizer must be able to take a step from it.
    model_step(&g_m);
    return 0;
}

#ifdef TORC_FUZZ_SEEDS
static void fuzz_write_seeds(void) { write_seeds(fuzz_seed_dir); }  // harness.h's seed program
#endif
