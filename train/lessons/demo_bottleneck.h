// demo bottleneck: the fixed-length vector. A recurrent encoder-decoder without attention hands
// the decoder one state, s_0 = f(h_S), and nothing else of the source: every word the decoder will
// write must fit into those D numbers (2 D for an LSTM's h and c). Short sentences fit; long ones
// do not, and the translation falls apart towards its end. Attention (Bahdanau 2014) lets every
// decoder step look back at all the encoder states, c_t = Σ_i α_ti h_i, so nothing has to fit.
//
// The numbers: two LSTM encoder-decoders of the same width, one without attention (rnn_attention
// "none") and one with Bahdanau's ("additive"), trained the same number of steps on the toy copy
// task (toy_task.h: random strings of 3 to 24 symbols, the answer is the string itself), then
// greedy-decoded on fresh strings of each length: the fraction of symbols right, by length. On
// real sentences the same comparison is `scratchformer eval --by-length` of configs/rnn-none.toml
// and configs/rnn-additive.toml (docs/results.md).
//
// Letters: S string length, D width.
#pragma once

#include "train/lessons/demo_report.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sf::lessons {

struct BottleneckResult {
  std::int64_t d_model = 0, steps = 0, batch = 0, train_min_len = 0, train_max_len = 0;
  std::vector<std::int64_t> lengths;   // the string lengths evaluated
  std::vector<double> none, additive;  // greedy accuracy (fraction of symbols right) at each length
  double none_loss = 0, additive_loss = 0;  // training loss at the end (mean of the last 10 steps)
};

// The training steps of each model (the demo's; a test of the plumbing alone may pass fewer).
constexpr std::int64_t kBottleneckSteps = 400;

BottleneckResult compute_bottleneck(std::uint64_t seed, std::int64_t steps = kBottleneckSteps);
// The claim: without attention the accuracy falls with length, and faster than with attention:
// from the shortest to the longest length it loses at least 0.2 more than the attention model
// does, and ends at least 0.2 below it.
bool bottleneck_held(const BottleneckResult& r);

// The figure run_bottleneck_demo writes (an SVG document).
std::string bottleneck_svg(const BottleneckResult& r);

// The numbers as the explorer's Lessons page draws them (demo_report.h); bottleneck_report is this
// of a fresh run.
Json bottleneck_json(const BottleneckResult& r);

}  // namespace sf::lessons
