# The host round trip of a device backend's declined ops (TORC_DEVICE_FALLBACK=1) on the fake
# device backend (tests/plugins/fake_device.c, which declines every op): test_device_fallback's
# ops, and torc-train's Cruncher and torc-xcheck on it end to end (tests/device_fallback.sh).
set(TORC_TEST_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/plugins)
if(NOT TARGET torc_fakedev)
  add_library(torc_fakedev MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/fake_device.c)
  target_include_directories(torc_fakedev PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_options(torc_fakedev PRIVATE ${TORC_WARNINGS})
  set_target_properties(torc_fakedev PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_TEST_PLUGIN_DIR})
endif()
add_dependencies(test_device_fallback torc_fakedev)
set_property(TEST device_fallback APPEND PROPERTY ENVIRONMENT "TORC_TEST_PLUGIN_DIR=${TORC_TEST_PLUGIN_DIR}")

add_test(NAME device_fallback_train
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/device_fallback.sh $<TARGET_FILE:torc-train> ${TORC_TEST_PLUGIN_DIR}
                 $<TARGET_FILE:torc-xcheck>)
set_tests_properties(device_fallback_train PROPERTIES LABELS "unit" TIMEOUT 60)
