// Grading on the teacher's side (train/classroom/grade_student.h; `scratchformer grade --student`,
// `grade --collect`):
//   student_regions finds what a student wrote under each EXERCISE comment, up to the end of the
//     function, and refuses a copy whose EXERCISE comments were removed;
//   merge_student_file puts those lines in place of the teacher's solution and nothing else: an
//     edit outside a region stays out;
//   THE CLASS TEST: a handout of masks and four copies of it (untouched, half done, done, and
//     untouched with the masks tests edited to pass) graded by `grade --collect` in a clean tree
//     built with the reference preset give the right CSV; the edited test changes nothing.
#include "handout_util.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "train/classroom/grade_student.h"
#include "train/classroom/handout.h"

using Catch::Matchers::Contains;
using namespace sf::train;
using namespace sf::test;
namespace fs = std::filesystem;

namespace {

// `text` with the n-th (0-based) stub line of `word` replaced by `lines`.
std::string fill_stub(const std::string& text, const std::string& word, int n, const std::string& lines) {
  const std::string stub = "sf::exercise::not_implemented(\"" + word + "\", __func__, __FILE__);";
  std::size_t at = 0;
  for (int k = 0; k <= n; ++k) {
    at = text.find(stub, k == 0 ? 0 : at + 1);
    REQUIRE(at != std::string::npos);
  }
  const std::size_t line_start = text.rfind('\n', at) + 1;
  return text.substr(0, line_start) + lines + text.substr(text.find('\n', at));
}

}  // namespace

TEST_CASE("student_regions and merge_student_file take the student's lines and nothing else", "[handout]") {
  const std::string teacher = read(kFixture / "autograd" / "ops_fixture.cpp");
  std::string student = handout_text("autograd/ops_fixture.cpp", teacher, {"softmax"});
  student = fill_stub(student, "softmax", 0, "  const int mine = x * 42;\n  return mine;");
  student = fill_stub(student, "softmax", 0, "  return checked + 1;  // my backward");
  student = "int extra() { return 7; }  // written outside every region\n" + student;
  const auto regions = student_regions("autograd/ops_fixture.cpp", student, "softmax", 2);
  REQUIRE(regions.size() == 2);
  CHECK(regions[0] == std::vector<std::string>{"  const int mine = x * 42;", "  return mine;"});
  CHECK(regions[1] == std::vector<std::string>{"  return checked + 1;  // my backward"});
  const std::string merged = merge_student_file("autograd/ops_fixture.cpp", teacher, student, {"softmax"});
  CHECK_THAT(merged, Contains("  // EXERCISE(softmax): the forward of the fixture.\n  const int mine = x * 42;\n  return mine;\n}"));
  CHECK_THAT(merged, Contains("  int checked = g;  // argument checks stay\n"));
  CHECK_THAT(merged, Contains("return fixture_causal_rule(i, j) && j > i;"));  // masks not graded: the teacher's
  CHECK(merged.find("fixture_forward_answer") == std::string::npos);
  CHECK(merged.find("extra") == std::string::npos);
  CHECK(merged.find("SOLUTION") == std::string::npos);
  // One part alone: the student's backward, the teacher's forward.
  const std::string part = merge_student_file("autograd/ops_fixture.cpp", teacher, student, {"softmax"},
                                              {"fixture_softmax_forward"});
  CHECK_THAT(part, Contains("const int fixture_forward_answer = x * 41;"));
  CHECK_THAT(part, Contains("return checked + 1;  // my backward"));
  CHECK(part.find("const int mine") == std::string::npos);
  // A tab-indented region, at the end of a file with no last newline.
  const std::string header = read(kFixture / "nn" / "layer_fixture.h");
  const std::string mine = fill_stub(handout_text("nn/layer_fixture.h", header, {"relu"}), "relu", 0, "\treturn x;");
  CHECK(student_regions("nn/layer_fixture.h", mine, "relu", 1) == std::vector<std::vector<std::string>>{{"\treturn x;"}});
  // A copy whose EXERCISE comment was deleted cannot be matched to the teacher's regions.
  std::string cut = student;
  cut.erase(cut.find("  // EXERCISE(softmax): the forward"), std::string("  // EXERCISE(softmax): the forward of the fixture.\n").size());
  CHECK_THROWS_WITH(student_regions("autograd/ops_fixture.cpp", cut, "softmax", 2),
                    Contains("expected 2 // EXERCISE(softmax): comment(s), as in the handout, found 1"));
}

TEST_CASE("gradebook_csv: one row per student, quoted where needed", "[handout]") {
  ExerciseGrade done{"masks", "t", "t", GradeStatus::done, 2, 2, 0, "-", ""};
  ExerciseGrade failing{"masks", "t", "t", GradeStatus::failing, 1, 2, 0, "-", "a, \"b\""};
  CHECK(gradebook_csv({{"ana", {done}, {}}, {"bo", {failing}, {}}}, {"masks"}) ==
        "student,masks,masks tests,masks score,done,total,first failure\n"
        "ana,done,2/2,-,1,1,\n"
        "bo,failing,1/2,-,0,1,\"masks: a, \"\"b\"\"\"\n");
}

TEST_CASE("grade --collect grades a class of handout copies with the teacher's tests", "[handout][cli][builds]") {
  std::string t = (fs::temp_directory_path() / "sf-class-XXXXXX").string();
  REQUIRE(mkdtemp(t.data()) != nullptr);
  const fs::path dir = t;
  std::string printed;
  const fs::path untouched = dir / "untouched";
  REQUIRE(run(quoted(kBinary) + " handout --exercises masks --out-dir " + quoted(untouched) + " 2>&1", printed) == 0);
  for (const char* name : {"half", "done", "edited"}) fs::copy(untouched, dir / name, fs::copy_options::recursive);
  // The teacher's two masks regions, in order, as the "done" student writes them.
  std::vector<std::string> solutions;
  for (const SolutionRegion& r : find_solution_regions("nn/attention.cpp", read(kSource / "nn/attention.cpp"))) {
    if (r.word != "masks") continue;
    std::string lines;
    for (const std::string& l : r.solution) lines += (lines.empty() ? "" : "\n") + l;
    solutions.push_back(lines);
  }
  REQUIRE(solutions.size() == 2);
  const fs::path file = "nn/attention.cpp";
  write(dir / "done" / file, fill_stub(fill_stub(read(untouched / file), "masks", 0, solutions[0]), "masks", 0, solutions[1]));
  write(dir / "half" / file, fill_stub(read(untouched / file), "masks", 0, solutions[0]));
  // The "edited" student makes every masks test return at once: the teacher's tests run instead.
  const fs::path tests = dir / "edited" / "tests" / "test_exercises.cpp";
  const std::string edited =
      std::regex_replace(read(tests), std::regex(R"((TEST_CASE\("[^"]*",\s*"[^"]*\[masks\][^"]*"\)\s*\{))"), "$1 return;");
  REQUIRE(edited != read(tests));
  write(tests, edited);

  const fs::path csv = dir / "grades.csv";
  const int status = run(quoted(kBinary) + " grade --collect " + quoted(untouched) + " " + quoted(dir / "half") + " " +
                             quoted(dir / "done") + " " + quoted(dir / "edited") + " --work " + quoted(dir / "work") +
                             " --csv " + quoted(csv) + " 2>&1",
                         printed);
  INFO(printed);
  CHECK(status == 1);  // not every student is done
  const std::string book = read(csv);
  INFO(book);
  std::istringstream rows(book);
  std::vector<std::string> row(5);
  for (std::string& r : row) std::getline(rows, r);
  CHECK(row[0] == "student,masks,masks tests,masks score,done,total,first failure");
  CHECK(row[1].starts_with("untouched,failing,0/2,0/2,0,1,"));
  CHECK_THAT(row[1], Contains("implement causal_mask (exercise masks)"));
  CHECK(row[2].starts_with("half,failing,1/2,1/2,0,1,"));  // causal_mask written (it works alone), padding_mask not
  CHECK(row[3] == "done,done,2/2,2/2,1,1,");
  CHECK(row[4].starts_with("edited,failing,0/2,0/2,0,1,"));  // the edited tests changed nothing
  CHECK_THAT(printed, Contains("parts / 部分: causal_mask works (1) padding_mask fails (1) = 1/2"));
  fs::remove_all(dir);
}

TEST_CASE("rebuild (grade --build) recompiles what changed and reports the first compiler error", "[handout]") {
  // A one-target CMake project of its own: the test never rebuilds the tree it is part of.
  const TempDir dir("sf-rebuild");
  write(dir.path / "CMakeLists.txt", "cmake_minimum_required(VERSION 3.25)\nproject(tiny CXX)\nadd_executable(tiny tiny.cpp)\n");
  write(dir.path / "tiny.cpp", "int main() { return 0; }\n");
  std::string out;
  REQUIRE(run("cmake -S " + quoted(dir.path) + " -B " + quoted(dir.path / "build") + " >/dev/null 2>&1", out) == 0);
  std::ostringstream progress;
  const RebuildResult first = rebuild(dir.path / "build", {"tiny"}, progress);
  CHECK(first.status == 0);
  CHECK(first.first_error.empty());
  CHECK_THAT(progress.str(), Contains("Building CXX object"));
  CHECK(fs::is_regular_file(dir.path / "build" / "tiny"));
  // Nothing changed: nothing is compiled again.
  std::ostringstream again;
  CHECK(rebuild(dir.path / "build", {"tiny"}, again).status == 0);
  CHECK_THAT(again.str(), !Contains("Building CXX object"));
  // A mistake: the status says so and the first error names the file and line.
  write(dir.path / "tiny.cpp", "int main() {\n  return undeclared_name;\n}\n");
  std::ostringstream broken;
  const RebuildResult failed = rebuild(dir.path / "build", {"tiny"}, broken);
  CHECK(failed.status != 0);
  CHECK_THAT(failed.first_error, Contains("tiny.cpp:2") && Contains("error:") && Contains("undeclared_name"));
  // Not a build tree: a clear error, nothing run.
  CHECK_THROWS_WITH(rebuild(dir.path, {"tiny"}, broken), Contains("is not a CMake build tree") && Contains("cmake --preset student"));
}

TEST_CASE("grade --build is the student's own grade: not with --student or --collect", "[handout][errors]") {
  std::string printed;
  CHECK(run(quoted(kBinary) + " grade --build --student /tmp 2>&1", printed) == 2);
  CHECK_THAT(printed, Contains("--build") && Contains("excludes"));
}
