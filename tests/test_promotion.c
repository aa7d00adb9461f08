// tests/test_promotion.c — type promotion against PyTorch's goldens: every promote_types pair
// and the fp8 error (code and message).
#define _POSIX_C_SOURCE 200809L  // strtok_r, pthreads
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

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
    const char *dir = getenv("TORC_TEST_DATA");
    ck_assert_msg(dir != NULL, "TORC_TEST_DATA is not set (run the suite through ctest)");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
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

int main(void) {
    Suite *s = suite_create("promotion");
    TCase *pt = tcase_create("promote_types");
    tcase_add_test(pt, promote_types_every_pair);
    tcase_add_test(pt, promote_types_named_cases);
    tcase_add_test(pt, fp8_mixing_is_an_error_that_says_to_cast);
    tcase_add_test(pt, promote_types_bad_arguments);
    suite_add_tcase(s, pt);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
