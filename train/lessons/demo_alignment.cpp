// `scratchformer demo alignment`: Bahdanau's alignment beside a Transformer's cross-attention on the
// toy reverse task, where the true alignment is known (demo_alignment.h).
//
// Letters: B strings, S string length, T target length (S + 1 with EOS), H heads, D width.
#include "train/lessons/demo_alignment.h"

#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <stdexcept>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/runtime/threads.h"
#include "nn/attention.h"
#include "nn/rnn_seq2seq.h"
#include "nn/seq2seq.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"
#include "train/lessons/toy_task.h"

namespace sf::lessons {

namespace {

constexpr std::int64_t kD = 64, kBatch = 32, kEvalLen = 10, kEvalStrings = 64;
constexpr double kLr = 3e-3;
// "The weights find the word": the peak within one position of the true source word in 95% of
// the rows, and on average 80% of the weight there. Not "on it": a bidirectional encoder's state
// h_i already carries its neighbours, so reading h_{i±1} also recovers x_i, and the trained α
// often peaks one position off (the exact share is printed, not asserted).
constexpr double kNearAtLeast = 0.95, kNearMassAtLeast = 0.8;

ToyTask reverse_task() {
  ToyTask task;
  task.reverse = true;
  task.min_len = 3;
  task.max_len = 12;
  return task;
}

// The symbol of an id: 4 -> "a", 5 -> "b", ...
std::string symbol(std::int64_t id) { return std::string(1, static_cast<char>('a' + (id - 4))); }

// The Transformer's cross-attention weights, teacher-forced: (B,H,T,S).
Tensor cross_attention_weights(const nn::Seq2SeqTransformer& model, const ToyBatch& b) {
  nn::MultiHeadAttention& cross = *model.decoder->layers->operator[](0).cross_attn;
  cross.capture_weights = true;
  model.forward(b.src, b.tgt_in);
  cross.capture_weights = false;
  return cross.last_weights;
}

// How well the weights w (B,T,S) of rows t < S (EOS left out) find the true source position
// S − 1 − t: the share of rows whose peak is on it, whose peak is within one position of it, and
// the mean weight within one position of it.
struct Hits {
  double exact = 0, near = 0, near_mass = 0;
};
Hits hits(const std::vector<double>& w, std::int64_t B, std::int64_t T, std::int64_t S) {
  Hits h;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < S; ++t) {
      const double* row = w.data() + (b * T + t) * S;
      const std::int64_t truth = S - 1 - t, peak = std::max_element(row, row + S) - row;
      h.exact += peak == truth ? 1 : 0;
      h.near += std::abs(peak - truth) <= 1 ? 1 : 0;
      for (std::int64_t i = std::max<std::int64_t>(0, truth - 1); i <= std::min(S - 1, truth + 1); ++i) h.near_mass += row[i];
    }
  const auto rows = static_cast<double>(B * S);
  h.exact /= rows, h.near /= rows, h.near_mass /= rows;
  return h;
}

// Rows t < S of sentence 0 of w (B,T,S).
std::vector<std::vector<double>> first_matrix(const std::vector<double>& w, std::int64_t T, std::int64_t S) {
  std::vector<std::vector<double>> m;
  for (std::int64_t t = 0; t < S; ++t) m.emplace_back(w.begin() + t * S, w.begin() + (t + 1) * S);
  (void)T;
  return m;
}

}  // namespace

std::string alignment_svg(const AlignmentResult& r) {
  const double cell = 34, left = 60, top = 140, gap = 140;
  const double width = static_cast<double>(r.source.size()) * cell;
  train::SvgWriter svg(2 * left + 2 * width + gap + 80, top + static_cast<double>(r.target.size()) * cell + 40);
  svg.text(left - 40, 30, "who reads which source symbol: rows = target, columns = source / 每个目标位置读哪个源符号",
           {15, "start", 0, true});
  // one panel: a bold title, what the model is and how often its peak finds the word, the map
  const auto panel = [&](double x, const std::string& title, const std::string& what, double exact, double near,
                         const std::vector<std::vector<double>>& m) {
    svg.text(x, top - 76, title, {13, "start", 0, true});
    svg.text(x, top - 58, what + ": peak on the word " + fixed(100 * exact, 0) + "%, within one " + fixed(100 * near, 0) + "%",
             {11});
    svg.text(x, top - 42, "峰值落在正确的词上 " + fixed(100 * exact, 0) + "%，相差不超过一个词 " + fixed(100 * near, 0) + "%", {11});
    draw_heatmap(svg, x, top, cell, Heatmap{m, r.target, r.source, ""});
  };
  panel(left, "Bahdanau α / 加性注意力的权重 α", "LSTM encoder-decoder, additive attention", r.rnn_hits, r.rnn_near,
        r.rnn_alignment);
  panel(left + width + gap, "Transformer cross-attention / 交叉注意力",
        "1 layer, mean of " + std::to_string(r.heads) + " heads", r.transformer_mean_hits, r.transformer_near,
        r.transformer_alignment);
  return svg.finish();
}

AlignmentResult compute_alignment(std::uint64_t seed, std::int64_t steps) {
  const ThreadCountScope one_thread(1);  // tiny models: a second thread only waits (threads.h)
  const ToyTask task = reverse_task();
  AlignmentResult r;
  r.d_model = kD, r.steps = steps, r.eval_len = kEvalLen;
  const std::int64_t S = kEvalLen, T = kEvalLen + 1, B = kEvalStrings;

  Generator rnn_init(seed), rnn_data(seed + 1);
  const std::unique_ptr<nn::Model> rnn_model =
      nn::make_model(toy_rnn_config(task, kD, nn::RnnAttention::Additive), rnn_init);
  r.rnn_loss = train_on_toy(*rnn_model, task, steps, kBatch, kLr, rnn_data);

  Generator tf_init(seed), tf_data(seed + 1);
  const nn::ModelConfig tf_config = toy_transformer_config(task, kD);
  const std::unique_ptr<nn::Model> tf_model = nn::make_model(tf_config, tf_init);
  r.transformer_loss = train_on_toy(*tf_model, task, steps, kBatch, kLr, tf_data);
  r.heads = tf_config.n_heads;

  Generator eval(seed + 2);
  const ToyBatch b = toy_batch_of_length(task, B, kEvalLen, eval);
  const NoGradGuard no_grad;
  const auto& rnn = dynamic_cast<const nn::RnnSeq2Seq&>(*rnn_model);
  const std::vector<double> alpha = rnn.alignment(b.src, b.tgt_in).to_vector<double>();  // (B,T,S)
  const Hits rnn_hits = hits(alpha, B, T, S);
  r.rnn_hits = rnn_hits.exact, r.rnn_near = rnn_hits.near, r.rnn_near_mass = rnn_hits.near_mass;

  const auto& tf = dynamic_cast<const nn::Seq2SeqTransformer&>(*tf_model);
  const Tensor weights = cross_attention_weights(tf, b);                          // (B,H,T,S)
  const std::vector<double> head_mean = sf::mean(weights, {1}).to_vector<double>();  // (B,T,S)
  const Hits mean_hits = hits(head_mean, B, T, S);
  r.transformer_mean_hits = mean_hits.exact, r.transformer_near = mean_hits.near;
  r.transformer_near_mass = mean_hits.near_mass;
  for (std::int64_t h = 0; h < r.heads; ++h) {
    const std::vector<double> head = contiguous(narrow(weights, 1, h, 1)).to_vector<double>();  // (B,1,T,S)
    const double share = hits(head, B, T, S).exact;
    if (share > r.transformer_best_head_hits) r.transformer_best_head_hits = share, r.best_head = h;
  }

  for (std::int64_t i = 0; i < S; ++i) r.source.push_back(symbol(b.strings[0][i]));
  const std::vector<std::int64_t> answer = toy_answer(task, b.strings[0]);
  for (std::int64_t id : answer) r.target.push_back(symbol(id));
  r.rnn_alignment = first_matrix(alpha, T, S);
  r.transformer_alignment = first_matrix(head_mean, T, S);
  return r;
}

bool alignment_held(const AlignmentResult& r) { return r.rnn_near >= kNearAtLeast && r.rnn_near_mass >= kNearMassAtLeast; }

int run_alignment_demo(const DemoOptions& options, std::ostream& out) {
  const AlignmentResult r = compute_alignment(options.seed);
  print_heading(out, "alignment: attention finds which word to read / 对齐：注意力自己找到该读的词");
  out << "the reverse task (the answer is the string backwards: target t reads source S-1-t); an LSTM with additive\n"
      << "attention and a 1-layer Transformer, D = " << r.d_model << ", " << r.steps << " steps each; final loss "
      << fixed(r.rnn_loss, 3) << " / " << fixed(r.transformer_loss, 3) << "\n"
      << "strings of " << r.eval_len << " symbols, teacher-forced; share of target positions whose weights peak on the "
      << "true source position / 权重最大值落在正确源位置上的比例:\n"
      << "                                          peak on it   peak within 1   weight within 1\n"
      << "  Bahdanau alpha (rnn)                    " << fixed(r.rnn_hits, 3) << "        " << fixed(r.rnn_near, 3)
      << "           " << fixed(r.rnn_near_mass, 3) << "\n"
      << "  Transformer cross-attention, head mean  " << fixed(r.transformer_mean_hits, 3) << "        "
      << fixed(r.transformer_near, 3) << "           " << fixed(r.transformer_near_mass, 3) << "\n"
      << "  Transformer, best head (" << r.best_head + 1 << " of " << r.heads << ")           "
      << fixed(r.transformer_best_head_hits, 3) << "\n"
      << "one string, rows = target symbols, columns = source symbols / 一个例子，行 = 目标符号，列 = 源符号:\n";
  const auto print_matrix = [&](const char* name, const std::vector<std::vector<double>>& m) {
    out << name << "\n     ";
    for (const std::string& s : r.source) out << "    " << s;
    out << "\n";
    for (std::size_t t = 0; t < m.size(); ++t) {
      out << "  " << r.target[t] << "  ";
      for (double v : m[t]) out << " " << fixed(v, 2);
      out << "\n";
    }
  };
  print_matrix("Bahdanau alpha / 加性注意力", r.rnn_alignment);
  print_matrix("Transformer cross-attention (head mean) / 交叉注意力（各头平均）", r.transformer_alignment);
  out << "nobody showed either model an alignment: it is learnt because reading the right word lowers the loss;\n"
      << "a bidirectional encoder's state also carries its neighbours, so the peak may sit one word off\n"
      << "没有人告诉模型对齐关系：读对的词能降低损失，对齐就被学出来了；双向编码器的状态也带着相邻的词，所以峰值可能偏一个位置\n";
  save_demo_svg(options, "alignment", alignment_svg(r), out);
  const bool held = alignment_held(r);
  out << verdict(held) << "\n";
  return held ? 0 : 1;
}

Json alignment_json(const AlignmentResult& r) {
  const std::vector<std::string> rows(r.target.begin(), r.target.begin() + static_cast<std::ptrdiff_t>(r.rnn_alignment.size()));
  return {{"held", alignment_held(r)},
          {"numbers", {number(bilingual("Bahdanau: peak within one position of the truth", "Bahdanau：峰值与正确位置相差不超过 1 的比例"), r.rnn_near),
                       number(bilingual("Bahdanau: mean weight within one position", "Bahdanau：相差不超过 1 的位置上的平均权重"), r.rnn_near_mass),
                       number(bilingual("Bahdanau: peak exactly on the truth", "Bahdanau：峰值恰好落在正确位置的比例"), r.rnn_hits),
                       number(bilingual("Transformer, head mean: peak on the truth", "Transformer（各头平均）：峰值落在正确位置的比例"), r.transformer_mean_hits),
                       number(bilingual("Transformer, best head: peak on the truth", "Transformer（最好的头）：峰值落在正确位置的比例"), r.transformer_best_head_hits)}},
          {"figures", {heatmap_figure(bilingual("Bahdanau alpha: rows = target symbols, columns = source symbols", "Bahdanau 的 alpha：行 = 目标符号，列 = 源符号"),
                                      rows, r.source, r.rnn_alignment),
                       heatmap_figure(bilingual("Transformer cross-attention (head mean)", "Transformer 交叉注意力（各头平均）"), rows, r.source,
                                      r.transformer_alignment)}}};
}

Json alignment_report(const DemoOptions& options) { return alignment_json(compute_alignment(options.seed)); }

}  // namespace sf::lessons
