// Embedding: the lookup table that turns token ids into vectors.
//
// Letters: B batch, T sequence length, V vocabulary (num_embeddings), D embedding width.
//
// Row v of `weight` is the vector of token v; forward gathers one row per id. The gradient
// scatter-adds back into the rows that were read, so only tokens present in a batch learn.
// With a padding_idx, that row starts at zero and never receives a gradient, so padding
// tokens stay the zero vector (as torch.nn.Embedding). The Transformer multiplies the
// embeddings by sqrt(D) afterwards (done by the model, not here).
#pragma once

#include <cstdint>

#include "autograd/generator.h"
#include "nn/module.h"

namespace sf::nn {

class Embedding : public Module {
 public:
  // weight: (V, D), N(0, 1/sqrt(D)) (see nn/init.h); row padding_idx zeroed when >= 0.
  Embedding(std::int64_t num_embeddings, std::int64_t dim, Generator& gen, std::int64_t padding_idx = -1,
            Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "Embedding"; }

  // ids: (B,T) int64 (any shape works) -> (B,T,D)
  Tensor forward(const Tensor& ids) const;

  std::int64_t num_embeddings, dim;
  std::int64_t padding_idx;  // -1: no padding row
  Tensor weight;             // (V, D)
};

}  // namespace sf::nn
