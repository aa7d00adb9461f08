// tests/plugins/strict_backend.c — host-memory backends that hold the core to backend.h's
// shutdown and memory contracts, for tests/test_shutdown.c and tests/test_host_memory.c. Built
// three times:
//  - "strict" (no define): its context is malloc'ed in init and poisoned and freed in shutdown,
//    with every block still allocated; any call after shutdown aborts, naming the member (under
//    ASan the freed context is reported first), and so does alloc(0), which the Memory rule
//    rules out. It runs no op: the reference runs them, on the same pointers (the host-memory
//    fallback). With the init option misalign=1 its blocks are 8 bytes off TORC_HOST_ALIGNMENT,
//    which the core must refuse. strict_backend_memory() reports what it was asked.
//  - "exitctor" (EXIT_IN_CTOR): its constructor calls exit(3), as libgfortran or libgomp do when
//    memory runs out while they load.
//  - "exitop" (EXIT_IN_RUN): takes FILL, and its run() calls exit(3) holding the backend's lock,
//    which free() and shutdown() take too (oneDNN's run holds its lock while OpenBLAS or libgomp
//    may end the process).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/backend.h"

#if defined(EXIT_IN_CTOR)
#define NAME "exitctor"
__attribute__((constructor)) static void exit_at_load(void) { exit(3); }
#elif defined(EXIT_IN_RUN)
#define NAME "exitop"
#else
#define NAME "strict"
#endif

// Every block is a node of the context's list, so shutdown can free those the core still holds.
typedef struct block {
    struct block *prev, *next;
    max_align_t data[];
} block;

#define MAGIC 0x5354524943544354ull  // what a live context holds
typedef struct strict_ctx {
    unsigned long long magic;
    pthread_mutex_t lock;
    block *blocks;
    long live;       // blocks allocated and not yet freed
    long allocs;     // alloc calls that returned a block
    size_t last;     // the size the last alloc was asked for
    long copies;     // copy calls
    size_t misalign;  // bytes added to every block's address (misalign=1: 8)
} strict_ctx;

static int g_down;  // shutdown has run: every later call is a bug in the core
static strict_ctx *g_ctx;  // for strict_backend_memory
static long g_live_at_shutdown = -1;
static _Thread_local char g_error[256];

// What the test reads (dlsym): blocks still allocated when shutdown ran (-1: it has not run).
TORC_API long strict_backend_live_at_shutdown(void) { return __atomic_load_n(&g_live_at_shutdown, __ATOMIC_SEQ_CST); }

// What the test reads (dlsym): blocks live, alloc calls, the last alloc's size, copy calls.
TORC_API void strict_backend_memory(long *live, long *allocs, size_t *last, long *copies) {
    strict_ctx *c = g_ctx;
    pthread_mutex_lock(&c->lock);
    *live = c->live, *allocs = c->allocs, *last = c->last, *copies = c->copies;
    pthread_mutex_unlock(&c->lock);
}

static strict_ctx *check(void *vctx, const char *member) {
    strict_ctx *c = vctx;
    // The context first: under ASan, reading it after shutdown is the use-after-free reported.
    if (!c || c->magic != MAGIC || __atomic_load_n(&g_down, __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "%s backend: %s() called after shutdown()\n", NAME, member);
        abort();
    }
    return c;
}

static int s_init(const char *const *options, void **ctx) {
    size_t misalign = 0;
    for (int i = 0; options && options[i]; i++) {
        if (strcmp(options[i], "misalign=1")) {
            snprintf(g_error, sizeof g_error, "%s: unknown option '%s' (known: misalign=1)", NAME, options[i]);
            return 1;
        }
        misalign = 8;
    }
    strict_ctx *c = calloc(1, sizeof *c);
    if (!c) return 1;
    c->magic = MAGIC;
    c->misalign = misalign;
    pthread_mutex_init(&c->lock, NULL);
    *ctx = g_ctx = c;
    return 0;
}

static void s_shutdown(void *ctx) {
    strict_ctx *c = check(ctx, "shutdown");
    pthread_mutex_lock(&c->lock);
    __atomic_store_n(&g_live_at_shutdown, c->live, __ATOMIC_SEQ_CST);
    for (block *b = c->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_destroy(&c->lock);
    __atomic_store_n(&g_down, 1, __ATOMIC_SEQ_CST);
    memset(c, 0xdb, sizeof *c);  // poisoned, and freed: ASan reports any use
    free(c);
}

static int s_count(void *ctx) {
    check(ctx, "device_count");
    return 1;
}

static int s_info(void *ctx, int device, torc_device_info *info) {
    check(ctx, "device_info");
    (void)device;
    snprintf(info->name, sizeof info->name, "%s test device", NAME);
    info->host_memory = true;
    return 0;
}

static void *s_alloc(void *ctx, int device, size_t n) {
    strict_ctx *c = check(ctx, "alloc");
    (void)device;
    if (n == 0) {  // backend.h: an empty tensor's data is the core's
        fprintf(stderr, "%s backend: alloc(0) called\n", NAME);
        abort();
    }
    block *b = malloc(sizeof *b + c->misalign + n);
    if (!b) {
        snprintf(g_error, sizeof g_error, "%s: out of memory", NAME);
        return NULL;
    }
    pthread_mutex_lock(&c->lock);
    b->prev = NULL;
    b->next = c->blocks;
    if (c->blocks) c->blocks->prev = b;
    c->blocks = b;
    c->live++;
    c->allocs++;
    c->last = n;
    pthread_mutex_unlock(&c->lock);
    return (char *)b->data + c->misalign;
}

static void s_free(void *ctx, int device, void *p) {
    strict_ctx *c = check(ctx, "free");
    (void)device;
    if (!p) return;
    block *b = (block *)((char *)p - c->misalign - offsetof(block, data));
    pthread_mutex_lock(&c->lock);
    if (b->prev) b->prev->next = b->next;
    else c->blocks = b->next;
    if (b->next) b->next->prev = b->prev;
    c->live--;
    pthread_mutex_unlock(&c->lock);
    free(b);
}

static int s_copy(void *ctx, int device, void *dst, const void *src, size_t n, torc_copy_kind kind, bool async) {
    strict_ctx *c = check(ctx, "copy");
    (void)device, (void)kind, (void)async;
    pthread_mutex_lock(&c->lock);
    c->copies++;
    pthread_mutex_unlock(&c->lock);
    memmove(dst, src, n);
    return 0;
}

static int s_sync(void *ctx, int device) {
    check(ctx, "synchronize");
    (void)device;
    return 0;
}

static bool s_supports(void *ctx, int device, const torc_op *op) {
    check(ctx, "supports");
    (void)device;
#if defined(EXIT_IN_RUN)
    if (op->code == TORC_OP_FILL) return true;
#else
    (void)op;
#endif
    snprintf(g_error, sizeof g_error, "%s runs no ops", NAME);
    return false;
}

static int s_run(void *ctx, int device, const torc_op *op) {
    strict_ctx *c = check(ctx, "run");
    (void)device, (void)op;
#if defined(EXIT_IN_RUN)
    pthread_mutex_lock(&c->lock);
    exit(3);
#else
    (void)c;
    snprintf(g_error, sizeof g_error, "%s runs no ops", NAME);
    return 1;
#endif
}

static const char *s_last_error(void *ctx) {
    if (ctx) check(ctx, "last_error");
    return g_error;
}

static const torc_backend_vtable g_vt = {
    .abi_version = TORC_BACKEND_ABI_VERSION,
    .struct_size = sizeof(torc_backend_vtable),
    .name = NAME,
    .init = s_init,
    .shutdown = s_shutdown,
    .device_count = s_count,
    .device_info = s_info,
    .alloc = s_alloc,
    .free = s_free,
    .copy = s_copy,
    .synchronize = s_sync,
    .supports = s_supports,
    .run = s_run,
    .last_error = s_last_error,
};

TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    return &g_vt;
}
