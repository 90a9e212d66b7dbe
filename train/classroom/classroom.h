// The classroom commands: pictures and printouts that show what the model does inside.
//
//   attention_figures  `scratchformer attention`: every decoder layer's cross-attention and
//                      masked self-attention, per head, for one sentence (SVG heatmaps)
//   positions_svg      `scratchformer plot --what positions`: the sinusoidal position table
//   schedule_svg       `scratchformer plot --what schedule`: the learning rate per step
//   explain_batch      `scratchformer explain-batch`: one real training batch as text (source,
//                      decoder input, decoder target, masks, counts), so teacher forcing is visible
//
// Letters: B batch rows, S source length, T target length (+1 for BOS / EOS), H heads.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/setup.h"

namespace sf::train {

// ---- attention heatmaps -------------------------------------------------------------------

struct AttentionFigures {
  std::vector<std::string> source_pieces;   // the S source tokens (columns of cross-attention)
  std::vector<std::string> decoder_inputs;  // BOS + target (columns of self-attention), T of them
  std::vector<std::string> produced;        // the token each decoder position produces (the rows), T
  std::string translation;                  // the target as text (greedy output, or --tgt)
  bool teacher_forced = false;              // true: the target was given, not generated
  std::string cross_svg;                    // rows = layers, columns = heads
  std::string self_svg;
};

// Translates `source` greedily with the model (or, if `target` is given, feeds that target: teacher
// forcing), then runs the decoder once more over the whole target WITHOUT the KV cache, so that every
// layer's attention weights cover every position, and draws them. Row t of every map is decoder
// position t, labelled with the token it produces (target token t, or </s> at the end); its input
// is decoder_inputs[t]. Throws std::invalid_argument for a sentence that is empty, not UTF-8, or
// longer than the model allows.
AttentionFigures attention_figures(const InferenceModel& im, const std::string& source,
                                   const std::optional<std::string>& target);

// ---- plots of a config --------------------------------------------------------------------

// The sinusoidal table PE (model.max_len, model.d_model) of the config (with a note in the title
// when the config uses other positions).
std::string positions_svg(const Config& cfg);
// The learning rate at every step 1..train.max_steps (at most ~2000 points drawn).
std::string schedule_svg(const Config& cfg);

// ---- one batch as text --------------------------------------------------------------------

struct ExplainOptions {
  std::int64_t batch = 0;      // which batch of the first epoch (0-based), as the trainer draws them
  std::int64_t rows = 3;       // sentence pairs printed in full
  std::int64_t max_causal = 12;  // the causal mask is printed for at most this many positions
};

// Loads the config's tokenizers (training them into run.dir first if there are none: said on
// `log`), reads and filters the training corpus as the trainer does, builds the trainer's
// Batcher (same seed, same budget) and returns batch `opt.batch` of epoch 0 explained as text.
// Throws std::invalid_argument when opt.batch is past the epoch's last batch.
std::string explain_batch(const Config& cfg, const ExplainOptions& opt, std::ostream& log);

// Columns a string takes in a terminal: one per code point, two for East Asian wide characters
// (CJK, Hangul, full-width forms). For aligning tokens in columns.
std::size_t display_width(const std::string& text);

}  // namespace sf::train
