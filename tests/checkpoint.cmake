# torc <-> Python safetensors (numpy): tests/safetensors_interop.py drives tests/ckpt_interop.c.
# It needs python3 with numpy and safetensors (CI installs them); without them it fails.
add_executable(ckpt_interop ${CMAKE_CURRENT_SOURCE_DIR}/ckpt_interop.c)
target_link_libraries(ckpt_interop PRIVATE torc m)
target_compile_options(ckpt_interop PRIVATE ${TORC_WARNINGS})
add_dependencies(ckpt_interop torc_plugins)
add_test(NAME checkpoint_python
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/safetensors_interop.py $<TARGET_FILE:ckpt_interop>
          ${CMAKE_CURRENT_BINARY_DIR}/interop)
set_tests_properties(checkpoint_python PROPERTIES LABELS "unit" TIMEOUT 120)
