#include "data/batcher.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "autograd/check.h"
#include "autograd/generator.h"
#include "data/tokenizer.h"

namespace sf::data {

// src[b]: (S_b) ids, tgt[b]: (T_b - 1) ids -> src (B,S), tgt_in and tgt_out (B,T), masks
// (B,1,1,S) and (B,1,1,T), with S = max S_b and T = max T_b.
Batch make_batch(const std::vector<const std::vector<std::int64_t>*>& src,
                 const std::vector<const std::vector<std::int64_t>*>& tgt,
                 const std::vector<std::int64_t>& indices) {
  const auto rows = static_cast<std::int64_t>(src.size());
  SF_EXPECT(rows != 0 && tgt.size() == src.size() && indices.size() == src.size(),
            "make_batch: expected the same positive number of sources, targets and indices, got ", src.size(), ", ",
            tgt.size(), " and ", indices.size());
  std::int64_t S = 0, T = 0;
  for (std::int64_t b = 0; b < rows; ++b) {
    SF_EXPECT(!src[b]->empty(), "make_batch: the source of pair ", indices[b],
              " is empty (drop empty pairs with filter_pairs first)");
    S = std::max(S, static_cast<std::int64_t>(src[b]->size()));
    T = std::max(T, static_cast<std::int64_t>(tgt[b]->size()) + 1);  // + BOS (in) / EOS (out)
  }

  Batch batch;
  batch.indices = indices;
  batch.src = full({rows, S}, static_cast<double>(kPadId), Dtype::Int64);
  batch.tgt_in = full({rows, T}, static_cast<double>(kPadId), Dtype::Int64);
  batch.tgt_out = full({rows, T}, static_cast<double>(kPadId), Dtype::Int64);
  batch.src_pad_mask = full({rows, 1, 1, S}, 1.0, Dtype::Bool);  // padding until written
  batch.tgt_pad_mask = full({rows, 1, 1, T}, 1.0, Dtype::Bool);
  std::int64_t* src_data = batch.src.data<std::int64_t>();
  std::int64_t* in_data = batch.tgt_in.data<std::int64_t>();
  std::int64_t* out_data = batch.tgt_out.data<std::int64_t>();
  bool* src_mask = batch.src_pad_mask.data<bool>();
  bool* tgt_mask = batch.tgt_pad_mask.data<bool>();

  for (std::int64_t b = 0; b < rows; ++b) {
    const std::vector<std::int64_t>& x = *src[b];
    const std::vector<std::int64_t>& y = *tgt[b];
    const auto s_len = static_cast<std::int64_t>(x.size());
    const auto t_len = static_cast<std::int64_t>(y.size()) + 1;
    for (std::int64_t i = 0; i < s_len; ++i) {
      src_data[b * S + i] = x[i];
      src_mask[b * S + i] = false;
    }
    // tgt_in = (BOS, y_1, ..., y_n), tgt_out = (y_1, ..., y_n, EOS)
    in_data[b * T] = kBosId;
    for (std::int64_t t = 0; t + 1 < t_len; ++t) {
      in_data[b * T + t + 1] = y[t];
      out_data[b * T + t] = y[t];
    }
    out_data[b * T + t_len - 1] = kEosId;
    for (std::int64_t t = 0; t < t_len; ++t) tgt_mask[b * T + t] = false;
    batch.src_tokens += s_len;
    batch.tgt_tokens += t_len;
  }
  return batch;
}

namespace {

// Fisher-Yates: every permutation of `items` equally likely, drawn from `gen`.
void shuffle_in_place(std::vector<std::int64_t>& items, Generator& gen) {
  for (std::size_t i = items.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(gen.randint(i));  // 0 <= j <= i - 1
    std::swap(items[i - 1], items[j]);
  }
}

// The seed of one epoch's generator, from the run's seed and the epoch: a function of both (not
// seed + epoch, which would give run 1 epoch 0 the batches of run 0 epoch 1).
std::uint64_t epoch_seed(std::uint64_t seed, std::int64_t epoch) {
  Generator mixer(seed);
  return mixer.next_u64() ^ (0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(epoch + 1));
}

// Pair indices sorted by (source length, target length), ties in the order of `indices`.
void sort_by_length(std::vector<std::int64_t>& indices,
                    const std::vector<std::vector<std::int64_t>>& src,
                    const std::vector<std::vector<std::int64_t>>& tgt) {
  std::stable_sort(indices.begin(), indices.end(), [&](std::int64_t a, std::int64_t b) {
    if (src[a].size() != src[b].size()) return src[a].size() < src[b].size();
    return tgt[a].size() < tgt[b].size();
  });
}

}  // namespace

Batcher::Batcher(std::vector<std::vector<std::int64_t>> src,
                 std::vector<std::vector<std::int64_t>> tgt, std::int64_t batch_tokens,
                 std::uint64_t seed, bool shuffle, Rows rows_counted)
    : src_(std::move(src)), tgt_(std::move(tgt)), batch_tokens_(batch_tokens), seed_(seed),
      shuffle_(shuffle) {
  if (src_.size() != tgt_.size())
    throw std::invalid_argument("Batcher: " + std::to_string(src_.size()) + " sources but " +
                                std::to_string(tgt_.size()) + " targets");
  if (src_.empty()) throw std::invalid_argument("Batcher: no sentence pairs");
  if (batch_tokens_ < 1)
    throw std::invalid_argument("Batcher: batch_tokens must be at least 1, got " +
                                std::to_string(batch_tokens_));
  for (std::size_t i = 0; i < src_.size(); ++i)
    if (src_[i].empty() || tgt_[i].empty())
      throw std::invalid_argument("Batcher: pair " + std::to_string(i) + " has an empty " +
                                  (src_[i].empty() ? "source" : "target") +
                                  " (drop empty pairs with filter_pairs first)");

  // Cut the length-sorted pairs greedily: a batch grows while rows * max(S, T) stays within the
  // budget. The cut points depend only on the sequence of (source, target) lengths in sorted
  // order, which is the same however ties are broken, so every epoch has the same cut points.
  std::vector<std::int64_t> sorted(src_.size());
  std::iota(sorted.begin(), sorted.end(), 0);
  sort_by_length(sorted, src_, tgt_);
  cuts_ = {0};
  // (Rows::Joined counts the one sequence <s> source <sep> target instead, S + T + 2.)
  std::int64_t rows = 0, longest = 0;
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    const auto s = static_cast<std::int64_t>(src_[sorted[k]].size());
    const auto t = static_cast<std::int64_t>(tgt_[sorted[k]].size()) + 1;  // + BOS / EOS
    const std::int64_t length = rows_counted == Rows::Pair ? std::max(s, t) : s + t + 1;
    const std::int64_t grown = (rows + 1) * std::max(longest, length);
    if (rows > 0 && grown > batch_tokens_) {  // full: pair k starts the next batch
      cuts_.push_back(static_cast<std::int64_t>(k));
      rows = 0, longest = 0;
    }
    ++rows, longest = std::max(longest, length);
  }
  cuts_.push_back(static_cast<std::int64_t>(sorted.size()));
}

void Batcher::plan_epoch(std::int64_t epoch) {
  // Shuffle first, then sort stably: pairs of equal lengths end up in a random order, so which of
  // them share a batch changes from epoch to epoch. Then shuffle the order of the batches, so
  // the model does not see all short sentences before all long ones.
  order_.resize(src_.size());
  std::iota(order_.begin(), order_.end(), 0);
  batch_order_.resize(static_cast<std::size_t>(batches_per_epoch()));
  std::iota(batch_order_.begin(), batch_order_.end(), 0);
  if (shuffle_) {
    Generator gen(epoch_seed(seed_, epoch));
    shuffle_in_place(order_, gen);
    sort_by_length(order_, src_, tgt_);
    shuffle_in_place(batch_order_, gen);
  } else {
    sort_by_length(order_, src_, tgt_);
  }
  planned_epoch_ = epoch;
}

bool Batcher::next_indices(std::vector<std::int64_t>& indices) {
  if (planned_epoch_ != position_.epoch) plan_epoch(position_.epoch);
  if (position_.batch_in_epoch >= batches_per_epoch()) {
    position_ = {position_.epoch + 1, 0};
    return false;
  }
  const std::int64_t k = batch_order_[static_cast<std::size_t>(position_.batch_in_epoch)];
  indices.clear();
  for (std::int64_t r = cuts_[k]; r < cuts_[k + 1]; ++r) indices.push_back(order_[static_cast<std::size_t>(r)]);
  ++position_.batch_in_epoch;
  return true;
}

bool Batcher::next(Batch& out) {
  std::vector<std::int64_t> indices;
  if (!next_indices(indices)) return false;
  std::vector<const std::vector<std::int64_t>*> src, tgt;
  for (const std::int64_t i : indices) src.push_back(&src_[i]), tgt.push_back(&tgt_[i]);
  out = make_batch(src, tgt, indices);
  return true;
}

void Batcher::set_position(Position position) {
  if (position.epoch < 0 || position.batch_in_epoch < 0 ||
      position.batch_in_epoch > batches_per_epoch())
    throw std::invalid_argument("Batcher::set_position: expected epoch >= 0 and batch_in_epoch in "
                                "[0, " + std::to_string(batches_per_epoch()) + "], got epoch " +
                                std::to_string(position.epoch) + ", batch_in_epoch " +
                                std::to_string(position.batch_in_epoch));
  position_ = position;
}

}  // namespace sf::data
