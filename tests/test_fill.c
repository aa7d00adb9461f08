// tests/test_fill.c — what fill_, full, full_like and scalar_tensor store for every dtype and
// scalar kind (bool, integer, floating), and which values they refuse: PyTorch 2.15's rule
// (core/fill.c), each row measured with torch.empty(3, dtype=...).fill_(value). Run on the
// default backend and on the reference.
#include <stdint.h>

#include "testutil.h"

#define ERR NAN  // "refused" in the tables' expected column (with ok = false)

typedef struct fill_case {
    torc_dtype dtype;
    torc_scalar value;
    bool ok;        // false: PyTorch raises "value cannot be converted to type T without overflow"
    double expect;  // what every element reads, as a double
    const char *type;  // T in the message
} fill_case;

#define I(v) {TORC_DTYPE_I64, (double)(v), (v)}
#define F(v) {TORC_DTYPE_F64, (v), 0}
#define B(v) {TORC_DTYPE_BOOL, (v) ? 1.0 : 0.0, (v) ? 1 : 0}
#define OK(dt, s, e) {TORC_DTYPE_##dt, s, true, e, NULL}
#define NO(dt, s, t) {TORC_DTYPE_##dt, s, false, ERR, t}

static const fill_case cases[] = {
    // uint8: integers in -255..255, the negative ones wrapping; floats in [0, 256), truncated
    OK(U8, I(-1), 255), OK(U8, I(-255), 1), OK(U8, I(-129), 127), OK(U8, I(255), 255), OK(U8, I(128), 128),
    NO(U8, I(-256), "uint8_t"), NO(U8, I(256), "uint8_t"), NO(U8, I(300), "uint8_t"),
    OK(U8, F(2.7), 2), OK(U8, F(255.999), 255), OK(U8, F(0.5), 0), OK(U8, F(-0.0), 0),
    NO(U8, F(-1.0), "uint8_t"), NO(U8, F(-0.5), "uint8_t"), NO(U8, F(-1e-300), "uint8_t"), NO(U8, F(256.0), "uint8_t"),
    NO(U8, F(NAN), "uint8_t"), NO(U8, F(INFINITY), "uint8_t"), NO(U8, F(-INFINITY), "uint8_t"),
    OK(U8, B(true), 1), OK(U8, B(false), 0),
    // int8: integers in range; floats in [-128, 128)
    OK(I8, I(-1), -1), OK(I8, I(127), 127), OK(I8, I(-128), -128), NO(I8, I(128), "int8_t"), NO(I8, I(-129), "int8_t"),
    NO(I8, I(-255), "int8_t"), OK(I8, F(-0.5), 0), OK(I8, F(-2.7), -2), OK(I8, F(127.99), 127), OK(I8, F(-128.0), -128),
    NO(I8, F(128.0), "int8_t"), NO(I8, F(-128.0001), "int8_t"), NO(I8, F(-128.5), "int8_t"), OK(I8, B(true), 1),
    // int16, int32
    OK(I16, I(-32768), -32768), NO(I16, I(32768), "int16_t"), OK(I16, F(32767.9), 32767), OK(I16, F(-128.9), -128),
    NO(I16, F(32768.0), "int16_t"), NO(I16, F(-32768.5), "int16_t"), NO(I16, F(70000.0), "int16_t"),
    OK(I32, I(2147483647), 2147483647), NO(I32, I(2147483648), "int"), NO(I32, I(-2147483649), "int"),
    OK(I32, F(2147483647.99), 2147483647), OK(I32, F(-2147483648.0), -2147483648.0), OK(I32, F(70000.0), 70000),
    NO(I32, F(2147483648.0), "int"), NO(I32, F(-2147483648.5), "int"), NO(I32, F(NAN), "int"),
    // int64: every integer; floats in [-2^63, 2^63)
    OK(I64, I(-1), -1), OK(I64, F(-0x1p63), -0x1p63), OK(I64, F(9223372036854774784.0), 9223372036854774784.0),
    OK(I64, F(1e10), 1e10), NO(I64, F(0x1p63), "int64_t"), NO(I64, F(-9223372036854777856.0), "int64_t"),
    NO(I64, F(NAN), "int64_t"), NO(I64, F(-INFINITY), "int64_t"), NO(I64, F(1e40), "int64_t"),
    // bool: anything, nonzero (NaN too) is true
    OK(BOOL, I(-1), 1), OK(BOOL, I(0), 0), OK(BOOL, I(256), 1), OK(BOOL, F(-0.5), 1), OK(BOOL, F(0.0), 0),
    OK(BOOL, F(NAN), 1), OK(BOOL, F(-INFINITY), 1), OK(BOOL, F(1e300), 1), OK(BOOL, B(false), 0),
    // floating: |v| <= the largest finite value, integers too; NaN always; inf except e4m3fn
    OK(F16, I(65504), 65504), OK(F16, F(-65504.0), -65504), OK(F16, F(2.7), 2.69921875), OK(F16, F(1e-10), 0),
    OK(F16, F(INFINITY), INFINITY), OK(F16, F(NAN), NAN), NO(F16, I(65505), "c10::Half"), NO(F16, F(65504.5), "c10::Half"),
    NO(F16, F(-65505.0), "c10::Half"), NO(F16, I(2147483648), "c10::Half"),
    OK(BF16, F(3.3895313892515355e38), 3.3895313892515355e38), OK(BF16, F(255.5), 256), OK(BF16, I(INT64_MAX), 0x1p63),
    NO(BF16, F(3.39e38), "c10::BFloat16"), NO(BF16, F(1e40), "c10::BFloat16"),
    OK(F32, F(3.4028234663852886e38), 3.4028234663852886e38), OK(F32, F(-INFINITY), -INFINITY), OK(F32, F(1e-46), 0),
    OK(F32, I(2147483647), 2147483648.0), NO(F32, F(3.4028235e38), "float"), NO(F32, F(-3.41e38), "float"),
    OK(F64, F(1e300), 1e300), OK(F64, F(INFINITY), INFINITY), OK(F64, I(INT64_MIN), -0x1p63),
    OK(F8_E4M3FN, F(448.0), 448), OK(F8_E4M3FN, I(300), 288), OK(F8_E4M3FN, F(NAN), NAN), NO(F8_E4M3FN, F(449.0), "c10::Float8_e4m3fn"),
    NO(F8_E4M3FN, F(INFINITY), "c10::Float8_e4m3fn"), NO(F8_E4M3FN, I(500), "c10::Float8_e4m3fn"),
    OK(F8_E5M2, F(57344.0), 57344), OK(F8_E5M2, F(INFINITY), INFINITY), OK(F8_E5M2, F(2.7), 2.5),
    NO(F8_E5M2, F(57345.0), "c10::Float8_e5m2"), NO(F8_E5M2, I(61440), "c10::Float8_e5m2"),
};

static const char *const devices[] = {NULL, "reference"};  // NULL: the default backend

static void on_device(int d) {
    torc_device *dev = devices[d] ? torc_device_get(devices[d]) : torc_default_device();
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    torc_set_default_device(dev);
}

static void assert_all(torc_tensor *t, double expect, const char *what) {
    double *v = tu_values(t);
    for (int64_t i = 0; i < torc_numel(t); i++)
        ck_assert_msg((isnan(expect) && isnan(v[i])) || v[i] == expect, "%s: element %lld is %.17g, expected %.17g", what,
                      (long long)i, v[i], expect);
    free(v);
}

START_TEST(fill_follows_pytorch_for_every_dtype_and_scalar_kind) {
    on_device(_i);
    torc_scope_push();
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const fill_case *c = &cases[k];
        char what[160];
        snprintf(what, sizeof what, "case %zu: %s fill_(%s %.17g)", k, torc_dtype_name(c->dtype),
                 c->value.kind == TORC_DTYPE_F64 ? "float" : c->value.kind == TORC_DTYPE_BOOL ? "bool" : "int",
                 c->value.f);
        torc_tensor *t = torc_zeros(TORC_SHAPE(3), c->dtype);
        // and a strided view, which no fast path takes
        torc_tensor *s = torc_slice(torc_zeros(TORC_SHAPE(6), c->dtype), 0, 0, 6, 2);
        ck_assert_ptr_nonnull(s);
        const torc_status st = torc_fill_(t, c->value);
        if (!c->ok) {
            ck_assert_msg(st == TORC_ERR_INVALID_ARG, "%s: status %s, expected a refusal", what, torc_status_name(st));
            char msg[128];
            snprintf(msg, sizeof msg, "value cannot be converted to type %s without overflow", c->type);
            ck_assert_msg(!strcmp(torc_last_error(), msg), "%s: message '%s', expected '%s'", what, torc_last_error(), msg);
            assert_all(t, 0, what);  // unchanged
            continue;
        }
        ck_assert_msg(st == TORC_OK, "%s: %s", what, torc_last_error());
        assert_all(t, c->expect, what);
        ck_assert_int_eq(torc_fill_(s, c->value), TORC_OK);
        assert_all(s, c->expect, what);
    }
    torc_scope_pop();
}
END_TEST

// int64 stores the integer itself, also where a double cannot hold it (beyond 2^53).
START_TEST(int64_fill_is_exact) {
    on_device(_i);
    torc_scope_push();
    const int64_t vals[] = {INT64_MAX, INT64_MIN, (INT64_C(1) << 53) + 1, -(INT64_C(1) << 53) - 3, 123456789012345678};
    for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
        torc_tensor *t = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_I64);
        torc_tensor *col = torc_select(t, 1, 1);  // strided
        ck_assert_int_eq(torc_fill_(col, torc_s(vals[k])), TORC_OK);
        int64_t got[6];
        ck_assert_int_eq(torc_copy_to_host(t, got, sizeof got), TORC_OK);
        for (int i = 0; i < 6; i++) ck_assert_int_eq(got[i], (i % 3 == 1 ? vals[k] : 0));
        ck_assert_int_eq(torc_fill_(t, torc_s(vals[k])), TORC_OK);
        ck_assert_int_eq(torc_copy_to_host(t, got, sizeof got), TORC_OK);
        for (int i = 0; i < 6; i++) ck_assert_int_eq(got[i], vals[k]);
    }
    torc_scope_pop();
}
END_TEST

// The factories that take a double: an integral value is an integer scalar (torch.full((2,), -1,
// dtype=torch.uint8) stores 255), any other a floating one.
START_TEST(factories_take_a_value_as_fill_does) {
    on_device(_i);
    torc_scope_push();
    tu_assert_values(torc_full(TORC_SHAPE(2), -1, TORC_DTYPE_U8), TU_ARR(255, 255), 0);
    tu_assert_values(torc_scalar_tensor(-1, TORC_DTYPE_U8), TU_ARR(255), 0);
    tu_assert_values(torc_full(TORC_SHAPE(2), 2.7, TORC_DTYPE_U8), TU_ARR(2, 2), 0);
    tu_assert_values(torc_full(TORC_SHAPE(2), -0.5, TORC_DTYPE_I8), TU_ARR(0, 0), 0);
    tu_assert_values(torc_full(TORC_SHAPE(2), NAN, TORC_DTYPE_BOOL), TU_ARR(1, 1), 0);
    torc_tensor *u = torc_zeros(TORC_SHAPE(2), TORC_DTYPE_U8);
    tu_assert_values(torc_full_like(u, -255), TU_ARR(1, 1), 0);
    ck_assert_ptr_null(torc_full_like(u, -1.5));
    tu_assert_error(TORC_ERR_INVALID_ARG, "value cannot be converted to type uint8_t without overflow");
    ck_assert_ptr_null(torc_scalar_tensor(300, TORC_DTYPE_U8));
    tu_assert_error(TORC_ERR_INVALID_ARG, "value cannot be converted to type uint8_t without overflow");
    ck_assert_ptr_null(torc_full(TORC_SHAPE(2), 70000, TORC_DTYPE_F16));
    tu_assert_error(TORC_ERR_INVALID_ARG, "value cannot be converted to type c10::Half without overflow");
    ck_assert_ptr_null(torc_full(TORC_SHAPE(2), 0x1p63, TORC_DTYPE_I64));
    tu_assert_error(TORC_ERR_INVALID_ARG, "value cannot be converted to type int64_t without overflow");
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("fill");
    TCase *tc = tcase_create("fill");
    tcase_add_loop_test(tc, fill_follows_pytorch_for_every_dtype_and_scalar_kind, 0, 2);
    tcase_add_loop_test(tc, int64_fill_is_exact, 0, 2);
    tcase_add_loop_test(tc, factories_take_a_value_as_fill_does, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
