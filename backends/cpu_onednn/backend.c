// backends/cpu_onednn/backend.c — the oneDNN backend's vtable and entry point: process state
// (one engine, one stream, the workspace, the lock), memory, errors, supports() and run().
// Every oneDNN call runs under one lock: the stream, the cached primitives' memory objects
// and the workspace are shared, and each primitive already uses every core through OpenMP.
#include <errno.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onednn-impl.h"

static struct {
    pthread_mutex_t lock;
    int refs;              // init() calls not yet matched by shutdown()
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int nthreads;          // num_threads / TORC_NUM_THREADS; 0: OpenMP's default (every core)
    _Atomic int64_t min_work;  // min_work option; -1: TORC_ONEDNN_MIN_WORK or the default
    void *work;            // temporaries + scratchpads of the running plan
    size_t work_bytes;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .min_work = -1};

dnnl_engine_t onednn__engine(void) { return g.engine; }

// ---- errors ----
static _Thread_local char t_error[512];
// supports() declines every tiny op (TORC_ONEDNN_MIN_WORK) and the core usually never reads why:
// the decline is kept as its numbers and formatted only when last_error() is asked for it.
static _Thread_local struct { bool pending; torc_opcode code; int64_t work, min; } t_decline;
static void format_decline(void);

int onednn__error(int status, const char *fmt, ...) {
    t_decline.pending = false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_error, sizeof t_error, fmt, ap);
    va_end(ap);
    return status;
}

const char *onednn__last_error_text(void) {
    if (t_decline.pending) format_decline();
    return t_error;
}

const char *onednn__status_name(dnnl_status_t s) {
    switch (s) {
    case dnnl_success: return "dnnl_success";
    case dnnl_out_of_memory: return "dnnl_out_of_memory";
    case dnnl_invalid_arguments: return "dnnl_invalid_arguments";
    case dnnl_unimplemented: return "dnnl_unimplemented";
    case dnnl_iterator_ends: return "dnnl_iterator_ends";
    case dnnl_runtime_error: return "dnnl_runtime_error";
    case dnnl_not_required: return "dnnl_not_required";
    default: return "dnnl status unknown";
    }
}

int onednn__dnnl_error(dnnl_status_t s, const char *what) {
    int len = (int)strcspn(what, "(");
    int status = s == dnnl_unimplemented || s == dnnl_invalid_arguments ? TORC_ERR_NOT_SUPPORTED
               : s == dnnl_out_of_memory ? TORC_ERR_OOM
               : TORC_ERR_BACKEND;
    return onednn__error(status, "onednn: %.*s failed: %s (%d)", len, what, onednn__status_name(s),
                         (int)s);
}

// The op's name in messages: TORC_OP_LIST's (backend.h), so a new opcode needs no edit here.
const char *onednn__op_name(torc_opcode code) {
    static const char *const names[] = {
#define ONEDNN__OP_NAME(ID, name, minor) [TORC_OP_##ID] = name,
        TORC_OP_LIST(ONEDNN__OP_NAME)
#undef ONEDNN__OP_NAME
    };
    return (unsigned)code < TORC_OP_COUNT ? names[code] : "(unknown op)";
}

static const char *onednn_last_error(void *ctx) {
    (void)ctx;  // per thread, whatever the context (NULL too: a failed init)
    return onednn__last_error_text();
}

// ---- init / shutdown ----
// Options, each overriding its environment variable (which stays the default):
//   num_threads=N   TORC_NUM_THREADS      OpenMP threads (a positive integer; unset: every core)
//   max_cpu_isa=X   TORC_MAX_CPU_ISA      the instruction-set cap (isa.c)
//   min_work=N      TORC_ONEDNN_MIN_WORK  ops smaller than this go to the reference (0: none)
typedef struct onednn_options {
    const char *num_threads, *max_cpu_isa, *min_work;  // NULL: not given
} onednn_options;

static int parse_options(const char *const *options, onednn_options *o) {
    memset(o, 0, sizeof *o);
    for (int i = 0; options && options[i]; i++) {
        const char *kv = options[i], *eq = strchr(kv, '=');
        const size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
        const char **slot = klen == 11 && !strncmp(kv, "num_threads", klen)   ? &o->num_threads
                            : klen == 11 && !strncmp(kv, "max_cpu_isa", klen) ? &o->max_cpu_isa
                            : klen == 8 && !strncmp(kv, "min_work", klen)     ? &o->min_work
                                                                              : NULL;
        if (!slot)
            return onednn__error(TORC_ERR_INVALID_ARG, "onednn: unknown option '%.*s' (it takes num_threads, "
                                 "max_cpu_isa, min_work)", (int)klen, kv);
        if (!eq) return onednn__error(TORC_ERR_INVALID_ARG, "onednn: option '%s' is not key=value", kv);
        *slot = eq + 1;
    }
    return 0;
}

// A count in [lo, hi] from s (what names where it came from), or an error.
static int parse_count(const char *s, const char *what, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s must be an integer in [%ld, %ld], got '%s'", what, lo,
                             hi, s);
    *out = v;
    return 0;
}

// num_threads, else TORC_NUM_THREADS: a positive integer, or unset for OpenMP's default.
static int read_num_threads(const char *opt, int *n) {
    *n = 0;
    const char *s = opt ? opt : getenv("TORC_NUM_THREADS");
    if (!s || (!opt && !*s)) return 0;
    long v = 0;  // (set by parse_count on success; gcc -O3 cannot tell)
    int st = parse_count(s, opt ? "num_threads" : "TORC_NUM_THREADS", 1, 65536, &v);
    if (!st) *n = (int)v;
    return st;
}

// OpenMP's thread count is per calling thread: set it on every thread that enters oneDNN.
static void apply_threads(void) {
    if (g.nthreads > 0 && omp_get_max_threads() != g.nthreads) omp_set_num_threads(g.nthreads);
}

// The state is the process's (one engine, one stream, one lock): every context is &g, counted by
// refs. The first init applies max_cpu_isa; num_threads and min_work apply at every init.
static int onednn_init(const char *const *options, void **ctx) {
    onednn_options o;
    int st = parse_options(options, &o);
    if (st) return st;
    long mw = -1;
    if (o.min_work && (st = parse_count(o.min_work, "min_work", 0, LONG_MAX, &mw)))
        return st;
    int n;
    if ((st = read_num_threads(o.num_threads, &n))) return st;
    pthread_mutex_lock(&g.lock);
    if (g.refs > 0) {
        g.refs++;
        if (o.num_threads) g.nthreads = n;
        if (o.min_work) atomic_store(&g.min_work, (int64_t)mw);
        *ctx = &g;
        goto out;
    }
    if ((st = onednn__isa_init(o.max_cpu_isa))) goto out;
    g.nthreads = n;
    atomic_store(&g.min_work, (int64_t)mw);
    apply_threads();
    dnnl_status_t s = dnnl_engine_create(&g.engine, dnnl_cpu, 0);
    if (s != dnnl_success) {
        g.engine = NULL;
        st = onednn__dnnl_error(s, "dnnl_engine_create(");
        goto out;
    }
    s = dnnl_stream_create(&g.stream, g.engine, dnnl_stream_default_flags);
    if (s != dnnl_success) {
        dnnl_engine_destroy(g.engine);
        g.engine = NULL;
        g.stream = NULL;
        st = onednn__dnnl_error(s, "dnnl_stream_create(");
        goto out;
    }
    g.refs = 1;
    *ctx = &g;
out:
    pthread_mutex_unlock(&g.lock);
    return st;
}

static void release_workspace(void) {
    free(g.work);
    g.work = NULL;
    g.work_bytes = 0;
}

// Never blocks (backend.h): at exit the lock may be held by a call that exit() interrupted (OpenBLAS,
// libgomp or libgfortran end the process when memory runs out, on this thread or on one of
// OpenMP's workers while this one waits in the primitive). Then nothing is released: the
// process is ending, and whoever holds the lock may still be using what shutdown would free.
static void onednn_shutdown(void *ctx) {
    (void)ctx;
    if (pthread_mutex_trylock(&g.lock) != 0) return;
    if (g.refs > 0 && --g.refs == 0) {
        onednn__cache_clear();
        release_workspace();
        dnnl_stream_destroy(g.stream);
        dnnl_engine_destroy(g.engine);
        g.stream = NULL;
        g.engine = NULL;
        // Ends OpenMP's worker threads too (the next parallel region starts new ones). Besides
        // freeing them, this keeps LeakSanitizer alive at exit: GCC 12's LSan crashes scanning
        // the dynamic TLS (libdnnl's, loaded by dlopen) of idle workers on glibc 2.36.
        omp_pause_resource_all(omp_pause_hard);
        onednn__mem_release_cache_nowait();
    }
    pthread_mutex_unlock(&g.lock);
}

// ---- devices and memory ----
static int onednn_device_count(void *ctx) {
    (void)ctx;
    return 1;
}

static int check_device(int device) {
    if (device != 0)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: no device %d (the CPU is device 0)",
                             device);
    return 0;
}

static int onednn_device_info(void *ctx, int device, torc_device_info *info) {
    int st = check_device(device);
    if (st) return st;
    if (!info) return onednn__error(TORC_ERR_INVALID_ARG, "onednn: device_info: info is NULL");
    return onednn__device_info(info);
}

static void *onednn_alloc(void *ctx, int device, size_t nbytes) {
    if (check_device(device)) return NULL;
    void *p = onednn__mem_alloc(nbytes);
    if (!p) onednn__error(TORC_ERR_OOM, "onednn: cannot allocate %zu bytes", nbytes);
    return p;
}

static void onednn_free(void *ctx, int device, void *ptr) {
    (void)device;
    onednn__mem_free(ptr);
}

static int onednn_copy(void *ctx, int device, void *dst, const void *src, size_t nbytes, torc_copy_kind kind,
                       bool async) {
    int st = check_device(device);
    if (st) return st;
    if ((int)kind < TORC_COPY_HOST_TO_DEVICE || kind > TORC_COPY_DEVICE_TO_DEVICE)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: copy: unknown copy kind %d", (int)kind);
    if (nbytes == 0) return 0;
    if (!dst || !src) return onednn__error(TORC_ERR_INVALID_ARG, "onednn: copy: NULL pointer");
    memmove(dst, src, nbytes);  // host memory: every kind is a memcpy; async has nothing to wait on
    return 0;
}

static int onednn_synchronize(void *ctx, int device) {
    int st = check_device(device);
    if (st) return st;
    pthread_mutex_lock(&g.lock);
    if (g.stream) {
        dnnl_status_t s = dnnl_stream_wait(g.stream);
        if (s != dnnl_success) st = onednn__dnnl_error(s, "dnnl_stream_wait(");
    }
    pthread_mutex_unlock(&g.lock);
    return st;
}

static int onednn_empty_cache(void *ctx, int device) {
    int st = check_device(device);
    if (st) return st;
    pthread_mutex_lock(&g.lock);
    onednn__cache_clear();
    release_workspace();
    pthread_mutex_unlock(&g.lock);
    onednn__mem_release_cache();
    return 0;
}

// ---- ops ----
// Ops smaller than this run faster in the reference backend's plain loops than through a
// oneDNN primitive (whose execute alone costs about a microsecond), so supports() declines them
// and the core runs them on the reference with the same pointers. TORC_ONEDNN_MIN_WORK
// overrides it (0 sends every op to oneDNN; its tests use that to cover small shapes). Dense
// casts (cast.c's loops, no primitive) are taken at every size: the reference's generic
// per-element cast cost ~7 ns an element, and an f16 autocast Cruncher step's four small casts
// ran there. (Asking every host family instead cost every tiny op ~25 ns: a 4x4 add 0.18 -> 0.21 us.)
#define ONEDNN_MIN_WORK_DEFAULT 4096

static int64_t min_work(void) {
    const int64_t opt = atomic_load(&g.min_work);  // the min_work option wins
    if (opt >= 0) return opt;
    static _Atomic int64_t cached = -1;
    int64_t v = atomic_load(&cached);
    if (v < 0) {
        const char *s = getenv("TORC_ONEDNN_MIN_WORK");
        char *end = NULL;
        long long parsed = s && *s ? strtoll(s, &end, 10) : -1;
        v = parsed >= 0 && end && !*end ? (int64_t)parsed : ONEDNN_MIN_WORK_DEFAULT;
        atomic_store(&cached, v);
    }
    return v;
}

static void format_decline(void) {
    t_decline.pending = false;
    onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s of %lld elements is smaller than TORC_ONEDNN_MIN_WORK "
                  "(%lld): the reference backend runs it faster", onednn__op_name(t_decline.code),
                  (long long)t_decline.work, (long long)t_decline.min);
}

// Ops run by torc's own host loops (onednn-impl.h): the first family that takes an op owns it.
typedef struct host_family {
    bool (*takes)(const torc_op *op);
    int (*check)(const torc_op *op);  // NULL: takes() already decided
    int (*run)(const torc_op *op);
} host_family;

static const host_family host_families[] = {
    {onednn__fill_takes, onednn__fill_check, onednn__fill_run},
    {onednn__pointwise_takes, onednn__pointwise_check, onednn__pointwise_run},
    {onednn__adam_takes, onednn__adam_check, onednn__adam_run},
    {onednn__adam_list_takes, onednn__adam_list_check, onednn__adam_list_run},
    {onednn__move_takes, onednn__move_check, onednn__move_run},
    {onednn__cast_takes, NULL, onednn__cast_run},
    {onednn__compare_takes, onednn__compare_check, onednn__compare_run},
    {onednn__random_takes, onednn__random_check, onednn__random_run},
    {onednn__max_dim_takes, onednn__max_dim_check, onednn__max_dim_run},
    {onednn__scaled_mm_takes, onednn__scaled_mm_check, onednn__scaled_mm_run},
    {onednn__log_takes, onednn__log_check, onednn__log_run},
    {onednn__log_softmax_takes, onednn__log_softmax_check, onednn__log_softmax_run},
    {onednn__layer_norm_takes, onednn__layer_norm_check, onednn__layer_norm_run},
    {onednn__attention_takes, onednn__attention_check, onednn__attention_run},
    {onednn__gemv_takes, NULL, onednn__gemv_run},
    {onednn__gelu_takes, onednn__gelu_check, onednn__gelu_run},
    {onednn__gelu_backward_takes, onednn__gelu_backward_check, onednn__gelu_backward_run},
    {onednn__cross_entropy_takes, onednn__cross_entropy_check, onednn__cross_entropy_run},
    {onednn__reduce_takes, NULL, onednn__reduce_run},
    {onednn__norm_takes, NULL, onednn__norm_run},
};

static const host_family *host_family_of(const torc_op *op) {
    for (size_t i = 0; i < sizeof host_families / sizeof host_families[0]; i++)
        if (host_families[i].takes(op)) return &host_families[i];
    return NULL;
}

// The host families taken at every size: no primitive to execute, and the reference's per-element
// work is costly (libm in double for GELU: 20-40 ns an element) where theirs is vector code. They
// are what a sampler's one-token step is made of: GELU of (1, 1, 1536) 21-43 us on the reference
// against about 1 on gelu.c, layer_norm of (1, 1, 384) about 7.5 against 2 (config B, one thread;
// the token's GELUs and layer_norms 0.37 -> 0.04 ms). Attention's work is L x S x E, not its
// largest operand (one causal head, T = E = 16: 4.4 us against the reference's 16.8; T = E = 64: 35
// against 870).
// The binary arithmetic ops with a 16-bit operand on pointwise.c's loops too: the reference converts
// element by element (a bf16 bias add of (1, 1, 1152) 5.0 us against 0.76, of 1024 elements 4.5
// against 0.7; f32 4x4 to 4096 elements: 0.3-2.2 us against 0.4-1.0, so f32 keeps the threshold),
// and a bf16 sampler's token makes 37 of them (config B: 0.18 ms of its 2.2).
// Every small op asks this, so the opcode picks the one family to ask.
static bool half_operand(const torc_op *op) {
    for (int i = 0; i < op->n_in; i++)
        if (op->in[i].dtype == TORC_DTYPE_BF16 || op->in[i].dtype == TORC_DTYPE_F16) return true;
    return false;
}

static bool taken_at_any_size(const torc_op *op) {
    switch (op->code) {
    case TORC_OP_ADD: case TORC_OP_SUB: case TORC_OP_MUL: case TORC_OP_DIV:
        return half_operand(op) && onednn__pointwise_takes(op);
    case TORC_OP_COPY: return onednn__cast_takes(op);
    case TORC_OP_ATTENTION: case TORC_OP_ATTENTION_BACKWARD: return onednn__attention_takes(op);
    case TORC_OP_GELU: return onednn__gelu_takes(op);
    case TORC_OP_GELU_BACKWARD: return onednn__gelu_backward_takes(op);
    case TORC_OP_LAYER_NORM: case TORC_OP_LAYER_NORM_BACKWARD: return onednn__layer_norm_takes(op);
    case TORC_OP_LOG_SOFTMAX: return onednn__log_softmax_takes(op);
    case TORC_OP_CROSS_ENTROPY: return onednn__cross_entropy_takes(op);
    default: return false;
    }
}

// NORM_LIST (ABI 2.6): taken where every element is, as supports() decides for it alone
// (TORC_ONEDNN_MIN_WORK included): onednn's norm sums in blocks, the reference in one double, so
// an element runs on the backend it would run on alone (backend.h). Its elements run one after
// another, each as run() runs it.
static const torc_op_list *norm_list(const torc_op *op) {
    const torc_op_list *l = op->params.ext.data;
    if (l && TORC_STRUCT_HAS(l, torc_op_list, ops) && l->n >= 1 && l->ops) return l;
    onednn__error(TORC_ERR_INVALID_ARG, "onednn: norm_list: params.ext.data is not a list of ops");
    return NULL;
}

static bool onednn_supports(void *ctx, int device, const torc_op *op);
static bool norm_list_supports(void *ctx, int device, const torc_op *op) {
    const torc_op_list *l = norm_list(op);
    if (!l) return false;
    for (int i = 0; i < l->n; i++) {
        if (l->ops[i].code != TORC_OP_NORM) {
            onednn__error(TORC_ERR_INVALID_ARG, "onednn: norm_list: element %d is opcode %d, not norm", i,
                          (int)l->ops[i].code);
            return false;
        }
        if (!onednn_supports(ctx, device, &l->ops[i])) return false;  // its reason stands
    }
    return true;
}

static bool onednn_supports(void *ctx, int device, const torc_op *op) {
    if (device != 0 || !op) return false;
    if (op->code == TORC_OP_NORM_LIST) return norm_list_supports(ctx, device, op);
    const int64_t work = onednn__work(op), min = min_work();
    if (work < min && !taken_at_any_size(op)) {
        t_decline.code = op->code, t_decline.work = work, t_decline.min = min, t_decline.pending = true;
        return false;
    }
    const host_family *h = host_family_of(op);
    if (h) return !h->check || h->check(op) == 0;
    bool ok = false;
    pthread_mutex_lock(&g.lock);
    if (g.refs > 0) {
        apply_threads();  // oneDNN sizes its kernels for the thread count at creation
        const onednn_plan *plan;
        ok = onednn__cache_get(op, &plan) == 0;
    } else {
        onednn__error(TORC_ERR_RUNTIME, "onednn: supports() called before init()");
    }
    pthread_mutex_unlock(&g.lock);
    return ok;
}

static int check_pointers(const torc_op *op) {
    for (int i = 0; i < op->n_in; i++)
        if (!op->in[i].data && onednn__numel(&op->in[i]) > 0)
            return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s: in[%d].data is NULL",
                                 onednn__op_name(op->code), i);
    for (int k = 0; k < (op->n_out > 1 && op->n_out <= TORC_OP_MAX_OUTPUTS ? op->n_out : 1); k++)
        if (!op->out[k].data && onednn__numel(&op->out[k]) > 0)
            return k ? onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s: out[%d].data is NULL", onednn__op_name(op->code), k)
                     : onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s: out.data is NULL", onednn__op_name(op->code));
    return 0;
}

static int ensure_workspace(size_t nbytes) {
    if (nbytes <= g.work_bytes) return 0;
    const size_t n = (nbytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, n);
    if (!p) return onednn__error(TORC_ERR_OOM, "onednn: cannot allocate a %zu-byte workspace", n);
    free(g.work);
    g.work = p;
    g.work_bytes = n;
    return 0;
}

// Bytes from x's first element to one past its last (strides are never negative).
static size_t span_bytes(const torc_operand *x) {
    int64_t last = 0;
    for (int d = 0; d < x->ndim; d++) last += (x->shape[d] - 1) * x->stride[d];
    return (size_t)(last + 1) * torc_abi_dtype_size(x->dtype);
}

static int onednn_run(void *ctx, int device, const torc_op *op) {
    int st = check_device(device);
    if (st) return st;
    if (!op) return onednn__error(TORC_ERR_INVALID_ARG, "onednn: run: op is NULL");
    if (op->code == TORC_OP_NORM_LIST) {
        if (!norm_list_supports(ctx, device, op)) {  // an element it does not take: the list is declined
            char why[600];
            snprintf(why, sizeof why, "%s", onednn__last_error_text());
            return onednn__error(TORC_ERR_NOT_SUPPORTED, "%s", why);
        }
        const torc_op_list *l = op->params.ext.data;
        for (int i = 0; i < l->n && !st; i++) st = onednn_run(ctx, device, &l->ops[i]);
        return st;
    }
    const host_family *h = host_family_of(op);
    if (h) {  // plain loops (sgemm for scaled_mm): no oneDNN primitive state, so no lock
        if ((h->check && (st = h->check(op))) || (st = check_pointers(op))) return st;
        apply_threads();
        return h->run(op);
    }
    onednn_fixup fixup = ONEDNN_FIXUP_NONE;
    torc_op local = *op;  // op with aliased inputs moved aside, when the fixup needs them
    void *saved[TORC_OP_MAX_INPUTS] = {NULL};
    pthread_mutex_lock(&g.lock);
    if (g.refs == 0) {
        st = onednn__error(TORC_ERR_RUNTIME, "onednn: run() called before init()");
        goto out;
    }
    apply_threads();
    const onednn_plan *plan;
    if ((st = onednn__cache_get(op, &plan))) goto out;
    if (plan->n_steps == 0) goto out;  // zero-size output: nothing to compute
    if ((st = check_pointers(op))) goto out;
    if ((st = ensure_workspace(plan->tmp_bytes + plan->scratch_bytes))) goto out;
    fixup = plan->fixup;
    // In place (out is an input, as add_ runs): the fixup reads the inputs after the primitive
    // wrote out, so an input holding special values is copied first; else nothing is left to fix.
    bool aliased = false;
    for (int i = 0; i < op->n_in; i++) aliased = aliased || op->in[i].data == op->out[0].data;
    if (fixup != ONEDNN_FIXUP_NONE && aliased) {
        if (!onednn__fixup_needed(fixup, op)) {
            fixup = ONEDNN_FIXUP_NONE;
        } else {
            for (int i = 0; i < op->n_in && !st; i++) {
                if (op->in[i].data != op->out[0].data) continue;
                const size_t nb = span_bytes(&op->in[i]);
                if (!(saved[i] = malloc(nb))) {
                    st = onednn__error(TORC_ERR_OOM, "onednn: cannot allocate %zu bytes", nb);
                    break;
                }
                memcpy(saved[i], op->in[i].data, nb);
                local.in[i].data = saved[i];
            }
            if (st) goto out;
        }
    }
    if (plan->single_thread) {
        const int nthr = omp_get_max_threads();
        omp_set_num_threads(1);
        st = onednn__plan_run(plan, &local, g.work, g.stream);
        omp_set_num_threads(nthr);
    } else {
        st = onednn__plan_run(plan, &local, g.work, g.stream);
    }
out:
    pthread_mutex_unlock(&g.lock);
    if (!st && fixup != ONEDNN_FIXUP_NONE) st = onednn__fixup(fixup, &local);
    for (int i = 0; i < TORC_OP_MAX_INPUTS; i++) free(saved[i]);
    return st;
}

// ---- the vtable ----
static const torc_backend_vtable g_vtable = {
    .abi_version = TORC_BACKEND_ABI_VERSION,
    .struct_size = sizeof(torc_backend_vtable),
    .name = "onednn",
    .init = onednn_init,
    .shutdown = onednn_shutdown,
    .device_count = onednn_device_count,
    .device_info = onednn_device_info,
    .alloc = onednn_alloc,
    .free = onednn_free,
    .copy = onednn_copy,
    .synchronize = onednn_synchronize,
    .supports = onednn_supports,
    .run = onednn_run,
    .last_error = onednn_last_error,
    .memory_stats = NULL,  // the core's own counters
    .empty_cache = onednn_empty_cache,
};

TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t host_abi_version) {
    if ((host_abi_version >> 16) != TORC_BACKEND_ABI_MAJOR) return NULL;
    return &g_vtable;
}
