// core/comm-impl.h — what core/ddp.c uses of core/comm.c beyond the public collectives.
#ifndef TORC_COMM_IMPL_H
#define TORC_COMM_IMPL_H

#include "torc/torc.h"

// CLOCK_MONOTONIC in seconds.
double torc__now(void);
// torc_dist_wait that also says when the collective started and finished (the plugin's time).
torc_status torc__dist_wait_timed(torc_work *work, double *started, double *finished);

#endif
