// core/param_groups.c — an optimizer whose parameters are split into a weight-decay group and a
// group without it, as nanoGPT's configure_optimizers (and llm.c's) build AdamW's groups.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

bool torc_decay_matrices(const char *name, const torc_tensor *param, void *user) {
    (void)name, (void)user;
    return param && param->ndim >= 2;
}

bool torc_decay_matrices_except(const char *name, const torc_tensor *param, void *user) {
    if (!torc_decay_matrices(name, param, NULL)) return false;
    for (const char *const *skip = user; name && skip && *skip; skip++)
        if (!strcmp(*skip, name)) return false;
    return true;
}

torc_optimizer *torc_optimizer_new_decay_groups(const char *name_or_path, int n, const char *const *names,
                                                torc_tensor *const *params, const char *hparams, double weight_decay,
                                                torc_decay_fn decay, void *user, int *n_decay) {
    if (n <= 0 || !params) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "optimizer got an empty parameter list");
    for (int i = 0; i < n; i++)
        if (!params[i]) return TORC_NULL_ARG_FAIL("optimizer can only optimize Tensors, but parameter %d is NULL", i);
    if (!decay) decay = torc_decay_matrices;
    torc_tensor **sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of memory");
    // Decayed parameters first, then the others, each in the order given.
    int nd = 0, nn = 0;
    for (int i = 0; i < n; i++)
        if (decay(names ? names[i] : NULL, params[i], user)) sorted[nd++] = params[i];
    for (int i = 0; i < n; i++)
        if (!decay(names ? names[i] : NULL, params[i], user)) sorted[nd + nn++] = params[i];
    if (nd + nn != n) {  // a predicate that changed its answer between the two passes
        free(sorted);
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "optimizer_new_decay_groups: the decay predicate is not stable");
    }
    // The group's weight_decay follows the caller's settings, so it wins over one given there.
    const char *base = hparams ? hparams : "";
    const size_t len = strlen(base) + 64;
    char *first = malloc(len), *second = malloc(64);
    torc_optimizer *opt = NULL;
    if (first && second) {
        snprintf(first, len, "%s%sweight_decay=%.17g", base, *base ? " " : "", nd ? weight_decay : 0.0);
        snprintf(second, 64, "weight_decay=0");
        opt = torc_optimizer_new(name_or_path, nd ? nd : nn, nd ? sorted : sorted + nd, first);
        if (opt && nd && nn && torc_optimizer_add_param_group(opt, nn, sorted + nd, second) < 0) {
            torc_optimizer_free(opt);
            opt = NULL;
        }
    } else {
        torc__error(TORC_ERR_OOM, "out of memory");
    }
    free(first);
    free(second);
    free(sorted);
    if (opt && n_decay) *n_decay = nd;
    return opt;
}
