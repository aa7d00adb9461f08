# Data-parallel tests under mpirun (label "mpi"; tests/mpi.sh): collectives, DDP against one
# process, deterministic mode across 1, 2 and 4 processes, checkpoints across world sizes, a
# killed rank, two network namespaces over TCP, `mpirun -np 2 torc-train`, ranks that disagree
# (collectives of other sizes, torc-train started with other options), deterministic fp8 across
# world sizes, micro-batch accumulation and the deterministic mode's memory bound. Skipped (77)
# without Open MPI's mpirun.
if(TARGET torc_comm_mpi)
  add_executable(mpi_test mpi_test.c)
  target_link_libraries(mpi_test PRIVATE torc m)
  target_compile_options(mpi_test PRIVATE ${TORC_WARNINGS})
  add_dependencies(mpi_test torc_plugins)
  foreach(part collectives ddp deterministic checkpoint failure netns train mismatch agree fp8 accumulate memory)
    add_test(NAME mpi_${part} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi.sh ${part} $<TARGET_FILE:mpi_test>
      $<TARGET_FILE:torc-train>)
    set_tests_properties(mpi_${part} PROPERTIES LABELS "mpi" TIMEOUT 120 SKIP_RETURN_CODE 77
      ENVIRONMENT "TORC_BACKEND=reference;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  endforeach()
endif()
