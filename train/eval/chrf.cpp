// Corpus chrF identical to sacreBLEU 2.6.0's CHRF (see chrf.h). Each piece mirrors one piece of
// sacreBLEU's Python source, named in its comment, so the two can be read side by side:
//   metrics/helpers.py  extract_all_char_ngrams, extract_word_ngrams -> char_ngrams, word_ngrams
//   metrics/chrf.py     _remove_punctuation        -> split_punctuation
//                       _get_match_statistics      -> match_statistics
//                       _compute_f_score           -> chrf_from_stats
//                       CHRFSignature, CHRFScore   -> signature_of, name_of, format_chrf
//   metrics/base.py     _cache_references, corpus_score -> corpus_chrf (the checks, the sum)
// Text is handled as code points (std::u32string), as Python's str is.
#include "train/eval/chrf.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <unordered_map>

#include "train/eval/python_text.h"

namespace sf::train {
namespace {

constexpr const char* kSacrebleuVersion = "2.6.0";  // the version whose scores we reproduce

// ---------------------------------------------------------------------------------------------
// Python's str.split() and str.lower()

// line.split(): the runs of non-space characters.
std::vector<std::u32string> split_words(const std::u32string& line) {
  std::vector<std::u32string> words;
  std::u32string word;
  for (char32_t c : line) {
    if (!is_python_space(c)) {
      word += c;
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

// The C.UTF-8 locale, whose towlower/towupper know all of Unicode (not the global locale: a
// program may have set another one).
locale_t unicode_locale() {
  static const locale_t locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  if (locale == static_cast<locale_t>(nullptr))
    throw std::runtime_error("chrF lowercase: the C library has no C.UTF-8 locale for Unicode case mapping");
  return locale;
}

bool is_cased(char32_t c, locale_t locale) {
  const auto w = static_cast<wint_t>(c);
  return towlower_l(w, locale) != w || towupper_l(w, locale) != w;
}

std::u32string lower_chars(const std::u32string& text) {
  const locale_t locale = unicode_locale();
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c == 0x130) {  // İ: Python's full lowercase mapping is i + combining dot above
      out += U"i\u0307";
    } else if (c == 0x3A3) {  // Σ at the end of a word is ς (Python's Final_Sigma rule)
      const bool after_letter = i > 0 && is_cased(text[i - 1], locale);
      const bool before_letter = i + 1 < text.size() && is_cased(text[i + 1], locale);
      out += after_letter && !before_letter ? U'\u03C2' : U'\u03C3';
    } else {
      out += static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), locale));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// n-grams (metrics/helpers.py, metrics/chrf.py)

using NgramCounts = std::unordered_map<std::u32string, std::int64_t>;  // n-gram -> occurrences

// extract_all_char_ngrams: counts of the character n-grams of orders 1..max_order, element n-1
// for order n; whitespace removed first unless `keep_whitespace`.
//   "ab c" -> {a:1, b:1, c:1}, {ab:1, bc:1}, {abc:1}, {}, ...
std::vector<NgramCounts> char_ngrams(const std::u32string& line, int max_order, bool keep_whitespace) {
  std::u32string chars;
  if (keep_whitespace) {
    chars = line;
  } else {
    for (const std::u32string& word : split_words(line)) chars += word;  // "".join(line.split())
  }
  std::vector<NgramCounts> counts(static_cast<std::size_t>(max_order));
  for (std::size_t n = 1; n <= counts.size(); ++n)
    for (std::size_t i = 0; i + n <= chars.size(); ++i) ++counts[n - 1][chars.substr(i, n)];
  return counts;
}

// _remove_punctuation: the words of the line, with one ASCII punctuation character split off the
// end of a word, or else off its start ("(hi)" -> "(hi", ")"; "cat." -> "cat", ".").
std::vector<std::u32string> split_punctuation(const std::u32string& line) {
  static const std::u32string kPunctuation = U"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";  // string.punctuation
  auto is_punct = [](char32_t c) { return kPunctuation.find(c) != std::u32string::npos; };
  std::vector<std::u32string> tokens;
  for (const std::u32string& w : split_words(line)) {
    if (w.size() > 1 && is_punct(w.back())) {
      tokens.push_back(w.substr(0, w.size() - 1));
      tokens.push_back(w.substr(w.size() - 1));
    } else if (w.size() > 1 && is_punct(w.front())) {
      tokens.push_back(w.substr(0, 1));
      tokens.push_back(w.substr(1));
    } else {
      tokens.push_back(w);
    }
  }
  return tokens;
}

// extract_word_ngrams: counts of the n-grams of `tokens`, each the words joined by one space.
NgramCounts word_ngrams(const std::vector<std::u32string>& tokens, std::size_t n) {
  NgramCounts counts;
  for (std::size_t i = 0; i + n <= tokens.size(); ++i) {
    std::u32string ngram = tokens[i];
    for (std::size_t k = 1; k < n; ++k) ngram += U' ' + tokens[i + k];
    ++counts[ngram];
  }
  return counts;
}

// All n-gram counts of one (preprocessed) sentence: character orders 1..char_order, then word
// orders 1..word_order (CHRF._extract_reference_info, _compute_segment_statistics).
std::vector<NgramCounts> sentence_ngrams(const std::u32string& line, const ChrfOptions& o) {
  std::vector<NgramCounts> counts = char_ngrams(line, o.char_order, o.whitespace);
  if (o.word_order > 0) {
    const std::vector<std::u32string> words = split_punctuation(line);
    for (int n = 1; n <= o.word_order; ++n) counts.push_back(word_ngrams(words, static_cast<std::size_t>(n)));
  }
  return counts;
}

// _get_match_statistics of one order: [hyp, ref, match]. A hypothesis n-gram matches at most as
// often as the reference has it; hyp is 0 when the reference has no n-gram of this order.
ChrfOrderStats match_statistics(const NgramCounts& hyp, const NgramCounts& ref) {
  ChrfOrderStats s;
  for (const auto& [ngram, count] : hyp) {
    s.hyp += count;
    if (const auto found = ref.find(ngram); found != ref.end()) s.match += std::min(count, found->second);
  }
  if (ref.empty()) s.hyp = 0;
  for (const auto& [ngram, count] : ref) s.ref += count;
  return s;
}

// ---------------------------------------------------------------------------------------------
// the corpus (metrics/base.py) and its signature

void check_arguments(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                     const ChrfOptions& o) {
  if (o.char_order < 0 || o.word_order < 0 || o.beta < 0 || o.char_order + o.word_order == 0)
    throw std::invalid_argument("corpus_chrf: expected char_order, word_order and beta >= 0 and at least one order, got "
                                "char_order " + std::to_string(o.char_order) + ", word_order " +
                                std::to_string(o.word_order) + ", beta " + std::to_string(o.beta));
  if (hypotheses.size() != references.size())
    throw std::invalid_argument("corpus_chrf: expected one reference per hypothesis, got " +
                                std::to_string(hypotheses.size()) + " hypotheses and " +
                                std::to_string(references.size()) + " references");
  if (hypotheses.empty()) throw std::invalid_argument("corpus_chrf: expected at least one sentence, got none");
}

// CHRFSignature: "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0".
std::string signature_of(const ChrfOptions& o) {
  return std::string("nrefs:1|case:") + (o.lowercase ? "lc" : "mixed") + "|eff:" + (o.eps_smoothing ? "no" : "yes") +
         "|nc:" + std::to_string(o.char_order) + "|nw:" + std::to_string(o.word_order) +
         "|space:" + (o.whitespace ? "yes" : "no") + "|version:" + kSacrebleuVersion;
}

// CHRFScore's name: "chrF2", one '+' per word order ("chrF2++" for chrF++).
std::string name_of(const ChrfOptions& o) {
  return "chrF" + std::to_string(o.beta) + std::string(static_cast<std::size_t>(o.word_order), '+');
}

}  // namespace

double chrf_from_stats(const std::vector<ChrfOrderStats>& stats, const ChrfOptions& options) {
  constexpr double kEps = 1e-16;  // sacreBLEU's eps for an order with no n-grams
  const double factor = static_cast<double>(options.beta) * options.beta;  // beta^2
  double eps_score = 0, avg_prec = 0, avg_rec = 0;
  int effective_order = 0;
  for (const ChrfOrderStats& s : stats) {
    const double prec = s.hyp > 0 ? static_cast<double>(s.match) / static_cast<double>(s.hyp) : kEps;
    const double rec = s.ref > 0 ? static_cast<double>(s.match) / static_cast<double>(s.ref) : kEps;
    const double denom = factor * prec + rec;
    eps_score += denom > 0 ? (1 + factor) * prec * rec / denom : kEps;
    if (s.hyp > 0 && s.ref > 0) {  // the effective order: orders that exist on both sides
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (options.eps_smoothing) return 100 * eps_score / static_cast<double>(stats.size());
  if (effective_order == 0) return 0.0;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0) return 0.0;
  return 100 * ((1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec));
}

ChrfResult corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                       const ChrfOptions& options) {
  check_arguments(hypotheses, references, options);
  ChrfResult r;
  r.stats.resize(static_cast<std::size_t>(options.char_order + options.word_order));
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    // sacreBLEU refuses empty references ("Empty or `None` reference sentence found.").
    if (references[i].empty())
      throw std::invalid_argument("corpus_chrf: reference " + std::to_string(i) +
                                  " is empty; expected a non-empty reference for every hypothesis");
    std::u32string hyp = decode_utf8(hypotheses[i], "corpus_chrf: hypothesis " + std::to_string(i));
    std::u32string ref = decode_utf8(references[i], "corpus_chrf: reference " + std::to_string(i));
    if (options.lowercase) hyp = lower_chars(hyp), ref = lower_chars(ref);  // _preprocess_segment
    const std::vector<NgramCounts> hyp_ngrams = sentence_ngrams(hyp, options);
    const std::vector<NgramCounts> ref_ngrams = sentence_ngrams(ref, options);
    for (std::size_t n = 0; n < r.stats.size(); ++n) {  // summed over the corpus (sum_of_lists)
      const ChrfOrderStats s = match_statistics(hyp_ngrams[n], ref_ngrams[n]);
      r.stats[n].hyp += s.hyp, r.stats[n].ref += s.ref, r.stats[n].match += s.match;
    }
  }
  r.score = chrf_from_stats(r.stats, options);
  r.name = name_of(options);
  r.signature = signature_of(options);
  return r;
}

std::string format_chrf(const ChrfResult& result) {
  // printf's %.2f rounds the exact binary value half-to-even, as Python's f"{x:.2f}" does.
  char score[64];
  std::snprintf(score, sizeof(score), "%.2f", result.score);
  // Score.format: "chrF2|<signature> = 58.23" or just "chrF2 = 58.23" without a signature.
  return (result.signature.empty() ? result.name : result.name + "|" + result.signature) + " = " + score;
}

std::string python_lower(const std::string& text) {
  return encode_utf8(lower_chars(decode_utf8(text, "python_lower: input")));
}

}  // namespace sf::train
