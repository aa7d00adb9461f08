# Every oneDNN call of the onednn backend crosses backends/cpu_onednn/boundary.cpp.
if(TORC_WITH_ONEDNN)
  add_test(NAME onednn_boundary COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/onednn_boundary.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(onednn_boundary PROPERTIES LABELS "unit")
endif()
