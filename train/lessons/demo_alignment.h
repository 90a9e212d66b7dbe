// demo alignment: attention as a soft alignment, learnt without ever being shown one. Bahdanau's
// decoder scores every encoder state before it writes a word, α_t = softmax_i(vᵀ tanh(W_q s_{t-1}
// + W_k h_i)), and the row α_t says which source words it read: an alignment "for free", which is
// why the lecture holds attention up as interpretable. A Transformer's cross-attention plays the
// same part, spread over heads (and, in deeper models, over layers).
//
// The numbers: on the toy reverse task (toy_task.h: the answer is the string backwards, so the
// true alignment is known, target position t reads source position S − 1 − t), an LSTM
// encoder-decoder with additive attention and a one-layer Transformer of the same width are
// trained the same number of steps; then, teacher-forced on fresh strings, the share of target
// positions whose weights peak on the true source position (and within one position of it, and
// the weight there): for the rnn's α, for the Transformer's cross-attention averaged over its
// heads, and for its best single head. One sentence's
// matrices are drawn side by side. For a trained translator, the same matrices come from
// `scratchformer attention --checkpoint` of an rnn-additive and a quickstart run (and in the
// explorer).
//
// Letters: S string length, T target length (S + 1 with EOS), H heads, D width.
#pragma once

#include "train/lessons/demo_report.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sf::lessons {

struct AlignmentResult {
  std::int64_t d_model = 0, steps = 0, heads = 0, eval_len = 0;
  double rnn_loss = 0, transformer_loss = 0;  // training loss at the end
  // share of target positions (EOS left out) whose weights peak on the true source position
  double rnn_hits = 0, transformer_mean_hits = 0, transformer_best_head_hits = 0;
  // share whose peak is within one position of it, and the mean weight within one position of it
  double rnn_near = 0, rnn_near_mass = 0, transformer_near = 0, transformer_near_mass = 0;
  std::int64_t best_head = 0;
  // one string, teacher-forced: its symbols, and each model's weights (S rows, the EOS row left
  // out, x S columns)
  std::vector<std::string> source, target;
  std::vector<std::vector<double>> rnn_alignment, transformer_alignment;
};

// The training steps of each model (the demo's; a test of the plumbing alone may pass fewer).
constexpr std::int64_t kAlignmentSteps = 1000;

AlignmentResult compute_alignment(std::uint64_t seed, std::int64_t steps = kAlignmentSteps);
// The claim: Bahdanau's α finds the source word being translated: its peak within one position of
// it for at least 95% of the target positions, with on average at least 80% of the weight there.
// (The exact-peak share and the Transformer's are printed beside it, not asserted.)
bool alignment_held(const AlignmentResult& r);

// The figure run_alignment_demo writes (an SVG document).
std::string alignment_svg(const AlignmentResult& r);

// The numbers as the explorer's Lessons page draws them (demo_report.h); alignment_report is this
// of a fresh run.
Json alignment_json(const AlignmentResult& r);

}  // namespace sf::lessons
