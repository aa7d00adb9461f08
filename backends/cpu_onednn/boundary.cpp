// backends/cpu_onednn/boundary.cpp — the C++ side of boundary.h: one wrapper per oneDNN call,
// catching everything libdnnl throws so that it comes back to the backend's C as a status.
// What this cannot catch: an exception thrown on an OpenMP worker thread inside a parallel
// region of libdnnl (it ends the process there), and libdnnl's own unchecked allocations (oneDNN
// 2.6 constructs its C API objects in memory that can be NULL; see the README's "Out of memory").
#define ONEDNN_BOUNDARY_IMPL
#include "boundary.h"

#include <new>

#define ONEDNN_BOUNDARY_DEFINE(name, params, args)              \
    extern "C" dnnl_status_t onednn_safe_##name params {         \
        try {                                                    \
            return ::name args;                                  \
        } catch (const std::bad_alloc &) {                       \
            return dnnl_out_of_memory;                           \
        } catch (...) {                                          \
            return dnnl_runtime_error;                           \
        }                                                        \
    }
ONEDNN_BOUNDARY_CALLS(ONEDNN_BOUNDARY_DEFINE)
