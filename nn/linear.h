// Linear: y = x Wᵀ + b, the projection inside attention and the feed-forward layer.
#pragma once

#include "autograd/generator.h"
#include "nn/module.h"

namespace sf::nn {

class Linear : public Module {
 public:
  // weight: (out_features, in_features), Xavier uniform; bias: (out_features), zeros.
  Linear(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool bias = true,
         Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "Linear"; }

  // x: (..., in_features) -> (..., out_features)
  Tensor forward(const Tensor& x) const;

  std::int64_t in_features, out_features;
  Tensor weight;  // (out, in)
  Tensor bias;    // (out), undefined when bias = false
};

}  // namespace sf::nn
