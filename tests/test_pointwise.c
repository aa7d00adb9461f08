// tests/test_pointwise.c — the fused pointwise ops addcmul, addcdiv and lerp against PyTorch goldens
// (tests/golden/ops_pointwise.txt, bit for bit), their grad_fn names, one backend op per call, errors.
#include "opsgolden.h"

#define FILE_ "ops_pointwise.txt"

static torc_tensor *run_addcmul(const og_case *c, torc_tensor **in) { return torc_addcmul(in[0], in[1], in[2], c->sc[0]); }
static torc_tensor *run_addcdiv(const og_case *c, torc_tensor **in) { return torc_addcdiv(in[0], in[1], in[2], c->sc[0]); }
static torc_tensor *run_lerp(const og_case *c, torc_tensor **in) { return torc_lerp(in[0], in[1], c->sc[0]); }
static torc_status run_addcmul_(const og_case *c, torc_tensor *self, torc_tensor **in) {
    return torc_addcmul_(self, in[1], in[2], c->sc[0]);
}
static torc_status run_addcdiv_(const og_case *c, torc_tensor *self, torc_tensor **in) {
    return torc_addcdiv_(self, in[1], in[2], c->sc[0]);
}
static torc_status run_lerp_(const og_case *c, torc_tensor *self, torc_tensor **in) {
    return torc_lerp_(self, in[1], c->sc[0]);
}

// Bit for bit, the rounding cases included: PyTorch's fma and step order are the contract.
START_TEST(addcmul_matches_pytorch) { og_run_cases(FILE_, "addcmul", run_addcmul, OG_EXACT); }
END_TEST
START_TEST(addcdiv_matches_pytorch) { og_run_cases(FILE_, "addcdiv", run_addcdiv, OG_EXACT); }
END_TEST
START_TEST(lerp_matches_pytorch) { og_run_cases(FILE_, "lerp", run_lerp, OG_EXACT); }
END_TEST
START_TEST(inplace_forms_match_pytorch) {
    og_run_inplace_cases(FILE_, "addcmul_", run_addcmul_, OG_EXACT);
    og_run_inplace_cases(FILE_, "addcdiv_", run_addcdiv_, OG_EXACT);
    og_run_inplace_cases(FILE_, "lerp_", run_lerp_, OG_EXACT);
}
END_TEST

// ---- rules ----
static torc_tensor *leaf(double a, double b, double c) {
    torc_tensor *t = torc_tensor_from((double[]){a, b, c}, TORC_SHAPE(3), TORC_DTYPE_F64);
    ck_assert_int_eq(torc_set_requires_grad(t, true), TORC_OK);
    return t;
}

START_TEST(grad_fn_names_are_pytorchs) {
    torc_scope_push();
    torc_tensor *x = leaf(1, 2, 3), *y = leaf(0.5, 0.25, 2), *z = leaf(4, 5, 6);
    ck_assert_str_eq(torc_grad_fn_name(torc_addcmul(x, y, z, torc_s(2))), "AddcmulBackward0");
    ck_assert_str_eq(torc_grad_fn_name(torc_addcdiv(x, y, z, torc_s(2))), "AddcdivBackward0");
    ck_assert_str_eq(torc_grad_fn_name(torc_lerp(x, y, torc_s(0.25))), "LerpBackward0");
    torc_tensor *t = torc_mul_scalar(x, torc_s(1));
    ck_assert_int_eq(torc_addcmul_(t, y, z, torc_s(1)), TORC_OK);
    ck_assert_str_eq(torc_grad_fn_name(t), "AddcmulBackward0");
    ck_assert_int_eq(torc_addcdiv_(t, y, z, torc_s(1)), TORC_OK);
    ck_assert_str_eq(torc_grad_fn_name(t), "AddcdivBackward0");
    ck_assert_int_eq(torc_lerp_(t, y, torc_s(0.75)), TORC_OK);
    ck_assert_str_eq(torc_grad_fn_name(t), "LerpBackward0");
    // t = lerp(addcdiv(addcmul(x, y, z), y, z), y, 0.75): dt/dx = 0.25, dt/dy = 0.25 * (z + 1/z) + 0.75
    ck_assert_int_eq(torc_backward(torc_sum(t, TORC_ALL_DIMS, false), NULL, false), TORC_OK);
    tu_assert_values(torc_grad(x), TU_ARR(0.25, 0.25, 0.25), 0);
    tu_assert_values(torc_grad(y), TU_ARR(0.25 * 4.25 + 0.75, 0.25 * 5.2 + 0.75, 0.25 * (6 + 1.0 / 6) + 0.75), 1e-6);
    torc_scope_pop();
}
END_TEST

// Each call is one backend op: its FLOPs are counted under the fused opcode, nothing else ran.
START_TEST(each_call_is_one_op) {
    torc_scope_push();
    torc_tensor *p = torc_ones(TORC_SHAPE(4, 5), TORC_DTYPE_F32), *a = torc_full(TORC_SHAPE(4, 5), 2, TORC_DTYPE_F32);
    const torc_opcode codes[] = {TORC_OP_ADDCMUL, TORC_OP_ADDCDIV, TORC_OP_LERP};
    for (int k = 0; k < 3; k++) {
        torc_flops_reset();
        torc_status st = k == 0 ? torc_addcmul_(p, a, a, torc_s(0.5))
                       : k == 1 ? torc_addcdiv_(p, a, a, torc_s(0.5))
                                : torc_lerp_(p, a, torc_s(0.5));
        ck_assert_int_eq(st, TORC_OK);
        ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, codes[k], TORC_DTYPE_F32), 3 * 20);
        for (int c = 0; c < TORC_OP_COUNT; c++)
            if (c != (int)codes[k]) ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, c, TORC_DTYPE_F32), 0);
    }
    tu_assert_values(torc_select(torc_select(p, 0, 0), 0, 0), TU_ARR(2.75), 0);  // 1 + 2 = 3, + 0.5 = 3.5, lerp w 0.5 toward 2
    torc_scope_pop();
}
END_TEST

START_TEST(errors_are_pytorchs) {
    torc_scope_push();
    torc_tensor *f = torc_ones(TORC_SHAPE(3), TORC_DTYPE_F64);
    torc_tensor *e4 = torc_to_dtype(f, TORC_DTYPE_F8_E4M3FN);
    ck_assert_ptr_null(torc_addcmul(e4, e4, e4, torc_s(1)));
    tu_assert_error(TORC_ERR_DTYPE, "\"addcmul_cpu_out\" not implemented for 'Float8_e4m3fn'");
    ck_assert_ptr_null(torc_addcdiv(e4, e4, e4, torc_s(1)));
    tu_assert_error(TORC_ERR_DTYPE, "\"addcdiv_cpu_out\" not implemented for 'Float8_e4m3fn'");
    ck_assert_ptr_null(torc_lerp(e4, e4, torc_s(0.5)));
    tu_assert_error(TORC_ERR_DTYPE, "\"lerp_kernel_scalar\" not implemented for 'Float8_e4m3fn'");
    ck_assert_ptr_null(torc_addcmul(f, e4, f, torc_s(1)));  // torc never promotes fp8
    ck_assert_int_eq(torc_last_status(), TORC_ERR_DTYPE);
    torc_clear_error();  // a NULL argument keeps an error already set
    ck_assert_ptr_null(torc_addcmul(f, NULL, f, torc_s(1)));
    tu_assert_error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    ck_assert_int_eq(torc_lerp_(NULL, f, torc_s(1)), TORC_ERR_INVALID_ARG);
    // a leaf that requires grad cannot be written in place
    torc_tensor *x = leaf(1, 2, 3);
    ck_assert_int_eq(torc_lerp_(x, f, torc_s(0.5)), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "a leaf Variable that requires grad is being used in an in-place operation.");
    // partial overlap between self and an input
    torc_tensor *v = torc_arange(0, 4, 1, TORC_DTYPE_F32);
    ck_assert_int_eq(torc_lerp_(torc_slice(v, 0, 1, 4, 1), torc_slice(v, 0, 0, 3, 1), torc_s(0.3)), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "unsupported operation: some elements of the input tensor and the written-to "
                                          "tensor refer to a single memory location.");
    tu_assert_values(v, TU_ARR(0, 1, 2, 3), 0);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("pointwise");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, addcmul_matches_pytorch);
    tcase_add_test(tc, addcdiv_matches_pytorch);
    tcase_add_test(tc, lerp_matches_pytorch);
    tcase_add_test(tc, inplace_forms_match_pytorch);
    suite_add_tcase(s, tc);
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, grad_fn_names_are_pytorchs);
    tcase_add_test(rules, each_call_is_one_op);
    tcase_add_test(rules, errors_are_pytorchs);
    suite_add_tcase(s, rules);
    return s;
}

int main(void) { return tu_run(make_suite()); }
