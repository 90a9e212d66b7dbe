// Demo `crossover`: where attention starts to cost more than the feed-forward block. Per layer
// and sequence of T tokens at width D (FLOPs, a multiply-add = 2):
//
//   attention     8 T D^2   (q, k, v and output projections: four D x D products per token)
//               + 4 T^2 D   (q k^T and weights v: every pair of positions, D numbers each)
//   feed-forward  4 T D F   (D -> F -> D per token; F = d_ff = 4 D gives 16 T D^2)
//
// Short sequences are FFN-bound (the T D^2 terms), long ones attention-bound (the T^2 term).
// They cost the same where 8 T D^2 + 4 T^2 D = 4 T D F, at T* = F - 2 D (= 2 D for F = 4 D).
// The demo times one attention sublayer (MultiHeadAttention, plain kernel, no mask) and one
// FeedForward forward against T at D 256, F 1024, and reads the measured crossover off the
// curves (where their times cross, interpolated on log scales) next to the formula's T*.
// Timings are printed, never asserted; a test checks the formulas and the interpolation.
#pragma once

#include "train/lessons/demo_report.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace sf::lessons {

struct CrossoverSettings {
  std::int64_t d_model = 256, d_ff = 1024, n_heads = 4;
  std::vector<std::int64_t> lengths = {64, 128, 256, 512, 1024, 2048, 4096};
  int repeats = 5;  // timed forwards per point (median)
};

// FLOPs of one layer's attention and FFN over T tokens (the formulas above).
double attention_flops(std::int64_t T, std::int64_t d_model);
double ffn_flops(std::int64_t T, std::int64_t d_model, std::int64_t d_ff);
// T* = d_ff - 2 d_model: where the two formulas are equal.
double formula_crossover(std::int64_t d_model, std::int64_t d_ff);
// The first T where `ratio` (attention / FFN, against T) reaches 1, interpolated between the
// neighbouring points on log2 T and log ratio; 0 when the ratio never reaches 1, -1 when it is
// already >= 1 at the first point.
double measured_crossover(const std::vector<std::pair<double, double>>& t_and_ratio);

struct CrossoverPoint {
  std::int64_t length = 0;
  double attention_seconds = 0, ffn_seconds = 0;  // medians
  double attention_flops = 0, ffn_flops = 0;
};

struct CrossoverResult {
  CrossoverSettings settings;
  std::vector<CrossoverPoint> points;
  double formula_t = 0, measured_t = 0;
  // The claim: at the shortest T the FFN takes longer, at the longest attention does (so the
  // curves cross inside the range), as the formulas say they must.
  bool claim_holds = false;
};

CrossoverResult compute_crossover(std::uint64_t seed, const CrossoverSettings& settings = {});

// The numbers as the explorer's Lessons page draws them (demo_report.h); crossover_report is this
// of a fresh run.
Json crossover_json(const CrossoverResult& r);

}  // namespace sf::lessons
