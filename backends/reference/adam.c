// backends/reference/adam.c — ADAM_STEP: one torch.optim Adam/AdamW update of param, exp_avg,
// exp_avg_sq (and max_exp_avg_sq) in one strided pass, bit for bit the torc ops it replaces.
#include "ref-impl.h"

// The contract (backend.h) is the sequence the adam plugins composed from the host table. Each
// step below is written as this backend's kernel of that op computes it (binary.c, unary.c,
// pointwise.c), rounded where that kernel rounds and stored: R() rounds to the dtype T as a store
// does (double -> float -> T), Ro() to the opmath type (float; double for f64).
bool ref_adam_dtypes(const torc_op *op) {
    const torc_dtype t = op->out[0].dtype;
    if (t != TORC_DTYPE_F64 && t != TORC_DTYPE_F32 && t != TORC_DTYPE_F16 && t != TORC_DTYPE_BF16) return false;
    for (int k = 1; k < op->n_out; k++)
        if (op->out[k].dtype != t) return false;
    return op->in[0].dtype == t;
}

typedef struct adam_ctx {
    torc_dtype t;
    bool amsgrad, maximize, decoupled;
    double lr, beta1, beta2, eps, wd, step_size, bc2_sqrt;  // params.adam
} adam_ctx;

// t is a constant wherever these are called (adam_block is instantiated per dtype): GCC 12.2 at
// -O2 paired two of the scalar roundings below into one vector when t was read at run time, and
// dropped the rounding of both (AdamW's 1 - lr*wd and Adam's wd reached the loop unrounded).
static inline __attribute__((always_inline)) double r_t(torc_dtype t, double x) { return ref_round_to(x, t); }
static inline __attribute__((always_inline)) double r_o(torc_dtype t, double x) {
    return t == TORC_DTYPE_F64 ? x : (double)(float)x;
}

// nb elements of dtype t (as doubles): p, m, v, vmax updated in place (vmax only with amsgrad).
static inline __attribute__((always_inline)) void adam_block(const adam_ctx *c, torc_dtype t, double *p,
                                                             const double *grad, double *m, double *v, double *vmax,
                                                             int64_t nb) {
    const bool f64 = t == TORC_DTYPE_F64, wd = c->wd != 0.0;
    const double decay = r_o(t, 1.0 - c->lr * c->wd);  // mul_scalar_'s scalar, taken in opmath (AdamW)
    const double wd_t = r_t(t, c->wd);                 // add_scaled's alpha, ADD casts it to T
    const double beta2_o = r_o(t, c->beta2);           // mul_scalar_'s scalar
    const double bc2_o = r_o(t, c->bc2_sqrt);          // div_scalar_'s scalar
    const double eps_t = r_t(t, c->eps);               // add_scalar_ reads its scalar in T, not opmath
    const double w1 = 1.0 - c->beta1, c2 = 1.0 - c->beta2, neg_step = -c->step_size;  // lerp_, addcmul_, addcdiv_
    for (int64_t i = 0; i < nb; i++) {
        double g = c->maximize ? r_t(t, -grad[i]) : grad[i];           // neg
        if (wd) {
            if (c->decoupled) p[i] = r_t(t, r_o(t, p[i] * decay));       // mul_scalar_ (the product is exact in double)
            else g = r_t(t, f64 ? fma(wd_t, p[i], g) : fmaf((float)wd_t, (float)p[i], (float)g));  // add_scaled: ADD
        }
        if (f64) {                                                      // lerp_: LERP's two-sided fma
            const bool small = fabs(w1) < 0.5;
            m[i] = fma(small ? w1 : w1 - 1.0, g - m[i], small ? m[i] : g);
        } else {
            const float w = (float)w1, x = (float)m[i], e = (float)g;
            const bool small = fabsf(w) < 0.5f;
            m[i] = r_t(t, fmaf(small ? w : w - 1.0f, e - x, small ? x : e));
        }
        v[i] = r_t(t, r_o(t, v[i] * beta2_o));                          // mul_scalar_
        if (f64) v[i] = fma(c2 * g, g, v[i]);                           // addcmul_
        else v[i] = r_t(t, fmaf((float)c2 * (float)g, (float)g, (float)v[i]));
        double d;
        if (c->amsgrad) {                                               // maximum_ (NaN propagates)
            vmax[i] = (isnan(vmax[i]) || isnan(v[i])) ? r_t(t, NAN) : (vmax[i] > v[i] ? vmax[i] : v[i]);
            d = r_t(t, sqrt(vmax[i]));                                  // sqrt
        } else {
            d = r_t(t, sqrt(v[i]));
        }
        d = r_t(t, r_o(t, d / bc2_o));                                  // div_scalar_
        d = r_t(t, d + eps_t);                                          // add_scalar_
        if (f64) {                                                      // addcdiv_
            const double q = neg_step * m[i] / d;
            p[i] = p[i] + q;
        } else {
            const float q = (float)neg_step * (float)m[i] / (float)d;
            p[i] = r_t(t, (float)p[i] + q);
        }
    }
}

// Operands: 0 param, 1 exp_avg, 2 exp_avg_sq, [3 max_exp_avg_sq,] then grad; loaded a block at a
// time as doubles, updated, stored (each element is read before it is written).
static void adam_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const adam_ctx *c = vctx;
    const int n_state = c->amsgrad ? 4 : 3;
    double x[4][REF_BLOCK], g[REF_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += REF_BLOCK) {
        const int64_t nb = n - i0 < REF_BLOCK ? n - i0 : REF_BLOCK;
        for (int k = 0; k < n_state; k++) ref_load_block_f(x[k], ptr[k] + i0 * step[k], step[k], nb, c->t);
        ref_load_block_f(g, ptr[n_state] + i0 * step[n_state], step[n_state], nb, c->t);
        switch (c->t) {
        case TORC_DTYPE_F64: adam_block(c, TORC_DTYPE_F64, x[0], g, x[1], x[2], x[3], nb); break;
        case TORC_DTYPE_F32: adam_block(c, TORC_DTYPE_F32, x[0], g, x[1], x[2], x[3], nb); break;
        case TORC_DTYPE_F16: adam_block(c, TORC_DTYPE_F16, x[0], g, x[1], x[2], x[3], nb); break;
        default: adam_block(c, TORC_DTYPE_BF16, x[0], g, x[1], x[2], x[3], nb); break;
        }
        for (int k = 0; k < n_state; k++) ref_store_block_f(ptr[k] + i0 * step[k], step[k], x[k], nb, c->t);
    }
}

int ref_adam_run(const torc_op *op) {
    const uint32_t flags = op->params.adam.flags;
    const int want = flags & TORC_ADAM_AMSGRAD ? 4 : 3;
    if (op->n_out != want)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: _fused_adam takes %d outputs %s, got %d", want,
                         want == 4 ? "with amsgrad" : "without amsgrad", op->n_out);
    static const char *const names[4] = {"out (param)", "out1 (exp_avg)", "out2 (exp_avg_sq)", "out3 (max_exp_avg_sq)"};
    for (int k = 1; k < want; k++) {
        int st = ref_check_same_shape(&op->out[k], names[k], &op->out[0], names[0]);
        if (st) return st;
    }
    int st = ref_check_same_shape(&op->in[0], "in0 (grad)", &op->out[0], names[0]);
    if (st) return st;
    const adam_ctx c = {.t = op->out[0].dtype,
                        .amsgrad = flags & TORC_ADAM_AMSGRAD,
                        .maximize = flags & TORC_ADAM_MAXIMIZE,
                        .decoupled = flags & TORC_ADAM_DECOUPLED,
                        .lr = op->params.adam.lr,
                        .beta1 = op->params.adam.beta1,
                        .beta2 = op->params.adam.beta2,
                        .eps = op->params.adam.eps,
                        .wd = op->params.adam.weight_decay,
                        .step_size = op->params.adam.step_size,
                        .bc2_sqrt = op->params.adam.bc2_sqrt};
    const torc_operand *ops[5];
    for (int k = 0; k < want; k++) ops[k] = &op->out[k];
    ops[want] = &op->in[0];
    ref_iter it;
    ref_iter_ops(&it, op->out[0].ndim, op->out[0].shape, want + 1, ops);
    ref_iter_run(&it, adam_loop, (void *)&c);
    return TORC_OK;
}
