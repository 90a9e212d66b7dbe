// Batches for training a translation model: padded id tensors, teacher-forcing targets and
// padding masks, grouped by length under a token budget.
//
// Shapes: B sentences in a batch, S longest source in the batch, T longest target plus one.
//
// Teacher forcing. The decoder is trained to predict each target token from the ones before it,
// so its input is the target shifted right by one, starting from BOS, and its expected output is
// the target followed by EOS. For the target y = (y1, y2, y3):
//   tgt_in   BOS  y1  y2  y3      position t sees BOS..y_t (through the causal mask)
//   tgt_out  y1   y2  y3  EOS     and must predict the next token
// Shorter rows are padded at the end with kPadId; the masks mark those positions (true = padding,
// blocked), and the loss ignores kPadId in tgt_out.
//
// Token budget. A batch holds as many sentence pairs as fit in `batch_tokens` padded positions,
// counted as rows * max(S, T): padding costs compute as real tokens do, so the budget bounds the
// work and memory of a step. Sorting the pairs by length before cutting them into batches
// ("bucketing") keeps similar lengths together and the padding small. Which pairs share a batch
// (among pairs of equal lengths) and the order of the batches change every epoch, drawn from
// (seed, epoch), so a run is reproducible from its seed and can resume in the middle of an epoch.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace sf::data {

struct Batch {
  Tensor src;           // (B,S) int64: source ids, padded with kPadId
  Tensor tgt_in;        // (B,T) int64: BOS + target, padded with kPadId (decoder input)
  Tensor tgt_out;       // (B,T) int64: target + EOS, padded with kPadId (what the loss compares)
  Tensor src_pad_mask;  // (B,1,1,S) bool: true where src is padding (keys to block)
  Tensor tgt_pad_mask;  // (B,1,1,T) bool: true where tgt_in is padding (also where tgt_out is)
  std::vector<std::int64_t> indices;  // corpus index of each row, e.g. to print its sentence
  std::int64_t src_tokens = 0;  // non-pad entries of src
  std::int64_t tgt_tokens = 0;  // non-pad entries of tgt_out (target tokens + one EOS per row):
                                // the number of predictions the loss averages over
  std::int64_t rows() const { return static_cast<std::int64_t>(indices.size()); }
};

// Builds one batch from B pairs: src[b] and tgt[b] are the ids of pair indices[b] (without
// BOS/EOS). A source must not be empty (a fully padded row leaves attention nothing to attend
// to); an empty target is allowed (its row is just BOS -> EOS). Throws std::invalid_argument for
// unequal sizes, no rows or an empty source.
Batch make_batch(const std::vector<const std::vector<std::int64_t>*>& src,
                 const std::vector<const std::vector<std::int64_t>*>& tgt,
                 const std::vector<std::int64_t>& indices);

class Batcher {
 public:
  // Where the batcher is: the next call to next() returns batch `batch_in_epoch` (0-based) of
  // epoch `epoch` (0-based). Save it in a checkpoint and pass it to set_position() to resume.
  struct Position {
    std::int64_t epoch = 0;
    std::int64_t batch_in_epoch = 0;
    bool operator==(const Position&) const = default;
  };

  // src[i], tgt[i]: the token ids of pair i (without BOS/EOS), e.g. after filter_pairs(); the
  // batcher keeps its own copy (pass them with std::move to avoid it). Every source and target
  // must have at least one token.
  //   batch_tokens  padded-token budget per batch, rows * max(S, T) <= batch_tokens; a single
  //                 pair longer than the budget still forms a batch of one
  //   seed          the run's seed: with the same seed and data, the same batches in the same
  //                 order, on every machine
  //   shuffle       false (for validation): pairs sorted by length, ties by index, and batches in
  //                 that order, identical every epoch
  //   rows          how a pair's padded length is counted: Rows::Pair max(S, T + 1), a source and
  //                 a target tensor (encoder-decoder); Rows::Joined S + T + 2, one sequence
  //                 <s> source <sep> target (a decoder-only model's prompted translation)
  // Throws std::invalid_argument for unequal sizes, no pairs, an empty sequence or a budget < 1.
  enum class Rows { Pair, Joined };
  Batcher(std::vector<std::vector<std::int64_t>> src, std::vector<std::vector<std::int64_t>> tgt,
          std::int64_t batch_tokens, std::uint64_t seed, bool shuffle, Rows rows = Rows::Pair);

  // Fills `out` with the next batch (make_batch of its pairs) and returns true; at the end of an
  // epoch returns false (leaving `out` alone) and moves to the start of the next epoch.
  bool next(Batch& out);
  // The same, giving only the pair indices of the next batch: the tasks of train/task.h build
  // their own batches (language modelling, masked LM, ...) from them.
  bool next_indices(std::vector<std::int64_t>& indices);

  Position position() const { return position_; }
  // Continue from `position` exactly as an uninterrupted run would: the batches that follow are the
  // same ones in the same order. batch_in_epoch may equal batches_per_epoch() (the epoch's end).
  void set_position(Position position);

  // The same in every epoch: the cut points depend only on the lengths (see batcher.cpp).
  std::int64_t batches_per_epoch() const { return static_cast<std::int64_t>(cuts_.size()) - 1; }
  std::int64_t size() const { return static_cast<std::int64_t>(src_.size()); }  // pairs

 private:
  // Fills order_ (pair indices, sorted by length) and batch_order_ for `epoch`.
  void plan_epoch(std::int64_t epoch);

  std::vector<std::vector<std::int64_t>> src_, tgt_;
  std::int64_t batch_tokens_;
  std::uint64_t seed_;
  bool shuffle_;

  std::vector<std::int64_t> cuts_;         // batch k is order_[cuts_[k] .. cuts_[k+1])
  std::vector<std::int64_t> order_;        // pair indices sorted by (source length, target length)
  std::vector<std::int64_t> batch_order_;  // the epoch's batches, a permutation of 0..K-1
  std::int64_t planned_epoch_ = -1;        // the epoch order_ and batch_order_ belong to
  Position position_;
};

}  // namespace sf::data
