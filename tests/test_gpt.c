// tests/test_gpt.c — the GPT-2 model (torc/gpt.h) against PyTorch and transformers: a small random
// GPT2LMHeadModel's logits, loss and every gradient, and a 50-step AdamW trajectory in f32 and under
// bf16 autocast (tests/golden/gpt2_tiny*.safetensors, from tools/golden/gen_gpt2_golden.py); the
// init, names, config errors, Hugging Face and llm.c files, and sampling with the KV cache.
#define _GNU_SOURCE
#include <unistd.h>

#include "testutil.h"
#include "tmpdir.h"
#include "torc/gpt.h"

static char golden[1024], ref_path[1024];

static void paths(void) {
    const char *dir = getenv("TORC_TEST_DATA");
    ck_assert_msg(dir != NULL, "TORC_TEST_DATA is not set");
    snprintf(golden, sizeof golden, "%s/gpt2_tiny.safetensors", dir);
    snprintf(ref_path, sizeof ref_path, "%s/gpt2_tiny_ref.safetensors", dir);
}

// The reference tensor name from the golden file (owned by the open scope).
static torc_tensor *ref(torc_state_dict *sd, const char *name) {
    torc_tensor *t = torc_state_dict_get(sd, name);
    ck_assert_msg(t != NULL, "golden lacks %s", name);
    return t;
}

static torc_tensor *as_i64(torc_tensor *t) { return torc_to_dtype(t, TORC_DTYPE_I64); }

// |got - want| <= tol * max(|want|, rms(want)) elementwise: relative where a value is large,
// relative to the tensor's typical size where it is near zero (a gradient element of 1e-9 whose
// neighbours are 1e-3 is f32 noise at any relative tolerance of its own).
static void assert_close(const char *what, torc_tensor *got, torc_tensor *want, double tol) {
    ck_assert_msg(got != NULL, "%s: %s", what, torc_last_error());
    ck_assert_msg(torc_numel(got) == torc_numel(want), "%s: %lld elements, expected %lld", what,
                  (long long)torc_numel(got), (long long)torc_numel(want));
    const int64_t n = torc_numel(want);
    double *a = tu_values(got), *b = tu_values(want), rms = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) rms += b[i] * b[i];
    rms = sqrt(rms / (double)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        const double scale = fmax(fabs(b[i]), rms), err = fabs(a[i] - b[i]) / (scale > 0 ? scale : 1);
        if (err > worst) worst = err;
        ck_assert_msg(err <= tol, "%s[%lld]: %.9g, PyTorch %.9g (error %.3g of %.3g, tolerance %g)", what, (long long)i, a[i],
                      b[i], fabs(a[i] - b[i]), scale, tol);
    }
    free(a), free(b);
}

static torc_gpt *load_tiny(void) {
    paths();
    torc_gpt *m = torc_gpt_from_file(golden, 4);
    ck_assert_msg(m != NULL, "%s", torc_last_error());
    const torc_gpt_config *c = torc_gpt_get_config(m);
    ck_assert_int_eq(c->vocab_size, 96);
    ck_assert_int_eq(c->padded_vocab_size, 128);
    ck_assert_int_eq(c->block_size, 32);
    ck_assert_int_eq(c->n_layer, 2);
    ck_assert_int_eq(c->n_embd, 32);
    ck_assert(c->bias);
    return m;
}

// ---- one batch: logits, loss and every gradient as PyTorch's ----
// With the logits asked for, the head and loss are composed (matmul, cross_entropy); without
// them (training), torc_linear_cross_entropy: both as PyTorch's.
static void forward_backward(bool with_logits) {
    torc_gpt *m = load_tiny();
    torc_scope_push();
    torc_state_dict *sd = torc_load(ref_path, NULL);
    ck_assert_msg(sd != NULL, "%s", torc_last_error());
    torc_tensor *logits = NULL, *loss;
    ck_assert_int_eq(torc_gpt_forward(m, as_i64(ref(sd, "x")), as_i64(ref(sd, "y")), NULL, with_logits ? &logits : NULL,
                                      &loss), TORC_OK);
    if (with_logits) {
        tu_assert_shape(logits, 2, 32, 96);
        assert_close("logits", logits, ref(sd, "logits"), 1e-5);
    }
    assert_close("loss", loss, ref(sd, "loss"), 1e-5);
    ck_assert_int_eq(torc_backward(loss, NULL, false), TORC_OK);
    for (int i = 0; i < torc_gpt_param_count(m); i++) {
        const char *name = torc_gpt_param_name(m, i);
        char key[160];
        snprintf(key, sizeof key, "grad.%s", name);
        torc_tensor *g = torc_grad(torc_gpt_param(m, i));
        if (!strcmp(name, "transformer.wte.weight")) {  // the padding rows get nothing, exactly
            double *pad = tu_values(torc_narrow(g, 0, 96, 32));
            for (int k = 0; k < 32 * 32; k++) ck_assert_msg(pad[k] == 0, "wte padding grad %d = %g", k, pad[k]);
            free(pad);
            g = torc_narrow(g, 0, 0, 96);
        }
        assert_close(key, g, ref(sd, key), 1e-5);
    }
    torc_state_dict_free(sd);
    torc_scope_pop();
    torc_gpt_free(m);
}

START_TEST(test_forward_backward_match_pytorch) { forward_backward(true); }
END_TEST

START_TEST(test_fused_head_loss_and_gradients_match_pytorch) { forward_backward(false); }
END_TEST

// ---- 50 AdamW steps as PyTorch's ----
// PyTorch's loop (gen_gpt2_golden.py): nanoGPT's lr schedule, clip_grad_norm_(1.0), AdamW with
// weight decay on the 2-D parameters only. Tolerance: each step's loss within rtol of PyTorch's.
// In f32 both sides differ only in rounding (summation orders of the GEMMs, softmax, layer_norm):
// 1e-7 relative per op; Adam's update m / (sqrt(v) + eps) carries it into the weights without
// amplifying it much while gradients are far above eps, so after 50 steps the losses agree to a
// few 1e-7 (measured: 1.45e-7 at most on onednn and the reference), well inside 1e-5. Under bf16 autocast both sides round
// matmul operands to 8 bits of mantissa, but at different points (transformers' addmm rounds its
// output with the bias added in bf16; torc adds the f32 bias to the bf16 product in f32), so the
// two trajectories are two bf16 runs. Measured: 1.0e-4 (onednn) and 1.8e-4 (reference) at most;
// the bound is 5e-3, under bf16's eps (7.8e-3), since other ISAs round the products elsewhere.
static void trajectory(torc_dtype autocast, const char *want_name, double rtol) {
    torc_gpt *m = load_tiny();
    torc_state_dict *sd = torc_load(ref_path, NULL);
    ck_assert_msg(sd != NULL, "%s", torc_last_error());
    const int n = torc_gpt_param_count(m);
    const char *names[64];
    torc_tensor *params[64];
    for (int i = 0; i < n; i++) names[i] = torc_gpt_param_name(m, i), params[i] = torc_gpt_param(m, i);
    int n_decay = 0;
    torc_optimizer *opt = torc_optimizer_new_decay_groups("adamw", n, names, params, "lr=3e-3 betas=0.9,0.95 eps=1e-8",
                                                          0.1, NULL, NULL, &n_decay);
    ck_assert_msg(opt != NULL, "%s", torc_last_error());
    ck_assert_int_eq(n_decay, 2 + 2 * 4);  // wte, wpe, and four matrices a layer
    torc_scope_push();
    torc_tensor *xs = as_i64(ref(sd, "train_x")), *ys = as_i64(ref(sd, "train_y"));
    double *want = tu_values(ref(sd, want_name)), *want_norm = tu_values(ref(sd, "train_norm"));
    double *want_lr = tu_values(ref(sd, "train_lr")), worst = 0;
    for (int step = 0; step < 50; step++) {
        torc_scope_push();
        const double lr = torc_lr_cosine_warmup(step, 3e-3, 3e-4, 5, 50);
        ck_assert_msg(lr == want_lr[step], "lr %.17g at step %d, PyTorch's %.17g", lr, step, want_lr[step]);
        ck_assert_int_eq(torc_optimizer_set_lr(opt, lr), TORC_OK);
        torc_tensor *loss;
        if (autocast != TORC_DTYPE_F32) ck_assert_int_eq(torc_autocast_begin(autocast), TORC_OK);
        ck_assert_int_eq(torc_gpt_forward(m, torc_select(xs, 0, step), torc_select(ys, 0, step), NULL, NULL, &loss),
                         TORC_OK);
        if (autocast != TORC_DTYPE_F32) ck_assert_int_eq(torc_autocast_end(), TORC_OK);
        ck_assert_int_eq(torc_backward(loss, NULL, false), TORC_OK);
        torc_tensor *norm = torc_clip_grad_norm_(n, params, 1.0, 2.0, false);
        ck_assert_msg(norm != NULL, "%s", torc_last_error());
        ck_assert_int_eq(torc_optimizer_step(opt), TORC_OK);
        ck_assert_int_eq(torc_optimizer_zero_grad(opt, true), TORC_OK);
        double l, g;
        ck_assert_int_eq(torc_item(loss, &l), TORC_OK);
        ck_assert_int_eq(torc_item(norm, &g), TORC_OK);
        const double err = fabs(l - want[step]) / fabs(want[step]);
        if (err > worst) worst = err;
        ck_assert_msg(err <= rtol, "step %d: loss %.9g, PyTorch's %.9g (relative %.3g > %g)", step, l, want[step], err, rtol);
        if (autocast == TORC_DTYPE_F32)
            ck_assert_msg(fabs(g - want_norm[step]) <= 1e-4 * want_norm[step], "step %d: grad norm %.9g, PyTorch's %.9g",
                          step, g, want_norm[step]);
        torc_scope_pop();
    }
    fprintf(stderr, "gpt trajectory (%s): 50 steps, %.4f -> %.4f, largest relative difference from PyTorch %.3g\n",
            autocast == TORC_DTYPE_F32 ? "f32" : torc_dtype_name(autocast), want[0], want[49], worst);
    free(want), free(want_norm), free(want_lr);
    torc_scope_pop();
    torc_state_dict_free(sd);
    torc_optimizer_free(opt);
    torc_gpt_free(m);
}

START_TEST(test_trajectory_f32_matches_pytorch) { trajectory(TORC_DTYPE_F32, "train_loss", 1e-5); }
END_TEST

START_TEST(test_trajectory_bf16_matches_pytorch) { trajectory(TORC_DTYPE_BF16, "train_loss_bf16", 5e-3); }
END_TEST

// ---- init, names, config ----
START_TEST(test_new_init_and_names) {
    torc_gpt_config c = {100, 0, 16, 3, 2, 24, 0.0, true};
    torc_generator *g = torc_generator_new(7);
    torc_gpt *m = torc_gpt_new(&c, g);
    ck_assert_msg(m != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_gpt_get_config(m)->padded_vocab_size, 128);
    ck_assert_int_eq(torc_gpt_param_count(m), 2 + 3 * 12 + 2);
    ck_assert_str_eq(torc_gpt_param_name(m, 0), "transformer.wte.weight");
    ck_assert_str_eq(torc_gpt_param_name(m, 1), "transformer.wpe.weight");
    ck_assert_str_eq(torc_gpt_param_name(m, 4), "transformer.h.0.attn.c_attn.weight");
    ck_assert_str_eq(torc_gpt_param_name(m, 2 + 12 + 11), "transformer.h.1.mlp.c_proj.bias");
    ck_assert_str_eq(torc_gpt_param_name(m, 39), "transformer.ln_f.bias");
    ck_assert_ptr_null(torc_gpt_param_name(m, 40));
    const int64_t C = 24, L = 3;
    const int64_t n = 128 * C + 16 * C + L * (4 * C + C * 3 * C + 3 * C + C * C + C + C * 4 * C + 4 * C + 4 * C * C + C) + 2 * C;
    ck_assert_int_eq(torc_gpt_num_parameters(m, false), n);
    ck_assert_int_eq(torc_gpt_num_parameters(m, true), n - 16 * C);
    torc_scope_push();
    // std of the matrices: 0.02, residual projections 0.02 / sqrt(6); LayerNorm 1, biases 0; padding 0
    const struct { const char *name; double std; } mats[] = {
        {"transformer.wte.weight", 0.02}, {"transformer.h.0.attn.c_attn.weight", 0.02},
        {"transformer.h.2.mlp.c_fc.weight", 0.02}, {"transformer.h.1.attn.c_proj.weight", 0.02 / sqrt(6.0)},
        {"transformer.h.2.mlp.c_proj.weight", 0.02 / sqrt(6.0)},
    };
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        torc_tensor *w = torc_gpt_get_parameter(m, mats[i].name);
        ck_assert_ptr_nonnull(w);
        if (i == 0) {
            tu_assert_values(torc_sum(torc_abs(torc_narrow(w, 0, 100, 28)), TORC_ALL_DIMS, false), TU_ARR(0.0), 0.0);
            w = torc_narrow(w, 0, 0, 100);
        }
        double s;
        ck_assert_int_eq(torc_item(torc_std(w, TORC_ALL_DIMS, 1.0, false), &s), TORC_OK);
        ck_assert_msg(fabs(s / mats[i].std - 1) < 0.1, "%s std %g, expected %g", mats[i].name, s, mats[i].std);
    }
    tu_assert_values(torc_gpt_get_parameter(m, "transformer.h.1.ln_2.weight"),
                     TU_ARR(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 0.0);
    tu_assert_values(torc_sum(torc_abs(torc_gpt_get_parameter(m, "transformer.h.0.mlp.c_fc.bias")), TORC_ALL_DIMS, false),
                     TU_ARR(0.0), 0.0);
    ck_assert(torc_requires_grad(torc_gpt_param(m, 3)));
    torc_scope_pop();
    // The same seed, the same weights; no bias: no bias parameters.
    torc_generator_set_state(g, 7, 0);
    c.bias = false;
    torc_gpt *m2 = torc_gpt_new(&c, g);
    ck_assert_ptr_nonnull(m2);
    ck_assert_int_eq(torc_gpt_param_count(m2), 2 + 3 * 6 + 1);
    ck_assert_str_eq(torc_gpt_param_name(m2, 3), "transformer.h.0.attn.c_attn.weight");
    torc_scope_push();
    tu_assert_values(torc_sum(torc_abs(torc_sub(torc_gpt_param(m, 0), torc_gpt_param(m2, 0))), TORC_ALL_DIMS, false),
                     TU_ARR(0.0), 0.0);
    torc_scope_pop();
    torc_gpt_free(m2);
    torc_gpt_free(m);
    torc_generator_free(g);
}
END_TEST

START_TEST(test_config_and_input_errors) {
    torc_gpt_config c = {100, 0, 16, 2, 5, 24, 0.0, true};
    ck_assert_ptr_null(torc_gpt_new(&c, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "n_embd (24) must be divisible by n_head (5)");
    c.n_head = 2, c.padded_vocab_size = 64;
    ck_assert_ptr_null(torc_gpt_new(&c, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "padded_vocab_size (64)");
    c.padded_vocab_size = 0, c.dropout = 1.0;
    ck_assert_ptr_null(torc_gpt_new(&c, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "dropout");
    c.dropout = 0, c.block_size = 0;
    ck_assert_ptr_null(torc_gpt_new(&c, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "block_size must be in [1,");
    c.block_size = 16;
    torc_gpt *m = torc_gpt_new(&c, NULL);
    ck_assert_ptr_nonnull(m);
    torc_scope_push();
    torc_tensor *logits = NULL, *loss = NULL;
    torc_tensor *long_idx = torc_zeros(TORC_SHAPE(2, 17), TORC_DTYPE_I64);
    ck_assert_int_eq(torc_gpt_forward(m, long_idx, NULL, NULL, &logits, &loss), TORC_ERR_SHAPE);
    tu_assert_error(TORC_ERR_SHAPE, "Cannot forward sequence of length 17, block size is only 16");
    ck_assert_int_eq(torc_gpt_forward(m, torc_zeros(TORC_SHAPE(2, 4), TORC_DTYPE_F32), NULL, NULL, &logits, NULL),
                     TORC_ERR_DTYPE);
    torc_tensor *idx = torc_full(TORC_SHAPE(2, 4), 100, TORC_DTYPE_I64);  // vocab 100: 100 is out of range
    ck_assert_int_ne(torc_gpt_forward(m, idx, NULL, NULL, &logits, NULL), TORC_OK);
    tu_assert_error(TORC_ERR_INDEX, "index out of range in self");
    ck_assert_ptr_null(logits);
    ck_assert_int_eq(torc_gpt_forward(m, torc_zeros(TORC_SHAPE(2, 4), TORC_DTYPE_I64),
                                      torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_I64), NULL, &logits, &loss),
                     TORC_ERR_SHAPE);
    // targets of -100 only: nan, as PyTorch; logits (B, T, V) without the padding
    torc_clear_error();
    ck_assert_int_eq(torc_gpt_forward(m, torc_zeros(TORC_SHAPE(2, 4), TORC_DTYPE_I64),
                                      torc_full(TORC_SHAPE(2, 4), -100, TORC_DTYPE_I64), NULL, &logits, &loss),
                     TORC_OK);
    tu_assert_shape(logits, 2, 4, 100);
    double l;
    ck_assert_int_eq(torc_item(loss, &l), TORC_OK);
    ck_assert(isnan(l));
    torc_scope_pop();
    torc_gpt_free(m);
}
END_TEST

// ---- files ----
START_TEST(test_hf_save_load_roundtrip) {
    torc_gpt *m = load_tiny();
    const char *path = tmp_path("model.safetensors");
    ck_assert_int_eq(torc_gpt_save_hf(m, path), TORC_OK);
    torc_scope_push();
    torc_state_dict *sd = torc_load(path, NULL);
    ck_assert_ptr_nonnull(sd);
    tu_assert_shape(torc_state_dict_get(sd, "transformer.wte.weight"), 96, 32);  // Hugging Face's: no padding
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "format"), "pt");
    ck_assert_str_eq(torc_state_dict_get_meta(sd, "gpt.n_head"), "4");
    torc_gpt *back = torc_gpt_from_file(path, 0);  // the metadata says n_head
    ck_assert_msg(back != NULL, "%s", torc_last_error());
    torc_tensor *idx = torc_randint(0, 96, TORC_SHAPE(2, 9), TORC_DTYPE_I64, NULL), *a, *b;
    ck_assert_int_eq(torc_gpt_forward(m, idx, NULL, NULL, &a, NULL), TORC_OK);
    ck_assert_int_eq(torc_gpt_forward(back, idx, NULL, NULL, &b, NULL), TORC_OK);
    tu_assert_values(torc_sum(torc_abs(torc_sub(a, b)), TORC_ALL_DIMS, false), TU_ARR(0.0), 0.0);
    // Into a model of another config: the field is named.
    torc_gpt_config c = *torc_gpt_get_config(m);
    c.n_head = 8;
    torc_gpt *other = torc_gpt_new(&c, NULL);
    ck_assert_int_eq(torc_gpt_load_state_dict(other, sd), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "the file's n_head is 4, the model's 8");
    torc_gpt_free(other);
    c.n_head = 4, c.n_embd = 48;
    other = torc_gpt_new(&c, NULL);
    torc_state_dict *hf = torc_load(golden, NULL);  // no metadata: the shapes decide
    ck_assert_int_eq(torc_gpt_load_state_dict(other, hf), TORC_ERR_SHAPE);
    tu_assert_error(TORC_ERR_SHAPE, "size mismatch for transformer.wte.weight");
    torc_gpt_free(other);
    // A file without n_head needs the hint.
    ck_assert_ptr_null(torc_gpt_from_file(golden, 0));
    tu_assert_error(TORC_ERR_INVALID_ARG, "n_head");
    torc_state_dict_free(hf);
    torc_state_dict_free(sd);
    torc_scope_pop();
    torc_gpt_free(back);
    torc_gpt_free(m);
}
END_TEST

// llm.c's file: the header llm.c reads, its size, and the same logits back.
START_TEST(test_llmc_save_load_roundtrip) {
    torc_gpt *m = load_tiny();
    const char *path = tmp_path("gpt2_tiny.bin");
    ck_assert_int_eq(torc_gpt_save_llmc(m, path), TORC_OK);
    FILE *f = fopen(path, "rb");
    int32_t h[256];
    ck_assert_int_eq(fread(h, sizeof h, 1, f), 1);
    fseek(f, 0, SEEK_END);
    ck_assert_int_eq(ftell(f), 1024 + 4 * torc_gpt_num_parameters(m, false));
    fclose(f);
    const int32_t want[8] = {20240326, 3, 32, 96, 2, 4, 32, 128};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(h[i], want[i]);
    torc_gpt *back = torc_gpt_from_llmc(path);
    ck_assert_msg(back != NULL, "%s", torc_last_error());
    torc_scope_push();
    for (int i = 0; i < torc_gpt_param_count(m); i++)
        tu_assert_values(torc_sum(torc_abs(torc_sub(torc_gpt_param(m, i), torc_gpt_param(back, i))), TORC_ALL_DIMS, false),
                         TU_ARR(0.0), 0.0);
    torc_scope_pop();
    torc_gpt_free(back);
    // llm.c's own layout, written from Python as its train_gpt2.py writes (Linear weights (out, in)):
    // the reference's logits.
    char llmc[1100];
    snprintf(llmc, sizeof llmc, "%s/gpt2_tiny_llmc.bin", getenv("TORC_TEST_DATA"));
    torc_gpt *py = torc_gpt_from_llmc(llmc);
    ck_assert_msg(py != NULL, "%s", torc_last_error());
    torc_scope_push();
    torc_state_dict *sd = torc_load(ref_path, NULL);
    torc_tensor *logits;
    ck_assert_int_eq(torc_gpt_forward(py, as_i64(ref(sd, "x")), NULL, NULL, &logits, NULL), TORC_OK);
    assert_close("logits (llm.c file)", logits, ref(sd, "logits"), 1e-5);
    torc_state_dict_free(sd);
    torc_scope_pop();
    torc_gpt_free(py);
    // A truncated file and another magic are refused, naming the file.
    f = fopen(path, "r+b");
    ck_assert_int_eq(ftruncate(fileno(f), 5000), 0);
    fclose(f);
    ck_assert_ptr_null(torc_gpt_from_llmc(path));
    tu_assert_error(TORC_ERR_IO, "5000 bytes, the header's sizes need");
    ck_assert_ptr_null(torc_gpt_from_llmc(golden));
    tu_assert_error(TORC_ERR_IO, "not an llm.c model file");
    torc_gpt_free(m);
}
END_TEST

// ---- sampling ----
// Greedy decoding with the KV cache gives the tokens a full forward over the sequence gives,
// step by step (nanoGPT's generate without a cache), while the window is not full; in f32, and
// under bf16 autocast (whose cache holds bf16 keys and values, what its attention reads).
static void generate_matches_full_forward(torc_gpt *m, torc_tensor *prompt, torc_dtype autocast) {
    if (autocast != TORC_DTYPE_F32) ck_assert_int_eq(torc_autocast_begin(autocast), TORC_OK);
    torc_tensor *out = torc_gpt_generate(m, prompt, 20, 0.0, 0, NULL);
    ck_assert_msg(out != NULL, "%s", torc_last_error());
    tu_assert_shape(out, 2, 25);
    int64_t got[50], seq[2][25];
    ck_assert_int_eq(torc_copy_to_host(out, got, sizeof got), TORC_OK);
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 5; t++) seq[b][t] = got[b * 25 + t];
    torc_no_grad_begin();
    for (int len = 5; len < 25; len++) {
        torc_scope_push();
        int64_t flat[50];
        for (int b = 0; b < 2; b++) memcpy(flat + b * len, seq[b], sizeof(int64_t) * (size_t)len);
        torc_tensor *logits;
        ck_assert_int_eq(torc_gpt_forward(m, torc_tensor_from(flat, TORC_SHAPE(2, len), TORC_DTYPE_I64), NULL, NULL,
                                          &logits, NULL), TORC_OK);
        torc_tensor *next = torc_argmax(torc_select(logits, 1, len - 1), -1, false);
        int64_t nx[2];
        ck_assert_int_eq(torc_copy_to_host(next, nx, sizeof nx), TORC_OK);
        for (int b = 0; b < 2; b++) {
            seq[b][len] = nx[b];
            ck_assert_msg(got[b * 25 + len] == nx[b], "%s: row %d token %d: cached %lld, full forward %lld",
                          torc_dtype_name(autocast), b, len, (long long)got[b * 25 + len], (long long)nx[b]);
        }
        torc_scope_pop();
    }
    torc_no_grad_end();
    if (autocast != TORC_DTYPE_F32) ck_assert_int_eq(torc_autocast_end(), TORC_OK);
}

START_TEST(test_generate_kv_cache_matches_full_forward) {
    torc_gpt *m = load_tiny();
    torc_scope_push();
    torc_tensor *prompt = torc_tensor_from((int64_t[]){5, 17, 3, 60, 2, 9, 1, 33, 70, 4}, TORC_SHAPE(2, 5), TORC_DTYPE_I64);
    generate_matches_full_forward(m, prompt, TORC_DTYPE_F32);
    generate_matches_full_forward(m, prompt, TORC_DTYPE_BF16);
    // Beyond the window (32): the cache restarts and sampling goes on; top_k 1 is greedy; a seed
    // gives the same text twice.
    torc_tensor *longer = torc_gpt_generate(m, prompt, 70, 0.0, 0, NULL), *k1 = torc_gpt_generate(m, prompt, 70, 1.0, 1, NULL);
    ck_assert_ptr_nonnull(longer);
    tu_assert_shape(longer, 2, 75);
    tu_assert_values(torc_sum(torc_abs(torc_sub(longer, k1)), TORC_ALL_DIMS, false), TU_ARR(0.0), 0.0);
    torc_generator *g = torc_generator_new(3);
    torc_tensor *s1 = torc_gpt_generate(m, prompt, 40, 0.8, 20, g);
    torc_generator_set_state(g, 3, 0);
    torc_tensor *s2 = torc_gpt_generate(m, prompt, 40, 0.8, 20, g);
    tu_assert_values(torc_sum(torc_abs(torc_sub(s1, s2)), TORC_ALL_DIMS, false), TU_ARR(0.0), 0.0);
    ck_assert_ptr_null(torc_gpt_generate(m, prompt, 4, -1.0, 0, g));
    tu_assert_error(TORC_ERR_INVALID_ARG, "temperature");
    torc_generator_free(g);
    torc_scope_pop();
    torc_gpt_free(m);
}
END_TEST

int main(void) {
    // gpt_cuda (label gpu) runs this suite with TORC_BACKEND=cuda: skipped where no GPU loads.
    const char *backend = getenv("TORC_BACKEND");
    if (backend && !strncmp(backend, "cuda", 4) && !torc_default_device()) {
        printf("SKIP: %s\n", torc_last_error());
        return 77;
    }
    Suite *s = suite_create("gpt");
    TCase *tc = tcase_create("gpt");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_add_test(tc, test_forward_backward_match_pytorch);
    tcase_add_test(tc, test_fused_head_loss_and_gradients_match_pytorch);
    tcase_add_test(tc, test_trajectory_f32_matches_pytorch);
    tcase_add_test(tc, test_trajectory_bf16_matches_pytorch);
    tcase_add_test(tc, test_new_init_and_names);
    tcase_add_test(tc, test_config_and_input_errors);
    tcase_add_test(tc, test_hf_save_load_roundtrip);
    tcase_add_test(tc, test_llmc_save_load_roundtrip);
    tcase_add_test(tc, test_generate_kv_cache_matches_full_forward);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
