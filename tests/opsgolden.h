// tests/opsgolden.h — reads the op golden cases of tests/golden/ops_*.txt (written from PyTorch by
// tools/golden/gen_ops_golden.py, whose docstring has the format), builds their inputs and checks results.
#ifndef TORC_OPSGOLDEN_H
#define TORC_OPSGOLDEN_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "testutil.h"
#include "torc/convert.h"

#define OG_MAX_IN 4
#define OG_MAX_VIEWS 4

typedef struct og_values {  // a tensor's dtype, shape and row-major values
    torc_dtype dtype;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    int64_t n;
    double *v;
} og_values;

typedef struct og_view {
    char name[16];  // transpose, slice, expand, permute, select, unsqueeze
    int nargs;
    int64_t args[TORC_MAX_DIMS + 1];
} og_view;

typedef struct og_input {  // a contiguous base tensor and the views applied to it
    og_values base;
    int nviews;
    og_view views[OG_MAX_VIEWS];
} og_input;

typedef struct og_case {
    const char *file;
    int line;             // of the "case" line, for messages
    char op[32];
    char params[160];     // " key=value key=value" as written
    int nin;
    og_input in[OG_MAX_IN];
    int nsc;
    torc_scalar sc[2];
    bool has_out, has_base;
    og_values out, base;  // expected result; in-place: self afterwards and its base
    char error[512];      // PyTorch's message when the op must fail, else ""
} og_case;

typedef struct og_file {
    int n;
    og_case *cases;
} og_file;

// ---- parsing ----
static inline bool og__dtype(const char *s, torc_dtype *d) { return torc_dtype_from_name(s, d) == TORC_OK; }

// Parses "DTYPE SHAPE VALUE..." (after the tag) into v; false on malformed text.
static inline bool og__values(char *s, og_values *v) {
    char *save = NULL, *tok = strtok_r(s, " ", &save);
    if (!tok || !og__dtype(tok, &v->dtype)) return false;
    if (!(tok = strtok_r(NULL, " ", &save))) return false;
    v->ndim = 0;
    if (strcmp(tok, "-") != 0) {
        for (char *p = tok; *p;) {
            if (v->ndim == TORC_MAX_DIMS) return false;
            v->shape[v->ndim++] = strtoll(p, &p, 10);
            if (*p == ',') p++;
        }
    }
    v->n = 1;
    for (int i = 0; i < v->ndim; i++) v->n *= v->shape[i];
    v->v = malloc(sizeof(double) * (size_t)(v->n ? v->n : 1));
    for (int64_t i = 0; i < v->n; i++) {
        if (!(tok = strtok_r(NULL, " ", &save))) return false;
        v->v[i] = strtod(tok, NULL);
    }
    return strtok_r(NULL, " ", &save) == NULL;
}

static inline void og_free(og_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) {
        og_case *c = &f->cases[i];
        for (int k = 0; k < c->nin; k++) free(c->in[k].base.v);
        if (c->has_out) free(c->out.v);
        if (c->has_base) free(c->base.v);
    }
    free(f->cases);
    free(f);
}

// Reads $TORC_TEST_DATA/name; fails the running test on a missing or malformed file.
static inline og_file *og_load(const char *name) {
    FILE *fp = tu_open_golden(name, "r");
    og_file *f = calloc(1, sizeof *f);
    int cap = 0, lineno = 0;
    og_case *c = NULL;
    static char line[1 << 16];
    while (fgets(line, sizeof line, fp)) {
        lineno++;
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        char *rest = strchr(line, ' ');
        rest = rest ? (*rest = 0, rest + 1) : line + strlen(line);
        bool ok = true;
        if (!strcmp(line, "case")) {
            if (f->n == cap) f->cases = realloc(f->cases, sizeof *f->cases * (size_t)(cap = cap ? 2 * cap : 256));
            c = memset(&f->cases[f->n++], 0, sizeof *c);
            c->file = name;
            c->line = lineno;
            char *sp = strchr(rest, ' ');
            if (sp) snprintf(c->params, sizeof c->params, "%s", sp), *sp = 0;
            snprintf(c->op, sizeof c->op, "%s", rest);
        } else if (!c) {
            ok = false;
        } else if (!strcmp(line, "in")) {
            ok = c->nin < OG_MAX_IN && og__values(rest, &c->in[c->nin++].base);
        } else if (!strcmp(line, "view")) {
            og_input *in = &c->in[c->nin - 1];
            og_view *v = &in->views[in->nviews++];
            char *save = NULL, *tok = strtok_r(rest, " ", &save);
            snprintf(v->name, sizeof v->name, "%s", tok ? tok : "");
            while ((tok = strtok_r(NULL, " ", &save)) && v->nargs <= TORC_MAX_DIMS) v->args[v->nargs++] = strtoll(tok, NULL, 10);
        } else if (!strcmp(line, "scalar")) {
            const double x = strtod(rest + 2, NULL);
            c->sc[c->nsc++] = rest[0] == 'i' ? torc_scalar_i((int64_t)x) : rest[0] == 'b' ? torc_scalar_b(x != 0) : torc_scalar_f(x);
        } else if (!strcmp(line, "out")) {
            ok = og__values(rest, &c->out) && (c->has_out = true);
        } else if (!strcmp(line, "base")) {
            ok = og__values(rest, &c->base) && (c->has_base = true);
        } else if (!strcmp(line, "error")) {
            snprintf(c->error, sizeof c->error, "%s", rest);
        } else if (!strcmp(line, "end")) {
            c = NULL;
        } else {
            ok = false;
        }
        ck_assert_msg(ok, "%s:%d: malformed golden line", name, lineno);
    }
    fclose(fp);
    return f;
}

// ---- parameters ----
// The text after "key=" in the case's parameters, or NULL.
static inline const char *og_param(const og_case *c, const char *key) {
    char pat[40];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(c->params, pat);
    return p ? p + strlen(pat) : NULL;
}
static inline long long og_param_int(const og_case *c, const char *key, long long def) {
    const char *p = og_param(c, key);
    return p ? strtoll(p, NULL, 10) : def;
}
static inline double og_param_double(const og_case *c, const char *key, double def) {
    const char *p = og_param(c, key);
    return p ? strtod(p, NULL) : def;  // strtod reads "inf"
}
// dims=0,-1 into dims (returns the count); dims=all gives 0 (TORC_ALL_DIMS).
static inline int og_param_dims(const og_case *c, int *dims) {
    const char *p = og_param(c, "dims");
    if (!p || !strncmp(p, "all", 3)) return 0;
    int n = 0;
    for (char *e; *p && *p != ' '; p = *e == ',' ? e + 1 : e) dims[n++] = (int)strtol(p, &e, 10);
    return n;
}

// ---- building inputs ----
// Builds input k (in the current scope): the base from its values, then its views. *base gets the
// base tensor when not NULL. NULL (with torc's error) if a step fails.
static inline torc_tensor *og_build(const og_case *c, int k, torc_tensor **base) {
    const og_input *in = &c->in[k];
    torc_tensor *t = torc_tensor_from(in->base.v, in->base.ndim, in->base.shape, TORC_DTYPE_F64);
    if (t) t = torc_to_dtype(t, in->base.dtype);
    if (base) *base = t;
    for (int i = 0; t && i < in->nviews; i++) {
        const og_view *v = &in->views[i];
        const int64_t *a = v->args;
        if (!strcmp(v->name, "transpose")) t = torc_transpose(t, (int)a[0], (int)a[1]);
        else if (!strcmp(v->name, "slice")) t = torc_slice(t, (int)a[0], a[1], a[2], a[3]);
        else if (!strcmp(v->name, "expand")) t = torc_expand(t, v->nargs, a);
        else if (!strcmp(v->name, "select")) t = torc_select(t, (int)a[0], a[1]);
        else if (!strcmp(v->name, "unsqueeze")) t = torc_unsqueeze(t, (int)a[0]);
        else if (!strcmp(v->name, "permute")) {
            int d[TORC_MAX_DIMS];
            for (int j = 0; j < v->nargs; j++) d[j] = (int)a[j];
            t = torc_permute(t, v->nargs, d);
        } else {
            ck_abort_msg("%s:%d: unknown view %s", c->file, c->line, v->name);
        }
    }
    return t;
}

// ---- comparing ----
// How closely a floating result must match. Integers and bools always compare exactly.
typedef enum og_tol {
    OG_CLOSE = 0,  // a few float32 ulps; 1 ulp in f16/bf16 (PyTorch rounds through f32 first)
    OG_EXACT = 1,  // bit for bit: PyTorch and the reference both round the exact value once
    OG_LOOSE = 2,  // composites that PyTorch rounds at every step in f16/bf16 (logsumexp, softmax):
                   // 4 ulps, and near zero 4 ulps of 1 (log_softmax's x - lse cancels), while the
                   // reference computes in double and rounds once
} og_tol;
static inline void og_tolerance(torc_dtype d, int tol, double *rtol, double *atol) {
    const bool exact = tol == OG_EXACT, loose = tol == OG_LOOSE;
    const double ulps = loose ? 4 : 1;
    *rtol = *atol = 0;
    if (d == TORC_DTYPE_F64 && !exact) *rtol = *atol = 1e-12;
    if (d == TORC_DTYPE_F32 && !exact) *rtol = *atol = 2e-6;
    if (d == TORC_DTYPE_F16) *rtol = exact ? 0 : ulps * 0x1p-10, *atol = exact ? 0 : loose ? 4 * 0x1p-10 : 0x1p-14;
    if (d == TORC_DTYPE_BF16) *rtol = exact ? 0 : ulps * 0x1p-7, *atol = exact ? 0 : loose ? 4 * 0x1p-7 : 0x1p-10;
}

// The expected value as the dtype holds it (float32 values are written with the fewest digits
// that read back as the same float32).
static inline double og_round(double y, torc_dtype d) {
    if (d == TORC_DTYPE_F32) return (float)y;
    if (d == TORC_DTYPE_F16) return torc_f16_to_f32(torc_f32_to_f16((float)y));
    if (d == TORC_DTYPE_BF16) return torc_bf16_to_f32(torc_f32_to_bf16((float)y));
    return y;
}

// Describes the case on stderr (once per failing case).
static inline void og_describe(const og_case *c, const char *what) {
    fprintf(stderr, "%s:%d: case %s%s: %s\n", c->file, c->line, c->op, c->params, what);
}

// Compares t with expected (dtype, shape, values); prints the first difference and returns false.
static inline bool og_match(const og_case *c, const char *label, torc_tensor *t, const og_values *e, int tol) {
    char msg[600];
    if (!t) {
        snprintf(msg, sizeof msg, "%s: failed: %s", label, torc_last_error());
        og_describe(c, msg);
        return false;
    }
    if (torc_get_dtype(t) != e->dtype) {
        snprintf(msg, sizeof msg, "%s: dtype %s, expected %s", label, torc_dtype_name(torc_get_dtype(t)),
                 torc_dtype_name(e->dtype));
        og_describe(c, msg);
        return false;
    }
    bool same = torc_ndim(t) == e->ndim;
    for (int i = 0; same && i < e->ndim; i++) same = torc_shape(t)[i] == e->shape[i];
    if (!same) {
        char b[200] = "";
        for (int i = 0; i < torc_ndim(t); i++) snprintf(b + strlen(b), sizeof b - strlen(b), "%lld,", (long long)torc_shape(t)[i]);
        snprintf(msg, sizeof msg, "%s: shape [%s] (ndim %d), expected ndim %d", label, b, torc_ndim(t), e->ndim);
        og_describe(c, msg);
        return false;
    }
    double rtol, atol;
    og_tolerance(e->dtype, tol, &rtol, &atol);
    double *v = tu_values(t);
    bool ok = true;
    for (int64_t i = 0; ok && i < e->n; i++) {
        const double x = v[i], y = og_round(e->v[i], e->dtype);
        ok = (isnan(x) && isnan(y)) || x == y || (isfinite(x) && isfinite(y) && fabs(x - y) <= fmax(rtol * fabs(y), atol));
        if (!ok) {
            snprintf(msg, sizeof msg, "%s: element %lld is %.9g, expected %.9g (dtype %s)", label, (long long)i, x, y,
                     torc_dtype_name(e->dtype));
            og_describe(c, msg);
        }
    }
    free(v);
    return ok;
}

// Checks that the last call failed with PyTorch's message (a substring of torc's).
static inline bool og_failed_as_expected(const og_case *c, const void *result_or_null, torc_status st) {
    char msg[1200];
    if (result_or_null != NULL || st == TORC_OK) {
        snprintf(msg, sizeof msg, "succeeded, expected the error \"%s\"", c->error);
        og_describe(c, msg);
        return false;
    }
    if (!strstr(torc_last_error(), c->error)) {
        snprintf(msg, sizeof msg, "message \"%s\" (%s), expected \"%s\"", torc_last_error(),
                 torc_status_name(torc_last_status()), c->error);
        og_describe(c, msg);
        return false;
    }
    return true;
}

// Runs every case of file whose op is `op` (or all with op NULL) through run(c, inputs), which
// returns the result tensor, and checks it with tolerance tol (og_tol); the test fails at the end with the number of bad
// cases (each is described on stderr). Returns the number of cases run.
typedef torc_tensor *(*og_runner)(const og_case *c, torc_tensor **in);
static inline int og_run_cases(const char *file, const char *op, og_runner run, int tol) {
    og_file *f = og_load(file);
    int ran = 0, bad = 0;
    for (int i = 0; i < f->n; i++) {
        const og_case *c = &f->cases[i];
        if (op && strcmp(c->op, op) != 0) continue;
        ran++;
        torc_scope_push();
        torc_tensor *in[OG_MAX_IN];
        bool ok = true;
        for (int k = 0; ok && k < c->nin; k++) ok = (in[k] = og_build(c, k, NULL)) != NULL;
        if (!ok) {
            og_describe(c, torc_last_error());
        } else {
            torc_clear_error();
            torc_tensor *r = run(c, in);
            ok = c->error[0] ? og_failed_as_expected(c, r, r ? TORC_OK : torc_last_status())
                             : og_match(c, "result", r, &c->out, tol);
        }
        bad += !ok;
        torc_scope_pop();
    }
    og_free(f);
    ck_assert_msg(ran > 0, "%s: no cases for op %s", file, op ? op : "(any)");
    ck_assert_msg(bad == 0, "%s: %d of %d %s cases failed (details on stderr)", file, bad, ran, op ? op : "");
    return ran;
}

// In-place ops: run(c, self, in) mutates self (in[0], a view of base) and returns its status.
// Success: self and its base hold the expected values and the version went up. Failure: the
// error matches and the base and version are unchanged.
typedef torc_status (*og_runner_)(const og_case *c, torc_tensor *self, torc_tensor **in);
static inline int og_run_inplace_cases(const char *file, const char *op, og_runner_ run, int tol) {
    og_file *f = og_load(file);
    int ran = 0, bad = 0;
    for (int i = 0; i < f->n; i++) {
        const og_case *c = &f->cases[i];
        if (op && strcmp(c->op, op) != 0) continue;
        ran++;
        torc_scope_push();
        torc_tensor *in[OG_MAX_IN], *base = NULL;
        bool ok = true;
        for (int k = 0; ok && k < c->nin; k++) ok = (in[k] = og_build(c, k, k == 0 ? &base : NULL)) != NULL;
        if (!ok) {
            og_describe(c, torc_last_error());
        } else {
            const uint64_t v0 = torc_version(in[0]);
            torc_clear_error();
            const torc_status st = run(c, in[0], in);
            if (c->error[0]) {
                ok = og_failed_as_expected(c, NULL, st) && og_match(c, "base after the failure", base, &c->base, OG_EXACT);
                if (ok && torc_version(in[0]) != v0) og_describe(c, "version changed by a failed op"), ok = false;
            } else if (st != TORC_OK) {
                char msg[600];
                snprintf(msg, sizeof msg, "failed: %s", torc_last_error());
                og_describe(c, msg);
                ok = false;
            } else {
                ok = og_match(c, "self", in[0], &c->out, tol) && og_match(c, "base", base, &c->base, tol);
                if (ok && torc_version(in[0]) <= v0) og_describe(c, "version not bumped"), ok = false;
            }
        }
        bad += !ok;
        torc_scope_pop();
    }
    og_free(f);
    ck_assert_msg(ran > 0, "%s: no cases for op %s", file, op ? op : "(any)");
    ck_assert_msg(bad == 0, "%s: %d of %d %s cases failed (details on stderr)", file, bad, ran, op ? op : "");
    return ran;
}

#endif
