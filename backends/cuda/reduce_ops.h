// backends/cuda/reduce_ops.h — reductions and softmax as plain C shared by host and device: the
// accumulators, the compute-type choice, and the plans that map outputs and rows onto threads.
#ifndef TCU_REDUCE_OPS_H
#define TCU_REDUCE_OPS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include <torc/backend.h>

#include "dtype_io.h"
#include "layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TCU_T float
#define TCU_F(x) x##_f32
#define TCU_M(fn) fn##f
#define TCU_MT float
#define TCU_LO (-INFINITY)
#define TCU_ISNAN(x) ((x) != (x))
#define TCU_HI INFINITY
#include "reduce_body.h"
#undef TCU_T
#undef TCU_F
#undef TCU_M
#undef TCU_MT
#undef TCU_LO
#undef TCU_ISNAN
#undef TCU_HI

#define TCU_T double
#define TCU_F(x) x##_f64
#define TCU_M(fn) fn
#define TCU_MT double
#define TCU_LO (-(double)INFINITY)
#define TCU_ISNAN(x) ((x) != (x))
#define TCU_HI ((double)INFINITY)
#include "reduce_body.h"
#undef TCU_T
#undef TCU_F
#undef TCU_M
#undef TCU_MT
#undef TCU_LO
#undef TCU_ISNAN
#undef TCU_HI

#define TCU_T int64_t
#define TCU_F(x) x##_i64
#define TCU_M(fn) fn
#define TCU_MT double
#define TCU_LO INT64_MIN
#define TCU_ISNAN(x) ((void)(x), false)
#define TCU_HI INT64_MAX
#include "reduce_body.h"
#undef TCU_T
#undef TCU_F
#undef TCU_M
#undef TCU_MT
#undef TCU_LO
#undef TCU_ISNAN
#undef TCU_HI

TORC_HD static inline bool tcu_op_is_reduction(int op) { return op >= TORC_OP_SUM && op <= TORC_OP_LOGSUMEXP; }
TORC_HD static inline bool tcu_op_is_arg(int op) { return op == TORC_OP_ARGMAX || op == TORC_OP_ARGMIN; }

// Accumulation type, as the reference decides its modes: integer in and out sum, multiply and
// compare exactly in int64 (arg ops whenever in is integer); f64 operands and integers under
// floating math use double; everything else float (PyTorch's f32 accumulation on CUDA).
static inline tcu_ctype tcu_reduce_ctype(int op, torc_dtype in, torc_dtype out) {
    const bool in_int = !tcu_dtype_is_float(in);
    if (in_int && tcu_op_is_arg(op)) return TCU_CT_I64;
    if (in_int && !tcu_dtype_is_float(out) &&
        (op == TORC_OP_SUM || op == TORC_OP_PROD || op == TORC_OP_MAX || op == TORC_OP_MIN))
        return TCU_CT_I64;
    if (in_int || in == TORC_DTYPE_F64 || out == TORC_DTYPE_F64) return TCU_CT_F64;
    return TCU_CT_F32;
}

// Largest accumulator state (double/int64 versions) in bytes: partial buffers use this stride.
#define TCU_ACC_BYTES 24

typedef struct tcu_reduce_args {
    int op;
    tcu_ctype ct;
    torc_dtype in_dt, out_dt;
    const void *in;
    void *out;
    double p, correction;
    int64_t n_red;
    void *partial;        // split > 1: n_out * split states, output-major
    void *values;         // MAX_DIM / MIN_DIM (run as ARGMAX / ARGMIN, out the indices): in's element
                          // at each index, copied bit for bit (operand 2 of the outer plan); else NULL
} tcu_reduce_args;

// How outputs map onto threads. A block is (group, 256 / group) threads: `group` threads share
// one output (1: a thread per output, coalesced when neighbouring outputs are neighbours in
// memory; 32: a warp; 256: the whole block). `split` > 1 cuts each output's reduction into
// `split` chunks on gridDim.y, written as partial states and merged by a second kernel.
typedef struct tcu_reduce_plan {
    tcu_iter outer;       // kept dims: [0] out, [1] in, [2] values (MAX_DIM / MIN_DIM)
    tcu_iter inner;       // reduced dims: [0] in
    int64_t n_out, n_red;
    int group, per_block; // threads per output, outputs per block (group * per_block = 256)
    int split;
    int64_t chunk;        // reduced elements per split
    uint32_t grid_x;      // blocks over outputs (grid-stride beyond)
    bool fits32;
} tcu_reduce_plan;

// Chooses the group size for n_red elements, given whether the reduced elements are contiguous
// and whether neighbouring outputs read neighbouring inputs.
static inline int tcu_group_size(int64_t n_red, bool red_contig, bool out_coalesced) {
    if (n_red <= 16) return 1;
    if (!red_contig && out_coalesced) return 1;
    return n_red >= 4096 ? 256 : 32;
}

// values: MAX_DIM / MIN_DIM's out[0] (out's shape), else NULL.
static inline bool tcu_reduce_plan_build(tcu_reduce_plan *pl, const torc_operand *in, const torc_operand *out,
                                         const torc_operand *values, uint32_t mask, int sm_count) {
    if (in->ndim != out->ndim || in->ndim > TORC_MAX_DIMS || in->ndim < 0) return false;
    if (values && values->ndim != in->ndim) return false;
    int64_t oshape[TORC_MAX_DIMS] = {0}, ishape[TORC_MAX_DIMS] = {0};  // zeroed: gcc -O3 cannot see the loop fill them
    for (int d = 0; d < in->ndim; d++) {
        const bool red = (mask >> d) & 1;
        if (out->shape[d] != (red ? 1 : in->shape[d])) return false;
        if (values && values->shape[d] != out->shape[d]) return false;
        oshape[d] = red ? 1 : in->shape[d];
        ishape[d] = red ? in->shape[d] : 1;
    }
    const int64_t *os[3] = {out->stride, in->stride, values ? values->stride : NULL};
    const int64_t *is[1] = {in->stride};
    if (!tcu_iter_build(&pl->outer, in->ndim, oshape, values ? 3 : 2, os, 0)) return false;
    if (!tcu_iter_build(&pl->inner, in->ndim, ishape, 1, is, 0)) return false;
    pl->n_out = pl->outer.numel;
    pl->n_red = pl->inner.numel;
    const bool red_contig = pl->inner.stride[0][TCU_D - 1] == 1;
    const bool out_coalesced = pl->n_out > 1 && pl->outer.stride[1][TCU_D - 1] == 1;
    pl->group = tcu_group_size(pl->n_red, red_contig, out_coalesced);
    pl->per_block = TCU_THREADS / pl->group;
    const int64_t blocks_out = (pl->n_out + pl->per_block - 1) / pl->per_block;
    pl->grid_x = (uint32_t)(blocks_out < (int64_t)TCU_MAX_BLOCKS ? blocks_out : TCU_MAX_BLOCKS);
    // Split long reductions when the outputs alone leave the device mostly idle; every chunk
    // keeps at least 64 elements per thread so the second pass stays small.
    pl->split = 1;
    if (sm_count < 1) sm_count = 1;
    const int64_t min_chunk = (int64_t)pl->group * 64;
    if (blocks_out < 2 * (int64_t)sm_count && pl->n_red >= 2 * min_chunk) {
        int64_t want = (4 * (int64_t)sm_count + blocks_out - 1) / (blocks_out > 0 ? blocks_out : 1);
        const int64_t most = pl->n_red / min_chunk;
        if (want > most) want = most;
        if (want > 1024) want = 1024;
        if (want > 1) pl->split = (int)want;
    }
    pl->chunk = (pl->n_red + pl->split - 1) / pl->split;
    if (pl->chunk < 1) pl->chunk = 1;
    pl->split = (int)((pl->n_red + pl->chunk - 1) / pl->chunk);
    if (pl->split < 1) pl->split = 1;
    pl->fits32 = tcu_iter_fits32(&pl->outer) && tcu_iter_fits32(&pl->inner) &&
                 tcu_iter_max_offset(&pl->outer, 1) + tcu_iter_max_offset(&pl->inner, 0) <= INT32_MAX;
    return true;
}

// ---- softmax rows ----
// Rows are every position of the other dims; a row has `len` elements `in_step`/`out_step`
// apart. rows: [0] out, [1] in, over the shape with dim set to 1.
typedef struct tcu_rows_plan {
    tcu_iter rows;
    int64_t n_rows, len, in_step, out_step;
    int group, per_block;
    uint32_t grid_x;
    bool fits32;
} tcu_rows_plan;

#define TCU_ROWS_PER_THREAD_MIN (16 * TCU_THREADS)   // rows for a thread per row: 16 full blocks

static inline bool tcu_rows_plan_build(tcu_rows_plan *pl, const torc_operand *in0,
                                       const torc_operand *out0, int dim) {
    torc_operand in1 = *in0, out1 = *out0;   // a 0-dim tensor is one row of one element
    if (in1.ndim == 0 && out1.ndim == 0) {
        in1.ndim = out1.ndim = 1;
        in1.shape[0] = out1.shape[0] = 1;
        in1.stride[0] = out1.stride[0] = 1;
    }
    const torc_operand *in = &in1, *out = &out1;
    if (in->ndim != out->ndim || in->ndim > TORC_MAX_DIMS || dim < 0 || dim >= in->ndim) return false;
    int64_t shape[TORC_MAX_DIMS];
    for (int d = 0; d < in->ndim; d++) {
        if (in->shape[d] != out->shape[d]) return false;
        shape[d] = d == dim ? 1 : in->shape[d];
    }
    const int64_t *st[2] = {out->stride, in->stride};
    if (!tcu_iter_build(&pl->rows, in->ndim, shape, 2, st, 0)) return false;
    pl->n_rows = pl->rows.numel;
    pl->len = in->shape[dim];
    pl->in_step = in->stride[dim];
    pl->out_step = out->stride[dim];
    // A thread per strided row reads coalesced across rows, but only pays when the rows alone
    // fill the device: few long rows (softmax over dim 0 of (50000, 8)) share a warp or a block
    // each instead.
    const bool rows_coalesced = pl->n_rows >= TCU_ROWS_PER_THREAD_MIN && pl->rows.stride[1][TCU_D - 1] == 1;
    pl->group = tcu_group_size(pl->len, pl->in_step == 1, rows_coalesced);
    pl->per_block = TCU_THREADS / pl->group;
    const int64_t blocks = (pl->n_rows + pl->per_block - 1) / pl->per_block;
    pl->grid_x = (uint32_t)(blocks < (int64_t)TCU_MAX_BLOCKS ? blocks : TCU_MAX_BLOCKS);
    const int64_t reach = pl->len > 0 ? (pl->len - 1) : 0;
    pl->fits32 = tcu_iter_fits32(&pl->rows) &&
                 tcu_iter_max_offset(&pl->rows, 1) + reach * pl->in_step <= INT32_MAX &&
                 tcu_iter_max_offset(&pl->rows, 0) + reach * pl->out_step <= INT32_MAX;
    return true;
}

#ifdef __cplusplus
}
#endif
#endif
