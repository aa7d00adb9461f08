// tests/cuda_gpu_test.c — the CUDA backend on a real device: every op family x dtype x layout of
// tests/cuda_cases.h against the reference backend, RNG equality bit for bit, copies (sync and
// async through pinned staging), events, device info, allocator stress and OOM recovery,
// kernel-reported index errors, fp8 saturation, tensors beyond 2^31 elements, index_add's sums in
// index order bit for bit, attention against the reference and run to run, and the issue's
// performance figures printed against their targets. `--fault` and `--device1` run one check in a
// process of its own (a kernel fault; two threads first on device 1). Without a device: exit 77.
#define _POSIX_C_SOURCE 200809L  // pthread_barrier_t, clock_gettime
#include "ck.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_cases.h"
#include "attention_ops.h"
#include "device_table.h"

#include <torc/philox.h>

static const torc_backend_vtable *cu, *ref;
static void *cu_ctx, *ref_ctx;  // their contexts (init's)
static void *cu_lib, *ref_lib;

static const torc_backend_vtable *load(const char *name, void **lib, void **ctx, char *why, size_t n) {
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
    if (v->init(NULL, ctx) != TORC_OK) {
        snprintf(why, n, "%s", v->last_error(NULL));
        return NULL;
    }
    return v;
}

// ---- moving test views to the device and back ----
static size_t tv_bytes(const tview *t) { return (size_t)t->n * (size_t)torc_abi_dtype_size(t->dt); }

static void *upload(const tview *t) {
    void *d = cu->alloc(cu_ctx, 0, tv_bytes(t));
    ck_assert_msg(d != NULL, "alloc: %s", cu->last_error(cu_ctx));
    ck_assert_int_eq(cu->copy(cu_ctx, 0, d, t->mem, tv_bytes(t), TORC_COPY_HOST_TO_DEVICE, false), TORC_OK);
    return d;
}

// The same view over device memory d (whose storage mirrors t->mem).
static void *on_device(const tview *t, const void *host_data, void *d) {
    return (char *)d + ((const char *)host_data - t->mem);
}

// scale_a * scale_b * sum_k |a*b| for each element of a SCALED_MM's out (in out's storage, from
// the reference on |a| and |b|), and its largest value in *mag_amax when amax is asked for: the
// magnitudes the contract's fp8 tensor-core allowance (TORC_FP8_MMA_SUM_TOL) scales with.
static tview scaled_mm_magnitudes(const torc_op *op, tview *const *ins, const tview *out, float *mag_amax) {
    tview absv[2], mag = tv_clone(out);
    torc_op m = *op;
    for (int k = 0; k < 2; k++) {
        absv[k] = tv_clone(ins[k]);
        for (int64_t i = 0; i < absv[k].n; i++)
            tcu_store_f64(absv[k].mem, i, absv[k].dt, fabs(tcu_load_f64(absv[k].mem, i, absv[k].dt)));
        m.in[k].data = absv[k].op.data;
    }
    m.out[0].data = mag.op.data;
    if (m.n_out > 1) m.out[1].data = mag_amax;
    ck_assert_int_eq(ref->run(ref_ctx, 0, &m), TORC_OK);
    tv_free(&absv[0]);
    tv_free(&absv[1]);
    return mag;
}

static bool check_device(torc_op *op, tview *const *ins, tview *out, double rscale) {
    const bool ours = cu->supports(cu_ctx, 0, op), theirs = ref->supports(ref_ctx, 0, op);
    if (ours != theirs) {
        fprintf(stderr, "%s: supports() differs: cuda %d, reference %d\n", g_case, ours, theirs);
        return false;
    }
    if (!ours) return true;
    tview want = tv_clone(out);
    torc_op rop = *op;
    rop.out[0].data = want.op.data;
    float want_amax = -1, got_amax = -2;
    // out[1]: max_dim / min_dim's indices or scaled_mm's amax; its view follows the inputs' in ins
    const bool pair = op->code == TORC_OP_MAX_DIM || op->code == TORC_OP_MIN_DIM, amax = op->n_out > 1 && !pair;
    tview *idx = pair ? ins[op->n_in] : NULL;
    tview want_idx = {0};
    if (amax) rop.out[1].data = &want_amax;
    if (pair) want_idx = tv_clone(idx), rop.out[1].data = want_idx.op.data;
    const int rs = ref->run(ref_ctx, 0, &rop);
    torc_op dop = *op;
    void *damax = NULL;  // out[1] on the device
    if (amax) {
        damax = cu->alloc(cu_ctx, 0, sizeof(float));
        dop.out[1].data = damax;
    }
    if (pair) damax = upload(idx), dop.out[1].data = on_device(idx, op->out[1].data, damax);
    void *din[TORC_OP_MAX_INPUTS] = {0};
    for (int k = 0; k < op->n_in; k++) {
        din[k] = upload(ins[k]);
        dop.in[k].data = on_device(ins[k], op->in[k].data, din[k]);
    }
    void *dout = upload(out);
    dop.out[0].data = on_device(out, op->out[0].data, dout);
    int cs = cu->run(cu_ctx, 0, &dop);
    if (cs == TORC_OK) cs = cu->synchronize(cu_ctx, 0);  // kernel-reported errors surface here
    bool ok = true;
    if (cs != rs) {
        fprintf(stderr, "%s: status cuda %d (%s), reference %d (%s)\n", g_case, cs, cs ? cu->last_error(cu_ctx) : "", rs,
                rs ? ref->last_error(ref_ctx) : "");
        ok = false;
    } else if (cs == TORC_OK) {
        tview got = tv_clone(out);
        ck_assert_int_eq(cu->copy(cu_ctx, 0, got.mem, dout, tv_bytes(out), TORC_COPY_DEVICE_TO_HOST, false), TORC_OK);
        float mag_amax = 0;
        tview mag = op->code == TORC_OP_SCALED_MM ? scaled_mm_magnitudes(op, ins, out, &mag_amax) : (tview){0};
        ok = tv_match_mag(&got, &want, rscale, mag.mem ? &mag : NULL, TORC_FP8_MMA_SUM_TOL);
        tv_free(&got);
        tv_free(&mag);
        if (pair) {
            tview got_idx = tv_clone(idx);
            ck_assert_int_eq(cu->copy(cu_ctx, 0, got_idx.mem, damax, tv_bytes(idx), TORC_COPY_DEVICE_TO_HOST, false), TORC_OK);
            ok = tv_match(&got_idx, &want_idx, 0.0) && ok;
            tv_free(&got_idx);
        }
        if (amax) {
            ck_assert_int_eq(cu->copy(cu_ctx, 0, &got_amax, damax, sizeof got_amax, TORC_COPY_DEVICE_TO_HOST, false), TORC_OK);
            const double amax_tol = 1e-5 * fabsf(want_amax) + 1e-6 + TORC_FP8_MMA_SUM_TOL * mag_amax;
            if (!(isnan(want_amax) ? isnan(got_amax) : fabsf(got_amax - want_amax) <= amax_tol)) {
                fprintf(stderr, "%s: amax %g, reference %g\n", g_case, got_amax, want_amax);
                ok = false;
            }
        }
    }
    cu->free(cu_ctx, 0, damax);
    for (int k = 0; k < op->n_in; k++) cu->free(cu_ctx, 0, din[k]);
    cu->free(cu_ctx, 0, dout);
    tv_free(&want);
    if (pair) tv_free(&want_idx);
    return ok;
}

// ---- small helpers over the vtable (device 0 unless said) ----
static void run_ok_on(int dev, const torc_op *op) {
    const int rc = cu->run(cu_ctx, dev, op);
    ck_assert_msg(rc == TORC_OK, "run op %d: %s", op->code, cu->last_error(cu_ctx));
}
static void run_ok(const torc_op *op) { run_ok_on(0, op); }

static torc_operand vec(void *p, torc_dtype dt, int64_t n) { return (torc_operand){p, dt, 1, {n}, {1}}; }

static void fill(const torc_operand *o, double v) {
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_FILL;
    op.n_out = 1;
    op.out[0] = *o;
    op.params.scalar.value = v;
    run_ok(&op);
}

static void rand_uniform(const torc_operand *o, uint64_t seed, double lo, double hi) {
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_RAND_UNIFORM;
    op.n_out = 1;
    op.out[0] = *o;
    op.params.rng.seed = seed;
    op.params.rng.a = lo;
    op.params.rng.b = hi;
    run_ok(&op);
}

// Element i of rand_uniform(seed, lo, hi) in dtype dt, as the reference computes it.
static double rand_elem(uint64_t seed, double lo, double hi, int64_t i, torc_dtype dt) {
    char buf[8];
    tcu_store_f64(buf, 0, dt, lo + (hi - lo) * torc_philox_uniform(seed, 0, (uint64_t)i));
    return tcu_load_f64(buf, 0, dt);
}

static double round_to(double v, torc_dtype dt) {
    char buf[8];
    tcu_store_f64(buf, 0, dt, v);
    return tcu_load_f64(buf, 0, dt);
}

// Element i of a device array, read back.
static double fetch(const void *base, torc_dtype dt, int64_t i) {
    char buf[8];
    const size_t es = (size_t)torc_abi_dtype_size(dt);
    ck_assert_int_eq(cu->copy(cu_ctx, 0, buf, (const char *)base + (size_t)i * es, es, TORC_COPY_DEVICE_TO_HOST, false), TORC_OK);
    return tcu_load_f64(buf, 0, dt);
}

// The device's compute capability from device_info's "(sm_XY, N SMs)".
static int device_cc(void) {
    torc_device_info info = {.struct_size = sizeof info};  // as the core passes it: zeroed, sized
    cu->device_info(cu_ctx, 0, &info);
    const char *s = strstr(info.peak_source, "sm_");
    return s ? atoi(s + 3) : 0;
}

static void *alloc_ok(size_t n) {
    void *p = cu->alloc(cu_ctx, 0, n);
    ck_assert_msg(p != NULL, "alloc %zu: %s", n, cu->last_error(cu_ctx));
    return p;
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

START_TEST(max_dim_matches_reference) { ck_assert_int_eq(cases_max_dim(check_device), 0); }
END_TEST
START_TEST(softmax_matches_reference) { ck_assert_int_eq(cases_softmax(check_device), 0); }
END_TEST
START_TEST(matmul_matches_reference) { ck_assert_int_eq(cases_matmul(check_device), 0); }
END_TEST
START_TEST(index_ops_match_reference) { ck_assert_int_eq(cases_index(check_device), 0); }
END_TEST
START_TEST(scaled_mm_matches_reference) {
    torc_device_info info = {.struct_size = sizeof info};  // as the core passes it: zeroed, sized
    cu->device_info(cu_ctx, 0, &info);
    if (strstr(info.peak_source, "sm_80") || strstr(info.peak_source, "sm_86") || strstr(info.peak_source, "sm_87")) {
        // below sm_89 fp8 matmuls are refused with a clear error (as PyTorch's _scaled_mm)
        const int64_t s2[2] = {16, 16}, one[1] = {1};
        void *m = cu->alloc(cu_ctx, 0, 1024), *sc = cu->alloc(cu_ctx, 0, 4);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_SCALED_MM;
        op.n_out = 1;
        op.n_in = 4;
        op.in[0] = op.in[1] = (torc_operand){m, TORC_DTYPE_F8_E4M3FN, 2, {s2[0], s2[1]}, {16, 1}};
        op.in[2] = op.in[3] = (torc_operand){sc, TORC_DTYPE_F32, 1, {one[0]}, {1}};
        op.out[0] = (torc_operand){m, TORC_DTYPE_F8_E4M3FN, 2, {16, 16}, {16, 1}};
        ck_assert(!cu->supports(cu_ctx, 0, &op));   // decided by the device, before any run
        ck_assert_ptr_nonnull(strstr(cu->last_error(cu_ctx), "compute capability 8.9"));
        ck_assert_int_eq(cu->run(cu_ctx, 0, &op), TORC_ERR_NOT_SUPPORTED);
        ck_assert_ptr_nonnull(strstr(cu->last_error(cu_ctx), "compute capability 8.9"));
        cu->free(cu_ctx, 0, m);
        cu->free(cu_ctx, 0, sc);
        return;
    }
    g_mag_err_max = 0;
    const int failures = cases_scaled_mm(check_device);
    printf("scaled_mm, f32 outputs: largest |error| / (scale_a * scale_b * sum_k |a*b|) = %.3g = 2^%.1f (allowed "
           "2^%.0f)\n",
           g_mag_err_max, log2(g_mag_err_max), log2(TORC_FP8_MMA_SUM_TOL));
    ck_assert_int_eq(failures, 0);
}
END_TEST

// LAYER_NORM and its backward (several outputs, contiguous operands): each operand of op points
// at host memory; the reference runs there, the device on uploaded copies, and every output is
// compared relative to its largest reference value.
static int64_t operand_numel(const torc_operand *o) {
    int64_t n = 1;
    for (int d = 0; d < o->ndim; d++) n *= o->shape[d];
    return n;
}

static bool multi_out_matches(const torc_op *op, double tol) {
    ck_assert_msg(cu->supports(cu_ctx, 0, op), "%s: %s", g_case, cu->last_error(cu_ctx));
    ck_assert_msg(ref->run(ref_ctx, 0, op) == TORC_OK, "%s: %s", g_case, ref->last_error(ref_ctx));
    torc_op dop = *op;
    void *dmem[TORC_OP_MAX_INPUTS + TORC_OP_MAX_OUTPUTS] = {0};
    for (int i = 0; i < op->n_in + op->n_out; i++) {
        const torc_operand *h = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        torc_operand *d = i < op->n_in ? &dop.in[i] : &dop.out[i - op->n_in];
        const size_t nb = (size_t)operand_numel(h) * (size_t)torc_abi_dtype_size(h->dtype);
        dmem[i] = alloc_ok(nb ? nb : 1);
        if (nb && i < op->n_in)
            ck_assert_int_eq(cu->copy(cu_ctx, 0, dmem[i], h->data, nb, TORC_COPY_HOST_TO_DEVICE, false), TORC_OK);
        d->data = dmem[i];
    }
    run_ok(&dop);
    ck_assert_int_eq(cu->synchronize(cu_ctx, 0), TORC_OK);
    bool ok = true;
    for (int k = 0; k < op->n_out; k++) {
        const torc_operand *h = &op->out[k];
        const int64_t n = operand_numel(h);
        double scale = 1;
        for (int64_t i = 0; i < n; i++) {
            const double v = fabs(tcu_load_f64(h->data, i, h->dtype));
            if (isfinite(v) && v > scale) scale = v;
        }
        for (int64_t i = 0; i < n && ok; i++) {
            const double want = tcu_load_f64(h->data, i, h->dtype), got = fetch(dmem[op->n_in + k], h->dtype, i);
            if (!(isnan(want) ? isnan(got) : fabs(got - want) <= tol * scale)) {
                fprintf(stderr, "%s: out[%d][%lld] cuda %.9g, reference %.9g\n", g_case, k, (long long)i, got, want);
                ok = false;
            }
        }
    }
    for (int i = 0; i < op->n_in + op->n_out; i++) cu->free(cu_ctx, 0, dmem[i]);
    return ok;
}

static torc_operand host_operand(torc_dtype dt, int ndim, const int64_t *shape, uint64_t seed, double lo, double hi) {
    torc_operand o = {NULL, dt, ndim, {0}, {0}};
    int64_t n = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        o.shape[d] = shape[d];
        o.stride[d] = n;
        n *= shape[d];
    }
    o.data = calloc((size_t)(n ? n : 1), (size_t)torc_abi_dtype_size(dt));
    for (int64_t i = 0; i < n; i++) tcu_store_f64(o.data, i, dt, rand_elem(seed, lo, hi, i, TORC_DTYPE_F64));
    return o;
}

START_TEST(layer_norm_matches_reference) {
    typedef struct { int ndim, axis; int64_t shape[3]; } ln_shape;
    const ln_shape shapes[] = {{2, 1, {4, 5}}, {3, 1, {3, 2, 700}}, {2, 1, {0, 5}}, {2, 1, {3, 0}}, {3, 2, {64, 3, 1000}}};
    const torc_dtype dts[] = {TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16, TORC_DTYPE_F64};
    const double tols[] = {2e-5, 4e-3, 3e-2, 1e-12};
    int failures = 0;
    for (int di = 0; di < 4; di++)
        for (int si = 0; si < 5; si++)
            for (unsigned affine = 0; affine < 4; affine++)
                for (int mixed = 0; mixed < (dts[di] == TORC_DTYPE_F16 || dts[di] == TORC_DTYPE_BF16 ? 2 : 1); mixed++) {
                    const ln_shape *sh = &shapes[si];
                    const torc_dtype xd = dts[di], pd = mixed ? TORC_DTYPE_F32 : xd;
                    int64_t sshape[3];
                    for (int d = 0; d < sh->ndim; d++) sshape[d] = d < sh->axis ? sh->shape[d] : 1;
                    const int pn = sh->ndim - sh->axis;
                    snprintf(g_case, sizeof g_case, "layer_norm dtype %d params %d shape %d affine %u", xd, pd, si, affine);
                    torc_operand x = host_operand(xd, sh->ndim, sh->shape, 11, -2, 3);
                    torc_operand w = host_operand(pd, pn, sh->shape + sh->axis, 12, 0.5, 1.5);
                    torc_operand b = host_operand(pd, pn, sh->shape + sh->axis, 13, -1, 1);
                    torc_operand y = host_operand(xd, sh->ndim, sh->shape, 0, 0, 0);
                    torc_operand m = host_operand(pd, sh->ndim, sshape, 0, 0, 0), r = host_operand(pd, sh->ndim, sshape, 0, 0, 0);
                    torc_op op;
                    memset(&op, 0, sizeof op);
                    op.struct_size = sizeof op;
                    op.code = TORC_OP_LAYER_NORM;
                    op.params.norm.eps = 1e-5;
                    op.params.norm.axis = sh->axis;
                    op.params.norm.affine = affine;
                    op.in[op.n_in++] = x;
                    if (affine & 1) op.in[op.n_in++] = w;
                    if (affine & 2) op.in[op.n_in++] = b;
                    op.n_out = 3;
                    op.out[0] = y, op.out[1] = m, op.out[2] = r;
                    failures += !multi_out_matches(&op, tols[di]);
                    // Backward from the reference's mean and rstd (now in m, r).
                    torc_operand dy = host_operand(xd, sh->ndim, sh->shape, 14, -1, 1);
                    torc_operand dx = host_operand(xd, sh->ndim, sh->shape, 0, 0, 0);
                    torc_operand dw = host_operand(pd, pn, sh->shape + sh->axis, 0, 0, 0);
                    torc_operand db = host_operand(pd, pn, sh->shape + sh->axis, 0, 0, 0);
                    torc_op bw;
                    memset(&bw, 0, sizeof bw);
                    bw.struct_size = sizeof bw;
                    bw.code = TORC_OP_LAYER_NORM_BACKWARD;
                    bw.params = op.params;
                    bw.n_in = 4;
                    bw.in[0] = dy, bw.in[1] = x, bw.in[2] = m, bw.in[3] = r;
                    if (affine & 1) bw.in[bw.n_in++] = w;
                    bw.out[bw.n_out++] = dx;
                    if (affine & 1) bw.out[bw.n_out++] = dw;
                    if (affine & 2) bw.out[bw.n_out++] = db;
                    failures += !multi_out_matches(&bw, tols[di] * 4);
                    void *mem[] = {x.data, w.data, b.data, y.data, m.data, r.data, dy.data, dx.data, dw.data, db.data};
                    for (size_t k = 0; k < sizeof mem / sizeof mem[0]; k++) free(mem[k]);
                }
    ck_assert_int_eq(failures, 0);
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
    op.n_out = 1;
    op.n_in = 2;
    op.in[0] = a.op;
    op.in[1] = b.op;
    op.out[0] = out.op;
    op.params.scalar.value = 1;
    snprintf(g_case, sizeof g_case, "large bf16 add");
    failures += !check_device(&op, (tview *[]){&a, &b}, &out, 1.0);
    tview s = tv_new(TORC_DTYPE_F32, 1, (int64_t[]){1}, L_CONTIG, 0, 0);
    tview af = tv_new(TORC_DTYPE_F32, 1, n, L_CONTIG, -1, 1);
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_SUM;
    op.n_out = 1;
    op.n_in = 1;
    op.in[0] = af.op;
    op.out[0] = s.op;
    op.params.reduce.mask = 1;
    snprintf(g_case, sizeof g_case, "large f32 sum");
    failures += !check_device(&op, (tview *[]){&af}, &s, 50.0);
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_RAND_NORMAL;
    op.n_out = 1;
    op.out[0] = af.op;
    op.params.rng.seed = 2024;
    op.params.rng.offset = (UINT64_C(1) << 40) + 5;
    op.params.rng.a = 1;
    op.params.rng.b = 2;
    snprintf(g_case, sizeof g_case, "large randn");
    failures += !check_device(&op, NULL, &af, 0.0);   // bit for bit
    tv_free(&a);
    tv_free(&b);
    tv_free(&out);
    tv_free(&s);
    tv_free(&af);
    ck_assert_int_eq(failures, 0);
}
END_TEST

// ADAM_STEP bit for bit as the reference, over 3 steps of each dtype and flag set: param, the
// state and (amsgrad) max_exp_avg_sq from random values, the same gradient each step.
START_TEST(adam_step_matches_reference_bit_for_bit) {
    const int64_t n = (INT64_C(1) << 20) + 3;
    int failures = 0;
    for (size_t di = 0; di < sizeof ADAM_DTYPES / sizeof ADAM_DTYPES[0]; di++) {
        const torc_dtype dt = ADAM_DTYPES[di];
        const size_t es = (size_t)torc_abi_dtype_size(dt), bytes = (size_t)n * es;
        for (size_t ci = 0; ci < sizeof ADAM_CFGS / sizeof ADAM_CFGS[0]; ci++) {
            const adam_cfg *cfg = &ADAM_CFGS[ci];
            const bool ams = cfg->flags & TORC_ADAM_AMSGRAD;
            const int nbuf = ams ? 5 : 4;  // param, exp_avg, exp_avg_sq, [max_exp_avg_sq,] grad
            char *host[5], *dev[5];
            for (int k = 0; k < nbuf; k++) {
                host[k] = malloc(bytes);
                ck_assert_ptr_nonnull(host[k]);
                for (int64_t i = 0; i < n; i++) tcu_store_f64(host[k], i, dt, adam_value(k, ams, i));
                dev[k] = alloc_ok(bytes);
                ck_assert_int_eq(cu->copy(cu_ctx, 0, dev[k], host[k], bytes, TORC_COPY_HOST_TO_DEVICE, false), TORC_OK);
            }
            for (int step = 1; step <= 3; step++) {
                torc_op op = adam_op(cfg, nbuf - 1, step), dop = op;
                for (int k = 0; k < nbuf; k++) {
                    torc_operand *h = k < nbuf - 1 ? &op.out[k] : &op.in[0], *d = k < nbuf - 1 ? &dop.out[k] : &dop.in[0];
                    *h = vec(host[k], dt, n);
                    *d = vec(dev[k], dt, n);
                }
                ck_assert_msg(cu->supports(cu_ctx, 0, &dop), "adam_step: %s", cu->last_error(cu_ctx));
                ck_assert_int_eq(ref->run(ref_ctx, 0, &op), TORC_OK);
                run_ok(&dop);
            }
            ck_assert_int_eq(cu->synchronize(cu_ctx, 0), TORC_OK);
            for (int k = 0; k < nbuf - 1; k++) {
                char *got = malloc(bytes);
                ck_assert_ptr_nonnull(got);
                ck_assert_int_eq(cu->copy(cu_ctx, 0, got, dev[k], bytes, TORC_COPY_DEVICE_TO_HOST, false), TORC_OK);
                for (int64_t i = 0; i < n; i++)
                    if (memcmp(got + (size_t)i * es, host[k] + (size_t)i * es, es)) {
                        fprintf(stderr, "adam_step %s flags %u: out[%d] element %lld is %.17g on cuda, %.17g on the "
                                "reference\n", torc_abi_dtype_name(dt), cfg->flags, k, (long long)i,
                                tcu_load_f64(got, i, dt), tcu_load_f64(host[k], i, dt));
                        failures++;
                        break;
                    }
                free(got);
            }
            for (int k = 0; k < nbuf; k++) {
                cu->free(cu_ctx, 0, dev[k]);
                free(host[k]);
            }
        }
    }
    ck_assert_int_eq(failures, 0);
}
END_TEST

// ADAM_STEP_LIST (ABI 2.6) bit for bit as the reference running its elements: ADAM_LIST_N
// parameters of their own sizes and steps, in launches of TCU_ADAM_LIST_MAX, each dtype and flag set.
START_TEST(adam_step_list_matches_reference_bit_for_bit) {
    int failures = 0;
    for (size_t di = 0; di < sizeof ADAM_DTYPES / sizeof ADAM_DTYPES[0]; di++) {
        const torc_dtype dt = ADAM_DTYPES[di];
        const size_t es = (size_t)torc_abi_dtype_size(dt);
        for (size_t ci = 0; ci < sizeof ADAM_CFGS / sizeof ADAM_CFGS[0]; ci++) {
            const adam_cfg *cfg = &ADAM_CFGS[ci];
            const bool ams = cfg->flags & TORC_ADAM_AMSGRAD;
            const int nbuf = ams ? 5 : 4;
            static char *host[ADAM_LIST_N][5], *dev[ADAM_LIST_N][5];
            torc_op ops[ADAM_LIST_N], dops[ADAM_LIST_N];
            for (int t = 0; t < ADAM_LIST_N; t++) {
                const int64_t n = adam_list_numel(t);
                const size_t bytes = (size_t)n * es;
                ops[t] = adam_op(cfg, nbuf - 1, 1 + t % 5);
                ops[t].struct_size = sizeof ops[t];
                dops[t] = ops[t];
                for (int k = 0; k < nbuf; k++) {
                    host[t][k] = malloc(bytes + 1);
                    ck_assert_ptr_nonnull(host[t][k]);
                    for (int64_t i = 0; i < n; i++) tcu_store_f64(host[t][k], i, dt, adam_value(k, ams, i + 7 * t));
                    dev[t][k] = alloc_ok(bytes ? bytes : 16);
                    if (bytes)
                        ck_assert_int_eq(cu->copy(cu_ctx, 0, dev[t][k], host[t][k], bytes, TORC_COPY_HOST_TO_DEVICE, false),
                                         TORC_OK);
                    torc_operand *h = k < nbuf - 1 ? &ops[t].out[k] : &ops[t].in[0];
                    torc_operand *d = k < nbuf - 1 ? &dops[t].out[k] : &dops[t].in[0];
                    *h = vec(host[t][k], dt, n);
                    *d = vec(dev[t][k], dt, n);
                }
                ck_assert_int_eq(ref->run(ref_ctx, 0, &ops[t]), TORC_OK);
            }
            torc_op_list l;
            torc_op op = adam_list_op(&l, dops, ADAM_LIST_N);
            ck_assert_msg(cu->supports(cu_ctx, 0, &op), "adam_step_list: %s", cu->last_error(cu_ctx));
            run_ok(&op);
            ck_assert_int_eq(cu->synchronize(cu_ctx, 0), TORC_OK);
            for (int t = 0; t < ADAM_LIST_N; t++) {
                const int64_t n = adam_list_numel(t);
                char *got = malloc((size_t)n * es + 1);
                ck_assert_ptr_nonnull(got);
                for (int k = 0; k < nbuf - 1 && n; k++) {
                    ck_assert_int_eq(cu->copy(cu_ctx, 0, got, dev[t][k], (size_t)n * es, TORC_COPY_DEVICE_TO_HOST, false),
                                     TORC_OK);
                    for (int64_t i = 0; i < n; i++)
                        if (memcmp(got + (size_t)i * es, host[t][k] + (size_t)i * es, es)) {
                            fprintf(stderr, "adam_step_list %s flags %u: parameter %d out[%d] element %lld is %.17g on "
                                    "cuda, %.17g on the reference\n", torc_abi_dtype_name(dt), cfg->flags, t, k,
                                    (long long)i, tcu_load_f64(got, i, dt), tcu_load_f64(host[t][k], i, dt));
                            failures++;
                            break;
                        }
                }
                free(got);
                for (int k = 0; k < nbuf; k++) {
                    cu->free(cu_ctx, 0, dev[t][k]);
                    free(host[t][k]);
                }
            }
        }
    }
    ck_assert_int_eq(failures, 0);
}
END_TEST

// fp8 outputs that overflow saturate as the reference (on sm_89+; below, _scaled_mm is refused).
START_TEST(fp8_outputs_saturate_as_the_reference) {
    if (device_cc() < 89) {
        printf("fp8_outputs_saturate_as_the_reference: sm_%d has no fp8 matmul (refusal tested in "
               "scaled_mm_matches_reference)\n", device_cc());
        return;
    }
    ck_assert_int_eq(cases_fp8_saturation(check_device), 0);
}
END_TEST

// ---- more than 2^31 elements: every index and size on the 64-bit path ----
enum { BIG_TAIL = 1029 };
static const int64_t BIG = (INT64_C(1) << 31) + BIG_TAIL;

// Sampled elements: both ends, both sides of 2^31, and a spread in between.
static int64_t big_sample(int k, int64_t n) {
    const int64_t fixed[8] = {0, 1, (INT64_C(1) << 31) - 2, (INT64_C(1) << 31) - 1, INT64_C(1) << 31,
                              (INT64_C(1) << 31) + 1, n - 2, n - 1};
    return k < 8 ? fixed[k] : (int64_t)(((uint64_t)k * UINT64_C(0x9E3779B97F4A7C15)) % (uint64_t)n);
}

static void big_elementwise(torc_dtype dt, int code) {
    const size_t bytes = (size_t)BIG * (size_t)torc_abi_dtype_size(dt);
    void *x = alloc_ok(bytes), *y = alloc_ok(bytes), *z = alloc_ok(bytes);
    const torc_operand ox = vec(x, dt, BIG), oy = vec(y, dt, BIG), oz = vec(z, dt, BIG);
    rand_uniform(&ox, 11, -2, 2);
    rand_uniform(&oy, 12, -2, 2);
    fill(&oz, NAN);   // unwritten elements stay NaN
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = code;
    op.n_out = 1;
    op.n_in = 2;
    op.in[0] = ox, op.in[1] = oy, op.out[0] = oz;
    op.params.scalar.value = 1;   // add's alpha
    run_ok(&op);
    ck_assert_int_eq(cu->synchronize(cu_ctx, 0), TORC_OK);
    for (int k = 0; k < 40; k++) {
        const int64_t i = big_sample(k, BIG);
        const double a = rand_elem(11, -2, 2, i, dt), b = rand_elem(12, -2, 2, i, dt);
        // the sum or product of two 16-bit floats is exact in float and double: one rounding
        const double want = round_to(code == TORC_OP_ADD ? a + b : a * b, dt), got = fetch(z, dt, i);
        ck_assert_msg(got == want, "dtype %d op %d element %lld: %g, want %g", dt, code, (long long)i, got, want);
    }
    cu->free(cu_ctx, 0, x);
    cu->free(cu_ctx, 0, y);
    cu->free(cu_ctx, 0, z);
}

START_TEST(tensors_beyond_2_31_elements) {
    torc_device_info info = {.struct_size = sizeof info};  // as the core passes it: zeroed, sized
    cu->device_info(cu_ctx, 0, &info);
    if (info.total_memory < ((uint64_t)40 << 30)) {
        printf("tensors_beyond_2_31_elements: needs 40 GiB of device memory, %s has %.1f GiB: not run\n", info.name,
               (double)info.total_memory / (1 << 30));
        return;
    }
    big_elementwise(TORC_DTYPE_F16, TORC_OP_ADD);
    big_elementwise(TORC_DTYPE_BF16, TORC_OP_MUL);
    // sum: ones, and the last BIG_TAIL elements (all past 2^31) 60000
    {
        float *x = alloc_ok((size_t)BIG * 4), *s = alloc_ok(4);
        const torc_operand ox = vec(x, TORC_DTYPE_F32, BIG), tail = vec(x + (INT64_C(1) << 31), TORC_DTYPE_F32, BIG_TAIL);
        fill(&ox, 1);
        fill(&tail, 60000);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_SUM;
        op.n_out = 1;
        op.n_in = 1;
        op.in[0] = ox;
        op.out[0] = vec(s, TORC_DTYPE_F32, 1);
        op.params.reduce.mask = 1;
        run_ok(&op);
        const double want = (double)(INT64_C(1) << 31) + 60000.0 * BIG_TAIL, got = fetch(s, TORC_DTYPE_F32, 0);
        ck_assert_msg(fabs(got - want) <= 1e-5 * want, "sum of %lld elements: %.9g, want %.9g", (long long)BIG, got, want);
        cu->free(cu_ctx, 0, x);
        cu->free(cu_ctx, 0, s);
    }
    // softmax over rows of 1024: 2^21 + 1 rows, the last one entirely past 2^31
    {
        const int64_t R = (INT64_C(1) << 21) + 1, C = 1024, n = R * C;
        void *x = alloc_ok((size_t)n * 2), *y = alloc_ok((size_t)n * 2);
        const torc_operand ox = vec(x, TORC_DTYPE_F16, n), oy = vec(y, TORC_DTYPE_F16, n);
        fill(&ox, 0);
        const torc_operand last0 = vec((char *)x + (size_t)(n - C) * 2, TORC_DTYPE_F16, 1);
        fill(&last0, 3);   // the last row: one 3, the rest 0
        fill(&oy, NAN);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_SOFTMAX;
        op.n_out = 1;
        op.n_in = 1;
        op.in[0] = (torc_operand){x, TORC_DTYPE_F16, 2, {R, C}, {C, 1}};
        op.out[0] = (torc_operand){y, TORC_DTYPE_F16, 2, {R, C}, {C, 1}};
        op.params.dim.dim = 1;
        run_ok(&op);
        const double den = exp(3.0) + (double)(C - 1);
        ck_assert(fetch(y, TORC_DTYPE_F16, 0) == 0x1p-10);
        ck_assert(fetch(y, TORC_DTYPE_F16, n - C - 1) == 0x1p-10);
        ck_assert(fabs(fetch(y, TORC_DTYPE_F16, n - C) - exp(3.0) / den) <= 2e-3 * exp(3.0) / den);
        ck_assert(fabs(fetch(y, TORC_DTYPE_F16, n - 1) - 1.0 / den) <= 2e-3 / den);
        cu->free(cu_ctx, 0, x);
        cu->free(cu_ctx, 0, y);
    }
    // masked_select: true at both ends and around 2^31
    {
        void *x = alloc_ok((size_t)BIG * 2), *m = alloc_ok((size_t)BIG), *out = alloc_ok(64);
        const torc_operand ox = vec(x, TORC_DTYPE_F16, BIG), om = vec(m, TORC_DTYPE_BOOL, BIG);
        rand_uniform(&ox, 13, -2, 2);
        fill(&om, 0);
        const int64_t starts[3] = {0, (INT64_C(1) << 31) - 4, BIG - 8};
        for (int r = 0; r < 3; r++) {
            const torc_operand run = vec((char *)m + starts[r], TORC_DTYPE_BOOL, 8);
            fill(&run, 1);
        }
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_MASKED_SELECT;
        op.n_out = 1;
        op.n_in = 2;
        op.in[0] = ox, op.in[1] = om;
        op.out[0] = vec(out, TORC_DTYPE_F16, 24);
        run_ok(&op);
        ck_assert_int_eq(cu->synchronize(cu_ctx, 0), TORC_OK);
        for (int r = 0; r < 3; r++)
            for (int j = 0; j < 8; j++) {
                const double want = rand_elem(13, -2, 2, starts[r] + j, TORC_DTYPE_F16), got = fetch(out, TORC_DTYPE_F16, r * 8 + j);
                ck_assert_msg(got == want, "masked_select element %d: %g, want %g", r * 8 + j, got, want);
            }
        cu->free(cu_ctx, 0, x);
        cu->free(cu_ctx, 0, m);
        cu->free(cu_ctx, 0, out);
    }
}
END_TEST

// cuBLAS's workspace is a block of torc's allocator (counted, and reused from the cache).
START_TEST(cublas_workspace_comes_from_the_allocator) {
    uint64_t before = 0, after = 0;
    void *a = alloc_ok(64 * 64 * 2), *c = alloc_ok(64 * 64 * 2);
    const torc_operand m = {a, TORC_DTYPE_BF16, 2, {64, 64}, {64, 1}};
    fill(&m, 0.5);
    ck_assert_int_eq(cu->memory_stats(cu_ctx, 0, &before, NULL, NULL), TORC_OK);
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_MATMUL;
    op.n_out = 1;
    op.n_in = 2;
    op.in[0] = op.in[1] = m;
    op.out[0] = (torc_operand){c, TORC_DTYPE_BF16, 2, {64, 64}, {64, 1}};
    run_ok(&op);   // the device's first matmul creates the handle
    ck_assert_int_eq(cu->memory_stats(cu_ctx, 0, &after, NULL, NULL), TORC_OK);
    ck_assert_uint_ge(after - before, (uint64_t)4 << 20);
    ck_assert(fetch(c, TORC_DTYPE_BF16, 0) == 16.0);   // 64 x 0.5 x 0.5
    cu->free(cu_ctx, 0, a);
    cu->free(cu_ctx, 0, c);
}
END_TEST

// ---- devices, copies, events ----
START_TEST(device_info_describes_the_gpu) {
    ck_assert_int_gt(cu->device_count(cu_ctx), 0);
    torc_device_info info = {.struct_size = sizeof info};  // as the core passes it: zeroed, sized
    ck_assert_int_eq(cu->device_info(cu_ctx, 0, &info), TORC_OK);
    ck_assert(!info.host_memory);
    ck_assert_int_gt(strlen(info.name), 0);
    ck_assert_uint_gt(info.total_memory, 0);
    ck_assert_ptr_nonnull(strstr(info.peak_source, " SMs"));
    printf("device 0: %s, %.1f GiB; %s\n", info.name, (double)info.total_memory / (1 << 30), info.peak_source);
    ck_assert_int_eq(cu->device_info(cu_ctx, cu->device_count(cu_ctx), &info), TORC_ERR_INVALID_ARG);
}
END_TEST

START_TEST(copies_sync_and_async_round_trip) {
    enum { N = 3 << 20 };
    unsigned char *h = malloc(N), *back = malloc(N);
    for (int i = 0; i < N; i++) h[i] = (unsigned char)(i * 7 + 1);
    void *d = cu->alloc(cu_ctx, 0, N), *d2 = cu->alloc(cu_ctx, 0, N);
    ck_assert_ptr_nonnull(d);
    // async from pageable memory: staged through pinned memory, so h may change right after
    ck_assert_int_eq(cu->copy(cu_ctx, 0, d, h, N, TORC_COPY_HOST_TO_DEVICE, true), TORC_OK);
    memset(h, 0, N);
    ck_assert_int_eq(cu->copy(cu_ctx, 0, d2, d, N, TORC_COPY_DEVICE_TO_DEVICE, true), TORC_OK);
    memset(back, 0xAB, N);
    ck_assert_int_eq(cu->copy(cu_ctx, 0, back, d2, N, TORC_COPY_DEVICE_TO_HOST, true), TORC_OK);
    ck_assert_int_eq(cu->synchronize(cu_ctx, 0), TORC_OK);  // the async device-to-host copy lands by now
    for (int i = 0; i < N; i++) ck_assert_uint_eq(back[i], (unsigned char)(i * 7 + 1));
    // many small async round trips reuse the staging blocks only after their copies completed
    for (int r = 0; r < 200; r++) {
        int v[64];
        for (int i = 0; i < 64; i++) v[i] = r * 1000 + i;
        ck_assert_int_eq(cu->copy(cu_ctx, 0, (char *)d + r * 256, v, sizeof v, TORC_COPY_HOST_TO_DEVICE, true), TORC_OK);
    }
    // a kernel launched right after them reports only its own errors (no stale "not ready")
    const torc_operand tail = vec((char *)d2 + (N - 1024), TORC_DTYPE_F32, 256);
    fill(&tail, 2.5);
    int all[200 * 64];
    ck_assert_int_eq(cu->copy(cu_ctx, 0, all, d, sizeof all, TORC_COPY_DEVICE_TO_HOST, false), TORC_OK);
    for (int r = 0; r < 200; r++)
        for (int i = 0; i < 64; i++) ck_assert_int_eq(all[r * 64 + i], r * 1000 + i);
    ck_assert(fetch(d2, TORC_DTYPE_F32, (N - 1024) / 4 + 255) == 2.5);
    // a small async device-to-host copy goes through staging and a stream callback (larger ones
    // run synchronously); its bytes are there after synchronize
    int small[64];
    memset(small, 0, sizeof small);
    ck_assert_int_eq(cu->copy(cu_ctx, 0, small, (char *)d + 7 * 256, sizeof small, TORC_COPY_DEVICE_TO_HOST, true), TORC_OK);
    ck_assert_int_eq(cu->synchronize(cu_ctx, 0), TORC_OK);
    for (int i = 0; i < 64; i++) ck_assert_int_eq(small[i], 7000 + i);
    cu->free(cu_ctx, 0, d);
    cu->free(cu_ctx, 0, d2);
    free(h);
    free(back);
}
END_TEST

// ---- the caching allocator on the device ----
START_TEST(allocator_stress_and_oom_recovery) {
    enum { N = 256 };
    void *p[N] = {0};
    uint64_t seed = 12345;
    uint64_t a0, r0, pk0;
    ck_assert_int_eq(cu->memory_stats(cu_ctx, 0, &a0, &r0, &pk0), TORC_OK);
    for (int it = 0; it < 5000; it++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const int i = (int)((seed >> 33) % N);
        if (p[i]) {
            cu->free(cu_ctx, 0, p[i]);
            p[i] = NULL;
        } else {
            const size_t sz = (seed & 7) == 0 ? (size_t)(seed >> 40) % (48 << 20) + 1 : (size_t)(seed >> 40) % 300000 + 1;
            p[i] = cu->alloc(cu_ctx, 0, sz);
            ck_assert_msg(p[i] != NULL, "alloc %zu: %s", sz, cu->last_error(cu_ctx));
            ck_assert_int_eq(cu->copy(cu_ctx, 0, p[i], &i, sz < sizeof i ? sz : sizeof i, TORC_COPY_HOST_TO_DEVICE, true), TORC_OK);
        }
    }
    for (int i = 0; i < N; i++) cu->free(cu_ctx, 0, p[i]);
    uint64_t a, r, pk;
    ck_assert_int_eq(cu->memory_stats(cu_ctx, 0, &a, &r, &pk), TORC_OK);
    ck_assert_uint_eq(a, a0);
    ck_assert_uint_ge(pk, r);
    ck_assert_int_eq(cu->empty_cache(cu_ctx, 0), TORC_OK);
    ck_assert_int_eq(cu->memory_stats(cu_ctx, 0, &a, &r, &pk), TORC_OK);
    ck_assert_uint_le(r, r0);
    // more than the device has: a clean error, and the device keeps working
    torc_device_info info = {.struct_size = sizeof info};  // as the core passes it: zeroed, sized
    cu->device_info(cu_ctx, 0, &info);
    ck_assert_ptr_null(cu->alloc(cu_ctx, 0, (size_t)info.total_memory * 2));
    ck_assert_ptr_nonnull(strstr(cu->last_error(cu_ctx), "CUDA out of memory"));
    void *ok = cu->alloc(cu_ctx, 0, 1 << 20);
    ck_assert_ptr_nonnull(ok);
    cu->free(cu_ctx, 0, ok);
}
END_TEST

START_TEST(kernel_index_errors_surface_at_synchronize) {
    const int64_t shape[1] = {8}, idx_host[2] = {3, 42};
    void *src = cu->alloc(cu_ctx, 0, 8 * 4), *idx = cu->alloc(cu_ctx, 0, sizeof idx_host), *out = cu->alloc(cu_ctx, 0, 2 * 4);
    ck_assert_int_eq(cu->copy(cu_ctx, 0, idx, idx_host, sizeof idx_host, TORC_COPY_HOST_TO_DEVICE, false), TORC_OK);
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_INDEX_SELECT;
    op.n_out = 1;
    op.n_in = 2;
    op.in[0] = (torc_operand){src, TORC_DTYPE_F32, 1, {shape[0]}, {1}};
    op.in[1] = (torc_operand){idx, TORC_DTYPE_I64, 1, {2}, {1}};
    op.out[0] = (torc_operand){out, TORC_DTYPE_F32, 1, {2}, {1}};
    op.params.dim.dim = 0;
    ck_assert_int_eq(cu->run(cu_ctx, 0, &op), TORC_OK);  // launched; the kernel finds 42 out of range
    ck_assert_int_eq(cu->synchronize(cu_ctx, 0), TORC_ERR_INDEX);
    ck_assert_ptr_nonnull(strstr(cu->last_error(cu_ctx), "index out of range"));
    ck_assert_int_eq(cu->synchronize(cu_ctx, 0), TORC_OK);  // reported once; the device is fine
    // and keeps computing: more ops, right results
    const torc_operand s8 = vec(src, TORC_DTYPE_F32, 8);
    fill(&s8, 1.25);
    torc_op add;
    memset(&add, 0, sizeof add);
    add.code = TORC_OP_ADD;
    add.n_out = 1;
    add.n_in = 2;
    add.in[0] = add.in[1] = add.out[0] = s8;
    add.params.scalar.value = 1;
    run_ok(&add);
    const int64_t good[2] = {3, 7};
    ck_assert_int_eq(cu->copy(cu_ctx, 0, idx, good, sizeof good, TORC_COPY_HOST_TO_DEVICE, false), TORC_OK);
    run_ok(&op);
    ck_assert_int_eq(cu->synchronize(cu_ctx, 0), TORC_OK);
    ck_assert(fetch(out, TORC_DTYPE_F32, 0) == 2.5);
    ck_assert(fetch(out, TORC_DTYPE_F32, 1) == 2.5);
    cu->free(cu_ctx, 0, src);
    cu->free(cu_ctx, 0, idx);
    cu->free(cu_ctx, 0, out);
}
END_TEST

// ---- the performance targets (printed, not asserted: they depend on the machine) ----
// The clock around synchronize (backend ABI 2.0 has no events; the launches are queued back to
// back, so the host's overhead is one synchronize per reps runs).
static double time_ms(torc_op *op, int reps) {
    for (int i = 0; i < 3; i++) cu->run(cu_ctx, 0, op);  // warm-up
    cu->synchronize(cu_ctx, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < reps; i++) cu->run(cu_ctx, 0, op);
    cu->synchronize(cu_ctx, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6) / reps;
}

static const char *verdict(bool met) { return met ? "met" : "NOT met"; }

// ---- deterministic index_add (the embedding's backward) ----
// The op run on the device from out's initial contents; out's storage as the device left it.
static tview device_result(const torc_op *op, tview *const *ins, const tview *out) {
    torc_op d = *op;
    void *din[TORC_OP_MAX_INPUTS] = {0};
    for (int k = 0; k < op->n_in; k++) {
        din[k] = upload(ins[k]);
        d.in[k].data = on_device(ins[k], op->in[k].data, din[k]);
    }
    void *dout = upload(out);
    d.out[0].data = on_device(out, op->out[0].data, dout);
    run_ok(&d);
    ck_assert_msg(cu->synchronize(cu_ctx, 0) == TORC_OK, "%s: %s", g_case, cu->last_error(cu_ctx));
    tview got = tv_clone(out);
    ck_assert_int_eq(cu->copy(cu_ctx, 0, got.mem, dout, tv_bytes(out), TORC_COPY_DEVICE_TO_HOST, false), TORC_OK);
    for (int k = 0; k < op->n_in; k++) cu->free(cu_ctx, 0, din[k]);
    cu->free(cu_ctx, 0, dout);
    return got;
}

// Floating index_add equals the reference's serial sum in index order, bit for bit, and two runs
// give the same bits: many duplicates (the GPT's 8192 tokens into a 50304 or a 256-row table, a
// 1-D out hit 10000 times), values whose float sum depends on the order (magnitudes 2^-10 to
// 2^20, signs mixed), index_add along a strided dim.
START_TEST(index_add_is_deterministic_in_index_order) {
    typedef struct { torc_dtype dt; int64_t V, C, N, hot; int dim; } ia_case;
    const ia_case cases[] = {
        {TORC_DTYPE_F32, 50304, 768, 8192, 50304, 0}, {TORC_DTYPE_F32, 50304, 768, 8192, 64, 0},
        {TORC_DTYPE_F32, 256, 768, 8192, 256, 0},     {TORC_DTYPE_BF16, 256, 64, 8192, 256, 0},
        {TORC_DTYPE_F64, 256, 64, 4096, 16, 0},       {TORC_DTYPE_F32, 7, 1, 10000, 7, 0},
        {TORC_DTYPE_F32, 300, 33, 5000, 40, 1},
    };
    int failures = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const ia_case *c = &cases[ci];
        // dim 0: out (V, C), src (N, C); dim 1: out (C, V), src (C, N), src transposed in memory
        const int64_t osh[2] = {c->dim ? c->C : c->V, c->dim ? c->V : c->C};
        const int64_t ssh[2] = {c->dim ? c->C : c->N, c->dim ? c->N : c->C};
        tview out = tv_new(c->dt, 2, osh, L_CONTIG, -1, 1), src = tv_new(c->dt, 2, ssh, c->dim ? L_TRANS : L_CONTIG, 0, 0);
        tview idx = tv_new(TORC_DTYPE_I64, 1, &c->N, L_CONTIG, 0, 0);
        for (int64_t i = 0; i < src.n; i++) {
            const double u = urand(-1, 1);
            tcu_store_f64(src.mem, i, c->dt, u * ldexp(1.0, (int)(rnd() % 31) - 10));
        }
        for (int64_t j = 0; j < c->N; j++) tcu_store_i64(idx.mem, j, TORC_DTYPE_I64, (int64_t)(rnd() % (uint64_t)c->hot));
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_INDEX_ADD;
        op.n_in = 2, op.n_out = 1;
        op.in[0] = src.op, op.in[1] = idx.op, op.out[0] = out.op;
        op.params.dim.dim = c->dim;
        snprintf(g_case, sizeof g_case, "index_add dtype %d V %lld C %lld N %lld hot %lld dim %d", c->dt, (long long)c->V,
                 (long long)c->C, (long long)c->N, (long long)c->hot, c->dim);
        failures += !check_device(&op, (tview *[]){&src, &idx}, &out, 0.0);  // exact: rscale 0
        tview a = device_result(&op, (tview *[]){&src, &idx}, &out), b = device_result(&op, (tview *[]){&src, &idx}, &out);
        if (memcmp(a.mem, b.mem, tv_bytes(&a)) != 0) {
            fprintf(stderr, "%s: two runs differ\n", g_case);
            failures++;
        }
        tv_free(&a), tv_free(&b), tv_free(&out), tv_free(&src), tv_free(&idx);
    }
    ck_assert_int_eq(failures, 0);
}
END_TEST

// The embedding backward's index_add for the GPT (8192 tokens into a (50304, 768) f32 table; and a
// 256-row vocabulary, runs of ~32 rows): times printed.
START_TEST(index_add_figures) {
    const int64_t C = 768, N = 8192, vocabs[2] = {50304, 256};
    for (int vi = 0; vi < 2; vi++) {
        const int64_t V = vocabs[vi];
        float *out = alloc_ok((size_t)(V * C) * 4), *src = alloc_ok((size_t)(N * C) * 4);
        int64_t *idx = alloc_ok((size_t)N * 8), *host = malloc((size_t)N * 8);
        for (int64_t j = 0; j < N; j++) host[j] = (int64_t)(rnd() % (uint64_t)V);
        ck_assert_int_eq(cu->copy(cu_ctx, 0, idx, host, (size_t)N * 8, TORC_COPY_HOST_TO_DEVICE, false), TORC_OK);
        const torc_operand so = {src, TORC_DTYPE_F32, 2, {N, C}, {C, 1}}, oo = {out, TORC_DTYPE_F32, 2, {V, C}, {C, 1}};
        rand_uniform(&so, 7, -1, 1);
        fill(&oo, 0);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_INDEX_ADD;
        op.n_in = 2, op.n_out = 1;
        op.in[0] = so, op.in[1] = vec(idx, TORC_DTYPE_I64, N), op.out[0] = oo;
        printf("index_add (deterministic) %lld tokens into (%lld, %lld) f32: %.3f ms\n", (long long)N, (long long)V,
               (long long)C, time_ms(&op, 20));
        cu->free(cu_ctx, 0, out), cu->free(cu_ctx, 0, src), cu->free(cu_ctx, 0, idx);
        free(host);
    }
}
END_TEST

// ---- attention (backend ABI 2.4) ----
// Runs op (its operands inside s's storages) on the device: every storage uploaded, those in outs
// as zeros, then outs copied back into got[].
static void attn_on_device(attn_set *s, const torc_op *op, const int *outs, int n_out, tview *got) {
    void *dev[ATTN_N] = {0};
    for (int i = 0; i < ATTN_N; i++) {
        if (!s->mem[i].mem) continue;
        bool is_out = false;
        for (int k = 0; k < n_out; k++) is_out |= outs[k] == i;
        tview z = tv_zeros_like(&s->mem[i]);
        dev[i] = upload(is_out ? &z : &s->mem[i]);
        tv_free(&z);
    }
    torc_op d = *op;
    for (int k = 0; k < op->n_in + op->n_out; k++) {
        torc_operand *x = k < op->n_in ? &d.in[k] : &d.out[k - op->n_in];
        int owner = -1;
        for (int i = 0; i < ATTN_N && owner < 0; i++)
            if (s->mem[i].mem && (char *)x->data >= s->mem[i].mem && (char *)x->data < s->mem[i].mem + tv_bytes(&s->mem[i]))
                owner = i;
        ck_assert_int_ge(owner, 0);
        x->data = on_device(&s->mem[owner], x->data, dev[owner]);
    }
    run_ok(&d);
    ck_assert_msg(cu->synchronize(cu_ctx, 0) == TORC_OK, "%s: %s", g_case, cu->last_error(cu_ctx));
    for (int k = 0; k < n_out; k++) {
        got[k] = tv_clone(&s->mem[outs[k]]);
        ck_assert_int_eq(cu->copy(cu_ctx, 0, got[k].mem, dev[outs[k]], tv_bytes(&got[k]), TORC_COPY_DEVICE_TO_HOST,
                                  false), TORC_OK);
    }
    for (int i = 0; i < ATTN_N; i++) cu->free(cu_ctx, 0, dev[i]);
}

// Forward and backward (from the reference's o and lse) against the reference, each run twice for
// the same bits (no atomics).
static int attention_cases(const attn_cfg *cfgs, int n) {
    int failures = 0;
    for (int ci = 0; ci < n; ci++) {
        const attn_cfg *c = &cfgs[ci];
        attn_set s;
        attn_set_new(&s, c);
        snprintf(g_case, sizeof g_case, "attention (%lld, %lld, %lld, %lld, %lld, %lld) dtype %d %s causal %d",
                 (long long)c->B, (long long)c->H, (long long)c->L, (long long)c->S, (long long)c->E, (long long)c->Ev,
                 c->dt, ATTN_LAYOUTS[c->layout], c->causal);
        ck_assert_msg(cu->supports(cu_ctx, 0, &s.fwd), "%s: %s", g_case, cu->last_error(cu_ctx));
        ck_assert_int_eq(ref->run(ref_ctx, 0, &s.fwd), TORC_OK);
        const int fo[2] = {ATTN_O, ATTN_LSE}, bo[3] = {ATTN_DQ, ATTN_DK, ATTN_DV};
        tview g1[3], g2[3];
        attn_on_device(&s, &s.fwd, fo, 2, g1);
        attn_on_device(&s, &s.fwd, fo, 2, g2);
        for (int k = 0; k < 2; k++) {
            failures += !attn_close(&g1[k], &s.mem[fo[k]], attn_tol(c->dt), k ? "lse" : "o");
            if (memcmp(g1[k].mem, g2[k].mem, tv_bytes(&g1[k])) != 0) {
                fprintf(stderr, "%s: forward output %d differs between runs\n", g_case, k);
                failures++;
            }
            tv_free(&g1[k]), tv_free(&g2[k]);
        }
        if (c->E > TCU_ATTN_MAX_E_BWD || c->Ev > TCU_ATTN_MAX_E_BWD) {
            ck_assert(!cu->supports(cu_ctx, 0, &s.bwd));
            attn_set_free(&s);
            continue;
        }
        ck_assert_int_eq(ref->run(ref_ctx, 0, &s.bwd), TORC_OK);
        attn_on_device(&s, &s.bwd, bo, 3, g1);
        attn_on_device(&s, &s.bwd, bo, 3, g2);
        for (int k = 0; k < 3; k++) {
            failures += !attn_close(&g1[k], &s.mem[bo[k]], 4 * attn_tol(c->dt), k == 0 ? "dq" : k == 1 ? "dk" : "dv");
            if (memcmp(g1[k].mem, g2[k].mem, tv_bytes(&g1[k])) != 0) {
                fprintf(stderr, "%s: gradient %d differs between runs\n", g_case, k);
                failures++;
            }
            tv_free(&g1[k]), tv_free(&g2[k]);
        }
        attn_set_free(&s);
    }
    return failures;
}

// The shared cases (small: tools/cuda-sanitize.sh's racecheck runs them) ...
START_TEST(attention_matches_reference) { ck_assert_int_eq(attention_cases(ATTN_CFGS, N_ATTN_CFGS), 0); }
END_TEST

// ... and the GPU's larger ones.
static const attn_cfg ATTN_GPU_CFGS[] = {
    {TORC_DTYPE_F32, 2, 2, 256, 256, 128, 128, 1, ATTN_PACKED},
    {TORC_DTYPE_BF16, 2, 4, 256, 256, 64, 64, 1, ATTN_PACKED},  // the GPT's head size
    {TORC_DTYPE_BF16, 1, 3, 100, 300, 96, 112, 0, ATTN_STRIDED},
    {TORC_DTYPE_F32, 1, 2, 64, 64, 256, 256, 1, ATTN_CONTIG},   // forward only: backward declined
};
START_TEST(attention_large_matches_reference) {
    ck_assert_int_eq(attention_cases(ATTN_GPU_CFGS, (int)(sizeof ATTN_GPU_CFGS / sizeof ATTN_GPU_CFGS[0])), 0);
}
END_TEST

// The GPT's attention (B 8, H 12, T 1024, hs 64, causal, bf16, q/k/v views of one (B, T, 3, H, hs)
// tensor): forward and backward times, printed.
START_TEST(attention_gpt_figures) {
    const int64_t B = 8, H = 12, T = 1024, hs = 64;
    const attn_cfg c = {TORC_DTYPE_BF16, B, H, T, T, hs, hs, 1, ATTN_PACKED};
    torc_op f, b;
    memset(&f, 0, sizeof f);
    f.struct_size = sizeof f;
    f.code = TORC_OP_ATTENTION;
    f.params.attention.scale = 1.0 / sqrt((double)hs);
    f.params.attention.causal = 1;
    b = f;
    b.code = TORC_OP_ATTENTION_BACKWARD;
    const size_t es = 2, n_qkv = (size_t)(B * T * 3 * H * hs), n_o = (size_t)(B * T * H * hs);
    char *qkv = alloc_ok(n_qkv * es), *o = alloc_ok(n_o * es), *lse = alloc_ok((size_t)(B * H * T) * 4);
    char *dout = alloc_ok(n_o * es), *dq = alloc_ok(n_o * es), *dk = alloc_ok(n_o * es), *dv = alloc_ok(n_o * es);
    const torc_operand all = vec(qkv, c.dt, (int64_t)n_qkv), gout = vec(dout, c.dt, (int64_t)n_o);
    rand_uniform(&all, 5, -1, 1);
    rand_uniform(&gout, 6, -1, 1);
    torc_operand x[3];
    for (int i = 0; i < 3; i++)
        x[i] = (torc_operand){qkv + (size_t)(i * H * hs) * es, c.dt, 4, {B, H, T, hs}, {T * 3 * H * hs, hs, 3 * H * hs, 1}};
    const torc_operand dense = {o, c.dt, 4, {B, H, T, hs}, {H * T * hs, T * hs, hs, 1}};
    torc_operand ot = dense, gt = dense, qt = dense, kt = dense, vt = dense;
    gt.data = dout, qt.data = dq, kt.data = dk, vt.data = dv;
    const torc_operand lt = {lse, TORC_DTYPE_F32, 3, {B, H, T}, {H * T, T, 1}};
    f.n_in = 3, f.n_out = 2;
    f.in[0] = x[0], f.in[1] = x[1], f.in[2] = x[2], f.out[0] = ot, f.out[1] = lt;
    b.n_in = 6, b.n_out = 3;
    b.in[0] = gt, b.in[1] = x[0], b.in[2] = x[1], b.in[3] = x[2], b.in[4] = ot, b.in[5] = lt;
    b.out[0] = qt, b.out[1] = kt, b.out[2] = vt;
    const double flops = 4.0 * B * H * (double)T * T * hs / 2;  // causal: half of QK^T and PV
    const double fms = time_ms(&f, 10), bms = time_ms(&b, 10);
    printf("attention GPT (B %lld, H %lld, T %lld, hs %lld) bf16 causal: forward %.3f ms (%.1f TFLOP/s), "
           "backward %.3f ms (%.1f TFLOP/s, 2.5x the forward's flops counted)\n", (long long)B, (long long)H,
           (long long)T, (long long)hs, fms, flops / fms * 1e-9, bms, 2.5 * flops / bms * 1e-9);
    void *mem[] = {qkv, o, lse, dout, dq, dk, dv};
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++) cu->free(cu_ctx, 0, mem[i]);
}
END_TEST

START_TEST(performance_figures) {
    torc_device_info info = {.struct_size = sizeof info};  // as the core passes it: zeroed, sized
    cu->device_info(cu_ctx, 0, &info);
    const int64_t big = 8192;
    double bf16_tf = 0;
    if (info.total_memory > ((uint64_t)8 << 30)) {
        const size_t mb = (size_t)(big * big) * 2;
        void *a = alloc_ok(mb), *b = alloc_ok(mb), *c = alloc_ok(mb);
        const torc_operand ma = {a, TORC_DTYPE_BF16, 2, {big, big}, {big, 1}}, mbv = {b, TORC_DTYPE_BF16, 2, {big, big}, {big, 1}};
        fill(&ma, 0.5);
        fill(&mbv, 0.5);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_MATMUL;
        op.n_out = 1;
        op.n_in = 2;
        op.in[0] = ma;
        op.in[1] = mbv;
        op.out[0] = (torc_operand){c, TORC_DTYPE_BF16, 2, {big, big}, {big, 1}};
        const double ms = time_ms(&op, 10);
        bf16_tf = 2.0 * big * big * big / (ms * 1e-3) / 1e12;
        const double peak = info.peak_flops[TORC_DTYPE_BF16] / 1e12;
        if (peak > 0)
            printf("perf: bf16 matmul 8192^3: %.3f ms, %.0f TFLOP/s = %.2f of the dense peak %.0f (target >= 0.70: %s)\n",
                   ms, bf16_tf, bf16_tf / peak, peak, verdict(bf16_tf / peak >= 0.7));
        else
            printf("perf: bf16 matmul 8192^3: %.3f ms, %.0f TFLOP/s (no datasheet peak for %s: target not judged)\n", ms,
                   bf16_tf, info.name);
        cu->free(cu_ctx, 0, a);
        cu->free(cu_ctx, 0, b);
        cu->free(cu_ctx, 0, c);
    }
    if (info.total_memory > ((uint64_t)8 << 30) && device_cc() >= 89 && bf16_tf > 0) {
        const size_t mb = (size_t)(big * big);
        void *a = alloc_ok(mb), *b = alloc_ok(mb), *c = alloc_ok(mb * 2), *sc = alloc_ok(4);
        const torc_operand ma = {a, TORC_DTYPE_F8_E4M3FN, 2, {big, big}, {big, 1}};
        const torc_operand mbv = {b, TORC_DTYPE_F8_E4M3FN, 2, {big, big}, {1, big}};   // column-major: TN
        const torc_operand one = vec(sc, TORC_DTYPE_F32, 1);
        fill(&ma, 0.5);
        fill(&mbv, 0.5);
        fill(&one, 1);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_SCALED_MM;
        op.n_out = 1;
        op.n_in = 4;
        op.in[0] = ma, op.in[1] = mbv, op.in[2] = one, op.in[3] = one;
        op.out[0] = (torc_operand){c, TORC_DTYPE_BF16, 2, {big, big}, {big, 1}};
        const double ms = time_ms(&op, 10);
        const double tf = 2.0 * big * big * big / (ms * 1e-3) / 1e12;
        printf("perf: fp8 e4m3 scaled_mm 8192^3 -> bf16: %.3f ms, %.0f TFLOP/s = %.2fx bf16 (target >= 1.6x: %s)\n", ms,
               tf, tf / bf16_tf, verdict(tf / bf16_tf >= 1.6));
        cu->free(cu_ctx, 0, a);
        cu->free(cu_ctx, 0, b);
        cu->free(cu_ctx, 0, c);
        cu->free(cu_ctx, 0, sc);
    }
    const int64_t n = INT64_C(1) << 28;
    if (info.total_memory > ((uint64_t)6 << 30)) {
        void *x = alloc_ok((size_t)n * 4), *y = alloc_ok((size_t)n * 4), *z = alloc_ok((size_t)n * 4);
        const torc_operand ox = vec(x, TORC_DTYPE_F32, n), oy = vec(y, TORC_DTYPE_F32, n);
        fill(&ox, 1);
        fill(&oy, 2);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_ADD;
        op.n_out = 1;
        op.n_in = 2;
        op.params.scalar.value = 1;
        op.in[0] = ox;
        op.in[1] = oy;
        op.out[0] = vec(z, TORC_DTYPE_F32, n);
        const double ms = time_ms(&op, 10);
        const double gbs = 3.0 * 4 * (double)n / (ms * 1e-3) / 1e9, bw = tcu_mem_bandwidth_gbps(info.name);
        if (bw > 0)
            printf("perf: f32 add of 2^28 elements: %.3f ms, %.0f GB/s = %.2f of the datasheet %.0f GB/s (target >= 0.80: %s)\n",
                   ms, gbs, gbs / bw, bw, verdict(gbs / bw >= 0.8));
        else
            printf("perf: f32 add of 2^28 elements: %.3f ms, %.0f GB/s (no datasheet bandwidth for %s)\n", ms, gbs, info.name);
        cu->free(cu_ctx, 0, x);
        cu->free(cu_ctx, 0, y);
        cu->free(cu_ctx, 0, z);
    }
    // launch overhead: host time per tiny op, asynchronous
    void *t = alloc_ok(256);
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_ADD;
    op.n_out = 1;
    op.n_in = 2;
    op.params.scalar.value = 1;
    op.in[0] = op.in[1] = op.out[0] = vec(t, TORC_DTYPE_F32, 64);
    for (int i = 0; i < 100; i++) cu->run(cu_ctx, 0, &op);
    cu->synchronize(cu_ctx, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 10000; i++) cu->run(cu_ctx, 0, &op);
    cu->synchronize(cu_ctx, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / 10000;
    printf("perf: per-op launch overhead %.2f us (target <= 5: %s)\n", us, verdict(us <= 5));
    cu->free(cu_ctx, 0, t);
}
END_TEST

// ---- in processes of their own (ctest cuda_gpu_fault, cuda_gpu_device1) ----
#define EXPECT(cond, ...)                                  \
    do {                                                   \
        if (!(cond)) {                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                  \
            fprintf(stderr, "\n");                         \
            return 1;                                      \
        }                                                  \
    } while (0)

// A kernel that reads an address no allocation covers: the fault is reported as what it is, at the
// synchronisation and by every call after it (the context is gone), never as out of memory.
static int fault_main(void) {
    float *p = cu->alloc(cu_ctx, 0, 1 << 20);
    EXPECT(p != NULL, "alloc: %s", cu->last_error(cu_ctx));
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_ADD;
    op.n_out = 1;
    op.n_in = 2;
    op.params.scalar.value = 1;
    op.in[0] = vec(p + (INT64_C(1) << 40), TORC_DTYPE_F32, 1 << 18);   // 4 TiB past the block
    op.in[1] = op.out[0] = vec(p, TORC_DTYPE_F32, 1 << 18);
    const int rc = cu->run(cu_ctx, 0, &op);
    const int sync = rc == TORC_OK ? cu->synchronize(cu_ctx, 0) : rc;
    EXPECT(sync == TORC_ERR_BACKEND, "the faulting kernel: status %d (%s)", sync, cu->last_error(cu_ctx));
    EXPECT(strstr(cu->last_error(cu_ctx), "cudaErrorIllegalAddress") != NULL, "fault reported as: %s", cu->last_error(cu_ctx));
    void *q = cu->alloc(cu_ctx, 0, (size_t)1 << 30);   // more than the cache holds: reaches cudaMalloc
    EXPECT(q == NULL, "alloc after a fault succeeded");
    EXPECT(strstr(cu->last_error(cu_ctx), "out of memory") == NULL, "reported as OOM: %s", cu->last_error(cu_ctx));
    EXPECT(strstr(cu->last_error(cu_ctx), "cudaErrorIllegalAddress") != NULL, "alloc after the fault: %s", cu->last_error(cu_ctx));
    printf("fault: reported as '%s'\n", cu->last_error(cu_ctx));
    return 0;
}

typedef struct dev1_job {
    pthread_barrier_t *start;
    int fails;
    char why[256];
} dev1_job;

// On device 1 only: upload, x = x + x, download; right values mean every call ran on device 1.
static void *dev1_work(void *arg) {
    dev1_job *j = arg;
    if (j->start) pthread_barrier_wait(j->start);
    enum { N = 4096 };
    float h[N], back[N];
    for (int i = 0; i < N; i++) h[i] = (float)i;
    float *d = cu->alloc(cu_ctx, 1, sizeof h);
    if (!d) {
        snprintf(j->why, sizeof j->why, "alloc on device 1: %s", cu->last_error(cu_ctx));
        j->fails++;
        return NULL;
    }
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_ADD;
    op.n_out = 1;
    op.n_in = 2;
    op.params.scalar.value = 1;
    op.in[0] = op.in[1] = op.out[0] = vec(d, TORC_DTYPE_F32, N);
    int rc = cu->copy(cu_ctx, 1, d, h, sizeof h, TORC_COPY_HOST_TO_DEVICE, false);
    if (rc == TORC_OK) rc = cu->run(cu_ctx, 1, &op);
    if (rc == TORC_OK) rc = cu->copy(cu_ctx, 1, back, d, sizeof back, TORC_COPY_DEVICE_TO_HOST, false);
    if (rc != TORC_OK) {
        snprintf(j->why, sizeof j->why, "device 1: %s", cu->last_error(cu_ctx));
        j->fails++;
    } else {
        for (int i = 0; i < N; i++)
            if (back[i] != 2.0f * (float)i) {
                snprintf(j->why, sizeof j->why, "device 1 element %d: %g", i, back[i]);
                j->fails++;
                break;
            }
    }
    cu->free(cu_ctx, 1, d);
    return NULL;
}

// Two threads whose first torc call uses device 1 (set up by whichever wins), then this thread.
static int device1_main(void) {
    if (cu->device_count(cu_ctx) < 2) {
        printf("SKIP: needs 2 CUDA devices, found %d\n", cu->device_count(cu_ctx));
        return 77;
    }
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    dev1_job jobs[3] = {{&start, 0, ""}, {&start, 0, ""}, {NULL, 0, ""}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, dev1_work, &jobs[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    dev1_work(&jobs[2]);
    for (int i = 0; i < 3; i++) EXPECT(jobs[i].fails == 0, "thread %d: %s", i, jobs[i].why);
    printf("device 1: two threads and the main thread computed on it\n");
    return 0;
}

// No argument: the suite. --fault, --device1: one check in this process (see tests/cuda.cmake).
int main(int argc, char **argv) {
    char why[512];
    cu = load("cuda", &cu_lib, &cu_ctx, why, sizeof why);
    if (!cu) {
        printf("SKIP: no CUDA device (%s)\n", why);
        if (cu_lib) dlclose(cu_lib);
        return 77;
    }
    if (argc > 1 && strcmp(argv[1], "--fault") == 0) return fault_main();   // the context is gone: no shutdown
    if (argc > 1 && strcmp(argv[1], "--device1") == 0) {
        const int rc = device1_main();
        cu->shutdown(cu_ctx);
        return rc;
    }
    ref = load("reference", &ref_lib, &ref_ctx, why, sizeof why);
    if (!ref) {
        fprintf(stderr, "reference backend: %s\n", why);
        return 1;
    }
    Suite *s = suite_create("cuda_gpu");
    TCase *dev = tcase_create("device");
    tcase_set_timeout(dev, 300);
    tcase_add_test(dev, cublas_workspace_comes_from_the_allocator);   // first: the device's first matmul
    tcase_add_test(dev, device_info_describes_the_gpu);
    tcase_add_test(dev, copies_sync_and_async_round_trip);
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
    tcase_add_test(ops, matmul_matches_reference);
    tcase_add_test(ops, scaled_mm_matches_reference);
    tcase_add_test(ops, fp8_outputs_saturate_as_the_reference);
    tcase_add_test(ops, large_tensors_match_reference);
    tcase_add_test(ops, adam_step_matches_reference_bit_for_bit);
    tcase_add_test(ops, adam_step_list_matches_reference_bit_for_bit);
    tcase_add_test(ops, attention_large_matches_reference);
    suite_add_tcase(s, ops);
    // the kernels that share memory between threads (tools/cuda-sanitize.sh runs racecheck and
    // synccheck on these: over the whole of ops_vs_reference they take too long)
    TCase *shared = tcase_create("shared_memory_ops");
    tcase_set_timeout(shared, 1200);
    tcase_add_test(shared, reductions_match_reference);
    tcase_add_test(shared, max_dim_matches_reference);
    tcase_add_test(shared, softmax_matches_reference);
    tcase_add_test(shared, index_ops_match_reference);
    tcase_add_test(shared, layer_norm_matches_reference);
    tcase_add_test(shared, index_add_is_deterministic_in_index_order);
    tcase_add_test(shared, attention_matches_reference);
    suite_add_tcase(s, shared);
    TCase *large = tcase_create("beyond_2_31");
    tcase_set_timeout(large, 600);
    tcase_add_test(large, tensors_beyond_2_31_elements);
    suite_add_tcase(s, large);
    TCase *perf = tcase_create("performance");
    tcase_set_timeout(perf, 300);
    tcase_add_test(perf, performance_figures);
    tcase_add_test(perf, index_add_figures);
    tcase_add_test(perf, attention_gpt_figures);
    suite_add_tcase(s, perf);
    SRunner *r = srunner_create(s);
    srunner_set_fork_status(r, CK_NOFORK);  // the CUDA context lives in this process
    srunner_run_all(r, CK_NORMAL);
    const int failed = srunner_ntests_failed(r);
    srunner_free(r);
    cu->shutdown(cu_ctx);
    ref->shutdown(ref_ctx);
    dlclose(cu_lib);
    dlclose(ref_lib);
    return failed ? 1 : 0;
}
