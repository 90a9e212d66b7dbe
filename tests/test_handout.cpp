// Handouts and their grade (train/classroom/handout.h, grade.h; `scratchformer handout`, `grade`).
//   the transformation on the fixture tree tests/data/handout/tree: chosen regions become one stub
//     line at the BEGIN line's indentation, the others keep their solution without the markers;
//     non-C++ files, build*/, runs/ and .git/ are handled as the walk promises;
//   every malformed marker is an error naming file:line;
//   THE KEY TEST: a handout of all exercises of the real tree contains none of their solution
//     lines, no .git and no build dir, and a stub for every exercise; each changed .cpp still
//     compiles (-fsyntax-only with its command from the build's compile_commands.json);
//   grade in the teacher's tree passes, and its Catch2 XML reader reads a real failing run
//     (the hidden "grade fixture:" test cases below, run by a child train_tests).
#include "handout_util.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "train/classroom/exercises.h"
#include "train/classroom/grade.h"
#include "train/classroom/handout.h"

using Catch::Contains;
using namespace sf::train;
using namespace sf::test;
namespace fs = std::filesystem;

namespace {

// A solution line shorter than this (trimmed) is not searched for in the handout: "}", "return
// out;", "++i;" and the like occur everywhere, so finding one proves nothing. 16 characters
// keeps every line that computes something specific ("a[i] = b[i] * (c[i] - d);" is 25).
constexpr std::size_t kMinSearchedLine = 16;

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

std::string trim(const std::string& s) {
  const std::size_t a = s.find_first_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

// A fresh empty directory under the system's temporary directory.
fs::path temp_dir(const std::string& name) {
  std::string t = (fs::temp_directory_path() / ("sf-" + name + "-XXXXXX")).string();
  REQUIRE(mkdtemp(t.data()) != nullptr);
  return t;
}

// "Brace-only" lines: nothing but punctuation, which every function has.
bool only_punctuation(const std::string& t) { return t.find_first_not_of("{}();, ") == std::string::npos; }

// Files larger than this are data (corpora, reference tensors), not code: not read for lines.
constexpr std::uintmax_t kMaxCodeFileBytes = 1 << 20;

// The solution lines of the teacher's tree worth searching for in a handout: at least
// kMinSearchedLine characters once trimmed, not punctuation only, and not also a line of the
// tree outside every region (a `for (std::int64_t n = 0; n < N; ++n) {` or an `#pragma omp`
// that the kept code has too: the handout keeps those lines by design, so finding one proves
// nothing). `shared` gets the solution lines left out for that last reason.
std::set<std::string> searched_solution_lines(const fs::path& root, std::set<std::string>& shared) {
  std::set<std::string> inside, outside;
  for (const std::string& path : source_files(root)) {
    if (fs::file_size(root / path) > kMaxCodeFileBytes) continue;
    const std::string text = read(root / path);
    std::vector<SolutionRegion> regions;
    if (may_hold_regions(path)) regions = find_solution_regions(path, text);
    std::istringstream lines(text);
    int no = 0;
    std::size_t next = 0;
    for (std::string line; std::getline(lines, line);) {
      ++no;
      while (next < regions.size() && no > regions[next].end_line) ++next;
      const bool in_region = next < regions.size() && no >= regions[next].begin_line;
      (in_region ? inside : outside).insert(trim(line));
    }
  }
  std::set<std::string> searched;
  for (const std::string& t : inside) {
    if (t.size() < kMinSearchedLine || only_punctuation(t) || t.ends_with("SOLUTION")) continue;
    (outside.count(t) ? shared : searched).insert(t);
  }
  return searched;
}

// A compile command of the teacher's build made to read the handout: the source root replaced by
// the handout's (the build dir kept, even where it lies inside the source root), no -o.
std::string handout_command(std::string command, const std::string& source, const std::string& handout, const std::string& build) {
  const auto replace_all = [&command](const std::string& from, const std::string& to) {
    for (std::size_t at = 0; (at = command.find(from, at)) != std::string::npos; at += to.size()) command.replace(at, from.size(), to);
  };
  replace_all(build, "@SF_BUILD@");
  replace_all(source, handout);
  replace_all("@SF_BUILD@", build);
  const std::size_t o = command.find(" -o ");
  if (o != std::string::npos) command.erase(o, command.find(' ', o + 4) - o);
  return command;
}

}  // namespace

// ---- the transformation ----------------------------------------------------------------------

TEST_CASE("handout_text stubs chosen regions and drops the markers of the others", "[handout]") {
  const std::string text = read(kFixture / "autograd" / "ops_fixture.cpp");
  std::vector<std::string> stubbed;
  const std::string h = handout_text("autograd/ops_fixture.cpp", text, {"softmax"}, &stubbed);
  CHECK(stubbed == std::vector<std::string>{"softmax", "softmax"});
  CHECK_THAT(h, Contains("  // EXERCISE(softmax): the forward of the fixture.\n"
                         "  sf::exercise::not_implemented(\"softmax\", __func__, __FILE__);\n}\n"));
  CHECK_THAT(h, Contains("  int checked = g;  // argument checks stay\n"));  // code before a region stays
  CHECK_THAT(h, Contains("  // over two comment lines.\n  sf::exercise::not_implemented(\"softmax\""));
  CHECK(h.find("fixture_forward_answer") == std::string::npos);
  CHECK(h.find("the softmax fixture's backward") == std::string::npos);
  // masks was not chosen: its solution stays, at its own indentation, without the markers.
  CHECK_THAT(h, Contains("    // EXERCISE(masks): indented by four.\n    return fixture_causal_rule(i, j) && j > i;\n}\n"));
  CHECK(h.find("SOLUTION") == std::string::npos);
  // Lines: 3 + 4 + ... : each chosen region of n lines becomes 1, each unchosen one loses 2.
  const auto count = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n'); };
  CHECK(count(h) == count(text) - (4 - 1) - (3 - 1) - 2);
}

TEST_CASE("handout_text keeps tabs and a missing last newline", "[handout]") {
  const std::string text = read(kFixture / "nn" / "layer_fixture.h");
  REQUIRE(text.back() == '}');
  CHECK(handout_text("nn/layer_fixture.h", text, {"relu"}).ends_with(
      "\t// EXERCISE(relu): tab-indented.\n\tsf::exercise::not_implemented(\"relu\", __func__, __FILE__);\n}"));
  CHECK(handout_text("nn/layer_fixture.h", text, {"masks"}).ends_with("\treturn fixture_relu_answer(x > 0 ? x : 0.0f);\n}"));
}

TEST_CASE("malformed markers are errors naming file:line", "[handout][errors]") {
  const std::string ex = "  // EXERCISE(masks): m";
  const std::string begin = "  // BEGIN SOLUTION", end = "  // END SOLUTION";
  const auto fails = [](const std::vector<std::string>& lines, const std::string& where, const std::string& what) {
    INFO(joined(lines));
    CHECK_THROWS_WITH(find_solution_regions("nn/x.cpp", joined(lines)), Contains(where) && Contains(what));
    CHECK_THROWS_WITH(handout_text("nn/x.cpp", joined(lines), {"masks"}), Contains(where));
  };
  fails({"int f() {", ex, begin, "  return 1;", "}"}, "nn/x.cpp:3:", "has no // END SOLUTION");
  fails({"int f() {", ex, "  return 1;", end, "}"}, "nn/x.cpp:4:", "without a // BEGIN SOLUTION");
  fails({ex, begin, "a();", begin, "b();", end, end}, "nn/x.cpp:4:", "regions do not nest");
  fails({"int f() {", begin, "  return 1;", end, "}"}, "nn/x.cpp:2:", "no // EXERCISE(word): comment above it");
  fails({"  // EXERCISE(mask): a typo", begin, "x();", end}, "nn/x.cpp:1:", "EXERCISE(mask): unknown exercise 'mask' (did you mean 'masks'?); valid: matmul, linear");
  fails({ex, begin, "x();", "  // EXERCISE(relu): inside", end}, "nn/x.cpp:4:", "inside the solution region opened at line 2");
  fails({ex, "  // BEGIN SOLUTION (part 1)", "x();", end}, "nn/x.cpp:2:", "stands alone on its line");
  fails({"  // EXERCISE(masks) no colon", begin, end}, "nn/x.cpp:1:", "expected // EXERCISE(word): what to implement");
  // The same text, well formed, passes: the failures above come from the one broken line.
  CHECK(find_solution_regions("nn/x.cpp", joined({ex, begin, "x();", end})).size() == 1);
}

TEST_CASE("handout of the fixture tree: files, manifests, and the walk's exclusions", "[handout][io]") {
  const fs::path root = temp_dir("fixture") / "tree";
  fs::copy(kFixture, root, fs::copy_options::recursive);
  write(root / "build" / "stale.o", "build output");
  write(root / "build-debug" / "x.txt", "build output");
  write(root / "runs" / "r" / "metrics.tsv", "a run");
  REQUIRE_FALSE(fs::exists(root / ".git"));  // no .git: the files come from a walk
  const std::vector<std::string> files = source_files(root);
  CHECK(files == std::vector<std::string>{"CMakeLists.txt", "README.md", "autograd/exercise.h", "autograd/ops_fixture.cpp",
                                          "docs/notes.txt", "nn/layer_fixture.h"});
  const Handout h = make_handout(root, {"relu", "masks"});
  CHECK(h.words == std::vector<std::string>{"relu", "masks"});  // course order: relu comes first
  CHECK(h.stubs.at("masks") == 1);
  CHECK(h.stubs.at("relu") == 1);
  const fs::path out = root.parent_path() / "out";
  write_handout(h, root, out);
  CHECK(read(out / "README.md") == read(root / "README.md"));  // markers in text files are text
  CHECK(read(out / "docs" / "notes.txt") == read(root / "docs" / "notes.txt"));
  CHECK_THAT(read(out / "autograd" / "ops_fixture.cpp"), Contains("not_implemented(\"masks\""));
  CHECK_THAT(read(out / "autograd" / "ops_fixture.cpp"), Contains("const int fixture_forward_answer"));
  CHECK_FALSE(fs::exists(out / "build"));
  CHECK_FALSE(fs::exists(out / "runs"));
  const nlohmann::json manifest = nlohmann::json::parse(read(out / kHandoutManifest));
  CHECK(manifest["exercises"] == nlohmann::json::array({"relu", "masks"}));
  // Only what grade reads: no commit of the teacher's tree, whose history holds the solutions.
  CHECK(manifest.size() == 3);  // scratchformer_handout, exercises, parts
  CHECK(manifest["parts"]["masks"] == nlohmann::json::parse(
                                          R"([{"function": "causal_mask", "weight": 1}, {"function": "padding_mask", "weight": 1}])"));
  CHECK_FALSE(std::regex_search(read(out / kHandoutManifest), std::regex("[0-9a-f]{40}")));
  CHECK(read_handout_manifest(out) == std::vector<std::string>{"relu", "masks"});
  CHECK_FALSE(read_handout_manifest(root).has_value());
  CHECK_THAT(read(out / kHandoutReadme), Contains("| `masks` | the causal mask and the padding mask | 因果掩码与填充掩码 |"));
  // Refusals: a non-empty out dir, one inside the source, a word with no region, an unknown word.
  CHECK_THROWS_WITH(write_handout(h, root, out), Contains("exists and is not an empty directory"));
  CHECK_THROWS_WITH(write_handout(h, root, root / "handout"), Contains("lies inside the source tree"));
  CHECK_THROWS_WITH(make_handout(root, {"greedy"}), Contains("exercise 'greedy' has no solution region"));
  CHECK_THROWS_WITH(make_handout(root, {"soft_max"}), Contains("unknown exercise 'soft_max' (did you mean 'softmax'?); valid: matmul"));
  CHECK_THROWS_WITH(require_scratchformer_tree(root / "docs"), Contains("not a Scratchformer source tree"));
  // No half handout: a file that cannot be read stops the write and leaves nothing behind.
  Handout broken = h;
  broken.files.push_back({"does/not/exist.txt", false, "", {}});
  CHECK_THROWS(write_handout(broken, root, root.parent_path() / "half"));
  CHECK_FALSE(fs::exists(root.parent_path() / "half"));
  for (const auto& entry : fs::directory_iterator(root.parent_path()))
    CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);
  fs::remove_all(root.parent_path());
}

// ---- the real tree -----------------------------------------------------------------------------

TEST_CASE("the registry's files are where the real tree's regions are", "[handout]") {
  std::map<std::string, std::set<std::string>> found;
  for (const std::string& path : source_files(kSource))
    if (may_hold_regions(path))
      for (const SolutionRegion& r : find_solution_regions(path, read(kSource / path))) found[r.word].insert(path);
  for (const Exercise& e : exercises()) {
    INFO("exercise " << e.word);
    CHECK(found[e.word] == std::set<std::string>(e.where.begin(), e.where.end()));
  }
}

TEST_CASE("the registry names the functions the real tree's regions are in", "[handout]") {
  std::map<std::string, std::set<std::string>> found;
  for (const std::string& path : source_files(kSource)) {
    if (!may_hold_regions(path)) continue;
    const std::string text = read(kSource / path);
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    for (const SolutionRegion& r : find_solution_regions(path, text)) found[r.word].insert(region_function(lines, r.exercise_line));
  }
  for (const Exercise& e : exercises()) {
    INFO("exercise " << e.word);
    CHECK(found[e.word] == std::set<std::string>(e.functions.begin(), e.functions.end()));
  }
}

TEST_CASE("a handout of every exercise holds none of their solutions, and compiles", "[handout][cli]") {
  const fs::path out = temp_dir("handout-all") / "handout";
  std::string printed;
  REQUIRE(run(quoted(kBinary) + " handout --out-dir '" + out.string() + "' 2>&1", printed) == 0);
  INFO(printed);
  CHECK_THAT(printed, Contains("next / 下一步"));
  CHECK_FALSE(fs::exists(out / ".git"));
  CHECK_FALSE(fs::exists(out / "build"));
  CHECK(read_handout_manifest(out).value().size() == exercises().size());
  std::set<std::string> shared;
  const std::set<std::string> solution = searched_solution_lines(kSource, shared);
  REQUIRE(solution.size() > exercises().size());  // every exercise has lines worth searching for
  for (const std::string& t : shared) UNSCOPED_INFO("solution line also kept outside the regions: " << t);
  // Every file of the handout, line by line (a solution line could only come back whole).
  std::map<std::string, int> stubs;
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(out)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    const std::string rel = fs::relative(entry.path(), out).generic_string();
    CHECK_FALSE(rel.starts_with("build"));
    std::istringstream lines(read(entry.path()));
    for (std::string line; std::getline(lines, line);) {
      const std::string t = trim(line);
      if (solution.count(t)) FAIL_CHECK(rel << " holds the solution line: " << t);
      if (t.starts_with("sf::exercise::not_implemented(\"")) ++stubs[t.substr(31, t.find('"', 31) - 31)];
    }
  }
  CHECK(files > 100);
  for (const Exercise& e : exercises()) {
    INFO("exercise " << e.word);
    CHECK(stubs[e.word] >= 1);
  }
  // Each .cpp with a stub compiles: its command from compile_commands.json, reading the handout.
  const fs::path build = kBinary.parent_path();
  const nlohmann::json commands = nlohmann::json::parse(read(build / "compile_commands.json"));
  std::set<std::string> changed;  // each file once (nn/attention.cpp holds four exercises)
  for (const Exercise& e : exercises())
    for (const std::string& file : e.where)
      if (file.ends_with(".cpp")) changed.insert(file);
  // One script per file, run two at a time (each is a compiler run over one file).
  const fs::path scripts = out.parent_path() / "syntax";
  std::vector<std::string> sources(changed.begin(), changed.end());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    std::string command;
    for (const auto& c : commands)
      if (c["file"] == (kSource / sources[i]).string()) command = c["command"];
    INFO(sources[i]);
    REQUIRE_FALSE(command.empty());
    command = handout_command(command, kSource.string(), out.string(), build.string());
    write(scripts / (std::to_string(i) + ".sh"),
          "cd '" + build.string() + "' && " + command + " -fsyntax-only > '" + (scripts / (std::to_string(i) + ".log")).string() +
              "' 2>&1\necho $? > '" + (scripts / (std::to_string(i) + ".rc")).string() + "'\n");
  }
  std::string ignored;
  run("ls '" + scripts.string() + "'/*.sh | xargs -P 2 -n 1 sh", ignored);
  int compiled = 0;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    INFO(sources[i] << " in the handout does not compile: " << read(scripts / (std::to_string(i) + ".log")));
    CHECK(trim(read(scripts / (std::to_string(i) + ".rc"))) == "0");
    CHECK(read(scripts / (std::to_string(i) + ".log")) == "");
    ++compiled;
  }
  CHECK(compiled > 0);
  fs::remove_all(out.parent_path());
}

TEST_CASE("the handout command refuses bad input with exit status 2", "[handout][cli][errors]") {
  const fs::path dir = temp_dir("handout-bad");
  write(dir / "full" / "x.txt", "something");
  std::string printed;
  const std::string bin = quoted(kBinary) + " handout ";
  CHECK(run(bin + "--out-dir '" + (dir / "full").string() + "' 2>&1", printed) == 2);
  CHECK_THAT(printed, Contains("exists and is not an empty directory"));
  CHECK(run(bin + "--out-dir '" + (dir / "o").string() + "' --exercises softmax,nope 2>&1", printed) == 2);
  CHECK_THAT(printed, Contains("unknown exercise 'nope' (did you mean 'rope'?); valid: matmul, linear, relu"));
  CHECK(run(bin + "--out-dir '" + (dir / "o").string() + "' --source '" + dir.string() + "' 2>&1", printed) == 2);
  CHECK_THAT(printed, Contains("not a Scratchformer source tree"));
  CHECK(run(bin + "--out-dir '" + (dir / "o").string() + "' --lecture atention 2>&1", printed) == 2);
  CHECK_THAT(printed, Contains("unknown lecture 'atention'; valid: autograd, attention, positions"));
  CHECK(run(bin + "--lecture attention --exercises masks 2>&1", printed) == 2);  // one or the other
  CHECK(run(bin + "--exercises masks 2>&1", printed) == 2);
  CHECK_THAT(printed, Contains("expected --out-dir DIR"));
  CHECK_FALSE(fs::exists(dir / "o"));
  fs::remove_all(dir);
}

TEST_CASE("closest_exercise suggests a word for a typo, and only for a typo", "[handout]") {
  CHECK(closest_exercise("soft_max") == "softmax");
  CHECK(closest_exercise("layernorm") == "layer_norm");
  CHECK(closest_exercise("mask") == "masks");
  CHECK(closest_exercise("cross") == "cross_entropy");  // the start of a word
  CHECK(closest_exercise("attention").empty());           // a lecture, far from every exercise
  CHECK(closest_exercise("xyz").empty());
}

TEST_CASE("every exercise belongs to a lecture, and --lecture picks them in course order", "[handout]") {
  std::set<std::string> words;
  for (const Lecture& l : lectures()) words.insert(l.word);
  std::size_t in_lectures = 0;
  for (const Lecture& l : lectures()) in_lectures += lecture_exercises(l.word).size();
  for (const Exercise& e : exercises()) CHECK(words.count(e.lecture) == 1);
  CHECK(in_lectures == exercises().size());
  CHECK(lecture_exercises("attention") ==
        std::vector<std::string>{"scaled_dot_product", "masks", "multi_head", "softmax"});
  CHECK_THROWS_WITH(lecture_exercises("nope"), Contains("unknown lecture 'nope'"));
}

TEST_CASE("handout --list and --solutions print, and write nothing", "[handout][cli]") {
  std::string printed;
  REQUIRE(run(quoted(kBinary) + " handout --list 2>&1", printed) == 0);
  for (const Exercise& e : exercises()) {
    CHECK_THAT(printed, Contains("  " + e.word + " "));
    CHECK_THAT(printed, Contains(e.title_zh));
  }
  CHECK_THAT(printed, Contains("attention: scaled dot-product attention"));
  REQUIRE(run(quoted(kBinary) + " handout --solutions --exercises masks 2>&1", printed) == 0);
  CHECK_THAT(printed, Contains("## masks: the causal mask and the padding mask"));
  CHECK_THAT(printed, Contains("nn/attention.cpp:"));
  CHECK_THAT(printed, !Contains("## softmax"));
  // The key is the solution lines themselves.
  for (const SolutionRegion& r : find_solution_regions("nn/attention.cpp", read(kSource / "nn/attention.cpp")))
    if (r.word == "masks")
      for (const std::string& line : r.solution) CHECK_THAT(printed, Contains(line));
}

// ---- grade ---------------------------------------------------------------------------------------

TEST_CASE("grade in the teacher's tree: the chosen exercises are done", "[handout][cli]") {
  std::string printed;
  const int status = run(quoted(kBinary) + " grade --exercise softmax --exercise masks 2>&1", printed);
  INFO(printed);
  CHECK(status == 0);
  CHECK_THAT(printed, Contains("2/2 exercises done"));
  const std::size_t at = printed.find("GRADE ");
  REQUIRE(at != std::string::npos);
  const nlohmann::json grade = nlohmann::json::parse(printed.substr(at + 6, printed.find('\n', at) - at - 6));
  CHECK(grade["done"] == 2);
  CHECK(grade["total"] == 2);
  CHECK(grade["exercises"]["softmax"] == "done");
  CHECK(grade["exercises"]["masks"] == "done");
  CHECK(run(quoted(kBinary) + " grade --exercise nope 2>&1", printed) == 2);
  CHECK_THAT(printed, Contains("unknown exercise 'nope'"));
}

// Three hidden test cases ([.]: not run by ctest or without a name) that the grade test below
// runs in a child train_tests, to have the XML of a real failing Catch2 run.
TEST_CASE("grade fixture: a passing check", "[.]") { CHECK(std::string("ab").size() == 2); }

TEST_CASE("grade fixture: a failing check", "[.]") {
  const int got = static_cast<int>(std::string("ab").size());
  CHECK(got == 3);
}

TEST_CASE("grade fixture: an exercise not written yet", "[.]") {
  throw std::logic_error("exercise: implement fixture (exercise masks)");
}

TEST_CASE("grade reads a real failing Catch2 run: counts, the first failure, the exception", "[handout]") {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  REQUIRE_FALSE(ec);
  GradeOptions opt;
  opt.tests_dir = self.parent_path();
  opt.source_root = kSource.string();
  opt.programs = {self.filename().string()};
  opt.run_gradcheck = false;
  opt.test_spec = [](const std::string&) { return std::string("grade fixture:*"); };
  const ExerciseGrade g = grade_exercise(*find_exercise("masks"), opt);
  CHECK(g.status == GradeStatus::failing);
  CHECK(g.tests_passed == 1);
  CHECK(g.tests_total == 3);
  CHECK_THAT(g.first_failure, Contains("tests/test_handout.cpp:") && Contains("got == 3 got 2 == 3"));
  CHECK_THAT(format_grade_row(g), Contains("failing / 未完成") && Contains("1/3"));
  CHECK_THAT(format_grade_row(g), Contains("to fix / 要改的函数: causal_mask, padding_mask (nn/attention.cpp)"));
  CHECK(grade_json_line({g}) == R"(GRADE {"done":0,"total":1,"exercises":{"masks":"failing"}})");
  // A test that passes on the untouched handout counts for nothing (the teacher's grade leaves it out).
  opt.not_counted = {"grade fixture: a passing check"};
  const ExerciseGrade left_out = grade_exercise(*find_exercise("masks"), opt);
  CHECK(left_out.tests_passed == 0);
  CHECK(left_out.tests_total == 2);
  CHECK(left_out.not_counted == 1);
  CHECK_THAT(format_grade_row(left_out), Contains("0/2") && Contains("1 test(s) pass on the untouched handout: not counted"));
  opt.not_counted.clear();
  // Only the throwing one: its message is the first failure.
  opt.test_spec = [](const std::string&) { return std::string("grade fixture: an exercise*"); };
  CHECK_THAT(grade_exercise(*find_exercise("masks"), opt).first_failure,
             Contains("exception: exercise: implement fixture (exercise masks)"));
  // A spec that matches nothing is a grade error, not a pass.
  opt.test_spec = [](const std::string&) { return std::string("no such test*"); };
  CHECK(grade_exercise(*find_exercise("masks"), opt).status == GradeStatus::error);
}

TEST_CASE("parse_catch_xml: a report cut short by a crash counts the open case as failed", "[handout]") {
  const std::string cut = "<?xml version=\"1.0\"?>\n<Catch name=\"t\">\n  <Group name=\"t\">\n"
                          "    <TestCase name=\"a\" filename=\"t.cpp\" line=\"1\">\n      <OverallResult success=\"true\"/>\n"
                          "    </TestCase>\n    <TestCase name=\"b\" filename=\"t.cpp\" line=\"5\">\n";
  const CatchReport r = parse_catch_xml(cut);
  CHECK_FALSE(r.complete);
  CHECK(r.passed == 1);
  CHECK(r.total == 2);
  CHECK_THAT(r.first_failure, Contains("stopped inside a test case"));
}

TEST_CASE("parse_catch_xml: an exception inside a checked expression is reported by its message", "[handout]") {
  // What Catch2 v2 writes when a REQUIRE's expression throws (the grade of a half-done exercise).
  const std::string xml =
      "<Catch name=\"t\"><Group name=\"t\"><TestCase name=\"a\" filename=\"t.cpp\" line=\"1\">"
      "<Info>gradcheck entry masks</Info>"
      "<Expression success=\"false\" filename=\"/src/tests/t.cpp\" line=\"41\">"
      "<Original>{Unknown expression after the reported line}</Original>"
      "<Expanded>{Unknown expression after the reported line}</Expanded>"
      "<Exception filename=\"/src/tests/t.cpp\" line=\"41\">exercise: implement padding_mask</Exception>"
      "</Expression><OverallResult success=\"false\"/></TestCase></Group></Catch>";
  const CatchReport r = parse_catch_xml(xml, "/src");
  CHECK(r.total == 1);
  CHECK(r.passed == 0);
  CHECK(r.first_failure == "tests/t.cpp:41: exception: exercise: implement padding_mask (with gradcheck entry masks)");
}

TEST_CASE("grade and ctest -L WORD count the same tests", "[handout][cli]") {
  const fs::path build = kBinary.parent_path();
  for (const std::string word : {"softmax", "masks"}) {
    INFO("exercise " << word);
    std::string printed;
    REQUIRE(run(quoted(kBinary) + " grade --json --exercise " + word + " 2>/dev/null", printed) == 0);
    const nlohmann::json grade = nlohmann::json::parse(printed);
    std::string listed;
    run("ctest --test-dir " + quoted(build) + " -N -L '^" + word + "$'", listed);
    const std::size_t at = listed.find("Total Tests: ");
    REQUIRE(at != std::string::npos);
    CHECK(grade["exercises"][0]["tests_total"] == std::stoi(listed.substr(at + 13)));
  }
}
