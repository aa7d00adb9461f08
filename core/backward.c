// core/backward.c — the backward formula of every differentiable op, written with public torc
// ops (so backward runs on every backend and its FLOPs are counted), and the grad rule table.
#include <math.h>
#include <string.h>

#include "autograd-impl.h"

#define K_SQRT_2_OVER_PI 0.79788456080286535588   // sqrt(2/pi)
#define K_2_OVER_SQRT_PI 1.12837916709551257390   // 2/sqrt(pi)
#define K_SQRT1_2 0.70710678118654752440          // 1/sqrt(2)

// Formulas return a status; every torc call that yields NULL has set the error already.
#define TRY(x) \
    do { \
        if (!(x)) return torc_last_status(); \
    } while (0)
#define IN(i) torc__saved_at(n, (i))
#define OUT torc__saved_at(n, TORC__SAVED_OUT)
#define T(x) ((torc_tensor *)(x))
#define BW(name) static torc_status name(const torc_node *n, const torc_tensor *g, const bool *need, torc_tensor **gin)

// NULL-propagating forms of the ops the formulas chain: after a failure they skip the call (a
// public op given NULL would keep the first error too, torc__null_arg, but still run its checks).
#define W1(fn) \
    static torc_tensor *op_##fn(const torc_tensor *a) { return a ? torc_##fn(a) : NULL; }
#define W2(fn) \
    static torc_tensor *op_##fn(const torc_tensor *a, const torc_tensor *b) { return a && b ? torc_##fn(a, b) : NULL; }
#define WS(fn) \
    static torc_tensor *op_##fn(const torc_tensor *a, double s) { return a ? torc_##fn(a, torc_s(s)) : NULL; }
W1(neg) W1(sign) W1(square) W1(exp) W1(log) W1(sin) W1(cos) W1(tanh) W1(erf) W1(abs) W1(logical_not)
W2(mul) W2(div) W2(add) W2(sub) W2(pow) W2(eq) W2(gt) W2(lt) W2(logical_and)
WS(mul_scalar) WS(div_scalar) WS(add_scalar) WS(sub_scalar) WS(rsub_scalar) WS(pow_scalar) WS(eq_scalar)
WS(ne_scalar) WS(ge_scalar) WS(le_scalar) WS(rdiv_scalar) WS(lt_scalar) WS(floor_divide_scalar) W2(floor_divide)
static torc_tensor *op_where(const torc_tensor *c, const torc_tensor *a, const torc_tensor *b) {
    return c && a && b ? torc_where(c, a, b) : NULL;
}
static torc_tensor *op_sum_keep(const torc_tensor *t, int nd, const int *dims) {
    return t ? torc_sum(t, nd, dims, true) : NULL;
}

// ---- helpers ----
torc_tensor *torc__zeros_on(torc_device *dev, torc_dtype dtype, int ndim, const int64_t *shape) {
    torc_tensor *z = torc__new(dev, dtype, ndim, shape);
    if (z && torc__fill(z, 0.0)) {
        torc_release(z);
        return NULL;
    }
    return z ? torc__register(z) : NULL;
}

// t reshaped to (ndim, shape), or t itself (a new registered reference) when it has that shape
// already: a gradient that is no view of a temporary can become a leaf's .grad without a copy.
static torc_tensor *reshape_to(const torc_tensor *t, int ndim, const int64_t *shape) {
    if (t && t->ndim == ndim && !memcmp(t->shape, shape, (size_t)ndim * sizeof *shape))
        return torc__register(torc_retain(T(t)));
    return t ? torc_reshape(T(t), ndim, shape) : NULL;
}

torc_tensor *torc__sum_to(const torc_tensor *g, int ndim, const int64_t *shape) {
    const int lead = g->ndim - ndim;
    int dims[TORC_MAX_DIMS], nd = 0;
    for (int i = 0; i < g->ndim; i++)
        if (i < lead || (shape[i - lead] == 1 && g->shape[i] != 1)) dims[nd++] = i;
    if (nd == 0) return reshape_to(g, ndim, shape);
    torc_tensor *s = torc_sum(g, nd, dims, true);
    return reshape_to(s, ndim, shape);
}

static int mask_dims(uint32_t mask, int ndim, int *dims) {
    int nd = 0;
    for (int i = 0; i < ndim; i++)
        if ((mask >> i) & 1) dims[nd++] = i;
    return nd;
}

// Number of elements a reduction folded into each output element.
static double reduced_count(const torc_node *n) {
    double c = 1;
    for (int i = 0; i < n->in[0].ndim; i++)
        if ((n->params.reduce.mask >> i) & 1) c *= (double)n->in[0].shape[i];
    return c;
}

// A reduction's output (or its gradient) with the reduced dims back as size 1.
static torc_tensor *keepdim(const torc_node *n, const torc_tensor *t) {
    const torc__meta *m = &n->in[0];
    if (!t) return NULL;
    if (t->ndim == m->ndim) return torc__register(torc_retain(T(t)));
    int64_t shape[TORC_MAX_DIMS];
    for (int i = 0; i < m->ndim; i++) shape[i] = (n->params.reduce.mask >> i) & 1 ? 1 : m->shape[i];
    return torc_reshape(T(t), m->ndim, shape);
}

static torc_tensor *expand_in(const torc_node *n, const torc_tensor *t) {
    return !t ? NULL : torc_expand(T(t), n->in[0].ndim, n->in[0].shape);
}

static torc_tensor *zero_scalar(const torc_tensor *like) {
    torc_tensor *z = torc__scalar_on(like->device, 0.0, like->dtype);
    return z ? torc__register(z) : NULL;
}

// where(cond, 0, t)
static torc_tensor *zero_where(const torc_tensor *cond, const torc_tensor *t) {
    if (!cond || !t) return NULL;
    torc_tensor *z = zero_scalar(t);
    return z ? torc_where(cond, z, t) : NULL;
}

// ---- unary ----
BW(bw_neg) { TRY(gin[0] = op_neg(g)); return TORC_OK; }
BW(bw_abs) { TRY(gin[0] = op_mul(g, op_sign(IN(0)))); return TORC_OK; }
BW(bw_zero) { TRY(gin[0] = torc__zeros_on(g->device, g->dtype, n->in[0].ndim, n->in[0].shape)); return TORC_OK; }
BW(bw_sqrt) { TRY(gin[0] = op_div(g, op_mul_scalar(OUT, 2.0))); return TORC_OK; }
BW(bw_rsqrt) {  // d x^-1/2 = -1/2 x^-3/2 = -1/2 out^3
    TRY(gin[0] = op_mul_scalar(op_mul(g, op_pow_scalar(OUT, 3.0)), -0.5));
    return TORC_OK;
}
BW(bw_square) { TRY(gin[0] = op_mul(g, op_mul_scalar(IN(0), 2.0))); return TORC_OK; }
BW(bw_reciprocal) { TRY(gin[0] = op_neg(op_mul(g, op_square(OUT)))); return TORC_OK; }
BW(bw_exp) { TRY(gin[0] = op_mul(g, OUT)); return TORC_OK; }
BW(bw_log) { TRY(gin[0] = op_div(g, IN(0))); return TORC_OK; }
BW(bw_sin) { TRY(gin[0] = op_mul(g, op_cos(IN(0)))); return TORC_OK; }
BW(bw_cos) { TRY(gin[0] = op_neg(op_mul(g, op_sin(IN(0))))); return TORC_OK; }
BW(bw_tanh) { TRY(gin[0] = op_mul(g, op_rsub_scalar(op_square(OUT), 1.0))); return TORC_OK; }
BW(bw_sigmoid) {
    TRY(gin[0] = op_mul(g, op_mul(OUT, op_rsub_scalar(OUT, 1.0))));
    return TORC_OK;
}
// PyTorch's threshold_backward: out <= 0 ? 0 : g (a NaN output passes g; an inf g meets no 0*inf).
BW(bw_relu) { TRY(gin[0] = zero_where(op_le_scalar(OUT, 0.0), g)); return TORC_OK; }
// GELU_BACKWARD (backend ABI 2.4) for dy = g and x of one floating dtype and shape on one device:
// dx in one pass, with no temporaries. TORC_OK with *dx set, or *dx NULL (no error) where the op
// does not apply or a device backend declines it (the formula below then composes it). On host
// memory the reference runs what the device's backend declines (f64, strided or broadcast
// operands on onednn), as for any op; a device backend that declines gets the composition.
static torc_status gelu_backward_op(const torc_node *n, const torc_tensor *g, const torc_tensor *x,
                                    torc_tensor **dx) {
    *dx = NULL;
    const torc_dtype t = x->dtype;
    if ((t != TORC_DTYPE_F64 && t != TORC_DTYPE_F32 && t != TORC_DTYPE_F16 && t != TORC_DTYPE_BF16) ||
        g->dtype != t || g->device != x->device || g->ndim != x->ndim ||
        memcmp(g->shape, x->shape, (size_t)x->ndim * sizeof *x->shape))
        return TORC_OK;
    torc_device *dev = x->device;
    torc_tensor *d = torc__new(dev, t, x->ndim, x->shape);
    if (!d) return torc_last_status();
    torc_op op = {.code = TORC_OP_GELU_BACKWARD, .n_in = 2, .n_out = 1};
    op.params.gelu = n->params.gelu;
    torc__operand(g, &op.in[0]);
    torc__operand(x, &op.in[1]);
    torc__operand(d, &op.out[0]);
    const uint64_t flops = (uint64_t)torc_numel(d);
    torc_status st;
    if (dev->host_memory) st = torc__dispatch(dev, &op, flops);
    else if (torc__runs_natively(dev, &op)) st = torc__dispatch_supported(dev, &op, flops);
    else {
        torc_release(d);
        return TORC_OK;
    }
    if (st) {
        torc_release(d);
        return st;
    }
    *dx = torc__register(d);
    return TORC_OK;
}

BW(bw_gelu) {
    torc_tensor *x = IN(0), *d;
    torc_status st = gelu_backward_op(n, g, x, &gin[0]);
    if (st || gin[0]) return st;
    if (n->params.gelu.approximate) {
        // PyTorch's GeluBackward for approximate='tanh'.
        const double beta = K_SQRT_2_OVER_PI, kappa = 0.044715;
        torc_tensor *x2 = op_square(x);
        torc_tensor *inner = op_mul_scalar(op_add(x, op_mul_scalar(op_mul(x2, x), kappa)), beta);
        torc_tensor *th = op_tanh(inner);
        torc_tensor *left_d = op_mul_scalar(op_add_scalar(th, 1.0), 0.5);
        torc_tensor *dinner = op_mul_scalar(op_add_scalar(op_mul_scalar(x2, 3 * kappa), 1.0),
                                              beta);
        torc_tensor *right_d =
            op_mul(op_mul(op_mul_scalar(x, 0.5), op_rsub_scalar(op_square(th), 1.0)), dinner);
        d = op_add(left_d, right_d);
    } else {
        // d/dx x*Phi(x) = Phi(x) + x*phi(x)
        torc_tensor *cdf = op_mul_scalar(op_add_scalar(op_erf(op_mul_scalar(x, K_SQRT1_2)), 1.0),
                                           0.5);
        torc_tensor *pdf =
            op_mul_scalar(op_exp(op_mul_scalar(op_square(x), -0.5)), 0.5 * K_2_OVER_SQRT_PI * K_SQRT1_2);
        d = op_add(cdf, op_mul(x, pdf));
    }
    TRY(gin[0] = op_mul(g, d));
    return TORC_OK;
}
BW(bw_pow_scalar) {
    const double p = n->params.scalar.value;
    if (p == 0.0) return bw_zero(n, g, need, gin);
    TRY(gin[0] = op_mul(g, op_mul_scalar(op_pow_scalar(IN(0), p - 1.0), p)));
    return TORC_OK;
}
BW(bw_erf) {  // 2/sqrt(pi) exp(-x^2)
    TRY(gin[0] = op_mul(g, op_mul_scalar(op_exp(op_neg(op_square(IN(0)))), K_2_OVER_SQRT_PI)));
    return TORC_OK;
}
BW(bw_erfinv) {  // sqrt(pi)/2 exp(out^2)
    TRY(gin[0] = op_mul(g, op_mul_scalar(op_exp(op_square(OUT)), 1.0 / K_2_OVER_SQRT_PI)));
    return TORC_OK;
}
BW(bw_identity) { TRY(gin[0] = torc__register(torc_retain(T(g)))); return TORC_OK; }

// ---- binary ----
BW(bw_add) {
    const double alpha = n->params.scalar.value;
    if (need[0]) TRY(gin[0] = torc__register(torc_retain(T(g))));
    if (need[1]) TRY(gin[1] = alpha == 1.0 ? torc__register(torc_retain(T(g))) : op_mul_scalar(g, alpha));
    return TORC_OK;
}
BW(bw_sub) {
    if (need[0]) TRY(gin[0] = torc__register(torc_retain(T(g))));
    if (need[1]) TRY(gin[1] = op_mul_scalar(g, -n->params.scalar.value));
    return TORC_OK;
}
BW(bw_mul) {
    if (need[0]) TRY(gin[0] = op_mul(g, IN(1)));
    if (need[1]) TRY(gin[1] = op_mul(g, IN(0)));
    return TORC_OK;
}
BW(bw_div) {
    if (need[0]) TRY(gin[0] = op_div(g, IN(1)));
    if (need[1]) TRY(gin[1] = op_neg(op_div(op_mul(g, IN(0)), op_square(IN(1)))));
    return TORC_OK;
}
BW(bw_pow) {  // out = a^b; PyTorch's masks: 0 where b == 0 (for a), where a == 0 and b >= 0 (for b)
    torc_tensor *a = IN(0), *b = IN(1);
    if (need[0]) {
        torc_tensor *d = op_mul(g, op_mul(b, op_pow(a, op_sub_scalar(b, 1.0))));
        TRY(gin[0] = zero_where(op_eq_scalar(b, 0.0), d));
    }
    if (need[1]) {
        torc_tensor *d = op_mul(g, op_mul(OUT, op_log(a)));
        TRY(gin[1] = zero_where(op_logical_and(op_eq_scalar(a, 0.0), op_ge_scalar(b, 0.0)), d));
    }
    return TORC_OK;
}
// maximum/minimum: the gradient goes to the winner, half to each on a tie (as PyTorch).
static torc_status bw_extremum(const torc_node *n, const torc_tensor *g, const bool *need, torc_tensor **gin,
                               bool is_max) {
    torc_tensor *a = IN(0), *b = IN(1);
    torc_tensor *half = op_mul_scalar(op_eq(a, b), 0.5);
    if (need[0]) TRY(gin[0] = op_mul(g, op_add(is_max ? op_gt(a, b) : op_lt(a, b), half)));
    if (need[1]) TRY(gin[1] = op_mul(g, op_add(is_max ? op_lt(a, b) : op_gt(a, b), half)));
    return TORC_OK;
}
BW(bw_maximum) { return bw_extremum(n, g, need, gin, true); }
BW(bw_minimum) { return bw_extremum(n, g, need, gin, false); }
BW(bw_where) {  // inputs: cond, a, b
    if (need[1]) TRY(gin[1] = zero_where(op_logical_not(IN(0)), g));
    if (need[2]) TRY(gin[2] = zero_where(IN(0), g));
    return TORC_OK;
}

// ---- floor_divide, remainder, fmod (the scalar forms of the last two record an identity node) ----
// PyTorch has no derivative for floor_divide: its node (NotImplemented) fails when backward reaches it.
BW(bw_floor_divide) {
    (void)n, (void)g, (void)need, (void)gin;
    return torc__error(TORC_ERR_AUTOGRAD, "derivative for aten::floor_divide is not implemented");
}
// q rounded toward zero as div(..., rounding_mode="trunc") rounds its quotient: -0.0 for q in
// (-1, -0], infinities and NaN kept.
static torc_tensor *op_trunc(const torc_tensor *q) {
    if (!q) return NULL;
    torc_tensor *up = op_floor_divide_scalar(q, 1.0), *down = op_neg(op_floor_divide_scalar(op_neg(q), 1.0));
    return op_where(op_eq_scalar(op_abs(q), INFINITY), q, op_where(op_lt_scalar(q, 0.0), down, up));
}
BW(bw_remainder) {  // other: -grad * self.div(other, rounding_mode="floor")
    if (need[0]) TRY(gin[0] = torc__register(torc_retain(T(g))));
    if (need[1]) TRY(gin[1] = op_mul(op_neg(g), op_floor_divide(IN(0), IN(1))));
    return TORC_OK;
}
BW(bw_fmod) {  // other: -grad * self.div(other, rounding_mode="trunc")
    if (need[0]) TRY(gin[0] = torc__register(torc_retain(T(g))));
    if (need[1]) TRY(gin[1] = op_mul(op_neg(g), op_trunc(op_div(IN(0), IN(1)))));
    return TORC_OK;
}

// ---- fused pointwise (inputs: self, tensor1, tensor2; value / weight in params.scalar) ----
BW(bw_addcmul) {
    const double v = n->params.scalar.value;
    if (need[0]) TRY(gin[0] = torc__register(torc_retain(T(g))));
    if (need[1]) TRY(gin[1] = op_mul(g, op_mul_scalar(IN(2), v)));
    if (need[2]) TRY(gin[2] = op_mul(g, op_mul_scalar(IN(1), v)));
    return TORC_OK;
}
BW(bw_addcdiv) {  // tensor1: g * (value / t2); tensor2: -g * value * t1 / (t2 * t2)
    const double v = n->params.scalar.value;
    if (need[0]) TRY(gin[0] = torc__register(torc_retain(T(g))));
    if (need[1]) TRY(gin[1] = op_mul(g, op_rdiv_scalar(IN(2), v)));
    if (need[2]) TRY(gin[2] = op_div(op_mul(op_mul_scalar(op_neg(g), v), IN(1)), op_mul(IN(2), IN(2))));
    return TORC_OK;
}
BW(bw_lerp) {  // scalar weight: self gets g * (1 - w), end g * w
    const double w = n->params.scalar.value;
    if (need[0]) TRY(gin[0] = op_mul_scalar(g, 1.0 - w));
    if (need[1]) TRY(gin[1] = op_mul_scalar(g, w));
    return TORC_OK;
}

// ---- reductions ----
BW(bw_sum) { TRY(gin[0] = expand_in(n, keepdim(n, g))); return TORC_OK; }
BW(bw_mean) {
    TRY(gin[0] = expand_in(n, op_div_scalar(keepdim(n, g), reduced_count(n))));
    return TORC_OK;
}
BW(bw_prod) {
    // d prod / d x_i = product of the others: out / x_i where x_i != 0; where x_i == 0 it is
    // the product of the non-zero others if x_i is the only zero, else 0.
    torc_tensor *x = IN(0);
    int dims[TORC_MAX_DIMS];
    const int nd = mask_dims(n->params.reduce.mask, x->ndim, dims);
    torc_tensor *is0 = op_eq_scalar(x, 0.0);
    TRY(is0);
    torc_tensor *one = torc__scalar_on(x->device, 1.0, x->dtype);
    TRY(one);
    torc__register(one);
    torc_tensor *nz = op_where(is0, one, x);
    torc_tensor *zeros = nd ? op_sum_keep(is0, nd, dims) : torc_to_dtype(is0, TORC_DTYPE_I64);
    torc_tensor *prod_nz = nd && nz ? torc_prod(nz, nd, dims, true) : nz;
    torc_tensor *at0 = zero_where(op_ne_scalar(zeros, 1), prod_nz);
    torc_tensor *d = op_where(is0, at0, op_div(keepdim(n, OUT), nz));
    TRY(gin[0] = op_mul(keepdim(n, g), d));
    return TORC_OK;
}
BW(bw_amax) {  // evenly between the tied extremes
    torc_tensor *x = IN(0);
    int dims[TORC_MAX_DIMS];
    const int nd = mask_dims(n->params.reduce.mask, x->ndim, dims);
    torc_tensor *hit = op_eq(x, keepdim(n, OUT));
    TRY(hit);
    torc_tensor *cnt = nd ? op_sum_keep(hit, nd, dims) : torc_to_dtype(hit, TORC_DTYPE_I64);
    TRY(gin[0] = op_div(op_mul(keepdim(n, g), hit), cnt));
    return TORC_OK;
}
// max / min along a dim (PyTorch's value_selecting_reduction_backward): g scattered to the
// indices, zero elsewhere. Input 1 is the indices with the dim kept (size 1).
BW(bw_minmax_dim) {
    (void)need;
    const torc__meta *m = &n->in[0];
    if (m->ndim == 0) {  // a zero-dim input is its own maximum
        TRY(gin[0] = torc__register(torc_retain(T(g))));
        return TORC_OK;
    }
    torc_tensor *idx = IN(1);
    torc_tensor *gk = g->ndim == m->ndim ? torc__register(torc_retain(T(g))) : torc_reshape(T(g), m->ndim, idx->shape);
    torc_tensor *zeros = torc__zeros_on(g->device, g->dtype, m->ndim, m->shape);
    TRY(gk && zeros);
    TRY(gin[0] = torc_scatter_add(zeros, n->params.dim.dim, idx, gk));
    return TORC_OK;
}
// x - mean(x) over the reduced dims, and N - correction.
static torc_tensor *centered(const torc_node *n, double *denom) {
    torc_tensor *x = IN(0);
    int dims[TORC_MAX_DIMS];
    const int nd = mask_dims(n->params.reduce.mask, x->ndim, dims);
    *denom = reduced_count(n) - n->params.reduce.correction;
    return op_sub(x, torc_mean(x, nd, dims, true));
}
BW(bw_var) {
    double denom;
    torc_tensor *c = centered(n, &denom);
    TRY(c);
    TRY(gin[0] = op_mul(keepdim(n, g), op_mul_scalar(c, 2.0 / denom)));
    return TORC_OK;
}
BW(bw_std) {
    double denom;
    torc_tensor *c = centered(n, &denom);
    TRY(c);
    TRY(gin[0] = op_div(op_mul(keepdim(n, g), c), op_mul_scalar(keepdim(n, OUT), denom)));
    return TORC_OK;
}
BW(bw_norm) {
    torc_tensor *x = IN(0), *gk = keepdim(n, g), *ok = keepdim(n, OUT);
    TRY(gk && ok);
    const double p = n->params.reduce.p;
    if (p == 0.0) return bw_zero(n, g, need, gin);
    if (p == 1.0) {
        TRY(gin[0] = op_mul(gk, op_sign(x)));
        return TORC_OK;
    }
    if (isinf(p)) {  // like amax over |x|, with the sign of x
        int dims[TORC_MAX_DIMS];
        const int nd = mask_dims(n->params.reduce.mask, x->ndim, dims);
        torc_tensor *hit = op_eq(op_abs(x), ok);
        TRY(hit);
        torc_tensor *cnt = nd ? op_sum_keep(hit, nd, dims) : torc_to_dtype(hit, TORC_DTYPE_I64);
        TRY(gin[0] = op_div(op_mul(op_mul(gk, hit), op_sign(x)), cnt));
        return TORC_OK;
    }
    // x |x|^(p-2) g / norm^(p-1), and 0 where the norm is 0 (PyTorch's masked_fill).
    torc_tensor *num = p == 2.0 ? x : op_mul(x, op_pow_scalar(op_abs(x), p - 2.0));
    torc_tensor *den = p == 2.0 ? ok : op_pow_scalar(ok, p - 1.0);
    TRY(num && den);
    torc_tensor *d = op_mul(num, op_div(gk, den));
    TRY(gin[0] = zero_where(op_eq_scalar(ok, 0.0), d));
    return TORC_OK;
}
BW(bw_logsumexp) {
    TRY(gin[0] = op_mul(keepdim(n, g), op_exp(op_sub(IN(0), keepdim(n, OUT)))));
    return TORC_OK;
}
BW(bw_softmax) {  // out * (g - sum(g * out))
    const int d = n->params.dim.dim;
    torc_tensor *s = op_sum_keep(op_mul(g, OUT), 1, &d);
    TRY(gin[0] = op_mul(OUT, op_sub(g, s)));
    return TORC_OK;
}
BW(bw_log_softmax) {  // g - exp(out) * sum(g)
    const int d = n->params.dim.dim;
    TRY(gin[0] = op_sub(g, op_mul(op_exp(OUT), op_sum_keep(g, 1, &d))));
    return TORC_OK;
}

// ---- linear algebra ----
// torch.matmul for every operand rank: 1-D operands get their unit dim back, batch dims that
// were broadcast are summed, and a wider output dtype (bf16 x bf16 -> f32) is kept for the
// products; the engine casts the results back to the inputs' dtype.
BW(bw_matmul) {
    torc_tensor *a = IN(0), *b = IN(1);
    const torc_dtype wide = g->dtype;
    torc_tensor *gg = torc_to_dtype(T(g), a->dtype);
    TRY(gg);
    if (b->ndim == 1) TRY(gg = torc_unsqueeze(gg, gg->ndim));
    if (a->ndim == 1) TRY(gg = torc_unsqueeze(gg, gg->ndim - 1));
    torc_tensor *a2 = a->ndim == 1 ? torc_unsqueeze(a, 0) : a, *b2 = b->ndim == 1 ? torc_unsqueeze(b, 1) : b;
    TRY(a2 && b2);
    if (need[0]) {  // (..., M, N) @ (..., N, K)
        torc_tensor *da = torc_matmul_out_dtype(gg, torc_transpose(b2, -1, -2), wide);
        TRY(da);
        TRY(da = torc__sum_to(da, a2->ndim, a2->shape));
        TRY(gin[0] = reshape_to(da, a->ndim, a->shape));
    }
    if (need[1]) {
        torc_tensor *db;
        if (b2->ndim == 2 && a2->ndim > 2) {
            // b was broadcast over a's batch: fold the batch into M, one (K, B*M) @ (B*M, N).
            const int64_t K = a2->shape[a2->ndim - 1], N = gg->shape[gg->ndim - 1];
            torc_tensor *af = torc_reshape(a2, 2, (int64_t[]){-1, K}), *gf = torc_reshape(gg, 2, (int64_t[]){-1, N});
            TRY(af && gf);
            db = torc_matmul_out_dtype(torc_transpose(af, 0, 1), gf, wide);
        } else {
            db = torc_matmul_out_dtype(torc_transpose(a2, -1, -2), gg, wide);
        }
        TRY(db);
        TRY(db = torc__sum_to(db, b2->ndim, b2->shape));
        TRY(gin[1] = reshape_to(db, b->ndim, b->shape));
    }
    return TORC_OK;
}

// MATMUL_ROUNDED in c (autocast's fused matmul: a of 2 or more dims, b 2-D, out c): the gradients
// as the casts' and MATMUL's backward make them, each product again in c and rounded to c, then
// returned in its input's dtype (ToCopyBackward0's cast, fused). b's gradient folds a's batch
// dims into rows, as bw_matmul does.
BW(bw_matmul_rounded) {
    torc_tensor *a = IN(0), *b = IN(1);
    const torc_dtype c = (torc_dtype)n->params.matmul.dtype;
    torc_tensor *gg = torc_to_dtype(T(g), c);
    TRY(gg);
    if (need[0]) TRY(gin[0] = torc__matmul_rounded(gg, torc_transpose(b, 0, 1), c, a->dtype));
    if (need[1]) {
        const int64_t K = a->shape[a->ndim - 1], N = gg->shape[gg->ndim - 1];
        torc_tensor *af = torc_reshape(a, 2, (int64_t[]){-1, K}), *gf = torc_reshape(gg, 2, (int64_t[]){-1, N});
        TRY(af && gf);
        TRY(gin[1] = torc__matmul_rounded(torc_transpose(af, 0, 1), gf, c, b->dtype));
    }
    return TORC_OK;
}

// ---- indexing ----
static torc_tensor *zeros_in(const torc_node *n, const torc_tensor *g, int i) {
    return torc__zeros_on(g->device, g->dtype, n->in[i].ndim, n->in[i].shape);
}
BW(bw_index_select) {  // inputs: t, index
    TRY(gin[0] = torc_index_add(zeros_in(n, g, 0), n->params.dim.dim, IN(1), g));
    return TORC_OK;
}
BW(bw_gather) {
    TRY(gin[0] = torc_scatter_add(zeros_in(n, g, 0), n->params.dim.dim, IN(1), g));
    return TORC_OK;
}
BW(bw_masked_select) {  // inputs: t, mask (broadcast together); the engine sums to t's shape
    int nd;
    int64_t shape[TORC_MAX_DIMS];
    if (torc__broadcast_shapes(n->in[0].ndim, n->in[0].shape, n->in[1].ndim, n->in[1].shape, &nd, shape))
        return torc_last_status();
    torc_tensor *z = torc__zeros_on(g->device, g->dtype, nd, shape);
    TRY(z);
    TRY(gin[0] = torc_masked_scatter(z, torc_expand(IN(1), nd, shape), g));
    return TORC_OK;
}
BW(bw_index_add) {  // inputs: self, index, source
    if (need[0]) TRY(gin[0] = torc__register(torc_retain(T(g))));
    if (need[2]) TRY(gin[2] = torc_index_select(g, n->params.dim.dim, IN(1)));
    return TORC_OK;
}
BW(bw_scatter_add) {  // inputs: self, index, src
    if (need[0]) TRY(gin[0] = torc__register(torc_retain(T(g))));
    if (need[2]) {
        torc_tensor *idx = IN(1), *d = torc_gather(g, n->params.dim.dim, idx);
        TRY(d);
        const torc__meta *src = &n->in[2];
        if (memcmp(idx->shape, src->shape, (size_t)src->ndim * sizeof *src->shape)) {
            // src may be larger than index: the elements index does not reach get 0.
            torc_tensor *z = zeros_in(n, g, 2), *v = z;
            for (int k = 0; v && k < src->ndim; k++) v = torc_narrow(v, k, 0, idx->shape[k]);
            TRY(v);
            if (torc_copy_(v, d)) return torc_last_status();
            d = z;
        }
        gin[2] = d;
    }
    return TORC_OK;
}
BW(bw_masked_scatter) {  // inputs: self, mask, source
    if (need[0]) TRY(gin[0] = zero_where(IN(1), g));
    if (need[2]) {
        // The first count(mask) elements of source were used, in order; the rest get 0.
        torc_tensor *sel = torc_masked_select(g, IN(1));
        TRY(sel);
        const int64_t used = torc_numel(sel), total = torc__numel(n->in[2].ndim, n->in[2].shape);
        if (used < total) {
            torc_tensor *rest = torc__zeros_on(g->device, g->dtype, 1, (int64_t[]){total - used});
            TRY(rest);
            TRY(sel = torc_cat(2, (torc_tensor *[]){sel, rest}, 0));
        }
        TRY(gin[2] = torc_reshape(sel, n->in[2].ndim, n->in[2].shape));
    }
    return TORC_OK;
}
BW(bw_triu) { TRY(gin[0] = torc_triu(g, n->params.tri.k)); return TORC_OK; }
BW(bw_tril) { TRY(gin[0] = torc_tril(g, n->params.tri.k)); return TORC_OK; }
BW(bw_cat) {
    const int d = n->params.dim.dim;
    int64_t at = 0;
    for (int i = 0; i < n->n_in; i++) {
        const int64_t size = n->in[i].shape[d];
        if (need[i]) TRY(gin[i] = torc_narrow(T(g), d, at, size));
        at += size;
    }
    return TORC_OK;
}

// ---- views ----
BW(bw_view) { TRY(gin[0] = reshape_to(g, n->in[0].ndim, n->in[0].shape)); return TORC_OK; }
BW(bw_transpose) { TRY(gin[0] = torc_transpose(T(g), (int)n->args[0], (int)n->args[1])); return TORC_OK; }
BW(bw_permute) {
    int inv[TORC_MAX_DIMS];
    for (int i = 0; i < n->nargs; i++) inv[n->args[i]] = i;
    TRY(gin[0] = torc_permute(T(g), n->nargs, inv));
    return TORC_OK;
}
BW(bw_select) {  // zeros with g written into the selected slice
    torc_tensor *z = zeros_in(n, g, 0);
    TRY(z);
    torc_tensor *s = torc_select(z, (int)n->args[0], n->args[1]);
    TRY(s);
    if (torc_copy_(s, g)) return torc_last_status();
    gin[0] = z;
    return TORC_OK;
}
BW(bw_slice) {
    torc_tensor *z = zeros_in(n, g, 0);
    TRY(z);
    torc_tensor *s = torc_slice(z, (int)n->args[0], n->args[1], n->args[2], n->args[3]);
    TRY(s);
    if (torc_copy_(s, g)) return torc_last_status();
    gin[0] = z;
    return TORC_OK;
}
BW(bw_expand) { TRY(gin[0] = torc__sum_to(g, n->in[0].ndim, n->in[0].shape)); return TORC_OK; }

// Whether a geometry maps two indices to one storage element (PyTorch's overlap test:
// sorted by stride, each stride must exceed the span of the smaller dims).
static bool overlaps(const torc__meta *m) {
    int order[TORC_MAX_DIMS], k = 0;
    for (int i = 0; i < m->ndim; i++)
        if (m->shape[i] > 1) order[k++] = i;
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && m->stride[order[j]] < m->stride[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t span = 0;
    for (int i = 0; i < k; i++) {
        if (m->stride[order[i]] <= span) return true;
        span += (m->shape[order[i]] - 1) * m->stride[order[i]];
    }
    return false;
}

static int64_t extent(const torc__meta *m) {  // one past the highest storage index
    int64_t last = m->offset;
    for (int i = 0; i < m->ndim; i++) {
        if (m->shape[i] == 0) return m->offset;
        last += (m->shape[i] - 1) * m->stride[i];
    }
    return last + 1;
}

// as_strided: the gradient goes back through the storage. A buffer covering the storage
// receives g at the view's positions (summed where the view overlaps itself), and the base
// reads its own positions out of it.
BW(bw_as_strided) {
    const torc__meta *vm = &n->out, *bm = &n->in[0];
    int64_t size = extent(vm) > extent(bm) ? extent(vm) : extent(bm);
    torc_tensor *buf = torc__zeros_on(g->device, g->dtype, 1, &size);
    TRY(buf);
    if (!overlaps(vm)) {
        torc_tensor *v = torc_as_strided(buf, vm->ndim, vm->shape, vm->stride, vm->offset);
        TRY(v);
        if (torc_copy_(v, g)) return torc_last_status();
    } else {
        // Storage index of every view element: offset + sum_k i_k * stride_k.
        torc_tensor *idx = torc_full(0, NULL, (double)vm->offset, TORC_DTYPE_I64);
        for (int k = 0; idx && k < vm->ndim; k++) {
            int64_t shape[TORC_MAX_DIMS];
            for (int j = 0; j < vm->ndim; j++) shape[j] = j == k ? vm->shape[k] : 1;
            torc_tensor *r = torc_arange(0, (double)vm->shape[k], 1, TORC_DTYPE_I64);
            r = r ? torc_mul_scalar(r, torc_scalar_i(vm->stride[k])) : NULL;
            r = r ? torc_reshape(r, vm->ndim, shape) : NULL;
            idx = r ? op_add(idx, r) : NULL;
        }
        TRY(idx);
        TRY(idx = torc_to_device(torc_reshape(torc_expand(idx, vm->ndim, vm->shape), 1, (int64_t[]){-1}), g->device));
        TRY(buf = torc_index_add(buf, 0, idx, torc_reshape(T(g), 1, (int64_t[]){-1})));
    }
    TRY(gin[0] = torc_contiguous(torc_as_strided(buf, bm->ndim, bm->shape, bm->stride, bm->offset)));
    return TORC_OK;
}

// ---- in-place writes ----
BW(bw_copy_into) {  // copy_(self, src): self's old value is gone; src's gradient is g, which the
                    // engine sums over broadcast dims and casts to src's dtype and device
    if (need[0]) TRY(gin[0] = torc__zeros_on(g->device, g->dtype, n->in[0].ndim, n->in[0].shape));
    if (need[1]) TRY(gin[1] = torc__register(torc_retain(T(g))));
    return TORC_OK;
}

// CopySlices (PyTorch's): an in-place op on a view, recorded on the view's base. The base's
// gradient g passes through unchanged except in the region the view covers, which goes
// through the op's backward (n->inner, whose input 0 is the view); the op's other inputs get
// their gradients from that backward. Geometries are storage positions, so a buffer over the
// storage span of both holds g at the base's positions and the op's result at the view's.
BW(bw_copy_slices) {
    const torc_node *f = n->inner;
    const torc__meta *bm = &n->in[0], *vm = &f->in[0];
    const int64_t lo = bm->offset < vm->offset ? bm->offset : vm->offset;
    const int64_t size = (extent(vm) > extent(bm) ? extent(vm) : extent(bm)) - lo;
    torc_tensor *buf = torc__zeros_on(g->device, g->dtype, 1, &size);
    TRY(buf);
    torc_tensor *base = torc_as_strided(buf, bm->ndim, bm->shape, bm->stride, bm->offset - lo);
    TRY(base);
    if (torc_copy_(base, g)) return torc_last_status();
    torc_tensor *slice = torc_as_strided(buf, vm->ndim, vm->shape, vm->stride, vm->offset - lo);
    TRY(slice);
    torc_tensor *gslice = torc_clone(slice), *raw[TORC__NODE_INLINE] = {NULL};
    TRY(gslice);
    bool need_f[TORC__NODE_INLINE] = {false};
    for (int i = 0; i < f->n_in && i < TORC__NODE_INLINE; i++) need_f[i] = need[i];
    torc_status st = torc__grad_rule_for(f->code)->fn(f, gslice, need_f, raw);
    if (st) return st;
    for (int i = 0; i < f->n_in && i < TORC__NODE_INLINE; i++)
        if (need_f[i] && raw[i]) TRY(raw[i] = torc__fit_grad(f, i, raw[i]));
    if (need[0]) {
        st = raw[0] ? torc_copy_(slice, raw[0]) : torc_zero_(slice);
        if (st) return st;
        gin[0] = base;
    }
    for (int i = 1; i < f->n_in && i < TORC__NODE_INLINE; i++) gin[i] = raw[i];
    return TORC_OK;
}

// ---- the rule table ----
#define RULE(var, nm, f, sv) static const torc__grad_rule var = {nm, f, sv}
RULE(R_NONE, NULL, NULL, 0);
RULE(R_COPY_OP, "ToCopyBackward0", bw_identity, 0);
RULE(R_NEG, "NegBackward0", bw_neg, 0);
RULE(R_ABS, "AbsBackward0", bw_abs, TORC__SAVE_IN(0));
RULE(R_SIGN, "SignBackward0", bw_zero, 0);
RULE(R_SQRT, "SqrtBackward0", bw_sqrt, TORC__SAVE_OUT);
RULE(R_RSQRT, "RsqrtBackward0", bw_rsqrt, TORC__SAVE_OUT);
RULE(R_SQUARE, "PowBackward0", bw_square, TORC__SAVE_IN(0));
RULE(R_RECIPROCAL, "ReciprocalBackward0", bw_reciprocal, TORC__SAVE_OUT);
RULE(R_EXP, "ExpBackward0", bw_exp, TORC__SAVE_OUT);
RULE(R_LOG, "LogBackward0", bw_log, TORC__SAVE_IN(0));
RULE(R_SIN, "SinBackward0", bw_sin, TORC__SAVE_IN(0));
RULE(R_COS, "CosBackward0", bw_cos, TORC__SAVE_IN(0));
RULE(R_TANH, "TanhBackward0", bw_tanh, TORC__SAVE_OUT);
RULE(R_SIGMOID, "SigmoidBackward0", bw_sigmoid, TORC__SAVE_OUT);
RULE(R_RELU, "ReluBackward0", bw_relu, TORC__SAVE_OUT);
RULE(R_GELU, "GeluBackward0", bw_gelu, TORC__SAVE_IN(0));
RULE(R_POW_SCALAR, "PowBackward0", bw_pow_scalar, TORC__SAVE_IN(0));
RULE(R_ERF, "ErfBackward0", bw_erf, TORC__SAVE_IN(0));
RULE(R_ERFINV, "ErfinvBackward0", bw_erfinv, TORC__SAVE_OUT);
RULE(R_ADD, "AddBackward0", bw_add, 0);
RULE(R_SUB, "SubBackward0", bw_sub, 0);
RULE(R_MUL, "MulBackward0", bw_mul, TORC__SAVE_IN(0) | TORC__SAVE_IN(1));
RULE(R_DIV, "DivBackward0", bw_div, TORC__SAVE_IN(0) | TORC__SAVE_IN(1));
RULE(R_POW, "PowBackward1", bw_pow, TORC__SAVE_IN(0) | TORC__SAVE_IN(1) | TORC__SAVE_OUT);
RULE(R_MAXIMUM, "MaximumBackward0", bw_maximum, TORC__SAVE_IN(0) | TORC__SAVE_IN(1));
RULE(R_MINIMUM, "MinimumBackward0", bw_minimum, TORC__SAVE_IN(0) | TORC__SAVE_IN(1));
RULE(R_WHERE, "WhereBackward0", bw_where, TORC__SAVE_IN(0));
RULE(R_FLOOR_DIVIDE, "NotImplemented", bw_floor_divide, 0);
RULE(R_REMAINDER, "RemainderBackward1", bw_remainder, TORC__SAVE_IN(0) | TORC__SAVE_IN(1));
RULE(R_FMOD, "FmodBackward1", bw_fmod, TORC__SAVE_IN(0) | TORC__SAVE_IN(1));
RULE(R_ADDCMUL, "AddcmulBackward0", bw_addcmul, TORC__SAVE_IN(1) | TORC__SAVE_IN(2));
RULE(R_ADDCDIV, "AddcdivBackward0", bw_addcdiv, TORC__SAVE_IN(1) | TORC__SAVE_IN(2));
RULE(R_LERP, "LerpBackward0", bw_lerp, 0);
RULE(R_SUM, "SumBackward1", bw_sum, 0);
RULE(R_MEAN, "MeanBackward1", bw_mean, 0);
RULE(R_PROD, "ProdBackward1", bw_prod, TORC__SAVE_IN(0) | TORC__SAVE_OUT);
RULE(R_MAX, "AmaxBackward0", bw_amax, TORC__SAVE_IN(0) | TORC__SAVE_OUT);
RULE(R_MIN, "AminBackward0", bw_amax, TORC__SAVE_IN(0) | TORC__SAVE_OUT);
RULE(R_MAX_DIM, "MaxBackward0", bw_minmax_dim, TORC__SAVE_IN(1));
RULE(R_MIN_DIM, "MinBackward0", bw_minmax_dim, TORC__SAVE_IN(1));
RULE(R_VAR, "VarBackward0", bw_var, TORC__SAVE_IN(0));
RULE(R_STD, "StdBackward0", bw_std, TORC__SAVE_IN(0) | TORC__SAVE_OUT);
RULE(R_NORM, "LinalgVectorNormBackward0", bw_norm, TORC__SAVE_IN(0) | TORC__SAVE_OUT);
RULE(R_LOGSUMEXP, "LogsumexpBackward0", bw_logsumexp, TORC__SAVE_IN(0) | TORC__SAVE_OUT);
RULE(R_SOFTMAX, "SoftmaxBackward0", bw_softmax, TORC__SAVE_OUT);
RULE(R_LOG_SOFTMAX, "LogSoftmaxBackward0", bw_log_softmax, TORC__SAVE_OUT);
RULE(R_MATMUL, "MmBackward0", bw_matmul, TORC__SAVE_IN(0) | TORC__SAVE_IN(1));
RULE(R_MATMUL_ROUNDED, "MmBackward0", bw_matmul_rounded, TORC__SAVE_IN(0) | TORC__SAVE_IN(1));
RULE(R_INDEX_SELECT, "IndexSelectBackward0", bw_index_select, TORC__SAVE_IN(1));
RULE(R_GATHER, "GatherBackward0", bw_gather, TORC__SAVE_IN(1));
RULE(R_MASKED_SELECT, "MaskedSelectBackward0", bw_masked_select, TORC__SAVE_IN(1));
RULE(R_INDEX_ADD, "IndexAddBackward0", bw_index_add, TORC__SAVE_IN(1));
RULE(R_SCATTER_ADD, "ScatterAddBackward0", bw_scatter_add, TORC__SAVE_IN(1));
RULE(R_MASKED_SCATTER, "MaskedScatterBackward0", bw_masked_scatter, TORC__SAVE_IN(1));
RULE(R_TRIU, "TriuBackward0", bw_triu, 0);
RULE(R_TRIL, "TrilBackward0", bw_tril, 0);
RULE(R_CAT, "CatBackward0", bw_cat, 0);
RULE(R_VIEW, "ViewBackward0", bw_view, 0);
RULE(R_TRANSPOSE, "TransposeBackward0", bw_transpose, 0);
RULE(R_PERMUTE, "PermuteBackward0", bw_permute, 0);
RULE(R_SELECT, "SelectBackward0", bw_select, 0);
RULE(R_SLICE, "SliceBackward0", bw_slice, 0);
RULE(R_EXPAND, "ExpandBackward0", bw_expand, 0);
RULE(R_AS_STRIDED, "AsStridedBackward0", bw_as_strided, 0);
RULE(R_COPY, "CloneBackward0", bw_identity, 0);
RULE(R_COPY_INTO, "CopyBackwards", bw_copy_into, 0);
RULE(R_OVERWRITE, "FillBackward2", bw_zero, 0);  // uniform_ / normal_ / zero_ pass their names
RULE(R_COPY_SLICES, "CopySlices", bw_copy_slices, 0);
RULE(R_LAYER_NORM, "NativeLayerNormBackward0", torc__layer_norm_backward,  // inputs x, weight, bias (layer_norm.c);
     TORC__SAVE_IN(0) | TORC__SAVE_IN(1));                                  // mean, rstd saved as outputs
RULE(R_ATTENTION, "ScaledDotProductFlashAttentionForCpuBackward0",  // PyTorch's CPU name, on every device;
     torc__attention_backward,                                         // q, k, v, o saved; lse as an aux
     TORC__SAVE_IN(0) | TORC__SAVE_IN(1) | TORC__SAVE_IN(2) | TORC__SAVE_OUT);  // output (attention.c)
RULE(R_SCALED_MM, "ScaledMmBackward0", torc__fp8_matmul_backward,  // fp8 autocast's matmul (autocast.c)
     TORC__SAVE_IN(0) | TORC__SAVE_IN(1) | TORC__SAVE_IN(2));

static const torc__grad_rule *op_rule(torc_opcode code) {
    switch (code) {  // no default: an opcode without an entry is a compile error (-Wswitch)
    case TORC_OP_FILL:
    case TORC_OP_ARANGE:
    case TORC_OP_LINSPACE:
    case TORC_OP_RAND_UNIFORM:
    case TORC_OP_RAND_NORMAL:
    case TORC_OP_RAND_INT:
    case TORC_OP_LOGICAL_NOT:
    case TORC_OP_EQ:
    case TORC_OP_NE:
    case TORC_OP_LT:
    case TORC_OP_LE:
    case TORC_OP_GT:
    case TORC_OP_GE:
    case TORC_OP_LOGICAL_AND:
    case TORC_OP_LOGICAL_OR:
    case TORC_OP_ARGMAX:
    case TORC_OP_ARGMIN:
    case TORC_OP_ADAM_STEP:  // an optimizer update, run without history (core/adam.c)
    case TORC_OP_ADAM_STEP_LIST:
    case TORC_OP_NORM_LIST:  // gradient clipping's norms, under no_grad (core/clip.c)
    case TORC_OP_COUNT: return &R_NONE;  // no inputs, or integer / bool results
    case TORC_OP_LAYER_NORM: return &R_LAYER_NORM;
    case TORC_OP_LAYER_NORM_BACKWARD: return &R_NONE;  // recorded by nothing: double backward is not supported
    case TORC_OP_ATTENTION: return &R_ATTENTION;
    case TORC_OP_ATTENTION_BACKWARD: return &R_NONE;  // recorded by nothing: backward formulas run under no_grad
    case TORC_OP_GELU_BACKWARD: return &R_NONE;  // recorded by nothing: backward formulas run under no_grad
    case TORC_OP_CROSS_ENTROPY: return &R_NONE;  // its gradient is an output: linear_cross_entropy.c's own
    case TORC_OP_MAX_DIM: return &R_MAX_DIM;
    case TORC_OP_MIN_DIM: return &R_MIN_DIM;
    case TORC_OP_COPY: return &R_COPY_OP;
    case TORC_OP_NEG: return &R_NEG;
    case TORC_OP_ABS: return &R_ABS;
    case TORC_OP_SIGN: return &R_SIGN;
    case TORC_OP_SQRT: return &R_SQRT;
    case TORC_OP_RSQRT: return &R_RSQRT;
    case TORC_OP_SQUARE: return &R_SQUARE;
    case TORC_OP_RECIPROCAL: return &R_RECIPROCAL;
    case TORC_OP_EXP: return &R_EXP;
    case TORC_OP_LOG: return &R_LOG;
    case TORC_OP_SIN: return &R_SIN;
    case TORC_OP_COS: return &R_COS;
    case TORC_OP_TANH: return &R_TANH;
    case TORC_OP_SIGMOID: return &R_SIGMOID;
    case TORC_OP_RELU: return &R_RELU;
    case TORC_OP_GELU: return &R_GELU;
    case TORC_OP_POW_SCALAR: return &R_POW_SCALAR;
    case TORC_OP_ERF: return &R_ERF;
    case TORC_OP_ERFINV: return &R_ERFINV;
    case TORC_OP_ADD: return &R_ADD;
    case TORC_OP_SUB: return &R_SUB;
    case TORC_OP_MUL: return &R_MUL;
    case TORC_OP_DIV: return &R_DIV;
    case TORC_OP_POW: return &R_POW;
    case TORC_OP_MAXIMUM: return &R_MAXIMUM;
    case TORC_OP_MINIMUM: return &R_MINIMUM;
    case TORC_OP_WHERE: return &R_WHERE;
    case TORC_OP_FLOOR_DIVIDE: return &R_FLOOR_DIVIDE;
    case TORC_OP_REMAINDER: return &R_REMAINDER;
    case TORC_OP_FMOD: return &R_FMOD;
    case TORC_OP_SUM: return &R_SUM;
    case TORC_OP_MEAN: return &R_MEAN;
    case TORC_OP_PROD: return &R_PROD;
    case TORC_OP_MAX: return &R_MAX;
    case TORC_OP_MIN: return &R_MIN;
    case TORC_OP_VAR: return &R_VAR;
    case TORC_OP_STD: return &R_STD;
    case TORC_OP_NORM: return &R_NORM;
    case TORC_OP_LOGSUMEXP: return &R_LOGSUMEXP;
    case TORC_OP_SOFTMAX: return &R_SOFTMAX;
    case TORC_OP_LOG_SOFTMAX: return &R_LOG_SOFTMAX;
    case TORC_OP_MATMUL: return &R_MATMUL;
    case TORC_OP_MATMUL_ROUNDED: return &R_MATMUL_ROUNDED;
    case TORC_OP_INDEX_SELECT: return &R_INDEX_SELECT;
    case TORC_OP_GATHER: return &R_GATHER;
    case TORC_OP_MASKED_SELECT: return &R_MASKED_SELECT;
    case TORC_OP_INDEX_ADD: return &R_INDEX_ADD;
    case TORC_OP_SCATTER_ADD: return &R_SCATTER_ADD;
    case TORC_OP_MASKED_SCATTER: return &R_MASKED_SCATTER;
    case TORC_OP_TRIU: return &R_TRIU;
    case TORC_OP_TRIL: return &R_TRIL;
    case TORC_OP_ADDCMUL: return &R_ADDCMUL;
    case TORC_OP_ADDCDIV: return &R_ADDCDIV;
    case TORC_OP_LERP: return &R_LERP;
    case TORC_OP_SCALED_MM: return &R_SCALED_MM;  // recorded by fp8 autocast only (torc_scaled_mm has no derivative)
    }
    return NULL;
}

static const torc__grad_rule *pseudo_rule(torc__grad_pseudo code) {
    switch (code) {  // no default, as above
    case TORC__GRAD_VIEW: return &R_VIEW;
    case TORC__GRAD_TRANSPOSE: return &R_TRANSPOSE;
    case TORC__GRAD_PERMUTE: return &R_PERMUTE;
    case TORC__GRAD_SELECT: return &R_SELECT;
    case TORC__GRAD_SLICE: return &R_SLICE;
    case TORC__GRAD_EXPAND: return &R_EXPAND;
    case TORC__GRAD_AS_STRIDED: return &R_AS_STRIDED;
    case TORC__GRAD_COPY: return &R_COPY;
    case TORC__GRAD_COPY_INTO: return &R_COPY_INTO;
    case TORC__GRAD_OVERWRITE: return &R_OVERWRITE;
    case TORC__GRAD_COPY_SLICES: return &R_COPY_SLICES;
    case TORC__GRAD_CODE_COUNT: return NULL;
    }
    return NULL;
}

const torc__grad_rule *torc__grad_rule_for(int code) {
    if (code >= 0 && code < TORC_OP_COUNT) return op_rule((torc_opcode)code);
    if (code == (int)TORC__GRAD_CAT) return &R_CAT;
    if (code > (int)TORC__GRAD_CAT && code < TORC__GRAD_CODE_COUNT) return pseudo_rule((torc__grad_pseudo)code);
    return NULL;
}

const char *torc__grad_name(int code, int n_in, const torc_tensor *const *inputs, const torc_tensor *out,
                            const torc_op_params *params) {
    (void)params;
    const bool all = n_in > 0 && inputs[0] && out->ndim == 0;  // reduced to a scalar
    switch (code) {
    case TORC_OP_SUM: return all ? "SumBackward0" : "SumBackward1";
    case TORC_OP_MEAN: return all ? "MeanBackward0" : "MeanBackward1";
    case TORC_OP_PROD: return all ? "ProdBackward0" : "ProdBackward1";
    case TORC_OP_MATMUL:
    case TORC_OP_MATMUL_ROUNDED: {
        // The node torch.matmul leaves for these ranks (mm, dot, mv, unsqueeze+mm+squeeze,
        // and a reshape around bmm for batched operands).
        const int da = inputs[0]->ndim, db = inputs[1]->ndim;
        if (da == 2 && db == 2) return "MmBackward0";
        if (da == 1 && db == 1) return "DotBackward0";
        if (da == 2 && db == 1) return "MvBackward0";
        if (da == 1 && db == 2) return "SqueezeBackward4";
        return "UnsafeViewBackward0";
    }
    default: {
        const torc__grad_rule *r = torc__grad_rule_for(code);
        return r && r->name ? r->name : "UnknownBackward";
    }
    }
}
