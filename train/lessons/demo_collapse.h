// demo collapse: an attention layer mixes rows and features linearly once its weights are
// fixed: y = A x V, with A (T,T) the attention weights (rows non-negative, summing to 1) and V
// (D,D) the value matrix. Two such layers with nothing between them,
//     y = A2 (A1 x V1) V2 = (A2 A1) x (V1 V2),
// are ONE layer of the same form: weights A2 A1 (a product of row-stochastic matrices is
// row-stochastic) and value matrix V1 V2. With the feed-forward's ReLU between them,
//     y = A2 relu(A1 x V1) V2,
// the map is no longer linear in x, so no layer A x V (whatever A and V) reproduces it.
//
// The claim holds for FIXED weights (the patterns frozen after one forward pass, or the
// lecture's linear-attention simplification). Real softmax attention recomputes A2 from its own
// input, so even without a ReLU a real stack is not exactly one layer; what collapses is the
// value path: the product V1 V2 can never be more than one D x D matrix.
//
// Letters: T sequence length, D width, N inputs of the fit.
#pragma once

#include <cstdint>
#include <vector>

namespace sf::lessons {

struct CollapseResult {
  std::int64_t seq_len = 0, d_model = 0, fit_inputs = 0;
  std::vector<std::vector<double>> a1, a2, a21;  // (T,T): the frozen weights and their product A2 A1
  double a21_row_sum_error = 0;  // max_i |sum_j (A2 A1)[i,j] - 1|
  double a21_min = 0;            // min (A2 A1)[i,j] (>= 0)
  // Without a nonlinearity (float64, on x0):
  double stacked_vs_single = 0;  // max |A2 (A1 x V1) V2 - (A2 A1) x (V1 V2)|
  // max |f(x + x') - f(x) - f(x')| / max |f(x + x')|: 0 for any layer A x V (linear in x)
  double linearity_defect_linear = 0;
  double linearity_defect_relu = 0;
  // The best single layer with weights A2 A1: V fitted by least squares on N random inputs;
  // ||(A2 A1) x V - f(x)|| / ||f(x)|| (Frobenius over all N inputs).
  double fit_residual_linear = 0;
  double fit_residual_relu = 0;
  // max |A2 relu(A1 x V1) V2 - (A2 A1) x (V1 V2)| / max |(A2 A1) x (V1 V2)|, the worst of the N inputs
  double relu_vs_single = 0;
};

CollapseResult compute_collapse(std::uint64_t seed);
// The demo's verdict on r: zero up to float64 rounding without the ReLU, clearly not with it.
bool collapse_held(const CollapseResult& r);

}  // namespace sf::lessons
