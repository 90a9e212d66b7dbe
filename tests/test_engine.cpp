// The backward engine: topological order, accumulation, graph release, grad mode, and the
// mutation control proving that gradcheck can fail.
#include "test_util.h"

#include "autograd/node.h"

using namespace sf;
using Catch::Matchers::Contains;

TEST_CASE("a 10000-op chain backpropagates without overflowing the stack", "[engine][grad]") {
  Tensor x = scalar_tensor(1.0, Dtype::Float64).requires_grad_();
  Tensor y = x;
  constexpr int kDepth = 10000;
  for (int i = 0; i < kDepth; ++i) y = add(y, 1e-4);  // dy/dx = 1 through every link
  y = mul(y, 3.0);
  y.backward();
  REQUIRE(x.grad().item() == 3.0);
}

TEST_CASE("gradients accumulate across backward calls until zero_grad", "[engine][grad]") {
  Tensor x = from_vector<double>({1.0, 2.0}, {2});
  x.requires_grad_();
  sum(mul(x, x)).backward();  // d/dx sum(x^2) = 2x
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{2.0, 4.0});
  sum(mul(x, x)).backward();
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{4.0, 8.0});
  x.zero_grad();
  REQUIRE_FALSE(x.grad().defined());
  sum(x).backward();
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{1.0, 1.0});
}

TEST_CASE("a tensor used twice gets the sum of both paths", "[engine][grad]") {
  Tensor x = scalar_tensor(3.0, Dtype::Float64).requires_grad_();
  Tensor a = mul(x, 2.0);  // a = 2x
  Tensor b = mul(x, x);    // b = x^2
  Tensor y = add(mul(a, b), a);  // y = 2x^3 + 2x; dy/dx = 6x^2 + 2 = 56
  y.backward();
  REQUIRE(x.grad().item() == 56.0);
}

TEST_CASE("the graph is released after backward and a second backward is a clear error", "[engine][errors]") {
  Tensor x = ones({2}, Dtype::Float64).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward();
  REQUIRE_THROWS_WITH(y.backward(), Contains("second time") && Contains("retain_graph"));

  Tensor x2 = ones({2}, Dtype::Float64).requires_grad_();
  Tensor y2 = sum(exp(x2));
  y2.backward(Tensor(), /*retain_graph=*/true);
  y2.backward();
  REQUIRE(x2.grad().at({0}) == Approx(2 * std::exp(1.0)));
}

TEST_CASE("backward needs a gradient for a non-scalar and checks its shape", "[engine][errors]") {
  Tensor x = ones({2, 3}, Dtype::Float64).requires_grad_();
  Tensor y = mul(x, 2.0);
  REQUIRE_THROWS_WITH(y.backward(), Contains("(2, 3)") && Contains("one-element"));
  REQUIRE_THROWS_WITH(y.backward(ones({3}, Dtype::Float64)), Contains("(3,)") && Contains("(2, 3)"));
  y.backward(full({2, 3}, 0.5, Dtype::Float64));
  REQUIRE(x.grad().at({1, 2}) == 1.0);
  REQUIRE_THROWS_WITH(ones({1}).backward(), Contains("does not require grad"));
}

TEST_CASE("detach and NoGradGuard record no graph", "[engine]") {
  Tensor x = ones({2}, Dtype::Float64).requires_grad_();
  Tensor d = x.detach();
  REQUIRE_FALSE(d.requires_grad());
  REQUIRE(d.impl()->storage == x.impl()->storage);  // same memory
  {
    NoGradGuard guard;
    Tensor y = mul(x, 2.0);
    REQUIRE_FALSE(y.requires_grad());
    REQUIRE(y.grad_fn() == nullptr);
  }
  Tensor y = mul(x, 2.0);
  REQUIRE(y.requires_grad());
}

TEST_CASE("every graph node carries its op name", "[engine]") {
  Tensor x = ones({2, 2}, Dtype::Float64).requires_grad_();
  Tensor y = sum(relu(x.transpose(0, 1)));
  REQUIRE(std::string(y.grad_fn()->name()) == "Sum");
  REQUIRE(std::string(y.grad_fn()->inputs[0]->name()) == "Relu");
  REQUIRE(std::string(y.grad_fn()->inputs[0]->inputs[0]->name()) == "Permute");
  REQUIRE(std::string(y.grad_fn()->inputs[0]->inputs[0]->inputs[0]->name()) == "AccumulateGrad");
}

TEST_CASE("retain_grad keeps the gradient of an intermediate tensor", "[engine][grad]") {
  Tensor x = from_vector<double>({1.0, -2.0}, {2});
  x.requires_grad_();
  Tensor h = mul(x, 3.0);
  h.retain_grad();
  sum(mul(h, h)).backward();  // dL/dh = 2h
  REQUIRE(h.grad().to_vector<double>() == std::vector<double>{6.0, -12.0});
}

// ---- mutation control -----------------------------------------------------------------
// A test-only op with a deliberate sign error in its backward: y = x^2, but backward returns
// -2x. gradcheck must reject it, or a passing gradcheck would prove nothing.
struct BadSquare final : Node {
  Tensor x;
  const char* name() const override { return "BadSquare"; }
  static Tensor forward(const Tensor& x) {
    Tensor out;
    {
      NoGradGuard g;
      out = mul(x, x);
    }
    if (any_requires_grad({&x})) {
      auto node = std::make_shared<BadSquare>();
      node->x = x.detach();
      connect(node, {&x}, out);
    }
    return out;
  }
  std::vector<Tensor> backward(const Tensor& g) override {
    return {mul(mul(g, x), -2.0)};  // WRONG on purpose: should be +2x
  }
};

TEST_CASE("gradcheck fails on a backward with a sign error", "[engine][grad][mutation]") {
  Generator gen(5);
  Tensor x = test::grad_input({3, 2}, gen);
  GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return BadSquare::forward(in[0]); }, {x});
  REQUIRE_FALSE(r.ok);
  REQUIRE_THAT(r.message, Contains("input 0") && Contains("numeric") && Contains("analytic"));
  // the same check on the correct op passes
  test::require_gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[0]); }, {x});
  // fast mode catches it too
  GradcheckOptions fast;
  fast.fast_mode = true;
  REQUIRE_FALSE(gradcheck([](const std::vector<Tensor>& in) { return BadSquare::forward(in[0]); }, {x}, fast).ok);
}

TEST_CASE("gradcheck refuses float32 inputs", "[engine][errors]") {
  Tensor x = ones({2}).requires_grad_();
  REQUIRE_THROWS_WITH(gradcheck([](const std::vector<Tensor>& in) { return in[0]; }, {x}),
                      Contains("float64"));
}
