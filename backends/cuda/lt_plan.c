// backends/cuda/lt_plan.c — cuBLASLt fp8 matmul planning: layout checks with messages that say
// what to change, descriptor creation, and the per-shape algorithm cache.
#include "lt_plan.h"

#include <stdio.h>
#include <string.h>

static cudaDataType lt_type(torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F8_E4M3FN: return CUDA_R_8F_E4M3;
    case TORC_DTYPE_F8_E5M2: return CUDA_R_8F_E5M2;
    case TORC_DTYPE_BF16: return CUDA_R_16BF;
    case TORC_DTYPE_F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
    }
}

static bool is_fp8(torc_dtype d) { return tcu_is_fp8(d); }

void tcu_lt_plan_build(const tcu_lt_problem *p, tcu_lt_plan *pl) {
    memset(pl, 0, sizeof *pl);
    if (p->cc_major * 10 + p->cc_minor < 89) {
        snprintf(pl->why, sizeof pl->why, "fp8 matmul needs compute capability 8.9 or newer (this device is %d.%d)",
                 p->cc_major, p->cc_minor);
        return;
    }
    if (!is_fp8(p->a) || !is_fp8(p->b)) {
        snprintf(pl->why, sizeof pl->why, "scaled_mm takes fp8 operands (float8_e4m3fn or float8_e5m2)");
        return;
    }
    if (p->a == TORC_DTYPE_F8_E5M2 && p->b == TORC_DTYPE_F8_E5M2) {
        snprintf(pl->why, sizeof pl->why,
                 "e5m2 x e5m2 is not supported by cuBLASLt: make at least one operand float8_e4m3fn");
        return;
    }
    switch (p->out) {
    case TORC_DTYPE_F32: case TORC_DTYPE_BF16: case TORC_DTYPE_F16: case TORC_DTYPE_F8_E4M3FN: case TORC_DTYPE_F8_E5M2:
        break;
    default:
        snprintf(pl->why, sizeof pl->why, "scaled_mm writes float32, bfloat16, float16 or an fp8 dtype");
        return;
    }
    // cuBLASLt's fp8 table (cublasLtMatmul, "FP8 data types"): e4m3 x e4m3 writes e4m3, bf16, f16
    // or f32, never e5m2; e5m2 outputs need one e5m2 operand.
    if (p->out == TORC_DTYPE_F8_E5M2 && p->a == TORC_DTYPE_F8_E4M3FN && p->b == TORC_DTYPE_F8_E4M3FN) {
        snprintf(pl->why, sizeof pl->why, "cuBLASLt has no e4m3 x e4m3 kernel with a float8_e5m2 output");
        return;
    }
    if (p->m % 16 || p->n % 16 || p->k % 16) {
        snprintf(pl->why, sizeof pl->why,
                 "cuBLASLt fp8 needs every matrix dimension to be a multiple of 16, got m=%lld n=%lld k=%lld "
                 "(pad the operands)", (long long)p->m, (long long)p->n, (long long)p->k);
        return;
    }
    // TN: both operands contiguous along k (a row-major, b column-major).
    if (!(p->a_cs == 1 && p->a_rs >= p->k) || !(p->b_rs == 1 && p->b_cs >= p->k)) {
        snprintf(pl->why, sizeof pl->why,
                 "cuBLASLt fp8 needs a row-major (k contiguous) and b column-major (k contiguous): pass "
                 "a.contiguous() and b.t().contiguous().t()");
        return;
    }
    const int64_t lda = p->a_rs, ldb = p->b_cs;
    if (p->c_cs == 1 && p->c_rs >= p->n) {         // row-major out: D' = out^T = b^T a^T
        pl->swap = true;
        pl->mm = p->n;
        pl->nn = p->m;
        pl->lda = ldb;
        pl->ldb = lda;
        pl->ldc = p->c_rs;
    } else if (p->c_rs == 1 && p->c_cs >= p->m) {  // column-major out: D' = out = a b
        pl->swap = false;
        pl->mm = p->m;
        pl->nn = p->n;
        pl->lda = lda;
        pl->ldb = ldb;
        pl->ldc = p->c_cs;
    } else {
        snprintf(pl->why, sizeof pl->why, "scaled_mm writes a row-major or column-major output (one unit stride)");
        return;
    }
    if (pl->lda % 16 || pl->ldb % 16 || pl->ldc % 16) {
        snprintf(pl->why, sizeof pl->why,
                 "cuBLASLt fp8 needs leading dimensions that are multiples of 16 (got %lld, %lld, %lld)",
                 (long long)pl->lda, (long long)pl->ldb, (long long)pl->ldc);
        return;
    }
    pl->k = p->k;
    pl->type_a = lt_type(pl->swap ? p->b : p->a);
    pl->type_b = lt_type(pl->swap ? p->a : p->b);
    pl->type_d = lt_type(p->out);
    // With an fp8 D, C (unused: beta = 0) must still be a 16-bit type.
    pl->type_c = is_fp8(p->out) ? CUDA_R_16BF : pl->type_d;
    pl->workspace = p->cc_major >= 9 ? TCU_LT_WORKSPACE_SM90 : TCU_LT_WORKSPACE_OLD;
    pl->ok = true;
}

#define LT_TRY(call, what)                                                  \
    do {                                                                    \
        const cublasStatus_t st_ = (call);                                  \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                 \
            snprintf(err, err_n, "%s failed (cuBLAS status %d)", what, (int)st_); \
            tcu_lt_descs_destroy(d);                                        \
            return (int)st_;                                                \
        }                                                                   \
    } while (0)

int tcu_lt_descs_build(const tcu_lt_api *api, const tcu_lt_plan *pl, const tcu_lt_problem *p,
                       const tcu_lt_ptrs *ptrs, tcu_lt_descs *d, char *err, size_t err_n) {
    memset(d, 0, sizeof *d);
    d->api = api;
    LT_TRY(api->desc_create(&d->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT_TRY(api->desc_set(d->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
    LT_TRY(api->desc_set(d->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
    const int8_t fast = p->fast_accum ? 1 : 0;
    LT_TRY(api->desc_set(d->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast), "FAST_ACCUM");
    // Scales follow their operands through the swap.
    const float *sa = pl->swap ? ptrs->scale_b : ptrs->scale_a, *sb = pl->swap ? ptrs->scale_a : ptrs->scale_b;
    if (sa) LT_TRY(api->desc_set(d->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa), "A_SCALE");
    if (sb) LT_TRY(api->desc_set(d->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb), "B_SCALE");
    if (is_fp8(p->out)) {
        if (ptrs->scale_d)
            LT_TRY(api->desc_set(d->op, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &ptrs->scale_d,
                                                  sizeof ptrs->scale_d), "D_SCALE");
        if (ptrs->amax_d)
            LT_TRY(api->desc_set(d->op, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &ptrs->amax_d,
                                                  sizeof ptrs->amax_d), "AMAX_D");
    }
    // op(A') = T: A' is stored k x mm; op(B') = N: B' is stored k x nn; C and D are mm x nn.
    LT_TRY(api->layout_create(&d->a, pl->type_a, (uint64_t)pl->k, (uint64_t)pl->mm, pl->lda), "layout A");
    LT_TRY(api->layout_create(&d->b, pl->type_b, (uint64_t)pl->k, (uint64_t)pl->nn, pl->ldb), "layout B");
    LT_TRY(api->layout_create(&d->c, pl->type_c, (uint64_t)pl->mm, (uint64_t)pl->nn, pl->ldc), "layout C");
    LT_TRY(api->layout_create(&d->d, pl->type_d, (uint64_t)pl->mm, (uint64_t)pl->nn, pl->ldc), "layout D");
    return 0;
}

void tcu_lt_descs_destroy(tcu_lt_descs *d) {
    if (d->a) d->api->layout_destroy(d->a);
    if (d->b) d->api->layout_destroy(d->b);
    if (d->c) d->api->layout_destroy(d->c);
    if (d->d) d->api->layout_destroy(d->d);
    if (d->op) d->api->desc_destroy(d->op);
    memset(d, 0, sizeof *d);
}

// ---- cache ----
uint32_t tcu_lt_alignment(const void *p) {
    const uintptr_t a = (uintptr_t)p;
    uint32_t al = 1;
    while (al < 256 && !(a & al)) al <<= 1;
    return al;
}

void tcu_lt_key_of(const tcu_lt_plan *pl, const tcu_lt_problem *p, const tcu_lt_ptrs *ptrs, const void *A,
                   const void *B, const void *D, tcu_lt_key *k) {
    memset(k, 0, sizeof *k);  // padding too: keys compare with memcmp
    k->mm = pl->mm;
    k->nn = pl->nn;
    k->k = pl->k;
    k->lda = pl->lda;
    k->ldb = pl->ldb;
    k->ldc = pl->ldc;
    k->type_a = (int)pl->type_a;
    k->type_b = (int)pl->type_b;
    k->type_d = (int)pl->type_d;
    k->fast_accum = p->fast_accum;
    k->cc = p->cc_major * 10 + p->cc_minor;
    k->align_a = tcu_lt_alignment(A);
    k->align_b = tcu_lt_alignment(B);
    k->align_d = tcu_lt_alignment(D);
    k->has_scale_d = tcu_is_fp8(p->out) && ptrs->scale_d;
    k->has_amax = tcu_is_fp8(p->out) && ptrs->amax_d;
}

bool tcu_lt_cache_find(tcu_lt_cache *c, const tcu_lt_key *k, cublasLtMatmulAlgo_t *algo) {
    for (int i = 0; i < TCU_LT_CACHE_SLOTS; i++)
        if (c->used[i] && memcmp(&c->key[i], k, sizeof *k) == 0) {
            c->used[i] = ++c->tick;
            *algo = c->algo[i];
            return true;
        }
    return false;
}

void tcu_lt_cache_put(tcu_lt_cache *c, const tcu_lt_key *k, const cublasLtMatmulAlgo_t *algo) {
    int slot = 0;
    for (int i = 0; i < TCU_LT_CACHE_SLOTS; i++) {
        if (c->used[i] && memcmp(&c->key[i], k, sizeof *k) == 0) { slot = i; break; }
        if (c->used[i] < c->used[slot]) slot = i;   // empty (0) or least recently used
    }
    c->key[slot] = *k;
    c->algo[slot] = *algo;
    c->used[slot] = ++c->tick;
}

// ---- SCALED_MM decisions ----
tcu_smm_path tcu_smm_decide(const torc_op *op, int cc_major, int cc_minor, bool via_f32, tcu_lt_problem *p,
                            tcu_lt_plan *pl) {
    const torc_operand *a = &op->in[0], *b = &op->in[1], *c = &op->out[0];
    memset(p, 0, sizeof *p);
    p->a = a->dtype;
    p->b = b->dtype;
    p->out = via_f32 ? TORC_DTYPE_F32 : c->dtype;
    p->m = a->shape[0];
    p->k = a->shape[1];
    p->n = b->shape[1];
    p->a_rs = a->stride[0], p->a_cs = a->stride[1];
    p->b_rs = b->stride[0], p->b_cs = b->stride[1];
    if (via_f32) p->c_rs = p->n, p->c_cs = 1;   // a contiguous scratch
    else p->c_rs = c->stride[0], p->c_cs = c->stride[1];
    p->cc_major = cc_major;
    p->cc_minor = cc_minor;
    p->fast_accum = false;
    tcu_lt_plan_build(p, pl);
    if (cc_major * 10 + cc_minor < 89) return TCU_SMM_REFUSE;
    // An empty product (k == 0: zeros; m or n == 0: nothing to write, amax 0) is the generic
    // kernel's: cuBLASLt is never asked about empty matrices.
    if (!pl->ok || p->k == 0 || p->m == 0 || p->n == 0) return TCU_SMM_GENERIC;
    if (((uintptr_t)a->data | (uintptr_t)b->data | (via_f32 ? 0 : (uintptr_t)c->data)) & 15) {
        snprintf(pl->why, sizeof pl->why, "cuBLASLt fp8 needs 16-byte aligned operands");
        pl->ok = false;
        return TCU_SMM_GENERIC;
    }
    return TCU_SMM_LT;
}

void tcu_smm_args_from_op(const torc_op *op, tcu_smm_args *s) {
    memset(s, 0, sizeof *s);
    s->dt_a = op->in[0].dtype;
    s->dt_b = op->in[1].dtype;
    s->dt_c = op->out[0].dtype;
    s->a = op->in[0].data;
    s->b = op->in[1].data;
    s->c = op->out[0].data;
    s->scale_a = op->in[2].data;
    s->scale_b = op->in[3].data;
    s->scale_out = tcu_is_fp8(op->out[0].dtype) && op->n_in > 4 ? op->in[4].data : NULL;  // optional in4
    s->amax = op->n_out > 1 ? op->out[1].data : NULL;  // optional out[1]
    s->M = op->in[0].shape[0];
    s->K = op->in[0].shape[1];
    s->N = op->in[1].shape[1];
    s->a_rs = op->in[0].stride[0], s->a_cs = op->in[0].stride[1];
    s->b_rs = op->in[1].stride[0], s->b_cs = op->in[1].stride[1];
    s->c_rs = op->out[0].stride[0], s->c_cs = op->out[0].stride[1];
}
