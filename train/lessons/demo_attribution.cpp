// Demo `attribution` (demo_attribution.h): attention beside attribution, scored against a known
// alignment on the reverse task and a hand-annotated one on a trained translator.
#include "train/lessons/demo_attribution.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "autograd/generator.h"
#include "autograd/runtime/threads.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "nn/seq2seq.h"
#include "train/classroom/attribution.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"
#include "train/lessons/toy_task.h"
#include "train/setup.h"
#include "train/data_folder.h"  // corpora_dir: the shipped corpora, found at run time

namespace sf::lessons {

namespace {

constexpr std::int64_t kD = 64, kBatch = 32, kEvalLen = 8, kEvalStrings = 16, kIgSteps = 16;
constexpr double kLr = 3e-3;

const std::vector<std::string>& method_names() {
  static const std::vector<std::string> names = {"attention, best head", "attention, head mean (last layer)", "rollout",
                                                 "gradient x input", "integrated gradients"};
  return names;
}

// What one setting adds up over its sentences.
struct Tally {
  std::vector<double> hits = std::vector<double>(5, 0.0);  // per method (the best head filled at the end)
  std::vector<double> head_hits, head_drop;                 // per decoder layer x head
  std::int64_t counted = 0, targets = 0;
};

bool hit(const std::vector<std::vector<bool>>& truth, std::size_t t, std::int64_t s) {
  return s >= 0 && static_cast<std::size_t>(s) < truth[t].size() && truth[t][static_cast<std::size_t>(s)];
}

// Adds one sentence: truth[t][s] = source token s is aligned with target token t; counted[t] =
// target token t has an alignment at all.
void score(const train::Attribution& a, const std::vector<std::vector<bool>>& truth, const std::vector<bool>& counted,
           Tally& tally) {
  const std::vector<const Matrix*> maps = {&a.attention_mean, &a.rollout, &a.gradient_input, &a.integrated};
  std::vector<const Matrix*> heads;
  for (const auto& layer : a.attention)
    for (const Matrix& h : layer) heads.push_back(&h);
  tally.head_hits.resize(heads.size(), 0.0);
  tally.head_drop.resize(heads.size(), 0.0);
  for (std::size_t t = 0; t < counted.size(); ++t) {
    std::size_t h = 0;
    for (const auto& layer : a.ablation)
      for (const auto& drops : layer) tally.head_drop[h++] += drops[t];
    ++tally.targets;
    if (!counted[t]) continue;
    ++tally.counted;
    for (std::size_t m = 0; m < maps.size(); ++m) tally.hits[m + 1] += hit(truth, t, train::row_argmax(*maps[m])[t]) ? 1 : 0;
    for (std::size_t k = 0; k < heads.size(); ++k) tally.head_hits[k] += hit(truth, t, train::row_argmax(*heads[k])[t]) ? 1 : 0;
  }
}

AttributionSetting finish(const std::string& name, std::int64_t sentences, const Tally& tally, std::int64_t heads_per_layer) {
  AttributionSetting s;
  s.name = name, s.sentences = sentences, s.counted = tally.counted, s.methods = method_names();
  const double n = static_cast<double>(std::max<std::int64_t>(1, tally.counted));
  for (std::size_t k = 0; k < tally.head_hits.size(); ++k) {
    s.heads.push_back("L" + std::to_string(k / heads_per_layer + 1) + " H" + std::to_string(k % heads_per_layer + 1));
    s.head_agreement.push_back(tally.head_hits[k] / n);
    s.head_importance.push_back(tally.head_drop[k] / static_cast<double>(std::max<std::int64_t>(1, tally.targets)));
  }
  s.agreement.push_back(*std::max_element(s.head_agreement.begin(), s.head_agreement.end()));
  for (std::size_t m = 1; m < 5; ++m) s.agreement.push_back(tally.hits[m] / n);
  return s;
}

void keep_example(AttributionSetting& s, const train::Attribution& a, const std::vector<std::vector<bool>>& truth,
                  std::vector<std::string> source, std::vector<std::string> target) {
  s.source = std::move(source), s.target = std::move(target);
  for (const auto& row : truth) s.truth.emplace_back(row.begin(), row.end());
  s.maps = {{"attention, head mean (last layer)", a.attention_mean}, {"rollout", a.rollout},
            {"gradient x input", a.gradient_input}, {"integrated gradients", a.integrated}};
}

AttributionSetting reverse_setting(std::uint64_t seed, std::int64_t steps, double& loss) {
  ToyTask task;
  task.reverse = true, task.min_len = 3, task.max_len = 12;
  nn::ModelConfig c = toy_transformer_config(task, kD);
  c.encoder_layers = c.decoder_layers = 2;
  Generator init(seed), data(seed + 1), eval(seed + 2);
  nn::Seq2SeqTransformer model(c, init);
  loss = train_on_toy(model, task, steps, kBatch, kLr, data);
  const ToyBatch b = toy_batch_of_length(task, kEvalStrings, kEvalLen, eval);
  Tally tally;
  AttributionSetting example;
  const std::int64_t S = kEvalLen, T = kEvalLen + 1;
  for (std::int64_t i = 0; i < kEvalStrings; ++i) {
    const Tensor src = b.src.narrow(0, i, 1).contiguous(), tgt_in = b.tgt_in.narrow(0, i, 1).contiguous(),
                 tgt_out = b.tgt_out.narrow(0, i, 1).contiguous();
    const train::Attribution a = train::attribute(model, src, tgt_in, tgt_out, kIgSteps);
    std::vector<std::vector<bool>> truth(T, std::vector<bool>(S, false));
    std::vector<bool> counted(T, false);
    for (std::int64_t t = 0; t < S; ++t) truth[t][S - 1 - t] = true, counted[t] = true;  // EOS (t = S) reads nothing
    score(a, truth, counted, tally);
    if (i == 0) {
      std::vector<std::string> source, target;
      for (std::int64_t s = 0; s < S; ++s) source.push_back(std::string(1, static_cast<char>('a' + (b.src.at({i, s}) - 4))));
      for (std::int64_t t = 0; t < T; ++t)
        target.push_back(t < S ? std::string(1, static_cast<char>('a' + (b.tgt_out.at({i, t}) - 4))) : "</s>");
      keep_example(example, a, truth, source, target);
    }
  }
  AttributionSetting s = finish("reverse task", kEvalStrings, tally, c.n_heads);
  s.source = example.source, s.target = example.target, s.truth = example.truth, s.maps = example.maps;
  return s;
}

// piece -> the whitespace word it belongs to (a piece starting with "▁" starts a new word).
std::vector<std::int64_t> word_of_pieces(const std::vector<std::string>& pieces) {
  std::vector<std::int64_t> word;
  std::int64_t w = -1;
  for (const std::string& p : pieces) {
    if (w < 0 || p.rfind("\xe2\x96\x81", 0) == 0) ++w;
    word.push_back(w);
  }
  return word;
}

AttributionSetting translator_setting(const std::string& checkpoint, const std::string& corpora) {
  train::InferenceModel im = train::load_inference_model(checkpoint);
  auto* model = dynamic_cast<nn::Seq2SeqTransformer*>(im.model.get());
  if (!model)
    throw std::invalid_argument("demo attribution: --checkpoint " + checkpoint + " is a model.arch " + im.config.model.arch +
                                " model; expected an encoder-decoder Transformer (a Multi30k de-en run)");
  const std::vector<AlignedPair> pairs = read_alignments(corpora);
  Tally tally;
  AttributionSetting example;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const AlignedPair& p = pairs[i];
    const std::vector<std::int64_t> src_ids = im.tokenizers->src.encode(p.de), tgt_ids = im.tokenizers->tgt.encode(p.en);
    const std::vector<std::string> src_pieces = im.tokenizers->src.pieces(p.de), tgt_pieces = im.tokenizers->tgt.pieces(p.en);
    std::vector<std::int64_t> tgt_in = {data::kBosId}, tgt_out = tgt_ids;
    tgt_in.insert(tgt_in.end(), tgt_ids.begin(), tgt_ids.end());
    tgt_out.push_back(data::kEosId);
    const auto S = static_cast<std::int64_t>(src_ids.size()), T = static_cast<std::int64_t>(tgt_in.size());
    if (std::max(S, T) > im.config.model.max_len)
      throw std::invalid_argument("demo attribution: line " + std::to_string(p.line) + " of the alignments is " + std::to_string(S) +
                                  " source and " + std::to_string(T) + " target tokens, but " + checkpoint + " has " +
                                  std::to_string(im.config.model.max_len) + " positions (model.max_len)");
    const train::Attribution a = train::attribute(*model, from_vector(src_ids, {1, S}), from_vector(tgt_in, {1, T}),
                                                  from_vector(tgt_out, {1, T}), kIgSteps);
    const std::vector<std::int64_t> src_word = word_of_pieces(src_pieces), tgt_word = word_of_pieces(tgt_pieces);
    std::vector<std::vector<bool>> truth(T, std::vector<bool>(S, false));
    std::vector<bool> counted(T, false);
    for (std::int64_t t = 0; t + 1 < T; ++t)
      for (const auto& [de, en] : p.links)
        if (en == tgt_word[t]) {
          counted[t] = true;
          for (std::int64_t s = 0; s < S; ++s) truth[t][s] = truth[t][s] || src_word[s] == de;
        }
    score(a, truth, counted, tally);
    if (i == 0) {
      std::vector<std::string> target = tgt_pieces;
      target.push_back("</s>");
      keep_example(example, a, truth, src_pieces, target);
    }
  }
  AttributionSetting s = finish(std::filesystem::path(checkpoint).filename().string(), static_cast<std::int64_t>(pairs.size()),
                                tally, model->config().n_heads);
  s.source = example.source, s.target = example.target, s.truth = example.truth, s.maps = example.maps;
  return s;
}

// The head the ablation ranks first (the largest mean drop of log p).
std::size_t most_important_head(const AttributionSetting& s) {
  return static_cast<std::size_t>(std::max_element(s.head_importance.begin(), s.head_importance.end()) - s.head_importance.begin());
}

// What the demo's own run shows, each with its margin (method indices as method_names()).
void judge(AttributionDemoResult& r) {
  constexpr std::size_t kBestHead = 0, kHeadMean = 1, kGradInput = 3, kIntegrated = 4;
  const AttributionSetting& rev = r.reverse;
  const std::size_t top = most_important_head(rev);
  r.claims = {
      {"reverse task: the last layer's head-mean attention finds the aligned token for at least 80% of the targets",
       rev.agreement[kHeadMean] >= 0.8},
      {"reverse task: the head whose removal costs most (" + rev.heads[top] + ") is not the head that attends to the "
       "aligned token: its attention agrees at least 0.3 less than the best head's",
       rev.head_agreement[top] <= rev.agreement[kBestHead] - 0.3},
      {"reverse task: integrated gradients agree at least 0.3 more than gradient x input (one gradient at one point "
       "misses where the output saturates)",
       rev.agreement[kIntegrated] >= rev.agreement[kGradInput] + 0.3}};
  if (r.translator) {
    const AttributionSetting& tr = *r.translator;
    r.claims.push_back({"translator: integrated gradients agree with the hand alignment at least 0.1 more than any "
                        "attention view (the best head, the last layer's head mean)",
                        tr.agreement[kIntegrated] >= std::max(tr.agreement[kBestHead], tr.agreement[kHeadMean]) + 0.1});
  }
  r.claim_holds = true;
  for (const auto& [claim, held] : r.claims) r.claim_holds = r.claim_holds && held;
}

}  // namespace

std::vector<AlignedPair> read_alignments(const std::string& corpora) {
  const std::string path = train::corpora_dir(corpora) + "/multi30k-alignments/multi30k-test.tsv";
  const std::vector<std::string> lines = data::read_lines(path);
  std::vector<AlignedPair> pairs;
  for (std::size_t n = 0; n < lines.size(); ++n) {
    if (lines[n].empty() || lines[n][0] == '#') continue;
    std::vector<std::string> cols;
    std::stringstream row(lines[n]);
    for (std::string c; std::getline(row, c, '\t');) cols.push_back(c);
    const std::string where = path + ":" + std::to_string(n + 1);
    if (cols.size() != 4) throw std::runtime_error(where + ": expected 4 tab-separated columns, got " + std::to_string(cols.size()));
    AlignedPair p{std::stoll(cols[0]), cols[1], cols[2], {}};
    std::stringstream links(cols[3]);
    for (std::string link; links >> link;) {
      const std::size_t dash = link.find('-');
      if (dash == std::string::npos) throw std::runtime_error(where + ": expected links like 3-4, got '" + link + "'");
      p.links.push_back({std::stoll(link.substr(0, dash)), std::stoll(link.substr(dash + 1))});
    }
    pairs.push_back(std::move(p));
  }
  return pairs;
}

AttributionDemoResult compute_attribution_demo(std::uint64_t seed, const std::string& checkpoint, const std::string& corpora,
                                               std::int64_t steps) {
  if (!checkpoint.empty() && !std::filesystem::is_regular_file(checkpoint))  // say so before training the toy model
    throw std::invalid_argument("demo attribution: --checkpoint " + checkpoint + ": no such checkpoint file");
  AttributionDemoResult r;
  {
    const ThreadCountScope one_thread(1);  // tiny models: a second thread only waits
    r.reverse = reverse_setting(seed, steps, r.reverse_loss);
  }
  if (!checkpoint.empty()) r.translator = translator_setting(checkpoint, corpora);
  judge(r);
  return r;
}

namespace {

void print_setting(const AttributionSetting& s, std::ostream& out) {
  out << s.name << ": " << s.sentences << " sentences, " << s.counted << " target tokens scored\n"
      << "  method                               share whose top source token is aligned / 指向正确对齐的比例\n";
  for (std::size_t m = 0; m < s.methods.size(); ++m) {
    std::string line = "  " + s.methods[m];
    line.resize(39, ' ');
    out << line << fixed(s.agreement[m], 3) << "\n";
  }
  out << "  head    attention alone   drop of log p when zeroed (head ablation) / 单个头的注意力、消融后 log p 的下降\n";
  for (std::size_t h = 0; h < s.heads.size(); ++h) {
    std::string line = "  " + s.heads[h];
    line.resize(10, ' ');
    out << line << fixed(s.head_agreement[h], 3) << "             " << fixed(s.head_importance[h], 4) << "\n";
  }
}

// One row of heatmaps for the first sentence of a setting (the truth, then each method's map),
// with each method's agreement over all the setting's sentences in its title.
void draw_setting(train::SvgWriter& svg, const AttributionSetting& s, double top) {
  const double cell = 28, width = std::max(230.0, cell * static_cast<double>(s.source.size()) + 80);
  const std::vector<std::string> short_names = {"attention (head mean)", "rollout", "grad x input", "integrated grad."};
  const std::vector<std::string> rows(s.target.begin(), s.target.begin() + static_cast<std::ptrdiff_t>(s.truth.size()));
  svg.text(16, top - 110, s.name + " (first sentence; agreement over all " + std::to_string(s.sentences) + ")",
           {.size = train::kLabelFont, .bold = true});
  draw_heatmap(svg, 70, top, cell, {s.truth, rows, s.source, "truth", 0, 1});
  for (std::size_t m = 0; m < s.maps.size(); ++m) {
    const auto& [name, map] = s.maps[m];
    double hi = 1e-12;
    for (const auto& row : map)
      for (double v : row) hi = std::max(hi, std::abs(v));
    const bool is_signed = name == "gradient x input" || name == "integrated gradients";
    draw_heatmap(svg, 70 + (m + 1) * width, top, cell,
                 {map, rows, s.source, short_names[m] + ": " + fixed(s.agreement[m + 1], 2), 0, is_signed ? hi : 1, is_signed});
  }
}

std::string attribution_svg(const AttributionDemoResult& r) {
  const double row_height = 28.0 * 14 + 170;
  const double height = 80 + row_height * (r.translator ? 2 : 1);
  train::SvgWriter svg(1560, height);
  svg.text(16, 26, "demo attribution: attention beside attribution / 注意力与归因 (title: share of targets whose top source is aligned)",
           {.size = train::kTitleFont, .bold = true});
  draw_setting(svg, r.reverse, 170);
  if (r.translator) draw_setting(svg, *r.translator, 170 + row_height);
  return svg.finish();
}

}  // namespace

int run_attribution_demo(const DemoOptions& options, std::ostream& out) {
  check_demo_svg_path(demo_svg_path(options, "attribution"));
  const AttributionDemoResult r = compute_attribution_demo(options.seed, options.checkpoint, options.corpora);
  print_heading(out, "attention beside attribution / 注意力与归因");
  out << "reverse-task model: final training loss " << fixed(r.reverse_loss, 4) << "\n";
  print_setting(r.reverse, out);
  if (r.translator) print_setting(*r.translator, out);
  else out << "(no --checkpoint: the translator part is skipped; give a Multi30k de-en run's checkpoint / 未给出 --checkpoint，跳过翻译模型部分)\n";
  for (const auto& [claim, held] : r.claims) out << (held ? "  holds: " : "  DOES NOT HOLD: ") << claim << "\n";
  out << verdict(r.claim_holds) << "\n";
  save_demo_svg(options, "attribution", attribution_svg(r), out);
  return r.claim_holds ? 0 : 1;
}

Json attribution_json(const AttributionDemoResult& r) {
  std::vector<Json> series = {bar_series(bilingual("reverse task", "反转任务"), r.reverse.agreement)};
  if (r.translator) series.push_back(bar_series(bilingual("translator (hand alignments)", "翻译模型（人工对齐）"), r.translator->agreement));
  Json figures = {bars_figure(bilingual("share of target tokens whose most-credited source token is the aligned one",
                                        "得分最高的源端词元正是对齐词元的目标词元比例"),
                              r.reverse.methods, std::move(series), false)};
  for (const AttributionSetting* s : {&r.reverse, r.translator ? &*r.translator : nullptr}) {
    if (!s) continue;
    std::vector<std::vector<Json>> heads;
    for (std::size_t h = 0; h < s->heads.size(); ++h) heads.push_back({s->heads[h], s->head_agreement[h], s->head_importance[h]});
    figures.push_back(table_figure(bilingual(s->name + ": each cross-attention head", s->name + "：每个交叉注意力头"),
                                   {bilingual("head (decoder layer, head)", "头（解码器层，头）"), bilingual("its attention's agreement", "其注意力的一致率"),
                                    bilingual("drop of log p when zeroed", "置零后 log p 的下降")},
                                   heads));
    const std::vector<std::string> rows(s->target.begin(), s->target.begin() + static_cast<std::ptrdiff_t>(s->truth.size()));
    figures.push_back(heatmap_figure(bilingual(s->name + ", first sentence: the true alignment", s->name + "，第一句：真实对齐"), rows,
                                     s->source, s->truth));
    for (const auto& [method, m] : s->maps)
      figures.push_back(heatmap_figure(bilingual(s->name + ": " + method, s->name + "：" + method), rows, s->source, m,
                                       method == "gradient x input" || method == "integrated gradients"));
  }
  std::vector<std::vector<Json>> claims;
  for (const auto& [claim, held] : r.claims) claims.push_back({claim, held ? bilingual("holds", "成立") : bilingual("does NOT hold", "不成立")});
  figures.push_back(table_figure(bilingual("the claims", "结论"), {bilingual("claim", "结论"), bilingual("verdict", "判定")}, claims));
  return {{"held", r.claim_holds},
          {"numbers", {number(bilingual("reverse-task model: final training loss", "反转任务模型的最终训练损失"), r.reverse_loss),
                       number(bilingual("target tokens scored, reverse task", "反转任务中计分的目标词元"), r.reverse.counted),
                       number(bilingual("target tokens scored, translator", "翻译模型中计分的目标词元"),
                              r.translator ? r.translator->counted : std::int64_t{0})}},
          {"figures", std::move(figures)}};
}

Json attribution_report(const DemoOptions& options) {
  return attribution_json(compute_attribution_demo(options.seed, options.checkpoint, options.corpora));
}

}  // namespace sf::lessons
