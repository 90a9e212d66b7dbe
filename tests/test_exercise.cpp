// Exercises (autograd/exercise.h): the stub a handout puts in place of a solution region, and the
// markers in the teacher's tree.
//   not_implemented throws std::logic_error with message(): the function, the exercise, the file
//     from its framework folder on, and the three ways to check it;
//   `scratchformer gradcheck` shows an entry whose exercise is a stub as a FAIL row with that
//     message, and goes on with the next entry;
//   every exercise word has its regions in the tree, well formed (BEGIN and END alone on their
//     lines at one indentation, after an EXERCISE(word) comment, nothing but the closing brace
//     after END, the file including exercise.h), its gradcheck entry and its declared tag.
#include "test_util.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "autograd/exercise.h"
#include "train/classroom/gradcheck_suite.h"

using namespace sf;
using Catch::Matchers::Contains;

namespace {

// The exercise words in course order (autograd/exercise.h).
const std::vector<std::string> kExerciseWords = {"matmul",     "linear",     "relu",     "embedding", "scaled_dot_product",
                                                 "masks",      "sinusoidal", "rope",     "multi_head", "layer_norm",
                                                 "softmax",    "cross_entropy", "kv_cache", "greedy",
                                                 "lstm_cell",  "additive_attention"};

// What a stubbed function does in a handout, written as the handout writes it.
int stubbed_causal_mask() { sf::exercise::not_implemented("masks", __func__, "/home/me/sf/nn/attention.cpp"); }

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string indent_of(const std::string& s) { return s.substr(0, s.find_first_not_of(' ')); }

}  // namespace

TEST_CASE("the exercise message names the function, the exercise, the file and the checks", "[exercise]") {
  const std::string m = exercise::message("masks", "causal_mask", "/home/me/scratchformer/nn/attention.cpp");
  CHECK(m ==
        "exercise: implement causal_mask (exercise masks) in nn/attention.cpp; check it with `scratchformer grade "
        "--exercise masks`, `ctest -L masks` or `scratchformer gradcheck --module masks`");
  // the file is shown from its last framework folder on, wherever the tree was copied
  CHECK(exercise::source_path("/tmp/data/handout/train/eval/decode.cpp") == "train/eval/decode.cpp");
  CHECK(exercise::source_path("/x/autograd/ops_norm.cpp") == "autograd/ops_norm.cpp");
  CHECK(exercise::source_path("data/tokenizer.cpp") == "data/tokenizer.cpp");
  CHECK(exercise::source_path("/x/mynn/attention.cpp") == "/x/mynn/attention.cpp");  // "nn/" inside a name is no folder
  CHECK(exercise::source_path("attention.cpp") == "attention.cpp");
}

TEST_CASE("not_implemented throws a logic_error with the exercise message", "[exercise]") {
  try {
    stubbed_causal_mask();
    FAIL("the stub should have thrown");
  } catch (const std::logic_error& e) {
    CHECK(std::string(e.what()) == exercise::message("masks", "stubbed_causal_mask", "nn/attention.cpp"));
    CHECK_THAT(e.what(), Contains("`ctest -L masks`"));
  }
}

TEST_CASE("scratchformer gradcheck shows an entry whose exercise is a stub as FAIL with the message",
          "[exercise][gradcheck]") {
  const train::GradcheckEntry stub{"softmax_exercise", "test", "a check whose backward is a handout's stub",
                                   [](const GradcheckOptions&) -> std::vector<train::GradcheckCase> {
                                     exercise::not_implemented("softmax", "softmax_backward_kernel",
                                                               "/src/autograd/ops_softmax.cpp");
                                   }};
  const train::GradcheckEntry* linear = train::find_gradcheck("linear");
  REQUIRE(linear != nullptr);
  std::ostringstream out;
  CHECK_FALSE(train::run_gradcheck_table({&stub, linear}, out));
  INFO(out.str());
  CHECK_THAT(out.str(), Contains("softmax_exercise"));
  CHECK_THAT(out.str(), Contains("FAIL"));
  CHECK_THAT(out.str(), Contains("softmax_exercise: exercise: implement softmax_backward_kernel (exercise softmax) in "
                                 "autograd/ops_softmax.cpp"));
  CHECK_THAT(out.str(), Contains("1 FAILED"));  // the linear check after it still ran and passed
}

TEST_CASE("every exercise has well-formed solution regions, a gradcheck entry and a declared tag", "[exercise]") {
  namespace fs = std::filesystem;
  const fs::path root = SCRATCHFORMER_SOURCE_DIR;
  std::map<std::string, int> regions;  // word -> regions found
  for (const char* folder : {"autograd", "nn", "data", "train"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
      const std::string rel = fs::relative(entry.path(), root).string();
      if (rel == "autograd/exercise.h") continue;  // documents the format
      const std::string text = test::read_file(entry.path().string());
      std::istringstream in(text);
      std::vector<std::string> lines;
      for (std::string l; std::getline(in, l);) lines.push_back(l);
      std::string word;  // of the last EXERCISE(word) comment
      for (std::size_t i = 0; i < lines.size(); ++i) {
        const std::string t = trim(lines[i]);
        if (t.rfind("// EXERCISE(", 0) == 0) word = t.substr(12, t.find(')') - 12);
        if (t != "// BEGIN SOLUTION") continue;
        INFO(rel << ":" << i + 1 << " (exercise " << word << ")");
        REQUIRE(lines[i] == indent_of(lines[i]) + "// BEGIN SOLUTION");
        REQUIRE(i > 0);
        REQUIRE(trim(lines[i - 1]).rfind("//", 0) == 0);  // the EXERCISE comment is just above
        REQUIRE(std::find(kExerciseWords.begin(), kExerciseWords.end(), word) != kExerciseWords.end());
        std::size_t end = i + 1;
        while (end < lines.size() && trim(lines[end]) != "// END SOLUTION") {
          REQUIRE(trim(lines[end]).rfind("// BEGIN SOLUTION", 0) == std::string::npos);  // no nesting
          ++end;
        }
        REQUIRE(end < lines.size());
        REQUIRE(lines[end] == indent_of(lines[i]) + "// END SOLUTION");
        // nothing after the region in its function: the next line closes it, one level out
        REQUIRE(end + 1 < lines.size());
        const std::string closing = lines[end + 1];
        REQUIRE(trim(closing) == "}");
        REQUIRE(indent_of(closing).size() + 2 == indent_of(lines[i]).size());
        REQUIRE_THAT(text, Contains("#include \"autograd/exercise.h\""));
        ++regions[word];
        i = end;
      }
    }
  }
  const std::string tags = test::read_file((root / "tests" / "TAGS.txt").string());
  for (const std::string& word : kExerciseWords) {
    INFO("exercise " << word);
    CHECK(regions[word] >= 1);
    CHECK(train::find_gradcheck(word) != nullptr);
    CHECK_THAT(tags, Contains("\n" + word + " "));
  }
}
