// tests/test_dtype.c — the dtype table (names, sizes, categories, limits, default dtype) and
// the f16/bf16/fp8 conversions of torc/convert.h, bit for bit against PyTorch's goldens.
#define _POSIX_C_SOURCE 200809L  // strtok_r, pthreads
#include "ck.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/convert.h"
#include "torc/torc.h"
#include "testutil.h"

// ---- golden files (tests/golden, written by tools/golden/gen_dtype_golden.py) ----
typedef struct blob {
    unsigned char *data;
    size_t n;
} blob;

static blob read_golden(const char *name) {
    FILE *f = tu_open_golden(name, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    blob b = {malloc(n > 0 ? (size_t)n : 1), (size_t)n};
    ck_assert(b.data != NULL);
    ck_assert_uint_eq(fread(b.data, 1, b.n, f), b.n);
    fclose(f);
    return b;
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint32_t le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }

// Bits of two values of one format are "the same": equal, or both NaN with the same sign
// (NaN payloads differ between PyTorch's code paths).
static bool same_bits(uint32_t got, uint32_t want, uint32_t sign_mask, uint32_t nan_test(uint32_t)) {
    if (got == want) return true;
    return nan_test(got) && nan_test(want) && (got & sign_mask) == (want & sign_mask);
}
static uint32_t f32_is_nan(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }
static uint32_t f16_is_nan(uint32_t u) { return (u & 0x7FFFu) > 0x7C00u; }
static uint32_t bf16_is_nan(uint32_t u) { return (u & 0x7FFFu) > 0x7F80u; }
static uint32_t e4m3fn_is_nan(uint32_t u) { return (u & 0x7Fu) == 0x7Fu; }
static uint32_t e5m2_is_nan(uint32_t u) { return (u & 0x7Fu) > 0x7Cu; }

// ---- narrow -> f32: every bit pattern ----
static float widen_f16(uint32_t p) { return torc_f16_to_f32((uint16_t)p); }
static float widen_bf16(uint32_t p) { return torc_bf16_to_f32((uint16_t)p); }
static float widen_e4m3fn(uint32_t p) { return torc_f8e4m3fn_to_f32((uint8_t)p); }
static float widen_e5m2(uint32_t p) { return torc_f8e5m2_to_f32((uint8_t)p); }

static void check_widen_all(const char *file, uint32_t npatterns, float (*widen)(uint32_t)) {
    blob b = read_golden(file);
    ck_assert_uint_eq(b.n, (size_t)npatterns * 4);
    uint32_t bad = 0, first = 0, first_got = 0, first_want = 0;
    for (uint32_t p = 0; p < npatterns; p++) {
        uint32_t want = le32(b.data + 4 * p), got = torc_f32_bits(widen(p));
        if (!same_bits(got, want, 0x80000000u, f32_is_nan)) {
            if (bad++ == 0) first = p, first_got = got, first_want = want;
        }
    }
    free(b.data);
    ck_assert_msg(bad == 0, "%s: %u patterns differ, first 0x%x -> 0x%08x, PyTorch 0x%08x",
                  file, bad, first, first_got, first_want);
}

START_TEST(f16_to_f32_every_pattern) { check_widen_all("dtype_f16_to_f32.bin", 65536, widen_f16); }
END_TEST
START_TEST(bf16_to_f32_every_pattern) { check_widen_all("dtype_bf16_to_f32.bin", 65536, widen_bf16); }
END_TEST
START_TEST(e4m3fn_to_f32_every_pattern) {
    check_widen_all("dtype_f8_e4m3fn_to_f32.bin", 256, widen_e4m3fn);
}
END_TEST
START_TEST(e5m2_to_f32_every_pattern) { check_widen_all("dtype_f8_e5m2_to_f32.bin", 256, widen_e5m2); }
END_TEST

// ---- f32 -> narrow: midpoints, their neighbours, specials and random values ----
static uint32_t narrow_f16(float f) { return torc_f32_to_f16(f); }
static uint32_t narrow_bf16(float f) { return torc_f32_to_bf16(f); }
static uint32_t narrow_e4m3fn(float f) { return torc_f32_to_f8e4m3fn(f); }
static uint32_t narrow_e5m2(float f) { return torc_f32_to_f8e5m2(f); }

static void check_narrow(const char *file, int out_bytes, uint32_t (*narrow)(float),
                         uint32_t sign_mask, uint32_t nan_test(uint32_t), size_t min_records) {
    blob b = read_golden(file);
    const size_t rec = 4 + (size_t)out_bytes;
    ck_assert_uint_eq(b.n % rec, 0);
    const size_t n = b.n / rec;
    ck_assert_uint_ge(n, min_records);
    size_t bad = 0, nan_inputs = 0;
    uint32_t first_in = 0, first_got = 0, first_want = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *r = b.data + i * rec;
        uint32_t in = le32(r), want = out_bytes == 2 ? le16(r + 4) : r[4];
        uint32_t got = narrow(torc_f32_from_bits(in));
        nan_inputs += f32_is_nan(in) != 0;
        if (!same_bits(got, want, sign_mask, nan_test)) {
            if (bad++ == 0) first_in = in, first_got = got, first_want = want;
        }
    }
    free(b.data);
    ck_assert_uint_gt(nan_inputs, 0);
    ck_assert_msg(bad == 0, "%s: %zu of %zu inputs differ, first f32 0x%08x -> 0x%x, PyTorch 0x%x",
                  file, bad, n, first_in, first_got, first_want);
}

START_TEST(f32_to_f16_golden) {
    check_narrow("dtype_f32_to_f16.bin", 2, narrow_f16, 0x8000u, f16_is_nan, 20000);
}
END_TEST
START_TEST(f32_to_bf16_golden) {
    check_narrow("dtype_f32_to_bf16.bin", 2, narrow_bf16, 0x8000u, bf16_is_nan, 20000);
}
END_TEST
START_TEST(f32_to_e4m3fn_golden) {
    check_narrow("dtype_f32_to_f8_e4m3fn.bin", 1, narrow_e4m3fn, 0x80u, e4m3fn_is_nan, 4000);
}
END_TEST
START_TEST(f32_to_e5m2_golden) {
    check_narrow("dtype_f32_to_f8_e5m2.bin", 1, narrow_e5m2, 0x80u, e5m2_is_nan, 4000);
}
END_TEST

// The cases the design names explicitly.
START_TEST(f16_underflows_1e8_bf16_does_not) {
    ck_assert_uint_eq(torc_f32_to_f16(1e-8f), 0x0000);
    ck_assert_float_eq(torc_f16_to_f32(torc_f32_to_f16(1e-8f)), 0.0f);
    ck_assert_uint_eq(torc_f32_to_f16(-1e-8f), 0x8000);  // signed zero survives
    ck_assert_uint_eq(torc_f32_to_bf16(1e-8f), 0x322C);
    ck_assert(torc_bf16_to_f32(torc_f32_to_bf16(1e-8f)) != 0.0f);
    ck_assert_float_eq(torc_bf16_to_f32(0x322C), 0x1.58p-27f);
}
END_TEST

START_TEST(round_to_nearest_even_and_overflow_edges) {
    ck_assert_uint_eq(torc_f32_to_f16(65504.0f), 0x7BFF);
    ck_assert_uint_eq(torc_f32_to_f16(65519.996f), 0x7BFF);  // just below the midpoint
    ck_assert_uint_eq(torc_f32_to_f16(65520.0f), 0x7C00);    // midpoint, ties to even (inf)
    ck_assert_uint_eq(torc_f32_to_f16(0x1p-25f), 0x0000);    // half the smallest subnormal: even
    ck_assert_uint_eq(torc_f32_to_f16(0x1.8p-24f), 0x0002);  // 1.5 subnormals: even is 2
    ck_assert_uint_eq(torc_f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);       // tie, stays even
    ck_assert_uint_eq(torc_f32_to_bf16(1.0f + 0x1.8p-7f), 0x3F82);     // tie, rounds up to even
    ck_assert_uint_eq(torc_f32_to_bf16(INFINITY), 0x7F80);
    ck_assert_uint_eq(torc_f32_to_f8e4m3fn(448.0f), 0x7E);
    ck_assert_uint_eq(torc_f32_to_f8e4m3fn(464.0f), 0x7E);   // tie to even: 448
    ck_assert_uint_eq(torc_f32_to_f8e4m3fn(470.0f), 0x7E);   // saturates (PyTorch 2.15)
    ck_assert_uint_eq(torc_f32_to_f8e4m3fn(1e9f), 0x7E);
    ck_assert_uint_eq(torc_f32_to_f8e4m3fn(-INFINITY), 0xFE);
    ck_assert_uint_eq(torc_f32_to_f8e4m3fn(NAN), 0x7F);
    ck_assert_uint_eq(torc_f32_to_f8e5m2(57344.0f), 0x7B);
    ck_assert_uint_eq(torc_f32_to_f8e5m2(61440.0f), 0x7C);   // tie to even: inf
    ck_assert_uint_eq(torc_f32_to_f8e5m2(-1e9f), 0xFC);
    ck_assert_uint_eq(torc_f32_to_f8e4m3fn_sat(1e9f), 0x7E);
    ck_assert_uint_eq(torc_f32_to_f8e5m2_sat(1e9f), 0x7B);
    ck_assert_uint_eq(torc_f32_to_f8e5m2_sat(-INFINITY), 0xFB);
    ck_assert(e5m2_is_nan(torc_f32_to_f8e5m2_sat(NAN)));
}
END_TEST

// ---- the table against torch (dtype_info.txt) ----
static const torc_dtype all_dtypes[TORC_DTYPE_COUNT] = {
    TORC_DTYPE_F64, TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16, TORC_DTYPE_F8_E4M3FN,
    TORC_DTYPE_F8_E5M2, TORC_DTYPE_I64, TORC_DTYPE_I32, TORC_DTYPE_I16, TORC_DTYPE_I8,
    TORC_DTYPE_U8, TORC_DTYPE_BOOL};

START_TEST(table_matches_torch_finfo_iinfo) {
    blob b = read_golden("dtype_info.txt");
    char *text = realloc(b.data, b.n + 1);
    ck_assert(text != NULL);
    text[b.n] = '\0';
    int rows = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        char name[32];
        unsigned long itemsize;
        int is_floating, is_signed, used = 0;
        ck_assert_int_eq(sscanf(line, "%31s %lu %d %d%n", name, &itemsize, &is_floating,
                                &is_signed, &used), 4);
        torc_dtype d;
        ck_assert_int_eq(torc_dtype_from_name(name, &d), TORC_OK);
        ck_assert_int_eq(d, all_dtypes[rows]);  // the enum follows the file's (torc's) order
        ck_assert_str_eq(torc_dtype_name(d), name);
        ck_assert_uint_eq(torc_dtype_size(d), itemsize);
        ck_assert_int_eq(torc_dtype_is_floating(d), is_floating);
        ck_assert_int_eq(torc_dtype_is_integral(d), !is_floating);
        const char *rest = line + used;
        if (is_floating) {
            char *end;
            double want[4], got[4];
            for (int k = 0; k < 4; k++) {
                want[k] = strtod(rest, &end);
                ck_assert_ptr_ne(end, rest);
                rest = end;
            }
            ck_assert_int_eq(torc_finfo(d, &got[0], &got[1], &got[2], &got[3]), TORC_OK);
            for (int k = 0; k < 4; k++)
                ck_assert_msg(got[k] == want[k], "%s finfo[%d] = %.17g, torch %.17g", name, k,
                              got[k], want[k]);
            ck_assert_int_eq(torc_iinfo(d, NULL, NULL), TORC_ERR_DTYPE);
        } else if (d != TORC_DTYPE_BOOL) {
            long long mn, mx;
            ck_assert_int_eq(sscanf(rest, "%lld %lld", &mn, &mx), 2);
            int64_t gmn, gmx;
            ck_assert_int_eq(torc_iinfo(d, &gmn, &gmx), TORC_OK);
            ck_assert_int_eq(gmn, mn);
            ck_assert_int_eq(gmx, mx);
            ck_assert_int_eq(torc_finfo(d, NULL, NULL, NULL, NULL), TORC_ERR_DTYPE);
        } else {
            ck_assert_int_eq(torc_iinfo(d, NULL, NULL), TORC_ERR_DTYPE);
            ck_assert_str_eq(torc_last_error(), "bool is not supported by torc_iinfo");
        }
        rows++;
    }
    free(text);
    ck_assert_int_eq(rows, TORC_DTYPE_COUNT);
}
END_TEST

START_TEST(sizes_and_categories) {
    static const size_t sizes[TORC_DTYPE_COUNT] = {8, 4, 2, 2, 1, 1, 8, 4, 2, 1, 1, 1};
    for (int d = 0; d < TORC_DTYPE_COUNT; d++) ck_assert_uint_eq(torc_dtype_size((torc_dtype)d), sizes[d]);
    ck_assert(torc_dtype_is_floating(TORC_DTYPE_BF16));
    ck_assert(torc_dtype_is_floating(TORC_DTYPE_F8_E5M2));
    ck_assert(!torc_dtype_is_floating(TORC_DTYPE_I64));
    ck_assert(torc_dtype_is_integral(TORC_DTYPE_BOOL));
    ck_assert(torc_dtype_is_integral(TORC_DTYPE_U8));
    ck_assert(!torc_dtype_is_integral(TORC_DTYPE_F16));
    for (int d = 0; d < TORC_DTYPE_COUNT; d++)
        ck_assert_int_eq(torc_dtype_is_fp8((torc_dtype)d),
                         d == TORC_DTYPE_F8_E4M3FN || d == TORC_DTYPE_F8_E5M2);
}
END_TEST

START_TEST(names_round_trip) {
    static const char *const names[TORC_DTYPE_COUNT] = {
        "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
        "int64", "int32", "int16", "int8", "uint8", "bool"};
    static const char *const shorts[TORC_DTYPE_COUNT] = {
        "f64", "f32", "f16", "bf16", "f8_e4m3fn", "f8_e5m2", "i64", "i32", "i16", "i8", "u8", "bool"};
    for (int i = 0; i < TORC_DTYPE_COUNT; i++) {
        torc_dtype d = (torc_dtype)i, back;
        ck_assert_str_eq(torc_dtype_name(d), names[i]);
        ck_assert_str_eq(torc_dtype_short_name(d), shorts[i]);
        back = TORC_DTYPE_COUNT;
        ck_assert_int_eq(torc_dtype_from_name(torc_dtype_name(d), &back), TORC_OK);
        ck_assert_int_eq(back, d);
        back = TORC_DTYPE_COUNT;
        ck_assert_int_eq(torc_dtype_from_name(torc_dtype_short_name(d), &back), TORC_OK);
        ck_assert_int_eq(back, d);
        char prefixed[64];
        snprintf(prefixed, sizeof prefixed, "torch.%s", names[i]);
        ck_assert_int_eq(torc_dtype_from_name(prefixed, &back), TORC_OK);
        ck_assert_int_eq(back, d);
    }
    static const struct { const char *alias; torc_dtype d; } aliases[] = {
        {"double", TORC_DTYPE_F64}, {"float", TORC_DTYPE_F32}, {"half", TORC_DTYPE_F16},
        {"long", TORC_DTYPE_I64},   {"int", TORC_DTYPE_I32},   {"short", TORC_DTYPE_I16}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        torc_dtype back;
        ck_assert_int_eq(torc_dtype_from_name(aliases[i].alias, &back), TORC_OK);
        ck_assert_int_eq(back, aliases[i].d);
    }
}
END_TEST

START_TEST(bad_names_and_values_are_errors) {
    torc_dtype d = TORC_DTYPE_I8;
    torc_clear_error();
    ck_assert_int_eq(torc_dtype_from_name("float128", &d), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(d, TORC_DTYPE_I8);  // untouched on error
    ck_assert_int_eq(torc_last_status(), TORC_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "unknown dtype name 'float128'"));
    ck_assert_int_eq(torc_dtype_from_name("", &d), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_dtype_from_name("Float32", &d), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_dtype_from_name(NULL, &d), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_dtype_from_name("f32", NULL), TORC_ERR_INVALID_ARG);

    const torc_dtype bad = (torc_dtype)TORC_DTYPE_COUNT;
    torc_clear_error();
    ck_assert_str_eq(torc_dtype_name(bad), "invalid");
    ck_assert_int_eq(torc_last_status(), TORC_ERR_INVALID_ARG);
    ck_assert_uint_eq(torc_dtype_size(bad), 0);
    ck_assert_uint_eq(torc_dtype_size((torc_dtype)-1), 0);
    ck_assert(!torc_dtype_is_floating(bad));
    ck_assert(!torc_dtype_is_integral((torc_dtype)-1));
    ck_assert(!torc_dtype_is_fp8(bad));
    ck_assert_int_eq(torc_finfo(bad, NULL, NULL, NULL, NULL), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_iinfo(bad, NULL, NULL), TORC_ERR_INVALID_ARG);
}
END_TEST

// ---- the default dtype ----
START_TEST(default_dtype_floating_only) {
    ck_assert_int_eq(torc_get_default_dtype(), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_F64), TORC_OK);
    ck_assert_int_eq(torc_get_default_dtype(), TORC_DTYPE_F64);
    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_BF16), TORC_OK);
    ck_assert_int_eq(torc_get_default_dtype(), TORC_DTYPE_BF16);

    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_I32), TORC_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(torc_last_error(),
                                 "only floating-point types are supported as the default type"));
    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_BOOL), TORC_ERR_DTYPE);
    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_F8_E4M3FN), TORC_ERR_DTYPE);
    ck_assert_int_eq(torc_set_default_dtype((torc_dtype)99), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_get_default_dtype(), TORC_DTYPE_BF16);  // unchanged by failures

    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_F32), TORC_OK);
}
END_TEST

static void *flip_default(void *arg) {
    for (int i = 0; i < 20000; i++)
        torc_set_default_dtype((i & 1) ? TORC_DTYPE_F64 : TORC_DTYPE_F16);
    return arg;
}

START_TEST(default_dtype_across_threads) {
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, flip_default, NULL), 0);
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        torc_dtype d = torc_get_default_dtype();
        bad += d != TORC_DTYPE_F32 && d != TORC_DTYPE_F64 && d != TORC_DTYPE_F16;
    }
    pthread_join(th, NULL);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(torc_get_default_dtype(), TORC_DTYPE_F64);  // the other thread's last write
    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_F32), TORC_OK);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dtype");
    TCase *conv = tcase_create("conversions");
    tcase_add_test(conv, f16_to_f32_every_pattern);
    tcase_add_test(conv, bf16_to_f32_every_pattern);
    tcase_add_test(conv, e4m3fn_to_f32_every_pattern);
    tcase_add_test(conv, e5m2_to_f32_every_pattern);
    tcase_add_test(conv, f32_to_f16_golden);
    tcase_add_test(conv, f32_to_bf16_golden);
    tcase_add_test(conv, f32_to_e4m3fn_golden);
    tcase_add_test(conv, f32_to_e5m2_golden);
    tcase_add_test(conv, f16_underflows_1e8_bf16_does_not);
    tcase_add_test(conv, round_to_nearest_even_and_overflow_edges);
    suite_add_tcase(s, conv);
    TCase *table = tcase_create("table");
    tcase_add_test(table, table_matches_torch_finfo_iinfo);
    tcase_add_test(table, sizes_and_categories);
    tcase_add_test(table, names_round_trip);
    tcase_add_test(table, bad_names_and_values_are_errors);
    tcase_add_test(table, default_dtype_floating_only);
    tcase_add_test(table, default_dtype_across_threads);
    suite_add_tcase(s, table);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
