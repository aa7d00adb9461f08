// backends/cpu_onednn/layer_norm.c — LAYER_NORM and LAYER_NORM_BACKWARD on contiguous f32, bf16 and
// f16 rows (and f32 parameters of a bf16/f16 x): the reference's double formulas in its order and
// its conversions (the same bits), rows on every core.
// oneDNN's layer_normalization primitive is not used: it accumulates in float and gives
// other answers than the reference (1e-4 relative on rows of a large mean), and its backward
// reduces dweight over threads in an order of its own. Anything else goes to the reference.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <torc/convert.h>

#include "onednn-impl.h"

bool onednn__layer_norm_takes(const torc_op *op) {
    return op->code == TORC_OP_LAYER_NORM || op->code == TORC_OP_LAYER_NORM_BACKWARD;
}

static bool is_backward(const torc_op *op) { return op->code == TORC_OP_LAYER_NORM_BACKWARD; }

// Rows (M) and row length (N) of x, whose dims from params.norm.axis on are normalized.
static void rows_of(const torc_op *op, int64_t *M, int64_t *N) {
    const torc_operand *x = &op->in[is_backward(op) ? 1 : 0];
    *M = 1;
    *N = 1;
    for (int d = 0; d < x->ndim; d++) *(d < op->params.norm.axis ? M : N) *= x->shape[d];
}

// The dtypes taken: x f32, bf16 or f16; weight, bias (and their gradients), mean and rstd x's
// dtype or, for a bf16/f16 x, f32 (PyTorch's CPU mixed dtype).
static bool x_dtype(torc_dtype d) { return d == TORC_DTYPE_F32 || d == TORC_DTYPE_BF16 || d == TORC_DTYPE_F16; }
static bool side_dtype(torc_dtype d, torc_dtype x) { return d == x || (d == TORC_DTYPE_F32 && x_dtype(x)); }

int onednn__layer_norm_check(const torc_op *op) {
    const uint32_t a = op->params.norm.affine;
    const int w = (int)(a & 1), b = (int)(a >> 1 & 1);
    const bool bw = is_backward(op);
    const int n_in = bw ? 4 + w : 1 + w + b, n_out = bw ? 1 + w + b : 3;
    if ((a & ~3u) || op->n_in != n_in || op->n_out != n_out)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s: unexpected operand counts (the reference says why)",
                             onednn__op_name(op->code));
    int st = 0;
    for (int i = 0; i < op->n_in && !st; i++) st = onednn__check_operand(&op->in[i], "in");
    for (int i = 0; i < op->n_out && !st; i++) st = onednn__check_operand(&op->out[i], "out");
    if (st) return st;
    const torc_operand *x = &op->in[bw ? 1 : 0];
    const torc_dtype xd = x->dtype, sd = bw ? op->in[2].dtype : op->out[1].dtype;
    const torc_dtype pd = bw ? (w ? op->in[4].dtype : op->n_out > 1 ? op->out[1].dtype : xd)
                             : (op->n_in > 1 ? op->in[1].dtype : xd);
    const int axis = op->params.norm.axis;
    bool ok = axis >= 0 && axis < x->ndim && x_dtype(xd) && side_dtype(sd, xd) && side_dtype(pd, xd);
    int64_t M = 0, N = 0;
    if (ok) rows_of(op, &M, &N);
    // Every operand dense; x-shaped ones x's shape and dtype, the others M (mean, rstd) or N
    // (parameters) elements (the reference checks their exact shapes when it gets the op instead).
    for (int i = 0; ok && i < op->n_in + op->n_out; i++) {
        const torc_operand *t = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        if (!t->data && onednn__numel(t) > 0)
            return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s: operand %d's data is NULL", onednn__op_name(op->code),
                                 i);
        const bool is_stat = bw ? (i == 2 || i == 3) : (i == op->n_in + 1 || i == op->n_in + 2);
        const bool is_x = bw ? (i <= 1 || i == op->n_in) : (i == 0 || i == op->n_in);
        ok = onednn__dense(t) && (is_x ? onednn__same_shape(t, x) && t->dtype == xd
                                       : onednn__numel(t) == (is_stat ? M : N) && t->dtype == (is_stat ? sd : pd));
    }
    if (!ok)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs contiguous float32, bfloat16 or float16 "
                             "operands (others go to the reference backend)", onednn__op_name(op->code));
    return 0;
}

// Element i as the reference loads it (exact) and a double stored as it rounds: once, through
// float (c10's conversions).
static inline __attribute__((always_inline)) double ld(const void *p, int64_t i, torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_BF16: return torc_bf16_to_f32(((const uint16_t *)p)[i]);
    case TORC_DTYPE_F16: return torc_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}
static inline __attribute__((always_inline)) void st(void *p, int64_t i, torc_dtype dt, double v) {
    switch (dt) {
    case TORC_DTYPE_BF16: ((uint16_t *)p)[i] = torc_f32_to_bf16((float)v); break;
    case TORC_DTYPE_F16: ((uint16_t *)p)[i] = torc_f32_to_f16((float)v); break;
    default: ((float *)p)[i] = (float)v; break;
    }
}

// The row loops take the dtypes as arguments and are forced inline: called with constants for
// all-f32 operands, the conversions fold away and the loops vectorize as plain float code.
#define LN_INLINE static inline __attribute__((always_inline))

// ---- forward ----
LN_INLINE void fwd_row(const char *xr, char *yr, void *mean, void *rstd, int64_t r, const void *w, const void *b,
                       int64_t N, double eps, torc_dtype xd, torc_dtype pd, torc_dtype sd) {
    double sum = 0, ss = 0;
    for (int64_t i = 0; i < N; i++) sum += ld(xr, i, xd);
    const double mu = N ? sum / (double)N : 0.0;  // no elements: mean 0, rstd NaN (PyTorch's)
    for (int64_t i = 0; i < N; i++) {
        const double c = ld(xr, i, xd) - mu;
        ss += c * c;
    }
    const double rs = 1.0 / sqrt((N ? ss / (double)N : NAN) + eps);
    st(mean, r, sd, mu);
    st(rstd, r, sd, rs);
    for (int64_t i = 0; i < N; i++) {
        double v = (ld(xr, i, xd) - mu) * rs;
        if (w) v *= ld(w, i, pd);
        if (b) v += ld(b, i, pd);
        st(yr, i, xd, v);
    }
}

static void forward(const torc_op *op, int64_t M, int64_t N) {
    const uint32_t affine = op->params.norm.affine;
    const char *x = op->in[0].data;
    const void *w = affine & 1 ? op->in[1].data : NULL, *b = affine & 2 ? op->in[1 + (affine & 1)].data : NULL;
    char *y = op->out[0].data;
    void *mean = op->out[1].data, *rstd = op->out[2].data;
    const torc_dtype xd = op->in[0].dtype, sd = op->out[1].dtype, pd = op->n_in > 1 ? op->in[1].dtype : xd;
    const bool f32 = xd == TORC_DTYPE_F32;  // then every operand is f32
    const size_t xs = torc_abi_dtype_size(xd);
    const double eps = op->params.norm.eps;
    ONEDNN_FOR(M * N >= ONEDNN_SMALL_STREAM, r, M, {
        const char *xr = x + (size_t)(r * N) * xs;
        char *yr = y + (size_t)(r * N) * xs;
        if (f32) fwd_row(xr, yr, mean, rstd, r, w, b, N, eps, TORC_DTYPE_F32, TORC_DTYPE_F32, TORC_DTYPE_F32);
        else fwd_row(xr, yr, mean, rstd, r, w, b, N, eps, xd, pd, sd);
    });
}

// ---- backward ----
LN_INLINE void bwd_row(const char *dyr, const char *xr, char *dxr, double mu, double rs, const void *w, int64_t N,
                       torc_dtype xd, torc_dtype pd) {
    double sg = 0, sgx = 0;  // sums of g = dy*w and of g*xhat over the row
    for (int64_t i = 0; i < N; i++) {
        const double g = w ? ld(dyr, i, xd) * ld(w, i, pd) : ld(dyr, i, xd);
        sg += g;
        sgx += g * ((ld(xr, i, xd) - mu) * rs);
    }
    const double a = sg / (double)N, c = sgx / (double)N;
    for (int64_t i = 0; i < N; i++) {
        const double g = w ? ld(dyr, i, xd) * ld(w, i, pd) : ld(dyr, i, xd);
        st(dxr, i, xd, rs * (g - a - (ld(xr, i, xd) - mu) * rs * c));
    }
}

LN_INLINE void param_row(const char *dyr, const char *xr, double mu, double rs, double *aw, double *ab, int64_t j0,
                         int64_t j1, torc_dtype xd) {
    for (int64_t j = j0; j < j1; j++) {
        const double d = ld(dyr, j, xd);
        aw[j] += d * ((ld(xr, j, xd) - mu) * rs);
        ab[j] += d;
    }
}

static int backward(const torc_op *op, int64_t M, int64_t N) {
    const uint32_t affine = op->params.norm.affine;
    const char *dy = op->in[0].data, *x = op->in[1].data;
    const void *mean = op->in[2].data, *rstd = op->in[3].data, *w = affine & 1 ? op->in[4].data : NULL;
    char *dx = op->out[0].data;
    void *dw = affine & 1 ? op->out[1].data : NULL, *db = affine & 2 ? op->out[1 + (affine & 1)].data : NULL;
    const torc_dtype xd = op->in[1].dtype, sd = op->in[2].dtype;
    const torc_dtype pd = w ? op->in[4].dtype : op->n_out > 1 ? op->out[1].dtype : xd;
    const bool f32 = xd == TORC_DTYPE_F32;
    const size_t xs = torc_abi_dtype_size(xd);
    const bool par = M * N >= ONEDNN_SMALL_STREAM;
    ONEDNN_FOR(par, r, M, {
        const char *dyr = dy + (size_t)(r * N) * xs, *xr = x + (size_t)(r * N) * xs;
        char *dxr = dx + (size_t)(r * N) * xs;
        const double mu = ld(mean, r, sd), rs = ld(rstd, r, sd);
        if (f32) bwd_row(dyr, xr, dxr, mu, rs, w, N, TORC_DTYPE_F32, TORC_DTYPE_F32);
        else bwd_row(dyr, xr, dxr, mu, rs, w, N, xd, pd);
    });
    if (!dw && !db) return 0;
    // dweight, dbias: each thread owns a range of columns and sums the rows in order, as the
    // reference, so the sums do not depend on the thread count.
    double *acc = N > 0 ? malloc(sizeof(double) * 2 * (size_t)N) : NULL;
    if (N > 0 && !acc) return onednn__error(TORC_ERR_OOM, "onednn: layer_norm_backward: out of memory");
#pragma omp parallel if (par)
    {
        int64_t j0, j1;
        onednn__thread_range(N, &j0, &j1);
        double *aw = acc, *ab = acc ? acc + N : NULL;
        for (int64_t j = j0; j < j1; j++) aw[j] = ab[j] = 0.0;
        for (int64_t r = 0; r < M; r++) {
            const char *dyr = dy + (size_t)(r * N) * xs, *xr = x + (size_t)(r * N) * xs;
            const double mu = ld(mean, r, sd), rs = ld(rstd, r, sd);
            if (f32) param_row(dyr, xr, mu, rs, aw, ab, j0, j1, TORC_DTYPE_F32);
            else param_row(dyr, xr, mu, rs, aw, ab, j0, j1, xd);
        }
        for (int64_t j = j0; j < j1; j++) {
            if (dw) st(dw, j, pd, aw[j]);
            if (db) st(db, j, pd, ab[j]);
        }
    }
    free(acc);
    return 0;
}

int onednn__layer_norm_run(const torc_op *op) {
    int64_t M, N;
    rows_of(op, &M, &N);
    if (!is_backward(op)) {
        forward(op, M, N);
        return 0;
    }
    return backward(op, M, N);
}
