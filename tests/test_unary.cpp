// Unary ops: values against the C++ standard library, gradient checks.
#include "test_util.h"

#include <cmath>

using namespace sf;

namespace {
struct Case {
  const char* name;
  Tensor (*op)(const Tensor&);
  double (*ref)(double);
  bool positive_only;  // log and sqrt need x > 0
};
const Case kCases[] = {
    {"neg", neg, [](double x) { return -x; }, false},
    {"exp", exp, [](double x) { return std::exp(x); }, false},
    {"log", log, [](double x) { return std::log(x); }, true},
    {"sqrt", sqrt, [](double x) { return std::sqrt(x); }, true},
    {"tanh", tanh, [](double x) { return std::tanh(x); }, false},
    {"relu", relu, [](double x) { return x > 0 ? x : 0.0; }, false},
    {"gelu", gelu, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, false},
    {"sigmoid", sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, false},
};
Tensor input_for(const Case& c, Generator& gen, const Shape& shape) {
  Tensor x = randn(shape, gen, Dtype::Float64);
  if (c.positive_only) x = add(rand(shape, gen, Dtype::Float64), 0.5);
  return x.requires_grad_();
}
}  // namespace

TEST_CASE("unary ops match the standard library", "[unary]") {
  Generator gen(21);
  for (const Case& c : kCases) {
    INFO(c.name);
    Tensor x = input_for(c, gen, {3, 4});
    Tensor y = c.op(x);
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 4; ++j) REQUIRE(y.at({i, j}) == Approx(c.ref(x.at({i, j}))).epsilon(1e-15));
  }
}

TEST_CASE("unary ops gradcheck", "[unary][relu][grad]") {
  Generator gen(22);
  for (const Case& c : kCases) {
    INFO(c.name);
    Tensor x = input_for(c, gen, {3, 4});
    test::require_gradcheck([&](const std::vector<Tensor>& in) { return c.op(in[0].transpose(0, 1)); }, {x});
  }
}

TEST_CASE("pow with a scalar exponent", "[unary][grad]") {
  Generator gen(23);
  Tensor x = add(rand({5}, gen, Dtype::Float64), 0.5).requires_grad_();
  for (double p : {2.0, 3.0, 0.5, -1.5}) {
    INFO("p = " << p);
    Tensor y = pow(x, p);
    for (std::int64_t i = 0; i < 5; ++i) REQUIRE(y.at({i}) == Approx(std::pow(x.at({i}), p)));
    test::require_gradcheck([&](const std::vector<Tensor>& in) { return pow(in[0], p); }, {x});
  }
}
