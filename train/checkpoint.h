// Training checkpoints: everything needed to resume a run exactly where it stopped.
//
// One safetensors file (see safetensors.h) holding
//   tensors   every model parameter under its dotted name ("encoder.layers.0.self_attn.q_proj.weight")
//             and the optimizer's state under "optimizer.<key>" ("optimizer.adam.m.<parameter>")
//   metadata  "scratchformer.format" = "1", "config" (the effective config as TOML), "step",
//             "epoch", "batch_in_epoch", "optimizer_steps", "dropout_rng" (the dropout generator's
//             four state words, hex), "best_metric", "bad_validations", "nonfinite_streak",
//             "tokens_seen", "elapsed_seconds", "src_vocab", "tgt_vocab"
// so a resumed run continues bit for bit (in one thread) as if it had never stopped.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "autograd/generator.h"
#include "nn/module.h"
#include "train/optim.h"

namespace sf::train {

struct TrainingState {
  std::int64_t step = 0;            // optimizer steps done
  std::int64_t epoch = 0;           // batcher position: epoch ...
  std::int64_t batch_in_epoch = 0;  // ... and next batch within it
  double best_metric = 0;           // best validation BLEU (or -loss), for checkpoint-best
  bool has_best = false;
  std::int64_t bad_validations = 0;   // validations in a row without improvement (patience)
  std::int64_t nonfinite_streak = 0;  // updates in a row skipped for a NaN/Inf loss or gradient
  std::int64_t tokens_seen = 0;       // target tokens trained on
  double elapsed_seconds = 0;         // training wall time so far (resumes add to it)
  Generator::State dropout_rng{};
};

// Writes model parameters, optimizer state and `state` to `path` atomically (temporary file,
// fsync, rename: the previous file stays intact on any failure).
void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer* optimizer,
                     const TrainingState& state, const std::string& config_toml, std::int64_t src_vocab,
                     std::int64_t tgt_vocab);

struct LoadedCheckpoint {
  std::map<std::string, Tensor> model;      // parameter name -> tensor
  std::map<std::string, Tensor> optimizer;  // state key (without "optimizer.") -> tensor
  std::int64_t optimizer_steps = 0;         // Adam's t (bias correction)
  TrainingState state;
  std::string config_toml;
  std::int64_t src_vocab = 0, tgt_vocab = 0;
};

// Reads and checks a checkpoint (CheckpointError with the path and what is wrong).
LoadedCheckpoint load_checkpoint(const std::string& path);

}  // namespace sf::train
