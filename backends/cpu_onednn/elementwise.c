// backends/cpu_onednn/elementwise.c — unary and binary elementwise ops on oneDNN's binary
// primitive: binary ops directly (alpha as a source scale), unary ops as x * 1 followed by
// eltwise post-ops, which also lets in and out differ in dtype and layout.
// oneDNN broadcasts src1 only (size-1 dims); a broadcast in0 is swapped into src1 where the op
// allows, otherwise it stays a stride-0 source that oneDNN's generic kernel reads. Unary ops
// run on JIT kernels only (layouts that need the generic kernel are declined). LOG into float32
// is a host loop at the end (oneDNN's log is not accurate to float32). Dense GELU of one dtype
// runs on torc's own loops instead (gelu.c).
#include <float.h>
#include <math.h>

#include "onednn-impl.h"

typedef struct post_op {
    dnnl_alg_kind_t alg;
    float alpha, beta;
} post_op;

// Constants bound as the scalar src1 of unary ops (oneDNN only reads them).
static float k_one = 1.0f, k_minus_one = -1.0f;

// The dnnl type an elementwise source is read as; bool is 1 byte of 0/1, read as u8.
static dnnl_data_type_t src_dt(torc_dtype d) {
    return d == TORC_DTYPE_BOOL ? dnnl_u8 : onednn__dt(d);
}

static bool out_ok(torc_dtype d) { return d == TORC_DTYPE_F32 || d == TORC_DTYPE_BF16; }

static int add_binary(onednn_plan *p, dnnl_alg_kind_t alg, const onednn_view *v0, int buf0,
                      float scale0, const onednn_view *v1, int buf1, void *cptr1, float scale1,
                      const onednn_view *vd_out, const post_op *post, int n_post, bool reject_ref) {
    dnnl_memory_desc_t m0, m1, md;
    onednn_view vt;
    int st, dst_buf;
    if ((st = onednn__plan_dst(p, vd_out, &vt, &dst_buf))) return st;
    const onednn_view *vd = &vt;
    if ((st = onednn__view_md(v0, &m0)) || (st = onednn__view_md(v1, &m1)) ||
        (st = onednn__view_md(vd, &md)))
        return st;
    dnnl_binary_desc_t desc;
    ONEDNN_CHECK(dnnl_binary_desc_init(&desc, alg, &m0, &m1, &md));
    dnnl_primitive_attr_t attr;
    if ((st = onednn__attr(&attr))) return st;
    dnnl_post_ops_t ops = NULL;
    dnnl_status_t s = dnnl_success;
    const char *what = "";
    if (scale0 != 1.0f) {
        what = "dnnl_primitive_attr_set_scales(";
        s = dnnl_primitive_attr_set_scales(attr, DNNL_ARG_SRC_0, 1, 0, &scale0);
    }
    if (s == dnnl_success && scale1 != 1.0f) {
        what = "dnnl_primitive_attr_set_scales(";
        s = dnnl_primitive_attr_set_scales(attr, DNNL_ARG_SRC_1, 1, 0, &scale1);
    }
    if (s == dnnl_success && n_post > 0) {
        what = "dnnl_post_ops_create(";
        s = dnnl_post_ops_create(&ops);
        for (int i = 0; s == dnnl_success && i < n_post; i++) {
            what = "dnnl_post_ops_append_eltwise(";
            s = dnnl_post_ops_append_eltwise(ops, 1.0f, post[i].alg, post[i].alpha, post[i].beta);
        }
        if (s == dnnl_success) {
            what = "dnnl_primitive_attr_set_post_ops(";
            s = dnnl_primitive_attr_set_post_ops(attr, ops);
        }
    }
    if (s != dnnl_success) st = onednn__dnnl_error(s, what);
    else {
        onednn_bind b[3] = {{DNNL_ARG_SRC_0, buf0, NULL}, {DNNL_ARG_SRC_1, buf1, cptr1},
                            {DNNL_ARG_DST, dst_buf, NULL}};
        st = onednn__plan_add(p, &desc, attr, reject_ref, 3, b);
        if (!st) st = onednn__plan_dst_done(p, vd_out, vd, dst_buf);
    }
    if (ops) dnnl_post_ops_destroy(ops);
    dnnl_primitive_attr_destroy(attr);
    return st;
}

// Elementwise ops do not care about dim order: permute every operand's dims so that out's
// strides descend, which turns a transposed (dense) out and inputs laid out like it into the
// row-major layouts oneDNN's JIT kernels take.
static void order_dims_like_out(onednn_view *vd, onednn_view *v0, onednn_view *v1) {
    int perm[DNNL_MAX_NDIMS];
    const int nd = vd->ndim;
    for (int d = 0; d < nd; d++) perm[d] = d;
    for (int i = 1; i < nd; i++)  // insertion sort, stable: equal strides keep their order
        for (int j = i; j > 0 && vd->strides[perm[j - 1]] < vd->strides[perm[j]]; j--) {
            const int t = perm[j];
            perm[j] = perm[j - 1];
            perm[j - 1] = t;
        }
    onednn_view *vs[3] = {vd, v0, v1};
    for (int k = 0; k < 3; k++) {
        const onednn_view old = *vs[k];
        for (int d = 0; d < nd; d++) {
            vs[k]->dims[d] = old.dims[perm[d]];
            vs[k]->strides[d] = old.strides[perm[d]];
        }
    }
}

// ---- unary ----
int onednn__build_unary(const torc_op *op, onednn_plan *p) {
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    const char *name = onednn__op_name(op->code);
    if (op->n_in != 1)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s takes 1 input, got %d", name, op->n_in);
    if (!onednn__same_shape(x, y))
        return onednn__error(TORC_ERR_SHAPE, "onednn: %s: in and out shapes differ", name);
    if (!out_ok(y->dtype) || src_dt(x->dtype) == dnnl_data_type_undef)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs float32/bfloat16 outputs from "
                             "float32/bfloat16/int32/int8/uint8/bool inputs (got %s -> %s)", name,
                             torc_abi_dtype_name(x->dtype), torc_abi_dtype_name(y->dtype));

    post_op post[2];
    int n_post = 1;
    float *scalar = &k_one;
    switch (op->code) {
    case TORC_OP_NEG: n_post = 0; scalar = &k_minus_one; break;  // -x exactly, -0 included
    case TORC_OP_ABS: post[0] = (post_op){dnnl_eltwise_abs, 0, 0}; break;
    case TORC_OP_SQRT: post[0] = (post_op){dnnl_eltwise_sqrt, 0, 0}; break;
    case TORC_OP_RSQRT:  // 1 / sqrt(x): pow(x, -0.5) would give 0 instead of NaN at -inf
        post[0] = (post_op){dnnl_eltwise_sqrt, 0, 0};
        post[1] = (post_op){dnnl_eltwise_pow, 1.0f, -1.0f};
        n_post = 2;
        break;
    case TORC_OP_SQUARE: post[0] = (post_op){dnnl_eltwise_square, 0, 0}; break;
    case TORC_OP_RECIPROCAL: post[0] = (post_op){dnnl_eltwise_pow, 1.0f, -1.0f}; break;
    case TORC_OP_EXP: post[0] = (post_op){dnnl_eltwise_exp, 0, 0}; break;
    case TORC_OP_LOG:  // f32 results never get here: onednn__log_takes
        post[0] = (post_op){dnnl_eltwise_log, 0, 0};
        break;
    case TORC_OP_TANH: post[0] = (post_op){dnnl_eltwise_tanh, 0, 0}; break;
    case TORC_OP_SIGMOID: post[0] = (post_op){dnnl_eltwise_logistic, 0, 0}; break;
    case TORC_OP_RELU: post[0] = (post_op){dnnl_eltwise_relu, 0, 0}; break;
    case TORC_OP_GELU:
        if (op->params.gelu.approximate != 0 && op->params.gelu.approximate != 1)
            return onednn__error(TORC_ERR_INVALID_ARG, "onednn: gelu approximate must be 0 or 1, got %d",
                                 op->params.gelu.approximate);
        post[0] = (post_op){op->params.gelu.approximate ? dnnl_eltwise_gelu_tanh
                                                        : dnnl_eltwise_gelu_erf, 0, 0};
        break;
    case TORC_OP_POW_SCALAR: {
        const double e = op->params.scalar.value;
        if (!isfinite(e) || fabs(e) > FLT_MAX)
            return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: pow with exponent %g is left to "
                                 "the reference backend", e);
        post[0] = (post_op){dnnl_eltwise_pow, 1.0f, (float)e};
        break;
    }
    default:
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s is not a unary op here", name);
    }
    if (onednn__numel(y) == 0) return 0;

    onednn_view v0, v1, vd;
    onednn__view(&v0, x, src_dt(x->dtype));
    onednn__view(&vd, y, onednn__dt(y->dtype));
    onednn__view_normalize(&v0);
    onednn__view_normalize(&vd);
    v1 = vd;  // the scalar: every dim 1
    v1.dt = dnnl_f32;
    for (int d = 0; d < v1.ndim; d++) v1.dims[d] = v1.strides[d] = 1;
    order_dims_like_out(&vd, &v0, &v1);
    // A bf16 source is converted to a dense f32 temporary first: oneDNN's JIT eltwise takes no bf16
    // source into the f32 temporary that a bf16 out is written through (plan.c).
    int src_buf = ONEDNN_BUF_IN0, st;
    if (v0.dt == dnnl_bf16) {
        onednn_view t;
        if ((st = onednn__plan_dst(p, &v0, &t, &src_buf)) ||
            (st = onednn__plan_convert(p, &v0, ONEDNN_BUF_IN0, &t, src_buf, dnnl_data_type_undef)))
            return st;
        v0 = t;
    }
    // relu and exp lose NaN in oneDNN (max(NaN, 0) = 0, exp saturates NaN to inf).
    if (op->code == TORC_OP_RELU || op->code == TORC_OP_EXP) p->fixup = ONEDNN_FIXUP_ELEMENTWISE;
    // Only oneDNN's JIT kernels: its generic (ref) eltwise code differs on special values
    // (relu(-inf) = NaN, sigmoid(NaN) = 0, pow(-inf, 0.5) = inf); such layouts fall back.
    return add_binary(p, dnnl_binary_mul, &v0, src_buf, 1.0f, &v1, ONEDNN_BUF_CONST, scalar,
                      1.0f, &vd, post, n_post, true);
}

// ---- binary ----
int onednn__build_binary(const torc_op *op, onednn_plan *p) {
    const char *name = onednn__op_name(op->code);
    if (op->n_in != 2)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s takes 2 inputs, got %d", name, op->n_in);
    const torc_operand *x0 = &op->in[0], *x1 = &op->in[1], *y = &op->out[0];
    if (!onednn__same_shape(x0, y) || !onednn__same_shape(x1, y))
        return onednn__error(TORC_ERR_SHAPE, "onednn: %s: inputs must arrive broadcast to out's shape",
                             name);
    if (!out_ok(y->dtype) || src_dt(x0->dtype) == dnnl_data_type_undef ||
        src_dt(x1->dtype) == dnnl_data_type_undef)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs float32/bfloat16 outputs from "
                             "float32/bfloat16/int32/int8/uint8/bool inputs (got %s, %s -> %s)", name,
                             torc_abi_dtype_name(x0->dtype), torc_abi_dtype_name(x1->dtype),
                             torc_abi_dtype_name(y->dtype));
    double alpha = 1.0;
    if (op->code == TORC_OP_ADD || op->code == TORC_OP_SUB) {
        alpha = op->params.scalar.value;
        if (!isfinite(alpha) || fabs(alpha) > FLT_MAX)
            return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s with alpha %g is left to the "
                                 "reference backend", name, alpha);
    }
    if (onednn__numel(y) == 0) return 0;

    dnnl_alg_kind_t alg;
    switch (op->code) {
    case TORC_OP_ADD: alg = dnnl_binary_add; break;
    case TORC_OP_SUB: alg = dnnl_binary_sub; break;
    case TORC_OP_MUL: alg = dnnl_binary_mul; break;
    case TORC_OP_DIV: alg = dnnl_binary_div; break;
    case TORC_OP_MAXIMUM: alg = dnnl_binary_max; break;
    case TORC_OP_MINIMUM: alg = dnnl_binary_min; break;
    default: return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s is not a binary op here", name);
    }
    const torc_operand *s0 = x0, *s1 = x1;
    int b0 = ONEDNN_BUF_IN0, b1 = ONEDNN_BUF_IN0 + 1;
    float scale0 = 1.0f, scale1 = (float)alpha;
    // Put a broadcast in0 where oneDNN broadcasts: in0 + a*in1 = a*in1 + in0, in0 - a*in1 = (-a)*in1 + in0.
    if (onednn__has_bcast(x0) && !onednn__has_bcast(x1) && op->code != TORC_OP_DIV) {
        s0 = x1;
        s1 = x0;
        b0 = ONEDNN_BUF_IN0 + 1;
        b1 = ONEDNN_BUF_IN0;
        scale0 = op->code == TORC_OP_SUB ? -(float)alpha : (float)alpha;
        scale1 = 1.0f;
        if (op->code == TORC_OP_SUB) alg = dnnl_binary_add;
    }
    onednn_view v0, v1, vd;
    onednn__view(&v0, s0, src_dt(s0->dtype));
    onednn__view(&v1, s1, src_dt(s1->dtype));
    onednn__view(&vd, y, onednn__dt(y->dtype));
    onednn__view_bcast_to_one(&v1, v1.ndim);
    onednn__view_normalize(&v0);
    onednn__view_normalize(&v1);
    onednn__view_normalize(&vd);
    order_dims_like_out(&vd, &v0, &v1);
    // oneDNN's max/min keep the other operand when one is NaN; torch.maximum returns NaN.
    if (op->code == TORC_OP_MAXIMUM || op->code == TORC_OP_MINIMUM) p->fixup = ONEDNN_FIXUP_ELEMENTWISE;
    return add_binary(p, alg, &v0, b0, scale0, &v1, b1, NULL, scale1, &vd, NULL, 0, false);
}

// ---- LOG with a float32 result, on the host ----
// oneDNN's log is off by up to ~3e-6 (torc's f32 tolerance is 2e-6), so f32 log is the
// reference's (float)log((double)x), on every core: the same bits. Contiguous f32 in and out;
// anything else goes to the reference.
bool onednn__log_takes(const torc_op *op) { return op->code == TORC_OP_LOG && op->out[0].dtype == TORC_DTYPE_F32; }

int onednn__log_check(const torc_op *op) {
    if (op->n_in != 1) return onednn__error(TORC_ERR_INVALID_ARG, "onednn: log takes 1 input, got %d", op->n_in);
    int st = onednn__check_operand(&op->in[0], "in");
    if (!st) st = onednn__check_operand(&op->out[0], "out");
    if (st) return st;
    if (op->in[0].dtype != TORC_DTYPE_F32 || !onednn__same_shape(&op->in[0], &op->out[0]) || !onednn__dense(&op->in[0]) ||
        !onednn__dense(&op->out[0]))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: log into float32 runs contiguous float32 inputs (others go "
                             "to the reference backend: oneDNN's log is not accurate to float32)");
    return 0;
}

int onednn__log_run(const torc_op *op) {
    const int64_t n = onednn__numel(&op->out[0]);
    if (n == 0) return 0;
    const float *x = op->in[0].data;
    float *y = op->out[0].data;
    ONEDNN_FOR(n >= ONEDNN_SMALL_STREAM, i, n, y[i] = (float)log((double)x[i]););
    return 0;
}
