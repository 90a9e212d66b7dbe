#include "train/classroom/classroom.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/batcher.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "nn/attention.h"
#include "nn/positional.h"
#include "nn/seq2seq.h"
#include "train/eval/decode.h"
#include "train/classroom/plots.h"
#include "train/schedule.h"

namespace sf::train {

namespace fs = std::filesystem;

namespace {

// ---- attention ----------------------------------------------------------------------------

// Sets capture_weights on every decoder layer's self- and cross-attention while it lives, and
// clears it (and the captured tensors) again afterwards.
class CaptureDecoderAttention {
 public:
  explicit CaptureDecoderAttention(const nn::Seq2SeqTransformer& model) : model_(model) { set(true); }
  ~CaptureDecoderAttention() { set(false); }
  CaptureDecoderAttention(const CaptureDecoderAttention&) = delete;
  CaptureDecoderAttention& operator=(const CaptureDecoderAttention&) = delete;

 private:
  void set(bool on) {
    for (const auto& layer : *model_.decoder->layers)
      for (nn::MultiHeadAttention* m : {layer->self_attn.get(), layer->cross_attn.get()}) {
        m->capture_weights = on;
        if (!on) m->last_weights = Tensor();
      }
  }
  const nn::Seq2SeqTransformer& model_;
};

// `text` -> token ids, refusing what the model cannot take.
std::vector<std::int64_t> encode_sentence(const data::Tokenizer& tok, const std::string& text, const char* option,
                                          std::int64_t max_tokens) {
  std::size_t bad = 0;
  if (!data::valid_utf8(text, &bad))
    throw std::invalid_argument(std::string("attention: ") + option + " is not valid UTF-8 (byte " +
                                std::to_string(bad + 1) + ")");
  std::vector<std::int64_t> ids = tok.encode(text);
  if (ids.empty()) throw std::invalid_argument(std::string("attention: ") + option + " has no tokens (it is empty)");
  if (static_cast<std::int64_t>(ids.size()) > max_tokens)
    throw std::invalid_argument(std::string("attention: ") + option + " is " + std::to_string(ids.size()) +
                                " tokens, more than the model's limit of " + std::to_string(max_tokens));
  return ids;
}

std::vector<std::string> pieces_of(const data::Tokenizer& tok, const std::vector<std::int64_t>& ids) {
  std::vector<std::string> out;
  for (std::int64_t id : ids) out.push_back(tok.id_to_piece(id));
  return out;
}

// weights (1,H,Tq,Tk) -> one Heatmap per head, titled "layer L, head h".
void add_head_maps(std::vector<Heatmap>& maps, const Tensor& weights, std::size_t layer,
                   const std::vector<std::string>& rows, const std::vector<std::string>& cols) {
  const std::int64_t H = weights.size(1), Tq = weights.size(2), Tk = weights.size(3);
  for (std::int64_t h = 0; h < H; ++h) {
    Heatmap m;
    m.title = "layer " + std::to_string(layer + 1) + ", head " + std::to_string(h + 1);
    m.row_labels = rows;
    m.col_labels = cols;
    m.weights = reshape(contiguous(narrow(weights, 1, h, 1)), {Tq, Tk});  // (Tq,Tk)
    maps.push_back(std::move(m));
  }
}

// At most `n` characters of `text` (whole UTF-8 characters), with "…" when cut.
std::string shorten(const std::string& text, std::size_t n) {
  std::size_t chars = 0, i = 0;
  for (; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (chars == n) return text.substr(0, i) + "…";
      ++chars;
    }
  }
  return text;
}

// The canvas width of an SVG document written by SvgWriter (its viewBox "0 0 W H").
double svg_width(const std::string& svg) {
  const std::string key = "viewBox=\"0 0 ";
  const std::size_t at = svg.find(key);
  return at == std::string::npos ? 0 : std::stod(svg.substr(at + key.size()));
}

// attention_heatmaps_svg titled `prefix` + "source" -> "translation" + `how`, the sentences cut
// short (the translation first, then the source, then both left out) until the title fits the
// canvas, whose width the grid of maps decides.
std::string heatmaps_with_sentence(const std::vector<Heatmap>& maps, int columns, const std::string& prefix,
                                   const std::string& source, const std::string& translation, const std::string& how) {
  constexpr double kTitleFont = 15, kMargins = 32;  // plots.cpp's title size; left margin and some air
  constexpr std::size_t kNone = 0;                  // leave the sentence out
  const std::pair<std::size_t, std::size_t> budgets[] = {{60, 60}, {40, 40}, {30, 20}, {24, 12},
                                                         {24, kNone}, {12, kNone}, {kNone, kNone}};
  std::string svg;
  for (const auto& [src_chars, tgt_chars] : budgets) {
    std::string title = prefix;
    if (src_chars != kNone) title += ": \"" + shorten(source, src_chars) + "\"";
    if (tgt_chars != kNone) title += " \u2192 \"" + shorten(translation, tgt_chars) + "\"" + how;
    svg = attention_heatmaps_svg(maps, columns, title);
    if (text_width(title, kTitleFont) + kMargins <= svg_width(svg)) return svg;
  }
  return svg;
}

// ---- explain-batch ------------------------------------------------------------------------

std::string pad_to(const std::string& s, std::size_t width) {
  const std::size_t w = display_width(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

// Lines of labelled cells aligned in columns, wrapped so no line is much wider than `max_width`:
//   label    cell0  cell1  ...
struct ColumnBlock {
  std::vector<std::string> labels;
  std::vector<std::vector<std::string>> cells;  // cells[line][column]; shorter lines leave blanks

  std::string render(const std::string& indent, std::size_t max_width) const {
    std::size_t label_w = 0, columns = 0;
    for (const auto& l : labels) label_w = std::max(label_w, display_width(l));
    for (const auto& line : cells) columns = std::max(columns, line.size());
    std::vector<std::size_t> col_w(columns, 1);
    for (const auto& line : cells)
      for (std::size_t c = 0; c < line.size(); ++c) col_w[c] = std::max(col_w[c], display_width(line[c]));
    std::ostringstream os;
    std::size_t start = 0;
    while (start < columns) {
      std::size_t end = start, width = indent.size() + label_w + 2;
      while (end < columns && (end == start || width + col_w[end] + 2 <= max_width)) width += col_w[end++] + 2;
      if (start > 0) os << "\n";
      for (std::size_t l = 0; l < labels.size(); ++l) {
        std::string row = indent + pad_to(labels[l], label_w + 2);
        for (std::size_t c = start; c < end; ++c)
          row += pad_to(c < cells[l].size() ? cells[l][c] : "", col_w[c] + 2);
        while (!row.empty() && row.back() == ' ') row.pop_back();
        os << row << "\n";
      }
      start = end;
    }
    return os.str();
  }
};

std::vector<std::string> row_ids_as_pieces(const data::Tokenizer& tok, const Tensor& ids, std::int64_t b) {
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < ids.size(1); ++i) out.push_back(tok.id_to_piece(static_cast<std::int64_t>(ids.at({b, i}))));
  return out;
}

std::vector<std::string> mask_row(const Tensor& mask, std::int64_t b) {  // mask: (B,1,1,L) bool
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < mask.size(3); ++i) out.push_back(mask.at({b, 0, 0, i}) != 0 ? "1" : "0");
  return out;
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

std::string percent(std::int64_t part, std::int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

}  // namespace

std::size_t display_width(const std::string& text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    std::uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (std::size_t k = 1; k < len && i + k < text.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    const bool wide = (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
                      (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
                      (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x20000 && cp <= 0x3FFFD);
    width += wide ? 2 : 1;
    i += len;
  }
  return width;
}

// The encoder-decoder behind a checkpoint (its decoder's attention layers are drawn).
const nn::Seq2SeqTransformer& encoder_decoder(const InferenceModel& im) {
  const auto* model = dynamic_cast<const nn::Seq2SeqTransformer*>(im.model.get());
  if (!model)
    throw std::invalid_argument(std::string("attention: the checkpoint's model is ") + nn::arch_name(im.model->config().arch) +
                                "; this command needs encoder-decoder");
  return *model;
}

AttentionFigures attention_figures(const InferenceModel& im, const std::string& source,
                                   const std::optional<std::string>& target) {
  const nn::Seq2SeqTransformer& model = encoder_decoder(im);
  const Tokenizers& tok = *im.tokenizers;
  const std::int64_t limit = im.config.model.max_len - 2;
  const std::vector<std::int64_t> src_ids = encode_sentence(tok.src, source, "--src", limit);
  const auto S = static_cast<std::int64_t>(src_ids.size());
  NoGradGuard no_grad;
  const Tensor src = from_vector<std::int64_t>(src_ids, {1, S});  // (1,S)

  AttentionFigures fig;
  // y: the target tokens (no BOS/EOS); ends_with_eos: whether the last decoder position produces EOS
  std::vector<std::int64_t> y;
  bool ends_with_eos = true;
  if (target) {
    y = encode_sentence(tok.tgt, *target, "--tgt", limit);
    fig.teacher_forced = true;
  } else {
    DecodeOptions opt;  // greedy, with the KV cache (fast); the weights come from the pass below
    y = greedy_decode(model, src, opt).at(0);
    // Stopped by the length limit instead of EOS: the last generated token is then a row of its own.
    ends_with_eos = static_cast<std::int64_t>(y.size()) < max_target_length(model, S, opt);
  }
  fig.translation = tok.tgt.decode(y);
  // decoder input BOS y1 .. yn, producing y1 .. yn EOS (without the final EOS if the limit was hit)
  std::vector<std::int64_t> tgt_in{data::kBosId};
  tgt_in.insert(tgt_in.end(), y.begin(), ends_with_eos ? y.end() : y.end() - 1);
  std::vector<std::int64_t> produced(tgt_in.begin() + 1, tgt_in.end());
  produced.push_back(ends_with_eos ? data::kEosId : y.back());
  const auto T = static_cast<std::int64_t>(tgt_in.size());

  fig.source_pieces = pieces_of(tok.src, src_ids);
  fig.decoder_inputs = pieces_of(tok.tgt, tgt_in);
  fig.produced = pieces_of(tok.tgt, produced);

  std::vector<Heatmap> cross_maps, self_maps;
  {
    CaptureDecoderAttention capture(model);
    const auto enc = model.encode(src);
    model.decode(from_vector<std::int64_t>(tgt_in, {1, T}), enc);  // the full decoder, no cache
    std::size_t l = 0;
    for (const auto& layer : *model.decoder->layers) {
      add_head_maps(cross_maps, layer->cross_attn->last_weights, l, fig.produced, fig.source_pieces);  // (1,H,T,S)
      add_head_maps(self_maps, layer->self_attn->last_weights, l, fig.produced, fig.decoder_inputs);   // (1,H,T,T)
      ++l;
    }
  }
  const int heads = static_cast<int>(model.config().n_heads);
  const std::string how = fig.teacher_forced ? " (given)" : " (greedy)";
  fig.cross_svg = heatmaps_with_sentence(cross_maps, heads, "Cross-attention, rows = token produced", source,
                                         fig.translation, how);
  fig.self_svg = heatmaps_with_sentence(self_maps, heads, "Masked self-attention, rows = token produced", source,
                                        fig.translation, how);
  return fig;
}

std::string positions_svg(const Config& cfg) {
  const nn::SinusoidalPositional pe(cfg.model.max_len, cfg.model.d_model);
  std::string title = "Sinusoidal positions PE[pos, i], max_len " + std::to_string(cfg.model.max_len) + ", d_model " +
                      std::to_string(cfg.model.d_model);
  if (cfg.model.positional != "sinusoidal")
    title += " (this config uses " + cfg.model.positional + " positions; shown for comparison)";
  return positional_encoding_svg(pe.table(), title);
}

std::string schedule_svg(const Config& cfg) {
  const Schedule schedule{parse_schedule(cfg.train.schedule), cfg.train.lr, cfg.train.min_lr, cfg.train.warmup_steps,
                          cfg.train.max_steps, cfg.model.d_model};
  constexpr std::int64_t kMaxPoints = 2000;  // enough for a smooth curve in a 600 px plot
  const std::int64_t stride = std::max<std::int64_t>(1, cfg.train.max_steps / kMaxPoints);
  std::vector<std::int64_t> steps;
  for (std::int64_t s = 1; s <= cfg.train.max_steps; s += stride) steps.push_back(s);
  steps.push_back(cfg.train.max_steps);
  if (cfg.train.warmup_steps >= 1 && cfg.train.warmup_steps <= cfg.train.max_steps) steps.push_back(cfg.train.warmup_steps);
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  std::vector<double> x, y;
  for (std::int64_t s : steps) {
    x.push_back(static_cast<double>(s));
    y.push_back(schedule.at(s));
  }
  std::ostringstream title;
  title << "Learning-rate schedule: " << cfg.train.schedule << ", lr " << cfg.train.lr << ", warmup "
        << cfg.train.warmup_steps << ", max_steps " << cfg.train.max_steps;
  if (cfg.train.schedule == "noam") title << ", d_model " << cfg.model.d_model;
  return line_chart_svg(x, y, title.str(), "step", "learning rate");
}

std::string explain_batch(const Config& cfg, const ExplainOptions& opt, std::ostream& log) {
  if (opt.batch < 0) throw std::invalid_argument("explain-batch: --batch must be >= 0, got " + std::to_string(opt.batch));
  const fs::path dir(cfg.run.dir);
  const fs::path model_file = dir / (cfg.data.joint_tokenizer ? "spm.model" : "spm.src.model");
  if (!fs::exists(model_file))
    log << "scratchformer: no tokenizer in " << dir.string() << " yet; training one on the training corpus (as `train` would)\n";
  const Tokenizers tok = load_or_train_tokenizers(cfg, static_cast<std::uint64_t>(cfg.train.seed));

  // The training split, read, encoded and filtered exactly as the trainer does.
  data::ParallelCorpus corpus = data::read_parallel(cfg.data.train_src, cfg.data.train_tgt);
  std::vector<std::vector<std::int64_t>> src = tok.src.encode_all(corpus.src), tgt = tok.tgt.encode_all(corpus.tgt);
  const data::FilterReport report = data::filter_pairs(corpus, src, tgt, cfg.data.max_tokens);
  data::Batcher batcher(src, tgt, cfg.data.batch_tokens, static_cast<std::uint64_t>(cfg.train.seed), true);
  const std::int64_t K = batcher.batches_per_epoch();
  if (opt.batch >= K)
    throw std::invalid_argument("explain-batch: --batch " + std::to_string(opt.batch) + " is past the end: epoch 0 has " +
                                std::to_string(K) + " batches (0.." + std::to_string(K - 1) + ")");
  data::Batch batch;
  for (std::int64_t k = 0; k <= opt.batch; ++k) batcher.next(batch);

  const std::int64_t B = batch.rows(), S = batch.src.size(1), T = batch.tgt_in.size(1);
  std::ostringstream os;
  os << "batch " << opt.batch << " of " << K << " in epoch 0 of " << cfg.source_path << " (seed " << cfg.train.seed
     << ", batch_tokens " << cfg.data.batch_tokens << ")";
  if (cfg.train.accum_steps == 1)
    os << ": what training step " << opt.batch + 1 << " learns from\n";
  else
    os << ": part of training step " << opt.batch / cfg.train.accum_steps + 1 << " (accum_steps " << cfg.train.accum_steps
       << ")\n";
  os << "training corpus: " << report.summary(cfg.data.max_tokens) << "; tokenizer " << tok.src.model_path()
     << " (vocabulary " << tok.src.vocab_size() << ")\n";
  os << "shapes: src (" << B << ", " << S << "), tgt_in and tgt_out (" << B << ", " << T << "), src padding mask (" << B
     << ", 1, 1, " << S << "), causal mask (" << T << ", " << T << ")\n\n";

  os << "Teacher forcing: tgt_in is the target shifted right by one, starting with <s>; tgt_out is the target\n"
        "followed by </s>. Position t of the decoder reads tgt_in[0..t] (the causal mask hides the rest) and\n"
        "is trained to predict tgt_out[t], which is tgt_in[t+1]: the true previous token, not the model's guess.\n"
        "Padding (<pad>, mask 1) fills the rows up to the longest one; attention and the loss ignore it.\n";

  const std::int64_t shown = std::min(B, std::max<std::int64_t>(opt.rows, 0));
  for (std::int64_t b = 0; b < shown; ++b) {
    const auto index = static_cast<std::size_t>(batch.indices[static_cast<std::size_t>(b)]);
    os << "\nrow " << b << " (training pair " << index << " after filtering): " << in_quotes(corpus.src[index]) << " -> "
       << in_quotes(corpus.tgt[index]) << "\n";
    ColumnBlock block;
    block.labels = {"position", "src", "src padding", "tgt_in", "tgt_out", "tgt padding"};
    std::vector<std::string> positions;
    for (std::int64_t i = 0; i < std::max(S, T); ++i) positions.push_back(std::to_string(i));
    block.cells = {positions,
                   row_ids_as_pieces(tok.src, batch.src, b),
                   mask_row(batch.src_pad_mask, b),
                   row_ids_as_pieces(tok.tgt, batch.tgt_in, b),
                   row_ids_as_pieces(tok.tgt, batch.tgt_out, b),
                   mask_row(batch.tgt_pad_mask, b)};
    os << block.render("  ", 110);
    if (b == 0) {
      const std::vector<std::string> in = row_ids_as_pieces(tok.tgt, batch.tgt_in, b);
      const std::vector<std::string> out = row_ids_as_pieces(tok.tgt, batch.tgt_out, b);
      os << "  reading row 0 as the decoder does:\n";
      for (std::int64_t t = 0; t < std::min<std::int64_t>(T, 4); ++t) {
        if (out[static_cast<std::size_t>(t)] == tok.tgt.id_to_piece(data::kPadId)) break;
        std::string seen;
        for (std::int64_t j = 0; j <= t; ++j) seen += (j ? " " : "") + in[static_cast<std::size_t>(j)];
        os << "    t=" << t << ": sees " << seen << "  ->  must predict " << out[static_cast<std::size_t>(t)] << "\n";
      }
    }
  }
  if (shown < B) os << "\n(" << B - shown << " more rows; --rows N prints more)\n";

  // The masks as 0/1 rows: the first few rows of the batch, and how many rows hold any padding.
  constexpr std::int64_t kMaskRows = 8;
  const std::int64_t mask_rows = std::min(B, std::max(kMaskRows, shown));
  os << "\npadding masks of the first " << mask_rows << " rows (1 = padding: blocked as a key, ignored by the loss):\n";
  ColumnBlock masks;
  masks.labels = {"row"};
  masks.cells = {{"src_pad_mask", "tgt_pad_mask"}};
  for (std::int64_t b = 0; b < mask_rows; ++b) {
    std::string src_bits, tgt_bits;
    for (const std::string& v : mask_row(batch.src_pad_mask, b)) src_bits += v;
    for (const std::string& v : mask_row(batch.tgt_pad_mask, b)) tgt_bits += v;
    masks.labels.push_back(std::to_string(b));
    masks.cells.push_back({src_bits, tgt_bits});
  }
  os << masks.render("  ", 110);
  std::int64_t padded_rows = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    const auto src_bits = mask_row(batch.src_pad_mask, b), tgt_bits = mask_row(batch.tgt_pad_mask, b);
    padded_rows += std::count(src_bits.begin(), src_bits.end(), "1") + std::count(tgt_bits.begin(), tgt_bits.end(), "1") > 0;
  }
  os << "  " << padded_rows << " of the " << B << " rows hold padding";
  if (padded_rows * 4 < B)
    os << " (few: the batcher sorts pairs by length before cutting batches, so a batch holds similar lengths)";
  os << "\n";

  const std::int64_t n = std::min(T, std::max<std::int64_t>(opt.max_causal, 1));
  os << "\ncausal mask of the decoder self-attention (1 = blocked: a later position)";
  if (n < T) os << ", the first " << n << " of " << T << " positions";
  os << ";\nrow = query position t, column = key position j, blocked where j > t:\n";
  const Tensor causal = nn::causal_mask(n, n);  // (n,n)
  for (std::int64_t i = 0; i < n; ++i) {
    std::string line = "  ";
    for (std::int64_t j = 0; j < n; ++j) line += causal.at({i, j}) != 0 ? "1" : "0";
    os << line << "\n";
  }
  os << "(the decoder's self-attention blocks a key if it is later OR padding: causal mask | target padding mask)\n";

  const std::int64_t src_cells = B * S, tgt_cells = B * T, padded = B * std::max(S, T);
  os << "\ncounts:\n"
     << "  rows (sentence pairs)        " << B << "\n"
     << "  source tokens                " << batch.src_tokens << " of " << src_cells << " cells ("
     << percent(src_cells - batch.src_tokens, src_cells) << " padding)\n"
     << "  target predictions (loss)    " << batch.tgt_tokens << " of " << tgt_cells << " cells ("
     << percent(tgt_cells - batch.tgt_tokens, tgt_cells) << " padding): the target tokens plus one </s> per row\n"
     << "  budget                       rows * max(S, T) = " << B << " * " << std::max(S, T) << " = " << padded
     << " of batch_tokens " << cfg.data.batch_tokens << "\n";
  return os.str();
}

}  // namespace sf::train
