// Parallel corpus: two aligned text files, line i of one the translation of line i of the other.
//
//   train.de   Zwei junge weiße Männer sind im Freien ...
//   train.en   Two young, White males are outside near many bushes.
//
// Reading checks what would otherwise fail later and far from its cause: a missing file, files
// whose line counts differ (the pairs would be silently misaligned), bytes that are not UTF-8
// (SentencePiece would turn them into <unk>), an empty corpus. Each problem is a CorpusError with a
// one-line message naming the file (and the line), e.g.
//   data/corpora/multi30k/train.de has 29000 lines but data/corpora/multi30k/train.en has 28999
//   data/corpora/multi30k/train.de line 17: invalid UTF-8 at byte 5 (0xff)
//
// After tokenisation, filter_pairs() drops the pairs a model cannot learn from: those with an empty
// side, and those longer than the model's maximum length; it reports how many of each it dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sf::data {

// A problem with the corpus files (not with the program): the CLI prints the message and exits 2.
class CorpusError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// True if `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF, no sequence cut short). Otherwise false, with the 0-based offset of the first byte of
// the first bad sequence in *bad_offset (if given).
bool valid_utf8(std::string_view text, std::size_t* bad_offset = nullptr);

// The lines of a UTF-8 text file, without their "\n" or "\r\n" endings (a final line without "\n"
// counts too; a UTF-8 byte-order mark at the start is dropped). Throws CorpusError for a missing or
// unreadable file and for invalid UTF-8, naming the file, the 1-based line and the 1-based byte
// within the line.
std::vector<std::string> read_lines(const std::string& path);

struct ParallelCorpus {
  std::vector<std::string> src;  // source sentences, e.g. German
  std::vector<std::string> tgt;  // target sentences, same count: tgt[i] translates src[i]
  std::string src_path, tgt_path;  // where they were read from (for messages)
  std::int64_t size() const { return static_cast<std::int64_t>(src.size()); }
};

// Reads both files with read_lines() and checks they pair up. Throws CorpusError for a missing file,
// invalid UTF-8, unequal line counts (both paths and counts in the message) or a corpus of no lines.
ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path);

// The most bytes a line of n tokens can take is under n * kMaxBytesPerToken: a SentencePiece piece
// is at most 16 characters of at most 4 bytes, and normalisation merges at most a few code points
// into one. So a longer line is too long without tokenising it, which matters: tokenising a 10 MB
// line takes hundreds of MB (SentencePiece's lattice).
inline constexpr std::size_t kMaxBytesPerToken = 256;

// Drops, in place and keeping the pairs aligned, every pair with a side longer than
// max_tokens * kMaxBytesPerToken bytes (surely more than max_tokens tokens); returns how many,
// to be counted with filter_pairs()'s too_long. Throws CorpusError (naming both files) if no pair
// is left, std::invalid_argument if max_tokens < 1.
std::int64_t drop_overlong_pairs(ParallelCorpus& corpus, std::int64_t max_tokens);

// What filter_pairs() did: kept + empty + too_long is the number of pairs it was given.
struct FilterReport {
  std::int64_t kept = 0;      // pairs left
  std::int64_t empty = 0;     // dropped: no tokens on one side or both (an empty or blank line)
  std::int64_t too_long = 0;  // dropped: more than max_tokens tokens on one side or both
  std::int64_t total() const { return kept + empty + too_long; }
  // "kept 28990 of 29000 pairs (3 with an empty side, 7 longer than 100 tokens)"
  std::string summary(std::int64_t max_tokens) const;
};

// Drops, in place and keeping all four vectors aligned, every pair whose source or target has no
// tokens or more than `max_tokens` tokens (counted without BOS/EOS: the decoder sees one more, so a
// model needs positions for max_tokens + 1). An empty pair counts as empty even when its other
// side is also too long. Pairs keep their order.
//   corpus:  the text, corpus.size() pairs
//   src_ids, tgt_ids: the token ids of corpus.src and corpus.tgt, one list per pair
// Throws std::invalid_argument if the four sizes differ or max_tokens < 1, and CorpusError (naming
// both files and what was dropped) if no pair is left.
FilterReport filter_pairs(ParallelCorpus& corpus, std::vector<std::vector<std::int64_t>>& src_ids,
                          std::vector<std::vector<std::int64_t>>& tgt_ids, std::int64_t max_tokens);

}  // namespace sf::data
