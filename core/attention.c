// core/attention.c — torch.nn.functional.scaled_dot_product_attention, composed of matmul,
// where / add, softmax, dropout and matmul as PyTorch's math backend composes it. Every piece is
// a differentiable torc op, so the backward is theirs; a fused backend kernel, when one exists,
// is checked against this composition and falls back to it.
#include <math.h>
#include <string.h>

#include "torc-impl.h"

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
        r = sdpa_math((torc_tensor *)query, (torc_tensor *)key, (torc_tensor *)value, attn_mask, dropout_p, is_causal,
                      scale, enable_gqa, gen);
    }
    r = torc_keep(r);
    torc_scope_pop();
    return r;
}
