// tests/test_autocast.c — the autocast policy table (which op runs in which dtype under each autocast
// dtype), gradients reaching f32 parameters as f32, scopes, the weight-cast cache, and fp8 autocast.
#include <pthread.h>

#include "testutil.h"
#include "torc/gpt.h"

static void ok(torc_status st) { ck_assert_msg(st == TORC_OK, "status %d: %s", st, torc_last_error()); }

static torc_tensor *rnd(int64_t r, int64_t c, torc_dtype d, uint64_t seed) {
    torc_generator *g = torc_generator_new(seed);
    torc_tensor *t = torc_to_dtype(torc_randn(TORC_SHAPE(r, c), TORC_DTYPE_F32, g), d);
    torc_generator_free(g);
    return t;
}

static torc_dtype dt(torc_tensor *t) {
    ck_assert_msg(t != NULL, "op failed: %s", torc_last_error());
    return torc_get_dtype(t);
}

// Asserts a and b hold bit-identical values of the same dtype and shape.
static void assert_same(torc_tensor *a, torc_tensor *b) {
    ck_assert_int_eq(dt(a), dt(b));
    double *vb = tu_values(b);
    tu_assert_values(a, vb, torc_numel(b), 0);  // numel, then each value (NaN matches NaN)
    free(vb);
}

// ---- the policy table ----
typedef enum { LOW, F32, SAME } expect_kind;

// One row: an op applied to a bf16/f16 (or f32) input and the dtype autocast must give.
typedef struct policy_row {
    const char *name;
    torc_tensor *(*fn)(torc_tensor *x, torc_tensor *y);
    expect_kind kind;
} policy_row;

static torc_tensor *p_matmul(torc_tensor *x, torc_tensor *y) { return torc_matmul(x, torc_transpose(y, 0, 1)); }
static torc_tensor *p_sum(torc_tensor *x, torc_tensor *y) { (void)y; return torc_sum(x, TORC_ALL_DIMS, false); }
static torc_tensor *p_mean(torc_tensor *x, torc_tensor *y) { (void)y; return torc_mean(x, TORC_DIMS(1), true); }
static torc_tensor *p_prod(torc_tensor *x, torc_tensor *y) { (void)y; return torc_prod(x, TORC_DIMS(0), false); }
static torc_tensor *p_norm(torc_tensor *x, torc_tensor *y) { (void)y; return torc_norm(x, 2, TORC_ALL_DIMS, false); }
static torc_tensor *p_lse(torc_tensor *x, torc_tensor *y) { (void)y; return torc_logsumexp(x, TORC_DIMS(1), false); }
static torc_tensor *p_softmax(torc_tensor *x, torc_tensor *y) { (void)y; return torc_softmax(x, -1); }
static torc_tensor *p_log_softmax(torc_tensor *x, torc_tensor *y) { (void)y; return torc_log_softmax(x, -1); }
static torc_tensor *p_exp(torc_tensor *x, torc_tensor *y) { (void)y; return torc_exp(x); }
static torc_tensor *p_log(torc_tensor *x, torc_tensor *y) { (void)y; return torc_log(torc_abs(x)); }
static torc_tensor *p_reciprocal(torc_tensor *x, torc_tensor *y) { (void)y; return torc_reciprocal(x); }
static torc_tensor *p_rsqrt(torc_tensor *x, torc_tensor *y) { (void)y; return torc_rsqrt(torc_abs(x)); }
static torc_tensor *p_mse(torc_tensor *x, torc_tensor *y) { return torc_mse_loss(x, y); }
static torc_tensor *p_ce(torc_tensor *x, torc_tensor *y) {
    (void)y;
    const int64_t labels[2] = {1, 0};
    return torc_cross_entropy(x, torc_tensor_from(labels, TORC_SHAPE(2), TORC_DTYPE_I64));
}
static torc_tensor *p_nll(torc_tensor *x, torc_tensor *y) {
    (void)y;
    const int64_t labels[2] = {2, 1};
    return torc_nll_loss(x, torc_tensor_from(labels, TORC_SHAPE(2), TORC_DTYPE_I64));
}
static torc_tensor *p_amax(torc_tensor *x, torc_tensor *y) { (void)y; return torc_amax(x, TORC_ALL_DIMS, false); }
static torc_tensor *p_var(torc_tensor *x, torc_tensor *y) { (void)y; return torc_var(x, TORC_ALL_DIMS, 1.0, false); }
static torc_tensor *p_relu(torc_tensor *x, torc_tensor *y) { (void)y; return torc_relu(x); }
static torc_tensor *p_tanh(torc_tensor *x, torc_tensor *y) { (void)y; return torc_tanh(x); }
static torc_tensor *p_add(torc_tensor *x, torc_tensor *y) { return torc_add(x, y); }
static torc_tensor *p_mul(torc_tensor *x, torc_tensor *y) { return torc_mul(x, y); }

static const policy_row g_policy[] = {
    {"matmul", p_matmul, LOW},         {"sum", p_sum, F32},         {"mean", p_mean, F32},
    {"prod", p_prod, F32},             {"norm", p_norm, F32},       {"logsumexp", p_lse, F32},
    {"softmax", p_softmax, F32},       {"log_softmax", p_log_softmax, F32},
    {"exp", p_exp, F32},               {"log", p_log, F32},         {"reciprocal", p_reciprocal, F32},
    {"rsqrt", p_rsqrt, F32},           {"mse_loss", p_mse, F32},    {"cross_entropy", p_ce, F32},
    {"nll_loss", p_nll, F32},          {"amax", p_amax, SAME},      {"var", p_var, SAME},
    {"relu", p_relu, SAME},            {"tanh", p_tanh, SAME},      {"add", p_add, SAME},
    {"mul", p_mul, SAME},
};
#define N_POLICY (int)(sizeof g_policy / sizeof g_policy[0])

// Under autocast to `low`, every row applied to inputs of dtype `in` gives the expected dtype.
static void check_policy(torc_dtype low, torc_dtype in) {
    for (int i = 0; i < N_POLICY; i++) {
        torc_scope_push();
        torc_tensor *x = rnd(2, 3, in, 1), *y = rnd(2, 3, in, 2);
        ok(torc_autocast_begin(low));
        torc_tensor *r = g_policy[i].fn(x, y);
        ok(torc_autocast_end());
        const torc_dtype want = g_policy[i].kind == LOW ? low : g_policy[i].kind == F32 ? TORC_DTYPE_F32 : in;
        ck_assert_msg(r != NULL, "%s under %s on %s: %s", g_policy[i].name, torc_dtype_name(low), torc_dtype_name(in),
                      torc_last_error());
        ck_assert_msg(dt(r) == want, "%s under autocast(%s) on %s gave %s, expected %s", g_policy[i].name,
                      torc_dtype_name(low), torc_dtype_name(in), torc_dtype_name(dt(r)), torc_dtype_name(want));
        // Outside the scope the same call keeps its usual dtype.
        torc_tensor *plain = g_policy[i].fn(x, y);
        ck_assert_msg(dt(plain) == in, "%s outside autocast gave %s", g_policy[i].name, torc_dtype_name(dt(plain)));
        torc_scope_pop();
    }
}

START_TEST(policy_table_bf16) {
    check_policy(TORC_DTYPE_BF16, TORC_DTYPE_BF16);
    check_policy(TORC_DTYPE_BF16, TORC_DTYPE_F16);  // f16 input: matmul becomes bf16, f32 ops f32
}
END_TEST

START_TEST(policy_table_f16) {
    check_policy(TORC_DTYPE_F16, TORC_DTYPE_F16);
    check_policy(TORC_DTYPE_F16, TORC_DTYPE_BF16);
}
END_TEST

START_TEST(policy_on_f32_inputs) {
    torc_scope_push();
    torc_tensor *x = rnd(4, 3, TORC_DTYPE_F32, 3), *w = rnd(3, 5, TORC_DTYPE_F32, 4);
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    torc_tensor *y = torc_matmul(x, w);
    torc_tensor *y32 = torc_matmul_out_dtype(x, w, TORC_DTYPE_F32);  // bf16 x bf16 -> f32
    torc_tensor *s = torc_sum(x, TORC_ALL_DIMS, false), *e = torc_exp(x);
    torc_tensor *mixed = torc_add(y, torc_zeros(TORC_SHAPE(4, 5), TORC_DTYPE_F32));  // promotion: f32
    ok(torc_autocast_end());
    ck_assert_int_eq(dt(y), TORC_DTYPE_BF16);
    ck_assert_int_eq(dt(y32), TORC_DTYPE_F32);
    ck_assert_int_eq(dt(s), TORC_DTYPE_F32);
    ck_assert_int_eq(dt(e), TORC_DTYPE_F32);
    ck_assert_int_eq(dt(mixed), TORC_DTYPE_F32);
    // The values are those of the explicit casts.
    torc_tensor *xb = torc_to_dtype(x, TORC_DTYPE_BF16), *wb = torc_to_dtype(w, TORC_DTYPE_BF16);
    assert_same(y, torc_matmul(xb, wb));
    assert_same(y32, torc_matmul_out_dtype(xb, wb, TORC_DTYPE_F32));
    assert_same(s, torc_sum(x, TORC_ALL_DIMS, false));
    // Batched and 1-D operands, einsum's contraction: all in the autocast dtype.
    torc_tensor *xb3 = torc_randn(TORC_SHAPE(2, 4, 3), TORC_DTYPE_F32, NULL);
    torc_tensor *v = torc_randn(TORC_SHAPE(3), TORC_DTYPE_F32, NULL);
    ok(torc_autocast_begin(TORC_DTYPE_F16));
    ck_assert_int_eq(dt(torc_matmul(xb3, w)), TORC_DTYPE_F16);
    ck_assert_int_eq(dt(torc_matmul(x, v)), TORC_DTYPE_F16);
    ck_assert_int_eq(dt(TORC_EINSUM("b i j, j k -> b i k", xb3, w)), TORC_DTYPE_F16);
    ok(torc_autocast_end());
    torc_scope_pop();
}
END_TEST

START_TEST(integers_and_f64_are_never_cast) {
    torc_scope_push();
    const int64_t iv[4] = {1, 2, 3, 4};
    torc_tensor *i = torc_tensor_from(iv, TORC_SHAPE(2, 2), TORC_DTYPE_I64);
    torc_tensor *d = torc_ones(TORC_SHAPE(2, 2), TORC_DTYPE_F64);
    torc_tensor *mask = torc_gt_scalar(i, torc_s(2));
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    torc_tensor *ii = torc_matmul(i, i);
    torc_tensor *dd = torc_matmul(d, d);
    torc_tensor *is = torc_sum(i, TORC_ALL_DIMS, false);
    torc_tensor *ds = torc_exp(d);
    torc_tensor *m = torc_logical_not(mask);
    ok(torc_autocast_end());
    ck_assert_int_eq(dt(ii), TORC_DTYPE_I64);
    tu_assert_values(ii, TU_ARR(7, 10, 15, 22), 0);
    ck_assert_int_eq(dt(dd), TORC_DTYPE_F64);
    ck_assert_int_eq(dt(is), TORC_DTYPE_I64);
    ck_assert_int_eq(dt(ds), TORC_DTYPE_F64);
    ck_assert_int_eq(dt(m), TORC_DTYPE_BOOL);
    torc_scope_pop();
}
END_TEST

START_TEST(scopes_nest_and_disable) {
    torc_scope_push();
    torc_tensor *x = rnd(2, 2, TORC_DTYPE_F32, 5);
    ck_assert(!torc_is_autocast_enabled());
    ck_assert_int_eq(torc_autocast_dtype(), TORC_DTYPE_F32);
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    ck_assert(torc_is_autocast_enabled());
    ck_assert_int_eq(dt(torc_matmul(x, x)), TORC_DTYPE_BF16);
    ok(torc_autocast_begin(TORC_DTYPE_F32));  // autocast(enabled=False)
    ck_assert(!torc_is_autocast_enabled());
    ck_assert_int_eq(dt(torc_matmul(x, x)), TORC_DTYPE_F32);
    ok(torc_autocast_begin(TORC_DTYPE_F16));
    ck_assert_int_eq(torc_autocast_dtype(), TORC_DTYPE_F16);
    ck_assert_int_eq(dt(torc_matmul(x, x)), TORC_DTYPE_F16);
    ok(torc_autocast_end());
    ok(torc_autocast_end());
    ck_assert_int_eq(dt(torc_matmul(x, x)), TORC_DTYPE_BF16);
    ok(torc_autocast_end());
    ck_assert_int_eq(dt(torc_matmul(x, x)), TORC_DTYPE_F32);
    // Errors.
    ck_assert_int_eq(torc_autocast_end(), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "without a matching torc_autocast_begin");
    ck_assert_int_eq(torc_autocast_begin(TORC_DTYPE_I32), TORC_ERR_DTYPE);
    tu_assert_error(TORC_ERR_DTYPE, "target dtype Int is not supported");
    ck_assert_int_eq(torc_autocast_begin(TORC_DTYPE_F64), TORC_ERR_DTYPE);
    ck_assert(!torc_is_autocast_enabled());
    for (int i = 0; i < 64; i++) ok(torc_autocast_begin(TORC_DTYPE_BF16));
    ck_assert_int_eq(torc_autocast_begin(TORC_DTYPE_BF16), TORC_ERR_INVALID_ARG);
    for (int i = 0; i < 64; i++) ok(torc_autocast_end());
    torc_scope_pop();
}
END_TEST

static void *other_thread(void *arg) {
    torc_tensor *x = arg;
    torc_scope_push();
    torc_tensor *y = torc_matmul(x, x);
    bool plain = y && torc_get_dtype(y) == TORC_DTYPE_F32 && !torc_is_autocast_enabled();
    torc_scope_pop();
    return plain ? x : NULL;
}

START_TEST(scopes_are_per_thread) {
    torc_scope_push();
    torc_tensor *x = rnd(2, 2, TORC_DTYPE_F32, 6);
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    pthread_t th;
    void *res = NULL;
    ck_assert_int_eq(pthread_create(&th, NULL, other_thread, x), 0);
    ck_assert_int_eq(pthread_join(th, &res), 0);
    ck_assert_ptr_eq(res, x);
    ok(torc_autocast_end());
    torc_scope_pop();
}
END_TEST

// ---- gradients ----
START_TEST(gradients_reach_f32_params_as_f32) {
    torc_scope_push();
    torc_tensor *x = rnd(4, 3, TORC_DTYPE_F32, 7), *target = rnd(4, 5, TORC_DTYPE_F32, 8);
    torc_tensor *w = torc_parameter(rnd(3, 5, TORC_DTYPE_F32, 9));
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    torc_tensor *y = torc_matmul(x, w);
    torc_tensor *loss = torc_mse_loss(y, target);
    ok(torc_autocast_end());
    ck_assert_int_eq(dt(y), TORC_DTYPE_BF16);
    ck_assert_int_eq(dt(loss), TORC_DTYPE_F32);
    ck_assert_str_eq(torc_grad_fn_name(y), "MmBackward0");
    ok(torc_backward(loss, NULL, false));
    torc_tensor *gw = torc_grad(w);
    ck_assert_int_eq(dt(gw), TORC_DTYPE_F32);
    tu_assert_shape(gw, 3, 5);
    // The same graph written with explicit casts gives the same gradient, bit for bit.
    torc_tensor *w2 = torc_parameter(torc_clone(w));
    torc_tensor *y2 = torc_matmul(torc_to_dtype(x, TORC_DTYPE_BF16), torc_to_dtype(w2, TORC_DTYPE_BF16));
    ok(torc_backward(torc_mse_loss(torc_to_dtype(y2, TORC_DTYPE_F32), target), NULL, false));
    assert_same(gw, torc_grad(w2));
    // And it is close to the f32 gradient.
    torc_tensor *w3 = torc_parameter(torc_clone(w));
    ok(torc_backward(torc_mse_loss(torc_matmul(x, w3), target), NULL, false));
    double *a = tu_values(gw), *b = tu_values(torc_grad(w3));
    for (int i = 0; i < 15; i++) ck_assert_msg(fabs(a[i] - b[i]) <= 0.03 * (fabs(b[i]) + 0.1), "%g vs %g", a[i], b[i]);
    free(a);
    free(b);
    torc_scope_pop();
}
END_TEST

// autocast's matmul of f32 operands (a linear layer's f32 weight, an f32 input) runs with its
// casts fused (MATMUL_ROUNDED) where the device's backend takes it, else casts: either way the
// values and gradients are bit for bit those of the explicit casts, and the fused form keeps no
// low-precision copy of an operand for backward.
static uint64_t activation_bytes(void) {
    torc_memory_stats st;
    ok(torc_memory_stats_get(torc_default_device(), &st));
    return st.in_use[TORC_MEM_ACTIVATION];
}

static void check_fused_matmul(torc_device *dev, torc_dtype low, int nd) {
    ok(torc_set_default_device(dev));
    torc_scope_push();
    // 128 x 96 x 96 multiply-adds (1.2M): large enough for onednn's FMA GEMM.
    const int64_t K = 96, N = 96;
    torc_generator *g = torc_generator_new(31);
    torc_tensor *x0 = nd == 2 ? torc_randn(TORC_SHAPE(128, K), TORC_DTYPE_F32, g)
                              : torc_randn(TORC_SHAPE(2, 64, K), TORC_DTYPE_F32, g);
    torc_tensor *w0 = torc_randn(TORC_SHAPE(N, K), TORC_DTYPE_F32, g);
    torc_tensor *t = nd == 2 ? torc_randn(TORC_SHAPE(128, N), TORC_DTYPE_F32, g)
                             : torc_randn(TORC_SHAPE(2, 64, N), TORC_DTYPE_F32, g);
    torc_generator_free(g);
    torc_tensor *x = torc_parameter(torc_clone(x0)), *w = torc_parameter(torc_clone(w0));
    torc_tensor *x2 = torc_parameter(torc_clone(x0)), *w2 = torc_parameter(torc_clone(w0));
    ck_assert_msg(x && w && x2 && w2 && t, "%s", torc_last_error());

    uint64_t m0 = activation_bytes();
    ok(torc_autocast_begin(low));
    torc_tensor *y = torc_matmul(x, torc_transpose(w, 0, 1));
    ok(torc_autocast_end());
    ck_assert_int_eq(dt(y), low);
    ck_assert_str_eq(torc_grad_fn_name(y), nd == 2 ? "MmBackward0" : "UnsafeViewBackward0");
    const uint64_t fused_bytes = activation_bytes() - m0;
    m0 = activation_bytes();
    torc_tensor *y2 = torc_matmul(torc_to_dtype(x2, low), torc_transpose(torc_to_dtype(w2, low), 0, 1));
    const uint64_t cast_bytes = activation_bytes() - m0;
    assert_same(y, y2);

    ok(torc_backward(torc_mse_loss(torc_to_dtype(y, TORC_DTYPE_F32), t), NULL, false));
    ok(torc_backward(torc_mse_loss(torc_to_dtype(y2, TORC_DTYPE_F32), t), NULL, false));
    ck_assert_int_eq(dt(torc_grad(x)), TORC_DTYPE_F32);
    ck_assert_int_eq(dt(torc_grad(w)), TORC_DTYPE_F32);
    assert_same(torc_grad(x), torc_grad(x2));
    assert_same(torc_grad(w), torc_grad(w2));

    // Fused where the backend takes MATMUL_ROUNDED for this product: then the casts' copies of x
    // and w (2 bytes an element) are not held by the graph.
    torc_tensor *xm = nd == 2 ? x : torc_reshape(x, TORC_SHAPE(-1, K)), *out = torc_empty(TORC_SHAPE(128, N), low);
    torc_op_call call = {.code = TORC_OP_MATMUL_ROUNDED, .n_in = 2, .n_out = 1, .in = {xm, torc_transpose(w, 0, 1)},
                         .out = {out}};
    call.params.matmul.dtype = (int32_t)low;
    const bool fused = torc_op_supported(dev, &call) == TORC_OK;
    torc_clear_error();
    const uint64_t copies = (uint64_t)(torc_numel(x) + torc_numel(w)) * 2;
    if (fused) ck_assert_msg(fused_bytes + copies <= cast_bytes, "fused: %llu bytes, with casts %llu",
                             (unsigned long long)fused_bytes, (unsigned long long)cast_bytes);
    else ck_assert_uint_eq(fused_bytes, cast_bytes);
    torc_scope_pop();
}

START_TEST(matmul_casts_fused_bit_for_bit) {
    torc_device *dev = torc_default_device(), *ref = torc_device_get("reference");
    ck_assert_msg(ref != NULL, "%s", torc_last_error());
    const torc_dtype lows[2] = {TORC_DTYPE_BF16, TORC_DTYPE_F16};
    for (int i = 0; i < 2; i++)
        for (int nd = 2; nd <= 3; nd++) {
            check_fused_matmul(dev, lows[i], nd);
            check_fused_matmul(ref, lows[i], nd);  // the reference takes every MATMUL_ROUNDED
        }
    ok(torc_set_default_device(dev));
}
END_TEST

START_TEST(backward_inside_the_scope_and_modules) {
    torc_scope_push();
    torc_module *m = torc_cruncher_new(8, 2, TORC_DTYPE_F32, NULL);
    ck_assert_ptr_nonnull(m);
    torc_tensor *x = rnd(16, 8, TORC_DTYPE_F32, 10), *t = torc_randn(TORC_SHAPE(16), TORC_DTYPE_F32, NULL);
    for (int mode = 0; mode < 2; mode++) {
        ok(torc_module_zero_grad(m, true));
        ok(torc_autocast_begin(mode ? TORC_DTYPE_F16 : TORC_DTYPE_BF16));
        torc_tensor *y = torc_module_forward(m, x);
        ck_assert_int_eq(dt(y), mode ? TORC_DTYPE_F16 : TORC_DTYPE_BF16);
        torc_tensor *loss = torc_mse_loss(y, t);
        ck_assert_int_eq(dt(loss), TORC_DTYPE_F32);
        ok(torc_backward(loss, NULL, false));  // inside the scope: backward does not autocast
        ok(torc_autocast_end());
        for (int i = 0; i < torc_module_param_count(m); i++) {
            torc_tensor *p = torc_module_param(m, i), *g = torc_grad(p);
            ck_assert_int_eq(dt(p), TORC_DTYPE_F32);
            ck_assert_msg(g && dt(g) == TORC_DTYPE_F32, "%s: grad missing or not f32", torc_module_param_name(m, i));
        }
    }
    torc_module_free(m);
    torc_scope_pop();
}
END_TEST

// ---- the weight-cast cache ----
// In a region, a matmul that records no graph (grad mode off) casts an f32 parameter once and
// reuses the cast until the outermost torc_autocast_end (PyTorch's cached_cast), made again after
// an in-place write to the parameter; the values are those of the uncached path, bit for bit.
static uint64_t bytes_in_use(void) {
    torc_memory_stats st;
    ok(torc_memory_stats_get(torc_default_device(), &st));
    return st.total_in_use;
}

// f32 -> low casts dispatched since the last torc_op_trace_start.
static uint64_t casts_to(torc_dtype low) { return torc_op_trace_count(TORC_OP_COPY, TORC_DTYPE_F32, low, -1); }

// x @ w under autocast in its own scope, the result kept by the caller's.
static torc_tensor *mm_kept(torc_tensor *x, torc_tensor *w) {
    torc_scope_push();
    torc_tensor *y = torc_keep(torc_matmul(x, w));
    torc_scope_pop();
    ck_assert_msg(y != NULL, "%s", torc_last_error());
    return y;
}

static void check_cached_matmul(torc_dtype low) {
    torc_scope_push();
    // x already in low: the only f32 -> low casts are the weight's.
    torc_tensor *x = rnd(5, 48, low, 40), *x3 = torc_reshape(rnd(10, 48, low, 41), TORC_SHAPE(2, 5, 48));
    torc_tensor *w = torc_parameter(rnd(48, 40, TORC_DTYPE_F32, 42));
    torc_tensor *wt = torc_parameter(rnd(40, 48, TORC_DTYPE_F32, 43));  // used as wt^T, a view
    torc_tensor *wl = torc_to_dtype(w, low), *wtl = torc_to_dtype(wt, low);
    torc_tensor *expect = torc_matmul(x, wl), *expect3 = torc_matmul(x3, wl);
    torc_tensor *expect_t = torc_matmul(x, torc_transpose(wtl, 0, 1));
    // The uncached path (grad mode on: MATMUL_ROUNDED or the casts) gives the same bits.
    ok(torc_autocast_begin(low));
    assert_same(mm_kept(x, w), expect);
    ok(torc_autocast_end());

    ok(torc_autocast_begin(low));
    torc_no_grad_begin();
    torc_op_trace_start();
    torc_tensor *y1 = mm_kept(x, w);  // the first: casts w
    ck_assert_uint_eq(casts_to(low), 1);
    torc_tensor *y2 = mm_kept(x, w);  // cached: no cast
    torc_tensor *y3 = mm_kept(x3, w);
    ck_assert_uint_eq(casts_to(low), 1);
    torc_tensor *t1 = mm_kept(x, torc_transpose(wt, 0, 1));  // a view of all of a parameter: cached too
    torc_tensor *t2 = mm_kept(x, torc_transpose(wt, 0, 1));
    ck_assert_uint_eq(casts_to(low), 2);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_MATMUL, -1, -1, -1) + torc_op_trace_count(TORC_OP_MATMUL_ROUNDED, -1, -1, -1), 5);
    torc_op_trace_stop();
    torc_no_grad_end();
    ok(torc_autocast_end());
    ck_assert_int_eq(dt(y1), low);
    assert_same(y1, expect);
    assert_same(y2, expect);
    assert_same(y3, expect3);
    assert_same(t1, expect_t);
    assert_same(t2, expect_t);
    torc_scope_pop();
}

START_TEST(cache_matmul_bit_for_bit_and_reused) {
    check_cached_matmul(TORC_DTYPE_BF16);
    check_cached_matmul(TORC_DTYPE_F16);
}
END_TEST

START_TEST(cache_follows_inplace_writes) {
    torc_scope_push();
    torc_tensor *x = rnd(4, 32, TORC_DTYPE_BF16, 44);
    torc_tensor *w = torc_parameter(rnd(32, 24, TORC_DTYPE_F32, 45)), *g = rnd(32, 24, TORC_DTYPE_F32, 46);
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    torc_no_grad_begin();
    torc_op_trace_start();
    torc_tensor *y1 = mm_kept(x, w);
    ok(torc_mul_scalar_(w, torc_s(2.0)));  // a write bumps the storage's version: the cast is made again
    torc_tensor *y2 = mm_kept(x, w);
    ck_assert_uint_eq(casts_to(TORC_DTYPE_BF16), 2);
    ok(torc_add_scaled_(w, g, torc_s(-0.1)));  // an SGD step
    torc_tensor *y3 = mm_kept(x, w);
    torc_tensor *y4 = mm_kept(x, w);
    ck_assert_uint_eq(casts_to(TORC_DTYPE_BF16), 3);
    torc_op_trace_stop();
    torc_no_grad_end();
    ok(torc_autocast_end());
    // Doubling is exact in bf16, so the second product is exactly twice the first.
    assert_same(y2, torc_mul_scalar(y1, torc_s(2.0)));
    torc_tensor *expect = torc_matmul(x, torc_to_dtype(w, TORC_DTYPE_BF16));
    assert_same(y3, expect);
    assert_same(y4, expect);
    torc_scope_pop();
}
END_TEST

START_TEST(cache_lives_until_the_outermost_end) {
    torc_scope_push();
    torc_tensor *x = rnd(3, 64, TORC_DTYPE_BF16, 47), *w = torc_parameter(rnd(64, 16, TORC_DTYPE_F32, 48));
    const uint64_t held = (uint64_t)torc_numel(w) * 2, m0 = bytes_in_use();
    torc_no_grad_begin();
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    torc_scope_push();
    torc_matmul(x, w);
    torc_scope_pop();
    ck_assert_uint_eq(bytes_in_use() - m0, held);  // the cast, and nothing else
    // Inner regions (one of them autocast off) end without clearing it.
    ok(torc_autocast_begin(TORC_DTYPE_F32));
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    ok(torc_autocast_end());
    ok(torc_autocast_end());
    ck_assert_uint_eq(bytes_in_use() - m0, held);
    torc_op_trace_start();
    torc_scope_push();
    torc_matmul(x, w);
    torc_scope_pop();
    ck_assert_uint_eq(casts_to(TORC_DTYPE_BF16), 0);
    ok(torc_autocast_end());
    ck_assert_uint_eq(bytes_in_use(), m0);  // the outermost end frees it
    // A new region casts again.
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    torc_scope_push();
    torc_matmul(x, w);
    torc_scope_pop();
    ck_assert_uint_eq(casts_to(TORC_DTYPE_BF16), 1);
    ok(torc_autocast_end());
    torc_op_trace_stop();
    torc_no_grad_end();
    ck_assert_uint_eq(bytes_in_use(), m0);
    torc_scope_pop();
}
END_TEST

START_TEST(cache_holds_parameters_only_and_not_in_grad_mode) {
    torc_scope_push();
    torc_tensor *x = rnd(3, 64, TORC_DTYPE_F32, 49), *target = rnd(3, 16, TORC_DTYPE_F32, 50);
    torc_tensor *w = torc_parameter(rnd(64, 16, TORC_DTYPE_F32, 51)), *plain = rnd(64, 16, TORC_DTYPE_F32, 52);
    torc_tensor *wide = torc_parameter(rnd(64, 32, TORC_DTYPE_F32, 53));
    const uint64_t m0 = bytes_in_use();
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    // Grad mode on: the graph's matmul, no cache (the graph and its result go with the scope).
    torc_scope_push();
    torc_tensor *y = torc_matmul(x, w);
    ck_assert_str_eq(torc_grad_fn_name(y), "MmBackward0");
    ok(torc_backward(torc_mse_loss(y, target), NULL, false));
    torc_scope_pop();
    ck_assert_uint_eq(bytes_in_use() - m0, (uint64_t)torc_numel(w) * 4);  // w's .grad only
    // Its gradient is the explicit casts', bit for bit.
    torc_tensor *w2 = torc_parameter(torc_clone(w));
    ok(torc_autocast_end());
    ok(torc_backward(torc_mse_loss(torc_to_dtype(torc_matmul(torc_to_dtype(x, TORC_DTYPE_BF16), torc_to_dtype(w2, TORC_DTYPE_BF16)),
                                                 TORC_DTYPE_F32), target), NULL, false));
    assert_same(torc_grad(w), torc_grad(w2));
    ok(torc_set_grad(w, NULL));
    ok(torc_set_grad(w2, NULL));
    const uint64_t m1 = bytes_in_use();
    // No grad: a tensor that does not require grad and a slice of a parameter are not cached
    // (PyTorch caches leaves that require grad and are not views).
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    torc_no_grad_begin();
    torc_scope_push();
    torc_tensor *yp = torc_matmul(x, plain), *ys = torc_matmul(x, torc_narrow(wide, 1, 0, 16));
    ck_assert(yp && ys);
    torc_scope_pop();
    ck_assert_uint_eq(bytes_in_use(), m1);
    torc_no_grad_end();
    ok(torc_autocast_end());
    torc_scope_pop();
}
END_TEST

static void *cache_then_exit(void *arg) {
    torc_tensor *w = arg;
    torc_scope_push();
    torc_tensor *x = torc_keep(rnd(2, 64, TORC_DTYPE_BF16, 54));  // owned here: no scope encloses
    torc_scope_pop();
    bool done = torc_autocast_begin(TORC_DTYPE_BF16) == TORC_OK;
    torc_no_grad_begin();
    torc_tensor *y = torc_matmul(x, w);  // outside any scope: the caller owns y, the cache its cast
    done = done && y != NULL;
    torc_no_grad_end();
    torc_release(y);
    torc_release(x);
    return done ? w : NULL;  // exits inside the region: its casts go at thread exit
}

START_TEST(cache_freed_at_thread_exit) {
    torc_scope_push();
    torc_tensor *w = torc_parameter(rnd(64, 16, TORC_DTYPE_F32, 55));
    const uint64_t m0 = bytes_in_use();
    pthread_t th;
    void *res = NULL;
    ck_assert_int_eq(pthread_create(&th, NULL, cache_then_exit, w), 0);
    ck_assert_int_eq(pthread_join(th, &res), 0);
    ck_assert_ptr_eq(res, w);
    ck_assert_uint_eq(bytes_in_use(), m0);
    torc_scope_pop();
}
END_TEST

// torc_gpt_generate inside the caller's region: every token after the first reuses the casts of the
// blocks' weights and of the tied head's wte^T, and the text and logits are those of the uncached
// path (the same model with requires_grad off, which autocast does not cache), bit for bit.
static void gpt_run(torc_gpt *m, torc_tensor *prompt, int64_t *tokens, size_t nbytes, torc_tensor **logits) {
    torc_generator *g = torc_generator_new(56);
    torc_scope_push();
    torc_tensor *out = torc_gpt_generate(m, prompt, 40, 1.0, 0, g);  // past the window of 32
    ck_assert_msg(out != NULL, "%s", torc_last_error());
    ok(torc_copy_to_host(out, tokens, nbytes));
    torc_scope_pop();
    torc_generator_free(g);
    torc_no_grad_begin();
    torc_scope_push();
    torc_tensor *lg = NULL;
    ok(torc_gpt_forward(m, prompt, NULL, NULL, &lg, NULL));
    *logits = torc_keep(torc_to_dtype(lg, TORC_DTYPE_F32));  // to the caller's scope; the rest goes
    torc_scope_pop();
    torc_no_grad_end();
}

START_TEST(cache_serves_gpt_generate) {
    torc_scope_push();
    const torc_gpt_config cfg = {96, 128, 32, 2, 2, 64, 0.0, true};
    torc_generator *g = torc_generator_new(57);
    torc_gpt *m = torc_gpt_new(&cfg, g);
    torc_generator_free(g);
    ck_assert_msg(m != NULL, "%s", torc_last_error());
    torc_tensor *prompt = torc_tensor_from((int64_t[]){5, 17, 3, 60, 2, 9, 1, 33, 70, 4}, TORC_SHAPE(2, 5), TORC_DTYPE_I64);
    // The weights matmuls read: each block's four and wte (the head's, transposed), and the four
    // linears' biases (cast to the matmul's bf16 result, torc_linear).
    int64_t cast_elems = 0;
    for (int i = 0; i < torc_gpt_param_count(m); i++) {
        const char *name = torc_gpt_param_name(m, i);
        if (strstr(name, "c_attn.") || strstr(name, "c_proj.") || strstr(name, "c_fc.") || strstr(name, "wte.weight"))
            cast_elems += torc_numel(torc_gpt_param(m, i));
    }
    int64_t cached[2][45], uncached[2][45];
    torc_tensor *lc, *lu;
    const uint64_t m0 = bytes_in_use();
    ok(torc_autocast_begin(TORC_DTYPE_BF16));
    gpt_run(m, prompt, &cached[0][0], sizeof cached, &lc);
    const uint64_t held = bytes_in_use() - m0 - (uint64_t)torc_nbytes(lc);
    ck_assert_uint_eq(held, (uint64_t)cast_elems * 2);  // one bf16 cast of each, kept
    for (int i = 0; i < torc_gpt_param_count(m); i++) ok(torc_set_requires_grad(torc_gpt_param(m, i), false));
    gpt_run(m, prompt, &uncached[0][0], sizeof uncached, &lu);
    ok(torc_autocast_end());
    ck_assert_uint_eq(bytes_in_use() - m0, (uint64_t)torc_nbytes(lc) + (uint64_t)torc_nbytes(lu));
    ck_assert_int_eq(memcmp(cached, uncached, sizeof cached), 0);
    assert_same(lc, lu);
    torc_scope_pop();
    torc_gpt_free(m);
}
END_TEST


// ---- fp8 ----
START_TEST(fp8_forward_matches_explicit_scaled_mm) {
    torc_scope_push();
    torc_tensor *x = rnd(6, 16, TORC_DTYPE_F32, 11);
    torc_tensor *w = torc_parameter(torc_mul_scalar(rnd(16, 8, TORC_DTYPE_F32, 12), torc_s(0.25)));
    ck_assert_ptr_null(torc_autocast_fp8_scales(w));
    torc_flops_reset();
    ok(torc_autocast_begin(TORC_DTYPE_F8_E4M3FN));
    torc_tensor *y = torc_matmul(x, w);
    torc_tensor *other = torc_matmul(x, torc_transpose(x, 0, 1));  // no parameter: bf16
    torc_tensor *loss = torc_sum(y, TORC_ALL_DIMS, false);
    ok(torc_autocast_end());
    ck_assert_int_eq(dt(y), TORC_DTYPE_BF16);
    ck_assert_int_eq(dt(other), TORC_DTYPE_BF16);
    ck_assert_int_eq(dt(loss), TORC_DTYPE_F32);
    ck_assert_str_eq(torc_grad_fn_name(y), "ScaledMmBackward0");
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, TORC_OP_SCALED_MM, TORC_DTYPE_F8_E4M3FN), 2 * 6 * 8 * 16);
    // First use: each scale is 448 / amax of its tensor.
    double ax, aw;
    ok(torc_item(torc_amax(torc_abs(x), TORC_ALL_DIMS, false), &ax));
    ok(torc_item(torc_amax(torc_abs(w), TORC_ALL_DIMS, false), &aw));
    torc_tensor *sc = torc_autocast_fp8_scales(w);
    ck_assert_ptr_nonnull(sc);
    double s[3];
    for (int i = 0; i < 2; i++) ok(torc_item(torc_select(sc, 0, i), &s[i]));
    ck_assert_double_eq_tol(s[0], 448.0 / ax, 448.0 / ax * 1e-6);
    ck_assert_double_eq_tol(s[1], 448.0 / aw, 448.0 / aw * 1e-6);
    // y is exactly scaled_mm of the explicitly cast operands.
    torc_tensor *s0 = torc_select(sc, 0, 0), *s1 = torc_select(sc, 0, 1);
    torc_tensor *xq = torc_to_fp8_scaled(x, s0, TORC_DTYPE_F8_E4M3FN), *wq = torc_to_fp8_scaled(w, s1, TORC_DTYPE_F8_E4M3FN);
    torc_no_grad_begin();
    torc_tensor *expect = torc_scaled_mm(xq, wq, torc_reciprocal(s0), torc_reciprocal(s1), TORC_DTYPE_BF16, NULL, NULL);
    torc_no_grad_end();
    assert_same(y, expect);
    // Backward: the output's gradient (ones) goes to e5m2 with scale 57344 / 1; dW = xq^T @ gq.
    ok(torc_backward(loss, NULL, false));
    torc_tensor *gw = torc_grad(w);
    ck_assert_int_eq(dt(gw), TORC_DTYPE_F32);
    sc = torc_autocast_fp8_scales(w);
    double sg;
    ok(torc_item(torc_select(sc, 0, 2), &sg));
    ck_assert_double_eq(sg, 57344.0);
    torc_tensor *gq = torc_to_fp8_scaled(torc_ones(TORC_SHAPE(6, 8), TORC_DTYPE_F32), torc_select(sc, 0, 2),
                                         TORC_DTYPE_F8_E5M2);
    torc_tensor *ginv = torc_reciprocal(torc_select(sc, 0, 2));
    assert_same(gw, torc_scaled_mm(torc_transpose(xq, 0, 1), gq, torc_reciprocal(s0), ginv, TORC_DTYPE_F32, NULL, NULL));
    // x does not require grad, so only dW ran: its FLOPs count in the backward phase, in e4m3
    // (its first operand is xq^T).
    ck_assert_uint_eq(torc_flops(TORC_PHASE_BACKWARD, TORC_OP_SCALED_MM, TORC_DTYPE_F8_E4M3FN), 2 * 6 * 8 * 16);
    // The amax history's first row holds this step's amaxes.
    torc_tensor *h = torc_autocast_fp8_amax_history(w);
    tu_assert_shape(h, 1024, 3);
    double h0, h1, h2;
    ok(torc_item(torc_select(torc_select(h, 0, 0), 0, 0), &h0));
    ok(torc_item(torc_select(torc_select(h, 0, 0), 0, 1), &h1));
    ok(torc_item(torc_select(torc_select(h, 0, 0), 0, 2), &h2));
    ck_assert_double_eq(h0, ax);
    ck_assert_double_eq(h1, aw);
    ck_assert_double_eq(h2, 1.0);
    torc_scope_pop();
}
END_TEST

START_TEST(fp8_delayed_scaling_and_input_grads) {
    torc_scope_push();
    ok(torc_autocast_set_fp8_recipe(4, 1));
    torc_tensor *w = torc_parameter(rnd(8, 4, TORC_DTYPE_F32, 13));
    torc_tensor *x1 = rnd(3, 8, TORC_DTYPE_F32, 14);
    torc_tensor *x2 = torc_mul_scalar(rnd(3, 8, TORC_DTYPE_F32, 15), torc_s(10.0));
    torc_set_requires_grad(x2, true);
    ok(torc_autocast_begin(TORC_DTYPE_F8_E4M3FN));
    torc_tensor *y1 = torc_matmul(x1, w);  // step 1: scales from the current amaxes
    torc_tensor *y2 = torc_matmul(x2, w);  // step 2: scales from the history (step 1's amaxes)
    ok(torc_autocast_end());
    ck_assert(y1 && y2);
    double a1, s0;
    ok(torc_item(torc_amax(torc_abs(x1), TORC_ALL_DIMS, false), &a1));
    torc_tensor *sc = torc_autocast_fp8_scales(w);
    ok(torc_item(torc_select(sc, 0, 0), &s0));
    ck_assert_double_eq_tol(s0, 448.0 / a1 / 2.0, s0 * 1e-6);  // margin 1 halves it
    tu_assert_shape(torc_autocast_fp8_amax_history(w), 4, 3);
    // x2 is 10x larger than the scale expects: its values saturate at 448 / s0, and the result
    // is still finite; the input's gradient arrives in x2's dtype.
    ok(torc_backward(torc_sum(y2, TORC_ALL_DIMS, false), NULL, false));
    torc_tensor *gx = torc_grad(x2);
    ck_assert_int_eq(dt(gx), TORC_DTYPE_F32);
    tu_assert_shape(gx, 3, 8);
    // dx = ones @ w^T: every row is the row sums of w, within fp8 precision.
    torc_tensor *rows = torc_sum(w, TORC_DIMS(1), false);
    double *g = tu_values(gx), *r = tu_values(rows);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 8; k++)
            ck_assert_msg(fabs(g[i * 8 + k] - r[k]) <= 0.15 * fabs(r[k]) + 0.05, "dx[%d][%d] = %g, expected ~%g", i, k,
                          g[i * 8 + k], r[k]);
    free(g);
    free(r);
    ok(torc_autocast_set_fp8_recipe(1024, 0));
    ck_assert_int_eq(torc_autocast_set_fp8_recipe(0, 0), TORC_ERR_INVALID_ARG);
    torc_scope_pop();
}
END_TEST

START_TEST(fp8_training_a_linear_layer_converges) {
    // y = x @ w_true learned by a 16x4 Linear under fp8 autocast with SGD written out.
    torc_scope_push();
    torc_tensor *w_true = rnd(16, 4, TORC_DTYPE_F32, 16);
    torc_tensor *w = torc_parameter(torc_zeros(TORC_SHAPE(16, 4), TORC_DTYPE_F32));
    torc_generator *gen = torc_generator_new(17);
    double first = 0, last = 0;
    for (int step = 0; step < 60; step++) {
        torc_scope_push();
        torc_tensor *x = torc_randn(TORC_SHAPE(32, 16), TORC_DTYPE_F32, gen);
        torc_tensor *target = torc_matmul(x, w_true);
        ok(torc_autocast_begin(TORC_DTYPE_F8_E4M3FN));
        torc_tensor *loss = torc_mse_loss(torc_matmul(x, w), target);
        ok(torc_autocast_end());
        ok(torc_backward(loss, NULL, false));
        torc_no_grad_begin();
        ok(torc_add_scaled_(w, torc_grad(w), torc_s(-0.1)));
        torc_no_grad_end();
        ok(torc_set_grad(w, NULL));
        ok(torc_item(loss, step ? &last : &first));
        torc_scope_pop();
    }
    torc_generator_free(gen);
    ck_assert_msg(last < first * 0.05, "fp8 training did not converge: %g -> %g", first, last);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("autocast");
    TCase *tc = tcase_create("autocast");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, policy_table_bf16);
    tcase_add_test(tc, policy_table_f16);
    tcase_add_test(tc, policy_on_f32_inputs);
    tcase_add_test(tc, integers_and_f64_are_never_cast);
    tcase_add_test(tc, scopes_nest_and_disable);
    tcase_add_test(tc, scopes_are_per_thread);
    tcase_add_test(tc, gradients_reach_f32_params_as_f32);
    tcase_add_test(tc, matmul_casts_fused_bit_for_bit);
    tcase_add_test(tc, backward_inside_the_scope_and_modules);
    tcase_add_test(tc, cache_matmul_bit_for_bit_and_reused);
    tcase_add_test(tc, cache_follows_inplace_writes);
    tcase_add_test(tc, cache_lives_until_the_outermost_end);
    tcase_add_test(tc, cache_holds_parameters_only_and_not_in_grad_mode);
    tcase_add_test(tc, cache_freed_at_thread_exit);
    tcase_add_test(tc, cache_serves_gpt_generate);
    tcase_add_test(tc, fp8_forward_matches_explicit_scaled_mm);
    tcase_add_test(tc, fp8_delayed_scaling_and_input_grads);
    tcase_add_test(tc, fp8_training_a_linear_layer_converges);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
