// Demo attribution (train/lessons/demo_attribution.h): the hand alignments are the corpus's own
// sentences with links inside them; a translator's checkpoint is scored end to end; and the
// demo's own run on the reverse task shows what its claims say.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

#include "data/corpus.h"
#include "demo_report_check.h"
#include "run_util.h"
#include "train/lessons/demo_attribution.h"

using namespace sf::lessons;

namespace {

std::size_t word_count(const std::string& s) {
  std::istringstream in(s);
  std::size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

}  // namespace

TEST_CASE("attribution: the hand alignments are Multi30k test lines with links inside both sentences", "[attribution][demo]") {
  const std::vector<AlignedPair> pairs = read_alignments("");
  REQUIRE(pairs.size() == 12);
  const std::string dir = std::string(SCRATCHFORMER_SOURCE_DIR) + "/data/corpora/multi30k/";
  const std::vector<std::string> de = sf::data::read_lines(dir + "test.de"), en = sf::data::read_lines(dir + "test.en");
  for (const AlignedPair& p : pairs) {
    INFO("line " << p.line);
    REQUIRE(p.line >= 1);
    REQUIRE(static_cast<std::size_t>(p.line) <= de.size());
    CHECK(de[static_cast<std::size_t>(p.line - 1)] == p.de);
    CHECK(en[static_cast<std::size_t>(p.line - 1)] == p.en);
    CHECK(!p.links.empty());
    for (const auto& [i, j] : p.links) {
      CHECK(i >= 0);
      CHECK(static_cast<std::size_t>(i) < word_count(p.de));
      CHECK(j >= 0);
      CHECK(static_cast<std::size_t>(j) < word_count(p.en));
    }
  }
}

// [trains]: a character tokenizer makes ~70 pieces of each German sentence, and every one is
// attributed with backward passes (minutes under the sanitizers)
TEST_CASE("attribution: a translator's checkpoint is scored against the hand alignments end to end",
          "[attribution][demo][trains]") {
  const sf::test::TempDir tmp;
  std::vector<std::string> overrides = sf::test::one_step_reverse_run(tmp, tmp / "run");
  overrides.push_back("model.max_len=256");  // its character tokenizer makes ~70 pieces of a German sentence
  const sf::test::CliResult trained = sf::test::run_cli(sf::test::train_args(overrides), tmp);
  REQUIRE(trained.status == 0);
  const AttributionDemoResult r = compute_attribution_demo(0, tmp / "run/checkpoint-last.safetensors", "", /*steps=*/2);
  REQUIRE(r.translator);
  CHECK(r.translator->sentences == 12);
  CHECK(r.translator->counted > 50);  // most target pieces belong to a linked word
  CHECK(r.translator->heads.size() == 4);  // one decoder layer of four heads
  for (double a : r.translator->agreement) {
    CHECK(a >= 0);
    CHECK(a <= 1);
  }
  CHECK(r.claims.size() == 4);  // the translator's claim is judged too (on an untrained model it need not hold)
  for (const std::string& problem : sf::test::report_problems(attribution_json(r))) FAIL_CHECK(problem);
  sf::test::check_one_line_error(sf::test::run_cli(std::vector<std::string>{"demo", "rope", "--checkpoint", "x.safetensors"}),
                                 {"--checkpoint is read by attribution only"});
  // the same methods from the command line: attention --attribution prints them and draws them
  const sf::test::CliResult cli = sf::test::run_cli(std::vector<std::string>{
      "attention", "--checkpoint", tmp / "run/checkpoint-last.safetensors", "--src", "ka zu ra", "--attribution",
      "--out-dir", tmp / "at", "--lang", "en"});
  INFO(cli.out << cli.err);
  REQUIRE(cli.status == 0);
  CHECK_THAT(cli.out, Catch::Contains("integrated") && Catch::Contains("head ablation") && Catch::Contains("layer 1 head 4"));
  CHECK(std::filesystem::file_size(tmp / "at/attribution.svg") > 1000);
}

TEST_CASE("attribution: on the reverse task attention finds the alignment, the head that matters most does not, and "
          "integrated gradients beat gradient x input",
          "[attribution][demo][trains]") {
  const AttributionDemoResult r = compute_attribution_demo(0, "", "");  // the demo's own run (about 10 s)
  INFO("reverse task agreement: head mean " << r.reverse.agreement[1] << ", gradient x input " << r.reverse.agreement[3]
                                            << ", integrated " << r.reverse.agreement[4]);
  REQUIRE(r.claims.size() == 3);
  for (const auto& [claim, held] : r.claims) {
    INFO(claim);
    CHECK(held);
  }
  CHECK(r.claim_holds);
  for (const std::string& problem : sf::test::report_problems(attribution_json(r))) FAIL_CHECK(problem);
}
