#include "nn/embedding.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "nn/init.h"

namespace sf::nn {

// Letters: B batch, T sequence length, V vocabulary, D embedding width.

Embedding::Embedding(std::int64_t V, std::int64_t D, Generator& gen, std::int64_t pad, Dtype dtype)
    : num_embeddings(V), dim(D), padding_idx(pad) {
  if (V <= 0 || D <= 0)
    throw std::invalid_argument("Embedding: sizes must be positive, got num_embeddings " + std::to_string(V) +
                                ", dim " + std::to_string(D));
  if (pad < -1 || pad >= V)
    throw std::invalid_argument("Embedding: padding_idx must be -1 (none) or in [0, " + std::to_string(V) +
                                "), got " + std::to_string(pad));
  Tensor w = normal({V, D}, 1.0 / std::sqrt(static_cast<double>(D)), gen, dtype);  // (V, D)
  if (pad >= 0) w.narrow(0, pad, 1).fill_(0.0);  // the padding token starts as the zero vector
  weight = register_parameter("weight", w);
}

// ids: (B,T) int64 -> (B,T,D). sf::embedding checks the ids (int64, each in [0, V)) and
// keeps the padding row's gradient at exactly zero.
Tensor Embedding::forward(const Tensor& ids) const {
  return run_forward_hooks(embedding(weight, ids, padding_idx));
}

}  // namespace sf::nn
