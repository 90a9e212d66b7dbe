// The fused linear op (autograd/ops_linear.cpp): y = x @ weight^T + bias in one node and one BLAS
// call, checked against the composition it replaces, add(matmul(x, transpose(weight)), bias),
// in values and gradients; float64 gradient checks; the threaded float32 path; errors.
// Tags: [linear] on all; [reference] against the composition; [grad] on gradient checks.
#include "autograd/node.h"
#include "test_util.h"

using namespace sf;
using Catch::Matchers::Contains;

namespace {

// The reference: the three ops nn::Linear used before the fused op.
Tensor linear_composed(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor y = matmul(x, transpose(w, 0, 1));
  return b.defined() ? add(y, b) : y;
}

// Values and all three gradients (of sum(y * r), r random) of the fused op and the composition.
void require_same_as_composed(const Shape& x_shape, std::int64_t out, bool with_bias, Dtype dtype, double tol) {
  Generator gen(7);
  const std::int64_t in = x_shape.back();
  Shape y_shape = x_shape;
  y_shape.back() = out;
  const Tensor x0 = randn(x_shape, gen, dtype), w0 = randn({out, in}, gen, dtype), b0 = randn({out}, gen, dtype);
  const Tensor r = randn(y_shape, gen, dtype);
  auto run = [&](bool fused) {
    Tensor x = x0.detach().clone().requires_grad_(), w = w0.detach().clone().requires_grad_();
    Tensor b = with_bias ? b0.detach().clone().requires_grad_() : Tensor();
    Tensor y = fused ? linear(x, w, b) : linear_composed(x, w, b);
    sum(mul(y, r)).backward();
    return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), with_bias ? b.grad() : Tensor()};
  };
  const std::vector<Tensor> fused = run(true), composed = run(false);
  CHECK(test::max_abs_diff(fused[0], composed[0]) <= tol);  // y
  CHECK(test::max_abs_diff(fused[1], composed[1]) <= tol);  // grad x
  CHECK(test::max_abs_diff(fused[2], composed[2]) <= tol);  // grad weight
  if (with_bias) CHECK(test::max_abs_diff(fused[3], composed[3]) <= tol);  // grad bias
}

}  // namespace

TEST_CASE("linear equals matmul with the transposed weight plus bias", "[linear][reference]") {
  // float64: both ways sum the same products, only the order (BLAS blocking) may differ
  require_same_as_composed({2, 3, 5}, 4, /*with_bias=*/true, Dtype::Float64, test::kFloat64Tol);
  require_same_as_composed({6, 5}, 4, /*with_bias=*/false, Dtype::Float64, test::kFloat64Tol);
  require_same_as_composed({1, 1, 1, 3}, 1, /*with_bias=*/true, Dtype::Float64, test::kFloat64Tol);
}

TEST_CASE("linear in float32 on the threaded path matches the composition", "[linear][reference]") {
  // 160 x 96 x 64 = 983k multiply-adds: above kGemmParallelMinMacs, so sf::gemm cuts the
  // product into row blocks (gemm_blocks) and shares them out over the threads. float32 sums of
  // 64..160 terms of N(0,1) products (|sum| ~ 10) differ between summation orders by
  // ~K * 2^-24 * 10 ~ 1e-4; 1e-3 is that with margin, while a missing bias or a wrong row is off
  // by O(1).
  constexpr double kFloat32SumTol = 1e-3;
  require_same_as_composed({2, 80, 64}, 96, /*with_bias=*/true, Dtype::Float32, kFloat32SumTol);
}

TEST_CASE("linear gradcheck with and without bias", "[linear][grad]") {
  Generator gen(3);
  const Tensor x = test::grad_input({2, 3, 4}, gen), w = test::grad_input({5, 4}, gen), b = test::grad_input({5}, gen);
  test::require_gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
  test::require_gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); }, {x, w});
  // a non-contiguous x (a transposed view) is read correctly, and gets its gradient in its shape
  const Tensor xt = test::grad_input({4, 3}, gen);
  test::require_gradcheck([](const std::vector<Tensor>& in) { return linear(transpose(in[0], 0, 1), in[1], in[2]); },
                          {xt, w, b});
}

TEST_CASE("linear names the shapes that do not fit", "[linear]") {
  const Tensor x = zeros({2, 3}), w = zeros({4, 3}), b = zeros({4});
  REQUIRE_THROWS_WITH(linear(zeros({2, 5}), w, b), Contains("expected x of shape (..., 3)") && Contains("(2, 5)"));
  REQUIRE_THROWS_WITH(linear(x, w, zeros({3})), Contains("expected bias of shape (4,)") && Contains("got (3,)"));
  REQUIRE_THROWS_WITH(linear(x, zeros({4, 3, 1}), b), Contains("expected weight of shape (out, in)"));
  REQUIRE_THROWS_WITH(linear(x, zeros({4, 3}, Dtype::Float64), b), Contains("linear"));
  REQUIRE(linear(x, w, b).shape() == Shape{2, 4});
}
