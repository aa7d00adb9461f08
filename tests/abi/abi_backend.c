// tests/abi/abi_backend.c — one small host backend, built three ways to prove the backend ABI's
// compatibility rules (tests/abi/test_abi.c):
//   abiold     against the frozen 2.0 headers (tests/abi/v2_0): an older plugin on the current core;
//   abiolddev  the same, claiming device memory: what the core may not send it has no fallback;
//   abifuture  against the current headers, claiming minor 99 with vtable members the core does
//              not know (ABI_FUTURE).
// It runs FILL, COPY and ADD on f32 and counts what it was sent that its headers predate (an
// opcode or dtype past its own TORC_OP_COUNT / TORC_DTYPE_COUNT): abi_test_stats() reports it.
// abifuture also runs ATTENTION (minor 2.4) on dense f32 operands, and not its backward: the core
// must send it contiguous copies of strided inputs and compose the backward it declines.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/backend.h"

static int g_runs, g_too_new;
static _Thread_local char g_error[256];
static char g_context;

TORC_API void abi_test_stats(int *runs, int *too_new) {
    *runs = g_runs;
    *too_new = g_too_new;
}

// Counts an op (or operand dtype) newer than this plugin's headers; true if there was one.
static bool predates(const torc_op *op) {
    bool newer = (unsigned)op->code >= TORC_OP_COUNT;
    for (int i = 0; i < op->n_in; i++) newer = newer || (unsigned)op->in[i].dtype >= TORC_DTYPE_COUNT;
    for (int i = 0; i < op->n_out; i++) newer = newer || (unsigned)op->out[i].dtype >= TORC_DTYPE_COUNT;
    if (newer) g_too_new++;
    return newer;
}

static bool dense_f32(const torc_operand *o) {
    int64_t want = 1;
    for (int d = o->ndim - 1; d >= 0; d--) {
        if (o->shape[d] != 1 && o->stride[d] != want) return false;
        want *= o->shape[d];
    }
    return o->dtype == TORC_DTYPE_F32;
}

static int64_t numel(const torc_operand *o) {
    int64_t n = 1;
    for (int d = 0; d < o->ndim; d++) n *= o->shape[d];
    return n;
}

#ifdef ABI_FUTURE
static bool takes_attention(const torc_op *op) {
    if (op->code != TORC_OP_ATTENTION || op->n_in != 3 || op->n_out != 2) return false;
    for (int i = 0; i < 3; i++)
        if (!dense_f32(&op->in[i])) return false;
    return dense_f32(&op->out[0]) && dense_f32(&op->out[1]);
}

// o and lse of backend.h's ATTENTION, in double, on dense (B, H, rows, features) operands.
static int attention(const torc_op *op) {
    const int64_t BH = op->in[0].shape[0] * op->in[0].shape[1], L = op->in[0].shape[2], S = op->in[1].shape[2],
                  E = op->in[0].shape[3], Ev = op->in[2].shape[3];
    const float *q = op->in[0].data, *k = op->in[1].data, *v = op->in[2].data;
    float *o = op->out[0].data, *lse = op->out[1].data;
    double *s = malloc(sizeof *s * (size_t)(S + 1));
    if (!s) return TORC_ERR_OOM;
    for (int64_t bh = 0; bh < BH; bh++)
        for (int64_t i = 0; i < L; i++) {
            const int64_t n = op->params.attention.causal && i + 1 < S ? i + 1 : S;
            const float *qi = q + (bh * L + i) * E;
            double m = -INFINITY, z = 0;
            for (int64_t j = 0; j < n; j++) {
                double d = 0;
                for (int64_t e = 0; e < E; e++) d += (double)qi[e] * k[(bh * S + j) * E + e];
                s[j] = op->params.attention.scale * d;
                m = s[j] > m ? s[j] : m;
            }
            for (int64_t j = 0; j < n; j++) z += exp(s[j] - m);
            for (int64_t e = 0; e < Ev; e++) {
                double acc = 0;
                for (int64_t j = 0; j < n; j++) acc += exp(s[j] - m) / z * v[(bh * S + j) * Ev + e];
                o[(bh * L + i) * Ev + e] = (float)acc;
            }
            lse[bh * L + i] = n ? (float)(m + log(z)) : -INFINITY;
        }
    free(s);
    return 0;
}
#endif

static bool abi_supports(void *ctx, int device, const torc_op *op) {
    (void)ctx, (void)device;
    if (predates(op)) {
        snprintf(g_error, sizeof g_error, "abi test backend: sent an op it predates");
        return false;
    }
#ifdef ABI_FUTURE
    if (takes_attention(op)) return true;
#endif
    bool ok = op->n_out == 1 && dense_f32(&op->out[0]) &&
              (op->code == TORC_OP_FILL || op->code == TORC_OP_COPY || op->code == TORC_OP_ADD);
    for (int i = 0; i < op->n_in; i++) ok = ok && dense_f32(&op->in[i]) && numel(&op->in[i]) == numel(&op->out[0]);
    if (!ok) snprintf(g_error, sizeof g_error, "abi test backend: only dense f32 fill, copy and add");
    return ok;
}

static int abi_run(void *ctx, int device, const torc_op *op) {
    if (!abi_supports(ctx, device, op)) return TORC_ERR_NOT_SUPPORTED;
#ifdef ABI_FUTURE
    if (op->code == TORC_OP_ATTENTION) {
        const int rc = attention(op);
        g_runs += rc == 0;
        return rc;
    }
#endif
    float *y = op->out[0].data;
    const int64_t n = numel(&op->out[0]);
    for (int64_t i = 0; i < n; i++) {
        const float *a = op->n_in > 0 ? op->in[0].data : NULL, *b = op->n_in > 1 ? op->in[1].data : NULL;
        y[i] = op->code == TORC_OP_FILL ? (float)op->params.scalar.value
               : op->code == TORC_OP_COPY ? a[i]
                                          : a[i] + (float)op->params.scalar.value * b[i];
    }
    g_runs++;
    return 0;
}

static int abi_init(const char *const *options, void **ctx) {
    if (options && options[0]) {
        snprintf(g_error, sizeof g_error, "abi test backend: unknown option '%s'", options[0]);
        return TORC_ERR_INVALID_ARG;
    }
    *ctx = &g_context;
    return 0;
}
static void abi_shutdown(void *ctx) { (void)ctx; }
static int abi_device_count(void *ctx) {
    (void)ctx;
    return 1;
}
static int abi_device_info(void *ctx, int device, torc_device_info *info) {
    (void)ctx, (void)device;
    snprintf(info->name, sizeof info->name, "abi test device");
#ifdef ABI_DEVICE
    info->host_memory = false;  // malloc'ed, but the core must treat it as device memory
#else
    info->host_memory = true;
#endif
    return 0;
}
static void *abi_alloc(void *ctx, int device, size_t n) {
    (void)ctx, (void)device;
    return malloc(n ? n : 1);
}
static void abi_free(void *ctx, int device, void *p) {
    (void)ctx, (void)device;
    free(p);
}
static int abi_copy(void *ctx, int device, void *dst, const void *src, size_t n, torc_copy_kind kind, bool async) {
    (void)ctx, (void)device, (void)kind, (void)async;
    memmove(dst, src, n);
    return 0;
}
static int abi_synchronize(void *ctx, int device) {
    (void)ctx, (void)device;
    return 0;
}
static const char *abi_last_error(void *ctx) {
    (void)ctx;
    return g_error;
}

#define ABI_MEMBERS                                                                                         \
    .init = abi_init, .shutdown = abi_shutdown, .device_count = abi_device_count,                           \
    .device_info = abi_device_info, .alloc = abi_alloc, .free = abi_free, .copy = abi_copy,                 \
    .synchronize = abi_synchronize, .supports = abi_supports, .run = abi_run, .last_error = abi_last_error

#ifdef ABI_FUTURE
// A later minor's vtable: the 2.0 members, then members this core does not know (never called).
static int abi_graph_capture(void *ctx, int device) {
    (void)ctx, (void)device;
    abort();
}
typedef struct future_vtable {
    torc_backend_vtable v2_0;
    int (*graph_capture)(void *ctx, int device);  // "added in 2.99"
    void *reserved[5];
} future_vtable;
static const future_vtable g_vt = {
    .v2_0 = {.abi_version = (uint32_t)(TORC_BACKEND_ABI_MAJOR << 16 | 99), .struct_size = sizeof(future_vtable),
             .name = "abifuture", ABI_MEMBERS},
    .graph_capture = abi_graph_capture,
};
TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t host_abi_version) {
    return host_abi_version >> 16 == TORC_BACKEND_ABI_MAJOR ? &g_vt.v2_0 : NULL;
}
#else
#ifdef ABI_DEVICE
#define ABI_NAME "abiolddev"  // the loader requires the file's name
#else
#define ABI_NAME "abiold"
#endif
static const torc_backend_vtable g_vt = {
    .abi_version = TORC_BACKEND_ABI_VERSION, .struct_size = sizeof(torc_backend_vtable), .name = ABI_NAME,
    ABI_MEMBERS,
};
TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t host_abi_version) {
    return host_abi_version >> 16 == TORC_BACKEND_ABI_MAJOR ? &g_vt : NULL;
}
#endif
