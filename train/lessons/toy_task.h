// A toy translation task for the demos that train a model: the "sentences" are random strings of
// symbols and their "translation" is the same string copied or reversed. The true alignment is
// known (target position t reads source position t, or S − 1 − t), there is no tokenizer and no
// corpus, and a small model learns it in seconds, so a demo can train the recurrent model with
// and without attention, or a Transformer, and compare them on the same data.
//
// Ids: 0 pad, 1 unused, 2 BOS, 3 EOS (data/tokenizer.h), then the symbols 4 .. V − 1.
// Letters: B batch, S source length, T target length (S + 1: the string and EOS), V vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/tensor.h"
#include "nn/model.h"

namespace sf::lessons {

struct ToyTask {
  bool reverse = false;         // false: copy the string; true: write it backwards
  std::int64_t symbols = 16;    // distinct symbols (V = symbols + 4)
  std::int64_t min_len = 3;     // string lengths drawn uniformly in [min_len, max_len]
  std::int64_t max_len = 24;
  std::int64_t vocab() const { return symbols + 4; }
};

// One batch: src (B,S_max) padded at the end, tgt_in = BOS + the answer, tgt_out = the answer +
// EOS (both (B,S_max+1), padded), and each row's string.
struct ToyBatch {
  Tensor src, tgt_in, tgt_out;
  std::vector<std::vector<std::int64_t>> strings;  // the source ids, unpadded
};
// B strings of random lengths in [task.min_len, task.max_len].
ToyBatch toy_batch(const ToyTask& task, std::int64_t batch, Generator& gen);
// B strings of exactly `length` symbols.
ToyBatch toy_batch_of_length(const ToyTask& task, std::int64_t batch, std::int64_t length, Generator& gen);

// The answer the task expects for one string (copied or reversed), without EOS.
std::vector<std::int64_t> toy_answer(const ToyTask& task, const std::vector<std::int64_t>& string);

// A model for the task: arch rnn (LSTM, 1 + 1 layers, `attention`) or a Transformer
// encoder-decoder (1 + 1 layers, 4 heads, pre-LN, sinusoidal positions), width d_model, no dropout.
nn::ModelConfig toy_rnn_config(const ToyTask& task, std::int64_t d_model, nn::RnnAttention attention);
nn::ModelConfig toy_transformer_config(const ToyTask& task, std::int64_t d_model);

// Trains `model` for `steps` Adam steps (lr, the paper's betas, clip 1) on fresh batches of B,
// teacher-forced cross-entropy without smoothing. Returns the mean loss of the last 10 steps.
double train_on_toy(nn::Model& model, const ToyTask& task, std::int64_t steps, std::int64_t batch, double lr,
                    Generator& gen);

// Greedy decoding of `n` fresh strings of `length` symbols: the fraction of answer positions
// decoded right (position by position; a missing or extra token counts as wrong).
double toy_accuracy(const nn::Model& model, const ToyTask& task, std::int64_t length, std::int64_t n, Generator& gen);

}  // namespace sf::lessons
