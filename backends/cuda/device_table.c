// backends/cuda/device_table.c — the promised-peak table (NVIDIA datasheets, dense, no sparsity)
// and the name matching that picks a row.
#include "device_table.h"

#include <stdio.h>
#include <string.h>

static const tcu_peak PEAKS[] = {
    {"A100", 19.5, 156, 312, 0},
    {"H100 SXM", 67, 495, 989, 1979},
    {"H100 PCIe", 51, 378, 756, 1513},
    {"H200 (as H100 SXM)", 67, 495, 989, 1979},
    {"L40S", 91.6, 183, 362, 733},
    {"RTX 4090", 82.6, 82.6, 165, 330},
    {"B200", 75, 1100, 2250, 4500},
};

const tcu_peak *tcu_peak_lookup(const char *name) {
    if (!name) return NULL;
    // Variants with other clocks or packaging than the rows above: promise nothing rather than
    // a wrong number (H100/H200 NVL, GB200, RTX 4090 D).
    if (strstr(name, "NVL") || strstr(name, "GB200") || strstr(name, "4090 D")) return NULL;
    if (strstr(name, "A100")) return &PEAKS[0];
    if (strstr(name, "H100")) return strstr(name, "PCIe") ? &PEAKS[2] : &PEAKS[1];
    if (strstr(name, "H200")) return &PEAKS[3];
    if (strstr(name, "L40S")) return &PEAKS[4];
    if (strstr(name, "RTX 4090")) return &PEAKS[5];
    if (strstr(name, "B200")) return &PEAKS[6];
    return NULL;
}

double tcu_mem_bandwidth_gbps(const char *name) {
    if (!name || strstr(name, "NVL") || strstr(name, "GB200") || strstr(name, "4090 D")) return 0;
    if (strstr(name, "A100")) return strstr(name, "80GB") ? 2039 : 1555;   // HBM2e / HBM2
    if (strstr(name, "H100")) return strstr(name, "PCIe") ? 2000 : 3350;
    if (strstr(name, "H200")) return 4800;
    if (strstr(name, "L40S")) return 864;
    if (strstr(name, "RTX 4090")) return 1008;
    if (strstr(name, "B200")) return 8000;
    return 0;
}

void tcu_fill_peaks(torc_device_info *info, const char *name, int cc_major, int cc_minor,
                    int sm_count, bool tf32) {
    for (int d = 0; d < TORC_DTYPE_COUNT; d++) info->peak_flops[d] = 0;
    const tcu_peak *p = tcu_peak_lookup(name);
    if (!p) {
        snprintf(info->peak_source, sizeof info->peak_source,
                 "unknown device: no promise (sm_%d%d, %d SMs)", cc_major, cc_minor, sm_count);
        return;
    }
    const double T = 1e12;
    info->peak_flops[TORC_DTYPE_F32] = (tf32 ? p->tf32 : p->f32) * T;
    info->peak_flops[TORC_DTYPE_F16] = p->bf16 * T;
    info->peak_flops[TORC_DTYPE_BF16] = p->bf16 * T;
    info->peak_flops[TORC_DTYPE_F8_E4M3FN] = p->fp8 * T;
    info->peak_flops[TORC_DTYPE_F8_E5M2] = p->fp8 * T;
    snprintf(info->peak_source, sizeof info->peak_source,
             "%s datasheet, dense TFLOP/s: f32 %g, tf32 %g, bf16/f16 %g, fp8 %g; f32 counts %s "
             "(sm_%d%d, %d SMs)",
             p->label, p->f32, p->tf32, p->bf16, p->fp8,
             tf32 ? "tf32 (TORC_ALLOW_TF32=1)" : "plain f32", cc_major, cc_minor, sm_count);
}
