// tiny.c: a host backend for torc in one file. It runs fill, add, mul and matmul on f32 and f64
// operands of any strides and declines every other op, which torc then runs on the reference.
//
// torc dlopens libtorc_tiny.so and calls torc_backend_entry() for the vtable at the end. The
// plugin includes only <torc/backend.h>, the contract (read its comments), and never links
// libtorc: the core hands it one op at a time, shapes already checked, and it computes.
// Build: the CMakeLists.txt beside it, or cc -std=c11 -O2 -shared -fPIC -fvisibility=hidden
//   -pthread -I PREFIX/include tiny.c -o libtorc_tiny.so -lm
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <torc/backend.h>
#include <torc/plugin_error.h>

// ---- state ----
// One context for every device and thread. Members other than init and shutdown may run
// concurrently, so what they share is read-only or atomic.
typedef struct tiny_ctx {
    bool stats;                          // print ran[] at shutdown (TORC_TINY_STATS=1 or stats=1)
    atomic_ullong ran[TORC_OP_COUNT];    // ops this backend ran itself, by opcode
} tiny_ctx;

// last_error's text, per thread as the contract says: tiny_error(status, fmt, ...) sets it and
// returns status, tiny_last_error(ctx) reads it. It never allocates, so it can report out of memory.
TORC_PLUGIN_ERROR_DEFINE(tiny)

// ---- strided iteration ----
// Visits every element of shape (ndim dims) in row-major order, keeping one element offset per
// operand: off[k] = sum over d of index[d] * stride[k][d]. A stride may be 0 (a broadcast dim).
typedef struct walker {
    int ndim, n_ops;
    const int64_t *shape;
    const int64_t *stride[3];
    int64_t index[TORC_MAX_DIMS], off[3];
} walker;

static int64_t numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

static void walk_next(walker *w) {
    for (int d = w->ndim - 1; d >= 0; d--) {
        for (int k = 0; k < w->n_ops; k++) w->off[k] += w->stride[k][d];
        if (++w->index[d] < w->shape[d]) return;
        for (int k = 0; k < w->n_ops; k++) w->off[k] -= w->stride[k][d] * w->shape[d];
        w->index[d] = 0;
    }
}

// Element i of a buffer of dtype f32 or f64, as a double; and the store that rounds once.
static double load(const void *p, torc_dtype dt, int64_t i) {
    return dt == TORC_DTYPE_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}
static void store(void *p, torc_dtype dt, int64_t i, double v) {
    if (dt == TORC_DTYPE_F32) ((float *)p)[i] = (float)v;
    else ((double *)p)[i] = v;
}

// ---- which ops ----
// supports() is the one place that decides; run() asks it again. Everything declined runs on the
// reference backend with the same pointers (this is a host-memory backend), so the backend can
// start here and grow an op, a dtype or a layout at a time.
static bool one_float_dtype(const torc_op *op) {
    const torc_dtype dt = op->out[0].dtype;
    if (op->n_out != 1 || (dt != TORC_DTYPE_F32 && dt != TORC_DTYPE_F64)) return false;
    for (int i = 0; i < op->n_in; i++)  // inputs may differ from out in general: not here
        if (op->in[i].dtype != dt) return false;
    return true;
}

static bool tiny_supports(void *ctx, int device, const torc_op *op) {
    (void)ctx, (void)device;
    const bool mine = op->code == TORC_OP_FILL || op->code == TORC_OP_ADD || op->code == TORC_OP_MUL ||
                      op->code == TORC_OP_MATMUL;
    if (mine && one_float_dtype(op)) return true;
    tiny_error(TORC_ERR_NOT_SUPPORTED, "tiny: only fill, add, mul and matmul of f32 or f64");
    return false;
}

// ---- ops ----
// out = in0 + alpha * in1 (ADD), out = in0 * in1 (MUL) or out = value (FILL). backend.h's ADD
// asks for PyTorch's rounding: one fused multiply-add in the opmath type (float for f32, double
// for f64), alpha rounded to it. MUL may compute in double: the product of two floats is exact
// there, so rounding it to float once gives the correctly rounded float product.
// out may be identical to in0 or in1 (add_, mul_): element i is read before it is written.
static void elementwise(const torc_op *op) {
    const torc_operand *o = &op->out[0];
    const torc_dtype dt = o->dtype;
    walker w = {.ndim = o->ndim, .n_ops = 1 + op->n_in, .shape = o->shape, .stride = {o->stride}};
    for (int i = 0; i < op->n_in; i++) w.stride[1 + i] = op->in[i].stride;
    const double v = op->params.scalar.value;  // FILL's value, ADD's alpha
    for (int64_t n = numel(o->ndim, o->shape); n > 0; n--, walk_next(&w)) {
        double r = v;
        if (op->code != TORC_OP_FILL) {
            const double a = load(op->in[0].data, dt, w.off[1]), b = load(op->in[1].data, dt, w.off[2]);
            if (op->code == TORC_OP_MUL) r = a * b;
            else r = dt == TORC_DTYPE_F32 ? fmaf((float)v, (float)b, (float)a) : fma(v, b, a);
        }
        store(o->data, dt, w.off[0], r);
    }
}

// (..., M, K) @ (..., K, N) -> (..., M, N): all three have the same ndim, batch dims already
// broadcast (an input's batch stride may be 0). Sums in double, rounds once. K == 0 writes 0.
static void matmul(const torc_op *op) {
    const torc_operand *a = &op->in[0], *b = &op->in[1], *c = &op->out[0];
    const torc_dtype dt = c->dtype;
    const int nd = c->ndim, batch_dims = nd - 2;
    const int64_t M = c->shape[nd - 2], N = c->shape[nd - 1], K = a->shape[nd - 1];
    const int64_t sam = a->stride[nd - 2], sak = a->stride[nd - 1], sbk = b->stride[nd - 2],
                  sbn = b->stride[nd - 1], scm = c->stride[nd - 2], scn = c->stride[nd - 1];
    walker w = {.ndim = batch_dims, .n_ops = 3, .shape = c->shape, .stride = {c->stride, a->stride, b->stride}};
    for (int64_t n = numel(batch_dims, c->shape); n > 0; n--, walk_next(&w))
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += load(a->data, dt, w.off[1] + i * sam + k * sak) * load(b->data, dt, w.off[2] + k * sbk + j * sbn);
                store(c->data, dt, w.off[0] + i * scm + j * scn, s);
            }
}

// run() of an op that supports() declines fails the way supports() said, with last_error set.
static int tiny_run(void *ctx, int device, const torc_op *op) {
    tiny_ctx *t = ctx;
    if (!tiny_supports(ctx, device, op)) return TORC_ERR_NOT_SUPPORTED;
    if (op->code == TORC_OP_MATMUL) matmul(op);
    else elementwise(op);
    atomic_fetch_add_explicit(&t->ran[op->code], 1, memory_order_relaxed);
    return TORC_OK;
}

// ---- lifecycle ----
// options: NULL or NULL-terminated "key=value" strings from torc_backend_load(). An unknown key
// is an error that names it. The environment gives the defaults that options override.
static int tiny_init(const char *const *options, void **ctx) {
    const char *env = getenv("TORC_TINY_STATS");
    bool stats = env && !strcmp(env, "1");
    for (int i = 0; options && options[i]; i++) {
        if (!strcmp(options[i], "stats=1") || !strcmp(options[i], "stats=0")) {
            stats = options[i][6] == '1';
            continue;
        }
        // *ctx stays untouched
        return tiny_error(TORC_ERR_INVALID_ARG, "tiny: unknown option '%s' (known: stats=0|1)", options[i]);
    }
    tiny_ctx *t = calloc(1, sizeof *t);
    if (!t) return tiny_error(TORC_ERR_OOM, "tiny: out of memory");
    t->stats = stats;
    *ctx = t;
    return TORC_OK;
}

// At most once; no call on ctx follows. It may run at exit: it must never block.
static void tiny_shutdown(void *ctx) {
    tiny_ctx *t = ctx;
    if (t->stats) {  // "tiny: ran fill 12 add 30 matmul 9" on stderr
        static const char *const names[] = {  // backend.h's X-macro list gives every op's name
#define TINY_OP_NAME(ID, name, minor) name,
            TORC_OP_LIST(TINY_OP_NAME)
#undef TINY_OP_NAME
        };
        fprintf(stderr, "tiny: ran");
        for (int c = 0; c < TORC_OP_COUNT; c++) {
            const unsigned long long n = atomic_load_explicit(&t->ran[c], memory_order_relaxed);
            if (n) fprintf(stderr, " %s %llu", names[c], n);
        }
        fprintf(stderr, "\n");
    }
    free(t);
}

// ---- devices and memory ----
// One device whose memory is the host's: the core reads and writes it directly, and an op this
// backend declines runs on the reference with the same pointers.
static int tiny_device_count(void *ctx) {
    (void)ctx;
    return 1;
}
static int tiny_device_info(void *ctx, int device, torc_device_info *info) {
    (void)ctx, (void)device;
    // info->struct_size is the core's: members past it would not exist (TORC_STRUCT_HAS). These
    // three are in every 2.x core; the rest stay zero (peak_flops 0: no MFU promised).
    info->host_memory = true;
    snprintf(info->name, sizeof info->name, "tiny host backend");
    snprintf(info->peak_source, sizeof info->peak_source, "no promise");
    return TORC_OK;
}
// backend.h's Memory rule: never asked for 0 bytes; malloc's alignment is what torc requires of
// host memory; NULL means out of memory. Small requests arrive rounded up to 64 bytes, and the
// core keeps freed small blocks for reuse, so allocs and frees balance only at shutdown.
static void *tiny_alloc(void *ctx, int device, size_t nbytes) {
    (void)ctx, (void)device;
    void *p = malloc(nbytes);
    if (!p) tiny_error(TORC_ERR_OOM, "tiny: cannot allocate %zu bytes", nbytes);
    return p;
}
static void tiny_free(void *ctx, int device, void *ptr) {
    (void)ctx, (void)device;
    free(ptr);
}
// Host memory: every kind of copy is a memmove, done before it returns (async or not).
static int tiny_copy(void *ctx, int device, void *dst, const void *src, size_t nbytes, torc_copy_kind kind,
                     bool async) {
    (void)ctx, (void)device, (void)kind, (void)async;
    memmove(dst, src, nbytes);
    return TORC_OK;
}
static int tiny_synchronize(void *ctx, int device) {  // run and copy finish before they return
    (void)ctx, (void)device;
    return TORC_OK;
}

// ---- the vtable ----
static const torc_backend_vtable tiny_vtable = {
    .abi_version = TORC_BACKEND_ABI_VERSION,  // the minor built with: the core sends nothing newer
    .struct_size = sizeof(torc_backend_vtable),
    .name = "tiny",  // keep it the file's: torc names the device after libtorc_tiny.so
    .init = tiny_init,
    .shutdown = tiny_shutdown,
    .device_count = tiny_device_count,
    .device_info = tiny_device_info,
    .alloc = tiny_alloc,
    .free = tiny_free,
    .copy = tiny_copy,
    .synchronize = tiny_synchronize,
    .supports = tiny_supports,
    .run = tiny_run,
    .last_error = tiny_last_error,
    // memory_stats, empty_cache, host_alloc, host_free: optional, NULL (the core counts bytes itself)
};

// The one exported symbol. It runs no ISA- or device-specific code; the core compares versions
// itself and names both on a mismatch.
TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    return &tiny_vtable;
}
