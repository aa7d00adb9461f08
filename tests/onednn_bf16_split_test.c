// tests/onednn_bf16_split_test.c — the AVX2 kernels' bf16 rounding by Veltkamp's split
// (backends/cpu_onednn/bf16_split.h) against torc_f32_to_bf16: wherever the split's result is not
// NaN and has its low 16 bits zero it is the same bits, and it is never inf. Every float whose
// exponent is where the split turns inexact (subnormals, the first normals, 2^109 up to inf and
// NaN) and every 61st of the others; with TORC_BF16_SPLIT_ALL=1 all 2^32 (README).
#include <stdint.h>

#include "bf16_split.h"
#include "testutil.h"
#include "torc/convert.h"

// The 8 floats with bits u, u + 1, ..., u + 7 through the split: counts those it takes (exact by
// its test) and the wrong ones (taken but not torc_f32_to_bf16's bits, or inf), keeping the first.
// (Check's asserts record a checkpoint each: one a float took minutes.)
typedef struct tally {
    uint64_t taken, wrong, missed;  // missed: normals of exponent field 1-235 (|x| < 2^109) not taken
    uint32_t first, got, want;
} tally;

__attribute__((target("avx2"))) static void check8(uint32_t u, tally *t) {
    const __m256i bits = _mm256_add_epi32(_mm256_set1_epi32((int)u), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    uint32_t h[8];
    _mm256_storeu_si256((__m256i *)(void *)h, _mm256_castps_si256(split_bf16_8(_mm256_castsi256_ps(bits))));
    for (uint32_t j = 0; j < 8; j++) {
        float x;
        const uint32_t xb = u + j, mag = h[j] & 0x7FFFFFFFu;
        memcpy(&x, &xb, 4);
        const uint32_t want = (uint32_t)torc_f32_to_bf16(x) << 16;
        bool wrong = mag == 0x7F800000u;
        if (mag < 0x7F800000u && !(h[j] & 0xFFFFu)) {  // else NaN or low bits: left to the exact rounding
            t->taken++;
            wrong = h[j] != want;
        } else if (((xb >> 23) & 0xFF) - 1 < 235) {
            t->missed++;
        }
        if (wrong && t->wrong++ == 0) t->first = xb, t->got = h[j], t->want = want;
    }
}

START_TEST(test_split_matches_rounding) {
    if (!__builtin_cpu_supports("avx2")) {
        printf("onednn_bf16_split: no AVX2 on this CPU; the split is not used here\n");
        return;
    }
    const char *all_env = getenv("TORC_BF16_SPLIT_ALL");
    const int all = all_env && strcmp(all_env, "1") == 0;
    tally t = {0, 0, 0, 0, 0, 0};
    uint64_t seen = 0;
    for (uint64_t u = 0; u < (UINT64_C(1) << 32); u += 8) {
        const uint32_t e = (uint32_t)(u >> 23) & 0xFF;
        if (all || e <= 1 || e >= 236 || u % (61 * 8) == 0) {
            check8((uint32_t)u, &t);
            seen += 8;
        }
    }
    ck_assert_msg(t.wrong == 0, "%llu floats wrong, the first 0x%08x: split 0x%08x, torc_f32_to_bf16 0x%08x",
                  (unsigned long long)t.wrong, t.first, t.got, t.want);
    // Normal floats under 2^109 in magnitude are all taken: the exact rounding stays for the rare.
    ck_assert_msg(t.missed == 0, "%llu normal floats under 2^109 not taken by the split", (unsigned long long)t.missed);
    printf("onednn_bf16_split: %llu floats checked, %llu taken by the split%s\n", (unsigned long long)seen,
           (unsigned long long)t.taken, all ? " (all 2^32)" : "");
}
END_TEST

int main(void) {
    Suite *s = suite_create("onednn_bf16_split");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_split_matches_rounding);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
