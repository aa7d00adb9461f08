# The oneDNN backend's binary arithmetic loops (ADD, SUB, MUL, DIV on f32 / bf16 / f16 mixes,
# backends/cpu_onednn/pointwise.c) against the reference backend (tests/onednn_binary_test.c), on
# each of its paths: the CPU's best (AVX-512 where the CPU has it), AVX2 + FMA (oneDNN capped too),
# and plain C (TORC_MAX_CPU_ISA=AVX, below what its vector loops need). Only when the backend is built.
if(TORC_WITH_ONEDNN)
  find_package(OpenMP REQUIRED COMPONENTS C)
  add_executable(onednn_binary_test ${CMAKE_CURRENT_SOURCE_DIR}/onednn_binary_test.c)
  target_include_directories(onednn_binary_test PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(onednn_binary_test PRIVATE torc PkgConfig::CHECK OpenMP::OpenMP_C m)
  target_compile_options(onednn_binary_test PRIVATE ${TORC_WARNINGS})
  add_dependencies(onednn_binary_test torc_plugins)
  foreach(cap native AVX2 AVX)
    if(cap STREQUAL "native")
      set(name onednn_binary)
      set(env "TORC_ONEDNN_MIN_WORK=0")
    else()
      string(TOLOWER ${cap} lower)
      set(name onednn_binary_${lower})
      set(env "TORC_ONEDNN_MIN_WORK=0;TORC_MAX_CPU_ISA=${cap};ONEDNN_MAX_CPU_ISA=${cap}")
    endif()
    add_test(NAME ${name} COMMAND onednn_binary_test)
    set_tests_properties(${name} PROPERTIES LABELS "unit" ENVIRONMENT "${env}")
  endforeach()
endif()
