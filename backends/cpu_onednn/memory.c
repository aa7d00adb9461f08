// backends/cpu_onednn/memory.c — tensor memory: 64-byte aligned host blocks, and a cache of freed
// large blocks so that a training loop reuses its pages instead of faulting fresh ones in.
//
// Why: a step allocates and frees the same large activations, gradients and casts every time.
// glibc returns such blocks to the kernel (munmap, or trimming the heap top), so each step paid a
// page fault per 4 KiB it wrote first: 8% of a Cruncher 1024 bf16 autocast step's samples were
// in the kernel's fault path. PyTorch's CUDA allocator caches for the same reason.
// Policy: blocks of ONEDNN_CACHE_MIN bytes or more are kept on free, up to ONEDNN_CACHE_MAX bytes
// in all (one that does not fit goes back to the system); an allocation takes the smallest kept
// block that fits with at most a quarter to spare. empty_cache() and the last shutdown release
// them, and so does a failed allocation before it retries.
// Every block starts with a 64-byte header holding its usable size, so free() needs no lookup.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "onednn-impl.h"

// Under AddressSanitizer a kept block's data is poisoned: a use after free is still reported.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define KEPT_POISON(raw) ASAN_POISON_MEMORY_REGION((char *)(raw) + HEADER, size_of(raw))
#define KEPT_UNPOISON(raw) ASAN_UNPOISON_MEMORY_REGION((char *)(raw) + HEADER, size_of(raw))
// And the bytes of a block past the nbytes asked for (the rounding to 64 bytes or 4 KiB, a kept
// block's spare quarter): a kernel reading past its tensor is reported wherever the block was
// rounded up, not only past the block (torc-xcheck's sweeps ask for whole 64-byte blocks).
#define SLACK_POISON(raw, nbytes) ASAN_POISON_MEMORY_REGION((char *)(raw) + HEADER + (nbytes), size_of(raw) - (nbytes))
#else
#define KEPT_POISON(raw) ((void)(raw))
#define KEPT_UNPOISON(raw) ((void)(raw))
#define SLACK_POISON(raw, nbytes) ((void)(raw), (void)(nbytes))
#endif

#define HEADER 64                                // keeps the data 64-byte aligned
#define ONEDNN_CACHE_MIN ((size_t)64 << 10)      // smaller blocks: glibc's heap reuses them well
#define ONEDNN_CACHE_MAX ((size_t)1 << 30)       // kept bytes at most
#define ONEDNN_CACHE_SLOTS 1024                  // kept blocks at most

typedef struct header {
    size_t size;  // usable bytes after the header
} header;
_Static_assert(sizeof(header) <= HEADER, "the header fits its 64 bytes");

static struct {
    pthread_mutex_t lock;
    int n;
    size_t bytes;
    void *block[ONEDNN_CACHE_SLOTS];  // raw blocks (headers), unordered
    size_t size[ONEDNN_CACHE_SLOTS];  // their sizes: the search reads no block's header
} g_cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t size_of(void *raw) { return ((header *)raw)->size; }

// A kept block of size in [n, n + n / 4], the smallest; NULL if none.
static void *take(size_t n) {
    pthread_mutex_lock(&g_cache.lock);
    int best = -1;
    for (int i = 0; i < g_cache.n; i++) {
        const size_t s = g_cache.size[i];
        if (s >= n && s - n <= n / 4 && (best < 0 || s < g_cache.size[best])) best = i;
    }
    void *raw = NULL;
    if (best >= 0) {
        raw = g_cache.block[best];
        g_cache.bytes -= g_cache.size[best];
        g_cache.n--;
        g_cache.block[best] = g_cache.block[g_cache.n];
        g_cache.size[best] = g_cache.size[g_cache.n];
        KEPT_UNPOISON(raw);
    }
    pthread_mutex_unlock(&g_cache.lock);
    return raw;
}

static void release_locked(void) {
    for (int i = 0; i < g_cache.n; i++) {
        KEPT_UNPOISON(g_cache.block[i]);
        free(g_cache.block[i]);
    }
    g_cache.n = 0;
    g_cache.bytes = 0;
}

void onednn__mem_release_cache(void) {
    pthread_mutex_lock(&g_cache.lock);
    release_locked();
    pthread_mutex_unlock(&g_cache.lock);
}

// Shutdown's: the blocks stay kept (reachable) if the lock is held, never a wait (backend.c).
void onednn__mem_release_cache_nowait(void) {
    if (pthread_mutex_trylock(&g_cache.lock) != 0) return;
    release_locked();
    pthread_mutex_unlock(&g_cache.lock);
}

void *onednn__mem_alloc(size_t nbytes) {
    // Large blocks are whole pages, so that blocks of nearby sizes share a class.
    const size_t unit = nbytes >= ONEDNN_CACHE_MIN ? 4096 : 64;
    if (nbytes > SIZE_MAX - HEADER - unit) return NULL;
    const size_t n = nbytes == 0 ? unit : (nbytes + unit - 1) / unit * unit;
    void *raw = n >= ONEDNN_CACHE_MIN ? take(n) : NULL;
    if (!raw) {
        raw = aligned_alloc(HEADER, HEADER + n);
        if (!raw) {  // memory held for reuse is memory the system lacks now
            onednn__mem_release_cache();
            raw = aligned_alloc(HEADER, HEADER + n);
        }
        if (!raw) return NULL;
        ((header *)raw)->size = n;
    }
    SLACK_POISON(raw, nbytes);
    return (char *)raw + HEADER;
}

void onednn__mem_free(void *ptr) {
    if (!ptr) return;
    void *raw = (char *)ptr - HEADER;
    const size_t s = size_of(raw);
    if (s >= ONEDNN_CACHE_MIN) {
        pthread_mutex_lock(&g_cache.lock);
        const bool keep = g_cache.n < ONEDNN_CACHE_SLOTS && g_cache.bytes + s <= ONEDNN_CACHE_MAX;
        if (keep) {
            KEPT_POISON(raw);
            g_cache.size[g_cache.n] = s;
            g_cache.block[g_cache.n++] = raw;
            g_cache.bytes += s;
        }
        pthread_mutex_unlock(&g_cache.lock);
        if (keep) return;
    }
    free(raw);
}
