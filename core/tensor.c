// core/tensor.c — storage and tensor lifetimes: allocation, refcounts, views over shared
// storage, version counters, and the per-thread scopes (autorelease pools).
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

// ---- shapes ----
int64_t torc__numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

void torc__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        s *= shape[i] > 1 ? shape[i] : 1;
    }
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
typedef struct scope {
    torc_tensor **owned;   // references the scope releases at pop
    int n_owned, cap_owned;
    torc_tensor **kept;    // references torc_keep took out; they pass to the enclosing scope
    int n_kept, cap_kept;
} scope;

static _Thread_local scope *tls_scopes;
static _Thread_local int tls_depth, tls_cap;

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
    if (t && tls_depth > 0) {
        scope *s = &tls_scopes[tls_depth - 1];
        if (!push_ref(&s->owned, &s->n_owned, &s->cap_owned, t)) {
            // Out of memory for bookkeeping: the caller still gets a valid tensor, and it is
            // leaked rather than freed early (the safe failure).
            return t;
        }
    }
    return t;
}

void torc_scope_push(void) {
    if (tls_depth == tls_cap) {
        int nc = tls_cap ? tls_cap * 2 : 8;
        scope *ns = realloc(tls_scopes, (size_t)nc * sizeof *ns);
        if (!ns) return;  // cannot happen in practice; pop then ignores the unmatched call
        memset(ns + tls_cap, 0, (size_t)(nc - tls_cap) * sizeof *ns);
        tls_scopes = ns;
        tls_cap = nc;
    }
    scope *s = &tls_scopes[tls_depth++];
    s->n_owned = 0;
    s->n_kept = 0;
}

void torc_scope_pop(void) {
    if (tls_depth == 0) return;
    scope *s = &tls_scopes[--tls_depth];
    // Kept references move out first, so a tensor both owned and kept survives.
    for (int i = 0; i < s->n_kept; i++) torc__register(s->kept[i]);
    for (int i = 0; i < s->n_owned; i++) torc_release(s->owned[i]);
    s->n_owned = s->n_kept = 0;
    if (tls_depth == 0) {
        for (int i = 0; i < tls_cap; i++) {
            free(tls_scopes[i].owned);
            free(tls_scopes[i].kept);
        }
        free(tls_scopes);
        tls_scopes = NULL;
        tls_cap = 0;
    }
}

torc_tensor *torc_keep(torc_tensor *t) {
    if (!t) return NULL;
    torc_retain(t);
    if (tls_depth > 0) {
        scope *s = &tls_scopes[tls_depth - 1];
        push_ref(&s->kept, &s->n_kept, &s->cap_kept, t);
    }
    return t;
}

// ---- storage ----
static torc_storage *storage_new(torc_device *dev, size_t nbytes) {
    torc_storage *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->data = torc__dev_alloc(dev, nbytes);
    if (!s->data) {
        free(s);
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    s->alloc_device = dev;
    s->nbytes = nbytes;
    s->tag = TORC_MEM_ACTIVATION;
    torc__mem_add(dev, s->tag, nbytes);
    return s;
}

static void storage_release(torc_storage *s) {
    if (atomic_fetch_sub(&s->refcount, 1) != 1) return;
    torc__mem_sub(s->alloc_device, s->tag, s->nbytes);
    torc__dev_free(s->alloc_device, s->data);
    free(s);
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
    const int64_t numel = torc__numel(ndim, shape);
    const size_t esize = torc_dtype_size(dtype);
    if (numel > 0 && (uint64_t)numel > SIZE_MAX / esize)
        return TORC_FAIL_NULL(TORC_ERR_OOM, "tensor of %lld elements is too large", (long long)numel);
    torc_tensor *t = calloc(1, sizeof *t);
    if (!t) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory for a tensor header");
    t->storage = storage_new(dev, (size_t)numel * esize);
    if (!t->storage) {
        free(t);
        if (torc_last_status() == TORC_OK || torc_last_status() != TORC_ERR_OOM)
            torc__error(TORC_ERR_OOM, "%s: out of memory allocating %zu bytes", dev->name,
                        (size_t)numel * esize);
        return NULL;
    }
    atomic_init(&t->refcount, 1);
    t->device = dev;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    torc__contiguous_strides(ndim, shape, t->stride);
    return t;
}

torc_tensor *torc__make_view(const torc_tensor *base, int ndim, const int64_t *shape,
                             const int64_t *stride, int64_t offset) {
    torc_tensor *t = calloc(1, sizeof *t);
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
    if (!t || atomic_fetch_sub(&t->refcount, 1) != 1) return;
    torc__autograd_release(t);
    torc__fp8_meta_free(t->fp8_meta);
    storage_release(t->storage);
    free(t);
}

void torc__bump_version(torc_tensor *t) { atomic_fetch_add(&t->storage->version, 1); }

void torc__operand(const torc_tensor *t, torc_operand *op) {
    memset(op, 0, sizeof *op);
    op->data = (char *)t->storage->data + (size_t)t->offset * torc_dtype_size(t->dtype);
    op->dtype = t->dtype;
    op->ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) {
        op->shape[i] = t->shape[i];
        op->stride[i] = t->stride[i];
    }
}

torc_status torc_set_mem_tag(torc_tensor *t, torc_mem_tag tag) {
    if (!t) return torc__error(TORC_ERR_INVALID_ARG, "torc_set_mem_tag: tensor is NULL");
    if ((unsigned)tag >= TORC_MEM_TAG_COUNT)
        return torc__error(TORC_ERR_INVALID_ARG, "torc_set_mem_tag: invalid tag %d", (int)tag);
    torc_storage *s = t->storage;
    if (s->tag == tag) return TORC_OK;
    torc__mem_sub(s->alloc_device, s->tag, s->nbytes);
    s->tag = tag;
    torc__mem_add(s->alloc_device, s->tag, s->nbytes);
    return TORC_OK;
}
