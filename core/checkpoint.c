// core/checkpoint.c — training checkpoints: a model's named tensors, the optimizer's state and
// hyperparameters, the step and the generator in one safetensors file; loading checks first.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

#define FORMAT_KEY "torc.format"
#define FORMAT "torc-checkpoint/1"
#define OPT_PREFIX "optimizer."

static bool is_optimizer_name(const char *name) { return !strncmp(name, OPT_PREFIX, strlen(OPT_PREFIX)); }

torc_status torc_checkpoint_save(const char *path, int n, const char *const *names, torc_tensor *const *tensors,
                                 const torc_optimizer *opt, int64_t step, const torc_generator *gen) {
    if (!path || n < 0 || (n > 0 && (!names || !tensors)))
        return torc__error(TORC_ERR_INVALID_ARG, "torc_checkpoint_save: NULL argument");
    for (int i = 0; i < n; i++) {
        if (!names[i] || !*names[i] || !tensors[i])
            return torc__null_arg("torc_checkpoint_save: tensor %d has no name or is NULL", i);
        if (is_optimizer_name(names[i]) || !strcmp(names[i], "__metadata__"))
            return torc__error(TORC_ERR_INVALID_ARG, "torc_checkpoint_save: the name '%s' is reserved", names[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(names[i], names[j]))
                return torc__error(TORC_ERR_INVALID_ARG, "torc_checkpoint_save: the name '%s' is used twice", names[i]);
    }
    torc_state_dict *sd = torc_state_dict_new();
    if (!sd) return torc_last_status();
    torc_status st = torc_state_dict_set_meta(sd, FORMAT_KEY, FORMAT);
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)step);
    if (!st) st = torc_state_dict_set_meta(sd, "step", v);
    if (!st && gen) {
        uint64_t seed, offset;
        torc_generator_get_state(gen, &seed, &offset);
        snprintf(v, sizeof v, "%llu", (unsigned long long)seed);
        st = torc_state_dict_set_meta(sd, "generator.seed", v);
        snprintf(v, sizeof v, "%llu", (unsigned long long)offset);
        if (!st) st = torc_state_dict_set_meta(sd, "generator.offset", v);
    }
    for (int i = 0; i < n && !st; i++) st = torc_state_dict_set(sd, names[i], tensors[i]);
    if (!st && opt) st = torc_optimizer_state_dict(opt, sd, OPT_PREFIX);
    if (!st) st = torc_save(sd, path);
    torc_state_dict_free(sd);
    return st;
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-') return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) return false;
    *out = v;
    return true;
}

// Checks the model's tensors against the file's (PyTorch's strict load_state_dict): every name
// present, none unexpected, shapes and dtypes equal.
static torc_status check_model(const char *path, const torc_state_dict *sd, int n, const char *const *names,
                               torc_tensor *const *tensors) {
    char missing[512] = "", unexpected[512] = "";
    for (int i = 0; i < n; i++) {
        const torc_tensor *src = torc__state_dict_peek(sd, names[i]);
        const torc_tensor *dst = tensors[i];
        if (!dst) return torc__null_arg("torc_checkpoint_load: tensor %d is NULL", i);
        if (!src) {
            size_t used = strlen(missing);
            snprintf(missing + used, sizeof missing - used, "%s\"%s\"", used ? ", " : "", names[i]);
            continue;
        }
        bool same = src->ndim == dst->ndim;
        for (int d = 0; same && d < dst->ndim; d++) same = src->shape[d] == dst->shape[d];
        char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
        if (!same)
            return torc__error(TORC_ERR_SHAPE,
                               "'%s': size mismatch for %s: copying a param with shape %s from checkpoint, the shape in "
                               "current model is %s.",
                               path, names[i], torc__shape_str(src->ndim, src->shape, b1, sizeof b1),
                               torc__shape_str(dst->ndim, dst->shape, b2, sizeof b2));
        if (src->dtype != dst->dtype)
            return torc__error(TORC_ERR_DTYPE, "'%s': dtype mismatch for %s: the checkpoint holds %s, the current model %s",
                               path, names[i], torc_dtype_name(src->dtype), torc_dtype_name(dst->dtype));
    }
    const int m = torc_state_dict_size(sd);
    for (int k = 0; k < m; k++) {
        const char *name = torc_state_dict_name(sd, k);
        if (is_optimizer_name(name)) continue;
        bool known = false;
        for (int i = 0; i < n && !known; i++) known = !strcmp(names[i], name);
        if (!known) {
            size_t used = strlen(unexpected);
            snprintf(unexpected + used, sizeof unexpected - used, "%s\"%s\"", used ? ", " : "", name);
        }
    }
    if (missing[0] || unexpected[0])
        return torc__error(TORC_ERR_INVALID_ARG, "'%s': Error(s) in loading state_dict:%s%s%s%s%s", path,
                           missing[0] ? " Missing key(s) in state_dict: " : "", missing, missing[0] ? "." : "",
                           unexpected[0] ? " Unexpected key(s) in state_dict: " : "", unexpected[0] ? unexpected : "");
    return TORC_OK;
}

torc_status torc_checkpoint_load(const char *path, int n, const char *const *names, torc_tensor *const *tensors,
                                 torc_optimizer *opt, int64_t *step, torc_generator *gen) {
    if (!path || n < 0 || (n > 0 && (!names || !tensors)))
        return torc__error(TORC_ERR_INVALID_ARG, "torc_checkpoint_load: NULL argument");
    // Load next to the model so the copies below stay on one device.
    torc_device *dev = n > 0 && tensors[0] ? torc_get_device(tensors[0]) : NULL;
    torc_state_dict *sd = torc_load(path, dev);
    if (!sd) return torc_last_status();
    // 1. Every check that can fail, before anything changes.
    torc_status st = check_model(path, sd, n, names, tensors);
    int64_t step_v = 0;
    uint64_t seed = 0, offset = 0;
    const char *format = torc_state_dict_get_meta(sd, FORMAT_KEY);
    if (!st && (opt || step || gen) && (!format || strcmp(format, FORMAT)))
        st = torc__error(TORC_ERR_IO, "'%s' is not a torc checkpoint (%s is %s%s%s, expected \"%s\")", path, FORMAT_KEY,
                         format ? "\"" : "", format ? format : "missing", format ? "\"" : "", FORMAT);
    if (!st && step) {
        // A step the caller could not count on from (negative, or INT64_MAX, whose next step
        // overflows) is as invalid as a missing one.
        const char *s = torc_state_dict_get_meta(sd, "step");
        char *end = NULL;
        errno = 0;
        long long v = s ? strtoll(s, &end, 10) : 0;
        if (!s || *end || end == s || errno || v < 0 || v == INT64_MAX)
            st = torc__error(TORC_ERR_IO, "'%s': the checkpoint has no valid step ('%s')", path, s ? s : "missing");
        step_v = v;
    }
    if (!st && gen &&
        (!parse_u64(torc_state_dict_get_meta(sd, "generator.seed"), &seed) ||
         !parse_u64(torc_state_dict_get_meta(sd, "generator.offset"), &offset)))
        st = torc__error(TORC_ERR_IO, "'%s': the checkpoint holds no generator state", path);
    // 2. The optimizer checks everything and only then applies; it is the last step that can
    //    refuse, so the model is untouched whenever anything fails.
    if (!st && opt) st = torc_optimizer_load_state_dict(opt, sd, OPT_PREFIX);
    // 3. Copy the weights in place (as PyTorch's load_state_dict: under no_grad).
    if (!st) {
        torc_no_grad_begin();
        for (int i = 0; i < n && !st; i++) st = torc_copy_(tensors[i], torc__state_dict_peek(sd, names[i]));
        torc_no_grad_end();
        if (!st && step) *step = step_v;
        if (!st && gen) torc_generator_set_state(gen, seed, offset);
    }
    torc_state_dict_free(sd);
    return st;
}
