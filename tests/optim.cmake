# Optimizer plugins that the loader must refuse (a future ABI major, a truncated vtable, an
# entry that returns NULL, a vtable name unlike its file's) or whose step must be refused (a
# state buffer unlike its parameter), found by test_optim through TORC_PLUGIN_PATH or by path;
# and two working ones on the v1.1 host table: Lion (sign) and a probe of the v1.1 members.
set(TORC_TEST_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/plugins)
foreach(kind major size refuse name state hparam)
  string(TOUPPER ${kind} KIND)
  add_library(torc_optim_bad${kind} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/bad_optim.c)
  target_include_directories(torc_optim_bad${kind} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_definitions(torc_optim_bad${kind} PRIVATE BAD_${KIND})
  target_compile_options(torc_optim_bad${kind} PRIVATE ${TORC_WARNINGS})
  set_target_properties(torc_optim_bad${kind} PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_TEST_PLUGIN_DIR})
  add_dependencies(test_optim torc_optim_bad${kind})
endforeach()
foreach(plugin lion host_ops)
  add_library(torc_optim_${plugin} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/${plugin}.c)
  target_include_directories(torc_optim_${plugin} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_options(torc_optim_${plugin} PRIVATE ${TORC_WARNINGS})
  set_target_properties(torc_optim_${plugin} PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_TEST_PLUGIN_DIR})
  add_dependencies(test_optim torc_optim_${plugin})
endforeach()
set_property(TEST optim APPEND PROPERTY ENVIRONMENT "TORC_TEST_PLUGIN_DIR=${TORC_TEST_PLUGIN_DIR}")
