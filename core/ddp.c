// core/ddp.c — distributed data parallel: parameters broadcast at start, gradient buckets
// all-reduced while backward runs (a leaf-gradient hook in autograd.c), averaging, unused
// parameters, and the deterministic mode whose results do not depend on the process count.
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
    torc_tensor *gathered; // deterministic: (W * numel) f32, every rank's flat
    torc_work *work;
    double started, finished;
} bucket;

// Deterministic mode: per parameter, a stack of partial sums of micro-batch gradients (a
// binary counter: two sums of the same level are added, left + right, into one of the next).
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
static torc_tensor *add_owned(const torc_tensor *a, const torc_tensor *b) {
    torc_scope_push();
    torc_tensor *r = torc_retain(torc_add(a, b));
    torc_scope_pop();
    return r;
}

// Pushes g (owned) as a level-0 sum and folds equal levels: left + right, oldest first.
static torc_status push_partial(partial *p, torc_tensor *g, int level) {
    if (p->n == MAX_LEVELS) {
        torc_release(g);
        return torc__error(TORC_ERR_RUNTIME, "ddp: too many micro-batches");
    }
    p->t[p->n] = g;
    p->level[p->n++] = level;
    while (p->n >= 2 && p->level[p->n - 1] == p->level[p->n - 2]) {
        torc_tensor *s = add_owned(p->t[p->n - 2], p->t[p->n - 1]);
        if (!s) return torc_last_status();
        torc_release(p->t[p->n - 2]);
        torc_release(p->t[p->n - 1]);
        p->n--;
        p->t[p->n - 1] = s;
        p->level[p->n - 1]++;
    }
    return TORC_OK;
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
static torc_status launch_ready(torc_ddp *d) {
    torc_status st = TORC_OK;
    while (!st && d->next_launch < d->nb && d->b[d->next_launch].pending == 0) {
        bucket *b = &d->b[d->next_launch++];
        if (d->o.deterministic) st = torc_dist_all_gather(b->gathered, b->flat, &b->work);
        else st = torc_dist_all_reduce(b->flat, TORC_REDUCE_AVG, &b->work);
    }
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
    torc_status st;
    bucket *b = &d->b[d->bucket_of[i]];
    if (d->o.deterministic) {
        if ((st = take_grad(d, i))) return st;
        partial *p = &d->parts[i];
        if (p->n != 1) return torc__error(TORC_ERR_RUNTIME, "ddp: micro-batch sums of parameter %d did not fold to one", i);
        st = copy_slice(d, b->flat, i, p->t[0], true);
        clear_partial(p);
    } else {
        st = copy_slice(d, b->flat, i, d->params[i]->grad, true);
    }
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
    if (!d->params || !d->order || !d->bucket_of || !d->offset || !d->ready || !d->used || !d->b || !d->parts) {
        torc_ddp_free(d);
        return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory");
    }
    memcpy(d->params, params, (size_t)n * sizeof *params);
    if (o.deterministic) {
        d->micro_count = o.micro_batches / W;
        d->micro_first = d->rank * d->micro_count;
    }
    // Buckets in reverse parameter order; the first small so communication starts early.
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
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
        total += pn;
    }
    torc_status st = TORC_OK;
    for (int k = 0; !st && k < d->nb; k++) {
        bucket *b = &d->b[k];
        torc_device *dev = params[d->order[b->first]]->device;
        if (!(b->flat = torc__new(dev, TORC_DTYPE_F32, 1, &b->numel))) st = torc_last_status();
        else torc_set_mem_tag(b->flat, TORC_MEM_GRADIENT);
        int64_t gn;
        if (!st && o.deterministic) {
            if (!torc__size_mul(b->numel, W, &gn)) st = torc__error(TORC_ERR_INVALID_ARG, "ddp: bucket too large");
            else if (!(b->gathered = torc__new(dev, TORC_DTYPE_F32, 1, &gn))) st = torc_last_status();
            else torc_set_mem_tag(b->gathered, TORC_MEM_GRADIENT);
        }
    }
    // Every rank must hold the same model: compare (n, total elements) by MAX and MIN.
    if (!st) {
        torc_scope_push();
        torc_tensor *mx = torc_to_device(torc_tensor_from((int64_t[]){n, total}, TORC_SHAPE(2), TORC_DTYPE_I64), params[0]->device);
        torc_tensor *mn = mx ? torc_clone(mx) : NULL;
        if (!mn || (st = torc_dist_all_reduce(mx, TORC_REDUCE_MAX, NULL)) || (st = torc_dist_all_reduce(mn, TORC_REDUCE_MIN, NULL))) {
            if (!st) st = torc_last_status();
        } else {
            int64_t a[2], b[2];
            torc_copy_to_host(mx, a, sizeof a);
            torc_copy_to_host(mn, b, sizeof b);
            if (a[0] != b[0] || a[1] != b[1])
                st = torc__error(TORC_ERR_SHAPE, "ddp: ranks hold different models (%lld..%lld parameters, %lld..%lld elements)",
                                 (long long)b[0], (long long)a[0], (long long)b[1], (long long)a[1]);
        }
        torc_scope_pop();
    }
    // Parameters from rank 0, so every rank starts from the same weights.
    for (int i = 0; !st && i < n; i++) st = torc_dist_broadcast(params[i], 0, NULL);
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
    for (int k = 0; d->b && k < d->nb; k++) {
        if (d->b[k].work) torc_dist_wait(d->b[k].work);
        torc_release(d->b[k].flat);
        torc_release(d->b[k].gathered);
    }
    for (int i = 0; d->parts && i < d->n; i++) clear_partial(&d->parts[i]);
    free(d->params);
    free(d->order);
    free(d->bucket_of);
    free(d->offset);
    free(d->ready);
    free(d->used);
    free(d->b);
    free(d->parts);
    free(d);
}

void torc_ddp_micro_batches(const torc_ddp *d, int *first, int *count) {
    *first = d && d->o.deterministic ? d->micro_first : 0;
    *count = d && d->o.deterministic ? d->micro_count : 1;
}

torc_status torc_ddp_begin(torc_ddp *d, int micro) {
    if (!d) return torc__error(TORC_ERR_INVALID_ARG, "torc_ddp_begin: ddp is NULL");
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
        if (d->o.deterministic) {
            if ((st = take_grad(d, i))) break;
            st = copy_slice(d, b->flat, i, d->parts[i].t[0], true);
            clear_partial(&d->parts[i]);
        } else {
            st = copy_slice(d, b->flat, i, NULL, true);
        }
        b->pending--;
    }
    if (!st && missing[0])
        st = torc__error(TORC_ERR_AUTOGRAD,
                         "Expected to have finished reduction in the prior iteration before starting a new one. This "
                         "error indicates that your module has parameters that were not used in producing loss "
                         "(parameter indices: %s); set find_unused_parameters", missing);
    if (!st) st = launch_ready(d);
    // Which parameters any rank used (find_unused only): a parameter no rank used keeps no .grad.
    torc_tensor *used = NULL;
    int32_t *used_host = NULL;
    torc_work *used_work = NULL;
    if (!st && d->o.find_unused_parameters) {
        // Built on the host and moved to the parameters' device (device memory for nccl).
        if (!(used_host = malloc(sizeof(int32_t) * (size_t)d->n))) st = torc__error(TORC_ERR_OOM, "out of host memory");
        for (int i = 0; !st && i < d->n; i++) used_host[i] = d->used[i];
        if (!st) {
            torc_scope_push();
            torc_tensor *u = torc_to_device(torc_tensor_from(used_host, 1, (int64_t[]){d->n}, TORC_DTYPE_I32), d->params[0]->device);
            if (!(used = u ? torc_retain(u) : NULL)) st = torc_last_status();
            torc_scope_pop();
        }
        if (!st) st = torc_dist_all_reduce(used, TORC_REDUCE_MAX, &used_work);
    }
    // Wait every started bucket (also after an error, so no collective outlives its buffers).
    for (int k = 0; k < d->nb; k++) {
        bucket *b = &d->b[k];
        if (!b->work) continue;
        torc_status s = torc__dist_wait_timed(b->work, &b->started, &b->finished);
        b->work = NULL;
        if (!st) st = s;
    }
    if (used_work) {
        torc_status s = torc_dist_wait(used_work);
        if (!st) st = s;
        if (!st) st = torc_copy_to_host(used, used_host, sizeof(int32_t) * (size_t)d->n);
    }
    // Deterministic mode: the top of the tree, the ranks' sums (in rank order) folded pairwise,
    // divided by the micro-batch count, into each bucket's flat.
    torc_no_grad_begin();
    for (int k = 0; !st && d->o.deterministic && k < d->nb; k++) {
        bucket *b = &d->b[k];
        partial top = {.n = 0};
        for (int r = 0; !st && r < d->world; r++) {
            torc_tensor *part = torc__make_view(b->gathered, 1, &b->numel, (int64_t[]){1}, (int64_t)r * b->numel);
            st = part ? push_partial(&top, part, 0) : torc_last_status();
        }
        if (!st) {
            torc_scope_push();
            torc_tensor *avg = torc_div_scalar(top.t[0], torc_scalar_f((double)d->o.micro_batches));
            st = avg ? torc__copy(b->flat, avg) : torc_last_status();
            torc_scope_pop();
        }
        clear_partial(&top);
    }
    // The averaged gradients into .grad.
    for (int k = 0; !st && k < d->n; k++) {
        const int i = d->order[k];
        bucket *b = &d->b[d->bucket_of[i]];
        torc_tensor *p = d->params[i];
        if (used && !used_host[i]) {
            torc_set_grad(p, NULL);
            continue;
        }
        if (p->grad) {
            st = copy_slice(d, b->flat, i, p->grad, false);
            continue;
        }
        torc_tensor *g = torc__new(p->device, p->dtype, p->ndim, p->shape);
        if (!g) {
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
    torc_release(used);
    free(used_host);
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
