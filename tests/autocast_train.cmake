# torc-train --autocast end to end (tests/autocast_train.sh): bf16/f16/fp8 training against f32
# on the course's linear task, exact f16 resume, flag errors.
add_test(NAME autocast_train COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/autocast_train.sh $<TARGET_FILE:torc-train>)
set_tests_properties(autocast_train PROPERTIES LABELS "unit" TIMEOUT 300
  ENVIRONMENT "TORC_BACKEND=reference;TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
