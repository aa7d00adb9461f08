// backends/cpu_onednn/pointwise.c — the fused pointwise ops (ADDCMUL, ADDCDIV, LERP, and ADD /
// SUB with an alpha other than +-1) on dense float32 operands: OpenMP loops that round exactly as
// PyTorch's CPU kernels (and the reference). oneDNN has no ternary primitive, a chain of binary
// ones would round between its steps, and its binary add with a source scale rounds alpha * y
// before adding (SGD's update drifted from the reference from the first step).
// Each statement below is one IEEE float operation (ISO C, no -ffast-math, so nothing is
// contracted or reassociated); fmaf is the one fused step PyTorch's kernels take too.
#include <math.h>
#include <omp.h>

#include "onednn-impl.h"

// x + alpha * y with alpha = +-1 is exact in oneDNN's binary primitive (a negation, one rounding).
static bool scaled_add(const torc_op *op) {
    return (op->code == TORC_OP_ADD || op->code == TORC_OP_SUB) && fabs(op->params.scalar.value) != 1.0;
}

bool onednn__pointwise_takes(const torc_op *op) {
    return op->code == TORC_OP_ADDCMUL || op->code == TORC_OP_ADDCDIV || op->code == TORC_OP_LERP || scaled_add(op);
}

int onednn__pointwise_check(const torc_op *op) {
    const char *name = onednn__op_name(op->code);
    const int want = op->code == TORC_OP_ADDCMUL || op->code == TORC_OP_ADDCDIV ? 3 : 2;
    if (op->n_in != want)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s takes %d inputs, got %d", name, want, op->n_in);
    int st = onednn__check_operand(&op->out[0], "out");
    if (st) return st;
    bool ok = op->out[0].dtype == TORC_DTYPE_F32 && onednn__dense(&op->out[0]);
    for (int i = 0; i < op->n_in; i++) {
        if ((st = onednn__check_operand(&op->in[i], "in"))) return st;
        if (!onednn__same_shape(&op->in[i], &op->out[0]))
            return onednn__error(TORC_ERR_SHAPE, "onednn: %s: inputs must arrive broadcast to out's shape", name);
        ok = ok && op->in[i].dtype == TORC_DTYPE_F32 && onednn__dense(&op->in[i]);
    }
    if (!ok)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs contiguous float32 operands only (other "
                             "dtypes, broadcasts and strided views go to the reference backend)", name);
    return 0;
}

// The loops, written once and compiled twice: for AVX2+FMA (fmaf becomes vfmadd, the loop
// vectorizes) and for any x86-64 (fmaf is libm's, exact but slow); run() picks by the CPU.
// Elements [i0, i1) of out = op(s, a, b); out may be s (in place): element i is read first.
#define POINTWISE_LOOPS(suffix, attr)                                                                   \
    attr static void addcmul_##suffix(float *out, const float *s, const float *a, const float *b,      \
                                      float v, int64_t i0, int64_t i1) {                               \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) out[i] = fmaf(v * a[i], b[i], s[i]);      \
    }                                                                                                   \
    attr static void addcdiv_##suffix(float *out, const float *s, const float *a, const float *b,      \
                                      float v, int64_t i0, int64_t i1) {                               \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                                         \
            const float q = v * a[i] / b[i];                                                            \
            out[i] = s[i] + q;                                                                          \
        }                                                                                               \
    }                                                                                                   \
    attr static void lerp_##suffix(float *out, const float *s, const float *e, const float *unused,    \
                                   float w, int64_t i0, int64_t i1) {                                   \
        (void)unused;                                                                                   \
        if (fabsf(w) < 0.5f) {                                                                          \
            _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) out[i] = fmaf(w, e[i] - s[i], s[i]);  \
        } else {                                                                                        \
            const float c = w - 1.0f;                                                                   \
            _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) out[i] = fmaf(c, e[i] - s[i], e[i]);  \
        }                                                                                               \
    }                                                                                                   \
    /* ADD's x + alpha * y (backend.h): PyTorch's vec::fmadd(y, alpha, x), alpha as a float (SUB */    \
    /* arrives with alpha negated). In double and then float it would round twice: x = 1 + 2^-23, */    \
    /* alpha = 1 + 2^-23, y = (1 - 2^-23) 2^-24 gives 1 + 2^-22 there, 1 + 2^-23 fused. */              \
    attr static void axpy_##suffix(float *out, const float *x, const float *y, double alpha,           \
                                   int64_t i0, int64_t i1) {                                            \
        const float a = (float)alpha;                                                                   \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) out[i] = fmaf(a, y[i], x[i]);             \
    }
POINTWISE_LOOPS(fma, __attribute__((target("avx2,fma"))))
POINTWISE_LOOPS(any, )

typedef void (*loop_fn)(float *, const float *, const float *, const float *, float, int64_t, int64_t);

static bool use_fma(void) { return onednn__isa() >= ONEDNN_ISA_AVX2; }  // TORC_MAX_CPU_ISA caps it

static loop_fn pick(torc_opcode code) {
    const bool fma = use_fma();
    switch (code) {
    case TORC_OP_ADDCMUL: return fma ? addcmul_fma : addcmul_any;
    case TORC_OP_ADDCDIV: return fma ? addcdiv_fma : addcdiv_any;
    default: return fma ? lerp_fma : lerp_any;
    }
}

// One chunk per thread (onednn__thread_range); small ops on the calling thread.
int onednn__pointwise_run(const torc_op *op) {
    const int64_t n = onednn__numel(&op->out[0]);
    if (n == 0) return 0;
    float *out = op->out[0].data;
    const float *s = op->in[0].data, *a = op->in[1].data, *b = op->n_in > 2 ? op->in[2].data : NULL;
    const int nthr = onednn__single_thread(op->code, n) ? 1 : omp_get_max_threads();
    if (scaled_add(op)) {
        const double alpha = op->code == TORC_OP_SUB ? -op->params.scalar.value : op->params.scalar.value;
        void (*axpy)(float *, const float *, const float *, double, int64_t, int64_t) = use_fma() ? axpy_fma : axpy_any;
        if (nthr <= 1) {  // no OpenMP region: a team of one still costs libgomp ~0.4 us
            axpy(out, s, a, alpha, 0, n);
            return 0;
        }
#pragma omp parallel num_threads(nthr)
        {
            int64_t i0, i1;
            onednn__thread_range(n, &i0, &i1);
            axpy(out, s, a, alpha, i0, i1);
        }
        return 0;
    }
    const float v = (float)op->params.scalar.value;  // PyTorch's opmath: the scalar as a float
    const loop_fn fn = pick(op->code);
    if (nthr <= 1) {
        fn(out, s, a, b, v, 0, n);
        return 0;
    }
#pragma omp parallel num_threads(nthr)
    {
        int64_t i0, i1;
        onednn__thread_range(n, &i0, &i1);
        fn(out, s, a, b, v, i0, i1);
    }
    return 0;
}
