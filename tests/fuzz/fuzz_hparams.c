// tests/fuzz/fuzz_hparams.c — libFuzzer harness for optimizer hyperparameter strings, the
// "name=value name=v1,v2" settings torc_optimizer_new and torc_optimizer_set_hparams parse
// (torc-train's --lr/--hp end up there). Input: one byte choosing the optimizer plugin and the
// group, then the settings text. Checks: a failure sets an error and changes no value; accepted
// settings survive an optimizer step.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "torc/optim.h"
#include "torc/torc.h"

#define MAX_TEXT 512
#define MAX_HP 64  // values over all hyperparameters of a plugin

static const char *const optimizers[] = {"sgd", "adagrad", "rmsprop", "adam", "adamw"};
#define N_OPTIM (int)(sizeof optimizers / sizeof optimizers[0])

// Every hyperparameter value of group 0, flat in vtable order.
static int snapshot(const torc_optimizer *opt, double *out) {
    const torc_optim_vtable *vt = torc_optimizer_vtable(opt);
    int n = 0;
    for (int i = 0; i < vt->n_hparams && n + vt->hparams[i].n_values <= MAX_HP; i++) {
        if (torc_optimizer_get_hparam(opt, 0, vt->hparams[i].name, out + n)) abort();
        n += vt->hparams[i].n_values;
    }
    return n;
}

static void failed_says_why(void) {
    if (torc_last_status() == TORC_OK || !torc_last_error()[0]) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *name = optimizers[data[0] % N_OPTIM];
    const int group = data[0] / N_OPTIM % 3 - 1;  // -1 (all), 0, or 1 (which does not exist)
    char settings[MAX_TEXT + 1];
    const size_t len = size - 1 < MAX_TEXT ? size - 1 : MAX_TEXT;
    memcpy(settings, data + 1, len);
    settings[len] = '\0';

    torc_clear_error();
    torc_scope_push();
    torc_tensor *p = torc_parameter(torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32));
    if (!p || torc_set_grad(p, torc_full(TORC_SHAPE(2), 0.5, TORC_DTYPE_F32))) abort();
    // The constructor: the settings over the plugin's defaults.
    torc_optimizer *opt = torc_optimizer_new(name, 1, &p, settings);
    if (opt) {
        if (torc_optimizer_step(opt)) failed_says_why();  // accepted values may still diverge, never crash
        torc_optimizer_free(opt);
    } else {
        failed_says_why();
    }
    // set_hparams on a default optimizer: all or nothing.
    torc_clear_error();
    opt = torc_optimizer_new(name, 1, &p, NULL);
    if (!opt) abort();
    double before[MAX_HP], after[MAX_HP];
    const int n = snapshot(opt, before);
    if (torc_optimizer_set_hparams(opt, group, settings)) {
        failed_says_why();
        if (snapshot(opt, after) != n || memcmp(before, after, sizeof(double) * (size_t)n)) abort();
    }
    torc_optimizer_free(opt);
    torc_scope_pop();
    return 0;
}

#ifdef TORC_FUZZ_SEEDS
#include <stdio.h>

// Written from the plugins themselves: every hyperparameter at its default ("lr=0.001
// betas=0.9,0.999 ..."), one at a time and all together, for each optimizer.
static void fuzz_write_seeds(void) {
    for (int o = 0; o < N_OPTIM; o++) {
        const torc_optim_vtable *vt = torc_optim_load(optimizers[o]);
        if (!vt) {
            fprintf(stderr, "%s\n", torc_last_error());
            exit(1);
        }
        char all[MAX_TEXT + 2] = {(char)o};
        size_t used = 1;
        for (int i = 0; i < vt->n_hparams; i++) {
            const torc_optim_hparam *h = &vt->hparams[i];
            char one[128];
            int m = snprintf(one, sizeof one, "%s=", h->name);
            for (int k = 0; k < h->n_values; k++) {
                const char *sep = k ? "," : "";
                if (h->kind == TORC_OPTIM_HP_BOOL)
                    m += snprintf(one + m, sizeof one - (size_t)m, "%s%s", sep, h->defaults[k] != 0 ? "true" : "false");
                else
                    m += snprintf(one + m, sizeof one - (size_t)m, "%s%.17g", sep, h->defaults[k]);
            }
            char seed[130] = {(char)(o + N_OPTIM)};  // group 0
            memcpy(seed + 1, one, (size_t)m);
            fuzz_seed(seed, 1 + (size_t)m);
            used += (size_t)snprintf(all + used, sizeof all - used, "%s%s", used > 1 ? " " : "", one);
        }
        fuzz_seed(all, used < sizeof all ? used : sizeof all - 1);
    }
}
#endif
