// tests/test_promotion.c — type promotion against PyTorch's goldens: every promote_types pair,
// result_type over tensors, zero-dim tensors and scalars, and the fp8 error (code and message).
#define _POSIX_C_SOURCE 200809L  // strtok_r, pthreads
#include "ck.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"
#include "testutil.h"

// ---- golden tables (tests/golden/promotion_*.txt, from tools/golden/gen_dtype_golden.py) ----
// A line is "OPERAND... -> RESULT" or "OPERAND... -> error MESSAGE"; '#' starts a comment line.
typedef struct golden_line {
    int lineno;
    int n_ops;
    char ops[5][32];      // the tokens before "->"
    bool error;           // PyTorch raised
    char result[32];      // the dtype name when !error
    char message[256];    // PyTorch's message when error
} golden_line;

typedef struct golden_table {
    golden_line *lines;
    int n;
} golden_table;

static golden_table read_table(const char *name) {
    FILE *f = tu_open_golden(name, "r");
    golden_table t = {NULL, 0};
    int cap = 0, lineno = 0;
    char buf[512];
    while (fgets(buf, sizeof buf, f)) {
        lineno++;
        buf[strcspn(buf, "\n")] = '\0';
        if (buf[0] == '#' || buf[0] == '\0') continue;
        if (t.n == cap) {
            cap = cap ? 2 * cap : 256;
            t.lines = realloc(t.lines, (size_t)cap * sizeof *t.lines);
            ck_assert(t.lines != NULL);
        }
        golden_line *g = &t.lines[t.n++];
        memset(g, 0, sizeof *g);
        g->lineno = lineno;
        char *arrow = strstr(buf, " -> ");
        ck_assert_msg(arrow != NULL, "%s:%d: no '->'", name, lineno);
        *arrow = '\0';
        const char *rhs = arrow + 4;
        char *save = NULL;
        for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            ck_assert_int_lt(g->n_ops, 5);
            snprintf(g->ops[g->n_ops++], sizeof g->ops[0], "%s", tok);
        }
        if (strncmp(rhs, "error ", 6) == 0) {
            g->error = true;
            snprintf(g->message, sizeof g->message, "%s", rhs + 6);
        } else {
            snprintf(g->result, sizeof g->result, "%s", rhs);
        }
    }
    fclose(f);
    return t;
}

static torc_dtype dtype_of(const char *name) {
    torc_dtype d;
    ck_assert_msg(torc_dtype_from_name(name, &d) == TORC_OK, "unknown dtype '%s'", name);
    return d;
}

// Our message is PyTorch's followed by a hint to cast (" (cast explicitly with torc_to_dtype").
static void check_error(const golden_line *g, torc_status st, const char *file) {
    ck_assert_msg(st == TORC_ERR_DTYPE, "%s:%d: got %s, PyTorch raised '%s'", file, g->lineno,
                  torc_status_name(st), g->message);
    ck_assert_int_eq(torc_last_status(), TORC_ERR_DTYPE);
    const char *msg = torc_last_error();
    ck_assert_msg(strncmp(msg, g->message, strlen(g->message)) == 0,
                  "%s:%d: message '%s' does not start with PyTorch's '%s'", file, g->lineno, msg,
                  g->message);
    ck_assert_msg(strstr(msg, "torc_to_dtype") != NULL, "%s:%d: no cast hint in '%s'", file,
                  g->lineno, msg);
}

// ---- promote_types ----
START_TEST(promote_types_every_pair) {
    golden_table t = read_table("promotion_promote_types.txt");
    ck_assert_int_eq(t.n, TORC_DTYPE_COUNT * TORC_DTYPE_COUNT);
    int errors = 0;
    for (int i = 0; i < t.n; i++) {
        const golden_line *g = &t.lines[i];
        ck_assert_int_eq(g->n_ops, 2);
        torc_dtype a = dtype_of(g->ops[0]), b = dtype_of(g->ops[1]), out = TORC_DTYPE_COUNT;
        torc_clear_error();
        torc_status st = torc_promote_types(a, b, &out);
        if (g->error) {
            check_error(g, st, "promotion_promote_types.txt");
            ck_assert_int_eq(out, TORC_DTYPE_COUNT);  // untouched on error
            errors++;
        } else {
            ck_assert_msg(st == TORC_OK, "line %d: %s %s failed: %s", g->lineno, g->ops[0],
                          g->ops[1], torc_last_error());
            ck_assert_msg(out == dtype_of(g->result), "line %d: %s + %s -> %s, PyTorch %s",
                          g->lineno, g->ops[0], g->ops[1], torc_dtype_name(out), g->result);
        }
    }
    free(t.lines);
    ck_assert_int_eq(errors, 2 * 2 * (TORC_DTYPE_COUNT - 1) - 2);  // fp8 with any other dtype
}
END_TEST

START_TEST(promote_types_named_cases) {
    torc_dtype out;
    ck_assert_int_eq(torc_promote_types(TORC_DTYPE_F16, TORC_DTYPE_BF16, &out), TORC_OK);
    ck_assert_int_eq(out, TORC_DTYPE_F32);
    ck_assert_int_eq(torc_promote_types(TORC_DTYPE_U8, TORC_DTYPE_I8, &out), TORC_OK);
    ck_assert_int_eq(out, TORC_DTYPE_I16);
    ck_assert_int_eq(torc_promote_types(TORC_DTYPE_BOOL, TORC_DTYPE_U8, &out), TORC_OK);
    ck_assert_int_eq(out, TORC_DTYPE_U8);
    ck_assert_int_eq(torc_promote_types(TORC_DTYPE_I64, TORC_DTYPE_F16, &out), TORC_OK);
    ck_assert_int_eq(out, TORC_DTYPE_F16);
    ck_assert_int_eq(torc_promote_types(TORC_DTYPE_F8_E5M2, TORC_DTYPE_F8_E5M2, &out), TORC_OK);
    ck_assert_int_eq(out, TORC_DTYPE_F8_E5M2);
}
END_TEST

START_TEST(fp8_mixing_is_an_error_that_says_to_cast) {
    torc_dtype out = TORC_DTYPE_I8;
    torc_clear_error();
    ck_assert_int_eq(torc_promote_types(TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F32, &out), TORC_ERR_DTYPE);
    ck_assert_int_eq(out, TORC_DTYPE_I8);
    ck_assert_int_eq(torc_last_status(), TORC_ERR_DTYPE);
    ck_assert_str_eq(torc_last_error(),
                     "Promotion for Float8 Types is not supported, attempted to promote "
                     "Float8_e4m3fn and Float (cast explicitly with torc_to_dtype first)");
    ck_assert_int_eq(torc_promote_types(TORC_DTYPE_BOOL, TORC_DTYPE_F8_E5M2, &out), TORC_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "promote Bool and Float8_e5m2"));
    ck_assert_int_eq(torc_promote_types(TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E5M2, &out),
                     TORC_ERR_DTYPE);
}
END_TEST

START_TEST(promote_types_bad_arguments) {
    torc_dtype out;
    ck_assert_int_eq(torc_promote_types((torc_dtype)TORC_DTYPE_COUNT, TORC_DTYPE_F32, &out),
                     TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_promote_types(TORC_DTYPE_F32, (torc_dtype)-1, &out), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_promote_types(TORC_DTYPE_F32, TORC_DTYPE_F32, NULL), TORC_ERR_INVALID_ARG);
}
END_TEST

// ---- result_type ----
// Builds the operands of one golden line: t:DTYPE a 1-D tensor of 2, z:DTYPE a zero-dim tensor,
// s:int / s:float / s:bool the Python scalars 2, 2.5, True.
typedef struct operands {
    torc_tensor *tensors[4];
    int n_tensors;
    torc_scalar scalars[4];
    int n_scalars;
} operands;

static void build_operands(const golden_line *g, int first, operands *o) {
    memset(o, 0, sizeof *o);
    for (int k = first; k < g->n_ops; k++) {
        const char *tok = g->ops[k];
        ck_assert_msg(strlen(tok) > 2 && tok[1] == ':', "line %d: bad operand '%s'", g->lineno, tok);
        if (tok[0] == 's') {
            torc_scalar s;
            if (strcmp(tok + 2, "int") == 0) s = torc_s(2);
            else if (strcmp(tok + 2, "float") == 0) s = torc_s(2.5);
            else if (strcmp(tok + 2, "bool") == 0) s = torc_scalar_b(true);  // C11 true is an int
            else ck_abort_msg("line %d: bad scalar '%s'", g->lineno, tok);
            o->scalars[o->n_scalars++] = s;
        } else {
            torc_dtype d = dtype_of(tok + 2);
            torc_tensor *t = tok[0] == 't' ? torc_zeros(TORC_SHAPE(2), d) : torc_scalar_tensor(0, d);
            ck_assert_msg(t != NULL, "line %d: cannot create %s: %s", g->lineno, tok,
                          torc_last_error());
            ck_assert_int_eq(torc_ndim(t), tok[0] == 't' ? 1 : 0);
            o->tensors[o->n_tensors++] = t;
        }
    }
}

static void release_operands(operands *o) {
    for (int k = 0; k < o->n_tensors; k++) torc_release(o->tensors[k]);
}

START_TEST(result_type_golden) {
    golden_table t = read_table("promotion_result_type.txt");
    ck_assert_int_gt(t.n, 1000);
    int errors = 0;
    for (int i = 0; i < t.n; i++) {
        const golden_line *g = &t.lines[i];
        ck_assert_int_ge(g->n_ops, 3);
        ck_assert_int_eq(torc_set_default_dtype(dtype_of(g->ops[0])), TORC_OK);
        operands o;
        build_operands(g, 1, &o);
        torc_dtype out = TORC_DTYPE_COUNT;
        torc_clear_error();
        torc_status st = torc_result_type(o.n_tensors, (const torc_tensor *const *)o.tensors,
                                          o.n_scalars, o.scalars, &out);
        release_operands(&o);
        if (g->error) {
            check_error(g, st, "promotion_result_type.txt");
            ck_assert_int_eq(out, TORC_DTYPE_COUNT);
            errors++;
        } else {
            ck_assert_msg(st == TORC_OK, "line %d: failed: %s", g->lineno, torc_last_error());
            ck_assert_msg(out == dtype_of(g->result), "line %d: default %s, %s %s %s -> %s, "
                          "PyTorch %s", g->lineno, g->ops[0], g->ops[1], g->ops[2],
                          g->n_ops > 3 ? g->ops[3] : "", torc_dtype_name(out), g->result);
        }
    }
    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_F32), TORC_OK);
    free(t.lines);
    ck_assert_int_gt(errors, 0);
}
END_TEST

// The examples of the design, spelled out.
static torc_dtype rt(int nt, torc_tensor *const *ts, int ns, const torc_scalar *ss) {
    torc_dtype out = TORC_DTYPE_COUNT;
    ck_assert_msg(torc_result_type(nt, (const torc_tensor *const *)ts, ns, ss, &out) == TORC_OK,
                  "%s", torc_last_error());
    return out;
}

START_TEST(result_type_named_cases) {
    torc_tensor *i32 = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_I32);
    torc_tensor *u8 = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_U8);
    torc_tensor *f16 = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F16);
    torc_tensor *b = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_BOOL);
    torc_tensor *z_i64 = torc_scalar_tensor(7, TORC_DTYPE_I64);
    torc_tensor *z_f32 = torc_scalar_tensor(7, TORC_DTYPE_F32);
    ck_assert(i32 && u8 && f16 && b && z_i64 && z_f32);

    torc_scalar f = torc_s(2.5), i = torc_s(2), tr = torc_s((bool)1);
    ck_assert_int_eq(rt(1, &i32, 1, &f), TORC_DTYPE_F32);   // int32 tensor * 2.5
    ck_assert_int_eq(rt(1, &i32, 1, &i), TORC_DTYPE_I32);   // int32 tensor * 2
    ck_assert_int_eq(rt(1, &b, 1, &i), TORC_DTYPE_I64);     // bool tensor + 2
    ck_assert_int_eq(rt(1, &b, 1, &tr), TORC_DTYPE_BOOL);
    torc_tensor *pair[2] = {u8, z_i64};
    ck_assert_int_eq(rt(2, pair, 0, NULL), TORC_DTYPE_U8);  // uint8 + int64 zero-dim
    pair[0] = f16, pair[1] = z_f32;
    ck_assert_int_eq(rt(2, pair, 0, NULL), TORC_DTYPE_F16); // f16 + f32 zero-dim
    pair[0] = z_f32, pair[1] = f16;
    ck_assert_int_eq(rt(2, pair, 0, NULL), TORC_DTYPE_F16); // order does not matter
    pair[0] = i32, pair[1] = z_f32;
    ck_assert_int_eq(rt(2, pair, 0, NULL), TORC_DTYPE_F32); // a zero-dim float lifts the category
    torc_scalar two[2] = {torc_s(2), torc_s(2.5)};
    ck_assert_int_eq(rt(0, NULL, 2, two), TORC_DTYPE_F32);  // scalars alone

    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_F64), TORC_OK);
    ck_assert_int_eq(rt(1, &i32, 1, &f), TORC_DTYPE_F64);   // the float scalar is the default
    ck_assert_int_eq(rt(1, &f16, 1, &f), TORC_DTYPE_F16);   // but never widens a float tensor
    ck_assert_int_eq(torc_set_default_dtype(TORC_DTYPE_F32), TORC_OK);

    torc_release(i32), torc_release(u8), torc_release(f16), torc_release(b);
    torc_release(z_i64), torc_release(z_f32);
}
END_TEST

START_TEST(result_type_fp8) {
    torc_tensor *e4 = torc_zeros(TORC_SHAPE(2), TORC_DTYPE_F8_E4M3FN);
    torc_tensor *f32 = torc_zeros(TORC_SHAPE(2), TORC_DTYPE_F32);
    torc_tensor *z_f32 = torc_scalar_tensor(1, TORC_DTYPE_F32);
    ck_assert(e4 && f32 && z_f32);
    torc_scalar f = torc_s(2.5);
    ck_assert_int_eq(rt(1, &e4, 1, &f), TORC_DTYPE_F8_E4M3FN);  // a scalar never lifts fp8
    torc_tensor *pair[2] = {e4, z_f32};
    ck_assert_int_eq(rt(2, pair, 0, NULL), TORC_DTYPE_F8_E4M3FN);

    torc_dtype out = TORC_DTYPE_I8;
    pair[1] = f32;
    torc_clear_error();
    ck_assert_int_eq(torc_result_type(2, (const torc_tensor *const *)pair, 0, NULL, &out),
                     TORC_ERR_DTYPE);
    ck_assert_int_eq(out, TORC_DTYPE_I8);
    ck_assert_str_eq(torc_last_error(),
                     "Promotion for Float8 Types is not supported, attempted to promote "
                     "Float8_e4m3fn and Float (cast explicitly with torc_to_dtype first)");
    torc_release(e4), torc_release(f32), torc_release(z_f32);
}
END_TEST

START_TEST(result_type_bad_arguments) {
    torc_dtype out = TORC_DTYPE_I8;
    torc_scalar bad = {TORC_DTYPE_F32, 1.0, 1};
    torc_tensor *none[1] = {NULL};
    ck_assert_int_eq(torc_result_type(0, NULL, 0, NULL, &out), TORC_ERR_INVALID_ARG);
    torc_clear_error();  // a NULL argument keeps an error already set
    ck_assert_int_eq(torc_result_type(1, (const torc_tensor *const *)none, 0, NULL, &out),
                     TORC_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "tensor 0 is NULL"));
    ck_assert_int_eq(torc_result_type(0, NULL, 1, &bad, &out), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_result_type(-1, NULL, 0, NULL, &out), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_result_type(1, NULL, 0, NULL, &out), TORC_ERR_INVALID_ARG);
    torc_scalar i = torc_s(1);
    ck_assert_int_eq(torc_result_type(0, NULL, 1, &i, NULL), TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(out, TORC_DTYPE_I8);
}
END_TEST

int main(void) {
    Suite *s = suite_create("promotion");
    TCase *pt = tcase_create("promote_types");
    tcase_add_test(pt, promote_types_every_pair);
    tcase_add_test(pt, promote_types_named_cases);
    tcase_add_test(pt, fp8_mixing_is_an_error_that_says_to_cast);
    tcase_add_test(pt, promote_types_bad_arguments);
    suite_add_tcase(s, pt);
    TCase *rtc = tcase_create("result_type");
    tcase_set_timeout(rtc, 60);
    tcase_add_test(rtc, result_type_golden);
    tcase_add_test(rtc, result_type_named_cases);
    tcase_add_test(rtc, result_type_fp8);
    tcase_add_test(rtc, result_type_bad_arguments);
    suite_add_tcase(s, rtc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
