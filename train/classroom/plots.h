// Pictures for the classroom, as SVG files that any web browser shows (drawn with svg.h's
// toolkit; namespace sf::train):
//
//   attention_heatmaps_svg   a grid of attention maps for one sentence (one row per layer, one
//                            column per head): queries down the side, keys along the bottom
//   training_curves_svg      loss / NLL, validation BLEU and learning rate from a run's metrics.tsv
//   positional_encoding_svg  the (L, D) positional-encoding table as a heatmap in [-1, 1]
//   line_chart_svg           one curve y(x), e.g. a config's learning-rate schedule
//   positions_svg            `scratchformer plot --what positions`: a config's sinusoidal table
//   schedule_svg             `scratchformer plot --what schedule`: a config's learning rate per step
//
// write_file_atomically (svg.h) saves them. Each takes a Lang (lang.h): the captions, axis labels,
// legends and notes it writes itself are in English or Chinese (the titles passed in are the
// caller's).
#pragma once

#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "train/classroom/lang.h"
#include "train/classroom/svg.h"
#include "train/config.h"

namespace sf::train {

// One attention map: weights[i][j] = how much query i (a row) attends to key j (a column).
struct Heatmap {
  std::string title;                    // e.g. "layer 1, head 3"
  std::vector<std::string> row_labels;  // queries: target tokens
  std::vector<std::string> col_labels;  // keys: source tokens (target tokens for self-attention)
  Tensor weights;                       // (rows, cols) float32 or float64, values in [0, 1]
};

// A grid of heatmaps, `columns` per row (e.g. one row per layer, one column per head), in the
// order given; token labels on both axes of every map (column labels rotated), a viridis colour
// bar for [0, 1], and `title` on top. Each cell is a <rect class="cell"> with a hover tooltip
// ("query -> key: 0.423"), except cells whose weight is exactly 0 (masked: the future in causal
// self-attention, padding), which are <rect class="masked"> drawn as a light grey hatch.
// Throws std::invalid_argument for a weights tensor that is not 2-D, label counts that do not
// match its shape, or a weight outside [0, 1] (NaN included), naming the map.
std::string attention_heatmaps_svg(const std::vector<Heatmap>& maps, int columns, const std::string& title,
                                   Lang lang = Lang::En);

// Training curves from a run's metrics.tsv (written by the trainer: a header line, then one
// tab-separated row per event with the columns
//   step  epoch  kind  loss  nll  ppl  lr  tokens_per_s  grad_norm  bleu  elapsed_s
// where kind is train | valid | test | skipped and an empty cell means "not measured").
// Three panels sharing the step axis:
//   1. loss and NLL of the training rows (lines), of the validation rows (dots), and steps
//      skipped for a non-finite gradient (red ticks on the top edge);
//   2. validation BLEU (line with dots) and test BLEU (diamond);
//   3. learning rate: when the run directory holds the config.toml the trainer saves, its
//      schedule (train/optim/schedule.h) at every step up to the last logged one, beside the logged
//      values (every log_every steps, which can miss the peak at the end of the warmup); a note
//      under the panel gives the peak and says which of the two it comes from.
// When a resumed run logs a step again, the later rows replace the earlier ones from that step
// on. Columns are found by name, so extra columns are fine. Throws std::runtime_error
// "PATH: ..." for a file that cannot be read and "PATH:LINE: ..." for a missing column, a row
// with the wrong number of cells, an unknown kind, or a cell that is not a number.
std::string training_curves_svg(const std::string& metrics_tsv_path, Lang lang = Lang::En);

// The positional-encoding table as a heatmap: position down the side, embedding dimension along
// the bottom, blue (-1) - white (0) - red (+1); a table whose values are all far below 1 in size
// (a learned one) gets a symmetric range of its own. Only the first 200 positions and 512
// dimensions are drawn (the subtitle says when the table was cut). The cells are the <rect>s in
// <g class="heatmap">. Throws std::invalid_argument unless the table is 2-D, float and not empty.
std::string positional_encoding_svg(const Tensor& table, const std::string& title, Lang lang = Lang::En);

// One curve through the points (x[i], y[i]) with axes, ticks and labels (e.g. the learning rate
// per step of a schedule). Non-finite points are left out; the y axis includes 0. Throws std::invalid_argument if x and y
// differ in length or are empty.
std::string line_chart_svg(const std::vector<double>& x, const std::vector<double>& y, const std::string& title,
                           const std::string& x_label, const std::string& y_label, Lang lang = Lang::En);

// ---- plots of a config --------------------------------------------------------------------

// The sinusoidal table PE (model.max_len, model.d_model) of the config (with a note in the title
// when the config uses other positions).
std::string positions_svg(const Config& cfg, Lang lang = Lang::En);
// The learning rate at every step 1..train.max_steps (at most ~2000 points drawn).
std::string schedule_svg(const Config& cfg, Lang lang = Lang::En);

}  // namespace sf::train
