// torc/optim.h — the optimizer plugin ABI: the versioned vtable an optimizer exports and the
// host API table torc hands it. A plugin includes this header only and does not link libtorc.
//
// How it fits together (SQLite's loadable-extension pattern):
//   - A plugin is a shared object libtorc_optim_<name>.so exporting one symbol,
//     torc_optim_entry(host_abi_version), which returns a const torc_optim_vtable.
//   - The vtable names the optimizer, its hyperparameters (name, defaults, valid range) and its
//     per-parameter state buffers, and has a step() that updates one parameter group.
//   - step() receives a torc_optim_host: a table of function pointers to torc's tensor ops. A
//     plugin computes only through it, so it runs on every backend and its work is counted.
//
// Rules step() may rely on and must follow:
//   - The host calls step() once per parameter (n is 1), as PyTorch's per-parameter loop, each
//     time inside a scope and with grad mode off: every tensor a host function returns is freed
//     when that call returns (before the next parameter's temporaries are made), and in-place
//     updates of parameters are allowed. A plugin should still loop over its n parameters. A
//     plugin whose vtable sets TORC_OPTIM_WHOLE_GROUP (v1.3) gets each group's parameters in one
//     call instead (torch.optim's foreach / fused form), so that it can update them all with one
//     list op (adam_step_list_); its temporaries then live until that call returns.
//   - states[i * n_states + j] is buffer j (vtable->state_names[j]) of parameter i. It is NULL
//     until the plugin first stores a tensor there (made with a host function, e.g.
//     zeros_like); the host then keeps it, counts it as optimizer state from its creation in
//     memory accounting and saves it in state dicts and checkpoints. A stored buffer must have
//     its parameter's shape, dtype and device; anything else is refused (TORC_ERR_SHAPE naming
//     the plugin and the buffer) and the slot keeps what it held. A buffer a configuration does not use (Adam's
//     max_exp_avg_sq without amsgrad) simply stays NULL.
//   - Host functions return TORC_OK / a new tensor, or an error status / NULL with the message
//     set. step() and check() return 0 on success, else nonzero: pass a failed host call on
//     (its message stands) or return host->error(TORC_ERR_..., "message").
#ifndef TORC_OPTIM_H
#define TORC_OPTIM_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- versions ----
// abi_version = major << 16 | minor. The loader refuses a plugin whose major differs from its
// own or whose vtable is smaller than the v1 vtable; minor versions only append members.
// A plugin of any minor of the same major loads: the core calls a vtable member added after
// x.0 only where the plugin's struct_size covers it, and ignores members it does not know.
// The host table carries the same two fields so a plugin can check what the host offers: a
// plugin that uses a member added after v1.0 checks, once, that the host has it:
//   if (!TORC_OPTIM_HOST_HAS(host, sign)) return host->error(TORC_ERR_BACKEND, "...needs optimizer ABI 1.1");
// (a plugin built for a newer minor than the host's would otherwise read past the table).
#define TORC_OPTIM_ABI_MAJOR 1
#define TORC_OPTIM_ABI_MINOR 3  // 1.1: sign ... where; 1.2: adam_step_; 1.3: adam_step_list_, vtable flags
#define TORC_OPTIM_ABI_VERSION ((uint32_t)(TORC_OPTIM_ABI_MAJOR << 16 | TORC_OPTIM_ABI_MINOR))

typedef struct torc_tensor torc_tensor;  // opaque; the same handle as torc.h's

// True when the host table has member m (it is at least as new as the minor that added m).
#define TORC_OPTIM_HOST_HAS(host, m) \
    ((host)->struct_size >= offsetof(torc_optim_host, m) + sizeof(((torc_optim_host *)0)->m) && (host)->m)

// ---- the host API table ----
// Every tensor-returning function returns a new tensor (owned by the step's scope) or NULL with
// the error set. Scalars are doubles; like PyTorch's CPU kernels, the host rounds a scalar to
// the tensor's computation precision (float for f32/f16/bf16, double for f64) before use.
typedef struct torc_optim_host {
    uint32_t abi_version;   // TORC_OPTIM_ABI_VERSION of the host
    uint32_t struct_size;   // sizeof(torc_optim_host) of the host

    // v1.0: errors. error() sets torc's last error (printf-style message) and returns status.
    torc_status (*error)(torc_status status, const char *fmt, ...);
    const char *(*last_error)(void);

    // v1.0: inspection
    int64_t (*numel)(const torc_tensor *t);
    torc_dtype (*dtype)(const torc_tensor *t);

    // v1.0: new tensors, same shape, dtype and device as t
    torc_tensor *(*zeros_like)(const torc_tensor *t);
    torc_tensor *(*full_like)(const torc_tensor *t, double value);
    torc_tensor *(*clone)(const torc_tensor *t);

    // v1.0: out of place (broadcasting, PyTorch's type promotion)
    torc_tensor *(*add)(const torc_tensor *a, const torc_tensor *b);
    torc_tensor *(*add_scaled)(const torc_tensor *a, const torc_tensor *b, double alpha); // a + alpha*b
    torc_tensor *(*sub)(const torc_tensor *a, const torc_tensor *b);
    torc_tensor *(*mul)(const torc_tensor *a, const torc_tensor *b);
    torc_tensor *(*div)(const torc_tensor *a, const torc_tensor *b);
    torc_tensor *(*maximum)(const torc_tensor *a, const torc_tensor *b);
    torc_tensor *(*add_scalar)(const torc_tensor *a, double s);
    torc_tensor *(*mul_scalar)(const torc_tensor *a, double s);
    torc_tensor *(*div_scalar)(const torc_tensor *a, double s);
    torc_tensor *(*neg)(const torc_tensor *a);
    torc_tensor *(*sqrt)(const torc_tensor *a);
    torc_tensor *(*square)(const torc_tensor *a);
    // self + value * a * b, evaluated as PyTorch's addcmul: fma(value * a, b, self), one pass
    torc_tensor *(*addcmul)(const torc_tensor *self, const torc_tensor *a, const torc_tensor *b,
                            double value);

    // v1.0: in place on self (self keeps its dtype and shape)
    torc_status (*copy_)(torc_tensor *self, const torc_tensor *src);
    torc_status (*fill_)(torc_tensor *self, double value);
    torc_status (*zero_)(torc_tensor *self);
    torc_status (*add_)(torc_tensor *self, const torc_tensor *other);
    torc_status (*add_scaled_)(torc_tensor *self, const torc_tensor *other, double alpha); // self += alpha*other
    torc_status (*sub_)(torc_tensor *self, const torc_tensor *other);
    torc_status (*mul_)(torc_tensor *self, const torc_tensor *other);
    torc_status (*div_)(torc_tensor *self, const torc_tensor *other);
    torc_status (*maximum_)(torc_tensor *self, const torc_tensor *other);
    torc_status (*add_scalar_)(torc_tensor *self, double s);
    torc_status (*mul_scalar_)(torc_tensor *self, double s);
    torc_status (*div_scalar_)(torc_tensor *self, double s);
    torc_status (*sqrt_)(torc_tensor *self);
    // torch.addcmul_ / addcdiv_ / lerp_ with PyTorch's evaluation order:
    // self = fma(value * a, b, self) ; self += (value * a) / b ;
    // self = |w| < 0.5 ? fma(w, end - self, self) : fma(w - 1, end - self, end) (one pass each)
    torc_status (*addcmul_)(torc_tensor *self, const torc_tensor *a, const torc_tensor *b, double value);
    torc_status (*addcdiv_)(torc_tensor *self, const torc_tensor *a, const torc_tensor *b, double value);
    torc_status (*lerp_)(torc_tensor *self, const torc_tensor *end, double weight);

    // v1.0: scalar math in double (so a plugin needs no libm)
    double (*pow)(double x, double y);
    double (*sqrt_d)(double x);
    double (*exp_d)(double x);
    double (*log_d)(double x);

    // v1.1: sign, abs, clamp, comparisons and where (out of place, PyTorch's semantics)
    torc_tensor *(*sign)(const torc_tensor *a);   // -1, 0 or 1 in a's dtype (NaN and -0.0 give 0)
    torc_tensor *(*abs)(const torc_tensor *a);
    // torch.clamp(a, min, max) = minimum(maximum(a, min), max): -HUGE_VAL / HUGE_VAL for no bound;
    // min > max gives max everywhere, NaN stays NaN.
    torc_tensor *(*clamp)(const torc_tensor *a, double min, double max);
    // Element-wise comparisons (broadcasting, PyTorch's promotion): bool tensors.
    torc_tensor *(*eq)(const torc_tensor *a, const torc_tensor *b);
    torc_tensor *(*ne)(const torc_tensor *a, const torc_tensor *b);
    torc_tensor *(*lt)(const torc_tensor *a, const torc_tensor *b);
    torc_tensor *(*le)(const torc_tensor *a, const torc_tensor *b);
    torc_tensor *(*gt)(const torc_tensor *a, const torc_tensor *b);
    torc_tensor *(*ge)(const torc_tensor *a, const torc_tensor *b);
    // torch.where(cond, a, b): a where cond (a bool tensor) is true, else b (broadcasting).
    torc_tensor *(*where)(const torc_tensor *cond, const torc_tensor *a, const torc_tensor *b);

    // v1.2: one fused Adam / AdamW update of param and its state (torc_adam_step_ in torc.h, the
    // flags TORC_ADAM_* of torc/backend.h): the same bits as the host functions above composed
    // in torch.optim's single-tensor order (plugins/optim/adam-impl.h), in one pass.
    torc_status (*adam_step_)(torc_tensor *param, const torc_tensor *grad, torc_tensor *exp_avg,
                              torc_tensor *exp_avg_sq, torc_tensor *max_exp_avg_sq, double lr, double beta1,
                              double beta2, double eps, double weight_decay, int64_t step, unsigned flags);

    // v1.3: adam_step_ over a list of parameters, each with its own step count (torc_adam_step_list_
    // in torc.h): the same bits as adam_step_ on each, in one backend op per device and dtype.
    torc_status (*adam_step_list_)(int n, torc_tensor *const *params, torc_tensor *const *grads,
                                   torc_tensor *const *exp_avgs, torc_tensor *const *exp_avg_sqs,
                                   torc_tensor *const *max_exp_avg_sqs, const int64_t *steps, double lr,
                                   double beta1, double beta2, double eps, double weight_decay, unsigned flags);
} torc_optim_host;

// ---- hyperparameters ----
// At most this many values per hyperparameter ("betas" has 2).
#define TORC_OPTIM_HP_MAX_VALUES 4

typedef enum torc_optim_hp_kind {
    TORC_OPTIM_HP_REAL = 0,  // any double in [min, max]
    TORC_OPTIM_HP_BOOL,      // 0 or 1; written "true"/"false" (or 1/0)
    TORC_OPTIM_HP_INT        // an integer in [min, max]
} torc_optim_hp_kind;

// Flags for torc_optim_hparam.flags.
#define TORC_OPTIM_HP_MAX_OPEN 1u  // the range is [min, max) (Adam's betas: 0 <= beta < 1)

typedef struct torc_optim_hparam {
    const char *name;        // "lr", "betas": what users write ("lr=0.01", "betas=0.9,0.99")
    int n_values;            // 1, or up to TORC_OPTIM_HP_MAX_VALUES for a tuple
    torc_optim_hp_kind kind;
    double defaults[TORC_OPTIM_HP_MAX_VALUES];
    double min, max;         // valid range (use -HUGE_VAL / HUGE_VAL for none)
    uint32_t flags;          // TORC_OPTIM_HP_MAX_OPEN
    // Words for the error on an out-of-range value, as PyTorch's: "learning rate" gives
    // "Invalid learning rate: -1.0"; a tuple gives "Invalid beta parameter at index 0: 1.0".
    const char *what;
} torc_optim_hparam;

// A parameter group as step() sees it.
// hp holds the group's hyperparameter values flat, in vtable order: hparams[0]'s n_values
// values, then hparams[1]'s, ... (a plugin names the offsets with an enum).
typedef struct torc_optim_group {
    const double *hp;
    int index;               // group number (0 for the first group)
} torc_optim_group;

// ---- the vtable ----
typedef struct torc_optim_vtable {
    uint32_t abi_version;    // TORC_OPTIM_ABI_VERSION the plugin was built with
    uint32_t struct_size;    // sizeof(torc_optim_vtable) the plugin was built with
    const char *name;        // "adam": the name in state dicts and checkpoints

    // v1.0
    int n_hparams;
    const torc_optim_hparam *hparams;        // (n_hparams)
    int n_states;
    const char *const *state_names;          // (n_states): "exp_avg", "exp_avg_sq", ...
    // Optional (NULL: no check): rules across hyperparameters, run after each range check
    // passed (SGD: "Nesterov momentum requires a momentum and zero dampening"). Returns 0 or
    // host->error(TORC_ERR_INVALID_ARG, ...).
    int (*check)(const torc_optim_host *host, const double *hp);
    // Required: one update of n parameters of a group. params[i] has gradient grads[i] (params
    // without a gradient are left out, as PyTorch does); states (n * n_states slots) as
    // described at the top; step_index[i] is parameter i's own step count including this one
    // (1 on its first update), PyTorch's state["step"].
    int (*step)(const torc_optim_host *host, const torc_optim_group *group, int n,
                torc_tensor *const *params, torc_tensor *const *grads, torc_tensor **states,
                const int64_t *step_index);

    // v1.3: TORC_OPTIM_WHOLE_GROUP, or 0 (a host before 1.3 does not read it: one call a parameter).
    uint32_t flags;
} torc_optim_vtable;

// step() takes a group's parameters (those with a gradient) in one call (see the rules above).
#define TORC_OPTIM_WHOLE_GROUP 1u

// The one symbol a plugin exports. host_abi_version is the loader's TORC_OPTIM_ABI_VERSION (the
// host table's abi_version); a plugin may return NULL if it cannot speak to that host. Declared
// here so that a definition with another signature does not compile.
TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t host_abi_version);
typedef const torc_optim_vtable *(*torc_optim_entry_fn)(uint32_t host_abi_version);
#define TORC_OPTIM_ENTRY_SYMBOL "torc_optim_entry"


// ---- layouts, pinned per minor (LP64) ----
// Every member of every struct a plugin shares with the host, with the minor that gave it its
// place: a change that would break a built plugin fails the build instead. A minor only appends.
#if defined(__LP64__) || defined(_WIN64)
#define TORC__OPTIM_PIN(v, type, m, off) \
    TORC__STATIC_ASSERT(offsetof(type, m) == (off), "optimizer ABI " v ": " #type "." #m " moved")
TORC__OPTIM_PIN("1.0", torc_optim_vtable, abi_version, 0);
TORC__OPTIM_PIN("1.0", torc_optim_vtable, struct_size, 4);
TORC__OPTIM_PIN("1.0", torc_optim_vtable, name, 8);
TORC__OPTIM_PIN("1.0", torc_optim_vtable, n_hparams, 16);
TORC__OPTIM_PIN("1.0", torc_optim_vtable, hparams, 24);
TORC__OPTIM_PIN("1.0", torc_optim_vtable, n_states, 32);
TORC__OPTIM_PIN("1.0", torc_optim_vtable, state_names, 40);
TORC__OPTIM_PIN("1.0", torc_optim_vtable, check, 48);
TORC__OPTIM_PIN("1.0", torc_optim_vtable, step, 56);
TORC__OPTIM_PIN("1.3", torc_optim_vtable, flags, 64);
TORC__STATIC_ASSERT(sizeof(torc_optim_vtable) == 72, "optimizer ABI 1.3: torc_optim_vtable size");
TORC__OPTIM_PIN("1.0", torc_optim_hparam, name, 0);
TORC__OPTIM_PIN("1.0", torc_optim_hparam, n_values, 8);
TORC__OPTIM_PIN("1.0", torc_optim_hparam, kind, 12);
TORC__OPTIM_PIN("1.0", torc_optim_hparam, defaults, 16);
TORC__OPTIM_PIN("1.0", torc_optim_hparam, min, 16 + 8 * TORC_OPTIM_HP_MAX_VALUES);
TORC__OPTIM_PIN("1.0", torc_optim_hparam, max, 24 + 8 * TORC_OPTIM_HP_MAX_VALUES);
TORC__OPTIM_PIN("1.0", torc_optim_hparam, flags, 32 + 8 * TORC_OPTIM_HP_MAX_VALUES);
TORC__OPTIM_PIN("1.0", torc_optim_hparam, what, 40 + 8 * TORC_OPTIM_HP_MAX_VALUES);
TORC__STATIC_ASSERT(sizeof(torc_optim_hparam) == 48 + 8 * TORC_OPTIM_HP_MAX_VALUES,
                    "optimizer ABI 1.0: torc_optim_hparam size");
TORC__OPTIM_PIN("1.0", torc_optim_group, hp, 0);
TORC__OPTIM_PIN("1.0", torc_optim_group, index, 8);
TORC__STATIC_ASSERT(sizeof(torc_optim_group) == 16, "optimizer ABI 1.0: torc_optim_group size");
TORC__OPTIM_PIN("1.0", torc_optim_host, abi_version, 0);
TORC__OPTIM_PIN("1.0", torc_optim_host, struct_size, 4);
TORC__OPTIM_PIN("1.0", torc_optim_host, error, 8 + 0 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, last_error, 8 + 1 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, numel, 8 + 2 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, dtype, 8 + 3 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, zeros_like, 8 + 4 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, full_like, 8 + 5 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, clone, 8 + 6 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, add, 8 + 7 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, add_scaled, 8 + 8 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, sub, 8 + 9 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, mul, 8 + 10 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, div, 8 + 11 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, maximum, 8 + 12 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, add_scalar, 8 + 13 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, mul_scalar, 8 + 14 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, div_scalar, 8 + 15 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, neg, 8 + 16 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, sqrt, 8 + 17 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, square, 8 + 18 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, addcmul, 8 + 19 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, copy_, 8 + 20 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, fill_, 8 + 21 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, zero_, 8 + 22 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, add_, 8 + 23 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, add_scaled_, 8 + 24 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, sub_, 8 + 25 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, mul_, 8 + 26 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, div_, 8 + 27 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, maximum_, 8 + 28 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, add_scalar_, 8 + 29 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, mul_scalar_, 8 + 30 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, div_scalar_, 8 + 31 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, sqrt_, 8 + 32 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, addcmul_, 8 + 33 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, addcdiv_, 8 + 34 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, lerp_, 8 + 35 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, pow, 8 + 36 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, sqrt_d, 8 + 37 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, exp_d, 8 + 38 * 8);
TORC__OPTIM_PIN("1.0", torc_optim_host, log_d, 8 + 39 * 8);
TORC__OPTIM_PIN("1.1", torc_optim_host, sign, 8 + 40 * 8);
TORC__OPTIM_PIN("1.1", torc_optim_host, abs, 8 + 41 * 8);
TORC__OPTIM_PIN("1.1", torc_optim_host, clamp, 8 + 42 * 8);
TORC__OPTIM_PIN("1.1", torc_optim_host, eq, 8 + 43 * 8);
TORC__OPTIM_PIN("1.1", torc_optim_host, ne, 8 + 44 * 8);
TORC__OPTIM_PIN("1.1", torc_optim_host, lt, 8 + 45 * 8);
TORC__OPTIM_PIN("1.1", torc_optim_host, le, 8 + 46 * 8);
TORC__OPTIM_PIN("1.1", torc_optim_host, gt, 8 + 47 * 8);
TORC__OPTIM_PIN("1.1", torc_optim_host, ge, 8 + 48 * 8);
TORC__OPTIM_PIN("1.1", torc_optim_host, where, 8 + 49 * 8);
TORC__OPTIM_PIN("1.2", torc_optim_host, adam_step_, 8 + 50 * 8);
TORC__OPTIM_PIN("1.3", torc_optim_host, adam_step_list_, 8 + 51 * 8);
TORC__STATIC_ASSERT(sizeof(torc_optim_host) == 8 + 52 * 8, "optimizer ABI 1.3: torc_optim_host size");
#undef TORC__OPTIM_PIN
#endif

#ifdef __cplusplus
}
#endif
#endif
