// core/optim.c — optimizer plugins: their checks (libtorc_optim_<name>.so by name or path, loaded
// by plugin.c's loader), the host API table plugins compute through, and the torc_optimizer frontend.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

// The v1 vtable ends with step; a plugin must provide at least that much.
#define OPTIM_VTABLE_V1_SIZE (offsetof(torc_optim_vtable, step) + sizeof(void *))

// Every layout it shares with plugins is pinned in optim.h.

#define MAX_OPTIM_PLUGINS 64
#define MAX_HP_TOTAL 64  // hyperparameter values per group, all hyperparameters together

// ---- the loader ----
typedef struct optim_lib {
    char name[64];     // the vtable's name
    char path[512];    // the file it came from
    void *handle;
    const torc_optim_vtable *vt;
    int hp_total;      // values per group
    int hp_offset[MAX_HP_TOTAL];  // where hparams[i]'s values start in a group's hp array
} optim_lib;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static optim_lib *g_libs[MAX_OPTIM_PLUGINS];
static int g_n_libs;

static bool valid_name(const char *name, size_t max) {
    if (!*name || strlen(name) >= max) return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) return false;
    return true;
}

// Why a vtable cannot be used, into why (empty if it can); fills the lib's hp layout.
static void check_vtable(const torc_optim_vtable *vt, optim_lib *lib, char *why, size_t n) {
    why[0] = '\0';
    if (!vt) {
        snprintf(why, n, "the plugin refused torc's optimizer ABI %u.%u", TORC_OPTIM_ABI_MAJOR, TORC_OPTIM_ABI_MINOR);
        return;
    }
    // The rule every plugin kind shares (plugin.c): the same major, at least the x.0 members.
    if (!torc__plugin_version_ok("optimizer", TORC_OPTIM_ABI_VERSION, vt->abi_version, vt->struct_size,
                                 OPTIM_VTABLE_V1_SIZE, why, n))
        return;
    if (!vt->name || !valid_name(vt->name, sizeof lib->name)) {
        snprintf(why, n, "plugin vtable has no valid name (lowercase letters, digits, '_')");
        return;
    }
    if (!vt->step) {
        snprintf(why, n, "optimizer '%s' has no step function", vt->name);
        return;
    }
    if (vt->n_hparams < 0 || (vt->n_hparams > 0 && !vt->hparams) || vt->n_states < 0 ||
        (vt->n_states > 0 && !vt->state_names)) {
        snprintf(why, n, "optimizer '%s' declares invalid hyperparameter or state tables", vt->name);
        return;
    }
    int total = 0;
    for (int i = 0; i < vt->n_hparams; i++) {
        const torc_optim_hparam *h = &vt->hparams[i];
        if (!h->name || !valid_name(h->name, 64)) {
            snprintf(why, n, "optimizer '%s': hyperparameter %d has no valid .name (lowercase letters, digits, '_')",
                     vt->name, i);
            return;
        }
        if (h->n_values < 1 || h->n_values > TORC_OPTIM_HP_MAX_VALUES) {
            snprintf(why, n, "optimizer '%s': hyperparameter '%s' has .n_values = %d (expected 1 to %d)", vt->name,
                     h->name, h->n_values, TORC_OPTIM_HP_MAX_VALUES);
            return;
        }
        if ((unsigned)h->kind > TORC_OPTIM_HP_INT) {
            snprintf(why, n,
                     "optimizer '%s': hyperparameter '%s' has .kind = %d (expected TORC_OPTIM_HP_REAL, _BOOL or _INT)",
                     vt->name, h->name, (int)h->kind);
            return;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(vt->hparams[j].name, h->name)) {
                snprintf(why, n, "optimizer '%s': hyperparameter '%s' is declared twice", vt->name, h->name);
                return;
            }
        if (total + h->n_values > MAX_HP_TOTAL || i >= MAX_HP_TOTAL) {
            snprintf(why, n, "optimizer '%s' has more than %d hyperparameter values", vt->name, MAX_HP_TOTAL);
            return;
        }
        lib->hp_offset[i] = total;
        total += h->n_values;
    }
    for (int i = 0; i < vt->n_states; i++)
        if (!vt->state_names[i] || !valid_name(vt->state_names[i], 64)) {
            snprintf(why, n, "optimizer '%s': state buffer %d has no valid name", vt->name, i);
            return;
        }
    lib->hp_total = total;
}

// The optimizer's own checks of a plugin whose entry symbol was found (want: the name asked
// for, NULL when loading by path). Returns the new lib or NULL with why.
static void *accept_optim(void *want, const char *path, void *h, void *entry_sym, char *why, size_t n,
                          bool *keep_open) {
    (void)keep_open;
    optim_lib *lib = calloc(1, sizeof *lib);
    if (!lib) {
        snprintf(why, n, "out of memory");
        return NULL;
    }
    const torc_optim_vtable *vt = ((torc_optim_entry_fn)entry_sym)(TORC_OPTIM_ABI_VERSION);
    check_vtable(vt, lib, why, n);
    if (!why[0] && want && strcmp(vt->name, want))
        snprintf(why, n, "file is named for optimizer '%s' but its vtable says '%s'", (const char *)want, vt->name);
    if (why[0]) {
        free(lib);
        return NULL;
    }
    snprintf(lib->name, sizeof lib->name, "%s", vt->name);
    snprintf(lib->path, sizeof lib->path, "%s", path);
    lib->handle = h;
    lib->vt = vt;
    return lib;
}

// The <name> of a path ending in libtorc_optim_<name>.so, or NULL for a file named otherwise.
static const char *name_in_file(const char *path, char *name, size_t cap) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const size_t len = strlen(base);
    if (strncmp(base, "libtorc_optim_", 14) || len <= 17 || strcmp(base + len - 3, ".so") || len - 17 >= cap) return NULL;
    snprintf(name, cap, "%.*s", (int)(len - 17), base + 14);
    return name;
}

static const optim_lib *load_locked(const char *spec) {
    const bool by_path = strchr(spec, '/') != NULL;
    for (int i = 0; i < g_n_libs; i++)
        if (by_path ? !strcmp(g_libs[i]->path, spec) : !strcmp(g_libs[i]->name, spec)) return g_libs[i];
    if (!by_path && !valid_name(spec, 64)) {
        torc__error(TORC_ERR_INVALID_ARG,
                    "invalid optimizer name '%s' (a name is lowercase letters, digits and '_'; a path contains '/')",
                    spec);
        return NULL;
    }
    if (g_n_libs == MAX_OPTIM_PLUGINS) {
        torc__error(TORC_ERR_BACKEND, "too many optimizer plugins loaded (%d)", MAX_OPTIM_PLUGINS);
        return NULL;
    }
    char file_name[64];  // by path: libtorc_optim_<name>.so must hold the optimizer <name>
    optim_lib *lib = by_path ? torc__plugin_load_file(&torc__plugin_optimizer, spec, accept_optim,
                                                      (void *)name_in_file(spec, file_name, sizeof file_name))
                             : torc__plugin_load(&torc__plugin_optimizer, spec, accept_optim, (void *)spec);
    if (!lib) return NULL;
    // The same file loaded under another spelling (name vs path): keep one entry.
    for (int i = 0; i < g_n_libs; i++)
        if (g_libs[i]->vt == lib->vt) {
            dlclose(lib->handle);  // drops only the extra reference dlopen took
            free(lib);
            return g_libs[i];
        }
    g_libs[g_n_libs++] = lib;
    return lib;
}

static const optim_lib *load_lib(const char *spec) {
    if (!spec || !*spec) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "optimizer name is NULL or empty");
    pthread_mutex_lock(&g_lock);
    const optim_lib *lib = load_locked(spec);
    pthread_mutex_unlock(&g_lock);
    return lib;
}

const torc_optim_vtable *torc_optim_load(const char *name_or_path) {
    const optim_lib *lib = load_lib(name_or_path);
    return lib ? lib->vt : NULL;
}

// ---- the host API table ----
// PyTorch's CPU kernels take scalar arguments in the op's "opmath" type: float for f32, f16 and
// bf16 tensors, double for f64. Rounding the same way keeps trajectories equal to torch.optim.
static double opmath(const torc_tensor *t, double v) { return t && t->dtype == TORC_DTYPE_F64 ? v : (double)(float)v; }

static torc_status host_error(torc_status status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return torc__error(status, "%s", msg);
}
static int64_t host_numel(const torc_tensor *t) { return torc_numel(t); }
static torc_dtype host_dtype(const torc_tensor *t) { return torc_get_dtype(t); }
static torc_tensor *host_zeros_like(const torc_tensor *t) { return torc_zeros_like(t); }
static torc_tensor *host_full_like(const torc_tensor *t, double v) { return torc_full_like(t, v); }
static torc_tensor *host_clone(const torc_tensor *t) { return torc_clone(t); }
static torc_tensor *host_add_scaled(const torc_tensor *a, const torc_tensor *b, double alpha) {
    return torc_add_scaled(a, b, torc_s(opmath(a, alpha)));
}
static torc_tensor *host_add_scalar(const torc_tensor *a, double s) { return torc_add_scalar(a, torc_s(s)); }
static torc_tensor *host_mul_scalar(const torc_tensor *a, double s) { return torc_mul_scalar(a, torc_s(s)); }
static torc_tensor *host_div_scalar(const torc_tensor *a, double s) { return torc_div_scalar(a, torc_s(s)); }
// addcmul, addcdiv and lerp are one fused op each (core/pointwise.c), rounded as PyTorch's CPU
// kernels round them: fma(value * a, b, self), self + (value * a) / b, and lerp's two-sided fma,
// with value and weight taken in the opmath type (float for f32 / f16 / bf16, double for f64).
static torc_tensor *host_addcmul(const torc_tensor *self, const torc_tensor *a, const torc_tensor *b, double v) {
    return torc_addcmul(self, a, b, torc_s(v));
}
static torc_status host_fill_(torc_tensor *self, double v) { return torc_fill_(self, torc_s(v)); }
static torc_status host_add_scaled_(torc_tensor *self, const torc_tensor *o, double alpha) {
    return torc_add_scaled_(self, o, torc_s(opmath(self, alpha)));
}
static torc_status host_add_scalar_(torc_tensor *self, double s) { return torc_add_scalar_(self, torc_s(s)); }
static torc_status host_mul_scalar_(torc_tensor *self, double s) { return torc_mul_scalar_(self, torc_s(s)); }
static torc_status host_div_scalar_(torc_tensor *self, double s) { return torc_div_scalar_(self, torc_s(s)); }
static torc_status host_addcmul_(torc_tensor *self, const torc_tensor *a, const torc_tensor *b, double v) {
    return torc_addcmul_(self, a, b, torc_s(v));
}
static torc_status host_addcdiv_(torc_tensor *self, const torc_tensor *a, const torc_tensor *b, double v) {
    return torc_addcdiv_(self, a, b, torc_s(v));
}
static torc_status host_lerp_(torc_tensor *self, const torc_tensor *end, double weight) {
    return torc_lerp_(self, end, torc_s(weight));
}
static double host_pow(double x, double y) { return pow(x, y); }
static double host_sqrt_d(double x) { return sqrt(x); }
static double host_exp_d(double x) { return exp(x); }
static double host_log_d(double x) { return log(x); }
static torc_tensor *host_clamp(const torc_tensor *a, double min, double max) {
    torc_scope_push();  // the intermediate maximum is freed here, not at the end of the step
    torc_tensor *lo = torc_maximum_scalar(a, torc_s(min));
    torc_tensor *r = lo ? torc_minimum_scalar(lo, torc_s(max)) : NULL;
    if (r) torc_keep(r);
    torc_scope_pop();
    return r;
}

static const torc_optim_host g_host = {
    .abi_version = TORC_OPTIM_ABI_VERSION,
    .struct_size = sizeof(torc_optim_host),
    .error = host_error,
    .last_error = torc_last_error,
    .numel = host_numel,
    .dtype = host_dtype,
    .zeros_like = host_zeros_like,
    .full_like = host_full_like,
    .clone = host_clone,
    .add = torc_add,
    .add_scaled = host_add_scaled,
    .sub = torc_sub,
    .mul = torc_mul,
    .div = torc_div,
    .maximum = torc_maximum,
    .add_scalar = host_add_scalar,
    .mul_scalar = host_mul_scalar,
    .div_scalar = host_div_scalar,
    .neg = torc_neg,
    .sqrt = torc_sqrt,
    .square = torc_square,
    .addcmul = host_addcmul,
    .copy_ = torc_copy_,
    .fill_ = host_fill_,
    .zero_ = torc_zero_,
    .add_ = torc_add_,
    .add_scaled_ = host_add_scaled_,
    .sub_ = torc_sub_,
    .mul_ = torc_mul_,
    .div_ = torc_div_,
    .maximum_ = torc_maximum_,
    .add_scalar_ = host_add_scalar_,
    .mul_scalar_ = host_mul_scalar_,
    .div_scalar_ = host_div_scalar_,
    .sqrt_ = torc_sqrt_,
    .addcmul_ = host_addcmul_,
    .addcdiv_ = host_addcdiv_,
    .lerp_ = host_lerp_,
    .pow = host_pow,
    .sqrt_d = host_sqrt_d,
    .exp_d = host_exp_d,
    .log_d = host_log_d,
    .sign = torc_sign,
    .abs = torc_abs,
    .clamp = host_clamp,
    .eq = torc_eq,
    .ne = torc_ne,
    .lt = torc_lt,
    .le = torc_le,
    .gt = torc_gt,
    .ge = torc_ge,
    .where = torc_where,
    .adam_step_ = torc_adam_step_,
    .adam_step_list_ = torc_adam_step_list_,
};

// ---- the optimizer ----
typedef struct opt_group {
    double hp[MAX_HP_TOTAL];
    int first, n;   // its parameters are opt->params[first .. first + n)
} opt_group;

struct torc_optimizer {
    const optim_lib *lib;
    const torc_optim_vtable *vt;
    double defaults[MAX_HP_TOTAL];
    int n_groups;
    opt_group *groups;
    int n_params;
    torc_tensor **params;   // (n_params) retained
    int64_t *steps;         // (n_params) updates so far
    torc_tensor **states;   // (n_params * n_states) retained, NULL until created
};

// Python's repr of a float ("0.001", "-1.0", "1e-08"), for PyTorch-worded messages.
static const char *py_float(double v, char *buf, size_t n) {
    if (isnan(v)) return snprintf(buf, n, "nan"), buf;
    if (isinf(v)) return snprintf(buf, n, v < 0 ? "-inf" : "inf"), buf;
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".en")) {
        size_t len = strlen(buf);
        if (len + 2 < n) memcpy(buf + len, ".0", 3);
    }
    return buf;
}

static int find_hparam(const torc_optim_vtable *vt, const char *name, size_t len) {
    for (int i = 0; i < vt->n_hparams; i++)
        if (strlen(vt->hparams[i].name) == len && !strncmp(vt->hparams[i].name, name, len)) return i;
    return -1;
}

static torc_status unknown_hparam(const torc_optim_vtable *vt, const char *name, size_t len) {
    char known[512] = "";
    for (int i = 0; i < vt->n_hparams; i++) {
        size_t used = strlen(known);
        snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", vt->hparams[i].name);
    }
    return torc__error(TORC_ERR_INVALID_ARG, "%s: unknown hyperparameter '%.*s' (it takes: %s)", vt->name, (int)len,
                       name, known[0] ? known : "none");
}

// Range and kind checks of every value, then the plugin's own check.
static torc_status validate(const optim_lib *lib, const double *hp) {
    const torc_optim_vtable *vt = lib->vt;
    for (int i = 0; i < vt->n_hparams; i++) {
        const torc_optim_hparam *h = &vt->hparams[i];
        for (int k = 0; k < h->n_values; k++) {
            const double v = hp[lib->hp_offset[i] + k];
            bool ok = v >= h->min && (h->flags & TORC_OPTIM_HP_MAX_OPEN ? v < h->max : v <= h->max);
            if (h->kind == TORC_OPTIM_HP_BOOL) ok = v == 0.0 || v == 1.0;
            if (h->kind == TORC_OPTIM_HP_INT) ok = ok && v == floor(v);
            if (ok) continue;
            char b[40];
            char what[96];
            snprintf(what, sizeof what, "%s", h->what && *h->what ? h->what : "");
            if (!what[0]) snprintf(what, sizeof what, "%s value", h->name);
            if (h->n_values > 1)
                return torc__error(TORC_ERR_INVALID_ARG, "Invalid %s at index %d: %s", what, k, py_float(v, b, sizeof b));
            return torc__error(TORC_ERR_INVALID_ARG, "Invalid %s: %s", what, py_float(v, b, sizeof b));
        }
    }
    if (vt->check) {
        torc_clear_error();
        int st = vt->check(&g_host, hp);
        if (st) {
            if (torc_last_status() == TORC_OK)
                torc__error(TORC_ERR_INVALID_ARG, "%s: invalid hyperparameters", vt->name);
            return torc_last_status();
        }
    }
    return TORC_OK;
}

static bool parse_value(const torc_optim_hparam *h, const char *s, size_t len, double *out) {
    char buf[64];
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (h->kind == TORC_OPTIM_HP_BOOL) {
        if (!strcmp(buf, "true") || !strcmp(buf, "True") || !strcmp(buf, "1")) return *out = 1.0, true;
        if (!strcmp(buf, "false") || !strcmp(buf, "False") || !strcmp(buf, "0")) return *out = 0.0, true;
        return false;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(buf, &end);
    if (end == buf || *end || errno == ERANGE) return false;
    *out = v;
    return true;
}

// Applies "name=value name=v1,v2 ..." to hp (a scratch copy: the caller validates and commits).
static torc_status apply_settings(const optim_lib *lib, double *hp, const char *settings) {
    const torc_optim_vtable *vt = lib->vt;
    const char *p = settings;
    for (;;) {
        while (*p == ' ' || *p == ';' || *p == '\t' || *p == '\n') p++;
        if (!*p) return TORC_OK;
        const char *start = p;
        while (*p && *p != ' ' && *p != ';' && *p != '\t' && *p != '\n') p++;
        const size_t len = (size_t)(p - start);
        const char *eq = memchr(start, '=', len);
        if (!eq)
            return torc__error(TORC_ERR_INVALID_ARG, "%s: hyperparameter setting '%.*s' is not name=value", vt->name,
                               (int)len, start);
        const int i = find_hparam(vt, start, (size_t)(eq - start));
        if (i < 0) return unknown_hparam(vt, start, (size_t)(eq - start));
        const torc_optim_hparam *h = &vt->hparams[i];
        const char *v = eq + 1, *vend = start + len;
        double vals[TORC_OPTIM_HP_MAX_VALUES];
        int k = 0;
        bool ok = true;
        while (ok) {
            const char *comma = memchr(v, ',', (size_t)(vend - v));
            const char *e = comma ? comma : vend;
            ok = k < h->n_values && parse_value(h, v, (size_t)(e - v), &vals[k]);
            k++;
            if (!comma) break;
            v = comma + 1;
        }
        if (!ok || k != h->n_values) {
            const char *kind = h->kind == TORC_OPTIM_HP_BOOL ? "a boolean (true/false)"
                               : h->kind == TORC_OPTIM_HP_INT ? "an integer"
                                                              : "a number";
            if (h->n_values > 1)
                return torc__error(TORC_ERR_INVALID_ARG, "%s: hyperparameter '%s' expects %d comma-separated values, got '%.*s'",
                                   vt->name, h->name, h->n_values, (int)(vend - eq - 1), eq + 1);
            return torc__error(TORC_ERR_INVALID_ARG, "%s: hyperparameter '%s' expects %s, got '%.*s'", vt->name, h->name,
                               kind, (int)(vend - eq - 1), eq + 1);
        }
        memcpy(&hp[lib->hp_offset[i]], vals, sizeof(double) * (size_t)h->n_values);
    }
}

static bool param_known(const torc_optimizer *opt, const torc_tensor *p) {
    for (int i = 0; i < opt->n_params; i++)
        if (opt->params[i] == p) return true;
    return false;
}

static torc_status check_params(const torc_optimizer *opt, int n, torc_tensor *const *params) {
    if (n <= 0 || !params) return torc__error(TORC_ERR_INVALID_ARG, "optimizer got an empty parameter list");
    for (int i = 0; i < n; i++) {
        const torc_tensor *p = params[i];
        if (!p) return torc__null_arg("optimizer can only optimize Tensors, but parameter %d is NULL", i);
        if (!torc_dtype_is_floating(p->dtype))
            return torc__error(TORC_ERR_DTYPE, "optimizer can only optimize floating-point Tensors, but parameter %d is %s",
                               i, torc_dtype_name(p->dtype));
        if (p->grad_fn && !p->retains_grad) return torc__error(TORC_ERR_INVALID_ARG, "can't optimize a non-leaf Tensor");
        for (int j = 0; j < i; j++)
            if (params[j] == p)
                return torc__error(TORC_ERR_INVALID_ARG, "optimizer contains a parameter group with duplicate parameters");
        if (param_known(opt, p))
            return torc__error(TORC_ERR_INVALID_ARG, "some parameters appear in more than one parameter group");
    }
    return TORC_OK;
}

static int add_group(torc_optimizer *opt, int n, torc_tensor *const *params, const char *settings) {
    if (check_params(opt, n, params)) return -1;
    double hp[MAX_HP_TOTAL];
    memcpy(hp, opt->defaults, sizeof hp);
    if (settings && (apply_settings(opt->lib, hp, settings) || validate(opt->lib, hp))) return -1;
    const int ns = opt->vt->n_states, total = opt->n_params + n;
    opt_group *g = realloc(opt->groups, sizeof *g * (size_t)(opt->n_groups + 1));
    if (g) opt->groups = g;
    torc_tensor **p = g ? realloc(opt->params, sizeof *p * (size_t)total) : NULL;
    if (p) opt->params = p;
    int64_t *s = p ? realloc(opt->steps, sizeof *s * (size_t)total) : NULL;
    if (s) opt->steps = s;
    torc_tensor **st = s ? realloc(opt->states, sizeof *st * (size_t)(total * ns + 1)) : NULL;
    if (st) opt->states = st;
    if (!st) {
        torc__error(TORC_ERR_OOM, "out of memory for a parameter group");
        return -1;
    }
    opt_group *grp = &opt->groups[opt->n_groups];
    memcpy(grp->hp, hp, sizeof hp);
    grp->first = opt->n_params;
    grp->n = n;
    for (int i = 0; i < n; i++) {
        opt->params[opt->n_params + i] = torc_retain(params[i]);
        opt->steps[opt->n_params + i] = 0;
        for (int j = 0; j < ns; j++) opt->states[(opt->n_params + i) * ns + j] = NULL;
    }
    opt->n_params = total;
    return opt->n_groups++;
}

torc_optimizer *torc_optimizer_new(const char *name_or_path, int n_params, torc_tensor *const *params,
                                   const char *hparams) {
    const optim_lib *lib = load_lib(name_or_path);
    if (!lib) return NULL;
    torc_optimizer *opt = calloc(1, sizeof *opt);
    if (!opt) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of memory for an optimizer");
    opt->lib = lib;
    opt->vt = lib->vt;
    for (int i = 0; i < lib->vt->n_hparams; i++)
        memcpy(&opt->defaults[lib->hp_offset[i]], lib->vt->hparams[i].defaults,
               sizeof(double) * (size_t)lib->vt->hparams[i].n_values);
    if (validate(lib, opt->defaults)) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", torc_last_error());
        free(opt);
        return TORC_FAIL_NULL(TORC_ERR_BACKEND, "optimizer plugin '%s' has invalid defaults: %s", lib->path, msg);
    }
    if ((hparams && (apply_settings(lib, opt->defaults, hparams) || validate(lib, opt->defaults))) ||
        add_group(opt, n_params, params, NULL) < 0) {
        torc_optimizer_free(opt);
        return NULL;
    }
    return opt;
}

void torc_optimizer_free(torc_optimizer *opt) {
    if (!opt) return;
    const int ns = opt->vt->n_states;
    for (int i = 0; i < opt->n_params; i++) {
        torc_release(opt->params[i]);
        for (int j = 0; j < ns; j++) torc_release(opt->states[i * ns + j]);
    }
    free(opt->params);
    free(opt->steps);
    free(opt->states);
    free(opt->groups);
    free(opt);
}

const torc_optim_vtable *torc_optimizer_vtable(const torc_optimizer *opt) { return opt ? opt->vt : NULL; }
const char *torc_optimizer_name(const torc_optimizer *opt) { return opt ? opt->vt->name : "(null)"; }
int torc_optimizer_num_groups(const torc_optimizer *opt) { return opt ? opt->n_groups : 0; }
int torc_optimizer_num_params(const torc_optimizer *opt) { return opt ? opt->n_params : 0; }

torc_tensor *torc_optimizer_param(const torc_optimizer *opt, int index) {
    if (!opt || index < 0 || index >= opt->n_params)
        return TORC_FAIL_NULL(TORC_ERR_INDEX, "optimizer parameter index %d out of range", index);
    return torc__register(torc_retain(opt->params[index]));
}

int torc_optimizer_add_param_group(torc_optimizer *opt, int n_params, torc_tensor *const *params, const char *hparams) {
    if (!opt) {
        torc__null_arg("optimizer is NULL");
        return -1;
    }
    return add_group(opt, n_params, params, hparams ? hparams : "");
}

static bool group_ok(const torc_optimizer *opt, int group, bool allow_all) {
    if (!opt) return torc__null_arg("optimizer is NULL"), false;
    if ((allow_all && group == -1) || (group >= 0 && group < opt->n_groups)) return true;
    torc__error(TORC_ERR_INVALID_ARG, "parameter group %d out of range (the optimizer has %d)", group, opt->n_groups);
    return false;
}

torc_status torc_optimizer_set_hparams(torc_optimizer *opt, int group, const char *settings) {
    if (!group_ok(opt, group, true)) return torc_last_status();
    if (!settings) return torc__null_arg("settings is NULL");
    const int g0 = group < 0 ? 0 : group, g1 = group < 0 ? opt->n_groups : group + 1;
    double(*scratch)[MAX_HP_TOTAL] = malloc(sizeof *scratch * (size_t)(g1 - g0));
    if (!scratch) return torc__error(TORC_ERR_OOM, "out of memory");
    torc_status st = TORC_OK;
    for (int g = g0; g < g1 && !st; g++) {
        memcpy(scratch[g - g0], opt->groups[g].hp, sizeof scratch[0]);
        st = apply_settings(opt->lib, scratch[g - g0], settings);
        if (!st) st = validate(opt->lib, scratch[g - g0]);
    }
    if (!st)
        for (int g = g0; g < g1; g++) memcpy(opt->groups[g].hp, scratch[g - g0], sizeof scratch[0]);
    free(scratch);
    return st;
}

torc_status torc_optimizer_set_hparam(torc_optimizer *opt, int group, const char *name, double value) {
    if (!group_ok(opt, group, true)) return torc_last_status();
    if (!name) return torc__null_arg("hyperparameter name is NULL");
    const int i = find_hparam(opt->vt, name, strlen(name));
    if (i < 0) return unknown_hparam(opt->vt, name, strlen(name));
    if (opt->vt->hparams[i].n_values != 1)
        return torc__error(TORC_ERR_INVALID_ARG, "%s: hyperparameter '%s' takes %d values; set it with torc_optimizer_set_hparams",
                           opt->vt->name, name, opt->vt->hparams[i].n_values);
    char settings[128];
    snprintf(settings, sizeof settings, "%s=%.17g", name, value);
    if (opt->vt->hparams[i].kind == TORC_OPTIM_HP_BOOL && (value == 0.0 || value == 1.0))
        snprintf(settings, sizeof settings, "%s=%s", name, value != 0.0 ? "true" : "false");
    if (isnan(value) || isinf(value)) {  // strtod reads them, but say it plainly
        double hp[MAX_HP_TOTAL];
        memcpy(hp, opt->groups[group < 0 ? 0 : group].hp, sizeof hp);
        hp[opt->lib->hp_offset[i]] = value;
        return validate(opt->lib, hp);
    }
    return torc_optimizer_set_hparams(opt, group, settings);
}

torc_status torc_optimizer_set_lr(torc_optimizer *opt, double lr) { return torc_optimizer_set_hparam(opt, -1, "lr", lr); }

torc_status torc_optimizer_get_hparam(const torc_optimizer *opt, int group, const char *name, double *values) {
    if (!group_ok(opt, group, false)) return torc_last_status();
    if (!name || !values) return torc__null_arg("torc_optimizer_get_hparam: NULL argument");
    const int i = find_hparam(opt->vt, name, strlen(name));
    if (i < 0) return unknown_hparam(opt->vt, name, strlen(name));
    memcpy(values, &opt->groups[group].hp[opt->lib->hp_offset[i]], sizeof(double) * (size_t)opt->vt->hparams[i].n_values);
    return TORC_OK;
}

// ---- step and zero_grad ----
static torc_status check_grad(const torc_tensor *p, const torc_tensor *g, int index) {
    bool same = g->ndim == p->ndim && g->device == p->device && g->dtype == p->dtype;
    for (int d = 0; same && d < p->ndim; d++) same = g->shape[d] == p->shape[d];
    if (same) return TORC_OK;
    char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
    return torc__error(TORC_ERR_SHAPE,
                       "optimizer: parameter %d is %s %s on %s but its gradient is %s %s on %s", index,
                       torc_dtype_name(p->dtype), torc__shape_str(p->ndim, p->shape, b1, sizeof b1), p->device->name,
                       torc_dtype_name(g->dtype), torc__shape_str(g->ndim, g->shape, b2, sizeof b2), g->device->name);
}

// A state buffer must be shaped, typed and placed like its parameter (checkpoints save it so and
// load_state_dict checks it so); refused when the plugin stores it, naming the plugin.
static torc_status check_state(const torc_optimizer *opt, int i, int j, const torc_tensor *t) {
    const torc_tensor *p = opt->params[i];
    bool same = t->ndim == p->ndim && t->dtype == p->dtype && t->device == p->device;
    for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
    if (same) return TORC_OK;
    char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
    return torc__error(TORC_ERR_SHAPE,
                       "optimizer '%s' stored state buffer '%s' of parameter %d as %s %s on %s, but a state buffer must "
                       "match its parameter: %s %s on %s",
                       opt->vt->name, opt->vt->state_names[j], i, torc_dtype_name(t->dtype),
                       torc__shape_str(t->ndim, t->shape, b1, sizeof b1), t->device->name, torc_dtype_name(p->dtype),
                       torc__shape_str(p->ndim, p->shape, b2, sizeof b2), p->device->name);
}

// Runs the plugin over the parameters of group gi that have a gradient.
static torc_status step_group(torc_optimizer *opt, int gi, torc_tensor **ps, torc_tensor **gs, torc_tensor **slots,
                              int64_t *idx, int *which) {
    const opt_group *grp = &opt->groups[gi];
    const int ns = opt->vt->n_states;
    int n = 0;
    for (int i = grp->first; i < grp->first + grp->n; i++) {
        torc_tensor *p = opt->params[i];
        if (!p->grad) continue;
        torc_status st = check_grad(p, p->grad, i);
        if (st) return st;
        if (opt->steps[i] == INT64_MAX)
            return torc__error(TORC_ERR_RUNTIME, "optimizer '%s': parameter %d has taken INT64_MAX steps", opt->vt->name, i);
        ps[n] = p;
        gs[n] = p->grad;
        for (int j = 0; j < ns; j++) slots[n * ns + j] = opt->states[i * ns + j];
        idx[n] = opt->steps[i] + 1;
        which[n++] = i;
    }
    if (n == 0) return TORC_OK;
    const torc_optim_group g = {.hp = grp->hp, .index = gi};
    torc_status st = TORC_OK;
    torc__mem_record rec = {0};
    // One parameter a call, as PyTorch's per-parameter loop: its temporaries are freed before the
    // next parameter's are made. A plugin that sets TORC_OPTIM_WHOLE_GROUP (optimizer ABI 1.3: the
    // adam plugins, one list op a step) gets the group in one call. Either way the buffers a call
    // creates count as optimizer state from their creation (torc__mem_record_end).
    const bool whole = TORC_STRUCT_HAS(opt->vt, torc_optim_vtable, flags) && (opt->vt->flags & TORC_OPTIM_WHOLE_GROUP);
    const int per = whole ? n : 1;
    torc_tensor **adopted = malloc(sizeof *adopted * (size_t)(per * ns + 1));
    if (!adopted) return torc__error(TORC_ERR_OOM, "out of memory for an optimizer step");
    for (int k0 = 0; k0 < n && !st; k0 += per) {
        torc_scope_push();
        torc__mem_record_begin(&rec);
        torc_clear_error();
        if (opt->vt->step(&g_host, &g, per, &ps[k0], &gs[k0], &slots[k0 * ns], &idx[k0]) != 0) {
            st = torc_last_status();
            if (st == TORC_OK) st = torc__error(TORC_ERR_RUNTIME, "optimizer '%s': step failed without a message", opt->vt->name);
        }
        // Adopt the buffers the plugin created (even on failure, so nothing leaks): the scope
        // owns one reference, the optimizer takes its own.
        for (int k = k0; k < k0 + per; k++) {
            torc_tensor **mine = &opt->states[which[k] * ns], **now = &slots[k * ns], **ad = &adopted[(k - k0) * ns];
            for (int j = 0; j < ns; j++) {
                ad[j] = now[j] != mine[j] ? now[j] : NULL;
                torc_status bad = ad[j] ? check_state(opt, which[k], j, ad[j]) : TORC_OK;
                if (bad) {  // refused: the slot keeps what it held
                    if (!st) st = bad;
                    ad[j] = NULL;
                    now[j] = mine[j];
                }
            }
        }
        torc__mem_record_end(&rec, per * ns, adopted, TORC_MEM_OPTIMIZER_STATE);
        for (int k = k0; k < k0 + per; k++) {
            torc_tensor **mine = &opt->states[which[k] * ns], **now = &slots[k * ns];
            for (int j = 0; j < ns; j++) {
                if (now[j] == mine[j]) continue;
                if (now[j]) torc_retain(now[j]);
                torc_release(mine[j]);
                mine[j] = now[j];
            }
        }
        torc_scope_pop();
        for (int k = k0; k < k0 + per && !st; k++) opt->steps[which[k]] = idx[k];
    }
    torc__mem_record_free(&rec);
    free(adopted);
    return st;
}

torc_status torc_optimizer_step(torc_optimizer *opt) {
    if (!opt) return torc__null_arg("optimizer is NULL");
    const int n = opt->n_params, ns = opt->vt->n_states;
    torc_tensor **ps = malloc(sizeof *ps * (size_t)n), **gs = malloc(sizeof *gs * (size_t)n);
    torc_tensor **slots = malloc(sizeof *slots * (size_t)(n * ns + 1));
    int64_t *idx = malloc(sizeof *idx * (size_t)n);
    int *which = malloc(sizeof *which * (size_t)n);
    torc_status st = TORC_OK;
    if (!ps || !gs || !slots || !idx || !which) st = torc__error(TORC_ERR_OOM, "out of memory for an optimizer step");
    torc_no_grad_begin();
    for (int g = 0; g < opt->n_groups && !st; g++) {
        torc_scope_push();
        st = step_group(opt, g, ps, gs, slots, idx, which);
        torc_scope_pop();
    }
    torc_no_grad_end();
    free(ps);
    free(gs);
    free(slots);
    free(idx);
    free(which);
    return st;
}

torc_status torc_optimizer_zero_grad(torc_optimizer *opt, bool set_to_none) {
    if (!opt) return torc__null_arg("optimizer is NULL");
    torc_status st = TORC_OK;
    torc_no_grad_begin();
    for (int i = 0; i < opt->n_params && !st; i++) {
        torc_tensor *p = opt->params[i];
        if (!p->grad) continue;
        if (set_to_none) st = torc_set_grad(p, NULL);
        else st = torc_zero_(p->grad);
    }
    torc_no_grad_end();
    return st;
}

static int state_index(const torc_optimizer *opt, const char *name, size_t len) {
    for (int j = 0; j < opt->vt->n_states; j++)
        if (strlen(opt->vt->state_names[j]) == len && !strncmp(opt->vt->state_names[j], name, len)) return j;
    return -1;
}

torc_tensor *torc_optimizer_state(const torc_optimizer *opt, int index, const char *buffer) {
    if (!opt || !buffer) return TORC_NULL_ARG_FAIL("torc_optimizer_state: NULL argument");
    if (index < 0 || index >= opt->n_params)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "optimizer parameter index %d out of range (it has %d)", index,
                              opt->n_params);
    const int j = state_index(opt, buffer, strlen(buffer));
    if (j < 0) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "optimizer '%s' has no state buffer '%s'", opt->vt->name, buffer);
    torc_tensor *t = opt->states[index * opt->vt->n_states + j];
    return t ? torc__register(torc_retain(t)) : NULL;
}

int64_t torc_optimizer_param_step_count(const torc_optimizer *opt, int index) {
    if (!opt || index < 0 || index >= opt->n_params) return -1;
    return opt->steps[index];
}

// ---- state dicts ----
#define KEY_MAX 256

static const char *pfx(const char *prefix) { return prefix ? prefix : "optimizer."; }

// "v1,v2" for hparam i of hp, printed so that strtod reads the same doubles back.
static void format_hp(const torc_optimizer *opt, const double *hp, int i, char *buf, size_t n) {
    const torc_optim_hparam *h = &opt->vt->hparams[i];
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < h->n_values && used < n; k++) {
        const double v = hp[opt->lib->hp_offset[i] + k];
        if (h->kind == TORC_OPTIM_HP_BOOL)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", k ? "," : "", v != 0.0 ? "true" : "false");
        else
            used += (size_t)snprintf(buf + used, n - used, "%s%.17g", k ? "," : "", v);
    }
}

torc_status torc_optimizer_state_dict(const torc_optimizer *opt, torc_state_dict *sd, const char *prefix) {
    if (!opt || !sd) return torc__null_arg("torc_optimizer_state_dict: NULL argument");
    const char *p = pfx(prefix);
    char key[KEY_MAX], val[1024];
    torc_status st;
    snprintf(key, sizeof key, "%sname", p);
    if ((st = torc_state_dict_set_meta(sd, key, opt->vt->name))) return st;
    snprintf(key, sizeof key, "%sparam_groups", p);
    snprintf(val, sizeof val, "%d", opt->n_groups);
    if ((st = torc_state_dict_set_meta(sd, key, val))) return st;
    for (int g = 0; g < opt->n_groups; g++) {
        const opt_group *grp = &opt->groups[g];
        size_t used = 0;
        val[0] = '\0';
        for (int i = 0; i < grp->n && used < sizeof val; i++)
            used += (size_t)snprintf(val + used, sizeof val - used, "%s%d", i ? "," : "", grp->first + i);
        if (used >= sizeof val) {
            // Contiguous by construction: write the range compactly when the list is long.
            snprintf(val, sizeof val, "%d-%d", grp->first, grp->first + grp->n - 1);
        }
        snprintf(key, sizeof key, "%sparam_groups.%d.params", p, g);
        if ((st = torc_state_dict_set_meta(sd, key, val))) return st;
        for (int i = 0; i < opt->vt->n_hparams; i++) {
            snprintf(key, sizeof key, "%sparam_groups.%d.%s", p, g, opt->vt->hparams[i].name);
            format_hp(opt, grp->hp, i, val, sizeof val);
            if ((st = torc_state_dict_set_meta(sd, key, val))) return st;
        }
    }
    const int ns = opt->vt->n_states;
    for (int i = 0; i < opt->n_params; i++) {
        if (opt->steps[i] == 0) continue;  // no state yet, as PyTorch's empty per-parameter dict
        snprintf(key, sizeof key, "%sstate.%d.step", p, i);
        snprintf(val, sizeof val, "%lld", (long long)opt->steps[i]);
        if ((st = torc_state_dict_set_meta(sd, key, val))) return st;
        for (int j = 0; j < ns; j++) {
            torc_tensor *t = opt->states[i * ns + j];
            if (!t) continue;
            snprintf(key, sizeof key, "%sstate.%d.%s", p, i, opt->vt->state_names[j]);
            if ((st = torc_state_dict_set(sd, key, t))) return st;
        }
    }
    return TORC_OK;
}

static bool parse_i64(const char *s, int64_t *out) {
    if (!s || !*s) return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno) return false;
    *out = v;
    return true;
}

// The parameter-index list of a group: "a,b,c" or "a-b".
static bool group_params_match(const char *s, int first, int n) {
    int64_t lo, hi;
    const char *dash = strchr(s, '-');
    if (dash && dash != s) {
        char a[32];
        snprintf(a, sizeof a, "%.*s", (int)(dash - s), s);
        return parse_i64(a, &lo) && parse_i64(dash + 1, &hi) && lo == first && hi == first + n - 1;
    }
    int k = 0;
    const char *p = s;
    while (*p) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v != first + k) return false;
        k++;
        p = end;
        if (*p == ',') p++;
        else if (*p) return false;
    }
    return k == n;
}

torc_status torc_optimizer_load_state_dict(torc_optimizer *opt, const torc_state_dict *sd, const char *prefix) {
    if (!opt || !sd) return torc__null_arg("torc_optimizer_load_state_dict: NULL argument");
    const char *p = pfx(prefix);
    const size_t plen = strlen(p);
    const int ns = opt->vt->n_states;
    char key[KEY_MAX];
    // 1. Check everything, building the new hyperparameters and steps on the side.
    snprintf(key, sizeof key, "%sname", p);
    const char *name = torc_state_dict_get_meta(sd, key);
    if (!name) return torc__error(TORC_ERR_INVALID_ARG, "state dict has no optimizer (no '%s' entry)", key);
    if (strcmp(name, opt->vt->name))
        return torc__error(TORC_ERR_INVALID_ARG, "state dict is for optimizer '%s', not '%s'", name, opt->vt->name);
    snprintf(key, sizeof key, "%sparam_groups", p);
    int64_t ng;
    if (!parse_i64(torc_state_dict_get_meta(sd, key), &ng) || ng != opt->n_groups)
        return torc__error(TORC_ERR_INVALID_ARG, "loaded state dict has a different number of parameter groups");
    double(*hps)[MAX_HP_TOTAL] = malloc(sizeof *hps * (size_t)opt->n_groups);
    int64_t *steps = malloc(sizeof *steps * (size_t)opt->n_params);
    if (!hps || !steps) {
        free(hps);
        free(steps);
        return torc__error(TORC_ERR_OOM, "out of memory");
    }
    torc_status st = TORC_OK;
    for (int g = 0; g < opt->n_groups && !st; g++) {
        snprintf(key, sizeof key, "%sparam_groups.%d.params", p, g);
        const char *list = torc_state_dict_get_meta(sd, key);
        if (!list || !group_params_match(list, opt->groups[g].first, opt->groups[g].n)) {
            st = torc__error(TORC_ERR_INVALID_ARG,
                             "loaded state dict contains a parameter group that doesn't match the size of optimizer's group");
            break;
        }
        memcpy(hps[g], opt->groups[g].hp, sizeof hps[g]);
        for (int i = 0; i < opt->vt->n_hparams && !st; i++) {
            snprintf(key, sizeof key, "%sparam_groups.%d.%s", p, g, opt->vt->hparams[i].name);
            const char *v = torc_state_dict_get_meta(sd, key);
            if (!v) {
                st = torc__error(TORC_ERR_INVALID_ARG, "state dict lacks hyperparameter '%s' of group %d", opt->vt->hparams[i].name, g);
                break;
            }
            char setting[1200];
            snprintf(setting, sizeof setting, "%s=%s", opt->vt->hparams[i].name, v);
            st = apply_settings(opt->lib, hps[g], setting);
        }
        if (!st) st = validate(opt->lib, hps[g]);
    }
    for (int i = 0; i < opt->n_params && !st; i++) {
        snprintf(key, sizeof key, "%sstate.%d.step", p, i);
        const char *v = torc_state_dict_get_meta(sd, key);
        steps[i] = 0;
        // INT64_MAX is refused too: the next step would overflow the count.
        if (v && (!parse_i64(v, &steps[i]) || steps[i] < 0 || steps[i] == INT64_MAX))
            st = torc__error(TORC_ERR_INVALID_ARG, "state dict: '%s' is not a step count ('%s')", key, v);
    }
    // Every tensor under the prefix must be a known buffer of a known parameter, shaped like it.
    const int n_sd = torc_state_dict_size(sd);
    for (int k = 0; k < n_sd && !st; k++) {
        const char *tn = torc_state_dict_name(sd, k);
        if (strncmp(tn, p, plen)) continue;
        const char *rest = tn + plen;
        char *end = NULL;
        long i = strncmp(rest, "state.", 6) ? -1 : strtol(rest + 6, &end, 10);
        int j = -1;
        if (i >= 0 && i < opt->n_params && end && *end == '.') j = state_index(opt, end + 1, strlen(end + 1));
        if (j < 0) {
            st = torc__error(TORC_ERR_INVALID_ARG, "state dict entry '%s' is not a state buffer of this '%s' optimizer", tn,
                             opt->vt->name);
            break;
        }
        if (steps[i] == 0) {
            st = torc__error(TORC_ERR_INVALID_ARG, "state dict has '%s' but no step count for parameter %ld", tn, i);
            break;
        }
        const torc_tensor *t = torc__state_dict_peek(sd, tn);
        const torc_tensor *param = opt->params[i];
        bool same = t && t->ndim == param->ndim;
        for (int d = 0; same && d < param->ndim; d++) same = t->shape[d] == param->shape[d];
        char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
        if (!same)
            st = torc__error(TORC_ERR_SHAPE, "state dict entry '%s' has shape %s but parameter %ld has shape %s", tn,
                             t ? torc__shape_str(t->ndim, t->shape, b1, sizeof b1) : "?", i,
                             torc__shape_str(param->ndim, param->shape, b2, sizeof b2));
        else if (t->dtype != param->dtype)
            st = torc__error(TORC_ERR_DTYPE, "state dict entry '%s' is %s but parameter %ld is %s", tn,
                             torc_dtype_name(t->dtype), i, torc_dtype_name(param->dtype));
    }
    if (st) {
        free(hps);
        free(steps);
        return st;
    }
    // 2. Apply: new buffers are copies on the parameter's device; absent ones are dropped.
    torc_tensor **fresh = calloc((size_t)(opt->n_params * ns + 1), sizeof *fresh);
    if (!fresh) st = torc__error(TORC_ERR_OOM, "out of memory");
    torc_no_grad_begin();
    for (int i = 0; i < opt->n_params && !st; i++)
        for (int j = 0; j < ns && !st; j++) {
            snprintf(key, sizeof key, "%sstate.%d.%s", p, i, opt->vt->state_names[j]);
            if (!torc__state_dict_peek(sd, key)) continue;
            const torc_tensor *src = torc__state_dict_peek(sd, key);
            torc_tensor *dst = src ? torc__new(opt->params[i]->device, src->dtype, src->ndim, src->shape) : NULL;
            if (dst && torc_copy_(dst, src)) {
                torc_release(dst);
                dst = NULL;
            }
            if (!dst) st = torc_last_status();
            else torc_set_mem_tag(dst, TORC_MEM_OPTIMIZER_STATE);
            fresh[i * ns + j] = dst;
        }
    torc_no_grad_end();
    if (st) {
        for (int k = 0; fresh && k < opt->n_params * ns; k++) torc_release(fresh[k]);
    } else {
        for (int g = 0; g < opt->n_groups; g++) memcpy(opt->groups[g].hp, hps[g], sizeof hps[g]);
        for (int i = 0; i < opt->n_params; i++) {
            opt->steps[i] = steps[i];
            for (int j = 0; j < ns; j++) {
                torc_release(opt->states[i * ns + j]);
                opt->states[i * ns + j] = fresh[i * ns + j];
            }
        }
    }
    free(fresh);
    free(hps);
    free(steps);
    return st;
}
