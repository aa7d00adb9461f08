# Comm plugins that the loader must refuse (tests/plugins/bad_comm.c), found by test_comm through
# TORC_PLUGIN_PATH.
set(TORC_TEST_COMM_DIR ${CMAKE_BINARY_DIR}/tests/comm_plugins)
foreach(kind major size name member)
  string(TOUPPER ${kind} KIND)
  add_library(torc_comm_bad${kind} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/bad_comm.c)
  target_include_directories(torc_comm_bad${kind} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_definitions(torc_comm_bad${kind} PRIVATE BAD_${KIND})
  target_compile_options(torc_comm_bad${kind} PRIVATE ${TORC_WARNINGS})
  set_target_properties(torc_comm_bad${kind} PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_TEST_COMM_DIR})
  add_dependencies(test_comm torc_comm_bad${kind})
endforeach()
set_property(TEST comm APPEND PROPERTY ENVIRONMENT "TORC_TEST_COMM_DIR=${TORC_TEST_COMM_DIR}")

# A one-process comm plugin on "device" memory (tests/plugins/self_comm.c, ABI 1.1 and a 1.0
# build), used with the fakedev backend (tests/data.cmake) to check what the core hands it.
foreach(v self selfv10)
  add_library(torc_comm_${v} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/self_comm.c)
  target_include_directories(torc_comm_${v} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_options(torc_comm_${v} PRIVATE ${TORC_WARNINGS})
  set_target_properties(torc_comm_${v} PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_TEST_COMM_DIR})
  add_dependencies(test_comm torc_comm_${v} torc_fakedev)
endforeach()
target_compile_definitions(torc_comm_selfv10 PRIVATE SELF_V10)
set_property(TEST comm APPEND PROPERTY ENVIRONMENT "TORC_TEST_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/plugins")
