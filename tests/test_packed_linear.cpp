// Tests for packed_linear (Linear's product on weights packed once, for decoding) against the
// plain triple loop, and for the scope that routes Linear to it.
//
// Letters: M rows of x, K = in, N = out; y (M,N) = x (M,K) @ W^T with W (N,K).
// Tags: [linear] on all; [packed]; [reference] where the kernel is checked against the plain loop.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "autograd/kernels.h"
#include "autograd/node.h"
#include "autograd/runtime/bf16.h"
#include "autograd/runtime/cpu_features.h"
#include "autograd/runtime/packed_linear.h"
#include "autograd/runtime/threads.h"
#include "test_util.h"

using namespace sf;

namespace {

using test::kUnitRoundoff32;

// y = x @ W^T through pack_weight + packed_linear; with a bias, y starts as it (accumulate).
Tensor packed_of(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor()) {
  const std::int64_t m = x.size(0), n = w.size(0), k = w.size(1);
  Tensor y = bias.defined() ? contiguous(bias.expand({m, n})) : zeros({m, n});
  packed_linear(x.data<float>(), m, pack_weight(w.data<float>(), n, k), y.data<float>(), bias.defined());
  return y;
}

Tensor reference_of(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor()) {
  const std::int64_t m = x.size(0), n = w.size(0), k = w.size(1);
  Tensor y = bias.defined() ? contiguous(bias.expand({m, n})) : zeros({m, n});
  packed_linear_reference(x.data<float>(), m, w.data<float>(), n, k, y.data<float>(), bias.defined());
  return y;
}

// One parameter-like weight: a leaf that requires grad (what the scope packs).
Tensor parameter(const Shape& shape, Generator& gen) {
  Tensor w = randn(shape, gen);
  w.requires_grad_(true);
  return w;
}

}  // namespace

TEST_CASE("packed_linear matches the plain loop on every edge of its blocks", "[linear][packed][reference]") {
  Generator gen(41);
  // M = 8 fills one register block and 9, 13 leave 1 and 5 rows; N = 32 is one panel, 33 and 70
  // leave a partial one; K = 1 is a single multiply-add; the last is the output projection's
  // shape (a decoding step of 32 sentences, D 256, V 8000).
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{
           {1, 1, 1}, {8, 32, 16}, {9, 33, 17}, {13, 70, 5}, {3, 7, 1}, {32, 8000, 256}}) {
    const Tensor x = randn({m, k}, gen), w = randn({n, k}, gen);
    INFO("M " << m << " N " << n << " K " << k);
    test::require_close_within_rounding(packed_of(x, w), reference_of(x, w), x, w.transpose(0, 1), kUnitRoundoff32);
    // With a bias: y starts as the bias and the finished sum is added to it, one rounding.
    const Tensor bias = randn({n}, gen);
    CHECK(packed_of(x, w, bias).to_vector<float>() == add(packed_of(x, w), bias).to_vector<float>());
  }
}

TEST_CASE("packed_linear: a row's result does not depend on the other rows or the thread count", "[linear][packed]") {
  Generator gen(42);
  const std::int64_t m = 37, n = 1000, k = 64;  // 2.4M multiply-adds: split between threads
  const Tensor x = randn({m, k}, gen), w = randn({n, k}, gen);
  const auto [one, two] = test::on_one_and_two_threads([&] { return packed_of(x, w); });
  REQUIRE(one == two);
  // Row 12 alone (M = 1) has the same bits as row 12 in a block of 8 among 37 rows: decoding a
  // sentence alone or in a batch, with or without the KV cache, gives the same numbers.
  const Tensor all = packed_of(x, w);
  for (std::int64_t i : {0, 12, 36}) {
    const Tensor alone = packed_of(contiguous(x.narrow(0, i, 1)), w);
    REQUIRE(alone.to_vector<float>() == contiguous(all.narrow(0, i, 1)).to_vector<float>());
  }
}

TEST_CASE("PackedWeightsScope routes Linear on parameters to packed_linear", "[linear][packed]") {
  Generator gen(43);
  const Tensor x = randn({2, 5, 24}, gen), w = parameter({40, 24}, gen), bias = parameter({40}, gen);
  const Tensor x2d = x.reshape({10, 24});
  const std::vector<float> packed = packed_of(x2d, w.detach(), bias.detach()).reshape({2, 5, 40}).to_vector<float>();
  NoGradGuard no_grad;
  const std::vector<float> plain = linear(x, w, bias).to_vector<float>();  // no scope: BLAS

  PackedWeights weights;
  {
    PackedWeightsScope scope(weights);
    REQUIRE(packed_weights_in_use() == &weights);
    CHECK(linear(x, w, bias).to_vector<float>() == packed);  // the packed kernel's bits
    CHECK(linear(x, w, bias).to_vector<float>() == packed);  // again, from the same packing
    CHECK(weights.size() == 1);
    // A weight that is not a parameter (computed, or not requiring grad) may be a temporary
    // whose memory is reused: it is never packed.
    const Tensor not_param = w.detach();
    CHECK(linear(x, not_param, bias).to_vector<float>() == plain);
    CHECK(weights.size() == 1);
    // float64 is not packed either.
    const Tensor w64 = parameter({40, 24}, gen).to(Dtype::Float64).detach().requires_grad_(true);
    linear(x.to(Dtype::Float64), w64, Tensor());
    CHECK(weights.size() == 1);
    // Scopes nest: the inner one's weights are used until it ends.
    PackedWeights inner;
    {
      PackedWeightsScope inner_scope(inner);
      CHECK(linear(x, w, bias).to_vector<float>() == packed);
      CHECK(inner.size() == 1);
    }
    REQUIRE(packed_weights_in_use() == &weights);
  }
  REQUIRE(packed_weights_in_use() == nullptr);
  CHECK(linear(x, w, bias).to_vector<float>() == plain);  // after the scope: BLAS again
}

// ---- bf16 ---------------------------------------------------------------------------------------

bool has_bf16_kernel(const char* what) {
  if (has_avx512_bf16()) return true;
  WARN("skipped: " << what << " needs AVX512-BF16; this CPU has " << bf16_units_found());
  return false;
}

TEST_CASE("packed_linear in bf16 matches gemm_bf16_reference on every edge of its blocks",
          "[linear][packed][bf16][reference]") {
  if (!has_bf16_kernel("packed_linear in bf16")) return;
  Generator gen(45);
  // K = 17, 5 and 1 are odd: the last pair is padded with a zero.
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{
           {1, 1, 1}, {8, 32, 16}, {9, 33, 17}, {13, 70, 5}, {32, 8000, 256}}) {
    const Tensor x = randn({m, k}, gen), w = randn({n, k}, gen), bias = randn({n}, gen);
    for (const bool accumulate : {false, true}) {
      INFO("M " << m << " N " << n << " K " << k << " accumulate " << accumulate);
      std::vector<float> fast = accumulate ? contiguous(bias.expand({m, n})).to_vector<float>()
                                           : std::vector<float>(static_cast<std::size_t>(m * n), 0.0f);
      std::vector<float> ref = fast;
      const std::vector<float> start = fast;
      packed_linear(x.data<float>(), m, pack_weight_bf16(w.data<float>(), n, k), fast.data(), accumulate);
      gemm_bf16_reference(false, true, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), x.data<float>(),
                          static_cast<int>(k), w.data<float>(), static_cast<int>(k), ref.data(), static_cast<int>(n),
                          accumulate);
      // The same rounded inputs and exact products: only float32's sums (and start + sum) differ.
      const float* xd = x.data<float>();
      const float* wd = w.data<float>();
      double worst = 0;
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double abs_product = 0;
          for (std::int64_t kk = 0; kk < k; ++kk)
            abs_product += std::abs(double(round_to_bf16(xd[i * k + kk])) * round_to_bf16(wd[j * k + kk]));
          const std::size_t at = static_cast<std::size_t>(i * n + j);
          const double allowed = (k + 2) * kUnitRoundoff32 * (abs_product + std::abs(start[at]));
          worst = std::max(worst, std::abs(double(fast[at]) - ref[at]) / allowed);
        }
      INFO("worst error / allowed " << worst);
      REQUIRE(worst <= 1.0);
    }
  }
}

TEST_CASE("packed_linear in bf16: a row's result does not depend on the other rows or the thread count",
          "[linear][packed][bf16]") {
  if (!has_bf16_kernel("packed_linear in bf16")) return;
  Generator gen(46);
  const std::int64_t m = 37, n = 1000, k = 64;
  const Tensor x = randn({m, k}, gen), w = randn({n, k}, gen);
  const PackedWeight packed = pack_weight_bf16(w.data<float>(), n, k);
  auto run = [&](const Tensor& rows) {
    Tensor y = zeros({rows.size(0), n});
    packed_linear(rows.data<float>(), rows.size(0), packed, y.data<float>(), false);
    return y;
  };
  const auto [one, two] = test::on_one_and_two_threads([&] { return run(x); });
  REQUIRE(one == two);
  const Tensor all = run(x);
  for (std::int64_t i : {0, 12, 36})
    REQUIRE(run(contiguous(x.narrow(0, i, 1))).to_vector<float>() ==
            contiguous(all.narrow(0, i, 1)).to_vector<float>());
}

TEST_CASE("PackedWeightsScope under bf16 matrix products packs bf16 copies", "[linear][packed][bf16]") {
  if (!has_bf16_kernel("packed_linear in bf16")) return;
  Generator gen(47);
  const Tensor x = randn({6, 32}, gen), w = parameter({48, 32}, gen);
  NoGradGuard no_grad;
  PackedWeights weights;
  PackedWeightsScope scope(weights);
  const std::vector<float> f32 = linear(x, w, Tensor()).to_vector<float>();  // packed in float32
  MatmulPrecisionScope bf16(MatmulPrecision::Bf16);
  const std::vector<float> in_bf16 = linear(x, w, Tensor()).to_vector<float>();
  CHECK(weights.size() == 2);  // the float32 and the bf16 packing of one weight
  Tensor expected = zeros({6, 48});
  packed_linear(x.data<float>(), 6, pack_weight_bf16(w.data<float>(), 48, 32), expected.data<float>(), false);
  CHECK(in_bf16 == expected.to_vector<float>());
  CHECK(in_bf16 != f32);  // it really rounded
}
