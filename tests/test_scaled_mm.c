// tests/test_scaled_mm.c — torc_scaled_mm and torc_to_fp8_scaled against the goldens of
// tools/golden/gen_scaled_mm_golden.py (decoded-fp8 math, saturation, amax), plus errors.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "torc/convert.h"

// ---- golden file ----
#define MAXV 4096

typedef struct mm_case {
    char name[64];
    torc_dtype ad, bd, od;
    int64_t M, K, N;
    float sa, sb, so;
    bool has_so;
    uint8_t a[MAXV], b[MAXV];
    uint32_t out[MAXV];  // element bits
    int64_t n_out;
    float amax;
} mm_case;

typedef struct cast_case {
    char name[64];
    torc_dtype dt;
    float scale;
    int n;
    float x[64];
    uint8_t sat[64], plain[64];
} cast_case;

static FILE *open_golden(void) {
    return tu_open_golden("scaled_mm.txt", "r");
}

static torc_dtype dt_of(const char *s) {
    torc_dtype d;
    ck_assert_msg(torc_dtype_from_name(s, &d) == TORC_OK, "unknown dtype %s", s);
    return d;
}

// Reads the hex tokens after the line's tag into v (as integers); returns how many.
static int64_t read_hex(char *line, uint32_t *v, int64_t cap) {
    int64_t n = 0;
    char *save = NULL;
    strtok_r(line, " \n", &save);  // the tag
    for (char *tok = strtok_r(NULL, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        ck_assert(n < cap);
        v[n++] = (uint32_t)strtoul(tok, NULL, 16);
    }
    return n;
}

static char g_line[1 << 16];

// The next "mm" case (returns false at the end of the file).
static bool next_mm(FILE *f, mm_case *c) {
    while (fgets(g_line, sizeof g_line, f)) {
        if (strncmp(g_line, "mm ", 3) != 0) continue;
        char a[32], b[32], o[32], sa[64], sb[64], so[64];
        long long M, K, N;
        ck_assert(sscanf(g_line, "mm %63s %31s %31s %31s %lld %lld %lld %63s %63s %63s", c->name, a, b, o, &M, &K, &N,
                         sa, sb, so) == 10);
        c->ad = dt_of(a), c->bd = dt_of(b), c->od = dt_of(o);
        c->M = M, c->K = K, c->N = N;
        c->sa = strtof(sa, NULL), c->sb = strtof(sb, NULL);
        c->has_so = strcmp(so, "-") != 0;
        c->so = c->has_so ? strtof(so, NULL) : 1.0f;
        static uint32_t tmp[MAXV];
        ck_assert(fgets(g_line, sizeof g_line, f) && strncmp(g_line, "a", 1) == 0);
        ck_assert_int_eq(read_hex(g_line, tmp, MAXV), M * K);
        for (int64_t i = 0; i < M * K; i++) c->a[i] = (uint8_t)tmp[i];
        ck_assert(fgets(g_line, sizeof g_line, f) && strncmp(g_line, "b", 1) == 0);
        ck_assert_int_eq(read_hex(g_line, tmp, MAXV), K * N);
        for (int64_t i = 0; i < K * N; i++) c->b[i] = (uint8_t)tmp[i];
        ck_assert(fgets(g_line, sizeof g_line, f) && strncmp(g_line, "out", 3) == 0);
        c->n_out = read_hex(g_line, c->out, MAXV);
        ck_assert_int_eq(c->n_out, M * N);
        ck_assert(fgets(g_line, sizeof g_line, f) && strncmp(g_line, "amax ", 5) == 0);
        c->amax = strtof(g_line + 5, NULL);
        return true;
    }
    return false;
}

static bool next_cast(FILE *f, cast_case *c) {
    while (fgets(g_line, sizeof g_line, f)) {
        if (strncmp(g_line, "cast ", 5) != 0) continue;
        char d[32], s[64];
        ck_assert(sscanf(g_line, "cast %63s %31s %63s %d", c->name, d, s, &c->n) == 4);
        ck_assert(c->n <= 64);
        c->dt = dt_of(d);
        c->scale = strtof(s, NULL);
        ck_assert(fgets(g_line, sizeof g_line, f) && strncmp(g_line, "x ", 2) == 0);
        char *save = NULL;
        strtok_r(g_line, " \n", &save);
        for (int i = 0; i < c->n; i++) c->x[i] = strtof(strtok_r(NULL, " \n", &save), NULL);
        uint32_t tmp[64];
        ck_assert(fgets(g_line, sizeof g_line, f) && strncmp(g_line, "sat ", 4) == 0);
        ck_assert_int_eq(read_hex(g_line, tmp, 64), c->n);
        for (int i = 0; i < c->n; i++) c->sat[i] = (uint8_t)tmp[i];
        ck_assert(fgets(g_line, sizeof g_line, f) && strncmp(g_line, "plain ", 6) == 0);
        ck_assert_int_eq(read_hex(g_line, tmp, 64), c->n);
        for (int i = 0; i < c->n; i++) c->plain[i] = (uint8_t)tmp[i];
        return true;
    }
    return false;
}

// ---- helpers ----
static double decode(uint32_t bits, torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F32: return torc_f32_from_bits(bits);
    case TORC_DTYPE_BF16: return torc_bf16_to_f32((uint16_t)bits);
    case TORC_DTYPE_F16: return torc_f16_to_f32((uint16_t)bits);
    case TORC_DTYPE_F8_E4M3FN: return torc_f8e4m3fn_to_f32((uint8_t)bits);
    case TORC_DTYPE_F8_E5M2: return torc_f8e5m2_to_f32((uint8_t)bits);
    default: ck_abort_msg("unexpected dtype"); return 0;
    }
}

// Element i of the host copy buf (elements of dtype d) as bits.
static uint32_t bits_at(const uint8_t *buf, size_t i, torc_dtype d) {
    const size_t sz = torc_dtype_size(d);
    uint32_t v = 0;
    memcpy(&v, buf + i * sz, sz);  // little-endian
    return v;
}

// Asserts t's elements have exactly the expected encodings (any NaN matches a NaN).
static void assert_bits(const char *name, torc_tensor *t, const uint32_t *expect, int64_t n) {
    const torc_dtype d = torc_get_dtype(t);
    ck_assert_int_eq(torc_numel(t), n);
    uint8_t *buf = malloc(torc_nbytes(t) + 1);
    ck_assert_int_eq(torc_copy_to_host(t, buf, torc_nbytes(t)), TORC_OK);
    for (int64_t i = 0; i < n; i++) {
        const uint32_t got = bits_at(buf, (size_t)i, d);
        const double e = decode(expect[i], d), g = decode(got, d);
        ck_assert_msg(got == expect[i] || (isnan(e) && isnan(g)), "%s: element %lld is %.9g (0x%x), expected %.9g (0x%x)",
                      name, (long long)i, g, got, e, expect[i]);
    }
    free(buf);
}

static torc_tensor *scalar_f32(float v) { return torc_scalar_tensor(v, TORC_DTYPE_F32); }

// Runs one golden case; b_transposed passes b as a column-major view (cuBLASLt's layout).
static void run_case(const mm_case *c, bool b_transposed) {
    torc_scope_push();
    torc_tensor *a = torc_tensor_from(c->a, TORC_SHAPE(c->M, c->K), c->ad);
    torc_tensor *b = torc_tensor_from(c->b, TORC_SHAPE(c->K, c->N), c->bd);
    ck_assert(a && b);
    if (b_transposed) {
        b = torc_contiguous(torc_transpose(b, 0, 1));  // (N, K) row-major
        b = torc_transpose(b, 0, 1);                   // (K, N) with strides (1, K)
        ck_assert(b && (c->K < 2 || c->N < 2 || !torc_is_contiguous(b)));
    }
    torc_tensor *amax = torc_full(TORC_SHAPE(1), -1.0, TORC_DTYPE_F32);
    torc_tensor *so = c->has_so ? scalar_f32(c->so) : NULL;
    const uint64_t v0 = torc_version(amax);
    torc_tensor *out = torc_scaled_mm(a, b, scalar_f32(c->sa), scalar_f32(c->sb), c->od, so, amax);
    ck_assert_msg(out != NULL, "%s: %s", c->name, torc_last_error());
    tu_assert_shape(out, c->M, c->N);
    ck_assert_int_eq(torc_get_dtype(out), c->od);
    assert_bits(c->name, out, c->out, c->n_out);
    double am;
    ck_assert_int_eq(torc_item(amax, &am), TORC_OK);
    ck_assert_msg((isnan(am) && isnan(c->amax)) || am == c->amax, "%s: amax %.9g, expected %.9g", c->name, am, c->amax);
    ck_assert_uint_gt(torc_version(amax), v0);
    torc_scope_pop();
}

START_TEST(test_golden_cases) {
    FILE *f = open_golden();
    mm_case *c = calloc(1, sizeof *c);
    int n = 0;
    while (next_mm(f, c)) {
        run_case(c, false);
        run_case(c, true);
        n++;
    }
    ck_assert_int_eq(n, 11);
    free(c);
    fclose(f);
}
END_TEST

START_TEST(test_scaled_casts) {
    FILE *f = open_golden();
    cast_case c;
    int n = 0;
    while (next_cast(f, &c)) {
        torc_scope_push();
        torc_tensor *x = torc_tensor_from(c.x, TORC_SHAPE(c.n), TORC_DTYPE_F32);
        torc_tensor *s = scalar_f32(c.scale);
        torc_tensor *y = torc_to_fp8_scaled(x, s, c.dt);
        ck_assert_msg(y != NULL, "%s: %s", c.name, torc_last_error());
        ck_assert_int_eq(torc_get_dtype(y), c.dt);
        uint32_t e[64];
        for (int i = 0; i < c.n; i++) e[i] = c.sat[i];
        assert_bits(c.name, y, e, c.n);
        // The plain cast of the same product keeps PyTorch's rules (e5m2 overflows to inf).
        torc_tensor *p = torc_to_dtype(torc_mul(x, s), c.dt);
        for (int i = 0; i < c.n; i++) e[i] = c.plain[i];
        assert_bits(c.name, p, e, c.n);
        torc_scope_pop();
        n++;
    }
    ck_assert_int_eq(n, 5);
    fclose(f);
}
END_TEST

START_TEST(test_scaled_cast_shapes_and_inputs) {
    torc_scope_push();
    // A bf16 input and a zero-dim one: computed in f32, shape kept.
    const float v[6] = {1, -2, 300, 1000, 0.5f, -0.25f};
    torc_tensor *x = torc_to_dtype(torc_tensor_from(v, TORC_SHAPE(2, 3), TORC_DTYPE_F32), TORC_DTYPE_BF16);
    torc_tensor *y = torc_to_fp8_scaled(x, torc_full(TORC_SHAPE(1), 0.5, TORC_DTYPE_F32), TORC_DTYPE_F8_E4M3FN);
    tu_assert_shape(y, 2, 3);
    tu_assert_values(y, TU_ARR(0.5, -1, 144, 448, 0.25, -0.125), 0);
    torc_tensor *z = torc_to_fp8_scaled(torc_scalar_tensor(1e6, TORC_DTYPE_F32), scalar_f32(1), TORC_DTYPE_F8_E5M2);
    ck_assert_int_eq(torc_ndim(z), 0);
    tu_assert_values(z, TU_ARR(57344), 0);
    // Not differentiable: the result never requires grad.
    torc_tensor *w = torc_ones(TORC_SHAPE(3), TORC_DTYPE_F32);
    torc_set_requires_grad(w, true);
    torc_tensor *wq = torc_to_fp8_scaled(w, scalar_f32(2), TORC_DTYPE_F8_E4M3FN);
    ck_assert(wq && !torc_requires_grad(wq));
    torc_scope_pop();
}
END_TEST

START_TEST(test_scaled_cast_errors) {
    torc_scope_push();
    torc_tensor *x = torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32), *s = scalar_f32(1);
    ck_assert_ptr_null(torc_to_fp8_scaled(x, s, TORC_DTYPE_BF16));
    tu_assert_error(TORC_ERR_DTYPE, "Float8_e4m3fn or Float8_e5m2");
    ck_assert_ptr_null(torc_to_fp8_scaled(torc_ones(TORC_SHAPE(2), TORC_DTYPE_I32), s, TORC_DTYPE_F8_E4M3FN));
    tu_assert_error(TORC_ERR_DTYPE, "floating-point input");
    ck_assert_ptr_null(torc_to_fp8_scaled(x, torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32), TORC_DTYPE_F8_E4M3FN));
    tu_assert_error(TORC_ERR_DTYPE, "one-element Float");
    ck_assert_ptr_null(torc_to_fp8_scaled(x, torc_scalar_tensor(1, TORC_DTYPE_F64), TORC_DTYPE_F8_E4M3FN));
    tu_assert_error(TORC_ERR_DTYPE, "one-element Float");
    torc_clear_error();  // a NULL argument keeps an error already set
    ck_assert_ptr_null(torc_to_fp8_scaled(NULL, s, TORC_DTYPE_F8_E4M3FN));
    tu_assert_error(TORC_ERR_INVALID_ARG, "NULL");
    torc_scope_pop();
}
END_TEST

static torc_tensor *fp8_ones(int64_t r, int64_t c, torc_dtype d) {
    return torc_to_dtype(torc_ones(TORC_SHAPE(r, c), TORC_DTYPE_F32), d);
}

START_TEST(test_scaled_mm_errors) {
    torc_scope_push();
    const torc_dtype E4 = TORC_DTYPE_F8_E4M3FN, E5 = TORC_DTYPE_F8_E5M2;
    torc_tensor *a = fp8_ones(2, 3, E4), *b = fp8_ones(3, 4, E4), *one = scalar_f32(1);
    ck_assert_ptr_null(torc_scaled_mm(fp8_ones(2, 3, E5), fp8_ones(3, 4, E5), one, one, TORC_DTYPE_F32, NULL, NULL));
    tu_assert_error(TORC_ERR_DTYPE, "Multiplication of two Float8_e5m2 matrices is not supported");
    ck_assert_ptr_null(torc_scaled_mm(torc_ones(TORC_SHAPE(2, 3), TORC_DTYPE_F32), b, one, one, TORC_DTYPE_F32, NULL, NULL));
    tu_assert_error(TORC_ERR_DTYPE, "got Float and Float8_e4m3fn");
    ck_assert_ptr_null(torc_scaled_mm(a, fp8_ones(4, 3, E4), one, one, TORC_DTYPE_F32, NULL, NULL));
    tu_assert_error(TORC_ERR_SHAPE, "_scaled_mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x3)");
    ck_assert_ptr_null(torc_scaled_mm(torc_select(a, 0, 0), b, one, one, TORC_DTYPE_F32, NULL, NULL));
    tu_assert_error(TORC_ERR_SHAPE, "self must be a matrix, got 1-D tensor");
    ck_assert_ptr_null(torc_scaled_mm(a, torc_select(b, 1, 0), one, one, TORC_DTYPE_F32, NULL, NULL));
    tu_assert_error(TORC_ERR_SHAPE, "mat2 must be a matrix");
    ck_assert_ptr_null(torc_scaled_mm(a, b, torc_scalar_tensor(1, TORC_DTYPE_F64), one, TORC_DTYPE_F32, NULL, NULL));
    tu_assert_error(TORC_ERR_DTYPE, "Invalid scaling configuration");
    ck_assert_ptr_null(torc_scaled_mm(a, b, one, torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32), TORC_DTYPE_F32, NULL, NULL));
    tu_assert_error(TORC_ERR_DTYPE, "singletons");
    ck_assert_ptr_null(torc_scaled_mm(a, b, one, one, TORC_DTYPE_F64, NULL, NULL));
    tu_assert_error(TORC_ERR_DTYPE, "out_dtype must be Float, BFloat16, Half, Float8_e4m3fn or Float8_e5m2, got Double");
    ck_assert_ptr_null(torc_scaled_mm(a, b, one, one, TORC_DTYPE_F8_E4M3FN, torc_scalar_tensor(1, TORC_DTYPE_BF16), NULL));
    tu_assert_error(TORC_ERR_DTYPE, "scale_result");
    ck_assert_ptr_null(torc_scaled_mm(a, b, one, one, TORC_DTYPE_F32, NULL, torc_zeros(TORC_SHAPE(2), TORC_DTYPE_F32)));
    tu_assert_error(TORC_ERR_DTYPE, "amax");
    torc_clear_error();  // a NULL argument keeps an error already set
    ck_assert_ptr_null(torc_scaled_mm(a, NULL, one, one, TORC_DTYPE_F32, NULL, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "NULL");
    // No derivative, as PyTorch: an operand that requires grad is refused up front.
    torc_tensor *s = scalar_f32(1);
    torc_set_requires_grad(s, true);
    ck_assert_ptr_null(torc_scaled_mm(a, b, s, one, TORC_DTYPE_F32, NULL, NULL));
    tu_assert_error(TORC_ERR_AUTOGRAD, "derivative for '_scaled_mm' is not implemented");
    torc_no_grad_begin();
    ck_assert_ptr_nonnull(torc_scaled_mm(a, b, s, one, TORC_DTYPE_F32, NULL, NULL));
    torc_no_grad_end();
    torc_set_requires_grad(s, false);
    torc_scope_pop();
}
END_TEST

START_TEST(test_scaled_mm_values_and_flops) {
    torc_scope_push();
    // a = [[1, 2], [3, 4]] (e4m3), b = [[0.5, -1], [2, 0.25]] (e5m2): a @ b = [[4.5, -0.5], [9.5, -2]];
    // scales 2 and 0.25 halve it; fp8 output scaled by 4 (multiplied, as cuBLASLt's D scale).
    const float av[4] = {1, 2, 3, 4}, bv[4] = {0.5f, -1, 2, 0.25f};
    torc_tensor *a = torc_to_dtype(torc_tensor_from(av, TORC_SHAPE(2, 2), TORC_DTYPE_F32), TORC_DTYPE_F8_E4M3FN);
    torc_tensor *b = torc_to_dtype(torc_tensor_from(bv, TORC_SHAPE(2, 2), TORC_DTYPE_F32), TORC_DTYPE_F8_E5M2);
    torc_flops_reset();
    torc_tensor *r = torc_scaled_mm(a, b, scalar_f32(2), scalar_f32(0.25f), TORC_DTYPE_F32, NULL, NULL);
    tu_assert_values(r, TU_ARR(2.25, -0.25, 4.75, -1), 0);
    ck_assert_uint_eq(torc_flops(TORC_PHASE_FORWARD, TORC_OP_SCALED_MM, TORC_DTYPE_F8_E4M3FN), 16);
    ck_assert_str_eq(torc_op_name(TORC_OP_SCALED_MM), "scaled_mm");
    torc_tensor *amax = torc_zeros(TORC_SHAPE(1, 1), TORC_DTYPE_F32);
    torc_tensor *q = torc_scaled_mm(a, b, scalar_f32(2), scalar_f32(0.25f), TORC_DTYPE_F8_E4M3FN, scalar_f32(4), amax);
    tu_assert_values(q, TU_ARR(9, -1, 20, -4), 0);  // 19 rounds to even: 20
    tu_assert_values(amax, TU_ARR(4.75), 0);
    // Without scale_out an fp8 output is scaled by 1; scale_out is ignored for wider outputs.
    tu_assert_values(torc_scaled_mm(a, b, scalar_f32(2), scalar_f32(0.25f), TORC_DTYPE_F8_E5M2, NULL, NULL),
                     TU_ARR(2, -0.25, 5, -1), 0);  // two mantissa bits
    tu_assert_values(torc_scaled_mm(a, b, scalar_f32(2), scalar_f32(0.25f), TORC_DTYPE_BF16, scalar_f32(4), NULL),
                     TU_ARR(2.25, -0.25, 4.75, -1), 0);
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("scaled_mm");
    TCase *tc = tcase_create("scaled_mm");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_golden_cases);
    tcase_add_test(tc, test_scaled_casts);
    tcase_add_test(tc, test_scaled_cast_shapes_and_inputs);
    tcase_add_test(tc, test_scaled_cast_errors);
    tcase_add_test(tc, test_scaled_mm_errors);
    tcase_add_test(tc, test_scaled_mm_values_and_flops);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(make_suite()); }
