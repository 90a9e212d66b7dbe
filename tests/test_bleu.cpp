// Tests for train/eval/bleu: the 13a and zh tokenizers, corpus BLEU against scores produced by
// sacreBLEU 2.6.0 itself (tests/data/sacrebleu_cases.json), and small cases worked out by hand.
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sacrebleu_util.h"
#include "test_util.h"
#include "train/eval/bleu.h"
#include "train/eval/evaluate.h"

namespace {

// sacrebleu_cases.json stores every number rounded to 4 decimals, so an exact implementation
// differs from it by at most 0.00005; 1e-4 allows that rounding and nothing more.
constexpr double kReferenceTol = 1e-4;
// Hand-computed scores below use the same formula in double precision, evaluated in a different
// order (products instead of sums of logs): they agree to rounding error.
constexpr double kHandTol = 1e-9;

const std::string kSignature13a = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0";

// BLEU from its four precisions (in [0, 1]) and the brevity penalty, as 100 * BP * (p1 p2 p3 p4)^(1/4).
double bleu_from_precisions(double p1, double p2, double p3, double p4, double bp) {
  return 100.0 * bp * std::pow(p1 * p2 * p3 * p4, 0.25);
}

}  // namespace

TEST_CASE("bleu matches sacreBLEU 2.6.0 on the reference cases", "[bleu][reference]") {
  const nlohmann::json cases = sf::testing::read_sacrebleu_cases("sacrebleu_cases.json");
  REQUIRE(cases.size() >= 10);

  for (std::size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& c = cases[i];
    INFO("case " << i << " (" << c["name"].get<std::string>() << ", tok " << c["tokenize"].get<std::string>()
                 << ", " << c["hypotheses"].size() << " sentences)");
    const sf::train::BleuResult r = sf::train::corpus_bleu(c["hypotheses"].get<std::vector<std::string>>(),
                                             c["references"].get<std::vector<std::string>>(),
                                             c["tokenize"].get<std::string>());
    INFO(sf::train::format_bleu(r));
    CHECK(r.score == Approx(c["score"].get<double>()).margin(kReferenceTol).epsilon(0));
    for (int n = 0; n < 4; ++n) {
      INFO("precision of order " << n + 1);
      CHECK(r.precisions[n] == Approx(c["precisions"][n].get<double>()).margin(kReferenceTol).epsilon(0));
    }
    CHECK(r.bp == Approx(c["bp"].get<double>()).margin(kReferenceTol).epsilon(0));
    CHECK(r.sys_len == c["sys_len"].get<std::int64_t>());
    CHECK(r.ref_len == c["ref_len"].get<std::int64_t>());
    CHECK(r.signature == c["signature"].get<std::string>());
  }
}

TEST_CASE("bleu of a corpus against itself is 100", "[bleu]") {
  const std::vector<std::string> corpus = {"A man rides a bike.", "Zwei Hunde spielen im Schnee.",
                                           "It costs 3.5 dollars, or 1,000 cents!"};
  const sf::train::BleuResult r = sf::train::corpus_bleu(corpus, corpus);
  CHECK(r.score == Approx(100.0).margin(kHandTol));
  CHECK(r.bp == 1.0);
  CHECK(r.sys_len == r.ref_len);
  for (int n = 0; n < 4; ++n) {
    CHECK(r.precisions[n] == Approx(100.0).margin(kHandTol));
    CHECK(r.counts[n] == r.totals[n]);
  }
  CHECK(r.signature == kSignature13a);
}

TEST_CASE("bleu of an empty hypothesis is 0", "[bleu]") {
  const sf::train::BleuResult r = sf::train::corpus_bleu({""}, {"A man rides a bike ."});
  CHECK(r.score == 0.0);
  CHECK(r.bp == 0.0);  // no hypothesis tokens: sacreBLEU sets BP to 0 rather than dividing by 0
  CHECK(r.sys_len == 0);
  CHECK(r.ref_len == 6);
  for (int n = 0; n < 4; ++n) {
    CHECK(r.precisions[n] == 0.0);
    CHECK(r.totals[n] == 0);
  }
}

TEST_CASE("bleu clips matches and pools counts by hand", "[bleu]") {
  // hyp: the cat sat on the mat / ref: the cat sat on a mat. "the" occurs twice in the hypothesis
  // but once in the reference, so only one counts. Matches: 1-grams 5/6, 2-grams 3/5 (the cat,
  // cat sat, sat on), 3-grams 2/4, 4-grams 1/3; equal lengths so BP = 1.
  const sf::train::BleuResult r = sf::train::corpus_bleu({"the cat sat on the mat"}, {"the cat sat on a mat"});
  CHECK(r.counts == std::array<std::int64_t, 4>{5, 3, 2, 1});
  CHECK(r.totals == std::array<std::int64_t, 4>{6, 5, 4, 3});
  CHECK(r.bp == 1.0);
  CHECK(r.score == Approx(bleu_from_precisions(5.0 / 6, 3.0 / 5, 2.0 / 4, 1.0 / 3, 1.0)).margin(kHandTol));

  // Two sentences: counts are summed over the corpus before dividing (not an average of
  // sentence scores). Second pair matches fully: 3/3, 2/2, 1/1, 0 four-grams.
  const sf::train::BleuResult pooled =
      sf::train::corpus_bleu({"the cat sat on the mat", "dogs bark loudly"}, {"the cat sat on a mat", "dogs bark loudly"});
  CHECK(pooled.counts == std::array<std::int64_t, 4>{8, 5, 3, 1});
  CHECK(pooled.totals == std::array<std::int64_t, 4>{9, 7, 5, 3});
  CHECK(pooled.score ==
        Approx(bleu_from_precisions(8.0 / 9, 5.0 / 7, 3.0 / 5, 1.0 / 3, 1.0)).margin(kHandTol));
}

TEST_CASE("bleu exp smoothing halves each unmatched order again", "[bleu]") {
  // hyp a b c d / ref a b d c: 1-grams 4/4, 2-grams 1/3 (a b), no 3-gram of 2 and no 4-gram of 1
  // matches. Exp smoothing gives the first unmatched order 1/(2 * 2) and the second 1/(4 * 1).
  const sf::train::BleuResult r = sf::train::corpus_bleu({"a b c d"}, {"a b d c"});
  CHECK(r.counts == std::array<std::int64_t, 4>{4, 1, 0, 0});
  CHECK(r.totals == std::array<std::int64_t, 4>{4, 3, 2, 1});
  CHECK(r.precisions[2] == Approx(100.0 / (2 * 2)).margin(kHandTol));
  CHECK(r.precisions[3] == Approx(100.0 / (4 * 1)).margin(kHandTol));
  CHECK(r.score == Approx(bleu_from_precisions(1.0, 1.0 / 3, 1.0 / 4, 1.0 / 4, 1.0)).margin(kHandTol));
}

TEST_CASE("bleu brevity penalty and too-short hypotheses", "[bleu]") {
  // 5 hypothesis tokens, 7 reference tokens, everything matches: BP = exp(1 - 7/5).
  const sf::train::BleuResult shorter = sf::train::corpus_bleu({"a b c d e"}, {"a b c d e f g"});
  CHECK(shorter.bp == Approx(std::exp(1.0 - 7.0 / 5.0)).margin(kHandTol));
  CHECK(shorter.score == Approx(100.0 * std::exp(1.0 - 7.0 / 5.0)).margin(kHandTol));

  // A longer hypothesis is not penalised by BP (its precision pays instead).
  const sf::train::BleuResult longer = sf::train::corpus_bleu({"a b c d e f g"}, {"a b c d e"});
  CHECK(longer.bp == 1.0);

  // Two tokens have no 3-grams or 4-grams: those precisions stay 0 and so does BLEU, even though
  // every 1-gram and 2-gram matches.
  const sf::train::BleuResult tiny = sf::train::corpus_bleu({"a b"}, {"a b c d"});
  CHECK(tiny.precisions[0] == Approx(100.0).margin(kHandTol));
  CHECK(tiny.precisions[2] == 0.0);
  CHECK(tiny.score == 0.0);
}

TEST_CASE("bleu tokenizer 13a splits punctuation like mteval", "[bleu][tokenizer]") {
  CHECK(sf::train::tokenize_13a("Hello, world!") == "Hello , world !");
  CHECK(sf::train::tokenize_13a("He paid $1,000.50 (cash).") == "He paid $ 1,000.50 ( cash ) .");
  // Numbers keep their decimal point and thousands separator; sentence periods are split off.
  CHECK(sf::train::tokenize_13a("It costs 3.5 dollars, or 1,000 cents.") == "It costs 3.5 dollars , or 1,000 cents .");
  // A dash is split after a digit only; apostrophes are never split.
  CHECK(sf::train::tokenize_13a("1990-2000 was a well-known era, wasn't it?") ==
        "1990 - 2000 was a well-known era , wasn't it ?");
  // HTML entities are unescaped, <skipped> removed, line breaks joined.
  CHECK(sf::train::tokenize_13a("&quot;A&quot; &amp; B<skipped> &lt;x&gt;") == "\" A \" & B < x >");
  CHECK(sf::train::tokenize_13a("hyphen-\nated\nline") == "hyphenated line");
  // The space padding lets a leading period split from a digit, as in sacreBLEU.
  CHECK(sf::train::tokenize_13a(".5 ,5") == ". 5 , 5");
  CHECK(sf::train::tokenize_13a("   many    spaces\there  ") == "many spaces here");
  CHECK(sf::train::tokenize_13a("") == "");
}

TEST_CASE("bleu tokenizer 13a leaves non-ASCII letters untouched", "[bleu][tokenizer]") {
  CHECK(sf::train::tokenize_13a("Über den Fluß fährt ein Mädchen.") == "Über den Fluß fährt ein Mädchen .");
  CHECK(sf::train::tokenize_13a("café, naïve.") == "café , naïve .");
  CHECK(sf::train::tokenize_13a("我喜欢猫。") == "我喜欢猫。");  // 13a does not know Chinese
  // Python's str.split() also splits at Unicode spaces: no-break space U+00A0, ideographic space U+3000.
  CHECK(sf::train::tokenize_13a("a\u00A0b\u3000c") == "a b c");
}

TEST_CASE("bleu tokenizer zh splits Chinese characters", "[bleu][tokenizer]") {
  CHECK(sf::train::tokenize_zh("我喜欢猫。") == "我 喜 欢 猫 。");
  CHECK(sf::train::tokenize_zh("我有3.5个apple，好吗?") == "我 有 3.5 个 apple ， 好 吗 ?");
  // Non-Chinese text goes through the 13a punctuation rules, without 13a's unescaping.
  CHECK(sf::train::tokenize_zh("Hello, world!") == "Hello , world !");
  CHECK(sf::train::tokenize_zh("&amp;") == "& amp ;");
  // sacreBLEU's range '\u20000'..'\u2a6d6' is really U+2001..U+2A6D in Python, so general
  // punctuation like the em dash U+2014 and curly quotes count as Chinese characters.
  CHECK(sf::train::tokenize_zh("a\u2014b \u201Cc\u201D") == "a \u2014 b \u201C c \u201D");
  CHECK(sf::train::tokenize_13a("a\u2014b") == "a\u2014b");
}

TEST_CASE("bleu format line matches sacreBLEU", "[bleu]") {
  const sf::train::BleuResult same = sf::train::corpus_bleu({"the cat sat on the mat"}, {"the cat sat on the mat"});
  CHECK(sf::train::format_bleu(same) == "BLEU|" + kSignature13a +
                                     " = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 6 "
                                     "ref_len = 6)");

  sf::train::BleuResult r;
  r.score = 34.5912;
  r.precisions = {65.8349, 42.2, 28.76, 20.0};
  r.bp = 0.97647;
  r.sys_len = 123;
  r.ref_len = 126;
  r.signature = kSignature13a;
  CHECK(sf::train::format_bleu(r) == "BLEU|" + kSignature13a +
                                  " = 34.59 65.8/42.2/28.8/20.0 (BP = 0.976 ratio = 0.976 hyp_len = 123 ref_len = 126)");

  const sf::train::BleuResult zh = sf::train::corpus_bleu({"我喜欢猫"}, {"我喜欢狗"}, "zh");
  CHECK(zh.signature == "nrefs:1|case:mixed|eff:no|tok:zh|smooth:exp|version:2.6.0");
}

TEST_CASE("bleu rejects bad arguments with actionable messages", "[bleu]") {
  const std::string unknown = sf::testing::invalid_argument_message([] { sf::train::corpus_bleu({"a"}, {"a"}, "intl"); });
  CHECK_THAT(unknown, Catch::Contains("intl") && Catch::Contains("13a") && Catch::Contains("zh"));

  const std::string unequal = sf::testing::invalid_argument_message([] { sf::train::corpus_bleu({"a", "b", "c"}, {"a", "b"}); });
  CHECK_THAT(unequal, Catch::Contains("3 hypotheses") && Catch::Contains("2 references"));

  CHECK_THAT(sf::testing::invalid_argument_message([] { sf::train::corpus_bleu({}, {}); }), Catch::Contains("at least one sentence"));
  CHECK_THAT(sf::testing::invalid_argument_message([] { sf::train::corpus_bleu({"a", "b"}, {"a", ""}); }), Catch::Contains("reference 1"));
  CHECK_THAT(sf::testing::invalid_argument_message([] { sf::train::corpus_bleu({"ok", "bad \xC3"}, {"ok", "ok"}); }),
             Catch::Contains("hypothesis 1") && Catch::Contains("UTF-8"));
  CHECK_THAT(sf::testing::invalid_argument_message([] { sf::train::tokenize_13a("\xED\xA0\x80"); }), Catch::Contains("UTF-8"));  // a surrogate
}

TEST_CASE("bleu_by_source_length scores each length bucket as a corpus of its own", "[bleu][recurrent]") {
  const std::vector<std::string> hyps = {"a dog runs", "the cat sat on the mat", "a man rides a red bike today", "two kids"};
  const std::vector<std::string> refs = {"a dog runs", "the cat sat on a mat", "a man rides a bike", "two children play"};
  const std::vector<std::int64_t> lengths = {4, 12, 40, 0};  // the empty source goes to the first bucket
  const std::vector<sf::train::LengthBucket> b = sf::train::bleu_by_source_length(hyps, refs, lengths, {11, 16, 21, 31}, "13a");
  REQUIRE(b.size() == 5);
  CHECK((b[0].first == 1 && b[0].last == 10 && b[0].sentences == 2));
  CHECK((b[1].first == 11 && b[1].last == 15 && b[1].sentences == 1));
  CHECK((b[2].sentences == 0 && b[2].bleu == 0));
  CHECK((b[4].first == 31 && b[4].last == -1 && b[4].sentences == 1));
  CHECK(b[0].bleu == sf::train::corpus_bleu({hyps[0], hyps[3]}, {refs[0], refs[3]}, "13a").score);
  CHECK(b[1].bleu == sf::train::corpus_bleu({hyps[1]}, {refs[1]}, "13a").score);
  CHECK(b[4].bleu == sf::train::corpus_bleu({hyps[2]}, {refs[2]}, "13a").score);
  CHECK(b[1].bleu > 0);
  CHECK_THROWS_WITH(sf::train::bleu_by_source_length(hyps, refs, {1, 2}, {11}, "13a"), Catch::Contains("as many"));
}
