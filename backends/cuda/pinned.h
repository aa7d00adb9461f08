// backends/cuda/pinned.h — the pinned host staging pool for async copies: a block goes back to the
// pool with an event recorded after the copy that reads or writes it, and is reused only once
// that event has completed.
#ifndef TCU_PINNED_H
#define TCU_PINNED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct tcu_pinned_ops {
    void *ctx;
    int (*host_alloc)(void *ctx, size_t nbytes, void **out);  // 0 on success
    void (*host_free)(void *ctx, void *ptr);
    void *(*event_new)(void *ctx);                            // NULL on failure
    void (*event_free)(void *ctx, void *event);
    int (*event_record)(void *ctx, void *event, void *stream);  // 0 on success
    int (*event_done)(void *ctx, void *event);                // 1 done, 0 pending, < 0 error
} tcu_pinned_ops;

typedef struct tcu_pinned_block {
    void *ptr;
    size_t size;
    void *event;     // recorded at release; NULL until the first release
    bool in_use;     // handed out and not yet released
} tcu_pinned_block;

#define TCU_PINNED_MIN ((size_t)64 << 10)       // blocks are powers of two from 64 KiB
#define TCU_PINNED_CAP ((size_t)256 << 20)      // the pool holds at most this much

typedef struct tcu_pinned_pool {
    tcu_pinned_ops ops;
    pthread_mutex_t mu;
    tcu_pinned_block *v;
    size_t n, cap;
    size_t total;    // bytes of pinned memory held
} tcu_pinned_pool;

void tcu_pinned_init(tcu_pinned_pool *p, const tcu_pinned_ops *ops);
// Frees every block. The caller has synchronised the streams that used them.
void tcu_pinned_destroy(tcu_pinned_pool *p);
// A staging block of at least nbytes whose previous copy has completed, or -1 when none can be
// had within the pool's cap (the caller then copies synchronously). Returns the block index.
int tcu_pinned_get(tcu_pinned_pool *p, size_t nbytes, void **ptr);
// Hands block `idx` back after enqueueing its copy on `stream`: records its event there.
// Returns 0, or -1 if the event could not be recorded (the block is then left out of reuse
// until tcu_pinned_destroy, so a running copy never sees its memory recycled).
int tcu_pinned_release(tcu_pinned_pool *p, int idx, void *stream);
// Frees blocks that are idle and whose copies have completed.
void tcu_pinned_trim(tcu_pinned_pool *p);
size_t tcu_pinned_class(size_t nbytes);   // the block size used for nbytes

#endif
