// fast_exp (autograd/runtime/fast_exp.h), the vectorisable float32 exp behind the float32 softmax and
// cross-entropy: against std::exp over a dense sweep of the whole float range, the special
// values at the ends, a vectorised loop against one call at a time, and the float32 ops that
// use it against their float64 versions (which use std::exp), on 1 and 2 threads.
//
// Letters: N rows, V classes (cross-entropy), n the length of a softmax row.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "autograd/runtime/fast_exp.h"
#include "autograd/runtime/threads.h"
#include "test_util.h"

using namespace sf;

namespace {

// The bound claimed in fast_exp.h: at most 1 ulp from exp computed in double and rounded to
// float (a measurement over every float in the range found 1.08 ulp from the exact value at
// worst, i.e. never 2 float steps from the rounded one).
constexpr std::int64_t kFastExpMaxUlp = 1;
// Bit patterns visited by the sweep: every 2^12-th of all 2^32 (~1M), plus this many evenly
// spaced points across [kFastExpMinArg, kFastExpMaxArg]. Both run in well under a second.
constexpr std::uint32_t kPatternStride = 1u << 12;
constexpr int kEvenPoints = 1 << 20;

// The reference: exp in double, rounded once to float (float64 exp is exact to ~1e-16, far
// finer than a float ulp, so this is the correctly rounded result but for rare ties).
float reference_exp(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }

// Distance in float steps between two finite floats of the same sign: consecutive floats have
// consecutive bit patterns.
std::int64_t ulp_distance(float a, float b) {
  const auto ia = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a));
  const auto ib = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(b));
  return ia > ib ? ia - ib : ib - ia;
}

// fast_exp over an array in a loop the compiler vectorises (as the kernels use it).
void fast_exp_loop(const float* x, float* y, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) y[i] = fast_exp(x[i]);
}

// What fast_exp must return for x: NaN stays NaN (checked apart), above the range +inf, below
// it 0, inside it exp within kFastExpMaxUlp. Returns false (and says why) on a violation.
bool check_one(float x, float got, std::int64_t& worst_ulp, float& worst_x) {
  if (std::isnan(x)) return std::isnan(got);
  if (x > kFastExpMaxArg) return got == std::numeric_limits<float>::infinity();
  if (x < kFastExpMinArg) return got == 0.0f;
  const std::int64_t d = ulp_distance(got, reference_exp(x));
  if (d > worst_ulp) {
    worst_ulp = d;
    worst_x = x;
  }
  return d <= kFastExpMaxUlp;
}

using test::ids;                     // tests/test_util.h
using test::on_one_and_two_threads;

}  // namespace

TEST_CASE("fast_exp is within its ulp bound of exp over a dense sweep of all floats", "[fast_exp][reference]") {
  std::int64_t worst_ulp = 0, wrong = 0, inside = 0;
  float worst_x = 0;
  SECTION("every 2^12-th bit pattern: all signs, exponents, NaN and infinities") {
    std::vector<float> x, y;
    for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += kPatternStride)
      x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
    y.resize(x.size());
    fast_exp_loop(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
    for (std::size_t i = 0; i < x.size(); ++i) {
      wrong += !check_one(x[i], y[i], worst_ulp, worst_x);
      inside += x[i] >= kFastExpMinArg && x[i] <= kFastExpMaxArg;
    }
    REQUIRE(inside > 100000);  // the sweep did test the finite range, not only its ends
  }
  SECTION("evenly spaced points across the finite range") {
    std::vector<float> x(kEvenPoints), y(kEvenPoints);
    const double lo = kFastExpMinArg, hi = kFastExpMaxArg;
    for (int i = 0; i < kEvenPoints; ++i) x[i] = static_cast<float>(lo + (hi - lo) * i / (kEvenPoints - 1));
    fast_exp_loop(x.data(), y.data(), kEvenPoints);
    for (int i = 0; i < kEvenPoints; ++i) wrong += !check_one(x[i], y[i], worst_ulp, worst_x);
  }
  INFO("worst: " << worst_ulp << " ulp at x = " << worst_x << " (fast_exp " << fast_exp(worst_x) << ", exp "
                 << reference_exp(worst_x) << ")");
  CHECK(worst_ulp <= kFastExpMaxUlp);
  CHECK(wrong == 0);
}

TEST_CASE("fast_exp special values and the ends of its range", "[fast_exp][reference]") {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  CHECK(fast_exp(0.0f) == 1.0f);  // r = 0, n = 0: the polynomial's constant term, exactly
  CHECK(fast_exp(-0.0f) == 1.0f);
  CHECK(ulp_distance(fast_exp(1.0f), reference_exp(1.0f)) <= kFastExpMaxUlp);
  CHECK(fast_exp(-kInf) == 0.0f);  // a masked (-inf) logit has probability exactly 0
  CHECK(fast_exp(kInf) == kInf);
  CHECK(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
  CHECK(fast_exp(-1000.0f) == 0.0f);
  CHECK(fast_exp(1000.0f) == kInf);

  // Top: kFastExpMaxArg is the largest float whose (rounded) exp is finite, and exp of the next
  // float up overflows in the reference too, so +inf there is the correct answer.
  const float above_max = std::nextafter(kFastExpMaxArg, kInf);
  CHECK(std::isfinite(reference_exp(kFastExpMaxArg)));
  CHECK(reference_exp(above_max) == kInf);
  CHECK(std::isfinite(fast_exp(kFastExpMaxArg)));
  CHECK(ulp_distance(fast_exp(kFastExpMaxArg), reference_exp(kFastExpMaxArg)) <= kFastExpMaxUlp);
  CHECK(fast_exp(above_max) == kInf);

  // Bottom: below kFastExpMinArg the exact result is a denormal (below FLT_MIN ~ 1.2e-38),
  // which fast_exp flushes to 0 (documented in fast_exp.h); at kFastExpMinArg itself it is
  // about FLT_MIN.
  const float below_min = std::nextafter(kFastExpMinArg, -kInf);
  CHECK(reference_exp(below_min) < std::numeric_limits<float>::min());
  CHECK(fast_exp(below_min) == 0.0f);
  CHECK(fast_exp(-100.0f) == 0.0f);  // exp(-100) ~ 3.7e-44, a denormal: flushed to 0
  CHECK(ulp_distance(fast_exp(kFastExpMinArg), reference_exp(kFastExpMinArg)) <= kFastExpMaxUlp);
}

TEST_CASE("fast_exp in a vectorised loop gives the same bits as one call at a time", "[fast_exp]") {
  // The kernels rely on this: the same binary gives the same exp whether a value lands in a
  // vector lane or in the scalar tail of a loop.
  Generator gen(41);
  const std::vector<float> x = mul(randn({4099}, gen), 30.0).to_vector<float>();
  std::vector<float> y(x.size());
  fast_exp_loop(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  std::int64_t differ = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    volatile float xi = x[i];  // volatile: one value at a time, no vector code
    differ += std::bit_cast<std::uint32_t>(fast_exp(xi)) != std::bit_cast<std::uint32_t>(y[i]);
  }
  CHECK(differ == 0);
}

TEST_CASE("float32 cross_entropy with fast_exp matches float64 and is the same on 1 and 2 threads",
          "[fast_exp][loss][cross_entropy]") {
  // Large enough (N * V > 65536) that the kernels' row loops run threaded.
  constexpr std::int64_t kN = 70, kV = 1001;
  // float32 vs float64 of the same loss: the logits are rounded to float32 (relative 6e-8), the
  // exps are within 1 ulp, the sums are in double: agreement to 1e-6 relative is expected, and
  // 1e-5 (tests/test_util.h's float32 tolerance) is far below any real mistake.
  constexpr double kLossRel = test::kFloat32Tol;
  // Gradient entries are (p - q) / count with count ~ 60: p is good to ~1e-6 relative (exp of a
  // float32 argument rounded near lse ~ 10), so entries are good to ~1e-8 absolute.
  constexpr double kGradAbs = 1e-7;
  Generator gen(42);
  Tensor l64 = mul(randn({kN, kV}, gen, Dtype::Float64), 3.0);
  std::vector<std::int64_t> targets(kN);
  for (std::int64_t n = 0; n < kN; ++n) targets[n] = n % 7 == 3 ? -100 : (n * 37) % kV;  // some rows ignored
  for (double smoothing : {0.0, 0.1}) {
    INFO("label_smoothing " << smoothing);
    Tensor a = l64.detach().requires_grad_();
    Tensor la = cross_entropy(a, ids(targets), -100, smoothing);
    la.backward();
    auto run32 = [&] {
      Tensor b = l64.detach().to(Dtype::Float32).requires_grad_();
      Tensor lb = cross_entropy(b, ids(targets), -100, smoothing);
      lb.backward();
      std::vector<double> out = b.grad().to_vector<double>();
      out.push_back(lb.item());
      return out;
    };
    const auto [one, two] = on_one_and_two_threads(run32);
    REQUIRE(one == two);  // bit-identical
    const double loss32 = one.back();
    CHECK(std::abs(loss32 - la.item()) <= kLossRel * std::abs(la.item()));
    const std::vector<double> g64 = a.grad().to_vector<double>();
    double worst = 0;
    for (std::size_t i = 0; i < g64.size(); ++i) worst = std::max(worst, std::abs(one[i] - g64[i]));
    INFO("largest gradient difference " << worst);
    CHECK(worst <= kGradAbs);
  }
}

TEST_CASE("float32 softmax and log_softmax with fast_exp match float64 and are the same on 1 and 2 threads",
          "[fast_exp][softmax]") {
  // softmax values are <= 1 and rows sum to 1: float32 agrees with float64 to a few 1e-8
  // absolute (exp within 1 ulp, sum in double, one rounding per output).
  constexpr double kSoftmaxAbs = 1e-6;
  // log_softmax values are O(1..10) here (x ~ 3 N(0,1) over n up to 300): float32's relative
  // precision 6e-8 times ~10, plus the rounding of log(s).
  constexpr double kLogSoftmaxAbs = 1e-5;
  // Gradients: g ~ N(0,1), the backward's sums in double. softmax's are good to ~2e-7;
  // log_softmax's exp(y) inherits y's float32 rounding (~5e-7 at y ~ -8) times sum g (~20 for
  // n = 300): ~5e-6 seen.
  constexpr double kGradAbs = 1e-5;
  Generator gen(43);
  for (std::int64_t n : {24, 300}) {  // attention's short rows and a vocabulary-like row
    INFO("row length " << n);
    const std::int64_t rows = 70000 / n + 1;  // over 65536 elements: the row loop is threaded
    Tensor x64 = mul(randn({rows, n}, gen, Dtype::Float64), 3.0);
    // a masked entry in every row, as attention produces: its probability is exactly 0
    for (std::int64_t r = 0; r < rows; ++r) x64.set({r, (r * 5) % n}, -std::numeric_limits<double>::infinity());
    const Tensor g64 = randn({rows, n}, gen, Dtype::Float64);
    for (bool log : {false, true}) {
      INFO((log ? "log_softmax" : "softmax"));
      auto op = [&](const Tensor& x) { return log ? log_softmax(x, 1) : softmax(x, 1); };
      Tensor a = x64.detach().requires_grad_();
      Tensor ya = op(a);
      ya.backward(g64);
      auto run32 = [&] {
        Tensor b = x64.detach().to(Dtype::Float32).requires_grad_();
        Tensor yb = op(b);
        yb.backward(g64.to(Dtype::Float32));
        std::vector<double> out = yb.to_vector<double>();
        const std::vector<double> gb = b.grad().to_vector<double>();
        out.insert(out.end(), gb.begin(), gb.end());
        return out;
      };
      const auto [one, two] = on_one_and_two_threads(run32);
      REQUIRE(one == two);  // bit-identical
      const std::vector<double> y64 = ya.to_vector<double>(), gx64 = a.grad().to_vector<double>();
      double worst_y = 0, worst_g = 0;
      std::int64_t masked_wrong = 0;
      for (std::size_t i = 0; i < y64.size(); ++i) {
        if (std::isinf(y64[i])) {  // log_softmax of a masked entry: -inf in both
          masked_wrong += one[i] != y64[i];
        } else {
          worst_y = std::max(worst_y, std::abs(one[i] - y64[i]));
        }
        if (!log && y64[i] == 0) masked_wrong += one[i] != 0.0;  // softmax of a masked entry: exactly 0
        worst_g = std::max(worst_g, std::abs(one[y64.size() + i] - gx64[i]));
      }
      INFO("largest value difference " << worst_y << ", gradient difference " << worst_g);
      CHECK(masked_wrong == 0);
      CHECK(worst_y <= (log ? kLogSoftmaxAbs : kSoftmaxAbs));
      CHECK(worst_g <= kGradAbs);
    }
  }
}
