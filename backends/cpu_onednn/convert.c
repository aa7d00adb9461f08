// backends/cpu_onednn/convert.c — f16 / bf16 <-> f32 conversions on the host for the matmuls
// computed in f32 by sgemm (matmul.c) where torc's FMA GEMM does not run (small GEMMs, below AVX2,
// or TORC_ONEDNN_FMA_GEMM=0): f16 (oneDNN 2.6 has no f16 matmul on CPU and its f16 reorders run at
// ~60 ns/element), bf16 on CPUs without a fast bf16 dot product; and bf16 outs of primitives. And
// f32 -> f32 rounded to f16 or bf16 (MATMUL_ROUNDED's f32 operands and f32 out there). Bit-exact
// with PyTorch (torc/convert.h: round to nearest even, subnormals kept, bf16 NaN -> 0x7FC0).
#include "onednn-impl.h"
#include "torc/convert.h"

void onednn__round_line(dnnl_data_type_t round, const float *src, int64_t si, float *dst, int64_t di, int64_t n) {
    if (round == dnnl_data_type_undef) {
        for (int64_t i = 0; i < n; i++) dst[i * di] = src[i * si];
        return;
    }
    if (si != 1 || di != 1) {
        for (int64_t i = 0; i < n; i++) {
            const float v = src[i * si];
            dst[i * di] = round == dnnl_bf16 ? torc_bf16_to_f32(torc_f32_to_bf16(v)) : torc_f16_to_f32(torc_f32_to_f16(v));
        }
        return;
    }
    uint16_t h[256];
    for (int64_t i = 0; i < n; i += 256) {
        const int64_t c = n - i < 256 ? n - i : 256;
        if (round == dnnl_bf16) {
            onednn__f32_to_bf16(h, src + i, c);
            onednn__bf16_to_f32(dst + i, h, c);
        } else {
            onednn__f32_to_f16(h, src + i, c);
            onednn__f16_to_f32(dst + i, h, c);
        }
    }
}

// n elements of one line: from a source with stride si to a destination with stride di.
static void convert_line(dnnl_data_type_t from, const void *src, int64_t si, dnnl_data_type_t to,
                         void *dst, int64_t di, int64_t n, dnnl_data_type_t round) {
    if (from == dnnl_f32 && to == dnnl_f32) {
        onednn__round_line(round, src, si, dst, di, n);
        return;
    }
    if (si == 1 && di == 1) {  // cast.c's vectorized loops
        if (from == dnnl_bf16) onednn__bf16_to_f32(dst, src, n);
        else if (from == dnnl_f16) onednn__f16_to_f32(dst, src, n);
        else if (to == dnnl_bf16) onednn__f32_to_bf16(dst, src, n);
        else onednn__f32_to_f16(dst, src, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        if (from == dnnl_f32) {
            const float v = ((const float *)src)[i * si];
            ((uint16_t *)dst)[i * di] = to == dnnl_bf16 ? torc_f32_to_bf16(v) : torc_f32_to_f16(v);
        } else {
            const uint16_t h = ((const uint16_t *)src)[i * si];
            ((float *)dst)[i * di] = from == dnnl_bf16 ? torc_bf16_to_f32(h) : torc_f16_to_f32(h);
        }
    }
}

void onednn__convert(const onednn_view *from, const void *src, const onednn_view *to, void *dst, dnnl_data_type_t round) {
    const int nd = from->ndim;
    const size_t sz_from = from->dt == dnnl_f32 ? 4 : 2, sz_to = to->dt == dnnl_f32 ? 4 : 2;
    if (onednn__view_dense(from) && onednn__view_dense(to)) {  // one run, in chunks for the threads (not a line's offsets a row)
        int64_t total = 1;
        for (int d = 0; d < nd; d++) total *= from->dims[d];
        const int64_t chunk = 16384;
        ONEDNN_FOR(total >= ONEDNN_SMALL_STREAM, c, (total + chunk - 1) / chunk, {
            const int64_t o = c * chunk, len = total - o < chunk ? total - o : chunk;
            convert_line(from->dt, (const char *)src + o * (int64_t)sz_from, 1, to->dt,
                         (char *)dst + o * (int64_t)sz_to, 1, len, round);
        });
        return;
    }
    // The inner loop runs along the dim `from` steps through most finely (memory order), so a
    // transposed operand converts line by line of its memory, not with a gather.
    int in = nd - 1;
    for (int d = 0; d < nd; d++)
        if (from->dims[d] > 1 && (from->dims[in] == 1 || from->strides[d] < from->strides[in])) in = d;
    const int64_t n = from->dims[in], si = from->strides[in], di = to->strides[in];
    int64_t lines = 1;
    for (int d = 0; d < nd; d++)
        if (d != in) lines *= from->dims[d];
    ONEDNN_FOR(lines * n >= ONEDNN_SMALL_STREAM, l, lines, {
        int64_t so = 0, dof = 0, rest = l;
        for (int d = nd - 1; d >= 0; d--) {
            if (d == in) continue;
            const int64_t i = rest % from->dims[d];
            rest /= from->dims[d];
            so += i * from->strides[d];
            dof += i * to->strides[d];
        }
        convert_line(from->dt, (const char *)src + so * (int64_t)sz_from, si, to->dt,
                     (char *)dst + dof * (int64_t)sz_to, di, n, round);
    });
}
