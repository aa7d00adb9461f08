// backends/cuda/device_table.h — promised dense peak FLOP/s per dtype for known NVIDIA devices,
// looked up by device name; unknown devices promise nothing.
#ifndef TCU_DEVICE_TABLE_H
#define TCU_DEVICE_TABLE_H

#include <stdbool.h>

#include <torc/backend.h>

typedef struct tcu_peak {
    const char *label;        // "H100 SXM"
    double f32, tf32, bf16, fp8;   // dense TFLOP/s (bf16 also stands for f16); 0: none
} tcu_peak;

// The table row for a device name ("NVIDIA H100 80GB HBM3"), or NULL when unknown.
const tcu_peak *tcu_peak_lookup(const char *name);

// The device's memory bandwidth from its datasheet in GB/s (10^9 bytes), or 0 when unknown
// (torc-bench and the GPU suite print measured bandwidth against it).
double tcu_mem_bandwidth_gbps(const char *name);

// Fills info->peak_flops and info->peak_source for a device. tf32: f32 matmuls may use TF32
// (TORC_ALLOW_TF32=1), so f32's promise is the TF32 tensor-core peak. cc_major/cc_minor and
// sm_count are reported in peak_source (torc_device_info has no fields for them).
void tcu_fill_peaks(torc_device_info *info, const char *name, int cc_major, int cc_minor,
                    int sm_count, bool tf32);

#endif
