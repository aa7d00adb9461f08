// backends/reference/matmul.c — the reference batched matmul: in0 (..., M, K) @ in1 (..., K, N)
// -> out (..., M, N), any strides, accumulating in double (floating) or wrapping int64 (integer);
// and MATMUL_ROUNDED, the same with the inputs and the sum rounded to params.matmul.dtype.
#include <stdlib.h>

#include "ref-impl.h"

// Matmul takes numbers: bool has no kernel in PyTorch. An integer out needs integer inputs
// (a floating product cannot be computed exactly in int64).
bool ref_matmul_dtypes(const torc_op *op) {
    const torc_dtype a = op->in[0].dtype, b = op->in[1].dtype, o = op->out[0].dtype;
    if (!ref_dt_in(a, REF_DT_NUM) || !ref_dt_in(b, REF_DT_NUM) || !ref_dt_in(o, REF_DT_NUM)) return false;
    return ref_is_float(o) || (!ref_is_float(a) && !ref_is_float(b));
}

// MATMUL_ROUNDED: c = params.matmul.dtype is F16 or BF16; each input c or F32; out c or F32.
bool ref_matmul_rounded_dtypes(const torc_op *op) {
    const torc_dtype c = (torc_dtype)op->params.matmul.dtype;
    if (c != TORC_DTYPE_F16 && c != TORC_DTYPE_BF16) return false;
    for (int i = 0; i < 3; i++) {
        const torc_dtype d = i < 2 ? op->in[i].dtype : op->out[0].dtype;
        if (d != c && d != TORC_DTYPE_F32) return false;
    }
    return true;
}

static int check_shapes(const torc_op *op) {
    const torc_operand *a = &op->in[0], *b = &op->in[1], *o = &op->out[0];
    if (a->ndim < 2 || a->ndim != b->ndim || a->ndim != o->ndim)
        return ref_error(TORC_ERR_SHAPE, "reference backend: matmul needs in0, in1 and out of the same ndim >= 2 "
                         "(got %d, %d and %d)", a->ndim, b->ndim, o->ndim);
    const int nd = a->ndim;
    if (a->shape[nd - 1] != b->shape[nd - 2])
        return ref_error(TORC_ERR_SHAPE, "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                         (long long)a->shape[nd - 2], (long long)a->shape[nd - 1],
                         (long long)b->shape[nd - 2], (long long)b->shape[nd - 1]);
    if (o->shape[nd - 2] != a->shape[nd - 2] || o->shape[nd - 1] != b->shape[nd - 1])
        return ref_error(TORC_ERR_SHAPE, "reference backend: matmul out is %lldx%lld, expected %lldx%lld",
                         (long long)o->shape[nd - 2], (long long)o->shape[nd - 1],
                         (long long)a->shape[nd - 2], (long long)b->shape[nd - 1]);
    for (int d = 0; d < nd - 2; d++)
        if (a->shape[d] != o->shape[d] || b->shape[d] != o->shape[d])
            return ref_error(TORC_ERR_SHAPE, "reference backend: matmul batch dim %d differs (in0 %lld, in1 %lld, "
                             "out %lld); the frontend broadcasts batch dims", d, (long long)a->shape[d],
                             (long long)b->shape[d], (long long)o->shape[d]);
    return TORC_OK;
}

// One (M, K) @ (K, N) product. Pointers are the batch's element [0, 0]; strides in elements.
typedef struct mm_mat { const char *data; torc_dtype dtype; size_t size; int64_t rs, cs; } mm_mat;

static inline const char *mm_at(const mm_mat *m, int64_t r, int64_t c) {
    return m->data + (r * m->rs + c * m->cs) * (int64_t)m->size;
}

// Column panels of B are converted to a contiguous buffer once and reused by every row of A;
// each output row accumulates over k in i-k-j order, so the inner loop streams two arrays.
// Scratch (caller-allocated): panel K*NB, arow K, acc NB, of double or int64.
// rdt: MATMUL_ROUNDED's c (inputs and sums rounded to it), else F64 (ref_round_to leaves doubles).
static void mm_float(const mm_mat *A, const mm_mat *B, char *out, torc_dtype odt, int64_t ors, int64_t ocs,
                     int64_t M, int64_t K, int64_t N, int64_t NB, torc_dtype rdt, double *panel, double *arow,
                     double *acc) {
    const int64_t osize = (int64_t)torc_abi_dtype_size(odt);
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
        const int64_t nb = N - j0 < NB ? N - j0 : NB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < nb; j++)
                panel[k * nb + j] = ref_round_to(ref_load_f(mm_at(B, k, j0 + j), B->dtype), rdt);
        for (int64_t i = 0; i < M; i++) {
            for (int64_t k = 0; k < K; k++) arow[k] = ref_round_to(ref_load_f(mm_at(A, i, k), A->dtype), rdt);
            for (int64_t j = 0; j < nb; j++) acc[j] = 0.0;
            for (int64_t k = 0; k < K; k++) {
                const double a = arow[k];
                const double *brow = panel + k * nb;
                for (int64_t j = 0; j < nb; j++) acc[j] += a * brow[j];
            }
            for (int64_t j = 0; j < nb; j++)
                ref_store_f(out + (i * ors + (j0 + j) * ocs) * osize, odt, ref_round_to(acc[j], rdt));
        }
    }
}

static void mm_int(const mm_mat *A, const mm_mat *B, char *out, torc_dtype odt, int64_t ors, int64_t ocs,
                   int64_t M, int64_t K, int64_t N, int64_t NB, int64_t *panel, int64_t *arow, int64_t *acc) {
    const int64_t osize = (int64_t)torc_abi_dtype_size(odt);
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
        const int64_t nb = N - j0 < NB ? N - j0 : NB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < nb; j++) panel[k * nb + j] = ref_load_i(mm_at(B, k, j0 + j), B->dtype);
        for (int64_t i = 0; i < M; i++) {
            for (int64_t k = 0; k < K; k++) arow[k] = ref_load_i(mm_at(A, i, k), A->dtype);
            for (int64_t j = 0; j < nb; j++) acc[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                const int64_t a = arow[k];
                const int64_t *brow = panel + k * nb;
                for (int64_t j = 0; j < nb; j++) acc[j] = ref_wrap_add(acc[j], ref_wrap_mul(a, brow[j]));
            }
            for (int64_t j = 0; j < nb; j++) ref_store_i(out + (i * ors + (j0 + j) * ocs) * osize, odt, acc[j]);
        }
    }
}

// Small 2-D f32 or f64 products (every dtype the same): the same sums as mm_float (in double,
// k ascending from 0.0, rounded once) read straight through the strides, without the panel.
#define SMALL_MM_LOOP(T, bcs) \
    do { \
        const T *A = a->data, *B = b->data; \
        T *O = o->data; \
        double acc[64]; \
        for (int64_t i = 0; i < M; i++) { \
            for (int64_t j = 0; j < N; j++) acc[j] = 0.0; \
            for (int64_t k = 0; k < K; k++) { \
                const double x = A[i * ars + k * acs]; \
                const T *brow = B + k * brs; \
                for (int64_t j = 0; j < N; j++) acc[j] += x * (double)brow[j * (bcs)]; \
            } \
            for (int64_t j = 0; j < N; j++) O[i * ors + j * ocs] = (T)acc[j]; \
        } \
    } while (0)
// Rows of B are contiguous in most calls: a literal unit step lets the compiler vectorize.
#define SMALL_MM(T) \
    do { \
        if (bcs == 1) SMALL_MM_LOOP(T, 1); \
        else SMALL_MM_LOOP(T, bcs); \
    } while (0)
static bool small_float(const torc_operand *a, const torc_operand *b, const torc_operand *o, int64_t M, int64_t K,
                        int64_t N) {
    const torc_dtype dt = o->dtype;
    if (o->ndim != 2 || (dt != TORC_DTYPE_F32 && dt != TORC_DTYPE_F64) || a->dtype != dt || b->dtype != dt ||
        M * N * K > 4096 || N > 64)
        return false;
    const int64_t ars = a->stride[0], acs = a->stride[1], brs = b->stride[0], bcs = b->stride[1], ors = o->stride[0],
                  ocs = o->stride[1];
    if (dt == TORC_DTYPE_F32) SMALL_MM(float);
    else SMALL_MM(double);
    return true;
}
#undef SMALL_MM
#undef SMALL_MM_LOOP

int ref_matmul_run(const torc_op *op) {
    int st = check_shapes(op);
    if (st) return st;
    const torc_operand *a = &op->in[0], *b = &op->in[1], *o = &op->out[0];
    const int nd = a->ndim;
    const int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[nd - 1];
    const bool rounded = op->code == TORC_OP_MATMUL_ROUNDED;
    if (ref_numel(o) == 0 || (!rounded && small_float(a, b, o, M, K, N))) return TORC_OK;

    // Panel width: the panel holds about 1 Mi elements (8 MiB), at least 16 columns wide.
    int64_t NB = K > 0 ? (INT64_C(1) << 20) / K : N;
    if (NB < 16) NB = 16;
    if (NB > N) NB = N;
    const size_t elems = (size_t)(K * NB + K + NB);
    // double and int64 are both 8 bytes; small products (most calls) use the stack
    _Alignas(8) unsigned char small[4096];
    void *scratch = elems * 8 <= sizeof small ? (void *)small : malloc(elems * 8);
    if (scratch == NULL)
        return ref_error(TORC_ERR_OOM, "reference backend: matmul: out of memory for a %zu-byte panel", elems * 8);

    const bool floating = ref_is_float(o->dtype);
    const int64_t asz = (int64_t)torc_abi_dtype_size(a->dtype), bsz = (int64_t)torc_abi_dtype_size(b->dtype),
                  osz = (int64_t)torc_abi_dtype_size(o->dtype);
    int64_t idx[TORC_MAX_DIMS] = {0};
    int64_t nbatch = 1;
    for (int d = 0; d < nd - 2; d++) nbatch *= o->shape[d];
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t aoff = 0, boff = 0, ooff = 0;
        for (int d = 0; d < nd - 2; d++) {
            aoff += idx[d] * a->stride[d];
            boff += idx[d] * b->stride[d];
            ooff += idx[d] * o->stride[d];
        }
        const mm_mat A = {(const char *)a->data + aoff * asz, a->dtype, (size_t)asz, a->stride[nd - 2], a->stride[nd - 1]};
        const mm_mat B = {(const char *)b->data + boff * bsz, b->dtype, (size_t)bsz, b->stride[nd - 2], b->stride[nd - 1]};
        char *out = (char *)o->data + ooff * osz;
        if (floating) {
            double *s = scratch;
            mm_float(&A, &B, out, o->dtype, o->stride[nd - 2], o->stride[nd - 1], M, K, N, NB,
                     rounded ? (torc_dtype)op->params.matmul.dtype : TORC_DTYPE_F64, s, s + K * NB, s + K * NB + K);
        } else {
            int64_t *s = scratch;
            mm_int(&A, &B, out, o->dtype, o->stride[nd - 2], o->stride[nd - 1], M, K, N, NB, s, s + K * NB,
                   s + K * NB + K);
        }
        for (int d = nd - 3; d >= 0; d--) {  // next batch index, row-major
            if (++idx[d] < o->shape[d]) break;
            idx[d] = 0;
        }
    }
    if (scratch != small) free(scratch);
    return TORC_OK;
}
