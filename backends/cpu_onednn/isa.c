// backends/cpu_onednn/isa.c — which instruction sets torc's own loops may use, and which oneDNN's
// kernels use: cpuid and xgetbv only (no ISA-specific instruction runs here), so the backend loads
// on any x86-64. TORC_MAX_CPU_ISA caps torc's loops as ONEDNN_MAX_CPU_ISA caps oneDNN's, with the
// same names, so every path a smaller CPU takes can be forced on a bigger one; unset, torc follows
// the ISA oneDNN settled on (ONEDNN_MAX_CPU_ISA alone caps both).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "onednn-impl.h"

static const char *const k_names[] = {"none", "SSE41", "AVX", "AVX2", "AVX512_CORE", "AVX512_CORE_BF16",
                                      "AVX512_CORE_AMX"};
_Static_assert(sizeof k_names / sizeof k_names[0] == ONEDNN_ISA_COUNT, "a name per level");

const char *onednn__isa_name(onednn_isa i) {
    return (unsigned)i < ONEDNN_ISA_COUNT ? k_names[i] : "?";
}

// The highest level whose every feature this CPU and OS have.
static onednn_isa cpu_level(void) {
    onednn_isa l = ONEDNN_ISA_NONE;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return l;
    const bool sse41 = (c >> 19) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
    if (!sse41) return l;
    l = ONEDNN_ISA_SSE41;
    if (!osxsave) return l;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    (void)xhi;
    if (!avx || (xlo & 0x6) != 0x6) return l;  // the OS saves xmm and ymm state
    l = ONEDNN_ISA_AVX;
    if (__get_cpuid_max(0, NULL) < 7) return l;
    __cpuid_count(7, 0, a, b, c, d);
    const bool avx2 = (b >> 5) & 1, avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1,
               avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
    const bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
    if (!(avx2 && fma)) return l;
    l = ONEDNN_ISA_AVX2;
    if (!(avx512f && avx512dq && avx512bw && avx512vl) || (xlo & 0xe6) != 0xe6) return l;  // + opmask, zmm
    l = ONEDNN_ISA_AVX512_CORE;
    __cpuid_count(7, 1, a, b, c, d);
    if (!((a >> 5) & 1)) return l;  // AVX512_BF16
    l = ONEDNN_ISA_AVX512_CORE_BF16;
    if (!(amx_bf16 && amx_tile) || (xlo & 0x60000) != 0x60000) return l;  // + tile config and data
    l = ONEDNN_ISA_AVX512_CORE_AMX;
#endif
    return l;
}

static onednn_isa from_dnnl(unsigned eff) {
#define HAS(x) ((eff & (unsigned)(x)) == (unsigned)(x))
    return HAS(dnnl_cpu_isa_avx512_core_amx) ? ONEDNN_ISA_AVX512_CORE_AMX
         : HAS(dnnl_cpu_isa_avx512_core_bf16) ? ONEDNN_ISA_AVX512_CORE_BF16
         : HAS(dnnl_cpu_isa_avx512_core) ? ONEDNN_ISA_AVX512_CORE
         : HAS(dnnl_cpu_isa_avx2) ? ONEDNN_ISA_AVX2
         : HAS(dnnl_cpu_isa_avx) ? ONEDNN_ISA_AVX
         : HAS(dnnl_cpu_isa_sse41) ? ONEDNN_ISA_SSE41
         : ONEDNN_ISA_NONE;
#undef HAS
}

static struct {
    bool ready;
    onednn_isa cpu, torc, dnnl;
    bool intel, f16c;
    int family;  // cpuid's display family (base + extended): 0x19 Zen 3 and Zen 4, 0x1A Zen 5
} g_isa;

int onednn__isa_init(const char *max_cpu_isa) {
    const onednn_isa cpu = cpu_level();
    const onednn_isa dnnl = from_dnnl((unsigned)dnnl_get_effective_cpu_isa());
    onednn_isa cap = dnnl;
    const char *s = max_cpu_isa ? max_cpu_isa : getenv("TORC_MAX_CPU_ISA");
    const char *what = max_cpu_isa ? "max_cpu_isa" : "TORC_MAX_CPU_ISA";
    if (s && *s) {
        int found = -1;
        for (int i = 1; i < ONEDNN_ISA_COUNT; i++)
            if (strcasecmp(s, k_names[i]) == 0) found = i;
        if (strcasecmp(s, "ALL") == 0) found = ONEDNN_ISA_COUNT - 1;
        if (strcasecmp(s, "AVX512_CORE_VNNI") == 0) found = ONEDNN_ISA_AVX512_CORE;  // nothing of torc's uses VNNI
        if (found < 0)
            return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s='%s' is not one of SSE41, AVX, AVX2, "
                                 "AVX512_CORE, AVX512_CORE_VNNI, AVX512_CORE_BF16, AVX512_CORE_AMX, ALL", what, s);
        cap = (onednn_isa)found;
    }
    g_isa.cpu = cpu;
    g_isa.torc = cpu < cap ? cpu : cap;
    g_isa.dnnl = dnnl;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    g_isa.intel = __builtin_cpu_is("intel");
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        const int base = (int)((a >> 8) & 0xf);
        g_isa.family = base == 0xf ? base + (int)((a >> 20) & 0xff) : base;
        g_isa.f16c = (c >> 29) & 1;
    }
#endif
    g_isa.ready = true;
    return 0;
}

onednn_isa onednn__isa(void) { return g_isa.ready ? g_isa.torc : ONEDNN_ISA_NONE; }
onednn_isa onednn__cpu_isa(void) { return g_isa.ready ? g_isa.cpu : ONEDNN_ISA_NONE; }
onednn_isa onednn__dnnl_isa(void) { return g_isa.ready ? g_isa.dnnl : ONEDNN_ISA_NONE; }
bool onednn__cpu_is_intel(void) { return g_isa.intel; }
int onednn__cpu_family(void) { return g_isa.family; }
bool onednn__cpu_half512(void) { return g_isa.cpu >= ONEDNN_ISA_AVX512_CORE && !g_isa.intel && g_isa.family == 0x19; }
bool onednn__cpu_has_f16c(void) { return g_isa.f16c; }
