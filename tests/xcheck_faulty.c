// tests/xcheck_faulty.c — a deliberately broken host backend ("xcheck_faulty") that the xcheck
// tests point torc-xcheck at: each f32 op it claims has one planted bug that the tool must catch.
//   add: writes one element past the end of out      sub: scribbles on its second input
//   mul: assumes inputs' last dim has unit stride   maximum: drops NaN (fmaxf)
//   exp: rounds its result through bf16               div: breaks when out aliases in0
//   minimum, neg: correct (controls). Every other op falls back to the reference.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <torc/backend.h>
#include <torc/convert.h>

static _Thread_local char tls_error[256];
static const char *faulty_last_error(void *ctx) { return tls_error; }

static int64_t numel(const torc_operand *o) {
    int64_t n = 1;
    for (int d = 0; d < o->ndim; d++) n *= o->shape[d];
    return n;
}

// Offset in elements of the lin-th element (row-major) of o. unit_last: the planted stride bug,
// a unit stride assumed for the last dim (never larger than the true offset: stays in bounds).
static int64_t offset_of(const torc_operand *o, int64_t lin, bool unit_last) {
    int64_t off = 0;
    for (int d = o->ndim - 1; d >= 0; d--) {
        const int64_t st = unit_last && d == o->ndim - 1 && o->stride[d] ? 1 : o->stride[d];
        off += (lin % o->shape[d]) * st;
        lin /= o->shape[d];
    }
    return off;
}

static float *at(const torc_operand *o, int64_t lin, bool unit_last) {
    return (float *)o->data + offset_of(o, lin, unit_last);
}

static bool all_f32(const torc_op *op) {
    for (int k = 0; k < op->n_in; k++)
        if (op->in[k].dtype != TORC_DTYPE_F32) return false;
    return op->out[0].dtype == TORC_DTYPE_F32;
}

static bool faulty_supports(void *ctx, int device, const torc_op *op) {
    if (device != 0 || !all_f32(op)) return false;
    switch (op->code) {
    case TORC_OP_ADD: case TORC_OP_SUB: case TORC_OP_MUL: case TORC_OP_MAXIMUM: case TORC_OP_MINIMUM: case TORC_OP_DIV:
        return op->n_in == 2;
    case TORC_OP_EXP: case TORC_OP_NEG: return op->n_in == 1;
    default: return false;
    }
}

static int faulty_run(void *ctx, int device, const torc_op *op) {
    if (!faulty_supports(ctx, device, op)) {
        snprintf(tls_error, sizeof tls_error, "xcheck_faulty: op %d not supported", (int)op->code);
        return TORC_ERR_NOT_SUPPORTED;
    }
    const torc_operand *o = &op->out[0], *a = &op->in[0], *b = &op->in[1];
    const int64_t n = numel(o);
    const double alpha = op->params.scalar.value;
    if (op->code == TORC_OP_DIV)  // stages in1 in out first: wrong when out is in0
        for (int64_t i = 0; i < n; i++) *at(o, i, false) = *at(b, i, false);
    for (int64_t i = 0; i < n; i++) {
        const bool bug = op->code == TORC_OP_MUL;
        const float x = *at(a, i, bug);
        const float y = op->n_in > 1 ? *at(b, i, bug) : 0.0f;
        float r;
        switch (op->code) {
        case TORC_OP_ADD: r = (float)(x + alpha * y); break;
        case TORC_OP_SUB: r = (float)(x - alpha * y); break;
        case TORC_OP_MUL: r = x * y; break;
        case TORC_OP_MAXIMUM: r = fmaxf(x, y); break;
        case TORC_OP_MINIMUM: r = (isnan(x) || isnan(y)) ? NAN : (x < y ? x : y); break;
        case TORC_OP_DIV: r = x / *at(o, i, false); break;
        case TORC_OP_EXP: r = torc_bf16_to_f32(torc_f32_to_bf16(expf(x))); break;
        default: r = -x; break;
        }
        *at(o, i, false) = r;
    }
    if (n > 0 && op->code == TORC_OP_ADD) {  // one element past the farthest one written
        int64_t last = 0;
        for (int d = 0; d < o->ndim; d++) last += (o->shape[d] - 1) * o->stride[d];
        ((float *)o->data)[last + 1] = 1234.5f;
    }
    if (n > 0 && op->code == TORC_OP_SUB) *at(b, 0, false) = 1234.5f;
    return TORC_OK;
}

static int faulty_init(const char *const *options, void **ctx) {
    (void)options, (void)ctx;
    return TORC_OK;
}
static void faulty_shutdown(void *ctx) {}
static int faulty_device_count(void *ctx) { return 1; }

static int faulty_device_info(void *ctx, int device, torc_device_info *info) {
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "xcheck test backend with planted bugs");
    info->host_memory = true;
    snprintf(info->peak_source, sizeof info->peak_source, "none");
    return TORC_OK;
}

static void *faulty_alloc(void *ctx, int device, size_t nbytes) { return aligned_alloc(64, nbytes + (64 - nbytes % 64)); }
static void faulty_free(void *ctx, int device, void *ptr) { free(ptr); }
static int faulty_copy(void *ctx, int device, void *dst, const void *src, size_t nbytes, torc_copy_kind kind, bool async) {
    if (nbytes) memmove(dst, src, nbytes);
    return TORC_OK;
}
static int faulty_synchronize(void *ctx, int device) { return TORC_OK; }

static const torc_backend_vtable vtable = {
    .abi_version = TORC_BACKEND_ABI_VERSION,
    .struct_size = sizeof(torc_backend_vtable),
    .name = "xcheck_faulty",
    .init = faulty_init,
    .shutdown = faulty_shutdown,
    .device_count = faulty_device_count,
    .device_info = faulty_device_info,
    .alloc = faulty_alloc,
    .free = faulty_free,
    .copy = faulty_copy,
    .synchronize = faulty_synchronize,
    .supports = faulty_supports,
    .run = faulty_run,
    .last_error = faulty_last_error,
};

TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t host_abi_version) {
    return host_abi_version >> 16 == TORC_BACKEND_ABI_MAJOR ? &vtable : NULL;
}
