# Plugins that the loader must refuse: a future ABI major, a truncated vtable and one missing a
# required member. They live in their own directory, found through TORC_PLUGIN_PATH by test_loader.
set(TORC_TEST_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/plugins)
foreach(kind major size member)
  string(TOUPPER ${kind} KIND)
  add_library(torc_bad${kind} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/bad_backend.c)
  target_include_directories(torc_bad${kind} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_definitions(torc_bad${kind} PRIVATE BAD_${KIND})
  target_compile_options(torc_bad${kind} PRIVATE ${TORC_WARNINGS})
  set_target_properties(torc_bad${kind} PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_TEST_PLUGIN_DIR})
  add_dependencies(test_loader torc_bad${kind})
endforeach()
add_dependencies(test_loader torc_optim_badmajor)  # (tests/optim.cmake) for the wrong-ABI optimizer case
add_dependencies(test_loader torc_strict)  # (tests/shutdown.cmake) under another backend's file name
set_property(TEST loader APPEND PROPERTY ENVIRONMENT "TORC_TEST_PLUGIN_DIR=${TORC_TEST_PLUGIN_DIR}")
