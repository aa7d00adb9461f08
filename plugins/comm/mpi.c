// plugins/comm/mpi.c — libtorc_comm_mpi.so: torc's collectives on MPI (Open MPI), host memory.
// One progress thread owns every MPI call after init, so a started collective advances while
// the caller runs backward (Open MPI's non-blocking collectives only move when MPI is entered).
// Every collective is preceded by a header: a small all-reduce of what each rank is about to
// call (kind, dtype, op, root, count), so ranks that disagree fail together, with a message,
// before any data moves: MPI itself would truncate, or write a peer's larger count past recv.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "header_check.h"
#include "torc/comm.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef enum { PHASE_QUEUED, PHASE_HEADER, PHASE_DATA } phase;

struct torc_comm_request {
    job_kind kind;
    const void *send;
    void *recv;
    size_t count;
    torc_comm_dtype dtype;
    torc_comm_op op;
    int root;
    int64_t header[2 * H_FIELDS];
    MPI_Request mpi;               // the header's, then the data's
    phase phase;
    bool done;
    double finished_at;            // CLOCK_MONOTONIC seconds when the progress thread saw it done
    int err;                       // MPI error code, 0 when fine
    char refused[512];             // the header said no: why (then err is MPI_ERR_OTHER)
    struct torc_comm_request *next;
};

typedef struct ctx {
    MPI_Comm comm;
    int rank, size, local_rank;
    bool we_initialized;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;           // signalled when a job is queued, completes, or on stop
    torc_comm_request *queue;      // queued, not started (FIFO: every rank starts them in order)
    torc_comm_request *active;     // started, not done
    torc_comm_request *in_header;  // the job whose header is in flight (the next waits for it)
    bool stop;
    char error[512];
} ctx;

static char g_init_error[512];

static MPI_Datatype mpi_dtype(torc_comm_dtype d) {
    switch (d) {
    case TORC_COMM_DTYPE_F32: return MPI_FLOAT;
    case TORC_COMM_DTYPE_F64: return MPI_DOUBLE;
    case TORC_COMM_DTYPE_I32: return MPI_INT32_T;
    case TORC_COMM_DTYPE_I64: return MPI_INT64_T;
    default: return MPI_UINT8_T;
    }
}
static MPI_Op mpi_op(torc_comm_op op) { return op == TORC_COMM_OP_MAX ? MPI_MAX : op == TORC_COMM_OP_MIN ? MPI_MIN : MPI_SUM; }

static int start(ctx *c, torc_comm_request *r) {
    const MPI_Datatype t = mpi_dtype(r->dtype);
    const int n = (int)r->count;
    const void *send = r->send == r->recv ? MPI_IN_PLACE : r->send;
    switch (r->kind) {
    case JOB_ALL_REDUCE: return MPI_Iallreduce(send, r->recv, n, t, mpi_op(r->op), c->comm, &r->mpi);
    case JOB_BROADCAST: return MPI_Ibcast(r->recv, n, t, r->root, c->comm, &r->mpi);
    case JOB_ALL_GATHER: return MPI_Iallgather(r->send, n, t, r->recv, n, t, c->comm, &r->mpi);
    case JOB_REDUCE_SCATTER: return MPI_Ireduce_scatter_block(r->send, r->recv, n, t, mpi_op(r->op), c->comm, &r->mpi);
    case JOB_BARRIER: return MPI_SUCCESS;  // the header was the barrier
    }
    return MPI_ERR_OTHER;
}

// What this rank is about to call, as the header's fields (the negations follow).
static void fill_header(torc_comm_request *r) {
    header_fill(r->header, r->kind, r->dtype, r->op, r->root, r->count, r->count > (size_t)INT_MAX);
}

// After the header's all-reduce: true when every rank called the same collective; else the
// reason (the first field that differs, this rank's value and another rank's) in r->refused.
static bool header_agrees(const ctx *c, torc_comm_request *r) {
    torc_comm_request t = {.kind = r->kind, .count = r->count, .dtype = r->dtype, .op = r->op, .root = r->root};
    fill_header(&t);  // this rank's own fields (r->header now holds the maxima)
    const int f = header_differs(r->header, t.header, r->kind, c->rank, r->refused, sizeof r->refused);
    if (f < 0) return true;
    if (f == H_BAD) {
        const char *what = job_names[r->kind];
        char d[200];
        if (t.header[H_BAD])
            snprintf(d, sizeof d, "this rank's %s of %zu elements exceeds MPI's int count", what, r->count);
        else
            snprintf(d, sizeof d, "another rank's %s exceeds MPI's int count", what);
        snprintf(r->refused, sizeof r->refused, "rank %d: %s; no rank started it", c->rank, d);
    }
    return false;
}

// One round over r (lock held, released around MPI calls): starts its header, or on the
// header's completion its data, or tests its data. True when something moved.
static bool advance(ctx *c, torc_comm_request *r) {
    int flag = 0, err;
    switch (r->phase) {
    case PHASE_QUEUED:
        fill_header(r);
        r->phase = PHASE_HEADER;
        c->in_header = r;
        pthread_mutex_unlock(&c->lock);
        err = MPI_Iallreduce(MPI_IN_PLACE, r->header, 2 * H_FIELDS, MPI_INT64_T, MPI_MAX, c->comm, &r->mpi);
        pthread_mutex_lock(&c->lock);
        if (err) r->err = err, r->done = true, c->in_header = NULL;
        return true;
    case PHASE_HEADER:
        pthread_mutex_unlock(&c->lock);
        err = MPI_Test(&r->mpi, &flag, MPI_STATUS_IGNORE);
        pthread_mutex_lock(&c->lock);
        if (!err && !flag) return false;
        c->in_header = NULL;
        if (err) r->err = err, r->done = true;
        else if (!header_agrees(c, r)) r->err = MPI_ERR_OTHER, r->done = true;
        else if (r->kind == JOB_BARRIER) r->done = true;
        else {
            r->phase = PHASE_DATA;
            pthread_mutex_unlock(&c->lock);
            err = start(c, r);
            pthread_mutex_lock(&c->lock);
            if (err) r->err = err, r->done = true;
        }
        return true;
    case PHASE_DATA:
        pthread_mutex_unlock(&c->lock);
        err = MPI_Test(&r->mpi, &flag, MPI_STATUS_IGNORE);
        pthread_mutex_lock(&c->lock);
        if (err) r->err = err;
        if (err || flag) r->done = true;
        return err || flag;
    }
    return false;
}

// The progress thread: starts queued jobs in order (a job's header only once the previous
// job's data has started, so every rank issues header, data, header, data, ... alike) and
// tests the active ones, sleeping 20 us between rounds that move nothing (a spinning poll
// would take a core from backward).
static void *progress(void *arg) {
    ctx *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->stop && !c->queue && !c->active) pthread_cond_wait(&c->cond, &c->lock);
        if (c->stop && !c->queue && !c->active) break;
        bool moved = false, finished = false;
        if (c->queue && !c->in_header) {
            torc_comm_request *r = c->queue;
            c->queue = r->next;
            r->next = c->active;
            c->active = r;
            moved = true;
            advance(c, r);
        }
        for (torc_comm_request **p = &c->active; *p;) {
            torc_comm_request *r = *p;
            if (!r->done && advance(c, r)) moved = true;
            if (r->done) {
                r->finished_at = now();
                *p = r->next;
                finished = true;
            } else {
                p = &r->next;
            }
        }
        if (finished) pthread_cond_broadcast(&c->cond);
        if (!moved && !finished) {
            pthread_mutex_unlock(&c->lock);
            nanosleep(&(struct timespec){0, 20000}, NULL);
            pthread_mutex_lock(&c->lock);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

static void set_mpi_error(ctx *c, const char *what, int err) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", err);
    snprintf(c->error, sizeof c->error, "rank %d: MPI %s failed: %s", c->rank, what, msg);
}

static int mpi_init(void **out) {
    // libtorc dlopens this plugin RTLD_LOCAL; Open MPI's own components (dlopen'ed by libmpi)
    // need libmpi's symbols global, or MPI_Init fails with "undefined symbol".
    if (!dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) &&
        !dlopen("libmpi.so", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) {
        snprintf(g_init_error, sizeof g_init_error, "cannot make libmpi's symbols global: %s", dlerror());
        return 1;
    }
    ctx *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(g_init_error, sizeof g_init_error, "out of memory");
        return 1;
    }
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            snprintf(g_init_error, sizeof g_init_error, "MPI_Init_thread failed");
            free(c);
            return 1;
        }
        c->we_initialized = true;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        snprintf(g_init_error, sizeof g_init_error,
                 "MPI gives thread level %d, torc's progress thread needs MPI_THREAD_SERIALIZED (%d)", provided,
                 MPI_THREAD_SERIALIZED);
        free(c);
        return 1;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    // Errors come back as codes (turned into messages naming the rank), never abort inside MPI.
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    MPI_Comm node;
    MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &c->local_rank);
    MPI_Comm_free(&node);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    if (pthread_create(&c->thread, NULL, progress, c)) {
        snprintf(g_init_error, sizeof g_init_error, "cannot start MPI progress thread");
        MPI_Comm_free(&c->comm);
        free(c);
        return 1;
    }
    *out = c;
    return 0;
}

static void mpi_shutdown(void *vc) {
    ctx *c = vc;
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    MPI_Comm_free(&c->comm);
    if (c->we_initialized) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) MPI_Finalize();
    }
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}

static int mpi_rank(void *c) { return ((ctx *)c)->rank; }
static int mpi_world_size(void *c) { return ((ctx *)c)->size; }
static int mpi_local_rank(void *c) { return ((ctx *)c)->local_rank; }

static int mpi_wait(void *vc, torc_comm_request *r, double timeout_s, double *finished_at);

static int submit(ctx *c, torc_comm_request *proto, torc_comm_request **req) {
    // A count beyond MPI's int is refused through the header (H_BAD), on every rank at once.
    torc_comm_request *r = malloc(sizeof *r);
    if (!r) {
        snprintf(c->error, sizeof c->error, "rank %d: out of memory", c->rank);
        return 1;
    }
    *r = *proto;
    r->next = NULL;
    pthread_mutex_lock(&c->lock);
    torc_comm_request **tail = &c->queue;
    while (*tail) tail = &(*tail)->next;
    *tail = r;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (req) {
        *req = r;
        return 0;
    }
    return mpi_wait(c, r, 0, NULL);
}

static int mpi_all_reduce(void *c, const void *send, void *recv, size_t count, torc_comm_dtype dtype, torc_comm_op op,
                          torc_comm_request **req) {
    return submit(c, &(torc_comm_request){.kind = JOB_ALL_REDUCE, .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op}, req);
}
static int mpi_broadcast(void *c, void *buf, size_t count, torc_comm_dtype dtype, int root, torc_comm_request **req) {
    return submit(c, &(torc_comm_request){.kind = JOB_BROADCAST, .recv = buf, .count = count, .dtype = dtype, .root = root}, req);
}
static int mpi_all_gather(void *c, const void *send, void *recv, size_t count, torc_comm_dtype dtype, torc_comm_request **req) {
    return submit(c, &(torc_comm_request){.kind = JOB_ALL_GATHER, .send = send, .recv = recv, .count = count, .dtype = dtype}, req);
}
static int mpi_reduce_scatter(void *c, const void *send, void *recv, size_t count, torc_comm_dtype dtype,
                              torc_comm_op op, torc_comm_request **req) {
    return submit(c, &(torc_comm_request){.kind = JOB_REDUCE_SCATTER, .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op}, req);
}
static int mpi_barrier(void *c) { return submit(c, &(torc_comm_request){.kind = JOB_BARRIER}, NULL); }

// Waits for r (then frees it). On timeout the request stays with the progress thread (MPI may
// still write its buffers), so the caller must end the job: abort() is the documented way out.
static int mpi_wait(void *vc, torc_comm_request *r, double timeout_s, double *finished_at) {
    ctx *c = vc;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    if (timeout_s > 0) {
        deadline.tv_sec += (time_t)timeout_s;
        deadline.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
        if (deadline.tv_nsec >= 1000000000L) deadline.tv_sec++, deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->lock);
    int rc = 0;
    while (!r->done && rc == 0)
        rc = timeout_s > 0 ? pthread_cond_timedwait(&c->cond, &c->lock, &deadline) : pthread_cond_wait(&c->cond, &c->lock);
    const bool done = r->done;
    pthread_mutex_unlock(&c->lock);
    if (!done) {
        snprintf(c->error, sizeof c->error,
                 "rank %d: %s did not finish within %g s: another rank has died, failed or stopped calling "
                 "collectives (TORC_COMM_TIMEOUT sets the limit)",
                 c->rank, job_names[r->kind], timeout_s);
        return TORC_COMM_TIMED_OUT;
    }
    const int err = r->err;
    if (finished_at) *finished_at = r->finished_at;
    if (err && r->refused[0]) snprintf(c->error, sizeof c->error, "%s", r->refused);
    else if (err) set_mpi_error(c, job_names[r->kind], err);
    free(r);
    return err ? TORC_COMM_FAILED : 0;
}

static void mpi_abort(void *vc, int code) {
    ctx *c = vc;
    MPI_Abort(c ? c->comm : MPI_COMM_WORLD, code);
}

static const char *mpi_last_error(void *vc) { return vc ? ((ctx *)vc)->error : g_init_error; }

static const torc_comm_vtable vtable = {
    .abi_version = TORC_COMM_ABI_VERSION,
    .struct_size = sizeof(torc_comm_vtable),
    .name = "mpi",
    .memory = TORC_COMM_MEMORY_HOST,
    .init = mpi_init,
    .shutdown = mpi_shutdown,
    .rank = mpi_rank,
    .world_size = mpi_world_size,
    .local_rank = mpi_local_rank,
    .all_reduce = mpi_all_reduce,
    .broadcast = mpi_broadcast,
    .all_gather = mpi_all_gather,
    .reduce_scatter = mpi_reduce_scatter,
    .barrier = mpi_barrier,
    .wait = mpi_wait,
    .abort = mpi_abort,
    .last_error = mpi_last_error,
};

TORC_API const torc_comm_vtable *torc_comm_entry(uint32_t host_abi_version) {
    return host_abi_version >> 16 == TORC_COMM_ABI_MAJOR ? &vtable : NULL;
}
