// Corpus BLEU (Papineni et al., 2002), computed exactly as sacreBLEU 2.6.0 computes it by default:
// `sacrebleu.BLEU(tokenize=...).corpus_score(hypotheses, [references])`, that is cased, exponential
// smoothing, maximum n-gram order 4, no effective order, one reference per hypothesis.
//
// Scores reported in papers are sacreBLEU's, so a model trained here can be compared with them only
// if every step matches: the tokenizer (13a, or zh for Chinese), the n-gram clipping, the brevity
// penalty and the smoothing. tests/test_bleu.cpp checks the result against scores that sacreBLEU
// itself produced (tests/data/sacrebleu_cases.json).
//
// Text is UTF-8. sacreBLEU works on Python strings (Unicode code points), so the tokenizers decode
// to code points first; invalid UTF-8 is an error, as it is when sacreBLEU reads a file.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sf::train {

// sacreBLEU's default tokenizer (Tokenizer13a, the mteval-v13a.pl rules used by WMT):
//   1. remove "<skipped>" and "-\n", turn "\n" into a space, unescape &quot; &amp; &lt; &gt;;
//   2. pad the line with a space on each side;
//   3. put spaces around ASCII punctuation and symbols except ' - . , (the class
//      [{-~ [-` space-& (-+ :-@ /]);
//   4. split "." and "," from a neighbour that is not a digit, so "3.5" and "1,000" stay whole but
//      "end." becomes "end ." ;
//   5. split "-" after a digit ("1990-2000" -> "1990 - 2000");
//   6. collapse runs of whitespace to one space and strip the ends.
// Letters outside ASCII (ä, é, 中) are never touched.
//   tokenize_13a("He paid $1,000.50 (cash).") == "He paid $ 1,000.50 ( cash ) ."
std::string tokenize_13a(const std::string& line);

// sacreBLEU's Chinese tokenizer (TokenizerZh): strip the line, put spaces around every character in
// its list of CJK ranges (ideographs, CJK punctuation, full-width forms, ...), then apply steps 3-6
// of tokenize_13a (no unescaping, no padding).
//   tokenize_zh("我喜欢猫。") == "我 喜 欢 猫 。"
std::string tokenize_zh(const std::string& line);

// A corpus BLEU score and the statistics it was computed from, as sacreBLEU's BLEUScore holds them.
struct BleuResult {
  double score = 0;                          // BLEU in [0, 100], e.g. 34.59
  std::array<double, 4> precisions{};        // n-gram precisions p_1..p_4 in [0, 100] (smoothed)
  double bp = 0;                             // brevity penalty in [0, 1]
  std::int64_t sys_len = 0;                  // hypothesis tokens in the whole corpus
  std::int64_t ref_len = 0;                  // reference tokens in the whole corpus
  std::array<std::int64_t, 4> counts{};      // matched (clipped) n-grams, n = 1..4
  std::array<std::int64_t, 4> totals{};      // hypothesis n-grams, n = 1..4
  std::string signature;                     // "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
};

// Corpus BLEU of hypotheses[i] against references[i] (one reference each), tokenized with
// `tokenize` ("13a" or "zh"). Counts are pooled over the corpus before the precisions are taken:
//   p_n   = 100 * sum_i matched_n(i) / sum_i hyp_ngrams_n(i), where a hypothesis n-gram matches at
//           most as often as it occurs in the reference ("clipping");
//           exp smoothing: the k-th order with no match gets p_n = 100 / (2^k * hyp_ngrams_n);
//   BP    = 1 if sys_len >= ref_len, else exp(1 - ref_len / sys_len) (0 if sys_len is 0);
//   score = BP * exp(mean_n log p_n), and 0 when nothing matches at all.
// Throws std::invalid_argument for an unknown tokenizer, unequal numbers of hypotheses and
// references, an empty corpus, an empty reference (sacreBLEU rejects those too) or invalid UTF-8.
BleuResult corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                       const std::string& tokenize = "13a");

// sacreBLEU's text line for a score, signature first:
//   "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 34.59 65.8/42.2/28.8/20.0
//    (BP = 0.978 ratio = 0.978 hyp_len = 123 ref_len = 126)"   (one line)
std::string format_bleu(const BleuResult& result);

}  // namespace sf::train
