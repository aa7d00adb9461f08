// core/accounting.c — memory in use and peak per device and tag, and FLOP counters per
// phase x opcode x dtype (forward / backward), as DESIGN.md's accounting section describes.
#include <string.h>

#include "torc-impl.h"

const char *torc_mem_tag_name(torc_mem_tag tag) {
    static const char *const names[] = {"activation", "parameter", "gradient", "optimizer_state"};
    _Static_assert(sizeof names / sizeof names[0] == TORC_MEM_TAG_COUNT, "a tag without a name");
    return (unsigned)tag < TORC_MEM_TAG_COUNT ? names[tag] : "unknown";
}

static void raise_peak(_Atomic uint64_t *peak, uint64_t now) {
    uint64_t p = atomic_load(peak);
    while (now > p && !atomic_compare_exchange_weak(peak, &p, now)) {}
}

void torc__mem_add(torc_device *dev, torc_mem_tag tag, uint64_t bytes) {
    raise_peak(&dev->peak[tag], atomic_fetch_add(&dev->in_use[tag], bytes) + bytes);
    raise_peak(&dev->total_peak, atomic_fetch_add(&dev->total_in_use, bytes) + bytes);
}

void torc__mem_sub(torc_device *dev, torc_mem_tag tag, uint64_t bytes) {
    atomic_fetch_sub(&dev->in_use[tag], bytes);
    atomic_fetch_sub(&dev->total_in_use, bytes);
}

torc_status torc_memory_stats_get(const torc_device *dev, torc_memory_stats *out) {
    if (!dev || !out) return torc__null_arg("torc_memory_stats_get: NULL argument");
    torc_device *d = (torc_device *)dev;
    for (int i = 0; i < TORC_MEM_TAG_COUNT; i++) {
        out->in_use[i] = atomic_load(&d->in_use[i]);
        out->peak[i] = atomic_load(&d->peak[i]);
    }
    out->total_in_use = atomic_load(&d->total_in_use);
    out->total_peak = atomic_load(&d->total_peak);
    return TORC_OK;
}

void torc_memory_reset_peak(const torc_device *dev) {
    if (!dev) return;
    torc_device *d = (torc_device *)dev;
    for (int i = 0; i < TORC_MEM_TAG_COUNT; i++) atomic_store(&d->peak[i], atomic_load(&d->in_use[i]));
    atomic_store(&d->total_peak, atomic_load(&d->total_in_use));
}

// Process-wide counters (ops may run on any thread); relaxed atomics are enough for sums.
static _Atomic uint64_t g_flops[2][TORC_OP_COUNT][TORC_DTYPE_COUNT];
static TORC__TLS_HOT _Thread_local torc_phase tls_phase;

torc_phase torc__phase(void) { return tls_phase; }
void torc__set_phase(torc_phase p) { tls_phase = p; }

void torc__flops_add(int opcode, torc_dtype dtype, uint64_t flops) {
    if (flops && (unsigned)opcode < TORC_OP_COUNT && (unsigned)dtype < TORC_DTYPE_COUNT)
        atomic_fetch_add_explicit(&g_flops[tls_phase][opcode][dtype], flops, memory_order_relaxed);
}

uint64_t torc_flops(torc_phase phase, int opcode, int dtype) {
    if ((unsigned)phase > 1) return 0;
    uint64_t sum = 0;
    for (int o = 0; o < TORC_OP_COUNT; o++) {
        if (opcode >= 0 && o != opcode) continue;
        for (int d = 0; d < TORC_DTYPE_COUNT; d++)
            if (dtype < 0 || d == dtype) sum += atomic_load_explicit(&g_flops[phase][o][d], memory_order_relaxed);
    }
    return sum;
}

void torc_flops_reset(void) {
    for (int p = 0; p < 2; p++)
        for (int o = 0; o < TORC_OP_COUNT; o++)
            for (int d = 0; d < TORC_DTYPE_COUNT; d++) atomic_store(&g_flops[p][o][d], 0);
}
