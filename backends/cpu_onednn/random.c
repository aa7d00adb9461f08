// backends/cpu_onednn/random.c — RAND_UNIFORM / RAND_NORMAL into dense float outputs as OpenMP
// loops over torc/philox.h: element i draws counter offset + i with the reference's very
// expressions (backends/reference/random.c), so the numbers are the same bit for bit, on every
// core. The reference's single-threaded loop took 22 ms for randn(512, 1024) (Box-Muller's log
// and cos in double), a third of a torc-train Cruncher 1024 step that draws its batch; RAND_INT
// and strided outputs stay there.
#include <omp.h>
#include <torc/philox.h>

#include "onednn-impl.h"

bool onednn__random_takes(const torc_op *op) {
    return op->code == TORC_OP_RAND_UNIFORM || op->code == TORC_OP_RAND_NORMAL;
}

int onednn__random_check(const torc_op *op) {
    int st = onednn__check_operand(&op->out[0], "out");
    if (st) return st;
    const torc_dtype d = op->out[0].dtype;
    if (op->n_in != 0 || !onednn__dense(&op->out[0]) ||
        !(d == TORC_DTYPE_F32 || d == TORC_DTYPE_F64 || d == TORC_DTYPE_BF16 || d == TORC_DTYPE_F16))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s fills contiguous float64, float32, bfloat16 and float16 "
                             "outputs (others go to the reference backend)", onednn__op_name(op->code));
    if (op->code == TORC_OP_RAND_NORMAL && !(op->params.rng.b >= 0.0))
        return onednn__error(TORC_ERR_INVALID_ARG, "normal expects std >= 0.0, but found std %g", op->params.rng.b);
    return 0;
}

int onednn__random_run(const torc_op *op) {
    const int64_t n = onednn__numel(&op->out[0]);
    if (n == 0) return 0;
    const bool normal = op->code == TORC_OP_RAND_NORMAL;
    const uint64_t seed = op->params.rng.seed, offset = op->params.rng.offset;
    const double a = op->params.rng.a, b = op->params.rng.b;
    const torc_dtype d = op->out[0].dtype;
    char *out = op->out[0].data;
    ONEDNN_FOR(n >= ONEDNN_SMALL_STREAM, i, n, {
        const double v = normal ? a + b * torc_philox_normal(seed, offset, (uint64_t)i)
                                : a + (b - a) * torc_philox_uniform(seed, offset, (uint64_t)i);
        switch (d) {  // ref_store_f's conversions
        case TORC_DTYPE_F64: ((double *)out)[i] = v; break;
        case TORC_DTYPE_F32: ((float *)out)[i] = (float)v; break;
        case TORC_DTYPE_BF16: ((uint16_t *)out)[i] = torc_f32_to_bf16((float)v); break;
        default: ((uint16_t *)out)[i] = torc_f32_to_f16((float)v); break;
        }
    });
    return 0;
}
