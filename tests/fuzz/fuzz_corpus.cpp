// libFuzzer target: data/corpus.h valid_utf8(), read_lines() and read_parallel() on arbitrary bytes.
//
// The input is the source file, a 0xFF byte, then the target file (see fuzz_inputs.h). Bad corpus
// files must give a CorpusError (or another std::exception), never a crash, a sanitizer report, a
// hang or a leak. Beyond that, both functions are compared with independent references written
// from the documentation, so a wrong answer is caught as well as a crash:
//   - valid_utf8 against the table of well-formed byte sequences in the Unicode Standard
//     (chapter 3, table 3-7), including the offset of the first bad sequence;
//   - read_parallel against a plain split into lines (BOM dropped, "\n" and "\r\n" endings,
//     a last line without "\n"): it must succeed exactly when every line is valid UTF-8, both
//     files have the same number of lines and that number is not 0, and then return those lines.
// A disagreement aborts with a message, which libFuzzer reports as a crash like any other.
//
// Run: tools/run_fuzzers.sh, or by hand:
//   build/fuzz/fuzz_corpus -dict=tests/fuzz/corpus.dict -max_len=4096 tests/fuzz/corpus/corpus
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus.h"
#include "fuzz_inputs.h"

namespace {

constexpr std::size_t kValid = std::string_view::npos;

[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz_corpus: %s\n", what.c_str());
  std::abort();
}

// The offset of the first ill-formed sequence in `text`, or kValid. Unicode table 3-7: the only
// well-formed sequences are
//   00..7F
//   C2..DF 80..BF
//   E0 A0..BF 80..BF  |  E1..EC 80..BF 80..BF  |  ED 80..9F 80..BF  |  EE..EF 80..BF 80..BF
//   F0 90..BF 80..BF 80..BF  |  F1..F3 80..BF 80..BF 80..BF  |  F4 80..8F 80..BF 80..BF
std::size_t reference_bad_offset(std::string_view text) {
  struct Range {
    unsigned char lo, hi;
  };
  auto in = [](unsigned char b, Range r) { return b >= r.lo && b <= r.hi; };
  constexpr Range kTail{0x80, 0xBF};
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    Range second = kTail;  // the allowed range of the second byte depends on the first
    if (b0 <= 0x7F) length = 1;
    else if (in(b0, {0xC2, 0xDF})) length = 2;
    else if (b0 == 0xE0) length = 3, second = {0xA0, 0xBF};
    else if (in(b0, {0xE1, 0xEC}) || in(b0, {0xEE, 0xEF})) length = 3;
    else if (b0 == 0xED) length = 3, second = {0x80, 0x9F};
    else if (b0 == 0xF0) length = 4, second = {0x90, 0xBF};
    else if (in(b0, {0xF1, 0xF3})) length = 4;
    else if (b0 == 0xF4) length = 4, second = {0x80, 0x8F};
    else return i;
    if (i + length > text.size()) return i;
    for (std::size_t k = 1; k < length; ++k)
      if (!in(static_cast<unsigned char>(text[i + k]), k == 1 ? second : kTail)) return i;
    i += length;
  }
  return kValid;
}

void check_valid_utf8(std::string_view text) {
  std::size_t offset = kValid;
  const bool ok = sf::data::valid_utf8(text, &offset);
  const std::size_t expected = reference_bad_offset(text);
  if (ok != (expected == kValid))
    broken(std::string("valid_utf8 says ") + (ok ? "valid" : "invalid at " + std::to_string(offset)) +
           ", the Unicode table says " + (expected == kValid ? "valid" : "invalid at " + std::to_string(expected)));
  if (!ok && offset != expected)
    broken("valid_utf8 puts the first bad sequence at byte " + std::to_string(offset) + ", the Unicode table at " +
           std::to_string(expected));
}

// The lines of a file as corpus.h documents them; false if one is not valid UTF-8.
bool reference_lines(std::string_view text, std::vector<std::string>& lines) {
  lines.clear();
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (reference_bad_offset(line) != kValid) return false;
    lines.emplace_back(line);
  }
  return true;
}

void check_read_parallel(const sf::fuzz::ParallelText& text, const std::string& src_path,
                         const std::string& tgt_path) {
  sf::fuzz::write_file(src_path, text.src);
  sf::fuzz::write_file(tgt_path, text.tgt);
  std::vector<std::string> src, tgt;
  const bool src_ok = reference_lines(text.src, src);
  const bool tgt_ok = reference_lines(text.tgt, tgt);
  const bool should_load = src_ok && tgt_ok && src.size() == tgt.size() && !src.empty();

  sf::data::ParallelCorpus corpus;
  try {
    corpus = sf::data::read_parallel(src_path, tgt_path);
  } catch (const std::exception& e) {
    sf::fuzz::trace("fuzz_corpus", std::string("rejected: ") + e.what());
    if (should_load)
      broken(std::string("read_parallel rejects a good corpus of ") + std::to_string(src.size()) +
             " lines: " + e.what());
    return;  // a clean, documented rejection
  }
  sf::fuzz::trace("fuzz_corpus", "accepted " + std::to_string(corpus.size()) + " pairs");
  if (!should_load) broken("read_parallel accepts a corpus it should reject");
  if (corpus.src != src || corpus.tgt != tgt) broken("read_parallel returns other lines than the files hold");
  if (corpus.size() != static_cast<std::int64_t>(src.size())) broken("ParallelCorpus::size() is wrong");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sf::fuzz::ScratchDir dir;
  static const std::string src_path = dir.file("input.src");
  static const std::string tgt_path = dir.file("input.tgt");

  const std::string_view input(reinterpret_cast<const char*>(data), size);
  check_valid_utf8(input);
  check_read_parallel(sf::fuzz::split_parallel(input), src_path, tgt_path);
  return 0;
}
