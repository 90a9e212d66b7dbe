// demo permutation: without positions, self-attention is permutation-equivariant. Permute the
// input rows and the output rows permute the same way, f(P x) = P f(x), up to rounding; with
// sinusoidal or RoPE positions the model sees where each token stands, and it is not.
//
// Letters: B batch, S sequence length, D d_model.
//
// Convention: a permutation p of 0..S-1 acts on rows as (P x)_i = x_{p[i]}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace sf::lessons {

// One measurement: max |f(P x) - P f(x)| of one module with one kind of positions.
struct PermutationCase {
  std::string module;     // "MultiHeadAttention" or "encoder-only model"
  std::string positions;  // "none" | "sinusoidal" | "rope" (model.positional)
  std::string dtype;      // "float64" | "float32"
  double max_diff = 0;    // max over positions and features of |f(P x) - P f(x)|
  double output_scale = 0;  // max |f(x)|: what max_diff compares with
  bool positions_used() const { return positions != "none"; }
};

struct PermutationResult {
  std::int64_t seq_len = 0, d_model = 0, n_heads = 0, layers = 0;
  std::vector<std::int64_t> permutation;  // p, moving every position (a derangement)
  std::vector<PermutationCase> cases;
};

// A permutation of 0..n-1 with no fixed point, drawn from `seed`.
std::vector<std::int64_t> random_derangement(std::int64_t n, std::uint64_t seed);
// x: (B,S,...) -> (B,S,...) with rows picked along dim 1: out[:, i] = x[:, p[i]].
Tensor permute_rows(const Tensor& x, const std::vector<std::int64_t>& p);
// f_px = f(P x), f_x = f(x): (B,S,D). max over b, checked positions i and features of
// |f_px[b,i] - f_x[b,p[i]]|; `check` lists the positions compared (empty = all).
double permutation_error(const Tensor& f_px, const Tensor& f_x, const std::vector<std::int64_t>& p,
                         const std::vector<std::int64_t>& check = {});

// Every case of the demo: MultiHeadAttention alone (float64 and float32 without positions,
// float64 with sinusoidal positions added to x and with RoPE inside it), and the whole
// encoder-only model built from a config with model.positional = none, sinusoidal, rope
// (float64, 2 layers, token ids permuted).
PermutationResult compute_permutation(std::uint64_t seed);

}  // namespace sf::lessons
