#include "nn/norm.h"

#include <sstream>
#include <stdexcept>
#include <string>

#include "autograd/check.h"
#include "autograd/ops.h"

namespace sf::nn {

// Letters: D the normalised width (last dim).

namespace {

void check_config(const char* module, std::int64_t dim, double eps) {
  if (dim <= 0) throw std::invalid_argument(std::string(module) + ": dim must be positive, got " + std::to_string(dim));
  if (!(eps > 0)) {
    std::ostringstream msg;
    msg << module << ": eps must be positive, got " << eps;
    throw std::invalid_argument(msg.str());
  }
}

// x: (..., D)
void check_input(const char* module, const Tensor& x, std::int64_t dim) {
  SF_EXPECT(x.dim() >= 1 && x.size(-1) == dim, module, ": expected input (..., ", dim, "), got ", x.shape());
}

}  // namespace

LayerNorm::LayerNorm(std::int64_t D, double eps_, Dtype dtype) : dim(D), eps(eps_) {
  check_config("LayerNorm", D, eps);
  weight = register_parameter("weight", ones({D}, dtype));
  bias = register_parameter("bias", zeros({D}, dtype));
}

// x: (..., D) -> (..., D)
Tensor LayerNorm::forward(const Tensor& x) const {
  check_input("LayerNorm", x, dim);
  return run_forward_hooks(layer_norm(x, weight, bias, eps));
}

RMSNorm::RMSNorm(std::int64_t D, double eps_, Dtype dtype) : dim(D), eps(eps_) {
  check_config("RMSNorm", D, eps);
  weight = register_parameter("weight", ones({D}, dtype));
}

// x: (..., D) -> (..., D)
Tensor RMSNorm::forward(const Tensor& x) const {
  check_input("RMSNorm", x, dim);
  return run_forward_hooks(rms_norm(x, weight, eps));
}

}  // namespace sf::nn
