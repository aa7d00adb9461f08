# The kill test: SIGKILL at random moments of 25 checkpoint saves (tests/fault/kill_save.c).
add_executable(kill_save ${CMAKE_CURRENT_SOURCE_DIR}/fault/kill_save.c)
target_link_libraries(kill_save PRIVATE torc)
target_compile_options(kill_save PRIVATE ${TORC_WARNINGS})
add_dependencies(kill_save torc_plugins)
add_test(NAME kill_during_save COMMAND ${CMAKE_COMMAND} -E env TORC_BACKEND=reference
  sh -c "d=$(mktemp -d) && $<TARGET_FILE:kill_save> \"$d\" 25; s=$?; rm -rf \"$d\"; exit $s")
set_tests_properties(kill_during_save PROPERTIES LABELS "unit" TIMEOUT 300)

# The allocation-failure sweep (tests/fault/): an LD_PRELOAD shim that fails the Nth allocation,
# a small train + save + load program, and tests/fault/sweep.sh: every N on the reference
# backend, a sample on onednn (tests/fault/sweep.sh BUILD onednn --all runs every N). Not under
# the sanitizers: ASan's allocator must come first and is not interposable by the shim.
if(NOT TORC_SANITIZE)
  add_library(failmalloc MODULE ${CMAKE_CURRENT_SOURCE_DIR}/fault/failmalloc.c)
  target_compile_options(failmalloc PRIVATE ${TORC_WARNINGS})
  set_target_properties(failmalloc PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/fault)
  add_executable(fault_train ${CMAKE_CURRENT_SOURCE_DIR}/fault/fault_train.c)
  target_link_libraries(fault_train PRIVATE torc ${CMAKE_DL_LIBS})
  target_compile_options(fault_train PRIVATE ${TORC_WARNINGS})
  add_dependencies(fault_train torc_plugins failmalloc)
  # Every N on the reference backend (~870 runs, ~20 s); a sample on onednn (~39000 allocations).
  add_test(NAME fault_injection_reference
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault/sweep.sh ${CMAKE_BINARY_DIR} reference --all)
  set_tests_properties(fault_injection_reference PROPERTIES LABELS "unit" TIMEOUT 600)
  if(TORC_WITH_ONEDNN)
    add_test(NAME fault_injection_onednn
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fault/sweep.sh ${CMAKE_BINARY_DIR} onednn --sample 40)
    set_tests_properties(fault_injection_onednn PROPERTIES LABELS "unit" TIMEOUT 600)
  endif()
endif()
