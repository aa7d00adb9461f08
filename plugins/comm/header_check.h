// plugins/comm/header_check.h — the collective header that mpi.c and nccl.c all-reduce before
// each collective, and the check of it: which field differs between the ranks and how to word
// it. Included by both plugins (each is its own shared object), hence static.
#ifndef TORC_COMM_HEADER_CHECK_H
#define TORC_COMM_HEADER_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "torc/comm.h"

typedef enum { JOB_ALL_REDUCE, JOB_BROADCAST, JOB_ALL_GATHER, JOB_REDUCE_SCATTER, JOB_BARRIER } job_kind;

static const char *const job_names[] = {"all-reduce", "broadcast", "all-gather", "reduce-scatter", "barrier"};
static const char *const dtype_names[] = {"float32", "float64", "int32", "int64", "uint8"};
static const char *const op_names[] = {"sum", "max", "min"};
_Static_assert(sizeof dtype_names / sizeof *dtype_names == TORC_COMM_DTYPE_COUNT, "a comm dtype without a name");
_Static_assert(sizeof op_names / sizeof *op_names == TORC_COMM_OP_COUNT, "a comm op without a name");

// The header's fields; it travels as the fields then their negations, all-reduced by MAX, so
// every rank learns each field's largest and smallest value. H_BAD: this rank cannot start the
// collective (a count beyond what the transport takes), so that no rank starts it.
enum { H_KIND, H_DTYPE, H_OP, H_ROOT, H_COUNT, H_BAD, H_FIELDS };

// What this rank is about to call, as the header's fields then their negations (h holds
// 2 * H_FIELDS); the fields a collective does not use are 0.
static inline void header_fill(int64_t *h, job_kind kind, torc_comm_dtype dtype, torc_comm_op op, int root,
                               size_t count, bool bad) {
    const bool reduces = kind == JOB_ALL_REDUCE || kind == JOB_REDUCE_SCATTER;
    const int64_t f[H_FIELDS] = {
        [H_KIND] = kind,
        [H_DTYPE] = kind == JOB_BARRIER ? 0 : dtype,
        [H_OP] = reduces ? op : 0,
        [H_ROOT] = kind == JOB_BROADCAST ? root : 0,
        [H_COUNT] = kind == JOB_BARRIER ? 0 : (int64_t)(count > (size_t)INT64_MAX ? INT64_MAX : count),
        [H_BAD] = bad,
    };
    for (int i = 0; i < H_FIELDS; i++) h[i] = f[i], h[H_FIELDS + i] = -f[i];
}

// After the header's all-reduce: hdr holds the maxima then the negated minima, mine this rank's
// own fields, kind this rank's collective. -1 when every rank called the same collective; else
// the first field that differs. For any field but H_BAD (which each plugin words itself), out
// gets the whole message for rank `rank`: this rank's value and another rank's.
static inline int header_differs(const int64_t *hdr, const int64_t *mine, job_kind kind, int rank, char *out,
                                 size_t n) {
    int f = -1;
    for (int i = 0; i < H_FIELDS && f < 0; i++)
        if (hdr[i] != -hdr[H_FIELDS + i]) f = i;
    if (f < 0 || f == H_BAD) return f;
    const int64_t hi = hdr[f], lo = -hdr[H_FIELDS + f], other = mine[f] == hi ? lo : hi;
    const char *what = job_names[kind];
    char d[200];
    switch (f) {
    case H_KIND:
        snprintf(d, sizeof d, "this rank called %s, another rank %s", what,
                 other >= 0 && other <= JOB_BARRIER ? job_names[other] : "an unknown collective");
        break;
    case H_DTYPE:
        snprintf(d, sizeof d, "this rank's %s is of %s, another rank's of %s", what, dtype_names[mine[f]],
                 other >= 0 && other < TORC_COMM_DTYPE_COUNT ? dtype_names[other] : "an unknown dtype");
        break;
    case H_OP:
        snprintf(d, sizeof d, "this rank's %s reduces by %s, another rank's by %s", what, op_names[mine[f]],
                 other >= 0 && other < TORC_COMM_OP_COUNT ? op_names[other] : "an unknown op");
        break;
    case H_ROOT:
        snprintf(d, sizeof d, "this rank's %s is from rank %lld, another rank's from rank %lld", what, (long long)mine[f],
                 (long long)other);
        break;
    default:  // H_COUNT
        snprintf(d, sizeof d, "this rank's %s has %lld elements%s, another rank's %lld", what, (long long)mine[f],
                 kind == JOB_ALL_GATHER || kind == JOB_REDUCE_SCATTER ? " a rank" : "", (long long)other);
        break;
    }
    snprintf(out, n,
             "rank %d: the ranks called different collectives: %s; every rank must issue the same collectives in "
             "the same order with the same sizes (nothing was sent: do the ranks run the same model and options?)",
             rank, d);
    return f;
}

#endif
