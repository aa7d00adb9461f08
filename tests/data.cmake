# A backend that looks like device memory (tests/plugins/fake_device.c), for the host->device
# paths of get_batch and torc_load; test_data finds it through TORC_PLUGIN_PATH.
set(TORC_TEST_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/plugins)
if(NOT TARGET torc_fakedev)
  add_library(torc_fakedev MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/fake_device.c)
  target_include_directories(torc_fakedev PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_options(torc_fakedev PRIVATE ${TORC_WARNINGS})
  set_target_properties(torc_fakedev PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_TEST_PLUGIN_DIR})
endif()
add_dependencies(test_data torc_fakedev)
target_link_libraries(test_data PRIVATE ${CMAKE_DL_LIBS})
set_property(TEST data APPEND PROPERTY ENVIRONMENT "TORC_TEST_PLUGIN_DIR=${TORC_TEST_PLUGIN_DIR}")
