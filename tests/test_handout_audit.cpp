// The handout audit and related regions (train/classroom/handout_audit.h, handout.h):
//   normalise_code_line and worth_auditing on lines a solution may hold;
//   related regions: hidden with a chosen exercise (their INSTEAD lines uncommented, in C++ and
//     Python), kept without their markers otherwise, and every malformed marker an error;
//   the audit finds a solution line planted elsewhere (and not once it is hidden or declared);
//   THE TEACHER'S TEST: a handout of every exercise of the real tree holds no copy of a solution
//     line that audit_harmless.tsv does not declare, and every declaration is still used.
#include "handout_util.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "train/classroom/exercises.h"
#include "train/classroom/handout.h"
#include "train/classroom/handout_audit.h"

using Catch::Matchers::Contains;
using namespace sf::train;
using namespace sf::test;
namespace fs = std::filesystem;

namespace {


// A copy of the fixture tree in a fresh directory.
fs::path fixture_copy(const std::string& name) {
  const fs::path root = fs::temp_directory_path() / ("sf-audit-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::copy(kFixture, root, fs::copy_options::recursive);
  return root;
}

}  // namespace

TEST_CASE("normalise_code_line: spacing and comments do not hide a copy", "[handout]") {
  CHECK(normalise_code_line("  gx[e] = y[e]*(g[e]-c);  // the answer") == "gx [ e ] = y [ e ] * ( g [ e ] - c ) ;");
  CHECK(normalise_code_line("gx[e]=y[e] * ( g[e] - c );") == normalise_code_line("  gx[e] = y[e] * (g[e] - c);"));
  CHECK(normalise_code_line("for (std::int64_t i = 0; i < n; ++i) a->b += 1.5e-3f;") ==
        "for ( std :: int64_t i = 0 ; i < n ; ++ i ) a -> b + = 1.5e-3f ;");
  CHECK(normalise_code_line("# a Python comment").empty());
  CHECK(normalise_code_line(" * a block comment line").empty());
  CHECK(normalise_code_line("// only a comment").empty());
  CHECK(normalise_code_line("s = \"a // b\";  // c") == "s = \" a / / b \" ;");  // // inside a string stays
  CHECK(normalise_code_line("#pragma omp parallel for") == "# pragma omp parallel for");
}

TEST_CASE("worth_auditing skips braces, short lines and bare loop headers", "[handout]") {
  CHECK_FALSE(worth_auditing(normalise_code_line("}")));
  CHECK_FALSE(worth_auditing(normalise_code_line("return out;")));
  CHECK_FALSE(worth_auditing(normalise_code_line("for (std::int64_t n = 0; n < N; ++n) {")));
  CHECK_FALSE(worth_auditing(normalise_code_line("for (std::int64_t d = 0; d < D; ++d)")));
  CHECK(worth_auditing(normalise_code_line("for (std::int64_t d = 0; d < D; ++d) m += x_row[d];")));
  CHECK(worth_auditing(normalise_code_line("gx[e] = y[e] * (g[e] - c);")));
}

TEST_CASE("related regions are hidden with a chosen exercise and kept otherwise", "[handout]") {
  const std::string cpp =
      "int a() { return 1; }\n"
      "  // BEGIN RELATED(softmax): the twin\n"
      "  bool twin(int x) { return x > 0; }\n"
      "  // HANDOUT INSTEAD:\n"
      "  // bool twin(int x) { return false; }\n"
      "  //\n"
      "  // END RELATED\n"
      "int b() { return 2; }\n";
  CHECK(resolve_related("autograd/x.cpp", cpp, {"softmax"}) ==
        "int a() { return 1; }\n  bool twin(int x) { return false; }\n\nint b() { return 2; }\n");
  CHECK(resolve_related("autograd/x.cpp", cpp, {"masks"}) ==
        "int a() { return 1; }\n  bool twin(int x) { return x > 0; }\nint b() { return 2; }\n");
  const std::string py =
      "# BEGIN RELATED(masks): one line each\n"
      "def causal(t):\n"
      "    return t\n"
      "# END RELATED\n"
      "x = 1\n";
  CHECK(resolve_related("tools/x.py", py, {"masks"}) == "x = 1\n");  // no INSTEAD: gone
  CHECK(resolve_related("tools/x.py", py, {}) == "def causal(t):\n    return t\nx = 1\n");
  const std::vector<RelatedRegion> r = find_related_regions("autograd/x.cpp", cpp);
  REQUIRE(r.size() == 1);
  CHECK(r[0].word == "softmax");
  CHECK(r[0].begin_line == 2);
  CHECK(r[0].instead_line == 4);
  CHECK(r[0].end_line == 7);
}

TEST_CASE("malformed related regions are errors naming file:line", "[handout][errors]") {
  const auto fails = [](const std::string& text, const std::string& what) {
    INFO(text);
    CHECK_THROWS_WITH(find_related_regions("nn/x.cpp", text), Contains(what));
  };
  fails("// BEGIN RELATED(softmax): a\nx();\n", "nn/x.cpp:1: BEGIN RELATED has no END RELATED");
  fails("x();\n// END RELATED\n", "nn/x.cpp:2: END RELATED without a BEGIN RELATED");
  fails("// BEGIN RELATED(softmax): a\n// BEGIN RELATED(masks): b\n// END RELATED\n", "nn/x.cpp:2: BEGIN RELATED inside");
  fails("// BEGIN RELATED(soft_max): a\n// END RELATED\n", "unknown exercise 'soft_max' (did you mean 'softmax'?)");
  fails("// BEGIN RELATED(softmax): a\n// HANDOUT INSTEAD:\nreturn 1;\n// END RELATED\n",
        "nn/x.cpp:3: the lines after HANDOUT INSTEAD are comments");
  fails("// HANDOUT INSTEAD:\n", "nn/x.cpp:1: HANDOUT INSTEAD outside a related region");
}

TEST_CASE("the audit finds a solution line planted elsewhere, until it is hidden or declared", "[handout]") {
  const fs::path root = fixture_copy("plant");
  const std::string answer = "  const int fixture_forward_answer = x * 41;\n";
  write(root / "docs" / "copy.txt", "a note\n" + answer);                    // any text file
  write(root / "nn" / "copy.cpp", "int f(int x) {\n  const int fixture_forward_answer=x*41;  // spaced\n}\n");
  Handout h = make_handout(root, {"softmax"});
  std::vector<AuditMatch> m = audit_handout(h, root, {});
  REQUIRE(m.size() == 2);
  CHECK(m[0].word == "softmax");
  CHECK(m[0].found_at == "docs/copy.txt:2");
  CHECK(m[0].solution_at == "autograd/ops_fixture.cpp:7");
  CHECK(m[1].found_at == "nn/copy.cpp:2");
  CHECK(m[0].harmless.empty());
  // Not chosen: masks' handout keeps softmax's solution, and the audit looks for masks' lines only.
  CHECK(audit_handout(make_handout(root, {"masks"}), root, {}).empty());
  // Declared harmless: still listed, with the reason.
  m = audit_handout(h, root, {{"softmax", "const int fixture_forward_answer = x * 41 ;", "a test of the audit"}});
  REQUIRE(m.size() == 2);
  CHECK(m[1].harmless == "a test of the audit");
  // Hidden with the exercise: gone from the handout, so from the audit.
  write(root / "nn" / "copy.cpp",
        "// BEGIN RELATED(softmax): a copy\nint f(int x) {\n  const int fixture_forward_answer=x*41;\n}\n// END RELATED\n");
  h = make_handout(root, {"softmax"});
  m = audit_handout(h, root, {});
  REQUIRE(m.size() == 1);
  CHECK(m[0].found_at == "docs/copy.txt:2");
  fs::remove_all(root);
}

TEST_CASE("read_harmless reads declarations and refuses malformed ones", "[handout][errors]") {
  const fs::path root = fixture_copy("harmless");
  write(root / "h.tsv", "# comment\n\n*\tusing T = decltype ( tag ) ;\tdispatch\nsoftmax\tx ;\twhy\n");
  const std::vector<HarmlessLine> h = read_harmless(root / "h.tsv");
  REQUIRE(h.size() == 2);
  CHECK(h[0].word == "*");
  CHECK(h[1].reason == "why");
  write(root / "bad.tsv", "softmax\tx ;\n");
  CHECK_THROWS_WITH(read_harmless(root / "bad.tsv"), Contains("bad.tsv:1: expected three tab-separated fields"));
  write(root / "bad.tsv", "sofmax\tx ;\twhy\n");
  CHECK_THROWS_WITH(read_harmless(root / "bad.tsv"), Contains("bad.tsv:1") && Contains("unknown exercise 'sofmax'"));
  fs::remove_all(root);
}

TEST_CASE("a handout of every exercise holds no undeclared copy of a solution line", "[handout]") {
  const Handout h = make_handout(kSource, {});
  const std::vector<HarmlessLine> harmless = read_harmless(kSource / kAuditHarmless);
  const std::vector<AuditMatch> matches = audit_handout(h, kSource, harmless);
  std::set<std::pair<std::string, std::string>> used;
  for (const AuditMatch& m : matches) {
    if (m.harmless.empty())
      FAIL_CHECK(m.found_at << " holds a line of exercise " << m.word << "'s solution (" << m.solution_at
                            << "): " << m.line << "\nhide it with the exercise (// BEGIN RELATED(" << m.word
                            << ")) or declare it in " << kAuditHarmless << " with why it is harmless");
    used.insert({m.word, m.line});
  }
  // A declaration nothing matches any more is stale: it would hide a future copy unseen.
  for (const HarmlessLine& d : harmless) {
    bool found = false;
    for (const auto& [word, line] : used) found = found || (line == d.line && (d.word == "*" || d.word == word));
    if (!found) FAIL_CHECK(kAuditHarmless << " declares a line no solution shares any more: " << d.line);
  }
}
