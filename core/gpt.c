// core/gpt.c — GPT-2 (torc/gpt.h) written with torc's public API, in the order llm.c's
// train_gpt2.c reads: config, parameters, forward, loss, sampling, weight files.
//
// It is compiled into libtorc rather than a library of its own so that every user of torc gets it
// (torc-train, torc-generate, a C program) with one -ltorc, but it uses nothing a user could not:
// torc.h's ops, plus torc__error from the core's internal header, the one way library code sets
// torc_last_error(). A user copying this file to write their own model replaces that with their
// own error reporting.
//
// Shapes: B batch, T sequence length, C n_embd, NH heads, hs = C / NH head size, V vocab, Vp the
// padded vocab (rows of wte), L layers.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "torc/gpt.h"
#include "torc-impl.h"

#define LN_EPS 1e-5  // GPT2Config.layer_norm_epsilon

// ---- the parameters ----
// Per block, in GPT2LMHeadModel.named_parameters() order. Shapes use C = n_embd; weights are (in, out).
enum { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB, NPER };
static const char *const block_names[NPER] = {
    "ln_1.weight", "ln_1.bias",  "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias",  "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias",
};
static bool is_bias(int k) { return k == LN1B || k == QKVB || k == ATTPROJB || k == LN2B || k == FCB || k == FCPROJB; }

struct torc_gpt {
    torc_gpt_config cfg;  // padded_vocab_size filled in
    bool training;
    // Every slot: wte (Vp, C), wpe (block_size, C), L * NPER block tensors, ln_f weight (C) and
    // bias (C); a slot is NULL for a bias the config leaves out.
    int n_slots;
    torc_tensor **slot;
    // The parameters that exist, in named_parameters() order, and their names.
    int n;
    torc_tensor **params;
    char **names;
};
enum { WTE = 0, WPE = 1 };
static int blk(int64_t l, int k) { return 2 + (int)l * NPER + k; }
static int lnf(const torc_gpt *m, int k) { return 2 + (int)m->cfg.n_layer * NPER + k; }  // k 0 weight, 1 bias

// The shape of slot s, and the config field its sizes follow (for error messages).
static int slot_shape(const torc_gpt_config *c, int s, int64_t shape[2], const char **field) {
    const int64_t C = c->n_embd;
    *field = "n_embd";
    if (s == WTE) return *field = "padded_vocab_size", shape[0] = c->padded_vocab_size, shape[1] = C, 2;
    if (s == WPE) return *field = "block_size", shape[0] = c->block_size, shape[1] = C, 2;
    const int k = s >= 2 + (int)c->n_layer * NPER ? -1 : (s - 2) % NPER;
    switch (k) {
    case QKVW: return shape[0] = C, shape[1] = 3 * C, 2;
    case QKVB: return shape[0] = 3 * C, 1;
    case ATTPROJW: return shape[0] = C, shape[1] = C, 2;
    case FCW: return shape[0] = C, shape[1] = 4 * C, 2;
    case FCB: return shape[0] = 4 * C, 1;
    case FCPROJW: return shape[0] = 4 * C, shape[1] = C, 2;
    default: return shape[0] = C, 1;  // LayerNorm weights and biases, the projections' biases, ln_f
    }
}

torc_status torc_gpt_config_check(const torc_gpt_config *c) {
    if (!c) return torc__error(TORC_ERR_INVALID_ARG, "torc_gpt_config_check: config is NULL");
    const struct { const char *name; int64_t v, max; } f[] = {
        {"vocab_size", c->vocab_size, 1LL << 31}, {"block_size", c->block_size, 1LL << 24},
        {"n_layer", c->n_layer, 4096},            {"n_head", c->n_head, 1LL << 16},
        {"n_embd", c->n_embd, 1LL << 16},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < 1 || f[i].v > f[i].max)
            return torc__error(TORC_ERR_INVALID_ARG, "GPT config: %s must be in [1, %lld], got %lld", f[i].name,
                               (long long)f[i].max, (long long)f[i].v);
    if (c->n_embd % c->n_head)
        return torc__error(TORC_ERR_INVALID_ARG, "GPT config: n_embd (%lld) must be divisible by n_head (%lld)",
                           (long long)c->n_embd, (long long)c->n_head);
    if (c->padded_vocab_size && (c->padded_vocab_size < c->vocab_size || c->padded_vocab_size > (1LL << 31)))
        return torc__error(TORC_ERR_INVALID_ARG,
                           "GPT config: padded_vocab_size (%lld) must be 0 or in [vocab_size (%lld), 2^31]",
                           (long long)c->padded_vocab_size, (long long)c->vocab_size);
    if (!(c->dropout >= 0 && c->dropout < 1))
        return torc__error(TORC_ERR_INVALID_ARG, "GPT config: dropout must be in [0, 1), got %g", c->dropout);
    return TORC_OK;
}

void torc_gpt_free(torc_gpt *m) {
    if (!m) return;
    for (int s = 0; s < m->n_slots; s++) torc_release(m->slot ? m->slot[s] : NULL);
    for (int i = 0; i < m->n; i++) free(m->names ? m->names[i] : NULL);
    free(m->slot);
    free(m->params);
    free(m->names);
    free(m);
}

static char *slot_name(const torc_gpt *m, int s) {
    char buf[96];
    if (s == WTE) snprintf(buf, sizeof buf, "transformer.wte.weight");
    else if (s == WPE) snprintf(buf, sizeof buf, "transformer.wpe.weight");
    else if (s >= lnf(m, 0)) snprintf(buf, sizeof buf, "transformer.ln_f.%s", s == lnf(m, 0) ? "weight" : "bias");
    else snprintf(buf, sizeof buf, "transformer.h.%d.%s", (s - 2) / NPER, block_names[(s - 2) % NPER]);
    return strdup(buf);
}

torc_gpt *torc_gpt_new(const torc_gpt_config *cfg, torc_generator *gen) {
    if (torc_gpt_config_check(cfg)) return NULL;
    torc_gpt *m = calloc(1, sizeof *m);
    if (!m) return TORC_FAIL_NULL(TORC_ERR_OOM, "torc_gpt_new: out of memory");
    m->cfg = *cfg;
    if (!m->cfg.padded_vocab_size) m->cfg.padded_vocab_size = (cfg->vocab_size + 127) / 128 * 128;
    m->training = true;
    m->n_slots = 2 + (int)cfg->n_layer * NPER + 2;
    m->slot = calloc((size_t)m->n_slots, sizeof *m->slot);
    m->params = calloc((size_t)m->n_slots, sizeof *m->params);
    m->names = calloc((size_t)m->n_slots, sizeof *m->names);
    if (!m->slot || !m->params || !m->names) {
        torc_gpt_free(m);
        return TORC_FAIL_NULL(TORC_ERR_OOM, "torc_gpt_new: out of memory");
    }
    // GPT-2's init (nanoGPT's _init_weights): N(0, 0.02) weights, the two residual projections
    // N(0, 0.02 / sqrt(2 L)) so the residual stream's variance does not grow with depth, biases 0,
    // LayerNorm weights 1. Drawn in parameter order from gen.
    const double std = 0.02, std_resid = 0.02 / sqrt(2.0 * (double)cfg->n_layer);
    torc_status st = TORC_OK;
    torc_scope_push();
    torc_no_grad_begin();
    for (int s = 0; s < m->n_slots && !st; s++) {
        const int k = s >= 2 && s < lnf(m, 0) ? (s - 2) % NPER : -1;
        const bool bias = (k >= 0 && is_bias(k)) || s == lnf(m, 1);
        if (bias && !cfg->bias) continue;
        int64_t shape[2];
        const char *field;
        const int nd = slot_shape(&m->cfg, s, shape, &field);
        torc_tensor *t = torc_zeros(nd, shape, TORC_DTYPE_F32);
        if (!t) break;
        if (nd == 2) st = torc_normal_(t, 0.0, k == ATTPROJW || k == FCPROJW ? std_resid : std, gen);
        else if (!bias) st = torc_fill_(t, torc_s(1.0));  // LayerNorm weights
        if (!st && s == WTE && m->cfg.padded_vocab_size > cfg->vocab_size)  // padding rows: zero
            st = torc_zero_(torc_narrow(t, 0, cfg->vocab_size, m->cfg.padded_vocab_size - cfg->vocab_size));
        torc_tensor *p = st ? NULL : torc_parameter(t);
        if (!p) break;
        m->slot[s] = torc_retain(p);  // the scope's reference goes at the pop, the model keeps this one
        m->params[m->n] = p;
        if (!(m->names[m->n++] = slot_name(m, s))) st = torc__error(TORC_ERR_OOM, "torc_gpt_new: out of memory");
    }
    torc_no_grad_end();
    if (!st) st = torc_last_status() ? torc_last_status() : TORC_OK;
    const bool whole = m->n == m->n_slots - (cfg->bias ? 0 : (int)cfg->n_layer * 6 + 1);
    torc_scope_pop();
    if (!whole) {
        if (!torc_last_status()) torc__error(TORC_ERR_RUNTIME, "torc_gpt_new: initialisation failed");
        torc_gpt_free(m);
        return NULL;
    }
    return m;
}

const torc_gpt_config *torc_gpt_get_config(const torc_gpt *m) { return m ? &m->cfg : NULL; }
void torc_gpt_set_training(torc_gpt *m, bool training) {
    if (m) m->training = training;
}
int torc_gpt_param_count(const torc_gpt *m) { return m ? m->n : 0; }
torc_tensor *torc_gpt_param(const torc_gpt *m, int i) { return m && i >= 0 && i < m->n ? m->params[i] : NULL; }
const char *torc_gpt_param_name(const torc_gpt *m, int i) { return m && i >= 0 && i < m->n ? m->names[i] : NULL; }
torc_tensor *torc_gpt_get_parameter(const torc_gpt *m, const char *name) {
    for (int i = 0; m && name && i < m->n; i++)
        if (!strcmp(m->names[i], name)) return m->params[i];
    return NULL;
}
int64_t torc_gpt_num_parameters(const torc_gpt *m, bool non_embedding) {
    if (!m) return -1;
    int64_t n = 0;
    for (int i = 0; i < m->n; i++) n += torc_numel(m->params[i]);
    return non_embedding ? n - torc_numel(m->slot[WPE]) : n;
}

int64_t torc_gpt_activation_bytes(const torc_gpt_config *cfg, int64_t batch, int64_t seq_len) {
    if (torc_gpt_config_check(cfg)) return -1;
    if (batch < 0 || seq_len < 0) {
        torc__error(TORC_ERR_INVALID_ARG, "torc_gpt_activation_bytes: batch %lld and seq_len %lld must be >= 0",
                    (long long)batch, (long long)seq_len);
        return -1;
    }
    const int64_t C = cfg->n_embd, L = cfg->n_layer, NH = cfg->n_head, V = cfg->vocab_size;
    // floats: L (17 n C + (4 + NH) n) + 3 n C + 2 n + V C + 1; each step overflow-checked
    int64_t n, nC, blk, t, r, vc;
    const bool of = __builtin_mul_overflow(batch, seq_len, &n) || __builtin_mul_overflow(n, C, &nC) ||
                    __builtin_mul_overflow(nC, 17, &blk) || __builtin_mul_overflow(n, 4 + NH, &t) ||
                    __builtin_add_overflow(blk, t, &blk) || __builtin_mul_overflow(blk, L, &r) ||
                    __builtin_mul_overflow(nC, 3, &t) || __builtin_add_overflow(r, t, &r) ||
                    __builtin_mul_overflow(n, 2, &t) || __builtin_add_overflow(r, t, &r) ||
                    __builtin_mul_overflow(V, C, &vc) || __builtin_add_overflow(r, vc + 1, &r) ||
                    __builtin_mul_overflow(r, 4, &r) || __builtin_mul_overflow(seq_len, 8, &t) ||
                    __builtin_add_overflow(r, t, &r);
    if (of) {
        torc__error(TORC_ERR_INVALID_ARG, "torc_gpt_activation_bytes: the size overflows int64");
        return -1;
    }
    return r;
}

// ---- forward pass ----
static torc_tensor *layer_norm(const torc_tensor *x, const torc_tensor *w, const torc_tensor *b, int64_t C) {
    return torc_layer_norm(x, 1, (int64_t[]){C}, w, b, LN_EPS);
}

static torc_tensor *dropout(const torc_gpt *m, const torc_tensor *x, torc_generator *gen) {
    return m->training && m->cfg.dropout > 0 ? torc_dropout(x, m->cfg.dropout, true, gen) : (torc_tensor *)x;
}

// (B, T, C) -> (B, NH, T, hs): a view.
static torc_tensor *heads(torc_tensor *x, int64_t NH) {
    const int64_t B = torc_size(x, 0), T = torc_size(x, 1), C = torc_size(x, 2);
    return torc_transpose(torc_view(x, TORC_SHAPE(B, T, NH, C / NH)), 1, 2);
}

// Layer l on x (B, T, C). With a KV cache (k_cache, v_cache (B, NH, Tmax, hs), the first pos0
// positions filled), the new keys and values go to positions pos0.. and the queries attend to
// every cached position before theirs; without one, plain causal self-attention.
static torc_tensor *block(const torc_gpt *m, int64_t l, torc_tensor *x, torc_generator *gen, torc_tensor *k_cache,
                          torc_tensor *v_cache, int64_t pos0) {
    torc_tensor *const *w = m->slot;
    const int64_t C = m->cfg.n_embd, NH = m->cfg.n_head, T = torc_size(x, 1);
    // attention: x + c_proj(attn(c_attn(ln_1(x))))
    torc_tensor *h = layer_norm(x, w[blk(l, LN1W)], w[blk(l, LN1B)], C);
    torc_tensor *qkv = torc_linear(h, w[blk(l, QKVW)], w[blk(l, QKVB)]);  // (B, T, 3C); w is (in, out)
    torc_tensor *q = heads(torc_narrow(qkv, 2, 0, C), NH);                                // (B, NH, T, hs)
    torc_tensor *k = heads(torc_narrow(qkv, 2, C, C), NH);
    torc_tensor *v = heads(torc_narrow(qkv, 2, 2 * C, C), NH);
    bool causal = true;
    if (k_cache) {  // write this step's keys and values, attend to everything cached so far
        if (torc_copy_(torc_narrow(k_cache, 2, pos0, T), k) || torc_copy_(torc_narrow(v_cache, 2, pos0, T), v))
            return NULL;
        k = torc_narrow(k_cache, 2, 0, pos0 + T);
        v = torc_narrow(v_cache, 2, 0, pos0 + T);
        causal = pos0 == 0;  // the prompt (T queries over T keys), else one query over every key
    }
    const double p = m->training ? m->cfg.dropout : 0.0;
    torc_tensor *y = torc_scaled_dot_product_attention(q, k, v, NULL, p, causal && T > 1, NAN, false, gen);
    y = torc_reshape(torc_transpose(y, 1, 2), TORC_SHAPE(torc_size(x, 0), T, C));  // heads side by side
    y = dropout(m, torc_linear(y, w[blk(l, ATTPROJW)], w[blk(l, ATTPROJB)]), gen);
    x = torc_add(x, y);
    // MLP: x + c_proj(gelu(c_fc(ln_2(x))))
    h = layer_norm(x, w[blk(l, LN2W)], w[blk(l, LN2B)], C);
    h = torc_gelu(torc_linear(h, w[blk(l, FCW)], w[blk(l, FCB)]), true);  // (B, T, 4C)
    h = dropout(m, torc_linear(h, w[blk(l, FCPROJW)], w[blk(l, FCPROJB)]), gen);
    return torc_add(x, h);
}

// Embeddings, the blocks and ln_f: idx (B, T) at positions pos0.. -> (B, T, C).
// wte as this forward uses it twice (embedding and head): one view of the parameter, so the two
// gradients meet in the view's node and reach the parameter as one accumulation, as PyTorch's
// AccumulateGrad sums them (data-parallel training reduces a parameter's bucket at its first).
static torc_tensor *wte_alias(const torc_gpt *m) {
    return torc_view(m->slot[WTE], TORC_SHAPE(m->cfg.padded_vocab_size, m->cfg.n_embd));
}

static torc_tensor *trunk(const torc_gpt *m, torc_tensor *wte_all, const torc_tensor *idx, int64_t pos0,
                          torc_generator *gen, torc_tensor **k_cache, torc_tensor **v_cache) {
    const int64_t T = torc_size(idx, 1);
    torc_tensor *pos = torc_arange((double)pos0, (double)(pos0 + T), 1, TORC_DTYPE_I64);  // (T)
    // wte's first V rows: a token >= V is "index out of range", and the padding rows get no gradient
    torc_tensor *wte = torc_narrow(wte_all, 0, 0, m->cfg.vocab_size);
    torc_tensor *x = torc_add(torc_embedding(wte, idx, TORC_EMBEDDING_NO_PADDING),  // (B, T, C)
                              torc_embedding(m->slot[WPE], pos, TORC_EMBEDDING_NO_PADDING));  // + (T, C)
    x = dropout(m, x, gen);
    // Each block in a scope of its own: what it makes and nothing keeps (a linear's product before
    // its bias, the heads' copies) goes when the block ends, not when the forward does. Config B's
    // training forward peaked 104 MiB over what it keeps (its peak RSS 1.12x PyTorch's growth).
    for (int64_t l = 0; l < m->cfg.n_layer && x; l++) {
        torc_scope_push();
        torc_tensor *y = torc_keep(block(m, l, x, gen, k_cache ? k_cache[l] : NULL, v_cache ? v_cache[l] : NULL, pos0));
        torc_scope_pop();
        x = y;
    }
    return layer_norm(x, m->slot[lnf(m, 0)], m->slot[lnf(m, 1)], m->cfg.n_embd);
}

// The tied LM head: x (..., C) @ wte^T -> (..., Vp), then the first V columns (a view).
static torc_tensor *lm_head(const torc_gpt *m, torc_tensor *wte_all, const torc_tensor *x) {
    torc_tensor *logits = torc_matmul(x, torc_transpose(wte_all, 0, 1));
    return torc_narrow(logits, -1, 0, m->cfg.vocab_size);
}

static torc_status check_idx(const torc_gpt *m, const torc_tensor *idx, const char *what) {
    if (!idx) return torc__null_arg("%s: idx is NULL", what);
    if (torc_ndim(idx) != 2)
        return torc__error(TORC_ERR_SHAPE, "%s: idx must be (B, T), got %d dims", what, torc_ndim(idx));
    if (torc_get_dtype(idx) != TORC_DTYPE_I64)
        return torc__error(TORC_ERR_DTYPE, "%s: idx must be int64, got %s", what, torc_dtype_name(torc_get_dtype(idx)));
    if (torc_size(idx, 1) > m->cfg.block_size)
        return torc__error(TORC_ERR_SHAPE, "Cannot forward sequence of length %lld, block size is only %lld",
                           (long long)torc_size(idx, 1), (long long)m->cfg.block_size);
    return TORC_OK;
}

torc_status torc_gpt_forward(torc_gpt *m, const torc_tensor *idx, const torc_tensor *targets, torc_generator *gen,
                             torc_tensor **logits, torc_tensor **loss) {
    if (logits) *logits = NULL;
    if (loss) *loss = NULL;
    if (!m) return torc__null_arg("torc_gpt_forward: model is NULL");
    torc_status st = check_idx(m, idx, "torc_gpt_forward");
    if (st) return st;
    const int64_t B = torc_size(idx, 0), T = torc_size(idx, 1), V = m->cfg.vocab_size;
    if (targets && (torc_ndim(targets) != 2 || torc_size(targets, 0) != B || torc_size(targets, 1) != T))
        return torc__error(TORC_ERR_SHAPE, "torc_gpt_forward: targets must have idx's shape [%lld, %lld]", (long long)B,
                           (long long)T);
    if (targets && torc_get_dtype(targets) != TORC_DTYPE_I64)
        return torc__error(TORC_ERR_DTYPE, "torc_gpt_forward: targets must be int64, got %s",
                           torc_dtype_name(torc_get_dtype(targets)));
    torc_scope_push();
    torc_tensor *wte = wte_alias(m);
    torc_tensor *x = trunk(m, wte, idx, 0, gen, NULL, NULL);  // (B, T, C)
    // llm.c's loss: softmax over the V real columns only. Training (targets, no logits wanted)
    // takes the fused head and loss, which never holds the (B, T, V) logits; asked for the logits,
    // the head is the composed matmul and the loss cross_entropy over them.
    const bool fused = targets && !logits;
    torc_tensor *lg = x && !fused ? lm_head(m, wte, x) : NULL;  // (B, T, V)
    torc_tensor *l = NULL;
    if (x && fused)
        l = torc_linear_cross_entropy(x, wte, targets, V, TORC_IGNORE_INDEX_DEFAULT, TORC_REDUCTION_MEAN);
    else if (lg && targets)
        l = torc_cross_entropy_ex(torc_reshape(lg, TORC_SHAPE(B * T, V)),
                                  torc_reshape((torc_tensor *)targets, TORC_SHAPE(B * T)), TORC_IGNORE_INDEX_DEFAULT,
                                  TORC_REDUCTION_MEAN, 0.0);
    st = (!fused && !lg) || (targets && !l) ? torc_last_status() : TORC_OK;
    if (!st) {
        if (logits) *logits = torc_keep(lg);
        if (loss && l) *loss = torc_keep(l);
    }
    torc_scope_pop();
    return st;
}

// ---- sampling ----
// One token from logits (V) floats: greedy at temperature 0, else softmax(logits / temperature)
// over the top_k largest (all when 0), by the inverse CDF at u in [0, 1).
static int cmp_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

static int64_t sample(const float *logits, int64_t V, double temperature, int64_t top_k, double u, float *scratch) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature == 0) return best;
    float cut = -INFINITY;
    if (top_k > 0 && top_k < V) {
        memcpy(scratch, logits, (size_t)V * sizeof *scratch);
        qsort(scratch, (size_t)V, sizeof *scratch, cmp_desc);
        cut = scratch[top_k - 1];
    }
    double sum = 0;
    for (int64_t i = 0; i < V; i++)
        if (logits[i] >= cut) sum += exp(((double)logits[i] - logits[best]) / temperature);
    double acc = 0, target = u * sum;
    int64_t last = best;
    for (int64_t i = 0; i < V; i++) {
        if (logits[i] < cut) continue;
        acc += exp(((double)logits[i] - logits[best]) / temperature);
        last = i;
        if (acc > target) return i;
    }
    return last;
}

// Runs tokens (B, Tn) at positions pos0.. through the model with the caches and writes the last
// position's logits (B, V) as float32 to host.
static torc_status step_cached(const torc_gpt *m, const int64_t *tokens, int64_t B, int64_t Tn, int64_t stride,
                               int64_t pos0, torc_tensor **kc, torc_tensor **vc, float *out) {
    torc_scope_push();
    int64_t *buf = malloc((size_t)(B * Tn) * sizeof *buf);
    torc_status st = buf ? TORC_OK : torc__error(TORC_ERR_OOM, "torc_gpt_generate: out of memory");
    for (int64_t b = 0; !st && b < B; b++) memcpy(buf + b * Tn, tokens + b * stride, (size_t)Tn * sizeof *buf);
    torc_tensor *idx = st ? NULL : torc_tensor_from(buf, TORC_SHAPE(B, Tn), TORC_DTYPE_I64);
    free(buf);
    torc_tensor *x = idx ? trunk(m, m->slot[WTE], idx, pos0, NULL, kc, vc) : NULL;  // (B, Tn, C)
    torc_tensor *lg = x ? lm_head(m, m->slot[WTE], torc_select(x, 1, Tn - 1)) : NULL;  // (B, V)
    lg = torc_contiguous(torc_to_dtype(lg, TORC_DTYPE_F32));
    if (!st) st = lg ? torc_copy_to_host(lg, out, (size_t)(B * m->cfg.vocab_size) * sizeof *out) : torc_last_status();
    torc_scope_pop();
    return st;
}

torc_tensor *torc_gpt_generate(torc_gpt *m, const torc_tensor *idx, int64_t max_new_tokens, double temperature,
                               int64_t top_k, torc_generator *gen) {
    if (!m) return TORC_NULL_ARG_FAIL("torc_gpt_generate: model is NULL");
    if (!idx) return TORC_NULL_ARG_FAIL("torc_gpt_generate: idx is NULL");
    if (torc_ndim(idx) != 2 || torc_size(idx, 1) < 1 || torc_get_dtype(idx) != TORC_DTYPE_I64)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "torc_gpt_generate: idx must be (B, T) int64 with T >= 1");
    if (max_new_tokens < 0 || !(temperature >= 0) || top_k < 0)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG,
                              "torc_gpt_generate: max_new_tokens, temperature and top_k must be >= 0, got %lld, %g, %lld",
                              (long long)max_new_tokens, temperature, (long long)top_k);
    const int64_t B = torc_size(idx, 0), T0 = torc_size(idx, 1), total = T0 + max_new_tokens;
    const int64_t V = m->cfg.vocab_size, Tmax = m->cfg.block_size, L = m->cfg.n_layer, NH = m->cfg.n_head;
    const int64_t hs = m->cfg.n_embd / NH;
    int64_t *seq = malloc((size_t)(B * total) * sizeof *seq), *prompt = malloc((size_t)(B * T0) * sizeof *prompt);
    float *logits = malloc((size_t)(B * V) * sizeof *logits), *scratch = malloc((size_t)V * sizeof *scratch);
    torc_tensor **kc = calloc((size_t)(2 * L), sizeof *kc), **vc = kc ? kc + L : NULL;
    torc_tensor *out = NULL;
    const bool was_training = m->training;
    m->training = false;
    torc_no_grad_begin();
    torc_scope_push();
    torc_status st = seq && prompt && logits && scratch && kc ? TORC_OK : torc__error(TORC_ERR_OOM, "torc_gpt_generate: out of memory");
    torc_tensor *ic = st ? NULL : torc_contiguous((torc_tensor *)idx);
    if (!st) st = ic ? torc_copy_to_host(ic, prompt, (size_t)(B * T0) * sizeof *prompt) : torc_last_status();
    for (int64_t b = 0; !st && b < B; b++) {
        memcpy(seq + b * total, prompt + b * T0, (size_t)T0 * sizeof *seq);
        for (int64_t t = 0; t < T0; t++)
            if (prompt[b * T0 + t] < 0 || prompt[b * T0 + t] >= V)
                st = torc__error(TORC_ERR_INDEX, "index out of range in self");
    }
    // (B, NH, Tmax, hs) keys and values per layer, freed at the pop. Under bf16 / f16 autocast in
    // that dtype: attention runs in it there (core/attention.c, as PyTorch's autocast), so the cache
    // holds exactly the keys and values it reads, in half the bytes, and no token casts the whole
    // f32 cache again. The sampler streams the cache once a token: at 900 positions of config B
    // (6 layers, width 384) 16.6 MB in f32 beside the 42 MB of weights.
    const torc_dtype cdt = torc_is_autocast_enabled() && torc_autocast_dtype() != TORC_DTYPE_F64 &&
                                   torc_dtype_size(torc_autocast_dtype()) == 2
                               ? torc_autocast_dtype()
                               : TORC_DTYPE_F32;
    for (int64_t l = 0; !st && l < L; l++) {
        kc[l] = torc_zeros(TORC_SHAPE(B, NH, Tmax, hs), cdt);
        vc[l] = torc_zeros(TORC_SHAPE(B, NH, Tmax, hs), cdt);
        if (!kc[l] || !vc[l]) st = torc_last_status();
    }
    // The prompt (its last block_size tokens) in one pass, then one token at a time.
    int64_t len = T0, pos = T0 < Tmax ? T0 : Tmax;
    if (!st && max_new_tokens) st = step_cached(m, seq + (len - pos), B, pos, total, 0, kc, vc, logits);
    for (int64_t t = 0; !st && t < max_new_tokens; t++) {
        torc_scope_push();
        double u[256];
        for (int64_t b0 = 0; !st && b0 < B; b0 += 256) {
            const int64_t nb = B - b0 < 256 ? B - b0 : 256;
            torc_tensor *r = torc_rand(TORC_SHAPE(nb), TORC_DTYPE_F64, gen);
            st = r ? torc_copy_to_host(r, u, (size_t)nb * sizeof *u) : torc_last_status();
            for (int64_t b = b0; !st && b < b0 + nb; b++)
                seq[b * total + len] = sample(logits + b * V, V, temperature, top_k, u[b - b0], scratch);
        }
        torc_scope_pop();
        len++;
        if (st || t + 1 == max_new_tokens) break;
        if (pos == Tmax) {  // the window is full: restart the cache from the last Tmax / 2 tokens
            pos = Tmax / 2 > 0 ? Tmax / 2 : 1;
            st = step_cached(m, seq + (len - pos), B, pos, total, 0, kc, vc, logits);
        } else {
            st = step_cached(m, seq + (len - 1), B, 1, total, pos, kc, vc, logits);
            pos++;
        }
    }
    torc_scope_pop();  // the caches go with it
    torc_no_grad_end();
    m->training = was_training;
    // Made outside this function's scope: the caller's scope (if any) owns it, as every op's result.
    if (!st) out = torc_tensor_from(seq, TORC_SHAPE(B, total), TORC_DTYPE_I64);
    free(kc), free(seq), free(prompt), free(logits), free(scratch);
    return out;
}

// ---- weights in files: Hugging Face's safetensors ----
static const char *const cfg_keys[] = {"gpt.vocab_size", "gpt.padded_vocab_size", "gpt.block_size", "gpt.n_layer",
                                       "gpt.n_head", "gpt.n_embd", "gpt.bias"};
static int64_t *cfg_field(torc_gpt_config *c, int i) {
    int64_t *f[] = {&c->vocab_size, &c->padded_vocab_size, &c->block_size, &c->n_layer, &c->n_head, &c->n_embd, NULL};
    return f[i];
}
enum { N_CFG_KEYS = (int)(sizeof cfg_keys / sizeof cfg_keys[0]) };

torc_status torc_gpt_state_dict(const torc_gpt *m, torc_state_dict *sd, bool hf_layout) {
    if (!m || !sd) return torc__null_arg("torc_gpt_state_dict: NULL argument");
    torc_gpt_config c = m->cfg;
    torc_status st = TORC_OK;
    char v[32];
    for (int i = 0; i < N_CFG_KEYS && !st; i++) {
        snprintf(v, sizeof v, "%lld", i == N_CFG_KEYS - 1 ? (long long)c.bias : (long long)*cfg_field(&c, i));
        st = torc_state_dict_set_meta(sd, cfg_keys[i], v);
    }
    snprintf(v, sizeof v, "%.17g", c.dropout);
    if (!st) st = torc_state_dict_set_meta(sd, "gpt.dropout", v);
    if (!st && hf_layout) st = torc_state_dict_set_meta(sd, "format", "pt");  // as transformers writes
    torc_scope_push();
    torc_no_grad_begin();
    for (int i = 0; i < m->n && !st; i++) {
        torc_tensor *t = m->params[i];
        if (hf_layout && t == m->slot[WTE])  // Hugging Face's wte has the V real rows only
            t = torc_clone(torc_narrow(torc_detach(t), 0, 0, c.vocab_size));
        st = t ? torc_state_dict_set(sd, m->names[i], t) : torc_last_status();
    }
    torc_no_grad_end();
    torc_scope_pop();
    return st;
}

// The tensor named name ("transformer.h.0...") in sd, with or without the "transformer." prefix
// (the hub's gpt2 files have none): borrowed from the dict, or NULL without an error.
static const torc_tensor *find(const torc_state_dict *sd, const char *name) {
    const char *bare = !strncmp(name, "transformer.", 12) ? name + 12 : name;
    const char *use = torc_state_dict_contains(sd, name) ? name : torc_state_dict_contains(sd, bare) ? bare : NULL;
    if (!use) return NULL;
    torc_scope_push();  // the scope's reference goes at the pop, the dict keeps its own
    torc_tensor *t = torc_state_dict_get(sd, use);
    torc_scope_pop();
    return t;
}

static bool parse_i64(const char *s, int64_t *out) {
    if (!s || !*s) return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno) return false;
    *out = v;
    return true;
}

torc_status torc_gpt_config_from_state_dict(const torc_state_dict *sd, torc_gpt_config *cfg) {
    if (!sd || !cfg) return torc__null_arg("torc_gpt_config_from_state_dict: NULL argument");
    torc_gpt_config c = {0};
    if (torc_state_dict_get_meta(sd, "gpt.n_layer")) {  // torc wrote it: the metadata says everything
        for (int i = 0; i < N_CFG_KEYS; i++) {
            int64_t v;
            if (!parse_i64(torc_state_dict_get_meta(sd, cfg_keys[i]), &v))
                return torc__error(TORC_ERR_IO, "GPT weights: metadata %s is missing or not a number", cfg_keys[i]);
            if (i == N_CFG_KEYS - 1) c.bias = v != 0;
            else *cfg_field(&c, i) = v;
        }
        const char *d = torc_state_dict_get_meta(sd, "gpt.dropout");
        c.dropout = d ? strtod(d, NULL) : 0.0;
    } else {  // a Hugging Face file: the shapes tell all but n_head
        const torc_tensor *wte = find(sd, "transformer.wte.weight"), *wpe = find(sd, "transformer.wpe.weight");
        if (!wte || !wpe || torc_ndim(wte) != 2 || torc_ndim(wpe) != 2)
            return torc__error(TORC_ERR_INVALID_ARG,
                               "GPT weights: no 2-D transformer.wte.weight and transformer.wpe.weight (not a GPT-2 file)");
        c.vocab_size = torc_size(wte, 0);
        c.padded_vocab_size = (c.vocab_size + 127) / 128 * 128;
        c.n_embd = torc_size(wte, 1);
        c.block_size = torc_size(wpe, 0);
        char name[64];
        for (c.n_layer = 0; c.n_layer < 4096; c.n_layer++) {
            snprintf(name, sizeof name, "transformer.h.%lld.ln_1.weight", (long long)c.n_layer);
            if (!find(sd, name)) break;
        }
        c.bias = find(sd, "transformer.ln_f.bias") != NULL;
        c.n_head = cfg->n_head;
        if (c.n_head <= 0)
            return torc__error(TORC_ERR_INVALID_ARG,
                               "GPT weights: the file does not say n_head (Hugging Face keeps it in config.json): give it");
    }
    torc_status st = torc_gpt_config_check(&c);
    if (!st) *cfg = c;
    return st;
}

torc_status torc_gpt_load_state_dict(torc_gpt *m, const torc_state_dict *sd) {
    if (!m || !sd) return torc__null_arg("torc_gpt_load_state_dict: NULL argument");
    const torc_gpt_config *c = &m->cfg;
    // 1. The config the file names, field by field.
    for (int i = 0; i < N_CFG_KEYS; i++) {
        const char *s = torc_state_dict_get_meta(sd, cfg_keys[i]);
        int64_t v, mine = i == N_CFG_KEYS - 1 ? (int64_t)c->bias : *cfg_field((torc_gpt_config *)c, i);
        if (s && (!parse_i64(s, &v) || v != mine))
            return torc__error(TORC_ERR_INVALID_ARG, "GPT weights: the file's %s is %s, the model's %lld", cfg_keys[i] + 4,
                               s, (long long)mine);
    }
    // 2. Every tensor there, with its shape; nothing the model lacks.
    for (int s = 0; s < m->n_slots; s++) {
        if (!m->slot[s]) continue;
        char *name = slot_name(m, s);
        if (!name) return torc__error(TORC_ERR_OOM, "out of memory");
        const torc_tensor *t = find(sd, name);
        int64_t shape[2];
        const char *field;
        const int nd = slot_shape(c, s, shape, &field);
        bool same = t && torc_ndim(t) == nd;
        for (int d = 0; same && d < nd; d++) same = torc_size(t, d) == shape[d] || (s == WTE && d == 0 && torc_size(t, 0) == c->vocab_size);
        torc_status st = TORC_OK;
        if (!t) st = torc__error(TORC_ERR_INVALID_ARG, "GPT weights: Missing key(s) in state_dict: \"%s\"", name);
        else if (!same) {
            char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
            st = torc__error(TORC_ERR_SHAPE, "GPT weights: size mismatch for %s: the file's is %s, the model's %s (%s)", name,
                             torc__shape_str(torc_ndim(t), torc_shape(t), b1, sizeof b1), torc__shape_str(nd, shape, b2, sizeof b2),
                             s == WTE ? "vocab_size / padded_vocab_size and n_embd" : s == WPE ? "block_size and n_embd" : field);
        } else if (!torc_dtype_is_floating(torc_get_dtype(t)))
            st = torc__error(TORC_ERR_DTYPE, "GPT weights: %s is %s, not floating point", name,
                             torc_dtype_name(torc_get_dtype(t)));
        free(name);
        if (st) return st;
    }
    for (int k = 0; k < torc_state_dict_size(sd); k++) {
        const char *name = torc_state_dict_name(sd, k);
        const char *bare = !strncmp(name, "transformer.", 12) ? name + 12 : name;
        const size_t len = strlen(name);
        if (!strncmp(name, "optimizer.", 10) || !strncmp(name, "grad_scaler.", 12) || !strcmp(name, "lm_head.weight") ||
            (len > 10 && !strcmp(name + len - 10, ".attn.bias")) || (len > 17 && !strcmp(name + len - 17, ".attn.masked_bias")))
            continue;  // the training state, the tied head, older transformers' causal-mask buffers
        char full[256];
        snprintf(full, sizeof full, "transformer.%s", bare);
        if (!torc_gpt_get_parameter(m, full))
            return torc__error(TORC_ERR_INVALID_ARG, "GPT weights: Unexpected key(s) in state_dict: \"%s\"", name);
    }
    // 3. Copy (under no_grad, as load_state_dict); wte's padding rows become zero.
    torc_status st = TORC_OK;
    torc_scope_push();
    torc_no_grad_begin();
    for (int s = 0; s < m->n_slots && !st; s++) {
        if (!m->slot[s]) continue;
        char *name = slot_name(m, s);
        const torc_tensor *t = name ? find(sd, name) : NULL;
        free(name);
        if (!t) st = torc__error(TORC_ERR_OOM, "out of memory");
        else if (s == WTE) {
            st = torc_zero_(m->slot[WTE]);
            if (!st) st = torc_copy_(torc_narrow(m->slot[WTE], 0, 0, torc_size(t, 0)), t);
        } else st = torc_copy_(m->slot[s], t);
    }
    torc_no_grad_end();
    torc_scope_pop();
    return st;
}

torc_status torc_gpt_save_hf(const torc_gpt *m, const char *path) {
    if (!m || !path) return torc__null_arg("torc_gpt_save_hf: NULL argument");
    torc_state_dict *sd = torc_state_dict_new();
    if (!sd) return torc_last_status();
    torc_status st = torc_gpt_state_dict(m, sd, true);
    if (!st) st = torc_save(sd, path);
    torc_state_dict_free(sd);
    return st;
}

static torc_gpt *from_state_dict(const torc_state_dict *sd, int64_t n_head_hint) {
    torc_gpt_config c = {0};
    c.n_head = n_head_hint;
    if (torc_gpt_config_from_state_dict(sd, &c)) return NULL;
    torc_generator *g = torc_generator_new(0);  // the init is overwritten: keep the caller's generators
    torc_gpt *m = g ? torc_gpt_new(&c, g) : NULL;
    torc_generator_free(g);
    if (m && torc_gpt_load_state_dict(m, sd)) torc_gpt_free(m), m = NULL;
    return m;
}

torc_gpt *torc_gpt_from_file(const char *path, int64_t n_head_hint) {
    if (!path) return TORC_NULL_ARG_FAIL("torc_gpt_from_file: path is NULL");
    torc_state_dict *sd = torc_load(path, NULL);
    if (!sd) return NULL;
    torc_gpt *m = from_state_dict(sd, n_head_hint);
    if (!m) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", torc_last_error());
        const torc_status st = torc_last_status();
        torc__error(st, "'%s': %s", path, msg);
    }
    torc_state_dict_free(sd);
    return m;
}

// ---- weights in files: llm.c's checkpoint ----
// llm.c's gpt2_build_from_checkpoint: int32 header[256] = {20240326, 3 (float32), maxT, V, L, NH, C,
// Vp}, then float32 arrays in this order, every layer's tensor of one kind stacked (L, ...), the
// Linear weights in PyTorch's (out, in): transposed from and to torc's (in, out).
#define LLMC_MAGIC 20240326
#define LLMC_VERSION 3
enum { LLMC_WTE = -2, LLMC_WPE = -1, LLMC_LNF_W = 100, LLMC_LNF_B = 101 };
static const int llmc_order[] = {LLMC_WTE, LLMC_WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB,
                                 LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB, LLMC_LNF_W, LLMC_LNF_B};

// The tensors of entry e as llm.c lays them out: n views (one per layer, or one) to copy to / from.
static int llmc_views(const torc_gpt *m, int e, torc_tensor **views) {
    if (e == LLMC_WTE) return views[0] = m->slot[WTE], 1;
    if (e == LLMC_WPE) return views[0] = m->slot[WPE], 1;
    if (e == LLMC_LNF_W || e == LLMC_LNF_B) return views[0] = m->slot[lnf(m, e - LLMC_LNF_W)], 1;
    for (int64_t l = 0; l < m->cfg.n_layer; l++) {
        torc_tensor *t = m->slot[blk(l, e)];
        views[l] = torc_ndim(t) == 2 ? torc_transpose(t, 0, 1) : t;  // (out, in)
    }
    return (int)m->cfg.n_layer;
}

torc_status torc_gpt_save_llmc(const torc_gpt *m, const char *path) {
    if (!m || !path) return torc__null_arg("torc_gpt_save_llmc: NULL argument");
    const torc_gpt_config *c = &m->cfg;
    if (!c->bias) return torc__error(TORC_ERR_INVALID_ARG, "torc_gpt_save_llmc: llm.c's format has biases; this model has none");
    if (c->block_size > INT32_MAX || c->padded_vocab_size > INT32_MAX)
        return torc__error(TORC_ERR_INVALID_ARG, "torc_gpt_save_llmc: sizes beyond int32");
    int32_t header[256] = {LLMC_MAGIC, LLMC_VERSION, (int32_t)c->block_size, (int32_t)c->vocab_size, (int32_t)c->n_layer,
                           (int32_t)c->n_head, (int32_t)c->n_embd, (int32_t)c->padded_vocab_size};
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return torc__error(TORC_ERR_IO, "'%s': path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return torc__error(TORC_ERR_IO, "'%s': cannot write: %s", path, strerror(errno));
    torc_status st = fwrite(header, sizeof header, 1, f) == 1 ? TORC_OK : torc__error(TORC_ERR_IO, "'%s': write failed", path);
    torc_tensor **views = malloc(sizeof *views * (size_t)(c->n_layer + 1));
    if (!views && !st) st = torc__error(TORC_ERR_OOM, "out of memory");
    for (size_t e = 0; e < sizeof llmc_order / sizeof llmc_order[0] && !st; e++) {
        torc_scope_push();
        torc_no_grad_begin();
        const int n = llmc_views(m, llmc_order[e], views);
        for (int i = 0; i < n && !st; i++) {
            torc_tensor *t = torc_contiguous(torc_to_dtype(torc_detach(views[i]), TORC_DTYPE_F32));
            float *buf = t ? malloc(torc_nbytes(t)) : NULL;
            st = !t ? torc_last_status() : !buf ? torc__error(TORC_ERR_OOM, "out of memory") : torc_copy_to_host(t, buf, torc_nbytes(t));
            if (!st && fwrite(buf, torc_nbytes(t), 1, f) != 1) st = torc__error(TORC_ERR_IO, "'%s': write failed", path);
            free(buf);
        }
        torc_no_grad_end();
        torc_scope_pop();
    }
    free(views);
    if (fflush(f) || fsync(fileno(f))) st = st ? st : torc__error(TORC_ERR_IO, "'%s': write failed: %s", path, strerror(errno));
    if (fclose(f)) st = st ? st : torc__error(TORC_ERR_IO, "'%s': write failed", path);
    if (!st && rename(tmp, path)) st = torc__error(TORC_ERR_IO, "'%s': cannot write: %s", path, strerror(errno));
    if (st) remove(tmp);
    return st;
}

torc_gpt *torc_gpt_from_llmc(const char *path) {
    if (!path) return TORC_NULL_ARG_FAIL("torc_gpt_from_llmc: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return TORC_FAIL_NULL(TORC_ERR_IO, "'%s': cannot open: %s", path, strerror(errno));
    int32_t h[256];
    torc_gpt *m = NULL;
    if (fread(h, sizeof h, 1, f) != 1) torc__error(TORC_ERR_IO, "'%s': shorter than llm.c's 1024-byte header", path);
    else if (h[0] != LLMC_MAGIC)
        torc__error(TORC_ERR_IO, "'%s': not an llm.c model file (magic %d at offset 0, expected %d)", path, h[0], LLMC_MAGIC);
    else if (h[1] != LLMC_VERSION)
        torc__error(TORC_ERR_IO, "'%s': llm.c model version %d at offset 4: torc reads version 3 (float32)%s", path, h[1],
                    h[1] == 5 ? "; version 5 is bfloat16" : "");
    else {
        torc_gpt_config c = {h[3], h[7], h[2], h[4], h[5], h[6], 0.0, true};
        torc_generator *g = torc_generator_new(0);
        m = g ? torc_gpt_new(&c, g) : NULL;
        torc_generator_free(g);
        if (!m) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", torc_last_error());
            torc__error(torc_last_status(), "'%s': header: %s", path, msg);
        }
    }
    // The size first: exactly the header and every parameter, as llm.c writes.
    if (m) {
        int64_t n = torc_gpt_num_parameters(m, false);
        if (fseek(f, 0, SEEK_END) || ftell(f) != 1024 + 4 * n) {
            torc__error(TORC_ERR_IO, "'%s': %ld bytes, the header's sizes need %lld", path, ftell(f), (long long)(1024 + 4 * n));
            torc_gpt_free(m), m = NULL;
        } else fseek(f, 1024, SEEK_SET);
    }
    torc_tensor **views = m ? malloc(sizeof *views * (size_t)(m->cfg.n_layer + 1)) : NULL;
    torc_status st = !m ? torc_last_status() : views ? TORC_OK : torc__error(TORC_ERR_OOM, "out of memory");
    for (size_t e = 0; e < sizeof llmc_order / sizeof llmc_order[0] && !st; e++) {
        torc_scope_push();
        torc_no_grad_begin();
        const int n = llmc_views(m, llmc_order[e], views);
        for (int i = 0; i < n && !st; i++) {
            const size_t bytes = (size_t)torc_numel(views[i]) * 4;
            float *buf = malloc(bytes ? bytes : 1);
            if (!buf) st = torc__error(TORC_ERR_OOM, "out of memory");
            else if (fread(buf, bytes, 1, f) != 1 && bytes) st = torc__error(TORC_ERR_IO, "'%s': read failed", path);
            torc_tensor *t = st ? NULL : torc_tensor_from(buf, torc_ndim(views[i]), torc_shape(views[i]), TORC_DTYPE_F32);
            if (!st) st = t ? torc_copy_(views[i], t) : torc_last_status();
            free(buf);
        }
        torc_no_grad_end();
        torc_scope_pop();
    }
    free(views);
    fclose(f);
    if (st && m) torc_gpt_free(m), m = NULL;
    return m;
}
