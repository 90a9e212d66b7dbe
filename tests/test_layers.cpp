// The basic layers (nn/embedding, nn/dropout, nn/norm, nn/feed_forward): values against plain
// loops written here, float64 gradient checks of every input and parameter (Embedding's and
// FeedForward's are entries of the gradcheck suite), the defining properties (padding row,
// dropout rate and scaling, normalised rows) and error messages.
//
// Letters: B batch, T sequence length, D model width, F d_ff, V vocabulary.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/norm.h"
#include "test_util.h"

using namespace sf;
using namespace sf::nn;
using Catch::Matchers::Contains;
using sf::test::grad_input;
using sf::test::max_abs_diff;
using sf::test::require_gradcheck;

namespace {

// Two float64 computations of the same O(1) values in a different order (the module vs the
// plain loops below) differ only by rounding, ~1e-16 per op over a few dozen ops.
constexpr double kLoopTol = 1e-12;

// Overwrites a parameter with N(0,1) values (as if trained), so that checks do not run at the
// special point weight = 1, bias = 0.
void randomise(const Tensor& param, Generator& gen) {
  NoGradGuard no_grad;
  const_cast<Tensor&>(param).copy_(randn(param.shape(), gen, param.dtype()));
}

// Mean and biased variance of the values v[begin, begin + n).
void row_stats(const std::vector<double>& v, std::size_t begin, std::size_t n, double& mean_out, double& var_out) {
  double m = 0, var = 0;
  for (std::size_t i = 0; i < n; ++i) m += v[begin + i];
  m /= static_cast<double>(n);
  for (std::size_t i = 0; i < n; ++i) var += (v[begin + i] - m) * (v[begin + i] - m);
  mean_out = m;
  var_out = var / static_cast<double>(n);
}

}  // namespace

// ================================================================================== Embedding

TEST_CASE("Embedding looks up one weight row per id", "[embedding]") {
  Generator gen(1);
  Embedding emb(7, 3, gen, -1, Dtype::Float64);
  REQUIRE(emb.weight.shape() == Shape{7, 3});
  REQUIRE(emb.named_parameters().size() == 1);
  REQUIRE(emb.named_parameters()[0].first == "weight");
  Tensor ids = from_vector<std::int64_t>({0, 6, 3, 3, 1, 5}, {2, 3});  // (B, T) = (2, 3)
  Tensor y = emb.forward(ids);
  REQUIRE(y.shape() == Shape{2, 3, 3});
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t t = 0; t < 3; ++t)
      for (std::int64_t d = 0; d < 3; ++d)
        REQUIRE(y.at({b, t, d}) == emb.weight.at({static_cast<std::int64_t>(ids.at({b, t})), d}));
}

TEST_CASE("Embedding init is N of 0 and 1 over sqrt D", "[embedding]") {
  constexpr std::int64_t kV = 1000, kD = 16;  // 16000 samples
  // std 1/sqrt(16) = 0.25. The sample mean has standard error 0.25/sqrt(16000) = 0.002 and the
  // sample std about 0.25/sqrt(2 * 16000) = 0.0014; 0.01 is 5 standard errors of the mean.
  constexpr double kStatTol = 0.01;
  Generator gen(2);
  Embedding emb(kV, kD, gen);
  const std::vector<double> w = emb.weight.to_vector<double>();
  double m = 0, var = 0;
  row_stats(w, 0, w.size(), m, var);
  REQUIRE(std::abs(m) < kStatTol);
  REQUIRE(std::abs(std::sqrt(var) - 0.25) < kStatTol);
}

TEST_CASE("Embedding padding row starts at zero and gets exactly zero gradient", "[embedding]") {
  constexpr std::int64_t kPad = 2, kV = 5, kD = 4;
  Generator gen(3);
  Embedding emb(kV, kD, gen, kPad, Dtype::Float64);
  for (std::int64_t d = 0; d < kD; ++d) REQUIRE(emb.weight.at({kPad, d}) == 0.0);
  for (std::int64_t d = 0; d < kD; ++d) REQUIRE(emb.weight.at({0, d}) != 0.0);  // other rows are random

  // The padding id appears twice, id 4 twice, id 0 once, id 1 once.
  const std::vector<std::int64_t> id_values = {4, 2, 0, 2, 4, 1};
  Tensor ids = from_vector<std::int64_t>(id_values, {2, 3});
  Tensor v = randn({2, 3, kD}, gen, Dtype::Float64);  // upstream gradient
  emb.forward(ids).backward(v);
  Tensor g = emb.weight.grad();
  REQUIRE(g.shape() == Shape{kV, kD});
  // Expected: grad[row] = sum of v at the positions holding that id; nothing for the padding row.
  std::vector<double> expected(kV * kD, 0.0);
  const std::vector<double> vv = v.to_vector<double>();
  for (std::size_t p = 0; p < id_values.size(); ++p)
    if (id_values[p] != kPad)
      for (std::int64_t d = 0; d < kD; ++d) expected[id_values[p] * kD + d] += vv[p * kD + d];
  for (std::int64_t d = 0; d < kD; ++d) REQUIRE(g.at({kPad, d}) == 0.0);  // exactly, not approximately
  REQUIRE(max_abs_diff(g, from_vector(expected, {kV, kD}, Dtype::Float64)) <= kLoopTol);
}

// The gradient check of Embedding's weight (repeated ids accumulate) is the gradcheck suite's
// entry embedding (train/classroom/gradcheck_suite.cpp, run by tests/test_gradcheck_suite.cpp).

TEST_CASE("Embedding errors name the id and the vocabulary", "[embedding]") {
  Generator gen(5);
  Embedding emb(5, 3, gen);
  REQUIRE_THROWS_WITH(emb.forward(from_vector<std::int64_t>({1, 7}, {1, 2})),
                      Contains("id 7") && Contains("out of range") && Contains("[0, 5)"));
  REQUIRE_THROWS_WITH(emb.forward(from_vector<std::int64_t>({-1, 0}, {1, 2})), Contains("id -1"));
  REQUIRE_THROWS_WITH(Embedding(5, 3, gen, 5), Contains("Embedding") && Contains("padding_idx") && Contains("5"));
  REQUIRE_THROWS_WITH(Embedding(0, 3, gen), Contains("Embedding") && Contains("num_embeddings 0"));
}

// ==================================================================================== Dropout

TEST_CASE("Dropout is the identity in eval mode and with p 0", "[dropout]") {
  Generator gen(6), data_gen(7);
  Tensor x = randn({4, 5}, data_gen, Dtype::Float64);
  SECTION("eval mode draws nothing and returns x") {
    Dropout drop(0.5, gen);
    drop.eval();
    const Generator::State before = gen.state();
    Tensor y = drop.forward(x);
    REQUIRE(max_abs_diff(y, x) == 0.0);
    REQUIRE(gen.state() == before);
  }
  SECTION("p 0 in train mode returns x") {
    Dropout drop(0.0, gen);
    REQUIRE(drop.is_training());
    REQUIRE(max_abs_diff(drop.forward(x), x) == 0.0);
  }
}

TEST_CASE("Dropout in train mode zeroes a fraction p and scales the rest", "[dropout]") {
  constexpr double kP = 0.3;
  constexpr std::int64_t kN = 20000;
  // The number of zeros is Binomial(N, p): the zeroed fraction has standard deviation
  // sqrt(p (1 - p) / N) = sqrt(0.21 / 20000) = 0.0032; 5 standard deviations = 0.016.
  const double kFractionTol = 5 * std::sqrt(kP * (1 - kP) / kN);
  Generator gen(8), data_gen(9);
  Dropout drop(kP, gen);
  Tensor x = randn({kN / 100, 100}, data_gen, Dtype::Float64);  // never exactly 0
  Tensor y = drop.forward(x);
  REQUIRE(y.shape() == x.shape());
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  std::int64_t zeros_count = 0;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0.0) {
      ++zeros_count;
    } else if (std::abs(yv[i] - xv[i] / (1 - kP)) > kLoopTol) {
      FAIL("kept element " << i << " is " << yv[i] << ", expected x / (1 - p) = " << xv[i] / (1 - kP));
    }
  }
  const double fraction = static_cast<double>(zeros_count) / kN;
  INFO("zeroed fraction " << fraction);
  REQUIRE(std::abs(fraction - kP) < kFractionTol);
  // A second call draws a new mask.
  REQUIRE(max_abs_diff(drop.forward(x), y) > 0);
}

TEST_CASE("Dropout gradcheck with a fixed mask", "[dropout][grad]") {
  Generator gen(10), data_gen(11);
  Dropout drop(0.4, gen);
  Tensor x = grad_input({3, 5}, data_gen);
  // gradcheck evaluates f many times; reseeding before each call keeps the same mask.
  require_gradcheck(
      [&](const std::vector<Tensor>& in) {
        gen.manual_seed(42);
        return drop.forward(in[0]);
      },
      {x});
}

TEST_CASE("Dropout rejects p outside 0 to 1", "[dropout]") {
  Generator gen(12);
  REQUIRE_THROWS_WITH(Dropout(1.0, gen), Contains("Dropout") && Contains("[0, 1)") && Contains("got 1"));
  REQUIRE_THROWS_WITH(Dropout(-0.1, gen), Contains("Dropout") && Contains("got -0.1"));
}

// ================================================================================== LayerNorm

TEST_CASE("LayerNorm rows have mean 0 and variance 1 at init", "[layer_norm][norm]") {
  constexpr std::int64_t kD = 32, kRows = 12;
  // Mean: 0 up to float64 rounding of values O(1). Variance: var / (var + eps) = 1 - eps / var;
  // the inputs 3 N(0,1) + 1 have row variances around 9 (far above 0.1 for D = 32), so the
  // deficit is below 1e-4 and a missing or wrong normalisation is off by O(1).
  constexpr double kMeanTol = 1e-12;
  constexpr double kVarTol = 1e-4;
  Generator gen(13);
  LayerNorm ln(kD, 1e-5, Dtype::Float64);
  Tensor x = add(mul(randn({3, 4, kD}, gen, Dtype::Float64), 3.0), 1.0);
  Tensor y = ln.forward(x);
  REQUIRE(y.shape() == x.shape());
  const std::vector<double> yv = y.to_vector<double>();
  for (std::int64_t r = 0; r < kRows; ++r) {
    double m = 0, var = 0;
    row_stats(yv, r * kD, kD, m, var);
    INFO("row " << r);
    REQUIRE(std::abs(m) < kMeanTol);
    REQUIRE(std::abs(var - 1.0) < kVarTol);
  }
}

TEST_CASE("LayerNorm matches a plain loop with trained weight and bias", "[layer_norm][norm]") {
  constexpr std::int64_t kD = 6;
  constexpr double kEps = 1e-5;
  Generator gen(14);
  LayerNorm ln(kD, kEps, Dtype::Float64);
  randomise(ln.weight, gen);
  randomise(ln.bias, gen);
  Tensor x = randn({2, 3, kD}, gen, Dtype::Float64);
  Tensor y = ln.forward(x);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t t = 0; t < 3; ++t) {
      double m = 0, var = 0;
      for (std::int64_t d = 0; d < kD; ++d) m += x.at({b, t, d}) / kD;
      for (std::int64_t d = 0; d < kD; ++d) var += (x.at({b, t, d}) - m) * (x.at({b, t, d}) - m) / kD;
      for (std::int64_t d = 0; d < kD; ++d) {
        const double expected = (x.at({b, t, d}) - m) / std::sqrt(var + kEps) * ln.weight.at({d}) + ln.bias.at({d});
        REQUIRE(std::abs(y.at({b, t, d}) - expected) < kLoopTol);
      }
    }
}

TEST_CASE("LayerNorm gradcheck of input weight and bias", "[layer_norm][norm][grad]") {
  Generator gen(15);
  LayerNorm ln(4, 1e-5, Dtype::Float64);
  randomise(ln.weight, gen);
  randomise(ln.bias, gen);
  SECTION("contiguous (B, T, D)") {
    Tensor x = grad_input({2, 3, 4}, gen);
    require_gradcheck([&](const std::vector<Tensor>& in) { return ln.forward(in[0]); }, {x, ln.weight, ln.bias});
  }
  SECTION("transposed input: D has stride 3") {
    Tensor base = grad_input({4, 3}, gen);  // x = base^T: (3, 4)
    require_gradcheck([&](const std::vector<Tensor>& in) { return ln.forward(transpose(in[0], 0, 1)); },
                      {base, ln.weight, ln.bias});
  }
}

TEST_CASE("LayerNorm errors name the expected width", "[layer_norm][norm]") {
  LayerNorm ln(8);
  REQUIRE_THROWS_WITH(ln.forward(zeros({2, 5})), Contains("LayerNorm") && Contains("(..., 8)") && Contains("(2, 5)"));
  REQUIRE_THROWS_WITH(LayerNorm(0), Contains("LayerNorm") && Contains("dim") && Contains("0"));
}

// ==================================================================================== RMSNorm

TEST_CASE("RMSNorm rows have root mean square 1 at init", "[rms_norm][norm]") {
  constexpr std::int64_t kD = 32, kRows = 12;
  // rms(y) = sqrt(ms / (ms + eps)) = 1 - eps / (2 ms) with eps = 1e-6 and ms ~ 10 here: the
  // deficit is ~1e-7; a wrong normalisation is off by O(1).
  constexpr double kRmsTol = 1e-6;
  Generator gen(16);
  RMSNorm rn(kD, 1e-6, Dtype::Float64);
  Tensor x = add(mul(randn({3, 4, kD}, gen, Dtype::Float64), 3.0), 1.0);
  const std::vector<double> yv = rn.forward(x).to_vector<double>();
  for (std::int64_t r = 0; r < kRows; ++r) {
    double ms = 0;
    for (std::int64_t d = 0; d < kD; ++d) ms += yv[r * kD + d] * yv[r * kD + d] / kD;
    INFO("row " << r);
    REQUIRE(std::abs(std::sqrt(ms) - 1.0) < kRmsTol);
  }
}

TEST_CASE("RMSNorm matches a plain loop with a trained weight", "[rms_norm][norm]") {
  constexpr std::int64_t kD = 5;
  constexpr double kEps = 1e-6;
  Generator gen(17);
  RMSNorm rn(kD, kEps, Dtype::Float64);
  randomise(rn.weight, gen);
  Tensor x = randn({4, kD}, gen, Dtype::Float64);
  Tensor y = rn.forward(x);
  for (std::int64_t r = 0; r < 4; ++r) {
    double ms = 0;
    for (std::int64_t d = 0; d < kD; ++d) ms += x.at({r, d}) * x.at({r, d}) / kD;
    for (std::int64_t d = 0; d < kD; ++d)
      REQUIRE(std::abs(y.at({r, d}) - x.at({r, d}) / std::sqrt(ms + kEps) * rn.weight.at({d})) < kLoopTol);
  }
}

TEST_CASE("RMSNorm gradcheck of input and weight", "[rms_norm][norm][grad]") {
  Generator gen(18);
  RMSNorm rn(4, 1e-6, Dtype::Float64);
  randomise(rn.weight, gen);
  SECTION("contiguous (B, T, D)") {
    Tensor x = grad_input({2, 3, 4}, gen);
    require_gradcheck([&](const std::vector<Tensor>& in) { return rn.forward(in[0]); }, {x, rn.weight});
  }
  SECTION("narrowed input: rows of 4 taken from rows of 7") {
    Tensor base = grad_input({3, 7}, gen);
    require_gradcheck([&](const std::vector<Tensor>& in) { return rn.forward(narrow(in[0], 1, 2, 4)); },
                      {base, rn.weight});
  }
}

TEST_CASE("RMSNorm errors name the expected width", "[rms_norm][norm]") {
  RMSNorm rn(4);
  REQUIRE_THROWS_WITH(rn.forward(zeros({3, 2, 6})), Contains("RMSNorm") && Contains("(..., 4)") && Contains("(3, 2, 6)"));
  REQUIRE_THROWS_WITH(RMSNorm(4, 0.0), Contains("RMSNorm") && Contains("eps"));
}

// ================================================================================ FeedForward

namespace {

// The activation as the paper defines it, in plain double arithmetic.
double relu_ref(double z) { return z > 0 ? z : 0; }
double gelu_ref(double z) { return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0))); }
double silu_ref(double z) { return z / (1 + std::exp(-z)); }

// y = W x + b for one vector, W: (out, in) as a Linear stores it.
std::vector<double> linear_ref(const Linear& lin, const std::vector<double>& x) {
  std::vector<double> y(lin.out_features);
  for (std::int64_t o = 0; o < lin.out_features; ++o) {
    double acc = lin.bias.at({o});
    for (std::int64_t k = 0; k < lin.in_features; ++k) acc += lin.weight.at({o, k}) * x[k];
    y[o] = acc;
  }
  return y;
}

}  // namespace

TEST_CASE("FeedForward matches a plain loop for each activation", "[feed_forward]") {
  constexpr std::int64_t kD = 4, kF = 6;
  const Activation act = GENERATE(Activation::ReLU, Activation::GELU, Activation::SwiGLU);
  INFO("activation " << activation_name(act));
  Generator init_gen(19), drop_gen(20), data_gen(21);
  FeedForward ff(kD, kF, act, 0.3, init_gen, drop_gen, Dtype::Float64);
  ff.eval();  // dropout off, so the loop below needs no mask
  Tensor x = randn({2, 3, kD}, data_gen, Dtype::Float64);
  Tensor y = ff.forward(x);
  REQUIRE(y.shape() == x.shape());
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t t = 0; t < 3; ++t) {
      std::vector<double> xr(kD);
      for (std::int64_t d = 0; d < kD; ++d) xr[d] = x.at({b, t, d});
      std::vector<double> h = linear_ref(*ff.fc1, xr);  // (F)
      if (act == Activation::SwiGLU) {
        const std::vector<double> g = linear_ref(*ff.gate, xr);
        for (std::int64_t j = 0; j < kF; ++j) h[j] = silu_ref(g[j]) * h[j];
      } else {
        for (double& z : h) z = act == Activation::ReLU ? relu_ref(z) : gelu_ref(z);
      }
      const std::vector<double> expected = linear_ref(*ff.fc2, h);  // (D)
      for (std::int64_t d = 0; d < kD; ++d) REQUIRE(std::abs(y.at({b, t, d}) - expected[d]) < kLoopTol);
    }
}

// The gradient check of FeedForward's input and every parameter, for each activation with dropout
// on, is the gradcheck suite's entry feed_forward (run by tests/test_gradcheck_suite.cpp).

TEST_CASE("FeedForward registers a gate only for SwiGLU", "[feed_forward]") {
  constexpr std::int64_t kD = 4, kF = 8;
  Generator init_gen(25), drop_gen(26);
  FeedForward relu_ff(kD, kF, Activation::ReLU, 0.0, init_gen, drop_gen);
  FeedForward swiglu_ff(kD, kF, Activation::SwiGLU, 0.0, init_gen, drop_gen);
  auto names = [](const Module& m) {
    std::vector<std::string> out;
    for (const auto& [name, t] : m.named_parameters()) out.push_back(name);
    return out;
  };
  REQUIRE(names(relu_ff) == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  REQUIRE(names(swiglu_ff) ==
          std::vector<std::string>{"fc1.weight", "fc1.bias", "gate.weight", "gate.bias", "fc2.weight", "fc2.bias"});
  REQUIRE(relu_ff.parameter_count() == (kD * kF + kF) + (kF * kD + kD));
  REQUIRE(swiglu_ff.parameter_count() == 2 * (kD * kF + kF) + (kF * kD + kD));
}

TEST_CASE("FeedForward dropout acts only in training", "[feed_forward][dropout]") {
  Generator init_a(27), init_b(27), drop_gen(28), data_gen(29);
  FeedForward with_drop(4, 16, Activation::GELU, 0.5, init_a, drop_gen, Dtype::Float64);
  FeedForward no_drop(4, 16, Activation::GELU, 0.0, init_b, drop_gen, Dtype::Float64);  // same weights
  Tensor x = randn({3, 4}, data_gen, Dtype::Float64);
  const Tensor reference = no_drop.forward(x);
  REQUIRE(max_abs_diff(with_drop.forward(x), reference) > 0);  // training: half the hidden units dropped
  with_drop.eval();
  REQUIRE_FALSE(with_drop.dropout->is_training());
  REQUIRE(max_abs_diff(with_drop.forward(x), reference) == 0.0);
}

TEST_CASE("FeedForward activation names and errors", "[feed_forward]") {
  REQUIRE(parse_activation("relu") == Activation::ReLU);
  REQUIRE(parse_activation("gelu") == Activation::GELU);
  REQUIRE(parse_activation("swiglu") == Activation::SwiGLU);
  REQUIRE(std::string(activation_name(Activation::SwiGLU)) == "swiglu");
  REQUIRE_THROWS_WITH(parse_activation("tanh"),
                      Contains("'tanh'") && Contains("relu") && Contains("gelu") && Contains("swiglu"));
  Generator init_gen(30), drop_gen(31);
  FeedForward ff(4, 8, Activation::ReLU, 0.0, init_gen, drop_gen);
  REQUIRE_THROWS_WITH(ff.forward(zeros({2, 3})), Contains("FeedForward") && Contains("(..., 4)") && Contains("(2, 3)"));
}
