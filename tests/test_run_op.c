// tests/test_run_op.c — the public single-op API (torc_run_op, torc_op_supported): ops run on
// the chosen backend with tensors as operands, the native flag, and every malformed call refused
// with a clear error before anything reaches a backend.
#include "testutil.h"

static torc_device *dev_or_skip(const char *name) {
    torc_device *d = torc_device_get(name);
    if (!d) torc_clear_error();
    return d;
}

static torc_tensor *vec(torc_device *d, int64_t n, double start) {
    return torc_to_device(torc_arange(start, start + (double)n, 1, TORC_DTYPE_F32), d);
}

static void runs_an_add_on(const char *backend) {
    torc_device *d = dev_or_skip(backend);
    if (!d) return;
    torc_scope_push();
    torc_tensor *a = vec(d, 4, 1), *b = vec(d, 4, 10), *out = torc_to_device(torc_zeros(TORC_SHAPE(4), TORC_DTYPE_F32), d);
    ck_assert_msg(a && b && out, "%s", torc_last_error());
    const uint64_t v0 = torc_version(out);
    torc_op_call call = {.code = TORC_OP_ADD, .n_in = 2, .n_out = 1, .in = {a, b}, .out = {out}};
    call.params.scalar.value = 2.0;  // alpha
    ck_assert_int_eq(torc_run_op(d, &call, 0), TORC_OK);
    tu_assert_values(out, TU_ARR(21, 24, 27, 30), 0);
    ck_assert_uint_gt(torc_version(out), v0);
    // a strided, broadcast operand (stride 0), as backend.h describes
    torc_tensor *s = torc_expand(torc_to_device(torc_full(TORC_SHAPE(1), 0.5, TORC_DTYPE_F32), d), TORC_SHAPE(4));
    call.code = TORC_OP_MUL, call.in[1] = s;
    ck_assert_int_eq(torc_run_op(d, &call, 0), TORC_OK);
    tu_assert_values(out, TU_ARR(0.5, 1, 1.5, 2), 0);
    torc_scope_pop();
}

START_TEST(runs_ops_on_each_host_backend) {
    runs_an_add_on("reference");
    runs_an_add_on("onednn");
}
END_TEST

START_TEST(two_outputs_come_back) {
    torc_device *d = dev_or_skip("reference");
    ck_assert_ptr_nonnull(d);
    torc_scope_push();
    // scaled_mm with its amax output: [1 2; 3 4] @ I scaled by 0.5 * 2
    torc_tensor *a = torc_to_dtype(torc_reshape(torc_arange(1, 5, 1, TORC_DTYPE_F32), TORC_SHAPE(2, 2)), TORC_DTYPE_F8_E4M3FN);
    torc_tensor *b = torc_to_dtype(torc_eye(2, 2, TORC_DTYPE_F32), TORC_DTYPE_F8_E4M3FN);
    torc_tensor *sa = torc_full(TORC_SHAPE(1), 0.5, TORC_DTYPE_F32), *sb = torc_full(TORC_SHAPE(1), 2, TORC_DTYPE_F32);
    torc_tensor *out = torc_zeros(TORC_SHAPE(2, 2), TORC_DTYPE_F32), *amax = torc_zeros(TORC_SHAPE(1), TORC_DTYPE_F32);
    ck_assert_msg(a && b && sa && sb && out && amax, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_SCALED_MM, .n_in = 4, .n_out = 2, .in = {a, b, sa, sb}, .out = {out, amax}};
    ck_assert_msg(torc_run_op(torc_get_device(a), &call, 0) == TORC_OK, "%s", torc_last_error());
    tu_assert_values(out, TU_ARR(1, 2, 3, 4), 0);
    tu_assert_values(amax, TU_ARR(4), 0);
    torc_scope_pop();
}
END_TEST

// MATMUL_ROUNDED through the public API: f32 operands rounded to c, the sum rounded to c and
// stored in an f32 out: [0.1 0.2] @ [[3], [5]] in f16 is f16(f16(0.1) * 3 + f16(0.2) * 5) = 1.2998046875
// (f32 alone: 1.3000000). A c that is not f16 or bf16 (the core), or an f64 operand (the backend),
// is refused, out unchanged.
START_TEST(matmul_rounded_rounds_inputs_and_sum) {
    torc_device *d = dev_or_skip("reference");
    ck_assert_ptr_nonnull(d);
    torc_scope_push();
    torc_tensor *a = torc_to_device(torc_tensor_from((const float[]){0.1f, 0.2f}, TORC_SHAPE(1, 2), TORC_DTYPE_F32), d);
    torc_tensor *b = torc_to_device(torc_tensor_from((const float[]){3, 5}, TORC_SHAPE(2, 1), TORC_DTYPE_F32), d);
    torc_tensor *out = torc_to_device(torc_zeros(TORC_SHAPE(1, 1), TORC_DTYPE_F32), d);
    torc_op_call call = {.code = TORC_OP_MATMUL_ROUNDED, .n_in = 2, .n_out = 1, .in = {a, b}, .out = {out}};
    call.params.matmul.dtype = TORC_DTYPE_F16;
    ck_assert_msg(torc_run_op(d, &call, TORC_RUN_NATIVE) == TORC_OK, "%s", torc_last_error());
    tu_assert_values(out, TU_ARR(1.2998046875), 0);
    call.params.matmul.dtype = TORC_DTYPE_BF16;  // bf16(0.1) = 0.10009765625, bf16(0.2) = 0.2001953125
    ck_assert_msg(torc_run_op(d, &call, TORC_RUN_NATIVE) == TORC_OK, "%s", torc_last_error());
    tu_assert_values(out, TU_ARR(1.3046875), 0);
    call.params.matmul.dtype = TORC_DTYPE_F64;
    ck_assert_int_eq(torc_run_op(d, &call, 0), TORC_ERR_DTYPE);
    tu_assert_error(TORC_ERR_DTYPE, "params.matmul.dtype is float64; it runs in float16 or bfloat16");
    tu_assert_values(out, TU_ARR(1.3046875), 0);  // unchanged
    call.params.matmul.dtype = 999;
    ck_assert_int_eq(torc_run_op(d, &call, 0), TORC_ERR_DTYPE);
    tu_assert_error(TORC_ERR_DTYPE, "params.matmul.dtype is not a dtype");
    call.params.matmul.dtype = TORC_DTYPE_F16;
    call.in[0] = torc_to_dtype(a, TORC_DTYPE_F64);
    ck_assert_int_eq(torc_run_op(d, &call, 0), TORC_ERR_NOT_SUPPORTED);
    tu_assert_error(TORC_ERR_NOT_SUPPORTED, "\"matmul_rounded\" not implemented for 'Double'");
    torc_clear_error();
    torc_scope_pop();
}
END_TEST

START_TEST(native_flag_refuses_what_the_backend_declines) {
    torc_device *d = dev_or_skip("onednn");
    if (!d) return;  // no oneDNN in this build: the fallback has nothing to show
    torc_scope_push();
    // f64 addcmul: onednn's fused loop takes contiguous f32 only, so the reference runs it
    torc_tensor *x = torc_to_device(torc_ones(TORC_SHAPE(8), TORC_DTYPE_F64), d), *out = torc_zeros_like(x);
    ck_assert_msg(x && out, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_ADDCMUL, .n_in = 3, .n_out = 1, .in = {x, x, x}, .out = {out}};
    call.params.scalar.value = 3;
    ck_assert_int_eq(torc_op_supported(d, &call), TORC_ERR_NOT_SUPPORTED);
    tu_assert_error(TORC_ERR_NOT_SUPPORTED, "backend 'onednn' does not take op 'addcmul' for dtype float64");
    ck_assert_int_eq(torc_run_op(d, &call, TORC_RUN_NATIVE), TORC_ERR_NOT_SUPPORTED);
    tu_assert_values(out, TU_ARR(0, 0, 0, 0, 0, 0, 0, 0), 0);  // nothing ran
    torc_clear_error();
    ck_assert_int_eq(torc_run_op(d, &call, 0), TORC_OK);  // the core's fallback
    tu_assert_values(out, TU_ARR(4, 4, 4, 4, 4, 4, 4, 4), 0);
    torc_scope_pop();
}
END_TEST

// A malformed call: the status and message, and out untouched.
static void assert_refused(torc_device *d, const torc_op_call *call, torc_status st, const char *msg) {
    torc_tensor *out = call->n_out > 0 && call->out[0] ? call->out[0] : NULL;
    double *before = out ? tu_values(out) : NULL;
    torc_clear_error();
    ck_assert_msg(torc_run_op(d, call, 0) == st, "%s", torc_last_error());
    tu_assert_error(st, msg);
    torc_clear_error();
    ck_assert_int_eq(torc_op_supported(d, call), st);
    if (out) {
        double *after = tu_values(out);
        ck_assert_int_eq(memcmp(before, after, sizeof(double) * (size_t)torc_numel(out)), 0);
        free(after);
    }
    free(before);
}

START_TEST(malformed_calls_are_refused_before_the_backend) {
    torc_device *d = dev_or_skip("reference");
    ck_assert_ptr_nonnull(d);
    torc_scope_push();
    torc_tensor *a = vec(d, 6, 0), *b3 = vec(d, 3, 0), *out = torc_to_device(torc_zeros(TORC_SHAPE(6), TORC_DTYPE_F32), d);
    torc_tensor *m23 = torc_reshape(vec(d, 6, 0), TORC_SHAPE(2, 3)), *o22 = torc_to_device(torc_zeros(TORC_SHAPE(2, 2), TORC_DTYPE_F32), d);
    ck_assert_msg(a && b3 && out && m23 && o22, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_ADD, .n_in = 2, .n_out = 1, .in = {a, b3}, .out = {out}};
    call.params.scalar.value = 1;
    assert_refused(d, &call, TORC_ERR_SHAPE, "torc_run_op: op 'add': in[1] has shape [3]; the op needs [6]");
    // inputs that agree with each other and an out that does not: out is the operand named
    torc_tensor *o3 = torc_to_device(torc_zeros(TORC_SHAPE(3), TORC_DTYPE_F32), d);
    torc_op_call odd = {.code = TORC_OP_ADD, .n_in = 2, .n_out = 1, .in = {a, a}, .out = {o3}};
    odd.params.scalar.value = 1;
    assert_refused(d, &odd, TORC_ERR_SHAPE, "torc_run_op: op 'add': out[0] has shape [3]; the op needs [6]");
    odd.code = TORC_OP_NEG, odd.n_in = 1;
    assert_refused(d, &odd, TORC_ERR_SHAPE, "torc_run_op: op 'neg': out[0] has shape [3]; the op needs [6]");
    odd.code = TORC_OP_ADD, odd.n_in = 2, odd.in[1] = b3, odd.out[0] = o22;  // nothing agrees: in[0]'s shape
    assert_refused(d, &odd, TORC_ERR_SHAPE, "torc_run_op: op 'add': in[1] has shape [3]; the op needs [6]");
    call.in[1] = a, call.n_in = 1;
    assert_refused(d, &call, TORC_ERR_INVALID_ARG, "op 'add' takes 2 input(s) and 1 output(s) here, got 1 and 1");
    call.n_in = 2, call.in[1] = NULL;
    assert_refused(d, &call, TORC_ERR_INVALID_ARG, "in[1] is NULL");
    call.in[1] = a, call.code = (torc_opcode)TORC_OP_COUNT;
    assert_refused(d, &call, TORC_ERR_INVALID_ARG, "unknown opcode");
    // an expanded output: several results would land on one element
    torc_tensor *one = torc_to_device(torc_zeros(TORC_SHAPE(1), TORC_DTYPE_F32), d);
    torc_op_call x6 = {.code = TORC_OP_NEG, .n_in = 1, .n_out = 1, .in = {a}, .out = {torc_expand(one, 1, (int64_t[]){6})}};
    ck_assert_msg(x6.out[0] != NULL, "%s", torc_last_error());
    assert_refused(d, &x6, TORC_ERR_INVALID_ARG, "more than one element of the written-to tensor refers to a single "
                   "memory location");
    // matmul (2, 3) @ (2, 3): K does not match
    torc_op_call mm = {.code = TORC_OP_MATMUL, .n_in = 2, .n_out = 1, .in = {m23, m23}, .out = {o22}};
    assert_refused(d, &mm, TORC_ERR_SHAPE, "op 'matmul': in[1] has shape [2, 3]; the op needs [3, 3]");
    // a reduction whose mask names a dim the input lacks, and one whose out keeps the reduced dim
    torc_tensor *r = torc_to_device(torc_zeros(TORC_SHAPE(2, 1), TORC_DTYPE_F32), d);
    torc_op_call sum = {.code = TORC_OP_SUM, .n_in = 1, .n_out = 1, .in = {m23}, .out = {r}};
    sum.params.reduce.mask = 4;
    assert_refused(d, &sum, TORC_ERR_SHAPE, "params.reduce.mask 0x4 names dims past in[0]'s 2");
    sum.params.reduce.mask = 1;
    assert_refused(d, &sum, TORC_ERR_SHAPE, "out[0] has shape [2, 1]; the op needs [1, 3]");
    // gather with an index wider than the source off the dim would read past it
    torc_tensor *idx = torc_to_device(torc_zeros(TORC_SHAPE(2, 4), TORC_DTYPE_I64), d);
    torc_tensor *g = torc_to_device(torc_zeros(TORC_SHAPE(2, 4), TORC_DTYPE_F32), d);
    torc_op_call ga = {.code = TORC_OP_GATHER, .n_in = 2, .n_out = 1, .in = {m23, idx}, .out = {g}};
    ga.params.dim.dim = 0;
    assert_refused(d, &ga, TORC_ERR_SHAPE, "the index must fit in in[0] off the dim");
    ga.params.dim.dim = 2;
    assert_refused(d, &ga, TORC_ERR_SHAPE, "params.dim.dim is 2, out of range for 2 dims");
    // linspace whose count disagrees with out
    torc_op_call ls = {.code = TORC_OP_LINSPACE, .n_in = 0, .n_out = 1, .out = {out}};
    ls.params.range.count = 7;
    assert_refused(d, &ls, TORC_ERR_SHAPE, "out has 6 elements but params.range.count is 7");
    // operands on another device
    torc_device *o = dev_or_skip("onednn");
    if (o) {
        torc_tensor *elsewhere = torc_to_device(a, o);
        torc_op_call x = {.code = TORC_OP_NEG, .n_in = 1, .n_out = 1, .in = {elsewhere}, .out = {out}};
        char want[128];
        snprintf(want, sizeof want, "Expected all tensors to be on the same device, but in[0] is on %s and the op runs "
                 "on %s", torc_device_name(o), torc_device_name(d));
        assert_refused(d, &x, TORC_ERR_INVALID_ARG, want);
    }
    torc_clear_error();
    ck_assert_int_eq(torc_run_op(d, NULL, 0), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "torc_run_op: call is NULL");
    torc_op_call ok = {.code = TORC_OP_NEG, .n_in = 1, .n_out = 1, .in = {a}, .out = {out}};
    torc_clear_error();
    ck_assert_int_eq(torc_run_op(d, &ok, 8), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "unknown flags 0x8");
    torc_scope_pop();
}
END_TEST

// ATTENTION(_BACKWARD) (backend ABI 2.4): q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev), o
// (B, H, L, Ev), lse (B, H, L), the backward's do of o's shape and dq, dk, dv of q's, k's, v's;
// each mismatch named before the backend runs (the reference indexes k, v and lse by q's B, H, L).
START_TEST(attention_shapes_are_checked) {
    torc_device *d = dev_or_skip("reference");
    ck_assert_ptr_nonnull(d);
    torc_scope_push();
    torc_tensor *q = torc_randn(TORC_SHAPE(1, 2, 3, 4), TORC_DTYPE_F32, NULL);
    torc_tensor *k = torc_randn(TORC_SHAPE(1, 2, 5, 4), TORC_DTYPE_F32, NULL);
    torc_tensor *v = torc_randn(TORC_SHAPE(1, 2, 5, 6), TORC_DTYPE_F32, NULL);
    torc_tensor *o = torc_zeros(TORC_SHAPE(1, 2, 3, 6), TORC_DTYPE_F32), *lse = torc_zeros(TORC_SHAPE(1, 2, 3), TORC_DTYPE_F32);
    q = torc_to_device(q, d), k = torc_to_device(k, d), v = torc_to_device(v, d);
    o = torc_to_device(o, d), lse = torc_to_device(lse, d);
    ck_assert_msg(q && k && v && o && lse, "%s", torc_last_error());
    torc_op_call fwd = {.code = TORC_OP_ATTENTION, .n_in = 3, .n_out = 2, .in = {q, k, v}, .out = {o, lse}};
    fwd.params.attention.scale = 0.5;
    ck_assert_msg(torc_run_op(d, &fwd, TORC_RUN_NATIVE) == TORC_OK, "%s", torc_last_error());
    torc_tensor *dq = torc_zeros_like(q), *dk = torc_zeros_like(k), *dv = torc_zeros_like(v);
    torc_op_call bwd = {.code = TORC_OP_ATTENTION_BACKWARD, .n_in = 6, .n_out = 3, .in = {o, q, k, v, o, lse},
                        .out = {dq, dk, dv}};
    bwd.params = fwd.params;
    ck_assert_msg(torc_run_op(d, &bwd, TORC_RUN_NATIVE) == TORC_OK, "%s", torc_last_error());

    torc_op_call bad = fwd;
    bad.in[1] = torc_to_device(torc_zeros(TORC_SHAPE(1, 2, 5, 3), TORC_DTYPE_F32), d);
    assert_refused(d, &bad, TORC_ERR_SHAPE, "torc_run_op: op 'attention': in[1] has shape [1, 2, 5, 3]; the op needs "
                   "[1, 2, 5, 4]");
    bad = fwd, bad.in[2] = torc_to_device(torc_zeros(TORC_SHAPE(1, 2, 4, 6), TORC_DTYPE_F32), d);
    assert_refused(d, &bad, TORC_ERR_SHAPE, "op 'attention': in[2] has shape [1, 2, 4, 6]; the op needs [1, 2, 5, 6]");
    bad = fwd, bad.in[0] = torc_reshape(q, TORC_SHAPE(2, 3, 4));
    assert_refused(d, &bad, TORC_ERR_SHAPE, "op 'attention': in[0] has shape [2, 3, 4]; the op needs 4 dims");
    bad = fwd, bad.in[1] = torc_to_device(torc_zeros(TORC_SHAPE(2, 2, 5, 4), TORC_DTYPE_F32), d);  // B
    assert_refused(d, &bad, TORC_ERR_SHAPE, "op 'attention': in[1] has shape [2, 2, 5, 4]; the op needs [1, 2, 5, 4]");
    bad = fwd, bad.out[0] = torc_to_device(torc_zeros(TORC_SHAPE(1, 2, 3, 4), TORC_DTYPE_F32), d);
    assert_refused(d, &bad, TORC_ERR_SHAPE, "op 'attention': out[0] has shape [1, 2, 3, 4]; the op needs [1, 2, 3, 6]");
    bad = fwd, bad.out[1] = torc_to_device(torc_zeros(TORC_SHAPE(1, 2, 5), TORC_DTYPE_F32), d);
    assert_refused(d, &bad, TORC_ERR_SHAPE, "op 'attention': out[1] has shape [1, 2, 5]; the op needs [1, 2, 3]");
    bad = fwd, bad.params.attention.causal = 2;
    assert_refused(d, &bad, TORC_ERR_SHAPE, "op 'attention': params.attention.causal is 2 (0 or 1)");
    bad = fwd, bad.n_out = 1;
    assert_refused(d, &bad, TORC_ERR_INVALID_ARG, "op 'attention' takes 3 input(s) and 2 output(s) here, got 3 and 1");

    torc_op_call badb = bwd;
    badb.in[0] = torc_to_device(torc_zeros(TORC_SHAPE(1, 2, 3, 4), TORC_DTYPE_F32), d);  // do
    assert_refused(d, &badb, TORC_ERR_SHAPE, "op 'attention_backward': in[0] has shape [1, 2, 3, 4]; the op needs "
                   "[1, 2, 3, 6]");
    badb = bwd, badb.in[5] = torc_to_device(torc_zeros(TORC_SHAPE(1, 2, 5), TORC_DTYPE_F32), d);  // lse
    assert_refused(d, &badb, TORC_ERR_SHAPE, "op 'attention_backward': in[5] has shape [1, 2, 5]; the op needs [1, 2, 3]");
    badb = bwd, badb.out[0] = dk;
    assert_refused(d, &badb, TORC_ERR_SHAPE, "op 'attention_backward': out[0] has shape [1, 2, 5, 4]; the op needs "
                   "[1, 2, 3, 4]");
    badb = bwd, badb.out[1] = dq;
    assert_refused(d, &badb, TORC_ERR_SHAPE, "op 'attention_backward': out[1] has shape [1, 2, 3, 4]; the op needs "
                   "[1, 2, 5, 4]");
    badb = bwd, badb.out[2] = dk;
    assert_refused(d, &badb, TORC_ERR_SHAPE, "op 'attention_backward': out[2] has shape [1, 2, 5, 4]; the op needs "
                   "[1, 2, 5, 6]");
    badb = bwd, badb.in[4] = q;  // o
    assert_refused(d, &badb, TORC_ERR_SHAPE, "op 'attention_backward': in[4] has shape [1, 2, 3, 4]; the op needs "
                   "[1, 2, 3, 6]");
    torc_clear_error();
    torc_scope_pop();
}
END_TEST

int main(void) {
    Suite *s = suite_create("run_op");
    TCase *tc = tcase_create("run_op");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, runs_ops_on_each_host_backend);
    tcase_add_test(tc, two_outputs_come_back);
    tcase_add_test(tc, matmul_rounded_rounds_inputs_and_sum);
    tcase_add_test(tc, native_flag_refuses_what_the_backend_declines);
    tcase_add_test(tc, malformed_calls_are_refused_before_the_backend);
    tcase_add_test(tc, attention_shapes_are_checked);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
