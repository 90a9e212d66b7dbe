// Unary element-wise ops: neg, pow (scalar exponent), exp, log, sqrt, tanh, relu, gelu, sigmoid.
//
// x: any shape -> out: same shape. Each backward multiplies the upstream gradient by the
// derivative, written with what the forward saved (the input, or the output where the
// derivative is cheaper from it: exp, sqrt, tanh, sigmoid).
#include <cmath>

#include "autograd/exercise.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {
// out[i] = f(x[i]); the result is contiguous.
template <class F>
Tensor unary_kernel(const Tensor& x, const char* op, F f) {
  check_float(x, op);
  Tensor xc = contiguous(x.detach());
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = xc.data<T>();
    T* po = out.data<T>();
    const std::int64_t n = out.numel();
#pragma omp parallel for if (n > 65536)
    for (std::int64_t i = 0; i < n; ++i) po[i] = static_cast<T>(f(px[i]));
  });
  return out;
}

// grad_x[i] = g[i] * d(x[i], y[i]) where d is the derivative from the saved input x / output y.
template <class F>
Tensor unary_backward(const Tensor& g, const Tensor& x, const Tensor& y, F d) {
  const Tensor& ref = x.defined() ? x : y;
  Tensor gc = contiguous(g), xc = x.defined() ? contiguous(x) : x, yc = y.defined() ? contiguous(y) : y;
  Tensor out = empty(ref.shape(), ref.dtype());
  dispatch_float(ref.dtype(), "unary backward", [&](auto tag) {
    using T = decltype(tag);
    const T* pg = gc.template data<T>();
    const T* px = xc.defined() ? xc.template data<T>() : nullptr;
    const T* py = yc.defined() ? yc.template data<T>() : nullptr;
    T* po = out.data<T>();
    const std::int64_t n = out.numel();
#pragma omp parallel for if (n > 65536)
    for (std::int64_t i = 0; i < n; ++i)
      po[i] = static_cast<T>(pg[i] * d(px ? px[i] : T(0), py ? py[i] : T(0)));
  });
  return out;
}
}  // namespace

// ---- Neg: out = -x; grad_x = -g. Saves: nothing. ------------------------------------------
struct Neg final : Node {
  const char* name() const override { return "Neg"; }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_kernel(x, "neg", [](auto v) { return -v; });
    if (any_requires_grad({&x})) connect(std::make_shared<Neg>(), {&x}, out);
    return out;
  }
  std::vector<Tensor> backward(const Tensor& g) override { return {neg(g)}; }
};

// ---- Pow: out = x^p; grad_x = g * p * x^(p-1). Saves: x and p. ----------------------------
struct Pow final : Node {
  Tensor x;
  double p = 1;
  const char* name() const override { return "Pow"; }
  static Tensor forward(const Tensor& x, double p) {
    Tensor out = unary_kernel(x, "pow", [p](auto v) { return std::pow(v, static_cast<decltype(v)>(p)); });
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Pow>();
      node->x = x.detach();
      node->p = p;
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& g) override {
    const double p_ = p;
    return {unary_backward(g, x, Tensor(), [p_](auto xv, auto) {
      using T = decltype(xv);
      return p_ == 0 ? T(0) : static_cast<T>(p_) * std::pow(xv, static_cast<T>(p_ - 1));
    })};
  }
  void release_saved() override { x = Tensor(); }
};

// ---- Exp: y = e^x; grad_x = g * y. Saves: the output y. -----------------------------------
struct Exp final : Node {
  Tensor y;
  const char* name() const override { return "Exp"; }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_kernel(x, "exp", [](auto v) { return std::exp(v); });
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Exp>();
      node->y = out.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& g) override {
    return {unary_backward(g, Tensor(), y, [](auto, auto yv) { return yv; })};
  }
  void release_saved() override { y = Tensor(); }
};

// ---- Log: y = ln x; grad_x = g / x. Saves: x. ---------------------------------------------
struct Log final : Node {
  Tensor x;
  const char* name() const override { return "Log"; }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_kernel(x, "log", [](auto v) { return std::log(v); });
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Log>();
      node->x = x.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& g) override {
    return {unary_backward(g, x, Tensor(), [](auto xv, auto) { return 1 / xv; })};
  }
  void release_saved() override { x = Tensor(); }
};

// ---- Sqrt: y = sqrt x; grad_x = g / (2 y). Saves: the output y. ---------------------------
struct Sqrt final : Node {
  Tensor y;
  const char* name() const override { return "Sqrt"; }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_kernel(x, "sqrt", [](auto v) { return std::sqrt(v); });
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Sqrt>();
      node->y = out.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& g) override {
    return {unary_backward(g, Tensor(), y, [](auto, auto yv) { return 1 / (2 * yv); })};
  }
  void release_saved() override { y = Tensor(); }
};

// ---- Tanh: y = tanh x; grad_x = g * (1 - y^2). Saves: the output y. -----------------------
struct Tanh final : Node {
  Tensor y;
  const char* name() const override { return "Tanh"; }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_kernel(x, "tanh", [](auto v) { return std::tanh(v); });
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Tanh>();
      node->y = out.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& g) override {
    return {unary_backward(g, Tensor(), y, [](auto, auto yv) { return 1 - yv * yv; })};
  }
  void release_saved() override { y = Tensor(); }
};

// ---- Relu: y = max(x, 0); grad_x = g where x > 0, else 0. Saves: the output y. -------------
struct Relu final : Node {
  Tensor y;
  const char* name() const override { return "Relu"; }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_kernel(x, "relu", [](auto v) { return v > 0 ? v : decltype(v)(0); });
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Relu>();
      node->y = out.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& g) override {
    SF_EXERCISE(Relu);  // exercise mode: see autograd/exercise.h
    return {unary_backward(g, Tensor(), y, [](auto, auto yv) { return yv > 0 ? decltype(yv)(1) : decltype(yv)(0); })};
  }
  void release_saved() override { y = Tensor(); }
};

// ---- Gelu (exact): y = x Phi(x), Phi the standard normal CDF.
// grad_x = g * (Phi(x) + x phi(x)), phi(x) = exp(-x^2/2) / sqrt(2 pi). Saves: x. ------------
struct Gelu final : Node {
  Tensor x;
  const char* name() const override { return "Gelu"; }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_kernel(x, "gelu", [](auto v) {
      using T = decltype(v);
      return static_cast<T>(0.5) * v * (1 + std::erf(v * static_cast<T>(M_SQRT1_2)));
    });
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Gelu>();
      node->x = x.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& g) override {
    return {unary_backward(g, x, Tensor(), [](auto xv, auto) {
      using T = decltype(xv);
      const T cdf = static_cast<T>(0.5) * (1 + std::erf(xv * static_cast<T>(M_SQRT1_2)));
      const T pdf = std::exp(static_cast<T>(-0.5) * xv * xv) * static_cast<T>(0.5 * M_2_SQRTPI * M_SQRT1_2);
      return cdf + xv * pdf;
    })};
  }
  void release_saved() override { x = Tensor(); }
};

// ---- Sigmoid: y = 1 / (1 + e^-x); grad_x = g * y (1 - y). Saves: the output y. ------------
struct Sigmoid final : Node {
  Tensor y;
  const char* name() const override { return "Sigmoid"; }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_kernel(x, "sigmoid", [](auto v) { return 1 / (1 + std::exp(-v)); });
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Sigmoid>();
      node->y = out.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& g) override {
    return {unary_backward(g, Tensor(), y, [](auto, auto yv) { return yv * (1 - yv); })};
  }
  void release_saved() override { y = Tensor(); }
};

Tensor neg(const Tensor& x) { return Neg::forward(x); }
Tensor pow(const Tensor& x, double exponent) { return Pow::forward(x, exponent); }
Tensor exp(const Tensor& x) { return Exp::forward(x); }
Tensor log(const Tensor& x) { return Log::forward(x); }
Tensor sqrt(const Tensor& x) { return Sqrt::forward(x); }
Tensor tanh(const Tensor& x) { return Tanh::forward(x); }
Tensor relu(const Tensor& x) { return Relu::forward(x); }
Tensor gelu(const Tensor& x) { return Gelu::forward(x); }
Tensor sigmoid(const Tensor& x) { return Sigmoid::forward(x); }

}  // namespace sf
