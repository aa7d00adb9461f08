# tests/threads.cmake — results independent of the thread count (label "isa": it runs every ISA
# cap, so the ASan pass leaves it out, as it does the isa-matrix cells): tests/threads.sh
# runs tests/threads_probe.c's ops and a torc-train checkpoint at TORC_NUM_THREADS=1 and 2, and
# compares the bytes; once with no cap, then under every ISA cap this CPU reaches (oneDNN's and
# torc's together, as tools/isa-matrix.sh sets them), so each family's GEMM (OpenBLAS's place on
# AVX2, dnnl_sgemm's above it, the FMA and AMX GEMMs) is covered on one machine.
if(TORC_WITH_ONEDNN AND TARGET torc_onednn AND TARGET torc-train)
  add_executable(threads_probe ${CMAKE_CURRENT_SOURCE_DIR}/threads_probe.c)
  target_link_libraries(threads_probe PRIVATE torc m)
  target_compile_options(threads_probe PRIVATE ${TORC_WARNINGS})
  add_dependencies(threads_probe torc_plugins)
  add_test(NAME threads COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/threads.sh $<TARGET_FILE:threads_probe>
    $<TARGET_FILE:torc-train>)
  set_tests_properties(threads PROPERTIES LABELS "isa" TIMEOUT 900
    ENVIRONMENT "TORC_BACKEND=onednn;TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
endif()
