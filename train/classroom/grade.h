// Grading a handout, for `scratchformer grade` (train/cli/cmd_grade.cpp; docs/exercises.md); the
// teacher-side grade of student copies builds on it (grade_student.h).
//
// An exercise is done when (a) its gradcheck entry (gradcheck_suite.h, named like the exercise)
// passes, run in this process, and (b) every Catch2 test tagged [word] passes in the test
// programs the build has (autograd_tests, nn_tests, ...; run as child processes with
// `-r xml -o FILE`, so a test that prints or crashes cannot fool the count): the same tests
// `ctest -L word` runs, so the two counts agree. An exercise whose tag matches no test is a grade
// error, not a pass.
//
//   GradeOptions opt;  opt.tests_dir = "build/release/tests";  opt.source_root = "~/scratchformer";
//   ExerciseGrade g = grade_exercise(*find_exercise("masks"), opt);
//   std::cout << format_grade_row(g) << grade_json_line({g}) << "\n";
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "train/classroom/exercises.h"

namespace sf::train {

// The Catch2 programs of a build, in <build>/tests/.
const std::vector<std::string>& test_programs();

// What one Catch2 run (its -r xml report) says.
struct CatchReport {
  int passed = 0;             // test cases that passed
  int total = 0;              // test cases run
  bool complete = false;      // the report reached </Catch> (false: the program died mid-run)
  std::vector<std::string> passed_names;  // the names of the test cases that passed
  std::string first_failure;  // "tests/test_x.cpp:12: CHECK(got == 3) got 2 == 3", an exception's
                              // message, ...; empty when every case passed
};

// Parses Catch2 v2's XML report. Paths in it are shown relative to `source_root` when under it.
// A report cut short (a crash) counts its open test case as failed.
CatchReport parse_catch_xml(const std::string& xml, const std::string& source_root = "");

struct GradeOptions {
  std::filesystem::path tests_dir;    // where test_programs() are
  std::string source_root;            // shortens paths in messages
  std::vector<std::string> programs = test_programs();
  // The Catch2 test spec of an exercise's tests; by default "[word]", the tests `ctest -L word` runs.
  std::function<std::string(const std::string& word)> test_spec;
  bool run_gradcheck = true;          // false: only the Catch2 tests (tests of grade itself)
  // Test cases left out of tests_passed/tests_total: those that pass on the handout's stub
  // (grade_student.h), which would give credit for nothing. They still must pass for "done".
  std::set<std::string> not_counted;
};

enum class GradeStatus { done, failing, error };

struct ExerciseGrade {
  std::string word, title, title_zh;
  GradeStatus status = GradeStatus::error;
  int tests_passed = 0, tests_total = 0;  // without opt.not_counted
  int not_counted = 0;                    // tests run but left out of the two counts
  std::string gradcheck;      // "pass", "FAIL", or "-" when not run
  std::string first_failure;  // the first thing that failed (gradcheck first), or the grade error
};

// Grades one exercise (runs its gradcheck entry and its tests). Throws std::invalid_argument when
// a test program is missing from opt.tests_dir (the build is not complete).
ExerciseGrade grade_exercise(const Exercise& e, const GradeOptions& opt);

// "done / 完成", "failing / 未完成", "error / 出错".
std::string grade_status_label(GradeStatus s);
// The table's header line and one row (ends with "\n"); the first failure is cut to one line.
std::string format_grade_header();
std::string format_grade_row(const ExerciseGrade& g);
// "3/14 exercises done / 完成 3/14 个练习".
std::string format_grade_total(const std::vector<ExerciseGrade>& grades);
// GRADE {"done":3,"total":14,"exercises":{"matmul":"done","masks":"failing",...}} (no "\n").
std::string grade_json_line(const std::vector<ExerciseGrade>& grades);
// Every field of every row, for --json.
std::string grade_json_document(const std::vector<ExerciseGrade>& grades);

// `grade --build`: rebuilds `targets` in the CMake build tree `build_dir` (only what changed is
// recompiled), passing each line of the build to `progress` as it comes. status is cmake's exit
// status; first_error the build's first error line when it failed.
struct RebuildResult {
  int status = 0;
  std::string first_error;
};
RebuildResult rebuild(const std::filesystem::path& build_dir, const std::vector<std::string>& targets,
                      std::ostream& progress);

}  // namespace sf::train
