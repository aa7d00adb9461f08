// backends/reference/random.c — the reference RAND_UNIFORM / RAND_NORMAL / RAND_INT kernels on
// Philox 4x32-10 (philox.h): element i of out (row-major index) draws counter offset + i.
#include <torc/philox.h>

#include "ref-impl.h"

bool ref_random_dtypes(const torc_op *op) {
    return ref_dt_in(op->out[0].dtype, op->code == TORC_OP_RAND_INT ? REF_DT_ALL : REF_DT_FLOAT);
}

typedef struct random_ctx {
    torc_opcode code;
    torc_dtype out;
    uint64_t seed, offset;
    double a, b;
    int64_t lo;      // RAND_INT: a as an integer
    uint64_t index;  // row-major index of the next element: the iterator visits in that order
} random_ctx;

static void random_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    random_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++, c->index++) {
        char *p = ptr[0] + i * step[0];
        switch (c->code) {
        case TORC_OP_RAND_UNIFORM:
            ref_store_f(p, c->out, c->a + (c->b - c->a) * torc_philox_uniform(c->seed, c->offset, c->index));
            break;
        case TORC_OP_RAND_NORMAL:
            ref_store_f(p, c->out, c->a + c->b * torc_philox_normal(c->seed, c->offset, c->index));
            break;
        default: {  // RAND_INT: a + floor(u * (b - a)), in [a, b)
            const double u = torc_philox_uniform(c->seed, c->offset, c->index);
            // The range may exceed int64 (b - a up to 2^64): offset in uint64, wrap back.
            ref_store_i(p, c->out, (int64_t)((uint64_t)c->lo + (uint64_t)floor(u * (c->b - c->a))));
            break;
        }
        }
    }
}

int ref_random_run(const torc_op *op) {
    const double a = op->params.rng.a, b = op->params.rng.b;
    if (op->code == TORC_OP_RAND_INT) {
        if (!(a < b))
            return ref_error(TORC_ERR_INVALID_ARG, "random_ expects 'from' to be less than 'to', but got from=%.0f >= to=%.0f",
                             a, b);
        if (!(a >= -0x1p63 && b <= 0x1p63) || a != trunc(a) || b != trunc(b))
            return ref_error(TORC_ERR_INVALID_ARG, "reference backend: randint bounds must be integers, got [%g, %g)", a, b);
    } else if (op->code == TORC_OP_RAND_NORMAL && !(b >= 0.0)) {
        return ref_error(TORC_ERR_INVALID_ARG, "normal expects std >= 0.0, but found std %g", b);
    }
    random_ctx c = {op->code, op->out[0].dtype, op->params.rng.seed, op->params.rng.offset, a, b, 0, 0};
    if (op->code == TORC_OP_RAND_INT) c.lo = ref_f2i64(a);
    const torc_operand *ops[1] = {&op->out[0]};
    ref_iter it;
    ref_iter_ops(&it, op->out[0].ndim, op->out[0].shape, 1, ops);
    ref_iter_run(&it, random_loop, &c);
    return TORC_OK;
}
