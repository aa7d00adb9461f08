// tests/fuzz/fuzz_rearrange.c — libFuzzer harness for the einops patterns: torc_rearrange,
// torc_reduce_axes and torc_repeat, pattern and axes strings both fuzzed.
// Input: one byte choosing the function (and the reduction), one for the tensor's ndim (0..4),
// a byte per dim (0..4), then "pattern\0axes". A failed call must set an error.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "torc/torc.h"

#define MAX_TEXT 256

static const char *const reductions[] = {"sum", "mean", "max", "min", "prod"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const int kind = data[0] % 3, reduction = data[0] / 3 % 5;
    const int ndim = data[1] % 5;
    size_t p = 2;
    int64_t shape[4];
    for (int d = 0; d < ndim; d++) shape[d] = p < size ? data[p++] % 5 : 1;
    char text[2 * MAX_TEXT + 2];  // pattern, NUL, axes, NUL
    const size_t len = size - p < 2 * MAX_TEXT ? size - p : 2 * MAX_TEXT;
    memcpy(text, data + p, len);
    text[len] = text[len + 1] = '\0';
    const char *pattern = text, *axes = text + strlen(text) + 1;
    if (axes > text + len) axes = NULL;  // no NUL: no axes string

    torc_clear_error();
    torc_scope_push();
    torc_tensor *x = torc_contiguous(torc_expand(torc_scalar_tensor(2, TORC_DTYPE_F32), ndim, shape));
    if (!x) abort();
    torc_tensor *r = kind == 0   ? torc_rearrange(x, pattern, axes)
                     : kind == 1 ? torc_reduce_axes(x, pattern, reductions[reduction], axes)
                                 : torc_repeat(x, pattern, axes);
    if (!r && (torc_last_status() == TORC_OK || !torc_last_error()[0])) abort();  // a failure says why
    torc_scope_pop();
    return 0;
}

#ifdef TORC_FUZZ_SEEDS
// Patterns from torc's einops tests, with a tensor of a shape that fits them.
static void fuzz_write_seeds(void) {
    static const struct { int kind, ndim; int64_t shape[4]; const char *pattern, *axes; } seeds[] = {
        {0, 2, {2, 4}, "... (heads hidden) -> ... heads hidden", "heads=2"},
        {0, 4, {2, 3, 2, 2}, "b s heads hidden -> b s (heads hidden)", NULL},
        {0, 4, {2, 3, 4, 1}, "b c h w -> b h w c", NULL},
        {0, 4, {2, 1, 3, 4}, "b 1 h w -> b h w ()", NULL},
        {0, 2, {4, 3}, "(a b) c -> a (b c)", "a=2, b=2"},
        {1, 3, {2, 4, 4}, "b (h 2) (w 2) -> b h w", NULL},
        {1 + 3 * 1, 2, {2, 3}, "... hidden -> ...", NULL},
        {1 + 3 * 2, 4, {1, 2, 2, 2}, "b c h w -> b c () ()", NULL},
        {2, 2, {2, 3}, "h w -> h w c", "c=3"},
        {2, 2, {2, 3}, "h w -> h (w c)", "c=2"},
        {2, 2, {2, 3}, "h w -> (2 h) w", NULL},
        {0, 2, {2, 3}, "a b -> a b 1 1 1 1 1 1 1", NULL},  // once a stack overflow (9 result dims)
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        uint8_t buf[8 + 2 * MAX_TEXT];
        size_t p = 0;
        buf[p++] = (uint8_t)seeds[i].kind;
        buf[p++] = (uint8_t)seeds[i].ndim;
        for (int d = 0; d < seeds[i].ndim; d++) buf[p++] = (uint8_t)seeds[i].shape[d];
        const size_t lp = strlen(seeds[i].pattern);
        memcpy(buf + p, seeds[i].pattern, lp + 1);
        p += lp + 1;
        if (seeds[i].axes) {
            const size_t la = strlen(seeds[i].axes);
            memcpy(buf + p, seeds[i].axes, la);
            p += la;
        }
        fuzz_seed(buf, p);
    }
}
#endif
