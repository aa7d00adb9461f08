// tests/test_lr_schedule.c — torc_lr_cosine_warmup is nanoGPT's get_lr bit for bit (the table of
// tests/golden/nn_ops.txt is Python's double arithmetic on nanoGPT's formula), its edges, its errors.
#include "ck.h"
#include <math.h>

#include "nngolden.h"
#include "testutil.h"
#include "torc/torc.h"

START_TEST(matches_nanogpt_bit_for_bit) {
    ng_file *f = ng_load("nn_ops.txt");
    const char *const names[] = {"lr_nanogpt", "lr_small", "lr_no_warmup"};
    for (int k = 0; k < 3; k++) {
        const ng_case *c = ng_find(f, names[k]);
        const ng_tensor *steps = ng_get(c, "steps"), *lr = ng_get(c, "lr");
        ck_assert_int_eq(steps->n, lr->n);
        for (int64_t i = 0; i < steps->n; i++) {
            const double got = torc_lr_cosine_warmup((int64_t)steps->v[i], ng_param(c, "max_lr", 0),
                                                     ng_param(c, "min_lr", 0), (int64_t)ng_param(c, "warmup_steps", 0),
                                                     (int64_t)ng_param(c, "max_steps", 0));
            ck_assert_msg(got == lr->v[i], "%s: step %lld: %.17g, nanoGPT %.17g", names[k], (long long)steps->v[i], got,
                          lr->v[i]);
        }
    }
    ng_free(f);
}
END_TEST

START_TEST(edges_and_errors) {
    // warmup reaches max_lr * warmup / (warmup + 1) at its last step, max_lr at the first decay step
    ck_assert_double_eq(torc_lr_cosine_warmup(9, 1.0, 0.1, 10, 100), 10.0 / 11.0);
    ck_assert_double_eq(torc_lr_cosine_warmup(10, 1.0, 0.1, 10, 100), 1.0);
    ck_assert_double_eq(torc_lr_cosine_warmup(100, 1.0, 0.1, 10, 100), 0.1);
    ck_assert_double_eq(torc_lr_cosine_warmup(1000, 1.0, 0.1, 10, 100), 0.1);
    // nothing to decay over: the floor from warmup_steps on
    ck_assert_double_eq(torc_lr_cosine_warmup(10, 1.0, 0.1, 10, 10), 0.1);
    ck_assert_double_eq(torc_lr_cosine_warmup(3, 1.0, 0.1, 10, 5), 4.0 / 11.0);
    torc_clear_error();
    ck_assert(isnan(torc_lr_cosine_warmup(-1, 1.0, 0.1, 10, 100)));
    tu_assert_error(TORC_ERR_INVALID_ARG, "must be >= 0");
    torc_clear_error();
    ck_assert(isnan(torc_lr_cosine_warmup(0, 1.0, 0.1, -1, 100)));
    tu_assert_error(TORC_ERR_INVALID_ARG, "must be >= 0");
    torc_clear_error();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("lr_schedule");
    TCase *tc = tcase_create("lr_schedule");
    tcase_add_test(tc, matches_nanogpt_bit_for_bit);
    tcase_add_test(tc, edges_and_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
