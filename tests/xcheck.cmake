# tests/xcheck.cmake — torc-xcheck as ctest tests (label "xcheck"): the reference against itself
# (a sanity check of the tool, of the reference's guards and of in-place aliasing) and, when it is
# built, the oneDNN backend against the reference.
if(TARGET torc-xcheck)
  add_test(NAME xcheck_reference COMMAND torc-xcheck --backend reference --quiet)
  set_tests_properties(xcheck_reference PROPERTIES LABELS "xcheck" TIMEOUT 600)
  if(TORC_WITH_ONEDNN AND TARGET torc_onednn)
    add_test(NAME xcheck_onednn COMMAND torc-xcheck --backend onednn --quiet)
    set_tests_properties(xcheck_onednn PROPERTIES LABELS "xcheck" TIMEOUT 600
      ENVIRONMENT "TORC_NUM_THREADS=2")
  endif()
endif()
