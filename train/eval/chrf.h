// Corpus chrF (Popović, 2015) and chrF++ (Popović, 2017), computed exactly as sacreBLEU 2.6.0
// computes them: `sacrebleu.CHRF(char_order, word_order, beta, lowercase, whitespace,
// eps_smoothing).corpus_score(hypotheses, [references])`, one reference per hypothesis.
//
// chrF compares character n-grams instead of words, so it gives partial credit to a word with the
// right stem and the wrong ending, and it needs no tokenizer: it is what short-sentence and
// Chinese-target evaluations report next to BLEU. The default is sacreBLEU's chrF2:
//   character n-grams of 1..6 code points of the sentence with all whitespace removed, no word
//   n-grams, beta = 2 (recall counts twice as much as precision), case kept;
// chrF++ adds word unigrams and bigrams (word_order = 2).
//
// How sacreBLEU computes it (metrics/chrf.py), and so how this does:
//   1. per sentence and per order n: hyp_n = hypothesis n-grams (0 when the reference has no
//      n-gram of that order), ref_n = reference n-grams, match_n = sum over hypothesis n-grams of
//      min(count in hypothesis, count in reference);
//   2. these three counts are summed over the corpus (not an average of sentence scores);
//   3. P_n = match_n / hyp_n, R_n = match_n / ref_n; the orders where both hyp_n and ref_n are > 0
//      (the "effective order") are averaged: P = mean P_n, R = mean R_n;
//   4. chrF = 100 * (1 + beta^2) P R / (beta^2 P + R), or 0 when P + R = 0.
// With eps_smoothing (chrF++.py, Moses, NLTK) step 3-4 differ: an order with hyp_n or ref_n = 0
// gets P_n or R_n = 1e-16, each order gets its own F_n, and chrF = 100 * mean F_n.
//
// Characters are Unicode code points (the text is UTF-8; invalid UTF-8 is an error, as it is when
// sacreBLEU reads a file). tests/test_chrf.cpp checks the scores against those sacreBLEU 2.6.0
// itself produced (tests/data/sacrebleu_chrf_cases.json).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sf::train {

// sacreBLEU's CHRF(...) arguments, with its defaults (chrF2).
struct ChrfOptions {
  int char_order = 6;          // character n-grams of 1..char_order code points (nc in the signature)
  int word_order = 0;          // word n-grams of 1..word_order words; 2 = chrF++ (nw)
  int beta = 2;                // weight of recall against precision (the "2" of chrF2)
  bool lowercase = false;      // lowercase both sides first (case:lc); default case:mixed
  bool whitespace = false;     // keep whitespace inside character n-grams (space:yes); default removed
  bool eps_smoothing = false;  // chrF++.py-style eps smoothing (eff:no); default effective order (eff:yes)
};

// The match counts of one n-gram order, summed over the corpus (step 1-2 above).
struct ChrfOrderStats {
  std::int64_t hyp = 0;    // hypothesis n-grams (of sentences whose reference has any of this order)
  std::int64_t ref = 0;    // reference n-grams
  std::int64_t match = 0;  // matched n-grams, each counted at most as often as the reference has it
};

// A corpus chrF score and the statistics it was computed from.
struct ChrfResult {
  double score = 0;                   // chrF in [0, 100], e.g. 58.23
  std::vector<ChrfOrderStats> stats;  // character orders 1..char_order, then word orders 1..word_order
  std::string name;                   // "chrF2", or "chrF2++" for word_order 2 (one '+' per word order)
  std::string signature;              // "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"
};

// Corpus chrF of hypotheses[i] against references[i] (one reference each). Throws
// std::invalid_argument for unequal numbers of hypotheses and references, an empty corpus, an
// empty reference (sacreBLEU rejects those too), invalid UTF-8 or options out of range
// (char_order, word_order, beta < 0, or no order at all). An empty hypothesis is fine: it
// matches nothing.
//   corpus_chrf({"the cat sat"}, {"the cat sat"}).score == 100
ChrfResult corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                       const ChrfOptions& options = {});

// The chrF of corpus statistics (steps 3-4, sacreBLEU's CHRF._compute_f_score), in [0, 100].
double chrf_from_stats(const std::vector<ChrfOrderStats>& stats, const ChrfOptions& options);

// sacreBLEU's text line for a score, name and signature first, the score with 2 decimals:
//   "chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 = 58.23"
std::string format_chrf(const ChrfResult& result);

// Python's str.lower() on UTF-8 text, as sacreBLEU's lowercase option applies it: the C library's
// Unicode lowercase mapping (glibc's C.UTF-8 locale), plus Python's two special cases, U+0130 İ ->
// "i̇" (two code points) and a final capital sigma Σ -> ς (after a cased letter, not before one).
std::string python_lower(const std::string& text);

}  // namespace sf::train
