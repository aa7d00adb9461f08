# The ops_binary suite's "parity" cases (tests/golden/ops_parity.txt: operands PyTorch's kernels
# read in another dtype) also on the oneDNN backend with every op sent to it (no size threshold).
if(TORC_WITH_ONEDNN)
  add_test(NAME ops_binary_parity_onednn COMMAND test_ops_binary)
  set_tests_properties(ops_binary_parity_onednn PROPERTIES LABELS "unit"
    ENVIRONMENT "CK_RUN_CASE=parity;TORC_BACKEND=onednn;TORC_ONEDNN_MIN_WORK=0;TORC_TEST_DATA=${CMAKE_CURRENT_SOURCE_DIR}/golden;TORC_BUILD_DIR=${CMAKE_BINARY_DIR};TORC_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()
