// `scratchformer demo path-length`: the gradient from the last position back to each input, for a
// recurrent network and for self-attention (demo_path_length.h). One backward pass per model:
// the gradient of u · out_T with respect to every input position at once.
//
// Letters: T sequence length, D width.
#include "train/lessons/demo_path_length.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include "autograd/generator.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/recurrent.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {

namespace {

constexpr std::int64_t kT = 48, kD = 32;
// What "geometric decay" and "no decay" mean here: the recurrent gradient shrinks by a constant
// factor per step (fitted: below 0.9) and has lost three orders of magnitude by the far end;
// attention's fitted factor is 1 within 5% (no trend with distance), and its norms, which vary
// with each position's attention weight, stay within two orders of magnitude of each other
// (the recurrent ones span ten or more).
constexpr double kDecayFactorBelow = 0.9, kFarOverNearBelow = 1e-3, kFlatFactorWithin = 0.05, kFlatWithin = 100;

// ‖∂(u · out_T)/∂x_t‖ for t = T-2 .. 0 (distance 1 .. T-1): x (1,T,D) requires grad, out (1,T,D).
std::vector<double> norms_by_distance(const Tensor& x, const Tensor& out, const Tensor& u) {
  sum(mul(narrow(out, 1, kT - 1, 1), u)).backward();
  const std::vector<double> g = x.grad().to_vector<double>();  // (1,T,D)
  std::vector<double> norms;
  for (std::int64_t d = 1; d < kT; ++d) {
    const std::int64_t t = kT - 1 - d;
    double s = 0;
    for (std::int64_t k = 0; k < kD; ++k) s += g[t * kD + k] * g[t * kD + k];
    norms.push_back(std::sqrt(s));
  }
  return norms;
}

// exp(slope) of the least-squares line through (d, log norm_d): the factor per step.
double factor_per_step(const std::vector<double>& norms) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < norms.size(); ++i) {
    const double x = static_cast<double>(i + 1), y = std::log(std::max(norms[i], 1e-300));
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  return std::exp((n * sxy - sx * sy) / (n * sxx - sx * sx));
}

std::vector<double> recurrent_norms(nn::CellKind kind, const Tensor& x0, const Tensor& u, Generator& gen) {
  nn::Recurrent cell(kind, kD, kD, 1, false, gen, Dtype::Float64);
  Tensor x = clone(x0).requires_grad_();
  return norms_by_distance(x, cell.forward(x).outputs, u);
}

std::vector<double> attention_norms(const Tensor& x0, const Tensor& u, Generator& gen) {
  Generator dropout_gen(0);
  nn::MultiHeadAttention attention(kD, 1, 1, 0.0, nn::PositionInAttention::None, gen, dropout_gen, Dtype::Float64);
  Tensor x = clone(x0).requires_grad_();
  return norms_by_distance(x, attention.forward(x, x, Tensor()), u);
}

// log10 norm against distance, one line per model.
std::string path_length_svg(const PathLengthResult& r) {
  const double W = 840, H = 420, left = 70, top = 50, pw = 520, ph = 300;
  train::SvgWriter svg(W, H);
  svg.text(left, 28, "gradient from the last position back to distance d / 从最后一个位置回传到距离 d 的梯度",
           {15, "start", 0, true});
  double lo = 0, hi = 0;
  for (const auto* v : {&r.rnn, &r.lstm, &r.attention})
    for (double n : *v) lo = std::min(lo, std::log10(n)), hi = std::max(hi, std::log10(n));
  lo = std::floor(lo), hi = std::ceil(hi);
  const auto px = [&](double d) { return left + pw * (d - 1) / double(kT - 2); };
  const auto py = [&](double n) { return top + ph * (hi - std::log10(n)) / (hi - lo); };
  svg.line(left, top, left, top + ph, {"none", "#444444"});
  svg.line(left, top + ph, left + pw, top + ph, {"none", "#444444"});
  for (double e = lo; e <= hi; e += std::max(1.0, std::round((hi - lo) / 8))) {
    svg.line(left, py(std::pow(10, e)), left + pw, py(std::pow(10, e)), {"none", "#dddddd"});
    svg.text(left - 8, py(std::pow(10, e)) + 4, "1e" + std::to_string(static_cast<int>(e)), {11, "end"});
  }
  for (std::int64_t d = 1; d < kT; d += 8) svg.text(px(double(d)), top + ph + 18, std::to_string(d), {11, "middle"});
  svg.text(left + pw / 2, top + ph + 40, "distance d = T − t (tokens) / 距离（词元数）", {12, "middle"});
  const struct {
    const std::vector<double>* norms;
    const char* name;
    const char* colour;
  } lines[] = {{&r.rnn, "tanh RNN", "#d62728"}, {&r.lstm, "LSTM", "#ff7f0e"}, {&r.attention, "self-attention / 自注意力", "#1f77b4"}};
  double legend_y = top + 10;
  for (const auto& l : lines) {
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < l.norms->size(); ++i) pts.push_back({px(double(i + 1)), py((*l.norms)[i])});
    svg.polyline(pts, {"none", l.colour, 2});
    svg.line(left + pw + 20, legend_y, left + pw + 44, legend_y, {"none", l.colour, 3});
    svg.text(left + pw + 50, legend_y + 4, l.name, {12});
    legend_y += 22;
  }
  return svg.finish();
}

}  // namespace

PathLengthResult compute_path_length(std::uint64_t seed) {
  Generator gen(seed);
  PathLengthResult r;
  r.seq_len = kT, r.d_model = kD;
  const Tensor x = randn({1, kT, kD}, gen, Dtype::Float64);
  const Tensor u = randn({1, 1, kD}, gen, Dtype::Float64);
  for (std::int64_t d = 1; d < kT; ++d) r.distance.push_back(d);
  r.rnn = recurrent_norms(nn::CellKind::rnn, x, u, gen);
  r.lstm = recurrent_norms(nn::CellKind::lstm, x, u, gen);
  r.attention = attention_norms(x, u, gen);
  r.rnn_factor = factor_per_step(r.rnn), r.lstm_factor = factor_per_step(r.lstm);
  r.attention_factor = factor_per_step(r.attention);
  return r;
}

bool path_length_held(const PathLengthResult& r) {
  const auto decays = [](const std::vector<double>& n, double factor) {
    return factor < kDecayFactorBelow && n.back() < kFarOverNearBelow * n.front();
  };
  const auto [mn, mx] = std::minmax_element(r.attention.begin(), r.attention.end());
  return decays(r.rnn, r.rnn_factor) && decays(r.lstm, r.lstm_factor) &&
         std::abs(r.attention_factor - 1) < kFlatFactorWithin && *mx < kFlatWithin * *mn;
}

int run_path_length_demo(const DemoOptions& options, std::ostream& out) {
  const PathLengthResult r = compute_path_length(options.seed);
  print_heading(out, "path length: how far back a gradient reaches / 路径长度：梯度能回传多远");
  out << "T = " << r.seq_len << " tokens, width D = " << r.d_model
      << ", at initialisation (float64); norm of d(u . out_T)/dx_t at distance d = T - t\n"
      << "d       tanh RNN    LSTM        self-attention / 自注意力\n";
  for (std::size_t i = 0; i < r.distance.size(); ++i) {
    const std::int64_t d = r.distance[i];
    if (d != 1 && d != 2 && d != 4 && d != 8 && d != 16 && d != 32 && d != r.seq_len - 1) continue;
    out << d << std::string(8 - std::to_string(d).size(), ' ') << sci(r.rnn[i]) << "    " << sci(r.lstm[i]) << "    "
        << sci(r.attention[i]) << "\n";
  }
  out << "factor per step (fitted) / 每步乘上的因子: tanh RNN " << fixed(r.rnn_factor, 3) << ", LSTM "
      << fixed(r.lstm_factor, 3) << ", self-attention " << fixed(r.attention_factor, 3) << "\n"
      << "a recurrent network's gradient passes through one Jacobian per step and shrinks geometrically;\n"
      << "attention reaches every token in one step / 循环网络的梯度每步乘一个雅可比矩阵，按几何级数衰减；注意力一步到达每个词元\n";
  save_demo_svg(options, "path-length", path_length_svg(r), out);
  const bool held = path_length_held(r);
  out << verdict(held) << "\n";
  return held ? 0 : 1;
}

}  // namespace sf::lessons
