// DecoderOnlyTransformer: see decoder_only.h for the architecture and the two generation phases.
#include "nn/decoder_only.h"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "nn/positional.h"

namespace sf::nn {

// Letters: B batch, T sequence length, P prompt length, D d_model, Hkv key/value heads,
// Dh head width, V vocabulary.

namespace {

const char* kWho = "DecoderOnlyTransformer: ";

// The config, checked for what a decoder-only model needs, then by validate() (with the one
// vocabulary in both vocabulary fields and the unused encoder depth set, so that fields this
// model does not read cannot fail it).
const ModelConfig& validated(const ModelConfig& cfg) {
  if (cfg.arch != Arch::DecoderOnly)
    throw std::invalid_argument(std::string(kWho) + "expected model.arch decoder-only, got " + arch_name(cfg.arch));
  if (cfg.src_vocab != 0 && cfg.src_vocab != cfg.tgt_vocab)
    throw std::invalid_argument(std::string(kWho) + "expected src_vocab 0 or equal to tgt_vocab " +
                                std::to_string(cfg.tgt_vocab) + " (one joint vocabulary), got src_vocab " +
                                std::to_string(cfg.src_vocab));
  ModelConfig checked = cfg;
  checked.src_vocab = cfg.tgt_vocab;
  checked.encoder_layers = 1;
  checked.validate();
  return cfg;
}

// The state of a decoder-only model, or an error naming what was passed instead.
DecoderOnlyState& own_state(DecodeState& state) {
  auto* s = dynamic_cast<DecoderOnlyState*>(&state);
  if (!s)
    throw std::invalid_argument(std::string(kWho) +
                                "expected the DecodeState of its own start_decoding(), got another model's");
  return *s;
}
const DecoderOnlyState& own_state(const DecodeState& state) { return own_state(const_cast<DecodeState&>(state)); }

}  // namespace

// ---- DecoderOnlyState ----------------------------------------------------------------------

std::int64_t DecoderOnlyState::length() const { return layers.empty() ? 0 : layers[0].length(); }

// every cached k/v (B,Hkv,T,Dh) and `first` (B,1) -> rows batch_indices, (B',...)
void DecoderOnlyState::reorder(const Tensor& batch_indices) {
  check_batch_indices(batch_indices, "DecoderOnlyState::reorder");
  for (KVCache& layer : layers) reorder_kv(layer, batch_indices);
  if (first.defined()) first = index_select(first, 0, batch_indices);
}

// (B, ...) -> (B*times, ...), row b*times + k = row b
void DecoderOnlyState::repeat_rows(std::int64_t times) {
  if (times < 1)
    throw std::invalid_argument("DecoderOnlyState::repeat_rows: expected times >= 1, got " + std::to_string(times));
  const std::int64_t B = first.size(0);
  std::vector<std::int64_t> idx;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t k = 0; k < times; ++k) idx.push_back(b);
  reorder(from_vector<std::int64_t>(idx, {B * times}));
}

// ---- DecoderOnlyTransformer ----------------------------------------------------------------

DecoderOnlyTransformer::DecoderOnlyTransformer(const ModelConfig& cfg, Generator& init_gen, Dtype dtype)
    : cfg_(validated(cfg)), dropout_gen_(init_gen.next_u64()) {
  // Parameters are drawn in this order: embedding, (learned) positions, layers; norms start at 1 and 0.
  embed = register_module("embed",
                          std::make_shared<Embedding>(cfg.tgt_vocab, cfg.d_model, init_gen, cfg.pad_id, dtype));
  pos = make_positions(cfg, init_gen, dtype);
  if (pos) register_module("pos", pos);
  layers = register_module("layers", std::make_shared<ModuleList<EncoderLayer>>());
  for (std::int64_t i = 0; i < cfg.decoder_layers; ++i)
    layers->push_back(std::make_shared<EncoderLayer>(cfg, init_gen, dropout_gen_, dtype));
  if (cfg.norm_position == NormPosition::Pre) norm = register_module("norm", make_norm(cfg.norm, cfg.d_model, dtype));
  dropout = register_module("dropout", std::make_shared<Dropout>(cfg.dropout, dropout_gen_));
}

void DecoderOnlyTransformer::check_tokens(const char* what, const Tensor& ids) const {
  if (!ids.defined() || ids.dim() != 2 || ids.dtype() != Dtype::Int64)
    throw std::invalid_argument(std::string(kWho) + "expected " + what +
                                " token ids of shape (B,T) and dtype int64, got " +
                                (ids.defined() ? std::string(dtype_name(ids.dtype())) + " " + shape_str(ids.shape())
                                               : std::string("an undefined tensor")));
  const std::int64_t T = ids.size(1), V = cfg_.tgt_vocab;
  if (T > cfg_.max_len)
    throw std::invalid_argument(std::string(kWho) + "expected at most max_len " + std::to_string(cfg_.max_len) +
                                " positions, got " + what + " token ids of shape " + shape_str(ids.shape()));
  const std::vector<std::int64_t> values = ids.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] < 0 || values[i] >= V)
      throw std::invalid_argument(std::string(kWho) + "expected " + what + " token ids in [0, " + std::to_string(V) +
                                  ") (tgt_vocab), got " + std::to_string(values[i]) + " at row " +
                                  std::to_string(static_cast<std::int64_t>(i) / T) + ", position " +
                                  std::to_string(static_cast<std::int64_t>(i) % T));
}

// ids: (B,T) int64 -> (B,T,D), as Seq2SeqTransformer::embed
Tensor DecoderOnlyTransformer::embed_tokens(const Tensor& ids, std::int64_t start_pos) const {
  Tensor x = mul(embed->forward(ids), std::sqrt(static_cast<double>(cfg_.d_model)));  // (B,T,D)
  if (pos) x = add_positions(*pos, x, start_pos);
  return dropout->forward(x);
}

// x: (B,T,D) -> (B,T,D)
Tensor DecoderOnlyTransformer::run_layers(const Tensor& x, const Tensor& mask, std::vector<KVCache>* caches,
                                          std::int64_t start_pos) const {
  Tensor h = x;
  for (std::size_t i = 0; i < layers->size(); ++i)
    h = (*layers)[i].forward(h, mask, caches ? &(*caches)[i] : nullptr, start_pos, /*causal=*/true);
  return norm ? apply_norm(*norm, h) : h;  // pre-norm: the residual stream normalised once at the top
}

// h: (B,T,D) -> (B,T,V)
Tensor DecoderOnlyTransformer::project(const Tensor& h) const {
  return linear(h, embed->weight);  // tied: h E^T, (B,T,D) @ (D,V); no bias (autograd/ops_linear.cpp)
}

// tokens: (B,T) int64 -> (B,T,V)
Tensor DecoderOnlyTransformer::lm_logits(const Tensor& tokens) const {
  check_tokens("input", tokens);
  const std::int64_t T = tokens.size(1);
  const Tensor x = embed_tokens(tokens, 0);                            // (B,T,D)
  const Tensor h = run_layers(x, causal_mask(T, T), nullptr, 0);       // (B,T,D); position t sees 0..t
  return project(h);                                                   // (B,T,V)
}

// src: undefined or (B,0), tokens: (B,T) -> (B,T,V)
Tensor DecoderOnlyTransformer::forward(const Tensor& src, const Tensor& tokens) const {
  if (src.defined() && !(src.dim() == 2 && src.size(1) == 0))
    throw std::invalid_argument(std::string(kWho) +
                                "expected no source (an undefined tensor or (B,0)): a decoder-only model reads one "
                                "sequence, got src of shape " + shape_str(src.shape()));
  return run_forward_hooks(lm_logits(tokens));
}

// ---- generation: prefill and decode ---------------------------------------------------------

// prompt: (B,P) int64 -> a state holding the keys/values of positions 0..P-2
std::unique_ptr<DecodeState> DecoderOnlyTransformer::start_decoding(const Tensor& prompt) const {
  check_tokens("prompt", prompt);
  const std::int64_t P = prompt.size(1);
  if (P < 1)
    throw std::invalid_argument(std::string(kWho) + "expected a prompt of at least one token, (B,P) with P >= 1, got " +
                                shape_str(prompt.shape()));
  auto state = std::make_unique<DecoderOnlyState>();
  state->layers.resize(layers->size());
  state->first = prompt.narrow(1, P - 1, 1).clone();  // (B,1): the first decode_step reads it
  if (P > 1) {
    // Prefill: the first P-1 tokens in one forward; what it leaves behind is every layer's cache.
    const Tensor x = embed_tokens(prompt.narrow(1, 0, P - 1), 0);       // (B,P-1,D)
    run_layers(x, causal_mask(P - 1, P - 1), &state->layers, 0);        // fills k/v (B,Hkv,P-1,Dh)
  }
  return state;
}

// tokens: (B,1) int64 -> (B,V)
Tensor DecoderOnlyTransformer::decode_step(const Tensor& tokens, DecodeState& state) const {
  DecoderOnlyState& s = own_state(state);
  if (s.layers.empty()) s.layers.resize(layers->size());  // a default-constructed state
  const std::int64_t start_pos = s.length();               // this token's position
  check_tokens("newest", tokens);
  if (tokens.size(1) != 1)
    throw std::invalid_argument(std::string(kWho) + "decode_step expected one new token per row, (B,1), got " +
                                shape_str(tokens.shape()));
  if (start_pos >= cfg_.max_len)
    throw std::invalid_argument(std::string(kWho) + "decode_step expected a position below max_len " +
                                std::to_string(cfg_.max_len) + ", got position " + std::to_string(start_pos) +
                                " (the sequence is full)");
  if (s.first.defined() && s.first.size(0) != tokens.size(0))
    throw std::invalid_argument(std::string(kWho) + "decode_step expected a batch of " +
                                std::to_string(s.first.size(0)) + " rows (the state's), got tokens " +
                                shape_str(tokens.shape()));
  const std::int64_t B = tokens.size(0);
  const Tensor x = embed_tokens(tokens, start_pos);  // (B,1,D)
  // One query at the newest position sees every cached key and itself: no mask needed.
  const Tensor h = run_layers(x, Tensor(), &s.layers, start_pos);  // (B,1,D)
  return reshape(project(h), {B, -1});                              // (B,1,V) -> (B,V)
}

// prefix: (B,T) int64 -> (B,T,V)
Tensor DecoderOnlyTransformer::decode_prefix(const Tensor& prefix, const DecodeState& state) const {
  own_state(state);  // only checks that it is this kind of state: the prefix holds everything
  return lm_logits(prefix);
}

std::string DecoderOnlyTransformer::summary() const { return module_tree_summary(*this); }

}  // namespace sf::nn
