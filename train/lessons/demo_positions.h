// Demo `positions`: the sinusoidal position table, and why its dot products only see distance.
//
// PE[p, 2k] = sin(p w_k), PE[p, 2k+1] = cos(p w_k), w_k = 10000^(-2k/D) (nn/positional.h). Each
// pair of columns is one frequency: fast on the left (w_0 = 1 radian per position), slow on the
// right. Because sin a sin b + cos a cos b = cos(a - b),
//     PE_p . PE_q = sum_k cos((p - q) w_k),
// a function of p - q alone: D/2 at p = q, smaller at every other distance in the table. The
// demo builds the framework's own table (SinusoidalPositional, float32) at full width, takes every
// dot product PE_p . PE_q, and checks both facts against the closed form.
//
// Letters: P positions, D model width.
#pragma once

#include <cstdint>
#include <vector>

namespace sf::lessons {

struct PositionsDemoResult {
  std::int64_t positions = 0, d_model = 0;
  std::vector<std::vector<double>> table;  // (P, D) the module's table
  std::vector<std::vector<double>> dots;   // (P, P) PE_p . PE_q
  std::vector<double> by_offset;           // [m]: the closed form sum_k cos(m w_k), m = 0 .. P-1
  double max_spread = 0;        // max over m of (max - min) of PE_p . PE_q over the pairs with |p - q| = m
  double max_closed_form_error = 0;  // max |PE_p . PE_q - sum_k cos((p - q) w_k)|
  double largest_off_diagonal = 0;   // max over p != q of PE_p . PE_q (below D/2)
  bool claim_holds = false;
};

// float32 sin/cos summed over D/2 = 128 pairs: each product is exact to ~6e-8 relative, so a dot
// product of size <= 128 is within ~1e-5 of the closed form; 1e-3 leaves room and is still far
// below the gap between distance 0 (D/2) and the nearest other distance.
inline constexpr double kPositionsTolerance = 1e-3;

PositionsDemoResult compute_positions_demo(std::int64_t positions = 64, std::int64_t d_model = 256);

}  // namespace sf::lessons
