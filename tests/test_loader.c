// tests/test_loader.c — backend selection and the plugin loader: TORC_BACKEND, device names,
// refusing plugins built for another ABI, and clear errors that leave the process usable.
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "testutil.h"

// Each test runs in its own process (Check forks), so environment changes do not leak.

START_TEST(torc_backend_picks_the_default_device) {
    setenv("TORC_BACKEND", "reference", 1);
    torc_device *d = torc_default_device();
    ck_assert_ptr_nonnull(d);
    ck_assert_str_eq(torc_device_backend_name(d), "reference");
    torc_tensor *x = torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32);
    ck_assert_ptr_eq(torc_get_device(x), d);
    torc_release(x);
    ck_assert_ptr_eq(torc_device_get("cpu"), d);  // "cpu" is the default host device
}
END_TEST

START_TEST(unknown_backend_lists_files_tried_and_available) {
    setenv("TORC_BACKEND", "nosuch", 1);
    ck_assert_ptr_null(torc_default_device());
    tu_assert_error(TORC_ERR_BACKEND, "TORC_BACKEND=nosuch: backend 'nosuch' could not be loaded; tried:");
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "libtorc_nosuch.so"));
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "available backends: "));
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "reference"));
    // Factories report the same error instead of crashing.
    ck_assert_ptr_null(torc_zeros(TORC_SHAPE(2), TORC_DTYPE_F32));
    ck_assert_int_eq(torc_last_status(), TORC_ERR_BACKEND);
}
END_TEST

START_TEST(plugin_from_another_abi_major_is_refused) {
    const char *dir = getenv("TORC_TEST_PLUGIN_DIR");  // set by tests/loader.cmake
    ck_assert_ptr_nonnull(dir);
    setenv("TORC_PLUGIN_PATH", dir, 1);
    ck_assert_ptr_null(torc_device_get("badmajor"));
    char want[128];
    snprintf(want, sizeof want, "plugin built for backend ABI 99.3, but this torc speaks ABI %d.%d", TORC_BACKEND_ABI_MAJOR,
             TORC_BACKEND_ABI_MINOR);
    tu_assert_error(TORC_ERR_BACKEND, want);
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "libtorc_badmajor.so"));
}
END_TEST

START_TEST(plugin_with_a_truncated_vtable_is_refused) {
    const char *dir = getenv("TORC_TEST_PLUGIN_DIR");  // set by tests/loader.cmake
    ck_assert_ptr_nonnull(dir);
    setenv("TORC_PLUGIN_PATH", dir, 1);
    ck_assert_ptr_null(torc_device_get("badsize"));
    char want[128];
    snprintf(want, sizeof want, "plugin vtable is 24 bytes (ABI %d.%d), smaller than the", TORC_BACKEND_ABI_MAJOR,
             TORC_BACKEND_ABI_MINOR);
    tu_assert_error(TORC_ERR_BACKEND, want);
    // The process stays usable.
    torc_tensor *x = torc_ones(TORC_SHAPE(3), TORC_DTYPE_F32);
    tu_assert_values(x, TU_ARR(1, 1, 1), 0);
    torc_release(x);
}
END_TEST

START_TEST(device_names_are_checked) {
    ck_assert_ptr_null(torc_device_get("cuda:x"));
    tu_assert_error(TORC_ERR_INVALID_ARG, "Invalid device string: 'cuda:x'");
    ck_assert_ptr_null(torc_device_get("../etc"));
    tu_assert_error(TORC_ERR_INVALID_ARG, "invalid backend name");
    ck_assert_ptr_null(torc_device_get("reference:3"));
    tu_assert_error(TORC_ERR_BACKEND, "device index 3 is out of range");
    torc_device *r = torc_device_get("reference");
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(torc_device_name(r), "reference");
    torc_device_info info;
    ck_assert_int_eq(torc_device_info_get(r, &info), TORC_OK);
    ck_assert(info.host_memory);
}
END_TEST

START_TEST(cuda_without_a_device_is_a_clear_error) {
    // On machines without a GPU (CI) the CUDA backend must refuse cleanly; with one it loads.
    torc_device *d = torc_device_get("cuda");
    if (d) {
        ck_assert_str_eq(torc_device_backend_name(d), "cuda");
        return;
    }
    ck_assert_int_eq(torc_last_status(), TORC_ERR_BACKEND);
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "cuda"));
    setenv("TORC_BACKEND", "cuda", 1);
    ck_assert_ptr_null(torc_default_device());
    tu_assert_error(TORC_ERR_BACKEND, "TORC_BACKEND=cuda:");
    // The process stays usable on a host device.
    torc_device *cpu = torc_device_get("reference");
    ck_assert_ptr_nonnull(cpu);
    ck_assert_int_eq(torc_set_default_device(cpu), TORC_OK);
    torc_tensor *x = torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32);
    tu_assert_values(x, TU_ARR(1, 1), 0);
    torc_release(x);
}
END_TEST

int main(void) {
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");
    tcase_add_test(tc, torc_backend_picks_the_default_device);
    tcase_add_test(tc, unknown_backend_lists_files_tried_and_available);
    tcase_add_test(tc, plugin_from_another_abi_major_is_refused);
    tcase_add_test(tc, plugin_with_a_truncated_vtable_is_refused);
    tcase_add_test(tc, device_names_are_checked);
    tcase_add_test(tc, cuda_without_a_device_is_a_clear_error);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
