// backends/cpu_onednn/nan.c — PyTorch's NaN propagation where oneDNN drops it: oneDNN's
// max/min (binary, reduction, relu) keep the non-NaN operand and its exp saturates NaN to inf.
// After such a primitive runs, one parallel pass checks the inputs for NaN (and +inf for
// softmax); only when one is found does a serial pass patch the affected outputs.
#include <string.h>

#include "onednn-impl.h"

// Bit patterns of the floating formats oneDNN computes in.
typedef struct fmt {
    int bytes;
    uint32_t inf;   // +inf; |x| above it (sign cleared) is NaN
    uint32_t qnan;  // the NaN we write
} fmt;

static bool fmt_of(torc_dtype d, fmt *f) {
    switch (d) {
    case TORC_DTYPE_F32: *f = (fmt){4, UINT32_C(0x7f800000), UINT32_C(0x7fc00000)}; return true;
    case TORC_DTYPE_BF16: *f = (fmt){2, 0x7f80, 0x7fc0}; return true;
    case TORC_DTYPE_F16: *f = (fmt){2, 0x7c00, 0x7e00}; return true;
    default: return false;
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

static inline bool special(uint32_t u, const fmt *f, bool posinf) {
    const uint32_t abs = u & (f->bytes == 4 ? UINT32_C(0x7fffffff) : UINT32_C(0x7fff));
    return abs > f->inf || (posinf && u == f->inf);
}

// ---- the check: does x hold a NaN (or +inf)? ----
static bool scan_run(const char *p, int64_t n, int64_t stride, const fmt *f, bool posinf) {
    int acc = 0;
    if (f->bytes == 4 && stride == 1) {
        const uint32_t inf = f->inf;
#pragma omp simd reduction(| : acc)
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            acc |= ((u & UINT32_C(0x7fffffff)) > inf) | (posinf & (u == inf));
        }
    } else if (f->bytes == 2 && stride == 1) {
        const uint32_t inf = f->inf;
#pragma omp simd reduction(| : acc)
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            acc |= ((h & 0x7fffu) > inf) | (posinf & (h == inf));
        }
    } else {
        for (int64_t i = 0; i < n; i++) acc |= special(load_bits(p + i * stride * f->bytes, f->bytes), f, posinf);
    }
    return acc != 0;
}

#define SCAN_CHUNK 16384

static bool has_special(const torc_operand *x, bool posinf) {
    fmt f;
    if (!fmt_of(x->dtype, &f)) return false;  // integers hold no NaN
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
    bool found = false;
#pragma omp parallel for reduction(|| : found) schedule(static)
    for (int64_t b = 0; b < rows * chunks; b++) {
        int64_t r = b / chunks, c = b % chunks, off = 0;
        for (int d = n - 2; d >= 0; d--) {
            off += (r % shape[d]) * stride[d];
            r /= shape[d];
        }
        const int64_t start = c * SCAN_CHUNK;
        const int64_t cnt = len - start < SCAN_CHUNK ? len - start : SCAN_CHUNK;
        found = found || scan_run(base + (off + start * step) * f.bytes, cnt, step, &f, posinf);
    }
    return found;
}

// ---- the patches (rare: only when a NaN was found) ----
static const char *elem(const torc_operand *x, const int64_t *idx, int bytes) {
    int64_t off = 0;
    for (int d = 0; d < x->ndim; d++) off += idx[d] * x->stride[d];
    return (const char *)x->data + off * bytes;
}

static void store_nan(const torc_operand *y, const int64_t *idx, const fmt *f) {
    char *p = (char *)elem(y, idx, f->bytes);
    if (f->bytes == 4) memcpy(p, &f->qnan, 4);
    else {
        uint16_t h = (uint16_t)f->qnan;
        memcpy(p, &h, 2);
    }
}

static bool next_index(int nd, const int64_t *shape, int64_t *idx) {
    for (int d = nd - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) return true;
        idx[d] = 0;
    }
    return false;
}

static bool nan_at(const torc_operand *x, const int64_t *idx) {
    fmt f;
    return fmt_of(x->dtype, &f) && special(load_bits(elem(x, idx, f.bytes), f.bytes), &f, false);
}

static void patch_elementwise(const torc_op *op, const fmt *fo) {
    int64_t idx[TORC_MAX_DIMS] = {0};
    do {
        for (int i = 0; i < op->n_in; i++)
            if (nan_at(&op->in[i], idx)) {
                store_nan(&op->out, idx, fo);
                break;
            }
    } while (next_index(op->out.ndim, op->out.shape, idx));
}

static void patch_reduce(const torc_op *op, const fmt *fo) {
    const torc_operand *x = &op->in[0], *y = &op->out;
    int64_t idx[TORC_MAX_DIMS] = {0}, oidx[TORC_MAX_DIMS] = {0};
    do {
        if (!nan_at(x, idx)) continue;
        for (int d = 0; d < y->ndim; d++) oidx[d] = y->shape[d] == 1 ? 0 : idx[d];
        store_nan(y, oidx, fo);
    } while (next_index(x->ndim, x->shape, idx));
}

static void patch_rows(const torc_op *op, const fmt *fo) {
    const torc_operand *x = &op->in[0], *y = &op->out;
    fmt fi;
    if (!fmt_of(x->dtype, &fi)) return;
    if (x->ndim == 0) {  // a row of one element
        if (special(load_bits(x->data, fi.bytes), &fi, true)) store_nan(y, NULL, fo);
        return;
    }
    const int dim = op->params.dim.dim < 0 ? op->params.dim.dim + x->ndim : op->params.dim.dim;
    int64_t outer[TORC_MAX_DIMS], idx[TORC_MAX_DIMS] = {0};
    memcpy(outer, x->shape, sizeof outer);
    outer[dim] = 1;
    do {
        bool bad = false;
        for (idx[dim] = 0; idx[dim] < x->shape[dim] && !bad; idx[dim]++)
            bad = special(load_bits(elem(x, idx, fi.bytes), fi.bytes), &fi, true);
        if (bad)
            for (idx[dim] = 0; idx[dim] < y->shape[dim]; idx[dim]++) store_nan(y, idx, fo);
        idx[dim] = 0;
    } while (next_index(x->ndim, outer, idx));
}

void onednn__nanfix(onednn_nanfix kind, const torc_op *op) {
    fmt fo;
    if (!fmt_of(op->out.dtype, &fo) || onednn__numel(&op->out) == 0) return;
    bool any = false;
    for (int i = 0; i < op->n_in && !any; i++)
        any = has_special(&op->in[i], kind == ONEDNN_NANFIX_ROWS);
    if (!any) return;
    switch (kind) {
    case ONEDNN_NANFIX_ELEMENTWISE: patch_elementwise(op, &fo); break;
    case ONEDNN_NANFIX_REDUCE: patch_reduce(op, &fo); break;
    case ONEDNN_NANFIX_ROWS: patch_rows(op, &fo); break;
    default: break;
    }
}
