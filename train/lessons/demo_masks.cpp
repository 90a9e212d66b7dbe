// Demo `masks` (demo_masks.h): the padding and causal masks of a real batch.
#include "train/lessons/demo_masks.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <set>
#include <sstream>

#include "autograd/generator.h"
#include "autograd/ops.h"
#include "data/corpus.h"
#include "nn/attention.h"
#include "train/classroom/svg.h"
#include "train/lessons/demo.h"
#include "train/data_folder.h"  // corpora_dir: the shipped corpora, found at run time

namespace sf::lessons {

namespace {

constexpr std::int64_t kMaxWords = 10, kDh = 8;
constexpr std::int64_t kPad = 0;  // the id of "<pad>"

std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// rows of tokens -> (B, L) ids padded with kPad, ids from `vocab` (grown as words come).
Tensor padded_ids(std::vector<std::vector<std::string>>& rows, std::vector<std::string>& vocab) {
  std::size_t L = 0;
  for (const auto& r : rows) L = std::max(L, r.size());
  std::vector<std::int64_t> ids;
  for (auto& r : rows) {
    for (const std::string& w : r) {
      auto it = std::find(vocab.begin(), vocab.end(), w);
      if (it == vocab.end()) it = vocab.insert(vocab.end(), w);
      ids.push_back(it - vocab.begin());
    }
    for (std::size_t i = r.size(); i < L; ++i) ids.push_back(kPad), r.push_back("<pad>");
  }
  return from_vector(ids, {static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(L)});
}

std::vector<std::vector<bool>> bool_rows(const Tensor& m) {  // (R, C) bool
  std::vector<std::vector<bool>> out(m.size(0), std::vector<bool>(m.size(1)));
  for (std::int64_t i = 0; i < m.size(0); ++i)
    for (std::int64_t j = 0; j < m.size(1); ++j) out[i][j] = m.at({i, j}) != 0;
  return out;
}

// attention_weights of random (B,1,Tq,Dh) queries and (B,1,Tk,Dh) keys under `mask`; updates
// the largest weight on a blocked key and the largest row-sum error over the whole batch.
Tensor masked_weights(Generator& gen, std::int64_t B, std::int64_t Tq, std::int64_t Tk, const Tensor& mask,
                      MasksDemoResult& r) {
  const Tensor q = randn({B, 1, Tq, kDh}, gen, Dtype::Float64), k = randn({B, 1, Tk, kDh}, gen, Dtype::Float64);
  const Tensor w = nn::attention_weights(q, k, mask);  // (B,1,Tq,Tk)
  const Tensor blocked = mask.reshape(mask.dim() == 2 ? Shape{1, 1, Tq, Tk} : mask.shape()).expand({B, 1, Tq, Tk}).contiguous();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < Tq; ++i) {
      double sum = 0;
      for (std::int64_t j = 0; j < Tk; ++j) {
        const double v = w.at({b, 0, i, j});
        sum += v;
        if (blocked.at({b, 0, i, j}) != 0) r.max_blocked_weight = std::max(r.max_blocked_weight, std::abs(v));
      }
      r.max_row_sum_error = std::max(r.max_row_sum_error, std::abs(sum - 1));
    }
  return w;
}

std::vector<std::vector<double>> one_row(const Tensor& w, std::int64_t b) {  // (B,1,Tq,Tk) -> (Tq,Tk)
  return matrix_rows(w.narrow(0, b, 1).reshape({w.size(2), w.size(3)}));
}

}  // namespace

MasksDemoResult compute_masks_demo(std::uint64_t seed, const std::string& corpora, std::int64_t batch) {
  const std::string dir = train::corpora_dir(corpora) + "/multi30k/";
  const std::vector<std::string> de = data::read_lines(dir + "train.de"), en = data::read_lines(dir + "train.en");
  MasksDemoResult r;
  std::set<std::size_t> lengths;
  for (std::size_t i = 0; i < de.size() && i < en.size() && static_cast<std::int64_t>(r.src.size()) < batch; ++i) {
    const auto s = words_of(de[i]);
    if (s.empty() || static_cast<std::int64_t>(s.size()) > kMaxWords || !lengths.insert(s.size()).second) continue;
    std::vector<std::string> t = {"<s>"};
    for (const std::string& w : words_of(en[i])) t.push_back(w);
    r.src.push_back(s), r.tgt_in.push_back(t);
  }
  std::vector<std::string> vocab = {"<pad>"};
  const Tensor src = padded_ids(r.src, vocab);
  padded_ids(r.tgt_in, vocab);
  const std::int64_t B = src.size(0), S = src.size(1), T = static_cast<std::int64_t>(r.tgt_in.front().size());
  const Tensor src_pad = nn::padding_mask(src, kPad);  // (B,1,1,S)
  const Tensor causal = nn::causal_mask(T, T);          // (T,T)
  r.src_pad = bool_rows(src_pad.reshape({B, S}));
  r.causal = bool_rows(causal);
  r.pad_mask_matches_tokens = true;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < S; ++i) r.pad_mask_matches_tokens &= r.src_pad[b][i] == (r.src[b][i] == "<pad>");
  Generator gen(seed);
  const Tensor enc = masked_weights(gen, B, S, S, src_pad, r);               // encoder self-attention
  const Tensor dec = masked_weights(gen, B, T, T, causal, r);  // decoder self-attention
  const Tensor cross = masked_weights(gen, B, T, S, src_pad, r);             // cross-attention
  // the shortest sentence: the one with the most padding
  for (std::int64_t b = 0; b < B; ++b)
    if (std::count(r.src_pad[b].begin(), r.src_pad[b].end(), true) > std::count(r.src_pad[r.row].begin(), r.src_pad[r.row].end(), true))
      r.row = b;
  r.encoder_mask.assign(S, r.src_pad[r.row]);
  r.cross_mask.assign(T, r.src_pad[r.row]);
  r.encoder_weights = one_row(enc, r.row), r.decoder_weights = one_row(dec, r.row), r.cross_weights = one_row(cross, r.row);
  r.claim_holds = r.pad_mask_matches_tokens && r.max_blocked_weight == 0.0 && r.max_row_sum_error < 1e-12;
  return r;
}

namespace {

std::vector<std::vector<double>> as_numbers(const std::vector<std::vector<bool>>& m) {
  std::vector<std::vector<double>> out;
  for (const auto& row : m) out.emplace_back(row.begin(), row.end());
  return out;
}

std::vector<std::string> positions(std::size_t n) {
  std::vector<std::string> p;
  for (std::size_t i = 0; i < n; ++i) p.push_back(std::to_string(i));
  return p;
}

std::string masks_svg(const MasksDemoResult& r) {
  const double cell = 26, head = 150;  // head: room for a title and labels turned 45 degrees
  const std::size_t S = r.src.front().size(), T = r.tgt_in.front().size();
  train::SvgWriter svg(140 + cell * (S + T) + 260, 60 + 2 * head + cell * (r.src.size() + T) + 20);
  svg.text(16, 26, "demo masks: a real batch / 一个真实批次的掩码 (1 = blocked / 遮挡)", {.size = train::kTitleFont, .bold = true});
  draw_heatmap(svg, 120, 40 + head, cell, {as_numbers(r.src_pad), positions(r.src.size()), r.src.front(),
                                           "source padding mask (B, S); columns: sentence 0", 0, 1});
  const std::vector<std::string>& tgt = r.tgt_in[static_cast<std::size_t>(r.row)];
  const std::vector<std::string>& src = r.src[static_cast<std::size_t>(r.row)];
  const double y = 40 + head + cell * r.src.size() + head;
  draw_heatmap(svg, 120, y, cell, {r.decoder_weights, tgt, tgt, "decoder self-attention under the causal mask", 0, 1});
  draw_heatmap(svg, 120 + cell * T + 140, y, cell, {r.cross_weights, tgt, src, "cross-attention: no weight on <pad>", 0, 1});
  return svg.finish();
}

}  // namespace

int run_masks_demo(const DemoOptions& options, std::ostream& out) {
  check_demo_svg_path(demo_svg_path(options, "masks"));
  const MasksDemoResult r = compute_masks_demo(options.seed, options.corpora);
  print_heading(out, "the masks of a real batch / 一个真实批次的掩码");
  for (std::size_t b = 0; b < r.src.size(); ++b) {
    out << "sentence " << b << ": ";
    for (std::size_t i = 0; i < r.src[b].size(); ++i) out << r.src[b][i] << (r.src_pad[b][i] ? "[masked] " : " ");
    out << "\n";
  }
  out << "causal mask (T = " << r.causal.size() << "): row i blocks keys j > i / 因果掩码\n";
  for (const auto& row : r.causal) {
    out << "  ";
    for (bool b : row) out << (b ? "x" : ".");
    out << "\n";
  }
  out << "largest weight on a blocked key (encoder, decoder, cross-attention) = " << sci(r.max_blocked_weight)
      << "\nmax |row sum - 1| = " << sci(r.max_row_sum_error) << "\n"
      << verdict(r.claim_holds) << "\n";
  save_demo_svg(options, "masks", masks_svg(r), out);
  return r.claim_holds ? 0 : 1;
}

Json masks_report(const DemoOptions& options) {
  const MasksDemoResult r = compute_masks_demo(options.seed, options.corpora);
  const std::vector<std::string>& tgt = r.tgt_in[static_cast<std::size_t>(r.row)];
  const std::vector<std::string>& src = r.src[static_cast<std::size_t>(r.row)];
  Json pad = masked_heatmap_figure(bilingual("the source padding mask (B, S): hatched = <pad>, blocked for every query",
                                             "源句填充掩码 (B, S)：斜线格是 <pad>，对所有查询都被遮挡"),
                                   positions(r.src.size()), positions(r.src.front().size()), as_numbers(r.src_pad), r.src_pad);
  pad["cells"] = r.src;  // each cell's token
  return {{"held", r.claim_holds},
          {"numbers", {number(bilingual("sentences B", "句子数 B"), static_cast<std::int64_t>(r.src.size())),
                       number(bilingual("largest weight on a blocked key", "被遮挡的键上的最大权重"), r.max_blocked_weight),
                       number(bilingual("max |row sum - 1|", "max |每行之和 - 1|"), r.max_row_sum_error)}},
          {"figures", {std::move(pad),
                       masked_heatmap_figure(bilingual("the causal mask (T, T): row i reads keys 0..i", "因果掩码 (T, T)：第 i 行只读键 0..i"),
                                             tgt, tgt, as_numbers(r.causal), r.causal),
                       masked_heatmap_figure(bilingual("encoder self-attention of the shortest sentence: no weight on <pad>",
                                                       "最短句子的编码器自注意力：<pad> 上的权重为 0"),
                                             src, src, r.encoder_weights, r.encoder_mask),
                       masked_heatmap_figure(bilingual("decoder self-attention under the causal mask", "因果掩码下的解码器自注意力"),
                                             tgt, tgt, r.decoder_weights, r.causal),
                       masked_heatmap_figure(bilingual("cross-attention (target queries, source keys)", "交叉注意力（目标为查询，源句为键）"),
                                             tgt, src, r.cross_weights, r.cross_mask)}}};
}

}  // namespace sf::lessons
