// backends/reference/index.c — the reference indexing kernels: INDEX_SELECT GATHER MASKED_SELECT,
// the in-place INDEX_ADD SCATTER_ADD MASKED_SCATTER, and TRIU/TRIL. Indices are checked first.
#include <stdlib.h>

#include "ref-impl.h"

// ---- dtype rules ----
bool ref_index_dtypes(const torc_op *op) {
    if (!ref_dt_in(op->out[0].dtype, REF_DT_ALL) || !ref_dt_in(op->in[0].dtype, REF_DT_ALL)) return false;
    switch (op->code) {
    case TORC_OP_INDEX_SELECT:
    case TORC_OP_GATHER:
    case TORC_OP_INDEX_ADD:
    case TORC_OP_SCATTER_ADD: return op->in[1].dtype == TORC_DTYPE_I64;
    case TORC_OP_MASKED_SELECT:
    case TORC_OP_MASKED_SCATTER: return op->in[1].dtype == TORC_DTYPE_BOOL;
    default: return true;  // TRIU, TRIL
    }
}

// ---- helpers ----
// A 0-dim operand acts as a 1-element vector (PyTorch lets index ops take scalars).
static torc_operand as_1d(const torc_operand *t) {
    torc_operand r = *t;
    if (r.ndim == 0) r.ndim = 1, r.shape[0] = 1, r.stride[0] = 1;
    return r;
}

static int check_dim(const torc_op *op, int ndim) {
    const int dim = op->params.dim.dim;
    if (dim < 0 || dim >= ndim)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s: dim %d out of range for %d dims",
                         ref_kernel_of(op->code)->name, dim, ndim);
    return TORC_OK;
}

static int64_t load_index(const torc_operand *idx, int64_t i) {  // element i of a 1-D index
    int64_t v;
    memcpy(&v, (const char *)idx->data + i * idx->stride[0] * 8, 8);
    return v;
}

// dst (+)= src element by element over `shape`; accumulate adds in double (floating out) or
// wrapping int64, rounding to dst's dtype after every add as PyTorch's sequential CPU kernels do.
typedef struct move_ctx { torc_dtype dst, src; bool accumulate; } move_ctx;

static void move_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const move_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++) {
        char *d = ptr[0] + i * step[0];
        const char *s = ptr[1] + i * step[1];
        if (!c->accumulate) ref_cast(d, c->dst, s, c->src);
        else if (ref_is_float(c->dst)) ref_store_f(d, c->dst, ref_load_f(d, c->dst) + ref_load_f(s, c->src));
        else ref_store_i(d, c->dst, ref_wrap_add(ref_load_i(d, c->dst), ref_load_i(s, c->src)));
    }
}

// Moves one slice (all dims but `dim`, which has size 1 in `shape`) from src to dst.
static void move_slice(int ndim, const int64_t *shape, char *dst, const torc_operand *d, const char *src,
                       const torc_operand *s, bool accumulate) {
    char *data[2] = {dst, (char *)src};
    const size_t size[2] = {torc_abi_dtype_size(d->dtype), torc_abi_dtype_size(s->dtype)};
    const int64_t *stride[2] = {d->stride, s->stride};
    ref_iter it;
    ref_iter_init(&it, ndim, shape, 2, data, size, stride);
    move_ctx c = {d->dtype, s->dtype, accumulate};
    ref_iter_run(&it, move_loop, &c);
}

// ---- INDEX_SELECT / INDEX_ADD: whole slices along dim ----
// INDEX_SELECT: out[.., j, ..] = in0[.., idx[j], ..]. INDEX_ADD: out[.., idx[j], ..] += in0[.., j, ..].
static int index_slices(const torc_op *op) {
    const bool add = op->code == TORC_OP_INDEX_ADD;
    const torc_operand idx = as_1d(&op->in[1]);
    // `big` is indexed by idx (in0 for select, out for add); `small` has len(idx) along dim.
    const torc_operand big = as_1d(add ? &op->out[0] : &op->in[0]), small = as_1d(add ? &op->in[0] : &op->out[0]);
    if (idx.ndim != 1)
        return ref_error(TORC_ERR_SHAPE, "%s(): Index is supposed to be a vector", add ? "index_add_" : "index_select");
    int st = check_dim(op, big.ndim);
    if (st) return st;
    const int dim = op->params.dim.dim;
    const int64_t len = idx.shape[0];
    bool shapes_ok = small.ndim == big.ndim && small.shape[dim] == len;
    for (int d = 0; shapes_ok && d < big.ndim; d++) shapes_ok = d == dim || small.shape[d] == big.shape[d];
    if (!shapes_ok)
        return ref_error(TORC_ERR_SHAPE, "reference backend: %s: %s must match %s except along dim %d, where it has "
                         "the index's %lld entries", ref_kernel_of(op->code)->name, add ? "in0 (source)" : "out",
                         add ? "out" : "in0", dim, (long long)len);
    for (int64_t j = 0; j < len; j++) {  // every index first: an error writes nothing
        const int64_t v = load_index(&idx, j);
        if (v < 0 || v >= big.shape[dim]) {
            if (add)
                return ref_error(TORC_ERR_INDEX, "index %lld is out of bounds for dimension %d with size %lld",
                                 (long long)v, dim, (long long)big.shape[dim]);
            return ref_error(TORC_ERR_INDEX, "index out of range in self");
        }
    }
    int64_t slice[TORC_MAX_DIMS];
    for (int d = 0; d < big.ndim; d++) slice[d] = d == dim ? 1 : big.shape[d];
    const int64_t bsz = (int64_t)torc_abi_dtype_size(big.dtype), ssz = (int64_t)torc_abi_dtype_size(small.dtype);
    for (int64_t j = 0; j < len; j++) {
        char *bp = (char *)big.data + load_index(&idx, j) * big.stride[dim] * bsz;
        char *sp = (char *)small.data + j * small.stride[dim] * ssz;
        if (add) move_slice(big.ndim, slice, bp, &big, sp, &small, true);
        else move_slice(big.ndim, slice, sp, &small, bp, &big, false);
    }
    return TORC_OK;
}

// ---- GATHER / SCATTER_ADD: element by element along dim ----
// GATHER: out[p] = in0[p with p[dim] = idx[p]]. SCATTER_ADD: out[p with p[dim] = idx[p]] += in0[p].
// `data` is the operand indexed through idx; the walk covers idx's shape.
// SCATTER_ADD rounds as PyTorch's CPU kernel: f32/f64/integers add in place one by one; f16,
// bf16 and fp8 accumulate in a wider buffer and round once (torch: bf16 256 + 1 + 1 = 258).
typedef struct elem_ctx {
    bool scatter, check_only;
    int dim;
    int64_t dim_size, data_step;  // size of data's dim, its stride in bytes
    torc_dtype data_dt, other_dt;
    int64_t bad;                  // first out-of-range index seen (check pass)
    bool failed;
    // narrow-float SCATTER_ADD: sums per storage element of out, and which ones were hit
    char *data_base;
    double *acc;
    uint8_t *touched;
} elem_ctx;

// Operands: 0 = data walked with stride 0 along dim, 1 = the index, 2 = the other tensor.
static void elem_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    elem_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        memcpy(&v, ptr[1] + i * step[1], 8);
        if (c->check_only) {
            if ((v < 0 || v >= c->dim_size) && !c->failed) c->failed = true, c->bad = v;
            continue;
        }
        char *d = ptr[0] + i * step[0] + v * c->data_step;
        char *o = ptr[2] + i * step[2];
        if (!c->scatter) {
            ref_cast(o, c->other_dt, d, c->data_dt);
        } else if (c->acc) {
            const int64_t off = (d - c->data_base) / (int64_t)torc_abi_dtype_size(c->data_dt);
            if (!c->touched[off]) c->touched[off] = 1, c->acc[off] = ref_load_f(d, c->data_dt);
            c->acc[off] += ref_load_f(o, c->other_dt);
        } else if (ref_is_float(c->data_dt)) ref_store_f(d, c->data_dt, ref_load_f(d, c->data_dt) + ref_load_f(o, c->other_dt));
        else ref_store_i(d, c->data_dt, ref_wrap_add(ref_load_i(d, c->data_dt), ref_load_i(o, c->other_dt)));
    }
}

static int index_elems(const torc_op *op) {
    const bool scatter = op->code == TORC_OP_SCATTER_ADD;
    const torc_operand idx = as_1d(&op->in[1]);
    const torc_operand data = as_1d(scatter ? &op->out[0] : &op->in[0]);
    const torc_operand other = as_1d(scatter ? &op->in[0] : &op->out[0]);
    const char *name = ref_kernel_of(op->code)->name;
    if (idx.ndim != data.ndim || other.ndim != data.ndim)
        return ref_error(TORC_ERR_SHAPE, "Index tensor must have the same number of dimensions as %s tensor",
                         scatter ? "self" : "input");
    int st = check_dim(op, data.ndim);
    if (st) return st;
    const int dim = op->params.dim.dim;
    for (int d = 0; d < data.ndim; d++) {
        // gather: out has idx's shape; scatter_add: idx fits in src everywhere. Both: idx fits in
        // the indexed tensor except along dim.
        const bool other_ok = scatter ? idx.shape[d] <= other.shape[d] : idx.shape[d] == other.shape[d];
        if (!other_ok || (d != dim && idx.shape[d] > data.shape[d]))
            return ref_error(TORC_ERR_SHAPE, "reference backend: %s: index size %lld does not fit dim %d "
                             "(indexed tensor %lld, %s %lld)", name, (long long)idx.shape[d], d,
                             (long long)data.shape[d], scatter ? "src" : "out", (long long)other.shape[d]);
    }
    int64_t dstride[TORC_MAX_DIMS];
    memcpy(dstride, data.stride, sizeof dstride);
    dstride[dim] = 0;  // the index supplies the position along dim
    char *ptrs[3] = {data.data, idx.data, other.data};
    const size_t sizes[3] = {torc_abi_dtype_size(data.dtype), 8, torc_abi_dtype_size(other.dtype)};
    const int64_t *strides[3] = {dstride, idx.stride, other.stride};
    ref_iter it;
    ref_iter_init(&it, idx.ndim, idx.shape, 3, ptrs, sizes, strides);
    elem_ctx c = {scatter, true, dim, data.shape[dim], data.stride[dim] * (int64_t)sizes[0], data.dtype, other.dtype,
                  0, false, NULL, NULL, NULL};
    ref_iter_run(&it, elem_loop, &c);  // check every index before writing anything
    if (c.failed)
        return ref_error(TORC_ERR_INDEX, "index %lld is out of bounds for dimension %d with size %lld",
                         (long long)c.bad, dim, (long long)data.shape[dim]);
    c.check_only = false;
    const bool narrow = scatter && ref_is_float(data.dtype) && data.dtype != TORC_DTYPE_F64 &&
                        data.dtype != TORC_DTYPE_F32;
    int64_t span = 1;  // storage elements out's view covers
    for (int d = 0; d < data.ndim; d++) span += (data.shape[d] - 1) * data.stride[d];
    if (narrow && ref_numel(&idx) > 0) {
        c.data_base = data.data;
        c.acc = malloc((size_t)span * sizeof(double));
        c.touched = calloc((size_t)span, 1);
        if (c.acc == NULL || c.touched == NULL) {
            free(c.acc);
            free(c.touched);
            return ref_error(TORC_ERR_OOM, "reference backend: scatter_add_: out of memory for a %lld-element "
                             "accumulator", (long long)span);
        }
    }
    ref_iter_run(&it, elem_loop, &c);
    if (c.acc) {
        const int64_t size = (int64_t)torc_abi_dtype_size(data.dtype);
        for (int64_t off = 0; off < span; off++)
            if (c.touched[off]) ref_store_f((char *)data.data + off * size, data.dtype, c.acc[off]);
        free(c.acc);
        free(c.touched);
    }
    return TORC_OK;
}

// ---- MASKED_SELECT / MASKED_SCATTER ----
typedef struct mask_ctx {
    bool scatter, count_only;
    int64_t count;          // true entries seen so far
    char *flat;             // MASKED_SELECT: out; MASKED_SCATTER: in0 (1-D, consumed in order)
    const torc_operand *flat_op;
    torc_dtype dense_dt;
} mask_ctx;

// Operands: 0 = the dense tensor (in0 for select, out for scatter), 1 = the mask.
static void mask_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    mask_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++) {
        if (!*(const uint8_t *)(ptr[1] + i * step[1])) continue;
        if (!c->count_only) {
            char *dense = ptr[0] + i * step[0];
            char *flat = c->flat + c->count * c->flat_op->stride[0] * (int64_t)torc_abi_dtype_size(c->flat_op->dtype);
            if (c->scatter) ref_cast(dense, c->dense_dt, flat, c->flat_op->dtype);
            else ref_cast(flat, c->flat_op->dtype, dense, c->dense_dt);
        }
        c->count++;
    }
}

static int masked(const torc_op *op) {
    const bool scatter = op->code == TORC_OP_MASKED_SCATTER;
    const torc_operand *dense = scatter ? &op->out[0] : &op->in[0], *mask = &op->in[1];
    const torc_operand flat = as_1d(scatter ? &op->in[0] : &op->out[0]);
    int st = ref_check_same_shape(mask, "in1 (mask)", dense, scatter ? "out" : "in0");
    if (st) return st;
    if (flat.ndim != 1)
        return ref_error(TORC_ERR_SHAPE, "reference backend: %s: %s must be 1-D", ref_kernel_of(op->code)->name,
                         scatter ? "in0 (source)" : "out");
    const torc_operand *ops[2] = {dense, mask};
    ref_iter it;
    ref_iter_ops(&it, dense->ndim, dense->shape, 2, ops);
    mask_ctx c = {scatter, true, 0, flat.data, &flat, dense->dtype};
    ref_iter_run(&it, mask_loop, &c);
    if (scatter && flat.shape[0] < c.count)
        return ref_error(TORC_ERR_SHAPE, "Number of elements of source < number of ones in mask");
    if (!scatter && flat.shape[0] != c.count)
        return ref_error(TORC_ERR_SHAPE, "reference backend: masked_select: out has %lld elements but the mask has "
                         "%lld true entries", (long long)flat.shape[0], (long long)c.count);
    c.count_only = false;
    c.count = 0;
    ref_iter_run(&it, mask_loop, &c);
    return TORC_OK;
}

// ---- TRIU / TRIL ----
typedef struct tri_ctx {
    bool upper;
    int64_t k, rows, cols;
    int64_t in_rs, in_cs, out_rs, out_cs;  // bytes
    torc_dtype in, out;
} tri_ctx;

// One matrix: keep element (i, j) where j - i >= k (triu) or j - i <= k (tril), else 0.
static void tri_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const tri_ctx *c = vctx;
    for (int64_t b = 0; b < n; b++)
        for (int64_t i = 0; i < c->rows; i++)
            for (int64_t j = 0; j < c->cols; j++) {
                char *o = ptr[0] + b * step[0] + i * c->out_rs + j * c->out_cs;
                const bool keep = c->upper ? j - i >= c->k : j - i <= c->k;
                if (keep) ref_cast(o, c->out, ptr[1] + b * step[1] + i * c->in_rs + j * c->in_cs, c->in);
                else ref_store_i(o, c->out, 0);
            }
}

static int tri(const torc_op *op) {
    const torc_operand *in = &op->in[0], *out = &op->out[0];
    int st = ref_check_same_shape(in, "in0", out, "out");
    if (st) return st;
    const int nd = in->ndim;
    if (nd < 2)
        return ref_error(TORC_ERR_SHAPE, "%s: input tensor must have at least 2 dimensions", ref_kernel_of(op->code)->name);
    const int64_t isz = (int64_t)torc_abi_dtype_size(in->dtype), osz = (int64_t)torc_abi_dtype_size(out->dtype);
    // Clamp k so j - i never overflows against it (|j - i| < 2^62).
    int64_t k = op->params.tri.k;
    if (k > INT64_C(1) << 62) k = INT64_C(1) << 62;
    if (k < -(INT64_C(1) << 62)) k = -(INT64_C(1) << 62);
    tri_ctx c = {op->code == TORC_OP_TRIU, k, in->shape[nd - 2], in->shape[nd - 1],
                 in->stride[nd - 2] * isz, in->stride[nd - 1] * isz, out->stride[nd - 2] * osz, out->stride[nd - 1] * osz,
                 in->dtype, out->dtype};
    if (ref_numel(out) == 0) return TORC_OK;
    int64_t batch[TORC_MAX_DIMS];
    for (int d = 0; d < nd; d++) batch[d] = d < nd - 2 ? in->shape[d] : 1;
    const torc_operand *ops[2] = {out, in};
    ref_iter it;
    ref_iter_ops(&it, nd, batch, 2, ops);
    ref_iter_run(&it, tri_loop, &c);
    return TORC_OK;
}

int ref_index_run(const torc_op *op) {
    switch (op->code) {
    case TORC_OP_INDEX_SELECT:
    case TORC_OP_INDEX_ADD: return index_slices(op);
    case TORC_OP_GATHER:
    case TORC_OP_SCATTER_ADD: return index_elems(op);
    case TORC_OP_MASKED_SELECT:
    case TORC_OP_MASKED_SCATTER: return masked(op);
    default: return tri(op);
    }
}
