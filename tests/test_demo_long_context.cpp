// The lecture's "after" as demos (train/lessons/demo_crossover.h, demo_kv_bandwidth.h): what
// their numbers must satisfy whatever the machine. Timings are printed by the demos, never
// asserted here; what is asserted is computed (FLOP formulas, the crossover interpolation) or
// counted (the bytes a cache holds, the live tensor bytes of a decoding state).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "demo_report_check.h"
#include "train/lessons/demo_crossover.h"
#include "train/lessons/demo_extrapolation.h"
#include "train/lessons/demo_kv_bandwidth.h"

using namespace sf::lessons;

TEST_CASE("crossover: the FLOP formulas meet at T* = d_ff - 2 d_model", "[demo][flops]") {
  // One hand-counted point: T 4, D 2, F 8: attention 8*4*4 + 4*16*2 = 128 + 128, FFN 4*4*2*8 = 256.
  CHECK(attention_flops(4, 2) == 256.0);
  CHECK(ffn_flops(4, 2, 8) == 256.0);
  CHECK(formula_crossover(2, 8) == 4.0);
  const double t = formula_crossover(256, 1024);
  CHECK(t == 512.0);
  CHECK(attention_flops(512, 256) == ffn_flops(512, 256, 1024));
  CHECK(attention_flops(256, 256) < ffn_flops(256, 256, 1024));
  CHECK(attention_flops(1024, 256) > ffn_flops(1024, 256, 1024));
}

TEST_CASE("crossover: the measured crossing is interpolated on log scales", "[demo][flops]") {
  // ratio 0.5 at T 128, 2 at T 512: log ratio is linear in log2 T, zero halfway, at T 256.
  CHECK(std::abs(measured_crossover({{64, 0.25}, {128, 0.5}, {512, 2.0}}) - 256.0) < 1e-9);
  CHECK(measured_crossover({{64, 1.5}, {128, 2.0}}) == -1.0);  // already past at the first point
  CHECK(measured_crossover({{64, 0.1}, {128, 0.2}}) == 0.0);   // never reached
  CHECK(measured_crossover({{64, 0.5}, {128, 1.0}}) == 128.0); // reached exactly at a point
}

TEST_CASE("crossover: the demo measures every length with the formulas beside it", "[demo][flops]") {
  CrossoverSettings s;
  s.d_model = 32, s.d_ff = 128, s.n_heads = 2, s.lengths = {16, 32, 64}, s.repeats = 1;
  const CrossoverResult r = compute_crossover(1, s);
  for (const std::string& problem : sf::test::report_problems(crossover_json(r))) FAIL_CHECK(problem);  // the page draws it
  REQUIRE(r.points.size() == 3);
  CHECK(r.formula_t == 64.0);
  for (const CrossoverPoint& p : r.points) {
    CHECK(p.attention_seconds > 0);
    CHECK(p.ffn_seconds > 0);
    CHECK(p.attention_flops == attention_flops(p.length, 32));
    CHECK(p.ffn_flops == ffn_flops(p.length, 32, 128));
  }
}

TEST_CASE("kv-bandwidth: each step reads the cache the formula counts, a window's ring stays W positions",
          "[demo][cache][window]") {
  KvBandwidthSettings s;
  s.d_model = 32, s.n_heads = 4, s.layers = 2, s.batch = 2;
  s.kv_heads = {4, 2, 1};
  s.cache_lengths = {8, 32};
  s.steps = 2;
  s.stream_bytes = std::int64_t{1} << 20;
  s.window = 8;
  s.generated = {8, 24, 40};
  const KvBandwidthResult r = compute_kv_bandwidth(3, s);
  for (const std::string& problem : sf::test::report_problems(kv_bandwidth_json(r))) FAIL_CHECK(problem);  // the page draws it
  REQUIRE(r.points.size() == 6);
  for (const KvBandwidthPoint& p : r.points) {
    INFO("Hkv " << p.kv_heads << " T " << p.cache_length);
    CHECK(p.kv_bytes == 2 * 2 * 2 * p.kv_heads * p.cache_length * 8 * 4);  // k,v * layers * B * Hkv * T * Dh * 4
    CHECK(p.step_seconds > 0);
  }
  REQUIRE(r.memory.size() == 3);
  // The ring holds W = 8 positions of k and v: 2 layers * 2 * B 2 * Hkv 1 * 8 * Dh 8 * 4 bytes, plus
  // the state's (B,1) first tokens; the full cache grows by one position per generated token.
  for (const KvMemoryRow& m : r.memory) CHECK(m.ring_live_bytes == r.memory.front().ring_live_bytes);
  CHECK(r.memory[2].full_live_bytes - r.memory[1].full_live_bytes == 2 * 2 * 2 * 1 * 16 * 8 * 4);
  CHECK(r.stream_gb_per_s > 0);
  CHECK(r.claim_holds);
}

TEST_CASE("extrapolation: every scheme is scored by position, learned positions refuse past L", "[demo][positional]") {
  ExtrapolationSettings s;  // a few steps: what is checked here does not depend on training
  s.train_length = 8, s.d_model = 16, s.n_heads = 2, s.layers = 1, s.steps = 2, s.batch = 2, s.eval_windows = 2,
  s.bucket = 8;
  const ExtrapolationResult r = compute_extrapolation(1, "", s);
  REQUIRE(r.curves.size() == 7);
  for (const ExtrapolationCurve& c : r.curves) {
    INFO(c.scheme);
    CHECK(c.loss.size() == (c.scheme == "learned" ? 8u : 32u));
    CHECK(c.refused.empty() == (c.scheme != "learned"));
  }
  CHECK_THAT(r.curves[1].refused, Catch::Contains("max_len 8") && Catch::Contains("(2, 32)"));
}

TEST_CASE("extrapolation: ALiBi degrades least past L, NTK rescues RoPE, interpolation alone does not",
          "[demo][positional][trains]") {
  const ExtrapolationResult r = compute_extrapolation(0, "");  // the demo's own run (about 80 s)
  for (const std::string& problem : sf::test::report_problems(extrapolation_json(r))) FAIL_CHECK(problem);  // the page draws it
  for (const auto& [claim, held] : r.claims) {
    INFO(claim);
    CHECK(held);
  }
  CHECK(r.least_degrading == "alibi");
  CHECK(r.claim_holds);
}
