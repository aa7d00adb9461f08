// tests/testutil.h — helpers shared by the Check suites: reading a tensor's values as double,
// asserting values, shapes and strides, and asserting that a call failed with a given status.
#ifndef TORC_TESTUTIL_H
#define TORC_TESTUTIL_H

#include "ck.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

// The values of t in row-major order as doubles (malloc'ed; caller frees).
static inline double *tu_values(torc_tensor *t) {
    int64_t n = torc_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    torc_scope_push();  // works inside or outside the caller's scopes
    torc_tensor *d = torc_to_dtype(t, TORC_DTYPE_F64);
    ck_assert_msg(d != NULL, "to_dtype failed: %s", torc_last_error());
    ck_assert_int_eq(torc_copy_to_host(d, v, sizeof(double) * (size_t)n), TORC_OK);
    torc_scope_pop();
    return v;
}

#define TU_ARR(...) ((const double[]){__VA_ARGS__}), (int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double))

// Asserts t holds exactly n values equal (within tol, NaN == NaN) to expect.
#define tu_assert_values(t, ...) tu_assert_values_at(__FILE__, __LINE__, (t), __VA_ARGS__)
static inline void tu_assert_values_at(const char *file, int line, torc_tensor *t, const double *expect, int64_t n,
                                       double tol) {
    ck_assert_msg(t != NULL, "%s:%d: tensor is NULL (%s)", file, line, torc_last_error());
    ck_assert_msg(torc_numel(t) == n, "%s:%d: numel %lld != %lld", file, line, (long long)torc_numel(t), (long long)n);
    double *v = tu_values(t);
    for (int64_t i = 0; i < n; i++) {
        bool ok = (isnan(expect[i]) && isnan(v[i])) || v[i] == expect[i] ||
                  fabs(v[i] - expect[i]) <= tol * (1.0 + fabs(expect[i]));
        ck_assert_msg(ok, "%s:%d: element %lld is %.17g, expected %.17g", file, line, (long long)i, v[i], expect[i]);
    }
    free(v);
}

#define tu_assert_shape(t, ...) \
    tu_assert_dims_at(__FILE__, __LINE__, "shape", torc_ndim(t), torc_shape(t), TORC_SHAPE(__VA_ARGS__))
#define tu_assert_strides(t, ...) \
    tu_assert_dims_at(__FILE__, __LINE__, "stride", torc_ndim(t), torc_strides(t), TORC_SHAPE(__VA_ARGS__))
static inline void tu_assert_dims_at(const char *file, int line, const char *what, int nd, const int64_t *got, int ne,
                                     const int64_t *exp) {
    ck_assert_msg(nd == ne, "%s:%d: %s has %d dims, expected %d", file, line, what, nd, ne);
    for (int i = 0; i < nd; i++)
        ck_assert_msg(got[i] == exp[i], "%s:%d: %s[%d] = %lld, expected %lld", file, line, what, i, (long long)got[i],
                      (long long)exp[i]);
}

// Asserts the last call failed with status and that its message contains substr.
#define tu_assert_error(status, substr) \
    do { \
        ck_assert_msg(torc_last_status() == (status), "status %s, expected %s (%s)", torc_status_name(torc_last_status()), \
                      torc_status_name(status), torc_last_error()); \
        ck_assert_msg(strstr(torc_last_error(), (substr)) != NULL, "message '%s' lacks '%s'", torc_last_error(), (substr)); \
    } while (0)

// Opens tests/golden/<name> (the directory comes from TORC_TEST_DATA, set by ctest).
static inline FILE *tu_open_golden(const char *name, const char *mode) {
    const char *dir = getenv("TORC_TEST_DATA");
    ck_assert_msg(dir != NULL, "TORC_TEST_DATA is not set (run the suite through ctest)");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, mode);
    ck_assert_msg(f != NULL, "cannot open %s", path);
    return f;
}

// Runs a suite built by make_suite and returns the process exit status.
static inline int tu_run(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
