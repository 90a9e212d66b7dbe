#include "data/corpus.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

namespace sf::data {

namespace fs = std::filesystem;

bool valid_utf8(std::string_view text, std::size_t* bad_offset) {
  // A code point is 1 to 4 bytes: 0xxxxxxx | 110xxxxx 10xxxxxx | 1110xxxx 10xxxxxx 10xxxxxx |
  // 11110xxx 10xxxxxx 10xxxxxx 10xxxxxx. The smallest code point each length may encode (to reject
  // "overlong" encodings such as C0 80 for U+0000) is 0, 0x80, 0x800, 0x10000.
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    std::uint32_t code_point = 0, smallest = 0;
    if ((lead >> 5) == 0x6) {
      length = 2, code_point = lead & 0x1F, smallest = 0x80;
    } else if ((lead >> 4) == 0xE) {
      length = 3, code_point = lead & 0x0F, smallest = 0x800;
    } else if ((lead >> 3) == 0x1E) {
      length = 4, code_point = lead & 0x07, smallest = 0x10000;
    }
    bool ok = length != 0 && i + length <= n;  // a continuation byte cannot lead; nor can F8..FF
    for (std::size_t k = 1; ok && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      ok = (next & 0xC0) == 0x80;
      code_point = (code_point << 6) | (next & 0x3F);
    }
    ok = ok && code_point >= smallest && code_point <= 0x10FFFF &&
         !(code_point >= 0xD800 && code_point <= 0xDFFF);  // UTF-16 surrogates are not characters
    if (!ok) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += length;
  }
  return true;
}

std::vector<std::string> read_lines(const std::string& path) {
  if (!fs::exists(path)) throw CorpusError("corpus file not found: " + path);
  if (fs::is_directory(path)) throw CorpusError(path + " is a directory, expected a text file");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw CorpusError("cannot open " + path + ": " + std::strerror(errno));
  const std::string contents((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) throw CorpusError("error while reading " + path + ": " + std::strerror(errno));

  std::string_view rest(contents);
  if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);  // byte-order mark
  std::vector<std::string> lines;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t bad = 0;
    if (!valid_utf8(line, &bad)) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(line[bad]));
      throw CorpusError(path + " line " + std::to_string(lines.size() + 1) +
                        ": invalid UTF-8 at byte " + std::to_string(bad + 1) + " (" + byte + ")");
    }
    lines.emplace_back(line);
  }
  return lines;
}

ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path) {
  ParallelCorpus corpus;
  corpus.src_path = src_path;
  corpus.tgt_path = tgt_path;
  corpus.src = read_lines(src_path);
  corpus.tgt = read_lines(tgt_path);
  if (corpus.src.size() != corpus.tgt.size())
    throw CorpusError(src_path + " has " + std::to_string(corpus.src.size()) + " lines but " +
                      tgt_path + " has " + std::to_string(corpus.tgt.size()));
  if (corpus.src.empty())
    throw CorpusError("empty corpus: " + src_path + " and " + tgt_path + " have no lines");
  return corpus;
}

std::int64_t drop_overlong_pairs(ParallelCorpus& corpus, std::int64_t max_tokens) {
  if (max_tokens < 1)
    throw std::invalid_argument("drop_overlong_pairs: max_tokens must be at least 1, got " + std::to_string(max_tokens));
  const std::size_t max_bytes = static_cast<std::size_t>(max_tokens) * kMaxBytesPerToken;
  const std::size_t n = std::min(corpus.src.size(), corpus.tgt.size());
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (corpus.src[i].size() > max_bytes || corpus.tgt[i].size() > max_bytes) continue;
    if (kept != i) {
      corpus.src[kept] = std::move(corpus.src[i]);
      corpus.tgt[kept] = std::move(corpus.tgt[i]);
    }
    ++kept;
  }
  const auto dropped = static_cast<std::int64_t>(n - kept);
  corpus.src.resize(kept);
  corpus.tgt.resize(kept);
  if (kept == 0 && n > 0)
    throw CorpusError("no pair of " + corpus.src_path + " and " + corpus.tgt_path + " is left: all " + std::to_string(n) +
                      " have a line longer than " + std::to_string(max_bytes) + " bytes (more than " +
                      std::to_string(max_tokens) + " tokens)");
  return dropped;
}

std::string FilterReport::summary(std::int64_t max_tokens) const {
  std::ostringstream out;
  out << "kept " << kept << " of " << total() << " pairs (" << empty << " with an empty side, "
      << too_long << " longer than " << max_tokens << " tokens)";
  return out.str();
}

FilterReport filter_pairs(ParallelCorpus& corpus, std::vector<std::vector<std::int64_t>>& src_ids,
                          std::vector<std::vector<std::int64_t>>& tgt_ids, std::int64_t max_tokens) {
  const std::size_t n = corpus.src.size();
  if (corpus.tgt.size() != n || src_ids.size() != n || tgt_ids.size() != n)
    throw std::invalid_argument("filter_pairs: expected equal sizes, got " + std::to_string(n) +
                                " source lines, " + std::to_string(corpus.tgt.size()) +
                                " target lines, " + std::to_string(src_ids.size()) +
                                " source id lists, " + std::to_string(tgt_ids.size()) +
                                " target id lists");
  if (max_tokens < 1)
    throw std::invalid_argument("filter_pairs: max_tokens must be at least 1, got " +
                                std::to_string(max_tokens));

  // Compact in place: pair i moves to slot `kept` when it survives.
  FilterReport report;
  for (std::size_t i = 0; i < n; ++i) {
    const auto src_len = static_cast<std::int64_t>(src_ids[i].size());
    const auto tgt_len = static_cast<std::int64_t>(tgt_ids[i].size());
    if (src_len == 0 || tgt_len == 0) {
      ++report.empty;
    } else if (src_len > max_tokens || tgt_len > max_tokens) {
      ++report.too_long;
    } else {
      const auto k = static_cast<std::size_t>(report.kept++);
      if (k != i) {
        corpus.src[k] = std::move(corpus.src[i]);
        corpus.tgt[k] = std::move(corpus.tgt[i]);
        src_ids[k] = std::move(src_ids[i]);
        tgt_ids[k] = std::move(tgt_ids[i]);
      }
    }
  }
  const auto kept = static_cast<std::size_t>(report.kept);
  corpus.src.resize(kept);
  corpus.tgt.resize(kept);
  src_ids.resize(kept);
  tgt_ids.resize(kept);
  if (report.kept == 0)
    throw CorpusError("no pair of " + corpus.src_path + " and " + corpus.tgt_path +
                      " is left after filtering: " + report.summary(max_tokens));
  return report;
}

}  // namespace sf::data
