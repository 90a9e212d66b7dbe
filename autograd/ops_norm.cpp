// Fused normalisation over the last dim: layer_norm and rms_norm, with forward and backward
// written out row by row as in llm.c's layernorm_forward / layernorm_backward.
//
// Letters: D the normalised width (x's last dim); N the number of rows, every leading dim of x
// flattened (x (B,T,D) is N = B*T rows of D). The kernels read x as a contiguous (N, D) array.
//
// Why fused: composed from primitives (mean, sub, pow, sqrt, div, mul, add) layer norm records
// about ten nodes and keeps several (N, D) intermediates alive for backward; fused it saves x
// and two numbers per row, and its backward is three short loops. The row statistics are
// accumulated in double even for float32 (a sum of D squares loses digits in float).
// tests/test_norm.cpp checks both ops against the same math composed from primitives.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/exercise.h"
#include "autograd/fast.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// x's shape without the last dim: the shape of the per-row statistics (mean, rstd, rrms).
Shape row_shape(const Shape& x_shape) { return Shape(x_shape.begin(), x_shape.end() - 1); }

// Checks x: (..., D) float with D >= 1, and eps >= 0.
void check_norm_input(const Tensor& x, double eps, const char* op) {
  check_float(x, op);
  SF_EXPECT(x.dim() >= 1 && x.shape().back() >= 1, op, ": expected x of shape (..., D) with D >= 1, got ", x.shape());
  SF_EXPECT(eps >= 0, op, ": expected eps >= 0, got ", std::to_string(eps));
}

// Checks that `param` (weight or bias) is (D) of x's dtype.
void check_norm_param(const Tensor& x, const Tensor& param, const char* param_name, const char* op) {
  const std::int64_t D = x.shape().back();
  SF_EXPECT(param.defined(), op, ": ", param_name, " is undefined; expected a tensor of shape (D) = ", Shape{D},
            " for x of shape ", x.shape());
  SF_EXPECT(param.shape() == Shape{D}, op, ": ", param_name, " must have shape (D) = ", Shape{D},
            " to match the last dim of x ", x.shape(), ", got ", param_name, " of shape ", param.shape());
  check_same_dtype(x, param, op);
}

// Converts double accumulators (one per column) to a (D) tensor of `dtype`.
Tensor column_tensor(const std::vector<double>& values, Dtype dtype) {
  return from_vector(values, Shape{static_cast<std::int64_t>(values.size())}, dtype);
}

// ---- layer norm kernels (the llm.c pair) ---------------------------------------------------

// x: (N, D), weight: (D), bias: (D) or null -> out: (N, D), mean, rstd: (N)
//   mean = sum_d x[d] / D,  var = sum_d (x[d] - mean)^2 / D  (biased, as torch),
//   rstd = 1 / sqrt(var + eps),  xhat = (x - mean) * rstd,  out = xhat * weight + bias
template <class T>
void layernorm_forward(T* out, double* mean, double* rstd, const T* x, const T* weight, const T* bias,
                       std::int64_t N, std::int64_t D, double eps) {
  // EXERCISE(layer_norm): for each of the N rows of x (D values): mean, the biased variance (divide
  // by D), rstd = 1 / sqrt(var + eps), out = (x - mean) * rstd * weight + bias (bias may be null);
  // store mean[n] and rstd[n] for backward. Accumulate the statistics in double (float32 too).
  // BEGIN SOLUTION
  for (std::int64_t n = 0; n < N; ++n) {
    const T* x_row = x + n * D;
    double m = 0;
    for (std::int64_t d = 0; d < D; ++d) m += x_row[d];
    m /= static_cast<double>(D);
    double var = 0;  // two passes: subtracting the mean first keeps the squares small
    for (std::int64_t d = 0; d < D; ++d) {
      const double diff = x_row[d] - m;
      var += diff * diff;
    }
    var /= static_cast<double>(D);
    const double s = 1.0 / std::sqrt(var + eps);
    T* out_row = out + n * D;
    for (std::int64_t d = 0; d < D; ++d) {
      const double xhat = (x_row[d] - m) * s;
      out_row[d] = static_cast<T>(xhat * weight[d] + (bias ? static_cast<double>(bias[d]) : 0.0));
    }
    mean[n] = m;
    rstd[n] = s;
  }
  // END SOLUTION
}

// grad_output, x: (N, D), weight: (D), mean, rstd: (N) -> dx: (N, D) (if not null),
// dweight, dbias: (D) sums (if not null). With dxhat = grad_output * weight:
//   dx = rstd * (dxhat - mean_d(dxhat) - xhat * mean_d(dxhat * xhat))
//   dweight = sum_n grad_output * xhat,  dbias = sum_n grad_output
// (the two means are the gradient through the row's mean and through its rstd).
template <class T>
void layernorm_backward(T* dx, double* dweight, double* dbias, const T* grad_output, const T* x, const T* weight,
                        const double* mean, const double* rstd, std::int64_t N, std::int64_t D) {
  // EXERCISE(layer_norm): the gradients of out = xhat * weight + bias, xhat = (x - mean) * rstd, per
  // row of D values: with dxhat = grad_output * weight, dx = rstd * (dxhat - the row mean of dxhat -
  // xhat * the row mean of dxhat * xhat) (the two means: the paths through mean and through rstd);
  // dweight (+)= sum over rows of grad_output * xhat, dbias (+)= sum over rows of grad_output. Each
  // of dx, dweight, dbias may be null (not wanted). Sum in double.
  // BEGIN SOLUTION
  if (dx) {
    for (std::int64_t n = 0; n < N; ++n) {
      const T* grad_output_row = grad_output + n * D;
      const T* x_row = x + n * D;
      double dxhat_mean = 0, dxhat_xhat_mean = 0;
      for (std::int64_t d = 0; d < D; ++d) {
        const double xhat = (x_row[d] - mean[n]) * rstd[n];
        const double dxhat = static_cast<double>(grad_output_row[d]) * weight[d];
        dxhat_mean += dxhat;
        dxhat_xhat_mean += dxhat * xhat;
      }
      dxhat_mean /= static_cast<double>(D);
      dxhat_xhat_mean /= static_cast<double>(D);
      T* dx_row = dx + n * D;
      for (std::int64_t d = 0; d < D; ++d) {
        const double xhat = (x_row[d] - mean[n]) * rstd[n];
        const double dxhat = static_cast<double>(grad_output_row[d]) * weight[d];
        dx_row[d] = static_cast<T>(rstd[n] * (dxhat - dxhat_mean - xhat * dxhat_xhat_mean));
      }
    }
  }
  if (dweight || dbias) {
    for (std::int64_t n = 0; n < N; ++n) {  // sums over rows
      const T* grad_output_row = grad_output + n * D;
      const T* x_row = x + n * D;
      for (std::int64_t d = 0; d < D; ++d) {
        if (dweight) dweight[d] += static_cast<double>(grad_output_row[d]) * (x_row[d] - mean[n]) * rstd[n];
        if (dbias) dbias[d] += grad_output_row[d];
      }
    }
  }
  // END SOLUTION
}

// ---- rms norm kernels ----------------------------------------------------------------------

// x: (N, D), weight: (D) -> out: (N, D), rrms: (N)
//   rrms = 1 / sqrt(sum_d x[d]^2 / D + eps),  out = x * rrms * weight
template <class T>
void rmsnorm_forward(T* out, double* rrms, const T* x, const T* weight, std::int64_t N, std::int64_t D, double eps) {
  // BEGIN RELATED(layer_norm): the same derivation as the exercise, without the mean
  for (std::int64_t n = 0; n < N; ++n) {
    const T* x_row = x + n * D;
    double ms = 0;
    for (std::int64_t d = 0; d < D; ++d) ms += static_cast<double>(x_row[d]) * x_row[d];
    ms /= static_cast<double>(D);
    const double r = 1.0 / std::sqrt(ms + eps);
    T* out_row = out + n * D;
    for (std::int64_t d = 0; d < D; ++d) out_row[d] = static_cast<T>(x_row[d] * r * weight[d]);
    rrms[n] = r;
  }
  // HANDOUT INSTEAD:
  // sf::exercise::not_implemented("layer_norm", __func__, __FILE__);  // RMSNorm is hidden with LayerNorm
  // END RELATED
}

// grad_output, x: (N, D), weight: (D), rrms: (N) -> dx: (N, D) (if not null), dweight: (D) sum
// (if not null). With xhat = x * rrms and dxhat = grad_output * weight:
//   dx = rrms * (dxhat - xhat * mean_d(dxhat * xhat)),  dweight = sum_n grad_output * xhat
// (d rrms / d x[j] = -rrms^3 x[j] / D gives the second term.)
template <class T>
void rmsnorm_backward(T* dx, double* dweight, const T* grad_output, const T* x, const T* weight, const double* rrms,
                      std::int64_t N, std::int64_t D) {
  // BEGIN RELATED(layer_norm): the same derivation as the exercise, without the mean
  if (dx) {
    for (std::int64_t n = 0; n < N; ++n) {
      const T* grad_output_row = grad_output + n * D;
      const T* x_row = x + n * D;
      double dxhat_xhat_mean = 0;
      for (std::int64_t d = 0; d < D; ++d)
        dxhat_xhat_mean += static_cast<double>(grad_output_row[d]) * weight[d] * x_row[d] * rrms[n];
      dxhat_xhat_mean /= static_cast<double>(D);
      T* dx_row = dx + n * D;
      for (std::int64_t d = 0; d < D; ++d) {
        const double xhat = x_row[d] * rrms[n];
        const double dxhat = static_cast<double>(grad_output_row[d]) * weight[d];
        dx_row[d] = static_cast<T>(rrms[n] * (dxhat - xhat * dxhat_xhat_mean));
      }
    }
  }
  if (dweight) {  // sum over rows
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t d = 0; d < D; ++d) dweight[d] += static_cast<double>(grad_output[n * D + d]) * x[n * D + d] * rrms[n];
  }
  // HANDOUT INSTEAD:
  // sf::exercise::not_implemented("layer_norm", __func__, __FILE__);  // RMSNorm is hidden with LayerNorm
  // END RELATED
}

}  // namespace

// ---- LayerNorm ------------------------------------------------------------------------------
// x: (..., D), weight: (D), bias: (D) or undefined -> out: (..., D)
// Saves: x (contiguous, detached), weight, and per row mean and rstd (float64, shape x.shape
// without the last dim), so backward never recomputes the statistics.
struct LayerNorm final : Node {
  Tensor x;       // (..., D)
  Tensor weight;  // (D)
  Tensor mean;    // (...) float64
  Tensor rstd;    // (...) float64: 1 / sqrt(var + eps)
  const char* name() const override { return "LayerNorm"; }

  static Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
    check_norm_input(x, eps, "layer_norm");
    check_norm_param(x, weight, "weight", "layer_norm");
    if (bias.defined()) check_norm_param(x, bias, "bias", "layer_norm");
    const std::int64_t D = x.shape().back(), N = x.numel() / D;
    Tensor xc = contiguous(x.detach()), wc = contiguous(weight.detach());
    Tensor bc = bias.defined() ? contiguous(bias.detach()) : Tensor();
    Tensor out = empty(x.shape(), x.dtype());
    Tensor mean = empty(row_shape(x.shape()), Dtype::Float64), rstd = empty(row_shape(x.shape()), Dtype::Float64);
    dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
      using T = decltype(tag);
      const T* b = bc.defined() ? bc.data<T>() : nullptr;
      if constexpr (std::is_same_v<T, float>)  // the fast kernel, when one applies (autograd/fast.h)
        if (fast::kEnabled && fast::layernorm_forward(out.data<T>(), mean.data<double>(), rstd.data<double>(),
                                                      xc.data<T>(), wc.data<T>(), b, N, D, eps))
          return;
      layernorm_forward<T>(out.data<T>(), mean.data<double>(), rstd.data<double>(), xc.data<T>(), wc.data<T>(), b, N,
                           D, eps);
    });
    if (any_requires_grad({&x, &weight, &bias})) {
      auto node = std::make_shared<LayerNorm>();
      node->x = xc;
      node->weight = wc;
      node->mean = mean;
      node->rstd = rstd;
      connect(node, {&x, &weight, &bias}, out);
    }
    return out;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const std::int64_t D = x.shape().back(), N = x.numel() / D;
    Tensor grad_output_c = contiguous(grad_output);
    Tensor grad_x = needs_input_grad(0) ? empty(x.shape(), x.dtype()) : Tensor();
    std::vector<double> grad_w(needs_input_grad(1) ? D : 0, 0.0), grad_b(needs_input_grad(2) ? D : 0, 0.0);
    dispatch_float(x.dtype(), "layer_norm backward", [&](auto tag) {
      using T = decltype(tag);
      T* dx = grad_x.defined() ? grad_x.data<T>() : nullptr;
      double* dw = grad_w.empty() ? nullptr : grad_w.data();
      double* db = grad_b.empty() ? nullptr : grad_b.data();
      if constexpr (std::is_same_v<T, float>)
        if (fast::kEnabled && fast::layernorm_backward(dx, dw, db, grad_output_c.data<T>(), x.data<T>(),
                                                       weight.data<T>(), mean.data<double>(), rstd.data<double>(), N, D))
          return;
      layernorm_backward<T>(dx, dw, db, grad_output_c.data<T>(), x.data<T>(), weight.data<T>(), mean.data<double>(),
                            rstd.data<double>(), N, D);
    });
    return {grad_x, grad_w.empty() ? Tensor() : column_tensor(grad_w, x.dtype()),
            grad_b.empty() ? Tensor() : column_tensor(grad_b, x.dtype())};
  }

  void release_saved() override { x = weight = mean = rstd = Tensor(); }
};

// ---- RMSNorm --------------------------------------------------------------------------------
// x: (..., D), weight: (D) -> out: (..., D)
// Saves: x (contiguous, detached), weight, and per row rrms = 1 / sqrt(mean(x^2) + eps)
// (float64, shape x.shape without the last dim).
struct RMSNorm final : Node {
  Tensor x;       // (..., D)
  Tensor weight;  // (D)
  Tensor rrms;    // (...) float64
  const char* name() const override { return "RMSNorm"; }

  static Tensor forward(const Tensor& x, const Tensor& weight, double eps) {
    check_norm_input(x, eps, "rms_norm");
    check_norm_param(x, weight, "weight", "rms_norm");
    const std::int64_t D = x.shape().back(), N = x.numel() / D;
    Tensor xc = contiguous(x.detach()), wc = contiguous(weight.detach());
    Tensor out = empty(x.shape(), x.dtype());
    Tensor rrms = empty(row_shape(x.shape()), Dtype::Float64);
    dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float>)
        if (fast::kEnabled && fast::rmsnorm_forward(out.data<T>(), rrms.data<double>(), xc.data<T>(), wc.data<T>(), N, D,
                                                    eps))
          return;
      rmsnorm_forward<T>(out.data<T>(), rrms.data<double>(), xc.data<T>(), wc.data<T>(), N, D, eps);
    });
    if (any_requires_grad({&x, &weight})) {
      auto node = std::make_shared<RMSNorm>();
      node->x = xc;
      node->weight = wc;
      node->rrms = rrms;
      connect(node, {&x, &weight}, out);
    }
    return out;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const std::int64_t D = x.shape().back(), N = x.numel() / D;
    Tensor grad_output_c = contiguous(grad_output);
    Tensor grad_x = needs_input_grad(0) ? empty(x.shape(), x.dtype()) : Tensor();
    std::vector<double> grad_w(needs_input_grad(1) ? D : 0, 0.0);
    dispatch_float(x.dtype(), "rms_norm backward", [&](auto tag) {
      using T = decltype(tag);
      T* dx = grad_x.defined() ? grad_x.data<T>() : nullptr;
      double* dw = grad_w.empty() ? nullptr : grad_w.data();
      if constexpr (std::is_same_v<T, float>)
        if (fast::kEnabled && fast::rmsnorm_backward(dx, dw, grad_output_c.data<T>(), x.data<T>(), weight.data<T>(),
                                                     rrms.data<double>(), N, D))
          return;
      rmsnorm_backward<T>(dx, dw, grad_output_c.data<T>(), x.data<T>(), weight.data<T>(), rrms.data<double>(), N, D);
    });
    return {grad_x, grad_w.empty() ? Tensor() : column_tensor(grad_w, x.dtype())};
  }

  void release_saved() override { x = weight = rrms = Tensor(); }
};

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return LayerNorm::forward(x, weight, bias, eps);
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) { return RMSNorm::forward(x, weight, eps); }

}  // namespace sf
