# The oneDNN backend's matmuls of 1 to 4 rows of bf16 / f16 operands (backends/cpu_onednn/gemv.c on
# AVX-512) against the reference backend: natively, and capped to AVX2 (the GEMM paths, label isa:
# the sanitizer stage runs the suite once). Only when the backend is built.
if(TORC_WITH_ONEDNN)
  find_package(OpenMP REQUIRED COMPONENTS C)
  add_executable(onednn_gemv_test ${CMAKE_CURRENT_SOURCE_DIR}/onednn_gemv_test.c)
  target_include_directories(onednn_gemv_test PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(onednn_gemv_test PRIVATE torc PkgConfig::CHECK OpenMP::OpenMP_C m)
  target_compile_options(onednn_gemv_test PRIVATE ${TORC_WARNINGS})
  add_dependencies(onednn_gemv_test torc_plugins)
  add_test(NAME onednn_gemv COMMAND onednn_gemv_test)
  add_test(NAME onednn_gemv_avx2 COMMAND onednn_gemv_test)
  set_tests_properties(onednn_gemv PROPERTIES LABELS "unit" ENVIRONMENT "TORC_ONEDNN_MIN_WORK=0")
  set_tests_properties(onednn_gemv_avx2 PROPERTIES LABELS "isa"
    ENVIRONMENT "TORC_ONEDNN_MIN_WORK=0;TORC_MAX_CPU_ISA=AVX2;ONEDNN_MAX_CPU_ISA=AVX2")
endif()
