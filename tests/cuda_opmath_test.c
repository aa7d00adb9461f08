// tests/cuda_opmath_test.c — the CUDA backend's per-element code (backends/cuda/ew_ops.h,
// compiled for the host: no GPU needed) on every f16/bf16 value by a scalar, against PyTorch's
// bits in tests/golden/opmath_all_values.txt: mul and div read the scalar at float32 (the
// frontend sends it so), add and sub at the tensor's dtype.
#include "ck.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ew_ops.h"

// 64-bit FNV-1a over results as little-endian u16 (the golden's hash).
static uint64_t fnv1a64(const uint16_t *v, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 2; b++) h = (h ^ ((v[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    return h;
}

START_TEST(elementwise_code_matches_pytorch_on_every_half_value) {
    const char *dir = getenv("TORC_TEST_DATA");
    ck_assert_msg(dir != NULL, "TORC_TEST_DATA is not set (run the suite through ctest)");
    char path[1024], line[256], op[32], dt[16], kind[16];
    snprintf(path, sizeof path, "%s/opmath_all_values.txt", dir);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static uint16_t x[65536], out[65536];
    for (int i = 0; i < 65536; i++) x[i] = (uint16_t)i;
    double v;
    int ran = 0, bad_ops = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "all %31s %15s %15s %lf", op, dt, kind, &v) != 4) continue;
        // rdiv is reciprocal then mul in the frontend: two ops, each covered by the others
        const int code = !strncmp(op, "mul", 3) ? TORC_OP_MUL : !strncmp(op, "div", 3) ? TORC_OP_DIV
                       : !strncmp(op, "add", 3) ? TORC_OP_ADD : !strncmp(op, "sub", 3) ? TORC_OP_SUB : -1;
        if (code < 0) continue;
        const torc_dtype d = !strcmp(dt, "f16") ? TORC_DTYPE_F16 : TORC_DTYPE_BF16;
        const bool opmath = code == TORC_OP_MUL || code == TORC_OP_DIV;  // the frontend sends a float32 scalar
        float y32 = (float)v;
        uint16_t y16 = d == TORC_DTYPE_F16 ? torc_f32_to_f16((float)v) : torc_f32_to_bf16((float)v);
        tcu_ew_args a;
        memset(&a, 0, sizeof a);
        a.op = code;
        a.n_in = 2;
        a.s0 = 1.0;
        a.dt[0] = a.dt[1] = d;
        a.dt[2] = opmath ? TORC_DTYPE_F32 : d;
        a.data[0] = out;
        a.data[1] = x;
        a.data[2] = opmath ? (void *)&y32 : (void *)&y16;
        ck_assert(tcu_ew_choose_types(&a));
        for (int64_t i = 0; i < 65536; i++) tcu_ew_f32(&a, (const int64_t[]){i, i, 0}, i);
        const uint16_t exp_mask = d == TORC_DTYPE_F16 ? 0x7c00 : 0x7f80, qnan = d == TORC_DTYPE_F16 ? 0x7e00 : 0x7fc0;
        for (int i = 0; i < 65536; i++)
            if ((out[i] & exp_mask) == exp_mask && (out[i] & ~(exp_mask | 0x8000))) out[i] = qnan;
        int bad = 0, b;
        unsigned long long h;
        for (int k = 0; k < 256; k++) {
            ck_assert(fgets(line, sizeof line, f) && sscanf(line, "block %d %llx", &b, &h) == 2 && b == k);
            bad += fnv1a64(out + 256 * k, 256) != (uint64_t)h;
        }
        if (bad) fprintf(stderr, "%s %s by %s %g: %d of 256 blocks differ from PyTorch\n", op, dt, kind, v, bad);
        bad_ops += bad != 0;
        ran++;
    }
    fclose(f);
    ck_assert_int_gt(ran, 0);
    ck_assert_msg(bad_ops == 0, "%d of %d ops differ from PyTorch (details on stderr)", bad_ops, ran);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cuda_opmath");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, elementwise_code_matches_pytorch_on_every_half_value);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
