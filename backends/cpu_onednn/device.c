// backends/cpu_onednn/device.c — the CPU as a torc device: its name, memory, and the FLOP/s it
// promises per dtype (cores x clock x FLOPs/cycle of the ISA oneDNN uses on it).
// ISA detection is cpuid only (no ISA-specific instruction runs), capped by the ISA oneDNN says
// it uses (ONEDNN_MAX_CPU_ISA lowers it), so loading works on any x86-64.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

// ---- ISA ----
typedef struct isa {
    bool avx512, avx2_fma, avx, avx512_bf16, amx_bf16;
    bool intel;  // GenuineIntel
} isa;

static isa detect_isa(void) {
    isa r = {false, false, false, false, false, false};
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    r.intel = __builtin_cpu_is("intel");
    r.avx = __builtin_cpu_supports("avx");
    r.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    r.avx512 = __builtin_cpu_supports("avx512f");  // also checks the OS saves zmm state
    unsigned a, b, c, d;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) r.avx512_bf16 = r.avx512 && ((a >> 5) & 1);
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        const bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
        // The OS must enable the tile state (XCR0 bits 17, 18); xgetbv exists when OSXSAVE is set.
        unsigned a1, b1, c1, d1;
        bool os_tiles = false;
        if (__get_cpuid(1, &a1, &b1, &c1, &d1) && ((c1 >> 27) & 1)) {
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            os_tiles = ((lo >> 17) & 3) == 3;
        }
        r.amx_bf16 = amx_bf16 && amx_tile && os_tiles;
    }
#endif
    // What oneDNN actually dispatches to (lower if ONEDNN_MAX_CPU_ISA says so).
    const unsigned eff = (unsigned)dnnl_get_effective_cpu_isa();
#define HAS(x) ((eff & (unsigned)(x)) == (unsigned)(x))
    r.amx_bf16 = r.amx_bf16 && HAS(dnnl_cpu_isa_avx512_core_amx);
    r.avx512_bf16 = r.avx512_bf16 && HAS(dnnl_cpu_isa_avx512_core_bf16);
    r.avx512 = r.avx512 && HAS(dnnl_cpu_isa_avx512_core);
    r.avx2_fma = r.avx2_fma && HAS(dnnl_cpu_isa_avx2);
    r.avx = r.avx && HAS(dnnl_cpu_isa_avx);
#undef HAS
    return r;
}

// bf16 dot products (VDPBF16PS, 32 multiply-adds per instruction) pay only where they issue as
// often as FMAs. On Intel cores they issue once every two cycles (measured on an Emerald Rapids
// VM without AMX: 0.62 ns per instruction against 0.16 ns per FMA, 24 independent chains), half
// the f32 FMA rate: oneDNN 2.6's bf16 matmul reached 188 GFLOP/s at 2048^3 where sgemm reached
// 335. There bf16 matmuls convert to f32 instead (bf16 products are exact in f32, and both
// accumulate in f32), and bf16 promises what f32 does.
static bool bf16_dot_pays(const isa *x) { return x->avx512_bf16 && !x->intel; }

bool onednn__bf16_matmul_native(void) {
    const isa x = detect_isa();
    return x.amx_bf16 || bf16_dot_pays(&x);
}

bool onednn__bf16_dot(void) { return detect_isa().avx512_bf16; }

int onednn__device_info(torc_device_info *info) {
    memset(info, 0, sizeof *info);
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
    const isa x = detect_isa();
    const char *f32_isa = x.avx512 ? "AVX-512 FMA" : x.avx2_fma ? "AVX2 FMA" : x.avx ? "AVX" : "SSE";
    const int f32 = x.avx512 ? 64 : x.avx2_fma ? 32 : x.avx ? 16 : 8;
    const int f64 = f32 / 2;
    // bf16: AMX tiles (1024), AVX512-BF16 dot products where they pay (2 units x 16 lanes x 2
    // pairs x 2 = 128), else matmuls convert to f32. f16: computed through f32 on every CPU.
    const int bf16 = x.amx_bf16 ? 1024 : bf16_dot_pays(&x) ? 128 : f32;
    const char *bf16_isa = x.amx_bf16 ? "AMX-BF16" : bf16_dot_pays(&x) ? "AVX512-BF16" : "via f32";
    if (mhz > 0) {
        const double hz = mhz * 1e6 * cores;
        info->peak_flops[TORC_DTYPE_F32] = hz * f32;
        info->peak_flops[TORC_DTYPE_F64] = hz * f64;
        info->peak_flops[TORC_DTYPE_BF16] = hz * bf16;
        info->peak_flops[TORC_DTYPE_F16] = hz * f32;
        snprintf(info->peak_source, sizeof info->peak_source,
                 "%d cores x %.2f GHz (%s) x FLOP/cycle: f32 %d (%s), f64 %d, bf16 %d (%s), "
                 "f16 %d (via f32)", cores, mhz / 1000.0, clock_src, f32, f32_isa, f64, bf16,
                 bf16_isa, f32);
    } else {
        snprintf(info->peak_source, sizeof info->peak_source,
                 "unknown: no clock in cpuinfo_max_freq or /proc/cpuinfo (%d cores, %s)", cores,
                 f32_isa);
    }
    return 0;
}
