// Softmax and log_softmax: values against a plain loop, gradient checks over every dim of a
// non-contiguous view (softmax's: the gradcheck suite's entry softmax), the fused ops against the same math composed from primitives (values
// and gradients), and the numerics: large logits and fully masked rows.
#include <cmath>
#include <limits>

#include "test_util.h"

using namespace sf;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// softmax (or log_softmax) of a 3-D tensor along d, by definition, one row at a time through
// Tensor::at: shares no code with the op.
Tensor softmax_reference(const Tensor& x, std::int64_t d, bool log) {
  const Shape& s = x.shape();
  Tensor out = zeros(s, Dtype::Float64);
  for (std::int64_t a = 0; a < s[0]; ++a)
    for (std::int64_t b = 0; b < s[1]; ++b)
      for (std::int64_t c = 0; c < s[2]; ++c) {
        Shape idx{a, b, c};
        if (idx[d] != 0) continue;  // visit each row once, from its first element
        double m = -kInf, total = 0;
        for (idx[d] = 0; idx[d] < s[d]; ++idx[d]) m = std::max(m, x.at(idx));
        for (idx[d] = 0; idx[d] < s[d]; ++idx[d]) total += std::exp(x.at(idx) - m);
        for (idx[d] = 0; idx[d] < s[d]; ++idx[d])
          out.set(idx, log ? x.at(idx) - m - std::log(total) : std::exp(x.at(idx) - m) / total);
      }
  return out;
}

// The same math built from primitives (each with its own backward), for the fused-vs-composed
// comparison: softmax = exp(x - max) / sum(exp(x - max)).
Tensor composed_softmax(const Tensor& x, std::int64_t d) {
  Tensor e = exp(sub(x, max(x, {d}, true)));
  return div(e, sum(e, {d}, true));
}

// log_softmax = (x - max) - log(sum(exp(x - max))).
Tensor composed_log_softmax(const Tensor& x, std::int64_t d) {
  Tensor shifted = sub(x, max(x, {d}, true));
  return sub(shifted, log(sum(exp(shifted), {d}, true)));
}

}  // namespace

TEST_CASE("softmax and log_softmax match a plain loop and rows sum to one", "[softmax]") {
  Generator gen(11);
  Tensor x = randn({3, 4, 5}, gen, Dtype::Float64);
  for (std::int64_t d : {0, 1, 2}) {
    INFO("dim " << d);
    Tensor y = softmax(x, d);
    REQUIRE(y.shape() == x.shape());
    REQUIRE(test::max_abs_diff(y, softmax_reference(x, d, false)) <= test::kFloat64Tol);
    REQUIRE(test::max_abs_diff(log_softmax(x, d), softmax_reference(x, d, true)) <= test::kFloat64Tol);
    REQUIRE(test::max_abs_diff(sum(y, {d}), ones(sum(y, {d}).shape(), Dtype::Float64)) <= test::kFloat64Tol);
  }
  // a negative dim is the same as counting from the end
  REQUIRE(test::max_abs_diff(softmax(x, -1), softmax(x, 2)) == 0);
  REQUIRE(test::max_abs_diff(log_softmax(x, -3), log_softmax(x, 0)) == 0);
}

TEST_CASE("softmax in float32 agrees with float64", "[softmax]") {
  Generator gen(12);
  Tensor x = randn({4, 33}, gen, Dtype::Float64);
  REQUIRE(test::max_rel_diff(softmax(x.to(Dtype::Float32), 1).to(Dtype::Float64), softmax(x, 1)) <=
          test::kFloat32Tol);
  // log_softmax values are O(1..5): compare absolutely at float32's relative precision
  REQUIRE(test::max_abs_diff(log_softmax(x.to(Dtype::Float32), 1).to(Dtype::Float64), log_softmax(x, 1)) <=
          test::kFloat32Tol);
}

// The gradient check of softmax over the first, middle and last dim of a non-contiguous view is
// the gradcheck suite's entry softmax (train/classroom/gradcheck_suite.cpp, run by
// tests/test_gradcheck_suite.cpp with the labels softmax and grad).

TEST_CASE("log_softmax gradcheck over first middle and last dim of a non-contiguous view",
          "[softmax][grad]") {
  Generator gen(14);
  Tensor x = test::grad_input({4, 3, 5}, gen);
  for (std::int64_t d : {0, 1, -1}) {
    INFO("dim " << d);
    test::require_gradcheck([d](const std::vector<Tensor>& in) { return log_softmax(in[0].transpose(0, 2), d); },
                            {x});
  }
  // a narrowed view too (offset into the storage, row stride larger than the row)
  test::require_gradcheck([](const std::vector<Tensor>& in) { return log_softmax(in[0].narrow(2, 1, 3), 2); }, {x});
}

TEST_CASE("fused softmax and log_softmax match the composed primitives in values and gradients",
          "[softmax][fused][grad]") {
  Generator gen(15);
  Tensor x_fused = test::grad_input({3, 4, 5}, gen);
  Tensor x_composed = x_fused.detach().clone().requires_grad_();
  Tensor v = randn({3, 4, 5}, gen, Dtype::Float64);  // a non-uniform upstream gradient
  for (bool log_form : {false, true}) {
    for (std::int64_t d : {0, 1, 2}) {
      INFO((log_form ? "log_softmax" : "softmax") << " over dim " << d);
      x_fused.zero_grad();
      x_composed.zero_grad();
      Tensor y_fused = log_form ? log_softmax(x_fused, d) : softmax(x_fused, d);
      Tensor y_composed = log_form ? composed_log_softmax(x_composed, d) : composed_softmax(x_composed, d);
      REQUIRE(test::max_abs_diff(y_fused, y_composed) <= test::kFloat64Tol);
      sum(mul(y_fused, v)).backward();
      sum(mul(y_composed, v)).backward();
      REQUIRE(test::max_abs_diff(x_fused.grad(), x_composed.grad()) <= test::kFloat64Tol);
    }
  }
}

TEST_CASE("softmax of large logits gives no NaN", "[softmax]") {
  // exp(1000) overflows both float32 and float64: only the max subtraction makes this finite.
  // Expected: softmax(1000, 999, 0) = (1, e^-1, e^-1000) / (1 + e^-1 + e^-1000).
  const double z = 1 + std::exp(-1.0);
  for (Dtype dt : {Dtype::Float32, Dtype::Float64}) {
    INFO(dtype_name(dt));
    Tensor x = from_vector({1000.0, 999.0, 0.0, -1000.0, -1000.0, -1000.0}, {2, 3}, dt);
    Tensor y = softmax(x, 1);
    REQUIRE(y.at({0, 0}) == Approx(1 / z).epsilon(test::kFloat32Tol));
    REQUIRE(y.at({0, 1}) == Approx(std::exp(-1.0) / z).epsilon(test::kFloat32Tol));
    REQUIRE(y.at({0, 2}) == 0);  // e^-1000 underflows to exactly 0
    for (std::int64_t j = 0; j < 3; ++j) REQUIRE(y.at({1, j}) == Approx(1.0 / 3).epsilon(test::kFloat32Tol));
    Tensor ly = log_softmax(x, 1);
    REQUIRE(ly.at({0, 0}) == Approx(-std::log(z)).epsilon(test::kFloat32Tol));
    REQUIRE(ly.at({0, 2}) == Approx(-1000 - std::log(z)).epsilon(test::kFloat32Tol));
    for (double v : ly.to_vector<double>()) REQUIRE(std::isfinite(v));
  }
}

TEST_CASE("softmax of a fully masked row gives zeros and a zero gradient", "[softmax]") {
  // Attention masks scores with -inf; a query whose keys are all masked (a padding position)
  // gives a row of -inf. Its softmax is defined as zeros, not NaN.
  Tensor scores = from_vector({0.5, -1.0, 2.0, 0.3, 1.0, -0.2}, {2, 3}, Dtype::Float64);
  Tensor mask = from_vector<bool>({true, true, true, false, true, false}, {2, 3});  // row 0: all masked
  Tensor y = softmax(masked_fill(scores, mask, -kInf), 1);
  REQUIRE(y.to_vector<double>()[0] == 0);
  REQUIRE(y.to_vector<double>()[1] == 0);
  REQUIRE(y.to_vector<double>()[2] == 0);
  // row 1: the masked entry gets 0, the other two share the mass
  const double e0 = std::exp(0.3), e2 = std::exp(-0.2);
  REQUIRE(y.at({1, 0}) == Approx(e0 / (e0 + e2)).epsilon(test::kFloat64Tol));
  REQUIRE(y.at({1, 1}) == 0);
  REQUIRE(y.at({1, 2}) == Approx(e2 / (e0 + e2)).epsilon(test::kFloat64Tol));

  // The gradient straight into the -inf scores (masked_fill would zero it on its own, hiding a
  // NaN from softmax's backward): zero for the fully masked row and for the masked entry.
  Tensor raw = from_vector({-kInf, -kInf, -kInf, 0.3, -kInf, -0.2}, {2, 3}, Dtype::Float64).requires_grad_();
  softmax(raw, 1).backward(from_vector({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {2, 3}, Dtype::Float64));
  const std::vector<double> g = raw.grad().to_vector<double>();
  for (double v : g) REQUIRE(std::isfinite(v));
  REQUIRE(g[0] == 0);
  REQUIRE(g[1] == 0);
  REQUIRE(g[2] == 0);
  REQUIRE(g[4] == 0);
  // row 1 by hand: grad_j = y_j (g_j - sum_k g_k y_k) with y = (e0, 0, e2) / (e0 + e2)
  const double y0 = e0 / (e0 + e2), y2 = e2 / (e0 + e2), dot = 4 * y0 + 6 * y2;
  REQUIRE(g[3] == Approx(y0 * (4 - dot)).epsilon(test::kFloat64Tol));
  REQUIRE(g[5] == Approx(y2 * (6 - dot)).epsilon(test::kFloat64Tol));

  // log_softmax of the fully masked row is log(0) = -inf everywhere, still no NaN
  Tensor ly = log_softmax(full({1, 4}, -kInf, Dtype::Float64), 1);
  for (double v : ly.to_vector<double>()) REQUIRE(v == -kInf);
}
