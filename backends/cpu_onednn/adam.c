// backends/cpu_onednn/adam.c — ADAM_STEP on dense float32 or bfloat16 operands: one OpenMP pass
// reading grad, param, exp_avg, exp_avg_sq (and max_exp_avg_sq) once and writing them once, bit
// for bit the reference (backends/reference/adam.c, the contract in backend.h). The composed
// update it replaces made about ten passes over memory and allocated its temporaries: Adam's step
// over the Cruncher's D=1024 L=4 parameters (4.2M f32) took 6.1-6.8 ms on one Zen 4 thread, this
// loop 2.5-4.5 ms (torc-bench --optim-step adam, TORC_NUM_THREADS=1, medians of 5 rounds).
// Every float statement below is one IEEE operation of the contract's (float where the reference
// rounds a double result to float and that rounding is innocent: products of two floats, and the
// quotients, square roots and sums of floats, are exact or rounded once in double); Adam's L2 term
// is ADD with alpha: wd in T, one fmaf. This file is
// compiled with -ffp-contract=off (nothing fused behind our back; fmaf only where the contract
// has an fma) and -fno-math-errno (sqrtf vectorizes; it sets no errno here anyway).
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "onednn-impl.h"

bool onednn__adam_takes(const torc_op *op) { return op->code == TORC_OP_ADAM_STEP; }

int onednn__adam_check(const torc_op *op) {
    const int want = op->params.adam.flags & TORC_ADAM_AMSGRAD ? 4 : 3;
    if (op->n_in != 1 || op->n_out != want)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: adam_step takes 1 input and %d outputs, got %d and %d", want,
                             op->n_in, op->n_out);
    const torc_dtype t = op->out[0].dtype;
    bool ok = t == TORC_DTYPE_F32 || t == TORC_DTYPE_BF16;
    for (int k = 0; k <= want; k++) {
        const torc_operand *x = k < want ? &op->out[k] : &op->in[0];
        int st = onednn__check_operand(x, k < want ? "out" : "in");
        if (st) return st;
        if (!onednn__same_shape(x, &op->out[0]))
            return onednn__error(TORC_ERR_SHAPE, "onednn: adam_step: every operand has param's shape");
        ok = ok && x->dtype == t && onednn__dense(x);
    }
    if (!ok)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: adam_step runs contiguous float32 or bfloat16 operands "
                             "only (other dtypes and strided views go to the reference backend)");
    for (int k = 1; k < want; k++)
        if (!op->out[k].data && onednn__numel(&op->out[k]) > 0)
            return onednn__error(TORC_ERR_INVALID_ARG, "onednn: adam_step: out[%d].data is NULL", k);
    return 0;
}

// The scalars, each in the type the reference takes it in (adam.c there).
typedef struct adam_args {
    void *p, *m, *v, *vmax;  // param, exp_avg, exp_avg_sq, max_exp_avg_sq: T
    const void *g;           // grad: T
    bool maximize, l2;
    float decay;             // opmath(1 - lr*wd) with decoupled weight decay, else 1 (p * 1 is p)
    float wd;                // wd cast to T, Adam's L2 term (ADD's alpha)
    float lerp_w;            // LERP: |w| < 0.5 ? w : w - 1, with the first or second form
    bool lerp_small;
    float beta2, c2, bc2, eps, neg_step;  // eps in T (add_scalar_ reads it so), the others opmath
} adam_args;

// Bits of a float and back (memcpy: the loops stay branch-free and vectorize).
static inline __attribute__((always_inline)) uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static inline __attribute__((always_inline)) float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}
// x rounded to bfloat16 (torc_f32_to_bf16's rounding: nearest even, NaN -> 0x7FC0), written
// without a branch.
static inline __attribute__((always_inline)) uint16_t to_bf16(float x) {
    const uint32_t u = bits(x);
    const uint16_t r = (uint16_t)((u + ((u >> 16) & 1) + UINT32_C(0x7FFF)) >> 16);
    return (u & UINT32_C(0x7FFFFFFF)) > UINT32_C(0x7F800000) ? UINT16_C(0x7FC0) : r;
}
// x rounded to the dtype and back (the reference's stores), or x for float32.
static inline __attribute__((always_inline)) float rnd(float x, bool bf16) {
    return bf16 ? from_bits((uint32_t)to_bf16(x) << 16) : x;
}
static inline __attribute__((always_inline)) float load(const void *base, int64_t i, bool bf16) {
    return bf16 ? from_bits((uint32_t)((const uint16_t *)base)[i] << 16) : ((const float *)base)[i];
}
static inline __attribute__((always_inline)) void store(void *base, int64_t i, float x, bool bf16) {
    if (bf16) ((uint16_t *)base)[i] = to_bf16(x);
    else ((float *)base)[i] = x;
}

// Elements [i0, i1): the reference's sequence, step by step. l2, ams and bf16 are constants in
// every instance (the branches leave the loop); maximize (a sign flip, as NEG: NaNs included) and
// the lerp form are selects.
static inline __attribute__((always_inline)) void adam_span(const adam_args *a, int64_t i0, int64_t i1, bool l2,
                                                            bool ams, bool bf16) {
    const float w = a->lerp_w, decay = a->decay, beta2 = a->beta2, c2 = a->c2, bc2 = a->bc2, eps = a->eps;
    const float neg_step = a->neg_step;
    const float wd = a->wd;
    const uint32_t from_self = a->lerp_small ? UINT32_C(0xFFFFFFFF) : 0;  // lerp's base: self, else end
    const uint32_t flip = a->maximize ? UINT32_C(0x80000000) : 0;
    void *restrict pp = a->p, *restrict mp = a->m, *restrict vp = a->v, *restrict xp = a->vmax;
    const void *restrict gp = a->g;
#pragma omp simd
    for (int64_t i = i0; i < i1; i++) {
        float g = from_bits(bits(load(gp, i, bf16)) ^ flip);
        const float p = rnd(load(pp, i, bf16) * decay, bf16);        // AdamW's decay (1 otherwise: exact)
        if (l2) g = rnd(fmaf(wd, p, g), bf16);                       // Adam's L2 term: ADD with alpha
        const float m0 = load(mp, i, bf16);
        const float base = from_bits((bits(m0) & from_self) | (bits(g) & ~from_self));
        const float m = rnd(fmaf(w, g - m0, base), bf16);           // lerp
        float v = rnd(load(vp, i, bf16) * beta2, bf16);
        v = rnd(fmaf(c2 * g, g, v), bf16);                            // addcmul
        float d;
        if (ams) {
            const float x = load(xp, i, bf16);
            const bool nan = (x != x) | (v != v);
            const float mx = nan ? NAN : (x > v ? x : v);             // maximum (v on ties)
            store(xp, i, mx, bf16);
            d = rnd(sqrtf(mx), bf16);
        } else {
            d = rnd(sqrtf(v), bf16);
        }
        d = rnd(d / bc2, bf16);
        d = rnd(d + eps, bf16);
        const float q = neg_step * m / d;                             // addcdiv
        store(pp, i, p + q, bf16);
        store(mp, i, m, bf16);
        store(vp, i, v, bf16);
    }
}

// The loops, compiled for AVX-512, AVX2 + FMA and any x86-64 (fmaf is then libm's: exact, slow),
// picked by torc's ISA (isa.c: the CPU, capped by TORC_MAX_CPU_ISA); each gives the same bits.
typedef void (*span_fn)(const adam_args *a, int64_t i0, int64_t i1);
#define ADAM_SPANS(suffix, attr)                                                                            \
    attr static void f32_##suffix(const adam_args *a, int64_t i0, int64_t i1) { adam_span(a, i0, i1, 0, 0, 0); }      \
    attr static void f32_l2_##suffix(const adam_args *a, int64_t i0, int64_t i1) { adam_span(a, i0, i1, 1, 0, 0); }   \
    attr static void f32_ams_##suffix(const adam_args *a, int64_t i0, int64_t i1) { adam_span(a, i0, i1, 0, 1, 0); }  \
    attr static void f32_l2_ams_##suffix(const adam_args *a, int64_t i0, int64_t i1) { adam_span(a, i0, i1, 1, 1, 0); } \
    attr static void bf16_##suffix(const adam_args *a, int64_t i0, int64_t i1) { adam_span(a, i0, i1, 0, 0, 1); }     \
    attr static void bf16_l2_##suffix(const adam_args *a, int64_t i0, int64_t i1) { adam_span(a, i0, i1, 1, 0, 1); }  \
    attr static void bf16_ams_##suffix(const adam_args *a, int64_t i0, int64_t i1) { adam_span(a, i0, i1, 0, 1, 1); } \
    attr static void bf16_l2_ams_##suffix(const adam_args *a, int64_t i0, int64_t i1) { adam_span(a, i0, i1, 1, 1, 1); } \
    static const span_fn spans_##suffix[8] = {f32_##suffix,  f32_l2_##suffix,  f32_ams_##suffix,  f32_l2_ams_##suffix, \
                                              bf16_##suffix, bf16_l2_##suffix, bf16_ams_##suffix, bf16_l2_ams_##suffix};
ADAM_SPANS(avx512, __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma"))))
ADAM_SPANS(avx2, __attribute__((target("avx2,fma"))))
ADAM_SPANS(any, )

// The scalars and loop of one ADAM_STEP op.
static span_fn adam_setup(const torc_op *op, adam_args *out) {
    const uint32_t flags = op->params.adam.flags;
    const double lr = op->params.adam.lr, wd = op->params.adam.weight_decay;
    const bool bf16 = op->out[0].dtype == TORC_DTYPE_BF16, ams = flags & TORC_ADAM_AMSGRAD;
    const bool decoupled = (flags & TORC_ADAM_DECOUPLED) && wd != 0.0, l2 = !(flags & TORC_ADAM_DECOUPLED) && wd != 0.0;
    const float w1 = (float)(1.0 - op->params.adam.beta1);
    adam_args a = {.p = op->out[0].data,
                   .m = op->out[1].data,
                   .v = op->out[2].data,
                   .vmax = ams ? op->out[3].data : NULL,
                   .g = op->in[0].data,
                   .maximize = flags & TORC_ADAM_MAXIMIZE,
                   .l2 = l2,
                   .decay = decoupled ? (float)(1.0 - lr * wd) : 1.0f,
                   .wd = rnd((float)wd, bf16),
                   .lerp_small = fabsf(w1) < 0.5f,
                   .beta2 = (float)op->params.adam.beta2,
                   .c2 = (float)(1.0 - op->params.adam.beta2),
                   .bc2 = (float)op->params.adam.bc2_sqrt,
                   .eps = rnd((float)op->params.adam.eps, bf16),
                   .neg_step = (float)-op->params.adam.step_size};
    a.lerp_w = a.lerp_small ? w1 : w1 - 1.0f;
    *out = a;
    const onednn_isa isa = onednn__isa();
    const span_fn *table = isa >= ONEDNN_ISA_AVX512_CORE ? spans_avx512 : isa >= ONEDNN_ISA_AVX2 ? spans_avx2 : spans_any;
    return table[(bf16 ? 4 : 0) + (ams ? 2 : 0) + (l2 ? 1 : 0)];
}

int onednn__adam_run(const torc_op *op) {
    const int64_t n = onednn__numel(&op->out[0]);
    if (n == 0) return 0;
    adam_args a;
    const span_fn fn = adam_setup(op, &a);
    const int nthr = onednn__single_thread(op->code, n) ? 1 : omp_get_max_threads();
    if (nthr <= 1) {
        fn(&a, 0, n);
        return 0;
    }
#pragma omp parallel num_threads(nthr)
    {
        int64_t i0, i1;
        onednn__thread_range(n, &i0, &i1);
        fn(&a, i0, i1);
    }
    return 0;
}

// ---- ADAM_STEP_LIST (ABI 2.6) ----
// The list's elements are cut into pieces of at most ADAM_PIECE elements (a tensor's last piece
// shorter, a small tensor one piece), all in one parallel
// region for the whole optimizer step instead of one per parameter, and a tensor smaller than a
// thread's share no longer runs alone on one thread (the single op's onednn__single_thread); the
// team takes them dynamically (pieces of small tensors are short). Each
// element's update depends on nothing else, so the bits are those of the elements one by one, at
// any thread count and any piece size. 32K elements: 128 KiB of f32 for each of the four or five
// streams, a piece within L2; a multiple of 32 (onednn__thread_range's 64-byte boundaries).
#define ADAM_PIECE (INT64_C(1) << 15)

bool onednn__adam_list_takes(const torc_op *op) { return op->code == TORC_OP_ADAM_STEP_LIST; }

static const torc_op_list *adam_list(const torc_op *op) {
    const torc_op_list *l = op->params.ext.data;
    return l && TORC_STRUCT_HAS(l, torc_op_list, ops) && l->n >= 1 && l->ops ? l : NULL;
}

int onednn__adam_list_check(const torc_op *op) {
    const torc_op_list *l = adam_list(op);
    if (!l) return onednn__error(TORC_ERR_INVALID_ARG, "onednn: adam_step_list: params.ext.data is not a list of ops");
    for (int i = 0; i < l->n; i++) {
        const torc_op *e = &l->ops[i];
        if (e->code != TORC_OP_ADAM_STEP)
            return onednn__error(TORC_ERR_INVALID_ARG, "onednn: adam_step_list: element %d is opcode %d, not adam_step", i,
                                 (int)e->code);
        int st = onednn__adam_check(e);
        if (st) return st;
        if ((!e->out[0].data || !e->in[0].data) && onednn__numel(&e->out[0]) > 0)
            return onednn__error(TORC_ERR_INVALID_ARG, "onednn: adam_step_list: element %d's data is NULL", i);
    }
    return 0;
}

typedef struct adam_piece {
    int e;           // element
    int64_t i0, i1;  // its elements [i0, i1)
} adam_piece;

int onednn__adam_list_run(const torc_op *op) {
    const torc_op_list *l = adam_list(op);
    const int n = l->n;
    int64_t total = 0, npieces = 0;
    for (int i = 0; i < n; i++) {
        const int64_t m = onednn__numel(&l->ops[i].out[0]);
        total += m, npieces += (m + ADAM_PIECE - 1) / ADAM_PIECE;
    }
    if (total == 0) return 0;
    adam_args *args = malloc((size_t)n * sizeof *args);
    span_fn *fns = malloc((size_t)n * sizeof *fns);
    adam_piece *pieces = malloc((size_t)npieces * sizeof *pieces);
    if (!args || !fns || !pieces) {
        free(args), free(fns), free(pieces);
        return onednn__error(TORC_ERR_OOM, "onednn: adam_step_list: out of memory");
    }
    int64_t k = 0;
    for (int i = 0; i < n; i++) {
        fns[i] = adam_setup(&l->ops[i], &args[i]);
        const int64_t m = onednn__numel(&l->ops[i].out[0]);
        for (int64_t i0 = 0; i0 < m; i0 += ADAM_PIECE) pieces[k++] = (adam_piece){i, i0, i0 + ADAM_PIECE < m ? i0 + ADAM_PIECE : m};
    }
    const int nthr = onednn__single_thread(TORC_OP_ADAM_STEP, total) || npieces < 2 ? 1 : omp_get_max_threads();
    if (nthr <= 1) {
        for (int64_t p = 0; p < npieces; p++) fns[pieces[p].e](&args[pieces[p].e], pieces[p].i0, pieces[p].i1);
    } else {
#pragma omp parallel for schedule(dynamic) num_threads(nthr)
        for (int64_t p = 0; p < npieces; p++) fns[pieces[p].e](&args[pieces[p].e], pieces[p].i0, pieces[p].i1);
    }
    free(args), free(fns), free(pieces);
    return 0;
}
