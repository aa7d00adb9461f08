// backends/reference/layer_norm.c — LAYER_NORM and LAYER_NORM_BACKWARD (torch.native_layer_norm
// and its backward) over strided operands of PyTorch's layer_norm dtypes, in double, each output rounded once.
#include <stdlib.h>

#include "ref-impl.h"

#define LN_OPS 6  // operands one walk moves together (backward rows: dy, x, dx, mean, rstd)

static bool is_backward(const torc_op *op) { return op->code == TORC_OP_LAYER_NORM_BACKWARD; }

// PyTorch's layer_norm dtypes (no fp8, no integers). Weight and bias (and their gradients) have
// x's dtype or, for f16/bf16 x, float32 (PyTorch's CPU mixed-dtype layer_norm); mean and rstd
// have x's dtype or float32.
static bool x_dtype(torc_dtype d) {
    return d == TORC_DTYPE_F64 || d == TORC_DTYPE_F32 || d == TORC_DTYPE_F16 || d == TORC_DTYPE_BF16;
}
static bool param_dtype(torc_dtype p, torc_dtype x) {
    return p == x || (p == TORC_DTYPE_F32 && (x == TORC_DTYPE_F16 || x == TORC_DTYPE_BF16));
}

bool ref_layer_norm_dtypes(const torc_op *op) {
    if (is_backward(op)) {  // dy, x, mean, rstd[, weight] -> dx[, dweight][, dbias]
        const torc_dtype x = op->in[1].dtype;
        bool ok = x_dtype(x) && op->in[0].dtype == x && op->out[0].dtype == x && param_dtype(op->in[2].dtype, x) &&
                  op->in[3].dtype == op->in[2].dtype;
        const torc_dtype p = op->n_in > 4 ? op->in[4].dtype : op->n_out > 1 ? op->out[1].dtype : x;
        ok = ok && param_dtype(p, x);
        for (int i = 1; i < op->n_out; i++) ok = ok && op->out[i].dtype == p;
        return ok;
    }
    const torc_dtype x = op->in[0].dtype;  // x[, weight][, bias] -> y, mean, rstd
    bool ok = x_dtype(x) && op->out[0].dtype == x && param_dtype(op->out[1].dtype, x) &&
              op->out[2].dtype == op->out[1].dtype;
    for (int i = 1; i < op->n_in; i++) ok = ok && param_dtype(op->in[i].dtype, x) && op->in[i].dtype == op->in[1].dtype;
    return ok;
}

// ---- walks ----
// An odometer over nd dims moving several operands together: over the rows (each operand's
// first nd dims) or over a row (its last nd dims; weight and bias have only those).
typedef struct walk {
    int nd, nops;
    int64_t shape[TORC_MAX_DIMS], idx[TORC_MAX_DIMS];
    int64_t step[LN_OPS][TORC_MAX_DIMS];  // bytes
    int64_t off[LN_OPS];                  // bytes from the operand's start
} walk;

static void walk_init(walk *w, int nd, const int64_t *shape, int nops, const torc_operand *const *ops, bool last) {
    memset(w, 0, sizeof *w);
    w->nd = nd;
    w->nops = nops;
    memcpy(w->shape, shape, (size_t)nd * sizeof *shape);
    for (int k = 0; k < nops; k++) {
        const int first = last ? ops[k]->ndim - nd : 0;
        const int64_t es = (int64_t)torc_abi_dtype_size(ops[k]->dtype);
        for (int d = 0; d < nd; d++) w->step[k][d] = ops[k]->stride[first + d] * es;
    }
}

static void walk_next(walk *w) {
    for (int d = w->nd - 1; d >= 0; d--) {
        for (int k = 0; k < w->nops; k++) w->off[k] += w->step[k][d];
        if (++w->idx[d] < w->shape[d]) return;
        for (int k = 0; k < w->nops; k++) w->off[k] -= w->step[k][d] * w->shape[d];
        w->idx[d] = 0;
    }
}

static void walk_reset(walk *w) {
    memset(w->idx, 0, sizeof w->idx);
    memset(w->off, 0, sizeof w->off);
}

// ---- shapes ----
// x's shape with the normalized dims (axis..) of size 1: mean and rstd.
static int check_stats_shape(const torc_operand *x, int axis, const torc_operand *s, const char *name) {
    bool ok = s->ndim == x->ndim;
    for (int d = 0; ok && d < x->ndim; d++) ok = s->shape[d] == (d < axis ? x->shape[d] : 1);
    return ok ? TORC_OK : ref_error(TORC_ERR_SHAPE, "reference backend: layer_norm: %s must have x's shape with the "
                                    "normalized dims of size 1", name);
}
static int check_param_shape(const torc_operand *x, int axis, const torc_operand *p, const char *name) {
    bool ok = p->ndim == x->ndim - axis;
    for (int d = 0; ok && d < p->ndim; d++) ok = p->shape[d] == x->shape[axis + d];
    return ok ? TORC_OK : ref_error(TORC_ERR_SHAPE, "reference backend: layer_norm: %s must have the normalized "
                                    "dims' shape", name);
}

static int check_shapes(const torc_op *op, const torc_operand *x, int *axis_out, int64_t *rows, int64_t *n) {
    const int axis = op->params.norm.axis;
    if (axis < 0 || axis >= x->ndim)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: layer_norm: axis %d is out of range for a %d-D x",
                         axis, x->ndim);
    *axis_out = axis;
    *rows = 1;
    *n = 1;
    for (int d = 0; d < x->ndim; d++) *(d < axis ? rows : n) *= x->shape[d];
    return TORC_OK;
}

// ---- forward ----
static int forward(const torc_op *op) {
    const torc_operand *x = &op->in[0], *y = &op->out[0], *mean = &op->out[1], *rstd = &op->out[2];
    const uint32_t affine = op->params.norm.affine;
    const torc_operand *w = affine & 1 ? &op->in[1] : NULL, *b = affine & 2 ? &op->in[1 + (affine & 1)] : NULL;
    int axis;
    int64_t M, N;
    int st = check_shapes(op, x, &axis, &M, &N);
    if (!st) st = ref_check_same_shape(x, "x", y, "y");
    if (!st) st = check_stats_shape(x, axis, mean, "mean");
    if (!st) st = check_stats_shape(x, axis, rstd, "rstd");
    if (!st && w) st = check_param_shape(x, axis, w, "weight");
    if (!st && b) st = check_param_shape(x, axis, b, "bias");
    if (st) return st;
    const double eps = op->params.norm.eps;
    const int nd = x->ndim - axis;
    const torc_operand *row_ops[4] = {x, y, mean, rstd};
    const torc_operand *el_ops[4] = {x, y, w ? w : x, b ? b : x};  // x stands in for an absent one
    walk rw, ew;
    walk_init(&rw, axis, x->shape, 4, row_ops, false);
    walk_init(&ew, nd, x->shape + axis, 4, el_ops, true);
    for (int64_t r = 0; r < M; r++, walk_next(&rw)) {
        const char *xr = (const char *)x->data + rw.off[0];
        char *yr = (char *)y->data + rw.off[1];
        double sum = 0, ss = 0;
        walk_reset(&ew);
        for (int64_t i = 0; i < N; i++, walk_next(&ew)) sum += ref_load_f(xr + ew.off[0], x->dtype);
        // PyTorch's rows of no elements: mean 0, rstd NaN (its variance is 0/0).
        const double mu = N ? sum / (double)N : 0.0;
        walk_reset(&ew);
        for (int64_t i = 0; i < N; i++, walk_next(&ew)) {
            const double c = ref_load_f(xr + ew.off[0], x->dtype) - mu;
            ss += c * c;
        }
        const double rs = 1.0 / sqrt((N ? ss / (double)N : NAN) + eps);
        ref_store_f((char *)mean->data + rw.off[2], mean->dtype, mu);
        ref_store_f((char *)rstd->data + rw.off[3], rstd->dtype, rs);
        walk_reset(&ew);
        for (int64_t i = 0; i < N; i++, walk_next(&ew)) {
            double v = (ref_load_f(xr + ew.off[0], x->dtype) - mu) * rs;
            if (w) v *= ref_load_f((const char *)w->data + ew.off[2], w->dtype);
            if (b) v += ref_load_f((const char *)b->data + ew.off[3], b->dtype);
            ref_store_f(yr + ew.off[1], y->dtype, v);
        }
    }
    return TORC_OK;
}

// ---- backward ----
static int backward(const torc_op *op) {
    const torc_operand *dy = &op->in[0], *x = &op->in[1], *mean = &op->in[2], *rstd = &op->in[3];
    const uint32_t affine = op->params.norm.affine;
    const torc_operand *w = affine & 1 ? &op->in[4] : NULL, *dx = &op->out[0];
    const torc_operand *dw = affine & 1 ? &op->out[1] : NULL, *db = affine & 2 ? &op->out[1 + (affine & 1)] : NULL;
    int axis;
    int64_t M, N;
    int st = check_shapes(op, x, &axis, &M, &N);
    if (!st) st = ref_check_same_shape(x, "x", dy, "dy");
    if (!st) st = ref_check_same_shape(x, "x", dx, "dx");
    if (!st) st = check_stats_shape(x, axis, mean, "mean");
    if (!st) st = check_stats_shape(x, axis, rstd, "rstd");
    if (!st && w) st = check_param_shape(x, axis, w, "weight");
    if (!st && dw) st = check_param_shape(x, axis, dw, "dweight");
    if (!st && db) st = check_param_shape(x, axis, db, "dbias");
    if (st) return st;
    const int nd = x->ndim - axis;
    // dweight and dbias sum over the rows: one double per normalized element each.
    double *acc = NULL;
    if ((dw || db) && N > 0) {
        acc = calloc((size_t)N * 2, sizeof *acc);
        if (!acc) return ref_error(TORC_ERR_OOM, "reference backend: layer_norm_backward: out of memory");
    }
    double *accw = dw ? acc : NULL, *accb = db && acc ? acc + N : NULL;
    const torc_operand *row_ops[5] = {dy, x, dx, mean, rstd};
    const torc_operand *el_ops[4] = {dy, x, dx, w ? w : x};
    walk rw, ew;
    walk_init(&rw, axis, x->shape, 5, row_ops, false);
    walk_init(&ew, nd, x->shape + axis, 4, el_ops, true);
    for (int64_t r = 0; r < M; r++, walk_next(&rw)) {
        const char *dyr = (const char *)dy->data + rw.off[0], *xr = (const char *)x->data + rw.off[1];
        char *dxr = (char *)dx->data + rw.off[2];
        const double mu = ref_load_f((const char *)mean->data + rw.off[3], mean->dtype);
        const double rs = ref_load_f((const char *)rstd->data + rw.off[4], rstd->dtype);
        double sg = 0, sgx = 0;  // sums of g = dy*w and of g*xhat over the row
        walk_reset(&ew);
        for (int64_t i = 0; i < N; i++, walk_next(&ew)) {
            const double d = ref_load_f(dyr + ew.off[0], dy->dtype);
            const double xh = (ref_load_f(xr + ew.off[1], x->dtype) - mu) * rs;
            const double g = w ? d * ref_load_f((const char *)w->data + ew.off[3], w->dtype) : d;
            sg += g;
            sgx += g * xh;
            if (accw) accw[i] += d * xh;
            if (accb) accb[i] += d;
        }
        const double a = sg / (double)N, c = sgx / (double)N;
        walk_reset(&ew);
        for (int64_t i = 0; i < N; i++, walk_next(&ew)) {
            const double d = ref_load_f(dyr + ew.off[0], dy->dtype);
            const double xh = (ref_load_f(xr + ew.off[1], x->dtype) - mu) * rs;
            const double g = w ? d * ref_load_f((const char *)w->data + ew.off[3], w->dtype) : d;
            ref_store_f(dxr + ew.off[2], dx->dtype, rs * (g - a - xh * c));
        }
    }
    // No rows: dweight and dbias are zeros, as PyTorch's.
    const torc_operand *outs[2] = {dw ? dw : x, db ? db : x};
    walk_init(&ew, nd, x->shape + axis, 2, outs, true);
    for (int64_t i = 0; i < N && (dw || db); i++, walk_next(&ew)) {
        if (dw) ref_store_f((char *)dw->data + ew.off[0], dw->dtype, accw[i]);
        if (db) ref_store_f((char *)db->data + ew.off[1], db->dtype, accb[i]);
    }
    free(acc);
    return TORC_OK;
}

int ref_layer_norm_run(const torc_op *op) { return is_backward(op) ? backward(op) : forward(op); }
