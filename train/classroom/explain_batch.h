// `scratchformer explain-batch`: one real training batch as text (source, decoder input, decoder
// target, masks, counts), so teacher forcing is visible.
//
// Letters: B batch rows, S source length, T target length (+1 for BOS / EOS).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "train/classroom/lang.h"
#include "train/config.h"

namespace sf::train {

struct ExplainOptions {
  std::int64_t batch = 0;      // which batch of the first epoch (0-based), as the trainer draws them
  std::int64_t rows = 3;       // sentence pairs printed in full
  std::int64_t max_causal = 12;  // the causal mask is printed for at most this many positions
  bool keep_tokenizer = false;  // a run without a tokenizer: train it into run.dir (true) or the cache outside the project
};

// Loads the config's tokenizers: run.dir's own when it has them; otherwise, unless
// opt.keep_tokenizer, trained into a cache outside the project (train/setup.h
// tokenizer_cache_dir), never into run.dir; one line on `log` says where. Then reads and filters
// the training corpus as the trainer does, builds the trainer's Batcher (same seed, same budget)
// and returns batch `opt.batch` of epoch 0 explained as text:
// the batch and its shapes, what teacher forcing is, the first opt.rows rows in full, the
// padding masks, the causal mask and the counts. `lang`: the headings and captions in English or
// Chinese; tokens are lined up in columns by display width (lang.h), so Chinese pieces align too.
// Throws std::invalid_argument when opt.batch is past the epoch's last batch, and for arch rnn
// ("explain-batch: needs a Transformer ..."): the masks it explains are attention's.
std::string explain_batch(const Config& cfg, const ExplainOptions& opt, std::ostream& log, Lang lang = Lang::En);

}  // namespace sf::train
