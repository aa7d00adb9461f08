// tests/test_attention.c — torc_scaled_dot_product_attention against PyTorch's math backend
// (tests/golden/nn_ops.txt): values and gradients for masks, causal shapes, scales, broadcast and
// grouped-query heads, f16 / bf16; PyTorch's errors; dropout from the generator; autocast. The
// fused op (ATTENTION, backend ABI 2.4) against the composition on every backend that takes it
// (the reference at least): values, gradients, finite differences, lse, the memory it saves.
#include "ck.h"
#include <math.h>
#include <stdio.h>

#include "nngolden.h"
#include "testutil.h"
#include "torc/torc.h"

static ng_file *g_gold;

// max |a - b| over all elements (b moved to a's device).
static double max_abs_diff(torc_tensor *a, torc_tensor *b) {
    double d = NAN;
    torc_scope_push();
    torc_tensor *m = torc_amax(torc_abs(torc_sub(a, torc_to_device(b, torc_get_device(a)))), TORC_ALL_DIMS, false);
    ck_assert_msg(m && torc_item(m, &d) == TORC_OK, "%s", torc_last_error());
    torc_scope_pop();
    return d;
}

static torc_tensor *sdpa_of(const ng_case *c, torc_tensor *q, torc_tensor *k, torc_tensor *v) {
    const ng_tensor *m = ng_get(c, "mask");
    return torc_scaled_dot_product_attention(q, k, v, m ? ng_make(m) : NULL, ng_param(c, "dropout_p", 0.0),
                                             ng_param(c, "is_causal", 0) != 0, ng_param(c, "scale", NAN),
                                             ng_param(c, "enable_gqa", 0) != 0, NULL);
}

// Tolerances by dtype: the golden is PyTorch in f64 on the same inputs; f16 / bf16 compute in f32
// and round once, so their error is the rounding of the result (and f32's).
static double tol_of(torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F64: return 1e-12;
    case TORC_DTYPE_F32: return 2e-6;
    case TORC_DTYPE_F16: return 1e-3;
    default: return 8e-3;
    }
}

static void run_case(const char *name) {
    if (!g_gold) g_gold = ng_load("nn_ops.txt");
    const ng_case *c = ng_find(g_gold, name);
    torc_scope_push();
    torc_tensor *q = ng_make(ng_get(c, "q")), *k = ng_make(ng_get(c, "k")), *v = ng_make(ng_get(c, "v"));
    if (c->error[0]) {
        ck_assert_ptr_null(sdpa_of(c, q, k, v));
        ck_assert_msg(!strcmp(torc_last_error(), c->error), "%s: '%s', expected '%s'", name, torc_last_error(),
                      c->error);
        torc_clear_error();
        torc_scope_pop();
        return;
    }
    const torc_dtype dt = torc_get_dtype(q);
    const bool grads = dt == TORC_DTYPE_F64 || dt == TORC_DTYPE_F32;
    if (grads) {
        torc_tensor *in[3] = {q, k, v};
        for (int i = 0; i < 3; i++) ck_assert_int_eq(torc_set_requires_grad(in[i], true), TORC_OK);
    }
    torc_tensor *out = sdpa_of(c, q, k, v);
    ck_assert_msg(out != NULL, "%s: %s", name, torc_last_error());
    ck_assert_int_eq(torc_get_dtype(out), dt);
    const double tol = tol_of(dt);
    ng_assert_close(name, out, ng_get(c, "out"), tol, tol);
    if (grads && ng_get(c, "dy")) {
        torc_tensor *dy = ng_make(ng_get(c, "dy"));
        ck_assert_int_eq(torc_backward(out, dy, false), TORC_OK);
        const double gt = dt == TORC_DTYPE_F64 ? 1e-11 : 2e-5;
        ng_assert_close("dq", torc_grad(q), ng_get(c, "dq"), gt, gt);
        ng_assert_close("dk", torc_grad(k), ng_get(c, "dk"), gt, gt);
        ng_assert_close("dv", torc_grad(v), ng_get(c, "dv"), gt, gt);
    }
    torc_scope_pop();
}

static const char *const g_cases[] = {
    "sdpa_basic",          "sdpa_f32",          "sdpa_2d",           "sdpa_causal_square",   "sdpa_causal_wide",
    "sdpa_causal_tall",    "sdpa_bool_mask",    "sdpa_float_mask",   "sdpa_float_mask_f32",  "sdpa_scale",
    "sdpa_negative_scale", "sdpa_broadcast",    "sdpa_gqa",          "sdpa_f16",             "sdpa_bf16",
    "sdpa_empty_keys",     "sdpa_err_causal_mask", "sdpa_err_dtypes", "sdpa_err_dims",       "sdpa_err_mask_dtype",
    "sdpa_err_mask_f64",   "sdpa_err_gqa_heads", "sdpa_err_dropout"};
#define N_CASES ((int)(sizeof g_cases / sizeof g_cases[0]))

NG_GOLDEN_TESTS(run_case, g_cases)

// Dropout on the attention weights: softmax(q k^T / sqrt(E)) through torc_dropout with the same
// generator state, then @ v; the same numbers on the reference backend; the generator advances
// by one draw per weight.
START_TEST(dropout_is_torc_dropout_of_the_weights) {
    torc_scope_push();
    torc_tensor *q = torc_randn(TORC_SHAPE(2, 2, 5, 4), TORC_DTYPE_F32, NULL);
    torc_tensor *k = torc_randn(TORC_SHAPE(2, 2, 6, 4), TORC_DTYPE_F32, NULL);
    torc_tensor *v = torc_randn(TORC_SHAPE(2, 2, 6, 3), TORC_DTYPE_F32, NULL);
    torc_generator *g = torc_generator_new(42);
    torc_tensor *got = torc_scaled_dot_product_attention(q, k, v, NULL, 0.25, false, NAN, false, g);
    uint64_t seed, offset;
    torc_generator_get_state(g, &seed, &offset);
    ck_assert_uint_eq(offset, 2 * 2 * 5 * 6);
    torc_generator_set_state(g, 42, 0);
    torc_tensor *w = torc_softmax(torc_div_scalar(torc_matmul(q, torc_transpose(k, -2, -1)), torc_s(2.0)), -1);
    torc_tensor *want = torc_matmul(torc_dropout(w, 0.25, true, g), v);
    ck_assert_double_le(max_abs_diff(got, want), 1e-6);
    torc_device *ref = torc_device_get("reference");
    torc_generator_set_state(g, 42, 0);
    torc_tensor *on_ref = torc_scaled_dot_product_attention(torc_to_device(q, ref), torc_to_device(k, ref),
                                                            torc_to_device(v, ref), NULL, 0.25, false, NAN, false, g);
    ck_assert_double_le(max_abs_diff(got, on_ref), 1e-6);
    // p = 1: every weight dropped, zeros; p <= 0 or NaN: no dropout, no draws
    tu_assert_values(torc_sum(torc_abs(torc_scaled_dot_product_attention(q, k, v, NULL, 1.0, false, NAN, false, g)),
                              TORC_ALL_DIMS, false),
                     TU_ARR(0), 0);
    torc_generator_get_state(g, &seed, &offset);
    torc_tensor *a = torc_scaled_dot_product_attention(q, k, v, NULL, -0.5, false, NAN, false, g);
    torc_tensor *b = torc_scaled_dot_product_attention(q, k, v, NULL, NAN, false, NAN, false, g);
    torc_tensor *c = torc_scaled_dot_product_attention(q, k, v, NULL, 0.0, false, NAN, false, g);
    uint64_t after;
    torc_generator_get_state(g, &seed, &after);
    ck_assert_uint_eq(after, offset);
    ck_assert_double_eq(max_abs_diff(a, c), 0);
    ck_assert_double_eq(max_abs_diff(b, c), 0);
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

// PyTorch's autocast runs the op in the lower precision: f32 inputs give a bf16 result, the
// gradients reach the f32 leaves as f32.
START_TEST(autocast_runs_in_the_lower_precision) {
    torc_scope_push();
    torc_tensor *q = torc_randn(TORC_SHAPE(1, 2, 4, 8), TORC_DTYPE_F32, NULL);
    torc_tensor *k = torc_randn(TORC_SHAPE(1, 2, 4, 8), TORC_DTYPE_F32, NULL);
    torc_tensor *v = torc_randn(TORC_SHAPE(1, 2, 4, 8), TORC_DTYPE_F32, NULL);
    ck_assert_int_eq(torc_set_requires_grad(q, true), TORC_OK);
    ck_assert_int_eq(torc_autocast_begin(TORC_DTYPE_BF16), TORC_OK);
    torc_tensor *o = torc_scaled_dot_product_attention(q, k, v, NULL, 0.0, true, NAN, false, NULL);
    ck_assert_int_eq(torc_autocast_end(), TORC_OK);
    ck_assert_int_eq(torc_get_dtype(o), TORC_DTYPE_BF16);
    // the same as casting by hand and running without autocast
    torc_tensor *want = torc_scaled_dot_product_attention(torc_to_dtype(q, TORC_DTYPE_BF16), torc_to_dtype(k, TORC_DTYPE_BF16),
                                                          torc_to_dtype(v, TORC_DTYPE_BF16), NULL, 0.0, true, NAN,
                                                          false, NULL);
    ck_assert_double_eq(max_abs_diff(o, want), 0);
    ck_assert_int_eq(torc_backward(torc_sum(torc_to_dtype(o, TORC_DTYPE_F32), TORC_ALL_DIMS, false), NULL, false),
                     TORC_OK);
    ck_assert_int_eq(torc_get_dtype(torc_grad(q)), TORC_DTYPE_F32);
    ck_assert(!torc_is_autocast_enabled());
    torc_scope_pop();
}
END_TEST

START_TEST(mask_must_fit_and_arguments_be_tensors) {
    torc_scope_push();
    torc_tensor *q = torc_zeros(TORC_SHAPE(1, 2, 3, 4), TORC_DTYPE_F32), *k = torc_zeros(TORC_SHAPE(1, 2, 5, 4), TORC_DTYPE_F32);
    torc_tensor *v = torc_zeros(TORC_SHAPE(1, 2, 5, 6), TORC_DTYPE_F32);
    torc_tensor *m = torc_ones(TORC_SHAPE(2, 2, 3, 5), TORC_DTYPE_BOOL);
    ck_assert_ptr_null(torc_scaled_dot_product_attention(q, k, v, m, 0.0, false, NAN, false, NULL));
    tu_assert_error(TORC_ERR_SHAPE, "output with shape [1, 2, 3, 5] doesn't match the broadcast shape [2, 2, 3, 5]");
    torc_clear_error();
    ck_assert_ptr_null(torc_scaled_dot_product_attention(q, NULL, v, NULL, 0.0, false, NAN, false, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    torc_clear_error();
    ck_assert_ptr_null(torc_scaled_dot_product_attention(torc_zeros(TORC_SHAPE(3, 4), TORC_DTYPE_I64),
                                                         torc_zeros(TORC_SHAPE(3, 4), TORC_DTYPE_I64),
                                                         torc_zeros(TORC_SHAPE(3, 4), TORC_DTYPE_I64), NULL, 0.0, false,
                                                         NAN, false, NULL));
    tu_assert_error(TORC_ERR_DTYPE, "expected scalar type Float but found Long");
    torc_clear_error();
    torc_scope_pop();
}
END_TEST

// ---- the fused op against the composition ----
// The composition is reached with a bool mask (every key attended, or the causal triangle): the
// same values, and the path a mask always takes. The fused op's count comes from op tracing.
static uint64_t fused_taken(void) { return torc_op_trace_count(TORC_OP_ATTENTION, -1, -1, 0); }
static uint64_t fused_declined(void) { return torc_op_trace_count(TORC_OP_ATTENTION, -1, -1, 1); }

// The bool mask (L, S) that makes the composition compute what is_causal does (or no mask).
static torc_tensor *mask_for(torc_device *dev, int64_t L, int64_t S, bool causal) {
    torc_tensor *m = torc_to_device(torc_ones(TORC_SHAPE(L, S), TORC_DTYPE_BOOL), dev);
    return causal ? torc_tril(m, 0) : m;
}

static torc_tensor *composed(torc_tensor *q, torc_tensor *k, torc_tensor *v, bool causal, double scale) {
    const int64_t L = torc_shape(q)[torc_ndim(q) - 2], S = torc_shape(k)[torc_ndim(k) - 2];
    return torc_scaled_dot_product_attention(q, k, v, mask_for(torc_get_device(q), L, S, causal), 0.0, false, scale,
                                             false, NULL);
}

// max over rows (the last dim) of max |got - want| / max |want| of the row (0 for rows of zeros
// that agree); NaN where one has a NaN the other lacks.
static double row_rel_err(torc_tensor *got, torc_tensor *want) {
    ck_assert_msg(got && want, "%s", torc_last_error());
    ck_assert_int_eq(torc_ndim(got), torc_ndim(want));
    ck_assert_int_eq(memcmp(torc_shape(got), torc_shape(want), sizeof(int64_t) * (size_t)torc_ndim(got)), 0);
    const int64_t n = torc_numel(want), cols = torc_shape(want)[torc_ndim(want) - 1];
    if (n == 0) return 0;
    double *g = tu_values(got), *w = tu_values(want), worst = 0;
    for (int64_t r = 0; r < n / cols; r++) {
        double mag = 0, err = 0;
        for (int64_t c = 0; c < cols; c++) {
            const int64_t i = r * cols + c;
            mag = fmax(mag, fabs(w[i]));
            if (isnan(g[i]) != isnan(w[i])) err = NAN;
            else if (!isnan(err) && !isnan(w[i])) err = fmax(err, fabs(g[i] - w[i]));
        }
        if (isnan(err)) worst = NAN;
        else if (err > 0 && !isnan(worst)) worst = fmax(worst, err / mag);
    }
    free(g), free(w);
    return worst;
}

// max |got - want| / max(max |want|, 1) over the whole tensor (gradients, lse: inputs are O(1), and
// a gradient that is zero in exact arithmetic, dq of a single key, is rounding noise in f32).
static double rel_err(torc_tensor *got, torc_tensor *want) {
    ck_assert_msg(got && want, "%s", torc_last_error());
    const int64_t n = torc_numel(want);
    ck_assert_int_eq(torc_numel(got), n);
    double *g = tu_values(got), *w = tu_values(want), mag = 0, err = 0;
    for (int64_t i = 0; i < n; i++) mag = fmax(mag, fabs(w[i])), err = fmax(err, fabs(g[i] - w[i]));
    free(g), free(w);
    return err / fmax(mag, 1.0);
}

// The fused op's bound against the composition, per output row relative to the row's max |o|
// (gradients: relative to the tensor's max): f64 1e-12; f32 4e-6 (the composition's own f32
// roundings over E-term dots and S-term sums are 2.1e-7 against the reference, which rounds the
// exact value once; the rest is room for a backend accumulating in f32); f16 / bf16 one rounding of
// the result, their eps (the reference rounds the exact value, the composition its f32 value), and
// 4 eps for gradients (the composition rounds each input's gradient from f32).
static double fused_tol(torc_dtype d, bool grad) {
    double eps = 0;
    torc_finfo(d, NULL, NULL, &eps, NULL);
    switch (d) {
    case TORC_DTYPE_F64: return 1e-12;
    case TORC_DTYPE_F32: return grad ? 2e-5 : 4e-6;
    default: return grad ? 4 * eps : eps;
    }
}

typedef struct att_shape { int64_t B, H, L, S, E, Ev; bool causal; } att_shape;

// q, k, v of s on dev in dtype (values from a fixed seed), requiring grad.
static void make_qkv(torc_device *dev, const att_shape *s, torc_dtype dt, uint64_t seed, torc_tensor **qkv) {
    torc_generator *g = torc_generator_new(seed);
    const int64_t shapes[3][4] = {{s->B, s->H, s->L, s->E}, {s->B, s->H, s->S, s->E}, {s->B, s->H, s->S, s->Ev}};
    for (int i = 0; i < 3; i++) {
        qkv[i] = torc_to_device(torc_to_dtype(torc_randn(4, shapes[i], TORC_DTYPE_F32, g), dt), dev);
        ck_assert_msg(qkv[i] != NULL, "%s", torc_last_error());
        ck_assert_int_eq(torc_set_requires_grad(qkv[i], true), TORC_OK);
    }
    torc_generator_free(g);
}

// The fused op on dev against the composition on dev: values, then the gradients of o . dy. The
// fused op must have run where ref_must (the reference takes every case here); elsewhere the
// backend may decline, and then the composition ran (never the reference's kernel: no declined
// dispatch).
static void fused_vs_composed(torc_device *dev, const att_shape *s, torc_dtype dt, bool ref_must) {
    torc_scope_push();
    torc_tensor *a[3], *b[3];
    make_qkv(dev, s, dt, 7, a);
    make_qkv(dev, s, dt, 7, b);
    const double scale = s->E == 8 ? NAN : 0.3;
    torc_op_trace_start();
    torc_tensor *of = torc_scaled_dot_product_attention(a[0], a[1], a[2], NULL, 0.0, s->causal, scale, false, NULL);
    torc_op_trace_stop();
    ck_assert_msg(of != NULL, "%s", torc_last_error());
    const bool ran = fused_taken() > 0;
    ck_assert_uint_eq(fused_declined(), 0);
    if (ref_must) ck_assert_msg(ran, "the reference did not run the fused op");
    if (ran) ck_assert_str_eq(torc_grad_fn_name(of), "ScaledDotProductFlashAttentionForCpuBackward0");
    torc_tensor *oc = composed(b[0], b[1], b[2], s->causal, scale);
    ck_assert_int_eq(torc_get_dtype(of), dt);
    const double e = row_rel_err(of, oc), tol = fused_tol(dt, false);
    ck_assert_msg(e <= tol, "%s %s B%lld H%lld L%lld S%lld E%lld Ev%lld causal %d: output off by %.3g (tol %.3g)",
                  torc_device_name(dev), torc_dtype_name(dt), (long long)s->B, (long long)s->H, (long long)s->L,
                  (long long)s->S, (long long)s->E, (long long)s->Ev, s->causal, e, tol);
    torc_generator *g = torc_generator_new(11);
    torc_tensor *dy = torc_randn(torc_ndim(of), torc_shape(of), TORC_DTYPE_F32, g);
    dy = torc_to_device(torc_to_dtype(dy, dt), dev);
    torc_generator_free(g);
    torc_op_trace_start();
    ck_assert_msg(torc_backward(of, dy, false) == TORC_OK, "%s", torc_last_error());
    torc_op_trace_stop();
    if (ran) ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ATTENTION_BACKWARD, -1, -1, 1), 0);
    if (ref_must) ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ATTENTION_BACKWARD, -1, -1, 0), 1);
    ck_assert_int_eq(torc_backward(oc, dy, false), TORC_OK);
    for (int i = 0; i < 3; i++) {
        const double ge = rel_err(torc_grad(a[i]), torc_grad(b[i])), gt = fused_tol(dt, true);
        ck_assert_msg(ge <= gt, "%s %s L%lld S%lld causal %d: d%c off by %.3g (tol %.3g)", torc_device_name(dev),
                      torc_dtype_name(dt), (long long)s->L, (long long)s->S, s->causal, "qkv"[i], ge, gt);
    }
    torc_scope_pop();
}

static const att_shape g_shapes[] = {
    {2, 3, 5, 5, 8, 8, false}, {2, 3, 5, 5, 8, 8, true},    // square
    {1, 2, 7, 4, 8, 6, true},  {1, 2, 4, 9, 8, 6, true},    // L > S, L < S: causal top-left aligned
    {1, 2, 7, 4, 8, 6, false}, {1, 2, 17, 33, 16, 24, false},  // E != Ev
    {1, 2, 5, 0, 4, 3, false}, {1, 2, 5, 0, 4, 3, true},    // S = 0: zeros
    {1, 2, 0, 5, 4, 3, false}, {2, 1, 1, 1, 8, 8, true},    // L = 0; one query, one key
};
#define N_SHAPES ((int)(sizeof g_shapes / sizeof g_shapes[0]))
static const torc_dtype g_dtypes[] = {TORC_DTYPE_F64, TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16};

// Every shape and dtype on the reference (which must run the fused op) and on the default device.
START_TEST(fused_matches_composed) {
    torc_device *ref = torc_device_get("reference"), *def = torc_default_device();
    for (int d = 0; d < 4; d++) {
        fused_vs_composed(ref, &g_shapes[_i], g_dtypes[d], true);
        if (def != ref) fused_vs_composed(def, &g_shapes[_i], g_dtypes[d], false);
    }
}
END_TEST

// Inputs the op sees through views: the GPT's split heads (x (B, T, 3, H, hs) -> q, k, v (B, H, T, hs),
// none contiguous), batch dims that broadcast (stride 0 once expanded), 2-D, 3-D and 5-D inputs.
// Each against the composition, values and gradients, with the fused op run on the reference.
typedef torc_tensor *(*att_case)(torc_tensor *x, torc_tensor *y, torc_tensor *z, bool fused);

static torc_tensor *att(torc_tensor *q, torc_tensor *k, torc_tensor *v, bool causal, bool fused) {
    return fused ? torc_scaled_dot_product_attention(q, k, v, NULL, 0.0, causal, NAN, false, NULL)
                 : composed(q, k, v, causal, NAN);
}
static torc_tensor *split_heads(torc_tensor *x, torc_tensor *y, torc_tensor *z, bool fused) {
    (void)y, (void)z;  // x (2, 6, 3, 2, 4): T = 6, H = 2, hs = 4
    torc_tensor *h[3];
    for (int i = 0; i < 3; i++) h[i] = torc_transpose(torc_select(x, 2, i), 1, 2);
    ck_assert(!torc_is_contiguous(h[0]));
    return att(h[0], h[1], h[2], true, fused);
}
static torc_tensor *broadcast_batch(torc_tensor *x, torc_tensor *y, torc_tensor *z, bool fused) {
    return att(x, y, z, false, fused);  // (2, 3, 4, 5) (1, 3, 6, 5) (3, 6, 2)
}
static torc_tensor *three_d(torc_tensor *x, torc_tensor *y, torc_tensor *z, bool fused) {
    return att(x, y, z, true, fused);  // (3, 4, 5) (3, 6, 5) (3, 6, 2)
}
static torc_tensor *two_d(torc_tensor *x, torc_tensor *y, torc_tensor *z, bool fused) {
    return att(x, y, z, false, fused);  // (4, 5) (6, 5) (6, 2)
}
static torc_tensor *five_d(torc_tensor *x, torc_tensor *y, torc_tensor *z, bool fused) {
    return att(x, y, z, true, fused);  // (2, 2, 3, 4, 5) (2, 1, 3, 6, 5) (1, 2, 3, 6, 2)
}
static torc_tensor *five_d_transposed(torc_tensor *x, torc_tensor *y, torc_tensor *z, bool fused) {
    // batch dims whose strides do not nest: q (2, 3, 2, 4, 5) seen as (2, 2, 3, 4, 5)
    return att(torc_transpose(x, 1, 2), y, z, false, fused);  // k (2, 1, 3, 6, 5), v (2, 2, 3, 6, 2)
}

static torc_tensor *features_major(torc_tensor *x, torc_tensor *y, torc_tensor *z, bool fused) {
    // q and k stored (N, E, rows): feature stride rows, row stride 1
    return att(torc_transpose(x, -2, -1), torc_transpose(y, -2, -1), z, true, fused);  // (2, 5, 4) (2, 5, 6) (2, 6, 2)
}

static const struct {
    const char *name;
    att_case fn;
    int nd[3];
    int64_t shape[3][5];
} g_views[] = {
    {"split_heads", split_heads, {5, 1, 1}, {{2, 6, 3, 2, 4}, {1}, {1}}},
    {"broadcast_batch", broadcast_batch, {4, 4, 3}, {{2, 3, 4, 5}, {1, 3, 6, 5}, {3, 6, 2}}},
    {"three_d", three_d, {3, 3, 3}, {{3, 4, 5}, {3, 6, 5}, {3, 6, 2}}},
    {"two_d", two_d, {2, 2, 2}, {{4, 5}, {6, 5}, {6, 2}}},
    {"five_d", five_d, {5, 5, 5}, {{2, 2, 3, 4, 5}, {2, 1, 3, 6, 5}, {1, 2, 3, 6, 2}}},
    {"five_d_transposed", five_d_transposed, {5, 5, 5}, {{2, 3, 2, 4, 5}, {2, 1, 3, 6, 5}, {2, 2, 3, 6, 2}}},
    {"features_major", features_major, {3, 3, 3}, {{2, 5, 4}, {2, 5, 6}, {2, 6, 2}}},
};
#define N_VIEWS ((int)(sizeof g_views / sizeof g_views[0]))

START_TEST(views_and_broadcasts_match_composed) {
    torc_device *def = torc_default_device();
    ck_assert_int_eq(torc_set_default_device(torc_device_get("reference")), TORC_OK);
    torc_scope_push();
    torc_tensor *a[3], *b[3];
    torc_generator *g = torc_generator_new(5);
    for (int i = 0; i < 3; i++) {
        a[i] = torc_randn(g_views[_i].nd[i], g_views[_i].shape[i], TORC_DTYPE_F64, g);
        b[i] = torc_clone(a[i]);
        ck_assert_int_eq(torc_set_requires_grad(a[i], true), TORC_OK);
        ck_assert_int_eq(torc_set_requires_grad(b[i], true), TORC_OK);
    }
    torc_op_trace_start();
    torc_tensor *of = g_views[_i].fn(a[0], a[1], a[2], true);
    torc_op_trace_stop();
    ck_assert_msg(of != NULL, "%s: %s", g_views[_i].name, torc_last_error());
    ck_assert_msg(fused_taken() == 1, "%s: the fused op did not run", g_views[_i].name);
    torc_tensor *oc = g_views[_i].fn(b[0], b[1], b[2], false);
    ck_assert_msg(oc != NULL, "%s: %s", g_views[_i].name, torc_last_error());
    const double e = row_rel_err(of, oc);
    ck_assert_msg(e <= 1e-12, "%s: output off by %.3g", g_views[_i].name, e);
    torc_tensor *dy = torc_randn(torc_ndim(of), torc_shape(of), TORC_DTYPE_F64, g);
    ck_assert_int_eq(torc_backward(of, dy, false), TORC_OK);
    ck_assert_int_eq(torc_backward(oc, dy, false), TORC_OK);
    for (int i = 0; i < 3; i++) {
        if (!torc_grad(b[i])) {  // split_heads: one leaf
            ck_assert_ptr_null(torc_grad(a[i]));
            continue;
        }
        tu_assert_dims_at(__FILE__, __LINE__, "grad", torc_ndim(torc_grad(a[i])), torc_shape(torc_grad(a[i])),
                          g_views[_i].nd[i], g_views[_i].shape[i]);
        const double ge = rel_err(torc_grad(a[i]), torc_grad(b[i]));
        ck_assert_msg(ge <= 1e-12, "%s: gradient %d off by %.3g", g_views[_i].name, i, ge);
    }
    torc_generator_free(g);
    torc_scope_pop();
    torc_set_default_device(def);
}
END_TEST

// The fused op's gradients by central finite differences in f64 on the reference: L = sum(o * w),
// each element of q, k, v moved by +-1e-6.
START_TEST(gradients_match_finite_differences) {
    static const att_shape shapes[] = {{1, 2, 3, 4, 3, 2, false}, {1, 2, 4, 3, 3, 2, true}, {2, 1, 3, 5, 2, 3, true}};
    torc_device *def = torc_default_device();
    ck_assert_int_eq(torc_set_default_device(torc_device_get("reference")), TORC_OK);
    for (int c = 0; c < 3; c++) {
        const att_shape *s = &shapes[c];
        torc_scope_push();
        torc_tensor *x[3];
        make_qkv(torc_device_get("reference"), s, TORC_DTYPE_F64, 3 + (uint64_t)c, x);
        torc_generator *g = torc_generator_new(9);
        torc_tensor *w = torc_randn(TORC_SHAPE(s->B, s->H, s->L, s->Ev), TORC_DTYPE_F64, g);
        torc_generator_free(g);
        torc_tensor *o = torc_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0.0, s->causal, 0.7, false, NULL);
        ck_assert_str_eq(torc_grad_fn_name(o), "ScaledDotProductFlashAttentionForCpuBackward0");
        ck_assert_int_eq(torc_backward(torc_sum(torc_mul(o, w), TORC_ALL_DIMS, false), NULL, false), TORC_OK);
        for (int i = 0; i < 3; i++) {
            const int64_t n = torc_numel(x[i]);
            double *val = tu_values(x[i]), *ga = tu_values(torc_grad(x[i]));
            double mag = 0;
            for (int64_t j = 0; j < n; j++) mag = fmax(mag, fabs(ga[j]));
            for (int64_t j = 0; j < n; j++) {
                double lp[2];
                for (int side = 0; side < 2; side++) {
                    torc_scope_push();
                    torc_no_grad_begin();
                    double *moved = malloc(sizeof(double) * (size_t)n);
                    memcpy(moved, val, sizeof(double) * (size_t)n);
                    moved[j] += side ? -1e-6 : 1e-6;
                    torc_tensor *xi[3] = {x[0], x[1], x[2]};
                    xi[i] = torc_tensor_from(moved, torc_ndim(x[i]), torc_shape(x[i]), TORC_DTYPE_F64);
                    free(moved);
                    torc_tensor *op = torc_scaled_dot_product_attention(xi[0], xi[1], xi[2], NULL, 0.0, s->causal, 0.7,
                                                                        false, NULL);
                    ck_assert_int_eq(torc_item(torc_sum(torc_mul(op, w), TORC_ALL_DIMS, false), &lp[side]), TORC_OK);
                    torc_no_grad_end();
                    torc_scope_pop();
                }
                const double gn = (lp[0] - lp[1]) / 2e-6;
                ck_assert_msg(fabs(gn - ga[j]) <= 1e-7 * fmax(mag, 1.0), "case %d: d%d[%lld] %.12g, differences %.12g",
                              c, i, (long long)j, ga[j], gn);
            }
            free(val), free(ga);
        }
        torc_scope_pop();
    }
    torc_set_default_device(def);
}
END_TEST

// lse (ATTENTION's out[1]) is logsumexp of the scores over the attended keys, through torc_run_op
// on the reference: f64 within 1e-13, f32 rounded once from it; S = 0 gives o = 0 and lse = -inf.
START_TEST(lse_is_the_logsumexp_of_the_scores) {
    torc_device *ref = torc_device_get("reference"), *def = torc_default_device();
    ck_assert_int_eq(torc_set_default_device(ref), TORC_OK);
    for (int t = 0; t < 4; t++) {
        const torc_dtype dt = t < 2 ? TORC_DTYPE_F64 : TORC_DTYPE_F32;
        const bool causal = t % 2;
        torc_scope_push();
        torc_generator *g = torc_generator_new(17);
        torc_tensor *q = torc_to_dtype(torc_randn(TORC_SHAPE(2, 2, 5, 3), TORC_DTYPE_F64, g), dt);
        torc_tensor *k = torc_to_dtype(torc_randn(TORC_SHAPE(2, 2, 4, 3), TORC_DTYPE_F64, g), dt);
        torc_tensor *v = torc_to_dtype(torc_randn(TORC_SHAPE(2, 2, 4, 2), TORC_DTYPE_F64, g), dt);
        torc_generator_free(g);
        const torc_dtype lt = dt == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32;
        torc_tensor *o = torc_zeros(TORC_SHAPE(2, 2, 5, 2), dt), *lse = torc_zeros(TORC_SHAPE(2, 2, 5), lt);
        torc_op_call call = {.code = TORC_OP_ATTENTION, .n_in = 3, .n_out = 2, .in = {q, k, v}, .out = {o, lse}};
        call.params.attention.scale = 0.6, call.params.attention.causal = causal;
        ck_assert_msg(torc_run_op(ref, &call, TORC_RUN_NATIVE) == TORC_OK, "%s", torc_last_error());
        torc_tensor *s = torc_mul_scalar(torc_matmul(torc_to_dtype(q, TORC_DTYPE_F64),
                                                     torc_transpose(torc_to_dtype(k, TORC_DTYPE_F64), -2, -1)),
                                         torc_s(0.6));
        if (causal) s = torc_where(mask_for(ref, 5, 4, true), s, torc_scalar_tensor(-INFINITY, TORC_DTYPE_F64));
        torc_tensor *want = torc_logsumexp(s, TORC_DIMS(-1), false);
        const double e = rel_err(lse, want);
        ck_assert_msg(e <= (dt == TORC_DTYPE_F64 ? 1e-13 : 1e-6), "lse off by %.3g", e);
        torc_scope_pop();
    }
    torc_scope_push();  // no key: o = 0, lse = -inf
    torc_tensor *q = torc_ones(TORC_SHAPE(1, 1, 2, 3), TORC_DTYPE_F32);
    torc_tensor *k = torc_ones(TORC_SHAPE(1, 1, 0, 3), TORC_DTYPE_F32);
    torc_tensor *v = torc_ones(TORC_SHAPE(1, 1, 0, 2), TORC_DTYPE_F32);
    torc_tensor *o = torc_full(TORC_SHAPE(1, 1, 2, 2), 5, TORC_DTYPE_F32);
    torc_tensor *lse = torc_zeros(TORC_SHAPE(1, 1, 2), TORC_DTYPE_F32);
    torc_op_call call = {.code = TORC_OP_ATTENTION, .n_in = 3, .n_out = 2, .in = {q, k, v}, .out = {o, lse}};
    call.params.attention.scale = 1;
    ck_assert_msg(torc_run_op(ref, &call, TORC_RUN_NATIVE) == TORC_OK, "%s", torc_last_error());
    tu_assert_values(o, TU_ARR(0, 0, 0, 0), 0);
    tu_assert_values(lse, TU_ARR(-INFINITY, -INFINITY), 0);
    torc_scope_pop();
    torc_set_default_device(def);
}
END_TEST

// The reference rounds each output once: with q = 0 every key weighs 1/3, and v = (3, 3 t, tiny)
// makes o = 1 + t + tiny / 3, just past the tie 1 + t between two f16 (t = 2^-11) or bf16 (t = 2^-8)
// values, so near that rounding through the nearest f32 lands on the tie and rounds to even (1).
START_TEST(reference_rounds_each_output_once) {
    torc_device *ref = torc_device_get("reference");
    const struct { torc_dtype dt; double t, tiny; } c[2] = {{TORC_DTYPE_F16, 0x1p-11, 0x1p-24},
                                                           {TORC_DTYPE_BF16, 0x1p-8, 0x1p-40}};
    for (int i = 0; i < 2; i++) {
        torc_scope_push();
        const double vv[3] = {3, 3 * c[i].t, c[i].tiny};
        torc_tensor *q = torc_to_device(torc_zeros(TORC_SHAPE(1, 1, 1, 1), c[i].dt), ref);
        torc_tensor *k = torc_to_device(torc_zeros(TORC_SHAPE(1, 1, 3, 1), c[i].dt), ref);
        torc_tensor *v = torc_tensor_from(vv, TORC_SHAPE(1, 1, 3, 1), TORC_DTYPE_F64);
        v = torc_to_device(torc_to_dtype(v, c[i].dt), ref);
        tu_assert_values(v, vv, 3, 0);  // each exact in the dtype
        torc_tensor *o = torc_to_device(torc_zeros(TORC_SHAPE(1, 1, 1, 1), c[i].dt), ref);
        torc_tensor *lse = torc_to_device(torc_zeros(TORC_SHAPE(1, 1, 1), TORC_DTYPE_F32), ref);
        torc_op_call call = {.code = TORC_OP_ATTENTION, .n_in = 3, .n_out = 2, .in = {q, k, v}, .out = {o, lse}};
        call.params.attention.scale = 1;
        ck_assert_msg(torc_run_op(ref, &call, TORC_RUN_NATIVE) == TORC_OK, "%s", torc_last_error());
        tu_assert_values(o, TU_ARR(1 + 2 * c[i].t), 0);
        torc_scope_pop();
    }
}
END_TEST

// The fused op keeps no (L, S) tensor: forward with grad at T = 256 (B = 1, H = 2, E = 16, f32) on
// the reference, the activation bytes the forward allocates at its peak and those it leaves held
// (o, lse, the views), fused against the composition. One (H, T, T) f32 score tensor is 512 KiB;
// the fused op holds o (32 KiB) and lse (2 KiB).
START_TEST(fused_saves_no_score_matrix) {
    torc_device *ref = torc_device_get("reference"), *def = torc_default_device();
    ck_assert_int_eq(torc_set_default_device(ref), TORC_OK);
    const uint64_t scores = 2 * 256 * 256 * 4;
    uint64_t peak[2], held[2];
    for (int fused = 0; fused < 2; fused++) {
        torc_scope_push();
        torc_tensor *x[3];
        make_qkv(ref, &(att_shape){1, 2, 256, 256, 16, 16, true}, TORC_DTYPE_F32, 1, x);
        torc_tensor *m = fused ? NULL : mask_for(ref, 256, 256, true);
        torc_memory_stats st;
        ck_assert_int_eq(torc_memory_stats_get(ref, &st), TORC_OK);
        const uint64_t before = st.in_use[TORC_MEM_ACTIVATION];
        torc_memory_reset_peak(ref);
        torc_tensor *o = torc_scaled_dot_product_attention(x[0], x[1], x[2], m, 0.0, fused, NAN, false, NULL);
        ck_assert_msg(o != NULL, "%s", torc_last_error());
        ck_assert_int_eq(torc_memory_stats_get(ref, &st), TORC_OK);
        peak[fused] = st.peak[TORC_MEM_ACTIVATION] - before;
        held[fused] = st.in_use[TORC_MEM_ACTIVATION] - before;
        torc_scope_pop();
    }
    ck_assert_msg(peak[1] < scores / 4 && held[1] < scores / 4, "fused: peak %llu, held %llu bytes",
                  (unsigned long long)peak[1], (unsigned long long)held[1]);
    ck_assert_msg(held[0] >= 2 * scores, "composed: held %llu bytes", (unsigned long long)held[0]);
    torc_set_default_device(def);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, golden_default_backend, 0, N_CASES);
    tcase_add_loop_test(tc, golden_reference_backend, 0, N_CASES);
    tcase_add_test(tc, dropout_is_torc_dropout_of_the_weights);
    tcase_add_test(tc, autocast_runs_in_the_lower_precision);
    tcase_add_test(tc, mask_must_fit_and_arguments_be_tensors);
    tcase_add_loop_test(tc, fused_matches_composed, 0, N_SHAPES);
    tcase_add_loop_test(tc, views_and_broadcasts_match_composed, 0, N_VIEWS);
    tcase_add_test(tc, gradients_match_finite_differences);
    tcase_add_test(tc, lse_is_the_logsumexp_of_the_scores);
    tcase_add_test(tc, reference_rounds_each_output_once);
    tcase_add_test(tc, fused_saves_no_score_matrix);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
