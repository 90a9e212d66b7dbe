// RoPE and ALiBi: see relative_positions.h for the math.
//
// Letters: B batch, H heads, T sequence length, Tq query length, Tk key length, Dh head width.
#include "nn/relative_positions.h"

#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "autograd/exercise.h"
#include "autograd/ops.h"

namespace sf::nn {

RopeScaling parse_rope_scaling(const std::string& name) {
  if (name == "none") return RopeScaling::None;
  if (name == "interpolation") return RopeScaling::Interpolation;
  if (name == "ntk") return RopeScaling::Ntk;
  throw std::invalid_argument("ModelConfig: unknown rope_scaling '" + name +
                              "', expected one of \"none\", \"interpolation\", \"ntk\"");
}

const char* rope_scaling_name(RopeScaling scaling) {
  switch (scaling) {
    case RopeScaling::None: return "none";
    case RopeScaling::Interpolation: return "interpolation";
    case RopeScaling::Ntk: return "ntk";
  }
  return "?";
}

RopeFrequencies rope_frequencies(RopeScaling scaling, double factor, std::int64_t head_dim) {
  if (!(factor >= 1))
    throw std::invalid_argument("rope_frequencies: expected a factor >= 1, got " + std::to_string(factor));
  RopeFrequencies f;
  if (scaling == RopeScaling::Interpolation) f.position_scale = 1.0 / factor;
  // theta_k = base^(-2k/Dh); the slowest pair k = Dh/2 - 1 has base^(-(Dh-2)/Dh), which the
  // factor s^(Dh/(Dh-2)) on the base slows by exactly s.
  if (scaling == RopeScaling::Ntk && head_dim > 2)
    f.base *= std::pow(factor, static_cast<double>(head_dim) / static_cast<double>(head_dim - 2));
  return f;
}

// x: (B,H,T,Dh) -> (B,H,T,Dh)
Tensor apply_rope(const Tensor& x, std::int64_t start_pos, double base, double position_scale) {
  if (x.dim() < 2)
    throw std::invalid_argument("apply_rope: expected x of shape (B,H,T,Dh), got " + shape_str(x.shape()));
  const std::int64_t head_dim = x.size(-1);
  if (head_dim % 2 != 0)
    throw std::invalid_argument("apply_rope: expected an even head width Dh (RoPE rotates pairs), got Dh = " +
                                std::to_string(head_dim) + " in x of shape " + shape_str(x.shape()));
  if (start_pos < 0)
    throw std::invalid_argument("apply_rope: start_pos must be >= 0, got " + std::to_string(start_pos));
  // EXERCISE(rope): rotate each pair (x[..., 2k], x[..., 2k+1]) of row t by the angle
  // (start_pos + t) * position_scale * base^(-2k/Dh), from differentiable ops (the cos/sin tables are constants, in x's
  // dtype): out[2k] = x[2k] cos - x[2k+1] sin, out[2k+1] = x[2k] sin + x[2k+1] cos. -> x's shape.
  // BEGIN SOLUTION
  const std::int64_t t_len = x.size(-2), half = head_dim / 2;

  // The angle tables, (T, Dh/2, 1): angle[t, k] = (start_pos + t) * position_scale * base^(-2k/Dh), in
  // double and stored in x's dtype. They are constants: no gradient flows into them.
  std::vector<double> cos_values(t_len * half), sin_values(t_len * half);
  for (std::int64_t t = 0; t < t_len; ++t)
    for (std::int64_t k = 0; k < half; ++k) {
      const double theta = std::pow(base, -2.0 * static_cast<double>(k) / static_cast<double>(head_dim));
      const double angle = static_cast<double>(start_pos + t) * position_scale * theta;
      cos_values[t * half + k] = std::cos(angle);
      sin_values[t * half + k] = std::sin(angle);
    }
  const Tensor cos_table = from_vector(cos_values, {t_len, half, 1}, x.dtype());
  const Tensor sin_table = from_vector(sin_values, {t_len, half, 1}, x.dtype());

  // x seen as pairs: (B,H,T,Dh) -> (B,H,T,Dh/2,2); even = [..., 0], odd = [..., 1]: (B,H,T,Dh/2,1)
  Shape pairs_shape = x.shape();
  pairs_shape.back() = half;
  pairs_shape.push_back(2);
  const Tensor pairs = reshape(x, pairs_shape);
  const Tensor even = narrow(pairs, -1, 0, 1);
  const Tensor odd = narrow(pairs, -1, 1, 1);

  // Rotate each pair by its angle (the tables broadcast over B and H).
  const Tensor rotated_even = sub(mul(even, cos_table), mul(odd, sin_table));  // (B,H,T,Dh/2,1)
  const Tensor rotated_odd = add(mul(even, sin_table), mul(odd, cos_table));   // (B,H,T,Dh/2,1)
  return reshape(cat({rotated_even, rotated_odd}, -1), x.shape());             // (B,H,T,Dh)
  // END SOLUTION
}

std::vector<double> alibi_slopes(std::int64_t n_heads) {
  if (n_heads <= 0)
    throw std::invalid_argument("alibi_slopes: n_heads must be positive, got " + std::to_string(n_heads));
  std::vector<double> slopes(n_heads);
  for (std::int64_t h = 0; h < n_heads; ++h)
    slopes[h] = std::pow(2.0, -8.0 * static_cast<double>(h + 1) / static_cast<double>(n_heads));
  return slopes;
}

// -> (H, Tq, Tk)
Tensor alibi_bias(std::int64_t n_heads, std::int64_t t_q, std::int64_t t_k, std::int64_t q_start, bool causal,
                  Dtype dtype) {
  if (t_q < 0 || t_k < 0 || q_start < 0)
    throw std::invalid_argument("alibi_bias: expected t_q, t_k, q_start >= 0, got t_q " + std::to_string(t_q) +
                                ", t_k " + std::to_string(t_k) + ", q_start " + std::to_string(q_start));
  std::vector<std::int64_t> q_positions(t_q), k_positions(t_k);
  for (std::int64_t i = 0; i < t_q; ++i) q_positions[i] = q_start + i;
  for (std::int64_t j = 0; j < t_k; ++j) k_positions[j] = j;
  return alibi_bias_at(n_heads, q_positions, k_positions, causal, dtype);
}

// -> (H, Tq, Tk)
Tensor alibi_bias_at(std::int64_t n_heads, const std::vector<std::int64_t>& q_positions,
                     const std::vector<std::int64_t>& k_positions, bool causal, Dtype dtype) {
  const std::vector<double> slopes = alibi_slopes(n_heads);
  const auto t_q = static_cast<std::int64_t>(q_positions.size()), t_k = static_cast<std::int64_t>(k_positions.size());
  std::vector<double> values(n_heads * t_q * t_k);
  for (std::int64_t h = 0; h < n_heads; ++h)
    for (std::int64_t i = 0; i < t_q; ++i)
      for (std::int64_t j = 0; j < t_k; ++j) {
        const double distance = static_cast<double>(q_positions[i] - k_positions[j]);  // q_pos - k_pos
        values[(h * t_q + i) * t_k + j] = -slopes[h] * (causal ? distance : std::abs(distance));
      }
  return from_vector(values, {n_heads, t_q, t_k}, dtype);
}

}  // namespace sf::nn
