// Fused softmax and log_softmax over one dim, forward and backward written out.
//
// Layout: the input is copied to row-major and seen as (outer, n, inner), where n is the size
// of the softmax dim, outer the product of the sizes before it and inner the product of the
// sizes after it. Element (o, j, i) sits at o*n*inner + j*inner + i, so one "row" (the n values
// softmax normalises together) is (o, ., i) with stride `inner`.
//
// Numerics: each row subtracts its max m before exponentiating, so exp never overflows (logits
// of 1000 are fine) and the largest term of the sum is exactly 1:
//   softmax:      y_j = exp(x_j - m) / s,       s = sum_k exp(x_k - m)
//   log_softmax:  y_j = x_j - m - log(s)
//
// Fully masked rows: a row whose entries are all -inf (attention with every key masked out, e.g.
// a padding query) has m = -inf and x - m = NaN. We define its softmax as all zeros (the row
// attends to nothing) and its log_softmax as all -inf (= log 0). The attention layer relies on
// the zeros: a padded query position then outputs 0 instead of poisoning the batch with NaN.
// The backward formulas below, applied to those outputs, give a zero gradient for softmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/exercise.h"
#include "autograd/fast.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// The (outer, n, inner) view of `shape` around dim d (a 0-d tensor is one row of length 1).
struct RowLayout {
  std::int64_t outer = 1, n = 1, inner = 1;
};

RowLayout row_layout(const Shape& shape, std::int64_t d) {
  RowLayout l;
  if (shape.empty()) return l;
  for (std::int64_t k = 0; k < d; ++k) l.outer *= shape[k];
  l.n = shape[d];
  for (std::int64_t k = d + 1; k < static_cast<std::int64_t>(shape.size()); ++k) l.inner *= shape[k];
  return l;
}

// y = softmax(x) (or log_softmax when `log`) along the middle axis of (outer, n, inner).
// x, y: contiguous, outer*n*inner elements.
template <class T>
void softmax_forward_kernel(const T* x, T* y, RowLayout l, bool log) {
  const std::int64_t rows = l.outer * l.inner;
#pragma omp parallel for if (rows * l.n > kParallelMinElements)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t base = (r / l.inner) * l.n * l.inner + r % l.inner;  // element (o, 0, i)
    T m = -std::numeric_limits<T>::infinity();
    for (std::int64_t j = 0; j < l.n; ++j) m = std::max(m, x[base + j * l.inner]);
    if (m == -std::numeric_limits<T>::infinity()) {  // fully masked row: softmax 0, log_softmax -inf
      const T fill = log ? -std::numeric_limits<T>::infinity() : T(0);
      for (std::int64_t j = 0; j < l.n; ++j) y[base + j * l.inner] = fill;
      continue;
    }
    // The row in double, each output rounded to T once: float32 rows of 32k terms stay accurate.
    double s = 0;
    for (std::int64_t j = 0; j < l.n; ++j) s += std::exp(static_cast<double>(x[base + j * l.inner]) - m);
    const double log_s = std::log(s);
    for (std::int64_t j = 0; j < l.n; ++j) {
      const double x_minus_m = static_cast<double>(x[base + j * l.inner]) - m;
      y[base + j * l.inner] = static_cast<T>(log ? x_minus_m - log_s : std::exp(x_minus_m) / s);
    }
  }
}

// grad_x from the saved output y and grad_output (all contiguous, (outer, n, inner)):
//   softmax:      grad_x_j = y_j * (grad_output_j - sum_k grad_output_k y_k)
//   log_softmax:  grad_x_j = grad_output_j - exp(y_j) * sum_k grad_output_k   (exp(y) is the softmax)
template <class T>
void softmax_backward_kernel(const T* y, const T* grad_output, T* gx, RowLayout l, bool log) {
  // EXERCISE(softmax): grad_x of softmax (log == false) and of log_softmax (log == true) for each
  // row (o, ., i) of the (outer, n, inner) layout (element (o, j, i) at o*n*inner + j*inner + i),
  // with the formulas above: one pass for the row's sum (in double), one to write gx (in double,
  // rounded to T once).
  // BEGIN SOLUTION
  const std::int64_t rows = l.outer * l.inner;
#pragma omp parallel for if (rows * l.n > kParallelMinElements)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t base = (r / l.inner) * l.n * l.inner + r % l.inner;
    double dot = 0;  // softmax: sum grad_output*y; log_softmax: sum grad_output
    for (std::int64_t j = 0; j < l.n; ++j) {
      const std::int64_t e = base + j * l.inner;
      dot += log ? static_cast<double>(grad_output[e]) : static_cast<double>(grad_output[e]) * y[e];
    }
    for (std::int64_t j = 0; j < l.n; ++j) {  // in double, rounded to T once
      const std::int64_t e = base + j * l.inner;
      const double g = grad_output[e], yj = y[e];
      gx[e] = static_cast<T>(log ? g - std::exp(yj) * dot : yj * (g - dot));
    }
  }
  // END SOLUTION
}

// Shared forward: x any shape (non-contiguous allowed) -> out: same shape, contiguous.
Tensor softmax_forward(const Tensor& x, std::int64_t d, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  check_float(x, op);
  Tensor xc = contiguous(x.detach());
  Tensor out = empty(x.shape(), x.dtype());
  if (fast::kEnabled && fast::softmax(xc, out, d, log)) return out;
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    softmax_forward_kernel<T>(xc.data<T>(), out.data<T>(), row_layout(x.shape(), d), log);
  });
  return out;
}

// Shared backward: grad_output, y: the output's shape -> grad_x: the same shape.
Tensor softmax_backward(const Tensor& grad_output, const Tensor& y, std::int64_t d, bool log) {
  Tensor grad_output_c = contiguous(grad_output);
  Tensor grad_x = empty(y.shape(), y.dtype());
  if (fast::kEnabled && fast::softmax_backward(y, grad_output_c, grad_x, d, log)) return grad_x;
  dispatch_float(y.dtype(), log ? "log_softmax backward" : "softmax backward", [&](auto tag) {
    using T = decltype(tag);
    softmax_backward_kernel<T>(y.data<T>(), grad_output_c.data<T>(), grad_x.data<T>(), row_layout(y.shape(), d), log);
  });
  return grad_x;
}

}  // namespace

// ---- Softmax: y = exp(x - m) / sum(exp(x - m)) along dim --------------------------------
// x: (..., n, ...) -> y: same shape. Saves: the output y (contiguous) and the wrapped dim.
// Backward: grad_x = y * (grad_output - sum_dim(grad_output * y)).
struct Softmax final : Node {
  Tensor y;
  std::int64_t dim = 0;
  const char* name() const override { return "Softmax"; }
  static Tensor forward(const Tensor& x, std::int64_t dim) {
    const std::int64_t d = wrap_dim(dim, x.dim(), "softmax");
    Tensor out = softmax_forward(x, d, /*log=*/false);
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<Softmax>();
      node->y = out.detach();
      node->dim = d;
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {softmax_backward(grad_output, y, dim, /*log=*/false)};
  }
  void release_saved() override { y = Tensor(); }
};

// ---- LogSoftmax: y = x - m - log(sum(exp(x - m))) along dim ------------------------------
// x: (..., n, ...) -> y: same shape. Saves: the output y (contiguous) and the wrapped dim.
// Backward: grad_x = grad_output - softmax(x) * sum_dim(grad_output), with softmax(x) = exp(y).
struct LogSoftmax final : Node {
  Tensor y;
  std::int64_t dim = 0;
  const char* name() const override { return "LogSoftmax"; }
  static Tensor forward(const Tensor& x, std::int64_t dim) {
    const std::int64_t d = wrap_dim(dim, x.dim(), "log_softmax");
    Tensor out = softmax_forward(x, d, /*log=*/true);
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<LogSoftmax>();
      node->y = out.detach();
      node->dim = d;
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {softmax_backward(grad_output, y, dim, /*log=*/true)};
  }
  void release_saved() override { y = Tensor(); }
};

Tensor softmax(const Tensor& x, std::int64_t dim) { return Softmax::forward(x, dim); }
Tensor log_softmax(const Tensor& x, std::int64_t dim) { return LogSoftmax::forward(x, dim); }

}  // namespace sf
