// tests/nngolden.h — reads tests/golden/nn_ops.txt (written from PyTorch by
// tools/golden/gen_nn_golden.py, whose docstring has the format): cases of named tensors, an
// op's parameters and PyTorch's error text, for the embedding, attention, loss and clip suites.
#ifndef TORC_NNGOLDEN_H
#define TORC_NNGOLDEN_H

#include <stdint.h>
#include <stdio.h>

#include "testutil.h"

#define NG_MAX_TENSORS 16

typedef struct ng_tensor {
    char tag[32];
    torc_dtype dtype;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    int64_t n;
    double *v;
} ng_tensor;

typedef struct ng_case {
    char name[64];
    char params[256];  // " key=value key=value" as written
    int nt;
    ng_tensor t[NG_MAX_TENSORS];
    char error[512];   // PyTorch's message when the call must fail, else ""
} ng_case;

typedef struct ng_file {
    int n;
    ng_case *cases;
} ng_file;

// Parses "DTYPE SHAPE VALUE..." into t; false on malformed text.
static inline bool ng__values(char *s, ng_tensor *t) {
    char *save = NULL, *tok = strtok_r(s, " ", &save);
    if (!tok || torc_dtype_from_name(tok, &t->dtype) != TORC_OK) return false;
    if (!(tok = strtok_r(NULL, " ", &save))) return false;
    t->ndim = 0;
    if (strcmp(tok, "-") != 0)
        for (char *p = tok; *p;) {
            if (t->ndim == TORC_MAX_DIMS) return false;
            t->shape[t->ndim++] = strtoll(p, &p, 10);
            if (*p == ',') p++;
        }
    t->n = 1;
    for (int i = 0; i < t->ndim; i++) t->n *= t->shape[i];
    t->v = malloc(sizeof(double) * (size_t)(t->n ? t->n : 1));
    for (int64_t i = 0; i < t->n; i++) {
        if (!(tok = strtok_r(NULL, " ", &save))) return false;
        t->v[i] = strtod(tok, NULL);
    }
    return strtok_r(NULL, " ", &save) == NULL;
}

// Reads $TORC_TEST_DATA/name; fails the running test on a missing or malformed file.
static inline ng_file *ng_load(const char *name) {
    FILE *fp = tu_open_golden(name, "r");
    ng_file *f = calloc(1, sizeof *f);
    int cap = 0, lineno = 0;
    ng_case *c = NULL;
    static char line[1 << 16];
    while (fgets(line, sizeof line, fp)) {
        lineno++;
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        char *rest = strchr(line, ' ');
        rest = rest ? (*rest = 0, rest + 1) : line + strlen(line);
        bool ok = true;
        if (!strcmp(line, "case")) {
            if (f->n == cap) f->cases = realloc(f->cases, sizeof *f->cases * (size_t)(cap = cap ? 2 * cap : 64));
            c = memset(&f->cases[f->n++], 0, sizeof *c);
            char *sp = strchr(rest, ' ');
            if (sp) snprintf(c->params, sizeof c->params, "%s", sp), *sp = 0;
            snprintf(c->name, sizeof c->name, "%s", rest);
        } else if (!c) {
            ok = false;
        } else if (!strcmp(line, "error")) {
            snprintf(c->error, sizeof c->error, "%s", rest);
        } else if (!strcmp(line, "end")) {
            c = NULL;
        } else {
            ok = c->nt < NG_MAX_TENSORS;
            if (ok) {
                ng_tensor *t = &c->t[c->nt++];
                snprintf(t->tag, sizeof t->tag, "%.31s", line);  // tags are short names
                ok = ng__values(rest, t);
            }
        }
        ck_assert_msg(ok, "%s:%d: malformed line", name, lineno);
    }
    fclose(fp);
    return f;
}

static inline void ng_free(ng_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++)
        for (int k = 0; k < f->cases[i].nt; k++) free(f->cases[i].t[k].v);
    free(f->cases);
    free(f);
}

static inline const ng_case *ng_find(const ng_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->cases[i].name, name)) return &f->cases[i];
    ck_abort_msg("golden case %s is missing", name);
    return NULL;
}

// The tensor tagged tag, or NULL.
static inline const ng_tensor *ng_get(const ng_case *c, const char *tag) {
    for (int i = 0; i < c->nt; i++)
        if (!strcmp(c->t[i].tag, tag)) return &c->t[i];
    return NULL;
}

// A parameter "key=value" of the case line (hex floats and integers alike), or dflt.
static inline double ng_param(const ng_case *c, const char *key, double dflt) {
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(c->params, pat);
    return p ? strtod(p + strlen(pat), NULL) : dflt;
}
static inline const char *ng_param_str(const ng_case *c, const char *key, char *buf, size_t n) {
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(c->params, pat);
    if (!p) return NULL;
    p += strlen(pat);
    size_t len = strcspn(p, " ");
    snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), p);
    return buf;
}

// The tensor as torc holds it, on the default device (scope-owned like any result).
static inline torc_tensor *ng_make(const ng_tensor *t) {
    ck_assert_ptr_nonnull(t);
    torc_tensor *d = torc_tensor_from(t->v, t->ndim, t->shape, TORC_DTYPE_F64);
    ck_assert_msg(d != NULL, "%s: %s", t->tag, torc_last_error());
    torc_tensor *r = t->dtype == TORC_DTYPE_F64 ? d : torc_to_dtype(d, t->dtype);
    ck_assert_msg(r != NULL, "%s: %s", t->tag, torc_last_error());
    return r;
}

// Asserts got has expect's shape and values: |got - expect| <= atol + rtol * |expect| (NaN
// matches NaN, infinities match exactly).
static inline void ng_assert_close_at(const char *file, int line, const char *what, torc_tensor *got,
                                      const ng_tensor *expect, double rtol, double atol) {
    ck_assert_msg(got != NULL, "%s:%d: %s is NULL (%s)", file, line, what, torc_last_error());
    tu_assert_dims_at(file, line, what, torc_ndim(got), torc_shape(got), expect->ndim, expect->shape);
    double *v = tu_values(got);
    for (int64_t i = 0; i < expect->n; i++) {
        const double e = expect->v[i];
        bool ok = (isnan(e) && isnan(v[i])) || v[i] == e || (isfinite(e) && fabs(v[i] - e) <= atol + rtol * fabs(e));
        ck_assert_msg(ok, "%s:%d: %s[%lld] is %.17g, expected %.17g", file, line, what, (long long)i, v[i], e);
    }
    free(v);
}
#define ng_assert_close(what, got, expect, rtol, atol) \
    ng_assert_close_at(__FILE__, __LINE__, (what), (got), (expect), (rtol), (atol))

// The two loop tests of a golden suite: run(cases[_i]) on the default device
// (golden_default_backend) and on the reference backend (golden_reference_backend), the default
// device restored after. Register them with tcase_add_loop_test(tc, golden_..., 0, N_CASES).
#define NG_GOLDEN_TESTS(run, cases)                                                  \
    START_TEST(golden_default_backend) { run(cases[_i]); }                           \
    END_TEST                                                                         \
    START_TEST(golden_reference_backend) {                                           \
        torc_device *def = torc_default_device();                                    \
        ck_assert_int_eq(torc_set_default_device(torc_device_get("reference")), TORC_OK); \
        run(cases[_i]);                                                              \
        torc_set_default_device(def);                                                \
    }                                                                                \
    END_TEST

#endif
