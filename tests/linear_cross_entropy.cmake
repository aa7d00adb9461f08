# tests/linear_cross_entropy.cmake — torc_linear_cross_entropy's bits at 1 and 3 threads on the
# oneDNN backend: test_linear_cross_entropy bits prints a hash of the loss, dx and dW at GPT-2's
# vocabulary (1100 rows in 4 chunks of 275), and the two lines must be equal (the plain registration,
# "linear_cross_entropy", is the suite itself).
if(TORC_WITH_ONEDNN)
  add_test(NAME linear_cross_entropy_threads COMMAND bash -c
    "a=$(TORC_NUM_THREADS=1 \"$0\" bits) && b=$(TORC_NUM_THREADS=3 \"$0\" bits) && echo \"1 thread:  $a\" && echo \"3 threads: $b\" && [ -n \"$a\" ] && [ \"$a\" = \"$b\" ]"
    $<TARGET_FILE:test_linear_cross_entropy>)
  set_tests_properties(linear_cross_entropy_threads PROPERTIES LABELS "unit"
    ENVIRONMENT "TORC_BACKEND=onednn;TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
endif()
