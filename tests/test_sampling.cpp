// Choosing the next token (train/eval/sampling.h): greedy, temperature, top-k and top-p.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "train/eval/sampling.h"

using namespace sf;
using namespace sf::train;
using Catch::Contains;

namespace {

const std::vector<float> kLogits{1.0f, 3.0f, 2.0f, 0.5f, 2.5f};  // ranks: 1, 4, 2, 0, 3
const std::vector<bool> kAll(5, true);
constexpr double kProbTol = 1e-12;  // double arithmetic on five numbers

std::vector<double> softmax(const std::vector<float>& x, double t) {
  std::vector<double> p;
  double total = 0;
  for (float v : x) total += std::exp(v / t);
  for (float v : x) p.push_back(std::exp(v / t) / total);
  return p;
}

}  // namespace

TEST_CASE("temperature 0 and top-k 1 are greedy and never draw", "[decode]") {
  Generator gen(5);
  const auto before = gen.state();
  CHECK(sample_token(kLogits, kAll, {0.0, 0, 1.0}, gen) == 1);
  CHECK(sample_token(kLogits, kAll, {1.3, 1, 1.0}, gen) == 1);
  CHECK(gen.state() == before);
  std::vector<bool> no_best = kAll;
  no_best[1] = false;  // a forbidden token is never chosen, however likely
  CHECK(sample_token(kLogits, no_best, {0.0, 0, 1.0}, gen) == 4);
}

TEST_CASE("top-p keeps the smallest set of most likely tokens whose mass reaches p", "[decode]") {
  const auto p = softmax(kLogits, 1.0);  // sorted: p1 > p4 > p2 > p0 > p3
  const double two = p[1] + p[4], three = two + p[2];
  // just below the mass of the top two: the top two; exactly reaching it: still two; just above: three
  for (const auto& [top_p, want] : std::vector<std::pair<double, std::size_t>>{{two - 1e-9, 2}, {two, 2}, {two + 1e-9, 3}, {three + 1e-9, 4}, {1.0, 5}}) {
    const Candidates c = sampling_candidates(kLogits, kAll, {1.0, 0, top_p});
    INFO("top_p " << top_p);
    CHECK(c.ids.size() == want);
  }
  const Candidates c = sampling_candidates(kLogits, kAll, {1.0, 0, two});
  REQUIRE(c.ids == std::vector<std::int64_t>{1, 4});
  CHECK(std::fabs(c.probs[0] - p[1] / two) < kProbTol);
  CHECK(std::fabs(c.probs[0] + c.probs[1] - 1.0) < kProbTol);
  // top-k first, then top-p on what is left (renormalised)
  const Candidates k3 = sampling_candidates(kLogits, kAll, {1.0, 3, 0.7});
  const double p_top1_of3 = p[1] / three;  // about 0.51 < 0.7: two of the three are needed
  CHECK(p_top1_of3 < 0.7);
  CHECK(k3.ids == std::vector<std::int64_t>{1, 4});
}

TEST_CASE("sampling draws tokens with the tempered probabilities", "[decode]") {
  Generator gen(11);
  const double t = 0.7;
  const auto p = softmax(kLogits, t);
  std::map<std::int64_t, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[sample_token(kLogits, kAll, {t, 0, 1.0}, gen)];
  for (std::int64_t v = 0; v < 5; ++v) {
    const double sd = std::sqrt(n * p[v] * (1 - p[v]));
    INFO("token " << v << " drawn " << counts[v] << " times, expected " << n * p[v]);
    CHECK(std::fabs(counts[v] - n * p[v]) <= 6 * sd);  // 6 sigma: a correct rule essentially never fails
  }
}

TEST_CASE("sampling options outside their ranges are one-line errors", "[decode][errors]") {
  CHECK_THROWS_WITH(check_sampling_options({-0.5, 0, 1.0}), Contains("--temperature: expected a number >= 0"));
  CHECK_THROWS_WITH(check_sampling_options({1.0, -1, 1.0}), Contains("--top-k: expected a whole number >= 1"));
  CHECK_THROWS_WITH(check_sampling_options({1.0, 0, 0.0}), Contains("--top-p: expected a probability in (0, 1]"));
  CHECK_THROWS_WITH(check_sampling_options({1.0, 0, 1.5}), Contains("--top-p"));
  CHECK_NOTHROW(check_sampling_options({0.0, 0, 1.0}));
}
