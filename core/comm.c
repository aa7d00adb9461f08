// core/comm.c — the comm plugin (libtorc_comm_<name>.so) and the collectives on tensors: staging
// of non-contiguous and f16/bf16 tensors, averaging, timeouts. The plugin only moves bytes.
// Loaded by the one plugin loader (core/plugin.c, kind torc__plugin_comm): the first file of the
// name on the search path decides, and a failure lists every file tried.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm-impl.h"
#include "torc-impl.h"
#include "torc/comm.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const torc_comm_vtable *vt;
    void *ctx;
    char name[32];
    int rank, size, local_rank;
    int device;  // the plugin's device index (v1.1 device()), -1 when not told
    double timeout_s;
    bool timed_out;  // a collective timed out: the job is broken, later waits only look
} g;

double torc__now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// ---- loading (the one plugin loader, core/plugin.c, with the comm kind's checks) ----
static void *accept(void *ctx, const char *path, void *handle, void *entry, char *why, size_t n, bool *keep_open) {
    const char *name = ctx;
    (void)path;
    (void)handle;
    const torc_comm_vtable *vt = ((torc_comm_entry_fn)entry)(TORC_COMM_ABI_VERSION);
    if (!vt) snprintf(why, n, "the plugin refused torc's comm ABI %u.%u", TORC_COMM_ABI_MAJOR, TORC_COMM_ABI_MINOR);
    else if (vt->abi_version >> 16 != TORC_COMM_ABI_MAJOR)
        snprintf(why, n, "plugin built for comm ABI %u.%u, but this torc speaks ABI %u.%u", vt->abi_version >> 16,
                 vt->abi_version & 0xFFFF, TORC_COMM_ABI_MAJOR, TORC_COMM_ABI_MINOR);
    else if (vt->struct_size < TORC_COMM_VTABLE_V1_SIZE)
        snprintf(why, n, "plugin vtable is %u bytes, smaller than the %u bytes comm ABI %u.0 requires", vt->struct_size,
                 TORC_COMM_VTABLE_V1_SIZE, TORC_COMM_ABI_MAJOR);
    else if (!vt->name || strcmp(vt->name, name))
        snprintf(why, n, "file is named for comm plugin '%s' but its vtable says '%s'", name, vt->name ? vt->name : "(null)");
    else {
        const char *missing = !vt->init             ? "init"
                              : !vt->shutdown       ? "shutdown"
                              : !vt->rank           ? "rank"
                              : !vt->world_size     ? "world_size"
                              : !vt->local_rank     ? "local_rank"
                              : !vt->all_reduce     ? "all_reduce"
                              : !vt->broadcast      ? "broadcast"
                              : !vt->all_gather     ? "all_gather"
                              : !vt->reduce_scatter ? "reduce_scatter"
                              : !vt->barrier        ? "barrier"
                              : !vt->wait           ? "wait"
                              : !vt->abort          ? "abort"
                              : !vt->last_error     ? "last_error"
                                                    : NULL;
        if (missing) snprintf(why, n, "plugin vtable lacks the required member %s (it is NULL)", missing);
    }
    if (why[0]) return NULL;
    if (vt->init(&g.ctx) != 0) {
        const char *m = vt->last_error(NULL);
        snprintf(why, n, "init failed: %s", m && *m ? m : "(no reason given)");
        *keep_open = true;  // MPI and CUDA runtimes do not survive dlclose after init
        return NULL;
    }
    return (void *)vt;
}

torc_status torc_dist_init(const char *name) {
    if (!name || !*name) name = getenv("TORC_COMM");
    if (!name || !*name) name = "mpi";
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_') || p - name >= 31)
            return torc__error(TORC_ERR_INVALID_ARG, "invalid comm plugin name '%s'", name);
    // TORC_COMM_TIMEOUT is read before anything loads: a value that is not a number would
    // otherwise turn hang detection off without a word.
    double timeout_s = 60.0;
    const char *t = getenv("TORC_COMM_TIMEOUT");
    if (t && *t) {
        char *end = NULL;
        errno = 0;
        timeout_s = strtod(t, &end);
        while (end && (*end == ' ' || *end == '\t' || *end == '\n')) end++;
        if (end == t || *end || errno == ERANGE || !(timeout_s >= 0) || timeout_s > 1e9)
            return torc__error(TORC_ERR_INVALID_ARG,
                               "TORC_COMM_TIMEOUT must be a number of seconds from 0 to 1e9 (0: no limit), got '%s'", t);
    }
    pthread_mutex_lock(&g_lock);
    torc_status st = TORC_OK;
    if (g.vt) {
        if (strcmp(g.name, name))
            st = torc__error(TORC_ERR_INVALID_ARG, "torc_dist_init: comm plugin '%s' is already initialized; cannot switch to '%s'",
                             g.name, name);
        pthread_mutex_unlock(&g_lock);
        return st;
    }
    const torc_comm_vtable *vt = torc__plugin_load(&torc__plugin_comm, name, accept, (void *)name);
    if (!vt) {
        st = torc_last_status();
    } else {
        g.vt = vt;
        snprintf(g.name, sizeof g.name, "%s", name);
        g.rank = g.vt->rank(g.ctx);
        g.size = g.vt->world_size(g.ctx);
        g.local_rank = g.vt->local_rank(g.ctx);
        const bool has_device = TORC_STRUCT_HAS(vt, torc_comm_vtable, device) && vt->device;
        g.device = vt->memory == TORC_COMM_MEMORY_HOST || !has_device ? -1 : vt->device(g.ctx);
        g.timeout_s = timeout_s;
    }
    pthread_mutex_unlock(&g_lock);
    return st;
}

bool torc_dist_is_initialized(void) { return g.vt != NULL; }
int torc_dist_rank(void) { return g.vt ? g.rank : 0; }
int torc_dist_world_size(void) { return g.vt ? g.size : 1; }
int torc_dist_local_rank(void) { return g.vt ? g.local_rank : 0; }
int torc_dist_device_index(void) { return g.vt ? g.device : -1; }

torc_status torc_dist_shutdown(void) {
    pthread_mutex_lock(&g_lock);
    if (g.vt) g.vt->shutdown(g.ctx);
    g.vt = NULL;
    g.ctx = NULL;
    pthread_mutex_unlock(&g_lock);
    return TORC_OK;
}

void torc_dist_abort(int code) {
    if (g.vt) g.vt->abort(g.ctx, code);
    exit(code);
}

// ---- collectives on tensors ----
typedef enum { K_ALL_REDUCE, K_BROADCAST, K_ALL_GATHER, K_REDUCE_SCATTER } kind;

struct torc_work {
    torc_comm_request *req;
    kind k;
    torc_reduce_op op;
    int root;                // broadcast
    torc_tensor *dst;        // owned reference: the user's result tensor
    torc_tensor *recv;       // owned: contiguous buffer the plugin writes (dst itself when direct)
    torc_tensor *send;       // owned: contiguous input the plugin reads (NULL when recv is in place)
    double started;
};

static torc_status need_init(const char *what) {
    if (!g.vt)
        return torc__error(TORC_ERR_RUNTIME, "%s: the distributed job is not initialized (call torc_dist_init first)", what);
    return TORC_OK;
}

static void *data_of(const torc_tensor *t) {
    return (char *)t->storage->data + (size_t)t->offset * torc_dtype_size(t->dtype);
}

static torc_status check_device(const torc_tensor *t, const char *what) {
    const bool host = t->device->host_memory;
    if (host != (g.vt->memory == TORC_COMM_MEMORY_HOST))
        return torc__error(TORC_ERR_INVALID_ARG, "%s: tensor on %s but comm plugin '%s' works on %s memory", what,
                           t->device->name, g.name, g.vt->memory == TORC_COMM_MEMORY_HOST ? "host" : "CUDA device");
    if (g.device >= 0 && t->device->index != g.device)
        return torc__error(TORC_ERR_INVALID_ARG,
                           "%s: tensor on %s but comm plugin '%s' runs this process's collectives on device %d (local "
                           "rank %d): put its tensors there (torc_dist_device_index)",
                           what, t->device->name, g.name, g.device, g.local_rank);
    return TORC_OK;
}

// The dtype a reduction runs in for t's dtype (f16/bf16 widen to f32), or COUNT with the error set.
static torc_dtype reduce_dtype(torc_dtype d, torc_reduce_op op, const char *what, torc_comm_dtype *cd) {
    switch (d) {
    case TORC_DTYPE_F32: case TORC_DTYPE_F16: case TORC_DTYPE_BF16: *cd = TORC_COMM_DTYPE_F32; return TORC_DTYPE_F32;
    case TORC_DTYPE_F64: *cd = TORC_COMM_DTYPE_F64; return TORC_DTYPE_F64;
    case TORC_DTYPE_I32: *cd = TORC_COMM_DTYPE_I32; break;
    case TORC_DTYPE_I64: *cd = TORC_COMM_DTYPE_I64; break;
    default:
        torc__error(TORC_ERR_DTYPE, "%s: dtype %s is not supported (float32, float64, float16, bfloat16, int32, int64)", what,
                    torc_dtype_name(d));
        return TORC_DTYPE_COUNT;
    }
    if (op == TORC_REDUCE_AVG) {
        torc__error(TORC_ERR_DTYPE, "%s: AVG needs a floating dtype, got %s", what, torc_dtype_name(d));
        return TORC_DTYPE_COUNT;
    }
    return d;
}

static torc_comm_op comm_op(torc_reduce_op op) {
    return op == TORC_REDUCE_MAX ? TORC_COMM_OP_MAX : op == TORC_REDUCE_MIN ? TORC_COMM_OP_MIN : TORC_COMM_OP_SUM;
}

// t itself (a new reference) when the plugin can use it directly, else a contiguous copy in dtype.
static torc_tensor *as_buffer(const torc_tensor *t, torc_dtype dtype) {
    if (t->dtype == dtype && torc_is_contiguous(t)) return torc_retain((torc_tensor *)t);
    return torc__copy_as(t, dtype);
}

static void work_free(torc_work *w) {
    if (!w) return;
    torc_release(w->dst);
    torc_release(w->recv);
    torc_release(w->send);
    free(w);
}

static torc_status plugin_error(void) {
    return torc__error(TORC_ERR_RUNTIME, "%s", g.vt->last_error(g.ctx));
}

// Finishes w: waits, averages, writes back into dst (rounding once), frees w.
static torc_status finish(torc_work *w, double *finished_at) {
    torc_status st = TORC_OK;
    const bool broken = g.timed_out;
    const int rc = g.vt->wait(g.ctx, w->req, broken ? 0.01 : g.timeout_s, finished_at);
    if (rc == TORC_COMM_TIMED_OUT) g.timed_out = true;
    if (rc) {
        // The first timeout's message (naming the cause) stands; later ones only repeat it.
        st = rc == TORC_COMM_TIMED_OUT && broken ? TORC_ERR_RUNTIME : plugin_error();
        // A collective that timed out may still write its buffers: they stay allocated (and w
        // with them) until the process ends, which torc_dist_abort is for.
        if (rc != TORC_COMM_TIMED_OUT) work_free(w);
        return st;
    }
    torc_no_grad_begin();
    torc_scope_push();
    if (w->op == TORC_REDUCE_AVG && (w->k == K_ALL_REDUCE || w->k == K_REDUCE_SCATTER))
        st = torc_div_scalar_(w->recv, torc_scalar_f((double)g.size));
    if (!st && w->recv != w->dst) st = torc__copy(w->dst, w->recv);
    else if (!st) torc__bump_version(w->dst);
    torc_scope_pop();
    torc_no_grad_end();
    work_free(w);
    return st;
}

static torc_status launch(torc_work *w, torc_work **out) {
    // A device backend runs its kernels on its own stream and the plugin its collectives on
    // another, unordered with it: the buffers (and the copies as_buffer just enqueued) are ready
    // only once the device has done what came before. Found on an H200 with nccl: an all-gather
    // into a fresh torc_zeros tensor was zeroed after NCCL had written it. The host then waits for
    // the collective (finish) before anything reads its result, which orders the way back.
    if (!w->recv->device->host_memory) {
        const torc_status st = torc_device_synchronize(w->recv->device);
        if (st) {
            work_free(w);
            return st;
        }
    }
    int rc;
    const size_t n = (size_t)torc_numel(w->recv);
    const void *send = w->send ? data_of(w->send) : data_of(w->recv);
    torc_comm_dtype cd = TORC_COMM_DTYPE_U8;
    size_t count = n;
    if (w->k == K_ALL_REDUCE || w->k == K_REDUCE_SCATTER) {
        cd = w->recv->dtype == TORC_DTYPE_F32 ? TORC_COMM_DTYPE_F32 : w->recv->dtype == TORC_DTYPE_F64 ? TORC_COMM_DTYPE_F64
             : w->recv->dtype == TORC_DTYPE_I32 ? TORC_COMM_DTYPE_I32 : TORC_COMM_DTYPE_I64;
    } else {
        count = n * torc_dtype_size(w->recv->dtype);
        if (w->k == K_ALL_GATHER) count /= (size_t)g.size;
    }
    w->started = torc__now();
    switch (w->k) {
    case K_ALL_REDUCE: rc = g.vt->all_reduce(g.ctx, send, data_of(w->recv), count, cd, comm_op(w->op), &w->req); break;
    case K_BROADCAST: rc = g.vt->broadcast(g.ctx, data_of(w->recv), count, cd, w->root, &w->req); break;
    case K_ALL_GATHER: rc = g.vt->all_gather(g.ctx, send, data_of(w->recv), count, cd, &w->req); break;
    default: rc = g.vt->reduce_scatter(g.ctx, send, data_of(w->recv), count, cd, comm_op(w->op), &w->req); break;
    }
    if (rc) {
        torc_status st = plugin_error();
        work_free(w);
        return st;
    }
    if (out) {
        *out = w;
        return TORC_OK;
    }
    return finish(w, NULL);
}

static torc_work *work_new(kind k, torc_tensor *dst, int op) {
    torc_work *w = calloc(1, sizeof *w);
    if (!w) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory");
    w->k = k;
    w->op = op;
    w->dst = torc_retain(dst);
    return w;
}

torc_status torc_dist_all_reduce(torc_tensor *t, torc_reduce_op op, torc_work **work) {
    if (work) *work = NULL;
    torc_status st;
    if ((st = need_init("all_reduce"))) return st;
    if (!t) return torc__error(TORC_ERR_INVALID_ARG, "all_reduce: tensor is NULL");
    if (op < TORC_REDUCE_SUM || op > TORC_REDUCE_MIN) return torc__error(TORC_ERR_INVALID_ARG, "all_reduce: invalid op %d", (int)op);
    if ((st = check_device(t, "all_reduce"))) return st;
    torc_comm_dtype cd;
    const torc_dtype rd = reduce_dtype(t->dtype, op, "all_reduce", &cd);
    if (rd == TORC_DTYPE_COUNT) return torc_last_status();
    torc_work *w = work_new(K_ALL_REDUCE, t, op);
    if (!w || !(w->recv = as_buffer(t, rd))) {
        work_free(w);
        return torc_last_status();
    }
    return launch(w, work);
}

torc_status torc_dist_broadcast(torc_tensor *t, int root, torc_work **work) {
    if (work) *work = NULL;
    torc_status st;
    if ((st = need_init("broadcast"))) return st;
    if (!t) return torc__error(TORC_ERR_INVALID_ARG, "broadcast: tensor is NULL");
    if (root < 0 || root >= g.size)
        return torc__error(TORC_ERR_INVALID_ARG, "broadcast: root %d is out of range for world size %d", root, g.size);
    if ((st = check_device(t, "broadcast"))) return st;
    torc_work *w = work_new(K_BROADCAST, t, 0);
    if (w) w->root = root;
    if (!w || !(w->recv = as_buffer(t, t->dtype))) {
        work_free(w);
        return torc_last_status();
    }
    return launch(w, work);
}

// out must be (world_size * in.shape[0], in.shape[1:]) (gather) or in of that shape (scatter).
static torc_status check_stacked(const torc_tensor *big, const torc_tensor *small, const char *what) {
    bool ok = big->ndim == small->ndim && big->ndim >= 1;
    int64_t rows;
    ok = ok && torc__size_mul(small->shape[0], g.size, &rows) && rows == big->shape[0];
    for (int i = 1; ok && i < big->ndim; i++) ok = big->shape[i] == small->shape[i];
    if (!ok) {
        char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
        return torc__error(TORC_ERR_SHAPE, "%s: the larger tensor %s must be world_size (%d) times the smaller %s along dim 0",
                           what, torc__shape_str(big->ndim, big->shape, b1, sizeof b1), g.size,
                           torc__shape_str(small->ndim, small->shape, b2, sizeof b2));
    }
    if (big->dtype != small->dtype)
        return torc__error(TORC_ERR_DTYPE, "%s: output and input must have the same dtype, got %s and %s", what,
                           torc_dtype_name(big->dtype), torc_dtype_name(small->dtype));
    return TORC_OK;
}

torc_status torc_dist_all_gather(torc_tensor *out, const torc_tensor *in, torc_work **work) {
    if (work) *work = NULL;
    torc_status st;
    if ((st = need_init("all_gather"))) return st;
    if (!out || !in) return torc__error(TORC_ERR_INVALID_ARG, "all_gather: tensor is NULL");
    if ((st = check_device(out, "all_gather")) || (st = check_device(in, "all_gather")) ||
        (st = check_stacked(out, in, "all_gather")))
        return st;
    torc_work *w = work_new(K_ALL_GATHER, out, 0);
    if (!w || !(w->recv = as_buffer(out, out->dtype)) || !(w->send = as_buffer(in, in->dtype))) {
        work_free(w);
        return torc_last_status();
    }
    return launch(w, work);
}

torc_status torc_dist_reduce_scatter(torc_tensor *out, const torc_tensor *in, torc_reduce_op op, torc_work **work) {
    if (work) *work = NULL;
    torc_status st;
    if ((st = need_init("reduce_scatter"))) return st;
    if (!out || !in) return torc__error(TORC_ERR_INVALID_ARG, "reduce_scatter: tensor is NULL");
    if (op < TORC_REDUCE_SUM || op > TORC_REDUCE_MIN)
        return torc__error(TORC_ERR_INVALID_ARG, "reduce_scatter: invalid op %d", (int)op);
    if ((st = check_device(out, "reduce_scatter")) || (st = check_device(in, "reduce_scatter")) ||
        (st = check_stacked(in, out, "reduce_scatter")))
        return st;
    torc_comm_dtype cd;
    const torc_dtype rd = reduce_dtype(out->dtype, op, "reduce_scatter", &cd);
    if (rd == TORC_DTYPE_COUNT) return torc_last_status();
    torc_work *w = work_new(K_REDUCE_SCATTER, out, op);
    if (!w || !(w->recv = as_buffer(out, rd)) || !(w->send = as_buffer(in, rd))) {
        work_free(w);
        return torc_last_status();
    }
    return launch(w, work);
}

torc_status torc_dist_barrier(void) {
    torc_status st;
    if ((st = need_init("barrier"))) return st;
    return g.vt->barrier(g.ctx) ? plugin_error() : TORC_OK;
}

torc_status torc_dist_wait(torc_work *work) { return work ? finish(work, NULL) : TORC_OK; }

torc_status torc__dist_wait_timed(torc_work *work, double *started, double *finished) {
    *started = work->started;
    *finished = torc__now();
    torc_status st = finish(work, finished);
    return st;
}

// ---- agreement: every rank passed the same named values ----
// The device the plugin's collectives run on for the core's own small tensors: the default
// device when the plugin serves it, else a host device (mpi) or the plugin's CUDA device (nccl).
static torc_device *comm_device(void) {
    torc_device *d = torc_default_device();
    const bool host = g.vt->memory == TORC_COMM_MEMORY_HOST;
    if (d && d->host_memory == host && (g.device < 0 || d->index == g.device)) return d;
    if (host) return torc_device_get("cpu");
    char name[64];
    snprintf(name, sizeof name, "%.*s:%d", d && !d->host_memory ? (int)strcspn(d->name, ":") : 4,
             d && !d->host_memory ? d->name : "cuda", g.device < 0 ? 0 : g.device);
    return torc_device_get(name);
}

// A field's digest: FNV-1a over name, a zero byte and value, 62 bits (so that its negation fits).
static int64_t field_digest(const char *name, const char *value) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = name ? name : ""; ; p++) {
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
        if (!*p) break;
    }
    for (const char *p = value ? value : ""; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return (int64_t)(h >> 2);
}

// x (n int64) all-reduced by MAX as [x, -x]: every rank gets each element's max and min.
static torc_status max_min(torc_device *dev, int64_t *x, int n, int64_t *lo, int64_t *hi) {
    int64_t *v = malloc(sizeof *v * 2 * (size_t)n);
    if (!v) return torc__error(TORC_ERR_OOM, "out of host memory");
    for (int i = 0; i < n; i++) v[i] = x[i], v[n + i] = -x[i];
    torc_status st = TORC_OK;
    torc_scope_push();
    torc_tensor *t = torc_to_device(torc_tensor_from(v, 1, (int64_t[]){2 * n}, TORC_DTYPE_I64), dev);
    if (!t) st = torc_last_status();
    if (!st) st = torc_dist_all_reduce(t, TORC_REDUCE_MAX, NULL);
    if (!st) st = torc_copy_to_host(t, v, sizeof *v * 2 * (size_t)n);
    torc_scope_pop();
    for (int i = 0; !st && i < n; i++) hi[i] = v[i], lo[i] = -v[n + i];
    free(v);
    return st;
}

#define SHOWN_VALUE 96  // bytes of a value that travel for the message (with its terminating zero)

torc_status torc__dist_check_same(torc_device *dev, const char *what, int n, const char *const *names,
                                  const char *const *values) {
    torc_status st;
    if ((st = need_init(what ? what : "torc_dist_check_same"))) return st;
    if (n < 0 || (n && (!names || !values)))
        return torc__error(TORC_ERR_INVALID_ARG, "%s: expected n >= 0 names and values", what ? what : "torc_dist_check_same");
    if (!dev && !(dev = comm_device())) return torc_last_status();
    // How many fields each rank has, then the digests of the fields every rank has.
    int64_t count = n, lo_n, hi_n;
    if ((st = max_min(dev, &count, 1, &lo_n, &hi_n))) return st;
    const int m = (int)lo_n;
    int64_t *d = malloc(sizeof *d * 3 * (size_t)(m ? m : 1));
    if (!d) return torc__error(TORC_ERR_OOM, "out of host memory");
    for (int i = 0; i < m; i++) d[i] = field_digest(names[i], values[i]);
    st = m ? max_min(dev, d, m, d + m, d + 2 * m) : TORC_OK;  // every rank knows m: all skip alike
    int f = -1;
    for (int i = 0; !st && i < m && f < 0; i++)
        if (d[m + i] != d[2 * m + i]) f = i;
    free(d);
    if (st) return st;
    if (f < 0) {
        if (lo_n == hi_n) return TORC_OK;
        return torc__error(TORC_ERR_INVALID_ARG, "%s%sthe ranks compare different numbers of settings (%lld to %lld)",
                           what ? what : "", what ? ": " : "", (long long)lo_n, (long long)hi_n);
    }
    // The values of field f from every rank, for the message (the same on every rank).
    const int W = g.size;
    char mine[SHOWN_VALUE] = {0};
    snprintf(mine, sizeof mine, "%s", values[f] ? values[f] : "");
    char *all = calloc((size_t)W, SHOWN_VALUE);
    if (!all) return torc__error(TORC_ERR_OOM, "out of host memory");
    torc_scope_push();
    torc_tensor *in = torc_to_device(torc_tensor_from(mine, 1, (int64_t[]){SHOWN_VALUE}, TORC_DTYPE_U8), dev);
    torc_tensor *out = in ? torc_to_device(torc_zeros(1, (int64_t[]){(int64_t)W * SHOWN_VALUE}, TORC_DTYPE_U8), dev) : NULL;
    st = out ? torc_dist_all_gather(out, in, NULL) : torc_last_status();
    if (!st) st = torc_copy_to_host(out, all, (size_t)W * SHOWN_VALUE);
    torc_scope_pop();
    if (!st) {
        int r = 1;
        while (r < W - 1 && !strncmp(all + (size_t)r * SHOWN_VALUE, all, SHOWN_VALUE)) r++;
        for (int q = 0; q < W; q++) all[(size_t)q * SHOWN_VALUE + SHOWN_VALUE - 1] = 0;
        const char *v0 = all, *vr = all + (size_t)r * SHOWN_VALUE;
        st = torc__error(TORC_ERR_INVALID_ARG, "%s%sthe ranks disagree on %s: rank 0 has %s, rank %d has %s%s", what ? what : "",
                         what ? ": " : "",
                         names[f] ? names[f] : "(unnamed)", *v0 ? v0 : "(none)", r, *vr ? vr : "(none)",
                         strcmp(v0, vr) ? "" : " (they differ further on)");
    }
    free(all);
    return st;
}

torc_status torc_dist_check_same(int n, const char *const *names, const char *const *values) {
    return torc__dist_check_same(NULL, NULL, n, names, values);
}
