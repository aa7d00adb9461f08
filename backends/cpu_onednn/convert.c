// backends/cpu_onednn/convert.c — f16 / bf16 <-> f32 conversions on the host for the matmuls
// computed in f32 (matmul.c): f16 always (oneDNN 2.6 has no f16 matmul on CPU and its f16
// reorders run at ~60 ns/element), bf16 on CPUs without a fast bf16 dot product. Bit-exact
// with PyTorch (torc/convert.h: round to nearest even, subnormals kept, bf16 NaN -> 0x7FC0).
#include "onednn-impl.h"
#include "torc/convert.h"

// n elements of one line: from a source with stride si to a destination with stride di.
static void convert_line(dnnl_data_type_t from, const void *src, int64_t si, dnnl_data_type_t to,
                         void *dst, int64_t di, int64_t n) {
    const bool dense = si == 1 && di == 1;
    if (from == dnnl_bf16 && dense) {
        onednn__bf16_to_f32(dst, src, n);
    } else if (to == dnnl_bf16 && dense) {
        onednn__f32_to_bf16(dst, src, n);
    } else if (from == dnnl_f16) {
        const uint16_t *s = src;
        float *o = dst;
        if (dense) {
#pragma omp simd
            for (int64_t i = 0; i < n; i++) o[i] = torc_f16_to_f32(s[i]);
        } else {
            for (int64_t i = 0; i < n; i++) o[i * di] = torc_f16_to_f32(s[i * si]);
        }
    } else if (to == dnnl_f16) {
        const float *s = src;
        uint16_t *o = dst;
        if (dense) {
#pragma omp simd
            for (int64_t i = 0; i < n; i++) o[i] = torc_f32_to_f16(s[i]);
        } else {
            for (int64_t i = 0; i < n; i++) o[i * di] = torc_f32_to_f16(s[i * si]);
        }
    } else if (from == dnnl_bf16) {
        const uint16_t *s = src;
        float *o = dst;
        for (int64_t i = 0; i < n; i++) o[i * di] = torc_bf16_to_f32(s[i * si]);
    } else {
        const float *s = src;
        uint16_t *o = dst;
        for (int64_t i = 0; i < n; i++) o[i * di] = torc_f32_to_bf16(s[i * si]);
    }
}

void onednn__convert(const onednn_view *from, const void *src, const onednn_view *to, void *dst) {
    const int nd = from->ndim;
    // The inner loop runs along the dim `from` steps through most finely (memory order), so a
    // transposed operand converts line by line of its memory, not with a gather.
    int in = nd - 1;
    for (int d = 0; d < nd; d++)
        if (from->dims[d] > 1 && (from->dims[in] == 1 || from->strides[d] < from->strides[in])) in = d;
    const int64_t n = from->dims[in], si = from->strides[in], di = to->strides[in];
    const size_t sz_from = from->dt == dnnl_f32 ? 4 : 2, sz_to = to->dt == dnnl_f32 ? 4 : 2;
    int64_t lines = 1;
    for (int d = 0; d < nd; d++)
        if (d != in) lines *= from->dims[d];
#pragma omp parallel for schedule(static) if (lines * n > (INT64_C(1) << 16))
    for (int64_t l = 0; l < lines; l++) {
        int64_t so = 0, dof = 0, rest = l;
        for (int d = nd - 1; d >= 0; d--) {
            if (d == in) continue;
            const int64_t i = rest % from->dims[d];
            rest /= from->dims[d];
            so += i * from->strides[d];
            dof += i * to->strides[d];
        }
        convert_line(from->dt, (const char *)src + so * (int64_t)sz_from, si, to->dt,
                     (char *)dst + dof * (int64_t)sz_to, di, n);
    }
}
