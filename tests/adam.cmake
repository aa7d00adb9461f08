# tests/test_adam.c's composed-path plugins: the bundled adam and adamw built to see a v1.1 host
# table (tests/plugins/adam_v11.c), found through TORC_TEST_PLUGIN_DIR.
foreach(name adam_v11 adamw_v11)
  add_library(torc_optim_${name} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/adam_v11.c)
  target_include_directories(torc_optim_${name} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_options(torc_optim_${name} PRIVATE ${TORC_WARNINGS})
  set_target_properties(torc_optim_${name} PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/plugins)
  add_dependencies(test_adam torc_optim_${name})
endforeach()
target_compile_definitions(torc_optim_adamw_v11 PRIVATE ADAMW)
set_property(TEST adam APPEND PROPERTY ENVIRONMENT "TORC_TEST_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/plugins")
if(TARGET torc_onednn)
  target_compile_definitions(test_adam PRIVATE TORC_TEST_ONEDNN)
endif()
