// core/loss.c — losses with mean reduction: mse_loss, nll_loss and cross_entropy over integer
// class indices. They are composed of differentiable ops, so their backward is automatic.
#include "torc-impl.h"

torc_tensor *torc_mse_loss(const torc_tensor *input, const torc_tensor *target) {
    if (!input || !target) return TORC_NULL_ARG_FAIL("tensor is NULL");
    TORC__AUTOCAST_F32_2(-1, input, target, torc_mse_loss(input, target));  // autocast.c: losses in f32
    torc_scope_push();
    torc_tensor *r = torc_keep(torc_mean(torc_square(torc_sub(input, target)), TORC_ALL_DIMS, false));
    torc_scope_pop();
    return r;
}

// Checks nll_loss's operands (PyTorch's messages) and that every class index is in [0, C).
static bool check_nll(const torc_tensor *logp, const torc_tensor *target) {
    if (target->dtype != TORC_DTYPE_I64 && target->dtype != TORC_DTYPE_U8) {
        torc__error(TORC_ERR_DTYPE, "expected target dtype to be Long or Byte, but got %s",
                    torc__dtype_c10_name(target->dtype));
        return false;
    }
    if (logp->ndim < 1 || logp->ndim > 2) {
        torc__error(TORC_ERR_SHAPE, "nll_loss: expected input of 1 or 2 dimensions (got %d); torc has no spatial "
                                    "(N, C, d1, ...) losses", logp->ndim);
        return false;
    }
    if (target->ndim > 1) {
        torc__error(TORC_ERR_SHAPE, "0D or 1D target tensor expected, multi-target not supported");
        return false;
    }
    const int64_t batch = logp->ndim == 2 ? logp->shape[0] : 1, tbatch = target->ndim ? target->shape[0] : 1;
    if (logp->ndim == 1 ? target->ndim != 0 : batch != tbatch) {
        torc__error(TORC_ERR_SHAPE, "Expected input batch_size (%lld) to match target batch_size (%lld).",
                    (long long)batch, (long long)tbatch);
        return false;
    }
    if (torc_numel(target) == 0) return true;
    const int64_t classes = logp->shape[logp->ndim - 1];
    int64_t lo = 0, hi = 0;
    torc_scope_push();  // one sync: the smallest and largest index
    torc_tensor *mn = torc_amin(target, TORC_ALL_DIMS, false), *mx = torc_amax(target, TORC_ALL_DIMS, false);
    torc_status st = mn && mx ? torc_item_i64(mn, &lo) : torc_last_status();
    if (!st) st = torc_item_i64(mx, &hi);
    torc_scope_pop();
    if (st) return false;
    if (lo < 0 || hi >= classes) {
        torc__error(TORC_ERR_INDEX, "Target %lld is out of bounds.", (long long)(lo < 0 ? lo : hi));
        return false;
    }
    return true;
}

torc_tensor *torc_nll_loss(const torc_tensor *log_probs, const torc_tensor *target) {
    if (!log_probs || !target) return TORC_NULL_ARG_FAIL("tensor is NULL");
    TORC__AUTOCAST_F32(-1, log_probs, torc_nll_loss(log_probs, target));  // autocast.c (target stays integer)
    if (!check_nll(log_probs, target)) return NULL;
    torc_scope_push();
    // -mean(log_probs[i, target[i]]): a gather along the class dim keeps the labels integer.
    torc_tensor *idx = target->dtype == TORC_DTYPE_I64 ? (torc_tensor *)target
                                                        : torc_to_dtype((torc_tensor *)target, TORC_DTYPE_I64);
    idx = idx ? torc_unsqueeze(idx, log_probs->ndim == 2 ? 1 : 0) : NULL;
    torc_tensor *picked = idx ? torc_gather(log_probs, log_probs->ndim - 1, idx) : NULL;
    torc_tensor *r = picked ? torc_keep(torc_neg(torc_mean(picked, TORC_ALL_DIMS, false))) : NULL;
    torc_scope_pop();
    return r;
}

torc_tensor *torc_cross_entropy(const torc_tensor *logits, const torc_tensor *target) {
    if (!logits || !target) return TORC_NULL_ARG_FAIL("tensor is NULL");
    TORC__AUTOCAST_F32(-1, logits, torc_cross_entropy(logits, target));  // autocast.c (target stays integer)
    if (logits->ndim < 1 || logits->ndim > 2)
        return TORC_FAIL_NULL(TORC_ERR_SHAPE, "cross_entropy: expected logits of 1 or 2 dimensions (got %d)", logits->ndim);
    torc_scope_push();
    torc_tensor *lp = torc_log_softmax(logits, logits->ndim - 1);
    torc_tensor *r = lp ? torc_keep(torc_nll_loss(lp, target)) : NULL;
    torc_scope_pop();
    return r;
}
