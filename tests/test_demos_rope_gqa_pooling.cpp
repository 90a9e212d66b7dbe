// The claims of the demos rope, gqa and pooling (train/lessons/demo_*.h), asserted on the numbers
// the demos print: each test calls the demo's compute function, and also runs the demo itself
// (its text and its SVG), which must report the claim as holding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "train/lessons/demo.h"
#include "train/lessons/demo_gqa.h"
#include "train/lessons/demo_pooling.h"
#include "train/lessons/demo_rope.h"

namespace fs = std::filesystem;
using namespace sf::lessons;

namespace {

// Runs `run` with the SVG written to a temporary file; returns the printed text, checks the SVG.
template <class Run>
std::string run_demo_to_temp(Run run, const std::string& name) {
  const fs::path svg = fs::temp_directory_path() / ("sf-test-demo-" + name + ".svg");
  DemoOptions options;
  options.out = svg.string();
  std::ostringstream out;
  CHECK(run(options, out) == 0);
  std::ifstream in(svg);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("<svg") != std::string::npos);
  CHECK(text.str().find("</svg>") != std::string::npos);
  fs::remove(svg);
  return out.str();
}

}  // namespace

TEST_CASE("demo rope: <R_i x, R_j y> depends only on j - i", "[demo][rope]") {
  const RopeDemoResult r = compute_rope_demo(0);
  CHECK(r.pairs == 128 * 128);
  CHECK(r.shared_offsets > 300);  // most offsets are reached by several (i, j), near and far
  CHECK(r.max_spread < kRopeSameOffsetTolerance);
  CHECK(r.max_closed_form_error < kRopeSameOffsetTolerance);
  // ... while different offsets give different scores (|x||y| ~ 64: differences of order 1)
  CHECK(r.across_offsets_max - r.across_offsets_min > 1.0);
  for (const auto& g : r.examples) CHECK(g.spread < kRopeSameOffsetTolerance);
}

TEST_CASE("demo rope: one frequency collides after its period, all 32 frequencies do not", "[demo][rope]") {
  const RopeDemoResult r = compute_rope_demo(0);
  REQUIRE(r.one_frequency.size() == static_cast<std::size_t>(r.max_distance + 1));
  CHECK(r.one_periodicity_error < kRopeCollisionTolerance);
  CHECK(r.one.closest_far == r.period);
  CHECK(r.one.gap_at_period < kRopeCollisionTolerance);
  CHECK(r.one.closest_far_gap < r.one.neighbour_gap);
  // all frequencies: not periodic with 2048, and every far distance is further from 0 than 1 is
  CHECK(r.all_periodicity_diff > 0.1);
  CHECK(r.all.closest_far_gap > r.all.neighbour_gap);
  CHECK(r.all.closest_far >= kRopeFarFrom);
  CHECK(r.slowest_period > static_cast<double>(r.max_distance));  // why: the slowest pair has not come round
  CHECK(r.claim_holds);
}

TEST_CASE("demo rope runs, prints its verdict and writes its SVG", "[demo][rope]") {
  const std::string text = run_demo_to_temp(run_rope_demo, "rope");
  CHECK(text.find("claim holds") != std::string::npos);
}

TEST_CASE("demo gqa: parameters and KV-cache bytes, formula against module and allocation", "[demo][gqa][cache]") {
  GqaDemoSettings s;
  s.tokens = 12;    // small: the bytes are exact at any length
  s.repeats = 0;    // no timing in a test
  const GqaDemoResult r = compute_gqa_demo(0, s);
  REQUIRE(r.variants.size() == 3);
  for (const GqaVariant& v : r.variants) {
    CHECK(v.attn_params == v.attn_params_formula);
    CHECK(v.kv_proj_params == v.kv_proj_params_formula);
    CHECK(v.cached_positions == s.tokens);
    CHECK(v.cache_bytes == v.bytes_per_token_formula * s.batch * s.tokens);
    CHECK(v.tokens_per_second == 0);
  }
  const GqaVariant &mha = r.variants[0], &gqa = r.variants[1], &mqa = r.variants[2];
  // 8 : 2 : 1 in bytes per token and in k/v projection parameters
  CHECK(mha.bytes_per_token_formula == 8 * mqa.bytes_per_token_formula);
  CHECK(gqa.bytes_per_token_formula == 2 * mqa.bytes_per_token_formula);
  CHECK(mha.kv_proj_params == 8 * mqa.kv_proj_params);
  CHECK(gqa.kv_proj_params == 2 * mqa.kv_proj_params);
  // the queries and the output projection are the same in all three
  CHECK(mha.attn_params - mha.kv_proj_params == mqa.attn_params - mqa.kv_proj_params);
  // the lecture's numbers for D 256, 8 heads, Dh 32, 2 layers, float32: 2 * 2 * 8 * 32 * 4 bytes
  CHECK(mha.bytes_per_token_formula == 4096);
  CHECK(r.claim_holds);
}

TEST_CASE("demo gqa runs, prints its verdict and writes its SVG", "[demo][gqa]") {
  const std::string text = run_demo_to_temp(run_gqa_demo, "gqa");
  CHECK(text.find("claim holds") != std::string::npos);
  CHECK(text.find("tokens/s") != std::string::npos);
}

TEST_CASE("demo pooling: mean pooling is the average of the tokens, attention weights a distribution",
          "[demo][pooling][padding]") {
  const PoolingDemoResult r = compute_pooling_demo(0, SCRATCHFORMER_SOURCE_DIR "/data/corpora");
  REQUIRE(r.sentences.size() == 12);
  CHECK(r.mean_vs_manual < kPoolingTolerance);
  CHECK(r.attention_sum_error < kPoolingTolerance);
  CHECK(r.attention_on_pads == 0);
  CHECK(r.mean_padding_change < kPoolingTolerance);
  CHECK(r.attention_padding_change < kPoolingTolerance);
  // sentence 0's weights: 1/T on its tokens and 0 on the pads under mean pooling; attention is
  // not uniform (a random query prefers some tokens)
  const std::size_t t = r.sentences[0].tokens.size();
  REQUIRE(r.mean_weights.size() == static_cast<std::size_t>(r.padded_length));
  double spread = 0;
  for (std::size_t j = 0; j < r.mean_weights.size(); ++j) {
    CHECK(r.mean_weights[j] == (j < t ? 1.0 / static_cast<double>(t) : 0.0));
    if (j >= t) CHECK(r.attention_weights[j] == 0.0);
    if (j < t) spread = std::max(spread, std::abs(r.attention_weights[j] - 1.0 / static_cast<double>(t)));
  }
  CHECK(spread > 0.01);
  for (const auto& p : r.pairs) CHECK(std::abs(p.mean_cosine) <= 1.0 + 1e-12);
  CHECK(r.claim_holds);
}

TEST_CASE("demo pooling names the missing corpus file", "[demo][pooling][errors]") {
  try {
    compute_pooling_demo(0, "/nonexistent-corpora");
    FAIL("expected std::runtime_error");
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    CHECK(message.find("/nonexistent-corpora/tatoeba-cmn-eng/train.en") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);  // one line
  }
}

TEST_CASE("demo pooling runs, prints its verdict and writes its SVG", "[demo][pooling]") {
  const std::string text = run_demo_to_temp(run_pooling_demo, "pooling");
  CHECK(text.find("claim holds") != std::string::npos);
  CHECK(text.find("<pad>") != std::string::npos);
}
