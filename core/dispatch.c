// core/dispatch.c — the one place the core calls a backend's vtable: op dispatch with the
// minor-version gate and the host-memory fallback to the reference backend, FLOP counting, and
// memory wrappers.
#define _POSIX_C_SOURCE 200809L  // clock_gettime
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "torc-impl.h"

static const char *backend_msg(const torc_device *dev) {
    const char *m = dev->vt->last_error(dev->ctx);
    return m && *m ? m : "(no message)";
}

// An optional member the plugin's vtable holds (its struct_size covers it) and sets. Members of
// later minors are called only through this test.
#define HAS_MEMBER(vt, m) (TORC_STRUCT_HAS(vt, torc_backend_vtable, m) && (vt)->m)

// The backend a member runs on this thread (torc-impl.h): the exit handler must not wait for it.
TORC__TLS_HOT _Thread_local torc_backend_lib *torc__tls_calling;

// ---- op tracing (torc_op_trace_start): per (opcode, first input's dtype, output's dtype, declined) ----
// Off, a dispatch pays one relaxed load of g_trace_on. Counters are relaxed atomics: ops dispatched
// from several threads are all counted; a start or stop racing with a dispatch may miss it.
#define TRACE_NO_INPUT TORC_DTYPE_COUNT  // the in-dtype slot of an op without inputs (fills)
static atomic_bool g_trace_on;
static _Atomic uint64_t g_trace[TORC_OP_COUNT][TORC_DTYPE_COUNT + 1][TORC_DTYPE_COUNT][2];
static _Atomic uint64_t g_trace_ns[TORC_OP_COUNT];  // wall time inside run(), per opcode

static inline void trace_op(const torc_op *op, bool declined) {
    if (!atomic_load_explicit(&g_trace_on, memory_order_relaxed)) return;
    const unsigned code = (unsigned)op->code;
    const unsigned in = op->n_in > 0 ? (unsigned)op->in[0].dtype : TRACE_NO_INPUT;
    const unsigned out = op->n_out > 0 ? (unsigned)op->out[0].dtype : TORC_DTYPE_COUNT;
    if (code >= TORC_OP_COUNT || in > TRACE_NO_INPUT || out >= TORC_DTYPE_COUNT) return;
    atomic_fetch_add_explicit(&g_trace[code][in][out][declined], 1, memory_order_relaxed);
}

void torc_op_trace_start(void) {
    for (int o = 0; o < TORC_OP_COUNT; o++) atomic_store_explicit(&g_trace_ns[o], 0, memory_order_relaxed);
    for (int o = 0; o < TORC_OP_COUNT; o++)
        for (int i = 0; i <= TRACE_NO_INPUT; i++)
            for (int d = 0; d < TORC_DTYPE_COUNT; d++)
                for (int k = 0; k < 2; k++) atomic_store_explicit(&g_trace[o][i][d][k], 0, memory_order_relaxed);
    atomic_store(&g_trace_on, true);
}

void torc_op_trace_stop(void) { atomic_store(&g_trace_on, false); }

uint64_t torc_op_trace_count(int opcode, int in_dtype, int out_dtype, int declined) {
    uint64_t sum = 0;
    for (int o = 0; o < TORC_OP_COUNT; o++) {
        if (opcode >= 0 && o != opcode) continue;
        for (int i = 0; i <= TRACE_NO_INPUT; i++) {
            if (in_dtype >= 0 && i != in_dtype) continue;
            if (in_dtype == -2 && i != TRACE_NO_INPUT) continue;
            if (in_dtype < -2) continue;
            for (int d = 0; d < TORC_DTYPE_COUNT; d++) {
                if (out_dtype >= 0 && d != out_dtype) continue;
                for (int k = 0; k < 2; k++)
                    if (declined < 0 || (declined != 0) == (k != 0))
                        sum += atomic_load_explicit(&g_trace[o][i][d][k], memory_order_relaxed);
            }
        }
    }
    return sum;
}

double torc_op_trace_seconds(int opcode) {
    uint64_t ns = 0;
    for (int o = 0; o < TORC_OP_COUNT; o++)
        if (opcode < 0 || o == opcode) ns += atomic_load_explicit(&g_trace_ns[o], memory_order_relaxed);
    return (double)ns * 1e-9;
}

static uint64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int vt_run(const torc_device *dev, const torc_op *op) {
    torc_backend_lib *outer = torc__tls_calling;
    torc__tls_calling = dev->lib;
    const bool timed = atomic_load_explicit(&g_trace_on, memory_order_relaxed) && (unsigned)op->code < TORC_OP_COUNT;
    const uint64_t t0 = timed ? monotonic_ns() : 0;
    const int rc = dev->vt->run(dev->ctx, dev->index, op);
    if (timed) atomic_fetch_add_explicit(&g_trace_ns[op->code], monotonic_ns() - t0, memory_order_relaxed);
    torc__tls_calling = outer;
    return rc;
}

static inline bool vt_supports(const torc_device *dev, const torc_op *op) {
    torc_backend_lib *outer = torc__tls_calling;
    torc__tls_calling = dev->lib;
    const bool ok = dev->vt->supports(dev->ctx, dev->index, op);
    torc__tls_calling = outer;
    return ok;
}

static unsigned plugin_minor(const torc_device *dev) { return dev->vt->abi_version & 0xFFFF; }

// The list ops (backend.h's v2.6): their operands are their element ops', behind params.ext.
static bool is_list_op(const torc_op *op) { return op->code == TORC_OP_ADAM_STEP_LIST || op->code == TORC_OP_NORM_LIST; }

// What in op the device's plugin predates (an opcode or an operand dtype appeared in a newer
// minor than the plugin was built with), written to why; false when it knows all of it.
static bool predates(const torc_device *dev, const torc_op *op, char *why, size_t n) {
    const unsigned minor = plugin_minor(dev);
    if ((unsigned)op->code >= TORC_OP_COUNT) {
        snprintf(why, n, "unknown opcode %d", (int)op->code);
        return true;
    }
    if (torc_backend_op_minor[op->code] > minor) {
        snprintf(why, n, "the plugin (backend ABI %u.%u) predates op '%s', added in ABI %u.%u", TORC_BACKEND_ABI_MAJOR,
                 minor, torc_op_name(op->code), TORC_BACKEND_ABI_MAJOR, (unsigned)torc_backend_op_minor[op->code]);
        return true;
    }
    for (int i = 0; i < op->n_in + op->n_out; i++) {
        const torc_dtype d = i < op->n_in ? op->in[i].dtype : op->out[i - op->n_in].dtype;
        if ((unsigned)d >= TORC_DTYPE_COUNT) {
            snprintf(why, n, "unknown dtype %d", (int)d);
            return true;
        }
        if (torc_backend_dtype_minor[d] > minor) {
            snprintf(why, n, "the plugin (backend ABI %u.%u) predates dtype %s, added in ABI %u.%u",
                     TORC_BACKEND_ABI_MAJOR, minor, torc_dtype_name(d), TORC_BACKEND_ABI_MAJOR,
                     (unsigned)torc_backend_dtype_minor[d]);
            return true;
        }
    }
    // A list op's elements: their opcode and dtypes too (never lists themselves).
    if (is_list_op(op)) {
        const torc_op_list *l = op->params.ext.data;
        for (int k = 0; l && k < l->n; k++)
            if (!is_list_op(&l->ops[k]) && predates(dev, &l->ops[k], why, n)) return true;
    }
    return false;
}

// The status of a failed run(): the backend's status and message stand as they are (e.g.
// TORC_ERR_INDEX, "index 5 is out of bounds for dimension 0 with size 3"); unknown codes become
// TORC_ERR_BACKEND.
static torc_status run_failed(const torc_device *runner, int rc) {
    return torc__error(rc > 0 && rc < TORC_STATUS_COUNT ? (torc_status)rc : TORC_ERR_BACKEND, "%s", backend_msg(runner));
}

bool torc__runs_natively(torc_device *dev, torc_op *op) {
    op->struct_size = sizeof *op;
    char why[160];
    return !predates(dev, op, why, sizeof why) && vt_supports(dev, op);
}

torc_status torc__native_check(torc_device *dev, torc_op *op) {
    op->struct_size = sizeof *op;
    char why[160];
    if (predates(dev, op, why, sizeof why))
        return torc__error(TORC_ERR_NOT_SUPPORTED, "backend '%s' does not take op '%s': %s", torc_device_backend_name(dev),
                           torc_op_name(op->code), why);
    if (!vt_supports(dev, op))
        return torc__error(TORC_ERR_NOT_SUPPORTED, "backend '%s' does not take op '%s' for dtype %s: %s",
                           torc_device_backend_name(dev), torc_op_name(op->code), torc_dtype_name(op->out[0].dtype),
                           backend_msg(dev));
    return TORC_OK;
}

torc_status torc__dispatch_native(torc_device *dev, torc_op *op) {
    torc_status st = torc__native_check(dev, op);
    trace_op(op, st != TORC_OK);
    if (st) return st;
    const int rc = vt_run(dev, op);
    return rc ? run_failed(dev, rc) : TORC_OK;
}

// The end of a dispatch: run()'s status rc from runner, and op's flops counted where it ran. FLOPs
// are counted in the dtype the op computes from: its first input's (out's for fills);
// MATMUL_ROUNDED's as the MATMUL in c it stands for.
static torc_status counted(const torc_device *runner, const torc_op *op, int rc, uint64_t flops) {
    if (rc != 0) return run_failed(runner, rc);
    if (op->code == TORC_OP_MATMUL_ROUNDED) torc__flops_add(TORC_OP_MATMUL, (torc_dtype)op->params.matmul.dtype, flops);
    else torc__flops_add(op->code, op->n_in > 0 ? op->in[0].dtype : op->out[0].dtype, flops);
    return TORC_OK;
}

// ---- the host round trip of a device backend's declined op (TORC_DEVICE_FALLBACK=1) ----
// Each operand's span (the bytes its strided view reaches) is copied to a host buffer, spans
// that overlap (an in-place op, an output that is a view of an input) sharing one; the reference
// backend runs the op with the same strides on the host copies; the spans holding an output are
// copied back whole, so the elements of an output view the op leaves alone keep their values.

static _Atomic uint64_t g_fallbacks[TORC_OP_COUNT];

uint64_t torc_fallback_count(int opcode) {
    uint64_t sum = 0;
    for (int o = 0; o < TORC_OP_COUNT; o++)
        if (opcode < 0 || o == opcode) sum += atomic_load_explicit(&g_fallbacks[o], memory_order_relaxed);
    return sum;
}

void torc_fallback_reset(void) {
    for (int o = 0; o < TORC_OP_COUNT; o++) atomic_store(&g_fallbacks[o], 0);
}

// TORC_DEVICE_FALLBACK, read once (at the first op a device backend declines): on when set to
// anything but "" or "0".
static bool device_fallback_on(void) {
    static _Atomic int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("TORC_DEVICE_FALLBACK");
        v = e && *e && strcmp(e, "0") != 0;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v != 0;
}

typedef struct span {
    uintptr_t lo, hi;  // device bytes [lo, hi)
    char *host;        // its host copy
    bool written;      // holds an output
} span;

// The bytes operand o reaches, [*lo, *hi); false when it has no elements.
static bool operand_span(const torc_operand *o, uintptr_t *lo, uintptr_t *hi) {
    int64_t neg = 0, pos = 0;
    for (int d = 0; d < o->ndim; d++) {
        if (o->shape[d] == 0) return false;
        const int64_t ext = (o->shape[d] - 1) * o->stride[d];
        if (ext < 0) neg += ext;
        else pos += ext;
    }
    const int64_t es = (int64_t)torc_dtype_size(o->dtype);
    *lo = (uintptr_t)o->data + (uintptr_t)(neg * es);
    *hi = (uintptr_t)o->data + (uintptr_t)((pos + 1) * es);
    return true;
}

static torc_status host_round_trip(torc_device *dev, torc_op *op, uint64_t flops) {
    torc_device *ref = torc__reference_device();
    if (!ref) return torc_last_status();
    char why[160];
    if (predates(ref, op, why, sizeof why)) return torc__error(TORC_ERR_NOT_SUPPORTED, "%s", why);
    // A list op's operands are its elements' (params.ext): torc__dispatch_list sends them one by
    // one instead, each taking this round trip where declined.
    if (is_list_op(op))
        return torc__error(TORC_ERR_NOT_SUPPORTED, "backend '%s' declined op '%s' (a list: its elements go one by one)",
                           torc_device_backend_name(dev), torc_op_name(op->code));
    enum { MAX_OPS = TORC_OP_MAX_INPUTS + TORC_OP_MAX_OUTPUTS };
    span spans[MAX_OPS];
    int n = 0;
    torc_operand *ops[MAX_OPS];
    const int nops = op->n_in + op->n_out;
    for (int i = 0; i < nops; i++) ops[i] = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
    // The spans, overlapping ones merged (merging can make a span overlap an earlier one: repeat).
    for (int i = 0; i < nops; i++) {
        uintptr_t lo, hi;
        if (!ops[i]->data || !operand_span(ops[i], &lo, &hi)) continue;
        span s = {lo, hi, NULL, i >= op->n_in};
        for (bool merged = true; merged;) {
            merged = false;
            for (int k = 0; k < n; k++)
                if (spans[k].lo < s.hi && s.lo < spans[k].hi) {
                    s.lo = spans[k].lo < s.lo ? spans[k].lo : s.lo;
                    s.hi = spans[k].hi > s.hi ? spans[k].hi : s.hi;
                    s.written = s.written || spans[k].written;
                    spans[k] = spans[--n];
                    merged = true;
                    break;
                }
        }
        spans[n++] = s;
    }
    torc_op host_op = *op;
    torc_status st = TORC_OK;
    for (int k = 0; k < n && !st; k++) {
        const size_t bytes = spans[k].hi - spans[k].lo;
        const size_t alloc = (bytes + TORC_HOST_ALIGNMENT - 1) / TORC_HOST_ALIGNMENT * TORC_HOST_ALIGNMENT;
        if (!(spans[k].host = aligned_alloc(TORC_HOST_ALIGNMENT, alloc)))
            st = torc__error(TORC_ERR_OOM, "%s: out of memory allocating %zu host bytes for the fallback of op '%s'",
                             dev->name, bytes, torc_op_name(op->code));
        else
            st = torc__dev_copy(dev, spans[k].host, (const void *)spans[k].lo, bytes, TORC_COPY_DEVICE_TO_HOST);
    }
    if (!st) {
        for (int i = 0; i < nops; i++) {
            uintptr_t lo, hi;
            if (!ops[i]->data || !operand_span(ops[i], &lo, &hi)) continue;
            torc_operand *h = i < op->n_in ? &host_op.in[i] : &host_op.out[i - op->n_in];
            for (int k = 0; k < n; k++)
                if (spans[k].lo <= lo && hi <= spans[k].hi)
                    h->data = spans[k].host + ((uintptr_t)ops[i]->data - spans[k].lo);
        }
        // As the host-memory fallback: run() first, supports() only to word a refusal.
        const int rc = vt_run(ref, &host_op);
        if (rc != 0)
            st = !vt_supports(ref, &host_op) ? torc__error(TORC_ERR_NOT_SUPPORTED, "%s", backend_msg(ref))
                                              : run_failed(ref, rc);
        for (int k = 0; k < n && !st; k++)
            if (spans[k].written)
                st = torc__dev_copy(dev, (void *)spans[k].lo, spans[k].host, spans[k].hi - spans[k].lo,
                                    TORC_COPY_HOST_TO_DEVICE);
        if (!st) {
            atomic_fetch_add_explicit(&g_fallbacks[op->code], 1, memory_order_relaxed);
            st = counted(ref, op, 0, flops);
        }
    }
    for (int k = 0; k < n; k++) free(spans[k].host);
    return st;
}

torc_status torc__dispatch(torc_device *dev, torc_op *op, uint64_t flops) {
    torc_device *runner = dev;
    int rc;
    op->struct_size = sizeof *op;
    char why[160];
    const bool too_new = predates(dev, op, why, sizeof why);
    const bool declined = too_new || !vt_supports(dev, op);
    trace_op(op, declined);
    if (declined) {
        if (!dev->host_memory) {
            if (device_fallback_on()) return host_round_trip(dev, op, flops);
            return torc__error(TORC_ERR_NOT_SUPPORTED,
                               "backend '%s' cannot run op '%s' for dtype %s and has no fallback (%s); set "
                               "TORC_DEVICE_FALLBACK=1 to run the ops it declines on the host (copied there and back)",
                               torc_device_backend_name(dev), torc_op_name(op->code),
                               torc_dtype_name(op->out[0].dtype), too_new ? why : backend_msg(dev));
        }
        // Host memory: the reference backend runs it on the same pointers, no copies.
        runner = torc__reference_device();
        if (!runner) return torc_last_status();
        if (runner == dev) return torc__error(TORC_ERR_NOT_SUPPORTED, "%s", too_new ? why : backend_msg(dev));
        if (predates(runner, op, why, sizeof why)) return torc__error(TORC_ERR_NOT_SUPPORTED, "%s", why);
        // The reference's run() makes exactly the checks its supports() makes before it touches
        // memory, so it is asked first and supports() only on failure, to tell a refusal (only
        // what PyTorch refuses; its reason is worded for the user) from a failed kernel.
        rc = vt_run(runner, op);
        if (rc != 0 && !vt_supports(runner, op))
            return torc__error(TORC_ERR_NOT_SUPPORTED, "%s", backend_msg(runner));
    } else {
        rc = vt_run(runner, op);
    }
    return counted(runner, op, rc, flops);
}

torc_status torc__dispatch_supported(torc_device *dev, torc_op *op, uint64_t flops) {
    trace_op(op, false);
    return counted(dev, op, vt_run(dev, op), flops);
}

torc_status torc__dispatch_list(torc_device *dev, torc_opcode code, torc_op *elems, int n, const uint64_t *flops) {
    uint64_t total = 0;
    for (int i = 0; i < n; i++) elems[i].struct_size = sizeof elems[i], total += flops[i];
    if (n >= 2) {
        const torc_op_list list = {.struct_size = sizeof list, .n = n, .ops = elems};
        torc_op op = {.code = code, .n_in = 0, .n_out = 1, .params.ext.data = &list};
        op.out[0] = elems[0].out[0];
        // Taken by dev, or on host memory by the reference; a refusal (TORC_ERR_NOT_SUPPORTED,
        // nothing written: the contract) sends the elements one by one, as before 2.6.
        const torc_status st = torc__dispatch(dev, &op, total);
        if (st != TORC_ERR_NOT_SUPPORTED) return st;
        torc_clear_error();  // the refusal is handled here: the elements' own errors stand
    }
    for (int i = 0; i < n; i++) {
        const torc_status st = torc__dispatch(dev, &elems[i], flops[i]);
        if (st) return st;
    }
    return TORC_OK;
}

void *torc__dev_alloc(torc_device *dev, size_t nbytes) {
    if (torc__dev_shut_down(dev)) {
        torc__error(TORC_ERR_BACKEND, "%s: backend '%s' has been shut down (torc_shutdown)", dev->name,
                    torc_device_backend_name(dev));
        return NULL;
    }
    void *p = dev->vt->alloc(dev->ctx, dev->index, nbytes);  // nbytes > 0: tensor.c keeps empty storage
    if (!p) torc__error(TORC_ERR_OOM, "%s: out of memory allocating %zu bytes (%s)", dev->name,
                        nbytes, backend_msg(dev));
    // Host memory is shared by every host backend and read by the core: one alignment for all.
    if (p && dev->host_memory && (uintptr_t)p % TORC_HOST_ALIGNMENT) {
        dev->vt->free(dev->ctx, dev->index, p);
        torc__error(TORC_ERR_BACKEND,
                    "%s: backend '%s' returned host memory at %p for %zu bytes, not aligned to %d bytes (backend.h: "
                    "alloc of a host-memory backend returns memory aligned to TORC_HOST_ALIGNMENT)",
                    dev->name, torc_device_backend_name(dev), p, nbytes, TORC_HOST_ALIGNMENT);
        return NULL;
    }
    return p;
}

// After shutdown the memory is the backend's no longer: dropped, never handed back (backend.h).
void torc__dev_free(torc_device *dev, void *ptr) {
    if (!torc__dev_shut_down(dev)) dev->vt->free(dev->ctx, dev->index, ptr);
}

torc_status torc_empty_cache(const torc_device *dev) {
    if (!dev) return torc__null_arg("torc_empty_cache: dev is NULL");
    if (!HAS_MEMBER(dev->vt, empty_cache) || dev->vt->empty_cache(dev->ctx, dev->index) == 0) return TORC_OK;
    return torc__error(TORC_ERR_BACKEND, "%s: empty_cache failed: %s", dev->name, backend_msg(dev));
}

torc_status torc__dev_copy(torc_device *dev, void *dst, const void *src, size_t n,
                           torc_copy_kind kind) {
    if (n == 0) return TORC_OK;
    if (dev->vt->copy(dev->ctx, dev->index, dst, src, n, kind, false) != 0)
        return torc__error(TORC_ERR_BACKEND, "%s: copy failed: %s", dev->name, backend_msg(dev));
    return TORC_OK;
}

torc_status torc__dev_sync(torc_device *dev) {
    torc_backend_lib *outer = torc__tls_calling;
    torc__tls_calling = dev->lib;
    const int rc = dev->vt->synchronize(dev->ctx, dev->index);
    torc__tls_calling = outer;
    if (rc != 0)
        return torc__error(TORC_ERR_BACKEND, "%s: synchronize failed: %s", dev->name, backend_msg(dev));
    return TORC_OK;
}


void *torc__dev_host_alloc(torc_device *dev, size_t nbytes) {
    return HAS_MEMBER(dev->vt, host_alloc) && HAS_MEMBER(dev->vt, host_free) ? dev->vt->host_alloc(dev->ctx, dev->index, nbytes)
                                                                             : NULL;
}

void torc__dev_host_free(torc_device *dev, void *ptr) {
    if (ptr && HAS_MEMBER(dev->vt, host_free) && !torc__dev_shut_down(dev)) dev->vt->host_free(dev->ctx, dev->index, ptr);
}

torc_status torc__dev_copy_async(torc_device *dev, void *dst, const void *src, size_t n, torc_copy_kind kind) {
    if (n == 0) return TORC_OK;
    if (dev->vt->copy(dev->ctx, dev->index, dst, src, n, kind, true) != 0)
        return torc__error(TORC_ERR_BACKEND, "%s: copy failed: %s", dev->name, backend_msg(dev));
    return TORC_OK;
}

#ifdef TORC_TEST_EXTRA_ABI
// tests/abi's test build only: runs its extra opcode, dst = src * scale + shift (same shape and
// dtype), its parameters in a struct larger than the params union (params.ext).
TORC_API torc_status torc_test_extra_op(torc_tensor *dst, const torc_tensor *src, double scale, double shift);
torc_status torc_test_extra_op(torc_tensor *dst, const torc_tensor *src, double scale, double shift) {
    const torc_test_extra_params p = {.struct_size = sizeof p, .scale = scale, .shift = shift};
    torc_op op = {.code = TORC_OP_TEST_EXTRA, .n_in = 1, .n_out = 1, .params.ext.data = &p};
    torc__operand(src, &op.in[0]);
    torc__operand(dst, &op.out[0]);
    return torc__dispatch(dst->device, &op, 0);
}
#endif

torc_status torc_device_memory_stats(const torc_device *dev, uint64_t *allocated, uint64_t *reserved,
                                     uint64_t *peak_reserved) {
    if (!dev) return torc__null_arg("torc_device_memory_stats: dev is NULL");
    uint64_t a, r, p;
    if (HAS_MEMBER(dev->vt, memory_stats)) {
        if (dev->vt->memory_stats(dev->ctx, dev->index, &a, &r, &p) != 0)
            return torc__error(TORC_ERR_BACKEND, "%s: memory_stats failed: %s", dev->name, backend_msg(dev));
    } else {  // the core's own counters of live tensor bytes
        torc_memory_stats m;
        torc_status st = torc_memory_stats_get(dev, &m);
        if (st) return st;
        a = r = m.total_in_use;
        p = m.total_peak;
    }
    if (allocated) *allocated = a;
    if (reserved) *reserved = r;
    if (peak_reserved) *peak_reserved = p;
    return TORC_OK;
}
