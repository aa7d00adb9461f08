# The shutdown contract and exit handlers (tests/test_shutdown.c): backends built from
# tests/plugins/strict_backend.c, found through TORC_PLUGIN_PATH. test_shutdown exports its
# symbols so that its dnnl_stream_wait replaces libdnnl's in the oneDNN backend (the exit cases).
set(TORC_TEST_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/plugins)
foreach(variant strict exitctor exitop)
  add_library(torc_${variant} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/strict_backend.c)
  target_include_directories(torc_${variant} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_options(torc_${variant} PRIVATE ${TORC_WARNINGS})
  target_link_libraries(torc_${variant} PRIVATE pthread)
  set_target_properties(torc_${variant} PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_TEST_PLUGIN_DIR})
  add_dependencies(test_shutdown torc_${variant})
endforeach()
target_compile_definitions(torc_exitctor PRIVATE EXIT_IN_CTOR)
target_compile_definitions(torc_exitop PRIVATE EXIT_IN_RUN)
target_link_libraries(test_shutdown PRIVATE ${CMAKE_DL_LIBS} pthread)
set_target_properties(test_shutdown PROPERTIES ENABLE_EXPORTS ON)
if(TORC_WITH_ONEDNN)
  target_compile_definitions(test_shutdown PRIVATE TORC_TEST_ONEDNN)
endif()
set_property(TEST shutdown APPEND PROPERTY ENVIRONMENT
  "TORC_PLUGIN_PATH=${TORC_TEST_PLUGIN_DIR};TORC_TEST_PLUGIN_DIR=${TORC_TEST_PLUGIN_DIR}")
set_tests_properties(shutdown PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
