// The task of a run (data.task): what one example is, how a batch of examples becomes the
// model's input and targets, and what validation measures. The training step (train_step in
// trainer.cpp) is the same for every task: forward, cross-entropy of the logits against
// batch.tgt_out, backward; only the batch differs.
//
//   data.task    model.arch       one example                the batch (data/tasks.h)
//   translation  encoder-decoder  source, target             make_batch: src; <s> tgt -> tgt </s>
//                decoder-only     source, target             make_prompted_batch:
//                                                              <s> src <sep> tgt, loss on tgt </s>
//   lm           decoder-only     a sentence                 make_lm_batch: <s> x -> x </s>
//   mlm          encoder-only     a sentence                 mask_tokens + make_mlm_batch: 15% of
//                                                              the tokens chosen, loss on those
//   classify     encoder-only     label, text (or a pair)    make_classify_batch:
//                                                              <cls> a [<sep> b] -> label
//
// Validation reports, besides the loss and perplexity: BLEU (translation), the accuracy of the
// masked-token predictions (mlm), the accuracy of the labels (classify).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/tokenizer.h"
#include "nn/model.h"
#include "train/config.h"
#include "train/training_data.h"

namespace sf::train {

using data::Tokenizers;

// The symbols the task's tokenizer adds after <pad> <unk> <s> </s> (data/tokenizer.h): <sep> for
// a decoder-only translation's prompt, <mask> for mlm, <cls> and <sep> for classify; none else
// (an encoder-decoder's vocabulary is what it always was).
std::vector<std::string> task_symbols(const Config& cfg);

// A command that does not fit a checkpoint's model: when `fits` is false, throws
// std::invalid_argument with one line naming what the command needs and what the checkpoint
// holds, e.g. "fill-mask needs an encoder-only model trained with data.task = "mlm", but
// runs/lm-en/checkpoint-best.safetensors holds a decoder-only model trained with data.task = "lm"".
void require_model(const Config& cfg, const std::string& checkpoint, const std::string& command, bool fits,
                   const std::string& needed);

// The batches of one task, built from the rows a Batcher chose (or any rows of a split).
class TaskBatches {
 public:
  TaskBatches(const Config& cfg, const Tokenizers& tok);

  // Rows `indices` of `split` -> the model's batch for the task. `epoch` and the run's seed draw
  // the masked-LM masks of each row (a function of seed, epoch and row only, so a resumed run
  // and every data-parallel rank mask the same tokens, and validation always the same ones).
  data::Batch make(const EncodedSplit& split, const std::vector<std::int64_t>& indices, std::int64_t epoch) const;
  // How the batcher counts a row's padded length (a decoder-only translation is one sequence).
  data::Batcher::Rows rows() const;
  // The target id the loss skips: kPadId, or -100 for classify (label 0 is a class).
  std::int64_t ignore_index() const;
  bool counts_accuracy() const { return task_ == "mlm" || task_ == "classify"; }
  const std::string& task() const { return task_; }

 private:
  std::string task_;
  bool decoder_only_;
  std::uint64_t seed_;
  std::int64_t sep_id_ = -1, mask_id_ = -1, first_ordinary_ = 0, vocab_ = 0;
};

// Teacher-forced loss over a split (batched in order, eval mode, no dropout), and the accuracy
// of the predictions the loss reads when the task counts it (mlm, classify).
struct TaskMetrics {
  double loss = 0;   // label-smoothed cross-entropy per prediction (what training minimises)
  double nll = 0;    // unsmoothed, per prediction; perplexity = exp(nll)
  std::int64_t predictions = 0;  // target tokens, masked tokens or labels
  double accuracy = NAN;         // share of predictions whose argmax is the target (mlm, classify)
};
TaskMetrics evaluate_task(nn::Model& model, const TaskBatches& task, const EncodedSplit& split, std::int64_t batch_tokens,
                          double label_smoothing);

// logits: (N,V) and targets (N) -> how many rows' argmax equals the target, among the rows whose
// target is not ignore_index (counted in `total`).
std::int64_t count_correct(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index, std::int64_t& total);

}  // namespace sf::train
