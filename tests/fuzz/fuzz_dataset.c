// tests/fuzz/fuzz_dataset.c — libFuzzer harness for torc_dataset_open + torc_get_batch: any bytes
// as a .npy or raw token file, opened with a dtype picked by the first input byte, then batches
// drawn; must give batches inside the file or an error, never crash, hang or leak.
// its seed program (harness.h) writes the seed corpus (torc arrays of every dataset dtype as .npy v1 and
// v2 files and raw files, data from torc_arange copied out with torc_copy_to_host) and exits.
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
static torc_generator *g_gen;

// The dtype argument chosen by the input's first byte: the file's own (NULL), or a name.
static const char *const g_dtypes[] = {NULL, "uint8", "int8", "uint16", "int16", "uint32", "int32", "int64",
                                       "float16", "float32", "float64", "<u2", "|u1", "bogus"};
#define N_DTYPES (sizeof g_dtypes / sizeof g_dtypes[0])

static const struct { const char *name, *descr; torc_dtype dt; } g_kinds[] = {
    {"uint8", "|u1", TORC_DTYPE_U8}, {"int8", "|i1", TORC_DTYPE_I8},   {"int16", "<i2", TORC_DTYPE_I16},
    {"int32", "<i4", TORC_DTYPE_I32}, {"int64", "<i8", TORC_DTYPE_I64}, {"float16", "<f2", TORC_DTYPE_F16},
    {"float32", "<f4", TORC_DTYPE_F32}, {"float64", "<f8", TORC_DTYPE_F64},
};

// One seed file: the selector byte, then a .npy (version 1 or 2) or raw array of 2x50 values.
static void write_seed(const char *dir, int k, int version) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s_%s.seed", dir, g_kinds[k].name, version ? (version == 1 ? "v1" : "v2") : "raw");
    torc_scope_push();
    torc_tensor *t = torc_to_dtype(torc_arange(0, 100, 1, TORC_DTYPE_F32), g_kinds[k].dt);
    unsigned char body[800];
    const size_t nb = torc_nbytes(t);
    if (!t || nb > sizeof body || torc_copy_to_host(t, body, nb)) abort();
    torc_scope_pop();
    FILE *f = fopen(path, "wb");
    if (!f) return;
    unsigned char sel = 0;  // the file's own dtype for .npy; the right name for raw
    for (size_t i = 0; i < N_DTYPES && !version; i++)
        if (g_dtypes[i] && !strcmp(g_dtypes[i], g_kinds[k].name)) sel = (unsigned char)i;
    fputc(sel, f);
    if (version) {
        char dict[128];
        int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2, 50), }",
                           g_kinds[k].descr);
        const int pre = version == 1 ? 10 : 12;
        const int padded = ((pre + len + 1 + 63) / 64) * 64 - pre;  // the dict + spaces + '\n'
        fwrite("\x93NUMPY", 1, 6, f);
        fputc(version, f);
        fputc(0, f);
        const uint32_t hl = (uint32_t)padded;
        fwrite(&hl, 1, version == 1 ? 2 : 4, f);
        fwrite(dict, 1, (size_t)len, f);
        for (int i = len; i < padded - 1; i++) fputc(' ', f);
        fputc('\n', f);
    }
    fwrite(body, 1, nb, f);
    fclose(f);
}

static void write_seeds(const char *dir) {
    for (size_t k = 0; k < sizeof g_kinds / sizeof g_kinds[0]; k++)
        for (int v = 0; v <= 2; v++) write_seed(dir, (int)k, v);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    setenv("TORC_BACKEND", "reference", 0);
    g_fd = memfd_create("fuzz_dataset", 0);
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    g_gen = torc_generator_new(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *dtype = g_dtypes[data[0] % N_DTYPES];
    if (ftruncate(g_fd, 0) || pwrite(g_fd, data + 1, size - 1, 0) != (ssize_t)(size - 1)) abort();
    torc_dataset *ds = torc_dataset_open(g_path, dtype);
    if (!ds) return 0;
    const int64_t numel = torc_dataset_numel(ds);
    int64_t shape[TORC_MAX_DIMS];
    const int ndim = torc_dataset_shape(ds, shape);
    if (ndim < 0 || ndim > TORC_MAX_DIMS || numel < 0) abort();  // (a 0-d .npy is valid)
    // Windows of a few lengths, up to the whole array; each batch element is read by a sum.
    const int64_t lens[] = {1, 3, numel - 1, numel};
    for (int i = 0; i < 4; i++) {
        torc_scope_push();
        torc_tensor *x = NULL, *y = NULL;
        if (torc_get_batch(ds, 2, lens[i], NULL, g_gen, &x, &y) == TORC_OK) {
            double v;
            torc_item(torc_sum(torc_to_dtype(x, TORC_DTYPE_F64), 0, NULL, false), &v);
            torc_item(torc_sum(torc_to_dtype(y, TORC_DTYPE_F64), 0, NULL, false), &v);
        }
        torc_scope_pop();
    }
    torc_dataset_close(ds);
    return 0;
}

#ifdef TORC_FUZZ_SEEDS
static void fuzz_write_seeds(void) { write_seeds(fuzz_seed_dir); }  // harness.h's seed program
#endif
