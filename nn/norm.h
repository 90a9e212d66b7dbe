// Normalisation layers over the last dimension (the model width D).
//
//   LayerNorm (Ba et al. 2016): y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias
//   RMSNorm (Zhang & Sennrich 2019): y = x / sqrt(mean(x^2) + eps) * weight
//
// Both are thin modules over the fused ops sf::layer_norm / sf::rms_norm (autograd/ops_norm.cpp),
// which hold the forward and backward math. At initialisation (weight ones, bias zeros) every
// output row has mean 0 and variance 1 (LayerNorm) or root mean square 1 (RMSNorm).
#pragma once

#include <cstdint>

#include "nn/module.h"

namespace sf::nn {

class LayerNorm : public Module {
 public:
  // weight: (D) ones, bias: (D) zeros.
  explicit LayerNorm(std::int64_t dim, double eps = 1e-5, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "LayerNorm"; }

  // x: (..., D) -> (..., D)
  Tensor forward(const Tensor& x) const;

  std::int64_t dim;
  double eps;
  Tensor weight;  // (D)
  Tensor bias;    // (D)
};

class RMSNorm : public Module {
 public:
  // weight: (D) ones.
  explicit RMSNorm(std::int64_t dim, double eps = 1e-6, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "RMSNorm"; }

  // x: (..., D) -> (..., D)
  Tensor forward(const Tensor& x) const;

  std::int64_t dim;
  double eps;
  Tensor weight;  // (D)
};

}  // namespace sf::nn
