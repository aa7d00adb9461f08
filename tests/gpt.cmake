# The GPT suite (test_gpt.c, registered as "gpt" on the default host backend) again on the
# reference backend: PyTorch's logits, loss, gradients and 50-step trajectories on both.
add_test(NAME gpt_reference COMMAND test_gpt)
set_tests_properties(gpt_reference PROPERTIES LABELS "unit"
  ENVIRONMENT "TORC_BACKEND=reference;TORC_TEST_DATA=${CMAKE_CURRENT_SOURCE_DIR}/golden;TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")

# The demo's path on a tiny config (tests/gpt_train.sh): torc-tokens, torc-train --model gpt,
# exact resume, refusals, divergence, torc-generate; under mpirun, data parallel and its
# deterministic mode (the same checkpoint bits on 1, 2 and 4 processes).
add_test(NAME gpt_train COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpt_train.sh $<TARGET_FILE:torc-train>
  $<TARGET_FILE:torc-tokens> $<TARGET_FILE:torc-generate> ${PROJECT_SOURCE_DIR})
set_tests_properties(gpt_train PROPERTIES LABELS "unit" TIMEOUT 300
  ENVIRONMENT "TORC_BACKEND=reference;TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")

# On a GPU (label gpu; 77, skipped, where none loads): the same PyTorch comparisons on cuda.
if(TORC_WITH_CUDA AND TARGET torc_cuda)
  add_test(NAME gpt_cuda COMMAND test_gpt)
  set_tests_properties(gpt_cuda PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77
    ENVIRONMENT "TORC_BACKEND=cuda;TORC_TEST_DATA=${CMAKE_CURRENT_SOURCE_DIR}/golden;TORC_BUILD_DIR=${CMAKE_BINARY_DIR}")
endif()
