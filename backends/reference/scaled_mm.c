// backends/reference/scaled_mm.c — the reference fp8 matmul (cuBLASLt's scaled GEMM): decode the
// fp8 operands, accumulate exactly in double, scale, record amax, round once to out's dtype.
#include <stdlib.h>

#include "ref-impl.h"

static bool is_fp8(torc_dtype d) { return d == TORC_DTYPE_F8_E4M3FN || d == TORC_DTYPE_F8_E5M2; }

// a, b fp8 (e5m2 x e5m2 is refused, as cuBLASLt does), f32 scales (scale_out in4 too), out
// f32/bf16/f16/fp8, amax (out[1]) f32.
bool ref_scaled_mm_dtypes(const torc_op *op) {
    const torc_dtype a = op->in[0].dtype, b = op->in[1].dtype, o = op->out[0].dtype;
    if (!is_fp8(a) || !is_fp8(b) || (a == TORC_DTYPE_F8_E5M2 && b == TORC_DTYPE_F8_E5M2)) return false;
    for (int i = 2; i < op->n_in; i++)
        if (op->in[i].dtype != TORC_DTYPE_F32) return false;
    if (op->n_out > 1 && op->out[1].dtype != TORC_DTYPE_F32) return false;
    return o == TORC_DTYPE_F32 || o == TORC_DTYPE_BF16 || o == TORC_DTYPE_F16 || is_fp8(o);
}

static int check_shapes(const torc_op *op) {
    const torc_operand *a = &op->in[0], *b = &op->in[1], *o = &op->out[0];
    if (a->ndim != 2 || b->ndim != 2 || o->ndim != 2)
        return ref_error(TORC_ERR_SHAPE, "reference backend: scaled_mm needs 2-D in0, in1 and out (got %d, %d and %d)",
                         a->ndim, b->ndim, o->ndim);
    if (a->shape[1] != b->shape[0])
        return ref_error(TORC_ERR_SHAPE, "_scaled_mm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                         (long long)a->shape[0], (long long)a->shape[1], (long long)b->shape[0], (long long)b->shape[1]);
    if (o->shape[0] != a->shape[0] || o->shape[1] != b->shape[1])
        return ref_error(TORC_ERR_SHAPE, "reference backend: scaled_mm out is %lldx%lld, expected %lldx%lld",
                         (long long)o->shape[0], (long long)o->shape[1], (long long)a->shape[0], (long long)b->shape[1]);
    for (int i = 2; i < op->n_in; i++)
        if (ref_numel(&op->in[i]) != 1)
            return ref_error(TORC_ERR_SHAPE, "reference backend: scaled_mm scale in%d has %lld elements, expected 1", i,
                             (long long)ref_numel(&op->in[i]));
    if (op->n_out > 1 && ref_numel(&op->out[1]) != 1)
        return ref_error(TORC_ERR_SHAPE, "reference backend: scaled_mm amax (out[1]) has %lld elements, expected 1",
                         (long long)ref_numel(&op->out[1]));
    return TORC_OK;
}

// Stores r into an fp8 element, clamping finite overflow to the format's largest value.
static void store_fp8_sat(void *p, torc_dtype dt, double r) {
    const float f = (float)r;
    *(uint8_t *)p = dt == TORC_DTYPE_F8_E4M3FN ? torc_f32_to_f8e4m3fn_sat(f) : torc_f32_to_f8e5m2_sat(f);
}

int ref_scaled_mm_run(const torc_op *op) {
    int st = check_shapes(op);
    if (st) return st;
    const torc_operand *a = &op->in[0], *b = &op->in[1], *o = &op->out[0];
    const int64_t M = a->shape[0], K = a->shape[1], N = b->shape[1];
    // A product of two fp8 numbers has at most 8 significant bits: for e4m3 x e4m3 the double
    // sum is exact up to K = 2^17, and with an e5m2 operand whenever the products' magnitudes
    // span less than 2^45 / K; beyond that it rounds at 2^-53, far below the final store.
    const double scale = ref_load_f(op->in[2].data, TORC_DTYPE_F32) * ref_load_f(op->in[3].data, TORC_DTYPE_F32);
    const bool fp8_out = is_fp8(o->dtype);
    const double scale_out = fp8_out && op->n_in > 4 ? ref_load_f(op->in[4].data, TORC_DTYPE_F32) : 1.0;
    double amax = 0.0;

    // Column panels of B (about 1 Mi doubles, at least 16 columns) are decoded once and reused
    // by every row of A, as in matmul.c.
    int64_t NB = K > 0 ? (INT64_C(1) << 20) / K : N;
    if (NB < 16) NB = 16;
    if (NB > N) NB = N;
    double *panel = malloc((size_t)(K * NB + K + NB + 1) * sizeof(double));
    if (panel == NULL)
        return ref_error(TORC_ERR_OOM, "reference backend: scaled_mm: out of memory for a %lldx%lld panel",
                         (long long)K, (long long)NB);
    double *arow = panel + K * NB, *acc = arow + K;
    const int64_t asz = (int64_t)torc_abi_dtype_size(a->dtype), bsz = (int64_t)torc_abi_dtype_size(b->dtype),
                  osz = (int64_t)torc_abi_dtype_size(o->dtype);
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
        const int64_t nb = N - j0 < NB ? N - j0 : NB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < nb; j++)
                panel[k * nb + j] =
                    ref_load_f((const char *)b->data + (k * b->stride[0] + (j0 + j) * b->stride[1]) * bsz, b->dtype);
        for (int64_t i = 0; i < M; i++) {
            for (int64_t k = 0; k < K; k++)
                arow[k] = ref_load_f((const char *)a->data + (i * a->stride[0] + k * a->stride[1]) * asz, a->dtype);
            for (int64_t j = 0; j < nb; j++) acc[j] = 0.0;
            for (int64_t k = 0; k < K; k++) {
                const double av = arow[k];
                const double *brow = panel + k * nb;
                for (int64_t j = 0; j < nb; j++) acc[j] += av * brow[j];
            }
            for (int64_t j = 0; j < nb; j++) {
                const double r = acc[j] * scale;
                const double m = fabs(r);
                if (m != m) amax = NAN;
                else if (m > amax) amax = m;  // stays NaN once NaN
                char *p = (char *)o->data + (i * o->stride[0] + (j0 + j) * o->stride[1]) * osz;
                if (fp8_out) store_fp8_sat(p, o->dtype, r * scale_out);
                else ref_store_f(p, o->dtype, r);
            }
        }
    }
    free(panel);
    if (op->n_out > 1) ref_store_f(op->out[1].data, TORC_DTYPE_F32, amax);
    return TORC_OK;
}
