// core/scaled_mm.c — fp8 matmul with per-tensor scales (torch._scaled_mm with cuBLASLt's
// semantics) and the saturating scaled cast to fp8 that feeds it.
#include <string.h>

#include "torc-impl.h"

_Static_assert(sizeof(torc_op_params) == 64, "torc_op_params is part of the backend ABI: 64 bytes");

static bool is_fp8(torc_dtype d) { return d == TORC_DTYPE_F8_E4M3FN || d == TORC_DTYPE_F8_E5M2; }

// A per-tensor scale: an f32 tensor of one element (any ndim), on dev.
static bool check_scale(const torc_tensor *s, const char *what, const torc_device *dev) {
    if (s->dtype != TORC_DTYPE_F32 || torc_numel(s) != 1) {
        torc__error(TORC_ERR_DTYPE, "Invalid scaling configuration. For TensorWise scaling, a and b should be float8, "
                                    "scales should be float and singletons. Got %s of dtype %s with %lld elements.",
                    what, torc__dtype_c10_name(s->dtype), (long long)torc_numel(s));
        return false;
    }
    if (s->device != dev) {
        torc__error(TORC_ERR_INVALID_ARG, "Expected all tensors to be on the same device, but found at least two "
                                          "devices, %s and %s!", dev->name, s->device->name);
        return false;
    }
    return true;
}

torc_tensor *torc_scaled_mm(const torc_tensor *a, const torc_tensor *b, const torc_tensor *scale_a,
                            const torc_tensor *scale_b, torc_dtype out_dtype, const torc_tensor *scale_out,
                            torc_tensor *amax_out) {
    if (!a || !b || !scale_a || !scale_b) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (a->ndim != 2) return TORC_FAIL_NULL(TORC_ERR_SHAPE, "_scaled_mm: self must be a matrix, got %d-D tensor", a->ndim);
    if (b->ndim != 2) return TORC_FAIL_NULL(TORC_ERR_SHAPE, "_scaled_mm: mat2 must be a matrix, got %d-D tensor", b->ndim);
    if (a->shape[1] != b->shape[0])
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "_scaled_mm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                              (long long)a->shape[0], (long long)a->shape[1], (long long)b->shape[0],
                              (long long)b->shape[1]);
    if (!is_fp8(a->dtype) || !is_fp8(b->dtype))
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "_scaled_mm: expected mat1 and mat2 to be Float8_e4m3fn or Float8_e5m2, "
                                              "got %s and %s (cast with torc_to_fp8_scaled)",
                              torc__dtype_c10_name(a->dtype), torc__dtype_c10_name(b->dtype));
    if (a->dtype == TORC_DTYPE_F8_E5M2 && b->dtype == TORC_DTYPE_F8_E5M2)
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "Multiplication of two Float8_e5m2 matrices is not supported");
    if (out_dtype != TORC_DTYPE_F32 && out_dtype != TORC_DTYPE_BF16 && out_dtype != TORC_DTYPE_F16 && !is_fp8(out_dtype))
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "_scaled_mm: out_dtype must be Float, BFloat16, Half, Float8_e4m3fn or "
                                              "Float8_e5m2, got %s",
                              torc__dtype_valid(out_dtype) ? torc__dtype_c10_name(out_dtype) : "an invalid dtype");
    if (!torc__same_device(a, b)) return NULL;
    if (!check_scale(scale_a, "scale_a", a->device) || !check_scale(scale_b, "scale_b", a->device)) return NULL;
    if (scale_out && !check_scale(scale_out, "scale_result", a->device)) return NULL;
    if (amax_out && !check_scale(amax_out, "amax", a->device)) return NULL;
    const torc_tensor *ins[4] = {a, b, scale_a, scale_b};
    if (torc__any_requires_grad(4, ins) || (scale_out && torc__any_requires_grad(1, &scale_out)))
        return TORC_FAIL_NULL(TORC_ERR_AUTOGRAD, "the derivative for '_scaled_mm' is not implemented (an fp8 matmul "
                                                 "that trains goes through torc_matmul under torc_autocast_begin(fp8))");
    torc_status st = TORC_OK;
    if (amax_out) torc__check_inplace(amax_out, &st);
    if (st) return NULL;

    const int64_t M = a->shape[0], K = a->shape[1], N = b->shape[1];
    torc_tensor *out = torc__new(a->device, out_dtype, 2, (int64_t[]){M, N});
    if (!out) return NULL;
    torc_op op = {.code = TORC_OP_SCALED_MM, .n_in = 4, .n_out = 1};
    for (int i = 0; i < 4; i++) torc__operand(ins[i], &op.in[i]);
    torc__operand(out, &op.out[0]);
    if (scale_out) torc__operand(scale_out, &op.in[op.n_in++]);   // optional in4
    if (amax_out) torc__operand(amax_out, &op.out[op.n_out++]);    // optional out[1]
    if (torc__dispatch(a->device, &op, 2 * (uint64_t)M * (uint64_t)N * (uint64_t)K)) {
        torc_release(out);
        return NULL;
    }
    if (amax_out) torc__bump_version(amax_out);
    return torc__register(out);
}

torc_tensor *torc_to_fp8_scaled(const torc_tensor *x, const torc_tensor *scale, torc_dtype dtype) {
    if (!x || !scale) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (!is_fp8(dtype))
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "torc_to_fp8_scaled: dtype must be Float8_e4m3fn or Float8_e5m2, got %s",
                              torc__dtype_valid(dtype) ? torc__dtype_c10_name(dtype) : "an invalid dtype");
    if (!torc_dtype_is_floating(x->dtype))
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "torc_to_fp8_scaled: expected a floating-point input, got %s",
                              torc__dtype_c10_name(x->dtype));
    if (scale->dtype != TORC_DTYPE_F32 || torc_numel(scale) != 1)
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "torc_to_fp8_scaled: the scale must be a one-element Float tensor, got %s "
                                              "with %lld elements", torc__dtype_c10_name(scale->dtype),
                              (long long)torc_numel(scale));
    // x * scale in f32 (rounded once), then the plain cast, which rounds in-range values as the
    // saturating one. e4m3fn's plain cast already saturates (everything from 448 up, inf too,
    // becomes 448); e5m2's overflows to inf, so there x * scale is first clamped to +-57344
    // (NaN stays NaN through maximum/minimum).
    torc_scope_push();
    torc_no_grad_begin();
    torc_tensor *s = torc_reshape((torc_tensor *)scale, 0, NULL);
    torc_tensor *xf = torc_to_dtype((torc_tensor *)x, TORC_DTYPE_F32);
    torc_tensor *y = xf && s ? torc_mul(xf, s) : NULL;
    if (dtype == TORC_DTYPE_F8_E5M2) {
        y = y ? torc_maximum_scalar(y, torc_s(-57344.0)) : NULL;
        y = y ? torc_minimum_scalar(y, torc_s(57344.0)) : NULL;
    }
    y = y ? torc_keep(torc_to_dtype(y, dtype)) : NULL;
    torc_no_grad_end();
    torc_scope_pop();
    return y;
}
