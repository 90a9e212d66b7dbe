// Demo `worked-example`: see demo_worked_example.h for the two computations.
//
// Letters: T tokens, d the width (4 here), d_k the key width (= d, one head).
#include "train/lessons/demo_worked_example.h"

#include <cmath>
#include <iomanip>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <string>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {
namespace {

constexpr std::int64_t kWidth = 4;       // d: four numbers per word, few enough to follow by hand
constexpr std::size_t kMaxTokens = 12;   // a printed (T,T) matrix still fits a terminal

// The notes' scores, row by row, on and below the diagonal.
const std::vector<std::vector<double>> kNotesScores = {
    {0.4}, {0.1, -0.3}, {0.5, 0.7, 3.0}, {-1.2, 1.5, 0.4, 0.5}, {3.2, 1.0, -1.0, -0.5, -2.0}};

// The bytes of one UTF-8 code point starting at text[i].
std::size_t code_point_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  return 4;
}

// A row of d numbers for `word`: drawn from a generator seeded by the word's bytes (FNV-1a) and
// the demo's seed, scaled to unit variance.
std::vector<double> embedding_of(const std::string& word, std::uint64_t seed) {
  std::uint64_t h = 1469598103934665603ULL ^ seed;
  for (unsigned char c : word) h = (h ^ c) * 1099511628211ULL;
  Generator gen(h);
  return randn({kWidth}, gen, Dtype::Float64).to_vector<double>();
}

}  // namespace

std::vector<std::string> worked_example_tokens(const std::string& text) {
  std::vector<std::string> tokens;
  const bool words = text.find(' ') != std::string::npos;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    std::size_t end = i + code_point_length(static_cast<unsigned char>(text[i]));
    if (words) end = std::min(text.find(' ', i), text.size());
    tokens.push_back(text.substr(i, end - i));
    i = end;
  }
  if (tokens.empty() || tokens.size() > kMaxTokens)
    throw std::invalid_argument("demo worked-example: expected a sentence of 1 to " + std::to_string(kMaxTokens) +
                                " words (split at spaces, or characters when there is none), got " +
                                std::to_string(tokens.size()) + " in \"" + text + "\"");
  return tokens;
}

WorkedExample compute_worked_example(std::uint64_t seed, const std::string& text) {
  WorkedExample w;
  w.tokens = worked_example_tokens(text);
  const auto T = static_cast<std::int64_t>(w.tokens.size());
  std::vector<double> rows;
  for (const std::string& token : w.tokens)
    for (double v : embedding_of(token, seed)) rows.push_back(v);
  NoGradGuard no_grad;
  w.x = from_vector(rows, {T, kWidth}, Dtype::Float64);  // (T,d)
  Generator gen(seed + 1);
  const double init = 1.0 / std::sqrt(static_cast<double>(kWidth));  // keeps q, k, v near unit size
  w.w_q = mul(randn({kWidth, kWidth}, gen, Dtype::Float64), init);
  w.w_k = mul(randn({kWidth, kWidth}, gen, Dtype::Float64), init);
  w.w_v = mul(randn({kWidth, kWidth}, gen, Dtype::Float64), init);
  w.q = matmul(w.x, w.w_q);                              // (T,d)
  w.k = matmul(w.x, w.w_k);                              // (T,d)
  w.v = matmul(w.x, w.w_v);                              // (T,d)
  w.scores = matmul(w.q, transpose(w.k, 0, 1));          // (T,T)
  w.scaled = mul(w.scores, 1.0 / std::sqrt(static_cast<double>(kWidth)));
  w.weights = softmax(w.scaled, -1);                     // (T,T), rows sum to 1
  w.out = matmul(w.weights, w.v);                        // (T,d)

  std::vector<double> notes(25, 0.0);
  for (std::size_t i = 0; i < kNotesScores.size(); ++i)
    for (std::size_t j = 0; j < kNotesScores[i].size(); ++j) notes[i * 5 + j] = kNotesScores[i][j];
  w.notes_scores = from_vector(notes, {5, 5}, Dtype::Float64);
  const Tensor masked = masked_fill(w.notes_scores, nn::causal_mask(5, 5), -std::numeric_limits<double>::infinity());
  w.notes_weights = softmax(masked, -1);
  return w;
}

namespace {

// `label` padded with spaces to `columns` terminal columns: a CJK character takes two.
std::string padded(const std::string& label, std::size_t columns) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < label.size(); i += code_point_length(static_cast<unsigned char>(label[i])))
    width += static_cast<unsigned char>(label[i]) >= 0xE0 ? 2 : 1;  // 3- and 4-byte code points: wide
  return label + std::string(width < columns ? columns - width : 1, ' ');
}

// m (rows, cols) with row labels, `digits` decimals.
void print_matrix(std::ostream& out, const std::string& title, const Tensor& m, const std::vector<std::string>& labels,
                  int digits = 2) {
  out << "\n  " << title << "\n";
  const std::vector<double> v = m.contiguous().to_vector<double>();
  const std::int64_t rows = m.size(0), cols = m.size(1);
  for (std::int64_t i = 0; i < rows; ++i) {
    out << "    " << padded(i < static_cast<std::int64_t>(labels.size()) ? labels[i] : "", 12);
    for (std::int64_t j = 0; j < cols; ++j) out << std::setw(8) << fixed(v[i * cols + j], digits);
    out << "\n";
  }
}

void print_worked_example(const WorkedExample& w, std::ostream& out) {
  const std::vector<std::string> none;
  out << "Self-attention by hand / 手算自注意力: \"";
  for (std::size_t i = 0; i < w.tokens.size(); ++i) out << (i ? " " : "") << w.tokens[i];
  out << "\", d = d_k = " << kWidth << ", one head\n";
  print_matrix(out, "X: one row per word (embeddings) / 每个词一行（嵌入）", w.x, w.tokens);
  print_matrix(out, "W_Q / 查询矩阵", w.w_q, none);
  print_matrix(out, "W_K / 键矩阵", w.w_k, none);
  print_matrix(out, "W_V / 值矩阵", w.w_v, none);
  print_matrix(out, "Q = X W_Q", w.q, w.tokens);
  print_matrix(out, "K = X W_K", w.k, w.tokens);
  print_matrix(out, "V = X W_V", w.v, w.tokens);
  print_matrix(out, "S = Q K^T: row i, column j = how well word i's query matches word j's key / 打分", w.scores, w.tokens);
  print_matrix(out, "S / sqrt(d_k) = S / 2 / 缩放", w.scaled, w.tokens);
  print_matrix(out, "A = softmax of each row (each row sums to 1) / 按行 softmax", w.weights, w.tokens);
  print_matrix(out, "O = A V: each word's new vector, the A-weighted average of the values / 加权求和", w.out, w.tokens);
  out << "\nThe notes' causal softmax / 讲义中的因果掩码 softmax\n";
  const std::vector<std::string> rows = {"row 0", "row 1", "row 2", "row 3", "row 4"};
  print_matrix(out, "scores, on and below the diagonal (above: blocked, -inf) / 对角线及以下的分数", w.notes_scores, rows);
  print_matrix(out, "softmax over each row's unblocked entries / 每行只在未遮挡的位置上做 softmax", w.notes_weights, rows);
}

std::string worked_example_svg(const WorkedExample& w) {
  train::SvgWriter svg(1000, 400);
  svg.text(20, 26, "self-attention by hand, and the notes' causal softmax / 手算自注意力与讲义中的因果 softmax",
           {.size = train::kTitleFont, .bold = true});
  const double cell = std::min(48.0, 300.0 / static_cast<double>(w.tokens.size()));
  const auto scaled = matrix_rows(w.scaled);
  double hi = 0;
  for (const auto& r : scaled)
    for (double v : r) hi = std::max(hi, std::abs(v));
  draw_heatmap(svg, 100, 90, cell, {scaled, w.tokens, w.tokens, "S / sqrt(d_k) / 缩放后的分数", 0, hi, true});
  draw_heatmap(svg, 430, 90, cell, {matrix_rows(w.weights), w.tokens, w.tokens, "A = softmax(S / sqrt(d_k)) / 注意力权重", 0, 1});
  const std::vector<std::string> pos = {"0", "1", "2", "3", "4"};
  draw_heatmap(svg, 740, 90, 44, {matrix_rows(w.notes_weights), pos, pos, "causal softmax / 因果 softmax", 0, 1});
  return svg.finish();
}

// The claim: every row of A sums to 1 and the notes' masked entries got weight exactly 0.
bool worked_example_held(const WorkedExample& w) {
  bool held = true;
  const std::vector<double> a = w.weights.to_vector<double>(), n = w.notes_weights.to_vector<double>();
  for (std::size_t i = 0; i < w.tokens.size(); ++i) {
    double sum = 0;
    for (std::size_t j = 0; j < w.tokens.size(); ++j) sum += a[i * w.tokens.size() + j];
    held = held && std::abs(sum - 1) < 1e-12;
  }
  for (int i = 0; i < 5; ++i)
    for (int j = i + 1; j < 5; ++j) held = held && n[i * 5 + j] == 0.0;
  return held;
}

}  // namespace

int run_worked_example_demo(const DemoOptions& options, std::ostream& out) {
  check_demo_svg_path(demo_svg_path(options, "worked-example"));
  const WorkedExample w = options.text.empty() ? compute_worked_example(options.seed)
                                               : compute_worked_example(options.seed, options.text);
  print_worked_example(w, out);
  save_demo_svg(options, "worked-example", worked_example_svg(w), out);
  const bool held = worked_example_held(w);
  out << verdict(held) << "\n";
  return held ? 0 : 1;
}

// Every matrix in the order of the notes, one figure each: the page steps through them.
Json worked_example_report(const DemoOptions& options) {
  const WorkedExample w = options.text.empty() ? compute_worked_example(options.seed)
                                               : compute_worked_example(options.seed, options.text);
  std::vector<std::string> dims, rows5 = {"0", "1", "2", "3", "4"};
  for (std::int64_t i = 0; i < w.x.size(1); ++i) dims.push_back("d" + std::to_string(i));
  const auto fig = [&](const std::string& en, const std::string& zh, const Tensor& m, const std::vector<std::string>& rows,
                       const std::vector<std::string>& cols) {
    return heatmap_figure(bilingual(en, zh), rows, cols, matrix_rows(m), true);
  };
  const std::vector<std::string>& tok = w.tokens;
  Json held_weights = fig("softmax over each row's unblocked entries", "每行只在未遮挡的位置上做 softmax", w.notes_weights, rows5, rows5);
  held_weights["signed"] = false;
  Json a = fig("A = softmax of each row: each row sums to 1", "A = 按行 softmax：每行之和为 1", w.weights, tok, tok);
  a["signed"] = false;
  return {{"held", worked_example_held(w)},
          {"steps", true},
          {"numbers", {number(bilingual("tokens T", "词数 T"), static_cast<std::int64_t>(tok.size())),
                       number(bilingual("d_k", "d_k"), w.q.size(1)),
                       number(bilingual("the scale 1/sqrt(d_k)", "缩放因子 1/sqrt(d_k)"), 1.0 / std::sqrt(static_cast<double>(w.q.size(1))))}},
          {"figures", {fig("X: one embedding per word", "X：每个词一个嵌入向量", w.x, tok, dims),
                       fig("W_Q: the query matrix", "W_Q：查询矩阵", w.w_q, dims, dims),
                       fig("W_K: the key matrix", "W_K：键矩阵", w.w_k, dims, dims),
                       fig("W_V: the value matrix", "W_V：值矩阵", w.w_v, dims, dims),
                       fig("Q = X W_Q", "Q = X W_Q", w.q, tok, dims),
                       fig("K = X W_K", "K = X W_K", w.k, tok, dims),
                       fig("V = X W_V", "V = X W_V", w.v, tok, dims),
                       fig("S = Q K^T: row i, column j = how well word i's query matches word j's key",
                           "S = Q K^T：第 i 行第 j 列 = 词 i 的查询与词 j 的键的匹配程度", w.scores, tok, tok),
                       fig("S / sqrt(d_k)", "S / sqrt(d_k)：缩放后的分数", w.scaled, tok, tok),
                       std::move(a),
                       fig("O = A V: each word's new vector, the A-weighted average of the values",
                           "O = A V：每个词的新向量，是值向量按 A 加权的平均", w.out, tok, dims),
                       fig("the notes' scores, on and below the diagonal (above: blocked)", "讲义中的分数：对角线及以下（以上被遮挡）",
                           w.notes_scores, rows5, rows5),
                       std::move(held_weights)}}};
}

}  // namespace sf::lessons
