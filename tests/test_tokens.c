// tests/test_tokens.c — token files: llm.c shards (and llm.c's llama-3 shards), nanoGPT's raw
// uint16 .bin and .npy read back token for token; every refusal with the file and the offset in its
// message; random and in-order batches' exact values; rank slices for world sizes 1, 2 and 4
// giving the one-process batch; an exact resume from the generator's state and the position.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tmpdir.h"
#include "torc/philox.h"

static void write_file(const char *path, const void *a, size_t na, const void *b, size_t nb) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (na) ck_assert_int_eq(fwrite(a, 1, na, f), na);
    if (nb) ck_assert_int_eq(fwrite(b, 1, nb, f), nb);
    fclose(f);
}

// An llm.c shard: 256 int32 (magic, version, count, zeros), then nb bytes of tokens.
static void write_llmc(const char *path, int32_t magic, int32_t version, int32_t count, const void *tok, size_t nb) {
    int32_t header[256] = {magic, version, count};
    write_file(path, header, sizeof header, tok, nb);
}

// A .npy file of format version 1 or 2; pad 0 pads the header to 64 bytes as NumPy does, else
// to pad bytes exactly (an unaligned data start).
static void write_npy(const char *path, int version, const char *descr, const char *shape, const void *data, size_t n,
                      int pad) {
    char dict[256];
    const int pre = version == 1 ? 10 : 12;
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    while (pad ? pre + len + 1 < pad : (pre + len + 1) % 64) dict[len++] = ' ';
    dict[len++] = '\n';
    unsigned char head[12 + 256] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)version, 0};
    head[8] = (unsigned char)(len & 0xFF);
    head[9] = (unsigned char)(len >> 8);
    if (version == 2) head[10] = head[11] = 0;
    memcpy(head + pre, dict, (size_t)len);
    write_file(path, head, (size_t)(pre + len), data, n);
}

static int64_t *ids(torc_tensor *t) {
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_get_dtype(t), TORC_DTYPE_I64);
    const int64_t n = torc_numel(t);
    int64_t *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    ck_assert_int_eq(torc_copy_to_host(t, v, sizeof *v * (size_t)n), TORC_OK);
    return v;
}

static torc_device *host(void) { return torc_device_get("reference"); }

// x and y of an in-order batch are data[p + i] and data[p + i + 1], row after row.
static void assert_in_order(torc_tensor *x, torc_tensor *y, int64_t rows, int64_t T, int64_t p, int64_t (*tok)(int64_t)) {
    tu_assert_shape(x, rows, T);
    tu_assert_shape(y, rows, T);
    int64_t *xs = ids(x), *ys = ids(y);
    for (int64_t i = 0; i < rows * T; i++) {
        ck_assert_int_eq(xs[i], tok(p + i));
        ck_assert_int_eq(ys[i], tok(p + i + 1));
    }
    free(xs);
    free(ys);
}

static int64_t tok_a(int64_t i) { return (i * 7919) % 50257; }  // GPT-2's vocabulary, above INT16_MAX too

static const char *make_llmc(const char *name, int n) {
    const char *path = tmp_path(name);
    uint16_t *t = malloc(sizeof *t * (size_t)n);
    for (int i = 0; i < n; i++) t[i] = (uint16_t)tok_a(i);
    write_llmc(path, 20240520, 1, n, t, sizeof *t * (size_t)n);
    free(t);
    return path;
}

// ---- each format, token for token ----
START_TEST(llmc_shard_round_trip) {
    const char *path = make_llmc("train.bin", 1000);
    for (int f = 0; f < 2; f++) {  // by its magic, and named
        torc_dataset *ds = torc_tokens_open(path, f ? TORC_TOKENS_LLMC : TORC_TOKENS_AUTO, 50257);
        ck_assert_msg(ds != NULL, "%s", torc_last_error());
        ck_assert_int_eq(torc_tokens_format(ds), TORC_TOKENS_LLMC);
        ck_assert_str_eq(torc_token_format_name(torc_tokens_format(ds)), "llm.c shard");
        ck_assert_int_eq(torc_dataset_numel(ds), 1000);
        ck_assert_str_eq(torc_dataset_dtype(ds), "uint16");
        ck_assert_int_eq(torc_tokens_vocab_size(ds), 50257);
        int64_t mx = 0;
        ck_assert_int_eq(torc_tokens_check(ds, &mx), TORC_OK);
        int64_t want = 0;
        for (int i = 0; i < 1000; i++) want = tok_a(i) > want ? tok_a(i) : want;
        ck_assert_int_eq(mx, want);
        torc_tensor *x, *y;
        ck_assert_int_eq(torc_next_batch(ds, 4, 250 - 1, host(), &x, &y), TORC_OK);
        assert_in_order(x, y, 4, 249, 0, tok_a);
        torc_release(x);
        torc_release(y);
        torc_dataset_close(ds);
    }
}
END_TEST

static int64_t tok_big(int64_t i) { return 100000 + i * 3; }  // past uint16

START_TEST(llama3_shard_holds_uint32) {
    const char *path = tmp_path("llama.bin");
    uint32_t t[40];
    for (int i = 0; i < 40; i++) t[i] = (uint32_t)tok_big(i);
    write_llmc(path, 20240801, 7, 40, t, sizeof t);
    torc_dataset *ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 128256);
    ck_assert_msg(ds != NULL, "%s", torc_last_error());
    ck_assert_str_eq(torc_dataset_dtype(ds), "uint32");
    ck_assert_int_eq(torc_dataset_numel(ds), 40);
    torc_tensor *x, *y;
    ck_assert_int_eq(torc_next_batch(ds, 3, 13, host(), &x, &y), TORC_OK);
    assert_in_order(x, y, 3, 13, 0, tok_big);
    torc_release(x);
    torc_release(y);
    torc_dataset_close(ds);
    // Its version is 7, not 1.
    write_llmc(path, 20240801, 1, 40, t, sizeof t);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "llm.c shard version 1 at byte offset 4, not 7 (the version of magic 20240801, uint32 tokens)");
}
END_TEST

START_TEST(raw_uint16_round_trip) {
    const char *path = tmp_path("nanogpt.bin");
    uint16_t t[300];
    for (int i = 0; i < 300; i++) t[i] = (uint16_t)tok_a(i);
    write_file(path, t, sizeof t, NULL, 0);
    for (int f = 0; f < 2; f++) {
        torc_dataset *ds = torc_tokens_open(path, f ? TORC_TOKENS_U16 : TORC_TOKENS_AUTO, 0);
        ck_assert_msg(ds != NULL, "%s", torc_last_error());
        ck_assert_int_eq(torc_tokens_format(ds), TORC_TOKENS_U16);
        ck_assert_int_eq(torc_dataset_numel(ds), 300);
        torc_tensor *x, *y;
        ck_assert_int_eq(torc_next_batch(ds, 2, 149, host(), &x, &y), TORC_OK);
        assert_in_order(x, y, 2, 149, 0, tok_a);
        torc_release(x);
        torc_release(y);
        torc_dataset_close(ds);
    }
    // The random windows are torc_get_batch's over the same array opened as a plain dataset.
    torc_dataset *a = torc_tokens_open(path, TORC_TOKENS_AUTO, 50257), *b = torc_dataset_open(path, "uint16");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    torc_generator *ga = torc_generator_new(3), *gb = torc_generator_new(3);
    for (int step = 0; step < 3; step++) {
        torc_tensor *xa, *ya, *xb, *yb;
        ck_assert_int_eq(torc_get_batch(a, 5, 17, host(), ga, &xa, &ya), TORC_OK);
        ck_assert_int_eq(torc_get_batch(b, 5, 17, host(), gb, &xb, &yb), TORC_OK);
        int64_t *v1 = ids(xa), *v2 = ids(xb), *w1 = ids(ya), *w2 = ids(yb);
        ck_assert_mem_eq(v1, v2, 5 * 17 * 8);
        ck_assert_mem_eq(w1, w2, 5 * 17 * 8);
        free(v1), free(v2), free(w1), free(w2);
        torc_release(xa), torc_release(ya), torc_release(xb), torc_release(yb);
    }
    torc_generator_free(ga);
    torc_generator_free(gb);
    torc_dataset_close(a);
    torc_dataset_close(b);
}
END_TEST

static int64_t tok_i(int64_t i) { return 3 * i + 1; }

START_TEST(npy_round_trip) {
    // uint16, int32, uint32 and int64; format 1 and 2 headers; a data start that is not aligned.
    const struct { const char *descr; int size; } kinds[] = {{"<u2", 2}, {"<i4", 4}, {"<u4", 4}, {"<i8", 8}};
    unsigned char data[64 * 8];
    for (int k = 0; k < 4; k++)
        for (int version = 1; version <= 2; version++)
            for (int pad = 0; pad <= 77; pad += 77) {
                for (int i = 0; i < 64; i++) {
                    const int64_t v = tok_i(i);
                    memcpy(data + i * kinds[k].size, &v, (size_t)kinds[k].size);  // little-endian
                }
                const char *path = tmp_path("tok.npy");
                write_npy(path, version, kinds[k].descr, "(64,)", data, (size_t)(64 * kinds[k].size), pad);
                torc_dataset *ds = torc_tokens_open(path, version == 1 ? TORC_TOKENS_AUTO : TORC_TOKENS_NPY, 200);
                ck_assert_msg(ds != NULL, "%s %d: %s", kinds[k].descr, version, torc_last_error());
                ck_assert_int_eq(torc_tokens_format(ds), TORC_TOKENS_NPY);
                ck_assert_int_eq(torc_dataset_numel(ds), 64);
                int64_t mx;
                ck_assert_int_eq(torc_tokens_check(ds, &mx), TORC_OK);
                ck_assert_int_eq(mx, tok_i(63));
                torc_tensor *x, *y;
                ck_assert_int_eq(torc_next_batch(ds, 3, 21, host(), &x, &y), TORC_OK);
                assert_in_order(x, y, 3, 21, 0, tok_i);
                torc_release(x);
                torc_release(y);
                torc_dataset_close(ds);
            }
}
END_TEST

// Files NumPy wrote (tools/golden/gen_tokens_golden.py: llm.c's write_datafile, nanoGPT's
// tofile, np.save, format 2.0): t[i] = (i * 7919) % M, 300 tokens each.
static int64_t g_mod;
static int64_t tok_golden(int64_t i) { return (i * 7919) % g_mod; }

START_TEST(numpy_files_agree) {
    const struct { const char *name; torc_token_format format; const char *dtype; int64_t mod; } files[] = {
        {"tokens_llmc.bin", TORC_TOKENS_LLMC, "uint16", 50257},   {"tokens_llama3.bin", TORC_TOKENS_LLMC, "uint32", 128256},
        {"tokens_nanogpt.bin", TORC_TOKENS_U16, "uint16", 50257}, {"tokens_u2.npy", TORC_TOKENS_NPY, "uint16", 50257},
        {"tokens_i4.npy", TORC_TOKENS_NPY, "int32", 128256},      {"tokens_i8_v2.npy", TORC_TOKENS_NPY, "int64", 128256},
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", getenv("TORC_TEST_DATA"), files[f].name);
        torc_dataset *ds = torc_tokens_open(path, TORC_TOKENS_AUTO, files[f].mod);
        ck_assert_msg(ds != NULL, "%s", torc_last_error());
        ck_assert_int_eq(torc_tokens_format(ds), files[f].format);
        ck_assert_str_eq(torc_dataset_dtype(ds), files[f].dtype);
        ck_assert_int_eq(torc_dataset_numel(ds), 300);
        g_mod = files[f].mod;
        int64_t mx, want = 0;
        for (int64_t i = 0; i < 300; i++) want = tok_golden(i) > want ? tok_golden(i) : want;
        ck_assert_int_eq(torc_tokens_check(ds, &mx), TORC_OK);
        ck_assert_int_eq(mx, want);
        torc_tensor *x, *y;
        ck_assert_int_eq(torc_next_batch(ds, 13, 23, host(), &x, &y), TORC_OK);
        assert_in_order(x, y, 13, 23, 0, tok_golden);
        torc_release(x);
        torc_release(y);
        torc_dataset_close(ds);
        // The largest token as the vocabulary: the check names it.
        ds = torc_tokens_open(path, TORC_TOKENS_AUTO, want);
        ck_assert_int_eq(torc_tokens_check(ds, NULL), TORC_ERR_IO);
        tu_assert_error(TORC_ERR_IO, "not below vocab_size");
        torc_dataset_close(ds);
    }
}
END_TEST

// ---- refusals: the file and the offset named, nothing kept ----
START_TEST(llmc_header_errors) {
    uint16_t t[100];
    for (int i = 0; i < 100; i++) t[i] = (uint16_t)i;
    const char *path = tmp_path("bad.bin");
    write_llmc(path, 12345, 1, 100, t, sizeof t);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_LLMC, 0));
    tu_assert_error(TORC_ERR_IO, "is not an llm.c token shard: the int32 at byte offset 0 is 12345, not the magic 20240520");
    ck_assert_msg(strstr(torc_last_error(), path), "%s", torc_last_error());
    write_llmc(path, 20240520, 2, 100, t, sizeof t);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "llm.c shard version 2 at byte offset 4, not 1");
    write_llmc(path, 20240520, 1, -3, t, sizeof t);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "llm.c shard token count -3 at byte offset 8 is negative");
    // Truncated: inside the header, inside the tokens (an odd byte count: token 50 is cut).
    int32_t head[10] = {20240520, 1, 100};
    write_file(path, head, sizeof head, NULL, 0);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "is truncated: an llm.c shard's header is 1024 bytes (256 int32), the file has 40");
    write_llmc(path, 20240520, 1, 100, t, 101);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "is truncated: its header's token count (100, byte offset 8) needs 1224 bytes but the file "
                                 "has 1125: it stops inside or before token 50 (byte offset 1124)");
    // More bytes than the count says.
    write_llmc(path, 20240520, 1, 97, t, sizeof t);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "has 6 bytes after its 97 tokens, which end at byte offset 1218");
    // The other files llm.c writes are named, not read as tokens.
    write_llmc(path, 20240326, 3, 100, t, sizeof t);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "is an llm.c model checkpoint (magic 20240326 at byte offset 0), not a token file");
    write_llmc(path, 20240522, 1, 100, t, sizeof t);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "is an llm.c eval file");
    // A count of 0 is a valid (empty) shard; a batch then says it is too short.
    write_llmc(path, 20240520, 1, 0, NULL, 0);
    torc_dataset *ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 0);
    ck_assert_msg(ds != NULL, "%s", torc_last_error());
    int64_t mx = 5;
    ck_assert_int_eq(torc_tokens_check(ds, &mx), TORC_OK);
    ck_assert_int_eq(mx, -1);
    torc_tensor *x = (torc_tensor *)1;
    ck_assert_int_eq(torc_next_batch(ds, 1, 1, NULL, &x, NULL), TORC_ERR_INVALID_ARG);
    ck_assert_ptr_null(x);
    tu_assert_error(TORC_ERR_INVALID_ARG, "has 0 tokens, too few for one batch of 1 x 1 plus a target");
    torc_dataset_close(ds);
}
END_TEST

START_TEST(raw_and_npy_errors) {
    const char *path = tmp_path("odd.bin");
    write_file(path, "abcdefg", 7, NULL, 0);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "is 7 bytes, not a whole number of uint16 tokens: the last one, at byte offset 6, is cut off");
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_NPY, 0));
    tu_assert_error(TORC_ERR_IO, "is not a .npy file: it lacks the magic \\x93NUMPY at byte offset 0");
    path = tmp_path("fake.npy");
    write_file(path, "abcdef", 6, NULL, 0);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "is named .npy but lacks the .npy magic");
    path = tmp_path("empty.bin");
    write_file(path, NULL, 0, NULL, 0);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "token file '");
    tu_assert_error(TORC_ERR_IO, "' is empty");
    ck_assert_ptr_null(torc_tokens_open("/nonexistent/train.bin", TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "cannot open token file '/nonexistent/train.bin': No such file or directory");
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, -1));
    tu_assert_error(TORC_ERR_INVALID_ARG, "vocab_size must be >= 0 (0: unchecked), got -1");
    ck_assert_ptr_null(torc_tokens_open(path, (torc_token_format)9, 0));
    tu_assert_error(TORC_ERR_INVALID_ARG, "unknown token format 9");
    torc_clear_error();
    ck_assert_ptr_null(torc_tokens_open(NULL, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_INVALID_ARG, "torc_tokens_open: path is NULL");
    // .npy: of floats, 2-D, truncated, big-endian.
    float f[6] = {0};
    path = tmp_path("bad.npy");
    write_npy(path, 1, "<f4", "(6,)", f, sizeof f, 0);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "holds float32 data; token files hold uint16, int32, uint32 or int64");
    write_npy(path, 1, "<i4", "(2, 3)", f, sizeof f, 0);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "has shape [2, 3]; a token file is 1-D");
    write_npy(path, 1, "<i4", "(7,)", f, sizeof f, 0);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "is truncated: it holds 24 data bytes but its header promises 28 (data from byte offset 128;");
    write_npy(path, 1, ">i4", "(6,)", f, sizeof f, 0);
    ck_assert_ptr_null(torc_tokens_open(path, TORC_TOKENS_AUTO, 0));
    tu_assert_error(TORC_ERR_IO, "holds big-endian data");
}
END_TEST

START_TEST(tokens_out_of_vocab_named_by_offset) {
    // Token 37 of an llm.c shard is 150: refused where a batch or the check reads it, with its
    // byte offset 1024 + 2 * 37; windows that miss it are served.
    uint16_t t[60];
    for (int i = 0; i < 60; i++) t[i] = (uint16_t)(i == 37 ? 150 : i);
    const char *path = tmp_path("vocab.bin");
    write_llmc(path, 20240520, 1, 60, t, sizeof t);
    torc_dataset *ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 100);  // the open does not read tokens
    ck_assert_msg(ds != NULL, "%s", torc_last_error());
    torc_memory_stats m0, m1;
    ck_assert_int_eq(torc_memory_stats_get(host(), &m0), TORC_OK);
    torc_tensor *x, *y;
    ck_assert_int_eq(torc_next_batch(ds, 2, 10, host(), &x, &y), TORC_OK);  // tokens 0..20
    torc_release(x);
    torc_release(y);
    ck_assert_int_eq(torc_dataset_position(ds), 20);
    ck_assert_int_eq(torc_next_batch(ds, 2, 10, host(), &x, &y), TORC_ERR_IO);  // 20..40 holds 37
    tu_assert_error(TORC_ERR_IO, "the token at byte offset 1098 (token 37) is 150, not below vocab_size 100");
    ck_assert_msg(strstr(torc_last_error(), path), "%s", torc_last_error());
    ck_assert_ptr_null(x);
    ck_assert_ptr_null(y);
    ck_assert_int_eq(torc_dataset_position(ds), 20);  // a refused batch does not move
    ck_assert_int_eq(torc_memory_stats_get(host(), &m1), TORC_OK);
    ck_assert_uint_eq(m1.total_in_use, m0.total_in_use);  // nothing kept
    ck_assert_int_eq(torc_tokens_check(ds, NULL), TORC_ERR_IO);
    tu_assert_error(TORC_ERR_IO, "the token at byte offset 1098 (token 37) is 150, not below vocab_size 100");
    // A target alone reaching it is checked too: x = 27..36, y = 28..37.
    ck_assert_int_eq(torc_dataset_set_position(ds, 27), TORC_OK);
    ck_assert_int_eq(torc_next_batch(ds, 1, 10, host(), &x, &y), TORC_ERR_IO);
    tu_assert_error(TORC_ERR_IO, "(token 37) is 150");
    ck_assert_int_eq(torc_next_batch(ds, 1, 10, host(), &x, NULL), TORC_OK);  // no targets: 27..36
    torc_release(x);
    torc_dataset_close(ds);
    // Vocabulary 0 checks nothing but the sign; an int32 .npy may hold a negative token.
    int32_t v[8] = {1, 2, 3, -5, 4, 5, 6, 7};
    path = tmp_path("neg.npy");
    write_npy(path, 1, "<i4", "(8,)", v, sizeof v, 0);
    ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 0);
    ck_assert_msg(ds != NULL, "%s", torc_last_error());
    torc_generator *g = torc_generator_new(1);
    ck_assert_int_eq(torc_get_batch(ds, 4, 6, host(), g, &x, &y), TORC_ERR_IO);  // every window holds token 3
    tu_assert_error(TORC_ERR_IO, "the token at byte offset 140 (token 3) is -5, negative");
    ck_assert_int_eq(torc_tokens_check(ds, NULL), TORC_ERR_IO);
    tu_assert_error(TORC_ERR_IO, "(token 3) is -5, negative");
    torc_generator_free(g);
    torc_dataset_close(ds);
    // A plain dataset of the same file is not a token file: its values are not checked.
    ds = torc_dataset_open(path, NULL);
    ck_assert_int_eq(torc_get_batch(ds, 4, 6, host(), NULL, &x, &y), TORC_OK);
    torc_release(x);
    torc_release(y);
    int64_t mx;
    ck_assert_int_eq(torc_tokens_check(ds, &mx), TORC_OK);
    ck_assert_int_eq(mx, 7);
    torc_dataset_close(ds);
}
END_TEST

START_TEST(too_short_for_a_window) {
    const char *path = make_llmc("short.bin", 10);
    torc_dataset *ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 0);
    ck_assert_ptr_nonnull(ds);
    torc_tensor *x, *y;
    ck_assert_int_eq(torc_get_batch(ds, 1, 10, host(), NULL, &x, &y), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "get_batch: token file '");
    tu_assert_error(TORC_ERR_INVALID_ARG, "short.bin' has 10 tokens, too few for windows of 10 plus a target");
    ck_assert_int_eq(torc_next_batch(ds, 2, 5, host(), &x, &y), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "short.bin' has 10 tokens, too few for one batch of 2 x 5 plus a target");
    ck_assert_int_eq(torc_next_batch_shard(ds, 4, 1, 0, 2, host(), &x, &y), TORC_OK);  // 4 x 1 + 1 fits
    torc_release(x);
    torc_release(y);
    ck_assert_int_eq(torc_next_batch(ds, 3, 3, host(), &x, &y), TORC_OK);  // 9 + 1: just fits
    torc_release(x);
    torc_release(y);
    ck_assert_int_eq(torc_next_batch_shard(ds, 3, 3, 0, 2, host(), &x, &y), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "next_batch_shard: global batch 3 is not divisible by world size 2");
    ck_assert_int_eq(torc_next_batch_shard(ds, 4, 2, 2, 2, host(), &x, &y), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "next_batch_shard: rank 2 is out of range for world size 2");
    ck_assert_int_eq(torc_dataset_set_position(ds, 11), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "set_position: position 11 is outside [0, 10] of '");
    ck_assert_int_eq(torc_dataset_set_position(ds, -1), TORC_ERR_INVALID_ARG);
    // Sizes that overflow are refused before anything is drawn or moved.
    torc_generator *g = torc_generator_new(1);
    ck_assert_int_eq(torc_next_batch(ds, (int64_t)1 << 62, 4, host(), &x, &y), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed");
    ck_assert_int_eq(torc_get_batch(ds, (int64_t)1 << 62, 4, host(), g, &x, &y), TORC_ERR_INVALID_ARG);
    uint64_t seed, off;
    torc_generator_get_state(g, &seed, &off);
    ck_assert_uint_eq(off, 0);
    ck_assert_int_eq(torc_dataset_position(ds), 0);
    torc_generator_free(g);
    torc_dataset_close(ds);
    // Floating-point data holds no tokens.
    const float f[4] = {1, 2, 3, 4};
    const char *fpath = tmp_path("f.bin");
    write_file(fpath, f, sizeof f, NULL, 0);
    ds = torc_dataset_open(fpath, "float32");
    ck_assert_int_eq(torc_tokens_check(ds, NULL), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "f.bin' holds float32 data, not tokens");
    ck_assert_int_eq(torc_tokens_format(ds), TORC_TOKENS_AUTO);  // not a token file
    torc_dataset_close(ds);
}
END_TEST

// ---- batches, exactly ----
START_TEST(random_windows_exact) {
    // Window b starts at floor(uniform(seed, offset + b) * (n - T)): torc_randint's draw.
    const int n = 500, B = 6, T = 9;
    const char *path = make_llmc("rand.bin", n);
    torc_dataset *ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 50257);
    torc_generator *g = torc_generator_new(1234);
    for (int step = 0; step < 3; step++) {
        uint64_t seed, off;
        torc_generator_get_state(g, &seed, &off);
        ck_assert_uint_eq(off, (uint64_t)(step * B));
        torc_tensor *x, *y;
        ck_assert_int_eq(torc_get_batch(ds, B, T, host(), g, &x, &y), TORC_OK);
        int64_t *xs = ids(x), *ys = ids(y);
        for (int b = 0; b < B; b++) {
            const int64_t s = (int64_t)(torc_philox_uniform(seed, off, (uint64_t)b) * (double)(n - T));
            for (int l = 0; l < T; l++) {
                ck_assert_int_eq(xs[b * T + l], tok_a(s + l));
                ck_assert_int_eq(ys[b * T + l], tok_a(s + l + 1));
            }
        }
        free(xs);
        free(ys);
        torc_release(x);
        torc_release(y);
    }
    ck_assert_int_eq(torc_dataset_position(ds), 0);  // random batches leave the in-order position alone
    torc_generator_free(g);
    torc_dataset_close(ds);
}
END_TEST

START_TEST(in_order_batches_wrap_as_llmc) {
    // 50 tokens, batches of 2 x 4: starts 0, 8, ..., 40 (40 + 8 + 1 <= 50), then back to 0, as
    // llm.c's (ntok - 1) / (B * T) = 6 batches a pass.
    const char *path = make_llmc("seq.bin", 50);
    torc_dataset *ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 50257);
    ck_assert_int_eq(torc_dataset_position(ds), 0);
    for (int step = 0; step < 14; step++) {
        const int64_t p = (step % 6) * 8;
        ck_assert_int_eq(torc_dataset_position(ds), p);
        torc_tensor *x, *y;
        ck_assert_int_eq(torc_next_batch(ds, 2, 4, host(), &x, &y), TORC_OK);
        assert_in_order(x, y, 2, 4, p, tok_a);
        torc_release(x);
        torc_release(y);
    }
    // A position too close to the end for this batch wraps before reading.
    ck_assert_int_eq(torc_dataset_set_position(ds, 45), TORC_OK);
    torc_tensor *x, *y;
    ck_assert_int_eq(torc_next_batch(ds, 2, 4, host(), &x, &y), TORC_OK);
    assert_in_order(x, y, 2, 4, 0, tok_a);
    ck_assert_int_eq(torc_dataset_position(ds), 8);
    torc_release(x);
    torc_release(y);
    ck_assert_int_eq(torc_dataset_set_position(ds, 50), TORC_OK);  // the end itself is a position
    torc_dataset_close(ds);
}
END_TEST

// ---- data parallel: the ranks' slices are the one-process batch ----
START_TEST(ranks_slice_the_global_batch) {
    const int64_t B = 8, T = 5;
    const char *path = make_llmc("ranks.bin", 400);
    torc_dataset *one = torc_tokens_open(path, TORC_TOKENS_AUTO, 50257);
    torc_generator *g1 = torc_generator_new(99);
    for (int world = 1; world <= 4; world *= 2) {
        torc_dataset *r[4];
        torc_generator *gr[4];
        for (int k = 0; k < world; k++) {
            r[k] = torc_tokens_open(path, TORC_TOKENS_AUTO, 50257);
            gr[k] = torc_generator_new(99);
        }
        torc_generator_set_state(g1, 99, 0);
        ck_assert_int_eq(torc_dataset_set_position(one, 0), TORC_OK);
        for (int step = 0; step < 12; step++) {  // 12 x 40 tokens: past the wrap at 360
            torc_scope_push();
            torc_tensor *x, *y, *rx, *ry;
            ck_assert_int_eq(torc_next_batch(one, B, T, host(), &x, &y), TORC_OK);
            ck_assert_int_eq(torc_get_batch(one, B, T, host(), g1, &rx, &ry), TORC_OK);
            int64_t *vx = ids(x), *vy = ids(y), *vrx = ids(rx), *vry = ids(ry);
            for (int k = 0; k < world; k++) {
                const int64_t rows = B / world, at = k * rows * T;
                torc_tensor *xs, *ys;
                ck_assert_int_eq(torc_next_batch_shard(r[k], B, T, k, world, host(), &xs, &ys), TORC_OK);
                tu_assert_shape(xs, rows, T);
                int64_t *a = ids(xs), *b = ids(ys);
                ck_assert_mem_eq(a, vx + at, (size_t)(rows * T) * 8);
                ck_assert_mem_eq(b, vy + at, (size_t)(rows * T) * 8);
                free(a), free(b);
                ck_assert_int_eq(torc_dataset_position(r[k]), torc_dataset_position(one));
                ck_assert_int_eq(torc_get_batch_shard(r[k], B, T, k, world, host(), gr[k], &xs, &ys), TORC_OK);
                a = ids(xs), b = ids(ys);
                ck_assert_mem_eq(a, vrx + at, (size_t)(rows * T) * 8);
                ck_assert_mem_eq(b, vry + at, (size_t)(rows * T) * 8);
                free(a), free(b);
            }
            free(vx), free(vy), free(vrx), free(vry);
            torc_scope_pop();
        }
        for (int k = 0; k < world; k++) {
            torc_dataset_close(r[k]);
            torc_generator_free(gr[k]);
        }
    }
    torc_generator_free(g1);
    torc_dataset_close(one);
}
END_TEST

// ---- an exact resume: the generator's (seed, offset) and the position ----
START_TEST(resume_gives_the_same_next_batches) {
    const char *path = make_llmc("resume.bin", 700);
    torc_dataset *ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 50257);
    torc_generator *g = torc_generator_new(5);
    torc_tensor *x, *y;
    for (int step = 0; step < 4; step++) {  // train a while
        ck_assert_int_eq(torc_get_batch(ds, 4, 16, host(), g, &x, &y), TORC_OK);
        torc_release(x), torc_release(y);
        ck_assert_int_eq(torc_next_batch(ds, 4, 16, host(), &x, &y), TORC_OK);
        torc_release(x), torc_release(y);
    }
    uint64_t seed, offset;  // the checkpoint
    torc_generator_get_state(g, &seed, &offset);
    const int64_t position = torc_dataset_position(ds);
    int64_t *want[6];
    for (int step = 0; step < 3; step++) {
        ck_assert_int_eq(torc_get_batch(ds, 4, 16, host(), g, &x, &y), TORC_OK);
        want[2 * step] = ids(y);
        torc_release(x), torc_release(y);
        ck_assert_int_eq(torc_next_batch(ds, 4, 16, host(), &x, &y), TORC_OK);
        want[2 * step + 1] = ids(y);
        torc_release(x), torc_release(y);
    }
    torc_dataset_close(ds);
    torc_generator_free(g);
    // A new process: fresh dataset and generator, the saved state put back.
    ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 50257);
    g = torc_generator_new(0);
    torc_generator_set_state(g, seed, offset);
    ck_assert_int_eq(torc_dataset_set_position(ds, position), TORC_OK);
    for (int step = 0; step < 3; step++) {
        ck_assert_int_eq(torc_get_batch(ds, 4, 16, host(), g, &x, &y), TORC_OK);
        int64_t *got = ids(y);
        ck_assert_mem_eq(got, want[2 * step], 4 * 16 * 8);
        free(got);
        torc_release(x), torc_release(y);
        ck_assert_int_eq(torc_next_batch(ds, 4, 16, host(), &x, &y), TORC_OK);
        got = ids(y);
        ck_assert_mem_eq(got, want[2 * step + 1], 4 * 16 * 8);
        free(got);
        torc_release(x), torc_release(y);
    }
    for (int i = 0; i < 6; i++) free(want[i]);
    torc_generator_free(g);
    torc_dataset_close(ds);
}
END_TEST

// ---- a device that is not host memory: staged, pinned copies, the same tokens ----
START_TEST(in_order_batches_on_a_device) {
    setenv("TORC_PLUGIN_PATH", getenv("TORC_TEST_PLUGIN_DIR"), 1);
    torc_device *dev = torc_device_get("fakedev");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    const char *path = make_llmc("dev.bin", 200);
    torc_dataset *ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 50257);
    for (int step = 0; step < 5; step++) {
        const int64_t p = torc_dataset_position(ds);
        torc_tensor *x, *y;
        ck_assert_msg(torc_next_batch(ds, 3, 7, dev, &x, &y) == TORC_OK, "%s", torc_last_error());
        ck_assert_ptr_eq(torc_get_device(x), dev);
        assert_in_order(x, y, 3, 7, p, tok_a);
        torc_release(x);
        torc_release(y);
    }
    torc_dataset_close(ds);
    // A bad token on the device path: the error, and the staging buffers still given back.
    uint16_t t[30] = {0};
    t[12] = 9;
    path = tmp_path("devbad.bin");
    write_llmc(path, 20240520, 1, 30, t, sizeof t);
    ds = torc_tokens_open(path, TORC_TOKENS_AUTO, 8);
    torc_tensor *x, *y;
    ck_assert_int_eq(torc_next_batch(ds, 2, 7, dev, &x, &y), TORC_ERR_IO);
    tu_assert_error(TORC_ERR_IO, "the token at byte offset 1048 (token 12) is 9, not below vocab_size 8");
    torc_dataset_close(ds);
    unsetenv("TORC_PLUGIN_PATH");
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("tokens");
    TCase *tc = tcase_create("tokens");
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, llmc_shard_round_trip);
    tcase_add_test(tc, llama3_shard_holds_uint32);
    tcase_add_test(tc, raw_uint16_round_trip);
    tcase_add_test(tc, npy_round_trip);
    tcase_add_test(tc, numpy_files_agree);
    tcase_add_test(tc, llmc_header_errors);
    tcase_add_test(tc, raw_and_npy_errors);
    tcase_add_test(tc, tokens_out_of_vocab_named_by_offset);
    tcase_add_test(tc, too_short_for_a_window);
    tcase_add_test(tc, random_windows_exact);
    tcase_add_test(tc, in_order_batches_wrap_as_llmc);
    tcase_add_test(tc, ranks_slice_the_global_batch);
    tcase_add_test(tc, resume_gives_the_same_next_batches);
    tcase_add_test(tc, in_order_batches_on_a_device);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
