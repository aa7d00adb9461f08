// tests/test_op_trace.c — op tracing (torc_op_trace_start / _stop / _count, core/dispatch.c):
// each op dispatched while it is on is counted by (opcode, first input's dtype, output's dtype,
// declined), and the seconds each opcode spent in run() (torc_op_trace_seconds); off, nothing is
// counted; start zeroes the counts and stop keeps them; ops from
// several threads all count; on the fake device backend (declines every op) the ops count as
// declined. Check runs each test in a process of its own, so each starts with tracing off.
#define _GNU_SOURCE  // setenv
#include <pthread.h>
#include <stdlib.h>

#include "testutil.h"

static torc_device *on_reference(void) {
    torc_device *ref = torc_device_get("reference");
    ck_assert_msg(ref != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_set_default_device(ref), TORC_OK);
    return ref;
}

static torc_tensor *ok(torc_tensor *t) {
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

START_TEST(counts_by_op_and_dtypes) {
    on_reference();
    torc_op_trace_start();
    torc_tensor *a = ok(torc_randn(2, (int64_t[]){3, 4}, TORC_DTYPE_F32, NULL));
    torc_tensor *b = ok(torc_add(a, a));
    torc_tensor *c = ok(torc_add(b, a));
    torc_tensor *d = ok(torc_to_dtype(c, TORC_DTYPE_F64));
    torc_op_trace_stop();
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADD, TORC_DTYPE_F32, TORC_DTYPE_F32, 0), 2);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADD, -1, -1, -1), 2);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADD, TORC_DTYPE_F64, -1, -1), 0);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADD, -1, -1, 1), 0);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_RAND_NORMAL, -2, TORC_DTYPE_F32, 0), 1);  // no inputs
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_RAND_NORMAL, TORC_DTYPE_F32, -1, -1), 0);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_COPY, TORC_DTYPE_F32, TORC_DTYPE_F64, 0), 1);
    ck_assert_uint_eq(torc_op_trace_count(-1, -1, -1, -1), 4);
    ck_assert_uint_eq(torc_op_trace_count(-1, -1, -1, 1), 0);  // the reference takes everything
    // Stopped: counts kept, new ops not counted.
    torc_tensor *e = ok(torc_add(a, a));
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADD, -1, -1, -1), 2);
    // A new start zeroes them.
    torc_op_trace_start();
    ck_assert_uint_eq(torc_op_trace_count(-1, -1, -1, -1), 0);
    torc_tensor *at = ok(torc_transpose(a, 0, 1));  // a view: no op
    torc_tensor *f = ok(torc_matmul(a, at));
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_MATMUL, TORC_DTYPE_F32, TORC_DTYPE_F32, 0), 1);
    torc_op_trace_stop();
    torc_release(f);
    torc_release(at);
    torc_release(e);
    torc_release(d);
    torc_release(c);
    torc_release(b);
    torc_release(a);
}
END_TEST

START_TEST(off_counts_nothing) {
    on_reference();
    torc_tensor *a = ok(torc_ones(1, (int64_t[]){5}, TORC_DTYPE_F32));
    torc_tensor *b = ok(torc_add(a, a));
    ck_assert_uint_eq(torc_op_trace_count(-1, -1, -1, -1), 0);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_COUNT + 5, -7, 99, 3), 0);  // out of range: no match
    torc_release(b);
    torc_release(a);
}
END_TEST

static torc_tensor *g_x;
static void *adds(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) torc_release(torc_add(g_x, g_x));
    return NULL;
}

START_TEST(threads_all_count) {
    on_reference();
    g_x = ok(torc_ones(1, (int64_t[]){4}, TORC_DTYPE_F32));
    torc_op_trace_start();
    pthread_t t[4];
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, adds, NULL), 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    torc_op_trace_stop();
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_ADD, TORC_DTYPE_F32, TORC_DTYPE_F32, 0), 400);
    torc_release(g_x);
}
END_TEST

// The fake device backend declines every op; TORC_DEVICE_FALLBACK=1 runs them on the host.
START_TEST(declined_on_a_device_backend) {
    setenv("TORC_DEVICE_FALLBACK", "1", 1);
    setenv("TORC_PLUGIN_PATH", getenv("TORC_TEST_PLUGIN_DIR"), 1);
    torc_device *dev = torc_device_get("fakedev");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_set_default_device(dev), TORC_OK);
    torc_op_trace_start();
    torc_tensor *a = ok(torc_randn(1, (int64_t[]){6}, TORC_DTYPE_F32, NULL));
    torc_tensor *b = ok(torc_mul(a, a));
    torc_op_trace_stop();
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_RAND_NORMAL, -2, TORC_DTYPE_F32, 1), 1);
    ck_assert_uint_eq(torc_op_trace_count(TORC_OP_MUL, TORC_DTYPE_F32, TORC_DTYPE_F32, 1), 1);
    ck_assert_uint_eq(torc_op_trace_count(-1, -1, -1, 0), 0);
    ck_assert_uint_eq(torc_fallback_count(TORC_OP_MUL), 1);
    torc_release(b);
    torc_release(a);
}
END_TEST

// Seconds in run(): a matmul's time goes to its opcode, nothing to ops not run, the total covers
// every op; start zeroes them, and no time is added while tracing is off.
START_TEST(seconds_by_op) {
    on_reference();
    torc_tensor *a = ok(torc_randn(2, (int64_t[]){256, 256}, TORC_DTYPE_F32, NULL));
    torc_op_trace_start();
    torc_tensor *m = ok(torc_matmul(a, a));
    torc_tensor *s = ok(torc_add(a, a));
    torc_op_trace_stop();
    const double mm = torc_op_trace_seconds(TORC_OP_MATMUL), add = torc_op_trace_seconds(TORC_OP_ADD);
    ck_assert_msg(mm > 0 && add > 0, "matmul %g s, add %g s", mm, add);
    ck_assert(mm < 60);
    ck_assert(torc_op_trace_seconds(TORC_OP_SOFTMAX) == 0);
    ck_assert(torc_op_trace_seconds(TORC_OP_COUNT + 3) == 0);  // out of range: nothing
    ck_assert_double_eq_tol(torc_op_trace_seconds(-1), mm + add, 1e-9);
    torc_release(ok(torc_matmul(a, a)));  // stopped: not timed
    ck_assert(torc_op_trace_seconds(TORC_OP_MATMUL) == mm);
    torc_op_trace_start();
    ck_assert(torc_op_trace_seconds(-1) == 0);
    torc_op_trace_stop();
    torc_release(s);
    torc_release(m);
    torc_release(a);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("op_trace");
    TCase *tc = tcase_create("op_trace");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, counts_by_op_and_dtypes);
    tcase_add_test(tc, off_counts_nothing);
    tcase_add_test(tc, threads_all_count);
    tcase_add_test(tc, declined_on_a_device_backend);
    tcase_add_test(tc, seconds_by_op);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
