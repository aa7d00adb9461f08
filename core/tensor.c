// core/tensor.c — storage and tensor lifetimes: allocation, refcounts, views over shared
// storage, version counters, and the per-thread scopes (autorelease pools).
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POOL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define POOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POOL_POISON(p, n) ((void)(p), (void)(n))
#define POOL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

// The thread's scope stack (scopes section below). Its arrays stay allocated between
// outermost scopes (a training loop pushes and pops one per step) when the thread has a pool
// cache, whose destructor frees them at thread exit; otherwise they go at the outermost pop.
typedef struct scope {
    torc_tensor **owned;   // references the scope releases at pop
    int n_owned, cap_owned;
    torc_tensor **kept;    // references torc_keep took out; they pass to the enclosing scope
    int n_kept, cap_kept;
} scope;

typedef struct scope_stack {
    scope *s;
    int depth, cap;
} scope_stack;

static TORC__TLS_HOT _Thread_local scope_stack tls_sc;

static void scope_stack_free(scope_stack *st) {
    for (int i = 0; i < st->cap; i++) {
        free(st->s[i].owned);
        free(st->s[i].kept);
    }
    free(st->s);
    *st = (scope_stack){0};
}

// ---- pools ----
// A tiny op's result used to cost three mallocs and three frees (tensor header, storage object,
// data), about a third of its time. Each thread keeps free lists of headers, storage objects,
// autograd nodes and small host data buffers instead; anything freed on a thread goes to that
// thread's lists, so memory released on another thread than the one that allocated it is fine.
// Bounds: POOL_OBJ_CAP objects per kind and POOL_DATA_CAP buffers per 64-byte size class up to
// POOL_DATA_MAX bytes (about 120 KiB per thread at most). A thread's cache is freed when the
// thread exits (a pthread key destructor); the main thread's stays reachable from a global
// registry until the process ends, so leak checkers see it as reachable, never lost. Shutdown
// (torc_shutdown or the exit handler) first drains every thread's data buffers into their
// backends and ends data pooling (torc__pools_drain), so that no backend sees a free() after its
// shutdown().
// Accounting: a pooled data buffer is not in use by any tensor, so it is subtracted from the
// device's in_use when its storage dies, exactly as a freed one (PyTorch's memory_allocated does
// not count its caching allocator's free blocks either); it is counted again when reused.
// Only host-memory devices pool data. The lists are arrays in the cache, not links through the
// blocks, so under AddressSanitizer a pooled block is poisoned whole (a use after release is
// still reported) and LeakSanitizer still sees every pooled block.
#define POOL_OBJ_CAP 64
#define POOL_DATA_MAX 1024
#define POOL_DATA_CAP 16
#define POOL_DATA_CLASSES (POOL_DATA_MAX / 64)

typedef struct pool_cache {
    int n_obj[TORC__POOL_KINDS];
    void *obj[TORC__POOL_KINDS][POOL_OBJ_CAP];
    int n_data[POOL_DATA_CLASSES];               // class c holds buffers of (c + 1) * 64 bytes
    torc_device *data_dev[POOL_DATA_CLASSES];    // the device a class's buffers belong to
    void *data[POOL_DATA_CLASSES][POOL_DATA_CAP];
    struct pool_cache *prev, *next;              // the registry of live threads' caches
} pool_cache;

static TORC__TLS_HOT _Thread_local pool_cache *tls_pool;
static TORC__TLS_HOT _Thread_local bool tls_pool_dead;  // the thread is exiting: no new cache
static pool_cache *g_pools;               // registry: keeps every live cache reachable
static pthread_mutex_t g_pools_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t g_pool_key;
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;
static bool g_pool_key_ok;
static _Atomic bool g_data_closed;  // shutdown has begun: data is no longer pooled (torc__pools_drain)

// Returns class k's buffers to their device (torc__dev_free drops them if its backend has shut
// down). Caller holds g_pools_lock, which orders this against torc__pools_drain.
static void drain_data_locked(pool_cache *c, int k) {
    for (int i = 0; i < c->n_data[k]; i++) {
        POOL_UNPOISON(c->data[k][i], (size_t)(k + 1) * 64);
        torc__dev_free(c->data_dev[k], c->data[k][i]);
    }
    c->n_data[k] = 0;
}

static void pool_destroy(void *arg) {
    pool_cache *c = arg;
    for (int k = 0; k < TORC__POOL_KINDS; k++)
        for (int i = 0; i < c->n_obj[k]; i++) free(c->obj[k][i]);  // ASan's free takes poisoned blocks
    pthread_mutex_lock(&g_pools_lock);
    for (int k = 0; k < POOL_DATA_CLASSES; k++) drain_data_locked(c, k);
    if (c->prev) c->prev->next = c->next;
    else g_pools = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&g_pools_lock);
    free(c);
    tls_pool = NULL;
    tls_pool_dead = true;
    if (tls_sc.depth == 0) scope_stack_free(&tls_sc);
}

// Shutdown's first step (device.c, under the registry's lock): every live thread's data buffers
// go back to their backends, and pooling of data ends for the rest of the process, so that no
// backend gets a free() after its shutdown(). The other threads must not be inside a torc call
// (torc.h: torc_shutdown; backend.h: shutdown never runs concurrently with another call); they
// may be alive and exit later, their caches then empty. Buffers of the backend skip (the one whose
// call exit() interrupted on this thread) stay where they are, reachable, and are never freed.
// With wait false (the exit handler) a busy registry is not waited for: false, nothing drained.
bool torc__pools_drain(const torc_backend_lib *skip, bool wait) {
    atomic_store_explicit(&g_data_closed, true, memory_order_relaxed);
    if (!wait && pthread_mutex_trylock(&g_pools_lock) != 0) return false;
    if (wait) pthread_mutex_lock(&g_pools_lock);
    for (pool_cache *c = g_pools; c; c = c->next)
        for (int k = 0; k < POOL_DATA_CLASSES; k++)
            if (c->n_data[k] > 0 && c->data_dev[k]->lib != skip) drain_data_locked(c, k);
    pthread_mutex_unlock(&g_pools_lock);
    return true;
}

static void pool_key_create(void) { g_pool_key_ok = pthread_key_create(&g_pool_key, pool_destroy) == 0; }

// The calling thread's cache, made on first use; NULL if it cannot be (the callers then use
// malloc and free directly). Callers fetch it once per operation: each thread-local access from
// a shared library is a call.
static pool_cache *pool_get(void) {
    pool_cache *c = tls_pool;
    if (c || tls_pool_dead) return c;
    pthread_once(&g_pool_once, pool_key_create);
    if (!g_pool_key_ok || !(c = calloc(1, sizeof *c))) return NULL;
    if (pthread_setspecific(g_pool_key, c) != 0) {
        free(c);
        return NULL;
    }
    pthread_mutex_lock(&g_pools_lock);
    c->next = g_pools;
    if (g_pools) g_pools->prev = c;
    g_pools = c;
    pthread_mutex_unlock(&g_pools_lock);
    return tls_pool = c;
}

static inline void *obj_alloc(pool_cache *c, torc__pool_kind kind, size_t size) {
    if (!c || c->n_obj[kind] == 0) return calloc(1, size);
    void *p = c->obj[kind][--c->n_obj[kind]];
    POOL_UNPOISON(p, size);
    memset(p, 0, size);
    return p;
}

static inline void obj_free(pool_cache *c, torc__pool_kind kind, void *p, size_t size) {
    if (!p) return;
    if (!c || c->n_obj[kind] == POOL_OBJ_CAP) {
        free(p);
        return;
    }
    POOL_POISON(p, size);
    c->obj[kind][c->n_obj[kind]++] = p;
}

void *torc__pool_alloc(torc__pool_kind kind, size_t size) { return obj_alloc(pool_get(), kind, size); }
void torc__pool_free(torc__pool_kind kind, void *p, size_t size) { obj_free(pool_get(), kind, p, size); }

// The data of every storage of 0 bytes: backends are never asked for 0 bytes (backend.h's Memory
// rule). Nothing reads or writes it; it is aligned as any allocation is.
static max_align_t g_empty_data;

// Data for nbytes on dev: a pooled buffer of its size class when there is one, else the device's.
static void *data_alloc(pool_cache *c, torc_device *dev, size_t nbytes) {
    if (nbytes == 0) return &g_empty_data;
    if (!c || nbytes > POOL_DATA_MAX || !dev->host_memory ||
        atomic_load_explicit(&g_data_closed, memory_order_relaxed))
        return torc__dev_alloc(dev, nbytes);
    const size_t k = (nbytes - 1) / 64, size = (k + 1) * 64;
    if (c->n_data[k] == 0 || c->data_dev[k] != dev) return torc__dev_alloc(dev, size);  // poolable later
    void *p = c->data[k][--c->n_data[k]];
    POOL_UNPOISON(p, size);
    return p;
}

static void data_free(pool_cache *c, torc_device *dev, void *p, size_t nbytes) {
    if (nbytes == 0) return;  // g_empty_data
    if (!c || nbytes > POOL_DATA_MAX || !dev->host_memory ||
        atomic_load_explicit(&g_data_closed, memory_order_relaxed)) {
        torc__dev_free(dev, p);
        return;
    }
    const size_t k = (nbytes - 1) / 64;
    if (c->n_data[k] == 0) c->data_dev[k] = dev;
    if (c->data_dev[k] != dev || c->n_data[k] == POOL_DATA_CAP) {
        torc__dev_free(dev, p);
        return;
    }
    POOL_POISON(p, (k + 1) * 64);
    c->data[k][c->n_data[k]++] = p;
}

// ---- shapes ----
int64_t torc__numel(int ndim, const int64_t *shape) {
    // Every tensor's shape was checked when it was made; only an empty one may have dims whose
    // product overflows, and its count is 0 whatever the order of the dims.
    int64_t n;
    return torc__numel_checked(ndim, shape, &n) ? n : 0;
}

bool torc__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
    // An empty tensor's other dims may be as large as the caller likes (PyTorch allows
    // (0, 2^62, 4)), so the running product is checked even when numel was.
    int64_t s = 1;
    bool ok = true;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        if (i > 0 && ok && !torc__size_mul(s, shape[i] > 1 ? shape[i] : 1, &s)) ok = false;  // (dim 0's size is no stride)
    }
    return ok;
}

const char *torc__shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

bool torc__wrap_dim(int *dim, int ndim) {
    const int n = ndim > 0 ? ndim : 1;  // PyTorch treats a zero-dim tensor as having range [-1, 0]
    if (*dim < -n || *dim >= n) {
        torc__error(TORC_ERR_INDEX,
                    "Dimension out of range (expected to be in range of [%d, %d], but got %d)",
                    -n, n - 1, *dim);
        return false;
    }
    if (*dim < 0) *dim += n;
    return true;
}

// ---- scopes ----

static bool push_ref(torc_tensor ***arr, int *n, int *cap, torc_tensor *t) {
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        torc_tensor **na = realloc(*arr, (size_t)nc * sizeof *na);
        if (!na) return false;
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = t;
    return true;
}

torc_tensor *torc__register(torc_tensor *t) {
    scope_stack *st = &tls_sc;
    if (t && st->depth > 0) {
        scope *s = &st->s[st->depth - 1];
        if (!push_ref(&s->owned, &s->n_owned, &s->cap_owned, t)) {
            // Out of memory for bookkeeping: the caller still gets a valid tensor, and it is
            // leaked rather than freed early (the safe failure).
            return t;
        }
    }
    return t;
}

void torc_scope_push(void) {
    scope_stack *st = &tls_sc;
    if (st->depth == st->cap) {
        int nc = st->cap ? st->cap * 2 : 8;
        scope *ns = realloc(st->s, (size_t)nc * sizeof *ns);
        if (!ns) return;  // cannot happen in practice; pop then ignores the unmatched call
        memset(ns + st->cap, 0, (size_t)(nc - st->cap) * sizeof *ns);
        st->s = ns;
        st->cap = nc;
    }
    scope *s = &st->s[st->depth++];
    s->n_owned = 0;
    s->n_kept = 0;
}

void torc_scope_pop(void) {
    scope_stack *st = &tls_sc;
    if (st->depth == 0) return;
    scope *s = &st->s[--st->depth];
    // Kept references move out first, so a tensor both owned and kept survives.
    for (int i = 0; i < s->n_kept; i++) torc__register(s->kept[i]);
    for (int i = 0; i < s->n_owned; i++) torc_release(s->owned[i]);
    s->n_owned = s->n_kept = 0;
    if (st->depth == 0 && !pool_get()) scope_stack_free(st);
}

torc_tensor *torc_keep(torc_tensor *t) {
    if (!t) return NULL;
    torc_retain(t);
    scope_stack *st = &tls_sc;
    if (st->depth > 0) {
        scope *s = &st->s[st->depth - 1];
        push_ref(&s->kept, &s->n_kept, &s->cap_kept, t);
    }
    return t;
}

// ---- storage ----
static torc_storage *storage_new(pool_cache *c, torc_device *dev, size_t nbytes) {
    torc_storage *s = obj_alloc(c, TORC__POOL_STORAGE, sizeof *s);
    if (!s) return TORC_FAIL_NULL(TORC_ERR_OOM, "%s: out of host memory for a storage header", dev->name);
    s->data = data_alloc(c, dev, nbytes);  // on failure torc__dev_alloc says why
    if (!s->data) {
        obj_free(c, TORC__POOL_STORAGE, s, sizeof *s);
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    s->alloc_device = dev;
    s->nbytes = nbytes;
    s->tag = TORC_MEM_ACTIVATION;
    torc__mem_note_alloc(s);
    torc__mem_add(dev, s->tag, nbytes);
    return s;
}

static void storage_release(pool_cache *c, torc_storage *s) {
    if (!torc__unref(&s->refcount)) return;
    torc__mem_note_free(s);
    torc__mem_sub(s->alloc_device, s->tag, s->nbytes);
    data_free(c, s->alloc_device, s->data, s->nbytes);
    obj_free(c, TORC__POOL_STORAGE, s, sizeof *s);
}

// ---- tensors ----
torc_tensor *torc__new(torc_device *dev, torc_dtype dtype, int ndim, const int64_t *shape) {
    if (!dev) return NULL;
    if (ndim < 0 || ndim > TORC_MAX_DIMS)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "torc supports at most %d dims, got %d",
                              TORC_MAX_DIMS, ndim);
    if (!torc__dtype_valid(dtype))
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "invalid dtype %d", (int)dtype);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            char b[TORC_SHAPE_STR_MAX];
            return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG,
                                  "Trying to create tensor with negative dimension %lld: %s",
                                  (long long)shape[i], torc__shape_str(ndim, shape, b, sizeof b));
        }
    size_t nbytes;
    int64_t stride[TORC_MAX_DIMS];
    if (!torc__nbytes_err(ndim, shape, torc_dtype_size(dtype), &nbytes)) return NULL;
    if (!torc__contiguous_strides(ndim, shape, stride))
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "Stride calculation overflowed");
    pool_cache *c = pool_get();
    torc_tensor *t = obj_alloc(c, TORC__POOL_TENSOR, sizeof *t);
    if (!t) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory for a tensor header");
    t->storage = storage_new(c, dev, nbytes);
    if (!t->storage) {  // storage_new said why (out of memory, shut down, a misaligned block)
        obj_free(c, TORC__POOL_TENSOR, t, sizeof *t);
        return NULL;
    }
    atomic_init(&t->refcount, 1);
    t->device = dev;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim) {
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
        memcpy(t->stride, stride, (size_t)ndim * sizeof *stride);
    }
    return t;
}

torc_tensor *torc__make_view(const torc_tensor *base, int ndim, const int64_t *shape,
                             const int64_t *stride, int64_t offset) {
    torc_tensor *t = torc__pool_alloc(TORC__POOL_TENSOR, sizeof *t);
    if (!t) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory for a tensor header");
    atomic_init(&t->refcount, 1);
    t->storage = base->storage;
    atomic_fetch_add(&t->storage->refcount, 1);
    t->device = base->device;
    t->dtype = base->dtype;
    t->ndim = ndim;
    if (ndim) {
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
        memcpy(t->stride, stride, (size_t)ndim * sizeof *stride);
    }
    t->offset = offset;
    return t;
}

torc_tensor *torc_retain(torc_tensor *t) {
    if (t) atomic_fetch_add(&t->refcount, 1);
    return t;
}

void torc__autograd_release(torc_tensor *t);  // autograd.c: drops grad, grad_fn

void torc_release(torc_tensor *t) {
    if (!t || !torc__unref(&t->refcount)) return;
    torc__autograd_release(t);
    torc__fp8_meta_free(t->fp8_meta);
    pool_cache *c = pool_get();
    storage_release(c, t->storage);
    obj_free(c, TORC__POOL_TENSOR, t, sizeof *t);
}

void torc__bump_version(torc_tensor *t) { atomic_fetch_add(&t->storage->version, 1); }

void torc__operand(const torc_tensor *t, torc_operand *op) {
    op->data = (char *)t->storage->data + (size_t)t->offset * torc_dtype_size(t->dtype);
    op->dtype = t->dtype;
    op->ndim = t->ndim;
    // Whole arrays: a header's dims past ndim are zero (headers start zeroed and only torc__new
    // and torc__make_view write shapes, ndim entries each), as backends that hash operands expect.
    memcpy(op->shape, t->shape, sizeof op->shape);
    memcpy(op->stride, t->stride, sizeof op->stride);
}

torc_status torc_set_mem_tag(torc_tensor *t, torc_mem_tag tag) {
    if (!t) return torc__null_arg("torc_set_mem_tag: tensor is NULL");
    if ((unsigned)tag >= TORC_MEM_TAG_COUNT)
        return torc__error(TORC_ERR_INVALID_ARG, "torc_set_mem_tag: invalid tag %d", (int)tag);
    torc_storage *s = t->storage;
    if (s->tag == tag) return TORC_OK;
    torc__mem_sub(s->alloc_device, s->tag, s->nbytes);
    s->tag = tag;
    torc__mem_add(s->alloc_device, s->tag, s->nbytes);
    return TORC_OK;
}
