# Optimizer plugins that the loader must refuse (a future ABI major, a truncated vtable, an
# entry that returns NULL), found by test_optim through TORC_PLUGIN_PATH or by path.
set(TORC_TEST_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/plugins)
foreach(kind major size refuse)
  string(TOUPPER ${kind} KIND)
  add_library(torc_optim_bad${kind} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/bad_optim.c)
  target_include_directories(torc_optim_bad${kind} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_definitions(torc_optim_bad${kind} PRIVATE BAD_${KIND})
  target_compile_options(torc_optim_bad${kind} PRIVATE ${TORC_WARNINGS})
  set_target_properties(torc_optim_bad${kind} PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_TEST_PLUGIN_DIR})
  add_dependencies(test_optim torc_optim_bad${kind})
endforeach()
set_property(TEST optim APPEND PROPERTY ENVIRONMENT "TORC_TEST_PLUGIN_DIR=${TORC_TEST_PLUGIN_DIR}")
