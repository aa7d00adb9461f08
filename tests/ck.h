// tests/ck.h — the Check framework (<check.h>) with one change, included by every suite instead of
// <check.h>: a passing assertion records nothing.
//
// Check's ck_assert_msg (and every ck_assert_* built on it) calls _mark_point on success, which in
// fork mode sends the parent a location message per passing assertion; the parent unpacks them
// with a memmove of its whole remaining buffer each, quadratic in their number. A suite asserting
// element by element over large tensors spent most of its time there (onednn_backend under
// ASan + UBSan: 36% of its samples in the parent's memmove, 25 minutes of CI's sanitizer stage).
// Here a failing assertion reports its file, line and message exactly as before; what is lost is
// the "last checkpoint" Check prints when a test dies by a signal or a timeout (ASan's report and
// the core's error text name the place instead; mark_point() still records one where wanted).
#ifndef TORC_TESTS_CK_H
#define TORC_TESTS_CK_H
#include <check.h>

#undef ck_assert_msg
#define ck_assert_msg(expr, ...) \
    ((expr) ? (void)0 : _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", ##__VA_ARGS__))

#endif
