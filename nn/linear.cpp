#include "nn/linear.h"

#include <stdexcept>

#include "autograd/check.h"
#include "autograd/ops.h"
#include "nn/init.h"

namespace sf::nn {

Linear::Linear(std::int64_t in, std::int64_t out, Generator& gen, bool use_bias, Dtype dtype)
    : in_features(in), out_features(out) {
  if (in <= 0 || out <= 0)
    throw std::invalid_argument("Linear: sizes must be positive, got in_features " + std::to_string(in) +
                                ", out_features " + std::to_string(out));
  weight = register_parameter("weight", xavier_uniform({out, in}, gen, dtype));
  if (use_bias) bias = register_parameter("bias", zeros({out}, dtype));
}

Tensor Linear::forward(const Tensor& x) const {
  SF_EXPECT(x.dim() >= 1 && x.size(-1) == in_features, "Linear: expected input (..., ", in_features, "), got ",
            x.shape());
  // y = x @ weight^T + bias: (..., in) -> (..., out), one op (autograd/ops_linear.cpp), the
  // same function as add(matmul(x, weight.transpose(0, 1)), bias) in one BLAS call
  Tensor y = linear(x, weight, bias);
  return run_forward_hooks(y);  // trace mode sees y (nn/module.h)
}

}  // namespace sf::nn
