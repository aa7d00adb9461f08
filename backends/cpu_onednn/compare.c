// backends/cpu_onednn/compare.c — the ops masks are made of, as host loops: comparisons (EQ, NE,
// LT, LE, GT, GE) of float32 / bfloat16 operands into bool, and WHERE (a select of any 1, 2, 4
// or 8-byte dtype). Each operand is contiguous or one broadcast value (every stride 0), the
// shapes ReLU's backward (out <= 0, where(mask, 0, g)), masks and clamps make. oneDNN 2.6 has no
// select, and these ran on the reference's generic loops: ReLU's backward over 512x1024 took 6 ms.
// NaN compares false, except NE, as C's operators do and PyTorch's.
#include <omp.h>

#include "onednn-impl.h"
#include "torc/convert.h"

bool onednn__compare_takes(const torc_op *op) {
    return (op->code >= TORC_OP_EQ && op->code <= TORC_OP_GE) || op->code == TORC_OP_WHERE;
}

// 1 for a contiguous operand of out's shape, 0 for one broadcast value, -1 for anything else.
static int step_of(const torc_operand *x, const torc_operand *out) {
    if (!onednn__same_shape(x, out)) return -1;
    if (onednn__dense(x)) return 1;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] > 1 && x->stride[d] != 0) return -1;
    return 0;
}

int onednn__compare_check(const torc_op *op) {
    const char *name = onednn__op_name(op->code);
    const bool where = op->code == TORC_OP_WHERE;
    if (op->n_in != (where ? 3 : 2))
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s takes %d inputs, got %d", name, where ? 3 : 2, op->n_in);
    int st = onednn__check_operand(&op->out[0], "out");
    for (int i = 0; i < op->n_in && !st; i++) st = onednn__check_operand(&op->in[i], "in");
    if (st) return st;
    bool ok = onednn__dense(&op->out[0]);
    for (int i = 0; i < op->n_in; i++) ok = ok && step_of(&op->in[i], &op->out[0]) >= 0;
    const torc_dtype a = op->in[where].dtype, b = op->in[where + 1].dtype, o = op->out[0].dtype;
    if (where) ok = ok && op->in[0].dtype == TORC_DTYPE_BOOL && a == o && b == o;
    else ok = ok && a == b && (a == TORC_DTYPE_F32 || a == TORC_DTYPE_BF16) && o == TORC_DTYPE_BOOL;
    if (!ok)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs %s with contiguous or single broadcast operands "
                             "(others go to the reference backend)", name,
                             where ? "a bool condition and values of out's dtype" : "float32 or bfloat16 into bool");
    return 0;
}

// One comparison over [0, n): a, b with steps sa, sb (1 or 0); LOAD reads an element as float.
#define CMP_LOOP(OP, LOAD)                                                              \
    do {                                                                                \
        if (sa && sb) {                                                                 \
            for (int64_t i = 0; i < n; i++) o[i] = LOAD(a[i]) OP LOAD(b[i]);            \
        } else if (sa) {                                                                \
            const float y = LOAD(b[0]);                                                 \
            for (int64_t i = 0; i < n; i++) o[i] = LOAD(a[i]) OP y;                     \
        } else {                                                                        \
            const float x = LOAD(a[0]);                                                 \
            for (int64_t i = 0; i < n; i++) o[i] = x OP(sb ? LOAD(b[i]) : LOAD(b[0]));  \
        }                                                                               \
    } while (0)

#define CMP_FN(suffix, T, LOAD)                                                                         \
    static void cmp_##suffix(torc_opcode code, const T *a, int64_t sa, const T *b, int64_t sb, bool *o, \
                             int64_t n) {                                                               \
        switch (code) {                                                                                 \
        case TORC_OP_EQ: CMP_LOOP(==, LOAD); break;                                                     \
        case TORC_OP_NE: CMP_LOOP(!=, LOAD); break;                                                     \
        case TORC_OP_LT: CMP_LOOP(<, LOAD); break;                                                      \
        case TORC_OP_LE: CMP_LOOP(<=, LOAD); break;                                                     \
        case TORC_OP_GT: CMP_LOOP(>, LOAD); break;                                                      \
        default: CMP_LOOP(>=, LOAD); break;                                                             \
        }                                                                                               \
    }
#define LOAD_F32(v) (v)
CMP_FN(f32, float, LOAD_F32)
CMP_FN(bf16, uint16_t, torc_bf16_to_f32)

// out[i] = c[i] ? a[i] : b[i] for elements of T, each operand stepping by its s (1 or 0), as a
// branch-free select (c is 0 or 1: -c is all ones or zero) so the loops vectorize; a broadcast
// value is read once (ReLU's backward selects a zero).
#define SELECT(T, cv, x, y) ((T)(((x) & (T) - (T)(cv)) | ((y) & (T) ~(T) - (T)(cv))))
#define WHERE_FN(T)                                                                                    \
    static void where_##T(const bool *c, int64_t sc, const T *a, int64_t sa, const T *b, int64_t sb,  \
                          T *o, int64_t n) {                                                           \
        if (sc && sa && sb) {                                                                          \
            for (int64_t i = 0; i < n; i++) o[i] = SELECT(T, c[i], a[i], b[i]);                           \
        } else if (sc && sb) {                                                                         \
            const T x = a[0];                                                                          \
            for (int64_t i = 0; i < n; i++) o[i] = SELECT(T, c[i], x, b[i]);                             \
        } else if (sc && sa) {                                                                         \
            const T y = b[0];                                                                          \
            for (int64_t i = 0; i < n; i++) o[i] = SELECT(T, c[i], a[i], y);                              \
        } else if (sc) {                                                                               \
            const T x = a[0], y = b[0];                                                                \
            for (int64_t i = 0; i < n; i++) o[i] = SELECT(T, c[i], x, y);                                 \
        } else {                                                                                       \
            for (int64_t i = 0; i < n; i++) o[i] = c[i * sc] ? a[i * sa] : b[i * sb];                  \
        }                                                                                              \
    }
WHERE_FN(uint8_t)
WHERE_FN(uint16_t)
WHERE_FN(uint32_t)
WHERE_FN(uint64_t)

// Elements [i0, i1) of op.
static void run_range(const torc_op *op, const int64_t *steps, int64_t i0, int64_t i1) {
    const int64_t n = i1 - i0;
    if (op->code != TORC_OP_WHERE) {
        const int64_t sa = steps[0], sb = steps[1];
        bool *o = (bool *)op->out[0].data + i0;
        if (op->in[0].dtype == TORC_DTYPE_F32)
            cmp_f32(op->code, (const float *)op->in[0].data + i0 * sa, sa, (const float *)op->in[1].data + i0 * sb, sb, o, n);
        else
            cmp_bf16(op->code, (const uint16_t *)op->in[0].data + i0 * sa, sa, (const uint16_t *)op->in[1].data + i0 * sb,
                     sb, o, n);
        return;
    }
    const int64_t sc = steps[0], sa = steps[1], sb = steps[2];
    const bool *c = (const bool *)op->in[0].data + i0 * sc;
    const size_t es = torc_abi_dtype_size(op->out[0].dtype);
    const char *a = (const char *)op->in[1].data + (size_t)(i0 * sa) * es, *b = (const char *)op->in[2].data + (size_t)(i0 * sb) * es;
    char *o = (char *)op->out[0].data + (size_t)i0 * es;
    switch (es) {
    case 8: where_uint64_t(c, sc, (const uint64_t *)a, sa, (const uint64_t *)b, sb, (uint64_t *)o, n); break;
    case 4: where_uint32_t(c, sc, (const uint32_t *)a, sa, (const uint32_t *)b, sb, (uint32_t *)o, n); break;
    case 2: where_uint16_t(c, sc, (const uint16_t *)a, sa, (const uint16_t *)b, sb, (uint16_t *)o, n); break;
    default: where_uint8_t(c, sc, (const uint8_t *)a, sa, (const uint8_t *)b, sb, (uint8_t *)o, n); break;
    }
}

int onednn__compare_run(const torc_op *op) {
    const int64_t n = onednn__numel(&op->out[0]);
    if (n == 0) return 0;
    int64_t steps[3];
    for (int i = 0; i < op->n_in; i++) steps[i] = step_of(&op->in[i], &op->out[0]);
    const int nthr = onednn__single_thread(op->code, n) ? 1 : omp_get_max_threads();
    if (nthr <= 1) {
        run_range(op, steps, 0, n);
        return 0;
    }
#pragma omp parallel num_threads(nthr)
    {
        int64_t i0, i1;
        onednn__thread_range(n, &i0, &i1);
        run_range(op, steps, i0, i1);
    }
    return 0;
}
