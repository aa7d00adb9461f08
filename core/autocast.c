// core/autocast.c — torch.autocast for torc: the per-thread scope stack, the op policy the frontends'
// one-line hooks consult, the weight-cast cache, and fp8 autocast (Transformer Engine's delayed scaling).
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "autograd-impl.h"
#include "comm-impl.h"

// ---- the scope stack ----
// Each entry is the dtype of one torc_autocast_begin; F32 marks a nested "autocast off" scope.
#define AUTOCAST_MAX_DEPTH 64
static _Thread_local torc_dtype tls_stack[AUTOCAST_MAX_DEPTH];
static _Thread_local int tls_depth;

torc_status torc_autocast_begin(torc_dtype dtype) {
    if (dtype != TORC_DTYPE_BF16 && dtype != TORC_DTYPE_F16 && dtype != TORC_DTYPE_F8_E4M3FN && dtype != TORC_DTYPE_F32)
        return torc__error(TORC_ERR_DTYPE, "In autocast, but the target dtype %s is not supported: torc autocasts to "
                                           "BFloat16, Half or Float8_e4m3fn (fp8 matmuls), and Float disables it",
                           torc__dtype_valid(dtype) ? torc__dtype_c10_name(dtype) : "(invalid)");
    if (tls_depth == AUTOCAST_MAX_DEPTH)
        return torc__error(TORC_ERR_INVALID_ARG, "torc_autocast_begin: scopes nested deeper than %d", AUTOCAST_MAX_DEPTH);
    tls_stack[tls_depth++] = dtype;
    return TORC_OK;
}

static void cast_cache_clear(void);

torc_status torc_autocast_end(void) {
    if (tls_depth == 0) return torc__error(TORC_ERR_INVALID_ARG, "torc_autocast_end without a matching torc_autocast_begin");
    if (--tls_depth == 0) cast_cache_clear();  // PyTorch clears its cast cache when the outermost region exits
    return TORC_OK;
}

// The dtype the innermost scope casts to (F32: none). Backward formulas never autocast: they
// run in the dtypes the forward pass chose, as PyTorch's backward does.
static torc_dtype mode(void) {
    if (tls_depth == 0 || torc__phase() != TORC_PHASE_FORWARD) return TORC_DTYPE_F32;
    return tls_stack[tls_depth - 1];
}

bool torc_is_autocast_enabled(void) { return tls_depth > 0 && tls_stack[tls_depth - 1] != TORC_DTYPE_F32; }
torc_dtype torc_autocast_dtype(void) { return tls_depth > 0 ? tls_stack[tls_depth - 1] : TORC_DTYPE_F32; }

// The dtype matmuls run in: fp8 mode runs the matmuls it does not quantize in bf16.
static torc_dtype low_dtype(torc_dtype m) { return m == TORC_DTYPE_F8_E4M3FN ? TORC_DTYPE_BF16 : m; }

// PyTorch's is_eligible: autocast casts floating tensors other than f64; integer and bool
// tensors (labels, indices, masks) are never touched.
static bool eligible(const torc_tensor *t) {
    return t && torc_dtype_is_floating(t->dtype) && t->dtype != TORC_DTYPE_F64;
}

// ---- the f32 policy ----
// Ops that run in f32 under autocast (PyTorch's CUDA "fp32" and "fp32_set_opt_dtype" lists as
// torc has them, plus mean): reductions that sum, softmax, exp/log and their kin, layer_norm, losses.
static bool f32_op(int code) {
    switch (code) {
    case -1:  // losses
    case TORC_OP_SUM:
    case TORC_OP_MEAN:
    case TORC_OP_PROD:
    case TORC_OP_NORM:
    case TORC_OP_LOGSUMEXP:
    case TORC_OP_SOFTMAX:
    case TORC_OP_LOG_SOFTMAX:
    case TORC_OP_EXP:
    case TORC_OP_LOG:
    case TORC_OP_RECIPROCAL:
    case TORC_OP_RSQRT:
    case TORC_OP_ERFINV:
    case TORC_OP_LAYER_NORM: return true;
    default: return false;
    }
}

static bool needs_f32(const torc_tensor *t) { return eligible(t) && t->dtype != TORC_DTYPE_F32; }

bool torc__autocast_wants_f32(int code, const torc_tensor *t, const torc_tensor *u) {
    if (mode() == TORC_DTYPE_F32 || !f32_op(code)) return false;
    return needs_f32(t) || needs_f32(u);
}

static bool cast_in_scope(const torc_tensor **t, torc_dtype d) {
    if (!*t || !eligible(*t) || (*t)->dtype == d) return true;
    *t = torc_to_dtype((torc_tensor *)*t, d);
    return *t != NULL;
}

bool torc__autocast_cast_f32(const torc_tensor **t, const torc_tensor **u) {
    torc_scope_push();
    return cast_in_scope(t, TORC_DTYPE_F32) && (!u || cast_in_scope(u, TORC_DTYPE_F32));
}

torc_tensor *torc__autocast_leave(torc_tensor *r) {
    r = torc_keep(r);
    torc_scope_pop();
    return r;
}

// ---- matmuls ----
static bool fp8_applies(const torc_tensor *a, const torc_tensor *b) {
    return b->requires_grad && !b->grad_fn && b->ndim == 2 && eligible(b) && eligible(a) && a->ndim >= 2 &&
           a->shape[a->ndim - 1] == b->shape[0];
}

bool torc__autocast_matmul_applies(const torc_tensor *a, const torc_tensor *b) {
    const torc_dtype m = mode();
    if (m == TORC_DTYPE_F32) return false;
    if (m == TORC_DTYPE_F8_E4M3FN && fp8_applies(a, b)) return true;
    const torc_dtype low = low_dtype(m);
    return (eligible(a) && a->dtype != low) || (eligible(b) && b->dtype != low);
}

static torc_tensor *fp8_matmul(const torc_tensor *a, const torc_tensor *b, torc_dtype out_dtype);

// The matmuls autocast runs without its casts (MATMUL_ROUNDED, torc__matmul_rounded): a weight-like
// b (2-D) and a of 2 or more dims, each f32 or low already, out low. (Other shapes would sum
// broadcast batch gradients in f32 instead of low; they keep the casts.)
static bool fusable(const torc_tensor *a, const torc_tensor *b, torc_dtype low, torc_dtype out_dtype) {
    return out_dtype == low && b->ndim == 2 && a->ndim >= 2 && (a->dtype == low || a->dtype == TORC_DTYPE_F32) &&
           (b->dtype == low || b->dtype == TORC_DTYPE_F32);
}

// ---- the weight-cast cache ----
// PyTorch's cached_cast (aten/src/ATen/autocast_mode.cpp): within the outermost region, the cast of
// an f32 parameter (a leaf that requires grad and is not a view) to the autocast dtype is made once
// and reused by every matmul after it, and the casts go when the outermost region ends. Without it
// the sampler (torc_gpt_generate, one row a token) cast every weight again each token, where bf16
// MATMUL_ROUNDED is declined (AMX): config B (6 layers, width 384) spent 78% of a token's samples
// in that conversion (perf, one Emerald Rapids core), 8-9.6 ms a token at position 100 against
// 2.4-3.2 in f32; with the cache 2.5-3.1 ms (process CPU time, builds side by side).
// torc differs in three places. The cache serves only matmuls that record no graph (grad mode off):
// with grad on, the matmul fuses its casts where the backend takes MATMUL_ROUNDED (no copy kept,
// which a held cast would undo), and a cast shared by graphs would need a node of its own. An
// entry remembers its parameter's storage version and is made again after an in-place write
// (PyTorch does not check: a parameter written inside a region keeps its stale cast). And a view
// of the whole parameter (wte^T, the tied LM head's weight) is cached too, keyed by its geometry:
// PyTorch's F.linear transposes inside the op, torc's head multiplies by a transposed view.
// A cast is torc_to_dtype's copy of the operand (contiguous, rounded to nearest even), exactly what
// the uncached path multiplies, so results do not change by a bit.
typedef struct cast_key {
    const torc_tensor *param;   // the parameter the operand is or views
    const torc_device *device;  // the operand's
    torc_dtype dtype;           // the cast's
    int ndim;                   // the operand's geometry (the parameter's own, or its view's)
    int64_t offset;
    int64_t shape[TORC_MAX_DIMS], stride[TORC_MAX_DIMS];
} cast_key;

typedef struct cast_entry {
    cast_key key;      // key.param owned: held until the entry goes
    torc_tensor *cast; // owned: the operand in key.dtype
    uint64_t version;  // the parameter's storage version when the cast was made
} cast_entry;

// The thread's entries, a list: a lookup compares parameter pointers first, so a model of a few
// hundred weights costs a few microseconds a token against the milliseconds of its matmuls.
static _Thread_local struct {
    cast_entry *e;
    int n, cap;
    bool at_exit;  // the thread-exit destructor is armed
} tls_casts;

static void cast_cache_clear(void) {
    for (int i = 0; i < tls_casts.n; i++) {
        torc_release(tls_casts.e[i].cast);
        torc_release((torc_tensor *)tls_casts.e[i].key.param);
    }
    free(tls_casts.e);
    tls_casts.e = NULL;
    tls_casts.cap = tls_casts.n = 0;
}

// A thread that ends inside a region frees its casts as it exits (the pthread key's destructor).
static pthread_once_t g_casts_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_casts_key;
static bool g_casts_key_ok;
static void casts_at_exit(void *unused) {
    (void)unused;
    cast_cache_clear();
}
static void casts_key_create(void) { g_casts_key_ok = pthread_key_create(&g_casts_key, casts_at_exit) == 0; }

// The parameter t is, or is a view of all of, when autocast may cache t's cast (else NULL): t and
// it f32, it a leaf that requires grad and is not a view (PyTorch's can_try_cache), t on its storage
// and of its size (a transpose or reshape of it, not a slice: slices of varying bounds would pile up).
static torc_tensor *cacheable_param(const torc_tensor *t) {
    torc_tensor *p = t->view_base ? t->view_base : (torc_tensor *)t;
    if (t->dtype != TORC_DTYPE_F32 || p->dtype != TORC_DTYPE_F32 || !p->requires_grad || p->grad_fn || p->view_base ||
        p->storage != t->storage)
        return NULL;
    return p == t || torc__numel(t->ndim, t->shape) == torc__numel(p->ndim, p->shape) ? p : NULL;
}

static cast_key key_of(const torc_tensor *p, const torc_tensor *t, torc_dtype d) {
    cast_key k = {.param = p, .device = t->device, .dtype = d, .ndim = t->ndim, .offset = t->offset};
    memcpy(k.shape, t->shape, (size_t)t->ndim * sizeof *k.shape);
    memcpy(k.stride, t->stride, (size_t)t->ndim * sizeof *k.stride);
    return k;
}

static bool key_eq(const cast_key *a, const cast_key *b) {
    return a->param == b->param && a->device == b->device && a->dtype == b->dtype && a->ndim == b->ndim &&
           a->offset == b->offset && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) &&
           !memcmp(a->stride, b->stride, (size_t)a->ndim * sizeof *a->stride);
}

// k's entry, else NULL.
static cast_entry *cast_find(const cast_key *k) {
    for (int i = 0; i < tls_casts.n; i++)
        if (key_eq(&tls_casts.e[i].key, k)) return &tls_casts.e[i];
    return NULL;
}

// Points *t at its cached cast to d where the cache serves it (making the cast on first use, or
// again after an in-place write to the parameter); leaves *t alone where it does not. The cast
// stays valid until the outermost torc_autocast_end. False on an error (the cast's, set).
static bool cached_cast(const torc_tensor **t, torc_dtype d) {
    torc_tensor *p = *t ? cacheable_param(*t) : NULL;
    if (!p) return true;
    const cast_key k = key_of(p, *t, d);
    const uint64_t version = atomic_load(&p->storage->version);
    cast_entry *e = cast_find(&k);
    if (e && e->version == version) {
        *t = e->cast;
        return true;
    }
    if (!e && tls_casts.n == tls_casts.cap) {  // room for one more, or uncached (still right)
        const int cap = tls_casts.cap ? 2 * tls_casts.cap : 64;
        cast_entry *grown = realloc(tls_casts.e, (size_t)cap * sizeof *grown);
        if (!grown) return true;
        tls_casts.e = grown;
        tls_casts.cap = cap;
    }
    torc_scope_push();  // the cast's one reference becomes the entry's, inside a scope or not
    torc_tensor *c = torc_retain(torc_to_dtype((torc_tensor *)*t, d));  // grad mode is off: no graph
    torc_scope_pop();
    if (!c) return false;
    if (e) {  // stale: the parameter was written since
        torc_release(e->cast);
    } else {
        if (!tls_casts.at_exit) {
            pthread_once(&g_casts_once, casts_key_create);
            tls_casts.at_exit = g_casts_key_ok && pthread_setspecific(g_casts_key, &tls_casts) == 0;
        }
        e = &tls_casts.e[tls_casts.n++];
        e->key = k;
        torc_retain(p);
    }
    e->cast = c;
    e->version = version;
    *t = c;
    return true;
}

const torc_tensor *torc__autocast_cast(const torc_tensor *t, torc_dtype d) {
    const torc_tensor *c = t;
    if (!torc_is_grad_enabled() && !cached_cast(&c, d)) return NULL;
    return c != t ? c : torc_to_dtype((torc_tensor *)t, d);
}

torc_tensor *torc__autocast_matmul(const torc_tensor *a, const torc_tensor *b, torc_dtype out_dtype) {
    const torc_dtype m = mode(), low = low_dtype(m);
    if (out_dtype == TORC_DTYPE_COUNT) out_dtype = low;
    if (m == TORC_DTYPE_F8_E4M3FN && fp8_applies(a, b)) return fp8_matmul(a, b, out_dtype);
    // No graph recorded: parameters' casts from the cache (then the matmul below runs on them).
    if (!torc_is_grad_enabled() && !(cached_cast(&a, low) && cached_cast(&b, low))) return NULL;
    if (fusable(a, b, low, out_dtype)) return torc__matmul_rounded(a, b, low, low);
    torc_scope_push();
    torc_tensor *r = cast_in_scope(&a, low) && cast_in_scope(&b, low) ? torc_matmul_out_dtype(a, b, out_dtype) : NULL;
    return torc__autocast_leave(r);
}

// ---- fp8: delayed scaling per parameter ----
// Transformer Engine's recipe: each fp8 tensor role has a scale (x_fp8 = sat(x * scale)) and an
// amax history; before each forward the scale becomes fp8_max / max(history) / 2^margin (kept
// when that max is 0 or not finite), the history moves to a fresh row, and the casts of this
// step record their amax there. Roles: 0 the input (e4m3), 1 the weight (e4m3), 2 the
// gradient of the output (e5m2, TE's HYBRID format). torc differs in one place: a role's first
// cast scales by its own current amax (instead of 1), so the first step is not saturated.
//
// Under data parallel (core/ddp.c drives the parameters it holds, torc__fp8_drive) a history row
// is an optimizer step, not a forward: every cast of the step (each micro-batch's, forward and
// backward) takes the max into the row, torc_ddp_finish reduces the row across ranks (MAX) and
// commits it (torc__fp8_commit: new scales, next row), and every cast of a step uses the scales
// committed before it; until a role has a committed amax, each cast scales by its own. A cast
// then depends only on its own micro-batch and the history, which is the same on every rank and
// for every world size: deterministic runs stay bit-identical across process counts.
enum { ROLE_INPUT = 0, ROLE_WEIGHT = 1, ROLE_GRAD = 2, N_ROLES = 3 };

struct torc__fp8_meta {
    torc_tensor *scale;   // (3,) f32; driven: the committed scales, 0 for a role with none yet
    torc_tensor *used;    // (3,) f32, driven only: the scales this step's last casts used
    torc_tensor *hist;    // (len, 3) f32 amax history
    torc_tensor *fmax;    // (3,) f32: 448, 448, 57344
    int len, pos;
    bool primed[N_ROLES]; // the role has been cast once
    bool driven;          // a history row per step, committed by data parallel (see above)
};

// The parameters data parallel drives (torc__fp8_drive); compared by address, never dereferenced.
static pthread_mutex_t g_drive_lock = PTHREAD_MUTEX_INITIALIZER;
static const torc_tensor **g_driven;
static int g_n_driven, g_cap_driven;

static bool is_driven(const torc_tensor *w) {
    pthread_mutex_lock(&g_drive_lock);
    bool found = false;
    for (int i = 0; i < g_n_driven && !found; i++) found = g_driven[i] == w;
    pthread_mutex_unlock(&g_drive_lock);
    return found;
}

static _Atomic int g_hist_len = 1024;
static _Atomic int g_margin = 0;

torc_status torc_autocast_set_fp8_recipe(int amax_history_len, int margin) {
    if (amax_history_len < 1 || amax_history_len > (1 << 20) || margin < 0 || margin > 64)
        return torc__error(TORC_ERR_INVALID_ARG, "torc_autocast_set_fp8_recipe: expected 1 <= amax_history_len <= "
                                                 "1048576 and 0 <= margin <= 64, got %d and %d",
                           amax_history_len, margin);
    g_hist_len = amax_history_len;
    g_margin = margin;
    return TORC_OK;
}

void torc__fp8_meta_free(torc__fp8_meta *m) {
    if (!m) return;
    torc_release(m->used);
    torc_release(m->scale);
    torc_release(m->hist);
    torc_release(m->fmax);
    free(m);
}

// The meta of parameter w, created on first use (owned by w; freed with it).
static torc__fp8_meta *meta_of_param(torc_tensor *w) {
    if (w->fp8_meta) return w->fp8_meta;
    torc__fp8_meta *m = calloc(1, sizeof *m);
    if (!m) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory for fp8 scaling state");
    m->len = g_hist_len;
    m->driven = is_driven(w);
    m->scale = torc__new(w->device, TORC_DTYPE_F32, 1, (int64_t[]){N_ROLES});
    m->used = torc__new(w->device, TORC_DTYPE_F32, 1, (int64_t[]){N_ROLES});
    m->hist = torc__new(w->device, TORC_DTYPE_F32, 2, (int64_t[]){m->len, N_ROLES});
    m->fmax = torc__new(w->device, TORC_DTYPE_F32, 1, (int64_t[]){N_ROLES});
    torc_status st = m->scale && m->used && m->hist && m->fmax ? TORC_OK : torc_last_status();
    if (!st) st = torc__fill(m->scale, m->driven ? 0.0 : 1.0);
    if (!st) st = torc__fill(m->used, 1.0);
    if (!st) st = torc__fill(m->hist, 0.0);
    if (!st) st = torc__fill(m->fmax, 448.0);
    if (!st) {  // the gradient's role is e5m2
        torc_scope_push();
        torc_tensor *g = torc_select(m->fmax, 0, ROLE_GRAD);
        st = g ? torc_fill_(g, torc_s(57344.0)) : torc_last_status();
        torc_scope_pop();
    }
    if (st) {
        torc__fp8_meta_free(m);
        return NULL;
    }
    m->pos = m->driven ? 0 : m->len - 1;  // the first forward (driven: the first step) is row 0
    w->fp8_meta = m;
    return m;
}

// where(amax > 0 and finite, fmax / amax / 2^margin, old): TE's scale update (registered).
static torc_tensor *scale_from_amax(const torc_tensor *amax, const torc_tensor *fmax, const torc_tensor *old) {
    torc_tensor *ok = torc_logical_and(torc_gt_scalar(amax, torc_s(0.0)), torc_lt_scalar(amax, torc_s(INFINITY)));
    torc_tensor *fresh = torc_div_scalar(torc_div(fmax, amax), torc_s(ldexp(1.0, g_margin)));
    return ok && fresh ? torc_where(ok, fresh, old) : NULL;
}

// Before a forward: new scales from the history, then a fresh (zeroed) history row.
static torc_status begin_step(torc__fp8_meta *m) {
    torc_tensor *hmax = torc_amax(m->hist, 1, (int[]){0}, false);
    torc_tensor *s = hmax ? scale_from_amax(hmax, m->fmax, m->scale) : NULL;
    torc_status st = s ? torc_copy_(m->scale, s) : torc_last_status();
    m->pos = (m->pos + 1) % m->len;
    torc_tensor *row = st ? NULL : torc_select(m->hist, 0, m->pos);
    return st ? st : row ? torc_zero_(row) : torc_last_status();
}

// Records |x|'s max for role in the current history row, sets the role's scale from it on its
// first use, and returns sat(x * scale) in dtype and the scale's inverse (registered).
static torc_tensor *quantize(torc__fp8_meta *m, int role, const torc_tensor *x, torc_dtype dtype, torc_tensor **inv) {
    torc_tensor *amax = torc_to_dtype(torc_amax(torc_abs(x), TORC_ALL_DIMS, false), TORC_DTYPE_F32);
    torc_tensor *slot = torc_select(torc_select(m->hist, 0, m->pos), 0, role);
    torc_tensor *scale = torc_select(m->scale, 0, role);
    if (m->driven) {  // the step's row keeps the max; the committed scale, else this cast's own
        torc_tensor *used = torc_select(m->used, 0, role);
        if (!amax || !slot || !scale || !used || torc_copy_(slot, torc_maximum(slot, amax))) return NULL;
        torc_tensor *own = scale_from_amax(amax, torc_select(m->fmax, 0, role), torc_ones_like(amax));
        torc_tensor *s = own ? torc_where(torc_gt_scalar(scale, torc_s(0.0)), scale, own) : NULL;
        if (!s || torc_copy_(used, s)) return NULL;
        *inv = torc_reciprocal(s);
        return *inv ? torc_to_fp8_scaled(x, s, dtype) : NULL;
    }
    if (!amax || !slot || !scale || torc_copy_(slot, amax)) return NULL;
    if (!m->primed[role]) {
        torc_tensor *s = scale_from_amax(amax, torc_select(m->fmax, 0, role), scale);
        if (!s || torc_copy_(scale, s)) return NULL;
        m->primed[role] = true;
    }
    *inv = torc_reciprocal(scale);
    return *inv ? torc_to_fp8_scaled(x, scale, dtype) : NULL;
}

// What the fp8 node keeps besides its saved tensors (in params.raw).
typedef struct fp8_node_params {
    torc__fp8_meta *meta;  // the weight's; the node's edge owns the weight, so it outlives the node
} fp8_node_params;
_Static_assert(sizeof(fp8_node_params) <= sizeof(torc_op_params), "fp8 node params fit the params blob");

// x (..., K) @ w (K, N) with both cast to e4m3 under delayed scaling; one node (ScaledMmBackward0)
// with inputs x, w and the scales used (saved so backward casts them identically).
static torc_tensor *fp8_matmul(const torc_tensor *x, const torc_tensor *w, torc_dtype out_dtype) {
    torc__fp8_meta *m = meta_of_param((torc_tensor *)w);
    if (!m) return NULL;
    const int64_t K = w->shape[0], N = w->shape[1];
    torc_tensor *r = NULL, *scales = NULL;
    torc_scope_push();
    torc_no_grad_begin();
    torc_tensor *x2 = torc_reshape((torc_tensor *)x, 2, (int64_t[]){-1, K});
    torc_tensor *inv_x = NULL, *inv_w = NULL;
    torc_tensor *xq = x2 && (m->driven || !begin_step(m)) ? quantize(m, ROLE_INPUT, x2, TORC_DTYPE_F8_E4M3FN, &inv_x) : NULL;
    torc_tensor *wq = xq ? quantize(m, ROLE_WEIGHT, w, TORC_DTYPE_F8_E4M3FN, &inv_w) : NULL;
    torc_tensor *y = wq ? torc_scaled_mm(xq, wq, inv_x, inv_w, out_dtype, NULL, NULL) : NULL;
    if (y) {
        int64_t shape[TORC_MAX_DIMS];
        memcpy(shape, x->shape, sizeof shape);
        shape[x->ndim - 1] = N;
        y = torc_reshape(y, x->ndim, shape);
    }
    scales = y ? torc_clone(m->driven ? m->used : m->scale) : NULL;  // the scales the casts used
    r = scales ? torc_retain(y) : NULL;  // out of the scope, owned here
    if (scales) torc_retain(scales);
    torc_no_grad_end();
    torc_scope_pop();
    if (!r) return NULL;
    torc_op_params p;
    memset(&p, 0, sizeof p);
    fp8_node_params np = {m};
    memcpy(&p, &np, sizeof np);
    const torc_tensor *ins[3] = {x, w, scales};
    r = torc__autograd_record(r, TORC_OP_SCALED_MM, 3, ins, &p);
    torc_release(scales);
    return r ? torc__register(r) : NULL;
}

// Backward of fp8_matmul: g cast to e5m2 under the weight's gradient scale, then
// dx = g @ w^T and dw = x^T @ g through scaled_mm in f32, from x and w cast as in forward.
torc_status torc__fp8_matmul_backward(const torc_node *n, const torc_tensor *g, const bool *need, torc_tensor **gin) {
    fp8_node_params np;
    memcpy(&np, &n->params, sizeof np);
    torc__fp8_meta *m = np.meta;
    torc_tensor *x = torc__saved_at(n, 0), *w = torc__saved_at(n, 1), *scales = torc__saved_at(n, 2);
    const int64_t K = w->shape[0], N = w->shape[1];
    torc_tensor *g2 = torc_reshape((torc_tensor *)g, 2, (int64_t[]){-1, N});
    torc_tensor *inv_g = NULL;
    torc_tensor *gq = g2 ? quantize(m, ROLE_GRAD, g2, TORC_DTYPE_F8_E5M2, &inv_g) : NULL;
    torc_tensor *sx = torc_select(scales, 0, ROLE_INPUT), *sw = torc_select(scales, 0, ROLE_WEIGHT);
    if (!gq || !sx || !sw) return torc_last_status();
    if (need[0]) {  // (M, N) @ (N, K)
        torc_tensor *wq = torc_to_fp8_scaled(w, sw, TORC_DTYPE_F8_E4M3FN);
        torc_tensor *dx = wq ? torc_scaled_mm(gq, torc_transpose(wq, 0, 1), inv_g, torc_reciprocal(sw),
                                              TORC_DTYPE_F32, NULL, NULL) : NULL;
        if (!dx || !(gin[0] = torc_reshape(dx, x->ndim, x->shape))) return torc_last_status();
    }
    if (need[1]) {  // (K, M) @ (M, N)
        torc_tensor *xq = torc_to_fp8_scaled(torc_reshape(x, 2, (int64_t[]){-1, K}), sx, TORC_DTYPE_F8_E4M3FN);
        torc_tensor *dw = xq ? torc_scaled_mm(torc_transpose(xq, 0, 1), gq, torc_reciprocal(sx), inv_g, TORC_DTYPE_F32,
                                              NULL, NULL) : NULL;
        if (!(gin[1] = dw)) return torc_last_status();
    }
    return TORC_OK;
}

// ---- inspection ----
torc_tensor *torc_autocast_fp8_scales(const torc_tensor *param) {
    if (!param) return TORC_NULL_ARG_FAIL("tensor is NULL");
    return param->fp8_meta ? torc_clone(param->fp8_meta->scale) : NULL;
}

torc_tensor *torc_autocast_fp8_amax_history(const torc_tensor *param) {
    if (!param) return TORC_NULL_ARG_FAIL("tensor is NULL");
    return param->fp8_meta ? torc_clone(param->fp8_meta->hist) : NULL;
}

// ---- data parallel drives the history (core/ddp.c) ----
torc_status torc__fp8_drive(int n, torc_tensor *const *params, bool on) {
    pthread_mutex_lock(&g_drive_lock);
    torc_status st = TORC_OK;
    for (int i = 0; i < n; i++) {
        int at = -1;
        for (int k = 0; k < g_n_driven && at < 0; k++)
            if (g_driven[k] == params[i]) at = k;
        if (!on) {
            if (at >= 0) g_driven[at] = g_driven[--g_n_driven];
            continue;
        }
        if (at >= 0) continue;
        if (g_n_driven == g_cap_driven) {
            const int cap = g_cap_driven ? 2 * g_cap_driven : 64;
            const torc_tensor **grown = realloc(g_driven, sizeof *grown * (size_t)cap);
            if (!grown) {
                st = torc__error(TORC_ERR_OOM, "out of host memory");
                break;
            }
            g_driven = grown;
            g_cap_driven = cap;
        }
        g_driven[g_n_driven++] = params[i];
    }
    if (!g_n_driven) {
        free(g_driven);
        g_driven = NULL;
        g_cap_driven = 0;
    }
    pthread_mutex_unlock(&g_drive_lock);
    // State made before data parallel took over is not a step's: it keeps only its scales. When
    // it lets go, each role primes again on its next cast (legacy stepping, one row a forward).
    for (int i = 0; !st && i < n; i++) {
        torc__fp8_meta *m = params[i]->fp8_meta;
        if (!on && m) m->driven = false, memset(m->primed, 0, sizeof m->primed);
        if (!on || !m || m->driven) continue;
        m->driven = true;
        torc_scope_push();
        torc_tensor *row = torc_select(m->hist, 0, m->pos);
        st = row ? torc_zero_(row) : torc_last_status();
        torc_scope_pop();
    }
    return st;
}

bool torc__fp8_has_state(const torc_tensor *param) { return param->fp8_meta != NULL; }

torc_tensor *torc__fp8_step_amax(const torc_tensor *param) {
    torc__fp8_meta *m = param->fp8_meta;
    return m ? torc_select(m->hist, 0, m->pos) : NULL;
}

torc_status torc__fp8_commit(torc_tensor *param, const torc_tensor *amax) {
    if (!is_driven(param)) return torc__error(TORC_ERR_RUNTIME, "fp8: committing the amax of a parameter data parallel does not drive");
    torc__fp8_meta *m = meta_of_param(param);
    if (!m) return torc_last_status();
    torc_scope_push();
    torc_tensor *row = torc_select(m->hist, 0, m->pos);
    torc_status st = row ? torc_copy_(row, amax) : torc_last_status();
    torc_tensor *hmax = st ? NULL : torc_amax(m->hist, 1, (int[]){0}, false);
    torc_tensor *s = hmax ? scale_from_amax(hmax, m->fmax, m->scale) : NULL;
    if (!st) st = s ? torc_copy_(m->scale, s) : torc_last_status();
    if (!st) {
        m->pos = (m->pos + 1) % m->len;
        torc_tensor *next = torc_select(m->hist, 0, m->pos);
        st = next ? torc_zero_(next) : torc_last_status();
    }
    torc_scope_pop();
    return st;
}
