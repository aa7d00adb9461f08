// tests/fuzz/fuzz_safetensors.c — libFuzzer harness for torc_load: any bytes as a safetensors
// file must load or give an error, never crash, hang, leak or read outside the file. What loads
// is read back element by element, saved again and reloaded. its seed program (harness.h) writes the
// seed corpus (state dicts of every dtype and odd shapes, saved by torc_save) and exits.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <torc/torc.h>

#include "harness.h"

static int g_fd = -1;          // the input, as a file (memfd: no disk)
static char g_path[64];        // /proc/self/fd/N
static char g_resave[4096];    // where a loaded dict is saved again

static void write_seeds(const char *dir) {
    static const torc_dtype dtypes[] = {TORC_DTYPE_F64, TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16,
                                        TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E5M2, TORC_DTYPE_I64, TORC_DTYPE_I32,
                                        TORC_DTYPE_I16, TORC_DTYPE_I8, TORC_DTYPE_U8, TORC_DTYPE_BOOL};
    char path[4200];
    torc_scope_push();
    // One tensor per dtype, and a dict holding all of them with metadata.
    torc_state_dict *all = torc_state_dict_new();
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        torc_tensor *t = torc_to_dtype(torc_arange(0, 6, 1, TORC_DTYPE_F32), dtypes[i]);
        torc_tensor *r = torc_reshape(t, TORC_SHAPE(2, 3));
        torc_state_dict *one = torc_state_dict_new();
        torc_state_dict_set(one, "x", r);
        snprintf(path, sizeof path, "%s/dtype_%s.safetensors", dir, torc_dtype_name(dtypes[i]));
        if (torc_save(one, path)) fprintf(stderr, "%s\n", torc_last_error());
        torc_state_dict_free(one);
        torc_state_dict_set(all, torc_dtype_name(dtypes[i]), r);
    }
    torc_state_dict_set_meta(all, "format", "pt");
    torc_state_dict_set_meta(all, "note", "quotes \" backslash \\ newline \n");
    snprintf(path, sizeof path, "%s/all.safetensors", dir);
    torc_save(all, path);
    torc_state_dict_free(all);
    // Odd shapes: a scalar, empty dims, many dims, an empty dict.
    torc_state_dict *odd = torc_state_dict_new();
    torc_state_dict_set(odd, "scalar", torc_full(0, NULL, 3.5, TORC_DTYPE_F32));
    torc_state_dict_set(odd, "empty", torc_zeros(TORC_SHAPE(0, 4), TORC_DTYPE_F32));
    torc_state_dict_set(odd, "deep", torc_ones(TORC_SHAPE(1, 2, 1, 2, 1, 2, 1, 2), TORC_DTYPE_I16));
    snprintf(path, sizeof path, "%s/odd.safetensors", dir);
    torc_save(odd, path);
    torc_state_dict_free(odd);
    torc_state_dict *none = torc_state_dict_new();
    snprintf(path, sizeof path, "%s/empty.safetensors", dir);
    torc_save(none, path);
    torc_state_dict_free(none);
    torc_scope_pop();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    setenv("TORC_BACKEND", "reference", 0);
    g_fd = memfd_create("fuzz_safetensors", 0);
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    const char *tmp = getenv("TMPDIR");
    snprintf(g_resave, sizeof g_resave, "%s/torc_fuzz_resave_%d.safetensors", tmp ? tmp : "/tmp", (int)getpid());
    return 0;
}

// Reads every element through the ops a user would run (sum of a float copy), so a tensor that
// claims more bytes than it owns is caught by ASan.
static void touch(const torc_state_dict *sd, const char *name) {
    torc_scope_push();
    torc_tensor *t = torc_state_dict_get(sd, name);
    torc_tensor *f = t ? torc_to_dtype(t, TORC_DTYPE_F64) : NULL;
    double v;
    if (f) torc_item(torc_sum(f, 0, NULL, false), &v);
    torc_scope_pop();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (ftruncate(g_fd, 0) || pwrite(g_fd, data, size, 0) != (ssize_t)size) abort();
    torc_state_dict *sd = torc_load(g_path, NULL);
    if (!sd) return 0;
    const int n = torc_state_dict_size(sd);
    for (int i = 0; i < n; i++) touch(sd, torc_state_dict_name(sd, i));
    const int nm = torc_state_dict_meta_size(sd);
    for (int i = 0; i < nm; i++) (void)strlen(torc_state_dict_get_meta(sd, torc_state_dict_meta_key(sd, i)));
    // What loads saves and loads again with the same names and metadata.
    if (torc_save(sd, g_resave) == TORC_OK) {
        torc_state_dict *again = torc_load(g_resave, NULL);
        if (!again || torc_state_dict_size(again) != n) abort();
        for (int i = 0; i < n; i++)
            if (strcmp(torc_state_dict_name(again, i), torc_state_dict_name(sd, i))) abort();
        torc_state_dict_free(again);
        unlink(g_resave);
    }
    torc_state_dict_free(sd);
    return 0;
}

#ifdef TORC_FUZZ_SEEDS
static void fuzz_write_seeds(void) { write_seeds(fuzz_seed_dir); }  // harness.h's seed program
#endif
