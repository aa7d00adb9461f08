// tests/tmpdir.h — a per-suite scratch directory under $TORC_BUILD_DIR/tests, created on
// first use and removed by a Check fixture. Include after defining _GNU_SOURCE (mkdtemp).
#ifndef TORC_TESTS_TMPDIR_H
#define TORC_TESTS_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

static char tmp_dir[512];

// A path in the scratch directory; a few returned paths stay valid at once.
static const char *tmp_path(const char *name) {
    static char paths[8][1024];
    static int next;
    char *path = paths[next++ % 8];
    if (!tmp_dir[0]) {
        snprintf(tmp_dir, sizeof tmp_dir, "%s/tests/tmp_XXXXXX", getenv("TORC_BUILD_DIR"));
        ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
    }
    snprintf(path, sizeof paths[0], "%s/%s", tmp_dir, name);
    return path;
}

// The teardown fixture: removes the directory and everything in it.
static void cleanup(void) {
    if (!tmp_dir[0]) return;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    tmp_dir[0] = '\0';
}

#endif
