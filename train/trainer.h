// The training loop: `scratchformer train --config FILE`.
//
// 1. prepare the run directory (refuse to overwrite a run, check it is writable and has room),
//    write the effective config.toml
// 2. tokenizers: reuse the run's spm.model, or train one on the training corpus
// 3. read, validate, encode and filter the corpora; batch by token budget
// 4. build the model and optimizer (or restore both from checkpoint-last with --resume)
// 5. loop: teacher-forced forward, label-smoothed cross-entropy, backward, clip, step; log to the
//    terminal and metrics.tsv; validate (loss, perplexity, BLEU) every valid_every steps, keeping
//    checkpoint-last and checkpoint-best; stop at max_steps / max_epochs / patience / Ctrl-C
// 6. test BLEU with the best checkpoint and a few sample translations
#pragma once

#include <string>

#include "train/config.h"

namespace sf::train {

struct TrainOptions {
  bool resume = false;  // continue from run.dir/checkpoint-last.safetensors
  // Debugging (train/trace.h): --trace prints per-module output and gradient statistics for the
  // first micro-batch of the first trace_steps steps (0 = off), to trace_file or stderr;
  // --dump-graph writes the first step's autograd graph as Graphviz DOT to dump_graph.
  std::int64_t trace_steps = 0;
  std::string trace_file{};  // "" = stderr
  std::string dump_graph{};  // "" = no graph
};

// Runs the job; returns the process exit status (0 done, 1 stopped by repeated non-finite
// losses, 130/143 interrupted by SIGINT/SIGTERM after saving checkpoint-last). Bad input (config,
// corpus, checkpoint, run directory) throws an exception whose message is one line.
int train(const Config& config, const TrainOptions& options);

}  // namespace sf::train
