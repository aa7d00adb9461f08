// core/accounting.c — memory in use and peak per device and tag, and FLOP counters per
// phase x opcode x dtype (forward / backward), as DESIGN.md's accounting section describes.
#include <stdlib.h>
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

// ---- recording what an optimizer step adopts as state (see torc-impl.h) ----
typedef struct torc__mem_event {
    const torc_storage *s;  // NULL once freed
    torc_device *dev;
    uint64_t bytes;
    uint64_t act_after;     // activation bytes in use on dev right after this allocation
    uint64_t act_peak0;     // dev's activation peak before it (used for dev's first event)
} mem_event;

static _Thread_local torc__mem_record *tls_record;
static _Thread_local torc__mem_record *tls_backward;  // torc__mem_backward_begin's: frees not tracked

void torc__mem_record_begin(torc__mem_record *log) {
    log->n = 0;
    log->lost = false;
    tls_record = log;
}

static void note_alloc(torc__mem_record *log, const torc_storage *s) {
    if (!log || log->lost || s->tag != TORC_MEM_ACTIVATION) return;
    if (log->n == log->cap) {
        const int nc = log->cap ? 2 * log->cap : 32;
        mem_event *ne = realloc(log->e, sizeof *ne * (size_t)nc);
        if (!ne) {
            log->lost = true;
            return;
        }
        log->e = ne;
        log->cap = nc;
    }
    torc_device *dev = s->alloc_device;
    log->e[log->n++] = (mem_event){s, dev, s->nbytes, atomic_load(&dev->in_use[TORC_MEM_ACTIVATION]) + s->nbytes,
                                   atomic_load(&dev->peak[TORC_MEM_ACTIVATION])};
}

void torc__mem_note_alloc(const torc_storage *s) {
    note_alloc(tls_record, s);
    note_alloc(tls_backward, s);
}

void torc__mem_note_free(const torc_storage *s) {
    torc__mem_record *log = tls_record;
    if (!log) return;
    for (int i = log->n - 1; i >= 0; i--)
        if (log->e[i].s == s) {
            log->e[i].s = NULL;
            return;
        }
}

static bool adopted_storage(const torc_storage *s, int n, torc_tensor *const *adopted) {
    for (int k = 0; k < n; k++)
        if (adopted[k] && adopted[k]->storage == s) return true;
    return false;
}

static void settle_peaks(torc__mem_record *log, int n_adopted, torc_tensor *const *adopted);

void torc__mem_record_end(torc__mem_record *log, int n_adopted, torc_tensor *const *adopted, torc_mem_tag tag) {
    tls_record = NULL;
    settle_peaks(log, n_adopted, adopted);
    for (int k = 0; k < n_adopted; k++)
        if (adopted[k]) torc_set_mem_tag(adopted[k], tag);
    log->n = 0;
}

static void settle_peaks(torc__mem_record *log, int n_adopted, torc_tensor *const *adopted) {
    // Per device, in the order of its allocations: the activation bytes then in use, less the
    // adopted bytes made so far. Every event of a device is handled at its first one.
    for (int i = 0; i < log->n && !log->lost; i++) {
        torc_device *dev = log->e[i].dev;
        if (!dev) continue;
        uint64_t born = 0, peak = log->e[i].act_peak0;
        for (int j = i; j < log->n; j++) {
            mem_event *e = &log->e[j];
            if (e->dev != dev) continue;
            if (e->s && adopted_storage(e->s, n_adopted, adopted)) born += e->bytes;
            if (e->act_after - born > peak) peak = e->act_after - born;
            e->dev = NULL;  // done
        }
        atomic_store(&dev->peak[TORC_MEM_ACTIVATION], peak);
    }
}

// ---- backward: leaves' gradients are gradients from their creation (see torc-impl.h) ----
bool torc__mem_backward_begin(torc__mem_record *log) {
    if (tls_backward) return false;  // a backward inside a backward: the outer one records
    log->n = 0;
    log->lost = false;
    tls_backward = log;
    return true;
}

void torc__mem_backward_retagged(const torc_storage *s) {
    torc__mem_record *log = tls_backward;
    if (!log || log->lost) return;
    int i = log->n - 1;  // the newest event of this address is the live storage's
    while (i >= 0 && log->e[i].s != s) i--;
    if (i < 0) return;
    for (int j = i; j < log->n; j++)
        if (log->e[j].dev == log->e[i].dev) log->e[j].act_after -= log->e[i].bytes;
}

void torc__mem_backward_end(torc__mem_record *log) {
    tls_backward = NULL;
    settle_peaks(log, 0, NULL);
    log->n = 0;
}

void torc__mem_record_free(torc__mem_record *log) {
    free(log->e);
    memset(log, 0, sizeof *log);
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
