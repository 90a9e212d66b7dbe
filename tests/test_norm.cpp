// Fused layer_norm and rms_norm (autograd/ops_norm.cpp): gradient checks of x, weight and bias;
// the fused ops against the same math composed from primitives (values and gradients); the
// defining property (rows of mean 0 and variance 1, or root mean square 1); float32 against
// float64; error messages.
//
// Letters: D the normalised width (last dim), rows = every leading dim.
#include <cmath>
#include <string>

#include "autograd/node.h"
#include "test_util.h"

using namespace sf;
using sf::test::grad_input;
using sf::test::max_abs_diff;
using sf::test::require_gradcheck;

namespace {

// Fused vs composed in float64: the same formulas, summed in another order; each op rounds at
// ~1e-16 relative and values here are O(1), so 1e-12 leaves room without hiding a wrong term.
constexpr double kFusedVsComposedTol = 1e-12;
// float32 vs float64 of the same op on O(1) values: float32 rounds at ~6e-8 relative, and a
// gradient row sums D = 16 products; 1e-5 is far above that and far below any real mistake.
using sf::test::kFloat32Tol;  // 1e-5, tests/test_util.h
// Output row statistics in float32 with eps = 1e-5 on rows of variance ~9: the variance of the
// output is var / (var + eps) = 1 - ~1e-6, plus float32 rounding of each output (~6e-8).
constexpr double kRowStatTol = 1e-5;
constexpr double kEps = 1e-5;

// ---- the same math composed from primitives, each op with its own autograd node ----------

// x: (..., D), w, b: (D) -> (..., D)
Tensor layer_norm_composed(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  Tensor mu = mean(x, {-1}, true);            // (..., 1)
  Tensor xc = sub(x, mu);                     // (..., D)
  Tensor var = mean(pow(xc, 2), {-1}, true);  // (..., 1), biased
  Tensor y = mul(div(xc, sqrt(add(var, eps))), w);
  return b.defined() ? add(y, b) : y;
}

// x: (..., D), w: (D) -> (..., D)
Tensor rms_norm_composed(const Tensor& x, const Tensor& w, double eps) {
  Tensor ms = mean(pow(x, 2), {-1}, true);  // (..., 1)
  return mul(div(x, sqrt(add(ms, eps))), w);
}

// Output and the gradients of x, w, b (b may be undefined) after backward of sum(v * f(x, w, b)).
struct Result {
  Tensor y, grad_x, grad_w, grad_b;
};

template <class F>
Result run(F f, Tensor x, Tensor w, Tensor b, const Tensor& v) {
  x.zero_grad();
  w.zero_grad();
  if (b.defined()) b.zero_grad();
  Tensor y = f(x, w, b);
  y.backward(v);
  return {y.detach(), x.grad(), w.grad(), b.defined() ? b.grad() : Tensor()};
}

}  // namespace

// ------------------------------------------------------------------------------- layer_norm

TEST_CASE("layer_norm gradcheck of x weight and bias", "[norm][layer_norm][grad]") {
  Generator gen(1);
  auto f = [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], kEps); };
  SECTION("2-D x") {
    require_gradcheck(f, {grad_input({3, 5}, gen), grad_input({5}, gen), grad_input({5}, gen)});
  }
  SECTION("3-D x") {
    require_gradcheck(f, {grad_input({2, 3, 4}, gen), grad_input({4}, gen), grad_input({4}, gen)});
  }
  SECTION("1-D x is one row") {
    require_gradcheck(f, {grad_input({6}, gen), grad_input({6}, gen), grad_input({6}, gen)});
  }
}

TEST_CASE("layer_norm gradcheck without bias", "[norm][layer_norm][grad]") {
  Generator gen(2);
  require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], Tensor(), kEps); },
                    {grad_input({3, 4}, gen), grad_input({4}, gen)});
}

TEST_CASE("layer_norm gradcheck with a non-contiguous x", "[norm][layer_norm][grad]") {
  Generator gen(3);
  SECTION("transposed: the normalised dim has stride 3") {
    Tensor base = grad_input({4, 3}, gen);  // x = base^T: (3, 4)
    require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(transpose(in[0], 0, 1), in[1], in[2], kEps); },
                      {base, grad_input({4}, gen), grad_input({4}, gen)});
  }
  SECTION("narrowed: rows of 4 taken from rows of 7") {
    Tensor base = grad_input({2, 3, 7}, gen);  // x = base[..., 2:6]: (2, 3, 4)
    require_gradcheck([](const std::vector<Tensor>& in) { return layer_norm(narrow(in[0], 2, 2, 4), in[1], in[2], kEps); },
                      {base, grad_input({4}, gen), grad_input({4}, gen)});
  }
}

TEST_CASE("layer_norm fused matches composed in values and gradients", "[norm][layer_norm][fused]") {
  Generator gen(4);
  Tensor x = grad_input({2, 3, 8}, gen), w = grad_input({8}, gen), b = grad_input({8}, gen);
  Tensor v = randn({2, 3, 8}, gen, Dtype::Float64);  // upstream gradient, non-uniform

  SECTION("with bias") {
    Result fused = run([](auto& a, auto& c, auto& d) { return layer_norm(a, c, d, kEps); }, x, w, b, v);
    Result composed = run([](auto& a, auto& c, auto& d) { return layer_norm_composed(a, c, d, kEps); }, x, w, b, v);
    CHECK(max_abs_diff(fused.y, composed.y) <= kFusedVsComposedTol);
    CHECK(max_abs_diff(fused.grad_x, composed.grad_x) <= kFusedVsComposedTol);
    CHECK(max_abs_diff(fused.grad_w, composed.grad_w) <= kFusedVsComposedTol);
    CHECK(max_abs_diff(fused.grad_b, composed.grad_b) <= kFusedVsComposedTol);
  }
  SECTION("without bias") {
    Result fused = run([](auto& a, auto& c, auto& d) { return layer_norm(a, c, d, kEps); }, x, w, Tensor(), v);
    Result composed = run([](auto& a, auto& c, auto& d) { return layer_norm_composed(a, c, d, kEps); }, x, w, Tensor(), v);
    CHECK(max_abs_diff(fused.y, composed.y) <= kFusedVsComposedTol);
    CHECK(max_abs_diff(fused.grad_x, composed.grad_x) <= kFusedVsComposedTol);
    CHECK(max_abs_diff(fused.grad_w, composed.grad_w) <= kFusedVsComposedTol);
  }
  SECTION("the fused op is one graph node") {
    Tensor y = layer_norm(x, w, b, kEps);
    REQUIRE(std::string(y.grad_fn()->name()) == "LayerNorm");
    REQUIRE(y.grad_fn()->inputs.size() == 3);
  }
}

TEST_CASE("layer_norm output rows have mean 0 and variance 1", "[norm][layer_norm]") {
  // float32 rows far from 0 (mean 1000, std 3): statistics accumulated in float, or a variance
  // taken as E[x^2] - E[x]^2, would leave a visible offset here.
  constexpr std::int64_t kRows = 6, kD = 64;
  Generator gen(5);
  Tensor x = add(mul(randn({kRows, kD}, gen), 3.0), 1000.0);
  Tensor y = layer_norm(x, ones({kD}), zeros({kD}), kEps);
  REQUIRE(y.dtype() == Dtype::Float32);
  const std::vector<float> out = y.to_vector<float>();
  for (std::int64_t r = 0; r < kRows; ++r) {
    double m = 0, var = 0;
    for (std::int64_t d = 0; d < kD; ++d) m += out[r * kD + d];
    m /= kD;
    for (std::int64_t d = 0; d < kD; ++d) var += (out[r * kD + d] - m) * (out[r * kD + d] - m);
    var /= kD;
    INFO("row " << r << ": mean " << m << ", variance " << var);
    CHECK(std::abs(m) <= kRowStatTol);
    CHECK(std::abs(var - 1) <= kRowStatTol);
  }
}

TEST_CASE("layer_norm float32 matches float64", "[norm][layer_norm]") {
  Generator gen(6);
  Tensor x64 = grad_input({3, 16}, gen), w64 = grad_input({16}, gen), b64 = grad_input({16}, gen);
  Tensor v64 = randn({3, 16}, gen, Dtype::Float64);
  Tensor x32 = x64.detach().to(Dtype::Float32).requires_grad_(), w32 = w64.detach().to(Dtype::Float32).requires_grad_(),
         b32 = b64.detach().to(Dtype::Float32).requires_grad_();
  auto ln = [](auto& a, auto& c, auto& d) { return layer_norm(a, c, d, kEps); };
  Result r64 = run(ln, x64, w64, b64, v64);
  Result r32 = run(ln, x32, w32, b32, v64.to(Dtype::Float32));
  REQUIRE(r32.y.dtype() == Dtype::Float32);
  CHECK(max_abs_diff(r32.y, r64.y) <= kFloat32Tol);
  CHECK(max_abs_diff(r32.grad_x, r64.grad_x) <= kFloat32Tol);
  CHECK(max_abs_diff(r32.grad_w, r64.grad_w) <= kFloat32Tol);
  CHECK(max_abs_diff(r32.grad_b, r64.grad_b) <= kFloat32Tol);
}

TEST_CASE("layer_norm errors name both shapes", "[norm][layer_norm]") {
  Tensor x = zeros({2, 8});
  REQUIRE_THROWS_WITH(layer_norm(x, zeros({7}), zeros({8})),
                      Catch::Contains("weight") && Catch::Contains("(7,)") && Catch::Contains("(2, 8)"));
  REQUIRE_THROWS_WITH(layer_norm(x, zeros({8}), zeros({1, 8})),
                      Catch::Contains("bias") && Catch::Contains("(1, 8)") && Catch::Contains("(2, 8)"));
  REQUIRE_THROWS_WITH(layer_norm(x, Tensor(), Tensor()), Catch::Contains("weight is undefined"));
  REQUIRE_THROWS_WITH(layer_norm(x, zeros({8}, Dtype::Float64), Tensor()), Catch::Contains("dtypes differ"));
  REQUIRE_THROWS_WITH(layer_norm(scalar_tensor(1.0), zeros({1}), Tensor()), Catch::Contains("(..., D)"));
  REQUIRE_THROWS_WITH(layer_norm(x, zeros({8}), Tensor(), -1.0), Catch::Contains("eps >= 0"));
}

// ------------------------------------------------------------------------------- rms_norm

TEST_CASE("rms_norm gradcheck of x and weight", "[norm][rms_norm][grad]") {
  Generator gen(11);
  auto f = [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], kEps); };
  SECTION("2-D x") { require_gradcheck(f, {grad_input({3, 5}, gen), grad_input({5}, gen)}); }
  SECTION("3-D x") { require_gradcheck(f, {grad_input({2, 3, 4}, gen), grad_input({4}, gen)}); }
}

TEST_CASE("rms_norm gradcheck with a non-contiguous x", "[norm][rms_norm][grad]") {
  Generator gen(12);
  SECTION("transposed") {
    Tensor base = grad_input({4, 3}, gen);  // x = base^T: (3, 4)
    require_gradcheck([](const std::vector<Tensor>& in) { return rms_norm(transpose(in[0], 0, 1), in[1], kEps); },
                      {base, grad_input({4}, gen)});
  }
  SECTION("narrowed") {
    Tensor base = grad_input({2, 3, 7}, gen);  // x = base[..., 1:5]: (2, 3, 4)
    require_gradcheck([](const std::vector<Tensor>& in) { return rms_norm(narrow(in[0], 2, 1, 4), in[1], kEps); },
                      {base, grad_input({4}, gen)});
  }
}

TEST_CASE("rms_norm fused matches composed in values and gradients", "[norm][rms_norm][fused]") {
  Generator gen(13);
  Tensor x = grad_input({2, 3, 8}, gen), w = grad_input({8}, gen);
  Tensor v = randn({2, 3, 8}, gen, Dtype::Float64);
  Result fused = run([](auto& a, auto& c, auto&) { return rms_norm(a, c, kEps); }, x, w, Tensor(), v);
  Result composed = run([](auto& a, auto& c, auto&) { return rms_norm_composed(a, c, kEps); }, x, w, Tensor(), v);
  CHECK(max_abs_diff(fused.y, composed.y) <= kFusedVsComposedTol);
  CHECK(max_abs_diff(fused.grad_x, composed.grad_x) <= kFusedVsComposedTol);
  CHECK(max_abs_diff(fused.grad_w, composed.grad_w) <= kFusedVsComposedTol);
  Tensor y = rms_norm(x, w, kEps);
  CHECK(std::string(y.grad_fn()->name()) == "RMSNorm");
}

TEST_CASE("rms_norm output rows have root mean square 1", "[norm][rms_norm]") {
  // Rows of scale ~3: mean(y^2) = ms / (ms + eps) = 1 - ~1e-6, plus float32 rounding.
  constexpr std::int64_t kRows = 5, kD = 32;
  Generator gen(14);
  Tensor x = mul(randn({kRows, kD}, gen), 3.0);
  const std::vector<float> out = rms_norm(x, ones({kD}), kEps).to_vector<float>();
  for (std::int64_t r = 0; r < kRows; ++r) {
    double ms = 0;
    for (std::int64_t d = 0; d < kD; ++d) ms += static_cast<double>(out[r * kD + d]) * out[r * kD + d];
    ms /= kD;
    INFO("row " << r << ": mean square " << ms);
    CHECK(std::abs(ms - 1) <= kRowStatTol);
  }
}

TEST_CASE("rms_norm float32 matches float64", "[norm][rms_norm]") {
  Generator gen(15);
  Tensor x64 = grad_input({3, 16}, gen), w64 = grad_input({16}, gen);
  Tensor v64 = randn({3, 16}, gen, Dtype::Float64);
  Tensor x32 = x64.detach().to(Dtype::Float32).requires_grad_(), w32 = w64.detach().to(Dtype::Float32).requires_grad_();
  auto rn = [](auto& a, auto& c, auto&) { return rms_norm(a, c, kEps); };
  Result r64 = run(rn, x64, w64, Tensor(), v64);
  Result r32 = run(rn, x32, w32, Tensor(), v64.to(Dtype::Float32));
  CHECK(max_abs_diff(r32.y, r64.y) <= kFloat32Tol);
  CHECK(max_abs_diff(r32.grad_x, r64.grad_x) <= kFloat32Tol);
  CHECK(max_abs_diff(r32.grad_w, r64.grad_w) <= kFloat32Tol);
}

TEST_CASE("rms_norm errors name both shapes", "[norm][rms_norm]") {
  Tensor x = zeros({2, 8});
  REQUIRE_THROWS_WITH(rms_norm(x, zeros({8, 2})),
                      Catch::Contains("rms_norm") && Catch::Contains("(8, 2)") && Catch::Contains("(2, 8)"));
  REQUIRE_THROWS_WITH(rms_norm(x, zeros({8}, Dtype::Float64)), Catch::Contains("dtypes differ"));
  REQUIRE_THROWS_WITH(rms_norm(zeros({2, 8}, Dtype::Int64), zeros({8})), Catch::Contains("float32 or float64"));
}
