// Pictures for the classroom: hand-written SVG files that any web browser shows, made with no
// library and no external tool.
//
//   attention_heatmaps_svg   a grid of attention maps for one sentence (one row per layer, one
//                            column per head): queries down the side, keys along the bottom
//   training_curves_svg      loss / NLL, validation BLEU and learning rate from a run's metrics.tsv
//   positional_encoding_svg  the (L, D) positional-encoding table as a heatmap in [-1, 1]
//   line_chart_svg           one curve y(x), e.g. a config's learning-rate schedule
//   write_file_atomically    saves a picture (temp file + rename)
//
// The building blocks are public too, so a student can draw something new in a few lines:
//   SvgWriter svg(400, 300);
//   svg.rect(10, 10, 50, 50, {.fill = viridis(0.7).hex()});
//   svg.text(10, 80, "softmax(QK^T / sqrt(d))", {.size = 14});
//   write_file_atomically("square.svg", svg.finish());
//
// Coordinates are SVG user units (1 unit = 1 CSS pixel at 100% zoom), y grows downwards.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace sf::train {

// ---- text --------------------------------------------------------------------------------

// Makes any bytes safe inside an XML text node or a double-quoted attribute:
//   & < > " '  ->  &amp; &lt; &gt; &quot; &apos;
// Bytes that are not valid UTF-8 and control characters that XML 1.0 forbids (everything below
// U+0020 except tab, newline, carriage return) become U+FFFD, so the file always parses.
std::string xml_escape(const std::string& text);

// ---- colours -----------------------------------------------------------------------------

struct Rgb {
  int r = 0, g = 0, b = 0;  // 0..255 each
  std::string hex() const;  // "#rrggbb"
  // Relative luminance (WCAG / sRGB): 0 for black, 1 for white. Used by the tests to check that
  // brighter means larger.
  double luminance() const;
};

// Viridis (matplotlib's default map): dark purple at 0, through blue and green, to yellow at 1.
// Perceptually uniform and monotonic in lightness, so a larger value always looks brighter, also in
// grey-scale print and for red-green colour-blind readers. `t` is clamped to [0, 1].
Rgb viridis(double t);

// A diverging map for signed values: blue at -1, white at 0, red at +1 (ColorBrewer's RdBu,
// reversed). `t` is clamped to [-1, 1].
Rgb diverging(double t);

// ---- the SVG writer ----------------------------------------------------------------------

struct Paint {
  std::string fill = "none";    // "#rrggbb", "none", or "url(#id)" for a pattern or gradient
  std::string stroke = "none";
  double stroke_width = 1;
  std::string dash = "";        // stroke-dasharray, e.g. "4 3"; empty: solid
  std::string css_class = "";   // class="..." (lets tests and style sheets find elements)
};

struct TextStyle {
  double size = 12;               // font size in px
  std::string anchor = "start";   // text-anchor: start | middle | end
  double rotate = 0;              // degrees, about the anchor point (-90: reads bottom to top)
  bool bold = false;
  std::string fill = "#222222";
};

// Appends SVG elements to a string; finish() closes the document. Every label goes through
// xml_escape, every number is written with at most two decimals.
class SvgWriter {
 public:
  SvgWriter(double width, double height);  // canvas size; also the viewBox "0 0 width height"

  // Verbatim markup for <defs> (patterns, gradients). The caller writes well-formed XML.
  void defs(const std::string& markup);
  // A rectangle; `tooltip` (if not empty) becomes a <title> child, which browsers show on hover.
  void rect(double x, double y, double w, double h, const Paint& paint, const std::string& tooltip = "");
  void line(double x1, double y1, double x2, double y2, const Paint& paint);
  void polyline(const std::vector<std::pair<double, double>>& points, const Paint& paint);
  void circle(double cx, double cy, double r, const Paint& paint);
  // `y` is the baseline. For text centred on a point, pass y + 0.35 * size.
  void text(double x, double y, const std::string& label, const TextStyle& style = {});
  void begin_group(const std::string& css_class);  // <g class="..."> ... </g>
  void end_group();

  double width() const { return width_; }
  double height() const { return height_; }
  // The finished document: XML declaration, <svg> with viewBox and font, white background, defs,
  // the elements in the order they were added.
  std::string finish() const;

 private:
  double width_, height_;
  std::string defs_;
  std::string body_;
  int open_groups_ = 0;
};

// Width in px that `label` takes at font size `size` (DejaVu Sans / Arial: about 0.6 em per
// Latin character, 1 em for CJK and other wide characters). An estimate, for layout.
double text_width(const std::string& label, double size);

// ---- the pictures ------------------------------------------------------------------------

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
std::string attention_heatmaps_svg(const std::vector<Heatmap>& maps, int columns, const std::string& title);

// Training curves from a run's metrics.tsv (written by the trainer: a header line, then one
// tab-separated row per event with the columns
//   step  epoch  kind  loss  nll  ppl  lr  tokens_per_s  grad_norm  bleu  elapsed_s
// where kind is train | valid | test | skipped and an empty cell means "not measured").
// Three panels sharing the step axis:
//   1. loss and NLL of the training rows (lines), of the validation rows (dots), and steps
//      skipped for a non-finite gradient (red ticks on the top edge);
//   2. validation BLEU (line with dots) and test BLEU (diamond);
//   3. learning rate.
// When a resumed run logs a step again, the later rows replace the earlier ones from that step
// on. Columns are found by name, so extra columns are fine. Throws std::runtime_error
// "PATH: ..." for a file that cannot be read and "PATH:LINE: ..." for a missing column, a row
// with the wrong number of cells, an unknown kind, or a cell that is not a number.
std::string training_curves_svg(const std::string& metrics_tsv_path);

// The positional-encoding table as a heatmap: position down the side, embedding dimension along
// the bottom, blue (-1) - white (0) - red (+1); a table whose values are all far below 1 in size
// (a learned one) gets a symmetric range of its own. Only the first 200 positions and 512
// dimensions are drawn (the subtitle says when the table was cut). The cells are the <rect>s in
// <g class="heatmap">. Throws std::invalid_argument unless the table is 2-D, float and not empty.
std::string positional_encoding_svg(const Tensor& table, const std::string& title);

// One curve through the points (x[i], y[i]) with axes, ticks and labels (e.g. the learning rate
// per step of a schedule). Non-finite points are left out; the y axis includes 0. Throws std::invalid_argument if x and y
// differ in length or are empty.
std::string line_chart_svg(const std::vector<double>& x, const std::vector<double>& y, const std::string& title,
                           const std::string& x_label, const std::string& y_label);

// Writes `text` to PATH.tmp and renames it over `path`, so a reader (a browser refreshing the
// picture while training runs) sees either the old file or the new one, never half of one.
// Throws std::runtime_error naming the path and the reason.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace sf::train
