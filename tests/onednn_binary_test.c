// tests/onednn_binary_test.c — the oneDNN backend's binary arithmetic loops (ADD, SUB, MUL, DIV on
// float32 / bfloat16 / float16 operands of any mix: pointwise.c) against the reference backend,
// bit for bit: every dtype mix, contiguous rows and broadcasts (a bias row, a column, a scalar, both
// inputs broadcast), sliced rows, sizes around the vector widths and the loops' blocks, NaN, inf,
// subnormals and overflow, ADD's alpha, in place, and the same bits at 1 and 2 threads.
// ctest runs it natively and under the AVX2 and plain-C (TORC_MAX_CPU_ISA=AVX) caps, with
// TORC_ONEDNN_MIN_WORK=0 so that small shapes reach the backend too.
#include <float.h>
#include <omp.h>
#include <stdint.h>

#include "testutil.h"

static torc_device *g_ref, *g_dnn;

static void setup(void) {
    g_ref = torc_device_get("reference");
    g_dnn = torc_device_get("onednn");
    ck_assert_msg(g_ref && g_dnn, "%s", torc_last_error());
}

static const torc_dtype DTYPES[3] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F16};
static const torc_opcode OPS[4] = {TORC_OP_ADD, TORC_OP_SUB, TORC_OP_MUL, TORC_OP_DIV};

// ---- values ----
static uint64_t g_rng;
static uint32_t next_u32(void) {
    g_rng = g_rng * 6364136223846793005u + 1442695040888963407u;
    return (uint32_t)(g_rng >> 32);
}

// Mostly values in [-4, 4), with a few of every kind that rounds or propagates specially: NaN, +-inf,
// +-0, float32 subnormals, values past float16's range (65520 rounds to inf there) and bf16 ties.
static float draw(void) {
    const uint32_t u = next_u32();
    if (u % 64 != 0) return ((float)(u >> 8) / 16777216.0f - 0.5f) * 8.0f;
    static const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e-39f, 70000.0f, 65520.0f,
                                     -1e30f, 3e38f, 1.00390625f, 1.01171875f, 2.0f, 1e-5f, FLT_MIN};
    return specials[(u >> 6) % (sizeof specials / sizeof specials[0])];
}

// A tensor of n drawn values in dtype dt (rounded from float32), on onednn, with shape.
static torc_tensor *values(int ndim, const int64_t *shape, torc_dtype dt, uint64_t seed) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    float *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    g_rng = seed;
    for (int64_t i = 0; i < n; i++) v[i] = draw();
    torc_tensor *t = torc_tensor_from(v, ndim, shape, TORC_DTYPE_F32);
    free(v);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    t = torc_to_device(dt == TORC_DTYPE_F32 ? t : torc_to_dtype(t, dt), g_dnn);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

// Whether two elements of dtype dt are the same: the same bits, or both NaN (which NaN an op
// returns depends on its operands' order, which neither backend promises).
static bool same(const unsigned char *a, const unsigned char *b, torc_dtype dt) {
    if (dt == TORC_DTYPE_F32) {
        float x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        return !memcmp(a, b, 4) || (isnan(x) && isnan(y));
    }
    uint16_t x, y;
    memcpy(&x, a, 2);
    memcpy(&y, b, 2);
    const uint16_t exp = dt == TORC_DTYPE_BF16 ? 0x7F80 : 0x7C00, man = dt == TORC_DTYPE_BF16 ? 0x7F : 0x3FF;
    const bool nx = (x & exp) == exp && (x & man), ny = (y & exp) == exp && (y & man);
    return x == y || (nx && ny);
}

static void assert_same(torc_tensor *got, torc_tensor *want, const char *what) {
    const int64_t n = torc_numel(want);
    const torc_dtype dt = torc_get_dtype(want);
    const size_t es = torc_dtype_size(dt);
    ck_assert_int_eq(torc_numel(got), n);
    unsigned char *a = malloc(es * (size_t)(n ? n : 1)), *b = malloc(es * (size_t)(n ? n : 1));
    ck_assert_int_eq(torc_copy_to_host(got, a, es * (size_t)n), TORC_OK);
    ck_assert_int_eq(torc_copy_to_host(want, b, es * (size_t)n), TORC_OK);
    for (int64_t i = 0; i < n; i++) {
        if (same(a + i * es, b + i * es, dt)) continue;
        torc_tensor *g = torc_to_dtype(got, TORC_DTYPE_F64), *w = torc_to_dtype(want, TORC_DTYPE_F64);
        double x[1], y[1];
        torc_tensor *gi = torc_narrow(torc_flatten(g, 0, -1), 0, i, 1), *wi = torc_narrow(torc_flatten(w, 0, -1), 0, i, 1);
        torc_copy_to_host(gi, x, sizeof x);
        torc_copy_to_host(wi, y, sizeof y);
        ck_abort_msg("%s: element %lld is %.9g on onednn, %.9g on the reference", what, (long long)i, x[0], y[0]);
    }
    free(a);
    free(b);
}

// ---- the op ----
// out = in0 op in1 (alpha for ADD / SUB) on dev into out. native: onednn's own code must take it.
static void run_on(torc_device *dev, torc_opcode code, torc_tensor *in0, torc_tensor *in1, torc_tensor *out,
                   double alpha, bool native) {
    torc_op_call call = {.code = code, .n_in = 2, .n_out = 1,
                         .in = {torc_to_device(in0, dev), torc_to_device(in1, dev)}, .out = {out}};
    call.params.scalar.value = alpha;
    if (native) ck_assert_msg(torc_op_supported(dev, &call) == TORC_OK, "onednn declines: %s", torc_last_error());
    ck_assert_msg(torc_run_op(dev, &call, native ? TORC_RUN_NATIVE : 0) == TORC_OK, "%s", torc_last_error());
}

static torc_tensor *empty_on(torc_device *dev, int ndim, const int64_t *shape, torc_dtype dt) {
    torc_tensor *t = torc_to_device(torc_empty(ndim, shape, dt), dev);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

// The op on both backends into fresh outs of dtype dt; their bits must agree. native: onednn's own
// loops must take it (else it may fall back to the reference).
static void check_as(torc_opcode code, torc_tensor *in0, torc_tensor *in1, torc_dtype dt, double alpha, bool native,
                     const char *what) {
    torc_scope_push();
    const int nd = torc_ndim(in0);
    const int64_t *shape = torc_shape(in0);
    torc_tensor *want = empty_on(g_ref, nd, shape, dt), *got = empty_on(g_dnn, nd, shape, dt);
    run_on(g_ref, code, in0, in1, want, alpha, false);
    run_on(g_dnn, code, in0, in1, got, alpha, native);
    char msg[256];
    snprintf(msg, sizeof msg, "%s %s(%s, %s -> %s) alpha %g", what, torc_op_name(code),
             torc_dtype_name(torc_get_dtype(in0)), torc_dtype_name(torc_get_dtype(in1)), torc_dtype_name(dt), alpha);
    assert_same(got, want, msg);
    torc_scope_pop();
}

static void check(torc_opcode code, torc_tensor *in0, torc_tensor *in1, torc_dtype dt, double alpha, const char *what) {
    check_as(code, in0, in1, dt, alpha, true, what);
}

// ---- layouts of (R, N) operands ----
typedef enum layout {
    SAME,      // both contiguous (R, N)
    ROW,       // in1 one (N) row over the R rows: Linear's bias
    ROW0,      // in0 the broadcast row
    COL,       // in1 one value a row: (R, 1) expanded
    SCALAR,    // in1 one value
    BIAS3,     // out (2, R, N), in1 (N): the bias over (B, T, out)
    SLICED,    // in0 rows of a wider (R, N + 3) tensor
    OUTER,     // in0 (R, 1) and in1 (N), both broadcast: every pair
    N_LAYOUTS
} layout;
static const char *const LAYOUT_NAMES[N_LAYOUTS] = {"same", "row", "row0", "col", "scalar", "bias3", "sliced", "outer"};

// in0 and in1 of dtypes d0, d1 laid out as lay over out's shape (R, N) (BIAS3: (2, R, N)).
static void make_inputs(layout lay, int64_t R, int64_t N, torc_dtype d0, torc_dtype d1, uint64_t seed, torc_tensor **a,
                        torc_tensor **b) {
    const int64_t shape[2] = {R, N};
    switch (lay) {
    case SAME:
        *a = values(2, shape, d0, seed);
        *b = values(2, shape, d1, seed + 1);
        break;
    case ROW:
        *a = values(2, shape, d0, seed);
        *b = torc_expand(values(1, &N, d1, seed + 1), 2, shape);
        break;
    case ROW0:
        *a = torc_expand(values(1, &N, d0, seed), 2, shape);
        *b = values(2, shape, d1, seed + 1);
        break;
    case COL:
        *a = values(2, shape, d0, seed);
        *b = torc_expand(values(TORC_SHAPE(R, 1), d1, seed + 1), 2, shape);
        break;
    case SCALAR:
        *a = values(2, shape, d0, seed);
        *b = torc_expand(values(TORC_SHAPE(1), d1, seed + 1), 2, shape);
        break;
    case BIAS3:
        *a = values(TORC_SHAPE(2, R, N), d0, seed);
        *b = torc_expand(values(1, &N, d1, seed + 1), TORC_SHAPE(2, R, N));
        break;
    case SLICED:
        *a = torc_narrow(values(TORC_SHAPE(R, N + 3), d0, seed), 1, 2, N);
        *b = values(2, shape, d1, seed + 1);
        break;
    default:  // OUTER
        *a = torc_expand(values(TORC_SHAPE(R, 1), d0, seed), 2, shape);
        *b = torc_expand(values(1, &N, d1, seed + 1), 2, shape);
        break;
    }
    ck_assert_msg(*a && *b, "%s", torc_last_error());
}

// (R, N): one element; rows shorter than, equal to and just past the AVX2 (8) and AVX-512 (16)
// widths; past the loops' 1024-float blocks; past their 16K-element tasks (a row split in pieces).
static const int64_t SIZES[][2] = {{1, 1}, {3, 1}, {5, 7}, {4, 16}, {3, 17}, {2, 33}, {3, 1025}, {2, 16400}};
enum { N_SIZES = sizeof SIZES / sizeof SIZES[0] };

START_TEST(every_dtype_mix_and_layout_matches_the_reference) {
    setup();
    const int64_t R = SIZES[_i][0], N = SIZES[_i][1];
    for (int lay = 0; lay < N_LAYOUTS; lay++)
        for (int i0 = 0; i0 < 3; i0++)
            for (int i1 = 0; i1 < 3; i1++) {
                torc_scope_push();
                torc_tensor *a, *b;
                make_inputs((layout)lay, R, N, DTYPES[i0], DTYPES[i1], 100 * (uint64_t)_i + 10 * (uint64_t)lay, &a, &b);
                // (SLICED rows of one element are a strided column, which the loops leave to others)
                const bool native = !(lay == SLICED && N == 1);
                for (int io = 0; io < 3; io++)
                    for (int k = 0; k < 4; k++) check_as(OPS[k], a, b, DTYPES[io], 1.0, native, LAYOUT_NAMES[lay]);
                torc_scope_pop();
            }
}
END_TEST

// Every pair of special values (in0 down a column, in1 along a row), each op, each dtype mix.
START_TEST(special_values_match_the_reference) {
    setup();
    static const float sp[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-40f, -1e-45f, FLT_MIN,
                               FLT_MAX, -FLT_MAX, 65504.0f, 65520.0f, 1.00390625f, 3.0f, 1e-8f, 0.1f};
    const int64_t K = sizeof sp / sizeof sp[0];
    for (int i0 = 0; i0 < 3; i0++)
        for (int i1 = 0; i1 < 3; i1++) {
            torc_scope_push();
            torc_tensor *col = torc_to_device(torc_tensor_from(sp, TORC_SHAPE(K, 1), TORC_DTYPE_F32), g_dnn);
            torc_tensor *row = torc_to_device(torc_tensor_from(sp, TORC_SHAPE(K), TORC_DTYPE_F32), g_dnn);
            torc_tensor *a = torc_expand(torc_to_dtype(col, DTYPES[i0]), TORC_SHAPE(K, K));
            torc_tensor *b = torc_expand(torc_to_dtype(row, DTYPES[i1]), TORC_SHAPE(K, K));
            torc_tensor *ac = torc_contiguous(a);  // the same pairs, in0 contiguous
            for (int io = 0; io < 3; io++)
                for (int k = 0; k < 4; k++) {
                    check(OPS[k], a, b, DTYPES[io], 1.0, "specials");
                    check(OPS[k], ac, b, DTYPES[io], 1.0, "specials (in0 dense)");
                }
            torc_scope_pop();
        }
}
END_TEST

// ADD / SUB with alpha: one fma with alpha rounded to the op's dtype (3.7 is not a bf16 or f16
// value; 1e39 is past float32's range; -1 is the plain difference).
START_TEST(alpha_matches_the_reference) {
    setup();
    static const double alphas[] = {0.5, 3.7, -2.3, 1e-3, -1.0, 0.0, 1e39, 1.0 / 3.0};
    static const int64_t sizes[][2] = {{3, 17}, {7, 1025}};
    for (int s = 0; s < 2; s++)
        for (int lay = 0; lay < N_LAYOUTS; lay++)
            for (int i0 = 0; i0 < 3; i0++)
                for (int i1 = 0; i1 < 3; i1++) {
                    torc_scope_push();
                    torc_tensor *a, *b;
                    make_inputs((layout)lay, sizes[s][0], sizes[s][1], DTYPES[i0], DTYPES[i1], 7 + (uint64_t)lay, &a, &b);
                    for (int io = 0; io < 3; io++)
                        for (int k = 0; k < 8; k++) {
                            check(TORC_OP_ADD, a, b, DTYPES[io], alphas[k], LAYOUT_NAMES[lay]);
                            check(TORC_OP_SUB, a, b, DTYPES[io], alphas[k], LAYOUT_NAMES[lay]);
                        }
                    torc_scope_pop();
                }
}
END_TEST

// out = in0 (add_, mul_, ...): in0 read before out is written, for every layout of in1; and out =
// in1 where in1 is a contiguous operand too.
START_TEST(in_place_matches_the_reference) {
    setup();
    static const layout lays[] = {SAME, ROW, COL, SCALAR};
    for (int l = 0; l < 4; l++)
        for (int i0 = 0; i0 < 3; i0++)
            for (int i1 = 0; i1 < 3; i1++)
                for (int k = 0; k < 4; k++)
                    for (int into1 = 0; into1 < (lays[l] == SAME ? 2 : 1); into1++) {
                        torc_scope_push();
                        torc_tensor *a, *b;
                        make_inputs(lays[l], 5, 1031, DTYPES[i0], DTYPES[i1], 31 + (uint64_t)l, &a, &b);
                        const double alpha = k < 2 ? 0.75 : 1.0;
                        torc_tensor *want = empty_on(g_ref, TORC_SHAPE(5, 1031), into1 ? DTYPES[i1] : DTYPES[i0]);
                        run_on(g_ref, OPS[k], a, b, want, alpha, false);
                        torc_tensor *ra = torc_clone(a), *rb = torc_clone(b);  // onednn's in place
                        ck_assert_msg(ra && rb, "%s", torc_last_error());
                        torc_tensor *out = into1 ? rb : ra;
                        run_on(g_dnn, OPS[k], ra, rb, out, alpha, true);
                        char msg[128];
                        snprintf(msg, sizeof msg, "in place into in%d, %s %s(%s, %s)", into1, LAYOUT_NAMES[lays[l]],
                                 torc_op_name(OPS[k]), torc_dtype_name(DTYPES[i0]), torc_dtype_name(DTYPES[i1]));
                        assert_same(out, want, msg);
                        torc_scope_pop();
                    }
}
END_TEST

// bf16 autocast's bias add (a bf16 (B*T, out) product + an f32 (out) bias -> f32) and an f16
// activation times an f32 scalar -> f16, large enough to run on both threads: the same bits at 1
// and 2 threads, and the reference's.
START_TEST(one_and_two_threads_give_the_same_bits) {
    setup();
    const int nthr0 = omp_get_max_threads();
    static const struct { layout lay; int64_t R, N; torc_dtype d0, d1, o; torc_opcode code; } cases[] = {
        {ROW, 300, 1536, TORC_DTYPE_BF16, TORC_DTYPE_F32, TORC_DTYPE_F32, TORC_OP_ADD},
        {SCALAR, 100, 2000, TORC_DTYPE_F16, TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_OP_MUL},
        {SAME, 3, 70001, TORC_DTYPE_BF16, TORC_DTYPE_BF16, TORC_DTYPE_BF16, TORC_OP_SUB},
        {COL, 1000, 77, TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F32, TORC_OP_DIV},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        torc_scope_push();
        torc_tensor *a, *b, *out[2];
        make_inputs(cases[c].lay, cases[c].R, cases[c].N, cases[c].d0, cases[c].d1, 5 + c, &a, &b);
        for (int t = 0; t < 2; t++) {
            omp_set_num_threads(t + 1);
            out[t] = empty_on(g_dnn, TORC_SHAPE(cases[c].R, cases[c].N), cases[c].o);
            run_on(g_dnn, cases[c].code, a, b, out[t], 0.5, true);
        }
        omp_set_num_threads(nthr0);
        assert_same(out[1], out[0], "2 threads against 1");
        check(cases[c].code, a, b, cases[c].o, 0.5, LAYOUT_NAMES[cases[c].lay]);
        torc_scope_pop();
    }
}
END_TEST

// The composed attention's f32 (B, H, T, T) scores: times a scale, and minus a (B, H, T, 1) row
// statistic (softmax's backward), which oneDNN's binary primitive ran on its reference code.
START_TEST(four_dim_scores_run_natively) {
    setup();
    torc_scope_push();
    const int64_t shape[4] = {2, 3, 64, 64};
    torc_tensor *s = values(4, shape, TORC_DTYPE_F32, 3);
    torc_tensor *m = torc_expand(values(TORC_SHAPE(2, 3, 64, 1), TORC_DTYPE_F32, 4), 4, shape);
    torc_tensor *c = torc_expand(values(TORC_SHAPE(1), TORC_DTYPE_F32, 5), 4, shape);
    ck_assert_msg(m && c, "%s", torc_last_error());
    for (int k = 0; k < 4; k++) {
        check(OPS[k], s, m, TORC_DTYPE_F32, 1.0, "scores and a row statistic");
        check(OPS[k], s, c, TORC_DTYPE_F32, 1.0, "scores and a scale");
    }
    torc_scope_pop();
}
END_TEST

int main(void) {
    Suite *s = suite_create("onednn_binary");
    TCase *tc = tcase_create("onednn_binary");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, every_dtype_mix_and_layout_matches_the_reference, 0, N_SIZES);
    tcase_add_test(tc, special_values_match_the_reference);
    tcase_add_test(tc, alpha_matches_the_reference);
    tcase_add_test(tc, in_place_matches_the_reference);
    tcase_add_test(tc, one_and_two_threads_give_the_same_bits);
    tcase_add_test(tc, four_dim_scores_run_natively);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
