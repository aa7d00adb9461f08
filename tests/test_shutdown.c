// tests/test_shutdown.c — the end of a process: backend.h's shutdown contract (no call on a
// backend after its shutdown, the per-thread pools drained before it, from several threads) and
// exit handlers that never block (a plugin's constructor, its run, or a thread of oneDNN's that
// calls exit() must end the process with that status). The backends are tests/plugins/
// strict_backend.c's, found through TORC_PLUGIN_PATH; each test runs in its own process (Check's
// fork mode), exit tests with a time limit, so a hang fails instead of stalling the suite.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include "testutil.h"

// ---- the strict backend: aborts on any call after its shutdown ----
#define N_THREADS 4

static torc_device *strict_device(void) {
    torc_device *dev = torc_device_get("strict");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    return dev;
}

static long live_at_shutdown(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/libtorc_strict.so", getenv("TORC_TEST_PLUGIN_DIR"));
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);  // the copy torc loaded
    ck_assert_msg(h != NULL, "%s", dlerror());
    long (*fn)(void) = (long (*)(void))dlsym(h, "strict_backend_live_at_shutdown");
    ck_assert_ptr_nonnull(fn);
    const long n = fn();
    dlclose(h);
    return n;
}

// Small tensors of several sizes made and released, with an op each (run by the reference on the
// strict backend's memory): afterwards the thread's pool holds buffers of several size classes.
static void churn(torc_device *dev) {
    torc_set_default_device(dev);
    for (int i = 0; i < 50; i++) {
        torc_scope_push();
        const int64_t n = 1 + (i * 37) % 200;  // 4..800 bytes of f32: most of the pooled classes
        torc_tensor *a = torc_ones(TORC_SHAPE(n), TORC_DTYPE_F32);
        torc_tensor *b = torc_add(a, a);
        ck_assert_msg(b != NULL, "%s", torc_last_error());
        torc_scope_pop();
    }
}

typedef struct worker {
    pthread_t id;
    pthread_barrier_t *ready, *after;  // ready: pools filled; after: torc_shutdown has run
    bool hold;                         // keep a tensor across shutdown, release it after
} worker;

static void *work(void *arg) {
    worker *w = arg;
    torc_device *dev = torc_device_get("strict");
    if (!dev) return (void *)"no device";
    churn(dev);
    torc_tensor *kept = w->hold ? torc_zeros(TORC_SHAPE(8), TORC_DTYPE_I64) : NULL;
    pthread_barrier_wait(w->ready);
    pthread_barrier_wait(w->after);
    torc_release(kept);  // after shutdown: dropped, not handed to the backend
    return NULL;         // the thread's pool is destroyed now: nothing may reach the backend
}

static void run_workers(bool hold) {
    torc_device *dev = strict_device();
    pthread_barrier_t ready, after;
    pthread_barrier_init(&ready, NULL, N_THREADS + 1);
    pthread_barrier_init(&after, NULL, N_THREADS + 1);
    worker w[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        w[i] = (worker){.ready = &ready, .after = &after, .hold = hold};
        ck_assert_int_eq(pthread_create(&w[i].id, NULL, work, &w[i]), 0);
    }
    churn(dev);
    torc_tensor *kept = hold ? torc_zeros(TORC_SHAPE(8), TORC_DTYPE_I64) : NULL;
    pthread_barrier_wait(&ready);
    torc_shutdown();
    pthread_barrier_wait(&after);
    for (int i = 0; i < N_THREADS; i++) {
        void *err;
        pthread_join(w[i].id, &err);
        ck_assert_msg(err == NULL, "worker %d: %s", i, (const char *)err);
    }
    torc_release(kept);
    // Every pooled buffer went back before shutdown: what it found allocated is exactly what
    // live tensors held.
    ck_assert_int_eq(live_at_shutdown(), (hold ? N_THREADS + 1 : 0));
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&after);
}

START_TEST(threads_exit_after_shutdown_without_calling_the_backend) { run_workers(false); }
END_TEST

START_TEST(tensors_released_after_shutdown_are_dropped) { run_workers(true); }
END_TEST

START_TEST(allocating_after_shutdown_is_an_error) {
    torc_device *dev = strict_device();
    churn(dev);
    torc_shutdown();
    ck_assert_ptr_null(torc_zeros(TORC_SHAPE(4), TORC_DTYPE_F32));
    tu_assert_error(TORC_ERR_BACKEND, "has been shut down");
    torc_shutdown();  // twice is harmless (the exit handler runs it again)
}
END_TEST

// ---- exit() inside a plugin ends the process with its status ----
START_TEST(exit_in_a_plugin_constructor) {
    ck_assert_ptr_nonnull(torc_device_get("reference"));  // a backend loaded: the exit handler is armed
    torc_backend_load("exitctor", NULL);                   // its constructor: exit(3), under torc's lock
    ck_abort_msg("the plugin's constructor returned");
}
END_TEST

START_TEST(exit_in_a_backend_op) {
    torc_device *dev = torc_device_get("exitop");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    torc_set_default_device(dev);
    torc_release(torc_empty(TORC_SHAPE(16), TORC_DTYPE_F32));  // a pooled buffer of exitop's
    torc_tensor *t = torc_empty(TORC_SHAPE(16), TORC_DTYPE_I64);
    ck_assert_ptr_nonnull(t);
    torc_fill_(t, torc_s(1));  // run(): exit(3) holding the lock its free() and shutdown() take
    ck_abort_msg("exitop's run returned");
}
END_TEST

#ifdef TORC_TEST_ONEDNN
// The oneDNN backend: dnnl_stream_wait, which its synchronize() calls holding the backend's lock,
// replaced by this executable's (exported, so it comes first in the lookup), calls exit(3) here or
// on a new thread while this one waits in it (as a worker of libgomp's would).
enum { WAIT_REAL, WAIT_EXIT_HERE, WAIT_EXIT_ELSEWHERE };
static int g_wait_mode = WAIT_REAL;

static void *exit_3(void *arg) {
    (void)arg;
    exit(3);
}

TORC_API int dnnl_stream_wait(void *stream);
int dnnl_stream_wait(void *stream) {
    if (g_wait_mode == WAIT_EXIT_HERE) exit(3);
    if (g_wait_mode == WAIT_EXIT_ELSEWHERE) {
        pthread_t t;
        if (pthread_create(&t, NULL, exit_3, NULL) == 0)
            for (;;) pause();
        abort();
    }
    int (*real)(void *) = (int (*)(void *))dlsym(RTLD_NEXT, "dnnl_stream_wait");
    return real ? real(stream) : 0;  // (CPU streams are synchronous: nothing to wait for)
}

// The process exits with these alive: held in statics, LeakSanitizer counts them as reachable.
static torc_tensor *volatile g_a, *volatile g_aa;  // volatile: never read, the stores must stay

static void onednn_exit(int mode) {
    torc_device *dev = torc_device_get("onednn");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    torc_set_default_device(dev);
    g_a = torc_ones(TORC_SHAPE(64, 64), TORC_DTYPE_F32);
    ck_assert_ptr_nonnull(g_aa = torc_matmul(g_a, g_a));
    g_wait_mode = mode;
    torc_device_synchronize(dev);
    ck_abort_msg("synchronize returned");
}

START_TEST(exit_in_onednn_holding_its_lock) { onednn_exit(WAIT_EXIT_HERE); }
END_TEST

START_TEST(exit_on_another_thread_while_onednn_holds_its_lock) { onednn_exit(WAIT_EXIT_ELSEWHERE); }
END_TEST
#endif

static Suite *make_suite(void) {
    Suite *s = suite_create("shutdown");
    TCase *tc = tcase_create("contract");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, threads_exit_after_shutdown_without_calling_the_backend);
    tcase_add_test(tc, tensors_released_after_shutdown_are_dropped);
    tcase_add_test(tc, allocating_after_shutdown_is_an_error);
    suite_add_tcase(s, tc);
    TCase *ex = tcase_create("exit");
    tcase_set_timeout(ex, 20);  // a hang in an exit handler fails here
    tcase_add_exit_test(ex, exit_in_a_plugin_constructor, 3);
    tcase_add_exit_test(ex, exit_in_a_backend_op, 3);
#ifdef TORC_TEST_ONEDNN
    tcase_add_exit_test(ex, exit_in_onednn_holding_its_lock, 3);
    tcase_add_exit_test(ex, exit_on_another_thread_while_onednn_holds_its_lock, 3);
#endif
    suite_add_tcase(s, ex);
    return s;
}

int main(void) {
    // Every test is a process of its own: shutdown and exit are process-wide.
    if (getenv("CK_FORK") && !strcmp(getenv("CK_FORK"), "no")) {
        fprintf(stderr, "test_shutdown needs Check's fork mode (CK_FORK=no is set)\n");
        return 77;
    }
    return tu_run(make_suite());
}
