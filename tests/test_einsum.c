// tests/test_einsum.c — named dimensions: einsum, rearrange, reduce and repeat against einops +
// torch goldens (values, views vs copies, error messages), the course's examples and FLOPs.
#define _POSIX_C_SOURCE 200809L  // getline
#include "ck.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "torc/torc.h"

// ---- golden cases (tests/golden/einops_cases.txt, from tools/golden/gen_einops_golden.py) ----
#define G_MAX_IN 4
typedef struct g_tensor {
    torc_dtype dtype;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    int nperm;                // 0, or the permutation applied after building the tensor
    int perm[TORC_MAX_DIMS];
    char kind[8];             // out only: "view", "copy" or "any"
    int64_t n;
    double *v;                // n values, row-major
} g_tensor;

typedef struct g_case {
    int line;
    char name[64], op[16], pattern[160], reduction[32], axes[64];
    int n_in;
    g_tensor in[G_MAX_IN];
    bool has_out, error;
    g_tensor out;
    char status[32];          // "INVALID_ARG": TORC_ERR_INVALID_ARG
    char key[256];
} g_case;

static g_case *g_cases;
static int g_n;

// The golden file is read before the suite runs, where Check's asserts cannot report.
#define load_check(cond, ...) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "einops_cases.txt: " __VA_ARGS__); \
            fputc('\n', stderr); \
            exit(EXIT_FAILURE); \
        } \
    } while (0)

static torc_dtype dtype_of(const char *s, int line) {
    torc_dtype d = TORC_DTYPE_F64;
    load_check(torc_dtype_from_name(s, &d) == TORC_OK, "line %d: bad dtype %s", line, s);
    return d;
}

// "f64 2,3,8 [perm 1,0] [view] : v v v" into t.
static void parse_tensor(char *s, g_tensor *t, bool out, int line) {
    memset(t, 0, sizeof *t);
    char *colon = strstr(s, " : ");
    if (!colon) colon = s + strlen(s) - 2;  // "... :" with no values (empty tensor)
    load_check(colon > s && !strncmp(colon, " :", 2), "line %d: no ' : '", line);
    *colon = '\0';
    char *save = NULL, *tok = strtok_r(s, " ", &save);
    t->dtype = dtype_of(tok, line);
    tok = strtok_r(NULL, " ", &save);
    load_check(tok != NULL, "line %d: no shape", line);
    if (strcmp(tok, "-"))
        for (char *d = tok; *d; d += *d == ',') t->shape[t->ndim++] = strtoll(d, &d, 10);
    while ((tok = strtok_r(NULL, " ", &save))) {
        if (!strcmp(tok, "perm")) {
            char *p = strtok_r(NULL, " ", &save);
            for (char *d = p; *d; d += *d == ',') t->perm[t->nperm++] = (int)strtol(d, &d, 10);
        } else {
            load_check(out, "line %d: unexpected '%s'", line, tok);
            snprintf(t->kind, sizeof t->kind, "%s", tok);
        }
    }
    t->n = 1;
    for (int i = 0; i < t->ndim; i++) t->n *= t->shape[i];
    t->v = malloc(sizeof(double) * (size_t)(t->n ? t->n : 1));
    char *p = colon + 2;
    for (int64_t i = 0; i < t->n; i++) {
        char *e;
        t->v[i] = strtod(p, &e);
        load_check(e != p, "line %d: %lld values expected, found %lld", line, (long long)t->n, (long long)i);
        p = e;
    }
}

static void load_cases(void) {
    const char *dir = getenv("TORC_TEST_DATA");
    if (!dir) {
        fprintf(stderr, "TORC_TEST_DATA is not set (run the suite through ctest)\n");
        exit(EXIT_FAILURE);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/einops_cases.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(EXIT_FAILURE);
    }
    char *buf = NULL;
    size_t cap = 0;
    int line = 0, n_cap = 0;
    g_case *c = NULL;
    while (getline(&buf, &cap, f) > 0) {
        line++;
        buf[strcspn(buf, "\n")] = '\0';
        if (buf[0] == '#' || buf[0] == '\0') continue;
        char *val = strchr(buf, ' ');
        val = val ? (*val = '\0', val + 1) : buf + strlen(buf);
        if (!strcmp(buf, "case")) {
            if (g_n == n_cap) g_cases = realloc(g_cases, sizeof *g_cases * (size_t)(n_cap = n_cap ? 2 * n_cap : 64));
            c = &g_cases[g_n++];
            memset(c, 0, sizeof *c);
            c->line = line;
            snprintf(c->name, sizeof c->name, "%s", val);
        } else if (!c) {
            fprintf(stderr, "%s:%d: '%s' before any case\n", path, line, buf);
            exit(EXIT_FAILURE);
        } else if (!strcmp(buf, "op")) {
            snprintf(c->op, sizeof c->op, "%s", val);
        } else if (!strcmp(buf, "pattern")) {
            snprintf(c->pattern, sizeof c->pattern, "%s", val);
        } else if (!strcmp(buf, "reduction")) {
            snprintf(c->reduction, sizeof c->reduction, "%s", val);
        } else if (!strcmp(buf, "axes")) {
            snprintf(c->axes, sizeof c->axes, "%s", val);
        } else if (!strcmp(buf, "in") && c->n_in < G_MAX_IN) {
            parse_tensor(val, &c->in[c->n_in++], false, line);
        } else if (!strcmp(buf, "out")) {
            parse_tensor(val, &c->out, true, line);
            c->has_out = true;
        } else if (!strcmp(buf, "error")) {
            char *sp = strchr(val, ' ');
            if (!sp) break;
            *sp = '\0';
            c->error = true;
            snprintf(c->status, sizeof c->status, "%s", val);
            snprintf(c->key, sizeof c->key, "%s", sp + 1);
        } else if (strcmp(buf, "end")) {
            fprintf(stderr, "%s:%d: unknown key '%s'\n", path, line, buf);
            exit(EXIT_FAILURE);
        }
    }
    free(buf);
    fclose(f);
}

static void free_cases(void) {
    for (int i = 0; i < g_n; i++) {
        for (int k = 0; k < g_cases[i].n_in; k++) free(g_cases[i].in[k].v);
        free(g_cases[i].out.v);
    }
    free(g_cases);
}

static torc_tensor *make_input(const g_tensor *t) {
    torc_tensor *d = torc_tensor_from(t->v, t->ndim, t->shape, TORC_DTYPE_F64);
    ck_assert_msg(d != NULL, "%s", torc_last_error());
    torc_tensor *x = torc_to_dtype(d, t->dtype);
    if (t->nperm) x = torc_permute(x, t->nperm, t->perm);
    ck_assert_msg(x != NULL, "%s", torc_last_error());
    return x;
}

static torc_tensor *run_case(const g_case *c, torc_tensor **in) {
    const char *axes = c->axes[0] ? c->axes : NULL;
    if (!strcmp(c->op, "einsum")) return torc_einsum(c->pattern, c->n_in, in);
    if (!strcmp(c->op, "rearrange")) return torc_rearrange(in[0], c->pattern, axes);
    if (!strcmp(c->op, "repeat")) return torc_repeat(in[0], c->pattern, axes);
    ck_assert_str_eq(c->op, "reduce");
    return axes ? torc_reduce_axes(in[0], c->pattern, c->reduction, axes) : torc_reduce(in[0], c->pattern, c->reduction);
}

START_TEST(golden_case) {
    const g_case *c = &g_cases[_i];
    torc_scope_push();
    torc_tensor *in[G_MAX_IN];
    uint64_t versions[G_MAX_IN];
    for (int k = 0; k < c->n_in; k++) in[k] = make_input(&c->in[k]), versions[k] = torc_version(in[k]);
    torc_clear_error();
    torc_tensor *r = run_case(c, in);
    if (c->error) {
        ck_assert_msg(r == NULL, "%s (line %d): expected an error", c->name, c->line);
        ck_assert_msg(!strcmp(torc_status_name(torc_last_status()) + strlen("TORC_ERR_"), c->status),
                      "%s: status %s, expected %s (%s)", c->name, torc_status_name(torc_last_status()), c->status,
                      torc_last_error());
        ck_assert_msg(strstr(torc_last_error(), c->key) != NULL, "%s: message '%s' lacks '%s'", c->name,
                      torc_last_error(), c->key);
    } else {
        ck_assert_msg(r != NULL, "%s (line %d): %s", c->name, c->line, torc_last_error());
        ck_assert_msg(torc_get_dtype(r) == c->out.dtype, "%s: dtype %s, expected %s", c->name,
                      torc_dtype_name(torc_get_dtype(r)), torc_dtype_name(c->out.dtype));
        tu_assert_dims_at(c->name, c->line, "shape", torc_ndim(r), torc_shape(r), c->out.ndim, c->out.shape);
        const double tol = c->out.dtype == TORC_DTYPE_F32 ? 1e-5 : c->out.dtype == TORC_DTYPE_F64 ? 1e-12 : 0;
        tu_assert_values_at(c->name, c->line, r, c->out.v, c->out.n, tol);
        if (!strcmp(c->out.kind, "view"))
            ck_assert_msg(torc_same_storage(r, in[0]), "%s: expected a view of the input, got a copy", c->name);
        else if (!strcmp(c->out.kind, "copy"))
            ck_assert_msg(!torc_same_storage(r, in[0]), "%s: expected a copy, got a view of the input", c->name);
    }
    for (int k = 0; k < c->n_in; k++) ck_assert_uint_eq(torc_version(in[k]), versions[k]);  // inputs untouched
    torc_scope_pop();
}
END_TEST

START_TEST(golden_file_covers_every_operation_and_error_kind) {
    int ops[4] = {0}, errors = 0;
    const char *names[4] = {"einsum", "rearrange", "reduce", "repeat"};
    for (int i = 0; i < g_n; i++) {
        for (int k = 0; k < 4; k++) ops[k] += !strcmp(g_cases[i].op, names[k]);
        errors += g_cases[i].error;
    }
    ck_assert_int_ge(g_n, 60);
    for (int k = 0; k < 4; k++) ck_assert_msg(ops[k] >= 8, "only %d %s cases", ops[k], names[k]);
    ck_assert_int_ge(errors, 20);
}
END_TEST

// ---- the course's examples ----
static torc_tensor *arange_as(double scale, torc_dtype dt, int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    torc_tensor *a = torc_arange(0, (double)n, 1, dt);
    torc_tensor *s = torc_mul_scalar(a, torc_s(scale));
    torc_tensor *r = torc_reshape(s, ndim, shape);
    ck_assert_msg(r != NULL, "%s", torc_last_error());
    return r;
}

START_TEST(course_einsum_batch_seq1_seq2) {
    torc_scope_push();
    torc_tensor *x = arange_as(1, TORC_DTYPE_F32, TORC_SHAPE(2, 3, 4));
    torc_tensor *y = arange_as(-0.5, TORC_DTYPE_F32, TORC_SHAPE(2, 3, 4));
    torc_flops_reset();
    torc_tensor *s = TORC_EINSUM("batch seq1 hidden, batch seq2 hidden -> batch seq1 seq2", x, y);
    ck_assert_msg(s != NULL, "%s", torc_last_error());
    tu_assert_shape(s, 2, 3, 3);
    // One batched matmul: 2 * B * M * N * K FLOPs, and nothing else.
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, TORC_OP_MATMUL, -1), 2 * 2 * 3 * 3 * 4);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, -1, -1), 2 * 2 * 3 * 3 * 4);
    double want[18];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double acc = 0;
                for (int h = 0; h < 4; h++) acc += (double)(b * 12 + i * 4 + h) * -0.5 * (double)(b * 12 + j * 4 + h);
                want[(b * 3 + i) * 3 + j] = acc;
            }
    tu_assert_values(s, want, 18, 1e-6);
    // The torch spelling and the two-operand macro agree.
    torc_tensor *t = torc_einsum("bih,bjh->bij", 2, (torc_tensor *[]){x, y});
    tu_assert_values(t, want, 18, 1e-6);
    torc_scope_pop();
}
END_TEST

START_TEST(course_reduce_hidden_sum) {
    torc_scope_push();
    torc_tensor *x = arange_as(1, TORC_DTYPE_F32, TORC_SHAPE(2, 3, 4));
    torc_tensor *r = torc_reduce(x, "... hidden -> ...", "sum");
    ck_assert_msg(r != NULL, "%s", torc_last_error());
    tu_assert_shape(r, 2, 3);
    tu_assert_values(r, TU_ARR(6, 22, 38, 54, 70, 86), 0);
    tu_assert_values(torc_reduce(x, "... hidden -> ...", "max"), TU_ARR(3, 7, 11, 15, 19, 23), 0);
    tu_assert_values(torc_reduce(x, "... hidden -> ...", "mean"), TU_ARR(1.5, 5.5, 9.5, 13.5, 17.5, 21.5), 0);
    torc_scope_pop();
}
END_TEST

// Split heads (a view), a per-head einsum with w (4, 4), merge heads (a view of the einsum's
// result), on x (2, 3, 8); and split then merge gives x back, sharing its storage.
START_TEST(course_heads_split_einsum_merge_round_trip) {
    torc_scope_push();
    torc_tensor *x = arange_as(0.25, TORC_DTYPE_F64, TORC_SHAPE(2, 3, 8));
    torc_tensor *w = arange_as(-0.125, TORC_DTYPE_F64, TORC_SHAPE(4, 4));
    torc_tensor *h = torc_rearrange(x, "... (heads hidden) -> ... heads hidden", "heads=2");
    ck_assert_msg(h != NULL, "%s", torc_last_error());
    tu_assert_shape(h, 2, 3, 2, 4);
    tu_assert_strides(h, 24, 8, 4, 1);
    ck_assert(torc_same_storage(h, x));

    torc_tensor *back = torc_rearrange(h, "... heads hidden -> ... (heads hidden)", NULL);
    tu_assert_shape(back, 2, 3, 8);
    ck_assert(torc_same_storage(back, x));
    double xv[48];
    for (int i = 0; i < 48; i++) xv[i] = 0.25 * i;
    tu_assert_values(back, xv, 48, 0);

    torc_flops_reset();
    torc_tensor *y = TORC_EINSUM("b s heads hidden, hidden hidden2 -> b s heads hidden2", h, w);
    ck_assert_msg(y != NULL, "%s", torc_last_error());
    tu_assert_shape(y, 2, 3, 2, 4);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, -1, -1), 2 * 12 * 4 * 4);
    torc_tensor *m = torc_rearrange(y, "b s heads hidden -> b s (heads hidden)", NULL);
    tu_assert_shape(m, 2, 3, 8);
    ck_assert(torc_same_storage(m, y));
    double want[48];
    for (int r = 0; r < 12; r++)          // (b s heads) rows of 4
        for (int j = 0; j < 4; j++) {
            double acc = 0;
            for (int k = 0; k < 4; k++) acc += xv[r * 4 + k] * -0.125 * (k * 4 + j);
            want[r * 4 + j] = acc;
        }
    tu_assert_values(m, want, 48, 1e-12);
    torc_scope_pop();
}
END_TEST

// ---- views and copies ----
static uint64_t bytes_allocated_by(torc_tensor *(*f)(torc_tensor *const *), torc_tensor *const *args,
                                   torc_tensor **out) {
    torc_device *dev = torc_get_device(args[0]);
    torc_memory_stats before, after;
    torc_memory_reset_peak(dev);
    ck_assert_int_eq(torc_memory_stats_get(dev, &before), TORC_OK);
    *out = f(args);
    ck_assert_msg(*out != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_memory_stats_get(dev, &after), TORC_OK);
    return after.total_peak - before.total_in_use;
}

static torc_tensor *attention_scores(torc_tensor *const *a) { return TORC_EINSUM("b i h, b j h -> b i j", a[0], a[1]); }
static torc_tensor *merge_rows(torc_tensor *const *a) { return TORC_EINSUM("i j k, k l -> i j l", a[0], a[1]); }

START_TEST(einsum_contracts_views_without_copies) {
    torc_scope_push();
    torc_tensor *x = arange_as(1, TORC_DTYPE_F32, TORC_SHAPE(2, 3, 4));
    torc_tensor *y = arange_as(1, TORC_DTYPE_F32, TORC_SHAPE(2, 5, 4));
    torc_tensor *r;
    // Only the (2, 3, 5) f32 result is allocated: y is passed as a transposed view.
    ck_assert_uint_eq(bytes_allocated_by(attention_scores, (torc_tensor *[]){x, y}, &r), 2 * 3 * 5 * 4);
    tu_assert_shape(r, 2, 3, 5);
    // (i j) of a transposed operand cannot be merged as a view: one copy of it, then the result.
    torc_tensor *a = torc_permute(arange_as(1, TORC_DTYPE_F32, TORC_SHAPE(3, 2, 4)), 3, (int[]){1, 0, 2});
    torc_tensor *w = arange_as(1, TORC_DTYPE_F32, TORC_SHAPE(4, 5));
    ck_assert_uint_eq(bytes_allocated_by(merge_rows, (torc_tensor *[]){a, w}, &r), 2 * 3 * 4 * 4 + 2 * 3 * 5 * 4);
    tu_assert_shape(r, 2, 3, 5);
    torc_scope_pop();
}
END_TEST

START_TEST(einsum_single_operand_views) {
    torc_scope_push();
    torc_tensor *x = arange_as(1, TORC_DTYPE_F32, TORC_SHAPE(3, 3));
    torc_tensor *t = TORC_EINSUM("i j -> j i", x);
    ck_assert(torc_same_storage(t, x));
    tu_assert_strides(t, 1, 3);
    torc_tensor *d = TORC_EINSUM("i i -> i", x);  // the diagonal, as torch: a view
    ck_assert(torc_same_storage(d, x));
    tu_assert_strides(d, 4);
    tu_assert_values(d, TU_ARR(0, 4, 8), 0);
    tu_assert_values(TORC_EINSUM("i i ->", x), TU_ARR(12), 0);
    torc_scope_pop();
}
END_TEST

// Products that sum nothing are one broadcasting multiply (one FLOP per output element).
START_TEST(einsum_products_without_sums_multiply) {
    torc_scope_push();
    torc_tensor *a = arange_as(1, TORC_DTYPE_F32, TORC_SHAPE(3));
    torc_tensor *b = arange_as(2, TORC_DTYPE_F32, TORC_SHAPE(4));
    torc_flops_reset();
    torc_tensor *o = TORC_EINSUM("i, j -> i j", a, b);
    tu_assert_shape(o, 3, 4);
    tu_assert_values(o, TU_ARR(0, 0, 0, 0, 0, 2, 4, 6, 0, 4, 8, 12), 0);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, TORC_OP_MUL, -1), 12);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, TORC_OP_MATMUL, -1), 0);
    torc_tensor *o2 = TORC_EINSUM("j, i -> i j", b, a);  // the same, from the other side
    tu_assert_values(o2, TU_ARR(0, 0, 0, 0, 0, 2, 4, 6, 0, 4, 8, 12), 0);
    torc_scope_pop();
}
END_TEST

// An intermediate result wider than TORC_MAX_DIMS is an error, not a crash.
START_TEST(einsum_too_many_dims_is_an_error) {
    torc_scope_push();
    torc_tensor *a = torc_ones(TORC_SHAPE(1, 2, 1, 2, 1), TORC_DTYPE_F32);
    torc_tensor *b = torc_ones(TORC_SHAPE(2, 1, 2, 2), TORC_DTYPE_F32);
    torc_tensor *c = torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32);
    ck_assert_ptr_null(TORC_EINSUM("a b c d e, f g h i, i -> a b c d e f g h", a, b, c));
    tu_assert_error(TORC_ERR_INVALID_ARG, "torc tensors have at most 8");
    ck_assert_ptr_null(TORC_EINSUM("a b c d e, f g h i -> a b c d e f g h i", a, b));
    tu_assert_error(TORC_ERR_INVALID_ARG, "torc tensors have at most 8");
    torc_scope_pop();
}
END_TEST

START_TEST(rearrange_views_when_strides_allow) {
    torc_scope_push();
    torc_tensor *x = arange_as(1, TORC_DTYPE_F32, TORC_SHAPE(2, 3, 2, 4));
    torc_tensor *p = torc_rearrange(x, "b s h d -> b h s d", NULL);
    ck_assert(torc_same_storage(p, x));
    tu_assert_strides(p, 24, 4, 8, 1);
    torc_tensor *u = torc_rearrange(p, "b h s d -> b h 1 s () d", NULL);  // unit dims: a view
    ck_assert(torc_same_storage(u, x));
    tu_assert_shape(u, 2, 2, 1, 3, 1, 4);
    torc_tensor *m = torc_rearrange(x, "b s h d -> s b (h d)", NULL);     // h, d still adjacent: a view
    ck_assert(torc_same_storage(m, x));
    tu_assert_strides(m, 8, 24, 1);
    torc_tensor *c = torc_rearrange(x, "b s h d -> b (h s) d", NULL);     // h, s swapped: a copy
    ck_assert(!torc_same_storage(c, x));
    ck_assert(torc_is_contiguous(c));
    tu_assert_shape(c, 2, 6, 4);
    // Nothing to do: x itself, a new reference.
    torc_tensor *same = torc_rearrange(x, "b s h d -> b s h d", NULL);
    ck_assert_ptr_eq(same, x);
    torc_scope_pop();
}
END_TEST

START_TEST(repeat_expands_and_copies_only_to_merge) {
    torc_scope_push();
    torc_tensor *x = arange_as(1, TORC_DTYPE_F32, TORC_SHAPE(2, 3));
    torc_tensor *r = torc_repeat(x, "h w -> h w c", "c=3");
    ck_assert(torc_same_storage(r, x));
    tu_assert_shape(r, 2, 3, 3);
    tu_assert_strides(r, 3, 1, 0);
    torc_tensor *b = torc_repeat(x, "h w -> b h w", "b=4");
    tu_assert_strides(b, 0, 3, 1);
    torc_tensor *m = torc_repeat(x, "h w -> h (w c)", "c=2");
    ck_assert(!torc_same_storage(m, x));
    tu_assert_values(m, TU_ARR(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5), 0);
    torc_scope_pop();
}
END_TEST

// ---- errors beyond the goldens ----
START_TEST(bad_arguments_are_errors) {
    torc_scope_push();
    torc_tensor *x = arange_as(1, TORC_DTYPE_F32, TORC_SHAPE(2, 3));
    ck_assert_ptr_null(torc_rearrange(NULL, "a b -> b a", NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    torc_clear_error();  // a NULL argument keeps an error already set
    ck_assert_ptr_null(torc_rearrange(x, NULL, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "pattern is NULL");
    ck_assert_ptr_null(torc_rearrange(x, "a b", NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "->");
    torc_clear_error();
    ck_assert_ptr_null(torc_reduce(x, "a b -> a", NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "reduction is NULL");
    ck_assert_ptr_null(torc_rearrange(x, "a -> a", NULL));
    tu_assert_error(TORC_ERR_SHAPE, "Wrong shape: expected 1 dims. Received 2-dim tensor.");
    ck_assert_ptr_null(torc_rearrange(x, "a (b c) -> a b c", "b="));
    tu_assert_error(TORC_ERR_INVALID_ARG, "is not a non-negative integer");
    ck_assert_ptr_null(torc_rearrange(x, "a (b c) -> a b c", "b 2"));
    tu_assert_error(TORC_ERR_INVALID_ARG, "expected entries name=length");
    ck_assert_ptr_null(torc_rearrange(x, "a (b c) -> a b c", "b=3, b=3"));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Axis b is given a length twice");
    ck_assert_ptr_null(torc_rearrange(x, "a (b c) -> a b c", "_b=3"));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Invalid name for an axis");
    ck_assert_ptr_null(torc_rearrange(x, "a b -> a b 0", NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Anonymous axis should have positive length, not 0");
    // The message names the pattern, the shape and the axes, as einops does.
    ck_assert_ptr_null(torc_rearrange(x, "a (b c) -> a b c", "b=2"));
    ck_assert_str_eq(torc_last_error(), "Error while processing rearrange-reduction pattern \"a (b c) -> a b c\" "
                                        "(input shape [2, 3], axes \"b=2\"): Shape mismatch, can't divide axis of "
                                        "length 3 in chunks of 2");
    torc_clear_error();
    ck_assert_ptr_null(torc_einsum(NULL, 1, &x));
    tu_assert_error(TORC_ERR_INVALID_ARG, "equation is NULL");
    ck_assert_ptr_null(torc_einsum("i j -> j i", 0, &x));
    tu_assert_error(TORC_ERR_INVALID_ARG, "at least one operand");
    torc_clear_error();
    ck_assert_ptr_null(torc_einsum("i j -> j i", 1, (torc_tensor *[]){NULL}));
    tu_assert_error(TORC_ERR_INVALID_ARG, "operand 0 is NULL");
    ck_assert_ptr_null(TORC_EINSUM("i j -> i j, i j", x));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Unknown character ','");
    ck_assert_ptr_null(TORC_EINSUM("i j, i j -> i j", x));
    tu_assert_error(TORC_ERR_INVALID_ARG, "fewer operands were provided");
    ck_assert_ptr_null(TORC_EINSUM("i j -> j i", x, x));
    tu_assert_error(TORC_ERR_INVALID_ARG, "more operands were provided");
    ck_assert_ptr_null(TORC_EINSUM("i1 j -> i1 j 2", x));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Anonymous axes (2) are not supported in einsum");
    ck_assert_ptr_null(TORC_EINSUM("i.. -> i", x));
    tu_assert_error(TORC_ERR_INVALID_ARG, "dots only inside ellipsis");
    ck_assert_ptr_null(TORC_EINSUM("i-j->ij", x));
    tu_assert_error(TORC_ERR_INVALID_ARG, "subscripts must be in [a-zA-Z]");
    ck_assert_ptr_null(TORC_EINSUM("i j k ... -> i", x));
    tu_assert_error(TORC_ERR_SHAPE, "is more than the number of dimensions (2)");
    torc_scope_pop();
}
END_TEST


// ---- gradients (finite differences in f64) ----
// loss = sum(f(inputs) * w) with fixed weights w; the analytic gradient of every input from
// torc_backward is compared with central differences.
typedef torc_tensor *(*gc_fn)(torc_tensor *const *in);
typedef struct gc_in {
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
} gc_in;

static double gc_loss(gc_fn f, int n, const gc_in *spec, double *const *vals, double **grads) {
    torc_scope_push();
    torc_tensor *in[G_MAX_IN];
    for (int k = 0; k < n; k++) {
        in[k] = torc_tensor_from(vals[k], spec[k].ndim, spec[k].shape, TORC_DTYPE_F64);
        ck_assert_msg(in[k] != NULL, "%s", torc_last_error());
        if (grads) ck_assert_int_eq(torc_set_requires_grad(in[k], true), TORC_OK);
    }
    torc_tensor *out = f(in);
    ck_assert_msg(out != NULL, "%s", torc_last_error());
    const int64_t m = torc_numel(out);
    double *w = malloc(sizeof(double) * (size_t)(m ? m : 1));
    for (int64_t i = 0; i < m; i++) w[i] = sin(0.7 * (double)i + 0.3);
    torc_tensor *wt = torc_tensor_from(w, torc_ndim(out), torc_shape(out), TORC_DTYPE_F64);
    free(w);
    torc_tensor *loss = torc_sum(torc_mul(out, wt), TORC_ALL_DIMS, false);
    ck_assert_msg(loss != NULL, "%s", torc_last_error());
    double v;
    ck_assert_int_eq(torc_item(loss, &v), TORC_OK);
    if (grads) {
        ck_assert_msg(torc_backward(loss, NULL, false) == TORC_OK, "backward: %s", torc_last_error());
        for (int k = 0; k < n; k++) {
            torc_tensor *g = torc_grad(in[k]);
            ck_assert_msg(g != NULL, "input %d has no gradient", k);
            tu_assert_dims_at(__FILE__, __LINE__, "grad shape", torc_ndim(g), torc_shape(g), spec[k].ndim,
                              spec[k].shape);
            double *gv = tu_values(g);
            memcpy(grads[k], gv, sizeof(double) * (size_t)torc_numel(g));
            free(gv);
        }
    }
    torc_scope_pop();
    return v;
}

static void grad_check(const char *what, gc_fn f, int n, const gc_in *spec) {
    double *vals[G_MAX_IN] = {0}, *grads[G_MAX_IN] = {0};
    int64_t numel[G_MAX_IN];
    for (int k = 0; k < n; k++) {
        numel[k] = 1;
        for (int d = 0; d < spec[k].ndim; d++) numel[k] *= spec[k].shape[d];
        vals[k] = malloc(sizeof(double) * (size_t)numel[k]);
        grads[k] = malloc(sizeof(double) * (size_t)numel[k]);
        for (int64_t i = 0; i < numel[k]; i++) vals[k][i] = sin(1.3 * (double)i + 0.9 * k + 0.1) + 0.05 * (double)i;
    }
    gc_loss(f, n, spec, vals, grads);
    const double eps = 1e-6;
    for (int k = 0; k < n; k++)
        for (int64_t i = 0; i < numel[k]; i++) {
            const double keep = vals[k][i];
            vals[k][i] = keep + eps;
            const double up = gc_loss(f, n, spec, vals, NULL);
            vals[k][i] = keep - eps;
            const double down = gc_loss(f, n, spec, vals, NULL);
            vals[k][i] = keep;
            const double num = (up - down) / (2 * eps);
            ck_assert_msg(fabs(num - grads[k][i]) <= 1e-6 * (1 + fabs(num)),
                          "%s: d loss / d input%d[%lld] = %.12g, finite differences %.12g", what, k, (long long)i,
                          grads[k][i], num);
        }
    for (int k = 0; k < n; k++) free(vals[k]), free(grads[k]);
}

static torc_tensor *g_attention(torc_tensor *const *a) { return TORC_EINSUM("b i h, b j h -> b i j", a[0], a[1]); }
static torc_tensor *g_chain(torc_tensor *const *a) { return TORC_EINSUM("a b, b c, c d -> a d", a[0], a[1], a[2]); }
static torc_tensor *g_diag(torc_tensor *const *a) { return TORC_EINSUM("i i -> i", a[0]); }
static torc_tensor *g_trace_sum(torc_tensor *const *a) { return TORC_EINSUM("b i i -> b", a[0]); }
static torc_tensor *g_broadcast(torc_tensor *const *a) { return TORC_EINSUM("i j, i j -> i j", a[0], a[1]); }
static torc_tensor *g_ellipsis(torc_tensor *const *a) { return TORC_EINSUM("... j, ... j k -> k", a[0], a[1]); }
static torc_tensor *g_heads(torc_tensor *const *a) {
    torc_tensor *h = torc_rearrange(a[0], "b s (heads hidden) -> b heads s hidden", "heads=2");
    torc_tensor *y = TORC_EINSUM("b heads s hidden, hidden out -> b heads s out", h, a[1]);
    return torc_rearrange(y, "b heads s out -> b s (heads out)", NULL);
}
static torc_tensor *g_merge_copy(torc_tensor *const *a) {  // (i j) of a transposed operand: a copy
    return TORC_EINSUM("i j k, k l -> i j l", torc_permute(a[0], TORC_DIMS(1, 0, 2)), a[1]);
}
static torc_tensor *g_interleave(torc_tensor *const *a) {
    return torc_rearrange(a[0], "(b1 b2) h w -> (b1 h) (b2 w)", "b1=2");
}
static torc_tensor *g_max_pool(torc_tensor *const *a) { return torc_reduce(a[0], "b (h 2) (w 2) -> b h w", "max"); }
static torc_tensor *g_mean(torc_tensor *const *a) { return torc_reduce(a[0], "b c h -> c ()", "mean"); }
static torc_tensor *g_prod(torc_tensor *const *a) { return torc_reduce(a[0], "t b -> b", "prod"); }
static torc_tensor *g_repeat(torc_tensor *const *a) { return torc_repeat(a[0], "h w -> (c h) w k", "c=2, k=3"); }

START_TEST(gradients_match_finite_differences) {
    grad_check("einsum attention", g_attention, 2, (gc_in[]){{3, {2, 3, 4}}, {3, {2, 2, 4}}});
    grad_check("einsum three operands", g_chain, 3, (gc_in[]){{2, {2, 3}}, {2, {3, 4}}, {2, {4, 2}}});
    grad_check("einsum diagonal", g_diag, 1, (gc_in[]){{2, {3, 3}}});
    grad_check("einsum batched trace", g_trace_sum, 1, (gc_in[]){{3, {2, 3, 3}}});
    grad_check("einsum broadcast unit dim", g_broadcast, 2, (gc_in[]){{2, {1, 3}}, {2, {2, 3}}});
    grad_check("einsum ellipsis summed", g_ellipsis, 2, (gc_in[]){{2, {2, 3}}, {3, {2, 3, 2}}});
    grad_check("einsum merging a transposed operand", g_merge_copy, 2, (gc_in[]){{3, {3, 2, 4}}, {2, {4, 2}}});
    grad_check("split heads, einsum, merge", g_heads, 2, (gc_in[]){{3, {2, 3, 8}}, {2, {4, 3}}});
    grad_check("rearrange interleave (copy)", g_interleave, 1, (gc_in[]){{3, {4, 2, 3}}});
    grad_check("reduce max pool", g_max_pool, 1, (gc_in[]){{3, {2, 4, 4}}});
    grad_check("reduce mean keep unit", g_mean, 1, (gc_in[]){{3, {2, 3, 2}}});
    grad_check("reduce prod", g_prod, 1, (gc_in[]){{2, {3, 2}}});
    grad_check("repeat tile and expand", g_repeat, 1, (gc_in[]){{2, {2, 3}}});
}
END_TEST

static Suite *einsum_suite(void) {
    Suite *s = suite_create("einsum");
    TCase *tc = tcase_create("golden");
    tcase_add_test(tc, golden_file_covers_every_operation_and_error_kind);
    tcase_add_loop_test(tc, golden_case, 0, g_n);
    suite_add_tcase(s, tc);
    tc = tcase_create("course");
    tcase_add_test(tc, course_einsum_batch_seq1_seq2);
    tcase_add_test(tc, course_reduce_hidden_sum);
    tcase_add_test(tc, course_heads_split_einsum_merge_round_trip);
    suite_add_tcase(s, tc);
    tc = tcase_create("views");
    tcase_add_test(tc, einsum_contracts_views_without_copies);
    tcase_add_test(tc, einsum_single_operand_views);
    tcase_add_test(tc, einsum_products_without_sums_multiply);
    tcase_add_test(tc, einsum_too_many_dims_is_an_error);
    tcase_add_test(tc, rearrange_views_when_strides_allow);
    tcase_add_test(tc, repeat_expands_and_copies_only_to_merge);
    suite_add_tcase(s, tc);
    tc = tcase_create("autograd");
    tcase_add_test(tc, gradients_match_finite_differences);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, bad_arguments_are_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    load_cases();
    int rc = tu_run(einsum_suite());
    free_cases();
    return rc;
}
