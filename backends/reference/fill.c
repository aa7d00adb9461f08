// backends/reference/fill.c — the reference kernels that write without reading math inputs:
// FILL (a scalar), COPY (strided cast), ARANGE and LINSPACE (1-D ranges).
#include "ref-impl.h"

// ---- FILL ----
bool ref_fill_dtypes(const torc_op *op) { return ref_dt_in(op->out[0].dtype, REF_DT_ALL); }

typedef struct fill_ctx { unsigned char value[8]; size_t size; } fill_ctx;  // one element of out's dtype

static void fill_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const fill_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++) memcpy(ptr[0] + i * step[0], c->value, c->size);
}

int ref_fill_run(const torc_op *op) {
    // The scalar is converted once; the loop only copies its bytes.
    fill_ctx c = {{0}, torc_abi_dtype_size(op->out[0].dtype)};
    ref_store_f(c.value, op->out[0].dtype, op->params.scalar.value);
    int64_t step;
    if (ref_flat_step(&op->out[0], &step) && step == 1) {  // contiguous: one flat loop
        fill_loop((char *const[]){op->out[0].data}, (const int64_t[]){(int64_t)c.size}, ref_numel(&op->out[0]), &c);
        return TORC_OK;
    }
    const torc_operand *ops[1] = {&op->out[0]};
    ref_iter it;
    ref_iter_ops(&it, op->out[0].ndim, op->out[0].shape, 1, ops);
    ref_iter_run(&it, fill_loop, &c);
    return TORC_OK;
}

// ---- COPY ----
bool ref_copy_dtypes(const torc_op *op) {
    return ref_dt_in(op->out[0].dtype, REF_DT_ALL) && ref_dt_in(op->in[0].dtype, REF_DT_ALL);
}

typedef struct copy_ctx { torc_dtype src, dst; size_t size; } copy_ctx;

static void copy_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const copy_ctx *c = vctx;
    if (c->src == c->dst) {
        if (step[0] == (int64_t)c->size && step[1] == (int64_t)c->size) {
            memcpy(ptr[0], ptr[1], (size_t)n * c->size);  // the contiguous fast path
            return;
        }
        for (int64_t i = 0; i < n; i++) memcpy(ptr[0] + i * step[0], ptr[1] + i * step[1], c->size);
        return;
    }
    for (int64_t i = 0; i < n; i++) ref_cast(ptr[0] + i * step[0], c->dst, ptr[1] + i * step[1], c->src);
}

int ref_copy_run(const torc_op *op) {
    int st = ref_check_same_shape(&op->in[0], "in0", &op->out[0], "out");
    if (st) return st;
    copy_ctx c = {op->in[0].dtype, op->out[0].dtype, torc_abi_dtype_size(op->out[0].dtype)};
    int64_t so, si;
    if (ref_flat_step(&op->out[0], &so) && so == 1 && ref_flat_step(&op->in[0], &si)) {  // one flat loop
        const int64_t steps[2] = {(int64_t)c.size, si * (int64_t)torc_abi_dtype_size(c.src)}, n = ref_numel(&op->out[0]);
        if (n > 0) copy_loop((char *const[]){op->out[0].data, op->in[0].data}, steps, n, &c);
        return TORC_OK;
    }
    const torc_operand *ops[2] = {&op->out[0], &op->in[0]};
    ref_iter it;
    ref_iter_ops(&it, op->out[0].ndim, op->out[0].shape, 2, ops);
    ref_iter_run(&it, copy_loop, &c);
    return TORC_OK;
}

// ---- ARANGE / LINSPACE ----
// Both take a 1-D out and write element i from a formula; PyTorch computes floating ranges in
// double and integer arange in int64 (start and step truncated first).
bool ref_arange_dtypes(const torc_op *op) { return ref_dt_in(op->out[0].dtype, REF_DT_NUM); }
bool ref_linspace_dtypes(const torc_op *op) { return ref_dt_in(op->out[0].dtype, REF_DT_NUM); }

static int check_1d(const torc_op *op, const char *name) {
    if (op->out[0].ndim != 1)
        return ref_error(TORC_ERR_SHAPE, "reference backend: %s: out must be 1-D, got %d dims", name, op->out[0].ndim);
    return TORC_OK;
}

int ref_arange_run(const torc_op *op) {
    int st = check_1d(op, "arange");
    if (st) return st;
    const torc_operand *o = &op->out[0];
    const size_t size = torc_abi_dtype_size(o->dtype);
    const double start = op->params.range.start, step = op->params.range.step;
    if (!isfinite(start) || !isfinite(step))
        return ref_error(TORC_ERR_INVALID_ARG, "unsupported range: %g -> %g", start, op->params.range.end);
    char *base = o->data;
    if (ref_is_float(o->dtype)) {
        for (int64_t i = 0; i < o->shape[0]; i++)
            ref_store_f(base + i * o->stride[0] * (int64_t)size, o->dtype, start + (double)i * step);
    } else {
        const int64_t s0 = ref_f2i64(start), ds = ref_f2i64(step);
        for (int64_t i = 0; i < o->shape[0]; i++)
            ref_store_i(base + i * o->stride[0] * (int64_t)size, o->dtype, ref_wrap_add(s0, ref_wrap_mul(i, ds)));
    }
    return TORC_OK;
}

int ref_linspace_run(const torc_op *op) {
    int st = check_1d(op, "linspace");
    if (st) return st;
    const torc_operand *o = &op->out[0];
    const int64_t n = o->shape[0];
    if (op->params.range.count != n)
        return ref_error(TORC_ERR_SHAPE, "reference backend: linspace: range.count is %lld but out has %lld elements",
                         (long long)op->params.range.count, (long long)n);
    const size_t size = torc_abi_dtype_size(o->dtype);
    const double start = op->params.range.start, end = op->params.range.end;
    const double step = n > 1 ? (end - start) / (double)(n - 1) : 0.0;
    char *base = o->data;
    for (int64_t i = 0; i < n; i++) {
        // Two-sided, as PyTorch: the second half counts back from end, so end is exact.
        const double v = i < n / 2 ? start + step * (double)i : end - step * (double)(n - 1 - i);
        ref_store_f(base + i * o->stride[0] * (int64_t)size, o->dtype, n == 1 ? start : v);
    }
    return TORC_OK;
}
