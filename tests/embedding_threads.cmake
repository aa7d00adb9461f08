# tests/embedding_threads.cmake — the embedding suite again on the oneDNN backend at 1 and 3 threads
# (the plain registration runs at the default count): its backward_is_the_sequential_sum test
# requires the weight gradient's bits to equal the in-order float sum, so they cannot depend on the
# thread count (issue 36: an index_add deterministic whatever the threads).
if(TORC_WITH_ONEDNN)
  foreach(n 1 3)
    add_test(NAME embedding_threads${n} COMMAND test_embedding)
    set_tests_properties(embedding_threads${n} PROPERTIES LABELS "unit"
      ENVIRONMENT "TORC_BACKEND=onednn;TORC_NUM_THREADS=${n};CK_RUN_CASE=embedding;TORC_TEST_DATA=${CMAKE_CURRENT_SOURCE_DIR}/golden")
  endforeach()
endif()
