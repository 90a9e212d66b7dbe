// The corpora of a training run as token ids: read, validated, tokenised and filtered once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "train/run_log.h"

namespace sf::train {

// One split (train, valid or test): the pairs that survived filtering, as ids and as text.
struct EncodedSplit {
  std::vector<std::vector<std::int64_t>> src, tgt;
  std::vector<std::string> src_text, tgt_text;  // kept aligned with the ids
};

// Reads the parallel corpus src_path/tgt_path, drops pairs longer than max_tokens (reported on
// `progress` under `name`), tokenises the rest. Throws data::CorpusError when nothing is left.
EncodedSplit load_split(const std::string& src_path, const std::string& tgt_path, const data::Tokenizers& tok,
                        std::int64_t max_tokens, const char* name, Progress& progress);

// Keeps the first n pairs (n <= 0 or more than there are: all).
void truncate_split(EncodedSplit& split, std::int64_t n);

}  // namespace sf::train
