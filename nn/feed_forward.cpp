#include "nn/feed_forward.h"

#include <stdexcept>

#include "autograd/check.h"
#include "autograd/ops.h"

namespace sf::nn {

// Letters: D d_model, F d_ff.

Activation parse_activation(const std::string& name) {
  if (name == "relu") return Activation::ReLU;
  if (name == "gelu") return Activation::GELU;
  if (name == "swiglu") return Activation::SwiGLU;
  throw std::invalid_argument("FeedForward: unknown activation '" + name +
                              "', expected one of \"relu\", \"gelu\", \"swiglu\"");
}

const char* activation_name(Activation act) {
  switch (act) {
    case Activation::ReLU: return "relu";
    case Activation::GELU: return "gelu";
    case Activation::SwiGLU: return "swiglu";
  }
  return "?";
}

FeedForward::FeedForward(std::int64_t D, std::int64_t F, Activation act, double dropout_p, Generator& init_gen,
                         Generator& dropout_gen, Dtype dtype)
    : d_model(D), d_ff(F), activation(act) {
  if (D <= 0 || F <= 0)
    throw std::invalid_argument("FeedForward: sizes must be positive, got d_model " + std::to_string(D) +
                                ", d_ff " + std::to_string(F));
  fc1 = register_module("fc1", std::make_shared<Linear>(D, F, init_gen, true, dtype));
  if (act == Activation::SwiGLU)
    gate = register_module("gate", std::make_shared<Linear>(D, F, init_gen, true, dtype));
  fc2 = register_module("fc2", std::make_shared<Linear>(F, D, init_gen, true, dtype));
  dropout = register_module("dropout", std::make_shared<Dropout>(dropout_p, dropout_gen));
}

// x: (..., D) -> (..., D)
Tensor FeedForward::forward(const Tensor& x) const {
  SF_EXPECT(x.dim() >= 1 && x.size(-1) == d_model, "FeedForward: expected input (..., ", d_model, "), got ", x.shape());
  Tensor h = fc1->forward(x);  // (..., F)
  switch (activation) {
    case Activation::ReLU: h = relu(h); break;
    case Activation::GELU: h = gelu(h); break;
    case Activation::SwiGLU: {
      Tensor g = gate->forward(x);  // (..., F)
      Tensor silu = mul(g, sigmoid(g));  // silu(g) = g * sigmoid(g)
      h = mul(silu, h);
      break;
    }
  }
  h = dropout->forward(h);  // (..., F); identity in eval mode
  return run_forward_hooks(fc2->forward(h));  // (..., D)
}

}  // namespace sf::nn
