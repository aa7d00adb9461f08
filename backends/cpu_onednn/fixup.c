// backends/cpu_onednn/fixup.c — PyTorch's exact results where oneDNN deviates on special values:
// its max/min (binary, reduction, relu) keep the non-NaN operand and its exp saturates NaN to
// inf. (Its f32 -> bf16 conversion, which flushes subnormals, is never used: plan.c's
// onednn__plan_dst.) After such a primitive runs, one parallel pass checks the inputs for the
// values that matter (NaN; +inf for softmax); only when one is found does a serial pass
// recompute the affected outputs exactly.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onednn-impl.h"
#include "torc/convert.h"

// ---- what counts as special ----
typedef struct special_set {
    bool posinf;     // softmax: +inf makes a row NaN
} special_set;

static special_set specials_of(onednn_fixup kind) {
    special_set s = {kind == ONEDNN_FIXUP_ROWS};
    return s;
}

// Bit tests on f32 (4-byte) and bf16 / f16 (2-byte) patterns.
typedef struct fmt {
    int bytes;
    uint32_t abs_mask, inf;
} fmt;

static bool fmt_of(torc_dtype d, fmt *f) {
    switch (d) {
    case TORC_DTYPE_F32: *f = (fmt){4, UINT32_C(0x7fffffff), UINT32_C(0x7f800000)}; return true;
    case TORC_DTYPE_BF16: *f = (fmt){2, 0x7fff, 0x7f80}; return true;
    case TORC_DTYPE_F16: *f = (fmt){2, 0x7fff, 0x7c00}; return true;
    default: return false;  // integers hold no special values
    }
}

static inline uint32_t load_bits(const char *p, int bytes) {
    if (bytes == 4) {
        uint32_t u;
        memcpy(&u, p, 4);
        return u;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

static inline bool is_special(uint32_t u, const fmt *f, special_set s) {
    const uint32_t a = u & f->abs_mask;
    return a > f->inf || (s.posinf && u == f->inf);
}

// ---- the check: does x hold a special value? ----
static int scan_run(const char *p, int64_t n, int64_t stride, const fmt *f, special_set s) {
    int acc = 0;
    const uint32_t inf = f->inf, am = f->abs_mask;
    const int pi = s.posinf;
    if (f->bytes == 4 && stride == 1) {
#pragma omp simd reduction(| : acc)
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            const uint32_t a = u & am;
            acc |= (a > inf) | (pi & (u == inf));
        }
    } else if (f->bytes == 2 && stride == 1) {
#pragma omp simd reduction(| : acc)
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            const uint32_t u = h, a = u & am;
            acc |= (a > inf) | (pi & (u == inf));
        }
    } else {
        for (int64_t i = 0; i < n; i++) acc |= is_special(load_bits(p + i * stride * f->bytes, f->bytes), f, s);
    }
    return acc;
}

#define SCAN_CHUNK 16384

static bool has_special(const torc_operand *x, special_set s) {
    fmt f;
    if (!fmt_of(x->dtype, &f)) return false;
    // The distinct elements only: drop size-1 and stride-0 dims, merge dims that nest densely.
    int n = 0;
    int64_t shape[TORC_MAX_DIMS], stride[TORC_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] == 0) return false;
        if (x->shape[d] == 1 || x->stride[d] == 0) continue;
        if (n > 0 && stride[n - 1] == x->stride[d] * x->shape[d]) {
            shape[n - 1] *= x->shape[d];
            stride[n - 1] = x->stride[d];
        } else {
            shape[n] = x->shape[d];
            stride[n] = x->stride[d];
            n++;
        }
    }
    const int64_t len = n > 0 ? shape[n - 1] : 1, step = n > 0 ? stride[n - 1] : 1;
    const int64_t chunks = (len + SCAN_CHUNK - 1) / SCAN_CHUNK;
    int64_t rows = 1;
    for (int d = 0; d < n - 1; d++) rows *= shape[d];
    const char *base = x->data;
    int found = 0;
#pragma omp parallel for reduction(| : found) schedule(static) if (rows * chunks > 1)
    for (int64_t b = 0; b < rows * chunks; b++) {
        int64_t r = b / chunks, c = b % chunks, off = 0;
        for (int d = n - 2; d >= 0; d--) {
            off += (r % shape[d]) * stride[d];
            r /= shape[d];
        }
        const int64_t start = c * SCAN_CHUNK;
        const int64_t cnt = len - start < SCAN_CHUNK ? len - start : SCAN_CHUNK;
        found |= scan_run(base + (off + start * step) * f.bytes, cnt, step, &f, s);
    }
    return found != 0;
}

// (One chunk or less is scanned by the calling thread alone: waking the team costs more.)
bool onednn__fixup_needed(onednn_fixup kind, const torc_op *op) {
    if (kind == ONEDNN_FIXUP_NONE || onednn__numel(&op->out[0]) == 0) return false;
    const special_set s = specials_of(kind);
    for (int i = 0; i < op->n_in; i++)
        if (has_special(&op->in[i], s)) return true;
    return false;
}

// ---- exact recomputation (rare: only when a special value was found) ----
static char *elem(const torc_operand *x, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < x->ndim; d++) off += idx[d] * x->stride[d];
    return (char *)x->data + off * (int64_t)torc_abi_dtype_size(x->dtype);
}

// The dtypes a fixed-up op reads (elementwise sources are f32/bf16/f16/i32/i8/u8/bool).
static double load(const torc_operand *x, const int64_t *idx) {
    const char *p = elem(x, idx);
    switch (x->dtype) {
    case TORC_DTYPE_F32: return torc_f32_from_bits(load_bits(p, 4));
    case TORC_DTYPE_BF16: return torc_bf16_to_f32((uint16_t)load_bits(p, 2));
    case TORC_DTYPE_F16: return torc_f16_to_f32((uint16_t)load_bits(p, 2));
    case TORC_DTYPE_I32: return (int32_t)load_bits(p, 4);
    case TORC_DTYPE_I8: return *(const int8_t *)p;
    default: return *(const uint8_t *)p;  // u8, bool
    }
}

// Rounds once to out's dtype (round to nearest even, subnormals kept, as c10).
static void store(const torc_operand *y, const int64_t *idx, double v) {
    char *p = elem(y, idx);
    if (y->dtype == TORC_DTYPE_F32) {
        const float f = (float)v;
        memcpy(p, &f, 4);
    } else {
        const uint16_t h = y->dtype == TORC_DTYPE_BF16 ? torc_f32_to_bf16((float)v) : torc_f32_to_f16((float)v);
        memcpy(p, &h, 2);
    }
}

static bool special_at(const torc_operand *x, const int64_t *idx, special_set s) {
    fmt f;
    return fmt_of(x->dtype, &f) && is_special(load_bits(elem(x, idx), f.bytes), &f, s);
}

static bool next_index(int nd, const int64_t *shape, int64_t *idx) {
    for (int d = nd - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) return true;
        idx[d] = 0;
    }
    return false;
}

// torch.maximum / torch.minimum / relu: NaN wins.
static double nan_max(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double nan_min(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }

static double exact_value(torc_opcode code, double x0, double x1) {
    switch (code) {
    case TORC_OP_NEG: return -x0;
    case TORC_OP_ABS: return fabs(x0);
    case TORC_OP_RELU: return isnan(x0) ? x0 : x0 > 0 ? x0 : 0.0;
    case TORC_OP_EXP: return exp(x0);
    case TORC_OP_MAXIMUM: return nan_max(x0, x1);
    case TORC_OP_MINIMUM: return nan_min(x0, x1);
    default: return x0;  // COPY
    }
}

static void fix_elementwise(const torc_op *op, special_set s) {
    int64_t idx[TORC_MAX_DIMS] = {0};
    do {
        bool hit = false;
        for (int i = 0; i < op->n_in && !hit; i++) hit = special_at(&op->in[i], idx, s);
        if (!hit) continue;
        const double x0 = load(&op->in[0], idx), x1 = op->n_in > 1 ? load(&op->in[1], idx) : 0.0;
        store(&op->out[0], idx, exact_value(op->code, x0, x1));
    } while (next_index(op->out[0].ndim, op->out[0].shape, idx));
}

// Max / min over the reduced dims, recomputed for every group (exact, NaN wins).
static int fix_reduce(const torc_op *op) {
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    const int64_t n = onednn__numel(y);
    double *acc = malloc(sizeof(double) * (size_t)n);
    if (!acc) return onednn__error(TORC_ERR_OOM, "onednn: out of memory fixing up %s", onednn__op_name(op->code));
    const bool is_max = op->code == TORC_OP_MAX;
    for (int64_t k = 0; k < n; k++) acc[k] = is_max ? -INFINITY : INFINITY;
    int64_t idx[TORC_MAX_DIMS] = {0};
    do {
        int64_t k = 0;
        for (int d = 0; d < y->ndim; d++) k = k * y->shape[d] + (y->shape[d] == 1 ? 0 : idx[d]);
        const double v = load(x, idx);
        acc[k] = is_max ? nan_max(acc[k], v) : nan_min(acc[k], v);
    } while (next_index(x->ndim, x->shape, idx));
    int64_t oidx[TORC_MAX_DIMS] = {0}, k = 0;
    do store(y, oidx, acc[k++]);
    while (next_index(y->ndim, y->shape, oidx));
    free(acc);
    return 0;
}

// Softmax rows holding NaN or +inf are all NaN (x - max is NaN somewhere, so is the sum).
static void fix_rows(const torc_op *op, special_set s) {
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    if (x->ndim == 0) {  // a row of one element
        if (special_at(x, NULL, s)) store(y, NULL, NAN);
        return;
    }
    const int dim = op->params.dim.dim < 0 ? op->params.dim.dim + x->ndim : op->params.dim.dim;
    int64_t outer[TORC_MAX_DIMS], idx[TORC_MAX_DIMS] = {0};
    memcpy(outer, x->shape, sizeof outer);
    outer[dim] = 1;
    do {
        bool bad = false;
        for (idx[dim] = 0; idx[dim] < x->shape[dim] && !bad; idx[dim]++) bad = special_at(x, idx, s);
        if (bad)
            for (idx[dim] = 0; idx[dim] < y->shape[dim]; idx[dim]++) store(y, idx, NAN);
        idx[dim] = 0;
    } while (next_index(x->ndim, outer, idx));
}

int onednn__fixup(onednn_fixup kind, const torc_op *op) {
    if (!onednn__fixup_needed(kind, op)) return 0;
    const special_set s = specials_of(kind);
    switch (kind) {
    case ONEDNN_FIXUP_ELEMENTWISE: fix_elementwise(op, s); return 0;
    case ONEDNN_FIXUP_REDUCE: return fix_reduce(op);
    case ONEDNN_FIXUP_ROWS: fix_rows(op, s); return 0;
    default: return 0;
    }
}
