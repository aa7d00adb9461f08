// tests/test_autograd.c — the autograd engine: the course examples, leaf accumulation,
// retain_grad / retain_graph, functional grad, no_grad and detach, grad_fn names, and every
// error PyTorch raises here, with its text.
#include "testutil.h"

static torc_tensor *vec(int n, const double *v) { return torc_tensor_from(v, 1, (int64_t[]){n}, TORC_DTYPE_F64); }
#define VEC(...) vec((int)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)), (double[]){__VA_ARGS__})
static torc_tensor *leaf(torc_tensor *t) {
    ck_assert_int_eq(torc_set_requires_grad(t, true), TORC_OK);
    return t;
}
static torc_tensor *scalar(double v) { return torc_scalar_tensor(v, TORC_DTYPE_F64); }
static void ok(torc_status st) { ck_assert_msg(st == TORC_OK, "status %d: %s", st, torc_last_error()); }

// ---- the course examples ----
START_TEST(course_w_grad_is_x) {
    // x = [1, 2, 3], w = [1, 1, 1]: loss = 0.5 (x @ w - 5)^2 = 0.5, d loss / d w = (6 - 5) x.
    torc_scope_push();
    torc_tensor *x = VEC(1, 2, 3), *w = leaf(VEC(1, 1, 1));
    torc_tensor *loss = torc_mul_scalar(torc_pow_scalar(torc_sub_scalar(torc_matmul(x, w), torc_s(5.0)), torc_s(2.0)),
                                        torc_s(0.5));
    tu_assert_values(loss, TU_ARR(0.5), 0);
    ck_assert_ptr_null(torc_grad(w));
    ok(torc_backward(loss, NULL, false));
    tu_assert_values(torc_grad(w), TU_ARR(1, 2, 3), 0);
    ck_assert_ptr_null(torc_grad(x));
    torc_scope_pop();
}
END_TEST

START_TEST(relu_backward_is_threshold_backward) {
    // PyTorch: out <= 0 ? 0 : g. relu(NaN) = NaN passes its gradient; an inf gradient where the
    // output is 0 gives 0 (not inf * 0 = NaN).
    torc_scope_push();
    torc_tensor *x = leaf(VEC(NAN, -1, 2, 0));
    ok(torc_backward(torc_relu(x), VEC(1, INFINITY, 3, INFINITY), false));
    tu_assert_values(torc_grad(x), TU_ARR(1, 0, 3, 0), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(course_functional_grad_leaves_dot_grad_alone) {
    // y = a^2 x + b x + c at a = 1, x = 1: dy/da = 2ax = 2, dy/db = x = 1, dy/dc = 1.
    torc_scope_push();
    torc_tensor *a = leaf(scalar(1)), *b = leaf(scalar(2)), *c = leaf(scalar(3)), *x = scalar(1);
    torc_tensor *y = torc_add(torc_add(torc_mul(torc_mul(a, a), x), torc_mul(b, x)), c);
    tu_assert_values(y, TU_ARR(6), 0);
    torc_tensor *inputs[3] = {a, b, c}, *g[3];
    for (int i = 0; i < 3; i++) ck_assert_ptr_null(torc_grad(inputs[i]));
    ok(torc_autograd_grad(1, &y, NULL, 3, inputs, false, false, g));
    tu_assert_values(g[0], TU_ARR(2), 0);
    tu_assert_values(g[1], TU_ARR(1), 0);
    tu_assert_values(g[2], TU_ARR(1), 0);
    for (int i = 0; i < 3; i++) ck_assert_ptr_null(torc_grad(inputs[i]));
    torc_scope_pop();
}
END_TEST

START_TEST(course_retain_grad) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3));
    torc_tensor *h = torc_mul_scalar(x, torc_s(2.0));
    ok(torc_backward(torc_sum(torc_square(h), TORC_ALL_DIMS, false), NULL, false));
    ck_assert(!torc_is_leaf(h));
    ck_assert_ptr_null(torc_grad(h));  // a non-leaf keeps no gradient by default
    tu_assert_values(torc_grad(x), TU_ARR(8, 16, 24), 0);

    torc_tensor *h2 = torc_mul_scalar(x, torc_s(2.0));
    ok(torc_retain_grad(h2));
    ok(torc_backward(torc_sum(torc_square(h2), TORC_ALL_DIMS, false), NULL, false));
    tu_assert_values(torc_grad(h2), TU_ARR(4, 8, 12), 0);
    tu_assert_values(torc_grad(x), TU_ARR(16, 32, 48), 0);  // accumulated over both backwards
    ok(torc_retain_grad(x));                                  // a no-op on a leaf
    ck_assert_int_eq(torc_retain_grad(VEC(1)), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "can't retain_grad on Tensor that has requires_grad=False");
    torc_scope_pop();
}
END_TEST

// PyTorch's values for retain_grad under autograd.grad (tests/golden/autograd_retain_grad.txt,
// tools/golden/gen_parity_golden.py): "NAME N V..." lines; N 0 means no .grad.
static void assert_golden(FILE *f, const char *name, torc_tensor *t) {
    char line[512];
    rewind(f);
    while (fgets(line, sizeof line, f)) {
        char key[64];
        int n, used;
        if (line[0] == '#' || sscanf(line, "%63s %d%n", key, &n, &used) != 2 || strcmp(key, name)) continue;
        if (n == 0) {
            ck_assert_msg(t == NULL, "%s: expected no gradient (PyTorch's None)", name);
            return;
        }
        ck_assert_msg(t != NULL, "%s: no gradient, PyTorch has %d values", name, n);
        ck_assert_int_eq(torc_numel(t), n);
        double *v = tu_values(t);
        const char *p = line + used;
        for (int i = 0; i < n; i++) {
            char *end;
            const double e = strtod(p, &end);
            ck_assert_msg(end != p && v[i] == e, "%s[%d] is %g, PyTorch %g", name, i, v[i], e);
            p = end;
        }
        free(v);
        return;
    }
    ck_abort_msg("%s is not in autograd_retain_grad.txt", name);
}

START_TEST(retain_grad_fills_grad_under_autograd_grad) {
    FILE *f = tu_open_golden("autograd_retain_grad.txt", "r");
    torc_scope_push();
    // x = [1, 2], y = x * 3 retained, z = (y * y).sum()
    torc_tensor *x = leaf(torc_tensor_from((float[]){1, 2}, TORC_SHAPE(2), TORC_DTYPE_F32));
    torc_tensor *y = torc_mul_scalar(x, torc_s(3));
    ok(torc_retain_grad(y));
    torc_tensor *z = torc_sum(torc_mul(y, y), TORC_ALL_DIMS, false), *g;
    ok(torc_autograd_grad(1, &z, NULL, 1, &x, true, false, &g));
    assert_golden(f, "grad_x.dx", g);
    assert_golden(f, "grad_x.y_grad", torc_grad(y));
    assert_golden(f, "grad_x.x_grad", torc_grad(x));
    ok(torc_autograd_grad(1, &z, NULL, 1, &y, true, false, &g));  // y itself the input: accumulates
    assert_golden(f, "grad_y.dy", g);
    assert_golden(f, "grad_y.y_grad", torc_grad(y));
    // a = [4], w = a * 5 retained, u = w.sum() + (x * x).sum(): w's node does not run for x
    torc_tensor *a = leaf(torc_tensor_from((float[]){4}, TORC_SHAPE(1), TORC_DTYPE_F32));
    torc_tensor *w = torc_mul_scalar(a, torc_s(5));
    ok(torc_retain_grad(w));
    torc_tensor *u = torc_add(torc_sum(w, TORC_ALL_DIMS, false), torc_sum(torc_mul(x, x), TORC_ALL_DIMS, false));
    ok(torc_autograd_grad(1, &u, NULL, 1, &x, false, false, &g));
    assert_golden(f, "off_path.dx", g);
    assert_golden(f, "off_path.w_grad", torc_grad(w));
    torc_scope_pop();
    fclose(f);
}
END_TEST

// where with a uint8 condition (accepted as PyTorch does) backpropagates like a bool one.
START_TEST(where_with_a_uint8_condition_backpropagates) {
    torc_scope_push();
    torc_tensor *a = leaf(VEC(1, 2, 3)), *b = leaf(VEC(4, 5, 6));
    torc_tensor *c = torc_tensor_from((uint8_t[]){1, 0, 2}, TORC_SHAPE(3), TORC_DTYPE_U8);
    torc_tensor *w = torc_where(c, a, b);
    tu_assert_values(w, TU_ARR(1, 5, 3), 0);
    ok(torc_backward(torc_sum(w, TORC_ALL_DIMS, false), NULL, false));
    tu_assert_values(torc_grad(a), TU_ARR(1, 0, 1), 0);
    tu_assert_values(torc_grad(b), TU_ARR(0, 1, 0), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(course_two_layer_gradient_shapes) {
    // x (B=4, D=8) -> relu(x @ w1 (8, 16)) @ w2 (16, 3) -> mean: gradients have the weights' shapes.
    torc_scope_push();
    torc_generator *gen = torc_generator_new(7);
    torc_tensor *x = torc_randn(TORC_SHAPE(4, 8), TORC_DTYPE_F32, gen);
    torc_tensor *w1 = leaf(torc_randn(TORC_SHAPE(8, 16), TORC_DTYPE_F32, gen));
    torc_tensor *w2 = leaf(torc_randn(TORC_SHAPE(16, 3), TORC_DTYPE_F32, gen));
    torc_tensor *out = torc_matmul(torc_relu(torc_matmul(x, w1)), w2);
    tu_assert_shape(out, 4, 3);
    ck_assert_str_eq(torc_grad_fn_name(out), "MmBackward0");
    ok(torc_backward(torc_mean(out, TORC_ALL_DIMS, false), NULL, false));
    tu_assert_shape(torc_grad(w1), 8, 16);
    tu_assert_shape(torc_grad(w2), 16, 3);
    ck_assert_int_eq(torc_get_dtype(torc_grad(w1)), TORC_DTYPE_F32);
    ck_assert_ptr_null(torc_grad(x));
    torc_generator_free(gen);
    torc_scope_pop();
}
END_TEST

START_TEST(course_inplace_after_sigmoid_fails_backward) {
    torc_scope_push();
    torc_tensor *x = leaf(torc_tensor_from((float[]){1, 2, 3}, TORC_SHAPE(3), TORC_DTYPE_F32));
    torc_tensor *s = torc_sigmoid(x);
    torc_tensor *loss = torc_sum(s, TORC_ALL_DIMS, false);
    ok(torc_add_scalar_(s, torc_s(1.0)));  // recorded (AddBackward0); the error comes at backward
    ck_assert_int_eq(torc_backward(loss, NULL, false), TORC_ERR_AUTOGRAD);
    ck_assert_str_eq(torc_last_error(),
                     "one of the variables needed for gradient computation has been modified by an inplace operation: "
                     "[torch.FloatTensor [3]], which is output 0 of Sigmoid, is at version 1; expected version 0 "
                     "instead. Hint: enable anomaly detection to find the operation that failed to compute its "
                     "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).");
    torc_scope_pop();
}
END_TEST

START_TEST(course_second_backward_fails) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3));
    torc_tensor *y = torc_sum(torc_mul(x, x), TORC_ALL_DIMS, false);
    ok(torc_backward(y, NULL, false));
    ck_assert_int_eq(torc_backward(y, NULL, false), TORC_ERR_AUTOGRAD);
    ck_assert_str_eq(torc_last_error(),
                     "Trying to backward through the graph a second time (or directly access saved tensors after "
                     "they have already been freed). Saved intermediate values of the graph are freed when you call "
                     ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                     "graph a second time or if you need to access saved tensors after calling backward.");
    tu_assert_values(torc_grad(x), TU_ARR(2, 4, 6), 0);  // unchanged by the failed call
    torc_scope_pop();
}
END_TEST

START_TEST(retain_graph_allows_a_second_backward) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3));
    torc_tensor *y = torc_sum(torc_mul(x, x), TORC_ALL_DIMS, false);
    ok(torc_backward(y, NULL, true));
    ok(torc_backward(y, NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(4, 8, 12), 0);
    // A graph that saved nothing can run again, as in PyTorch.
    torc_tensor *z = torc_sum(torc_add(x, x), TORC_ALL_DIMS, false);
    ok(torc_backward(z, NULL, false));
    ok(torc_backward(z, NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(8, 12, 16), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(leaf_inplace_is_an_error_outside_no_grad) {
    torc_scope_push();
    torc_tensor *w = leaf(VEC(1, 2));
    ck_assert_int_eq(torc_add_scalar_(w, torc_s(1.0)), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "a leaf Variable that requires grad is being used in an in-place operation.");
    tu_assert_values(w, TU_ARR(1, 2), 0);
    ck_assert_int_eq(torc_mul_(torc_select(w, 0, 0), scalar(2)), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "a view of a leaf Variable that requires grad is being used in an in-place operation.");
    torc_no_grad_begin();
    ok(torc_add_scalar_(w, torc_s(1.0)));  // an optimizer's update
    torc_no_grad_end();
    tu_assert_values(w, TU_ARR(2, 3), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(inplace_on_saved_leaf_and_input_names_the_producer) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2)), *w = VEC(3, 4);
    torc_tensor *y = torc_sum(torc_mul(x, w), TORC_ALL_DIMS, false);
    ok(torc_mul_scalar_(w, torc_s(2.0)));
    ck_assert_int_eq(torc_backward(y, NULL, false), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "inplace operation: [torch.DoubleTensor [2]] is at version 1; expected version 0");

    // PyTorch names the grad_fn the saved tensor has when backward runs: the add_ in grad mode
    // replaced Exp; under no_grad it records nothing and Exp stays.
    torc_tensor *h = torc_exp(x);
    torc_tensor *z = torc_sum(torc_mul(h, x), TORC_ALL_DIMS, false);
    ok(torc_add_scalar_(h, torc_s(1.0)));
    ck_assert_str_eq(torc_grad_fn_name(h), "AddBackward0");
    ck_assert_int_eq(torc_backward(z, NULL, false), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "[torch.DoubleTensor [2]], which is output 0 of Add, is at version 1");
    torc_tensor *h2 = torc_exp(x);
    torc_tensor *z2 = torc_sum(torc_mul(h2, x), TORC_ALL_DIMS, false);
    torc_no_grad_begin();
    ok(torc_add_scalar_(h2, torc_s(1.0)));
    torc_no_grad_end();
    ck_assert_int_eq(torc_backward(z2, NULL, false), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "[torch.DoubleTensor [2]], which is output 0 of Exp, is at version 1");
    torc_scope_pop();
}
END_TEST

START_TEST(inplace_on_a_non_leaf_rebases_its_history) {
    // As PyTorch: the in-place op becomes the tensor's grad_fn, on top of its old history.
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2));
    torc_tensor *h = torc_mul_scalar(x, torc_s(2.0));
    ok(torc_mul_scalar_(h, torc_s(3.0)));
    ck_assert_str_eq(torc_grad_fn_name(h), "MulBackward0");
    ok(torc_backward(torc_sum(h, TORC_ALL_DIMS, false), NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(6, 6), 0);
    // Through a view of h, the base's history is rebased (CopySlices): the zeroed element
    // passes no gradient.
    ok(torc_set_grad(x, NULL));
    torc_tensor *h2 = torc_mul_scalar(x, torc_s(2.0));
    ok(torc_zero_(torc_select(h2, 0, 1)));
    ck_assert_str_eq(torc_grad_fn_name(h2), "CopySlices");
    ok(torc_backward(torc_sum(h2, TORC_ALL_DIMS, false), NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(2, 0), 0);
    // Under no_grad the write is not tracked, as in PyTorch.
    ok(torc_set_grad(x, NULL));
    torc_tensor *h3 = torc_mul_scalar(x, torc_s(2.0));
    torc_no_grad_begin();
    ok(torc_add_scalar_(h3, torc_s(1.0)));
    torc_no_grad_end();
    ck_assert_str_eq(torc_grad_fn_name(h3), "MulBackward0");
    ok(torc_backward(torc_sum(h3, TORC_ALL_DIMS, false), NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(2, 2), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(non_scalar_backward_needs_a_gradient) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3));
    torc_tensor *y = torc_mul(x, x);
    ck_assert_int_eq(torc_backward(y, NULL, false), TORC_ERR_AUTOGRAD);
    ck_assert_str_eq(torc_last_error(), "grad can be implicitly created only for scalar outputs");
    ck_assert_int_eq(torc_backward(y, VEC(1, 1), false), TORC_ERR_SHAPE);
    ck_assert_str_eq(torc_last_error(), "Mismatch in shape: grad_output[0] has a shape of torch.Size([2]) and output[0] "
                                        "has a shape of torch.Size([3]).");
    // The gradient is cast to the output's dtype.
    ok(torc_backward(y, torc_tensor_from((float[]){1, 0.5f, 2}, TORC_SHAPE(3), TORC_DTYPE_F32), false));
    tu_assert_values(torc_grad(x), TU_ARR(2, 2, 12), 0);
    // backward on a leaf sets its gradient directly.
    torc_tensor *q = leaf(VEC(5, 6));
    ok(torc_backward(q, VEC(1, 2), false));
    tu_assert_values(torc_grad(q), TU_ARR(1, 2), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(backward_of_a_tensor_without_history_fails) {
    torc_scope_push();
    torc_tensor *x = VEC(1, 2);
    ck_assert_int_eq(torc_backward(torc_sum(x, TORC_ALL_DIMS, false), NULL, false), TORC_ERR_AUTOGRAD);
    ck_assert_str_eq(torc_last_error(), "element 0 of tensors does not require grad and does not have a grad_fn");
    torc_tensor *w = leaf(VEC(1, 2));
    ck_assert_int_eq(torc_backward(torc_sum(torc_detach(w), TORC_ALL_DIMS, false), NULL, false), TORC_ERR_AUTOGRAD);
    torc_scope_pop();
}
END_TEST

START_TEST(functional_grad_options_and_errors) {
    torc_scope_push();
    torc_tensor *a = leaf(VEC(1, 2)), *b = leaf(scalar(3)), *unused = leaf(VEC(0));
    torc_tensor *y = torc_sum(torc_mul(a, b), TORC_ALL_DIMS, false);
    torc_tensor *g[3] = {NULL, NULL, NULL};
    torc_tensor *in3[3] = {a, b, unused};
    ck_assert_int_eq(torc_autograd_grad(1, &y, NULL, 3, in3, true, false, g), TORC_ERR_AUTOGRAD);
    ck_assert_str_eq(torc_last_error(), "The differentiated Tensor at index 2 appears to not have been used in the "
                                        "graph. Set allow_unused=True if this is the desired behavior.");
    ck_assert(g[0] == NULL && g[1] == NULL && g[2] == NULL);
    ok(torc_autograd_grad(1, &y, NULL, 3, in3, true, true, g));
    tu_assert_values(g[0], TU_ARR(3, 3), 0);
    tu_assert_values(g[1], TU_ARR(3), 0);
    ck_assert_ptr_null(g[2]);
    torc_tensor *plain = VEC(1);
    ck_assert_int_eq(torc_autograd_grad(1, &y, NULL, 1, &plain, true, true, g), TORC_ERR_AUTOGRAD);
    ck_assert_str_eq(torc_last_error(), "One of the differentiated Tensors does not require grad");
    // A non-leaf input gets the gradient that flows into it; grad of an output w.r.t. itself.
    torc_tensor *h = torc_mul(a, a);
    torc_tensor *z = torc_sum(torc_exp(h), TORC_ALL_DIMS, false);
    ok(torc_autograd_grad(1, &z, NULL, 1, &h, false, false, g));
    tu_assert_values(g[0], TU_ARR(exp(1.0), exp(4.0)), 1e-15);
    ok(torc_autograd_grad(1, &a, (torc_tensor *[]){VEC(1, 1)}, 1, &a, false, false, g));
    tu_assert_values(g[0], TU_ARR(1, 1), 0);
    // Several outputs with weights.
    torc_tensor *o1 = torc_mul_scalar(a, torc_s(2.0)), *o2 = torc_mul(a, a);
    ok(torc_autograd_grad(2, (torc_tensor *[]){o1, o2}, (torc_tensor *[]){VEC(1, 1), VEC(1, 0.5)}, 1, &a, false,
                          false, g));
    tu_assert_values(g[0], TU_ARR(4, 4), 0);  // 2 + 2a*w: [2 + 2, 2 + 2]
    ck_assert_ptr_null(torc_grad(a));
    torc_scope_pop();
}
END_TEST

START_TEST(no_grad_records_nothing_and_detach_shares_storage) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2));
    ck_assert(torc_is_grad_enabled());
    torc_no_grad_begin();
    torc_no_grad_begin();
    torc_tensor *y = torc_mul(x, x);
    torc_no_grad_end();
    ck_assert(!torc_is_grad_enabled());
    torc_tensor *v = torc_transpose(torc_unsqueeze(x, 0), 0, 1);
    torc_no_grad_end();
    ck_assert(torc_is_grad_enabled());
    ck_assert(!torc_requires_grad(y) && torc_is_leaf(y) && torc_grad_fn_name(y) == NULL);
    ck_assert(!torc_requires_grad(v));
    torc_tensor *d = torc_detach(torc_mul(x, x));
    ck_assert(!torc_requires_grad(d) && torc_is_leaf(d));
    torc_tensor *dx = torc_detach(x);
    ck_assert(torc_same_storage(dx, x));
    torc_tensor *z = torc_mul(x, dx);  // dx is a constant: d z / d x = dx
    ok(torc_backward(torc_sum(z, TORC_ALL_DIMS, false), NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(1, 2), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(grad_fn_names_match_pytorch) {
    torc_scope_push();
    torc_tensor *a = leaf(VEC(1, 2, 3)), *b = leaf(VEC(4, 5, 6));
    torc_tensor *m = leaf(torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F64)), *n = leaf(torc_ones(TORC_SHAPE(3, 2), TORC_DTYPE_F64));
    torc_tensor *bt = leaf(torc_ones(TORC_SHAPE(4, 2, 3), TORC_DTYPE_F64));
    const struct { torc_tensor *t; const char *name; } cases[] = {
        {torc_add(a, b), "AddBackward0"},
        {torc_add_scalar(a, torc_s(2.0)), "AddBackward0"},
        {torc_sub(a, b), "SubBackward0"},
        {torc_mul(a, b), "MulBackward0"},
        {torc_mul_scalar(a, torc_s(2.0)), "MulBackward0"},
        {torc_div(a, b), "DivBackward0"},
        {torc_pow(a, b), "PowBackward1"},
        {torc_pow_scalar(a, torc_s(2.0)), "PowBackward0"},
        {torc_square(a), "PowBackward0"},
        {torc_neg(a), "NegBackward0"},
        {torc_exp(a), "ExpBackward0"},
        {torc_log(a), "LogBackward0"},
        {torc_tanh(a), "TanhBackward0"},
        {torc_sigmoid(a), "SigmoidBackward0"},
        {torc_relu(a), "ReluBackward0"},
        {torc_gelu(a, false), "GeluBackward0"},
        {torc_maximum(a, b), "MaximumBackward0"},
        {torc_where(torc_gt(a, b), a, b), "WhereBackward0"},
        {torc_sum(a, TORC_ALL_DIMS, false), "SumBackward0"},
        {torc_sum(m, TORC_DIMS(0), false), "SumBackward1"},
        {torc_mean(a, TORC_ALL_DIMS, false), "MeanBackward0"},
        {torc_mean(m, TORC_DIMS(1), true), "MeanBackward1"},
        {torc_amax(m, TORC_DIMS(0), false), "AmaxBackward0"},
        {torc_var(a, TORC_ALL_DIMS, 1, false), "VarBackward0"},
        {torc_norm(a, 2, TORC_ALL_DIMS, false), "LinalgVectorNormBackward0"},
        {torc_logsumexp(m, TORC_DIMS(1), false), "LogsumexpBackward0"},
        {torc_softmax(m, 1), "SoftmaxBackward0"},
        {torc_log_softmax(m, 1), "LogSoftmaxBackward0"},
        {torc_matmul(m, n), "MmBackward0"},
        {torc_matmul(a, b), "DotBackward0"},
        {torc_matmul(m, a), "MvBackward0"},
        {torc_matmul(a, n), "SqueezeBackward4"},
        {torc_matmul(bt, n), "UnsafeViewBackward0"},
        {torc_cat(2, (torc_tensor *[]){a, b}, 0), "CatBackward0"},
        {torc_gather(m, 1, torc_zeros(TORC_SHAPE(2, 1), TORC_DTYPE_I64)), "GatherBackward0"},
        {torc_index_select(m, 1, torc_zeros(TORC_SHAPE(1), TORC_DTYPE_I64)), "IndexSelectBackward0"},
        {torc_triu(m, 0), "TriuBackward0"},
        {torc_view(m, TORC_SHAPE(6)), "ViewBackward0"},
        {torc_transpose(m, 0, 1), "TransposeBackward0"},
        {torc_permute(m, 2, (int[]){1, 0}), "PermuteBackward0"},
        {torc_select(m, 0, 1), "SelectBackward0"},
        {torc_slice(m, 1, 0, 2, 1), "SliceBackward0"},
        {torc_expand(a, TORC_SHAPE(2, 3)), "ExpandBackward0"},
        {torc_unsqueeze(a, 0), "UnsqueezeBackward0"},
        {torc_as_strided(m, TORC_SHAPE(2, 2), (int64_t[]){1, 1}, 0), "AsStridedBackward0"},
        {torc_clone(a), "CloneBackward0"},
        {torc_to_dtype(a, TORC_DTYPE_F32), "ToCopyBackward0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_msg(cases[i].t != NULL, "case %zu: %s", i, torc_last_error());
        ck_assert_msg(torc_grad_fn_name(cases[i].t) && !strcmp(torc_grad_fn_name(cases[i].t), cases[i].name),
                      "case %zu: %s, expected %s", i, torc_grad_fn_name(cases[i].t), cases[i].name);
    }
    // Not differentiable: comparisons, argmax, integer results.
    ck_assert_ptr_null(torc_grad_fn_name(torc_gt(a, b)));
    ck_assert_ptr_null(torc_grad_fn_name(torc_argmax(a, 0, false)));
    ck_assert(!torc_requires_grad(torc_to_dtype(a, TORC_DTYPE_I64)));
    ck_assert_ptr_null(torc_grad_fn_name(a));
    torc_scope_pop();
}
END_TEST

START_TEST(integer_inputs_get_no_gradient) {
    torc_scope_push();
    ck_assert_int_eq(torc_set_requires_grad(torc_ones(TORC_SHAPE(2), TORC_DTYPE_I64), true), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "only Tensors of floating point dtype can require gradients");
    torc_tensor *x = leaf(VEC(1.5, 2.5));
    torc_tensor *k = torc_tensor_from((int64_t[]){3, 4}, TORC_SHAPE(2), TORC_DTYPE_I64);
    ok(torc_backward(torc_sum(torc_mul(x, k), TORC_ALL_DIMS, false), NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(3, 4), 0);
    ck_assert_ptr_null(torc_grad(k));
    torc_scope_pop();
}
END_TEST

START_TEST(gradients_come_back_in_each_inputs_dtype) {
    torc_scope_push();
    torc_tensor *a = leaf(torc_tensor_from((float[]){1, 2}, TORC_SHAPE(2), TORC_DTYPE_F32));
    torc_tensor *b = leaf(VEC(3, 4));
    torc_tensor *y = torc_mul(a, b);  // f64
    ck_assert_int_eq(torc_get_dtype(y), TORC_DTYPE_F64);
    ok(torc_backward(torc_sum(y, TORC_ALL_DIMS, false), NULL, false));
    ck_assert_int_eq(torc_get_dtype(torc_grad(a)), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_get_dtype(torc_grad(b)), TORC_DTYPE_F64);
    tu_assert_values(torc_grad(a), TU_ARR(3, 4), 0);
    tu_assert_values(torc_grad(b), TU_ARR(1, 2), 0);
    // A matmul writing a wider dtype (bf16 x bf16 -> f32) gives bf16 gradients.
    torc_tensor *p = leaf(torc_tensor_from((float[]){1, 2, 3, 4}, TORC_SHAPE(2, 2), TORC_DTYPE_F32));
    torc_tensor *q = leaf(torc_tensor_from((float[]){1, 0, 0, 1}, TORC_SHAPE(2, 2), TORC_DTYPE_F32));
    torc_tensor *pb = leaf(torc_to_dtype(torc_detach(p), TORC_DTYPE_BF16));
    torc_tensor *qb = leaf(torc_to_dtype(torc_detach(q), TORC_DTYPE_BF16));
    torc_tensor *o = torc_matmul_out_dtype(pb, qb, TORC_DTYPE_F32);
    ck_assert_int_eq(torc_get_dtype(o), TORC_DTYPE_F32);
    ok(torc_backward(torc_sum(o, TORC_ALL_DIMS, false), NULL, false));
    ck_assert_int_eq(torc_get_dtype(torc_grad(pb)), TORC_DTYPE_BF16);
    tu_assert_values(torc_grad(pb), TU_ARR(1, 1, 1, 1), 0);  // ones @ q^T
    tu_assert_values(torc_grad(qb), TU_ARR(4, 4, 6, 6), 0);  // p^T @ ones
    torc_scope_pop();
}
END_TEST

START_TEST(gradients_are_tagged_and_saved_tensors_freed) {
    torc_device *dev = torc_default_device();
    torc_memory_stats before, after_fwd, after_bwd;
    torc_scope_push();
    torc_tensor *w = leaf(torc_ones(TORC_SHAPE(256), TORC_DTYPE_F32));
    ok(torc_memory_stats_get(dev, &before));
    torc_scope_push();
    torc_tensor *loss = torc_keep(torc_sum(torc_exp(torc_exp(w)), TORC_ALL_DIMS, false));
    torc_scope_pop();  // the intermediates live on only as saved tensors
    ok(torc_memory_stats_get(dev, &after_fwd));
    ck_assert_uint_ge(after_fwd.in_use[TORC_MEM_ACTIVATION] - before.in_use[TORC_MEM_ACTIVATION], 2 * 1024);
    ok(torc_backward(loss, NULL, false));
    ok(torc_memory_stats_get(dev, &after_bwd));
    ck_assert_uint_eq(after_bwd.in_use[TORC_MEM_GRADIENT] - before.in_use[TORC_MEM_GRADIENT], 1024);
    ck_assert_uint_le(after_bwd.in_use[TORC_MEM_ACTIVATION] - before.in_use[TORC_MEM_ACTIVATION], 64);
    // A second backward accumulates in place: no new gradient memory.
    torc_tensor *g1 = torc_grad(w);
    ok(torc_backward(torc_sum(w, TORC_ALL_DIMS, false), NULL, false));
    ck_assert_ptr_eq(torc_grad(w), g1);
    ok(torc_memory_stats_get(dev, &after_bwd));
    ck_assert_uint_eq(after_bwd.in_use[TORC_MEM_GRADIENT] - before.in_use[TORC_MEM_GRADIENT], 1024);
    ok(torc_set_grad(w, NULL));
    ok(torc_memory_stats_get(dev, &after_bwd));
    ck_assert_uint_eq(after_bwd.in_use[TORC_MEM_GRADIENT], before.in_use[TORC_MEM_GRADIENT] + 1024);  // g1 still held
    torc_scope_pop();
}
END_TEST

START_TEST(set_grad_checks_its_argument) {
    torc_scope_push();
    torc_tensor *w = leaf(VEC(1, 2));
    ck_assert_int_eq(torc_set_grad(w, VEC(1, 2, 3)), TORC_ERR_SHAPE);
    tu_assert_error(TORC_ERR_SHAPE, "assigned grad has data of a different size");
    ck_assert_int_eq(torc_set_grad(w, torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32)), TORC_ERR_DTYPE);
    ok(torc_set_grad(w, VEC(5, 6)));
    ok(torc_backward(torc_sum(w, TORC_ALL_DIMS, false), NULL, false));
    tu_assert_values(torc_grad(w), TU_ARR(6, 7), 0);
    ok(torc_set_grad(w, NULL));
    ck_assert_ptr_null(torc_grad(w));
    torc_scope_pop();
}
END_TEST

START_TEST(long_chains_do_not_overflow_the_stack) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1));
    torc_tensor *y = x;
    for (int i = 0; i < 20000; i++) y = torc_add_scalar(y, torc_s(1.0));
    ok(torc_backward(torc_sum(y, TORC_ALL_DIMS, false), NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(1), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(diamond_graph_accumulates_every_path) {
    // y = exp(x); z = y * y + y: dz/dx = (2y + 1) y.
    torc_scope_push();
    torc_tensor *x = leaf(VEC(0.5, -1));
    torc_tensor *y = torc_exp(x);
    torc_tensor *z = torc_add(torc_mul(y, y), y);
    ok(torc_backward(z, VEC(1, 1), false));
    const double y0 = exp(0.5), y1 = exp(-1.0);
    tu_assert_values(torc_grad(x), TU_ARR((2 * y0 + 1) * y0, (2 * y1 + 1) * y1), 1e-15);
    torc_scope_pop();
}
END_TEST

START_TEST(slices_of_one_tensor_add_their_gradients) {
    // y = 2x (6 columns); q, k, v its columns 0-1, 2-3 and 4-5 (as the GPT splits qkv) and w
    // columns 1-4 overlapping them; z = sum(q) + 2 sum(k) + 3 sum(v) + 4 sum(w) + sum(y * y):
    // dz/dy column c = (1, 1, 2, 2, 3, 3)[c] + 4 [1 <= c <= 4] + 2 y, dz/dx = 2 dz/dy. The second and
    // later slices add into the gradient the first one made (in place, one add over the slice).
    torc_scope_push();
    const double xv[12] = {0.5, -1, 2, 0.25, -3, 1.5, 4, -0.5, 1, 2, -2, 0.75};
    torc_tensor *x = torc_tensor_from(xv, TORC_SHAPE(2, 6), TORC_DTYPE_F64);
    torc_set_requires_grad(x, true);
    torc_tensor *y = torc_mul_scalar(x, torc_s(2));
    torc_tensor *q = torc_narrow(y, 1, 0, 2), *k = torc_narrow(y, 1, 2, 2), *v = torc_narrow(y, 1, 4, 2);
    torc_tensor *w = torc_narrow(y, 1, 1, 4);
    torc_tensor *z = torc_add(torc_add(torc_add(torc_sum(q, TORC_ALL_DIMS, false),
                                                torc_mul_scalar(torc_sum(k, TORC_ALL_DIMS, false), torc_s(2))),
                                       torc_add(torc_mul_scalar(torc_sum(v, TORC_ALL_DIMS, false), torc_s(3)),
                                                torc_mul_scalar(torc_sum(w, TORC_ALL_DIMS, false), torc_s(4)))),
                              torc_sum(torc_mul(y, y), TORC_ALL_DIMS, false));
    ok(torc_backward(z, NULL, false));
    double want[12];
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 6; c++)
            want[r * 6 + c] = 2 * ((double[]){1, 1, 2, 2, 3, 3}[c] + (c >= 1 && c <= 4 ? 4 : 0) + 2 * 2 * xv[r * 6 + c]);
    double *g = tu_values(torc_grad(x));
    for (int i = 0; i < 12; i++) ck_assert_double_eq_tol(g[i], want[i], 1e-12);
    free(g);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("autograd");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, course_w_grad_is_x);
    tcase_add_test(tc, course_functional_grad_leaves_dot_grad_alone);
    tcase_add_test(tc, course_retain_grad);
    tcase_add_test(tc, retain_grad_fills_grad_under_autograd_grad);
    tcase_add_test(tc, where_with_a_uint8_condition_backpropagates);
    tcase_add_test(tc, relu_backward_is_threshold_backward);
    tcase_add_test(tc, course_two_layer_gradient_shapes);
    tcase_add_test(tc, course_inplace_after_sigmoid_fails_backward);
    tcase_add_test(tc, course_second_backward_fails);
    tcase_add_test(tc, retain_graph_allows_a_second_backward);
    tcase_add_test(tc, leaf_inplace_is_an_error_outside_no_grad);
    tcase_add_test(tc, inplace_on_saved_leaf_and_input_names_the_producer);
    tcase_add_test(tc, inplace_on_a_non_leaf_rebases_its_history);
    tcase_add_test(tc, non_scalar_backward_needs_a_gradient);
    tcase_add_test(tc, backward_of_a_tensor_without_history_fails);
    tcase_add_test(tc, functional_grad_options_and_errors);
    tcase_add_test(tc, no_grad_records_nothing_and_detach_shares_storage);
    tcase_add_test(tc, grad_fn_names_match_pytorch);
    tcase_add_test(tc, integer_inputs_get_no_gradient);
    tcase_add_test(tc, gradients_come_back_in_each_inputs_dtype);
    tcase_add_test(tc, gradients_are_tagged_and_saved_tensors_freed);
    tcase_add_test(tc, set_grad_checks_its_argument);
    tcase_add_test(tc, long_chains_do_not_overflow_the_stack);
    tcase_add_test(tc, diamond_graph_accumulates_every_path);
    tcase_add_test(tc, slices_of_one_tensor_add_their_gradients);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
