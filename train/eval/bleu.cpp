// Corpus BLEU identical to sacreBLEU 2.6.0's default (see bleu.h). Each piece below mirrors one
// piece of sacreBLEU's Python source, named in its comment, so the two can be read side by side:
//   tokenizers/tokenizer_re.py    -> tokenize_regexp       (the four punctuation rules, shared)
//   tokenizers/tokenizer_13a.py   -> tokenize_13a_chars    (unescaping + padding, then the rules)
//   tokenizers/tokenizer_zh.py    -> tokenize_zh_chars     (CJK characters split, then the rules)
//   metrics/helpers.py            -> count_ngrams
//   metrics/bleu.py               -> corpus_bleu, compute_bleu, format_bleu
// The tokenizers work on code points (std::u32string), as Python's str does.
#include "train/eval/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <unordered_map>

#include "train/eval/python_text.h"

namespace sf::train {
namespace {

constexpr int kMaxOrder = 4;                       // BLEU-4: n-grams of 1..4 tokens
constexpr const char* kSacrebleuVersion = "2.6.0";  // the version whose scores we reproduce

// ---------------------------------------------------------------------------------------------
// Python's str whitespace handling (str.isspace, str.split(), str.strip(), str.rstrip())

// Python's ' '.join(line.split()): drops leading/trailing whitespace, one space between words.
std::u32string collapse_whitespace(const std::u32string& line) {
  std::u32string out;
  out.reserve(line.size());
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_python_space(line[i])) ++i;
    if (i == line.size()) break;
    if (!out.empty()) out += U' ';
    while (i < line.size() && !is_python_space(line[i])) out += line[i++];
  }
  return out;
}

// Python's line.rstrip() (right end only).
std::u32string rstrip(std::u32string line) {
  while (!line.empty() && is_python_space(line.back())) line.pop_back();
  return line;
}

// Python's line.strip() (both ends).
std::u32string strip(const std::u32string& line) {
  std::size_t begin = 0, end = line.size();
  while (begin < end && is_python_space(line[begin])) ++begin;
  while (end > begin && is_python_space(line[end - 1])) --end;
  return line.substr(begin, end - begin);
}

// Python's line.replace(from, to): every non-overlapping occurrence, left to right.
std::u32string replace_all(const std::u32string& line, const std::u32string& from, const std::u32string& to) {
  std::u32string out;
  std::size_t start = 0, found = 0;
  while ((found = line.find(from, start)) != std::u32string::npos) {
    out.append(line, start, found - start);
    out += to;
    start = found + from.size();
  }
  out.append(line, start, std::u32string::npos);
  return out;
}

// ---------------------------------------------------------------------------------------------
// TokenizerRegexp (tokenizer_re.py): the four re.sub rules shared by 13a and zh, then whitespace
// collapsing. The character classes are ASCII-only; every other code point is "not a digit".

bool is_ascii_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool is_not_ascii_digit(char32_t c) { return !is_ascii_digit(c); }
bool is_period_or_comma(char32_t c) { return c == U'.' || c == U','; }
bool is_dash(char32_t c) { return c == U'-'; }

// The class [\{-\~\[-\` -\&\(-\+\:-\@\/]: { | } ~  [ \ ] ^ _ `  space ! " # $ % &  ( ) * +
// : ; < = > ? @  and / -- all ASCII punctuation and symbols except ' - . , which have own rules.
bool is_13a_symbol(char32_t c) {
  return (c >= U'{' && c <= U'~') || (c >= U'[' && c <= U'`') || (c >= U' ' && c <= U'&') ||
         (c >= U'(' && c <= U'+') || (c >= U':' && c <= U'@') || c == U'/';
}

// Rule 1: re.sub(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])', r' \1 ', line)
std::u32string space_around_symbols(const std::u32string& line) {
  std::u32string out;
  out.reserve(line.size() * 2);
  for (char32_t c : line) {
    if (is_13a_symbol(c)) {
      out += U' ';
      out += c;
      out += U' ';
    } else {
      out += c;
    }
  }
  return out;
}

using CharClass = bool (*)(char32_t);

// Rules 2-4 all have the shape re.sub(r'(A)(B)', replacement, line) with one character per group.
// Python scans left to right and matches never overlap: after a match the scan resumes behind both
// characters, so in ",,x" only the first pair is tried against (A)(B) from position 0.
// The replacement puts one space after each group (r'\1 \2 ') or before each (r' \1 \2').
enum class SpacePlacement { AfterEach, BeforeEach };

std::u32string space_pairs(const std::u32string& line, CharClass first, CharClass second, SpacePlacement where) {
  std::u32string out;
  out.reserve(line.size() * 2);
  std::size_t i = 0;
  while (i < line.size()) {
    if (i + 1 < line.size() && first(line[i]) && second(line[i + 1])) {
      if (where == SpacePlacement::BeforeEach) out += U' ';
      out += line[i];
      out += U' ';
      out += line[i + 1];
      if (where == SpacePlacement::AfterEach) out += U' ';
      i += 2;
    } else {
      out += line[i];
      i += 1;
    }
  }
  return out;
}

std::u32string tokenize_regexp(const std::u32string& line) {
  std::u32string s = space_around_symbols(line);
  // Rule 2: period and comma split unless preceded by a digit: r'([^0-9])([\.,])' -> r'\1 \2 '
  s = space_pairs(s, is_not_ascii_digit, is_period_or_comma, SpacePlacement::AfterEach);
  // Rule 3: period and comma split unless followed by a digit: r'([\.,])([^0-9])' -> r' \1 \2'
  s = space_pairs(s, is_period_or_comma, is_not_ascii_digit, SpacePlacement::BeforeEach);
  // Rule 4: dash split when preceded by a digit: r'([0-9])(-)' -> r'\1 \2 '
  s = space_pairs(s, is_ascii_digit, is_dash, SpacePlacement::AfterEach);
  return collapse_whitespace(s);
}

// ---------------------------------------------------------------------------------------------
// Tokenizer13a (tokenizer_13a.py)

std::u32string tokenize_13a_chars(const std::u32string& text) {
  std::u32string line = text;
  line = replace_all(line, U"<skipped>", U"");
  line = replace_all(line, U"-\n", U"");
  line = replace_all(line, U"\n", U" ");
  line = replace_all(line, U"&quot;", U"\"");
  line = replace_all(line, U"&amp;", U"&");
  line = replace_all(line, U"&lt;", U"<");
  line = replace_all(line, U"&gt;", U">");
  // The padding matters: it lets rule 2 split a leading "." or "," (" .5" -> " . 5").
  return tokenize_regexp(U" " + line + U" ");
}

// ---------------------------------------------------------------------------------------------
// TokenizerZh (tokenizer_zh.py)

// sacreBLEU's _UCODE_RANGES, as Python actually evaluates them. Two entries were meant for the
// supplementary planes but are written with 4-digit \u escapes: '\u20000' is the two-character
// string "\u2000" "0", and '\u2a6d6' is "\u2a6d" "6". Comparing a single character c against
// them, "\u20000" <= c <= "\u2a6d6" holds exactly for U+2001..U+2A6D (general punctuation such as
// the em dash and curly quotes, arrows, maths symbols, ...), and likewise '\u2f800'..'\u2fa1d'
// covers U+2F81..U+2FA1. We reproduce that behaviour, not the comment's intent.
struct CodePointRange {
  char32_t first, last;  // inclusive
};
constexpr CodePointRange kChineseRanges[] = {
    {0x3400, 0x4DB5},  // CJK Unified Ideographs Extension A
    {0x4E00, 0x9FA5},  // CJK Unified Ideographs
    {0x9FA6, 0x9FBB},  // CJK Unified Ideographs, release 4.1
    {0xF900, 0xFA2D},  // CJK Compatibility Ideographs
    {0xFA30, 0xFA6A},  // CJK Compatibility Ideographs, release 3.2
    {0xFA70, 0xFAD9},  // CJK Compatibility Ideographs, release 4.1
    {0x2001, 0x2A6D},  // meant as Extension B U+20000..U+2A6D6 (see above)
    {0x2F81, 0x2FA1},  // meant as Compatibility Supplement U+2F800..U+2FA1D (see above)
    {0xFF00, 0xFFEF},  // full-width ASCII and punctuation, half-width Katakana, Hangul letters
    {0x2E80, 0x2EFF},  // CJK Radicals Supplement
    {0x3000, 0x303F},  // CJK punctuation (。、「」 and the ideographic space)
    {0x31C0, 0x31EF},  // CJK strokes
    {0x2F00, 0x2FDF},  // Kangxi Radicals
    {0x2FF0, 0x2FFF},  // ideographic description characters
    {0x3100, 0x312F},  // Bopomofo
    {0x31A0, 0x31BF},  // Bopomofo extended
    {0xFE10, 0xFE1F},  // vertical forms
    {0xFE30, 0xFE4F},  // CJK compatibility forms
    {0x2600, 0x26FF},  // miscellaneous symbols
    {0x2700, 0x27BF},  // dingbats
    {0x3200, 0x32FF},  // enclosed CJK letters and months
    {0x3300, 0x33FF},  // CJK compatibility
};

bool is_chinese_char(char32_t c) {
  for (const CodePointRange& range : kChineseRanges)
    if (c >= range.first && c <= range.last) return true;
  return false;
}

std::u32string tokenize_zh_chars(const std::u32string& text) {
  std::u32string line_in_chars;
  for (char32_t c : strip(text)) {
    if (is_chinese_char(c)) {
      line_in_chars += U' ';
      line_in_chars += c;
      line_in_chars += U' ';
    } else {
      line_in_chars += c;
    }
  }
  return tokenize_regexp(line_in_chars);
}

// ---------------------------------------------------------------------------------------------
// BLEU statistics (metrics/helpers.py, metrics/bleu.py)

using Tokenizer = std::u32string (*)(const std::u32string&);

Tokenizer tokenizer_named(const std::string& name) {
  if (name == "13a") return tokenize_13a_chars;
  if (name == "zh") return tokenize_zh_chars;
  throw std::invalid_argument("corpus_bleu: unknown tokenizer '" + name + "'; expected \"13a\" or \"zh\"");
}

// sacreBLEU's BLEU._preprocess_segment: rstrip, tokenize, then line.split() into tokens.
std::vector<std::string> segment_tokens(const std::string& segment, Tokenizer tokenizer, const std::string& what) {
  const std::string tokenized = encode_utf8(tokenizer(rstrip(decode_utf8(segment, what))));
  // The tokenizer already collapsed whitespace, so tokens are separated by exactly one ' '.
  std::vector<std::string> tokens;
  std::size_t start = 0;
  while (start < tokenized.size()) {
    std::size_t end = tokenized.find(' ', start);
    if (end == std::string::npos) end = tokenized.size();
    tokens.push_back(tokenized.substr(start, end - start));
    start = end + 1;
  }
  return tokens;
}

// For each order n = 1..4 (index n-1): how often each n-gram occurs. An n-gram is keyed by its
// tokens joined with ' ', which is unambiguous because tokens contain no whitespace.
using NgramCounts = std::array<std::unordered_map<std::string, std::int64_t>, kMaxOrder>;

NgramCounts count_ngrams(const std::vector<std::string>& tokens) {
  NgramCounts counts;
  for (std::size_t start = 0; start < tokens.size(); ++start) {
    std::string ngram = tokens[start];
    for (int n = 1; n <= kMaxOrder && start + n <= tokens.size(); ++n) {
      if (n > 1) ngram += ' ' + tokens[start + n - 1];
      counts[n - 1][ngram] += 1;
    }
  }
  return counts;
}

// sacreBLEU's math.log floored: log(0) is replaced by a huge negative number, so a zero precision
// makes exp(mean log p) exactly 0 instead of raising an error.
double floored_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

// BLEU.compute_bleu with smooth_method="exp", effective_order=False, max_ngram_order=4. Fills
// precisions, bp and score of `r` from its counts, totals, sys_len and ref_len.
void compute_bleu(BleuResult& r) {
  r.bp = 1.0;
  if (r.sys_len < r.ref_len)
    r.bp = r.sys_len > 0 ? std::exp(1.0 - static_cast<double>(r.ref_len) / static_cast<double>(r.sys_len)) : 0.0;

  r.precisions.fill(0.0);
  r.score = 0.0;
  // No matched n-gram of any order: BLEU is 0 (and all precisions stay 0).
  if (std::all_of(r.counts.begin(), r.counts.end(), [](std::int64_t c) { return c == 0; })) return;

  double smooth_mteval = 1.0;  // doubles for each order that has hypothesis n-grams but no match
  for (int n = 1; n <= kMaxOrder; ++n) {
    const auto correct = static_cast<double>(r.counts[n - 1]);
    const auto total = static_cast<double>(r.totals[n - 1]);
    if (r.totals[n - 1] == 0) break;  // hypotheses too short for this order: p_n stays 0
    if (r.counts[n - 1] == 0) {
      smooth_mteval *= 2;
      r.precisions[n - 1] = 100.0 / (smooth_mteval * total);
    } else {
      r.precisions[n - 1] = 100.0 * correct / total;
    }
  }

  double log_sum = 0.0;
  for (double p : r.precisions) log_sum += floored_log(p);
  r.score = r.bp * std::exp(log_sum / kMaxOrder);
}

}  // namespace

std::string tokenize_13a(const std::string& line) {
  return encode_utf8(tokenize_13a_chars(decode_utf8(line, "tokenize_13a: input")));
}

std::string tokenize_zh(const std::string& line) {
  return encode_utf8(tokenize_zh_chars(decode_utf8(line, "tokenize_zh: input")));
}

BleuResult corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                       const std::string& tokenize) {
  const Tokenizer tokenizer = tokenizer_named(tokenize);
  if (hypotheses.size() != references.size())
    throw std::invalid_argument("corpus_bleu: expected one reference per hypothesis, got " +
                                std::to_string(hypotheses.size()) + " hypotheses and " +
                                std::to_string(references.size()) + " references");
  if (hypotheses.empty()) throw std::invalid_argument("corpus_bleu: expected at least one sentence, got none");

  BleuResult r;
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    // sacreBLEU refuses empty references ("Empty or `None` reference sentence found.").
    if (references[i].empty())
      throw std::invalid_argument("corpus_bleu: reference " + std::to_string(i) +
                                  " is empty; expected a non-empty reference for every hypothesis");
    const auto hyp_tokens = segment_tokens(hypotheses[i], tokenizer, "corpus_bleu: hypothesis " + std::to_string(i));
    const auto ref_tokens = segment_tokens(references[i], tokenizer, "corpus_bleu: reference " + std::to_string(i));
    const NgramCounts hyp_ngrams = count_ngrams(hyp_tokens);
    const NgramCounts ref_ngrams = count_ngrams(ref_tokens);

    r.sys_len += static_cast<std::int64_t>(hyp_tokens.size());
    r.ref_len += static_cast<std::int64_t>(ref_tokens.size());
    for (int n = 0; n < kMaxOrder; ++n) {
      for (const auto& [ngram, hyp_count] : hyp_ngrams[n]) {
        r.totals[n] += hyp_count;
        // Clipping: an n-gram counts as matched at most as often as the reference has it.
        const auto found = ref_ngrams[n].find(ngram);
        if (found != ref_ngrams[n].end()) r.counts[n] += std::min(hyp_count, found->second);
      }
    }
  }

  compute_bleu(r);
  r.signature = "nrefs:1|case:mixed|eff:no|tok:" + tokenize + "|smooth:exp|version:" + kSacrebleuVersion;
  return r;
}

std::string format_bleu(const BleuResult& result) {
  // BLEUScore: ratio is 0 when there are no reference tokens (cannot happen with non-empty
  // references that tokenize to something, but sacreBLEU guards it, so do we).
  const double ratio =
      result.ref_len > 0 ? static_cast<double>(result.sys_len) / static_cast<double>(result.ref_len) : 0.0;
  // printf's %.Nf rounds the exact binary value half-to-even, as Python's f"{x:.Nf}" does.
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer),
                " = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", result.score,
                result.precisions[0], result.precisions[1], result.precisions[2], result.precisions[3], result.bp,
                ratio, static_cast<long long>(result.sys_len), static_cast<long long>(result.ref_len));
  // Score.format: "BLEU|<signature> = ..." or just "BLEU = ..." without a signature.
  return (result.signature.empty() ? std::string("BLEU") : "BLEU|" + result.signature) + buffer;
}

}  // namespace sf::train
