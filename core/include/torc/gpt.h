// torc/gpt.h — a GPT-2 language model written with torc's public API only (core/gpt.c, which
// reads top to bottom like llm.c's train_gpt2.c): config, init, forward with loss, parameters by
// Hugging Face's names, sampling with a KV cache, and weights in Hugging Face's and llm.c's files.
//
// The model is GPT2LMHeadModel's: token embedding wte (Vp, C) + learned position embedding wpe
// (block_size, C); n_layer pre-LayerNorm blocks, each x = x + attn(ln_1(x)), x = x + mlp(ln_2(x))
// with attn a causal multi-head self-attention (one fused qkv projection c_attn (C, 3C), an
// output projection c_proj (C, C)) and mlp c_fc (C, 4C), GELU (tanh approximation), c_proj
// (4C, C); a final LayerNorm ln_f; the LM head tied to wte. Every weight is stored (in, out) and
// applied as x @ W + b, which is Hugging Face's Conv1D layout, so its files load without
// transposes. Names are GPT2LMHeadModel's ("transformer.h.0.attn.c_attn.weight").
// Shapes below: B batch, T sequence (<= block_size), C n_embd, V vocab_size, Vp padded_vocab_size,
// NH n_head, hs = C / NH.
//
// Conventions are torc.h's: tensors returned are new references (owned by the open scope, if
// any), errors are a status or NULL with torc_last_error() set, nothing aborts or prints.
#ifndef TORC_GPT_H
#define TORC_GPT_H

#include "torc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct torc_gpt_config {
    int64_t vocab_size;         // V: tokens the model predicts (GPT-2: 50257)
    int64_t padded_vocab_size;  // Vp >= V, rows of wte (0: V rounded up to a multiple of 128). The
                                // rows past V are zero, never predicted and never in the loss:
                                // only the first V logits are returned (llm.c's padding, which
                                // keeps the LM head's matmul at a friendly size)
    int64_t block_size;         // the longest sequence, rows of wpe (GPT-2: 1024)
    int64_t n_layer, n_head, n_embd;
    double dropout;             // p of the embedding, attention and residual dropouts (training only)
    bool bias;                  // Linear and LayerNorm biases (GPT-2: true)
} torc_gpt_config;
// GPT-2 small (124M) with llm.c's padding.
#define TORC_GPT_CONFIG_GPT2 {50257, 50304, 1024, 12, 12, 768, 0.0, true}

typedef struct torc_gpt torc_gpt;

// TORC_OK, or TORC_ERR_INVALID_ARG naming the field: sizes >= 1 (and at most 2^24 for block_size,
// 2^31 for the vocab, 4096 layers, 2^16 for n_embd), n_embd % n_head == 0, padded_vocab_size 0 or
// >= vocab_size, 0 <= dropout < 1.
TORC_API torc_status torc_gpt_config_check(const torc_gpt_config *cfg);
// A new model in float32 on the default device with GPT-2's initialisation, drawn from gen (NULL:
// the default generator) in parameter order: every weight ~ normal(0, 0.02), the residual
// projections (attn.c_proj and mlp.c_proj weights) ~ normal(0, 0.02 / sqrt(2 n_layer)), biases 0,
// LayerNorm weights 1, wte's padding rows 0. In training mode (dropout active when cfg->dropout >
// 0). Caller frees with torc_gpt_free. NULL with the error of torc_gpt_config_check, or an
// allocation's.
TORC_API torc_gpt *torc_gpt_new(const torc_gpt_config *cfg, torc_generator *gen);
TORC_API void torc_gpt_free(torc_gpt *m);  // NULL ok
TORC_API const torc_gpt_config *torc_gpt_get_config(const torc_gpt *m);  // borrowed; Vp filled in
// Training mode applies dropout (p = config's) in forward; eval mode does not (generate always).
TORC_API void torc_gpt_set_training(torc_gpt *m, bool training);

// Parameters in GPT2LMHeadModel.named_parameters() order (lm_head.weight is wte, not listed):
// transformer.wte.weight (Vp, C), transformer.wpe.weight (block_size, C), then per layer i
// transformer.h.i.{ln_1.weight, ln_1.bias, attn.c_attn.weight (C, 3C), attn.c_attn.bias (3C),
// attn.c_proj.weight (C, C), attn.c_proj.bias, ln_2.weight, ln_2.bias, mlp.c_fc.weight (C, 4C),
// mlp.c_fc.bias (4C), mlp.c_proj.weight (4C, C), mlp.c_proj.bias}, then transformer.ln_f.weight
// and .bias (without bias: no .bias entries). Tensors and names are borrowed, valid until
// torc_gpt_free; the tensors are leaves that require grad (their .grad after a backward).
TORC_API int torc_gpt_param_count(const torc_gpt *m);
TORC_API torc_tensor *torc_gpt_param(const torc_gpt *m, int i);          // NULL for a bad i
TORC_API const char *torc_gpt_param_name(const torc_gpt *m, int i);      // NULL for a bad i
TORC_API torc_tensor *torc_gpt_get_parameter(const torc_gpt *m, const char *name);  // NULL if none
// Elements over all parameters (wte counted once, with its padding rows); non_embedding leaves
// out wpe, as nanoGPT's get_num_params() does (wte stays: the tied head uses it as a weight).
TORC_API int64_t torc_gpt_num_parameters(const torc_gpt *m, bool non_embedding);

// Bytes of activations a training forward of a (B, T) batch keeps for backward (targets given,
// logits not asked for, float32, no dropout, no autocast), n = B T tokens:
//   4 [L (17 n C + (4 + NH) n) + 3 n C + 2 n + V C + 1] + 8 T.
// A block keeps 17 n C floats (its input, ln_1's output, qkv, the attention's output and its
// heads merged, the residual sum, ln_2's output, c_fc's and GELU's outputs), 4 n for its
// LayerNorms' mean and rstd and NH n for the fused attention's log-sum-exp (no (T, T) matrix);
// then ln_f's input and output, the fused head's dx (3 n C), its dW over the V real rows (V C),
// ln_f's statistics (2 n), the loss, and the positions (int64). tests/test_gpt_memory.c checks it
// against the device's accounting. -1 for a bad config (torc_gpt_config_check) or overflow.
TORC_API int64_t torc_gpt_activation_bytes(const torc_gpt_config *cfg, int64_t batch, int64_t seq_len);

// The forward pass. idx (B, T) int64 token ids in [0, V), T <= block_size; targets (B, T) int64 or
// NULL (the class to predict at each position, -100 ignored). *logits (may be NULL to skip it):
// (B, T, V), a view of the head's (B, T, Vp) output without the padding columns. *loss (NULL
// allowed; left NULL when targets is NULL): the mean cross-entropy over the targets not ignored,
// a zero-dim f32 tensor (nan when all are ignored, as PyTorch). With targets and logits NULL (a
// training step) the head and loss are torc_linear_cross_entropy over wte's V rows, which holds
// no (B, T, V) logits; asking for the logits runs the composed head (matmul over wte's Vp rows,
// cross_entropy over the first V columns). Both give the same loss and gradients up to rounding.
// Differentiable: torc_backward on
// the loss fills every parameter's .grad. gen draws the dropout masks (NULL: the default
// generator; unused in eval mode or without dropout). Under torc_autocast_begin the matmuls and
// attention run in the autocast dtype, the LayerNorms and the loss in f32.
// Errors (nothing returned): TORC_ERR_SHAPE "Cannot forward sequence of length 40, block size is
// only 32" (nanoGPT's words), idx not 2-D or targets of another shape; TORC_ERR_DTYPE for
// non-int64 idx/targets; TORC_ERR_INDEX for a token outside [0, V) ("index out of range in self").
TORC_API torc_status torc_gpt_forward(torc_gpt *m, const torc_tensor *idx, const torc_tensor *targets,
                                      torc_generator *gen, torc_tensor **logits, torc_tensor **loss);

// Samples max_new_tokens tokens after idx (B, T0) int64, 1 <= T0, and returns (B, T0 +
// max_new_tokens) int64: nanoGPT's generate, in eval mode under no_grad, with a KV cache: the
// prompt runs once (its keys and values kept per layer), then each new token runs alone through
// the blocks attending to the cache, so a token costs O(T) instead of a forward over the window.
// When the window is full (block_size tokens), the cache restarts from the last block_size / 2
// tokens (one forward over them), so the model always sees at most block_size tokens of context.
// temperature > 0 divides the logits; 0 takes the most likely token (greedy). top_k > 0 keeps the
// k most likely (ties at the k-th kept), 0 keeps all. Each sample draws one uniform number per
// row from gen (NULL: the default generator), so the same seed gives the same text on every
// backend up to the logits' rounding. Errors: TORC_ERR_INVALID_ARG for a negative temperature,
// top_k or max_new_tokens, T0 < 1; the forward's errors. The model's training flag is restored.
TORC_API torc_tensor *torc_gpt_generate(torc_gpt *m, const torc_tensor *idx, int64_t max_new_tokens, double temperature,
                                        int64_t top_k, torc_generator *gen);

// ---- weights in files ----
// The model's parameters into sd under their names (retained, not copied), and the config as
// metadata "gpt.vocab_size", "gpt.padded_vocab_size", "gpt.block_size", "gpt.n_layer",
// "gpt.n_head", "gpt.n_embd", "gpt.dropout", "gpt.bias". hf_layout: Hugging Face's file, wte
// without its padding rows (V, C) (a copy) and "format" = "pt" as transformers writes.
TORC_API torc_status torc_gpt_state_dict(const torc_gpt *m, torc_state_dict *sd, bool hf_layout);
// The config a state dict describes: the "gpt.*" metadata where present, else the shapes (a
// Hugging Face file: V and Vp from wte's rows, rounded up to 128 for Vp, block_size from wpe,
// n_embd, n_layer from the highest h.<i>, bias from whether ln_f.bias is there) with n_head taken
// from cfg->n_head as given (a file cannot tell it; TORC_ERR_INVALID_ARG if it is 0 then). Names
// may carry the "transformer." prefix or not (the hub's gpt2 files do not). cfg is in/out.
TORC_API torc_status torc_gpt_config_from_state_dict(const torc_state_dict *sd, torc_gpt_config *cfg);
// Copies the weights of sd into m (under no_grad), checking everything first and changing nothing
// on an error: TORC_ERR_INVALID_ARG when a "gpt.*" value differs from m's config, naming the field
// ("the file's n_head is 4, the model's 8"); TORC_ERR_SHAPE for a tensor whose shape differs,
// naming the tensor and the config field its shape follows; TORC_ERR_INVALID_ARG for a missing
// tensor or one the model does not have (lm_head.weight equal in shape to wte, and the attn.bias /
// attn.masked_bias buffers older transformers saved, are accepted and skipped). wte may have V
// rows (Hugging Face) or Vp (torc): padding rows are zeroed. Floating dtypes are converted.
TORC_API torc_status torc_gpt_load_state_dict(torc_gpt *m, const torc_state_dict *sd);
// Hugging Face's model.safetensors: torc_gpt_state_dict(m, sd, true) written with torc_save.
TORC_API torc_status torc_gpt_save_hf(const torc_gpt *m, const char *path);
// A model from a safetensors file (Hugging Face's, or torc-train's checkpoint, whose optimizer
// entries are skipped): config by torc_gpt_config_from_state_dict (n_head from n_head_hint where the
// file does not say; 0: none), weights by torc_gpt_load_state_dict. NULL with the error.
TORC_API torc_gpt *torc_gpt_from_file(const char *path, int64_t n_head_hint);
// llm.c's checkpoint (gpt2_124M.bin): a 256 x int32 header (magic 20240326, version 3 = float32,
// maxT, V, n_layer, n_head, C, Vp) then the parameters as one float32 array in llm.c's order, its
// Linear weights (out, in) (transposed here from and to torc's (in, out)).
TORC_API torc_status torc_gpt_save_llmc(const torc_gpt *m, const char *path);
TORC_API torc_gpt *torc_gpt_from_llmc(const char *path);

#ifdef __cplusplus
}
#endif
#endif
