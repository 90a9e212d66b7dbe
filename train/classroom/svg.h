// The SVG toolkit behind the classroom's pictures (plots.h, attention_figures.h): hand-written
// SVG files that any web browser shows, made with no library and no external tool. Everything
// here is in namespace sf::train.
//
//   xml_escape, text_width   text: safe in XML whatever the bytes; its width, for layout
//   Rgb, viridis, diverging  colours and the two colour maps
//   SvgWriter                appends shapes and text to a document
//   Axis, Frame, draw_frame  a plot rectangle with axes mapping data to pixels; its grid, ticks, labels
//   colour_bar, thin_points  a colour bar beside a map; a long polyline thinned to what a screen shows
//   write_file_atomically    saves a picture (temp file + rename)
//
// A student can draw something new in a few lines:
//   SvgWriter svg(400, 300);
//   svg.rect(10, 10, 50, 50, {.fill = viridis(0.7).hex()});
//   svg.text(10, 80, "softmax(QK^T / sqrt(d))", {.size = 14});
//   write_file_atomically("square.svg", svg.finish());
//
// Coordinates are SVG user units (1 unit = 1 CSS pixel at 100% zoom), y grows downwards. Layout
// is plain arithmetic in pixels; labels are measured with text_width(), an estimate from the
// character count, which is what keeps rotated token labels from overlapping the maps.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sf::train {

// ---- text --------------------------------------------------------------------------------

// Makes any bytes safe inside an XML text node or a double-quoted attribute:
//   & < > " '  ->  &amp; &lt; &gt; &quot; &apos;
// Bytes that are not valid UTF-8 and control characters that XML 1.0 forbids (everything below
// U+0020 except tab, newline, carriage return) become U+FFFD, so the file always parses.
std::string xml_escape(const std::string& text);

// Width in px that `label` takes at font size `size` (DejaVu Sans / Arial: about 0.6 em per
// Latin character, 1 em for CJK and other wide characters). An estimate, for layout.
double text_width(const std::string& label, double size);

// `label` cut to at most `max_width` px at font `size` (whole characters), with "…" where it was cut.
std::string cut_to_width(const std::string& label, double size, double max_width);

// A value for a tooltip: four significant digits ("0.4231", "1.5e-05").
std::string short_value(double v);

// The font-family list of every picture (the <svg> element's font-family): Latin fonts, then
// CJK fonts that cover Chinese (WenQuanYi Micro Hei and Noto Sans CJK SC on Linux, PingFang SC
// on macOS, Microsoft YaHei on Windows), then the generic family. A viewer takes each
// character from the first listed font that has it.
inline constexpr const char* kSvgFontFamily =
    "DejaVu Sans, Noto Sans, Arial, Helvetica, WenQuanYi Micro Hei, Noto Sans CJK SC, PingFang SC, "
    "Microsoft YaHei, sans-serif";

// Font sizes in px shared by the pictures.
inline constexpr double kTickFont = 11;     // tick labels, legends
inline constexpr double kLabelFont = 12.5;  // axis labels
inline constexpr double kTitleFont = 15;    // a picture's title

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

// ---- axes and frames ---------------------------------------------------------------------

// A linear axis: data range [lo, hi] with ticks every `step`.
struct Axis {
  double lo = 0, hi = 1, step = 0.5;
  std::vector<double> ticks;
};

// An axis covering [lo, hi] with about `target` ticks at round numbers (1, 2 or 5 times a power
// of ten apart). The range is widened to the ticks just outside it, so the data never touches
// the frame; a zero-width range is widened.
Axis make_axis(double lo, double hi, int target = 5);

// A plot rectangle (x, y, w, h in px) and the axes that map data into it. The y axis points up
// unless y_down (then y = ay.lo is at the top, as rows of a table are).
struct Frame {
  double x, y, w, h;
  Axis ax, ay;
  bool y_down = false;
  double px(double v) const { return x + (v - ax.lo) / (ax.hi - ax.lo) * w; }
  double py(double v) const {
    const double f = (v - ay.lo) / (ay.hi - ay.lo);
    return y_down ? y + f * h : y + h - f * h;
  }
};

// Grid lines (unless !grid) and tick labels at the axes' ticks, a frame, the axis labels and a
// panel title above the frame (left-aligned); an empty label or title is left out.
void draw_frame(SvgWriter& svg, const Frame& f, const std::string& x_label, const std::string& y_label,
                const std::string& title, bool grid = true);

// A vertical colour bar at (x, y), `h` tall: `colour(v)` for v from `lo` (bottom) to `hi` (top),
// drawn as a linear gradient (defined in <defs> as `id`) with 21 stops, and ticks at `ticks`.
void colour_bar(SvgWriter& svg, double x, double y, double h, double lo, double hi, const std::vector<double>& ticks,
                const std::string& id, Rgb (*colour)(double));

// Thins a polyline (in px) to what a screen can show: points are grouped by half-pixel column of
// x, and each group keeps its first, lowest, highest and last point (in their order), so peaks
// and corners (the end of a warmup) survive. Lines of up to 2000 points are returned unchanged.
std::vector<std::pair<double, double>> thin_points(const std::vector<std::pair<double, double>>& pts);

// ---- files -------------------------------------------------------------------------------

// Writes `text` to PATH.tmp and renames it over `path`, so a reader (a browser refreshing the
// picture while training runs) sees either the old file or the new one, never half of one.
// Throws std::runtime_error naming the path and the reason.
void write_file_atomically(const std::string& path, const std::string& text);

// The project's rule for output options: `--out FILE` is always one file; a command that writes
// several takes `--out-dir DIR`. These check the path before any work is done, so a typo costs
// nothing. `command` names the command in the one-line message (std::invalid_argument).
//   check_output_file: `path` must end in `extension` (".svg") and must not be a directory.
//   make_output_dir:   `dir` must not be an existing file; it is created (with its parents).
void check_output_file(const std::string& path, const std::string& extension, const std::string& command);
void make_output_dir(const std::string& dir, const std::string& command);

}  // namespace sf::train
