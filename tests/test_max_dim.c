// tests/test_max_dim.c — torc_max_dim / torc_min_dim (torch.max / torch.min along a dim): values and
// indices against PyTorch goldens (tests/golden/ops_max_dim.txt: every dtype, dims, keepdim, ties,
// NaN, signed zeros, strided, zero-dim and zero-size inputs), the gradient, PyTorch's refusals, and
// what a failure leaves. On the reference backend and, where built, the onednn backend (its host
// loop, which must give the reference's bits: checked on large inputs too).
#define _GNU_SOURCE
#include <unistd.h>

#include "opsgolden.h"
#include "torc/backend.h"

#define FILE_ "ops_max_dim.txt"

// ---- backends ----
// The host backends to run on: reference always; onednn when it was built (its plugin file is
// there), in which case it must load.
static const char *const BACKENDS[] = {"reference", "onednn"};
#define N_BACKENDS 2

static torc_device *backend(int i) {
    torc_device *d = torc_device_get(BACKENDS[i]);
    if (!d && i > 0) {
        char path[1024];
        snprintf(path, sizeof path, "%s/lib/torc/libtorc_%s.so", getenv("TORC_BUILD_DIR"), BACKENDS[i]);
        ck_assert_msg(access(path, F_OK) != 0, "%s is built but does not load: %s", path, torc_last_error());
        fprintf(stderr, "test_max_dim: %s not built, its cases are not run\n", BACKENDS[i]);
        return NULL;
    }
    ck_assert_msg(d != NULL, "%s", torc_last_error());
    return d;
}

typedef torc_status (*minmax_fn)(const torc_tensor *, int, bool, torc_tensor **, torc_tensor **);
static minmax_fn fn_of(const char *op) { return !strncmp(op, "max", 3) ? torc_max_dim : torc_min_dim; }

// ---- goldens ----
static torc_tensor *run_minmax(const og_case *c, torc_tensor **in) {
    torc_tensor *values = NULL, *indices = NULL;
    const char *part = og_param(c, "part");
    if (fn_of(c->op)(in[0], (int)og_param_int(c, "dim", 0), og_param_int(c, "keepdim", 0), &values, &indices))
        return NULL;
    return !strncmp(part, "values", 6) ? values : indices;
}

// x.grad of sum(max(x, dim, keepdim).values * w), x a leaf with in[0]'s layout.
static torc_tensor *run_grad(const og_case *c, torc_tensor **in) {
    torc_tensor *x = torc_detach(in[0]), *values;
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    if (fn_of(c->op)(x, (int)og_param_int(c, "dim", 0), og_param_int(c, "keepdim", 0), &values, NULL)) return NULL;
    ck_assert_str_eq(torc_grad_fn_name(values), !strncmp(c->op, "max", 3) ? "MaxBackward0" : "MinBackward0");
    torc_tensor *loss = torc_sum(torc_mul(values, in[1]), TORC_ALL_DIMS, false);
    if (torc_backward(loss, NULL, false)) return NULL;
    return torc_grad(x);
}

START_TEST(values_and_indices_match_pytorch) {
    torc_device *d = backend(_i);
    if (!d) return;
    ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    og_run_cases(FILE_, "max_dim", run_minmax, OG_EXACT);
    og_run_cases(FILE_, "min_dim", run_minmax, OG_EXACT);
    torc_set_default_device(NULL);
}
END_TEST

START_TEST(gradient_matches_pytorch) {
    torc_device *d = backend(_i);
    if (!d) return;
    ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    og_run_cases(FILE_, "max_dim_grad", run_grad, OG_EXACT);
    og_run_cases(FILE_, "min_dim_grad", run_grad, OG_EXACT);
    torc_set_default_device(NULL);
}
END_TEST

// ---- bits the goldens' decimal text cannot show ----
START_TEST(values_are_the_elements_bit_for_bit) {
    torc_device *d = backend(_i);
    if (!d) return;
    ck_assert_int_eq(torc_set_default_device(d), TORC_OK);
    torc_scope_push();
    // -0.0 and +0.0 tie: the first wins, sign and all; a NaN keeps its payload.
    const uint32_t bits[6] = {0x80000000u, 0x00000000u, 0x3f800000u, 0x7fc01234u, 0x7fc00001u, 0xff800000u};
    float xf[6];
    memcpy(xf, bits, sizeof xf);
    torc_tensor *x = torc_tensor_from(xf, TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    torc_tensor *v, *i;
    ck_assert_int_eq(torc_max_dim(x, 1, false, &v, &i), TORC_OK);
    uint32_t got[2];
    int64_t idx[2];
    ck_assert_int_eq(torc_copy_to_host(v, got, sizeof got), TORC_OK);
    ck_assert_int_eq(torc_copy_to_host(i, idx, sizeof idx), TORC_OK);
    ck_assert_uint_eq(got[0], 0x3f800000u);
    ck_assert_int_eq(idx[0], 2);
    ck_assert_uint_eq(got[1], 0x7fc01234u);
    ck_assert_int_eq(idx[1], 0);
    ck_assert_int_eq(torc_min_dim(x, 1, false, &v, &i), TORC_OK);
    ck_assert_int_eq(torc_copy_to_host(v, got, sizeof got), TORC_OK);
    ck_assert_int_eq(torc_copy_to_host(i, idx, sizeof idx), TORC_OK);
    ck_assert_uint_eq(got[0], 0x80000000u);
    ck_assert_int_eq(idx[0], 0);
    ck_assert_uint_eq(got[1], 0x7fc01234u);
    ck_assert_int_eq(idx[1], 0);
    torc_scope_pop();
    torc_set_default_device(NULL);
}
END_TEST

// ---- onednn's host loop: native, and the reference's bits ----
// Whether the onednn backend itself runs op (contiguous in0 of shape, dim), not the fallback.
static bool onednn_runs(torc_device *dnn, torc_opcode code, torc_dtype dt, int ndim, const int64_t *shape, int dim) {
    torc_scope_push();
    int64_t os[TORC_MAX_DIMS];
    for (int j = 0; j < ndim; j++) os[j] = j == dim ? 1 : shape[j];
    torc_tensor *x = torc_to_device(torc_zeros(ndim, shape, dt), dnn);
    torc_tensor *v = torc_to_device(torc_zeros(ndim, os, dt), dnn), *i = torc_to_device(torc_zeros(ndim, os, TORC_DTYPE_I64), dnn);
    ck_assert_msg(x && v && i, "%s", torc_last_error());
    torc_op_call call = {.code = code, .n_in = 1, .n_out = 2, .in = {x}, .out = {v, i}};
    call.params.dim.dim = dim;
    const bool native = torc_op_supported(dnn, &call) == TORC_OK;
    torc_scope_pop();
    torc_clear_error();
    return native;
}

// Raw bytes of a tensor (malloc'ed).
static void *raw(torc_tensor *t) {
    const size_t n = (size_t)torc_numel(t) * torc_dtype_size(torc_get_dtype(t));
    void *p = malloc(n ? n : 1);
    ck_assert_int_eq(torc_copy_to_host(t, p, n), TORC_OK);
    return p;
}

// A (shape) tensor of dtype dt on dev holding few distinct values (ties everywhere) and, for
// floating dtypes, NaN in about one element of 400 and signed zeros.
static torc_tensor *tied(torc_device *dev, torc_dtype dt, int ndim, const int64_t *shape, uint64_t seed) {
    torc_generator *g = torc_generator_new(seed);
    torc_tensor *u = torc_to_device(torc_rand(ndim, shape, TORC_DTYPE_F64, g), dev);
    torc_generator_free(g);
    ck_assert_ptr_nonnull(u);
    const int64_t n = torc_numel(u);
    double *v = tu_values(u);
    const bool fl = torc_dtype_is_floating(dt);
    for (int64_t i = 0; i < n; i++) {
        const double r = v[i];
        v[i] = dt == TORC_DTYPE_BOOL ? r < 0.5 : floor(r * 9) - 4;  // -4 .. 4
        if (fl && r < 0.0025) v[i] = NAN;
        if (fl && v[i] == 0 && r > 0.5) v[i] = -0.0;
    }
    torc_tensor *t = torc_to_dtype(torc_to_device(torc_tensor_from(v, ndim, shape, TORC_DTYPE_F64), dev), dt);
    free(v);
    ck_assert_ptr_nonnull(t);
    return t;
}

START_TEST(onednn_runs_contiguous_inputs_bit_for_bit_as_the_reference) {
    torc_device *ref = backend(0), *dnn = backend(1);
    if (!dnn) return;
    static const torc_dtype dts[] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F16, TORC_DTYPE_F64,
                                     TORC_DTYPE_I64, TORC_DTYPE_I32, TORC_DTYPE_I16, TORC_DTYPE_I8,
                                     TORC_DTYPE_U8,  TORC_DTYPE_BOOL};
    // Rows along the last dim, the middle and the first; small ones, and past the parallel threshold
    // (64K elements) with sizes no vector width divides.
    static const struct { int ndim; int64_t shape[3]; } shapes[] = {
        {2, {37, 129}}, {3, {5, 301, 7}}, {2, {517, 263}}, {3, {3, 1031, 67}}, {1, {70001}},
    };
    torc_scope_push();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
            torc_tensor *xr = tied(ref, dts[k], shapes[s].ndim, shapes[s].shape, 17 + s * 31 + k);
            torc_tensor *xd = torc_to_device(xr, dnn);  // the same storage (host memory)
            for (int dim = 0; dim < shapes[s].ndim; dim++) {
                for (int op = 0; op < 2; op++) {
                    const torc_opcode code = op ? TORC_OP_MIN_DIM : TORC_OP_MAX_DIM;
                    const minmax_fn fn = op ? torc_min_dim : torc_max_dim;
                    ck_assert_msg(onednn_runs(dnn, code, dts[k], shapes[s].ndim, shapes[s].shape, dim),
                                  "onednn declines %s: %s", torc_op_name(code), torc_last_error());
                    torc_tensor *vr, *ir, *vd, *id;
                    ck_assert_int_eq(fn(xr, dim, false, &vr, &ir), TORC_OK);
                    ck_assert_int_eq(fn(xd, dim, false, &vd, &id), TORC_OK);
                    ck_assert_ptr_eq(torc_get_device(vd), dnn);
                    const size_t nb = (size_t)torc_numel(vr) * torc_dtype_size(dts[k]);
                    void *a = raw(vr), *b = raw(vd), *c = raw(ir), *e = raw(id);
                    ck_assert_msg(!memcmp(a, b, nb) && !memcmp(c, e, (size_t)torc_numel(ir) * 8),
                                  "%s %s shape %d dims, dim %d: onednn differs from the reference",
                                  torc_op_name(code), torc_dtype_name(dts[k]), shapes[s].ndim, dim);
                    free(a), free(b), free(c), free(e);
                }
            }
        }
    }
    // What it leaves to the reference: strided inputs (the goldens run those) and fp8.
    const int64_t sh[2] = {64, 64};
    ck_assert(!onednn_runs(dnn, TORC_OP_MAX_DIM, TORC_DTYPE_F8_E4M3FN, 2, sh, 1));
    torc_scope_pop();
}
END_TEST

// ---- the API's rules ----
START_TEST(refusals_use_pytorch_messages_and_leave_outputs_alone) {
    torc_scope_push();
    torc_tensor *sentinel = torc_zeros(TORC_SHAPE(1), TORC_DTYPE_F32), *v = sentinel, *i = sentinel;
    torc_tensor *x = torc_zeros(TORC_SHAPE(2, 0, 3), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_max_dim(x, -2, false, &v, &i), TORC_ERR_INDEX);
    tu_assert_error(TORC_ERR_INDEX, "max(): Expected reduction dim 1 to have non-zero size.");
    ck_assert_int_eq(torc_min_dim(x, 3, true, &v, &i), TORC_ERR_INDEX);
    tu_assert_error(TORC_ERR_INDEX, "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
    torc_tensor *f8 = torc_zeros(TORC_SHAPE(2, 3), TORC_DTYPE_F8_E5M2);
    ck_assert_int_eq(torc_min_dim(f8, 0, false, &v, &i), TORC_ERR_DTYPE);
    tu_assert_error(TORC_ERR_DTYPE, "\"min_cpu\" not implemented for 'Float8_e5m2'");
    torc_clear_error();  // a NULL argument keeps an error already set
    ck_assert_int_eq(torc_max_dim(NULL, 0, false, &v, &i), TORC_ERR_INVALID_ARG);
    tu_assert_error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    ck_assert_ptr_eq(v, sentinel);
    ck_assert_ptr_eq(i, sentinel);
    torc_scope_pop();
}
END_TEST

START_TEST(either_result_may_be_skipped) {
    torc_scope_push();
    torc_tensor *x = torc_tensor_from((const double[]){1, 5, 5, 2, 9, 0}, TORC_SHAPE(2, 3), TORC_DTYPE_F64);
    torc_tensor *v = NULL, *i = NULL;
    ck_assert_int_eq(torc_max_dim(x, 1, true, &v, NULL), TORC_OK);
    tu_assert_shape(v, 2, 1);
    tu_assert_values(v, TU_ARR(5, 9), 0);
    ck_assert_int_eq(torc_min_dim(x, 0, false, NULL, &i), TORC_OK);
    ck_assert_int_eq(torc_get_dtype(i), TORC_DTYPE_I64);
    tu_assert_values(i, TU_ARR(0, 0, 1), 0);
    ck_assert_int_eq(torc_max_dim(x, 0, false, NULL, NULL), TORC_OK);
    torc_scope_pop();
}
END_TEST

START_TEST(indices_are_not_differentiable_and_are_saved_for_backward) {
    torc_scope_push();
    torc_tensor *x = torc_tensor_from((const float[]){1, 5, 5, 2, 9, 0}, TORC_SHAPE(2, 3), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_requires_grad(x, true), TORC_OK);
    torc_tensor *v, *i;
    ck_assert_int_eq(torc_max_dim(x, 1, false, &v, &i), TORC_OK);
    ck_assert(torc_requires_grad(v));
    ck_assert(!torc_requires_grad(i));
    ck_assert_ptr_null(torc_grad_fn_name(i));
    // Writing the indices the node saved makes backward fail, as in PyTorch.
    ck_assert_int_eq(torc_zero_(i), TORC_OK);
    ck_assert_int_eq(torc_backward(torc_sum(v, TORC_ALL_DIMS, false), NULL, false), TORC_ERR_AUTOGRAD);
    tu_assert_error(TORC_ERR_AUTOGRAD, "modified by an inplace operation");
    torc_scope_pop();
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("max_dim");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, values_and_indices_match_pytorch, 0, N_BACKENDS);
    tcase_add_loop_test(tc, gradient_matches_pytorch, 0, N_BACKENDS);
    tcase_add_loop_test(tc, values_are_the_elements_bit_for_bit, 0, N_BACKENDS);
    tcase_add_test(tc, onednn_runs_contiguous_inputs_bit_for_bit_as_the_reference);
    suite_add_tcase(s, tc);
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, refusals_use_pytorch_messages_and_leave_outputs_alone);
    tcase_add_test(rules, either_result_may_be_skipped);
    tcase_add_test(rules, indices_are_not_differentiable_and_are_saved_for_backward);
    suite_add_tcase(s, rules);
    return s;
}

int main(void) {
    // onednn leaves ops under 4096 elements to the reference unless told otherwise: the goldens'
    // small cases are to reach its own loop.
    setenv("TORC_ONEDNN_MIN_WORK", "0", 1);
    return tu_run(make_suite());
}
