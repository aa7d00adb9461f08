// core/rearrange.c — einops' rearrange, reduce and repeat on torc tensors: the pattern parser,
// axis-length inference, and the split / reduce / permute / expand / merge steps as torc ops.
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "torc-impl.h"

// How a pattern is carried out (einops' TransformRecipe): the input is reshaped to its
// elementary axes (split; always a view), the axes missing on the right are reduced, the rest
// permuted into the right side's order, new axes inserted as stride-0 expansions, and groups
// on the right merged by one reshape (a view unless the strides forbid it). Each step runs
// only when it changes something, so a pure permutation is one permute view.

#define EO_MAX_AXES 64    // elementary axes in a pattern, ellipsis dims included
#define EO_MAX_GROUPS 64  // dims written on one side (before "..." is expanded)
#define EO_NAME_MAX 64
#define EO_ELLIPSIS (-1)  // an item standing for "..." before expansion

typedef enum eo_kind { EO_REARRANGE, EO_REDUCE, EO_REPEAT } eo_kind;

typedef struct eo_axis {
    char name[EO_NAME_MAX]; // identifier; "" for an anonymous axis; "...N" for ellipsis dims
    int64_t anon;           // the length written for an anonymous axis ("2"), else 0
    int64_t len;            // -1 while unknown
    bool given;             // length from the axes string
    bool left, right;       // the sides that name it
} eo_axis;

// One side of a pattern: groups of items (axis ids or EO_ELLIPSIS). A group written in
// parentheses (or "1", an empty group) is a composite dim; a bare name is a group of one.
typedef struct eo_side {
    int n_groups;
    int start[EO_MAX_GROUPS + 1]; // group g holds items[start[g] .. start[g+1])
    bool paren[EO_MAX_GROUPS];
    int n_items;
    int items[EO_MAX_AXES];
    bool has_ellipsis, ellipsis_in_paren, has_anon;
} eo_side;

typedef struct eo_ctx {
    const char *what;    // "rearrange", "sum", "repeat": einops' "<what>-reduction pattern"
    const char *pattern, *axes_str;
    const torc_tensor *x;
    int n_axes;
    eo_axis ax[EO_MAX_AXES];
} eo_ctx;

// Sets the error: einops' message with the pattern, shape and axes it was processing.
__attribute__((format(printf, 3, 4))) static bool eo_fail(const eo_ctx *c, torc_status st, const char *fmt, ...) {
    char detail[640], shape[TORC_SHAPE_STR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    torc__error(st, "Error while processing %s-reduction pattern \"%s\" (input shape %s%s%s%s): %s", c->what,
                c->pattern ? c->pattern : "", torc__shape_str(c->x->ndim, c->x->shape, shape, sizeof shape),
                c->axes_str && *c->axes_str ? ", axes \"" : "", c->axes_str && *c->axes_str ? c->axes_str : "",
                c->axes_str && *c->axes_str ? "\"" : "", detail);
    return false;
}

// einops prints a Python set: {'h', 'w'}; anonymous axes as 2-axis, "..." for ellipsis dims.
static const char *set_str(const eo_ctx *c, int n, const int *ids, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "{");
    for (int i = 0; i < n && k < cap; i++) {
        const eo_axis *a = &c->ax[ids[i]];
        if (a->anon) k += (size_t)snprintf(buf + k, cap - k, "%s%lld-axis", i ? ", " : "", (long long)a->anon);
        else k += (size_t)snprintf(buf + k, cap - k, "%s'%s'", i ? ", " : "", a->name[0] == '.' ? "..." : a->name);
    }
    if (k < cap) snprintf(buf + k, cap - k, "}");
    return buf;
}

#define EO_FAIL_NULL(...) (eo_fail(__VA_ARGS__), (torc_tensor *)NULL)

static int find_axis(const eo_ctx *c, const char *name, size_t len) {
    for (int i = 0; i < c->n_axes; i++)
        if (!c->ax[i].anon && strlen(c->ax[i].name) == len && !strncmp(c->ax[i].name, name, len)) return i;
    return -1;
}

static int new_axis(eo_ctx *c, const char *name, size_t len, int64_t anon) {
    if (c->n_axes == EO_MAX_AXES) return -1;
    eo_axis *a = &c->ax[c->n_axes];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%.*s", (int)len, name);
    a->anon = anon;
    a->len = anon ? anon : -1;
    return c->n_axes++;
}

// Checks one identifier as einops' ParsedExpression does; returns false with the error set.
static bool check_name(const eo_ctx *c, const char *s, size_t len) {
    const char *why = NULL;
    if (isdigit((unsigned char)s[0])) why = "not a valid identifier";
    else if (s[0] == '_' || s[len - 1] == '_') why = "axis name should not start or end with underscore";
    else if (len >= EO_NAME_MAX) why = "axis name is too long";
    if (!why) return true;
    return eo_fail(c, TORC_ERR_INVALID_ARG, "Invalid axis identifier: %.*s (%s)", (int)len, s, why);
}

// Adds one token (a name, a number, or the ellipsis) to the side being parsed.
static bool add_token(eo_ctx *c, eo_side *s, bool right, bool in_paren, const char *tok, size_t len) {
    int id;
    if (len == 3 && !memcmp(tok, "...", 3)) {
        id = EO_ELLIPSIS;
        s->has_ellipsis = true;
        s->ellipsis_in_paren = in_paren;
    } else {
        bool number = true;
        for (size_t i = 0; i < len; i++) number = number && isdigit((unsigned char)tok[i]);
        if (number) {
            int64_t v = 0;
            for (size_t i = 0; i < len; i++)
                if (!torc__size_mul(v, 10, &v) || !torc__size_add(v, tok[i] - '0', &v))
                    return eo_fail(c, TORC_ERR_INVALID_ARG, "Anonymous axis length %.*s is too large", (int)len, tok);
            if (v == 1) {
                // einops: an anonymous axis of length 1 is an empty group; inside one, nothing.
                if (in_paren) return true;
                if (s->n_groups == EO_MAX_GROUPS) return eo_fail(c, TORC_ERR_INVALID_ARG, "too many dims in pattern");
                s->paren[s->n_groups] = true;
                s->start[++s->n_groups] = s->n_items;
                return true;
            }
            if (v == 0) return eo_fail(c, TORC_ERR_INVALID_ARG, "Anonymous axis should have positive length, not 0");
            id = new_axis(c, tok, len, v);
            s->has_anon = true;
        } else {
            if (!check_name(c, tok, len)) return false;
            id = find_axis(c, tok, len);
            if (id >= 0 && (right ? c->ax[id].right : c->ax[id].left))
                return eo_fail(c, TORC_ERR_INVALID_ARG, "Indexing expression contains duplicate dimension \"%.*s\"",
                               (int)len, tok);
            if (id < 0) id = new_axis(c, tok, len, 0);
        }
        if (id < 0) return eo_fail(c, TORC_ERR_INVALID_ARG, "too many axes in pattern (at most %d)", EO_MAX_AXES);
        if (right) c->ax[id].right = true;
        else c->ax[id].left = true;
    }
    if (s->n_items == EO_MAX_AXES) return eo_fail(c, TORC_ERR_INVALID_ARG, "too many axes in pattern");
    s->items[s->n_items++] = id;
    if (!in_paren) {  // a bare token is a group of its own
        if (s->n_groups == EO_MAX_GROUPS) return eo_fail(c, TORC_ERR_INVALID_ARG, "too many dims in pattern");
        s->paren[s->n_groups] = false;
        s->start[++s->n_groups] = s->n_items;
    }
    return true;
}

// Parses one side ("b (h w) ..."), einops' ParsedExpression.
static bool parse_side(eo_ctx *c, eo_side *s, const char *p, const char *end, bool right) {
    memset(s, 0, sizeof *s);
    const char *const begin = p;
    int dots = 0;
    for (const char *q = p; q < end; q++) dots += *q == '.';
    if (dots) {
        const char *e = NULL;
        int n3 = 0;
        for (const char *q = p; q + 3 <= end; q++)
            if (!memcmp(q, "...", 3)) n3++, e = q;
        if (!e) return eo_fail(c, TORC_ERR_INVALID_ARG, "Expression may contain dots only inside ellipsis (...)");
        if (n3 != 1 || dots != 3)
            return eo_fail(c, TORC_ERR_INVALID_ARG,
                           "Expression may contain dots only inside ellipsis (...); only one ellipsis for tensor");
    }
    bool in_paren = false;
    while (p < end) {
        const char ch = *p;
        if (isspace((unsigned char)ch)) {
            p++;
        } else if (ch == '(') {
            if (in_paren)
                return eo_fail(c, TORC_ERR_INVALID_ARG,
                               "Axis composition is one-level (brackets inside brackets not allowed)");
            in_paren = true;
            p++;
        } else if (ch == ')') {
            if (!in_paren) return eo_fail(c, TORC_ERR_INVALID_ARG, "Brackets are not balanced");
            if (s->n_groups == EO_MAX_GROUPS) return eo_fail(c, TORC_ERR_INVALID_ARG, "too many dims in pattern");
            s->paren[s->n_groups] = true;
            s->start[++s->n_groups] = s->n_items;
            in_paren = false;
            p++;
        } else if (ch == '.') {
            if (!add_token(c, s, right, in_paren, p, 3)) return false;
            p += 3;
        } else if (isalnum((unsigned char)ch) || ch == '_') {
            const char *t = p;
            while (p < end && (isalnum((unsigned char)*p) || *p == '_')) p++;
            if (!add_token(c, s, right, in_paren, t, (size_t)(p - t))) return false;
        } else {
            return eo_fail(c, TORC_ERR_INVALID_ARG, "Unknown character '%c'", ch);
        }
    }
    if (in_paren)
        return eo_fail(c, TORC_ERR_INVALID_ARG, "Imbalanced parentheses in expression: \"%.*s\"", (int)(end - begin),
                       begin);
    return true;
}

// Parses "h=2, w=3" into the axes table (lengths for names the pattern uses).
static bool parse_axes(eo_ctx *c, const char *s) {
    if (!s) return true;
    char names[EO_MAX_AXES][EO_NAME_MAX];
    int64_t lens[EO_MAX_AXES];
    int n = 0;
    const char *p = s;
    for (;;) {
        while (*p && (isspace((unsigned char)*p) || *p == ',')) p++;
        if (!*p) break;
        const char *t = p;
        while (isalnum((unsigned char)*p) || *p == '_') p++;
        const size_t len = (size_t)(p - t);
        while (isspace((unsigned char)*p)) p++;
        if (len == 0 || *p != '=')
            return eo_fail(c, TORC_ERR_INVALID_ARG, "invalid axes lengths \"%s\": expected entries name=length "
                                                    "separated by commas", s);
        p++;
        while (isspace((unsigned char)*p)) p++;
        if (!isdigit((unsigned char)*p))
            return eo_fail(c, TORC_ERR_INVALID_ARG, "invalid axes lengths \"%s\": the length of %.*s is not a "
                                                    "non-negative integer", s, (int)len, t);
        int64_t v = 0;
        while (isdigit((unsigned char)*p)) {
            if (v > (INT64_MAX - 9) / 10)
                return eo_fail(c, TORC_ERR_INVALID_ARG, "invalid axes lengths \"%s\": length too large", s);
            v = v * 10 + (*p++ - '0');
        }
        if (*p && !isspace((unsigned char)*p) && *p != ',')
            return eo_fail(c, TORC_ERR_INVALID_ARG, "invalid axes lengths \"%s\": expected entries name=length "
                                                    "separated by commas", s);
        if (isdigit((unsigned char)t[0]) || t[0] == '_' || t[len - 1] == '_' || len >= EO_NAME_MAX)
            return eo_fail(c, TORC_ERR_INVALID_ARG, "Invalid name for an axis: %.*s", (int)len, t);
        for (int i = 0; i < n; i++)
            if (strlen(names[i]) == len && !strncmp(names[i], t, len))
                return eo_fail(c, TORC_ERR_INVALID_ARG, "Axis %.*s is given a length twice", (int)len, t);
        if (n == EO_MAX_AXES) return eo_fail(c, TORC_ERR_INVALID_ARG, "too many axes lengths");
        snprintf(names[n], sizeof names[n], "%.*s", (int)len, t);
        lens[n++] = v;
    }
    for (int i = 0; i < n; i++) {
        const int id = find_axis(c, names[i], strlen(names[i]));
        if (id < 0) return eo_fail(c, TORC_ERR_INVALID_ARG, "Axis %s is not used in transform", names[i]);
        c->ax[id].len = lens[i];
        c->ax[id].given = true;
    }
    return true;
}

// A side with "..." expanded into n_ell axes: groups of axis ids.
typedef struct eo_comp {
    int n_groups;
    int start[EO_MAX_AXES + 1];
    int ax[EO_MAX_AXES];
} eo_comp;

static bool expand_side(const eo_ctx *c, const eo_side *s, int n_ell, const int *ell_ids, eo_comp *out) {
    memset(out, 0, sizeof *out);
    int n = 0;
    for (int g = 0; g < s->n_groups; g++) {
        const int b = s->start[g], e = s->start[g + 1];
        if (!s->paren[g] && e - b == 1 && s->items[b] == EO_ELLIPSIS) {
            for (int k = 0; k < n_ell; k++) {
                if (out->n_groups == EO_MAX_AXES || n == EO_MAX_AXES) goto too_many;
                out->ax[n++] = ell_ids[k];
                out->start[++out->n_groups] = n;
            }
            continue;
        }
        if (out->n_groups == EO_MAX_AXES) goto too_many;
        for (int i = b; i < e; i++) {
            if (s->items[i] == EO_ELLIPSIS) {
                for (int k = 0; k < n_ell; k++) {
                    if (n == EO_MAX_AXES) goto too_many;
                    out->ax[n++] = ell_ids[k];
                }
            } else {
                if (n == EO_MAX_AXES) goto too_many;
                out->ax[n++] = s->items[i];
            }
        }
        out->start[++out->n_groups] = n;
    }
    return true;
too_many:
    return eo_fail(c, TORC_ERR_INVALID_ARG, "too many axes in pattern (at most %d)", EO_MAX_AXES);
}

static torc_tensor *apply_reduction(torc_tensor *t, const char *red, int n, const int *dims) {
    if (!strcmp(red, "sum")) return torc_sum(t, n, dims, false);
    if (!strcmp(red, "mean")) return torc_mean(t, n, dims, false);
    if (!strcmp(red, "max")) return torc_amax(t, n, dims, false);
    if (!strcmp(red, "min")) return torc_amin(t, n, dims, false);
    return torc_prod(t, n, dims, false);
}

// The three einops operations; reduction is NULL for rearrange and repeat.
static torc_tensor *einops_apply(torc_tensor *x, const char *pattern, eo_kind kind, const char *reduction,
                                 const char *axes) {
    if (!x) return TORC_NULL_ARG_FAIL("tensor is NULL");
    eo_ctx c = {.what = kind == EO_REARRANGE ? "rearrange" : kind == EO_REPEAT ? "repeat" : reduction,
                .pattern = pattern, .axes_str = axes, .x = x};
    if (kind == EO_REDUCE && !reduction) {
        c.what = "(null)";
        return torc_last_status() ? NULL : EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG, "reduction is NULL");
    }
    if (!pattern)  // torc__null_arg's rule: an error already set is kept
        return torc_last_status() ? NULL : EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG, "pattern is NULL");
    const char *arrow = strstr(pattern, "->");
    if (!arrow || strstr(arrow + 2, "->"))
        return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG, "Pattern must contain exactly one \"->\"");
    eo_side left, right;
    if (!parse_side(&c, &left, pattern, arrow, false)) return NULL;
    if (!parse_side(&c, &right, arrow + 2, pattern + strlen(pattern), true)) return NULL;

    char set[512];
    int ids[EO_MAX_AXES], n_ids = 0;
    if (!left.has_ellipsis && right.has_ellipsis)
        return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG, "Ellipsis found in right side, but not left side of a pattern %s",
                            pattern);
    if (left.has_ellipsis && left.ellipsis_in_paren)
        return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG, "Ellipsis inside parenthesis in the left side is not allowed: %s",
                            pattern);
    if (kind == EO_REARRANGE) {
        if (left.has_anon || right.has_anon)
            return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG,
                                "Non-unitary anonymous axes are not supported in rearrange (exception is length 1)");
        for (int i = 0; i < c.n_axes; i++)
            if (c.ax[i].left != c.ax[i].right) ids[n_ids++] = i;
        if (n_ids || left.has_ellipsis != right.has_ellipsis) {
            if (left.has_ellipsis != right.has_ellipsis) {
                int e = new_axis(&c, "...", 3, 0);
                if (e >= 0) ids[n_ids++] = e;
            }
            return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG,
                                "Identifiers only on one side of expression (should be on both): %s",
                                set_str(&c, n_ids, ids, set, sizeof set));
        }
    } else if (kind == EO_REPEAT) {
        for (int i = 0; i < c.n_axes; i++)
            if (c.ax[i].left && !c.ax[i].right) ids[n_ids++] = i;
        if (n_ids || (left.has_ellipsis && !right.has_ellipsis)) {
            if (left.has_ellipsis && !right.has_ellipsis) {
                int e = new_axis(&c, "...", 3, 0);
                if (e >= 0) ids[n_ids++] = e;
            }
            return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG, "Unexpected identifiers on the left side of repeat: %s",
                                set_str(&c, n_ids, ids, set, sizeof set));
        }
    } else {
        if (strcmp(reduction, "sum") && strcmp(reduction, "mean") && strcmp(reduction, "max") &&
            strcmp(reduction, "min") && strcmp(reduction, "prod"))
            return eo_fail(&c, TORC_ERR_INVALID_ARG,
                           "Unknown reduction %s. Expect one of ('min', 'max', 'sum', 'mean', 'prod').", reduction),
                   NULL;
        for (int i = 0; i < c.n_axes; i++)
            if (c.ax[i].right && !c.ax[i].left) ids[n_ids++] = i;
        if (n_ids)
            return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG, "Unexpected identifiers on the right side of reduce %s: %s",
                                reduction, set_str(&c, n_ids, ids, set, sizeof set));
    }

    // The lengths given in axes; new axes of repeat need one.
    if (!parse_axes(&c, axes)) return NULL;
    if (kind == EO_REPEAT) {
        n_ids = 0;
        for (int i = 0; i < c.n_axes; i++)
            if (c.ax[i].right && !c.ax[i].left && !c.ax[i].anon && !c.ax[i].given) ids[n_ids++] = i;
        if (n_ids)
            return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG, "Specify sizes for new axes in repeat: %s",
                                set_str(&c, n_ids, ids, set, sizeof set));
    }

    // Number of dims: "..." takes what the named groups leave.
    const int n_named = left.n_groups - (left.has_ellipsis ? 1 : 0);
    if (left.has_ellipsis ? x->ndim < n_named : x->ndim != n_named)
        return EO_FAIL_NULL(&c, TORC_ERR_SHAPE, "Wrong shape: expected %s%d dims. Received %d-dim tensor.",
                            left.has_ellipsis ? ">=" : "", n_named, x->ndim);
    const int n_ell = left.has_ellipsis ? x->ndim - n_named : 0;
    int ell_ids[TORC_MAX_DIMS];
    for (int k = 0; k < n_ell; k++) {
        char nm[16];
        snprintf(nm, sizeof nm, "...%d", k);
        ell_ids[k] = new_axis(&c, nm, strlen(nm), 0);
        if (ell_ids[k] < 0) return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG, "too many axes in pattern");
        c.ax[ell_ids[k]].left = true;
        c.ax[ell_ids[k]].right = right.has_ellipsis;
    }
    eo_comp lc, rc;
    if (!expand_side(&c, &left, n_ell, ell_ids, &lc) || !expand_side(&c, &right, n_ell, ell_ids, &rc)) return NULL;

    // Each dim of x determines at most one unknown axis of its group (einops' recipe first
    // checks every group, then the shape).
    for (int g = 0; g < lc.n_groups; g++) {
        n_ids = 0;
        for (int i = lc.start[g]; i < lc.start[g + 1]; i++)
            if (c.ax[lc.ax[i]].len < 0) ids[n_ids++] = lc.ax[i];
        if (n_ids > 1)
            return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG, "Could not infer sizes for %s",
                                set_str(&c, n_ids, ids, set, sizeof set));
    }
    for (int g = 0; g < lc.n_groups; g++) {
        const int64_t dim = x->shape[g];
        int64_t known, lens[EO_MAX_AXES];
        int unknown = -1, n = 0;
        for (int i = lc.start[g]; i < lc.start[g + 1]; i++) {
            if (c.ax[lc.ax[i]].len < 0) unknown = lc.ax[i];
            else lens[n++] = c.ax[lc.ax[i]].len;
        }
        if (!torc__numel_checked(n, lens, &known)) {  // no dim is that long
            char sizes[TORC_SHAPE_STR_MAX];
            return EO_FAIL_NULL(&c, TORC_ERR_SHAPE, "Shape mismatch, the lengths %s of dim %d multiply past 2^63",
                                torc__shape_str(n, lens, sizes, sizeof sizes), g);
        }
        if (unknown < 0) {
            if (dim != known)
                return EO_FAIL_NULL(&c, TORC_ERR_SHAPE, "Shape mismatch, %lld != %lld", (long long)dim,
                                    (long long)known);
        } else {
            if (known == 0 || dim % known)
                return EO_FAIL_NULL(&c, TORC_ERR_SHAPE,
                                    "Shape mismatch, can't divide axis of length %lld in chunks of %lld",
                                    (long long)dim, (long long)known);
            c.ax[unknown].len = dim / known;
        }
    }
    const int n_left = lc.start[lc.n_groups], n_right = rc.start[rc.n_groups];
    if (n_left > TORC_MAX_DIMS || n_right > TORC_MAX_DIMS)
        return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG,
                            "the pattern has %d elementary axes; torc tensors have at most %d dims",
                            n_left > n_right ? n_left : n_right, TORC_MAX_DIMS);
    if (rc.n_groups > TORC_MAX_DIMS)  // "1" / "()" dims count too (found by tests/fuzz/fuzz_rearrange.c)
        return EO_FAIL_NULL(&c, TORC_ERR_INVALID_ARG, "the result would have %d dims; torc tensors have at most %d",
                            rc.n_groups, TORC_MAX_DIMS);

    // ---- the steps, as torc ops ----
    torc_scope_push();
    torc_tensor *t = x;
    int64_t shape[TORC_MAX_DIMS];
    // 1. split: x as its elementary axes (drops "1"/"()" dims); a view
    bool split = lc.n_groups != n_left;
    for (int g = 0; g < lc.n_groups && !split; g++) split = lc.start[g + 1] - lc.start[g] != 1;
    if (split) {
        for (int i = 0; i < n_left; i++) shape[i] = c.ax[lc.ax[i]].len;
        t = torc_reshape(t, n_left, shape);
    }
    // 2. reduce the axes the right side leaves out
    int order[TORC_MAX_DIMS], n_order = 0;  // axis ids of t's dims after this step
    int red[TORC_MAX_DIMS], n_red = 0;
    for (int i = 0; i < n_left; i++) {
        if (c.ax[lc.ax[i]].right) order[n_order++] = lc.ax[i];
        else red[n_red++] = i;
    }
    if (t && n_red) {
        t = apply_reduction(t, reduction, n_red, red);
    }
    // 3. permute into the right side's order
    int perm[TORC_MAX_DIMS], n_perm = 0;
    bool identity = true;
    for (int i = 0; i < n_right; i++) {
        for (int j = 0; j < n_order; j++)
            if (order[j] == rc.ax[i]) {
                identity = identity && j == n_perm;
                perm[n_perm++] = j;
            }
    }
    if (t && !identity) {
        t = torc_permute(t, n_perm, perm);
    }
    // 4. new axes (repeat): unit dims, expanded with stride 0
    if (t && n_perm != n_right) {
        bool expand = false;
        for (int i = 0; i < n_right; i++) {
            const eo_axis *a = &c.ax[rc.ax[i]];
            shape[i] = a->left ? a->len : 1;
            expand = expand || (!a->left && a->len != 1);
        }
        t = torc_view(t, n_right, shape);
        if (t && expand) {
            for (int i = 0; i < n_right; i++) shape[i] = c.ax[rc.ax[i]].len;
            t = torc_expand(t, n_right, shape);
        }
    }
    // 5. merge the right side's groups (and insert its "1"/"()" dims)
    bool merge = rc.n_groups != n_right;
    for (int g = 0; g < rc.n_groups && !merge; g++) merge = rc.start[g + 1] - rc.start[g] != 1;
    if (t && merge) {
        int64_t lens[TORC_MAX_DIMS];
        for (int g = 0; g < rc.n_groups && t; g++) {
            int n = 0;
            for (int i = rc.start[g]; i < rc.start[g + 1]; i++) lens[n++] = c.ax[rc.ax[i]].len;
            if (!torc__numel_err(n, lens, &shape[g])) t = NULL;  // an empty tensor's other axes may not fit
        }
        if (t) t = torc_reshape(t, rc.n_groups, shape);
    }
    torc_tensor *r = torc_keep(t);  // x itself when nothing changed: a new reference to it
    torc_scope_pop();
    return r;
}

torc_tensor *torc_rearrange(torc_tensor *x, const char *pattern, const char *axes) {
    return einops_apply(x, pattern, EO_REARRANGE, NULL, axes);
}

torc_tensor *torc_reduce_axes(torc_tensor *x, const char *pattern, const char *reduction, const char *axes) {
    return einops_apply(x, pattern, EO_REDUCE, reduction, axes);
}

torc_tensor *torc_reduce(torc_tensor *x, const char *pattern, const char *reduction) {
    return einops_apply(x, pattern, EO_REDUCE, reduction, NULL);
}

torc_tensor *torc_repeat(torc_tensor *x, const char *pattern, const char *axes) {
    return einops_apply(x, pattern, EO_REPEAT, NULL, axes);
}
