# tests/cross_entropy_op.cmake — test_cross_entropy_op (CROSS_ENTROPY against the reference) on the
# oneDNN backend's other kernel paths: AVX2 + FMA (oneDNN capped too, as an AVX2 CPU runs) and plain
# C (TORC_MAX_CPU_ISA=AVX). The plain registration, "cross_entropy_op", runs the CPU's best path.
if(TORC_WITH_ONEDNN)
  add_test(NAME cross_entropy_op_avx2 COMMAND test_cross_entropy_op)
  add_test(NAME cross_entropy_op_avx COMMAND test_cross_entropy_op)
  set(base "TORC_BACKEND=onednn;TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
  set_tests_properties(cross_entropy_op_avx2 PROPERTIES LABELS "isa"
    ENVIRONMENT "${base};TORC_MAX_CPU_ISA=AVX2;ONEDNN_MAX_CPU_ISA=AVX2")
  set_tests_properties(cross_entropy_op_avx PROPERTIES LABELS "isa" ENVIRONMENT "${base};TORC_MAX_CPU_ISA=AVX")
endif()
