// backends/cuda/adam.cu — ADAM_STEP: one grid-stride kernel over dense param, grad and state
// (f32, f64, f16, bf16), the reference's per-element sequence (backends/reference/adam.c, the
// contract in backend.h). nvcc contracts a * b + c into an fma by default; every product, sum and
// quotient the contract rounds on its own is an explicit _rn intrinsic, and fma appears only where
// the contract has one (LERP, ADDCMUL).
#include "kernels.h"

namespace {

// Float path (f32, f16, bf16 in float, rounded to the dtype after each step as the reference
// stores it); Adam's L2 term in double.
__global__ void __launch_bounds__(TCU_THREADS) adam_f32(tcu_adam_args a, int64_t n) {
    const torc_dtype d = a.dtype;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const float gi = tcu_load_f32(a.grad, i, d);
        float g = a.maximize ? -gi : gi;
        float p = tcu_load_f32(a.param, i, d);
        if (a.decoupled) p = tcu_round_to(__fmul_rn(p, (float)a.decay), d);
        if (a.l2) g = tcu_round_to((float)__dadd_rn((double)g, __dmul_rn(a.wd, (double)p)), d);
        const float m0 = tcu_load_f32(a.exp_avg, i, d);
        const float m = tcu_round_to(fmaf((float)a.lerp_w, __fsub_rn(g, m0), a.lerp_small ? m0 : g), d);
        float v = tcu_round_to(__fmul_rn(tcu_load_f32(a.exp_avg_sq, i, d), (float)a.beta2), d);
        v = tcu_round_to(fmaf(__fmul_rn((float)a.c2, g), g, v), d);
        float den;
        if (a.amsgrad) {
            const float x = tcu_load_f32(a.max_exp_avg_sq, i, d);
            const float mx = (x != x || v != v) ? __int_as_float(0x7FC00000) : (x > v ? x : v);  // v on ties
            tcu_store_f32(a.max_exp_avg_sq, i, d, mx);
            den = tcu_round_to(__fsqrt_rn(mx), d);
        } else {
            den = tcu_round_to(__fsqrt_rn(v), d);
        }
        den = tcu_round_to(__fdiv_rn(den, (float)a.bc2), d);
        den = tcu_round_to(__fadd_rn(den, (float)a.eps), d);
        const float q = __fdiv_rn(__fmul_rn((float)a.neg_step, m), den);
        tcu_store_f32(a.param, i, d, __fadd_rn(p, q));
        tcu_store_f32(a.exp_avg, i, d, m);
        tcu_store_f32(a.exp_avg_sq, i, d, v);
    }
}

__global__ void __launch_bounds__(TCU_THREADS) adam_f64(tcu_adam_args a, int64_t n) {
    double *P = (double *)a.param, *M = (double *)a.exp_avg, *V = (double *)a.exp_avg_sq;
    double *X = (double *)a.max_exp_avg_sq;
    const double *G = (const double *)a.grad;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        double g = a.maximize ? -G[i] : G[i];
        double p = P[i];
        if (a.decoupled) p = __dmul_rn(p, a.decay);
        if (a.l2) g = __dadd_rn(g, __dmul_rn(a.wd, p));
        const double m0 = M[i];
        const double m = fma(a.lerp_w, __dsub_rn(g, m0), a.lerp_small ? m0 : g);
        double v = __dmul_rn(V[i], a.beta2);
        v = fma(__dmul_rn(a.c2, g), g, v);
        double den;
        if (a.amsgrad) {
            const double x = X[i];
            const double mx = (x != x || v != v) ? __longlong_as_double(0x7FF8000000000000LL) : (x > v ? x : v);
            X[i] = mx;
            den = __dsqrt_rn(mx);
        } else {
            den = __dsqrt_rn(v);
        }
        den = __dadd_rn(__ddiv_rn(den, a.bc2), a.eps);
        P[i] = __dadd_rn(p, __ddiv_rn(__dmul_rn(a.neg_step, m), den));
        M[i] = m;
        V[i] = v;
    }
}

}  // namespace

extern "C" int tcu_launch_adam(const tcu_adam_args *a, int64_t n, int sm_count, cudaStream_t s) {
    if (n == 0) return 0;
    const tcu_launch l = tcu_launch_1d(n, sm_count, 4);
    if (a->dtype == TORC_DTYPE_F64) adam_f64<<<l.blocks, l.threads, 0, s>>>(*a, n);
    else adam_f32<<<l.blocks, l.threads, 0, s>>>(*a, n);
    return (int)cudaGetLastError();
}
