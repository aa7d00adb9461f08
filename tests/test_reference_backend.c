// tests/test_reference_backend.c — the reference backend (every other backend's oracle) driven
// directly through its vtable: each opcode on contiguous, strided, broadcast and zero-size views.
// Expected values are exact where the math is; tools/golden/gen_reference_backend.py made the rest.
#include "ck.h"
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <torc/backend.h>
#include <torc/convert.h>
#include <torc/philox.h>

// ---- the plugin ----
static void *lib;
static const torc_backend_vtable *vt;
static void *vt_ctx;  // its init's context

// Every buffer a test allocates is tracked and freed in teardown (tests run leak-checked).
#define MAX_BUFS 4096
static void *bufs[MAX_BUFS];
static int nbufs;

static void *track(void *p) {
    ck_assert_ptr_nonnull(p);
    ck_assert_int_lt(nbufs, MAX_BUFS);
    bufs[nbufs++] = p;
    return p;
}

static void setup(void) {
    const char *dir = getenv("TORC_BUILD_DIR");
    ck_assert_msg(dir != NULL, "TORC_BUILD_DIR is not set");
    char path[4096];
    snprintf(path, sizeof path, "%s/lib/torc/libtorc_reference.so", dir);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "dlopen: %s", dlerror());
    torc_backend_entry_fn entry = (torc_backend_entry_fn)dlsym(lib, TORC_BACKEND_ENTRY_SYMBOL);
    ck_assert_ptr_nonnull(entry);
    vt = entry(TORC_BACKEND_ABI_VERSION);
    ck_assert_ptr_nonnull(vt);
    ck_assert_int_eq(vt->init(NULL, &vt_ctx), 0);
    nbufs = 0;
}

static void teardown(void) {
    for (int i = 0; i < nbufs; i++) free(bufs[i]);
    nbufs = 0;
    vt->shutdown(vt_ctx);
    dlclose(lib);
}

// ---- test-side element access (independent of the backend's own load/store) ----
static size_t dsize(torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_F64: case TORC_DTYPE_I64: return 8;
    case TORC_DTYPE_F32: case TORC_DTYPE_I32: return 4;
    case TORC_DTYPE_F16: case TORC_DTYPE_BF16: case TORC_DTYPE_I16: return 2;
    default: return 1;
    }
}

// Stores v (exactly representable in dt for integer dtypes) into *p.
static void put(void *p, torc_dtype dt, double v) {
    switch (dt) {
    case TORC_DTYPE_F64: memcpy(p, &v, 8); break;
    case TORC_DTYPE_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case TORC_DTYPE_F16: { uint16_t h = torc_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
    case TORC_DTYPE_BF16: { uint16_t h = torc_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    case TORC_DTYPE_F8_E4M3FN: *(uint8_t *)p = torc_f32_to_f8e4m3fn((float)v); break;
    case TORC_DTYPE_F8_E5M2: *(uint8_t *)p = torc_f32_to_f8e5m2((float)v); break;
    case TORC_DTYPE_I64: { int64_t i = (int64_t)v; memcpy(p, &i, 8); break; }
    case TORC_DTYPE_I32: { int32_t i = (int32_t)v; memcpy(p, &i, 4); break; }
    case TORC_DTYPE_I16: { int16_t i = (int16_t)v; memcpy(p, &i, 2); break; }
    case TORC_DTYPE_I8: *(int8_t *)p = (int8_t)v; break;
    case TORC_DTYPE_U8: *(uint8_t *)p = (uint8_t)v; break;
    case TORC_DTYPE_BOOL: *(uint8_t *)p = v != 0; break;
    default: ck_abort_msg("bad dtype");
    }
}

static int64_t geti(const void *p, torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_I64: { int64_t i; memcpy(&i, p, 8); return i; }
    case TORC_DTYPE_I32: { int32_t i; memcpy(&i, p, 4); return i; }
    case TORC_DTYPE_I16: { int16_t i; memcpy(&i, p, 2); return i; }
    case TORC_DTYPE_I8: return *(const int8_t *)p;
    case TORC_DTYPE_U8: case TORC_DTYPE_BOOL: return *(const uint8_t *)p;
    default: ck_abort_msg("geti on a floating dtype"); return 0;
    }
}

static double get(const void *p, torc_dtype dt) {
    switch (dt) {
    case TORC_DTYPE_F64: { double d; memcpy(&d, p, 8); return d; }
    case TORC_DTYPE_F32: { float f; memcpy(&f, p, 4); return f; }
    case TORC_DTYPE_F16: { uint16_t h; memcpy(&h, p, 2); return torc_f16_to_f32(h); }
    case TORC_DTYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return torc_bf16_to_f32(h); }
    case TORC_DTYPE_F8_E4M3FN: return torc_f8e4m3fn_to_f32(*(const uint8_t *)p);
    case TORC_DTYPE_F8_E5M2: return torc_f8e5m2_to_f32(*(const uint8_t *)p);
    default: return (double)geti(p, dt);
    }
}

// ---- tensors ----
#define SH(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
#define V(...) ((const double[]){__VA_ARGS__})
#define I(...) ((const int64_t[]){__VA_ARGS__})

// A contiguous tensor filled with vals (row-major; NULL: every byte 0xAB, to catch unwritten
// elements).
static torc_operand tensor(torc_dtype dt, int ndim, const int64_t *shape, const double *vals) {
    torc_operand t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.ndim = ndim;
    int64_t n = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        t.shape[d] = shape[d];
        t.stride[d] = n;
        n *= shape[d];
    }
    t.data = track(malloc((size_t)(n > 0 ? n : 1) * dsize(dt)));
    if (vals) for (int64_t i = 0; i < n; i++) put((char *)t.data + i * (int64_t)dsize(dt), dt, vals[i]);
    else memset(t.data, 0xAB, (size_t)(n > 0 ? n : 1) * dsize(dt));
    return t;
}

// A view with explicit strides over a fresh storage of `storage` elements filled with vals.
static torc_operand strided(torc_dtype dt, int ndim, const int64_t *shape, const int64_t *stride, int64_t storage,
                            const double *vals) {
    torc_operand t = tensor(dt, 1, (int64_t[]){storage}, vals);
    t.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        t.shape[d] = shape[d];
        t.stride[d] = stride[d];
    }
    return t;
}

static torc_operand transposed(torc_operand t, int a, int b) {
    int64_t s = t.shape[a], st = t.stride[a];
    t.shape[a] = t.shape[b], t.stride[a] = t.stride[b];
    t.shape[b] = s, t.stride[b] = st;
    return t;
}

static int64_t numel(const torc_operand *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

// Address of the element at row-major linear index i of the (possibly strided) view.
static const char *at(const torc_operand *t, int64_t i) {
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (i % t->shape[d]) * t->stride[d];
        i /= t->shape[d];
    }
    return (const char *)t->data + off * (int64_t)dsize(t->dtype);
}

static double val(const torc_operand *t, int64_t i) { return get(at(t, i), t->dtype); }
static int64_t ival(const torc_operand *t, int64_t i) { return geti(at(t, i), t->dtype); }

// Exact comparison of every element (NaN matches NaN, and the sign of zero matters).
static void expect_vals_(const torc_operand *t, const double *exp, int line) {
    for (int64_t i = 0; i < numel(t); i++) {
        const double v = val(t, i);
        const bool ok = (isnan(v) && isnan(exp[i])) || (v == exp[i] && signbit(v) == signbit(exp[i]));
        ck_assert_msg(ok, "line %d: element %lld is %.17g, expected %.17g", line, (long long)i, v, exp[i]);
    }
}
#define expect_vals(t, exp) expect_vals_(&(t), (exp), __LINE__)

static void expect_close_(const torc_operand *t, const double *exp, double rtol, double atol, int line) {
    for (int64_t i = 0; i < numel(t); i++) {
        const double v = val(t, i);
        const bool ok = (isnan(v) && isnan(exp[i])) || v == exp[i] || fabs(v - exp[i]) <= atol + rtol * fabs(exp[i]);
        ck_assert_msg(ok, "line %d: element %lld is %.17g, expected %.17g", line, (long long)i, v, exp[i]);
    }
}
#define expect_close(t, exp, rtol, atol) expect_close_(&(t), (exp), (rtol), (atol), __LINE__)

static void expect_ints_(const torc_operand *t, const int64_t *exp, int line) {
    for (int64_t i = 0; i < numel(t); i++)
        ck_assert_msg(ival(t, i) == exp[i], "line %d: element %lld is %lld, expected %lld", line, (long long)i,
                      (long long)ival(t, i), (long long)exp[i]);
}
#define expect_ints(t, exp) expect_ints_(&(t), (exp), __LINE__)

// ---- ops ----
static torc_op mkop(torc_opcode code, torc_operand out, int n_in, const torc_operand *in) {
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = code;
    op.n_out = 1;
    op.n_in = n_in;
    for (int i = 0; i < n_in; i++) op.in[i] = in[i];
    op.out[0] = out;
    return op;
}
#define OP(code, out, ...) mkop((code), (out), (int)(sizeof((torc_operand[]){__VA_ARGS__}) / sizeof(torc_operand)), \
                                (torc_operand[]){__VA_ARGS__})
#define OP0(code, out) mkop((code), (out), 0, NULL)

static void run_ok_(const torc_op *op, int line) {
    ck_assert_msg(vt->supports(vt_ctx, 0, op), "line %d: supports() is false for opcode %d", line, (int)op->code);
    const int st = vt->run(vt_ctx, 0, op);
    ck_assert_msg(st == TORC_OK, "line %d: run failed (%d): %s", line, st, vt->last_error(vt_ctx));
}
#define run_ok(op) run_ok_(&(op), __LINE__)

// Runs an op that must fail with `status` and a message containing `text`.
static void run_fails_(const torc_op *op, int status, const char *text, int line) {
    const int st = vt->run(vt_ctx, 0, op);
    ck_assert_msg(st == status, "line %d: expected status %d, got %d (%s)", line, status, st, vt->last_error(vt_ctx));
    ck_assert_msg(strstr(vt->last_error(vt_ctx), text) != NULL, "line %d: message '%s' lacks '%s'", line,
                  vt->last_error(vt_ctx), text);
}
#define run_fails(op, status, text) run_fails_(&(op), (status), (text), __LINE__)

static const torc_dtype float_dtypes[] = {TORC_DTYPE_F64, TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16};

// ============================ the vtable ============================
START_TEST(test_vtable_and_device) {
    ck_assert_uint_eq(vt->abi_version, TORC_BACKEND_ABI_VERSION);
    ck_assert_uint_eq(vt->struct_size, sizeof(torc_backend_vtable));
    ck_assert_str_eq(vt->name, "reference");
    ck_assert_int_eq(vt->device_count(vt_ctx), 1);
    // It takes no options: any is refused by name.
    void *c = NULL;
    ck_assert_int_eq(vt->init((const char *const[]){"num_threads=2", NULL}, &c), TORC_ERR_INVALID_ARG);
    ck_assert_str_eq(vt->last_error(NULL), "reference backend: unknown option 'num_threads=2' (it takes no options)");
    ck_assert_ptr_null(c);
    ck_assert_ptr_null(vt->memory_stats);
    ck_assert_ptr_null(vt->empty_cache);
    torc_device_info info = {.struct_size = sizeof info};  // as the core passes it: zeroed, sized
    ck_assert_int_eq(vt->device_info(vt_ctx, 0, &info), 0);
    ck_assert(info.host_memory);
    ck_assert(strlen(info.name) > 0);
    ck_assert_uint_gt(info.total_memory, 0);
    for (int d = 0; d < TORC_DTYPE_COUNT; d++) ck_assert(info.peak_flops[d] == 0.0);
    ck_assert_str_eq(info.peak_source, "reference backend: no promise");
    ck_assert_int_ne(vt->device_info(vt_ctx, 1, &info), 0);
    ck_assert_int_eq(vt->synchronize(vt_ctx, 0), 0);
    // A host of another major version gets NULL.
    torc_backend_entry_fn entry = (torc_backend_entry_fn)dlsym(lib, TORC_BACKEND_ENTRY_SYMBOL);
    ck_assert_ptr_null(entry((TORC_BACKEND_ABI_MAJOR + 1u) << 16));
    // The plugin exports nothing else.
    ck_assert_ptr_null(dlsym(lib, "ref_error"));
    ck_assert_ptr_null(dlsym(lib, "ref_iter_run"));
}
END_TEST

START_TEST(test_alloc_copy) {
    void *a = vt->alloc(vt_ctx, 0, 100), *z = vt->alloc(vt_ctx, 0, 0);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(z);
    ck_assert_uint_eq((uintptr_t)a % 64, 0);
    ck_assert_uint_eq((uintptr_t)z % 64, 0);
    char src[100];
    for (int i = 0; i < 100; i++) src[i] = (char)i;
    ck_assert_int_eq(vt->copy(vt_ctx, 0, a, src, 100, TORC_COPY_HOST_TO_DEVICE, false), 0);
    char back[100];
    ck_assert_int_eq(vt->copy(vt_ctx, 0, back, a, 100, TORC_COPY_DEVICE_TO_HOST, true), 0);
    ck_assert_int_eq(memcmp(src, back, 100), 0);
    ck_assert_int_eq(vt->copy(vt_ctx, 0, z, a, 0, TORC_COPY_DEVICE_TO_DEVICE, false), 0);
    vt->free(vt_ctx, 0, a);
    vt->free(vt_ctx, 0, z);
    vt->free(vt_ctx, 0, NULL);
}
END_TEST

// ============================ fills and copies ============================
START_TEST(test_fill) {
    // Every other element of a 2x3 view (stride 2 inside a 12-element storage).
    torc_operand o = strided(TORC_DTYPE_F32, SH(2, 3), I(6, 2), 12, V(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
    torc_op op = OP0(TORC_OP_FILL, o);
    op.params.scalar.value = 3.5;
    run_ok(op);
    const float *f = o.data;
    for (int i = 0; i < 12; i++) ck_assert(f[i] == (i % 2 == 0 ? 3.5f : 0.0f));

    struct { torc_dtype dt; double v; double expect; } cases[] = {
        {TORC_DTYPE_I32, 3.7, 3}, {TORC_DTYPE_I32, -3.7, -3}, {TORC_DTYPE_U8, -1.0, 255},
        {TORC_DTYPE_I8, 300.7, 44}, {TORC_DTYPE_BOOL, 0.5, 1}, {TORC_DTYPE_BOOL, NAN, 1},
        {TORC_DTYPE_F16, 1e-8, 0.0},  // f16 underflows, bf16 keeps it
        {TORC_DTYPE_BF16, 1e-8, 1.0011717677116394e-08}, {TORC_DTYPE_BF16, 1.0 / 3, 0.333984375},
        {TORC_DTYPE_F8_E4M3FN, 0.3, 0.3125}, {TORC_DTYPE_F8_E5M2, 1e5, INFINITY},
        {TORC_DTYPE_I64, -9007199254740992.0, -9007199254740992.0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        torc_operand t = tensor(cases[c].dt, SH(3), NULL);
        op = OP0(TORC_OP_FILL, t);
        op.params.scalar.value = cases[c].v;
        run_ok(op);
        expect_vals(t, V(cases[c].expect, cases[c].expect, cases[c].expect));
    }
    // A 0-dim tensor has one element; a zero-size one has none (and may have NULL data).
    torc_operand s = tensor(TORC_DTYPE_F64, 0, NULL, NULL);
    op = OP0(TORC_OP_FILL, s);
    op.params.scalar.value = -2.0;
    run_ok(op);
    ck_assert(*(double *)s.data == -2.0);
    torc_operand e = tensor(TORC_DTYPE_F32, SH(0, 4), NULL);
    e.data = NULL;
    op = OP0(TORC_OP_FILL, e);
    run_ok(op);
}
END_TEST

START_TEST(test_copy_casts) {
    // Float -> integer as PyTorch on x86 (golden: torch 2.15): int64 and uint8 convert through
    // int64 (NaN and out-of-range give INT64_MIN), int32/int16/int8 through int32 (INT32_MIN).
    const double src[] = {4294967301.0, 3e9, -3e9, 1e20, NAN, INFINITY, -1.0, 65541.0, 2147483648.0, -2147483649.0};
    struct { torc_dtype dt; int64_t exp[10]; } cases[] = {
        {TORC_DTYPE_I64, {4294967301, 3000000000, -3000000000, INT64_MIN, INT64_MIN, INT64_MIN, -1, 65541,
                          2147483648, -2147483649}},
        {TORC_DTYPE_I32, {INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, -1, 65541, INT32_MIN,
                          INT32_MIN}},
        {TORC_DTYPE_I16, {0, 0, 0, 0, 0, 0, -1, 5, 0, 0}},
        {TORC_DTYPE_I8, {0, 0, 0, 0, 0, 0, -1, 5, 0, 0}},
        {TORC_DTYPE_U8, {5, 0, 0, 0, 0, 0, 255, 5, 0, 255}},
        {TORC_DTYPE_BOOL, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
    };
    torc_operand in = tensor(TORC_DTYPE_F64, SH(10), src);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        torc_operand o = tensor(cases[c].dt, SH(10), NULL);
        torc_op op = OP(TORC_OP_COPY, o, in);
        run_ok(op);
        expect_ints(o, cases[c].exp);
    }
    // f32 source: 4294967301 rounds to 2^32 first.
    torc_operand in32 = tensor(TORC_DTYPE_F32, SH(3), V(4294967301.0, -2.9, 2.9));
    torc_operand o = tensor(TORC_DTYPE_I64, SH(3), NULL);
    torc_op op = OP(TORC_OP_COPY, o, in32);
    run_ok(op);
    expect_ints(o, I(4294967296, -2, 2));
    // Integer -> float rounds once (int64 -> float -> narrow, as c10); bool -> 0/1.
    torc_operand big = tensor(TORC_DTYPE_I64, SH(3), NULL);
    ((int64_t *)big.data)[0] = 16777217;
    ((int64_t *)big.data)[1] = INT64_C(4611686018427387905);
    ((int64_t *)big.data)[2] = -7;
    o = tensor(TORC_DTYPE_F32, SH(3), NULL);
    op = OP(TORC_OP_COPY, o, big);
    run_ok(op);
    expect_vals(o, V(16777216.0, 4611686018427387904.0, -7));
    o = tensor(TORC_DTYPE_F16, SH(3), NULL);
    op = OP(TORC_OP_COPY, o, big);
    run_ok(op);
    expect_vals(o, V(INFINITY, INFINITY, -7));
    // Integer -> integer wraps; -> bool is != 0.
    torc_operand ints = tensor(TORC_DTYPE_I32, SH(4), V(-1, 256, 300, 0));
    o = tensor(TORC_DTYPE_U8, SH(4), NULL);
    op = OP(TORC_OP_COPY, o, ints);
    run_ok(op);
    expect_ints(o, I(255, 0, 44, 0));
    o = tensor(TORC_DTYPE_BOOL, SH(4), NULL);
    op = OP(TORC_OP_COPY, o, ints);
    run_ok(op);
    expect_ints(o, I(1, 1, 1, 0));
    // f32 -> bf16/f16/fp8 round to nearest even.
    torc_operand fl = tensor(TORC_DTYPE_F32, SH(3), V(1.00390625, 65520.0, 0.3));
    o = tensor(TORC_DTYPE_BF16, SH(3), NULL);
    op = OP(TORC_OP_COPY, o, fl);
    run_ok(op);
    expect_vals(o, V(1.0, 65536.0, 0.30078125));
    o = tensor(TORC_DTYPE_F16, SH(3), NULL);
    op = OP(TORC_OP_COPY, o, fl);
    run_ok(op);
    expect_vals(o, V(1.00390625, INFINITY, 0.300048828125));
    o = tensor(TORC_DTYPE_F8_E5M2, SH(3), NULL);
    op = OP(TORC_OP_COPY, o, fl);
    run_ok(op);
    expect_vals(o, V(1.0, INFINITY, 0.3125));
}
END_TEST

START_TEST(test_copy_strided) {
    // Transposed source, stepped destination, broadcast (stride-0) source, per dtype.
    const double v[] = {1, 2, 3, 4, 5, 6};
    for (int t = TORC_DTYPE_F64; t < TORC_DTYPE_COUNT; t++) {
        const torc_dtype dt = (torc_dtype)t;
        torc_operand in = transposed(tensor(dt, SH(2, 3), v), 0, 1);  // (3, 2): 1 4 / 2 5 / 3 6
        torc_operand o = strided(TORC_DTYPE_F64, SH(3, 2), I(4, 2), 12, NULL);
        torc_op op = OP(TORC_OP_COPY, o, in);
        run_ok(op);
        if (dt == TORC_DTYPE_BOOL) expect_vals(o, V(1, 1, 1, 1, 1, 1));
        else expect_vals(o, V(1, 4, 2, 5, 3, 6));
        const double *raw = o.data;
        ck_assert_uint_eq(((const uint64_t *)raw)[1], UINT64_C(0xABABABABABABABAB));  // untouched gap
    }
    torc_operand row = tensor(TORC_DTYPE_I32, SH(3), V(7, 8, 9));
    row.ndim = 2, row.shape[0] = 2, row.shape[1] = 3, row.stride[0] = 0, row.stride[1] = 1;
    torc_operand o = tensor(TORC_DTYPE_I64, SH(2, 3), NULL);
    torc_op op = OP(TORC_OP_COPY, o, row);
    run_ok(op);
    expect_ints(o, I(7, 8, 9, 7, 8, 9));
    // Same dtype, contiguous: the memcpy path; a zero-size copy touches nothing.
    torc_operand a = tensor(TORC_DTYPE_BF16, SH(2, 3), v), b = tensor(TORC_DTYPE_BF16, SH(2, 3), NULL);
    op = OP(TORC_OP_COPY, b, a);
    run_ok(op);
    expect_vals(b, v);
    torc_operand e0 = tensor(TORC_DTYPE_F32, SH(3, 0), NULL), e1 = tensor(TORC_DTYPE_F32, SH(3, 0), NULL);
    e0.data = e1.data = NULL;
    op = OP(TORC_OP_COPY, e1, e0);
    run_ok(op);
}
END_TEST

START_TEST(test_arange_linspace) {
    torc_operand o = tensor(TORC_DTYPE_F32, SH(10), NULL);
    torc_op op = OP0(TORC_OP_ARANGE, o);
    op.params.range.start = 0, op.params.range.step = 0.1, op.params.range.end = 1;
    run_ok(op);
    // torch.arange(0, 1, 0.1): start + i*step in double, rounded once to float.
    expect_vals(o, V(0.0, 0.10000000149011612, 0.20000000298023224, 0.30000001192092896, 0.4000000059604645, 0.5,
                     0.6000000238418579, 0.699999988079071, 0.800000011920929, 0.8999999761581421));
    // Integer arange truncates start and step first: arange(0.5, 5, 1.5, int64) counts 0, 1, 2, 3.
    o = strided(TORC_DTYPE_I64, SH(4), I(2), 8, NULL);
    op = OP0(TORC_OP_ARANGE, o);
    op.params.range.start = 0.5, op.params.range.step = 1.5, op.params.range.end = 5;
    run_ok(op);
    expect_ints(o, I(0, 1, 2, 3));
    o = tensor(TORC_DTYPE_I32, SH(3), NULL);
    op = OP0(TORC_OP_ARANGE, o);
    op.params.range.start = -3, op.params.range.step = 2.5, op.params.range.end = 3;
    run_ok(op);
    expect_ints(o, I(-3, -1, 1));
    o = tensor(TORC_DTYPE_BOOL, SH(3), NULL);
    op = OP0(TORC_OP_ARANGE, o);
    ck_assert(!vt->supports(vt_ctx, 0, &op));
    run_fails(op, TORC_ERR_DTYPE, "not implemented for 'Bool'");

    o = tensor(TORC_DTYPE_F64, SH(7), NULL);
    op = OP0(TORC_OP_LINSPACE, o);
    op.params.range.start = -1, op.params.range.end = 1, op.params.range.count = 7;
    run_ok(op);
    // torch prints 5.55e-17 for the middle element (its build contracts end - step*3 into an FMA);
    // the formula without contraction gives 0.
    expect_close(o, V(-1.0, -0.6666666666666667, -0.33333333333333337, 5.551115123125783e-17, 0.33333333333333337,
                      0.6666666666666667, 1.0), 0, 1e-16);
    ck_assert(val(&o, 0) == -1.0 && val(&o, 6) == 1.0);  // both ends exact
    o = tensor(TORC_DTYPE_I64, SH(4), NULL);
    op = OP0(TORC_OP_LINSPACE, o);
    op.params.range.start = -1.5, op.params.range.end = 10, op.params.range.count = 4;
    run_ok(op);
    expect_ints(o, I(-1, 2, 6, 10));
    o = tensor(TORC_DTYPE_BF16, SH(5), NULL);
    op = OP0(TORC_OP_LINSPACE, o);
    op.params.range.start = 0, op.params.range.end = 1, op.params.range.count = 5;
    run_ok(op);
    expect_vals(o, V(0, 0.25, 0.5, 0.75, 1));
    o = tensor(TORC_DTYPE_F32, SH(1), NULL);
    op = OP0(TORC_OP_LINSPACE, o);
    op.params.range.start = 4, op.params.range.end = 9, op.params.range.count = 1;
    run_ok(op);
    expect_vals(o, V(4));
    op.params.range.count = 2;
    run_fails(op, TORC_ERR_SHAPE, "range.count");
    o = tensor(TORC_DTYPE_F32, SH(2, 2), NULL);
    op = OP0(TORC_OP_LINSPACE, o);
    op.params.range.count = 4;
    run_fails(op, TORC_ERR_SHAPE, "1-D");
}
END_TEST

// ============================ binary arithmetic ============================
START_TEST(test_add_sub_mul_div_float) {
    const double av[] = {1, 2, 3, 4, 5, 6}, bv[] = {0.5, -1, 2, 8, 0, 3};
    for (size_t t = 0; t < sizeof float_dtypes / sizeof float_dtypes[0]; t++) {
        const torc_dtype dt = float_dtypes[t];
        torc_operand a = tensor(dt, SH(2, 3), av), b = tensor(dt, SH(2, 3), bv), o = tensor(dt, SH(2, 3), NULL);
        torc_op op = OP(TORC_OP_ADD, o, a, b);
        op.params.scalar.value = 2.0;  // alpha
        run_ok(op);
        expect_vals(o, V(2, 0, 7, 20, 5, 12));
        op.code = TORC_OP_SUB;
        op.n_out = 1;
        op.params.scalar.value = 1.0;
        run_ok(op);
        expect_vals(o, V(0.5, 3, 1, -4, 5, 3));
        op.code = TORC_OP_MUL;
        op.n_out = 1;
        run_ok(op);
        expect_vals(o, V(0.5, -2, 6, 32, 0, 18));
        op.code = TORC_OP_DIV;
        op.n_out = 1;
        run_ok(op);
        expect_vals(o, V(2, -2, 1.5, 0.5, INFINITY, 2));
    }
    // Rounding once to the out dtype: bf16 1 + 2^-8 ties to even (1.0); f16 65504 + 16 -> inf.
    torc_operand a = tensor(TORC_DTYPE_BF16, SH(1), V(1.0)), b = tensor(TORC_DTYPE_BF16, SH(1), V(0.00390625));
    torc_operand o = tensor(TORC_DTYPE_BF16, SH(1), NULL);
    torc_op op = OP(TORC_OP_ADD, o, a, b);
    op.params.scalar.value = 1.0;
    run_ok(op);
    expect_vals(o, V(1.0));
    a = tensor(TORC_DTYPE_F16, SH(1), V(65504)), b = tensor(TORC_DTYPE_F16, SH(1), V(16));
    o = tensor(TORC_DTYPE_F16, SH(1), NULL);
    op = OP(TORC_OP_ADD, o, a, b);
    op.params.scalar.value = 1.0;
    run_ok(op);
    expect_vals(o, V(INFINITY));
    // Mixed inputs: bf16 + f32 into f32 (the frontend promoted; the backend converts on load).
    a = tensor(TORC_DTYPE_BF16, SH(2), V(1.5, 2)), b = tensor(TORC_DTYPE_F32, SH(2), V(0.1, 0.2));
    o = tensor(TORC_DTYPE_F32, SH(2), NULL);
    op = OP(TORC_OP_MUL, o, a, b);
    run_ok(op);
    expect_vals(o, V((double)(1.5f * 0.1f), (double)(2.0f * 0.2f)));
    // Inputs are cast to the computation (out) dtype first, as PyTorch: int64 16777217 + f32 1 is
    // 16777216 + 1 in float32 = 16777216 (torch golden), not 16777218.
    torc_operand big = tensor(TORC_DTYPE_I64, SH(1), V(16777217)), one = tensor(TORC_DTYPE_F32, SH(1), V(1));
    o = tensor(TORC_DTYPE_F32, SH(1), NULL);
    op = OP(TORC_OP_ADD, o, big, one);
    op.params.scalar.value = 1.0;
    run_ok(op);
    expect_vals(o, V(16777216));
    // fp8 arithmetic computes in double and rounds once to fp8.
    a = tensor(TORC_DTYPE_F8_E4M3FN, SH(2), V(1.5, 3)), b = tensor(TORC_DTYPE_F8_E4M3FN, SH(2), V(0.125, 0.5));
    o = tensor(TORC_DTYPE_F8_E4M3FN, SH(2), NULL);
    op = OP(TORC_OP_ADD, o, a, b);
    op.params.scalar.value = 1.0;
    run_ok(op);
    expect_vals(o, V(1.625, 3.5));
}
END_TEST

START_TEST(test_binary_strided_broadcast) {
    // in0 transposed (3x2 storage read as 2x3), in1 a row broadcast over dim 0 (stride 0),
    // out written into every other column of a 2x6 buffer.
    for (size_t t = 0; t < sizeof float_dtypes / sizeof float_dtypes[0]; t++) {
        const torc_dtype dt = float_dtypes[t];
        torc_operand a = transposed(tensor(dt, SH(3, 2), V(1, 4, 2, 5, 3, 6)), 0, 1);  // [[1,2,3],[4,5,6]]
        torc_operand b = strided(dt, SH(2, 3), I(0, 1), 3, V(10, 20, 30));
        torc_operand o = strided(dt, SH(2, 3), I(6, 2), 12, NULL);
        torc_op op = OP(TORC_OP_SUB, o, a, b);
        op.params.scalar.value = 0.5;
        run_ok(op);
        expect_vals(o, V(-4, -8, -12, -1, -5, -9));
    }
    // Both inputs broadcast from a 0-dim scalar and a column: out (3, 2).
    torc_operand s = strided(TORC_DTYPE_I64, SH(3, 2), I(0, 0), 1, V(100));
    torc_operand col = strided(TORC_DTYPE_I64, SH(3, 2), I(1, 0), 3, V(1, 2, 3));
    torc_operand o = tensor(TORC_DTYPE_I64, SH(3, 2), NULL);
    torc_op op = OP(TORC_OP_MUL, o, s, col);
    run_ok(op);
    expect_ints(o, I(100, 100, 200, 200, 300, 300));
    // Zero-size: nothing happens, NULL data is fine.
    torc_operand e = tensor(TORC_DTYPE_F32, SH(0, 3), NULL);
    e.data = NULL;
    op = OP(TORC_OP_ADD, e, e, e);
    op.params.scalar.value = 1.0;
    run_ok(op);
}
END_TEST

START_TEST(test_binary_integer) {
    // int32 wraps like PyTorch; uint8 wraps; int64 overflow wraps without UB.
    torc_operand a = tensor(TORC_DTYPE_I32, SH(3), V(2147483647, -2147483648.0, 7));
    torc_operand b = tensor(TORC_DTYPE_I32, SH(3), V(1, 1, -3));
    torc_operand o = tensor(TORC_DTYPE_I32, SH(3), NULL);
    torc_op op = OP(TORC_OP_ADD, o, a, b);
    op.params.scalar.value = 1.0;
    run_ok(op);
    expect_ints(o, I(INT32_MIN, -2147483647, 4));
    op.code = TORC_OP_SUB;
    op.n_out = 1;
    run_ok(op);
    expect_ints(o, I(2147483646, INT32_MAX, 10));
    op.code = TORC_OP_MUL;
    op.n_out = 1;
    run_ok(op);
    expect_ints(o, I(2147483647, INT32_MIN, -21));
    op.code = TORC_OP_ADD;
    op.n_out = 1;
    op.params.scalar.value = -2.0;  // integer alpha
    run_ok(op);
    expect_ints(o, I(2147483645, 2147483646, 13));
    op.params.scalar.value = 0.5;
    run_fails(op, TORC_ERR_INVALID_ARG, "alpha must not be a floating point number");

    torc_operand u = tensor(TORC_DTYPE_U8, SH(3), V(250, 3, 0)), v = tensor(TORC_DTYPE_U8, SH(3), V(10, 5, 1));
    o = tensor(TORC_DTYPE_U8, SH(3), NULL);
    op = OP(TORC_OP_ADD, o, u, v);
    op.params.scalar.value = 1.0;
    run_ok(op);
    expect_ints(o, I(4, 8, 1));
    op.code = TORC_OP_SUB;
    op.n_out = 1;
    run_ok(op);
    expect_ints(o, I(240, 254, 255));
    op.code = TORC_OP_MUL;
    op.n_out = 1;
    run_ok(op);
    expect_ints(o, I(196, 15, 0));

    torc_operand l = tensor(TORC_DTYPE_I64, SH(2), NULL), m = tensor(TORC_DTYPE_I64, SH(2), NULL);
    ((int64_t *)l.data)[0] = INT64_MAX, ((int64_t *)l.data)[1] = INT64_MIN;
    ((int64_t *)m.data)[0] = 2, ((int64_t *)m.data)[1] = 3;
    o = tensor(TORC_DTYPE_I64, SH(2), NULL);
    op = OP(TORC_OP_MUL, o, l, m);
    run_ok(op);
    expect_ints(o, I(-2, INT64_MIN));
    op.code = TORC_OP_ADD;
    op.n_out = 1;
    op.params.scalar.value = 1.0;
    run_ok(op);
    expect_ints(o, I(INT64_MIN + 1, INT64_MIN + 3));

    // Bool add is a logical or, mul a logical and; bool - bool is PyTorch's error.
    torc_operand p = tensor(TORC_DTYPE_BOOL, SH(4), V(0, 0, 1, 1)), q = tensor(TORC_DTYPE_BOOL, SH(4), V(0, 1, 0, 1));
    o = tensor(TORC_DTYPE_BOOL, SH(4), NULL);
    op = OP(TORC_OP_ADD, o, p, q);
    op.params.scalar.value = 1.0;
    run_ok(op);
    expect_ints(o, I(0, 1, 1, 1));
    op.code = TORC_OP_MUL;
    op.n_out = 1;
    run_ok(op);
    expect_ints(o, I(0, 0, 0, 1));
    op.code = TORC_OP_SUB;
    op.n_out = 1;
    ck_assert(!vt->supports(vt_ctx, 0, &op));
    run_fails(op, TORC_ERR_DTYPE, "Subtraction, the `-` operator, with two bool tensors is not supported.");

    // True division of integers writes floating; an integer out is not supported.
    torc_operand x = tensor(TORC_DTYPE_I32, SH(3), V(1, 2, 3)), y = tensor(TORC_DTYPE_I32, SH(3), V(3, 4, 0));
    o = tensor(TORC_DTYPE_F32, SH(3), NULL);
    op = OP(TORC_OP_DIV, o, x, y);
    run_ok(op);
    expect_vals(o, V((double)(1.0f / 3.0f), 0.5, INFINITY));
    o = tensor(TORC_DTYPE_I32, SH(3), NULL);
    op = OP(TORC_OP_DIV, o, x, y);
    ck_assert(!vt->supports(vt_ctx, 0, &op));
    run_fails(op, TORC_ERR_DTYPE, "\"div\" not implemented");
}
END_TEST

// ============================ matmul ============================
START_TEST(test_matmul_basic) {
    const double av[] = {1, 2, 3, 4, 5, 6}, bv[] = {7, 8, 9, 10, 11, 12};
    const torc_dtype dts[] = {TORC_DTYPE_F64, TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16, TORC_DTYPE_I64,
                              TORC_DTYPE_I32};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        torc_operand a = tensor(dts[t], SH(2, 3), av), b = tensor(dts[t], SH(3, 2), bv);
        torc_operand o = tensor(dts[t], SH(2, 2), NULL);
        torc_op op = OP(TORC_OP_MATMUL, o, a, b);
        run_ok(op);
        expect_vals(o, V(58, 64, 139, 154));
        // Transposed operands: a^T stored (3, 2), b^T stored (2, 3); out transposed too.
        torc_operand at = transposed(tensor(dts[t], SH(3, 2), V(1, 4, 2, 5, 3, 6)), 0, 1);
        torc_operand bt = transposed(tensor(dts[t], SH(2, 3), V(7, 9, 11, 8, 10, 12)), 0, 1);
        torc_operand ot = transposed(tensor(dts[t], SH(2, 2), NULL), 0, 1);
        op = OP(TORC_OP_MATMUL, ot, at, bt);
        run_ok(op);
        expect_vals(ot, V(58, 64, 139, 154));
        ck_assert(val(&ot, 1) == 64 && get((char *)ot.data + dsize(dts[t]), dts[t]) == 139);
    }
    // bf16 x bf16 -> f32 accumulates in double and rounds once: 256 + 1 + 1 stays 258 in f32.
    torc_operand a = tensor(TORC_DTYPE_BF16, SH(1, 3), V(256, 1, 1)), b = tensor(TORC_DTYPE_BF16, SH(3, 1), V(1, 1, 1));
    torc_operand o = tensor(TORC_DTYPE_F32, SH(1, 1), NULL);
    torc_op op = OP(TORC_OP_MATMUL, o, a, b);
    run_ok(op);
    expect_vals(o, V(258));
    o = tensor(TORC_DTYPE_BF16, SH(1, 1), NULL);  // bf16 out: 258 rounds to 258 (256 + 2)
    op = OP(TORC_OP_MATMUL, o, a, b);
    run_ok(op);
    expect_vals(o, V(258));
    // fp8 inputs, f32 out.
    a = tensor(TORC_DTYPE_F8_E4M3FN, SH(1, 2), V(1.5, -2)), b = tensor(TORC_DTYPE_F8_E4M3FN, SH(2, 1), V(4, 0.25));
    o = tensor(TORC_DTYPE_F32, SH(1, 1), NULL);
    op = OP(TORC_OP_MATMUL, o, a, b);
    run_ok(op);
    expect_vals(o, V(5.5));
    // uint8 wraps like PyTorch's uint8 mm: 200*2 + 100*1 = 500 -> 244.
    a = tensor(TORC_DTYPE_U8, SH(1, 2), V(200, 100)), b = tensor(TORC_DTYPE_U8, SH(2, 1), V(2, 1));
    o = tensor(TORC_DTYPE_U8, SH(1, 1), NULL);
    op = OP(TORC_OP_MATMUL, o, a, b);
    run_ok(op);
    expect_ints(o, I(244));
    // bool has no matmul; a floating input with an integer out neither.
    a = tensor(TORC_DTYPE_BOOL, SH(1, 1), V(1)), o = tensor(TORC_DTYPE_BOOL, SH(1, 1), NULL);
    op = OP(TORC_OP_MATMUL, o, a, a);
    ck_assert(!vt->supports(vt_ctx, 0, &op));
    run_fails(op, TORC_ERR_DTYPE, "not implemented for 'Bool'");
    a = tensor(TORC_DTYPE_F32, SH(1, 1), V(1)), o = tensor(TORC_DTYPE_I64, SH(1, 1), NULL);
    op = OP(TORC_OP_MATMUL, o, a, a);
    ck_assert(!vt->supports(vt_ctx, 0, &op));
}
END_TEST

START_TEST(test_matmul_batched_and_edges) {
    // Batch 2: in0 (2, 2, 2); in1 (2, 2, 2) broadcast from one matrix (batch stride 0).
    torc_operand a = tensor(TORC_DTYPE_F32, SH(2, 2, 2), V(1, 2, 3, 4, 5, 6, 7, 8));
    torc_operand b = strided(TORC_DTYPE_F32, SH(2, 2, 2), I(0, 2, 1), 4, V(1, 0, 1, 1));
    torc_operand o = tensor(TORC_DTYPE_F32, SH(2, 2, 2), NULL);
    torc_op op = OP(TORC_OP_MATMUL, o, a, b);
    run_ok(op);
    expect_vals(o, V(3, 2, 7, 4, 11, 6, 15, 8));
    // K = 0: out is all zeros. M = 0: nothing to do.
    a = tensor(TORC_DTYPE_F64, SH(2, 0), NULL), b = tensor(TORC_DTYPE_F64, SH(0, 3), NULL);
    o = tensor(TORC_DTYPE_F64, SH(2, 3), NULL);
    op = OP(TORC_OP_MATMUL, o, a, b);
    run_ok(op);
    expect_vals(o, V(0, 0, 0, 0, 0, 0));
    a = tensor(TORC_DTYPE_F64, SH(0, 2), NULL), b = tensor(TORC_DTYPE_F64, SH(2, 3), V(1, 2, 3, 4, 5, 6));
    o = tensor(TORC_DTYPE_F64, SH(0, 3), NULL);
    a.data = o.data = NULL;
    op = OP(TORC_OP_MATMUL, o, a, b);
    run_ok(op);
    // A wide product exercises the panel loop (N > panel width when K is large).
    enum { K = 70000, N = 20 };
    torc_operand wa = tensor(TORC_DTYPE_F32, SH(1, K), NULL), wb = tensor(TORC_DTYPE_F32, SH(K, N), NULL);
    for (int k = 0; k < K; k++) {
        ((float *)wa.data)[k] = 1.0f;
        for (int j = 0; j < N; j++) ((float *)wb.data)[k * N + j] = (float)(j + 1);
    }
    o = tensor(TORC_DTYPE_F32, SH(1, N), NULL);
    op = OP(TORC_OP_MATMUL, o, wa, wb);
    run_ok(op);
    for (int j = 0; j < N; j++) ck_assert(val(&o, j) == (double)K * (j + 1));
    // Shape errors carry PyTorch's text.
    a = tensor(TORC_DTYPE_F32, SH(2, 3), NULL), b = tensor(TORC_DTYPE_F32, SH(4, 5), NULL);
    o = tensor(TORC_DTYPE_F32, SH(2, 5), NULL);
    op = OP(TORC_OP_MATMUL, o, a, b);
    run_fails(op, TORC_ERR_SHAPE, "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
    a = tensor(TORC_DTYPE_F32, SH(3), NULL);
    op = OP(TORC_OP_MATMUL, o, a, b);
    run_fails(op, TORC_ERR_SHAPE, "ndim >= 2");
}
END_TEST

// ============================ unary ============================
// tools/golden/gen_reference_backend.py (unary): torch float64 on x; erfinv (on y) from mpmath.
static const double unary_x[8] = {-3.5, -1.0, -0.25, -0.0, 0.375, 1.0, 2.0, 4.5};
static const double unary_y[8] = {-1.0, -0.9921875, -0.5, 0.0, 9.313225746154785e-10, 0.6875, 0.71875, 0.99609375};
static const struct { torc_opcode code; double param; double f64[8]; } golden_unary[] = {
    {TORC_OP_SQRT, 0.0, {NAN, NAN, NAN, -0.0, 0.6123724356957945, 1.0, 1.414213562373095, 2.1213203435596424}},
    {TORC_OP_RSQRT, 0.0, {NAN, NAN, NAN, -INFINITY, 1.6329931618554523, 1.0, 0.7071067811865475, 0.47140452079103173}},
    {TORC_OP_RECIPROCAL, 0.0, {-0.2857142857142857, -1.0, -4.0, -INFINITY, 2.6666666666666665, 1.0, 0.5, 0.2222222222222222}},
    {TORC_OP_EXP, 0.0, {0.0301973834223185, 0.36787944117144233, 0.7788007830714049, 1.0, 1.4549914146182013, 2.718281828459045, 7.38905609893065, 90.01713130052181}},
    {TORC_OP_LOG, 0.0, {NAN, NAN, NAN, -INFINITY, -0.9808292530117262, 0.0, 0.6931471805599453, 1.5040773967762742}},
    {TORC_OP_SIN, 0.0, {0.35078322768961984, -0.8414709848078965, -0.24740395925452294, -0.0, 0.36627252908604757, 0.8414709848078965, 0.9092974268256817, -0.977530117665097}},
    {TORC_OP_COS, 0.0, {-0.9364566872907963, 0.5403023058681398, 0.9689124217106447, 1.0, 0.9305076219123143, 0.5403023058681398, -0.4161468365471424, -0.2107957994307797}},
    {TORC_OP_TANH, 0.0, {-0.9981778976111987, -0.7615941559557649, -0.24491866240370913, -0.0, 0.35835739835078595, 0.7615941559557649, 0.9640275800758169, 0.9997532108480275}},
    {TORC_OP_SIGMOID, 0.0, {0.02931223075135632, 0.2689414213699951, 0.43782349911420193, 0.5, 0.5926665999540697, 0.7310585786300049, 0.8807970779778823, 0.9890130573694068}},
    {TORC_OP_GELU, 0.0, {-0.0008142017766243903, -0.15865525393145702, -0.10032341857926907, -0.0, 0.2423136625022714, 0.841344746068543, 1.9544997361036416, 4.4999847104709385}},
    {TORC_OP_GELU, 1.0, {-0.0006161976553737403, -0.15880800939172324, -0.100324649298315, -0.0, 0.24230776689151162, 0.8411919906082768, 1.954597694087775, 4.499994863262588}},
    {TORC_OP_POW_SCALAR, 3.0, {-42.875, -1.0, -0.015625, -0.0, 0.052734375, 1.0, 8.0, 91.125}},
    {TORC_OP_POW_SCALAR, 0.5, {NAN, NAN, NAN, -0.0, 0.6123724356957945, 1.0, 1.414213562373095, 2.1213203435596424}},
    {TORC_OP_POW_SCALAR, -2.0, {0.08163265306122448, 1.0, 16.0, INFINITY, 7.111111111111111, 1.0, 0.25, 0.04938271604938271}},
    {TORC_OP_POW_SCALAR, 2.5, {NAN, NAN, NAN, 0.0, 0.0861148737697211, 1.0, 5.656854249492381, 42.95673695708276}},
    {TORC_OP_POW_SCALAR, -0.5, {NAN, NAN, NAN, -INFINITY, 1.6329931618554523, 1.0, 0.7071067811865475, 0.47140452079103173}},
    {TORC_OP_ERF, 0.0, {-0.9999992569016276, -0.8427007929497149, -0.27632639016823696, -0.0, 0.4041169094348223, 0.8427007929497149, 0.9953222650189527, 0.9999999998033839}},
    {TORC_OP_ERFINV, 0.0, {-INFINITY, -1.8809517454731395, -0.4769362762044699, 0.0, 8.253631419062224e-10, 0.7141708976081284, 0.7619185642882501, 2.0404520146056093}},
};

START_TEST(test_unary_golden) {
    // float64 matches torch to a couple of ulps; narrower dtypes see the same (exactly
    // representable) inputs and must equal the float64 result rounded once.
    for (size_t g = 0; g < sizeof golden_unary / sizeof golden_unary[0]; g++) {
        const double *xs = golden_unary[g].code == TORC_OP_ERFINV ? unary_y : unary_x;
        for (size_t t = 0; t < sizeof float_dtypes / sizeof float_dtypes[0]; t++) {
            const torc_dtype dt = float_dtypes[t];
            torc_operand x = tensor(dt, SH(8), xs), o = tensor(dt, SH(8), NULL);
            torc_op op = OP(golden_unary[g].code, o, x);
            if (golden_unary[g].code == TORC_OP_GELU) op.params.gelu.approximate = (int)golden_unary[g].param;
            else op.params.scalar.value = golden_unary[g].param;
            run_ok(op);
            if (dt == TORC_DTYPE_F64) {
                expect_close(o, golden_unary[g].f64, 4e-16, 0);
            } else {
                torc_operand rounded = tensor(dt, SH(8), golden_unary[g].f64);
                double exp[8];
                for (int i = 0; i < 8; i++) exp[i] = val(&rounded, i);
                expect_vals(o, exp);
            }
        }
    }
}
END_TEST

START_TEST(test_unary_signs_and_ints) {
    // Floating: NaN and signed zeros as PyTorch (sign(NaN) = 0, relu(-0.0) = -0.0, abs(-0.0) = 0).
    const double xv[] = {NAN, -0.0, 0.0, -2.5, 3.0, -INFINITY};
    torc_operand x = tensor(TORC_DTYPE_F32, SH(6), xv), o = tensor(TORC_DTYPE_F32, SH(6), NULL);
    struct { torc_opcode code; double exp[6]; } fcases[] = {
        {TORC_OP_NEG, {NAN, 0.0, -0.0, 2.5, -3.0, INFINITY}},
        {TORC_OP_ABS, {NAN, 0.0, 0.0, 2.5, 3.0, INFINITY}},
        {TORC_OP_SIGN, {0.0, 0.0, 0.0, -1.0, 1.0, -1.0}},
        {TORC_OP_RELU, {NAN, -0.0, 0.0, 0.0, 3.0, 0.0}},
        {TORC_OP_SQUARE, {NAN, 0.0, 0.0, 6.25, 9.0, INFINITY}},
    };
    for (size_t c = 0; c < sizeof fcases / sizeof fcases[0]; c++) {
        torc_op op = OP(fcases[c].code, o, x);
        run_ok(op);
        expect_vals(o, fcases[c].exp);
    }
    // Integers are exact and wrap: abs(int8 -128) = -128, neg(uint8 200) = 56, square(uint8 200) = 64.
    torc_operand i8 = tensor(TORC_DTYPE_I8, SH(4), V(-128, -3, 0, 5)), o8 = tensor(TORC_DTYPE_I8, SH(4), NULL);
    struct { torc_opcode code; int64_t exp[4]; } icases[] = {
        {TORC_OP_NEG, {-128, 3, 0, -5}}, {TORC_OP_ABS, {-128, 3, 0, 5}}, {TORC_OP_SIGN, {-1, -1, 0, 1}},
        {TORC_OP_RELU, {0, 0, 0, 5}}, {TORC_OP_SQUARE, {0, 9, 0, 25}},
    };
    for (size_t c = 0; c < sizeof icases / sizeof icases[0]; c++) {
        torc_op op = OP(icases[c].code, o8, i8);
        run_ok(op);
        expect_ints(o8, icases[c].exp);
    }
    torc_operand u8 = tensor(TORC_DTYPE_U8, SH(3), V(200, 1, 0)), ou = tensor(TORC_DTYPE_U8, SH(3), NULL);
    torc_op op = OP(TORC_OP_NEG, ou, u8);
    run_ok(op);
    expect_ints(ou, I(56, 255, 0));
    op.code = TORC_OP_SQUARE;
    op.n_out = 1;
    run_ok(op);
    expect_ints(ou, I(64, 1, 0));
    op.code = TORC_OP_SIGN;
    op.n_out = 1;
    run_ok(op);
    expect_ints(ou, I(1, 1, 0));
    // int64 extremes without UB.
    torc_operand l = tensor(TORC_DTYPE_I64, SH(2), NULL), ol = tensor(TORC_DTYPE_I64, SH(2), NULL);
    ((int64_t *)l.data)[0] = INT64_MIN, ((int64_t *)l.data)[1] = INT64_MAX;
    op = OP(TORC_OP_NEG, ol, l);
    run_ok(op);
    expect_ints(ol, I(INT64_MIN, INT64_MIN + 1));
    op.code = TORC_OP_SQUARE;
    op.n_out = 1;
    run_ok(op);
    expect_ints(ol, I(0, 1));
    // Bool: sign is the identity; neg/abs/relu have no bool kernel (PyTorch's messages).
    torc_operand b = tensor(TORC_DTYPE_BOOL, SH(2), V(1, 0)), ob = tensor(TORC_DTYPE_BOOL, SH(2), NULL);
    op = OP(TORC_OP_SIGN, ob, b);
    run_ok(op);
    expect_ints(ob, I(1, 0));
    op.code = TORC_OP_NEG;
    op.n_out = 1;
    ck_assert(!vt->supports(vt_ctx, 0, &op));  // supports() leaves the reason behind
    ck_assert_ptr_nonnull(strstr(vt->last_error(vt_ctx), "Negation, the `-` operator, on a bool tensor is not supported."));
    run_fails(op, TORC_ERR_DTYPE, "Negation, the `-` operator, on a bool tensor is not supported.");
    op.code = TORC_OP_RELU;
    op.n_out = 1;
    run_fails(op, TORC_ERR_DTYPE, "Boolean inputs not supported for relu");
    op.code = TORC_OP_ABS;
    op.n_out = 1;
    run_fails(op, TORC_ERR_DTYPE, "\"abs\" not implemented for 'Bool'");
    // Integer input with a floating out (the frontend promoted): computes in double.
    torc_operand ints = tensor(TORC_DTYPE_I64, SH(3), V(0, 2, 4)), of = tensor(TORC_DTYPE_F32, SH(3), NULL);
    op = OP(TORC_OP_RECIPROCAL, of, ints);
    run_ok(op);
    expect_vals(of, V(INFINITY, 0.5, 0.25));
    op.code = TORC_OP_SQRT;
    op.n_out = 1;
    run_ok(op);
    expect_vals(of, V(0, (double)(float)sqrt(2.0), 2));
    // Floating-only ops refuse an integer out.
    op = OP(TORC_OP_EXP, tensor(TORC_DTYPE_I64, SH(3), NULL), ints);
    ck_assert(!vt->supports(vt_ctx, 0, &op));
    run_fails(op, TORC_ERR_DTYPE, "\"exp\" not implemented for 'Long'");
    // erfinv stays accurate next to 1 (golden: mpmath) and is NaN outside [-1, 1].
    torc_operand ey = tensor(TORC_DTYPE_F64, SH(4), V(1 - 0x1p-53, -1e-300, 1.5, NAN));
    torc_operand eo = tensor(TORC_DTYPE_F64, SH(4), NULL);
    op = OP(TORC_OP_ERFINV, eo, ey);
    run_ok(op);
    expect_close(eo, V(5.8635847487551676, -8.86226925452758e-301, NAN, NAN), 4e-16, 0);
    // Extremes in double: sigmoid saturates without NaN.
    torc_operand big = tensor(TORC_DTYPE_F64, SH(2), V(-800, 800)), ob2 = tensor(TORC_DTYPE_F64, SH(2), NULL);
    op = OP(TORC_OP_SIGMOID, ob2, big);
    run_ok(op);
    expect_vals(ob2, V(0, 1));
}
END_TEST

START_TEST(test_unary_strided_and_logical_not) {
    // A transposed f16 input into a stepped bf16 out.
    torc_operand x = transposed(tensor(TORC_DTYPE_F16, SH(3, 2), V(1, 4, 9, 16, 25, 36)), 0, 1);  // [[1,9,25],[4,16,36]]
    torc_operand o = strided(TORC_DTYPE_BF16, SH(2, 3), I(6, 2), 12, NULL);
    torc_op op = OP(TORC_OP_SQRT, o, x);
    run_ok(op);
    expect_vals(o, V(1, 3, 5, 2, 4, 6));
    // logical_not writes bool (NaN is true, so its not is false); any input dtype.
    torc_operand f = tensor(TORC_DTYPE_F64, SH(4), V(0, NAN, -0.0, 2)), ob = tensor(TORC_DTYPE_BOOL, SH(4), NULL);
    op = OP(TORC_OP_LOGICAL_NOT, ob, f);
    run_ok(op);
    expect_ints(ob, I(1, 0, 1, 0));
    torc_operand i = strided(TORC_DTYPE_I32, SH(2, 2), I(0, 1), 2, V(0, 7));
    torc_operand o2 = tensor(TORC_DTYPE_BOOL, SH(2, 2), NULL);
    op = OP(TORC_OP_LOGICAL_NOT, o2, i);
    run_ok(op);
    expect_ints(o2, I(1, 0, 1, 0));
    // A zero-size unary does nothing.
    torc_operand e = tensor(TORC_DTYPE_F32, SH(2, 0), NULL);
    e.data = NULL;
    op = OP(TORC_OP_EXP, e, e);
    run_ok(op);
}
END_TEST

START_TEST(test_pow) {
    // Integer pow by squaring, wrapping in the dtype; negative tensor exponents as powi_impl.
    torc_operand b = tensor(TORC_DTYPE_I32, SH(6), V(2, 2, 3, 1, -1, 0));
    torc_operand e = tensor(TORC_DTYPE_I32, SH(6), V(31, 10, 0, -5, -3, -1));
    torc_operand o = tensor(TORC_DTYPE_I32, SH(6), NULL);
    torc_op op = OP(TORC_OP_POW, o, b, e);
    run_ok(op);
    expect_ints(o, I(INT32_MIN, 1024, 1, 1, -1, 0));
    // A negative scalar exponent on integers is PyTorch's error; 0 gives ones.
    op = OP(TORC_OP_POW_SCALAR, o, b);
    op.params.scalar.value = -2;
    ck_assert(vt->supports(vt_ctx, 0, &op));
    run_fails(op, TORC_ERR_INVALID_ARG, "Integers to negative integer powers are not allowed.");
    op.params.scalar.value = 0;
    run_ok(op);
    expect_ints(o, I(1, 1, 1, 1, 1, 1));
    op.params.scalar.value = 3;
    run_ok(op);
    expect_ints(o, I(8, 8, 27, 1, -1, 0));
    // Floating pow follows pow(): negative base to a fractional power is NaN.
    torc_operand x = tensor(TORC_DTYPE_F64, SH(3), V(-2, 0.5, 0)), y = tensor(TORC_DTYPE_F64, SH(3), V(0.5, -1, 0));
    torc_operand of = tensor(TORC_DTYPE_F64, SH(3), NULL);
    op = OP(TORC_OP_POW, of, x, y);
    run_ok(op);
    expect_vals(of, V(NAN, 2, 1));
    torc_operand bb = tensor(TORC_DTYPE_BOOL, SH(1), V(1));
    op = OP(TORC_OP_POW, tensor(TORC_DTYPE_BOOL, SH(1), NULL), bb, bb);
    ck_assert(!vt->supports(vt_ctx, 0, &op));
}
END_TEST

// ============================ max/min, comparisons, logical, where ============================
START_TEST(test_maximum_minimum) {
    torc_operand a = tensor(TORC_DTYPE_F32, SH(4), V(1, NAN, -0.0, 5)), b = tensor(TORC_DTYPE_F32, SH(4), V(NAN, 0, 2, 3));
    torc_operand o = tensor(TORC_DTYPE_F32, SH(4), NULL);
    torc_op op = OP(TORC_OP_MAXIMUM, o, a, b);
    run_ok(op);
    expect_vals(o, V(NAN, NAN, 2, 5));
    op.code = TORC_OP_MINIMUM;
    op.n_out = 1;
    run_ok(op);
    expect_vals(o, V(NAN, NAN, -0.0, 3));
    torc_operand i = tensor(TORC_DTYPE_I64, SH(3), V(-5, 7, 0)), j = strided(TORC_DTYPE_I64, SH(3), I(0), 1, V(1));
    torc_operand oi = tensor(TORC_DTYPE_I64, SH(3), NULL);
    op = OP(TORC_OP_MAXIMUM, oi, i, j);
    run_ok(op);
    expect_ints(oi, I(1, 7, 1));
    torc_operand p = tensor(TORC_DTYPE_BOOL, SH(2), V(1, 0)), q = tensor(TORC_DTYPE_BOOL, SH(2), V(0, 0));
    torc_operand ob = tensor(TORC_DTYPE_BOOL, SH(2), NULL);
    op = OP(TORC_OP_MAXIMUM, ob, p, q);
    run_ok(op);
    expect_ints(ob, I(1, 0));
}
END_TEST

START_TEST(test_comparisons_logical) {
    // Float compare with NaN (unordered: only NE is true).
    torc_operand a = tensor(TORC_DTYPE_F32, SH(4), V(1, NAN, 2, -0.0)), b = tensor(TORC_DTYPE_F32, SH(4), V(2, NAN, 2, 0.0));
    torc_operand o = tensor(TORC_DTYPE_BOOL, SH(4), NULL);
    struct { torc_opcode code; int64_t exp[4]; } cases[] = {
        {TORC_OP_EQ, {0, 0, 1, 1}}, {TORC_OP_NE, {1, 1, 0, 0}}, {TORC_OP_LT, {1, 0, 0, 0}},
        {TORC_OP_LE, {1, 0, 1, 1}}, {TORC_OP_GT, {0, 0, 0, 0}}, {TORC_OP_GE, {0, 0, 1, 1}},
        {TORC_OP_LOGICAL_AND, {1, 1, 1, 0}}, {TORC_OP_LOGICAL_OR, {1, 1, 1, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        torc_op op = OP(cases[c].code, o, a, b);
        run_ok(op);
        expect_ints(o, cases[c].exp);
    }
    // Integer compare is exact in int64: 2^53 + 1 > 2^53 (a double compare would say equal);
    // uint8 255 vs int8 -1 compare by value.
    torc_operand l = tensor(TORC_DTYPE_I64, SH(2), NULL), m = tensor(TORC_DTYPE_I64, SH(2), NULL);
    ((int64_t *)l.data)[0] = (INT64_C(1) << 53) + 1, ((int64_t *)l.data)[1] = 5;
    ((int64_t *)m.data)[0] = INT64_C(1) << 53, ((int64_t *)m.data)[1] = 5;
    o = tensor(TORC_DTYPE_BOOL, SH(2), NULL);
    torc_op op = OP(TORC_OP_GT, o, l, m);
    run_ok(op);
    expect_ints(o, I(1, 0));
    torc_operand u = tensor(TORC_DTYPE_U8, SH(1), V(255)), s8 = tensor(TORC_DTYPE_I8, SH(1), V(-1));
    o = tensor(TORC_DTYPE_BOOL, SH(1), NULL);
    op = OP(TORC_OP_EQ, o, u, s8);
    run_ok(op);
    expect_ints(o, I(0));
    // Mixed int/float operands compare in their common floating dtype (torch golden):
    // int64 16777217 == f32 16777216 is true in float32; f64 0.1 != f32 0.1 (compared in f64).
    torc_operand bi = tensor(TORC_DTYPE_I64, SH(1), V(16777217)), bf = tensor(TORC_DTYPE_F32, SH(1), V(16777216));
    o = tensor(TORC_DTYPE_BOOL, SH(1), NULL);
    op = OP(TORC_OP_EQ, o, bi, bf);
    run_ok(op);
    expect_ints(o, I(1));
    op = OP(TORC_OP_EQ, o, tensor(TORC_DTYPE_F64, SH(1), V(0.1)), tensor(TORC_DTYPE_F32, SH(1), V(0.1)));
    run_ok(op);
    expect_ints(o, I(0));
    // Broadcast and transposed operands: a (2,3) transposed vs a row (stride 0).
    torc_operand t = transposed(tensor(TORC_DTYPE_BF16, SH(3, 2), V(1, 4, 2, 5, 3, 6)), 0, 1);  // [[1,2,3],[4,5,6]]
    torc_operand row = strided(TORC_DTYPE_F64, SH(2, 3), I(0, 1), 3, V(2, 2, 5));
    o = strided(TORC_DTYPE_BOOL, SH(2, 3), I(1, 2), 6, NULL);  // written column-major
    op = OP(TORC_OP_LE, o, t, row);
    run_ok(op);
    expect_ints(o, I(1, 1, 1, 0, 0, 0));
    ck_assert_int_eq(((uint8_t *)o.data)[1], 0);  // element [1,0] at offset 1 is false
    // Comparisons may write any dtype: a float 0/1 out.
    torc_operand of = tensor(TORC_DTYPE_F32, SH(2, 3), NULL);
    op = OP(TORC_OP_GT, of, t, row);
    run_ok(op);
    expect_vals(of, V(0, 0, 0, 1, 1, 1));
    // Logical ops on integers use truthiness.
    torc_operand x = tensor(TORC_DTYPE_I32, SH(3), V(0, 3, -1)), y = tensor(TORC_DTYPE_U8, SH(3), V(0, 0, 9));
    o = tensor(TORC_DTYPE_BOOL, SH(3), NULL);
    op = OP(TORC_OP_LOGICAL_OR, o, x, y);
    run_ok(op);
    expect_ints(o, I(0, 1, 1));
}
END_TEST

START_TEST(test_where) {
    // cond (2,3) transposed bool; x broadcast row (i64); y a scalar broadcast (f32); out f32.
    torc_operand c = transposed(tensor(TORC_DTYPE_BOOL, SH(3, 2), V(1, 0, 0, 1, 1, 0)), 0, 1);  // [[1,0,1],[0,1,0]]
    torc_operand x = strided(TORC_DTYPE_I64, SH(2, 3), I(0, 1), 3, V(10, 20, 30));
    torc_operand y = strided(TORC_DTYPE_F32, SH(2, 3), I(0, 0), 1, V(-1.5));
    torc_operand o = tensor(TORC_DTYPE_F32, SH(2, 3), NULL);
    torc_op op = OP(TORC_OP_WHERE, o, c, x, y);
    run_ok(op);
    expect_vals(o, V(10, -1.5, 30, -1.5, 20, -1.5));
    // Same dtypes everywhere, bf16; NaN passes through untouched.
    torc_operand c2 = tensor(TORC_DTYPE_BOOL, SH(3), V(1, 0, 1));
    torc_operand x2 = tensor(TORC_DTYPE_BF16, SH(3), V(NAN, 1, 2)), y2 = tensor(TORC_DTYPE_BF16, SH(3), V(7, 8, 9));
    torc_operand o2 = tensor(TORC_DTYPE_BF16, SH(3), NULL);
    op = OP(TORC_OP_WHERE, o2, c2, x2, y2);
    run_ok(op);
    expect_vals(o2, V(NAN, 8, 2));
    op = OP(TORC_OP_WHERE, o2, c2, x2);
    run_fails(op, TORC_ERR_INVALID_ARG, "where takes 3 input(s), got 2");
}
END_TEST

// ============================ random ============================
START_TEST(test_random_uniform_normal_int) {
    const uint64_t seed = 0x1234abcdULL, offset = 1000;
    torc_operand o = tensor(TORC_DTYPE_F64, SH(2, 3), NULL);
    torc_op op = OP0(TORC_OP_RAND_UNIFORM, o);
    op.params.rng.seed = seed, op.params.rng.offset = offset, op.params.rng.a = -2, op.params.rng.b = 3;
    run_ok(op);
    for (int i = 0; i < 6; i++) {
        const double u = torc_philox_uniform(seed, offset, (uint64_t)i);
        ck_assert(val(&o, i) == -2 + 5 * u);
        ck_assert(val(&o, i) >= -2 && val(&o, i) < 3);
    }
    // Independent of out's strides: a transposed out gets the same value at each logical index.
    torc_operand t = transposed(tensor(TORC_DTYPE_F64, SH(3, 2), NULL), 0, 1);
    op.out[0] = t;
    run_ok(op);
    for (int i = 0; i < 6; i++) ck_assert(val(&t, i) == val(&o, i));
    torc_operand s = strided(TORC_DTYPE_F64, SH(2, 3), I(9, 3), 18, NULL);
    op.out[0] = s;
    run_ok(op);
    for (int i = 0; i < 6; i++) ck_assert(val(&s, i) == val(&o, i));
    // f32 / bf16 round the double once.
    torc_operand f = tensor(TORC_DTYPE_BF16, SH(2, 3), NULL);
    op.out[0] = f;
    run_ok(op);
    torc_operand rounded = tensor(TORC_DTYPE_BF16, SH(6), (const double *)o.data);
    for (int i = 0; i < 6; i++) ck_assert(val(&f, i) == val(&rounded, i));

    torc_operand n = tensor(TORC_DTYPE_F32, SH(4, 5), NULL);
    op = OP0(TORC_OP_RAND_NORMAL, n);
    op.params.rng.seed = seed, op.params.rng.offset = 7, op.params.rng.a = 1, op.params.rng.b = 0.5;
    run_ok(op);
    for (int i = 0; i < 20; i++)
        ck_assert(val(&n, i) == (double)(float)(1 + 0.5 * torc_philox_normal(seed, 7, (uint64_t)i)));
    op.params.rng.b = -1;
    run_fails(op, TORC_ERR_INVALID_ARG, "normal expects std >= 0.0");

    torc_operand r = transposed(tensor(TORC_DTYPE_I32, SH(50, 2), NULL), 0, 1);  // (2, 50), strided
    op = OP0(TORC_OP_RAND_INT, r);
    op.params.rng.seed = 42, op.params.rng.offset = 0, op.params.rng.a = -3, op.params.rng.b = 4;
    run_ok(op);
    bool seen[7] = {false};
    for (int i = 0; i < 100; i++) {
        const int64_t v = ival(&r, i);
        ck_assert_int_eq(v, -3 + (int64_t)floor(torc_philox_uniform(42, 0, (uint64_t)i) * 7));
        ck_assert(v >= -3 && v < 4);
        seen[v + 3] = true;
    }
    for (int k = 0; k < 7; k++) ck_assert(seen[k]);
    op.params.rng.a = 4;
    run_fails(op, TORC_ERR_INVALID_ARG, "random_ expects 'from' to be less than 'to', but got from=4 >= to=4");
    // Uniform and normal need a floating out; zero-size draws nothing.
    op = OP0(TORC_OP_RAND_NORMAL, tensor(TORC_DTYPE_I64, SH(2), NULL));
    ck_assert(!vt->supports(vt_ctx, 0, &op));
    torc_operand e = tensor(TORC_DTYPE_F32, SH(0), NULL);
    e.data = NULL;
    op = OP0(TORC_OP_RAND_UNIFORM, e);
    op.params.rng.b = 1;
    run_ok(op);
}
END_TEST

// ============================ reductions ============================
// tools/golden/gen_reference_backend.py (reductions, softmax): torch float64 on red_x (3, 4).
static const double red_x[12] = {1.5, -2.0, 0.25, 3.0, 4.0, 0.5, -1.0, 2.0, -3.0, 1.0, 2.5, -0.75};
static const struct { torc_opcode code; uint32_t mask; double param; double exp[4]; } golden_reduce[] = {
    {TORC_OP_SUM, 1, 0.0, {2.5, -0.5, 1.75, 4.25}},
    {TORC_OP_MEAN, 1, 0.0, {0.8333333333333334, -0.16666666666666666, 0.5833333333333334, 1.4166666666666667}},
    {TORC_OP_PROD, 1, 0.0, {-18.0, -1.0, -0.625, -4.5}},
    {TORC_OP_MAX, 1, 0.0, {4.0, 1.0, 2.5, 3.0}},
    {TORC_OP_MIN, 1, 0.0, {-3.0, -2.0, -1.0, -0.75}},
    {TORC_OP_LOGSUMEXP, 1, 0.0, {4.079732087672557, 1.5045969023422834, 2.6271581586310475, 3.3303084128203317}},
    {TORC_OP_ARGMAX, 1, 0.0, {1.0, 2.0, 2.0, 0.0}},
    {TORC_OP_ARGMIN, 1, 0.0, {2.0, 0.0, 1.0, 2.0}},
    {TORC_OP_VAR, 1, 0.0, {8.388888888888888, 1.722222222222222, 2.097222222222222, 2.5138888888888893}},
    {TORC_OP_STD, 1, 0.0, {2.896357866163794, 1.3123346456686351, 1.448178933081897, 1.5855247992033707}},
    {TORC_OP_VAR, 1, 1.0, {12.583333333333332, 2.583333333333333, 3.145833333333333, 3.770833333333334}},
    {TORC_OP_STD, 1, 1.0, {3.547299442298794, 1.607275126832159, 1.773649721149397, 1.9418633662885074}},
    {TORC_OP_VAR, 1, 2.0, {25.166666666666664, 5.166666666666666, 6.291666666666666, 7.541666666666668}},
    {TORC_OP_STD, 1, 2.0, {5.01663898109747, 2.273030282830976, 2.508319490548735, 2.7462095088806806}},
    {TORC_OP_NORM, 1, 0.0, {3.0, 3.0, 3.0, 3.0}},
    {TORC_OP_NORM, 1, 1.0, {8.5, 3.5, 3.75, 5.75}},
    {TORC_OP_NORM, 1, 2.0, {5.220153254455275, 2.29128784747792, 2.704163456597992, 3.6827299656640586}},
    {TORC_OP_NORM, 1, 3.0, {4.552874245617287, 2.089669598190616, 2.5530336828071407, 3.2841565327194986}},
    {TORC_OP_NORM, 1, 0.5, {24.56982340296115, 9.742640687119287, 9.49341649025257, 16.098469228349533}},
    {TORC_OP_NORM, 1, -1.0, {0.8, 0.2857142857142857, 0.18518518518518517, 0.46153846153846156}},
    {TORC_OP_NORM, 1, INFINITY, {4.0, 2.0, 2.5, 3.0}},
    {TORC_OP_NORM, 1, -INFINITY, {1.5, 0.5, 0.25, 0.75}},
    {TORC_OP_SUM, 2, 0.0, {2.75, 5.5, -0.25}},
    {TORC_OP_MEAN, 2, 0.0, {0.6875, 1.375, -0.0625}},
    {TORC_OP_PROD, 2, 0.0, {-2.25, -4.0, 5.625}},
    {TORC_OP_MAX, 2, 0.0, {3.0, 4.0, 2.5}},
    {TORC_OP_MIN, 2, 0.0, {-2.0, -1.0, -3.0}},
    {TORC_OP_LOGSUMEXP, 2, 0.0, {3.257580508495379, 4.158942563527355, 2.7358553248180417}},
    {TORC_OP_ARGMAX, 2, 0.0, {3.0, 0.0, 2.0}},
    {TORC_OP_ARGMIN, 2, 0.0, {1.0, 2.0, 0.0}},
    {TORC_OP_VAR, 2, 0.0, {3.35546875, 3.4218750000000004, 4.199218749999999}},
    {TORC_OP_STD, 2, 0.0, {1.8317938612191056, 1.849831073368593, 2.049199538844375}},
    {TORC_OP_VAR, 2, 1.0, {4.473958333333333, 4.562500000000001, 5.598958333333332}},
    {TORC_OP_STD, 2, 1.0, {2.115173357749509, 2.136000936329383, 2.3662118107501136}},
    {TORC_OP_VAR, 2, 2.0, {6.7109375, 6.843750000000001, 8.398437499999998}},
    {TORC_OP_STD, 2, 2.0, {2.5905477220078383, 2.616056192057044, 2.898005779842407}},
    {TORC_OP_NORM, 2, 0.0, {4.0, 4.0, 4.0}},
    {TORC_OP_NORM, 2, 1.0, {6.75, 7.5, 7.25}},
    {TORC_OP_NORM, 2, 2.0, {3.913118960624632, 4.6097722286464435, 4.100304866714182}},
    {TORC_OP_NORM, 2, 3.0, {3.373456083956561, 4.181723303684597, 3.531601565227327}},
    {TORC_OP_NORM, 2, 0.5, {23.726731029156962, 26.22792206135786, 26.824268445452496}},
    {TORC_OP_NORM, 2, -1.0, {0.18181818181818185, 0.26666666666666666, 0.32608695652173914}},
    {TORC_OP_NORM, 2, INFINITY, {3.0, 4.0, 3.0}},
    {TORC_OP_NORM, 2, -INFINITY, {0.25, 0.5, 0.75}},
    {TORC_OP_SUM, 3, 0.0, {8.0}},
    {TORC_OP_MEAN, 3, 0.0, {0.6666666666666666}},
    {TORC_OP_PROD, 3, 0.0, {50.625}},
    {TORC_OP_MAX, 3, 0.0, {4.0}},
    {TORC_OP_MIN, 3, 0.0, {-3.0}},
    {TORC_OP_LOGSUMEXP, 3, 0.0, {4.657889031797054}},
    {TORC_OP_ARGMAX, 3, 0.0, {4.0}},
    {TORC_OP_ARGMIN, 3, 0.0, {8.0}},
    {TORC_OP_VAR, 3, 0.0, {4.003472222222222}},
    {TORC_OP_STD, 3, 0.0, {2.0008678672571616}},
    {TORC_OP_VAR, 3, 1.0, {4.367424242424243}},
    {TORC_OP_STD, 3, 1.0, {2.0898383292552185}},
    {TORC_OP_VAR, 3, 2.0, {4.804166666666667}},
    {TORC_OP_STD, 3, 2.0, {2.1918409309679996}},
    {TORC_OP_NORM, 3, 0.0, {12.0}},
    {TORC_OP_NORM, 3, 1.0, {21.5}},
    {TORC_OP_NORM, 3, 2.0, {7.305819598101229}},
    {TORC_OP_NORM, 3, 3.0, {5.378175516740407}},
    {TORC_OP_NORM, 3, 0.5, {230.17576634874428}},
    {TORC_OP_NORM, 3, -1.0, {0.08119079837618402}},
    {TORC_OP_NORM, 3, INFINITY, {4.0}},
    {TORC_OP_NORM, 3, -INFINITY, {0.25}},
};

static torc_op reduce_op(torc_opcode code, torc_operand out, torc_operand in, uint32_t mask, double param) {
    torc_op op = OP(code, out, in);
    op.params.reduce.mask = mask;
    if (code == TORC_OP_NORM) op.params.reduce.p = param;
    else op.params.reduce.correction = param;
    return op;
}

START_TEST(test_reduce_golden) {
    // Each golden row on a contiguous x, a transposed view of x^T, and a stepped view; float64
    // to 1e-15, then f32 and bf16 equal to the float64 result rounded once.
    const double xt[12] = {1.5, 4.0, -3.0, -2.0, 0.5, 1.0, 0.25, -1.0, 2.5, 3.0, 2.0, -0.75};  // x^T (4, 3)
    for (size_t g = 0; g < sizeof golden_reduce / sizeof golden_reduce[0]; g++) {
        const uint32_t mask = golden_reduce[g].mask;
        const bool arg = golden_reduce[g].code == TORC_OP_ARGMAX || golden_reduce[g].code == TORC_OP_ARGMIN;
        const int64_t o0 = mask & 1u ? 1 : 3, o1 = mask & 2u ? 1 : 4;
        const torc_dtype dts[] = {TORC_DTYPE_F64, TORC_DTYPE_F32, TORC_DTYPE_BF16};
        for (size_t t = 0; t < 3; t++) {
            torc_operand views[3] = {
                tensor(dts[t], SH(3, 4), red_x),
                transposed(tensor(dts[t], SH(4, 3), xt), 0, 1),
                strided(dts[t], SH(3, 4), I(8, 2), 24, NULL),
            };
            for (int i = 0; i < 12; i++) put((char *)views[2].data + (i / 4 * 8 + i % 4 * 2) * (int64_t)dsize(dts[t]), dts[t], red_x[i]);
            for (int v = 0; v < 3; v++) {
                torc_operand o = tensor(arg ? TORC_DTYPE_I64 : dts[t], SH(o0, o1), NULL);
                torc_op op = reduce_op(golden_reduce[g].code, o, views[v], mask, golden_reduce[g].param);
                run_ok(op);
                if (dts[t] == TORC_DTYPE_F64 || arg) {
                    expect_close(o, golden_reduce[g].exp, 1e-15, 0);
                } else {
                    torc_operand rounded = tensor(dts[t], SH(4), golden_reduce[g].exp);
                    double exp[4];
                    for (int i = 0; i < 4; i++) exp[i] = val(&rounded, i);
                    expect_vals(o, exp);
                }
            }
        }
    }
}
END_TEST

START_TEST(test_reduce_integer_and_bool) {
    torc_operand x = tensor(TORC_DTYPE_I32, SH(2, 3), V(2147483647, 1, -5, 7, 7, -5));
    torc_operand o = tensor(TORC_DTYPE_I64, SH(1, 3), NULL);
    torc_op op = reduce_op(TORC_OP_SUM, o, x, 1u, 0);
    run_ok(op);
    expect_ints(o, I(2147483654, 8, -10));  // exact in int64: no int32 wrap
    op.code = TORC_OP_PROD;
    op.n_out = 1;
    run_ok(op);
    expect_ints(o, I(15032385529, 7, 25));
    torc_operand oi = tensor(TORC_DTYPE_I32, SH(2, 1), NULL);
    op = reduce_op(TORC_OP_MAX, oi, x, 2u, 0);
    run_ok(op);
    expect_ints(oi, I(2147483647, 7));
    op.code = TORC_OP_MIN;
    op.n_out = 1;
    run_ok(op);
    expect_ints(oi, I(-5, -5));
    torc_operand oa = tensor(TORC_DTYPE_I64, SH(2, 1), NULL);
    op = reduce_op(TORC_OP_ARGMAX, oa, x, 2u, 0);
    run_ok(op);
    expect_ints(oa, I(0, 0));  // ties: the first index
    op.code = TORC_OP_ARGMIN;
    op.n_out = 1;
    run_ok(op);
    expect_ints(oa, I(2, 2));
    // uint8 sum into uint8 wraps (torch.sum(dtype=uint8)); mean of ints into f32.
    torc_operand u = tensor(TORC_DTYPE_U8, SH(3), V(200, 100, 3)), ou = tensor(TORC_DTYPE_U8, SH(1), NULL);
    op = reduce_op(TORC_OP_SUM, ou, u, 1u, 0);
    run_ok(op);
    expect_ints(ou, I(47));
    torc_operand of = tensor(TORC_DTYPE_F32, SH(1), NULL);
    op = reduce_op(TORC_OP_MEAN, of, u, 1u, 0);
    run_ok(op);
    expect_vals(of, V(101));
    // int64 products wrap without UB.
    torc_operand l = tensor(TORC_DTYPE_I64, SH(2), NULL), ol = tensor(TORC_DTYPE_I64, SH(1), NULL);
    ((int64_t *)l.data)[0] = INT64_MAX, ((int64_t *)l.data)[1] = 4;
    op = reduce_op(TORC_OP_PROD, ol, l, 1u, 0);
    run_ok(op);
    expect_ints(ol, I(-4));
    // Bool: sum counts into int64; prod / max into bool are all / any; argmax refuses bool.
    torc_operand b = tensor(TORC_DTYPE_BOOL, SH(2, 2), V(1, 1, 0, 1));
    torc_operand cnt = tensor(TORC_DTYPE_I64, SH(1, 1), NULL);
    op = reduce_op(TORC_OP_SUM, cnt, b, 3u, 0);
    run_ok(op);
    expect_ints(cnt, I(3));
    torc_operand ob = tensor(TORC_DTYPE_BOOL, SH(2, 1), NULL);
    op = reduce_op(TORC_OP_PROD, ob, b, 2u, 0);
    run_ok(op);
    expect_ints(ob, I(1, 0));
    op.code = TORC_OP_MAX;
    op.n_out = 1;
    run_ok(op);
    expect_ints(ob, I(1, 1));
    op = reduce_op(TORC_OP_ARGMAX, tensor(TORC_DTYPE_I64, SH(2, 1), NULL), b, 2u, 0);
    ck_assert(!vt->supports(vt_ctx, 0, &op));
    run_fails(op, TORC_ERR_DTYPE, "argmax(): does not support bool input");
    op = reduce_op(TORC_OP_MEAN, tensor(TORC_DTYPE_I64, SH(2, 1), NULL), b, 2u, 0);
    ck_assert(!vt->supports(vt_ctx, 0, &op));
}
END_TEST

START_TEST(test_reduce_nan_and_accuracy) {
    // NaN propagates through max/min; argmax/argmin point at the first NaN.
    torc_operand x = tensor(TORC_DTYPE_F32, SH(5), V(1, NAN, 3, NAN, -1)), o = tensor(TORC_DTYPE_F32, SH(1), NULL);
    torc_op op = reduce_op(TORC_OP_MAX, o, x, 1u, 0);
    run_ok(op);
    expect_vals(o, V(NAN));
    op.code = TORC_OP_MIN;
    op.n_out = 1;
    run_ok(op);
    expect_vals(o, V(NAN));
    torc_operand oi = tensor(TORC_DTYPE_I64, SH(1), NULL);
    op = reduce_op(TORC_OP_ARGMAX, oi, x, 1u, 0);
    run_ok(op);
    expect_ints(oi, I(1));
    op.code = TORC_OP_ARGMIN;
    op.n_out = 1;
    run_ok(op);
    expect_ints(oi, I(1));
    op.code = TORC_OP_LOGSUMEXP;
    op.n_out = 1;
    op.out[0] = o;
    run_ok(op);
    expect_vals(o, V(NAN));
    // logsumexp edge rows (golden): all -inf, with +inf, with NaN, and a large shift.
    torc_operand e = tensor(TORC_DTYPE_F64, SH(4, 2), V(-INFINITY, -INFINITY, INFINITY, 1.0, NAN, 1.0, 1000.0, 0.0));
    torc_operand eo = tensor(TORC_DTYPE_F64, SH(4, 1), NULL);
    op = reduce_op(TORC_OP_LOGSUMEXP, eo, e, 2u, 0);
    run_ok(op);
    expect_vals(eo, V(-INFINITY, INFINITY, NAN, 1000.0));
    // Sums are compensated in double: 1e16 + 1 - 1e16 is 1 (a naive double sum gives 0).
    torc_operand c = tensor(TORC_DTYPE_F64, SH(3), V(1e16, 1, -1e16)), co = tensor(TORC_DTYPE_F64, SH(1), NULL);
    op = reduce_op(TORC_OP_SUM, co, c, 1u, 0);
    run_ok(op);
    expect_vals(co, V(1));
    // A million f32 0.1s sum to the float nearest 1e6 * 0.1f.
    enum { N = 1000000 };
    torc_operand big = tensor(TORC_DTYPE_F32, SH(N), NULL);
    for (int i = 0; i < N; i++) ((float *)big.data)[i] = 0.1f;
    op = reduce_op(TORC_OP_SUM, o, big, 1u, 0);
    run_ok(op);
    expect_vals(o, V((double)(float)(N * (double)0.1f)));
    // Variance is two-pass: a large offset does not cancel the spread.
    torc_operand v = tensor(TORC_DTYPE_F64, SH(3), V(1e9 + 1, 1e9 + 2, 1e9 + 3)), vo = tensor(TORC_DTYPE_F64, SH(1), NULL);
    op = reduce_op(TORC_OP_VAR, vo, v, 1u, 1.0);
    run_ok(op);
    expect_vals(vo, V(1));
    // correction >= N: PyTorch divides by max(0, N - correction).
    torc_operand two = tensor(TORC_DTYPE_F32, SH(2), V(1, 2));
    op = reduce_op(TORC_OP_VAR, o, two, 1u, 2.0);
    run_ok(op);
    expect_vals(o, V(INFINITY));
    op.params.reduce.correction = 3.0;
    run_ok(op);
    expect_vals(o, V(INFINITY));
    torc_operand one = tensor(TORC_DTYPE_F32, SH(1), V(5));
    op = reduce_op(TORC_OP_STD, o, one, 1u, 1.0);
    run_ok(op);
    expect_vals(o, V(NAN));
}
END_TEST

START_TEST(test_reduce_empty_and_shapes) {
    // Reducing an empty dim: identities where PyTorch has them.
    torc_operand x = tensor(TORC_DTYPE_F32, SH(2, 0), NULL), o = tensor(TORC_DTYPE_F32, SH(2, 1), NULL);
    x.data = NULL;
    struct { torc_opcode code; double param; double exp; } cases[] = {
        {TORC_OP_SUM, 0, 0}, {TORC_OP_PROD, 0, 1}, {TORC_OP_MEAN, 0, NAN}, {TORC_OP_VAR, 1, NAN},
        {TORC_OP_STD, 0, NAN}, {TORC_OP_NORM, 2, 0}, {TORC_OP_NORM, 0, 0}, {TORC_OP_LOGSUMEXP, 0, -INFINITY},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        torc_op op = reduce_op(cases[c].code, o, x, 2u, cases[c].param);
        run_ok(op);
        expect_vals(o, V(cases[c].exp, cases[c].exp));
    }
    torc_op op = reduce_op(TORC_OP_MAX, o, x, 2u, 0);
    run_fails(op, TORC_ERR_INDEX, "amax(): Expected reduction dim 1 to have non-zero size.");
    op = reduce_op(TORC_OP_ARGMIN, tensor(TORC_DTYPE_I64, SH(2, 1), NULL), x, 2u, 0);
    run_fails(op, TORC_ERR_INDEX, "argmin(): Expected reduction dim 1 to have non-zero size.");
    op = reduce_op(TORC_OP_NORM, o, x, 2u, INFINITY);
    run_fails(op, TORC_ERR_RUNTIME, "linalg.vector_norm cannot compute the inf norm on the dimension 1");
    // Reducing the non-empty dim of a (0, 3) tensor produces an empty out: nothing to do.
    torc_operand z = tensor(TORC_DTYPE_F32, SH(0, 3), NULL), zo = tensor(TORC_DTYPE_F32, SH(0, 1), NULL);
    z.data = zo.data = NULL;
    op = reduce_op(TORC_OP_MAX, zo, z, 2u, 0);
    run_ok(op);
    // A 0-dim input with mask 0 reduces nothing: the value itself (sum) / itself (max).
    torc_operand s = tensor(TORC_DTYPE_F64, 0, NULL, V(-2.5)), so = tensor(TORC_DTYPE_F64, 0, NULL, NULL);
    op = reduce_op(TORC_OP_SUM, so, s, 0u, 0);
    run_ok(op);
    expect_vals(so, V(-2.5));
    op.code = TORC_OP_NORM;
    op.n_out = 1;
    op.params.reduce.p = 2;
    run_ok(op);
    expect_vals(so, V(2.5));
    // A broadcast (stride-0) input: mean over 4 copies of one row.
    torc_operand bc = strided(TORC_DTYPE_BF16, SH(4, 2), I(0, 1), 2, V(1, 3)), bo = tensor(TORC_DTYPE_BF16, SH(1, 2), NULL);
    op = reduce_op(TORC_OP_MEAN, bo, bc, 1u, 0);
    run_ok(op);
    expect_vals(bo, V(1, 3));
    // Malformed: out of the wrong shape, mask beyond ndim.
    op = reduce_op(TORC_OP_SUM, tensor(TORC_DTYPE_F32, SH(2), NULL), tensor(TORC_DTYPE_F32, SH(2, 2), NULL), 1u, 0);
    run_fails(op, TORC_ERR_SHAPE, "out must keep in0's 2 dims");
    op = reduce_op(TORC_OP_SUM, tensor(TORC_DTYPE_F32, SH(2, 1), NULL), tensor(TORC_DTYPE_F32, SH(2, 2), NULL), 1u, 0);
    run_fails(op, TORC_ERR_SHAPE, "out dim 0 is 2, expected 1");
    op = reduce_op(TORC_OP_SUM, tensor(TORC_DTYPE_F32, SH(1, 1), NULL), tensor(TORC_DTYPE_F32, SH(2, 2), NULL), 7u, 0);
    run_fails(op, TORC_ERR_INVALID_ARG, "names dims beyond ndim 2");
}
END_TEST

// ============================ softmax ============================
static const struct { torc_opcode code; int dim; double exp[12]; } golden_softmax[] = {
    {TORC_OP_SOFTMAX, 0, {0.07579430753228172, 0.030058887569574023, 0.09281396564662192, 0.7187020423236421, 0.9233636937677238, 0.3661922162818002, 0.026591646373374078, 0.2643957056987957, 0.0008419986999945904, 0.6037488961486258, 0.880594387980004, 0.016902251977562115}},
    {TORC_OP_LOG_SOFTMAX, 0, {-2.5797320876725567, -3.5045969023422834, -2.3771581586310475, -0.33030841282033196, -0.07973208767255689, -1.0045969023422834, -3.6271581586310475, -1.330308412820332, -7.079732087672557, -0.5045969023422835, -0.12715815863104757, -4.080308412820332}},
    {TORC_OP_SOFTMAX, 1, {0.1724616288859388, 0.005207889933106294, 0.04941108395014339, 0.7729193972308115, 0.8530453534781922, 0.025759737615608187, 0.005747774379552186, 0.11544713452664754, 0.0032281200959596323, 0.176249385324212, 0.7898949438613231, 0.03062755071850533}},
    {TORC_OP_LOG_SOFTMAX, 1, {-1.7575805084953793, -5.257580508495379, -3.007580508495379, -0.2575805084953792, -0.15894256352735495, -3.658942563527355, -5.158942563527355, -2.158942563527355, -5.735855324818042, -1.7358553248180417, -0.23585532481804183, -3.4858553248180417}},
};

START_TEST(test_softmax) {
    const double xt[12] = {1.5, 4.0, -3.0, -2.0, 0.5, 1.0, 0.25, -1.0, 2.5, 3.0, 2.0, -0.75};  // red_x^T
    for (size_t g = 0; g < sizeof golden_softmax / sizeof golden_softmax[0]; g++) {
        for (int t = 0; t < 3; t++) {
            const torc_dtype dt = t == 0 ? TORC_DTYPE_F64 : t == 1 ? TORC_DTYPE_F32 : TORC_DTYPE_BF16;
            torc_operand x = t == 0 ? tensor(dt, SH(3, 4), red_x) : transposed(tensor(dt, SH(4, 3), xt), 0, 1);
            torc_operand o = t == 2 ? transposed(tensor(dt, SH(4, 3), NULL), 0, 1) : tensor(dt, SH(3, 4), NULL);
            torc_op op = OP(golden_softmax[g].code, o, x);
            op.params.dim.dim = golden_softmax[g].dim;
            run_ok(op);
            if (dt == TORC_DTYPE_F64) {
                expect_close(o, golden_softmax[g].exp, 1e-15, 0);
            } else {
                torc_operand rounded = tensor(dt, SH(12), golden_softmax[g].exp);
                double exp[12];
                for (int i = 0; i < 12; i++) exp[i] = val(&rounded, i);
                expect_vals(o, exp);
            }
        }
    }
    // Edge rows (golden): all -inf and +inf rows are NaN, NaN spreads, a 1000 gap underflows cleanly.
    torc_operand e = tensor(TORC_DTYPE_F64, SH(4, 2), V(-INFINITY, -INFINITY, INFINITY, 1.0, NAN, 1.0, 1000.0, 0.0));
    torc_operand eo = tensor(TORC_DTYPE_F64, SH(4, 2), NULL);
    torc_op op = OP(TORC_OP_SOFTMAX, eo, e);
    op.params.dim.dim = 1;
    run_ok(op);
    expect_vals(eo, V(NAN, NAN, NAN, NAN, NAN, NAN, 1.0, 0.0));
    op.code = TORC_OP_LOG_SOFTMAX;
    op.n_out = 1;
    run_ok(op);
    expect_vals(eo, V(NAN, NAN, NAN, NAN, NAN, NAN, 0.0, -1000.0));
    // A 0-dim tensor is a row of one: softmax 1, log_softmax 0; zero-size does nothing.
    torc_operand s = tensor(TORC_DTYPE_F32, 0, NULL, V(7)), so = tensor(TORC_DTYPE_F32, 0, NULL, NULL);
    op = OP(TORC_OP_SOFTMAX, so, s);
    run_ok(op);
    expect_vals(so, V(1));
    torc_operand z = tensor(TORC_DTYPE_F32, SH(0, 5), NULL);
    z.data = NULL;
    op = OP(TORC_OP_LOG_SOFTMAX, z, z);
    op.params.dim.dim = 1;
    run_ok(op);
    op = OP(TORC_OP_SOFTMAX, eo, e);
    op.params.dim.dim = 2;
    run_fails(op, TORC_ERR_INVALID_ARG, "dim 2 out of range");
    op = OP(TORC_OP_SOFTMAX, tensor(TORC_DTYPE_I64, SH(2), NULL), tensor(TORC_DTYPE_I64, SH(2), NULL));
    ck_assert(!vt->supports(vt_ctx, 0, &op));
}
END_TEST

// ============================ index ops ============================
static torc_op dim_op(torc_opcode code, torc_operand out, torc_operand a, torc_operand b, int dim) {
    torc_op op = OP(code, out, a, b);
    op.params.dim.dim = dim;
    return op;
}

// An int64 index tensor from values.
static torc_operand idx_tensor(int ndim, const int64_t *shape, const int64_t *vals) {
    torc_operand t = tensor(TORC_DTYPE_I64, ndim, shape, NULL);
    memcpy(t.data, vals, (size_t)numel(&t) * 8);
    return t;
}
#define IDX(shape, ...) idx_tensor(shape, I(__VA_ARGS__))

START_TEST(test_index_select) {
    const double xv[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};  // (3, 4)
    torc_operand x = tensor(TORC_DTYPE_F32, SH(3, 4), xv);
    torc_operand o = tensor(TORC_DTYPE_F32, SH(3, 4), NULL);
    torc_op op = dim_op(TORC_OP_INDEX_SELECT, o, x, IDX(SH(3), 2, 0, 2), 0);
    run_ok(op);
    expect_vals(o, V(8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11));
    // dim 1 on a transposed x^T view (4, 3) -> its columns; a stepped index; a stepped out.
    torc_operand xt = transposed(x, 0, 1);  // (4, 3): [[0,4,8],[1,5,9],[2,6,10],[3,7,11]]
    torc_operand idx = strided(TORC_DTYPE_I64, SH(2), I(2), 4, V(2, -7, 0, -7));
    torc_operand o2 = strided(TORC_DTYPE_F32, SH(4, 2), I(4, 2), 16, NULL);
    op = dim_op(TORC_OP_INDEX_SELECT, o2, xt, idx, 1);
    run_ok(op);
    expect_vals(o2, V(8, 0, 9, 1, 10, 2, 11, 3));
    // Every dtype moves bits unchanged (bool, fp8, int64 extremes).
    const torc_dtype dts[] = {TORC_DTYPE_BOOL, TORC_DTYPE_F8_E5M2, TORC_DTYPE_I64, TORC_DTYPE_BF16, TORC_DTYPE_U8};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        torc_operand a = tensor(dts[t], SH(3), V(1, 0, 1)), ao = tensor(dts[t], SH(4), NULL);
        op = dim_op(TORC_OP_INDEX_SELECT, ao, a, IDX(SH(4), 1, 1, 2, 0), 0);
        run_ok(op);
        expect_vals(ao, V(0, 0, 1, 1));
    }
    // Out of range (either side): PyTorch's text, and nothing written.
    torc_operand o3 = tensor(TORC_DTYPE_F32, SH(2, 4), NULL);
    op = dim_op(TORC_OP_INDEX_SELECT, o3, x, IDX(SH(2), 0, 3), 0);
    run_fails(op, TORC_ERR_INDEX, "index out of range in self");
    for (int i = 0; i < 8; i++) ck_assert_uint_eq(((uint32_t *)o3.data)[i], 0xABABABABu);
    op = dim_op(TORC_OP_INDEX_SELECT, o3, x, IDX(SH(2), -1, 0), 0);
    run_fails(op, TORC_ERR_INDEX, "index out of range in self");
    // An empty index gives an empty out; a 0-dim input takes index [0].
    torc_operand oe = tensor(TORC_DTYPE_F32, SH(0, 4), NULL);
    oe.data = NULL;
    op = dim_op(TORC_OP_INDEX_SELECT, oe, x, IDX(SH(0), 0), 0);
    op.in[1].data = NULL;
    run_ok(op);
    torc_operand s = tensor(TORC_DTYPE_F64, 0, NULL, V(3.25)), so = tensor(TORC_DTYPE_F64, 0, NULL, NULL);
    op = dim_op(TORC_OP_INDEX_SELECT, so, s, IDX(SH(1), 0), 0);
    run_ok(op);
    expect_vals(so, V(3.25));
    // Shape and dtype errors.
    op = dim_op(TORC_OP_INDEX_SELECT, o, x, IDX(SH(2), 0, 1), 0);
    run_fails(op, TORC_ERR_SHAPE, "except along dim 0");
    op = dim_op(TORC_OP_INDEX_SELECT, o, x, IDX(SH(3), 0, 1, 2), 2);
    run_fails(op, TORC_ERR_INVALID_ARG, "dim 2 out of range");
    op = dim_op(TORC_OP_INDEX_SELECT, o, x, tensor(TORC_DTYPE_I32, SH(3), V(0, 1, 2)), 0);
    ck_assert(!vt->supports(vt_ctx, 0, &op));
}
END_TEST

START_TEST(test_gather_scatter_add) {
    torc_operand x = tensor(TORC_DTYPE_F64, SH(2, 3), V(1, 2, 3, 4, 5, 6));
    torc_operand o = tensor(TORC_DTYPE_F64, SH(2, 2), NULL);
    torc_op op = dim_op(TORC_OP_GATHER, o, x, IDX(SH(2, 2), 0, 0, 2, 1), 1);
    run_ok(op);
    expect_vals(o, V(1, 1, 6, 5));  // torch.gather golden
    // dim 0 with a broadcast (stride-0) index row and a transposed input.
    torc_operand xt = transposed(tensor(TORC_DTYPE_I32, SH(3, 2), V(1, 4, 2, 5, 3, 6)), 0, 1);  // same values as x
    torc_operand brow = strided(TORC_DTYPE_I64, SH(2, 3), I(0, 1), 3, V(1, 0, 1));
    torc_operand oi = tensor(TORC_DTYPE_I32, SH(2, 3), NULL);
    op = dim_op(TORC_OP_GATHER, oi, xt, brow, 0);
    run_ok(op);
    expect_ints(oi, I(4, 2, 6, 4, 2, 6));
    // Out of range: PyTorch's text, nothing written.
    torc_operand o3 = tensor(TORC_DTYPE_F64, SH(1, 2), NULL);
    op = dim_op(TORC_OP_GATHER, o3, x, IDX(SH(1, 2), 0, 5), 1);
    run_fails(op, TORC_ERR_INDEX, "index 5 is out of bounds for dimension 1 with size 3");
    ck_assert_uint_eq(((uint64_t *)o3.data)[0], UINT64_C(0xABABABABABABABAB));
    op = dim_op(TORC_OP_GATHER, o3, x, IDX(SH(1, 2), -1, 0), 1);
    run_fails(op, TORC_ERR_INDEX, "index -1 is out of bounds for dimension 1 with size 3");
    op = dim_op(TORC_OP_GATHER, o3, x, IDX(SH(2), 0, 1), 1);
    run_fails(op, TORC_ERR_SHAPE, "Index tensor must have the same number of dimensions as input tensor");

    // scatter_add_: the index may be smaller than src; duplicates accumulate (torch golden).
    torc_operand acc = tensor(TORC_DTYPE_F32, SH(2, 3), V(0, 0, 0, 0, 0, 0));
    torc_operand src = tensor(TORC_DTYPE_F32, SH(2, 3), V(1, 1, 1, 1, 1, 1));
    op = dim_op(TORC_OP_SCATTER_ADD, acc, src, IDX(SH(1, 3), 0, 0, 2), 1);
    run_ok(op);
    expect_vals(acc, V(2, 0, 1, 0, 0, 0));
    // Narrow floats accumulate wide and round once, as torch: bf16 256 + 1 + 1 = 258.
    torc_operand b = tensor(TORC_DTYPE_BF16, SH(1, 1), V(256)), bs = tensor(TORC_DTYPE_BF16, SH(1, 2), V(1, 1));
    op = dim_op(TORC_OP_SCATTER_ADD, b, bs, IDX(SH(1, 2), 0, 0), 1);
    run_ok(op);
    expect_vals(b, V(258));
    // ... into a transposed f16 out (storage offsets, not logical ones, key the accumulator).
    torc_operand ht = transposed(tensor(TORC_DTYPE_F16, SH(3, 2), V(0, 0, 0, 0, 0, 0)), 0, 1);  // (2, 3)
    torc_operand hs = tensor(TORC_DTYPE_F16, SH(2, 3), V(1, 2, 3, 4, 5, 6));
    op = dim_op(TORC_OP_SCATTER_ADD, ht, hs, IDX(SH(2, 3), 2, 2, 0, 1, 1, 1), 1);
    run_ok(op);
    expect_vals(ht, V(3, 0, 3, 0, 15, 0));
    // Integers wrap; bool adds are ors.
    torc_operand u = tensor(TORC_DTYPE_U8, SH(2), V(250, 0)), us = tensor(TORC_DTYPE_U8, SH(3), V(5, 5, 7));
    op = dim_op(TORC_OP_SCATTER_ADD, u, us, IDX(SH(3), 0, 0, 1), 0);
    run_ok(op);
    expect_ints(u, I(4, 7));
    torc_operand bo = tensor(TORC_DTYPE_BOOL, SH(3), V(0, 0, 1)), bsrc = tensor(TORC_DTYPE_BOOL, SH(2), V(1, 1));
    op = dim_op(TORC_OP_SCATTER_ADD, bo, bsrc, IDX(SH(2), 1, 1), 0);
    run_ok(op);
    expect_ints(bo, I(0, 1, 1));
    // Out of range writes nothing, even for the valid entries before it.
    op = dim_op(TORC_OP_SCATTER_ADD, acc, src, IDX(SH(1, 3), 0, 1, 3), 1);
    run_fails(op, TORC_ERR_INDEX, "index 3 is out of bounds for dimension 1 with size 3");
    expect_vals(acc, V(2, 0, 1, 0, 0, 0));
}
END_TEST

START_TEST(test_index_add) {
    // torch golden: zeros(2,3).index_add_(1, [1,1,0], [[1,2,3],[4,5,6]]) = [[3,3,0],[6,9,0]].
    torc_operand o = tensor(TORC_DTYPE_F32, SH(2, 3), V(0, 0, 0, 0, 0, 0));
    torc_operand src = tensor(TORC_DTYPE_F32, SH(2, 3), V(1, 2, 3, 4, 5, 6));
    torc_op op = dim_op(TORC_OP_INDEX_ADD, o, src, IDX(SH(3), 1, 1, 0), 1);
    run_ok(op);
    expect_vals(o, V(3, 3, 0, 6, 9, 0));
    // A transposed source along dim 0 of an int64 out.
    torc_operand l = tensor(TORC_DTYPE_I64, SH(3, 2), V(1, 1, 1, 1, 1, 1));
    torc_operand lt = transposed(tensor(TORC_DTYPE_I64, SH(2, 2), V(10, 30, 20, 40)), 0, 1);  // [[10,20],[30,40]]
    op = dim_op(TORC_OP_INDEX_ADD, l, lt, IDX(SH(2), 2, 0), 0);
    run_ok(op);
    expect_ints(l, I(31, 41, 1, 1, 11, 21));
    // Sequential rounding as torch's index_add_: bf16 256 + 1 + 1 stays 256.
    torc_operand b = tensor(TORC_DTYPE_BF16, SH(1), V(256)), bs = tensor(TORC_DTYPE_BF16, SH(2), V(1, 1));
    op = dim_op(TORC_OP_INDEX_ADD, b, bs, IDX(SH(2), 0, 0), 0);
    run_ok(op);
    expect_vals(b, V(256));
    op = dim_op(TORC_OP_INDEX_ADD, o, src, IDX(SH(3), 1, 3, 0), 1);
    run_fails(op, TORC_ERR_INDEX, "index 3 is out of bounds for dimension 1 with size 3");
    expect_vals(o, V(3, 3, 0, 6, 9, 0));
    op = dim_op(TORC_OP_INDEX_ADD, o, src, IDX(SH(3), 1, -1, 0), 1);
    run_fails(op, TORC_ERR_INDEX, "index -1 is out of bounds for dimension 1 with size 3");
}
END_TEST

START_TEST(test_masked_select_scatter) {
    torc_operand x = tensor(TORC_DTYPE_F32, SH(2, 3), V(0, 1, 2, 3, 4, 5));
    torc_operand m = tensor(TORC_DTYPE_BOOL, SH(2, 3), V(0, 0, 0, 1, 1, 1));
    torc_operand o = tensor(TORC_DTYPE_F32, SH(3), NULL);
    torc_op op = OP(TORC_OP_MASKED_SELECT, o, x, m);
    run_ok(op);
    expect_vals(o, V(3, 4, 5));  // torch.masked_select(x, x > 2)
    // Row-major order over a transposed input and a broadcast mask column.
    torc_operand xt = transposed(tensor(TORC_DTYPE_BF16, SH(3, 2), V(0, 3, 1, 4, 2, 5)), 0, 1);  // == x
    torc_operand mcol = strided(TORC_DTYPE_BOOL, SH(2, 3), I(1, 0), 2, V(1, 0));
    torc_operand ob = strided(TORC_DTYPE_BF16, SH(3), I(2), 6, NULL);
    op = OP(TORC_OP_MASKED_SELECT, ob, xt, mcol);
    run_ok(op);
    expect_vals(ob, V(0, 1, 2));
    op = OP(TORC_OP_MASKED_SELECT, tensor(TORC_DTYPE_F32, SH(4), NULL), x, m);
    run_fails(op, TORC_ERR_SHAPE, "out has 4 elements but the mask has 3 true entries");
    op = OP(TORC_OP_MASKED_SELECT, o, x, tensor(TORC_DTYPE_U8, SH(2, 3), V(0, 0, 0, 1, 1, 1)));
    ck_assert(!vt->supports(vt_ctx, 0, &op));

    // masked_scatter_: the source is consumed in row-major order of the mask.
    torc_operand d = tensor(TORC_DTYPE_I32, SH(2, 3), V(0, 0, 0, 0, 0, 0));
    torc_operand mk = transposed(tensor(TORC_DTYPE_BOOL, SH(3, 2), V(1, 0, 0, 1, 1, 1)), 0, 1);  // [[1,0,1],[0,1,1]]
    torc_operand srcv = tensor(TORC_DTYPE_I32, SH(5), V(10, 20, 30, 40, 50));
    op = OP(TORC_OP_MASKED_SCATTER, d, srcv, mk);
    run_ok(op);
    expect_ints(d, I(10, 0, 20, 0, 30, 40));
    op = OP(TORC_OP_MASKED_SCATTER, d, tensor(TORC_DTYPE_I32, SH(3), V(1, 2, 3)), mk);
    run_fails(op, TORC_ERR_SHAPE, "Number of elements of source < number of ones in mask");
    expect_ints(d, I(10, 0, 20, 0, 30, 40));  // untouched
    // A zero-size mask is a no-op.
    torc_operand e = tensor(TORC_DTYPE_F32, SH(0, 2), NULL), em = tensor(TORC_DTYPE_BOOL, SH(0, 2), NULL);
    torc_operand eo = tensor(TORC_DTYPE_F32, SH(0), NULL);
    e.data = em.data = eo.data = NULL;
    op = OP(TORC_OP_MASKED_SELECT, eo, e, em);
    run_ok(op);
}
END_TEST

START_TEST(test_triu_tril) {
    const double xv[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    torc_operand x = tensor(TORC_DTYPE_F32, SH(3, 4), xv), o = tensor(TORC_DTYPE_F32, SH(3, 4), NULL);
    struct { torc_opcode code; int64_t k; double exp[12]; } cases[] = {  // torch golden
        {TORC_OP_TRIU, 1, {0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11}},
        {TORC_OP_TRIL, -1, {0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0}},
        {TORC_OP_TRIU, -1, {0, 1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11}},
        {TORC_OP_TRIL, 0, {0, 0, 0, 0, 4, 5, 0, 0, 8, 9, 10, 0}},
        {TORC_OP_TRIU, INT64_MAX, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
        {TORC_OP_TRIL, INT64_MAX, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
        {TORC_OP_TRIL, INT64_MIN, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        torc_op op = OP(cases[c].code, o, x);
        op.params.tri.k = cases[c].k;
        run_ok(op);
        expect_vals(o, cases[c].exp);
    }
    // Batched, transposed input, bool and int8; in place (out == in0).
    torc_operand bt = transposed(tensor(TORC_DTYPE_BOOL, SH(2, 2, 2), V(1, 1, 1, 1, 1, 1, 1, 1)), 1, 2);
    torc_operand bo = tensor(TORC_DTYPE_BOOL, SH(2, 2, 2), NULL);
    torc_op op = OP(TORC_OP_TRIU, bo, bt);
    run_ok(op);
    expect_ints(bo, I(1, 1, 0, 1, 1, 1, 0, 1));
    torc_operand i8 = tensor(TORC_DTYPE_I8, SH(2, 2), V(-1, -2, -3, -4));
    op = OP(TORC_OP_TRIL, i8, i8);
    run_ok(op);
    expect_ints(i8, I(-1, 0, -3, -4));
    op = OP(TORC_OP_TRIU, tensor(TORC_DTYPE_F32, SH(3), NULL), tensor(TORC_DTYPE_F32, SH(3), NULL));
    run_fails(op, TORC_ERR_SHAPE, "triu: input tensor must have at least 2 dimensions");
    torc_operand z = tensor(TORC_DTYPE_F32, SH(0, 3), NULL);
    z.data = NULL;
    op = OP(TORC_OP_TRIL, z, z);
    run_ok(op);
}
END_TEST

// ============================ malformed ops ============================
START_TEST(test_malformed_ops) {
    torc_operand a = tensor(TORC_DTYPE_F32, SH(2), V(1, 2)), o = tensor(TORC_DTYPE_F32, SH(2), NULL);
    torc_op op = OP(TORC_OP_ADD, o, a);  // one input for a binary op
    ck_assert(!vt->supports(vt_ctx, 0, &op));
    run_fails(op, TORC_ERR_INVALID_ARG, "add takes 2 input(s), got 1");
    op = OP(TORC_OP_ADD, o, a, a);
    op.code = TORC_OP_COUNT;
    op.n_out = 1;
    ck_assert(!vt->supports(vt_ctx, 0, &op));
    ck_assert_int_ne(vt->run(vt_ctx, 0, &op), 0);
    op.code = (torc_opcode)-1;
    op.n_out = 1;
    ck_assert_int_ne(vt->run(vt_ctx, 0, &op), 0);
    op = OP(TORC_OP_ADD, o, a, a);
    op.in[1].ndim = TORC_MAX_DIMS + 1;
    ck_assert(!vt->supports(vt_ctx, 0, &op));
    run_fails(op, TORC_ERR_INVALID_ARG, "in1 has ndim 9");
    op = OP(TORC_OP_ADD, o, a, a);
    op.in[0].data = NULL;
    run_fails(op, TORC_ERR_INVALID_ARG, "in0 has NULL data but 2 elements");
    op = OP(TORC_OP_ADD, o, a, a);
    op.out[0].dtype = (torc_dtype)TORC_DTYPE_COUNT;
    run_fails(op, TORC_ERR_DTYPE, "invalid dtype");
    op = OP(TORC_OP_ADD, o, a, a);
    op.in[0].shape[0] = -1;
    run_fails(op, TORC_ERR_SHAPE, "negative size");
    torc_operand three = tensor(TORC_DTYPE_F32, SH(3), NULL);
    op = OP(TORC_OP_ADD, o, a, three);
    run_fails(op, TORC_ERR_SHAPE, "in1 has shape [3] but out has shape [2]");
    ck_assert_int_ne(vt->run(vt_ctx, 1, &op), 0);
    ck_assert_int_ne(vt->run(vt_ctx, 0, NULL), 0);
    ck_assert(!vt->supports(vt_ctx, 0, NULL));
}
END_TEST

static Suite *reference_suite(void) {
    Suite *s = suite_create("reference_backend");
    struct { const char *name; const TTest *fn; } tests[] = {
        {"vtable", test_vtable_and_device}, {"alloc", test_alloc_copy},
        {"fill", test_fill}, {"copy_casts", test_copy_casts}, {"copy_strided", test_copy_strided},
        {"ranges", test_arange_linspace},
        {"binary_float", test_add_sub_mul_div_float}, {"binary_strided", test_binary_strided_broadcast},
        {"binary_int", test_binary_integer},
        {"unary_golden", test_unary_golden}, {"unary_signs", test_unary_signs_and_ints},
        {"unary_strided", test_unary_strided_and_logical_not}, {"pow", test_pow},
        {"maximum_minimum", test_maximum_minimum}, {"comparisons", test_comparisons_logical}, {"where", test_where},
        {"random", test_random_uniform_normal_int},
        {"reduce_golden", test_reduce_golden}, {"reduce_int", test_reduce_integer_and_bool},
        {"reduce_nan", test_reduce_nan_and_accuracy}, {"reduce_empty", test_reduce_empty_and_shapes},
        {"softmax", test_softmax},
        {"index_select", test_index_select}, {"gather_scatter_add", test_gather_scatter_add},
        {"index_add", test_index_add}, {"masked", test_masked_select_scatter}, {"triu_tril", test_triu_tril},
        {"matmul", test_matmul_basic}, {"matmul_batched", test_matmul_batched_and_edges},
        {"malformed", test_malformed_ops},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, tests[i].fn);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(reference_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
