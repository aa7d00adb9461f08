// tests/test_adam_list.c — the list ops of backend ABI 2.6: torc_adam_step_list_
// (TORC_OP_ADAM_STEP_LIST) against torc_adam_step_ on each parameter, bit for bit, on every host
// backend, dtype and flag set, with mixed step counts, mixed dtypes and strided parameters; its
// checks; and gradient clipping's norms as one NORM_LIST against one torc_norm per gradient.
#include "testutil.h"

static const char *const backends[] = {"reference", "onednn"};
static const torc_dtype dtypes[] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F16, TORC_DTYPE_F64};
static const unsigned flag_sets[] = {0, TORC_ADAM_DECOUPLED, TORC_ADAM_AMSGRAD | TORC_ADAM_MAXIMIZE,
                                     TORC_ADAM_DECOUPLED | TORC_ADAM_AMSGRAD};
#define N_BACKENDS 2
#define N_DTYPES 4
#define N_FLAGS 4
enum { NP = 5 };  // parameters: large dense, small, strided (transposed), one element, empty

// Gradient-like values spanning e^-6 .. e^6 with exact zeros, in dt.
static torc_tensor *values(const int64_t *shape, int nd, torc_dtype dt, torc_generator *g) {
    torc_tensor *x = torc_randn(nd, shape, TORC_DTYPE_F32, g), *s = torc_randn(nd, shape, TORC_DTYPE_F32, g);
    torc_tensor *keep = torc_gt(torc_randn(nd, shape, TORC_DTYPE_F32, g), torc_scalar_tensor(-1.5, TORC_DTYPE_F32));
    torc_tensor *r = torc_to_dtype(torc_mul(torc_mul(x, torc_exp(torc_mul_scalar(s, torc_s(2.0)))), keep), dt);
    ck_assert_msg(r != NULL, "%s", torc_last_error());
    return r;
}

// The NP parameters (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq) of dtype dt, twice: the
// same values in two sets of tensors. Parameter 2 and its state are transposed views.
static void make_set(torc_dtype dt, torc_tensor *set[2][5][NP]) {
    static const int64_t shapes[NP][2] = {{257, 300}, {3, 7}, {33, 40}, {1, 1}, {0, 4}};
    torc_generator *g = torc_generator_new(7);
    for (int i = 0; i < NP; i++)
        for (int k = 0; k < 5; k++) {
            torc_tensor *v = values(shapes[i], 2, dt, g);
            if (k == 3 || k == 4) v = torc_abs(v);  // second moments are >= 0
            for (int c = 0; c < 2; c++) {
                torc_tensor *t = torc_clone(v);
                if (i == 2) t = torc_transpose(torc_contiguous(torc_transpose(t, 0, 1)), 0, 1);
                ck_assert_msg(t != NULL, "%s", torc_last_error());
                set[c][k][i] = t;
            }
        }
    torc_generator_free(g);
}

static void assert_same_bits(torc_tensor *a, torc_tensor *b, const char *what, int i) {
    const int64_t n = torc_numel(a);
    ck_assert_int_eq(torc_numel(b), n);
    double *x = tu_values(a), *y = tu_values(b);
    for (int64_t e = 0; e < n; e++)
        if (memcmp(&x[e], &y[e], sizeof x[e]))
            ck_abort_msg("%s[%d]: element %lld is %.17g listed, %.17g alone", what, i, (long long)e, x[e], y[e]);
    free(x), free(y);
}

static torc_device *use_backend(const char *name) {
    torc_device *d = torc_device_get(name);
    if (d) ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    torc_clear_error();
    return d;
}

// ---- bit identity ----
START_TEST(list_step_matches_each_parameter_alone_bit_for_bit) {
    const int b = _i / (N_DTYPES * N_FLAGS), d = _i / N_FLAGS % N_DTYPES, f = _i % N_FLAGS;
    if (!use_backend(backends[b])) return;  // a build without onednn
    const torc_dtype dt = dtypes[d];
    const unsigned flags = flag_sets[f];
    const bool ams = flags & TORC_ADAM_AMSGRAD;
    torc_scope_push();
    torc_no_grad_begin();
    torc_tensor *set[2][5][NP];
    make_set(dt, set);
    const int64_t steps[NP] = {1, 4, 2, 7, 3};
    const double wd = flags & TORC_ADAM_DECOUPLED ? 0.1 : 0.05;
    for (int round = 0; round < 3; round++) {
        int64_t st[NP];
        for (int i = 0; i < NP; i++) st[i] = steps[i] + round;
        for (int i = 0; i < NP; i++)
            ck_assert_msg(torc_adam_step_(set[1][0][i], set[1][1][i], set[1][2][i], set[1][3][i],
                                          ams ? set[1][4][i] : NULL, 0.01, 0.9, 0.999, 1e-8, wd, st[i], flags) == TORC_OK,
                          "%s", torc_last_error());
        ck_assert_msg(torc_adam_step_list_(NP, set[0][0], set[0][1], set[0][2], set[0][3], ams ? set[0][4] : NULL, st,
                                           0.01, 0.9, 0.999, 1e-8, wd, flags) == TORC_OK,
                      "%s", torc_last_error());
    }
    static const char *const what[5] = {"param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    for (int i = 0; i < NP; i++)
        for (int k = 0; k < (ams ? 5 : 4); k++) assert_same_bits(set[0][k][i], set[1][k][i], what[k], i);
    torc_no_grad_end();
    torc_scope_pop();
    torc_set_default_device(NULL);
}
END_TEST

// Three dtypes in one list: one op per dtype group, each parameter's bits as alone.
START_TEST(mixed_dtypes_run_as_groups) {
    if (!use_backend(backends[_i])) return;
    torc_scope_push();
    torc_no_grad_begin();
    torc_tensor *set[3][2][5][NP];
    for (int d = 0; d < 3; d++) make_set(dtypes[d], set[d]);
    torc_tensor *l[2][5][3 * NP];  // interleaved: f32, bf16, f16, f32, ...
    int64_t steps[3 * NP];
    for (int i = 0; i < 3 * NP; i++) {
        steps[i] = 1 + i % 4;
        for (int c = 0; c < 2; c++)
            for (int k = 0; k < 5; k++) l[c][k][i] = set[i % 3][c][k][i / 3];
    }
    torc_op_trace_start();
    ck_assert_msg(torc_adam_step_list_(3 * NP, l[0][0], l[0][1], l[0][2], l[0][3], l[0][4], steps, 0.01, 0.9, 0.999,
                                       1e-8, 0.1, TORC_ADAM_DECOUPLED | TORC_ADAM_AMSGRAD) == TORC_OK,
                  "%s", torc_last_error());
    torc_op_trace_stop();
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADAM_STEP_LIST, -1, -1, -1), 3);  // once a group (onednn: f16 declined)
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADAM_STEP, -1, -1, -1), 0);
    for (int i = 0; i < 3 * NP; i++)
        ck_assert_int_eq(torc_adam_step_(l[1][0][i], l[1][1][i], l[1][2][i], l[1][3][i], l[1][4][i], 0.01, 0.9, 0.999,
                                         1e-8, 0.1, steps[i], TORC_ADAM_DECOUPLED | TORC_ADAM_AMSGRAD),
                         TORC_OK);
    for (int i = 0; i < 3 * NP; i++)
        for (int k = 0; k < 5; k++) assert_same_bits(l[0][k][i], l[1][k][i], "mixed", i);
    torc_no_grad_end();
    torc_scope_pop();
    torc_set_default_device(NULL);
}
END_TEST

#ifdef TORC_TEST_ONEDNN
// onednn takes the dense float32 list whole, at any size (its loop has the reference's bits), and
// declines one with a strided parameter: the reference then runs the list, still one op.
START_TEST(onednn_takes_dense_lists_and_declines_strided_ones) {
    ck_assert_ptr_nonnull(use_backend("onednn"));
    torc_scope_push();
    torc_no_grad_begin();
    torc_tensor *set[2][5][NP];
    make_set(TORC_DTYPE_F32, set);
    const int64_t steps[NP] = {1, 1, 1, 1, 1};
    torc_op_trace_start();
    ck_assert_int_eq(torc_adam_step_list_(2, set[0][0], set[0][1], set[0][2], set[0][3], NULL, steps, 0.01, 0.9, 0.999,
                                          1e-8, 0, 0), TORC_OK);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADAM_STEP_LIST, -1, -1, 0), 1);
    ck_assert_int_eq(torc_adam_step_list_(3, set[1][0], set[1][1], set[1][2], set[1][3], NULL, steps, 0.01, 0.9, 0.999,
                                          1e-8, 0, 0), TORC_OK);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADAM_STEP_LIST, -1, -1, 1), 1);  // declined by onednn
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADAM_STEP, -1, -1, -1), 0);
    torc_op_trace_stop();
    torc_no_grad_end();
    torc_scope_pop();
    torc_set_default_device(NULL);
}
END_TEST
#endif

// ---- the checks: nothing written on an error ----
START_TEST(list_step_checks_every_parameter_and_writes_nothing_on_error) {
    torc_scope_push();
    torc_no_grad_begin();
    torc_tensor *p[2], *g[2], *m[2], *v[2];
    for (int i = 0; i < 2; i++) {
        p[i] = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32), g[i] = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32);
        m[i] = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F32), v[i] = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    }
    const uint64_t pv = torc_version(p[0]);
    int64_t steps[2] = {1, 0};
    ck_assert_int_eq(torc_adam_step_list_(0, NULL, NULL, NULL, NULL, NULL, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 0), TORC_OK);
    ck_assert_int_eq(torc_adam_step_list_(2, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 0), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "torc_adam_step_list_: steps[1] is 0; the first step is 1");
    steps[1] = 1;
    torc_clear_error();  // a NULL argument keeps a pending error (the failed call that made the NULL)
    ck_assert_int_eq(torc_adam_step_list_(2, p, NULL, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 0), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "torc_adam_step_list_: grads is NULL");
    ck_assert_int_eq(torc_adam_step_list_(2, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, TORC_ADAM_AMSGRAD),
                     TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "torc_adam_step_list_: amsgrad needs max_exp_avg_sqs");
    ck_assert_int_eq(torc_adam_step_list_(2, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 16), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "unknown flags 0x10");
    torc_tensor *g1 = g[1];
    g[1] = NULL;
    torc_clear_error();
    ck_assert_int_eq(torc_adam_step_list_(2, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 0), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "torc_adam_step_list_: grads[1] is NULL");
    g[1] = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F64);
    ck_assert_int_eq(torc_adam_step_list_(2, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 0), TORC_ERR_DTYPE);
    tu_assert_error(TORC_ERR_DTYPE, "torc_adam_step_list_: grads[1] has dtype f64 but params[1] has f32");
    g[1] = torc_zeros(TORC_SHAPE(3, 2), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_adam_step_list_(2, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 0), TORC_ERR_SHAPE);
    tu_assert_error(TORC_ERR_SHAPE, "torc_adam_step_list_: grads[1] has shape [3, 2] but params[1] has [2, 3]");
    g[1] = g1;
    // two parameters' tensors sharing memory: the same exp_avg twice, then param 1 a view of exp_avg 0
    torc_tensor *m1 = m[1];
    m[1] = m[0];
    ck_assert_int_eq(torc_adam_step_list_(2, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 0), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "the tensors of params[0] and params[1] share memory");
    m[1] = m1;
    torc_tensor *p1 = p[1];
    p[1] = torc_reshape(torc_narrow(torc_reshape(m[0], TORC_SHAPE(6)), 0, 0, 6), TORC_SHAPE(2, 3));
    ck_assert_int_eq(torc_adam_step_list_(2, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 0), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "share memory");
    p[1] = p1;
    // autograd: a leaf requiring grad, with grad mode on
    torc_no_grad_end();
    ck_assert_int_eq(torc_set_requires_grad(p[1], true), TORC_OK);
    ck_assert_int_eq(torc_adam_step_list_(2, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 0), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "a leaf Variable that requires grad is being used in an in-place operation.");
    // nothing written by any of the above
    ck_assert_uint_eq(torc_version(p[0]), pv);
    for (int i = 0; i < 2; i++) {
        tu_assert_values(p[i], TU_ARR(1, 1, 1, 1, 1, 1), 0);
        tu_assert_values(m[i], TU_ARR(0, 0, 0, 0, 0, 0), 0);
    }
    torc_no_grad_begin();
    ck_assert_int_eq(torc_adam_step_list_(2, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 0), TORC_OK);
    torc_no_grad_end();
    ck_assert_uint_gt(torc_version(p[0]), pv);
    for (int i = 0; i < 2; i++) tu_assert_values(p[i], TU_ARR(0.9, 0.9, 0.9, 0.9, 0.9, 0.9), 1e-6);
    torc_scope_pop();
}
END_TEST

// The list form of the single-op API is refused: its operands are behind params.ext.
START_TEST(single_op_api_refuses_list_ops) {
    torc_scope_push();
    torc_tensor *x = torc_zeros(TORC_SHAPE(2), TORC_DTYPE_F32);
    torc_op_call call = {.code = TORC_OP_ADAM_STEP_LIST, .n_in = 0, .n_out = 1, .out = {x}};
    ck_assert_int_eq(torc_run_op(torc_default_device(), &call, TORC_RUN_NATIVE), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "takes a list of ops");
    torc_scope_pop();
}
END_TEST

// ---- gradient clipping: the per-tensor norms as one NORM_LIST ----
// Sizes below and above onednn's TORC_ONEDNN_MIN_WORK (4096), each entry with the bits of
// torc_norm alone (so each on the backend that would run it alone), and the total PyTorch's.
START_TEST(total_norm_matches_one_norm_per_tensor_bit_for_bit) {
    const int b = _i / 3;
    static const torc_dtype dts[3] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F64};
    const torc_dtype dt = dts[_i % 3];
    if (!use_backend(backends[b])) return;
    static const double orders[] = {2.0, 1.0, 3.5, 0.0};
    torc_scope_push();
    torc_generator *g = torc_generator_new(3);
    static const int64_t shapes[6][2] = {{257, 300}, {3, 7}, {64, 100}, {1, 768}, {0, 3}, {300, 257}};
    torc_tensor *t[6];
    for (int i = 0; i < 6; i++) t[i] = values(shapes[i], 2, dt, g);
    t[5] = torc_transpose(t[5], 0, 1);  // strided
    torc_generator_free(g);
    for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
        torc_tensor *norms[6];
        for (int i = 0; i < 6; i++) norms[i] = torc_norm(t[i], orders[o], TORC_ALL_DIMS, false);
        torc_tensor *want = torc_norm(torc_stack(6, norms, 0), orders[o], TORC_ALL_DIMS, false);
        torc_op_trace_start();
        torc_tensor *got = torc_get_total_norm(6, t, orders[o], false);
        torc_op_trace_stop();
        ck_assert_msg(want && got, "%s", torc_last_error());
        ck_assert_uint_ge(torc_op_trace_count(TORC_OP_NORM_LIST, -1, -1, -1), 1);
        ck_assert_uint_eq(torc_op_trace_count(TORC_OP_NORM, -1, -1, -1), 1);  // the norm of the norms only
        assert_same_bits(got, want, "total norm", (int)o);
    }
    // inf keeps one norm per tensor (and refuses the empty one, as PyTorch)
    torc_tensor *got = torc_get_total_norm(4, t, INFINITY, false);
    ck_assert_msg(got != NULL, "%s", torc_last_error());
    torc_scope_pop();
    torc_set_default_device(NULL);
}
END_TEST

// ---- the adamw plugin through torc_optimizer_step ----
// The adam plugins set TORC_OPTIM_WHOLE_GROUP (optimizer ABI 1.3): a step is one list op per
// dtype group, two steps give each parameter the bits of torc_adam_step_ run alone (AdamW's
// defaults), and the state the list step creates counts as optimizer state (exp_avg and
// exp_avg_sq: 2 x the parameters' bytes).
START_TEST(adamw_plugin_steps_a_group_with_one_list_op) {
    if (!use_backend(backends[_i])) return;
    torc_scope_push();
    torc_tensor *set[2][2][5][NP];  // [dtype f32, bf16][copy][param, grad, ...][i]
    make_set(TORC_DTYPE_F32, set[0]);
    make_set(TORC_DTYPE_BF16, set[1]);
    torc_tensor *params[2 * NP];
    int64_t bytes = 0;
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < NP; i++) {
            torc_tensor *p = torc_contiguous(set[d][0][0][i]);  // a leaf that requires grad
            ck_assert_msg(p && torc_set_requires_grad(p, true) == TORC_OK, "%s", torc_last_error());
            ck_assert_int_eq(torc_set_grad(p, set[d][0][1][i]), TORC_OK);
            params[d * NP + i] = p;
            bytes += torc_numel(p) * (int64_t)torc_dtype_size(torc_get_dtype(p));
        }
    torc_optimizer *opt = torc_optimizer_new("adamw", 2 * NP, params, "lr=0.01");
    ck_assert_msg(opt != NULL, "%s", torc_last_error());
    torc_memory_stats before, after;
    ck_assert_int_eq(torc_memory_stats_get(torc_default_device(), &before), TORC_OK);
    torc_op_trace_start();
    for (int k = 0; k < 2; k++) ck_assert_msg(torc_optimizer_step(opt) == TORC_OK, "%s", torc_last_error());
    torc_op_trace_stop();
    ck_assert_int_eq(torc_memory_stats_get(torc_default_device(), &after), TORC_OK);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADAM_STEP_LIST, -1, -1, -1), 4);  // 2 dtypes x 2 steps
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADAM_STEP, -1, -1, -1), 0);
    ck_assert_uint_eq(after.in_use[TORC_MEM_OPTIMIZER_STATE] - before.in_use[TORC_MEM_OPTIMIZER_STATE], (uint64_t)(2 * bytes));
    torc_no_grad_begin();
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < NP; i++) {
            torc_tensor *p = set[d][1][0][i], *m = torc_zeros_like(p), *v = torc_zeros_like(p);
            for (int64_t k = 1; k <= 2; k++)
                ck_assert_msg(torc_adam_step_(p, set[d][1][1][i], m, v, NULL, 0.01, 0.9, 0.999, 1e-8, 1e-2, k,
                                              TORC_ADAM_DECOUPLED) == TORC_OK,
                              "%s", torc_last_error());
            assert_same_bits(params[d * NP + i], p, "param", d * NP + i);
        }
    torc_no_grad_end();
    torc_optimizer_free(opt);
    torc_scope_pop();
    torc_set_default_device(NULL);
}
END_TEST

int main(void) {
    Suite *s = suite_create("adam_list");
    TCase *tc = tcase_create("bits");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, list_step_matches_each_parameter_alone_bit_for_bit, 0, N_BACKENDS * N_DTYPES * N_FLAGS);
    tcase_add_loop_test(tc, mixed_dtypes_run_as_groups, 0, N_BACKENDS);
    tcase_add_loop_test(tc, adamw_plugin_steps_a_group_with_one_list_op, 0, N_BACKENDS);
    tcase_add_loop_test(tc, total_norm_matches_one_norm_per_tensor_bit_for_bit, 0, N_BACKENDS * 3);
#ifdef TORC_TEST_ONEDNN
    tcase_add_test(tc, onednn_takes_dense_lists_and_declines_strided_ones);
#endif
    suite_add_tcase(s, tc);
    TCase *fe = tcase_create("frontend");
    tcase_add_test(fe, list_step_checks_every_parameter_and_writes_nothing_on_error);
    tcase_add_test(fe, single_op_api_refuses_list_ops);
    suite_add_tcase(s, fe);
    return tu_run(s);
}
