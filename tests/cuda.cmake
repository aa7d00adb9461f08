# The CUDA backend's tests: host-side unit tests (run everywhere: no GPU needed), the GPU suite
# (label "gpu": skips with 77 when no device exists) and the kernels' register-spill check
# (label "build"). Only when the backend is built.
if(TORC_WITH_CUDA AND TARGET torc_cuda)
  find_package(CUDAToolkit REQUIRED)
  set(_torc_cu ${PROJECT_SOURCE_DIR}/backends/cuda)
  set(_torc_cu_env
    "TORC_TEST_DATA=${CMAKE_CURRENT_SOURCE_DIR}/golden;TORC_BUILD_DIR=${CMAKE_BINARY_DIR};TORC_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  # ASan and the CUDA driver: the driver maps memory where ASan keeps its shadow gap, and leaks
  # allocations LSan cannot see freed; see tools/cuda_lsan.supp.
  set(_torc_cu_asan
    "ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1;LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tools/cuda_lsan.supp")

  # Host tests: the backend's dispatch code (run.c) against the reference backend with every
  # kernel launch replaced by a CPU emulation of the same per-element code, plus the allocator,
  # staging pool, device table, plans, and the no-device path of the real plugin.
  # The CUDA runtime calls of runtime_ops.c and cuBLASLt's heuristic and matmul (lt_matmul.c) run
  # over emulations in the test that refuse and fail as the real ones do (the test defines the
  # runtime's functions; lt_matmul.c's tcu_lt_api_get is wrapped to the emulated table).
  add_executable(cuda_host_test cuda_host_test.c ${_torc_cu}/run.c ${_torc_cu}/scaled_mm.c ${_torc_cu}/allocator.c
                 ${_torc_cu}/pinned.c ${_torc_cu}/device_table.c ${_torc_cu}/lt_plan.c ${_torc_cu}/lt_matmul.c
                 ${_torc_cu}/runtime_ops.c ${_torc_cu}/blas_api.c)
  target_include_directories(cuda_host_test PRIVATE ${PROJECT_SOURCE_DIR}/core/include ${_torc_cu}
                             ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(cuda_host_test PRIVATE PkgConfig::CHECK CUDA::cublasLt CUDA::toolkit
                        ${CMAKE_DL_LIBS} pthread m)
  target_compile_options(cuda_host_test PRIVATE ${TORC_WARNINGS})
  target_link_options(cuda_host_test PRIVATE "-Wl,--wrap=tcu_lt_api_get")
  target_compile_definitions(cuda_host_test PRIVATE TORC_CUDA_LIBDIR="${CUDAToolkit_LIBRARY_DIR}")
  add_dependencies(cuda_host_test torc_plugins)
  add_test(NAME cuda_host COMMAND cuda_host_test)
  set_tests_properties(cuda_host PROPERTIES LABELS "unit;cuda" ENVIRONMENT "${_torc_cu_env};${_torc_cu_asan}")

  # The same host suite with the block-cooperative kernels' own code (attention.cu, index_add.cu:
  # shared memory, barriers, shuffles, the sort) in place of its emulations of them: the .cu files
  # compiled as host C++ over a CPU model of the thread hierarchy (sim_thread_model.h). Only the
  # emulated-kernels case: the rest is cuda_host's.
  include(CheckLanguage)
  check_language(CXX)
  if(CMAKE_CXX_COMPILER)
    enable_language(CXX)
    set(_torc_sim_srcs)
    foreach(k attention index_add)
      configure_file(${_torc_cu}/${k}.cu ${CMAKE_CURRENT_BINARY_DIR}/cuda_sim/${k}.cc COPYONLY)
      list(APPEND _torc_sim_srcs ${CMAKE_CURRENT_BINARY_DIR}/cuda_sim/${k}.cc)
    endforeach()
    set_source_files_properties(${_torc_sim_srcs} PROPERTIES COMPILE_OPTIONS
      "-include;${_torc_cu}/sim_thread_model.h;-DTCU_SIM;-Wno-unknown-pragmas")
    add_executable(cuda_sim_test cuda_host_test.c ${_torc_cu}/run.c ${_torc_cu}/scaled_mm.c ${_torc_cu}/allocator.c
                   ${_torc_cu}/pinned.c ${_torc_cu}/device_table.c ${_torc_cu}/lt_plan.c ${_torc_cu}/lt_matmul.c
                   ${_torc_cu}/runtime_ops.c ${_torc_cu}/blas_api.c ${_torc_sim_srcs})
    set_target_properties(cuda_sim_test PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
    target_include_directories(cuda_sim_test PRIVATE ${PROJECT_SOURCE_DIR}/core/include ${_torc_cu}
                               ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(cuda_sim_test PRIVATE PkgConfig::CHECK CUDA::cublasLt CUDA::toolkit
                          ${CMAKE_DL_LIBS} pthread m)
    target_compile_options(cuda_sim_test PRIVATE ${TORC_WARNINGS})
    target_link_options(cuda_sim_test PRIVATE "-Wl,--wrap=tcu_lt_api_get")
    target_compile_definitions(cuda_sim_test PRIVATE TORC_CUDA_SIM TORC_CUDA_LIBDIR="${CUDAToolkit_LIBRARY_DIR}")
    add_dependencies(cuda_sim_test torc_plugins)
    add_test(NAME cuda_sim COMMAND cuda_sim_test)
    set_tests_properties(cuda_sim PROPERTIES LABELS "unit;cuda"
                         ENVIRONMENT "${_torc_cu_env};${_torc_cu_asan};CK_RUN_CASE=emulated_kernels_vs_reference")
  endif()

  # GPU tests: every op and dtype on the device against the reference backend.
  add_executable(cuda_gpu_test cuda_gpu_test.c ${_torc_cu}/device_table.c)
  target_include_directories(cuda_gpu_test PRIVATE ${PROJECT_SOURCE_DIR}/core/include ${_torc_cu})
  target_link_libraries(cuda_gpu_test PRIVATE PkgConfig::CHECK ${CMAKE_DL_LIBS} pthread m)
  target_compile_options(cuda_gpu_test PRIVATE ${TORC_WARNINGS})
  add_dependencies(cuda_gpu_test torc_plugins)
  add_test(NAME cuda_gpu COMMAND cuda_gpu_test)
  set_tests_properties(cuda_gpu PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77
                       ENVIRONMENT "${_torc_cu_env};${_torc_cu_asan}")
  # In processes of their own: a kernel fault ends the CUDA context; device 1 must be untouched.
  add_test(NAME cuda_gpu_fault COMMAND cuda_gpu_test --fault)
  add_test(NAME cuda_gpu_device1 COMMAND cuda_gpu_test --device1)
  set_tests_properties(cuda_gpu_fault cuda_gpu_device1 PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77
                       ENVIRONMENT "${_torc_cu_env};${_torc_cu_asan}")

  # Register spills in the hot kernels fail the build check.
  add_test(NAME cuda_resources
           COMMAND bash ${PROJECT_SOURCE_DIR}/tools/cuda_resource_check.sh ${CMAKE_CUDA_COMPILER}
                   ${PROJECT_SOURCE_DIR} "${TORC_CUDA_ARCHS}" ${TORC_CUDA_KERNEL_SOURCES})
  set_tests_properties(cuda_resources PROPERTIES LABELS "build")
endif()
