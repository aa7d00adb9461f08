// core/opnames.c — the name of every opcode, for errors, FLOP reports and torc-xcheck.
// Sized by TORC_OP_COUNT: adding an opcode without its name fails to compile.
#include "torc-impl.h"

static const char *const g_op_names[] = {
    [TORC_OP_FILL] = "fill", [TORC_OP_COPY] = "copy", [TORC_OP_ARANGE] = "arange",
    [TORC_OP_LINSPACE] = "linspace", [TORC_OP_RAND_UNIFORM] = "rand", [TORC_OP_RAND_NORMAL] = "randn",
    [TORC_OP_RAND_INT] = "randint", [TORC_OP_NEG] = "neg", [TORC_OP_ABS] = "abs",
    [TORC_OP_SIGN] = "sign", [TORC_OP_SQRT] = "sqrt", [TORC_OP_RSQRT] = "rsqrt",
    [TORC_OP_SQUARE] = "square", [TORC_OP_RECIPROCAL] = "reciprocal", [TORC_OP_EXP] = "exp",
    [TORC_OP_LOG] = "log", [TORC_OP_SIN] = "sin", [TORC_OP_COS] = "cos", [TORC_OP_TANH] = "tanh",
    [TORC_OP_SIGMOID] = "sigmoid", [TORC_OP_RELU] = "relu", [TORC_OP_GELU] = "gelu",
    [TORC_OP_POW_SCALAR] = "pow_scalar", [TORC_OP_ERF] = "erf", [TORC_OP_ERFINV] = "erfinv",
    [TORC_OP_LOGICAL_NOT] = "logical_not", [TORC_OP_ADD] = "add", [TORC_OP_SUB] = "sub",
    [TORC_OP_MUL] = "mul", [TORC_OP_DIV] = "div", [TORC_OP_POW] = "pow",
    [TORC_OP_MAXIMUM] = "maximum", [TORC_OP_MINIMUM] = "minimum", [TORC_OP_EQ] = "eq",
    [TORC_OP_NE] = "ne", [TORC_OP_LT] = "lt", [TORC_OP_LE] = "le", [TORC_OP_GT] = "gt",
    [TORC_OP_GE] = "ge", [TORC_OP_LOGICAL_AND] = "logical_and", [TORC_OP_LOGICAL_OR] = "logical_or",
    [TORC_OP_WHERE] = "where", [TORC_OP_SUM] = "sum", [TORC_OP_MEAN] = "mean",
    [TORC_OP_PROD] = "prod", [TORC_OP_MAX] = "max", [TORC_OP_MIN] = "min",
    [TORC_OP_ARGMAX] = "argmax", [TORC_OP_ARGMIN] = "argmin", [TORC_OP_VAR] = "var",
    [TORC_OP_STD] = "std", [TORC_OP_NORM] = "norm", [TORC_OP_LOGSUMEXP] = "logsumexp",
    [TORC_OP_SOFTMAX] = "softmax", [TORC_OP_LOG_SOFTMAX] = "log_softmax",
    [TORC_OP_MATMUL] = "matmul", [TORC_OP_INDEX_SELECT] = "index_select",
    [TORC_OP_GATHER] = "gather", [TORC_OP_MASKED_SELECT] = "masked_select",
    [TORC_OP_INDEX_ADD] = "index_add", [TORC_OP_SCATTER_ADD] = "scatter_add",
    [TORC_OP_MASKED_SCATTER] = "masked_scatter", [TORC_OP_TRIU] = "triu", [TORC_OP_TRIL] = "tril",
    [TORC_OP_SCALED_MM] = "scaled_mm", [TORC_OP_ADDCMUL] = "addcmul", [TORC_OP_ADDCDIV] = "addcdiv",
    [TORC_OP_LERP] = "lerp",
};
_Static_assert(sizeof g_op_names / sizeof g_op_names[0] == TORC_OP_COUNT, "an opcode without a name");

const char *torc_op_name(torc_opcode op) {
    return (unsigned)op < TORC_OP_COUNT && g_op_names[op] ? g_op_names[op] : "unknown";
}
