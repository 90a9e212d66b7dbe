// demo lookup: attention is a soft lookup table. A dictionary holds keys k_j (here one-hot, so
// q.k_j reads coordinate j of q) and values v_j; a query q gets weights w = softmax(q K^T) and
// returns sum_j w_j v_j. A query equal to a key, scaled by a large beta, puts (almost) all weight
// on that key and returns its value, as a dictionary would (the error falls like e^-beta); a
// query between two keys splits the weight and blends their values; the weights are always a
// probability distribution (non-negative, summing to 1).
//
// Letters: N keys, Q queries, D key width, Dv value width.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sf::lessons {

struct LookupQuery {
  std::string label;            // how the query was made, e.g. "20 k2"
  std::vector<double> query;    // (D)
  std::vector<double> weights;  // (N) softmax(q K^T)
  std::vector<double> output;   // (Dv) weights V
};

struct LookupResult {
  std::vector<std::vector<double>> keys, values;  // (N,D), (N,Dv)
  std::vector<LookupQuery> queries;               // the printed ones
  std::vector<double> betas, lookup_error;        // q = beta k2: max |output - v2| per beta
  // q = beta_mix (lambda k1 + (1 - lambda) k2), lambda from 0 to 1: the weights on k1 and k2
  double beta_mix = 0;
  std::vector<double> lambdas, weight_k1, weight_k2;
  double between_error = 0;     // q = 40 (k1 + k2): max |output - (v1 + v2) / 2|
  double min_weight = 0;        // over every query above
  double sum_error = 0;         // max |sum_j w_j - 1| over every query above
  double attention_op_diff = 0; // the printed outputs against attention_naive (the framework's attention)
};

LookupResult compute_lookup();
// The demo's verdict: the sharpest lookup and the midpoint are exact to float64 rounding, the
// weights are a distribution, the mix moves weight from k2 to k1 monotonically.
bool lookup_held(const LookupResult& r);

}  // namespace sf::lessons
