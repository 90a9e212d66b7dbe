// Binary element-wise ops with broadcasting: values against plain loops, gradient checks on
// broadcast and non-contiguous operands.
#include "test_util.h"

#include <functional>

using namespace sf;
using Catch::Matchers::Contains;

namespace {
using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);
struct Case {
  const char* name;
  BinaryOp op;
  double (*ref)(double, double);
};
const Case kCases[] = {
    {"add", static_cast<BinaryOp>(add), [](double a, double b) { return a + b; }},
    {"sub", static_cast<BinaryOp>(sub), [](double a, double b) { return a - b; }},
    {"mul", static_cast<BinaryOp>(mul), [](double a, double b) { return a * b; }},
    {"div", static_cast<BinaryOp>(div), [](double a, double b) { return a / b; }},
};
// keeps divisors away from 0 so finite differences stay accurate
Tensor away_from_zero(const Tensor& t) { return add(mul(t, 0.5), 2.0).detach().requires_grad_(); }
}  // namespace

TEST_CASE("binary ops broadcast like NumPy and match a plain loop", "[elementwise][broadcast]") {
  Generator gen(11);
  Tensor a = randn({2, 1, 4}, gen, Dtype::Float64);
  Tensor b = add(rand({3, 1}, gen, Dtype::Float64), 1.0);
  for (const Case& c : kCases) {
    INFO(c.name);
    Tensor out = c.op(a, b);
    REQUIRE(out.shape() == Shape{2, 3, 4});
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 3; ++j)
        for (std::int64_t k = 0; k < 4; ++k)
          REQUIRE(out.at({i, j, k}) == c.ref(a.at({i, 0, k}), b.at({j, 0})));
  }
}

TEST_CASE("binary ops gradcheck with broadcasting", "[elementwise][grad][broadcast]") {
  Generator gen(12);
  for (const Case& c : kCases) {
    INFO(c.name);
    Tensor a = test::grad_input({2, 1, 4}, gen);
    Tensor b = away_from_zero(randn({3, 1}, gen, Dtype::Float64));
    test::require_gradcheck([&](const std::vector<Tensor>& in) { return c.op(in[0], in[1]); }, {a, b});
  }
}

TEST_CASE("binary ops gradcheck on non-contiguous views", "[elementwise][grad][views]") {
  Generator gen(13);
  for (const Case& c : kCases) {
    INFO(c.name);
    Tensor a = test::grad_input({4, 3}, gen);
    Tensor b = away_from_zero(randn({3, 5}, gen, Dtype::Float64));
    // a transposed (3,4) and b narrowed to (3,4): both strided
    test::require_gradcheck(
        [&](const std::vector<Tensor>& in) { return c.op(in[0].transpose(0, 1), in[1].narrow(1, 1, 4)); }, {a, b});
  }
}

TEST_CASE("scalar forms use the tensor's dtype", "[elementwise]") {
  Tensor a = from_vector<float>({1, 2}, {2});
  REQUIRE((a + 1.0).to_vector<float>() == std::vector<float>{2, 3});
  REQUIRE((a - 1.0).to_vector<float>() == std::vector<float>{0, 1});
  REQUIRE((a * 3.0).to_vector<float>() == std::vector<float>{3, 6});
  REQUIRE((a / 2.0).to_vector<float>() == std::vector<float>{0.5f, 1});
  REQUIRE((2.0 * a).dtype() == Dtype::Float32);
  REQUIRE((-a).to_vector<float>() == std::vector<float>{-1, -2});
}

TEST_CASE("binary ops reject mixed dtypes and integer tensors", "[elementwise][errors]") {
  REQUIRE_THROWS_WITH(add(zeros({2}), zeros({2}, Dtype::Float64)), Contains("float32") && Contains("float64"));
  REQUIRE_THROWS_WITH(mul(zeros({2}, Dtype::Int64), zeros({2}, Dtype::Int64)), Contains("int64"));
}
