// `scratchformer demo scaling`: softmax(q.k) with and without 1/sqrt(d_k) for d_k = 4 .. 1024,
// q and k ~ N(0, I), float64: the scores' variance, the weights' entropy and largest weight, and
// the gradient the autograd sends back to q, averaged over several seeds.
//
// Letters: T keys, d_k width of q and k.
#include "train/lessons/demo_scaling.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <utility>

#include "autograd/generator.h"
#include "autograd/ops.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {

namespace {

constexpr std::int64_t kKeys = 16, kSeeds = 32;
const std::vector<std::int64_t> kWidths{4, 16, 64, 256, 1024};
// The sample variance of 512 scores (32 seeds x 16 keys; q shared within a seed) is within about
// 25% of the true one; [0.5, 2] x the expected value is a wide margin that still tells d_k from 1.
constexpr double kVarianceFactor = 2.0;
// Scaled scores are N(0,1) at every width: the weights of 16 keys keep an entropy of about 2.3
// of the 2.77 nats possible. Saturated weights have almost none. Half of log T separates the two.
constexpr double kSpreadEntropyFraction = 0.5;
// Raw scores at d_k 1024 have standard deviation 32: the top weight is ~1 except when two keys
// nearly tie. 0.8 on average is clearly "one key takes it all" (uniform would be 1/16).
constexpr double kSaturatedMaxWeight = 0.8;
// The gradient through saturated weights is exponentially small; a factor 10 below the scaled
// gradient is the least "vanishing" can mean.
constexpr double kGradientRatio = 10.0;

struct Draw {
  double var_sum = 0, entropy = 0, max_weight = 0, grad = 0;
  std::vector<double> grads;  // one per seed (their median is reported)
  void add(const Draw& o) {
    var_sum += o.var_sum;
    entropy += o.entropy;
    max_weight += o.max_weight;
    grads.push_back(o.grad);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One q (d,1), keys K (T,d) and upstream r (T,1): the scores' squares summed (their mean is 0),
// the weights' entropy and max, and ||dL/dq|| for L = sum(softmax(K q * scale) * r).
Draw one_draw(const Tensor& keys, const Tensor& q0, const Tensor& r, double scale) {
  Tensor q = q0.detach().clone();
  q.requires_grad_();
  const Tensor scores = matmul(keys, q) * scale;  // (T,1)
  const Tensor w = softmax(scores, 0);             // (T,1)
  sum(w * r).backward();
  Draw d;
  for (double s : scores.to_vector<double>()) d.var_sum += s * s;
  for (double p : w.to_vector<double>()) {
    if (p > 0) d.entropy -= p * std::log(p);
    d.max_weight = std::max(d.max_weight, p);
  }
  d.grad = std::sqrt(sum(q.grad() * q.grad()).item());
  return d;
}

ScalingRow one_width(std::int64_t d_k, std::uint64_t seed) {
  ScalingRow row;
  row.d_k = d_k;
  Draw raw, scaled;
  for (std::int64_t s = 0; s < kSeeds; ++s) {
    Generator gen(seed + static_cast<std::uint64_t>(s));
    const Tensor q = randn({d_k, 1}, gen, Dtype::Float64), keys = randn({kKeys, d_k}, gen, Dtype::Float64);
    const Tensor r = randn({kKeys, 1}, gen, Dtype::Float64);
    raw.add(one_draw(keys, q, r, 1.0));
    scaled.add(one_draw(keys, q, r, 1.0 / std::sqrt(double(d_k))));
  }
  const double n = kSeeds;
  row.var_raw = raw.var_sum / (n * kKeys);
  row.var_scaled = scaled.var_sum / (n * kKeys);
  row.entropy_raw = raw.entropy / n;
  row.entropy_scaled = scaled.entropy / n;
  row.max_raw = raw.max_weight / n;
  row.max_scaled = scaled.max_weight / n;
  row.grad_raw = median(raw.grads);
  row.grad_scaled = median(scaled.grads);
  return row;
}

bool within_factor(double value, double expected, double factor) {
  return value > expected / factor && value < expected * factor;
}

using Curve = std::vector<std::pair<double, double>>;

// One panel: raw (red) and scaled (blue) against log2 d_k.
void curve_panel(train::SvgWriter& svg, double x, double y, const Curve& raw, const Curve& scaled,
                 const std::string& title, const std::string& y_label) {
  double lo = raw[0].second, hi = lo;
  for (const Curve* c : {&raw, &scaled})
    for (const auto& [cx, cy] : *c) lo = std::min(lo, cy), hi = std::max(hi, cy);
  train::Frame f{x, y, 280, 150, train::make_axis(2, 10, 5), train::make_axis(lo, hi, 4)};
  train::draw_frame(svg, f, "log2 d_k", y_label, title);
  for (const auto& [c, colour] : {std::pair{&raw, "#d1495b"}, std::pair{&scaled, "#2e6fbb"}}) {
    Curve px;
    for (const auto& [cx, cy] : *c) px.push_back({f.px(cx), f.py(cy)});
    svg.polyline(px, {.stroke = colour, .stroke_width = 2});
    for (const auto& [px_x, px_y] : px) svg.circle(px_x, px_y, 3, {.fill = colour});
  }
}

std::string scaling_svg(const ScalingResult& r) {
  Curve var_raw, var_scaled, ent_raw, ent_scaled, max_raw, max_scaled, grad_raw, grad_scaled;
  for (const ScalingRow& row : r.rows) {
    const double x = std::log2(double(row.d_k));
    var_raw.push_back({x, std::log10(row.var_raw)}), var_scaled.push_back({x, std::log10(row.var_scaled)});
    ent_raw.push_back({x, row.entropy_raw}), ent_scaled.push_back({x, row.entropy_scaled});
    max_raw.push_back({x, row.max_raw}), max_scaled.push_back({x, row.max_scaled});
    grad_raw.push_back({x, std::log10(row.grad_raw)}), grad_scaled.push_back({x, std::log10(row.grad_scaled)});
  }
  train::SvgWriter svg(760, 520);
  svg.text(16, 26, "demo scaling: softmax(q.k) vs softmax(q.k / sqrt(d_k)) / 缩放点积", {.size = train::kTitleFont, .bold = true});
  svg.text(16, 46, "red: without 1/sqrt(d_k); blue: with it. Means over " + std::to_string(r.seeds) + " seeds, " +
                       std::to_string(r.keys) + " keys.", {.size = train::kTickFont});
  curve_panel(svg, 80, 90, var_raw, var_scaled, "variance of the scores (log10)", "log10 var");
  curve_panel(svg, 460, 90, ent_raw, ent_scaled, "entropy of the weights (nats)", "entropy");
  curve_panel(svg, 80, 320, max_raw, max_scaled, "largest weight", "max w");
  curve_panel(svg, 460, 320, grad_raw, grad_scaled, "||dL/dq|| (log10)", "log10 grad");
  return svg.finish();
}

void print_scaling(const ScalingResult& r, std::ostream& out) {
  print_heading(out, "scaled dot-product attention / 缩放点积注意力");
  out << "q, k ~ N(0, I) of width d_k; " << r.keys << " keys; means over " << r.seeds << " seeds; float64.\n"
      << "raw = softmax(q.k), scaled = softmax(q.k / sqrt(d_k)); entropy in nats (uniform = log " << r.keys
      << " = " << fixed(r.max_entropy, 3) << ");\n||dL/dq|| by backward() for L = sum_j w_j r_j, r ~ N(0,1): the MEDIAN over seeds\n"
      << "(a mean is dominated by the rare draws where two keys nearly tie).\n\n"
      << "   d_k | var raw   var scaled | entropy raw  scaled | max w raw  scaled | ||dL/dq|| raw  scaled\n";
  for (const ScalingRow& row : r.rows) {
    std::string line = std::to_string(row.d_k);
    line.insert(0, 6 - std::min<std::size_t>(6, line.size()), ' ');
    out << line << " | " << fixed(row.var_raw, 1) << std::string(std::max(1, 10 - int(fixed(row.var_raw, 1).size())), ' ')
        << fixed(row.var_scaled, 3) << "      | " << fixed(row.entropy_raw, 4) << "       " << fixed(row.entropy_scaled, 4)
        << " | " << fixed(row.max_raw, 4) << "     " << fixed(row.max_scaled, 4) << " | " << sci(row.grad_raw)
        << "       " << sci(row.grad_scaled) << "\n";
  }
}

}  // namespace

ScalingResult compute_scaling(std::uint64_t seed) {
  ScalingResult r{kKeys, kSeeds, std::log(double(kKeys)), {}};
  for (std::int64_t d_k : kWidths) r.rows.push_back(one_width(d_k, seed));
  return r;
}

bool scaling_held(const ScalingResult& r) {
  bool held = true;
  for (const ScalingRow& row : r.rows)
    held = held && within_factor(row.var_raw, double(row.d_k), kVarianceFactor) &&
           within_factor(row.var_scaled, 1.0, kVarianceFactor) &&
           row.entropy_scaled > kSpreadEntropyFraction * r.max_entropy;
  const ScalingRow& widest = r.rows.back();
  return held && widest.entropy_raw < kSpreadEntropyFraction * r.max_entropy / 4 &&
         widest.max_raw > kSaturatedMaxWeight && widest.grad_raw * kGradientRatio < widest.grad_scaled;
}

int run_scaling_demo(const DemoOptions& options, std::ostream& out) {
  const ScalingResult r = compute_scaling(options.seed);
  print_scaling(r, out);
  const bool held = scaling_held(r);
  out << "\nWithout the scale the variance grows like d_k, the weights collapse onto one key and almost no\n"
         "gradient reaches q (softmax is saturated); with 1/sqrt(d_k) they stay spread at every width.\n"
         "/ 不除以 sqrt(d_k) 时 softmax 饱和，梯度消失。\n"
      << verdict(held) << "\n";
  save_demo_svg(options, "scaling", scaling_svg(r), out);
  return held ? 0 : 1;
}

Json scaling_report(const DemoOptions& options) {
  const ScalingResult r = compute_scaling(options.seed);
  std::vector<double> d, var_raw, var_scaled, ent_raw, ent_scaled, max_raw, max_scaled, grad_raw, grad_scaled;
  for (const ScalingRow& row : r.rows) {
    d.push_back(static_cast<double>(row.d_k));
    var_raw.push_back(row.var_raw), var_scaled.push_back(row.var_scaled);
    ent_raw.push_back(row.entropy_raw), ent_scaled.push_back(row.entropy_scaled);
    max_raw.push_back(row.max_raw), max_scaled.push_back(row.max_scaled);
    grad_raw.push_back(row.grad_raw), grad_scaled.push_back(row.grad_scaled);
  }
  const Json raw = bilingual("softmax(q.k)", "softmax(q.k)"), scaled = bilingual("softmax(q.k / sqrt(d_k))", "softmax(q.k / sqrt(d_k))");
  const auto panel = [&](Json title, Json y_label, const std::vector<double>& a, const std::vector<double>& b, bool y_log) {
    return lines_figure(std::move(title), {bilingual("d_k", "d_k"), std::move(y_label), true, y_log},
                        {line_series(raw, d, a), line_series(scaled, d, b)});
  };
  return {{"held", scaling_held(r)},
          {"numbers", {number(bilingual("keys T", "键的个数 T"), r.keys), number(bilingual("seeds", "随机种子数"), r.seeds),
                       number(bilingual("entropy of uniform weights, log T", "均匀权重的熵 log T"), r.max_entropy)}},
          {"figures", {panel(bilingual("variance of the scores", "分数的方差"), bilingual("variance", "方差"), var_raw, var_scaled, true),
                       panel(bilingual("entropy of the weights (nats)", "权重的熵（奈特）"), bilingual("entropy", "熵"), ent_raw, ent_scaled, false),
                       panel(bilingual("largest weight", "最大权重"), bilingual("max w", "max w"), max_raw, max_scaled, false),
                       panel(bilingual("||dL/dq||, median over seeds", "||dL/dq||（各种子的中位数）"), bilingual("gradient norm", "梯度范数"),
                             grad_raw, grad_scaled, true)}}};
}

}  // namespace sf::lessons
