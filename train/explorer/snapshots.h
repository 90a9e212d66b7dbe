// Attention snapshots over training (the explorer's "Over training" page): with
// run.attention_snapshots = true, at every validation the attention of the first valid sentence
// is appended to run.dir/snapshots.jsonl, one JSON line per validation: the /api/attention
// answer with the step, {"step": 250, "arch": ..., "translation": ..., "stacks": [...]}.
// The page's slider walks these lines, so a student watches cross-attention find the alignment
// as training goes on. The same JSON as /api/attention, from the same code (data.h attention).
//
// A StepHooks of the trainer (train/trainer.h after_validation), made by `scratchformer train`
// when the config asks for snapshots. It keeps a copy of the model it loads the trainer's
// current weights into, so the training model is never touched.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/setup.h"
#include "train/trainer.h"

namespace sf::explorer {

// The file the snapshots go to, in the run directory.
inline constexpr const char* kSnapshotsFile = "snapshots.jsonl";

class AttentionSnapshots : public train::StepHooks {
 public:
  // cfg: the run's config (off unless run.attention_snapshots and a translation task).
  explicit AttentionSnapshots(const train::Config& cfg);
  void after_validation(const nn::Model& model, std::int64_t step) override;

 private:
  void prepare(const nn::Model& model);  // at the first validation: the tokenizers and a model copy

  train::Config cfg_;
  std::string sentence_;  // the first non-empty line of data.valid_src; "" = off
  std::unique_ptr<train::InferenceModel> im_;
};

}  // namespace sf::explorer
