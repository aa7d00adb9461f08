// tests/plugins/fake_device.c — a backend whose memory the core must treat as device memory
// (host_memory false; really malloc'ed) and that offers pinned host buffers, so tests can check
// the host->device paths (get_batch's pinned asynchronous copies, loading onto a device). It
// runs no op. fake_device_stats() reports what the core asked of it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/backend.h"

#define MAX_PINNED 64
static void *g_pinned[MAX_PINNED];
static size_t g_pinned_size[MAX_PINNED];
static int g_async_pinned, g_sync_copies, g_syncs, g_pinned_live;
static _Thread_local char g_error[256];

TORC_API void fake_device_stats(int *async_pinned_copies, int *sync_copies, int *synchronizes, int *pinned_live) {
    *async_pinned_copies = g_async_pinned;
    *sync_copies = g_sync_copies;
    *synchronizes = g_syncs;
    *pinned_live = g_pinned_live;
}

static bool is_pinned(const void *p) {
    for (int i = 0; i < MAX_PINNED; i++)
        if (g_pinned[i] && (const char *)p >= (const char *)g_pinned[i] &&
            (const char *)p < (const char *)g_pinned[i] + g_pinned_size[i])
            return true;
    return false;
}

static int fake_init(const char *const *options, void **ctx) {
    (void)options, (void)ctx;
    return 0;
}
static void fake_shutdown(void *ctx) {}
static int fake_count(void *ctx) { return 1; }
static int fake_info(void *ctx, int device, torc_device_info *info) {
    (void)device;
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "fake device");
    info->host_memory = false;
    return 0;
}
static void *fake_alloc(void *ctx, int device, size_t n) {
    (void)device;
    return malloc(n ? n : 1);
}
static void fake_free(void *ctx, int device, void *p) {
    (void)device;
    free(p);
}
static int fake_copy(void *ctx, int device, void *dst, const void *src, size_t n, torc_copy_kind kind, bool async) {
    (void)device;
    if (async && kind == TORC_COPY_HOST_TO_DEVICE) {
        if (!is_pinned(src)) {
            snprintf(g_error, sizeof g_error, "fake device: async copy from unpinned memory");
            return 1;
        }
        g_async_pinned++;
    } else {
        g_sync_copies++;
    }
    memmove(dst, src, n);
    return 0;
}
static int fake_sync(void *ctx, int device) {
    (void)device;
    g_syncs++;
    return 0;
}
static bool fake_supports(void *ctx, int device, const torc_op *op) {
    (void)device, (void)op;
    return false;
}
static int fake_run(void *ctx, int device, const torc_op *op) {
    (void)device, (void)op;
    snprintf(g_error, sizeof g_error, "fake device runs no ops");
    return 1;
}
static const char *fake_last_error(void *ctx) { return g_error; }
static void *fake_host_alloc(void *ctx, int device, size_t n) {
    (void)device;
    for (int i = 0; i < MAX_PINNED; i++)
        if (!g_pinned[i]) {
            if (!(g_pinned[i] = malloc(n ? n : 1))) return NULL;
            g_pinned_size[i] = n;
            g_pinned_live++;
            return g_pinned[i];
        }
    return NULL;
}
static void fake_host_free(void *ctx, int device, void *ptr) {
    (void)device;
    for (int i = 0; i < MAX_PINNED; i++)
        if (ptr && g_pinned[i] == ptr) {
            free(ptr);
            g_pinned[i] = NULL;
            g_pinned_live--;
        }
}

static const torc_backend_vtable g_vt = {
    .abi_version = TORC_BACKEND_ABI_VERSION,
    .struct_size = sizeof(torc_backend_vtable),
    .name = "fakedev",
    .init = fake_init,
    .shutdown = fake_shutdown,
    .device_count = fake_count,
    .device_info = fake_info,
    .alloc = fake_alloc,
    .free = fake_free,
    .copy = fake_copy,
    .synchronize = fake_sync,
    .supports = fake_supports,
    .run = fake_run,
    .last_error = fake_last_error,
    .host_alloc = fake_host_alloc,
    .host_free = fake_host_free,
};

TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    return &g_vt;
}
