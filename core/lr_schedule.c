// core/lr_schedule.c — learning-rate schedules for a training loop: nanoGPT's linear warmup then
// cosine decay to a floor (train.py's get_lr), in the same double arithmetic.
#include <math.h>

#include "torc-impl.h"

double torc_lr_cosine_warmup(int64_t step, double max_lr, double min_lr, int64_t warmup_steps, int64_t max_steps) {
    if (step < 0 || warmup_steps < 0) {
        torc__error(TORC_ERR_INVALID_ARG, "lr_cosine_warmup: step (%lld) and warmup_steps (%lld) must be >= 0",
                    (long long)step, (long long)warmup_steps);
        return NAN;
    }
    // 1) linear warmup: (step + 1) / (warmup + 1) of max_lr, so step 0 does not get lr 0
    if (step < warmup_steps) return max_lr * (double)(step + 1) / (double)(warmup_steps + 1);
    // 2) after the decay: the floor (also when there is nothing to decay over)
    if (step > max_steps || max_steps <= warmup_steps) return min_lr;
    // 3) in between, cosine from max_lr down to min_lr (pi as Python's math.pi)
    const double decay_ratio = (double)(step - warmup_steps) / (double)(max_steps - warmup_steps);
    const double coeff = 0.5 * (1.0 + cos(3.141592653589793 * decay_ratio));
    return min_lr + coeff * (max_lr - min_lr);
}
