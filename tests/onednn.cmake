# The oneDNN backend's suite and tools, only when the backend is built (TORC_WITH_ONEDNN): the
# suite dlopens lib/torc/libtorc_onednn.so directly, so it is registered here, not by the glob.
if(TORC_WITH_ONEDNN)
  find_package(OpenMP REQUIRED COMPONENTS C)
  add_executable(onednn_backend_test ${CMAKE_CURRENT_SOURCE_DIR}/onednn_backend_test.c)
  target_include_directories(onednn_backend_test PRIVATE ${PROJECT_SOURCE_DIR}/core/include ${DNNL_INCLUDE_DIR})
  target_link_libraries(onednn_backend_test PRIVATE torc PkgConfig::CHECK OpenMP::OpenMP_C ${DNNL_LIBRARY} ${CMAKE_DL_LIBS} pthread m)
  target_compile_options(onednn_backend_test PRIVATE ${TORC_WARNINGS})
  add_dependencies(onednn_backend_test torc_plugins)
  add_test(NAME onednn_backend COMMAND onednn_backend_test)
  set_tests_properties(onednn_backend PROPERTIES LABELS "unit"
    ENVIRONMENT "TORC_BUILD_DIR=${CMAKE_BINARY_DIR};TORC_SOURCE_DIR=${PROJECT_SOURCE_DIR};TORC_ONEDNN_MIN_WORK=0")

  # The AVX2 kernels' bf16 rounding by Veltkamp's split against torc_f32_to_bf16 (its header only).
  add_executable(onednn_bf16_split_test ${CMAKE_CURRENT_SOURCE_DIR}/onednn_bf16_split_test.c)
  target_include_directories(onednn_bf16_split_test PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/core/include
    ${PROJECT_SOURCE_DIR}/backends/cpu_onednn)
  target_link_libraries(onednn_bf16_split_test PRIVATE PkgConfig::CHECK m)
  target_compile_options(onednn_bf16_split_test PRIVATE ${TORC_WARNINGS} -ffp-contract=off)
  add_test(NAME onednn_bf16_split COMMAND onednn_bf16_split_test)
  set_tests_properties(onednn_bf16_split PROPERTIES LABELS "unit")

  # The default size threshold below which oneDNN leaves ops to the reference backend.
  add_executable(onednn_small_ops_test ${CMAKE_CURRENT_SOURCE_DIR}/onednn_small_ops_test.c)
  target_include_directories(onednn_small_ops_test PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(onednn_small_ops_test PRIVATE torc PkgConfig::CHECK m)
  target_compile_options(onednn_small_ops_test PRIVATE ${TORC_WARNINGS})
  add_dependencies(onednn_small_ops_test torc_plugins)
  add_test(NAME onednn_small_ops COMMAND onednn_small_ops_test)
  set_tests_properties(onednn_small_ops PROPERTIES LABELS "unit")

  # The fused pointwise loops and Adam's other passes: native on large float32, exact as the reference.
  add_executable(onednn_pointwise_test ${CMAKE_CURRENT_SOURCE_DIR}/onednn_pointwise_test.c)
  target_include_directories(onednn_pointwise_test PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(onednn_pointwise_test PRIVATE torc PkgConfig::CHECK m)
  target_compile_options(onednn_pointwise_test PRIVATE ${TORC_WARNINGS})
  add_dependencies(onednn_pointwise_test torc_plugins)
  add_test(NAME onednn_pointwise COMMAND onednn_pointwise_test)
  set_tests_properties(onednn_pointwise PROPERTIES LABELS "unit")

  # The matmul timing tool and the AMX proof built on it (tools/onednn_amx_check.sh skips, exit
  # 77, on a CPU without AMX-BF16).
  add_executable(onednn_matmul_bench ${PROJECT_SOURCE_DIR}/tools/onednn_matmul_bench.c)
  target_include_directories(onednn_matmul_bench PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_link_libraries(onednn_matmul_bench PRIVATE ${CMAKE_DL_LIBS})
  target_compile_options(onednn_matmul_bench PRIVATE ${TORC_WARNINGS})
  add_dependencies(onednn_matmul_bench torc_plugins)
  add_test(NAME onednn_amx_check
    COMMAND sh ${PROJECT_SOURCE_DIR}/tools/onednn_amx_check.sh $<TARGET_FILE:onednn_matmul_bench> 256)
  set_tests_properties(onednn_amx_check PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77)
endif()
