# torc/plugin_error.h (tests/test_plugin_error.c): the test's malloc, calloc and realloc replace
# glibc's for the whole process, the dynamic loader's too, so they are exported.
set_target_properties(test_plugin_error PROPERTIES ENABLE_EXPORTS ON)
target_link_libraries(test_plugin_error PRIVATE ${CMAKE_DL_LIBS} pthread)
