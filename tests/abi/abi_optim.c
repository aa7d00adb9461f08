// tests/abi/abi_optim.c — plain SGD (p -= lr * g) built against the frozen optimizer headers of
// tests/abi/v2_0: an older optimizer plugin on the current core (tests/abi/test_abi.c). It checks
// the host table it is given through TORC_OPTIM_HOST_HAS, as a plugin must.
#include <math.h>
#include <stddef.h>

#include "torc/optim.h"

static const torc_optim_hparam hparams[] = {
    {"lr", 1, TORC_OPTIM_HP_REAL, {0.1}, 0.0, HUGE_VAL, 0, "learning rate"},
};

static int abisgd_step(const torc_optim_host *h, const torc_optim_group *group, int n, torc_tensor *const *params,
                       torc_tensor *const *grads, torc_tensor **states, const int64_t *step_index) {
    (void)states, (void)step_index;
    if (h->abi_version >> 16 != TORC_OPTIM_ABI_MAJOR || !TORC_OPTIM_HOST_HAS(h, add_scaled_))
        return h->error(TORC_ERR_BACKEND, "abisgd: the host table lacks add_scaled_");
    for (int i = 0; i < n; i++)
        if (h->add_scaled_(params[i], grads[i], -group->hp[0])) return 1;
    return 0;
}

static const torc_optim_vtable vtable = {
    .abi_version = TORC_OPTIM_ABI_VERSION, .struct_size = sizeof(torc_optim_vtable), .name = "abisgd",
    .n_hparams = 1, .hparams = hparams, .n_states = 0, .state_names = NULL, .check = NULL, .step = abisgd_step,
};

TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t host_abi_version) {
    return host_abi_version >> 16 == TORC_OPTIM_ABI_MAJOR ? &vtable : NULL;
}
