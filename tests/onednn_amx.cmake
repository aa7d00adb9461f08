# tests/onednn_amx.cmake — the AMX bf16 GEMM of the oneDNN backend (backends/cpu_onednn/
# matmul_amx.c, compiled into the test with its ISA flags) against a plain f32 loop.
if(TORC_WITH_ONEDNN)
  find_package(OpenMP REQUIRED COMPONENTS C)
  set(_torc_amx_src ${PROJECT_SOURCE_DIR}/backends/cpu_onednn/matmul_amx.c)
  set_source_files_properties(${_torc_amx_src} PROPERTIES COMPILE_OPTIONS
    "-mamx-tile;-mamx-bf16;-mavx512f;-mavx512bw;-mavx512vl;-mavx512bf16")
  add_executable(onednn_amx_test ${CMAKE_CURRENT_SOURCE_DIR}/onednn_amx_test.c ${_torc_amx_src}
  ${PROJECT_SOURCE_DIR}/backends/cpu_onednn/isa.c)
  target_include_directories(onednn_amx_test PRIVATE ${PROJECT_SOURCE_DIR}/core/include
                             ${PROJECT_SOURCE_DIR}/backends/cpu_onednn ${DNNL_INCLUDE_DIR})
  target_link_libraries(onednn_amx_test PRIVATE PkgConfig::CHECK OpenMP::OpenMP_C ${DNNL_LIBRARY} m)
  target_compile_options(onednn_amx_test PRIVATE ${TORC_WARNINGS})
  add_test(NAME onednn_amx COMMAND onednn_amx_test)
  # Exit 77 (skipped) on a CPU without AMX-BF16, once the detection test has passed.
  set_tests_properties(onednn_amx PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77)
endif()
