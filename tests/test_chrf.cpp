// Tests for train/eval/chrf: corpus chrF and chrF++ against scores produced by sacreBLEU 2.6.0
// itself (tests/data/sacrebleu_chrf_cases.json, copied from ../shared/testdata/sacrebleu/, whose
// README explains the fields: CHRF(...).corpus_score on Multi30k and Tatoeba valid sentences in
// English, German and Chinese, some perturbed, plus edge cases), and small cases worked out by
// hand for the options those cases leave at their defaults (eps smoothing, whitespace, lowercase).
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sacrebleu_util.h"
#include "test_util.h"
#include "train/eval/chrf.h"

namespace {

using sf::train::ChrfOptions;
using sf::train::corpus_chrf;

// sacrebleu_chrf_cases.json stores scores rounded to 4 decimals, so an exact implementation
// differs from it by at most 0.00005; 1e-4 allows that rounding and nothing more.
constexpr double kReferenceTol = 1e-4;
// Hand-computed scores: the same formula in double precision, in another order.
constexpr double kHandTol = 1e-9;

const std::string kSignature = "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0";

ChrfOptions options_of(const nlohmann::json& c) {
  ChrfOptions o;
  o.char_order = c["char_order"].get<int>();
  o.word_order = c["word_order"].get<int>();
  o.beta = c["beta"].get<int>();
  o.lowercase = c["lowercase"].get<bool>();
  o.whitespace = c["whitespace"].get<bool>();
  o.eps_smoothing = c["eps_smoothing"].get<bool>();
  return o;
}

// The F-score of an averaged precision and recall (in [0, 1]) with beta 2, times 100.
double f2(double p, double r) { return 100.0 * 5 * p * r / (4 * p + r); }

}  // namespace

TEST_CASE("chrf matches sacreBLEU 2.6.0 on the reference cases", "[chrf][reference]") {
  const nlohmann::json cases = sf::testing::read_sacrebleu_cases("sacrebleu_chrf_cases.json");
  REQUIRE(cases.size() >= 10);
  int chrf_plus_plus = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& c = cases[i];
    INFO("case " << i << " (" << c["name"].get<std::string>() << ", " << c["hypotheses"].size() << " sentences)");
    const ChrfOptions o = options_of(c);
    const sf::train::ChrfResult r = corpus_chrf(c["hypotheses"].get<std::vector<std::string>>(),
                                                c["references"].get<std::vector<std::string>>(), o);
    INFO(sf::train::format_chrf(r));
    CHECK(r.score == Approx(c["score"].get<double>()).margin(kReferenceTol).epsilon(0));
    CHECK(r.signature == c["signature"].get<std::string>());
    CHECK(r.name == (o.word_order == 2 ? "chrF2++" : "chrF2"));
    chrf_plus_plus += o.word_order == 2;
  }
  CHECK(chrf_plus_plus >= 1);  // the chrF++ case is there and was checked
}

TEST_CASE("chrf of a corpus against itself is 100, of nothing in common 0", "[chrf]") {
  const std::vector<std::string> corpus = {"A man rides a bike.", "Zwei Hunde spielen im Schnee.", "我喜欢猫。"};
  const sf::train::ChrfResult same = corpus_chrf(corpus, corpus);
  CHECK(same.score == Approx(100.0).margin(kHandTol));
  for (const auto& s : same.stats) CHECK(s.match == s.hyp);
  CHECK(same.signature == kSignature);
  CHECK(corpus_chrf({"xyz"}, {"abc"}).score == 0.0);
}

TEST_CASE("chrf of an empty hypothesis is 0 and still counts its reference", "[chrf]") {
  const sf::train::ChrfResult empty = corpus_chrf({""}, {"A man sleeps."});
  CHECK(empty.score == 0.0);
  CHECK(empty.stats[0].hyp == 0);
  CHECK(empty.stats[0].ref == 11);  // "Amansleeps." without its spaces

  // In a corpus the empty line still adds its reference's n-grams, lowering recall: unigrams only,
  // the second pair matches 3 of 3, so precision stays 1 and recall is 3 / (8 + 3).
  const sf::train::ChrfResult pooled = corpus_chrf({"", "ab c"}, {"xyzxyzxy", "abc"}, {1, 0, 2});
  CHECK(pooled.stats[0].hyp == 3);
  CHECK(pooled.stats[0].ref == 11);
  CHECK(pooled.stats[0].match == 3);
  CHECK(pooled.score == Approx(f2(1.0, 3.0 / 11)).margin(kHandTol));
}

TEST_CASE("chrf counts code points, pools the corpus and skips missing orders", "[chrf]") {
  // 我喜欢猫 / 我喜欢狗: orders 1-4 match 3/4, 2/3, 1/2, 0/1 on both sides; the references have
  // no 5- or 6-grams, so those orders are not effective and the average is over 4 orders.
  const sf::train::ChrfResult zh = corpus_chrf({"我喜欢猫"}, {"我喜欢狗"});
  const double p = (3.0 / 4 + 2.0 / 3 + 1.0 / 2 + 0.0) / 4;
  CHECK(zh.score == Approx(f2(p, p)).margin(kHandTol));
  CHECK(zh.stats[0].hyp == 4);  // four characters, not twelve bytes

  // A hypothesis n-gram is not counted when its reference has no n-gram of that order.
  const sf::train::ChrfResult longer = corpus_chrf({"abcdef"}, {"ab"});
  CHECK(longer.stats[1].hyp == 5);
  CHECK(longer.stats[2].hyp == 0);
  CHECK(longer.stats[2].ref == 0);
  CHECK(longer.score == Approx(f2((2.0 / 6 + 1.0 / 5) / 2, 1.0)).margin(kHandTol));
}

TEST_CASE("chrf eps smoothing, whitespace and lowercase options", "[chrf]") {
  // One matching character: effective order gives 100; eps smoothing averages F over all six
  // orders, five of which have no n-grams (F = eps there).
  CHECK(corpus_chrf({"a"}, {"a"}).score == Approx(100.0).margin(kHandTol));
  ChrfOptions eps;
  eps.eps_smoothing = true;
  const sf::train::ChrfResult smoothed = corpus_chrf({"a"}, {"a"}, eps);
  CHECK(smoothed.score == Approx(100.0 / 6).margin(kHandTol));
  CHECK(smoothed.signature == "nrefs:1|case:mixed|eff:no|nc:6|nw:0|space:no|version:2.6.0");

  // Whitespace kept: "ab" against "a b" matches 2/2 of 3 unigrams and no bigram ("a ", " b").
  ChrfOptions space{2, 0, 2};
  CHECK(corpus_chrf({"ab"}, {"a b"}, space).score == Approx(100.0).margin(kHandTol));
  space.whitespace = true;
  CHECK(corpus_chrf({"ab"}, {"a b"}, space).score == Approx(f2(0.5, 1.0 / 3)).margin(kHandTol));
  CHECK(corpus_chrf({"ab"}, {"a b"}, space).signature == "nrefs:1|case:mixed|eff:yes|nc:2|nw:0|space:yes|version:2.6.0");

  ChrfOptions lower;
  lower.lowercase = true;
  CHECK(corpus_chrf({"THE ÄPFEL"}, {"the äpfel"}).score < 50);
  CHECK(corpus_chrf({"THE ÄPFEL"}, {"the äpfel"}, lower).score == Approx(100.0).margin(kHandTol));
  CHECK(corpus_chrf({"a"}, {"a"}, lower).signature == "nrefs:1|case:lc|eff:yes|nc:6|nw:0|space:no|version:2.6.0");
  // Python's str.lower(): Unicode letters, İ -> i + U+0307, a final Σ -> ς.
  CHECK(sf::train::python_lower("ÄÖÜ Straße ΟΔΟΣ ΣΑ İ Ｗ") == "äöü straße οδος σα i\u0307 ｗ");
}

TEST_CASE("chrf++ word n-grams split punctuation as sacreBLEU does", "[chrf]") {
  // Word unigrams only (no character n-grams): "cat." is "cat" "." and matches "cat .".
  const ChrfOptions words{0, 1, 2};
  CHECK(corpus_chrf({"cat."}, {"cat ."}, words).score == Approx(100.0).margin(kHandTol));
  // One punctuation mark is split, from the end first: "(hi)" -> "(hi" ")" but "( hi )" is three
  // words, so only ")" matches: precision 1/2, recall 1/3 (sacreBLEU issue #124, kept as it is).
  CHECK(corpus_chrf({"(hi)"}, {"( hi )"}, words).score == Approx(f2(0.5, 1.0 / 3)).margin(kHandTol));
  // Bigrams join the words with a space: "a b" matches "a b", not "ab".
  const ChrfOptions bigrams{0, 2, 2};
  const sf::train::ChrfResult r = corpus_chrf({"a b c"}, {"a b d"}, bigrams);
  CHECK(r.stats[1].hyp == 2);
  CHECK(r.stats[1].match == 1);
  CHECK(r.name == "chrF2++");
}

TEST_CASE("chrf format line matches sacreBLEU", "[chrf]") {
  CHECK(sf::train::format_chrf(corpus_chrf({"the cat"}, {"the cat"})) == "chrF2|" + kSignature + " = 100.00");
  sf::train::ChrfResult r;
  r.score = 58.2349;
  r.name = "chrF2";
  r.signature = kSignature;
  CHECK(sf::train::format_chrf(r) == "chrF2|" + kSignature + " = 58.23");
  r.signature.clear();
  CHECK(sf::train::format_chrf(r) == "chrF2 = 58.23");
}

TEST_CASE("chrf rejects bad arguments with actionable messages", "[chrf][errors]") {
  CHECK_THAT(sf::testing::invalid_argument_message([] { corpus_chrf({}, {}); }), Catch::Contains("at least one sentence"));
  CHECK_THAT(sf::testing::invalid_argument_message([] { corpus_chrf({"a", "b", "c"}, {"a", "b"}); }),
             Catch::Contains("3 hypotheses") && Catch::Contains("2 references"));
  CHECK_THAT(sf::testing::invalid_argument_message([] { corpus_chrf({"a", "b"}, {"a", ""}); }), Catch::Contains("reference 1") && Catch::Contains("empty"));
  CHECK_THAT(sf::testing::invalid_argument_message([] { corpus_chrf({"ok", "bad \xC3"}, {"ok", "ok"}); }),
             Catch::Contains("hypothesis 1") && Catch::Contains("UTF-8"));
  CHECK_THAT(sf::testing::invalid_argument_message([] { corpus_chrf({"a"}, {"\xED\xA0\x80"}); }), Catch::Contains("reference 0"));  // a surrogate
  CHECK_THAT(sf::testing::invalid_argument_message([] { corpus_chrf({"a"}, {"a"}, {0, 0, 2}); }), Catch::Contains("at least one order"));
  CHECK_THAT(sf::testing::invalid_argument_message([] { corpus_chrf({"a"}, {"a"}, {6, 0, -1}); }), Catch::Contains("beta -1"));
}
