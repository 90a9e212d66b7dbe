// demo scaling: why attention divides q.k by sqrt(d_k). With q, k ~ N(0, I) of width d_k the dot
// product q.k has variance d_k, so the scores spread further apart as d_k grows and softmax
// saturates: almost all weight on one key (entropy -> 0, largest weight -> 1), and the gradient
// through softmax, diag(w) - w w^T, vanishes. Dividing by sqrt(d_k) keeps the variance at 1 and
// the weights spread out at every width.
//
// Letters: T keys, d_k width of q and k.
#pragma once

#include <cstdint>
#include <vector>

namespace sf::lessons {

// Means over the seeds for one d_k (medians for the gradient); "raw" = softmax(q.k), "scaled" = softmax(q.k / sqrt(d_k)).
struct ScalingRow {
  std::int64_t d_k = 0;
  double var_raw = 0, var_scaled = 0;          // variance of the scores over all keys and seeds
  double entropy_raw = 0, entropy_scaled = 0;  // -sum_j w_j log w_j of the weights, in nats
  double max_raw = 0, max_scaled = 0;          // the largest weight
  // ||dL/dq|| by the autograd, L = sum_j w_j r_j, r ~ N(0,1): the median over the seeds (the
  // typical draw; a mean is dominated by the rare draws where two keys nearly tie)
  double grad_raw = 0, grad_scaled = 0;
};

struct ScalingResult {
  std::int64_t keys = 0, seeds = 0;
  double max_entropy = 0;  // log T: the entropy of uniform weights
  std::vector<ScalingRow> rows;  // d_k = 4, 16, 64, 256, 1024
};

// Every draw starts from `seed` (then seed + 1, ... for the others), float64.
ScalingResult compute_scaling(std::uint64_t seed);
// The demo's verdict: variance ~ d_k raw and ~ 1 scaled; at the largest d_k the raw weights are
// saturated (low entropy, max weight near 1, gradient far below the scaled one) and the scaled not.
bool scaling_held(const ScalingResult& r);

}  // namespace sf::lessons
