// Seq2SeqTransformer: the encoder-decoder Transformer of "Attention Is All You Need" (2017),
// with the later options (pre-norm, RMSNorm, RoPE/ALiBi, GQA, SwiGLU) chosen by ModelConfig.
//
// Letters: B batch, S source length, T target length, D d_model, V target vocabulary.
//
//   source ids (B,S) --embed--> (B,S,D) --encoder--> memory (B,S,D) ------------------+
//   target ids (B,T) --embed--> (B,T,D) --decoder (masked self-attn, cross-attn)--> (B,T,D)
//                                        --output projection--> logits (B,T,V)
//
// embed(ids) = dropout(E[ids] * sqrt(D) + PE[positions]): the tables start with entries of
// size ~1/sqrt(D) (nn/init.h), so the scaling gives tokens unit variance, comparable to the
// positional vectors (the paper, sec. 3.4). RoPE and ALiBi add nothing here; they act inside
// self-attention (nn/transformer_layers.h).
//
// Options: share_embeddings uses one table for source and target tokens (a joint vocabulary);
// tie_output computes logits = h E_tgt^T with the target embedding instead of a separate
// output matrix (Press & Wolf 2017). Shared tensors are counted once in parameter_count().
//
// Training uses forward(src, tgt_in) (teacher forcing: the whole target at once, a causal
// mask keeping each position from seeing later ones). Generation uses encode() once, then
// decode_step() per new token with a DecoderCache holding every layer's keys and values, so
// each step costs one position instead of the whole prefix.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/model.h"
#include "nn/module.h"
#include "nn/transformer_layers.h"

namespace sf::nn {

// The decoder's keys and values during generation: one LayerCache per decoder layer.
struct DecoderCache {
  std::vector<LayerCache> layers;
  // Target positions cached so far (0 before the first step).
  std::int64_t length() const { return layers.empty() ? 0 : layers[0].self.length(); }
  // Keeps, in order, the batch rows batch_indices (int64 (B'), each in [0, B)); rows may repeat.
  // Every cached k/v (B,Hkv,T,Dh) becomes (B',Hkv,T,Dh).
  void reorder(const Tensor& batch_indices);
  // The same for the self-attention keys and values only; the cross-attention ones stay as they
  // are (EncoderDecoderState::reorder, where every row keeps reading its own source).
  void reorder_self(const Tensor& batch_indices);
};

// What the encoder hands the decoder (computed once per source batch).
struct Encoded {
  Tensor memory;    // (B,S,D), the encoder output
  Tensor src_mask;  // bool (B,1,1,S), TRUE = padding
};

// The encoder-decoder's DecodeState: the encoder output of every row and the decoder's cache.
struct EncoderDecoderState : DecodeState {
  Encoded enc;
  DecoderCache cache;
  Tensor bos;  // (B,1) int64, every row's BOS
  std::int64_t length() const override { return cache.length(); }
  Tensor first_tokens() const override { return bos; }
  void repeat_rows(std::int64_t times) override;  // memory, mask, BOS (and cache) rows, each `times` times
  // Which source sentence each row reads: 0..B-1 after start_decoding, b for the `times` rows
  // of sentence b after repeat_rows.
  std::vector<std::int64_t> row_source;
  // The self-attention cache's rows batch_indices (B), each taken from a row reading the same
  // source (as beam search exchanges the beams of one sentence; an error names the first row
  // that would not). The memory, its mask and the cross-attention keys and values hold the same
  // values in all of a sentence's rows, so they are left as they are: copying them every step
  // was most of beam search's cache traffic.
  void reorder(const Tensor& batch_indices) override;
  std::int64_t cache_bytes() const override {
    std::int64_t bytes = 0;
    for (const LayerCache& layer : cache.layers) bytes += layer.self.bytes() + layer.cross.bytes();
    return bytes;
  }
};

class Seq2SeqTransformer : public Model {
 public:
  // Validates cfg. Parameters are drawn from init_gen in a fixed order; the model's own
  // dropout generator is seeded from init_gen.next_u64(), so one seed fixes both.
  Seq2SeqTransformer(const ModelConfig& cfg, Generator& init_gen, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "Seq2SeqTransformer"; }

  // src: (B,S) int64, tgt_in: (B,T) int64 (the target shifted right, starting with BOS)
  // -> logits (B,T,V) for the next token at every target position (teacher forcing).
  // Source positions holding pad_id are masked out; target position t sees positions <= t.
  Tensor forward(const Tensor& src, const Tensor& tgt_in) const override;

  using Encoded = nn::Encoded;  // so both nn::Encoded and Seq2SeqTransformer::Encoded work
  // src: (B,S) int64 -> the encoder output and its padding mask.
  Encoded encode(const Tensor& src) const;
  // tgt_in: (B,T) int64 -> logits (B,T,V): the full target at once, no cache.
  Tensor decode(const Tensor& tgt_in, const Encoded& enc) const;

  // An empty cache with one LayerCache per decoder layer.
  DecoderCache new_cache() const;
  // tokens: (B,1) int64, the newest token of each row, at position cache.length()
  // -> logits (B,V) for the token after it. Appends the step's self-attention keys/values to
  // the cache; the cross-attention keys/values are computed from enc.memory on the first step
  // (an empty cache) and reused afterwards. Equal to the last row of decode() on the prefix.
  // A default-constructed DecoderCache (no layers) is sized on the first step.
  Tensor decode_step(const Tensor& tokens, const Encoded& enc, DecoderCache& cache) const;

  // The Model interface's generation (nn/model.h): start_decoding = encode(src) and an empty
  // cache; decode_step and decode_prefix as above on that state.
  std::unique_ptr<DecodeState> start_decoding(const Tensor& src) const override;
  Tensor decode_step(const Tensor& tokens, DecodeState& state) const override;
  Tensor decode_prefix(const Tensor& prefix, const DecodeState& state) const override;

  const ModelConfig& config() const override { return cfg_; }
  Generator& dropout_generator() override { return dropout_gen_; }  // for checkpoints (its state)
  // The module tree, one line per module: name, type and parameter count.
  std::string summary() const override;

  std::shared_ptr<Embedding> src_embed;  // (V_src, D)
  std::shared_ptr<Embedding> tgt_embed;  // (V_tgt, D); the same module as src_embed when shared
  std::shared_ptr<Module> src_pos;       // SinusoidalPositional or LearnedPositional; null for rope/alibi
  std::shared_ptr<Module> tgt_pos;
  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<Decoder> decoder;
  std::shared_ptr<Linear> output_proj;   // D -> V_tgt, no bias; null with tie_output
  std::shared_ptr<Dropout> dropout;      // on the embeddings

 private:
  // ids: (B,T) int64 -> (B,T,D) = dropout(E[ids] * sqrt(D) + PE[start_pos ..])
  Tensor embed(const Embedding& table, const Module* positions, const Tensor& ids, std::int64_t start_pos) const;
  // h: (B,T,D) -> logits (B,T,V)
  Tensor project(const Tensor& h) const;
  void check_ids(const char* what, const Tensor& ids) const;

  ModelConfig cfg_;
  Generator dropout_gen_;  // declared before use by the modules (they keep a pointer to it)
};

}  // namespace sf::nn
