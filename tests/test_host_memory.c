// tests/test_host_memory.c — backend.h's Memory rule, held to with tests/plugins/strict_backend.c
// (a host-memory backend that runs no op and aborts on alloc(0)): no zero-byte allocations, the
// alignment the core requires and checks, small requests rounded and pooled, storage shared with
// other host backends and written by the core without copy(). Each test is a process of its own
// (Check's fork mode), so each starts with fresh pools and a freshly loaded backend.
#define _GNU_SOURCE
#include <dlfcn.h>

#include "testutil.h"

typedef struct strict_memory {
    long live, allocs, copies;  // blocks held, alloc calls, copy calls
    size_t last;                // the size the last alloc was asked for
} strict_memory;

static strict_memory strict_now(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/libtorc_strict.so", getenv("TORC_TEST_PLUGIN_DIR"));
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);  // the copy torc loaded
    ck_assert_msg(h != NULL, "%s", dlerror());
    void (*fn)(long *, long *, size_t *, long *) = (void (*)(long *, long *, size_t *, long *))dlsym(h, "strict_backend_memory");
    ck_assert_ptr_nonnull(fn);
    strict_memory m;
    fn(&m.live, &m.allocs, &m.last, &m.copies);
    dlclose(h);
    return m;
}

static torc_device *strict_default(void) {
    torc_device *dev = torc_device_get("strict");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_set_default_device(dev), TORC_OK);
    return dev;
}

// Empty tensors made, viewed, computed with and moved: the strict backend aborts on alloc(0).
START_TEST(empty_tensors_never_ask_a_backend_for_zero_bytes) {
    torc_device *dev = strict_default(), *ref = torc_device_get("reference");
    ck_assert_ptr_nonnull(ref);
    torc_scope_push();
    torc_tensor *a = torc_zeros(TORC_SHAPE(0), TORC_DTYPE_F32), *b = torc_empty(TORC_SHAPE(0, 3), TORC_DTYPE_F64);
    torc_tensor *c = torc_ones(TORC_SHAPE(2, 0), TORC_DTYPE_I64), *r = torc_arange(0, 0, 1, TORC_DTYPE_F32);
    ck_assert_msg(a && b && c && r, "%s", torc_last_error());
    torc_tensor *sum = torc_sum(b, 0, NULL, false);  // 0.0: 8 bytes, rounded to a pooled 64
    ck_assert_msg(sum != NULL, "%s", torc_last_error());
    tu_assert_values(sum, TU_ARR(0), 0);
    ck_assert_ptr_nonnull(torc_add(a, r));
    ck_assert_ptr_nonnull(torc_matmul(torc_empty(TORC_SHAPE(3, 0), TORC_DTYPE_F64), b));  // (3, 3) zeros
    ck_assert_ptr_nonnull(torc_clone(torc_narrow(torc_ones(TORC_SHAPE(4), TORC_DTYPE_F32), 0, 2, 0)));
    ck_assert_ptr_nonnull(torc_to_device(torc_to_device(b, ref), dev));
    const float none[1] = {0};
    ck_assert_ptr_nonnull(torc_tensor_from(none, 1, (int64_t[]){0}, TORC_DTYPE_F32));
    torc_scope_pop();
    ck_assert_int_eq(strict_now().copies, 0);
}
END_TEST

// A block aligned less than TORC_HOST_ALIGNMENT is handed back through free() and the allocation
// fails naming the backend, for pooled sizes and large ones alike.
START_TEST(misaligned_host_memory_is_refused_naming_the_backend) {
    ck_assert_int_eq(torc_backend_load("strict", (const char *const[]){"misalign=1", NULL}), TORC_OK);
    strict_default();
    ck_assert_ptr_null(torc_zeros(TORC_SHAPE(4), TORC_DTYPE_F32));
    tu_assert_error(TORC_ERR_BACKEND, "strict: backend 'strict' returned host memory at ");
    tu_assert_error(TORC_ERR_BACKEND, " for 64 bytes, not aligned to 16 bytes (backend.h: alloc of a host-memory "
                                      "backend returns memory aligned to TORC_HOST_ALIGNMENT)");
    ck_assert_ptr_null(torc_zeros(TORC_SHAPE(1000), TORC_DTYPE_F64));
    tu_assert_error(TORC_ERR_BACKEND, " for 8000 bytes, not aligned to 16 bytes");
    const strict_memory m = strict_now();
    ck_assert_int_eq(m.allocs, 2);
    ck_assert_int_eq(m.live, 0);  // both freed
}
END_TEST

// At most 1024 bytes: rounded up to a multiple of 64; above: exactly what the tensor needs.
START_TEST(small_host_requests_arrive_rounded_up_to_64_bytes) {
    strict_default();
    static const struct { int64_t n; size_t asked; } cases[] = {{1, 64}, {64, 64}, {65, 128}, {1000, 1024},
                                                                {1024, 1024}, {1025, 1025}, {4099, 4099}};
    enum { N = sizeof cases / sizeof *cases };
    torc_tensor *t[N];
    for (size_t i = 0; i < N; i++) {
        t[i] = torc_empty(1, &cases[i].n, TORC_DTYPE_U8);  // kept: a freed block would serve the next
        ck_assert_msg(t[i] != NULL, "%s", torc_last_error());
        ck_assert_uint_eq(strict_now().last, cases[i].asked);
        ck_assert_int_eq(strict_now().allocs, (long)i + 1);
    }
    for (size_t i = 0; i < N; i++) torc_release(t[i]);
}
END_TEST

// A freed small block stays with the core and serves the next tensor of its size class: allocs
// and frees do not balance until shutdown, which gets every pooled block back (test_shutdown).
START_TEST(freed_small_blocks_serve_later_tensors_without_alloc) {
    strict_default();
    torc_release(torc_zeros(TORC_SHAPE(20), TORC_DTYPE_F32));  // 80 bytes: a 128-byte block
    strict_memory m = strict_now();
    ck_assert_int_eq(m.allocs, 1);
    ck_assert_int_eq(m.live, 1);  // no tensor holds it: the pool does
    torc_tensor *t = torc_zeros(TORC_SHAPE(30), TORC_DTYPE_F32);  // 120 bytes: the same block
    ck_assert_ptr_nonnull(t);
    m = strict_now();
    ck_assert_int_eq(m.allocs, 1);
    ck_assert_int_eq(m.live, 1);
    torc_release(torc_zeros(TORC_SHAPE(1000), TORC_DTYPE_F32));  // large: freed at once
    m = strict_now();
    ck_assert_int_eq(m.allocs, 2);
    ck_assert_int_eq(m.live, 1);
    torc_release(t);
}
END_TEST

// A tensor moved to another host backend keeps the storage: writes through either are seen by
// the other, and the block goes back through the backend that allocated it.
START_TEST(host_storage_is_shared_between_host_backends) {
    torc_device *ref = torc_device_get("reference");
    ck_assert_ptr_nonnull(ref);
    strict_default();
    torc_tensor *x = torc_zeros(TORC_SHAPE(600), TORC_DTYPE_F32);  // 2400 bytes: not pooled
    ck_assert_ptr_nonnull(x);
    torc_tensor *y = torc_to_device(x, ref);
    ck_assert_msg(y != NULL, "%s", torc_last_error());
    ck_assert_int_eq(strict_now().allocs, 1);  // no new block
    ck_assert_int_eq(torc_fill_(y, torc_s(3.0)), TORC_OK);
    torc_release(x);
    torc_tensor *last = torc_narrow(y, 0, 599, 1);
    double v;
    ck_assert_int_eq(torc_item(last, &v), TORC_OK);
    ck_assert(v == 3.0);
    torc_release(last);
    ck_assert_int_eq(strict_now().live, 1);  // y holds strict's block
    torc_release(y);
    ck_assert_int_eq(strict_now().live, 0);  // freed by strict (the reference's free() would crash)
}
END_TEST

// The core reads and writes host memory itself: no copy() for data in, data moved between host
// devices, or values read back.
START_TEST(the_core_writes_host_memory_without_copy) {
    torc_device *dev = strict_default(), *ref = torc_device_get("reference");
    ck_assert_ptr_nonnull(ref);
    torc_scope_push();
    const double v[3] = {1.5, -2, 4};
    torc_tensor *t = torc_tensor_from(v, 1, (int64_t[]){3}, TORC_DTYPE_F64);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    tu_assert_values(t, TU_ARR(1.5, -2, 4), 0);
    torc_tensor *on_ref = torc_to_device(torc_mul(t, t), ref), *back = torc_to_device(torc_clone(on_ref), dev);
    ck_assert_msg(on_ref && back, "%s", torc_last_error());
    tu_assert_values(back, TU_ARR(2.25, 4, 16), 0);
    ck_assert_int_eq(strict_now().copies, 0);
    torc_scope_pop();
}
END_TEST

int main(void) {
    if (getenv("CK_FORK") && !strcmp(getenv("CK_FORK"), "no")) {
        fprintf(stderr, "test_host_memory needs Check's fork mode (CK_FORK=no is set)\n");
        return 77;
    }
    Suite *s = suite_create("host_memory");
    TCase *tc = tcase_create("memory");
    tcase_add_test(tc, empty_tensors_never_ask_a_backend_for_zero_bytes);
    tcase_add_test(tc, misaligned_host_memory_is_refused_naming_the_backend);
    tcase_add_test(tc, small_host_requests_arrive_rounded_up_to_64_bytes);
    tcase_add_test(tc, freed_small_blocks_serve_later_tensors_without_alloc);
    tcase_add_test(tc, host_storage_is_shared_between_host_backends);
    tcase_add_test(tc, the_core_writes_host_memory_without_copy);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
