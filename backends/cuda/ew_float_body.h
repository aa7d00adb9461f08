// backends/cuda/ew_float_body.h — the floating elementwise math, written once and included twice
// by ew_ops.h (TCU_T float then double; TCU_F(x) names, TCU_M(fn) the math function of that type).
// No include guard on purpose.

TORC_HD static inline TCU_T TCU_F(tcu_unary)(int op, TCU_T x, const tcu_ew_args *a) {
    switch (op) {
    case TORC_OP_NEG: return -x;
    case TORC_OP_ABS: return TCU_M(fabs)(x);
    case TORC_OP_SIGN: return (TCU_T)((x > 0) - (x < 0));   // PyTorch: sign(NaN) = 0
    case TORC_OP_SQRT: return TCU_M(sqrt)(x);
    case TORC_OP_RSQRT: return (TCU_T)1 / TCU_M(sqrt)(x);
    case TORC_OP_SQUARE: return x * x;
    case TORC_OP_RECIPROCAL: return (TCU_T)1 / x;
    case TORC_OP_EXP: return TCU_M(exp)(x);
    case TORC_OP_LOG: return TCU_M(log)(x);
    case TORC_OP_SIN: return TCU_M(sin)(x);
    case TORC_OP_COS: return TCU_M(cos)(x);
    case TORC_OP_TANH: return TCU_M(tanh)(x);
    case TORC_OP_SIGMOID: return (TCU_T)1 / ((TCU_T)1 + TCU_M(exp)(-x));
    case TORC_OP_RELU: return x < 0 ? (TCU_T)0 : x;          // NaN and -0.0 pass through
    case TORC_OP_GELU:
        if (a->flag) {
            const TCU_T k = (TCU_T)0.7978845608028654, c = (TCU_T)0.044715; // sqrt(2/pi)
            return (TCU_T)0.5 * x * ((TCU_T)1 + TCU_M(tanh)(k * (x + c * x * x * x)));
        }
        return (TCU_T)0.5 * x * ((TCU_T)1 + TCU_M(erf)(x * (TCU_T)0.70710678118654752440));
    case TORC_OP_POW_SCALAR: {
        // PyTorch's special exponents (not pow() on signed zeros: pow(-0.0, 0.5) is +0). 1 gives x
        // itself (PyTorch's pow_out copies): CUDA's pow(3.0, 1.0) is 2.9999999999999996 (an H200).
        const TCU_T e = (TCU_T)a->s0;
        if (e == (TCU_T)1) return x;
        if (e == (TCU_T)2) return x * x;
        if (e == (TCU_T)3) return x * x * x;
        if (e == (TCU_T)0.5) return TCU_M(sqrt)(x);
        if (e == (TCU_T)-0.5) return (TCU_T)1 / TCU_M(sqrt)(x);
        if (e == (TCU_T)-1) return (TCU_T)1 / x;
        if (e == (TCU_T)-2) return (TCU_T)1 / (x * x);
        return TCU_M(pow)(x, e);
    }
    case TORC_OP_ERF: return TCU_M(erf)(x);
    case TORC_OP_ERFINV: return TCU_ERFINV(x);
    default: return x;
    }
}

// floor_divide (PyTorch's div_floor_floating), remainder and fmod, each step rounded to the
// common dtype (backend.h); x, y are values of it. fmod is exact in every format.
TORC_HD static inline TCU_T TCU_F(tcu_divmod)(int op, TCU_T x, TCU_T y, const tcu_ew_args *a) {
    (void)a;  // TCU_RT's rounding needs it only below f64
    const TCU_T mod = TCU_M(fmod)(x, y);
    if (op == TORC_OP_FMOD) return mod;
    const bool fix = mod != (TCU_T)0 && (y < (TCU_T)0) != (mod < (TCU_T)0);  // the remainder takes y's sign
    if (op == TORC_OP_REMAINDER) return fix ? TCU_RT(mod + y) : mod;
    if (y == (TCU_T)0) return x / y;  // inf, -inf or nan
    TCU_T div = TCU_RT(TCU_RT(x - mod) / y);
    if (fix) div = TCU_RT(div - (TCU_T)1);
    if (div == (TCU_T)0) return TCU_M(copysign)((TCU_T)0, x / y);
    TCU_T q = TCU_M(floor)(div);
    if (TCU_RT(div - q) > (TCU_T)0.5) q = TCU_RT(q + (TCU_T)1);
    return q;
}

// ADD / SUB's alpha (s0) cast to the common dtype: the factor of their fma (PyTorch's
// vec::fmadd). The same for every element: the kernels compute it once per thread.
TORC_HD static inline TCU_T TCU_F(tcu_alpha)(const tcu_ew_args *a) { return TCU_RT((TCU_T)a->s0); }

// GELU_BACKWARD (backend ABI 2.4): dy * gelu'(x), PyTorch's GeluBackwardKernelImpl steps in TCU_T
// (its opmath), flag 1 'tanh', 0 'none'. For the tanh form, 1 + t and 1 - t^2 come from
// q = 1 - |t| = 2 / (exp(2|u|) + 1) where |u| >= 0.625: PyTorch's 1 - t*t keeps an error of 1 - t's
// ulp, which 0.5 x (1 + 3 k x^2) multiplies (11 float eps of dy near x = 4.5 on the CPU); here it
// is a few ulps, as onednn's loop (backends/cpu_onednn/gelu_backward.c). 1 - t^2 = 0 gives 0
// (not x^2's overflow times 0), and x = +-inf NaN, as the reference in double.
TORC_HD static inline TCU_T TCU_F(tcu_gelu_backward)(TCU_T dy, TCU_T x, int tanh_form) {
    if (tanh_form) {
        const TCU_T kBeta = (TCU_T)0.79788456080286535588, kKappa = (TCU_T)0.044715;
        const TCU_T x_sq = x * x, x_cube = x_sq * x;
        const TCU_T inner = kBeta * (x + kKappa * x_cube), au = TCU_M(fabs)(inner);
        TCU_T right, sech2;  // 1 + tanh(inner), 1 - tanh(inner)^2
        if (au < (TCU_T)0.625) {
            const TCU_T t = TCU_M(tanh)(inner);
            right = (TCU_T)1 + t;
            sech2 = (TCU_T)1 - t * t;
        } else {
            const TCU_T q = (TCU_T)2 / (TCU_M(exp)((TCU_T)2 * au) + (TCU_T)1);  // exp's inf gives 0
            right = inner < (TCU_T)0 ? q : (TCU_T)2 - q;
            sech2 = q * ((TCU_T)2 - q);
        }
        const TCU_T left = (TCU_T)0.5 * x, left_derivative = (TCU_T)0.5 * right;
        const TCU_T right_derivative =
            sech2 > (TCU_T)0 ? left * sech2 * kBeta * ((TCU_T)1 + (TCU_T)3 * kKappa * x_sq) : (TCU_T)0 * left;
        return dy * (left_derivative + right_derivative);
    }
    const TCU_T kAlpha = (TCU_T)0.70710678118654752440, kBeta = (TCU_T)0.39894228040143267794;
    const TCU_T cdf = (TCU_T)0.5 * ((TCU_T)1 + TCU_M(erf)(x * kAlpha));
    const TCU_T pdf = kBeta * TCU_M(exp)((TCU_T)-0.5 * x * x);
    return dy * (cdf + x * pdf);
}

// The binary arithmetic ops but floor_divide / remainder / fmod and gelu_backward, alpha =
// tcu_alpha(a): what the device's generic and vectorised kernels inline (the four run in kernels
// of their own: ew_ops.h, tcu_ew_divmod and tcu_ew_gelu_backward). ADD / SUB with an alpha: one fma.
TORC_HD static inline TCU_T TCU_F(tcu_arith_alpha)(int op, TCU_T x, TCU_T y, const tcu_ew_args *a, TCU_T alpha) {
    switch (op) {
    case TORC_OP_ADD: return a->s0 == 1.0 ? x + y : TCU_M(fma)(alpha, y, x);
    case TORC_OP_SUB: return a->s0 == 1.0 ? x - y : TCU_M(fma)(-alpha, y, x);
    case TORC_OP_MUL: return x * y;
    case TORC_OP_DIV: return x / y;
    case TORC_OP_POW: return TCU_M(pow)(x, y);
    case TORC_OP_MAXIMUM: return x != x ? x : (y != y ? y : (x > y ? x : y));
    case TORC_OP_MINIMUM: return x != x ? x : (y != y ? y : (x < y ? x : y));
    default: return x;
    }
}

TORC_HD static inline TCU_T TCU_F(tcu_arith)(int op, TCU_T x, TCU_T y, const tcu_ew_args *a) {
    return TCU_F(tcu_arith_alpha)(op, x, y, a, TCU_F(tcu_alpha)(a));
}

// Every binary arithmetic op. GELU_BACKWARD: x = dy, y = GELU's input.
TORC_HD static inline TCU_T TCU_F(tcu_binary)(int op, TCU_T x, TCU_T y, const tcu_ew_args *a) {
    if (op == TORC_OP_GELU_BACKWARD) return TCU_F(tcu_gelu_backward)(x, y, a->flag);
    return tcu_op_is_divmod(op) ? TCU_F(tcu_divmod)(op, x, y, a) : TCU_F(tcu_arith)(op, x, y, a);
}

// The fused ops in PyTorch's CPU rounding (backend.h): s is self, x and y the tensors (x is end
// for LERP), the scalar s0 rounded to TCU_T. Explicit fma where PyTorch fuses; the other steps
// are single operations nvcc cannot contract (a division, a subtraction).
TORC_HD static inline TCU_T TCU_F(tcu_fused)(int op, TCU_T s, TCU_T x, TCU_T y, const tcu_ew_args *a) {
    const TCU_T v = (TCU_T)a->s0;
    switch (op) {
    case TORC_OP_ADDCMUL: return TCU_M(fma)(v * x, y, s);
    case TORC_OP_ADDCDIV: {
        const TCU_T q = v * x / y;
        return s + q;
    }
    case TORC_OP_LERP:
        return TCU_M(fabs)(v) < (TCU_T)0.5 ? TCU_M(fma)(v, x - s, s) : TCU_M(fma)(v - (TCU_T)1, x - s, x);
    default: return s;
    }
}

TORC_HD static inline bool TCU_F(tcu_compare)(int op, TCU_T x, TCU_T y) {
    switch (op) {
    case TORC_OP_EQ: return x == y;
    case TORC_OP_NE: return x != y;
    case TORC_OP_LT: return x < y;
    case TORC_OP_LE: return x <= y;
    case TORC_OP_GT: return x > y;
    case TORC_OP_GE: return x >= y;
    default: return false;
    }
}
