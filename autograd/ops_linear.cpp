// Linear: y = x @ weight^T + bias, as one op (nn::Linear's forward).
//
// The same function as the three-op composition
//     add(matmul(x, transpose(weight, 0, 1)), bias)      (Permute -> MatMul -> Add)
// which tests/test_linear.cpp checks it against, values and gradients. Fused, it makes one node
// instead of three, and the bias costs no pass of its own: the output starts as the bias (each
// row a copy of it) and BLAS adds the product on top (beta = 1), so no second (R, out) tensor is
// allocated, read and written by a separate Add. The fast kernel (fast::linear, autograd/fast.h)
// computes the same product in blocks over the threads, in bf16 when asked, and from weights
// packed once while a model decodes.
//
// Shapes: x (..., in), weight (out, in), bias (out) or undefined -> y (..., out).
// R = the product of x's leading dims; X = x seen as (R, in), Y = y as (R, out).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "autograd/exercise.h"
#include "autograd/fast.h"
#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace sf {

namespace {

// The plain kernel: Y (R, out) = bias, each row (or 0 without a bias); then Y += X @ W^T, one
// BLAS call that reads W (stored (out, in)) transposed and adds the product to what Y holds.
template <class T>
void linear_forward_kernel(const T* x, const T* w, const T* bias, T* y, std::int64_t rows, std::int64_t in,
                           std::int64_t out) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < out; ++j) y[r * out + j] = bias ? bias[j] : T(0);
  blas_gemm(rows, out, in, x, w, y, /*accumulate=*/true, /*transpose_b=*/true);
}

void check_linear_args(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_float(x, "linear");
  check_same_dtype(x, weight, "linear");
  SF_EXPECT(weight.dim() == 2, "linear: expected weight of shape (out, in), got ", weight.shape());
  SF_EXPECT(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: expected x of shape (..., ", weight.size(1),
            ") for weight ", weight.shape(), ", got ", x.shape());
  if (bias.defined()) {
    check_same_dtype(x, bias, "linear");
    SF_EXPECT(bias.shape() == Shape{weight.size(0)}, "linear: expected bias of shape ", Shape{weight.size(0)},
              " for weight ", weight.shape(), ", got ", bias.shape());
  }
}

}  // namespace

// ---- Linear: y = x @ weight^T + bias ------------------------------------------------------
// Saves: X (R, in) if weight requires grad, weight if x requires grad; whether there is a bias.
// Backward, with G = grad_output = dL/dY seen as (R, out):
//   grad_x      = G @ weight          (R, out) @ (out, in) -> (R, in), reshaped to x's shape
//   grad_weight = G^T @ X             (out, R) @ (R, in)   -> (out, in)
//   grad_bias   = sum of G's rows                          -> (out)
struct Linear final : Node {
  Tensor x2d;     // (R, in), contiguous
  Tensor weight;  // (out, in)
  const char* name() const override { return "Linear"; }

  static Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    check_linear_args(x, weight, bias);
    const std::int64_t in = weight.size(1), out = weight.size(0), rows = x.numel() / std::max<std::int64_t>(in, 1);
    const Tensor x2d = contiguous(x.detach()).reshape({rows, in});  // a view of a contiguous x
    const Tensor w = contiguous(weight.detach());                     // parameters are contiguous: no copy
    const Tensor b = bias.defined() ? contiguous(bias.detach()) : Tensor();
    Shape out_shape = x.shape();
    out_shape.back() = out;
    Tensor y = empty(out_shape, x.dtype());
    if (in == 0) {  // a product of no terms: y is the bias alone
      if (b.defined()) y.copy_(b.expand(out_shape));
      else y.fill_(0.0);
    } else if (y.numel() > 0 && !(fast::kEnabled && fast::linear(x2d, w, b, weight, y))) {
      dispatch_float(x.dtype(), "linear", [&](auto tag) {
        using T = decltype(tag);
        linear_forward_kernel<T>(x2d.data<T>(), w.data<T>(), b.defined() ? b.data<T>() : nullptr, y.data<T>(), rows,
                                 in, out);
      });
    }
    const bool with_bias = bias.defined();
    if (with_bias ? any_requires_grad({&x, &weight, &bias}) : any_requires_grad({&x, &weight})) {
      auto node = std::make_shared<Linear>();
      if (weight.requires_grad()) node->x2d = x2d;
      if (x.requires_grad()) node->weight = w;
      if (with_bias) connect(node, {&x, &weight, &bias}, y);
      else connect(node, {&x, &weight}, y);
    }
    return y;
  }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    // EXERCISE(linear): y = x weight^T + bias with x: (..., in), weight: (out, in), bias: (out). See
    // grad_output as G: (R, out), R = every leading dim of x flattened, and return {grad_x, grad_weight,
    // grad_bias} (no grad_bias when there was no bias: input_shapes.size() == 2): grad_x = G times weight,
    // reshaped to x's shape; grad_weight = G transposed times the saved x2d: (R, in); grad_bias = the
    // sum of G's rows. Leave a gradient undefined where needs_input_grad(i) is false.
    // BEGIN SOLUTION
    const Shape& x_shape = input_shapes[0];
    const std::int64_t out = input_shapes[1][0], in = input_shapes[1][1];
    const std::int64_t rows = shape_numel(x_shape) / std::max<std::int64_t>(in, 1);
    const Tensor grad_output_2d = contiguous(grad_output).reshape({rows, out});  // G: (R, out)
    std::vector<Tensor> grads(input_shapes.size());
    if (needs_input_grad(0))  // grad_x = G @ W: (R, out) @ (out, in)
      grads[0] = matmul(grad_output_2d, weight).reshape(x_shape);
    if (needs_input_grad(1))  // grad_weight = G^T @ X: (out, R) @ (R, in); the transpose is a view
      grads[1] = matmul(transpose(grad_output_2d, 0, 1), x2d);
    if (input_shapes.size() == 3 && needs_input_grad(2))  // grad_bias = column sums of G: (out)
      grads[2] = sum(grad_output_2d, {0});
    return grads;
    // END SOLUTION
  }
  void release_saved() override { x2d = weight = Tensor(); }
};

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) { return Linear::forward(x, weight, bias); }

}  // namespace sf
