# The out-of-tree optimizer plugin workflow against an installed torc (tests/optim_template.sh):
# cmake --install to a temporary prefix, torc-optim-new, find_package(torc), train with it.
add_test(NAME optim_template
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/optim_template.sh ${CMAKE_BINARY_DIR} ${TORC_SANITIZE})
set_tests_properties(optim_template PROPERTIES LABELS "unit" TIMEOUT 600
  ENVIRONMENT "TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
