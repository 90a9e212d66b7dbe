// Reductions: sum, mean, max over chosen dims with and without keepdim; sum_to.
#include "test_util.h"

using namespace sf;
using Catch::Matchers::Contains;

TEST_CASE("sum and mean over chosen dims match plain loops", "[reduce]") {
  Generator gen(31);
  Tensor x = randn({2, 3, 4}, gen, Dtype::Float64);
  Tensor s1 = sum(x, {1});
  REQUIRE(s1.shape() == Shape{2, 4});
  Tensor s02 = sum(x, {0, 2}, /*keepdim=*/true);
  REQUIRE(s02.shape() == Shape{1, 3, 1});
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t k = 0; k < 4; ++k) {
      double acc = 0;
      for (std::int64_t j = 0; j < 3; ++j) acc += x.at({i, j, k});
      REQUIRE(s1.at({i, k}) == Approx(acc).epsilon(1e-14));
    }
  for (std::int64_t j = 0; j < 3; ++j) {
    double acc = 0;
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t k = 0; k < 4; ++k) acc += x.at({i, j, k});
    REQUIRE(s02.at({0, j, 0}) == Approx(acc).epsilon(1e-14));
    REQUIRE(mean(x, {0, 2}).at({j}) == Approx(acc / 8).epsilon(1e-14));
  }
  REQUIRE(sum(x).dim() == 0);
  REQUIRE(mean(x, {-1}).shape() == Shape{2, 3});
}

TEST_CASE("max returns the largest value and the first position on ties", "[reduce]") {
  Tensor x = from_vector<double>({1, 5, 5, 2, -1, 0}, {2, 3});
  Tensor m = max(x, {1});
  REQUIRE(m.to_vector<double>() == std::vector<double>{5, 2});
  x.requires_grad_();
  sum(max(x, {1})).backward();
  // the tie in row 0 sends the gradient to the first 5 only
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 1, 0, 0});
  REQUIRE(max(x).item() == 5);
}

TEST_CASE("reductions gradcheck over several dims", "[reduce][grad]") {
  Generator gen(32);
  Tensor x = test::grad_input({2, 3, 4}, gen);
  for (bool keepdim : {false, true}) {
    INFO("keepdim " << keepdim);
    test::require_gradcheck([&](const std::vector<Tensor>& in) { return sum(in[0], {0, 2}, keepdim); }, {x});
    test::require_gradcheck([&](const std::vector<Tensor>& in) { return mean(in[0], {1}, keepdim); }, {x});
    test::require_gradcheck([&](const std::vector<Tensor>& in) { return max(in[0], {2}, keepdim); }, {x});
    test::require_gradcheck([&](const std::vector<Tensor>& in) { return max(in[0], {0, 1}, keepdim); }, {x});
  }
  test::require_gradcheck([](const std::vector<Tensor>& in) { return sum(in[0].transpose(0, 2), {0}); }, {x});
  test::require_gradcheck([](const std::vector<Tensor>& in) { return mean(in[0]); }, {x});
}

TEST_CASE("sum_to undoes broadcasting", "[reduce][broadcast]") {
  Tensor g = ones({2, 3, 4}, Dtype::Float64);
  REQUIRE(sum_to(g, {3, 1}).shape() == Shape{3, 1});
  REQUIRE(sum_to(g, {3, 1}).at({0, 0}) == 8.0);
  REQUIRE(sum_to(g, {}).item() == 24.0);
  REQUIRE_THROWS_WITH(sum_to(g, {5}), Contains("(2, 3, 4)") && Contains("(5,)"));
}

TEST_CASE("reductions check their dims", "[reduce][errors]") {
  Tensor x = zeros({2, 3});
  REQUIRE_THROWS_WITH(sum(x, {2}), Contains("out of range"));
  REQUIRE_THROWS_WITH(sum(x, {1, -1}), Contains("twice"));
}
