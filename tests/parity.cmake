# The ops_binary suite's "parity" cases (tests/golden/ops_parity.txt: operands PyTorch's kernels
# read in another dtype) also on the oneDNN backend with every op sent to it (no size threshold).
if(TORC_WITH_ONEDNN)
  add_test(NAME ops_binary_parity_onednn COMMAND test_ops_binary)
  set_tests_properties(ops_binary_parity_onednn PROPERTIES LABELS "unit"
    ENVIRONMENT "CK_RUN_CASE=parity;TORC_BACKEND=onednn;TORC_ONEDNN_MIN_WORK=0;TORC_TEST_DATA=${CMAKE_CURRENT_SOURCE_DIR}/golden;TORC_BUILD_DIR=${CMAKE_BINARY_DIR};TORC_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()

# The CUDA backend's elementwise code, compiled for the host (no GPU needed), on every f16/bf16
# value by a scalar against PyTorch's bits. Only when the backend is built.
if(TORC_WITH_CUDA AND TARGET torc_cuda)
  find_package(CUDAToolkit REQUIRED)
  add_executable(cuda_opmath_test ${CMAKE_CURRENT_SOURCE_DIR}/cuda_opmath_test.c)
  target_include_directories(cuda_opmath_test PRIVATE ${PROJECT_SOURCE_DIR}/core/include
                             ${PROJECT_SOURCE_DIR}/backends/cuda)
  target_link_libraries(cuda_opmath_test PRIVATE PkgConfig::CHECK CUDA::toolkit m)
  target_compile_options(cuda_opmath_test PRIVATE ${TORC_WARNINGS})
  add_test(NAME cuda_opmath COMMAND cuda_opmath_test)
  set_tests_properties(cuda_opmath PROPERTIES LABELS "unit;cuda"
    ENVIRONMENT "TORC_TEST_DATA=${CMAKE_CURRENT_SOURCE_DIR}/golden")
endif()
