// plugins/optim/adamw.c — torch.optim.AdamW as a torc optimizer plugin: Adam with decoupled weight decay
// (p *= 1 - lr*weight_decay before the update; default weight_decay 0.01), as PyTorch's.
#include "adam-impl.h"

static const torc_optim_hparam hparams[] = ADAM_HPARAMS(1e-2);

static int adamw_step(const torc_optim_host *h, const torc_optim_group *group, int n, torc_tensor *const *params,
                     torc_tensor *const *grads, torc_tensor **states, const int64_t *step_index) {
    return adam_update(h, group->hp, true, n, params, grads, states, step_index);
}

static const torc_optim_vtable vtable = {
    .abi_version = TORC_OPTIM_ABI_VERSION,
    .struct_size = sizeof(torc_optim_vtable),
    .name = "adamw",
    .n_hparams = sizeof hparams / sizeof hparams[0],
    .hparams = hparams,
    .n_states = N_STATES,
    .state_names = adam_state_names,
    .check = NULL,
    .step = adamw_step,
    .flags = TORC_OPTIM_WHOLE_GROUP,  // a group's parameters in one call: one list op a step
};

TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t host_abi_version) {
    (void)host_abi_version;  // the loader compares versions and names both on a mismatch
    return &vtable;
}
