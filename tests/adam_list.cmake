# tests/test_adam_list.c: the onednn cases where this build has the backend.
if(TARGET torc_onednn)
  target_compile_definitions(test_adam_list PRIVATE TORC_TEST_ONEDNN)
endif()
