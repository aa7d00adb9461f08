# The oneDNN backend's GELU loops (backends/cpu_onednn/gelu.c) against the reference backend, on each
# variant its kernels pick at run time: the CPU's best (AVX-512 where it has it), AVX2 + FMA (oneDNN
# capped too, as an AVX2 CPU runs; the strided cases run its AVX2 primitive) and plain C (SSE4.1,
# below what the vector loops need). Every size goes to onednn (TORC_ONEDNN_MIN_WORK=0). The capped
# runs carry the label isa, as onednn_kernels.cmake's do: the sanitizer stage runs the suite once.
# Only when the backend is built.
if(TORC_WITH_ONEDNN)
  find_package(OpenMP REQUIRED COMPONENTS C)
  add_executable(onednn_gelu_test ${CMAKE_CURRENT_SOURCE_DIR}/onednn_gelu_test.c)
  target_include_directories(onednn_gelu_test PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(onednn_gelu_test PRIVATE torc PkgConfig::CHECK OpenMP::OpenMP_C m)
  target_compile_options(onednn_gelu_test PRIVATE ${TORC_WARNINGS})
  add_dependencies(onednn_gelu_test torc_plugins)
  add_test(NAME onednn_gelu COMMAND onednn_gelu_test)
  add_test(NAME onednn_gelu_avx2 COMMAND onednn_gelu_test)
  add_test(NAME onednn_gelu_sse41 COMMAND onednn_gelu_test)
  set_tests_properties(onednn_gelu PROPERTIES LABELS "unit" ENVIRONMENT "TORC_ONEDNN_MIN_WORK=0")
  set_tests_properties(onednn_gelu_avx2 PROPERTIES LABELS "isa"
    ENVIRONMENT "TORC_ONEDNN_MIN_WORK=0;TORC_MAX_CPU_ISA=AVX2;ONEDNN_MAX_CPU_ISA=AVX2")
  set_tests_properties(onednn_gelu_sse41 PROPERTIES LABELS "isa"
    ENVIRONMENT "TORC_ONEDNN_MIN_WORK=0;TORC_MAX_CPU_ISA=SSE41;ONEDNN_MAX_CPU_ISA=SSE41")
endif()
