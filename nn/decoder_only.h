// DecoderOnlyTransformer: the decoder-only language model (GPT's shape), built from the same
// layers as the encoder-decoder. The lecture's point: a decoder-only block IS an encoder layer
// (self-attention + feed-forward, with the same norms and residuals) given a causal mask, so
// position i sees only positions <= i: h_i = f(x_1..x_i). There is no cross-attention: a prompt
// (an instruction, or a source sentence followed by <sep>) and its continuation are one sequence.
//
// Letters: B batch, T sequence length, P prompt length, D d_model, V vocabulary.
//
//   ids (B,T) --embed + positions--> (B,T,D) --N causal EncoderLayers--> final norm (pre-norm)
//             --h E^T (the LM head tied to the embedding table)--> logits (B,T,V)
//
// Parameter names: embed.weight, pos.weight (learned positions only), layers.N.self_attn.*,
// layers.N.ffn.*, layers.N.norm1/norm2.*, norm.* (pre-norm only). One vocabulary,
// cfg.tgt_vocab (a joint tokenizer; cfg.src_vocab must be 0 or equal to it); cfg.decoder_layers
// layers. Every option of the config works as in the encoder-decoder: MHA/GQA/MQA (n_kv_heads),
// sinusoidal/learned/RoPE/ALiBi positions, pre/post-norm, LayerNorm/RMSNorm, the activations.
//
// Generation, the lecture's two phases: start_decoding(prompt) is the PREFILL, one forward over
// the prompt's first P - 1 tokens that fills every layer's KV cache (compute-bound: P queries at
// once); then each decode_step reads ONE token (first the prompt's last, then each new one) and
// appends its keys and values (memory-bound: one query reads the whole cache).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/model.h"
#include "nn/transformer_layers.h"

namespace sf::nn {

// A decoder-only model's DecodeState: one self-attention KV cache per layer.
struct DecoderOnlyState : DecodeState {
  std::vector<KVCache> layers;  // layers[i]: keys/values (B,Hkv,T,Dh) of layer i
  Tensor first;                 // (B,1) int64: the prompt's last token
  std::int64_t length() const override;
  Tensor first_tokens() const override { return first; }
  void repeat_rows(std::int64_t times) override;
  void reorder(const Tensor& batch_indices) override;  // any rows: nothing is shared
  std::int64_t cache_bytes() const override {
    std::int64_t bytes = 0;
    for (const KVCache& layer : layers) bytes += layer.bytes();
    return bytes;
  }
};

class DecoderOnlyTransformer : public Model {
 public:
  // Validates cfg (arch must be DecoderOnly). Parameters drawn from init_gen in a fixed order;
  // the dropout generator seeded from init_gen.next_u64(), as in Seq2SeqTransformer.
  DecoderOnlyTransformer(const ModelConfig& cfg, Generator& init_gen, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "DecoderOnlyTransformer"; }

  // The causal LM: src must be undefined or have no columns, (B,0) (a decoder-only model reads
  // one sequence); tokens (B,T) int64 -> logits (B,T,V), position t predicting token t + 1.
  Tensor forward(const Tensor& src, const Tensor& tokens) const override;
  // tokens (B,T) int64 -> logits (B,T,V) (the same as forward, without the src argument)
  Tensor lm_logits(const Tensor& tokens) const;

  // Prefill. prompt (B,P) int64, P >= 1, no padding (every row the same length): reads the
  // first P - 1 tokens into the KV cache; first_tokens() is the last column.
  std::unique_ptr<DecodeState> start_decoding(const Tensor& prompt) const override;
  // tokens (B,1) int64 at position state.length() -> logits (B,V); appends to the cache.
  Tensor decode_step(const Tensor& tokens, DecodeState& state) const override;
  // prefix (B,T): the whole sequence so far (prompt included) -> logits (B,T,V), no cache.
  Tensor decode_prefix(const Tensor& prefix, const DecodeState& state) const override;

  const ModelConfig& config() const override { return cfg_; }
  Generator& dropout_generator() override { return dropout_gen_; }
  std::string summary() const override;

  std::shared_ptr<Embedding> embed;                   // (V, D), also the LM head (tied)
  std::shared_ptr<Module> pos;                        // SinusoidalPositional or LearnedPositional; null for rope/alibi
  std::shared_ptr<ModuleList<EncoderLayer>> layers;   // run with a causal mask
  std::shared_ptr<Module> norm;                       // the final norm, pre-norm only
  std::shared_ptr<Dropout> dropout;                   // on the embeddings

 private:
  // ids (B,T) int64 at positions start_pos.. -> (B,T,D) = dropout(E[ids] * sqrt(D) + PE[start_pos ..])
  Tensor embed_tokens(const Tensor& ids, std::int64_t start_pos) const;
  // x (B,T,D) at positions start_pos.. -> h (B,T,D): every layer (mask: causal, or undefined
  // for one new position), then the final norm. caches: one KVCache per layer, or null.
  Tensor run_layers(const Tensor& x, const Tensor& mask, std::vector<KVCache>* caches, std::int64_t start_pos) const;
  // h (B,T,D) -> logits (B,T,V) = h E^T
  Tensor project(const Tensor& h) const;
  // Throws unless ids is (B,T) int64, T <= max_len, every id in [0, V); `what` names the
  // argument in the message ("prompt").
  void check_tokens(const char* what, const Tensor& ids) const;

  ModelConfig cfg_;
  Generator dropout_gen_;  // declared before the modules (they keep a pointer to it)
};

}  // namespace sf::nn
