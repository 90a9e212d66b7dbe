// Relative positions inside attention: RoPE and ALiBi.
//
// Letters: B batch, H heads, T sequence length, Tq query length, Tk key length, Dh head width.
//
// The sinusoidal and learned encodings (nn/positional.h) add a position vector to the token
// embeddings once, at the bottom of the stack. These two methods act inside every attention
// layer instead, and make the attention score depend on the distance between query and key:
//
//   RoPE (Su et al. 2021, "RoFormer"): rotate q and k before the dot product. Position p turns
//     the pair (x[2k], x[2k+1]) by the angle p * theta_k, theta_k = base^(-2k/Dh). A rotation
//     by a then b gives <R_a q, R_b k> = <q, R_(b-a) k>: the score sees only i - j.
//   ALiBi (Press et al. 2022, "Train Short, Test Long"): no change to q or k; add a bias
//     -m_h * distance to the scores, with one fixed slope m_h per head, so every head prefers
//     nearby keys, some (large m) sharply, some (small m) hardly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace sf::nn {

// RoPE past the trained length (model.rope_scaling). A model trained on L positions has seen the
// slow pairs (small theta_k) turn through only part of a circle; at 4L they reach angles it
// never saw. Two remedies, both "squeeze the new positions into the trained angles":
//   Interpolation (Chen et al. 2023, "position interpolation"): position p turns as p / s did,
//     every pair slowed by the factor s (fine detail between neighbours is squeezed too).
//   Ntk ("NTK-aware" scaling, bloc97 2023): base -> base * s^(Dh/(Dh-2)): the fast pairs
//     (k near 0) keep their speed, the slowest one is slowed by exactly s.
enum class RopeScaling { None, Interpolation, Ntk };
RopeScaling parse_rope_scaling(const std::string& name);  // "none" | "interpolation" | "ntk"
const char* rope_scaling_name(RopeScaling scaling);

// What apply_rope needs to know: angle = position * position_scale * base^(-2k/Dh).
struct RopeFrequencies {
  double base = 10000.0;
  double position_scale = 1.0;
};
// The frequencies of `scaling` with factor s >= 1 for head width head_dim (None: s is ignored).
RopeFrequencies rope_frequencies(RopeScaling scaling, double factor, std::int64_t head_dim);

// Rotary position embedding.
// x: (B,H,T,Dh) (any leading dims), Dh even -> (B,H,T,Dh).
// Row t sits at absolute position p = start_pos + t, turned as if at p * position_scale. The pairs are interleaved, as in the
// RoFormer paper: (x[0], x[1]), (x[2], x[3]), ... (not the "first half / second half" split some
// codebases use). Pair k turns by p * theta_k, theta_k = base^(-2k/Dh):
//   out[2k]   = x[2k] cos(p theta_k) - x[2k+1] sin(p theta_k)
//   out[2k+1] = x[2k] sin(p theta_k) + x[2k+1] cos(p theta_k)
// Composed from differentiable ops (reshape, narrow, mul, sub, add, cat); the cos/sin tables
// are constants. Vector norms are preserved (each pair is rotated, not scaled).
Tensor apply_rope(const Tensor& x, std::int64_t start_pos, double base = 10000.0, double position_scale = 1.0);

// The ALiBi slopes m_h = 2^(-8 (h+1) / H), h = 0..H-1: for H = 8, 1/2, 1/4, ..., 1/256.
// (Press et al. give this geometric sequence for H a power of two; we use it for every H.)
std::vector<double> alibi_slopes(std::int64_t n_heads);

// ALiBi bias -> (H, Tq, Tk), added to the attention scores before the softmax.
// Query i sits at q_pos = q_start + i, key j at k_pos = j.
//   causal:     bias[h,i,j] = -m_h * (q_pos - k_pos)   (keys at or before the query; later keys
//               get a positive value, but the causal mask blocks them anyway)
//   otherwise:  bias[h,i,j] = -m_h * |q_pos - k_pos|
Tensor alibi_bias(std::int64_t n_heads, std::int64_t t_q, std::int64_t t_k, std::int64_t q_start, bool causal,
                  Dtype dtype);
// The same for keys at any positions (a ring-buffer cache holds them out of order):
// q_positions (Tq), k_positions (Tk) -> (H, Tq, Tk).
Tensor alibi_bias_at(std::int64_t n_heads, const std::vector<std::int64_t>& q_positions,
                     const std::vector<std::int64_t>& k_positions, bool causal, Dtype dtype);

}  // namespace sf::nn
