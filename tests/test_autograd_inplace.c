// tests/test_autograd_inplace.c — in-place ops in the autograd graph: history rebased onto the
// op (PyTorch's semantics), CopySlices through views, saved-tensor version errors, errors.
#include "testutil.h"

#define F64 TORC_DTYPE_F64
static torc_tensor *vec(int n, const double *v) { return torc_tensor_from(v, 1, (int64_t[]){n}, F64); }
#define VEC(...) vec((int)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)), (double[]){__VA_ARGS__})
static torc_tensor *leaf(torc_tensor *t) {
    ck_assert_int_eq(torc_set_requires_grad(t, true), TORC_OK);
    return t;
}
static void ok(torc_status st) { ck_assert_msg(st == TORC_OK, "status %d: %s", st, torc_last_error()); }
static torc_tensor *sum(torc_tensor *t) { return torc_sum(t, TORC_ALL_DIMS, false); }
static torc_tensor *sl(torc_tensor *t, int64_t start, int64_t end) { return torc_slice(t, 0, start, end, 1); }
static double item_at(torc_tensor *t, int64_t i) {
    double v;
    ok(torc_item(torc_select(t, 0, i), &v));
    return v;
}
#define FAILS_WITH(call, status, text) \
    do { \
        ck_assert_int_eq((call), (status)); \
        tu_assert_error((status), (text)); \
    } while (0)

// ---- the cases of tools/golden/gen_inplace_golden.py (same names, same programs) ----
// Each builds `out` from the leaves x (3) and w (3); the loss is sum(out * k), k = 1, -2, 3, ...
typedef torc_tensor *(*case_fn)(torc_tensor *x, torc_tensor *w);

static torc_tensor *case_add_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul_scalar(x, torc_s(2));
    ok(torc_add_(y, w));
    return y;
}
static torc_tensor *case_add_scaled_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul_scalar(x, torc_s(2));
    ok(torc_add_scaled_(y, w, torc_s(-3)));
    return y;
}
static torc_tensor *case_sub_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul(x, x);
    ok(torc_sub_(y, w));
    return y;
}
static torc_tensor *case_mul_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul_scalar(x, torc_s(1.5));
    ok(torc_mul_(y, w));
    return y;
}
static torc_tensor *case_div_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_add_scalar(x, torc_s(3));
    ok(torc_div_(y, w));
    return y;
}
static torc_tensor *case_scalar_ops_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul(x, w);
    ok(torc_add_scalar_(y, torc_s(2)));
    ok(torc_sub_scalar_(y, torc_s(0.5)));
    ok(torc_mul_scalar_(y, torc_s(-3)));
    ok(torc_div_scalar_(y, torc_s(4)));
    return y;
}
static torc_tensor *case_pow_scalar_(torc_tensor *x, torc_tensor *w) {
    (void)w;
    torc_tensor *y = torc_add_scalar(x, torc_s(3));
    ok(torc_pow_scalar_(y, torc_s(3)));
    return y;
}
static torc_tensor *case_neg_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul(x, w);
    ok(torc_neg_(y));
    return y;
}
static torc_tensor *case_sqrt_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_add(torc_mul(x, x), torc_mul(w, w));
    ok(torc_sqrt_(y));
    return y;
}
#define UNARY_CASE(op) \
    static torc_tensor *case_##op##_(torc_tensor *x, torc_tensor *w) { \
        torc_tensor *y = torc_mul(x, w); \
        ok(torc_##op##_(y)); \
        return y; \
    }
UNARY_CASE(exp)
UNARY_CASE(relu)
UNARY_CASE(sigmoid)
static torc_tensor *case_maximum_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul_scalar(x, torc_s(1));
    ok(torc_maximum_(y, w));
    return y;
}
static torc_tensor *case_addcmul_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul_scalar(x, torc_s(2));
    ok(torc_addcmul_(y, x, w, torc_s(0.5)));
    return y;
}
static torc_tensor *case_addcdiv_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul_scalar(x, torc_s(2));
    ok(torc_addcdiv_(y, x, w, torc_s(-2)));
    return y;
}
static torc_tensor *case_copy_into_plain(torc_tensor *x, torc_tensor *w) {
    torc_tensor *z = torc_zeros(TORC_SHAPE(3), F64);
    ok(torc_copy_(z, torc_mul(x, w)));
    return z;
}
static torc_tensor *case_copy_broadcast_cast(torc_tensor *x, torc_tensor *w) {
    (void)w;
    torc_tensor *z = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    ok(torc_copy_(z, x));
    return z;
}
static torc_tensor *case_fill_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul(x, w);
    ok(torc_fill_(y, torc_s(2)));
    return torc_add(y, x);
}
static torc_tensor *case_chain(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul_scalar(x, torc_s(1));
    ok(torc_add_(y, w));
    ok(torc_mul_(y, w));
    ok(torc_sigmoid_(y));
    return y;
}
static torc_tensor *case_view_select_mul_(torc_tensor *x, torc_tensor *w) {
    (void)w;
    torc_tensor *y = torc_mul_scalar(x, torc_s(1));
    ok(torc_mul_scalar_(torc_select(y, 0, 0), torc_s(3)));
    return y;
}
static torc_tensor *case_view_slice_mul_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul_scalar(x, torc_s(2));
    ok(torc_mul_(sl(y, 1, 3), sl(w, 1, 3)));
    return y;
}
static torc_tensor *case_view_transpose_add_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul(torc_unsqueeze(x, 1), torc_unsqueeze(w, 0));  // (3, 3)
    ok(torc_add_(torc_select(torc_transpose(y, 0, 1), 0, 0), x));         // column 0 of y
    return y;
}
static torc_tensor *case_view_of_view_mul_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_view(torc_mul(x, w), TORC_SHAPE(3, 1));
    ok(torc_mul_(torc_select(sl(y, 1, 3), 1, 0), sl(x, 1, 3)));
    return y;
}
static torc_tensor *case_view_as_strided_exp_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_mul(x, w);
    ok(torc_exp_(torc_as_strided(y, TORC_SHAPE(2), (int64_t[]){2}, 0)));  // elements 0 and 2
    return y;
}
static torc_tensor *case_view_permute_copy_(torc_tensor *x, torc_tensor *w) {
    torc_tensor *y = torc_zeros(TORC_SHAPE(2, 3), F64);
    ok(torc_copy_(torc_select(torc_permute(y, 2, (int[]){1, 0}), 1, 1), torc_mul(x, w)));  // row 1 of y
    return y;
}
static torc_tensor *case_view_read_after_base_write(torc_tensor *x, torc_tensor *w) {
    (void)w;
    torc_tensor *y = torc_mul_scalar(x, torc_s(2));
    torc_tensor *v = sl(y, 0, 2);
    ok(torc_exp_(y));
    return v;
}
static torc_tensor *case_view_read_after_other_view_write(torc_tensor *x, torc_tensor *w) {
    (void)w;
    torc_tensor *y = torc_mul_scalar(x, torc_s(1));
    torc_tensor *a = sl(y, 0, 2), *b = sl(y, 1, 3);
    ok(torc_mul_scalar_(a, torc_s(3)));
    return b;
}
static torc_tensor *case_copy_into_slice_of_constant(torc_tensor *x, torc_tensor *w) {
    torc_tensor *z = torc_zeros(TORC_SHAPE(3), F64);
    ok(torc_copy_(sl(z, 0, 2), torc_mul(sl(x, 1, 3), sl(w, 1, 3))));
    return z;
}

typedef struct golden_case {
    const char *name;
    const char *grad_fn;  // out's grad_fn
    double gx[3], gw[3];
    int has_gw;           // 0: w gets no gradient (torch leaves w.grad None)
} golden_case;

// ---- generated by tools/golden/gen_inplace_golden.py with torch 2.15.0+cu132 ----
static const golden_case g_golden[] = {
    {"add_", "AddBackward0", {2, -4, 6}, {1, -2, 3}, 1},
    {"add_scaled_", "AddBackward0", {2, -4, 6}, {-3, 6, -9}, 1},
    {"sub_", "SubBackward0", {1, 6, 12}, {-1, 2, -3}, 1},
    {"mul_", "MulBackward0", {2.25, -0.75, -3.375}, {0.75, 4.5, 9}, 1},
    {"div_", "DivBackward0", {0.66666666666666663, -8, -4}, {-1.5555555555555556, 48, -26.666666666666668}, 1},
    {"scalar_ops_", "DivBackward0", {-1.125, 0.375, 1.6875}, {-0.375, -2.25, -4.5}, 1},
    {"pow_scalar_", "PowBackward0", {36.75, -13.5, 225}, {0, 0, 0}, 0},
    {"neg_", "NegBackward0", {-1.5, 0.5, 2.25}, {-0.5, -3, -6}, 1},
    {"sqrt_", "SqrtBackward0", {0.31622776601683794, 1.9727878476642875, 2.8089875327071336}, {0.94868329805051377, -0.32879797461071458, -1.0533703247651751}, 1},
    {"exp_", "ExpBackward0", {3.1755000249190122, -0.34364463939548612, -0.50204286033396706}, {1.0585000083063374, 2.0618678363729166, 1.338780960890579}, 1},
    {"relu_", "ReluBackward0", {1.5, 0, -0}, {0.5, -0, 0}, 1},
    {"sigmoid_", "SigmoidBackward0", {0.32684249064272108, -0.1207064506264762, -0.33557951715824891}, {0.10894749688090702, 0.72423870375885713, 0.89487871242199712}, 1},
    {"maximum_", "MaximumBackward0", {0, 0, 3}, {1, -2, 0}, 1},
    {"addcmul_", "AddcmulBackward0", {2.75, -4.25, 4.875}, {0.25, 1.5, 3}, 1},
    {"addcdiv_", "AddcdivBackward0", {0.66666666666666674, 12, 14}, {0.44444444444444442, 96, 21.333333333333332}, 1},
    {"copy_into_plain", "CopyBackwards", {1.5, -0.5, -2.25}, {0.5, 3, 6}, 1},
    {"copy_broadcast_cast", "CopyBackwards", {-3, 3, -3}, {0, 0, 0}, 0},
    {"fill_", "AddBackward0", {1, -2, 3}, {0, -0, 0}, 1},
    {"chain", "SigmoidBackward0", {0.067764989596367994, -0.12199723418735885, -0.45498710595730146}, {0.15811830905819199, 0.48798893674943533, 0.3033247373048677}, 1},
    {"view_select_mul_", "CopySlices", {3, -2, 3}, {0, 0, 0}, 0},
    {"view_slice_mul_", "CopySlices", {2, -1, -4.5}, {0, 6, 12}, 1},
    {"view_transpose_add_", "CopySlices", {-0.25, -4.25, 8.75}, {20.5, -24.5, 28.5}, 1},
    {"view_of_view_mul_", "AsStridedBackward0", {1.5, 1.5, -9}, {0.5, -4.5, 12}, 1},
    {"view_as_strided_exp_", "CopySlices", {3.1755000249190122, -0.5, -0.50204286033396706}, {1.0585000083063374, 3, 1.338780960890579}, 1},
    {"view_permute_copy_", "CopySlices", {-6, 1.25, 4.5}, {-2, -7.5, -12}, 1},
    {"view_read_after_base_write", "AsStridedBackward0", {5.4365636569180902, -0.19914827347145578, 0}, {0, 0, 0}, 0},
    {"view_read_after_other_view_write", "AsStridedBackward0", {0, 3, -2}, {0, 0, 0}, 0},
    {"copy_into_slice_of_constant", "CopySlices", {0, 0.25, 1.5}, {0, -1.5, -4}, 1},
};
// ---- end of generated block ----

static const struct { const char *name; case_fn fn; } g_cases[] = {
#define C(n) {#n, case_##n}
    C(add_), C(add_scaled_), C(sub_), C(mul_), C(div_), C(scalar_ops_), C(pow_scalar_), C(neg_), C(sqrt_),
    C(exp_), C(relu_), C(sigmoid_), C(maximum_), C(addcmul_), C(addcdiv_), C(copy_into_plain),
    C(copy_broadcast_cast), C(fill_), C(chain), C(view_select_mul_), C(view_slice_mul_),
    C(view_transpose_add_), C(view_of_view_mul_), C(view_as_strided_exp_), C(view_permute_copy_),
    C(view_read_after_base_write), C(view_read_after_other_view_write), C(copy_into_slice_of_constant),
#undef C
};
#define N_CASES ((int)(sizeof g_cases / sizeof g_cases[0]))
_Static_assert(sizeof g_cases / sizeof g_cases[0] == sizeof g_golden / sizeof g_golden[0], "one golden row per case");

static const double X0[3] = {0.5, -1.5, 2.0}, W0[3] = {1.5, 0.25, -0.75};

// sum(out * k), k = 1, -2, 3, -4, ... in out's shape and dtype.
static torc_tensor *weighted_loss(torc_tensor *out) {
    const int64_t n = torc_numel(out);
    double k[16];
    ck_assert_int_le(n, 16);
    for (int64_t i = 0; i < n; i++) k[i] = (double)(i + 1) * (i % 2 ? -1 : 1);
    torc_tensor *kt = torc_to_dtype(torc_reshape(vec((int)n, k), torc_ndim(out), torc_shape(out)), torc_get_dtype(out));
    return sum(torc_mul(out, kt));
}

// The loss of case c at x, w (leaves requiring grad or not).
static double case_loss(int c, const double *xv, const double *wv, bool grad) {
    torc_scope_push();
    torc_tensor *x = vec(3, xv), *w = vec(3, wv);
    if (grad) leaf(x), leaf(w);
    double l;
    ok(torc_item(weighted_loss(g_cases[c].fn(x, w)), &l));
    torc_scope_pop();
    return l;
}

START_TEST(every_inplace_op_matches_torch) {
    const golden_case *g = &g_golden[_i];
    ck_assert_str_eq(g_cases[_i].name, g->name);
    torc_scope_push();
    torc_tensor *x = leaf(vec(3, X0)), *w = leaf(vec(3, W0));
    torc_tensor *out = g_cases[_i].fn(x, w);
    ck_assert_msg(!strcmp(torc_grad_fn_name(out), g->grad_fn), "%s: grad_fn %s, torch has %s", g->name,
                  torc_grad_fn_name(out), g->grad_fn);
    ok(torc_backward(weighted_loss(out), NULL, false));
    tu_assert_values(torc_grad(x), g->gx, 3, 1e-12);
    if (g->has_gw) tu_assert_values(torc_grad(w), g->gw, 3, 1e-12);
    else ck_assert_msg(torc_grad(w) == NULL, "%s: w got a gradient; torch gives none", g->name);
    torc_scope_pop();
}
END_TEST

START_TEST(every_inplace_op_matches_finite_differences) {
    // Central differences of the same program run on leaves that do not require grad.
    const double eps = 1e-6;
    torc_scope_push();
    torc_tensor *x = leaf(vec(3, X0)), *w = leaf(vec(3, W0));
    torc_tensor *out = g_cases[_i].fn(x, w);
    const bool f64 = torc_get_dtype(out) == F64;
    ok(torc_backward(weighted_loss(out), NULL, false));
    double *gx = tu_values(torc_grad(x)), *gw = torc_grad(w) ? tu_values(torc_grad(w)) : NULL;
    for (int which = 0; which < 2; which++)
        for (int i = 0; i < 3; i++) {
            double xp[3], xm[3], wp[3], wm[3];
            memcpy(xp, X0, sizeof xp), memcpy(xm, X0, sizeof xm), memcpy(wp, W0, sizeof wp), memcpy(wm, W0, sizeof wm);
            double *p = which ? wp : xp, *m = which ? wm : xm;
            // A program that is linear in its inputs is exact for any step: f32 takes a large one.
            const double h = f64 ? eps : 0.25;
            p[i] += h, m[i] -= h;
            const double num = (case_loss(_i, xp, wp, false) - case_loss(_i, xm, wm, false)) / (2 * h);
            const double ana = which ? (gw ? gw[i] : 0.0) : gx[i];
            ck_assert_msg(fabs(num - ana) <= 1e-6 * (1 + fabs(num)), "%s: d/d%s[%d] autograd %.12g, numeric %.12g",
                          g_cases[_i].name, which ? "w" : "x", i, ana, num);
        }
    free(gx);
    free(gw);
    // The program records nothing when no input requires grad (and the result still matches).
    ck_assert_double_eq_tol(case_loss(_i, X0, W0, false), case_loss(_i, X0, W0, true), 1e-12);
    torc_scope_pop();
}
END_TEST

// ---- saved tensors and the version counter ----
START_TEST(output_saved_before_an_inplace_write_still_fails) {
    torc_scope_push();
    torc_tensor *x = leaf(torc_tensor_from((float[]){1, 2, 3}, TORC_SHAPE(3), TORC_DTYPE_F32));
    torc_tensor *s = torc_sigmoid(x), *loss = sum(s);
    ok(torc_add_scalar_(s, torc_s(1.0)));
    ck_assert_str_eq(torc_grad_fn_name(s), "AddBackward0");
    FAILS_WITH(torc_backward(loss, NULL, false), TORC_ERR_AUTOGRAD,
               "one of the variables needed for gradient computation has been modified by an inplace operation: "
               "[torch.FloatTensor [3]], which is output 0 of Sigmoid, is at version 1; expected version 0 instead.");
    // In place twice: sigmoid_ saved its result, the add_ after it changed it.
    torc_tensor *y = torc_mul_scalar(x, torc_s(1));
    ok(torc_sigmoid_(y));
    ok(torc_add_scalar_(y, torc_s(1.0)));
    FAILS_WITH(torc_backward(sum(y), NULL, false), TORC_ERR_AUTOGRAD,
               "[torch.FloatTensor [3]], which is output 0 of Sigmoid, is at version 2; expected version 1 instead.");
    // exp_ on a view saved the view.
    torc_tensor *z = torc_mul_scalar(x, torc_s(1));
    torc_tensor *v = sl(z, 1, 3);
    ok(torc_exp_(v));
    ok(torc_add_scalar_(v, torc_s(1.0)));
    FAILS_WITH(torc_backward(sum(z), NULL, false), TORC_ERR_AUTOGRAD,
               "[torch.FloatTensor [2]], which is output 0 of Exp, is at version 2; expected version 1 instead.");
    torc_scope_pop();
}
END_TEST

START_TEST(saved_inputs_name_the_grad_fn_their_tensor_has_now) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2)), *w = leaf(VEC(4, 5));
    // y.mul_(y): the saved operand is y itself, now the output of the mul_.
    torc_tensor *y = torc_mul_scalar(x, torc_s(1));
    ok(torc_mul_(y, y));
    FAILS_WITH(torc_backward(sum(y), NULL, false), TORC_ERR_AUTOGRAD,
               "[torch.DoubleTensor [2]], which is output 0 of Mul, is at version 1; expected version 0 instead.");
    torc_tensor *y2 = torc_mul_scalar(x, torc_s(1));
    ok(torc_addcmul_(y2, w, y2, torc_s(1)));
    FAILS_WITH(torc_backward(sum(y2), NULL, false), TORC_ERR_AUTOGRAD, "which is output 0 of Addcmul, is at version 1");
    // A write through a view rebases the base: CopySlices (torch names it by its C++ name).
    torc_tensor *h = torc_mul_scalar(x, torc_s(2)), *z = torc_mul(h, x);
    ok(torc_add_scalar_(torc_select(h, 0, 0), torc_s(1)));
    FAILS_WITH(torc_backward(sum(z), NULL, false), TORC_ERR_AUTOGRAD,
               "[torch.DoubleTensor [2]], which is output 0 of torch::autograd::CopySlices, is at version 1");
    // A saved view whose base was written since is now an AsStridedBackward0 of the base.
    torc_tensor *h2 = torc_mul_scalar(x, torc_s(2)), *v = torc_select(h2, 0, 0), *z2 = torc_mul(v, x);
    ok(torc_add_scalar_(h2, torc_s(1)));
    FAILS_WITH(torc_backward(sum(z2), NULL, false), TORC_ERR_AUTOGRAD,
               "[torch.DoubleTensor []], which is output 0 of AsStrided, is at version 1; expected version 0");
    // A tensor without history when it was saved, given one by copy_, then written under no_grad.
    torc_tensor *c = torc_zeros(TORC_SHAPE(2), F64), *z3 = torc_mul(c, x);
    ok(torc_copy_(c, w));
    torc_no_grad_begin();
    ok(torc_add_scalar_(c, torc_s(1)));
    torc_no_grad_end();
    FAILS_WITH(torc_backward(sum(z3), NULL, false), TORC_ERR_AUTOGRAD,
               "which is output 0 of torch::autograd::CopyBackwards, is at version 2; expected version 0");
    torc_tensor *f = torc_mul_scalar(x, torc_s(2));
    ok(torc_fill_(f, torc_s(1)));
    torc_tensor *z4 = torc_mul(f, x);
    torc_no_grad_begin();
    ok(torc_add_scalar_(f, torc_s(1)));
    torc_no_grad_end();
    FAILS_WITH(torc_backward(sum(z4), NULL, false), TORC_ERR_AUTOGRAD, "which is output 0 of Fill2, is at version 2");
    // The tensor died before backward: the name it had last.
    torc_tensor *d = torc_retain(torc_mul_scalar(x, torc_s(2))), *z5 = torc_mul(d, x);
    ok(torc_add_scalar_(d, torc_s(1)));
    torc_release(d);  // the scope still holds the first reference
    FAILS_WITH(torc_backward(sum(z5), NULL, false), TORC_ERR_AUTOGRAD, "which is output 0 of Add, is at version 1");
    torc_scope_pop();
}
END_TEST

START_TEST(old_value_of_self_is_saved_as_a_copy) {
    // PyTorch copies self before the write when the backward needs its old value, so a later
    // write to self does not invalidate it.
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3)), *w = leaf(VEC(4, 5, 6));
    torc_tensor *y = torc_mul_scalar(x, torc_s(1));
    ok(torc_mul_(y, w));  // d/dw = old y = x
    ok(torc_add_scalar_(y, torc_s(1)));
    ok(torc_backward(sum(y), NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(4, 5, 6), 0);
    tu_assert_values(torc_grad(w), TU_ARR(1, 2, 3), 0);
    ok(torc_set_grad(x, NULL));
    torc_tensor *p = torc_mul_scalar(x, torc_s(1));
    ok(torc_pow_scalar_(p, torc_s(2)));
    ok(torc_add_scalar_(p, torc_s(1)));
    ok(torc_backward(sum(p), NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(2, 4, 6), 0);
    // An operand that is not self is saved as itself: writing it is an error at backward.
    torc_tensor *c = VEC(2, 2, 2), *q = torc_mul_scalar(x, torc_s(1));
    ok(torc_mul_(q, c));
    ok(torc_add_scalar_(c, torc_s(1)));
    FAILS_WITH(torc_backward(sum(q), NULL, false), TORC_ERR_AUTOGRAD,
               "inplace operation: [torch.DoubleTensor [3]] is at version 1; expected version 0 instead.");
    torc_scope_pop();
}
END_TEST

START_TEST(every_inplace_op_bumps_the_version_once) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3)), *w = leaf(VEC(4, 5, 6));
    torc_tensor *y = torc_mul_scalar(x, torc_s(1)), *v = sl(y, 0, 2);
    torc_generator *gen = torc_generator_new(3);
    uint64_t ver = torc_version(y);
#define BUMPS(call, name) \
    do { \
        ok(call); \
        ck_assert_uint_eq(torc_version(y), ++ver); \
        ck_assert_str_eq(torc_grad_fn_name(y), name); \
    } while (0)
    BUMPS(torc_add_(y, w), "AddBackward0");
    BUMPS(torc_sub_scalar_(y, torc_s(1)), "SubBackward0");
    BUMPS(torc_maximum_(y, w), "MaximumBackward0");
    BUMPS(torc_addcdiv_(y, w, w, torc_s(1)), "AddcdivBackward0");
    BUMPS(torc_neg_(y), "NegBackward0");
    BUMPS(torc_relu_(y), "ReluBackward0");
    BUMPS(torc_copy_(y, w), "CopyBackwards");
    BUMPS(torc_zero_(y), "ZeroBackward0");
    BUMPS(torc_uniform_(y, 0, 1, gen), "UniformBackward0");
    BUMPS(torc_normal_(y, 0, 1, gen), "NormalBackward0");
    BUMPS(torc_mul_scalar_(v, torc_s(2)), "CopySlices");  // through the view: same storage
    ck_assert_uint_eq(torc_version(v), ver);
    ck_assert_str_eq(torc_grad_fn_name(v), "AsStridedBackward0");
#undef BUMPS
    // A write that fails changes neither the version nor the history.
    ck_assert_int_eq(torc_add_(y, VEC(1, 2)), TORC_ERR_SHAPE);
    ck_assert_int_eq(torc_copy_(y, VEC(1, 2)), TORC_ERR_SHAPE);
    ck_assert_uint_eq(torc_version(y), ver);
    ck_assert_str_eq(torc_grad_fn_name(y), "CopySlices");
    // relu_ saved its result, which the writes after it changed.
    FAILS_WITH(torc_backward(sum(y), NULL, false), TORC_ERR_AUTOGRAD, "which is output 0 of Relu, is at version");
    // normal_ / uniform_ / zero_ / fill_ pass no gradient to what was there before.
    torc_tensor *z = torc_mul_scalar(x, torc_s(1));
    ok(torc_normal_(sl(z, 0, 1), 0, 1, gen));
    ok(torc_uniform_(sl(z, 1, 2), 0, 1, gen));
    ok(torc_zero_(sl(z, 2, 3)));
    ok(torc_backward(sum(torc_mul(z, w)), NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(0, 0, 0), 0);
    tu_assert_values(torc_grad(w), TU_ARR(item_at(z, 0), item_at(z, 1), 0), 1e-15);
    torc_generator_free(gen);
    torc_scope_pop();
}
END_TEST

// ---- requires_grad propagation ----
START_TEST(writing_a_tensor_that_requires_grad_makes_the_target_require_grad) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3));
    torc_tensor *z = torc_zeros(TORC_SHAPE(3), F64);
    ck_assert(!torc_requires_grad(z));
    ok(torc_copy_(z, x));
    ck_assert(torc_requires_grad(z));
    ck_assert(!torc_is_leaf(z));
    ck_assert_str_eq(torc_grad_fn_name(z), "CopyBackwards");
    torc_tensor *m = torc_ones(TORC_SHAPE(3), F64);
    ok(torc_mul_(m, x));
    ck_assert_str_eq(torc_grad_fn_name(m), "MulBackward0");
    ok(torc_backward(sum(torc_add(z, m)), NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(2, 2, 2), 0);
    // Through a view of a constant: the base takes CopySlices, every view of it follows.
    torc_tensor *b = torc_zeros(TORC_SHAPE(3), F64), *other = sl(b, 1, 3);
    ok(torc_copy_(sl(b, 0, 2), sl(x, 0, 2)));
    ck_assert_str_eq(torc_grad_fn_name(b), "CopySlices");
    ck_assert(torc_requires_grad(other));
    ck_assert_str_eq(torc_grad_fn_name(other), "AsStridedBackward0");
    // Nothing is recorded under no_grad, into an integer tensor, or from constants.
    torc_tensor *n = torc_zeros(TORC_SHAPE(3), F64);
    torc_no_grad_begin();
    ok(torc_copy_(n, x));
    torc_no_grad_end();
    ck_assert(!torc_requires_grad(n));
    torc_tensor *i = torc_zeros(TORC_SHAPE(3), TORC_DTYPE_I64);
    ok(torc_copy_(i, x));
    ck_assert(!torc_requires_grad(i));
    tu_assert_values(i, TU_ARR(1, 2, 3), 0);
    torc_tensor *k = torc_zeros(TORC_SHAPE(3), F64);
    ok(torc_add_(k, VEC(1, 1, 1)));
    ck_assert(!torc_requires_grad(k) && torc_is_leaf(k));
    torc_scope_pop();
}
END_TEST

START_TEST(retain_grad_follows_the_tensor_to_its_new_grad_fn) {
    // PyTorch: y.retain_grad(); y.mul_(2) gives y.grad = d loss / d (y after the write).
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3));
    torc_tensor *y = torc_mul_scalar(x, torc_s(1));
    ok(torc_retain_grad(y));
    ok(torc_mul_scalar_(y, torc_s(2)));
    ok(torc_backward(sum(torc_mul_scalar(y, torc_s(3))), NULL, false));
    tu_assert_values(torc_grad(y), TU_ARR(3, 3, 3), 0);
    tu_assert_values(torc_grad(x), TU_ARR(6, 6, 6), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(functional_grad_and_retain_graph_through_copyslices) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3)), *w = leaf(VEC(4, 5, 6));
    torc_tensor *y = torc_mul_scalar(x, torc_s(2));
    ok(torc_mul_(sl(y, 1, 3), sl(w, 1, 3)));  // y = [2, 2*2*5, 2*3*6]
    torc_tensor *loss = sum(y), *g[2];
    ok(torc_autograd_grad(1, &loss, NULL, 2, (torc_tensor *[]){x, w}, true, false, g));
    tu_assert_values(g[0], TU_ARR(2, 10, 12), 0);
    tu_assert_values(g[1], TU_ARR(0, 4, 6), 0);
    ck_assert_ptr_null(torc_grad(x));
    ok(torc_backward(loss, NULL, false));  // the graph was retained
    tu_assert_values(torc_grad(x), TU_ARR(2, 10, 12), 0);
    // mul_ saved w's slice (and a copy of y's): a third run is the second-backward error.
    FAILS_WITH(torc_backward(loss, NULL, false), TORC_ERR_AUTOGRAD,
               "Trying to backward through the graph a second time");
    torc_scope_pop();
}
END_TEST

START_TEST(detached_and_long_chains) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3));
    // A detached alias is outside the graph: writing it leaves y's history alone (as torch).
    torc_tensor *y = torc_mul_scalar(x, torc_s(1));
    ok(torc_mul_scalar_(torc_detach(y), torc_s(2)));
    ck_assert_str_eq(torc_grad_fn_name(y), "MulBackward0");
    tu_assert_values(y, TU_ARR(2, 4, 6), 0);
    // Thousands of in-place ops on one tensor: a chain of nodes, freed without recursion.
    torc_tensor *c = torc_mul_scalar(x, torc_s(1));
    for (int i = 0; i < 3000; i++) ok(torc_add_scalar_(c, torc_s(1)));
    ok(torc_backward(sum(c), NULL, false));
    tu_assert_values(torc_grad(x), TU_ARR(1, 1, 1), 0);
    tu_assert_values(c, TU_ARR(3001, 3002, 3003), 0);
    torc_scope_pop();
}
END_TEST

START_TEST(views_of_another_dtype_and_the_no_grad_view_corner) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3));
    // An f32 base written through a view with an f64 operand: x's gradient comes back in f64.
    torc_tensor *z = torc_full(TORC_SHAPE(3), 2.0, TORC_DTYPE_F32);
    ok(torc_mul_(sl(z, 0, 2), sl(x, 0, 2)));
    ck_assert_str_eq(torc_grad_fn_name(z), "CopySlices");
    ok(torc_backward(sum(z), NULL, false));
    ck_assert_int_eq(torc_get_dtype(torc_grad(x)), F64);
    tu_assert_values(torc_grad(x), TU_ARR(2, 2, 0), 0);
    // Documented corner: a view made under no_grad is not re-derived when its base is written
    // in grad mode later (torch raises when it is next used); it stays a detached tensor.
    torc_tensor *y = torc_mul_scalar(x, torc_s(1));
    torc_no_grad_begin();
    torc_tensor *v = sl(y, 0, 2);
    torc_no_grad_end();
    ok(torc_mul_scalar_(y, torc_s(2)));
    ck_assert(!torc_requires_grad(v) && torc_is_leaf(v));
    tu_assert_values(v, TU_ARR(2, 4), 0);
    torc_scope_pop();
}
END_TEST

// ---- errors ----
START_TEST(inplace_errors_match_torch) {
    torc_scope_push();
    torc_tensor *x = leaf(VEC(1, 2, 3));
    FAILS_WITH(torc_add_scalar_(x, torc_s(1)), TORC_ERR_AUTOGRAD,
               "a leaf Variable that requires grad is being used in an in-place operation.");
    FAILS_WITH(torc_copy_(torc_select(x, 0, 1), torc_scalar_tensor(0, F64)), TORC_ERR_AUTOGRAD,
               "a view of a leaf Variable that requires grad is being used in an in-place operation.");
    tu_assert_values(x, TU_ARR(1, 2, 3), 0);
    torc_tensor *late = torc_zeros(TORC_SHAPE(2), F64), *lv = torc_select(late, 0, 0);  // viewed, then made a leaf
    ok(torc_set_requires_grad(late, true));
    FAILS_WITH(torc_fill_(lv, torc_s(1)), TORC_ERR_AUTOGRAD, "a view of a leaf Variable that requires grad");
    ck_assert(torc_is_leaf(late));
    // A view made under no_grad cannot be written with grad mode on (it can under no_grad).
    torc_tensor *y = torc_mul_scalar(x, torc_s(1));
    torc_no_grad_begin();
    torc_tensor *v = sl(y, 0, 2);
    torc_no_grad_end();
    FAILS_WITH(torc_mul_scalar_(v, torc_s(2)), TORC_ERR_AUTOGRAD,
               "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that "
               "this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
               "both the view and the inplace either both inside the no_grad block (if you don't want the inplace "
               "to be tracked) or both outside (if you want the inplace to be tracked).");
    FAILS_WITH(torc_copy_(torc_select(v, 0, 0), torc_select(x, 0, 0)), TORC_ERR_AUTOGRAD,
               "Output 0 of Select is a view of a view which was created in no_grad mode and is being modified "
               "inplace with grad mode enabled.");
    torc_no_grad_begin();
    ok(torc_mul_scalar_(v, torc_s(2)));
    torc_no_grad_end();
    tu_assert_values(y, TU_ARR(2, 4, 3), 0);
    // Writing an expanded tensor writes one element twice, with or without grad.
    torc_tensor *e = torc_expand(torc_zeros(TORC_SHAPE(1), F64), TORC_SHAPE(3));
    FAILS_WITH(torc_add_scalar_(e, torc_s(1)), TORC_ERR_INVALID_ARG,
               "unsupported operation: more than one element of the written-to tensor refers to a single memory "
               "location. Please clone() the tensor before performing the operation.");
    FAILS_WITH(torc_copy_(e, VEC(1, 2, 3)), TORC_ERR_INVALID_ARG, "more than one element of the written-to tensor");
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("autograd_inplace");
    TCase *tc = tcase_create("inplace");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, every_inplace_op_matches_torch, 0, N_CASES);
    tcase_add_loop_test(tc, every_inplace_op_matches_finite_differences, 0, N_CASES);
    tcase_add_test(tc, output_saved_before_an_inplace_write_still_fails);
    tcase_add_test(tc, saved_inputs_name_the_grad_fn_their_tensor_has_now);
    tcase_add_test(tc, old_value_of_self_is_saved_as_a_copy);
    tcase_add_test(tc, every_inplace_op_bumps_the_version_once);
    tcase_add_test(tc, writing_a_tensor_that_requires_grad_makes_the_target_require_grad);
    tcase_add_test(tc, retain_grad_follows_the_tensor_to_its_new_grad_fn);
    tcase_add_test(tc, functional_grad_and_retain_graph_through_copyslices);
    tcase_add_test(tc, detached_and_long_chains);
    tcase_add_test(tc, views_of_another_dtype_and_the_no_grad_view_corner);
    tcase_add_test(tc, inplace_errors_match_torch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
