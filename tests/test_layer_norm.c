// tests/test_layer_norm.c — torc_layer_norm / torc_native_layer_norm against PyTorch's goldens
// (tests/golden/layer_norm.txt, tools/golden/gen_layer_norm_golden.py): y, mean, rstd and the
// backward's dx, dweight, dbias, on the reference and (where built) the onednn backend, with
// contiguous and strided x; PyTorch's error texts; autograd against finite differences in f64.
#define _POSIX_C_SOURCE 200809L  // setenv
#include "testutil.h"

#define LN_MAX_VALS 4096

// ---- the golden file ----
typedef struct ln_vals {
    int64_t n;
    double *v;
} ln_vals;

enum { T_X, T_W, T_B, T_DY, T_Y, T_MEAN, T_RSTD, T_DX, T_DW, T_DB, T_COUNT };
static const char *const g_tags[T_COUNT] = {"x", "w", "b", "dy", "y", "mean", "rstd", "dx", "dw", "db"};

typedef struct ln_case {
    char name[64];
    torc_dtype xdt, pdt;
    int ndim, nnorm;
    int64_t shape[TORC_MAX_DIMS];
    unsigned affine;
    double eps;
    ln_vals t[T_COUNT];
    bool has[T_COUNT];
} ln_case;

static ln_case *g_cases;
static int g_ncases;

static void load_cases(void) {
    if (g_cases) return;
    FILE *f = tu_open_golden("layer_norm.txt", "r");
    static char line[1 << 17];
    ln_case *c = NULL;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '#' || !line[0]) continue;
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        if (!strcmp(tok, "case")) {
            g_cases = realloc(g_cases, sizeof *g_cases * (size_t)(g_ncases + 1));
            c = &g_cases[g_ncases++];
            memset(c, 0, sizeof *c);
            char xd[16], pd[16], sh[128];
            double eps;
            ck_assert(sscanf(save, "%63s %15s %15s %127s %d %u %lf", c->name, xd, pd, sh, &c->nnorm, &c->affine, &eps) == 7);
            c->eps = eps;
            ck_assert(torc_dtype_from_name(xd, &c->xdt) == TORC_OK && torc_dtype_from_name(pd, &c->pdt) == TORC_OK);
            for (char *p = sh; strcmp(sh, "-") && *p;) {
                c->shape[c->ndim++] = strtoll(p, &p, 10);
                if (*p == ',') p++;
            }
            continue;
        }
        if (!strcmp(tok, "end")) continue;
        int k = 0;
        while (k < T_COUNT && strcmp(g_tags[k], tok)) k++;
        ck_assert_msg(k < T_COUNT && c, "bad golden line tag '%s'", tok);
        ln_vals *v = &c->t[k];
        v->v = malloc(sizeof(double) * LN_MAX_VALS);
        while ((tok = strtok_r(NULL, " ", &save))) {
            ck_assert(v->n < LN_MAX_VALS);
            v->v[v->n++] = strtod(tok, NULL);
        }
        c->has[k] = true;
    }
    fclose(f);
    ck_assert_int_gt(g_ncases, 10);
}

// A tensor of dtype dt on dev holding vals (exact in dt).
static torc_tensor *make(const ln_vals *vals, int ndim, const int64_t *shape, torc_dtype dt, torc_device *dev) {
    static const double dummy = 0;
    torc_tensor *t = torc_tensor_from(vals->n ? vals->v : &dummy, ndim, shape, TORC_DTYPE_F64);
    t = t ? torc_to_dtype(t, dt) : NULL;
    t = t ? torc_to_device(t, dev) : NULL;
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

// Tolerance relative to the largest expected magnitude: the golden is torc's contract (double,
// each output rounded once), so about one unit in the last place of the dtype, for a different
// summation order (onednn) or a rounding that lands on the other side.
static double tol_of(torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_F64: return 1e-12;
    case TORC_DTYPE_F32: return 1e-6;
    case TORC_DTYPE_F16: return 2e-3;
    default: return 1e-2;  // bf16: 8 bits of mantissa
    }
}

static void check_vals(const ln_case *c, const char *what, torc_tensor *got, const ln_vals *want, torc_dtype dt,
                       const char *dev) {
    ck_assert_msg(got != NULL, "%s/%s on %s: NULL (%s)", c->name, what, dev, torc_last_error());
    ck_assert_msg(torc_get_dtype(got) == dt, "%s/%s on %s: dtype %s, expected %s", c->name, what, dev,
                  torc_dtype_name(torc_get_dtype(got)), torc_dtype_name(dt));
    ck_assert_msg(torc_numel(got) == want->n, "%s/%s on %s: numel %lld, expected %lld", c->name, what, dev,
                  (long long)torc_numel(got), (long long)want->n);
    double *v = tu_values(got), scale = 1;
    for (int64_t i = 0; i < want->n; i++)
        if (isfinite(want->v[i]) && fabs(want->v[i]) > scale) scale = fabs(want->v[i]);
    for (int64_t i = 0; i < want->n; i++) {
        const bool ok = (isnan(want->v[i]) && isnan(v[i])) || fabs(v[i] - want->v[i]) <= tol_of(dt) * scale;
        ck_assert_msg(ok, "%s/%s on %s: element %lld is %.10g, expected %.10g", c->name, what, dev, (long long)i, v[i],
                      want->v[i]);
    }
    free(v);
}

// One golden case on dev: forward values, dtypes and shapes, then the gradients of sum(y * dy).
// strided: x reaches the op as a transposed view (a copy with the first and last dims swapped).
static void run_case(const ln_case *c, torc_device *dev, bool strided) {
    const char *dn = torc_device_backend_name(dev);
    const int64_t *ns = c->shape + c->ndim - c->nnorm;
    torc_scope_push();
    torc_tensor *x = make(&c->t[T_X], c->ndim, c->shape, c->xdt, dev);
    torc_tensor *w = c->affine & 1 ? make(&c->t[T_W], c->nnorm, ns, c->pdt, dev) : NULL;
    torc_tensor *b = c->affine & 2 ? make(&c->t[T_B], c->nnorm, ns, c->pdt, dev) : NULL;
    torc_tensor *dy = make(&c->t[T_DY], c->ndim, c->shape, c->xdt, dev);
    torc_tensor *leaves[3] = {x, w, b};
    for (int i = 0; i < 3; i++)
        if (leaves[i]) ck_assert_int_eq(torc_set_requires_grad(leaves[i], true), TORC_OK);
    torc_tensor *xin = x;
    if (strided) {
        xin = torc_transpose(torc_contiguous(torc_transpose(x, 0, -1)), 0, -1);
        ck_assert_msg(xin != NULL, "%s", torc_last_error());
        ck_assert(!torc_is_contiguous(xin) || c->shape[0] < 2 || c->shape[c->ndim - 1] < 2);
    }
    torc_tensor *y, *mean, *rstd;
    ck_assert_msg(torc_native_layer_norm(xin, c->nnorm, ns, w, b, c->eps, &y, &mean, &rstd) == TORC_OK, "%s on %s: %s",
                  c->name, dn, torc_last_error());
    const torc_dtype sdt = c->pdt == TORC_DTYPE_F32 && c->xdt != TORC_DTYPE_F32 ? TORC_DTYPE_F32 : c->xdt;
    check_vals(c, "y", y, &c->t[T_Y], c->xdt, dn);
    check_vals(c, "mean", mean, &c->t[T_MEAN], sdt, dn);
    check_vals(c, "rstd", rstd, &c->t[T_RSTD], sdt, dn);
    tu_assert_dims_at(__FILE__, __LINE__, c->name, torc_ndim(y), torc_shape(y), c->ndim, c->shape);
    int64_t sshape[TORC_MAX_DIMS];
    for (int d = 0; d < c->ndim; d++) sshape[d] = d < c->ndim - c->nnorm ? c->shape[d] : 1;
    tu_assert_dims_at(__FILE__, __LINE__, c->name, torc_ndim(mean), torc_shape(mean), c->ndim, sshape);
    tu_assert_dims_at(__FILE__, __LINE__, c->name, torc_ndim(rstd), torc_shape(rstd), c->ndim, sshape);
    ck_assert_ptr_eq(torc_get_device(y), dev);
    ck_assert_str_eq(torc_grad_fn_name(y), "NativeLayerNormBackward0");
    ck_assert(!torc_requires_grad(mean) && !torc_requires_grad(rstd));
    // Backward: weighted by dy, as the golden's autograd.grad of (y * dy).sum().
    ck_assert_msg(torc_backward(y, dy, false) == TORC_OK, "%s on %s: %s", c->name, dn, torc_last_error());
    const int tags[3] = {T_DX, T_DW, T_DB};
    static const char *const names[3] = {"dx", "dw", "db"};
    for (int i = 0; i < 3; i++) {
        if (!leaves[i]) continue;
        torc_tensor *g = torc_grad(leaves[i]);
        if (!g && c->t[tags[i]].n == 0) continue;  // an empty leaf may get no gradient
        check_vals(c, names[i], g, &c->t[tags[i]], i ? c->pdt : c->xdt, dn);
    }
    torc_scope_pop();
}

static torc_device *g_devs[2];
static int g_ndevs;

static void find_devices(void) {
    if (g_ndevs) return;
    g_devs[g_ndevs++] = torc_device_get("reference");
    ck_assert_msg(g_devs[0] != NULL, "%s", torc_last_error());
    torc_device *o = torc_device_get("onednn");  // built only with TORC_WITH_ONEDNN
    if (o) g_devs[g_ndevs++] = o;
}

START_TEST(layer_norm_matches_pytorch) {
    load_cases();
    find_devices();
    for (int d = 0; d < g_ndevs; d++)
        for (int i = 0; i < g_ncases; i++) {
            run_case(&g_cases[i], g_devs[d], false);
            if (g_cases[i].ndim >= 2) run_case(&g_cases[i], g_devs[d], true);
        }
}
END_TEST

// ---- errors: PyTorch's texts, nothing changed ----
START_TEST(layer_norm_errors_are_pytorchs) {
    torc_scope_push();
    torc_tensor *x = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32), *y = NULL, *m = NULL, *r = NULL;
    ck_assert_ptr_null(torc_layer_norm(x, 1, (int64_t[]){4}, NULL, NULL, 1e-5));
    tu_assert_error(TORC_ERR_SHAPE, "Given normalized_shape=[4], expected input with shape [*, 4], but got input of "
                                    "size[2, 3]");
    ck_assert_ptr_null(torc_layer_norm(x, 3, (int64_t[]){2, 3, 4}, NULL, NULL, 1e-5));
    tu_assert_error(TORC_ERR_SHAPE, "Given normalized_shape=[2, 3, 4], expected input with shape [*, 2, 3, 4], but got "
                                    "input of size[2, 3]");
    ck_assert_ptr_null(torc_layer_norm(x, 0, NULL, NULL, NULL, 1e-5));
    tu_assert_error(TORC_ERR_SHAPE, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
                                    "one element, but got normalized_shape = []");
    ck_assert_ptr_null(torc_layer_norm(x, 1, (int64_t[]){3}, torc_ones(TORC_SHAPE(4), TORC_DTYPE_F32), NULL, 1e-5));
    tu_assert_error(TORC_ERR_SHAPE, "Expected weight to be of same shape as normalized_shape, but got weight of shape "
                                    "[4] and normalized_shape = [3]");
    ck_assert_ptr_null(torc_layer_norm(x, 1, (int64_t[]){3}, NULL, torc_ones(TORC_SHAPE(3, 1), TORC_DTYPE_F32), 1e-5));
    tu_assert_error(TORC_ERR_SHAPE, "Expected bias to be of same shape as normalized_shape, but got bias of shape "
                                    "[3, 1] and normalized_shape = [3]");
    ck_assert_ptr_null(torc_layer_norm(x, 1, (int64_t[]){3}, torc_ones(TORC_SHAPE(3), TORC_DTYPE_F64), NULL, 1e-5));
    tu_assert_error(TORC_ERR_DTYPE, "mixed dtype (CPU): expect parameter to have scalar type of Float");
    ck_assert_ptr_null(torc_layer_norm(torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F64), 1, (int64_t[]){3},
                                       torc_ones(TORC_SHAPE(3), TORC_DTYPE_F32), NULL, 1e-5));
    tu_assert_error(TORC_ERR_DTYPE, "mixed dtype (CPU): all inputs must share same datatype.");
    ck_assert_ptr_null(torc_layer_norm(torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_BF16), 1, (int64_t[]){3},
                                       torc_ones(TORC_SHAPE(3), TORC_DTYPE_BF16), torc_ones(TORC_SHAPE(3), TORC_DTYPE_F32),
                                       1e-5));
    tu_assert_error(TORC_ERR_DTYPE, "expected scalar type BFloat16 but found Float");
    ck_assert_ptr_null(torc_layer_norm(torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_I64), 1, (int64_t[]){3}, NULL, NULL, 1e-5));
    tu_assert_error(TORC_ERR_DTYPE, "\"LayerNormKernelImpl\" not implemented for 'Long'");
    torc_tensor *f8 = torc_to_dtype(x, TORC_DTYPE_F8_E4M3FN);
    ck_assert_ptr_null(torc_layer_norm(f8, 1, (int64_t[]){3}, NULL, NULL, 1e-5));
    tu_assert_error(TORC_ERR_DTYPE, "\"LayerNormKernelImpl\" not implemented for 'Float8_e4m3fn'");
    torc_clear_error();
    ck_assert_ptr_null(torc_layer_norm(NULL, 1, (int64_t[]){3}, NULL, NULL, 1e-5));
    tu_assert_error(TORC_ERR_INVALID_ARG, "x is NULL");
    // A failed call leaves the outputs alone.
    ck_assert_int_eq(torc_native_layer_norm(x, 1, (int64_t[]){4}, NULL, NULL, 1e-5, &y, &m, &r), TORC_ERR_SHAPE);
    ck_assert(y == NULL && m == NULL && r == NULL);
    torc_scope_pop();
}
END_TEST

// ---- the backend contract, one op at a time (torc_run_op) ----
// x (rows, n) of dtype dt on dev (a view with row stride ld), y alike, f32 mean and rstd.
static torc_op_call ln_call(torc_device *dev, torc_dtype dt, int64_t rows, int64_t n, int64_t ld) {
    torc_tensor *xs = torc_to_device(torc_zeros(TORC_SHAPE(rows * ld), dt), dev);
    torc_tensor *ys = torc_to_device(torc_zeros(TORC_SHAPE(rows, n), dt), dev);
    torc_tensor *m = torc_to_device(torc_zeros(TORC_SHAPE(rows, 1), TORC_DTYPE_F32), dev);
    torc_tensor *r = torc_to_device(torc_zeros(TORC_SHAPE(rows, 1), TORC_DTYPE_F32), dev);
    ck_assert_msg(xs && ys && m && r, "%s", torc_last_error());
    torc_tensor *x = torc_as_strided(xs, 2, (int64_t[]){rows, n}, (int64_t[]){ld, 1}, 0);
    ck_assert_msg(x != NULL, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_LAYER_NORM, .n_in = 1, .n_out = 3, .in = {x}, .out = {ys, m, r}};
    call.params.norm.axis = 1;
    call.params.norm.eps = 1e-5;
    return call;
}

START_TEST(reference_refuses_fp8_and_bad_counts) {
    torc_device *dev = torc_device_get("reference");
    torc_scope_push();
    torc_op_call call = ln_call(dev, TORC_DTYPE_F8_E4M3FN, 2, 3, 3);
    ck_assert_int_eq(torc_op_supported(dev, &call), TORC_ERR_NOT_SUPPORTED);
    tu_assert_error(TORC_ERR_NOT_SUPPORTED, "\"LayerNormKernelImpl\" not implemented for 'Float8_e4m3fn'");
    call.params.norm.affine = 1;  // a weight announced, none passed
    ck_assert_int_eq(torc_run_op(dev, &call, 0), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "op 'layer_norm' takes 2 input(s) and 3 output(s) here, got 1 and 3");
    torc_scope_pop();
}
END_TEST

// onednn's outputs against the reference's: the same double formulas rounded once, their sums
// in another order (lanes, row blocks), so within one rounding of the dtype (ulp: its epsilon)
// relative to the value, plus a double rounding's worth of the largest (cancellation in dx);
// NaN exactly where the reference has NaN, infinities equal.
static void assert_near_reference(const char *what, int k, const double *got, const double *want, int64_t n,
                                  double ulp) {
    double scale = 1;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(want[i]) && fabs(want[i]) > scale) scale = fabs(want[i]);
    for (int64_t i = 0; i < n; i++) {
        const bool ok = isnan(want[i])   ? isnan(got[i])
                        : isinf(want[i]) ? got[i] == want[i]
                                         : fabs(got[i] - want[i]) <= ulp * fabs(want[i]) + 0x1p-40 * scale;
        ck_assert_msg(ok, "%s: output %d [%lld]: onednn %.9g, reference %.9g", what, k, (long long)i, got[i], want[i]);
    }
}

START_TEST(onednn_layer_norm_is_the_references) {
    torc_device *dev = torc_device_get("onednn"), *ref = torc_device_get("reference");
    if (!dev) return;  // built without TORC_WITH_ONEDNN
    torc_scope_push();
    torc_op_call call = ln_call(dev, TORC_DTYPE_F32, 2, 3, 3);
    ck_assert_msg(torc_op_supported(dev, &call) == TORC_OK, "%s", torc_last_error());
    call = ln_call(dev, TORC_DTYPE_F32, 2, 3, 4);  // rows apart: not contiguous
    ck_assert_int_eq(torc_op_supported(dev, &call), TORC_ERR_NOT_SUPPORTED);
    torc_scope_pop();
    torc_clear_error();
    // Large enough for the parallel loops (rows x 1100 > 64K elements), with weight and bias,
    // forward and backward, in f32, bf16 and f16 with f32 parameters: the reference's values.
    const torc_dtype cfg[3][2] = {{TORC_DTYPE_F32, TORC_DTYPE_F32}, {TORC_DTYPE_BF16, TORC_DTYPE_BF16},
                                  {TORC_DTYPE_F16, TORC_DTYPE_F32}};
    for (int c = 0; c < 3; c++) {
        torc_scope_push();
        const int64_t R = 70, N = 1100;
        torc_tensor *vals[4];
        for (int k = 0; k < 4; k++) {
            const bool param = k == 1 || k == 2;
            vals[k] = torc_randn(param ? 1 : 2, param ? (int64_t[]){N} : (int64_t[]){R, N}, TORC_DTYPE_F32, NULL);
            ck_assert_ptr_nonnull(vals[k]);
            if (k == 0) ck_assert_int_eq(torc_add_scalar_(vals[0], torc_s(3.0)), TORC_OK);
            vals[k] = torc_to_dtype(vals[k], cfg[c][param]);
        }
        double *res[2][6];
        torc_device *devs[2] = {ref, dev};
        for (int d = 0; d < 2; d++) {
            torc_tensor *in[4];
            for (int k = 0; k < 4; k++) {
                in[k] = torc_to_device(torc_clone(vals[k]), devs[d]);
                if (k < 3) ck_assert_int_eq(torc_set_requires_grad(in[k], true), TORC_OK);
            }
            torc_tensor *yy, *mm, *rr;
            ck_assert_int_eq(torc_native_layer_norm(in[0], 1, &N, in[1], in[2], 1e-5, &yy, &mm, &rr), TORC_OK);
            ck_assert_int_eq(torc_backward(yy, in[3], false), TORC_OK);
            torc_tensor *outs[6] = {yy, mm, rr, torc_grad(in[0]), torc_grad(in[1]), torc_grad(in[2])};
            for (int k = 0; k < 6; k++) res[d][k] = tu_values(outs[k]);
        }
        const int64_t counts[6] = {R * N, R, R, R * N, N, N};
        const double ulp[3] = {0x1p-23, 0x1p-7, 0x1p-10};
        for (int k = 0; k < 6; k++) {
            const bool param = k == 1 || k == 2 || k == 4 || k == 5;  // mean, rstd, dw, db: f32 for f16 x
            assert_near_reference(torc_dtype_name(cfg[c][0]), k, res[1][k], res[0][k], counts[k],
                                  param && cfg[c][1] == TORC_DTYPE_F32 ? ulp[0] : ulp[c]);
            free(res[0][k]);
            free(res[1][k]);
        }
        torc_scope_pop();
    }
}
END_TEST

// The f32 rows of onednn's AVX-512 / AVX2 loops (plain C under an ISA cap) against the reference,
// forward and backward: the GPT's shapes (rows of 384, 256, 768), odd row lengths (the vector
// tails), long rows (few row blocks), with and without weight and bias, and rows holding NaN, an
// infinity, one value (variance 0), a large mean, tiny values.
typedef struct ln_shape {
    int ndim;
    int64_t shape[3];
    unsigned affine;
    bool special;  // rows 0..6 hold the special values, and one dy a NaN
} ln_shape;

static const ln_shape g_f32_shapes[] = {
    {3, {4, 256, 384}, 3, false}, {3, {4, 256, 256}, 3, false}, {3, {2, 128, 768}, 3, false},
    {2, {300, 1}, 3, false},      {2, {300, 5}, 3, false},      {2, {300, 17}, 3, false},
    {2, {300, 100}, 3, false},    {2, {70000, 1}, 3, false},    {2, {7000, 17}, 3, false},
    {2, {3, 300001}, 3, false},   {2, {2, 65543}, 0, false},    {2, {1024, 100}, 0, false},
    {2, {1024, 100}, 1, false},   {2, {1024, 100}, 2, false},   {2, {64, 37}, 3, true},
    {2, {64, 384}, 3, true},      {2, {64, 384}, 0, true},      {2, {9, 5}, 3, true},
};

// Host values for one case: x (with the special rows), weight, bias, dy.
static torc_tensor *f32_values(int ndim, const int64_t *shape, int which, bool special) {
    torc_tensor *t = torc_randn(ndim, shape, TORC_DTYPE_F32, NULL);
    ck_assert_ptr_nonnull(t);
    if (!special || (which != 0 && which != 3)) return t;
    const int64_t N = shape[ndim - 1];
    double *v = tu_values(t);
    if (which == 3) {
        v[N * 6 + N / 2] = NAN;  // a NaN gradient: row 6's dx, dweight and dbias at its column
    } else {
        v[N / 2] = NAN;                           // row 0: a NaN
        v[N + N / 3] = INFINITY;                  // row 1: an infinity
        v[2 * N] = INFINITY;                      // row 2: both infinities
        v[2 * N + N - 1] = -INFINITY;
        for (int64_t i = 0; i < N; i++) {
            v[3 * N + i] = 2.5;                   // row 3: one value, variance 0
            v[4 * N + i] = 1e4 + v[4 * N + i];    // row 4: a large mean
            v[5 * N + i] = 1e-20 * v[5 * N + i];  // row 5: tiny values (the variance below eps)
        }
    }
    torc_tensor *r = torc_to_dtype(torc_tensor_from(v, ndim, shape, TORC_DTYPE_F64), TORC_DTYPE_F32);
    free(v);
    ck_assert_ptr_nonnull(r);
    return r;
}

START_TEST(onednn_f32_rows_match_the_reference) {
    torc_device *dev = torc_device_get("onednn"), *ref = torc_device_get("reference");
    if (!dev) return;  // built without TORC_WITH_ONEDNN
    for (size_t c = 0; c < sizeof g_f32_shapes / sizeof g_f32_shapes[0]; c++) {
        const ln_shape *sh = &g_f32_shapes[c];
        const int64_t N = sh->shape[sh->ndim - 1];
        int64_t numel = 1;
        for (int d = 0; d < sh->ndim; d++) numel *= sh->shape[d];
        char what[96];
        snprintf(what, sizeof what, "f32 %lld rows of %lld, affine %u%s", (long long)(numel / N), (long long)N,
                 sh->affine, sh->special ? ", special rows" : "");
        torc_scope_push();
        torc_tensor *vals[4];
        for (int k = 0; k < 4; k++)
            vals[k] = k == 1 || k == 2 ? f32_values(1, &N, k, false) : f32_values(sh->ndim, sh->shape, k, sh->special);
        double *res[2][6];
        int64_t counts[6];
        torc_device *devs[2] = {ref, dev};
        for (int d = 0; d < 2; d++) {
            torc_tensor *in[4];
            for (int k = 0; k < 4; k++) {
                const bool absent = (k == 1 && !(sh->affine & 1)) || (k == 2 && !(sh->affine & 2));
                in[k] = absent ? NULL : torc_to_device(torc_clone(vals[k]), devs[d]);
                if (k < 3 && in[k]) ck_assert_int_eq(torc_set_requires_grad(in[k], true), TORC_OK);
            }
            torc_tensor *yy, *mm, *rr;
            ck_assert_msg(torc_native_layer_norm(in[0], 1, &N, in[1], in[2], 1e-5, &yy, &mm, &rr) == TORC_OK, "%s: %s",
                          what, torc_last_error());
            ck_assert_msg(torc_backward(yy, in[3], false) == TORC_OK, "%s: %s", what, torc_last_error());
            torc_tensor *outs[6] = {yy, mm, rr, torc_grad(in[0]), in[1] ? torc_grad(in[1]) : NULL,
                                    in[2] ? torc_grad(in[2]) : NULL};
            for (int k = 0; k < 6; k++) {
                res[d][k] = outs[k] ? tu_values(outs[k]) : NULL;
                counts[k] = outs[k] ? torc_numel(outs[k]) : 0;
            }
        }
        for (int k = 0; k < 6; k++) {
            if (res[0][k]) assert_near_reference(what, k, res[1][k], res[0][k], counts[k], 0x1p-23);
            free(res[0][k]);
            free(res[1][k]);
        }
        torc_scope_pop();
    }
}
END_TEST

// ---- autograd ----
// d/dv sum(layer_norm(x, w, b) * v) against central differences, in f64, for x, weight and bias.
static double loss_of(const double *xh, const double *wh, const double *bh, const double *vh, int64_t rows,
                      int64_t n) {
    torc_scope_push();
    torc_tensor *x = torc_tensor_from(xh, 2, (int64_t[]){rows, n}, TORC_DTYPE_F64);
    torc_tensor *w = torc_tensor_from(wh, 1, &n, TORC_DTYPE_F64), *b = torc_tensor_from(bh, 1, &n, TORC_DTYPE_F64);
    double *y = tu_values(torc_layer_norm(x, 1, &n, w, b, 1e-5)), s = 0;
    for (int64_t i = 0; i < rows * n; i++) s += y[i] * vh[i];
    free(y);
    torc_scope_pop();
    return s;
}

START_TEST(layer_norm_gradients_match_finite_differences) {
    enum { R = 3, N = 5 };
    double xh[R * N], wh[N], bh[N], vh[R * N];
    uint64_t s = 12345;
    for (int i = 0; i < R * N; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        xh[i] = (double)(s >> 11) / 9007199254740992.0 * 4 - 2;
        vh[i] = sin(i * 0.7);
    }
    for (int i = 0; i < N; i++) wh[i] = 1 + 0.1 * i, bh[i] = 0.05 * i;
    torc_scope_push();
    torc_tensor *x = torc_tensor_from(xh, 2, (int64_t[]){R, N}, TORC_DTYPE_F64);
    torc_tensor *w = torc_tensor_from(wh, 1, (int64_t[]){N}, TORC_DTYPE_F64);
    torc_tensor *b = torc_tensor_from(bh, 1, (int64_t[]){N}, TORC_DTYPE_F64);
    torc_tensor *v = torc_tensor_from(vh, 2, (int64_t[]){R, N}, TORC_DTYPE_F64);
    torc_tensor *leaves[3] = {x, w, b}, *grads[3];
    for (int i = 0; i < 3; i++) ck_assert_int_eq(torc_set_requires_grad(leaves[i], true), TORC_OK);
    torc_tensor *y = torc_layer_norm(x, 1, (int64_t[]){N}, w, b, 1e-5);
    ck_assert_msg(y != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_autograd_grad(1, &y, &v, 3, leaves, false, false, grads), TORC_OK);
    double *hs[3] = {xh, wh, bh};
    const int64_t counts[3] = {R * N, N, N};
    const double eps = 1e-6;
    for (int i = 0; i < 3; i++) {
        double *a = tu_values(grads[i]);
        for (int64_t k = 0; k < counts[i]; k++) {
            const double h0 = hs[i][k];
            hs[i][k] = h0 + eps;
            const double lp = loss_of(xh, wh, bh, vh, R, N);
            hs[i][k] = h0 - eps;
            const double lm = loss_of(xh, wh, bh, vh, R, N);
            hs[i][k] = h0;
            const double num = (lp - lm) / (2 * eps);
            ck_assert_msg(fabs(num - a[k]) <= 1e-6 + 1e-5 * fabs(num), "input %d [%lld]: analytic %.10g, numeric %.10g",
                          i, (long long)k, a[k], num);
        }
        free(a);
    }
    torc_scope_pop();
}
END_TEST

// Only the inputs that require grad get one; a weight alone trains (x a constant).
START_TEST(layer_norm_grad_of_weight_only) {
    torc_scope_push();
    torc_tensor *x = torc_arange(0, 6, 1, TORC_DTYPE_F32);
    x = torc_reshape(x, 2, (int64_t[]){2, 3});
    torc_tensor *w = torc_ones(TORC_SHAPE(3), TORC_DTYPE_F32), *b = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_requires_grad(w, true), TORC_OK);
    torc_tensor *y = torc_layer_norm(x, 1, (int64_t[]){3}, w, b, 0.0);
    ck_assert_int_eq(torc_backward(torc_sum(torc_mul(y, y), TORC_ALL_DIMS, false), NULL, false), TORC_OK);
    // d/dw sum((xhat*w)^2) = 2 * w * sum over rows of xhat^2; xhat = [-1.2247, 0, 1.2247] per row.
    tu_assert_values(torc_grad(w), TU_ARR(6.0, 0.0, 6.0), 1e-5);
    ck_assert_ptr_null(torc_grad(x));
    ck_assert_ptr_null(torc_grad(b));
    torc_scope_pop();
}
END_TEST

// mean and rstd are saved for backward: writing one in place is PyTorch's version error.
// Under autocast layer_norm runs in f32 (torc follows PyTorch's CUDA autocast lists): a bf16 x
// gives f32 y, mean and rstd, the values of the f32 op on x's values; gradients reach x as bf16.
START_TEST(layer_norm_runs_in_f32_under_autocast) {
    torc_scope_push();
    torc_tensor *x = torc_to_dtype(torc_reshape(torc_arange(0, 12, 1, TORC_DTYPE_F32), TORC_SHAPE(3, 4)), TORC_DTYPE_BF16);
    torc_tensor *w = torc_full(TORC_SHAPE(4), 2, TORC_DTYPE_BF16);
    ck_assert_msg(x && w, "%s", torc_last_error());
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    torc_tensor *want = torc_layer_norm(torc_to_dtype(x, TORC_DTYPE_F32), 1, (int64_t[]){4}, torc_to_dtype(w, TORC_DTYPE_F32), NULL, 1e-5);
    ck_assert_int_eq(torc_autocast_begin(TORC_DTYPE_BF16), TORC_OK);
    torc_tensor *y, *m, *r;
    ck_assert_int_eq(torc_native_layer_norm(x, 1, (int64_t[]){4}, w, NULL, 1e-5, &y, &m, &r), TORC_OK);
    ck_assert_int_eq(torc_autocast_end(), TORC_OK);
    ck_assert_int_eq(torc_get_dtype(y), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_get_dtype(m), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_get_dtype(r), TORC_DTYPE_F32);
    double *a = tu_values(y), *b = tu_values(want);
    for (int i = 0; i < 12; i++) ck_assert_double_eq(a[i], b[i]);
    free(a), free(b);
    tu_assert_values(m, TU_ARR(1.5, 5.5, 9.5), 0);
    ck_assert_int_eq(torc_backward(torc_sum(y, 0, NULL, false), NULL, false), TORC_OK);
    ck_assert_int_eq(torc_get_dtype(torc_grad(x)), TORC_DTYPE_BF16);
    torc_scope_pop();
}
END_TEST

START_TEST(layer_norm_saved_stats_modified_in_place) {
    torc_scope_push();
    torc_tensor *x = torc_randn(TORC_SHAPE(2, 4), TORC_DTYPE_F32, NULL);
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    torc_tensor *y, *m, *r;
    ck_assert_int_eq(torc_native_layer_norm(x, 1, (int64_t[]){4}, NULL, NULL, 1e-5, &y, &m, &r), TORC_OK);
    ck_assert_int_eq(torc_add_scalar_(r, torc_s(1.0)), TORC_OK);
    ck_assert_int_ne(torc_backward(torc_sum(y, TORC_ALL_DIMS, false), NULL, false), TORC_OK);
    tu_assert_error(TORC_ERR_AUTOGRAD, "modified by an inplace operation: [torch.FloatTensor [2, 1]] is at version 1; "
                                       "expected version 0 instead.");
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("layer_norm");
    TCase *tc = tcase_create("layer_norm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, layer_norm_matches_pytorch);
    tcase_add_test(tc, layer_norm_errors_are_pytorchs);
    tcase_add_test(tc, reference_refuses_fp8_and_bad_counts);
    tcase_add_test(tc, onednn_layer_norm_is_the_references);
    tcase_add_test(tc, onednn_f32_rows_match_the_reference);
    tcase_add_test(tc, layer_norm_gradients_match_finite_differences);
    tcase_add_test(tc, layer_norm_grad_of_weight_only);
    tcase_add_test(tc, layer_norm_saved_stats_modified_in_place);
    tcase_add_test(tc, layer_norm_runs_in_f32_under_autocast);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    // oneDNN leaves ops under TORC_ONEDNN_MIN_WORK elements to the reference: run its own loops.
    setenv("TORC_ONEDNN_MIN_WORK", "0", 0);
    return tu_run(make_suite());
}
