// backends/cpu_onednn/copy.c — TORC_OP_COPY: copies that move bytes (same dtype, bool into a
// 1-byte integer) as torc's own strided loops, and dtype casts on oneDNN's reorder. A byte move
// never goes through oneDNN: its reorder converts values (on AVX2, a bf16 "copy" of i16 data
// quieted NaN patterns and flushed subnormals). Only casts whose oneDNN result equals PyTorch's
// are claimed: oneDNN saturates and rounds where PyTorch truncates or wraps (float -> int, int
// narrowing), so those fall back.
#include <omp.h>
#include <string.h>

#include "onednn-impl.h"

// ---- byte moves ----
bool onednn__move_takes(const torc_op *op) {
    if (op->code != TORC_OP_COPY || op->n_in != 1) return false;
    const torc_dtype s = op->in[0].dtype, d = op->out[0].dtype;
    return s == d || (s == TORC_DTYPE_BOOL && (d == TORC_DTYPE_U8 || d == TORC_DTYPE_I8));  // 0/1 either way
}

int onednn__move_check(const torc_op *op) {
    int st = onednn__check_operand(&op->in[0], "in");
    if (!st) st = onednn__check_operand(&op->out[0], "out");
    if (!st && !onednn__same_shape(&op->in[0], &op->out[0]))
        st = onednn__error(TORC_ERR_SHAPE, "onednn: copy: in and out shapes differ");
    return st;
}

// The loop's shape: out's dims ordered by descending out stride, size-1 dims dropped and dims
// merged where both operands are contiguous across them; the innermost dim is last.
typedef struct move_shape {
    int nd;
    int64_t n[TORC_MAX_DIMS], si[TORC_MAX_DIMS], so[TORC_MAX_DIMS];
} move_shape;

static void move_shape_of(const torc_op *op, move_shape *m) {
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    int perm[TORC_MAX_DIMS], nd = 0;
    for (int d = 0; d < y->ndim; d++)
        if (y->shape[d] != 1) perm[nd++] = d;
    for (int i = 1; i < nd; i++)  // insertion sort on out's strides, stable
        for (int j = i; j > 0 && y->stride[perm[j - 1]] < y->stride[perm[j]]; j--) {
            const int t = perm[j];
            perm[j] = perm[j - 1];
            perm[j - 1] = t;
        }
    m->nd = 0;
    for (int i = 0; i < nd; i++) {
        const int d = perm[i];
        const int k = m->nd - 1;
        if (k >= 0 && m->si[k] == x->stride[d] * x->shape[d] && m->so[k] == y->stride[d] * y->shape[d]) {
            m->n[k] *= x->shape[d];  // contiguous across both: one longer dim
            m->si[k] = x->stride[d];
            m->so[k] = y->stride[d];
            continue;
        }
        m->n[m->nd] = x->shape[d];
        m->si[m->nd] = x->stride[d];
        m->so[m->nd] = y->stride[d];
        m->nd++;
    }
    if (m->nd == 0) {  // one element
        m->nd = 1;
        m->n[0] = 1;
        m->si[0] = m->so[0] = 1;
    }
}

// Moves n elements of size esz from src (stride si) to dst (stride so), strides in elements.
static inline void move_row(char *dst, const char *src, int64_t n, int64_t so, int64_t si, size_t esz) {
    if (so == 1 && si == 1) {
        memcpy(dst, src, (size_t)n * esz);
        return;
    }
#define MOVE_ROW(T)                                                                                    for (int64_t k = 0; k < n; k++) ((T *)(void *)dst)[k * so] = ((const T *)(const void *)src)[k * si];     return
    switch (esz) {
    case 8: MOVE_ROW(uint64_t);
    case 4: MOVE_ROW(uint32_t);
    case 2: MOVE_ROW(uint16_t);
    default: MOVE_ROW(uint8_t);
    }
#undef MOVE_ROW
}

// A transpose (out's inner dim strided in the input, another dim unit-stride there) moves
// MOVE_TILE x MOVE_TILE blocks, so that reads and writes both stay within a few cache lines.
#define MOVE_TILE 32

int onednn__move_run(const torc_op *op) {
    const int64_t total = onednn__numel(&op->out[0]);
    if (total == 0) return 0;
    move_shape m;
    move_shape_of(op, &m);
    const size_t esz = torc_abi_dtype_size(op->out[0].dtype);
    const char *src = op->in[0].data;
    char *dst = op->out[0].data;
    const int in = m.nd - 1;  // the innermost dim
    int tj = -1;              // the dim tiled against it, if any
    if (m.si[in] != 1)
        for (int d = 0; d < in; d++)
            if (m.si[d] == 1) tj = d;
    // Work items: rows of the innermost dim over the outer dims; with a tile dim, blocks of
    // MOVE_TILE of it (each moving MOVE_TILE rows, in MOVE_TILE-column strips).
    int64_t outer[TORC_MAX_DIMS];
    int no = 0;
    for (int d = 0; d < in; d++) outer[no++] = d == tj ? (m.n[d] + MOVE_TILE - 1) / MOVE_TILE : m.n[d];
    int64_t items = 1;
    for (int d = 0; d < no; d++) items *= outer[d];
    const bool par = !onednn__single_thread(TORC_OP_COPY, total);
    ONEDNN_FOR(par, it, items, {
        int64_t r = it, oi = 0, oo = 0, j0 = 0;
        for (int d = no - 1; d >= 0; d--) {
            const int64_t idx = r % outer[d];
            r /= outer[d];
            if (d == tj) {
                j0 = idx * MOVE_TILE;
                oi += j0 * m.si[d];
                oo += j0 * m.so[d];
            } else {
                oi += idx * m.si[d];
                oo += idx * m.so[d];
            }
        }
        const char *s0 = src + oi * (int64_t)esz;
        char *d0 = dst + oo * (int64_t)esz;
        if (tj < 0) {
            move_row(d0, s0, m.n[in], m.so[in], m.si[in], esz);
            continue;
        }
        const int64_t nj = m.n[tj] - j0 < MOVE_TILE ? m.n[tj] - j0 : MOVE_TILE;
        for (int64_t k0 = 0; k0 < m.n[in]; k0 += MOVE_TILE) {
            const int64_t nk = m.n[in] - k0 < MOVE_TILE ? m.n[in] - k0 : MOVE_TILE;
            for (int64_t j = 0; j < nj; j++)
                move_row(d0 + (j * m.so[tj] + k0 * m.so[in]) * (int64_t)esz,
                         s0 + (j * m.si[tj] + k0 * m.si[in]) * (int64_t)esz, nk, m.so[in], m.si[in], esz);
        }
    });
    return 0;
}

// ---- casts on oneDNN's reorder ----

// Exact, or rounded once to nearest even as PyTorch does. Conversions to or from f16 are left
// to the reference: oneDNN 2.6 converts f16 in generic code at ~60 ns/element.
static bool cast_ok(torc_dtype s, torc_dtype d) {
    const bool small_int = s == TORC_DTYPE_I8 || s == TORC_DTYPE_U8 || s == TORC_DTYPE_BOOL;
    switch (d) {
    case TORC_DTYPE_F32: return s == TORC_DTYPE_BF16 || s == TORC_DTYPE_I32 || small_int;
    case TORC_DTYPE_BF16: return s == TORC_DTYPE_F32 || small_int;
    case TORC_DTYPE_I32: return small_int;
    default: return false;
    }
}

static dnnl_data_type_t copy_dt(torc_dtype d) {
    return d == TORC_DTYPE_BOOL ? dnnl_u8 : onednn__dt(d);
}

int onednn__build_copy(const torc_op *op, onednn_plan *p) {
    if (op->n_in != 1)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: copy takes 1 input, got %d", op->n_in);
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    if (!onednn__same_shape(x, y))
        return onednn__error(TORC_ERR_SHAPE, "onednn: copy: in and out shapes differ");
    if (!cast_ok(x->dtype, y->dtype))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: copy %s -> %s is left to the reference "
                             "backend (oneDNN's conversion differs from PyTorch's)",
                             torc_abi_dtype_name(x->dtype), torc_abi_dtype_name(y->dtype));
    if (onednn__numel(y) == 0) return 0;
    onednn_view vs, vd;
    onednn__view(&vs, x, copy_dt(x->dtype));
    onednn__view(&vd, y, copy_dt(y->dtype));
    // Strided f32 <-> bf16 with torc's conversion (c10's rounding; the reorder's vcvtneps2bf16
    // flushes subnormals); dense ones do not come here (cast.c).
    if ((x->dtype == TORC_DTYPE_F32 && y->dtype == TORC_DTYPE_BF16) ||
        (x->dtype == TORC_DTYPE_BF16 && y->dtype == TORC_DTYPE_F32))
        return onednn__plan_convert(p, &vs, ONEDNN_BUF_IN0, &vd, ONEDNN_BUF_OUT, dnnl_data_type_undef);
    onednn__view_normalize(&vs);
    onednn__view_normalize(&vd);
    return onednn__plan_reorder(p, &vs, ONEDNN_BUF_IN0, &vd, ONEDNN_BUF_OUT);
}
