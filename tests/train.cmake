# torc-train end to end (tests/train.sh): the loss falls, resume is exact for every optimizer,
# bad flags fail with a message.
add_test(NAME train COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train.sh $<TARGET_FILE:torc-train>)
set_tests_properties(train PROPERTIES LABELS "unit" TIMEOUT 300
  ENVIRONMENT "TORC_BACKEND=reference;TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
