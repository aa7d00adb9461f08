// tests/test_hostile.c — bad input from a hostile user (issue 16): sizes that overflow, files
// that lie about their size, views past their storage, values that do not fit a dtype, flags
// out of range, and chains of calls where the first error must survive. Each gets a clear
// error (status + PyTorch's message) and changes nothing; none crashes.
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tmpdir.h"
#include "train_args.h"

#define P62 ((int64_t)1 << 62)
#define P32 ((int64_t)1 << 32)

// ---- item 1: element counts that overflow int64_t ----
START_TEST(creation_sizes_overflow) {
    torc_scope_push();
    ck_assert_ptr_null(torc_empty(TORC_SHAPE(P62, 4), TORC_DTYPE_F32));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed with sizes=[4611686018427387904, 4]");
    ck_assert_ptr_null(torc_zeros(TORC_SHAPE(P62, 3), TORC_DTYPE_U8));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed with sizes=[4611686018427387904, 3]");
    ck_assert_ptr_null(torc_ones(TORC_SHAPE(P32, P32), TORC_DTYPE_BOOL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed with sizes=[4294967296, 4294967296]");
    // Elements that fit, bytes that do not.
    ck_assert_ptr_null(torc_empty(TORC_SHAPE(P62), TORC_DTYPE_F64));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed with sizes=[4611686018427387904]");
    ck_assert_ptr_null(torc_randn(TORC_SHAPE(P62, 4), TORC_DTYPE_F32, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed");
    // An empty tensor may have huge other dims, but its strides must still fit (PyTorch's check).
    torc_tensor *e = torc_empty(TORC_SHAPE(0, P62), TORC_DTYPE_F32);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(torc_numel(e), 0);
    ck_assert_ptr_null(torc_empty(TORC_SHAPE(0, P62, 4), TORC_DTYPE_F32));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Stride calculation overflowed");
    ck_assert_int_eq(torc_numel(torc_empty(TORC_SHAPE(P62, 4, 0), TORC_DTYPE_F32)), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(view_sizes_overflow) {
    torc_scope_push();
    torc_tensor *x = torc_arange(0, 4, 1, TORC_DTYPE_F32);
    // (2^62 + 1) * 4 wraps to 4: the shape must not be taken for x's 4 elements.
    ck_assert_ptr_null(torc_view(x, TORC_SHAPE(P62 + 1, 4)));
    tu_assert_error(TORC_ERR_SHAPE, "shape '[4611686018427387905, 4]' is invalid for input of size 4");
    ck_assert_ptr_null(torc_reshape(x, TORC_SHAPE(P62 + 1, 4, -1)));
    ck_assert_int_eq(torc_last_status(), TORC_ERR_SHAPE);
    // Expanding costs no storage, but the element count must fit.
    torc_tensor *one = torc_ones(TORC_SHAPE(1, 1), TORC_DTYPE_F32);
    ck_assert_ptr_null(torc_expand(one, TORC_SHAPE(P62, 4)));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed with sizes=[4611686018427387904, 4]");
    torc_tensor *big = torc_expand(one, TORC_SHAPE(P62, 1));
    ck_assert_ptr_nonnull(big);
    double v = 0;
    ck_assert_int_eq(torc_item(torc_select(torc_select(big, 0, P62 - 1), 0, 0), &v), TORC_OK);
    ck_assert(v == 1.0);
    // cat of expanded inputs whose lengths add up past int64_t.
    torc_tensor *half = torc_expand(one, TORC_SHAPE(P62 + P62 / 2, 1));
    ck_assert_ptr_null(torc_cat(2, (torc_tensor *[]){half, half}, 0));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed with sizes=[9223372036854775807, 1]");
    torc_scope_pop();
}
END_TEST

START_TEST(pattern_sizes_overflow) {
    torc_scope_push();
    torc_tensor *x = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    ck_assert_ptr_null(torc_repeat(x, "h w -> h w c", "c=4611686018427387904"));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed with sizes=[2, 3, 4611686018427387904]");
    ck_assert_ptr_null(torc_repeat(x, "h w -> h w 99999999999999999999", NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Anonymous axis length 99999999999999999999 is too large");
    // More result dims than a tensor has, made of "1"s (a stack overflow, found by fuzz_rearrange).
    ck_assert_ptr_null(torc_rearrange(x, "a b -> a b 1 1 1 1 1 1 1", NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "the result would have 9 dims; torc tensors have at most 8");
    ck_assert_ptr_null(torc_repeat(x, "a b -> a b () () () () () ()  c", "c=2"));
    tu_assert_error(TORC_ERR_INVALID_ARG, "the result would have 9 dims");
    tu_assert_shape(torc_rearrange(x, "a b -> a b 1 1 1 1 1 1", NULL), 2, 3, 1, 1, 1, 1, 1, 1);
    // 2^62 * 4 wraps to 0: a dim of 0 must not pass for it.
    torc_tensor *e = torc_zeros(TORC_SHAPE(0, 3), TORC_DTYPE_F32);
    ck_assert_ptr_null(torc_rearrange(e, "(a b) w -> a b w", "a=4611686018427387904, b=4"));
    tu_assert_error(TORC_ERR_SHAPE, "the lengths [4611686018427387904, 4] of dim 0 multiply past 2^63");
    torc_tensor *y = torc_rearrange(e, "(a b) w -> a b w", "a=4611686018427387904, b=0");
    ck_assert_msg(y != NULL, "%s", torc_last_error());
    tu_assert_shape(y, P62, 0, 3);
    // einsum's merged dims of an empty operand whose other dims are huge.
    torc_tensor *z = torc_expand(torc_zeros(TORC_SHAPE(1, 1, 1), TORC_DTYPE_F32), TORC_SHAPE(0, P62, 4));
    ck_assert_ptr_nonnull(z);
    ck_assert_ptr_null(TORC_EINSUM("a b c, a b c -> a", z, z));
    torc_scope_pop();
}
END_TEST

// ---- item 2: .npy files whose header lies ----
static void write_npy(const char *path, const char *descr, const char *shape, const void *data, size_t n) {
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    while ((10 + len + 1) % 64) dict[len++] = ' ';
    dict[len++] = '\n';
    unsigned char head[10 + 256] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xFF),
                                    (unsigned char)(len >> 8)};
    memcpy(head + 10, dict, (size_t)len);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(head, 1, 10 + (size_t)len, f), 10 + (size_t)len);
    if (n) ck_assert_int_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

START_TEST(npy_sizes_do_not_wrap) {
    const int64_t data[1] = {7};
    // (2^61 + 1) * 8 bytes wraps to 8: the 8 bytes present must not pass for 2^61 + 1 elements.
    const char *p = tmp_path("wrap.npy");
    write_npy(p, "<i8", "(2305843009213693953,)", data, sizeof data);
    ck_assert_ptr_null(torc_dataset_open(p, NULL));
    tu_assert_error(TORC_ERR_IO, "its shape [2305843009213693953] holds more bytes than fit in memory");
    write_npy(p, "<i8", "(4294967296, 4294967296)", data, sizeof data);
    ck_assert_ptr_null(torc_dataset_open(p, NULL));
    tu_assert_error(TORC_ERR_IO, "holds more bytes than fit in memory");
    // A dim past int64_t, and text that is not Python's tuple syntax.
    const char *bad[] = {"(9LL2305,)", "(99999999999999999999,)", "(-1,)", "(+1,)", "(1 2,)", "(1,,2)", "(1", "(0x10,)"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_npy(p, "<i8", bad[i], data, sizeof data);
        ck_assert_msg(torc_dataset_open(p, NULL) == NULL, "shape %s was accepted", bad[i]);
        ck_assert_int_eq(torc_last_status(), TORC_ERR_IO);
    }
    // Python's spellings still open: (1,), (1L,), ().
    const char *good[] = {"(1,)", "(1L,)", "( 1 , )", "()"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        write_npy(p, "<i8", good[i], data, sizeof data);
        torc_dataset *ds = torc_dataset_open(p, NULL);
        ck_assert_msg(ds != NULL, "shape %s: %s", good[i], torc_last_error());
        torc_dataset_close(ds);
    }
}
END_TEST

START_TEST(get_batch_sizes_overflow) {
    const uint16_t data[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const char *p = tmp_path("tokens.npy");
    write_npy(p, "<u2", "(8,)", data, sizeof data);
    torc_dataset *ds = torc_dataset_open(p, NULL);
    ck_assert_ptr_nonnull(ds);
    torc_generator *g = torc_generator_new(1);
    uint64_t seed, before, after;
    torc_generator_get_state(g, &seed, &before);
    torc_tensor *x = NULL, *y = NULL;
    ck_assert_int_eq(torc_get_batch(ds, P62, 4, NULL, g, &x, &y), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed");
    ck_assert_ptr_null(x);
    torc_generator_get_state(g, &seed, &after);
    ck_assert_int_eq(after, before);  // nothing drawn
    torc_generator_free(g);
    torc_dataset_close(ds);
}
END_TEST

// ---- item 3: as_strided bounds ----
START_TEST(as_strided_bounds_do_not_wrap) {
    torc_scope_push();
    torc_tensor *x = torc_zeros(TORC_SHAPE(4), TORC_DTYPE_F32);  // 16 bytes
    ck_assert_ptr_null(torc_as_strided(x, TORC_SHAPE(2, 2), (int64_t[]){(int64_t)1 << 60, (int64_t)1 << 60}, 0));
    tu_assert_error(TORC_ERR_INVALID_ARG,
                    "Storage size calculation overflowed with sizes=[2, 2] and strides=[1152921504606846976, "
                    "1152921504606846976]");
    // (2^62 + 1) * 4 bytes wraps to 4: the offset must not alias element 0.
    ck_assert_ptr_null(torc_as_strided(x, TORC_SHAPE(1), (int64_t[]){1}, P62));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed");
    ck_assert_ptr_null(torc_as_strided(x, TORC_SHAPE(0), (int64_t[]){1}, P62));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed");
    // Stride 0 needs no storage, but the element count must fit.
    ck_assert_ptr_null(torc_as_strided(x, TORC_SHAPE(P62, 4), (int64_t[]){0, 0}, 0));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed");
    // In bounds still works; an empty view's huge strides are fine and copy to nothing.
    torc_tensor *e = torc_as_strided(x, TORC_SHAPE(0, 2), (int64_t[]){P62, 1}, 0);
    ck_assert_ptr_nonnull(e);
    torc_tensor *c = torc_clone(e);
    ck_assert_ptr_nonnull(c);
    tu_assert_shape(c, 0, 2);
    torc_tensor *ok = torc_as_strided(x, TORC_SHAPE(2, 2), (int64_t[]){1, 2}, 0);
    ck_assert_ptr_nonnull(ok);
    torc_scope_pop();
}
END_TEST

// ---- item 8: narrow's start + length ----
START_TEST(narrow_length_overflow) {
    torc_scope_push();
    torc_tensor *x = torc_arange(0, 4, 1, TORC_DTYPE_F32);
    ck_assert_ptr_null(torc_narrow(x, 0, 1, INT64_MAX));
    tu_assert_error(TORC_ERR_INDEX, "start (1) + length (9223372036854775807) exceeds dimension size (4).");
    tu_assert_shape(torc_narrow(x, 0, 1, 3), 3);
    torc_scope_pop();
}
END_TEST

// ---- item 9: full / fill_ of integer dtypes ----
START_TEST(integer_fill_values_must_fit) {
    torc_scope_push();
    ck_assert_ptr_null(torc_full(TORC_SHAPE(2), NAN, TORC_DTYPE_I64));
    tu_assert_error(TORC_ERR_INVALID_ARG, "value cannot be converted to type int64_t without overflow");
    ck_assert_ptr_null(torc_full(TORC_SHAPE(2), 1e30, TORC_DTYPE_I32));
    tu_assert_error(TORC_ERR_INVALID_ARG, "value cannot be converted to type int without overflow");
    ck_assert_ptr_null(torc_full(TORC_SHAPE(2), 40000, TORC_DTYPE_I16));
    tu_assert_error(TORC_ERR_INVALID_ARG, "value cannot be converted to type int16_t without overflow");
    ck_assert_ptr_null(torc_scalar_tensor(-129, TORC_DTYPE_I8));
    tu_assert_error(TORC_ERR_INVALID_ARG, "value cannot be converted to type int8_t without overflow");
    torc_tensor *u = torc_full(TORC_SHAPE(2), 255, TORC_DTYPE_U8);
    ck_assert_ptr_nonnull(u);
    ck_assert_int_eq(torc_fill_(u, torc_s(-256)), TORC_ERR_INVALID_ARG);  // (-255..-1 wrap: tests/test_fill.c)
    tu_assert_error(TORC_ERR_INVALID_ARG, "value cannot be converted to type uint8_t without overflow");
    ck_assert_int_eq(torc_fill_(u, torc_s(INFINITY)), TORC_ERR_INVALID_ARG);
    tu_assert_values(u, TU_ARR(255, 255), 0);  // unchanged
    torc_tensor *l = torc_full_like(u, 3.9);  // in range: truncated, as c10 does
    tu_assert_values(l, TU_ARR(3, 3), 0);
    ck_assert_ptr_null(torc_full_like(u, 256));
    // Floating dtypes take NaN.
    ck_assert_ptr_nonnull(torc_full(TORC_SHAPE(2), NAN, TORC_DTYPE_F32));
    torc_scope_pop();
}
END_TEST

// ---- item 11: torc-train's flags ----
static train_args_result parse(char *err, size_t n, train_options *o, int argc, ...) {
    char *argv[16] = {"torc-train"};
    va_list ap;
    va_start(ap, argc);
    for (int i = 1; i < argc; i++) argv[i] = va_arg(ap, char *);
    va_end(ap);
    return train_args_parse(argc, argv, o, err, n);
}

START_TEST(train_flags_are_range_checked) {
    train_options o;
    char err[256];
    ck_assert_int_eq(parse(err, sizeof err, &o, 3, "--layers", "4294967297"), TRAIN_ARGS_ERROR);
    ck_assert_str_eq(err, "--layers expects an integer from 0 to 255, got '4294967297'");
    ck_assert_int_eq(parse(err, sizeof err, &o, 3, "--dim", "2147483648"), TRAIN_ARGS_ERROR);
    ck_assert_str_eq(err, "--dim expects an integer from 1 to 1048576, got '2147483648'");
    ck_assert_int_eq(parse(err, sizeof err, &o, 3, "--batch", "9223372036854775807"), TRAIN_ARGS_ERROR);
    ck_assert_str_eq(err, "--batch expects an integer from 1 to 16777216, got '9223372036854775807'");
    ck_assert_int_eq(parse(err, sizeof err, &o, 3, "extra", "--dim"), TRAIN_ARGS_ERROR);
    ck_assert_str_eq(err, "unexpected argument 'extra': options start with -- (try --help)");
    ck_assert_int_eq(parse(err, sizeof err, &o, 2, "--dim"), TRAIN_ARGS_ERROR);
    ck_assert_str_eq(err, "--dim expects an integer from 1 to 1048576, got ''");
    ck_assert_int_eq(parse(err, sizeof err, &o, 3, "--steps", "-1"), TRAIN_ARGS_ERROR);
    ck_assert_int_eq(parse(err, sizeof err, &o, 3, "--seed", "1x"), TRAIN_ARGS_ERROR);
    // --hp settings beyond the buffer are an error, not cut short.
    char longhp[900];
    memset(longhp, 'a', sizeof longhp - 1);
    longhp[sizeof longhp - 1] = '\0';
    longhp[3] = '=';
    ck_assert_int_eq(parse(err, sizeof err, &o, 5, "--hp", longhp, "--hp", longhp), TRAIN_ARGS_ERROR);
    ck_assert_ptr_nonnull(strstr(err, "--hp: the settings exceed 1023 characters"));
    // Good flags land where they belong.
    ck_assert_int_eq(parse(err, sizeof err, &o, 9, "--layers", "255", "--dim", "1048576", "--batch", "3", "--hp",
                           "momentum=0.9"),
                     TRAIN_ARGS_OK);
    ck_assert_int_eq(o.layers, 255);
    ck_assert_int_eq(o.dim, 1048576);
    ck_assert_int_eq(o.batch, 3);
    ck_assert_str_eq(o.hparams, " momentum=0.9");
    ck_assert_int_eq(parse(err, sizeof err, &o, 2, "--help"), TRAIN_ARGS_HELP);
}
END_TEST

// ---- item 12: the first error of a chain survives ----
START_TEST(first_error_of_a_chain_is_kept) {
    torc_scope_push();
    torc_tensor *a = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F32), *b = torc_zeros(TORC_SHAPE(4), TORC_DTYPE_F32);
    ck_assert_ptr_null(torc_mse_loss(a, b));
    tu_assert_error(TORC_ERR_SHAPE, "The size of tensor a (3) must match the size of tensor b (4) at non-singleton "
                                    "dimension 0");
    // A public chain: the NULL from the failed call does not replace its error.
    ck_assert_ptr_null(torc_parameter(torc_empty(TORC_SHAPE(P62, 4), TORC_DTYPE_F32)));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed");
    ck_assert_ptr_null(torc_relu(torc_sum(torc_add(a, b), TORC_ALL_DIMS, false)));
    tu_assert_error(TORC_ERR_SHAPE, "The size of tensor a (3) must match");
    // nn.c's own chain (new_param: torc_parameter(torc_empty(...))).
    ck_assert_ptr_null(torc_linear_new(P32, P32, false, TORC_DTYPE_F32, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Storage size calculation overflowed with sizes=[4294967296, 4294967296]");
    // With no error set, a NULL argument says so.
    torc_clear_error();
    ck_assert_ptr_null(torc_relu(NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    // The parameter count tells a failure (-1) from an empty list (0).
    torc_clear_error();
    ck_assert_int_eq(torc_module_param_count(NULL), -1);
    tu_assert_error(TORC_ERR_INVALID_ARG, "module is NULL");
    torc_module *relu = torc_relu_module_new();
    ck_assert_int_eq(torc_module_param_count(relu), 0);
    torc_module_free(relu);
    torc_scope_pop();
}
END_TEST

// ---- item 13: what UndefinedBehaviorSanitizer found (also exact results without it) ----
START_TEST(no_undefined_arithmetic) {
    torc_scope_push();
    torc_tensor *x = torc_arange(0, 4, 1, TORC_DTYPE_F32);
    // slice: ceil((end - start) / step) with a huge step is one element.
    torc_tensor *s = torc_slice(x, 0, 0, 4, INT64_MAX);
    tu_assert_shape(s, 1);
    tu_assert_values(s, TU_ARR(0), 0);
    tu_assert_shape(torc_slice(x, 0, 1, 4, INT64_MAX - 1), 1);
    // arange: a count past int64_t is PyTorch's error, not a cast that overflows.
    ck_assert_ptr_null(torc_arange(0, 1e30, 1, TORC_DTYPE_F32));
    tu_assert_error(TORC_ERR_INVALID_ARG, "invalid size, possible overflow?");
    // eye with an empty side and a huge other one: no diagonal stride to overflow.
    torc_tensor *e = torc_eye(0, INT64_MAX, TORC_DTYPE_F32);
    ck_assert_ptr_nonnull(e);
    tu_assert_shape(e, 0, INT64_MAX);
    // repr: int64 extremes print exactly; the printer's first write starts from an empty buffer.
    const int64_t extremes[2] = {INT64_MAX, INT64_MIN};
    torc_tensor *big = torc_tensor_from(extremes, TORC_SHAPE(2), TORC_DTYPE_I64);
    char *r = torc_repr(big);
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(r, "tensor([ 9223372036854775807, -9223372036854775808])");
    free(r);
    // unsqueeze of an empty tensor with a huge dim, flatten over huge empty dims.
    torc_tensor *z = torc_empty(TORC_SHAPE(P62, 0), TORC_DTYPE_F32);
    tu_assert_shape(torc_unsqueeze(z, 1), P62, 1, 0);
    tu_assert_shape(torc_flatten(z, 0, 1), 0);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("hostile");
    TCase *tc = tcase_create("hostile");
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_add_test(tc, creation_sizes_overflow);
    tcase_add_test(tc, view_sizes_overflow);
    tcase_add_test(tc, pattern_sizes_overflow);
    tcase_add_test(tc, npy_sizes_do_not_wrap);
    tcase_add_test(tc, get_batch_sizes_overflow);
    tcase_add_test(tc, as_strided_bounds_do_not_wrap);
    tcase_add_test(tc, narrow_length_overflow);
    tcase_add_test(tc, integer_fill_values_must_fit);
    tcase_add_test(tc, train_flags_are_range_checked);
    tcase_add_test(tc, first_error_of_a_chain_is_kept);
    tcase_add_test(tc, no_undefined_arithmetic);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
