// Views share storage and copy nothing; shape ops gradcheck, including on strided inputs.
#include "test_util.h"

using namespace sf;
using Catch::Matchers::Contains;

TEST_CASE("views share storage with their base", "[shape][views]") {
  Tensor base = arange(0.0, 12.0, 1.0, Dtype::Float32).reshape({3, 4});
  Tensor t = base.transpose(0, 1);        // (4, 3)
  Tensor n = base.narrow(1, 1, 2);        // (3, 2)
  Tensor u = base.unsqueeze(0);           // (1, 3, 4)
  Tensor e = base.narrow(0, 0, 1).expand({5, 4});  // (5, 4) with stride 0
  for (const Tensor* v : {&t, &n, &u, &e}) REQUIRE(v->impl()->storage == base.impl()->storage);
  REQUIRE_FALSE(t.is_contiguous());
  REQUIRE(t.strides() == Shape{1, 4});
  REQUIRE(e.strides() == Shape{0, 1});
  n.set({2, 0}, 100.0);  // base[2, 1]
  REQUIRE(base.at({2, 1}) == 100.0);
  REQUIRE(t.at({1, 2}) == 100.0);
  t.narrow(0, 3, 1).fill_(-1.0);  // column 3 of base
  REQUIRE(base.at({0, 3}) == -1.0);
  REQUIRE(base.at({2, 3}) == -1.0);
  REQUIRE(e.at({4, 3}) == -1.0);
}

TEST_CASE("contiguous copies only when needed", "[shape][views]") {
  Tensor base = zeros({3, 4});
  REQUIRE(base.contiguous().impl() == base.impl());
  Tensor t = base.transpose(0, 1).contiguous();
  REQUIRE(t.impl()->storage != base.impl()->storage);
  REQUIRE(t.is_contiguous());
  REQUIRE(base.reshape({12}).impl()->storage == base.impl()->storage);  // a view
  Tensor r = base.transpose(0, 1).reshape({12});                         // must copy
  REQUIRE(r.impl()->storage != base.impl()->storage);
  REQUIRE_THROWS_WITH(base.transpose(0, 1).view({12}), Contains("not contiguous") && Contains("reshape"));
}

TEST_CASE("reshape infers one size and checks the element count", "[shape]") {
  Tensor x = zeros({2, 3, 4});
  REQUIRE(x.reshape({-1, 4}).shape() == Shape{6, 4});
  REQUIRE_THROWS_WITH(x.reshape({5, -1}), Contains("(2, 3, 4)") && Contains("(5, -1)"));
  REQUIRE_THROWS_WITH(x.view({7, 2}), Contains("24 elements"));
  REQUIRE_THROWS_WITH(x.squeeze(1), Contains("size 3"));
  REQUIRE_THROWS_WITH(x.permute({0, 0, 1}), Contains("repeated"));
  REQUIRE_THROWS_WITH(x.narrow(2, 3, 2), Contains("outside"));
  REQUIRE_THROWS_WITH(x.expand({2, 5, 4}), Contains("(2, 3, 4)"));
}

TEST_CASE("cat and stack join along a dim", "[shape]") {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector<float>({5, 6}, {2, 1});
  Tensor c = cat({a, b}, 1);
  REQUIRE(c.shape() == Shape{2, 3});
  REQUIRE(c.to_vector<float>() == std::vector<float>{1, 2, 5, 3, 4, 6});
  Tensor s = stack({a, a}, 0);
  REQUIRE(s.shape() == Shape{2, 2, 2});
  REQUIRE_THROWS_WITH(cat({a, b}, 0), Contains("(2, 2)") && Contains("(2, 1)"));
  REQUIRE_THROWS_WITH(stack({a, b}, 0), Contains("(2, 1)"));
}

TEST_CASE("shape ops gradcheck", "[shape][grad][views]") {
  Generator gen(41);
  Tensor x = test::grad_input({2, 3, 4}, gen);
  Tensor y = test::grad_input({2, 2, 4}, gen);
  // weight the result by a position-dependent factor so a misplaced gradient shows
  test::require_gradcheck([](const std::vector<Tensor>& in) { return in[0].permute({2, 0, 1}); }, {x});
  test::require_gradcheck([](const std::vector<Tensor>& in) { return in[0].transpose(0, 2).reshape({4, 6}); }, {x});
  test::require_gradcheck([](const std::vector<Tensor>& in) { return in[0].narrow(1, 1, 2); }, {x});
  test::require_gradcheck([](const std::vector<Tensor>& in) { return in[0].unsqueeze(1).squeeze(1); }, {x});
  test::require_gradcheck([](const std::vector<Tensor>& in) { return in[0].narrow(0, 0, 1).expand({3, 3, 4}); }, {x});
  test::require_gradcheck([](const std::vector<Tensor>& in) { return cat({in[0], in[1]}, 1); }, {x, y});
  test::require_gradcheck([](const std::vector<Tensor>& in) { return stack({in[0], in[0].transpose(1, 2).transpose(1, 2)}, 3); }, {x});
  test::require_gradcheck([](const std::vector<Tensor>& in) { return in[0].transpose(0, 1).contiguous(); }, {x});
  test::require_gradcheck([](const std::vector<Tensor>& in) { return in[0].clone(); }, {x});
}
