// The training loop: `scratchformer train --config FILE`.
//
// 1. prepare the run directory (refuse to overwrite a run, check it is writable and has room),
//    write the effective config.toml
// 2. tokenizers: reuse the run's spm.model, or train one on the training corpus
// 3. read, validate, encode and filter the corpora; batch by token budget
// 4. build the model and optimizer (or restore both from checkpoint-last with --resume)
// 5. loop: train_step (forward, label-smoothed cross-entropy, backward, clip, step); log to the
//    terminal and metrics.tsv; validate (loss, perplexity, BLEU) every valid_every steps,
//    keeping checkpoint-last and checkpoint-best; stop at max_steps / max_epochs / patience /
//    Ctrl-C
// 6. test BLEU with the best checkpoint and a few sample translations
//
// The step itself is train_step() in trainer.cpp: put a breakpoint there to watch one step.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "nn/model.h"
#include "train/config.h"

namespace sf::train {

// Where the classroom tools plug into the loop (train/classroom/trace.h makes the hooks of
// --trace and --dump-graph). The loop calls them on rank 0, around the first micro-batch of
// each optimizer step; `session_step` counts this session's steps from 0 (a resumed run starts
// again at 0), `step` is the optimizer step being computed (1-based, over the whole run).
class StepHooks {
 public:
  virtual ~StepHooks() = default;
  virtual void begin() {}  // once, after the model is built and before the first step
  virtual void before_forward(nn::Model& model, std::int64_t session_step, std::int64_t step) {}
  // The loss exists and its graph is complete; backward has not run (it frees saved tensors).
  virtual void before_backward(const Tensor& loss, nn::Model& model, std::int64_t session_step, std::int64_t step) {}
  virtual void after_backward(std::int64_t session_step, std::int64_t step) {}
  // After each validation at optimizer step `step`, with the model in eval mode (the explorer's
  // attention snapshots, train/explorer/snapshots.h).
  virtual void after_validation(const nn::Model& model, std::int64_t step) {}
};

// Several hooks as one, called in the order given (e.g. --trace and the attention snapshots).
class HookList : public StepHooks {
 public:
  explicit HookList(std::vector<StepHooks*> hooks) : hooks_(std::move(hooks)) {}
  void begin() override {
    for (StepHooks* h : hooks_) h->begin();
  }
  void before_forward(nn::Model& model, std::int64_t session_step, std::int64_t step) override {
    for (StepHooks* h : hooks_) h->before_forward(model, session_step, step);
  }
  void before_backward(const Tensor& loss, nn::Model& model, std::int64_t session_step, std::int64_t step) override {
    for (StepHooks* h : hooks_) h->before_backward(loss, model, session_step, step);
  }
  void after_backward(std::int64_t session_step, std::int64_t step) override {
    for (StepHooks* h : hooks_) h->after_backward(session_step, step);
  }
  void after_validation(const nn::Model& model, std::int64_t step) override {
    for (StepHooks* h : hooks_) h->after_validation(model, step);
  }

 private:
  std::vector<StepHooks*> hooks_;
};

struct TrainOptions {
  bool resume = false;          // continue from run.dir/checkpoint-last.safetensors
  StepHooks* hooks = nullptr;   // null: none
};

// Runs the job; returns the process exit status (0 done, 1 stopped by repeated non-finite
// losses, 130/143 interrupted by SIGINT/SIGTERM after saving checkpoint-last). Bad input (config,
// corpus, checkpoint, run directory) throws an exception whose message is one line.
int train(const Config& config, const TrainOptions& options);

}  // namespace sf::train
