// Fused cross_entropy (autograd/ops_loss.cpp): a hand computation on tiny examples (its gradient
// check: the gradcheck suite's entry cross_entropy), the fused op against the same math composed from exp/log/max/sum, ignore_index,
// label smoothing (0 is plain NLL; at logits = log q the loss is the entropy of q), numerical
// stability, float32 against float64, error messages.
//
// Letters: N rows (positions), V classes.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "test_util.h"

using namespace sf;
using sf::test::max_abs_diff;

namespace {

// float64 results computed two ways (fused vs composed, or fused vs a plain loop in this
// file): the same formulas in another order, O(1) values, rounding ~1e-16 per op.
using sf::test::kFloat64Tol;  // 1e-12, tests/test_util.h
// float32 vs float64 of the same op: logits of size ~10, a log-sum-exp over V = 11 terms;
// float32 rounds at ~6e-8 relative, so 1e-5 is generous yet far below any real mistake.
using sf::test::kFloat32Tol;  // 1e-5, tests/test_util.h
// Logits shifted by 1000 are stored to ~1e-13 (float64) or ~3e-5 (float32, half an ulp at 1000)
// absolute; the loss inherits errors of that size from its inputs, not from the op.
constexpr double kShiftedFloat64Tol = 1e-10;
constexpr double kShiftedFloat32Tol = 2e-4;
// Smoothing 0.1 moves this loss by ~8e-3; a change below 1e-3 would mean it was ignored.
constexpr double kVisibleChange = 1e-3;

// BEGIN RELATED(cross_entropy): the loss written out plainly: the answer, held back from a handout
// The loss of ops_loss.cpp written out naively, row by row: softmax by its definition (no
// max shift: the test logits are small), then -sum_v q[v] log p[v], mean over kept rows.
double plain_loss(const std::vector<double>& logits, const std::vector<std::int64_t>& targets, std::int64_t V,
                  std::int64_t ignore_index, double smoothing) {
  const std::int64_t N = static_cast<std::int64_t>(targets.size());
  double total = 0;
  std::int64_t count = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    double z = 0;
    for (std::int64_t v = 0; v < V; ++v) z += std::exp(logits[n * V + v]);
    for (std::int64_t v = 0; v < V; ++v) {
      const double q = (v == targets[n] ? 1 - smoothing : 0.0) + smoothing / V;
      total -= q * std::log(std::exp(logits[n * V + v]) / z);
    }
    ++count;
  }
  return count ? total / count : 0.0;
}

// Its gradient with respect to the logits: (softmax - q) / count on kept rows, 0 elsewhere.
std::vector<double> plain_grad(const std::vector<double>& logits, const std::vector<std::int64_t>& targets,
                               std::int64_t V, std::int64_t ignore_index, double smoothing) {
  const std::int64_t N = static_cast<std::int64_t>(targets.size());
  std::int64_t count = 0;
  for (std::int64_t t : targets) count += t != ignore_index;
  std::vector<double> grad(N * V, 0.0);
  for (std::int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    double z = 0;
    for (std::int64_t v = 0; v < V; ++v) z += std::exp(logits[n * V + v]);
    for (std::int64_t v = 0; v < V; ++v) {
      const double q = (v == targets[n] ? 1 - smoothing : 0.0) + smoothing / V;
      grad[n * V + v] = (std::exp(logits[n * V + v]) / z - q) / count;
    }
  }
  return grad;
}
// END RELATED

// The smoothed target distribution q: (N, V), with zero rows where the target is ignored.
Tensor smoothed_targets(const std::vector<std::int64_t>& targets, std::int64_t V, std::int64_t ignore_index,
                        double smoothing) {
  const std::int64_t N = static_cast<std::int64_t>(targets.size());
  std::vector<double> q(N * V, 0.0);
  for (std::int64_t n = 0; n < N; ++n)
    if (targets[n] != ignore_index)
      for (std::int64_t v = 0; v < V; ++v) q[n * V + v] = (v == targets[n] ? 1 - smoothing : 0.0) + smoothing / V;
  return from_vector(q, {N, V}, Dtype::Float64);
}

// The same loss composed from primitives, each with its own node:
// logits: (N, V), q: (N, V) -> () = -sum(q * log_softmax(logits)) / count
Tensor cross_entropy_composed(const Tensor& logits, const Tensor& q, double count) {
  Tensor m = max(logits.detach(), {1}, true);  // (N, 1) shift: a constant, any value gives the same lse
  Tensor lse = add(log(sum(exp(sub(logits, m)), {1}, true)), m);  // (N, 1)
  Tensor logp = sub(logits, lse);                                  // (N, V)
  return div(neg(sum(mul(q, logp))), count);
}

using sf::test::ids;

}  // namespace

// BEGIN RELATED(cross_entropy): compares with that plain loss
TEST_CASE("cross_entropy matches a hand computation on a tiny example", "[loss][cross_entropy]") {
  // N = 2 rows, V = 3 classes; row 0's gold class is 2, row 1's is 0.
  const std::vector<double> values = {1.0, 2.0, 3.0,  //
                                      0.5, -1.0, 0.0};
  const std::vector<std::int64_t> targets = {2, 0};
  for (double smoothing : {0.0, 0.1}) {
    INFO("label_smoothing " << smoothing);
    Tensor logits = from_vector(values, {2, 3}, Dtype::Float64).requires_grad_();
    Tensor loss = cross_entropy(logits, ids(targets), -100, smoothing);
    REQUIRE(loss.dim() == 0);
    CHECK(std::abs(loss.item() - plain_loss(values, targets, 3, -100, smoothing)) <= kFloat64Tol);
    loss.backward();
    const std::vector<double> expected = plain_grad(values, targets, 3, -100, smoothing);
    const std::vector<double> got = logits.grad().to_vector<double>();
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(std::abs(got[i] - expected[i]) <= kFloat64Tol);
  }
  SECTION("row 0 alone is log(1 + e^-1 + e^-2)") {
    // -log softmax([1, 2, 3])[2] = log(e^1 + e^2 + e^3) - 3 = log(e^-2 + e^-1 + 1) = 0.4076059644...
    Tensor loss = cross_entropy(from_vector({1.0, 2.0, 3.0}, {1, 3}, Dtype::Float64), ids({2}));
    CHECK(std::abs(loss.item() - 0.40760596444438) <= kFloat64Tol);
  }
}
// END RELATED

TEST_CASE("cross_entropy of uniform logits is log V", "[loss][cross_entropy]") {
  // Every class equally likely: loss = log V whatever the targets, gradient (1/V - onehot)/N.
  constexpr std::int64_t kN = 3, kV = 4;
  Tensor logits = zeros({kN, kV}, Dtype::Float64).requires_grad_();
  Tensor loss = cross_entropy(logits, ids({1, 3, 0}));
  CHECK(std::abs(loss.item() - std::log(4.0)) <= kFloat64Tol);
  loss.backward();
  const std::vector<double> grad = logits.grad().to_vector<double>();
  const std::vector<std::int64_t> gold = {1, 3, 0};
  for (std::int64_t n = 0; n < kN; ++n)
    for (std::int64_t v = 0; v < kV; ++v)
      CHECK(std::abs(grad[n * kV + v] - (0.25 - (v == gold[n] ? 1.0 : 0.0)) / 3.0) <= kFloat64Tol);
}

// The gradient check of the logits (plain and with label smoothing 0.2, on contiguous, transposed
// and narrowed logits, one row ignored) is the gradcheck suite's entry cross_entropy
// (train/classroom/gradcheck_suite.cpp, run by tests/test_gradcheck_suite.cpp with the labels
// cross_entropy and grad).

TEST_CASE("cross_entropy fused matches composed in value and gradient", "[loss][cross_entropy][fused]") {
  constexpr std::int64_t kN = 6, kV = 7;
  Generator gen(22);
  const std::vector<std::int64_t> targets = {3, 0, -100, 6, 2, 3};
  for (double smoothing : {0.0, 0.1}) {
    INFO("label_smoothing " << smoothing);
    Tensor logits = mul(randn({kN, kV}, gen, Dtype::Float64), 2.0).requires_grad_();
    Tensor fused = cross_entropy(logits, ids(targets), -100, smoothing);
    REQUIRE(std::string(fused.grad_fn()->name()) == "CrossEntropy");
    fused.backward();
    Tensor grad_fused = logits.grad();
    logits.zero_grad();
    Tensor composed = cross_entropy_composed(logits, smoothed_targets(targets, kV, -100, smoothing), 5.0);
    composed.backward();
    CHECK(std::abs(fused.item() - composed.item()) <= kFloat64Tol);
    CHECK(max_abs_diff(grad_fused, logits.grad()) <= kFloat64Tol);
  }
}

// BEGIN RELATED(cross_entropy): compares with that plain loss
TEST_CASE("cross_entropy ignore_index rows contribute nothing", "[loss][cross_entropy]") {
  constexpr std::int64_t kV = 5, kPad = 0;  // class 0 is padding here, as in a real vocabulary
  Generator gen(23);
  const std::vector<std::int64_t> targets = {2, kPad, 3, kPad};
  Tensor logits = randn({4, kV}, gen, Dtype::Float64).requires_grad_();
  Tensor loss = cross_entropy(logits, ids(targets), kPad);
  loss.backward();
  const Tensor grad = logits.grad();

  SECTION("their gradient rows are exactly 0") {
    for (std::int64_t v = 0; v < kV; ++v) {
      CHECK(grad.at({1, v}) == 0.0);
      CHECK(grad.at({3, v}) == 0.0);
    }
  }
  SECTION("changing their logits changes neither loss nor gradient") {
    Tensor changed = logits.detach().clone();
    for (std::int64_t v = 0; v < kV; ++v) {
      changed.set({1, v}, 100.0 * v);  // wildly different, even huge
      changed.set({3, v}, -7.0);
    }
    changed.requires_grad_();
    Tensor loss2 = cross_entropy(changed, ids(targets), kPad);
    loss2.backward();
    CHECK(loss2.item() == loss.item());
    CHECK(max_abs_diff(changed.grad(), grad) == 0.0);
  }
  SECTION("the loss is the mean over the kept rows only") {
    Tensor kept = cat({narrow(logits.detach(), 0, 0, 1), narrow(logits.detach(), 0, 2, 1)}, 0);  // rows 0 and 2
    CHECK(std::abs(loss.item() - cross_entropy(kept, ids({2, 3})).item()) <= kFloat64Tol);
    CHECK(std::abs(loss.item() - plain_loss(logits.detach().to_vector<double>(), targets, kV, kPad, 0.0)) <= kFloat64Tol);
  }
}
// END RELATED

TEST_CASE("cross_entropy with every row ignored is 0 with gradient 0", "[loss][cross_entropy]") {
  Generator gen(24);
  Tensor logits = randn({3, 4}, gen, Dtype::Float64).requires_grad_();
  Tensor loss = cross_entropy(logits, ids({-100, -100, -100}));
  CHECK(loss.item() == 0.0);  // documented choice (torch gives NaN): nothing to learn, no NaN
  loss.backward();
  CHECK(max_abs_diff(logits.grad(), zeros({3, 4}, Dtype::Float64)) == 0.0);
}

TEST_CASE("cross_entropy with label smoothing 0 is plain NLL", "[loss][cross_entropy][label_smoothing]") {
  constexpr std::int64_t kN = 4, kV = 6;
  Generator gen(25);
  Tensor logits = randn({kN, kV}, gen, Dtype::Float64);
  const std::vector<std::int64_t> targets = {5, 0, 2, 2};
  const std::vector<double> x = logits.to_vector<double>();
  double nll = 0;  // -mean_n log softmax(x[n])[y_n], by its definition
  for (std::int64_t n = 0; n < kN; ++n) {
    double z = 0;
    for (std::int64_t v = 0; v < kV; ++v) z += std::exp(x[n * kV + v]);
    nll -= std::log(std::exp(x[n * kV + targets[n]]) / z);
  }
  nll /= kN;
  CHECK(std::abs(cross_entropy(logits, ids(targets), -100, 0.0).item() - nll) <= kFloat64Tol);
  // and smoothing moves it: 0.1 gives another number
  CHECK(std::abs(cross_entropy(logits, ids(targets), -100, 0.1).item() - nll) > kVisibleChange);
}

TEST_CASE("cross_entropy at logits equal to log q is the entropy of q", "[loss][cross_entropy][label_smoothing]") {
  // The smoothing floor: with targets smoothed to q, the best a model can do is predict q
  // itself, and the loss there is H(q) = -sum_v q[v] log q[v], not 0. The gradient is 0.
  constexpr std::int64_t kV = 5;
  constexpr double kSmoothing = 0.1;
  const std::vector<std::int64_t> targets = {3, 0, 4};
  const std::int64_t N = static_cast<std::int64_t>(targets.size());
  std::vector<double> log_q(N * kV);
  double entropy = 0;  // the same for every row
  for (std::int64_t v = 0; v < kV; ++v) {
    const double q = (v == 0 ? 1 - kSmoothing : 0.0) + kSmoothing / kV;
    entropy -= q * std::log(q);
  }
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t v = 0; v < kV; ++v)
      log_q[n * kV + v] = std::log((v == targets[n] ? 1 - kSmoothing : 0.0) + kSmoothing / kV);
  Tensor logits = from_vector(log_q, {N, kV}, Dtype::Float64).requires_grad_();
  Tensor loss = cross_entropy(logits, ids(targets), -100, kSmoothing);
  INFO("loss " << loss.item() << ", entropy of q " << entropy);
  CHECK(std::abs(loss.item() - entropy) <= kFloat64Tol);
  loss.backward();
  CHECK(max_abs_diff(logits.grad(), zeros({N, kV}, Dtype::Float64)) <= kFloat64Tol);
}

TEST_CASE("cross_entropy is stable for huge logits", "[loss][cross_entropy]") {
  // exp(1000) overflows even in double; the loss must not care about a shift of every logit.
  Generator gen(26);
  Tensor logits = randn({3, 4}, gen, Dtype::Float64);
  const Tensor targets = ids({0, 3, 1});
  const double base = cross_entropy(logits, targets, -100, 0.1).item();
  for (Dtype dtype : {Dtype::Float64, Dtype::Float32}) {
    const double shifted = cross_entropy(add(logits, 1000.0).to(dtype), targets, -100, 0.1).item();
    INFO(dtype_name(dtype) << ": " << shifted << " vs " << base);
    REQUIRE(std::isfinite(shifted));
    CHECK(std::abs(shifted - base) <= (dtype == Dtype::Float64 ? kShiftedFloat64Tol : kShiftedFloat32Tol));
  }
}

TEST_CASE("cross_entropy with a masked class of logit minus infinity", "[loss][cross_entropy]") {
  // A class masked out with -inf has probability 0: without smoothing the loss is finite and
  // the masked class gets gradient 0. (With smoothing q puts eps / V on it: the loss is +inf.)
  Tensor logits = from_vector({0.0, 0.0, -INFINITY}, {1, 3}, Dtype::Float64).requires_grad_();
  Tensor loss = cross_entropy(logits, ids({0}));
  CHECK(std::abs(loss.item() - std::log(2.0)) <= kFloat64Tol);  // two equally likely classes
  loss.backward();
  CHECK(std::abs(logits.grad().at({0, 0}) - (0.5 - 1.0)) <= kFloat64Tol);
  CHECK(std::abs(logits.grad().at({0, 1}) - 0.5) <= kFloat64Tol);
  CHECK(logits.grad().at({0, 2}) == 0.0);
  CHECK(std::isinf(cross_entropy(logits.detach(), ids({0}), -100, 0.1).item()));
}

TEST_CASE("cross_entropy float32 matches float64", "[loss][cross_entropy]") {
  Generator gen(27);
  Tensor l64 = mul(randn({5, 11}, gen, Dtype::Float64), 10.0).requires_grad_();
  Tensor l32 = l64.detach().to(Dtype::Float32).requires_grad_();
  const Tensor targets = ids({10, 0, -100, 4, 7});
  Tensor a = cross_entropy(l64, targets, -100, 0.1), b = cross_entropy(l32, targets, -100, 0.1);
  REQUIRE(b.dtype() == Dtype::Float32);
  CHECK(std::abs(a.item() - b.item()) <= kFloat32Tol * std::abs(a.item()));
  a.backward();
  b.backward();
  CHECK(max_abs_diff(l32.grad(), l64.grad()) <= kFloat32Tol);
}

TEST_CASE("cross_entropy errors say what was expected", "[loss][cross_entropy]") {
  Tensor logits = zeros({4, 5});
  REQUIRE_THROWS_WITH(cross_entropy(logits, ids({0, 1, 7, 2})), Catch::Contains("target 7") && Catch::Contains("position 2"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, ids({0, -1, 1, 2})), Catch::Contains("target -1") && Catch::Contains("position 1"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, ids({0, 1, 1, 2}), -100, 1.0),
                      Catch::Contains("label_smoothing") && Catch::Contains("[0, 1)"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, ids({0, 1, 1, 2}), -100, -0.1), Catch::Contains("label_smoothing"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, zeros({4})), Catch::Contains("int64"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, ids({0, 1, 2})), Catch::Contains("(3,)") && Catch::Contains("(4, 5)"));
  REQUIRE_THROWS_WITH(cross_entropy(zeros({2, 2, 5}), ids({0, 1})), Catch::Contains("(N, V)"));
}
