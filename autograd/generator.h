// Generator: a seeded random number generator owned by the caller.
//
// xoshiro256** (Blackman & Vigna), seeded through splitmix64. Integer arithmetic only, so the
// same seed gives the same numbers on every machine and compiler (unlike std::normal_distribution,
// whose algorithm is implementation-defined). Normals use the Box-Muller transform.
// The state is four 64-bit words that a checkpoint can save and restore exactly.
#pragma once

#include <array>
#include <cstdint>

namespace sf {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) { manual_seed(seed); }
  void manual_seed(std::uint64_t seed);

  std::uint64_t next_u64();        // uniform over all 64-bit values
  double uniform();                // U[0, 1), 53 random bits
  double normal();                 // N(0, 1)
  std::uint64_t randint(std::uint64_t n);  // uniform over 0..n-1 (n > 0), unbiased

  using State = std::array<std::uint64_t, 4>;
  State state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  State s_{};
};

}  // namespace sf
