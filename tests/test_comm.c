// tests/test_comm.c — the comm plugin loader and the single-process behaviour of the distributed
// API: the defaults before init, refusals (missing file, other ABI major, short vtable, a vtable
// naming another plugin) listing every file tried, TORC_COMM. Collectives themselves run under
// mpirun (tests/mpi.sh).
#define _GNU_SOURCE
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
    tu_assert_error(TORC_ERR_BACKEND, "plugin built for comm ABI 2.0, but this torc speaks ABI 1.0");
    ck_assert_int_eq(torc_dist_init("badsize"), TORC_ERR_BACKEND);
    tu_assert_error(TORC_ERR_BACKEND, "plugin vtable is 64 bytes, smaller than the 128 bytes");
    ck_assert_int_eq(torc_dist_init("badname"), TORC_ERR_BACKEND);
    tu_assert_error(TORC_ERR_BACKEND, "file is named for comm plugin 'badname' but its vtable says 'mpi'");
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

static Suite *make_suite(void) {
    Suite *s = suite_create("comm");
    TCase *tc = tcase_create("comm");
    tcase_add_test(tc, defaults_before_init);
    tcase_add_test(tc, missing_plugin_lists_files_tried);
    tcase_add_test(tc, refuses_other_major_short_vtable_and_wrong_name);
    tcase_add_test(tc, torc_comm_picks_the_plugin);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
