// The classroom's pictures (see plots.h for what each one shows), drawn with the SVG toolkit of
// svg.h: a Frame is a plot rectangle with an x and a y Axis that map data values to pixels;
// draw_frame() draws its grid, ticks and labels, and the code here adds rectangles, lines and
// dots inside it.
#include "train/classroom/plots.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

#include "nn/positional.h"
#include "train/optim/schedule.h"

namespace sf::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- heatmaps ----

constexpr double kOverlap = 0.4;  // px a heatmap cell reaches under its neighbours (see draw_heatmap)

// The hatch for masked cells: light grey with darker diagonal stripes.
constexpr const char* kMaskedPattern =
    "<pattern id=\"masked\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" "
    "patternTransform=\"rotate(45)\"><rect width=\"5\" height=\"5\" fill=\"#f4f4f4\"/>"
    "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"5\" stroke=\"#c4c4c4\" stroke-width=\"2\"/></pattern>";

// Sizes shared by every map in a grid, so the maps line up.
struct GridLayout {
  double cell;          // side of one cell, px
  double font;          // token label font size
  int label_every;      // label every k-th token when cells are too small for every label
  double row_label_w;   // room left of a map for the query labels
  double col_label_h;   // room below a map for the (rotated) key labels
  double slot_w, slot_h;  // one map with its labels and the gap to the next
};

constexpr double kMaxLabelWidth = 120;  // longer tokens are cut with "…"
constexpr double kMapTitleHeight = 22;

GridLayout grid_layout(const std::vector<Heatmap>& maps) {
  std::int64_t most_rows = 1, most_cols = 1;
  for (const Heatmap& m : maps)
    most_rows = std::max(most_rows, m.weights.size(0)), most_cols = std::max(most_cols, m.weights.size(1));
  GridLayout g{};
  // About 320 px for the longer side of a map, cells between 5 and 22 px.
  g.cell = std::clamp(320.0 / static_cast<double>(std::max(most_rows, most_cols)), 5.0, 22.0);
  g.font = std::clamp(g.cell * 0.62, 8.5, 11.0);
  g.label_every = static_cast<int>(std::ceil(g.font * 1.15 / g.cell));
  double row_w = 0, col_h = 0;
  for (const Heatmap& m : maps) {
    for (const std::string& l : m.row_labels)
      row_w = std::max(row_w, text_width(cut_to_width(l, g.font, kMaxLabelWidth), g.font));
    for (const std::string& l : m.col_labels)
      col_h = std::max(col_h, text_width(cut_to_width(l, g.font, kMaxLabelWidth), g.font));
  }
  g.row_label_w = row_w + 8;
  g.col_label_h = col_h + 8;
  double title_w = 0;
  for (const Heatmap& m : maps) title_w = std::max(title_w, text_width(m.title, 12));
  g.slot_w = g.row_label_w + std::max(static_cast<double>(most_cols) * g.cell, title_w) + 28;
  g.slot_h = kMapTitleHeight + static_cast<double>(most_rows) * g.cell + g.col_label_h + 18;
  return g;
}

void check_heatmap(const Heatmap& m, std::size_t index) {
  const std::string where = "attention_heatmaps_svg: map " + std::to_string(index) + " ('" + m.title + "')";
  if (!m.weights.defined() || m.weights.dim() != 2 || !is_floating(m.weights.dtype()))
    throw std::invalid_argument(where + ": expected float weights of shape (rows, cols), got " +
                                (m.weights.defined() ? std::string(dtype_name(m.weights.dtype())) + " " + shape_str(m.weights.shape())
                                                     : std::string("an undefined tensor")));
  if (m.weights.size(0) != static_cast<std::int64_t>(m.row_labels.size()) ||
      m.weights.size(1) != static_cast<std::int64_t>(m.col_labels.size()))
    throw std::invalid_argument(where + ": weights " + shape_str(m.weights.shape()) + " but " +
                                std::to_string(m.row_labels.size()) + " row labels and " +
                                std::to_string(m.col_labels.size()) + " column labels");
  constexpr double kSlack = 1e-3;  // a softmax weight may exceed 1 by rounding; more is a bug upstream
  const std::vector<double> w = m.weights.contiguous().to_vector<double>();
  for (std::size_t k = 0; k < w.size(); ++k)
    if (!(w[k] >= -kSlack && w[k] <= 1 + kSlack)) {
      const auto cols = static_cast<std::size_t>(m.weights.size(1));
      throw std::invalid_argument(where + ": weight [" + std::to_string(k / cols) + ", " + std::to_string(k % cols) +
                                  "] is " + short_value(w[k]) + ", expected a value in [0, 1]");
    }
}

// Draws one map (already checked) with its labels into the slot whose top-left corner is (ox, oy).
void draw_heatmap(SvgWriter& svg, const Heatmap& m, const GridLayout& g, double ox, double oy, Lang lang) {
  const std::string masked = text(lang, ": masked (0)", "：遮蔽 (0)");
  const std::int64_t rows = m.weights.size(0), cols = m.weights.size(1);
  const std::vector<double> w = m.weights.contiguous().to_vector<double>();
  const double hx = ox + g.row_label_w, hy = oy + kMapTitleHeight;  // top-left cell
  svg.text(hx, oy + 14, m.title, {.size = 12, .bold = true});
  svg.begin_group("heatmap");
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      const double v = w[static_cast<std::size_t>(i * cols + j)];
      const std::string pair = m.row_labels[i] + " → " + m.col_labels[j];
      const double x = hx + static_cast<double>(j) * g.cell, y = hy + static_cast<double>(i) * g.cell;
      // Each cell reaches kOverlap px into its right and lower neighbours, which are drawn later and
      // cover it: this hides the hairline seams anti-aliasing leaves between touching rectangles.
      const double side = g.cell + kOverlap;
      if (v == 0)
        svg.rect(x, y, side, side, {.fill = "url(#masked)", .css_class = "masked"}, pair + masked);
      else
        svg.rect(x, y, side, side, {.fill = viridis(v).hex(), .css_class = "cell"}, pair + ": " + short_value(v));
    }
  }
  svg.end_group();
  svg.rect(hx, hy, static_cast<double>(cols) * g.cell, static_cast<double>(rows) * g.cell, {.stroke = "#888888"});
  // Query labels, right-aligned against the map; key labels rotated, reading upwards, ending
  // just below the map.
  for (std::int64_t i = 0; i < rows; i += g.label_every)
    svg.text(hx - 4, hy + (static_cast<double>(i) + 0.5) * g.cell + 0.35 * g.font,
             cut_to_width(m.row_labels[i], g.font, kMaxLabelWidth), {.size = g.font, .anchor = "end"});
  const double below = hy + static_cast<double>(rows) * g.cell + 4;
  for (std::int64_t j = 0; j < cols; j += g.label_every)
    svg.text(hx + (static_cast<double>(j) + 0.5) * g.cell + 0.35 * g.font, below,
             cut_to_width(m.col_labels[j], g.font, kMaxLabelWidth), {.size = g.font, .anchor = "end", .rotate = -90});
}

// ---- metrics.tsv ----

// One row of metrics.tsv; NaN where the cell was empty.
struct MetricsRow {
  std::int64_t step;
  std::string kind;  // train | valid | test | skipped
  double loss, nll, lr, bleu;
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t tab = line.find('\t', begin);
    cells.push_back(line.substr(begin, tab - begin));
    if (tab == std::string::npos) return cells;
    begin = tab + 1;
  }
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

[[noreturn]] void metrics_error(const std::string& path, std::size_t line, const std::string& what) {
  throw std::runtime_error(path + ":" + std::to_string(line) + ": " + what);
}

// A cell as a number: empty -> NaN; otherwise the whole cell must parse (inf and nan are
// accepted: the trainer logs a diverged loss as inf).
double parse_cell(const std::string& cell, const std::string& column, const std::string& path, std::size_t line) {
  if (cell.empty()) return kNaN;
  double v = 0;
  const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  if (ec != std::errc() || end != cell.data() + cell.size())
    metrics_error(path, line, "column '" + column + "' holds '" + cell + "', which is not a number");
  return v;
}

std::vector<MetricsRow> read_metrics(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error(path + ": is a folder; expected the metrics.tsv file inside a run folder");
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the metrics file: " + std::strerror(errno));
  static const std::vector<std::string> kRequired = {"step", "kind", "loss", "nll", "lr", "bleu"};
  std::string line;
  std::size_t line_no = 0;
  std::vector<std::string> header;
  std::map<std::string, std::size_t> column;  // name -> index
  std::vector<MetricsRow> rows;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1) {
      header = split_tabs(line);
      for (std::size_t c = 0; c < header.size(); ++c) column[header[c]] = c;
      for (const std::string& name : kRequired)
        if (!column.count(name))
          metrics_error(path, 1, "the header has no column '" + name + "' (found: " + join(header, ", ") +
                                     "); expected the trainer's header step, epoch, kind, loss, nll, ppl, lr, "
                                     "tokens_per_s, grad_norm, bleu, elapsed_s, tab-separated");
      continue;
    }
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_tabs(line);
    if (cells.size() != header.size())
      metrics_error(path, line_no, "expected " + std::to_string(header.size()) + " tab-separated cells as in the header, found " +
                                       std::to_string(cells.size()));
    MetricsRow r;
    const std::string& step = cells[column["step"]];
    const auto [end, ec] = std::from_chars(step.data(), step.data() + step.size(), r.step);
    if (ec != std::errc() || end != step.data() + step.size() || step.empty())
      metrics_error(path, line_no, "column 'step' holds '" + step + "', which is not a whole number");
    r.kind = cells[column["kind"]];
    if (r.kind != "train" && r.kind != "valid" && r.kind != "test" && r.kind != "skipped")
      metrics_error(path, line_no, "column 'kind' holds '" + r.kind + "', expected train, valid, test or skipped");
    r.loss = parse_cell(cells[column["loss"]], "loss", path, line_no);
    r.nll = parse_cell(cells[column["nll"]], "nll", path, line_no);
    r.lr = parse_cell(cells[column["lr"]], "lr", path, line_no);
    r.bleu = parse_cell(cells[column["bleu"]], "bleu", path, line_no);
    rows.push_back(r);
  }
  if (in.bad()) throw std::runtime_error(path + ": read error: " + std::strerror(errno));
  if (line_no == 0)
    throw std::runtime_error(path + ": the file is empty; expected a header line (step, epoch, kind, loss, ...) and rows");
  return rows;
}

// How a series is drawn.
enum class Mark {
  Line,      // a polyline (training rows, logged often)
  Dots,      // a dot per point (validation rows)
  LineDots,  // both (validation BLEU: few points, but a trend)
  Diamonds,  // a diamond per point (the test score at the end)
  Ticks,     // a short red tick on the top edge at each step, value ignored (skipped steps)
};

// One curve or set of marks in the training-curve panels, (step, value) in step order.
struct Series {
  std::string name;       // legend text
  const char* css_class;  // class of its <polyline> or <g> of marks, e.g. "train-loss"
  const char* colour;
  Mark mark;
  std::vector<std::pair<double, double>> points;

  // Adds a point; a step at or before the last one replaces the points from that step on (a
  // resumed run that logs the same steps again).
  void add(std::int64_t step, double value) {
    if (!std::isfinite(value)) return;
    drop_from(step);
    points.emplace_back(static_cast<double>(step), value);
  }
  void drop_from(std::int64_t step) {
    while (!points.empty() && points.back().first >= static_cast<double>(step)) points.pop_back();
  }
};

// The y range of some series (min and max over their points), or [0, 1] if they are empty.
std::pair<double, double> value_range(const std::vector<const Series*>& series, bool include_zero) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const Series* s : series)
    for (const auto& [x, y] : s->points) lo = std::min(lo, y), hi = std::max(hi, y);
  if (lo > hi) return {0, 1};
  if (include_zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  return {lo, hi};
}

// One mark of `mark`'s kind centred at (x, y) (Ticks: hanging from y).
void draw_mark(SvgWriter& svg, Mark mark, double x, double y, const char* colour) {
  switch (mark) {
    case Mark::Line: svg.line(x - 11, y, x + 11, y, {.stroke = colour, .stroke_width = 2.2}); break;
    case Mark::Dots: svg.circle(x, y, 3.2, {.fill = colour, .stroke = "#ffffff", .stroke_width = 0.8}); break;
    case Mark::LineDots:
      draw_mark(svg, Mark::Line, x, y, colour);
      draw_mark(svg, Mark::Dots, x, y, colour);
      break;
    case Mark::Diamonds: {
      constexpr double r = 5.5;
      svg.polyline({{x, y - r}, {x + r, y}, {x, y + r}, {x - r, y}, {x, y - r}}, {.fill = colour, .stroke = "#ffffff"});
      break;
    }
    case Mark::Ticks: svg.line(x, y, x, y + 9, {.stroke = colour, .stroke_width = 1.5}); break;
  }
}

void draw_series(SvgWriter& svg, const Frame& f, const Series& s) {
  if (s.points.empty()) return;
  std::vector<std::pair<double, double>> px;
  px.reserve(s.points.size());
  for (const auto& [x, y] : s.points) px.emplace_back(f.px(x), s.mark == Mark::Ticks ? f.y : f.py(y));
  if (s.mark == Mark::Line || s.mark == Mark::LineDots)
    svg.polyline(thin_points(px), {.stroke = s.colour, .stroke_width = 1.8, .css_class = s.css_class});
  if (s.mark == Mark::Line) return;
  svg.begin_group(s.mark == Mark::LineDots ? std::string(s.css_class) + "-points" : s.css_class);
  for (const auto& [x, y] : px) draw_mark(svg, s.mark == Mark::LineDots ? Mark::Dots : s.mark, x, y, s.colour);
  svg.end_group();
}

// A legend to the right of a frame: a sample mark, then the name; one entry per non-empty series.
void draw_legend(SvgWriter& svg, const Frame& f, const std::vector<const Series*>& series) {
  double y = f.y + 8;
  for (const Series* s : series) {
    if (s->points.empty()) continue;
    const double x = f.x + f.w + 27;
    draw_mark(svg, s->mark, x, s->mark == Mark::Ticks ? y - 5 : y, s->colour);
    svg.text(x + 17, y + 0.35 * kTickFont, s->name, {.size = kTickFont});
    y += 18;
  }
}

void no_data(SvgWriter& svg, const Frame& f, const std::string& what) {
  svg.text(f.x + f.w / 2, f.y + f.h / 2, what, {.size = 13, .anchor = "middle", .fill = "#888888"});
}

// The run's learning rate at every step 1..the last logged one, from the schedule of the
// config.toml the trainer saved beside metrics.tsv: the logged rows (every log_every steps) can
// miss the peak at the end of the warmup. Empty when there is no readable config.toml.
Series schedule_series(const std::string& metrics_tsv_path, const Series& logged, Lang lang) {
  Series s{text(lang, "lr schedule", "学习率调度"), "lr-schedule", "#c9b3e0", Mark::Line, {}};
  const std::filesystem::path config = std::filesystem::path(metrics_tsv_path).parent_path() / "config.toml";
  if (logged.points.empty() || !std::filesystem::exists(config)) return s;
  Config cfg;
  try {
    cfg = load_config(config.string());
  } catch (const std::exception&) {
    return s;  // an unreadable config: the note under the panel says the curve is the logged one
  }
  const Schedule schedule{parse_schedule(cfg.train.schedule), cfg.train.lr, cfg.train.min_lr, cfg.train.warmup_steps,
                          cfg.train.max_steps, cfg.model.d_model};
  const auto last = static_cast<std::int64_t>(logged.points.back().first);
  for (std::int64_t step = 1; step <= last; ++step) s.points.emplace_back(static_cast<double>(step), schedule.at(step));
  return s;
}

// Under the learning-rate panel: the peak of the curve drawn and where it comes from.
void lr_note(SvgWriter& svg, const Frame& f, const Series& drawn, bool from_schedule, const std::string& metrics_tsv_path,
             Lang lang) {
  if (drawn.points.empty()) return;
  const auto peak = std::max_element(drawn.points.begin(), drawn.points.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  const std::string file = std::filesystem::path(metrics_tsv_path).filename().string();
  std::ostringstream note;
  if (lang == Lang::Zh) {
    note << "学习率峰值 " << short_value(peak->second) << "，在第 " << static_cast<std::int64_t>(peak->first) << " 步";
    note << (from_schedule ? "（按 config.toml 的调度逐步算出；记录的行每 log_every 步才有一行）"
                           : "，只在记录的步中找：" + file + " 旁边没有可读的 config.toml，真正的峰值可能在它们之间");
  } else {
    note << "peak lr " << short_value(peak->second) << " at step " << static_cast<std::int64_t>(peak->first);
    if (from_schedule)
      note << " (the config.toml schedule at every step; the logged rows are every log_every steps)";
    else
      note << " among the logged steps only: no readable config.toml beside " + file + ", so the true peak may lie between them";
  }
  svg.begin_group("lr-note");
  svg.text(f.x, f.y + f.h + 48, note.str(), {.size = kTickFont, .fill = "#555555"});
  svg.end_group();
}

// The curves of a run's metrics rows, named in `lang` (the legend).
struct CurveSeries {
  Series train_loss, train_nll, valid_loss, valid_nll, skipped, valid_bleu, test_bleu, lr;
  std::vector<Series*> all() {
    return {&train_loss, &train_nll, &valid_loss, &valid_nll, &skipped, &valid_bleu, &test_bleu, &lr};
  }
};

CurveSeries curve_series(const std::vector<MetricsRow>& rows, Lang lang) {
  CurveSeries c{
      .train_loss = {text(lang, "train loss", "训练损失"), "train-loss", "#1f77b4", Mark::Line, {}},
      .train_nll = {text(lang, "train NLL", "训练 NLL"), "train-nll", "#ff7f0e", Mark::Line, {}},
      .valid_loss = {text(lang, "valid loss", "验证损失"), "valid-loss", "#0b3d91", Mark::Dots, {}},
      .valid_nll = {text(lang, "valid NLL", "验证 NLL"), "valid-nll", "#c44e00", Mark::Dots, {}},
      .skipped = {text(lang, "skipped step", "跳过的步"), "skipped", "#d62728", Mark::Ticks, {}},
      .valid_bleu = {text(lang, "valid BLEU", "验证 BLEU"), "valid-bleu", "#2ca02c", Mark::LineDots, {}},
      .test_bleu = {text(lang, "test BLEU", "测试 BLEU"), "test-bleu", "#d62728", Mark::Diamonds, {}},
      .lr = {text(lang, "lr logged", "记录的学习率"), "lr", "#9467bd", Mark::Line, {}}};
  std::int64_t last_train_step = std::numeric_limits<std::int64_t>::min();
  for (const MetricsRow& r : rows) {
    if (r.kind == "train") {
      // A resumed run starts again from its checkpoint: everything logged after that is replaced.
      if (r.step < last_train_step)
        for (Series* s : c.all()) s->drop_from(r.step);
      last_train_step = r.step;
      c.train_loss.add(r.step, r.loss);
      c.train_nll.add(r.step, r.nll);
      c.lr.add(r.step, r.lr);
    } else if (r.kind == "valid") {
      c.valid_loss.add(r.step, r.loss);
      c.valid_nll.add(r.step, r.nll);
      c.valid_bleu.add(r.step, r.bleu);
    } else if (r.kind == "test") {
      c.test_bleu.add(r.step, r.bleu);
    } else {
      c.skipped.add(r.step, 0);
    }
  }
  return c;
}

}  // namespace

// ---- the pictures ----

std::string attention_heatmaps_svg(const std::vector<Heatmap>& maps, int columns, const std::string& title, Lang lang) {
  if (maps.empty()) throw std::invalid_argument("attention_heatmaps_svg: expected at least one map, got none");
  if (columns < 1) throw std::invalid_argument("attention_heatmaps_svg: expected columns >= 1, got " + std::to_string(columns));
  for (std::size_t k = 0; k < maps.size(); ++k) check_heatmap(maps[k], k);
  const GridLayout g = grid_layout(maps);
  const int cols = std::min<int>(columns, static_cast<int>(maps.size()));
  const int grid_rows = static_cast<int>((maps.size() + columns - 1) / columns);
  constexpr double kMargin = 16, kTop = 62, kBarArea = 110;
  const double width = std::max(kMargin + cols * g.slot_w + kBarArea, 520.0);
  const double height = std::max(kTop + grid_rows * g.slot_h + 8, kTop + 240.0);
  SvgWriter svg(width, height);
  svg.defs(kMaskedPattern);
  svg.text(kMargin, 26, title, {.size = kTitleFont, .bold = true});
  svg.text(kMargin, 46,
           text(lang, "rows: queries (who is looking) · columns: keys (looked at) · each row sums to 1",
                "行：查询（谁在看）· 列：键（被看的）· 每行之和为 1"),
           {.size = 11.5, .fill = "#555555"});
  for (std::size_t k = 0; k < maps.size(); ++k) {
    const double ox = kMargin + static_cast<double>(k % columns) * g.slot_w;
    const double oy = kTop + static_cast<double>(k / columns) * g.slot_h;
    draw_heatmap(svg, maps[k], g, ox, oy, lang);
  }
  // Colour bar and the masked swatch, right of the grid.
  const double bx = width - kBarArea + 30, by = kTop + kMapTitleHeight;
  constexpr double kBarHeight = 180;
  svg.text(bx, by - 8, text(lang, "weight", "权重"), {.size = kTickFont, .bold = true});
  colour_bar(svg, bx, by, kBarHeight, 0, 1, {0, 0.25, 0.5, 0.75, 1}, "attention-bar", viridis);
  svg.rect(bx, by + kBarHeight + 14, 14, 14, {.fill = "url(#masked)", .stroke = "#555555"});
  svg.text(bx + 21, by + kBarHeight + 25, text(lang, "masked", "遮蔽"), {.size = kTickFont});
  return svg.finish();
}

std::string training_curves_svg(const std::string& metrics_tsv_path, Lang lang) {
  const std::vector<MetricsRow> rows = read_metrics(metrics_tsv_path);
  CurveSeries c = curve_series(rows, lang);
  double max_step = 1;
  for (const Series* s : c.all())
    for (const auto& p : s->points) max_step = std::max(max_step, p.first);

  constexpr double kLeft = 84, kPlotW = 600, kRight = 150, kPanelH = 190, kGap = 78, kTop = 78;
  SvgWriter svg(kLeft + kPlotW + kRight, kTop + 3 * kPanelH + 3 * kGap - 14);
  svg.text(kLeft - 60, 28, text(lang, "Training curves", "训练曲线"), {.size = kTitleFont, .bold = true});
  svg.text(kLeft - 60, 46, metrics_tsv_path + text(lang, " (", "（") + std::to_string(rows.size()) + text(lang, " rows)", " 行）"),
           {.size = 11, .fill = "#555555"});
  const Axis x_axis = make_axis(0, max_step, 8);
  const auto frame_at = [&](int panel, const std::pair<double, double>& range) {
    return Frame{kLeft, kTop + 14 + panel * (kPanelH + kGap), kPlotW, kPanelH, x_axis, make_axis(range.first, range.second)};
  };
  const std::string step = text(lang, "step", "步");

  const std::vector<const Series*> losses = {&c.train_loss, &c.train_nll, &c.valid_loss, &c.valid_nll};
  const Frame f1 = frame_at(0, value_range(losses, false));
  draw_frame(svg, f1, step, text(lang, "loss (nats per token)", "损失（每词元 nats）"),
             text(lang, "Loss: label-smoothed loss and NLL", "损失：标签平滑后的损失与 NLL"));
  for (const Series* s : losses) draw_series(svg, f1, *s);
  draw_series(svg, f1, c.skipped);
  draw_legend(svg, f1, {&c.train_loss, &c.train_nll, &c.valid_loss, &c.valid_nll, &c.skipped});
  if (std::all_of(losses.begin(), losses.end(), [](const Series* s) { return s->points.empty(); }))
    no_data(svg, f1, text(lang, "no loss logged yet", "还没有记录损失"));

  const std::vector<const Series*> bleus = {&c.valid_bleu, &c.test_bleu};
  const Frame f2 = frame_at(1, value_range(bleus, true));
  draw_frame(svg, f2, step, "BLEU",
             text(lang, "BLEU on the validation set (and the test set at the end)", "验证集上的 BLEU（最后还有测试集）"));
  for (const Series* s : bleus) draw_series(svg, f2, *s);
  draw_legend(svg, f2, bleus);
  if (c.valid_bleu.points.empty() && c.test_bleu.points.empty()) no_data(svg, f2, text(lang, "no BLEU measured yet", "还没有测过 BLEU"));

  Series& lr = c.lr;
  const Series exact = schedule_series(metrics_tsv_path, lr, lang);
  constexpr std::size_t kMaxDots = 300;  // more logged rows than this stay a line (dots would merge)
  if (!exact.points.empty() && lr.points.size() <= kMaxDots) lr.mark = Mark::Dots;  // samples on the exact curve
  const Frame f3 = frame_at(2, value_range({&lr, &exact}, true));
  draw_frame(svg, f3, step, text(lang, "learning rate", "学习率"), text(lang, "Learning rate", "学习率"));
  draw_series(svg, f3, exact);
  draw_series(svg, f3, lr);
  draw_legend(svg, f3, {&exact, &lr});
  if (lr.points.empty()) no_data(svg, f3, text(lang, "no learning rate logged yet", "还没有记录学习率"));
  lr_note(svg, f3, exact.points.empty() ? lr : exact, !exact.points.empty(), metrics_tsv_path, lang);
  return svg.finish();
}

std::string positional_encoding_svg(const Tensor& table, const std::string& title, Lang lang) {
  if (!table.defined() || table.dim() != 2 || table.numel() == 0 || !is_floating(table.dtype()))
    throw std::invalid_argument("positional_encoding_svg: expected a non-empty float table of shape (L, D), got " +
                                (table.defined() ? std::string(dtype_name(table.dtype())) + " " + shape_str(table.shape())
                                                 : std::string("an undefined tensor")));
  // Larger tables are cut, not subsampled: every k-th position of a fast sinusoid aliases into
  // moire patterns that are not in the table. 200 x 512 cells keep the file under ~7 MB.
  constexpr std::int64_t kMaxRows = 200, kMaxCols = 512;
  const std::int64_t L = table.size(0), D = table.size(1);
  const std::int64_t rows = std::min(L, kMaxRows), cols = std::min(D, kMaxCols);
  const std::vector<double> v = table.contiguous().to_vector<double>();

  // Colour range: [-1, 1] for a sinusoidal table; a learned table (values ~0.02) gets a
  // symmetric range of its own so it is not all white.
  double largest = 0;
  for (double x : v)
    if (std::isfinite(x)) largest = std::max(largest, std::abs(x));
  const double range = largest > 0.5 && largest <= 1 ? 1.0 : (largest > 0 ? make_axis(0, largest, 2).hi : 1.0);

  const double cell_w = std::clamp(640.0 / static_cast<double>(cols), 1.0, 24.0);
  const double cell_h = std::clamp(440.0 / static_cast<double>(rows), 1.0, 24.0);
  constexpr double kLeft = 78, kTop = 72, kBottom = 56, kBarArea = 90;
  const double plot_w = cell_w * static_cast<double>(cols), plot_h = cell_h * static_cast<double>(rows);
  SvgWriter svg(std::max(kLeft + plot_w + kBarArea, 480.0), kTop + plot_h + kBottom);
  svg.text(16, 26, title, {.size = kTitleFont, .bold = true});
  std::string subtitle = text(lang, "table ", "表 ") + shape_str(table.shape()) +
                         text(lang, ": row = position, column = embedding dimension", "：行 = 位置，列 = 嵌入维度");
  if (rows < L) subtitle += text(lang, "; showing positions 0-", "；只画出位置 0-") + std::to_string(rows - 1);
  if (cols < D) subtitle += text(lang, "; showing dimensions 0-", "；只画出维度 0-") + std::to_string(cols - 1);
  svg.text(16, 44, subtitle, {.size = 11.5, .fill = "#555555"});

  // The frame is exactly the cells: x from 0 to cols, y from 0 (top) to rows.
  Frame f{kLeft, kTop, plot_w, plot_h, make_axis(0, static_cast<double>(cols), 8), make_axis(0, static_cast<double>(rows), 8), true};
  f.ax.hi = static_cast<double>(cols), f.ay.hi = static_cast<double>(rows);
  std::erase_if(f.ax.ticks, [&](double t) { return t > f.ax.hi; });
  std::erase_if(f.ay.ticks, [&](double t) { return t > f.ay.hi; });

  svg.begin_group("heatmap");
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const double x = v[static_cast<std::size_t>(i * D + j)];
      // kOverlap: see draw_heatmap. No class or tooltip here: a 200 x 512 table has 100k cells.
      svg.rect(kLeft + static_cast<double>(j) * cell_w, kTop + static_cast<double>(i) * cell_h, cell_w + kOverlap,
               cell_h + kOverlap, {.fill = diverging(x / range).hex()});
    }
  svg.end_group();
  draw_frame(svg, f, text(lang, "embedding dimension", "嵌入维度"), text(lang, "position", "位置"), "", /*grid=*/false);
  const std::vector<double> bar_ticks = {-range, -range / 2, 0, range / 2, range};
  colour_bar(svg, kLeft + plot_w + 24, kTop, std::min(plot_h, 240.0), -range, range, bar_ticks, "pe-bar", diverging);
  return svg.finish();
}

std::string line_chart_svg(const std::vector<double>& x, const std::vector<double>& y, const std::string& title,
                           const std::string& x_label, const std::string& y_label, Lang lang) {
  if (x.size() != y.size() || x.empty())
    throw std::invalid_argument("line_chart_svg ('" + title + "'): expected x and y of the same non-zero length, got " +
                                std::to_string(x.size()) + " and " + std::to_string(y.size()));
  Series s{"", "series", "#1f77b4", Mark::Line, {}};
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::isfinite(x[i]) && std::isfinite(y[i])) {
      s.points.emplace_back(x[i], y[i]);
      x_lo = std::min(x_lo, x[i]), x_hi = std::max(x_hi, x[i]);
    }
  if (s.points.empty()) x_lo = 0, x_hi = 1;
  std::sort(s.points.begin(), s.points.end());
  constexpr double kLeft = 90, kTop = 56, kPlotW = 580, kPlotH = 300;
  SvgWriter svg(kLeft + kPlotW + 30, kTop + kPlotH + 60);
  svg.text(16, 28, title, {.size = kTitleFont, .bold = true});
  const auto [y_lo, y_hi] = value_range({&s}, /*include_zero=*/true);
  const Frame f{kLeft, kTop, kPlotW, kPlotH, make_axis(x_lo, x_hi, 8), make_axis(y_lo, y_hi)};
  draw_frame(svg, f, x_label, y_label, "");
  draw_series(svg, f, s);
  if (s.points.empty()) no_data(svg, f, text(lang, "no finite points", "没有有限值的点"));
  return svg.finish();
}

std::string positions_svg(const Config& cfg, Lang lang) {
  const nn::SinusoidalPositional pe(cfg.model.max_len, cfg.model.d_model);
  std::string title = text(lang, "Sinusoidal positions PE[pos, i], max_len ", "正弦位置编码 PE[pos, i]，max_len ") +
                      std::to_string(cfg.model.max_len) + text(lang, ", d_model ", "，d_model ") + std::to_string(cfg.model.d_model);
  if (cfg.model.arch == "rnn")  // a recurrent network reads its tokens in order: it has no positional encoding
    title += text(lang, " (arch rnn uses no positions: it reads the tokens in order; shown for comparison)",
                  "（arch rnn 不用位置编码：它按顺序读词元；画出来作对比）");
  else if (cfg.model.positional != "sinusoidal")
    title += text(lang, " (this config uses ", "（这个配置用的是 ") + cfg.model.positional +
             text(lang, " positions; shown for comparison)", " 位置编码；画出来作对比）");
  return positional_encoding_svg(pe.table(), title, lang);
}

std::string schedule_svg(const Config& cfg, Lang lang) {
  const Schedule schedule{parse_schedule(cfg.train.schedule), cfg.train.lr, cfg.train.min_lr, cfg.train.warmup_steps,
                          cfg.train.max_steps, cfg.model.d_model};
  constexpr std::int64_t kMaxPoints = 2000;  // enough for a smooth curve in a 600 px plot
  const std::int64_t stride = std::max<std::int64_t>(1, cfg.train.max_steps / kMaxPoints);
  std::vector<std::int64_t> steps;
  for (std::int64_t s = 1; s <= cfg.train.max_steps; s += stride) steps.push_back(s);
  steps.push_back(cfg.train.max_steps);
  if (cfg.train.warmup_steps >= 1 && cfg.train.warmup_steps <= cfg.train.max_steps) steps.push_back(cfg.train.warmup_steps);
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  std::vector<double> x, y;
  for (std::int64_t s : steps) {
    x.push_back(static_cast<double>(s));
    y.push_back(schedule.at(s));
  }
  const std::string comma = text(lang, ", ", "，");
  std::ostringstream title;
  title << text(lang, "Learning-rate schedule: ", "学习率调度：") << cfg.train.schedule << comma << "lr " << cfg.train.lr << comma
        << "warmup " << cfg.train.warmup_steps << comma << "max_steps " << cfg.train.max_steps;
  if (cfg.train.schedule == "noam") title << comma << "d_model " << cfg.model.d_model;
  return line_chart_svg(x, y, title.str(), text(lang, "step", "步"), text(lang, "learning rate", "学习率"), lang);
}

}  // namespace sf::train
