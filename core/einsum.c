// core/einsum.c — torch.einsum / einops.einsum with named axes: the equation parser, shape
// checks, and the contraction of operands pairwise from left to right as batched matmuls.
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "torc-impl.h"

// An operand goes through: its diagonal for a name repeated in it (an as_strided view), its
// size-1 dims of broadcast axes dropped (a view), the axes nobody else needs summed
// (torc_sum). Then the running result A and the next operand B are contracted: the axes both
// hold are batch dims if a later operand or the output needs them, else summed (K); the rest
// are A's rows (M) or B's columns (N). A is permuted to (batch, M, K) and B to (batch, K, N)
// as views, M, K and N each reshaped into one dim (a view when the strides allow), and one
// torc_matmul gives (batch, M, N), reshaped back to its axes (a view). The last result is
// permuted into the output's order.

#define ES_MAX_OPERANDS 64
#define ES_MAX_NAMES 64                           // distinct axis names in one equation
#define ES_MAX_LABELS (ES_MAX_NAMES + TORC_MAX_DIMS) // names, then the dims "..." covers
#define ES_MAX_TERM 16                            // names written for one operand

typedef struct es_term {
    int n;                // names written, "..." not counted
    int lab[ES_MAX_TERM]; // their label ids in written order
    int ell;              // "..." stands before lab[ell]; -1 when the term has none
} es_term;

typedef struct es_eq {
    const char *eq;
    bool letters;         // torch style: one letter per axis, no whitespace
    int n_in;
    es_term in[ES_MAX_OPERANDS];
    bool has_out;         // "->" was written
    es_term out;
    int n_names;
    const char *name[ES_MAX_NAMES];
    int len[ES_MAX_NAMES];
} es_eq;

// An operand (or partial result) and the label of each of its dims.
typedef struct es_op {
    torc_tensor *t;
    int n;
    int lab[TORC_MAX_DIMS];
} es_op;

__attribute__((format(printf, 3, 4))) static bool es_fail(const es_eq *e, torc_status st, const char *fmt, ...) {
    char detail[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    torc__error(st, "einsum(): %s (equation \"%s\")", detail, e->eq);
    return false;
}
#define ES_FAIL_NULL(...) (es_fail(__VA_ARGS__), (torc_tensor *)NULL)

// A label's name for messages: "batch", or "..." dim k.
static const char *label_str(const es_eq *e, int lab, char *buf, size_t cap) {
    if (lab < e->n_names) snprintf(buf, cap, "%.*s", e->len[lab], e->name[lab]);
    else snprintf(buf, cap, "...[%d]", lab - ES_MAX_NAMES);
    return buf;
}

static int label_of(es_eq *e, const char *s, int len) {
    for (int i = 0; i < e->n_names; i++)
        if (e->len[i] == len && !memcmp(e->name[i], s, (size_t)len)) return i;
    if (e->n_names == ES_MAX_NAMES) return -1;
    e->name[e->n_names] = s;
    e->len[e->n_names] = len;
    return e->n_names++;
}

// Parses the term [p, end) for operand `which` (-1: the output) into t.
static bool parse_term(es_eq *e, const char *p, const char *end, es_term *t, int which) {
    t->n = 0;
    t->ell = -1;
    char where[32];
    if (which >= 0) snprintf(where, sizeof where, "operand %d", which);
    else snprintf(where, sizeof where, "the output");
    while (p < end) {
        const char ch = *p;
        int len;
        if (isspace((unsigned char)ch)) {
            p++;
            continue;
        }
        if (ch == '.') {
            if (end - p < 3 || memcmp(p, "...", 3))
                return es_fail(e, TORC_ERR_INVALID_ARG, "Expression may contain dots only inside ellipsis (...)");
            if (t->ell >= 0)
                return es_fail(e, TORC_ERR_INVALID_ARG, "found more than one ellipsis (...) in %s", where);
            t->ell = t->n;
            p += 3;
            continue;
        }
        if (e->letters) {
            if (!isalpha((unsigned char)ch))
                return es_fail(e, TORC_ERR_INVALID_ARG, "invalid subscript given at index %d in the equation string, "
                                                        "subscripts must be in [a-zA-Z]", (int)(p - e->eq));
            len = 1;
        } else if (ch == '(' || ch == ')') {
            return es_fail(e, TORC_ERR_INVALID_ARG, "Shape rearrangement (axes in parentheses) is not supported in "
                                                    "einsum; use torc_rearrange first");
        } else if (isalnum((unsigned char)ch) || ch == '_') {
            len = 0;
            while (p + len < end && (isalnum((unsigned char)p[len]) || p[len] == '_')) len++;
            bool number = true;
            for (int i = 0; i < len; i++) number = number && isdigit((unsigned char)p[i]);
            if (number)
                return es_fail(e, TORC_ERR_INVALID_ARG, "Anonymous axes (%.*s) are not supported in einsum", len, p);
            if (isdigit((unsigned char)p[0]))
                return es_fail(e, TORC_ERR_INVALID_ARG, "Invalid axis identifier: %.*s (not a valid identifier)",
                               len, p);
            if (p[0] == '_' || p[len - 1] == '_')
                return es_fail(e, TORC_ERR_INVALID_ARG, "Invalid axis identifier: %.*s (axis name should not start or "
                                                        "end with underscore)", len, p);
        } else {
            return es_fail(e, TORC_ERR_INVALID_ARG, "Unknown character '%c'", ch);
        }
        const int lab = label_of(e, p, len);
        if (lab < 0) return es_fail(e, TORC_ERR_INVALID_ARG, "too many axis names (at most %d)", ES_MAX_NAMES);
        if (t->n == ES_MAX_TERM)
            return es_fail(e, TORC_ERR_INVALID_ARG, "too many axes for %s (at most %d)", where, ES_MAX_TERM);
        if (which < 0)
            for (int i = 0; i < t->n; i++)
                if (t->lab[i] == lab)
                    return es_fail(e, TORC_ERR_INVALID_ARG, "Indexing expression contains duplicate dimension \"%.*s\"",
                                   len, p);
        t->lab[t->n++] = lab;
        p += len;
    }
    return true;
}

static bool parse_equation(es_eq *e, const char *eq, int n) {
    e->eq = eq;
    e->letters = true;
    for (const char *q = eq; *q; q++) e->letters = e->letters && !isspace((unsigned char)*q);
    const char *arrow = strstr(eq, "->");
    if (arrow && strstr(arrow + 2, "->"))
        return es_fail(e, TORC_ERR_INVALID_ARG, "the equation may contain \"->\" only once");
    if (!arrow && !e->letters)
        return es_fail(e, TORC_ERR_INVALID_ARG, "Einsum pattern must contain '->' (only an equation without "
                                                "whitespace, one letter per axis, may leave the output implicit)");
    const char *lend = arrow ? arrow : eq + strlen(eq);
    e->n_in = 0;
    for (const char *p = eq;;) {
        const char *comma = memchr(p, ',', (size_t)(lend - p));
        const char *tend = comma ? comma : lend;
        if (e->n_in == n)
            return es_fail(e, TORC_ERR_INVALID_ARG, "fewer operands were provided than specified in the equation");
        if (!parse_term(e, p, tend, &e->in[e->n_in], e->n_in)) return false;
        e->n_in++;
        if (!comma) break;
        p = comma + 1;
    }
    if (e->n_in < n)
        return es_fail(e, TORC_ERR_INVALID_ARG, "more operands were provided than specified in the equation");
    e->has_out = arrow != NULL;
    if (arrow) {
        if (!parse_term(e, arrow + 2, arrow + strlen(arrow), &e->out, -1)) return false;
        for (int i = 0; i < e->out.n; i++) {
            bool found = false;
            for (int k = 0; k < e->n_in && !found; k++)
                for (int j = 0; j < e->in[k].n && !found; j++) found = e->in[k].lab[j] == e->out.lab[i];
            if (!found) {
                char b[ES_MAX_TERM * 4];
                return es_fail(e, TORC_ERR_INVALID_ARG, "Unknown axis %s on right side of einsum",
                               label_str(e, e->out.lab[i], b, sizeof b));
            }
        }
    }
    return true;
}

// Sums the dims of o whose labels keep[] does not hold.
static bool sum_out(es_op *o, const bool *keep) {
    int dims[TORC_MAX_DIMS], nd = 0, n = 0;
    for (int i = 0; i < o->n; i++) {
        if (keep[o->lab[i]]) o->lab[n++] = o->lab[i];
        else dims[nd++] = i;
    }
    if (!nd) return true;
    o->t = torc_sum(o->t, nd, dims, false);
    o->n = n;
    return o->t != NULL;
}

// t permuted to `order` (all nd dims of t); t itself when order is the identity.
static torc_tensor *permuted(torc_tensor *t, const int *order, int nd) {
    for (int i = 0; i < nd; i++)
        if (order[i] != i) return torc_permute(t, nd, order);
    return t;
}

// t permuted to `order` (dims of t) and reshaped to (first nb dims..., one dim for the next
// n1 dims, one for the next n2). Views unless the merge must copy.
static torc_tensor *as_batched_matrix(torc_tensor *t, const int *order, int nb, int n1, int n2) {
    if (!(t = permuted(t, order, nb + n1 + n2))) return NULL;
    if (n1 == 1 && n2 == 1) return t;
    int64_t shape[TORC_MAX_DIMS];
    for (int i = 0; i < nb; i++) shape[i] = t->shape[i];
    // (a group of an empty tensor's other dims may not fit)
    if (!torc__numel_err(n1, t->shape + nb, &shape[nb]) || !torc__numel_err(n2, t->shape + nb + n1, &shape[nb + 1]))
        return NULL;
    return torc_reshape(t, nb + 2, shape);
}

// Contracts a and b into a, keeping the labels later[] holds.
static bool contract(es_op *a, es_op *b, const bool *later) {
    bool in_a[ES_MAX_LABELS] = {false}, in_b[ES_MAX_LABELS] = {false};
    for (int i = 0; i < a->n; i++) in_a[a->lab[i]] = true;
    for (int i = 0; i < b->n; i++) in_b[b->lab[i]] = true;
    // Axes of one side that neither the other side nor anything later needs.
    bool keep_a[ES_MAX_LABELS], keep_b[ES_MAX_LABELS];
    for (int l = 0; l < ES_MAX_LABELS; l++) keep_a[l] = in_b[l] || later[l], keep_b[l] = in_a[l] || later[l];
    if (!sum_out(a, keep_a) || !sum_out(b, keep_b)) return false;

    int oa[TORC_MAX_DIMS], ob[TORC_MAX_DIMS], na = 0, nb = 0;  // dim orders for a and b
    int rl[2 * TORC_MAX_DIMS], nr = 0;                          // labels of the result
    int n_batch = 0, n_m = 0, n_k = 0, n_n = 0;
    int pos_b[ES_MAX_LABELS] = {0};
    for (int i = 0; i < b->n; i++) pos_b[b->lab[i]] = i;
    for (int i = 0; i < a->n; i++)  // batch
        if (in_b[a->lab[i]] && later[a->lab[i]])
            oa[na++] = i, ob[nb++] = pos_b[a->lab[i]], rl[nr++] = a->lab[i], n_batch++;
    for (int i = 0; i < a->n; i++)  // M
        if (!in_b[a->lab[i]]) oa[na++] = i, rl[nr++] = a->lab[i], n_m++;
    for (int i = 0; i < a->n; i++)  // K
        if (in_b[a->lab[i]] && !later[a->lab[i]]) oa[na++] = i, ob[nb++] = pos_b[a->lab[i]], n_k++;
    for (int i = 0; i < b->n; i++)  // N
        if (!in_a[b->lab[i]]) ob[nb++] = i, rl[nr++] = b->lab[i], n_n++;
    if (nr > TORC_MAX_DIMS || n_batch + 2 > TORC_MAX_DIMS) {
        torc__error(TORC_ERR_INVALID_ARG, "einsum(): an intermediate result would have %d dims; torc tensors have at "
                                          "most %d", nr > n_batch + 2 ? nr : n_batch + 2, TORC_MAX_DIMS);
        return false;
    }
    // b's dims: batch, then K in a's order, then N.
    const int *ob_n = ob + n_batch + n_k;
    int64_t shape[TORC_MAX_DIMS];  // the result's: batch, M axes, N axes
    for (int i = 0; i < n_batch + n_m; i++) shape[i] = a->t->shape[oa[i]];
    for (int i = 0; i < n_n; i++) shape[n_batch + n_m + i] = b->t->shape[ob_n[i]];
    torc_tensor *r;
    if (n_k == 0) {
        // Nothing summed (outer or elementwise products): one broadcasting multiply of
        // a as (batch, M, 1...) and b as (batch, 1..., N), both views.
        int64_t sa[TORC_MAX_DIMS], sb[TORC_MAX_DIMS];
        for (int i = 0; i < nr; i++) {
            const bool m = i >= n_batch && i < n_batch + n_m, nn = i >= n_batch + n_m;
            sa[i] = nn ? 1 : shape[i];
            sb[i] = m ? 1 : shape[i];
        }
        torc_tensor *va = permuted(a->t, oa, a->n), *vb = va ? permuted(b->t, ob, b->n) : NULL;
        if (va && n_n) va = torc_view(va, nr, sa);
        if (vb && n_m) vb = torc_view(vb, nr, sb);
        r = va && vb ? torc_mul(va, vb) : NULL;
    } else {
        // (batch, M, K) @ (batch, K, N) -> (batch, M, N), then its axes back (a view).
        torc_tensor *ma = as_batched_matrix(a->t, oa, n_batch, n_m, n_k);
        torc_tensor *mb = ma ? as_batched_matrix(b->t, ob, n_batch, n_k, n_n) : NULL;
        r = mb ? torc_matmul(ma, mb) : NULL;
        if (r && (n_m != 1 || n_n != 1)) r = torc_reshape(r, nr, shape);
    }
    if (!r) return false;
    a->t = r;
    a->n = nr;
    memcpy(a->lab, rl, sizeof rl);
    return true;
}

// The operand as its labels: the diagonal of repeated names, broadcast size-1 dims dropped.
static bool prepare(torc_tensor *t, const es_term *term, int n_ell, const int64_t *size, es_op *o) {
    int lab[TORC_MAX_DIMS];
    const int e_i = t->ndim - term->n;  // dims "..." covers in this operand
    for (int d = 0, j = 0; d < t->ndim; d++) {
        if (term->ell == j && d < term->ell + e_i) lab[d] = ES_MAX_NAMES + n_ell - e_i + (d - term->ell);
        else lab[d] = term->lab[j++];
    }
    // Unique labels; a repeated one becomes one dim whose stride is the sum (the diagonal).
    int64_t sh[TORC_MAX_DIMS], st[TORC_MAX_DIMS];
    int n = 0;
    bool repeated = false;
    for (int d = 0; d < t->ndim; d++) {
        int k = 0;
        while (k < n && o->lab[k] != lab[d]) k++;
        if (k < n) {
            st[k] += t->stride[d];
            repeated = true;
            continue;
        }
        o->lab[n] = lab[d], sh[n] = t->shape[d], st[n] = t->stride[d];
        n++;
    }
    o->t = t;
    o->n = n;
    if (repeated && !(o->t = torc_as_strided(t, n, sh, st, t->offset))) return false;
    // Size-1 dims of axes that are longer elsewhere broadcast: drop them (a view).
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!(sh[i] == 1 && size[o->lab[i]] != 1)) sh[m] = sh[i], o->lab[m++] = o->lab[i];
    if (m != n && !(o->t = torc_view(o->t, m, sh))) return false;
    o->n = m;
    return true;
}

torc_tensor *torc_einsum(const char *equation, int n, torc_tensor *const *operands) {
    if (!equation) return TORC_NULL_ARG_FAIL("einsum(): equation is NULL");
    es_eq e;
    memset(&e, 0, sizeof e);
    e.eq = equation;
    if (n < 1 || !operands) return ES_FAIL_NULL(&e, TORC_ERR_INVALID_ARG, "must provide at least one operand");
    if (n > ES_MAX_OPERANDS) return ES_FAIL_NULL(&e, TORC_ERR_INVALID_ARG, "at most %d operands", ES_MAX_OPERANDS);
    for (int i = 0; i < n; i++) {
        if (!operands[i])  // torc__null_arg's rule: an error already set is kept
            return torc_last_status() ? NULL : ES_FAIL_NULL(&e, TORC_ERR_INVALID_ARG, "operand %d is NULL", i);
        if (operands[i]->dtype != operands[0]->dtype)
            return ES_FAIL_NULL(&e, TORC_ERR_DTYPE, "expected scalar type %s but found %s",
                                torc__dtype_c10_name(operands[0]->dtype), torc__dtype_c10_name(operands[i]->dtype));
    }
    if (!parse_equation(&e, equation, n)) return NULL;

    // Sizes: every axis one size across operands, or 1 (broadcast); "..." right-aligned.
    int64_t size[ES_MAX_LABELS];
    for (int l = 0; l < ES_MAX_LABELS; l++) size[l] = -1;
    int n_ell = 0;
    for (int i = 0; i < n; i++) {
        const torc_tensor *t = operands[i];
        const es_term *term = &e.in[i];
        if (term->ell < 0 && t->ndim != term->n)
            return ES_FAIL_NULL(&e, TORC_ERR_SHAPE, "the number of subscripts in the equation (%d) does not match the "
                                "number of dimensions (%d) for operand %d and no ellipsis was given", term->n,
                                t->ndim, i);
        if (term->ell >= 0 && t->ndim < term->n)
            return ES_FAIL_NULL(&e, TORC_ERR_SHAPE, "the number of subscripts in the equation (%d) is more than the "
                                "number of dimensions (%d) for operand %d", term->n, t->ndim, i);
        if (term->ell >= 0 && t->ndim - term->n > n_ell) n_ell = t->ndim - term->n;
    }
    for (int i = 0; i < n; i++) {
        const torc_tensor *t = operands[i];
        const es_term *term = &e.in[i];
        const int e_i = term->ell >= 0 ? t->ndim - term->n : 0;
        int64_t seen[ES_MAX_LABELS];  // this operand's size for each label, -1 if not yet
        for (int l = 0; l < ES_MAX_LABELS; l++) seen[l] = -1;
        for (int d = 0, j = 0; d < t->ndim; d++) {
            const int64_t s = t->shape[d];
            char b[64];
            if (term->ell == j && d < term->ell + e_i) {
                const int k = n_ell - e_i + (d - term->ell), l = ES_MAX_NAMES + k;
                if (size[l] >= 0 && s != size[l] && s != 1 && size[l] != 1)
                    return ES_FAIL_NULL(&e, TORC_ERR_SHAPE, "dimension %d covered by ellipsis in operand %d has size "
                                        "%lld which does not broadcast with previously seen ellipsis with size %lld "
                                        "for the respective dimension", k, i, (long long)s, (long long)size[l]);
                if (size[l] < 0 || size[l] == 1) size[l] = s;
                continue;
            }
            const int l = term->lab[j++];
            if (seen[l] >= 0 && seen[l] != s)
                return ES_FAIL_NULL(&e, TORC_ERR_SHAPE, "axis %s is repeated for operand %d but the sizes don't "
                                    "match, %lld != %lld", label_str(&e, l, b, sizeof b), i, (long long)s,
                                    (long long)seen[l]);
            seen[l] = s;
            if (size[l] >= 0 && s != size[l] && s != 1 && size[l] != 1)
                return ES_FAIL_NULL(&e, TORC_ERR_SHAPE, "axis %s has size %lld for operand %d which does not broadcast "
                                    "with previously seen size %lld", label_str(&e, l, b, sizeof b), (long long)s, i,
                                    (long long)size[l]);
            if (size[l] < 0 || size[l] == 1) size[l] = s;
        }
    }

    // The output's labels: as written, "..." where written (summed if not written); for an
    // implicit torch-style output, "..." then the letters used once, in ASCII order.
    int out[TORC_MAX_DIMS + ES_MAX_TERM], n_out = 0;
    if (e.has_out) {
        for (int j = 0; j <= e.out.n; j++) {
            if (e.out.ell == j)
                for (int k = 0; k < n_ell; k++) out[n_out++] = ES_MAX_NAMES + k;
            if (j < e.out.n) out[n_out++] = e.out.lab[j];
        }
    } else {
        for (int k = 0; k < n_ell; k++) out[n_out++] = ES_MAX_NAMES + k;
        int count[ES_MAX_NAMES] = {0};
        for (int i = 0; i < n; i++)
            for (int j = 0; j < e.in[i].n; j++) count[e.in[i].lab[j]]++;
        for (int c = 0; c < 256; c++)
            for (int l = 0; l < e.n_names; l++)
                if (count[l] == 1 && (unsigned char)e.name[l][0] == c && n_out < TORC_MAX_DIMS + ES_MAX_TERM)
                    out[n_out++] = l;
    }
    if (n_out > TORC_MAX_DIMS)
        return ES_FAIL_NULL(&e, TORC_ERR_INVALID_ARG, "the output has %d dims; torc tensors have at most %d", n_out,
                            TORC_MAX_DIMS);

    // ---- evaluation ----
    torc_scope_push();
    es_op ops[ES_MAX_OPERANDS];
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = prepare(operands[i], &e.in[i], n_ell, size, &ops[i]);
    // Axes only one operand holds and the output lacks are summed there first.
    bool in_out[ES_MAX_LABELS] = {false};
    for (int j = 0; j < n_out; j++) in_out[out[j]] = true;
    int holders[ES_MAX_LABELS] = {0};
    for (int i = 0; i < n && ok; i++)
        for (int j = 0; j < ops[i].n; j++) holders[ops[i].lab[j]]++;
    for (int i = 0; i < n && ok; i++) {
        bool keep[ES_MAX_LABELS];
        for (int l = 0; l < ES_MAX_LABELS; l++) keep[l] = in_out[l] || holders[l] > 1;
        ok = sum_out(&ops[i], keep);
    }
    // Left to right; later[] holds the labels the output or an operand still to come needs.
    for (int i = 1; i < n && ok; i++) {
        bool later[ES_MAX_LABELS];
        memcpy(later, in_out, sizeof later);
        for (int k = i + 1; k < n; k++)
            for (int j = 0; j < ops[k].n; j++) later[ops[k].lab[j]] = true;
        ok = contract(&ops[0], &ops[i], later);
    }
    if (ok) ok = sum_out(&ops[0], in_out);  // a single operand's axes absent from the output
    torc_tensor *r = NULL;
    if (ok) {
        // Into the output's order (a view).
        int perm[TORC_MAX_DIMS];
        bool identity = ops[0].n == n_out;
        for (int j = 0; j < n_out; j++) {
            perm[j] = -1;
            for (int d = 0; d < ops[0].n; d++)
                if (ops[0].lab[d] == out[j]) perm[j] = d;
            identity = identity && perm[j] == j;
        }
        r = identity ? ops[0].t : torc_permute(ops[0].t, n_out, perm);
    }
    r = torc_keep(r);
    torc_scope_pop();
    return r;
}
