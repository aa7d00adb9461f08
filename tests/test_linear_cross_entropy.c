// tests/test_linear_cross_entropy.c — torc_linear_cross_entropy against its composition,
// cross_entropy_ex(x @ weight[:n_classes]^T, target): loss, dx and dW on the default backend and
// the reference, every reduction, ignored rows, padding rows, chunk boundaries, autocast, f64
// finite differences, the composition's errors, FLOP counts and the memory it does not take.
#define _POSIX_C_SOURCE 200809L  // setenv
#include "testutil.h"

// ---- the two ways ----
typedef struct result {
    double *loss;  // numel(loss) values
    int64_t n_loss;
    double *dx, *dw;  // NULL where the input did not require grad
    int64_t n_dx, n_dw;
} result;

static void result_free(result *r) { free(r->loss), free(r->dx), free(r->dw); }

// The loss and the gradients of sum(loss * u) (u = 1 / (k + 1) for element k: every row its own
// upstream gradient) for x (..., C) and w (V, C) given as values; fused or composed.
static result run(bool fused, torc_tensor *x0, torc_tensor *w0, torc_tensor *target, int64_t n_classes, int64_t ignore,
                  torc_reduction red, bool grad_x, bool grad_w) {
    result res = {0};
    torc_scope_push();
    torc_tensor *x = torc_clone(x0), *w = torc_clone(w0);
    if (grad_x) ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    if (grad_w) ck_assert_int_eq(torc_set_requires_grad(w, true), TORC_OK);
    torc_tensor *loss;
    if (fused) {
        loss = torc_linear_cross_entropy(x, w, target, n_classes, ignore, red);
    } else {
        const int64_t V = n_classes ? n_classes : torc_size(w, 0);
        torc_tensor *logits = torc_matmul(x, torc_transpose(torc_narrow(w, 0, 0, V), 0, 1));
        const int nd = torc_ndim(x);
        torc_tensor *flat = torc_reshape(logits, TORC_SHAPE(-1, V));
        loss = torc_cross_entropy_ex(flat, torc_reshape(target, TORC_SHAPE(-1)), ignore, red, 0.0);
        if (loss && red == TORC_REDUCTION_NONE) loss = torc_reshape(loss, nd - 1, torc_shape(x));
    }
    ck_assert_msg(loss != NULL, "%s", torc_last_error());
    res.n_loss = torc_numel(loss);
    res.loss = tu_values(loss);
    if (grad_x || grad_w) {
        const int64_t n = torc_numel(loss);
        torc_tensor *u = torc_reciprocal(torc_arange(1, (double)n + 1, 1, torc_get_dtype(loss)));
        torc_tensor *up = torc_reshape(u, torc_ndim(loss), torc_shape(loss));
        ck_assert_int_eq(torc_backward(loss, red == TORC_REDUCTION_NONE ? up : NULL, false), TORC_OK);
        if (grad_x) res.dx = tu_values(torc_grad(x)), res.n_dx = torc_numel(x);
        if (grad_w) res.dw = tu_values(torc_grad(w)), res.n_dw = torc_numel(w);
    }
    torc_scope_pop();
    return res;
}

// |a - b| <= tol * max(|b|, rms(b)) per element (NaN == NaN).
static void assert_close(const char *what, const double *a, const double *b, int64_t n, double tol) {
    double rms = 0;
    for (int64_t i = 0; i < n; i++) rms += isfinite(b[i]) ? b[i] * b[i] : 0;
    rms = sqrt(rms / (double)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i])) continue;
        const double scale = fmax(fabs(b[i]), rms);
        ck_assert_msg(fabs(a[i] - b[i]) <= tol * (scale > 0 ? scale : 1), "%s[%lld]: fused %.9g, composed %.9g (tol %g)",
                      what, (long long)i, a[i], b[i], tol);
    }
}

static void compare(const result *f, const result *c, double tol) {
    ck_assert_int_eq(f->n_loss, c->n_loss);
    assert_close("loss", f->loss, c->loss, f->n_loss, tol);
    ck_assert((f->dx == NULL) == (c->dx == NULL) && (f->dw == NULL) == (c->dw == NULL));
    if (f->dx) assert_close("dx", f->dx, c->dx, f->n_dx, tol);
    if (f->dw) assert_close("dw", f->dw, c->dw, f->n_dw, tol);
}

// Targets in [0, n_classes) with every fifth row ignored (when ignore is set).
static torc_tensor *targets(int nd, const int64_t *shape, int64_t n_classes, bool with_ignored, torc_generator *g) {
    torc_tensor *t = torc_randint(0, n_classes, nd, shape, TORC_DTYPE_I64, g);
    if (!with_ignored) return t;
    torc_tensor *flat = torc_reshape(t, TORC_SHAPE(-1));
    for (int64_t i = 0; i < torc_numel(flat); i += 5) ck_assert_int_eq(torc_fill_(torc_select(flat, 0, i), torc_s(-100)), TORC_OK);
    return t;
}

// One comparison: x (N, C) (or (2, N / 2, C) when three_d), weight (V_rows, C), n_classes.
static void case_f32(int64_t N, int64_t C, int64_t V_rows, int64_t n_classes, torc_reduction red, bool three_d) {
    torc_scope_push();
    torc_generator *g = torc_generator_new((uint64_t)(N * 7 + C + V_rows + red));
    torc_tensor *x = three_d ? torc_randn(TORC_SHAPE(2, N / 2, C), TORC_DTYPE_F32, g) : torc_randn(TORC_SHAPE(N, C), TORC_DTYPE_F32, g);
    torc_tensor *w = torc_mul_scalar(torc_randn(TORC_SHAPE(V_rows, C), TORC_DTYPE_F32, g), torc_s(0.5));
    torc_tensor *t = targets(torc_ndim(x) - 1, torc_shape(x), n_classes ? n_classes : V_rows, true, g);
    result f = run(true, x, w, t, n_classes, -100, red, true, true), c = run(false, x, w, t, n_classes, -100, red, true, true);
    compare(&f, &c, 1e-6);
    // The padding rows take no part: exactly zero gradient.
    for (int64_t i = (n_classes ? n_classes : V_rows) * C; i < V_rows * C; i++)
        ck_assert_msg(f.dw[i] == 0.0, "padding row's gradient %g", f.dw[i]);
    result_free(&f), result_free(&c);
    torc_generator_free(g);
    torc_scope_pop();
}

static const torc_reduction reds[] = {TORC_REDUCTION_MEAN, TORC_REDUCTION_SUM, TORC_REDUCTION_NONE};

static void on_backends(void (*fn)(void)) {
    fn();
    torc_device *def = torc_default_device();
    ck_assert_int_eq(torc_set_default_device(torc_device_get("reference")), TORC_OK);
    fn();
    torc_set_default_device(def);
}

static void small_cases(void) {
    for (int r = 0; r < 3; r++) {
        case_f32(6, 5, 7, 5, reds[r], false);   // two padding rows
        case_f32(6, 5, 7, 0, reds[r], true);    // (2, 3, 5) rows, every class
        case_f32(1, 3, 4, 4, reds[r], false);
        case_f32(0, 3, 4, 4, reds[r], false);   // no rows: mean nan, sum 0
    }
}
START_TEST(small_shapes_match_the_composition) { on_backends(small_cases); }
END_TEST

// The rows go in chunks of max(8, 2^24 / n_classes): 64 rows at 2^18 classes, 8 at 2^21.
static void boundary_cases(void) {
    const int64_t n64[] = {63, 64, 65, 130};  // one chunk, one, two of 33 + 32, three of 44 + 43 + 43
    for (int i = 0; i < 4; i++) case_f32(n64[i], 3, (1 << 18) + 3, 1 << 18, i == 3 ? TORC_REDUCTION_SUM : TORC_REDUCTION_MEAN, false);
    const int64_t n8[] = {9, 17};  // 5 + 4 rows; 6 + 6 + 5
    for (int i = 0; i < 2; i++) case_f32(n8[i], 2, 1 << 21, 0, TORC_REDUCTION_MEAN, false);
}
// On the default backend only: the chunking is the core's, the same on every backend, and the
// reference's double-precision composition over 2^18 and 2^21 classes took most of this suite's time.
START_TEST(chunk_boundaries_match_the_composition) { boundary_cases(); }
END_TEST

// Only one of x and weight requires grad: the other gets nothing, the one the composed gradient.
START_TEST(one_input_requiring_grad) {
    torc_scope_push();
    torc_generator *g = torc_generator_new(3);
    torc_tensor *x = torc_randn(TORC_SHAPE(9, 4), TORC_DTYPE_F32, g), *w = torc_randn(TORC_SHAPE(6, 4), TORC_DTYPE_F32, g);
    torc_tensor *t = targets(TORC_SHAPE(9), 6, true, g);
    for (int k = 0; k < 2; k++) {
        result f = run(true, x, w, t, 0, -100, TORC_REDUCTION_MEAN, k == 0, k == 1);
        result c = run(false, x, w, t, 0, -100, TORC_REDUCTION_MEAN, k == 0, k == 1);
        compare(&f, &c, 1e-6);
        result_free(&f), result_free(&c);
    }
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

// uint8 class indices, compared with ignore_index as int64 (255 ignores), as nll_loss takes them.
START_TEST(uint8_targets) {
    torc_scope_push();
    torc_generator *g = torc_generator_new(10);
    torc_tensor *x = torc_randn(TORC_SHAPE(6, 3), TORC_DTYPE_F32, g), *w = torc_randn(TORC_SHAPE(5, 3), TORC_DTYPE_F32, g);
    torc_tensor *t = torc_tensor_from((uint8_t[]){0, 4, 255, 2, 1, 255}, TORC_SHAPE(6), TORC_DTYPE_U8);
    for (int r = 0; r < 2; r++) {
        result f = run(true, x, w, t, 0, 255, reds[r], true, true), c = run(false, x, w, t, 0, 255, reds[r], true, true);
        compare(&f, &c, 1e-6);
        result_free(&f), result_free(&c);
    }
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

START_TEST(every_target_ignored) {
    torc_scope_push();
    torc_generator *g = torc_generator_new(4);
    torc_tensor *x = torc_randn(TORC_SHAPE(5, 3), TORC_DTYPE_F32, g), *w = torc_randn(TORC_SHAPE(4, 3), TORC_DTYPE_F32, g);
    torc_tensor *t = torc_full(TORC_SHAPE(5), 7, TORC_DTYPE_I64);  // ignore_index 7, beyond the classes
    result f = run(true, x, w, t, 0, 7, TORC_REDUCTION_MEAN, true, true);
    ck_assert(isnan(f.loss[0]));  // 0 / 0, as PyTorch
    for (int64_t i = 0; i < f.n_dx; i++) ck_assert(f.dx[i] == 0.0);
    for (int64_t i = 0; i < f.n_dw; i++) ck_assert(f.dw[i] == 0.0);
    result c = run(false, x, w, t, 0, 7, TORC_REDUCTION_MEAN, true, true);
    compare(&f, &c, 0);
    result_free(&f), result_free(&c);
    f = run(true, x, w, t, 0, 7, TORC_REDUCTION_SUM, true, true);
    ck_assert(f.loss[0] == 0.0);
    result_free(&f);
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

// Under no_grad the loss alone, for NONE too (the fused path then takes that reduction).
START_TEST(no_grad_values) {
    torc_scope_push();
    torc_generator *g = torc_generator_new(5);
    torc_tensor *x = torc_randn(TORC_SHAPE(2, 5, 3), TORC_DTYPE_F32, g), *w = torc_randn(TORC_SHAPE(7, 3), TORC_DTYPE_F32, g);
    torc_tensor *t = targets(TORC_SHAPE(2, 5), 6, true, g);
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    for (int r = 0; r < 3; r++) {
        torc_no_grad_begin();
        torc_tensor *a = torc_linear_cross_entropy(x, w, t, 6, -100, reds[r]);
        torc_no_grad_end();
        ck_assert_msg(a != NULL, "%s", torc_last_error());
        ck_assert(!torc_requires_grad(a));
        result c = run(false, x, w, t, 6, -100, reds[r], false, false);
        if (reds[r] == TORC_REDUCTION_NONE) tu_assert_shape(a, 2, 5);
        double *v = tu_values(a);
        assert_close("loss", v, c.loss, c.n_loss, 1e-6);
        free(v), result_free(&c);
    }
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

// f64: the gradients against central differences of the fused loss itself.
START_TEST(f64_gradients_match_finite_differences) {
    torc_scope_push();
    torc_generator *g = torc_generator_new(6);
    const int64_t N = 5, C = 3, V = 6, K = 4;  // weight (V, C), K classes
    torc_tensor *x = torc_randn(TORC_SHAPE(N, C), TORC_DTYPE_F64, g), *w = torc_randn(TORC_SHAPE(V, C), TORC_DTYPE_F64, g);
    torc_tensor *t = targets(TORC_SHAPE(N), K, true, g);
    for (int r = 0; r < 2; r++) {
        result f = run(true, x, w, t, K, -100, reds[r], true, true);
        torc_tensor *ins[2] = {x, w};
        const double *an[2] = {f.dx, f.dw};
        for (int k = 0; k < 2; k++) {
            torc_tensor *flat = torc_reshape(ins[k], TORC_SHAPE(-1));
            for (int64_t i = 0; i < torc_numel(flat); i++) {
                torc_tensor *e = torc_select(flat, 0, i);
                double v0, lp, lm;
                ck_assert_int_eq(torc_item(e, &v0), TORC_OK);
                const double h = 1e-6;
                ck_assert_int_eq(torc_fill_(e, torc_s(v0 + h)), TORC_OK);
                ck_assert_int_eq(torc_item(torc_linear_cross_entropy(x, w, t, K, -100, reds[r]), &lp), TORC_OK);
                ck_assert_int_eq(torc_fill_(e, torc_s(v0 - h)), TORC_OK);
                ck_assert_int_eq(torc_item(torc_linear_cross_entropy(x, w, t, K, -100, reds[r]), &lm), TORC_OK);
                ck_assert_int_eq(torc_fill_(e, torc_s(v0)), TORC_OK);
                const double fd = (lp - lm) / (2 * h);
                ck_assert_msg(fabs(fd - an[k][i]) <= 1e-7 * (1 + fabs(fd)), "%s[%lld]: %.12g, finite difference %.12g",
                              k ? "dw" : "dx", (long long)i, an[k][i], fd);
            }
        }
        result_free(&f);
    }
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

// bf16 autocast: matmuls in bf16, the log-softmax in f32; close to the composition under the
// same autocast (the gradient matmuls differ: f32 outputs here, rounded to bf16 there).
START_TEST(bf16_autocast_close_to_the_composition) {
    torc_scope_push();
    torc_generator *g = torc_generator_new(7);
    torc_tensor *x = torc_randn(TORC_SHAPE(70, 16), TORC_DTYPE_F32, g);
    torc_tensor *w = torc_mul_scalar(torc_randn(TORC_SHAPE(40, 16), TORC_DTYPE_F32, g), torc_s(0.3));
    torc_tensor *t = targets(TORC_SHAPE(70), 37, true, g);
    ck_assert_int_eq(torc_autocast_begin(TORC_DTYPE_BF16), TORC_OK);
    result f = run(true, x, w, t, 37, -100, TORC_REDUCTION_MEAN, true, true);
    result c = run(false, x, w, t, 37, -100, TORC_REDUCTION_MEAN, true, true);
    torc_tensor *l = torc_linear_cross_entropy(x, w, t, 37, -100, TORC_REDUCTION_MEAN);
    ck_assert_int_eq(torc_autocast_end(), TORC_OK);
    ck_assert_int_eq(torc_get_dtype(l), TORC_DTYPE_F32);
    ck_assert_msg(fabs(f.loss[0] - c.loss[0]) <= 1e-6 * fabs(c.loss[0]), "loss %.9g, composed %.9g", f.loss[0], c.loss[0]);
    assert_close("dx", f.dx, c.dx, f.n_dx, 2e-2);
    assert_close("dw", f.dw, c.dw, f.n_dw, 2e-2);
    // and far from f32's: the matmul did run in bf16
    result e = run(true, x, w, t, 37, -100, TORC_REDUCTION_MEAN, false, false);
    ck_assert_msg(f.loss[0] != e.loss[0], "bf16 loss equals f32's");
    result_free(&f), result_free(&c), result_free(&e);
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

// Each bad input fails as the composition fails (same status, same message), leaving no gradient.
static void same_error(torc_tensor *x, torc_tensor *w, torc_tensor *t, int64_t n_classes, torc_reduction red,
                       torc_status want, const char *substr) {
    torc_scope_push();
    torc_clear_error();
    const int64_t V = n_classes ? n_classes : torc_size(w, 0);
    torc_tensor *wn = torc_narrow(w, 0, 0, V);
    torc_tensor *c = wn ? torc_cross_entropy_ex(torc_matmul(x, torc_transpose(wn, 0, 1)), t, -100, red, 0.0) : NULL;
    ck_assert(c == NULL);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", torc_last_error());
    const torc_status st = torc_last_status();
    torc_clear_error();
    ck_assert(torc_linear_cross_entropy(x, w, t, n_classes, -100, red) == NULL);
    tu_assert_error(want, substr);
    ck_assert_int_eq(st, want);
    ck_assert_str_eq(torc_last_error(), msg);
    ck_assert(torc_grad(x) == NULL && torc_grad(w) == NULL);
    torc_clear_error();
    torc_scope_pop();
}

START_TEST(bad_inputs_fail_as_the_composition) {
    torc_scope_push();
    torc_generator *g = torc_generator_new(8);
    torc_tensor *x = torc_randn(TORC_SHAPE(4, 3), TORC_DTYPE_F32, g), *w = torc_randn(TORC_SHAPE(5, 3), TORC_DTYPE_F32, g);
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    ck_assert_int_eq(torc_set_requires_grad(w, true), TORC_OK);
    torc_tensor *t = torc_tensor_from((int64_t[]){0, 1, 2, 3}, TORC_SHAPE(4), TORC_DTYPE_I64);
    same_error(x, w, torc_tensor_from((int64_t[]){0, 1}, TORC_SHAPE(2), TORC_DTYPE_I64), 0, TORC_REDUCTION_MEAN,
               TORC_ERR_SHAPE, "Expected input batch_size (4) to match target batch_size (2).");
    same_error(x, w, torc_zeros(TORC_SHAPE(4, 2), TORC_DTYPE_I64), 0, TORC_REDUCTION_MEAN, TORC_ERR_SHAPE,
               "0D or 1D target tensor expected, multi-target not supported");
    same_error(x, w, torc_zeros(TORC_SHAPE(4), TORC_DTYPE_I32), 0, TORC_REDUCTION_MEAN, TORC_ERR_DTYPE,
               "expected target dtype to be Long or Byte, but got Int");
    same_error(x, w, torc_zeros(TORC_SHAPE(4), TORC_DTYPE_F32), 0, TORC_REDUCTION_SUM, TORC_ERR_DTYPE,
               "expected target dtype to be Long or Byte, but got Float");
    same_error(x, w, t, 7, TORC_REDUCTION_MEAN, TORC_ERR_INDEX, "start (0) + length (7) exceeds dimension size (5).");
    same_error(x, torc_randn(TORC_SHAPE(5, 2), TORC_DTYPE_F32, g), t, 0, TORC_REDUCTION_MEAN, TORC_ERR_SHAPE,
               "mm: mat1 and mat2 shapes cannot be multiplied (4x3 and 2x5)");
    same_error(x, torc_randn(TORC_SHAPE(5, 3), TORC_DTYPE_F64, g), t, 0, TORC_REDUCTION_MEAN, TORC_ERR_DTYPE,
               "expected m1 and m2 to have the same dtype, but got: float != double");
    same_error(x, w, torc_tensor_from((int64_t[]){0, 1, 5, -3}, TORC_SHAPE(4), TORC_DTYPE_I64), 0, TORC_REDUCTION_MEAN,
               TORC_ERR_INDEX, "Target 5 is out of bounds.");
    same_error(x, w, t, 3, TORC_REDUCTION_NONE, TORC_ERR_INDEX, "Target 3 is out of bounds.");  // composed there
    same_error(x, w, t, 0, (torc_reduction)7, TORC_ERR_INVALID_ARG, "7 is not a valid value for reduction");
    torc_tensor *x3 = torc_randn(TORC_SHAPE(2, 2, 3), TORC_DTYPE_F32, g);
    ck_assert(torc_linear_cross_entropy(x3, w, torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_I64), 0, -100, TORC_REDUCTION_MEAN) == NULL);
    tu_assert_error(TORC_ERR_SHAPE, "Expected target size [2, 2], got [2, 3]");
    torc_clear_error();
    ck_assert(torc_linear_cross_entropy(NULL, w, t, 0, -100, TORC_REDUCTION_MEAN) == NULL);
    tu_assert_error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    torc_clear_error();
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

// GPT-2's head at N = 1024 with C = 64: the matmuls counted as the composition's (forward 2 N C
// V, backward 4 N C V) and the activations' peak of loss + backward under a third of the 2 N V f32
// the composition keeps (logits and log-softmax): 123 MiB against 393 with chunks of 256 rows.
START_TEST(flops_and_memory_at_gpt2s_vocabulary) {
    torc_scope_push();
    const int64_t N = 1024, C = 64, V = 50257, Vp = 50304;
    torc_generator *g = torc_generator_new(9);
    torc_tensor *x = torc_randn(TORC_SHAPE(N, C), TORC_DTYPE_F32, g);
    torc_tensor *w = torc_mul_scalar(torc_randn(TORC_SHAPE(Vp, C), TORC_DTYPE_F32, g), torc_s(0.02));
    torc_tensor *t = targets(TORC_SHAPE(N), V, false, g);
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    ck_assert_int_eq(torc_set_requires_grad(w, true), TORC_OK);
    torc_device *dev = torc_get_device(x);
    torc_memory_stats before, after;
    ck_assert_int_eq(torc_memory_stats_get(dev, &before), TORC_OK);
    torc_memory_reset_peak(dev);
    torc_flops_reset();
    torc_scope_push();
    torc_tensor *loss = torc_linear_cross_entropy(x, w, t, V, -100, TORC_REDUCTION_MEAN);
    ck_assert_msg(loss != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_backward(loss, NULL, false), TORC_OK);
    torc_scope_pop();
    ck_assert_int_eq(torc_memory_stats_get(dev, &after), TORC_OK);
    const uint64_t fwd = torc_flops(TORC_PHASE_FORWARD, TORC_OP_MATMUL, -1), bwd = torc_flops(TORC_PHASE_BACKWARD, TORC_OP_MATMUL, -1);
    ck_assert_uint_eq(fwd, (uint64_t)(2 * N * C * V));
    ck_assert_uint_eq(bwd, (uint64_t)(4 * N * C * V));
    const uint64_t peak = after.total_peak - before.total_in_use, composed = 2 * (uint64_t)(N * V) * 4;
    fprintf(stderr, "linear_cross_entropy N=%lld C=%lld V=%lld: peak %.1f MiB above the inputs, the composition's "
                    "logits and log-softmax alone %.1f MiB\n", (long long)N, (long long)C, (long long)V,
            (double)peak / 1048576.0, (double)composed / 1048576.0);
    ck_assert_msg(peak * 3 < composed, "peak %llu bytes, not a third of %llu", (unsigned long long)peak,
                  (unsigned long long)composed);
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

// The op against the composition inside the chunks: a device backend that declines
// cross_entropy (tests/plugins/fake_device.c declines every op; its ops round-trip to the host under
// TORC_DEVICE_FALLBACK=1) gets log_softmax, gather, exp_, mul_ and scatter_add, never the op; its
// loss and gradients match the reference's, which runs the op (every reduction, ignored rows).
START_TEST(declining_device_backend_composes_the_chunks) {
    char path[1024];
    const char *build = getenv("TORC_BUILD_DIR");
    snprintf(path, sizeof path, "%s/tests/plugins/libtorc_fakedev.so", build ? build : ".");
    FILE *f = fopen(path, "rb");
    if (!f) {  // built with the tests (tests/data.cmake); absent from a partial build
        fprintf(stderr, "declining_device_backend_composes_the_chunks: skipped, %s not built\n", path);
        return;
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/tests/plugins", build ? build : ".");
    ck_assert_int_eq(setenv("TORC_PLUGIN_PATH", path, 1), 0);
    ck_assert_int_eq(setenv("TORC_DEVICE_FALLBACK", "1", 1), 0);
    torc_device *fake = torc_device_get("fakedev"), *ref = torc_device_get("reference"), *def = torc_default_device();
    ck_assert_msg(fake != NULL, "%s", torc_last_error());
    torc_scope_push();
    torc_generator *g = torc_generator_new(12);
    torc_tensor *x = torc_randn(TORC_SHAPE(11, 5), TORC_DTYPE_F32, g), *w = torc_randn(TORC_SHAPE(9, 5), TORC_DTYPE_F32, g);
    torc_tensor *t = targets(TORC_SHAPE(11), 8, true, g);
    for (int r = 0; r < 3; r++) {
        result res[2];
        torc_device *devs[2] = {ref, fake};
        for (int k = 0; k < 2; k++) {
            ck_assert_int_eq(torc_set_default_device(devs[k]), TORC_OK);
            torc_fallback_reset();
            torc_no_grad_begin();  // REDUCTION_NONE with gradients composes the whole op: ask for none there
            torc_tensor *xd = torc_to_device(x, devs[k]), *wd = torc_to_device(w, devs[k]), *td = torc_to_device(t, devs[k]);
            torc_no_grad_end();
            res[k] = run(true, xd, wd, td, 8, -100, reds[r], reds[r] != TORC_REDUCTION_NONE, reds[r] != TORC_REDUCTION_NONE);
            if (k == 1) {
                ck_assert_uint_eq(torc_fallback_count(TORC_OP_CROSS_ENTROPY), 0);
                ck_assert_uint_gt(torc_fallback_count(TORC_OP_LOG_SOFTMAX), 0);
            }
        }
        compare(&res[1], &res[0], 1e-6);
        result_free(&res[0]), result_free(&res[1]);
    }
    torc_set_default_device(def);
    torc_generator_free(g);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("linear_cross_entropy");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, small_shapes_match_the_composition);
    tcase_add_test(tc, chunk_boundaries_match_the_composition);
    tcase_add_test(tc, one_input_requiring_grad);
    tcase_add_test(tc, uint8_targets);
    tcase_add_test(tc, every_target_ignored);
    tcase_add_test(tc, no_grad_values);
    tcase_add_test(tc, f64_gradients_match_finite_differences);
    tcase_add_test(tc, bf16_autocast_close_to_the_composition);
    tcase_add_test(tc, bad_inputs_fail_as_the_composition);
    tcase_add_test(tc, flops_and_memory_at_gpt2s_vocabulary);
    tcase_add_test(tc, declining_device_backend_composes_the_chunks);
    suite_add_tcase(s, tc);
    return s;
}

// With an argument "bits": prints a hash of the loss's, dx's and dW's bytes at GPT-2's vocabulary
// over 1100 rows (4 chunks of 275) and exits; tests/linear_cross_entropy.cmake compares the line at 1 and 3
// threads (the chunking is the shapes' alone, dW's sum goes chunk after chunk).
static unsigned long long fnv(torc_tensor *t) {
    const size_t n = torc_nbytes(t);
    unsigned char *b = malloc(n ? n : 1);
    if (!b || torc_copy_to_host(torc_contiguous(t), b, n)) fprintf(stderr, "copy: %s\n", torc_last_error()), exit(1);
    unsigned long long h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    free(b);
    return h;
}

static int print_bits(void) {
    torc_scope_push();
    torc_generator *g = torc_generator_new(11);
    torc_tensor *x = torc_randn(TORC_SHAPE(1100, 16), TORC_DTYPE_F32, g), *w = torc_randn(TORC_SHAPE(50304, 16), TORC_DTYPE_F32, g);
    torc_tensor *t = torc_randint(0, 50257, TORC_SHAPE(1100), TORC_DTYPE_I64, g);
    if (torc_set_requires_grad(x, true) || torc_set_requires_grad(w, true)) return 1;
    torc_tensor *l = torc_linear_cross_entropy(x, w, t, 50257, -100, TORC_REDUCTION_MEAN);
    if (!l || torc_backward(l, NULL, true)) return fprintf(stderr, "%s\n", torc_last_error()), 1;
    printf("loss %016llx dx %016llx dw %016llx\n", fnv(l), fnv(torc_grad(x)), fnv(torc_grad(w)));
    torc_generator_free(g);
    torc_scope_pop();
    return 0;
}

int main(int argc, char **argv) { return argc > 1 && !strcmp(argv[1], "bits") ? print_bits() : tu_run(make_suite()); }
