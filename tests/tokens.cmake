# test_tokens' device case uses the fake device backend (tests/plugins/fake_device.c), found
# through TORC_PLUGIN_PATH as test_data finds it.
set(TORC_TEST_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/plugins)
if(NOT TARGET torc_fakedev)
  add_library(torc_fakedev MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/fake_device.c)
  target_include_directories(torc_fakedev PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_options(torc_fakedev PRIVATE ${TORC_WARNINGS})
  set_target_properties(torc_fakedev PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_TEST_PLUGIN_DIR})
endif()
add_dependencies(test_tokens torc_fakedev)
set_property(TEST tokens APPEND PROPERTY ENVIRONMENT "TORC_TEST_PLUGIN_DIR=${TORC_TEST_PLUGIN_DIR}")

# torc-tokens on a small tree (tests/tokens.sh): exact output bytes, the walk, errors.
add_test(NAME tokens_tool COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tokens.sh $<TARGET_FILE:torc-tokens>)
set_tests_properties(tokens_tool PROPERTIES LABELS "unit" TIMEOUT 60 ENVIRONMENT "TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
