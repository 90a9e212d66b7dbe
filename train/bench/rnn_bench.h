// `scratchformer bench` on a recurrent model (model.arch = "rnn", configs/bench-rnn.toml): how
// fast the recurrent encoder-decoder trains and decodes, and how its step grows with the sentence
// length next to a Transformer of the same width, which is what the lecture's claim "no
// parallelism across positions" looks like in milliseconds.
//
// run_rnn_bench measures, in this order, in one process:
//   training step  exactly the trainer's step (forward, label-smoothed cross-entropy, backward,
//                  gradient clipping, optimizer step, zero_grad) on the Transformer benchmark's
//                  batch: 64 pairs of source and target length 24, random ids, no padding;
//                  `warmup` untimed steps, then `steps` timed ones; the median is reported
//   peak RSS       getrusage right after the steps (as bench.h says for the Transformer)
//   length table   the same model at source = target length T in {8, 16, 32, 64, 128} with a
//                  fixed token budget (batch = 64 * 24 / T pairs, so every row trains on 1536
//                  target tokens), and beside it a Transformer encoder-decoder of the same width
//                  D and depth (H = D / 64 heads, F = 4 D, post-LN, sinusoidal positions, shared
//                  tied embeddings): median of kScalingSteps steps after kScalingWarmup. The
//                  recurrence makes 2 S + T steps one after another, each a product over B rows only,
//                  so with the budget fixed its row count shrinks as T grows; the Transformer's
//                  products keep all B T rows whatever T is
//   decoding       the first `decode_sentences` sentences of data.test_src, greedy and beam 4,
//                  with the recurrent state (the rnn's cache: the decoder's h and c and the
//                  attention keys of the source, start_decoding) and without it (the whole
//                  prefix run through the decoder again for every new token), as bench.h says
//
// Letters: B batch (sentence pairs), S source length, T target length, D d_model.
#pragma once

#include <cstdint>
#include <vector>

#include "train/bench/bench.h"
#include "train/config.h"

namespace sf::train {

// One row of the length table.
struct RnnLengthRow {
  std::int64_t length = 0;        // T (source and target)
  std::int64_t batch = 0;         // pairs: the token budget / T
  double rnn_step_s = 0;          // median training step of the recurrent model, seconds
  double transformer_step_s = 0;  // the same for the Transformer of the same width
};

// The Transformer compared with a recurrent config in the length table: encoder-decoder, same
// d_model, encoder and decoder layers, dropout and max_len; H = D / 64 (at least 1), F = 4 D.
ModelSection transformer_twin(const ModelSection& rnn);

// The length table's rows (no printing). cfg must be arch rnn.
std::vector<RnnLengthRow> rnn_length_rows(const Config& cfg, const BenchOptions& opt);

// Runs the benchmark on an rnn config: prints the table (unless json_only) and one JSON line
// (tools/bench_pytorch.py prints the same fields for torch.nn.LSTM). Returns 0, or throws.
int run_rnn_bench(const Config& cfg, const BenchOptions& opt);

}  // namespace sf::train
