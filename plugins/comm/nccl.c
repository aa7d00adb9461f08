// plugins/comm/nccl.c — libtorc_comm_nccl.so: torc's collectives on NCCL, CUDA device memory.
// MPI only finds the peers: rank 0's ncclUniqueId is broadcast over MPI_COMM_WORLD, then every
// collective runs on one CUDA stream of the device numbered by the local rank.
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "torc/comm.h"

struct torc_comm_request {
    cudaEvent_t done;  // recorded on the stream after the collective
    const char *what;
};

typedef struct ctx {
    ncclComm_t comm;
    cudaStream_t stream;
    int rank, size, local_rank, device;
    bool we_initialized;
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
    *out = c;
    return 0;
}

static void nccl_shutdown(void *vc) {
    ctx *c = vc;
    if (!c) return;
    ncclCommDestroy(c->comm);
    cudaStreamDestroy(c->stream);
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

// After enqueueing a collective: a request with an event, or (blocking) wait for it now.
static int finish(ctx *c, ncclResult_t nr, const char *what, torc_comm_request **req) {
    if (nr != ncclSuccess) {
        snprintf(c->error, sizeof c->error, "rank %d: NCCL %s failed: %s", c->rank, what, ncclGetErrorString(nr));
        return 1;
    }
    torc_comm_request *r = calloc(1, sizeof *r);
    cudaError_t ce = r ? cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming) : cudaErrorMemoryAllocation;
    if (ce == cudaSuccess) ce = cudaEventRecord(r->done, c->stream);
    if (ce != cudaSuccess) {
        snprintf(c->error, sizeof c->error, "rank %d: CUDA event for %s: %s", c->rank, what, cudaGetErrorString(ce));
        free(r);
        return 1;
    }
    r->what = what;
    if (req) {
        *req = r;
        return 0;
    }
    return nccl_wait(c, r, 0, NULL);
}

static int nccl_all_reduce(void *vc, const void *send, void *recv, size_t count, torc_comm_dtype dtype, torc_comm_op op,
                           torc_comm_request **req) {
    ctx *c = vc;
    return finish(c, ncclAllReduce(send, recv, count, nccl_dtype(dtype), nccl_op(op), c->comm, c->stream), "all-reduce", req);
}
static int nccl_broadcast(void *vc, void *buf, size_t count, torc_comm_dtype dtype, int root, torc_comm_request **req) {
    ctx *c = vc;
    return finish(c, ncclBroadcast(buf, buf, count, nccl_dtype(dtype), root, c->comm, c->stream), "broadcast", req);
}
static int nccl_all_gather(void *vc, const void *send, void *recv, size_t count, torc_comm_dtype dtype, torc_comm_request **req) {
    ctx *c = vc;
    return finish(c, ncclAllGather(send, recv, count, nccl_dtype(dtype), c->comm, c->stream), "all-gather", req);
}
static int nccl_reduce_scatter(void *vc, const void *send, void *recv, size_t count, torc_comm_dtype dtype,
                               torc_comm_op op, torc_comm_request **req) {
    ctx *c = vc;
    return finish(c, ncclReduceScatter(send, recv, count, nccl_dtype(dtype), nccl_op(op), c->comm, c->stream),
                  "reduce-scatter", req);
}
static int nccl_barrier(void *vc) {
    ctx *c = vc;
    cudaError_t ce = cudaStreamSynchronize(c->stream);
    if (ce != cudaSuccess) {
        snprintf(c->error, sizeof c->error, "rank %d: CUDA: %s", c->rank, cudaGetErrorString(ce));
        return 1;
    }
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : 1;
}

// Polls the event (and NCCL's async error, which is how a dead peer shows) until timeout_s.
// *finished_at is when this wait saw the event done (NCCL tells no earlier time).
static int nccl_wait(void *vc, torc_comm_request *r, double timeout_s, double *finished_at) {
    ctx *c = vc;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
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
