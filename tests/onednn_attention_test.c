// tests/onednn_attention_test.c — the oneDNN backend's fused attention (ATTENTION, ATTENTION_BACKWARD)
// against the reference backend on the same operands: sizes around its 64-row tiles, head sizes,
// causal or not, strided and broadcast q / k / v, f32 / bf16 / f16, a sampler's steps (1 to 4 query rows
// against a KV cache's first S rows), the same bits at 1, 2 and 3 threads and from the backward's one
// pass and two.
// ctest runs it natively and under TORC_MAX_CPU_ISA=AVX2 and =AVX (the plain-C path).
#define _POSIX_C_SOURCE 200809L  // setenv, strdup
#include <omp.h>

#include "testutil.h"

static torc_device *g_ref, *g_dnn;

static void setup(void) {
    g_ref = torc_device_get("reference");
    g_dnn = torc_device_get("onednn");
    ck_assert_msg(g_ref && g_dnn, "%s", torc_last_error());
}

// How q, k and v are laid out.
typedef enum layout {
    DENSE,      // contiguous (B, H, rows, E)
    GPT_SPLIT,  // GPT's split heads: q, k, v slices of a (B, T, 3, H, E) tensor, permuted to (B, H, T, E)
    BCAST,      // k and v one (rows, E) matrix expanded over B and H (strides 0)
    CACHE,      // k and v the first S rows of a (B, H, S + CACHE_SPARE, E) KV cache, as a sampler's
} layout;

enum { CACHE_SPARE = 37 };

typedef struct att_case {
    int64_t B, H, L, S, E, Ev;
    int causal;
    torc_dtype dt;
    layout lay;
    bool out_t;  // the backend's outputs o, dq, dk, dv written through transposed views (feature stride != 1)
} att_case;

static torc_tensor *randn(int ndim, const int64_t *shape, torc_dtype dt, uint64_t seed) {
    torc_generator *g = torc_generator_new(seed);
    torc_tensor *t = torc_randn(ndim, shape, TORC_DTYPE_F32, g);
    torc_generator_free(g);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return dt == TORC_DTYPE_F32 ? t : torc_to_dtype(t, dt);
}

// q, k, v on dev (the same storage for every host device: built once, viewed on each).
static void make_qkv(const att_case *c, torc_tensor *base[3], torc_device *dev, torc_tensor *qkv[3]) {
    for (int i = 0; i < 3; i++) {
        torc_tensor *t = torc_to_device(base[i], dev);
        ck_assert_msg(t != NULL, "%s", torc_last_error());
        if (c->lay == GPT_SPLIT) {  // base[0] is the (B, T, 3, H, E) tensor
            t = torc_permute(torc_select(torc_to_device(base[0], dev), 2, i), 4, (const int[]){0, 2, 1, 3});
        } else if (c->lay == CACHE && i > 0) {
            t = torc_narrow(t, 2, 0, c->S);
        } else if (c->lay == BCAST && i > 0) {
            const int64_t rows = c->S, f = i == 1 ? c->E : c->Ev;
            t = torc_expand(torc_reshape(t, 4, (const int64_t[]){1, 1, rows, f}), 4,
                            (const int64_t[]){c->B, c->H, rows, f});
        }
        ck_assert_msg(t != NULL, "%s", torc_last_error());
        qkv[i] = t;
    }
}

static void make_bases(const att_case *c, torc_tensor *base[3], uint64_t seed) {
    if (c->lay == GPT_SPLIT) {
        base[0] = base[1] = base[2] = randn(5, (const int64_t[]){c->B, c->L, 3, c->H, c->E}, c->dt, seed);
        return;
    }
    const bool bc = c->lay == BCAST;
    const int64_t rows = c->S + (c->lay == CACHE ? CACHE_SPARE : 0);
    base[0] = randn(4, (const int64_t[]){c->B, c->H, c->L, c->E}, c->dt, seed);
    base[1] = bc ? randn(2, (const int64_t[]){c->S, c->E}, c->dt, seed + 1)
                 : randn(4, (const int64_t[]){c->B, c->H, rows, c->E}, c->dt, seed + 1);
    base[2] = bc ? randn(2, (const int64_t[]){c->S, c->Ev}, c->dt, seed + 2)
                 : randn(4, (const int64_t[]){c->B, c->H, rows, c->Ev}, c->dt, seed + 2);
}

static torc_tensor *empty_on(torc_device *dev, int ndim, const int64_t *shape, torc_dtype dt) {
    torc_tensor *t = torc_to_device(torc_empty(ndim, shape, dt), dev);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

// An output (B, H, rows, f) on dev: contiguous, or (out_t, the backend's) the transpose of a
// contiguous (B, H, f, rows).
static torc_tensor *empty_out(torc_device *dev, const att_case *c, bool native, int64_t rows, int64_t f) {
    if (!(native && c->out_t)) return empty_on(dev, 4, (const int64_t[]){c->B, c->H, rows, f}, c->dt);
    torc_tensor *t = torc_transpose(empty_on(dev, 4, (const int64_t[]){c->B, c->H, f, rows}, c->dt), 2, 3);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

static torc_op_params params_of(const att_case *c) {
    torc_op_params p;
    memset(&p, 0, sizeof p);
    p.attention.scale = 1.0 / sqrt((double)c->E);
    p.attention.causal = c->causal;
    return p;
}

// ONEDNN_ATTENTION_DUMP=file: every output the backend computes appended to file as its bytes, in
// the test's order: two builds whose files are the same give the same bits on every case.
static void dump(torc_tensor *t) {
    const char *path = getenv("ONEDNN_ATTENTION_DUMP");
    if (!path || !*path) return;
    const size_t n = torc_nbytes(t);
    void *buf = malloc(n ? n : 1);
    FILE *f = fopen(path, "ab");
    ck_assert_msg(buf && f, "ONEDNN_ATTENTION_DUMP: cannot append to %s", path);
    ck_assert_int_eq(torc_copy_to_host(t, buf, n), TORC_OK);
    ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
}

// Forward on dev: o (B, H, L, Ev) and lse (B, H, L). native: the backend's own kernel, which must take it.
static void forward_on(torc_device *dev, const att_case *c, torc_tensor *qkv[3], bool native, torc_tensor **o,
                       torc_tensor **lse) {
    *o = empty_out(dev, c, native, c->L, c->Ev);
    *lse = empty_on(dev, 3, (const int64_t[]){c->B, c->H, c->L}, TORC_DTYPE_F32);
    torc_op_call call = {.code = TORC_OP_ATTENTION, .n_in = 3, .n_out = 2, .in = {qkv[0], qkv[1], qkv[2]},
                         .out = {*o, *lse}, .params = params_of(c)};
    if (native) ck_assert_msg(torc_op_supported(dev, &call) == TORC_OK, "onednn declines: %s", torc_last_error());
    ck_assert_msg(torc_run_op(dev, &call, native ? TORC_RUN_NATIVE : 0) == TORC_OK, "%s", torc_last_error());
    if (native) dump(*o), dump(*lse);
}

// Backward on dev from do, o and lse: dq, dk, dv.
static void backward_on(torc_device *dev, const att_case *c, torc_tensor *qkv[3], torc_tensor *dout, torc_tensor *o,
                        torc_tensor *lse, bool native, torc_tensor *g[3]) {
    g[0] = empty_out(dev, c, native, c->L, c->E);
    g[1] = empty_out(dev, c, native, c->S, c->E);
    g[2] = empty_out(dev, c, native, c->S, c->Ev);
    torc_op_call call = {.code = TORC_OP_ATTENTION_BACKWARD, .n_in = 6, .n_out = 3,
                         .in = {torc_to_device(dout, dev), qkv[0], qkv[1], qkv[2], torc_to_device(o, dev),
                                torc_to_device(lse, dev)},
                         .out = {g[0], g[1], g[2]}, .params = params_of(c)};
    if (native) ck_assert_msg(torc_op_supported(dev, &call) == TORC_OK, "onednn declines: %s", torc_last_error());
    ck_assert_msg(torc_run_op(dev, &call, native ? TORC_RUN_NATIVE : 0) == TORC_OK, "%s", torc_last_error());
    for (int i = 0; native && i < 3; i++) dump(g[i]);
}

// The unit round-off of the output dtype: f32's 2^-24, bf16's 2^-8, f16's 2^-11.
static double unit(torc_dtype dt) {
    return dt == TORC_DTYPE_BF16 ? 0x1p-8 : dt == TORC_DTYPE_F16 ? 0x1p-11 : 0x1p-24;
}

// Compares got with want (the reference's) in groups of `group` rows of n: |got - want| <= tol
// (big + floor), big the largest |want| of the group (floor: where the group's values are 0 exactly,
// as dq and dk of a row that attends one key, whose terms are not). Returns the largest
// ratio |got - want| / scale seen (for the report) and fails past tol.
static double compare_rows(torc_tensor *got, torc_tensor *want, int64_t n, int64_t group, double tol, double floor,
                           const char *what, const att_case *c) {
    const int64_t total = torc_numel(want);
    ck_assert_int_eq(torc_numel(got), total);
    if (total == 0 || n == 0) return 0;
    double *x = tu_values(got), *y = tu_values(want), worst = 0;
    for (int64_t g0 = 0; g0 < total; g0 += group * n) {
        const int64_t g1 = g0 + group * n < total ? g0 + group * n : total;
        double big = 0;
        for (int64_t i = g0; i < g1; i++) big = fmax(big, fabs(y[i]));
        for (int64_t i = g0; i < g1; i++) {
            const double err = fabs(x[i] - y[i]), lim = tol * (big + floor);
            if (!(err <= lim))
                ck_abort_msg("%s (B %lld H %lld L %lld S %lld E %lld Ev %lld causal %d %s layout %d): element %lld is "
                             "%.9g, the reference %.9g (tolerance %.3g of %.3g)", what, (long long)c->B, (long long)c->H,
                             (long long)c->L, (long long)c->S, (long long)c->E, (long long)c->Ev, c->causal,
                             torc_dtype_name(c->dt), (int)c->lay, (long long)i, x[i], y[i], tol, big);
            if (big > 0) worst = fmax(worst, err / big);
        }
    }
    free(x);
    free(y);
    return worst;
}

// lse: |got - want| <= tol (1 + |want|); -inf where the reference has it.
static void compare_lse(torc_tensor *got, torc_tensor *want, double tol) {
    const int64_t n = torc_numel(want);
    double *x = tu_values(got), *y = tu_values(want);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(x[i] == y[i] || fabs(x[i] - y[i]) <= tol * (1 + fabs(y[i])), "lse %lld: %.9g, the reference %.9g",
                      (long long)i, x[i], y[i]);
    free(x);
    free(y);
}

// The tolerances, as multiples of the output dtype's unit round-off of the largest value compared:
// o per row, the gradients per (b, h) matrix (their sums cancel: ds = p (dp - D)). f32 within 4e-6
// of the row (o; 1.9e-6 seen, at E = 256 where a score sums 256 products in f32) and 1e-5 of the
// matrix (gradients; 2.1e-6 seen); bf16 / f16 two units of their own plus that.
static double tol_o(torc_dtype dt) { return dt == TORC_DTYPE_F32 ? 4e-6 : 2 * unit(dt) + 4e-6; }
static double tol_grad(torc_dtype dt) { return dt == TORC_DTYPE_F32 ? 1e-5 : 2 * unit(dt) + 1e-5; }

// The largest f32 errors a test saw, as fractions of the largest |value| compared (o: of its row;
// gradients: of their (b, h) matrix), printed at its end: the margin under the tolerances.
static double g_worst_o, g_worst_g;
static void report(const char *test) {
    printf("%s: worst f32 error: o %.3g of its row, gradients %.3g of their matrix\n", test, g_worst_o, g_worst_g);
    g_worst_o = g_worst_g = 0;
}

static void check_case(const att_case *c, uint64_t seed) {
    torc_scope_push();
    torc_tensor *base[3], *qr[3], *qd[3];
    make_bases(c, base, seed);
    make_qkv(c, base, g_ref, qr);
    make_qkv(c, base, g_dnn, qd);
    torc_tensor *o_r, *l_r, *o_d, *l_d;
    forward_on(g_ref, c, qr, false, &o_r, &l_r);
    forward_on(g_dnn, c, qd, true, &o_d, &l_d);
    const double wo = compare_rows(o_d, o_r, c->Ev, 1, tol_o(c->dt), 0.01, "o", c);
    compare_lse(l_d, l_r, c->dt == TORC_DTYPE_F32 ? 2e-6 : 4e-6);
    // The backward of both from the reference's o and lse, so that it is compared alone.
    torc_tensor *dout = randn(4, (const int64_t[]){c->B, c->H, c->L, c->Ev}, c->dt, seed + 7);
    torc_tensor *gr[3], *gd[3];
    backward_on(g_ref, c, qr, dout, o_r, l_r, false, gr);
    backward_on(g_dnn, c, qd, dout, o_r, l_r, true, gd);
    const int64_t rows[3] = {c->L, c->S, c->S}, feats[3] = {c->E, c->E, c->Ev};
    const char *names[3] = {"dq", "dk", "dv"};
    // The gradients' floor: dv's largest value (p do: the size of the terms ds = p (dp - D) sums).
    double *dv = tu_values(gr[2]), floor = 0.01;
    for (int64_t i = 0; i < torc_numel(gr[2]); i++) floor = fmax(floor, fabs(dv[i]));
    free(dv);
    double wg = 0;
    for (int i = 0; i < 3; i++)
        wg = fmax(wg, compare_rows(gd[i], gr[i], feats[i], rows[i], tol_grad(c->dt), floor, names[i], c));
    if (c->dt == TORC_DTYPE_F32) g_worst_o = fmax(g_worst_o, wo), g_worst_g = fmax(g_worst_g, wg);
    torc_scope_pop();
}

// ---- sizes around the tiles (64 rows), f32, causal and not ----
static const int64_t LS[][2] = {{1, 1}, {63, 63}, {64, 64}, {65, 65}, {131, 131}, {1, 131}, {131, 1},
                                {65, 200}, {200, 65}, {129, 64}, {64, 129}};
enum { N_LS = sizeof LS / sizeof LS[0] };

START_TEST(tile_edges_match_the_reference) {
    setup();
    for (int causal = 0; causal < 2; causal++) {
        const att_case c = {.B = 2, .H = 2, .L = LS[_i][0], .S = LS[_i][1], .E = 64, .Ev = 64, .causal = causal,
                            .dt = TORC_DTYPE_F32, .lay = DENSE};
        check_case(&c, 100 + (uint64_t)_i);
    }
    report("tile_edges_match_the_reference");
}
END_TEST

START_TEST(long_sequence_matches_the_reference) {
    setup();
    for (int causal = 0; causal < 2; causal++) {
        const att_case c = {.B = 1, .H = 1, .L = 512, .S = 512, .E = 64, .Ev = 64, .causal = causal,
                            .dt = TORC_DTYPE_F32, .lay = DENSE};
        check_case(&c, 200);
    }
    report("long_sequence_matches_the_reference");
}
END_TEST

// ---- head sizes, Ev != E ----
static const int64_t EEV[][2] = {{16, 16}, {32, 32}, {80, 80}, {128, 128}, {64, 32}, {32, 80}, {256, 256}, {1, 3}};
enum { N_EEV = sizeof EEV / sizeof EEV[0] };

START_TEST(head_sizes_match_the_reference) {
    setup();
    for (int causal = 0; causal < 2; causal++) {
        const att_case c = {.B = 1, .H = 3, .L = 70, .S = 70, .E = EEV[_i][0], .Ev = EEV[_i][1], .causal = causal,
                            .dt = TORC_DTYPE_F32, .lay = DENSE};
        check_case(&c, 300 + (uint64_t)_i);
    }
    report("head_sizes_match_the_reference");
}
END_TEST

// ---- layouts: GPT's split heads, k and v broadcast over batch and heads ----
START_TEST(strided_and_broadcast_operands_match_the_reference) {
    setup();
    for (int causal = 0; causal < 2; causal++) {
        const att_case split = {.B = 2, .H = 3, .L = 77, .S = 77, .E = 32, .Ev = 32, .causal = causal,
                                .dt = TORC_DTYPE_F32, .lay = GPT_SPLIT};
        check_case(&split, 400);
        const att_case bc = {.B = 2, .H = 2, .L = 66, .S = 90, .E = 48, .Ev = 24, .causal = causal,
                             .dt = TORC_DTYPE_F32, .lay = BCAST, .out_t = causal};
        check_case(&bc, 410);
    }
    report("strided_and_broadcast_operands_match_the_reference");
}
END_TEST

// ---- bf16, f16: loaded exactly, f32 inside, each output rounded once ----
// Dense, GPT's split heads, k and v broadcast (strides 0) or a KV cache's first rows, L != S, E != Ev,
// head sizes off the 16-float vectors, outputs through strided views (rounded element by element).
START_TEST(half_dtypes_match_the_reference) {
    setup();
    const torc_dtype dts[2] = {TORC_DTYPE_BF16, TORC_DTYPE_F16};
    for (int d = 0; d < 2; d++)
        for (int causal = 0; causal < 2; causal++) {
            const att_case dense = {.B = 2, .H = 2, .L = 65, .S = 131, .E = 64, .Ev = 80, .causal = causal,
                                    .dt = dts[d], .lay = DENSE};
            check_case(&dense, 500 + (uint64_t)d);
            const att_case split = {.B = 1, .H = 2, .L = 100, .S = 100, .E = 32, .Ev = 32, .causal = causal,
                                    .dt = dts[d], .lay = GPT_SPLIT};
            check_case(&split, 510 + (uint64_t)d);
            const att_case bc = {.B = 2, .H = 2, .L = 130, .S = 70, .E = 40, .Ev = 24, .causal = causal, .dt = dts[d],
                                 .lay = BCAST, .out_t = d == causal};
            check_case(&bc, 520 + (uint64_t)d);
            const att_case cache = {.B = 1, .H = 2, .L = 70, .S = 150, .E = 48, .Ev = 72, .causal = causal,
                                    .dt = dts[d], .lay = CACHE, .out_t = d != causal};
            check_case(&cache, 530 + (uint64_t)d);
        }
}
END_TEST

// ---- a sampler's steps: at most 4 query rows (the decode path: dot products a key, not tiles) ----
// Every L of the path, key counts around its 64-key tiles and up to a 1024-token window, head sizes
// read in place (f32, 32 / 64 / 96 features; bf16 and f16 from AVX2 up, 40 too) or through a tile
// (f32 with 40; bf16 and f16 below AVX2), k and v the first S rows of a KV cache (row stride past
// S) or dense, causal (top-left: query i sees keys 0..i) and not. The backward of the same shapes
// runs the tile path.
static const int64_t DEC_S[] = {1, 2, 3, 15, 16, 17, 63, 64, 65, 100, 129, 900, 1100};
enum { N_DEC_S = sizeof DEC_S / sizeof DEC_S[0] };

START_TEST(decode_shapes_match_the_reference) {
    setup();
    const int64_t S = DEC_S[_i], Es[4] = {32, 64, 96, 40};
    const torc_dtype dts[3] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F16};
    for (int64_t L = 1; L <= 4; L++)
        for (int e = 0; e < 4; e++)
            for (int d = 0; d < 3; d++) {
                if (d == 2 && !((e == 1 || e == 3) && (L == 1 || L == 4))) continue;  // f16: its conversion's cases
                const att_case c = {.B = 1, .H = 2, .L = L, .S = S, .E = Es[e], .Ev = Es[e], .causal = (int)((L + e) % 2),
                                    .dt = dts[d], .lay = (L + e + d) % 3 ? CACHE : DENSE};
                check_case(&c, 900 + (uint64_t)(_i * 64 + L * 12 + e * 3 + d));
            }
    // v narrower and wider than k, q and k of GPT's split heads (S = L: the prompt of a short one)
    const att_case ev[3] = {{.B = 2, .H = 3, .L = 1, .S = S, .E = 64, .Ev = 32, .dt = TORC_DTYPE_F32, .lay = CACHE},
                            {.B = 1, .H = 2, .L = 2, .S = S, .E = 32, .Ev = 80, .causal = 1, .dt = TORC_DTYPE_F32,
                             .lay = CACHE},
                            {.B = 2, .H = 2, .L = 3, .S = 3, .E = 32, .Ev = 32, .causal = 1, .dt = TORC_DTYPE_F32,
                             .lay = GPT_SPLIT}};
    for (int i = 0; i < 3; i++) check_case(&ev[i], 1900 + (uint64_t)i);
    report("decode_shapes_match_the_reference");
}
END_TEST

// ---- no keys, no queries ----
START_TEST(empty_sides_match_the_reference) {
    setup();
    const att_case none[] = {{.B = 1, .H = 2, .L = 5, .S = 0, .E = 16, .Ev = 16, .dt = TORC_DTYPE_F32},
                             {.B = 1, .H = 2, .L = 0, .S = 5, .E = 16, .Ev = 16, .dt = TORC_DTYPE_F32}};
    for (int i = 0; i < 2; i++) check_case(&none[i], 600 + (uint64_t)i);
}
END_TEST

// ---- what it declines: f64 and head sizes over 256 (the core composes those) ----
START_TEST(declines_f64_and_large_heads) {
    setup();
    const att_case cs[2] = {{.B = 1, .H = 1, .L = 8, .S = 8, .E = 16, .Ev = 16, .dt = TORC_DTYPE_F64},
                            {.B = 1, .H = 1, .L = 8, .S = 8, .E = 264, .Ev = 16, .dt = TORC_DTYPE_F32}};
    for (int i = 0; i < 2; i++) {
        torc_scope_push();
        torc_tensor *base[3], *qkv[3];
        make_bases(&cs[i], base, 700);
        make_qkv(&cs[i], base, g_dnn, qkv);
        torc_tensor *o = empty_on(g_dnn, 4, (const int64_t[]){1, 1, 8, 16}, cs[i].dt);
        torc_tensor *lse = empty_on(g_dnn, 3, (const int64_t[]){1, 1, 8},
                                    cs[i].dt == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32);
        torc_op_call call = {.code = TORC_OP_ATTENTION, .n_in = 3, .n_out = 2, .in = {qkv[0], qkv[1], qkv[2]},
                             .out = {o, lse}, .params = params_of(&cs[i])};
        ck_assert_int_eq(torc_op_supported(g_dnn, &call), TORC_ERR_NOT_SUPPORTED);
        ck_assert_msg(strstr(torc_last_error(), i ? "head sizes up to 256" : "float64"), "%s", torc_last_error());
        torc_scope_pop();
    }
}
END_TEST

// ---- the same bits at 1, 2 and 3 threads ----
static void run_at(int threads, const att_case *c, torc_tensor *qkv[3], torc_tensor *dout, double **out) {
    omp_set_num_threads(threads);
    torc_scope_push();
    torc_tensor *o, *lse, *g[3];
    forward_on(g_dnn, c, qkv, true, &o, &lse);
    backward_on(g_dnn, c, qkv, dout, o, lse, true, g);
    out[0] = tu_values(o), out[1] = tu_values(lse);
    for (int i = 0; i < 3; i++) out[2 + i] = tu_values(g[i]);
    torc_scope_pop();
}

START_TEST(results_do_not_depend_on_the_thread_count) {
    setup();
    const char *env = getenv("TORC_NUM_THREADS");
    if (env && *env) {
        fprintf(stderr, "onednn_attention: TORC_NUM_THREADS is set, so the thread counts are not the test's\n");
        return;
    }
    const int nthr0 = omp_get_max_threads();
    const char *penv = getenv("TORC_ONEDNN_ATTENTION_PASSES");
    char *saved = penv ? strdup(penv) : NULL;
    // f32 dense, the decode path's (one task a (b, h)), and bf16 / f16 operands (GPT's split heads, k
    // and v broadcast) with the backward in two passes (its tasks a key or a query tile).
    const att_case cs[6] = {
        {.B = 2, .H = 3, .L = 200, .S = 150, .E = 64, .Ev = 48, .dt = TORC_DTYPE_F32, .lay = DENSE},
        {.B = 2, .H = 3, .L = 200, .S = 150, .E = 64, .Ev = 48, .causal = 1, .dt = TORC_DTYPE_F32, .lay = DENSE},
        {.B = 2, .H = 3, .L = 3, .S = 1000, .E = 64, .Ev = 48, .dt = TORC_DTYPE_F32, .lay = CACHE},
        {.B = 2, .H = 3, .L = 3, .S = 1000, .E = 64, .Ev = 48, .causal = 1, .dt = TORC_DTYPE_F32, .lay = CACHE},
        {.B = 1, .H = 3, .L = 200, .S = 200, .E = 64, .Ev = 64, .causal = 1, .dt = TORC_DTYPE_BF16, .lay = GPT_SPLIT},
        {.B = 1, .H = 3, .L = 150, .S = 200, .E = 40, .Ev = 24, .dt = TORC_DTYPE_F16, .lay = BCAST}};
    for (int i = 0; i < 6; i++) {
        const att_case c = cs[i];
        if (i >= 4) setenv("TORC_ONEDNN_ATTENTION_PASSES", "2", 1);
        torc_scope_push();
        torc_tensor *base[3], *qkv[3];
        make_bases(&c, base, 800);
        make_qkv(&c, base, g_dnn, qkv);
        torc_tensor *dout = randn(4, (const int64_t[]){c.B, c.H, c.L, c.Ev}, c.dt, 801);
        double *one[5], *many[5];
        const int64_t n[5] = {c.B * c.H * c.L * c.Ev, c.B * c.H * c.L, c.B * c.H * c.L * c.E, c.B * c.H * c.S * c.E,
                              c.B * c.H * c.S * c.Ev};
        const char *names[5] = {"o", "lse", "dq", "dk", "dv"};
        run_at(1, &c, qkv, dout, one);
        for (int t = 2; t <= 3; t++) {
            run_at(t, &c, qkv, dout, many);
            for (int k = 0; k < 5; k++) {
                ck_assert_msg(!memcmp(one[k], many[k], sizeof(double) * (size_t)n[k]),
                              "%s differs between 1 and %d threads (L %lld, causal %d, %s)", names[k], t,
                              (long long)c.L, c.causal, torc_dtype_name(c.dt));
                free(many[k]);
            }
        }
        for (int k = 0; k < 5; k++) free(one[k]);
        torc_scope_pop();
    }
    if (saved) setenv("TORC_ONEDNN_ATTENTION_PASSES", saved, 1);
    else unsetenv("TORC_ONEDNN_ATTENTION_PASSES");
    free(saved);
    omp_set_num_threads(nthr0);
}
END_TEST

// ---- the backward's one pass (per (b, h), dQ in a buffer) and two passes (dK / dV and dQ tiles) ----
// The backend picks either by shape and thread count (TORC_ONEDNN_ATTENTION_PASSES forces one):
// their dq, dk and dv must be the same bits, so that the choice never changes a result. Sizes around
// the 64-row tiles, L != S, head sizes 64 / 80 / 128 (Ev 48, 80, 128) each in f32, bf16 and f16 over
// the sizes, causal or not, dense and GPT's split heads.
static void backward_with_passes(const char *passes, const att_case *c, torc_tensor *qkv[3], torc_tensor *dout,
                                 torc_tensor *o, torc_tensor *lse, double **out) {
    setenv("TORC_ONEDNN_ATTENTION_PASSES", passes, 1);
    torc_tensor *g[3];
    backward_on(g_dnn, c, qkv, dout, o, lse, true, g);
    for (int i = 0; i < 3; i++) out[i] = tu_values(g[i]);
}

static const int64_t PASS_LS[][2] = {{65, 200}, {200, 65}, {131, 131}, {129, 64}, {1, 100}, {256, 256}};
enum { N_PASS_LS = sizeof PASS_LS / sizeof PASS_LS[0] };

START_TEST(backward_passes_give_the_same_bits) {
    setup();
    const char *env = getenv("TORC_ONEDNN_ATTENTION_PASSES");
    char *saved = env ? strdup(env) : NULL;
    const int64_t EEv[3][2] = {{64, 48}, {80, 80}, {128, 128}}, L = PASS_LS[_i][0], S = PASS_LS[_i][1];
    const torc_dtype dts[3] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F16};
    for (int e = 0; e < 3; e++)
        for (int causal = 0; causal < 2; causal++) {
            const int d = (e + _i + causal) % 3;  // each head size in each dtype over the shapes
            const layout lay = L == S && EEv[e][0] == EEv[e][1] && causal ? GPT_SPLIT : DENSE;
            const att_case c = {.B = 1, .H = 2, .L = L, .S = S, .E = EEv[e][0], .Ev = EEv[e][1], .causal = causal,
                                .dt = dts[d], .lay = lay};
            torc_scope_push();
            torc_tensor *base[3], *qkv[3], *o, *lse;
            make_bases(&c, base, 1000 + (uint64_t)(_i * 8 + e * 2 + causal));
            make_qkv(&c, base, g_dnn, qkv);
            forward_on(g_dnn, &c, qkv, true, &o, &lse);
            torc_tensor *dout = randn(4, (const int64_t[]){c.B, c.H, c.L, c.Ev}, c.dt, 1999);
            double *one[3], *two[3];
            backward_with_passes("1", &c, qkv, dout, o, lse, one);
            backward_with_passes("2", &c, qkv, dout, o, lse, two);
            const int64_t n[3] = {c.B * c.H * L * c.E, c.B * c.H * S * c.E, c.B * c.H * S * c.Ev};
            const char *names[3] = {"dq", "dk", "dv"};
            for (int k = 0; k < 3; k++) {
                ck_assert_msg(!memcmp(one[k], two[k], sizeof(double) * (size_t)n[k]),
                              "%s differs between one and two passes (L %lld S %lld E %lld Ev %lld causal %d %s "
                              "layout %d)", names[k], (long long)L, (long long)S, (long long)c.E, (long long)c.Ev,
                              causal, torc_dtype_name(c.dt), (int)lay);
                free(one[k]);
                free(two[k]);
            }
            torc_scope_pop();
        }
    if (saved) setenv("TORC_ONEDNN_ATTENTION_PASSES", saved, 1);
    else unsetenv("TORC_ONEDNN_ATTENTION_PASSES");
    free(saved);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("onednn_attention");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, tile_edges_match_the_reference, 0, N_LS);
    tcase_add_test(tc, long_sequence_matches_the_reference);
    tcase_add_loop_test(tc, head_sizes_match_the_reference, 0, N_EEV);
    tcase_add_test(tc, strided_and_broadcast_operands_match_the_reference);
    tcase_add_test(tc, half_dtypes_match_the_reference);
    tcase_add_loop_test(tc, decode_shapes_match_the_reference, 0, N_DEC_S);
    tcase_add_test(tc, empty_sides_match_the_reference);
    tcase_add_test(tc, declines_f64_and_large_heads);
    tcase_add_test(tc, results_do_not_depend_on_the_thread_count);
    suite_add_tcase(s, tc);
    TCase *passes = tcase_create("passes");  // CK_RUN_CASE=passes runs it alone
    tcase_set_timeout(passes, 600);
    tcase_add_loop_test(passes, backward_passes_give_the_same_bits, 0, N_PASS_LS);
    suite_add_tcase(s, passes);
    return s;
}

int main(void) { return tu_run(make_suite()); }
