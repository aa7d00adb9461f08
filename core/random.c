// core/random.c — Philox generators (seed, offset) and the random factories and in-place
// initialisers; the numbers come from the backend's RNG ops, the same on every backend.
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "torc-impl.h"

struct torc_generator {
    uint64_t seed, offset;
    pthread_mutex_t lock;
};

// PyTorch's default seed, so an unseeded program is still reproducible.
static torc_generator g_default = {67280421310721ULL, 0, PTHREAD_MUTEX_INITIALIZER};

torc_generator *torc_default_generator(void) { return &g_default; }

void torc_manual_seed(uint64_t seed) { torc_generator_set_state(&g_default, seed, 0); }

torc_generator *torc_generator_new(uint64_t seed) {
    torc_generator *g = calloc(1, sizeof *g);
    if (!g) return TORC_FAIL_NULL(TORC_ERR_OOM, "out of memory for a generator");
    g->seed = seed;
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

void torc_generator_free(torc_generator *g) {
    if (!g || g == &g_default) return;
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void torc_generator_get_state(const torc_generator *g, uint64_t *seed, uint64_t *offset) {
    torc_generator *m = (torc_generator *)(g ? g : &g_default);
    pthread_mutex_lock(&m->lock);
    if (seed) *seed = m->seed;
    if (offset) *offset = m->offset;
    pthread_mutex_unlock(&m->lock);
}

void torc_generator_set_state(torc_generator *g, uint64_t seed, uint64_t offset) {
    if (!g) g = &g_default;
    pthread_mutex_lock(&g->lock);
    g->seed = seed;
    g->offset = offset;
    pthread_mutex_unlock(&g->lock);
}

// Reserves n counters: returns the first, advances the generator.
uint64_t torc__generator_reserve(torc_generator *g, uint64_t n, uint64_t *seed) {
    if (!g) g = &g_default;
    pthread_mutex_lock(&g->lock);
    const uint64_t first = g->offset;
    g->offset += n;
    *seed = g->seed;
    pthread_mutex_unlock(&g->lock);
    return first;
}

static torc_status fill_random(torc_tensor *t, torc_opcode code, double a, double b, torc_generator *gen) {
    torc_op op = {.code = code, .n_out = 1};
    torc__operand(t, &op.out[0]);
    op.params.rng.offset = torc__generator_reserve(gen, (uint64_t)torc_numel(t), &op.params.rng.seed);
    op.params.rng.a = a;
    op.params.rng.b = b;
    torc_status st = torc__dispatch(t->device, &op, 0);
    if (!st) torc__bump_version(t);
    return st;
}

static torc_tensor *random_new(int ndim, const int64_t *shape, torc_dtype dtype, torc_opcode code,
                               double a, double b, torc_generator *gen) {
    if (ndim > 0 && !shape) return TORC_NULL_ARG_FAIL("shape is NULL");
    if (code != TORC_OP_RAND_INT && !torc_dtype_is_floating(dtype))
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "\"%s\" not implemented for '%s'",
                              code == TORC_OP_RAND_NORMAL ? "normal_kernel_cpu" : "uniform_kernel_cpu",
                              torc_dtype_name(dtype));
    torc_device *dev = torc_default_device();
    torc_tensor *t = dev ? torc__new(dev, dtype, ndim, shape) : NULL;
    if (!t) return NULL;
    if (fill_random(t, code, a, b, gen)) {
        torc_release(t);
        return NULL;
    }
    return torc__register(t);
}

torc_tensor *torc_rand(int ndim, const int64_t *shape, torc_dtype dtype, torc_generator *gen) {
    return random_new(ndim, shape, dtype, TORC_OP_RAND_UNIFORM, 0.0, 1.0, gen);
}
torc_tensor *torc_randn(int ndim, const int64_t *shape, torc_dtype dtype, torc_generator *gen) {
    return random_new(ndim, shape, dtype, TORC_OP_RAND_NORMAL, 0.0, 1.0, gen);
}
torc_tensor *torc_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, torc_dtype dtype,
                          torc_generator *gen) {
    if (low >= high)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG,
                              "random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                              (long long)low, (long long)high);
    return random_new(ndim, shape, dtype, TORC_OP_RAND_INT, (double)low, (double)high, gen);
}

// uniform_ / normal_ into an existing tensor: an in-place write whose gradient to t is zero.
static torc_status fill_random_(torc_tensor *t, torc_opcode code, double a, double b, torc_generator *gen) {
    if (!torc__check_no_internal_overlap(t)) return torc_last_status();  // as torch (fill_ has no such check)
    torc_node *rec;
    const torc_tensor *ins[1] = {t};
    torc_status st = torc__inplace_begin(t, code, 1, ins, NULL, NULL, &rec);
    return st ? st : torc__inplace_end(t, rec, fill_random(t, code, a, b, gen));
}

torc_status torc_uniform_(torc_tensor *t, double a, double b, torc_generator *gen) {
    if (!t) return torc__null_arg("tensor is NULL");
    if (!torc_dtype_is_floating(t->dtype))
        return torc__error(TORC_ERR_DTYPE, "\"uniform_kernel_cpu\" not implemented for '%s'", torc_dtype_name(t->dtype));
    if (a > b) return torc__error(TORC_ERR_INVALID_ARG, "uniform_ expects to return a [from, to) range, but found from=%g > to=%g", a, b);
    return fill_random_(t, TORC_OP_RAND_UNIFORM, a, b, gen);
}

torc_status torc_normal_(torc_tensor *t, double mean, double std, torc_generator *gen) {
    if (!t) return torc__null_arg("tensor is NULL");
    if (!torc_dtype_is_floating(t->dtype))
        return torc__error(TORC_ERR_DTYPE, "\"normal_kernel_cpu\" not implemented for '%s'", torc_dtype_name(t->dtype));
    if (std < 0) return torc__error(TORC_ERR_INVALID_ARG, "normal expects std >= 0.0, but found std %g", std);
    return fill_random_(t, TORC_OP_RAND_NORMAL, mean, std, gen);
}

static torc_status trunc_normal_body(torc_tensor *t, double mean, double std, double a, double b,
                                     torc_generator *gen);

// torch.nn.init.trunc_normal_: uniform in [2l-1, 2u-1], erfinv, scale, shift, clamp.
torc_status torc_trunc_normal_(torc_tensor *t, double mean, double std, double a, double b,
                               torc_generator *gen) {
    if (!t) return torc__null_arg("tensor is NULL");
    if (!(a < b)) return torc__error(TORC_ERR_INVALID_ARG, "trunc_normal_: expected a < b, got a=%g, b=%g", a, b);
    if (std <= 0) return torc__error(TORC_ERR_INVALID_ARG, "trunc_normal_: expected std > 0, got %g", std);
    // An initialiser, like torch.nn.init: runs under no_grad so parameters can be filled.
    torc_no_grad_begin();
    torc_status st = trunc_normal_body(t, mean, std, a, b, gen);
    torc_no_grad_end();
    return st;
}

static torc_status trunc_normal_body(torc_tensor *t, double mean, double std, double a, double b,
                                     torc_generator *gen) {
    const double l = (1.0 + erf((a - mean) / std / sqrt(2.0))) / 2.0;
    const double u = (1.0 + erf((b - mean) / std / sqrt(2.0))) / 2.0;
    torc_status st = torc_uniform_(t, 2 * l - 1, 2 * u - 1, gen);
    if (st) return st;
    torc_op op = {.code = TORC_OP_ERFINV, .n_in = 1, .n_out = 1};
    torc__operand(t, &op.out[0]);
    op.in[0] = op.out[0];
    if ((st = torc__dispatch(t->device, &op, 0))) return st;
    if ((st = torc_mul_scalar_(t, torc_s(std * sqrt(2.0))))) return st;
    if ((st = torc_add_scalar_(t, torc_s(mean)))) return st;
    torc_scope_push();
    torc_tensor *lo = torc_full_like(t, a), *hi = torc_full_like(t, b);
    st = lo && hi ? torc_maximum_(t, lo) : torc_last_status();
    if (!st) {
        torc_tensor *c = torc_minimum(t, hi);
        st = c ? torc__copy(t, c) : torc_last_status();
    }
    torc_scope_pop();
    return st;
}
