// `scratchformer bench --attention`: see attention_bench.h for what is measured and how.
//
// Letters: B batch, H heads, T sequence length, Dh head width, W window.
#include "train/bench/attention_bench.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "autograd/generator.h"
#include "autograd/ladder/ladder.h"
#include "autograd/ops.h"
#include "autograd/runtime/memory_stats.h"
#include "autograd/runtime/threads.h"
#include "train/bench/bench_util.h"
#include "train/classroom/svg.h"

namespace sf::train {

using namespace bench_util;  // Clock, median, fixed, rounded, cpu_model, print_row, ...

namespace {

// (T,T) bool, true where query i may not read key j: after it, or (window W > 0) W or more before.
Tensor band_mask(std::int64_t T, std::int64_t window) {
  std::vector<bool> blocked(static_cast<std::size_t>(T * T));
  for (std::int64_t i = 0; i < T; ++i)
    for (std::int64_t j = 0; j < T; ++j) blocked[i * T + j] = j > i || (window > 0 && j <= i - window);
  return from_vector<bool>(blocked, {T, T});
}

using Rung = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;

// One forward and backward of `rung` on q, k, v (leaves): its time and extra memory at the peak.
AttentionBenchCell measure(const std::string& name, const Rung& rung, Tensor& q, Tensor& k, Tensor& v,
                           std::int64_t steps) {
  AttentionBenchCell cell;
  cell.rung = name;
  cell.length = q.size(2);
  std::vector<double> times;
  for (std::int64_t run = 0; run <= steps; ++run) {  // run 0 untimed
    for (Tensor* t : {&q, &k, &v}) t->zero_grad();
    const std::int64_t live_before = memory_stats().live_bytes;
    reset_peak_memory();
    tiled_attention_peak_scratch_bytes(/*reset=*/true);
    const auto start = Clock::now();
    sum(rung(q, k, v)).backward();
    if (run > 0) times.push_back(seconds_since(start));
    cell.peak_bytes = memory_stats().peak_bytes - live_before + tiled_attention_peak_scratch_bytes();
  }
  cell.seconds = median(times);
  return cell;
}

constexpr const char* kRungColours[] = {"#7f7f7f", "#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#9467bd"};

// Two log-log panels: time and memory against T, one line per rung.
std::string attention_bench_svg(const std::vector<AttentionBenchCell>& cells, const std::vector<std::string>& rungs) {
  const double W = 1200, H = 470, pw = 400, ph = 330, top = 60;
  SvgWriter svg(W, H);
  svg.text(20, 28, "the attention kernel ladder: one forward + backward against T / 注意力内核阶梯：一次前向加反向随 T 的变化",
           {15, "start", 0, true});
  const auto panel = [&](double left, const std::string& title, auto value, const std::string& unit) {
    double lo = 1e300, hi = 0, t_lo = 1e300, t_hi = 0;
    for (const auto& c : cells) {
      lo = std::min(lo, value(c)), hi = std::max(hi, value(c));
      t_lo = std::min(t_lo, double(c.length)), t_hi = std::max(t_hi, double(c.length));
    }
    lo = std::floor(std::log10(std::max(lo, 1e-12))), hi = std::ceil(std::log10(hi));
    const auto px = [&](double t) { return left + pw * std::log2(t / t_lo) / std::log2(t_hi / t_lo); };
    const auto py = [&](double y) { return top + ph * (hi - std::log10(std::max(y, 1e-12))) / (hi - lo); };
    svg.text(left, top - 12, title, {13, "start", 0, true});
    svg.line(left, top, left, top + ph, {"none", "#444444"});
    svg.line(left, top + ph, left + pw, top + ph, {"none", "#444444"});
    for (double e = lo; e <= hi; e += 1) {
      svg.line(left, py(std::pow(10, e)), left + pw, py(std::pow(10, e)), {"none", "#dddddd"});
      svg.text(left - 6, py(std::pow(10, e)) + 4, "1e" + std::to_string(static_cast<int>(e)) + " " + unit, {10, "end"});
    }
    for (double t = t_lo; t <= t_hi; t *= 2) svg.text(px(t), top + ph + 16, std::to_string(std::int64_t(t)), {10, "middle"});
    svg.text(left + pw / 2, top + ph + 34, "sequence length T / 序列长度", {11, "middle"});
    for (std::size_t r = 0; r < rungs.size(); ++r) {
      std::vector<std::pair<double, double>> pts;
      for (const auto& c : cells)
        if (c.rung == rungs[r]) pts.push_back({px(double(c.length)), py(value(c))});
      svg.polyline(pts, {"none", kRungColours[r % 6], 2, rungs[r].find("mask") != std::string::npos ? "5 3" : ""});
      for (const auto& [x, y] : pts) svg.circle(x, y, 2.5, {kRungColours[r % 6], kRungColours[r % 6]});
    }
  };
  panel(70, "time / 时间", [](const AttentionBenchCell& c) { return c.seconds; }, "s");
  panel(570, "extra memory at the peak / 峰值额外内存", [](const AttentionBenchCell& c) { return double(c.peak_bytes); }, "B");
  double y = top + 10;
  for (std::size_t r = 0; r < rungs.size(); ++r, y += 18) {
    svg.line(990, y, 1010, y, {"none", kRungColours[r % 6], 3, rungs[r].find("mask") != std::string::npos ? "5 3" : ""});
    svg.text(1014, y + 4, rungs[r], {10});
  }
  return svg.finish();
}

}  // namespace

namespace {

// Every rung at one length T: fresh random q, k, v (1,H,T,Dh).
std::vector<AttentionBenchCell> cells_at(std::int64_t T, const AttentionBenchOptions& opt, Generator& gen) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(opt.head_dim));
  Tensor q = randn({1, opt.heads, T, opt.head_dim}, gen).requires_grad_();
  Tensor k = randn({1, opt.heads, T, opt.head_dim}, gen).requires_grad_();
  Tensor v = randn({1, opt.heads, T, opt.head_dim}, gen).requires_grad_();
  const Tensor causal = band_mask(T, 0), window = band_mask(T, opt.window);
  const std::string w = std::to_string(opt.window);
  std::vector<AttentionBenchCell> cells;
  if (T <= opt.loops_up_to)
    cells.push_back(measure("1 loops", [&](auto& a, auto& b, auto& c) { return attention_loops(a, b, c, causal, scale); },
                            q, k, v, opt.steps));
  cells.push_back(measure("2 matmul", [&](auto& a, auto& b, auto& c) { return attention_naive(a, b, c, causal, Tensor(), scale); },
                          q, k, v, opt.steps));
  cells.push_back(measure("2 matmul, window " + w + " as a mask",
                          [&](auto& a, auto& b, auto& c) { return attention_naive(a, b, c, window, Tensor(), scale); }, q, k, v,
                          opt.steps));
  cells.push_back(measure("3 tiled", [&](auto& a, auto& b, auto& c) { return tiled_attention(a, b, c, causal, Tensor(), scale); },
                          q, k, v, opt.steps));
  cells.push_back(measure("4 window " + w, [&](auto& a, auto& b, auto& c) { return window_attention(a, b, c, opt.window, scale); },
                          q, k, v, opt.steps));
  cells.push_back(measure("5 causal", [&](auto& a, auto& b, auto& c) { return causal_attention(a, b, c, scale); }, q, k, v,
                          opt.steps));
  return cells;
}

}  // namespace

std::vector<AttentionBenchCell> attention_bench_cells(const AttentionBenchOptions& opt) {
  if (opt.lengths.empty()) throw std::invalid_argument("bench --attention: no sequence length to measure");
  if (opt.window < 1) throw std::invalid_argument("bench --attention: expected --window >= 1, got " + std::to_string(opt.window));
  if (opt.steps < 1) throw std::invalid_argument("bench --attention: expected --steps >= 1, got " + std::to_string(opt.steps));
  for (std::int64_t T : opt.lengths)
    if (T < 1) throw std::invalid_argument("bench --attention: lengths must be >= 1, got " + std::to_string(T));
  Generator gen(0);
  cells_at(opt.lengths.front(), opt, gen);  // untimed: the first calls start threads and BLAS
  std::vector<AttentionBenchCell> cells;
  for (std::int64_t T : opt.lengths)
    for (AttentionBenchCell& c : cells_at(T, opt, gen)) cells.push_back(std::move(c));
  return cells;
}

int run_attention_bench(const AttentionBenchOptions& opt, std::int64_t threads) {
  if (threads < 0) throw std::invalid_argument("bench: --threads must be >= 0, got " + std::to_string(threads));
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  if (!opt.svg.empty()) check_output_file(opt.svg, ".svg", "bench --attention");  // before minutes of measuring
  const double load_start = load_average_1min();
  const std::vector<AttentionBenchCell> cells = attention_bench_cells(opt);
  const double load_end = load_average_1min();
  std::vector<std::string> rungs;  // in the order measured
  for (const auto& c : cells)
    if (std::find(rungs.begin(), rungs.end(), c.rung) == rungs.end()) rungs.push_back(c.rung);

  nlohmann::ordered_json j;
  j["tool"] = "scratchformer";
  j["mode"] = "attention";
  j["cpu"] = cpu_model();
  j["threads"] = num_threads();
  j["load_avg_start"] = rounded(load_start, 2);
  j["load_avg_end"] = rounded(load_end, 2);
  j["heads"] = opt.heads;
  j["head_dim"] = opt.head_dim;
  j["window"] = opt.window;
  j["steps"] = opt.steps;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& c : cells)
    list.push_back({{"rung", c.rung}, {"T", c.length}, {"ms", rounded(c.seconds * 1e3, 3)}, {"peak_bytes", c.peak_bytes}});
  j["cells"] = list;

  if (!opt.json_only) {
    std::ostringstream os;
    os << "scratchformer bench --attention: the attention kernel ladder (autograd/ladder/ladder.h)\n"
       << "machine   " << cpu_model() << ", " << num_threads() << " threads, load average " << fixed(load_start, 2)
       << " at the start, " << fixed(load_end, 2) << " at the end\n"
       << "setting   causal self-attention, B 1, H " << opt.heads << ", Dh " << opt.head_dim
       << ", float32; one forward + backward (loss = sum(out)), median of " << opt.steps << " after 1\n"
       << "memory    extra at the peak: tensor storage (saved scores and weights, gradients, temporaries) + the tiled\n"
       << "          kernels' scratch; the inputs are not counted\n\n";
    os << std::left << std::setw(34) << "rung" << std::right;
    for (std::int64_t T : opt.lengths) os << std::setw(11) << ("T " + std::to_string(T));
    os << "\n";
    for (const std::string& rung : rungs) {
      for (int what = 0; what < 2; ++what) {
        os << std::left << std::setw(34) << (what == 0 ? rung + ", ms" : "  MiB") << std::right;
        for (std::int64_t T : opt.lengths) {
          const auto it = std::find_if(cells.begin(), cells.end(), [&](const auto& c) { return c.rung == rung && c.length == T; });
          os << std::setw(11)
             << (it == cells.end() ? "-" : what == 0 ? fixed(it->seconds * 1e3, 2) : fixed(double(it->peak_bytes) / 1048576.0, 2));
        }
        os << "\n";
      }
    }
    std::cout << os.str() << "\n";
  }
  if (!opt.svg.empty()) {
    write_file_atomically(opt.svg, attention_bench_svg(cells, rungs));
    if (!opt.json_only) std::cout << "SVG written to / 图已写入: " << opt.svg << "\n";
  }
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace sf::train
