// core/matmul.c — torch.matmul: dot, mv, mm, and batched products with broadcast batch dims.
// Operands go to the backend as strided views (transposes and slices are not copied).
#include <string.h>

#include "torc-impl.h"

// Whether dims [0, n] of o (the batch dims and the rows) are one run of rows: each dim's stride
// the next one's span, size-1 dims anywhere. *stride: that run's row stride.
static bool rows_fold(const torc_operand *o, int n, int64_t *stride) {
    int64_t inner = 1, st = 0;  // the span (in elements) of the dims folded so far; their stride
    bool any = false;
    for (int d = n; d >= 0; d--) {
        if (o->shape[d] == 1) continue;
        if (any && o->stride[d] != st * inner) return false;
        if (!any) st = o->stride[d], any = true;
        inner *= o->shape[d];
    }
    *stride = any ? st : o->stride[n];
    return true;
}

// torch.matmul's fold: a batched a times a b that is the same matrix for every batch (b 2-D, or
// its batch dims broadcast) is one (batch x M, K) x (K, N) GEMM where a's batch dims and rows are
// one run of rows, as C's are (a fresh tensor). One GEMM of B T rows instead of B of T: a library
// packs b once, and the GPT's linears ran (4, 256, 1536) x (1536, 384) as four 256-row GEMMs at
// 86 GFLOP/s against 103 for the same work as one (onednn, one Emerald Rapids core, torc-bench --gpt).
static void fold_batch(torc_op *op) {
    torc_operand *oa = &op->in[0], *ob = &op->in[1], *oc = &op->out[0];
    const int nb = oa->ndim - 2;
    if (nb <= 0) return;
    for (int i = 0; i < nb; i++)
        if (ob->stride[i] != 0 && ob->shape[i] != 1) return;
    int64_t sa, sc;
    if (!rows_fold(oa, nb, &sa) || !rows_fold(oc, nb, &sc)) return;
    const int64_t rows = torc__numel(nb + 1, oa->shape);
    torc_operand *ops[3] = {oa, ob, oc};
    for (int k = 0; k < 3; k++) {
        torc_operand *o = ops[k];
        o->shape[0] = k == 1 ? o->shape[nb] : rows;
        o->shape[1] = o->shape[nb + 1];
        o->stride[0] = k == 0 ? sa : k == 1 ? o->stride[nb] : sc;
        o->stride[1] = o->stride[nb + 1];
        o->ndim = 2;
    }
}

// a @ b with PyTorch's checks and errors: MATMUL, or with c a floating dtype MATMUL_ROUNDED in c
// (a and b each c or f32; run only where the device's backend takes it: else *declined is set,
// no error, and NULL returned).
static torc_tensor *matmul(const torc_tensor *a, const torc_tensor *b, torc_dtype out_dtype, torc_dtype c,
                           bool *declined) {
    if (a->ndim == 0 || b->ndim == 0)
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "both arguments to matmul need to be at least 1D, but they are %dD and %dD",
                              a->ndim, b->ndim);
    if (!torc__same_device(a, b)) return NULL;
    // torch.matmul runs one of four kernels, and its errors are theirs: dot (1-D @ 1-D), mv
    // (N-D @ 1-D, batch dims folded into rows), mm (1-D or N-D @ 2-D, folded likewise) and bmm
    // (anything @ a batched operand, after broadcasting the batch dims).
    enum { DOT, MV, MM, BMM } path = a->ndim == 1 && b->ndim == 1 ? DOT : b->ndim == 1 ? MV : b->ndim == 2 ? MM : BMM;
    const char *da = torc__dtype_c10_name(a->dtype), *db = torc__dtype_c10_name(b->dtype);
    if (a->dtype != b->dtype && c == TORC_DTYPE_COUNT) {
        if (path == DOT)
            return TORC_FAIL_NULL(TORC_ERR_DTYPE, "dot : expected both vectors to have same dtype, but found %s and %s", da, db);
        if (path == MV)
            return TORC_FAIL_NULL(TORC_ERR_DTYPE, "addmv input tensors must have the same dtype, but got %s, %s, and %s", db,
                                  da, db);
        if (path == BMM) return TORC_FAIL_NULL(TORC_ERR_DTYPE, "expected scalar type %s but found %s", da, db);
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "expected m1 and m2 to have the same dtype, but got: %s != %s",
                              torc__dtype_typemeta_name(a->dtype), torc__dtype_typemeta_name(b->dtype));
    }
    if (torc_dtype_is_fp8(a->dtype))
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "\"addmm_impl_cpu_\" not implemented for '%s' (fp8 matmuls go through "
                                              "scaled_mm)", da);
    if (a->dtype == TORC_DTYPE_BOOL) {
        static const char *const kernel[] = {"dot", "addmv_impl_cpu", "addmm_impl_cpu_", "bmm"};
        return TORC_FAIL_NULL(TORC_ERR_DTYPE, "\"%s\" not implemented for '%s'", kernel[path], da);
    }
    // Shapes as (batch..., M, K) and (batch..., K, N); 1-D operands get a unit dim that the
    // result drops again, as torch.matmul does.
    const int64_t M = a->ndim == 1 ? 1 : a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
    const int64_t Kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2], N = b->ndim == 1 ? 1 : b->shape[b->ndim - 1];
    int nba = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0, nb;
    int64_t batch[TORC_MAX_DIMS];
    if (torc__broadcast_shapes(nba, a->shape, nbb, b->shape, &nb, batch)) return NULL;
    if (K != Kb) {
        const long long rows = (long long)(K ? torc_numel(a) / K : torc__numel(nba, a->shape) * M);  // folded
        const long long nbatch = (long long)torc__numel(nb, batch);
        switch (path) {
        case DOT:
            return TORC_FAIL_NULL(TORC_ERR_SHAPE,
                                  "inconsistent tensor size, expected tensor [%lld] and src [%lld] to have the same "
                                  "number of elements, but got %lld and %lld elements respectively",
                                  (long long)K, (long long)Kb, (long long)K, (long long)Kb);
        case MV:
            return TORC_FAIL_NULL(TORC_ERR_SHAPE, "size mismatch, got input (%lld), mat (%lldx%lld), vec (%lld)", rows, rows,
                                  (long long)K, (long long)Kb);
        case MM:
            return TORC_FAIL_NULL(TORC_ERR_SHAPE, "mm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                                  rows, (long long)K, (long long)Kb, (long long)N);
        case BMM:
            return TORC_FAIL_NULL(TORC_ERR_SHAPE,
                                  "Expected size for first two dimensions of batch2 tensor to be: [%lld, %lld] but got: "
                                  "[%lld, %lld].", nbatch, (long long)K, nbatch, (long long)Kb);
        }
    }
    if (nb + 2 > TORC_MAX_DIMS) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "matmul: too many dims");
    const int nd = nb + 2;

    torc_op op = {.code = c == TORC_DTYPE_COUNT ? TORC_OP_MATMUL : TORC_OP_MATMUL_ROUNDED, .n_in = 2, .n_out = 1};
    op.params.matmul.dtype = c == TORC_DTYPE_COUNT ? 0 : (int32_t)c;
    // Operand a as (batch..., M, K): broadcast batch dims get stride 0.
    torc__operand(a, &op.in[0]);
    torc__operand(b, &op.in[1]);
    torc_operand *oa = &op.in[0], *ob = &op.in[1];
    oa->ndim = ob->ndim = nd;
    for (int i = 0; i < nb; i++) {
        const int ja = i - (nb - nba), jb = i - (nb - nbb);
        oa->shape[i] = ob->shape[i] = batch[i];
        oa->stride[i] = ja >= 0 && a->shape[ja] == batch[i] ? a->stride[ja] : 0;
        ob->stride[i] = jb >= 0 && b->shape[jb] == batch[i] ? b->stride[jb] : 0;
    }
    oa->shape[nb] = M, oa->shape[nb + 1] = K;
    oa->stride[nb] = a->ndim == 1 ? K * a->stride[0] : a->stride[a->ndim - 2];
    oa->stride[nb + 1] = a->stride[a->ndim - 1];
    ob->shape[nb] = K, ob->shape[nb + 1] = N;
    ob->stride[nb] = b->ndim == 1 ? b->stride[0] : b->stride[b->ndim - 2];
    ob->stride[nb + 1] = b->ndim == 1 ? 1 : b->stride[b->ndim - 1];

    int64_t oshape[TORC_MAX_DIMS];
    memcpy(oshape, batch, (size_t)nb * sizeof *batch);
    oshape[nb] = M, oshape[nb + 1] = N;
    torc_tensor *out = torc__new(a->device, out_dtype, nd, oshape);
    if (!out) return NULL;
    torc__operand(out, &op.out[0]);
    fold_batch(&op);
    const bool rounded = op.code == TORC_OP_MATMUL_ROUNDED;
    if (rounded && !torc__runs_natively(a->device, &op)) {
        torc_release(out);
        *declined = true;
        return NULL;
    }
    const uint64_t flops = 2 * (uint64_t)torc__numel(nb, batch) * (uint64_t)M * (uint64_t)N * (uint64_t)K;
    if (rounded ? torc__dispatch_supported(a->device, &op, flops) : torc__dispatch(a->device, &op, flops)) {
        torc_release(out);
        return NULL;
    }
    // The result's shape: drop the unit dims that 1-D operands introduced.
    int rn = 0;
    int64_t rshape[TORC_MAX_DIMS];
    for (int i = 0; i < nb; i++) rshape[rn++] = batch[i];
    if (a->ndim > 1) rshape[rn++] = M;
    if (b->ndim > 1) rshape[rn++] = N;
    if (rn != nd) {
        int64_t st[TORC_MAX_DIMS];
        torc__contiguous_strides(rn, rshape, st);
        torc_tensor *v = torc__make_view(out, rn, rshape, st, 0);
        torc_release(out);
        if (!v) return NULL;
        out = v;
    }
    const torc_tensor *ins[2] = {a, b};
    out = torc__autograd_record(out, op.code, 2, ins, &op.params);
    return out ? torc__register(out) : NULL;
}

torc_tensor *torc_matmul_out_dtype(const torc_tensor *a, const torc_tensor *b, torc_dtype out_dtype) {
    if (!a || !b) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (torc__autocast_matmul_applies(a, b)) return torc__autocast_matmul(a, b, out_dtype);  // autocast.c
    bool declined = false;
    return matmul(a, b, out_dtype, TORC_DTYPE_COUNT, &declined);
}

// Autocast's matmul in c without its casts (MATMUL_ROUNDED), where the backend takes it; else the
// casts and MATMUL. The same values either way; the fused form neither writes nor keeps the
// c copies of f32 operands (an f32 weight's copy, every forward; its gradient's, every backward).
torc_tensor *torc__matmul_rounded(const torc_tensor *a, const torc_tensor *b, torc_dtype c, torc_dtype out_dtype) {
    bool declined = false;
    torc_tensor *r = matmul(a, b, out_dtype, c, &declined);
    if (!declined) return r;
    torc_scope_push();
    const torc_tensor *ac = a->dtype == c ? a : torc_to_dtype((torc_tensor *)a, c);
    const torc_tensor *bc = ac && b->dtype != c ? torc_to_dtype((torc_tensor *)b, c) : b;
    r = ac && bc ? matmul(ac, bc, c, TORC_DTYPE_COUNT, &declined) : NULL;
    if (r && out_dtype != c) r = torc_to_dtype(r, out_dtype);
    r = torc_keep(r);
    torc_scope_pop();
    return r;
}

torc_tensor *torc_matmul(const torc_tensor *a, const torc_tensor *b) {
    if (!a || !b) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (torc__autocast_matmul_applies(a, b)) return torc__autocast_matmul(a, b, TORC_DTYPE_COUNT);  // autocast.c
    return torc_matmul_out_dtype(a, b, a->dtype);
}
