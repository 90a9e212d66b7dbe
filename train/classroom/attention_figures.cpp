// `scratchformer attention` (attention_figures.h): decode one sentence, run the decoder once more
// with every attention layer keeping its weights, and draw them, one map per layer and head.
//
// Letters: S source length, T target length (+1 for BOS / EOS), H heads.
#include "train/classroom/attention_figures.h"

#include <cstdint>
#include <stdexcept>
#include <utility>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "nn/attention.h"
#include "nn/seq2seq.h"
#include "train/classroom/plots.h"
#include "train/classroom/svg.h"
#include "train/eval/decode.h"

namespace sf::train {

namespace {

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
  constexpr double kMargins = 32;  // left margin and some air; the title is set in kTitleFont (svg.h)
  constexpr std::size_t kNone = 0;  // leave the sentence out
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

// The encoder-decoder behind a checkpoint (its decoder's attention layers are drawn).
const nn::Seq2SeqTransformer& encoder_decoder(const InferenceModel& im) {
  const auto* model = dynamic_cast<const nn::Seq2SeqTransformer*>(im.model.get());
  if (!model)
    throw std::invalid_argument(std::string("attention: the checkpoint's model is ") + nn::arch_name(im.model->config().arch) +
                                "; this command needs encoder-decoder");
  return *model;
}

}  // namespace

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

}  // namespace sf::train
