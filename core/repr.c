// core/repr.c — the printer: output shaped like PyTorch's repr (torch/_tensor_str.py), with
// its int/fixed/scientific formatting choice, line wrapping, summarisation and suffixes.
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} sbuf;

static void put(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *s, const char *fmt, ...) {
    if (s->oom) return;
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(s->buf ? s->buf + s->len : NULL, s->cap - s->len, fmt, ap);  // (no NULL + 0)
        va_end(ap);
        if (n < 0) { s->oom = true; return; }
        if (s->len + (size_t)n < s->cap) { s->len += (size_t)n; return; }
        size_t nc = (s->cap + (size_t)n + 1) * 2;
        char *nb = realloc(s->buf, nc);
        if (!nb) { s->oom = true; return; }
        s->buf = nb, s->cap = nc;
    }
}

typedef struct {
    bool floating, is_bool, int_mode, sci_mode;
    int width;
} formatter;

static int fmt_value(const formatter *f, double v, char *out, size_t n) {
    if (f->is_bool) return snprintf(out, n, "%s", v != 0 ? "True" : "False");
    // (an int64 element near INT64_MAX reads as 2^63, one past what the cast may take)
    if (!f->floating) return snprintf(out, n, "%lld", v >= 0x1p63 ? LLONG_MAX : (long long)v);
    if (isnan(v)) return snprintf(out, n, "nan");
    if (isinf(v)) return snprintf(out, n, v > 0 ? "inf" : "-inf");
    if (f->sci_mode) return snprintf(out, n, "%.4e", v);
    if (f->int_mode) return snprintf(out, n, "%.0f.", v);
    return snprintf(out, n, "%.4f", v);
}

static void make_formatter(formatter *f, torc_dtype dt, const double *v, int64_t n) {
    memset(f, 0, sizeof *f);
    f->floating = torc_dtype_is_floating(dt);
    f->is_bool = dt == TORC_DTYPE_BOOL;
    f->width = 1;
    char tmp[64];
    if (!f->floating) {
        for (int64_t i = 0; i < n; i++) {
            int w = fmt_value(f, v[i], tmp, sizeof tmp);
            if (w > f->width) f->width = w;
        }
        return;
    }
    f->int_mode = true;
    double mn = INFINITY, mx = 0;
    bool any = false;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i]) || v[i] == 0) continue;
        any = true;
        const double a = fabs(v[i]);
        if (a < mn) mn = a;
        if (a > mx) mx = a;
        if (v[i] != ceil(v[i])) f->int_mode = false;
    }
    if (any) {
        if (f->int_mode) f->sci_mode = mx / mn > 1000.0 || mx > 1.0e8;
        else f->sci_mode = mx / mn > 1000.0 || mx > 1.0e8 || mn < 1.0e-4;
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(v[i]) || v[i] == 0) continue;
            int w = fmt_value(f, v[i], tmp, sizeof tmp);
            if (w > f->width) f->width = w;
        }
    }
    // Non-finite values are padded to the same width but do not choose the mode.
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) {
            int w = fmt_value(f, v[i], tmp, sizeof tmp);
            if (w > f->width) f->width = w;
        }
}

#define EDGE 3
#define THRESHOLD 1000
#define LINEWIDTH 80

// Which indices of a dim of size n are shown (all, or the first and last EDGE).
static int shown(int64_t n, bool summarize, int64_t *idx) {
    int k = 0;
    if (summarize && n > 2 * EDGE) {
        for (int64_t i = 0; i < EDGE; i++) idx[k++] = i;
        idx[k++] = -1;  // the "..." marker
        for (int64_t i = n - EDGE; i < n; i++) idx[k++] = i;
    } else {
        for (int64_t i = 0; i < n; i++) idx[k++] = i;
    }
    return k;
}

static void emit(sbuf *s, const formatter *f, const double *v, const torc_tensor *t, int dim, int64_t base,
                 const int64_t *cstride, int indent, bool summarize) {
    char tmp[64];
    const int64_t n = t->shape[dim];
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n > 2 * EDGE + 1 ? n : 2 * EDGE + 1));
    if (!idx) { s->oom = true; return; }
    const int k = shown(n, summarize, idx);
    put(s, "[");
    if (dim == t->ndim - 1) {
        const int elem_len = f->width + 2;
        int per_line = (LINEWIDTH - indent) / elem_len;
        if (per_line < 1) per_line = 1;
        for (int j = 0; j < k; j++) {
            if (j) put(s, (j % per_line) ? ", " : ",\n%*s", (j % per_line) ? 0 : indent + 1, "");
            if (idx[j] < 0) { put(s, "..."); continue; }
            int w = fmt_value(f, v[base + idx[j] * cstride[dim]], tmp, sizeof tmp);
            put(s, "%*s%s", f->width - w, "", tmp);
        }
    } else {
        for (int j = 0; j < k; j++) {
            if (j) {
                put(s, ",\n");
                for (int b = 0; b < t->ndim - dim - 2; b++) put(s, "\n");
                put(s, "%*s", indent + 1, "");
            }
            if (idx[j] < 0) { put(s, "..."); continue; }
            emit(s, f, v, t, dim + 1, base + idx[j] * cstride[dim], cstride, indent + 1, summarize);
        }
    }
    put(s, "]");
    free(idx);
}

char *torc_repr(const torc_tensor *t) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    const int64_t n = torc_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!v) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of memory");
    // Read the values as f64 (or i64 for integers, exact) in row-major order.
    const bool fl = torc_dtype_is_floating(t->dtype);
    torc_tensor *c = n ? torc__copy_as(t, fl ? TORC_DTYPE_F64 : TORC_DTYPE_I64) : NULL;
    if (n && (!c || torc_copy_to_host(c, v, sizeof(double) * (size_t)n))) {
        torc_release(c);
        free(v);
        return NULL;
    }
    torc_release(c);
    if (!fl)
        for (int64_t i = 0; i < n; i++) {
            int64_t iv;
            memcpy(&iv, &v[i], sizeof iv);
            v[i] = (double)iv;
        }
    sbuf s = {0};
    const bool summarize = n > THRESHOLD;
    formatter f;
    // The formatter sees only the values that will be printed, as PyTorch's does.
    make_formatter(&f, t->dtype, v, n);
    put(&s, "tensor(");
    if (n == 0) {
        put(&s, "[]");
    } else if (t->ndim == 0) {
        char tmp[64];
        fmt_value(&f, v[0], tmp, sizeof tmp);
        put(&s, "%s", tmp);
    } else {
        int64_t cstride[TORC_MAX_DIMS];
        torc__contiguous_strides(t->ndim, t->shape, cstride);
        emit(&s, &f, v, t, 0, 0, cstride, 7, summarize);
    }
    free(v);
    if (strcmp(t->device->name, "cpu") && !t->device->host_memory) put(&s, ", device='%s'", t->device->name);
    if (n == 0 && t->ndim != 1) {
        put(&s, ", size=(");
        for (int i = 0; i < t->ndim; i++) put(&s, i ? ", %lld" : "%lld", (long long)t->shape[i]);
        put(&s, t->ndim == 1 ? ",)" : ")");
    }
    if (t->dtype != torc_get_default_dtype() && t->dtype != TORC_DTYPE_I64 && t->dtype != TORC_DTYPE_BOOL)
        put(&s, ", dtype=torch.%s", torc_dtype_name(t->dtype));
    const char *fn = torc_grad_fn_name(t);
    if (fn) put(&s, ", grad_fn=<%s>", fn);
    else if (t->requires_grad) put(&s, ", requires_grad=True");
    put(&s, ")");
    if (s.oom) {
        free(s.buf);
        return TORC_FAIL_NULL(TORC_ERR_OOM, "out of memory");
    }
    return s.buf;
}

torc_status torc_print(const torc_tensor *t, FILE *f) {
    char *r = torc_repr(t);
    if (!r) return torc_last_status();
    fputs(r, f ? f : stdout);
    fputc('\n', f ? f : stdout);
    free(r);
    return TORC_OK;
}
