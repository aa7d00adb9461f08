// core/attention.c — torch.nn.functional.scaled_dot_product_attention: one fused ATTENTION op
// (backend ABI 2.4, FlashAttention-2's output and log-sum-exp) where the device's backend takes it,
// with an autograd node of its own whose backward is one ATTENTION_BACKWARD; otherwise composed
// of matmul, where / add, softmax, dropout and matmul as PyTorch's math backend composes it (the
// fused op's oracle and its fallback).
#include <math.h>
#include <string.h>

#include "autograd-impl.h"

static bool sdpa_dtype(torc_dtype d) {
    return d == TORC_DTYPE_F64 || d == TORC_DTYPE_F32 || d == TORC_DTYPE_F16 || d == TORC_DTYPE_BF16;
}

// PyTorch's validate_sdpa_input, in its order, then the math path's own checks.
static bool check_inputs(const torc_tensor *q, const torc_tensor *k, const torc_tensor *v, const torc_tensor *mask,
                         bool is_causal) {
    if (q->dtype != k->dtype || q->dtype != v->dtype) {
        torc__error(TORC_ERR_DTYPE, "Expected query, key, and value to have the same dtype, but got query.dtype: %s "
                                    "key.dtype: %s and value.dtype: %s instead.", torc__dtype_typemeta_name(q->dtype),
                    torc__dtype_typemeta_name(k->dtype), torc__dtype_typemeta_name(v->dtype));
        return false;
    }
    if (q->device != k->device || q->device != v->device) {
        torc__error(TORC_ERR_INVALID_ARG, "Expected query, key, and value to have the same device type, but got "
                                          "query.device: %s key.device: %s and value.device: %s instead.",
                    torc_device_name(q->device), torc_device_name(k->device), torc_device_name(v->device));
        return false;
    }
    if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2) {
        torc__error(TORC_ERR_SHAPE, "Expected query, key, and value to all be  at least 2 dimensional, but got "
                                    "query.dim: %d key.dim: %d and value.dim: %d instead.", q->ndim, k->ndim, v->ndim);
        return false;
    }
    if (mask) {
        if (mask->dtype != TORC_DTYPE_BOOL && mask->dtype != TORC_DTYPE_F32 && mask->dtype != q->dtype) {
            torc__error(TORC_ERR_DTYPE, "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                                        "attn_mask.dtype: %s and  query.dtype: %s instead.",
                        torc__dtype_typemeta_name(mask->dtype), torc__dtype_typemeta_name(q->dtype));
            return false;
        }
        if (!torc__same_device(q, mask)) return false;
    }
    if (!sdpa_dtype(q->dtype)) {  // what PyTorch's matmul then says of an integer query
        torc__error(TORC_ERR_DTYPE, "expected scalar type Float but found %s", torc__dtype_c10_name(q->dtype));
        return false;
    }
    if (is_causal && mask) {
        torc__error(TORC_ERR_INVALID_ARG, "_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                                          "is_causal=True");
        return false;
    }
    return true;
}

// Grouped-query attention: key / value heads (dim -3) repeated to the query's head count, as
// repeat_interleave(q.size(-3) / t.size(-3), -3): head h of the result is head h / r of t.
static torc_tensor *repeat_heads(torc_tensor *t, int64_t heads) {
    const int64_t have = t->shape[t->ndim - 3];
    if (have == heads) return t;
    if (t->ndim + 1 > TORC_MAX_DIMS)
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "enable_gqa: more than %d dims after splitting the heads", TORC_MAX_DIMS);
    int64_t shape[TORC_MAX_DIMS];
    const int h = t->ndim - 3;  // the heads' dim, followed by a new dim of r copies
    memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
    memmove(shape + h + 2, shape + h + 1, (size_t)(t->ndim - h - 1) * sizeof *shape);
    shape[h + 1] = heads / have;
    torc_tensor *e = torc_expand(torc_unsqueeze(t, h + 1), t->ndim + 1, shape);
    int64_t out[TORC_MAX_DIMS];
    memcpy(out, t->shape, (size_t)t->ndim * sizeof *out);
    out[h] = heads;
    return e ? torc_reshape(e, t->ndim, out) : NULL;
}

// The mask's broadcast with the scores must be the scores' shape (PyTorch adds it in place).
static bool mask_fits(const torc_tensor *mask, const torc_tensor *attn) {
    int nd;
    int64_t shape[TORC_MAX_DIMS];
    if (torc__broadcast_shapes(attn->ndim, attn->shape, mask->ndim, mask->shape, &nd, shape)) return false;
    if (nd == attn->ndim && !memcmp(shape, attn->shape, (size_t)nd * sizeof *shape)) return true;
    char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
    torc__error(TORC_ERR_SHAPE, "output with shape %s doesn't match the broadcast shape %s",
                torc__shape_str(attn->ndim, attn->shape, b1, sizeof b1), torc__shape_str(nd, shape, b2, sizeof b2));
    return false;
}

// softmax over the last dim, with rows that hold only -inf giving zeros instead of NaN (PyTorch's
// _safe_softmax) and no gradient: such rows are replaced by zeros before the softmax, so its
// backward sees finite values, and by zeros after it.
static torc_tensor *safe_softmax(torc_tensor *x) {
    if (x->shape[x->ndim - 1] == 0) return torc_softmax(x, -1);
    torc_tensor *ninf = torc__register(torc__scalar_on(x->device, -INFINITY, x->dtype));
    torc_tensor *zero = torc__register(torc__scalar_on(x->device, 0.0, x->dtype));
    torc_tensor *dead = ninf && zero ? torc_eq(torc_amax(x, TORC_DIMS(-1), true), ninf) : NULL;
    torc_tensor *y = dead ? torc_softmax(torc_where(dead, zero, x), -1) : NULL;
    return y ? torc_where(dead, zero, y) : NULL;
}

// The math backend on validated inputs; runs inside the caller's scope.
static torc_tensor *sdpa_math(torc_tensor *q, torc_tensor *k, torc_tensor *v, const torc_tensor *mask,
                              double dropout_p, bool is_causal, double scale, bool enable_gqa, torc_generator *gen) {
    const torc_dtype origin = q->dtype;
    // Half and bfloat16 compute in float32 and round the result once (PyTorch keeps q, k, v "in
    // high precision for accuracy").
    const torc_dtype acc = origin == TORC_DTYPE_F16 || origin == TORC_DTYPE_BF16 ? TORC_DTYPE_F32 : origin;
    if (acc != origin) {
        q = torc_to_dtype(q, acc), k = torc_to_dtype(k, acc), v = torc_to_dtype(v, acc);
        if (!q || !k || !v) return NULL;
    }
    const int64_t L = q->shape[q->ndim - 2], S = k->shape[k->ndim - 2];
    if (isnan(scale)) scale = 1.0 / sqrt((double)q->shape[q->ndim - 1]);
    // q and k are each scaled by sqrt(|scale|) before the matmul "for stability" (the sign goes to q).
    const double sf = sqrt(fabs(scale));
    if (enable_gqa) {
        int d = -3;
        if (!torc__wrap_dim(&d, q->ndim) || !torc__wrap_dim(&d, k->ndim) || !torc__wrap_dim(&d, v->ndim))
            return NULL;
        const int64_t hq = q->shape[q->ndim - 3], hk = k->shape[k->ndim - 3], hv = v->shape[v->ndim - 3];
        if (!hk || !hv || hq % hk || hq % hv)
            return TORC_FAIL_NULL(TORC_ERR_SHAPE, "Number of heads in key and value must divide the number of heads "
                                                  "in query");
        if (!(k = repeat_heads(k, hq)) || !(v = repeat_heads(v, hq))) return NULL;
    }
    torc_tensor *qs = torc_mul_scalar(q, torc_s(scale < 0 ? -sf : sf));
    torc_tensor *kt = torc_mul_scalar(torc_transpose(k, -2, -1), torc_s(sf));
    torc_tensor *attn = qs && kt ? torc_matmul(qs, kt) : NULL;  // (..., L, S)
    if (!attn) return NULL;
    if (is_causal) {  // top-left aligned: query i sees keys 0..i (PyTorch's ones(L, S).tril())
        torc_tensor *ones = torc__new(q->device, TORC_DTYPE_BOOL, 2, (int64_t[]){L, S});
        if (!ones || torc__fill(torc__register(ones), 1.0)) return NULL;
        torc_tensor *ninf = torc__register(torc__scalar_on(q->device, -INFINITY, acc));
        torc_tensor *tri = torc_tril(ones, 0);
        attn = tri && ninf ? torc_where(tri, attn, ninf) : NULL;
    } else if (mask) {
        if (!mask_fits(mask, attn)) return NULL;
        if (mask->dtype == TORC_DTYPE_BOOL) {  // false: not attended (PyTorch adds -inf there)
            torc_tensor *ninf = torc__register(torc__scalar_on(q->device, -INFINITY, acc));
            attn = ninf ? torc_where(mask, attn, ninf) : NULL;
        } else {
            attn = torc_add(attn, mask);
        }
    }
    if (!attn) return NULL;
    torc_tensor *p = mask ? safe_softmax(attn) : torc_softmax(attn, -1);
    if (p && dropout_p > 0) p = torc_dropout(p, dropout_p, true, gen);
    torc_tensor *out = p ? torc_matmul(p, v) : NULL;  // (..., L, Ev)
    return out && acc != origin ? torc_to_dtype(out, origin) : out;
}

// ---- the fused op: ATTENTION, its node and ATTENTION_BACKWARD ----
// When: no mask, no dropout (dropout_p > 0 draws a mask over the (L, S) weights), no grouped heads
// to repeat, E > 0 (the default scale is then infinite, where the composition's empty products give
// zero scores), shapes that fit (else the composition reports matmul's error), and the device's own
// backend takes it (the minor gate, then supports(): a plugin older than 2.4 is never sent it). A
// declined op is composed on the same device, never handed to the reference on host memory: the
// composition is this op's fallback. f16 / bf16 go to the op as they are (the backend accumulates
// in f32 and rounds each output once, closer to the exact result than the composition's roundings).
// The (L, S) probabilities are never stored: the node saves q, k, v, o and the per-row lse, and its
// backward recomputes them (FlashAttention-2). torc's backward has no create_graph (formulas run
// under no_grad), so there is no double backward to refuse or to route to the composition.

// FLOPs as the composed path's matmuls count them (model FLOPs, which MFU counts): q k^T and p v,
// 2 L S (E + Ev) per head forward, twice that backward. The backward's recomputed scores and the
// causal half a kernel may skip are not counted.
static uint64_t attention_flops(const torc_operand *q, const torc_operand *k, const torc_operand *v) {
    return 2 * (uint64_t)q->shape[0] * (uint64_t)q->shape[1] * (uint64_t)q->shape[2] * (uint64_t)k->shape[2] *
           (uint64_t)(q->shape[3] + v->shape[3]);
}

// 1 when dev's backend takes op, 0 when it declines (no error set). A backend that declines
// strided inputs (a device backend may take contiguous ones only) is asked again with contiguous
// copies of them, which then stand in op (made without history, registered in the current scope);
// -1 with the error set when a copy fails.
static int backend_takes(torc_device *dev, torc_op *op, const torc_tensor *const *in) {
    if (torc__runs_natively(dev, op)) return 1;
    bool strided = false;
    for (int i = 0; i < op->n_in; i++) strided |= !torc_is_contiguous(in[i]);
    if (!strided) return 0;
    bool ok = true;
    torc_no_grad_begin();
    for (int i = 0; i < op->n_in && ok; i++) {
        if (torc_is_contiguous(in[i])) continue;
        torc_tensor *c = torc_contiguous((torc_tensor *)in[i]);
        if ((ok = c != NULL)) torc__operand(c, &op->in[i]);
    }
    torc_no_grad_end();
    return !ok ? -1 : torc__runs_natively(dev, op) ? 1 : 0;
}

// Whether dims [lo, hi) of t merge into one dim as a view (their non-unit sizes nest by stride).
static bool mergeable(const torc_tensor *t, int lo, int hi) {
    int64_t want = -1;  // the stride the next dim out must have
    for (int d = hi - 1; d >= lo; d--) {
        if (t->shape[d] == 0) return true;
        if (t->shape[d] == 1) continue;
        if (want >= 0 && t->stride[d] != want) return false;
        want = t->stride[d] * t->shape[d];
    }
    return true;
}

// q, k and v as the op's (B, H, rows, features) into x, from validated inputs: the batch dims
// broadcast (expanded, stride 0 where an input broadcasts), then 1s prepended (2-D, 3-D inputs) or,
// past two batch dims, dims [0, p) merged into B and [p, nb) into H, p chosen so that all three are
// views where any split allows it (reshape copies otherwise). Differentiable views: autograd sums
// and reshapes the gradients back. Sets *nb and batch (the broadcast batch dims); false when the
// batch dims do not broadcast (no error set: the composition reports it) or a view fails (error set,
// *failed).
static bool as_4d(const torc_tensor *const *in, torc_tensor **x, int *nb_out, int64_t *batch, bool *failed) {
    int nb = 0;
    for (int i = 0; i < 3; i++)
        if (in[i]->ndim - 2 > nb) nb = in[i]->ndim - 2;
    for (int d = 0; d < nb; d++) {
        batch[d] = 1;
        for (int i = 0; i < 3; i++) {
            const int j = d - (nb - (in[i]->ndim - 2));
            const int64_t s = j >= 0 ? in[i]->shape[j] : 1;
            if (s == 1) continue;
            if (batch[d] != 1 && batch[d] != s) return false;
            batch[d] = s;
        }
    }
    *nb_out = nb;
    for (int i = 0; i < 3; i++) {
        int64_t shape[TORC_MAX_DIMS];
        memcpy(shape, batch, (size_t)nb * sizeof *shape);
        shape[nb] = in[i]->shape[in[i]->ndim - 2], shape[nb + 1] = in[i]->shape[in[i]->ndim - 1];
        x[i] = (torc_tensor *)in[i];
        if (in[i]->ndim != nb + 2 || memcmp(in[i]->shape, shape, (size_t)(nb + 2) * sizeof *shape))
            x[i] = torc_expand(x[i], nb + 2, shape);
        if (!x[i]) return !(*failed = true);
    }
    if (nb == 2) return true;
    int p = nb > 0 ? nb - 1 : 0;  // dims [0, p) become B, [p, nb) H
    for (int c = nb - 1; nb > 2 && c >= 1; c--) {
        bool views = true;
        for (int i = 0; i < 3; i++) views = views && mergeable(x[i], 0, c) && mergeable(x[i], c, nb);
        if (views) {
            p = c;
            break;
        }
    }
    int64_t B = 1, H = 1;
    for (int d = 0; d < nb; d++) *(d < p ? &B : &H) *= batch[d];
    for (int i = 0; i < 3; i++) {
        const int64_t shape[4] = {B, H, x[i]->shape[nb], x[i]->shape[nb + 1]};
        if (!(x[i] = torc_reshape(x[i], 4, shape))) return !(*failed = true);
    }
    return true;
}

// The fused op on validated inputs (scale resolved), or NULL with *declined (no error set) where it
// does not apply or the backend declines it; runs inside the caller's scope.
static torc_tensor *sdpa_fused(const torc_tensor *q, const torc_tensor *k, const torc_tensor *v, bool is_causal,
                               double scale, bool *declined) {
    *declined = true;
    const int64_t E = q->shape[q->ndim - 1], L = q->shape[q->ndim - 2], S = k->shape[k->ndim - 2],
                  Ev = v->shape[v->ndim - 1];
    if (k->shape[k->ndim - 1] != E || v->shape[v->ndim - 2] != S || E == 0) return NULL;
    const torc_tensor *in[3] = {q, k, v};
    torc_tensor *x[3];
    int nb;
    int64_t batch[TORC_MAX_DIMS];
    bool failed = false;
    if (!as_4d(in, x, &nb, batch, &failed)) {
        *declined = !failed;
        return NULL;
    }
    torc_device *dev = q->device;
    const int64_t oshape[4] = {x[0]->shape[0], x[0]->shape[1], L, Ev};
    const torc_dtype lt = q->dtype == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32;
    torc_tensor *o = torc__new(dev, q->dtype, 4, oshape), *lse = o ? torc__new(dev, lt, 3, oshape) : NULL;
    torc_op op = {.code = TORC_OP_ATTENTION, .n_in = 3, .n_out = 2};
    op.params.attention.scale = scale;
    op.params.attention.causal = is_causal;
    int takes = -1;
    if (lse) {
        for (int i = 0; i < 3; i++) torc__operand(x[i], &op.in[i]);
        torc__operand(o, &op.out[0]);
        torc__operand(lse, &op.out[1]);
        takes = backend_takes(dev, &op, (const torc_tensor *const *)x);
    }
    *declined = takes == 0;
    if (takes <= 0 || torc__dispatch_supported(dev, &op, attention_flops(&op.in[0], &op.in[1], &op.in[2]))) {
        torc_release(o);
        torc_release(lse);
        return NULL;
    }
    const torc_tensor *ins[3] = {x[0], x[1], x[2]}, *aux[1] = {lse};
    o = torc__autograd_record_aux(o, TORC_OP_ATTENTION, 3, ins, &op.params, 1, aux);
    torc_release(lse);  // the node keeps its own view of it
    if (!o) return NULL;
    o = torc__register(o);
    if (nb == 2) return o;
    int64_t shape[TORC_MAX_DIMS];
    memcpy(shape, batch, (size_t)nb * sizeof *shape);
    shape[nb] = L, shape[nb + 1] = Ev;
    return torc_reshape(o, nb + 2, shape);
}

// dq, dk, dv from torc ops, where the backend takes the forward but declines its backward: the
// probabilities recomputed from lse as the op does (in f32 for f16 / bf16, each result rounded
// once). The (L, S) tensors live only during this call.
static torc_status backward_composed(const torc_node *n, const torc_tensor *g, torc_tensor **d) {
    const torc_tensor *saved[5] = {g, torc__saved_at(n, 0), torc__saved_at(n, 1), torc__saved_at(n, 2),
                                   torc__saved_at(n, TORC__SAVED_OUT)};
    const torc_dtype t = saved[1]->dtype;
    const torc_dtype acc = t == TORC_DTYPE_F16 || t == TORC_DTYPE_BF16 ? TORC_DTYPE_F32 : t;
    torc_tensor *x[5];
    for (int i = 0; i < 5; i++)
        if (!(x[i] = torc_to_dtype((torc_tensor *)saved[i], acc))) return torc_last_status();
    torc_tensor *dy = x[0], *q = x[1], *k = x[2], *v = x[3], *o = x[4];
    const double scale = n->params.attention.scale;
    torc_tensor *s = torc_mul_scalar(torc_matmul(q, torc_transpose(k, -2, -1)), torc_s(scale));  // (B, H, L, S)
    if (s && n->params.attention.causal) {
        const int64_t L = q->shape[2], S = k->shape[2];
        torc_tensor *ones = torc__new(q->device, TORC_DTYPE_BOOL, 2, (int64_t[]){L, S});
        if (!ones || torc__fill(torc__register(ones), 1.0)) return torc_last_status();
        torc_tensor *ninf = torc__register(torc__scalar_on(q->device, -INFINITY, acc));
        torc_tensor *tri = torc_tril(ones, 0);
        s = tri && ninf ? torc_where(tri, s, ninf) : NULL;
    }
    torc_tensor *p = torc_exp(torc_sub(s, torc_unsqueeze(torc__saved_at(n, TORC__SAVED_AUX), -1)));
    torc_tensor *dv = torc_matmul(torc_transpose(p, -2, -1), dy);
    torc_tensor *D = torc_sum(torc_mul(dy, o), TORC_DIMS(-1), true);                 // (B, H, L, 1)
    torc_tensor *ds = torc_mul(p, torc_sub(torc_matmul(dy, torc_transpose(v, -2, -1)), D));
    torc_tensor *dq = torc_mul_scalar(torc_matmul(ds, k), torc_s(scale));
    torc_tensor *dk = torc_mul_scalar(torc_matmul(torc_transpose(ds, -2, -1), q), torc_s(scale));
    torc_tensor *r[3] = {dq, dk, dv};
    for (int i = 0; i < 3; i++)
        if (!r[i] || !(d[i] = torc_to_dtype(r[i], t))) return torc_last_status();
    return TORC_OK;
}

torc_status torc__attention_backward(const torc_node *n, const torc_tensor *g, const bool *need, torc_tensor **gin) {
    const torc_tensor *in[6] = {g, torc__saved_at(n, 0), torc__saved_at(n, 1), torc__saved_at(n, 2),
                                torc__saved_at(n, TORC__SAVED_OUT), torc__saved_at(n, TORC__SAVED_AUX)};
    torc_device *dev = in[1]->device;
    torc_tensor *d[3] = {NULL, NULL, NULL};
    torc_op op = {.code = TORC_OP_ATTENTION_BACKWARD, .n_in = 6, .n_out = 3};
    op.params = n->params;
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++) ok = (d[i] = torc__new(dev, in[1]->dtype, 4, in[1 + i]->shape)) != NULL;
    int takes = -1;
    if (ok) {
        for (int i = 0; i < 6; i++) torc__operand(in[i], &op.in[i]);
        for (int i = 0; i < 3; i++) torc__operand(d[i], &op.out[i]);
        takes = backend_takes(dev, &op, in);
    }
    if (takes == 1) {
        ok = !torc__dispatch_supported(dev, &op, 2 * attention_flops(&op.in[1], &op.in[2], &op.in[3]));
        for (int i = 0; i < 3; i++) d[i] = ok ? torc__register(d[i]) : (torc_release(d[i]), NULL);
    } else {
        for (int i = 0; i < 3; i++) torc_release(d[i]), d[i] = NULL;
        ok = takes == 0 && !backward_composed(n, g, d);
    }
    if (!ok) return torc_last_status();
    for (int i = 0; i < 3; i++)
        if (need[i]) gin[i] = d[i];
    return TORC_OK;
}

torc_tensor *torc_scaled_dot_product_attention(const torc_tensor *query, const torc_tensor *key,
                                               const torc_tensor *value, const torc_tensor *attn_mask,
                                               double dropout_p, bool is_causal, double scale, bool enable_gqa,
                                               torc_generator *gen) {
    if (!query || !key || !value) return TORC_NULL_ARG_FAIL("tensor is NULL");
    torc_scope_push();
    torc_tensor *r = NULL;
    if (torc_is_autocast_enabled()) {
        // PyTorch's autocast runs scaled_dot_product_attention in the lower precision: its
        // floating arguments other than f64 (the float mask too) are cast, then the op runs
        // with autocast off (and computes in f32 inside, as for any f16 / bf16 input).
        torc_dtype low = torc_autocast_dtype();
        if (low == TORC_DTYPE_F8_E4M3FN) low = TORC_DTYPE_BF16;  // fp8 autocast quantizes only Linear
        const torc_tensor *in[4] = {query, key, value, attn_mask};
        bool ok = true;
        for (int i = 0; i < 4 && ok; i++)
            if (in[i] && torc_dtype_is_floating(in[i]->dtype) && in[i]->dtype != TORC_DTYPE_F64 && in[i]->dtype != low)
                ok = (in[i] = torc_to_dtype((torc_tensor *)in[i], low)) != NULL;
        if (ok && !torc_autocast_begin(TORC_DTYPE_F32)) {
            r = torc_scaled_dot_product_attention(in[0], in[1], in[2], in[3], dropout_p, is_causal, scale, enable_gqa,
                                                  gen);
            torc_autocast_end();
        }
    } else if (check_inputs(query, key, value, attn_mask, is_causal)) {
        const torc_tensor *q = query, *k = key, *v = value;
        bool declined = true;
        bool fused = !attn_mask && !(dropout_p > 0);
        if (fused && enable_gqa)  // grouped heads to repeat (or too few dims to have heads): composed
            fused = q->ndim >= 3 && k->ndim >= 3 && v->ndim >= 3 && k->shape[k->ndim - 3] == q->shape[q->ndim - 3] &&
                    v->shape[v->ndim - 3] == q->shape[q->ndim - 3];
        if (fused)
            r = sdpa_fused(q, k, v, is_causal, isnan(scale) ? 1.0 / sqrt((double)q->shape[q->ndim - 1]) : scale,
                           &declined);
        if (declined)
            r = sdpa_math((torc_tensor *)q, (torc_tensor *)k, (torc_tensor *)v, attn_mask, dropout_p, is_causal, scale,
                          enable_gqa, gen);
    }
    r = torc_keep(r);
    torc_scope_pop();
    return r;
}
