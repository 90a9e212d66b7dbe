// EncoderOnlyTransformer: the encoder-only model (BERT's shape), built from the encoder-decoder's
// Encoder: bidirectional self-attention, so every position sees every other (padding aside).
// Pretrained as a masked language model; a sentence vector on top classifies.
//
// Letters: B batch, S sequence length, D d_model, V vocabulary, C classes.
//
//   ids (B,S) --embed + positions--> (B,S,D) --Encoder (padding mask only)--> h (B,S,D)
//     masked-LM head (num_classes == 0):  h E^T                      -> logits (B,S,V)
//     classification (num_classes = C):   pool(h) (B,D) --Linear--> -> logits (B,C)
//       pooling Mean: the average of h over the non-padding positions (the lecture's mean
//                     pooling); Cls: h at position 0 (a special first token the data puts there)
//
// embed(ids) = dropout(E[ids] * sqrt(D) + PE[positions]) as in Seq2SeqTransformer (RoPE and ALiBi
// add nothing there; they act inside the encoder's self-attention, symmetric in distance).
//
// Parameter names: embed.weight, pos.weight (learned only), encoder.layers.N.*, encoder.norm.*
// (pre-norm), classifier.weight / classifier.bias (classification only). One vocabulary,
// cfg.src_vocab; cfg.encoder_layers layers. It does not generate: start_decoding, decode_step
// and decode_prefix throw std::invalid_argument naming the architecture.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "autograd/generator.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/model.h"
#include "nn/transformer_layers.h"

namespace sf::nn {

class EncoderOnlyTransformer : public Model {
 public:
  // Validates cfg (arch must be EncoderOnly; num_classes >= 0; then ModelConfig::validate()).
  // Parameters are drawn from init_gen in this order: embed, pos, encoder, classifier; the
  // dropout generator is seeded from init_gen.next_u64() first, as in Seq2SeqTransformer.
  EncoderOnlyTransformer(const ModelConfig& cfg, Generator& init_gen, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "EncoderOnlyTransformer"; }

  // src (B,S) int64, tgt_in ignored (undefined or anything) -> the head's logits:
  // (B,S,V) for the masked-LM head, (B,C) for the classifier. Padding (pad_id) is masked.
  Tensor forward(const Tensor& src, const Tensor& tgt_in) const override;
  // src (B,S) -> h (B,S,D), the encoder's output (the representations). src must be int64
  // (B,S) with 1 <= S <= max_len and every id in [0, src_vocab); padding keys are masked, so a
  // non-padding position's h does not depend on what stands at the padded positions.
  Tensor encode(const Tensor& src) const;
  // h (B,S,D), src (B,S) -> (B,D): the sentence vector of cfg.pooling, built from autograd ops
  // (gradients flow into h). Mean: a row of only padding has nothing to average and throws
  // std::invalid_argument naming the row (rather than a silent zero vector: such a row is a
  // bug in the data). Cls: h[:, 0, :], whatever token stands there.
  Tensor pool(const Tensor& h, const Tensor& src) const;

  std::unique_ptr<DecodeState> start_decoding(const Tensor& src) const override;  // throws
  Tensor decode_step(const Tensor& tokens, DecodeState& state) const override;     // throws
  Tensor decode_prefix(const Tensor& prefix, const DecodeState& state) const override;  // throws

  const ModelConfig& config() const override { return cfg_; }
  Generator& dropout_generator() override { return dropout_gen_; }
  std::string summary() const override;

  std::shared_ptr<Embedding> embed;        // (V, D), also the masked-LM head (tied)
  std::shared_ptr<Module> pos;             // SinusoidalPositional or LearnedPositional; null for rope/alibi
  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<Linear> classifier;      // D -> C, with bias; null for the masked-LM head
  std::shared_ptr<Dropout> dropout;        // on the embeddings

 private:
  ModelConfig cfg_;
  Generator dropout_gen_;
};

}  // namespace sf::nn
