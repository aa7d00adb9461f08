// core/pointwise.c — the fused pointwise ops addcmul, addcdiv and lerp (scalar weight): their
// out-of-place and in-place frontends, each one backend op (TORC_OP_ADDCMUL/ADDCDIV/LERP).
#include <string.h>

#include "torc-impl.h"

// The kernel names PyTorch's "not implemented for" messages print.
static const char *kernel_name(torc_opcode code) {
    return code == TORC_OP_ADDCMUL ? "addcmul_cpu_out" : code == TORC_OP_ADDCDIV ? "addcdiv_cpu_out" : "lerp_kernel_scalar";
}

// The dtype checks PyTorch makes before it computes anything (its argument checks), and the
// result dtype: lerp wants self and end of one dtype; addcdiv refuses integer division.
static bool check_args(torc_opcode code, int n, const torc_tensor *const *ts, torc_dtype *common) {
    for (int i = 1; i < n; i++)
        if (!torc__same_device(ts[0], ts[i])) return false;
    if (code == TORC_OP_LERP && ts[0]->dtype != ts[1]->dtype) {
        torc__error(TORC_ERR_DTYPE, "expected dtype %s for `end` but got dtype %s", torc__dtype_typemeta_name(ts[0]->dtype),
                    torc__dtype_typemeta_name(ts[1]->dtype));
        return false;
    }
    if (code == TORC_OP_ADDCDIV && torc_dtype_is_integral(ts[1]->dtype) && torc_dtype_is_integral(ts[2]->dtype)) {
        torc__error(TORC_ERR_DTYPE,
                    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv "
                    "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be "
                    "implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
                    "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
                    "addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), "
                    "for all dtypes.");
        return false;
    }
    return torc_result_type(n, ts, 0, NULL, common) == TORC_OK;
}

// The dtypes the kernels compute in (PyTorch's: floating but fp8, and integers but bool for
// addcmul), refused here with PyTorch's CPU message whatever the backend.
static bool check_kernel_dtype(torc_opcode code, torc_dtype dt) {
    const bool ok = dt == TORC_DTYPE_F64 || dt == TORC_DTYPE_F32 || dt == TORC_DTYPE_F16 || dt == TORC_DTYPE_BF16 ||
                    (code == TORC_OP_ADDCMUL && torc_dtype_is_integral(dt) && dt != TORC_DTYPE_BOOL);
    if (!ok) torc__error(TORC_ERR_DTYPE, "\"%s\" not implemented for '%s'", kernel_name(code), torc__dtype_c10_name(dt));
    return ok;
}

// The broadcast shape of the op's tensors (PyTorch's message when they do not broadcast).
static bool broadcast_all(int n, const torc_tensor *const *ts, int *ndim, int64_t *shape) {
    *ndim = ts[0]->ndim;
    memcpy(shape, ts[0]->shape, sizeof(int64_t) * (size_t)ts[0]->ndim);
    for (int i = 1; i < n; i++)
        if (torc__broadcast_shapes(*ndim, shape, ts[i]->ndim, ts[i]->shape, ndim, shape)) return false;
    return true;
}

// Runs out = op(ts...) with every input broadcast to out's shape.
static torc_status run_op(torc_tensor *out, torc_opcode code, int n, const torc_tensor *const *ts, double value) {
    torc_op op = {.code = code, .n_in = n, .n_out = 1};
    torc__operand(out, &op.out[0]);
    for (int i = 0; i < n; i++) {
        torc_status st = torc__broadcast_operand(ts[i], out->ndim, out->shape, &op.in[i]);
        if (st) return st;
    }
    op.params.scalar.value = value;
    // FLOPs: a multiply, a multiply or divide, and an add per element (lerp: sub, mul, add).
    return torc__dispatch(out->device, &op, 3 * (uint64_t)torc_numel(out));
}

static torc_tensor *pointwise(torc_opcode code, int n, const torc_tensor *const *ts, double value) {
    for (int i = 0; i < n; i++)
        if (!ts[i]) return TORC_NULL_ARG_FAIL("tensor is NULL");
    torc_dtype common;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    if (!check_args(code, n, ts, &common) || !broadcast_all(n, ts, &ndim, shape) || !check_kernel_dtype(code, common) ||
        !torc__check_int_scalar(common, value))
        return NULL;
    torc_tensor *out = torc__new(ts[0]->device, common, ndim, shape);
    if (!out) return NULL;
    if (run_op(out, code, n, ts, value)) {
        torc_release(out);
        return NULL;
    }
    const torc_op_params p = {.scalar = {value}};
    out = torc__autograd_record(out, code, n, ts, &p);
    return out ? torc__register(out) : NULL;
}

// In place: the broadcast of all the tensors must be self's shape and the result dtype must
// cast to self's; the node records under the op's grad_fn (AddcmulBackward0, ...).
static torc_status pointwise_(torc_tensor *self, torc_opcode code, int n, const torc_tensor *const *ts, double value) {
    for (int i = 0; i < n; i++)
        if (!ts[i]) return torc__null_arg("tensor is NULL");
    torc_dtype common;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    if (!check_args(code, n, ts, &common) || !broadcast_all(n, ts, &ndim, shape)) return torc_last_status();
    bool same = ndim == self->ndim;
    for (int i = 0; same && i < ndim; i++) same = shape[i] == self->shape[i];
    if (!same) {
        char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
        return torc__error(TORC_ERR_SHAPE, "output with shape %s doesn't match the broadcast shape %s",
                           torc__shape_str(self->ndim, self->shape, b1, sizeof b1),
                           torc__shape_str(ndim, shape, b2, sizeof b2));
    }
    if (!torc__check_can_cast(common, self->dtype) || !check_kernel_dtype(code, self->dtype) ||
        !torc__check_int_scalar(common, value) || !torc__check_no_internal_overlap(self))
        return torc_last_status();
    for (int i = 1; i < n; i++)
        if (!torc__check_no_partial_overlap(self, ts[i])) return torc_last_status();
    torc_node *rec;
    const torc_op_params p = {.scalar = {value}};
    torc_status st = torc__inplace_begin(self, code, n, ts, &p, NULL, &rec);
    if (st) return st;
    st = run_op(self, code, n, ts, value);
    if (!st) torc__bump_version(self);
    return torc__inplace_end(self, rec, st);
}

torc_tensor *torc_addcmul(const torc_tensor *self, const torc_tensor *a, const torc_tensor *b, torc_scalar value) {
    return pointwise(TORC_OP_ADDCMUL, 3, (const torc_tensor *[]){self, a, b}, value.f);
}
torc_tensor *torc_addcdiv(const torc_tensor *self, const torc_tensor *a, const torc_tensor *b, torc_scalar value) {
    return pointwise(TORC_OP_ADDCDIV, 3, (const torc_tensor *[]){self, a, b}, value.f);
}
torc_tensor *torc_lerp(const torc_tensor *self, const torc_tensor *end, torc_scalar weight) {
    return pointwise(TORC_OP_LERP, 2, (const torc_tensor *[]){self, end}, weight.f);
}

torc_status torc_addcmul_(torc_tensor *self, const torc_tensor *a, const torc_tensor *b, torc_scalar value) {
    return pointwise_(self, TORC_OP_ADDCMUL, 3, (const torc_tensor *[]){self, a, b}, value.f);
}
torc_status torc_addcdiv_(torc_tensor *self, const torc_tensor *a, const torc_tensor *b, torc_scalar value) {
    return pointwise_(self, TORC_OP_ADDCDIV, 3, (const torc_tensor *[]){self, a, b}, value.f);
}
torc_status torc_lerp_(torc_tensor *self, const torc_tensor *end, torc_scalar weight) {
    return pointwise_(self, TORC_OP_LERP, 2, (const torc_tensor *[]){self, end}, weight.f);
}
