// `scratchformer demo parallel`: the longest chain of dependent ops in an LSTM layer and in a
// self-attention layer of the same width, against the sequence length, with their forward times
// (demo_parallel.h).
//
// Letters: B batch, T sequence length, D width.
#include "train/lessons/demo_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <ostream>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/recurrent.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"

namespace sf::lessons {

namespace {

// The longest chain of ops from `node` back to a leaf: 1 + the longest of its inputs' chains.
// Memoised, so a graph with shared subgraphs is walked once per node.
std::int64_t chain_length(const Node* node, std::map<const Node*, std::int64_t>& memo) {
  if (node == nullptr || std::string(node->name()) == "AccumulateGrad") return 0;
  if (auto it = memo.find(node); it != memo.end()) return it->second;
  std::int64_t longest = 0;
  for (const auto& input : node->inputs) longest = std::max(longest, chain_length(input.get(), memo));
  return memo[node] = longest + 1;
}

std::int64_t dependent_chain(const Tensor& out) {
  std::map<const Node*, std::int64_t> memo;
  return chain_length(out.grad_fn().get(), memo);
}

// Median wall time of `repeats` calls of f, in milliseconds (0 when repeats == 0).
template <class F>
double median_ms(int repeats, F f) {
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0.0 : ms[ms.size() / 2];
}

// Chain length against T, one line per layer.
std::string parallel_svg(const ParallelResult& r) {
  const double W = 800, H = 400, left = 70, top = 50, pw = 480, ph = 280;
  train::SvgWriter svg(W, H);
  svg.text(left, 28, "longest chain of dependent ops vs sequence length / 最长依赖运算链与序列长度", {15, "start", 0, true});
  double hi = 1;
  for (const ParallelRow& row : r.rows) hi = std::max<double>(hi, static_cast<double>(row.lstm_depth));
  const double max_t = static_cast<double>(r.rows.back().seq_len);
  const auto px = [&](double t) { return left + pw * t / max_t; };
  const auto py = [&](double d) { return top + ph * (1 - d / hi); };
  svg.line(left, top, left, top + ph, {"none", "#444444"});
  svg.line(left, top + ph, left + pw, top + ph, {"none", "#444444"});
  for (const ParallelRow& row : r.rows)
    svg.text(px(double(row.seq_len)), top + ph + 18, std::to_string(row.seq_len), {11, "middle"});
  for (int k = 0; k <= 4; ++k)
    svg.text(left - 8, py(hi * k / 4) + 4, std::to_string(static_cast<long long>(std::lround(hi * k / 4))), {11, "end"});
  svg.text(left + pw / 2, top + ph + 40, "sequence length T / 序列长度", {12, "middle"});
  std::vector<std::pair<double, double>> lstm, attention;
  for (const ParallelRow& row : r.rows) {
    lstm.push_back({px(double(row.seq_len)), py(double(row.lstm_depth))});
    attention.push_back({px(double(row.seq_len)), py(double(row.attention_depth))});
  }
  svg.polyline(lstm, {"none", "#ff7f0e", 2});
  svg.polyline(attention, {"none", "#1f77b4", 2});
  svg.line(left + pw + 20, top + 10, left + pw + 44, top + 10, {"none", "#ff7f0e", 3});
  svg.text(left + pw + 50, top + 14, "LSTM", {12});
  svg.line(left + pw + 20, top + 32, left + pw + 44, top + 32, {"none", "#1f77b4", 3});
  svg.text(left + pw + 50, top + 36, "self-attention / 自注意力", {12});
  return svg.finish();
}

}  // namespace

ParallelResult compute_parallel(const ParallelSettings& s, std::uint64_t seed) {
  Generator gen(seed), dropout_gen(seed + 1);
  nn::Recurrent lstm(nn::CellKind::lstm, s.width, s.width, 1, false, gen);
  nn::MultiHeadAttention attention(s.width, 4, 4, 0.0, nn::PositionInAttention::None, gen, dropout_gen);
  ParallelResult r{s, {}};
  for (const std::int64_t T : s.lengths) {
    ParallelRow row;
    row.seq_len = T;
    Tensor x = randn({1, T, s.width}, gen).requires_grad_();  // one row is enough to read the graph
    row.lstm_depth = dependent_chain(lstm.forward(x).outputs);
    row.attention_depth = dependent_chain(attention.forward(x, x, Tensor()));
    const Tensor batch = randn({s.batch, T, s.width}, gen);
    NoGradGuard no_grad;  // the timed forwards record no graph
    row.lstm_ms = median_ms(s.repeats, [&] { lstm.forward(batch); });
    row.attention_ms = median_ms(s.repeats, [&] { attention.forward(batch, batch, Tensor()); });
    r.rows.push_back(row);
  }
  return r;
}

bool parallel_held(const ParallelResult& r) {
  for (std::size_t i = 1; i < r.rows.size(); ++i) {
    const ParallelRow &a = r.rows[i - 1], &b = r.rows[i];
    if (b.lstm_depth - a.lstm_depth < b.seq_len - a.seq_len) return false;  // at least one op per position
    if (b.attention_depth != a.attention_depth) return false;
  }
  return !r.rows.empty();
}

int run_parallel_demo(const DemoOptions& options, std::ostream& out) {
  const ParallelResult r = compute_parallel(ParallelSettings{}, options.seed);
  print_heading(out, "parallel: a recurrence waits, attention does not / 并行：循环要等待，注意力不必");
  out << "width D = " << r.settings.width << "; chain = the longest chain of dependent ops, output back to input (autograd graph);\n"
      << "ms = median forward of a batch of " << r.settings.batch << " on this machine (measured, not asserted)\n"
      << "T       LSTM chain  attention chain   LSTM ms    attention ms\n";
  for (const ParallelRow& row : r.rows) {
    char line[128];
    std::snprintf(line, sizeof line, "%-7lld %10lld  %15lld  %8.2f  %14.2f\n", static_cast<long long>(row.seq_len),
                  static_cast<long long>(row.lstm_depth), static_cast<long long>(row.attention_depth), row.lstm_ms,
                  row.attention_ms);
    out << line;
  }
  const ParallelRow &first = r.rows.front(), &last = r.rows.back();
  out << "from T = " << first.seq_len << " to " << last.seq_len << ": LSTM time x" << fixed(last.lstm_ms / first.lstm_ms, 1)
      << ", attention time x" << fixed(last.attention_ms / first.attention_ms, 1)
      << " (attention's products grow with T too, as T² for the scores; what does not grow is how many must wait)\n"
      << "循环网络的 T 个位置必须一个接一个计算；注意力用固定数量的矩阵乘法一次算出全部位置\n";
  save_demo_svg(options, "parallel", parallel_svg(r), out);
  const bool held = parallel_held(r);
  out << verdict(held) << "\n";
  return held ? 0 : 1;
}

Json parallel_report(const DemoOptions& options) {
  const ParallelResult r = compute_parallel(ParallelSettings{}, options.seed);
  std::vector<double> t, lstm_chain, att_chain, lstm_ms, att_ms;
  for (const ParallelRow& row : r.rows) {
    t.push_back(static_cast<double>(row.seq_len));
    lstm_chain.push_back(static_cast<double>(row.lstm_depth)), att_chain.push_back(static_cast<double>(row.attention_depth));
    lstm_ms.push_back(row.lstm_ms), att_ms.push_back(row.attention_ms);
  }
  return {{"held", parallel_held(r)},
          {"numbers", {number(bilingual("width D", "宽度 D"), r.settings.width), number(bilingual("batch", "批大小"), r.settings.batch)}},
          {"figures", {lines_figure(bilingual("the longest chain of dependent ops (autograd graph)", "最长的相互依赖运算链（自动求导图）"),
                                    {bilingual("T", "T"), bilingual("ops that must wait for each other", "必须依次等待的运算数"), true, true},
                                    {line_series("LSTM", t, lstm_chain), line_series(bilingual("self-attention", "自注意力"), t, att_chain)}),
                       lines_figure(bilingual("forward time, median (this machine)", "前向时间中位数（本机）"),
                                    {bilingual("T", "T"), bilingual("ms", "毫秒"), true, true},
                                    {line_series("LSTM", t, lstm_ms), line_series(bilingual("self-attention", "自注意力"), t, att_ms)})}}};
}

}  // namespace sf::lessons
