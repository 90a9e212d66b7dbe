#include "train/classroom/summary.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <locale>
#include <sstream>
#include <vector>

#include "train/setup.h"

namespace sf::train {

namespace {

std::string with_commas(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(0) << v;
  std::string s = os.str(), out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return out;
}

std::string human(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  if (v >= 1e9) os << v / 1e9 << " G";
  else if (v >= 1e6) os << v / 1e6 << " M";
  else if (v >= 1e3) os << v / 1e3 << " k";
  else os << v << " ";
  return os.str();
}

// Display width of UTF-8 text (the tree's box-drawing characters are 3 bytes, 1 column).
std::size_t columns(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// One line per module: name (type) and its parameter count. A parameter already shown under an
// earlier module (a shared embedding) is not counted again and the line says so. In a
// ModuleList only the first item is expanded: the others have the same structure.
void tree(const nn::Module& m, const std::string& name, const std::string& prefix, bool last, bool root, bool expand,
          std::vector<const TensorImpl*>& seen, std::ostringstream& os) {
  std::int64_t fresh = 0, shared = 0;
  for (const auto& [_, t] : m.named_parameters()) {
    const bool already = std::find(seen.begin(), seen.end(), t.impl()) != seen.end();
    (already ? shared : fresh) += t.numel();
  }
  // parameters owned directly by this module count as seen from here on
  for (const auto& [_, t] : m.own_parameters())
    if (std::find(seen.begin(), seen.end(), t.impl()) == seen.end()) seen.push_back(t.impl());
  std::string label = (root ? "" : prefix + (last ? "└─ " : "├─ ")) + name + " (" + m.type_name() + ")";
  if (!expand) label += "  same structure as 0";
  os << label << std::string(label.size() < 60 ? 60 - columns(label) : 1, ' ') << std::setw(14)
     << with_commas(static_cast<double>(fresh)) << (shared > 0 && fresh == 0 ? "  (shared, counted above)" : "") << "\n";
  if (!expand) {
    for (const auto& [_, t] : m.named_parameters())
      if (std::find(seen.begin(), seen.end(), t.impl()) == seen.end()) seen.push_back(t.impl());
    return;
  }
  const auto& kids = m.children();
  const bool is_list = std::string(m.type_name()) == "ModuleList";
  for (std::size_t i = 0; i < kids.size(); ++i)
    tree(*kids[i].second, kids[i].first, root ? "" : prefix + (last ? "   " : "│  "), i + 1 == kids.size(), false,
         !is_list || i == 0, seen, os);
}

}  // namespace

std::string module_tree(const nn::Module& root, const std::string& root_name) {
  std::ostringstream os;
  os << std::left << std::setw(60) << "module" << std::right << std::setw(14) << "parameters" << "\n";
  std::vector<const TensorImpl*> seen;
  tree(root, root_name, "", true, true, true, seen, os);
  return os.str();
}

FlopsPerToken flops_per_token(const nn::ModelConfig& m, std::int64_t length) {
  const double D = static_cast<double>(m.d_model), F = static_cast<double>(m.d_ff), T = static_cast<double>(length);
  const double kv = static_cast<double>(m.kv_heads() * m.head_dim());  // width of k and v
  const double Le = static_cast<double>(m.encoder_layers), Ld = static_cast<double>(m.decoder_layers);
  const double V = static_cast<double>(m.tgt_vocab);
  const double ffn = 2 * (2 * D * F) + (m.activation == nn::Activation::SwiGLU ? 2 * D * F : 0);
  const double attn_proj = 2 * (2 * D * D + 2 * D * kv);  // q, out: D x D; k, v: D x kv
  const double attend = 2 * T * D + 2 * T * D;            // scores q·k over T keys, then weights·v
  FlopsPerToken f;
  switch (m.arch) {
    case nn::Arch::EncoderDecoder:
      // encoder (one source token per target token: equal lengths), then the decoder's
      // self-attention, cross-attention and feed-forward, then the output projection
      f.projections = Le * (attn_proj + ffn) + Ld * (attn_proj + attn_proj + ffn) + 2 * D * V;
      f.attention = Le * attend + Ld * 2 * attend;
      break;
    case nn::Arch::DecoderOnly:  // causal self-attention + feed-forward, then the LM head
      f.projections = Ld * (attn_proj + ffn) + 2 * D * V;
      f.attention = Ld * attend;  // (the kernel computes all T x T scores; the mask zeroes half)
      break;
    case nn::Arch::EncoderOnly:  // bidirectional layers, then the masked-LM head (or a classifier on one vector)
      f.projections = Le * (attn_proj + ffn) + (m.num_classes > 0 ? 2 * D * static_cast<double>(m.num_classes) / T : 2 * D * V);
      f.attention = Le * attend;
      break;
  }
  return f;
}

namespace {

// The exact parameter counts of the parts, from the config (what the formulas approximate).
struct PartCounts {
  double attn, ffn, norm, enc_layer, dec_layer;
};
PartCounts part_counts(const nn::ModelConfig& m) {
  const double D = static_cast<double>(m.d_model), F = static_cast<double>(m.d_ff);
  const double kv = static_cast<double>(m.kv_heads() * m.head_dim());
  PartCounts p;
  p.attn = 2 * D * D + 2 * D * kv + (2 * D + 2 * kv);  // weights + biases
  p.ffn = 2 * D * F + F + D + (m.activation == nn::Activation::SwiGLU ? D * F + F : 0);
  p.norm = m.norm == nn::NormKind::LayerNorm ? 2 * D : D;
  p.enc_layer = p.attn + p.ffn + 2 * p.norm;  // also a decoder-only block (causal self-attention + FFN)
  p.dec_layer = 2 * p.attn + p.ffn + 3 * p.norm;
  return p;
}

// The parameter section: each part beside its formula, then the total the formulas give against
// the model's own count.
void parameter_lines(const nn::ModelConfig& m, std::int64_t model_count, std::ostringstream& os) {
  const double D = static_cast<double>(m.d_model), F = static_cast<double>(m.d_ff), V = static_cast<double>(m.tgt_vocab);
  const double kv = static_cast<double>(m.kv_heads() * m.head_dim());
  const PartCounts p = part_counts(m);
  const bool pre = m.norm_position == nn::NormPosition::Pre, learned = m.positional == nn::PositionalKind::Learned;
  const double Le = static_cast<double>(m.encoder_layers), Ld = static_cast<double>(m.decoder_layers);
  const double max_len = static_cast<double>(m.max_len), C = static_cast<double>(m.num_classes);
  double estimate = 0;
  os << "Parameters of each part: the formula beside its exact count\n";
  os << "  attention block   4D² = " << with_commas(4 * D * D) << "   exact " << with_commas(p.attn)
     << (kv != D ? "  (grouped-query: 2D² + 2·D·Hkv·Dh)" : "") << "\n";
  os << "  feed-forward      2·D·F = " << with_commas(2 * D * F) << "   exact " << with_commas(p.ffn) << "\n";
  const char* layer_name = m.arch == nn::Arch::DecoderOnly ? "  decoder-only block 12D² = " : "  encoder layer     12D² = ";
  os << layer_name << with_commas(12 * D * D) << " (at F = 4D)   exact " << with_commas(p.enc_layer) << "\n";
  if (m.arch == nn::Arch::EncoderDecoder) {
    os << "  decoder layer     16D² = " << with_commas(16 * D * D) << " (at F = 4D)   exact " << with_commas(p.dec_layer) << "\n";
    os << "  embeddings        V·D = " << with_commas(V * D) << " x" << (m.share_embeddings ? 1 : 2)
       << (m.tie_output ? " (output tied)" : " + output V·D") << "\n";
    estimate = Le * p.enc_layer + Ld * p.dec_layer + V * D * (m.share_embeddings ? 1 : 2) + (m.tie_output ? 0 : V * D) +
               (learned ? 2 * max_len * D : 0) + (pre ? 2 * p.norm : 0);
  } else {
    const bool classifier = m.arch == nn::Arch::EncoderOnly && m.num_classes > 0;
    os << "  embeddings        V·D = " << with_commas(V * D) << (classifier ? "" : " (the LM head is tied to them)") << "\n";
    if (classifier) os << "  classifier        D·C + C = " << with_commas(D * C + C) << " (C = " << m.num_classes << " classes)\n";
    estimate = (m.arch == nn::Arch::DecoderOnly ? Ld : Le) * p.enc_layer + V * D + (learned ? max_len * D : 0) +
               (pre ? p.norm : 0) + (classifier ? D * C + C : 0);
  }
  os << "  sum of the parts  " << with_commas(estimate) << "   model " << with_commas(static_cast<double>(model_count))
     << (estimate == static_cast<double>(model_count) ? "  (equal: every parameter is in a part above)" : "  (NOT equal)")
     << "\n\n";
}

// One line of the difference between the exact count and the lecture's approximation.
struct DifferenceLine {
  std::string what;  // "biases"
  double count;      // parameters, signed: what the approximation leaves out (+) or counts too many (-)
  std::string why;   // how it is made: "2D + 2·Hkv·Dh per attention block, F + D per feed-forward"
};

// Signed with thousands separators: "+1,024", "-512".
std::string signed_count(double v) {
  std::string out(1, v < 0 ? '-' : '+');
  return out.append(with_commas(std::abs(v)));
}

// Where the exact count differs from the approximation, line by line; the lines add up to
// exact - approximation for every model make_model builds (the test checks it).
std::vector<DifferenceLine> difference_lines(const nn::ModelConfig& m) {
  const double D = static_cast<double>(m.d_model), F = static_cast<double>(m.d_ff), V = static_cast<double>(m.tgt_vocab);
  const double kv = static_cast<double>(m.kv_heads() * m.head_dim());  // width of k and v
  const double Le = static_cast<double>(m.encoder_layers), Ld = static_cast<double>(m.decoder_layers);
  const bool seq2seq = m.arch == nn::Arch::EncoderDecoder, swiglu = m.activation == nn::Activation::SwiGLU;
  const double layers = seq2seq ? Le + Ld : m.arch == nn::Arch::DecoderOnly ? Ld : Le;  // one feed-forward each
  const double blocks = seq2seq ? Le + 2 * Ld : layers;                                 // attention blocks
  const double norm = m.norm == nn::NormKind::LayerNorm ? 2 * D : D;
  const double final_norms = m.norm_position == nn::NormPosition::Pre ? (seq2seq ? 2 : 1) : 0;
  const double norms = (seq2seq ? 2 * Le + 3 * Ld : 2 * layers) + final_norms;
  std::vector<DifferenceLine> out;
  const auto add = [&](const std::string& what, double count, const std::string& why) {
    if (count != 0) out.push_back({what, count, why});
  };
  add("biases", blocks * (2 * D + 2 * kv) + layers * (F + D + (swiglu ? F : 0)),
      "q,k,v,out: 2D + 2·Hkv·Dh per attention block; feed-forward: F + D" + std::string(swiglu ? " + F (the gate)" : ""));
  add("norms", norms * norm, with_commas(norms) + " norms x " + (m.norm == nn::NormKind::LayerNorm ? "2D (gain, bias)" : "D (gain)") +
                                 (final_norms > 0 ? ", the pre-norm stacks' final norms included" : ""));
  add("F != 4D", layers * 2 * D * (F - 4 * D), "2·D·(F - 4D) per feed-forward, F = " + with_commas(F) + ", 4D = " + with_commas(4 * D));
  add("SwiGLU's gate matrix", swiglu ? layers * D * F : 0, "a third D x F matrix per feed-forward");
  add("grouped-query k/v", -blocks * 2 * D * (D - kv),
      "k and v are D x Hkv·Dh = " + with_commas(D) + " x " + with_commas(kv) + ", not D x D: -2·D·(D - Hkv·Dh) per block");
  add("second embedding table", seq2seq && !m.share_embeddings ? V * D : 0, "source and target embeddings not shared: V·D");
  add("untied output layer", seq2seq && !m.tie_output ? V * D : 0, "the output projection is not the embedding table: V·D");
  const double tables = m.positional == nn::PositionalKind::Learned ? (seq2seq ? 2 : 1) : 0;
  add("learned position tables", tables * static_cast<double>(m.max_len) * D, with_commas(tables) + " x max_len·D");
  const double C = static_cast<double>(m.num_classes);
  add("classifier", m.arch == nn::Arch::EncoderOnly ? D * C + (C > 0 ? C : 0) : 0, "D·C + C, C = " + with_commas(C) + " classes");
  return out;
}

// The lecture's approximation (weights of square-ish matrices only: 12D² per encoder layer or
// decoder-only block, 16D² per decoder layer, one V·D table) beside the exact count, and the
// difference explained line by line.
void approximation_lines(const nn::ModelConfig& m, std::int64_t model_count, std::ostringstream& os) {
  const double D = static_cast<double>(m.d_model), V = static_cast<double>(m.tgt_vocab);
  const double Le = static_cast<double>(m.encoder_layers), Ld = static_cast<double>(m.decoder_layers);
  double approximation = V * D;
  std::string formula, terms;
  switch (m.arch) {
    case nn::Arch::EncoderDecoder:
      approximation += 12 * D * D * Le + 16 * D * D * Ld;
      formula = "12·D²·Le + 16·D²·Ld + V·D";
      terms = "encoder layer: attention 4D² + feed-forward 2·D·4D = 12D²; decoder layer: + cross-attention 4D² = 16D²";
      break;
    case nn::Arch::DecoderOnly:
      approximation += 12 * D * D * Ld;
      formula = "12·D²·L + V·D";
      terms = "decoder-only block: causal attention 4D² + feed-forward 2·D·4D = 12D² (no cross-attention)";
      break;
    case nn::Arch::EncoderOnly:
      approximation += 12 * D * D * Le;
      formula = "12·D²·L + V·D";
      terms = "encoder layer: attention 4D² + feed-forward 2·D·4D = 12D²";
      break;
  }
  const double exact = static_cast<double>(model_count);
  os << "Parameters: the lecture's approximation beside the exact count\n"
     << "  approximation     " << formula << " = " << with_commas(approximation) << "\n"
     << "                    (" << terms << "; one V·D embedding table, also the output layer)\n"
     << "  exact             " << with_commas(exact) << " (the model's parameter count)\n"
     << "  difference        " << signed_count(exact - approximation) << ", made of:\n";
  double explained = 0;
  for (const DifferenceLine& d : difference_lines(m)) {
    os << "    " << std::left << std::setw(26) << d.what << std::right << std::setw(12) << signed_count(d.count) << "   "
       << d.why << "\n";
    explained += d.count;
  }
  if (explained != exact - approximation)
    os << "    " << std::left << std::setw(26) << "not itemised" << std::right << std::setw(12)
       << signed_count(exact - approximation - explained) << "   (a part this summary does not know)\n";
  os << "\n";
}

// "layers 3+3" / "6 causal layers" / "4 bidirectional layers, masked-LM head"
std::string layers_text(const nn::ModelConfig& m) {
  if (m.arch == nn::Arch::EncoderDecoder) return "layers " + std::to_string(m.encoder_layers) + "+" + std::to_string(m.decoder_layers);
  if (m.arch == nn::Arch::DecoderOnly) return std::to_string(m.decoder_layers) + " causal layers";
  return std::to_string(m.encoder_layers) + " bidirectional layers, " +
         (m.num_classes > 0 ? std::to_string(m.num_classes) + "-class classifier" : std::string("masked-LM head"));
}

void kv_cache_lines(const nn::ModelConfig& m, std::int64_t length, std::int64_t batch, std::ostringstream& os) {
  const double Lq = static_cast<double>(length), B = static_cast<double>(batch), layers = static_cast<double>(m.decoder_layers);
  const double self_cache = 2 * B * Lq * static_cast<double>(m.kv_heads()) * static_cast<double>(m.head_dim()) * layers * 4;
  os << "KV cache for B = " << batch << ", L = " << length << " (float32)\n";
  if (m.arch == nn::Arch::EncoderOnly) {
    os << "  none: an encoder-only model reads its whole input at once and does not generate\n";
    return;
  }
  os << "  " << (m.arch == nn::Arch::DecoderOnly ? "" : "decoder ") << "self-attention 2·B·L·Hkv·Dh·layers·4 bytes = "
     << human(self_cache) << "B\n";
  if (m.arch == nn::Arch::EncoderDecoder)
    os << "  cross-attention (source keys/values, same size at S = L) = " << human(self_cache) << "B\n";
}

}  // namespace

std::string model_summary(const Config& cfg, std::int64_t vocab, std::int64_t length, std::int64_t batch) {
  Generator gen(0);
  const nn::ModelConfig m = model_config_from(cfg, vocab, vocab);
  const std::unique_ptr<nn::Model> model = nn::make_model(m, gen);
  std::ostringstream os;
  os << "Model from " << cfg.source_path << ": " << cfg.model.arch << ", D=" << m.d_model << " H=" << m.n_heads
     << " Hkv=" << m.kv_heads() << " Dh=" << m.head_dim() << " F=" << m.d_ff << " " << layers_text(m) << " V=" << vocab << " ("
     << cfg.model.norm_position << "-" << cfg.model.norm << ", " << cfg.model.positional << ", " << cfg.model.activation << ")\n\n";
  os << module_tree(*model, "model") << "\n";
  approximation_lines(m, model->parameter_count(), os);
  parameter_lines(m, model->parameter_count(), os);

  const FlopsPerToken f = flops_per_token(m, length);
  os << "Forward FLOPs per " << (m.arch == nn::Arch::EncoderDecoder ? "target token at T = " : "token at T = ") << length
     << (m.arch == nn::Arch::EncoderDecoder ? " (source and target)\n" : "\n");
  os << "  projections (O(T·D²) per sentence)  " << human(f.projections) << "FLOP\n";
  os << "  attention   (O(T²·D) per sentence)  " << human(f.attention) << "FLOP\n";
  os << "  attention share " << std::fixed << std::setprecision(1) << 100 * f.attention / (f.attention + f.projections)
     << "%; attention overtakes the projections near T = "
     << with_commas(f.projections / (f.attention / static_cast<double>(length))) << "\n";
  os << "  training step ~ 3x forward: " << human(3 * (f.projections + f.attention)) << "FLOP per target token\n\n";
  kv_cache_lines(m, length, batch, os);
  return os.str();
}

}  // namespace sf::train
