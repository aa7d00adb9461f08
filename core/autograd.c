// core/autograd.c — the autograd graph and engine: grad mode, the hooks op frontends call to
// record nodes (in-place ops rebase history, through views onto their base), saved tensors
// with version checks, backward / autograd.grad, retain_grad.
#include <stdlib.h>
#include <string.h>

#include "autograd-impl.h"

// ---- grad mode ----
static TORC__TLS_HOT _Thread_local int tls_no_grad;

void torc_no_grad_begin(void) { tls_no_grad++; }
void torc_no_grad_end(void) {
    if (tls_no_grad > 0) tls_no_grad--;
}
bool torc_is_grad_enabled(void) { return tls_no_grad == 0; }

static bool refresh(torc_tensor *t);  // brings a view's grad_fn up to date (views, below)

bool torc__any_requires_grad(int n, const torc_tensor *const *ts) {
    if (tls_no_grad) return false;
    for (int i = 0; i < n; i++)
        if (ts[i] && (refresh((torc_tensor *)ts[i]), ts[i]->requires_grad)) return true;
    return false;
}

// ---- nodes ----
static _Atomic uint64_t g_seq;  // node creation order
static _Atomic uint64_t g_run;  // engine runs (visit marks)

static torc_node *node_new(int code, const char *name, int n_in) {
    torc_node *n = torc__pool_alloc(TORC__POOL_NODE, sizeof *n);
    if (!n) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory for an autograd node");
    if (n_in > TORC__NODE_INLINE) {
        n->next = calloc((size_t)n_in, sizeof *n->next);
        n->in = calloc((size_t)n_in, sizeof *n->in);
        if (!n->next || !n->in) {
            free(n->next);
            free(n->in);
            torc__pool_free(TORC__POOL_NODE, n, sizeof *n);
            return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory for an autograd node");
        }
    } else {
        n->next = n->next_inline;
        n->in = n->in_inline;
    }
    atomic_init(&n->refcount, 1);
    n->code = code;
    n->name = name;
    n->n_in = n_in;
    n->seq = atomic_fetch_add(&g_seq, 1);
    return n;
}

static torc_node *node_retain(torc_node *n) {
    if (n) atomic_fetch_add(&n->refcount, 1);
    return n;
}

// The ident of t, created on first use (a new reference), or NULL on OOM.
static torc__ident *ident_of(torc_tensor *t) {
    torc__ident *id = atomic_load(&t->ident);
    if (!id) {
        torc__ident *fresh = calloc(1, sizeof *fresh);
        if (!fresh) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory for a saved tensor");
        atomic_init(&fresh->refcount, 1);
        fresh->tensor = t;
        // Two threads may save the same tensor (a shared parameter): one ident wins.
        if (atomic_compare_exchange_strong(&t->ident, &id, fresh)) id = fresh;
        else free(fresh);
    }
    atomic_fetch_add(&id->refcount, 1);
    return id;
}

static void ident_release(torc__ident *id) {
    if (id && atomic_fetch_sub(&id->refcount, 1) == 1) free(id);
}

// Frees the saved tensors of n and of the in-place op a CopySlices node holds.
static void release_saved(torc_node *n) {
    for (torc_node *k = n; k; k = k->inner)
        for (int i = 0; i < TORC__SAVED_SLOTS; i++) {
            torc_release(k->saved[i].t);
            ident_release(k->saved[i].ident);
            k->saved[i].t = NULL;
            k->saved[i].ident = NULL;
        }
}

// Drops one reference; frees dead nodes with an explicit stack (graphs can be long chains).
static void node_release(torc_node *n) {
    if (!n || !torc__unref(&n->refcount)) return;
    torc_node *local[32], **stack = local;
    int depth = 0, cap = 32;
    stack[depth++] = n;
    while (depth > 0) {
        torc_node *d = stack[--depth];
        release_saved(d);
        torc_release(d->grad);
        for (int i = -1; i < d->n_in; i++) {
            torc_node *c = i < 0 ? d->inner : d->next[i].fn;
            // A leaf has no grad_fn; if it is a view, its base's graph is released by a nested
            // call (one level: a base is never a view).
            if (i >= 0) torc_release(d->next[i].leaf);
            if (!c || !torc__unref(&c->refcount)) continue;
            if (depth == cap) {
                torc_node **ns = malloc((size_t)cap * 2 * sizeof *ns);
                if (!ns) continue;  // cannot grow: leak the rest rather than corrupt memory
                memcpy(ns, stack, (size_t)depth * sizeof *ns);
                if (stack != local) free(stack);
                stack = ns;
                cap *= 2;
            }
            stack[depth++] = c;
        }
        if (d->next != d->next_inline) {
            free(d->next);
            free(d->in);
        }
        torc__pool_free(TORC__POOL_NODE, d, sizeof *d);
    }
    if (stack != local) free(stack);
}

static void meta_of(const torc_tensor *t, torc__meta *m) {
    m->dtype = t->dtype;
    m->ndim = t->ndim;
    memcpy(m->shape, t->shape, sizeof m->shape);
    memcpy(m->stride, t->stride, sizeof m->stride);
    m->offset = t->offset;
    m->device = t->device;
}

static void set_edge(torc_node *n, int i, const torc_tensor *t) {
    if (!t || !(refresh((torc_tensor *)t), t->requires_grad)) return;
    if (t->grad_fn) n->next[i].fn = node_retain(t->grad_fn);
    else n->next[i].leaf = torc_retain((torc_tensor *)t);
}

// Saves a detached view of t with its storage version: an input of n (named in the version
// error by the grad_fn its tensor has then, as PyTorch) or n's output (named by n).
static bool save(torc_node *n, int slot, const torc_tensor *t, bool output) {
    torc_tensor *v = torc__make_view(t, t->ndim, t->shape, t->stride, t->offset);
    if (!v) return false;
    torc__ident *id = output ? NULL : ident_of((torc_tensor *)t);
    if (!output && !id) {
        torc_release(v);
        return false;
    }
    n->saved[slot] = (torc__saved){v, atomic_load(&t->storage->version), output ? n->name : NULL, id};
    n->has_saved = true;
    return true;
}

// Makes n t's grad_fn. retain_grad follows t to its new grad_fn, as PyTorch moves the hook.
static void attach(torc_tensor *t, torc_node *n) {
    torc_node *old = t->grad_fn;
    meta_of(t, &n->out);
    if (old && old->retained == t) old->retained = NULL;
    if (t->retains_grad) n->retained = t;
    t->grad_fn = n;
    t->requires_grad = true;
    t->output_nr = 0;
    node_release(old);
}

// Fails the hook: releases out and the half-built node.
static torc_tensor *hook_fail(torc_tensor *out, torc_node *n) {
    node_release(n);
    torc_release(out);
    return NULL;
}

torc_tensor *torc__autograd_record(torc_tensor *out, torc_opcode code, int n_in, const torc_tensor *const *inputs,
                                   const torc_op_params *params) {
    return torc__autograd_record_aux(out, code, n_in, inputs, params, 0, NULL);
}

torc_tensor *torc__autograd_record_aux(torc_tensor *out, torc_opcode code, int n_in, const torc_tensor *const *inputs,
                                       const torc_op_params *params, int n_aux, const torc_tensor *const *aux) {
    if (!out || !torc__any_requires_grad(n_in, inputs)) return out;
    const torc__grad_rule *r = torc__grad_rule_for((int)code);
    if (!r || !r->fn || !torc_dtype_is_floating(out->dtype)) return out;
    torc_node *n = node_new((int)code, torc__grad_name((int)code, n_in, inputs, out, params), n_in);
    if (!n) return hook_fail(out, NULL);
    if (params) n->params = *params;
    for (int i = 0; i < n_in; i++) {
        if (!inputs[i]) continue;
        meta_of(inputs[i], &n->in[i]);
        set_edge(n, i, inputs[i]);
        if (i < TORC__SAVED_OUT && (r->save & TORC__SAVE_IN(i)) && !save(n, i, inputs[i], false))
            return hook_fail(out, n);
    }
    if ((r->save & TORC__SAVE_OUT) && !save(n, TORC__SAVED_OUT, out, true)) return hook_fail(out, n);
    for (int i = 0; i < n_aux && TORC__SAVED_AUX + i < TORC__SAVED_SLOTS; i++) {
        if (!save(n, TORC__SAVED_AUX + i, aux[i], true)) return hook_fail(out, n);
        n->saved[TORC__SAVED_AUX + i].producer = NULL;  // no grad_fn: PyTorch's version error names none
    }
    attach(out, n);
    return out;
}

torc_tensor *torc__autograd_unary(torc_tensor *out, const torc_tensor *in, const char *name) {
    if (!out || !torc__any_requires_grad(1, &in) || !torc_dtype_is_floating(out->dtype)) return out;
    torc_node *n = node_new(TORC__GRAD_COPY, name, 1);
    if (!n) return hook_fail(out, NULL);
    meta_of(in, &n->in[0]);
    set_edge(n, 0, in);
    attach(out, n);
    return out;
}

// ---- views ----
// Every view keeps its base (the tensor at the root of a chain of views, as PyTorch's _base)
// and the storage version its grad_fn was derived at. A write into the storage, through the
// view, its base or another view of it, changes the version; the view's grad_fn is then out of
// date and is re-derived from the base's history the next time it is looked at (refresh).
static int view_code(const char *name) {
    static const struct { const char *name; int code; } k[] = {
        {"ViewBackward0", TORC__GRAD_VIEW},           {"UnsafeViewBackward0", TORC__GRAD_VIEW},
        {"SqueezeBackward0", TORC__GRAD_VIEW},        {"SqueezeBackward1", TORC__GRAD_VIEW},
        {"UnsqueezeBackward0", TORC__GRAD_VIEW},      {"TransposeBackward0", TORC__GRAD_TRANSPOSE},
        {"PermuteBackward0", TORC__GRAD_PERMUTE},     {"SelectBackward0", TORC__GRAD_SELECT},
        {"SliceBackward0", TORC__GRAD_SLICE},         {"ExpandBackward0", TORC__GRAD_EXPAND},
        {"AsStridedBackward0", TORC__GRAD_AS_STRIDED},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(k[i].name, name)) return k[i].code;
    return TORC__GRAD_AS_STRIDED;  // any other view: the general scatter is always right
}

torc_tensor *torc__autograd_view(torc_tensor *view, torc_tensor *base, const char *name, int nargs,
                                 const int64_t *args) {
    if (!view) return NULL;
    view->view_base = torc_retain(base->view_base ? base->view_base : base);
    view->view_no_grad = !torc_is_grad_enabled() ? "" : base->view_no_grad ? name : NULL;
    view->view_version = atomic_load(&view->storage->version);
    const torc_tensor *b = base;
    if (!torc__any_requires_grad(1, &b)) return view;
    if (nargs < 0 || nargs > TORC_MAX_DIMS + 2) {
        torc_release(view);
        return TORC_FAIL_NULL(TORC_ERR_RUNTIME, "%s: too many view arguments (%d)", name, nargs);
    }
    torc_node *n = node_new(view_code(name), name, 1);
    if (!n) return hook_fail(view, NULL);
    meta_of(base, &n->in[0]);
    set_edge(n, 0, base);
    n->nargs = nargs;
    if (nargs) memcpy(n->args, args, (size_t)nargs * sizeof *args);
    attach(view, n);
    return view;
}

// PyTorch's VariableHooks::grad_fn: a view whose storage changed since its grad_fn was derived
// reads its values out of its base's (possibly rebased) history, so its grad_fn becomes an
// AsStridedBackward0 of the base. Views made under no_grad keep none (PyTorch refuses to use
// them after such a write; torc leaves them as detached tensors). False on OOM (t unchanged).
static bool refresh(torc_tensor *t) {
    torc_tensor *b = t->view_base;
    if (!b || t->view_no_grad) return true;
    const uint64_t v = atomic_load(&t->storage->version);
    if (v == t->view_version || (!t->grad_fn && !b->requires_grad)) return true;
    torc_node *n = node_new(TORC__GRAD_AS_STRIDED, "AsStridedBackward0", 1);
    if (!n) return false;
    meta_of(b, &n->in[0]);
    set_edge(n, 0, b);  // b is never a view: no recursion
    attach(t, n);
    t->view_version = v;
    return true;
}

// How PyTorch's messages name a grad_fn: "MulBackward0" -> "Mul", "SumBackward1" -> "Sum1",
// and the nodes torch writes by hand by their C++ names.
static void short_name(const char *name, char *buf, size_t size) {
    const char *b = strstr(name, "Backward");
    if (!strcmp(name, "CopySlices") || !strcmp(name, "CopyBackwards")) snprintf(buf, size, "torch::autograd::%s", name);
    else if (b) snprintf(buf, size, "%.*s%s", (int)(b - name), name, strcmp(b + 8, "0") ? b + 8 : "");
    else snprintf(buf, size, "%s", name);
}

// ---- in-place ops ----
// The node kind and grad_fn name of an in-place op (torch's names for the in-place forms).
static int inplace_node_code(torc_opcode code) {
    switch ((int)code) {
    case TORC_OP_COPY: return TORC__GRAD_COPY_INTO;
    case TORC_OP_FILL:
    case TORC_OP_RAND_UNIFORM:
    case TORC_OP_RAND_NORMAL: return TORC__GRAD_OVERWRITE;
    default: return (int)code;
    }
}
static const char *inplace_name(torc_opcode code, int n_in, const torc_tensor *const *inputs,
                                const torc_op_params *params) {
    switch ((int)code) {
    case TORC_OP_RAND_UNIFORM: return "UniformBackward0";
    case TORC_OP_RAND_NORMAL: return "NormalBackward0";
    default: return torc__grad_name(inplace_node_code(code), n_in, inputs, inputs[0], params);
    }
}

// Whether the backward needs self's value from before the write, which the write destroys:
// PyTorch saves a copy of self then. mul_ and div_ use it only for the other operand's grad.
static bool needs_old_self(const torc__grad_rule *r, torc_opcode code, bool others_require_grad) {
    if (!(r->save & TORC__SAVE_IN(0))) return false;
    return code == TORC_OP_MUL || code == TORC_OP_DIV ? others_require_grad : true;
}

torc_status torc__inplace_begin(torc_tensor *self, torc_opcode code, int n_in, const torc_tensor *const *inputs,
                                const torc_op_params *params, const char *name, torc_node **rec) {
    *rec = NULL;
    if (!torc_is_grad_enabled()) return TORC_OK;
    for (int i = 0; i < n_in; i++)
        if (inputs[i] && !refresh((torc_tensor *)inputs[i])) return torc_last_status();
    torc_tensor *base = self->view_base;
    bool others = false;
    for (int i = 1; i < n_in; i++) others |= inputs[i] && inputs[i]->requires_grad;
    if (!others && !self->requires_grad && !(base && base->requires_grad)) return TORC_OK;
    // PyTorch's check_inplace, in its order.
    if (base && self->view_no_grad) {
        char who[128] = "A view was";
        if (*self->view_no_grad) {
            char fn[64];
            short_name(self->view_no_grad, fn, sizeof fn);
            snprintf(who, sizeof who, "Output 0 of %s is a view of a view which was", fn);
        }
        return torc__error(TORC_ERR_AUTOGRAD, "%s created in no_grad mode and is being modified inplace with grad mode "
                                              "enabled. Given that this use case is ambiguous and error-prone, it is "
                                              "forbidden. You can clarify your code by moving both the view and the "
                                              "inplace either both inside the no_grad block (if you don't want the "
                                              "inplace to be tracked) or both outside (if you want the inplace to be "
                                              "tracked).", who);
    }
    // (A view requires grad when its base does, even one taken before the base was made a leaf.)
    if (base && (self->requires_grad || base->requires_grad) && !base->grad_fn)
        return torc__error(TORC_ERR_AUTOGRAD, "a view of a leaf Variable that requires grad is being used in an "
                                              "in-place operation.");
    if (self->requires_grad && !self->grad_fn)
        return torc__error(TORC_ERR_AUTOGRAD,
                           "a leaf Variable that requires grad is being used in an in-place operation.");
    if (!torc_dtype_is_floating(self->dtype)) return TORC_OK;  // an integer result never requires grad

    // The op's node: inputs as they are now, edges from their current history. On a view the
    // edges go on the base's CopySlices node instead, and self's own history is not used: the
    // base's gradient carries it.
    const int ncode = inplace_node_code(code);
    const torc__grad_rule *r = torc__grad_rule_for(ncode);
    torc_node *n = node_new(ncode, name ? name : inplace_name(code, n_in, inputs, params), n_in), *top = n;
    if (!n) return torc_last_status();
    if (params) n->params = *params;
    for (int i = 0; i < n_in; i++)
        if (inputs[i]) meta_of(inputs[i], &n->in[i]);
    bool ok = true;
    if (needs_old_self(r, code, others)) {
        torc_tensor *old = torc__copy_as(self, self->dtype);
        ok = old != NULL;
        if (ok) n->saved[0] = (torc__saved){old, atomic_load(&old->storage->version), NULL, NULL};
        n->has_saved |= ok;
    }
    for (int i = 1; ok && i < n_in && i < TORC__SAVED_OUT; i++)
        if (inputs[i] && (r->save & TORC__SAVE_IN(i))) ok = save(n, i, inputs[i], false);
    // The output is self after the write; end() sets the version it is saved at.
    if (ok && (r->save & TORC__SAVE_OUT)) ok = save(n, TORC__SAVED_OUT, self, true);
    if (ok && base) {
        top = node_new(TORC__GRAD_COPY_SLICES, "CopySlices", n_in);
        ok = top != NULL;
        if (ok) {
            top->inner = n;
            top->has_saved = n->has_saved;
            meta_of(base, &top->in[0]);
            set_edge(top, 0, base);
        }
    }
    if (!ok) {
        node_release(top ? top : n);
        return torc_last_status();
    }
    for (int i = base ? 1 : 0; i < n_in; i++) {
        top->in[i] = n->in[i];
        set_edge(top, i, inputs[i]);
    }
    *rec = top;
    return TORC_OK;
}

torc_status torc__inplace_end(torc_tensor *self, torc_node *rec, torc_status st) {
    if (!rec) return st;
    if (st) {
        node_release(rec);
        return st;
    }
    torc_node *n = rec->inner ? rec->inner : rec;
    torc__saved *out = &n->saved[TORC__SAVED_OUT];
    if (out->t) out->version = atomic_load(&self->storage->version);
    meta_of(self, &n->out);
    if (rec == n) {
        attach(self, rec);
        return TORC_OK;
    }
    // A view: the base's history now goes through the write (CopySlices), and the view reads
    // its new values out of the base (refresh: an OOM there is retried at the next look).
    attach(self->view_base, rec);
    refresh(self);
    return TORC_OK;
}

void torc__check_inplace(torc_tensor *t, torc_status *st) {
    if (!torc_is_grad_enabled() || !refresh(t)) return;
    if (t->requires_grad || (t->view_base && t->view_base->requires_grad))
        *st = torc__error(TORC_ERR_AUTOGRAD, "functions with out=... arguments don't support automatic "
                                             "differentiation, but one of the arguments requires grad.");
}

void torc__autograd_release(torc_tensor *t) {
    torc__ident *id = atomic_load(&t->ident);
    if (id) {
        id->name = t->grad_fn ? t->grad_fn->name : NULL;
        id->tensor = NULL;
        ident_release(id);
        atomic_store(&t->ident, NULL);
    }
    torc_release(t->grad);
    t->grad = NULL;
    if (t->grad_fn) {
        if (t->grad_fn->retained == t) t->grad_fn->retained = NULL;
        node_release(t->grad_fn);
        t->grad_fn = NULL;
    }
    torc_release(t->view_base);
    t->view_base = NULL;
}

// ---- tensor-level autograd state ----
torc_status torc_set_requires_grad(torc_tensor *t, bool requires_grad) {
    if (!t) return torc__null_arg("tensor is NULL");
    if (!refresh(t)) return torc_last_status();
    if (requires_grad && !torc_dtype_is_floating(t->dtype))
        return torc__error(TORC_ERR_AUTOGRAD, "only Tensors of floating point dtype can require gradients");
    if (!requires_grad && t->grad_fn)
        return torc__error(TORC_ERR_AUTOGRAD, "you can only change requires_grad flags of leaf variables. If you want "
                                              "to use a computed variable in a subgraph that doesn't require "
                                              "differentiation use var_no_grad = var.detach().");
    t->requires_grad = requires_grad;
    return TORC_OK;
}

// The accessors below look at a view's grad_fn as it is now (refresh), as PyTorch's do.
bool torc_requires_grad(const torc_tensor *t) { return t && (refresh((torc_tensor *)t), t->requires_grad); }
bool torc_is_leaf(const torc_tensor *t) { return t && (refresh((torc_tensor *)t), !t->grad_fn); }
const char *torc_grad_fn_name(const torc_tensor *t) {
    return t && (refresh((torc_tensor *)t), t->grad_fn) ? t->grad_fn->name : NULL;
}

torc_tensor *torc_grad(const torc_tensor *t) {
    if (!t || !t->grad) return NULL;
    return torc__register(torc_retain(t->grad));
}

torc_status torc_set_grad(torc_tensor *t, torc_tensor *grad) {
    if (!t) return torc__null_arg("tensor is NULL");
    if (grad) {
        if (grad->dtype != t->dtype)
            return torc__error(TORC_ERR_DTYPE, "assigned grad has data of a different type");
        if (grad->ndim != t->ndim || memcmp(grad->shape, t->shape, (size_t)t->ndim * sizeof *t->shape))
            return torc__error(TORC_ERR_SHAPE, "assigned grad has data of a different size");
        if (grad->device != t->device)
            return torc__error(TORC_ERR_INVALID_ARG, "assigned grad has data located on a different device");
        torc_retain(grad);
    }
    torc_release(t->grad);
    t->grad = grad;
    return TORC_OK;
}

torc_status torc_retain_grad(torc_tensor *t) {
    if (!t) return torc__null_arg("tensor is NULL");
    if (!refresh(t)) return torc_last_status();
    if (!t->requires_grad)
        return torc__error(TORC_ERR_AUTOGRAD, "can't retain_grad on Tensor that has requires_grad=False");
    if (!t->grad_fn) return TORC_OK;  // a leaf keeps its gradient anyway
    t->retains_grad = true;
    t->grad_fn->retained = t;
    return TORC_OK;
}

// ---- the engine ----
#define ENGINE_LOCAL 32
typedef struct engine {
    uint64_t run;
    bool accumulate;   // backward: write .grad; autograd.grad: capture into out[]
    bool keep_graph;
    int n_cap;
    torc_tensor *const *cap_in;
    torc_tensor **cap_out;
    torc_node **nodes;  // every node reached, children before parents
    int n_nodes, cap_nodes;
    torc_node **heap;   // ready nodes, highest seq first
    int n_heap, cap_heap;
    // first storage of nodes and heap, so a small graph's backward allocates nothing for them
    torc_node *nodes_local[ENGINE_LOCAL], *heap_local[ENGINE_LOCAL];
} engine;

// Grows *arr (which starts as local, a stack array of ENGINE_LOCAL entries) to hold need entries.
static bool grow(torc_node ***arr, int *cap, int need, torc_node **local) {
    if (need <= *cap) return true;
    if (!*arr) {
        *arr = local;
        *cap = ENGINE_LOCAL;
        if (need <= *cap) return true;
    }
    int nc = *cap * 2;
    while (nc < need) nc *= 2;
    torc_node **na = *arr == local ? malloc((size_t)nc * sizeof *na) : realloc(*arr, (size_t)nc * sizeof *na);
    if (!na) return false;
    if (*arr == local) memcpy(na, local, (size_t)*cap * sizeof *na);
    *arr = na;
    *cap = nc;
    return true;
}

static bool heap_push(engine *e, torc_node *n) {
    if (!grow(&e->heap, &e->cap_heap, e->n_heap + 1, e->heap_local)) return false;
    int i = e->n_heap++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (e->heap[p]->seq >= n->seq) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = n;
    return true;
}

static torc_node *heap_pop(engine *e) {
    torc_node *top = e->heap[0], *last = e->heap[--e->n_heap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= e->n_heap) break;
        if (c + 1 < e->n_heap && e->heap[c + 1]->seq > e->heap[c]->seq) c++;
        if (e->heap[c]->seq <= last->seq) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (e->n_heap) e->heap[i] = last;
    return top;
}

// Depth-first from root: appends every unvisited node, children before parents.
static torc_status collect(engine *e, torc_node *root) {
    if (root->run == e->run) return TORC_OK;
    typedef struct { torc_node *n; int i; } frame;
    frame local[64], *st = local;
    int depth = 0, cap = 64;
    torc_status status = TORC_OK;
    root->run = e->run;
    st[depth++] = (frame){root, 0};
    while (depth > 0) {
        frame *f = &st[depth - 1];
        if (f->i < f->n->n_in) {
            torc_node *c = f->n->next[f->i++].fn;
            if (!c || c->run == e->run) continue;
            c->run = e->run;
            if (depth == cap) {
                frame *ns = malloc((size_t)cap * 2 * sizeof *ns);
                if (!ns) {
                    status = torc__error(TORC_ERR_OOM, "out of host memory walking the autograd graph");
                    break;
                }
                memcpy(ns, st, (size_t)depth * sizeof *ns);
                if (st != local) free(st);
                st = ns;
                cap *= 2;
            }
            st[depth++] = (frame){c, 0};
            continue;
        }
        torc_node *n = f->n;
        depth--;
        n->deps = 0;
        n->needed = false;
        n->grad = NULL;
        if (!grow(&e->nodes, &e->cap_nodes, e->n_nodes + 1, e->nodes_local)) {
            status = torc__error(TORC_ERR_OOM, "out of host memory walking the autograd graph");
            break;
        }
        e->nodes[e->n_nodes++] = n;
    }
    if (st != local) free(st);
    return status;
}

static int cap_index_leaf(const engine *e, const torc_tensor *leaf, int from) {
    for (int j = from; j < e->n_cap; j++)
        if (e->cap_in[j] == leaf) return j;
    return -1;
}

static bool node_is_target(const engine *e, const torc_node *n) {
    for (int j = 0; j < e->n_cap; j++)
        if (e->cap_in[j]->grad_fn == n) return true;
    return false;
}

static bool edge_needed(const engine *e, const torc__edge *ed) {
    if (ed->fn) return ed->fn->needed;
    if (ed->leaf) return e->accumulate || cap_index_leaf(e, ed->leaf, 0) >= 0;
    return false;
}

// a + b as a new reference owned by the caller (not by any scope), under no_grad.
static torc_tensor *add_owned(const torc_tensor *a, const torc_tensor *b) {
    torc_scope_push();
    torc_tensor *r = torc_retain(torc_add(a, b));
    torc_scope_pop();
    return r;
}

// Adds g into *slot (an owned reference, NULL when empty).
static torc_status accumulate_into(torc_tensor **slot, torc_tensor *g) {
    if (!*slot) {
        *slot = torc_retain(g);
        return TORC_OK;
    }
    torc_tensor *s = add_owned(*slot, g);
    if (!s) return torc_last_status();
    torc_release(*slot);
    *slot = s;
    return TORC_OK;
}

// A gradient a leaf (or a retain_grad tensor) can own: g itself when nothing else shares it
// and it is a dense tensor of exactly its storage, else a contiguous copy.
static torc_tensor *own_grad(torc_tensor *g, torc_dtype dtype) {
    if (g->dtype == dtype && atomic_load(&g->refcount) == 1 && atomic_load(&g->storage->refcount) == 1 &&
        g->offset == 0 && torc_is_contiguous(g) && g->storage->nbytes == torc_nbytes(g))
        return torc_retain(g);
    return torc__copy_as(g, dtype);
}

// The thread's leaf-gradient hook (torc__set_leaf_grad_hook): DDP's signal that a bucket may be ready.
static _Thread_local torc__leaf_grad_hook tls_leaf_hook;
static _Thread_local void *tls_leaf_hook_ctx;
void torc__set_leaf_grad_hook(torc__leaf_grad_hook hook, void *ctx) {
    tls_leaf_hook = hook;
    tls_leaf_hook_ctx = ctx;
}

// .grad accumulation (AccumulateGrad): the first gradient becomes .grad (tagged as gradient
// memory for leaves), later ones are added in place so .grad keeps its identity.
static torc_status accumulate_grad(torc_tensor *t, torc_tensor *g, bool leaf) {
    torc_status st = TORC_OK;
    if (!t->grad) {
        torc_tensor *own = own_grad(g, t->dtype);
        if (!own) return torc_last_status();
        if (leaf) {  // a gradient from its creation in this backward, not an activation until now
            torc__mem_backward_retagged(own->storage);
            torc_set_mem_tag(own, TORC_MEM_GRADIENT);
        }
        t->grad = own;
    } else {
        torc_scope_push();
        st = torc_add_(t->grad, g);
        torc_scope_pop();
    }
    if (!st && leaf && tls_leaf_hook) st = tls_leaf_hook(t, tls_leaf_hook_ctx);
    return st;
}

// Delivers an input gradient along edge ed (g may be NULL: nothing flows, deps still drop).
static torc_status deliver(engine *e, const torc__edge *ed, torc_tensor *g) {
    if (ed->fn) {
        if (!ed->fn->needed) return TORC_OK;
        torc_status st = g ? accumulate_into(&ed->fn->grad, g) : TORC_OK;
        if (st) return st;
        if (--ed->fn->deps == 0 && !heap_push(e, ed->fn))
            return torc__error(TORC_ERR_OOM, "out of host memory running backward");
        return TORC_OK;
    }
    if (!ed->leaf || !g) return TORC_OK;
    if (e->accumulate) return accumulate_grad(ed->leaf, g, true);
    for (int j = cap_index_leaf(e, ed->leaf, 0); j >= 0; j = cap_index_leaf(e, ed->leaf, j + 1)) {
        torc_status st = accumulate_into(&e->cap_out[j], g);
        if (st) return st;
    }
    return TORC_OK;
}

// "torch.FloatTensor" for the version error (PyTorch's legacy type names).
static const char *legacy_type(const torc_tensor *t) {
    static const char *const cpu[TORC_DTYPE_COUNT] = {
        "torch.DoubleTensor", "torch.FloatTensor",  "torch.HalfTensor",  "CPUBFloat16Type",
        "CPUFloat8_e4m3fnType", "CPUFloat8_e5m2Type", "torch.LongTensor", "torch.IntTensor",
        "torch.ShortTensor",  "torch.CharTensor",   "torch.ByteTensor",  "torch.BoolTensor"};
    static const char *const cuda[TORC_DTYPE_COUNT] = {
        "torch.cuda.DoubleTensor", "torch.cuda.FloatTensor", "torch.cuda.HalfTensor", "torch.cuda.BFloat16Tensor",
        "CUDAFloat8_e4m3fnType", "CUDAFloat8_e5m2Type", "torch.cuda.LongTensor", "torch.cuda.IntTensor",
        "torch.cuda.ShortTensor", "torch.cuda.CharTensor", "torch.cuda.ByteTensor", "torch.cuda.BoolTensor"};
    const bool is_cuda = !strncmp(t->device->name, "cuda", 4);
    return (unsigned)t->dtype < TORC_DTYPE_COUNT ? (is_cuda ? cuda : cpu)[t->dtype] : "?";
}

// The grad_fn name a version error gives for a saved tensor: for a saved input, the grad_fn its
// tensor has now (an in-place op may have replaced it); for a saved output, its node's.
static const char *saved_producer(const torc__saved *s) {
    if (!s->ident) return s->producer;
    torc_tensor *t = s->ident->tensor;
    if (!t) return s->ident->name;
    refresh(t);
    return t->grad_fn ? t->grad_fn->name : NULL;
}

// ", which is output 0 of Mul," as PyTorch writes it (nothing for a tensor without grad_fn).
static void producer_clause(const char *name, char *buf, size_t size) {
    char fn[64];
    if (!name) buf[0] = 0;
    else short_name(name, fn, sizeof fn), snprintf(buf, size, ", which is output 0 of %s,", fn);
}

static torc_status check_saved(const torc_node *n) {
    if (n->released && n->has_saved)
        return torc__error(TORC_ERR_AUTOGRAD,
                           "Trying to backward through the graph a second time (or directly access saved tensors "
                           "after they have already been freed). Saved intermediate values of the graph are freed "
                           "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
                           "backward through the graph a second time or if you need to access saved tensors after "
                           "calling backward.");
    for (const torc_node *k = n; k; k = k->inner)  // a CopySlices node: the op it holds saved them
        for (int i = 0; i < TORC__SAVED_SLOTS; i++) {
            const torc__saved *s = &k->saved[i];
            if (!s->t) continue;
            const uint64_t now = atomic_load(&s->t->storage->version);
            if (now == s->version) continue;
            char shape[TORC_SHAPE_STR_MAX], which[96];
            producer_clause(saved_producer(s), which, sizeof which);
            return torc__error(TORC_ERR_AUTOGRAD,
                               "one of the variables needed for gradient computation has been modified by an inplace "
                               "operation: [%s %s]%s is at version %llu; expected version %llu instead. Hint: enable "
                               "anomaly detection to find the operation that failed to compute its gradient, with "
                               "torch.autograd.set_detect_anomaly(True, check_nan=False).",
                               legacy_type(s->t), torc__shape_str(s->t->ndim, s->t->shape, shape, sizeof shape),
                               which, (unsigned long long)now, (unsigned long long)s->version);
        }
    return TORC_OK;
}

torc_tensor *torc__fit_grad(const torc_node *n, int i, torc_tensor *g) {
    const torc__meta *m = &n->in[i];
    bool same = g->ndim == m->ndim && !memcmp(g->shape, m->shape, (size_t)m->ndim * sizeof *m->shape);
    if (!same) {
        int nd;
        int64_t bs[TORC_MAX_DIMS];
        bool ok = !torc__broadcast_shapes(g->ndim, g->shape, m->ndim, m->shape, &nd, bs) && nd == g->ndim &&
                  !memcmp(bs, g->shape, (size_t)nd * sizeof *bs);
        if (!ok) {
            char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
            return TORC_FAIL_NULL(TORC_ERR_RUNTIME,
                                  "Function %s returned an invalid gradient at index %d - got %s but expected shape "
                                  "compatible with %s",
                                  n->name, i, torc__shape_str(g->ndim, g->shape, b1, sizeof b1),
                                  torc__shape_str(m->ndim, m->shape, b2, sizeof b2));
        }
        g = torc__sum_to(g, m->ndim, m->shape);
        if (!g) return NULL;
    }
    if (g->dtype != m->dtype && !(g = torc_to_dtype(g, m->dtype))) return NULL;
    if (g->device != m->device && !(g = torc_to_device(g, m->device))) return NULL;
    return g;
}

// A slice's gradient added in place into the gradient its base's node has gathered so far, where
// the engine alone holds that one (a dense tensor of its own storage, of the base's dtype and
// device): SliceBackward's zeros of the base's shape, the copy into them and the add of two whole
// gradients become one add over the slice. The GPT's q, k and v are three slices of one (B, T, 3C)
// tensor: their gradients took three fills, three copies and two adds of all 3C columns. Returns
// false (nothing done) where that does not apply; *st the status where it did.
static bool slice_in_place(const torc_node *n, torc_tensor *G, torc_status *st) {
    const torc__edge *ed = &n->next[0];
    if (n->code != TORC__GRAD_SLICE || !ed->fn || !ed->fn->needed || !ed->fn->grad) return false;
    torc_tensor *acc = ed->fn->grad;
    const torc__meta *m = &n->in[0];
    if (acc->dtype != m->dtype || G->dtype != m->dtype || acc->device != m->device || G->device != m->device ||
        atomic_load(&acc->refcount) != 1 || atomic_load(&acc->storage->refcount) != 1 || acc->offset != 0 ||
        !torc_is_contiguous(acc) || acc->ndim != m->ndim || memcmp(acc->shape, m->shape, (size_t)m->ndim * sizeof *m->shape))
        return false;
    torc_scope_push();
    torc_no_grad_begin();
    torc_tensor *part = torc_slice(acc, (int)n->args[0], n->args[1], n->args[2], n->args[3]);
    *st = part ? torc_add_(part, G) : torc_last_status();
    torc_no_grad_end();
    torc_scope_pop();
    return true;
}

// Runs one node: hands its gradient to captures and retain_grad, calls its formula and sends
// the input gradients along its edges.
static torc_status run_node(engine *e, torc_node *n, torc_tensor *G) {
    torc_status st = TORC_OK;
    if (G) {
        for (int j = 0; j < e->n_cap; j++)
            if (e->cap_in[j]->grad_fn == n && (st = accumulate_into(&e->cap_out[j], G))) return st;
        // retain_grad fills .grad whenever the node runs, in autograd.grad too (PyTorch 2.x runs
        // its retains_grad hooks with the node's tensor pre-hooks, also for a captured input).
        if (n->retained && (st = accumulate_grad(n->retained, G, false))) return st;
    }
    bool need_local[TORC__NODE_INLINE], *need = n->n_in <= TORC__NODE_INLINE ? need_local : calloc((size_t)n->n_in, 1);
    torc_tensor *gin_local[TORC__NODE_INLINE] = {NULL},
                **gin = n->n_in <= TORC__NODE_INLINE ? gin_local : calloc((size_t)n->n_in, sizeof *gin);
    if (!need || !gin) {
        if (need != need_local) free(need);
        if (gin != gin_local) free(gin);
        return torc__error(TORC_ERR_OOM, "out of host memory running backward");
    }
    bool any = false;
    for (int i = 0; i < n->n_in; i++) any |= need[i] = edge_needed(e, &n->next[i]);
    if (G && any && !(st = check_saved(n)) && slice_in_place(n, G, &st)) {
        gin[0] = NULL;  // added already: the delivery below only counts the edge
    } else if (G && any && !st) {
        const torc__grad_rule *r = torc__grad_rule_for(n->code);
        torc_scope_push();
        torc_no_grad_begin();
        torc_tensor *raw_local[TORC__NODE_INLINE] = {NULL},
                    **raw = n->n_in <= TORC__NODE_INLINE ? raw_local : calloc((size_t)n->n_in, sizeof *raw);
        if (!raw) st = torc__error(TORC_ERR_OOM, "out of host memory running backward");
        else st = r->fn(n, G, need, raw);
        for (int i = 0; !st && i < n->n_in; i++) {
            if (!need[i] || !raw[i]) continue;
            torc_tensor *f = torc__fit_grad(n, i, raw[i]);
            if (!f) st = torc_last_status();
            else gin[i] = torc_retain(f);
        }
        if (raw != raw_local) free(raw);
        torc_no_grad_end();
        torc_scope_pop();
    }
    if (!e->keep_graph) {
        release_saved(n);
        n->released = true;
    }
    for (int i = 0; !st && i < n->n_in; i++)
        if (need[i]) st = deliver(e, &n->next[i], gin[i]);
    for (int i = 0; i < n->n_in; i++) torc_release(gin[i]);
    if (need != need_local) free(need);
    if (gin != gin_local) free(gin);
    return st;
}

// The shared body of torc_backward and torc_autograd_grad.
static torc_status run_engine(engine *e, int n_roots, torc_tensor *const *roots, torc_tensor *const *grads) {
    torc_status st = TORC_OK;
    e->run = atomic_fetch_add(&g_run, 1) + 1;
    const torc_phase saved_phase = torc__phase();
    torc__set_phase(TORC_PHASE_BACKWARD);
    torc_tensor *rg_local[4] = {NULL};  // the roots' gradients (owned)
    torc_tensor **rg = n_roots <= 4 ? rg_local : calloc((size_t)n_roots, sizeof *rg);
    if (!rg) st = torc__error(TORC_ERR_OOM, "out of host memory running backward");

    // Root gradients: given ones are checked and cast, missing ones are ones for scalars.
    for (int i = 0; !st && i < n_roots; i++) {
        torc_tensor *t = roots[i];
        if (!t) st = torc__null_arg("output %d is NULL", i);
        else if (!refresh(t)) st = torc_last_status();
        else if (!t->requires_grad)
            st = torc__error(TORC_ERR_AUTOGRAD, "element %d of tensors does not require grad and does not have a grad_fn", i);
        else if (grads && grads[i]) {
            torc_tensor *g = grads[i];
            if (g->ndim != t->ndim || memcmp(g->shape, t->shape, (size_t)t->ndim * sizeof *t->shape)) {
                char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
                st = torc__error(TORC_ERR_SHAPE, "Mismatch in shape: grad_output[%d] has a shape of torch.Size(%s) and "
                                                 "output[%d] has a shape of torch.Size(%s).",
                                 i, torc__shape_str(g->ndim, g->shape, b1, sizeof b1), i,
                                 torc__shape_str(t->ndim, t->shape, b2, sizeof b2));
            } else {
                torc_scope_push();
                torc_tensor *c = torc_to_dtype(g, t->dtype);
                if (c && c->device != t->device) c = torc_to_device(c, t->device);
                rg[i] = torc_retain(c);
                torc_scope_pop();
                if (!rg[i]) st = torc_last_status();
            }
        } else if (torc_numel(t) != 1) {
            st = torc__error(TORC_ERR_AUTOGRAD, "grad can be implicitly created only for scalar outputs");
        } else {
            torc_scope_push();
            rg[i] = torc_retain(torc_ones_like(t));
            torc_scope_pop();
            if (!rg[i]) st = torc_last_status();
        }
    }
    for (int i = 0; !st && i < n_roots; i++)
        if (roots[i]->grad_fn) st = collect(e, roots[i]->grad_fn);
    // Which nodes lead to a wanted gradient (children come first in e->nodes).
    for (int k = 0; !st && k < e->n_nodes; k++) {
        torc_node *n = e->nodes[k];
        n->needed = e->accumulate || node_is_target(e, n);
        for (int i = 0; !n->needed && i < n->n_in; i++) n->needed = edge_needed(e, &n->next[i]);
    }
    for (int k = 0; !st && k < e->n_nodes; k++) {
        torc_node *n = e->nodes[k];
        if (!n->needed) continue;
        for (int i = 0; i < n->n_in; i++)
            if (n->next[i].fn && n->next[i].fn->needed) n->next[i].fn->deps++;
    }
    for (int i = 0; !st && i < n_roots; i++) {
        torc_tensor *t = roots[i];
        if (t->grad_fn) {
            if (t->grad_fn->needed) st = accumulate_into(&t->grad_fn->grad, rg[i]);
        } else {
            torc__edge leaf = {NULL, t};
            st = deliver(e, &leaf, rg[i]);
        }
    }
    for (int k = 0; !st && k < e->n_nodes; k++)
        if (e->nodes[k]->needed && e->nodes[k]->deps == 0 && !heap_push(e, e->nodes[k]))
            st = torc__error(TORC_ERR_OOM, "out of host memory running backward");
    while (!st && e->n_heap > 0) {
        torc_node *n = heap_pop(e);
        torc_tensor *G = n->grad;
        n->grad = NULL;
        st = run_node(e, n, G);
        torc_release(G);
    }
    // Clean up (also after an error): gradients still buffered in nodes.
    for (int k = 0; k < e->n_nodes; k++) {
        torc_release(e->nodes[k]->grad);
        e->nodes[k]->grad = NULL;
    }
    if (rg)
        for (int i = 0; i < n_roots; i++) torc_release(rg[i]);
    if (rg != rg_local) free(rg);
    if (e->nodes != e->nodes_local) free(e->nodes);
    if (e->heap != e->heap_local) free(e->heap);
    torc__set_phase(saved_phase);
    return st;
}

torc_status torc_backward(torc_tensor *t, const torc_tensor *gradient, bool retain_graph) {
    if (!t) return torc__null_arg("tensor is NULL");
    engine e = {.accumulate = true, .keep_graph = retain_graph};
    torc_tensor *g = (torc_tensor *)gradient;
    // The leaves' new .grad count as gradient memory from their allocation: the activation peak
    // is recomputed without them (a weight's D x D gradient is not an activation).
    torc__mem_record rec = {0};
    const bool recording = torc__mem_backward_begin(&rec);
    const torc_status st = run_engine(&e, 1, &t, &g);
    if (recording) torc__mem_backward_end(&rec);
    torc__mem_record_free(&rec);
    return st;
}

torc_status torc_autograd_grad(int n_outputs, torc_tensor *const *outputs, torc_tensor *const *grad_outputs,
                               int n_inputs, torc_tensor *const *inputs, bool retain_graph, bool allow_unused,
                               torc_tensor **grads) {
    if (n_outputs <= 0 || !outputs || n_inputs <= 0 || !inputs || !grads)
        return torc__error(TORC_ERR_INVALID_ARG, "torc_autograd_grad: expected outputs, inputs and a grads array");
    for (int j = 0; j < n_inputs; j++) {
        grads[j] = NULL;
        if (!inputs[j]) return torc__null_arg("input %d is NULL", j);
        if (!refresh(inputs[j])) return torc_last_status();
        if (!inputs[j]->requires_grad)
            return torc__error(TORC_ERR_AUTOGRAD, "One of the differentiated Tensors does not require grad");
    }
    engine e = {.accumulate = false, .keep_graph = retain_graph, .n_cap = n_inputs, .cap_in = inputs, .cap_out = grads};
    torc_status st = run_engine(&e, n_outputs, outputs, grad_outputs);
    for (int j = 0; !st && j < n_inputs; j++)
        if (!grads[j] && !allow_unused)
            st = torc__error(TORC_ERR_AUTOGRAD, "The differentiated Tensor at index %d appears to not have been used "
                                                "in the graph. Set allow_unused=True if this is the desired behavior.", j);
    for (int j = 0; j < n_inputs; j++) {
        if (st) {
            torc_release(grads[j]);
            grads[j] = NULL;
        } else if (grads[j]) {
            torc__register(grads[j]);
        }
    }
    return st;
}
