// backends/cpu_onednn/softmax.c — SOFTMAX and LOG_SOFTMAX along params.dim.dim on oneDNN's
// softmax_v2 primitive (src and dst may differ in dtype and layout), and f32 LOG_SOFTMAX as host
// loops with the reference's formulas (AVX-512, AVX2 or plain C, by torc's ISA).
#include <immintrin.h>
#include <math.h>
#include <omp.h>

#include "onednn-impl.h"

int onednn__build_softmax(const torc_op *op, onednn_plan *p) {
    const char *name = onednn__op_name(op->code);
    if (op->n_in != 1)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s takes 1 input, got %d", name, op->n_in);
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    if (!onednn__same_shape(x, y))
        return onednn__error(TORC_ERR_SHAPE, "onednn: %s: in and out shapes differ", name);
    const int nd = x->ndim > 0 ? x->ndim : 1;  // a 0-d tensor is a row of one
    int dim = op->params.dim.dim;
    if (dim < 0) dim += nd;
    if (dim < 0 || dim >= nd)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s: dim %d out of range for ndim %d", name,
                             op->params.dim.dim, x->ndim);
    const bool ok_in = x->dtype == TORC_DTYPE_F32 || x->dtype == TORC_DTYPE_BF16;
    const bool ok_out = y->dtype == TORC_DTYPE_F32 || y->dtype == TORC_DTYPE_BF16;
    if (!ok_in || !ok_out)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs float32/bfloat16 here, got "
                             "%s -> %s", name, torc_abi_dtype_name(x->dtype),
                             torc_abi_dtype_name(y->dtype));
    if (onednn__numel(y) == 0) return 0;
    onednn_view vs, vd;
    onednn__view(&vs, x, onednn__dt(x->dtype));
    onednn__view(&vd, y, onednn__dt(y->dtype));
    onednn__view_normalize(&vs);
    onednn__view_normalize(&vd);
    dnnl_memory_desc_t ms, md;
    onednn_view vt;
    int st, dst_buf;
    if ((st = onednn__plan_dst(p, &vd, &vt, &dst_buf))) return st;
    if ((st = onednn__view_md(&vs, &ms)) || (st = onednn__view_md(&vt, &md))) return st;
    dnnl_softmax_v2_desc_t desc;
    ONEDNN_CHECK(dnnl_softmax_v2_forward_desc_init(
        &desc, dnnl_forward_inference,
        op->code == TORC_OP_LOG_SOFTMAX ? dnnl_softmax_log : dnnl_softmax_accurate, &ms, &md, dim));
    dnnl_primitive_attr_t attr;
    if ((st = onednn__attr(&attr))) return st;
    onednn_bind b[2] = {{DNNL_ARG_SRC, ONEDNN_BUF_IN0, NULL}, {DNNL_ARG_DST, dst_buf, NULL}};
    st = onednn__plan_add(p, &desc, attr, false, 2, b);
    dnnl_primitive_attr_destroy(attr);
    if (!st) st = onednn__plan_dst_done(p, &vd, &vt, dst_buf);
    // oneDNN's row max skips NaN and its exp saturates: a row with NaN or +inf must be all NaN.
    p->fixup = ONEDNN_FIXUP_ROWS;
    return st;
}

// ---- LOG_SOFTMAX with a float32 result, on the host ----
// oneDNN's log is off by ~3e-6, so f32 log_softmax (what cross_entropy runs) is computed here with
// the reference's formulas in double (backends/reference/softmax.c), row by row on every core: the
// reference's bits but where the last bits of the sum of exps decide a rounding (the vector paths,
// below). Contiguous f32 in and out along the last non-trivial dim; anything else goes to the
// reference.
bool onednn__log_softmax_takes(const torc_op *op) {
    return op->code == TORC_OP_LOG_SOFTMAX && op->out[0].dtype == TORC_DTYPE_F32;
}

// Rows of len elements at unit stride; false when the dim is not innermost.
static bool rows_of(const torc_op *op, int64_t *len) {
    const torc_operand *x = &op->in[0];
    const int dim = op->params.dim.dim;
    *len = x->ndim == 0 ? 1 : x->shape[dim];
    for (int d = dim + 1; d < x->ndim; d++)
        if (x->shape[d] != 1) return false;
    return true;
}

int onednn__log_softmax_check(const torc_op *op) {
    if (op->n_in != 1) return onednn__error(TORC_ERR_INVALID_ARG, "onednn: log_softmax takes 1 input, got %d", op->n_in);
    int st = onednn__check_operand(&op->in[0], "in");
    if (!st) st = onednn__check_operand(&op->out[0], "out");
    if (st) return st;
    const torc_operand *x = &op->in[0];
    const int dim = op->params.dim.dim;
    if (x->ndim == 0 ? dim != 0 : (dim < 0 || dim >= x->ndim))
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: log_softmax: dim %d out of range for ndim %d", dim, x->ndim);
    int64_t len;
    if (x->dtype != TORC_DTYPE_F32 || !onednn__same_shape(x, &op->out[0]) || !onednn__dense(x) ||
        !onednn__dense(&op->out[0]) || !rows_of(op, &len))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: log_softmax into float32 runs contiguous float32 rows "
                             "along the last dim (others go to the reference backend: oneDNN's log is not "
                             "accurate to float32)");
    return 0;
}

// ---- the rows ----
// The reference's formulas (backends/reference/softmax.c) on one row of len floats, with libm's
// exp per element in double: the plain-C path, and the vector paths' rows whose max is not finite
// (a NaN, +inf, all -inf: the NaN results the reference gives, payloads included).
static void row_ref(const float *x, float *y, int64_t len, const float *next) {
    (void)next;
    double m = -INFINITY;  // NaN propagates to every result
    for (int64_t i = 0; i < len; i++) {
        if (isnan(x[i]) || x[i] > m) m = x[i];
        if (isnan(m)) break;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < len; i++) sum += exp((double)x[i] - m);
    const double log_sum = log(sum);
    for (int64_t i = 0; i < len; i++) y[i] = (float)((double)x[i] - m - log_sum);
}

// The vector paths: the max in float (a selection: exact), flagging NaN; the sum of exp(x - max)
// in double over 32 (AVX-512) or 16 (AVX2) lanes, each the sequential sum of every 32nd (16th)
// term, folded in a fixed order; log(sum) by libm; y = (float)((x - max) - log_sum) in double, the
// reference's operations, so y has the reference's bits wherever log_sum has. Only the sum differs
// (its order, and exp_d within 1 ulp where glibc's exp is within 0.5): log_sum moves by the two
// sums' rounding errors, 5e-15 on average over rows of 50257 (3e-14 at most in 300), and a float
// result changes only where its exact value lies that close to a rounding boundary: 0 of 4.3e8
// elements of random rows (uniform in [-1, 1] to [-40, 40], 17 to 50257 long). Where it shows is a
// peaked row's largest entry, y = -log_sum below ~1e-6: there a sum of 1 + tiny terms may round
// to the other neighbour, and y moves by 2^-52 (1's ulp), then rounded to float: 33 of 0.9M
// elements in tests/onednn_backend_test.c's rows of up to 100, which allows for it.
// exp_d(d) for d <= 0 (the AVX2 path's): 2^n e^r with n = round(d / ln 2) and r = d - n ln 2 in
// two steps (the first exact: ln 2's high part is a double, n has 11 bits, an FMA rounds once),
// e^r by its Taylor polynomial to r^13 (|r| <= ln 2 / 2: the remainder is 0.02 ulp). d below -708
// (x = -inf too) gives 0: e^d is below the smallest normal double there, the clamp keeps
// subnormals (microcode assists) out, and beside the max's term 1 the sum does not see such terms.
// NaN never reaches it: rows with a NaN, +inf or no finite entry take row_ref.
#define EXP_D_LO (-708.0)
#define EXP_D_POLY(fma, set, r)                                                                        \
    fma(fma(fma(fma(fma(fma(fma(fma(fma(fma(fma(fma(fma(set(1.0 / 6227020800), r, set(1.0 / 479001600)), \
    r, set(1.0 / 39916800)), r, set(1.0 / 3628800)), r, set(1.0 / 362880)), r, set(1.0 / 40320)), r,      \
    set(1.0 / 5040)), r, set(1.0 / 720)), r, set(1.0 / 120)), r, set(1.0 / 24)), r, set(1.0 / 6)), r,       \
    set(0.5)), r, set(1.0)), r, set(1.0))
static const double k_log2e = 0x1.71547652b82fep+0, k_ln2_hi = 0x1.62e42fefa39efp-1,
                    k_ln2_lo = 0x1.abc9e3b39803fp-56;

// The AVX-512 exp_d, 2^(n / 16) e^r: n = round(16 d / ln 2), 2^((n mod 16) / 16) from a table of 16
// (one vpermi2pd), |r| <= ln 2 / 32, so e^r needs Taylor's terms to r^7 only (the remainder is
// 0.005 ulp): e^d = T + T r P(r), T rounded to double. 30% faster than the degree-13 polynomial
// (the sum pass 1.0 -> 0.7 ns an element, in cache); within 1 ulp of glibc's exp on 4M points in
// [-708, 0] (0.25 ulp from it on average, the degree-13 form 0.06). No 16-entry permute in AVX2.
#define LSM_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))
static const double k_exp2_16[16] = {  // 2^(j / 16), rounded to nearest
    0x1.0000000000000p+0, 0x1.0b5586cf9890fp+0, 0x1.172b83c7d517bp+0, 0x1.2387a6e756238p+0,
    0x1.306fe0a31b715p+0, 0x1.3dea64c123422p+0, 0x1.4bfdad5362a27p+0, 0x1.5ab07dd485429p+0,
    0x1.6a09e667f3bcdp+0, 0x1.7a11473eb0187p+0, 0x1.8ace5422aa0dbp+0, 0x1.9c49182a3f090p+0,
    0x1.ae89f995ad3adp+0, 0x1.c199bdd85529cp+0, 0x1.d5818dcfba487p+0, 0x1.ea4afa2a490dap+0};
LSM_AVX512 static inline __m512d exp_d_avx512(__m512d d, __m512d tab_lo, __m512d tab_hi) {
    const __mmask8 live = _mm512_cmp_pd_mask(d, _mm512_set1_pd(EXP_D_LO), _CMP_GE_OQ);
    d = _mm512_max_pd(d, _mm512_set1_pd(EXP_D_LO));
    const __m512d shift = _mm512_set1_pd(0x1.8p52);  // t's low bits hold n: round to nearest
    const __m512d t = _mm512_fmadd_pd(d, _mm512_set1_pd(16 * k_log2e), shift), n = _mm512_sub_pd(t, shift);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(k_ln2_hi / 16), d);  // exact, as in exp_d
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(k_ln2_lo / 16), r);
    const __m512d T = _mm512_permutex2var_pd(tab_lo, _mm512_castpd_si512(t), tab_hi);  // index: n's low 4 bits
#define F_ _mm512_fmadd_pd
#define C_ _mm512_set1_pd
    const __m512d P = F_(F_(F_(F_(F_(F_(C_(1.0 / 5040), r, C_(1.0 / 720)), r, C_(1.0 / 120)), r, C_(1.0 / 24)), r,
                                  C_(1.0 / 6)), r, C_(0.5)), r, C_(1.0));
#undef F_
#undef C_
    const __m512d e = _mm512_fmadd_pd(_mm512_mul_pd(T, r), P, T);
    return _mm512_maskz_scalef_pd(live, e, _mm512_mul_pd(n, _mm512_set1_pd(1.0 / 16)));  // 2^floor(n / 16)
}

// The max of len > 0 floats; *nan when one is NaN.
LSM_AVX512 static float row_max_avx512(const float *x, int64_t len, bool *nan) {
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
    __mmask16 un = 0;
    int64_t i = 0;
    for (; i + 32 <= len; i += 32) {
        const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        un |= _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
        m0 = _mm512_max_ps(m0, a);
        m1 = _mm512_max_ps(m1, b);
    }
    for (; i < len; i += 16) {
        const __mmask16 k = len - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - i)) - 1);
        const __m512 a = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, x + i);
        un |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
        m0 = _mm512_max_ps(m0, a);
    }
    *nan = un != 0;
    return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

// next: the row this thread takes after x (NULL: none), prefetched into L2 during the sum pass,
// which is compute-bound, so that the next max pass does not wait on memory.
LSM_AVX512 static void row_avx512(const float *x, float *y, int64_t len, const float *next) {
    bool nan;
    const float mf = row_max_avx512(x, len, &nan);
    if (nan || !isfinite(mf)) {
        row_ref(x, y, len, NULL);
        return;
    }
    const double m = mf;
    const __m512d vm = _mm512_set1_pd(m), tlo = _mm512_loadu_pd(k_exp2_16), thi = _mm512_loadu_pd(k_exp2_16 + 8);
#define E8(p) exp_d_avx512(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p)), vm), tlo, thi)
    __m512d s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= len; i += 32) {
        if (next) {
            _mm_prefetch((const char *)(next + i), _MM_HINT_T1);
            _mm_prefetch((const char *)(next + i + 16), _MM_HINT_T1);
        }
        _mm_prefetch((const char *)(y + i), _MM_HINT_T1);
        _mm_prefetch((const char *)(y + i + 16), _MM_HINT_T1);
        s0 = _mm512_add_pd(s0, E8(x + i));
        s1 = _mm512_add_pd(s1, E8(x + i + 8));
        s2 = _mm512_add_pd(s2, E8(x + i + 16));
        s3 = _mm512_add_pd(s3, E8(x + i + 24));
    }
#undef E8
    for (; i < len; i += 8) {  // the last 0..31: 8 at a time into s0, the rest masked
        const __mmask8 k = len - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (len - i)) - 1);
        const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, x + i)), vm);
        s0 = _mm512_mask_add_pd(s0, k, s0, exp_d_avx512(d, tlo, thi));
    }
    const double log_sum = log(_mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3))));
    const __m512d vl = _mm512_set1_pd(log_sum);
    for (i = 0; i < len; i += 8) {
        const __mmask8 k = len - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (len - i)) - 1);
        const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, x + i)), vm);
        _mm256_mask_storeu_ps(y + i, k, _mm512_cvtpd_ps(_mm512_sub_pd(d, vl)));
    }
}

#define LSM_AVX2 __attribute__((target("avx2,fma")))
// exp_d on 4 lanes: 2^n from n's bits (n + 1023 is in [2, 1023] above the clamp) instead of scalef.
LSM_AVX2 static inline __m256d exp_d_avx2(__m256d d) {
    const __m256d live = _mm256_cmp_pd(d, _mm256_set1_pd(EXP_D_LO), _CMP_GE_OQ);
    d = _mm256_max_pd(d, _mm256_set1_pd(EXP_D_LO));
    const __m256d shift = _mm256_set1_pd(0x1.8p52);  // t's low bits hold n: round to nearest
    const __m256d t = _mm256_fmadd_pd(d, _mm256_set1_pd(k_log2e), shift), n = _mm256_sub_pd(t, shift);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(k_ln2_hi), d);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(k_ln2_lo), r);
    const __m256d p = EXP_D_POLY(_mm256_fmadd_pd, _mm256_set1_pd, r);
    const __m256i e = _mm256_slli_epi64(_mm256_add_epi64(_mm256_castpd_si256(t), _mm256_set1_epi64x(1023)), 52);
    return _mm256_and_pd(live, _mm256_mul_pd(p, _mm256_castsi256_pd(e)));
}

LSM_AVX2 static float row_max_avx2(const float *x, int64_t len, bool *nan) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, un = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= len; i += 16) {
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        un = _mm256_or_ps(un, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
        m0 = _mm256_max_ps(m0, a);
        m1 = _mm256_max_ps(m1, b);
    }
    float lanes[8], m = -INFINITY;
    _mm256_storeu_ps(lanes, _mm256_max_ps(m0, m1));
    *nan = _mm256_movemask_ps(un) != 0;
    for (int j = 0; j < 8; j++) m = lanes[j] > m ? lanes[j] : m;
    for (; i < len; i++) {
        *nan = *nan || isnan(x[i]);
        m = x[i] > m ? x[i] : m;
    }
    return m;
}

LSM_AVX2 static void row_avx2(const float *x, float *y, int64_t len, const float *next) {
    bool nan;
    const float mf = row_max_avx2(x, len, &nan);
    if (nan || !isfinite(mf)) {
        row_ref(x, y, len, NULL);
        return;
    }
    const double m = mf;
    const __m256d vm = _mm256_set1_pd(m);
#define D4(p) _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(p)), vm)
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= len; i += 16) {
        if (next) _mm_prefetch((const char *)(next + i), _MM_HINT_T1);
        _mm_prefetch((const char *)(y + i), _MM_HINT_T1);
        s0 = _mm256_add_pd(s0, exp_d_avx2(D4(x + i)));
        s1 = _mm256_add_pd(s1, exp_d_avx2(D4(x + i + 4)));
        s2 = _mm256_add_pd(s2, exp_d_avx2(D4(x + i + 8)));
        s3 = _mm256_add_pd(s3, exp_d_avx2(D4(x + i + 12)));
    }
    // the tail's terms as a 16-float block padded with -inf (exp 0), so every lane sums the same way
    float tail[16];
    for (int j = 0; j < 16; j++) tail[j] = i + j < len ? x[i + j] : -INFINITY;
    s0 = _mm256_add_pd(s0, exp_d_avx2(D4(tail)));
    s1 = _mm256_add_pd(s1, exp_d_avx2(D4(tail + 4)));
    s2 = _mm256_add_pd(s2, exp_d_avx2(D4(tail + 8)));
    s3 = _mm256_add_pd(s3, exp_d_avx2(D4(tail + 12)));
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    const double log_sum = log((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]));
    const __m256d vl = _mm256_set1_pd(log_sum);
    for (i = 0; i + 4 <= len; i += 4) _mm_storeu_ps(y + i, _mm256_cvtpd_ps(_mm256_sub_pd(D4(x + i), vl)));
    for (; i < len; i++) y[i] = (float)((double)x[i] - m - log_sum);
#undef D4
}

typedef void (*lsm_row_fn)(const float *x, float *y, int64_t len, const float *next);

// Measured: log_softmax(x, 1) of a 256 x 50257 f32 x uniform in [-4, 4] (the GPT's LM-head loss
// rows), torc_run_op(TORC_RUN_NATIVE) in a small timing program, TORC_NUM_THREADS=1, best of 11,
// interleaved with the libm loop's build, on a 2-vCPU Emerald Rapids Xeon (family 6 model 207,
// shared): AVX-512 12.0 ms (0.93 ns an element), AVX2 (TORC_MAX_CPU_ISA=AVX2) 20.8 ms, plain C
// (TORC_MAX_CPU_ISA=AVX) 97.6 ms, against 91 ms (7.1 ns) for the libm loop before. The prefetches
// into L2 (the next row's x, this row's y) took AVX-512 from ~1.4 to 0.95 ns an element: the max
// pass reads x from memory, the output pass wrote y through read-for-ownership misses.
int onednn__log_softmax_run(const torc_op *op) {
    const int64_t n = onednn__numel(&op->out[0]);
    int64_t len;
    rows_of(op, &len);
    if (n == 0 || len == 0) return 0;
    const float *in = op->in[0].data;
    float *out = op->out[0].data;
    const int64_t rows = n / len;
    const int isa = onednn__isa();  // TORC_MAX_CPU_ISA caps it
    const lsm_row_fn row = isa >= ONEDNN_ISA_AVX512_CORE ? row_avx512 : isa >= ONEDNN_ISA_AVX2 ? row_avx2 : row_ref;
    // each row whole on one thread: the bits do not depend on the thread count
    ONEDNN_FOR(n >= ONEDNN_SMALL_STREAM, r, rows, {
        row(in + r * len, out + r * len, len, r + 1 < rows ? in + (r + 1) * len : NULL);
    });
    return 0;
}
