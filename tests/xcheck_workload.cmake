# tests/xcheck_workload.cmake — torc-xcheck --workload (the ops a training workload dispatches and
# which of them the backend declines) on the reference (declines none), on tests/xcheck_faulty.c
# (a host backend lacking most ops) and on the fake device backend (declines every op; the
# workload runs through TORC_DEVICE_FALLBACK, which torc-xcheck sets there); and op_trace's
# unit suite (tests/test_op_trace.c), which needs the fake device. Checked by xcheck.cmake's
# script mode.
if(NOT TARGET torc-xcheck)
  return()
endif()
set_property(TEST op_trace APPEND PROPERTY ENVIRONMENT "TORC_TEST_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/plugins")
add_dependencies(test_op_trace torc_fakedev)
add_dependencies(torc-xcheck torc_fakedev)

# xcheck_workload_test(name "args|..." "regex|...")
function(xcheck_workload_test name args expect)
  add_test(NAME xcheck_workload_${name} COMMAND ${CMAKE_COMMAND}
    "-DXCHECK_CMD=$<TARGET_FILE:torc-xcheck>|${args}" "-DXCHECK_RC=0" "-DXCHECK_EXPECT=${expect}"
    -P ${CMAKE_CURRENT_SOURCE_DIR}/xcheck.cmake)
  set_tests_properties(xcheck_workload_${name} PROPERTIES LABELS "xcheck" TIMEOUT 120
    ENVIRONMENT "TORC_PLUGIN_PATH=${CMAKE_BINARY_DIR}/tests/plugins;TORC_NUM_THREADS=2")
endfunction()

xcheck_workload_test(reference_train "--backend|reference|--workload|train"
  "matmul +f32 +[0-9]+  takes|adam_step_list +-> f32 +[0-9]+  takes|randn +-> f32 +[0-9]+  takes|torc-xcheck: 0 of [1-9][0-9]* op/dtype pairs declined by 'reference' in workload 'train'")
xcheck_workload_test(reference_gpt "--backend|reference|--workload|gpt"
  "layer_norm_backward +f32 +[0-9]+  takes|adam_step_list +-> f32 +[0-9]+  takes|randint +-> i64 +[0-9]+  takes|torc-xcheck: 0 of [1-9][0-9]* op/dtype pairs declined by 'reference' in workload 'gpt'")
xcheck_workload_test(faulty_train "--backend|xcheck_faulty|--workload|train"
  "matmul +f32 +[0-9]+  DECLINES|mul +f32 +[0-9]+  takes|torc-xcheck: [1-9][0-9]* of [1-9][0-9]* op/dtype pairs declined by 'xcheck_faulty'")
xcheck_workload_test(fakedev_train "--backend|fakedev|--workload|train"
  "matmul +f32 +[0-9]+  DECLINES|adam_step +f32 +[0-9]+  DECLINES|torc-xcheck: [1-9][0-9]* of [1-9][0-9]* op/dtype pairs declined by 'fakedev'.*TORC_DEVICE_FALLBACK=1")
xcheck_workload_test(fakedev_gpt "--backend|fakedev|--workload|gpt"
  "layer_norm +f32 +[0-9]+  DECLINES|torc-xcheck: [1-9][0-9]* of [1-9][0-9]* op/dtype pairs declined by 'fakedev'")
