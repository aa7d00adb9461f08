// tests/test_comm.c — the comm plugin loader and the single-process behaviour of the distributed
// API: the defaults before init, refusals (missing file, other ABI major, short vtable, a vtable
// naming another plugin) listing every file tried, TORC_COMM; what a device-memory plugin is
// handed (tests/plugins/self_comm.c on the fakedev backend). Collectives across processes run
// under mpirun (tests/mpi.sh).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static void use_test_dir(void) {
    const char *dir = getenv("TORC_TEST_COMM_DIR");
    ck_assert_ptr_nonnull(dir);
    ck_assert_int_eq(setenv("TORC_PLUGIN_PATH", dir, 1), 0);
}

START_TEST(defaults_before_init) {
    ck_assert(!torc_dist_is_initialized());
    ck_assert_int_eq(torc_dist_rank(), 0);
    ck_assert_int_eq(torc_dist_world_size(), 1);
    ck_assert_int_eq(torc_dist_local_rank(), 0);
    ck_assert_int_eq(torc_dist_device_index(), -1);
    torc_tensor *t = torc_zeros(TORC_SHAPE(2), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_dist_all_reduce(t, TORC_REDUCE_SUM, NULL), TORC_ERR_RUNTIME);
    tu_assert_error(TORC_ERR_RUNTIME, "not initialized (call torc_dist_init first)");
    ck_assert_ptr_null(torc_ddp_new(1, &t, NULL));
    tu_assert_error(TORC_ERR_RUNTIME, "not initialized");
    torc_release(t);
}
END_TEST

START_TEST(missing_plugin_lists_files_tried) {
    use_test_dir();
    ck_assert_int_eq(torc_dist_init("nosuch"), TORC_ERR_BACKEND);
    tu_assert_error(TORC_ERR_BACKEND, "comm plugin 'nosuch' could not be loaded; tried:");
    tu_assert_error(TORC_ERR_BACKEND, "available comm plugins: ");
    tu_assert_error(TORC_ERR_BACKEND, "comm_plugins/libtorc_comm_nosuch.so: no such file");
    tu_assert_error(TORC_ERR_BACKEND, "lib/torc/libtorc_comm_nosuch.so: no such file");
    ck_assert(!torc_dist_is_initialized());
}
END_TEST

START_TEST(refuses_other_major_short_vtable_and_wrong_name) {
    use_test_dir();
    ck_assert_int_eq(torc_dist_init("badmajor"), TORC_ERR_BACKEND);
    tu_assert_error(TORC_ERR_BACKEND, "plugin built for comm ABI 2.0, but this torc speaks ABI 1.1");
    ck_assert_int_eq(torc_dist_init("badsize"), TORC_ERR_BACKEND);
    tu_assert_error(TORC_ERR_BACKEND, "plugin vtable is 64 bytes, smaller than the 128 bytes");
    ck_assert_int_eq(torc_dist_init("badname"), TORC_ERR_BACKEND);
    tu_assert_error(TORC_ERR_BACKEND, "file is named for comm plugin 'badname' but its vtable says 'mpi'");
    ck_assert_int_eq(torc_dist_init("badmember"), TORC_ERR_BACKEND);
    tu_assert_error(TORC_ERR_BACKEND, "plugin vtable lacks the required member init (it is NULL)");
    ck_assert_int_eq(torc_dist_init("../mpi"), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "invalid comm plugin name");
}
END_TEST

START_TEST(torc_comm_picks_the_plugin) {
    use_test_dir();
    ck_assert_int_eq(setenv("TORC_COMM", "badmajor", 1), 0);
    ck_assert_int_eq(torc_dist_init(NULL), TORC_ERR_BACKEND);
    tu_assert_error(TORC_ERR_BACKEND, "comm plugin 'badmajor' could not be loaded");
    unsetenv("TORC_COMM");
}
END_TEST

// ---- a plugin on device memory (self_comm on fakedev) ----
static torc_device *fakedev_and_self(const char *device_env) {
    char path[2048];
    snprintf(path, sizeof path, "%s:%s", getenv("TORC_TEST_COMM_DIR"), getenv("TORC_TEST_PLUGIN_DIR"));
    ck_assert_int_eq(setenv("TORC_PLUGIN_PATH", path, 1), 0);
    if (device_env) ck_assert_int_eq(setenv("SELF_COMM_DEVICE", device_env, 1), 0);
    torc_device *dev = torc_device_get("fakedev");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    return dev;
}

static void *plugin_symbol(const char *dir_env, const char *file, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", getenv(dir_env), file);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);  // the copy torc loaded
    ck_assert_msg(h != NULL, "%s", dlerror());
    void *fn = dlsym(h, name);
    dlclose(h);
    ck_assert_ptr_nonnull(fn);
    return fn;
}

static torc_tensor *on(torc_device *dev, const float *v, int64_t n) {
    torc_tensor *t = torc_to_device(torc_tensor_from(v, 1, &n, TORC_DTYPE_F32), dev);
    ck_assert_msg(t != NULL, "%s", torc_last_error());
    return t;
}

static void expect(const torc_tensor *t, const float *want, int n) {
    float got[8];
    ck_assert_int_eq(torc_copy_to_host(t, got, sizeof(float) * (size_t)n), TORC_OK);
    for (int i = 0; i < n; i++) ck_assert_float_eq(got[i], want[i]);
}

// The device's earlier work is done before the plugin reads or writes (the backend and the plugin
// run on streams of their own): the core synchronizes the device first, for every collective.
START_TEST(device_plugin_gets_synchronized_buffers) {
    torc_device *dev = fakedev_and_self(NULL);
    ck_assert_int_eq(torc_dist_init("self"), TORC_OK);
    ck_assert_int_eq(torc_dist_device_index(), 0);
    void (*stats)(int *, int *, int *, int *) =
        (void (*)(int *, int *, int *, int *))plugin_symbol("TORC_TEST_PLUGIN_DIR", "libtorc_fakedev.so", "fake_device_stats");
    int (*calls)(void) = (int (*)(void))plugin_symbol("TORC_TEST_COMM_DIR", "libtorc_comm_self.so", "self_comm_calls");
    torc_scope_push();
    const float a[4] = {1, 2, 3, 4}, zero[8] = {0};
    torc_tensor *t = on(dev, a, 4), *big = on(dev, zero, 4), *small = on(dev, zero, 4);
    int async0, sync0, syncs0, live0, async1, sync1, syncs1, live1;
    stats(&async0, &sync0, &syncs0, &live0);
    ck_assert_int_eq(torc_dist_all_reduce(t, TORC_REDUCE_SUM, NULL), TORC_OK);
    torc_work *w = NULL;
    ck_assert_int_eq(torc_dist_all_gather(big, t, &w), TORC_OK);
    ck_assert_int_eq(torc_dist_wait(w), TORC_OK);
    ck_assert_int_eq(torc_dist_reduce_scatter(small, big, TORC_REDUCE_SUM, NULL), TORC_OK);
    ck_assert_int_eq(torc_dist_broadcast(small, 0, NULL), TORC_OK);
    stats(&async1, &sync1, &syncs1, &live1);
    ck_assert_int_eq(calls(), 4);
    ck_assert_int_ge(syncs1 - syncs0, 4);
    expect(big, a, 4);
    expect(small, a, 4);
    // A host tensor is refused, and nothing reaches the plugin.
    torc_tensor *h = on(torc_device_get("reference"), zero, 4);
    ck_assert_int_eq(torc_dist_all_reduce(h, TORC_REDUCE_SUM, NULL), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "but comm plugin 'self' works on CUDA device memory");
    ck_assert_int_eq(calls(), 4);
    torc_scope_pop();
    ck_assert_int_eq(torc_dist_shutdown(), TORC_OK);
}
END_TEST

// A plugin that runs this process's collectives on device 1 gets no tensor of device 0: the
// error names the device to use, and the tensor is unchanged.
START_TEST(device_plugin_refuses_another_device) {
    torc_device *dev = fakedev_and_self("1");
    ck_assert_int_eq(torc_dist_init("self"), TORC_OK);
    ck_assert_int_eq(torc_dist_device_index(), 1);
    torc_scope_push();
    const float a[4] = {1, 2, 3, 4};
    torc_tensor *t = on(dev, a, 4);
    ck_assert_int_eq(torc_dist_all_reduce(t, TORC_REDUCE_SUM, NULL), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG,
                    "all_reduce: tensor on fakedev:0 but comm plugin 'self' runs this process's collectives on device 1 "
                    "(local rank 0): put its tensors there");
    expect(t, a, 4);
    torc_scope_pop();
    ck_assert_int_eq(torc_dist_shutdown(), TORC_OK);
    unsetenv("SELF_COMM_DEVICE");
}
END_TEST

// A 1.0 plugin says nothing of its device: -1, and no device is refused.
START_TEST(comm_abi_10_plugin_has_no_device) {
    torc_device *dev = fakedev_and_self("1");
    ck_assert_int_eq(torc_dist_init("selfv10"), TORC_OK);
    ck_assert_int_eq(torc_dist_device_index(), -1);
    torc_scope_push();
    const float a[4] = {1, 2, 3, 4};
    ck_assert_int_eq(torc_dist_all_reduce(on(dev, a, 4), TORC_REDUCE_SUM, NULL), TORC_OK);
    torc_scope_pop();
    ck_assert_int_eq(torc_dist_shutdown(), TORC_OK);
    ck_assert_int_eq(torc_dist_device_index(), -1);
    unsetenv("SELF_COMM_DEVICE");
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("comm");
    TCase *tc = tcase_create("comm");
    tcase_add_test(tc, defaults_before_init);
    tcase_add_test(tc, missing_plugin_lists_files_tried);
    tcase_add_test(tc, refuses_other_major_short_vtable_and_wrong_name);
    tcase_add_test(tc, torc_comm_picks_the_plugin);
    tcase_add_test(tc, device_plugin_gets_synchronized_buffers);
    tcase_add_test(tc, device_plugin_refuses_another_device);
    tcase_add_test(tc, comm_abi_10_plugin_has_no_device);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
