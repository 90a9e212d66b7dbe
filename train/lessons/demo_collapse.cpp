// `scratchformer demo collapse`: two attention layers with frozen weights and no nonlinearity
// equal one layer (weights A2 A1, values V1 V2); with a ReLU between them no layer A x V does.
// Everything in float64 with the framework's ops (softmax, matmul, relu); the least-squares fit
// solves its D x D normal equations by Gaussian elimination written out below.
//
// Letters: T sequence length, D width, N inputs of the fit.
#include "train/lessons/demo_collapse.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <stdexcept>

#include "autograd/generator.h"
#include "autograd/ops.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {

namespace {

constexpr std::int64_t kT = 5, kD = 4, kFitInputs = 8;
// The stacked and the single layer are the same float64 products in another order (T, D <= 5):
// ~1e-16 per op on O(1) values; 1e-12 leaves room and still catches any wrong term.
constexpr double kSameTol = 1e-12;
// A ReLU between the layers clips about half of the hidden values: the map moves by O(0.1..1).
// 1e-2 is far above rounding (1e-16) and well below that.
constexpr double kDifferentAtLeast = 1e-2;

// The two frozen layers: weights (T,T), value matrices (D,D).
struct Stack {
  Tensor a1, a2, v1, v2;
};

// x: (T,D) -> (T,T) = softmax(x Wq (x Wk)^T / sqrt(D)) with fresh random Wq, Wk (D,D): the
// weights a real attention layer gives this input, then frozen.
Tensor attention_weights(const Tensor& x, Generator& gen) {
  const Tensor wq = randn({kD, kD}, gen, Dtype::Float64) / std::sqrt(double(kD));
  const Tensor wk = randn({kD, kD}, gen, Dtype::Float64) / std::sqrt(double(kD));
  const Tensor scores = matmul(matmul(x, wq), transpose(matmul(x, wk), 0, 1)) / std::sqrt(double(kD));
  return softmax(scores, -1);  // (T,T), rows sum to 1
}

// x: (T,D) -> (T,D) = A2 act(A1 x V1) V2, act = relu or nothing.
Tensor stacked(const Stack& s, const Tensor& x, bool relu_between) {
  Tensor h = matmul(matmul(s.a1, x), s.v1);  // (T,D)
  if (relu_between) h = relu(h);
  return matmul(matmul(s.a2, h), s.v2);
}

// x: (T,D) -> (T,D) = (A2 A1) x (V1 V2): the one layer the stack should equal.
Tensor single(const Stack& s, const Tensor& x) { return matmul(matmul(matmul(s.a2, s.a1), x), matmul(s.v1, s.v2)); }

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// max |f(x + x') - f(x) - f(x')| / max |f(x + x')| for f = the stack.
double linearity_defect(const Stack& s, const Tensor& x, const Tensor& x2, bool relu_between) {
  const Tensor both = stacked(s, x + x2, relu_between);
  return max_abs(both - stacked(s, x, relu_between) - stacked(s, x2, relu_between)) / max_abs(both);
}

// m: (R,D), y: (R,D) -> V (D,D) minimising ||m V - y||_F: the normal equations (m^T m) V = m^T y,
// solved by Gaussian elimination with partial pivoting.
Tensor least_squares(const Tensor& m, const Tensor& y) {
  const Tensor mt = transpose(m, 0, 1);
  std::vector<double> a = contiguous(matmul(mt, m)).to_vector<double>();  // (D,D)
  std::vector<double> b = contiguous(matmul(mt, y)).to_vector<double>();  // (D,D): D right-hand sides
  for (std::int64_t c = 0; c < kD; ++c) {
    std::int64_t pivot = c;
    for (std::int64_t r = c + 1; r < kD; ++r)
      if (std::abs(a[r * kD + c]) > std::abs(a[pivot * kD + c])) pivot = r;
    for (std::int64_t k = 0; k < kD; ++k) {
      std::swap(a[c * kD + k], a[pivot * kD + k]);
      std::swap(b[c * kD + k], b[pivot * kD + k]);
    }
    if (std::abs(a[c * kD + c]) < 1e-300) throw std::runtime_error("demo collapse: the fit's normal equations are singular");
    for (std::int64_t r = 0; r < kD; ++r) {
      if (r == c) continue;
      const double f = a[r * kD + c] / a[c * kD + c];
      for (std::int64_t k = 0; k < kD; ++k) {
        a[r * kD + k] -= f * a[c * kD + k];
        b[r * kD + k] -= f * b[c * kD + k];
      }
    }
  }
  for (std::int64_t r = 0; r < kD; ++r)
    for (std::int64_t k = 0; k < kD; ++k) b[r * kD + k] /= a[r * kD + r];
  return from_vector(b, {kD, kD}, Dtype::Float64);
}

// The best layer (A2 A1) x V for the stack on inputs xs: ||fit - f|| / ||f|| over all of them.
double fit_residual(const Stack& s, const std::vector<Tensor>& xs, bool relu_between) {
  std::vector<Tensor> ms, ys;
  const Tensor a21 = matmul(s.a2, s.a1);
  for (const Tensor& x : xs) {
    ms.push_back(matmul(a21, x));  // (T,D)
    ys.push_back(stacked(s, x, relu_between));
  }
  const Tensor m = cat(ms, 0), y = cat(ys, 0);  // (N*T, D)
  const Tensor r = matmul(m, least_squares(m, y)) - y;
  return std::sqrt(sum(r * r).item() / sum(y * y).item());
}

std::vector<std::vector<double>> rows_of(const Tensor& t) {  // (R,C)
  std::vector<std::vector<double>> m(t.size(0), std::vector<double>(t.size(1)));
  for (std::int64_t r = 0; r < t.size(0); ++r)
    for (std::int64_t c = 0; c < t.size(1); ++c) m[r][c] = t.at({r, c});
  return m;
}

void measure_product(const Stack& s, CollapseResult& r) {
  const Tensor a21 = matmul(s.a2, s.a1);
  r.a1 = rows_of(s.a1), r.a2 = rows_of(s.a2), r.a21 = rows_of(a21);
  r.a21_min = 1;
  for (const auto& row : r.a21) {
    double total = 0;
    for (double v : row) {
      total += v;
      r.a21_min = std::min(r.a21_min, v);
    }
    r.a21_row_sum_error = std::max(r.a21_row_sum_error, std::abs(total - 1));
  }
}

}  // namespace

CollapseResult compute_collapse(std::uint64_t seed) {
  Generator gen(seed);
  CollapseResult r;
  r.seq_len = kT, r.d_model = kD, r.fit_inputs = kFitInputs;
  const Tensor x0 = randn({kT, kD}, gen, Dtype::Float64);  // (T,D)
  Stack s;
  s.v1 = randn({kD, kD}, gen, Dtype::Float64), s.v2 = randn({kD, kD}, gen, Dtype::Float64);
  s.a1 = attention_weights(x0, gen);
  s.a2 = attention_weights(matmul(matmul(s.a1, x0), s.v1), gen);  // layer 2's weights on layer 1's output
  measure_product(s, r);
  r.stacked_vs_single = max_abs(stacked(s, x0, false) - single(s, x0));
  const Tensor x1 = randn({kT, kD}, gen, Dtype::Float64);
  r.linearity_defect_linear = linearity_defect(s, x0, x1, false);
  r.linearity_defect_relu = linearity_defect(s, x0, x1, true);
  std::vector<Tensor> xs;
  for (std::int64_t i = 0; i < kFitInputs; ++i) xs.push_back(randn({kT, kD}, gen, Dtype::Float64));
  r.fit_residual_linear = fit_residual(s, xs, false);
  r.fit_residual_relu = fit_residual(s, xs, true);
  for (const Tensor& x : xs) {  // on x0 alone the ReLU may clip nothing (A1 x0 V1 can be all positive)
    const Tensor one = single(s, x);
    r.relu_vs_single = std::max(r.relu_vs_single, max_abs(stacked(s, x, true) - one) / max_abs(one));
  }
  return r;
}

bool collapse_held(const CollapseResult& r) {
  return r.stacked_vs_single < kSameTol && r.a21_row_sum_error < kSameTol && r.a21_min >= 0 &&
         r.linearity_defect_linear < kSameTol && r.fit_residual_linear < kSameTol &&
         r.linearity_defect_relu > kDifferentAtLeast && r.fit_residual_relu > kDifferentAtLeast &&
         r.relu_vs_single > kDifferentAtLeast;
}

namespace {

std::string collapse_svg(const CollapseResult& r) {
  train::SvgWriter svg(760, 460);
  svg.text(16, 26, "demo collapse: A2 (A1 x V1) V2 = (A2 A1) x (V1 V2) / 无非线性时两层注意力坍缩为一层",
           {.size = train::kTitleFont, .bold = true});
  const std::vector<std::string> pos = {"0", "1", "2", "3", "4"};
  draw_heatmap(svg, 40, 90, 38, {r.a1, pos, pos, "A1 (frozen weights)", 0, 1, false});
  draw_heatmap(svg, 290, 90, 38, {r.a2, pos, pos, "A2", 0, 1, false});
  draw_heatmap(svg, 540, 90, 38, {r.a21, pos, pos, "A2 A1 (rows sum to 1)", 0, 1, false});
  draw_log_bars(svg, 16, 330, 720,
                {"no ReLU: |stack - one layer|", "no ReLU: one-layer fit residual", "ReLU: |stack - one layer|",
                 "ReLU: best one-layer fit residual"},
                {r.stacked_vs_single, r.fit_residual_linear, r.relu_vs_single, r.fit_residual_relu}, kSameTol,
                "green: zero up to rounding; red: the ReLU stack is not one layer");
  return svg.finish();
}

void print_collapse(const CollapseResult& r, std::ostream& out) {
  print_heading(out, "two attention layers without a nonlinearity / 两层注意力，中间无非线性");
  out << "x: (T=" << r.seq_len << ", D=" << r.d_model << "), float64. Layer i: y = A_i x V_i, A_i = softmax(q k^T / sqrt(D))\n"
      << "computed once on this input and then FROZEN (the lecture's fixed-pattern / linear-attention view).\n"
      << "  max |A2 (A1 x V1) V2 - (A2 A1) x (V1 V2)|      = " << sci(r.stacked_vs_single) << "\n"
      << "  A2 A1 is row-stochastic: max |row sum - 1|     = " << sci(r.a21_row_sum_error)
      << ", min entry = " << fixed(r.a21_min, 4) << "\n"
      << "  linearity defect |f(x+x')-f(x)-f(x')|/|f|      = " << sci(r.linearity_defect_linear) << "\n"
      << "  best one-layer fit (A2 A1) x V, V by least squares on " << r.fit_inputs
      << " inputs: relative residual = " << sci(r.fit_residual_linear) << "\n";
  print_heading(out, "with the FFN's ReLU between them / 中间加 ReLU");
  out << "f(x) = A2 relu(A1 x V1) V2\n"
      << "  max |f(x) - (A2 A1) x (V1 V2)| / max |(A2 A1) x (V1 V2)|, worst of " << r.fit_inputs << " inputs = "
      << fixed(r.relu_vs_single, 4) << "\n"
      << "  linearity defect |f(x+x')-f(x)-f(x')|/|f|      = " << fixed(r.linearity_defect_relu, 4)
      << "   (every layer A x V has defect 0: no single layer can be f)\n"
      << "  best one-layer fit (A2 A1) x V: relative residual = " << fixed(r.fit_residual_relu, 4) << "\n";
}

}  // namespace

int run_collapse_demo(const DemoOptions& options, std::ostream& out) {
  const CollapseResult r = compute_collapse(options.seed);
  print_collapse(r, out);
  const bool held = collapse_held(r);
  out << "\nDepth without a nonlinearity buys nothing: the value path V1 V2 is one D x D matrix and the\n"
         "mixing A2 A1 is one attention pattern. Real softmax attention recomputes A2 from its input, so a\n"
         "real stack is not exactly one layer, but its value path still collapses; the FFN's ReLU is what\n"
         "makes depth add expressive power. / 没有非线性，层数再多也等价于一层。\n"
      << verdict(held) << "\n";
  save_demo_svg(options, "collapse", collapse_svg(r), out);
  return held ? 0 : 1;
}

Json collapse_report(const DemoOptions& options) {
  const CollapseResult r = compute_collapse(options.seed);
  const std::vector<std::string> pos = {"0", "1", "2", "3", "4"};
  return {{"held", collapse_held(r)},
          {"numbers", {number(bilingual("no ReLU: max |A2 (A1 x V1) V2 - (A2 A1) x (V1 V2)|", "无 ReLU：max |A2 (A1 x V1) V2 - (A2 A1) x (V1 V2)|"), r.stacked_vs_single),
                       number(bilingual("no ReLU: best one-layer fit, relative residual", "无 ReLU：最佳单层拟合的相对残差"), r.fit_residual_linear),
                       number(bilingual("ReLU between: |stack - one layer| / |one layer|", "中间有 ReLU：|两层 - 一层| / |一层|"), r.relu_vs_single),
                       number(bilingual("ReLU between: best one-layer fit, relative residual", "中间有 ReLU：最佳单层拟合的相对残差"), r.fit_residual_relu)}},
          {"figures", {heatmap_figure(bilingual("A1 (frozen weights)", "A1（固定的注意力权重）"), pos, pos, r.a1),
                       heatmap_figure(bilingual("A2", "A2"), pos, pos, r.a2),
                       heatmap_figure(bilingual("A2 A1: one attention pattern (rows sum to 1)", "A2 A1：合成一个注意力模式（每行和为 1）"), pos, pos, r.a21),
                       bars_figure(bilingual("how far the stack is from one layer (log scale)", "两层与一层相差多少（对数坐标）"),
                                   {"no ReLU: |stack - one layer|", "no ReLU: one-layer fit residual", "ReLU: |stack - one layer|",
                                    "ReLU: best one-layer fit residual"},
                                   {bar_series(bilingual("value", "数值"), {r.stacked_vs_single, r.fit_residual_linear, r.relu_vs_single, r.fit_residual_relu})},
                                   true)}}};
}

}  // namespace sf::lessons
