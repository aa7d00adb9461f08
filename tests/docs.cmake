# README.md and docs/*.md against the tree (tools/check-docs.sh, its rules at its top): relative
# links resolve, every --flag a document gives a torc tool is in that tool's --help, every C block
# compiles against core/include.
add_test(NAME docs COMMAND bash ${PROJECT_SOURCE_DIR}/tools/check-docs.sh ${CMAKE_BINARY_DIR})
set_tests_properties(docs PROPERTIES LABELS "docs" TIMEOUT 120
  ENVIRONMENT "CC=${CMAKE_C_COMPILER}")
