// tests/fault/fault_train.c — the program the allocation-failure sweep runs: a small model (one
// hidden ReLU layer) trained 3 steps with Adam, saved as a checkpoint, loaded into a second copy,
// and both stepped once more. Prints the losses and a checksum of the weights in hex floats and
// exits 0, or prints "error: <torc's message>" and exits 1 at the first failure. Run under
// tests/fault/failmalloc.so (LD_PRELOAD), it starts the shim's count once the backend is loaded;
// tests/fault/sweep.sh then fails each allocation in turn and checks every run ends one of
// those two ways. Usage: fault_train CHECKPOINT_PATH
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <torc/torc.h>

static char g_out[1 << 14];  // stdout's buffer: printing must not allocate once failures start

static void fail(const char *what) {
    const char *msg = torc_last_error();
    printf("error: %s: %s\n", what, msg && *msg ? msg : "(no message)");
    fflush(stdout);
    exit(1);
}
#define CHECK_PTR(x) ((x) ? (void)0 : fail(#x))
#define CHECK_OK(x) ((x) == TORC_OK ? (void)0 : fail(#x))

enum { D = 24, B = 16 };
typedef struct model {
    torc_tensor *w1, *b1, *w2;  // (D, D), (D), (1, D)
    torc_optimizer *opt;
} model;
static const char *const g_names[] = {"w1", "b1", "w2"};

static torc_tensor *param(torc_tensor *t) {
    CHECK_PTR(t);
    CHECK_OK(torc_set_requires_grad(t, true));
    return t;
}

static void model_new(model *m, uint64_t seed) {
    torc_scope_push();
    torc_generator *g = torc_generator_new(seed);
    CHECK_PTR(g);
    m->w1 = param(torc_keep(torc_mul_scalar(torc_randn(TORC_SHAPE(D, D), TORC_DTYPE_F32, g), torc_s(0.2))));
    m->b1 = param(torc_keep(torc_zeros(TORC_SHAPE(D), TORC_DTYPE_F32)));
    m->w2 = param(torc_keep(torc_mul_scalar(torc_randn(TORC_SHAPE(1, D), TORC_DTYPE_F32, g), torc_s(0.2))));
    torc_generator_free(g);
    m->opt = torc_optimizer_new("adam", 3, (torc_tensor *[]){m->w1, m->b1, m->w2}, "lr=0.01");
    CHECK_PTR(m->opt);
    torc_scope_pop();
}

// One step on a batch drawn from gen; returns the loss before the update.
static double step(model *m, torc_generator *gen) {
    torc_scope_push();
    torc_tensor *x = torc_randn(TORC_SHAPE(B, D), TORC_DTYPE_F32, gen);
    CHECK_PTR(x);
    torc_tensor *y = torc_sum(x, 1, (const int[]){1}, true);  // (B, 1)
    CHECK_PTR(y);
    torc_tensor *h = torc_matmul(x, torc_transpose(m->w1, 0, 1));
    CHECK_PTR(h);
    CHECK_PTR(h = torc_relu(torc_add(h, m->b1)));
    torc_tensor *out = torc_matmul(h, torc_transpose(m->w2, 0, 1));
    CHECK_PTR(out);
    torc_tensor *loss = torc_mse_loss(out, y);
    CHECK_PTR(loss);
    double v;
    CHECK_OK(torc_item(loss, &v));
    CHECK_OK(torc_backward(loss, NULL, false));
    CHECK_OK(torc_optimizer_step(m->opt));
    CHECK_OK(torc_optimizer_zero_grad(m->opt, true));
    torc_scope_pop();
    return v;
}

static double checksum(const model *m) {
    double total = 0;
    torc_tensor *const ts[] = {m->w1, m->b1, m->w2};
    for (int i = 0; i < 3; i++) {
        torc_scope_push();
        torc_tensor *s = torc_sum(torc_mul(ts[i], ts[i]), 0, NULL, false);
        CHECK_PTR(s);
        double v;
        CHECK_OK(torc_item(s, &v));
        total += v;
        torc_scope_pop();
    }
    return total;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fault_train CHECKPOINT_PATH\n");
        return 2;
    }
    setvbuf(stdout, g_out, _IOFBF, sizeof g_out);
    // Loading the backend is outside the count unless FAULT_TRAIN_COUNT_LOAD=1 (with libdnnl,
    // whose static initializers run at load and cannot survive a failed allocation, that
    // measures what the README says; with the reference backend it is part of the sweep).
    void (*start)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "failmalloc_start");
    long (*stop)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "failmalloc_stop");
    const char *count_load = getenv("FAULT_TRAIN_COUNT_LOAD");
    const bool load_counted = count_load && !strcmp(count_load, "1");
    if (start && load_counted) start();
    CHECK_PTR(torc_default_device());
    if (start && !load_counted) start();

    torc_generator *gen = torc_generator_new(7);
    CHECK_PTR(gen);
    model a;
    model_new(&a, 1);
    for (int s = 0; s < 3; s++) printf("loss %d %a\n", s, step(&a, gen));
    CHECK_OK(torc_checkpoint_save(argv[1], 3, g_names, (torc_tensor *[]){a.w1, a.b1, a.w2}, a.opt, 3, gen));
    model b;
    model_new(&b, 2);
    torc_generator *gen_b = torc_generator_new(99);
    CHECK_PTR(gen_b);
    int64_t at = 0;
    CHECK_OK(torc_checkpoint_load(argv[1], 3, g_names, (torc_tensor *[]){b.w1, b.b1, b.w2}, b.opt, &at, gen_b));
    printf("resumed at %lld, checksums %a %a\n", (long long)at, checksum(&a), checksum(&b));
    printf("loss 3 %a %a\n", step(&a, gen), step(&b, gen_b));
    printf("checksums %a %a\n", checksum(&a), checksum(&b));

    const long counted = stop ? stop() : -1;
    torc_optimizer_free(a.opt);
    torc_optimizer_free(b.opt);
    torc_tensor *const all[] = {a.w1, a.b1, a.w2, b.w1, b.b1, b.w2};
    for (int i = 0; i < 6; i++) torc_release(all[i]);
    torc_generator_free(gen);
    torc_generator_free(gen_b);
    fflush(stdout);
    if (counted >= 0) fprintf(stderr, "allocations: %ld\n", counted);
    return 0;
}
