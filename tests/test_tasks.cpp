// The training examples of the decoder-only and encoder-only models (data/tasks.h): which
// positions the loss reads, and BERT's masking rule on a large seeded sample.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "data/tasks.h"
#include "data/tokenizer.h"

using namespace sf;
using namespace sf::data;
using Catch::Contains;

namespace {

constexpr std::int64_t P = kPadId, BOS = kBosId, EOS = kEosId;
constexpr std::int64_t kSep = 4, kMask = 5, kFirstOrdinary = 6;  // a task vocabulary's symbols

std::vector<std::int64_t> row_of(const Tensor& t, std::int64_t b) {
  const auto all = t.to_vector<std::int64_t>();
  const std::int64_t T = t.size(1);
  return {all.begin() + b * T, all.begin() + (b + 1) * T};
}

// |observed - expected| of a binomial count within `sigmas` standard deviations: with 6, a correct
// rule fails about once in 500 million runs, and a rate off by a tenth of itself is caught.
bool within_binomial(std::int64_t count, std::int64_t n, double p, double sigmas = 6.0) {
  const double mean = static_cast<double>(n) * p, sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  return std::fabs(static_cast<double>(count) - mean) <= sigmas * sd;
}

}  // namespace

TEST_CASE("lm batch shifts the sequence: position i reads x_i and predicts x_i+1", "[data][tasks][teacher_forcing]") {
  const std::vector<std::int64_t> a{7, 8, 9}, b{10};
  const Batch batch = make_lm_batch({&a, &b}, {0, 1});
  REQUIRE(batch.tgt_in.shape() == Shape{2, 4});
  CHECK(row_of(batch.tgt_in, 0) == std::vector<std::int64_t>{BOS, 7, 8, 9});
  CHECK(row_of(batch.tgt_out, 0) == std::vector<std::int64_t>{7, 8, 9, EOS});
  CHECK(row_of(batch.tgt_in, 1) == std::vector<std::int64_t>{BOS, 10, P, P});
  CHECK(row_of(batch.tgt_out, 1) == std::vector<std::int64_t>{10, EOS, P, P});
  CHECK(batch.tgt_tokens == 6);  // 3 + EOS, 1 + EOS
  CHECK_FALSE(batch.src.defined());
  CHECK_THROWS_WITH(make_lm_batch({&a}, {0, 1}), Contains("same positive number"));
}

TEST_CASE("prompted batch puts source and target in one sequence and the loss on the target only", "[data][tasks]") {
  const std::vector<std::int64_t> s{20, 21}, t{30, 31, 32}, s2{22}, t2{33};
  const Batch batch = make_prompted_batch({&s, &s2}, {&t, &t2}, {0, 1}, kSep);
  // <s> s1 s2 <sep> t1 t2 t3 | outputs: the prompt's (s1, s2, <sep>) are pad, then t1 t2 t3 </s>
  CHECK(row_of(batch.tgt_in, 0) == std::vector<std::int64_t>{BOS, 20, 21, kSep, 30, 31, 32});
  CHECK(row_of(batch.tgt_out, 0) == std::vector<std::int64_t>{P, P, P, 30, 31, 32, EOS});
  CHECK(row_of(batch.tgt_in, 1) == std::vector<std::int64_t>{BOS, 22, kSep, 33, P, P, P});
  CHECK(row_of(batch.tgt_out, 1) == std::vector<std::int64_t>{P, P, 33, EOS, P, P, P});
  CHECK(batch.tgt_tokens == 4 + 2);  // target tokens and EOS only
  // the position reading <sep> predicts the first target token
  const auto in = row_of(batch.tgt_in, 0), out = row_of(batch.tgt_out, 0);
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i] == kSep) CHECK(out[i] == 30);
  const std::vector<std::int64_t> empty;
  CHECK_THROWS_WITH(make_prompted_batch({&empty}, {&t}, {7}, kSep), Contains("pair 7 has an empty side"));
}

TEST_CASE("masked LM chooses 15 percent of ordinary tokens, 80 10 10, never specials or padding", "[data][tasks]") {
  Generator gen(2024);
  const std::int64_t vocab = 50;
  std::int64_t ordinary = 0, chosen = 0, masked = 0, randomised = 0, kept = 0, specials_chosen = 0;
  for (int r = 0; r < 2000; ++r) {
    std::vector<std::int64_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back(static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(vocab))));
    ids.push_back(EOS);
    const MaskedRow row = mask_tokens(ids, gen, kMask, kFirstOrdinary, vocab);
    REQUIRE(row.input.size() == ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const bool is_ordinary = ids[i] >= kFirstOrdinary;
      ordinary += is_ordinary;
      if (row.target[i] == P) {
        CHECK(row.input[i] == ids[i]);  // not chosen: unchanged
        continue;
      }
      specials_chosen += !is_ordinary;
      ++chosen;
      CHECK(row.target[i] == ids[i]);
      if (row.input[i] == kMask) ++masked;
      else if (row.input[i] == ids[i]) ++kept;  // (a random draw of the same token counts here)
      else ++randomised;
      CHECK((row.input[i] == kMask || row.input[i] >= kFirstOrdinary));
    }
  }
  CHECK(specials_chosen == 0);
  CHECK(within_binomial(chosen, ordinary, 0.15));
  CHECK(within_binomial(masked, chosen, 0.8));
  // a random replacement equals the original with probability 1 / 44 (then it counts as kept)
  const double same = 1.0 / static_cast<double>(vocab - kFirstOrdinary);
  CHECK(within_binomial(randomised, chosen, 0.1 * (1 - same)));
  CHECK(within_binomial(kept, chosen, 0.1 + 0.1 * same));
}

TEST_CASE("masked LM batch counts only the chosen positions for the loss", "[data][tasks][padding]") {
  const std::vector<MaskedRow> rows{{{7, kMask, 9}, {P, 8, P}}, {{kMask, 12}, {11, P}}};
  const Batch batch = make_mlm_batch(rows, {0, 1});
  CHECK(row_of(batch.src, 0) == std::vector<std::int64_t>{7, kMask, 9});
  CHECK(row_of(batch.src, 1) == std::vector<std::int64_t>{kMask, 12, P});
  CHECK(row_of(batch.tgt_out, 0) == std::vector<std::int64_t>{P, 8, P});
  CHECK(row_of(batch.tgt_out, 1) == std::vector<std::int64_t>{11, P, P});
  CHECK(batch.tgt_tokens == 2);
  CHECK(batch.src_tokens == 5);
  const auto pad_mask = batch.src_pad_mask.to_vector<bool>();  // (2,1,1,3)
  CHECK(pad_mask == std::vector<bool>{false, false, false, false, false, true});
  Generator gen(1);
  CHECK_THROWS_WITH(mask_tokens({7}, gen, kMask, 10, 10), Contains("no ordinary token"));
}
