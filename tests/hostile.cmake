# The bad-input suite (test_hostile.c) also checks torc-train's flag parser, built into it.
target_sources(test_hostile PRIVATE ${PROJECT_SOURCE_DIR}/tools/train_args.c)
target_include_directories(test_hostile PRIVATE ${PROJECT_SOURCE_DIR}/tools)
