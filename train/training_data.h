// The corpora of a training run as token ids: read, validated, tokenised and filtered once.
//
// Every task keeps its examples as pairs of id lists (what the Batcher sorts and cuts):
//   translation    src = the source sentence, tgt = the target sentence
//   lm, mlm        src = tgt = the sentence (one file, one sentence per line)
//   classify       src = <cls> a [<sep> b], tgt = {the class}; from label<TAB>a[<TAB>b] lines
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "train/config.h"
#include "train/run_log.h"

namespace sf::train {

// One split (train, valid or test): the examples that survived filtering, as ids and as text.
struct EncodedSplit {
  std::vector<std::vector<std::int64_t>> src, tgt;
  std::vector<std::string> src_text, tgt_text;  // kept aligned with the ids (classify: the text
                                                // "a" or "a<TAB>b", and the label's name)
};

// Reads the parallel corpus src_path/tgt_path, drops pairs longer than max_tokens (reported on
// `progress` under `name`), tokenises the rest. Throws data::CorpusError when nothing is left.
EncodedSplit load_split(const std::string& src_path, const std::string& tgt_path, const data::Tokenizers& tok,
                        std::int64_t max_tokens, const char* name, Progress& progress);

// lm, mlm: the lines of `path` (blank ones and those over max_tokens tokens dropped, reported).
EncodedSplit load_text_split(const std::string& path, const data::Tokenizer& tok, std::int64_t max_tokens, const char* name,
                             Progress& progress);

// One line of a classification file: label<TAB>text or label<TAB>text_a<TAB>text_b.
struct LabeledLine {
  std::string label, a, b;  // b empty for a single sentence
};
// Splits `line` (line `line_no` of `path`, for the message) at its tabs. Throws data::CorpusError
// naming the file and line for a line without a tab, with more than two, or an empty field.
LabeledLine parse_labeled_line(const std::string& line, const std::string& path, std::size_t line_no);
// `text` as ids, with the task symbols the tokenizer has ("<mask>", "<sep>", "<cls>") written in
// it taken as those symbols: "Ein <mask> läuft." -> ids of "Ein", <mask>, ids of " läuft.". The
// text between symbols is encoded on its own, so a symbol stands where a word's pieces would.
std::vector<std::int64_t> encode_with_symbols(const data::Tokenizer& tok, const std::string& text);
// The encoder's input for one example: <cls> a, or <cls> a <sep> b.
std::vector<std::int64_t> classify_input(const data::Tokenizer& tok, const std::string& a, const std::string& b);

// classify: the labelled lines of `path`; a label not in `labels` is a data::CorpusError naming
// the file, the line and the known names. Inputs over max_tokens tokens are dropped (reported).
EncodedSplit load_classify_split(const std::string& path, const data::Tokenizer& tok, const std::vector<std::string>& labels,
                                 std::int64_t max_tokens, const char* name, Progress& progress);

// The split `which` ("train", "valid" or "test") of cfg's task; the training split keeps
// examples of at most data.max_tokens tokens, the others what fits the model's positions.
EncodedSplit load_task_split(const Config& cfg, const data::Tokenizers& tok, const std::string& which, Progress& progress);
// True when cfg names a test split (test_src/test_tgt, or test_file).
bool has_test_split(const Config& cfg);

// The text file the tokenizer of an lm, mlm or classify run trains on: data.train_file, or for
// classify a temporary file beside run.dir's spm.model with the TSV's text fields (the caller
// removes it).
std::string tokenizer_text_file(const Config& cfg);

// Keeps the first n pairs (n <= 0 or more than there are: all).
void truncate_split(EncodedSplit& split, std::int64_t n);

}  // namespace sf::train
