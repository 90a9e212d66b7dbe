// Demo `crossover`: see demo_crossover.h for the formulas and what is timed.
//
// Letters: T sequence length, D d_model, F d_ff, H heads.
#include "train/lessons/demo_crossover.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <stdexcept>
#include <string>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/tensor.h"
#include "nn/attention.h"
#include "nn/feed_forward.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {

double attention_flops(std::int64_t T, std::int64_t d_model) {
  const double t = static_cast<double>(T), d = static_cast<double>(d_model);
  return 8 * t * d * d + 4 * t * t * d;
}

double ffn_flops(std::int64_t T, std::int64_t d_model, std::int64_t d_ff) {
  return 4 * static_cast<double>(T) * static_cast<double>(d_model) * static_cast<double>(d_ff);
}

double formula_crossover(std::int64_t d_model, std::int64_t d_ff) { return static_cast<double>(d_ff - 2 * d_model); }

double measured_crossover(const std::vector<std::pair<double, double>>& t_and_ratio) {
  if (t_and_ratio.empty()) return 0;
  if (t_and_ratio.front().second >= 1) return -1;
  for (std::size_t i = 1; i < t_and_ratio.size(); ++i) {
    const auto [t0, r0] = t_and_ratio[i - 1];
    const auto [t1, r1] = t_and_ratio[i];
    if (r1 < 1) continue;
    // log r is linear in log2 T between the two points: solve log r = 0.
    const double f = -std::log(r0) / (std::log(r1) - std::log(r0));
    return std::exp2(std::log2(t0) + f * (std::log2(t1) - std::log2(t0)));
  }
  return 0;
}

namespace {

template <class F>
double median_seconds(int repeats, F&& run) {
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

CrossoverResult compute_crossover(std::uint64_t seed, const CrossoverSettings& s) {
  if (s.lengths.size() < 2 || s.d_model % s.n_heads != 0 || s.d_ff <= 0)
    throw std::invalid_argument("demo crossover: expected two lengths or more, d_model divisible by n_heads and d_ff > 0");
  CrossoverResult r;
  r.settings = s;
  Generator gen(seed), drop(seed + 1);
  const nn::MultiHeadAttention attention(s.d_model, s.n_heads, s.n_heads, 0.0, nn::PositionInAttention::None, gen, drop);
  const nn::FeedForward ffn(s.d_model, s.d_ff, nn::Activation::ReLU, 0.0, gen, drop);
  NoGradGuard no_grad;  // forward only: the cost of computing, not of keeping a graph
  std::vector<std::pair<double, double>> ratios;
  for (std::int64_t T : s.lengths) {
    const Tensor x = randn({1, T, s.d_model}, gen);  // (1,T,D)
    CrossoverPoint p;
    p.length = T;
    p.attention_seconds = median_seconds(s.repeats, [&] { attention.forward(x, x, Tensor()); });
    p.ffn_seconds = median_seconds(s.repeats, [&] { ffn.forward(x); });
    p.attention_flops = attention_flops(T, s.d_model);
    p.ffn_flops = ffn_flops(T, s.d_model, s.d_ff);
    r.points.push_back(p);
    ratios.push_back({static_cast<double>(T), p.attention_seconds / p.ffn_seconds});
  }
  r.formula_t = formula_crossover(s.d_model, s.d_ff);
  r.measured_t = measured_crossover(ratios);
  r.claim_holds = ratios.front().second < 1 && ratios.back().second > 1;
  return r;
}

namespace {

void print_crossover(const CrossoverResult& r, std::ostream& out) {
  const CrossoverSettings& s = r.settings;
  out << "Attention O(T^2 D) against the FFN O(T D^2) / 注意力与前馈层的计算量交叉点\n"
      << "  one layer, D " << s.d_model << ", F " << s.d_ff << ", H " << s.n_heads
      << ", batch 1, forward only, float32; attention = q/k/v/out projections + softmax(q k^T) v (plain, no mask)\n"
      << "  FLOPs: attention 8 T D^2 + 4 T^2 D, FFN 4 T D F; equal at T* = F - 2D = " << fixed(r.formula_t, 0) << "\n\n"
      << "       T   attention ms    FFN ms   time ratio   FLOP ratio   attention GFLOP/s   FFN GFLOP/s\n";
  for (const CrossoverPoint& p : r.points)
    out << std::setw(8) << p.length << std::setw(15) << fixed(p.attention_seconds * 1e3, 3) << std::setw(10)
        << fixed(p.ffn_seconds * 1e3, 3) << std::setw(13) << fixed(p.attention_seconds / p.ffn_seconds, 2)
        << std::setw(13) << fixed(p.attention_flops / p.ffn_flops, 2) << std::setw(20)
        << fixed(p.attention_flops / p.attention_seconds / 1e9, 1) << std::setw(14)
        << fixed(p.ffn_flops / p.ffn_seconds / 1e9, 1) << "\n";
  out << "\n  crossover by the formula: T* = " << fixed(r.formula_t, 0) << "; measured (times cross): T = ";
  if (r.measured_t > 0)
    out << fixed(r.measured_t, 0);
  else
    out << (r.measured_t < 0 ? "below the shortest T" : "beyond the longest T");
  out << "\n  Time is FLOPs / speed, and the speeds differ: the GFLOP/s columns show each kernel's. Where attention "
         "runs\n  fewer FLOP/s than the FFN (its softmax and per-head products against two large products), the "
         "times\n  cross before the formula's T*; where it runs more, after.\n"
      << verdict(r.claim_holds) << "\n";
}

std::string crossover_svg(const CrossoverResult& r) {
  train::SvgWriter svg(1000, 450);
  svg.text(20, 26, "attention against the feed-forward block: one layer, D " + std::to_string(r.settings.d_model) +
                       " / 注意力与前馈层：时间与 FLOPs 随 T 的变化",
           {.size = train::kTitleFont, .bold = true});
  Series at{"attention (measured)", colour(0), {}}, ff{"FFN (measured)", colour(1), {}};
  Series af{"attention FLOPs", colour(0), {}, true}, fff{"FFN FLOPs", colour(1), {}, true};
  for (const CrossoverPoint& p : r.points) {
    const auto T = static_cast<double>(p.length);
    at.points.push_back({T, p.attention_seconds * 1e3});
    ff.points.push_back({T, p.ffn_seconds * 1e3});
    af.points.push_back({T, p.attention_flops / 1e9});
    fff.points.push_back({T, p.ffn_flops / 1e9});
  }
  draw_log_lines(svg, 90, 70, 360, 300, "time / 时间", "sequence length T / 序列长度", "ms", {at, ff});
  draw_log_lines(svg, 590, 70, 360, 300, "FLOPs by the formulas / 公式计算量", "sequence length T / 序列长度",
                 "GFLOP", {af, fff});
  const std::string measured = r.measured_t > 0 ? fixed(r.measured_t, 0) : std::string("outside the range");
  svg.text(90, 430, "crossover: formula T* = " + fixed(r.formula_t, 0) + ", measured T = " + measured +
                        " / 交叉点：公式 " + fixed(r.formula_t, 0) + "，实测 " + measured,
           {.size = 12});
  return svg.finish();
}

}  // namespace

int run_crossover_demo(const DemoOptions& options, std::ostream& out) {
  check_demo_svg_path(demo_svg_path(options, "crossover"));
  const CrossoverResult r = compute_crossover(options.seed);
  print_crossover(r, out);
  save_demo_svg(options, "crossover", crossover_svg(r), out);
  return r.claim_holds ? 0 : 1;
}

Json crossover_json(const CrossoverResult& r) {
  std::vector<double> t, att_ms, ffn_ms, att_flops, ffn_flops_v;
  for (const CrossoverPoint& p : r.points) {
    t.push_back(static_cast<double>(p.length));
    att_ms.push_back(p.attention_seconds * 1e3), ffn_ms.push_back(p.ffn_seconds * 1e3);
    att_flops.push_back(p.attention_flops), ffn_flops_v.push_back(p.ffn_flops);
  }
  const Json attention = bilingual("attention", "注意力"), ffn = bilingual("FFN", "前馈网络");
  return {{"held", r.claim_holds},
          {"numbers", {number(bilingual("d_model", "d_model"), r.settings.d_model), number(bilingual("d_ff", "d_ff"), r.settings.d_ff),
                       number(bilingual("T* by the formula, d_ff - 2 d_model", "公式给出的 T* = d_ff - 2 d_model"), r.formula_t),
                       number(bilingual("T where the measured times cross", "实测时间交叉处的 T"), r.measured_t)}},
          {"figures", {lines_figure(bilingual("one layer's forward time (this machine)", "一层的前向时间（本机）"),
                                    {bilingual("sequence length T", "序列长度 T"), bilingual("ms", "毫秒"), true, true},
                                    {line_series(attention, t, att_ms), line_series(ffn, t, ffn_ms)},
                                    {{r.formula_t, bilingual("T* (formula)", "T*（公式）")}}),
                       lines_figure(bilingual("FLOPs by the formulas", "公式计算的浮点运算量"),
                                    {bilingual("sequence length T", "序列长度 T"), bilingual("FLOPs", "浮点运算次数"), true, true},
                                    {line_series(attention, t, att_flops), line_series(ffn, t, ffn_flops_v)},
                                    {{r.formula_t, bilingual("T*", "T*")}})}}};
}

Json crossover_report(const DemoOptions& options) { return crossover_json(compute_crossover(options.seed)); }

}  // namespace sf::lessons
