// Parameter initialisation, deterministic from a caller-owned Generator.
//
// What Scratchformer uses (and why):
//   Linear weights      Xavier/Glorot uniform, U(-a, a), a = sqrt(6 / (fan_in + fan_out)):
//                       what the original Transformer code (tensor2tensor) and the Annotated
//                       Transformer use; keeps activation variance steady through the stack.
//   Linear biases       zeros.
//   Embeddings          N(0, D^-1/2) (normal with std 1/sqrt(D)): the inputs are then scaled by
//                       sqrt(D), so embedded tokens start with unit variance (as in fairseq).
//   Norm weights/biases ones / zeros.
#pragma once

#include "autograd/generator.h"
#include "autograd/tensor.h"

namespace sf::nn {

// shape (fan_out, fan_in) as a Linear weight: U(-a, a), a = sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform(const Shape& shape, Generator& gen, Dtype dtype = Dtype::Float32);
// N(0, std^2)
Tensor normal(const Shape& shape, double std, Generator& gen, Dtype dtype = Dtype::Float32);

}  // namespace sf::nn
