// tests/test_data.c — datasets: raw and .npy files memory-mapped (dtypes, shapes, every refusal
// with its message), get_batch's windows and targets, its generator use, and the pinned
// asynchronous copies to a device that is not host memory (the fake device test backend).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

// A .npy v1.0 file: magic, version, header length, the dict padded to 64 bytes, then the data.
static void write_npy(const char *path, const char *descr, const char *fortran, const char *shape, const void *data,
                      size_t n) {
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fortran, shape);
    while ((10 + len + 1) % 64) dict[len++] = ' ';
    dict[len++] = '\n';
    unsigned char head[10 + 256] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xFF), (unsigned char)(len >> 8)};
    memcpy(head + 10, dict, (size_t)len);
    write_file(path, head, 10 + (size_t)len, data, n);
}

static int64_t *values_i64(torc_tensor *t) {
    int64_t n = torc_numel(t);
    int64_t *v = malloc(sizeof *v * (size_t)n);
    ck_assert_int_eq(torc_copy_to_host(t, v, sizeof *v * (size_t)n), TORC_OK);
    return v;
}

// ---- raw files ----
START_TEST(raw_uint16_batches) {
    const char *path = tmp_path("tokens.bin");
    uint16_t tok[1000];
    for (int i = 0; i < 1000; i++) tok[i] = (uint16_t)(60000 + i);  // above INT16_MAX: read unsigned
    write_file(path, tok, sizeof tok, NULL, 0);
    torc_dataset *ds = torc_dataset_open(path, "uint16");
    ck_assert_msg(ds != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_dataset_numel(ds), 1000);
    ck_assert_str_eq(torc_dataset_dtype(ds), "uint16");
    int64_t shape[TORC_MAX_DIMS];
    ck_assert_int_eq(torc_dataset_shape(ds, shape), 1);
    ck_assert_int_eq(shape[0], 1000);
    torc_device *host = torc_device_get("reference");
    torc_generator *g = torc_generator_new(42);
    torc_tensor *x, *y;
    ck_assert_int_eq(torc_get_batch(ds, 4, 8, host, g, &x, &y), TORC_OK);
    tu_assert_shape(x, 4, 8);
    tu_assert_shape(y, 4, 8);
    ck_assert_int_eq(torc_get_dtype(x), TORC_DTYPE_I64);
    uint64_t seed, offset;
    torc_generator_get_state(g, &seed, &offset);
    ck_assert_uint_eq(offset, 4);  // one counter per window
    // The starts are what torc_randint(0, numel - L) draws from the same generator state.
    torc_generator *g2 = torc_generator_new(42);
    torc_set_default_device(host);
    torc_tensor *starts = torc_randint(0, 1000 - 8, TORC_SHAPE(4), TORC_DTYPE_I64, g2);
    torc_set_default_device(NULL);
    int64_t *xs = values_i64(x), *ys = values_i64(y), *ss = values_i64(starts);
    for (int b = 0; b < 4; b++)
        for (int l = 0; l < 8; l++) {
            ck_assert_int_eq(xs[b * 8 + l], 60000 + ss[b] + l);
            ck_assert_int_eq(ys[b * 8 + l], 60000 + ss[b] + l + 1);  // the next token
        }
    free(xs);
    free(ys);
    free(ss);
    torc_release(x);
    torc_release(y);
    torc_release(starts);
    // y may be skipped; a fresh seed reproduces the batch.
    torc_generator_set_state(g, 42, 0);
    ck_assert_int_eq(torc_get_batch(ds, 4, 8, host, g, &x, NULL), TORC_OK);
    xs = values_i64(x);
    ck_assert_int_eq(xs[0] - 60000, (int64_t)(torc_philox_uniform(42, 0, 0) * 992));
    free(xs);
    torc_release(x);
    torc_generator_free(g);
    torc_generator_free(g2);
    torc_dataset_close(ds);
}
END_TEST

START_TEST(windows_cover_the_whole_range) {
    // numel = L + 1: the only window starts at 0; every start in [0, numel - L) is reachable.
    const char *path = tmp_path("small.bin");
    int32_t v[6] = {10, 11, 12, 13, 14, 15};
    write_file(path, v, sizeof v, NULL, 0);
    torc_dataset *ds = torc_dataset_open(path, "int32");
    ck_assert_ptr_nonnull(ds);
    torc_tensor *x, *y;
    ck_assert_int_eq(torc_get_batch(ds, 3, 5, torc_device_get("reference"), NULL, &x, &y), TORC_OK);
    tu_assert_values(x, TU_ARR(10, 11, 12, 13, 14, 10, 11, 12, 13, 14, 10, 11, 12, 13, 14), 0.0);
    tu_assert_values(y, TU_ARR(11, 12, 13, 14, 15, 11, 12, 13, 14, 15, 11, 12, 13, 14, 15), 0.0);
    torc_release(x);
    torc_release(y);
    ck_assert_int_eq(torc_get_batch(ds, 1, 6, NULL, NULL, &x, &y), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "has 6 elements, too few for windows of 6 plus a target");
    ck_assert_ptr_null(x);
    ck_assert_int_eq(torc_get_batch(ds, 0, 2, NULL, NULL, &x, &y), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "batch and seq_len must be at least 1 (got 0, 2)");
    torc_dataset_close(ds);
}
END_TEST

START_TEST(raw_errors) {
    ck_assert_ptr_null(torc_dataset_open("/nonexistent/tokens.bin", "uint16"));
    tu_assert_error(TORC_ERR_IO, "cannot open dataset '/nonexistent/tokens.bin': No such file or directory");
    const char *path = tmp_path("odd.bin");
    write_file(path, "abcde", 5, NULL, 0);
    ck_assert_ptr_null(torc_dataset_open(path, "uint16"));
    tu_assert_error(TORC_ERR_IO, "is 5 bytes, not a whole number of 2-byte uint16 elements (truncated?)");
    ck_assert_ptr_null(torc_dataset_open(path, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "is a raw file (no .npy header): say its dtype");
    ck_assert_ptr_null(torc_dataset_open(path, "complex64"));
    tu_assert_error(TORC_ERR_INVALID_ARG, "unknown dataset dtype 'complex64'");
    path = tmp_path("empty.bin");
    write_file(path, NULL, 0, NULL, 0);
    ck_assert_ptr_null(torc_dataset_open(path, "uint8"));
    tu_assert_error(TORC_ERR_IO, "is empty");
    ck_assert_ptr_null(torc_dataset_open(tmp_dir, "uint8"));
    tu_assert_error(TORC_ERR_IO, "not a regular file");
}
END_TEST

// ---- .npy files ----
START_TEST(npy_shapes_and_dtypes) {
    const char *path = tmp_path("a.npy");
    int32_t v[15];
    for (int i = 0; i < 15; i++) v[i] = -i;
    write_npy(path, "<i4", "False", "(3, 5)", v, sizeof v);
    torc_dataset *ds = torc_dataset_open(path, NULL);  // the header's dtype
    ck_assert_msg(ds != NULL, "%s", torc_last_error());
    ck_assert_str_eq(torc_dataset_dtype(ds), "int32");
    int64_t shape[TORC_MAX_DIMS];
    ck_assert_int_eq(torc_dataset_shape(ds, shape), 2);
    ck_assert_int_eq(shape[0], 3);
    ck_assert_int_eq(shape[1], 5);
    ck_assert_int_eq(torc_dataset_numel(ds), 15);
    torc_tensor *x;
    ck_assert_int_eq(torc_get_batch(ds, 2, 14, NULL, NULL, &x, NULL), TORC_OK);  // the flattened array
    tu_assert_values(x, TU_ARR(0, -1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12, -13, 0, -1, -2, -3, -4, -5, -6,
                               -7, -8, -9, -10, -11, -12, -13), 0.0);
    torc_release(x);
    torc_dataset_close(ds);
    ds = torc_dataset_open(path, "int32");  // a matching dtype, spelled by name
    ck_assert_ptr_nonnull(ds);
    torc_dataset_close(ds);
    ds = torc_dataset_open(path, "<i4");  // or by descr
    ck_assert_ptr_nonnull(ds);
    torc_dataset_close(ds);
    // Floating data keeps its dtype.
    float f[4] = {0.5f, 1.5f, 2.5f, 3.5f};
    path = tmp_path("f.npy");
    write_npy(path, "<f4", "False", "(4,)", f, sizeof f);
    ds = torc_dataset_open(path, "float32");
    ck_assert_ptr_nonnull(ds);
    torc_tensor *y;
    ck_assert_int_eq(torc_get_batch(ds, 1, 3, NULL, NULL, &x, &y), TORC_OK);
    ck_assert_int_eq(torc_get_dtype(x), TORC_DTYPE_F32);
    tu_assert_values(x, TU_ARR(0.5, 1.5, 2.5), 0.0);
    tu_assert_values(y, TU_ARR(1.5, 2.5, 3.5), 0.0);
    torc_release(x);
    torc_release(y);
    torc_dataset_close(ds);
    // Fortran order does not matter in 1-D; uint8 descr "|u1".
    uint8_t u[3] = {200, 201, 202};
    path = tmp_path("u.npy");
    write_npy(path, "|u1", "True", "(3,)", u, sizeof u);
    ds = torc_dataset_open(path, "uint8");
    ck_assert_msg(ds != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_get_batch(ds, 1, 2, NULL, NULL, &x, NULL), TORC_OK);
    tu_assert_values(x, TU_ARR(200, 201), 0.0);
    torc_release(x);
    torc_dataset_close(ds);
}
END_TEST

START_TEST(npy_errors) {
    int32_t v[15] = {0};
    const char *path = tmp_path("bad.npy");
    write_npy(path, "<i4", "False", "(3, 5)", v, sizeof v);
    ck_assert_ptr_null(torc_dataset_open(path, "uint16"));
    tu_assert_error(TORC_ERR_IO, "holds int32 data, not uint16");
    write_npy(path, "<i4", "True", "(3, 5)", v, sizeof v);
    ck_assert_ptr_null(torc_dataset_open(path, NULL));
    tu_assert_error(TORC_ERR_IO, "is Fortran-ordered; save it C-ordered");
    write_npy(path, ">i4", "False", "(3, 5)", v, sizeof v);
    ck_assert_ptr_null(torc_dataset_open(path, NULL));
    tu_assert_error(TORC_ERR_IO, "holds big-endian data (>i4); save it little-endian");
    write_npy(path, "<i4", "False", "(3, 6)", v, sizeof v);
    ck_assert_ptr_null(torc_dataset_open(path, NULL));
    tu_assert_error(TORC_ERR_IO, "is truncated: it holds 60 data bytes but its header promises 72");
    write_npy(path, "<i4", "False", "(3, 4)", v, sizeof v);
    ck_assert_ptr_null(torc_dataset_open(path, NULL));
    tu_assert_error(TORC_ERR_IO, "holds 60 data bytes but its header describes 48 (corrupted?)");
    write_npy(path, "<c8", "False", "(3,)", v, 24);
    ck_assert_ptr_null(torc_dataset_open(path, NULL));
    tu_assert_error(TORC_ERR_IO, "holds dtype '<c8', which torc cannot read");
    write_npy(path, "<i4", "False", "[3]", v, 12);
    ck_assert_ptr_null(torc_dataset_open(path, NULL));
    tu_assert_error(TORC_ERR_IO, "its header is malformed (shape)");
    // A header that runs past the end of the file.
    unsigned char cut[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 100, 0, '{', '}'};
    write_file(path, cut, sizeof cut, NULL, 0);
    ck_assert_ptr_null(torc_dataset_open(path, NULL));
    tu_assert_error(TORC_ERR_IO, "is a truncated .npy file (its header runs past the end)");
}
END_TEST

START_TEST(large_file_is_mapped_not_read) {
    // A 4 GiB sparse file: opening it and drawing batches touches a few pages, not the file.
    const char *path = tmp_path("big.bin");
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)4 << 30), 0);
    close(fd);
    long rss0 = 0, rss1 = 0, pages;
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_int_eq(fscanf(f, "%ld %ld", &pages, &rss0), 2);
    fclose(f);
    torc_dataset *ds = torc_dataset_open(path, "uint32");
    ck_assert_msg(ds != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_dataset_numel(ds), (int64_t)1 << 30);
    for (int i = 0; i < 10; i++) {
        torc_tensor *x, *y;
        ck_assert_int_eq(torc_get_batch(ds, 8, 64, NULL, NULL, &x, &y), TORC_OK);
        torc_release(x);
        torc_release(y);
    }
    f = fopen("/proc/self/statm", "r");
    ck_assert_int_eq(fscanf(f, "%ld %ld", &pages, &rss1), 2);
    fclose(f);
    const long grown = (rss1 - rss0) * sysconf(_SC_PAGESIZE);
    ck_assert_msg(grown < 64L << 20, "resident memory grew by %ld bytes", grown);
    torc_dataset_close(ds);
    unlink(path);
}
END_TEST

// ---- a device that is not host memory ----
typedef void (*stats_fn)(int *, int *, int *, int *);

static stats_fn fake_stats(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/libtorc_fakedev.so", getenv("TORC_TEST_PLUGIN_DIR"));
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);  // the copy torc loaded
    ck_assert_msg(h != NULL, "%s", dlerror());
    stats_fn fn = (stats_fn)dlsym(h, "fake_device_stats");
    dlclose(h);
    ck_assert_ptr_nonnull(fn);
    return fn;
}

START_TEST(device_batches_are_pinned_and_async) {
    setenv("TORC_PLUGIN_PATH", getenv("TORC_TEST_PLUGIN_DIR"), 1);
    torc_device *dev = torc_device_get("fakedev");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    stats_fn stats = fake_stats();
    const char *path = tmp_path("dev.bin");
    int64_t tok[100];
    for (int i = 0; i < 100; i++) tok[i] = 1000 + i;
    write_file(path, tok, sizeof tok, NULL, 0);
    torc_dataset *ds = torc_dataset_open(path, "int64");
    ck_assert_ptr_nonnull(ds);
    int async0, sync0, syncs0, live0, async1, sync1, syncs1, live1;
    stats(&async0, &sync0, &syncs0, &live0);
    torc_generator *g = torc_generator_new(7);
    for (int it = 0; it < 3; it++) {
        torc_tensor *x, *y;
        ck_assert_msg(torc_get_batch(ds, 2, 5, dev, g, &x, &y) == TORC_OK, "%s", torc_last_error());
        ck_assert_ptr_eq(torc_get_device(x), dev);
        int64_t *xs = values_i64(x), *ys = values_i64(y);
        for (int b = 0; b < 2; b++)
            for (int l = 0; l < 5; l++) {
                ck_assert_int_eq(xs[b * 5 + l], xs[b * 5] + l);
                ck_assert_int_eq(ys[b * 5 + l], xs[b * 5 + l] + 1);
            }
        free(xs);
        free(ys);
        torc_release(x);
        torc_release(y);
    }
    stats(&async1, &sync1, &syncs1, &live1);
    ck_assert_int_eq(async1 - async0, 6);   // x and y of 3 batches, from pinned buffers
    ck_assert_int_eq(live1 - live0, 2);     // two staging buffers used in turn
    ck_assert_int_ge(syncs1 - syncs0, 1);   // the third batch waited for the first's copy
    torc_dataset_close(ds);
    stats(&async1, &sync1, &syncs1, &live1);
    ck_assert_int_eq(live1, live0);         // and they are given back
    torc_generator_free(g);
    unsetenv("TORC_PLUGIN_PATH");
}
END_TEST


static Suite *make_suite(void) {
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("data");
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, raw_uint16_batches);
    tcase_add_test(tc, windows_cover_the_whole_range);
    tcase_add_test(tc, raw_errors);
    tcase_add_test(tc, npy_shapes_and_dtypes);
    tcase_add_test(tc, npy_errors);
    tcase_add_test(tc, large_file_is_mapped_not_read);
    tcase_add_test(tc, device_batches_are_pinned_and_async);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
