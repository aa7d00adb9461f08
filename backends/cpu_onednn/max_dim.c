// backends/cpu_onednn/max_dim.c — MAX_DIM / MIN_DIM (torch.max / torch.min along a dim: values and
// indices) as OpenMP host loops over a contiguous in0 of any dtype but fp8; oneDNN's reduction
// primitive has no indices. The reference's rule exactly: the first index of the extreme, the first
// NaN wins, -0.0 and +0.0 tie, the value copied bit for bit from in0. Strided inputs and fp8 stay
// on the reference. On one Zen 4 core (TORC_NUM_THREADS=1): (512, 1000) over dim 1 in 0.17 ms (f32)
// and 0.20 ms (bf16), the reference 1.2 and 1.3 ms; (1024, 1024) over dim 0 in 0.4 and 0.35 ms,
// the reference 3.6-7.7 and 3.0-7.0 ms (the VM was loaded).
#include <omp.h>
#include <string.h>

#include "onednn-impl.h"
#include "torc/convert.h"

bool onednn__max_dim_takes(const torc_op *op) { return op->code == TORC_OP_MAX_DIM || op->code == TORC_OP_MIN_DIM; }

int onednn__max_dim_check(const torc_op *op) {
    const char *name = onednn__op_name(op->code);
    if (op->n_in != 1 || op->n_out != 2)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s takes 1 input and 2 outputs, got %d and %d", name,
                             op->n_in, op->n_out);
    int st = onednn__check_operand(&op->in[0], "in");
    for (int k = 0; k < 2 && !st; k++) st = onednn__check_operand(&op->out[k], k ? "out1" : "out");
    if (st) return st;
    const torc_operand *in = &op->in[0];
    const int dim = op->params.dim.dim;
    // The loops keep row indices in int32 (below): a dim of 2^31 or more stays on the reference.
    bool ok = in->ndim >= 1 && dim >= 0 && dim < in->ndim && in->shape[dim] > 0 && in->shape[dim] <= INT32_MAX;
    for (int k = 0; k < 2 && ok; k++) {
        const torc_operand *o = &op->out[k];
        ok = o->ndim == in->ndim && onednn__dense(o);
        for (int d = 0; d < in->ndim && ok; d++) ok = o->shape[d] == (d == dim ? 1 : in->shape[d]);
    }
    const torc_dtype dt = in->dtype;
    ok = ok && onednn__dense(in) && op->out[0].dtype == dt && op->out[1].dtype == TORC_DTYPE_I64 &&
         dt != TORC_DTYPE_F8_E4M3FN && dt != TORC_DTYPE_F8_E5M2;
    if (!ok)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs a contiguous input of any dtype but fp8 into "
                             "contiguous values and int64 indices (others go to the reference backend)", name);
    return 0;
}

// ---- the loops, per element type T compared as C (LOAD: T -> C; ISNAN: false for integers) ----
// in0 is (outer, n, inner) row-major; values and indices (outer, inner).
//
// inner == 1, one row of n: each block of ROW_BLOCK elements is first tested for a value better
// than the running extreme, or a NaN (a vectorized OR over the block); only a block holding one is
// walked element by element. On random data that is the first few blocks of a row.
//
// inner > 1: COL_BLOCK columns at a time, each with its running extreme and index, updated row by
// row without branches: upd = (v better than b, or v NaN) and b not NaN. The indices are int32
// there, as wide as a float's compare mask: with int64 ones (1024, 1024) over dim 0 took 1.0 ms on
// one Zen 4 core, with int32 0.4 ms.
#define ROW_BLOCK 64
#define COL_BLOCK 256

#define BETTER_MAX(v, b) ((v) > (b))
#define BETTER_MIN(v, b) ((v) < (b))

#define MINMAX_LOOPS(SUF, T, C, LOAD, ISNAN, BETTER)                                                       \
    static int64_t row_##SUF(const void *xv, int64_t n) {                                                  \
        const T *x = xv;                                                                                   \
        C best = LOAD(x[0]);                                                                               \
        int64_t bi = 0;                                                                                    \
        if (ISNAN(best)) return 0;                                                                         \
        for (int64_t i = 1; i < n; i += ROW_BLOCK) {                                                       \
            const int64_t e = i + ROW_BLOCK < n ? i + ROW_BLOCK : n;                                       \
            int hit = 0;                                                                                   \
            _Pragma("omp simd reduction(| : hit)") for (int64_t j = i; j < e; j++) {                       \
                const C v = LOAD(x[j]);                                                                    \
                hit |= BETTER(v, best) | ISNAN(v);                                                         \
            }                                                                                              \
            if (!hit) continue;                                                                            \
            for (int64_t j = i; j < e; j++) {                                                              \
                const C v = LOAD(x[j]);                                                                    \
                if (ISNAN(v)) return j;                                                                    \
                if (BETTER(v, best)) best = v, bi = j;                                                     \
            }                                                                                              \
        }                                                                                                  \
        return bi;                                                                                         \
    }                                                                                                      \
    /* columns [0, w) of one (n, inner) slab: bi[j] for column j */                                        \
    static void cols_##SUF(const void *xv, int64_t n, int64_t inner, int64_t w, int64_t *bi) {             \
        const T *x = xv;                                                                                   \
        C best[COL_BLOCK];                                                                                 \
        int32_t b32[COL_BLOCK];                                                                            \
        for (int64_t j = 0; j < w; j++) best[j] = LOAD(x[j]), b32[j] = 0;                                  \
        for (int64_t i = 1; i < n; i++) {                                                                  \
            const T *r = x + i * inner;                                                                    \
            const int32_t i32 = (int32_t)i;                                                                \
            _Pragma("omp simd") for (int64_t j = 0; j < w; j++) {                                          \
                const C v = LOAD(r[j]), b = best[j];                                                       \
                const int upd = (BETTER(v, b) | ISNAN(v)) & !ISNAN(b);                                     \
                best[j] = upd ? v : b;                                                                     \
                b32[j] = upd ? i32 : b32[j];                                                               \
            }                                                                                              \
        }                                                                                                  \
        for (int64_t j = 0; j < w; j++) bi[j] = b32[j];                                                    \
    }

#define ID(x) (x)
#define NO_NAN(x) 0
#define IS_NAN(x) ((x) != (x))
#define FOR_EACH_TYPE(M, OP, BETTER)                                                \
    M(f64_##OP, double, double, ID, IS_NAN, BETTER)                                 \
    M(f32_##OP, float, float, ID, IS_NAN, BETTER)                                   \
    M(bf16_##OP, uint16_t, float, torc_bf16_to_f32, IS_NAN, BETTER)                 \
    M(f16_##OP, uint16_t, float, torc_f16_to_f32, IS_NAN, BETTER)                   \
    M(i64_##OP, int64_t, int64_t, ID, NO_NAN, BETTER)                               \
    M(i32_##OP, int32_t, int32_t, ID, NO_NAN, BETTER)                               \
    M(i16_##OP, int16_t, int16_t, ID, NO_NAN, BETTER)                               \
    M(i8_##OP, int8_t, int8_t, ID, NO_NAN, BETTER)                                  \
    M(u8_##OP, uint8_t, uint8_t, ID, NO_NAN, BETTER) /* bool too: bytes of 0 and 1 */
FOR_EACH_TYPE(MINMAX_LOOPS, max, BETTER_MAX)
FOR_EACH_TYPE(MINMAX_LOOPS, min, BETTER_MIN)

typedef int64_t (*row_fn)(const void *x, int64_t n);
typedef void (*cols_fn)(const void *x, int64_t n, int64_t inner, int64_t w, int64_t *bi);

// The loops for dtype dt (max or min).
static void loops_of(torc_dtype dt, bool is_max, row_fn *row, cols_fn *cols) {
#define PICK(SUF)                                                 \
    do {                                                          \
        *row = is_max ? row_##SUF##_max : row_##SUF##_min;        \
        *cols = is_max ? cols_##SUF##_max : cols_##SUF##_min;     \
    } while (0)
    switch (dt) {
    case TORC_DTYPE_F64: PICK(f64); break;
    case TORC_DTYPE_F32: PICK(f32); break;
    case TORC_DTYPE_BF16: PICK(bf16); break;
    case TORC_DTYPE_F16: PICK(f16); break;
    case TORC_DTYPE_I64: PICK(i64); break;
    case TORC_DTYPE_I32: PICK(i32); break;
    case TORC_DTYPE_I16: PICK(i16); break;
    case TORC_DTYPE_I8: PICK(i8); break;
    default: PICK(u8); break;  // u8, bool
    }
#undef PICK
}

int onednn__max_dim_run(const torc_op *op) {
    const torc_operand *in = &op->in[0];
    const int dim = op->params.dim.dim;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < dim; d++) outer *= in->shape[d];
    for (int d = dim + 1; d < in->ndim; d++) inner *= in->shape[d];
    const int64_t n = in->shape[dim];
    if (outer * inner == 0) return 0;
    row_fn row;
    cols_fn cols;
    loops_of(in->dtype, op->code == TORC_OP_MAX_DIM, &row, &cols);
    const size_t es = torc_abi_dtype_size(in->dtype);
    const char *x = in->data;
    char *val = op->out[0].data;
    int64_t *idx = op->out[1].data;
    // Tasks: one row each (inner == 1), else one block of columns of one slab.
    const int64_t nblk = inner == 1 ? 1 : (inner + COL_BLOCK - 1) / COL_BLOCK, tasks = outer * nblk;
    const int nthr = onednn__single_thread(op->code, outer * n * inner) ? 1 : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(nthr) if (nthr > 1 && tasks > 1)
    for (int64_t t = 0; t < tasks; t++) {
        const int64_t o = t / nblk, j0 = t % nblk * COL_BLOCK;
        const char *slab = x + (size_t)(o * n * inner) * es;
        if (inner == 1) {
            const int64_t i = row(slab, n);
            idx[o] = i;
            memcpy(val + (size_t)o * es, slab + (size_t)i * es, es);
            continue;
        }
        const int64_t w = inner - j0 < COL_BLOCK ? inner - j0 : COL_BLOCK;
        int64_t *bi = idx + o * inner + j0;
        cols(slab + (size_t)j0 * es, n, inner, w, bi);
        for (int64_t j = 0; j < w; j++)
            memcpy(val + (size_t)(o * inner + j0 + j) * es, slab + (size_t)(bi[j] * inner + j0 + j) * es, es);
    }
    return 0;
}
