// Absolute positional encodings, added to the (scaled) token embeddings.
//
// Letters: B batch, T sequence length, D model width, L max_len (longest sequence supported).
//
// Attention by itself ignores order, so each position p gets a vector PE[p] added to its
// token's embedding:
//   SinusoidalPositional  the fixed table of "Attention Is All You Need" (sec. 3.5):
//                           PE[p, 2i]   = sin(p / 10000^(2i/D))
//                           PE[p, 2i+1] = cos(p / 10000^(2i/D))
//                         wavelengths from 2*pi to 10000*2*pi; no parameters.
//   LearnedPositional     a trained table (as BERT / GPT-2), parameter "weight" (L, D).
//
// forward(x, start_pos) adds the rows start_pos .. start_pos+T-1: during incremental decoding
// with a KV cache, x holds only the new tokens and start_pos is how many came before.
// Relative schemes (RoPE, ALiBi) live in nn/relative_positions.h.
#pragma once

#include <cstdint>

#include "autograd/generator.h"
#include "nn/module.h"

namespace sf::nn {

class SinusoidalPositional : public Module {
 public:
  SinusoidalPositional(std::int64_t max_len, std::int64_t dim, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "SinusoidalPositional"; }

  // -> (L, D): the whole table (a constant, not a parameter; shares storage with the module).
  Tensor table() const { return table_; }

  // x: (B,T,D) -> (B,T,D) = x + PE[start_pos : start_pos+T]
  Tensor forward(const Tensor& x, std::int64_t start_pos = 0) const;

  std::int64_t max_len, dim;

 private:
  Tensor table_;  // (L, D)
};

class LearnedPositional : public Module {
 public:
  // weight: (L, D), N(0, 0.02^2) (the GPT-2 initialisation).
  LearnedPositional(std::int64_t max_len, std::int64_t dim, Generator& gen, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "LearnedPositional"; }

  // x: (B,T,D) -> (B,T,D) = x + weight[start_pos : start_pos+T]
  Tensor forward(const Tensor& x, std::int64_t start_pos = 0) const;

  std::int64_t max_len, dim;
  Tensor weight;  // (L, D)
};

}  // namespace sf::nn
