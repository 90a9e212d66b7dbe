// Absolute positional encodings (nn/positional): the sinusoidal table against the paper's
// formula, learned positions, forward with a start_pos offset (incremental decoding), gradient
// checks and errors. RoPE and ALiBi (nn/relative_positions) are tested elsewhere.
//
// Letters: B batch, T sequence length, D model width, L max_len.
#include <cmath>
#include <vector>

#include "nn/positional.h"
#include "test_util.h"

using namespace sf;
using namespace sf::nn;
using Catch::Matchers::Contains;
using sf::test::grad_input;
using sf::test::max_abs_diff;
using sf::test::require_gradcheck;

namespace {

// The test computes the angle as pos * exp(-(2i/D) ln 10000), the module as pos / 10000^(2i/D):
// the same number through different float64 roundings, ~1e-16 relative on angles up to ~50,
// so sin/cos agree to ~1e-14.
constexpr double kFormulaTol = 1e-12;
// float32 table against float64: values in [-1, 1] rounded to float32 (~6e-8), so 1e-6: tighter
// than the shared kFloat32Tol, as one rounding of values in [-1, 1] is all there is.
constexpr double kFloat32TableTol = 1e-6;
// Float64 sums of the same O(1) values in a different order.
constexpr double kLoopTol = 1e-12;

// The paper's PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(...), for column j.
double pe_formula(std::int64_t pos, std::int64_t j, std::int64_t D) {
  const std::int64_t i = j / 2;
  const double angle = static_cast<double>(pos) * std::exp(-(2.0 * i / D) * std::log(10000.0));
  return j % 2 == 0 ? std::sin(angle) : std::cos(angle);
}

}  // namespace

// ================================================================================= sinusoidal

TEST_CASE("Sinusoidal table matches the formula", "[positional][sinusoidal]") {
  constexpr std::int64_t kL = 50, kD = 16;
  SinusoidalPositional pe(kL, kD, Dtype::Float64);
  Tensor table = pe.table();
  REQUIRE(table.shape() == Shape{kL, kD});
  REQUIRE(pe.parameter_count() == 0);
  REQUIRE_FALSE(table.requires_grad());
  // A few (pos, column) pairs: both parities, first and last frequency, first and last row.
  const std::vector<std::pair<std::int64_t, std::int64_t>> points = {{0, 0}, {0, 1}, {1, 0},  {1, 1},  {7, 6},
                                                                     {7, 7}, {13, 10}, {49, 14}, {49, 15}, {30, 3}};
  for (const auto& [pos, j] : points) {
    INFO("pos " << pos << " column " << j);
    REQUIRE(std::abs(table.at({pos, j}) - pe_formula(pos, j, kD)) < kFormulaTol);
  }
  // Spot values by hand: PE[1, 0] = sin(1); PE[1, 1] = cos(1); PE[0] alternates 0, 1.
  REQUIRE(std::abs(table.at({1, 0}) - std::sin(1.0)) < kFormulaTol);
  REQUIRE(std::abs(table.at({1, 1}) - std::cos(1.0)) < kFormulaTol);
  for (std::int64_t j = 0; j < kD; ++j) REQUIRE(table.at({0, j}) == (j % 2 == 0 ? 0.0 : 1.0));
  // Every row has norm sqrt(D/2): each (sin, cos) pair has norm 1.
  for (std::int64_t pos = 0; pos < kL; ++pos) {
    double sq = 0;
    for (std::int64_t j = 0; j < kD; ++j) sq += table.at({pos, j}) * table.at({pos, j});
    REQUIRE(std::abs(sq - kD / 2.0) < kLoopTol);
  }
  // The float32 table is the float64 one rounded.
  SinusoidalPositional pe32(kL, kD);
  REQUIRE(pe32.table().dtype() == Dtype::Float32);
  REQUIRE(max_abs_diff(pe32.table().to(Dtype::Float64), table) < kFloat32TableTol);
}

TEST_CASE("Sinusoidal rows differ per position", "[positional][sinusoidal]") {
  constexpr std::int64_t kL = 50, kD = 16;
  // The closest pair of rows: the first (sin, cos) pair alone puts rows p and q at distance
  // 2 |sin((p - q) / 2)| >= 2 |sin(22)| = 0.018 for p - q < 50, so some element differs by at
  // least 0.018 / sqrt(2) = 0.0125. 1e-3 is below that and far above rounding.
  constexpr double kDistinctTol = 1e-3;
  SinusoidalPositional pe(kL, kD, Dtype::Float64);
  Tensor table = pe.table();
  for (std::int64_t p = 0; p < kL; ++p)
    for (std::int64_t q = p + 1; q < kL; ++q) {
      INFO("rows " << p << " and " << q);
      REQUIRE(max_abs_diff(table.narrow(0, p, 1), table.narrow(0, q, 1)) > kDistinctTol);
    }
}

TEST_CASE("Sinusoidal forward adds the table rows", "[positional][sinusoidal]") {
  constexpr std::int64_t kB = 2, kT = 5, kD = 6, kStart = 3;
  Generator gen(1);
  SinusoidalPositional pe(16, kD, Dtype::Float64);
  Tensor x = randn({kB, kT, kD}, gen, Dtype::Float64);
  Tensor y = pe.forward(x, kStart);
  REQUIRE(y.shape() == x.shape());
  for (std::int64_t b = 0; b < kB; ++b)
    for (std::int64_t t = 0; t < kT; ++t)
      for (std::int64_t j = 0; j < kD; ++j)
        REQUIRE(std::abs(y.at({b, t, j}) - (x.at({b, t, j}) + pe_formula(kStart + t, j, kD))) < kFormulaTol);
}

TEST_CASE("Sinusoidal gradcheck of the input", "[positional][sinusoidal][grad]") {
  Generator gen(2);
  SinusoidalPositional pe(10, 4, Dtype::Float64);
  Tensor x = grad_input({2, 3, 4}, gen);
  require_gradcheck([&](const std::vector<Tensor>& in) { return pe.forward(in[0], 4); }, {x});
}

// ==================================================================================== learned

TEST_CASE("Learned positions are a weight of N of 0 and 0.02", "[positional][learned]") {
  constexpr std::int64_t kL = 512, kD = 32;  // 16384 samples
  // Sample std: standard error 0.02 / sqrt(2 * 16384) = 1.1e-4; the mean: 0.02 / sqrt(16384)
  // = 1.6e-4. 1e-3 is over 6 standard errors of either.
  constexpr double kStatTol = 1e-3;
  Generator gen(3);
  LearnedPositional pe(kL, kD, gen);
  REQUIRE(pe.named_parameters().size() == 1);
  REQUIRE(pe.named_parameters()[0].first == "weight");
  REQUIRE(pe.weight.shape() == Shape{kL, kD});
  const std::vector<double> w = pe.weight.to_vector<double>();
  double m = 0, sq = 0;
  for (double v : w) m += v / w.size();
  for (double v : w) sq += (v - m) * (v - m) / w.size();
  REQUIRE(std::abs(m) < kStatTol);
  REQUIRE(std::abs(std::sqrt(sq) - 0.02) < kStatTol);
}

TEST_CASE("Learned forward adds the weight rows and only they get gradient", "[positional][learned]") {
  constexpr std::int64_t kL = 8, kD = 3, kT = 4, kStart = 2;
  Generator gen(4);
  LearnedPositional pe(kL, kD, gen, Dtype::Float64);
  Tensor x = randn({2, kT, kD}, gen, Dtype::Float64);
  Tensor y = pe.forward(x, kStart);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t t = 0; t < kT; ++t)
      for (std::int64_t j = 0; j < kD; ++j)
        REQUIRE(y.at({b, t, j}) == x.at({b, t, j}) + pe.weight.at({kStart + t, j}));
  Tensor v = randn(y.shape(), gen, Dtype::Float64);
  y.backward(v);
  Tensor g = pe.weight.grad();
  for (std::int64_t pos = 0; pos < kL; ++pos)
    for (std::int64_t j = 0; j < kD; ++j) {
      // Row pos was used by step t = pos - kStart of every batch element; unused rows get 0.
      const bool used = pos >= kStart && pos < kStart + kT;
      const double expected = used ? v.at({0, pos - kStart, j}) + v.at({1, pos - kStart, j}) : 0.0;
      REQUIRE(std::abs(g.at({pos, j}) - expected) < kLoopTol);
    }
}

TEST_CASE("Learned gradcheck of input and weight", "[positional][learned][grad]") {
  Generator gen(5);
  LearnedPositional pe(7, 3, gen, Dtype::Float64);
  Tensor x = grad_input({2, 3, 3}, gen);
  require_gradcheck([&](const std::vector<Tensor>& in) { return pe.forward(in[0], 2); }, {x, pe.weight});
}

// ================================================================================ both kinds

TEST_CASE("Positional forward with start_pos equals the slice of the full result",
          "[positional][sinusoidal][learned]") {
  // Incremental decoding: feeding steps start_pos.. alone must give what the full pass gives.
  constexpr std::int64_t kL = 12, kD = 4, kFull = 10;
  Generator gen(6);
  SinusoidalPositional sin_pe(kL, kD, Dtype::Float64);
  LearnedPositional learned_pe(kL, kD, gen, Dtype::Float64);
  Tensor x = randn({2, kFull, kD}, gen, Dtype::Float64);
  const Tensor full_sin = sin_pe.forward(x), full_learned = learned_pe.forward(x);
  for (std::int64_t start : {0, 1, 4, 9})
    for (std::int64_t len : {1, 3}) {
      if (start + len > kFull) continue;
      INFO("start " << start << " length " << len);
      Tensor part = x.narrow(1, start, len);  // (B, len, D), a non-contiguous view
      REQUIRE(max_abs_diff(sin_pe.forward(part, start), full_sin.narrow(1, start, len)) == 0.0);
      REQUIRE(max_abs_diff(learned_pe.forward(part, start), full_learned.narrow(1, start, len)) == 0.0);
    }
}

TEST_CASE("Positional errors name start_pos T and max_len", "[positional][sinusoidal][learned]") {
  Generator gen(7);
  SinusoidalPositional sin_pe(8, 4);
  LearnedPositional learned_pe(8, 4, gen);
  Tensor x = zeros({1, 3, 4});
  REQUIRE_NOTHROW(sin_pe.forward(x, 5));  // positions 5, 6, 7: the last rows
  REQUIRE_THROWS_WITH(sin_pe.forward(x, 6), Contains("SinusoidalPositional") && Contains("start_pos 6") &&
                                                 Contains("T 3") && Contains("max_len 8"));
  REQUIRE_THROWS_WITH(learned_pe.forward(x, 6), Contains("LearnedPositional") && Contains("start_pos 6") &&
                                                     Contains("max_len 8"));
  REQUIRE_THROWS_WITH(learned_pe.forward(zeros({1, 9, 4})), Contains("T 9") && Contains("max_len 8"));
  REQUIRE_THROWS_WITH(sin_pe.forward(x, -1), Contains("start_pos -1"));
  REQUIRE_THROWS_WITH(sin_pe.forward(zeros({1, 3, 5})), Contains("(B, T, 4)") && Contains("(1, 3, 5)"));
  REQUIRE_THROWS_WITH(sin_pe.forward(zeros({1, 3, 4}, Dtype::Float64)), Contains("float32") && Contains("float64"));
}
