// backends/cpu_onednn/layer_norm.c — LAYER_NORM and LAYER_NORM_BACKWARD on contiguous float32
// rows: the reference's double formulas in its order (the same bits), rows on every core.
// oneDNN's layer_normalization primitive is not used: it accumulates in float and gives
// other answers than the reference (1e-4 relative on rows of a large mean), and its backward
// reduces dweight over threads in an order of its own. Anything else goes to the reference.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

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

int onednn__layer_norm_check(const torc_op *op) {
    const uint32_t a = op->params.norm.affine;
    const int w = (int)(a & 1), b = (int)(a >> 1 & 1);
    const int n_in = is_backward(op) ? 4 + w : 1 + w + b, n_out = is_backward(op) ? 1 + w + b : 3;
    if ((a & ~3u) || op->n_in != n_in || op->n_out != n_out)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s: unexpected operand counts (the reference says why)",
                             onednn__op_name(op->code));
    int st = 0;
    for (int i = 0; i < op->n_in && !st; i++) st = onednn__check_operand(&op->in[i], "in");
    for (int i = 0; i < op->n_out && !st; i++) st = onednn__check_operand(&op->out[i], "out");
    if (st) return st;
    const torc_operand *x = &op->in[is_backward(op) ? 1 : 0];
    const int axis = op->params.norm.axis;
    bool ok = axis >= 0 && axis < x->ndim;
    int64_t M = 0, N = 0;
    if (ok) rows_of(op, &M, &N);
    // Every operand dense float32; x-shaped ones x's shape, the others M or N elements (the
    // reference checks their exact shapes when it gets the op instead).
    for (int i = 0; ok && i < op->n_in + op->n_out; i++) {
        const torc_operand *t = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        const bool is_stat = is_backward(op) ? (i == 2 || i == 3) : (i == op->n_in + 1 || i == op->n_in + 2);
        const bool is_x = is_backward(op) ? (i <= 1 || i == op->n_in) : (i == 0 || i == op->n_in);
        if (!t->data && onednn__numel(t) > 0)
            return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s: operand %d's data is NULL", onednn__op_name(op->code),
                                 i);
        ok = t->dtype == TORC_DTYPE_F32 && onednn__dense(t) &&
             (is_x ? onednn__same_shape(t, x) : onednn__numel(t) == (is_stat ? M : N));
    }
    if (!ok)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs contiguous float32 operands (others go to the "
                             "reference backend)", onednn__op_name(op->code));
    return 0;
}

// ---- forward ----
static void forward(const torc_op *op, int64_t M, int64_t N) {
    const uint32_t affine = op->params.norm.affine;
    const float *x = op->in[0].data;
    const float *w = affine & 1 ? op->in[1].data : NULL, *b = affine & 2 ? op->in[1 + (affine & 1)].data : NULL;
    float *y = op->out[0].data, *mean = op->out[1].data, *rstd = op->out[2].data;
    const double eps = op->params.norm.eps;
#pragma omp parallel for schedule(static) if (M * N >= ONEDNN_SMALL_STREAM)
    for (int64_t r = 0; r < M; r++) {
        const float *xr = x + r * N;
        float *yr = y + r * N;
        double sum = 0, ss = 0;
        for (int64_t i = 0; i < N; i++) sum += xr[i];
        const double mu = N ? sum / (double)N : 0.0;  // no elements: mean 0, rstd NaN (PyTorch's)
        for (int64_t i = 0; i < N; i++) {
            const double c = xr[i] - mu;
            ss += c * c;
        }
        const double rs = 1.0 / sqrt((N ? ss / (double)N : NAN) + eps);
        mean[r] = (float)mu;
        rstd[r] = (float)rs;
        for (int64_t i = 0; i < N; i++) {
            double v = (xr[i] - mu) * rs;
            if (w) v *= w[i];
            if (b) v += b[i];
            yr[i] = (float)v;
        }
    }
}

// ---- backward ----
static int backward(const torc_op *op, int64_t M, int64_t N) {
    const uint32_t affine = op->params.norm.affine;
    const float *dy = op->in[0].data, *x = op->in[1].data, *mean = op->in[2].data, *rstd = op->in[3].data;
    const float *w = affine & 1 ? op->in[4].data : NULL;
    float *dx = op->out[0].data, *dw = affine & 1 ? op->out[1].data : NULL;
    float *db = affine & 2 ? op->out[1 + (affine & 1)].data : NULL;
    const bool par = M * N >= ONEDNN_SMALL_STREAM;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t r = 0; r < M; r++) {
        const float *dyr = dy + r * N, *xr = x + r * N;
        float *dxr = dx + r * N;
        const double mu = mean[r], rs = rstd[r];
        double sg = 0, sgx = 0;
        for (int64_t i = 0; i < N; i++) {
            const double g = w ? (double)dyr[i] * w[i] : dyr[i];
            sg += g;
            sgx += g * ((xr[i] - mu) * rs);
        }
        const double a = sg / (double)N, c = sgx / (double)N;
        for (int64_t i = 0; i < N; i++) {
            const double g = w ? (double)dyr[i] * w[i] : dyr[i];
            dxr[i] = (float)(rs * (g - a - (xr[i] - mu) * rs * c));
        }
    }
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
            const float *dyr = dy + r * N, *xr = x + r * N;
            const double mu = mean[r], rs = rstd[r];
            for (int64_t j = j0; j < j1; j++) {
                aw[j] += (double)dyr[j] * ((xr[j] - mu) * rs);
                ab[j] += dyr[j];
            }
        }
        for (int64_t j = j0; j < j1; j++) {
            if (dw) dw[j] = (float)aw[j];
            if (db) db[j] = (float)ab[j];
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
