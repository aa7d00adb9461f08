// core/ddp.c — distributed data parallel: parameters broadcast at start, gradient buckets
// all-reduced while backward runs (a leaf-gradient hook in autograd.c), averaging, unused
// parameters, and the deterministic mode whose results do not depend on the process count.
//
// Memory (P: the parameters' bytes, as f32). Plain mode holds .grad and the buckets' flat
// buffers: 2 P. Deterministic mode holds, on a rank running m = micro_batches / W micro-batches,
// the partial sums of its micro-batches (at most log2(m) of them, folded in place) beside the
// gradient backward is making, then the buckets' flat buffers, and for the top of the tree a
// gather buffer per bucket of W * ceil(numel / W) elements (the bucket goes in W chunks):
// at most (3 + log2(m)) P plus W - 1 elements a bucket, whatever the world size.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm-impl.h"
#include "torc-impl.h"

typedef struct bucket {
    int first, count;      // d->order[first .. first+count): parameter indices, reverse order
    int64_t numel;
    int pending;           // parameters of this bucket still without their gradient this step
    torc_tensor *flat;     // (numel) f32: the gradients, flat; deterministic: this rank's sums
    // Deterministic: the top of the tree a chunk at a time. Chunk c is elements [c * chunk, ...)
    // of every rank's flat, all-gathered into gathered (W * chunk) f32 and folded in rank order.
    torc_tensor *gathered;
    int64_t chunk;
    int n_chunks, next_chunk;
    torc_work *work;
    double started, finished;
} bucket;

// Deterministic mode: per parameter, a stack of partial sums of micro-batch gradients (a
// binary counter: two sums of the same level are added, left += right, into one of the next).
#define MAX_LEVELS 32
typedef struct partial {
    torc_tensor *t[MAX_LEVELS];
    int level[MAX_LEVELS];
    int n;
} partial;

struct torc_ddp {
    int n;
    torc_tensor **params;   // borrowed
    int *order;             // parameter indices in bucket order (reverse of params)
    int *bucket_of;         // by parameter index
    int64_t *offset;        // by parameter index: its first element in its bucket's flat
    bool *ready, *used;
    bucket *b;
    int nb, next_launch;
    torc_ddp_options o;
    int world, rank;
    int micro_first, micro_count, micro;  // deterministic mode
    partial *parts;
    torc_tensor **keep;      // deterministic: the folded sum, kept to become .grad in finish
    bool armed;              // hooks installed for this backward
    double backward_end;
    torc_status hook_status;
    torc_ddp_stats stats;
};

// ---- flat views ----
// The slice of bucket flat that holds parameter i, in the parameter's shape (unregistered).
static torc_tensor *slice_of(const torc_ddp *d, torc_tensor *flat, int i) {
    const torc_tensor *p = d->params[i];
    int64_t stride[TORC_MAX_DIMS];
    torc__contiguous_strides(p->ndim, p->shape, stride);
    return torc__make_view(flat, p->ndim, p->shape, stride, flat->offset + d->offset[i]);
}

static torc_status copy_slice(torc_ddp *d, torc_tensor *flat, int i, const torc_tensor *src, bool to_flat) {
    torc_tensor *v = slice_of(d, flat, i);
    if (!v) return torc_last_status();
    torc_status st = to_flat ? (src ? torc__copy(v, src) : torc__fill(v, 0.0)) : torc__copy((torc_tensor *)src, v);
    torc_release(v);
    return st;
}

// ---- deterministic sums ----
// Pushes g (owned) as a sum of the given level and folds equal levels: left += right, oldest
// first (in place: the same bits as left + right, and no new buffer).
static torc_status push_partial(partial *p, torc_tensor *g, int level) {
    if (p->n == MAX_LEVELS) {
        torc_release(g);
        return torc__error(TORC_ERR_RUNTIME, "ddp: too many micro-batches");
    }
    p->t[p->n] = g;
    p->level[p->n++] = level;
    torc_status st = TORC_OK;
    torc_no_grad_begin();
    while (!st && p->n >= 2 && p->level[p->n - 1] == p->level[p->n - 2]) {
        torc_scope_push();
        st = torc_add_(p->t[p->n - 2], p->t[p->n - 1]);
        torc_scope_pop();
        if (st) break;
        torc_release(p->t[p->n - 1]);
        p->n--;
        p->level[p->n - 1]++;
    }
    torc_no_grad_end();
    return st;
}

static void clear_partial(partial *p) {
    for (int k = 0; k < p->n; k++) torc_release(p->t[k]);
    p->n = 0;
}

// Takes parameter i's .grad (or zeros when it got none) into its partial sums.
static torc_status take_grad(torc_ddp *d, int i) {
    torc_tensor *p = d->params[i], *g = p->grad;
    p->grad = NULL;
    if (!g) {
        torc_scope_push();
        g = torc_retain(torc_zeros_like(p));
        torc_scope_pop();
        if (!g) return torc_last_status();
    }
    return push_partial(&d->parts[i], g, 0);
}

// ---- launching ----
// Elements [off, off + len) of bucket flat b as a registered 1-D view.
static torc_tensor *flat_range(torc_tensor *flat, int64_t off, int64_t len) {
    return torc__register(torc__make_view(flat, 1, &len, (int64_t[]){1}, flat->offset + off));
}

// Deterministic mode: all-gathers the bucket's next chunk of every rank's sums.
static torc_status launch_chunk(torc_ddp *d, bucket *b) {
    const int64_t off = (int64_t)b->next_chunk * b->chunk, len = b->numel - off < b->chunk ? b->numel - off : b->chunk;
    b->next_chunk++;
    torc_scope_push();
    torc_tensor *in = flat_range(b->flat, off, len), *out = flat_range(b->gathered, 0, len * d->world);
    torc_status st = in && out ? torc_dist_all_gather(out, in, &b->work) : torc_last_status();
    torc_scope_pop();
    return st;
}

// Deterministic mode, chunk c gathered: the ranks' sums (in rank order) folded pairwise in
// place, divided by the micro-batch count, into the chunk of flat (this rank's part, sent).
static torc_status fold_chunk(torc_ddp *d, bucket *b, int c) {
    const int64_t off = (int64_t)c * b->chunk, len = b->numel - off < b->chunk ? b->numel - off : b->chunk;
    partial top = {.n = 0};
    torc_status st = TORC_OK;
    for (int r = 0; !st && r < d->world; r++) {
        torc_tensor *part = torc__make_view(b->gathered, 1, &len, (int64_t[]){1}, b->gathered->offset + (int64_t)r * len);
        st = part ? push_partial(&top, part, 0) : torc_last_status();
    }
    if (!st && top.n != 1) st = torc__error(TORC_ERR_RUNTIME, "ddp: the ranks' sums did not fold to one (world size %d)", d->world);
    torc_scope_push();
    torc_no_grad_begin();
    if (!st) st = torc_div_scalar_(top.t[0], torc_scalar_f((double)d->o.micro_batches));
    torc_tensor *dst = st ? NULL : flat_range(b->flat, off, len);
    if (!st) st = dst ? torc__copy(dst, top.t[0]) : torc_last_status();
    torc_no_grad_end();
    torc_scope_pop();
    clear_partial(&top);
    return st;
}

static torc_status launch_ready(torc_ddp *d) {
    torc_status st = TORC_OK;
    while (!st && d->next_launch < d->nb && d->b[d->next_launch].pending == 0) {
        bucket *b = &d->b[d->next_launch++];
        b->next_chunk = 0;
        if (d->o.deterministic) st = launch_chunk(d, b);
        else st = torc_dist_all_reduce(b->flat, TORC_REDUCE_AVG, &b->work);
    }
    return st;
}

// Deterministic mode: parameter i's micro-batch sums, folded to one, into its bucket's flat; the
// sum is kept to become .grad in finish (no new buffer then).
static torc_status fold_param(torc_ddp *d, int i) {
    torc_status st = take_grad(d, i);
    if (st) return st;
    partial *p = &d->parts[i];
    if (p->n != 1) return torc__error(TORC_ERR_RUNTIME, "ddp: micro-batch sums of parameter %d did not fold to one", i);
    st = copy_slice(d, d->b[d->bucket_of[i]].flat, i, p->t[0], true);
    torc_release(d->keep[i]);
    d->keep[i] = p->t[0];
    p->n = 0;
    return st;
}

// Parameter i's gradient is complete (for this step): into its bucket, maybe launch.
static torc_status param_ready(torc_ddp *d, int i) {
    if (d->ready[i])
        return torc__error(TORC_ERR_AUTOGRAD,
                           "ddp: parameter %d received a gradient after its bucket was reduced (a parameter used "
                           "twice in one backward, or a second backward without torc_ddp_begin)", i);
    d->ready[i] = true;
    d->used[i] = d->params[i]->grad != NULL || d->used[i];
    bucket *b = &d->b[d->bucket_of[i]];
    torc_status st = d->o.deterministic ? fold_param(d, i) : copy_slice(d, b->flat, i, d->params[i]->grad, true);
    if (st) return st;
    b->pending--;
    return launch_ready(d);
}

static torc_status hook(torc_tensor *t, void *ctx) {
    torc_ddp *d = ctx;
    for (int i = 0; i < d->n; i++)
        if (d->params[i] == t) {
            torc_status st = param_ready(d, i);
            if (st) d->hook_status = st;
            return st;
        }
    return TORC_OK;
}

// ---- public ----
// Every rank must build the same buckets, or their collectives would differ in size: the model
// (each parameter's shape and dtype) and the options are compared across ranks first, and a
// difference is refused on every rank naming the first setting that differs.
static torc_status check_ranks_agree(const torc_ddp *d) {
    const int m = d->n + 6;
    char (*name)[48] = calloc((size_t)m, sizeof *name), (*value)[96] = calloc((size_t)m, sizeof *value);
    const char **names = calloc((size_t)m, sizeof *names), **values = calloc((size_t)m, sizeof *values);
    torc_status st = TORC_OK;
    if (!name || !value || !names || !values) st = torc__error(TORC_ERR_OOM, "out of host memory");
    for (int k = 0; !st && k < m; k++) {
        names[k] = name[k];
        values[k] = value[k];
        const torc_ddp_options *o = &d->o;
        if (k == 0) {
            snprintf(name[k], sizeof name[k], "the number of parameters");
            snprintf(value[k], sizeof value[k], "%d", d->n);
        } else if (k <= d->n) {
            const torc_tensor *p = d->params[k - 1];
            char shape[TORC_SHAPE_STR_MAX];
            snprintf(name[k], sizeof name[k], "parameter %d", k - 1);
            snprintf(value[k], sizeof value[k], "%s %s", torc__shape_str(p->ndim, p->shape, shape, sizeof shape),
                     torc_dtype_name(p->dtype));
        } else {
            static const char *const opt[] = {"bucket_cap_bytes", "first_bucket_bytes", "find_unused_parameters",
                                               "deterministic", "micro_batches"};
            const int j = k - d->n - 1;
            const long long v[] = {(long long)o->bucket_cap_bytes, (long long)o->first_bucket_bytes, o->find_unused_parameters,
                                   o->deterministic, o->deterministic ? o->micro_batches : 0};
            if (j < 5) {
                snprintf(name[k], sizeof name[k], "%s", opt[j]);
                snprintf(value[k], sizeof value[k], "%lld", v[j]);
            } else {
                snprintf(name[k], sizeof name[k], "the device type");
                snprintf(value[k], sizeof value[k], "%s", torc_device_backend_name(d->params[0]->device));
            }
        }
    }
    if (!st) st = torc__dist_check_same(d->params[0]->device, "torc_ddp_new", m, names, values);
    free(name);
    free(value);
    free(names);
    free(values);
    return st;
}

torc_ddp *torc_ddp_new(int n, torc_tensor *const *params, const torc_ddp_options *opts) {
    if (!torc_dist_is_initialized())
        return TORC_FAIL_NULL(TORC_ERR_RUNTIME, "torc_ddp_new: the distributed job is not initialized (call torc_dist_init first)");
    if (n <= 0 || !params) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "torc_ddp_new: expected n > 0 parameters");
    for (int i = 0; i < n; i++)
        if (!params[i] || !torc_is_leaf(params[i]) || !torc_requires_grad(params[i]))
            return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "torc_ddp_new: parameter %d is not a leaf that requires grad", i);
    torc_ddp_options o = TORC_DDP_OPTIONS_DEFAULT;
    if (opts) o = *opts;
    const int W = torc_dist_world_size();
    if (o.bucket_cap_bytes < 1 || o.first_bucket_bytes < 1)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "torc_ddp_new: bucket caps must be positive");
    if (o.deterministic &&
        (o.micro_batches < 1 || (o.micro_batches & (o.micro_batches - 1)) || o.micro_batches % W || o.micro_batches > (1 << 20)))
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG,
                              "torc_ddp_new: deterministic mode needs micro_batches a power of two divisible by the "
                              "world size %d, got %d", W, o.micro_batches);
    torc_ddp *d = calloc(1, sizeof *d);
    if (!d) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory");
    d->n = n;
    d->o = o;
    d->world = W;
    d->rank = torc_dist_rank();
    d->params = malloc((size_t)n * sizeof *d->params);
    d->order = malloc((size_t)n * sizeof *d->order);
    d->bucket_of = malloc((size_t)n * sizeof *d->bucket_of);
    d->offset = malloc((size_t)n * sizeof *d->offset);
    d->ready = calloc((size_t)n, sizeof *d->ready);
    d->used = calloc((size_t)n, sizeof *d->used);
    d->b = calloc((size_t)n, sizeof *d->b);
    d->parts = calloc((size_t)n, sizeof *d->parts);
    d->keep = calloc((size_t)n, sizeof *d->keep);
    if (!d->params || !d->order || !d->bucket_of || !d->offset || !d->ready || !d->used || !d->b || !d->parts || !d->keep) {
        torc_ddp_free(d);
        return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory");
    }
    memcpy(d->params, params, (size_t)n * sizeof *params);
    if (o.deterministic) {
        d->micro_count = o.micro_batches / W;
        d->micro_first = d->rank * d->micro_count;
    }
    torc_status st = check_ranks_agree(d);
    // Buckets in reverse parameter order; the first small so communication starts early.
    for (int k = 0; !st && k < n; k++) {
        const int i = n - 1 - k;
        d->order[k] = i;
        const int64_t pn = torc_numel(params[i]), cap = (d->nb <= 1 ? o.first_bucket_bytes : o.bucket_cap_bytes) / 4;
        bucket *cur = d->nb ? &d->b[d->nb - 1] : NULL;
        if (!cur || (cur->numel > 0 && cur->numel + pn > (d->nb == 1 ? o.first_bucket_bytes / 4 : cap))) {
            cur = &d->b[d->nb++];
            cur->first = k;
        }
        d->bucket_of[i] = (int)(cur - d->b);
        d->offset[i] = cur->numel;
        cur->numel += pn;
        cur->count++;
    }
    for (int k = 0; !st && k < d->nb; k++) {
        bucket *b = &d->b[k];
        torc_device *dev = params[d->order[b->first]]->device;
        if (!(b->flat = torc__new(dev, TORC_DTYPE_F32, 1, &b->numel))) st = torc_last_status();
        else torc_set_mem_tag(b->flat, TORC_MEM_GRADIENT);
        if (!st && o.deterministic) {  // W chunks of ceil(numel / W): W * chunk < numel + W
            b->chunk = b->numel ? (b->numel + W - 1) / W : 1;
            b->n_chunks = b->numel ? (int)((b->numel + b->chunk - 1) / b->chunk) : 1;
            const int64_t gn = b->chunk * W;
            if (!(b->gathered = torc__new(dev, TORC_DTYPE_F32, 1, &gn))) st = torc_last_status();
            else torc_set_mem_tag(b->gathered, TORC_MEM_GRADIENT);
        }
    }
    // Parameters from rank 0, so every rank starts from the same weights.
    for (int i = 0; !st && i < n; i++) st = torc_dist_broadcast(params[i], 0, NULL);
    // fp8 autocast's amax history: one row a step, the same on every rank (core/autocast.c).
    if (!st) st = torc__fp8_drive(n, params, true);
    if (st) {
        torc_ddp_free(d);
        return NULL;
    }
    for (int k = 0; k < d->nb; k++) d->stats.bytes_per_step += d->b[k].numel * 4;
    return d;
}

void torc_ddp_free(torc_ddp *d) {
    if (!d) return;
    torc__set_leaf_grad_hook(NULL, NULL);
    if (d->params) torc__fp8_drive(d->n, d->params, false);
    for (int k = 0; d->b && k < d->nb; k++) {
        if (d->b[k].work) torc_dist_wait(d->b[k].work);
        torc_release(d->b[k].flat);
        torc_release(d->b[k].gathered);
    }
    for (int i = 0; d->parts && i < d->n; i++) clear_partial(&d->parts[i]);
    for (int i = 0; d->keep && i < d->n; i++) torc_release(d->keep[i]);
    free(d->params);
    free(d->order);
    free(d->bucket_of);
    free(d->offset);
    free(d->ready);
    free(d->used);
    free(d->b);
    free(d->parts);
    free(d->keep);
    free(d);
}

void torc_ddp_micro_batches(const torc_ddp *d, int *first, int *count) {
    *first = d && d->o.deterministic ? d->micro_first : 0;
    *count = d && d->o.deterministic ? d->micro_count : 1;
}

torc_status torc_ddp_begin(torc_ddp *d, int micro) {
    if (!d) return torc__error(TORC_ERR_INVALID_ARG, "torc_ddp_begin: ddp is NULL");
    // Armed with buckets already reduced: a second begin would start them again.
    if (d->armed && d->next_launch > 0)
        return torc__error(TORC_ERR_INVALID_ARG, "torc_ddp_begin: this step's gradients are already being reduced; "
                                                 "call torc_ddp_finish before the next step's torc_ddp_begin");
    if (d->o.deterministic) {
        if (micro < d->micro_first || micro >= d->micro_first + d->micro_count)
            return torc__error(TORC_ERR_INVALID_ARG, "torc_ddp_begin: micro-batch %d is not this rank's (%d..%d)", micro,
                               d->micro_first, d->micro_first + d->micro_count - 1);
        if (micro != d->micro_first && micro != d->micro + 1)
            return torc__error(TORC_ERR_INVALID_ARG, "torc_ddp_begin: micro-batches must come in order (%d after %d)", micro, d->micro);
        // The previous micro-batch's gradients join the partial sums.
        for (int i = 0; micro != d->micro_first && i < d->n; i++) {
            if (!d->params[i]->grad && !d->o.find_unused_parameters)
                return torc__error(TORC_ERR_AUTOGRAD, "ddp: parameter %d got no gradient in micro-batch %d (set "
                                                      "find_unused_parameters if that is intended)", i, d->micro);
            d->used[i] = d->used[i] || d->params[i]->grad;
            torc_status st = take_grad(d, i);
            if (st) return st;
        }
        d->micro = micro;
        if (micro == d->micro_first) memset(d->used, 0, (size_t)d->n * sizeof *d->used);
        if (micro != d->micro_first + d->micro_count - 1) return TORC_OK;  // hooks only in the last one
    } else {
        memset(d->used, 0, (size_t)d->n * sizeof *d->used);
    }
    for (int i = 0; i < d->n; i++) d->ready[i] = false;
    for (int k = 0; k < d->nb; k++) d->b[k].pending = d->b[k].count;
    d->next_launch = 0;
    d->hook_status = TORC_OK;
    d->armed = true;
    torc__set_leaf_grad_hook(hook, d);
    return TORC_OK;
}

// The measure of the union of the buckets' [started, finished] and of its part before `end`.
static void busy_time(const torc_ddp *d, double end, double *busy, double *hidden) {
    double lo = 0, hi = -1;
    *busy = *hidden = 0;
    for (int k = 0; k <= d->nb; k++) {
        const bool last = k == d->nb;
        if (!last && d->b[k].started <= hi) {
            if (d->b[k].finished > hi) hi = d->b[k].finished;
            continue;
        }
        if (hi > lo) {
            *busy += hi - lo;
            *hidden += (end < hi ? end : hi) - lo > 0 ? (end < hi ? end : hi) - lo : 0;
        }
        if (!last) lo = d->b[k].started, hi = d->b[k].finished;
    }
}

// The step's small all-reduce (MAX) of a (n, 5) f32 table, started when find_unused needs the
// used flags or a parameter has fp8 state: per parameter [used, has fp8 state, the step's amax of
// its fp8 input, weight and gradient]. Every rank that runs fp8 autocast issues it; a rank that
// does not while another does fails in the collectives' check (different collectives).
enum { T_USED, T_FP8, T_AMAX, T_COLS = T_AMAX + 3 };

static torc_status start_step_table(torc_ddp *d, torc_tensor **table, torc_work **work) {
    bool fp8 = false;
    for (int i = 0; i < d->n && !fp8; i++) fp8 = torc__fp8_has_state(d->params[i]);
    if (!d->o.find_unused_parameters && !fp8) return TORC_OK;
    float *host = calloc((size_t)d->n * T_COLS, sizeof *host);
    if (!host) return torc__error(TORC_ERR_OOM, "out of host memory");
    for (int i = 0; i < d->n; i++) {
        host[i * T_COLS + T_USED] = d->used[i];
        host[i * T_COLS + T_FP8] = torc__fp8_has_state(d->params[i]);
    }
    torc_status st = TORC_OK;
    torc_scope_push();
    torc_no_grad_begin();
    torc_tensor *t = torc_to_device(torc_tensor_from(host, 2, (int64_t[]){d->n, T_COLS}, TORC_DTYPE_F32), d->params[0]->device);
    if (!t) st = torc_last_status();
    for (int i = 0; !st && i < d->n; i++) {
        torc_tensor *amax = torc__fp8_step_amax(d->params[i]);
        if (!amax) continue;
        torc_tensor *dst = torc_narrow(torc_select(t, 0, i), 0, T_AMAX, 3);
        st = dst ? torc_copy_(dst, amax) : torc_last_status();
    }
    torc_no_grad_end();
    if (!st && !(*table = torc_retain(t))) st = torc_last_status();
    torc_scope_pop();
    free(host);
    if (!st) st = torc_dist_all_reduce(*table, TORC_REDUCE_MAX, work);
    return st;
}

// After the table's all-reduce: the used flags (NULL table: every parameter counts as used),
// and the fp8 amax every rank saw this step committed to each parameter with fp8 state on any.
static torc_status finish_step_table(torc_ddp *d, torc_tensor *table, bool *used_any) {
    for (int i = 0; i < d->n; i++) used_any[i] = true;
    if (!table) return TORC_OK;
    float *host = malloc(sizeof *host * (size_t)d->n * T_COLS);
    if (!host) return torc__error(TORC_ERR_OOM, "out of host memory");
    torc_status st = torc_copy_to_host(table, host, sizeof *host * (size_t)d->n * T_COLS);
    torc_scope_push();
    torc_no_grad_begin();
    for (int i = 0; !st && i < d->n; i++) {
        if (d->o.find_unused_parameters) used_any[i] = host[i * T_COLS + T_USED] > 0;
        if (!(host[i * T_COLS + T_FP8] > 0)) continue;
        torc_tensor *amax = torc_narrow(torc_select(table, 0, i), 0, T_AMAX, 3);
        st = amax ? torc__fp8_commit(d->params[i], amax) : torc_last_status();
    }
    torc_no_grad_end();
    torc_scope_pop();
    free(host);
    return st;
}

torc_status torc_ddp_finish(torc_ddp *d) {
    if (!d) return torc__error(TORC_ERR_INVALID_ARG, "torc_ddp_finish: ddp is NULL");
    torc__set_leaf_grad_hook(NULL, NULL);
    if (!d->armed) return torc__error(TORC_ERR_RUNTIME, "torc_ddp_finish: torc_ddp_begin was not called for this step");
    d->armed = false;
    d->backward_end = torc__now();
    torc_status st = d->hook_status;
    // Parameters that got no gradient: zeros (find_unused) or an error naming them.
    char missing[256] = "";
    for (int k = 0; !st && k < d->n; k++) {
        const int i = d->order[k];
        if (d->ready[i]) continue;
        if (!d->o.find_unused_parameters) {
            size_t u = strlen(missing);
            snprintf(missing + u, sizeof missing - u, "%s%d", u ? ", " : "", i);
            continue;
        }
        d->ready[i] = true;
        bucket *b = &d->b[d->bucket_of[i]];
        st = d->o.deterministic ? fold_param(d, i) : copy_slice(d, b->flat, i, NULL, true);
        b->pending--;
    }
    if (!st && missing[0])
        st = torc__error(TORC_ERR_AUTOGRAD,
                         "Expected to have finished reduction in the prior iteration before starting a new one. This "
                         "error indicates that your module has parameters that were not used in producing loss "
                         "(parameter indices: %s); set find_unused_parameters", missing);
    if (!st) st = launch_ready(d);
    torc_tensor *table = NULL;
    torc_work *table_work = NULL;
    if (!st) st = start_step_table(d, &table, &table_work);
    // Wait every started bucket (also after an error, so no collective outlives its buffers);
    // deterministic mode: chunk c of every bucket, folded, then chunk c + 1 of each.
    for (int c = 0;; c++) {
        bool any = false;
        for (int k = 0; k < d->nb; k++) {
            bucket *b = &d->b[k];
            if (!b->work) continue;
            any = true;
            double t0, t1;
            torc_status s = torc__dist_wait_timed(b->work, &t0, &t1);
            b->work = NULL;
            if (c == 0) b->started = t0;
            b->finished = t1;
            if (!s && !st && d->o.deterministic) s = fold_chunk(d, b, c);
            if (!s && !st && d->o.deterministic && b->next_chunk < b->n_chunks) s = launch_chunk(d, b);
            if (!st) st = s;
        }
        if (!any) break;
    }
    bool *used_any = malloc(sizeof *used_any * (size_t)d->n);
    if (table_work) {
        torc_status s = torc_dist_wait(table_work);
        if (!st) st = s;
    }
    if (!used_any && !st) st = torc__error(TORC_ERR_OOM, "out of host memory");
    if (!st) st = finish_step_table(d, table, used_any);
    // The averaged gradients into .grad (deterministic mode: into the kept sums).
    torc_no_grad_begin();
    for (int k = 0; !st && k < d->n; k++) {
        const int i = d->order[k];
        bucket *b = &d->b[d->bucket_of[i]];
        torc_tensor *p = d->params[i];
        torc_tensor *g = d->keep[i];
        d->keep[i] = NULL;
        if (!used_any[i]) {
            torc_release(g);
            torc_set_grad(p, NULL);
            continue;
        }
        if (!g && p->grad) {
            st = copy_slice(d, b->flat, i, p->grad, false);
            continue;
        }
        if (!g && !(g = torc__new(p->device, p->dtype, p->ndim, p->shape))) {
            st = torc_last_status();
            break;
        }
        st = copy_slice(d, b->flat, i, g, false);
        if (!st) {
            torc_set_mem_tag(g, TORC_MEM_GRADIENT);
            st = torc_set_grad(p, g);
        }
        torc_release(g);
    }
    torc_no_grad_end();
    torc_release(table);
    free(used_any);
    if (!st) {
        double busy, hidden;
        busy_time(d, d->backward_end, &busy, &hidden);
        d->stats.steps++;
        d->stats.comm_s += busy;
        d->stats.hidden_s += hidden;
    }
    return st;
}

torc_status torc_ddp_reduce_loss(torc_ddp *d, const double *local, int count, double *global) {
    if (!d || !local || !global) return torc__error(TORC_ERR_INVALID_ARG, "torc_ddp_reduce_loss: NULL argument");
    torc_status st = TORC_OK;
    torc_scope_push();
    if (d->o.deterministic) {
        if (count != d->micro_count) {
            torc_scope_pop();
            return torc__error(TORC_ERR_INVALID_ARG, "torc_ddp_reduce_loss: expected this rank's %d micro-batch losses, got %d",
                               d->micro_count, count);
        }
        // The same tree as the gradients, in double, on host values; the ranks' sums travel in
        // tensors on the parameters' device (device memory for nccl), copied in and out.
        double stack[MAX_LEVELS];
        int level[MAX_LEVELS], n = 0;
        double *gathered = malloc(sizeof(double) * (size_t)d->world);
        torc_tensor *all = torc__register(torc__new(d->params[0]->device, TORC_DTYPE_F64, 1, (int64_t[]){d->world}));
        if (!gathered) st = torc__error(TORC_ERR_OOM, "torc_ddp_reduce_loss: out of host memory");
        else if (!all) st = torc_last_status();
        for (int pass = 0; !st && pass < 2; pass++) {
            const int m = pass ? d->world : count;
            const double *vals = pass ? gathered : local;
            n = 0;
            for (int k = 0; k < m; k++) {
                stack[n] = vals[k];
                level[n++] = 0;
                while (n >= 2 && level[n - 1] == level[n - 2]) stack[n - 2] += stack[n - 1], level[n - 2]++, n--;
            }
            if (!pass) {
                const int64_t one = 1;
                torc_tensor *mine = torc_to_device(torc_tensor_from(&stack[0], 1, &one, TORC_DTYPE_F64), d->params[0]->device);
                if (!mine) st = torc_last_status();
                if (!st) st = torc_dist_all_gather(all, mine, NULL);
                if (!st) st = torc_copy_to_host(all, gathered, sizeof(double) * (size_t)d->world);
            }
        }
        free(gathered);
        if (!st) *global = stack[0] / (double)d->o.micro_batches;
    } else {
        double s = 0;
        for (int k = 0; k < count; k++) s += local[k];
        torc_tensor *t = torc_to_device(torc_scalar_tensor(count ? s / count : 0.0, TORC_DTYPE_F64), d->params[0]->device);
        if (!t) st = torc_last_status();
        else if (!(st = torc_dist_all_reduce(t, TORC_REDUCE_AVG, NULL))) st = torc_item(t, global);
    }
    torc_scope_pop();
    return st;
}

torc_status torc_ddp_stats_get(const torc_ddp *d, torc_ddp_stats *stats) {
    if (!d || !stats) return torc__error(TORC_ERR_INVALID_ARG, "torc_ddp_stats_get: NULL argument");
    *stats = d->stats;
    return TORC_OK;
}
