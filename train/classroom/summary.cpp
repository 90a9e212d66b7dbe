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

// A label in the first column of a section, 18 columns wide ("  attention block   4D² = ..."),
// with at least one space after it.
std::string label18(const std::string& label) {
  return display_width(label) >= 18 ? label + " " : pad_to_width(label, 18);
}

// One line per module: name (type) and its parameter count. A parameter already shown under an
// earlier module (a shared embedding) is not counted again and the line says so. In a
// ModuleList only the first item is expanded: the others have the same structure.
void tree(const nn::Module& m, const std::string& name, const std::string& prefix, bool last, bool root, bool expand,
          std::vector<const TensorImpl*>& seen, std::ostringstream& os, Lang lang) {
  std::int64_t fresh = 0, shared = 0;
  for (const auto& [_, t] : m.named_parameters()) {
    const bool already = std::find(seen.begin(), seen.end(), t.impl()) != seen.end();
    (already ? shared : fresh) += t.numel();
  }
  // parameters owned directly by this module count as seen from here on
  for (const auto& [_, t] : m.own_parameters())
    if (std::find(seen.begin(), seen.end(), t.impl()) == seen.end()) seen.push_back(t.impl());
  std::string label = (root ? "" : prefix + (last ? "└─ " : "├─ ")) + name + " (" + m.type_name() + ")";
  if (!expand) label += text(lang, "  same structure as 0", "  结构同 0");
  // the box-drawing characters are 3 bytes and 1 column, a Chinese character 3 bytes and 2 columns
  const std::size_t width = display_width(label);
  os << label << std::string(width < 60 ? 60 - width : 1, ' ') << std::setw(14) << with_commas(static_cast<double>(fresh))
     << (shared > 0 && fresh == 0 ? text(lang, "  (shared, counted above)", "  （共享，已在上面计入）") : "") << "\n";
  if (!expand) {
    for (const auto& [_, t] : m.named_parameters())
      if (std::find(seen.begin(), seen.end(), t.impl()) == seen.end()) seen.push_back(t.impl());
    return;
  }
  const auto& kids = m.children();
  const bool is_list = std::string(m.type_name()) == "ModuleList";
  for (std::size_t i = 0; i < kids.size(); ++i)
    tree(*kids[i].second, kids[i].first, root ? "" : prefix + (last ? "   " : "│  "), i + 1 == kids.size(), false,
         !is_list || i == 0, seen, os, lang);
}

}  // namespace

std::string module_tree(const nn::Module& root, const std::string& root_name, Lang lang) {
  std::ostringstream os;
  os << pad_to_width(text(lang, "module", "模块"), 60) << pad_left_to_width(text(lang, "parameters", "参数量"), 14) << "\n";
  std::vector<const TensorImpl*> seen;
  tree(root, root_name, "", true, true, true, seen, os, lang);
  return os.str();
}

FlopsPerToken flops_per_token(const nn::ModelConfig& m, std::int64_t length) {
  nn::require_transformer(m.arch, "summary: flops_per_token");  // projections against attention's T²
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
    case nn::Arch::Rnn: break;  // refused above
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
void parameter_lines(const nn::ModelConfig& m, std::int64_t model_count, std::ostringstream& os, Lang lang) {
  const double D = static_cast<double>(m.d_model), F = static_cast<double>(m.d_ff), V = static_cast<double>(m.tgt_vocab);
  const double kv = static_cast<double>(m.kv_heads() * m.head_dim());
  const PartCounts p = part_counts(m);
  const bool pre = m.norm_position == nn::NormPosition::Pre, learned = m.positional == nn::PositionalKind::Learned;
  const double Le = static_cast<double>(m.encoder_layers), Ld = static_cast<double>(m.decoder_layers);
  const double max_len = static_cast<double>(m.max_len), C = static_cast<double>(m.num_classes);
  const std::string exact = text(lang, "   exact ", "   精确 "), at_4d = text(lang, " (at F = 4D)", "（F = 4D 时）");
  double estimate = 0;
  os << text(lang, "Parameters of each part: the formula beside its exact count\n", "各部分的参数量：公式与精确数并列\n");
  os << "  " << label18(text(lang, "attention block", "注意力块")) << "4D² = " << with_commas(4 * D * D) << exact
     << with_commas(p.attn) << (kv != D ? text(lang, "  (grouped-query: 2D² + 2·D·Hkv·Dh)", "  （分组查询：2D² + 2·D·Hkv·Dh）") : "")
     << "\n";
  os << "  " << label18(text(lang, "feed-forward", "前馈")) << "2·D·F = " << with_commas(2 * D * F) << exact
     << with_commas(p.ffn) << "\n";
  const std::string layer_name = m.arch == nn::Arch::DecoderOnly ? text(lang, "decoder-only block", "仅解码器块")
                                                                 : text(lang, "encoder layer", "编码器层");
  os << "  " << label18(layer_name) << "12D² = " << with_commas(12 * D * D) << at_4d << exact << with_commas(p.enc_layer) << "\n";
  if (m.arch == nn::Arch::EncoderDecoder) {
    os << "  " << label18(text(lang, "decoder layer", "解码器层")) << "16D² = " << with_commas(16 * D * D) << at_4d << exact
       << with_commas(p.dec_layer) << "\n";
    os << "  " << label18(text(lang, "embeddings", "嵌入")) << "V·D = " << with_commas(V * D) << " x" << (m.share_embeddings ? 1 : 2)
       << (m.tie_output ? text(lang, " (output tied)", "（输出层与之共享）") : text(lang, " + output V·D", " + 输出层 V·D")) << "\n";
    estimate = Le * p.enc_layer + Ld * p.dec_layer + V * D * (m.share_embeddings ? 1 : 2) + (m.tie_output ? 0 : V * D) +
               (learned ? 2 * max_len * D : 0) + (pre ? 2 * p.norm : 0);
  } else {
    const bool classifier = m.arch == nn::Arch::EncoderOnly && m.num_classes > 0;
    os << "  " << label18(text(lang, "embeddings", "嵌入")) << "V·D = " << with_commas(V * D)
       << (classifier ? "" : text(lang, " (the LM head is tied to them)", "（语言模型输出头与之共享）")) << "\n";
    if (classifier)
      os << "  " << label18(text(lang, "classifier", "分类器")) << "D·C + C = " << with_commas(D * C + C)
         << text(lang, " (C = ", "（C = ") << m.num_classes << text(lang, " classes)\n", " 个类别）\n");
    estimate = (m.arch == nn::Arch::DecoderOnly ? Ld : Le) * p.enc_layer + V * D + (learned ? max_len * D : 0) +
               (pre ? p.norm : 0) + (classifier ? D * C + C : 0);
  }
  os << "  " << label18(text(lang, "sum of the parts", "各部分之和")) << with_commas(estimate) << text(lang, "   model ", "   模型 ")
     << with_commas(static_cast<double>(model_count))
     << (estimate == static_cast<double>(model_count)
             ? text(lang, "  (equal: every parameter is in a part above)", "  （相等：每个参数都属于上面的某一部分）")
             : text(lang, "  (NOT equal)", "  （不相等）"))
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
std::vector<DifferenceLine> difference_lines(const nn::ModelConfig& m, Lang lang) {
  const double D = static_cast<double>(m.d_model), F = static_cast<double>(m.d_ff), V = static_cast<double>(m.tgt_vocab);
  const double kv = static_cast<double>(m.kv_heads() * m.head_dim());  // width of k and v
  const double Le = static_cast<double>(m.encoder_layers), Ld = static_cast<double>(m.decoder_layers);
  const bool seq2seq = m.arch == nn::Arch::EncoderDecoder, swiglu = m.activation == nn::Activation::SwiGLU;
  const double layers = seq2seq ? Le + Ld : m.arch == nn::Arch::DecoderOnly ? Ld : Le;  // one feed-forward each
  const double blocks = seq2seq ? Le + 2 * Ld : layers;                                 // attention blocks
  const bool layer_norm = m.norm == nn::NormKind::LayerNorm;
  const double final_norms = m.norm_position == nn::NormPosition::Pre ? (seq2seq ? 2 : 1) : 0;
  const double norms = (seq2seq ? 2 * Le + 3 * Ld : 2 * layers) + final_norms;
  std::vector<DifferenceLine> out;
  const auto add = [&](const std::string& what, double count, const std::string& why) {
    if (count != 0) out.push_back({what, count, why});
  };
  const auto t = [lang](std::string_view en, std::string_view zh) { return text(lang, en, zh); };
  add(t("biases", "偏置"), blocks * (2 * D + 2 * kv) + layers * (F + D + (swiglu ? F : 0)),
      t("q,k,v,out: 2D + 2·Hkv·Dh per attention block; feed-forward: F + D", "q,k,v,out：每个注意力块 2D + 2·Hkv·Dh；前馈：F + D") +
          (swiglu ? t(" + F (the gate)", " + F（门控）") : ""));
  add(t("norms", "归一化层"), norms * (layer_norm ? 2 * D : D),
      with_commas(norms) + t(" norms x ", " 个归一化层 x ") + (layer_norm ? t("2D (gain, bias)", "2D（增益、偏置）") : t("D (gain)", "D（增益）")) +
          (final_norms > 0 ? t(", the pre-norm stacks' final norms included", "，含前置归一化各栈末尾的归一化层") : ""));
  add("F != 4D", layers * 2 * D * (F - 4 * D),
      t("2·D·(F - 4D) per feed-forward, F = ", "每个前馈 2·D·(F - 4D)，F = ") + with_commas(F) + t(", 4D = ", "，4D = ") + with_commas(4 * D));
  add(t("SwiGLU's gate matrix", "SwiGLU 的门控矩阵"), swiglu ? layers * D * F : 0,
      t("a third D x F matrix per feed-forward", "每个前馈多一个 D x F 矩阵"));
  add(t("grouped-query k/v", "分组查询的 k/v"), -blocks * 2 * D * (D - kv),
      t("k and v are D x Hkv·Dh = ", "k 和 v 是 D x Hkv·Dh = ") + with_commas(D) + " x " + with_commas(kv) +
          t(", not D x D: -2·D·(D - Hkv·Dh) per block", "，不是 D x D：每块 -2·D·(D - Hkv·Dh)"));
  add(t("second embedding table", "第二张嵌入表"), seq2seq && !m.share_embeddings ? V * D : 0,
      t("source and target embeddings not shared: V·D", "源端与目标端的嵌入不共享：V·D"));
  add(t("untied output layer", "不共享的输出层"), seq2seq && !m.tie_output ? V * D : 0,
      t("the output projection is not the embedding table: V·D", "输出投影不是嵌入表：V·D"));
  const double tables = m.positional == nn::PositionalKind::Learned ? (seq2seq ? 2 : 1) : 0;
  add(t("learned position tables", "可学习的位置表"), tables * static_cast<double>(m.max_len) * D, with_commas(tables) + " x max_len·D");
  const double C = static_cast<double>(m.num_classes);
  add(t("classifier", "分类器"), m.arch == nn::Arch::EncoderOnly ? D * C + (C > 0 ? C : 0) : 0,
      t("D·C + C, C = ", "D·C + C，C = ") + with_commas(C) + t(" classes", " 个类别"));
  return out;
}

// The lecture's approximation (weights of square-ish matrices only: 12D² per encoder layer or
// decoder-only block, 16D² per decoder layer, one V·D table) beside the exact count, and the
// difference explained line by line.
void approximation_lines(const nn::ModelConfig& m, std::int64_t model_count, std::ostringstream& os, Lang lang) {
  const double D = static_cast<double>(m.d_model), V = static_cast<double>(m.tgt_vocab);
  const double Le = static_cast<double>(m.encoder_layers), Ld = static_cast<double>(m.decoder_layers);
  double approximation = V * D;
  std::string formula, terms;
  switch (m.arch) {
    case nn::Arch::EncoderDecoder:
      approximation += 12 * D * D * Le + 16 * D * D * Ld;
      formula = "12·D²·Le + 16·D²·Ld + V·D";
      terms = text(lang, "encoder layer: attention 4D² + feed-forward 2·D·4D = 12D²; decoder layer: + cross-attention 4D² = 16D²",
                   "编码器层：注意力 4D² + 前馈 2·D·4D = 12D²；解码器层：再加交叉注意力 4D² = 16D²");
      break;
    case nn::Arch::DecoderOnly:
      approximation += 12 * D * D * Ld;
      formula = "12·D²·L + V·D";
      terms = text(lang, "decoder-only block: causal attention 4D² + feed-forward 2·D·4D = 12D² (no cross-attention)",
                   "仅解码器块：因果注意力 4D² + 前馈 2·D·4D = 12D²（没有交叉注意力）");
      break;
    case nn::Arch::EncoderOnly:
      approximation += 12 * D * D * Le;
      formula = "12·D²·L + V·D";
      terms = text(lang, "encoder layer: attention 4D² + feed-forward 2·D·4D = 12D²", "编码器层：注意力 4D² + 前馈 2·D·4D = 12D²");
      break;
    case nn::Arch::Rnn: break;  // rnn_parameter_lines instead
  }
  const double exact = static_cast<double>(model_count);
  os << text(lang, "Parameters: the lecture's approximation beside the exact count\n", "参数量：课上的近似公式与精确数并列\n")
     << "  " << label18(text(lang, "approximation", "近似值")) << formula << " = " << with_commas(approximation) << "\n"
     << "                    " << text(lang, "(", "（") << terms
     << text(lang, "; one V·D embedding table, also the output layer)", "；一张 V·D 嵌入表，同时用作输出层）") << "\n"
     << "  " << label18(text(lang, "exact", "精确值")) << with_commas(exact)
     << text(lang, " (the model's parameter count)", "（模型的参数量）") << "\n"
     << "  " << label18(text(lang, "difference", "差值")) << signed_count(exact - approximation)
     << text(lang, ", made of:", "，由以下几项组成：") << "\n";
  double explained = 0;
  for (const DifferenceLine& d : difference_lines(m, lang)) {
    os << "    " << pad_to_width(d.what, 26) << pad_left_to_width(signed_count(d.count), 12) << "   " << d.why << "\n";
    explained += d.count;
  }
  if (explained != exact - approximation)
    os << "    " << pad_to_width(text(lang, "not itemised", "未逐项列出"), 26)
       << pad_left_to_width(signed_count(exact - approximation - explained), 12)
       << text(lang, "   (a part this summary does not know)", "   （本摘要不认识的部分）") << "\n";
  os << "\n";
}

// "layers 3+3" / "6 causal layers" / "4 bidirectional layers, masked-LM head"
std::string layers_text(const nn::ModelConfig& m, Lang lang) {
  const std::string Le = std::to_string(m.encoder_layers), Ld = std::to_string(m.decoder_layers);
  if (m.arch == nn::Arch::EncoderDecoder) return text(lang, "layers ", "层数 ") + Le + "+" + Ld;
  if (m.arch == nn::Arch::DecoderOnly) return Ld + text(lang, " causal layers", " 个因果层");
  return Le + text(lang, " bidirectional layers, ", " 个双向层，") +
         (m.num_classes > 0 ? std::to_string(m.num_classes) + text(lang, "-class classifier", " 类分类器")
                            : text(lang, "masked-LM head", "掩码语言模型输出头"));
}

void kv_cache_lines(const nn::ModelConfig& m, std::int64_t length, std::int64_t batch, std::ostringstream& os, Lang lang) {
  const double Lq = static_cast<double>(length), B = static_cast<double>(batch), layers = static_cast<double>(m.decoder_layers);
  const double self_cache = 2 * B * Lq * static_cast<double>(m.kv_heads()) * static_cast<double>(m.head_dim()) * layers * 4;
  os << text(lang, "KV cache for B = ", "KV 缓存，B = ") << batch << text(lang, ", L = ", "，L = ") << length
     << text(lang, " (float32)\n", "（float32）\n");
  if (m.arch == nn::Arch::EncoderOnly) {
    os << text(lang, "  none: an encoder-only model reads its whole input at once and does not generate\n",
               "  无：仅编码器模型一次读入整个输入，不逐词生成\n");
    return;
  }
  os << "  " << (m.arch == nn::Arch::DecoderOnly ? "" : text(lang, "decoder ", "解码器"))
     << text(lang, "self-attention 2·B·L·Hkv·Dh·layers·4 bytes = ", "自注意力 2·B·L·Hkv·Dh·layers·4 字节 = ") << human(self_cache)
     << "B\n";
  if (m.arch == nn::Arch::EncoderDecoder)
    os << text(lang, "  cross-attention (source keys/values, same size at S = L) = ", "  交叉注意力（源端的键和值，S = L 时大小相同）= ")
       << human(self_cache) << "B\n";
}

// Forward FLOPs per token, split into the projections and attention, and where attention takes over.
void flops_lines(const nn::ModelConfig& m, std::int64_t length, std::ostringstream& os, Lang lang) {
  const FlopsPerToken f = flops_per_token(m, length);
  const bool seq2seq = m.arch == nn::Arch::EncoderDecoder;
  if (lang == Lang::Zh)
    os << (seq2seq ? "每个目标词元的前向 FLOPs，T = " : "每个词元的前向 FLOPs，T = ") << length << (seq2seq ? "（源端和目标端）\n" : "\n");
  else
    os << "Forward FLOPs per " << (seq2seq ? "target token at T = " : "token at T = ") << length
       << (seq2seq ? " (source and target)\n" : "\n");
  os << text(lang, "  projections (O(T·D²) per sentence)  ", "  投影  （每句 O(T·D²)）  ") << human(f.projections) << "FLOP\n";
  os << text(lang, "  attention   (O(T²·D) per sentence)  ", "  注意力（每句 O(T²·D)）  ") << human(f.attention) << "FLOP\n";
  std::ostringstream share;
  share << std::fixed << std::setprecision(1) << 100 * f.attention / (f.attention + f.projections) << "%";
  const std::string crossover = with_commas(f.projections / (f.attention / static_cast<double>(length)));
  if (lang == Lang::Zh)
    os << "  注意力占 " << share.str() << "；T 约为 " << crossover << " 时注意力超过投影\n"
       << "  一个训练步约为前向的 3 倍：每个目标词元 " << human(3 * (f.projections + f.attention)) << "FLOP\n\n";
  else
    os << "  attention share " << share.str() << "; attention overtakes the projections near T = " << crossover << "\n"
       << "  training step ~ 3x forward: " << human(3 * (f.projections + f.attention)) << "FLOP per target token\n\n";
}

// ---- arch rnn: the recurrent encoder-decoder (nn/rnn_seq2seq.h) -------------------------------

// A recurrent layer, one direction, H units reading I inputs with G gates: weight_ih (G·H, I),
// weight_hh (G·H, H), bias_ih and bias_hh (G·H) -> G·H·(I + H + 2).
double recurrent_layer(double G, double H, double I) { return G * H * (I + H + 2); }

// The parameter section of an rnn model: each part's formula and count, then their sum against the
// model's own count. Every part is exact (a recurrent network has no approximation to teach).
void rnn_parameter_lines(const nn::ModelConfig& m, std::int64_t model_count, std::ostringstream& os, Lang lang) {
  const double D = static_cast<double>(m.d_model), Vs = static_cast<double>(m.src_vocab), Vt = static_cast<double>(m.tgt_vocab);
  const double Le = static_cast<double>(m.encoder_layers), Ld = static_cast<double>(m.decoder_layers);
  const double G = static_cast<double>(nn::gates_per_cell(m.rnn_cell)), H = D / 2;
  const bool additive = m.rnn_attention == nn::RnnAttention::Additive, none = m.rnn_attention == nn::RnnAttention::None;
  const auto t = [lang](std::string_view en, std::string_view zh) { return text(lang, en, zh); };
  struct Part {
    std::string what, formula;
    double count;
  };
  std::vector<Part> parts = {
      {t("encoder", "编码器"), "2·Le·G·(D/2)·(D + D/2 + 2)", 2 * Le * recurrent_layer(G, H, D)},
      {t("decoder", "解码器"), std::string(additive ? "G·D·(2D + D + 2)" : "G·D·(D + D + 2)") + " + (Ld - 1)·G·D·(D + D + 2)",
       recurrent_layer(G, D, additive ? 2 * D : D) + (Ld - 1) * recurrent_layer(G, D, D)},
      {t("embeddings", "嵌入"), "V_src·D + V_tgt·D", Vs * D + Vt * D},
      {t("bridge", "桥接层"), "D·(D·Ld) + D·Ld", D * D * Ld + D * Ld}};
  switch (m.rnn_attention) {
    case nn::RnnAttention::Additive: parts.push_back({t("attention", "注意力"), "W_q D² + W_k D² + v D", 2 * D * D + D}); break;
    case nn::RnnAttention::General: parts.push_back({t("attention", "注意力"), "W_a D²", D * D}); break;
    case nn::RnnAttention::Dot:  // q · enc_i: no weights
    case nn::RnnAttention::None: break;
  }
  parts.push_back({t("combine", "合并层"), none ? "D·D + D" : "2D·D + D", (none ? D : 2 * D) * D + D});
  parts.push_back({t("output", "输出层"), "D·V_tgt + V_tgt", D * Vt + Vt});

  os << t("Parameters of each part: the formula beside its count\n", "各部分的参数量：公式与数值并列\n")
     << t("  a recurrent layer, one direction, H units reading I inputs: G·H·(I + H + 2), G = ",
          "  一层循环网络的一个方向，H 个单元读 I 个输入：G·H·(I + H + 2)，G = ")
     << G << t(" (", "（") << nn::cell_kind_name(m.rnn_cell) << t(": gates per cell)\n", "：每个单元的门数）\n");
  double sum = 0;
  for (const Part& p : parts) {
    os << "  " << label18(p.what) << p.formula << " = " << with_commas(p.count) << "\n";
    sum += p.count;
  }
  os << "  " << label18(t("sum of the parts", "各部分之和")) << with_commas(sum) << t("   model ", "   模型 ")
     << with_commas(static_cast<double>(model_count))
     << (sum == static_cast<double>(model_count) ? t("  (equal: every parameter is in a part above)", "  （相等：每个参数都属于上面的某一部分）")
                                                 : t("  (NOT equal)", "  （不相等）"))
     << "\n\n";
}

// An rnn model's summary: what it reads, its modules, its parameters; FLOPs and the KV cache are
// the formulas of attention layers, and the one line says what the rnn keeps instead.
std::string rnn_summary(const Config& cfg, const nn::ModelConfig& m, const nn::Model& model, std::int64_t vocab, Lang lang) {
  std::ostringstream os;
  os << text(lang, "Model from ", "配置 ") << cfg.source_path << text(lang, ": ", " 的模型：") << cfg.model.arch << ", D=" << m.d_model
     << " " << nn::cell_kind_name(m.rnn_cell) << text(lang, " cells, attention ", " 单元，注意力 ")
     << nn::rnn_attention_name(m.rnn_attention) << text(lang, ", layers ", "，层数 ") << m.encoder_layers << "+" << m.decoder_layers
     << " V=" << vocab << text(lang, " (encoder bidirectional, ", "（编码器双向，每个方向 ") << m.d_model / 2
     << text(lang, " units per direction; decoder ", " 个单元；解码器 ") << m.d_model << text(lang, " units)\n\n", " 个单元）\n\n");
  os << module_tree(model, "model", lang) << "\n";
  rnn_parameter_lines(m, model.parameter_count(), os, lang);
  os << text(lang,
             "FLOPs per token and the KV cache: formulas of attention layers, not computed for arch rnn. Its decoder\n"
             "carries a state of fixed size from step to step (h, and c for an LSTM, per layer), not a cache that grows with L.\n",
             "每个词元的 FLOPs 和 KV 缓存：是注意力层的公式，arch rnn 不计算。它的解码器在步与步之间传递一个大小固定的\n"
             "状态（每层的 h，LSTM 还有 c），而不是随 L 增长的缓存。\n");
  return os.str();
}

}  // namespace

std::string model_summary(const Config& cfg, std::int64_t vocab, std::int64_t length, std::int64_t batch, Lang lang) {
  Generator gen(0);
  const nn::ModelConfig m = model_config_from(cfg, vocab, vocab);
  const std::unique_ptr<nn::Model> model = nn::make_model(m, gen);
  if (m.arch == nn::Arch::Rnn) return rnn_summary(cfg, m, *model, vocab, lang);
  std::ostringstream os;
  os << text(lang, "Model from ", "配置 ") << cfg.source_path << text(lang, ": ", " 的模型：") << cfg.model.arch << ", D=" << m.d_model
     << " H=" << m.n_heads << " Hkv=" << m.kv_heads() << " Dh=" << m.head_dim() << " F=" << m.d_ff << " " << layers_text(m, lang)
     << " V=" << vocab << " (" << cfg.model.norm_position << "-" << cfg.model.norm << ", " << cfg.model.positional << ", "
     << cfg.model.activation << ")\n\n";
  os << module_tree(*model, "model", lang) << "\n";
  approximation_lines(m, model->parameter_count(), os, lang);
  parameter_lines(m, model->parameter_count(), os, lang);
  flops_lines(m, length, os, lang);
  kv_cache_lines(m, length, batch, os, lang);
  return os.str();
}

}  // namespace sf::train
