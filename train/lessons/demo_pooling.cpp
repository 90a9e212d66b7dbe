// Demo `pooling`: see demo_pooling.h for what is computed and how.
//
// Letters: B sentences, S padded length, T a sentence's own length, D d_model.
#include "train/lessons/demo_pooling.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "nn/attention.h"
#include "nn/encoder_only.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"
#include "train/data_folder.h"  // corpora_dir: the shipped corpora, found at run time

namespace sf::lessons {
namespace {

constexpr std::int64_t kPadId = 0;
constexpr std::size_t kMinWords = 5;  // both sentences of a pair have at least this many words

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("demo pooling: cannot read " + path +
                             " (expected the shipped Tatoeba corpus there; point the demo's corpora folder at data/corpora)");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Lower-cased words (letters, digits, apostrophes) and single punctuation characters.
std::vector<std::string> word_tokens(const std::string& text) {
  std::vector<std::string> tokens;
  std::string word;
  for (const char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '\'') {
      word += static_cast<char>(std::tolower(u));
      continue;
    }
    if (!word.empty()) tokens.push_back(word), word.clear();
    if (!std::isspace(u)) tokens.emplace_back(1, c);
  }
  if (!word.empty()) tokens.push_back(word);
  return tokens;
}

std::size_t word_count(const std::string& text) {
  std::size_t n = 0;
  for (const std::string& t : word_tokens(text)) n += std::isalnum(static_cast<unsigned char>(t[0])) ? 1 : 0;
  return n;
}

// The first `count` Chinese sentences (in file order) with two different English translations of
// kMinWords words or more: sentences [2i] and [2i+1].
std::vector<PoolingSentence> paraphrase_pairs(const std::string& corpora, std::int64_t count) {
  const std::string dir = train::corpora_dir(corpora) + "/tatoeba-cmn-eng/";
  const std::vector<std::string> en = read_lines(dir + "train.en"), zh = read_lines(dir + "train.zh");
  if (en.size() != zh.size())
    throw std::runtime_error("demo pooling: " + dir + "train.en has " + std::to_string(en.size()) +
                             " lines but train.zh has " + std::to_string(zh.size()));
  std::map<std::string, std::size_t> first;  // Chinese sentence -> line of its first English one
  std::vector<PoolingSentence> out;
  for (std::size_t i = 0; i < en.size() && static_cast<std::int64_t>(out.size()) < 2 * count; ++i) {
    const auto [it, inserted] = first.emplace(zh[i], i);
    if (inserted || it->second == SIZE_MAX || en[it->second] == en[i]) continue;
    if (word_count(en[it->second]) >= kMinWords && word_count(en[i]) >= kMinWords) {
      out.push_back({en[it->second], word_tokens(en[it->second])});
      out.push_back({en[i], word_tokens(en[i])});
      it->second = SIZE_MAX;  // one pair per Chinese sentence
    }
  }
  if (static_cast<std::int64_t>(out.size()) < 2 * count)
    throw std::runtime_error("demo pooling: expected " + std::to_string(count) + " paraphrase pairs in " + dir +
                             "train.en, found " + std::to_string(out.size() / 2));
  return out;
}

// ids (B,S) int64 of the sentences, padded to `length`; fills `vocab` (token -> id, <pad> = 0).
Tensor encode_batch(const std::vector<PoolingSentence>& sentences, std::int64_t length,
                    std::map<std::string, std::int64_t>& vocab) {
  std::vector<std::int64_t> ids;
  for (const PoolingSentence& s : sentences) {
    for (const std::string& t : s.tokens) ids.push_back(vocab.emplace(t, static_cast<std::int64_t>(vocab.size()) + 1).first->second);
    ids.insert(ids.end(), static_cast<std::size_t>(length) - s.tokens.size(), kPadId);
  }
  return from_vector(ids, {static_cast<std::int64_t>(sentences.size()), length});
}

nn::ModelConfig pooling_config(std::int64_t vocab, std::int64_t max_len) {
  nn::ModelConfig cfg;
  cfg.arch = nn::Arch::EncoderOnly;
  cfg.src_vocab = cfg.tgt_vocab = vocab;
  cfg.d_model = 64;
  cfg.n_heads = 4;
  cfg.d_ff = 128;
  cfg.encoder_layers = 2;
  cfg.dropout = 0;
  cfg.max_len = max_len;
  cfg.pad_id = kPadId;
  cfg.pooling = nn::Pooling::Mean;
  return cfg;
}

// Attention pooling. h (B,S,D), ids (B,S), query (D) -> the weights (B,S) (pads 0) and v (B,D).
std::pair<Tensor, Tensor> attention_pool(const Tensor& h, const Tensor& ids, const Tensor& query) {
  const std::int64_t b = h.size(0), s = h.size(1), d = h.size(2);
  const Tensor q = expand(reshape(query, {1, 1, 1, d}), {b, 1, 1, d});                 // (B,H=1,Tq=1,D)
  const Tensor keys = unsqueeze(h, 1);                                                   // (B,1,S,D)
  const Tensor w = nn::attention_weights(q, keys, nn::padding_mask(ids, kPadId));      // (B,1,1,S)
  const Tensor v = squeeze(squeeze(matmul(w, keys), 1), 1);                              // (B,1,1,D) -> (B,D)
  return {reshape(w, {b, s}), v};
}

// max |a - b| over all elements of two tensors of the same shape
double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.contiguous().to_vector<double>(), y = b.contiguous().to_vector<double>();
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

double cosine(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  return ab / std::sqrt(aa * bb);
}

std::vector<double> row(const Tensor& x, std::int64_t r) { return narrow(x, 0, r, 1).contiguous().to_vector<double>(); }

// The weight checks: mean pooling against the plain average, the attention weights' sums and pads.
void check_weights(const Tensor& h, const Tensor& ids, const Tensor& mean_v, const Tensor& att_w,
                   PoolingDemoResult& r) {
  const std::vector<std::int64_t> id = ids.to_vector<std::int64_t>();
  const std::vector<double> w = att_w.contiguous().to_vector<double>();
  const std::int64_t b_count = h.size(0), s = h.size(1);
  for (std::int64_t b = 0; b < b_count; ++b) {
    const std::int64_t t = static_cast<std::int64_t>(r.sentences[b].tokens.size());
    const Tensor manual = mean(narrow(narrow(h, 0, b, 1), 1, 0, t), {1});  // (1,D): the unpadded rows only
    r.mean_vs_manual = std::max(r.mean_vs_manual, max_abs_diff(manual, narrow(mean_v, 0, b, 1)));
    double total = 0;
    for (std::int64_t j = 0; j < s; ++j) {
      total += w[b * s + j];
      if (id[b * s + j] == kPadId) r.attention_on_pads = std::max(r.attention_on_pads, std::abs(w[b * s + j]));
    }
    r.attention_sum_error = std::max(r.attention_sum_error, std::abs(total - 1));
  }
  for (std::int64_t j = 0; j < s; ++j) {
    r.mean_weights.push_back(id[j] == kPadId ? 0.0 : 1.0 / static_cast<double>(r.sentences[0].tokens.size()));
    r.attention_weights.push_back(w[j]);
  }
}

}  // namespace

PoolingDemoResult compute_pooling_demo(std::uint64_t seed, const std::string& corpora, std::int64_t pairs) {
  PoolingDemoResult r;
  r.sentences = paraphrase_pairs(corpora, pairs);
  std::size_t longest = 0;
  for (const PoolingSentence& s : r.sentences) longest = std::max(longest, s.tokens.size());
  r.padded_length = static_cast<std::int64_t>(longest) + kPoolingExtraPads;
  std::map<std::string, std::int64_t> vocab;
  const Tensor ids = encode_batch(r.sentences, r.padded_length, vocab);  // (B,S)
  r.vocab = static_cast<std::int64_t>(vocab.size()) + 1;

  NoGradGuard no_grad;
  Generator init(seed);
  const nn::ModelConfig cfg = pooling_config(r.vocab, r.padded_length + 8);
  nn::EncoderOnlyTransformer model(cfg, init, Dtype::Float64);
  model.eval();
  const Tensor query = randn({cfg.d_model}, init, Dtype::Float64);  // the (untrained) pooling query
  const Tensor h = model.encode(ids);                                 // (B,S,D)
  const Tensor mean_v = model.pool(h, ids);                           // (B,D)
  const auto [att_w, att_v] = attention_pool(h, ids, query);          // (B,S), (B,D)
  check_weights(h, ids, mean_v, att_w, r);

  // Padding: sentence 0 alone (S = T) and with 8 more pads than in the batch.
  for (const std::int64_t length : {static_cast<std::int64_t>(r.sentences[0].tokens.size()), r.padded_length + 8}) {
    const Tensor one = encode_batch({r.sentences[0]}, length, vocab);  // (1,length), the same ids
    const Tensor h1 = model.encode(one);
    r.mean_padding_change = std::max(r.mean_padding_change, max_abs_diff(model.pool(h1, one), narrow(mean_v, 0, 0, 1)));
    r.attention_padding_change =
        std::max(r.attention_padding_change, max_abs_diff(attention_pool(h1, one, query).second, narrow(att_v, 0, 0, 1)));
  }

  for (std::int64_t i = 0; i < pairs; ++i) r.pairs.push_back({2 * i, 2 * i + 1, true});
  for (std::int64_t i = 0; i < pairs; ++i) r.pairs.push_back({2 * i, 2 * ((i + 1) % pairs) + 1, false});
  for (auto& p : r.pairs) {
    p.mean_cosine = cosine(row(mean_v, p.a), row(mean_v, p.b));
    p.attention_cosine = cosine(row(att_v, p.a), row(att_v, p.b));
  }
  r.claim_holds = r.mean_vs_manual < kPoolingTolerance && r.attention_sum_error < kPoolingTolerance &&
                  r.attention_on_pads == 0 && r.mean_padding_change < kPoolingTolerance &&
                  r.attention_padding_change < kPoolingTolerance;
  return r;
}

namespace {

void print_pooling(const PoolingDemoResult& r, std::ostream& out) {
  out << "Sentence vectors: mean pooling vs attention pooling / 句向量：平均池化与注意力池化\n"
      << "  " << r.sentences.size() << " real sentences (Tatoeba: pairs of English translations of one Chinese sentence), "
      << "word-level vocabulary of " << r.vocab << " tokens (<pad> = 0)\n"
      << "  encoder-only model, D 64, 4 heads, 2 layers, float64, RANDOM INIT (untrained); attention pooling query "
      << "drawn at random\n\n  weights over \"" << r.sentences[0].text << "\" (padded to " << r.padded_length << "):\n"
      << "    position  token        mean    attention\n";
  for (std::size_t j = 0; j < r.mean_weights.size(); ++j) {
    const std::string token = j < r.sentences[0].tokens.size() ? r.sentences[0].tokens[j] : "<pad>";
    out << "    " << std::setw(8) << j << "  " << std::left << std::setw(10) << token << std::right << std::fixed
        << std::setprecision(4) << std::setw(7) << r.mean_weights[j] << std::setw(12) << r.attention_weights[j] << "\n";
  }
  out << "    (cls pooling would put weight 1 on position 0)\n\n"
      << "  checks over all " << r.sentences.size() << " sentences (tolerance " << sci(kPoolingTolerance) << "):\n"
      << "    mean pooling vs the average of the unpadded token vectors: max diff " << sci(r.mean_vs_manual) << "\n"
      << "    attention weights: max |sum - 1| " << sci(r.attention_sum_error) << ", largest weight on a pad "
      << sci(r.attention_on_pads) << "\n"
      << "    sentence 0 alone or with 8 more pads: mean pooled vector changes by " << sci(r.mean_padding_change)
      << ", attention pooled by " << sci(r.attention_padding_change) << "\n\n"
      << "  cosine similarity of pooled vectors (printed, not claimed: a random encoder mostly sees shared words)\n"
      << "    kind        mean   attention   sentences\n";
  for (const auto& p : r.pairs)
    out << "    " << std::left << std::setw(10) << (p.paraphrase ? "paraphrase" : "unrelated") << std::right
        << std::setw(7) << std::setprecision(3) << p.mean_cosine << std::setw(12) << p.attention_cosine << "   \""
        << r.sentences[p.a].text << "\" / \"" << r.sentences[p.b].text << "\"\n";
  double sums[2] = {0, 0};  // mean-pooling cosines: paraphrases, unrelated
  for (const auto& p : r.pairs) sums[p.paraphrase ? 0 : 1] += p.mean_cosine;
  out << "    average (mean pooling): paraphrases " << sums[0] / static_cast<double>(r.pairs.size() / 2)
      << ", unrelated " << sums[1] / static_cast<double>(r.pairs.size() - r.pairs.size() / 2) << "\n";
  out << (r.claim_holds ? "claim holds / 结论成立\n" : "claim does NOT hold / 结论不成立\n");
}

void write_pooling_svg(const PoolingDemoResult& r, const std::string& path) {
  const std::size_t n = r.mean_weights.size();
  const double plot_w = std::max(560.0, 56.0 * static_cast<double>(n));
  train::SvgWriter svg(plot_w + 140, 420);
  svg.text(20, 26, "Pooling weights over one sentence's tokens / 一个句子各词的池化权重",
           {.size = train::kTitleFont, .bold = true});
  double top = 0;
  for (std::size_t j = 0; j < n; ++j) top = std::max({top, r.mean_weights[j], r.attention_weights[j]});
  const train::Axis slots{0, static_cast<double>(n), 1, {}};
  const train::Frame f{70, 70, plot_w, 250, slots, train::make_axis(0, top, 4)};
  train::draw_frame(svg, f, "", "weight", "\"" + r.sentences[0].text + "\": mean (blue) vs attention (orange)");
  for (std::size_t j = 0; j < n; ++j) {
    const double x = static_cast<double>(j);
    const std::string token = j < r.sentences[0].tokens.size() ? r.sentences[0].tokens[j] : "<pad>";
    svg.rect(f.px(x + 0.12), f.py(r.mean_weights[j]), f.px(x + 0.5) - f.px(x + 0.12),
             f.py(0) - f.py(r.mean_weights[j]), {.fill = "#1f77b4", .css_class = "mean"},
             token + ": mean " + train::short_value(r.mean_weights[j]));
    svg.rect(f.px(x + 0.5), f.py(r.attention_weights[j]), f.px(x + 0.88) - f.px(x + 0.5),
             f.py(0) - f.py(r.attention_weights[j]), {.fill = "#ff7f0e", .css_class = "attention"},
             token + ": attention " + train::short_value(r.attention_weights[j]));
    svg.text(f.px(x + 0.5), f.y + f.h + 16, token,
             {.size = train::kTickFont, .anchor = "middle", .fill = token == "<pad>" ? "#999999" : "#222222"});
  }
  svg.text(70, f.y + f.h + 46, "mean: 1/T on each of the T tokens; attention: softmax(q . h_t / sqrt(D)), pads masked",
           {.size = train::kTickFont});
  svg.text(70, f.y + f.h + 62, "random-init encoder and query: the mechanism (weights sum to 1, 0 on pads), not learned importance",
           {.size = train::kTickFont});
  train::write_file_atomically(path, svg.finish());
}

}  // namespace

int run_pooling_demo(const DemoOptions& options, std::ostream& out) {
  const PoolingDemoResult r = compute_pooling_demo(options.seed, options.corpora);
  print_pooling(r, out);
  const std::string path = demo_svg_path(options, "pooling");
  write_pooling_svg(r, path);
  out << "SVG written to / 图已写入: " << path << "\n";
  return r.claim_holds ? 0 : 1;
}

Json pooling_report(const DemoOptions& options) {
  const PoolingDemoResult r = compute_pooling_demo(options.seed, options.corpora);
  std::vector<std::string> positions;
  const std::vector<std::string>& tokens = r.sentences.front().tokens;
  for (std::size_t t = 0; t < r.mean_weights.size(); ++t) positions.push_back(t < tokens.size() ? tokens[t] : "<pad>");
  std::vector<std::vector<Json>> pairs;
  for (const PoolingDemoResult::Pair& p : r.pairs)
    pairs.push_back({r.sentences[static_cast<std::size_t>(p.a)].text, r.sentences[static_cast<std::size_t>(p.b)].text,
                     p.paraphrase ? bilingual("paraphrase", "同义") : bilingual("unrelated", "无关"), p.mean_cosine, p.attention_cosine});
  return {{"held", r.claim_holds},
          {"numbers", {number(bilingual("max |mean pooling - average of the tokens|", "max |平均池化 - 词向量的平均|"), r.mean_vs_manual),
                       number(bilingual("max |sum of attention weights - 1|", "max |注意力权重之和 - 1|"), r.attention_sum_error),
                       number(bilingual("largest attention weight on padding", "落在填充位置上的最大权重"), r.attention_on_pads)}},
          {"figures", {bars_figure(bilingual("sentence 0: each position's weight in the sentence vector", "第 0 句：每个位置在句向量中的权重"),
                                   positions,
                                   {bar_series(bilingual("mean pooling", "平均池化"), r.mean_weights),
                                    bar_series(bilingual("attention pooling", "注意力池化"), r.attention_weights)},
                                   false),
                       table_figure(bilingual("cosine similarity of sentence vectors", "句向量的余弦相似度"),
                                    {bilingual("sentence a", "句子 a"), bilingual("sentence b", "句子 b"), bilingual("pair", "关系"),
                                     bilingual("mean pooling", "平均池化"), bilingual("attention pooling", "注意力池化")},
                                    pairs)}}};
}

}  // namespace sf::lessons
