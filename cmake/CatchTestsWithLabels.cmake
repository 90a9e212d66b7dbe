# catch_discover_tests_with_labels(TARGET)
#
# Registers every Catch2 (v2) test case of TARGET with CTest, one CTest test per test case, and
# turns its tags into CTest labels, so `ctest -L grad` runs one topic. (Debian's Catch2 v2
# `catch_discover_tests` makes the tests but not the labels.) Discovery runs after each build:
# the executable lists each test case with its tags (`--list-labels`, tests/test_main.cpp); a
# tag not declared in tests/TAGS.txt fails the build (cmake/TestTags.cmake; the same check runs
# on the sources at configure time).
function(catch_discover_tests_with_labels target)
  # Every test file includes Catch2's 17,000-line header: parse it once per test program.
  target_precompile_headers(${target} PRIVATE <catch2/catch.hpp>)
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND}
      -D "TEST_EXECUTABLE=$<TARGET_FILE:${target}>"
      -D "TEST_WORKING_DIR=${CMAKE_CURRENT_BINARY_DIR}"
      -D "CTEST_FILE=${out}"
      -D "TAGS_FILE=${PROJECT_SOURCE_DIR}/tests/TAGS.txt"
      -P "${PROJECT_SOURCE_DIR}/cmake/CatchListTests.cmake"
    VERBATIM BYPRODUCTS "${out}")
  # CTest includes this wrapper, which skips the list until the executable has been built once
  # (so `ctest` works in a partly built tree).
  set(wrapper "${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake")
  file(WRITE "${wrapper}" "if(EXISTS \"${out}\")\n  include(\"${out}\")\nelse()\n  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${wrapper}")
endfunction()
