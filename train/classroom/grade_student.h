// Grading on the teacher's side: `scratchformer grade --student DIR` and `--collect DIR...`.
//
// A student's own `grade` runs the student's tree: its tests, its grader. Here the teacher's tree
// decides. From the student's copy only the exercise regions are taken: in the handout each
// region became a stub line under its `// EXERCISE(word):` comment, and the student wrote their
// code in its place, up to the end of the function (a region is a function's whole body or its
// whole tail, autograd/exercise.h). Those lines replace the teacher's solution in a clean copy of
// the teacher's tree (the grading tree), which is built with the `reference` preset (every op runs
// its plain kernel, so a fast kernel never stands in for the student's code) and only for the
// test programs that hold the exercises' tests. The tests run are the teacher's: an edited test in
// the student's copy changes nothing, and tests hidden from the handout (related regions) run too.
//
//   GradingTree tree{"~/scratchformer", "~/scratchformer/build/grading"};
//   const StudentGrade s = grade_student(tree, "/home/t/class-1/ana", {"masks"}, tests_dir);
//   std::cout << gradebook_csv({s});
#pragma once

#include <filesystem>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "train/classroom/grade.h"

namespace sf::train {

// The lines a student wrote for each region of exercise `word` in one file, in file order: after
// each `// EXERCISE(word):` comment block up to the function's closing brace (the first later line
// starting with "}" that is indented less than the comment). Throws std::invalid_argument
// "path: ..." when the file does not hold `count` such comments.
std::vector<std::vector<std::string>> student_regions(const std::string& path, const std::string& student_text,
                                                      const std::string& word, int count);

// The teacher's file with each region of a word in `words` replaced by the student's lines; the
// other regions keep their solution (markers dropped). Related regions keep the teacher's code.
// `teachers_parts`: functions (region_function names) whose region keeps the teacher's solution
// even when its word is graded: how one part of an exercise is tried alone.
std::string merge_student_file(const std::string& path, const std::string& teacher_text,
                               const std::string& student_text, const std::vector<std::string>& words,
                               const std::set<std::string>& teachers_parts = {});

struct GradingTree {
  std::filesystem::path teacher;  // the teacher's source tree
  std::filesystem::path work;     // where the grading tree (work/tree) and its build live
};

// One part of an exercise (a function of Exercise::functions) tried alone: the student's region
// for it, the teacher's for the exercise's other parts; it works when every test then passes.
struct PartResult {
  std::string function;
  int weight = 1;
  bool works = false;
};

struct StudentGrade {
  std::string name;                            // the student directory's name
  std::vector<ExerciseGrade> grades;           // one per exercise, in course order
  std::vector<std::vector<PartResult>> parts;  // per exercise, its parts (filled by grade_student)
};

// "3/3": the weights of the parts that work over all the exercise's weights.
std::string part_score(const std::vector<PartResult>& parts);

// The test programs of the teacher's build (in tests_dir) that hold a test tagged [word].
std::vector<std::string> programs_for(const std::filesystem::path& tests_dir, const std::string& word);

// Grades the exercises `words` of the handout copy `student_dir` in the grading tree: syncs it
// with the teacher's tree (rewriting only files that differ, so the build is incremental), puts
// the student's regions in, builds the test programs the exercises need and runs their tests
// tagged [word], leaving out of the counts the tests in not_counted[word] (stub_baseline). A build
// that fails makes every exercise an error with the compiler's first error. Then each part of an
// exercise that is not done is tried alone (one more incremental build per part): its weights
// make the part score, the partial credit.
// `progress` receives one line per stage.
StudentGrade grade_student(const GradingTree& tree, const std::filesystem::path& student_dir,
                           const std::vector<std::string>& words, const std::filesystem::path& teacher_tests_dir,
                           std::ostream& progress,
                           const std::map<std::string, std::set<std::string>>& not_counted = {});

// The tests of each word that pass on the untouched handout (its stubs in the grading tree): they
// would give credit for nothing, so grade_student leaves them out of the counts (not_counted).
std::map<std::string, std::set<std::string>> stub_baseline(const GradingTree& tree, const std::vector<std::string>& words,
                                                           const std::filesystem::path& teacher_tests_dir,
                                                           std::ostream& progress);

// A CSV gradebook: student, then per exercise its status, tests passed/total and weighted part
// score, then done, total and the first failure. Fields are quoted where they hold a comma, quote or newline.
std::string gradebook_csv(const std::vector<StudentGrade>& students, const std::vector<std::string>& words);

}  // namespace sf::train
