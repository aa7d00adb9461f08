// backends/cpu_onednn/device.c — the CPU as a torc device: its name, memory, and the FLOP/s it
// promises per dtype (cores x clock x FLOPs/cycle of the ISA oneDNN uses on it).
// The ISAs come from isa.c (cpuid only, capped by ONEDNN_MAX_CPU_ISA and TORC_MAX_CPU_ISA).
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onednn-impl.h"

// ---- /proc/cpuinfo ----
// The model name, the MHz of the first CPU, and the physical cores this process may run on
// (distinct (physical id, core id) pairs among the CPUs in its affinity mask).
static void read_cpuinfo(char *name, size_t name_len, double *mhz, int *cores) {
    cpu_set_t mask;
    const bool have_mask = sched_getaffinity(0, sizeof mask, &mask) == 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    *mhz = 0;
    *cores = 0;
    if (!f) return;
    enum { MAX_CORES = 4096 };
    long seen[MAX_CORES];
    int n_seen = 0, cpu = -1;
    long phys = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        const char *val = colon + 1;
        while (*val == ' ' || *val == '\t') val++;
        if (strncmp(line, "processor", 9) == 0) {
            cpu = atoi(val);
            phys = 0;
        } else if (strncmp(line, "model name", 10) == 0 && name[0] == '\0') {
            snprintf(name, name_len, "%s", val);
            name[strcspn(name, "\n")] = '\0';
        } else if (strncmp(line, "cpu MHz", 7) == 0 && *mhz == 0) {
            *mhz = atof(val);
        } else if (strncmp(line, "physical id", 11) == 0) {
            phys = atol(val);
        } else if (strncmp(line, "core id", 7) == 0) {
            if (have_mask && cpu >= 0 && cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &mask)) continue;
            const long key = phys * 100000 + atol(val);
            bool dup = false;
            for (int i = 0; i < n_seen && !dup; i++) dup = seen[i] == key;
            if (!dup && n_seen < MAX_CORES) seen[n_seen++] = key;
        }
    }
    fclose(f);
    *cores = n_seen;
}

static double max_freq_mhz(void) {
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    if (!f) return 0;
    double khz = 0;
    if (fscanf(f, "%lf", &khz) != 1) khz = 0;
    fclose(f);
    return khz / 1000.0;
}

// bf16 dot products (VDPBF16PS, 32 multiply-adds per instruction) pay only where they issue as
// often as FMAs. On Intel cores they issue once every two cycles (measured on an Emerald Rapids
// VM without AMX: 0.62 ns per instruction against 0.16 ns per FMA, 24 independent chains), half
// the f32 FMA rate: oneDNN 2.6's bf16 matmul reached 188 GFLOP/s at 2048^3 where sgemm reached
// 335. There bf16 matmuls convert to f32 instead (bf16 products are exact in f32, and both
// accumulate in f32), and bf16 promises what f32 does.
bool onednn__bf16_dot(void) { return onednn__dnnl_isa() >= ONEDNN_ISA_AVX512_CORE_BF16; }
static bool bf16_dot_pays(void) { return onednn__bf16_dot() && !onednn__cpu_is_intel(); }
static bool amx(void) { return onednn__isa() >= ONEDNN_ISA_AVX512_CORE_AMX; }

bool onednn__bf16_matmul_native(void) { return amx() || bf16_dot_pays(); }

int onednn__device_info(torc_device_info *info) {
    // Every member is 2.0's: info->struct_size covers them all (the core zeroed the rest).
    double mhz;
    int cores;
    read_cpuinfo(info->name, sizeof info->name, &mhz, &cores);
    if (info->name[0] == '\0') snprintf(info->name, sizeof info->name, "CPU");
    const char *clock_src = "cpu MHz";
    const double max_mhz = max_freq_mhz();
    if (max_mhz > 0) {
        mhz = max_mhz;
        clock_src = "cpuinfo_max_freq";
    }
    if (cores <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cores = n > 0 ? (int)n : 1;
    }
    info->host_memory = true;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    info->total_memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;

    // FLOPs per cycle per core: 2 FMA units x lanes x 2 (multiply + add).
    // f32 runs on oneDNN's sgemm (OpenBLAS's for the AVX2 family, blas.c), which uses oneDNN's ISA;
    // bf16 on torc's AMX GEMM (torc's ISA) or on oneDNN's dot products.
    const onednn_isa x = onednn__dnnl_isa();
    const bool avx512 = x >= ONEDNN_ISA_AVX512_CORE, avx2 = x >= ONEDNN_ISA_AVX2, avx = x >= ONEDNN_ISA_AVX;
    // Zen 4 (AMD family 19h; Zen 3 there has no AVX-512) runs a 512-bit FMA or dot product as two
    // halves on its two 256-bit units: an AVX-512 FMA loop and an AVX2 one both measured 117
    // GFLOP/s on one EPYC Zen 4 core (32 FLOP/cycle at 3.65 GHz), VDPBF16PS 2.0x that.
    const bool half512 = avx512 && onednn__cpu_half512();
    const char *f32_isa = half512 ? "AVX-512 on 256-bit units" : avx512 ? "AVX-512 FMA" : avx2 ? "AVX2 FMA" : avx ? "AVX" : "SSE";
    const int f32 = avx512 && !half512 ? 64 : avx2 ? 32 : avx ? 16 : 8;
    const int f64 = f32 / 2;
    // bf16: AMX tiles (1024), AVX512-BF16 dot products where they pay (2 units x 16 lanes x 2
    // pairs x 2 = 128, half that on Zen 4), else matmuls convert to f32. f16: through f32 on every CPU.
    const int bf16 = amx() ? 1024 : bf16_dot_pays() ? 2 * f32 : f32;
    const char *bf16_isa = amx() ? "AMX-BF16" : bf16_dot_pays() ? "AVX512-BF16" : "via f32";
    if (mhz > 0) {
        const double hz = mhz * 1e6 * cores;
        info->peak_flops[TORC_DTYPE_F32] = hz * f32;
        info->peak_flops[TORC_DTYPE_F64] = hz * f64;
        info->peak_flops[TORC_DTYPE_BF16] = hz * bf16;
        info->peak_flops[TORC_DTYPE_F16] = hz * f32;
        snprintf(info->peak_source, sizeof info->peak_source,
                 "%d cores x %.2f GHz (%s) x FLOP/cycle: f32 %d (%s), f64 %d, bf16 %d (%s), "
                 "f16 %d (via f32); f32 GEMM: %s%s", cores, mhz / 1000.0, clock_src, f32, f32_isa, f64, bf16,
                 bf16_isa, f32, onednn__blas_active() ? "OpenBLAS" : "oneDNN sgemm",
                 onednn__dnnl_isa() == ONEDNN_ISA_AVX2 && onednn__fma_usable() && !onednn__cpu_is_intel()
                     ? ", torc's FMA GEMM from 1M MACs"
                     : "");
    } else {
        snprintf(info->peak_source, sizeof info->peak_source,
                 "unknown: no clock in cpuinfo_max_freq or /proc/cpuinfo (%d cores, %s)", cores,
                 f32_isa);
    }
    return 0;
}
