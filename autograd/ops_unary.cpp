// Unary element-wise ops: neg, pow (scalar exponent), exp, log, sqrt, tanh, relu, gelu, sigmoid.
//
// x: any shape -> out: same shape. Each op is a struct with its math as two named functions,
// side by side with the forward and backward that use them:
//
//     static T value(T x)             y = f(x), one element
//     static T derivative(T x, T y)   dy/dx at that element, from the input x or the output y
//                                     (whichever the forward saved: the output where the
//                                     derivative is cheaper from it: exp, sqrt, tanh, relu, sigmoid)
//
// so `break sf::Relu::derivative` in gdb stops on the formula. The loops over the elements are
// unary_forward_kernel and unary_backward_kernel below; backward computes
// grad_x[i] = grad_output[i] * derivative(x[i], y[i]).
#include <cmath>

#include "autograd/exercise.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {
// out[i] = Op::value(x[i], params...); the result is contiguous. params: Pow's exponent.
template <class Op, class... Params>
Tensor unary_forward_kernel(const Tensor& x, const char* op, Params... params) {
  check_float(x, op);
  Tensor xc = contiguous(x.detach());
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = xc.data<T>();
    T* po = out.data<T>();
    const std::int64_t n = out.numel();
#pragma omp parallel for if (n > kParallelMinElements)
    for (std::int64_t i = 0; i < n; ++i) po[i] = static_cast<T>(Op::value(px[i], params...));
  });
  return out;
}

// grad_x[i] = grad_output[i] * Op::derivative(x[i], y[i], params...), from the saved input x
// and/or output y (an undefined one reads as 0). -> grad_x: contiguous, the saved tensor's shape.
template <class Op, class... Params>
Tensor unary_backward_kernel(const Tensor& grad_output, const Tensor& x, const Tensor& y, Params... params) {
  const Tensor& ref = x.defined() ? x : y;
  Tensor grad_output_c = contiguous(grad_output), xc = x.defined() ? contiguous(x) : x,
         yc = y.defined() ? contiguous(y) : y;
  Tensor out = empty(ref.shape(), ref.dtype());
  dispatch_float(ref.dtype(), "unary backward", [&](auto tag) {
    using T = decltype(tag);
    const T* p_grad_output = grad_output_c.template data<T>();
    const T* px = xc.defined() ? xc.template data<T>() : nullptr;
    const T* py = yc.defined() ? yc.template data<T>() : nullptr;
    T* po = out.data<T>();
    const std::int64_t n = out.numel();
#pragma omp parallel for if (n > kParallelMinElements)
    for (std::int64_t i = 0; i < n; ++i)
      po[i] = static_cast<T>(p_grad_output[i] * Op::derivative(px ? px[i] : T(0), py ? py[i] : T(0), params...));
  });
  return out;
}
}  // namespace

// ---- Neg: y = -x; grad_x = -grad_output. Saves: nothing. ----------------------------------
struct Neg final : Node {
  const char* name() const override { return "Neg"; }
  template <class T>
  static T value(T x) { return -x; }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_forward_kernel<Neg>(x, "neg");
    if (any_requires_grad({&x})) connect(std::make_shared<Neg>(), {&x}, out);
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override { return {neg(grad_output)}; }
};

// ---- Pow: y = x^p; grad_x = grad_output * p * x^(p-1). Saves: x and p. ---------------------
struct Pow final : Node {
  Tensor x;
  double p = 1;
  const char* name() const override { return "Pow"; }
  template <class T>
  static T value(T x, double p) { return std::pow(x, static_cast<T>(p)); }
  static Tensor forward(const Tensor& x, double p) {
    Tensor out = unary_forward_kernel<Pow>(x, "pow", p);
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Pow>();
      node->x = x.detach();
      node->p = p;
      connect(node, {&x}, out);
    }
    return out;
  }
  // dy/dx = p x^(p-1) (0 for p = 0, also at x = 0)
  template <class T>
  static T derivative(T x, T /*y*/, double p) {
    return p == 0 ? T(0) : static_cast<T>(p) * std::pow(x, static_cast<T>(p - 1));
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {unary_backward_kernel<Pow>(grad_output, x, Tensor(), p)};
  }
  void release_saved() override { x = Tensor(); }
};

// ---- Exp: y = e^x; grad_x = grad_output * y. Saves: the output y. -------------------------
struct Exp final : Node {
  Tensor y;
  const char* name() const override { return "Exp"; }
  template <class T>
  static T value(T x) { return std::exp(x); }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_forward_kernel<Exp>(x, "exp");
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Exp>();
      node->y = out.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  template <class T>
  static T derivative(T /*x*/, T y) { return y; }  // dy/dx = e^x = y
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {unary_backward_kernel<Exp>(grad_output, Tensor(), y)};
  }
  void release_saved() override { y = Tensor(); }
};

// ---- Log: y = ln x; grad_x = grad_output / x. Saves: x. -----------------------------------
struct Log final : Node {
  Tensor x;
  const char* name() const override { return "Log"; }
  template <class T>
  static T value(T x) { return std::log(x); }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_forward_kernel<Log>(x, "log");
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Log>();
      node->x = x.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  template <class T>
  static T derivative(T x, T /*y*/) { return 1 / x; }  // dy/dx = 1 / x
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {unary_backward_kernel<Log>(grad_output, x, Tensor())};
  }
  void release_saved() override { x = Tensor(); }
};

// ---- Sqrt: y = sqrt x; grad_x = grad_output / (2 y). Saves: the output y. -----------------
struct Sqrt final : Node {
  Tensor y;
  const char* name() const override { return "Sqrt"; }
  template <class T>
  static T value(T x) { return std::sqrt(x); }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_forward_kernel<Sqrt>(x, "sqrt");
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Sqrt>();
      node->y = out.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  template <class T>
  static T derivative(T /*x*/, T y) { return 1 / (2 * y); }  // dy/dx = 1 / (2 sqrt x)
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {unary_backward_kernel<Sqrt>(grad_output, Tensor(), y)};
  }
  void release_saved() override { y = Tensor(); }
};

// ---- Tanh: y = tanh x; grad_x = grad_output * (1 - y^2). Saves: the output y. -------------
struct Tanh final : Node {
  Tensor y;
  const char* name() const override { return "Tanh"; }
  template <class T>
  static T value(T x) { return std::tanh(x); }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_forward_kernel<Tanh>(x, "tanh");
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Tanh>();
      node->y = out.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  template <class T>
  static T derivative(T /*x*/, T y) { return 1 - y * y; }  // dy/dx = 1 - tanh^2 x
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {unary_backward_kernel<Tanh>(grad_output, Tensor(), y)};
  }
  void release_saved() override { y = Tensor(); }
};

// ---- Relu: y = max(x, 0); grad_x = grad_output where x > 0, else 0. Saves: the output y. ---
struct Relu final : Node {
  Tensor y;
  const char* name() const override { return "Relu"; }
  template <class T>
  static T value(T x) { return x > 0 ? x : T(0); }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_forward_kernel<Relu>(x, "relu");
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Relu>();
      node->y = out.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  template <class T>
  static T derivative(T /*x*/, T y) {
    // EXERCISE(relu): dy/dx of y = max(x, 0) at one element, from the saved output y (x is not saved).
    // BEGIN SOLUTION
    return y > 0 ? T(1) : T(0);  // dy/dx = 1 where x > 0 (y > 0)
    // END SOLUTION
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    // EXERCISE(relu): return {grad_x}, grad_x = grad_output * derivative(x, y) element by element, x's
    // shape (unary_backward_kernel<Relu> runs that loop; only the output y was saved).
    // BEGIN SOLUTION
    return {unary_backward_kernel<Relu>(grad_output, Tensor(), y)};
    // END SOLUTION
  }
  void release_saved() override { y = Tensor(); }
};

// ---- Gelu (exact): y = x Phi(x), Phi the standard normal CDF.
// grad_x = grad_output * (Phi(x) + x phi(x)), phi(x) = exp(-x^2/2) / sqrt(2 pi). Saves: x. --
struct Gelu final : Node {
  Tensor x;
  const char* name() const override { return "Gelu"; }
  template <class T>
  static T value(T x) { return static_cast<T>(0.5) * x * (1 + std::erf(x * static_cast<T>(M_SQRT1_2))); }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_forward_kernel<Gelu>(x, "gelu");
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Gelu>();
      node->x = x.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  // dy/dx = Phi(x) + x phi(x)
  template <class T>
  static T derivative(T x, T /*y*/) {
    const T cdf = static_cast<T>(0.5) * (1 + std::erf(x * static_cast<T>(M_SQRT1_2)));
    const T pdf = std::exp(static_cast<T>(-0.5) * x * x) * static_cast<T>(0.5 * M_2_SQRTPI * M_SQRT1_2);
    return cdf + x * pdf;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {unary_backward_kernel<Gelu>(grad_output, x, Tensor())};
  }
  void release_saved() override { x = Tensor(); }
};

// ---- Sigmoid: y = 1 / (1 + e^-x); grad_x = grad_output * y (1 - y). Saves: the output y. ---
struct Sigmoid final : Node {
  Tensor y;
  const char* name() const override { return "Sigmoid"; }
  template <class T>
  static T value(T x) { return 1 / (1 + std::exp(-x)); }
  static Tensor forward(const Tensor& x) {
    Tensor out = unary_forward_kernel<Sigmoid>(x, "sigmoid");
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Sigmoid>();
      node->y = out.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  template <class T>
  static T derivative(T /*x*/, T y) { return y * (1 - y); }  // dy/dx = sigmoid(x) (1 - sigmoid(x))
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {unary_backward_kernel<Sigmoid>(grad_output, Tensor(), y)};
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
