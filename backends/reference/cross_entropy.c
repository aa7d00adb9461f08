// backends/reference/cross_entropy.c — the reference CROSS_ENTROPY (backend ABI 2.5): each row's
// loss lse - x[t] and gradient w (softmax - onehot), in double as softmax.c's log_softmax, rounded once.
#include "ref-impl.h"

static bool is_t(torc_dtype d) {
    return d == TORC_DTYPE_F64 || d == TORC_DTYPE_F32 || d == TORC_DTYPE_F16 || d == TORC_DTYPE_BF16;
}

// logits T, target i64, weight and loss in opmath (f64 for f64 logits, else f32), grad T.
bool ref_cross_entropy_dtypes(const torc_op *op) {
    const torc_dtype t = op->in[0].dtype, om = t == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32;
    return is_t(t) && op->in[1].dtype == TORC_DTYPE_I64 && op->in[2].dtype == om && op->out[0].dtype == om &&
           op->out[1].dtype == t;
}

int ref_cross_entropy_run(const torc_op *op) {
    const torc_operand *x = &op->in[0], *tg = &op->in[1], *w = &op->in[2], *loss = &op->out[0], *g = &op->out[1];
    if (x->ndim != 2 || tg->ndim != 1 || w->ndim != 1 || loss->ndim != 1 || g->ndim != 2 ||
        tg->shape[0] != x->shape[0] || w->shape[0] != x->shape[0] || loss->shape[0] != x->shape[0] ||
        g->shape[0] != x->shape[0] || g->shape[1] != x->shape[1])
        return ref_error(TORC_ERR_SHAPE, "reference backend: cross_entropy: logits (N, V), target (N), weight (N), "
                         "loss (N) and grad (N, V) do not fit");
    const int64_t N = x->shape[0], V = x->shape[1];
    const torc_dtype T = x->dtype, om = loss->dtype;
    const size_t xs = torc_abi_dtype_size(T), ws = torc_abi_dtype_size(om);
    // every target first: nothing is written when one is out of range
    for (int64_t i = 0; i < N; i++) {
        int64_t t;
        memcpy(&t, (const char *)tg->data + i * tg->stride[0] * 8, 8);
        if (t >= V)
            return ref_error(TORC_ERR_INDEX, "reference backend: cross_entropy: Target %lld is out of bounds.",
                             (long long)t);
    }
    for (int64_t i = 0; i < N; i++) {
        const char *row = (const char *)x->data + i * x->stride[0] * (int64_t)xs;
        char *grow = (char *)g->data + i * g->stride[0] * (int64_t)xs;
        int64_t t;
        memcpy(&t, (const char *)tg->data + i * tg->stride[0] * 8, 8);
        char *lp = (char *)loss->data + i * loss->stride[0] * (int64_t)ws;
        if (t < 0) {  // ignored: loss 0, a zero gradient row
            ref_store_f(lp, om, 0.0);
            for (int64_t j = 0; j < V; j++) ref_store_f(grow + j * g->stride[1] * (int64_t)xs, T, 0.0);
            continue;
        }
        // max (NaN propagates through every result), sum of exp(x - max), lse: softmax.c's row
        double m = -INFINITY;
        for (int64_t j = 0; j < V; j++) {
            const double v = ref_load_f(row + j * x->stride[1] * (int64_t)xs, T);
            if (isnan(v) || v > m) m = v;
            if (isnan(m)) break;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < V; j++) sum += exp(ref_load_f(row + j * x->stride[1] * (int64_t)xs, T) - m);
        const double xt = ref_load_f(row + t * x->stride[1] * (int64_t)xs, T);
        const double wi = ref_load_f((const char *)w->data + i * w->stride[0] * (int64_t)ws, om);
        ref_store_f(lp, om, m + log(sum) - xt);
        // the gradient: each element read before it is written (grad may be the logits)
        for (int64_t j = 0; j < V; j++) {
            const double p = exp(ref_load_f(row + j * x->stride[1] * (int64_t)xs, T) - m) / sum;
            ref_store_f(grow + j * g->stride[1] * (int64_t)xs, T, wi * (p - (j == t ? 1.0 : 0.0)));
        }
    }
    return TORC_OK;
}
