// backends/cpu_onednn/boundary.h — every oneDNN call that can fail goes through boundary.cpp,
// which catches what libdnnl throws (std::bad_alloc when memory runs out, anything else) and
// returns it as a dnnl status: a C++ exception must never unwind into torc's C, where nothing
// catches it and the process ends in std::terminate. Included by onednn-impl.h right after
// <oneapi/dnnl/dnnl.h>; the #defines below send the backend's calls to the wrappers, so no call
// site changes. A new dnnl call the backend makes goes in both lists: tests/onednn_boundary.sh
// fails when a C file of the backend calls a dnnl_* function directly that is not in its short
// list of calls that neither allocate nor throw.
#ifndef TORC_ONEDNN_BOUNDARY_H
#define TORC_ONEDNN_BOUNDARY_H

#include <oneapi/dnnl/dnnl.h>

// X(name, parameters, arguments) for each wrapped call (all return dnnl_status_t).
#define ONEDNN_BOUNDARY_CALLS(X)                                                                                 \
    X(dnnl_engine_create, (dnnl_engine_t * engine, dnnl_engine_kind_t kind, size_t index), (engine, kind, index)) \
    X(dnnl_engine_destroy, (dnnl_engine_t engine), (engine))                                                     \
    X(dnnl_stream_create, (dnnl_stream_t * stream, dnnl_engine_t engine, unsigned flags), (stream, engine, flags)) \
    X(dnnl_stream_wait, (dnnl_stream_t stream), (stream))                                                        \
    X(dnnl_stream_destroy, (dnnl_stream_t stream), (stream))                                                     \
    X(dnnl_primitive_attr_create, (dnnl_primitive_attr_t * attr), (attr))                                        \
    X(dnnl_primitive_attr_destroy, (dnnl_primitive_attr_t attr), (attr))                                         \
    X(dnnl_primitive_attr_set_scales, (dnnl_primitive_attr_t attr, int arg, dnnl_dim_t count, int mask,          \
                                       const float *scales), (attr, arg, count, mask, scales))                     \
    X(dnnl_primitive_attr_set_scratchpad_mode, (dnnl_primitive_attr_t attr, dnnl_scratchpad_mode_t mode),        \
      (attr, mode))                                                                                                \
    X(dnnl_primitive_attr_set_post_ops, (dnnl_primitive_attr_t attr, const_dnnl_post_ops_t post_ops),            \
      (attr, post_ops))                                                                                            \
    X(dnnl_post_ops_create, (dnnl_post_ops_t * post_ops), (post_ops))                                            \
    X(dnnl_post_ops_append_eltwise, (dnnl_post_ops_t post_ops, float scale, dnnl_alg_kind_t alg, float alpha,    \
                                     float beta), (post_ops, scale, alg, alpha, beta))                             \
    X(dnnl_post_ops_destroy, (dnnl_post_ops_t post_ops), (post_ops))                                             \
    X(dnnl_memory_desc_init_by_strides, (dnnl_memory_desc_t * md, int ndims, const dnnl_dims_t dims,             \
                                         dnnl_data_type_t dt, const dnnl_dims_t strides), (md, ndims, dims, dt, strides)) \
    X(dnnl_memory_create, (dnnl_memory_t * memory, const dnnl_memory_desc_t *md, dnnl_engine_t engine,           \
                           void *handle), (memory, md, engine, handle))                                            \
    X(dnnl_memory_set_data_handle, (dnnl_memory_t memory, void *handle), (memory, handle))                       \
    X(dnnl_memory_destroy, (dnnl_memory_t memory), (memory))                                                     \
    X(dnnl_binary_desc_init, (dnnl_binary_desc_t * d, dnnl_alg_kind_t alg, const dnnl_memory_desc_t *src0,       \
                              const dnnl_memory_desc_t *src1, const dnnl_memory_desc_t *dst), (d, alg, src0, src1, dst)) \
    X(dnnl_matmul_desc_init, (dnnl_matmul_desc_t * d, const dnnl_memory_desc_t *src,                             \
                              const dnnl_memory_desc_t *weights, const dnnl_memory_desc_t *bias,                   \
                              const dnnl_memory_desc_t *dst), (d, src, weights, bias, dst))                        \
    X(dnnl_reduction_desc_init, (dnnl_reduction_desc_t * d, dnnl_alg_kind_t alg, const dnnl_memory_desc_t *src,  \
                                 const dnnl_memory_desc_t *dst, float p, float eps), (d, alg, src, dst, p, eps))   \
    X(dnnl_softmax_v2_forward_desc_init, (dnnl_softmax_v2_desc_t * d, dnnl_prop_kind_t prop, dnnl_alg_kind_t alg, \
                                          const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst, int axis), \
      (d, prop, alg, src, dst, axis))                                                                              \
    X(dnnl_primitive_desc_create, (dnnl_primitive_desc_t * pd, const_dnnl_op_desc_t op_desc,                     \
                                   const_dnnl_primitive_attr_t attr, dnnl_engine_t engine,                         \
                                   const_dnnl_primitive_desc_t hint), (pd, op_desc, attr, engine, hint))           \
    X(dnnl_reorder_primitive_desc_create, (dnnl_primitive_desc_t * pd, const dnnl_memory_desc_t *src_md,         \
                                           dnnl_engine_t src_engine, const dnnl_memory_desc_t *dst_md,             \
                                           dnnl_engine_t dst_engine, const_dnnl_primitive_attr_t attr),            \
      (pd, src_md, src_engine, dst_md, dst_engine, attr))                                                          \
    X(dnnl_primitive_desc_query, (const_dnnl_primitive_desc_t pd, dnnl_query_t what, int index, void *result),   \
      (pd, what, index, result))                                                                                   \
    X(dnnl_primitive_desc_destroy, (dnnl_primitive_desc_t pd), (pd))                                             \
    X(dnnl_primitive_create, (dnnl_primitive_t * primitive, const_dnnl_primitive_desc_t pd), (primitive, pd))    \
    X(dnnl_primitive_execute, (const_dnnl_primitive_t primitive, dnnl_stream_t stream, int nargs,                \
                               const dnnl_exec_arg_t *args), (primitive, stream, nargs, args))                     \
    X(dnnl_primitive_destroy, (dnnl_primitive_t primitive), (primitive))                                         \
    X(dnnl_sgemm, (char transa, char transb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K, float alpha,              \
                   const float *A, dnnl_dim_t lda, const float *B, dnnl_dim_t ldb, float beta, float *C,           \
                   dnnl_dim_t ldc), (transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))

#define ONEDNN_BOUNDARY_DECLARE(name, params, args) dnnl_status_t onednn_safe_##name params;
#ifdef __cplusplus
extern "C" {
#endif
ONEDNN_BOUNDARY_CALLS(ONEDNN_BOUNDARY_DECLARE)
#ifdef __cplusplus
}
#endif

#ifndef ONEDNN_BOUNDARY_IMPL
#define dnnl_engine_create onednn_safe_dnnl_engine_create
#define dnnl_engine_destroy onednn_safe_dnnl_engine_destroy
#define dnnl_stream_create onednn_safe_dnnl_stream_create
#define dnnl_stream_wait onednn_safe_dnnl_stream_wait
#define dnnl_stream_destroy onednn_safe_dnnl_stream_destroy
#define dnnl_primitive_attr_create onednn_safe_dnnl_primitive_attr_create
#define dnnl_primitive_attr_destroy onednn_safe_dnnl_primitive_attr_destroy
#define dnnl_primitive_attr_set_scales onednn_safe_dnnl_primitive_attr_set_scales
#define dnnl_primitive_attr_set_scratchpad_mode onednn_safe_dnnl_primitive_attr_set_scratchpad_mode
#define dnnl_primitive_attr_set_post_ops onednn_safe_dnnl_primitive_attr_set_post_ops
#define dnnl_post_ops_create onednn_safe_dnnl_post_ops_create
#define dnnl_post_ops_append_eltwise onednn_safe_dnnl_post_ops_append_eltwise
#define dnnl_post_ops_destroy onednn_safe_dnnl_post_ops_destroy
#define dnnl_memory_desc_init_by_strides onednn_safe_dnnl_memory_desc_init_by_strides
#define dnnl_memory_create onednn_safe_dnnl_memory_create
#define dnnl_memory_set_data_handle onednn_safe_dnnl_memory_set_data_handle
#define dnnl_memory_destroy onednn_safe_dnnl_memory_destroy
#define dnnl_binary_desc_init onednn_safe_dnnl_binary_desc_init
#define dnnl_matmul_desc_init onednn_safe_dnnl_matmul_desc_init
#define dnnl_reduction_desc_init onednn_safe_dnnl_reduction_desc_init
#define dnnl_softmax_v2_forward_desc_init onednn_safe_dnnl_softmax_v2_forward_desc_init
#define dnnl_primitive_desc_create onednn_safe_dnnl_primitive_desc_create
#define dnnl_reorder_primitive_desc_create onednn_safe_dnnl_reorder_primitive_desc_create
#define dnnl_primitive_desc_query onednn_safe_dnnl_primitive_desc_query
#define dnnl_primitive_desc_destroy onednn_safe_dnnl_primitive_desc_destroy
#define dnnl_primitive_create onednn_safe_dnnl_primitive_create
#define dnnl_primitive_execute onednn_safe_dnnl_primitive_execute
#define dnnl_primitive_destroy onednn_safe_dnnl_primitive_destroy
#define dnnl_sgemm onednn_safe_dnnl_sgemm
#endif

#endif
