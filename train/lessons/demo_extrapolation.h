// Demo `extrapolation`: train short, test long. Small decoder-only models learn the next
// character of real English text (the Multi30k captions, one stream of characters) on windows of
// at most L characters, one model per way of giving positions: sinusoidal, learned, RoPE, ALiBi
// and none (causal attention alone). Each is then scored on windows of 4L: the loss at every
// position, averaged over many windows. Past L a model meets positions (absolute ones) or
// distances (relative ones) it never trained on; how its loss moves there is the scheme's
// extrapolation. The trained RoPE model is also scored with its frequencies scaled at evaluation
// (model.rope_scaling, factor 4, nn/relative_positions.h): position interpolation and NTK-aware
// base scaling, which squeeze positions up to 4L into the angles seen up to L.
//
// Learned positions have a table of L rows: past it there is no vector to add, so the model
// refuses (one line, printed) rather than make one up. "Raising max_len" would only add rows
// that training never touched.
#pragma once

#include "train/lessons/demo_report.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sf::lessons {

struct ExtrapolationSettings {
  std::int64_t train_length = 64;   // L: the longest window in training
  std::int64_t eval_factor = 4;     // scored on windows of eval_factor * L
  std::int64_t d_model = 64, n_heads = 4, layers = 2;
  std::int64_t steps = 400, batch = 32;
  double lr = 3e-3;
  std::int64_t eval_windows = 96;   // windows of 4L scored per model
  std::int64_t bucket = 32;         // positions per row of the table
};

struct ExtrapolationCurve {
  std::string scheme;               // "sinusoidal", "learned", "rope", "rope + interpolation x4", ...
  std::vector<double> loss;         // mean loss at each position 0 .. 4L-1 (nats); shorter when refused
  std::string refused;              // the model's one-line refusal past its table, or ""
  double train_loss = 0;            // the mean loss of the last training steps
  std::int64_t train_length = 0;    // L
  double within() const;            // mean loss over positions [0, L)
  double beyond() const;            // mean over [L, 4L), or NaN when refused
};

struct ExtrapolationResult {
  ExtrapolationSettings settings;
  std::int64_t vocab = 0;           // characters + padding
  std::vector<ExtrapolationCurve> curves;
  double seconds = 0;               // wall time of the whole demo
  std::string least_degrading;      // the scheme whose loss rises least past L (beyond - within),
                                    // among those whose loss before L is near the best (a model
                                    // that is bad everywhere rises little too)
  // What the numbers of the default settings show, each with its margin (in nats): learned
  // positions refuse; sinusoidal and RoPE rise past L far more than ALiBi; NTK scaling rescues
  // RoPE past L without hurting it before L; interpolation without fine-tuning hurts before L and
  // ends above NTK past it; ALiBi degrades least.
  std::vector<std::pair<std::string, bool>> claims;
  bool claim_holds = false;         // every claim held
};

// corpora: the folder holding multi30k/ ("" = the shipped data/corpora).
ExtrapolationResult compute_extrapolation(std::uint64_t seed, const std::string& corpora,
                                          const ExtrapolationSettings& settings = {});

// The numbers as the explorer's Lessons page draws them (demo_report.h); extrapolation_report is this
// of a fresh run.
Json extrapolation_json(const ExtrapolationResult& r);

}  // namespace sf::lessons
