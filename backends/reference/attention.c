// backends/reference/attention.c — ATTENTION and ATTENTION_BACKWARD (backend ABI 2.4): fused
// scaled-dot-product attention over strided 4-D operands (B, H, rows, features), plain loops in
// double: per query row the scores s_ij, their log-sum-exp, the probabilities and the output, each
// output rounded once to its dtype (f16 / bf16 through f32 rounded to odd). The backward
// recomputes p_ij from the lse the forward wrote.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ref-impl.h"

static bool qkv_dtype(torc_dtype d) {
    return d == TORC_DTYPE_F64 || d == TORC_DTYPE_F32 || d == TORC_DTYPE_F16 || d == TORC_DTYPE_BF16;
}
static torc_dtype lse_dtype(torc_dtype t) { return t == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32; }

bool ref_attention_dtypes(const torc_op *op) {
    const bool bwd = op->code == TORC_OP_ATTENTION_BACKWARD;
    const torc_dtype t = op->in[bwd ? 1 : 0].dtype;
    if (!qkv_dtype(t)) return false;
    const int lse = bwd ? 5 : -1;
    for (int i = 0; i < op->n_in; i++)
        if (op->in[i].dtype != (i == lse ? lse_dtype(t) : t)) return false;
    for (int i = 0; i < op->n_out; i++)
        if (op->out[i].dtype != (!bwd && i == 1 ? lse_dtype(t) : t)) return false;
    return true;
}

// Shapes: q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev), o (B, H, L, Ev), lse (B, H, L).
static int check_shapes(const torc_operand *q, const torc_operand *k, const torc_operand *v, const torc_operand *o,
                        const torc_operand *lse) {
    const char *msg = NULL;
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || o->ndim != 4 || lse->ndim != 3)
        msg = "q, k, v and o must be 4-D (B, H, rows, features) and lse 3-D (B, H, L)";
    else if (k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] || k->shape[1] != q->shape[1] ||
             v->shape[1] != q->shape[1] || k->shape[3] != q->shape[3] || v->shape[2] != k->shape[2])
        msg = "q (B, H, L, E), k (B, H, S, E) and v (B, H, S, Ev) do not fit";
    else if (o->shape[0] != q->shape[0] || o->shape[1] != q->shape[1] || o->shape[2] != q->shape[2] ||
             o->shape[3] != v->shape[3] || lse->shape[0] != q->shape[0] || lse->shape[1] != q->shape[1] ||
             lse->shape[2] != q->shape[2])
        msg = "o must be (B, H, L, Ev) and lse (B, H, L)";
    return msg ? ref_error(TORC_ERR_SHAPE, "reference backend: attention: %s", msg) : TORC_OK;
}

// x rounded once to dt. ref_store_f rounds f16 and bf16 through the nearest f32, which rounds
// twice: a value just past a tie of the narrow dtype can land on the tie in f32 and then round to
// even, the wrong way. Rounding to f32 to odd instead (truncate, then set the last bit if inexact)
// keeps the sticky information, and with f32's 13 (f16) and 16 (bf16) spare bits the second
// rounding is then the correct one (Boldo and Melquiond's round-to-odd).
static void store_once(void *p, torc_dtype dt, double x) {
    if ((dt != TORC_DTYPE_F16 && dt != TORC_DTYPE_BF16) || !isfinite(x)) {
        ref_store_f(p, dt, x);
        return;
    }
    float f = (float)x;
    if ((double)f != x) {
        if (fabs((double)f) > fabs(x)) f = nextafterf(f, 0.0f);  // toward zero
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        u |= 1;
        memcpy(&f, &u, sizeof f);
    }
    ref_store_f(p, dt, (double)f);
}

static double at(const torc_operand *t, int64_t b, int64_t h, int64_t i, int64_t e) {
    const int64_t off = b * t->stride[0] + h * t->stride[1] + i * t->stride[2] + e * t->stride[3];
    return ref_load_f((const char *)t->data + off * (int64_t)torc_abi_dtype_size(t->dtype), t->dtype);
}
static void put(const torc_operand *t, int64_t b, int64_t h, int64_t i, int64_t e, double x) {
    const int64_t off = b * t->stride[0] + h * t->stride[1] + i * t->stride[2] + e * t->stride[3];
    store_once((char *)t->data + off * (int64_t)torc_abi_dtype_size(t->dtype), t->dtype, x);
}
static char *lse_at(const torc_operand *t, int64_t b, int64_t h, int64_t i) {
    const int64_t off = b * t->stride[0] + h * t->stride[1] + i * t->stride[2];
    return (char *)t->data + off * (int64_t)torc_abi_dtype_size(t->dtype);
}

// The attended keys of query row i: 0 .. n-1.
static int64_t attended(int64_t i, int64_t S, bool causal) { return causal ? (i + 1 < S ? i + 1 : S) : S; }

// s_ij for j < n into s; returns their log-sum-exp (-inf for n = 0).
static double scores(const torc_operand *q, const torc_operand *k, int64_t b, int64_t h, int64_t i, int64_t n,
                     double scale, double *s) {
    const int64_t E = q->shape[3];
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        double d = 0;
        for (int64_t e = 0; e < E; e++) d += at(q, b, h, i, e) * at(k, b, h, j, e);
        s[j] = scale * d;
        if (s[j] > m) m = s[j];
    }
    if (n == 0 || m == -INFINITY || isnan(m)) return n == 0 ? -INFINITY : m;
    double z = 0;
    for (int64_t j = 0; j < n; j++) z += exp(s[j] - m);
    return m + log(z);
}

static int forward(const torc_op *op) {
    const torc_operand *q = &op->in[0], *k = &op->in[1], *v = &op->in[2], *o = &op->out[0], *lse = &op->out[1];
    int st = check_shapes(q, k, v, o, lse);
    if (st) return st;
    const int64_t B = q->shape[0], H = q->shape[1], L = q->shape[2], S = k->shape[2], Ev = v->shape[3];
    const double scale = op->params.attention.scale;
    const bool causal = op->params.attention.causal != 0;
    double *s = malloc(sizeof *s * (size_t)(S ? S : 1)), *acc = malloc(sizeof *acc * (size_t)(Ev ? Ev : 1));
    if (!s || !acc) {
        free(s), free(acc);
        return ref_error(TORC_ERR_OOM, "reference backend: attention: out of memory");
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < L; i++) {
                const int64_t n = attended(i, S, causal);
                const double l = scores(q, k, b, h, i, n, scale, s);
                for (int64_t e = 0; e < Ev; e++) acc[e] = 0;
                for (int64_t j = 0; j < n; j++) {
                    const double p = exp(s[j] - l);
                    for (int64_t e = 0; e < Ev; e++) acc[e] += p * at(v, b, h, j, e);
                }
                for (int64_t e = 0; e < Ev; e++) put(o, b, h, i, e, acc[e]);
                ref_store_f(lse_at(lse, b, h, i), lse->dtype, l);
            }
    free(s), free(acc);
    return TORC_OK;
}

// dq row by row; dk and dv accumulate over the query rows in double buffers, written once.
static int backward(const torc_op *op) {
    const torc_operand *dout = &op->in[0], *q = &op->in[1], *k = &op->in[2], *v = &op->in[3], *o = &op->in[4],
                       *lse = &op->in[5], *dq = &op->out[0], *dk = &op->out[1], *dv = &op->out[2];
    int st = check_shapes(q, k, v, o, lse);
    if (!st) st = ref_check_same_shape(dout, "do", o, "o");
    if (!st) st = ref_check_same_shape(dq, "dq", q, "q");
    if (!st) st = ref_check_same_shape(dk, "dk", k, "k");
    if (!st) st = ref_check_same_shape(dv, "dv", v, "v");
    if (st) return st;
    const int64_t B = q->shape[0], H = q->shape[1], L = q->shape[2], S = k->shape[2], E = q->shape[3],
                  Ev = v->shape[3];
    const double scale = op->params.attention.scale;
    const bool causal = op->params.attention.causal != 0;
    const size_t nk = (size_t)(S * E), nv = (size_t)(S * Ev);
    double *s = malloc(sizeof *s * (size_t)(S ? S : 1)), *gk = malloc(sizeof *gk * (nk ? nk : 1)),
           *gv = malloc(sizeof *gv * (nv ? nv : 1)), *gq = malloc(sizeof *gq * (size_t)(E ? E : 1));
    if (!s || !gk || !gv || !gq) {
        free(s), free(gk), free(gv), free(gq);
        return ref_error(TORC_ERR_OOM, "reference backend: attention_backward: out of memory");
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            memset(gk, 0, sizeof *gk * nk);
            memset(gv, 0, sizeof *gv * nv);
            for (int64_t i = 0; i < L; i++) {
                const int64_t n = attended(i, S, causal);
                const double l = ref_load_f(lse_at(lse, b, h, i), lse->dtype);
                scores(q, k, b, h, i, n, scale, s);
                double D = 0;
                for (int64_t e = 0; e < Ev; e++) D += at(dout, b, h, i, e) * at(o, b, h, i, e);
                for (int64_t e = 0; e < E; e++) gq[e] = 0;
                for (int64_t j = 0; j < n; j++) {
                    const double p = exp(s[j] - l);
                    double dp = 0;
                    for (int64_t e = 0; e < Ev; e++) {
                        const double g = at(dout, b, h, i, e);
                        dp += g * at(v, b, h, j, e);
                        gv[j * Ev + e] += p * g;
                    }
                    const double ds = p * (dp - D);
                    for (int64_t e = 0; e < E; e++) {
                        gq[e] += ds * at(k, b, h, j, e);
                        gk[j * E + e] += ds * at(q, b, h, i, e);
                    }
                }
                for (int64_t e = 0; e < E; e++) put(dq, b, h, i, e, scale * gq[e]);
            }
            for (int64_t j = 0; j < S; j++) {
                for (int64_t e = 0; e < E; e++) put(dk, b, h, j, e, scale * gk[j * E + e]);
                for (int64_t e = 0; e < Ev; e++) put(dv, b, h, j, e, gv[j * Ev + e]);
            }
        }
    free(s), free(gk), free(gv), free(gq);
    return TORC_OK;
}

int ref_attention_run(const torc_op *op) {
    return op->code == TORC_OP_ATTENTION_BACKWARD ? backward(op) : forward(op);
}
