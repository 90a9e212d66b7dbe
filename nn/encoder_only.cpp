#include "nn/encoder_only.h"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/positional.h"

namespace sf::nn {

// Letters: B batch, S sequence length, D d_model, V vocabulary, C classes.

namespace {

const char* const kNoGeneration =
    "EncoderOnlyTransformer: an encoder-only model does not generate (architecture encoder-only; generation needs "
    "decoder-only or encoder-decoder)";

// The config itself, after validate() and the encoder-only checks (so the constructor checks
// it before it draws anything).
const ModelConfig& validated(const ModelConfig& cfg) {
  if (cfg.arch != Arch::EncoderOnly)
    throw std::invalid_argument(std::string("EncoderOnlyTransformer: expected model.arch encoder-only, got ") +
                                arch_name(cfg.arch));
  if (cfg.num_classes < 0)
    throw std::invalid_argument("EncoderOnlyTransformer: num_classes must be >= 0 (0 = the masked-LM head), got " +
                                std::to_string(cfg.num_classes));
  cfg.validate();
  return cfg;
}

}  // namespace

EncoderOnlyTransformer::EncoderOnlyTransformer(const ModelConfig& cfg, Generator& init_gen, Dtype dtype)
    : cfg_(validated(cfg)), dropout_gen_(init_gen.next_u64()) {
  // Parameters are drawn in this order: embedding, positions, encoder, classifier.
  embed = register_module("embed",
                          std::make_shared<Embedding>(cfg.src_vocab, cfg.d_model, init_gen, cfg.pad_id, dtype));
  pos = make_positions(cfg, init_gen, dtype);
  if (pos) register_module("pos", pos);
  encoder = register_module("encoder", std::make_shared<Encoder>(cfg, init_gen, dropout_gen_, dtype));
  if (cfg.num_classes > 0)
    classifier = register_module("classifier",
                                 std::make_shared<Linear>(cfg.d_model, cfg.num_classes, init_gen, true, dtype));
  dropout = register_module("dropout", std::make_shared<Dropout>(cfg.dropout, dropout_gen_));
}

// src: (B,S) int64, each id in [0, V), 1 <= S <= max_len; otherwise one line saying what was found.
static void check_ids(const Tensor& src, const ModelConfig& cfg) {
  if (!src.defined() || src.dim() != 2 || src.dtype() != Dtype::Int64)
    throw std::invalid_argument("EncoderOnlyTransformer: expected token ids of shape (B,S) and dtype int64, got " +
                                (src.defined() ? std::string(dtype_name(src.dtype())) + " " + shape_str(src.shape())
                                               : std::string("an undefined tensor")));
  const std::int64_t B = src.size(0), S = src.size(1);
  if (S < 1 || S > cfg.max_len)
    throw std::invalid_argument("EncoderOnlyTransformer: sequence length " + std::to_string(S) +
                                " is outside 1 .. max_len " + std::to_string(cfg.max_len));
  const std::vector<std::int64_t> values = src.to_vector<std::int64_t>();  // row-major (B,S)
  for (std::int64_t i = 0; i < B * S; ++i)
    if (values[i] < 0 || values[i] >= cfg.src_vocab)
      throw std::invalid_argument("EncoderOnlyTransformer: token id " + std::to_string(values[i]) + " at (" +
                                  std::to_string(i / S) + ", " + std::to_string(i % S) +
                                  ") is outside the vocabulary [0, " + std::to_string(cfg.src_vocab) + ")");
}

// src: (B,S) int64 -> h (B,S,D)
Tensor EncoderOnlyTransformer::encode(const Tensor& src) const {
  check_ids(src, cfg_);
  const Tensor mask = padding_mask(src, cfg_.pad_id);  // (B,1,1,S), TRUE = padding key
  // embed(ids) = dropout(E[ids] * sqrt(D) + PE[0 .. S-1]), as Seq2SeqTransformer::embed
  Tensor x = mul(embed->forward(src), std::sqrt(static_cast<double>(cfg_.d_model)));  // (B,S,D)
  if (pos) x = add_positions(*pos, x, 0);
  x = dropout->forward(x);
  return encoder->forward(x, mask);  // (B,S,D); bidirectional: no causal mask
}

// h: (B,S,D), src: (B,S) -> (B,D)
Tensor EncoderOnlyTransformer::pool(const Tensor& h, const Tensor& src) const {
  if (!h.defined() || !src.defined() || h.dim() != 3 || src.dim() != 2 || h.size(0) != src.size(0) ||
      h.size(1) != src.size(1))
    throw std::invalid_argument("EncoderOnlyTransformer::pool: expected h (B,S,D) and ids (B,S) of the same B and S, "
                                "got h " + (h.defined() ? shape_str(h.shape()) : std::string("(undefined)")) +
                                " and ids " + (src.defined() ? shape_str(src.shape()) : std::string("(undefined)")));
  if (cfg_.pooling == Pooling::Cls) return squeeze(narrow(h, 1, 0, 1), 1);  // h[:, 0, :]: (B,1,D) -> (B,D)
  // Mean over the non-padding positions: sum_s keep[b,s] h[b,s,:] / sum_s keep[b,s].
  const Tensor keep = to_dtype(ne(src, static_cast<double>(cfg_.pad_id)), h.dtype());  // (B,S), 1 = token
  const Tensor count = sum(keep, {1}, true);                                           // (B,1)
  const std::vector<double> counts = count.to_vector<double>();
  for (std::size_t b = 0; b < counts.size(); ++b)
    if (counts[b] == 0)
      throw std::invalid_argument("EncoderOnlyTransformer::pool: row " + std::to_string(b) +
                                  " is all padding, so mean pooling has no token to average (pad_id " +
                                  std::to_string(cfg_.pad_id) + ")");
  const Tensor summed = sum(mul(h, unsqueeze(keep, 2)), {1});  // (B,S,D) * (B,S,1) -> (B,D)
  return div(summed, count);                                   // (B,D) / (B,1)
}

// src: (B,S) int64 -> (B,S,V) (masked-LM head) or (B,C) (classifier)
Tensor EncoderOnlyTransformer::forward(const Tensor& src, const Tensor& /*tgt_in*/) const {
  const Tensor h = encode(src);  // (B,S,D)
  if (classifier) return run_forward_hooks(classifier->forward(pool(h, src)));  // (B,D) -> (B,C)
  // tied: h E^T, (B,S,D) @ (D,V), no bias, the op of Seq2SeqTransformer::project with tie_output
  return run_forward_hooks(linear(h, embed->weight));
}

std::unique_ptr<DecodeState> EncoderOnlyTransformer::start_decoding(const Tensor&) const {
  throw std::invalid_argument(kNoGeneration);
}

Tensor EncoderOnlyTransformer::decode_step(const Tensor&, DecodeState&) const {
  throw std::invalid_argument(kNoGeneration);
}

Tensor EncoderOnlyTransformer::decode_prefix(const Tensor&, const DecodeState&) const {
  throw std::invalid_argument(kNoGeneration);
}

std::string EncoderOnlyTransformer::summary() const { return module_tree_summary(*this); }

}  // namespace sf::nn
