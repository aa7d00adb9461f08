# Every public header compiles alone as C11 and as C++11 with g++ and clang++, and the macros a
# C++ plugin uses expand to valid C++ (tests/headers.sh, tests/headers_use.cpp). The C++ compilers
# are looked up here: the project itself is C only.
find_program(TORC_GXX NAMES g++)
find_program(TORC_CLANGXX NAMES clang++)
foreach(cxx TORC_GXX TORC_CLANGXX)
  if(NOT ${cxx})
    set(${cxx} "")
  endif()
endforeach()
add_test(NAME headers COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/headers.sh ${PROJECT_SOURCE_DIR}/core/include
  ${CMAKE_C_COMPILER} "${TORC_GXX}" "${TORC_CLANGXX}")
set_tests_properties(headers PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77 TIMEOUT 120)
