// tests/cuda_cases.h — the op cases both CUDA suites run against the reference backend: every
// op family x dtype x layout (contiguous, transposed, stepped, broadcast, empty, 0-dim). A suite
// passes a check function: the host suite runs the backend's dispatch with emulated kernels, the
// GPU suite the real device. Header-only (static functions) so each test stays one program.
#ifndef TORC_TESTS_CUDA_CASES_H
#define TORC_TESTS_CUDA_CASES_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <torc/backend.h>
#include <torc/philox.h>

#include "dtype_io.h"
#include "layout.h"
#include "reduce_ops.h"

// ---- test tensors: a storage buffer and a strided view into it ----
typedef struct tview {
    torc_dtype dt;
    int64_t n;         // storage elements
    char *mem;
    torc_operand op;
} tview;

enum { L_CONTIG, L_TRANS, L_STEP, L_BCAST, L_COUNT };
static const char *const LAYOUT_NAMES[] = {"contiguous", "transposed", "stepped", "broadcast"};

static uint64_t g_rng = 88172645463325252ull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static double urand(double lo, double hi) { return lo + (hi - lo) * (double)(rnd() >> 11) * 0x1.0p-53; }

static int esize(torc_dtype d) { return torc_abi_dtype_size(d); }

// Storage aligned as the device allocator's blocks (512 bytes), so that an alignment a view has
// on the host is the one it has on the device.
static char *tv_alloc(int64_t n, torc_dtype dt) {
    const size_t bytes = ((size_t)n * (size_t)esize(dt) + 511) / 512 * 512;
    char *m = aligned_alloc(512, bytes);
    if (m) memset(m, 0, bytes);
    return m;
}

// A view of `shape` with the given layout (transposed: last two dims swapped in storage;
// stepped: every dim strided by 2 plus an offset; broadcast: dim 0 has stride 0), values drawn
// uniformly from [lo, hi] (integers for integer dtypes), starting `shift` bytes (a multiple of
// the element size) into its storage.
static tview tv_new_at(torc_dtype dt, int ndim, const int64_t *shape, int layout, double lo, double hi, int shift) {
    tview t;
    memset(&t, 0, sizeof t);
    t.dt = dt;
    t.op.dtype = dt;
    t.op.ndim = ndim;
    int64_t st[TORC_MAX_DIMS], s = 1;
    int order[TORC_MAX_DIMS];
    for (int d = 0; d < ndim; d++) order[d] = d;
    if (layout == L_TRANS && ndim >= 2) {
        order[ndim - 2] = ndim - 1;
        order[ndim - 1] = ndim - 2;
    }
    const int64_t step = layout == L_STEP ? 2 : 1;
    for (int i = ndim - 1; i >= 0; i--) {
        const int d = order[i];
        st[d] = s * step;
        s *= shape[d] > 0 ? shape[d] * step : 1;
    }
    if (layout == L_BCAST && ndim > 0) st[0] = 0;
    int64_t reach = 0, numel = 1;
    for (int d = 0; d < ndim; d++) {
        t.op.shape[d] = shape[d];
        t.op.stride[d] = st[d];
        numel *= shape[d];
        reach += (shape[d] - 1) * st[d];
    }
    const int64_t off = (layout == L_STEP ? 3 : 0) + shift / esize(dt);
    t.n = (numel > 0 ? reach + 1 : 1) + off + (layout == L_STEP ? 2 : 0);
    t.mem = tv_alloc(t.n, dt);
    for (int64_t i = 0; i < t.n; i++) {
        double v = urand(lo, hi);
        if (!tcu_dtype_is_float(dt)) v = floor(v + 0.5);
        tcu_store_f64(t.mem, i, dt, v);
    }
    t.op.data = t.mem + off * esize(dt);
    return t;
}

static tview tv_new(torc_dtype dt, int ndim, const int64_t *shape, int layout, double lo, double hi) {
    return tv_new_at(dt, ndim, shape, layout, lo, hi, 0);
}

static tview tv_clone(const tview *s) {
    tview t = *s;
    t.mem = tv_alloc(t.n, t.dt);
    memcpy(t.mem, s->mem, (size_t)t.n * (size_t)esize(t.dt));
    t.op.data = t.mem + ((char *)s->op.data - s->mem);
    return t;
}

static void tv_free(tview *t) {
    free(t->mem);
    t->mem = NULL;
}

// Per-dtype tolerance (relative and absolute) of the emulated backend against the reference:
// float math versus double, and a different summation order.
static void tolerance(torc_dtype d, double *rtol, double *atol) {
    switch (d) {
    case TORC_DTYPE_F64: *rtol = 1e-12; *atol = 1e-12; break;
    case TORC_DTYPE_F32: *rtol = 2e-5; *atol = 1e-5; break;
    case TORC_DTYPE_F16: *rtol = 2e-3; *atol = 2e-3; break;
    case TORC_DTYPE_BF16: *rtol = 1.6e-2; *atol = 1e-2; break;
    case TORC_DTYPE_F8_E4M3FN: *rtol = 0.13; *atol = 0.02; break;
    case TORC_DTYPE_F8_E5M2: *rtol = 0.26; *atol = 0.02; break;
    default: *rtol = 0; *atol = 0; break;
    }
}

static char g_case[512];

// The largest |got - want| / mag of f32 outputs (no rounding of their own to speak of) seen by
// tv_match_mag: the GPU suite prints it for scaled_mm.
static double g_mag_err_max;

// Compares whole storages (so writes outside the view are caught too). Exact for integers. With
// mag (a storage like want's): each element may be off by mag_tol * |mag| more.
static bool tv_match_mag(const tview *got, const tview *want, double rscale, const tview *mag, double mag_tol) {
    double rtol, atol;
    tolerance(got->dt, &rtol, &atol);
    rtol *= rscale;
    atol *= rscale;
    for (int64_t i = 0; i < got->n; i++) {
        if (!tcu_dtype_is_float(got->dt)) {
            const int64_t g = tcu_load_i64(got->mem, i, got->dt), w = tcu_load_i64(want->mem, i, want->dt);
            if (g != w) {
                fprintf(stderr, "%s: storage[%lld] = %lld, reference %lld\n", g_case, (long long)i, (long long)g,
                        (long long)w);
                return false;
            }
            continue;
        }
        const double g = tcu_load_f64(got->mem, i, got->dt), w = tcu_load_f64(want->mem, i, want->dt);
        if (isnan(g) && isnan(w)) continue;
        const double m = mag ? fabs(tcu_load_f64(mag->mem, i, mag->dt)) : 0;
        if (got->dt == TORC_DTYPE_F32 && m > 0 && fabs(g - w) / m > g_mag_err_max) g_mag_err_max = fabs(g - w) / m;
        if (isinf(w) || isinf(g) ? g == w : fabs(g - w) <= atol + rtol * fabs(w) + mag_tol * m) continue;
        fprintf(stderr, "%s: storage[%lld] = %.9g, reference %.9g\n", g_case, (long long)i, g, w);
        return false;
    }
    return true;
}

static bool tv_match(const tview *got, const tview *want, double rscale) {
    return tv_match_mag(got, want, rscale, NULL, 0);
}

// Checks one op against the reference: ins are the tviews behind op->in[0..n_in) (NULL when
// n_in is 0), out the view op->out[0] was made from. Returns false on a mismatch (and prints it).
typedef bool (*case_check_fn)(torc_op *op, tview *const *ins, tview *out, double rscale);

static const torc_dtype ALL_DT[] = {TORC_DTYPE_F64, TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16,
                                    TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E5M2, TORC_DTYPE_I64, TORC_DTYPE_I32,
                                    TORC_DTYPE_I16, TORC_DTYPE_I8, TORC_DTYPE_U8, TORC_DTYPE_BOOL};
#define N_DT ((int)(sizeof ALL_DT / sizeof ALL_DT[0]))

typedef struct shape_case {
    int ndim;
    int64_t shape[4];
} shape_case;
static const shape_case SHAPES[] = {
    {3, {4, 5, 6}}, {2, {0, 3}}, {0, {0}}, {4, {1, 7, 1, 3}}, {3, {2, 3, 33}}, {1, {1000}},
};
#define N_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

static void value_range(int code, torc_dtype dt, double *lo, double *hi) {
    *lo = -3;
    *hi = 3;
    if (code == TORC_OP_LOG || code == TORC_OP_SQRT || code == TORC_OP_RSQRT) *lo = 0.05;
    if (code == TORC_OP_ERFINV) *lo = -0.95, *hi = 0.95;
    if (dt == TORC_DTYPE_U8) *lo = 0, *hi = 9;
    if (dt == TORC_DTYPE_BOOL) *lo = 0, *hi = 1;
}

// ---- the families; each returns its number of failed cases ----
static int cases_unary(case_check_fn check) {
    // ^1 is x itself, bit for bit (PyTorch's pow_out copies; CUDA's pow(3.0, 1.0) is not 3)
    const double exps[] = {2, 3, 0.5, -1, 1.7, 1};
    const int n_exps = (int)(sizeof exps / sizeof exps[0]);
    int failures = 0, runs = 0;
    for (int code = TORC_OP_NEG; code <= TORC_OP_LOGICAL_NOT; code++)
        for (int di = 0; di < N_DT; di++)
            for (int s = 0; s < N_SHAPES; s++)
                for (int lay = 0; lay < L_COUNT; lay++)
                    for (int e = 0; e < (code == TORC_OP_POW_SCALAR ? n_exps : 1); e++) {
                        const torc_dtype in_dt = ALL_DT[di];
                        torc_dtype out_dt = in_dt;
                        const bool int_ok = code == TORC_OP_NEG || code == TORC_OP_ABS || code == TORC_OP_SIGN ||
                                            code == TORC_OP_SQUARE || code == TORC_OP_RELU || code == TORC_OP_POW_SCALAR;
                        if (code == TORC_OP_LOGICAL_NOT) out_dt = TORC_DTYPE_BOOL;
                        else if (!tcu_dtype_is_float(in_dt) && !int_ok) out_dt = TORC_DTYPE_F32;
                        if (code == TORC_OP_POW_SCALAR && !tcu_dtype_is_float(in_dt) && (exps[e] < 0 || exps[e] != floor(exps[e])))
                            continue;
                        double lo, hi;
                        value_range(code, in_dt, &lo, &hi);
                        const shape_case *sc = &SHAPES[s];
                        tview in = tv_new(in_dt, sc->ndim, sc->shape, lay, lo, hi);
                        tview out = tv_new(out_dt, sc->ndim, sc->shape, lay == L_BCAST ? L_STEP : L_CONTIG, 0, 0);
                        torc_op op;
                        memset(&op, 0, sizeof op);
                        op.code = code;
                        op.n_out = 1;
                        op.n_in = 1;
                        op.in[0] = in.op;
                        op.out[0] = out.op;
                        op.params.scalar.value = exps[e];
                        if (code == TORC_OP_GELU) op.params.gelu.approximate = (int)(rnd() & 1);
                        snprintf(g_case, sizeof g_case, "unary op %d in %d out %d shape %d %s exp %g", code, in_dt,
                                 out_dt, s, LAYOUT_NAMES[lay], exps[e]);
                        failures += !check(&op, (tview *[]){&in}, &out, code == TORC_OP_POW_SCALAR && exps[e] == 1 ? 0.0 : 1.0);
                        runs++;
                        tv_free(&in);
                        tv_free(&out);
                    }

    return failures;
}

static int cases_binary(case_check_fn check) {
    // (in0, in1, out) triples: same dtype everywhere, and PyTorch's mixed promotions
    typedef struct trio { torc_dtype a, b, o; } trio;
    trio trios[N_DT + 6];
    int nt = 0;
    for (int di = 0; di < N_DT; di++) trios[nt++] = (trio){ALL_DT[di], ALL_DT[di], ALL_DT[di]};
    trios[nt++] = (trio){TORC_DTYPE_I32, TORC_DTYPE_F32, TORC_DTYPE_F32};
    trios[nt++] = (trio){TORC_DTYPE_F16, TORC_DTYPE_BF16, TORC_DTYPE_F32};
    trios[nt++] = (trio){TORC_DTYPE_I64, TORC_DTYPE_F64, TORC_DTYPE_F64};
    trios[nt++] = (trio){TORC_DTYPE_BOOL, TORC_DTYPE_I8, TORC_DTYPE_I8};
    trios[nt++] = (trio){TORC_DTYPE_U8, TORC_DTYPE_I8, TORC_DTYPE_I16};
    trios[nt++] = (trio){TORC_DTYPE_I16, TORC_DTYPE_I32, TORC_DTYPE_F32};  // true division of integers
    const double alphas[] = {1, 2, 0.5};
    int failures = 0, runs = 0;
    for (int code = TORC_OP_ADD; code <= TORC_OP_LOGICAL_OR; code++)
        for (int t = 0; t < nt; t++)
            for (int s = 0; s < N_SHAPES; s++)
                for (int lay = 0; lay < L_COUNT; lay++)
                    for (int al = 0; al < ((code == TORC_OP_ADD || code == TORC_OP_SUB) ? 3 : 1); al++) {
                        trio tr = trios[t];
                        const bool cmp = code >= TORC_OP_EQ;
                        if (cmp) tr.o = TORC_DTYPE_BOOL;
                        if (code == TORC_OP_DIV && !tcu_dtype_is_float(tr.o)) tr.o = TORC_DTYPE_F32;
                        double lo = -3, hi = 3;
                        if (code == TORC_OP_POW) lo = 0.1;
                        const shape_case *sc = &SHAPES[s];
                        tview a = tv_new(tr.a, sc->ndim, sc->shape, lay, tr.a == TORC_DTYPE_U8 || tr.a == TORC_DTYPE_BOOL ? 0 : lo,
                                         tr.a == TORC_DTYPE_BOOL ? 1 : hi);
                        tview b = tv_new(tr.b, sc->ndim, sc->shape, (lay + 1) % L_COUNT,
                                         tr.b == TORC_DTYPE_U8 || tr.b == TORC_DTYPE_BOOL ? 0 : (code == TORC_OP_POW ? 0 : lo),
                                         tr.b == TORC_DTYPE_BOOL ? 1 : hi);
                        if (cmp && tr.a == tr.b) {  // some equal pairs
                            const int64_t k = a.n < b.n ? (a.n < 2 ? a.n : 2) : (b.n < 2 ? b.n : 2);
                            memcpy(b.mem, a.mem, (size_t)k * (size_t)esize(tr.a));
                        }
                        tview out = tv_new(tr.o, sc->ndim, sc->shape, lay == L_TRANS ? L_TRANS : L_CONTIG, 0, 0);
                        torc_op op;
                        memset(&op, 0, sizeof op);
                        op.code = code;
                        op.n_out = 1;
                        op.n_in = 2;
                        op.in[0] = a.op;
                        op.in[1] = b.op;
                        op.out[0] = out.op;
                        op.params.scalar.value = alphas[al];
                        snprintf(g_case, sizeof g_case, "binary op %d (%d, %d) -> %d shape %d %s alpha %g", code, tr.a,
                                 tr.b, tr.o, s, LAYOUT_NAMES[lay], alphas[al]);
                        failures += !check(&op, (tview *[]){&a, &b}, &out, code == TORC_OP_POW ? 4.0 : 1.0);
                        runs++;
                        tv_free(&a);
                        tv_free(&b);
                        tv_free(&out);
                    }
    // floor_divide, remainder, fmod (ABI 2.3) on the same trios (bool and fp8 refused on both
    // sides), divisors of both signs; no integer zero divisor (an error the device reports at the
    // next synchronize), float zeros kept (inf, nan, signed zeros)
    for (int code = TORC_OP_FLOOR_DIVIDE; code <= TORC_OP_FMOD; code++)
        for (int t = 0; t < nt; t++)
            for (int s = 0; s < N_SHAPES; s++)
                for (int lay = 0; lay < L_COUNT; lay++) {
                    const trio tr = trios[t];
                    const shape_case *sc = &SHAPES[s];
                    const bool ua = tr.a == TORC_DTYPE_U8 || tr.a == TORC_DTYPE_BOOL, ub = tr.b == TORC_DTYPE_U8;
                    tview a = tv_new(tr.a, sc->ndim, sc->shape, lay, ua ? 0 : -9, tr.a == TORC_DTYPE_BOOL ? 1 : 9);
                    tview b = tv_new(tr.b, sc->ndim, sc->shape, (lay + 1) % L_COUNT, ub ? 1 : -4,
                                     tr.b == TORC_DTYPE_BOOL ? 1 : 4);
                    if (!tcu_dtype_is_float(tr.b))
                        for (int64_t i = 0; i < b.n; i++)
                            if (tcu_load_f64(b.mem, i, tr.b) == 0) tcu_store_f64(b.mem, i, tr.b, 3);
                    tview out = tv_new(tr.o, sc->ndim, sc->shape, lay == L_TRANS ? L_TRANS : L_CONTIG, 0, 0);
                    torc_op op;
                    memset(&op, 0, sizeof op);
                    op.code = code;
                    op.n_out = 1;
                    op.n_in = 2;
                    op.in[0] = a.op;
                    op.in[1] = b.op;
                    op.out[0] = out.op;
                    snprintf(g_case, sizeof g_case, "binary op %d (%d, %d) -> %d shape %d %s", code, tr.a, tr.b, tr.o, s,
                             LAYOUT_NAMES[lay]);
                    failures += !check(&op, (tview *[]){&a, &b}, &out, 1.0);
                    runs++;
                    tv_free(&a);
                    tv_free(&b);
                    tv_free(&out);
                }
    // gelu_backward (ABI 2.4): dy, x -> dx of one floating dtype, x over both tails, both forms
    for (int di = 0; di < 4; di++)
        for (int form = 0; form < 2; form++)
            for (int s = 0; s < N_SHAPES; s++)
                for (int lay = 0; lay < L_COUNT; lay++) {
                    const torc_dtype dt = ALL_DT[di];  // f64, f32, f16, bf16
                    const shape_case *sc = &SHAPES[s];
                    tview a = tv_new(dt, sc->ndim, sc->shape, lay, -3, 3);
                    tview b = tv_new(dt, sc->ndim, sc->shape, (lay + 1) % L_COUNT, -8, 8);
                    tview out = tv_new(dt, sc->ndim, sc->shape, lay == L_TRANS ? L_TRANS : L_CONTIG, 0, 0);
                    torc_op op;
                    memset(&op, 0, sizeof op);
                    op.code = TORC_OP_GELU_BACKWARD;
                    op.n_out = 1;
                    op.n_in = 2;
                    op.in[0] = a.op;
                    op.in[1] = b.op;
                    op.out[0] = out.op;
                    op.params.gelu.approximate = form;
                    snprintf(g_case, sizeof g_case, "gelu_backward %d approximate %d shape %d %s", dt, form, s,
                             LAYOUT_NAMES[lay]);
                    failures += !check(&op, (tview *[]){&a, &b}, &out, 1.0);
                    tv_free(&a);
                    tv_free(&b);
                    tv_free(&out);
                }

    return failures;
}

// The fused pointwise ops: every dtype each takes (integers for addcmul), a mixed-dtype input,
// every layout, values that exercise both lerp branches.
static int cases_fused(case_check_fn check) {
    const torc_dtype dts[] = {TORC_DTYPE_F64, TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16, TORC_DTYPE_I64,
                              TORC_DTYPE_I32, TORC_DTYPE_U8};
    const double values[] = {0.3, -1.7, 2};
    const int codes[] = {TORC_OP_ADDCMUL, TORC_OP_ADDCDIV, TORC_OP_LERP};
    int failures = 0;
    for (int c = 0; c < 3; c++)
        for (int di = 0; di < 7; di++)
            for (int s = 0; s < N_SHAPES; s++)
                for (int lay = 0; lay < L_COUNT; lay++)
                    for (int v = 0; v < 3; v++) {
                        const int code = codes[c];
                        const torc_dtype dt = dts[di];
                        if (!tcu_dtype_is_float(dt) && code != TORC_OP_ADDCMUL) continue;
                        const double lo = dt == TORC_DTYPE_U8 ? 0 : -3, hi = dt == TORC_DTYPE_U8 ? 3 : 3;
                        const shape_case *sc = &SHAPES[s];
                        // in1 of another dtype where promotion allows it (f32 into f64, f16 into f32)
                        const torc_dtype d1 = dt == TORC_DTYPE_F64 ? TORC_DTYPE_F32 : dt == TORC_DTYPE_F32 ? TORC_DTYPE_F16 : dt;
                        tview x = tv_new(dt, sc->ndim, sc->shape, lay, lo, hi);
                        tview y = tv_new(d1, sc->ndim, sc->shape, (lay + 1) % L_COUNT, lo, hi);
                        tview z = tv_new(dt, sc->ndim, sc->shape, (lay + 2) % L_COUNT, code == TORC_OP_ADDCDIV ? 0.5 : lo, hi);
                        tview out = tv_new(dt, sc->ndim, sc->shape, lay == L_BCAST ? L_STEP : L_CONTIG, 0, 0);
                        torc_op op;
                        memset(&op, 0, sizeof op);
                        op.code = code;
                        op.n_out = 1;
                        op.n_in = code == TORC_OP_LERP ? 2 : 3;
                        op.in[0] = x.op;
                        op.in[1] = y.op;
                        op.in[2] = z.op;
                        op.out[0] = out.op;
                        op.params.scalar.value = code == TORC_OP_LERP ? values[v] / 4 : values[v];
                        snprintf(g_case, sizeof g_case, "fused op %d dtype %d shape %d %s value %g", code, dt, s,
                                 LAYOUT_NAMES[lay], op.params.scalar.value);
                        failures += !check(&op, (tview *[]){&x, &y, &z}, &out, 1.0);
                        tv_free(&x);
                        tv_free(&y);
                        tv_free(&z);
                        tv_free(&out);
                    }
    return failures;
}

static int cases_where_copy_fill(case_check_fn check) {
    int failures = 0;
    for (int s = 0; s < N_SHAPES; s++)
        for (int lay = 0; lay < L_COUNT; lay++) {
            const shape_case *sc = &SHAPES[s];
            for (int i = 0; i < N_DT; i++)
                for (int j = 0; j < N_DT; j++) {  // COPY between every dtype pair
                    tview in = tv_new(ALL_DT[i], sc->ndim, sc->shape, lay, -300, 300);
                    // out in another layout, never broadcast: an output's elements never share memory
                    tview out = tv_new(ALL_DT[j], sc->ndim, sc->shape, (lay + 1) % L_BCAST, 0, 0);
                    torc_op op;
                    memset(&op, 0, sizeof op);
                    op.code = TORC_OP_COPY;
                    op.n_out = 1;
                    op.n_in = 1;
                    op.in[0] = in.op;
                    op.out[0] = out.op;
                    snprintf(g_case, sizeof g_case, "copy %d -> %d shape %d %s", ALL_DT[i], ALL_DT[j], s, LAYOUT_NAMES[lay]);
                    failures += !check(&op, (tview *[]){&in}, &out, 1.0);
                    tv_free(&in);
                    tv_free(&out);
                }
            for (int j = 0; j < N_DT; j++) {
                // WHERE with inputs of two dtypes
                tview c = tv_new(TORC_DTYPE_BOOL, sc->ndim, sc->shape, lay, 0, 1);
                tview x = tv_new(ALL_DT[j], sc->ndim, sc->shape, (lay + 1) % L_COUNT, -5, 5);
                tview y = tv_new(TORC_DTYPE_F32, sc->ndim, sc->shape, (lay + 2) % L_COUNT, -5, 5);
                tview out = tv_new(tcu_dtype_is_float(ALL_DT[j]) ? ALL_DT[j] : TORC_DTYPE_F32, sc->ndim, sc->shape, L_CONTIG, 0, 0);
                torc_op op;
                memset(&op, 0, sizeof op);
                op.code = TORC_OP_WHERE;
                op.n_out = 1;
                op.n_in = 3;
                op.in[0] = c.op;
                op.in[1] = x.op;
                op.in[2] = y.op;
                op.out[0] = out.op;
                snprintf(g_case, sizeof g_case, "where x %d shape %d %s", ALL_DT[j], s, LAYOUT_NAMES[lay]);
                failures += !check(&op, (tview *[]){&c, &x, &y}, &out, 1.0);
                tv_free(&c);
                tv_free(&x);
                tv_free(&y);
                tv_free(&out);
                // FILL (0.0 takes the memset path on contiguous outputs)
                const double vals[] = {0.0, -0.0, 1.5, 300.0, -7.0, NAN, 1e10};
                for (int v = 0; v < 7; v++) {
                    tview o2 = tv_new(ALL_DT[j], sc->ndim, sc->shape, lay == L_BCAST ? L_STEP : lay, -1, 1);
                    torc_op f;
                    memset(&f, 0, sizeof f);
                    f.code = TORC_OP_FILL;
                    f.n_out = 1;
                    f.out[0] = o2.op;
                    f.params.scalar.value = vals[v];
                    snprintf(g_case, sizeof g_case, "fill %g dtype %d shape %d %s", vals[v], ALL_DT[j], s, LAYOUT_NAMES[lay]);
                    failures += !check(&f, NULL, &o2, 1.0);
                    tv_free(&o2);
                }
            }
        }

    return failures;
}

static int cases_ranges_rng(case_check_fn check) {
    int failures = 0;
    for (int j = 0; j < N_DT; j++) {
        const int64_t n[1] = {257};
        for (int lay = 0; lay < 3; lay += 2) {  // contiguous and stepped outputs
            tview out = tv_new(ALL_DT[j], 1, n, lay, 0, 0);
            torc_op op;
            memset(&op, 0, sizeof op);
            op.out[0] = out.op;
            op.code = TORC_OP_ARANGE;
            op.n_out = 1;
            op.params.range.start = -3.5;
            op.params.range.step = 0.25;
            snprintf(g_case, sizeof g_case, "arange dtype %d", ALL_DT[j]);
            failures += !check(&op, NULL, &out, 0.0);
            op.code = TORC_OP_LINSPACE;
            op.n_out = 1;
            op.params.range.start = -1;
            op.params.range.end = 7;
            op.params.range.count = 257;
            snprintf(g_case, sizeof g_case, "linspace dtype %d", ALL_DT[j]);
            failures += !check(&op, NULL, &out, 0.0);
            for (int code = TORC_OP_RAND_UNIFORM; code <= TORC_OP_RAND_INT; code++) {
                memset(&op.params, 0, sizeof op.params);
                op.code = code;
                op.n_out = 1;
                op.params.rng.seed = 0x1234567890ull + (uint64_t)j;
                op.params.rng.offset = 1000003;
                op.params.rng.a = code == TORC_OP_RAND_INT ? -5 : 0.5;
                op.params.rng.b = code == TORC_OP_RAND_INT ? 17 : 2.0;
                snprintf(g_case, sizeof g_case, "rng op %d dtype %d layout %d", code, ALL_DT[j], lay);
                // bit for bit, randn too (philox.h's own log and cos, no math library's)
                failures += !check(&op, NULL, &out, 0.0);
            }
            tv_free(&out);
        }
        // RNG index = row-major index in out, also through a transposed 3-D view
        const int64_t sh[3] = {3, 4, 5};
        tview o3 = tv_new(ALL_DT[j], 3, sh, L_TRANS, 0, 0);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_RAND_NORMAL;
        op.n_out = 1;
        op.out[0] = o3.op;
        op.params.rng.seed = 42;
        op.params.rng.offset = 7;
        op.params.rng.a = 0;
        op.params.rng.b = 1;
        snprintf(g_case, sizeof g_case, "randn transposed dtype %d", ALL_DT[j]);
        failures += !check(&op, NULL, &o3, 0.0);
        tv_free(&o3);
    }

    return failures;
}

static int cases_reductions(case_check_fn check) {
    typedef struct rcase { int ndim; int64_t shape[4]; uint32_t mask; } rcase;
    const rcase cases[] = {
        {3, {4, 5, 6}, 1}, {3, {4, 5, 6}, 2}, {3, {4, 5, 6}, 4}, {3, {4, 5, 6}, 5}, {3, {4, 5, 6}, 7},
        {2, {2, 5000}, 2},     // long rows: a block per output, split over gridDim.y
        {2, {3000, 3}, 1},     // reduce the slow dim: a thread per output
        {1, {70000}, 1},       // everything into one output: split
        {2, {3, 0}, 2},        // empty reductions
        {0, {0}, 0},           // a 0-dim input
        {4, {2, 1, 40, 3}, 6},
    };
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    const double norms[] = {2, 1, 0, 3, INFINITY, -INFINITY, 0.5};
    int failures = 0;
    for (int code = TORC_OP_SUM; code <= TORC_OP_LOGSUMEXP; code++)
        for (int di = 0; di < N_DT; di++)
            for (int c = 0; c < n_cases; c++)
                for (int lay = 0; lay < 3; lay++)
                    for (int v = 0; v < (code == TORC_OP_NORM ? 7 : (code == TORC_OP_VAR || code == TORC_OP_STD ? 2 : 1)); v++) {
                        const rcase *rc = &cases[c];
                        if (rc->shape[0] * (rc->ndim > 1 ? rc->shape[1] : 1) > 20000 && lay != 0) continue;
                        if ((c == 5 || c == 7) && di > 3 && code != TORC_OP_SUM && code != TORC_OP_ARGMAX) continue;
                        const torc_dtype in_dt = ALL_DT[di];
                        torc_dtype out_dt = in_dt;
                        const bool float_only = code == TORC_OP_MEAN || code == TORC_OP_VAR || code == TORC_OP_STD ||
                                                code == TORC_OP_NORM || code == TORC_OP_LOGSUMEXP;
                        if (tcu_op_is_arg(code)) out_dt = TORC_DTYPE_I64;
                        else if (float_only && !tcu_dtype_is_float(in_dt)) out_dt = TORC_DTYPE_F32;
                        else if (code == TORC_OP_SUM && !tcu_dtype_is_float(in_dt)) out_dt = TORC_DTYPE_I64;
                        int64_t oshape[4];
                        for (int d = 0; d < rc->ndim; d++) oshape[d] = (rc->mask >> d & 1) ? 1 : rc->shape[d];
                        double lo = -2, hi = 2;
                        if (in_dt == TORC_DTYPE_U8) lo = 0;
                        if (in_dt == TORC_DTYPE_BOOL) lo = 0, hi = 1;
                        if (code == TORC_OP_PROD) lo = 0.9, hi = 1.1;
                        tview in = tv_new(in_dt, rc->ndim, rc->shape, lay, lo, hi);
                        if ((code == TORC_OP_ARGMAX || code == TORC_OP_MAX) && in.n > 4 && tcu_dtype_is_float(in_dt))
                            tcu_store_f64(in.mem, in.n / 2, in_dt, NAN);  // NaN propagates / wins
                        tview out = tv_new(out_dt, rc->ndim, oshape, lay == 1 ? L_STEP : L_CONTIG, 0, 0);
                        torc_op op;
                        memset(&op, 0, sizeof op);
                        op.code = code;
                        op.n_out = 1;
                        op.n_in = 1;
                        op.in[0] = in.op;
                        op.out[0] = out.op;
                        op.params.reduce.mask = rc->mask;
                        op.params.reduce.correction = v == 0 ? 1 : 0;
                        op.params.reduce.p = norms[v];
                        snprintf(g_case, sizeof g_case, "reduce op %d dtype %d case %d %s variant %d", code, in_dt, c,
                                 LAYOUT_NAMES[lay], v);
                        // float sums in a tree against compensated double: scale with length
                        const double scale = (c == 5 || c == 7) ? 20.0 : 2.0;
                        failures += !check(&op, (tview *[]){&in}, &out, scale);
                        tv_free(&in);
                        tv_free(&out);
                    }

    return failures;
}

// max_dim / min_dim: values (out) and indices (out[1], whose view the check finds after in's in
// ins). Values on a grid of halves, so ties are common; NaN in some floating cases.
static int cases_max_dim(case_check_fn check) {
    typedef struct mcase { int ndim; int64_t shape[3]; int dim; } mcase;
    const mcase cases[] = {
        {3, {4, 5, 6}, 0}, {3, {4, 5, 6}, 1}, {3, {4, 5, 6}, 2},
        {2, {2, 5000}, 1},     // long rows: a block per output, split over gridDim.y
        {2, {3000, 3}, 0},     // the slow dim: a thread per output
        {1, {70000}, 0},       // one output: split
        {2, {3, 0}, 0},        // no outputs
        {2, {0, 3}, 0},        // an empty dim: PyTorch's error
        {1, {1}, 0},           // a zero-dim tensor, as the core sends it
    };
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    int failures = 0;
    for (int code = TORC_OP_MAX_DIM; code <= TORC_OP_MIN_DIM; code++)
        for (int di = 0; di < N_DT; di++)
            for (int c = 0; c < n_cases; c++)
                for (int lay = 0; lay < L_COUNT; lay++)
                    for (int nan = 0; nan < (tcu_dtype_is_float(ALL_DT[di]) ? 2 : 1); nan++) {
                        const mcase *mc = &cases[c];
                        if (mc->shape[0] * (mc->ndim > 1 ? mc->shape[1] : 1) > 20000 && (lay != 0 || di > 3)) continue;
                        const torc_dtype dt = ALL_DT[di];
                        int64_t oshape[3];
                        for (int d = 0; d < mc->ndim; d++) oshape[d] = d == mc->dim ? 1 : mc->shape[d];
                        tview in = tv_new(dt, mc->ndim, mc->shape, lay, dt == TORC_DTYPE_BOOL ? 0 : -2,
                                          dt == TORC_DTYPE_BOOL ? 1 : 2);
                        if (tcu_dtype_is_float(dt))
                            for (int64_t i = 0; i < in.n; i++)
                                tcu_store_f64(in.mem, i, dt, floor(tcu_load_f64(in.mem, i, dt) * 2) / 2);
                        if (nan && in.n > 4) {
                            tcu_store_f64(in.mem, in.n / 2, dt, NAN);
                            tcu_store_f64(in.mem, in.n / 3, dt, NAN);
                        }
                        tview vals = tv_new(dt, mc->ndim, oshape, lay == 1 ? L_STEP : L_CONTIG, 0, 0);
                        tview idx = tv_new(TORC_DTYPE_I64, mc->ndim, oshape, L_CONTIG, -1, -1);
                        torc_op op;
                        memset(&op, 0, sizeof op);
                        op.code = code;
                        op.n_in = 1;
                        op.n_out = 2;
                        op.in[0] = in.op;
                        op.out[0] = vals.op;
                        op.out[1] = idx.op;
                        op.params.dim.dim = mc->dim;
                        snprintf(g_case, sizeof g_case, "%s dtype %d case %d %s nan %d", code == TORC_OP_MAX_DIM ? "max_dim"
                                 : "min_dim", dt, c, LAYOUT_NAMES[lay], nan);
                        failures += !check(&op, (tview *[]){&in, &idx}, &vals, 0.0);
                        tv_free(&in);
                        tv_free(&vals);
                        tv_free(&idx);
                    }
    return failures;
}

static int cases_softmax(case_check_fn check) {
    const shape_case shapes[] = {{3, {4, 5, 6}}, {2, {3, 3000}}, {2, {2000, 3}}, {0, {0}}, {2, {4, 0}}, {2, {5, 40}}};
    int failures = 0;
    for (int code = TORC_OP_SOFTMAX; code <= TORC_OP_LOG_SOFTMAX; code++)
        for (int di = 0; di < N_DT; di++)
            for (int s = 0; s < 6; s++)
                for (int dim = 0; dim < (shapes[s].ndim ? shapes[s].ndim : 1); dim++)
                    for (int lay = 0; lay < 3; lay++) {
                        const torc_dtype in_dt = ALL_DT[di];
                        const torc_dtype out_dt = tcu_dtype_is_float(in_dt) ? in_dt : TORC_DTYPE_F32;
                        tview in = tv_new(in_dt, shapes[s].ndim, shapes[s].shape, lay, -4, 4);
                        if (s == 5) {  // rows with -inf, +inf and NaN
                            tcu_store_f64(in.mem, 0, in_dt, -INFINITY);
                            tcu_store_f64(in.mem, 7, in_dt, INFINITY);
                            tcu_store_f64(in.mem, 12, in_dt, NAN);
                        }
                        tview out = tv_new(out_dt, shapes[s].ndim, shapes[s].shape, lay == 1 ? L_CONTIG : L_TRANS, 0, 0);
                        torc_op op;
                        memset(&op, 0, sizeof op);
                        op.code = code;
                        op.n_out = 1;
                        op.n_in = 1;
                        op.in[0] = in.op;
                        op.out[0] = out.op;
                        op.params.dim.dim = dim;
                        snprintf(g_case, sizeof g_case, "softmax op %d dtype %d shape %d dim %d %s", code, in_dt, s, dim,
                                 LAYOUT_NAMES[lay]);
                        failures += !check(&op, (tview *[]){&in}, &out, 2.0);
                        tv_free(&in);
                        tv_free(&out);
                    }

    return failures;
}

static int cases_matmul(case_check_fn check) {
    typedef struct mcase { torc_dtype a, b, o; } mcase;
    const mcase dts[] = {
        {TORC_DTYPE_F32, TORC_DTYPE_F32, TORC_DTYPE_F32}, {TORC_DTYPE_F64, TORC_DTYPE_F64, TORC_DTYPE_F64},
        {TORC_DTYPE_F16, TORC_DTYPE_F16, TORC_DTYPE_F16}, {TORC_DTYPE_BF16, TORC_DTYPE_BF16, TORC_DTYPE_BF16},
        {TORC_DTYPE_BF16, TORC_DTYPE_BF16, TORC_DTYPE_F32}, {TORC_DTYPE_I32, TORC_DTYPE_I32, TORC_DTYPE_I32},
        {TORC_DTYPE_I64, TORC_DTYPE_I64, TORC_DTYPE_I64}, {TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F32},
        {TORC_DTYPE_I8, TORC_DTYPE_I8, TORC_DTYPE_F32}, {TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_F32},
    };
    // (batch..., M, K, N) with layouts of a, b, out
    const int64_t sizes[][5] = {{1, 1, 5, 7, 3}, {2, 3, 4, 6, 5}, {1, 2, 1, 9, 1}, {1, 1, 6, 0, 4}, {1, 2, 17, 33, 9}};
    int failures = 0;
    for (int d = 0; d < (int)(sizeof dts / sizeof dts[0]); d++)
        for (int sz = 0; sz < 5; sz++)
            for (int la = 0; la < L_COUNT; la++)
                for (int lb = 0; lb < L_COUNT; lb++)
                    for (int lo = 0; lo < 3; lo++) {
                        const int64_t B0 = sizes[sz][0], B1 = sizes[sz][1], M = sizes[sz][2], K = sizes[sz][3], N = sizes[sz][4];
                        const int64_t sa[4] = {B0, B1, M, K}, sb[4] = {B0, B1, K, N}, so[4] = {B0, B1, M, N};
                        tview a = tv_new(dts[d].a, 4, sa, la, -2, 2), b = tv_new(dts[d].b, 4, sb, lb, -2, 2);
                        tview out = tv_new(dts[d].o, 4, so, lo == 2 ? L_STEP : lo, 0, 0);
                        torc_op op;
                        memset(&op, 0, sizeof op);
                        op.code = TORC_OP_MATMUL;
                        op.n_out = 1;
                        op.n_in = 2;
                        op.in[0] = a.op;
                        op.in[1] = b.op;
                        op.out[0] = out.op;
                        snprintf(g_case, sizeof g_case, "matmul %d x %d -> %d size %d a %s b %s out %d", dts[d].a, dts[d].b,
                                 dts[d].o, sz, LAYOUT_NAMES[la], LAYOUT_NAMES[lb], lo);
                        failures += !check(&op, (tview *[]){&a, &b}, &out, 4.0);
                        tv_free(&a);
                        tv_free(&b);
                        tv_free(&out);
                    }

    return failures;
}

static int cases_index(case_check_fn check) {
    int failures = 0;
    for (int di = 0; di < N_DT; di++) {
        const torc_dtype dt = ALL_DT[di];
        const double lo = dt == TORC_DTYPE_BOOL || dt == TORC_DTYPE_U8 ? 0 : -5, hi = dt == TORC_DTYPE_BOOL ? 1 : 5;
        for (int lay = 0; lay < 3; lay++)
            for (int dim = 0; dim < 3; dim++) {
                const int64_t src_shape[3] = {4, 5, 6};
                // INDEX_SELECT: out dim gets the index's length
                const int64_t nidx = 7;
                tview idx = tv_new(TORC_DTYPE_I64, 1, &nidx, lay == 2 ? L_STEP : L_CONTIG, 0, (double)src_shape[dim] - 1);
                int64_t osh[3] = {4, 5, 6};
                osh[dim] = nidx;
                tview src = tv_new(dt, 3, src_shape, lay, lo, hi);
                tview out = tv_new(dt, 3, osh, lay == 1 ? L_STEP : L_CONTIG, 0, 0);
                torc_op op;
                memset(&op, 0, sizeof op);
                op.code = TORC_OP_INDEX_SELECT;
                op.n_out = 1;
                op.n_in = 2;
                op.in[0] = src.op;
                op.in[1] = idx.op;
                op.out[0] = out.op;
                op.params.dim.dim = dim;
                snprintf(g_case, sizeof g_case, "index_select dtype %d dim %d %s", dt, dim, LAYOUT_NAMES[lay]);
                failures += !check(&op, (tview *[]){&src, &idx}, &out, 1.0);
                // INDEX_ADD into a 4x5x6 out from a source shaped like index_select's out
                tview acc = tv_new(dt, 3, src_shape, lay == 1 ? L_STEP : L_CONTIG, lo, hi);
                op.code = TORC_OP_INDEX_ADD;
                op.n_out = 1;
                op.in[0] = out.op;
                op.out[0] = acc.op;
                snprintf(g_case, sizeof g_case, "index_add dtype %d dim %d %s", dt, dim, LAYOUT_NAMES[lay]);
                failures += !check(&op, (tview *[]){&out, &idx}, &acc, 4.0);
                tv_free(&acc);
                tv_free(&out);
                tv_free(&idx);
                // GATHER / SCATTER_ADD with an index of shape 3x4x5 (fits in src except along dim)
                const int64_t ish[3] = {3, 4, 5};
                tview gidx = tv_new(TORC_DTYPE_I64, 3, ish, lay, 0, (double)src_shape[dim] - 1);
                tview gout = tv_new(dt, 3, ish, L_CONTIG, 0, 0);
                op.code = TORC_OP_GATHER;
                op.n_out = 1;
                op.in[0] = src.op;
                op.in[1] = gidx.op;
                op.out[0] = gout.op;
                snprintf(g_case, sizeof g_case, "gather dtype %d dim %d %s", dt, dim, LAYOUT_NAMES[lay]);
                failures += !check(&op, (tview *[]){&src, &gidx}, &gout, 1.0);
                tview sacc = tv_new(dt, 3, src_shape, L_CONTIG, lo, hi);
                op.code = TORC_OP_SCATTER_ADD;
                op.n_out = 1;
                op.in[0] = gout.op;
                op.out[0] = sacc.op;
                snprintf(g_case, sizeof g_case, "scatter_add dtype %d dim %d %s", dt, dim, LAYOUT_NAMES[lay]);
                failures += !check(&op, (tview *[]){&gout, &gidx}, &sacc, 4.0);
                // an out-of-range index: the reference fails, the kernel reports through the error word
                tcu_store_i64(gidx.op.data, 0, TORC_DTYPE_I64, 99);
                op.in[1] = gidx.op;
                snprintf(g_case, sizeof g_case, "scatter_add bad index dtype %d dim %d", dt, dim);
                failures += !check(&op, (tview *[]){&gout, &gidx}, &sacc, 4.0);
                tv_free(&sacc);
                tv_free(&gout);
                tv_free(&gidx);
                // MASKED_SELECT / MASKED_SCATTER
                tview mask = tv_new(TORC_DTYPE_BOOL, 3, src_shape, (lay + 1) % 3, 0, 1);
                int64_t count = 0;
                {
                    torc_operand m = mask.op;
                    tcu_iter it;
                    const int64_t *st[1] = {m.stride};
                    tcu_iter_build(&it, 3, m.shape, 1, st, 0);
                    for (int64_t i = 0; i < it.numel; i++) {
                        int64_t off[TCU_MAX_OPS];
                        tcu_offsets64(&it, i, off);
                        count += tcu_load_bool(m.data, off[0], TORC_DTYPE_BOOL);
                    }
                }
                tview sel = tv_new(dt, 1, &count, lay == 2 ? L_STEP : L_CONTIG, 0, 0);
                op.code = TORC_OP_MASKED_SELECT;
                op.n_out = 1;
                op.in[0] = src.op;
                op.in[1] = mask.op;
                op.out[0] = sel.op;
                snprintf(g_case, sizeof g_case, "masked_select dtype %d %s", dt, LAYOUT_NAMES[lay]);
                failures += !check(&op, (tview *[]){&src, &mask}, &sel, 1.0);
                tview dst = tv_new(dt, 3, src_shape, lay, lo, hi);
                op.code = TORC_OP_MASKED_SCATTER;
                op.n_out = 1;
                op.in[0] = sel.op;
                op.out[0] = dst.op;
                snprintf(g_case, sizeof g_case, "masked_scatter dtype %d %s", dt, LAYOUT_NAMES[lay]);
                failures += !check(&op, (tview *[]){&sel, &mask}, &dst, 1.0);
                tv_free(&dst);
                tv_free(&sel);
                tv_free(&mask);
                // TRIU / TRIL over the last two dims
                const int64_t diagonals[3] = {-2, 0, 3};
                for (int kk = 0; kk < 3; kk++) {
                    const int64_t k = diagonals[kk];
                    tview tout = tv_new(dt, 3, src_shape, lay == 1 ? L_TRANS : L_CONTIG, 0, 0);
                    op.code = dim == 0 ? TORC_OP_TRIU : TORC_OP_TRIL;
                    op.n_out = 1;
                    op.n_in = 1;
                    op.in[0] = src.op;
                    op.out[0] = tout.op;
                    op.params.tri.k = k;
                    snprintf(g_case, sizeof g_case, "tri op %d k %lld dtype %d %s", op.code, (long long)k, dt, LAYOUT_NAMES[lay]);
                    failures += !check(&op, (tview *[]){&src}, &tout, 1.0);
                    tv_free(&tout);
                }
                tv_free(&src);
            }
    }

    return failures;
}

static int cases_scaled_mm(case_check_fn check) {
    typedef struct pair { torc_dtype a, b; } pair;
    const pair pairs[] = {{TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E4M3FN}, {TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E5M2},
                          {TORC_DTYPE_F8_E5M2, TORC_DTYPE_F8_E4M3FN}, {TORC_DTYPE_F8_E5M2, TORC_DTYPE_F8_E5M2}};
    const torc_dtype outs[] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F16, TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E5M2};
    // M, K, N: cuBLASLt's size; odd; empty K (zeros); empty M and N (nothing to write, amax 0)
    const int64_t sizes[][3] = {{32, 64, 48}, {5, 7, 3}, {16, 0, 16}, {0, 32, 16}, {16, 32, 0}};
    int failures = 0;
    for (int pi = 0; pi < 4; pi++)
        for (int oi = 0; oi < 5; oi++)
            for (int sz = 0; sz < 5; sz++)
                for (int lay = 0; lay < 4; lay++)  // bit 0: b row-major (not TN); bit 1: out column-major
                    for (int extra = 0; extra < 4; extra++)  // bit 0: scale_out; bit 1: amax
                        for (int sh = 0; sh < (sz == 0 ? 3 : 1); sh++) {  // a and b at +0, +16, +32 bytes
                            const int shift = 16 * sh;
                            const int64_t M = sizes[sz][0], K = sizes[sz][1], N = sizes[sz][2];
                            const int64_t sa[2] = {M, K}, sb[2] = {K, N}, so[2] = {M, N}, one[1] = {1};
                            tview a = tv_new_at(pairs[pi].a, 2, sa, L_CONTIG, -4, 4, shift);
                            tview b = tv_new_at(pairs[pi].b, 2, sb, (lay & 1) ? L_CONTIG : L_TRANS, -4, 4, shift);
                            tview out = tv_new(outs[oi], 2, so, (lay & 2) ? L_TRANS : L_CONTIG, 0, 0);
                            tview s_a = tv_new(TORC_DTYPE_F32, 1, one, L_CONTIG, 0.75, 0.75);
                            tview s_b = tv_new(TORC_DTYPE_F32, 0, one, L_CONTIG, 2.0, 2.0);
                            tview s_o = tv_new(TORC_DTYPE_F32, 0, one, L_CONTIG, 0.5, 0.5);
                            tview amax = tv_new(TORC_DTYPE_F32, 0, one, L_CONTIG, -1, -1);
                            torc_op op;
                            memset(&op, 0, sizeof op);
                            op.code = TORC_OP_SCALED_MM;
                            op.n_out = 1;
                            op.n_in = 4;
                            op.in[0] = a.op;
                            op.in[1] = b.op;
                            op.in[2] = s_a.op;
                            op.in[3] = s_b.op;
                            op.out[0] = out.op;
                            // views: the inputs, then out[1] (amax) when asked for
                            tview *views[6] = {&a, &b, &s_a, &s_b};
                            int nv = 4;
                            if (extra & 1) op.in[op.n_in++] = s_o.op, views[nv++] = &s_o;     // scale_out
                            if (extra & 2) op.out[op.n_out++] = amax.op, views[nv++] = &amax;  // amax
                            snprintf(g_case, sizeof g_case, "scaled_mm %d x %d -> %d size %d layout %d extra %d at +%d B",
                                     pairs[pi].a, pairs[pi].b, outs[oi], sz, lay, extra, shift);
                            failures += !check(&op, views, &out, 1.0);
                            tv_free(&a);
                            tv_free(&b);
                            tv_free(&out);
                            tv_free(&s_a);
                            tv_free(&s_b);
                            tv_free(&s_o);
                            tv_free(&amax);
                        }
    return failures;
}

// fp8 outputs that overflow: |a @ b| far beyond e4m3's 448 and e5m2's 57344 saturates to the
// format's largest finite value (as cuBLASLt and the reference), with amax the unsaturated
// maximum; on cuBLASLt's shape (TN, multiples of 16) and the generic kernel's.
static int cases_fp8_saturation(case_check_fn check) {
    const torc_dtype outs[2] = {TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E5M2};
    const int64_t sizes[2][3] = {{32, 64, 48}, {5, 7, 3}};
    int failures = 0;
    for (int oi = 0; oi < 2; oi++)
        for (int sz = 0; sz < 2; sz++)
            for (int amax_on = 0; amax_on < 2; amax_on++) {
                const int64_t M = sizes[sz][0], K = sizes[sz][1], N = sizes[sz][2];
                const int64_t sa[2] = {M, K}, sb[2] = {K, N}, so[2] = {M, N}, one[1] = {1};
                // e4m3 x e5m2 (the pair that may write either fp8 output), values near their maxima
                tview a = tv_new(TORC_DTYPE_F8_E4M3FN, 2, sa, L_CONTIG, -448, 448);
                tview b = tv_new(TORC_DTYPE_F8_E5M2, 2, sb, L_TRANS, -57344, 57344);
                tview out = tv_new(outs[oi], 2, so, L_CONTIG, 0, 0);
                tview s1 = tv_new(TORC_DTYPE_F32, 1, one, L_CONTIG, 1, 1);
                tview amax = tv_new(TORC_DTYPE_F32, 1, one, L_CONTIG, -1, -1);
                torc_op op;
                memset(&op, 0, sizeof op);
                op.code = TORC_OP_SCALED_MM;
                op.n_out = 1;
                op.n_in = 4;
                op.in[0] = a.op, op.in[1] = b.op, op.in[2] = s1.op, op.in[3] = s1.op, op.out[0] = out.op;
                if (amax_on) op.out[op.n_out++] = amax.op;
                snprintf(g_case, sizeof g_case, "fp8 saturation -> %d size %d amax %d", outs[oi], sz, amax_on);
                failures += !check(&op, (tview *[]){&a, &b, &s1, &s1, &amax}, &out, 1.0);
                tv_free(&a);
                tv_free(&b);
                tv_free(&out);
                tv_free(&s1);
                tv_free(&amax);
            }
    return failures;
}

// ---- ADAM_STEP: the dtypes, flag sets, values and ops both suites check against the reference,
// bit for bit over 3 steps ----
static const torc_dtype ADAM_DTYPES[] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F16, TORC_DTYPE_F64};
typedef struct adam_cfg { uint32_t flags; double wd; } adam_cfg;
static const adam_cfg ADAM_CFGS[] = {
    {0, 0.0},
    {TORC_ADAM_MAXIMIZE | TORC_ADAM_AMSGRAD, 0.1},  // Adam's L2 term
    {TORC_ADAM_DECOUPLED | TORC_ADAM_AMSGRAD, 0.1},
    {TORC_ADAM_DECOUPLED | TORC_ADAM_MAXIMIZE, 0.01},
};

// Element i of operand k (param, exp_avg, exp_avg_sq, [max_exp_avg_sq,] grad); second moments >= 0.
static double adam_value(int k, bool ams, int64_t i) {
    const double u = torc_philox_uniform(100 + (uint64_t)k, 0, (uint64_t)i);
    return k == 2 || (ams && k == 3) ? u * u * 1e-2 : (2 * u - 1) * exp(8 * u - 4);
}

// The op of step `step` (from 1) with c's flags and n_out outputs; operands unset.
static torc_op adam_op(const adam_cfg *c, int n_out, int step) {
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_ADAM_STEP;
    op.n_in = 1;
    op.n_out = n_out;
    op.params.adam.lr = 1e-2;
    op.params.adam.beta1 = 0.9;
    op.params.adam.beta2 = 0.999;
    op.params.adam.eps = 1e-8;
    op.params.adam.weight_decay = c->wd;
    op.params.adam.flags = c->flags;
    op.params.adam.step_size = 1e-2 / (1.0 - pow(0.9, step));
    op.params.adam.bc2_sqrt = pow(1.0 - pow(0.999, step), 0.5);
    return op;
}

// ---- ADAM_STEP_LIST (backend ABI 2.6): ADAM_LIST_N parameters of sizes 0 .. ~5000 (more than two
// launches' batches), each an ADAM_STEP of its own step; both suites check the list against the
// reference running its elements ----
enum { ADAM_LIST_N = 37 };
static int64_t adam_list_numel(int t) { return t == 0 ? 0 : t == 1 ? 1 : (int64_t)t * 997 % 5003; }

// The list op over ops[0 .. n) (n >= 1), its ext parameters in *l.
static torc_op adam_list_op(torc_op_list *l, const torc_op *ops, int n) {
    l->struct_size = sizeof *l;
    l->n = n;
    l->ops = ops;
    torc_op op;
    memset(&op, 0, sizeof op);
    op.struct_size = sizeof op;
    op.code = TORC_OP_ADAM_STEP_LIST;
    op.n_in = 0;
    op.n_out = 1;
    op.out[0] = ops[0].out[0];
    op.params.ext.data = l;
    return op;
}

// ---- ATTENTION(_BACKWARD) (backend ABI 2.4): cases both suites run against the reference ----
// Operands in the order of attn_set's storages: q, k, v, o, lse, do, dq, dk, dv.
enum { ATTN_Q, ATTN_K, ATTN_V, ATTN_O, ATTN_LSE, ATTN_DO, ATTN_DQ, ATTN_DK, ATTN_DV, ATTN_N };
enum { ATTN_CONTIG, ATTN_STRIDED, ATTN_PACKED, ATTN_BCAST };
static const char *const ATTN_LAYOUTS[] = {"contiguous", "strided", "packed qkv", "k, v broadcast over heads"};

typedef struct attn_cfg {
    torc_dtype dt;
    int64_t B, H, L, S, E, Ev;
    int causal, layout;  // layout: ATTN_*; PACKED needs L == S and E == Ev
} attn_cfg;

// Small enough for the host suite's float emulation; the GPU suite adds larger ones.
static const attn_cfg ATTN_CFGS[] = {
    {TORC_DTYPE_F32, 2, 3, 37, 37, 64, 64, 0, ATTN_CONTIG},
    {TORC_DTYPE_F32, 2, 3, 37, 37, 64, 64, 1, ATTN_CONTIG},
    {TORC_DTYPE_F32, 1, 2, 50, 70, 32, 48, 0, ATTN_STRIDED},   // L != S, E != Ev, features strided
    {TORC_DTYPE_F32, 1, 2, 70, 45, 16, 8, 1, ATTN_STRIDED},    // causal with L > S
    {TORC_DTYPE_F32, 2, 2, 40, 40, 64, 64, 1, ATTN_PACKED},    // the GPT's (B, T, 3, H, hs) view
    {TORC_DTYPE_F32, 2, 3, 33, 65, 24, 40, 0, ATTN_BCAST},     // stride 0 on the head dim
    {TORC_DTYPE_BF16, 2, 2, 40, 40, 64, 64, 1, ATTN_PACKED},
    {TORC_DTYPE_BF16, 1, 2, 33, 65, 128, 128, 0, ATTN_CONTIG},
    {TORC_DTYPE_F16, 1, 2, 20, 20, 80, 80, 1, ATTN_STRIDED},
    {TORC_DTYPE_F32, 1, 1, 1, 1, 1, 1, 1, ATTN_CONTIG},
    {TORC_DTYPE_F32, 1, 2, 5, 0, 8, 8, 0, ATTN_CONTIG},        // no keys: o = 0, lse = -inf, dq = 0
    {TORC_DTYPE_F32, 1, 2, 0, 5, 8, 8, 1, ATTN_CONTIG},        // no queries: dk = dv = 0
};
#define N_ATTN_CFGS ((int)(sizeof ATTN_CFGS / sizeof ATTN_CFGS[0]))

typedef struct attn_set {
    attn_cfg c;
    tview mem[ATTN_N];        // storages (packed: mem[ATTN_Q] holds q, k and v)
    torc_operand x[ATTN_N];   // the operands
    torc_op fwd, bwd;
} attn_set;

// Operands for c, inputs drawn in [-1, 1] (q, k scaled up so the softmax is not flat), outputs zero.
static void attn_set_new(attn_set *s, const attn_cfg *c) {
    memset(s, 0, sizeof *s);
    s->c = *c;
    const int64_t B = c->B, H = c->H, L = c->L, S = c->S, E = c->E, Ev = c->Ev;
    const int64_t shp[ATTN_N][4] = {{B, H, L, E}, {B, H, S, E}, {B, H, S, Ev}, {B, H, L, Ev}, {B, H, L, 1},
                                    {B, H, L, Ev}, {B, H, L, E}, {B, H, S, E}, {B, H, S, Ev}};
    for (int i = 0; i < ATTN_N; i++) {
        const bool in = i <= ATTN_V || i == ATTN_DO;
        const double hi = i <= ATTN_K ? 2 : 1;
        const torc_dtype dt = i == ATTN_LSE ? TORC_DTYPE_F32 : c->dt;
        if (c->layout == ATTN_PACKED && i <= ATTN_V) {
            if (i == ATTN_Q) {  // (B, T, 3, H, hs) contiguous; q, k, v = [:, :, i].transpose(1, 2)
                const int64_t pk[5] = {B, L, 3, H, E};
                s->mem[ATTN_Q] = tv_new(dt, 5, pk, L_CONTIG, -hi, hi);
            }
            torc_operand *o = &s->x[i];
            o->dtype = dt;
            o->ndim = 4;
            o->data = s->mem[ATTN_Q].mem + (size_t)(i * H * E) * (size_t)esize(dt);
            const int64_t st[4] = {L * 3 * H * E, E, 3 * H * E, 1};
            for (int d = 0; d < 4; d++) o->shape[d] = shp[i][d], o->stride[d] = st[d];
            continue;
        }
        const int lay = c->layout == ATTN_STRIDED && i != ATTN_LSE ? (i % 2 ? L_TRANS : L_STEP) : L_CONTIG;
        s->mem[i] = tv_new(dt, i == ATTN_LSE ? 3 : 4, shp[i], lay, in ? -hi : 0, in ? hi : 0);
        s->x[i] = s->mem[i].op;
        if (c->layout == ATTN_BCAST && (i == ATTN_K || i == ATTN_V)) s->x[i].stride[1] = 0;  // every head reads head 0
    }
    torc_op *f = &s->fwd, *b = &s->bwd;
    f->struct_size = b->struct_size = sizeof *f;
    f->code = TORC_OP_ATTENTION;
    b->code = TORC_OP_ATTENTION_BACKWARD;
    f->params.attention.scale = b->params.attention.scale = 1.0 / sqrt((double)(E ? E : 1));
    f->params.attention.causal = b->params.attention.causal = c->causal;
    f->n_in = 3, f->n_out = 2;
    f->in[0] = s->x[ATTN_Q], f->in[1] = s->x[ATTN_K], f->in[2] = s->x[ATTN_V];
    f->out[0] = s->x[ATTN_O], f->out[1] = s->x[ATTN_LSE];
    b->n_in = 6, b->n_out = 3;
    b->in[0] = s->x[ATTN_DO], b->in[1] = s->x[ATTN_Q], b->in[2] = s->x[ATTN_K], b->in[3] = s->x[ATTN_V];
    b->in[4] = s->x[ATTN_O], b->in[5] = s->x[ATTN_LSE];
    b->out[0] = s->x[ATTN_DQ], b->out[1] = s->x[ATTN_DK], b->out[2] = s->x[ATTN_DV];
}

static void attn_set_free(attn_set *s) {
    for (int i = 0; i < ATTN_N; i++) tv_free(&s->mem[i]);
}

// got against want (storages of one operand): within tol of want's largest magnitude (at least 1),
// infinities and NaNs equal.
static bool attn_close(const tview *got, const tview *want, double tol, const char *what) {
    double mag = 1;
    for (int64_t i = 0; i < want->n; i++) {
        const double w = fabs(tcu_load_f64(want->mem, i, want->dt));
        if (isfinite(w) && w > mag) mag = w;
    }
    for (int64_t i = 0; i < got->n; i++) {
        const double g = tcu_load_f64(got->mem, i, got->dt), w = tcu_load_f64(want->mem, i, want->dt);
        if (isnan(g) && isnan(w)) continue;
        if (isinf(g) || isinf(w) ? g == w : fabs(g - w) <= tol * mag) continue;
        fprintf(stderr, "%s: %s storage[%lld] = %.9g, reference %.9g\n", g_case, what, (long long)i, g, w);
        return false;
    }
    return true;
}

// A copy of t's storage with every element zero.
static tview tv_zeros_like(const tview *t) {
    tview z = tv_clone(t);
    memset(z.mem, 0, (size_t)z.n * (size_t)esize(z.dt));
    return z;
}

// The tolerance, relative to the largest output, of a float32-accumulating kernel against the
// reference's double loops: the output's own rounding plus float sums over E and S terms.
static double attn_tol(torc_dtype dt) {
    return dt == TORC_DTYPE_F32 ? 2e-5 : dt == TORC_DTYPE_F16 ? 4e-3 : 2e-2;
}

#endif
