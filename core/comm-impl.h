// core/comm-impl.h — what core/ddp.c uses of core/comm.c beyond the public collectives.
#ifndef TORC_COMM_IMPL_H
#define TORC_COMM_IMPL_H

#include "torc/torc.h"

// CLOCK_MONOTONIC in seconds.
double torc__now(void);
// torc_dist_wait that also says when the collective started and finished (the plugin's time).
torc_status torc__dist_wait_timed(torc_work *work, double *started, double *finished);

// torc_dist_check_same with the device its tensors go on (NULL: one the plugin serves) and the
// caller's name before the message (NULL: none).
torc_status torc__dist_check_same(torc_device *dev, const char *what, int n, const char *const *names,
                                  const char *const *values);

// fp8 autocast's delayed scaling under data parallel (core/autocast.c): the parameters whose
// amax history torc_ddp_finish commits once a step (on: from now on; off: back to a row a
// forward); whether a parameter has fp8 state; the current step's amax row (3,) (a registered
// view, NULL without state); and the commit of the ranks' reduced row (state made when missing).
torc_status torc__fp8_drive(int n, torc_tensor *const *params, bool on);
bool torc__fp8_has_state(const torc_tensor *param);
torc_tensor *torc__fp8_step_amax(const torc_tensor *param);
torc_status torc__fp8_commit(torc_tensor *param, const torc_tensor *amax);

#endif
