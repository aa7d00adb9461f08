// backends/cpu_onednn/f16.c — f16 <-> f32 conversion on the host for the f16 matmul path:
// oneDNN 2.6's f16 reorders run at ~60 ns/element, this loop at memory speed. Bit-exact with
// PyTorch (torc/convert.h: round to nearest even, subnormals kept).
#include "onednn-impl.h"
#include "torc/convert.h"

void onednn__convert_f16(const onednn_view *from, const void *src, const onednn_view *to, void *dst) {
    const int nd = from->ndim;
    const int64_t inner = from->dims[nd - 1];
    const int64_t si = from->strides[nd - 1], di = to->strides[nd - 1];
    int64_t rows = 1;
    for (int d = 0; d < nd - 1; d++) rows *= from->dims[d];
    const bool widen = from->dt == dnnl_f16;
#pragma omp parallel for schedule(static) if (rows * inner > (INT64_C(1) << 16))
    for (int64_t r = 0; r < rows; r++) {
        int64_t so = 0, dof = 0, rest = r;
        for (int d = nd - 2; d >= 0; d--) {
            const int64_t i = rest % from->dims[d];
            rest /= from->dims[d];
            so += i * from->strides[d];
            dof += i * to->strides[d];
        }
        if (widen) {
            const uint16_t *s = (const uint16_t *)src + so;
            float *o = (float *)dst + dof;
            if (si == 1 && di == 1) {
#pragma omp simd
                for (int64_t i = 0; i < inner; i++) o[i] = torc_f16_to_f32(s[i]);
            } else {
                for (int64_t i = 0; i < inner; i++) o[i * di] = torc_f16_to_f32(s[i * si]);
            }
        } else {
            const float *s = (const float *)src + so;
            uint16_t *o = (uint16_t *)dst + dof;
            if (si == 1 && di == 1) {
#pragma omp simd
                for (int64_t i = 0; i < inner; i++) o[i] = torc_f32_to_f16(s[i]);
            } else {
                for (int64_t i = 0; i < inner; i++) o[i * di] = torc_f32_to_f16(s[i * si]);
            }
        }
    }
}
