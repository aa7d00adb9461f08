# The oneDNN backend's own host kernels against the reference backend, each suite on every path its
# kernels choose at run time: the CPU's best (AVX-512 where it has it), AVX2 + FMA (oneDNN capped
# too, as an AVX2 CPU runs) and plain C (TORC_MAX_CPU_ISA=AVX, below what the vector kernels need):
#   onednn_attention  the fused attention, ATTENTION(_BACKWARD) (attention.c)
#   onednn_binary     ADD / SUB / MUL / DIV on f32 / bf16 / f16 mixes and broadcasts (pointwise.c)
#   onednn_reduce     SUM / MEAN over rows into contiguous columns, the 2-norm (reduce.c)
# binary and reduce send every size to onednn (TORC_ONEDNN_MIN_WORK=0; attention never goes below
# it). The capped runs carry the label isa, as the ISA matrix does: the sanitizer stage runs each
# suite once, on the CPU's own path. Only when the backend is built.
if(TORC_WITH_ONEDNN)
  find_package(OpenMP REQUIRED COMPONENTS C)
  foreach(suite attention binary reduce)
    set(exe onednn_${suite}_test)
    add_executable(${exe} ${CMAKE_CURRENT_SOURCE_DIR}/${exe}.c)
    target_include_directories(${exe} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(${exe} PRIVATE torc PkgConfig::CHECK OpenMP::OpenMP_C m)
    target_compile_options(${exe} PRIVATE ${TORC_WARNINGS})
    add_dependencies(${exe} torc_plugins)
    set(base "")
    if(NOT suite STREQUAL "attention")
      set(base "TORC_ONEDNN_MIN_WORK=0;")
    endif()
    add_test(NAME onednn_${suite} COMMAND ${exe})
    add_test(NAME onednn_${suite}_avx2 COMMAND ${exe})
    add_test(NAME onednn_${suite}_avx COMMAND ${exe})
    set_tests_properties(onednn_${suite} PROPERTIES LABELS "unit" ENVIRONMENT "${base}")
    set_tests_properties(onednn_${suite}_avx2 PROPERTIES LABELS "isa"
      ENVIRONMENT "${base}TORC_MAX_CPU_ISA=AVX2;ONEDNN_MAX_CPU_ISA=AVX2")
    set_tests_properties(onednn_${suite}_avx PROPERTIES LABELS "isa" ENVIRONMENT "${base}TORC_MAX_CPU_ISA=AVX")
  endforeach()

  # The fused-against-composed timing of docs/backends.md's "Fused attention" (no test: a measurement).
  add_executable(onednn_attention_bench ${PROJECT_SOURCE_DIR}/tools/onednn_attention_bench.c)
  target_link_libraries(onednn_attention_bench PRIVATE torc m)
  target_compile_options(onednn_attention_bench PRIVATE ${TORC_WARNINGS})
  add_dependencies(onednn_attention_bench torc_plugins)
endif()
