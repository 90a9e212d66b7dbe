// The dropout mask rule: which elements dropout keeps, as a function of (key, position).
// Used by the Dropout op (autograd/ops_dropout.cpp) and, as the naive reference, by its tests.
//
// Counter-based (the idea behind PyTorch's Philox offsets): each dropout call draws ONE 64-bit
// key from the caller's Generator; element i (its row-major position in x's logical shape) then
// gets 32 random bits that depend only on (key, i):
//
//   pair_bits(key, j) = mix(key + (j + 1) * 0x9E3779B97F4A7C15)   one 64-bit hash per pair j
//   draw(key, i)      = low 32 bits of pair_bits(key, i / 2) for even i, high 32 bits for odd i
//   keep[i]           = draw(key, i) >= threshold,   threshold = ceil(p * 2^32)
//
// mix is splitmix64's output function, so pair_bits(key, 0), pair_bits(key, 1), ... is exactly
// the stream of splitmix64 seeded with key. For 0 < p < 1 an element is dropped with probability
// threshold / 2^32: p rounded up to a multiple of 2^-32 (exactly p when p * 2^32 is an integer;
// threshold is at least 1 and at most 2^32, which drops everything). No element depends on
// another, so the mask can be filled in any order and by any number of threads with the same
// result, and the generator advances by exactly one draw per call whatever the tensor's size
// (checkpoints store the generator state, so a resumed run draws the same masks).
#pragma once

#include <cmath>
#include <cstdint>

namespace sf {

// ceil(p * 2^32) for a drop probability 0 < p < 1: in 1 .. 2^32 (exact: p * 2^32 only shifts
// the exponent of a double).
inline std::uint64_t dropout_threshold(double p) { return static_cast<std::uint64_t>(std::ceil(p * 0x1p32)); }

// The 64 random bits of the element pair (2j, 2j+1): splitmix64's j-th output from state key.
inline std::uint64_t dropout_pair_bits(std::uint64_t key, std::uint64_t j) {
  std::uint64_t z = key + (j + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The rule, one element at a time (the naive reference; the op fills whole blocks at once).
inline bool dropout_keeps(std::uint64_t key, std::int64_t i, std::uint64_t threshold) {
  const std::uint64_t bits = dropout_pair_bits(key, static_cast<std::uint64_t>(i) / 2);
  const std::uint64_t draw = i % 2 == 0 ? (bits & 0xFFFFFFFFull) : (bits >> 32);
  return draw >= threshold;
}

}  // namespace sf
