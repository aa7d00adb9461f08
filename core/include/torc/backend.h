// torc/backend.h — the compute-backend plugin ABI: the op descriptor a backend runs and the
// versioned vtable a backend exports. A backend includes this header (and types.h) only.
#ifndef TORC_BACKEND_H
#define TORC_BACKEND_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- versions ----
// abi_version = major << 16 | minor. The loader refuses a plugin whose major differs from its own
// (naming both versions) or whose vtable is smaller than the 2.0 one. A minor version only
// appends: vtable members (at the end, under a "v2.N" comment), opcodes and dtypes (at the end of
// TORC_OP_LIST / TORC_DTYPE_LIST, each tagged with its minor), members of torc_device_info. So:
//  - the core never sends a plugin an opcode, or an operand of a dtype, newer than the minor the
//    plugin was built with (it falls back to the reference backend on host memory, else fails
//    with a clear error);
//  - the core calls a member only where the plugin's struct_size covers it (TORC_STRUCT_HAS);
//  - a plugin built for a newer minor than the core works: the core ignores what it does not
//    know, and the plugin must not rely on being sent anything newer than host_abi_version's
//    minor (torc_backend_entry's argument).
// Every offset below is pinned by _Static_asserts at the end of this header: a change that would
// break a built plugin fails the build instead.
#define TORC_BACKEND_ABI_MAJOR 2
#ifdef TORC_TEST_EXTRA_ABI
#define TORC_BACKEND_ABI_MINOR 7  // tests/abi's test build: its extra opcode and dtype are minor 7's
#else
#define TORC_BACKEND_ABI_MINOR 6  // 2.1: LAYER_NORM(_BACKWARD), MAX_DIM/MIN_DIM, ADAM_STEP; 2.2: MATMUL_ROUNDED;
                                  // 2.3: FLOOR_DIVIDE, REMAINDER, FMOD; 2.4: ATTENTION(_BACKWARD),
                                  // GELU_BACKWARD; 2.5: CROSS_ENTROPY; 2.6: the list ops ADAM_STEP_LIST,
                                  // NORM_LIST (params.ext: torc_op_list)
#endif
#define TORC_BACKEND_ABI_VERSION ((uint32_t)(TORC_BACKEND_ABI_MAJOR << 16 | TORC_BACKEND_ABI_MINOR))

// True when a struct that starts with uint32_t struct_size (and size fields of a vtable) is long
// enough to hold member m: the test for members appended in a later minor.
#define TORC_STRUCT_HAS(p, type, m) ((p)->struct_size >= offsetof(type, m) + sizeof(((type *)0)->m))

// ---- ops ----
// The opcode list is append-only: a value, once shipped, keeps its meaning. Semantics below
// are the contract every backend implements and the reference backend defines.
// Conventions:
//  - in[0 .. n_in) and out[0 .. n_out) are strided views (see torc_operand); "out" below means
//    out[0], "in0" in[0]. An output never overlaps an input unless the op says "in place", with
//    one exception: an elementwise op (unary, binary, WHERE, COPY, ADDCMUL, ADDCDIV, LERP) may get
//    out identical to an input (same data, dtype and strides), which is how in-place ops such as
//    add_ run; reading element i before writing element i makes that safe. Shapes are already
//    broadcast by the frontend: every input of an elementwise op has out's ndim and shape,
//    broadcast dims having stride 0. No two elements of an output share memory (the frontend
//    refuses such writes, as PyTorch does): a backend may write an output's elements in any order.
//  - Elementwise ops compute in the output dtype's natural precision or better (the reference
//    uses double for floating and int64 for integer dtypes) and round once to out's dtype,
//    except where an op states PyTorch's own rounding steps (the fused pointwise ops).
//    Inputs may have a dtype different from out (e.g. comparisons write bool); a backend
//    converts on load.
//  - Reductions: out has in[0]'s ndim with each reduced dim of size 1 (params.reduce.mask has
//    bit d set for every reduced dim d).
// SCALED_MM's allowance for fp8 tensor cores: |r - exact r| <= TORC_FP8_MMA_SUM_TOL * scale_a *
// scale_b * sum_k |a*b|. Hopper's fp8 MMA truncates its running sum to 13 mantissa bits (e8m13),
// each k-step of 32 losing up to 2^-13 of it, and cuBLASLt (fast accumulation off) promotes it to
// f32 every few k-steps: 2^-11 covers four. Measured on an H200: up to 2^-12.8 (K = 64).
#define TORC_FP8_MMA_SUM_TOL (1.0 / 2048)  // 2^-11
// X(ID, name, minor): every opcode in enum order, its name (torc_op_name) and the backend ABI minor
// (of TORC_BACKEND_ABI_MAJOR) it appeared in: the core never sends an opcode to a plugin built for
// an older minor. Append only.
#define TORC_OP_LIST_V2_0(X) \
    /* fills and copies */                                                                                               \
    X(FILL, "fill", 0)                  /* out[...] = params.scalar.value (cast to out dtype) */                         \
    X(COPY, "copy", 0)                  /* out = cast(in0): strided copy with dtype conversion */                        \
    X(ARANGE, "arange", 0)              /* out (1-D): out[i] = range.start + i * range.step */                           \
    X(LINSPACE, "linspace", 0)          /* out (1-D, n = range.count): PyTorch's two-sided formula: */                   \
                                        /*   step = (end-start)/(n-1); i < n/2 ? start + i*step : end - (n-1-i)*step */  \
    X(RAND_UNIFORM, "rand", 0)          /* out[i] = a + (b-a) * u(i), u from Philox (see torc_philox_uniform) */         \
    X(RAND_NORMAL, "randn", 0)          /* out[i] = a + b * n(i) (a = mean, b = std), Box-Muller on Philox */            \
    X(RAND_INT, "randint", 0)           /* out[i] = a + floor(u(i) * (b - a)), in [a, b) */                              \
    /* unary (in0 -> out) */                                                                                             \
    X(NEG, "neg", 0)                                                                                                     \
    X(ABS, "abs", 0)                                                                                                     \
    X(SIGN, "sign", 0)                                                                                                   \
    X(SQRT, "sqrt", 0)                                                                                                   \
    X(RSQRT, "rsqrt", 0)                                                                                                 \
    X(SQUARE, "square", 0)                                                                                               \
    X(RECIPROCAL, "reciprocal", 0)                                                                                       \
    X(EXP, "exp", 0)                                                                                                     \
    X(LOG, "log", 0)                                                                                                     \
    X(SIN, "sin", 0)                                                                                                     \
    X(COS, "cos", 0)                                                                                                     \
    X(TANH, "tanh", 0)                                                                                                   \
    X(SIGMOID, "sigmoid", 0)                                                                                             \
    X(RELU, "relu", 0)                                                                                                   \
    X(GELU, "gelu", 0)                  /* params.gelu.approximate: 0 exact (erf), 1 tanh approximation */               \
    X(POW_SCALAR, "pow_scalar", 0)      /* out = in0 ^ params.scalar.value (^1: in0 exactly) */                          \
    X(ERF, "erf", 0)                                                                                                     \
    X(ERFINV, "erfinv", 0)                                                                                               \
    X(LOGICAL_NOT, "logical_not", 0)    /* out (bool) = !in0 */                                                          \
    /* binary (in0, in1 -> out), broadcast already applied */                                                            \
    X(ADD, "add", 0)                    /* out = in0 + alpha * in1, alpha = params.scalar.value (1: plain add) */        \
                                        /* cast to the dtype c the op computes in (the promotion of in0, in1 and */      \
                                        /* out). Floating c: as PyTorch's CPU kernel (vec::fmadd), one fused */          \
                                        /* multiply-add fma(alpha, in1, in0) in opmath (float for f32, f16, bf16; */     \
                                        /* double for f64), rounded to c, then to out. Integer c: wrapping. */           \
    X(SUB, "sub", 0)                    /* out = in0 - alpha * in1: ADD with -alpha */                                   \
    X(MUL, "mul", 0)                                                                                                     \
    X(DIV, "div", 0)                    /* true division (integer inputs arrive with a floating out dtype) */            \
    X(POW, "pow", 0)                                                                                                     \
    X(MAXIMUM, "maximum", 0)            /* NaN propagates, as torch.maximum */                                           \
    X(MINIMUM, "minimum", 0)                                                                                             \
    X(EQ, "eq", 0)                      /* comparisons write bool; they compare in in0/in1's common dtype */             \
    X(NE, "ne", 0)                                                                                                       \
    X(LT, "lt", 0)                                                                                                       \
    X(LE, "le", 0)                                                                                                       \
    X(GT, "gt", 0)                                                                                                       \
    X(GE, "ge", 0)                                                                                                       \
    X(LOGICAL_AND, "logical_and", 0)                                                                                     \
    X(LOGICAL_OR, "logical_or", 0)                                                                                       \
    /* ternary */                                                                                                        \
    X(WHERE, "where", 0)                /* out = in0 (bool) ? in1 : in2 */                                               \
    /* reductions over params.reduce.mask (out keeps reduced dims as size 1) */                                          \
    X(SUM, "sum", 0)                                                                                                     \
    X(MEAN, "mean", 0)                                                                                                   \
    X(PROD, "prod", 0)                                                                                                   \
    X(MAX, "max", 0)                    /* NaN propagates */                                                             \
    X(MIN, "min", 0)                                                                                                     \
    X(ARGMAX, "argmax", 0)              /* exactly one reduced dim (or all dims of a flattened view); out i64; */        \
    X(ARGMIN, "argmin", 0)              /*   the first index of the extreme value; NaN counts as the extreme */          \
    X(VAR, "var", 0)                    /* params.reduce.correction (Bessel: 1) */                                       \
    X(STD, "std", 0)                                                                                                     \
    X(NORM, "norm", 0)                  /* params.reduce.p: p-norm (inf = max |x|) */                                    \
    X(LOGSUMEXP, "logsumexp", 0)                                                                                         \
    /* along one dim (params.dim.dim), same shape in and out */                                                          \
    X(SOFTMAX, "softmax", 0)                                                                                             \
    X(LOG_SOFTMAX, "log_softmax", 0)                                                                                     \
    /* linear algebra */                                                                                                 \
    X(MATMUL, "matmul", 0)              /* in0 (..., M, K) @ in1 (..., K, N) -> out (..., M, N); all three */            \
                                        /* have the same ndim >= 2 and batch dims already broadcast (stride 0). */       \
                                        /* out's dtype may be wider than the inputs' (bf16 x bf16 -> f32). */            \
    /* indexing (params.dim.dim is the dim; index tensors are i64) */                                                    \
    X(INDEX_SELECT, "index_select", 0)  /* out = in0.index_select(dim, in1) */                                           \
    X(GATHER, "gather", 0)              /* out = in0.gather(dim, in1) */                                                 \
    X(MASKED_SELECT, "masked_select", 0)/* out (1-D, numel = count of true) = in0[in1]; in0, in1 same shape */           \
    X(INDEX_ADD, "index_add", 0)        /* in place: out.index_add_(dim, in1 (index), in0 (source)) */                   \
    X(SCATTER_ADD, "scatter_add", 0)    /* in place: out.scatter_add_(dim, in1 (index), in0 (source)) */                 \
    X(MASKED_SCATTER, "masked_scatter", 0)/* in place: out[in1] = in0 (1-D source, consumed in order) */                 \
    X(TRIU, "triu", 0)                  /* out = triu(in0, params.tri.k) over the last two dims */                       \
    X(TRIL, "tril", 0)                                                                                                   \
    /* fp8 */                                                                                                               \
    X(SCALED_MM, "scaled_mm", 0)        /* cuBLASLt's fp8 matmul: in0 (M, K) @ in1 (K, N) -> out (M, N), all 2-D. */     \
                                        /* in0/in1 f8_e4m3fn or f8_e5m2 (not both e5m2); in2, in3: one-element */        \
                                        /* f32 scales (scale_a, scale_b). r = scale_a * scale_b * sum_k a*b, */          \
                                        /* accumulated in f32 or better (the reference: exactly, in double), or */       \
                                        /* within TORC_FP8_MMA_SUM_TOL * scale_a * scale_b * sum_k |a*b| of the */       \
                                        /* exact r (fp8 tensor cores keep a 13-bit running sum: Hopper's e8m13). */      \
                                        /* out f32/bf16/f16: r rounded once; out fp8: r * scale_out cast with */         \
                                        /* saturation to the finite range, scale_out = in4 (n_in 5, a one-element */     \
                                        /* f32) or 1 (n_in 4). With n_out 2, out[1] (one-element f32) receives */        \
                                        /* max |r| (before scale_out; NaN if any r is NaN). */                           \
    /* fused pointwise. Inputs                    are broadcast to out's shape and may differ in */                      \
    /* dtype from out (converted on load, then rounded to out's dtype); out may be identical to in0 */                   \
    /* (the in-place forms). The math is PyTorch's CPU kernels', in the "opmath" type: float for */                      \
    /* f32/f16/bf16 outs, double for f64, with v = params.scalar.value rounded to that type: */                          \
    X(ADDCMUL, "addcmul", 0)            /* out = fma(v * in1, in2, in0): the product v*in1 rounded, then one fused */    \
                                        /*   multiply-add (PyTorch's vec::fmadd(scalar * t1, t2, self)). Integer */      \
                                        /*   outs too: in0 + v*in1*in2 wrapping, v truncated toward zero. */             \
    X(ADDCDIV, "addcdiv", 0)            /* out = in0 + (v * in1) / in2, each step rounded (floating outs only) */        \
    X(LERP, "lerp", 0)                  /* n_in 2, scalar weight w = params.scalar.value (floating outs only): */        \
                                        /*   |w| < 0.5 ? fma(w, in1 - in0, in0) : fma(w - 1, in1 - in0, in1) */          \
    /* end */

// v2.1: ops with several outputs. Unless said otherwise their operands may be strided, and the
// reference computes in double and rounds each output once.
#define TORC_OP_LIST_V2_1(X) \
    X(LAYER_NORM, "layer_norm", 1)      /* torch.native_layer_norm over dims params.norm.axis .. ndim-1 (the */          \
                                        /* normalized dims, N elements per row; 0 <= axis < ndim) of in0 = x */          \
                                        /* (f64, f32, f16, bf16). Then in1 = weight if params.norm.affine & 1, then */   \
                                        /* bias if & 2, each with the normalized dims' shape (ndim - axis dims) and */   \
                                        /* x's dtype, or f32 for an f16/bf16 x (PyTorch's CPU mixed dtype). */           \
                                        /* out[0] = y (x's shape and dtype); out[1] = mean, out[2] = rstd: x's */        \
                                        /* shape with the normalized dims of size 1, x's dtype (f32 when mixed). */      \
                                        /* mean = sum(x)/N, var = sum((x-mean)^2)/N (biased), */                         \
                                        /* rstd = 1/sqrt(var + params.norm.eps), y = (x-mean)*rstd*w + b. */            \
                                        /* N = 0: mean 0 and rstd NaN (as PyTorch), y empty. */                          \
    X(LAYER_NORM_BACKWARD, "layer_norm_backward", 1)                                                                     \
                                        /* in0 = dy (x's dtype), in1 = x, in2 = mean, in3 = rstd (as LAYER_NORM */       \
                                        /* wrote them), in4 = weight if params.norm.affine & 1. out[0] = dx (x's */      \
                                        /* shape and dtype); then out[1] = dweight if affine & 1, then dbias if */       \
                                        /* affine & 2 (the normalized dims' shape, weight's dtype): with */              \
                                        /* xhat = (x-mean)*rstd, g = dy*w, */                                            \
                                        /* dx = rstd*(g - mean_N(g) - xhat*mean_N(g*xhat)), dweight = sum over */        \
                                        /* rows of dy*xhat, dbias = sum over rows of dy (zeros when no rows). */         \
    X(MAX_DIM, "max_dim", 1)            /* torch.max(in0, params.dim.dim, keepdim=True): out[0] = values (in0's */       \
                                        /* dtype), out[1] = indices (i64), both in0's shape with that dim of size */     \
                                        /* 1 (the dim is not empty; in0 has ndim >= 1: the core sends a zero-dim */      \
                                        /* tensor as shape (1)). The first index of the extreme value; NaN */            \
                                        /* counts as the extreme (the first NaN wins); -0.0 and +0.0 tie. The */         \
                                        /* value is in0's element at that index, bit for bit. Any dtype (the */          \
                                        /* core refuses fp8 where PyTorch does: every in0 but a zero-dim one). */        \
    X(MIN_DIM, "min_dim", 1)            /* torch.min(in0, params.dim.dim, keepdim=True): as MAX_DIM. */                  \
    X(ADAM_STEP, "adam_step", 1)        /* One torch.optim Adam/AdamW step (single-tensor path), in place: */            \
                                        /* out[0] = param, out[1] = exp_avg, out[2] = exp_avg_sq, and with */            \
                                        /* ADAM_AMSGRAD out[3] = max_exp_avg_sq; in0 = grad. All have one shape */       \
                                        /* and one floating dtype T (f64, f32, f16, bf16). Per element, the torc */      \
                                        /* ops the adam plugins composed, rounded where they round: R() rounds */        \
                                        /* to T as a store does (double -> float -> T), Ro() to opmath (float; */        \
                                        /* double for f64); each step is computed in opmath and rounded by R(): */       \
                                        /*   g = MAXIMIZE ? -grad : grad */                                              \
                                        /*   if wd != 0: ADAM_DECOUPLED ? p = R(p * Ro(1 - lr*wd)) */                    \
                                        /*                              : g = R(fma(Rt(wd), p, g))  [ADD, alpha */       \
                                        /*                                  wd: Rt() casts to T, fma in opmath] */       \
                                        /*   m = R(LERP(m, g, Ro(1 - beta1)))  [LERP's two-sided fma] */                 \
                                        /*   v = R(v * Ro(beta2)); v = R(fma(Ro(1 - beta2) * g, g, v))  [ADDCMUL] */     \
                                        /*   AMSGRAD: vmax = NaN if vmax or v is, else max(vmax, v) (v on a tie); */     \
                                        /*            d = R(sqrt(vmax)), else d = R(sqrt(v)) */                          \
                                        /*   d = R(d / Ro(bc2_sqrt)); d = R(d + R(eps))  [eps in T, not opmath] */       \
                                        /*   p = R(p + (Ro(-step_size) * m) / d)  [ADDCDIV] */                           \
                                        /* 1 - lr*wd, 1 - beta1 and 1 - beta2 are computed in double; step_size */       \
                                        /* = lr / (1 - pow(beta1, t)) and bc2_sqrt = pow(1 - pow(beta2, t), 0.5) */      \
                                        /* are the core's, in double. */                                                 \
    /* end */

// v2.2: autocast's matmul without its casts.
#define TORC_OP_LIST_V2_2(X) \
    X(MATMUL_ROUNDED, "matmul_rounded", 2) /* MATMUL as torch.autocast runs it in c = params.matmul.dtype (F16 */   \
                                        /* or BF16), its casts fused: each input is c or F32 (each on its own), */       \
                                        /* every element rounded to c as a cast would; the products summed as */         \
                                        /* MATMUL sums c x c; the sum rounded to c, then stored in out's dtype */        \
                                        /* (c or F32, exactly). Equal, bit for bit on one backend, to casting the */     \
                                        /* F32 inputs to c, MATMUL with out c, and casting out to its dtype. A */        \
                                        /* backend may take it only where the fusion pays: autocast asks */              \
                                        /* supports() first and, where declined, casts and sends MATMUL. */              \
    /* end */

// v2.3: the division family of Python's // and %, binary (in0, in1 -> out, broadcast already
// applied) with ADD's dtype rules: c is the promotion of in0, in1 and out, inputs are cast to it,
// floating c computes in double (f64) or float (the rest), each step rounded to c, then to out.
// Integer c (not bool, which no backend takes) computes exactly, wrapping (INT_MIN // -1 is
// INT_MIN, INT_MIN % -1 is 0); an integer division by zero is an error ("ZeroDivisionError", a
// device backend may report it at the next synchronize), with out's contents unspecified.
#define TORC_OP_LIST_V2_3(X) \
    X(FLOOR_DIVIDE, "floor_divide", 3)  /* out = floor(in0 / in1). Floating, PyTorch's div_floor_floating: */          \
                                        /* in1 == 0: in0 / in1; else m = fmod(in0, in1), d = (in0 - m) / in1, */       \
                                        /* d -= 1 where m != 0 and (in1 < 0) != (m < 0); d != 0: q = floor(d), */        \
                                        /* q += 1 where d - q > 0.5; d == 0: q = copysign(0, in0 / in1). */              \
    X(REMAINDER, "remainder", 3)        /* Python's %: m = fmod(in0, in1), m += in1 where m != 0 and */                   \
                                        /* (in1 < 0) != (m < 0); the result has in1's sign (fmod's -0.0 kept) */         \
    X(FMOD, "fmod", 3)                  /* C's fmod / %: the result has in0's sign */                                    \
    /* end */

// v2.4: fused scaled-dot-product attention, FlashAttention-2's pair: the forward returns the output
// and each query row's log-sum-exp, the backward recomputes the probabilities from them, so no
// (L, S) matrix is stored between the two. Operands are 4-D (B, H, rows, features), any strides
// (0 included on the batch and head dims), one floating dtype T (f64, f32, f16, bf16) for q, k, v,
// o, do and the gradients; lse is f32 (f64 when T is). The core sends these only without a mask,
// dropout or grouped heads; the scale is params.attention.scale (the core resolves PyTorch's
// default 1/sqrt(E)); params.attention.causal = 1: query i attends keys 0..i (top-left aligned, as
// PyTorch's is_causal), 0: every key. With s_ij = scale * sum_e q_ie k_je over the attended j:
//   lse_i = log(sum_j exp(s_ij)), p_ij = exp(s_ij - lse_i), o_i = sum_j p_ij v_j;
// with S = 0 (no key to attend) o_i = 0 and lse_i = -inf. The reference computes in double and rounds once to T (lse
// to its dtype); a backend computes T = f32, f16, bf16 in f32 or better (f16/bf16 loaded exactly,
// accumulated in f32, each output rounded once), f64 in double, in any summation order: the
// result is within the tolerance docs/backends.md gives for attention of the reference's. A
// backend may decline any case in supports(); the core then composes the op from matmul and
// softmax (torc_scaled_dot_product_attention's math path). Also in 2.4: GELU_BACKWARD, GELU's
// derivative in one pass instead of the dozen elementwise ops (and their temporaries) it composes.
#define TORC_OP_LIST_V2_4(X) \
    X(ATTENTION, "attention", 4)        /* in0 = q (B, H, L, E), in1 = k (B, H, S, E), in2 = v (B, H, S, Ev); */       \
                                        /* out[0] = o (B, H, L, Ev), out[1] = lse (B, H, L). */                          \
    X(ATTENTION_BACKWARD, "attention_backward", 4) /* in0 = do (o's shape), in1 = q, in2 = k, in3 = v, in4 = o, */     \
                                        /* in5 = lse (as ATTENTION wrote them); out[0] = dq, out[1] = dk, */             \
                                        /* out[2] = dv (q's, k's, v's shapes, dtype T). With D_i = sum_e do_ie o_ie, */  \
                                        /* p_ij = exp(s_ij - lse_i) over the attended j, dp_ij = do_i . v_j, */          \
                                        /* ds_ij = p_ij (dp_ij - D_i): dv_j = sum_i p_ij do_i, */                        \
                                        /* dq_i = scale sum_j ds_ij k_j, dk_j = scale sum_i ds_ij q_i. */                \
    X(GELU_BACKWARD, "gelu_backward", 4) /* aten::gelu_backward: in0 = dy, in1 = x (GELU's input), out = dx, one */   \
                                        /* shape (broadcast already applied, as for binary ops), one floating */         \
                                        /* dtype (f64, f32, f16, bf16); params.gelu.approximate 0 'none', 1 */           \
                                        /* 'tanh'. PyTorch's GeluBackwardKernelImpl: 'none': cdf = 0.5 (1 + */           \
                                        /* erf(x / sqrt 2)), pdf = exp(-x^2 / 2) / sqrt(2 pi), dx = dy (cdf + x pdf); */ \
                                        /* 'tanh': b = sqrt(2 / pi), k = 0.044715, t = tanh(b (x + k x^3)), */           \
                                        /* dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) b (1 + 3 k x^2)). The reference */     \
                                        /* computes in double and rounds once; a backend computes in opmath */           \
                                        /* (double for f64, float otherwise, f16 / bf16 loaded exactly), within a */     \
                                        /* few ulps of float of the reference. The core sends it from GELU's */          \
                                        /* backward where the backend takes it, and composes the formula otherwise. */   \
    /* end */

// v2.5: cross-entropy over rows of logits with its gradient, one op: a backend reads each row
// once into cache and writes the row's loss and its gradient, where the composition (log_softmax,
// gather, exp, mul, scatter_add, casts) made five or six passes over an (N, V) matrix that does not
// fit in cache (the LM head's loss, core/linear_cross_entropy.c, V = 50257 at GPT-2).
#define TORC_OP_LIST_V2_5(X) \
    X(CROSS_ENTROPY, "cross_entropy", 5) /* in0 = logits (N, V) of a floating dtype T (f64, f32, f16, */       \
                                        /* bf16); in1 = target (N) i64, a row's class (negative: the row is */          \
                                        /* ignored); in2 = weight (N) in opmath (f64 for f64 logits, else f32), */      \
                                        /* each row's gradient scale. out[0] = loss (N), opmath: */                     \
                                        /* lse_i - logits[i, t_i], lse_i = log sum_j exp(logits[i, j]); out[1] = */     \
                                        /* grad (N, V), dtype T: weight_i (softmax(logits_i)_j - [j == t_i]) rounded */ \
                                        /* once. An ignored row gets loss 0 and a zero gradient row (whatever its */    \
                                        /* logits hold). A target >= V is an error (the core checks targets first, */   \
                                        /* a backend must still not read past the row). out[1] may be in0 itself */     \
                                        /* (same data and strides; the core writes the gradient over the logits): */    \
                                        /* read a row whole before writing it. Non-finite logits give what */           \
                                        /* log_softmax + nll give: a NaN or +inf in a row makes its loss and */         \
                                        /* gradient NaN. The reference computes in double (max, sum of exp(x - max), */ \
                                        /* lse = max + log(sum)) and rounds each output once; a backend computes */     \
                                        /* T = f32, f16, bf16 in f32 or better (the sum within a few float eps), f64 */ \
                                        /* in double. Any strides; a backend may decline some in supports(). */         \
    /* end */

// v2.6: list ops, torch's multi-tensor ("foreach", "fused") form of an op: one call over many tensors
// of one device and dtype, so the optimizer step and gradient clipping pay one dispatch (and, on a
// threaded backend, one parallel region) instead of one per parameter. The operands do not fit in
// in/out: params.ext.data points to a torc_op_list of n >= 2 element ops, each a complete op of the
// element opcode, exactly as the core would send it alone (operands, params, struct_size), every one
// with the same out[0] dtype. The list op itself has n_in 0 and n_out 1, out[0] being a copy of
// ops[0].out[0] (so the checks, tracing and messages that read an op's out[0] see the group's dtype);
// a backend reads and writes only through the element ops. The result is, bit for bit, what running
// the element ops one after another on this backend gives: no element's operands overlap another
// element's outputs (the core checks), so a backend may run them in any order or interleaved.
// run() validates every element before writing anything: an error (TORC_ERR_NOT_SUPPORTED for a
// layout or dtype it does not take) leaves every operand unchanged, and the core then sends the
// elements one by one (a device backend's declined list never takes the host round trip).
// Elements: ADAM_STEP_LIST's are ADAM_STEP ops (each with its own step, so its own step_size and
// bc2_sqrt); NORM_LIST's are NORM ops over all dims (mask covering every dim of size > 1, out of
// in0's ndim with every dim 1: here one element of the (n) vector of torch._foreach_norm's values,
// which the core then reduces as torch's get_total_norm does). A backend whose NORM differs in bits
// from the reference's (onednn's blocked f32 sum) takes a NORM_LIST only where it would take every
// element alone: the core sends it the elements it takes, and the reference the rest.
#define TORC_OP_LIST_V2_6(X) \
    X(ADAM_STEP_LIST, "adam_step_list", 6) /* torch._fused_adam_ over a list: ADAM_STEP elements */                    \
    X(NORM_LIST, "norm_list", 6)        /* torch._foreach_norm (p = params.reduce.p of each): NORM elements */           \
    /* end */

// A test build (-DTORC_TEST_EXTRA_ABI, tests/abi/) appends one opcode of a newer minor, to prove
// that an older plugin is never sent it and that params.ext carries parameters larger than the
// union: out = in0 * p->scale + p->shift (same shape and dtype), p = params.ext.data, a
// torc_test_extra_params.
#ifdef TORC_TEST_EXTRA_ABI
#define TORC_OP_LIST(X) \
    TORC_OP_LIST_V2_0(X) TORC_OP_LIST_V2_1(X) TORC_OP_LIST_V2_2(X) TORC_OP_LIST_V2_3(X) TORC_OP_LIST_V2_4(X) \
    TORC_OP_LIST_V2_5(X) TORC_OP_LIST_V2_6(X) X(TEST_EXTRA, "test_extra", 7)
#else
#define TORC_OP_LIST(X)                                                                                      \
    TORC_OP_LIST_V2_0(X) TORC_OP_LIST_V2_1(X) TORC_OP_LIST_V2_2(X) TORC_OP_LIST_V2_3(X) TORC_OP_LIST_V2_4(X) \
    TORC_OP_LIST_V2_5(X) TORC_OP_LIST_V2_6(X)
#endif

typedef enum torc_opcode {
#define TORC__OP_ENUM(ID, name, minor) TORC_OP_##ID,
    TORC_OP_LIST(TORC__OP_ENUM)
#undef TORC__OP_ENUM
    TORC_OP_COUNT
} torc_opcode;

// A strided view of device memory. data points at element [0, 0, ...] (the storage offset is
// already applied). Strides are in elements and may be 0 (broadcast) or negative never.
typedef struct torc_operand {
    void *data;
    torc_dtype dtype;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    int64_t stride[TORC_MAX_DIMS];
} torc_operand;

#define TORC_OP_MAX_INPUTS 8
#define TORC_OP_MAX_OUTPUTS 4

typedef union torc_op_params {
    struct { double value; } scalar;                     // FILL, POW_SCALAR, ADD/SUB alpha,
                                                         // ADDCMUL/ADDCDIV value, LERP weight
    struct { double start, step, end; int64_t count; } range;
    struct { uint64_t seed, offset; double a, b; } rng;  // RAND_*: Philox key and counter base
    struct { uint32_t mask; double correction, p; } reduce;
    struct { int dim; } dim;
    struct { int64_t k; } tri;
    struct { int approximate; } gelu;
    struct { double eps; int32_t axis; uint32_t affine; } norm;  // LAYER_NORM*: affine 1 weight, 2 bias (v2.1)
    struct { double lr, beta1, beta2, eps, weight_decay, step_size, bc2_sqrt; uint32_t flags; } adam;  // (v2.1)
    struct { int32_t dtype; } matmul;                    // MATMUL_ROUNDED: c, a torc_dtype (v2.2)
    struct { double scale; int32_t causal; } attention;  // ATTENTION(_BACKWARD) (v2.4)
    // Parameters larger than this union, for an opcode whose comment says it uses ext: data points
    // to that opcode's parameter struct (defined beside it in this header), which starts with
    // uint32_t struct_size, the struct's size in the core that built the op. Such a struct grows
    // only by appending, so a backend reads a member only where struct_size covers it
    // (TORC_STRUCT_HAS(p, type, m)). The struct is valid only during the call, like the operands.
    // The list ops of 2.6 use it (a torc_op_list); a later opcode that does needs no major version.
    struct { const void *data; } ext;
    double raw[8];                                       // the union's size: 64 bytes
} torc_op_params;

enum { TORC_ADAM_DECOUPLED = 1, TORC_ADAM_AMSGRAD = 2, TORC_ADAM_MAXIMIZE = 4 };  // params.adam.flags

struct torc_op;
// The list ops' parameters (v2.6, params.ext.data): n element ops (see TORC_OP_LIST_V2_6).
typedef struct torc_op_list {
    uint32_t struct_size;       // sizeof(torc_op_list) of the core that built it
    int32_t n;                  // element ops, >= 2
    const struct torc_op *ops;  // n ops, an array of torc_op (whose size is fixed in this major)
} torc_op_list;

#ifdef TORC_TEST_EXTRA_ABI
// TEST_EXTRA's parameters (params.ext.data): larger than the union, shift past its 64 bytes.
typedef struct torc_test_extra_params {
    uint32_t struct_size;  // sizeof(torc_test_extra_params) of the core
    double scale;
    double unused[8];
    double shift;
} torc_test_extra_params;
#endif

// One op. The core fills every field; a backend reads it and writes only out[0 .. n_out) data.
// The core has checked the operand counts and every shape the op's contract above relates (also
// for ops users send through torc_run_op, core/run_op.c), so a backend may index by the shapes
// it is given; values (index bounds, mask counts) and dtypes remain the backend's to check.
typedef struct torc_op {
    uint32_t struct_size;  // sizeof(torc_op) of the core that built it (>= the 2.0 size)
    uint32_t flags;        // 0 in 2.0; bits a later minor defines come with ops of that minor
    torc_opcode code;
    int n_in;              // 0 .. TORC_OP_MAX_INPUTS
    int n_out;             // 1 .. TORC_OP_MAX_OUTPUTS
    torc_operand in[TORC_OP_MAX_INPUTS];
    torc_operand out[TORC_OP_MAX_OUTPUTS];
    torc_op_params params;
} torc_op;

// The operand counts op's contract above gives: inputs in [*in_lo, *in_hi] and outputs in
// [*out_lo, *out_hi] (a range where operands are optional: scaled_mm's scale_out and amax),
// from the opcode and, for layer_norm(_backward) and adam_step, params (layer_norm's affine bits
// above 2 are the backend's to refuse). The one table the core's checks and the bundled backends
// share; zeros for an opcode this header does not know.
static inline void torc_op_counts(const torc_op *op, int *in_lo, int *in_hi, int *out_lo, int *out_hi) {
    const torc_opcode c = op->code;
    const int w = (int)(op->params.norm.affine & 1), b = (int)(op->params.norm.affine >> 1 & 1);
    int in = 1, out = 1, in_opt = 0, out_opt = 0;
    if ((unsigned)c >= TORC_OP_COUNT) in = out = 0;
    else if (c <= TORC_OP_RAND_INT && c != TORC_OP_COPY) in = 0;  // fills, ranges, random draws
    else if ((c >= TORC_OP_ADD && c <= TORC_OP_LOGICAL_OR) || c == TORC_OP_LERP || c == TORC_OP_MATMUL_ROUNDED ||
             (c >= TORC_OP_FLOOR_DIVIDE && c <= TORC_OP_FMOD) ||
             (c >= TORC_OP_MATMUL && c <= TORC_OP_MASKED_SCATTER) || c == TORC_OP_GELU_BACKWARD)
        in = 2;
    else if (c == TORC_OP_WHERE || c == TORC_OP_ADDCMUL || c == TORC_OP_ADDCDIV) in = 3;
    else if (c == TORC_OP_SCALED_MM) in = 4, in_opt = out_opt = 1;
    else if (c == TORC_OP_LAYER_NORM) in = 1 + w + b, out = 3;
    else if (c == TORC_OP_LAYER_NORM_BACKWARD) in = 4 + w, out = 1 + w + b;
    else if (c == TORC_OP_MAX_DIM || c == TORC_OP_MIN_DIM) out = 2;
    else if (c == TORC_OP_ADAM_STEP) out = op->params.adam.flags & TORC_ADAM_AMSGRAD ? 4 : 3;
    else if (c == TORC_OP_ATTENTION) in = 3, out = 2;
    else if (c == TORC_OP_ATTENTION_BACKWARD) in = 6, out = 3;
    else if (c == TORC_OP_CROSS_ENTROPY) in = 3, out = 2;
    else if (c == TORC_OP_ADAM_STEP_LIST || c == TORC_OP_NORM_LIST) in = 0;  // out[0]: ops[0].out[0]'s copy
    *in_lo = in, *in_hi = in + in_opt, *out_lo = out, *out_hi = out + out_opt;
}

// ---- devices ----
// Room for this many dtypes in the arrays a plugin fills: more than TORC_DTYPE_COUNT will reach
// in this major, so adding a dtype never changes a layout.
#define TORC_ABI_MAX_DTYPES 32
TORC__STATIC_ASSERT(TORC_ABI_MAX_DTYPES >= TORC_DTYPE_COUNT, "ABI: torc_device_info.peak_flops too small");

typedef struct torc_device_info {
    uint32_t struct_size;       // set by the core before device_info(): the plugin writes only the
                                // members it covers (TORC_STRUCT_HAS), the core zeroes the rest
    bool host_memory;           // true: pointers are host pointers (reference, onednn)
    char name[128];             // "Intel(R) Xeon(R) ...", "NVIDIA H100 80GB HBM3"
    uint64_t total_memory;      // bytes, 0 if unknown
    // Promised dense FLOP/s per dtype, indexed by torc_dtype (0 = unknown); how it was derived
    // in peak_source.
    double peak_flops[TORC_ABI_MAX_DTYPES];
    char peak_source[192];
} torc_device_info;

// What alloc of a host-memory device returns is aligned to at least this many bytes (the vtable's
// Memory rule): alignof(max_align_t), malloc's.
#define TORC_HOST_ALIGNMENT 16

typedef enum torc_copy_kind {
    TORC_COPY_HOST_TO_DEVICE = 0,
    TORC_COPY_DEVICE_TO_HOST,
    TORC_COPY_DEVICE_TO_DEVICE
} torc_copy_kind;

// ---- the vtable ----
// Every function returns 0 (TORC_OK) or a torc_status; on failure last_error(ctx) says why.
// Members marked optional may be NULL; the comment says what the core does then.
//
// Instances. init(options, &ctx) is called once when the core loads the plugin; every other
// member gets that ctx back as its first argument. options is a NULL-terminated array of
// "key=value" strings (NULL: none); a key the backend does not know is an error whose message
// names it. The backend's environment variables stay the defaults that options override.
// shutdown(ctx) is called at most once, by torc_shutdown or the core's atexit handler, after which
// the core makes no call on ctx: memory the core still holds from the backend then is never
// handed back (its free is dropped), so a backend may release everything, its ctx included.
// Before it, the core returns every thread's pooled small host buffers through free(), so the
// blocks a backend sees freed before shutdown are all those not held by live tensors.
// At exit, shutdown must never block: exit() may be called while one of the backend's calls holds
// its lock, by a library that ends the process on a failed allocation (libgomp, OpenBLAS,
// libgfortran), on the calling thread or on a worker thread of the backend's own. If exit() comes
// from inside the backend's run, supports or synchronize on the thread that runs the exit handler,
// the core skips that backend's shutdown (and its pooled buffers); otherwise shutdown is called
// and must not wait for a lock: take it with trylock and, when busy, release nothing (the process
// is ending). When the core's own lock is held at exit (a plugin's constructor or init called
// exit()), no backend is shut down.
//
// Threading. init and shutdown never run concurrently with any other call. Every other member
// may be called concurrently from several threads with the same ctx (torc ops run on whichever
// thread calls them, e.g. a training loop and a data loader's workers); a backend serialises
// internally what it must. supports() has no effect other than setting last_error's text.
//
// Ordering. On a host-memory backend (device_info's host_memory) run and copy complete before
// they return. A device backend may return from run, and from copy with async = true, before the
// work is done; then the work submitted to one device executes in the order submitted (one stream
// per device), and:
//  - copy(..., async = false) returns when its bytes have arrived, after all earlier work on the
//    device (a device-to-host copy reads what earlier runs wrote);
//  - free(ptr) may come right after a run that uses ptr returned: the backend must not hand the
//    memory out again before that work is done (stream-ordered reuse);
//  - synchronize(device) returns when all work submitted to the device is done;
//  - an async copy's host source must stay unchanged until the next synchronize.
//
// There are no events: the core times device work with a clock around synchronize().
//
// Memory. alloc is never asked for 0 bytes: an empty tensor's data is an address of the core's
// that nothing reads or writes (an operand with no elements may point there) and free never sees.
// NULL from alloc means out of memory (last_error says why). free gets only pointers alloc
// returned, from any thread. On a host-memory device (device_info's host_memory):
//  - alloc returns memory aligned to at least TORC_HOST_ALIGNMENT bytes (malloc's alignment); the
//    core frees a block aligned less and fails the allocation, naming the backend. Operands are
//    views into such blocks, so only their dtype's size can be assumed of an operand's data.
//  - The core keeps a per-thread pool of small blocks: a request of at most 1024 bytes arrives
//    rounded up to a multiple of 64, and such a block, once its tensor is freed, may serve later
//    tensors of that device without another alloc. So alloc and free do not balance while the
//    backend runs; every pooled block is freed before shutdown (see Instances).
//  - The memory is the process's, shared by every host backend: the core reads and writes it
//    without calling run or copy (torc_tensor_from and moves between host devices copy with
//    memcpy, small contiguous f32 and f64 fills are written in place, item and printing read it),
//    a tensor moved to another host device keeps its storage (freed through the backend that
//    allocated it), and an op this backend declines runs on the reference backend on the same
//    pointers. So run may be given any host backend's memory, a backend keeps no state that such
//    writes would make stale, copy need be no more than a memmove, and host_alloc / host_free are
//    not used.
//
// Lifetimes. An op, its operands and the options array are valid only during the call: a
// backend that returns early keeps what it needs (the device memory the operands point to stays
// valid until freed, as above). last_error's text is per thread and valid until the next call
// into the backend on that thread; last_error(NULL) gives the reason init failed.
typedef struct torc_backend_vtable {
    uint32_t abi_version;   // TORC_BACKEND_ABI_VERSION the plugin was built with
    uint32_t struct_size;   // sizeof(torc_backend_vtable) the plugin was built with
    const char *name;       // "reference", "onednn", "cuda"

    // v2.0
    int (*init)(const char *const *options, void **ctx);  // may fail (no driver, no device, a bad
                                                          // option): a clean error, ctx untouched
    void (*shutdown)(void *ctx);
    int (*device_count)(void *ctx);
    int (*device_info)(void *ctx, int device, torc_device_info *info);
    void *(*alloc)(void *ctx, int device, size_t nbytes);  // nbytes > 0; NULL on failure (see Memory)
    void (*free)(void *ctx, int device, void *ptr);
    int (*copy)(void *ctx, int device, void *dst, const void *src, size_t nbytes, torc_copy_kind kind,
                bool async);
    int (*synchronize)(void *ctx, int device);
    bool (*supports)(void *ctx, int device, const torc_op *op);
    int (*run)(void *ctx, int device, const torc_op *op);
    const char *(*last_error)(void *ctx);  // message of the last failure on this thread
    // Optional: allocator statistics in bytes, for torc_device_memory_stats (NULL: the core reports
    // its own counters of live tensor bytes for all three).
    int (*memory_stats)(void *ctx, int device, uint64_t *allocated, uint64_t *reserved,
                        uint64_t *peak_reserved);
    int (*empty_cache)(void *ctx, int device);  // optional (NULL: nothing is cached)
    // Optional: page-locked ("pinned") host memory, which copy(..., async = true) may read after
    // it returns (NULL: the core stages host->device copies in malloc'ed memory instead).
    void *(*host_alloc)(void *ctx, int device, size_t nbytes);
    void (*host_free)(void *ctx, int device, void *ptr);
} torc_backend_vtable;

// The one symbol a backend exports. host_abi_version is the loader's TORC_BACKEND_ABI_VERSION; a
// backend may return NULL if it cannot speak to that host. Declared here so that a definition
// with another signature does not compile. It runs no device or ISA-specific code.
TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t host_abi_version);
typedef const torc_backend_vtable *(*torc_backend_entry_fn)(uint32_t host_abi_version);
#define TORC_BACKEND_ENTRY_SYMBOL "torc_backend_entry"

// ---- layouts, pinned per minor (LP64) ----
// Every member of every struct that crosses the boundary, with the minor that gave it its place.
// A minor adds only what these asserts leave alone: vtable members past the end, union members
// inside the params' 64 bytes.
#if defined(__LP64__) || defined(_WIN64)
#define TORC__PIN_V(v, type, m, off) TORC__STATIC_ASSERT(offsetof(type, m) == (off), "ABI " v ": " #type "." #m " moved")
#define TORC__PIN(type, m, off) TORC__PIN_V("2.0", type, m, off)
#define TORC__PIN_SIZE(v, type, m, n) TORC__STATIC_ASSERT(sizeof(((type *)0)->m) == (n), "ABI " v ": " #type "." #m " resized")
TORC__PIN(torc_operand, data, 0);
TORC__PIN(torc_operand, dtype, 8);
TORC__PIN(torc_operand, ndim, 12);
TORC__PIN(torc_operand, shape, 16);
TORC__PIN(torc_operand, stride, 16 + 8 * TORC_MAX_DIMS);
TORC__STATIC_ASSERT(sizeof(torc_operand) == 16 + 16 * TORC_MAX_DIMS, "ABI 2.0: torc_operand size");
TORC__STATIC_ASSERT(sizeof(torc_op_params) == 64, "ABI 2.0: torc_op_params size");
TORC__PIN(torc_op_params, scalar.value, 0);
TORC__PIN(torc_op_params, range.start, 0);
TORC__PIN(torc_op_params, range.step, 8);
TORC__PIN(torc_op_params, range.end, 16);
TORC__PIN(torc_op_params, range.count, 24);
TORC__PIN(torc_op_params, rng.seed, 0);
TORC__PIN(torc_op_params, rng.offset, 8);
TORC__PIN(torc_op_params, rng.a, 16);
TORC__PIN(torc_op_params, rng.b, 24);
TORC__PIN(torc_op_params, reduce.mask, 0);
TORC__PIN(torc_op_params, reduce.correction, 8);
TORC__PIN(torc_op_params, reduce.p, 16);
TORC__PIN(torc_op_params, dim.dim, 0);
TORC__PIN(torc_op_params, tri.k, 0);
TORC__PIN(torc_op_params, gelu.approximate, 0);
TORC__PIN_SIZE("2.0", torc_op_params, reduce.mask, 4);
TORC__PIN_SIZE("2.0", torc_op_params, dim.dim, 4);
TORC__PIN_SIZE("2.0", torc_op_params, gelu.approximate, 4);
TORC__PIN_V("2.1", torc_op_params, norm.eps, 0);
TORC__PIN_V("2.1", torc_op_params, norm.axis, 8);
TORC__PIN_V("2.1", torc_op_params, norm.affine, 12);
TORC__PIN_V("2.1", torc_op_params, adam.lr, 0);
TORC__PIN_V("2.1", torc_op_params, adam.beta1, 8);
TORC__PIN_V("2.1", torc_op_params, adam.beta2, 16);
TORC__PIN_V("2.1", torc_op_params, adam.eps, 24);
TORC__PIN_V("2.1", torc_op_params, adam.weight_decay, 32);
TORC__PIN_V("2.1", torc_op_params, adam.step_size, 40);
TORC__PIN_V("2.1", torc_op_params, adam.bc2_sqrt, 48);
TORC__PIN_V("2.1", torc_op_params, adam.flags, 56);
TORC__PIN_SIZE("2.1", torc_op_params, adam.flags, 4);
TORC__PIN_V("2.2", torc_op_params, matmul.dtype, 0);
TORC__PIN_SIZE("2.2", torc_op_params, matmul.dtype, 4);
TORC__PIN_V("2.3", torc_op_params, ext.data, 0);
TORC__PIN_SIZE("2.3", torc_op_params, ext, 8);
TORC__PIN_V("2.4", torc_op_params, attention.scale, 0);
TORC__PIN_V("2.4", torc_op_params, attention.causal, 8);
TORC__PIN_SIZE("2.4", torc_op_params, attention.causal, 4);
TORC__PIN_V("2.6", torc_op_list, struct_size, 0);
TORC__PIN_V("2.6", torc_op_list, n, 4);
TORC__PIN_V("2.6", torc_op_list, ops, 8);
TORC__STATIC_ASSERT(sizeof(torc_op_list) == 16, "ABI 2.6: torc_op_list size");
TORC__PIN(torc_op, struct_size, 0);
TORC__PIN(torc_op, flags, 4);
TORC__PIN(torc_op, code, 8);
TORC__PIN(torc_op, n_in, 12);
TORC__PIN(torc_op, n_out, 16);
TORC__PIN(torc_op, in, 24);
TORC__PIN(torc_op, out, 24 + 8 * sizeof(torc_operand));
TORC__PIN(torc_op, params, 24 + 12 * sizeof(torc_operand));
TORC__STATIC_ASSERT(sizeof(torc_op) == 24 + 12 * sizeof(torc_operand) + 64, "ABI 2.0: torc_op size");
TORC__PIN(torc_device_info, struct_size, 0);
TORC__PIN(torc_device_info, host_memory, 4);
TORC__PIN(torc_device_info, name, 5);
TORC__PIN(torc_device_info, total_memory, 136);
TORC__PIN(torc_device_info, peak_flops, 144);
TORC__PIN(torc_device_info, peak_source, 144 + 8 * 32);
TORC__STATIC_ASSERT(sizeof(torc_device_info) == 144 + 8 * 32 + 192, "ABI 2.0: torc_device_info size");
TORC__PIN(torc_backend_vtable, abi_version, 0);
TORC__PIN(torc_backend_vtable, struct_size, 4);
TORC__PIN(torc_backend_vtable, name, 8);
TORC__PIN(torc_backend_vtable, init, 16);
TORC__PIN(torc_backend_vtable, shutdown, 24);
TORC__PIN(torc_backend_vtable, device_count, 32);
TORC__PIN(torc_backend_vtable, device_info, 40);
TORC__PIN(torc_backend_vtable, alloc, 48);
TORC__PIN(torc_backend_vtable, free, 56);
TORC__PIN(torc_backend_vtable, copy, 64);
TORC__PIN(torc_backend_vtable, synchronize, 72);
TORC__PIN(torc_backend_vtable, supports, 80);
TORC__PIN(torc_backend_vtable, run, 88);
TORC__PIN(torc_backend_vtable, last_error, 96);
TORC__PIN(torc_backend_vtable, memory_stats, 104);
TORC__PIN(torc_backend_vtable, empty_cache, 112);
TORC__PIN(torc_backend_vtable, host_alloc, 120);
TORC__PIN(torc_backend_vtable, host_free, 128);
TORC__STATIC_ASSERT(sizeof(torc_backend_vtable) == 136, "ABI 2.0: torc_backend_vtable size");
#undef TORC__PIN_SIZE
#undef TORC__PIN
#undef TORC__PIN_V
#endif

#ifdef __cplusplus
}
#endif
#endif
