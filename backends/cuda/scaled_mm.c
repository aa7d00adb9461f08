// backends/cuda/scaled_mm.c — TORC_OP_SCALED_MM: cuBLASLt where it can run (sm_89+, TN layout,
// multiples of 16, aligned, a kernel for the dtypes), the generic kernel elsewhere and wherever
// cuBLASLt answers without an algorithm; amax of a 16-bit output goes through an f32 result so
// it is taken before the rounding, as the contract says.
#include <string.h>

#include "cuda_impl.h"
#include "kernels.h"
#include "lt_plan.h"

// The generic kernel: any layout, size or dtype combination, amax taken before the rounding.
static int generic(tcu_device *d, const torc_op *op) {
    tcu_smm_args s;
    tcu_smm_args_from_op(op, &s);
    const int rc = tcu_launch_smm(&s, d->sm_count, d->stream);
    return rc == 0 ? TORC_OK : tcu_cuda_error((cudaError_t)rc, "_scaled_mm (generic kernel)");
}

int tcu_scaled_mm(tcu_device *d, const torc_op *op) {
    const bool fp8_out = tcu_is_fp8(op->out[0].dtype);
    void *amax = op->n_out > 1 ? op->out[1].data : NULL;  // optional out[1]
    const bool via_f32 = !fp8_out && amax != NULL;
    tcu_lt_problem p;
    tcu_lt_plan pl;
    const tcu_smm_path path = tcu_smm_decide(op, d->cc_major, d->cc_minor, via_f32, &p, &pl);
    if (path == TCU_SMM_REFUSE)
        return tcu_error(TORC_ERR_NOT_SUPPORTED, "_scaled_mm: %s; fp8 matmuls need an Ada (sm_89) or Hopper (sm_90) GPU",
                         pl.why);
    if (path == TCU_SMM_GENERIC) return generic(d, op);
    const tcu_lt_ptrs ptrs = {op->in[2].data, op->in[3].data, fp8_out && op->n_in > 4 ? op->in[4].data : NULL,
                              fp8_out ? amax : NULL};
    if (!via_f32) {
        const int rc = tcu_lt_matmul(d, &p, &pl, &ptrs, op->in[0].data, op->in[1].data, op->out[0].data);
        return rc == TCU_LT_NO_KERNEL ? generic(d, op) : rc;
    }
    // r in f32 first: amax = max |r| (NaN-propagating, an inf-norm reduction), then out = round(r).
    const int64_t M = p.m, N = p.n;
    float *r = tcu_scratch(d, (size_t)(M * N) * sizeof(float));
    if (!r) return TORC_ERR_OOM;
    int rc = tcu_lt_matmul(d, &p, &pl, &ptrs, op->in[0].data, op->in[1].data, r);
    if (rc == TCU_LT_NO_KERNEL) {
        tcu_scratch_free(d, r);
        return generic(d, op);   // it takes amax before the rounding itself
    }
    torc_op t;
    if (rc == TORC_OK) {
        memset(&t, 0, sizeof t);
        t.code = TORC_OP_NORM;
        t.n_in = 1, t.n_out = 1;
        t.in[0] = (torc_operand){r, TORC_DTYPE_F32, 2, {M, N}, {N, 1}};
        t.out[0] = (torc_operand){amax, TORC_DTYPE_F32, 2, {1, 1}, {1, 1}};
        t.params.reduce.mask = 3;
        t.params.reduce.p = INFINITY;
        rc = tcu_run_op(d, &t);
    }
    if (rc == TORC_OK) {
        memset(&t, 0, sizeof t);
        t.code = TORC_OP_COPY;
        t.n_in = 1, t.n_out = 1;
        t.in[0] = (torc_operand){r, TORC_DTYPE_F32, 2, {M, N}, {N, 1}};
        t.out[0] = op->out[0];
        rc = tcu_run_op(d, &t);
    }
    tcu_scratch_free(d, r);  // stream-ordered: the copy above has been enqueued before any reuse
    return rc;
}
