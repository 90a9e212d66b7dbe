// `scratchformer demo autograd`: y = sum(relu(x @ w)) on a tiny input, forward and backward,
// printed step by step: tensors and autograd at work, with nothing else around them. The claim
// checked: the gradient backward() leaves in w equals the hand formula dy/dw = x^T [x @ w > 0]
// (relu passes the gradient 1 where its input was positive, the matmul sends it to w through x^T).
// The SVG shows h = x @ w and dy/dw as two small heatmaps.
#include <algorithm>
#include <cmath>
#include <ostream>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {

namespace {

// The float32 gradient against the same sum of at most 2 products written out: a few float32
// roundings of O(1) values, ~1e-7; 1e-5 leaves room and still catches a wrong term (O(1)).
constexpr double kGradTol = 1e-5;

// x: (B,D), h: (B,F) -> (D,F): sum_b x[b,d] * [h[b,f] > 0], the gradient of sum(relu(h)) w.r.t. w.
std::vector<std::vector<double>> hand_gradient(const Tensor& x, const Tensor& h) {
  std::vector<std::vector<double>> g(x.size(1), std::vector<double>(h.size(1), 0.0));
  for (std::int64_t b = 0; b < x.size(0); ++b)
    for (std::int64_t d = 0; d < x.size(1); ++d)
      for (std::int64_t f = 0; f < h.size(1); ++f) g[d][f] += h.at({b, f}) > 0 ? x.at({b, d}) : 0.0;
  return g;
}

// max |t|, at least 1e-9 (the colour scale of a heatmap).
double largest_abs(const Tensor& t) {
  double m = 1e-9;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

std::string autograd_svg(const Tensor& h, const Tensor& grad) {
  train::SvgWriter svg(520, 250);
  svg.text(16, 24, "demo autograd: y = sum(relu(x @ w)) / 自动求导演示", {.size = train::kTitleFont, .bold = true});
  draw_heatmap(svg, 60, 90, 40,
               {matrix_rows(h), {"b=0", "b=1"}, {"f0", "f1", "f2", "f3"}, "h = x @ w (2, 4)", 0, largest_abs(h), true});
  draw_heatmap(svg, 300, 90, 40,
               {matrix_rows(grad), {"d0", "d1", "d2"}, {"f0", "f1", "f2", "f3"}, "dy/dw (3, 4)", 0, largest_abs(grad), true});
  return svg.finish();
}

}  // namespace

namespace {

// One forward and backward of y = sum(relu(x @ w)) from `seed`, and the hand formula beside it.
struct AutogradNumbers {
  Tensor x, w, h, y, grad;
  std::vector<std::vector<double>> expected;  // x^T [h > 0]
  double worst = 0;                           // max |dy/dw - expected|
};

AutogradNumbers compute_autograd(std::uint64_t seed) {
  Generator gen(seed);
  AutogradNumbers n;
  n.x = randn({2, 3}, gen);                   // (B=2, D=3)
  n.w = randn({3, 4}, gen).requires_grad_();  // (D=3, F=4)
  n.w.set_name("w");
  n.h = matmul(n.x, n.w);   // (2, 4)
  n.y = sum(relu(n.h));     // ()
  n.y.backward();
  n.grad = n.w.grad();
  n.expected = hand_gradient(n.x, n.h);
  for (std::int64_t d = 0; d < 3; ++d)
    for (std::int64_t f = 0; f < 4; ++f) n.worst = std::max(n.worst, std::abs(n.grad.at({d, f}) - n.expected[d][f]));
  return n;
}

}  // namespace

int run_autograd_demo(const DemoOptions& options, std::ostream& out) {
  const AutogradNumbers n = compute_autograd(options.seed);
  print_heading(out, "forward / 前向");
  out << "x = " << n.x << "\n\nw = " << n.w << "\n\nh = x @ w = " << n.h << "\n\ny = sum(relu(h)) = " << n.y << "\n";
  print_heading(out, "backward / 反向");
  out << "dy/dw = " << n.grad << "\n";
  out << "\nmax |dy/dw - x^T [h > 0]| = " << sci(n.worst) << " (the hand formula; float32)\n";
  const bool held = n.worst < kGradTol;
  out << verdict(held) << "\n";
  save_demo_svg(options, "autograd", autograd_svg(n.h.detach(), n.grad), out);
  return held ? 0 : 1;
}

Json autograd_report(const DemoOptions& options) {
  const AutogradNumbers n = compute_autograd(options.seed);
  const std::vector<std::string> b = {"b=0", "b=1"}, d = {"d0", "d1", "d2"}, f = {"f0", "f1", "f2", "f3"};
  return {{"held", n.worst < kGradTol},
          {"numbers", {number(bilingual("y = sum(relu(x @ w))", "y = sum(relu(x @ w))"), n.y.item()),
                       number(bilingual("max |dy/dw - x^T [h > 0]| (float32)", "max |dy/dw - x^T [h > 0]|（float32）"), n.worst)}},
          {"figures", {heatmap_figure(bilingual("x (2, 3)", "输入 x (2, 3)"), b, d, matrix_rows(n.x), true),
                       heatmap_figure(bilingual("w (3, 4)", "权重 w (3, 4)"), d, f, matrix_rows(n.w.detach()), true),
                       heatmap_figure(bilingual("h = x @ w (2, 4): relu keeps the positive entries", "h = x @ w (2, 4)：relu 只保留正数"),
                                      b, f, matrix_rows(n.h.detach()), true),
                       heatmap_figure(bilingual("dy/dw by backward() (3, 4)", "backward() 得到的 dy/dw (3, 4)"), d, f, matrix_rows(n.grad), true),
                       heatmap_figure(bilingual("x^T [h > 0] by hand (3, 4)", "手算 x^T [h > 0] (3, 4)"), d, f, n.expected, true)}}};
}

}  // namespace sf::lessons
