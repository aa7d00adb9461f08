// tests/test_data_shard.c — data parallel's get_batch: each rank's shard of the global batch, and
// the union of the shards over ranks, in rank order, is the one-process batch, step after step.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tmpdir.h"

static torc_dataset *open_tokens(void) {
    const char *path = tmp_path("tokens.bin");
    int32_t tok[5000];
    for (int i = 0; i < 5000; i++) tok[i] = i;
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(tok, sizeof tok, 1, f), 1);
    fclose(f);
    torc_dataset *ds = torc_dataset_open(path, "int32");
    ck_assert_msg(ds != NULL, "%s", torc_last_error());
    return ds;
}

START_TEST(union_of_shards_is_the_global_batch) {
    torc_dataset *ds = open_tokens();
    torc_device *host = torc_device_get("reference");
    const int64_t B = 12, L = 5;
    for (int world = 1; world <= 4; world++) {
        if (B % world) continue;
        torc_generator *g1 = torc_generator_new(7);
        torc_generator *gr[4];
        for (int r = 0; r < world; r++) gr[r] = torc_generator_new(7);
        for (int step = 0; step < 3; step++) {
            torc_scope_push();
            torc_tensor *x, *y;
            ck_assert_int_eq(torc_get_batch(ds, B, L, host, g1, &x, &y), TORC_OK);
            double *vx = tu_values(x), *vy = tu_values(y);
            for (int r = 0; r < world; r++) {
                torc_tensor *xs, *ys;
                ck_assert_int_eq(torc_get_batch_shard(ds, B, L, r, world, host, gr[r], &xs, &ys), TORC_OK);
                tu_assert_shape(xs, B / world, L);
                tu_assert_values(xs, vx + r * (B / world) * L, (B / world) * L, 0.0);
                tu_assert_values(ys, vy + r * (B / world) * L, (B / world) * L, 0.0);
            }
            free(vx);
            free(vy);
            torc_scope_pop();
        }
        torc_generator_free(g1);
        for (int r = 0; r < world; r++) torc_generator_free(gr[r]);
    }
    torc_dataset_close(ds);
}
END_TEST

START_TEST(shard_errors) {
    torc_dataset *ds = open_tokens();
    torc_generator *g = torc_generator_new(7);
    uint64_t seed, off;
    torc_tensor *x = NULL;
    ck_assert_int_eq(torc_get_batch_shard(ds, 10, 5, 0, 4, NULL, g, &x, NULL), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "global batch 10 is not divisible by world size 4");
    ck_assert_int_eq(torc_get_batch_shard(ds, 8, 5, 4, 4, NULL, g, &x, NULL), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "rank 4 is out of range for world size 4");
    torc_generator_get_state(g, &seed, &off);
    ck_assert_int_eq(off, 0);  // a refused call draws nothing
    torc_generator_free(g);
    torc_dataset_close(ds);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("data_shard");
    TCase *tc = tcase_create("data_shard");
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_add_test(tc, union_of_shards_is_the_global_batch);
    tcase_add_test(tc, shard_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
