// backends/cuda/attention_ops.h — ATTENTION / ATTENTION_BACKWARD (backend ABI 2.4) as plain C
// shared by run.c, the kernels (attention.cu) and the host test's emulation: the launch record.
#ifndef TCU_ATTENTION_OPS_H
#define TCU_ATTENTION_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include <torc/backend.h>

#ifdef __cplusplus
extern "C" {
#endif

// Tiles: a block of TCU_ATTN_THREADS threads owns TCU_ATTN_TILE query rows (forward, dq) or key
// rows (dk/dv), four threads to a row, and walks the other side TCU_ATTN_TILE rows at a time.
#define TCU_ATTN_TILE 32
#define TCU_ATTN_THREADS 128
// Head dims the kernels take: the forward keeps a row's Ev outputs in registers (Ev/4 per
// thread), the backward a key row's dk and dv (E/4 + Ev/4): larger ones would spill.
#define TCU_ATTN_MAX_E_FWD 256
#define TCU_ATTN_MAX_E_BWD 128

typedef struct tcu_attn_tensor {
    void *data;
    int64_t st[4];  // strides (elements) of (B, H, rows, features); lse: (B, H, rows)
} tcu_attn_tensor;

typedef struct tcu_attn_args {
    int backward;
    torc_dtype dt;                        // T: f32, f16 or bf16 (lse f32)
    int64_t B, H, L, S, E, Ev;
    float scale;
    int causal;                           // 1: query i attends keys 0..i
    tcu_attn_tensor q, k, v, o, lse;      // q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev), o (B, H, L, Ev)
    tcu_attn_tensor dout, dq, dk, dv;     // backward: do (o's shape); dq, dk, dv (q's, k's, v's)
    float *delta;                         // backward scratch: D_i = do_i . o_i, (B*H*L) row-major
} tcu_attn_args;

static inline tcu_attn_tensor tcu_attn_tensor_of(const torc_operand *t) {
    tcu_attn_tensor r;
    r.data = t->data;
    for (int d = 0; d < 4; d++) r.st[d] = d < t->ndim ? t->stride[d] : 0;
    return r;
}

// The record for an op whose operands supports() accepted (run.c).
static inline void tcu_attn_args_from(tcu_attn_args *a, const torc_op *op) {
    const bool bw = op->code == TORC_OP_ATTENTION_BACKWARD;
    const int f = bw ? 1 : 0;  // the backward's q, k, v, o, lse follow do
    const torc_operand *q = &op->in[f], *k = &op->in[f + 1], *v = &op->in[f + 2];
    a->backward = bw;
    a->dt = q->dtype;
    a->B = q->shape[0];
    a->H = q->shape[1];
    a->L = q->shape[2];
    a->E = q->shape[3];
    a->S = k->shape[2];
    a->Ev = v->shape[3];
    a->scale = (float)op->params.attention.scale;
    a->causal = op->params.attention.causal != 0;
    a->q = tcu_attn_tensor_of(q);
    a->k = tcu_attn_tensor_of(k);
    a->v = tcu_attn_tensor_of(v);
    a->o = tcu_attn_tensor_of(bw ? &op->in[4] : &op->out[0]);
    a->lse = tcu_attn_tensor_of(bw ? &op->in[5] : &op->out[1]);
    if (bw) {
        a->dout = tcu_attn_tensor_of(&op->in[0]);
        a->dq = tcu_attn_tensor_of(&op->out[0]);
        a->dk = tcu_attn_tensor_of(&op->out[1]);
        a->dv = tcu_attn_tensor_of(&op->out[2]);
    } else {
        a->dout = a->dq = a->dk = a->dv = tcu_attn_tensor_of(&op->out[0]);
    }
    a->delta = 0;
}

#ifdef __cplusplus
}
#endif
#endif
