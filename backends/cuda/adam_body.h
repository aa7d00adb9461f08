// backends/cuda/adam_body.h — ADAM_STEP's per-element code, shared by the kernel (adam.cu) and the
// CPU emulation in tests/cuda_host_test.c: the reference's sequence (backends/reference/adam.c,
// the contract in backend.h). nvcc contracts a * b + c into an fma by default, so every product,
// sum and quotient the contract rounds on its own is an _rn intrinsic on the device (plain ISO C
// operations on the host), and fma appears only where the contract has one (LERP, ADDCMUL).
#ifndef TCU_ADAM_BODY_H
#define TCU_ADAM_BODY_H

#include "dtype_io.h"
#include "ew_ops.h"

// The op's flags and its scalars as params.adam holds them; each element function rounds them
// itself as the reference does (opmath, eps to the dtype), where its dtype is a constant: GCC
// 12.2 -O2 lost such roundings when run.c chose them at run time (it hoisted both branches'
// stores of decay and wd above an if on the dtype, without the float conversion). Operands are
// dense, of one dtype.
typedef struct tcu_adam_args {
    void *param, *exp_avg, *exp_avg_sq, *max_exp_avg_sq;  // max_exp_avg_sq: NULL without amsgrad
    const void *grad;
    torc_dtype dtype;
    bool maximize, decoupled, l2, amsgrad;  // decoupled / l2: with a nonzero weight_decay only
    double lr, beta1, beta2, eps, wd, step_size, bc2_sqrt;
} tcu_adam_args;

#if defined(__CUDA_ARCH__)
#define TCU_FMUL(x, y) __fmul_rn(x, y)
#define TCU_FADD(x, y) __fadd_rn(x, y)
#define TCU_FSUB(x, y) __fsub_rn(x, y)
#define TCU_FDIV(x, y) __fdiv_rn(x, y)
#define TCU_FSQRT(x) __fsqrt_rn(x)
#define TCU_DSUB(x, y) __dsub_rn(x, y)
#define TCU_DDIV(x, y) __ddiv_rn(x, y)
#define TCU_DSQRT(x) __dsqrt_rn(x)
#else
#define TCU_FMUL(x, y) ((x) * (y))
#define TCU_FADD(x, y) ((x) + (y))
#define TCU_FSUB(x, y) ((x) - (y))
#define TCU_FDIV(x, y) ((x) / (y))
#define TCU_FSQRT(x) sqrtf(x)
#define TCU_DSUB(x, y) ((x) - (y))
#define TCU_DDIV(x, y) ((x) / (y))
#define TCU_DSQRT(x) sqrt(x)
#endif

// Element i of an f32, f16 or bf16 update: float math, rounded to the dtype after each step as
// the reference stores it; Adam's L2 term is ADD with alpha (wd cast to the dtype, one fmaf).
TORC_HD static inline void tcu_adam_f32(const tcu_adam_args *a, int64_t i) {
    const torc_dtype d = a->dtype;
    const float decay = (float)TCU_DSUB(1.0, tcu_dmul(a->lr, a->wd)), w1 = (float)TCU_DSUB(1.0, a->beta1);
    const bool small = fabsf(w1) < 0.5f;
    const float lerp_w = small ? w1 : TCU_FSUB(w1, 1.0f), beta2 = (float)a->beta2;
    const float c2 = (float)TCU_DSUB(1.0, a->beta2), bc2 = (float)a->bc2_sqrt, neg_step = (float)-a->step_size;
    const float eps = tcu_round_to((float)a->eps, d);
    const float wd = tcu_round_to((float)a->wd, d);
    const float gi = tcu_load_f32(a->grad, i, d);
    float g = a->maximize ? -gi : gi;
    float p = tcu_load_f32(a->param, i, d);
    if (a->decoupled) p = tcu_round_to(TCU_FMUL(p, decay), d);
    if (a->l2) g = tcu_round_to(fmaf(wd, p, g), d);
    const float m0 = tcu_load_f32(a->exp_avg, i, d);
    const float m = tcu_round_to(fmaf(lerp_w, TCU_FSUB(g, m0), small ? m0 : g), d);
    float v = tcu_round_to(TCU_FMUL(tcu_load_f32(a->exp_avg_sq, i, d), beta2), d);
    v = tcu_round_to(fmaf(TCU_FMUL(c2, g), g, v), d);
    float den;
    if (a->amsgrad) {
        const float x = tcu_load_f32(a->max_exp_avg_sq, i, d);
        const float mx = (x != x || v != v) ? (float)NAN : (x > v ? x : v);  // v on a tie
        tcu_store_f32(a->max_exp_avg_sq, i, d, mx);
        den = tcu_round_to(TCU_FSQRT(mx), d);
    } else {
        den = tcu_round_to(TCU_FSQRT(v), d);
    }
    den = tcu_round_to(TCU_FDIV(den, bc2), d);
    den = tcu_round_to(TCU_FADD(den, eps), d);
    const float q = TCU_FDIV(TCU_FMUL(neg_step, m), den);
    tcu_store_f32(a->param, i, d, TCU_FADD(p, q));
    tcu_store_f32(a->exp_avg, i, d, m);
    tcu_store_f32(a->exp_avg_sq, i, d, v);
}

// Element i of an f64 update.
TORC_HD static inline void tcu_adam_f64(const tcu_adam_args *a, int64_t i) {
    const double decay = TCU_DSUB(1.0, tcu_dmul(a->lr, a->wd)), w1 = TCU_DSUB(1.0, a->beta1);
    const bool small = fabs(w1) < 0.5;
    const double lerp_w = small ? w1 : TCU_DSUB(w1, 1.0), c2 = TCU_DSUB(1.0, a->beta2);
    double *P = (double *)a->param, *M = (double *)a->exp_avg, *V = (double *)a->exp_avg_sq;
    const double gi = ((const double *)a->grad)[i];
    double g = a->maximize ? -gi : gi;
    double p = P[i];
    if (a->decoupled) p = tcu_dmul(p, decay);
    if (a->l2) g = fma(a->wd, p, g);
    const double m0 = M[i];
    const double m = fma(lerp_w, TCU_DSUB(g, m0), small ? m0 : g);
    double v = tcu_dmul(V[i], a->beta2);
    v = fma(tcu_dmul(c2, g), g, v);
    double den;
    if (a->amsgrad) {
        double *X = (double *)a->max_exp_avg_sq;
        const double x = X[i];
        const double mx = (x != x || v != v) ? (double)NAN : (x > v ? x : v);
        X[i] = mx;
        den = TCU_DSQRT(mx);
    } else {
        den = TCU_DSQRT(v);
    }
    den = tcu_dadd(TCU_DDIV(den, a->bc2_sqrt), a->eps);
    P[i] = tcu_dadd(p, TCU_DDIV(tcu_dmul(-a->step_size, m), den));
    M[i] = m;
    V[i] = v;
}

#endif
