// `scratchformer attention` (attention_figures.h): decode one sentence, run the decoder once more
// with every attention layer keeping its weights, and draw them, one map per layer and head.
//
// Letters: S source length, T target length (+1 for BOS / EOS), H heads.
#include "train/classroom/attention_figures.h"

#include <algorithm>
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

// Sets capture_weights on every attention of the model (encoder self-attention, decoder self-
// and cross-attention) while it lives, and clears it (and the captured tensors) again afterwards.
class CaptureAttention {
 public:
  explicit CaptureAttention(const nn::Seq2SeqTransformer& model) : model_(model) { set(true); }
  ~CaptureAttention() { set(false); }
  CaptureAttention(const CaptureAttention&) = delete;
  CaptureAttention& operator=(const CaptureAttention&) = delete;

 private:
  void set(bool on) {
    std::vector<nn::MultiHeadAttention*> all;
    for (const auto& layer : *model_.encoder->layers) all.push_back(layer->self_attn.get());
    for (const auto& layer : *model_.decoder->layers) all.insert(all.end(), {layer->self_attn.get(), layer->cross_attn.get()});
    for (nn::MultiHeadAttention* m : all) {
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

// weights (1,H,Tq,Tk) -> head h's map (Tq,Tk), titled `title`.
Heatmap head_map(const Tensor& weights, std::int64_t h, const std::string& title, const std::vector<std::string>& rows,
                 const std::vector<std::string>& cols) {
  const std::int64_t Tq = weights.size(2), Tk = weights.size(3);
  return Heatmap{title, rows, cols, reshape(contiguous(narrow(weights, 1, h, 1)), {Tq, Tk})};  // (Tq,Tk)
}

std::string layer_head(std::size_t layer, std::int64_t h) {
  return "layer " + std::to_string(layer + 1) + ", head " + std::to_string(h + 1);
}

// weights (1,H,Tq,Tk) -> one Heatmap per head, titled "layer L, head h".
void add_head_maps(std::vector<Heatmap>& maps, const Tensor& weights, std::size_t layer,
                   const std::vector<std::string>& rows, const std::vector<std::string>& cols) {
  for (std::int64_t h = 0; h < weights.size(1); ++h) maps.push_back(head_map(weights, h, layer_head(layer, h), rows, cols));
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
AttentionFigures single_stack_figures(const InferenceModel& im, const std::string& text, std::int64_t pad) {
  const nn::Model& model = *im.model;
  AttentionFigures fig;
  std::vector<std::int64_t> seq = single_stack_sequence(im, text, fig.translation);
  seq.insert(seq.end(), static_cast<std::size_t>(pad), data::kPadId);  // as a batch pads a shorter row
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

// The maps of one encoder-decoder pass over `src` (1,S) and `tgt_in` (1,T), every attention
// capturing its weights: the encoder's self-attention (S x S), the decoder's self-attention
// (T x T) and cross-attention (T x S), per layer and head, and the overview pairs.
struct EncoderDecoderMaps {
  std::vector<Heatmap> encoder, self, cross, overview;
};
EncoderDecoderMaps encoder_decoder_maps(const nn::Seq2SeqTransformer& model, const Tensor& src, const Tensor& tgt_in,
                                        const AttentionFigures& fig) {
  EncoderDecoderMaps maps;
  CaptureAttention capture(model);
  const auto enc = model.encode(src);
  model.decode(tgt_in, enc);  // the full decoder, no cache
  const auto& enc_layers = *model.encoder->layers;
  const auto& dec_layers = *model.decoder->layers;
  for (std::size_t l = 0; l < enc_layers.size(); ++l)
    add_head_maps(maps.encoder, enc_layers[l].self_attn->last_weights, l, fig.source_pieces, fig.source_pieces);  // (1,H,S,S)
  for (std::size_t l = 0; l < dec_layers.size(); ++l) {
    add_head_maps(maps.cross, dec_layers[l].cross_attn->last_weights, l, fig.produced, fig.source_pieces);  // (1,H,T,S)
    add_head_maps(maps.self, dec_layers[l].self_attn->last_weights, l, fig.produced, fig.decoder_inputs);   // (1,H,T,T)
  }
  for (std::size_t l = 0; l < std::min(enc_layers.size(), dec_layers.size()); ++l) {
    maps.overview.push_back(head_map(enc_layers[l].self_attn->last_weights, 0, "encoder " + layer_head(l, 0) + ": bidirectional",
                                     fig.source_pieces, fig.source_pieces));
    maps.overview.push_back(head_map(dec_layers[l].self_attn->last_weights, 0, "decoder " + layer_head(l, 0) + ": causal",
                                     fig.produced, fig.decoder_inputs));
  }
  return maps;
}

// The decoder's input BOS y1 .. yn and what each position produces, y1 .. yn EOS (the last token
// of y instead of EOS when the length limit, not EOS, ended the greedy translation).
void decoder_rows(const Tokenizers& tok, const std::vector<std::int64_t>& y, bool ends_with_eos,
                  std::vector<std::int64_t>& tgt_in, AttentionFigures& fig) {
  tgt_in = {data::kBosId};
  tgt_in.insert(tgt_in.end(), y.begin(), ends_with_eos ? y.end() : y.end() - 1);
  std::vector<std::int64_t> produced(tgt_in.begin() + 1, tgt_in.end());
  produced.push_back(ends_with_eos ? data::kEosId : y.back());
  fig.decoder_inputs = pieces_of(tok.tgt, tgt_in);
  fig.produced = pieces_of(tok.tgt, produced);
}

}  // namespace

AttentionFigures attention_figures(const InferenceModel& im, const std::string& source,
                                   const std::optional<std::string>& target, std::int64_t pad) {
  if (pad < 0) throw std::invalid_argument("attention: --pad must be >= 0, got " + std::to_string(pad));
  const auto* encoder_decoder = dynamic_cast<const nn::Seq2SeqTransformer*>(im.model.get());
  if (!encoder_decoder) {
    if (target) throw std::invalid_argument("attention: --tgt is for an encoder-decoder; a " + im.config.model.arch +
                                            " model reads one sequence (--src)");
    return single_stack_figures(im, source, pad);
  }
  const nn::Seq2SeqTransformer& model = *encoder_decoder;
  const Tokenizers& tok = *im.tokenizers;
  const std::int64_t limit = im.config.model.max_len - 2;
  std::vector<std::int64_t> src_ids = encode_sentence(tok.src, source, "--src", limit);
  const auto S = static_cast<std::int64_t>(src_ids.size());
  if (S + pad > im.config.model.max_len)
    throw std::invalid_argument("attention: --src (" + std::to_string(S) + " tokens) and --pad " + std::to_string(pad) +
                                " are more than model.max_len " + std::to_string(im.config.model.max_len));
  NoGradGuard no_grad;
  AttentionFigures fig;
  // y: the target tokens (no BOS/EOS); ends_with_eos: whether the last decoder position produces EOS
  std::vector<std::int64_t> y;
  bool ends_with_eos = true;
  if (target) {
    y = encode_sentence(tok.tgt, *target, "--tgt", limit);
    fig.teacher_forced = true;
  } else {
    DecodeOptions opt;  // greedy, with the KV cache (fast), from the unpadded source; the weights come from the pass below
    y = greedy_decode(model, from_vector<std::int64_t>(src_ids, {1, S}), opt).at(0);
    // Stopped by the length limit instead of EOS: the last generated token is then a row of its own.
    ends_with_eos = static_cast<std::int64_t>(y.size()) < max_target_length(model, S, opt);
  }
  fig.translation = tok.tgt.decode(y);
  std::vector<std::int64_t> tgt_in;
  decoder_rows(tok, y, ends_with_eos, tgt_in, fig);
  src_ids.insert(src_ids.end(), static_cast<std::size_t>(pad), data::kPadId);  // as a batch pads a shorter row
  fig.source_pieces = pieces_of(tok.src, src_ids);

  const auto T = static_cast<std::int64_t>(tgt_in.size());
  const EncoderDecoderMaps maps = encoder_decoder_maps(model, from_vector<std::int64_t>(src_ids, {1, S + pad}),
                                                       from_vector<std::int64_t>(tgt_in, {1, T}), fig);
  const int heads = static_cast<int>(model.config().n_heads);
  const std::string how = fig.teacher_forced ? " (given)" : " (greedy)";
  fig.cross_svg = heatmaps_with_sentence(maps.cross, heads, "Cross-attention, rows = token produced", source,
                                         fig.translation, how);
  fig.self_svg = heatmaps_with_sentence(maps.self, heads, "Masked self-attention, rows = token produced", source,
                                        fig.translation, how);
  fig.encoder_svg = heatmaps_with_sentence(maps.encoder, heads, "Encoder self-attention (bidirectional), rows = source position",
                                           source, fig.translation, how);
  fig.overview_svg = heatmaps_with_sentence(maps.overview, 2, "Bidirectional (encoder) beside causal (decoder), head 1", source,
                                            fig.translation, how);
  return fig;
}

}  // namespace sf::train
