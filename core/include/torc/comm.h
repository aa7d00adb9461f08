// torc/comm.h — the communication plugin ABI: the versioned vtable a comm plugin exports
// (libtorc_comm_<name>.so: mpi on Open MPI, nccl on NCCL). A plugin includes this header only.
//
// A comm plugin only moves and reduces bytes: it knows nothing of tensors, autograd, buckets,
// averaging or determinism (the core owns those, core/comm.c and core/ddp.c). Buffers are
// contiguous arrays of `count` elements of a torc_comm_dtype in the memory the plugin declares
// (host memory for mpi, CUDA device memory for nccl). Device buffers are ready when a collective
// is called (the core has synchronized their device, whose backend runs on a stream of its own),
// and the core reads a result only after wait() (or a blocking call) returned: a plugin orders its
// own stream, nothing else.
//
// Rules:
//   - init() joins the job (MPI_Init_thread if MPI is not initialised yet) and returns a context
//     handed back to every call; shutdown() leaves it. The core calls init once per process.
//   - Every rank must issue the same collectives in the same order (MPI's and NCCL's rule); the
//     core guarantees it. Calls come from one thread at a time (the one that called init or the
//     autograd engine's thread, never two at once).
//   - A collective with req == NULL is blocking. With req != NULL it only starts: *req is a
//     handle that the core passes to wait() exactly once; send and recv stay untouched by the
//     caller until then. wait() frees the handle.
//   - wait() returns 0 when the collective finished, TORC_COMM_FAILED when it finished with an
//     error (the handle is freed either way), and TORC_COMM_TIMED_OUT when it did not finish
//     within timeout_s seconds (<= 0: no limit): a rank that died or stopped calling in shows up
//     here, not as a hang. A timed-out collective stays with the plugin, which may still write
//     its buffers: the core keeps them allocated, and the job is expected to abort().
//   - Before it moves data a plugin checks that every rank called the same collective (kind,
//     dtype, op, root, count; a barrier too); otherwise the collective fails on every rank
//     (wait() returns TORC_COMM_FAILED, last_error naming the difference) and recv is not
//     touched: MPI and NCCL would truncate or write a peer's larger count past the buffer. The
//     mpi and nccl plugins all-reduce these fields (MAX of them and their negations) first.
//   - Every call returns 0 or nonzero; on nonzero last_error(ctx) says why, naming the rank
//     when the engine says which. The message stays valid until the next call.
//   - abort() ends every process of the job (MPI_Abort): the way out when one rank has failed
//     and the others would otherwise wait for it forever.
#ifndef TORC_COMM_H
#define TORC_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

// abi_version = major << 16 | minor. The loader refuses a plugin whose major differs or whose
// vtable is smaller than the v1.0 vtable; a minor version only appends members.
#define TORC_COMM_ABI_MAJOR 1
#define TORC_COMM_ABI_MINOR 1  // 1.1: device()
#define TORC_COMM_ABI_VERSION ((uint32_t)(TORC_COMM_ABI_MAJOR << 16 | TORC_COMM_ABI_MINOR))

// Element types a plugin reduces natively (append-only).
typedef enum torc_comm_dtype {
    TORC_COMM_DTYPE_F32 = 0,
    TORC_COMM_DTYPE_F64 = 1,
    TORC_COMM_DTYPE_I32 = 2,
    TORC_COMM_DTYPE_I64 = 3,
    TORC_COMM_DTYPE_U8 = 4,   // bytes: broadcast and all-gather only
    TORC_COMM_DTYPE_COUNT
} torc_comm_dtype;

// Reductions a plugin runs (append-only). Averages are the core's: a sum, then one division.
typedef enum torc_comm_op {
    TORC_COMM_OP_SUM = 0,
    TORC_COMM_OP_MAX = 1,
    TORC_COMM_OP_MIN = 2,
    TORC_COMM_OP_COUNT
} torc_comm_op;

// wait()'s results besides 0.
#define TORC_COMM_FAILED 1
#define TORC_COMM_TIMED_OUT 2

// Where a plugin's buffers live (torc_comm_vtable.memory).
#define TORC_COMM_MEMORY_HOST 0u
#define TORC_COMM_MEMORY_CUDA 1u

typedef struct torc_comm_request torc_comm_request;  // a started collective (plugin-defined)

typedef struct torc_comm_vtable {
    uint32_t abi_version;  // TORC_COMM_ABI_VERSION the plugin was built with
    uint32_t struct_size;  // sizeof(torc_comm_vtable) the plugin was built with
    const char *name;      // "mpi": must match the file name libtorc_comm_<name>.so
    uint32_t memory;       // TORC_COMM_MEMORY_HOST or _CUDA

    // v1.0, all required.
    int (*init)(void **ctx);
    void (*shutdown)(void *ctx);
    int (*rank)(void *ctx);         // 0 .. world_size-1
    int (*world_size)(void *ctx);
    int (*local_rank)(void *ctx);   // rank among the processes of this host
    // recv[i] = op over ranks of send[i], count elements on every rank. send == recv: in place.
    int (*all_reduce)(void *ctx, const void *send, void *recv, size_t count, torc_comm_dtype dtype, torc_comm_op op,
                      torc_comm_request **req);
    // buf (count elements) of rank root to every rank.
    int (*broadcast)(void *ctx, void *buf, size_t count, torc_comm_dtype dtype, int root, torc_comm_request **req);
    // recv (world_size * count) = the send buffers (count each) of ranks 0, 1, ... in order.
    int (*all_gather)(void *ctx, const void *send, void *recv, size_t count, torc_comm_dtype dtype,
                      torc_comm_request **req);
    // recv (count) = block `rank` of op over ranks of send (world_size * count).
    int (*reduce_scatter)(void *ctx, const void *send, void *recv, size_t count, torc_comm_dtype dtype,
                          torc_comm_op op, torc_comm_request **req);
    int (*barrier)(void *ctx);
    // *finished_at (may be NULL): CLOCK_MONOTONIC seconds when the collective finished, as
    // closely as the engine tells (for the core's overlap accounting).
    int (*wait)(void *ctx, torc_comm_request *req, double timeout_s, double *finished_at);
    void (*abort)(void *ctx, int code);
    const char *(*last_error)(void *ctx);

    // v1.1, optional (a 1.0 plugin's vtable ends above; NULL: not told).
    // The device index a TORC_COMM_MEMORY_CUDA plugin runs this process's collectives on (nccl:
    // local rank % devices on the host); the core refuses tensors on another device of that
    // backend and tells the user which one (torc_dist_device_index). Host plugins leave it NULL.
    int (*device)(void *ctx);
} torc_comm_vtable;

// Offsets pinned (LP64): a change that moves a member breaks every built plugin, so it must
// fail the build instead.
#if defined(__LP64__) || defined(_LP64)
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, abi_version) == 0, "comm ABI 1.0: abi_version");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, struct_size) == 4, "comm ABI 1.0: struct_size");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, name) == 8, "comm ABI 1.0: name");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, memory) == 16, "comm ABI 1.0: memory");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, init) == 24, "comm ABI 1.0: init");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, shutdown) == 32, "comm ABI 1.0: shutdown");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, rank) == 40, "comm ABI 1.0: rank");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, world_size) == 48, "comm ABI 1.0: world_size");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, local_rank) == 56, "comm ABI 1.0: local_rank");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, all_reduce) == 64, "comm ABI 1.0: all_reduce");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, broadcast) == 72, "comm ABI 1.0: broadcast");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, all_gather) == 80, "comm ABI 1.0: all_gather");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, reduce_scatter) == 88, "comm ABI 1.0: reduce_scatter");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, barrier) == 96, "comm ABI 1.0: barrier");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, wait) == 104, "comm ABI 1.0: wait");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, abort) == 112, "comm ABI 1.0: abort");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, last_error) == 120, "comm ABI 1.0: last_error");
TORC__STATIC_ASSERT(offsetof(torc_comm_vtable, device) == 128, "comm ABI 1.1: device");
TORC__STATIC_ASSERT(sizeof(torc_comm_vtable) == 136, "comm ABI 1.1: size");
#endif
#define TORC_COMM_VTABLE_V1_SIZE 128u  // the v1.0 vtable, the smallest the core takes

// The one symbol a plugin exports; it may return NULL if it cannot speak to that host.
typedef const torc_comm_vtable *(*torc_comm_entry_fn)(uint32_t host_abi_version);
#define TORC_COMM_ENTRY_SYMBOL "torc_comm_entry"
// What a plugin defines (exported with TORC_API):
TORC_API const torc_comm_vtable *torc_comm_entry(uint32_t host_abi_version);

#ifdef __cplusplus
}
#endif
#endif
