// backends/reference/binary.c — the reference elementwise binary kernels (arithmetic, pow,
// maximum/minimum, floor_divide/remainder/fmod, comparisons, logical and/or) and the ternary WHERE.
#include "ref-impl.h"

// ---- dtype rules (PyTorch's CPU kernels) ----
bool ref_binary_dtypes(const torc_op *op) {
    const torc_dtype a = op->in[0].dtype, b = op->in[1].dtype, o = op->out[0].dtype;
    switch (op->code) {
    case TORC_OP_SUB:  // bool - bool is an error in PyTorch
        return ref_dt_in(o, REF_DT_NUM) && !(a == TORC_DTYPE_BOOL && b == TORC_DTYPE_BOOL);
    case TORC_OP_DIV: return ref_dt_in(o, REF_DT_FLOAT);  // true division
    case TORC_OP_POW:
        return ref_dt_in(o, REF_DT_NUM) && !(a == TORC_DTYPE_BOOL && b == TORC_DTYPE_BOOL);
    case TORC_OP_FLOOR_DIVIDE:  // no bool and no fp8 kernels (div_floor_cpu, remainder_cpu, fmod_cpu)
    case TORC_OP_REMAINDER:
    case TORC_OP_FMOD: {
        const uint32_t num = REF_DT_NUM & ~(REF_DT(TORC_DTYPE_F8_E4M3FN) | REF_DT(TORC_DTYPE_F8_E5M2));
        return ref_dt_in(o, num) && (ref_dt_in(a, num) || a == TORC_DTYPE_BOOL) &&
               (ref_dt_in(b, num) || b == TORC_DTYPE_BOOL) && !(a == TORC_DTYPE_BOOL && b == TORC_DTYPE_BOOL);
    }
    default: return ref_dt_in(o, REF_DT_ALL);
    }
}

// PyTorch's integer pow (powi_impl): by squaring, wrapping like the fixed-width type; a negative
// exponent gives 1 for base 1, +-1 for base -1 and 0 otherwise (only a tensor exponent gets
// here: a negative scalar exponent is an error, see unary.c).
int64_t ref_ipow(int64_t base, int64_t exp) {
    if (exp < 0) {
        if (base == 1) return 1;
        if (base == -1) return (exp & 1) ? -1 : 1;
        return 0;
    }
    int64_t r = 1;
    while (exp) {
        if (exp & 1) r = ref_wrap_mul(r, base);
        exp >>= 1;
        if (exp) base = ref_wrap_mul(base, base);
    }
    return r;
}

// ADD's x + alpha * y as PyTorch's CPU kernel computes it (vec::fmadd(y, alpha, x)): alpha cast
// to the computation dtype ct, then one fused multiply-add in opmath (float for f32 and the
// narrow formats, double for f64), which the caller rounds to ct. x and y are values of ct. SUB
// is ADD with -alpha. alpha 1 is a plain sum: one rounding either way.
static inline double ref_axpy(double x, double alpha, double y, torc_dtype ct) {
    if (alpha == 1.0) return x + y;
    if (ct == TORC_DTYPE_F64) return fma(alpha, y, x);
    return fmaf((float)ref_round_to(alpha, ct), (float)y, (float)x);
}

// floor_divide, remainder and fmod in floating mode: PyTorch's scalar kernels (div_floor_floating,
// remainder_kernel, fmod_kernel) with each step rounded to ct as ct's arithmetic rounds it (its
// vectorised kernels take the same steps). fmod is exact in every format.
static inline double ref_divmod_f(torc_opcode code, double a, double b, torc_dtype ct) {
    const double mod = fmod(a, b);
    if (code == TORC_OP_FMOD) return mod;
    const bool fix = mod != 0 && (b < 0) != (mod < 0);  // the remainder takes b's sign
    if (code == TORC_OP_REMAINDER) return fix ? ref_round_to(mod + b, ct) : mod;
    if (b == 0) return a / b;  // inf, -inf or nan
    double div = ref_round_to(ref_round_to(a - mod, ct) / b, ct);
    if (fix) div = ref_round_to(div - 1, ct);
    if (div == 0) return copysign(0.0, a / b);
    double q = floor(div);
    if (ref_round_to(div - q, ct) > 0.5) q = ref_round_to(q + 1, ct);
    return q;
}

// The same on integers, exact: Python's floor division and modulo, C's %; false for a zero
// divisor. INT64_MIN // -1 wraps to INT64_MIN (a narrower type's MIN // -1 wraps when stored).
static inline bool ref_divmod_i(torc_opcode code, int64_t a, int64_t b, int64_t *r) {
    if (b == 0) return false;
    if (b == -1) {  // the one quotient that can overflow int64
        *r = code == TORC_OP_FLOOR_DIVIDE ? (int64_t)(0 - (uint64_t)a) : 0;
        return true;
    }
    const int64_t q = a / b, m = a % b;
    const bool fix = m != 0 && (m < 0) != (b < 0);
    switch (code) {
    case TORC_OP_FLOOR_DIVIDE: *r = fix ? q - 1 : q; break;
    case TORC_OP_REMAINDER: *r = fix ? m + b : m; break;
    default: *r = m; break;
    }
    return true;
}

// ---- the loops ----
typedef struct binary_ctx {
    torc_opcode code;
    torc_dtype out, a, b;
    torc_dtype ct;     // floating mode: the dtype the op computes in
    double alpha;      // ADD/SUB in floating mode
    int64_t ialpha;    // ADD/SUB in integer mode
    bool zero_div;     // set by an integer division by zero (int_loop)
} binary_ctx;

// Floating mode: out is floating (or an input is). The op computes in ct, the promotion of the
// inputs' and out's dtypes: inputs are first cast to it (as PyTorch casts to the computation
// dtype: int64 16777217 + f32 0 is 16777216), the op runs in double and rounds once to ct, then
// to out where out is narrower (an in-place f16 *= f32 tensor, or an f16 op whose one-element
// right operand the frontend sends at float32, PyTorch's opmath: round_f16(float(x) * 0.1f)).
// The frontend casts a zero-dim operand that PyTorch reads narrower before it gets here.
static void float_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const binary_ctx *c = vctx;
    double x[REF_BLOCK], y[REF_BLOCK], r[REF_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += REF_BLOCK) {
        const int64_t nb = n - i0 < REF_BLOCK ? n - i0 : REF_BLOCK;
        ref_load_block_as(x, ptr[1] + i0 * step[1], step[1], nb, c->a, c->ct);
        ref_load_block_as(y, ptr[2] + i0 * step[2], step[2], nb, c->b, c->ct);
        const double alpha = c->alpha;
        switch (c->code) {
        case TORC_OP_ADD: for (int64_t i = 0; i < nb; i++) r[i] = ref_axpy(x[i], alpha, y[i], c->ct); break;
        case TORC_OP_SUB: for (int64_t i = 0; i < nb; i++) r[i] = ref_axpy(x[i], -alpha, y[i], c->ct); break;
        case TORC_OP_MUL: for (int64_t i = 0; i < nb; i++) r[i] = x[i] * y[i]; break;
        case TORC_OP_DIV: for (int64_t i = 0; i < nb; i++) r[i] = x[i] / y[i]; break;
        case TORC_OP_POW: for (int64_t i = 0; i < nb; i++) r[i] = pow(x[i], y[i]); break;
        case TORC_OP_MAXIMUM:
            for (int64_t i = 0; i < nb; i++) r[i] = (isnan(x[i]) || isnan(y[i])) ? NAN : (x[i] > y[i] ? x[i] : y[i]);
            break;
        case TORC_OP_MINIMUM:
            for (int64_t i = 0; i < nb; i++) r[i] = (isnan(x[i]) || isnan(y[i])) ? NAN : (x[i] < y[i] ? x[i] : y[i]);
            break;
        case TORC_OP_FLOOR_DIVIDE:
        case TORC_OP_REMAINDER:
        case TORC_OP_FMOD:
            for (int64_t i = 0; i < nb; i++) r[i] = ref_divmod_f(c->code, x[i], y[i], c->ct);
            break;
        default: for (int64_t i = 0; i < nb; i++) r[i] = NAN; break;
        }
        if (c->ct != c->out)
            for (int64_t i = 0; i < nb; i++) r[i] = ref_round_to(r[i], c->ct);
        ref_store_block_f(ptr[0] + i0 * step[0], step[0], r, nb, c->out);
    }
}

// Integer mode: exact in int64 with wraparound, then wrapped to out's width. A division by zero
// stops the loop and sets zero_div (later blocks still run: out is unspecified after the error).
static void int_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    binary_ctx *c = vctx;
    if (c->zero_div) return;
    for (int64_t i = 0; i < n; i++) {
        const int64_t x = ref_load_i(ptr[1] + i * step[1], c->a), y = ref_load_i(ptr[2] + i * step[2], c->b);
        int64_t r;
        switch (c->code) {
        case TORC_OP_ADD: r = ref_wrap_add(x, ref_wrap_mul(c->ialpha, y)); break;
        case TORC_OP_SUB: r = ref_wrap_sub(x, ref_wrap_mul(c->ialpha, y)); break;
        case TORC_OP_MUL: r = ref_wrap_mul(x, y); break;
        case TORC_OP_POW: r = ref_ipow(x, y); break;
        case TORC_OP_MAXIMUM: r = x > y ? x : y; break;
        case TORC_OP_MINIMUM: r = x < y ? x : y; break;
        case TORC_OP_FLOOR_DIVIDE:
        case TORC_OP_REMAINDER:
        case TORC_OP_FMOD:
            if (!ref_divmod_i(c->code, x, y, &r)) {
                c->zero_div = true;
                return;
            }
            break;
        default: r = 0; break;
        }
        ref_store_i(ptr[0] + i * step[0], c->out, r);
    }
}

// Comparisons in the inputs' common dtype: a floating one (both values rounded to it, then
// compared in double) if either is floating, else exact int64 (integer promotion preserves
// values). NaN compares unequal to everything. Logical ops test truthiness (NaN is true) of
// the values in the same common dtype.
static void compare_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const binary_ctx *c = vctx;
    const bool floating = ref_is_float(c->a) || ref_is_float(c->b);
    const torc_dtype common = ref_common_float(c->a, c->b);
    for (int64_t i = 0; i < n; i++) {
        const char *pa = ptr[1] + i * step[1], *pb = ptr[2] + i * step[2];
        int cmp;  // -1, 0, 1, or 2 for unordered (NaN)
        if (c->code == TORC_OP_LOGICAL_AND || c->code == TORC_OP_LOGICAL_OR) {
            const bool x = floating ? ref_round_to(ref_load_f(pa, c->a), common) != 0.0 : ref_load_b(pa, c->a);
            const bool y = floating ? ref_round_to(ref_load_f(pb, c->b), common) != 0.0 : ref_load_b(pb, c->b);
            ref_store_i(ptr[0] + i * step[0], c->out, c->code == TORC_OP_LOGICAL_AND ? (x && y) : (x || y));
            continue;
        }
        if (floating) {
            const double x = ref_round_to(ref_load_f(pa, c->a), common), y = ref_round_to(ref_load_f(pb, c->b), common);
            cmp = (isnan(x) || isnan(y)) ? 2 : (x < y ? -1 : (x > y ? 1 : 0));
        } else {
            const int64_t x = ref_load_i(pa, c->a), y = ref_load_i(pb, c->b);
            cmp = x < y ? -1 : (x > y ? 1 : 0);
        }
        bool r;
        switch (c->code) {
        case TORC_OP_EQ: r = cmp == 0; break;
        case TORC_OP_NE: r = cmp != 0; break;
        case TORC_OP_LT: r = cmp == -1; break;
        case TORC_OP_LE: r = cmp == -1 || cmp == 0; break;
        case TORC_OP_GT: r = cmp == 1; break;
        case TORC_OP_GE: r = cmp == 1 || cmp == 0; break;
        default: r = false; break;
        }
        ref_store_i(ptr[0] + i * step[0], c->out, r);
    }
}

#define FLAT_LOOP(TA, TB, O, expr) \
    do { \
        O *o = op->out[0].data; \
        const TA *a = op->in[0].data; \
        const TB *b = op->in[1].data; \
        for (int64_t i = 0; i < n; i++) { \
            const double x = FLAT_LOAD(TA, a[i * sa]), y = FLAT_LOAD(TB, b[i * sb]); \
            o[i] = (O)(expr); \
        } \
    } while (0)
// A bool element is any nonzero byte (as ref_load_f reads it).
#define FLAT_LOAD(T, v) _Generic((T)0, uint8_t: (double)((v) != 0), default: (double)(v))
// x + a * y fused in out's type (float or double), as ref_axpy; a is already in that type.
#define FLAT_AXPY(T, x, a, y) _Generic((T)0, float: (double)fmaf((float)(a), (float)(y), (float)(x)), default: fma(a, y, x))
#define FLAT_OPS(TA, TB, T) \
    switch (op->code) { \
    case TORC_OP_ADD: \
        if (alpha == 1.0) FLAT_LOOP(TA, TB, T, x + y); \
        else FLAT_LOOP(TA, TB, T, FLAT_AXPY(T, x, alpha, y)); \
        return; \
    case TORC_OP_SUB: \
        if (alpha == 1.0) FLAT_LOOP(TA, TB, T, x - y); \
        else FLAT_LOOP(TA, TB, T, FLAT_AXPY(T, x, -alpha, y)); \
        return; \
    case TORC_OP_MUL: FLAT_LOOP(TA, TB, T, x * y); return; \
    case TORC_OP_DIV: FLAT_LOOP(TA, TB, T, x / y); return; \
    case TORC_OP_EQ: FLAT_LOOP(TA, TB, bool, x == y); return; \
    case TORC_OP_NE: FLAT_LOOP(TA, TB, bool, x != y); return; \
    case TORC_OP_LT: FLAT_LOOP(TA, TB, bool, x < y); return; \
    case TORC_OP_LE: FLAT_LOOP(TA, TB, bool, x <= y); return; \
    case TORC_OP_GT: FLAT_LOOP(TA, TB, bool, x > y); return; \
    case TORC_OP_GE: FLAT_LOOP(TA, TB, bool, x >= y); return; \
    default: return; \
    }
// Inlined twice: with unit steps (which the compiler vectorizes) and with any.
static inline __attribute__((always_inline)) void flat_loops(const torc_op *op, int64_t n, int64_t sa, int64_t sb) {
    const double alpha = op->params.scalar.value;
    const torc_dtype da = op->in[0].dtype, db = op->in[1].dtype;
    if (da == TORC_DTYPE_F32 && db == TORC_DTYPE_F32) FLAT_OPS(float, float, float)
    if (da == TORC_DTYPE_F64 && db == TORC_DTYPE_F64) FLAT_OPS(double, double, double)
    // arithmetic with a mask (relu's backward multiplies by one): out has the float's dtype
    if (da == TORC_DTYPE_F32) FLAT_OPS(float, uint8_t, float)
    if (db == TORC_DTYPE_F32) FLAT_OPS(uint8_t, float, float)
    if (da == TORC_DTYPE_F64) FLAT_OPS(double, uint8_t, double)
    FLAT_OPS(uint8_t, double, double)
}
#undef FLAT_OPS
#undef FLAT_AXPY
#undef FLAT_LOAD
#undef FLAT_LOOP

// f32 or f64 operands of one dtype, or one of them bool in arithmetic, each contiguous or a
// broadcast scalar (the common cases, and most of the time of a tiny op): one flat loop
// computing exactly what float_loop and compare_loop compute (arithmetic in double rounded once
// to out's dtype, ADD/SUB with an alpha fused as ref_axpy, a bool read as 0 or 1; comparisons
// of the values, NaN unordered).
static bool flat_float(const torc_op *op) {
    const torc_dtype da = op->in[0].dtype, db = op->in[1].dtype, dout = op->out[0].dtype;
    const bool cmp = op->code >= TORC_OP_EQ && op->code <= TORC_OP_GE;
    const bool arith = op->code >= TORC_OP_ADD && op->code <= TORC_OP_DIV;
    const bool fa = da == TORC_DTYPE_F32 || da == TORC_DTYPE_F64, fb = db == TORC_DTYPE_F32 || db == TORC_DTYPE_F64;
    bool ok;
    if (cmp) ok = fa && da == db && dout == TORC_DTYPE_BOOL;
    else if (arith && fa && fb) ok = da == db && dout == da;
    else if (arith && fa) ok = db == TORC_DTYPE_BOOL && dout == da;
    else if (arith && fb) ok = da == TORC_DTYPE_BOOL && dout == db;
    else ok = false;
    int64_t so, sa, sb;
    if (!ok || !ref_flat_step(&op->out[0], &so) || so != 1 || !ref_flat_step(&op->in[0], &sa) ||
        !ref_flat_step(&op->in[1], &sb))
        return false;
    _Static_assert(sizeof(bool) == 1, "bool tensors hold one byte per element");
    const int64_t n = ref_numel(&op->out[0]);
    if (sa == 1 && sb == 1) flat_loops(op, n, 1, 1);
    else flat_loops(op, n, sa, sb);
    return true;
}

int ref_binary_run(const torc_op *op) {
    int st = ref_check_same_shape(&op->in[0], "in0", &op->out[0], "out");
    if (!st) st = ref_check_same_shape(&op->in[1], "in1", &op->out[0], "out");
    if (st) return st;
    if (flat_float(op)) return TORC_OK;
    binary_ctx c = {op->code, op->out[0].dtype, op->in[0].dtype, op->in[1].dtype,
                    ref_common_float(ref_common_float(op->in[0].dtype, op->in[1].dtype), op->out[0].dtype), 1.0, 1, false};
    ref_loop_fn loop;
    if (op->code >= TORC_OP_EQ && op->code <= TORC_OP_LOGICAL_OR) {
        loop = compare_loop;
    } else if (ref_is_float(c.out) || ref_is_float(c.a) || ref_is_float(c.b)) {
        loop = float_loop;
        if (op->code == TORC_OP_ADD || op->code == TORC_OP_SUB) c.alpha = op->params.scalar.value;
    } else {
        loop = int_loop;
        if (op->code == TORC_OP_ADD || op->code == TORC_OP_SUB) {
            const double alpha = op->params.scalar.value;
            if (alpha != trunc(alpha) || !(fabs(alpha) < 0x1p63))  // also rejects NaN and inf
                return ref_error(TORC_ERR_INVALID_ARG,
                                 "For integral input tensors, argument alpha must not be a floating point number.");
            c.ialpha = (int64_t)alpha;
        }
    }
    const torc_operand *ops[3] = {&op->out[0], &op->in[0], &op->in[1]};
    ref_iter it;
    ref_iter_ops(&it, op->out[0].ndim, op->out[0].shape, 3, ops);
    ref_iter_run(&it, loop, &c);
    return c.zero_div ? ref_error(TORC_ERR_INVALID_ARG, "ZeroDivisionError") : TORC_OK;
}

// ---- WHERE ----
bool ref_where_dtypes(const torc_op *op) { return ref_dt_in(op->out[0].dtype, REF_DT_ALL); }

typedef struct where_ctx { torc_dtype out, cond, x, y; } where_ctx;

static void where_loop(char *const *ptr, const int64_t *step, int64_t n, void *vctx) {
    const where_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++) {
        if (ref_load_b(ptr[1] + i * step[1], c->cond)) ref_cast(ptr[0] + i * step[0], c->out, ptr[2] + i * step[2], c->x);
        else ref_cast(ptr[0] + i * step[0], c->out, ptr[3] + i * step[3], c->y);
    }
}

int ref_where_run(const torc_op *op) {
    static const char *const names[3] = {"in0", "in1", "in2"};
    for (int k = 0; k < 3; k++) {
        int st = ref_check_same_shape(&op->in[k], names[k], &op->out[0], "out");
        if (st) return st;
    }
    where_ctx c = {op->out[0].dtype, op->in[0].dtype, op->in[1].dtype, op->in[2].dtype};
    const torc_operand *ops[4] = {&op->out[0], &op->in[0], &op->in[1], &op->in[2]};
    ref_iter it;
    ref_iter_ops(&it, op->out[0].ndim, op->out[0].shape, 4, ops);
    ref_iter_run(&it, where_loop, &c);
    return TORC_OK;
}
