// tests/test_nn.c — parameters, initialisers, modules (Linear, Sequential, the course's
// Cruncher), losses, the FLOP and memory accounting of a training step, and a small MLP's
// gradients against PyTorch's (tests/golden/autograd_mlp.txt).
#include <stdio.h>

#include "testutil.h"

static void ok(torc_status st) { ck_assert_msg(st == TORC_OK, "status %d: %s", st, torc_last_error()); }

static double item(torc_tensor *t) {
    double v;
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    ok(torc_item(t, &v));
    return v;
}

// ---- parameters and initialisers ----
START_TEST(parameter_is_a_tagged_leaf) {
    torc_device *dev = torc_default_device();
    torc_memory_stats m0, m1;
    torc_scope_push();
    ok(torc_memory_stats_get(dev, &m0));
    torc_tensor *t = torc_ones(TORC_SHAPE(4, 8), TORC_DTYPE_F32);
    torc_tensor *p = torc_parameter(t);
    ck_assert(torc_requires_grad(p) && torc_is_leaf(p) && !torc_requires_grad(t));
    ck_assert(torc_same_storage(p, t));  // t covers its storage: shared, as nn.Parameter(t)
    ok(torc_memory_stats_get(dev, &m1));
    ck_assert_uint_eq(m1.in_use[TORC_MEM_PARAMETER] - m0.in_use[TORC_MEM_PARAMETER], 128);
    ck_assert_uint_eq(m1.in_use[TORC_MEM_ACTIVATION], m0.in_use[TORC_MEM_ACTIVATION]);
    // A view of part of a storage becomes a copy, so the accounting stays exact.
    torc_tensor *q = torc_parameter(torc_select(torc_zeros(TORC_SHAPE(3, 5), TORC_DTYPE_F32), 0, 1));
    ck_assert(!torc_same_storage(q, t) && torc_is_contiguous(q));
    tu_assert_shape(q, 5);
    ok(torc_memory_stats_get(dev, &m1));
    ck_assert_uint_eq(m1.in_use[TORC_MEM_PARAMETER] - m0.in_use[TORC_MEM_PARAMETER], 128 + 20);
    ck_assert_ptr_null(torc_parameter(torc_ones(TORC_SHAPE(2), TORC_DTYPE_I64)));
    tu_assert_error(TORC_ERR_AUTOGRAD, "only Tensors of floating point dtype can require gradients");
    torc_scope_pop();
}
END_TEST

// The standard deviation of x @ w for x ~ N(0, 1) (B, d) and w (d, 64).
static double matmul_std(int64_t d, bool scaled, torc_generator *gen) {
    torc_scope_push();
    torc_tensor *x = torc_randn(TORC_SHAPE(64, d), TORC_DTYPE_F32, gen);
    torc_tensor *w = torc_empty(TORC_SHAPE(d, 64), TORC_DTYPE_F32);
    if (scaled) ok(torc_init_normal_fan_in_(w, d, gen));
    else ok(torc_normal_(w, 0, 1, gen));
    double s = item(torc_std(torc_matmul(x, w), TORC_ALL_DIMS, 1.0, false));
    torc_scope_pop();
    return s;
}

START_TEST(course_matmul_growth_with_and_without_scaling) {
    // Without scaling each output sums d products of unit variance: std ~ sqrt(d). Scaling
    // w by 1/sqrt(fan_in) keeps it of order 1 at every width.
    torc_generator *gen = torc_generator_new(42);
    const int64_t dims[3] = {16, 256, 4096};
    for (int i = 0; i < 3; i++) {
        const double raw = matmul_std(dims[i], false, gen), scaled = matmul_std(dims[i], true, gen);
        const double root = sqrt((double)dims[i]);
        ck_assert_msg(fabs(raw / root - 1) < 0.1, "d=%lld: std %g, expected ~%g", (long long)dims[i], raw, root);
        ck_assert_msg(fabs(scaled - 1) < 0.1, "d=%lld: scaled std %g, expected ~1", (long long)dims[i], scaled);
    }
    torc_scope_push();
    ck_assert_int_eq(torc_init_normal_fan_in_(torc_empty(TORC_SHAPE(2), TORC_DTYPE_F32), 0, gen), TORC_ERR_INVALID_ARG);
    torc_scope_pop();
    torc_generator_free(gen);
}
END_TEST

START_TEST(trunc_normal_stays_in_bounds_on_a_parameter) {
    torc_scope_push();
    torc_generator *gen = torc_generator_new(3);
    torc_tensor *p = torc_parameter(torc_empty(TORC_SHAPE(100, 100), TORC_DTYPE_F32));
    ok(torc_trunc_normal_(p, 0.0, 1.0, -2.0, 2.0, gen));  // runs under no_grad: fine on a leaf
    ck_assert(item(torc_amax(p, TORC_ALL_DIMS, false)) <= 2.0);
    ck_assert(item(torc_amin(p, TORC_ALL_DIMS, false)) >= -2.0);
    ck_assert(fabs(item(torc_mean(p, TORC_ALL_DIMS, false))) < 0.05);
    // The std of N(0, 1) truncated to [-2, 2] is 0.8796.
    ck_assert(fabs(item(torc_std(p, TORC_ALL_DIMS, 1, false)) - 0.8796) < 0.02);
    torc_generator_free(gen);
    torc_scope_pop();
}
END_TEST

// ---- modules ----
START_TEST(linear_shapes_names_and_forward) {
    torc_scope_push();
    torc_generator *gen = torc_generator_new(1);
    torc_module *lin = torc_linear_new(4, 3, true, TORC_DTYPE_F32, gen);
    ck_assert_ptr_nonnull(lin);
    ck_assert_str_eq(torc_module_type(lin), "Linear");
    ck_assert_int_eq(torc_module_param_count(lin), 2);
    ck_assert_str_eq(torc_module_param_name(lin, 0), "weight");
    ck_assert_str_eq(torc_module_param_name(lin, 1), "bias");
    torc_tensor *w = torc_module_get_parameter(lin, "weight"), *b = torc_module_get_parameter(lin, "bias");
    tu_assert_shape(w, 4, 3);  // (in, out)
    tu_assert_shape(b, 3);
    ck_assert(torc_requires_grad(w) && torc_is_leaf(w));
    ck_assert(item(torc_amax(torc_abs(b), TORC_ALL_DIMS, false)) <= 0.5);  // uniform(-1/sqrt(4), 1/sqrt(4))
    ck_assert_int_eq(torc_module_num_parameters(lin), 15);
    torc_tensor *x = torc_ones(TORC_SHAPE(2, 4), TORC_DTYPE_F32);
    torc_tensor *y = torc_module_forward(lin, x);
    tu_assert_shape(y, 2, 3);
    // y = x @ w + b, as torc_linear (F.linear) gives it; its operands must be there
    torc_tensor *expect = torc_add(torc_matmul(x, w), b);
    ck_assert(item(torc_amax(torc_abs(torc_sub(y, expect)), TORC_ALL_DIMS, false)) == 0);
    ck_assert(item(torc_amax(torc_abs(torc_sub(torc_linear(x, w, b), expect)), TORC_ALL_DIMS, false)) == 0);
    ck_assert(item(torc_amax(torc_abs(torc_sub(torc_linear(x, w, NULL), torc_matmul(x, w))), TORC_ALL_DIMS, false)) == 0);
    ck_assert_ptr_null(torc_linear(x, NULL, b));
    ck_assert_int_eq(torc_last_status(), TORC_ERR_INVALID_ARG);
    ck_assert_msg(strstr(torc_last_error(), "linear: weight is NULL"), "%s", torc_last_error());
    ck_assert_ptr_null(torc_linear_new(0, 3, false, TORC_DTYPE_F32, gen));
    ck_assert_ptr_null(torc_linear_new(2, 3, false, TORC_DTYPE_I32, gen));
    torc_module_free(lin);
    torc_generator_free(gen);
    torc_scope_pop();
}
END_TEST

// Under autocast Linear's result has the autocast dtype, as nn.Linear's under torch.autocast: the
// bias is cast too (bf16 + an f32 bias would promote to f32): y = bf16(x @ w) + bf16(b), both
// rounded to bf16; its gradients reach the f32 parameters as f32. fp8 autocast's linear gives bf16.
START_TEST(linear_under_autocast_keeps_its_dtype) {
    torc_scope_push();
    torc_generator *gen = torc_generator_new(3);
    torc_module *lin = torc_linear_new(8, 5, true, TORC_DTYPE_F32, gen);
    torc_tensor *w = torc_module_get_parameter(lin, "weight"), *b = torc_module_get_parameter(lin, "bias");
    torc_tensor *x = torc_randn(TORC_SHAPE(3, 8), TORC_DTYPE_F32, gen);
    const torc_dtype lows[2] = {TORC_DTYPE_BF16, TORC_DTYPE_F16};
    for (int i = 0; i < 2; i++) {
        ok(torc_autocast_begin(lows[i]));
        torc_tensor *y = torc_module_forward(lin, x);
        ok(torc_autocast_end());
        ck_assert_msg(y != NULL, "%s", torc_last_error());
        ck_assert_int_eq(torc_get_dtype(y), lows[i]);
        torc_tensor *expect = torc_add(torc_matmul(torc_to_dtype(x, lows[i]), torc_to_dtype(w, lows[i])),
                                       torc_to_dtype(b, lows[i]));
        ck_assert_int_eq(torc_get_dtype(expect), lows[i]);
        ck_assert(item(torc_amax(torc_abs(torc_sub(torc_to_dtype(y, TORC_DTYPE_F32), torc_to_dtype(expect, TORC_DTYPE_F32))),
                                 TORC_ALL_DIMS, false)) == 0);
        ok(torc_backward(torc_sum(torc_to_dtype(y, TORC_DTYPE_F32), TORC_ALL_DIMS, false), NULL, false));
        ck_assert_int_eq(torc_get_dtype(torc_grad(b)), TORC_DTYPE_F32);
        ck_assert_int_eq(torc_get_dtype(torc_grad(w)), TORC_DTYPE_F32);
        tu_assert_values(torc_grad(b), TU_ARR(3, 3, 3, 3, 3), 0);  // three rows of ones
        ok(torc_module_zero_grad(lin, true));
    }
    ok(torc_autocast_begin(TORC_DTYPE_F8_E4M3FN));
    torc_tensor *y8 = torc_module_forward(lin, x);
    ok(torc_autocast_end());
    ck_assert_msg(y8 != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_get_dtype(y8), TORC_DTYPE_BF16);
    ok(torc_autocast_begin(TORC_DTYPE_F32));  // autocast off: f32 as outside
    torc_tensor *y32 = torc_module_forward(lin, x);
    ok(torc_autocast_end());
    ck_assert_int_eq(torc_get_dtype(y32), TORC_DTYPE_F32);
    torc_module_free(lin);
    torc_generator_free(gen);
    torc_scope_pop();
}
END_TEST

START_TEST(cruncher_names_count_and_forward) {
    torc_scope_push();
    const int64_t D = 16, B = 5;
    const int L = 3;
    torc_module *m = torc_cruncher_new(D, L, TORC_DTYPE_F32, NULL);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(torc_module_param_count(m), L + 1);
    ck_assert_str_eq(torc_module_param_name(m, 0), "layers.0.weight");
    ck_assert_str_eq(torc_module_param_name(m, 1), "layers.1.weight");
    ck_assert_str_eq(torc_module_param_name(m, 2), "layers.2.weight");
    ck_assert_str_eq(torc_module_param_name(m, 3), "final.weight");
    ck_assert_ptr_null(torc_module_param_name(m, 4));
    ck_assert_int_eq(torc_module_num_parameters(m), D * D * L + D);
    tu_assert_shape(torc_module_get_parameter(m, "final.weight"), 16, 1);
    ck_assert_ptr_eq(torc_module_get_parameter(m, "layers.1.weight"), torc_module_param(m, 1));
    ck_assert_str_eq(torc_module_type(torc_module_child(m, "layers")), "Sequential");
    torc_tensor *y = torc_module_forward(m, torc_randn(TORC_SHAPE(B, D), TORC_DTYPE_F32, NULL));
    tu_assert_shape(y, 5);
    ck_assert_ptr_null(torc_module_forward(m, torc_ones(TORC_SHAPE(D), TORC_DTYPE_F32)));
    tu_assert_error(TORC_ERR_SHAPE, "Cruncher: expected x of shape (B, D)");
    torc_module_free(m);
    torc_scope_pop();
}
END_TEST

static torc_tensor *double_forward(torc_module *m, torc_tensor *x, void *user) {
    (void)m, (void)user;
    return torc_mul_scalar(x, torc_s(2.0));
}

START_TEST(sequential_and_custom_modules) {
    torc_scope_push();
    torc_module *seq = torc_sequential_new();
    ok(torc_sequential_append(seq, torc_linear_new(3, 4, true, TORC_DTYPE_F64, NULL)));
    ok(torc_sequential_append(seq, torc_relu_module_new()));
    ok(torc_sequential_append(seq, torc_module_new("Double", double_forward, NULL, NULL)));
    ok(torc_sequential_append(seq, torc_linear_new(4, 2, false, TORC_DTYPE_F64, NULL)));
    ck_assert_int_eq(torc_module_param_count(seq), 3);
    ck_assert_str_eq(torc_module_param_name(seq, 0), "0.weight");
    ck_assert_str_eq(torc_module_param_name(seq, 1), "0.bias");
    ck_assert_str_eq(torc_module_param_name(seq, 2), "3.weight");
    torc_tensor *x = torc_randn(TORC_SHAPE(2, 3), TORC_DTYPE_F64, NULL);
    torc_tensor *y = torc_module_forward(seq, x);
    tu_assert_shape(y, 2, 2);
    torc_module *c0 = torc_module_child(seq, "0"), *c3 = torc_module_child(seq, "3");
    torc_tensor *h = torc_mul_scalar(torc_relu(torc_module_forward(c0, x)), torc_s(2.0));
    ck_assert(item(torc_amax(torc_abs(torc_sub(y, torc_module_forward(c3, h))), TORC_ALL_DIMS, false)) == 0);

    // Registration errors.
    torc_module *blk = torc_module_new("Block", double_forward, NULL, NULL);
    ok(torc_module_register_parameter(blk, "w", torc_parameter(torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32))));
    ck_assert_int_eq(torc_module_register_parameter(blk, "w", torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32)),
                     TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "attribute 'w' already exists");
    ck_assert_int_eq(torc_module_register_parameter(blk, "a.b", torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32)),
                     TORC_ERR_INVALID_ARG);
    ck_assert_int_eq(torc_module_register_module(seq, "4", c0), TORC_ERR_INVALID_ARG);  // already has a parent
    ok(torc_module_register_module(seq, "extra", blk));
    ck_assert_int_eq(torc_module_param_count(seq), 4);
    ck_assert_str_eq(torc_module_param_name(seq, 3), "extra.w");
    ck_assert_int_eq(torc_module_num_parameters(seq), 12 + 4 + 8 + 2);
    torc_module_free(seq);
    torc_scope_pop();
}
END_TEST

START_TEST(zero_grad_clears_or_zeroes) {
    torc_scope_push();
    torc_module *lin = torc_linear_new(3, 2, true, TORC_DTYPE_F32, NULL);
    torc_tensor *x = torc_ones(TORC_SHAPE(4, 3), TORC_DTYPE_F32);
    ok(torc_backward(torc_sum(torc_module_forward(lin, x), TORC_ALL_DIMS, false), NULL, false));
    torc_tensor *b = torc_module_get_parameter(lin, "bias");
    tu_assert_values(torc_grad(b), TU_ARR(4, 4), 0);
    ok(torc_module_zero_grad(lin, false));
    tu_assert_values(torc_grad(b), TU_ARR(0, 0), 0);
    ok(torc_module_zero_grad(lin, true));
    ck_assert_ptr_null(torc_grad(b));
    ck_assert_ptr_null(torc_grad(torc_module_get_parameter(lin, "weight")));
    torc_module_free(lin);
    torc_scope_pop();
}
END_TEST

// ---- losses ----
START_TEST(losses_values_and_errors) {
    torc_scope_push();
    torc_tensor *a = torc_tensor_from((double[]){1, 2, 3, 4}, TORC_SHAPE(2, 2), TORC_DTYPE_F64);
    torc_tensor *b = torc_tensor_from((double[]){1, 0, 3, 1}, TORC_SHAPE(2, 2), TORC_DTYPE_F64);
    tu_assert_values(torc_mse_loss(a, b), TU_ARR((0 + 4 + 0 + 9) / 4.0), 1e-15);
    // cross_entropy([[1,2],[3,4]], [1, 0]) = mean(log(1 + e^-1), log(1 + e^1))
    torc_tensor *t = torc_tensor_from((int64_t[]){1, 0}, TORC_SHAPE(2), TORC_DTYPE_I64);
    tu_assert_values(torc_cross_entropy(a, t), TU_ARR((log1p(exp(-1.0)) + log1p(exp(1.0))) / 2), 1e-15);
    tu_assert_values(torc_nll_loss(a, t), TU_ARR(-(2 + 3) / 2.0), 0);
    ck_assert_int_eq(torc_get_dtype(t), TORC_DTYPE_I64);
    ck_assert_ptr_null(torc_cross_entropy(a, torc_tensor_from((int64_t[]){0, 5}, TORC_SHAPE(2), TORC_DTYPE_I64)));
    tu_assert_error(TORC_ERR_INDEX, "Target 5 is out of bounds.");
    ck_assert_ptr_null(torc_cross_entropy(a, torc_tensor_from((int64_t[]){-1, 0}, TORC_SHAPE(2), TORC_DTYPE_I64)));
    tu_assert_error(TORC_ERR_INDEX, "Target -1 is out of bounds.");
    ck_assert_ptr_null(torc_cross_entropy(a, torc_tensor_from((float[]){0, 1}, TORC_SHAPE(2), TORC_DTYPE_F32)));
    tu_assert_error(TORC_ERR_DTYPE, "expected target dtype to be Long or Byte, but got Float");
    ck_assert_ptr_null(torc_cross_entropy(a, torc_tensor_from((int64_t[]){0, 1, 1}, TORC_SHAPE(3), TORC_DTYPE_I64)));
    tu_assert_error(TORC_ERR_SHAPE, "Expected input batch_size (2) to match target batch_size (3).");
    ck_assert_ptr_null(torc_nll_loss(a, torc_zeros(TORC_SHAPE(2, 1), TORC_DTYPE_I64)));
    tu_assert_error(TORC_ERR_SHAPE, "0D or 1D target tensor expected, multi-target not supported");
    torc_scope_pop();
}
END_TEST

// ---- accounting ----
// softmax / log_softmax of an integer or bool tensor: PyTorch returns an empty input as an empty
// tensor of its own dtype (after checking dim) and refuses a non-empty one, naming its kernel.
START_TEST(softmax_of_integer_tensors_as_pytorch) {
    torc_scope_push();
    torc_tensor *e = torc_zeros(TORC_SHAPE(0, 3), TORC_DTYPE_I64);
    for (int log = 0; log < 2; log++) {
        torc_tensor *r = log ? torc_log_softmax(e, 0) : torc_softmax(e, 1);
        ck_assert_msg(r != NULL, "%s", torc_last_error());
        ck_assert_int_eq(torc_get_dtype(r), TORC_DTYPE_I64);
        ck_assert_int_eq(torc_ndim(r), 2);
        ck_assert_int_eq(torc_shape(r)[0], 0);
        ck_assert_int_eq(torc_shape(r)[1], 3);
    }
    torc_tensor *eb = torc_zeros(TORC_SHAPE(2, 0), TORC_DTYPE_BOOL);
    ck_assert_int_eq(torc_get_dtype(torc_softmax(eb, -1)), TORC_DTYPE_BOOL);
    ck_assert_ptr_null(torc_softmax(torc_zeros(TORC_SHAPE(0), TORC_DTYPE_U8), 5));
    tu_assert_error(TORC_ERR_INDEX, "Dimension out of range (expected to be in range of [-1, 0], but got 5)");
    torc_tensor *x = torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_I64);
    ck_assert_ptr_null(torc_softmax(x, 1));
    tu_assert_error(TORC_ERR_DTYPE, "\"softmax_lastdim_kernel_impl\" not implemented for 'Long'");
    ck_assert_ptr_null(torc_softmax(x, 0));
    tu_assert_error(TORC_ERR_DTYPE, "\"softmax_kernel_impl\" not implemented for 'Long'");
    ck_assert_ptr_null(torc_log_softmax(torc_scalar_tensor(3, TORC_DTYPE_I32), 0));
    tu_assert_error(TORC_ERR_DTYPE, "\"log_softmax_lastdim_kernel_impl\" not implemented for 'Int'");
    torc_scope_pop();
}
END_TEST

START_TEST(flops_backward_is_twice_forward) {
    // x (B, D) -> w1 (D, D) -> w2 (D, K) -> loss: forward matmuls 2BDD + 2BDK, backward twice
    // that (a gradient for each operand of each matmul): the "6 x tokens x params" rule.
    const int64_t B = 8, D = 32, K = 4;
    torc_scope_push();
    torc_tensor *x = torc_randn(TORC_SHAPE(B, D), TORC_DTYPE_F32, NULL);
    torc_tensor *w1 = torc_parameter(torc_randn(TORC_SHAPE(D, D), TORC_DTYPE_F32, NULL));
    torc_tensor *w2 = torc_parameter(torc_randn(TORC_SHAPE(D, K), TORC_DTYPE_F32, NULL));
    ok(torc_set_requires_grad(x, true));  // x stands for an embedding output: its gradient counts
    const uint64_t fwd = 2 * B * D * D + 2 * B * D * K;
    torc_flops_reset();
    torc_tensor *loss = torc_mean(torc_matmul(torc_matmul(x, w1), w2), TORC_ALL_DIMS, false);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, TORC_OP_MATMUL, -1), fwd);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_BACKWARD, -1, -1), 0);
    ok(torc_backward(loss, NULL, false));
    ck_assert_uint_eq(torc_flops(TORC_PHASE_BACKWARD, TORC_OP_MATMUL, -1), 2 * fwd);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_BACKWARD, TORC_OP_MATMUL, TORC_DTYPE_F32), 2 * fwd);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, TORC_OP_MATMUL, -1), fwd);  // backward added none
    // When x needs no gradient its matmul is skipped: 2BDD + 4BDK.
    torc_flops_reset();
    torc_tensor *x2 = torc_randn(TORC_SHAPE(B, D), TORC_DTYPE_F32, NULL);
    ok(torc_backward(torc_mean(torc_matmul(torc_matmul(x2, w1), w2), TORC_ALL_DIMS, false), NULL, false));
    ck_assert_uint_eq(torc_flops(TORC_PHASE_BACKWARD, TORC_OP_MATMUL, -1), 2 * B * D * D + 4 * B * D * K);
    torc_scope_pop();
}
END_TEST

START_TEST(cruncher_memory_after_forward_and_backward) {
    torc_device *dev = torc_default_device();
    torc_memory_stats m0, m1;
    ok(torc_memory_stats_get(dev, &m0));
    torc_scope_push();
    const int64_t D = 64, B = 16;
    torc_module *m = torc_cruncher_new(D, 2, TORC_DTYPE_F32, NULL);
    const uint64_t nparams = (uint64_t)torc_module_num_parameters(m);
    ck_assert_uint_eq(nparams, D * D * 2 + D);
    torc_tensor *x = torc_randn(TORC_SHAPE(B, D), TORC_DTYPE_F32, NULL);
    torc_tensor *y = torc_module_forward(m, x);
    torc_tensor *loss = torc_mean(y, TORC_ALL_DIMS, false);
    ok(torc_memory_stats_get(dev, &m1));
    ck_assert_uint_eq(m1.in_use[TORC_MEM_PARAMETER] - m0.in_use[TORC_MEM_PARAMETER], 4 * nparams);
    ck_assert_uint_eq(m1.in_use[TORC_MEM_GRADIENT] - m0.in_use[TORC_MEM_GRADIENT], 0);
    // Activations: x, the two hidden (B, D) outputs, y and the loss at least.
    ck_assert_uint_ge(m1.in_use[TORC_MEM_ACTIVATION] - m0.in_use[TORC_MEM_ACTIVATION], 4 * (3 * B * D + B));
    ok(torc_backward(loss, NULL, false));
    ok(torc_memory_stats_get(dev, &m1));
    ck_assert_uint_eq(m1.in_use[TORC_MEM_PARAMETER] - m0.in_use[TORC_MEM_PARAMETER], 4 * nparams);
    ck_assert_uint_eq(m1.in_use[TORC_MEM_GRADIENT] - m0.in_use[TORC_MEM_GRADIENT], 4 * nparams);
    ck_assert_uint_eq(m1.in_use[TORC_MEM_OPTIMIZER_STATE], m0.in_use[TORC_MEM_OPTIMIZER_STATE]);
    uint64_t sum = 0;
    for (int t = 0; t < TORC_MEM_TAG_COUNT; t++) sum += m1.in_use[t];
    ck_assert_uint_eq(sum, m1.total_in_use);
    ck_assert_uint_gt(m1.peak[TORC_MEM_ACTIVATION], m0.in_use[TORC_MEM_ACTIVATION]);
    torc_module_free(m);
    torc_scope_pop();
    ok(torc_memory_stats_get(dev, &m1));
    for (int t = 0; t < TORC_MEM_TAG_COUNT; t++) ck_assert_uint_eq(m1.in_use[t], m0.in_use[t]);
}
END_TEST

// ---- the MLP against PyTorch ----
typedef struct golden_tensor {
    char name[32];
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    int64_t n;
    double *v;
} golden_tensor;

static golden_tensor g_gold[64];
static int g_ngold;

static void load_golden(void) {
    FILE *f = tu_open_golden("autograd_mlp.txt", "r");
    g_ngold = 0;
    char dt[8];
    int c;
    while ((c = fgetc(f)) != EOF) {
        if (c == '#') {
            while ((c = fgetc(f)) != EOF && c != '\n') {}
            continue;
        }
        ungetc(c, f);
        golden_tensor *g = &g_gold[g_ngold++];
        ck_assert_int_le(g_ngold, 64);
        ck_assert_int_eq(fscanf(f, "%31s %7s %d", g->name, dt, &g->ndim), 3);
        g->n = 1;
        for (int i = 0; i < g->ndim; i++) {
            long long s;
            ck_assert_int_eq(fscanf(f, "%lld", &s), 1);
            g->shape[i] = s;
            g->n *= s;
        }
        ck_assert_int_eq(fscanf(f, " :"), 0);
        g->v = malloc(sizeof(double) * (size_t)(g->n ? g->n : 1));
        for (int64_t k = 0; k < g->n; k++) ck_assert_int_eq(fscanf(f, "%lf", &g->v[k]), 1);
        while ((c = fgetc(f)) != EOF && c != '\n') {}
    }
    fclose(f);
}

static void free_golden(void) {
    for (int i = 0; i < g_ngold; i++) free(g_gold[i].v);
    g_ngold = 0;
}

static const golden_tensor *gold(const char *name) {
    for (int i = 0; i < g_ngold; i++)
        if (!strcmp(g_gold[i].name, name)) return &g_gold[i];
    ck_abort_msg("golden tensor %s missing", name);
    return NULL;
}

static torc_tensor *gold_tensor(const char *name, torc_dtype dtype) {
    const golden_tensor *g = gold(name);
    if (dtype == TORC_DTYPE_I64) {
        int64_t iv[64];
        for (int64_t k = 0; k < g->n; k++) iv[k] = (int64_t)g->v[k];
        return torc_tensor_from(iv, g->ndim, g->shape, dtype);
    }
    return torc_to_dtype(torc_tensor_from(g->v, g->ndim, g->shape, TORC_DTYPE_F64), dtype);
}

static void assert_gold(torc_tensor *t, const char *name, double tol) {
    const golden_tensor *g = gold(name);
    ck_assert_msg(t != NULL, "%s: NULL (%s)", name, torc_last_error());
    tu_assert_dims_at(__FILE__, __LINE__, name, torc_ndim(t), torc_shape(t), g->ndim, g->shape);
    double *v = tu_values(t);
    for (int64_t k = 0; k < g->n; k++)
        ck_assert_msg(fabs(v[k] - g->v[k]) <= tol * (1 + fabs(g->v[k])), "%s[%lld] = %.17g, PyTorch %.17g", name,
                      (long long)k, v[k], g->v[k]);
    free(v);
}

// Builds Linear(6,8) ReLU Linear(8,8) GELU Linear(8,3) with the golden weights, runs it and
// compares the loss and every gradient with PyTorch's.
static void check_mlp(const char *tag, bool tanh_gelu, torc_dtype dtype, double tol) {
    torc_scope_push();
    torc_module *seq = torc_sequential_new();
    ok(torc_sequential_append(seq, torc_linear_new(6, 8, true, dtype, NULL)));
    ok(torc_sequential_append(seq, torc_relu_module_new()));
    ok(torc_sequential_append(seq, torc_linear_new(8, 8, true, dtype, NULL)));
    ok(torc_sequential_append(seq, torc_gelu_module_new(tanh_gelu)));
    ok(torc_sequential_append(seq, torc_linear_new(8, 3, true, dtype, NULL)));
    static const char *const params[6][2] = {{"0.weight", "W1"}, {"0.bias", "b1"}, {"2.weight", "W2"},
                                             {"2.bias", "b2"},   {"4.weight", "W3"}, {"4.bias", "b3"}};
    torc_no_grad_begin();
    for (int i = 0; i < 6; i++) ok(torc_copy_(torc_module_get_parameter(seq, params[i][0]), gold_tensor(params[i][1], dtype)));
    torc_no_grad_end();
    torc_tensor *x = gold_tensor("x", dtype);
    ok(torc_set_requires_grad(x, true));
    torc_tensor *logits = torc_module_forward(seq, x);
    torc_tensor *loss = tanh_gelu ? torc_mse_loss(logits, gold_tensor("targets", dtype))
                                  : torc_cross_entropy(logits, gold_tensor("labels", TORC_DTYPE_I64));
    ok(torc_backward(loss, NULL, false));
    char name[64];
    snprintf(name, sizeof name, "%s.logits", tag);
    assert_gold(logits, name, tol);
    snprintf(name, sizeof name, "%s.loss", tag);
    assert_gold(loss, name, tol);
    snprintf(name, sizeof name, "%s.grad.x", tag);
    assert_gold(torc_grad(x), name, tol);
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "%s.grad.%s", tag, params[i][1]);
        torc_tensor *g = torc_grad(torc_module_get_parameter(seq, params[i][0]));
        ck_assert_int_eq(torc_get_dtype(g), dtype);
        assert_gold(g, name, tol);
    }
    torc_module_free(seq);
    torc_scope_pop();
}

START_TEST(mlp_gradients_match_pytorch) {
    load_golden();
    check_mlp("ce", false, TORC_DTYPE_F64, 1e-12);
    check_mlp("mse", true, TORC_DTYPE_F64, 1e-12);
    check_mlp("ce", false, TORC_DTYPE_F32, 1e-5);
    check_mlp("mse", true, TORC_DTYPE_F32, 1e-5);
    free_golden();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("nn");
    TCase *tc = tcase_create("nn");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, parameter_is_a_tagged_leaf);
    tcase_add_test(tc, course_matmul_growth_with_and_without_scaling);
    tcase_add_test(tc, trunc_normal_stays_in_bounds_on_a_parameter);
    tcase_add_test(tc, linear_shapes_names_and_forward);
    tcase_add_test(tc, linear_under_autocast_keeps_its_dtype);
    tcase_add_test(tc, cruncher_names_count_and_forward);
    tcase_add_test(tc, sequential_and_custom_modules);
    tcase_add_test(tc, zero_grad_clears_or_zeroes);
    tcase_add_test(tc, losses_values_and_errors);
    tcase_add_test(tc, softmax_of_integer_tensors_as_pytorch);
    tcase_add_test(tc, flops_backward_is_twice_forward);
    tcase_add_test(tc, cruncher_memory_after_forward_and_backward);
    tcase_add_test(tc, mlp_gradients_match_pytorch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
