// tests/plugins/self_comm.c — a comm plugin for a job of one process that declares device memory
// (TORC_COMM_MEMORY_CUDA; the fakedev backend's memory stands for it), so test_comm can check
// what the core hands such a plugin: buffers on the plugin's device only, synchronized first.
// Built as libtorc_comm_self.so (ABI 1.1: device() says SELF_COMM_DEVICE, default 0) and, with
// -DSELF_V10, as libtorc_comm_selfv10.so (a 1.0 vtable, which says nothing of its device).
// Its collectives copy send to recv; self_comm_calls() counts them.
#include <stdlib.h>
#include <string.h>

#include "torc/comm.h"

static int g_calls;
TORC_API int self_comm_calls(void) { return g_calls; }

static size_t elem_size(torc_comm_dtype d) {
    return d == TORC_COMM_DTYPE_F32 || d == TORC_COMM_DTYPE_I32 ? 4 : d == TORC_COMM_DTYPE_U8 ? 1 : 8;
}
static int copy(const void *send, void *recv, size_t count, torc_comm_dtype d, torc_comm_request **req) {
    g_calls++;
    if (send != recv) memmove(recv, send, count * elem_size(d));
    if (req) *req = (torc_comm_request *)&g_calls;  // any non-NULL handle: wait() has nothing to do
    return 0;
}

static int self_init(void **ctx) {
    *ctx = &g_calls;
    return 0;
}
static void self_shutdown(void *ctx) { (void)ctx; }
static int zero(void *ctx) { (void)ctx; return 0; }
static int one(void *ctx) { (void)ctx; return 1; }
#ifndef SELF_V10
static int self_device(void *ctx) {
    (void)ctx;
    const char *d = getenv("SELF_COMM_DEVICE");
    return d && *d ? atoi(d) : 0;
}
#endif
static int self_all_reduce(void *ctx, const void *send, void *recv, size_t count, torc_comm_dtype dtype, torc_comm_op op,
                           torc_comm_request **req) {
    (void)ctx, (void)op;
    return copy(send, recv, count, dtype, req);
}
static int self_broadcast(void *ctx, void *buf, size_t count, torc_comm_dtype dtype, int root, torc_comm_request **req) {
    (void)ctx, (void)root;
    return copy(buf, buf, count, dtype, req);
}
static int self_all_gather(void *ctx, const void *send, void *recv, size_t count, torc_comm_dtype dtype,
                           torc_comm_request **req) {
    (void)ctx;
    return copy(send, recv, count, dtype, req);
}
static int self_reduce_scatter(void *ctx, const void *send, void *recv, size_t count, torc_comm_dtype dtype,
                               torc_comm_op op, torc_comm_request **req) {
    (void)ctx, (void)op;
    return copy(send, recv, count, dtype, req);
}
static int self_wait(void *ctx, torc_comm_request *req, double timeout_s, double *finished_at) {
    (void)ctx, (void)req, (void)timeout_s;
    if (finished_at) *finished_at = 0;
    return 0;
}
static void self_abort(void *ctx, int code) {
    (void)ctx;
    exit(code);
}
static const char *self_last_error(void *ctx) {
    (void)ctx;
    return "";
}

static const torc_comm_vtable vt = {
    .abi_version = TORC_COMM_ABI_VERSION,
#ifdef SELF_V10
    .struct_size = TORC_COMM_VTABLE_V1_SIZE,
    .name = "selfv10",
#else
    .struct_size = sizeof(torc_comm_vtable),
    .name = "self",
    .device = self_device,
#endif
    .memory = TORC_COMM_MEMORY_CUDA,
    .init = self_init,
    .shutdown = self_shutdown,
    .rank = zero,
    .world_size = one,
    .local_rank = zero,
    .all_reduce = self_all_reduce,
    .broadcast = self_broadcast,
    .all_gather = self_all_gather,
    .reduce_scatter = self_reduce_scatter,
    .barrier = zero,
    .wait = self_wait,
    .abort = self_abort,
    .last_error = self_last_error,
};

TORC_API const torc_comm_vtable *torc_comm_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    return &vt;
}
