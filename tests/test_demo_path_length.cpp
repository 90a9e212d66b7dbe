// demo path-length (train/lessons/demo_path_length.h): a recurrent network's gradient decays
// geometrically with distance, self-attention's does not.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "demo_report_check.h"
#include "train/lessons/demo.h"
#include "train/lessons/demo_parallel.h"
#include "train/lessons/demo_path_length.h"

namespace fs = std::filesystem;
using namespace sf::lessons;

TEST_CASE("demo path-length: recurrent gradients decay geometrically, attention's do not", "[demo][recurrent]") {
  const PathLengthResult r = compute_path_length(0, /*train_steps=*/0);  // at initialisation only
  CHECK(r.rnn_trained.empty());
  REQUIRE(r.rnn.size() == static_cast<std::size_t>(r.seq_len - 1));
  REQUIRE(r.attention.size() == r.rnn.size());
  // Geometric: every recurrent norm below the one a step nearer (up to a small wobble), the far end tiny.
  int rnn_rises = 0, lstm_rises = 0;
  for (std::size_t i = 1; i < r.rnn.size(); ++i) rnn_rises += r.rnn[i] > r.rnn[i - 1], lstm_rises += r.lstm[i] > r.lstm[i - 1];
  CHECK(rnn_rises <= 2);
  CHECK(lstm_rises <= 2);
  CHECK(r.rnn_factor < 0.9);
  CHECK(r.lstm_factor < 0.9);
  CHECK(r.rnn.back() < 1e-3 * r.rnn.front());
  CHECK(r.lstm.back() < 1e-3 * r.lstm.front());
  // Attention: no trend with distance (fitted factor ~1), far and near alike.
  CHECK(std::abs(r.attention_factor - 1) < 0.05);
  CHECK(r.attention.back() > 0.1 * r.attention.front());
  CHECK(path_length_held(r));
  // The verdict is not a constant: an attention that decays like the RNN fails it.
  PathLengthResult broken = r;
  broken.attention = r.rnn;
  CHECK_FALSE(path_length_held(broken));
}

TEST_CASE("demo path-length after training: attention reads the first token in one step, the recurrent gradients still vanish",
          "[demo][recurrent][trains]") {
  const PathLengthResult r = compute_path_length(0);
  for (const std::string& problem : sf::test::report_problems(path_length_json(r))) FAIL_CHECK(problem);  // the page draws it
  REQUIRE(r.train_steps == kPathLengthTrainSteps);
  REQUIRE(r.attention_trained.size() == r.attention.size());
  INFO("losses: rnn " << r.rnn_loss << ", lstm " << r.lstm_loss << ", attention " << r.attention_loss);
  CHECK(r.attention_loss < 0.05);
  // its largest gradient is the one to the first token (the farthest), far above the others
  CHECK(std::max_element(r.attention_trained.begin(), r.attention_trained.end()) == r.attention_trained.end() - 1);
  CHECK(r.attention_trained.back() > 10 * r.attention_trained.front());
  CHECK(r.rnn_trained.back() < 1e-3 * r.rnn_trained.front());
  CHECK(r.lstm_trained.back() < 1e-3 * r.lstm_trained.front());
  CHECK(path_length_held(r));
  PathLengthResult broken = r;
  broken.attention_loss = 0.3;  // an attention that did not learn the task fails the claim
  CHECK_FALSE(path_length_held(broken));
}

TEST_CASE("demo path-length runs, prints its verdict and writes its SVG", "[demo][recurrent][trains]") {
  const fs::path svg = fs::temp_directory_path() / "sf-test-demo-path-length.svg";
  DemoOptions options;
  options.out = svg.string();
  std::ostringstream out;
  CHECK(run_path_length_demo(options, out) == 0);
  CHECK(out.str().find("claim holds") != std::string::npos);
  CHECK(out.str().find("factor per step") != std::string::npos);
  std::ifstream in(svg);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("</svg>") != std::string::npos);
  CHECK(text.str().find("LSTM") != std::string::npos);
  fs::remove(svg);
}

TEST_CASE("demo parallel: the LSTM's dependent chain grows with T, attention's does not", "[demo][recurrent]") {
  ParallelSettings s;
  s.lengths = {4, 8, 16};
  s.width = 16, s.batch = 2, s.repeats = 0;  // no timing in a test
  const ParallelResult r = compute_parallel(s, 0);
  REQUIRE(r.rows.size() == 3);
  for (std::size_t i = 1; i < r.rows.size(); ++i) {
    CHECK(r.rows[i].lstm_depth - r.rows[i - 1].lstm_depth >= r.rows[i].seq_len - r.rows[i - 1].seq_len);
    CHECK(r.rows[i].attention_depth == r.rows[0].attention_depth);
  }
  CHECK(r.rows[0].lstm_depth >= 4);
  CHECK(r.rows[0].attention_depth > 0);
  CHECK(parallel_held(r));
  ParallelResult flat = r;  // a recurrence that did not wait would fail the verdict
  for (ParallelRow& row : flat.rows) row.lstm_depth = r.rows[0].lstm_depth;
  CHECK_FALSE(parallel_held(flat));
}
