// backends/cuda/pinned.c — the pinned host staging pool: size classes, event-gated reuse and a
// byte cap beyond which copies fall back to the synchronous path.
#include "pinned.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t tcu_pinned_class(size_t n) {
    size_t c = TCU_PINNED_MIN;
    while (c < n && c <= (SIZE_MAX >> 1)) c <<= 1;
    return c < n ? n : c;
}

void tcu_pinned_init(tcu_pinned_pool *p, const tcu_pinned_ops *ops) {
    memset(p, 0, sizeof *p);
    p->ops = *ops;
    pthread_mutex_init(&p->mu, NULL);
}

static bool block_ready(tcu_pinned_pool *p, tcu_pinned_block *b) {
    if (b->in_use || !b->ptr) return false;
    return !b->event || p->ops.event_done(p->ops.ctx, b->event) == 1;
}

static void drop_block(tcu_pinned_pool *p, tcu_pinned_block *b) {
    p->ops.host_free(p->ops.ctx, b->ptr);
    if (b->event) p->ops.event_free(p->ops.ctx, b->event);
    p->total -= b->size;
    memset(b, 0, sizeof *b);
}

int tcu_pinned_get(tcu_pinned_pool *p, size_t nbytes, void **ptr) {
    const size_t size = tcu_pinned_class(nbytes);
    if (size > TCU_PINNED_CAP) return -1;
    pthread_mutex_lock(&p->mu);
    int found = -1;
    for (size_t i = 0; i < p->n && found < 0; i++)
        if (p->v[i].size == size && block_ready(p, &p->v[i])) found = (int)i;
    if (found < 0) {
        // Make room under the cap from idle blocks of other sizes whose copies are done.
        for (size_t i = 0; i < p->n && p->total + size > TCU_PINNED_CAP; i++)
            if (p->v[i].ptr && block_ready(p, &p->v[i])) drop_block(p, &p->v[i]);
        if (p->total + size > TCU_PINNED_CAP) {
            pthread_mutex_unlock(&p->mu);
            return -1;
        }
        size_t slot = p->n;
        for (size_t i = 0; i < p->n; i++)
            if (!p->v[i].ptr) { slot = i; break; }
        if (slot == p->n) {
            if (p->n == p->cap) {
                const size_t cap = p->cap ? p->cap * 2 : 16;
                tcu_pinned_block *v = realloc(p->v, cap * sizeof *v);
                if (!v) {
                    pthread_mutex_unlock(&p->mu);
                    return -1;
                }
                p->v = v;
                p->cap = cap;
            }
            p->n++;
        }
        void *mem = NULL;
        if (p->ops.host_alloc(p->ops.ctx, size, &mem) != 0) {
            memset(&p->v[slot], 0, sizeof p->v[slot]);
            pthread_mutex_unlock(&p->mu);
            return -1;
        }
        memset(&p->v[slot], 0, sizeof p->v[slot]);
        p->v[slot].ptr = mem;
        p->v[slot].size = size;
        p->total += size;
        found = (int)slot;
    }
    p->v[found].in_use = true;
    *ptr = p->v[found].ptr;
    pthread_mutex_unlock(&p->mu);
    return found;
}

int tcu_pinned_release(tcu_pinned_pool *p, int idx, void *stream) {
    pthread_mutex_lock(&p->mu);
    tcu_pinned_block *b = &p->v[idx];
    int rc = 0;
    if (!b->event) b->event = p->ops.event_new(p->ops.ctx);
    if (!b->event || p->ops.event_record(p->ops.ctx, b->event, stream) != 0) rc = -1;
    else b->in_use = false;   // on failure it stays "in use": never recycled under a copy
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void tcu_pinned_trim(tcu_pinned_pool *p) {
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].ptr && block_ready(p, &p->v[i])) drop_block(p, &p->v[i]);
    pthread_mutex_unlock(&p->mu);
}

void tcu_pinned_destroy(tcu_pinned_pool *p) {
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].ptr) drop_block(p, &p->v[i]);
    free(p->v);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_destroy(&p->mu);
    memset(p, 0, sizeof *p);
}
