// core/error.c — the thread-local last error: a status code and a PyTorch-like message.
// Library code reports user mistakes here and returns; it never prints or aborts.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "torc-impl.h"

static _Thread_local torc_status tls_status;
static _Thread_local char tls_message[1024];

torc_status torc_last_status(void) { return tls_status; }
const char *torc_last_error(void) { return tls_message; }

void torc_clear_error(void) {
    tls_status = TORC_OK;
    tls_message[0] = '\0';
}

torc_status torc__error(torc_status status, const char *fmt, ...) {
    char buf[sizeof tls_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);  // format first: an argument may be tls_message itself
    va_end(ap);
    memcpy(tls_message, buf, sizeof buf);
    tls_status = status;
    return status;
}

torc_status torc__null_arg(const char *fmt, ...) {
    if (tls_status != TORC_OK) return tls_status;
    char buf[sizeof tls_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return torc__error(TORC_ERR_INVALID_ARG, "%s", buf);
}

const char *torc_status_name(torc_status s) {
    static const char *const names[] = {
        [TORC_OK] = "TORC_OK",
        [TORC_ERR_INVALID_ARG] = "TORC_ERR_INVALID_ARG",
        [TORC_ERR_SHAPE] = "TORC_ERR_SHAPE",
        [TORC_ERR_DTYPE] = "TORC_ERR_DTYPE",
        [TORC_ERR_INDEX] = "TORC_ERR_INDEX",
        [TORC_ERR_OOM] = "TORC_ERR_OOM",
        [TORC_ERR_BACKEND] = "TORC_ERR_BACKEND",
        [TORC_ERR_NOT_SUPPORTED] = "TORC_ERR_NOT_SUPPORTED",
        [TORC_ERR_IO] = "TORC_ERR_IO",
        [TORC_ERR_AUTOGRAD] = "TORC_ERR_AUTOGRAD",
        [TORC_ERR_RUNTIME] = "TORC_ERR_RUNTIME",
    };
    _Static_assert(sizeof names / sizeof names[0] == TORC_STATUS_COUNT, "a status without a name");
    return (unsigned)s < TORC_STATUS_COUNT ? names[s] : "TORC_ERR_UNKNOWN";
}
