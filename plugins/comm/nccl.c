// plugins/comm/nccl.c — libtorc_comm_nccl.so: torc's collectives on NCCL, CUDA device memory.
// MPI only finds the peers: rank 0's ncclUniqueId is broadcast over MPI_COMM_WORLD, then every
// collective runs on one CUDA stream of the device numbered by the local rank.
// Every collective is preceded by a header on the host: a small MPI all-reduce of what each rank
// is about to call (kind, dtype, op, root, count), so that ranks that disagree fail together
// with a message before NCCL moves anything (NCCL would write a peer's larger count past recv,
// or hang). A collective is enqueued on the stream once its header has come back, in the order
// the collectives were called: at the call when the header is back by then, else at the next
// call into the plugin or in wait(), whose timeout covers the header too.
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "header_check.h"
#include "torc/comm.h"

struct torc_comm_request {
    job_kind kind;
    const void *send;
    void *recv;
    size_t count;
    torc_comm_dtype dtype;
    torc_comm_op op;
    int root;
    int64_t header[2 * H_FIELDS];
    MPI_Request hreq;           // the header's all-reduce
    bool enqueued;              // the collective is on the stream (done recorded after it)
    bool failed;                // the header said no, or NCCL refused: error holds why
    char error[512];
    cudaEvent_t done;           // recorded on the stream after the collective
    const char *what;
    struct torc_comm_request *next;  // the pending list: header sent, not enqueued
};

typedef struct ctx {
    ncclComm_t comm;
    cudaStream_t stream;
    MPI_Comm hcomm;             // the headers' communicator (a dup of MPI_COMM_WORLD)
    int rank, size, local_rank, device;
    bool we_initialized;
    torc_comm_request *pending; // FIFO: enqueued on the stream in this order on every rank
    char error[512];
} ctx;

static char g_init_error[512];

static ncclDataType_t nccl_dtype(torc_comm_dtype d) {
    switch (d) {
    case TORC_COMM_DTYPE_F32: return ncclFloat32;
    case TORC_COMM_DTYPE_F64: return ncclFloat64;
    case TORC_COMM_DTYPE_I32: return ncclInt32;
    case TORC_COMM_DTYPE_I64: return ncclInt64;
    default: return ncclUint8;
    }
}
static ncclRedOp_t nccl_op(torc_comm_op op) { return op == TORC_COMM_OP_MAX ? ncclMax : op == TORC_COMM_OP_MIN ? ncclMin : ncclSum; }

static int init_fail(const char *fmt, const char *detail) {
    snprintf(g_init_error, sizeof g_init_error, fmt, detail);
    return 1;
}

static int nccl_init(void **out) {
    // As in the mpi plugin: Open MPI's components need libmpi's symbols global.
    if (!dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) &&
        !dlopen("libmpi.so", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD))
        return init_fail("cannot make libmpi's symbols global: %s", dlerror());
    int n_dev = 0;
    cudaError_t ce = cudaGetDeviceCount(&n_dev);
    if (ce != cudaSuccess) return init_fail("no CUDA device: %s", cudaGetErrorString(ce));
    if (n_dev == 0) return init_fail("%s", "no CUDA device");
    ctx *c = calloc(1, sizeof *c);
    if (!c) return init_fail("%s", "out of memory");
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            free(c);
            return init_fail("%s", "MPI_Init_thread failed (NCCL's rendezvous runs over MPI)");
        }
        c->we_initialized = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    int local_size = 0;
    MPI_Comm_rank(node, &c->local_rank);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
    c->device = c->local_rank % n_dev;
    // NCCL takes one process a GPU (two on one device: ncclInvalidUsage). Every rank learns
    // whether any host has more processes than GPUs before anyone waits for NCCL.
    int fits = local_size <= n_dev, all_fit = 0;
    MPI_Allreduce(&fits, &all_fit, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_fit) {
        char why[160];
        if (fits) snprintf(why, sizeof why, "another host runs more processes than it has GPUs");
        else snprintf(why, sizeof why, "%d processes on this host share %d GPU(s)", local_size, n_dev);
        free(c);
        return init_fail("%s: NCCL takes one process a GPU (start fewer processes a host, or TORC_COMM=mpi)", why);
    }
    ncclUniqueId id;
    ncclResult_t nr = ncclSuccess;
    if (c->rank == 0) nr = ncclGetUniqueId(&id);
    // Rank 0's failure still has to reach the others, or they would wait in the broadcast.
    int ok = nr == ncclSuccess;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
        free(c);
        return init_fail("ncclGetUniqueId failed on rank 0: %s", ncclGetErrorString(nr));
    }
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    if ((ce = cudaSetDevice(c->device)) != cudaSuccess || (ce = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        free(c);
        return init_fail("CUDA: %s", cudaGetErrorString(ce));
    }
    if ((nr = ncclCommInitRank(&c->comm, c->size, id, c->rank)) != ncclSuccess) {
        cudaStreamDestroy(c->stream);
        free(c);
        return init_fail("ncclCommInitRank: %s", ncclGetErrorString(nr));
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &c->hcomm);
    MPI_Comm_set_errhandler(c->hcomm, MPI_ERRORS_RETURN);
    *out = c;
    return 0;
}

static void nccl_shutdown(void *vc) {
    ctx *c = vc;
    if (!c) return;
    ncclCommDestroy(c->comm);
    cudaStreamDestroy(c->stream);
    MPI_Comm_free(&c->hcomm);
    if (c->we_initialized) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) MPI_Finalize();
    }
    free(c);
}

static int nccl_rank(void *c) { return ((ctx *)c)->rank; }
static int nccl_world_size(void *c) { return ((ctx *)c)->size; }
static int nccl_local_rank(void *c) { return ((ctx *)c)->local_rank; }
static int nccl_device(void *c) { return ((ctx *)c)->device; }

static int nccl_wait(void *vc, torc_comm_request *r, double timeout_s, double *finished_at);

static void fill_header(const torc_comm_request *r, int64_t *h) {
    // NCCL takes size_t counts: every count can start
    header_fill(h, r->kind, r->dtype, r->op, r->root, r->count, false);
}

// After the header came back: true when every rank called the same collective; else the first
// field that differs, this rank's value and another rank's, in r->error.
static bool header_agrees(const ctx *c, torc_comm_request *r) {
    int64_t mine[2 * H_FIELDS];
    fill_header(r, mine);
    const int f = header_differs(r->header, mine, r->kind, c->rank, r->error, sizeof r->error);
    if (f < 0) return true;
    if (f == H_BAD)
        snprintf(r->error, sizeof r->error, "rank %d: %s of %zu elements is too large; no rank started it", c->rank,
                 mine[H_BAD] ? job_names[r->kind] : "another rank's collective", r->count);
    return false;
}

// The collective on the stream, and the event after it.
static void enqueue(ctx *c, torc_comm_request *r) {
    ncclResult_t nr = ncclSuccess;
    const ncclDataType_t t = nccl_dtype(r->dtype);
    switch (r->kind) {
    case JOB_ALL_REDUCE: nr = ncclAllReduce(r->send, r->recv, r->count, t, nccl_op(r->op), c->comm, c->stream); break;
    case JOB_BROADCAST: nr = ncclBroadcast(r->recv, r->recv, r->count, t, r->root, c->comm, c->stream); break;
    case JOB_ALL_GATHER: nr = ncclAllGather(r->send, r->recv, r->count, t, c->comm, c->stream); break;
    case JOB_REDUCE_SCATTER: nr = ncclReduceScatter(r->send, r->recv, r->count, t, nccl_op(r->op), c->comm, c->stream); break;
    case JOB_BARRIER: break;  // the header was the barrier
    }
    if (nr != ncclSuccess) {
        snprintf(r->error, sizeof r->error, "rank %d: NCCL %s failed: %s", c->rank, r->what, ncclGetErrorString(nr));
        r->failed = true;
        return;
    }
    cudaError_t ce = cudaEventRecord(r->done, c->stream);
    if (ce != cudaSuccess) {
        snprintf(r->error, sizeof r->error, "rank %d: CUDA event for %s: %s", c->rank, r->what, cudaGetErrorString(ce));
        r->failed = true;
    }
}

// Moves the pending collectives whose headers have come back onto the stream, oldest first
// (a later one never before an earlier one). Returns false on an MPI error (in c->error).
static bool advance(ctx *c) {
    while (c->pending) {
        torc_comm_request *r = c->pending;
        int flag = 0;
        const int err = MPI_Test(&r->hreq, &flag, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(err, msg, &len);
            snprintf(r->error, sizeof r->error, "rank %d: the header of %s failed: %s", c->rank, r->what, msg);
            r->failed = true;
        } else if (!flag) {
            return true;
        } else if (header_agrees(c, r)) {
            enqueue(c, r);
        } else {
            r->failed = true;
        }
        r->enqueued = true;
        c->pending = r->next;
        r->next = NULL;
    }
    return true;
}

// Sends the header and queues the collective; blocking (req == NULL): waits for it.
static int submit(ctx *c, torc_comm_request proto, torc_comm_request **req) {
    torc_comm_request *r = calloc(1, sizeof *r);
    cudaError_t ce = r ? cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming) : cudaErrorMemoryAllocation;
    if (ce != cudaSuccess) {
        snprintf(c->error, sizeof c->error, "rank %d: CUDA event for %s: %s", c->rank, job_names[proto.kind],
                 cudaGetErrorString(ce));
        free(r);
        return 1;
    }
    const cudaEvent_t done = r->done;
    *r = proto;
    r->done = done;
    r->what = job_names[r->kind];
    fill_header(r, r->header);
    const int err = MPI_Iallreduce(MPI_IN_PLACE, r->header, 2 * H_FIELDS, MPI_INT64_T, MPI_MAX, c->hcomm, &r->hreq);
    if (err != MPI_SUCCESS) {
        snprintf(c->error, sizeof c->error, "rank %d: the header of %s could not start (MPI error %d)", c->rank, r->what, err);
        cudaEventDestroy(r->done);
        free(r);
        return 1;
    }
    torc_comm_request **tail = &c->pending;
    while (*tail) tail = &(*tail)->next;
    *tail = r;
    advance(c);
    if (req) {
        *req = r;
        return 0;
    }
    return nccl_wait(c, r, 0, NULL) ? 1 : 0;
}

static int nccl_all_reduce(void *vc, const void *send, void *recv, size_t count, torc_comm_dtype dtype, torc_comm_op op,
                           torc_comm_request **req) {
    return submit(vc, (torc_comm_request){.kind = JOB_ALL_REDUCE, .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op}, req);
}
static int nccl_broadcast(void *vc, void *buf, size_t count, torc_comm_dtype dtype, int root, torc_comm_request **req) {
    return submit(vc, (torc_comm_request){.kind = JOB_BROADCAST, .recv = buf, .count = count, .dtype = dtype, .root = root}, req);
}
static int nccl_all_gather(void *vc, const void *send, void *recv, size_t count, torc_comm_dtype dtype, torc_comm_request **req) {
    return submit(vc, (torc_comm_request){.kind = JOB_ALL_GATHER, .send = send, .recv = recv, .count = count, .dtype = dtype}, req);
}
static int nccl_reduce_scatter(void *vc, const void *send, void *recv, size_t count, torc_comm_dtype dtype,
                               torc_comm_op op, torc_comm_request **req) {
    return submit(vc, (torc_comm_request){.kind = JOB_REDUCE_SCATTER, .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op}, req);
}
// The earlier collectives finish, then every rank meets in a header (the barrier itself).
static int nccl_barrier(void *vc) {
    ctx *c = vc;
    while (c->pending) {
        advance(c);
        if (c->pending) nanosleep(&(struct timespec){0, 20000}, NULL);
    }
    cudaError_t ce = cudaStreamSynchronize(c->stream);
    if (ce != cudaSuccess) {
        snprintf(c->error, sizeof c->error, "rank %d: CUDA: %s", c->rank, cudaGetErrorString(ce));
        return 1;
    }
    return submit(c, (torc_comm_request){.kind = JOB_BARRIER}, NULL);
}

// Polls the event (and NCCL's async error, which is how a dead peer shows) until timeout_s.
// *finished_at is when this wait saw the event done (NCCL tells no earlier time).
static int nccl_wait(void *vc, torc_comm_request *r, double timeout_s, double *finished_at) {
    ctx *c = vc;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!r->enqueued) {  // its header (and those of the collectives before it) not back yet
        advance(c);
        if (r->enqueued) break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (timeout_s > 0 && (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > timeout_s) {
            snprintf(c->error, sizeof c->error,
                     "rank %d: %s did not start within %g s (the ranks' check before it did not come back): another "
                     "rank has died, failed or stopped calling collectives (TORC_COMM_TIMEOUT sets the limit)",
                     c->rank, r->what, timeout_s);
            return TORC_COMM_TIMED_OUT;  // the header stays with MPI
        }
        nanosleep(&(struct timespec){0, 20000}, NULL);
    }
    if (r->failed) {
        snprintf(c->error, sizeof c->error, "%s", r->error);
        cudaEventDestroy(r->done);
        free(r);
        return TORC_COMM_FAILED;
    }
    for (;;) {
        cudaError_t ce = cudaEventQuery(r->done);
        if (ce == cudaSuccess) break;
        if (ce != cudaErrorNotReady) {
            snprintf(c->error, sizeof c->error, "rank %d: NCCL %s: %s", c->rank, r->what, cudaGetErrorString(ce));
            return TORC_COMM_TIMED_OUT;  // the stream may still hold the collective
        }
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(c->comm, &async);
        if (async != ncclSuccess) {
            snprintf(c->error, sizeof c->error, "rank %d: NCCL %s failed: %s", c->rank, r->what, ncclGetErrorString(async));
            return TORC_COMM_TIMED_OUT;  // the stream may still hold the collective
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (timeout_s > 0 && (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > timeout_s) {
            snprintf(c->error, sizeof c->error,
                     "rank %d: %s did not finish within %g s: another rank has died, failed or stopped calling "
                     "collectives (TORC_COMM_TIMEOUT sets the limit)", c->rank, r->what, timeout_s);
            ncclCommAbort(c->comm);
            return TORC_COMM_TIMED_OUT;
        }
        nanosleep(&(struct timespec){0, 20000}, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (finished_at) *finished_at = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
    cudaEventDestroy(r->done);
    free(r);
    return 0;
}

static void nccl_abort(void *vc, int code) {
    ctx *c = vc;
    if (c) ncclCommAbort(c->comm);
    MPI_Abort(MPI_COMM_WORLD, code);
}

static const char *nccl_last_error(void *vc) { return vc ? ((ctx *)vc)->error : g_init_error; }

static const torc_comm_vtable vtable = {
    .abi_version = TORC_COMM_ABI_VERSION,
    .struct_size = sizeof(torc_comm_vtable),
    .name = "nccl",
    .memory = TORC_COMM_MEMORY_CUDA,
    .init = nccl_init,
    .shutdown = nccl_shutdown,
    .rank = nccl_rank,
    .world_size = nccl_world_size,
    .local_rank = nccl_local_rank,
    .all_reduce = nccl_all_reduce,
    .broadcast = nccl_broadcast,
    .all_gather = nccl_all_gather,
    .reduce_scatter = nccl_reduce_scatter,
    .barrier = nccl_barrier,
    .wait = nccl_wait,
    .abort = nccl_abort,
    .last_error = nccl_last_error,
    .device = nccl_device,
};

TORC_API const torc_comm_vtable *torc_comm_entry(uint32_t host_abi_version) {
    return host_abi_version >> 16 == TORC_COMM_ABI_MAJOR ? &vtable : NULL;
}
