// Softmax whose backward leaves out the row-sum term: dx = g ⊙ y instead of y ⊙ (g − Σ g·y). A
// planted mistake, the commonest one students make, for the tests that must catch it (the
// gradcheck suite's mutation tests) and name it (the diagnoses).
#pragma once

#include <memory>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf::test {

struct SoftmaxMissingTerm final : Node {
  Tensor y;
  const char* name() const override { return "SoftmaxMissingTerm"; }
  static Tensor forward(const Tensor& x) {
    Tensor out;
    {
      NoGradGuard no_grad;
      out = softmax(x, -1);
    }
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<SoftmaxMissingTerm>();
      node->y = out.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {mul(grad_output, y)};  // WRONG on purpose: misses − y ⊙ Σ g·y
  }
};

}  // namespace sf::test
