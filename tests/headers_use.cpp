// tests/headers_use.cpp — what a C++ plugin writes with torc's public headers, compiled by
// tests/headers.sh as C++11: the macros expand to valid C++ (declarations alone do not show it).
#include <torc/backend.h>
#include <torc/comm.h>
#include <torc/optim.h>
#include <torc/philox.h>
#include <torc/plugin_error.h>
#include <torc/torc.h>

TORC_PLUGIN_ERROR_DEFINE(cxx)

namespace {
const char *const op_names[] = {
#define NAME(ID, name, minor) name,
    TORC_OP_LIST(NAME)
#undef NAME
};
static_assert(sizeof op_names / sizeof *op_names == TORC_OP_COUNT, "every opcode named");

int run(void *, int, const torc_op *op) {
    int in_lo, in_hi, out_lo, out_hi;
    torc_op_counts(op, &in_lo, &in_hi, &out_lo, &out_hi);
    if (!TORC_STRUCT_HAS(op, torc_op, params)) return cxx_error(TORC_ERR_INVALID_ARG, "short op (%u bytes)", op->struct_size);
    const double tol = TORC_FP8_MMA_SUM_TOL * torc_abi_dtype_size(op->out[0].dtype);
    const float h = torc_f16_to_f32(torc_f32_to_f16(1.5f)) + (float)torc_philox_normal(1, 2, 3);
    return tol > 0 && h > 0 ? TORC_OK : cxx_error(TORC_ERR_BACKEND, "%s: %g", op_names[0], tol);
}

int step(const torc_optim_host *host, const torc_optim_group *, int, torc_tensor *const *params,
         torc_tensor *const *, torc_tensor **, const int64_t *) {
    if (!TORC_OPTIM_HOST_HAS(host, adam_step_)) return host->error(TORC_ERR_BACKEND, "needs optimizer ABI 1.2");
    return host->fill_(params[0], 0.0);
}

// C++11 has no designated initializers: a vtable is value-initialised (zeros), then filled.
torc_backend_vtable backend_vtable() {
    torc_backend_vtable v = torc_backend_vtable();
    v.abi_version = TORC_BACKEND_ABI_VERSION;
    v.struct_size = sizeof v;
    v.name = "cxx";
    v.run = run;
    v.last_error = cxx_last_error;
    return v;
}

torc_optim_vtable optim_vtable() {
    torc_optim_vtable v = torc_optim_vtable();
    v.abi_version = TORC_OPTIM_ABI_VERSION;
    v.struct_size = sizeof v;
    v.name = "cxx";
    v.step = step;
    return v;
}
}  // namespace

extern "C" TORC_API const torc_backend_vtable *torc_backend_entry(uint32_t) {
    static const torc_backend_vtable vt = backend_vtable();
    return &vt;
}

extern "C" TORC_API const torc_optim_vtable *torc_optim_entry(uint32_t) {
    static const torc_optim_vtable vt = optim_vtable();
    return &vt;
}
