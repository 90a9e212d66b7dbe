// The attention kernel ladder (autograd/ladder/ladder.h): every rung computes what rung 1, the
// four nested loops, computes, in values and gradients (rungs 4 and 5 against rung 1 given their
// band as a mask); rungs 1, 4 and 5 pass float64 gradient checks, rung 1 with padding, causal and
// fully blocked rows.
//
// Letters: B batch, H heads, Tq query length, Tk key length, Dh head width.
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "autograd/ladder/ladder.h"
#include "test_util.h"

using namespace sf;
using sf::test::grad_input;
using sf::test::kFloat64Tol;
using sf::test::require_gradcheck;

namespace {

// (Tq,Tk), true at key j > i: the causal mask.
Tensor causal_mask(std::int64_t Tq, std::int64_t Tk) {
  std::vector<bool> blocked;
  for (std::int64_t i = 0; i < Tq; ++i)
    for (std::int64_t j = 0; j < Tk; ++j) blocked.push_back(j > i);
  return from_vector<bool>(blocked, {Tq, Tk});
}

// (Tq,Tk), true where query i (at position i + Tk - Tq) may not read key j: after it, or (window
// W > 0) W or more positions before it. The band of rungs 4 and 5 written as a mask for rung 1.
Tensor band_mask(std::int64_t Tq, std::int64_t Tk, std::int64_t window) {
  std::vector<bool> blocked;
  for (std::int64_t i = 0; i < Tq; ++i)
    for (std::int64_t j = 0; j < Tk; ++j) {
      const std::int64_t pos = i + Tk - Tq;
      blocked.push_back(j > pos || (window > 0 && j <= pos - window));
    }
  return from_vector<bool>(blocked, {Tq, Tk});
}

// (B,1,1,Tk), true at key j >= lengths[b]: a batch's padding.
Tensor padding(const std::vector<std::int64_t>& lengths, std::int64_t Tk) {
  std::vector<bool> blocked;
  for (std::int64_t len : lengths)
    for (std::int64_t j = 0; j < Tk; ++j) blocked.push_back(j >= len);
  return from_vector<bool>(blocked, {static_cast<std::int64_t>(lengths.size()), 1, 1, Tk});
}

// The gradients of sum(out * w) with respect to q, k, v, for one rung.
template <class F>
std::vector<Tensor> grads_of(F rung, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& w) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : {q, k, v}) {
    Tensor leaf = clone(t.detach());
    leaf.requires_grad_();
    leaves.push_back(leaf);
  }
  sum(mul(rung(leaves[0], leaves[1], leaves[2]), w)).backward();
  return {leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
}

}  // namespace

TEST_CASE("attention ladder: rungs 2 and 3 compute rung 1's loops, values and gradients", "[attention][ladder][reference]") {
  Generator gen(11);
  const std::int64_t B = 2, H = 2, T = 7, Dh = 4;
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  const Tensor q = grad_input({B, H, T, Dh}, gen), k = grad_input({B, H, T, Dh}, gen), v = grad_input({B, H, T, Dh}, gen);
  const Tensor w = randn({B, H, T, Dh}, gen, Dtype::Float64);  // weights of the loss sum(out * w)
  const std::vector<Tensor> masks = {Tensor(), causal_mask(T, T), padding({7, 4}, T)};
  for (std::size_t m = 0; m < masks.size(); ++m) {
    INFO("mask " << m << " (0 none, 1 causal, 2 padding)");
    const Tensor& mask = masks[m];
    auto loops = [&](const Tensor& a, const Tensor& b, const Tensor& c) { return attention_loops(a, b, c, mask, scale); };
    auto naive = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
      return attention_naive(a, b, c, mask, Tensor(), scale);
    };
    auto tiled = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
      return tiled_attention(a, b, c, mask, Tensor(), scale, 3);
    };
    const Tensor expected = loops(q, k, v);
    CHECK(test::max_abs_diff(naive(q, k, v), expected) <= kFloat64Tol);
    CHECK(test::max_abs_diff(tiled(q, k, v), expected) <= kFloat64Tol);
    const std::vector<Tensor> g1 = grads_of(loops, q, k, v, w), g2 = grads_of(naive, q, k, v, w),
                              g3 = grads_of(tiled, q, k, v, w);
    for (std::size_t i = 0; i < 3; ++i) {
      INFO("gradient of input " << i << " (q, k, v)");
      CHECK(test::max_abs_diff(g2[i], g1[i]) <= kFloat64Tol);
      CHECK(test::max_abs_diff(g3[i], g1[i]) <= kFloat64Tol);
    }
  }
}

TEST_CASE("attention ladder rung 1 (loops) gradchecks with causal, padding and a fully blocked row",
          "[attention][ladder][grad]") {
  Generator gen(12);
  auto check = [&](const Tensor& mask, std::int64_t B) {
    auto f = [&](const std::vector<Tensor>& in) { return attention_loops(in[0], in[1], in[2], mask, 0.5); };
    require_gradcheck(f, {grad_input({B, 2, 4, 3}, gen), grad_input({B, 2, 4, 3}, gen), grad_input({B, 2, 4, 3}, gen)});
  };
  check(causal_mask(4, 4), 2);
  check(padding({4, 2}, 4), 2);
  Tensor blocked_row = zeros({4, 4}, Dtype::Bool);
  for (std::int64_t j = 0; j < 4; ++j) blocked_row.set({1, j}, 1.0);
  check(blocked_row, 1);
  // the fully blocked row outputs zeros
  const Tensor out = attention_loops(randn({1, 1, 4, 3}, gen, Dtype::Float64), randn({1, 1, 4, 3}, gen, Dtype::Float64),
                                     randn({1, 1, 4, 3}, gen, Dtype::Float64), blocked_row, 0.5);
  for (std::int64_t d = 0; d < 3; ++d) CHECK(out.at({0, 0, 1, d}) == 0.0);
}

TEST_CASE("attention ladder rung 1 rejects bad inputs with one line", "[attention][ladder][errors]") {
  Generator gen(13);
  const Tensor q = randn({1, 2, 3, 4}, gen), k = randn({1, 2, 5, 4}, gen);
  CHECK_THROWS_WITH(attention_loops(q, k, randn({1, 2, 5, 3}, gen), Tensor(), 1.0),
                    Catch::Contains("expected q (B,H,Tq,Dh) and k, v (B,H,Tk,Dh)"));
  CHECK_THROWS_WITH(attention_loops(q, k, k, zeros({3, 5}), 1.0), Catch::Contains("expected a bool mask"));
}

TEST_CASE("attention ladder rungs 4 (window) and 5 (causal) compute rung 1 with the band as a mask",
          "[attention][ladder][reference]") {
  Generator gen(14);
  const std::int64_t B = 2, H = 2, Dh = 4;
  // Tq = Tk (training), Tq < Tk (the last queries of a longer sequence, as decoding with a cache)
  for (const auto& [Tq, Tk] : std::vector<std::pair<std::int64_t, std::int64_t>>{{9, 9}, {4, 9}}) {
    const Tensor q = grad_input({B, H, Tq, Dh}, gen), k = grad_input({B, H, Tk, Dh}, gen),
                 v = grad_input({B, H, Tk, Dh}, gen);
    const Tensor w = randn({B, H, Tq, Dh}, gen, Dtype::Float64);
    for (std::int64_t window : {0, 1, 3, 20}) {  // 0: rung 5 (causal); 20 > Tk: a window as wide as causal
      for (std::int64_t block : {1, 2, 4, 64}) {
        INFO("Tq " << Tq << ", Tk " << Tk << ", window " << window << ", block " << block);
        const Tensor mask = band_mask(Tq, Tk, window);
        auto loops = [&](const Tensor& a, const Tensor& b, const Tensor& c) { return attention_loops(a, b, c, mask, 0.5); };
        auto banded = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
          return window > 0 ? window_attention(a, b, c, window, 0.5, block) : causal_attention(a, b, c, 0.5, block);
        };
        CHECK(test::max_abs_diff(banded(q, k, v), loops(q, k, v)) <= kFloat64Tol);
        const std::vector<Tensor> g1 = grads_of(loops, q, k, v, w), g = grads_of(banded, q, k, v, w);
        for (std::size_t i = 0; i < 3; ++i) {
          INFO("gradient of input " << i << " (q, k, v)");
          CHECK(test::max_abs_diff(g[i], g1[i]) <= kFloat64Tol);
        }
      }
    }
  }
}

TEST_CASE("attention ladder rungs 4 and 5 gradcheck", "[attention][ladder][grad]") {
  Generator gen(15);
  auto window = [&](const std::vector<Tensor>& in) { return window_attention(in[0], in[1], in[2], 2, 0.5, 2); };
  require_gradcheck(window, {grad_input({1, 2, 5, 3}, gen), grad_input({1, 2, 5, 3}, gen), grad_input({1, 2, 5, 3}, gen)});
  auto causal = [&](const std::vector<Tensor>& in) { return causal_attention(in[0], in[1], in[2], 0.5, 2); };
  require_gradcheck(causal, {grad_input({1, 2, 3, 3}, gen), grad_input({1, 2, 5, 3}, gen), grad_input({1, 2, 5, 3}, gen)});
  CHECK_THROWS_WITH(window_attention(randn({1, 1, 2, 2}, gen), randn({1, 1, 2, 2}, gen), randn({1, 1, 2, 2}, gen), 0, 1.0),
                    Catch::Contains("expected a window of at least 1 key, got 0"));
}
