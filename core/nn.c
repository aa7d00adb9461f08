// core/nn.c — parameters, initialisers and the small module layer: a tree of named parameters
// and children with a forward function; Linear, ReLU, GELU, Sequential and the course's Cruncher.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

// ---- parameters and initialisers ----
torc_tensor *torc_parameter(torc_tensor *t) {
    if (!t) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (!torc_dtype_is_floating(t->dtype))
        return TORC_FAIL_NULL(TORC_ERR_AUTOGRAD, "only Tensors of floating point dtype can require gradients");
    // Sharing is only exact for accounting when t covers its whole storage.
    const bool exact = t->offset == 0 && torc_is_contiguous(t) && t->storage->nbytes == torc_nbytes(t);
    torc_tensor *p = exact ? torc__make_view(t, t->ndim, t->shape, t->stride, 0) : torc__copy_as(t, t->dtype);
    if (!p) return NULL;
    p->requires_grad = true;
    torc_set_mem_tag(p, TORC_MEM_PARAMETER);
    return torc__register(p);
}

torc_status torc_init_normal_fan_in_(torc_tensor *t, int64_t fan_in, torc_generator *gen) {
    if (!t) return torc__null_arg("tensor is NULL");
    if (fan_in <= 0) return torc__error(TORC_ERR_INVALID_ARG, "init_normal_fan_in_: fan_in must be positive, got %lld",
                                        (long long)fan_in);
    torc_no_grad_begin();
    torc_status st = torc_normal_(t, 0.0, 1.0 / sqrt((double)fan_in), gen);
    torc_no_grad_end();
    return st;
}

// ---- modules ----
typedef struct named_param {
    char *name;
    torc_tensor *t;
} named_param;

typedef struct named_child {
    char *name;
    torc_module *m;
} named_child;

struct torc_module {
    char *type;
    torc_module_forward_fn forward;
    void *user;
    void (*free_user)(void *);
    named_param *params;
    int n_params, cap_params;
    named_child *children;
    int n_children, cap_children;
    bool has_parent;
    // every parameter of the tree with its path, rebuilt when any tree changed (g_generation)
    uint64_t flat_gen;
    named_param *flat;
    int n_flat;
};

static _Atomic uint64_t g_generation = 1;

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

torc_module *torc_module_new(const char *type_name, torc_module_forward_fn forward, void *user,
                             void (*free_user)(void *)) {
    torc_module *m = calloc(1, sizeof *m);
    if (m) m->type = dup_str(type_name ? type_name : "Module");
    if (!m || !m->type) {
        free(m);
        if (free_user) free_user(user);
        return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory for a module");
    }
    m->forward = forward;
    m->user = user;
    m->free_user = free_user;
    return m;
}

static void flat_clear(torc_module *m) {
    for (int i = 0; i < m->n_flat; i++) free(m->flat[i].name);
    free(m->flat);
    m->flat = NULL;
    m->n_flat = 0;
    m->flat_gen = 0;
}

void torc_module_free(torc_module *m) {
    if (!m) return;
    for (int i = 0; i < m->n_params; i++) {
        free(m->params[i].name);
        torc_release(m->params[i].t);
    }
    for (int i = 0; i < m->n_children; i++) {
        free(m->children[i].name);
        torc_module_free(m->children[i].m);
    }
    free(m->params);
    free(m->children);
    flat_clear(m);
    if (m->free_user) m->free_user(m->user);
    free(m->type);
    free(m);
}

static bool name_ok(const torc_module *m, const char *name) {
    if (!name || !*name || strchr(name, '.')) {
        torc__error(TORC_ERR_INVALID_ARG, "module name can't contain \".\", got: %s", name ? name : "(null)");
        return false;
    }
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name)) goto taken;
    for (int i = 0; i < m->n_children; i++)
        if (!strcmp(m->children[i].name, name)) goto taken;
    return true;
taken:
    torc__error(TORC_ERR_INVALID_ARG, "attribute '%s' already exists", name);
    return false;
}

static bool grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 4;
    void *na = realloc(*arr, (size_t)nc * elem);
    if (!na) return false;
    *arr = na;
    *cap = nc;
    return true;
}

torc_status torc_module_register_parameter(torc_module *m, const char *name, torc_tensor *param) {
    if (!m || !param) return torc__null_arg("torc_module_register_parameter: NULL argument");
    if (!name_ok(m, name)) return torc_last_status();
    char *nm = dup_str(name);
    if (!nm || !grow((void **)&m->params, &m->cap_params, m->n_params + 1, sizeof *m->params)) {
        free(nm);
        return torc__error(TORC_ERR_OOM, "out of host memory registering a parameter");
    }
    m->params[m->n_params++] = (named_param){nm, torc_retain(param)};
    atomic_fetch_add(&g_generation, 1);
    return TORC_OK;
}

torc_status torc_module_register_module(torc_module *m, const char *name, torc_module *child) {
    if (!m || !child) {
        torc_module_free(child);
        return torc__null_arg("torc_module_register_module: NULL argument");
    }
    if (child->has_parent || child == m)
        return torc__error(TORC_ERR_INVALID_ARG, "module '%s' already belongs to a parent module", name ? name : "");
    if (!name_ok(m, name)) {
        torc_module_free(child);
        return torc_last_status();
    }
    char *nm = dup_str(name);
    if (!nm || !grow((void **)&m->children, &m->cap_children, m->n_children + 1, sizeof *m->children)) {
        free(nm);
        torc_module_free(child);
        return torc__error(TORC_ERR_OOM, "out of host memory registering a module");
    }
    child->has_parent = true;
    m->children[m->n_children++] = (named_child){nm, child};
    atomic_fetch_add(&g_generation, 1);
    return TORC_OK;
}

torc_tensor *torc_module_forward(torc_module *m, torc_tensor *x) {
    if (!m || !x) return TORC_NULL_ARG_FAIL("torc_module_forward: NULL argument");
    if (!m->forward) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "module %s has no forward", m->type);
    torc_scope_push();
    torc_tensor *r = torc_keep(m->forward(m, x, m->user));
    torc_scope_pop();
    return r;
}

const char *torc_module_type(const torc_module *m) { return m ? m->type : NULL; }

torc_module *torc_module_child(const torc_module *m, const char *name) {
    if (!m || !name) return NULL;
    for (int i = 0; i < m->n_children; i++)
        if (!strcmp(m->children[i].name, name)) return m->children[i].m;
    return NULL;
}

// Appends m's parameters (own first, then each child's) to out with their paths.
static bool flatten(const torc_module *m, const char *prefix, named_param **out, int *n, int *cap) {
    for (int i = 0; i < m->n_params; i++) {
        size_t len = strlen(prefix) + strlen(m->params[i].name) + 1;
        char *nm = malloc(len);
        if (!nm || !grow((void **)out, cap, *n + 1, sizeof **out)) {
            free(nm);
            return false;
        }
        snprintf(nm, len, "%s%s", prefix, m->params[i].name);
        (*out)[(*n)++] = (named_param){nm, m->params[i].t};
    }
    for (int i = 0; i < m->n_children; i++) {
        size_t len = strlen(prefix) + strlen(m->children[i].name) + 2;
        char *p = malloc(len);
        if (!p) return false;
        snprintf(p, len, "%s%s.", prefix, m->children[i].name);
        bool ok = flatten(m->children[i].m, p, out, n, cap);
        free(p);
        if (!ok) return false;
    }
    return true;
}

static bool flat_ready(const torc_module *cm) {
    torc_module *m = (torc_module *)cm;  // the cache is not part of the module's value
    const uint64_t gen = atomic_load(&g_generation);
    if (m->flat_gen == gen) return true;
    flat_clear(m);
    int cap = 0;
    if (!flatten(m, "", &m->flat, &m->n_flat, &cap)) {
        flat_clear(m);
        torc__error(TORC_ERR_OOM, "out of host memory listing parameters");
        return false;
    }
    m->flat_gen = gen;
    return true;
}

int torc_module_param_count(const torc_module *m) {
    if (!m) return torc__null_arg("module is NULL"), -1;
    return flat_ready(m) ? m->n_flat : -1;  // -1: out of memory listing them (the error is set)
}

torc_tensor *torc_module_param(const torc_module *m, int i) {
    if (!m || !flat_ready(m) || i < 0 || i >= m->n_flat) return NULL;
    return m->flat[i].t;
}

const char *torc_module_param_name(const torc_module *m, int i) {
    if (!m || !flat_ready(m) || i < 0 || i >= m->n_flat) return NULL;
    return m->flat[i].name;
}

torc_tensor *torc_module_get_parameter(const torc_module *m, const char *path) {
    if (!m || !path || !flat_ready(m)) return NULL;
    for (int i = 0; i < m->n_flat; i++)
        if (!strcmp(m->flat[i].name, path)) return m->flat[i].t;
    return NULL;
}

int64_t torc_module_num_parameters(const torc_module *m) {
    int64_t n = 0;
    const int count = torc_module_param_count(m);
    if (count < 0) return -1;
    for (int i = 0; i < count; i++) n += torc_numel(m->flat[i].t);
    return n;
}

torc_status torc_module_zero_grad(torc_module *m, bool set_to_none) {
    if (!m) return torc__null_arg("module is NULL");
    const int count = torc_module_param_count(m);
    if (count < 0) return torc_last_status();
    for (int i = 0; i < count; i++) {
        torc_tensor *p = m->flat[i].t;
        torc_status st = TORC_OK;
        if (set_to_none) st = torc_set_grad(p, NULL);
        else if (p->grad) {
            torc_no_grad_begin();
            st = torc_zero_(p->grad);
            torc_no_grad_end();
        }
        if (st) return st;
    }
    return TORC_OK;
}

// ---- Linear, activations ----
// torc_linear (torc.h). Without the bias cast, bf16 + an f32 bias would promote to f32, and every op
// after it would run in f32.
torc_tensor *torc_linear(const torc_tensor *x, const torc_tensor *w, const torc_tensor *b) {
    if (!x || !w) return TORC_NULL_ARG_FAIL("linear: %s is NULL", x ? "weight" : "input");
    torc_scope_push();
    torc_tensor *y = torc_matmul(x, w);
    if (y && b) {
        const bool low = y->dtype == TORC_DTYPE_BF16 || y->dtype == TORC_DTYPE_F16;
        const bool cast = torc_is_autocast_enabled() && low && b->dtype != y->dtype && torc_dtype_is_floating(b->dtype) &&
                          b->dtype != TORC_DTYPE_F64;
        const torc_tensor *bb = cast ? torc__autocast_cast(b, y->dtype) : b;  // (cached, as a weight, without grad)
        y = bb ? torc_add(y, bb) : NULL;
    }
    y = torc_keep(y);
    torc_scope_pop();
    return y;
}

static torc_tensor *linear_forward(torc_module *m, torc_tensor *x, void *user) {
    (void)user;
    return torc_linear(x, m->params[0].t, m->n_params > 1 ? m->params[1].t : NULL);
}

// A new parameter of shape (ndim, shape) registered in m under name.
static torc_tensor *new_param(torc_module *m, const char *name, int ndim, const int64_t *shape, torc_dtype dtype) {
    torc_scope_push();
    torc_tensor *p = torc_parameter(torc_empty(ndim, shape, dtype));
    torc_status st = p ? torc_module_register_parameter(m, name, p) : torc_last_status();
    torc_scope_pop();  // the module holds the only reference now
    return st ? NULL : m->params[m->n_params - 1].t;
}

torc_module *torc_linear_new(int64_t in, int64_t out, bool bias, torc_dtype dtype, torc_generator *gen) {
    if (in <= 0 || out <= 0)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "Linear: in_features and out_features must be positive, got %lld "
                                                    "and %lld", (long long)in, (long long)out);
    if (!torc_dtype_is_floating(dtype))
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "Linear: parameters must have a floating dtype, got %s",
                              torc_dtype_name(dtype));
    torc_module *m = torc_module_new("Linear", linear_forward, NULL, NULL);
    if (!m) return NULL;
    torc_tensor *w = new_param(m, "weight", 2, (int64_t[]){in, out}, dtype);
    torc_status st = w ? torc_init_normal_fan_in_(w, in, gen) : torc_last_status();
    if (!st && bias) {
        torc_tensor *b = new_param(m, "bias", 1, &out, dtype);
        const double bound = 1.0 / sqrt((double)in);
        if (!b) st = torc_last_status();
        else {
            torc_no_grad_begin();
            st = torc_uniform_(b, -bound, bound, gen);
            torc_no_grad_end();
        }
    }
    if (st) {
        torc_module_free(m);
        return NULL;
    }
    return m;
}

static torc_tensor *relu_forward(torc_module *m, torc_tensor *x, void *user) {
    (void)m, (void)user;
    return torc_relu(x);
}

static torc_tensor *gelu_forward(torc_module *m, torc_tensor *x, void *user) {
    (void)m;
    return torc_gelu(x, user != NULL);
}

torc_module *torc_relu_module_new(void) { return torc_module_new("ReLU", relu_forward, NULL, NULL); }
torc_module *torc_gelu_module_new(bool approximate_tanh) {
    static char tanh_flag;  // any non-NULL user pointer means approximate='tanh'
    return torc_module_new("GELU", gelu_forward, approximate_tanh ? &tanh_flag : NULL, NULL);
}

// ---- Sequential, Cruncher ----
static torc_tensor *sequential_forward(torc_module *m, torc_tensor *x, void *user) {
    (void)user;
    for (int i = 0; x && i < m->n_children; i++) x = torc_module_forward(m->children[i].m, x);
    return x;
}

torc_module *torc_sequential_new(void) { return torc_module_new("Sequential", sequential_forward, NULL, NULL); }

torc_status torc_sequential_append(torc_module *seq, torc_module *child) {
    if (!seq) {
        torc_module_free(child);
        return torc__null_arg("sequential is NULL");
    }
    char name[24];
    snprintf(name, sizeof name, "%d", seq->n_children);
    return torc_module_register_module(seq, name, child);
}

static torc_tensor *cruncher_forward(torc_module *m, torc_tensor *x, void *user) {
    (void)user;
    if (x->ndim != 2)
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "Cruncher: expected x of shape (B, D), got %d dims", x->ndim);
    torc_tensor *h = torc_module_forward(m->children[0].m, x);      // layers: (B, D)
    torc_tensor *y = h ? torc_module_forward(m->children[1].m, h) : NULL; // final: (B, 1)
    return y ? torc_squeeze(y, -1) : NULL;                           // (B,)
}

torc_module *torc_cruncher_new(int64_t dim, int num_layers, torc_dtype dtype, torc_generator *gen) {
    if (dim <= 0 || num_layers < 0)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "Cruncher: expected dim > 0 and num_layers >= 0, got %lld and %d",
                              (long long)dim, num_layers);
    torc_module *m = torc_module_new("Cruncher", cruncher_forward, NULL, NULL);
    torc_module *layers = m ? torc_sequential_new() : NULL;
    torc_status st = layers ? TORC_OK : torc_last_status();
    for (int i = 0; !st && i < num_layers; i++) {
        torc_module *l = torc_linear_new(dim, dim, false, dtype, gen);
        st = l ? torc_sequential_append(layers, l) : torc_last_status();
    }
    if (!st) {
        st = torc_module_register_module(m, "layers", layers);
        layers = NULL;  // owned by m (or freed) now
    }
    if (!st) {
        torc_module *final = torc_linear_new(dim, 1, false, dtype, gen);
        st = final ? torc_module_register_module(m, "final", final) : torc_last_status();
    }
    if (st) {
        torc_module_free(layers);
        torc_module_free(m);
        return NULL;
    }
    return m;
}
