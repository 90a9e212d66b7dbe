// Module base: dotted parameter names, train/eval, state dictionaries; Linear.
#include "test_util.h"

#include "nn/linear.h"

using namespace sf;
using namespace sf::nn;
using Catch::Matchers::Contains;

namespace {
// A two-level module: block.proj (Linear) and block.layers.{0,1} (Linear), plus a raw parameter.
struct Block : Module {
  std::shared_ptr<Linear> proj;
  std::shared_ptr<ModuleList<Linear>> layers;
  Tensor scale;
  Block(Generator& gen, Dtype dtype = Dtype::Float32) {
    scale = register_parameter("scale", ones({3}, dtype));
    proj = register_module("proj", std::make_shared<Linear>(3, 4, gen, true, dtype));
    layers = register_module("layers", std::make_shared<ModuleList<Linear>>());
    layers->push_back(std::make_shared<Linear>(4, 4, gen, false, dtype));
    layers->push_back(std::make_shared<Linear>(4, 2, gen, true, dtype));
  }
  const char* type_name() const override { return "Block"; }
};
}  // namespace

TEST_CASE("named_parameters gives dotted paths in registration order", "[module]") {
  Generator gen(1);
  Block b(gen);
  std::vector<std::string> names;
  for (const auto& [name, t] : b.named_parameters()) names.push_back(name);
  REQUIRE(names == std::vector<std::string>{"scale", "proj.weight", "proj.bias", "layers.0.weight",
                                            "layers.1.weight", "layers.1.bias"});
  // 3 + (4*3 + 4) + 4*4 + (2*4 + 2)
  REQUIRE(b.parameter_count() == 3 + 16 + 16 + 10);
  for (const Tensor& p : b.parameters()) REQUIRE(p.requires_grad());
}

TEST_CASE("train and eval reach every descendant", "[module]") {
  Generator gen(1);
  Block b(gen);
  b.eval();
  REQUIRE_FALSE(b.is_training());
  REQUIRE_FALSE(b.layers->is_training());
  REQUIRE_FALSE((*b.layers)[1].is_training());
  b.train();
  REQUIRE((*b.layers)[0].is_training());
}

TEST_CASE("state_dict round trip and load errors", "[module][checkpoint]") {
  Generator g1(1), g2(2);
  Block a(g1), b(g2);
  REQUIRE(test::max_abs_diff(a.proj->weight, b.proj->weight) > 0);
  b.load_state_dict(a.state_dict());
  for (const auto& [name, t] : a.named_parameters()) {
    INFO(name);
    REQUIRE(test::max_abs_diff(t, b.state_dict().at(name)) == 0);
  }
  auto state = a.state_dict();
  state.erase("layers.1.bias");
  REQUIRE_THROWS_WITH(b.load_state_dict(state), Contains("missing") && Contains("layers.1.bias"));
  state = a.state_dict();
  state["layers.1.bias"] = zeros({3});
  REQUIRE_THROWS_WITH(b.load_state_dict(state), Contains("layers.1.bias") && Contains("(2,)") && Contains("(3,)"));
  state = a.state_dict();
  state["extra"] = zeros({1});
  REQUIRE_THROWS_WITH(b.load_state_dict(state), Contains("unexpected") && Contains("extra"));
}

TEST_CASE("zero_grad clears every parameter's gradient", "[module]") {
  Generator gen(1);
  Block b(gen);
  sum(b.proj->forward(ones({2, 3}))).backward();
  REQUIRE(b.proj->weight.grad().defined());
  b.zero_grad();
  REQUIRE_FALSE(b.proj->weight.grad().defined());
}

TEST_CASE("Linear computes x W^T + b", "[module][linear]") {
  Generator gen(3);
  Linear lin(3, 2, gen, true, Dtype::Float64);
  Tensor x = randn({4, 3}, gen, Dtype::Float64);
  Tensor y = lin.forward(x);
  REQUIRE(y.shape() == Shape{4, 2});
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t o = 0; o < 2; ++o) {
      double acc = lin.bias.at({o});
      for (std::int64_t k = 0; k < 3; ++k) acc += x.at({i, k}) * lin.weight.at({o, k});
      REQUIRE(y.at({i, o}) == Approx(acc).epsilon(1e-14));
    }
  // Xavier uniform bound: sqrt(6 / (3 + 2))
  REQUIRE(max(lin.weight).item() <= std::sqrt(6.0 / 5));
  REQUIRE_THROWS_WITH(lin.forward(ones({4, 5}, Dtype::Float64)), Contains("(..., 3)") && Contains("(4, 5)"));
}

TEST_CASE("Linear gradcheck for input and weight and bias", "[module][linear][grad]") {
  Generator gen(4);
  Linear lin(3, 2, gen, true, Dtype::Float64);
  Tensor x = test::grad_input({2, 5, 3}, gen);
  test::require_gradcheck([&](const std::vector<Tensor>&) { return lin.forward(x); }, {x, lin.weight, lin.bias});
}
