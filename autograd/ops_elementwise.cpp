// Binary element-wise ops with NumPy broadcasting: add, sub, mul, div.
//
// Forward: out[i] = a[i'] (op) b[i''] where i', i'' are i with broadcast dims pinned to 0.
// Backward: the gradient of a broadcast operand is summed over the dims it was broadcast along
// (sum_to), so it gets back its own shape.
#include <stdexcept>

#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// out = f(a, b) elementwise with broadcasting. `op` names the caller in errors.
template <class F>
Tensor binary_kernel(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_float(a, op);
  check_same_dtype(a, b, op);
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = empty(out_shape, a.dtype());
  dispatch_float(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    const std::int64_t n = out.numel();
    if (a.is_contiguous() && b.is_contiguous() && a.shape() == out_shape && b.shape() == out_shape) {
#pragma omp parallel for if (n > kParallelMinElements)
      for (std::int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);  // fast path: same shape
    } else if (a.is_contiguous() && a.shape() == out_shape && b.numel() == 1) {
      const T s = pb[0];
#pragma omp parallel for if (n > kParallelMinElements)
      for (std::int64_t i = 0; i < n; ++i) po[i] = f(pa[i], s);  // fast path: tensor op scalar
    } else {
      const Shape sa = broadcast_strides(a, out_shape), sb = broadcast_strides(b, out_shape);
      const Shape so = out.strides();
      parallel_for_each_strided<3>(out_shape, {&so, &sa, &sb}, [&](std::int64_t o, std::int64_t ia, std::int64_t ib) {
        po[o] = f(pa[ia], pb[ib]);
      });
    }
  });
  return out;
}

}  // namespace

// ---- Add: out = a + b --------------------------------------------------------------------
// Saves: nothing (the gradient passes through to both).
struct Add final : Node {
  const char* name() const override { return "Add"; }
  static Tensor forward(const Tensor& a, const Tensor& b) {
    Tensor out = binary_kernel(a, b, "add", [](auto x, auto y) { return x + y; });
    if (any_requires_grad({&a, &b})) connect(std::make_shared<Add>(), {&a, &b}, out);
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    Tensor grad_a, grad_b;
    if (needs_input_grad(0)) grad_a = sum_to(grad_output, input_shapes[0]);  // dL/da = grad_output
    if (needs_input_grad(1)) grad_b = sum_to(grad_output, input_shapes[1]);  // dL/db = grad_output
    return {grad_a, grad_b};
  }
};

// ---- Sub: out = a - b --------------------------------------------------------------------
struct Sub final : Node {
  const char* name() const override { return "Sub"; }
  static Tensor forward(const Tensor& a, const Tensor& b) {
    Tensor out = binary_kernel(a, b, "sub", [](auto x, auto y) { return x - y; });
    if (any_requires_grad({&a, &b})) connect(std::make_shared<Sub>(), {&a, &b}, out);
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    Tensor grad_a, grad_b;
    if (needs_input_grad(0)) grad_a = sum_to(grad_output, input_shapes[0]);       // dL/da = grad_output
    if (needs_input_grad(1)) grad_b = neg(sum_to(grad_output, input_shapes[1]));  // dL/db = -grad_output
    return {grad_a, grad_b};
  }
};

// ---- Mul: out = a * b --------------------------------------------------------------------
// Saves: a and b (each one's gradient needs the other).
struct Mul final : Node {
  Tensor a, b;
  const char* name() const override { return "Mul"; }
  static Tensor forward(const Tensor& a, const Tensor& b) {
    Tensor out = binary_kernel(a, b, "mul", [](auto x, auto y) { return x * y; });
    if (any_requires_grad({&a, &b})) {
      auto node = std::make_shared<Mul>();
      if (b.requires_grad()) node->a = a.detach();
      if (a.requires_grad()) node->b = b.detach();
      connect(node, {&a, &b}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    Tensor grad_a, grad_b;
    if (needs_input_grad(0)) grad_a = sum_to(mul(grad_output, b), input_shapes[0]);  // dL/da = grad_output * b
    if (needs_input_grad(1)) grad_b = sum_to(mul(grad_output, a), input_shapes[1]);  // dL/db = grad_output * a
    return {grad_a, grad_b};
  }
  void release_saved() override { a = Tensor(); b = Tensor(); }
};

// ---- Div: out = a / b --------------------------------------------------------------------
// Saves: a and b.
struct Div final : Node {
  Tensor a, b;
  const char* name() const override { return "Div"; }
  static Tensor forward(const Tensor& a, const Tensor& b) {
    Tensor out = binary_kernel(a, b, "div", [](auto x, auto y) { return x / y; });
    if (any_requires_grad({&a, &b})) {
      auto node = std::make_shared<Div>();
      node->a = a.detach();
      node->b = b.detach();
      connect(node, {&a, &b}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    Tensor grad_a, grad_b;
    if (needs_input_grad(0)) grad_a = sum_to(div(grad_output, b), input_shapes[0]);  // dL/da = grad_output / b
    if (needs_input_grad(1))                                                         // dL/db = -grad_output a / b^2
      grad_b = sum_to(neg(div(mul(grad_output, a), mul(b, b))), input_shapes[1]);
    return {grad_a, grad_b};
  }
  void release_saved() override { a = Tensor(); b = Tensor(); }
};

Tensor add(const Tensor& a, const Tensor& b) { return Add::forward(a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return Sub::forward(a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return Mul::forward(a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return Div::forward(a, b); }

Tensor add(const Tensor& a, double b) { return Add::forward(a, scalar_tensor(b, a.dtype())); }
Tensor sub(const Tensor& a, double b) { return Sub::forward(a, scalar_tensor(b, a.dtype())); }
Tensor mul(const Tensor& a, double b) { return Mul::forward(a, scalar_tensor(b, a.dtype())); }
Tensor div(const Tensor& a, double b) { return Div::forward(a, scalar_tensor(b, a.dtype())); }

}  // namespace sf
