// Optimizers, clipping and learning-rate schedules against hand computations.
#include "test_util.h"

#include <cmath>

#include "autograd/node.h"
#include "train/optim/optim.h"
#include "train/optim/schedule.h"

using namespace sf;
using namespace sf::train;
using Catch::Matchers::Contains;

namespace {
// A float64 parameter with a given gradient.
Tensor param_with_grad(const std::vector<double>& value, const std::vector<double>& grad) {
  Tensor p = from_vector<double>(value, {static_cast<std::int64_t>(value.size())});
  p.requires_grad_();
  p.impl()->grad = from_vector<double>(grad, {static_cast<std::int64_t>(grad.size())}).impl_ptr();
  return p;
}
constexpr double kTol = 1e-12;  // float64, a handful of operations
}  // namespace

TEST_CASE("Adam matches a hand computation over two steps", "[optim][adam]") {
  Tensor p = param_with_grad({1.0, -2.0}, {0.5, -0.1});
  Adam adam({{"p", p}}, 0.9, 0.98, 1e-9);
  adam.step(0.1);
  // step 1: m = 0.1 g, v = 0.02 g^2; m_hat = g, v_hat = g^2 -> update = lr * sign(g) (almost)
  REQUIRE(p.at({0}) == Approx(1.0 - 0.1 * 0.5 / (0.5 + 1e-9)).epsilon(kTol));
  REQUIRE(p.at({1}) == Approx(-2.0 + 0.1 * 0.1 / (0.1 + 1e-9)).epsilon(kTol));
  // step 2 with a new gradient
  p.impl()->grad = from_vector<double>({1.0, 0.0}, {2}).impl_ptr();
  const double before = p.at({0});
  adam.step(0.1);
  const double m = 0.9 * 0.05 + 0.1 * 1.0, v = 0.98 * 0.02 * 0.25 + 0.02 * 1.0;
  const double expected = before - 0.1 * (m / (1 - 0.81)) / (std::sqrt(v / (1 - 0.98 * 0.98)) + 1e-9);
  REQUIRE(p.at({0}) == Approx(expected).epsilon(kTol));
  REQUIRE(adam.steps() == 2);
}

TEST_CASE("AdamW decays weights directly and Adam's state round-trips", "[optim][adam][checkpoint]") {
  Tensor p = param_with_grad({2.0}, {0.0});
  Adam adamw({{"p", p}}, 0.9, 0.98, 1e-9, 0.1, /*decoupled=*/true);
  adamw.step(0.5);
  REQUIRE(p.at({0}) == Approx(2.0 - 0.5 * 0.1 * 2.0).epsilon(kTol));  // zero gradient: only the decay
  Tensor q = param_with_grad({2.0}, {0.0});
  Adam copy({{"p", q}}, 0.9, 0.98, 1e-9, 0.1, true);
  copy.load_state(adamw.state());
  copy.set_steps(adamw.steps());
  p.impl()->grad = from_vector<double>({0.3}, {1}).impl_ptr();
  q.impl()->grad = from_vector<double>({0.3}, {1}).impl_ptr();
  { NoGradGuard g; Tensor(q).copy_(p); }
  adamw.step(0.5);
  copy.step(0.5);
  REQUIRE(p.at({0}) == q.at({0}));  // bit-identical after restoring the state
  auto state = adamw.state();
  state.erase("adam.v.p");
  REQUIRE_THROWS_WITH(copy.load_state(state), Contains("adam.v.p"));
}

TEST_CASE("SGD with momentum follows PyTorch's update", "[optim][sgd]") {
  Tensor p = param_with_grad({1.0}, {0.5});
  SGD sgd({{"p", p}}, 0.9);
  sgd.step(0.1);  // buf = g = 0.5
  REQUIRE(p.at({0}) == Approx(1.0 - 0.05).epsilon(kTol));
  sgd.step(0.1);  // buf = 0.9 * 0.5 + 0.5 = 0.95
  REQUIRE(p.at({0}) == Approx(0.95 - 0.095).epsilon(kTol));
}

TEST_CASE("clip_grad_norm scales all gradients together", "[optim][clip]") {
  Tensor a = param_with_grad({0, 0}, {3.0, 0.0});
  Tensor b = param_with_grad({0}, {4.0});
  NamedParameters ps{{"a", a}, {"b", b}};
  const double norm = clip_grad_norm(ps, 1.0);
  REQUIRE(norm == Approx(5.0).epsilon(kTol));
  REQUIRE(a.grad().at({0}) == Approx(3.0 / (5.0 + 1e-6)).epsilon(kTol));
  REQUIRE(b.grad().at({0}) == Approx(4.0 / (5.0 + 1e-6)).epsilon(kTol));
  REQUIRE(clip_grad_norm(ps, 10.0) == Approx(1.0).epsilon(1e-6));  // below the limit: unchanged
  Tensor c = param_with_grad({0}, {NAN});
  REQUIRE_FALSE(std::isfinite(clip_grad_norm({{"c", c}}, 1.0)));
}

TEST_CASE("learning-rate schedules", "[optim][schedule]") {
  Schedule noam{ScheduleKind::Noam, 2.0, 0.0, 4000, 100000, 512};
  // the paper's peak at step = warmup: scale * D^-0.5 * warmup^-0.5
  REQUIRE(noam.at(4000) == Approx(2.0 / std::sqrt(512.0) / std::sqrt(4000.0)).epsilon(kTol));
  REQUIRE(noam.at(2000) == Approx(noam.at(4000) / 2).epsilon(kTol));        // linear warmup
  REQUIRE(noam.at(16000) == Approx(noam.at(4000) / 2).epsilon(kTol));       // 1/sqrt decay
  Schedule cosine{ScheduleKind::Cosine, 1e-3, 1e-5, 100, 1100, 256};
  REQUIRE(cosine.at(50) == Approx(5e-4).epsilon(kTol));
  REQUIRE(cosine.at(100) == Approx(1e-3).epsilon(kTol));
  REQUIRE(cosine.at(600) == Approx(1e-5 + 0.5 * (1e-3 - 1e-5)).epsilon(kTol));
  REQUIRE(cosine.at(1100) == Approx(1e-5).epsilon(kTol));
  REQUIRE(cosine.at(5000) == Approx(1e-5).epsilon(kTol));
  REQUIRE_THROWS_WITH(parse_schedule("linear"), Contains("noam") && Contains("linear"));
}

TEST_CASE("Adam in float32 follows the float64 update", "[optim][adam]") {
  // The update runs in the parameter's dtype (train/optim/optim.cpp, adam_update). Five steps with the
  // same values and gradients in float32 and float64 must agree to float32 rounding: each step
  // moves w by about lr = 1e-2 and rounds it at ~6e-8 relative, so 1e-5 leaves a wide margin
  // and still fails on any formula difference (a dropped bias correction changes w by ~1e-2).
  using sf::test::kFloat32Tol;  // 1e-5, tests/test_util.h
  const std::vector<double> w0 = {0.5, -1.25, 2.0, 1e-3};
  const std::vector<std::vector<double>> grads = {
      {0.1, -0.2, 0.3, 1e-4}, {0.05, 0.2, -0.3, 2e-4}, {-0.1, 0.1, 0.0, -1e-4}, {0.2, -0.05, 0.1, 0}, {0, 0, 0, 0}};
  Tensor p64 = param_with_grad(w0, grads[0]);
  Tensor p32 = to_dtype(p64.detach(), Dtype::Float32);
  p32.requires_grad_();
  Adam a64({{"p", p64}}, 0.9, 0.98, 1e-9, 0.01, /*decoupled=*/true);
  Adam a32({{"p", p32}}, 0.9, 0.98, 1e-9, 0.01, /*decoupled=*/true);
  for (const auto& g : grads) {
    p64.impl()->grad = from_vector<double>(g, {4}).impl_ptr();
    p32.impl()->grad = to_dtype(from_vector<double>(g, {4}), Dtype::Float32).impl_ptr();
    a64.step(1e-2);
    a32.step(1e-2);
  }
  for (std::int64_t i = 0; i < 4; ++i) REQUIRE(p32.at({i}) == Approx(p64.at({i})).epsilon(kFloat32Tol));
  REQUIRE(p64.at({0}) != Approx(w0[0]).epsilon(kFloat32Tol));  // the steps did move the weights
}

TEST_CASE("clip_grad_norm and Adam in one OpenMP region give the same bits on 1 and 2 threads", "[optim][parallel]") {
  // clip_grad_norm, scale_grads and Adam::step each share all the tensors' elements among the
  // threads in one region (train/optim/optim.cpp). Sizes around kParallelMinElements (65536): a 256 x
  // 256 weight, one just above, a bias, a large one. An element skipped or updated twice on 2
  // threads would change the bits.
  const std::vector<Shape> shapes = {{256, 256}, {70001}, {300}, {1024, 200}, {7}};
  std::vector<double> norm_alone;  // the norm, summed as squared_norm tensor by tensor
  auto run = [&]() {
    Generator gen(11);
    NamedParameters ps;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      Tensor p = randn(shapes[i], gen);
      p.requires_grad_();
      p.impl()->grad = randn(shapes[i], gen).impl_ptr();
      ps.push_back({"p" + std::to_string(i), p});
    }
    double alone = 0;
    for (const auto& [_, p] : ps) alone += squared_norm(p.grad());
    norm_alone.push_back(std::sqrt(alone));
    Adam adam(ps, 0.9, 0.98, 1e-9, 0.0, false);
    std::vector<double> out = {clip_grad_norm(ps, 1.0)};  // the gradients' norm is about 700: they are scaled
    adam.step(1e-2);
    adam.step(1e-2);
    for (const auto& [_, p] : ps) {
      const std::vector<double> v = p.to_vector<double>();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
  const auto [one, two] = sf::test::on_one_and_two_threads(run);
  REQUIRE(one.size() == two.size());
  REQUIRE(one[0] > 1.0);  // clipping did scale the gradients
  REQUIRE(one[0] == norm_alone[0]);  // the same bits as squared_norm summed tensor by tensor
  REQUIRE(two[0] == norm_alone[1]);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < one.size(); ++i) differ += one[i] != two[i];
  REQUIRE(differ == 0);
}
