// core/loss.c — losses: mse_loss, and nll_loss / cross_entropy over class indices (any number of
// spatial dims, ignore_index, reduction, label smoothing) or class probabilities, as PyTorch's
// nll_loss_nd and cross_entropy compose them. Every piece is a differentiable op, so the backward
// is automatic.
#include <math.h>
#include <string.h>

#include "torc-impl.h"

torc_tensor *torc_mse_loss(const torc_tensor *input, const torc_tensor *target) {
    if (!input || !target) return TORC_NULL_ARG_FAIL("tensor is NULL");
    TORC__AUTOCAST_F32_2(-1, input, target, torc_mse_loss(input, target));  // autocast.c: losses in f32
    torc_scope_push();
    torc_tensor *r = torc_keep(torc_mean(torc_square(torc_sub(input, target)), TORC_ALL_DIMS, false));
    torc_scope_pop();
    return r;
}

static bool reduction_ok(torc_reduction r) {
    if (r == TORC_REDUCTION_NONE || r == TORC_REDUCTION_MEAN || r == TORC_REDUCTION_SUM) return true;
    torc__error(TORC_ERR_INVALID_ARG, "%d is not a valid value for reduction", (int)r);
    return false;
}

// nll_loss_nd's shape checks (PyTorch's messages): input (C) with target () or (1); (N, C) with
// (N); (N, C, d1, ..., dk) with (N, d1, ..., dk).
static bool check_nll_shapes(const torc_tensor *in, const torc_tensor *target) {
    char b1[TORC_SHAPE_STR_MAX], b2[TORC_SHAPE_STR_MAX];
    if (in->ndim < 1) return torc__error(TORC_ERR_SHAPE, "Expected 1 or more dimensions (got %d)", in->ndim), false;
    if (in->ndim != 1 && (target->ndim < 1 || in->shape[0] != target->shape[0])) {
        torc__error(TORC_ERR_SHAPE, "Expected input batch_size (%lld) to match target batch_size (%lld).",
                    (long long)in->shape[0], (long long)(target->ndim ? target->shape[0] : 1));
        return false;
    }
    if (in->ndim <= 2) {
        if (target->ndim > 1)
            return torc__error(TORC_ERR_SHAPE, "0D or 1D target tensor expected, multi-target not supported"), false;
        if (in->ndim == 1 && target->ndim == 1 && target->shape[0] != 1) {
            torc__error(TORC_ERR_SHAPE, "For 1D input, 1D target must have size 1, but got target size: %lld",
                        (long long)target->shape[0]);
            return false;
        }
        return true;
    }
    if (in->ndim == 4) {  // nll_loss2d's own wording
        if (target->ndim != 3) {
            torc__error(TORC_ERR_SHAPE, "only batches of spatial targets supported (3D tensors) but got targets of "
                                        "dimension: %d", target->ndim);
            return false;
        }
        if (in->shape[2] != target->shape[1] || in->shape[3] != target->shape[2]) {
            torc__error(TORC_ERR_SHAPE, "size mismatch (got input: %s , target: %s",
                        torc__shape_str(in->ndim, in->shape, b1, sizeof b1),
                        torc__shape_str(target->ndim, target->shape, b2, sizeof b2));
            return false;
        }
        return true;
    }
    bool ok = target->ndim == in->ndim - 1;
    for (int d = 2; ok && d < in->ndim; d++) ok = target->shape[d - 1] == in->shape[d];
    if (!ok) {
        int64_t want[TORC_MAX_DIMS];
        want[0] = in->shape[0];
        for (int d = 2; d < in->ndim; d++) want[d - 1] = in->shape[d];
        torc__error(TORC_ERR_SHAPE, "Expected target size %s, got %s", torc__shape_str(in->ndim - 1, want, b1, sizeof b1),
                    torc__shape_str(target->ndim, target->shape, b2, sizeof b2));
    }
    return ok;
}

// -log_probs[target] per target element with ignored targets giving 0, reduced as asked; idx is
// the target as int64, valid its "!= ignore_index" mask. Runs in the caller's scope.
static torc_tensor *nll_body(const torc_tensor *lp, torc_tensor *idx, torc_tensor *valid, torc_reduction red) {
    const int cdim = lp->ndim == 1 ? 0 : 1;
    const int64_t C = lp->shape[cdim];
    // Targets outside [0, C) that are not ignored: "Target 5 is out of bounds." naming the first in
    // row-major order, as PyTorch's CPU loop finds it (one sync for the count, one more on error).
    torc_tensor *bad = torc_logical_and(valid, torc_logical_or(torc_lt_scalar(idx, torc_s(0)),
                                                                torc_ge_scalar(idx, torc_s(C))));
    torc_tensor *nbad = bad ? torc_sum(bad, TORC_ALL_DIMS, false) : NULL;
    int64_t count = 0;
    if (!nbad || torc_item_i64(nbad, &count)) return NULL;
    if (count) {
        torc_tensor *flat = torc_reshape(idx, 1, (int64_t[]){-1});
        torc_tensor *first = torc_argmax(torc_to_dtype(bad, TORC_DTYPE_I32), TORC_DIM_NONE, false);
        int64_t at = 0, value = 0;
        if (!first || torc_item_i64(first, &at)) return NULL;
        torc_tensor *v = flat ? torc_select(flat, 0, at) : NULL;
        if (!v || torc_item_i64(v, &value)) return NULL;
        return TORC_FAIL_NULL(TORC_ERR_INDEX, "Target %lld is out of bounds.", (long long)value);
    }
    torc_tensor *zero_i = torc__register(torc__scalar_on(idx->device, 0.0, TORC_DTYPE_I64));
    torc_tensor *zero = torc__register(torc__scalar_on(lp->device, 0.0, lp->dtype));
    torc_tensor *safe = zero_i ? torc_where(valid, idx, zero_i) : NULL;  // ignored targets pick class 0, then 0
    torc_tensor *picked = safe ? torc_gather(lp, cdim, torc_unsqueeze(safe, cdim)) : NULL;
    picked = picked ? torc_squeeze(picked, cdim) : NULL;
    torc_tensor *loss = picked && zero ? torc_where(valid, torc_neg(picked), zero) : NULL;
    if (!loss || red == TORC_REDUCTION_NONE) return loss;
    torc_tensor *sum = torc_sum(loss, TORC_ALL_DIMS, false);
    if (!sum || red == TORC_REDUCTION_SUM) return sum;
    // mean over the targets not ignored (PyTorch's total_weight): all ignored is 0 / 0 = nan
    torc_tensor *n = torc_to_dtype(torc_sum(valid, TORC_ALL_DIMS, false), lp->dtype);
    return n ? torc_div(sum, n) : NULL;
}

// The target as int64 (1-D input with a (1) target: its one element) and its not-ignored mask.
static bool index_target(const torc_tensor *target, int64_t ignore_index, torc_tensor **idx, torc_tensor **valid) {
    if (target->dtype != TORC_DTYPE_I64 && target->dtype != TORC_DTYPE_U8) {
        torc__error(TORC_ERR_DTYPE, "expected target dtype to be Long or Byte, but got %s",
                    torc__dtype_c10_name(target->dtype));
        return false;
    }
    *idx = target->dtype == TORC_DTYPE_I64 ? (torc_tensor *)target : torc_to_dtype((torc_tensor *)target, TORC_DTYPE_I64);
    *valid = *idx ? torc_ne_scalar(*idx, torc_s(ignore_index)) : NULL;
    return *valid != NULL;
}

// The log-probabilities as nll_body wants them: a 1-D input with a 1-D target of one element is
// a batch of one.
static const torc_tensor *batch_of_one(const torc_tensor *lp, const torc_tensor *target) {
    return lp->ndim == 1 && target->ndim == 1 ? torc_unsqueeze((torc_tensor *)lp, 0) : lp;
}

torc_tensor *torc_nll_loss_ex(const torc_tensor *log_probs, const torc_tensor *target, int64_t ignore_index,
                              torc_reduction reduction) {
    if (!log_probs || !target) return TORC_NULL_ARG_FAIL("tensor is NULL");
    TORC__AUTOCAST_F32(-1, log_probs, torc_nll_loss_ex(log_probs, target, ignore_index, reduction));  // autocast.c
    if (!reduction_ok(reduction) || !check_nll_shapes(log_probs, target) || !torc__same_device(log_probs, target))
        return NULL;
    torc_scope_push();
    torc_tensor *idx, *valid, *r = NULL;
    if (index_target(target, ignore_index, &idx, &valid)) {
        const torc_tensor *lp = batch_of_one(log_probs, target);
        r = lp ? nll_body(lp, idx, valid, reduction) : NULL;
    }
    r = torc_keep(r);
    torc_scope_pop();
    return r;
}

torc_tensor *torc_nll_loss(const torc_tensor *log_probs, const torc_tensor *target) {
    return torc_nll_loss_ex(log_probs, target, TORC_IGNORE_INDEX_DEFAULT, TORC_REDUCTION_MEAN);
}

// Soft targets (target has the input's shape): -sum(target' * log_softmax) over the class dim,
// target' = target * (1 - s) + s / C for label smoothing s > 0; mean divides by numel / C.
static torc_tensor *ce_probs(const torc_tensor *lp, const torc_tensor *target, torc_reduction red, double smoothing) {
    const int cdim = lp->ndim == 1 ? 0 : 1;
    const int64_t C = lp->shape[cdim];
    torc_tensor *t = (torc_tensor *)target;
    if (smoothing > 0) t = torc_add_scalar(torc_mul_scalar(t, torc_s(1.0 - smoothing)), torc_s(smoothing / (double)C));
    torc_tensor *prod = t ? torc_mul(lp, t) : NULL;
    if (!prod) return NULL;
    if (red == TORC_REDUCTION_NONE) return torc_neg(torc_sum(prod, TORC_DIMS(cdim), false));
    torc_tensor *s = torc_neg(torc_sum(prod, TORC_ALL_DIMS, false));
    if (!s || red == TORC_REDUCTION_SUM) return s;
    const int64_t n = torc_numel(lp);
    if (n == 0) return torc_mul_scalar(s, torc_s(NAN));  // PyTorch: .fill_(NAN)
    return torc_div_scalar(s, torc_s(n / C));
}

torc_tensor *torc_cross_entropy_ex(const torc_tensor *logits, const torc_tensor *target, int64_t ignore_index,
                                   torc_reduction reduction, double label_smoothing) {
    if (!logits || !target) return TORC_NULL_ARG_FAIL("tensor is NULL");
    TORC__AUTOCAST_F32(-1, logits, torc_cross_entropy_ex(logits, target, ignore_index, reduction, label_smoothing));
    if (!reduction_ok(reduction) || !torc__same_device(logits, target)) return NULL;
    const bool probs = logits->ndim == target->ndim &&
                       !memcmp(logits->shape, target->shape, (size_t)logits->ndim * sizeof *logits->shape);
    if (probs) {
        if (!torc_dtype_is_floating(target->dtype))
            return TORC_FAIL_NULL(TORC_ERR_DTYPE, "Expected floating point type for target with class probabilities, "
                                                  "got %s", torc__dtype_c10_name(target->dtype));
        if (ignore_index >= 0)
            return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "ignore_index is not supported for floating point target");
        if (logits->ndim == 0)
            return TORC_FAIL_NULL(TORC_ERR_INDEX, "Dimension specified as 0 but tensor has no dimensions");
    } else if (!check_nll_shapes(logits, target)) {
        return NULL;
    }
    if (label_smoothing > 1.0)  // PyTorch checks only above: a negative one means no smoothing
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "label_smoothing must be between 0.0 and 1.0. Got: %g", label_smoothing);
    const int cdim = logits->ndim <= 1 ? 0 : 1;
    torc_scope_push();
    torc_tensor *r = NULL, *idx = NULL, *valid = NULL;
    torc_tensor *lp = torc_log_softmax(logits, cdim);
    if (lp && probs) {
        r = ce_probs(lp, target, reduction, label_smoothing);
    } else if (lp && index_target(target, ignore_index, &idx, &valid)) {
        const torc_tensor *lpb = batch_of_one(lp, target);
        r = lpb ? nll_body(lpb, idx, valid, reduction) : NULL;
        if (r && label_smoothing > 0) {
            // (1 - s) * nll + s / C * smooth, smooth = -sum over classes of log_softmax, 0 where
            // ignored, reduced as nll (mean: over the targets not ignored).
            const int64_t C = logits->shape[cdim];
            torc_tensor *zero = torc__register(torc__scalar_on(lp->device, 0.0, lp->dtype));
            const int bdim = lpb->ndim == 1 ? 0 : 1;
            torc_tensor *smooth = torc_neg(torc_sum(lpb, TORC_DIMS(bdim), false));
            smooth = smooth && zero ? torc_where(valid, smooth, zero) : NULL;
            if (smooth && reduction != TORC_REDUCTION_NONE) smooth = torc_sum(smooth, TORC_ALL_DIMS, false);
            if (smooth && reduction == TORC_REDUCTION_MEAN)
                smooth = torc_div(smooth, torc_to_dtype(torc_sum(valid, TORC_ALL_DIMS, false), lp->dtype));
            r = smooth ? torc_add(torc_mul_scalar(r, torc_s(1.0 - label_smoothing)),
                                  torc_mul_scalar(smooth, torc_s(label_smoothing / (double)C)))
                       : NULL;
        }
    }
    r = torc_keep(r);
    torc_scope_pop();
    return r;
}

torc_tensor *torc_cross_entropy(const torc_tensor *logits, const torc_tensor *target) {
    return torc_cross_entropy_ex(logits, target, TORC_IGNORE_INDEX_DEFAULT, TORC_REDUCTION_MEAN, 0.0);
}
