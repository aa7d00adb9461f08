// tests/test_param_groups.c — torc_optimizer_new_decay_groups: nanoGPT's AdamW groups (2-D and up
// decay, biases and LayerNorm weights do not), names excluded by torc_decay_matrices_except, a
// predicate of the caller's, one group when the other would be empty, and the step they give.
#include "ck.h"
#include <math.h>

#include "testutil.h"
#include "torc/torc.h"

typedef struct model {
    torc_tensor *p[5];
    const char *names[5];
} model;

static model make_model(void) {
    model m = {{torc_randn(TORC_SHAPE(8, 4), TORC_DTYPE_F32, NULL), torc_randn(TORC_SHAPE(4), TORC_DTYPE_F32, NULL),
                torc_randn(TORC_SHAPE(4, 4), TORC_DTYPE_F32, NULL), torc_ones(TORC_SHAPE(4), TORC_DTYPE_F32),
                torc_randn(TORC_SHAPE(16, 4), TORC_DTYPE_F32, NULL)},
               {"fc.weight", "fc.bias", "proj.weight", "ln.weight", "wte.weight"}};
    for (int i = 0; i < 5; i++) ck_assert_int_eq(torc_set_requires_grad(m.p[i], true), TORC_OK);
    return m;
}

static double hparam(torc_optimizer *opt, int group, const char *name) {
    double v[TORC_OPTIM_HP_MAX_VALUES];
    ck_assert_int_eq(torc_optimizer_get_hparam(opt, group, name, v), TORC_OK);
    return v[0];
}

START_TEST(nanogpt_groups) {
    torc_scope_push();
    model m = make_model();
    int nd = -1;
    torc_optimizer *opt = torc_optimizer_new_decay_groups("adamw", 5, m.names, m.p, "lr=0.001 weight_decay=0.5", 0.1,
                                                          NULL, NULL, &nd);
    ck_assert_msg(opt != NULL, "%s", torc_last_error());
    ck_assert_int_eq(nd, 3);
    ck_assert_int_eq(torc_optimizer_num_groups(opt), 2);
    ck_assert_double_eq(hparam(opt, 0, "weight_decay"), 0.1);  // the group's replaces the hparams'
    ck_assert_double_eq(hparam(opt, 1, "weight_decay"), 0.0);
    ck_assert_double_eq(hparam(opt, 0, "lr"), 0.001);
    ck_assert_double_eq(hparam(opt, 1, "lr"), 0.001);
    // decayed first, then the others, each in the order given
    torc_tensor *order[5] = {m.p[0], m.p[2], m.p[4], m.p[1], m.p[3]};
    for (int i = 0; i < 5; i++) ck_assert_ptr_eq(torc_optimizer_param(opt, i), order[i]);
    // one step with zero gradients: decayed weights shrink by lr * wd, the others stay
    torc_tensor *before[5];
    for (int i = 0; i < 5; i++) {
        before[i] = torc_clone(m.p[i]);
        ck_assert_int_eq(torc_set_grad(m.p[i], torc_zeros_like(m.p[i])), TORC_OK);
    }
    ck_assert_int_eq(torc_optimizer_step(opt), TORC_OK);
    for (int i = 0; i < 5; i++) {
        const double f = m.p[i] == m.p[1] || m.p[i] == m.p[3] ? 1.0 : 1.0 - 0.001 * 0.1;
        double d;
        torc_tensor *want = torc_mul_scalar(before[i], torc_s(f));
        ck_assert_int_eq(torc_item(torc_amax(torc_abs(torc_sub(m.p[i], want)), TORC_ALL_DIMS, false), &d), TORC_OK);
        ck_assert_msg(d <= 1e-7, "%s moved by %g", m.names[i], d);
    }
    torc_optimizer_free(opt);
    torc_scope_pop();
}
END_TEST

static bool only_fc(const char *name, const torc_tensor *p, void *user) {
    (void)p, (void)user;
    return name && !strncmp(name, "fc.", 3);
}

START_TEST(names_and_predicates) {
    torc_scope_push();
    model m = make_model();
    const char *const skip[] = {"wte.weight", NULL};
    int nd = -1;
    torc_optimizer *opt = torc_optimizer_new_decay_groups("adamw", 5, m.names, m.p, NULL, 0.2,
                                                          torc_decay_matrices_except, (void *)skip, &nd);
    ck_assert_msg(opt != NULL, "%s", torc_last_error());
    ck_assert_int_eq(nd, 2);
    ck_assert_ptr_eq(torc_optimizer_param(opt, 2), m.p[1]);
    ck_assert_ptr_eq(torc_optimizer_param(opt, 4), m.p[4]);
    torc_optimizer_free(opt);
    opt = torc_optimizer_new_decay_groups("adamw", 5, m.names, m.p, "", 0.2, only_fc, NULL, &nd);
    ck_assert_int_eq(nd, 2);
    ck_assert_ptr_eq(torc_optimizer_param(opt, 1), m.p[1]);
    torc_optimizer_free(opt);
    // every parameter a vector: one group, without decay; no names: the rule needs none
    torc_tensor *vecs[2] = {m.p[1], m.p[3]};
    opt = torc_optimizer_new_decay_groups("adamw", 2, NULL, vecs, NULL, 0.2, NULL, NULL, &nd);
    ck_assert_int_eq(nd, 0);
    ck_assert_int_eq(torc_optimizer_num_groups(opt), 1);
    ck_assert_double_eq(hparam(opt, 0, "weight_decay"), 0.0);
    torc_optimizer_free(opt);
    ck_assert_ptr_null(torc_optimizer_new_decay_groups("adamw", 0, NULL, NULL, NULL, 0.1, NULL, NULL, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "optimizer got an empty parameter list");
    torc_clear_error();
    ck_assert_ptr_null(torc_optimizer_new_decay_groups("adamw", 5, m.names, m.p, "bogus=1", 0.1, NULL, NULL, NULL));
    ck_assert_int_eq(torc_last_status(), TORC_ERR_INVALID_ARG);
    torc_clear_error();
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("param_groups");
    TCase *tc = tcase_create("param_groups");
    tcase_add_test(tc, nanogpt_groups);
    tcase_add_test(tc, names_and_predicates);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
