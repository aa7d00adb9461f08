// core/linear_cross_entropy.c — torc_linear_cross_entropy: cross_entropy(x @ weight[:V]^T, target)
// chunk by chunk over x's rows, with the gradients made in the forward so that no logits are kept.
//
// Shapes: N rows (x's leading dims), C features, V classes (n_classes, weight's first V rows), R
// rows a chunk. An LM head's loss is the one place a model holds an (N, V) matrix: GPT-2's head at
// N = 1024 keeps 200 MiB of f32 logits and as much of log-softmax for backward. Here each chunk's
// logits live only while the chunk runs:
//   logits = x_c @ W^T (R, V), then one CROSS_ENTROPY op (backend ABI 2.5) that reads each row once
//   and writes its loss lse - logits[target] and, over the logits, dlogits = (softmax - onehot) * w
//   (w the reduction's 1/count, or 1; 0 for an ignored row); dx_c = dlogits @ W, dW += dlogits^T @
//   x_c (in f32 / f64, chunk after chunk). A device backend that declines the op gets it composed:
//   lp = log_softmax(logits), loss rows = -lp[target], dlogits = (exp(lp) - onehot) * w, five or six
//   passes over an (R, V) matrix out of cache where the op makes one (config A's LM head, one
//   thread: f32 1.2-1.3 s -> 0.82-0.90 s, bf16 autocast 0.79-0.83 -> 0.32-0.35 s;
//   backends/cpu_onednn/cross_entropy.c). Every piece is a backend op, so every backend runs it.
//
// The autograd side, without a node kind of its own: the result is loss + (s - s.detach()) with
// s = sum(x * dx) + sum(W * dW) and dx, dW constants. Its value is the loss (s - s is 0 for finite
// s), and its gradient is exactly g * dx and g * dW (mul's backward), so backward holds dx and dW
// and costs two elementwise products. The price: a non-finite x * dx (x holding inf in a row the
// target ignores) turns the loss into nan where the composed path's is finite, and a second
// derivative sees dx and dW as constants (not twice differentiable, as Liger's kernel). The other
// choice, keeping only x and recomputing each chunk's logits in backward, costs a third (N, C, V)
// matmul (2 N C V FLOPs, a third more work); it would suit REDUCTION_NONE, whose per-row upstream
// gradients are not known in the forward: that reduction with a gradient runs the composed ops.
#include <math.h>
#include <string.h>

#include "torc-impl.h"

// Rows a chunk: the logits of a chunk are 2^24 elements at most (64 MiB in f32), never fewer than
// 8 rows. Config A's step (torc-bench --gpt=A --quick --threads 1 --cpu-time, f32, N 1024 rows of
// V 50257 classes, one loaded Sapphire Rapids vCPU, two rounds): 2^22 (83 rows, 13 chunks) 2050 /
// 2292 ms, 2^23 1992 / 1746, 2^24 (4 chunks of 256) 1678 / 1614, 2^25 1822 / 1732; torc's peak
// 306 / 333 / 374 / 473 MiB, peak RSS 486 / 513 / 555 / 653 (PyTorch's 1428): bigger chunks make
// the head's GEMMs faster until their logits leave the caches' reach. Re-measured with the onednn
// backend's long-K pieces (2026-11-29, Emerald Rapids, the same command, two runs each alternating,
// loaded): 2^25 (2 chunks of 512) 938-1102 ms against 2^24's 1017-1032, torc's peak 330 against
// 281 MiB: no clear gain, so 2^24 stays.
// A function of the shapes only, so the dW sums (and the results' bits) do not depend on
// the memory or the thread count. The N rows are then cut into ceil(N / R) chunks of equal size
// (give or take a row): a last chunk of one row would run as a matrix-vector product, which
// oneDNN sums in an order five times less accurate at 65536 classes (measured: dx 5.2e-6 from
// f64 against the whole batch's 9.4e-7).
#define LCE_CHUNK_ELEMS ((int64_t)1 << 24)
#define LCE_MIN_ROWS 8
static int64_t chunk_rows(int64_t V) {
    const int64_t r = LCE_CHUNK_ELEMS / (V > 0 ? V : 1);
    return r < LCE_MIN_ROWS ? LCE_MIN_ROWS : r;
}

// The composition this op stands for: cross_entropy_ex(x @ wt, target) with the rows flattened (a
// 1-D x is one row with a zero-dim target). Used for what the fused path does not take; its errors
// are the composed op's own.
static torc_tensor *composed(const torc_tensor *x, torc_tensor *wt, const torc_tensor *target, int64_t ignore_index,
                             torc_reduction red) {
    torc_tensor *logits = torc_matmul(x, wt);
    if (!logits || x->ndim <= 2) return logits ? torc_cross_entropy_ex(logits, target, ignore_index, red, 0.0) : NULL;
    // (..., V) as (rows, V); the target (...) as (rows), or class probabilities (..., V) as (rows, V)
    const int64_t V = logits->shape[logits->ndim - 1];
    const bool probs = target->ndim == logits->ndim;
    if (!probs && target->ndim != x->ndim - 1) {
        char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "Expected target size %s, got %s",
                              torc__shape_str(x->ndim - 1, x->shape, b1, sizeof b1),
                              torc__shape_str(target->ndim, target->shape, b2, sizeof b2));
    }
    torc_tensor *tflat = probs ? torc_reshape((torc_tensor *)target, TORC_SHAPE(-1, V))
                               : torc_reshape((torc_tensor *)target, TORC_SHAPE(-1));
    torc_tensor *flat = torc_reshape(logits, TORC_SHAPE(-1, V));
    torc_tensor *r = flat && tflat ? torc_cross_entropy_ex(flat, tflat, ignore_index, red, 0.0) : NULL;
    return r && red == TORC_REDUCTION_NONE ? torc_reshape(r, x->ndim - 1, x->shape) : r;
}

// target against x (N, C) or (..., C), in nll_loss's words; its dtype as nll_loss checks it.
static bool check_target(const torc_tensor *x, const torc_tensor *target) {
    char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
    if (x->ndim == 2) {
        if (target->ndim < 1 || target->shape[0] != x->shape[0]) {
            torc__error(TORC_ERR_SHAPE, "Expected input batch_size (%lld) to match target batch_size (%lld).",
                        (long long)x->shape[0], (long long)(target->ndim ? target->shape[0] : 1));
            return false;
        }
        if (target->ndim > 1)
            return torc__error(TORC_ERR_SHAPE, "0D or 1D target tensor expected, multi-target not supported"), false;
    } else {
        bool ok = target->ndim == x->ndim - 1;
        for (int d = 0; ok && d < target->ndim; d++) ok = target->shape[d] == x->shape[d];
        if (!ok) {
            torc__error(TORC_ERR_SHAPE, "Expected target size %s, got %s", torc__shape_str(x->ndim - 1, x->shape, b1, sizeof b1),
                        torc__shape_str(target->ndim, target->shape, b2, sizeof b2));
            return false;
        }
    }
    if (target->dtype != TORC_DTYPE_I64 && target->dtype != TORC_DTYPE_U8) {
        torc__error(TORC_ERR_DTYPE, "expected target dtype to be Long or Byte, but got %s", torc__dtype_c10_name(target->dtype));
        return false;
    }
    return true;
}

// PyTorch's "Target 5 is out of bounds." for the first target outside [0, V) that is not ignored
// (row-major order), as nll_loss reports it: one read of a count from the device, one more on error.
static bool check_bounds(torc_tensor *idx, torc_tensor *valid, int64_t V) {
    torc_tensor *bad = torc_logical_and(valid, torc_logical_or(torc_lt_scalar(idx, torc_s(0)), torc_ge_scalar(idx, torc_s(V))));
    torc_tensor *nbad = bad ? torc_sum(bad, TORC_ALL_DIMS, false) : NULL;
    int64_t count = 0, at = 0, value = 0;
    if (!nbad || torc_item_i64(nbad, &count)) return false;
    if (!count) return true;
    torc_tensor *first = torc_argmax(torc_to_dtype(bad, TORC_DTYPE_I32), TORC_DIM_NONE, false);
    if (!first || torc_item_i64(first, &at)) return false;
    torc_tensor *v = torc_select(idx, 0, at);
    if (!v || torc_item_i64(v, &value)) return false;
    torc__error(TORC_ERR_INDEX, "Target %lld is out of bounds.", (long long)value);
    return false;
}

static bool is_lce_float(torc_dtype d) {
    return d == TORC_DTYPE_F32 || d == TORC_DTYPE_F64 || d == TORC_DTYPE_F16 || d == TORC_DTYPE_BF16;
}

// CROSS_ENTROPY (backend ABI 2.5) on one chunk: logits (n, V) of dtype T, the gradient written over
// them (in place), each row's loss into loss (n, opmath). TORC_OK when it ran; *declined when the
// device's backend does not take it (a device backend: the caller composes instead; on host memory
// the reference runs what the backend declines, as for any op).
static torc_status cross_entropy_op(torc_tensor *logits, torc_tensor *tgt, torc_tensor *w, torc_tensor *loss,
                                    bool *declined) {
    torc_device *dev = logits->device;
    torc_op op = {.code = TORC_OP_CROSS_ENTROPY, .n_in = 3, .n_out = 2};
    torc__operand(logits, &op.in[0]);
    torc__operand(tgt, &op.in[1]);
    torc__operand(w, &op.in[2]);
    torc__operand(loss, &op.out[0]);
    torc__operand(logits, &op.out[1]);
    *declined = false;
    const uint64_t flops = (uint64_t)torc_numel(logits);  // one per logit, as an elementwise op counts
    if (dev->host_memory) return torc__dispatch(dev, &op, flops);
    if (!torc__runs_natively(dev, &op)) {
        *declined = true;
        return TORC_OK;
    }
    return torc__dispatch_supported(dev, &op, flops);
}

// out (M, N) = a (M, K) @ b (K, N), written into out (a view, any strides) by one MATMUL: what
// torc_matmul_out_dtype(a, b, out's dtype) computes without autocast, for 2-D operands on one device,
// without its result's allocation and the copy into out. Under no_grad (no node).
static torc_status matmul_into(torc_tensor *a, torc_tensor *b, torc_tensor *out) {
    torc_op op = {.code = TORC_OP_MATMUL, .n_in = 2, .n_out = 1};
    torc__operand(a, &op.in[0]);
    torc__operand(b, &op.in[1]);
    torc__operand(out, &op.out[0]);
    const uint64_t flops = 2 * (uint64_t)torc_size(a, 0) * (uint64_t)torc_size(a, 1) * (uint64_t)torc_size(b, 1);
    const torc_status st = torc__dispatch(out->device, &op, flops);
    if (!st) torc__bump_version(out);
    return st;
}

// The chunked forward (and gradients). xd (N, C) and wd (V, C) detached; idx (N) int64, valid
// its not-ignored mask; low the autocast dtype (TORC_DTYPE_COUNT: none). Fills rows (N) with the
// loss per row (0 where ignored) and, when asked, dx (N, C) and dw (V, C) (its contents on entry
// unused) with the gradients of the reduced loss. Runs under no_grad in the caller's scope.
// Each chunk: logits = x_c W^T, in the matmul's dtype (low under autocast), then one CROSS_ENTROPY
// writing the rows' losses and, over the logits, their gradient; where a device backend declines
// the op, log_softmax, gather, exp_, mul_ and scatter_add compose it (in f32 under autocast).
static torc_status chunks(torc_tensor *xd, torc_tensor *wd, torc_tensor *idx, torc_tensor *valid, torc_dtype low,
                          torc_reduction red, torc_tensor *rows, torc_tensor *dx, torc_tensor *dw) {
    const int64_t N = torc_size(xd, 0), V = torc_size(wd, 0), R = chunk_rows(V);
    const int64_t n_chunks = (N + R - 1) / R, base = n_chunks ? N / n_chunks : 0, extra = n_chunks ? N % n_chunks : 0;
    const torc_dtype ldt = rows->dtype;  // the composed log-softmax's dtype: f32 under autocast, else x's
    const torc_dtype T = low == TORC_DTYPE_COUNT ? xd->dtype : low;                    // the logits'
    const torc_dtype om = T == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32;      // the op's loss, weight
    if (dw && n_chunks == 0 && torc__fill(dw, 0.0)) return torc_last_status();
    // Operands in the matmul's dtype once (under autocast, as its MATMUL_ROUNDED rounds them).
    torc_tensor *xa = low == TORC_DTYPE_COUNT ? xd : torc_to_dtype(xd, low);
    torc_tensor *wa = low == TORC_DTYPE_COUNT ? wd : torc_to_dtype(wd, low);
    torc_tensor *wat = wa ? torc_transpose(wa, 0, 1) : NULL;  // (C, V)
    torc_tensor *zero = torc__register(torc__scalar_on(xd->device, 0.0, ldt));
    torc_tensor *zero_i = torc__register(torc__scalar_on(xd->device, 0.0, TORC_DTYPE_I64));
    torc_tensor *none_i = torc__register(torc__scalar_on(xd->device, -1.0, TORC_DTYPE_I64));
    torc_tensor *safe = zero_i ? torc_where(valid, idx, zero_i) : NULL;  // ignored rows pick class 0, weighted 0
    torc_tensor *tgt = none_i ? torc_where(valid, idx, none_i) : NULL;   // the op's: ignored rows -1
    // The weight of a row's gradient: 1 / (targets not ignored) for MEAN (PyTorch's total_weight;
    // nothing when every target is ignored, where the loss is nan), 1 for SUM, 0 where ignored.
    // In ldt for the composition, in opmath (wo) for the op; no gradient: 0 (the op still writes one).
    torc_tensor *w = NULL, *wo = NULL;
    if (dx || dw) {
        torc_tensor *one = torc_to_dtype(valid, ldt);
        w = red == TORC_REDUCTION_SUM ? one
            : one && zero ? torc_where(valid, torc_reciprocal(torc_sum(one, TORC_ALL_DIMS, false)), zero) : NULL;
        if (!w) return torc_last_status();
    }
    wo = w ? torc_to_dtype(w, om) : torc__register(torc__new(xd->device, om, 1, (int64_t[]){N}));
    if (!w && wo && torc__fill(wo, 0.0)) return torc_last_status();
    torc_tensor *lo = ldt == om ? NULL : torc__register(torc__new(xd->device, om, 1, (int64_t[]){N}));  // the op's loss
    if (!xa || !wat || !zero || !safe || !tgt || !wo || (ldt != om && !lo)) return torc_last_status();
    torc_status st = TORC_OK;
    bool composed = false;  // a device backend declined the op (the first chunk asks)
    for (int64_t k = 0; k < n_chunks && !st; k++) {
        // chunk k: rows r0 .. r0 + n, the first `extra` chunks a row longer
        const int64_t n = base + (k < extra), r0 = k * base + (k < extra ? k : extra);
        torc_scope_push();
        torc_tensor *xc = torc_narrow(xa, 0, r0, n);  // (n, C)
        torc_tensor *g = NULL;                        // (n, V) the logits' gradient, (softmax - onehot) w
        torc_tensor *asked = NULL;                    // the logits the op was declined for
        if (!composed) {
            torc_tensor *logits = torc_matmul(xc, wat);  // (n, V), T
            torc_tensor *loss = torc_narrow(lo ? lo : rows, 0, r0, n);
            torc_tensor *tc = torc_narrow(tgt, 0, r0, n), *wc = torc_narrow(wo, 0, r0, n);
            st = logits && loss && tc && wc ? cross_entropy_op(logits, tc, wc, loss, &composed) : torc_last_status();
            if (!st && !composed && lo) st = torc_copy_(torc_narrow(rows, 0, r0, n), loss);
            g = logits;
            if (composed) asked = logits, g = NULL;
        }
        if (!st && composed) {
            torc_tensor *sc = torc_unsqueeze(torc_narrow(safe, 0, r0, n), 1);  // (n, 1)
            torc_scope_push();  // the logits (and their f32 copy) go before the gradient is made
            torc_tensor *logits = asked ? asked : torc_matmul(xc, wat);
            if (logits && logits->dtype != ldt) logits = torc_to_dtype(logits, ldt);
            torc_tensor *lp = torc_keep(logits ? torc_log_softmax(logits, 1) : NULL);
            torc_scope_pop();
            torc_tensor *picked = lp && sc ? torc_squeeze(torc_gather(lp, 1, sc), 1) : NULL;
            torc_tensor *loss = picked ? torc_where(torc_narrow(valid, 0, r0, n), torc_neg(picked), zero) : NULL;
            st = loss ? torc_copy_(torc_narrow(rows, 0, r0, n), loss) : torc_last_status();
            g = NULL;
            if (!st && (dx || dw)) {
                const torc_phase phase = torc__phase();  // counted as the composed op's backward
                torc__set_phase(TORC_PHASE_BACKWARD);
                torc_tensor *wc = torc_unsqueeze(torc_narrow(w, 0, r0, n), 1);  // (n, 1)
                st = wc ? torc_exp_(lp) : torc_last_status();
                if (!st) st = torc_mul_(lp, wc);
                g = st ? NULL : torc_scatter_add(lp, 1, sc, torc_neg(wc));
                if (g && low != TORC_DTYPE_COUNT) g = torc_to_dtype(g, low);
                if (!st && !g) st = torc_last_status();
                torc__set_phase(phase);
            }
        }
        if (!st && (dx || dw)) {
            // Counted as backward work: these are the matmuls the composed op's backward runs.
            const torc_phase phase = torc__phase();
            torc__set_phase(TORC_PHASE_BACKWARD);
            // Without autocast the chunk's dx and the first chunk's dW are written where they go
            // (matmul_into: the same MATMUL, the same bits): no (V, C) temporary and copy for dW.
            // The later chunks' dW still go through a temporary and an add (3 x 154 MB of traffic a
            // config A step, ~2% of it): adding in the GEMM (beta = 1) needs an accumulating matmul
            // in the backend ABI, which it lacks.
            const bool into = low == TORC_DTYPE_COUNT;
            if (dx) {
                torc_tensor *dxr = torc_narrow(dx, 0, r0, n);  // (n, C)
                torc_tensor *dxc = into ? NULL : torc_matmul_out_dtype(g, wa, dx->dtype);
                st = !dxr ? torc_last_status() : into ? matmul_into(g, wa, dxr) : dxc ? torc_copy_(dxr, dxc) : torc_last_status();
            }
            if (!st && dw) {  // the first chunk's is dW, the others add to it
                torc_tensor *gt = torc_transpose(g, 0, 1);  // (V, n)
                torc_tensor *dwc = gt && (k > 0 || !into) ? torc_matmul_out_dtype(gt, xc, dw->dtype) : NULL;  // (V, C)
                st = !gt ? torc_last_status() : k == 0 && into ? matmul_into(gt, xc, dw)
                     : !dwc ? torc_last_status() : k == 0 ? torc_copy_(dw, dwc) : torc_add_(dw, dwc);
            }
            torc__set_phase(phase);
        }
        torc_scope_pop();
    }
    return st;
}

torc_tensor *torc_linear_cross_entropy(const torc_tensor *x, const torc_tensor *weight, const torc_tensor *target,
                                       int64_t n_classes, int64_t ignore_index, torc_reduction reduction) {
    if (!x || !weight || !target) return TORC_NULL_ARG_FAIL("tensor is NULL");
    if (reduction != TORC_REDUCTION_NONE && reduction != TORC_REDUCTION_MEAN && reduction != TORC_REDUCTION_SUM)
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "%d is not a valid value for reduction", (int)reduction);
    if (!torc__same_device(x, weight) || !torc__same_device(x, target)) return NULL;
    torc_scope_push();
    torc_tensor *r = NULL;
    // weight[:n_classes] and its transpose, as the composition takes them (their errors included).
    const int64_t V = n_classes ? n_classes : weight->ndim ? weight->shape[0] : 0;
    torc_tensor *wn = torc_narrow((torc_tensor *)weight, 0, 0, V);  // (V, C)
    torc_tensor *wt = wn ? torc_transpose(wn, 0, 1) : NULL;          // (C, V)
    const torc_dtype mode = torc_autocast_dtype();
    const bool autocast = torc_is_autocast_enabled();
    const torc_dtype low = autocast ? mode : TORC_DTYPE_COUNT;
    bool fused = wt && weight->ndim == 2 && x->ndim >= 2 && x->shape[x->ndim - 1] == weight->shape[1] &&
                 torc_dtype_is_floating(target->dtype) == false;
    if (autocast)  // fp8 autocast and f64 inputs keep the composition
        fused = fused && (mode == TORC_DTYPE_BF16 || mode == TORC_DTYPE_F16) &&
                (x->dtype == TORC_DTYPE_F32 || x->dtype == low) && (weight->dtype == TORC_DTYPE_F32 || weight->dtype == low);
    else
        fused = fused && x->dtype == weight->dtype && is_lce_float(x->dtype);
    const bool need_x = torc_is_grad_enabled() && torc_requires_grad(x);
    const bool need_w = torc_is_grad_enabled() && torc_requires_grad(weight);
    if (fused && reduction == TORC_REDUCTION_NONE && (need_x || need_w)) fused = false;
    if (!wt) {
        // narrow's or transpose's error
    } else if (weight->ndim != 2) {
        torc__error(TORC_ERR_SHAPE, "linear_cross_entropy: weight must be 2-D (classes, features), got %d dims",
                    weight->ndim);
    } else if (!fused) {
        r = composed(x, wt, target, ignore_index, reduction);
    } else if (check_target(x, target)) {
        const int64_t C = x->shape[x->ndim - 1], N = torc__numel(x->ndim - 1, x->shape);
        const torc_dtype ldt = autocast ? TORC_DTYPE_F32 : x->dtype;                           // the loss's
        const torc_dtype acc = x->dtype == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32;  // dx's, dW's
        torc_no_grad_begin();
        torc_tensor *xd = torc_reshape(torc_detach((torc_tensor *)x), TORC_SHAPE(N, C));
        torc_tensor *wd = torc_detach(wn);
        torc_tensor *idx = torc_reshape(torc_to_dtype((torc_tensor *)target, TORC_DTYPE_I64), TORC_SHAPE(N));
        torc_tensor *valid = idx ? torc_ne_scalar(idx, torc_s(ignore_index)) : NULL;
        torc_tensor *rows = torc__register(torc__new(x->device, ldt, 1, (int64_t[]){N}));
        torc_tensor *dx = need_x ? torc__register(torc__new(x->device, acc, 2, (int64_t[]){N, C})) : NULL;
        torc_tensor *dw = need_w ? torc__register(torc__new(x->device, acc, 2, (int64_t[]){V, C})) : NULL;
        torc_status st = xd && wd && valid && rows && (dx || !need_x) && (dw || !need_w) ? TORC_OK : torc_last_status();
        if (!st && !check_bounds(idx, valid, V)) st = torc_last_status();
        if (!st) st = chunks(xd, wd, idx, valid, low, reduction, rows, dx, dw);
        torc_tensor *loss = NULL;
        if (!st && reduction == TORC_REDUCTION_NONE) loss = torc_reshape(rows, target->ndim, target->shape);
        else if (!st) {
            loss = torc_sum(rows, TORC_ALL_DIMS, false);
            if (loss && reduction == TORC_REDUCTION_MEAN)  // over the targets not ignored: all ignored is nan
                loss = torc_div(loss, torc_to_dtype(torc_sum(valid, TORC_ALL_DIMS, false), ldt));
        }
        torc_no_grad_end();
        r = loss;
        if (loss && (need_x || need_w)) {
            // loss + (s - s.detach()), s = sum(x * dx) + sum(W * dW): the value is the loss, the
            // gradient g * dx and g * dW (see the top of the file).
            torc_tensor *s = need_x ? torc_sum(torc_mul(x, torc_reshape(dx, x->ndim, x->shape)), TORC_ALL_DIMS, false) : NULL;
            torc_tensor *sw = need_w ? torc_sum(torc_mul(wn, dw), TORC_ALL_DIMS, false) : NULL;
            s = s && sw ? torc_add(s, sw) : s ? s : sw;
            r = s ? torc_add(loss, torc_to_dtype(torc_sub(s, torc_detach(s)), ldt)) : NULL;
        }
    }
    r = torc_keep(r);
    torc_scope_pop();
    return r;
}
