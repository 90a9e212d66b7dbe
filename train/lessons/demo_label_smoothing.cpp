// `scratchformer demo label-smoothing`: the smoothed target of the project's cross_entropy, the
// loss at its optimum against H(q), and gradient descent on one logits vector under the smoothed
// loss and under the plain NLL (float64, the autograd's gradients).
//
// Letters: V classes.
#include "train/lessons/demo_label_smoothing.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <utility>

#include "autograd/ops.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {

namespace {

constexpr std::int64_t kClasses = 5, kGold = 2, kSteps = 400;
constexpr double kEps = 0.1, kLr = 2.0;
// The fused loss at logits log q against the entropy summed by hand: the same five float64 terms
// in another order, ~1e-16; 1e-12 leaves room and catches a wrong spreading (eps/V vs eps/(V-1)
// moves it by ~1e-3).
constexpr double kSameTol = 1e-12;
// After 400 steps of lr 2 the smoothed run sits within ~1e-5 of its optimum (its slowest
// direction shrinks by about 1 - 2 * 0.02 a step); 1e-3 on p and on the loss is a safe margin.
constexpr double kConvergedTol = 1e-3;
// The NLL run's loss falls like 1 / (lr * steps) ~ 1e-3; 0.01 is "near 0", far below H(q) ~ 0.39.
constexpr double kNearZero = 1e-2;

// logits (1,V) -> the cross-entropy against the gold class with smoothing eps, a 0-d tensor.
Tensor loss_of(const Tensor& logits, double eps) {
  return cross_entropy(logits, from_vector(std::vector<std::int64_t>{kGold}, {1}), -100, eps);
}

std::vector<double> probabilities(const Tensor& logits) { return softmax(logits, -1).to_vector<double>(); }

// Gradient descent from zero logits on the loss with smoothing `eps`; records both losses per step.
Tensor descend(double eps, std::vector<double>& smoothed, std::vector<double>& nll) {
  std::vector<double> z(kClasses, 0.0);
  for (std::int64_t step = 0;; ++step) {
    Tensor logits = from_vector(z, {1, kClasses}, Dtype::Float64);
    logits.requires_grad_();
    const Tensor loss = loss_of(logits, eps);
    smoothed.push_back(loss_of(logits.detach(), kEps).item());
    nll.push_back(loss_of(logits.detach(), 0.0).item());
    if (step == kSteps) return logits.detach();
    loss.backward();
    const std::vector<double> g = logits.grad().to_vector<double>();
    for (std::int64_t j = 0; j < kClasses; ++j) z[j] -= kLr * g[j];
  }
}

void bars_panel(train::SvgWriter& svg, const LabelSmoothingResult& r) {
  train::Frame f{60, 80, 280, 220, train::make_axis(-0.5, kClasses - 0.5, 5), train::make_axis(0, 1, 5)};
  train::draw_frame(svg, f, "class", "target probability", "one-hot (grey) vs smoothed target q (blue)");
  for (std::int64_t j = 0; j < kClasses; ++j) {
    const double left = f.px(j - 0.35), mid = f.px(j), right = f.px(j + 0.35);
    const double hard = j == r.gold ? 1.0 : 0.0;
    svg.rect(left, f.py(hard), mid - left, f.py(0) - f.py(hard), {.fill = "#bbbbbb"}, "one-hot: " + fixed(hard, 2));
    svg.rect(mid, f.py(r.target[j]), right - mid, f.py(0) - f.py(r.target[j]), {.fill = "#2e6fbb"},
             "q: " + fixed(r.target[j], 3));
    svg.text(right, f.py(r.target[j]) - 4, fixed(r.target[j], 2), {.size = 10, .anchor = "middle"});
  }
}

void curves_panel(train::SvgWriter& svg, const LabelSmoothingResult& r) {
  train::Frame f{430, 80, 310, 220, train::make_axis(0, double(r.steps), 4), train::make_axis(0, 1.7, 5)};
  train::draw_frame(svg, f, "gradient-descent step", "loss (nats)", "smoothed loss vs NLL while training");
  const std::vector<std::pair<const std::vector<double>*, std::string>> curves = {
      {&r.smoothed_run_loss, "#2e6fbb"}, {&r.nll_run_nll, "#d1495b"}, {&r.smoothed_run_nll, "#7fa8d9"}};
  for (const auto& [c, colour] : curves) {
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < c->size(); ++i) pts.push_back({f.px(double(i)), f.py(std::min(1.7, (*c)[i]))});
    svg.polyline(pts, {.stroke = colour, .stroke_width = 2});
  }
  svg.line(f.x, f.py(r.entropy), f.x + f.w, f.py(r.entropy), {.stroke = "#444444", .dash = "4 3"});
  svg.text(f.x + f.w - 4, f.py(r.entropy) - 5, "H(q) = " + fixed(r.entropy, 4), {.size = 10, .anchor = "end"});
  svg.text(f.x, f.y + f.h + 44, "blue: smoothed loss (smoothed run); light blue: its NLL; red: NLL (plain run)",
           {.size = train::kTickFont});
}

std::string vec(const std::vector<double>& v) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fixed(v[i], 4);
  return s + ")";
}

void print_label_smoothing(const LabelSmoothingResult& r, std::ostream& out) {
  print_heading(out, "label smoothing / 标签平滑");
  out << "V = " << r.classes << " classes, gold class " << r.gold << ", eps = " << r.eps
      << ". The project's convention (autograd/ops_loss.cpp, as PyTorch): eps / V on EVERY class\n"
      << "  gold gets 1 - eps + eps/V = " << fixed(r.target[r.gold], 4) << ", each other class eps/V = "
      << fixed(r.target[(r.gold + 1) % r.classes], 4) << "\n  q = " << vec(r.target) << "\n\n"
      << "at the optimum p = q (logits = log q):\n"
      << "  H(q) = -sum q log q                      = " << fixed(r.entropy, 6) << "\n"
      << "  cross_entropy(log q, gold, eps)          = " << fixed(r.loss_at_optimum, 6) << "  (difference "
      << sci(std::abs(r.loss_at_optimum - r.entropy)) << ")\n"
      << "  NLL there, -log q_gold                   = " << fixed(r.nll_at_optimum, 6) << "\n\n"
      << "gradient descent on one logits vector from 0 (lr " << r.lr << ", " << r.steps << " steps):\n"
      << "  step      smoothed run: loss   NLL     plain run: NLL   smoothed loss\n";
  for (std::int64_t s : {0, 10, 50, 100, 200, 400}) {
    std::string line = "  " + std::to_string(s);
    line.resize(12, ' ');
    out << line << fixed(r.smoothed_run_loss[s], 4) << "   " << fixed(r.smoothed_run_nll[s], 4) << "       "
        << fixed(r.nll_run_nll[s], 4) << "           " << fixed(r.nll_run_smoothed[s], 4) << "\n";
  }
  out << "  final p, smoothed run: " << vec(r.smoothed_run_p) << "\n  final p, plain run:    " << vec(r.nll_run_p)
      << "\n  min over the smoothed run of (loss - H(q)) = " << sci(r.min_gap) << "\n";
}

}  // namespace

LabelSmoothingResult compute_label_smoothing() {
  LabelSmoothingResult r;
  r.classes = kClasses, r.gold = kGold, r.steps = kSteps, r.eps = kEps, r.lr = kLr;
  for (std::int64_t j = 0; j < kClasses; ++j) r.target.push_back((j == kGold ? 1 - kEps : 0.0) + kEps / kClasses);
  std::vector<double> log_q;
  for (double q : r.target) {
    r.entropy -= q * std::log(q);
    log_q.push_back(std::log(q));
  }
  const Tensor at_optimum = from_vector(log_q, {1, kClasses}, Dtype::Float64);
  r.loss_at_optimum = loss_of(at_optimum, kEps).item();
  r.nll_at_optimum = loss_of(at_optimum, 0.0).item();
  r.smoothed_run_p = probabilities(descend(kEps, r.smoothed_run_loss, r.smoothed_run_nll));
  r.nll_run_p = probabilities(descend(0.0, r.nll_run_smoothed, r.nll_run_nll));
  r.min_gap = 1e300;
  for (double l : r.smoothed_run_loss) r.min_gap = std::min(r.min_gap, l - r.entropy);
  return r;
}

bool label_smoothing_held(const LabelSmoothingResult& r) {
  double p_error = 0;
  for (std::int64_t j = 0; j < r.classes; ++j) p_error = std::max(p_error, std::abs(r.smoothed_run_p[j] - r.target[j]));
  return std::abs(r.loss_at_optimum - r.entropy) < kSameTol && r.entropy > 0 && r.min_gap > -kSameTol &&
         r.smoothed_run_loss.back() - r.entropy < kConvergedTol && p_error < kConvergedTol &&
         r.nll_run_nll.back() < kNearZero && r.smoothed_run_nll.back() > r.nll_at_optimum - kConvergedTol;
}

int run_label_smoothing_demo(const DemoOptions& options, std::ostream& out) {
  const LabelSmoothingResult r = compute_label_smoothing();
  print_label_smoothing(r, out);
  const bool held = label_smoothing_held(r);
  out << "\nThe smoothed loss is H(q) + KL(q || p): it bottoms out at H(q) > 0 when p = q, so a label-smoothed\n"
         "training loss never reaches 0; only with eps = 0 does the loss fall towards 0 (by making the\n"
         "logits ever larger). / 标签平滑后损失的下界是 H(q)，而不是 0。\n"
      << verdict(held) << "\n";
  train::SvgWriter svg(780, 380);
  svg.text(16, 26, "demo label-smoothing: eps = 0.1, V = 5 / 标签平滑", {.size = train::kTitleFont, .bold = true});
  bars_panel(svg, r);
  curves_panel(svg, r);
  save_demo_svg(options, "label-smoothing", svg.finish(), out);
  return held ? 0 : 1;
}

namespace {

// The five classes as the next word of "A man walks his ...": the gold class (2) is "dog".
const std::vector<std::string>& class_words() {
  static const std::vector<std::string> words = {"▁cat", "▁ball", "▁dog", "▁bike", "▁the"};
  return words;
}

}  // namespace

Json label_smoothing_report(const DemoOptions&) {
  const LabelSmoothingResult r = compute_label_smoothing();
  const std::vector<double> steps = indices(r.smoothed_run_loss.size());
  return {{"held", label_smoothing_held(r)},
          {"numbers", {number(bilingual("epsilon", "平滑系数 epsilon"), r.eps), number(bilingual("classes V", "类别数 V"), r.classes),
                       number(bilingual("H(q): the smoothed loss's floor", "H(q)：平滑后损失的下界"), r.entropy),
                       number(bilingual("the smoothed run's final loss", "平滑训练最终的损失"), r.smoothed_run_loss.back()),
                       number(bilingual("the plain run's final NLL", "普通训练最终的负对数似然"), r.nll_run_nll.back())}},
          {"figures", {bars_figure(bilingual("the next word of \"A man walks his ...\" (gold: dog), log scale",
                                             "\"A man walks his ...\" 的下一个词（正确答案 dog），对数坐标"),
                                   class_words(),
                                   {bar_series(bilingual("smoothed target q", "平滑后的目标 q"), r.target),
                                    bar_series(bilingual("p after training on the smoothed loss", "用平滑损失训练后的 p"), r.smoothed_run_p),
                                    bar_series(bilingual("p after training on the NLL", "用负对数似然训练后的 p"), r.nll_run_p)},
                                   true),
                       lines_figure(bilingual("the loss during gradient descent", "梯度下降过程中的损失"),
                                    {bilingual("step", "步数"), bilingual("nats", "奈特")},
                                    {line_series(bilingual("smoothed run: smoothed loss", "平滑训练：平滑损失"), steps, r.smoothed_run_loss),
                                     line_series(bilingual("plain run: NLL", "普通训练：负对数似然"), steps, r.nll_run_nll),
                                     line_series(bilingual("H(q)", "H(q)"), {0, steps.back()}, {r.entropy, r.entropy}, true)})}}};
}

}  // namespace sf::lessons
