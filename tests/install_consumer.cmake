# An installed torc from a non-default, moved prefix: a consumer built through pkg-config and
# through find_package(torc) (tests/install_consumer.sh).
add_test(NAME install_consumer
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install_consumer.sh ${CMAKE_BINARY_DIR} ${TORC_SANITIZE})
set_tests_properties(install_consumer PROPERTIES LABELS "unit" TIMEOUT 600
  ENVIRONMENT "TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
