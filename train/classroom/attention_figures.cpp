// `scratchformer attention` (attention_figures.h): decode one sentence, run the decoder once more
// with every attention layer keeping its weights, and draw them, one map per layer and head.
//
// Letters: S source length, T target length (+1 for BOS / EOS), H heads.
#include "train/classroom/attention_figures.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <utility>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "nn/attention.h"
#include "nn/decoder_only.h"
#include "nn/encoder_only.h"
#include "nn/rnn_seq2seq.h"
#include "nn/seq2seq.h"
#include "train/classroom/plots.h"
#include "train/classroom/svg.h"
#include "train/eval/decode.h"
#include "train/eval/evaluate.h"
#include "train/training_data.h"

namespace sf::train {

namespace {

// Sets capture_weights on the given attention layers while it lives, and clears it (and the
// captured tensors) again afterwards.
class CaptureAttention {
 public:
  explicit CaptureAttention(std::vector<nn::MultiHeadAttention*> all) : all_(std::move(all)) { set(true); }
  ~CaptureAttention() { set(false); }
  CaptureAttention(const CaptureAttention&) = delete;
  CaptureAttention& operator=(const CaptureAttention&) = delete;

 private:
  void set(bool on) {
    for (nn::MultiHeadAttention* m : all_) {
      m->capture_weights = on;
      if (!on) m->last_weights = Tensor();
    }
  }
  std::vector<nn::MultiHeadAttention*> all_;
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

// "layer 2, head 3" (both counted from 1), or in Chinese "第 2 层第 3 个头".
std::string layer_head(std::size_t layer, std::int64_t h, Lang lang) {
  const std::string l = std::to_string(layer + 1), head = std::to_string(h + 1);
  return lang == Lang::Zh ? "第 " + l + " 层第 " + head + " 个头" : "layer " + l + ", head " + head;
}

// weights (1,H,Tq,Tk) -> one Heatmap per head, titled "layer L, head h".
void add_head_maps(std::vector<Heatmap>& maps, const Tensor& weights, std::size_t layer,
                   const std::vector<std::string>& rows, const std::vector<std::string>& cols, Lang lang) {
  for (std::int64_t h = 0; h < weights.size(1); ++h)
    maps.push_back(head_map(weights, h, layer_head(layer, h, lang), rows, cols));
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
                                   const std::string& source, const std::string& translation, const std::string& how,
                                   Lang lang) {
  constexpr double kMargins = 32;  // left margin and some air; the title is set in kTitleFont (svg.h)
  constexpr std::size_t kNone = 0;  // leave the sentence out
  const std::pair<std::size_t, std::size_t> budgets[] = {{60, 60}, {40, 40}, {30, 20}, {24, 12},
                                                         {24, kNone}, {12, kNone}, {kNone, kNone}};
  std::string svg;
  for (const auto& [src_chars, tgt_chars] : budgets) {
    std::string title = prefix;
    if (src_chars != kNone) title += text(lang, ": \"", "：\"") + shorten(source, src_chars) + "\"";
    if (tgt_chars != kNone) title += " \u2192 \"" + shorten(translation, tgt_chars) + "\"" + how;
    svg = attention_heatmaps_svg(maps, columns, title, lang);
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
std::vector<std::int64_t> single_stack_sequence(const InferenceModel& im, const std::string& text, const char* option,
                                                std::string& continuation) {
  const data::Tokenizer& tok = im.tokenizers->src;
  const std::int64_t max_len = im.config.model.max_len;
  if (im.config.data.task == "classify") {
    encode_sentence(tok, text, option, max_len - 2);
    const auto tab = text.find('\t');
    return classify_input(tok, text.substr(0, tab), tab == std::string::npos ? "" : text.substr(tab + 1));
  }
  const std::vector<std::int64_t> ids = encode_sentence(tok, text, option, im.config.data.task == "translation" ? max_len / 2 - 1 : max_len - 1);
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
AttentionWeights single_stack_weights(const InferenceModel& im, const std::string& text, std::int64_t pad,
                                      const AttentionInputNames& names) {
  const nn::Model& model = *im.model;
  AttentionWeights w;
  std::vector<std::int64_t> seq = single_stack_sequence(im, text, names.source, w.translation);
  seq.insert(seq.end(), static_cast<std::size_t>(pad), data::kPadId);  // as a batch pads a shorter row
  if (static_cast<std::int64_t>(seq.size()) > model.config().max_len)
    throw std::invalid_argument("attention: the sequence is " + std::to_string(seq.size()) + " tokens, more than model.max_len " +
                                std::to_string(model.config().max_len));
  w.source_pieces = w.decoder_inputs = w.produced = pieces_of(im.tokenizers->src, seq);
  const bool causal = model.config().arch == nn::Arch::DecoderOnly;
  AttentionStack stack{"self", causal, w.source_pieces, w.source_pieces, {}};
  std::vector<nn::MultiHeadAttention*> all;
  for (const auto& layer : self_attention_layers(model)) all.push_back(layer->self_attn.get());
  NoGradGuard no_grad;
  CaptureAttention capture(all);
  const Tensor ids = from_vector<std::int64_t>(seq, {1, static_cast<std::int64_t>(seq.size())});  // (1,T)
  causal ? model.forward(Tensor(), ids) : model.forward(ids, Tensor());
  for (nn::MultiHeadAttention* m : all) stack.layers.push_back(m->last_weights);  // (1,H,T,T)
  w.stacks.push_back(std::move(stack));
  return w;
}

// The decoder's input BOS y1 .. yn and what each position produces, y1 .. yn EOS (the last token
// of y instead of EOS when the length limit, not EOS, ended the greedy translation).
void decoder_rows(const Tokenizers& tok, const std::vector<std::int64_t>& y, bool ends_with_eos,
                  std::vector<std::int64_t>& tgt_in, AttentionWeights& w) {
  tgt_in = {data::kBosId};
  tgt_in.insert(tgt_in.end(), y.begin(), ends_with_eos ? y.end() : y.end() - 1);
  std::vector<std::int64_t> produced(tgt_in.begin() + 1, tgt_in.end());
  produced.push_back(ends_with_eos ? data::kEosId : y.back());
  w.decoder_inputs = pieces_of(tok.tgt, tgt_in);
  w.produced = pieces_of(tok.tgt, produced);
}

// One encoder-decoder pass over `src` (1,S) and `tgt_in` (1,T), every attention capturing its
// weights: the encoder's self-attention (S x S), the decoder's self-attention (T x T) and its
// cross-attention (T x S), per layer.
void encoder_decoder_pass(const nn::Seq2SeqTransformer& model, const Tensor& src, const Tensor& tgt_in, AttentionWeights& w) {
  AttentionStack encoder{"encoder", false, w.source_pieces, w.source_pieces, {}};
  AttentionStack self{"decoder_self", true, w.produced, w.decoder_inputs, {}};
  AttentionStack cross{"cross", false, w.produced, w.source_pieces, {}};
  std::vector<nn::MultiHeadAttention*> all;
  for (const auto& layer : *model.encoder->layers) all.push_back(layer->self_attn.get());
  for (const auto& layer : *model.decoder->layers) all.insert(all.end(), {layer->self_attn.get(), layer->cross_attn.get()});
  CaptureAttention capture(all);
  model.decode(tgt_in, model.encode(src));  // the full decoder, no cache
  for (const auto& layer : *model.encoder->layers) encoder.layers.push_back(layer->self_attn->last_weights);  // (1,H,S,S)
  for (const auto& layer : *model.decoder->layers) {
    self.layers.push_back(layer->self_attn->last_weights);    // (1,H,T,T)
    cross.layers.push_back(layer->cross_attn->last_weights);  // (1,H,T,S)
  }
  w.stacks = {std::move(encoder), std::move(self), std::move(cross)};
}

// The recurrent model's one stack: its alignment α over the source for every target position
// (teacher-forced over tgt_in), as a "cross" stack of one layer and one head, (1,1,T,S).
void rnn_pass(const nn::RnnSeq2Seq& model, const Tensor& src, const Tensor& tgt_in, AttentionWeights& w) {
  AttentionStack cross{"cross", false, w.produced, w.source_pieces, {}};
  cross.layers.push_back(unsqueeze(model.alignment(src, tgt_in), 1));  // (1,T,S) -> (1,1,T,S)
  w.stacks = {std::move(cross)};
}

// A translation model's weights for one sentence pair: the source encoded, the target given or
// decoded greedily, then `pass` (encoder_decoder_pass or rnn_pass) over the pair.
using TranslationPass = std::function<void(const Tensor& src, const Tensor& tgt_in, AttentionWeights& w)>;
AttentionWeights translation_weights(const InferenceModel& im, const nn::Model& model, const TranslationPass& pass,
                                     const std::string& source, const std::optional<std::string>& target,
                                     std::int64_t pad, const AttentionInputNames& names) {
  const Tokenizers& tok = *im.tokenizers;
  const std::int64_t limit = im.config.model.max_len - 2;
  std::vector<std::int64_t> src_ids = encode_sentence(tok.src, source, names.source, limit);
  const auto S = static_cast<std::int64_t>(src_ids.size());
  if (S + pad > im.config.model.max_len)
    throw std::invalid_argument("attention: --src (" + std::to_string(S) + " tokens) and --pad " + std::to_string(pad) +
                                " are more than model.max_len " + std::to_string(im.config.model.max_len));
  NoGradGuard no_grad;
  AttentionWeights w;
  // y: the target tokens (no BOS/EOS); ends_with_eos: whether the last decoder position produces EOS
  std::vector<std::int64_t> y;
  bool ends_with_eos = true;
  if (target) {
    y = encode_sentence(tok.tgt, *target, names.target, limit);
    w.teacher_forced = true;
  } else {
    DecodeOptions opt;  // greedy, with the KV cache (fast), from the unpadded source; the weights come from the pass below
    y = greedy_decode(model, from_vector<std::int64_t>(src_ids, {1, S}), opt).at(0);
    // Stopped by the length limit instead of EOS: the last generated token is then a row of its own.
    ends_with_eos = static_cast<std::int64_t>(y.size()) < max_target_length(model, S, opt);
  }
  w.translation = tok.tgt.decode(y);
  std::vector<std::int64_t> tgt_in;
  decoder_rows(tok, y, ends_with_eos, tgt_in, w);
  src_ids.insert(src_ids.end(), static_cast<std::size_t>(pad), data::kPadId);  // as a batch pads a shorter row
  w.source_pieces = pieces_of(tok.src, src_ids);
  const auto T = static_cast<std::int64_t>(tgt_in.size());
  pass(from_vector<std::int64_t>(src_ids, {1, S + pad}), from_vector<std::int64_t>(tgt_in, {1, T}), w);
  return w;
}

// Every head of every layer of `stack` as a map titled "layer L, head h".
std::vector<Heatmap> stack_maps(const AttentionStack& stack, Lang lang) {
  std::vector<Heatmap> maps;
  for (std::size_t l = 0; l < stack.layers.size(); ++l) add_head_maps(maps, stack.layers[l], l, stack.queries, stack.keys, lang);
  return maps;
}

// Per layer: the encoder's head 1 beside the decoder self-attention's head 1.
std::vector<Heatmap> overview_maps(const AttentionStack& encoder, const AttentionStack& self, Lang lang) {
  std::vector<Heatmap> maps;
  for (std::size_t l = 0; l < std::min(encoder.layers.size(), self.layers.size()); ++l) {
    maps.push_back(head_map(encoder.layers[l], 0, text(lang, "encoder ", "编码器") + layer_head(l, 0, lang) + text(lang, ": bidirectional", "：双向"),
                            encoder.queries, encoder.keys));
    maps.push_back(head_map(self.layers[l], 0, text(lang, "decoder ", "解码器") + layer_head(l, 0, lang) + text(lang, ": causal", "：因果"),
                            self.queries, self.keys));
  }
  return maps;
}

AttentionFigures figures_of(const AttentionWeights& w) {
  AttentionFigures fig;
  fig.source_pieces = w.source_pieces;
  fig.decoder_inputs = w.decoder_inputs;
  fig.produced = w.produced;
  fig.translation = w.translation;
  fig.teacher_forced = w.teacher_forced;
  return fig;
}

}  // namespace

AttentionWeights attention_weights(const InferenceModel& im, const std::string& source,
                                   const std::optional<std::string>& target, std::int64_t pad,
                                   const AttentionInputNames& names) {
  if (pad < 0) throw std::invalid_argument("attention: --pad must be >= 0, got " + std::to_string(pad));
  if (const auto* encoder_decoder = dynamic_cast<const nn::Seq2SeqTransformer*>(im.model.get())) {
    const auto pass = [&](const Tensor& src, const Tensor& tgt_in, AttentionWeights& w) {
      encoder_decoder_pass(*encoder_decoder, src, tgt_in, w);
    };
    return translation_weights(im, *encoder_decoder, pass, source, target, pad, names);
  }
  if (const auto* rnn = dynamic_cast<const nn::RnnSeq2Seq*>(im.model.get())) {
    if (rnn->config().rnn_attention == nn::RnnAttention::None)
      throw std::invalid_argument(
          "attention: this rnn model has model.rnn_attention = \"none\": its decoder reads no attention weights, only the "
          "encoder's last state (the bottleneck); expected a model with additive, dot or general attention");
    const auto pass = [&](const Tensor& src, const Tensor& tgt_in, AttentionWeights& w) { rnn_pass(*rnn, src, tgt_in, w); };
    return translation_weights(im, *rnn, pass, source, target, pad, names);
  }
  if (target)
    throw std::invalid_argument(std::string("attention: ") + names.target + " is for an encoder-decoder; a " +
                                im.config.model.arch + " model reads one sequence (" + names.source + ")");
  return single_stack_weights(im, source, pad, names);
}

AttentionFigures attention_figures(const InferenceModel& im, const std::string& source,
                                   const std::optional<std::string>& target, std::int64_t pad, Lang lang) {
  const AttentionWeights w = attention_weights(im, source, target, pad);
  AttentionFigures fig = figures_of(w);
  const int heads = static_cast<int>(im.config.model.n_heads);
  if (w.stacks.size() == 1 && w.stacks[0].kind != "cross") {  // a decoder-only or encoder-only model
    const std::string title =
        w.stacks[0].causal ? text(lang, "Causal self-attention (decoder-only), row = position reading the token",
                                  "因果自注意力（仅解码器），行 = 读这个词元的位置")
                           : text(lang, "Bidirectional self-attention (encoder-only), row = position", "双向自注意力（仅编码器），行 = 位置");
    fig.self_svg = heatmaps_with_sentence(stack_maps(w.stacks[0], lang), heads, title, source, fig.translation,
                                          fig.translation.empty() ? "" : text(lang, " (greedy)", "（贪心解码）"), lang);
    return fig;
  }
  const std::string how = fig.teacher_forced ? text(lang, " (given)", "（给定）") : text(lang, " (greedy)", "（贪心解码）");
  if (w.stacks.size() == 1) {  // a recurrent encoder-decoder: its alignment, the one stack ("cross")
    const std::string kind = nn::rnn_attention_name(im.model->config().rnn_attention);  // additive, dot, general
    fig.cross_svg = heatmaps_with_sentence(stack_maps(w.stacks[0], lang), 1,
                                           text(lang, "Alignment α (" + kind + "), rows = token produced",
                                                "对齐 α（" + kind + " 注意力），行 = 产生的词元"),
                                           source, fig.translation, how, lang);
    return fig;
  }
  const AttentionStack &encoder = w.stacks[0], &self = w.stacks[1], &cross = w.stacks[2];
  fig.cross_svg = heatmaps_with_sentence(stack_maps(cross, lang), heads,
                                         text(lang, "Cross-attention, rows = token produced", "交叉注意力，行 = 产生的词元"), source,
                                         fig.translation, how, lang);
  fig.self_svg = heatmaps_with_sentence(stack_maps(self, lang), heads,
                                        text(lang, "Masked self-attention, rows = token produced", "掩码自注意力，行 = 产生的词元"),
                                        source, fig.translation, how, lang);
  fig.encoder_svg = heatmaps_with_sentence(stack_maps(encoder, lang), heads,
                                           text(lang, "Encoder self-attention (bidirectional), rows = source position",
                                                "编码器自注意力（双向），行 = 源端位置"),
                                           source, fig.translation, how, lang);
  fig.overview_svg = heatmaps_with_sentence(overview_maps(encoder, self, lang), 2,
                                            text(lang, "Bidirectional (encoder) beside causal (decoder), head 1",
                                                 "双向（编码器）与因果（解码器）并排，第 1 个头"),
                                            source, fig.translation, how, lang);
  return fig;
}

}  // namespace sf::train
