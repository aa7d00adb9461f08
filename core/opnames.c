// core/opnames.c — the name of every opcode, for errors, FLOP reports and torc-xcheck, and the
// backend ABI minor each appeared in; both generated from TORC_OP_LIST (backend.h).
#include "torc-impl.h"

static const char *const g_op_names[] = {
#define NAME(ID, name, minor) [TORC_OP_##ID] = name,
    TORC_OP_LIST(NAME)
#undef NAME
};
_Static_assert(sizeof g_op_names / sizeof g_op_names[0] == TORC_OP_COUNT, "an opcode without a name");

const uint8_t torc_backend_op_minor[TORC_OP_COUNT] = {
#define MINOR(ID, name, minor) [TORC_OP_##ID] = minor,
    TORC_OP_LIST(MINOR)
#undef MINOR
};

const char *torc_op_name(torc_opcode op) {
    return (unsigned)op < TORC_OP_COUNT && g_op_names[op] ? g_op_names[op] : "unknown";
}
