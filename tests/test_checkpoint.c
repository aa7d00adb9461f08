// tests/test_checkpoint.c — safetensors I/O (every dtype, metadata, atomic writes, every
// truncation and every flipped byte refused) and training checkpoints: exact resume for every
// optimizer plugin, and refusals that leave the model and the optimizer untouched.
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "tmpdir.h"


static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    ck_assert_int_eq(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void write_all(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static void assert_same_bits(torc_tensor *a, torc_tensor *b) {
    ck_assert_int_eq(torc_get_dtype(a), torc_get_dtype(b));
    ck_assert_int_eq(torc_ndim(a), torc_ndim(b));
    for (int d = 0; d < torc_ndim(a); d++) ck_assert_int_eq(torc_size(a, d), torc_size(b, d));
    size_t n = torc_nbytes(a);
    void *x = malloc(n + 1), *y = malloc(n + 1);
    ck_assert_int_eq(torc_copy_to_host(a, x, n), TORC_OK);
    ck_assert_int_eq(torc_copy_to_host(b, y, n), TORC_OK);
    ck_assert_msg(memcmp(x, y, n) == 0, "tensors differ");
    free(x);
    free(y);
}

// ---- safetensors ----
// One tensor of every dtype, plus a zero-dim and an empty one.
static torc_state_dict *every_dtype(void) {
    torc_state_dict *sd = torc_state_dict_new();
    torc_scope_push();
    for (int d = 0; d < TORC_DTYPE_COUNT; d++) {
        torc_tensor *t = torc_to_dtype(torc_arange(-3, 3, 1, TORC_DTYPE_F32), (torc_dtype)d);
        ck_assert_msg(t != NULL, "%s", torc_last_error());
        char name[64];
        snprintf(name, sizeof name, "t.%s", torc_dtype_short_name((torc_dtype)d));
        ck_assert_int_eq(torc_state_dict_set(sd, name, torc_reshape(t, TORC_SHAPE(2, 3))), TORC_OK);
    }
    ck_assert_int_eq(torc_state_dict_set(sd, "zero_dim", torc_scalar_tensor(2.5, TORC_DTYPE_F64)), TORC_OK);
    ck_assert_int_eq(torc_state_dict_set(sd, "empty", torc_zeros(TORC_SHAPE(0, 4), TORC_DTYPE_F32)), TORC_OK);
    // A strided view is written as its values.
    torc_tensor *m = torc_reshape(torc_arange(0, 6, 1, TORC_DTYPE_F32), TORC_SHAPE(2, 3));
    ck_assert_int_eq(torc_state_dict_set(sd, "transposed", torc_transpose(m, 0, 1)), TORC_OK);
    torc_scope_pop();
    ck_assert_int_eq(torc_state_dict_set_meta(sd, "note", "quotes \" backslash \\ newline \n unicode \xc3\xbc"), TORC_OK);
    return sd;
}

START_TEST(save_load_every_dtype) {
    torc_state_dict *sd = every_dtype();
    const char *path = tmp_path("all.safetensors");
    ck_assert_msg(torc_save(sd, path) == TORC_OK, "%s", torc_last_error());
    torc_state_dict *back = torc_load(path, NULL);
    ck_assert_msg(back != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_state_dict_size(back), torc_state_dict_size(sd));
    torc_scope_push();
    for (int i = 0; i < torc_state_dict_size(sd); i++) {
        const char *name = torc_state_dict_name(sd, i);
        ck_assert_str_eq(torc_state_dict_name(back, i), name);  // order kept
        torc_tensor *a = torc_contiguous(torc_state_dict_get(sd, name));
        assert_same_bits(a, torc_state_dict_get(back, name));
    }
    tu_assert_values(torc_state_dict_get(back, "transposed"), TU_ARR(0, 3, 1, 4, 2, 5), 0.0);
    torc_scope_pop();
    ck_assert_str_eq(torc_state_dict_get_meta(back, "note"), torc_state_dict_get_meta(sd, "note"));
    ck_assert_ptr_null(torc_state_dict_get_meta(back, "torc.content_crc32"));  // internal, not shown
    ck_assert_int_eq(torc_state_dict_meta_size(back), 1);
    // The header is padded so the data starts 8-byte aligned, as the Python writer does.
    size_t n;
    unsigned char *bytes = read_all(path, &n);
    uint64_t hsize;
    memcpy(&hsize, bytes, 8);
    ck_assert_uint_eq(hsize % 8, 0);
    ck_assert(strstr((char *)bytes + 8, "\"F8_E4M3\"") != NULL);
    free(bytes);
    torc_state_dict_free(sd);
    torc_state_dict_free(back);
}
END_TEST

START_TEST(save_is_atomic) {
    torc_state_dict *sd = every_dtype();
    const char *path = tmp_path("x.safetensors");
    ck_assert_int_eq(torc_save(sd, path), TORC_OK);
    ck_assert_int_eq(torc_save(sd, path), TORC_OK);  // replaces
    // No temporary file is left behind.
    DIR *d = opendir(tmp_dir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            files++;
            ck_assert_msg(!strstr(e->d_name, ".tmp."), "left behind: %s", e->d_name);
        }
    closedir(d);
    ck_assert_int_eq(files, 1);
    // A directory in the way: the rename fails, the directory stays, the temporary goes.
    const char *dir = tmp_path("in_the_way");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ck_assert_int_eq(torc_save(sd, dir), TORC_ERR_IO);
    tu_assert_error(TORC_ERR_IO, "cannot rename the temporary file onto");
    struct stat st;
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    d = opendir(tmp_dir);
    while ((e = readdir(d))) ck_assert_msg(!strstr(e->d_name, ".tmp."), "left behind: %s", e->d_name);
    closedir(d);
    ck_assert_int_eq(torc_save(sd, "/nonexistent/dir/x.safetensors"), TORC_ERR_IO);
    tu_assert_error(TORC_ERR_IO, "cannot create a temporary file next to '/nonexistent/dir/x.safetensors'");
    torc_state_dict_free(sd);
}
END_TEST

static bool exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

START_TEST(save_removes_stale_temporaries_and_follows_the_umask) {
    torc_state_dict *sd = every_dtype();
    char path[1024];  // (tmp_path's buffers are reused)
    snprintf(path, sizeof path, "%s", tmp_path("m.safetensors"));
    // What a save killed before its rename leaves, and look-alikes that are not its own.
    static const char *const stale[] = {"m.safetensors.tmp.a1B2c3", "m.safetensors.tmp.ZZZZZZ"};
    static const char *const others[] = {"m.safetensors.tmp.abc", "m.safetensors.tmp.abc1234", "m.safetensors.tmp.ab-123",
                                         "n.safetensors.tmp.a1B2c3", "xm.safetensors.tmp.a1B2c3"};
    for (size_t i = 0; i < 2; i++) write_all(tmp_path(stale[i]), "x", 1);
    for (size_t i = 0; i < 5; i++) write_all(tmp_path(others[i]), "x", 1);
    ck_assert_int_eq(mkdir(tmp_path("m.safetensors.tmp.dir123"), 0700), 0);  // not a file: kept
    ck_assert_msg(torc_save(sd, path) == TORC_OK, "%s", torc_last_error());
    for (size_t i = 0; i < 2; i++) ck_assert_msg(!exists(tmp_path(stale[i])), "left behind: %s", stale[i]);
    for (size_t i = 0; i < 5; i++) ck_assert_msg(exists(tmp_path(others[i])), "removed: %s", others[i]);
    ck_assert(exists(tmp_path("m.safetensors.tmp.dir123")));
    // The file gets 0666 less the umask, as open(path, O_CREAT, 0666) would.
    static const mode_t masks[] = {022, 077, 0, 027};
    for (size_t i = 0; i < 4; i++) {
        mode_t old = umask(masks[i]);
        ck_assert_int_eq(torc_save(sd, path), TORC_OK);
        umask(old);
        struct stat sb;
        ck_assert_int_eq(stat(path, &sb), 0);
        ck_assert_int_eq(sb.st_mode & 0777, 0666 & ~masks[i]);
    }
    torc_state_dict_free(sd);
}
END_TEST

START_TEST(load_refuses_truncated_and_corrupted) {
    torc_state_dict *sd = every_dtype();
    const char *path = tmp_path("good.safetensors");
    ck_assert_int_eq(torc_save(sd, path), TORC_OK);
    torc_state_dict_free(sd);
    size_t n;
    unsigned char *good = read_all(path, &n);
    const char *bad = tmp_path("bad.safetensors");
    // Every truncation.
    for (size_t len = 0; len < n; len++) {
        write_all(bad, good, len);
        torc_state_dict *r = torc_load(bad, NULL);
        ck_assert_msg(r == NULL, "a file cut to %zu of %zu bytes loaded", len, n);
        ck_assert_int_eq(torc_last_status(), TORC_ERR_IO);
    }
    write_all(bad, good, 5);
    ck_assert_ptr_null(torc_load(bad, NULL));
    tu_assert_error(TORC_ERR_IO, "truncated (5 bytes, less than the 8-byte header size)");
    write_all(bad, good, n - 1);
    ck_assert_ptr_null(torc_load(bad, NULL));
    tu_assert_error(TORC_ERR_IO, "truncated: tensor");
    // Every flipped byte is refused, except inside the checksum's own key name: that file loads
    // (without a checksum to check, as a foreign file would) and its tensors are intact.
    const char *key = memmem(good, n, "\"torc.content_crc32\"", 20);
    ck_assert_ptr_nonnull(key);
    const size_t key_at = (size_t)(key - (const char *)good);
    torc_state_dict *ref = torc_load(path, NULL);
    ck_assert_ptr_nonnull(ref);
    for (size_t i = 0; i < n; i++) {
        good[i] ^= 0x01;
        write_all(bad, good, n);
        torc_state_dict *r = torc_load(bad, NULL);
        if (r) {
            ck_assert_msg(i > key_at && i < key_at + 19, "a file with byte %zu flipped loaded", i);
            torc_scope_push();
            for (int k = 0; k < torc_state_dict_size(ref); k++)
                assert_same_bits(torc_state_dict_get(ref, torc_state_dict_name(ref, k)),
                                 torc_state_dict_get(r, torc_state_dict_name(ref, k)));
            torc_scope_pop();
            torc_state_dict_free(r);
        } else {
            ck_assert_int_eq(torc_last_status(), TORC_ERR_IO);
        }
        good[i] ^= 0x01;
    }
    torc_state_dict_free(ref);
    good[n - 1] ^= 0x80;
    write_all(bad, good, n);
    ck_assert_ptr_null(torc_load(bad, NULL));
    tu_assert_error(TORC_ERR_IO, "corrupted: its tensors or metadata are not what torc saved");
    free(good);
    ck_assert_ptr_null(torc_load(tmp_path("missing.safetensors"), NULL));
    tu_assert_error(TORC_ERR_IO, "cannot open");
    tu_assert_error(TORC_ERR_IO, "No such file or directory");
}
END_TEST

// Hand-written headers, as another tool could produce them.
static void write_st(const char *path, const char *header, const void *data, size_t n) {
    size_t h = strlen(header);
    unsigned char *b = malloc(8 + h + n);
    uint64_t hs = h;
    memcpy(b, &hs, 8);
    memcpy(b + 8, header, h);
    if (n) memcpy(b + 8 + h, data, n);
    write_all(path, b, 8 + h + n);
    free(b);
}

START_TEST(load_checks_structure) {
    const char *p = tmp_path("h.safetensors");
    float f[4] = {1, 2, 3, 4};
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", f, 16);
    torc_state_dict *sd = torc_load(p, NULL);  // no checksum, no metadata: fine
    ck_assert_msg(sd != NULL, "%s", torc_last_error());
    torc_scope_push();
    tu_assert_values(torc_state_dict_get(sd, "a"), TU_ARR(1, 2, 3, 4), 0.0);
    torc_scope_pop();
    torc_state_dict_free(sd);
    struct { const char *header; size_t n; const char *msg; } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 12, "has 12 data bytes but its shape and dtype need 16"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         16, "overlap or leave a gap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 16, "the data section has 16 bytes but the header accounts for 8"},
        {"{\"a\":{\"dtype\":\"C64\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "unsupported dtype 'C64'"},
        {"{\"a\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "has 8 data bytes but its shape and dtype need 4"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", 4, "unexpected field 'extra'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "lacks dtype, shape or data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, "tensor 'a' appears twice"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "malformed __metadata__"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "malformed JSON header"},
        {"[1,2]   ", 0, "does not start with '{'"},
        {"{} x", 0, "trailing characters"},
        // Empty, but its contiguous strides would be 2^124: refused, not wrapped.
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387903,4611686018427387903],\"data_offsets\":[0,0]}}", 0,
         "tensor 'a': Storage size calculation overflowed with sizes=[0, 4611686018427387903, 4611686018427387903]"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387903,4],\"data_offsets\":[0,0]}}", 0,
         "Storage size calculation overflowed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_st(p, cases[i].header, f, cases[i].n);
        ck_assert_ptr_null(torc_load(p, NULL));
        tu_assert_error(TORC_ERR_IO, cases[i].msg);
    }
    // The largest dim beside a 0 dim is fine when the strides fit.
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387903],\"data_offsets\":[0,0]}}", f, 0);
    sd = torc_load(p, NULL);
    ck_assert_msg(sd != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_numel(torc_state_dict_get(sd, "a")), 0);
    torc_state_dict_free(sd);
    uint64_t huge = (uint64_t)1 << 40;
    write_all(p, &huge, 8);
    ck_assert_ptr_null(torc_load(p, NULL));
    tu_assert_error(TORC_ERR_IO, "header size 1099511627776 is larger than safetensors allows");
}
END_TEST

// PyTorch (2.3+) writes U16, U32 and U64; torc loads them widened to int32 / int64 with the
// same values, and refuses a U64 value int64 cannot hold.
START_TEST(load_widens_unsigned) {
    const char *p = tmp_path("u.safetensors");
    unsigned char data[2 * 3 + 4 * 3 + 8 * 2];
    const uint16_t u16[3] = {0, 40000, 65535};
    const uint32_t u32[3] = {0, 3000000000u, UINT32_MAX};
    const uint64_t u64[2] = {7, (uint64_t)INT64_MAX};
    memcpy(data, u16, 6);
    memcpy(data + 6, u32, 12);
    memcpy(data + 18, u64, 16);
    write_st(p, "{\"a\":{\"dtype\":\"U16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                "\"b\":{\"dtype\":\"U32\",\"shape\":[1,3],\"data_offsets\":[6,18]},"
                "\"c\":{\"dtype\":\"U64\",\"shape\":[2],\"data_offsets\":[18,34]}}",
             data, sizeof data);
    torc_state_dict *sd = torc_load(p, NULL);
    ck_assert_msg(sd != NULL, "%s", torc_last_error());
    torc_tensor *a = torc_state_dict_get(sd, "a"), *b = torc_state_dict_get(sd, "b"), *c = torc_state_dict_get(sd, "c");
    ck_assert_int_eq(torc_get_dtype(a), TORC_DTYPE_I32);
    ck_assert_int_eq(torc_get_dtype(b), TORC_DTYPE_I64);
    ck_assert_int_eq(torc_get_dtype(c), TORC_DTYPE_I64);
    ck_assert_int_eq(torc_ndim(b), 2);
    int32_t ga[3];
    int64_t gb[3], gc[2];
    ck_assert_int_eq(torc_copy_to_host(a, ga, sizeof ga), TORC_OK);
    ck_assert_int_eq(torc_copy_to_host(b, gb, sizeof gb), TORC_OK);
    ck_assert_int_eq(torc_copy_to_host(c, gc, sizeof gc), TORC_OK);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(ga[i], u16[i]);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(gb[i], (int64_t)u32[i]);
    ck_assert_int_eq(gc[0], 7);
    ck_assert_int_eq(gc[1], INT64_MAX);
    torc_release(a);
    torc_release(b);
    torc_release(c);
    torc_state_dict_free(sd);
    const uint64_t big[2] = {1, (uint64_t)INT64_MAX + 1};
    write_st(p, "{\"big\":{\"dtype\":\"U64\",\"shape\":[2],\"data_offsets\":[0,16]}}", big, sizeof big);
    ck_assert_ptr_null(torc_load(p, NULL));
    tu_assert_error(TORC_ERR_IO, "tensor 'big' holds the uint64 value 9223372036854775808 (element 1), which int64 cannot hold");
}
END_TEST

// A header of 100 000 one-byte tensors (2.3 MB; a pairwise name check took 2 CPU minutes here,
// so the case's timeout fails a quadratic loader).
START_TEST(load_takes_many_names) {
    enum { N = 100000 };
    char *header = malloc((size_t)N * 96 + 16), *at = header;
    ck_assert_ptr_nonnull(header);
    at += sprintf(at, "{");
    for (int i = 0; i < N; i++)
        at += sprintf(at, "%s\"t%d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}", i ? "," : "", i, i, i + 1);
    sprintf(at, "}");
    unsigned char *data = malloc(N);
    for (int i = 0; i < N; i++) data[i] = (unsigned char)(i % 251);
    const char *p = tmp_path("many.safetensors");
    write_st(p, header, data, N);
    torc_state_dict *sd = torc_load(p, NULL);
    ck_assert_msg(sd != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_state_dict_size(sd), N);
    ck_assert_str_eq(torc_state_dict_name(sd, N - 1), "t99999");
    torc_scope_push();
    int64_t v;
    ck_assert_int_eq(torc_item_i64(torc_state_dict_get(sd, "t99999"), &v), TORC_OK);
    ck_assert_int_eq(v, 99999 % 251);
    torc_scope_pop();
    torc_state_dict_free(sd);
    // The same names twice, far apart: still found.
    memcpy(strstr(header, "\"t99999\""), "\"t12345\"", 8);
    write_st(p, header, data, N);
    ck_assert_ptr_null(torc_load(p, NULL));
    tu_assert_error(TORC_ERR_IO, "tensor 't12345' appears twice");
    free(header);
    free(data);
}
END_TEST

// ---- training checkpoints ----
// A linear model y = x @ W.T + b trained on fresh data from a generator each step (so the
// generator's state matters): x ~ randn(8, 4), target = x @ Wtrue.T.
typedef struct run {
    torc_tensor *W, *b, *Wtrue;
    torc_generator *gen;
    torc_optimizer *opt;
} run;

static run run_new(const char *opt_name, const char *settings, uint64_t init_seed) {
    run r;
    torc_generator *ig = torc_generator_new(init_seed);
    torc_scope_push();
    r.W = torc_keep(torc_randn(TORC_SHAPE(3, 4), TORC_DTYPE_F32, ig));
    r.b = torc_keep(torc_randn(TORC_SHAPE(3), TORC_DTYPE_F32, ig));
    r.Wtrue = torc_keep(torc_reshape(torc_arange(0, 12, 1, TORC_DTYPE_F32), TORC_SHAPE(3, 4)));
    torc_scope_pop();
    torc_generator_free(ig);
    torc_set_requires_grad(r.W, true);
    torc_set_requires_grad(r.b, true);
    r.gen = torc_generator_new(init_seed + 1000);
    r.opt = torc_optimizer_new(opt_name, 2, (torc_tensor *[]){r.W, r.b}, settings);
    ck_assert_msg(r.opt != NULL, "%s", torc_last_error());
    return r;
}

static void run_free(run *r) {
    torc_optimizer_free(r->opt);
    torc_release(r->W);
    torc_release(r->b);
    torc_release(r->Wtrue);
    torc_generator_free(r->gen);
}

static void run_steps(run *r, int n) {
    for (int s = 0; s < n; s++) {
        torc_scope_push();
        torc_no_grad_begin();
        torc_tensor *X = torc_randn(TORC_SHAPE(8, 4), TORC_DTYPE_F32, r->gen);
        torc_tensor *T = torc_matmul(X, torc_transpose(r->Wtrue, 0, 1));
        torc_tensor *R = torc_sub(torc_add(torc_matmul(X, torc_transpose(r->W, 0, 1)), r->b), T);
        torc_tensor *G = torc_mul_scalar(R, torc_s(2.0 / 24.0));
        ck_assert_int_eq(torc_set_grad(r->W, torc_matmul(torc_transpose(G, 0, 1), X)), TORC_OK);
        ck_assert_int_eq(torc_set_grad(r->b, torc_sum(G, 1, (const int[]){0}, false)), TORC_OK);
        torc_no_grad_end();
        torc_scope_pop();
        ck_assert_msg(torc_optimizer_step(r->opt) == TORC_OK, "%s", torc_last_error());
        ck_assert_int_eq(torc_optimizer_zero_grad(r->opt, true), TORC_OK);
    }
}

static const char *const g_names[] = {"linear.weight", "linear.bias"};

START_TEST(resume_is_exact_for_every_optimizer) {
    static const struct { const char *name, *settings; } opts[] = {
        {"sgd", "lr=0.01 momentum=0.9 nesterov=true"},
        {"adagrad", "lr=0.1 lr_decay=0.01"},
        {"rmsprop", "lr=0.01 momentum=0.5 centered=true"},
        {"adam", "lr=0.01 amsgrad=true weight_decay=0.01"},
        {"adamw", "lr=0.01"},
    };
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        run straight = run_new(opts[k].name, opts[k].settings, 5);
        run_steps(&straight, 10);
        // 5 steps, save, then a different model, optimizer and generator restored from the file.
        run first = run_new(opts[k].name, opts[k].settings, 5);
        run_steps(&first, 5);
        const char *path = tmp_path("resume.safetensors");
        ck_assert_int_eq(torc_checkpoint_save(path, 2, g_names, (torc_tensor *[]){first.W, first.b}, first.opt, 5, first.gen),
                         TORC_OK);
        run second = run_new(opts[k].name, "lr=0.5", 77);
        int64_t step = -1;
        ck_assert_msg(torc_checkpoint_load(path, 2, g_names, (torc_tensor *[]){second.W, second.b}, second.opt, &step,
                                           second.gen) == TORC_OK,
                      "%s", torc_last_error());
        ck_assert_int_eq(step, 5);
        run_steps(&second, 5);
        assert_same_bits(straight.W, second.W);
        assert_same_bits(straight.b, second.b);
        const torc_optim_vtable *vt = torc_optimizer_vtable(straight.opt);
        torc_scope_push();
        for (int p = 0; p < 2; p++) {
            ck_assert_int_eq(torc_optimizer_param_step_count(second.opt, p), 10);
            for (int j = 0; j < vt->n_states; j++) {
                torc_tensor *a = torc_optimizer_state(straight.opt, p, vt->state_names[j]);
                torc_tensor *b = torc_optimizer_state(second.opt, p, vt->state_names[j]);
                ck_assert((a == NULL) == (b == NULL));
                if (a) assert_same_bits(a, b);
            }
        }
        torc_scope_pop();
        run_free(&straight);
        run_free(&first);
        run_free(&second);
    }
}
END_TEST

START_TEST(load_refusals_leave_everything_untouched) {
    run a = run_new("adam", "lr=0.01", 1);
    run_steps(&a, 3);
    const char *path = tmp_path("ck.safetensors");
    ck_assert_int_eq(torc_checkpoint_save(path, 2, g_names, (torc_tensor *[]){a.W, a.b}, a.opt, 3, a.gen), TORC_OK);
    run b = run_new("adam", "lr=0.02", 2);
    run_steps(&b, 1);
    torc_scope_push();
    torc_tensor *W0 = torc_clone(b.W), *b0 = torc_clone(b.b);
    torc_tensor *m0 = torc_clone(torc_optimizer_state(b.opt, 0, "exp_avg"));
    uint64_t seed0, off0, seed1, off1;
    torc_generator_get_state(b.gen, &seed0, &off0);
    int64_t step = 42;
    // A missing and an unexpected name (PyTorch's strict load_state_dict wording).
    const char *renamed[] = {"linear.weight", "linear.b"};
    ck_assert_int_ne(torc_checkpoint_load(path, 2, renamed, (torc_tensor *[]){b.W, b.b}, b.opt, &step, b.gen), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "Missing key(s) in state_dict: \"linear.b\". Unexpected key(s) in state_dict: \"linear.bias\"");
    // A shape that differs.
    torc_tensor *wide = torc_zeros(TORC_SHAPE(3, 5), TORC_DTYPE_F32);
    ck_assert_int_ne(torc_checkpoint_load(path, 2, g_names, (torc_tensor *[]){wide, b.b}, b.opt, &step, b.gen), TORC_OK);
    tu_assert_error(TORC_ERR_SHAPE, "size mismatch for linear.weight: copying a param with shape [3, 4] from checkpoint, "
                                    "the shape in current model is [3, 5].");
    // A dtype that differs.
    torc_tensor *dbl = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F64);
    ck_assert_int_ne(torc_checkpoint_load(path, 2, g_names, (torc_tensor *[]){b.W, dbl}, b.opt, &step, b.gen), TORC_OK);
    tu_assert_error(TORC_ERR_DTYPE, "dtype mismatch for linear.bias: the checkpoint holds float32, the current model float64");
    // Another optimizer: refused after the model checks passed, and still nothing changed.
    torc_optimizer *sgd = torc_optimizer_new("sgd", 2, (torc_tensor *[]){b.W, b.b}, NULL);
    ck_assert_int_ne(torc_checkpoint_load(path, 2, g_names, (torc_tensor *[]){b.W, b.b}, sgd, &step, b.gen), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "state dict is for optimizer 'adam', not 'sgd'");
    torc_optimizer_free(sgd);
    // A truncated file.
    size_t n;
    unsigned char *bytes = read_all(path, &n);
    write_all(tmp_path("cut.safetensors"), bytes, n / 2);
    free(bytes);
    ck_assert_int_eq(torc_checkpoint_load(tmp_path("cut.safetensors"), 2, g_names, (torc_tensor *[]){b.W, b.b}, b.opt,
                                          &step, b.gen),
                     TORC_ERR_IO);
    // A plain safetensors file is not a checkpoint when asked for optimizer/step/generator.
    torc_state_dict *plain = torc_state_dict_new();
    torc_state_dict_set(plain, "linear.weight", a.W);
    torc_state_dict_set(plain, "linear.bias", a.b);
    ck_assert_int_eq(torc_save(plain, tmp_path("plain.safetensors")), TORC_OK);
    ck_assert_int_ne(torc_checkpoint_load(tmp_path("plain.safetensors"), 2, g_names, (torc_tensor *[]){b.W, b.b}, b.opt,
                                          &step, NULL),
                     TORC_OK);
    tu_assert_error(TORC_ERR_IO, "is not a torc checkpoint (torc.format is missing");
    // Nothing moved.
    assert_same_bits(W0, b.W);
    assert_same_bits(b0, b.b);
    assert_same_bits(m0, torc_optimizer_state(b.opt, 0, "exp_avg"));
    ck_assert_int_eq(torc_optimizer_param_step_count(b.opt, 0), 1);
    torc_generator_get_state(b.gen, &seed1, &off1);
    ck_assert_uint_eq(seed0, seed1);
    ck_assert_uint_eq(off0, off1);
    ck_assert_int_eq(step, 42);
    // The weights alone load from a plain file (model only).
    ck_assert_int_eq(torc_checkpoint_load(tmp_path("plain.safetensors"), 2, g_names, (torc_tensor *[]){b.W, b.b}, NULL,
                                          NULL, NULL),
                     TORC_OK);
    assert_same_bits(a.W, b.W);
    torc_state_dict_free(plain);
    torc_scope_pop();
    run_free(&a);
    run_free(&b);
}
END_TEST

// Rewrites one metadata value of a saved checkpoint.
static void set_meta_in_file(const char *path, const char *key, const char *value) {
    torc_state_dict *sd = torc_load(path, NULL);
    ck_assert_ptr_nonnull(sd);
    ck_assert_int_eq(torc_state_dict_set_meta(sd, key, value), TORC_OK);
    ck_assert_int_eq(torc_save(sd, path), TORC_OK);
    torc_state_dict_free(sd);
}

START_TEST(step_counts_cannot_overflow) {
    run a = run_new("adam", "lr=0.01", 4);
    run_steps(&a, 1);
    const char *path = tmp_path("s.safetensors");
    torc_tensor *params[] = {a.W, a.b};
    ck_assert_int_eq(torc_checkpoint_save(path, 2, g_names, params, a.opt, 1, a.gen), TORC_OK);
    int64_t step = 7;
    // The optimizer's count at INT64_MAX: the next step would overflow, so it is refused.
    set_meta_in_file(path, "optimizer.state.0.step", "9223372036854775807");
    ck_assert_int_eq(torc_checkpoint_load(path, 2, g_names, params, a.opt, &step, a.gen),
                     TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "state dict: 'optimizer.state.0.step' is not a step count ('9223372036854775807')");
    set_meta_in_file(path, "optimizer.state.0.step", "9223372036854775808");  // past int64
    ck_assert_int_eq(torc_checkpoint_load(path, 2, g_names, params, a.opt, &step, a.gen),
                     TORC_ERR_INVALID_ARG);
    // One below loads, takes one step, and then the count refuses to wrap.
    set_meta_in_file(path, "optimizer.state.0.step", "9223372036854775806");
    ck_assert_msg(torc_checkpoint_load(path, 2, g_names, params, a.opt, &step, a.gen) == TORC_OK, "%s",
                  torc_last_error());
    run_steps(&a, 1);
    ck_assert_int_eq(torc_optimizer_param_step_count(a.opt, 0), INT64_MAX);
    ck_assert_int_eq(torc_optimizer_param_step_count(a.opt, 1), 2);
    torc_scope_push();
    ck_assert_int_eq(torc_set_grad(a.W, torc_ones_like(a.W)), TORC_OK);
    torc_scope_pop();
    ck_assert_int_eq(torc_optimizer_step(a.opt), TORC_ERR_RUNTIME);
    tu_assert_error(TORC_ERR_RUNTIME, "optimizer 'adam': parameter 0 has taken INT64_MAX steps");
    ck_assert_int_eq(torc_optimizer_param_step_count(a.opt, 0), INT64_MAX);
    // The checkpoint's own step: negative, INT64_MAX and past int64 are refused, nothing changed.
    step = 7;
    static const char *const bad_steps[] = {"-1", "9223372036854775807", "99999999999999999999", "12x"};
    for (size_t i = 0; i < 4; i++) {
        set_meta_in_file(path, "step", bad_steps[i]);
        ck_assert_int_eq(torc_checkpoint_load(path, 2, g_names, params, NULL, &step, NULL), TORC_ERR_IO);
        tu_assert_error(TORC_ERR_IO, "the checkpoint has no valid step");
        ck_assert_int_eq(step, 7);
    }
    run_free(&a);
}
END_TEST

START_TEST(checkpoint_contents) {
    run a = run_new("sgd", "lr=0.1 momentum=0.9", 3);
    run_steps(&a, 2);
    const char *path = tmp_path("c.safetensors");
    ck_assert_int_eq(torc_checkpoint_save(path, 2, g_names, (torc_tensor *[]){a.W, a.b}, a.opt, 2, a.gen), TORC_OK);
    torc_state_dict *sd = torc_load(path, NULL);
    ck_assert_ptr_nonnull(sd);
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "torc.format"), "torc-checkpoint/1");
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "step"), "2");
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "generator.seed"), "1003");
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "generator.offset"), "64");  // 2 x randn(8, 4)
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "optimizer.name"), "sgd");
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "optimizer.param_groups.0.lr"), "0.10000000000000001");
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "optimizer.param_groups.0.nesterov"), "false");
    ck_assert(torc_state_dict_contains(sd, "optimizer.state.0.momentum_buffer"));
    ck_assert_str_eq(torc_state_dict_name(sd, 0), "linear.weight");
    torc_state_dict_free(sd);
    // Reserved and repeated names are refused.
    ck_assert_int_ne(torc_checkpoint_save(path, 1, (const char *[]){"optimizer.x"}, &a.W, NULL, 0, NULL), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "the name 'optimizer.x' is reserved");
    ck_assert_int_ne(torc_checkpoint_save(path, 2, (const char *[]){"w", "w"}, (torc_tensor *[]){a.W, a.b}, NULL, 0, NULL),
                     TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "the name 'w' is used twice");
    run_free(&a);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("checkpoint");
    TCase *io = tcase_create("safetensors");
    tcase_add_checked_fixture(io, NULL, cleanup);
    tcase_set_timeout(io, 60);
    tcase_add_test(io, save_load_every_dtype);
    tcase_add_test(io, save_is_atomic);
    tcase_add_test(io, save_removes_stale_temporaries_and_follows_the_umask);
    tcase_add_test(io, load_refuses_truncated_and_corrupted);
    tcase_add_test(io, load_checks_structure);
    tcase_add_test(io, load_widens_unsigned);
    tcase_add_test(io, load_takes_many_names);
    suite_add_tcase(s, io);
    TCase *ck = tcase_create("checkpoint");
    tcase_add_checked_fixture(ck, NULL, cleanup);
    tcase_set_timeout(ck, 60);
    tcase_add_test(ck, resume_is_exact_for_every_optimizer);
    tcase_add_test(ck, load_refusals_leave_everything_untouched);
    tcase_add_test(ck, checkpoint_contents);
    tcase_add_test(ck, step_counts_cannot_overflow);
    suite_add_tcase(s, ck);
    return s;
}

int main(void) { return tu_run(make_suite()); }
