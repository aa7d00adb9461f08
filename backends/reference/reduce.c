// backends/reference/reduce.c — the reference reductions over params.reduce.mask: SUM MEAN PROD
// MAX MIN ARGMAX ARGMIN VAR STD NORM LOGSUMEXP, in double (compensated sums) or wrapping int64;
// and MAX_DIM / MIN_DIM along params.dim.dim (values and indices).
#include "ref-impl.h"

// ---- dtype rules (PyTorch's CPU kernels) ----
bool ref_reduce_dtypes(const torc_op *op) {
    const torc_dtype in = op->in[0].dtype, out = op->out[0].dtype;
    switch (op->code) {
    case TORC_OP_SUM:
    case TORC_OP_PROD:
    case TORC_OP_MAX:
    case TORC_OP_MIN: return ref_dt_in(out, REF_DT_ALL);
    case TORC_OP_ARGMAX:
    case TORC_OP_ARGMIN: return out == TORC_DTYPE_I64 && ref_dt_in(in, REF_DT_NUM);  // no bool argmax
    default: return ref_dt_in(out, REF_DT_FLOAT);  // MEAN VAR STD NORM LOGSUMEXP
    }
}

// ---- one output element ----
// What the summing pass adds up, per element x.
typedef enum sum_map {
    MAP_X,          // x
    MAP_SQDEV,      // (x - shift)^2       (VAR/STD second pass)
    MAP_ABS,        // |x|                 (NORM 1)
    MAP_SQ,         // x^2                 (NORM 2)
    MAP_ABS_POW,    // |x|^p               (NORM p)
    MAP_NONZERO,    // x != 0              (NORM 0; NaN counts)
    MAP_EXP_SHIFT,  // exp(x - shift)      (LOGSUMEXP second pass)
} sum_map;

typedef struct red_ctx {
    torc_dtype in;
    // floating sum: Neumaier's compensated sum of map(x)
    sum_map map;
    double shift, p;
    double sum, comp;
    // integer sum / product, floating product
    int64_t isum, iprod;
    double prod;
    // extremes: is_max picks the larger; |x| first for NORM +-inf
    bool is_max, abs_first;
    bool any, has_nan;
    double best;
    int64_t ibest, best_idx;
    int64_t count;  // elements visited so far: the row-major index within the reduced dims
} red_ctx;

static inline double map_x(const red_ctx *c, double x) {
    switch (c->map) {
    case MAP_X: return x;
    case MAP_SQDEV: return (x - c->shift) * (x - c->shift);
    case MAP_ABS: return fabs(x);
    case MAP_SQ: return x * x;
    case MAP_ABS_POW: return pow(fabs(x), c->p);
    case MAP_NONZERO: return x != 0.0;
    case MAP_EXP_SHIFT: return exp(x - c->shift);
    }
    return NAN;
}

static void fsum_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    red_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++) {
        const double v = map_x(c, ref_load_f(ptr[0] + i * step[0], c->in));
        // Neumaier: keep the low-order bits each addition drops.
        const double t = c->sum + v;
        if (fabs(c->sum) >= fabs(v)) c->comp += (c->sum - t) + v;
        else c->comp += (v - t) + c->sum;
        c->sum = t;
    }
    c->count += n;
}

static void isum_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    red_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++) c->isum = ref_wrap_add(c->isum, ref_load_i(ptr[0] + i * step[0], c->in));
    c->count += n;
}

static void fprod_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    red_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++) c->prod *= ref_load_f(ptr[0] + i * step[0], c->in);
    c->count += n;
}

static void iprod_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    red_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++) c->iprod = ref_wrap_mul(c->iprod, ref_load_i(ptr[0] + i * step[0], c->in));
    c->count += n;
}

// The first NaN wins (and stays); otherwise the first strictly better value.
static void fext_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    red_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++, c->count++) {
        if (c->has_nan) break;
        double x = ref_load_f(ptr[0] + i * step[0], c->in);
        if (c->abs_first) x = fabs(x);
        if (isnan(x)) {
            c->has_nan = true, c->best = x, c->best_idx = c->count;
        } else if (!c->any || (c->is_max ? x > c->best : x < c->best)) {
            c->any = true, c->best = x, c->best_idx = c->count;
        }
    }
}

static void iext_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    red_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++, c->count++) {
        const int64_t x = ref_load_i(ptr[0] + i * step[0], c->in);
        if (!c->any || (c->is_max ? x > c->ibest : x < c->ibest)) c->any = true, c->ibest = x, c->best_idx = c->count;
    }
}

// Runs one pass of `fn` over the reduced elements starting at base.
static void pass(ref_iter *inner, char *base, ref_loop_fn fn, red_ctx *c) {
    inner->data[0] = base;
    c->count = 0;
    ref_iter_run(inner, fn, c);
}

static double fsum(ref_iter *inner, char *base, red_ctx *c, sum_map map) {
    c->map = map, c->sum = 0.0, c->comp = 0.0;
    pass(inner, base, fsum_loop, c);
    return isfinite(c->sum) ? c->sum + c->comp : c->sum;  // an inf/NaN sum leaves comp meaningless
}

static void extreme(ref_iter *inner, char *base, red_ctx *c, bool is_max, bool abs_first, bool integer) {
    c->is_max = is_max, c->abs_first = abs_first, c->any = false, c->has_nan = false, c->best_idx = 0;
    pass(inner, base, integer ? iext_loop : fext_loop, c);
}

typedef struct outer_ctx {
    const torc_op *op;
    ref_iter inner;   // over the reduced dims of in0
    int64_t n;        // elements per reduction
    bool int_mode;    // integer in and out: exact int64
} outer_ctx;

// Reduces the elements at `base` into the out element at `dst`.
static void reduce_one(outer_ctx *o, char *base, char *dst) {
    const torc_op *op = o->op;
    const torc_dtype odt = op->out[0].dtype;
    red_ctx c;
    memset(&c, 0, sizeof c);
    c.in = op->in[0].dtype;
    const double n = (double)o->n;
    switch (op->code) {
    case TORC_OP_SUM:
        if (o->int_mode) {
            pass(&o->inner, base, isum_loop, &c);
            ref_store_i(dst, odt, c.isum);
        } else {
            ref_store_f(dst, odt, fsum(&o->inner, base, &c, MAP_X));
        }
        return;
    case TORC_OP_MEAN: ref_store_f(dst, odt, fsum(&o->inner, base, &c, MAP_X) / n); return;  // empty: NaN
    case TORC_OP_PROD:
        if (o->int_mode) {
            c.iprod = 1;
            pass(&o->inner, base, iprod_loop, &c);
            ref_store_i(dst, odt, c.iprod);
        } else {
            c.prod = 1.0;
            pass(&o->inner, base, fprod_loop, &c);
            ref_store_f(dst, odt, c.prod);
        }
        return;
    case TORC_OP_MAX:
    case TORC_OP_MIN:
        extreme(&o->inner, base, &c, op->code == TORC_OP_MAX, false, o->int_mode);
        if (o->int_mode) ref_store_i(dst, odt, c.ibest);
        else ref_store_f(dst, odt, c.best);
        return;
    case TORC_OP_ARGMAX:
    case TORC_OP_ARGMIN:
        extreme(&o->inner, base, &c, op->code == TORC_OP_ARGMAX, false, !ref_is_float(c.in));
        ref_store_i(dst, odt, c.best_idx);
        return;
    case TORC_OP_VAR:
    case TORC_OP_STD: {
        // Two passes: the mean, then squared deviations from it (no cancellation).
        c.shift = fsum(&o->inner, base, &c, MAP_X) / n;
        const double ss = fsum(&o->inner, base, &c, MAP_SQDEV);
        const double dof = n - op->params.reduce.correction;
        const double var = ss / (dof > 0.0 ? dof : 0.0);  // PyTorch clamps: 0/0 NaN, x/0 inf
        ref_store_f(dst, odt, op->code == TORC_OP_STD ? sqrt(var) : var);
        return;
    }
    case TORC_OP_NORM: {
        const double p = op->params.reduce.p;
        double r;
        if (p == 0.0) r = fsum(&o->inner, base, &c, MAP_NONZERO);
        else if (p == 1.0) r = fsum(&o->inner, base, &c, MAP_ABS);
        else if (p == 2.0) r = sqrt(fsum(&o->inner, base, &c, MAP_SQ));
        else if (isinf(p)) {
            extreme(&o->inner, base, &c, p > 0, true, false);
            r = c.best;
        } else {
            c.p = p;
            r = pow(fsum(&o->inner, base, &c, MAP_ABS_POW), 1.0 / p);
        }
        ref_store_f(dst, odt, r);
        return;
    }
    case TORC_OP_LOGSUMEXP: {
        // Shift by the max so exp never overflows; an infinite max shifts by 0 (as PyTorch), so
        // all -inf gives -inf and any +inf gives +inf. NaN anywhere gives NaN.
        if (o->n == 0) {
            ref_store_f(dst, odt, -INFINITY);
            return;
        }
        extreme(&o->inner, base, &c, true, false, false);
        if (c.has_nan) {
            ref_store_f(dst, odt, NAN);
            return;
        }
        c.shift = isinf(c.best) ? 0.0 : c.best;
        ref_store_f(dst, odt, log(fsum(&o->inner, base, &c, MAP_EXP_SHIFT)) + c.shift);
        return;
    }
    default: return;
    }
}

static void outer_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    for (int64_t i = 0; i < n; i++) reduce_one(vctx, ptr[1] + i * step[1], ptr[0] + i * step[0]);
}

// ---- checks and driver ----
static int check_reduce(const torc_op *op, int64_t *count) {
    const torc_operand *in = &op->in[0], *out = &op->out[0];
    const uint32_t mask = op->params.reduce.mask;
    if (out->ndim != in->ndim)
        return ref_error(TORC_ERR_SHAPE, "reference backend: %s: out must keep in0's %d dims (reduced ones of size 1), "
                         "got %d", ref_kernel_of(op->code)->name, in->ndim, out->ndim);
    if ((mask >> in->ndim) != 0)  // ndim <= TORC_MAX_DIMS < 32
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s: reduce mask 0x%x names dims beyond ndim %d",
                         ref_kernel_of(op->code)->name, mask, in->ndim);
    *count = 1;
    for (int d = 0; d < in->ndim; d++) {
        const bool red = mask >> d & 1u;
        if (out->shape[d] != (red ? 1 : in->shape[d]))
            return ref_error(TORC_ERR_SHAPE, "reference backend: %s: out dim %d is %lld, expected %lld",
                             ref_kernel_of(op->code)->name, d, (long long)out->shape[d],
                             (long long)(red ? 1 : in->shape[d]));
        if (red) *count *= in->shape[d];
    }
    if (*count > 0 || ref_numel(out) == 0) return TORC_OK;
    // An empty reduction: only ops with an identity have a value.
    int empty_dim = 0;
    while (!(mask >> empty_dim & 1u) || in->shape[empty_dim] != 0) empty_dim++;
    switch (op->code) {
    case TORC_OP_MAX:
    case TORC_OP_MIN:
    case TORC_OP_ARGMAX:
    case TORC_OP_ARGMIN: {
        const char *name = op->code == TORC_OP_MAX ? "amax" : op->code == TORC_OP_MIN ? "amin" : ref_kernel_of(op->code)->name;
        return ref_error(TORC_ERR_INDEX, "%s(): Expected reduction dim %d to have non-zero size.", name, empty_dim);
    }
    case TORC_OP_NORM: {
        const double p = op->params.reduce.p;
        if (p < 0.0 || isinf(p))
            return ref_error(TORC_ERR_RUNTIME, "linalg.vector_norm cannot compute the %g norm on the dimension %d "
                             "because this dimension is empty and the operation does not have an identity", p, empty_dim);
        return TORC_OK;
    }
    default: return TORC_OK;
    }
}

// SUM or MEAN of a whole contiguous f32 or f64 tensor into one element (a loss, the tiny ops):
// the same compensated sum in the same order as fsum over the iterator, without it.
static bool flat_sum(const torc_op *op, int64_t count) {
    const torc_operand *in = &op->in[0];
    int64_t step;
    if ((op->code != TORC_OP_SUM && op->code != TORC_OP_MEAN) ||
        (in->dtype != TORC_DTYPE_F32 && in->dtype != TORC_DTYPE_F64) || !ref_is_float(op->out[0].dtype) ||
        ref_numel(&op->out[0]) != 1 || !ref_flat_step(in, &step) || step != 1)
        return false;
    red_ctx c;
    memset(&c, 0, sizeof c);
    c.in = in->dtype;
    c.map = MAP_X;
    const int64_t size = (int64_t)torc_abi_dtype_size(in->dtype);
    if (count > 0) fsum_loop((char *const[]){in->data}, &size, count, &c);
    const double sum = isfinite(c.sum) ? c.sum + c.comp : c.sum;
    ref_store_f(op->out[0].data, op->out[0].dtype, op->code == TORC_OP_MEAN ? sum / (double)count : sum);
    return true;
}

int ref_reduce_run(const torc_op *op) {
    int64_t count = 0;
    int st = check_reduce(op, &count);
    if (st) return st;
    const torc_operand *in = &op->in[0], *out = &op->out[0];
    if (ref_numel(out) == 0 || flat_sum(op, count)) return TORC_OK;
    const uint32_t mask = op->params.reduce.mask;
    outer_ctx o;
    memset(&o, 0, sizeof o);
    o.op = op;
    o.n = count;
    o.int_mode = !ref_is_float(in->dtype) && !ref_is_float(out->dtype);

    int64_t kept[TORC_MAX_DIMS], reduced[TORC_MAX_DIMS];
    for (int d = 0; d < in->ndim; d++) {
        const bool red = mask >> d & 1u;
        kept[d] = red ? 1 : in->shape[d];
        reduced[d] = red ? in->shape[d] : 1;
    }
    const size_t in_size = torc_abi_dtype_size(in->dtype);
    const int64_t *in_stride = in->stride;
    char *in_data = in->data;
    ref_iter_init(&o.inner, in->ndim, reduced, 1, &in_data, &in_size, &in_stride);
    const torc_operand *ops[2] = {out, in};
    ref_iter outer;
    ref_iter_ops(&outer, in->ndim, kept, 2, ops);
    ref_iter_run(&outer, outer_loop, &o);
    return TORC_OK;
}

// ---- max / min along one dim with indices (MAX_DIM, MIN_DIM) ----
// Every dtype: the frontend refuses fp8 where PyTorch does (it sends a zero-dim fp8 tensor,
// which PyTorch copies, as shape (1)).
bool ref_minmax_dim_dtypes(const torc_op *op) {
    const torc_dtype in = op->in[0].dtype;
    return ref_dt_in(in, REF_DT_ALL) && op->out[0].dtype == in && op->out[1].dtype == TORC_DTYPE_I64;
}

// One output element: extreme() finds the first index of the extreme (the first NaN wins), as
// ARGMAX does; the value is in0's element there, copied bit for bit (-0.0 stays -0.0, a NaN keeps
// its payload), as PyTorch copies it.
static void minmax_dim_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    outer_ctx *o = vctx;
    const torc_dtype dt = o->op->in[0].dtype;
    const size_t size = torc_abi_dtype_size(dt);
    const int64_t row_step = o->op->in[0].stride[o->op->params.dim.dim] * (int64_t)size;
    for (int64_t i = 0; i < n; i++) {
        char *base = ptr[2] + i * step[2];
        red_ctx c;
        memset(&c, 0, sizeof c);
        c.in = dt;
        extreme(&o->inner, base, &c, o->op->code == TORC_OP_MAX_DIM, false, !ref_is_float(dt));
        memcpy(ptr[0] + i * step[0], base + c.best_idx * row_step, size);
        ref_store_i(ptr[1] + i * step[1], TORC_DTYPE_I64, c.best_idx);
    }
}

int ref_minmax_dim_run(const torc_op *op) {
    const torc_operand *in = &op->in[0];
    const char *name = ref_kernel_of(op->code)->name;
    const int dim = op->params.dim.dim;
    if (in->ndim < 1 || dim < 0 || dim >= in->ndim)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s: dim %d is out of range for in0's %d dims "
                         "(a zero-dim in0 comes as shape (1))", name, dim, in->ndim);
    for (int k = 0; k < 2; k++) {
        const torc_operand *out = &op->out[k];
        if (out->ndim != in->ndim)
            return ref_error(TORC_ERR_SHAPE, "reference backend: %s: out%d must keep in0's %d dims, got %d", name, k,
                             in->ndim, out->ndim);
        for (int d = 0; d < in->ndim; d++)
            if (out->shape[d] != (d == dim ? 1 : in->shape[d]))
                return ref_error(TORC_ERR_SHAPE, "reference backend: %s: out%d dim %d is %lld, expected %lld", name, k,
                                 d, (long long)out->shape[d], (long long)(d == dim ? 1 : in->shape[d]));
    }
    if (ref_numel(&op->out[0]) == 0) return TORC_OK;
    if (in->shape[dim] == 0)
        return ref_error(TORC_ERR_INDEX, "%s(): Expected reduction dim %d to have non-zero size.", name, dim);
    outer_ctx o;
    memset(&o, 0, sizeof o);
    o.op = op;
    o.n = in->shape[dim];
    const size_t in_size = torc_abi_dtype_size(in->dtype);
    const int64_t *row_stride = &in->stride[dim];
    char *in_data = in->data;
    ref_iter_init(&o.inner, 1, &in->shape[dim], 1, &in_data, &in_size, &row_stride);
    const torc_operand *ops[3] = {&op->out[0], &op->out[1], in};
    ref_iter outer;
    ref_iter_ops(&outer, in->ndim, op->out[0].shape, 3, ops);
    ref_iter_run(&outer, minmax_dim_loop, &o);
    return TORC_OK;
}
