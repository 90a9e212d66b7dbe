// The demo registry, in the order of the course, and what every demo shares: the SVG file it
// writes, the verdict line, number formatting, a heatmap and a log-scale bar chart.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <stdexcept>
#include <system_error>

#include "train/classroom/svg.h"
#include "train/lessons/demo.h"
#include "train/lessons/demo_texts.h"

namespace sf::lessons {

namespace fs = std::filesystem;

const std::vector<Demo>& demos() {
  static const std::vector<Demo> all = {
      {"path-length", "a recurrent network's gradient shrinks geometrically with distance; self-attention reaches every token in one step",
       run_path_length_demo, path_length_report, 6},
      {"parallel", "an LSTM's T positions are a chain of T dependent steps; self-attention's chain is the same at every length",
       run_parallel_demo, parallel_report, 1},
      {"bottleneck", "without attention the decoder knows the source through one vector: its accuracy falls as sentences grow",
       run_bottleneck_demo, bottleneck_report, 31},
      {"alignment", "attention learns the alignment nobody gave it: Bahdanau's weights peak on the word being translated",
       run_alignment_demo, alignment_report, 30},
      {"autograd", "tensors and autograd at work: y = sum(relu(x @ w)) forward and backward, dy/dw = x^T [x @ w > 0]",
       run_autograd_demo, autograd_report, 1},
      {"worked-example", "the notes' hand computation: X, Q, K, V, scores, /sqrt(d_k), softmax per row, A V; a causal softmax",
       run_worked_example_demo, worked_example_report, 1},
      {"positions", "sinusoidal positions: PE_p . PE_q depends only on p - q and is largest at p = q",
       run_positions_demo, positions_report, 1},
      {"masks", "a real batch's padding and causal masks: every blocked key gets attention weight exactly 0",
       run_masks_demo, masks_report, 1},
      {"permutation", "without positions self-attention is permutation-equivariant; sinusoidal or RoPE positions break it",
       run_permutation_demo, permutation_report, 1},
      {"collapse", "two attention layers with fixed weights and no nonlinearity are one layer (A2 A1, V1 V2); a ReLU between is not",
       run_collapse_demo, collapse_report, 1},
      {"scaling", "without 1/sqrt(d_k) softmax(q.k) saturates as d_k grows: entropy -> 0, max weight -> 1, gradient -> 0",
       run_scaling_demo, scaling_report, 1},
      {"lookup", "attention is a soft lookup table: a sharp query returns its key's value, one between keys blends them",
       run_lookup_demo, lookup_report, 1},
      {"rope", "<R_i x, R_j y> depends only on j - i; one frequency collides after its period, many do not", run_rope_demo, rope_report, 1},
      {"gqa", "MHA vs GQA vs MQA at the same width: parameters, KV-cache bytes per token, decode speed", run_gqa_demo, gqa_report, 1},
      {"crossover", "short sequences are FFN-bound, long ones attention-bound: measured times cross near T* = d_ff - 2 d_model",
       run_crossover_demo, crossover_report, 3},
      {"extrapolation", "train on L, test on 4L: how each position scheme's loss moves past L; learned positions refuse",
       run_extrapolation_demo, extrapolation_report, 90},
      {"kv-bandwidth", "a decoding step reads the whole KV cache: its time grows with the bytes, GQA/MQA read fewer; a window bounds them",
       run_kv_bandwidth_demo, kv_bandwidth_report, 7},
      {"attribution", "attention weights are not an explanation: attention, rollout, gradient x input, integrated gradients and head ablation against a known alignment",
       run_attribution_demo, attribution_report, 10},
      {"pooling", "a sentence vector by mean pooling vs attention pooling, on real sentences", run_pooling_demo, pooling_report, 1},
      {"label-smoothing", "with label smoothing the loss bottoms out at the entropy of the smoothed target, not at 0",
       run_label_smoothing_demo, label_smoothing_report, 1},
      {"schedule", "warm-up then decay: every schedule peaks at the end of warm-up; noam halves its rate in four times the steps",
       run_schedule_demo, schedule_report, 1},
  };
  return all;
}

const Demo* find_demo(const std::string& name) {
  for (const Demo& d : demos())
    if (d.name == name) return &d;
  return nullptr;
}

namespace {

// {"name", "claim": {en, zh}, "explain": {en, zh}, "seconds"}: what the page lists before a run.
Json demo_entry(const Demo& d) {
  const DemoText* text = find_demo_text(d.name);
  if (!text) throw std::logic_error("demo " + d.name + " has no entry in demo_texts.cpp");
  return {{"name", d.name},
          {"claim", bilingual(d.claim, text->claim_zh)},
          {"explain", bilingual(text->explain_en, text->explain_zh)},
          {"seconds", d.seconds}};
}

}  // namespace

Json demo_report(const Demo& demo, const DemoOptions& options) {
  Json report = demo_entry(demo);
  const Json numbers = demo.report(options);  // {"held", "numbers", "figures"} (and "steps")
  for (const auto& [key, value] : numbers.items()) report[key] = value;
  return report;
}

Json demo_list_json() {
  Json list = Json::array();
  for (const Demo& d : demos()) list.push_back(demo_entry(d));
  return {{"demos", std::move(list)}};
}

std::string demo_svg_path(const DemoOptions& options, const std::string& name) {
  return options.out.empty() ? "demo-" + name + ".svg" : options.out;
}

void check_demo_svg_path(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw std::invalid_argument("demo: --out " + path + " is a directory; expected a file name ending in .svg");
  if (path.size() < 5 || path.compare(path.size() - 4, 4, ".svg") != 0)
    throw std::invalid_argument("demo: --out " + path + " does not end in .svg; expected a file name like demo.svg");
}

void save_demo_svg(const DemoOptions& options, const std::string& name, const std::string& svg, std::ostream& out) {
  const fs::path path = demo_svg_path(options, name);
  check_demo_svg_path(path.string());
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec) throw std::runtime_error("demo: cannot create the folder of " + path.string() + ": " + ec.message());
  train::write_file_atomically(path.string(), svg);
  out << "SVG written to / 图已写入: " << path.string() << "\n";
}

const char* colour(std::size_t i) {
  static const char* colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return colours[i % 10];
}

void draw_log_lines(train::SvgWriter& svg, double x, double y, double w, double h, const std::string& title,
                    const std::string& x_label, const std::string& unit, const std::vector<Series>& series) {
  double x_lo = 1e300, x_hi = 0, y_lo = 1e300, y_hi = 0;
  for (const Series& s : series)
    for (const auto& [px, py] : s.points) {
      x_lo = std::min(x_lo, px), x_hi = std::max(x_hi, px);
      y_lo = std::min(y_lo, py), y_hi = std::max(y_hi, py);
    }
  if (x_hi <= 0 || y_hi <= 0) return;  // nothing to draw
  const double e_lo = std::floor(std::log10(std::max(y_lo, 1e-300))), e_hi = std::max(e_lo + 1, std::ceil(std::log10(y_hi)));
  const double l_lo = std::log2(x_lo), l_hi = std::max(l_lo + 1, std::log2(x_hi));
  const auto sx = [&](double v) { return x + w * (std::log2(v) - l_lo) / (l_hi - l_lo); };
  const auto sy = [&](double v) { return y + h * (e_hi - std::log10(std::max(v, 1e-300))) / (e_hi - e_lo); };
  svg.text(x, y - 12, title, {.size = 13, .bold = true});
  for (double e = e_lo; e <= e_hi; e += 1) {
    svg.line(x, sy(std::pow(10, e)), x + w, sy(std::pow(10, e)), {.stroke = "#dddddd"});
    svg.text(x - 6, sy(std::pow(10, e)) + 4, "1e" + std::to_string(static_cast<int>(e)) + " " + unit,
             {.size = 10, .anchor = "end"});
  }
  for (double v = std::pow(2.0, std::ceil(l_lo)); v <= x_hi * 1.0001; v *= 2)
    svg.text(sx(v), y + h + 16, std::to_string(std::llround(v)), {.size = 10, .anchor = "middle"});
  svg.line(x, y, x, y + h, {.stroke = "#444444"});
  svg.line(x, y + h, x + w, y + h, {.stroke = "#444444"});
  svg.text(x + w / 2, y + h + 34, x_label, {.size = 11, .anchor = "middle"});
  double legend_y = y + 14;
  for (const Series& s : series) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& [px, py] : s.points) pts.push_back({sx(px), sy(py)});
    svg.polyline(pts, {.stroke = s.colour, .stroke_width = 2, .dash = s.dashed ? "5 3" : ""});
    for (const auto& [px, py] : pts) svg.circle(px, py, 2.5, {.fill = s.colour, .stroke = s.colour});
    svg.line(x + 8, legend_y - 4, x + 28, legend_y - 4, {.stroke = s.colour, .stroke_width = 3, .dash = s.dashed ? "5 3" : ""});
    svg.text(x + 32, legend_y, s.name, {.size = 10});
    legend_y += 15;
  }
}

std::string verdict(bool held) {
  return held ? "claim holds / 结论成立" : "claim does NOT hold / 结论不成立";
}

void print_heading(std::ostream& out, const std::string& title) { out << "\n== " << title << " ==\n"; }

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// ---- pictures ------------------------------------------------------------------------------

void draw_heatmap(train::SvgWriter& svg, double x, double y, double cell, const Heatmap& map) {
  using train::TextStyle;
  // Column labels wider than a cell are turned 45 degrees (and the title moves up above them).
  double widest = 0;
  for (const std::string& label : map.col_labels) widest = std::max(widest, train::text_width(label, train::kTickFont));
  const bool turned = widest > cell - 2;
  svg.text(x, y - 28 - (turned ? 0.71 * widest : 0), map.title, {.size = train::kLabelFont, .bold = true});
  for (std::size_t c = 0; c < map.col_labels.size(); ++c)
    svg.text(x + (c + 0.5) * cell, y - 8, map.col_labels[c],
             {.size = train::kTickFont, .anchor = turned ? "start" : "middle", .rotate = turned ? -45.0 : 0.0});
  for (std::size_t r = 0; r < map.m.size(); ++r) {
    if (r < map.row_labels.size())
      svg.text(x - 6, y + (r + 0.5) * cell + 4, map.row_labels[r], {.size = train::kTickFont, .anchor = "end"});
    for (std::size_t c = 0; c < map.m[r].size(); ++c) {
      const double v = map.m[r][c];
      const train::Rgb colour = map.signed_values ? train::diverging(v / map.hi)
                                                  : train::viridis((v - map.lo) / (map.hi - map.lo));
      svg.rect(x + c * cell, y + r * cell, cell, cell, {.fill = colour.hex(), .stroke = "#ffffff"},
               train::short_value(v));
      const std::string ink = colour.luminance() > 0.4 ? "#111111" : "#ffffff";
      svg.text(x + (c + 0.5) * cell, y + (r + 0.5) * cell + 4, fixed(v, 2),
               {.size = 10, .anchor = "middle", .fill = ink});
    }
  }
}

void draw_log_bars(train::SvgWriter& svg, double x, double y, double w, const std::vector<std::string>& labels,
                   const std::vector<double>& values, double threshold, const std::string& title) {
  constexpr double kRow = 22, kLabelWidth = 230, kFloor = 1e-18;  // log10 of an exact 0 is drawn at 1e-18
  double lo = std::log10(kFloor), hi = 1;
  for (double v : values) hi = std::max(hi, std::ceil(std::log10(std::max(v, kFloor))));
  train::Frame f{x + kLabelWidth, y, w - kLabelWidth, kRow * values.size(), train::make_axis(lo, hi, 6),
                 train::Axis{0, 1, 1, {}}};
  train::draw_frame(svg, f, "log10 of the value", "", title, /*grid=*/false);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double top = y + i * kRow + 4, v = std::log10(std::max(values[i], kFloor));
    const bool small = values[i] < threshold;
    svg.rect(f.px(f.ax.lo), top, f.px(v) - f.px(f.ax.lo), kRow - 8, {.fill = small ? "#4c9f70" : "#d1495b"},
             labels[i] + ": " + sci(values[i]));
    svg.text(f.x - 6, top + 11, labels[i], {.size = train::kTickFont, .anchor = "end"});
    svg.text(f.px(v) + 4, top + 11, sci(values[i]), {.size = 10});
  }
  const double t = f.px(std::log10(threshold));
  svg.line(t, f.y, t, f.y + f.h, {.stroke = "#444444", .dash = "4 3"});
}

}  // namespace sf::lessons
