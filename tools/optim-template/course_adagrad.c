// course_adagrad.c — a torc optimizer plugin in one file: the course's AdaGrad,
// g2 += grad^2; p -= lr * grad / sqrt(g2 + 1e-5). Build it with the CMakeLists.txt beside it.
//
// torc dlopens libtorc_optim_course_adagrad.so and calls torc_optim_entry() for the vtable
// below. The plugin never links libtorc: it computes through the host table `h` that torc
// passes to step(), so it runs on every backend (and its FLOPs and memory are counted).
// The ABI and the rules are in <torc/optim.h>.
#include <math.h>

#include <torc/optim.h>

// Hyperparameters: users set them by name ("lr=0.1"); step() reads group->hp[...] at these
// offsets (a hyperparameter with n_values > 1 takes that many slots).
enum { LR };

static const torc_optim_hparam hparams[] = {
    // name, n_values, kind, defaults, min, max, flags, words for "Invalid learning rate: -1.0"
    {"lr", 1, TORC_OPTIM_HP_REAL, {0.01}, 0.0, HUGE_VAL, 0, "learning rate"},
};

// Per-parameter state buffers: states[i * 1 + 0] is parameter i's "g2". torc keeps them,
// tags them as optimizer state, and saves them in checkpoints.
static const char *const state_names[] = {"g2"};

// One update of the n parameters of a group that have a gradient. Every tensor a host
// function returns is freed after step() returns unless it is stored in a state slot; a
// failed host call has already set the error, so just return nonzero.
static int course_adagrad_step(const torc_optim_host *h, const torc_optim_group *group, int n,
                               torc_tensor *const *params, torc_tensor *const *grads, torc_tensor **states,
                               const int64_t *step_index) {
    (void)step_index;  // parameter i's update count, 1 on its first step (AdaGrad needs none)
    const double lr = group->hp[LR];
    for (int i = 0; i < n; i++) {
        torc_tensor *p = params[i];
        const torc_tensor *grad = grads[i];
        torc_tensor **g2 = &states[i];
        if (*g2 == NULL && (*g2 = h->zeros_like(p)) == NULL) return 1;  // g2 = zeros_like(grad)
        torc_tensor *sq = h->square(grad);                              // g2 += grad^2
        if (sq == NULL || h->add_(*g2, sq) != TORC_OK) return 1;
        torc_tensor *denom = h->add_scalar(*g2, 1e-5);                  // sqrt(g2 + 1e-5)
        if (denom == NULL || h->sqrt_(denom) != TORC_OK) return 1;
        torc_tensor *scaled = h->mul_scalar(grad, lr);                  // p -= lr * grad / denom
        torc_tensor *update = scaled ? h->div(scaled, denom) : NULL;
        if (update == NULL || h->sub_(p, update) != TORC_OK) return 1;
    }
    return 0;
}

static const torc_optim_vtable vtable = {
    .abi_version = TORC_OPTIM_ABI_VERSION,
    .struct_size = sizeof(torc_optim_vtable),
    .name = "course_adagrad",  // must match the file name libtorc_optim_<name>.so
    .n_hparams = sizeof hparams / sizeof hparams[0],
    .hparams = hparams,
    .n_states = sizeof state_names / sizeof state_names[0],
    .state_names = state_names,
    .check = NULL,             // optional: rules across hyperparameters
    .step = course_adagrad_step,
};

// The one exported symbol. torc compares versions itself and names both on a mismatch.
TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    return &vtable;
}
