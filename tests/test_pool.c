// tests/test_pool.c — the per-thread pools of tensor headers, storage, autograd nodes and small
// buffers (core/tensor.c): accounting stays exact, and tensors may die on another thread.
#include <pthread.h>

#include "testutil.h"

static uint64_t activation_in_use(void) {
    torc_memory_stats st;
    ck_assert_int_eq(torc_memory_stats_get(torc_default_device(), &st), TORC_OK);
    return st.in_use[TORC_MEM_ACTIVATION];
}

START_TEST(pooled_buffers_are_not_counted_in_use) {
    const uint64_t base = activation_in_use();
    for (int i = 0; i < 3; i++) {  // the second and third rounds reuse pooled memory
        torc_tensor *a = torc_full(TORC_SHAPE(4, 4), 1.5, TORC_DTYPE_F32);
        torc_tensor *b = torc_full(TORC_SHAPE(3), 2.0, TORC_DTYPE_F64);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_uint_eq(activation_in_use(), base + 64 + 24);
        torc_tensor *c = torc_add(a, a);
        ck_assert_uint_eq(activation_in_use(), base + 64 + 24 + 64);
        tu_assert_values(c, TU_ARR(3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3), 0);
        torc_release(c);
        torc_release(b);
        torc_release(a);
        ck_assert_uint_eq(activation_in_use(), base);
    }
}
END_TEST

START_TEST(views_keep_pooled_storage_alive) {
    torc_tensor *a = torc_full(TORC_SHAPE(2, 3), 4.0, TORC_DTYPE_F32);
    torc_tensor *v = torc_transpose(a, 0, 1);
    ck_assert_ptr_nonnull(v);
    torc_release(a);  // the header goes back to the pool; the storage lives on in v
    torc_tensor *other = torc_full(TORC_SHAPE(2, 3), -1.0, TORC_DTYPE_F32);  // may reuse a's header
    tu_assert_values(v, TU_ARR(4, 4, 4, 4, 4, 4), 0);
    torc_release(other);
    torc_release(v);
}
END_TEST

// Tensors (with autograd history) made on one thread, released on another, while a third thread
// churns its own pools and exits (its pools are freed then).
typedef struct made { torc_tensor *x, *y; } made;

static void *make_on_thread(void *arg) {
    made *m = arg;
    m->x = torc_full(TORC_SHAPE(4), 3.0, TORC_DTYPE_F32);
    torc_set_requires_grad(m->x, true);
    m->y = torc_mul(m->x, m->x);
    return NULL;
}

static void *churn(void *arg) {
    (void)arg;
    for (int i = 0; i < 500; i++) {
        torc_scope_push();
        torc_tensor *t = torc_full(TORC_SHAPE(8), (double)i, TORC_DTYPE_F32);
        torc_set_requires_grad(t, true);
        torc_tensor *s = torc_sum(torc_mul(t, t), TORC_ALL_DIMS, false);
        if (!s || torc_backward(s, NULL, false) != TORC_OK) {
            torc_scope_pop();
            return (void *)1;
        }
        torc_scope_pop();
    }
    return NULL;
}

START_TEST(tensors_die_on_another_thread) {
    const uint64_t base = activation_in_use();
    made m = {0};
    pthread_t a, b;
    ck_assert_int_eq(pthread_create(&a, NULL, make_on_thread, &m), 0);
    ck_assert_int_eq(pthread_join(a, NULL), 0);
    ck_assert_ptr_nonnull(m.y);
    void *rc = (void *)2;
    ck_assert_int_eq(pthread_create(&b, NULL, churn, NULL), 0);
    ck_assert_int_eq(pthread_join(b, &rc), 0);
    ck_assert_ptr_null(rc);
    torc_scope_push();
    ck_assert_int_eq(torc_backward(torc_sum(m.y, TORC_ALL_DIMS, false), NULL, false), TORC_OK);
    tu_assert_values(torc_grad(m.x), TU_ARR(6, 6, 6, 6), 0);
    torc_scope_pop();
    torc_release(m.y);
    torc_release(m.x);
    ck_assert_int_eq(pthread_create(&b, NULL, churn, NULL), 0);
    ck_assert_int_eq(pthread_join(b, &rc), 0);
    ck_assert_ptr_null(rc);
    ck_assert_uint_eq(activation_in_use(), base);
}
END_TEST

int main(void) {
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, pooled_buffers_are_not_counted_in_use);
    tcase_add_test(tc, views_keep_pooled_storage_alive);
    tcase_add_test(tc, tensors_die_on_another_thread);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    const int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
