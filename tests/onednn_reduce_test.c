// tests/onednn_reduce_test.c — the oneDNN backend's SUM / MEAN over rows into contiguous columns
// (backends/cpu_onednn/reduce.c's host path) against the reference backend: 1..65 columns, 1..8200
// rows, leading and middle dims, strided rows, f32 / bf16 / f16, NaN / inf / -0.0, keepdim; its
// order (blocks of 8 rows, a binary counter over the blocks) bit for bit, so the same bits on every
// ISA path and at 1, 2 and 3 threads; NORM p = 2 of a whole tensor (clip_grad_norm_'s). ctest runs it
// natively and under the AVX2 and AVX caps.
#include <omp.h>

#include "testutil.h"

static torc_device *g_ref, *g_dnn;

static void setup(void) {
    g_ref = torc_device_get("reference");
    g_dnn = torc_device_get("onednn");
    ck_assert_msg(g_ref && g_dnn, "%s", torc_last_error());
}

// Uniform values in [-1, 1) from a 64-bit LCG (the test's own, so the data is the same everywhere).
static void fill_uniform(float *v, int64_t n, uint64_t seed) {
    uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = (float)((double)(s >> 40) / (double)(1 << 23)) - 1.0f;
    }
}

static torc_tensor *host_tensor(const float *v, int ndim, const int64_t *shape, torc_dtype dt) {
    torc_tensor *t = torc_tensor_from(v, ndim, shape, TORC_DTYPE_F32);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    if (dt != TORC_DTYPE_F32) t = torc_to_dtype(t, dt);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

// code (SUM or MEAN) of x over mask on dev into a fresh keepdim out of dtype od; native: onednn's
// own path must take it.
static torc_tensor *reduce_on(torc_device *dev, torc_opcode code, torc_tensor *x, uint32_t mask, torc_dtype od,
                              bool native) {
    int64_t shape[TORC_MAX_DIMS];
    const int nd = torc_ndim(x);
    for (int d = 0; d < nd; d++) shape[d] = (mask >> d) & 1 ? 1 : torc_shape(x)[d];
    torc_tensor *out = torc_to_device(torc_empty(nd, shape, od), dev);
    ck_assert_msg(out != NULL, "%s", torc_last_error());
    torc_op_call call = {.code = code, .n_in = 1, .n_out = 1, .in = {torc_to_device(x, dev)}, .out = {out}};
    call.params.reduce.mask = mask;
    if (native) ck_assert_msg(torc_op_supported(dev, &call) == TORC_OK, "onednn declines: %s", torc_last_error());
    ck_assert_msg(torc_run_op(dev, &call, native ? TORC_RUN_NATIVE : 0) == TORC_OK, "%s", torc_last_error());
    return out;
}

static double unit(torc_dtype dt) {
    return dt == TORC_DTYPE_BF16 ? 0x1p-8 : dt == TORC_DTYPE_F16 ? 0x1p-11 : 0x1p-24;
}

// onednn against the reference on x (shape, mask), out dtype od. The float sum of a column of R
// terms in blocks of 8 and pairs of blocks errs by at most (7 + ceil(log2(R / 8)) + 1) float eps of
// the sum of |terms| (the + 1: MEAN's division, the terms' own rounding is the reference's too);
// tol allows 2 more, plus half a unit of a 16-bit out (rounded from float, not from double).
static void check_against_reference(torc_opcode code, torc_tensor *x, uint32_t mask, torc_dtype od,
                                    const char *what) {
    torc_scope_push();
    torc_tensor *got = reduce_on(g_dnn, code, x, mask, od, true);
    torc_tensor *want = reduce_on(g_ref, code, x, mask, od, false);
    torc_tensor *absx = torc_abs(x);
    torc_tensor *absf = torc_to_dtype(absx, TORC_DTYPE_F64);
    torc_tensor *mag = reduce_on(g_ref, code, absf, mask, TORC_DTYPE_F64, false);
    int64_t R = 1;
    for (int d = 0; d < torc_ndim(x); d++) R *= (mask >> d) & 1 ? torc_shape(x)[d] : 1;
    const double eps = 0x1p-24 * (10.0 + ceil(log2((double)R / 8.0 > 1.0 ? (double)R / 8.0 : 1.0)));
    const int64_t n = torc_numel(want);
    double *g = tu_values(got), *w = tu_values(want), *m = tu_values(mag);
    for (int64_t i = 0; i < n; i++) {
        const double tol = eps * m[i] + unit(od) * fabs(w[i]);
        const bool ok = (isnan(w[i]) && isnan(g[i])) || g[i] == w[i] || fabs(g[i] - w[i]) <= tol;
        ck_assert_msg(ok, "%s: element %lld is %.9g, the reference's %.9g (tol %.3g)", what, (long long)i, g[i], w[i],
                      tol);
    }
    free(g), free(w), free(m);
    torc_scope_pop();
}

// ---- the order, written out: blocks of 8 rows added in order, the blocks' binary counter ----
static float column_sum(const float *x, int64_t R, int64_t stride) {
    float lev[64];
    uint64_t occ = 0;
    for (int64_t b = 0; b < R; b += 8) {
        volatile float s = x[b * stride];  // volatile: no reassociation, whatever the compiler
        for (int64_t r = b + 1; r < b + 8 && r < R; r++) s = s + x[r * stride];
        float node = s;
        int t = 0;
        while (occ >> t & 1) node = lev[t] + node, t++;
        lev[t] = node;
        occ = (occ & ~((UINT64_C(1) << t) - 1)) | UINT64_C(1) << t;
    }
    float acc = 0.0f;
    bool first = true;
    for (int l = 0; l < 64; l++)
        if (occ >> l & 1) acc = first ? lev[l] : lev[l] + acc, first = false;
    return acc + 0.0f;
}

START_TEST(columns_and_rows_around_vector_widths_match_the_reference) {
    setup();
    static const int64_t rows[] = {1, 2, 3, 7, 8, 9, 17, 100, 1000};
    float *v = malloc(sizeof(float) * 65 * 1000);
    for (int64_t C = 1; C <= 65; C++) {
        for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
            const int64_t R = rows[k];
            fill_uniform(v, R * C, (uint64_t)(R * 100 + C));
            torc_scope_push();
            torc_tensor *x = host_tensor(v, 2, (const int64_t[]){R, C}, TORC_DTYPE_F32);
            char what[64];
            snprintf(what, sizeof what, "sum (%lld, %lld) over dim 0", (long long)R, (long long)C);
            check_against_reference(TORC_OP_SUM, x, 1u, TORC_DTYPE_F32, what);
            torc_scope_pop();
        }
    }
    free(v);
}
END_TEST

// Rows across the 1024-row super-blocks (the counter continued over them), columns across the
// 512-column panels; leading and middle dims reduced; MEAN.
START_TEST(long_columns_and_wide_rows_match_the_reference) {
    setup();
    static const int64_t shapes[][2] = {{1023, 17}, {1024, 64}, {1025, 600}, {8191, 3}, {8192, 33},
                                        {8193, 5}, {3 * 8192 + 5, 7}, {37, 1537}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t R = shapes[k][0], C = shapes[k][1];
        float *v = malloc(sizeof(float) * (size_t)(R * C));
        fill_uniform(v, R * C, (uint64_t)k + 7);
        torc_scope_push();
        torc_tensor *x = host_tensor(v, 2, (const int64_t[]){R, C}, TORC_DTYPE_F32);
        check_against_reference(TORC_OP_SUM, x, 1u, TORC_DTYPE_F32, "sum over dim 0");
        check_against_reference(TORC_OP_MEAN, x, 1u, TORC_DTYPE_F32, "mean over dim 0");
        torc_scope_pop();
        free(v);
    }
    float *v = malloc(sizeof(float) * 4 * 256 * 384);
    fill_uniform(v, 4 * 256 * 384, 99);
    torc_scope_push();
    torc_tensor *x = host_tensor(v, 3, (const int64_t[]){4, 256, 384}, TORC_DTYPE_F32);
    check_against_reference(TORC_OP_SUM, x, 3u, TORC_DTYPE_F32, "(B, T, C) over B and T");
    check_against_reference(TORC_OP_SUM, x, 2u, TORC_DTYPE_F32, "(B, T, C) over T");
    check_against_reference(TORC_OP_MEAN, x, 2u, TORC_DTYPE_F32, "(B, T, C) mean over T");
    check_against_reference(TORC_OP_SUM, x, 1u, TORC_DTYPE_F32, "(B, T, C) over B");
    check_against_reference(TORC_OP_SUM, x, 4u, TORC_DTYPE_F32, "(B, T, C) over C (oneDNN's rows)");
    torc_scope_pop();
    free(v);
}
END_TEST

// Rows strided (a narrowed width, every other row, broadcast), the outer dim strided, and layouts the host
// path declines (a transposed input: oneDNN's primitive runs it, still matching).
START_TEST(strided_inputs_match_the_reference) {
    setup();
    float *v = malloc(sizeof(float) * 6 * 300 * 100);
    fill_uniform(v, 6 * 300 * 100, 5);
    torc_scope_push();
    torc_tensor *base = host_tensor(v, 3, (const int64_t[]){6, 300, 100}, TORC_DTYPE_F32);
    torc_tensor *cols = torc_narrow(base, 2, 3, 61);                  // rows 100 apart, 61 wide
    check_against_reference(TORC_OP_SUM, cols, 3u, TORC_DTYPE_F32, "narrowed columns");
    check_against_reference(TORC_OP_SUM, cols, 2u, TORC_DTYPE_F32, "narrowed columns, middle dim");
    torc_tensor *every2 = torc_slice(base, 1, 0, 300, 2);             // every other row
    check_against_reference(TORC_OP_SUM, every2, 2u, TORC_DTYPE_F32, "every other row");
    torc_tensor *outer = torc_slice(base, 0, 1, 6, 2);                // every other outer slab
    check_against_reference(TORC_OP_SUM, outer, 2u, TORC_DTYPE_F32, "strided outer dim");
    torc_tensor *bc = torc_expand(torc_narrow(torc_narrow(base, 0, 0, 1), 1, 0, 1), 3, (const int64_t[]){6, 300, 100});
    check_against_reference(TORC_OP_SUM, bc, 3u, TORC_DTYPE_F32, "broadcast rows (strides 0)");
    torc_tensor *tr = torc_permute(torc_narrow(base, 0, 0, 1), 3, (const int[]){0, 2, 1});
    check_against_reference(TORC_OP_SUM, tr, 2u, TORC_DTYPE_F32, "transposed (declined to oneDNN)");
    torc_scope_pop();
    free(v);
}
END_TEST

// bf16 / f16 in, accumulated in float, rounded once into f32 / bf16 / f16.
START_TEST(half_dtypes_match_the_reference) {
    setup();
    static const torc_dtype dts[] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F16};
    float *v = malloc(sizeof(float) * 1500 * 77);
    fill_uniform(v, 1500 * 77, 3);
    for (int i = 0; i < 3; i++)
        for (int o = 0; o < 3; o++) {
            if (i == 0 && o == 0) continue;
            torc_scope_push();
            torc_tensor *x = host_tensor(v, 2, (const int64_t[]){1500, 77}, dts[i]);
            char what[64];
            snprintf(what, sizeof what, "dtype %d -> %d", (int)dts[i], (int)dts[o]);
            check_against_reference(TORC_OP_SUM, x, 1u, dts[o], what);
            check_against_reference(TORC_OP_MEAN, x, 1u, dts[o], what);
            torc_scope_pop();
        }
    free(v);
}
END_TEST

// A long column of one value: a running float sum drifts far past the pairwise bound (the order
// the host path replaced erred by 1e-4 of the sum here); the host path stays within it.
START_TEST(long_constant_columns_stay_accurate) {
    setup();
    const int64_t R = 1 << 17, C = 16;
    float *v = malloc(sizeof(float) * (size_t)(R * C));
    for (int64_t i = 0; i < R * C; i++) v[i] = 0.1f;
    torc_scope_push();
    torc_tensor *x = host_tensor(v, 2, (const int64_t[]){R, C}, TORC_DTYPE_F32);
    check_against_reference(TORC_OP_SUM, x, 1u, TORC_DTYPE_F32, "a column of 0.1f");
    torc_scope_pop();
    free(v);
}
END_TEST

// NaN anywhere gives NaN, +inf alone +inf, +inf and -inf NaN, all -0.0 gives +0.0 (the
// reference's sum starts from +0.0), as the reference.
START_TEST(special_values_match_the_reference) {
    setup();
    const int64_t R = 2000, C = 20;
    float *v = malloc(sizeof(float) * (size_t)(R * C));
    fill_uniform(v, R * C, 11);
    v[1500 * C + 0] = NAN;
    v[3 * C + 1] = INFINITY;
    v[10 * C + 2] = INFINITY, v[1999 * C + 2] = -INFINITY;
    v[0 * C + 3] = NAN, v[5 * C + 3] = INFINITY;
    for (int64_t r = 0; r < R; r++) v[r * C + 4] = -0.0f;
    v[7 * C + 5] = 3e38f, v[8 * C + 5] = 3e38f;  // overflows float: the sum +inf, as the double sum rounded
    for (int k = 0; k < 2; k++) {
        torc_scope_push();
        torc_tensor *x = host_tensor(v, 2, (const int64_t[]){R, C}, TORC_DTYPE_F32);
        const torc_opcode code = k ? TORC_OP_MEAN : TORC_OP_SUM;
        torc_tensor *got = reduce_on(g_dnn, code, x, 1u, TORC_DTYPE_F32, true);
        torc_tensor *want = reduce_on(g_ref, code, x, 1u, TORC_DTYPE_F32, false);
        float g[20], w[20];
        ck_assert_int_eq(torc_copy_to_host(got, g, sizeof g), TORC_OK);
        ck_assert_int_eq(torc_copy_to_host(want, w, sizeof w), TORC_OK);
        ck_assert(isnan(g[0]) && isnan(w[0]));
        ck_assert(isinf(g[1]) && g[1] > 0 && g[1] == w[1]);
        ck_assert(isnan(g[2]) && isnan(w[2]));
        ck_assert(isnan(g[3]) && isnan(w[3]));
        ck_assert(g[4] == 0.0f && !signbit(g[4]) && !signbit(w[4]));
        if (!k) ck_assert(isinf(g[5]) && g[5] == w[5]);  // MEAN's double sum does not overflow: 3e35
        torc_scope_pop();
    }
    free(v);
}
END_TEST

// torc_sum / torc_mean with and without keepdim on onednn: shapes and values.
START_TEST(keepdim_shapes_and_values) {
    setup();
    float *v = malloc(sizeof(float) * 4 * 256 * 48);
    fill_uniform(v, 4 * 256 * 48, 21);
    torc_scope_push();
    torc_tensor *x = torc_to_device(host_tensor(v, 3, (const int64_t[]){4, 256, 48}, TORC_DTYPE_F32), g_dnn);
    torc_tensor *k = torc_sum(x, 2, (const int[]){0, 1}, true);
    torc_tensor *f = torc_sum(x, 2, (const int[]){0, 1}, false);
    torc_tensor *m = torc_mean(x, 1, (const int[]){1}, true);
    tu_assert_shape(k, 1, 1, 48);
    tu_assert_shape(f, 48);
    tu_assert_shape(m, 4, 1, 48);
    double *kv = tu_values(k), *fv = tu_values(f), *mv = tu_values(m);
    for (int64_t c = 0; c < 48; c++) {
        ck_assert_msg(kv[c] == fv[c], "keepdim changed column %lld", (long long)c);
        ck_assert_msg((float)kv[c] == column_sum(v + c, 4 * 256, 48), "column %lld", (long long)c);
    }
    for (int64_t b = 0; b < 4; b++)
        for (int64_t c = 0; c < 48; c++) {
            const float s = column_sum(v + b * 256 * 48 + c, 256, 48);
            ck_assert_msg((float)mv[b * 48 + c] == (float)((double)s / 256.0), "mean (%lld, %lld)", (long long)b,
                          (long long)c);
        }
    free(kv), free(fv), free(mv);
    torc_scope_pop();
    free(v);
}
END_TEST

// The order written out above, bit for bit, on this process's ISA path (ctest runs it under every
// cap): so every path gives the same bits.
START_TEST(the_order_is_the_documented_one) {
    setup();
    static const int64_t shapes[][2] = {{1, 5}, {9, 70}, {1000, 65}, {1024 * 8 + 3, 19}, {5 * 8192 + 777, 3}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t R = shapes[k][0], C = shapes[k][1];
        float *v = malloc(sizeof(float) * (size_t)(R * C));
        fill_uniform(v, R * C, (uint64_t)k + 40);
        torc_scope_push();
        torc_tensor *x = host_tensor(v, 2, (const int64_t[]){R, C}, TORC_DTYPE_F32);
        torc_tensor *got = reduce_on(g_dnn, TORC_OP_SUM, x, 1u, TORC_DTYPE_F32, true);
        float *g = malloc(sizeof(float) * (size_t)C);
        ck_assert_int_eq(torc_copy_to_host(got, g, sizeof(float) * (size_t)C), TORC_OK);
        for (int64_t c = 0; c < C; c++) {
            const float e = column_sum(v + c, R, C);
            ck_assert_msg(memcmp(&g[c], &e, sizeof e) == 0, "(%lld, %lld) column %lld: %.9g, the order gives %.9g",
                          (long long)R, (long long)C, (long long)c, g[c], e);
        }
        free(g);
        torc_scope_pop();
        free(v);
    }
}
END_TEST

// ---- the same bits at 1, 2 and 3 threads ----
START_TEST(results_do_not_depend_on_the_thread_count) {
    setup();
    const char *env = getenv("TORC_NUM_THREADS");
    if (env && *env) {
        fprintf(stderr, "onednn_reduce: TORC_NUM_THREADS is set, so the thread counts are not the test's\n");
        return;
    }
    const int nthr0 = omp_get_max_threads();
    static const int64_t shapes[][3] = {{1, 1024, 1536}, {3, 5000, 700}, {1, 20000, 5}, {7, 3000, 130}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t O = shapes[k][0], R = shapes[k][1], C = shapes[k][2], n = O * R * C;
        float *v = malloc(sizeof(float) * (size_t)n);
        fill_uniform(v, n, (uint64_t)k + 60);
        torc_scope_push();
        torc_tensor *x = host_tensor(v, 3, (const int64_t[]){O, R, C}, TORC_DTYPE_BF16);
        float *one = malloc(sizeof(float) * (size_t)(O * C)), *many = malloc(sizeof(float) * (size_t)(O * C));
        for (int t = 1; t <= 3; t++) {
            omp_set_num_threads(t);
            torc_tensor *s = reduce_on(g_dnn, TORC_OP_SUM, x, 2u, TORC_DTYPE_F32, true);
            ck_assert_int_eq(torc_copy_to_host(s, t == 1 ? one : many, sizeof(float) * (size_t)(O * C)), TORC_OK);
            if (t > 1)
                ck_assert_msg(!memcmp(one, many, sizeof(float) * (size_t)(O * C)),
                              "(%lld, %lld, %lld) differs between 1 and %d threads", (long long)O, (long long)R,
                              (long long)C, t);
        }
        free(one), free(many);
        torc_scope_pop();
        free(v);
    }
    omp_set_num_threads(nthr0);
}
END_TEST

// ---- NORM p = 2 of a whole contiguous tensor: squares summed in double ----
static torc_tensor *norm_on(torc_device *dev, torc_tensor *x, torc_dtype od, bool native) {
    int64_t shape[TORC_MAX_DIMS];
    const int nd = torc_ndim(x);
    for (int d = 0; d < nd; d++) shape[d] = 1;
    torc_tensor *out = torc_to_device(torc_empty(nd, shape, od), dev);
    ck_assert_msg(out != NULL, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_NORM, .n_in = 1, .n_out = 1, .in = {torc_to_device(x, dev)}, .out = {out}};
    call.params.reduce.mask = nd ? (1u << nd) - 1 : 0;
    call.params.reduce.p = 2.0;
    if (native) ck_assert_msg(torc_op_supported(dev, &call) == TORC_OK, "onednn declines: %s", torc_last_error());
    ck_assert_msg(torc_run_op(dev, &call, native ? TORC_RUN_NATIVE : 0) == TORC_OK, "%s", torc_last_error());
    return out;
}

// Within one unit of the out dtype of the reference (both sum in double and round once; a 16-bit
// out is rounded through float here), huge values whose squares overflow float included; NaN and
// inf as the reference; the same bits at 1, 2 and 3 threads.
START_TEST(norm_matches_the_reference) {
    setup();
    static const int64_t sizes[] = {1, 7, 8, 9, 2047, 2048, 2049, 5 * 2048 + 13, 300000};
    static const torc_dtype dts[] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F16};
    float *v = malloc(sizeof(float) * 300000);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int i = 0; i < 3; i++)
            for (int special = 0; special < 4; special++) {
                const int64_t n = sizes[k];
                fill_uniform(v, n, (uint64_t)(n + special));
                if (special == 1) v[n / 2] = 1e20f;  // x^2 overflows float, not double
                if (special == 2) v[n - 1] = NAN;
                if (special == 3) v[0] = -INFINITY;
                if (special && dts[i] != TORC_DTYPE_F32 && special == 1) continue;  // 1e20 is out of f16's range
                torc_scope_push();
                torc_tensor *x = host_tensor(v, 2, (const int64_t[]){1, n}, dts[i]);
                torc_tensor *got = norm_on(g_dnn, x, dts[i], true), *want = norm_on(g_ref, x, dts[i], false);
                double g, w;
                double *gv = tu_values(got), *wv = tu_values(want);
                g = gv[0], w = wv[0];
                free(gv), free(wv);
                ck_assert_msg((isnan(g) && isnan(w)) || g == w || fabs(g - w) <= 2 * unit(dts[i]) * fabs(w),
                              "norm of %lld (dtype %d, case %d): %.9g, the reference's %.9g", (long long)n,
                              (int)dts[i], special, g, w);
                torc_scope_pop();
            }
    const char *env = getenv("TORC_NUM_THREADS");
    if (!(env && *env)) {
        const int nthr0 = omp_get_max_threads();
        fill_uniform(v, 300000, 77);
        torc_scope_push();
        torc_tensor *x = host_tensor(v, 2, (const int64_t[]){600, 500}, TORC_DTYPE_F32);
        float r[3];
        for (int t = 1; t <= 3; t++) {
            omp_set_num_threads(t);
            ck_assert_int_eq(torc_copy_to_host(norm_on(g_dnn, x, TORC_DTYPE_F32, true), &r[t - 1], sizeof(float)),
                             TORC_OK);
        }
        ck_assert_msg(!memcmp(&r[0], &r[1], sizeof(float)) && !memcmp(&r[0], &r[2], sizeof(float)),
                      "norm differs between thread counts: %.9g %.9g %.9g", r[0], r[1], r[2]);
        torc_scope_pop();
        omp_set_num_threads(nthr0);
    }
    free(v);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("onednn_reduce");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, columns_and_rows_around_vector_widths_match_the_reference);
    tcase_add_test(tc, long_columns_and_wide_rows_match_the_reference);
    tcase_add_test(tc, strided_inputs_match_the_reference);
    tcase_add_test(tc, half_dtypes_match_the_reference);
    tcase_add_test(tc, long_constant_columns_stay_accurate);
    tcase_add_test(tc, special_values_match_the_reference);
    tcase_add_test(tc, keepdim_shapes_and_values);
    tcase_add_test(tc, the_order_is_the_documented_one);
    tcase_add_test(tc, results_do_not_depend_on_the_thread_count);
    tcase_add_test(tc, norm_matches_the_reference);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
