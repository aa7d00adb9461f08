// backends/cpu_onednn/scaled_mm.c — TORC_OP_SCALED_MM (the fp8 matmul with per-tensor scales
// that fp8 autocast runs) on the host: both fp8 operands decoded to f32 (exact), one sgemm, then
// one pass that scales, records amax and rounds into out (fp8 out: times scale_out, saturated),
// as the reference does (backends/reference/scaled_mm.c) but accumulating in f32. oneDNN 2.6 has
// no fp8; before this the op ran on the reference backend at ~5 GFLOP/s.
// Products of two fp8 values have at most 8 significant bits, so each is exact in f32.
#include <math.h>
#include <omp.h>
#include <string.h>

#include "onednn-impl.h"
#include "torc/convert.h"

static bool is_fp8(torc_dtype d) { return d == TORC_DTYPE_F8_E4M3FN || d == TORC_DTYPE_F8_E5M2; }

bool onednn__scaled_mm_takes(const torc_op *op) { return op->code == TORC_OP_SCALED_MM; }

int onednn__scaled_mm_check(const torc_op *op) {
    // in4 (scale_out) and out[1] (amax) are optional.
    if (op->n_in != 4 && op->n_in != 5)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: scaled_mm takes 4 or 5 inputs, got %d", op->n_in);
    if (op->n_out != 1 && op->n_out != 2)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: scaled_mm takes 1 or 2 outputs, got %d", op->n_out);
    int st = 0;
    for (int i = 0; i < op->n_out && !st; i++) st = onednn__check_operand(&op->out[i], "out");
    for (int i = 0; i < op->n_in && !st; i++) st = onednn__check_operand(&op->in[i], "in");
    if (st) return st;
    for (int i = 2; i < op->n_in; i++)
        if (op->in[i].dtype != TORC_DTYPE_F32 || onednn__numel(&op->in[i]) != 1)
            return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: scaled_mm's scales are one-element float32 tensors");
    if (op->n_out == 2 && (op->out[1].dtype != TORC_DTYPE_F32 || onednn__numel(&op->out[1]) != 1))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: scaled_mm's amax is a one-element float32 tensor");
    const torc_operand *a = &op->in[0], *b = &op->in[1], *o = &op->out[0];
    if (a->ndim != 2 || b->ndim != 2 || o->ndim != 2 || a->shape[1] != b->shape[0] || o->shape[0] != a->shape[0] ||
        o->shape[1] != b->shape[1] || onednn__numel(&op->in[2]) != 1 || onednn__numel(&op->in[3]) != 1)
        return onednn__error(TORC_ERR_SHAPE, "onednn: scaled_mm needs in0 (M, K), in1 (K, N), out (M, N) and two "
                             "one-element scales");
    const torc_dtype od = o->dtype;
    if (!is_fp8(a->dtype) || !is_fp8(b->dtype) || (a->dtype == TORC_DTYPE_F8_E5M2 && b->dtype == TORC_DTYPE_F8_E5M2) ||
        op->in[2].dtype != TORC_DTYPE_F32 || op->in[3].dtype != TORC_DTYPE_F32 ||
        !(od == TORC_DTYPE_F32 || od == TORC_DTYPE_BF16 || od == TORC_DTYPE_F16 || is_fp8(od)))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: scaled_mm runs fp8 x fp8 (not e5m2 x e5m2) with float32 "
                             "scales into float32, bfloat16, float16 or fp8, got %s x %s -> %s",
                             torc_abi_dtype_name(a->dtype), torc_abi_dtype_name(b->dtype), torc_abi_dtype_name(od));
    return 0;
}

// x (R x C, fp8, strides sr, sc) decoded into dst in x's own major order (a transposed operand
// reads its memory in order), as sgemm's view of it: *trans 'N' (row-major) or 'T', *ld.
static void decode(const torc_operand *x, float *dst, char *trans, int64_t *ld) {
    const int64_t R = x->shape[0], C = x->shape[1], sr = x->stride[0], sc = x->stride[1];
    const bool col = R > 1 && C > 1 && sr < sc;
    const int64_t lines = col ? C : R, n = col ? R : C, sl = col ? sc : sr, si = col ? sr : sc;
    float lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = x->dtype == TORC_DTYPE_F8_E4M3FN ? torc_f8e4m3fn_to_f32((uint8_t)v) : torc_f8e5m2_to_f32((uint8_t)v);
    const uint8_t *src = x->data;
    ONEDNN_FOR(R * C >= ONEDNN_SMALL_STREAM, l, lines,
               for (int64_t i = 0; i < n; i++) dst[l * n + i] = lut[src[l * sl + i * si]];);
    *trans = col ? 'T' : 'N';
    *ld = n > 1 ? n : 1;
}

// Row i of the f32 product c (row-major, N columns): r = c * scale into out's row, max |r| into
// *amax (NaN once any r is NaN, as the reference records it).
static void epilogue_row(const torc_op *op, const float *c, int64_t i, double scale, double scale_out, double *amax) {
    const torc_operand *o = &op->out[0];
    const int64_t N = o->shape[1];
    char *row = (char *)o->data + i * o->stride[0] * (int64_t)torc_abi_dtype_size(o->dtype);
    double m = *amax;
    for (int64_t j = 0; j < N; j++) {
        const double r = (double)c[j] * scale, a = fabs(r);
        if (a != a) m = NAN;
        else if (a > m) m = a;  // stays NaN once NaN
        const int64_t at = j * o->stride[1];
        switch (o->dtype) {
        case TORC_DTYPE_F32: ((float *)row)[at] = (float)r; break;
        case TORC_DTYPE_BF16: ((uint16_t *)row)[at] = torc_f32_to_bf16((float)r); break;
        case TORC_DTYPE_F16: ((uint16_t *)row)[at] = torc_f32_to_f16((float)r); break;
        case TORC_DTYPE_F8_E4M3FN: ((uint8_t *)row)[at] = torc_f32_to_f8e4m3fn_sat((float)(r * scale_out)); break;
        default: ((uint8_t *)row)[at] = torc_f32_to_f8e5m2_sat((float)(r * scale_out)); break;
        }
    }
    *amax = m;
}

static double max_nan(double a, double b) { return a != a || b != b ? NAN : a > b ? a : b; }

int onednn__scaled_mm_run(const torc_op *op) {
    const torc_operand *a = &op->in[0], *b = &op->in[1], *o = &op->out[0];
    const int64_t M = a->shape[0], K = a->shape[1], N = b->shape[1];
    float *amax_out = op->n_out > 1 ? op->out[1].data : NULL;
    if (M == 0 || N == 0) {
        if (amax_out) *amax_out = 0.0f;
        return 0;
    }
    const size_t na = (size_t)(M * K), nb = (size_t)(K * N), nc = (size_t)(M * N);
    float *ta = onednn__mem_alloc(4 * (na + nb + nc + 32));
    if (!ta) return onednn__error(TORC_ERR_OOM, "onednn: scaled_mm: cannot allocate %zu bytes of f32 temporaries",
                                  4 * (na + nb + nc + 32));
    float *tb = ta + (na + 15) / 16 * 16, *tc = tb + (nb + 15) / 16 * 16;
    onednn_gemm g;
    memset(&g, 0, sizeof g);
    g.M = M, g.N = N, g.K = K, g.ldc = N;
    if (K > 0) {
        decode(a, ta, &g.transa, &g.lda);
        decode(b, tb, &g.transb, &g.ldb);
    }
    // GEMMs under ONEDNN_SMALL_WORK multiply-adds on the calling thread, as the matmul plans run.
    const int nthr = omp_get_max_threads();
    const bool serial = M * N * K < ONEDNN_SMALL_WORK && nthr > 1;
    if (serial) omp_set_num_threads(1);
    const int st = onednn__gemm_run(&g, ta, tb, tc);
    if (serial) omp_set_num_threads(nthr);
    if (st) {
        onednn__mem_free(ta);
        return st;
    }
    const double scale = (double)*(const float *)op->in[2].data * (double)*(const float *)op->in[3].data;
    const double scale_out = is_fp8(o->dtype) && op->n_in > 4 ? (double)*(const float *)op->in[4].data : 1.0;
    double amax = 0.0;
#pragma omp parallel if (nc >= (size_t)ONEDNN_SMALL_STREAM && !serial)
    {
        double m = 0.0;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < M; i++) epilogue_row(op, tc + i * N, i, scale, scale_out, &m);
#pragma omp critical
        amax = max_nan(amax, m);
    }
    onednn__mem_free(ta);
    if (amax_out) *amax_out = (float)amax;
    return 0;
}
