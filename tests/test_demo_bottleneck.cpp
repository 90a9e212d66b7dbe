// demos bottleneck and alignment (train/lessons/demo_bottleneck.h, demo_alignment.h) and the toy
// task they train on (toy_task.h): without attention a recurrent decoder's accuracy falls with
// the sentence's length; with Bahdanau's attention the weights learn the alignment.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "demo_report_check.h"
#include "train/lessons/demo_alignment.h"
#include "train/lessons/demo_bottleneck.h"
#include "train/lessons/toy_task.h"

using namespace sf;
using namespace sf::lessons;

TEST_CASE("toy task: a batch is the string, BOS + answer, answer + EOS, padded", "[demo][recurrent]") {
  ToyTask task;
  task.reverse = true;
  task.min_len = 2;
  task.max_len = 5;
  Generator gen(3);
  const ToyBatch b = toy_batch(task, 6, gen);
  std::int64_t longest = 0;
  for (const auto& s : b.strings) {
    CHECK(static_cast<std::int64_t>(s.size()) >= 2);
    CHECK(static_cast<std::int64_t>(s.size()) <= 5);
    longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(s.size()));
    for (std::int64_t id : s) CHECK((id >= 4 && id < task.vocab()));
  }
  REQUIRE(b.src.shape() == Shape{6, longest});
  REQUIRE(b.tgt_in.shape() == Shape{6, longest + 1});
  const std::vector<std::int64_t> src = b.src.to_vector<std::int64_t>(), in = b.tgt_in.to_vector<std::int64_t>(),
                                  out = b.tgt_out.to_vector<std::int64_t>();
  const std::vector<std::int64_t>& s0 = b.strings[0];
  const auto n = static_cast<std::int64_t>(s0.size());
  CHECK(in[0] == 2);  // BOS
  for (std::int64_t i = 0; i < n; ++i) {
    CHECK(src[i] == s0[i]);
    CHECK(out[i] == s0[n - 1 - i]);     // reversed
    CHECK(in[i + 1] == s0[n - 1 - i]);  // teacher forcing: shifted by one
  }
  CHECK(out[n] == 3);  // EOS
  for (std::int64_t i = n; i < longest; ++i) CHECK(src[i] == 0);  // padding at the end
  CHECK(toy_answer(task, {4, 5, 6}) == std::vector<std::int64_t>{6, 5, 4});
  task.reverse = false;
  CHECK(toy_answer(task, {4, 5, 6}) == std::vector<std::int64_t>{4, 5, 6});
}

TEST_CASE("demo bottleneck: without attention the accuracy falls with length, faster than with it",
          "[demo][recurrent][trains]") {
  const BottleneckResult r = compute_bottleneck(0);
  for (const std::string& problem : sf::test::report_problems(bottleneck_json(r))) FAIL_CHECK(problem);  // the page draws it
  REQUIRE(r.none.size() == r.lengths.size());
  REQUIRE(r.additive.size() == r.lengths.size());
  INFO("none " << r.none.front() << " -> " << r.none.back() << ", additive " << r.additive.front() << " -> "
               << r.additive.back());
  CHECK(r.none.back() < r.none.front() - 0.2);  // the fixed vector does not hold a long string
  CHECK(r.additive.back() > r.none.back() + 0.2);
  CHECK(bottleneck_held(r));
  // the verdict is not a constant: a no-attention model as good as the attention one fails it
  BottleneckResult broken = r;
  broken.none = r.additive;
  CHECK_FALSE(bottleneck_held(broken));
  const std::string svg = bottleneck_svg(r);
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("no attention / 无注意力") != std::string::npos);
}

TEST_CASE("demo alignment: Bahdanau's weights find the source word being translated", "[demo][recurrent][trains]") {
  const AlignmentResult r = compute_alignment(0);
  for (const std::string& problem : sf::test::report_problems(alignment_json(r))) FAIL_CHECK(problem);  // the page draws it
  INFO("rnn " << r.rnn_hits << " / " << r.rnn_near << " / " << r.rnn_near_mass << ", Transformer head mean "
              << r.transformer_mean_hits << ", best head " << r.transformer_best_head_hits);
  CHECK(r.rnn_near >= 0.95);       // the peak within one word of the truth
  CHECK(r.rnn_near_mass >= 0.8);   // and most of the weight there
  CHECK(r.rnn_hits > 0.5);         // far above chance (1 / 10) even on the exact word
  CHECK(alignment_held(r));
  AlignmentResult broken = r;
  broken.rnn_near_mass = 0.3;  // weights spread over the sentence
  CHECK_FALSE(alignment_held(broken));
  // one sentence's matrices: S rows (EOS left out) of S weights summing to 1
  const std::size_t S = r.source.size();
  REQUIRE(r.rnn_alignment.size() == S);
  REQUIRE(r.transformer_alignment.size() == S);
  for (std::size_t t = 0; t < S; ++t) {
    double rnn = 0, tf = 0;
    for (double v : r.rnn_alignment[t]) rnn += v;
    for (double v : r.transformer_alignment[t]) tf += v;
    CHECK(rnn == Approx(1).epsilon(1e-5));
    CHECK(tf == Approx(1).epsilon(1e-5));
  }
  const std::string svg = alignment_svg(r);
  CHECK(svg.find("Bahdanau") != std::string::npos);
  CHECK(svg.find("cross-attention") != std::string::npos);
}

TEST_CASE("demos bottleneck and alignment: two training steps run end to end and draw", "[demo][recurrent]") {
  // the plumbing alone (the claims need the demos' full training: [trains] above)
  const BottleneckResult b = compute_bottleneck(0, 2);
  CHECK(b.steps == 2);
  REQUIRE(b.none.size() == b.lengths.size());
  for (double a : b.none) CHECK((a >= 0 && a <= 1));
  CHECK(bottleneck_svg(b).find("</svg>") != std::string::npos);
  const AlignmentResult a = compute_alignment(0, 2);
  REQUIRE(a.rnn_alignment.size() == a.source.size());
  CHECK((a.rnn_near >= 0 && a.rnn_near <= 1));
  CHECK(alignment_svg(a).find("</svg>") != std::string::npos);
}
