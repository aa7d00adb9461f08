// tests/test_loader.c — backend selection and the plugin loader: TORC_BACKEND, device names,
// refusing plugins built for another ABI, and clear errors that leave the process usable.
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "tmpdir.h"

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
    snprintf(want, sizeof want, "plugin built for backend ABI 99.3, but this torc speaks backend ABI %d.%d (a different "
             "major", TORC_BACKEND_ABI_MAJOR, TORC_BACKEND_ABI_MINOR);
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
    snprintf(want, sizeof want, "plugin vtable is 24 bytes (backend ABI %d.%d), smaller than the", TORC_BACKEND_ABI_MAJOR,
             TORC_BACKEND_ABI_MINOR);
    tu_assert_error(TORC_ERR_BACKEND, want);
    // The process stays usable.
    torc_tensor *x = torc_ones(TORC_SHAPE(3), TORC_DTYPE_F32);
    tu_assert_values(x, TU_ARR(1, 1, 1), 0);
    torc_release(x);
}
END_TEST

START_TEST(a_vtable_without_a_required_member_is_refused_naming_it) {
    setenv("TORC_PLUGIN_PATH", getenv("TORC_TEST_PLUGIN_DIR"), 1);
    ck_assert_ptr_null(torc_device_get("badmember"));
    tu_assert_error(TORC_ERR_BACKEND, "libtorc_badmember.so: plugin vtable lacks the required member copy (it is NULL)");
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

// ---- the first file of the right name decides, for every kind of plugin ----
// Each case puts one bad file under the stock plugin's name in a directory searched first; the
// stock plugin further down the path must not load in its place.
typedef enum { NOT_ELF, DIRECTORY, DANGLING_LINK, UNREADABLE, NO_ENTRY_SYMBOL, WRONG_ABI, N_BAD } bad_file;

static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    ck_assert_msg(in && out, "copying %s to %s", from, to);
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;) ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

// Makes dir/file the bad file of this case; returns the reason the loader must give.
static const char *make_bad(bad_file bad, const char *dir, const char *file, bool optimizer) {
    char path[2200], from[2200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    const char *build = getenv("TORC_BUILD_DIR"), *plugins = getenv("TORC_TEST_PLUGIN_DIR");
    ck_assert_ptr_nonnull(build);
    ck_assert_ptr_nonnull(plugins);
    switch (bad) {
    case NOT_ELF: {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        for (int i = 0; i < 40; i++) fputs("not a shared library\n", f);
        fclose(f);
        return "invalid ELF header";
    }
    case DIRECTORY:
        ck_assert_int_eq(mkdir(path, 0755), 0);
        return "is a directory, not a shared library";
    case DANGLING_LINK:
        ck_assert_int_eq(symlink("/nonexistent/libtorc_gone.so", path), 0);
        return "dangling symbolic link: No such file or directory";
    case UNREADABLE:
        // A real plugin that this process may not read (root reads anything: the test then
        // drops to "nobody" before loading).
        snprintf(from, sizeof from, "%s/lib/torc/%s", build, file);
        copy_file(from, path);
        ck_assert_int_eq(chmod(path, 0), 0);
        return "cannot be read: Permission denied";
    case NO_ENTRY_SYMBOL:
        // The other kind's stock plugin: a fine library without this kind's entry symbol.
        snprintf(from, sizeof from, "%s/lib/torc/%s", build, optimizer ? "libtorc_reference.so" : "libtorc_optim_sgd.so");
        copy_file(from, path);
        return optimizer ? "no symbol torc_optim_entry (not a torc optimizer plugin)"
                         : "no symbol torc_backend_entry (not a torc backend plugin)";
    case WRONG_ABI:
        snprintf(from, sizeof from, "%s/%s", plugins, optimizer ? "libtorc_optim_badmajor.so" : "libtorc_badmajor.so");
        copy_file(from, path);
        return optimizer ? "plugin built for optimizer ABI 99.3" : "plugin built for backend ABI 99.3";
    default:
        ck_abort();
    }
    return NULL;
}

// TORC_PLUGIN_PATH = <empty dir>:<dir with the bad file> (then libtorc's own directory, which
// holds the stock plugin). Returns the expected "path: why" line of the error.
static void set_up_bad(bad_file bad, const char *file, bool optimizer, char *want, size_t n) {
    char empty[1024], bad_dir[1024];
    snprintf(empty, sizeof empty, "%s", tmp_path("empty"));
    snprintf(bad_dir, sizeof bad_dir, "%s", tmp_path("bad"));
    ck_assert_int_eq(chmod(tmp_dir, 0755), 0);  // (mkdtemp's 0700 would hide it from "nobody")
    ck_assert_int_eq(mkdir(empty, 0755), 0);
    ck_assert_int_eq(mkdir(bad_dir, 0755), 0);
    const char *why = make_bad(bad, bad_dir, file, optimizer);
    char path_env[2100];
    snprintf(path_env, sizeof path_env, "%s:%s", empty, bad_dir);
    setenv("TORC_PLUGIN_PATH", path_env, 1);
    snprintf(want, n, "%s/%s: %s", bad_dir, file, why);
}

// Root reads any file: for the unreadable case the load runs as "nobody" (real and effective
// uid, which access() and open() check), keeping root as the saved uid to come back for the
// fixture's cleanup.
static void as_nobody(bad_file bad, bool on) {
    if (bad != UNREADABLE || getuid() != (on ? 0u : 65534u)) return;
    ck_assert_int_eq(on ? setresuid(65534, 65534, 0) : setresuid(0, 0, 0), 0);
}

static void assert_refused(const char *kind, const char *name, const char *empty_line, const char *want) {
    tu_assert_error(TORC_ERR_BACKEND, want);
    char head[128];
    snprintf(head, sizeof head, "%s '%s' could not be loaded; tried:\n  ", kind, name);
    ck_assert_msg(strstr(torc_last_error(), head), "%s", torc_last_error());
    ck_assert_msg(strstr(torc_last_error(), empty_line), "%s", torc_last_error());
    // Nothing past the bad file was tried: libtorc's own directory is not in the list.
    char own[1024];
    snprintf(own, sizeof own, "%s/lib/torc/", getenv("TORC_BUILD_DIR"));
    const char *avail = strstr(torc_last_error(), "\navailable ");
    ck_assert_ptr_nonnull(avail);
    const char *own_at = strstr(torc_last_error(), own);
    ck_assert_msg(!own_at || own_at > avail, "a later file was tried: %s", torc_last_error());
}

START_TEST(a_bad_backend_file_first_on_the_path_is_the_error) {
    char want[2048], empty_line[1100];
    set_up_bad((bad_file)_i, "libtorc_reference.so", false, want, sizeof want);
    snprintf(empty_line, sizeof empty_line, "%s/libtorc_reference.so: no such file", tmp_path("empty"));
    as_nobody((bad_file)_i, true);
    ck_assert_ptr_null(torc_device_get("reference"));
    assert_refused("backend", "reference", empty_line, want);
    setenv("TORC_BACKEND", "reference", 1);
    ck_assert_ptr_null(torc_default_device());
    tu_assert_error(TORC_ERR_BACKEND, "TORC_BACKEND=reference: backend 'reference' could not be loaded; tried:");
    tu_assert_error(TORC_ERR_BACKEND, want);
    as_nobody((bad_file)_i, false);
}
END_TEST

START_TEST(a_bad_optimizer_file_first_on_the_path_is_the_error) {
    char want[2048], empty_line[1100];
    set_up_bad((bad_file)_i, "libtorc_optim_sgd.so", true, want, sizeof want);
    snprintf(empty_line, sizeof empty_line, "%s/libtorc_optim_sgd.so: no such file", tmp_path("empty"));
    as_nobody((bad_file)_i, true);
    ck_assert_ptr_null(torc_optim_load("sgd"));
    assert_refused("optimizer", "sgd", empty_line, want);
    // By path the same file gives the same reason.
    char path[1100];
    snprintf(path, sizeof path, "%s/libtorc_optim_sgd.so", tmp_path("bad"));
    ck_assert_ptr_null(torc_optim_load(path));
    tu_assert_error(TORC_ERR_BACKEND, "optimizer plugin '");
    tu_assert_error(TORC_ERR_BACKEND, want);
    as_nobody((bad_file)_i, false);
}
END_TEST

// A backend under another backend's file name (the strict test backend as libtorc_reference.so)
// is refused, as optimizers and comm plugins are: torc names the device after the file.
START_TEST(a_backend_whose_vtable_names_another_is_refused) {
    char dir[1024], from[1100], path[1100];
    snprintf(dir, sizeof dir, "%s", tmp_path("bad"));
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(from, sizeof from, "%s/libtorc_strict.so", getenv("TORC_TEST_PLUGIN_DIR"));
    snprintf(path, sizeof path, "%s/libtorc_reference.so", dir);
    copy_file(from, path);
    setenv("TORC_PLUGIN_PATH", dir, 1);
    ck_assert_ptr_null(torc_device_get("reference"));
    char want[1200];
    snprintf(want, sizeof want, "%s: file is named for backend 'reference' but its vtable says 'strict'", path);
    tu_assert_error(TORC_ERR_BACKEND, want);
}
END_TEST

START_TEST(the_available_list_keeps_each_kind_apart) {
    setenv("TORC_BACKEND", "nosuch", 1);
    ck_assert_ptr_null(torc_default_device());
    const char *avail = strstr(torc_last_error(), "available backends: ");
    ck_assert_ptr_nonnull(avail);
    ck_assert_msg(!strstr(avail, "optim"), "%s", avail);  // libtorc_optim_*.so are optimizers
    ck_assert_ptr_null(torc_optim_load("nosuch"));
    avail = strstr(torc_last_error(), "available optimizers: ");
    ck_assert_ptr_nonnull(avail);
    ck_assert_msg(strstr(avail, "sgd") && !strstr(avail, "reference"), "%s", avail);
}
END_TEST

int main(void) {
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");
    tcase_add_test(tc, torc_backend_picks_the_default_device);
    tcase_add_test(tc, unknown_backend_lists_files_tried_and_available);
    tcase_add_test(tc, plugin_from_another_abi_major_is_refused);
    tcase_add_test(tc, plugin_with_a_truncated_vtable_is_refused);
    tcase_add_test(tc, a_vtable_without_a_required_member_is_refused_naming_it);
    tcase_add_test(tc, device_names_are_checked);
    tcase_add_test(tc, cuda_without_a_device_is_a_clear_error);
    suite_add_tcase(s, tc);
    TCase *bad = tcase_create("first_file_decides");
    tcase_add_checked_fixture(bad, NULL, cleanup);
    tcase_add_loop_test(bad, a_bad_backend_file_first_on_the_path_is_the_error, 0, N_BAD);
    tcase_add_loop_test(bad, a_bad_optimizer_file_first_on_the_path_is_the_error, 0, N_BAD);
    tcase_add_test(bad, the_available_list_keeps_each_kind_apart);
    tcase_add_test(bad, a_backend_whose_vtable_names_another_is_refused);
    suite_add_tcase(s, bad);
    return tu_run(s);
}
