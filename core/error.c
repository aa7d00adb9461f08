// core/error.c — the thread-local last error: a status code and a PyTorch-like message.
// Library code reports user mistakes here and returns; it never prints or aborts.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

// The shortest "%.*g" that reads back as v, with ".0" when it looks like an integer; Python
// switches to an exponent from 1e16 on, %g from 10^precision on (only integers of 17 significant
// digits or more differ: 1e16 is "1e+16" in both).
const char *torc__py_float(double v, char *buf, size_t n) {
    if (isnan(v)) return snprintf(buf, n, "nan"), buf;
    if (isinf(v)) return snprintf(buf, n, v < 0 ? "-inf" : "inf"), buf;
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (fabs(v) < 1e16 && strchr(buf, 'e') && v == floor(v)) snprintf(buf, n, "%.1f", v);  // 100000.0, not 1e+05
    if (!strpbrk(buf, ".en")) {
        size_t len = strlen(buf);
        if (len + 2 < n) memcpy(buf + len, ".0", 3);
    }
    return buf;
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
