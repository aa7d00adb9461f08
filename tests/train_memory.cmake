# torc-train's memory figures against the formulas, from the first step on (tests/train_memory.sh).
add_test(NAME train_memory COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_memory.sh $<TARGET_FILE:torc-train>)
set_tests_properties(train_memory PROPERTIES LABELS "unit" TIMEOUT 120
  ENVIRONMENT "TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
