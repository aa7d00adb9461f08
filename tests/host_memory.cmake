# backend.h's Memory rule (tests/test_host_memory.c), held to with the strict backend that
# tests/shutdown.cmake builds from tests/plugins/strict_backend.c, found through TORC_PLUGIN_PATH.
add_dependencies(test_host_memory torc_strict)
target_link_libraries(test_host_memory PRIVATE ${CMAKE_DL_LIBS})
set_property(TEST host_memory APPEND PROPERTY ENVIRONMENT
  "TORC_PLUGIN_PATH=${CMAKE_BINARY_DIR}/tests/plugins;TORC_TEST_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/plugins")
set_tests_properties(host_memory PROPERTIES SKIP_RETURN_CODE 77)
