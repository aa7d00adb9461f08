// backends/cuda/index_ops.h — indexing ops (index_select, gather, scatter/index add, masked
// select/scatter, triu/tril) as plain C shared by host and device: plans and per-element bodies.
#ifndef TCU_INDEX_OPS_H
#define TCU_INDEX_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include <torc/backend.h>

#include "dtype_io.h"
#include "layout.h"

#ifdef __cplusplus
extern "C" {
#endif

// Errors a kernel cannot return: it stores one of these into the device's error word, which the
// host reads at the next synchronize (as CUDA's device-side asserts, but recoverable).
#define TCU_KERR_INDEX 1       // an index outside [0, size)
#define TCU_KERR_SOURCE 2      // masked_scatter ran out of source elements
#define TCU_KERR_ZERO_DIV 3    // an integer floor_divide / remainder / fmod by zero (ew_ops.h)

TORC_HD static inline bool tcu_op_is_index(int op) {
    return op >= TORC_OP_INDEX_SELECT && op <= TORC_OP_TRIL;
}

typedef struct tcu_index_args {
    int op;
    torc_dtype dt_out, dt_src, dt_idx;
    void *out;
    const void *src;             // in0
    const void *idx;             // in1: index (i64) or mask (bool)
    int64_t out_dim_stride;      // scatter/index add: out's stride along dim
    int64_t src_dim_stride;      // index_select/gather: in0's stride along dim
    int64_t limit;               // the size indices must stay below
    int64_t tri_k;               // triu/tril diagonal
    int64_t src_step, out_step;  // masked ops: the 1-D operand's stride
    int64_t src_numel;           // masked_scatter: source elements available
    int *err;                    // the device's error word (mapped host memory)
    tcu_iter it;                 // the walk: see tcu_index_plan_build per op
} tcu_index_args;

// Builds the walk for an indexing op. Operands of `it`:
//  INDEX_SELECT: over out;   [0] out, [1] in0 (dim stride 0), [2] index (along dim only)
//  GATHER:       over out;   [0] out, [1] in0 (dim stride 0), [2] index
//  SCATTER_ADD:  over index; [0] out (dim stride 0), [1] src, [2] index
//  INDEX_ADD:    over src;   [0] out (dim stride 0), [1] src, [2] index (along dim only)
//  MASKED_SELECT:over in0;   [0] unused, [1] in0, [2] mask     (out is 1-D: out_step)
//  MASKED_SCATTER:over out;  [0] out, [1] unused, [2] mask     (in0 is 1-D: src_step)
//  TRIU/TRIL:    over out;   [0] out, [1] in0 (last two dims kept apart)
// A 0-dim operand of an index op acts as a 1-element vector (as PyTorch and the reference).
static inline torc_operand tcu_as_1d(const torc_operand *t) {
    torc_operand r = *t;
    if (r.ndim == 0) {
        r.ndim = 1;
        r.shape[0] = 1;
        r.stride[0] = 1;
    }
    return r;
}

static inline bool tcu_index_plan_build(tcu_index_args *x, const torc_op *op) {
    const bool vec = op->code == TORC_OP_INDEX_SELECT || op->code == TORC_OP_GATHER ||
                     op->code == TORC_OP_INDEX_ADD || op->code == TORC_OP_SCATTER_ADD;
    const torc_operand out1 = vec ? tcu_as_1d(&op->out[0]) : op->out[0];
    const torc_operand src1 = vec ? tcu_as_1d(&op->in[0]) : op->in[0];
    const torc_operand idx1 = vec ? tcu_as_1d(&op->in[1]) : op->in[1];
    const torc_operand *o = &out1, *s = &src1, *ix = &idx1;
    const int nd = o->ndim;
    const int dim = op->params.dim.dim;
    int64_t s0[TORC_MAX_DIMS], s1[TORC_MAX_DIMS], s2[TORC_MAX_DIMS];
    const int64_t *st[3] = {s0, s1, s2};
    const int64_t *shape;
    int ndim;
    x->op = op->code;
    x->dt_out = o->dtype;
    x->dt_src = s->dtype;
    x->dt_idx = op->n_in > 1 ? ix->dtype : TORC_DTYPE_I64;
    x->out = o->data;
    x->src = s->data;
    x->idx = op->n_in > 1 ? ix->data : 0;
    x->out_dim_stride = x->src_dim_stride = x->limit = x->tri_k = 0;
    x->src_step = x->out_step = x->src_numel = 0;
    if (nd > TORC_MAX_DIMS || nd < 0) return false;
    unsigned flags = 0;
    switch (op->code) {
    case TORC_OP_INDEX_SELECT: case TORC_OP_GATHER: case TORC_OP_SCATTER_ADD: case TORC_OP_INDEX_ADD:
        if (dim < 0 || dim >= nd || s->ndim != nd) return false;
        break;
    default: break;
    }
    switch (op->code) {
    case TORC_OP_INDEX_SELECT:
        if (ix->ndim != 1) return false;
        shape = o->shape; ndim = nd;
        for (int d = 0; d < nd; d++) {
            s0[d] = o->stride[d];
            s1[d] = d == dim ? 0 : s->stride[d];
            s2[d] = d == dim ? ix->stride[0] : 0;
        }
        x->src_dim_stride = s->stride[dim];
        x->limit = s->shape[dim];
        break;
    case TORC_OP_GATHER:
        if (ix->ndim != nd) return false;
        shape = o->shape; ndim = nd;
        for (int d = 0; d < nd; d++) {
            s0[d] = o->stride[d];
            s1[d] = d == dim ? 0 : s->stride[d];
            s2[d] = ix->stride[d];
        }
        x->src_dim_stride = s->stride[dim];
        x->limit = s->shape[dim];
        break;
    case TORC_OP_SCATTER_ADD:
        if (ix->ndim != nd) return false;
        shape = ix->shape; ndim = nd;
        for (int d = 0; d < nd; d++) {
            s0[d] = d == dim ? 0 : o->stride[d];
            s1[d] = s->stride[d];
            s2[d] = ix->stride[d];
        }
        x->out_dim_stride = o->stride[dim];
        x->limit = o->shape[dim];
        break;
    case TORC_OP_INDEX_ADD:
        if (ix->ndim != 1) return false;
        shape = s->shape; ndim = nd;
        for (int d = 0; d < nd; d++) {
            s0[d] = d == dim ? 0 : o->stride[d];
            s1[d] = s->stride[d];
            s2[d] = d == dim ? ix->stride[0] : 0;
        }
        x->out_dim_stride = o->stride[dim];
        x->limit = o->shape[dim];
        break;
    case TORC_OP_MASKED_SELECT:
        if (ix->ndim != s->ndim || o->ndim != 1) return false;
        shape = s->shape; ndim = s->ndim;
        for (int d = 0; d < ndim; d++) {
            s0[d] = 0;
            s1[d] = s->stride[d];
            s2[d] = ix->stride[d];
        }
        x->out_step = o->stride[0];
        break;
    case TORC_OP_MASKED_SCATTER:
        if (ix->ndim != nd || s->ndim != 1) return false;
        shape = o->shape; ndim = nd;
        for (int d = 0; d < nd; d++) {
            s0[d] = o->stride[d];
            s1[d] = 0;
            s2[d] = ix->stride[d];
        }
        x->src_step = s->stride[0];
        x->src_numel = s->shape[0];
        break;
    case TORC_OP_TRIU: case TORC_OP_TRIL:
        if (nd < 2 || s->ndim != nd) return false;
        shape = o->shape; ndim = nd;
        for (int d = 0; d < nd; d++) {
            s0[d] = o->stride[d];
            s1[d] = s->stride[d];
            s2[d] = 0;
        }
        x->tri_k = op->params.tri.k;
        flags = TCU_ITER_KEEP_LAST2;
        break;
    default:
        return false;
    }
    return tcu_iter_build(&x->it, ndim, shape, 3, st, flags);
}

// ---- deterministic INDEX_ADD (floating out) ----
// Floating adds do not associate, so atomics would make the result depend on which thread gets
// there first. Instead (index_add.cu): the positions j of the index are stably sorted by their
// destination idx[j] (CUB's LSD radix sort over (idx[j], j) pairs: equal destinations keep j's
// order), and one thread per (destination run, slice element) walks its run in that order,
// adding the source rows one by one and rounding after every add exactly as the reference does.
// The result is the host's serial sum, bit for bit, whatever the launch. Integer outs keep the
// atomic walk: wrapping integer adds give one result in any order.
typedef struct tcu_index_add_args {
    torc_dtype dt_out, dt_src;
    void *out;                   // out (in place)
    const void *src;             // in0: out's shape but n_idx along dim
    const void *idx;             // in1: 1-D i64
    int64_t n_idx;               // the index's entries (N)
    int64_t idx_step;            // the index's stride
    int64_t out_dim_stride, src_dim_stride;
    int64_t limit;               // out.shape[dim]: indices must stay below it
    bool f64;                    // add in double (see tcu_index_add_plan_build)
    int *err;                    // the device's error word
    tcu_iter cols;               // one slice (every dim but dim, which has size 1): [0] out, [1] src
} tcu_index_add_args;

// INDEX_ADD's sorted plan; false if the operands do not fit the op (as tcu_index_plan_build).
static inline bool tcu_index_add_plan_build(tcu_index_add_args *x, const torc_op *op) {
    const torc_operand o = tcu_as_1d(&op->out[0]), s = tcu_as_1d(&op->in[0]), ix = tcu_as_1d(&op->in[1]);
    const int nd = o.ndim, dim = op->params.dim.dim;
    if (op->n_in < 2 || nd > TORC_MAX_DIMS || dim < 0 || dim >= nd || s.ndim != nd || ix.ndim != 1) return false;
    x->dt_out = o.dtype;
    x->dt_src = s.dtype;
    x->out = o.data;
    x->src = s.data;
    x->idx = ix.data;
    x->n_idx = ix.shape[0];
    x->idx_step = ix.stride[0];
    x->out_dim_stride = o.stride[dim];
    x->src_dim_stride = s.stride[dim];
    x->limit = o.shape[dim];
    // The reference adds in double and rounds to out's dtype (through float for the narrow ones).
    // float math gives the same bits when both sides hold at most float's 24 bits (float's sum of
    // two floats is the double sum rounded, and rounding twice, to float and then to an 11- or
    // 8-bit format, is innocuous: 24 >= 2 * 11 + 2); otherwise double.
    const torc_dtype sd = s.dtype;
    x->f64 = o.dtype == TORC_DTYPE_F64 || !(sd == TORC_DTYPE_F32 || sd == TORC_DTYPE_F16 || sd == TORC_DTYPE_BF16 ||
                                            sd == TORC_DTYPE_F8_E4M3FN || sd == TORC_DTYPE_F8_E5M2);
    x->err = 0;
    int64_t shape[TORC_MAX_DIMS];
    for (int d = 0; d < nd; d++) shape[d] = d == dim ? 1 : o.shape[d];
    const int64_t *st[2] = {o.stride, s.stride};
    return tcu_iter_build(&x->cols, nd, shape, 2, st, 0);
}

// v rounded to dtype d (a floating dtype), as a store and a load would.
TCU_HDI float tcu_round_f32_as(float v, torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F16: return torc_f16_to_f32(torc_f32_to_f16(v));
    case TORC_DTYPE_BF16: return torc_bf16_to_f32(torc_f32_to_bf16(v));
    case TORC_DTYPE_F8_E4M3FN: return torc_f8e4m3fn_to_f32(torc_f32_to_f8e4m3fn(v));
    case TORC_DTYPE_F8_E5M2: return torc_f8e5m2_to_f32(torc_f32_to_f8e5m2(v));
    default: return v;
    }
}
TCU_HDI double tcu_round_f64_as(double v, torc_dtype d) {
    return d == TORC_DTYPE_F64 ? v : (double)tcu_round_f32_as((float)v, d);  // double -> float -> d, as stores
}

// ---- atomic accumulation into any dtype ----
#if defined(__CUDA_ARCH__)
// Adds to a 1- or 2-byte element through a CAS on its aligned 32-bit word.
__device__ static inline void tcu_atomic_small(void *p, int size, torc_dtype d, double fv, int64_t iv) {
    const uintptr_t addr = (uintptr_t)p;
    unsigned int *word = (unsigned int *)(addr & ~(uintptr_t)3);
    const unsigned shift = (unsigned)(addr & 3) * 8;
    const unsigned mask = (size == 2 ? 0xFFFFu : 0xFFu) << shift;
    unsigned int old = *word, assumed;
    do {
        assumed = old;
        unsigned int cur = (assumed & mask) >> shift;
        unsigned int nxt;
        switch (d) {
        case TORC_DTYPE_F16: nxt = torc_f32_to_f16(torc_f16_to_f32((uint16_t)cur) + (float)fv); break;
        case TORC_DTYPE_BF16: nxt = torc_f32_to_bf16(torc_bf16_to_f32((uint16_t)cur) + (float)fv); break;
        case TORC_DTYPE_F8_E4M3FN: nxt = torc_f32_to_f8e4m3fn(torc_f8e4m3fn_to_f32((uint8_t)cur) + (float)fv); break;
        case TORC_DTYPE_F8_E5M2: nxt = torc_f32_to_f8e5m2(torc_f8e5m2_to_f32((uint8_t)cur) + (float)fv); break;
        case TORC_DTYPE_BOOL: nxt = (cur != 0 || iv != 0) ? 1u : 0u; break;
        default: nxt = cur + (unsigned int)(uint64_t)iv; break;  // i16, i8, u8: wrap
        }
        nxt = (nxt << shift) & mask;
        old = atomicCAS(word, assumed, (assumed & ~mask) | nxt);
    } while (old != assumed);
}
#endif

// dst[i] += v (v as double for floating dtypes, as int64 for integer ones). Atomic on the device.
TORC_HD static inline void tcu_accumulate(void *base, int64_t i, torc_dtype d, double fv, int64_t iv) {
#if defined(__CUDA_ARCH__)
    switch (d) {
    case TORC_DTYPE_F32: atomicAdd((float *)base + i, (float)fv); break;
    case TORC_DTYPE_F64: atomicAdd((double *)base + i, fv); break;
    case TORC_DTYPE_I64: atomicAdd((unsigned long long *)base + i, (unsigned long long)iv); break;
    case TORC_DTYPE_I32: atomicAdd((unsigned int *)base + i, (unsigned int)(uint64_t)iv); break;
    default: tcu_atomic_small((char *)base + i * torc_abi_dtype_size(d), torc_abi_dtype_size(d), d, fv, iv); break;
    }
#else
    if (tcu_dtype_is_float(d)) {
        if (d == TORC_DTYPE_F64) tcu_store_f64(base, i, d, tcu_load_f64(base, i, d) + fv);
        else tcu_store_f32(base, i, d, tcu_load_f32(base, i, d) + (float)fv);
    } else if (d == TORC_DTYPE_BOOL) {
        tcu_store_i64(base, i, d, tcu_load_i64(base, i, d) != 0 || iv != 0);
    } else {
        tcu_store_i64(base, i, d, (int64_t)((uint64_t)tcu_load_i64(base, i, d) + (uint64_t)iv));
    }
#endif
}

TORC_HD static inline void tcu_set_err(int *err, int code) {
    if (err) *(volatile int *)err = code;
}

// One element of index_select / gather / scatter_add / index_add / triu / tril. off: the walk's
// offsets; coord_row/coord_col: triu/tril position (row, col) within the last two dims.
TCU_HDI void tcu_index_element(const tcu_index_args *x, const int64_t *off,
                                             int64_t row, int64_t col) {
    const int op = x->op;
    if (op == TORC_OP_TRIU || op == TORC_OP_TRIL) {
        const int64_t diff = col - row;
        const bool keep = op == TORC_OP_TRIU ? diff >= x->tri_k : diff <= x->tri_k;
        if (!keep) tcu_store_i64(x->out, off[0], x->dt_out, 0);
        else if (x->dt_out == x->dt_src) tcu_move_raw(x->out, off[0], x->src, off[1], torc_abi_dtype_size(x->dt_out));
        else tcu_store_f64(x->out, off[0], x->dt_out, tcu_load_f64(x->src, off[1], x->dt_src));
        return;
    }
    const int64_t idx = tcu_load_i64(x->idx, off[2], x->dt_idx);
    if (idx < 0 || idx >= x->limit) {
        tcu_set_err(x->err, TCU_KERR_INDEX);
        return;
    }
    if (op == TORC_OP_INDEX_SELECT || op == TORC_OP_GATHER) {
        const int64_t so = off[1] + idx * x->src_dim_stride;
        if (x->dt_out == x->dt_src) tcu_move_raw(x->out, off[0], x->src, so, torc_abi_dtype_size(x->dt_out));
        else tcu_store_f64(x->out, off[0], x->dt_out, tcu_load_f64(x->src, so, x->dt_src));
    } else {  // SCATTER_ADD, INDEX_ADD
        const int64_t dst = off[0] + idx * x->out_dim_stride;
        if (tcu_dtype_is_float(x->dt_out))
            tcu_accumulate(x->out, dst, x->dt_out, tcu_load_f64(x->src, off[1], x->dt_src), 0);
        else
            tcu_accumulate(x->out, dst, x->dt_out, 0, tcu_load_i64(x->src, off[1], x->dt_src));
    }
}

// One element of a masked op given its rank among the true mask elements before it.
TCU_HDI void tcu_masked_element(const tcu_index_args *x, const int64_t *off, int64_t rank) {
    if (x->op == TORC_OP_MASKED_SELECT) {
        const int64_t o = rank * x->out_step;
        if (x->dt_out == x->dt_src) tcu_move_raw(x->out, o, x->src, off[1], torc_abi_dtype_size(x->dt_out));
        else tcu_store_f64(x->out, o, x->dt_out, tcu_load_f64(x->src, off[1], x->dt_src));
    } else {
        if (rank >= x->src_numel) {
            tcu_set_err(x->err, TCU_KERR_SOURCE);
            return;
        }
        const int64_t so = rank * x->src_step;
        if (x->dt_out == x->dt_src) tcu_move_raw(x->out, off[0], x->src, so, torc_abi_dtype_size(x->dt_out));
        else tcu_store_f64(x->out, off[0], x->dt_out, tcu_load_f64(x->src, so, x->dt_src));
    }
}

#ifdef __cplusplus
}
#endif
#endif
