// backends/cuda/allocator.h — the caching device allocator (PyTorch's design, simplified): size-
// rounded blocks cut from cached segments, reused per stream, split and merged, OOM retry.
#ifndef TCU_ALLOCATOR_H
#define TCU_ALLOCATOR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The raw memory source (cudaMalloc/cudaFree in the backend, a counting fake in tests).
typedef struct tcu_raw_ops {
    void *ctx;
    // 0 and *out set on success; TCU_RAW_OOM when the device is out of memory (the allocator
    // then releases its cache and retries); TCU_RAW_FAILED for any other error, with why filled
    // (a faulted context, say: no retry, and never reported as out of memory).
    int (*alloc)(void *ctx, size_t nbytes, void **out, char *why, size_t why_n);
    void (*free)(void *ctx, void *ptr);
} tcu_raw_ops;

#define TCU_MIN_BLOCK 512u                    // every size rounds up to this multiple
#define TCU_SMALL_SIZE ((size_t)1 << 20)       // <= 1 MiB: small pool
#define TCU_SMALL_SEGMENT ((size_t)2 << 20)    // small requests share 2 MiB segments
#define TCU_LARGE_SEGMENT ((size_t)20 << 20)   // < 10 MiB requests share 20 MiB segments
#define TCU_MIN_LARGE_ALLOC ((size_t)10 << 20)
#define TCU_ROUND_LARGE ((size_t)2 << 20)      // bigger ones get their own, rounded to 2 MiB

#define TCU_RAW_OOM 1
#define TCU_RAW_FAILED 2

typedef struct tcu_block tcu_block;
struct tcu_block {
    uintptr_t ptr;
    size_t size;             // bytes of this block (rounded)
    int stream;              // the stream it was allocated for
    bool allocated;
    bool small;              // pool
    tcu_block *prev, *next;  // neighbours cut from the same segment
};

typedef struct tcu_block_set {  // blocks sorted by (stream, size, ptr)
    tcu_block **v;
    size_t n, cap;
} tcu_block_set;

typedef struct tcu_allocator {
    tcu_raw_ops raw;
    pthread_mutex_t mu;
    tcu_block_set free_small, free_large;
    tcu_block **live;        // allocated blocks: open-addressing table keyed by ptr
    size_t live_n, live_cap;
    uint64_t allocated, reserved, peak_allocated, peak_reserved;
    uint64_t raw_allocs, raw_frees;   // calls into raw (tests check reuse with these)
} tcu_allocator;

void tcu_allocator_init(tcu_allocator *a, const tcu_raw_ops *raw);
// Returns every segment to raw (live blocks too: the owner is going away) and frees the tables.
void tcu_allocator_destroy(tcu_allocator *a);

// A block of at least nbytes (nbytes 0 gives a valid 512-byte block) for use on `stream`.
// On failure returns NULL with a message in err: PyTorch's "CUDA out of memory..." and *oom true
// when the device is out of memory, the device's own error and *oom false otherwise (oom may be
// NULL).
void *tcu_allocator_alloc(tcu_allocator *a, size_t nbytes, int stream, bool *oom, char *err, size_t err_n);
// Returns a block to the cache. false if ptr did not come from this allocator (NULL is fine).
bool tcu_allocator_free(tcu_allocator *a, void *ptr);
// Releases every cached segment that holds no live block.
void tcu_allocator_empty_cache(tcu_allocator *a);

typedef struct tcu_alloc_stats {
    uint64_t allocated, reserved, peak_allocated, peak_reserved;
    uint64_t raw_allocs, raw_frees, cached_blocks;
} tcu_alloc_stats;
void tcu_allocator_stats(tcu_allocator *a, tcu_alloc_stats *out);
void tcu_allocator_reset_peak(tcu_allocator *a);

// Exposed for tests: the rounding rules.
size_t tcu_round_size(size_t nbytes);
size_t tcu_segment_size(size_t rounded);

#endif
