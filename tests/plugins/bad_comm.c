// tests/plugins/bad_comm.c — comm plugins the loader must refuse (built as
// libtorc_comm_badmajor.so with -DBAD_MAJOR, libtorc_comm_badsize.so with -DBAD_SIZE,
// libtorc_comm_badname.so with -DBAD_NAME and libtorc_comm_badmember.so with -DBAD_MEMBER): a
// future ABI major, a truncated vtable, a vtable naming another plugin, one without its members.
#include "torc/comm.h"

static const torc_comm_vtable vt = {
#if defined(BAD_MAJOR)
    .abi_version = (2u << 16) | 0u, .struct_size = sizeof(torc_comm_vtable), .name = "badmajor",
#elif defined(BAD_SIZE)
    .abi_version = TORC_COMM_ABI_VERSION, .struct_size = 64, .name = "badsize",
#elif defined(BAD_MEMBER)
    .abi_version = TORC_COMM_ABI_VERSION, .struct_size = sizeof(torc_comm_vtable), .name = "badmember",
#else
    .abi_version = TORC_COMM_ABI_VERSION, .struct_size = sizeof(torc_comm_vtable), .name = "mpi",
#endif
};

TORC_API const torc_comm_vtable *torc_comm_entry(uint32_t host_abi_version) {
    (void)host_abi_version;
    return &vt;
}
