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
#include <type_traits>

#include "autograd/exercise.h"
#include "autograd/runtime/fast_exp.h"
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

// The float32 fast path for rows that are contiguous in memory (inner == 1: softmax over the
// last dim, as attention and the output layer use it). The same math as the general kernel
// below, with fast_exp (autograd/runtime/fast_exp.h, within 1 ulp of exp) and `omp simd` loops the
// compiler vectorises: the max and the sum are split over vector lanes and the lanes combined
// at the end, in an order fixed by the binary (each row on one thread: the same result for any
// thread count). The sum stays in double lanes, each float term converted.
// x, y: (rows, n) contiguous.
void softmax_forward_rows_f32(const float* x, float* y, std::int64_t rows, std::int64_t n, bool log) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
#pragma omp parallel for if (rows * n > kParallelMinElements)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float m = -kInf;
#pragma omp simd reduction(max : m)
    for (std::int64_t j = 0; j < n; ++j) m = xr[j] > m ? xr[j] : m;  // (a NaN is skipped, as by std::max)
    if (m == -kInf) {  // fully masked row: softmax 0, log_softmax -inf
      std::fill(yr, yr + n, log ? -kInf : 0.0f);
      continue;
    }
    // y holds exp(x - m) until the end (for log_softmax too), summed in double lanes.
    // (Two loops: GCC 12 does not vectorise fast_exp and a double sum in one.)
#pragma omp simd
    for (std::int64_t j = 0; j < n; ++j) yr[j] = fast_exp(xr[j] - m);
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t j = 0; j < n; ++j) s += yr[j];
    if (log) {
      const float log_s = static_cast<float>(std::log(s));
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) yr[j] = xr[j] - m - log_s;
    } else {
      const float inv_s = static_cast<float>(1.0 / s);
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) yr[j] *= inv_s;
    }
  }
}

// y = softmax(x) (or log_softmax when `log`) along the middle axis of (outer, n, inner).
// x, y: contiguous, outer*n*inner elements. The general (strided) path, with std::exp.
template <class T>
void softmax_forward_kernel(const T* x, T* y, RowLayout l, bool log) {
  if constexpr (std::is_same_v<T, float>) {
    if (l.inner == 1) {
      softmax_forward_rows_f32(x, y, l.outer, l.n, log);
      return;
    }
  }
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
    double s = 0;  // accumulated in double: float32 rows of 32k terms stay accurate
    if (log) {
      for (std::int64_t j = 0; j < l.n; ++j) s += std::exp(x[base + j * l.inner] - m);
      const T log_s = static_cast<T>(std::log(s));
      for (std::int64_t j = 0; j < l.n; ++j) y[base + j * l.inner] = x[base + j * l.inner] - m - log_s;
    } else {
      for (std::int64_t j = 0; j < l.n; ++j) {  // y holds exp(x - m) until divided by s
        y[base + j * l.inner] = std::exp(x[base + j * l.inner] - m);
        s += y[base + j * l.inner];
      }
      const T inv_s = static_cast<T>(1.0 / s);
      for (std::int64_t j = 0; j < l.n; ++j) y[base + j * l.inner] *= inv_s;
    }
  }
}

// The float32 fast path of the backward for contiguous rows (inner == 1), vectorised like
// softmax_forward_rows_f32. y, grad_output, gx: (rows, n) contiguous.
void softmax_backward_rows_f32(const float* y, const float* grad_output, float* gx, std::int64_t rows, std::int64_t n,
                               bool log) {
  // EXERCISE(softmax): the float32 path of softmax_backward_kernel below for contiguous rows of n
  // values (the same formulas; vectorise the two loops per row with `omp simd`).
  // BEGIN SOLUTION
#pragma omp parallel for if (rows * n > kParallelMinElements)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * n;
    const float* grad_output_row = grad_output + r * n;
    float* gxr = gx + r * n;
    double dot = 0;  // softmax: sum grad_output*y; log_softmax: sum grad_output (float products are exact in double)
    if (log) {
#pragma omp simd reduction(+ : dot)
      for (std::int64_t j = 0; j < n; ++j) dot += grad_output_row[j];
      const float c = static_cast<float>(dot);
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) gxr[j] = grad_output_row[j] - fast_exp(yr[j]) * c;
    } else {
#pragma omp simd reduction(+ : dot)
      for (std::int64_t j = 0; j < n; ++j) dot += static_cast<double>(grad_output_row[j]) * yr[j];
      const float c = static_cast<float>(dot);
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) gxr[j] = yr[j] * (grad_output_row[j] - c);
    }
  }
  // END SOLUTION
}

// grad_x from the saved output y and grad_output (all contiguous, (outer, n, inner)), the
// general (strided) path:
//   softmax:      grad_x_j = y_j * (grad_output_j - sum_k grad_output_k y_k)
//   log_softmax:  grad_x_j = grad_output_j - exp(y_j) * sum_k grad_output_k   (exp(y) is the softmax)
template <class T>
void softmax_backward_kernel(const T* y, const T* grad_output, T* gx, RowLayout l, bool log) {
  if constexpr (std::is_same_v<T, float>) {
    if (l.inner == 1) {
      softmax_backward_rows_f32(y, grad_output, gx, l.outer, l.n, log);
      return;
    }
  }
  // EXERCISE(softmax): grad_x of softmax (log == false) and of log_softmax (log == true) for each
  // row (o, ., i) of the (outer, n, inner) layout (element (o, j, i) at o*n*inner + j*inner + i),
  // with the formulas above: one pass for the row's sum (in double), one to write gx.
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
    const T c = static_cast<T>(dot);
    for (std::int64_t j = 0; j < l.n; ++j) {
      const std::int64_t e = base + j * l.inner;
      gx[e] = log ? grad_output[e] - std::exp(y[e]) * c : y[e] * (grad_output[e] - c);
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
