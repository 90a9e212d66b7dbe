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
#include "nn/decoder_only.h"
#include "nn/encoder_only.h"
#include "nn/seq2seq.h"
#include "train/classroom/plots.h"
#include "train/classroom/svg.h"
#include "train/eval/decode.h"
#include "train/eval/evaluate.h"
#include "train/training_data.h"

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

// The one stack of self-attention layers of a decoder-only or encoder-only model.
const nn::ModuleList<nn::EncoderLayer>& self_attention_layers(const nn::Model& model) {
  if (const auto* d = dynamic_cast<const nn::DecoderOnlyTransformer*>(&model)) return *d->layers;
  if (const auto* e = dynamic_cast<const nn::EncoderOnlyTransformer*>(&model)) return *e->encoder->layers;
  throw std::invalid_argument("attention: no single self-attention stack in a " + std::string(model.type_name()));
}

// The sequence a single-stack model reads for `text`: a decoder-only LM's <s> text; a
// decoder-only translation's prompt <s> text <sep> and its greedy translation; an encoder's text
// (<mask> and the other task symbols as they are written) or, for classify, <cls> a [<sep> b].
std::vector<std::int64_t> single_stack_sequence(const InferenceModel& im, const std::string& text, std::string& continuation) {
  const data::Tokenizer& tok = im.tokenizers->src;
  const std::int64_t max_len = im.config.model.max_len;
  if (im.config.data.task == "classify") {
    const auto tab = text.find('\t');
    return classify_input(tok, text.substr(0, tab), tab == std::string::npos ? "" : text.substr(tab + 1));
  }
  const std::vector<std::int64_t> ids = encode_sentence(tok, text, "--src", im.config.data.task == "translation" ? max_len / 2 - 1 : max_len - 1);
  if (im.config.model.arch == "encoder-only") return encode_with_symbols(tok, text);
  std::vector<std::int64_t> seq{data::kBosId};
  if (im.config.data.task != "translation") return seq.insert(seq.end(), ids.begin(), ids.end()), seq;
  seq = translation_prompt(*im.tokenizers, ids);
  const auto y = greedy_decode(*im.model, from_vector<std::int64_t>(seq, {1, static_cast<std::int64_t>(seq.size())}), DecodeOptions{}).at(0);
  continuation = tok.decode(y);
  seq.insert(seq.end(), y.begin(), y.end());
  return seq;
}

// A decoder-only or encoder-only model: its one stack's self-attention over one sequence.
AttentionFigures single_stack_figures(const InferenceModel& im, const std::string& text) {
  const nn::Model& model = *im.model;
  AttentionFigures fig;
  const std::vector<std::int64_t> seq = single_stack_sequence(im, text, fig.translation);
  if (static_cast<std::int64_t>(seq.size()) > model.config().max_len)
    throw std::invalid_argument("attention: the sequence is " + std::to_string(seq.size()) + " tokens, more than model.max_len " +
                                std::to_string(model.config().max_len));
  fig.source_pieces = fig.decoder_inputs = pieces_of(im.tokenizers->src, seq);
  const bool causal = model.config().arch == nn::Arch::DecoderOnly;
  NoGradGuard no_grad;
  const Tensor ids = from_vector<std::int64_t>(seq, {1, static_cast<std::int64_t>(seq.size())});  // (1,T)
  std::vector<Heatmap> maps;
  const auto& layers = self_attention_layers(model);
  for (const auto& layer : layers) layer->self_attn->capture_weights = true;
  causal ? model.forward(Tensor(), ids) : model.forward(ids, Tensor());
  std::size_t l = 0;
  for (const auto& layer : layers) {
    add_head_maps(maps, layer->self_attn->last_weights, l++, fig.source_pieces, fig.source_pieces);  // (1,H,T,T)
    layer->self_attn->capture_weights = false;
    layer->self_attn->last_weights = Tensor();
  }
  fig.produced = fig.source_pieces;
  const std::string title = causal ? "Causal self-attention (decoder-only), row = position reading the token"
                                   : "Bidirectional self-attention (encoder-only), row = position";
  fig.self_svg = heatmaps_with_sentence(maps, static_cast<int>(model.config().n_heads), title, text, fig.translation,
                                        fig.translation.empty() ? "" : " (greedy)");
  return fig;
}

}  // namespace

AttentionFigures attention_figures(const InferenceModel& im, const std::string& source,
                                   const std::optional<std::string>& target) {
  const auto* encoder_decoder = dynamic_cast<const nn::Seq2SeqTransformer*>(im.model.get());
  if (!encoder_decoder) {
    if (target) throw std::invalid_argument("attention: --tgt is for an encoder-decoder; a " + im.config.model.arch +
                                            " model reads one sequence (--src)");
    return single_stack_figures(im, source);
  }
  const nn::Seq2SeqTransformer& model = *encoder_decoder;
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
