// tests/test_gpt_memory.c — what the GPT keeps for backward, checked against its formula: after a
// training forward (targets given, f32, no dropout) the activations in use are exactly
//   4 [L (17 n C + (4 + NH) n) + 3 n C + 2 n + V C + 1] + 8 T bytes,   n = B T tokens
// (torc_gpt_activation_bytes). A block keeps 17 n C floats (its input, ln_1's output, qkv, the
// attention's output and its heads merged, the residual sum, ln_2's output, c_fc's output and
// GELU's), 4 n for the two LayerNorms' mean and rstd and NH n for the fused attention's
// log-sum-exp; outside the blocks ln_f's input and output, the fused head's dx (3 n C) and dW (V C,
// the vocabulary without its padding), ln_f's statistics (2 n), the loss and the positions (int64).
// No (T, T) matrix is kept, so the attention's memory grows linearly in T: 4x the tokens, at most
// 4.5x the bytes (issue #37's target), where the composed attention would grow 16x.
#include "ck.h"

#include "testutil.h"
#include "torc/gpt.h"
#include "torc/torc.h"

// Activation bytes in use after a training forward of a (B, T) batch, minus those before it
// (the batch itself).
static uint64_t saved_after_forward(const torc_gpt_config *cfg, int64_t B, int64_t T, uint64_t *peak) {
    torc_generator *gen = torc_generator_new(7);
    torc_gpt *m = torc_gpt_new(cfg, gen);
    ck_assert_msg(m != NULL, "%s", torc_last_error());
    torc_device *dev = torc_default_device();
    torc_scope_push();
    torc_tensor *x = torc_randint(0, cfg->vocab_size, TORC_SHAPE(B, T), TORC_DTYPE_I64, gen);
    torc_tensor *y = torc_randint(0, cfg->vocab_size, TORC_SHAPE(B, T), TORC_DTYPE_I64, gen);
    ck_assert(x && y);
    torc_memory_stats ms;
    torc_memory_reset_peak(dev);
    ck_assert_int_eq(torc_memory_stats_get(dev, &ms), TORC_OK);
    const uint64_t before = ms.in_use[TORC_MEM_ACTIVATION];
    torc_tensor *loss = NULL;
    ck_assert_msg(torc_gpt_forward(m, x, y, gen, NULL, &loss) == TORC_OK, "%s", torc_last_error());
    ck_assert_int_eq(torc_memory_stats_get(dev, &ms), TORC_OK);
    const uint64_t saved = ms.in_use[TORC_MEM_ACTIVATION] - before;
    if (peak) *peak = ms.peak[TORC_MEM_ACTIVATION] - before;
    ck_assert_int_eq(torc_backward(loss, NULL, false), TORC_OK);
    torc_scope_pop();
    torc_gpt_free(m);
    torc_generator_free(gen);
    return saved;
}

static uint64_t formula(const torc_gpt_config *c, int64_t B, int64_t T) {
    const int64_t n = B * T, C = c->n_embd, L = c->n_layer, NH = c->n_head, V = c->vocab_size;
    return (uint64_t)(4 * (L * (17 * n * C + (4 + NH) * n) + 3 * n * C + 2 * n + V * C + 1) + 8 * T);
}

static const struct { int64_t V, L, NH, C, T, B; bool bias; } k_configs[] = {
    {256, 1, 2, 32, 32, 4, true},  {256, 2, 2, 32, 32, 4, false}, {256, 3, 4, 32, 32, 4, true},
    {256, 1, 2, 64, 32, 4, true},  {256, 1, 2, 32, 64, 4, true},  {512, 1, 2, 32, 32, 8, true},
    {300, 2, 3, 48, 20, 3, true},  {96, 2, 4, 32, 17, 2, true},
};
#define N_CONFIGS ((int)(sizeof k_configs / sizeof k_configs[0]))

static void check_config(int i) {
    const torc_gpt_config cfg = {k_configs[i].V, 0, k_configs[i].T, k_configs[i].L, k_configs[i].NH,
                                 k_configs[i].C, 0.0, k_configs[i].bias};
    const uint64_t got = saved_after_forward(&cfg, k_configs[i].B, k_configs[i].T, NULL);
    const uint64_t want = formula(&cfg, k_configs[i].B, k_configs[i].T);
    ck_assert_msg(got == want, "config %d on %s: %llu bytes kept for backward, the formula says %llu", i,
                  torc_device_name(torc_default_device()), (unsigned long long)got, (unsigned long long)want);
    ck_assert_uint_eq(torc_gpt_activation_bytes(&cfg, k_configs[i].B, k_configs[i].T), want);
}

START_TEST(saved_for_backward_default_backend) { check_config(_i); }
END_TEST

START_TEST(saved_for_backward_reference) {
    torc_device *def = torc_default_device();
    ck_assert_int_eq(torc_set_default_device(torc_device_get("reference")), TORC_OK);
    check_config(_i);
    torc_set_default_device(def);
}
END_TEST

// The formula's value for the demo's config, worked by hand: n = 16 * 64 = 1024,
// 4 [3 (17 * 1024 * 96 + 8 * 1024) + 3 * 1024 * 96 + 2048 + 256 * 96 + 1] + 8 * 64 = 21 438 980.
START_TEST(formula_of_the_demo) {
    const torc_gpt_config cfg = {256, 0, 64, 3, 4, 96, 0.0, true};
    ck_assert_uint_eq(torc_gpt_activation_bytes(&cfg, 16, 64), 21438980u);
}
END_TEST

START_TEST(formula_refuses_bad_input) {
    const torc_gpt_config cfg = {256, 0, 64, 3, 4, 96, 0.0, true}, odd = {256, 0, 64, 3, 5, 96, 0.0, true};
    ck_assert_int_eq(torc_gpt_activation_bytes(NULL, 1, 1), -1);
    tu_assert_error(TORC_ERR_INVALID_ARG, "config is NULL");
    ck_assert_int_eq(torc_gpt_activation_bytes(&odd, 1, 1), -1);
    tu_assert_error(TORC_ERR_INVALID_ARG, "n_head");
    ck_assert_int_eq(torc_gpt_activation_bytes(&cfg, -1, 64), -1);
    tu_assert_error(TORC_ERR_INVALID_ARG, "must be >= 0");
    ck_assert_int_eq(torc_gpt_activation_bytes(&cfg, INT64_MAX / 2, 64), -1);
    tu_assert_error(TORC_ERR_INVALID_ARG, "overflows");
}
END_TEST

// 4x the tokens by a 4x longer window: the kept bytes and the forward's peak grow at most 4.5x.
START_TEST(attention_memory_linear_in_T) {
    const torc_gpt_config c256 = {256, 0, 256, 1, 2, 32, 0.0, true}, c1024 = {256, 0, 1024, 1, 2, 32, 0.0, true};
    uint64_t p256, p1024;
    const uint64_t s256 = saved_after_forward(&c256, 1, 256, &p256), s1024 = saved_after_forward(&c1024, 1, 1024, &p1024);
    ck_assert_msg((double)s1024 <= 4.5 * (double)s256, "kept %llu -> %llu bytes", (unsigned long long)s256,
                  (unsigned long long)s1024);
    ck_assert_msg((double)p1024 <= 4.5 * (double)p256, "forward peak %llu -> %llu bytes", (unsigned long long)p256,
                  (unsigned long long)p1024);
}
END_TEST

// The backward holds little beyond what the forward kept: GELU's gradient is one op
// (GELU_BACKWARD), not a dozen elementwise ones whose temporaries all lived until it returned.
// Measured (L 1 to 6, C 32 to 384, onednn and the reference): the backward's activation peak is
// the kept bytes + 2.0 n C floats; composed it was + 70 n C. The bound, 6 n C, leaves room for the
// MLP's hidden gradient (n, 4C) beside the residual stream's (n C) and one more of width C.
static void check_backward_peak(torc_device *dev) {
    torc_device *def = torc_default_device();
    ck_assert_int_eq(torc_set_default_device(dev), TORC_OK);
    const torc_gpt_config cfg = {256, 0, 64, 2, 2, 64, 0.0, true};
    const int64_t B = 4, T = 64, nC = B * T * cfg.n_embd;
    torc_generator *gen = torc_generator_new(7);
    torc_gpt *m = torc_gpt_new(&cfg, gen);
    ck_assert_msg(m != NULL, "%s", torc_last_error());
    torc_scope_push();
    torc_tensor *x = torc_randint(0, cfg.vocab_size, TORC_SHAPE(B, T), TORC_DTYPE_I64, gen);
    torc_tensor *y = torc_randint(0, cfg.vocab_size, TORC_SHAPE(B, T), TORC_DTYPE_I64, gen);
    ck_assert(x && y);
    torc_memory_stats ms;
    ck_assert_int_eq(torc_memory_stats_get(dev, &ms), TORC_OK);
    const uint64_t before = ms.in_use[TORC_MEM_ACTIVATION];
    torc_tensor *loss = NULL;
    ck_assert_msg(torc_gpt_forward(m, x, y, gen, NULL, &loss) == TORC_OK, "%s", torc_last_error());
    ck_assert_int_eq(torc_memory_stats_get(dev, &ms), TORC_OK);
    const uint64_t kept = ms.in_use[TORC_MEM_ACTIVATION] - before;
    torc_memory_reset_peak(dev);
    ck_assert_int_eq(torc_backward(loss, NULL, false), TORC_OK);
    ck_assert_int_eq(torc_memory_stats_get(dev, &ms), TORC_OK);
    const uint64_t peak = ms.peak[TORC_MEM_ACTIVATION] - before;
    ck_assert_msg(peak <= kept + 6 * 4 * (uint64_t)nC, "%s: the backward's activation peak is %llu bytes, %.1f n C "
                  "floats above the %llu the forward kept", torc_device_name(dev), (unsigned long long)peak,
                  ((double)peak - (double)kept) / (4.0 * (double)nC), (unsigned long long)kept);
    torc_scope_pop();
    torc_gpt_free(m);
    torc_generator_free(gen);
    torc_set_default_device(def);
}

START_TEST(backward_peak_near_what_forward_kept) {
    check_backward_peak(torc_default_device());
    check_backward_peak(torc_device_get("reference"));
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("gpt_memory");
    TCase *tc = tcase_create("gpt_memory");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, saved_for_backward_default_backend, 0, N_CONFIGS);
    tcase_add_loop_test(tc, saved_for_backward_reference, 0, N_CONFIGS);
    tcase_add_test(tc, formula_of_the_demo);
    tcase_add_test(tc, formula_refuses_bad_input);
    tcase_add_test(tc, attention_memory_linear_in_T);
    tcase_add_test(tc, backward_peak_near_what_forward_kept);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
