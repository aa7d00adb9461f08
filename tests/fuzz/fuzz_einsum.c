// tests/fuzz/fuzz_einsum.c — libFuzzer harness for torc_einsum's equation parser and planner.
// Input: one byte for the operand count (1..3), per operand a byte for its ndim (0..4) and a
// byte per dim (0..3), then the equation text. A failed call must set an error; nothing may
// crash, leak or read out of bounds (ASan + UBSan).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "torc/torc.h"

#define MAX_OPS 3
#define MAX_EQ 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t p = 0;
    if (size < 1) return 0;
    const int n = data[p++] % MAX_OPS + 1;
    int ndim[MAX_OPS];
    int64_t shape[MAX_OPS][4];
    for (int k = 0; k < n; k++) {
        ndim[k] = p < size ? data[p++] % 5 : 0;
        for (int d = 0; d < ndim[k]; d++) shape[k][d] = p < size ? data[p++] % 4 : 1;
    }
    char eq[MAX_EQ + 1];
    const size_t len = size - p < MAX_EQ ? size - p : MAX_EQ;
    memcpy(eq, data + p, len);
    eq[len] = '\0';

    torc_clear_error();
    torc_scope_push();
    torc_tensor *ops[MAX_OPS];
    for (int k = 0; k < n; k++) {
        ops[k] = torc_contiguous(torc_expand(torc_scalar_tensor(1, TORC_DTYPE_F32), ndim[k], shape[k]));
        if (!ops[k]) abort();
    }
    torc_tensor *r = torc_einsum(eq, n, ops);
    if (!r && (torc_last_status() == TORC_OK || !torc_last_error()[0])) abort();  // a failure says why
    torc_scope_pop();
    return 0;
}

#ifdef TORC_FUZZ_SEEDS
// Equations from torc's einsum tests, with operands that fit them.
static void fuzz_write_seeds(void) {
    static const struct { int n; int ndim[MAX_OPS]; int64_t shape[MAX_OPS][4]; const char *eq; } seeds[] = {
        {2, {2, 2}, {{2, 3}, {3, 2}}, "ij,jk->ik"},
        {2, {3, 3}, {{2, 3, 2}, {2, 2, 2}}, "bih,bjh->bij"},
        {2, {3, 3}, {{2, 3, 2}, {2, 2, 2}}, "batch seq1 hidden, batch seq2 hidden -> batch seq1 seq2"},
        {1, {2}, {{3, 3}}, "i i -> i"},
        {1, {2}, {{2, 3}}, "i j -> j i"},
        {1, {3}, {{2, 3, 2}}, "... i j -> ... j i"},
        {1, {2}, {{2, 3}}, "ij"},
        {2, {1, 1}, {{3}, {3}}, "i,i->"},
        {2, {1, 1}, {{2}, {3}}, "i,j->ij"},
        {3, {2, 2, 2}, {{2, 3}, {3, 2}, {2, 2}}, "ij,jk,kl->il"},
        {2, {3, 2}, {{2, 1, 3}, {3, 2}}, "...j,jk->...k"},
        {1, {0}, {{0}}, "->"},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        uint8_t buf[64 + MAX_EQ];
        size_t p = 0;
        buf[p++] = (uint8_t)(seeds[i].n - 1);
        for (int k = 0; k < seeds[i].n; k++) {
            buf[p++] = (uint8_t)seeds[i].ndim[k];
            for (int d = 0; d < seeds[i].ndim[k]; d++) buf[p++] = (uint8_t)seeds[i].shape[k][d];
        }
        const size_t len = strlen(seeds[i].eq);
        memcpy(buf + p, seeds[i].eq, len);
        fuzz_seed(buf, p + len);
    }
}
#endif
