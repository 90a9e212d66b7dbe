// Checkpoint averaging: the element-wise mean of the weights of K checkpoints of one model,
// written as a checkpoint that `translate`, `eval` and the end-of-training test load like any
// other. Late in training the weights wander around a minimum with the noise of the updates; their
// average sits nearer its centre, which often translates a little better than any one of them, at
// no training cost ("Attention Is All You Need" averages the last 5 or 20 checkpoints).
//
//   scratchformer average --out runs/x/checkpoint-average.safetensors
//       runs/x/checkpoint-last.safetensors runs/x/checkpoint-step-001800.safetensors ...  (one line)
//   run.average_last = 3       (the trainer does the same with its last 3 kept checkpoints)
//
// For every weight tensor W (same name in every file):  W_avg = (W_1 + ... + W_K) / K, summed in
// float64 and rounded once to the tensor's dtype. The checkpoints must hold the same tensor names
// with the same shapes and dtypes and have the same model config (every [model] key, the data keys
// that shape the vocabulary, and the vocabulary sizes); otherwise one line names the file and the
// first tensor or key that differs. The result holds the weights only (the optimizer state of an
// average means nothing: it is for translating and evaluating, not for --resume) and the metadata
// of the first checkpoint (its config, step, ...) plus "averaged_from", the files and their steps.
// Like every checkpoint it needs the run's tokenizer (spm*.model) in its folder to be loaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sf::train {

// The file run.average_last writes into the run directory.
inline constexpr const char* kAverageCheckpointName = "checkpoint-average.safetensors";

// What average_checkpoints did, for the line it prints.
struct AverageSummary {
  std::vector<std::int64_t> steps;  // each input's training step, in the order given
  std::int64_t tensors = 0;         // weight tensors averaged
  std::int64_t values = 0;          // numbers per checkpoint (the model's parameter count)
  std::string config_toml;          // the first checkpoint's config (to find its tokenizers)
};

// Averages the weights of `paths` (at least one) into `out_path` (written atomically, so `out_path`
// may be one of the inputs). Reads one input at a time (memory: the float64 sums and one file).
// Throws CheckpointError (one line) for an unreadable or foreign file and for checkpoints that
// differ in tensor names, shapes, dtypes or model config, naming the file and the tensor or key;
// std::invalid_argument for an empty list.
AverageSummary average_checkpoints(const std::vector<std::string>& paths, const std::string& out_path);

// The last `k` kept checkpoints of the run directory `dir`, newest first: checkpoint-last, then the
// checkpoint-step-NNNNNN files (checkpoint.h, run.keep_checkpoints). Fewer when fewer exist (a
// short run); none when there is no checkpoint-last.
std::vector<std::string> last_kept_checkpoints(const std::string& dir, std::int64_t k);

// "averaged 3 checkpoints (steps 2000, 1800, 1600; 42 tensors of 9,712,640 weights) into FILE".
std::string describe_average(const AverageSummary& summary, const std::string& out_path);

}  // namespace sf::train
