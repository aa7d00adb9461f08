# libFuzzer harnesses (tests/fuzz/): see tests/fuzz/CMakeLists.txt.
add_subdirectory(fuzz)
