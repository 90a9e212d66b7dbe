# The declared test topics (tests/TAGS.txt) and the checks that every tag is one of them.
#
#   sf_read_declared_tags(FILE OUT_VAR)     the tags of FILE, in order
#   sf_check_source_tags(FILE SOURCE...)    at configure time: the tags of every TEST_CASE /
#                                           SCENARIO in each SOURCE must be declared in FILE
#   sf_set_test_labels(FILE TEST LABEL...)  LABELS of a test added by hand, each declared
#
# (No IN_LIST: cmake/CatchListTests.cmake runs in script mode, where that policy is off.)
# Included by tests/CMakeLists.txt (configure time) and by cmake/CatchListTests.cmake (after each
# build of a test program, on the tags the program itself lists), so an undeclared tag is caught
# whether or not cmake runs again.

# FILE: one tag per line, `#` starts a comment, blank lines are skipped.
function(sf_read_declared_tags file out_var)
  file(STRINGS "${file}" lines)
  set(tags "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "#.*$" "" line "${line}")
    string(STRIP "${line}" line)
    if(line STREQUAL "")
      continue()
    endif()
    if(NOT line MATCHES "^[a-z0-9_]+$")
      message(FATAL_ERROR "${file}: '${line}' is not a tag (one lower-case word of a-z, 0-9 and _ per line, then an optional # comment)")
    endif()
    list(FIND tags "${line}" seen)
    if(NOT seen EQUAL -1)
      message(FATAL_ERROR "${file}: tag '${line}' is declared twice")
    endif()
    list(APPEND tags "${line}")
  endforeach()
  set(${out_var} "${tags}" PARENT_SCOPE)
endfunction()

# The error for an undeclared tag: where it is, what it is, and the declared ones.
function(sf_undeclared_tag_error where tag tags_file tags)
  string(REPLACE ";" " " declared "${tags}")
  message(FATAL_ERROR "${where}: tag [${tag}] is not declared in ${tags_file}; add it there (in course "
                      "order, with a comment) or use a declared one: ${declared}")
endfunction()

# Catch2's special tags ([.], [!mayfail], [.slow], [#file]) are not topics.
function(sf_is_special_tag tag out_var)
  if(tag MATCHES "^[.!#]")
    set(${out_var} TRUE PARENT_SCOPE)
  else()
    set(${out_var} FALSE PARENT_SCOPE)
  endif()
endfunction()

function(sf_check_source_tags tags_file)
  sf_read_declared_tags("${tags_file}" tags)
  foreach(source IN LISTS ARGN)
    file(READ "${source}" text)
    # CMake lists split on ';' except inside [...]: take both out of the text before matching.
    string(REPLACE ";" "," text "${text}")
    string(REPLACE "[" "<:" text "${text}")
    string(REPLACE "]" ":>" text "${text}")
    # From each TEST_CASE( / SCENARIO( at the start of a line up to the body's '{'.
    string(REGEX MATCHALL "\n[ \t]*(TEST_CASE|SCENARIO|TEST_CASE_METHOD|TEMPLATE_TEST_CASE)[ \t\r\n]*\\([^{]*"
           heads "\n${text}")
    foreach(head IN LISTS heads)
      # Its string literals: the first is the name, a later one starting with '[' the tags.
      string(REGEX MATCHALL "\"[^\"]*\"" literals "${head}")
      list(LENGTH literals n)
      if(n LESS 2)
        continue()
      endif()
      list(SUBLIST literals 1 -1 rest)
      foreach(literal IN LISTS rest)
        if(NOT literal MATCHES "^\"<:")
          continue()
        endif()
        string(REGEX MATCHALL "<:[^:]*:>" found "${literal}")
        foreach(t IN LISTS found)
          string(REGEX REPLACE "^<:(.*):>$" "\\1" tag "${t}")
          sf_is_special_tag("${tag}" special)
          list(FIND tags "${tag}" declared)
          if(special OR NOT declared EQUAL -1)
            continue()
          endif()
          # The line of this test case, for the message.
          string(FIND "\n${text}" "${head}" at)
          string(SUBSTRING "\n${text}" 0 ${at} before)
          string(REGEX MATCHALL "\n" newlines "${before}")
          list(LENGTH newlines line)
          math(EXPR line "${line} + 1")
          file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${source}")
          file(RELATIVE_PATH rel_tags "${PROJECT_SOURCE_DIR}" "${tags_file}")
          sf_undeclared_tag_error("${rel}:${line}" "${tag}" "${rel_tags}" "${tags}")
        endforeach()
      endforeach()
    endforeach()
  endforeach()
endfunction()

function(sf_set_test_labels tags_file test)
  sf_read_declared_tags("${tags_file}" tags)
  foreach(label IN LISTS ARGN)
    list(FIND tags "${label}" declared)
    if(declared EQUAL -1)
      file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${CMAKE_CURRENT_LIST_FILE}")
      file(RELATIVE_PATH rel_tags "${PROJECT_SOURCE_DIR}" "${tags_file}")
      sf_undeclared_tag_error("${rel}: LABELS of test ${test}" "${label}" "${rel_tags}" "${tags}")
    endif()
  endforeach()
  set_tests_properties(${test} PROPERTIES LABELS "${ARGN}")
endfunction()
