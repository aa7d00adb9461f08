// tests/test_abi.c — the plugin ABIs' compatibility rules, proven with plugins built apart from
// the core (tests/abi.cmake): a backend and an optimizer built against the frozen 2.0 headers
// (tests/abi/v2_0) load and work; a backend claiming a newer minor, with vtable members the core
// does not know, loads and works; a newer major is refused naming both versions; options reach a
// backend's init; memory statistics and shutdown reach every backend. Built a second time against
// a test build of the core that appends an opcode and a dtype of minor 2.7
// (-DTORC_TEST_EXTRA_ABI): an older-minor backend is never sent either.
#define _GNU_SOURCE
#include "ck.h"
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "torc/backend.h"
#include "torc/optim.h"
#include "torc/torc.h"

// The abi test backend's counters (tests/abi/abi_backend.c): ops it ran, ops or dtypes it was
// sent that its headers predate.
static void stats_of(const char *name, int *runs, int *too_new) {
    char path[1024];
    snprintf(path, sizeof path, "%s/libtorc_%s.so", getenv("TORC_ABI_PLUGIN_DIR"), name);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);  // the copy torc loaded
    ck_assert_msg(h != NULL, "%s is not loaded", path);
    void (*fn)(int *, int *) = (void (*)(int *, int *))dlsym(h, "abi_test_stats");
    ck_assert_ptr_nonnull(fn);
    fn(runs, too_new);
    dlclose(h);
}

// The plugin was never sent an opcode or dtype newer than its minor (its own count).
static void assert_never_sent_newer(const char *name) {
    int runs, too_new;
    stats_of(name, &runs, &too_new);
    ck_assert_int_eq(too_new, 0);
}

static void use_abi_plugins(void) { setenv("TORC_PLUGIN_PATH", getenv("TORC_ABI_PLUGIN_DIR"), 1); }

// The test plugin called name, found through TORC_ABI_PLUGIN_DIR.
static torc_device *abi_device(const char *name) {
    use_abi_plugins();
    torc_device *d = torc_device_get(name);
    ck_assert_msg(d != NULL, "%s", torc_last_error());
    return d;
}

// a + 2 * b on dev, checked on the host; the add (dense f32 operands) must run in the plugin
// called name.
static void add_on(torc_device *dev, const char *name) {
    ck_assert_int_eq(torc_set_default_device(dev), TORC_OK);
    const float av[5] = {1, 2, 3, 4, 5}, bv[5] = {0.5f, 0.25f, 0, -1, 2};
    torc_tensor *a = torc_tensor_from(av, 1, (int64_t[]){5}, TORC_DTYPE_F32);
    torc_tensor *b = torc_tensor_from(bv, 1, (int64_t[]){5}, TORC_DTYPE_F32);
    ck_assert_msg(a && b, "%s", torc_last_error());
    int runs0, runs1, too_new;
    stats_of(name, &runs0, &too_new);
    torc_tensor *c = torc_add_scaled(a, b, torc_scalar_f(2.0));
    ck_assert_msg(c != NULL, "%s", torc_last_error());
    stats_of(name, &runs1, &too_new);
    ck_assert_int_eq(runs1 - runs0, 1);
    float got[5];
    ck_assert_int_eq(torc_copy_to_host(c, got, sizeof got), TORC_OK);
    for (int i = 0; i < 5; i++) ck_assert_float_eq(got[i], av[i] + 2 * bv[i]);
    torc_release(a), torc_release(b), torc_release(c);
    torc_set_default_device(NULL);
}

START_TEST(backend_built_against_the_frozen_2_0_headers_loads_and_runs) {
    torc_device *d = abi_device("abiold");
    add_on(d, "abiold");
    assert_never_sent_newer("abiold");
}
END_TEST

// An op of minor 2.1 on a 2.0 plugin: layer_norm and its backward are never sent to it; the
// reference runs them on the same memory, with the right values.
START_TEST(older_minor_backend_is_never_sent_layer_norm) {
    torc_device *d = abi_device("abiold");
    ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    torc_scope_push();
    const float xv[8] = {1, 2, 3, 4, 2, 2, 2, 6}, gv[8] = {1, 0, 0, 0, 0, 0, 0, 1};
    torc_tensor *x = torc_tensor_from(xv, 2, (int64_t[]){2, 4}, TORC_DTYPE_F32);
    torc_tensor *g = torc_tensor_from(gv, 2, (int64_t[]){2, 4}, TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    torc_tensor *y = torc_layer_norm(x, 1, (int64_t[]){4}, NULL, NULL, 0.0);
    ck_assert_msg(y != NULL, "%s", torc_last_error());
    ck_assert_ptr_eq(torc_get_device(y), d);
    tu_assert_values(y, TU_ARR(-1.3416407, -0.4472136, 0.4472136, 1.3416407, -0.5773503, -0.5773503, -0.5773503,
                               1.7320508), 1e-6);
    ck_assert_int_eq(torc_backward(y, g, false), TORC_OK);
    tu_assert_values(torc_grad(x), TU_ARR(0.2683281, -0.3577709, -0.0894427, 0.1788854, 0, 0, 0, 0), 1e-6);
    assert_never_sent_newer("abiold");
    torc_scope_pop();
    torc_set_default_device(NULL);
}
END_TEST

// MATMUL_ROUNDED appeared in ABI 2.2: autocast never sends it to the 2.0 plugin, but casts and
// sends MATMUL, with the explicit casts' values and gradient.
START_TEST(older_minor_backend_gets_autocast_matmuls_as_casts) {
    torc_device *d = abi_device("abiold");
    ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    torc_scope_push();
    const float xv[6] = {0.5f, -1.25f, 2, 3.1f, 0.7f, -0.3f}, wv[6] = {1.1f, 0.2f, -0.9f, 0.33f, 4, 1};
    torc_tensor *x = torc_tensor_from(xv, TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    torc_tensor *w = torc_parameter(torc_tensor_from(wv, TORC_SHAPE(2, 3), TORC_DTYPE_F32));
    torc_tensor *w2 = torc_parameter(torc_tensor_from(wv, TORC_SHAPE(2, 3), TORC_DTYPE_F32));
    ck_assert_int_eq(torc_autocast_begin(TORC_DTYPE_BF16), TORC_OK);
    torc_tensor *y = torc_matmul(x, torc_transpose(w, 0, 1));
    ck_assert_int_eq(torc_autocast_end(), TORC_OK);
    torc_tensor *y2 = torc_matmul(torc_to_dtype(x, TORC_DTYPE_BF16), torc_transpose(torc_to_dtype(w2, TORC_DTYPE_BF16), 0, 1));
    ck_assert_msg(y && y2, "%s", torc_last_error());
    ck_assert_int_eq(torc_get_dtype(y), TORC_DTYPE_BF16);
    double *want = tu_values(y2);
    tu_assert_values(y, want, 4, 0);  // bit for bit
    free(want);
    ck_assert_int_eq(torc_backward(torc_sum(y, TORC_ALL_DIMS, false), NULL, false), TORC_OK);
    ck_assert_int_eq(torc_backward(torc_sum(y2, TORC_ALL_DIMS, false), NULL, false), TORC_OK);
    want = tu_values(torc_grad(w2));
    tu_assert_values(torc_grad(w), want, 6, 0);
    free(want);
    assert_never_sent_newer("abiold");
    torc_scope_pop();
    torc_set_default_device(NULL);
}
END_TEST

// floor_divide, remainder and fmod appeared in ABI 2.3: the 2.0 plugin never sees them; the
// reference runs them on its memory.
START_TEST(backend_of_2_0_is_never_sent_the_division_ops) {
    torc_device *d = abi_device("abiold");
    ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    torc_scope_push();
    torc_tensor *x = torc_tensor_from((const float[]){5, -5, 7.5f}, TORC_SHAPE(3), TORC_DTYPE_F32);
    torc_tensor *y = torc_tensor_from((const float[]){3, 3, -2}, TORC_SHAPE(3), TORC_DTYPE_F32);
    torc_tensor *q = torc_floor_divide(x, y), *r = torc_remainder(x, y), *f = torc_fmod(x, y);
    ck_assert_msg(q && r && f, "%s", torc_last_error());
    assert_never_sent_newer("abiold");
    ck_assert_ptr_eq(torc_get_device(q), d);
    tu_assert_values(q, TU_ARR(1, -2, -4), 0);
    tu_assert_values(r, TU_ARR(2, 1, -0.5), 0);
    tu_assert_values(f, TU_ARR(2, -2, 1.5), 0);
    torc_scope_pop();
    torc_set_default_device(NULL);
}
END_TEST

// max_dim appeared in ABI 2.1: the 2.0 plugin never sees it; the reference runs it on its memory.
START_TEST(backend_of_2_0_is_never_sent_max_dim) {
    torc_device *d = abi_device("abiold");
    ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    torc_tensor *x = torc_tensor_from((const float[]){1, 7, 3, 7}, TORC_SHAPE(2, 2), TORC_DTYPE_F32), *v, *i;
    ck_assert_msg(x != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_max_dim(x, 1, false, &v, &i), TORC_OK);
    assert_never_sent_newer("abiold");
    ck_assert_ptr_eq(torc_get_device(v), d);
    tu_assert_values(v, TU_ARR(7, 7), 0);
    tu_assert_values(i, TU_ARR(1, 1), 0);
    torc_release(x), torc_release(v), torc_release(i);
    torc_set_default_device(NULL);
}
END_TEST

// q, k, v (B 1, H 2, L 3 / S 4, E 4 / Ev 2) as f32 tensors on dev, requiring grad.
static void attention_inputs(torc_device *dev, torc_tensor **qkv) {
    torc_generator *g = torc_generator_new(3);
    qkv[0] = torc_to_device(torc_randn(TORC_SHAPE(1, 2, 3, 4), TORC_DTYPE_F32, g), dev);
    qkv[1] = torc_to_device(torc_randn(TORC_SHAPE(1, 2, 4, 4), TORC_DTYPE_F32, g), dev);
    qkv[2] = torc_to_device(torc_randn(TORC_SHAPE(1, 2, 4, 2), TORC_DTYPE_F32, g), dev);
    torc_generator_free(g);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(qkv[i] != NULL, "%s", torc_last_error());
        ck_assert_int_eq(torc_set_requires_grad(qkv[i], true), TORC_OK);
    }
}

// causal attention of the inputs above (k seen transposed: not contiguous), its output and the gradients of
// sum(o * o) into got[0..3], all on the host; the fused ops dispatched counted by op tracing.
static void attention_on(torc_device *dev, double got[4][32], uint64_t *fwd, uint64_t *bwd) {
    torc_scope_push();
    torc_tensor *x[3];
    attention_inputs(dev, x);
    torc_op_trace_start();
    torc_tensor *o = torc_scaled_dot_product_attention(x[0], torc_transpose(x[1], 2, 3), x[2],
                                                       NULL, 0.0, true, NAN, false, NULL);
    ck_assert_msg(o != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_backward(torc_sum(torc_mul(o, o), TORC_ALL_DIMS, false), NULL, false), TORC_OK);
    torc_op_trace_stop();
    *fwd = torc_op_trace_count(TORC_OP_ATTENTION, -1, -1, -1);
    *bwd = torc_op_trace_count(TORC_OP_ATTENTION_BACKWARD, -1, -1, -1);
    torc_tensor *r[4] = {o, torc_grad(x[0]), torc_grad(x[1]), torc_grad(x[2])};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_le(torc_numel(r[i]), 32);
        double *v = tu_values(r[i]);
        memcpy(got[i], v, sizeof(double) * (size_t)torc_numel(r[i]));
        free(v);
    }
    torc_scope_pop();
}

static void assert_same_attention(double a[4][32], double b[4][32]) {
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 32; j++) ck_assert_msg(fabs(a[i][j] - b[i][j]) <= 1e-5, "result %d [%d]: %.9g, expected %.9g",
                                                   i, j, a[i][j], b[i][j]);
}

// ATTENTION appeared in ABI 2.4: the 2.0 plugin, on host memory, is never sent it, and neither is
// the reference on its behalf (the host fallback): scaled_dot_product_attention composes it of
// matmul and softmax there, with the fused op's values and gradients.
START_TEST(backend_of_2_0_is_never_sent_attention) {
    torc_device *d = abi_device("abiold"), *ref = torc_device_get("reference");
    static double want[4][32], got[4][32];
    uint64_t fwd, bwd;
    attention_on(ref, want, &fwd, &bwd);
    ck_assert_uint_eq(fwd, 1);
    ck_assert_uint_eq(bwd, 1);
    attention_on(d, got, &fwd, &bwd);
    ck_assert_uint_eq(fwd, 0);
    ck_assert_uint_eq(bwd, 0);
    assert_never_sent_newer("abiold");
    assert_same_attention(got, want);
}
END_TEST

// A plugin that takes ATTENTION on dense operands only and not ATTENTION_BACKWARD (abifuture): the
// core asks again with a contiguous copy of the strided k, and composes the backward from the
// saved lse, with the reference's values and gradients.
START_TEST(backend_taking_the_forward_only_gets_the_composed_backward) {
    torc_device *d = abi_device("abifuture"), *ref = torc_device_get("reference");
    static double want[4][32], got[4][32];
    uint64_t fwd, bwd;
    attention_on(ref, want, &fwd, &bwd);
    int runs0, runs1, too_new;
    stats_of("abifuture", &runs0, &too_new);
    attention_on(d, got, &fwd, &bwd);
    stats_of("abifuture", &runs1, &too_new);
    ck_assert_uint_eq(fwd, 1);
    ck_assert_uint_eq(bwd, 0);
    ck_assert_int_ge(runs1 - runs0, 1);
    assert_never_sent_newer("abifuture");
    assert_same_attention(got, want);
}
END_TEST

START_TEST(backend_claiming_a_newer_minor_loads_and_runs) {
    torc_device *d = abi_device("abifuture");
    ck_assert_uint_eq(torc_device_backend_abi(d), (uint32_t)(TORC_BACKEND_ABI_MAJOR << 16 | 99));
    add_on(d, "abifuture");  // its unknown members are never called (one would abort)
    assert_never_sent_newer("abifuture");
}
END_TEST

START_TEST(backend_of_a_newer_major_is_refused_naming_both_versions) {
    setenv("TORC_PLUGIN_PATH", getenv("TORC_TEST_PLUGIN_DIR"), 1);
    ck_assert_ptr_null(torc_device_get("badmajor"));
    char want[160];
    snprintf(want, sizeof want, "plugin built for backend ABI 99.3, but this torc speaks backend ABI %d.%d",
             TORC_BACKEND_ABI_MAJOR, TORC_BACKEND_ABI_MINOR);
    tu_assert_error(TORC_ERR_BACKEND, want);
}
END_TEST

START_TEST(optimizer_built_against_the_frozen_2_0_headers_loads_and_steps) {
    use_abi_plugins();
    torc_tensor *p = torc_full(1, (int64_t[]){3}, 1.0, TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_requires_grad(p, true), TORC_OK);
    torc_tensor *loss = torc_sum(p, 0, NULL, false);
    ck_assert_int_eq(torc_backward(loss, NULL, false), TORC_OK);  // grad = 1
    torc_optimizer *opt = torc_optimizer_new("abisgd", 1, &p, "lr=0.25");
    ck_assert_msg(opt != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_optimizer_step(opt), TORC_OK);
    tu_assert_values(p, TU_ARR(0.75, 0.75, 0.75), 0);
    torc_optimizer_free(opt);
    torc_release(loss), torc_release(p);
}
END_TEST

START_TEST(backend_options_reach_init) {
    use_abi_plugins();
    ck_assert_int_eq(torc_backend_load("abiold", (const char *const[]){"colour=blue", NULL}), TORC_ERR_BACKEND);
    ck_assert_ptr_nonnull(strstr(torc_last_error(), "init failed: abi test backend: unknown option 'colour=blue'"));
    ck_assert_int_eq(torc_backend_load("abiold", NULL), TORC_OK);
    ck_assert_int_eq(torc_backend_load("abiold", NULL), TORC_ERR_INVALID_ARG);  // already loaded
    tu_assert_error(TORC_ERR_INVALID_ARG, "backend 'abiold' is already loaded");
}
END_TEST

START_TEST(memory_stats_of_any_backend) {
    torc_device *d = torc_device_get("reference");
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    uint64_t a0, r0, p0;
    ck_assert_int_eq(torc_device_memory_stats(d, &a0, &r0, &p0), TORC_OK);
    torc_tensor *t = torc_zeros(1, (int64_t[]){1000}, TORC_DTYPE_F64);
    uint64_t a1, r1, p1;
    ck_assert_int_eq(torc_device_memory_stats(d, &a1, &r1, &p1), TORC_OK);
    ck_assert_uint_eq(a1 - a0, 8000);  // no allocator statistics of its own: torc's live bytes
    ck_assert_uint_ge(r1, a1);
    ck_assert_uint_ge(p1, a1);
    torc_release(t);
    torc_set_default_device(NULL);
    ck_assert_int_eq(torc_device_memory_stats(NULL, &a1, NULL, NULL), TORC_ERR_INVALID_ARG);
}
END_TEST

#ifdef TORC_TEST_EXTRA_ABI
// core/dispatch.c: dst = src * scale + shift, the parameters in a struct past the params union's
// 64 bytes (params.ext)
TORC_API torc_status torc_test_extra_op(torc_tensor *dst, const torc_tensor *src, double scale, double shift);

START_TEST(older_minor_backend_is_never_sent_a_newer_opcode_or_dtype) {
    torc_device *d = abi_device("abiold");
    add_on(d, "abiold");  // what it knows it runs
    ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    // a dtype of minor 2.7: fill and the cast back run on the reference, on the same memory
    torc_tensor *x = torc_full(1, (int64_t[]){4}, 2.5, TORC_DTYPE_TEST_EXTRA);
    ck_assert_msg(x != NULL, "%s", torc_last_error());
    torc_tensor *xf = torc_to_dtype(x, TORC_DTYPE_F32);
    ck_assert_msg(xf != NULL, "%s", torc_last_error());
    tu_assert_values(xf, TU_ARR(2.5, 2.5, 2.5, 2.5), 0);
    // an opcode of minor 2.7 on f32, which the plugin would otherwise take; the reference runs
    // it, reading its shift from byte 80 of params.ext's struct
    ck_assert_uint_gt(offsetof(torc_test_extra_params, shift), sizeof(torc_op_params));
    torc_tensor *y = torc_zeros(1, (int64_t[]){4}, TORC_DTYPE_F32);
    ck_assert_int_eq(torc_test_extra_op(y, xf, 2.0, 0.25), TORC_OK);
    tu_assert_values(y, TU_ARR(5.25, 5.25, 5.25, 5.25), 0);
    assert_never_sent_newer("abiold");
    torc_release(x), torc_release(xf), torc_release(y);
    torc_set_default_device(NULL);
}
END_TEST

START_TEST(device_backend_of_an_older_minor_refuses_newer_ops_clearly) {
    torc_device *d = abi_device("abiolddev");
    ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    ck_assert_ptr_null(torc_full(1, (int64_t[]){4}, 2.5, TORC_DTYPE_TEST_EXTRA));
    tu_assert_error(TORC_ERR_NOT_SUPPORTED, "backend 'abiolddev' cannot run op 'fill' for dtype test_extra and has no "
                                            "fallback (the plugin (backend ABI 2.0) predates dtype test_extra, added "
                                            "in ABI 2.7)");
    torc_tensor *a = torc_zeros(1, (int64_t[]){4}, TORC_DTYPE_F32), *b = torc_zeros(1, (int64_t[]){4}, TORC_DTYPE_F32);
    ck_assert_msg(a && b, "%s", torc_last_error());
    ck_assert_int_eq(torc_test_extra_op(b, a, 1.0, 0.0), TORC_ERR_NOT_SUPPORTED);
    tu_assert_error(TORC_ERR_NOT_SUPPORTED, "predates op 'test_extra', added in ABI 2.7");
    assert_never_sent_newer("abiolddev");
    torc_release(a), torc_release(b);
    torc_set_default_device(NULL);
}
END_TEST
#endif

// The public single-op API goes through the same gate: a 2.0 plugin is not sent a 2.1 opcode.
START_TEST(single_op_api_keeps_the_minor_gate) {
    torc_device *d = abi_device("abiold");
    torc_scope_push();
    torc_tensor *x = torc_to_device(torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32), d);
    torc_tensor *v = torc_to_device(torc_zeros(TORC_SHAPE(2, 1), TORC_DTYPE_F32), d);
    torc_tensor *i = torc_to_device(torc_zeros(TORC_SHAPE(2, 1), TORC_DTYPE_I64), d);
    ck_assert_msg(x && v && i, "%s", torc_last_error());
    torc_op_call call = {.code = TORC_OP_MAX_DIM, .n_in = 1, .n_out = 2, .in = {x}, .out = {v, i}};
    call.params.dim.dim = 1;
    ck_assert_int_eq(torc_op_supported(d, &call), TORC_ERR_NOT_SUPPORTED);
    tu_assert_error(TORC_ERR_NOT_SUPPORTED, "the plugin (backend ABI 2.0) predates op 'max_dim', added in ABI 2.1");
    ck_assert_int_eq(torc_run_op(d, &call, TORC_RUN_NATIVE), TORC_ERR_NOT_SUPPORTED);
    assert_never_sent_newer("abiold");
    torc_scope_pop();
}
END_TEST

// The list ops of 2.6 (ADAM_STEP_LIST, NORM_LIST) never reach a 2.0 plugin: on host memory the
// reference runs them, on device memory the elements it predates are refused before anything is
// written (the adam plugins then compose the step).
START_TEST(backend_of_2_0_is_never_sent_the_list_ops) {
    torc_device *d = abi_device("abiold");
    ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    torc_scope_push();
    torc_no_grad_begin();
    torc_tensor *p[3], *g[3], *m[3], *v[3];
    for (int i = 0; i < 3; i++) {
        p[i] = torc_ones(TORC_SHAPE(4, 5), TORC_DTYPE_F32), g[i] = torc_full(2, (int64_t[]){4, 5}, 0.5, TORC_DTYPE_F32);
        m[i] = torc_zeros(TORC_SHAPE(4, 5), TORC_DTYPE_F32), v[i] = torc_zeros(TORC_SHAPE(4, 5), TORC_DTYPE_F32);
        ck_assert_msg(p[i] && g[i] && m[i] && v[i], "%s", torc_last_error());
    }
    const int64_t steps[3] = {1, 1, 1};
    ck_assert_msg(torc_adam_step_list_(3, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 0) == TORC_OK, "%s",
                  torc_last_error());
    tu_assert_values(torc_narrow(torc_reshape(p[2], TORC_SHAPE(20)), 0, 0, 2), TU_ARR(0.9, 0.9), 1e-6);
    torc_tensor *total = torc_get_total_norm(3, g, 2.0, false);
    ck_assert_msg(total != NULL, "%s", torc_last_error());
    tu_assert_values(total, TU_ARR(sqrt(60 * 0.25)), 1e-6);
    assert_never_sent_newer("abiold");
    torc_no_grad_end();
    torc_scope_pop();

    torc_device *dd = abi_device("abiolddev");
    ck_assert_int_eq(torc_set_default_device(dd), TORC_OK);
    torc_scope_push();
    torc_no_grad_begin();
    for (int i = 0; i < 3; i++) {
        p[i] = torc_ones(TORC_SHAPE(4, 5), TORC_DTYPE_F32), g[i] = torc_ones(TORC_SHAPE(4, 5), TORC_DTYPE_F32);
        m[i] = torc_zeros(TORC_SHAPE(4, 5), TORC_DTYPE_F32), v[i] = torc_zeros(TORC_SHAPE(4, 5), TORC_DTYPE_F32);
        ck_assert_msg(p[i] && g[i] && m[i] && v[i], "%s", torc_last_error());
    }
    ck_assert_int_eq(torc_adam_step_list_(3, p, g, m, v, NULL, steps, 0.1, 0.9, 0.999, 1e-8, 0, 0),
                     TORC_ERR_NOT_SUPPORTED);
    tu_assert_error(TORC_ERR_NOT_SUPPORTED, "predates op 'adam_step', added in ABI 2.1");
    tu_assert_values(torc_to_device(torc_narrow(torc_reshape(p[0], TORC_SHAPE(20)), 0, 0, 2), torc_device_get("reference")),
                     TU_ARR(1, 1), 0);
    assert_never_sent_newer("abiolddev");
    torc_no_grad_end();
    torc_scope_pop();
    torc_set_default_device(NULL);
}
END_TEST

START_TEST(shutdown_reaches_every_backend) {
    abi_device("abiold");
    torc_shutdown();  // each loaded backend's shutdown(ctx), once; the atexit handler is then a no-op
    torc_shutdown();
}
END_TEST

int main(void) {
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("abi");
    tcase_add_test(tc, backend_built_against_the_frozen_2_0_headers_loads_and_runs);
    tcase_add_test(tc, backend_of_2_0_is_never_sent_max_dim);
    tcase_add_test(tc, older_minor_backend_is_never_sent_layer_norm);
    tcase_add_test(tc, older_minor_backend_gets_autocast_matmuls_as_casts);
    tcase_add_test(tc, backend_claiming_a_newer_minor_loads_and_runs);
    tcase_add_test(tc, backend_of_2_0_is_never_sent_attention);
    tcase_add_test(tc, backend_taking_the_forward_only_gets_the_composed_backward);
    tcase_add_test(tc, single_op_api_keeps_the_minor_gate);
    tcase_add_test(tc, backend_of_2_0_is_never_sent_the_division_ops);
    tcase_add_test(tc, backend_of_a_newer_major_is_refused_naming_both_versions);
    tcase_add_test(tc, optimizer_built_against_the_frozen_2_0_headers_loads_and_steps);
    tcase_add_test(tc, backend_options_reach_init);
    tcase_add_test(tc, memory_stats_of_any_backend);
    tcase_add_test(tc, backend_of_2_0_is_never_sent_the_list_ops);
    tcase_add_test(tc, shutdown_reaches_every_backend);
#ifdef TORC_TEST_EXTRA_ABI
    tcase_add_test(tc, older_minor_backend_is_never_sent_a_newer_opcode_or_dtype);
    tcase_add_test(tc, device_backend_of_an_older_minor_refuses_newer_ops_clearly);
#endif
    suite_add_tcase(s, tc);
    return tu_run(s);
}
