// tests/onednn_small_ops_test.c — oneDNN hands small ops to the reference backend (its
// primitive overhead exceeds a plain loop), with a reason, and results are unchanged.
#include "testutil.h"

static torc_op add_op(float *a, float *b, float *out, int64_t n) {
    torc_op op = {.code = TORC_OP_ADD, .n_in = 2, .n_out = 1};
    torc_operand *ops[3] = {&op.in[0], &op.in[1], &op.out[0]};
    float *data[3] = {a, b, out};
    for (int i = 0; i < 3; i++) {
        ops[i]->data = data[i];
        ops[i]->dtype = TORC_DTYPE_F32;
        ops[i]->ndim = 1;
        ops[i]->shape[0] = n;
        ops[i]->stride[0] = 1;
    }
    op.params.scalar.value = 1.0;
    return op;
}

START_TEST(small_ops_are_declined_large_ones_run) {
    torc_device *dev = torc_device_get("onednn");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    const torc_backend_vtable *vt = torc_device_vtable(dev);
    static float a[1 << 14], b[1 << 14], out[1 << 14];
    torc_op small = add_op(a, b, out, 16), large = add_op(a, b, out, 1 << 14);
    ck_assert(!vt->supports(torc_device_backend_context(dev), torc_device_index(dev), &small));
    ck_assert_ptr_nonnull(strstr(vt->last_error(torc_device_backend_context(dev)), "smaller than TORC_ONEDNN_MIN_WORK (4096)"));
    ck_assert(vt->supports(torc_device_backend_context(dev), torc_device_index(dev), &large));
    // Through the frontend the small op still runs (on the reference) with the same result.
    torc_scope_push();
    torc_tensor *x = torc_to_device(torc_ones(TORC_SHAPE(4, 4), TORC_DTYPE_F32), dev);
    torc_tensor *y = torc_add(x, x);
    ck_assert_ptr_eq(torc_get_device(y), dev);
    tu_assert_values(y, TU_ARR(2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2), 0);
    torc_scope_pop();
}
END_TEST

int main(void) {
    Suite *s = suite_create("onednn_small_ops");
    TCase *tc = tcase_create("onednn_small_ops");
    tcase_add_test(tc, small_ops_are_declined_large_ones_run);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
