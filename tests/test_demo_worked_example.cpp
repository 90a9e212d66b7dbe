// Demo worked-example (train/lessons/demo_worked_example.h): the notes' causal softmax to two
// decimals, worked out by hand below; the self-attention steps against loops over the printed
// matrices; how a sentence is cut into tokens.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "train/lessons/demo_worked_example.h"

using namespace sf::lessons;

TEST_CASE("worked-example: the notes' causal softmax, row by row, to two decimals", "[demo][causal][softmax]") {
  // By hand: row 1: e^0.1 / (e^0.1 + e^-0.3) = 1 / (1 + e^-0.4) = 0.599; row 2: e^0.5, e^0.7, e^3 =
  // 1.649, 2.014, 20.086 over 23.748; row 3: 0.301, 4.482, 1.492, 1.649 over 7.923; row 4:
  // 24.533, 2.718, 0.368, 0.607, 0.135 over 28.361. Above the diagonal: exactly 0.
  const std::vector<std::vector<double>> expected = {{1.00, 0, 0, 0, 0},
                                                     {0.60, 0.40, 0, 0, 0},
                                                     {0.07, 0.08, 0.85, 0, 0},
                                                     {0.04, 0.57, 0.19, 0.21, 0},
                                                     {0.87, 0.10, 0.01, 0.02, 0.00}};
  const WorkedExample w = compute_worked_example(0);
  const std::vector<double> got = w.notes_weights.to_vector<double>();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) {
      INFO("row " << i << ", column " << j << ": " << got[i * 5 + j]);
      CHECK(std::abs(got[i * 5 + j] - expected[i][j]) < 0.005);
      if (j > i) CHECK(got[i * 5 + j] == 0.0);
    }
}

TEST_CASE("worked-example: every step equals loops over the matrices printed before it", "[demo][attention]") {
  const WorkedExample w = compute_worked_example(3);
  REQUIRE(w.tokens == std::vector<std::string>{"我", "喜欢", "学", "注意力", "机制"});
  const std::size_t T = 5, d = 4;
  const auto at = [](const sf::Tensor& m, std::size_t i, std::size_t j) {
    return m.at({static_cast<std::int64_t>(i), static_cast<std::int64_t>(j)});
  };
  for (std::size_t i = 0; i < T; ++i) {
    double row_sum = 0;
    for (std::size_t j = 0; j < T; ++j) {
      double s = 0;  // S[i][j] = sum_c Q[i][c] K[j][c], Q[i][c] = sum_e X[i][e] W_Q[e][c]
      for (std::size_t c = 0; c < d; ++c) {
        double q = 0, k = 0;
        for (std::size_t e = 0; e < d; ++e) q += at(w.x, i, e) * at(w.w_q, e, c), k += at(w.x, j, e) * at(w.w_k, e, c);
        s += q * k;
      }
      CHECK(std::abs(at(w.scores, i, j) - s) < 1e-12);
      CHECK(std::abs(at(w.scaled, i, j) - s / 2) < 1e-12);
      row_sum += at(w.weights, i, j);
    }
    CHECK(std::abs(row_sum - 1) < 1e-12);
  }
  // The same word gets the same embedding wherever it stands.
  const WorkedExample twice = compute_worked_example(3, "学 我 学");
  for (std::size_t e = 0; e < d; ++e) {
    CHECK(at(twice.x, 0, e) == at(twice.x, 2, e));
    CHECK(at(twice.x, 1, e) == at(w.x, 0, e));
  }
}

TEST_CASE("worked-example: words at spaces, characters without, one line for a bad sentence", "[demo]") {
  CHECK(worked_example_tokens("我喜欢学") == std::vector<std::string>{"我", "喜", "欢", "学"});
  CHECK(worked_example_tokens("the cat  sat") == std::vector<std::string>{"the", "cat", "sat"});
  CHECK_THROWS_WITH(worked_example_tokens(""), Catch::Contains("1 to 12 words"));
  CHECK_THROWS_WITH(worked_example_tokens("a b c d e f g h i j k l m"), Catch::Contains("got 13"));
}
