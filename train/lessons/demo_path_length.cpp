// `scratchformer demo path-length`: the gradient from the last position back to each input, for a
// recurrent network and for self-attention (demo_path_length.h). One backward pass per model:
// the gradient of u · out_T with respect to every input position at once.
//
// Letters: T sequence length, D width.
#include "train/lessons/demo_path_length.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>

#include "autograd/generator.h"
#include "autograd/ops.h"
#include "autograd/runtime/threads.h"
#include "nn/attention.h"
#include "nn/recurrent.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"
#include "train/optim/optim.h"

namespace sf::lessons {

namespace {

constexpr std::int64_t kT = 48, kD = 32;
// What "geometric decay" and "no decay" mean here: the recurrent gradient shrinks by a constant
// factor per step (fitted: below 0.9) and has lost three orders of magnitude by the far end;
// attention's fitted factor is 1 within 5% (no trend with distance), and its norms, which vary
// with each position's attention weight, stay within two orders of magnitude of each other
// (the recurrent ones span ten or more).
constexpr double kDecayFactorBelow = 0.9, kFarOverNearBelow = 1e-3, kFlatFactorWithin = 0.05, kFlatWithin = 100;
// After training (the task: write the first token's numbers 1..K, times a scale the cells' tanh
// outputs can reach, into the last output), batches of B random sequences, Adam at this rate.
constexpr std::int64_t kTrainBatch = 16, kTargetDims = 4;
constexpr double kTargetScale = 0.5, kTrainLr = 1e-2;
// "Learnt the task": its loss far below 0.25, what always answering 0 scores (the target's variance).
constexpr double kLearntLossBelow = 0.05;

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

// One of the demo's three sequence models, (B,T,D) -> (B,T,D), with its parameters.
struct SequenceModel {
  std::function<Tensor(const Tensor&)> forward;
  nn::NamedParameters parameters;
};

// ‖∂(u · out_T)/∂x_t‖ by distance for one model on the inputs x0 (1,T,D).
std::vector<double> model_norms(const SequenceModel& model, const Tensor& x0, const Tensor& u) {
  Tensor x = clone(x0).requires_grad_();
  const std::vector<double> norms = norms_by_distance(x, model.forward(x), u);
  for (auto [name, p] : model.parameters) p.zero_grad();  // the measurement leaves nothing behind
  return norms;
}

// A batch of the task that needs the farthest token: x (B,T,D) random, with dimension 0 a flag
// that is 1 at the first position only, and the target (B,K): the first token's numbers 1..K.
// B random sequences (B,T,D) whose dimension 0 flags the first position (1 there, 0 elsewhere).
Tensor flagged_sequences(std::int64_t batch, Generator& gen) {
  std::vector<double> v = randn({batch, kT, kD}, gen, Dtype::Float64).to_vector<double>();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < kT; ++t) v[(b * kT + t) * kD] = t == 0 ? 1.0 : 0.0;
  return from_vector(v, {batch, kT, kD}, Dtype::Float64);
}

std::pair<Tensor, Tensor> reach_back_batch(Generator& gen) {
  const Tensor x = flagged_sequences(kTrainBatch, gen);
  const Tensor target = mul(narrow(squeeze(narrow(x, 1, 0, 1), 1), 1, 1, kTargetDims), kTargetScale);  // (B,K)
  return {x, target};
}

// Trains the model to write the first token's numbers 1..K (scaled) into its last output's first K
// numbers: mean squared error, Adam. Returns the loss of the last step.
double train_to_reach_back(const SequenceModel& model, Generator& gen, std::int64_t steps) {
  train::Adam adam(model.parameters, 0.9, 0.98, 1e-9);
  double loss_value = 0;
  for (std::int64_t step = 0; step < steps; ++step) {
    const auto [x, target] = reach_back_batch(gen);
    const Tensor last = squeeze(narrow(model.forward(x), 1, kT - 1, 1), 1);  // (B,D)
    const Tensor diff = sub(narrow(last, 1, 0, kTargetDims), target);        // (B,K)
    const Tensor loss = mean(mul(diff, diff));
    loss.backward();
    adam.step(kTrainLr);
    adam.zero_grad();
    loss_value = loss.item();
  }
  return loss_value;
}

// log10 norm against distance, one line per model.
std::string path_length_svg(const PathLengthResult& r) {
  const double W = 840, H = 420, left = 70, top = 50, pw = 520, ph = 300;
  train::SvgWriter svg(W, H);
  svg.text(left, 28, "gradient from the last position back to distance d / 从最后一个位置回传到距离 d 的梯度",
           {15, "start", 0, true});
  double lo = 0, hi = 0;
  for (const auto* v : {&r.rnn, &r.lstm, &r.attention, &r.rnn_trained, &r.lstm_trained, &r.attention_trained})
    for (double n : *v) lo = std::min(lo, std::log10(std::max(n, 1e-300))), hi = std::max(hi, std::log10(std::max(n, 1e-300)));
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
    const char* dash;  // solid at initialisation, dashed after training
  } lines[] = {{&r.rnn, "tanh RNN", "#d62728", ""},
               {&r.lstm, "LSTM", "#ff7f0e", ""},
               {&r.attention, "self-attention / 自注意力", "#1f77b4", ""},
               {&r.rnn_trained, "tanh RNN, trained / 训练后", "#d62728", "6 4"},
               {&r.lstm_trained, "LSTM, trained / 训练后", "#ff7f0e", "6 4"},
               {&r.attention_trained, "self-attention, trained / 训练后", "#1f77b4", "6 4"}};
  double legend_y = top + 10;
  for (const auto& l : lines) {
    if (l.norms->empty()) continue;
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < l.norms->size(); ++i) pts.push_back({px(double(i + 1)), py(std::max((*l.norms)[i], 1e-300))});
    svg.polyline(pts, {"none", l.colour, 2, l.dash});
    svg.line(left + pw + 20, legend_y, left + pw + 44, legend_y, {"none", l.colour, 3, l.dash});
    svg.text(left + pw + 50, legend_y + 4, l.name, {12});
    legend_y += 22;
  }
  return svg.finish();
}

}  // namespace

PathLengthResult compute_path_length(std::uint64_t seed, std::int64_t train_steps) {
  const ThreadCountScope one_thread(1);  // tiny models: a second thread only waits (threads.h)
  Generator gen(seed);
  PathLengthResult r;
  r.seq_len = kT, r.d_model = kD, r.train_steps = train_steps;
  const Tensor x = flagged_sequences(1, gen);  // the task's kind of input, before and after training
  const Tensor u = randn({1, 1, kD}, gen, Dtype::Float64);
  for (std::int64_t d = 1; d < kT; ++d) r.distance.push_back(d);

  nn::Recurrent rnn(nn::CellKind::rnn, kD, kD, 1, false, gen, Dtype::Float64);
  nn::Recurrent lstm(nn::CellKind::lstm, kD, kD, 1, false, gen, Dtype::Float64);
  Generator dropout_gen(0);
  nn::MultiHeadAttention attention(kD, 1, 1, 0.0, nn::PositionInAttention::None, gen, dropout_gen, Dtype::Float64);
  const SequenceModel models[3] = {
      {[&](const Tensor& in) { return rnn.forward(in).outputs; }, rnn.named_parameters()},
      {[&](const Tensor& in) { return lstm.forward(in).outputs; }, lstm.named_parameters()},
      {[&](const Tensor& in) { return attention.forward(in, in, Tensor()); }, attention.named_parameters()}};
  std::vector<double>* at_init[3] = {&r.rnn, &r.lstm, &r.attention};
  std::vector<double>* trained[3] = {&r.rnn_trained, &r.lstm_trained, &r.attention_trained};
  double* losses[3] = {&r.rnn_loss, &r.lstm_loss, &r.attention_loss};
  for (int m = 0; m < 3; ++m) {
    *at_init[m] = model_norms(models[m], x, u);
    if (train_steps <= 0) continue;
    Generator data(seed + 1);  // the same batches for every model
    *losses[m] = train_to_reach_back(models[m], data, train_steps);
    *trained[m] = model_norms(models[m], x, u);
  }
  r.rnn_factor = factor_per_step(r.rnn), r.lstm_factor = factor_per_step(r.lstm);
  r.attention_factor = factor_per_step(r.attention);
  return r;
}

bool path_length_held(const PathLengthResult& r) {
  const auto decays = [](const std::vector<double>& n, double factor) {
    return factor < kDecayFactorBelow && n.back() < kFarOverNearBelow * n.front();
  };
  const auto [mn, mx] = std::minmax_element(r.attention.begin(), r.attention.end());
  const bool at_init = decays(r.rnn, r.rnn_factor) && decays(r.lstm, r.lstm_factor) &&
                       std::abs(r.attention_factor - 1) < kFlatFactorWithin && *mx < kFlatWithin * *mn;
  if (r.train_steps <= 0 || r.attention_trained.empty()) return at_init;
  // after training: attention learnt the task and reads the first token in one step (its largest
  // gradient); in the same steps the recurrent gradients still vanish before reaching it
  const auto far_of = [](const std::vector<double>& n) { return n.back() < kFarOverNearBelow * n.front(); };
  const bool attention_reads_first =
      r.attention_loss < kLearntLossBelow &&
      std::max_element(r.attention_trained.begin(), r.attention_trained.end()) == r.attention_trained.end() - 1;
  return at_init && attention_reads_first && far_of(r.rnn_trained) && far_of(r.lstm_trained);
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
  if (r.train_steps > 0) {
    out << "after " << r.train_steps << " Adam steps on a task that needs the first token at the last position / "
        << "在需要最后位置读到第一个词元的任务上训练后 (final loss: tanh RNN " << fixed(r.rnn_loss, 4) << ", LSTM "
        << fixed(r.lstm_loss, 4) << ", self-attention " << fixed(r.attention_loss, 4) << ")\n"
        << "d       tanh RNN    LSTM        self-attention / 自注意力\n";
    for (std::size_t i = 0; i < r.distance.size(); ++i) {
      const std::int64_t d = r.distance[i];
      if (d != 1 && d != 2 && d != 4 && d != 8 && d != 16 && d != 32 && d != r.seq_len - 1) continue;
      out << d << std::string(8 - std::to_string(d).size(), ' ') << sci(r.rnn_trained[i]) << "    "
          << sci(r.lstm_trained[i]) << "    " << sci(r.attention_trained[i]) << "\n";
    }
  }
  out << "factor per step at initialisation (fitted) / 初始化时每步乘上的因子: tanh RNN " << fixed(r.rnn_factor, 3) << ", LSTM "
      << fixed(r.lstm_factor, 3) << ", self-attention " << fixed(r.attention_factor, 3) << "\n"
      << "a recurrent network's gradient passes through one Jacobian per step and shrinks geometrically;\n"
      << "attention reaches every token in one step / 循环网络的梯度每步乘一个雅可比矩阵，按几何级数衰减；注意力一步到达每个词元\n";
  save_demo_svg(options, "path-length", path_length_svg(r), out);
  const bool held = path_length_held(r);
  out << verdict(held) << "\n";
  return held ? 0 : 1;
}

Json path_length_json(const PathLengthResult& r) {
  std::vector<double> d;
  for (std::int64_t v : r.distance) d.push_back(static_cast<double>(v));
  const Axes axes{bilingual("distance T - t", "距离 T - t"), bilingual("||d(u . out_T)/dx_t||", "||d(u . out_T)/dx_t||"), false, true};
  const auto panel = [&](Json title, const std::vector<double>& rnn, const std::vector<double>& lstm, const std::vector<double>& att) {
    return lines_figure(std::move(title), axes,
                        {line_series("tanh RNN", d, rnn), line_series("LSTM", d, lstm),
                         line_series(bilingual("self-attention", "自注意力"), d, att)});
  };
  Json figures = {panel(bilingual("at initialisation: the gradient to the token t steps back", "初始化时：回传到 t 步之前那个词元的梯度"),
                        r.rnn, r.lstm, r.attention)};
  if (r.train_steps > 0)
    figures.push_back(panel(bilingual("after training on a task that needs the first token", "在需要第一个词元的任务上训练之后"),
                            r.rnn_trained, r.lstm_trained, r.attention_trained));
  return {{"held", path_length_held(r)},
          {"numbers", {number(bilingual("T", "T"), r.seq_len), number(bilingual("tanh RNN: factor per step", "tanh RNN：每步的衰减因子"), r.rnn_factor),
                       number(bilingual("LSTM: factor per step", "LSTM：每步的衰减因子"), r.lstm_factor),
                       number(bilingual("self-attention: factor per step", "自注意力：每步的衰减因子"), r.attention_factor)}},
          {"figures", std::move(figures)}};
}

Json path_length_report(const DemoOptions& options) { return path_length_json(compute_path_length(options.seed)); }

}  // namespace sf::lessons
