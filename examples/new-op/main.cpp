// A new op defined outside the library: SiLU (also called swish), y = x * sigmoid(x), the gate
// of SwiGLU. It is written the way autograd/ops_unary.cpp writes its ops: a struct derived from
// Node with its formula (value, derivative), its forward and its backward side by side, and what
// it saves for backward written out, so `break example::Silu::backward` works in gdb.
//
// Then two checks, in float64:
//   gradcheck  the analytic backward against central finite differences (autograd/gradcheck.h)
//   composed   the forward against the same math built from library ops, x * sigmoid(x)
// Exit code 0 only when both pass.
//
// x: any shape -> y: same shape.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <vector>

#include "autograd/generator.h"
#include "autograd/gradcheck.h"
#include "autograd/kernels.h"  // dispatch_float, check_float, kParallelMinElements: as the library's kernels
#include "autograd/node.h"     // Node, any_requires_grad, connect
#include "autograd/ops.h"

namespace example {
using namespace sf;

// ---- Silu: y = x s, s = sigmoid(x); grad_x = grad_output * s (1 + x (1 - s)). Saves: x. ----
// (The output y alone does not give the derivative back: unlike Sigmoid, SiLU saves its input.)
struct Silu final : Node {
  Tensor x;
  const char* name() const override { return "Silu"; }

  template <class T>
  static T value(T x) { return x / (1 + std::exp(-x)); }  // x * sigmoid(x)
  // dy/dx = s + x s (1 - s) = s (1 + x (1 - s))
  template <class T>
  static T derivative(T x) {
    const T s = 1 / (1 + std::exp(-x));
    return s * (1 + x * (1 - s));
  }

  // x: any shape, float32 or float64 -> out: x's shape, contiguous
  static Tensor forward(const Tensor& x) {
    check_float(x, "silu");
    const Tensor xc = contiguous(x.detach());
    Tensor out = empty(x.shape(), x.dtype());
    dispatch_float(x.dtype(), "silu", [&](auto tag) {
      using T = decltype(tag);
      const T* px = xc.data<T>();
      T* po = out.data<T>();
      const std::int64_t n = out.numel();
#pragma omp parallel for if (n > kParallelMinElements)  // threads only where they pay (kernels.h)
      for (std::int64_t i = 0; i < n; ++i) po[i] = value(px[i]);
    });
    if (any_requires_grad({&x})) {  // record the node only when a gradient is wanted
      auto node = std::make_shared<Silu>();
      node->x = x.detach();  // saved for backward, without its history
      connect(node, {&x}, out);
    }
    return out;
  }

  // grad_output: x's shape -> {grad_x}, grad_x[i] = grad_output[i] * derivative(x[i])
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const Tensor grad_output_c = contiguous(grad_output), xc = contiguous(x);
    Tensor grad_x = empty(xc.shape(), xc.dtype());
    dispatch_float(xc.dtype(), "silu backward", [&](auto tag) {
      using T = decltype(tag);
      const T* p_grad_output = grad_output_c.data<T>();
      const T* px = xc.data<T>();
      T* pg = grad_x.data<T>();
      const std::int64_t n = grad_x.numel();
#pragma omp parallel for if (n > kParallelMinElements)
      for (std::int64_t i = 0; i < n; ++i) pg[i] = p_grad_output[i] * derivative(px[i]);
    });
    return {grad_x};
  }
  void release_saved() override { x = Tensor(); }
};

Tensor silu(const Tensor& x) { return Silu::forward(x); }

// The same function from the library's primitives: two nodes (Sigmoid, Mul) instead of one.
Tensor silu_composed(const Tensor& x) { return mul(x, sigmoid(x)); }

// a, b: float64, the same shape -> the largest |a[i] - b[i]|
double max_abs_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  double worst = 0;
  for (std::size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vb[i]));
  return worst;
}

}  // namespace example

int main() {
  using namespace sf;
  constexpr double kComposedTolerance = 1e-12;  // float64: the two formulas differ by rounding only

  Generator gen(0);
  Tensor x = (randn({3, 4}, gen, Dtype::Float64) * 3.0).requires_grad_();  // (3,4), N(0, 9)

  Tensor y = example::silu(x);
  std::cout << "silu(x) recorded node: " << y.grad_fn()->name() << "\n";

  // gradcheck: every element of x nudged by +-eps, compared with one backward through Silu
  const GradcheckResult check = gradcheck([](const std::vector<Tensor>& in) { return example::silu(in[0]); }, {x});
  std::cout << check.message << "\n";

  const double diff = example::max_abs_difference(y.detach(), example::silu_composed(x).detach());
  const bool composed_ok = diff <= kComposedTolerance;
  std::cout << "max |silu(x) - x * sigmoid(x)| = " << diff << (composed_ok ? " (ok)" : " (too large)") << "\n";
  return check.ok && composed_ok ? 0 : 1;
}
