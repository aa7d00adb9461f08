// tests/ckpt_interop.c — the C side of tests/safetensors_interop.py: `write PATH` saves a torc
// checkpoint with known weights (for Python's safetensors to read), `read PATH` loads a file that
// Python's safetensors wrote and checks every tensor and the metadata, `resume PATH` resumes from
// `write`'s checkpoint (after Python re-saved it). Exit status 0 = all good.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

static int fail(const char *what) {
    fprintf(stderr, "ckpt_interop: %s (%s)\n", what, torc_last_error());
    return 1;
}

static int expect(torc_state_dict *sd, const char *name, torc_dtype dtype, int ndim, const int64_t *shape,
                  const double *values) {
    torc_tensor *t = torc_state_dict_get(sd, name);
    if (!t) return fail(name);
    if (torc_get_dtype(t) != dtype || torc_ndim(t) != ndim) {
        fprintf(stderr, "%s: dtype %s ndim %d\n", name, torc_dtype_name(torc_get_dtype(t)), torc_ndim(t));
        return 1;
    }
    for (int d = 0; d < ndim; d++)
        if (torc_size(t, d) != shape[d]) return fprintf(stderr, "%s: dim %d is %lld\n", name, d, (long long)torc_size(t, d)), 1;
    const int64_t n = torc_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n + 1));
    torc_tensor *d = torc_to_dtype(t, TORC_DTYPE_F64);
    if (!d || torc_copy_to_host(d, v, sizeof(double) * (size_t)n)) return fail(name);
    for (int64_t i = 0; i < n; i++)
        if (v[i] != values[i]) {
            fprintf(stderr, "%s[%lld] = %.17g, expected %.17g\n", name, (long long)i, v[i], values[i]);
            return 1;
        }
    free(v);
    return 0;
}

static int do_write(const char *path) {
    torc_scope_push();
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = 0.5f * (float)i - 1.0f;
    torc_tensor *weight = torc_tensor_from(w, TORC_SHAPE(3, 4), TORC_DTYPE_F32);
    torc_tensor *final = torc_tensor_from((float[]){1.0f, -2.0f, 3.5f}, TORC_SHAPE(3, 1), TORC_DTYPE_F32);
    torc_tensor *counts = torc_tensor_from((int64_t[]){1, -2, 3, -4}, TORC_SHAPE(2, 2), TORC_DTYPE_I64);
    torc_tensor *half = torc_to_dtype(torc_tensor_from((float[]){0.5f, -1.5f, 65504.0f}, TORC_SHAPE(3), TORC_DTYPE_F32),
                                      TORC_DTYPE_F16);
    torc_tensor *mask = torc_tensor_from((bool[]){true, false, true, true}, TORC_SHAPE(4), TORC_DTYPE_BOOL);
    torc_tensor *scalar = torc_scalar_tensor(3.25, TORC_DTYPE_F64);
    torc_tensor *ts[] = {weight, final, counts, half, mask, scalar};
    const char *names[] = {"layers.0.weight", "final.weight", "counts", "half", "mask", "scalar"};
    for (int i = 0; i < 6; i++)
        if (!ts[i]) return fail("making tensors");
    // An optimizer with state, so the file also holds optimizer.* tensors.
    torc_set_requires_grad(weight, true);
    torc_set_grad(weight, torc_ones_like(weight));
    torc_optimizer *opt = torc_optimizer_new("sgd", 1, &weight, "lr=0.1 momentum=0.9");
    if (!opt || torc_optimizer_step(opt)) return fail("optimizer");
    torc_generator *gen = torc_generator_new(1234);
    if (torc_checkpoint_save(path, 6, names, ts, opt, 7, gen)) return fail("save");
    torc_generator_free(gen);
    torc_optimizer_free(opt);
    torc_scope_pop();
    return 0;
}

static int do_read(const char *path) {
    torc_state_dict *sd = torc_load(path, NULL);
    if (!sd) return fail("load");
    torc_scope_push();
    int bad = 0;
    bad |= expect(sd, "weight", TORC_DTYPE_F32, 2, (int64_t[]){2, 3}, (double[]){0.25, 0.5, 0.75, 1, 1.25, 1.5});
    bad |= expect(sd, "ids", TORC_DTYPE_I64, 1, (int64_t[]){4}, (double[]){0, -1, 1099511627776.0, 7});
    bad |= expect(sd, "flags", TORC_DTYPE_BOOL, 1, (int64_t[]){3}, (double[]){1, 0, 1});
    bad |= expect(sd, "h", TORC_DTYPE_F16, 1, (int64_t[]){2}, (double[]){1.5, -2.0});
    bad |= expect(sd, "d", TORC_DTYPE_F64, 0, NULL, (double[]){2.5});
    bad |= expect(sd, "u", TORC_DTYPE_U8, 1, (int64_t[]){2}, (double[]){0, 255});
    bad |= expect(sd, "i32", TORC_DTYPE_I32, 2, (int64_t[]){1, 2}, (double[]){-7, 2147483647});
    bad |= expect(sd, "empty", TORC_DTYPE_F32, 2, (int64_t[]){0, 3}, NULL);
    bad |= expect(sd, "u16", TORC_DTYPE_I32, 1, (int64_t[]){3}, (double[]){0, 40000, 65535});
    bad |= expect(sd, "u32", TORC_DTYPE_I64, 2, (int64_t[]){1, 3}, (double[]){0, 3000000000.0, 4294967295.0});
    bad |= expect(sd, "u64", TORC_DTYPE_I64, 1, (int64_t[]){2}, (double[]){5, 9223372036854775807.0});
    if (torc_state_dict_size(sd) != 11) bad = fprintf(stderr, "expected 11 tensors, got %d\n", torc_state_dict_size(sd));
    const char *who = torc_state_dict_get_meta(sd, "who"), *note = torc_state_dict_get_meta(sd, "note");
    if (!who || strcmp(who, "python")) bad = fprintf(stderr, "metadata 'who' is %s\n", who ? who : "missing");
    if (!note || strcmp(note, "\xc3\xbcnic\xc3\xb6" "de \"quoted\" back\\slash")) bad = fprintf(stderr, "metadata 'note' is %s\n", note ? note : "missing");
    // And a model loads from it through the checkpoint API (weights only).
    torc_tensor *w = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    const char *only[] = {"weight", "ids", "flags", "h", "d", "u", "i32", "empty", "u16", "u32", "u64"};
    torc_tensor *dst[11] = {w};
    for (int i = 1; i < 11; i++) dst[i] = torc_zeros_like(torc_state_dict_get(sd, only[i]));
    if (torc_checkpoint_load(path, 11, only, dst, NULL, NULL, NULL)) bad = fail("checkpoint_load");
    double first;
    torc_item(torc_select(torc_select(w, 0, 1), 0, 2), &first);
    if (first != 1.5) bad = fprintf(stderr, "checkpoint_load gave weight[1][2] = %g\n", first);
    torc_scope_pop();
    torc_state_dict_free(sd);
    if (!bad) printf("torc read every tensor and the metadata Python wrote\n");
    return bad ? 1 : 0;
}

// Resumes from a checkpoint `write` made (Python may have re-saved it): the model's tensors, the
// SGD optimizer's momentum, the step and the generator all come back.
static int do_resume(const char *path) {
    torc_scope_push();
    torc_tensor *ts[6] = {torc_zeros(TORC_SHAPE(3, 4), TORC_DTYPE_F32), torc_zeros(TORC_SHAPE(3, 1), TORC_DTYPE_F32),
                          torc_zeros(TORC_SHAPE(2, 2), TORC_DTYPE_I64), torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F16),
                          torc_zeros(TORC_SHAPE(4), TORC_DTYPE_BOOL), torc_scalar_tensor(0, TORC_DTYPE_F64)};
    const char *names[] = {"layers.0.weight", "final.weight", "counts", "half", "mask", "scalar"};
    torc_tensor *weight = ts[0];
    torc_set_requires_grad(weight, true);
    torc_optimizer *opt = torc_optimizer_new("sgd", 1, &weight, "lr=0.5");
    torc_generator *gen = torc_generator_new(1);
    int64_t step = 0;
    if (!opt || !gen || torc_checkpoint_load(path, 6, names, ts, opt, &step, gen)) return fail("resume");
    uint64_t seed, offset;
    torc_generator_get_state(gen, &seed, &offset);
    int bad = 0;
    if (step != 7 || seed != 1234) bad = fprintf(stderr, "resumed at step %lld with seed %llu\n", (long long)step, (unsigned long long)seed);
    double lr[4] = {0};
    if (torc_optimizer_get_hparam(opt, 0, "lr", lr) || lr[0] != 0.1) bad = fprintf(stderr, "resumed lr %g\n", lr[0]);
    torc_tensor *mom = torc_optimizer_state(opt, 0, "momentum_buffer");
    double m = 0, w = 0;
    if (!mom || torc_item(torc_select(torc_select(mom, 0, 2), 0, 3), &m) || m != 1.0) bad = fprintf(stderr, "momentum %g\n", m);
    torc_item(torc_select(torc_select(weight, 0, 2), 0, 3), &w);
    if (w != (double)((0.5f * 11 - 1.0f) - 0.1f)) bad = fprintf(stderr, "weight[2][3] = %.9g\n", w);
    torc_generator_free(gen);
    torc_optimizer_free(opt);
    torc_scope_pop();
    if (!bad) printf("torc resumed from '%s' at step %lld\n", path, (long long)step);
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 3) return fprintf(stderr, "usage: ckpt_interop write|read|resume PATH\n"), 2;
    if (!strcmp(argv[1], "write")) return do_write(argv[2]);
    if (!strcmp(argv[1], "read")) return do_read(argv[2]);
    if (!strcmp(argv[1], "resume")) return do_resume(argv[2]);
    return 2;
}
