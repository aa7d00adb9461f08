# torc-train --init-from with a weights file written by Python's safetensors (needs numpy and
# safetensors, as checkpoint_python does).
add_test(NAME train_init_from COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_init_from.sh $<TARGET_FILE:torc-train>)
set_tests_properties(train_init_from PROPERTIES LABELS "unit" TIMEOUT 120
  ENVIRONMENT "TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
