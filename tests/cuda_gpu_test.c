// tests/cuda_gpu_test.c — the CUDA backend on a real device: every op family x dtype x layout of
// tests/cuda_cases.h against the reference backend, RNG equality, copies (sync and async through
// pinned staging), events, device info, allocator stress and OOM recovery, kernel-reported index
// errors, and the performance figures of the issue (printed). Without a device: exit 77 (skip).
#include <check.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_cases.h"

static const torc_backend_vtable *cu, *ref;
static void *cu_lib, *ref_lib;

static const torc_backend_vtable *load(const char *name, void **lib, char *why, size_t n) {
    const char *dir = getenv("TORC_BUILD_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/lib/torc/libtorc_%s.so", dir ? dir : ".", name);
    // NODELETE: the CUDA plugin pulls in libstdc++ (cudart, cuBLAS); unloading it at dlclose
    // would strand libstdc++'s emergency exception pool, which LeakSanitizer then reports.
    *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!*lib) {
        snprintf(why, n, "%s", dlerror());
        return NULL;
    }
    torc_backend_entry_fn entry = (torc_backend_entry_fn)dlsym(*lib, TORC_BACKEND_ENTRY_SYMBOL);
    const torc_backend_vtable *v = entry ? entry(TORC_BACKEND_ABI_VERSION) : NULL;
    if (!v) {
        snprintf(why, n, "%.400s: no usable %s", path, TORC_BACKEND_ENTRY_SYMBOL);
        return NULL;
    }
    if (v->init() != TORC_OK) {
        snprintf(why, n, "%s", v->last_error());
        return NULL;
    }
    return v;
}

// ---- moving test views to the device and back ----
static size_t tv_bytes(const tview *t) { return (size_t)t->n * (size_t)tcu_dtype_size(t->dt); }

static void *upload(const tview *t) {
    void *d = cu->alloc(0, tv_bytes(t));
    ck_assert_msg(d != NULL, "alloc: %s", cu->last_error());
    ck_assert_int_eq(cu->copy(0, d, t->mem, tv_bytes(t), TORC_COPY_HOST_TO_DEVICE, false), TORC_OK);
    return d;
}

// The same view over device memory d (whose storage mirrors t->mem).
static void *on_device(const tview *t, const void *host_data, void *d) {
    return (char *)d + ((const char *)host_data - t->mem);
}

static bool check_device(torc_op *op, tview *const *ins, tview *out, double rscale) {
    const bool ours = cu->supports(0, op), theirs = ref->supports(0, op);
    if (ours != theirs) {
        fprintf(stderr, "%s: supports() differs: cuda %d, reference %d\n", g_case, ours, theirs);
        return false;
    }
    if (!ours) return true;
    tview want = tv_clone(out);
    torc_op rop = *op;
    rop.out.data = want.op.data;
    float want_amax = -1, got_amax = -2;
    const bool smm = op->code == TORC_OP_SCALED_MM, amax = smm && op->params.scaled_mm.amax_out;
    if (amax) rop.params.scaled_mm.amax_out = &want_amax;
    const int rs = ref->run(0, &rop);
    torc_op dop = *op;
    void *dscale = NULL, *damax = NULL;  // SCALED_MM's params pointers, on the device
    if (smm && op->params.scaled_mm.scale_out) {
        dscale = upload(ins[4]);
        dop.params.scaled_mm.scale_out = dscale;
    }
    if (amax) {
        damax = cu->alloc(0, sizeof(float));
        dop.params.scaled_mm.amax_out = damax;
    }
    void *din[TORC_OP_MAX_INPUTS] = {0};
    for (int k = 0; k < op->n_in; k++) {
        din[k] = upload(ins[k]);
        dop.in[k].data = on_device(ins[k], op->in[k].data, din[k]);
    }
    void *dout = upload(out);
    dop.out.data = on_device(out, op->out.data, dout);
    int cs = cu->run(0, &dop);
    if (cs == TORC_OK) cs = cu->synchronize(0);  // kernel-reported errors surface here
    bool ok = true;
    if (cs != rs) {
        fprintf(stderr, "%s: status cuda %d (%s), reference %d (%s)\n", g_case, cs, cs ? cu->last_error() : "", rs,
                rs ? ref->last_error() : "");
        ok = false;
    } else if (cs == TORC_OK) {
        tview got = tv_clone(out);
        ck_assert_int_eq(cu->copy(0, got.mem, dout, tv_bytes(out), TORC_COPY_DEVICE_TO_HOST, false), TORC_OK);
        ok = tv_match(&got, &want, rscale);
        tv_free(&got);
        if (amax) {
            ck_assert_int_eq(cu->copy(0, &got_amax, damax, sizeof got_amax, TORC_COPY_DEVICE_TO_HOST, false), TORC_OK);
            if (!(isnan(want_amax) ? isnan(got_amax) : fabsf(got_amax - want_amax) <= 1e-5f * fabsf(want_amax) + 1e-6f)) {
                fprintf(stderr, "%s: amax %g, reference %g\n", g_case, got_amax, want_amax);
                ok = false;
            }
        }
    }
    cu->free(0, dscale);
    cu->free(0, damax);
    for (int k = 0; k < op->n_in; k++) cu->free(0, din[k]);
    cu->free(0, dout);
    tv_free(&want);
    return ok;
}

// ---- every op against the reference ----
START_TEST(unary_ops_match_reference) { ck_assert_int_eq(cases_unary(check_device), 0); }
END_TEST
START_TEST(binary_ops_match_reference) { ck_assert_int_eq(cases_binary(check_device), 0); }
END_TEST
START_TEST(where_copy_fill_match_reference) { ck_assert_int_eq(cases_where_copy_fill(check_device), 0); }
END_TEST
START_TEST(fused_ops_match_reference) { ck_assert_int_eq(cases_fused(check_device), 0); }
END_TEST
START_TEST(ranges_and_rng_match_reference) { ck_assert_int_eq(cases_ranges_rng(check_device), 0); }
END_TEST
START_TEST(reductions_match_reference) { ck_assert_int_eq(cases_reductions(check_device), 0); }
END_TEST
START_TEST(softmax_matches_reference) { ck_assert_int_eq(cases_softmax(check_device), 0); }
END_TEST
START_TEST(matmul_matches_reference) { ck_assert_int_eq(cases_matmul(check_device), 0); }
END_TEST
START_TEST(index_ops_match_reference) { ck_assert_int_eq(cases_index(check_device), 0); }
END_TEST
START_TEST(scaled_mm_matches_reference) {
    torc_device_info info;
    cu->device_info(0, &info);
    if (strstr(info.peak_source, "sm_80") || strstr(info.peak_source, "sm_86") || strstr(info.peak_source, "sm_87")) {
        // below sm_89 fp8 matmuls are refused with a clear error (as PyTorch's _scaled_mm)
        const int64_t s2[2] = {16, 16}, one[1] = {1};
        void *m = cu->alloc(0, 1024), *sc = cu->alloc(0, 4);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_SCALED_MM;
        op.n_in = 4;
        op.in[0] = op.in[1] = (torc_operand){m, TORC_DTYPE_F8_E4M3FN, 2, {s2[0], s2[1]}, {16, 1}};
        op.in[2] = op.in[3] = (torc_operand){sc, TORC_DTYPE_F32, 1, {one[0]}, {1}};
        op.out = (torc_operand){m, TORC_DTYPE_F8_E4M3FN, 2, {16, 16}, {16, 1}};
        ck_assert_int_eq(cu->run(0, &op), TORC_ERR_NOT_SUPPORTED);
        ck_assert_ptr_nonnull(strstr(cu->last_error(), "compute capability 8.9"));
        cu->free(0, m);
        cu->free(0, sc);
        return;
    }
    ck_assert_int_eq(cases_scaled_mm(check_device), 0);
}
END_TEST

// Large tensors: the vector path, 64-bit-sized reductions and RNG draws far into the stream.
START_TEST(large_tensors_match_reference) {
    int failures = 0;
    const int64_t n[1] = {(INT64_C(1) << 22) + 3};
    tview a = tv_new(TORC_DTYPE_BF16, 1, n, L_CONTIG, -2, 2), b = tv_new(TORC_DTYPE_BF16, 1, n, L_CONTIG, -2, 2);
    tview out = tv_new(TORC_DTYPE_BF16, 1, n, L_CONTIG, 0, 0);
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_ADD;
    op.n_in = 2;
    op.in[0] = a.op;
    op.in[1] = b.op;
    op.out = out.op;
    op.params.scalar.value = 1;
    snprintf(g_case, sizeof g_case, "large bf16 add");
    failures += !check_device(&op, (tview *[]){&a, &b}, &out, 1.0);
    tview s = tv_new(TORC_DTYPE_F32, 1, (int64_t[]){1}, L_CONTIG, 0, 0);
    tview af = tv_new(TORC_DTYPE_F32, 1, n, L_CONTIG, -1, 1);
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_SUM;
    op.n_in = 1;
    op.in[0] = af.op;
    op.out = s.op;
    op.params.reduce.mask = 1;
    snprintf(g_case, sizeof g_case, "large f32 sum");
    failures += !check_device(&op, (tview *[]){&af}, &s, 50.0);
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_RAND_NORMAL;
    op.out = af.op;
    op.params.rng.seed = 2024;
    op.params.rng.offset = (UINT64_C(1) << 40) + 5;
    op.params.rng.a = 1;
    op.params.rng.b = 2;
    snprintf(g_case, sizeof g_case, "large randn");
    failures += !check_device(&op, NULL, &af, 1e-3);
    tv_free(&a);
    tv_free(&b);
    tv_free(&out);
    tv_free(&s);
    tv_free(&af);
    ck_assert_int_eq(failures, 0);
}
END_TEST

// ---- devices, copies, events ----
START_TEST(device_info_describes_the_gpu) {
    ck_assert_int_gt(cu->device_count(), 0);
    torc_device_info info;
    ck_assert_int_eq(cu->device_info(0, &info), TORC_OK);
    ck_assert(!info.host_memory);
    ck_assert_int_gt(strlen(info.name), 0);
    ck_assert_uint_gt(info.total_memory, 0);
    ck_assert_ptr_nonnull(strstr(info.peak_source, " SMs"));
    printf("device 0: %s, %.1f GiB; %s\n", info.name, (double)info.total_memory / (1 << 30), info.peak_source);
    ck_assert_int_eq(cu->device_info(cu->device_count(), &info), TORC_ERR_INVALID_ARG);
}
END_TEST

START_TEST(copies_sync_and_async_round_trip) {
    enum { N = 3 << 20 };
    unsigned char *h = malloc(N), *back = malloc(N);
    for (int i = 0; i < N; i++) h[i] = (unsigned char)(i * 7 + 1);
    void *d = cu->alloc(0, N), *d2 = cu->alloc(0, N);
    ck_assert_ptr_nonnull(d);
    // async from pageable memory: staged through pinned memory, so h may change right after
    ck_assert_int_eq(cu->copy(0, d, h, N, TORC_COPY_HOST_TO_DEVICE, true), TORC_OK);
    memset(h, 0, N);
    ck_assert_int_eq(cu->copy(0, d2, d, N, TORC_COPY_DEVICE_TO_DEVICE, true), TORC_OK);
    memset(back, 0xAB, N);
    ck_assert_int_eq(cu->copy(0, back, d2, N, TORC_COPY_DEVICE_TO_HOST, true), TORC_OK);
    ck_assert_int_eq(cu->synchronize(0), TORC_OK);  // the async device-to-host copy lands by now
    for (int i = 0; i < N; i++) ck_assert_uint_eq(back[i], (unsigned char)(i * 7 + 1));
    // many small async round trips reuse the staging blocks only after their copies completed
    for (int r = 0; r < 200; r++) {
        int v[64];
        for (int i = 0; i < 64; i++) v[i] = r * 1000 + i;
        ck_assert_int_eq(cu->copy(0, (char *)d + r * 256, v, sizeof v, TORC_COPY_HOST_TO_DEVICE, true), TORC_OK);
    }
    int all[200 * 64];
    ck_assert_int_eq(cu->copy(0, all, d, sizeof all, TORC_COPY_DEVICE_TO_HOST, false), TORC_OK);
    for (int r = 0; r < 200; r++)
        for (int i = 0; i < 64; i++) ck_assert_int_eq(all[r * 64 + i], r * 1000 + i);
    cu->free(0, d);
    cu->free(0, d2);
    free(h);
    free(back);
}
END_TEST

START_TEST(events_time_device_work) {
    void *e0 = cu->event_create(0), *e1 = cu->event_create(0);
    ck_assert_ptr_nonnull(e0);
    const int64_t n[1] = {1 << 24};
    void *d = cu->alloc(0, (size_t)n[0] * 4);
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_FILL;
    op.out.data = d;
    op.out.dtype = TORC_DTYPE_F32;
    op.out.ndim = 1;
    op.out.shape[0] = n[0];
    op.out.stride[0] = 1;
    op.params.scalar.value = 3.0;
    ck_assert_int_eq(cu->event_record(0, e0), TORC_OK);
    for (int i = 0; i < 10; i++) ck_assert_int_eq(cu->run(0, &op), TORC_OK);
    ck_assert_int_eq(cu->event_record(0, e1), TORC_OK);
    float ms = -1;
    ck_assert_int_eq(cu->event_elapsed_ms(e0, e1, &ms), TORC_OK);
    ck_assert(ms > 0.0f);
    cu->event_destroy(e0);
    cu->event_destroy(e1);
    cu->free(0, d);
}
END_TEST

// ---- the caching allocator on the device ----
START_TEST(allocator_stress_and_oom_recovery) {
    enum { N = 256 };
    void *p[N] = {0};
    uint64_t seed = 12345;
    uint64_t a0, r0, pk0;
    ck_assert_int_eq(cu->memory_stats(0, &a0, &r0, &pk0), TORC_OK);
    for (int it = 0; it < 5000; it++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const int i = (int)((seed >> 33) % N);
        if (p[i]) {
            cu->free(0, p[i]);
            p[i] = NULL;
        } else {
            const size_t sz = (seed & 7) == 0 ? (size_t)(seed >> 40) % (48 << 20) + 1 : (size_t)(seed >> 40) % 300000 + 1;
            p[i] = cu->alloc(0, sz);
            ck_assert_msg(p[i] != NULL, "alloc %zu: %s", sz, cu->last_error());
            ck_assert_int_eq(cu->copy(0, p[i], &i, sz < sizeof i ? sz : sizeof i, TORC_COPY_HOST_TO_DEVICE, true), TORC_OK);
        }
    }
    for (int i = 0; i < N; i++) cu->free(0, p[i]);
    uint64_t a, r, pk;
    ck_assert_int_eq(cu->memory_stats(0, &a, &r, &pk), TORC_OK);
    ck_assert_uint_eq(a, a0);
    ck_assert_uint_ge(pk, r);
    ck_assert_int_eq(cu->empty_cache(0), TORC_OK);
    ck_assert_int_eq(cu->memory_stats(0, &a, &r, &pk), TORC_OK);
    ck_assert_uint_le(r, r0);
    // more than the device has: a clean error, and the device keeps working
    torc_device_info info;
    cu->device_info(0, &info);
    ck_assert_ptr_null(cu->alloc(0, (size_t)info.total_memory * 2));
    ck_assert_ptr_nonnull(strstr(cu->last_error(), "CUDA out of memory"));
    void *ok = cu->alloc(0, 1 << 20);
    ck_assert_ptr_nonnull(ok);
    cu->free(0, ok);
}
END_TEST

START_TEST(kernel_index_errors_surface_at_synchronize) {
    const int64_t shape[1] = {8}, idx_host[2] = {3, 42};
    void *src = cu->alloc(0, 8 * 4), *idx = cu->alloc(0, sizeof idx_host), *out = cu->alloc(0, 2 * 4);
    ck_assert_int_eq(cu->copy(0, idx, idx_host, sizeof idx_host, TORC_COPY_HOST_TO_DEVICE, false), TORC_OK);
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_INDEX_SELECT;
    op.n_in = 2;
    op.in[0] = (torc_operand){src, TORC_DTYPE_F32, 1, {shape[0]}, {1}};
    op.in[1] = (torc_operand){idx, TORC_DTYPE_I64, 1, {2}, {1}};
    op.out = (torc_operand){out, TORC_DTYPE_F32, 1, {2}, {1}};
    op.params.dim.dim = 0;
    ck_assert_int_eq(cu->run(0, &op), TORC_OK);  // launched; the kernel finds 42 out of range
    ck_assert_int_eq(cu->synchronize(0), TORC_ERR_INDEX);
    ck_assert_ptr_nonnull(strstr(cu->last_error(), "index out of range"));
    ck_assert_int_eq(cu->synchronize(0), TORC_OK);  // reported once; the device is fine
    cu->free(0, src);
    cu->free(0, idx);
    cu->free(0, out);
}
END_TEST

// ---- the performance targets (printed, not asserted: they depend on the machine) ----
static double time_ms(torc_op *op, int reps) {
    void *e0 = cu->event_create(0), *e1 = cu->event_create(0);
    for (int i = 0; i < 3; i++) cu->run(0, op);  // warm-up
    cu->synchronize(0);
    cu->event_record(0, e0);
    for (int i = 0; i < reps; i++) cu->run(0, op);
    cu->event_record(0, e1);
    float ms = 0;
    cu->event_elapsed_ms(e0, e1, &ms);
    cu->event_destroy(e0);
    cu->event_destroy(e1);
    return ms / reps;
}

START_TEST(performance_figures) {
    torc_device_info info;
    cu->device_info(0, &info);
    const int64_t big = 8192;
    if (info.total_memory > ((uint64_t)8 << 30)) {
        const size_t mb = (size_t)(big * big) * 2;
        void *a = cu->alloc(0, mb), *b = cu->alloc(0, mb), *c = cu->alloc(0, mb);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_FILL;
        op.params.scalar.value = 0.5;
        op.out = (torc_operand){a, TORC_DTYPE_BF16, 2, {big, big}, {big, 1}};
        cu->run(0, &op);
        op.out.data = b;
        cu->run(0, &op);
        op.code = TORC_OP_MATMUL;
        op.n_in = 2;
        op.in[0] = (torc_operand){a, TORC_DTYPE_BF16, 2, {big, big}, {big, 1}};
        op.in[1] = (torc_operand){b, TORC_DTYPE_BF16, 2, {big, big}, {big, 1}};
        op.out = (torc_operand){c, TORC_DTYPE_BF16, 2, {big, big}, {big, 1}};
        const double ms = time_ms(&op, 10);
        const double tf = 2.0 * big * big * big / (ms * 1e-3) / 1e12;
        const double peak = info.peak_flops[TORC_DTYPE_BF16] / 1e12;
        printf("perf: bf16 matmul 8192^3: %.3f ms, %.0f TFLOP/s (%.2f of the promised %.0f; target >= 0.7)\n", ms, tf,
               peak > 0 ? tf / peak : 0.0, peak);
        cu->free(0, a);
        cu->free(0, b);
        cu->free(0, c);
    }
    const int64_t n = INT64_C(1) << 28;
    if (info.total_memory > ((uint64_t)6 << 30)) {
        void *x = cu->alloc(0, (size_t)n * 4), *y = cu->alloc(0, (size_t)n * 4), *z = cu->alloc(0, (size_t)n * 4);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_ADD;
        op.n_in = 2;
        op.params.scalar.value = 1;
        op.in[0] = (torc_operand){x, TORC_DTYPE_F32, 1, {n}, {1}};
        op.in[1] = (torc_operand){y, TORC_DTYPE_F32, 1, {n}, {1}};
        op.out = (torc_operand){z, TORC_DTYPE_F32, 1, {n}, {1}};
        const double ms = time_ms(&op, 10);
        printf("perf: f32 add of 2^28 elements: %.3f ms, %.0f GB/s moved\n", ms, 3.0 * 4 * (double)n / (ms * 1e-3) / 1e9);
        cu->free(0, x);
        cu->free(0, y);
        cu->free(0, z);
    }
    // launch overhead: host time per tiny op, asynchronous
    void *t = cu->alloc(0, 256);
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_ADD;
    op.n_in = 2;
    op.params.scalar.value = 1;
    op.in[0] = op.in[1] = op.out = (torc_operand){t, TORC_DTYPE_F32, 1, {64}, {1}};
    for (int i = 0; i < 100; i++) cu->run(0, &op);
    cu->synchronize(0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 10000; i++) cu->run(0, &op);
    cu->synchronize(0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / 10000;
    printf("perf: per-op launch overhead %.2f us (target <= 5)\n", us);
    cu->free(0, t);
}
END_TEST

int main(void) {
    char why[512];
    cu = load("cuda", &cu_lib, why, sizeof why);
    if (!cu) {
        printf("SKIP: no CUDA device (%s)\n", why);
        if (cu_lib) dlclose(cu_lib);
        return 77;
    }
    ref = load("reference", &ref_lib, why, sizeof why);
    if (!ref) {
        fprintf(stderr, "reference backend: %s\n", why);
        return 1;
    }
    Suite *s = suite_create("cuda_gpu");
    TCase *dev = tcase_create("device");
    tcase_set_timeout(dev, 300);
    tcase_add_test(dev, device_info_describes_the_gpu);
    tcase_add_test(dev, copies_sync_and_async_round_trip);
    tcase_add_test(dev, events_time_device_work);
    tcase_add_test(dev, allocator_stress_and_oom_recovery);
    tcase_add_test(dev, kernel_index_errors_surface_at_synchronize);
    suite_add_tcase(s, dev);
    TCase *ops = tcase_create("ops_vs_reference");
    tcase_set_timeout(ops, 1200);
    tcase_add_test(ops, unary_ops_match_reference);
    tcase_add_test(ops, binary_ops_match_reference);
    tcase_add_test(ops, where_copy_fill_match_reference);
    tcase_add_test(ops, fused_ops_match_reference);
    tcase_add_test(ops, ranges_and_rng_match_reference);
    tcase_add_test(ops, reductions_match_reference);
    tcase_add_test(ops, softmax_matches_reference);
    tcase_add_test(ops, matmul_matches_reference);
    tcase_add_test(ops, index_ops_match_reference);
    tcase_add_test(ops, scaled_mm_matches_reference);
    tcase_add_test(ops, large_tensors_match_reference);
    suite_add_tcase(s, ops);
    TCase *perf = tcase_create("performance");
    tcase_set_timeout(perf, 300);
    tcase_add_test(perf, performance_figures);
    suite_add_tcase(s, perf);
    SRunner *r = srunner_create(s);
    srunner_set_fork_status(r, CK_NOFORK);  // the CUDA context lives in this process
    srunner_run_all(r, CK_NORMAL);
    const int failed = srunner_ntests_failed(r);
    srunner_free(r);
    cu->shutdown();
    ref->shutdown();
    dlclose(cu_lib);
    dlclose(ref_lib);
    return failed ? 1 : 0;
}
