// backends/cuda/allocator.c — the caching device allocator: best-fit reuse from per-pool sorted
// free sets, splitting of oversized blocks, merging of freed neighbours, release and retry on OOM.
#include "allocator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- sizes ----
size_t tcu_round_size(size_t n) {
    if (n < TCU_MIN_BLOCK) return TCU_MIN_BLOCK;
    return (n + TCU_MIN_BLOCK - 1) / TCU_MIN_BLOCK * TCU_MIN_BLOCK;
}

size_t tcu_segment_size(size_t rounded) {
    if (rounded <= TCU_SMALL_SIZE) return TCU_SMALL_SEGMENT;
    if (rounded < TCU_MIN_LARGE_ALLOC) return TCU_LARGE_SEGMENT;
    return (rounded + TCU_ROUND_LARGE - 1) / TCU_ROUND_LARGE * TCU_ROUND_LARGE;
}

// ---- sorted block sets ----
static int block_cmp(const tcu_block *x, int stream, size_t size, uintptr_t ptr) {
    if (x->stream != stream) return x->stream < stream ? -1 : 1;
    if (x->size != size) return x->size < size ? -1 : 1;
    if (x->ptr != ptr) return x->ptr < ptr ? -1 : 1;
    return 0;
}

// First index whose block is >= (stream, size, ptr).
static size_t set_lower(const tcu_block_set *s, int stream, size_t size, uintptr_t ptr) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (block_cmp(s->v[mid], stream, size, ptr) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static bool set_insert(tcu_block_set *s, tcu_block *b) {
    if (s->n == s->cap) {
        const size_t cap = s->cap ? s->cap * 2 : 64;
        tcu_block **v = realloc(s->v, cap * sizeof *v);
        if (!v) return false;
        s->v = v;
        s->cap = cap;
    }
    const size_t i = set_lower(s, b->stream, b->size, b->ptr);
    memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof *s->v);
    s->v[i] = b;
    s->n++;
    return true;
}

static void set_erase(tcu_block_set *s, const tcu_block *b) {
    const size_t i = set_lower(s, b->stream, b->size, b->ptr);
    if (i < s->n && s->v[i] == b) {
        memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof *s->v);
        s->n--;
    }
}

// ---- live table (open addressing, linear probing, backward-shift deletion) ----
static size_t hash_ptr(uintptr_t p, size_t cap) {
    uint64_t h = (uint64_t)p * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 17) & (cap - 1);
}

static bool live_put(tcu_allocator *a, tcu_block *b);

static bool live_grow(tcu_allocator *a) {
    const size_t old_cap = a->live_cap;
    tcu_block **old = a->live;
    const size_t cap = old_cap ? old_cap * 2 : 256;
    tcu_block **v = calloc(cap, sizeof *v);
    if (!v) return false;
    a->live = v;
    a->live_cap = cap;
    a->live_n = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i]) live_put(a, old[i]);
    free(old);
    return true;
}

static bool live_put(tcu_allocator *a, tcu_block *b) {
    if ((a->live_n + 1) * 2 > a->live_cap && !live_grow(a)) return false;
    size_t i = hash_ptr(b->ptr, a->live_cap);
    while (a->live[i]) i = (i + 1) & (a->live_cap - 1);
    a->live[i] = b;
    a->live_n++;
    return true;
}

static tcu_block *live_take(tcu_allocator *a, uintptr_t ptr) {
    if (!a->live_cap) return NULL;
    const size_t mask = a->live_cap - 1;
    size_t i = hash_ptr(ptr, a->live_cap);
    while (a->live[i] && a->live[i]->ptr != ptr) i = (i + 1) & mask;
    tcu_block *b = a->live[i];
    if (!b) return NULL;
    // backward-shift: move later entries of the cluster into the hole when they may
    a->live[i] = NULL;
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!a->live[j]) break;
        const size_t h = hash_ptr(a->live[j]->ptr, a->live_cap);
        // entry j may move to the hole i unless its home h lies cyclically in (i, j]
        const bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (!stays) {
            a->live[i] = a->live[j];
            a->live[j] = NULL;
            i = j;
        }
    }
    a->live_n--;
    return b;
}

// ---- the allocator ----
void tcu_allocator_init(tcu_allocator *a, const tcu_raw_ops *raw) {
    memset(a, 0, sizeof *a);
    a->raw = *raw;
    pthread_mutex_init(&a->mu, NULL);
}

static void release_segment(tcu_allocator *a, tcu_block *b) {
    a->raw.free(a->raw.ctx, (void *)b->ptr);
    a->raw_frees++;
    a->reserved -= b->size;
    free(b);
}

// Frees every cached block that is a whole segment (no neighbours). Caller holds the lock.
static void release_cached(tcu_allocator *a) {
    tcu_block_set *sets[2] = {&a->free_small, &a->free_large};
    for (int k = 0; k < 2; k++) {
        tcu_block_set *s = sets[k];
        size_t w = 0;
        for (size_t i = 0; i < s->n; i++) {
            tcu_block *b = s->v[i];
            if (!b->prev && !b->next) release_segment(a, b);
            else s->v[w++] = b;
        }
        s->n = w;
    }
}

static void format_size(char *buf, size_t n, uint64_t bytes) {
    if (bytes >= (UINT64_C(1) << 30)) snprintf(buf, n, "%.2f GiB", (double)bytes / (1 << 30));
    else snprintf(buf, n, "%.2f MiB", (double)bytes / (1 << 20));
}

void *tcu_allocator_alloc(tcu_allocator *a, size_t nbytes, int stream, bool *oom, char *err, size_t err_n) {
    if (oom) *oom = true;
    if (nbytes > SIZE_MAX - TCU_ROUND_LARGE) {
        snprintf(err, err_n, "CUDA out of memory. Tried to allocate %zu bytes", nbytes);
        return NULL;
    }
    const size_t size = tcu_round_size(nbytes);
    const bool small = size <= TCU_SMALL_SIZE;
    pthread_mutex_lock(&a->mu);
    tcu_block_set *pool = small ? &a->free_small : &a->free_large;
    tcu_block *b = NULL;
    const size_t i = set_lower(pool, stream, size, 0);
    if (i < pool->n && pool->v[i]->stream == stream) {
        b = pool->v[i];
        set_erase(pool, b);
    } else {
        const size_t seg = tcu_segment_size(size);
        void *p = NULL;
        char why[200] = "";
        int rc = a->raw.alloc(a->raw.ctx, seg, &p, why, sizeof why);
        if (rc == TCU_RAW_OOM) {  // give the cache back and try once more
            release_cached(a);
            rc = a->raw.alloc(a->raw.ctx, seg, &p, why, sizeof why);
        }
        if (rc != 0 && rc != TCU_RAW_OOM) {
            // Not a lack of memory (a faulted context, say): releasing the cache would not help
            // and would touch a broken device; say what the device said.
            if (oom) *oom = false;
            snprintf(err, err_n, "CUDA error while allocating %zu bytes: %s", size, why[0] ? why : "unknown error");
            pthread_mutex_unlock(&a->mu);
            return NULL;
        }
        if (rc != 0) {
            char want[32], al[32], res[32];
            format_size(want, sizeof want, size);
            format_size(al, sizeof al, a->allocated);
            format_size(res, sizeof res, a->reserved);
            snprintf(err, err_n,
                     "CUDA out of memory. Tried to allocate %s (%s already allocated by torc, "
                     "%s reserved in total; cached blocks were released before giving up)",
                     want, al, res);
            pthread_mutex_unlock(&a->mu);
            return NULL;
        }
        a->raw_allocs++;
        b = calloc(1, sizeof *b);
        if (!b) {
            a->raw.free(a->raw.ctx, p);
            a->raw_frees++;
            snprintf(err, err_n, "out of host memory for the allocator's bookkeeping");
            pthread_mutex_unlock(&a->mu);
            return NULL;
        }
        b->ptr = (uintptr_t)p;
        b->size = seg;
        b->stream = stream;
        b->small = small;
        a->reserved += seg;
        if (a->reserved > a->peak_reserved) a->peak_reserved = a->reserved;
    }
    // Split when the rest is worth keeping: any remainder in the small pool, more than 1 MiB
    // in the large one (PyTorch's rule: small leftovers of large blocks would fragment).
    const size_t rest = b->size - size;
    if ((small && rest >= TCU_MIN_BLOCK) || (!small && rest > TCU_SMALL_SIZE)) {
        tcu_block *r = calloc(1, sizeof *r);
        if (r) {
            r->ptr = b->ptr + size;
            r->size = rest;
            r->stream = stream;
            r->small = small;
            r->prev = b;
            r->next = b->next;
            if (b->next) b->next->prev = r;
            b->next = r;
            b->size = size;
            if (!set_insert(pool, r)) {  // cannot track the rest: undo the split
                b->next = r->next;
                if (r->next) r->next->prev = b;
                b->size += rest;
                free(r);
            }
        }
    }
    b->allocated = true;
    if (!live_put(a, b)) {
        b->allocated = false;
        set_insert(pool, b);
        snprintf(err, err_n, "out of host memory for the allocator's bookkeeping");
        pthread_mutex_unlock(&a->mu);
        return NULL;
    }
    a->allocated += b->size;
    if (a->allocated > a->peak_allocated) a->peak_allocated = a->allocated;
    pthread_mutex_unlock(&a->mu);
    return (void *)b->ptr;
}

bool tcu_allocator_free(tcu_allocator *a, void *ptr) {
    if (!ptr) return true;
    pthread_mutex_lock(&a->mu);
    tcu_block *b = live_take(a, (uintptr_t)ptr);
    if (!b) {
        pthread_mutex_unlock(&a->mu);
        return false;
    }
    tcu_block_set *pool = b->small ? &a->free_small : &a->free_large;
    a->allocated -= b->size;
    b->allocated = false;
    // merge with free neighbours of the same segment (same stream by construction)
    tcu_block *p = b->prev;
    if (p && !p->allocated) {
        set_erase(pool, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next) b->next->prev = p;
        free(b);
        b = p;
    }
    tcu_block *n = b->next;
    if (n && !n->allocated) {
        set_erase(pool, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        free(n);
    }
    if (!set_insert(pool, b)) {
        // No room to cache it: a whole segment goes back to raw, a piece stays unreachable
        // until its neighbours free (then the merge above picks it up again).
        if (!b->prev && !b->next) release_segment(a, b);
    }
    pthread_mutex_unlock(&a->mu);
    return true;
}

void tcu_allocator_empty_cache(tcu_allocator *a) {
    pthread_mutex_lock(&a->mu);
    release_cached(a);
    pthread_mutex_unlock(&a->mu);
}

void tcu_allocator_stats(tcu_allocator *a, tcu_alloc_stats *o) {
    pthread_mutex_lock(&a->mu);
    o->allocated = a->allocated;
    o->reserved = a->reserved;
    o->peak_allocated = a->peak_allocated;
    o->peak_reserved = a->peak_reserved;
    o->raw_allocs = a->raw_allocs;
    o->raw_frees = a->raw_frees;
    o->cached_blocks = a->free_small.n + a->free_large.n;
    pthread_mutex_unlock(&a->mu);
}

void tcu_allocator_reset_peak(tcu_allocator *a) {
    pthread_mutex_lock(&a->mu);
    a->peak_allocated = a->allocated;
    a->peak_reserved = a->reserved;
    pthread_mutex_unlock(&a->mu);
}

void tcu_allocator_destroy(tcu_allocator *a) {
    pthread_mutex_lock(&a->mu);
    // Free every segment once: walk from each known block to its segment head.
    tcu_block **heads = NULL;
    size_t nh = 0, cap = 0;
    tcu_block_set *sets[2] = {&a->free_small, &a->free_large};
    for (int pass = 0; pass < 3; pass++) {
        size_t cnt = pass < 2 ? sets[pass]->n : a->live_cap;
        for (size_t i = 0; i < cnt; i++) {
            tcu_block *b = pass < 2 ? sets[pass]->v[i] : a->live[i];
            if (!b) continue;
            while (b->prev) b = b->prev;
            bool seen = false;
            for (size_t j = 0; j < nh && !seen; j++) seen = heads[j] == b;
            if (seen) continue;
            if (nh == cap) {
                cap = cap ? cap * 2 : 64;
                tcu_block **v = realloc(heads, cap * sizeof *v);
                if (!v) break;
                heads = v;
            }
            heads[nh++] = b;
        }
    }
    for (size_t j = 0; j < nh; j++) {
        tcu_block *b = heads[j];
        a->raw.free(a->raw.ctx, (void *)b->ptr);
        a->raw_frees++;
        while (b) {
            tcu_block *n = b->next;
            free(b);
            b = n;
        }
    }
    free(heads);
    free(a->free_small.v);
    free(a->free_large.v);
    free(a->live);
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_destroy(&a->mu);
    memset(a, 0, sizeof *a);
}
