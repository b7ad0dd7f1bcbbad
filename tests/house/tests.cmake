# The house rules: format, arrows between folders, function length.

# Sources follow the checked-in .clang-format.
find_program(CLANG_FORMAT NAMES clang-format clang-format-14)
if(CLANG_FORMAT)
  add_test(NAME format.clang_format
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_format.sh ${CLANG_FORMAT} ${PROJECT_SOURCE_DIR})
endif()

# The house rules (tests/house): the include check itself (the real tree passes; a forbidden
# arrow and a private header fail with their messages), and no function over 60 lines outside
# the benchmarks (universal-ctags).
add_test(NAME house.includes COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/house/check_includes_test.sh
                                     ${PROJECT_SOURCE_DIR})
add_test(NAME house.function_length
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/house/function_length.py ${PROJECT_SOURCE_DIR})
