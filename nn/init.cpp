#include "nn/init.h"

#include <cmath>
#include <stdexcept>

#include "autograd/ops.h"

namespace sf::nn {

Tensor xavier_uniform(const Shape& shape, Generator& gen, Dtype dtype) {
  if (shape.size() != 2)
    throw std::invalid_argument("xavier_uniform: expected a 2-D (fan_out, fan_in) shape, got " + shape_str(shape));
  const double a = std::sqrt(6.0 / static_cast<double>(shape[0] + shape[1]));
  return sub(mul(rand(shape, gen, dtype), 2 * a), a);  // U(0,1) * 2a - a
}

Tensor normal(const Shape& shape, double std, Generator& gen, Dtype dtype) {
  return mul(randn(shape, gen, dtype), std);
}

}  // namespace sf::nn
