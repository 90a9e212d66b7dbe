// `scratchformer demo lookup`: attention as a soft dictionary lookup, float64, with the
// framework's softmax and matmul, the outputs checked against attention_naive.
//
// Letters: N keys, Q queries, D key width, Dv value width.
#include "train/lessons/demo_lookup.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include "autograd/ops.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {

namespace {

constexpr std::int64_t kKeys = 4;  // N = D (one-hot keys); values are D wide too (attention_naive's Dv = Dh)
// beta 40: the other keys get e^-40 ~ 4e-18 of the weight, below float64 rounding (~1e-16 on
// O(1) values), so the lookup is exact to rounding; 1e-12 allows for that and nothing else.
constexpr double kExactTol = 1e-12;
const std::vector<std::vector<double>> kValues{{1, 0, 2, 0}, {0, 3, -1, 1}, {-2, 1, 1, 0}, {4, -1, 0, 2}};

Tensor matrix(const std::vector<std::vector<double>>& rows) {  // -> (R,C) float64
  std::vector<double> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return from_vector(flat, {static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(rows[0].size())},
                     Dtype::Float64);
}

std::vector<double> key(std::int64_t j) {  // one-hot k_j, (D = N)
  std::vector<double> k(kKeys, 0.0);
  k[j] = 1;
  return k;
}

std::vector<double> mix(double a, const std::vector<double>& x, double b, const std::vector<double>& y) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = a * x[i] + b * y[i];
  return out;
}

// queries (Q,D) -> weights (Q,N) and outputs (Q,Dv) of a lookup in (keys, values).
void look_up(const std::vector<std::vector<double>>& queries, const LookupResult& r, Tensor& weights, Tensor& out) {
  const Tensor q = matrix(queries), k = matrix(r.keys), v = matrix(r.values);
  weights = softmax(matmul(q, transpose(k, 0, 1)), -1);  // (Q,N)
  out = matmul(weights, v);                              // (Q,Dv)
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

std::vector<double> row(const Tensor& t, std::int64_t i) { return contiguous(t.narrow(0, i, 1)).to_vector<double>(); }

void printed_queries(LookupResult& r) {
  const std::vector<std::pair<std::string, std::vector<double>>> made = {
      {"40 k2 (sharp: the lookup)", mix(40, key(2), 0, key(2))},
      {"4 k2 (soft)", mix(4, key(2), 0, key(2))},
      {"1 k2 (softer)", mix(1, key(2), 0, key(2))},
      {"40 (k1 + k2) (between)", mix(40, key(1), 40, key(2))},
      {"4 (0.7 k1 + 0.3 k2)", mix(2.8, key(1), 1.2, key(2))},
      {"0 (no preference)", mix(0, key(0), 0, key(0))},
  };
  std::vector<std::vector<double>> qs;
  for (const auto& m : made) qs.push_back(m.second);
  Tensor w, out;
  look_up(qs, r, w, out);
  const Tensor q = unsqueeze(unsqueeze(matrix(qs), 0), 0);  // (1,1,Q,D)
  const Tensor reference = attention_naive(q, unsqueeze(unsqueeze(matrix(r.keys), 0), 0),
                                           unsqueeze(unsqueeze(matrix(r.values), 0), 0), Tensor(), Tensor(), 1.0);
  r.attention_op_diff = max_abs_diff(contiguous(reference).to_vector<double>(), contiguous(out).to_vector<double>());
  for (std::size_t i = 0; i < made.size(); ++i)
    r.queries.push_back({made[i].first, made[i].second, row(w, i), row(out, i)});
  r.between_error = max_abs_diff(r.queries[3].output, mix(0.5, kValues[1], 0.5, kValues[2]));
}

void sweeps(LookupResult& r) {
  r.betas = {1, 2, 5, 10, 20, 40};
  for (double beta : r.betas) {
    Tensor w, out;
    look_up({mix(beta, key(2), 0, key(2))}, r, w, out);
    r.lookup_error.push_back(max_abs_diff(row(out, 0), kValues[2]));
  }
  r.beta_mix = 4;
  std::vector<std::vector<double>> qs;
  for (int i = 0; i <= 20; ++i) {
    r.lambdas.push_back(i / 20.0);
    qs.push_back(mix(r.beta_mix * i / 20.0, key(1), r.beta_mix * (1 - i / 20.0), key(2)));
  }
  Tensor w, out;
  look_up(qs, r, w, out);
  for (std::size_t i = 0; i < qs.size(); ++i) {
    r.weight_k1.push_back(w.at({static_cast<std::int64_t>(i), 1}));
    r.weight_k2.push_back(w.at({static_cast<std::int64_t>(i), 2}));
  }
}

std::string lookup_svg(const LookupResult& r) {
  train::SvgWriter svg(780, 420);
  svg.text(16, 26, "demo lookup: attention as a soft lookup table / 注意力即软查找表", {.size = train::kTitleFont, .bold = true});
  Heatmap map{{}, {}, {"k0", "k1", "k2", "k3"}, "weights softmax(q K^T) per query (rows sum to 1)", 0, 1, false};
  for (const LookupQuery& q : r.queries) {
    map.m.push_back(q.weights);
    map.row_labels.push_back(q.label);
  }
  draw_heatmap(svg, 190, 100, 44, map);
  train::Frame f{480, 100, 270, 220, train::make_axis(0, 1, 5), train::make_axis(0, 1, 5)};
  train::draw_frame(svg, f, "lambda in q = 4 (lambda k1 + (1 - lambda) k2)", "weight", "the weights interpolate");
  for (const auto& [ws, colour] : {std::pair{&r.weight_k1, "#d1495b"}, std::pair{&r.weight_k2, "#2e6fbb"}}) {
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < r.lambdas.size(); ++i) pts.push_back({f.px(r.lambdas[i]), f.py((*ws)[i])});
    svg.polyline(pts, {.stroke = colour, .stroke_width = 2});
  }
  svg.text(f.x + 8, f.y + 16, "red: weight on k1, blue: on k2", {.size = train::kTickFont});
  return svg.finish();
}

std::string vec(const std::vector<double>& v, int digits) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fixed(v[i], digits);
  return s + ")";
}

void print_lookup(const LookupResult& r, std::ostream& out) {
  print_heading(out, "attention as a soft lookup table / 注意力即软查找表");
  out << "keys k0..k3 one-hot (D 4), so q.k_j is coordinate j of q; values:";
  for (std::size_t j = 0; j < r.values.size(); ++j) out << " v" << j << " = " << vec(r.values[j], 0);
  out << "\nweights w = softmax(q K^T), output = w V (float64)\n\n"
      << "  query                        weights on k0..k3                      output\n";
  for (const LookupQuery& q : r.queries) {
    std::string line = "  " + q.label;
    line.resize(31, ' ');
    out << line << vec(q.weights, 6) << "   " << vec(q.output, 4) << "\n";
  }
  out << "\nq = beta k2, max |output - v2|:";
  for (std::size_t i = 0; i < r.betas.size(); ++i) out << "  beta " << r.betas[i] << ": " << sci(r.lookup_error[i]);
  out << "\nq = 40 (k1 + k2): max |output - (v1 + v2)/2| = " << sci(r.between_error)
      << "\nthe weights are a distribution: min weight " << sci(r.min_weight) << ", max |sum - 1| = " << sci(r.sum_error)
      << "\nthe outputs against the framework's attention_naive: max diff " << sci(r.attention_op_diff) << "\n";
}

}  // namespace

LookupResult compute_lookup() {
  LookupResult r;
  for (std::int64_t j = 0; j < kKeys; ++j) r.keys.push_back(key(j));
  r.values = kValues;
  printed_queries(r);
  sweeps(r);
  r.min_weight = 1;
  std::vector<std::vector<double>> all;
  for (const LookupQuery& q : r.queries) all.push_back(q.weights);
  for (std::size_t i = 0; i < r.lambdas.size(); ++i) all.push_back({r.weight_k1[i], r.weight_k2[i]});
  for (const LookupQuery& q : r.queries) {
    double total = 0;
    for (double w : q.weights) total += w;
    r.sum_error = std::max(r.sum_error, std::abs(total - 1));
  }
  for (const auto& ws : all)
    for (double w : ws) r.min_weight = std::min(r.min_weight, w);
  return r;
}

bool lookup_held(const LookupResult& r) {
  bool monotone = true;
  for (std::size_t i = 1; i < r.lambdas.size(); ++i)
    monotone = monotone && r.weight_k1[i] > r.weight_k1[i - 1] && r.weight_k2[i] < r.weight_k2[i - 1];
  bool shrinking = true;
  for (std::size_t i = 1; i < r.lookup_error.size(); ++i) shrinking = shrinking && r.lookup_error[i] <= r.lookup_error[i - 1];
  return r.lookup_error.back() < kExactTol && r.between_error < kExactTol && r.min_weight >= 0 &&
         r.sum_error < kExactTol && r.attention_op_diff < kExactTol && monotone && shrinking;
}

int run_lookup_demo(const DemoOptions& options, std::ostream& out) {
  const LookupResult r = compute_lookup();
  print_lookup(r, out);
  const bool held = lookup_held(r);
  out << "\nA sharp query reads one entry of the table; a blunt or mixed one reads a weighted average of the\n"
         "values, and the weights are always a probability distribution. / 注意力是一张可微的软查找表。\n"
      << verdict(held) << "\n";
  save_demo_svg(options, "lookup", lookup_svg(r), out);
  return held ? 0 : 1;
}

Json lookup_report(const DemoOptions&) {
  const LookupResult r = compute_lookup();
  std::vector<std::string> queries, keys;
  std::vector<std::vector<double>> weights, outputs;
  for (const LookupQuery& q : r.queries) queries.push_back(q.label), weights.push_back(q.weights), outputs.push_back(q.output);
  for (std::size_t j = 0; j < r.keys.size(); ++j) keys.push_back("k" + std::to_string(j));
  std::vector<std::string> out_cols;
  for (std::size_t j = 0; j < r.values.front().size(); ++j) out_cols.push_back("o" + std::to_string(j));
  return {{"held", lookup_held(r)},
          {"numbers", {number(bilingual("q = 40 (k1 + k2): max |output - (v1 + v2)/2|", "q = 40 (k1 + k2)：max |输出 - (v1 + v2)/2|"), r.between_error),
                       number(bilingual("the sharpest query: max |output - v2|", "最尖锐的查询：max |输出 - v2|"), r.lookup_error.back()),
                       number(bilingual("max |sum of weights - 1|", "max |权重之和 - 1|"), r.sum_error)}},
          {"figures", {heatmap_figure(bilingual("weights softmax(q K^T) of each query on the keys", "每个查询在各个键上的权重 softmax(q K^T)"),
                                      queries, keys, weights),
                       heatmap_figure(bilingual("outputs w V: a sharp query returns one value, a blunt one blends", "输出 w V：尖锐的查询取回一个值，模糊的查询取混合"),
                                      queries, out_cols, outputs, true),
                       lines_figure(bilingual("q = beta k2: the output's distance to v2", "q = beta k2：输出与 v2 的距离"),
                                    {bilingual("beta", "beta"), bilingual("max |output - v2|", "max |输出 - v2|"), true, true},
                                    {line_series(bilingual("error", "误差"), r.betas, r.lookup_error)}),
                       lines_figure(bilingual("q between k1 and k2: the weight moves from k2 to k1", "q 在 k1 与 k2 之间：权重从 k2 移向 k1"),
                                    {bilingual("lambda (q = beta (lambda k1 + (1 - lambda) k2))", "lambda（q = beta (lambda k1 + (1 - lambda) k2)）"),
                                     bilingual("weight", "权重")},
                                    {line_series("w(k1)", r.lambdas, r.weight_k1), line_series("w(k2)", r.lambdas, r.weight_k2)})}}};
}

}  // namespace sf::lessons
