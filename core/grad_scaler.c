// core/grad_scaler.c — torch.amp.GradScaler: dynamic loss scaling with inf/NaN checks that skip
// the optimizer step, and the scale's growth/backoff schedule; state for checkpoints.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

// Where one optimizer (or, key NULL, the hand-unscaled gradients) stands since the last update.
typedef enum { STAGE_READY = 0, STAGE_UNSCALED, STAGE_STEPPED } stage;
typedef struct opt_record {
    const void *key;
    stage stage;
    bool found_inf;
} opt_record;

struct torc_grad_scaler {
    torc_grad_scaler_options o;
    double scale;             // always a float32 value
    int64_t growth_tracker;
    opt_record *rec;
    int n_rec, cap_rec;
};

static torc_status check_options(const torc_grad_scaler_options *o) {
    if (!(o->growth_factor > 1.0)) return torc__error(TORC_ERR_INVALID_ARG, "The growth factor must be > 1.0.");
    if (!(o->backoff_factor < 1.0 && o->backoff_factor > 0.0))
        return torc__error(TORC_ERR_INVALID_ARG, "The backoff factor must be < 1.0 (and > 0).");
    if (o->growth_interval < 1)
        return torc__error(TORC_ERR_INVALID_ARG, "growth_interval must be a positive integer, got %lld",
                           (long long)o->growth_interval);
    if (!(o->init_scale > 0.0 && o->init_scale <= 3.4028234663852886e38))
        return torc__error(TORC_ERR_INVALID_ARG, "init_scale must be a positive finite float32, got %g", o->init_scale);
    return TORC_OK;
}

torc_grad_scaler *torc_grad_scaler_new(const torc_grad_scaler_options *opts) {
    const torc_grad_scaler_options defaults = TORC_GRAD_SCALER_DEFAULTS;
    const torc_grad_scaler_options *o = opts ? opts : &defaults;
    if (check_options(o)) return NULL;
    torc_grad_scaler *gs = calloc(1, sizeof *gs);
    if (!gs) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory for a GradScaler");
    gs->o = *o;
    gs->scale = (float)o->init_scale;
    return gs;
}

void torc_grad_scaler_free(torc_grad_scaler *gs) {
    if (!gs) return;
    free(gs->rec);
    free(gs);
}

double torc_grad_scaler_get_scale(const torc_grad_scaler *gs) { return gs && gs->o.enabled ? gs->scale : 1.0; }

torc_tensor *torc_grad_scaler_scale(torc_grad_scaler *gs, const torc_tensor *loss) {
    if (!gs || !loss) return TORC_NULL_ARG_FAIL("torc_grad_scaler_scale: NULL argument");
    if (!gs->o.enabled) return torc__register(torc_retain((torc_tensor *)loss));
    torc_tensor *s = torc__scalar_on(loss->device, gs->scale, TORC_DTYPE_F32);
    if (!s) return NULL;
    torc_tensor *r = torc_mul(loss, s);
    torc_release(s);
    return r;
}

// The record of key, created READY when absent (NULL on OOM, error set).
static opt_record *record_of(torc_grad_scaler *gs, const void *key) {
    for (int i = 0; i < gs->n_rec; i++)
        if (gs->rec[i].key == key) return &gs->rec[i];
    if (gs->n_rec == gs->cap_rec) {
        const int nc = gs->cap_rec ? 2 * gs->cap_rec : 4;
        opt_record *r = realloc(gs->rec, (size_t)nc * sizeof *r);
        if (!r) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of host memory for GradScaler state");
        gs->rec = r;
        gs->cap_rec = nc;
    }
    opt_record *r = &gs->rec[gs->n_rec++];
    r->key = key;
    r->stage = STAGE_READY;
    r->found_inf = false;
    return r;
}

// Unscales g in place and ORs "g holds an inf or NaN" into *found: sum(g * 0) is 0 exactly
// when every element is finite, NaN otherwise.
static torc_status unscale_one(torc_tensor *g, double inv_scale, bool *found) {
    if (g->dtype == TORC_DTYPE_F16) return torc__error(TORC_ERR_DTYPE, "Attempting to unscale FP16 gradients.");
    if (!torc_dtype_is_floating(g->dtype))
        return torc__error(TORC_ERR_DTYPE, "GradScaler: a gradient of dtype %s cannot be unscaled",
                           torc_dtype_name(g->dtype));
    torc_status st = torc_mul_scalar_(g, torc_s(inv_scale));
    if (st) return st;
    torc_tensor *z = torc_mul_scalar(g, torc_s(0.0));
    torc_tensor *s = z ? torc_sum(z, TORC_ALL_DIMS, false) : NULL;
    double v = 0.0;
    if (!s || torc_item(s, &v)) return torc_last_status();
    if (v != 0.0) *found = true;
    return TORC_OK;
}

// Unscales every non-NULL grads[i] (borrowed) into record r.
static torc_status unscale_list(torc_grad_scaler *gs, opt_record *r, int n, torc_tensor *const *grads) {
    // PyTorch computes the inverse in double and rounds it to float32.
    const double inv = (float)(1.0 / gs->scale);
    bool found = false;
    torc_status st = TORC_OK;
    torc_scope_push();
    torc_no_grad_begin();
    for (int i = 0; !st && i < n; i++)
        if (grads[i]) st = unscale_one(grads[i], inv, &found);
    torc_no_grad_end();
    torc_scope_pop();
    if (st) return st;
    r->found_inf = r->found_inf || found;
    return TORC_OK;
}

torc_status torc_grad_scaler_unscale_(torc_grad_scaler *gs, torc_optimizer *opt) {
    if (!gs || !opt) return torc__null_arg("torc_grad_scaler_unscale_: NULL argument");
    if (!gs->o.enabled) return TORC_OK;
    opt_record *r = record_of(gs, opt);
    if (!r) return torc_last_status();
    if (r->stage == STAGE_UNSCALED)
        return torc__error(TORC_ERR_RUNTIME, "unscale_() has already been called on this optimizer since the last update().");
    if (r->stage == STAGE_STEPPED) return torc__error(TORC_ERR_RUNTIME, "unscale_() is being called after step().");
    const int n = torc_optimizer_num_params(opt);
    torc_tensor **grads = calloc((size_t)(n > 0 ? n : 1), sizeof *grads);
    if (!grads) return torc__error(TORC_ERR_OOM, "out of host memory unscaling %d gradients", n);
    torc_status st = TORC_OK;
    for (int i = 0; !st && i < n; i++) {
        torc_scope_push();
        torc_tensor *p = torc_optimizer_param(opt, i);
        grads[i] = p ? torc_grad(p) : NULL;
        if (!p) st = torc_last_status();
        if (grads[i]) torc_retain(grads[i]);
        torc_scope_pop();
    }
    if (!st) st = unscale_list(gs, r, n, grads);
    for (int i = 0; i < n; i++) torc_release(grads[i]);
    free(grads);
    if (!st) r->stage = STAGE_UNSCALED;
    return st;
}

torc_status torc_grad_scaler_unscale_grads_(torc_grad_scaler *gs, int n, torc_tensor *const *grads) {
    if (!gs || n < 0 || (n > 0 && !grads))
        return torc__error(TORC_ERR_INVALID_ARG, "torc_grad_scaler_unscale_grads_: bad arguments");
    if (!gs->o.enabled) return TORC_OK;
    opt_record *r = record_of(gs, NULL);
    if (!r) return torc_last_status();
    torc_status st = unscale_list(gs, r, n, grads);
    if (!st) r->stage = STAGE_UNSCALED;
    return st;
}

bool torc_grad_scaler_found_inf(const torc_grad_scaler *gs) {
    if (!gs || !gs->o.enabled) return false;
    for (int i = 0; i < gs->n_rec; i++)
        if (gs->rec[i].found_inf) return true;
    return false;
}

torc_status torc_grad_scaler_step(torc_grad_scaler *gs, torc_optimizer *opt, bool *stepped) {
    if (stepped) *stepped = false;
    if (!gs || !opt) return torc__null_arg("torc_grad_scaler_step: NULL argument");
    if (!gs->o.enabled) {
        torc_status st = torc_optimizer_step(opt);
        if (!st && stepped) *stepped = true;
        return st;
    }
    opt_record *r = record_of(gs, opt);
    if (!r) return torc_last_status();
    if (r->stage == STAGE_STEPPED)
        return torc__error(TORC_ERR_RUNTIME, "step() has already been called since the last update().");
    if (r->stage == STAGE_READY) {
        torc_status st = torc_grad_scaler_unscale_(gs, opt);
        if (st) return st;
        r = record_of(gs, opt);  // unscale_ may have grown the array
    }
    if (!r->found_inf) {
        torc_status st = torc_optimizer_step(opt);
        if (st) return st;
        if (stepped) *stepped = true;
    }
    r->stage = STAGE_STEPPED;
    return TORC_OK;
}

torc_status torc_grad_scaler_update(torc_grad_scaler *gs) {
    if (!gs) return torc__null_arg("torc_grad_scaler_update: NULL argument");
    if (!gs->o.enabled) return TORC_OK;
    bool checked = false, found = false;
    for (int i = 0; i < gs->n_rec; i++) {
        checked = checked || gs->rec[i].stage != STAGE_READY;
        found = found || gs->rec[i].found_inf;
    }
    if (!checked) return torc__error(TORC_ERR_RUNTIME, "No inf checks were recorded prior to update.");
    // torch._amp_update_scale_, in float32 as PyTorch's scale tensor.
    if (found) {
        gs->scale = (float)(gs->scale * (float)gs->o.backoff_factor);
        gs->growth_tracker = 0;
    } else if (gs->growth_tracker + 1 == gs->o.growth_interval) {
        const float grown = (float)(gs->scale * (float)gs->o.growth_factor);
        if (isfinite(grown)) gs->scale = grown;
        gs->growth_tracker = 0;
    } else {
        gs->growth_tracker++;
    }
    gs->n_rec = 0;
    return TORC_OK;
}

// ---- state ----
torc_status torc_grad_scaler_get_state(const torc_grad_scaler *gs, torc_grad_scaler_state *out) {
    if (!gs || !out) return torc__null_arg("torc_grad_scaler_get_state: NULL argument");
    out->options = gs->o;
    out->scale = gs->scale;
    out->growth_tracker = gs->growth_tracker;
    return TORC_OK;
}

torc_status torc_grad_scaler_set_state(torc_grad_scaler *gs, const torc_grad_scaler_state *st) {
    if (!gs || !st) return torc__null_arg("torc_grad_scaler_set_state: NULL argument");
    torc_status s = check_options(&st->options);
    if (s) return s;
    if (!(st->scale > 0.0 && st->scale <= 3.4028234663852886e38) || st->growth_tracker < 0)
        return torc__error(TORC_ERR_INVALID_ARG, "GradScaler state: scale must be a positive finite float32 and "
                                                 "_growth_tracker >= 0, got %g and %lld", st->scale,
                           (long long)st->growth_tracker);
    gs->o = st->options;
    gs->scale = (float)st->scale;
    gs->growth_tracker = st->growth_tracker;
    gs->n_rec = 0;
    return TORC_OK;
}

static const char *key(char *buf, size_t n, const char *prefix, const char *name) {
    snprintf(buf, n, "%s%s", prefix ? prefix : "grad_scaler.", name);
    return buf;
}

torc_status torc_grad_scaler_state_dict(const torc_grad_scaler *gs, torc_state_dict *sd, const char *prefix) {
    if (!gs || !sd) return torc__null_arg("torc_grad_scaler_state_dict: NULL argument");
    const struct { const char *name; double v; } f[] = {
        {"scale", gs->scale},
        {"growth_factor", gs->o.growth_factor},
        {"backoff_factor", gs->o.backoff_factor},
        {"growth_interval", (double)gs->o.growth_interval},
        {"_growth_tracker", (double)gs->growth_tracker},
        {"enabled", gs->o.enabled ? 1.0 : 0.0},
    };
    char k[256], v[64];
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        snprintf(v, sizeof v, "%.17g", f[i].v);
        torc_status st = torc_state_dict_set_meta(sd, key(k, sizeof k, prefix, f[i].name), v);
        if (st) return st;
    }
    return TORC_OK;
}

static torc_status read_meta(const torc_state_dict *sd, const char *prefix, const char *name, double *out) {
    char k[256];
    const char *v = torc_state_dict_get_meta(sd, key(k, sizeof k, prefix, name));
    if (!v) return torc__error(TORC_ERR_INVALID_ARG, "GradScaler state: missing key '%s'", k);
    char *end;
    *out = strtod(v, &end);
    if (end == v || *end) return torc__error(TORC_ERR_INVALID_ARG, "GradScaler state: '%s' is not a number: '%s'", k, v);
    return TORC_OK;
}

torc_status torc_grad_scaler_load_state_dict(torc_grad_scaler *gs, const torc_state_dict *sd, const char *prefix) {
    if (!gs || !sd) return torc__null_arg("torc_grad_scaler_load_state_dict: NULL argument");
    double scale, gf, bf, gi, gt, en;
    torc_status st = read_meta(sd, prefix, "scale", &scale);
    if (!st) st = read_meta(sd, prefix, "growth_factor", &gf);
    if (!st) st = read_meta(sd, prefix, "backoff_factor", &bf);
    if (!st) st = read_meta(sd, prefix, "growth_interval", &gi);
    if (!st) st = read_meta(sd, prefix, "_growth_tracker", &gt);
    if (!st) st = read_meta(sd, prefix, "enabled", &en);
    if (st) return st;
    if (gi != floor(gi) || gt != floor(gt) || gi > 9e18 || gt > 9e18 || (en != 0.0 && en != 1.0))
        return torc__error(TORC_ERR_INVALID_ARG, "GradScaler state: growth_interval and _growth_tracker must be "
                                                 "integers and enabled 0 or 1");
    const torc_grad_scaler_state s = {{scale, gf, bf, (int64_t)gi, en == 1.0}, scale, (int64_t)gt};
    return torc_grad_scaler_set_state(gs, &s);
}
