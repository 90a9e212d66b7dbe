#include "nn/transformer_layers.h"

#include <sstream>
#include <stdexcept>
#include <string>

#include "autograd/check.h"
#include "autograd/ops.h"
#include "nn/norm.h"

namespace sf::nn {

// Letters: B batch, S source length, T target length, D d_model, H heads, F d_ff.

// ---- names <-> enums ---------------------------------------------------------------------

NormKind parse_norm(const std::string& name) {
  if (name == "layernorm") return NormKind::LayerNorm;
  if (name == "rmsnorm") return NormKind::RMSNorm;
  throw std::invalid_argument("ModelConfig: unknown norm '" + name + "', expected one of \"layernorm\", \"rmsnorm\"");
}

NormPosition parse_norm_position(const std::string& name) {
  if (name == "pre") return NormPosition::Pre;
  if (name == "post") return NormPosition::Post;
  throw std::invalid_argument("ModelConfig: unknown norm_position '" + name + "', expected one of \"pre\", \"post\"");
}

PositionalKind parse_positional(const std::string& name) {
  if (name == "sinusoidal") return PositionalKind::Sinusoidal;
  if (name == "learned") return PositionalKind::Learned;
  if (name == "rope") return PositionalKind::RoPE;
  if (name == "alibi") return PositionalKind::ALiBi;
  if (name == "none") return PositionalKind::None;
  throw std::invalid_argument("ModelConfig: unknown positional '" + name +
                              "', expected one of \"sinusoidal\", \"learned\", \"rope\", \"alibi\", \"none\"");
}

AttentionKernel parse_attention(const std::string& name) {
  if (name == "plain") return AttentionKernel::Plain;
  if (name == "tiled") return AttentionKernel::Tiled;
  throw std::invalid_argument("ModelConfig: unknown attention '" + name + "', expected one of \"plain\", \"tiled\"");
}

const char* norm_name(NormKind kind) { return kind == NormKind::LayerNorm ? "layernorm" : "rmsnorm"; }

const char* norm_position_name(NormPosition position) { return position == NormPosition::Pre ? "pre" : "post"; }

const char* positional_name(PositionalKind kind) {
  switch (kind) {
    case PositionalKind::Sinusoidal: return "sinusoidal";
    case PositionalKind::Learned: return "learned";
    case PositionalKind::RoPE: return "rope";
    case PositionalKind::ALiBi: return "alibi";
    case PositionalKind::None: return "none";
  }
  return "?";
}

const char* attention_name(AttentionKernel kernel) { return kernel == AttentionKernel::Plain ? "plain" : "tiled"; }

// ---- ModelConfig -------------------------------------------------------------------------

namespace {

void require_positive(const char* field, std::int64_t value, const char* hint = "") {
  if (value <= 0)
    throw std::invalid_argument(std::string("ModelConfig: ") + field + " must be positive, got " +
                                std::to_string(value) + hint);
}

void require_probability(const char* field, double p) {
  if (!(p >= 0 && p < 1)) {  // written so that NaN fails too
    std::ostringstream msg;
    msg << "ModelConfig: " << field << " must be in [0, 1), got " << p;
    throw std::invalid_argument(msg.str());
  }
}

// How positions enter self-attention (cross-attention always gets None: see the header).
PositionInAttention self_attention_positions(PositionalKind kind) {
  switch (kind) {
    case PositionalKind::RoPE: return PositionInAttention::RoPE;
    case PositionalKind::ALiBi: return PositionInAttention::ALiBi;
    default: return PositionInAttention::None;  // sinusoidal/learned: added to the embeddings; none: nowhere
  }
}

// What only self-attention reads from the config: its window and RoPE's frequencies.
void configure_self_attention(MultiHeadAttention& attn, const ModelConfig& cfg) {
  attn.window = cfg.attention_window;
  attn.rope = rope_frequencies(cfg.rope_scaling, cfg.rope_factor, cfg.head_dim());
}

// The residual connection around one sublayer, pre or post norm:
//   pre:  x + dropout(sublayer_out)      where sublayer_out = sublayer(norm(x))
//   post: norm(x + dropout(sublayer_out)) where sublayer_out = sublayer(x)
// x, sublayer_out: (B,T,D) -> (B,T,D)
Tensor residual(NormPosition position, const Module& norm, const Dropout& dropout, const Tensor& x,
                const Tensor& sublayer_out) {
  const Tensor sum = add(x, dropout.forward(sublayer_out));
  return position == NormPosition::Pre ? sum : apply_norm(norm, sum);
}

// The input the sublayer sees: norm(x) under pre-norm, x itself under post-norm. x: (B,T,D)
Tensor sublayer_input(NormPosition position, const Module& norm, const Tensor& x) {
  return position == NormPosition::Pre ? apply_norm(norm, x) : x;
}

void check_width(const char* module, const char* what, const Tensor& x, std::int64_t d_model) {
  SF_EXPECT(x.dim() == 3 && x.size(2) == d_model, module, ": expected ", what, " of shape (B,T,", d_model, "), got ",
            x.shape());
}

}  // namespace

void ModelConfig::validate() const {
  require_positive("src_vocab", src_vocab, " (set it from the tokenizer)");
  require_positive("tgt_vocab", tgt_vocab, " (set it from the tokenizer)");
  if (arch == Arch::Rnn) return validate_rnn();  // nn/model.cpp: only what the recurrent model reads
  require_positive("d_model", d_model);
  require_positive("n_heads", n_heads);
  require_positive("d_ff", d_ff);
  require_positive("encoder_layers", encoder_layers);
  require_positive("decoder_layers", decoder_layers);
  require_positive("max_len", max_len);
  if (n_kv_heads < 0)
    throw std::invalid_argument("ModelConfig: n_kv_heads must be >= 0 (0 = n_heads), got " +
                                std::to_string(n_kv_heads));
  if (d_model % n_heads != 0)
    throw std::invalid_argument("ModelConfig: d_model " + std::to_string(d_model) + " is not divisible by n_heads " +
                                std::to_string(n_heads));
  if (n_heads % kv_heads() != 0)
    throw std::invalid_argument("ModelConfig: n_heads " + std::to_string(n_heads) +
                                " is not divisible by n_kv_heads " + std::to_string(n_kv_heads));
  if (positional == PositionalKind::RoPE && head_dim() % 2 != 0)
    throw std::invalid_argument("ModelConfig: positional rope needs an even head width, got d_model " +
                                std::to_string(d_model) + " / n_heads " + std::to_string(n_heads) + " = " +
                                std::to_string(head_dim()));
  if (attention_window < 0 || attention_window > max_len)
    throw std::invalid_argument("ModelConfig: attention_window must be 0 (full) to max_len " + std::to_string(max_len) +
                                ", got " + std::to_string(attention_window));
  if (rope_scaling != RopeScaling::None && positional != PositionalKind::RoPE)
    throw std::invalid_argument(std::string("ModelConfig: rope_scaling ") + rope_scaling_name(rope_scaling) +
                                " needs positional rope, got " + positional_name(positional));
  if (!(rope_factor >= 1) || (rope_scaling == RopeScaling::None && rope_factor != 1))
    throw std::invalid_argument("ModelConfig: rope_factor must be >= 1, and 1 with rope_scaling none, got " +
                                std::to_string(rope_factor) + " with rope_scaling " + rope_scaling_name(rope_scaling));
  if (share_embeddings && src_vocab != tgt_vocab)
    throw std::invalid_argument("ModelConfig: share_embeddings needs src_vocab == tgt_vocab, got src_vocab " +
                                std::to_string(src_vocab) + " and tgt_vocab " + std::to_string(tgt_vocab));
  if (pad_id < 0 || pad_id >= src_vocab || pad_id >= tgt_vocab)
    throw std::invalid_argument("ModelConfig: pad_id " + std::to_string(pad_id) +
                                " is not a token of both vocabularies (src_vocab " + std::to_string(src_vocab) +
                                ", tgt_vocab " + std::to_string(tgt_vocab) + ")");
  require_probability("dropout", dropout);
  require_probability("attention_dropout", attention_dropout);
  if (attention != AttentionKernel::Plain && attention != AttentionKernel::Tiled)
    throw std::invalid_argument("ModelConfig: unknown attention kernel " +
                                std::to_string(static_cast<int>(attention)) + ", expected plain or tiled");
  if (attention == AttentionKernel::Tiled && attention_dropout > 0) {
    std::ostringstream msg;
    msg << "ModelConfig: attention tiled has no dropout on the attention weights (it never forms them), got "
           "attention_dropout " << attention_dropout << "; set attention_dropout 0 or attention plain";
    throw std::invalid_argument(msg.str());
  }
}

// ---- norms -------------------------------------------------------------------------------

std::shared_ptr<Module> make_norm(NormKind kind, std::int64_t dim, Dtype dtype) {
  if (kind == NormKind::LayerNorm) return std::make_shared<LayerNorm>(dim, 1e-5, dtype);
  return std::make_shared<RMSNorm>(dim, 1e-6, dtype);
}

// x: (..., D) -> (..., D)
Tensor apply_norm(const Module& norm, const Tensor& x) {
  if (const auto* ln = dynamic_cast<const LayerNorm*>(&norm)) return ln->forward(x);
  const auto* rms = dynamic_cast<const RMSNorm*>(&norm);
  SF_CHECK(rms != nullptr, "apply_norm: expected a LayerNorm or RMSNorm, got ", norm.type_name());
  return rms->forward(x);
}

// ---- EncoderLayer ------------------------------------------------------------------------

EncoderLayer::EncoderLayer(const ModelConfig& cfg, Generator& init_gen, Generator& dropout_gen, Dtype dtype)
    : norm_position(cfg.norm_position) {
  self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(
                                               cfg.d_model, cfg.n_heads, cfg.kv_heads(), cfg.attention_dropout,
                                               self_attention_positions(cfg.positional), init_gen, dropout_gen, dtype,
                                               cfg.attention));
  configure_self_attention(*self_attn, cfg);
  ffn = register_module("ffn", std::make_shared<FeedForward>(cfg.d_model, cfg.d_ff, cfg.activation, cfg.dropout,
                                                             init_gen, dropout_gen, dtype));
  norm1 = register_module("norm1", make_norm(cfg.norm, cfg.d_model, dtype));
  norm2 = register_module("norm2", make_norm(cfg.norm, cfg.d_model, dtype));
  dropout = register_module("dropout", std::make_shared<Dropout>(cfg.dropout, dropout_gen));
}

// x: (B,S,D), src_mask: bool (B,1,1,S) (or causal (S,S_keys)) -> (B,S,D)
Tensor EncoderLayer::forward(const Tensor& x, const Tensor& src_mask, KVCache* cache, std::int64_t start_pos,
                             bool causal) const {
  check_width("EncoderLayer", "x", x, self_attn->d_model);
  // Self-attention: every source position looks at every non-padding source position (a
  // decoder-only block: at itself and the positions before it, cached ones included).
  Tensor h = sublayer_input(norm_position, *norm1, x);                                     // (B,S,D)
  Tensor attn = self_attn->forward(h, h, src_mask, cache, start_pos, /*causal_positions=*/causal);  // (B,S,D)
  Tensor out = residual(norm_position, *norm1, *dropout, x, attn);                       // (B,S,D)
  // Feed-forward, position by position.
  h = sublayer_input(norm_position, *norm2, out);
  return run_forward_hooks(residual(norm_position, *norm2, *dropout, out, ffn->forward(h)));  // (B,S,D)
}

// ---- DecoderLayer ------------------------------------------------------------------------

DecoderLayer::DecoderLayer(const ModelConfig& cfg, Generator& init_gen, Generator& dropout_gen, Dtype dtype)
    : norm_position(cfg.norm_position) {
  self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(
                                               cfg.d_model, cfg.n_heads, cfg.kv_heads(), cfg.attention_dropout,
                                               self_attention_positions(cfg.positional), init_gen, dropout_gen, dtype,
                                               cfg.attention));
  configure_self_attention(*self_attn, cfg);
  cross_attn = register_module("cross_attn", std::make_shared<MultiHeadAttention>(
                                                 cfg.d_model, cfg.n_heads, cfg.kv_heads(), cfg.attention_dropout,
                                                 PositionInAttention::None, init_gen, dropout_gen, dtype,
                                                 cfg.attention));
  ffn = register_module("ffn", std::make_shared<FeedForward>(cfg.d_model, cfg.d_ff, cfg.activation, cfg.dropout,
                                                             init_gen, dropout_gen, dtype));
  norm1 = register_module("norm1", make_norm(cfg.norm, cfg.d_model, dtype));
  norm2 = register_module("norm2", make_norm(cfg.norm, cfg.d_model, dtype));
  norm3 = register_module("norm3", make_norm(cfg.norm, cfg.d_model, dtype));
  dropout = register_module("dropout", std::make_shared<Dropout>(cfg.dropout, dropout_gen));
}

// y: (B,T,D), memory: (B,S,D) -> (B,T,D)
Tensor DecoderLayer::forward(const Tensor& y, const Tensor& memory, const Tensor& self_mask,
                             const Tensor& memory_mask, LayerCache* cache, std::int64_t start_pos) const {
  check_width("DecoderLayer", "y", y, self_attn->d_model);
  // Masked self-attention over the target so far (the cache holds positions 0..start_pos-1).
  Tensor h = sublayer_input(norm_position, *norm1, y);  // (B,T,D)
  Tensor attn = self_attn->forward(h, h, self_mask, cache ? &cache->self : nullptr, start_pos,
                                   /*causal_positions=*/true);  // (B,T,D)
  Tensor out = residual(norm_position, *norm1, *dropout, y, attn);
  // Cross-attention: target queries, source keys/values (padding blocked by memory_mask).
  h = sublayer_input(norm_position, *norm2, out);
  attn = cross_attn->forward(h, memory, memory_mask, cache ? &cache->cross : nullptr, start_pos);  // (B,T,D)
  out = residual(norm_position, *norm2, *dropout, out, attn);
  // Feed-forward.
  h = sublayer_input(norm_position, *norm3, out);
  return run_forward_hooks(residual(norm_position, *norm3, *dropout, out, ffn->forward(h)));  // (B,T,D)
}

// ---- Encoder and Decoder stacks ----------------------------------------------------------

Encoder::Encoder(const ModelConfig& cfg, Generator& init_gen, Generator& dropout_gen, Dtype dtype) {
  layers = register_module("layers", std::make_shared<ModuleList<EncoderLayer>>());
  for (std::int64_t i = 0; i < cfg.encoder_layers; ++i)
    layers->push_back(std::make_shared<EncoderLayer>(cfg, init_gen, dropout_gen, dtype));
  if (cfg.norm_position == NormPosition::Pre) norm = register_module("norm", make_norm(cfg.norm, cfg.d_model, dtype));
}

// x: (B,S,D), src_mask: bool (B,1,1,S) -> (B,S,D)
Tensor Encoder::forward(const Tensor& x, const Tensor& src_mask) const {
  Tensor h = x;
  for (const auto& layer : *layers) h = layer->forward(h, src_mask);
  return run_forward_hooks(norm ? apply_norm(*norm, h) : h);
}

Decoder::Decoder(const ModelConfig& cfg, Generator& init_gen, Generator& dropout_gen, Dtype dtype) {
  layers = register_module("layers", std::make_shared<ModuleList<DecoderLayer>>());
  for (std::int64_t i = 0; i < cfg.decoder_layers; ++i)
    layers->push_back(std::make_shared<DecoderLayer>(cfg, init_gen, dropout_gen, dtype));
  if (cfg.norm_position == NormPosition::Pre) norm = register_module("norm", make_norm(cfg.norm, cfg.d_model, dtype));
}

// y: (B,T,D), memory: (B,S,D) -> (B,T,D)
Tensor Decoder::forward(const Tensor& y, const Tensor& memory, const Tensor& self_mask, const Tensor& memory_mask,
                        std::vector<LayerCache>* caches, std::int64_t start_pos) const {
  SF_EXPECT(!caches || caches->size() == layers->size(), "Decoder: the cache has ", caches->size(),
            " layer entries, the decoder ", layers->size(), " layers");
  Tensor h = y;
  for (std::size_t i = 0; i < layers->size(); ++i)
    h = (*layers)[i].forward(h, memory, self_mask, memory_mask, caches ? &(*caches)[i] : nullptr, start_pos);
  return run_forward_hooks(norm ? apply_norm(*norm, h) : h);
}

}  // namespace sf::nn
