// tests/plugins/adam_v11.c — the bundled adam (or, with -DADAMW, adamw) as it runs on a core of
// optimizer ABI 1.1: its step gets a copy of the host table cut to the v1.1 size, so
// plugins/optim/adam-impl.h takes its composed path. tests/test_adam.c compares it with the
// bundled plugin, which runs the fused TORC_OP_ADAM_STEP, bit for bit.
#include <stddef.h>

#include "../../plugins/optim/adam-impl.h"

#ifdef ADAMW
#define NAME "adamw_v11"
static const torc_optim_hparam hparams[] = ADAM_HPARAMS(1e-2);
#else
#define NAME "adam_v11"
static const torc_optim_hparam hparams[] = ADAM_HPARAMS(0.0);
#endif

static int v11_step(const torc_optim_host *h, const torc_optim_group *group, int n, torc_tensor *const *params,
                    torc_tensor *const *grads, torc_tensor **states, const int64_t *step_index) {
    torc_optim_host old = *h;
    old.struct_size = (uint32_t)offsetof(torc_optim_host, adam_step_);  // a 1.1 host ends before it
#ifdef ADAMW
    return adam_update(&old, group->hp, true, n, params, grads, states, step_index);
#else
    return adam_update(&old, group->hp, false, n, params, grads, states, step_index);
#endif
}

static const torc_optim_vtable vtable = {
    .abi_version = TORC_OPTIM_ABI_VERSION,
    .struct_size = sizeof(torc_optim_vtable),
    .name = NAME,
    .n_hparams = sizeof hparams / sizeof hparams[0],
    .hparams = hparams,
    .n_states = N_STATES,
    .state_names = adam_state_names,
    .check = NULL,
    .step = v11_step,
};

TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    return &vtable;
}
