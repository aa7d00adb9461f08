// tests/fuzz/fuzz_tokens.c — libFuzzer harness for torc_tokens_open + torc_tokens_check +
// torc_get_batch / torc_next_batch_shard: any bytes as an llm.c shard, raw uint16 or .npy token
// file, opened with the format and vocabulary the first input byte picks; must give batches of
// tokens inside the file and the vocabulary or an error, never crash, hang or leak.
// Its seed program (harness.h) writes llm.c shards (uint16 and llama-3's uint32), raw uint16 and
// .npy v1 / v2 files of a few dozen tokens.
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

static const int64_t g_vocab[] = {0, 2, 256, 50257};

#ifdef TORC_FUZZ_SEEDS
// selector byte (format + 4 * vocab index), then the file.
static void seed(unsigned char sel, const void *head, size_t nh, const void *body, size_t nb) {
    unsigned char buf[4096];
    if (1 + nh + nb > sizeof buf) abort();
    buf[0] = sel;
    if (nh) memcpy(buf + 1, head, nh);  // head may be NULL (a raw file has none)
    if (nb) memcpy(buf + 1 + nh, body, nb);
    fuzz_seed(buf, 1 + nh + nb);
}

static void fuzz_write_seeds(void) {
    uint16_t t16[40];
    uint32_t t32[40];
    for (int i = 0; i < 40; i++) t16[i] = (uint16_t)(i * 7), t32[i] = (uint32_t)(i * 7);
    int32_t head[256] = {20240520, 1, 40};
    seed(0 + 4 * 2, head, sizeof head, t16, sizeof t16);  // auto, vocab 256: valid
    seed(1 + 4 * 3, head, sizeof head, t16, sizeof t16);  // llmc, vocab 50257
    int32_t llama[256] = {20240801, 7, 40};
    seed(0 + 4 * 3, llama, sizeof llama, t32, sizeof t32);
    seed(2 + 4 * 1, NULL, 0, t16, sizeof t16);  // raw, vocab 2: most tokens refused
    for (int version = 1; version <= 2; version++) {
        char dict[128];
        const int pre = version == 1 ? 10 : 12;
        int len = snprintf(dict, sizeof dict, "{'descr': '<u2', 'fortran_order': False, 'shape': (40,), }");
        while ((pre + len + 1) % 64) dict[len++] = ' ';
        dict[len++] = '\n';
        unsigned char h[12 + 128] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)version, 0, (unsigned char)len, 0};
        memcpy(h + pre, dict, (size_t)len);
        seed((unsigned char)(version == 1 ? 0 : 3), h, (size_t)(pre + len), t16, sizeof t16);
    }
}
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    setenv("TORC_BACKEND", "reference", 0);
    g_fd = memfd_create("fuzz_tokens", 0);
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    g_gen = torc_generator_new(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const torc_token_format format = (torc_token_format)(data[0] % 4);
    const int64_t vocab = g_vocab[(data[0] / 4) % 4];
    if (ftruncate(g_fd, 0) || pwrite(g_fd, data + 1, size - 1, 0) != (ssize_t)(size - 1)) abort();
    torc_dataset *ds = torc_tokens_open(g_path, format, vocab);
    if (!ds) return 0;
    const int64_t n = torc_dataset_numel(ds);
    if (n < 0 || (int64_t)(size - 1) < n * 2) abort();  // every token is at least two bytes of the file
    int64_t mx;
    const bool clean = torc_tokens_check(ds, &mx) == TORC_OK;
    if (clean && (mx < -1 || (vocab && mx >= vocab))) abort();
    const int64_t lens[] = {1, 3, n - 1};
    for (int i = 0; i < 3; i++) {
        torc_scope_push();
        for (int k = 0; k < 2; k++) {
            torc_tensor *x = NULL, *y = NULL;
            const torc_status st = k ? torc_next_batch_shard(ds, 2, lens[i], 1, 2, NULL, &x, &y)
                                     : torc_get_batch(ds, 2, lens[i], NULL, g_gen, &x, &y);
            if (st == TORC_OK) {
                double lo, hi;  // every token read lies in [0, vocab)
                torc_item(torc_min_all(torc_to_dtype(y, TORC_DTYPE_F64)), &lo);
                torc_item(torc_max_all(torc_to_dtype(x, TORC_DTYPE_F64)), &hi);
                if (lo < 0 || (vocab && hi >= (double)vocab)) abort();
            } else if (clean && st == TORC_ERR_IO) {
                abort();  // the whole-file check passed: no batch may find a bad token
            }
        }
        torc_scope_pop();
    }
    torc_dataset_close(ds);
    return 0;
}
