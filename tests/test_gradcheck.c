// tests/test_gradcheck.c — every differentiable op's backward against central finite
// differences in f64 on the reference backend, on broadcast, non-contiguous and view inputs.
#include "ck.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "torc/torc.h"

// ---- the checker ----
// A case builds its output from leaf tensors (contiguous f64, made from host values); views,
// broadcasting and non-contiguous operands are part of the function, so the gradient is
// always taken with respect to the leaves. The analytic gradient of L = sum(out * v) for a
// fixed random v comes from torc_autograd_grad(out, v); the numeric one from
// (L(x + eps) - L(x - eps)) / 2eps per element, evaluated on the host.
typedef torc_tensor *(*gc_fn)(torc_tensor **x);

#define GC_MAX_IN 4
typedef struct gc_case {
    const char *name;
    const char *shapes;   // leaf shapes, "2x3 3" (a lone "s" is a zero-dim leaf)
    double lo, hi;        // values uniform in [lo, hi]
    bool either_sign;     // and then negated with probability 1/2 (keeps |x| >= lo)
    gc_fn fn;
} gc_case;

typedef struct leaf_spec {
    int n;
    int ndim[GC_MAX_IN];
    int64_t shape[GC_MAX_IN][TORC_MAX_DIMS];
    int64_t numel[GC_MAX_IN];
} leaf_spec;

static leaf_spec parse_shapes(const char *s) {
    leaf_spec L = {0};
    while (*s) {
        while (*s == ' ') s++;
        if (!*s) break;
        int i = L.n++;
        ck_assert_int_le(L.n, GC_MAX_IN);
        L.numel[i] = 1;
        if (*s == 's') {
            s++;
            continue;
        }
        for (;;) {
            char *end;
            long long v = strtoll(s, &end, 10);
            L.shape[i][L.ndim[i]++] = v;
            L.numel[i] *= v;
            s = end;
            if (*s != 'x') break;
            s++;
        }
    }
    return L;
}

static uint64_t g_rng;
static double uniform01(void) {
    g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

// Builds the leaves from host values and evaluates the case; returns out (scope-owned).
static torc_tensor *build(const gc_case *c, const leaf_spec *L, double **h, torc_tensor **leaves, bool grad) {
    for (int i = 0; i < L->n; i++) {
        leaves[i] = torc_tensor_from(h[i], L->ndim[i], L->shape[i], TORC_DTYPE_F64);
        ck_assert_msg(leaves[i] != NULL, "%s: %s", c->name, torc_last_error());
        if (grad) ck_assert_int_eq(torc_set_requires_grad(leaves[i], true), TORC_OK);
    }
    torc_tensor *out = c->fn(leaves);
    ck_assert_msg(out != NULL, "%s: forward failed: %s", c->name, torc_last_error());
    return out;
}

static double loss_at(const gc_case *c, const leaf_spec *L, double **h, const double *v) {
    torc_scope_push();
    torc_no_grad_begin();
    torc_tensor *leaves[GC_MAX_IN];
    torc_tensor *out = build(c, L, h, leaves, false);
    const int64_t n = torc_numel(out);
    double *o = tu_values(out), sum = 0;
    for (int64_t k = 0; k < n; k++) sum += o[k] * v[k];
    free(o);
    torc_no_grad_end();
    torc_scope_pop();
    return sum;
}

static void gradcheck(const gc_case *c) {
    const double eps = 1e-6, atol = 1e-5, rtol = 1e-4;
    leaf_spec L = parse_shapes(c->shapes);
    g_rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)strlen(c->name) * 1000003u;
    double *h[GC_MAX_IN];
    for (int i = 0; i < L.n; i++) {
        h[i] = malloc(sizeof(double) * (size_t)(L.numel[i] ? L.numel[i] : 1));
        for (int64_t k = 0; k < L.numel[i]; k++) {
            double x = c->lo + (c->hi - c->lo) * uniform01();
            h[i][k] = c->either_sign && uniform01() < 0.5 ? -x : x;
        }
    }
    torc_scope_push();
    torc_tensor *leaves[GC_MAX_IN], *grads[GC_MAX_IN];
    torc_tensor *out = build(c, &L, h, leaves, true);
    ck_assert_msg(torc_requires_grad(out), "%s: output does not require grad", c->name);
    ck_assert_msg(torc_grad_fn_name(out) != NULL, "%s: output has no grad_fn", c->name);
    const int64_t n_out = torc_numel(out);
    double *v = malloc(sizeof(double) * (size_t)(n_out ? n_out : 1));
    for (int64_t k = 0; k < n_out; k++) v[k] = uniform01() * 2 - 1;
    torc_tensor *vt = torc_tensor_from(v, torc_ndim(out), torc_shape(out), TORC_DTYPE_F64);
    ck_assert_msg(torc_autograd_grad(1, &out, &vt, L.n, leaves, false, true, grads) == TORC_OK, "%s: grad failed: %s",
                  c->name, torc_last_error());
    for (int i = 0; i < L.n; i++) {
        double *a = NULL;
        if (grads[i]) {
            ck_assert_int_eq(torc_get_dtype(grads[i]), TORC_DTYPE_F64);
            tu_assert_dims_at(__FILE__, __LINE__, c->name, torc_ndim(grads[i]), torc_shape(grads[i]), L.ndim[i],
                              L.shape[i]);
            a = tu_values(grads[i]);
        }
        for (int64_t k = 0; k < L.numel[i]; k++) {
            const double x0 = h[i][k];
            h[i][k] = x0 + eps;
            const double lp = loss_at(c, &L, h, v);
            h[i][k] = x0 - eps;
            const double lm = loss_at(c, &L, h, v);
            h[i][k] = x0;
            const double num = (lp - lm) / (2 * eps), ana = a ? a[k] : 0.0;
            ck_assert_msg(fabs(num - ana) <= atol + rtol * fabs(num),
                          "%s: d/d input %d [%lld]: analytic %.10g, numeric %.10g", c->name, i, (long long)k, ana, num);
        }
        free(a);
    }
    torc_scope_pop();
    free(v);
    for (int i = 0; i < L.n; i++) free(h[i]);
}

// ---- the cases ----
#define X0 x[0]
#define X1 x[1]
#define X2 x[2]
#define F1(name, expr) \
    static torc_tensor *name(torc_tensor **x) { \
        (void)x; \
        return (expr); \
    }
static torc_tensor *tr(torc_tensor *t) { return torc_transpose(t, 0, 1); }  // non-contiguous
static torc_tensor *i64(int n, const int64_t *v, int ndim, const int64_t *shape) {
    (void)n;
    return torc_tensor_from(v, ndim, shape, TORC_DTYPE_I64);
}
static torc_tensor *mask_of(int n, const bool *v, int ndim, const int64_t *shape) {
    (void)n;
    return torc_tensor_from(v, ndim, shape, TORC_DTYPE_BOOL);
}

// unary, on transposed (non-contiguous) inputs
F1(f_neg, torc_neg(tr(X0)))
F1(f_abs, torc_abs(tr(X0)))
F1(f_sign, torc_sign(X0))
F1(f_sqrt, torc_sqrt(tr(X0)))
F1(f_rsqrt, torc_rsqrt(X0))
F1(f_square, torc_square(tr(X0)))
F1(f_reciprocal, torc_reciprocal(X0))
F1(f_exp, torc_exp(tr(X0)))
F1(f_log, torc_log(X0))
F1(f_sin, torc_sin(tr(X0)))
F1(f_cos, torc_cos(X0))
F1(f_tanh, torc_tanh(tr(X0)))
F1(f_sigmoid, torc_sigmoid(X0))
F1(f_relu, torc_relu(tr(X0)))
F1(f_gelu, torc_gelu(X0, false))
F1(f_gelu_tanh, torc_gelu(tr(X0), true))
F1(f_erf, torc_erf(X0))
F1(f_erfinv, torc_erfinv(tr(X0)))
F1(f_pow_scalar, torc_pow_scalar(tr(X0), torc_s(2.5)))
F1(f_pow_int, torc_pow_scalar(X0, torc_s(3)))
F1(f_pow_zero, torc_pow_scalar(X0, torc_s(0.0)))
// binary, broadcasting (2,3) with (3), (2,1,3) with (4,3), scalars, zero-dim tensors
F1(f_add, torc_add(X0, X1))
F1(f_add_scaled, torc_add_scaled(tr(X0), X1, torc_s(-2.5)))
F1(f_sub, torc_sub(X0, X1))
F1(f_mul, torc_mul(X0, tr(X1)))
F1(f_div, torc_div(X0, X1))
F1(f_pow, torc_pow(X0, X1))
F1(f_maximum, torc_maximum(X0, X1))
F1(f_minimum, torc_minimum(tr(X0), X1))
F1(f_zero_dim, torc_mul(torc_add(X0, X1), X1))
F1(f_scalars, torc_rdiv_scalar(torc_rsub_scalar(torc_mul_scalar(torc_add_scalar(X0, torc_s(1.5)), torc_s(3.0)),
                                                torc_s(40.0)), torc_s(2.0)))
F1(f_where, torc_where(torc_gt_scalar(X2, torc_s(0.0)), X0, X1))
F1(f_inputs_twice, torc_mul(torc_add(X0, X0), torc_exp(X0)))
// fused pointwise, out of place (broadcast, transposed) and in place on a non-leaf
F1(f_addcmul, torc_addcmul(X0, tr(X1), X2, torc_s(-1.5)))
F1(f_addcdiv, torc_addcdiv(X0, X1, X2, torc_s(0.75)))
F1(f_lerp_small, torc_lerp(tr(X0), X1, torc_s(0.3)))
F1(f_lerp_large, torc_lerp(X0, X1, torc_s(0.8)))
static torc_tensor *f_addcmul_(torc_tensor **x) {
    torc_tensor *t = torc_mul_scalar(X0, torc_s(2.0));
    return t && torc_addcmul_(t, X1, X2, torc_s(0.5)) == TORC_OK ? t : NULL;
}
static torc_tensor *f_addcdiv_(torc_tensor **x) {
    torc_tensor *t = torc_add_scalar(X0, torc_s(1.0));
    return t && torc_addcdiv_(t, X1, X2, torc_s(-2.0)) == TORC_OK ? t : NULL;
}
static torc_tensor *f_lerp_(torc_tensor **x) {
    torc_tensor *t = torc_square(X0);
    return t && torc_lerp_(t, X1, torc_s(0.7)) == TORC_OK ? t : NULL;
}
// reductions
F1(f_sum_all, torc_sum(tr(X0), TORC_ALL_DIMS, false))
F1(f_sum_dim, torc_sum(X0, TORC_DIMS(0, 2), false))
F1(f_sum_keep, torc_sum(X0, TORC_DIMS(-1), true))
F1(f_mean_all, torc_mean(X0, TORC_ALL_DIMS, false))
F1(f_mean_dim, torc_mean(tr(X0), TORC_DIMS(1), false))
F1(f_prod_all, torc_prod(X0, TORC_ALL_DIMS, false))
F1(f_prod_dim, torc_prod(X0, TORC_DIMS(1), true))
F1(f_amax, torc_amax(X0, TORC_DIMS(1), false))
F1(f_amin_all, torc_amin(tr(X0), TORC_ALL_DIMS, false))
F1(f_var, torc_var(X0, TORC_DIMS(1), 1.0, false))
F1(f_var_all, torc_var(tr(X0), TORC_ALL_DIMS, 0.0, true))
F1(f_std, torc_std(X0, TORC_DIMS(0), 1.0, false))
F1(f_norm2, torc_norm(X0, 2.0, TORC_ALL_DIMS, false))
F1(f_norm1, torc_norm(X0, 1.0, TORC_DIMS(1), false))
F1(f_norm3, torc_norm(tr(X0), 3.0, TORC_DIMS(0), true))
F1(f_norm_inf, torc_norm(X0, INFINITY, TORC_DIMS(1), false))
F1(f_logsumexp, torc_logsumexp(tr(X0), TORC_DIMS(1), false))
F1(f_softmax, torc_softmax(X0, 1))
F1(f_softmax0, torc_softmax(tr(X0), 0))
F1(f_log_softmax, torc_log_softmax(X0, -1))
// matmul, every rank combination
F1(f_mm, torc_matmul(X0, X1))
F1(f_mm_t, torc_matmul(tr(X0), tr(X1)))
F1(f_dot, torc_matmul(X0, X1))
F1(f_mv, torc_matmul(X0, X1))
F1(f_vm, torc_matmul(X0, X1))
F1(f_bmm, torc_matmul(X0, X1))
F1(f_bmm_bcast_b, torc_matmul(X0, X1))
F1(f_bmm_bcast_a, torc_matmul(X0, X1))
F1(f_bmm_bcast_both, torc_matmul(X0, X1))
F1(f_bmv, torc_matmul(X0, X1))
// indexing and copies
static torc_tensor *f_index_select(torc_tensor **x) {
    return torc_index_select(X0, 1, i64(4, (int64_t[]){2, 0, 2, 1}, 1, (int64_t[]){4}));
}
static torc_tensor *f_gather(torc_tensor **x) {
    return torc_gather(X0, 1, i64(6, (int64_t[]){0, 2, 1, 1, 2, 2}, 2, (int64_t[]){3, 2}));
}
static torc_tensor *f_masked_select(torc_tensor **x) {
    return torc_masked_select(X0, mask_of(3, (bool[]){true, false, true}, 1, (int64_t[]){3}));
}
static torc_tensor *f_index_add(torc_tensor **x) {
    return torc_index_add(X0, 0, i64(3, (int64_t[]){1, 0, 1}, 1, (int64_t[]){3}), X1);
}
static torc_tensor *f_scatter_add(torc_tensor **x) {
    return torc_scatter_add(X0, 1, i64(4, (int64_t[]){0, 0, 2, 1}, 2, (int64_t[]){2, 2}), X1);
}
static torc_tensor *f_masked_scatter(torc_tensor **x) {
    return torc_masked_scatter(X0, mask_of(3, (bool[]){true, false, true}, 1, (int64_t[]){3}), X1);
}
F1(f_triu, torc_triu(X0, 0))
F1(f_tril, torc_tril(tr(X0), -1))
static torc_tensor *f_cat(torc_tensor **x) { return torc_cat(3, (torc_tensor *[]){X0, tr(X1), X2}, 0); }
static torc_tensor *f_cat1(torc_tensor **x) { return torc_cat(2, (torc_tensor *[]){X0, X1}, 1); }
static torc_tensor *f_cat4(torc_tensor **x) { return torc_cat(4, (torc_tensor *[]){X0, X1, X2, x[3]}, -1); }
static torc_tensor *f_stack(torc_tensor **x) { return torc_stack(2, (torc_tensor *[]){X0, X1}, 1); }
F1(f_clone, torc_mul(torc_clone(tr(X0)), X0))
F1(f_contiguous, torc_exp(torc_contiguous(tr(X0))))
F1(f_to_device, torc_mul(torc_to_device(X0, torc_device_get("reference")), X0))
// views (the gradient reaches the base through each)
F1(f_view, torc_exp(torc_view(X0, TORC_SHAPE(3, 2))))
F1(f_reshape_t, torc_exp(torc_reshape(tr(X0), TORC_SHAPE(6))))
F1(f_transpose, torc_mul(tr(X0), X1))
F1(f_permute, torc_exp(torc_permute(X0, 3, (int[]){2, 0, 1})))
F1(f_select, torc_exp(torc_select(X0, 1, 2)))
F1(f_slice_step, torc_exp(torc_slice(X0, 1, 0, 5, 2)))
F1(f_narrow, torc_exp(torc_narrow(tr(X0), 0, 1, 2)))
F1(f_expand, torc_mul(torc_expand(X0, TORC_SHAPE(2, 4, 3)), X1))
F1(f_unsqueeze, torc_exp(torc_unsqueeze(X0, 1)))
F1(f_squeeze, torc_exp(torc_squeeze(X0, 1)))
F1(f_squeeze_all, torc_exp(torc_squeeze_all(X0)))
F1(f_flatten, torc_exp(torc_flatten(X0, 0, 1)))
F1(f_as_strided, torc_exp(torc_as_strided(X0, TORC_SHAPE(2, 2), (int64_t[]){3, 1}, 1)))
F1(f_as_strided_overlap, torc_exp(torc_as_strided(X0, TORC_SHAPE(4, 3), (int64_t[]){1, 1}, 0)))
F1(f_view_chain, torc_sum(torc_select(torc_transpose(torc_slice(X0, 0, 1, 4, 2), 0, 1), 0, 1), TORC_ALL_DIMS, false))
// composites of other ops (einsum and einops patterns)
F1(f_einsum, TORC_EINSUM("b i h, b j h -> b i j", X0, X1))
F1(f_einsum_trace, TORC_EINSUM("i i ->", X0))
F1(f_einsum3, TORC_EINSUM("i j, j k, k -> i", X0, X1, X2))
F1(f_rearrange, torc_exp(torc_rearrange(tr(X0), "a (h w) -> (w a) h", "h=2")))
F1(f_reduce_max, torc_reduce(X0, "b (h 2) (w 2) -> b h w", "max"))
F1(f_repeat, torc_mul(torc_repeat(X0, "h w -> h (w c)", "c=2"), X1))
// losses
F1(f_mse, torc_mse_loss(X0, X1))
static torc_tensor *f_cross_entropy(torc_tensor **x) {
    return torc_cross_entropy(X0, i64(3, (int64_t[]){2, 0, 3}, 1, (int64_t[]){3}));
}
static torc_tensor *f_cross_entropy_1d(torc_tensor **x) { return torc_cross_entropy(X0, i64(1, (int64_t[]){1}, 0, NULL)); }
static torc_tensor *f_nll(torc_tensor **x) {
    return torc_nll_loss(torc_log_softmax(X0, 1), i64(2, (int64_t[]){1, 1}, 1, (int64_t[]){2}));
}
// cross_entropy_ex: ignored targets, label smoothing, spatial dims, class probabilities (the
// target is a leaf too)
static torc_tensor *f_ce_ignore_smooth(torc_tensor **x) {
    return torc_cross_entropy_ex(X0, i64(4, (int64_t[]){2, -100, 0, 3}, 1, (int64_t[]){4}), -100, TORC_REDUCTION_MEAN,
                                 0.2);
}
static torc_tensor *f_ce_spatial_none(torc_tensor **x) {
    return torc_cross_entropy_ex(tr(X0), i64(6, (int64_t[]){1, 2, 0, 5, 2, 1}, 2, (int64_t[]){2, 3}), 5,
                                 TORC_REDUCTION_NONE, 0.0);
}
static torc_tensor *f_ce_probs(torc_tensor **x) {
    return torc_cross_entropy_ex(X0, torc_softmax(X1, 1), -100, TORC_REDUCTION_SUM, 0.1);
}
static torc_tensor *f_nll_ex_sum(torc_tensor **x) {
    return torc_nll_loss_ex(X0, i64(3, (int64_t[]){1, 7, 0}, 1, (int64_t[]){3}), 7, TORC_REDUCTION_SUM);
}
// embedding: repeated indices accumulate (padding_idx's zero gradient is no derivative: test_embedding)
static torc_tensor *f_embedding(torc_tensor **x) {
    return torc_embedding(X0, i64(6, (int64_t[]){3, 1, 3, 0, 3, 2}, 2, (int64_t[]){2, 3}), TORC_EMBEDDING_NO_PADDING);
}
// scaled_dot_product_attention: broadcast batch, causal, a float mask with a row that attends
// nothing, a bool mask, grouped-query heads with a scale
F1(f_sdpa, torc_scaled_dot_product_attention(X0, X1, X2, NULL, 0.0, false, NAN, false, NULL))
F1(f_sdpa_causal, torc_scaled_dot_product_attention(X0, torc_transpose(X1, 1, 2), X2, NULL, 0.0, true, NAN, false, NULL))
static torc_tensor *f_sdpa_float_mask(torc_tensor **x) {
    const double m[] = {0, -1, -INFINITY, 0.5, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 2, 0, 0, -INFINITY};
    return torc_scaled_dot_product_attention(X0, X1, X2, torc_tensor_from(m, TORC_SHAPE(3, 4), TORC_DTYPE_F64), 0.0,
                                             false, NAN, false, NULL);
}
static torc_tensor *f_sdpa_bool_mask(torc_tensor **x) {
    const bool m[] = {1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0};
    return torc_scaled_dot_product_attention(X0, X1, X2, mask_of(12, m, 2, (int64_t[]){3, 4}), 0.0, false, NAN, false,
                                             NULL);
}
F1(f_sdpa_gqa, torc_scaled_dot_product_attention(X0, X1, X2, NULL, 0.0, true, 0.7, true, NULL))
// dropout and attention dropout: the same mask at every evaluation (a generator seeded per call)
static torc_tensor *f_dropout(torc_tensor **x) {
    torc_generator *g = torc_generator_new(7);
    torc_tensor *r = torc_dropout(torc_mul(X0, X0), 0.4, true, g);
    torc_generator_free(g);
    return r;
}
static torc_tensor *f_sdpa_dropout(torc_tensor **x) {
    torc_generator *g = torc_generator_new(11);
    torc_tensor *r = torc_scaled_dot_product_attention(X0, X1, X2, NULL, 0.3, false, NAN, false, g);
    torc_generator_free(g);
    return r;
}

static const gc_case g_cases[] = {
    {"neg", "2x3", -2, 2, false, f_neg},
    {"abs", "2x3", 0.2, 2, true, f_abs},
    {"sign", "5", 0.2, 2, true, f_sign},
    {"sqrt", "2x3", 0.5, 3, false, f_sqrt},
    {"rsqrt", "4", 0.5, 3, false, f_rsqrt},
    {"square", "2x3", -2, 2, false, f_square},
    {"reciprocal", "4", 0.5, 2, true, f_reciprocal},
    {"exp", "2x3", -2, 2, false, f_exp},
    {"log", "4", 0.3, 3, false, f_log},
    {"sin", "2x3", -3, 3, false, f_sin},
    {"cos", "4", -3, 3, false, f_cos},
    {"tanh", "2x3", -2, 2, false, f_tanh},
    {"sigmoid", "5", -3, 3, false, f_sigmoid},
    {"relu", "2x3", 0.1, 2, true, f_relu},
    {"gelu", "6", -3, 3, false, f_gelu},
    {"gelu_tanh", "2x3", -3, 3, false, f_gelu_tanh},
    {"erf", "5", -2, 2, false, f_erf},
    {"erfinv", "2x3", -0.9, 0.9, false, f_erfinv},
    {"pow_scalar", "2x3", 0.3, 2, false, f_pow_scalar},
    {"pow_int", "4", -2, 2, false, f_pow_int},
    {"pow_zero", "3", -2, 2, false, f_pow_zero},
    {"add_broadcast", "2x3 3", -2, 2, false, f_add},
    {"add_scaled", "3x2 3", -2, 2, false, f_add_scaled},
    {"sub_broadcast", "2x1x3 4x3", -2, 2, false, f_sub},
    {"mul_transposed", "2x3 3x2", -2, 2, false, f_mul},
    {"div_broadcast", "2x3 2x1", 0.5, 2, true, f_div},
    {"pow", "2x3 3", 0.5, 2, false, f_pow},
    {"maximum", "2x3 3", -2, 2, false, f_maximum},
    {"minimum", "3x2 2x3", -2, 2, false, f_minimum},
    {"zero_dim", "2x3 s", -2, 2, false, f_zero_dim},
    {"addcmul", "2x3 3x2 3", -2, 2, false, f_addcmul},
    {"addcdiv", "2x3 2x1 3", 0.5, 2, true, f_addcdiv},
    {"lerp_small", "3x2 2x3", -2, 2, false, f_lerp_small},
    {"lerp_large", "2x3 3", -2, 2, false, f_lerp_large},
    {"addcmul_inplace", "2x3 3 2x1", -2, 2, false, f_addcmul_},
    {"addcdiv_inplace", "2x3 3 2x3", 0.5, 2, true, f_addcdiv_},
    {"lerp_inplace", "2x3 2x3", -2, 2, false, f_lerp_},
    {"scalar_ops", "2x3", 0.5, 2, false, f_scalars},
    {"where", "2x3 3 2x3", -2, 2, false, f_where},
    {"input_used_twice", "4", -1, 1, false, f_inputs_twice},
    {"sum_all", "2x3", -2, 2, false, f_sum_all},
    {"sum_dims", "2x3x4", -2, 2, false, f_sum_dim},
    {"sum_keepdim", "2x3", -2, 2, false, f_sum_keep},
    {"mean_all", "2x3", -2, 2, false, f_mean_all},
    {"mean_dim", "2x3", -2, 2, false, f_mean_dim},
    {"prod_all", "5", 0.5, 1.5, true, f_prod_all},
    {"prod_dim", "2x4", 0.5, 1.5, true, f_prod_dim},
    {"amax", "3x4", -2, 2, false, f_amax},
    {"amin_all", "2x3", -2, 2, false, f_amin_all},
    {"var", "3x4", -2, 2, false, f_var},
    {"var_all", "2x3", -2, 2, false, f_var_all},
    {"std", "4x3", -2, 2, false, f_std},
    {"norm2", "2x3", -2, 2, false, f_norm2},
    {"norm1", "2x3", 0.2, 2, true, f_norm1},
    {"norm3", "2x3", 0.2, 2, true, f_norm3},
    {"norm_inf", "3x4", -2, 2, false, f_norm_inf},
    {"logsumexp", "3x4", -2, 2, false, f_logsumexp},
    {"softmax", "3x4", -2, 2, false, f_softmax},
    {"softmax_dim0", "4x3", -2, 2, false, f_softmax0},
    {"log_softmax", "3x4", -2, 2, false, f_log_softmax},
    {"mm", "2x3 3x4", -1, 1, false, f_mm},
    {"mm_transposed", "3x2 4x3", -1, 1, false, f_mm_t},
    {"dot", "5 5", -1, 1, false, f_dot},
    {"mv", "2x3 3", -1, 1, false, f_mv},
    {"vm", "3 3x4", -1, 1, false, f_vm},
    {"bmm", "2x3x4 2x4x2", -1, 1, false, f_bmm},
    {"bmm_broadcast_b", "2x3x4 4x5", -1, 1, false, f_bmm_bcast_b},
    {"bmm_broadcast_a", "3x4 2x4x5", -1, 1, false, f_bmm_bcast_a},
    {"bmm_broadcast_both", "2x1x3x4 3x4x2", -1, 1, false, f_bmm_bcast_both},
    {"batched_mv", "2x3x4 4", -1, 1, false, f_bmv},
    {"index_select", "2x3", -2, 2, false, f_index_select},
    {"gather", "3x3", -2, 2, false, f_gather},
    {"masked_select", "2x3", -2, 2, false, f_masked_select},
    {"index_add", "2x3 3x3", -2, 2, false, f_index_add},
    {"scatter_add", "2x3 2x3", -2, 2, false, f_scatter_add},
    {"masked_scatter", "2x3 5", -2, 2, false, f_masked_scatter},
    {"triu", "3x4", -2, 2, false, f_triu},
    {"tril", "3x3", -2, 2, false, f_tril},
    {"cat", "2x3 3x1 1x3", -2, 2, false, f_cat},
    {"cat_dim1", "2x3 2x2", -2, 2, false, f_cat1},
    {"cat4", "2x1 2x3 2x2 2x1", -2, 2, false, f_cat4},
    {"stack", "2x3 2x3", -2, 2, false, f_stack},
    {"clone", "3x3", -2, 2, false, f_clone},
    {"contiguous", "2x3", -2, 2, false, f_contiguous},
    {"to_device", "4", -2, 2, false, f_to_device},
    {"view", "2x3", -1, 1, false, f_view},
    {"reshape_copy", "2x3", -1, 1, false, f_reshape_t},
    {"transpose", "3x2 2x3", -1, 1, false, f_transpose},
    {"permute", "2x3x4", -1, 1, false, f_permute},
    {"select", "2x3", -1, 1, false, f_select},
    {"slice_step", "2x5", -1, 1, false, f_slice_step},
    {"narrow", "2x3", -1, 1, false, f_narrow},
    {"expand", "4x1 2x4x3", -1, 1, false, f_expand},
    {"unsqueeze", "2x3", -1, 1, false, f_unsqueeze},
    {"squeeze", "2x1x3", -1, 1, false, f_squeeze},
    {"squeeze_all", "1x3x1", -1, 1, false, f_squeeze_all},
    {"flatten", "2x3x2", -1, 1, false, f_flatten},
    {"as_strided", "2x3", -1, 1, false, f_as_strided},
    {"as_strided_overlapping", "6", -1, 1, false, f_as_strided_overlap},
    {"view_chain", "5x3", -1, 1, false, f_view_chain},
    {"einsum_bmm", "2x3x4 2x2x4", -1, 1, false, f_einsum},
    {"einsum_trace", "3x3", -1, 1, false, f_einsum_trace},
    {"einsum_chain", "2x3 3x4 4", -1, 1, false, f_einsum3},
    {"rearrange", "4x3", -1, 1, false, f_rearrange},
    {"reduce_max_pool", "2x4x4", -1, 1, false, f_reduce_max},
    {"repeat", "2x3 2x6", -1, 1, false, f_repeat},
    {"mse_loss", "2x3 2x3", -2, 2, false, f_mse},
    {"cross_entropy", "3x4", -2, 2, false, f_cross_entropy},
    {"cross_entropy_1d", "4", -2, 2, false, f_cross_entropy_1d},
    {"nll_loss", "2x3", -2, 2, false, f_nll},
    {"cross_entropy_ignore_smooth", "4x5", -2, 2, false, f_ce_ignore_smooth},
    {"cross_entropy_spatial_none", "4x2x3", -2, 2, false, f_ce_spatial_none},
    {"cross_entropy_probs", "3x4 3x4", -2, 2, false, f_ce_probs},
    {"nll_loss_ex_sum", "3x4", -2, 2, false, f_nll_ex_sum},
    {"embedding", "4x3", -2, 2, false, f_embedding},
    {"sdpa", "2x3x4 1x5x4 2x5x2", -1, 1, false, f_sdpa},
    {"sdpa_causal", "2x4x3 2x3x4 2x4x2", -1, 1, false, f_sdpa_causal},
    {"sdpa_float_mask", "2x3x2 2x4x2 2x4x3", -1, 1, false, f_sdpa_float_mask},
    {"sdpa_bool_mask", "3x2 4x2 4x3", -1, 1, false, f_sdpa_bool_mask},
    {"sdpa_gqa", "1x4x3x2 1x2x3x2 1x2x3x2", -1, 1, false, f_sdpa_gqa},
    {"dropout", "3x5", -2, 2, false, f_dropout},
    {"sdpa_dropout", "2x3x4 2x5x4 2x5x2", -1, 1, false, f_sdpa_dropout},
};
#define N_CASES ((int)(sizeof g_cases / sizeof g_cases[0]))

START_TEST(test_gradcheck_op) {
    torc_set_default_device(torc_device_get("reference"));
    gradcheck(&g_cases[_i]);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("gradcheck");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_gradcheck_op, 0, N_CASES);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
