# The out-of-tree backend plugin workflow against an installed torc (tests/backend_template.sh):
# cmake --install to a temporary prefix, torc-backend-new, find_package(torc), then torc-xcheck
# (the backend's own ops run by it, every other op on the reference) and torc-train on it.
add_test(NAME backend_template
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/backend_template.sh ${CMAKE_BINARY_DIR} ${TORC_SANITIZE})
set_tests_properties(backend_template PROPERTIES LABELS "unit" TIMEOUT 600
  ENVIRONMENT "TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
