# Comm plugins that the loader must refuse (tests/plugins/bad_comm.c), found by test_comm through
# TORC_PLUGIN_PATH.
set(TORC_TEST_COMM_DIR ${CMAKE_BINARY_DIR}/tests/comm_plugins)
foreach(kind major size name)
  string(TOUPPER ${kind} KIND)
  add_library(torc_comm_bad${kind} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/bad_comm.c)
  target_include_directories(torc_comm_bad${kind} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_definitions(torc_comm_bad${kind} PRIVATE BAD_${KIND})
  target_compile_options(torc_comm_bad${kind} PRIVATE ${TORC_WARNINGS})
  set_target_properties(torc_comm_bad${kind} PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_TEST_COMM_DIR})
  add_dependencies(test_comm torc_comm_bad${kind})
endforeach()
set_property(TEST comm APPEND PROPERTY ENVIRONMENT "TORC_TEST_COMM_DIR=${TORC_TEST_COMM_DIR}")
