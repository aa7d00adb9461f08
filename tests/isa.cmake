# tests/isa.cmake — the ISA test matrix (label "isa"): the onednn backend's suites and torc-xcheck
# (every op, TORC_ONEDNN_MIN_WORK=0, values and gradients) under each ISA level, with oneDNN's
# cap (ONEDNN_MAX_CPU_ISA) and torc's own (TORC_MAX_CPU_ISA) set together, so the paths of an
# SSE4.1 or AVX2-only CPU run on a bigger one. A level this CPU lacks is skipped (exit 77) with the
# missing feature named; the CPU's own top level is skipped too (the uncapped suites ran it).
# tools/isa-matrix.sh runs one cell.
if(TORC_WITH_ONEDNN AND TARGET torc_onednn AND TARGET torc-xcheck)
  foreach(level SSE41 AVX2 AVX512_CORE AVX512_CORE_BF16 AVX512_CORE_AMX)
    foreach(what suites xcheck)
      add_test(NAME isa_${level}_${what}
        COMMAND bash ${PROJECT_SOURCE_DIR}/tools/isa-matrix.sh ${level} ${CMAKE_BINARY_DIR} ${what})
      set_tests_properties(isa_${level}_${what} PROPERTIES LABELS "isa" SKIP_RETURN_CODE 77 TIMEOUT 900
        ENVIRONMENT "TORC_BUILD_DIR=${CMAKE_BINARY_DIR};TORC_SOURCE_DIR=${PROJECT_SOURCE_DIR};TORC_NUM_THREADS=2")
    endforeach()
  endforeach()
endif()
