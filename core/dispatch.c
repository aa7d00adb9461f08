// core/dispatch.c — the one place the core calls a backend's vtable: op dispatch with the
// host-memory fallback to the reference backend, FLOP counting, and memory wrappers.
#include <stddef.h>
#include <string.h>

#include "torc-impl.h"

static const char *backend_msg(const torc_device *dev) {
    const char *m = dev->vt->last_error();
    return m && *m ? m : "(no message)";
}

torc_status torc__dispatch(torc_device *dev, torc_op *op, uint64_t flops) {
    torc_device *runner = dev;
    int rc;
    // A plugin built before an opcode was appended (an older ABI minor) is never asked about it.
    const bool known = torc_backend_op_minor[op->code] <= (dev->vt->abi_version & 0xFFFF);
    if (!known || !dev->vt->supports(dev->index, op)) {
        if (!dev->host_memory)
            return torc__error(TORC_ERR_NOT_SUPPORTED,
                               "backend '%s' cannot run op '%s' for dtype %s and has no fallback (%s)",
                               torc_device_backend_name(dev), torc_op_name(op->code), torc_dtype_name(op->out.dtype),
                               known ? backend_msg(dev) : "the plugin predates this op");
        // Host memory: the reference backend runs it on the same pointers, no copies.
        runner = torc__reference_device();
        if (!runner) return torc_last_status();
        if (runner == dev) return torc__error(TORC_ERR_NOT_SUPPORTED, "%s", backend_msg(dev));
        // The reference's run() makes exactly the checks its supports() makes before it touches
        // memory, so it is asked first and supports() only on failure, to tell a refusal (only
        // what PyTorch refuses; its reason is worded for the user) from a failed kernel.
        rc = runner->vt->run(runner->index, op);
        if (rc != 0 && !runner->vt->supports(runner->index, op))
            return torc__error(TORC_ERR_NOT_SUPPORTED, "%s", backend_msg(runner));
    } else {
        rc = runner->vt->run(runner->index, op);
    }
    if (rc != 0) {
        // A backend's status and message stand as they are (e.g. TORC_ERR_INDEX, "index 5 is
        // out of bounds for dimension 0 with size 3"); unknown codes become TORC_ERR_BACKEND.
        const torc_status st = rc > 0 && rc < TORC_STATUS_COUNT ? (torc_status)rc : TORC_ERR_BACKEND;
        return torc__error(st, "%s", backend_msg(runner));
    }
    // FLOPs are counted in the dtype the op computes from: its first input's (out's for fills).
    torc__flops_add(op->code, op->n_in > 0 ? op->in[0].dtype : op->out.dtype, flops);
    return TORC_OK;
}

void *torc__dev_alloc(torc_device *dev, size_t nbytes) {
    void *p = dev->vt->alloc(dev->index, nbytes);
    if (!p) torc__error(TORC_ERR_OOM, "%s: out of memory allocating %zu bytes (%s)", dev->name,
                        nbytes, backend_msg(dev));
    return p;
}

void torc__dev_free(torc_device *dev, void *ptr) { dev->vt->free(dev->index, ptr); }

torc_status torc_empty_cache(const torc_device *dev) {
    if (!dev) return torc__null_arg("torc_empty_cache: dev is NULL");
    if (!dev->vt->empty_cache || dev->vt->empty_cache(dev->index) == 0) return TORC_OK;
    return torc__error(TORC_ERR_BACKEND, "%s: empty_cache failed: %s", dev->name, backend_msg(dev));
}

torc_status torc__dev_copy(torc_device *dev, void *dst, const void *src, size_t n,
                           torc_copy_kind kind) {
    if (n == 0) return TORC_OK;
    if (dev->vt->copy(dev->index, dst, src, n, kind, false) != 0)
        return torc__error(TORC_ERR_BACKEND, "%s: copy failed: %s", dev->name, backend_msg(dev));
    return TORC_OK;
}

torc_status torc__dev_sync(torc_device *dev) {
    if (dev->vt->synchronize(dev->index) != 0)
        return torc__error(TORC_ERR_BACKEND, "%s: synchronize failed: %s", dev->name, backend_msg(dev));
    return TORC_OK;
}

// Members added in v1.1 exist when the plugin's vtable is long enough and sets them.
#define HAS_MEMBER(vt, m) ((vt)->struct_size >= offsetof(torc_backend_vtable, m) + sizeof((vt)->m) && (vt)->m)

void *torc__dev_host_alloc(torc_device *dev, size_t nbytes) {
    return HAS_MEMBER(dev->vt, host_alloc) && HAS_MEMBER(dev->vt, host_free) ? dev->vt->host_alloc(dev->index, nbytes)
                                                                             : NULL;
}

void torc__dev_host_free(torc_device *dev, void *ptr) {
    if (ptr && HAS_MEMBER(dev->vt, host_free)) dev->vt->host_free(dev->index, ptr);
}

torc_status torc__dev_copy_async(torc_device *dev, void *dst, const void *src, size_t n, torc_copy_kind kind) {
    if (n == 0) return TORC_OK;
    if (dev->vt->copy(dev->index, dst, src, n, kind, true) != 0)
        return torc__error(TORC_ERR_BACKEND, "%s: copy failed: %s", dev->name, backend_msg(dev));
    return TORC_OK;
}
