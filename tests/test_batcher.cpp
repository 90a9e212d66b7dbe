// Tests for data/batcher: teacher-forcing tensors and masks of a hand-made batch, and the Batcher's
// guarantees: every pair once per epoch, padded size within the token budget, order fixed by the
// seed, and resuming mid-epoch giving exactly the batches an uninterrupted run gives.
//
// Shapes: B rows, S longest source, T longest target + 1.
#include <algorithm>
#include <tuple>
#include <vector>

#include "data/batcher.h"
#include "data/tokenizer.h"
#include "test_util.h"

using Catch::Matchers::Contains;
using sf::data::Batch;
using sf::data::Batcher;
using sf::data::kBosId;
using sf::data::kEosId;
using sf::data::kPadId;

namespace {

using Ids = std::vector<std::vector<std::int64_t>>;

// n pairs with random lengths in [1, max_len] and ids in [4, 100) (past the special ids).
struct RandomCorpus {
  Ids src, tgt;
  RandomCorpus(std::int64_t n, std::int64_t max_len, std::uint64_t seed) {
    sf::Generator gen(seed);
    auto sentence = [&] {
      std::vector<std::int64_t> ids(1 + gen.randint(static_cast<std::uint64_t>(max_len)));
      for (auto& id : ids) id = 4 + static_cast<std::int64_t>(gen.randint(96));
      return ids;
    };
    for (std::int64_t i = 0; i < n; ++i) {
      src.push_back(sentence());
      tgt.push_back(sentence());
    }
  }
};

constexpr std::int64_t kPairs = 600;
constexpr std::int64_t kMaxLen = 30;
constexpr std::int64_t kBudget = 300;  // about 10 rows of 30 tokens

// The rows of every batch of one epoch (next() until it returns false).
std::vector<std::vector<std::int64_t>> epoch_indices(Batcher& batcher) {
  std::vector<std::vector<std::int64_t>> batches;
  Batch batch;
  while (batcher.next(batch)) batches.push_back(batch.indices);
  return batches;
}

}  // namespace

TEST_CASE("make_batch builds teacher forcing inputs and outputs with padding masks",
          "[data][batcher][teacher_forcing]") {
  // Two pairs: (x = 5 6 7, y = 9 10) and (x = 8, y = 11 12 13).
  const std::vector<std::int64_t> x0 = {5, 6, 7}, y0 = {9, 10}, x1 = {8}, y1 = {11, 12, 13};
  const Batch b = sf::data::make_batch({&x0, &x1}, {&y0, &y1}, {42, 7});
  // S = 3; T = 3 + 1 = 4.
  REQUIRE(b.src.shape() == sf::Shape{2, 3});
  REQUIRE(b.tgt_in.shape() == sf::Shape{2, 4});
  REQUIRE(b.tgt_out.shape() == sf::Shape{2, 4});
  REQUIRE(b.src_pad_mask.shape() == sf::Shape{2, 1, 1, 3});
  REQUIRE(b.tgt_pad_mask.shape() == sf::Shape{2, 1, 1, 4});
  CHECK(b.src.dtype() == sf::Dtype::Int64);
  CHECK(b.tgt_in.dtype() == sf::Dtype::Int64);
  CHECK(b.src_pad_mask.dtype() == sf::Dtype::Bool);
  CHECK(b.tgt_pad_mask.dtype() == sf::Dtype::Bool);

  const std::int64_t P = kPadId, BOS = kBosId, EOS = kEosId;
  CHECK(b.src.to_vector<std::int64_t>() == std::vector<std::int64_t>{5, 6, 7,  //
                                                                    8, P, P});
  // tgt_in = BOS + y, tgt_out = y + EOS: at every position, tgt_out is the token after tgt_in's.
  CHECK(b.tgt_in.to_vector<std::int64_t>() == std::vector<std::int64_t>{BOS, 9, 10, P,  //
                                                                       BOS, 11, 12, 13});
  CHECK(b.tgt_out.to_vector<std::int64_t>() == std::vector<std::int64_t>{9, 10, EOS, P,  //
                                                                        11, 12, 13, EOS});
  // Masks: 1 (true) = padding, blocked.
  CHECK(b.src_pad_mask.to_vector<double>() == std::vector<double>{0, 0, 0,  //
                                                                  0, 1, 1});
  CHECK(b.tgt_pad_mask.to_vector<double>() == std::vector<double>{0, 0, 0, 1,  //
                                                                  0, 0, 0, 0});
  CHECK(b.indices == std::vector<std::int64_t>{42, 7});
  CHECK(b.rows() == 2);
  CHECK(b.src_tokens == 4);      // 3 + 1
  CHECK(b.tgt_tokens == 3 + 4);  // (2 + EOS) + (3 + EOS)
}

TEST_CASE("make_batch allows an empty target and rejects an empty source",
          "[data][batcher][teacher_forcing][errors]") {
  const std::vector<std::int64_t> x = {5, 6}, empty;
  const Batch b = sf::data::make_batch({&x}, {&empty}, {0});
  CHECK(b.tgt_in.to_vector<std::int64_t>() == std::vector<std::int64_t>{kBosId});
  CHECK(b.tgt_out.to_vector<std::int64_t>() == std::vector<std::int64_t>{kEosId});
  CHECK(b.tgt_tokens == 1);
  REQUIRE_THROWS_WITH(sf::data::make_batch({&x, &empty}, {&x, &x}, {3, 9}),
                      Contains("source of pair 9 is empty"));
  REQUIRE_THROWS_AS(sf::data::make_batch({}, {}, {}), std::invalid_argument);
  REQUIRE_THROWS_AS(sf::data::make_batch({&x}, {&x, &x}, {0}), std::invalid_argument);
}

TEST_CASE("every pair appears exactly once per epoch within the token budget", "[data][batcher]") {
  const RandomCorpus corpus(kPairs, kMaxLen, 1);
  Batcher batcher(corpus.src, corpus.tgt, kBudget, 123, true);
  REQUIRE(batcher.size() == kPairs);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    INFO("epoch " << epoch);
    CHECK(batcher.position() == Batcher::Position{epoch, 0});
    std::vector<int> seen(kPairs, 0);
    std::int64_t batches = 0;
    Batch b;
    while (batcher.next(b)) {
      ++batches;
      const std::int64_t S = b.src.size(1), T = b.tgt_in.size(1);
      // The padded size is within the budget (no pair here is longer than the budget).
      CHECK(b.rows() * std::max(S, T) <= kBudget);
      // S and T are exactly the longest source and target (+1) of the rows: nothing wasted.
      std::int64_t max_s = 0, max_t = 0, src_tokens = 0, tgt_tokens = 0;
      for (const std::int64_t i : b.indices) {
        ++seen[i];
        max_s = std::max<std::int64_t>(max_s, corpus.src[i].size());
        max_t = std::max<std::int64_t>(max_t, corpus.tgt[i].size() + 1);
        src_tokens += corpus.src[i].size();
        tgt_tokens += corpus.tgt[i].size() + 1;
      }
      CHECK(S == max_s);
      CHECK(T == max_t);
      CHECK(b.src_tokens == src_tokens);
      CHECK(b.tgt_tokens == tgt_tokens);
      // Row r of the tensors holds pair indices[r].
      const std::int64_t r = b.rows() - 1, i = b.indices[r];
      for (std::size_t k = 0; k < corpus.src[i].size(); ++k)
        CHECK(b.src.at({r, static_cast<std::int64_t>(k)}) == corpus.src[i][k]);
    }
    CHECK(batches == batcher.batches_per_epoch());
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST_CASE("length bucketing keeps source padding small", "[data][batcher]") {
  const RandomCorpus corpus(kPairs, kMaxLen, 2);
  Batcher batcher(corpus.src, corpus.tgt, kBudget, 5, true);
  std::int64_t real = 0, padded = 0;
  Batch b;
  while (batcher.next(b)) {
    real += b.src_tokens;
    padded += b.src.numel();
  }
  // Sorted by source length, a batch's sources differ by a token or two; batches of random pairs
  // (lengths uniform in 1..30) would be about half padding.
  CHECK(static_cast<double>(real) / static_cast<double>(padded) > 0.95);
}

TEST_CASE("a pair longer than the budget forms a batch of its own", "[data][batcher]") {
  const Ids src = {{5, 5}, std::vector<std::int64_t>(50, 6), {7}, {8, 8}};
  const Ids tgt = {{9}, {10, 10}, {11}, std::vector<std::int64_t>(40, 12)};
  Batcher batcher(src, tgt, 20, 0, true);
  const auto batches = epoch_indices(batcher);
  std::int64_t singles = 0;
  for (const auto& rows : batches) {
    if (std::find(rows.begin(), rows.end(), 1) != rows.end() ||
        std::find(rows.begin(), rows.end(), 3) != rows.end()) {
      CHECK(rows.size() == 1);  // 50 source tokens, or 40 + 1 target positions, exceed 20
      ++singles;
    }
  }
  CHECK(singles == 2);
  CHECK(batcher.batches_per_epoch() == 3);  // {0, 2} fit together: 2 rows * max(2, 2) = 4
}

TEST_CASE("the same seed gives the same batches and another seed others", "[data][batcher]") {
  const RandomCorpus corpus(kPairs, kMaxLen, 3);
  Batcher a(corpus.src, corpus.tgt, kBudget, 11, true);
  Batcher b(corpus.src, corpus.tgt, kBudget, 11, true);
  Batcher c(corpus.src, corpus.tgt, kBudget, 12, true);
  const auto a0 = epoch_indices(a), a1 = epoch_indices(a);
  CHECK(a0 == epoch_indices(b));
  CHECK(a1 == epoch_indices(b));
  CHECK(a0 != epoch_indices(c));
  // Each epoch has its own order, and its own grouping of equal-length pairs.
  CHECK(a0 != a1);
  auto sorted_groups = [](std::vector<std::vector<std::int64_t>> batches) {
    for (auto& rows : batches) std::sort(rows.begin(), rows.end());
    std::sort(batches.begin(), batches.end());
    return batches;
  };
  CHECK(sorted_groups(a0) != sorted_groups(a1));
}

TEST_CASE("without shuffling batches come in length order every epoch", "[data][batcher]") {
  const RandomCorpus corpus(kPairs, kMaxLen, 4);
  Batcher batcher(corpus.src, corpus.tgt, kBudget, 99, false);
  const auto first = epoch_indices(batcher);
  CHECK(first == epoch_indices(batcher));
  // Concatenated, the rows are sorted by (source length, target length, index).
  std::vector<std::int64_t> all;
  for (const auto& rows : first) all.insert(all.end(), rows.begin(), rows.end());
  REQUIRE(all.size() == static_cast<std::size_t>(kPairs));
  auto key = [&](std::int64_t i) {
    return std::tuple(corpus.src[i].size(), corpus.tgt[i].size(), i);
  };
  for (std::size_t k = 1; k < all.size(); ++k) CHECK(key(all[k - 1]) < key(all[k]));
}

TEST_CASE("resuming from a saved position continues exactly like an uninterrupted run",
          "[data][batcher]") {
  const RandomCorpus corpus(kPairs, kMaxLen, 5);
  constexpr std::uint64_t kSeed = 2024;
  // The uninterrupted run: two epochs.
  Batcher straight(corpus.src, corpus.tgt, kBudget, kSeed, true);
  std::vector<Batch> expected;
  Batch b;
  for (int epoch = 0; epoch < 2; ++epoch)
    while (straight.next(b)) expected.push_back(b);
  const std::int64_t per_epoch = straight.batches_per_epoch();
  REQUIRE(expected.size() == static_cast<std::size_t>(2 * per_epoch));

  for (const std::int64_t stop : {std::int64_t{0}, std::int64_t{1}, per_epoch / 2, per_epoch - 1,
                                  per_epoch + 3}) {
    INFO("interrupted after " << stop << " batches");
    // The interrupted run takes `stop` batches, then saves its position (as a checkpoint does).
    Batcher first(corpus.src, corpus.tgt, kBudget, kSeed, true);
    for (std::int64_t k = 0; k < stop; ++k)
      if (!first.next(b)) REQUIRE(first.next(b));  // skip the end-of-epoch false
    const Batcher::Position saved = first.position();
    // A new process: a new Batcher, moved to the saved position.
    Batcher resumed(corpus.src, corpus.tgt, kBudget, kSeed, true);
    resumed.set_position(saved);
    std::size_t k = static_cast<std::size_t>(stop);
    for (int epoch = saved.epoch; epoch < 2; ++epoch)
      while (resumed.next(b)) {
        REQUIRE(k < expected.size());
        CHECK(b.indices == expected[k].indices);
        CHECK(b.src.to_vector<std::int64_t>() == expected[k].src.to_vector<std::int64_t>());
        CHECK(b.tgt_out.to_vector<std::int64_t>() == expected[k].tgt_out.to_vector<std::int64_t>());
        ++k;
      }
    CHECK(k == expected.size());
  }
}

TEST_CASE("next returns false at the end of an epoch and then starts the next",
          "[data][batcher]") {
  const Ids src = {{5}, {6}, {7}}, tgt = {{8}, {9}, {10}};
  Batcher batcher(src, tgt, 2, 0, true);  // 1 row * max(1, 2) = 2: one pair per batch
  REQUIRE(batcher.batches_per_epoch() == 3);
  Batch b;
  for (int k = 0; k < 3; ++k) CHECK(batcher.next(b));
  CHECK(batcher.position() == Batcher::Position{0, 3});
  CHECK_FALSE(batcher.next(b));
  CHECK(batcher.position() == Batcher::Position{1, 0});
  CHECK(batcher.next(b));
  CHECK(batcher.position() == Batcher::Position{1, 1});
}

TEST_CASE("Batcher rejects bad input and positions", "[data][batcher][errors]") {
  const Ids src = {{5}, {6}}, tgt = {{8}, {9}};
  REQUIRE_THROWS_WITH(Batcher(src, Ids{{8}}, 10, 0, true), Contains("2 sources but 1 targets"));
  REQUIRE_THROWS_WITH(Batcher(Ids{}, Ids{}, 10, 0, true), Contains("no sentence pairs"));
  REQUIRE_THROWS_WITH(Batcher(src, tgt, 0, 0, true), Contains("batch_tokens must be at least 1"));
  REQUIRE_THROWS_WITH(Batcher(src, Ids{{8}, {}}, 10, 0, true),
                      Contains("pair 1 has an empty target"));
  Batcher batcher(src, tgt, 10, 0, true);
  REQUIRE_THROWS_AS(batcher.set_position({0, batcher.batches_per_epoch() + 1}),
                    std::invalid_argument);
  REQUIRE_THROWS_AS(batcher.set_position({-1, 0}), std::invalid_argument);
}
