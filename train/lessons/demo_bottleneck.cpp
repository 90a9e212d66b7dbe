// `scratchformer demo bottleneck`: the same LSTM encoder-decoder with and without attention on the
// toy copy task, accuracy by string length (demo_bottleneck.h).
//
// Letters: S string length, D width.
#include "train/lessons/demo_bottleneck.h"

#include <algorithm>
#include <ostream>

#include "autograd/runtime/threads.h"
#include "nn/model.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"
#include "train/lessons/toy_task.h"

namespace sf::lessons {

namespace {

constexpr std::int64_t kD = 64, kBatch = 32, kEvalStrings = 64;
constexpr double kLr = 3e-3;
// "falls faster": the no-attention model loses this much more accuracy from the shortest to the
// longest length than the attention model, and ends this far below it.
constexpr double kMargin = 0.2;

ToyTask copy_task() {
  ToyTask task;
  task.reverse = false;
  task.min_len = 3;
  task.max_len = 24;
  return task;
}

}  // namespace

// Accuracy against length, one line per model.
std::string bottleneck_svg(const BottleneckResult& r) {
  const double W = 840, H = 420, left = 70, top = 50, pw = 520, ph = 300;
  train::SvgWriter svg(W, H);
  svg.text(left, 28, "copying a string: symbols right by length / 复制字符串：按长度统计的正确率", {15, "start", 0, true});
  const double x_lo = static_cast<double>(r.lengths.front()), x_hi = static_cast<double>(r.lengths.back());
  const auto px = [&](double s) { return left + pw * (s - x_lo) / (x_hi - x_lo); };
  const auto py = [&](double a) { return top + ph * (1 - a); };
  svg.line(left, top, left, top + ph, {"none", "#444444"});
  svg.line(left, top + ph, left + pw, top + ph, {"none", "#444444"});
  for (int i = 0; i <= 5; ++i) {
    const double a = i / 5.0;
    svg.line(left, py(a), left + pw, py(a), {"none", "#dddddd"});
    svg.text(left - 8, py(a) + 4, fixed(a, 1), {11, "end"});
  }
  for (std::int64_t s : r.lengths) svg.text(px(static_cast<double>(s)), top + ph + 18, std::to_string(s), {11, "middle"});
  svg.text(left + pw / 2, top + ph + 40, "string length S (symbols) / 字符串长度", {12, "middle"});
  svg.text(left - 50, top - 10, "accuracy / 正确率", {12, "start"});
  const struct {
    const std::vector<double>* acc;
    const char* name;
    const char* colour;
  } lines[] = {{&r.none, "no attention / 无注意力", "#d62728"}, {&r.additive, "additive attention / 加性注意力", "#1f77b4"}};
  double legend_y = top + 10;
  for (const auto& l : lines) {
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < l.acc->size(); ++i) pts.push_back({px(static_cast<double>(r.lengths[i])), py((*l.acc)[i])});
    svg.polyline(pts, {"none", l.colour, 2});
    for (const auto& [x, y] : pts) svg.circle(x, y, 3, {l.colour, l.colour});
    svg.line(left + pw + 20, legend_y, left + pw + 44, legend_y, {"none", l.colour, 3});
    svg.text(left + pw + 50, legend_y + 4, l.name, {12});
    legend_y += 22;
  }
  return svg.finish();
}

BottleneckResult compute_bottleneck(std::uint64_t seed, std::int64_t steps) {
  const ThreadCountScope one_thread(1);  // tiny models: a second thread only waits (threads.h)
  const ToyTask task = copy_task();
  BottleneckResult r;
  r.d_model = kD, r.steps = steps, r.batch = kBatch, r.train_min_len = task.min_len, r.train_max_len = task.max_len;
  r.lengths = {4, 8, 12, 16, 20, 24};
  for (const nn::RnnAttention attention : {nn::RnnAttention::None, nn::RnnAttention::Additive}) {
    Generator init(seed), data(seed + 1), eval(seed + 2);  // the same weights' draw, batches and test strings
    const std::unique_ptr<nn::Model> model = nn::make_model(toy_rnn_config(task, kD, attention), init);
    const double loss = train_on_toy(*model, task, steps, kBatch, kLr, data);
    std::vector<double>& acc = attention == nn::RnnAttention::None ? r.none : r.additive;
    for (std::int64_t s : r.lengths) acc.push_back(toy_accuracy(*model, task, s, kEvalStrings, eval));
    (attention == nn::RnnAttention::None ? r.none_loss : r.additive_loss) = loss;
  }
  return r;
}

bool bottleneck_held(const BottleneckResult& r) {
  const double none_drop = r.none.front() - r.none.back(), additive_drop = r.additive.front() - r.additive.back();
  return none_drop > additive_drop + kMargin && r.none.back() < r.additive.back() - kMargin;
}

int run_bottleneck_demo(const DemoOptions& options, std::ostream& out) {
  const BottleneckResult r = compute_bottleneck(options.seed);
  print_heading(out, "the bottleneck: one vector for the whole sentence / 瓶颈：整句只有一个向量");
  out << "two LSTM encoder-decoders, D = " << r.d_model << ", trained " << r.steps << " steps of " << r.batch
      << " strings (" << r.train_min_len << " to " << r.train_max_len << " symbols) to copy a string;\n"
      << "greedy decoding of fresh strings, fraction of symbols right / 贪心解码新字符串，符号正确的比例\n"
      << "S       no attention   additive attention / 无注意力  加性注意力\n";
  for (std::size_t i = 0; i < r.lengths.size(); ++i)
    out << r.lengths[i] << std::string(8 - std::to_string(r.lengths[i]).size(), ' ') << fixed(r.none[i], 3)
        << "          " << fixed(r.additive[i], 3) << "\n";
  out << "training loss at the end / 训练结束时的损失: no attention " << fixed(r.none_loss, 3) << ", additive "
      << fixed(r.additive_loss, 3) << "\n"
      << "without attention the decoder knows the source only through its first state: long strings do not fit;\n"
      << "with attention every step reads all encoder states / 无注意力时解码器只通过初始状态了解源句，长句装不下；有注意力时每一步都读全部编码器状态\n";
  save_demo_svg(options, "bottleneck", bottleneck_svg(r), out);
  const bool held = bottleneck_held(r);
  out << verdict(held) << "\n";
  return held ? 0 : 1;
}

Json bottleneck_json(const BottleneckResult& r) {
  std::vector<double> lengths;
  for (std::int64_t s : r.lengths) lengths.push_back(static_cast<double>(s));
  return {{"held", bottleneck_held(r)},
          {"numbers", {number(bilingual("training steps", "训练步数"), r.steps), number(bilingual("d_model", "d_model"), r.d_model),
                       number(bilingual("final loss, no attention", "最终损失（无注意力）"), r.none_loss),
                       number(bilingual("final loss, additive attention", "最终损失（加性注意力）"), r.additive_loss)}},
          {"figures", {lines_figure(bilingual("copying a string: fraction of symbols right against its length", "复制字符串：符号正确率随长度的变化"),
                                    {bilingual("string length S", "字符串长度 S"), bilingual("accuracy", "正确率")},
                                    {line_series(bilingual("no attention (one vector)", "无注意力（只有一个向量）"), lengths, r.none),
                                     line_series(bilingual("additive attention", "加性注意力"), lengths, r.additive)},
                                    {{static_cast<double>(r.train_max_len), bilingual("longest in training", "训练中最长")}})}}};
}

Json bottleneck_report(const DemoOptions& options) { return bottleneck_json(compute_bottleneck(options.seed)); }

}  // namespace sf::lessons
