// tests/test_plugin_error.c — torc/plugin_error.h, the per-thread error text plugins give
// last_error(): each thread reads its own text, a thread's slot goes back to the pool when it
// exits, threads beyond the pool share its last slot, texts are truncated to fit and may quote the
// previous one, and setting one never allocates: the reference backend (which uses it) reports an
// error on a fresh thread whose every malloc fails.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>

#include "testutil.h"
#include "torc/backend.h"

#define TORC_PLUGIN_ERROR_SLOTS 64  // a small pool, to run out of it
#include "torc/plugin_error.h"

TORC_PLUGIN_ERROR_DEFINE(probe)

static const char *shared_slot(void) { return probe_errors_.slot[TORC_PLUGIN_ERROR_SLOTS].text; }

// ---- texts per thread ----
static void *set_and_read(void *arg) {
    const int i = (int)(intptr_t)arg;
    ck_assert_str_eq(probe_last_error(NULL), "");  // a new thread has no text yet
    ck_assert_int_eq(probe_error(TORC_ERR_INDEX, "worker %d failed", i), TORC_ERR_INDEX);
    char want[64];
    snprintf(want, sizeof want, "worker %d failed", i);
    ck_assert_str_eq(probe_last_error(NULL), want);
    return (void *)(intptr_t)(probe_last_error(NULL) != shared_slot());  // 1: a slot of its own
}

START_TEST(each_thread_reads_its_own_text) {
    probe_error(TORC_ERR_OOM, "main: %s", "out of memory");
    pthread_t t[8];
    for (int i = 0; i < 8; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, set_and_read, (void *)(intptr_t)i), 0);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    ck_assert_str_eq(probe_last_error(NULL), "main: out of memory");
}
END_TEST

START_TEST(texts_are_truncated_and_may_quote_the_last_one) {
    char long_text[2 * TORC_PLUGIN_ERROR_LEN];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    probe_error(1, "%s", long_text);
    ck_assert_uint_eq(strlen(probe_last_error(NULL)), TORC_PLUGIN_ERROR_LEN - 1);
    probe_error(1, "inner");
    probe_error(1, "outer: %s", probe_last_error(NULL));
    ck_assert_str_eq(probe_last_error(NULL), "outer: inner");
}
END_TEST

// Four times as many threads as slots, one after another: each gets a slot of its own because
// the last one's went back when it exited.
START_TEST(a_thread_gives_its_slot_back_when_it_exits) {
    for (int i = 0; i < 4 * TORC_PLUGIN_ERROR_SLOTS; i++) {
        pthread_t t;
        void *own;
        ck_assert_int_eq(pthread_create(&t, NULL, set_and_read, (void *)(intptr_t)i), 0);
        pthread_join(t, &own);
        ck_assert_msg(own == (void *)1, "thread %d got the shared slot", i);
    }
}
END_TEST

// ---- more threads than slots ----
static pthread_barrier_t g_hold;

static void *hold_a_slot(void *arg) {
    probe_error(1, "holder %d", (int)(intptr_t)arg);
    void *own = (void *)(intptr_t)(probe_last_error(NULL) != shared_slot());
    pthread_barrier_wait(&g_hold);  // every slot is taken
    pthread_barrier_wait(&g_hold);  // the overflow thread has run
    return own;
}

START_TEST(threads_beyond_the_pool_share_its_last_slot) {
    pthread_t t[TORC_PLUGIN_ERROR_SLOTS];
    pthread_barrier_init(&g_hold, NULL, TORC_PLUGIN_ERROR_SLOTS + 1);
    for (int i = 0; i < TORC_PLUGIN_ERROR_SLOTS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, hold_a_slot, (void *)(intptr_t)i), 0);
    pthread_barrier_wait(&g_hold);
    pthread_t extra;
    void *own;
    ck_assert_int_eq(pthread_create(&extra, NULL, set_and_read, (void *)(intptr_t)999), 0);
    pthread_join(extra, &own);
    ck_assert_msg(own == (void *)0, "a thread beyond the pool got a slot of its own");
    ck_assert_str_eq(shared_slot(), "worker 999 failed");
    pthread_barrier_wait(&g_hold);
    for (int i = 0; i < TORC_PLUGIN_ERROR_SLOTS; i++) {
        pthread_join(t[i], &own);
        ck_assert_msg(own == (void *)1, "holder %d got the shared slot", i);
    }
    pthread_barrier_destroy(&g_hold);
}
END_TEST

// ---- no allocation: malloc, calloc and realloc fail on a thread that asks ----
// This executable's allocator functions replace glibc's for the whole process (the dynamic
// loader's thread-local storage of dlopen'ed libraries included); they fail while the calling
// thread's flag is set. Not under AddressSanitizer, whose allocator they would bypass.
#ifndef __SANITIZE_ADDRESS__
static __thread bool tls_fail_alloc;
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
TORC_API void *malloc(size_t n) { return tls_fail_alloc ? NULL : __libc_malloc(n); }
TORC_API void *calloc(size_t n, size_t m) { return tls_fail_alloc ? NULL : __libc_calloc(n, m); }
TORC_API void *realloc(void *p, size_t n) { return tls_fail_alloc ? NULL : __libc_realloc(p, n); }

static const torc_backend_vtable *g_ref;

static void *report_without_memory(void *arg) {
    (void)arg;
    const torc_op op = {.struct_size = sizeof op, .code = TORC_OP_FILL, .n_out = 1};
    tls_fail_alloc = true;
    const bool took = g_ref->supports(NULL, 5, &op);  // an invalid device: an error, set on this thread
    const char *msg = g_ref->last_error(NULL);
    char *copy = strdup(msg);  // fails on purpose: the flag is still set
    tls_fail_alloc = false;
    ck_assert(!took);
    ck_assert_ptr_null(copy);
    ck_assert_str_eq(msg, "reference backend: invalid device 5 (it has one device, 0)");
    return NULL;
}

START_TEST(setting_a_text_needs_no_memory) {
    char path[1024];
    snprintf(path, sizeof path, "%s/lib/torc/libtorc_reference.so", getenv("TORC_BUILD_DIR"));
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s", dlerror());
    torc_backend_entry_fn entry = (torc_backend_entry_fn)dlsym(h, TORC_BACKEND_ENTRY_SYMBOL);
    ck_assert_ptr_nonnull(entry);
    g_ref = entry(TORC_BACKEND_ABI_VERSION);
    ck_assert_ptr_nonnull(g_ref);
    for (int i = 0; i < 3; i++) {  // fresh threads: their first touch of the plugin's state
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, report_without_memory, NULL), 0);
        pthread_join(t, NULL);
    }
}
END_TEST
#endif

int main(void) {
    Suite *s = suite_create("plugin_error");
    TCase *tc = tcase_create("plugin_error");
    tcase_add_test(tc, each_thread_reads_its_own_text);
    tcase_add_test(tc, texts_are_truncated_and_may_quote_the_last_one);
    tcase_add_test(tc, a_thread_gives_its_slot_back_when_it_exits);
    tcase_add_test(tc, threads_beyond_the_pool_share_its_last_slot);
#ifndef __SANITIZE_ADDRESS__
    tcase_add_test(tc, setting_a_text_needs_no_memory);
#endif
    suite_add_tcase(s, tc);
    return tu_run(s);
}
