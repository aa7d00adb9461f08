// backends/reference/entry.c — the reference backend's vtable: device info, host memory,
// the thread-local error, and supports()/run() dispatching by opcode through the kernel table.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ref-impl.h"

// ---- errors ----
// The thread's last message, in torc/plugin_error.h's pool: reporting an error never allocates,
// which is how running out of memory gets reported.
TORC_PLUGIN_ERROR_DEFINE(ref)

#ifdef TORC_TEST_EXTRA_ABI
// ---- tests/abi's extra opcode: out = in0 * scale + shift, parameters through params.ext ----
static bool test_extra_dtypes(const torc_op *op) {
    return op->in[0].dtype == op->out[0].dtype && ref_is_float(op->out[0].dtype);
}

static void test_extra_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const torc_op *op = vctx;
    const torc_test_extra_params *p = op->params.ext.data;
    const torc_dtype dt = op->out[0].dtype;
    for (int64_t i = 0; i < n; i++)
        ref_store_f(ptr[0] + i * step[0], dt, ref_load_f(ptr[1] + i * step[1], dt) * p->scale + p->shift);
}

static int test_extra_run(const torc_op *op) {
    const torc_test_extra_params *p = op->params.ext.data;
    if (!p || !TORC_STRUCT_HAS(p, torc_test_extra_params, shift))
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: test_extra: params.ext.data is %s",
                         p ? "too short" : "NULL");
    int st = ref_check_same_shape(&op->in[0], "in0", &op->out[0], "out");
    if (st) return st;
    const torc_operand *ops[2] = {&op->out[0], &op->in[0]};
    ref_iter it;
    ref_iter_ops(&it, op->out[0].ndim, op->out[0].shape, 2, ops);
    ref_iter_run(&it, test_extra_loop, (void *)op);
    return TORC_OK;
}

#endif
// ---- the list ops (ABI 2.6): each element run by its own kernel, in order ----
static int check_op(const torc_op *op, const ref_kernel **kout);
static int dtype_error(const torc_op *op, const ref_kernel *k);
static int kernels_run(const torc_op *op);

static const char *list_name(torc_opcode code);  // the kernel table's name
static torc_opcode list_element(torc_opcode code) {
    return code == TORC_OP_ADAM_STEP_LIST ? TORC_OP_ADAM_STEP : TORC_OP_NORM;
}

// Every element checked as run() checks an op alone, before any is run: an error writes nothing.
static int list_check(const torc_op *op) {
    const torc_op_list *l = op->params.ext.data;
    if (!l || !TORC_STRUCT_HAS(l, torc_op_list, ops) || l->n < 1 || !l->ops)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s: params.ext.data is not a list of ops",
                         list_name(op->code));
    for (int i = 0; i < l->n; i++) {
        const torc_op *e = &l->ops[i];
        const ref_kernel *k;
        if (e->code != list_element(op->code))
            return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s: element %d is opcode %d, not %d",
                             list_name(op->code), i, (int)e->code, (int)list_element(op->code));
        int st = check_op(e, &k);
        if (st) return st;
        if (!k->dtypes(e)) return dtype_error(e, k);
    }
    return TORC_OK;
}

static bool list_dtypes(const torc_op *op) { return list_check(op) == TORC_OK; }

static int list_run(const torc_op *op) {
    int st = list_check(op);
    if (st) return st;
    const torc_op_list *l = op->params.ext.data;
    for (int i = 0; i < l->n && !st; i++) st = kernels_run(&l->ops[i]);
    return st;
}

// ---- the kernel table ----
// One entry per opcode, in enum order. The size assert makes an appended opcode without a
// reference kernel a compile error; init() refuses a table with a hole in the middle.

static const ref_kernel kernels[] = {
    [TORC_OP_FILL] = {"fill", ref_fill_dtypes, ref_fill_run},
    [TORC_OP_COPY] = {"copy", ref_copy_dtypes, ref_copy_run},
    [TORC_OP_ARANGE] = {"arange", ref_arange_dtypes, ref_arange_run},
    [TORC_OP_LINSPACE] = {"linspace", ref_linspace_dtypes, ref_linspace_run},
    [TORC_OP_RAND_UNIFORM] = {"uniform", ref_random_dtypes, ref_random_run},
    [TORC_OP_RAND_NORMAL] = {"normal", ref_random_dtypes, ref_random_run},
    [TORC_OP_RAND_INT] = {"randint", ref_random_dtypes, ref_random_run},
    [TORC_OP_NEG] = {"neg", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_ABS] = {"abs", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_SIGN] = {"sign", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_SQRT] = {"sqrt", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_RSQRT] = {"rsqrt", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_SQUARE] = {"square", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_RECIPROCAL] = {"reciprocal", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_EXP] = {"exp", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_LOG] = {"log", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_SIN] = {"sin", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_COS] = {"cos", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_TANH] = {"tanh", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_SIGMOID] = {"sigmoid", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_RELU] = {"relu", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_GELU] = {"gelu", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_POW_SCALAR] = {"pow", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_ERF] = {"erf", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_ERFINV] = {"erfinv", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_LOGICAL_NOT] = {"logical_not", ref_unary_dtypes, ref_unary_run},
    [TORC_OP_ADD] = {"add", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_SUB] = {"sub", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_MUL] = {"mul", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_DIV] = {"div", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_POW] = {"pow", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_MAXIMUM] = {"maximum", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_MINIMUM] = {"minimum", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_EQ] = {"eq", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_NE] = {"ne", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_LT] = {"lt", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_LE] = {"le", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_GT] = {"gt", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_GE] = {"ge", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_LOGICAL_AND] = {"logical_and", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_LOGICAL_OR] = {"logical_or", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_WHERE] = {"where", ref_where_dtypes, ref_where_run},
    [TORC_OP_SUM] = {"sum", ref_reduce_dtypes, ref_reduce_run},
    [TORC_OP_MEAN] = {"mean", ref_reduce_dtypes, ref_reduce_run},
    [TORC_OP_PROD] = {"prod", ref_reduce_dtypes, ref_reduce_run},
    [TORC_OP_MAX] = {"max", ref_reduce_dtypes, ref_reduce_run},
    [TORC_OP_MIN] = {"min", ref_reduce_dtypes, ref_reduce_run},
    [TORC_OP_ARGMAX] = {"argmax", ref_reduce_dtypes, ref_reduce_run},
    [TORC_OP_ARGMIN] = {"argmin", ref_reduce_dtypes, ref_reduce_run},
    [TORC_OP_VAR] = {"var", ref_reduce_dtypes, ref_reduce_run},
    [TORC_OP_STD] = {"std", ref_reduce_dtypes, ref_reduce_run},
    [TORC_OP_NORM] = {"linalg.vector_norm", ref_reduce_dtypes, ref_reduce_run},
    [TORC_OP_LOGSUMEXP] = {"logsumexp", ref_reduce_dtypes, ref_reduce_run},
    [TORC_OP_SOFTMAX] = {"softmax", ref_softmax_dtypes, ref_softmax_run},
    [TORC_OP_LOG_SOFTMAX] = {"log_softmax", ref_softmax_dtypes, ref_softmax_run},
    [TORC_OP_MATMUL] = {"matmul", ref_matmul_dtypes, ref_matmul_run},
    [TORC_OP_INDEX_SELECT] = {"index_select", ref_index_dtypes, ref_index_run},
    [TORC_OP_GATHER] = {"gather", ref_index_dtypes, ref_index_run},
    [TORC_OP_MASKED_SELECT] = {"masked_select", ref_index_dtypes, ref_index_run},
    [TORC_OP_INDEX_ADD] = {"index_add_", ref_index_dtypes, ref_index_run},
    [TORC_OP_SCATTER_ADD] = {"scatter_add_", ref_index_dtypes, ref_index_run},
    [TORC_OP_MASKED_SCATTER] = {"masked_scatter_", ref_index_dtypes, ref_index_run},
    [TORC_OP_TRIU] = {"triu", ref_index_dtypes, ref_index_run},
    [TORC_OP_TRIL] = {"tril", ref_index_dtypes, ref_index_run},
    [TORC_OP_SCALED_MM] = {"_scaled_mm", ref_scaled_mm_dtypes, ref_scaled_mm_run},
    [TORC_OP_ADDCMUL] = {"addcmul_cpu_out", ref_pointwise_dtypes, ref_pointwise_run},
    [TORC_OP_ADDCDIV] = {"addcdiv_cpu_out", ref_pointwise_dtypes, ref_pointwise_run},
    [TORC_OP_LERP] = {"lerp_kernel_scalar", ref_pointwise_dtypes, ref_pointwise_run},
    [TORC_OP_LAYER_NORM] = {"LayerNormKernelImpl", ref_layer_norm_dtypes, ref_layer_norm_run},
    [TORC_OP_LAYER_NORM_BACKWARD] = {"LayerNormBackwardKernelImpl", ref_layer_norm_dtypes, ref_layer_norm_run},
    [TORC_OP_MAX_DIM] = {"max", ref_minmax_dim_dtypes, ref_minmax_dim_run},
    [TORC_OP_MIN_DIM] = {"min", ref_minmax_dim_dtypes, ref_minmax_dim_run},
    [TORC_OP_ADAM_STEP] = {"_fused_adam", ref_adam_dtypes, ref_adam_run},
    [TORC_OP_MATMUL_ROUNDED] = {"matmul_rounded", ref_matmul_rounded_dtypes, ref_matmul_run},
    [TORC_OP_FLOOR_DIVIDE] = {"div_floor_cpu", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_REMAINDER] = {"remainder_cpu", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_FMOD] = {"fmod_cpu", ref_binary_dtypes, ref_binary_run},
    [TORC_OP_ATTENTION] = {"_scaled_dot_product_flash_attention", ref_attention_dtypes, ref_attention_run},
    [TORC_OP_ATTENTION_BACKWARD] = {"_scaled_dot_product_flash_attention_backward", ref_attention_dtypes,
                                    ref_attention_run},
    [TORC_OP_GELU_BACKWARD] = {"gelu_backward", ref_gelu_backward_dtypes, ref_gelu_backward_run},
    [TORC_OP_CROSS_ENTROPY] = {"cross_entropy_loss", ref_cross_entropy_dtypes, ref_cross_entropy_run},
    [TORC_OP_ADAM_STEP_LIST] = {"_fused_adam_", list_dtypes, list_run},
    [TORC_OP_NORM_LIST] = {"_foreach_norm", list_dtypes, list_run},
#ifdef TORC_TEST_EXTRA_ABI
    [TORC_OP_TEST_EXTRA] = {"test_extra", test_extra_dtypes, test_extra_run},  // tests/abi: params.ext
#endif
};
_Static_assert(sizeof kernels / sizeof kernels[0] == TORC_OP_COUNT,
               "every opcode needs a reference kernel (backends/reference/entry.c)");

static int kernels_run(const torc_op *op) { return kernels[op->code].run(op); }
static const char *list_name(torc_opcode code) { return kernels[code].name; }

const ref_kernel *ref_kernel_of(torc_opcode code) {
    return (unsigned)code < TORC_OP_COUNT && kernels[code].run ? &kernels[code] : NULL;
}

// ---- the op entry points ----
// Structural checks shared by every op: a known opcode, the input count, well-formed operands.
static int check_op(const torc_op *op, const ref_kernel **kout) {
    if (op == NULL) return ref_error(TORC_ERR_INVALID_ARG, "reference backend: op is NULL");
    const ref_kernel *k = ref_kernel_of(op->code);
    if (k == NULL)
        return ref_error(TORC_ERR_NOT_SUPPORTED, "reference backend: unknown opcode %d", (int)op->code);
    // The counts of backend.h's contract (scaled_mm's scale_out and amax optional).
    int in_lo, in_hi, out_lo, out_hi;
    torc_op_counts(op, &in_lo, &in_hi, &out_lo, &out_hi);
    char want[16];
    if (op->n_in < in_lo || op->n_in > in_hi) {
        snprintf(want, sizeof want, in_hi > in_lo ? "%d or %d" : "%d", in_lo, in_hi);
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s takes %s input(s), got %d", k->name, want, op->n_in);
    }
    if (op->n_out < out_lo || op->n_out > out_hi) {
        snprintf(want, sizeof want, out_hi > out_lo ? "%d or %d" : "%d", out_lo, out_hi);
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s takes %s output(s), got %d", k->name, want,
                         op->n_out);
    }
    if ((op->code == TORC_OP_LAYER_NORM || op->code == TORC_OP_LAYER_NORM_BACKWARD) && (op->params.norm.affine & ~3u))
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: %s: params.norm.affine is %u (bits 1 weight and 2 "
                         "bias only)", k->name, op->params.norm.affine);
    static const char *const in_names[TORC_OP_MAX_INPUTS] = {"in0", "in1", "in2", "in3",
                                                             "in4", "in5", "in6", "in7"};
    for (int i = 0; i < op->n_in; i++) {
        int st = ref_check_operand(&op->in[i], in_names[i]);
        if (st) return st;
    }
    for (int i = 0; i < op->n_out; i++) {
        static const char *const out_names[TORC_OP_MAX_OUTPUTS] = {"out", "out1", "out2", "out3"};
        int st = ref_check_operand(&op->out[i], out_names[i]);
        if (st) return st;
    }
    *kout = k;
    return TORC_OK;
}

// The message for a dtype combination no kernel implements: PyTorch's own text where it has a
// specific one, else its generic '"op" not implemented for <dtype>'.
static int dtype_error(const torc_op *op, const ref_kernel *k) {
    const torc_dtype in0 = op->n_in > 0 ? op->in[0].dtype : op->out[0].dtype;
    if (op->code == TORC_OP_NEG && in0 == TORC_DTYPE_BOOL)
        return ref_error(TORC_ERR_DTYPE, "Negation, the `-` operator, on a bool tensor is not supported. "
                         "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
    if (op->code == TORC_OP_SUB && in0 == TORC_DTYPE_BOOL && op->in[1].dtype == TORC_DTYPE_BOOL)
        return ref_error(TORC_ERR_DTYPE, "Subtraction, the `-` operator, with two bool tensors is not supported. "
                         "Use the `^` or `logical_xor()` operator instead.");
    if (op->code == TORC_OP_RELU && in0 == TORC_DTYPE_BOOL)
        return ref_error(TORC_ERR_DTYPE, "Boolean inputs not supported for relu");
    if ((op->code == TORC_OP_ARGMAX || op->code == TORC_OP_ARGMIN) && in0 == TORC_DTYPE_BOOL)
        return ref_error(TORC_ERR_DTYPE, "%s(): does not support bool input", k->name);
    if (op->code == TORC_OP_SCALED_MM && in0 == TORC_DTYPE_F8_E5M2 && op->in[1].dtype == TORC_DTYPE_F8_E5M2)
        return ref_error(TORC_ERR_DTYPE, "Multiplication of two Float8_e5m2 matrices is not supported");
    if (op->code == TORC_OP_SCALED_MM)
        return ref_error(TORC_ERR_DTYPE, "_scaled_mm: expected fp8 mat1/mat2, Float scales and a Float, BFloat16, "
                         "Half or Float8 output, got %s @ %s -> %s", torc_abi_dtype_c10_name(in0),
                         torc_abi_dtype_c10_name(op->in[1].dtype), torc_abi_dtype_c10_name(op->out[0].dtype));
    if (op->n_in > 0 && in0 != op->out[0].dtype)
        return ref_error(TORC_ERR_DTYPE, "\"%s\" not implemented for '%s' with out dtype '%s' (reference backend)",
                         k->name, torc_abi_dtype_c10_name(in0), torc_abi_dtype_c10_name(op->out[0].dtype));
    return ref_error(TORC_ERR_DTYPE, "\"%s\" not implemented for '%s' (reference backend)", k->name,
                     torc_abi_dtype_c10_name(in0));
}

// False leaves the reason in last_error() (PyTorch's wording for a dtype it lacks), so a caller
// can report why without running the op.
static bool ref_supports(void *ctx, int device, const torc_op *op) {
    (void)ctx;
    const ref_kernel *k;
    if (device != 0) {
        ref_error(TORC_ERR_INVALID_ARG, "reference backend: invalid device %d (it has one device, 0)", device);
        return false;
    }
    if (check_op(op, &k) != TORC_OK) return false;
    if (k->dtypes(op)) return true;
    dtype_error(op, k);
    return false;
}

static int ref_run(void *ctx, int device, const torc_op *op) {
    (void)ctx;
    if (device != 0)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: invalid device %d (it has one device, 0)", device);
    const ref_kernel *k;
    int st = check_op(op, &k);
    if (st) return st;
    if (!k->dtypes(op)) return dtype_error(op, k);
    return k->run(op);
}

// ---- device and memory ----
// The reference keeps no state of its own: every context is this one, and it takes no options.
static char g_context;

static int ref_init(const char *const *options, void **ctx) {
    if (options && options[0])
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: unknown option '%s' (it takes no options)",
                         options[0]);
    for (int c = 0; c < TORC_OP_COUNT; c++)
        if (kernels[c].name == NULL || kernels[c].dtypes == NULL || kernels[c].run == NULL)
            return ref_error(TORC_ERR_BACKEND, "reference backend: opcode %d has no kernel (backends/reference/entry.c)", c);
    *ctx = &g_context;
    return TORC_OK;
}
static void ref_shutdown(void *ctx) { (void)ctx; }
static int ref_device_count(void *ctx) {
    (void)ctx;
    return 1;
}

static void cpu_model_name(char *name, size_t cap) {
    snprintf(name, cap, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *colon = strchr(line, ':');
        if (colon == NULL) continue;
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        size_t len = strcspn(v, "\n");
        if (len == 0) continue;
        if (len >= cap) len = cap - 1;
        memcpy(name, v, len);
        name[len] = '\0';
        break;
    }
    fclose(f);
}

static int ref_device_info(void *ctx, int device, torc_device_info *info) {
    (void)ctx;
    if (device != 0)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: invalid device %d (it has one device, 0)", device);
    if (info == NULL) return ref_error(TORC_ERR_INVALID_ARG, "reference backend: device_info: info is NULL");
    // All 2.0 members: info->struct_size covers them (the core zeroed the rest).
    cpu_model_name(info->name, sizeof info->name);
    info->host_memory = true;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    info->total_memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    snprintf(info->peak_source, sizeof info->peak_source, "reference backend: no promise");
    return TORC_OK;
}

static void *ref_alloc(void *ctx, int device, size_t nbytes) {
    (void)ctx;
    if (device != 0) {
        ref_error(TORC_ERR_INVALID_ARG, "reference backend: invalid device %d (it has one device, 0)", device);
        return NULL;
    }
    // 64-byte aligned (a cache line, an AVX-512 vector); a zero-byte request still gets a
    // distinct valid pointer.
    const size_t rounded = nbytes == 0 ? 64 : nbytes + (64 - nbytes % 64) % 64;
    if (rounded < nbytes) {
        ref_error(TORC_ERR_OOM, "reference backend: cannot allocate %zu bytes", nbytes);
        return NULL;
    }
    void *p = aligned_alloc(64, rounded);
    if (p == NULL) ref_error(TORC_ERR_OOM, "reference backend: out of memory allocating %zu bytes", nbytes);
    return p;
}

static void ref_free(void *ctx, int device, void *ptr) {
    (void)ctx, (void)device;
    free(ptr);
}

static int ref_copy(void *ctx, int device, void *dst, const void *src, size_t nbytes, torc_copy_kind kind, bool async) {
    if ((unsigned)kind > TORC_COPY_DEVICE_TO_DEVICE)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: invalid copy kind %d", (int)kind);
    if (nbytes == 0) return TORC_OK;
    if (dst == NULL || src == NULL)
        return ref_error(TORC_ERR_INVALID_ARG, "reference backend: copy of %zu bytes with a NULL pointer", nbytes);
    memmove(dst, src, nbytes);  // host memory on both sides, whatever the kind
    return TORC_OK;
}

static int ref_synchronize(void *ctx, int device) {
    (void)ctx, (void)device;
    return TORC_OK;
}

static const torc_backend_vtable vtable = {
    .abi_version = TORC_BACKEND_ABI_VERSION,
    .struct_size = sizeof(torc_backend_vtable),
    .name = "reference",
    .init = ref_init,
    .shutdown = ref_shutdown,
    .device_count = ref_device_count,
    .device_info = ref_device_info,
    .alloc = ref_alloc,
    .free = ref_free,
    .copy = ref_copy,
    .synchronize = ref_synchronize,
    .supports = ref_supports,
    .run = ref_run,
    .last_error = ref_last_error,
    .memory_stats = NULL,  // the core's own counters
    .empty_cache = NULL,
};

TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t host_abi_version) {
    if (host_abi_version >> 16 != TORC_BACKEND_ABI_MAJOR) return NULL;
    return &vtable;
}
