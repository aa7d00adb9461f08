// tests/test_reference_backend.c — the reference backend (every other backend's oracle) driven
// directly through its vtable: each opcode on contiguous, strided, broadcast and zero-size views.
// Expected values are exact where the math is; tools/golden/gen_reference_backend.py made the rest.
#include <check.h>
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

// Every buffer a test allocates is tracked and freed in teardown (tests run leak-checked).
#define MAX_BUFS 256
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
    ck_assert_int_eq(vt->init(), 0);
    nbufs = 0;
}

static void teardown(void) {
    for (int i = 0; i < nbufs; i++) free(bufs[i]);
    nbufs = 0;
    vt->shutdown();
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
    op.n_in = n_in;
    for (int i = 0; i < n_in; i++) op.in[i] = in[i];
    op.out = out;
    return op;
}
#define OP(code, out, ...) mkop((code), (out), (int)(sizeof((torc_operand[]){__VA_ARGS__}) / sizeof(torc_operand)), \
                                (torc_operand[]){__VA_ARGS__})
#define OP0(code, out) mkop((code), (out), 0, NULL)

static void run_ok_(const torc_op *op, int line) {
    ck_assert_msg(vt->supports(0, op), "line %d: supports() is false for opcode %d", line, (int)op->code);
    const int st = vt->run(0, op);
    ck_assert_msg(st == TORC_OK, "line %d: run failed (%d): %s", line, st, vt->last_error());
}
#define run_ok(op) run_ok_(&(op), __LINE__)

// Runs an op that must fail with `status` and a message containing `text`.
static void run_fails_(const torc_op *op, int status, const char *text, int line) {
    const int st = vt->run(0, op);
    ck_assert_msg(st == status, "line %d: expected status %d, got %d (%s)", line, status, st, vt->last_error());
    ck_assert_msg(strstr(vt->last_error(), text) != NULL, "line %d: message '%s' lacks '%s'", line,
                  vt->last_error(), text);
}
#define run_fails(op, status, text) run_fails_(&(op), (status), (text), __LINE__)

static const torc_dtype float_dtypes[] = {TORC_DTYPE_F64, TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16};

// ============================ the vtable ============================
START_TEST(test_vtable_and_device) {
    ck_assert_uint_eq(vt->abi_version, TORC_BACKEND_ABI_VERSION);
    ck_assert_uint_eq(vt->struct_size, sizeof(torc_backend_vtable));
    ck_assert_str_eq(vt->name, "reference");
    ck_assert_int_eq(vt->device_count(), 1);
    ck_assert_ptr_null(vt->event_create);
    ck_assert_ptr_null(vt->memory_stats);
    ck_assert_ptr_null(vt->empty_cache);
    torc_device_info info;
    ck_assert_int_eq(vt->device_info(0, &info), 0);
    ck_assert(info.host_memory);
    ck_assert(strlen(info.name) > 0);
    ck_assert_uint_gt(info.total_memory, 0);
    for (int d = 0; d < TORC_DTYPE_COUNT; d++) ck_assert(info.peak_flops[d] == 0.0);
    ck_assert_str_eq(info.peak_source, "reference backend: no promise");
    ck_assert_int_ne(vt->device_info(1, &info), 0);
    ck_assert_int_eq(vt->synchronize(0), 0);
    // A host of another major version gets NULL.
    torc_backend_entry_fn entry = (torc_backend_entry_fn)dlsym(lib, TORC_BACKEND_ENTRY_SYMBOL);
    ck_assert_ptr_null(entry((TORC_BACKEND_ABI_MAJOR + 1u) << 16));
    // The plugin exports nothing else.
    ck_assert_ptr_null(dlsym(lib, "ref_error"));
    ck_assert_ptr_null(dlsym(lib, "ref_iter_run"));
}
END_TEST

START_TEST(test_alloc_copy) {
    void *a = vt->alloc(0, 100), *z = vt->alloc(0, 0);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(z);
    ck_assert_uint_eq((uintptr_t)a % 64, 0);
    ck_assert_uint_eq((uintptr_t)z % 64, 0);
    char src[100];
    for (int i = 0; i < 100; i++) src[i] = (char)i;
    ck_assert_int_eq(vt->copy(0, a, src, 100, TORC_COPY_HOST_TO_DEVICE, false), 0);
    char back[100];
    ck_assert_int_eq(vt->copy(0, back, a, 100, TORC_COPY_DEVICE_TO_HOST, true), 0);
    ck_assert_int_eq(memcmp(src, back, 100), 0);
    ck_assert_int_eq(vt->copy(0, z, a, 0, TORC_COPY_DEVICE_TO_DEVICE, false), 0);
    vt->free(0, a);
    vt->free(0, z);
    vt->free(0, NULL);
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
    ck_assert(!vt->supports(0, &op));
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
        op.params.scalar.value = 1.0;
        run_ok(op);
        expect_vals(o, V(0.5, 3, 1, -4, 5, 3));
        op.code = TORC_OP_MUL;
        run_ok(op);
        expect_vals(o, V(0.5, -2, 6, 32, 0, 18));
        op.code = TORC_OP_DIV;
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
    run_ok(op);
    expect_ints(o, I(2147483646, INT32_MAX, 10));
    op.code = TORC_OP_MUL;
    run_ok(op);
    expect_ints(o, I(2147483647, INT32_MIN, -21));
    op.code = TORC_OP_ADD;
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
    run_ok(op);
    expect_ints(o, I(240, 254, 255));
    op.code = TORC_OP_MUL;
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
    run_ok(op);
    expect_ints(o, I(0, 0, 0, 1));
    op.code = TORC_OP_SUB;
    ck_assert(!vt->supports(0, &op));
    run_fails(op, TORC_ERR_DTYPE, "Subtraction, the `-` operator, with two bool tensors is not supported.");

    // True division of integers writes floating; an integer out is not supported.
    torc_operand x = tensor(TORC_DTYPE_I32, SH(3), V(1, 2, 3)), y = tensor(TORC_DTYPE_I32, SH(3), V(3, 4, 0));
    o = tensor(TORC_DTYPE_F32, SH(3), NULL);
    op = OP(TORC_OP_DIV, o, x, y);
    run_ok(op);
    expect_vals(o, V((double)(1.0f / 3.0f), 0.5, INFINITY));
    o = tensor(TORC_DTYPE_I32, SH(3), NULL);
    op = OP(TORC_OP_DIV, o, x, y);
    ck_assert(!vt->supports(0, &op));
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
    ck_assert(!vt->supports(0, &op));
    run_fails(op, TORC_ERR_DTYPE, "not implemented for 'Bool'");
    a = tensor(TORC_DTYPE_F32, SH(1, 1), V(1)), o = tensor(TORC_DTYPE_I64, SH(1, 1), NULL);
    op = OP(TORC_OP_MATMUL, o, a, a);
    ck_assert(!vt->supports(0, &op));
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

// ============================ malformed ops ============================
START_TEST(test_malformed_ops) {
    torc_operand a = tensor(TORC_DTYPE_F32, SH(2), V(1, 2)), o = tensor(TORC_DTYPE_F32, SH(2), NULL);
    torc_op op = OP(TORC_OP_ADD, o, a);  // one input for a binary op
    ck_assert(!vt->supports(0, &op));
    run_fails(op, TORC_ERR_INVALID_ARG, "add takes 2 input(s), got 1");
    op = OP(TORC_OP_ADD, o, a, a);
    op.code = TORC_OP_COUNT;
    ck_assert(!vt->supports(0, &op));
    ck_assert_int_ne(vt->run(0, &op), 0);
    op.code = (torc_opcode)-1;
    ck_assert_int_ne(vt->run(0, &op), 0);
    op = OP(TORC_OP_ADD, o, a, a);
    op.in[1].ndim = TORC_MAX_DIMS + 1;
    ck_assert(!vt->supports(0, &op));
    run_fails(op, TORC_ERR_INVALID_ARG, "in1 has ndim 9");
    op = OP(TORC_OP_ADD, o, a, a);
    op.in[0].data = NULL;
    run_fails(op, TORC_ERR_INVALID_ARG, "in0 has NULL data but 2 elements");
    op = OP(TORC_OP_ADD, o, a, a);
    op.out.dtype = (torc_dtype)TORC_DTYPE_COUNT;
    run_fails(op, TORC_ERR_DTYPE, "invalid dtype");
    op = OP(TORC_OP_ADD, o, a, a);
    op.in[0].shape[0] = -1;
    run_fails(op, TORC_ERR_SHAPE, "negative size");
    torc_operand three = tensor(TORC_DTYPE_F32, SH(3), NULL);
    op = OP(TORC_OP_ADD, o, a, three);
    run_fails(op, TORC_ERR_SHAPE, "in1 has shape [3] but out has shape [2]");
    ck_assert_int_ne(vt->run(1, &op), 0);
    ck_assert_int_ne(vt->run(0, NULL), 0);
    ck_assert(!vt->supports(0, NULL));
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
