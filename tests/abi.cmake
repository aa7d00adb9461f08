# The plugin ABIs' compatibility tests (tests/test_abi.c, ctest "abi" and "abi_extra"):
#  - plugins built against frozen copies of the 2.0 headers (tests/abi/v2_0: never edit them;
#    a later major freezes its own copy beside them) and one claiming a newer minor;
#  - a test build of the core and of the reference backend with -DTORC_TEST_EXTRA_ABI, which
#    appends an opcode and a dtype of minor 2.7 (one past the core's) to TORC_OP_LIST /
#    TORC_DTYPE_LIST, to prove that an older-minor backend is never sent either. It lives in its own directory (its libtorc's
#    plugin directory holds only that reference) and is built without -Werror: switches over the
#    opcodes and dtypes elsewhere in the core do not name the test-only values.
set(TORC_ABI_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/abi_plugins)
set(TORC_ABI_FROZEN ${CMAKE_CURRENT_SOURCE_DIR}/abi/v2_0)

function(torc_abi_plugin target src includes)
  add_library(${target} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/abi/${src})
  target_include_directories(${target} PRIVATE ${includes})
  target_compile_options(${target} PRIVATE ${TORC_WARNINGS})
  target_compile_definitions(${target} PRIVATE ${ARGN})
  set_target_properties(${target} PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${TORC_ABI_PLUGIN_DIR})
endfunction()
torc_abi_plugin(torc_abiold abi_backend.c ${TORC_ABI_FROZEN})
torc_abi_plugin(torc_abiolddev abi_backend.c ${TORC_ABI_FROZEN} ABI_DEVICE)
torc_abi_plugin(torc_abifuture abi_backend.c ${PROJECT_SOURCE_DIR}/core/include ABI_FUTURE)
torc_abi_plugin(torc_optim_abisgd abi_optim.c ${TORC_ABI_FROZEN})
set(torc_abi_plugins torc_abiold torc_abiolddev torc_abifuture torc_optim_abisgd torc_badmajor)

add_dependencies(test_abi ${torc_abi_plugins})
set_property(TEST abi APPEND PROPERTY ENVIRONMENT
  "TORC_ABI_PLUGIN_DIR=${TORC_ABI_PLUGIN_DIR}" "TORC_TEST_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/plugins")

# The test build: libtorc and the reference with the extra opcode and dtype.
set(torc_extra_dir ${CMAKE_BINARY_DIR}/tests/abi_extra/lib)
file(GLOB torc_extra_core CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/*.c)
add_library(torc_extra_abi SHARED ${torc_extra_core})
target_include_directories(torc_extra_abi PUBLIC ${PROJECT_SOURCE_DIR}/core/include)
target_compile_definitions(torc_extra_abi PUBLIC TORC_TEST_EXTRA_ABI PRIVATE TORC_BUILDING_LIB)
target_compile_options(torc_extra_abi PRIVATE -Wall -Wextra -Wno-unused-parameter -Wno-switch -Wno-error)
target_link_libraries(torc_extra_abi PRIVATE ${CMAKE_DL_LIBS} m pthread)
set_target_properties(torc_extra_abi PROPERTIES OUTPUT_NAME torc LIBRARY_OUTPUT_DIRECTORY ${torc_extra_dir})
file(GLOB torc_extra_ref CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/backends/reference/*.c)
add_library(torc_extra_reference MODULE ${torc_extra_ref})
target_include_directories(torc_extra_reference PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
target_compile_definitions(torc_extra_reference PRIVATE TORC_TEST_EXTRA_ABI)
target_compile_options(torc_extra_reference PRIVATE -Wall -Wextra -Wno-unused-parameter -Wno-switch -Wno-error)
target_link_libraries(torc_extra_reference PRIVATE m)
set_target_properties(torc_extra_reference PROPERTIES PREFIX "lib" OUTPUT_NAME torc_reference
  LIBRARY_OUTPUT_DIRECTORY ${torc_extra_dir}/torc)

add_executable(test_abi_extra ${CMAKE_CURRENT_SOURCE_DIR}/test_abi.c)
target_link_libraries(test_abi_extra PRIVATE torc_extra_abi PkgConfig::CHECK m)
target_include_directories(test_abi_extra PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(test_abi_extra PRIVATE ${TORC_WARNINGS})
add_dependencies(test_abi_extra torc_extra_reference ${torc_abi_plugins})
add_test(NAME abi_extra COMMAND test_abi_extra)
set_tests_properties(abi_extra PROPERTIES LABELS "unit" ENVIRONMENT
  "TORC_ABI_PLUGIN_DIR=${TORC_ABI_PLUGIN_DIR};TORC_TEST_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/plugins;TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
