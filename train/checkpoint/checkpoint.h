// Training checkpoints: everything needed to resume a run exactly where it stopped, of which
// inference needs only a part. The whole format is docs/checkpoint-format.md.
//
// One safetensors file (see safetensors.h) holding
//   tensors   every model parameter under its dotted name ("encoder.layers.0.self_attn.q_proj.weight")
//             and the optimizer's state under "optimizer.<key>" ("optimizer.adam.m.<parameter>")
//   metadata  "scratchformer.format" = "1", "config" (the effective config as TOML), "step",
//             "epoch", "batch_in_epoch", "optimizer_steps", "dropout_rng" (the dropout generator's
//             four state words, hex), "best_metric", "has_best", "bad_validations",
//             "nonfinite_streak", "tokens_seen", "elapsed_seconds", "src_vocab", "tgt_vocab", and
//             the data checksum (safetensors.h)
// so a resumed run continues bit for bit (in one thread) as if it had never stopped.
//
// Two readers:
//   load_model_checkpoint  inference (translate, eval, the test set, the explorer): the weights and
//                          "config" only; "scratchformer.format", "src_vocab", "tgt_vocab" and "step"
//                          are checked when present. A file written by another tool loads.
//   load_checkpoint        --resume: every key above and the optimizer's state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/generator.h"
#include "nn/module.h"
#include "train/optim/optim.h"

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

// Reads and checks a checkpoint for --resume: every training-state key must be there
// (CheckpointError with the path and the missing key: a weights-only checkpoint cannot resume).
LoadedCheckpoint load_checkpoint(const std::string& path);

// What inference needs: the model's weights and its config (and what is known of the rest).
struct ModelCheckpoint {
  std::map<std::string, Tensor> model;  // parameter name -> tensor (no "optimizer." tensors)
  std::string config_toml;              // metadata "config"
  std::int64_t src_vocab = 0, tgt_vocab = 0;  // 0: not recorded (the tokenizer's sizes are used)
  std::int64_t step = 0;                // training steps behind the weights; 0: not recorded
};

// Reads a checkpoint for inference: requires "config" (CheckpointError naming the path and the key
// otherwise); "scratchformer.format" must be "1" and "src_vocab", "tgt_vocab", "step" integers when
// present. An external file without a checksum loads with one line on stderr saying its data is
// unverified.
ModelCheckpoint load_model_checkpoint(const std::string& path);

// The metadata value `key` of the checkpoint at `path` (its metadata `meta`); CheckpointError
// "PATH: metadata key 'KEY' is missing (not a Scratchformer checkpoint?)" when there is none.
const std::string& metadata_value(const std::map<std::string, std::string>& meta, const std::string& key,
                                  const std::string& path);
// The same as an integer; CheckpointError naming the key and the value when it is not one.
std::int64_t metadata_int(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path);

// Checks that the checkpoint's weights and optimizer state have the dtype of `model`'s parameters
// (a float64 or int64 tensor would otherwise be converted silently); names and shapes are checked
// by Module::load_state_dict. CheckpointError naming `path` and the tensor.
void check_checkpoint_dtypes(const LoadedCheckpoint& checkpoint, const nn::Module& model, const std::string& path);
// The same for the weights alone (`weights`: parameter name -> tensor).
void check_weight_dtypes(const std::map<std::string, Tensor>& weights, const nn::Module& model, const std::string& path);

// ---- the run directory's recent checkpoints (run.keep_checkpoints = K) --------------------
// checkpoint-last.safetensors is always the newest checkpoint and the one --resume starts from.
// With K > 1 the K - 1 checkpoints saved before it are kept too, named by their step:
//   checkpoint-last.safetensors              step 3000 (the newest)
//   checkpoint-step-002000.safetensors       step 2000
//   checkpoint-step-001000.safetensors       step 1000      (K = 3: older ones are deleted)
// A step file is a hard link to the checkpoint-last it was (so keeping it costs no copy), or a
// copy where the file system has no hard links. checkpoint-best is separate and always kept.
inline constexpr const char* kLastCheckpointName = "checkpoint-last.safetensors";

// "checkpoint-step-002000.safetensors" (six digits or more).
std::string step_checkpoint_name(std::int64_t step);

// The step checkpoints in `dir`, newest first: (step, path).
std::vector<std::pair<std::int64_t, std::string>> list_step_checkpoints(const std::string& dir);

// Saves `dir`/checkpoint-last.safetensors (as save_checkpoint) and keeps the last `keep` (K >= 1)
// checkpoints, in an order that never loses one:
//   1. with K > 1, the current checkpoint-last, saved at `previous_step` (< 0: there is none),
//      is kept as checkpoint-step-<previous_step> (if that step differs from state.step)
//   2. the new checkpoint-last is written atomically (temporary file, fsync, rename)
//   3. only then are the step checkpoints beyond the newest K - 1 deleted.
// A failure in 1 or 2 throws CheckpointError and deletes nothing.
void save_last_checkpoint(const std::string& dir, std::int64_t keep, std::int64_t previous_step, const nn::Module& model,
                          const Optimizer* optimizer, const TrainingState& state, const std::string& config_toml,
                          std::int64_t src_vocab, std::int64_t tgt_vocab);

}  // namespace sf::train
