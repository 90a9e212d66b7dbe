// The encoder and decoder layers of the Transformer, their stacks, and the model configuration.
//
// Letters: B batch, S source length, T target length, D d_model, H heads, Hkv key/value heads,
// Dh head width (D / H), F d_ff, V vocabulary.
//
// One encoder layer = self-attention, then a feed-forward block; one decoder layer = masked
// self-attention, cross-attention over the encoder output ("memory"), then a feed-forward
// block. Each of these sublayers sits on a residual connection with a norm, placed either
//
//   post (the 2017 paper):  x = norm(x + dropout(sublayer(x)))
//   pre  (GPT-2, most since): x = x + dropout(sublayer(norm(x)))
//
// Pre-norm keeps an un-normalised residual stream from bottom to top, which trains stably
// without a long warm-up; the stack then needs one final norm on its output (Encoder::norm,
// Decoder::norm), otherwise the top layer's output would reach the next step un-normalised.
// The norm is LayerNorm (mean and variance) or RMSNorm (root mean square only).
//
// Positions: with sinusoidal or learned encodings the model adds them to the embeddings and
// attention sees no positions at all. With RoPE or ALiBi every SELF-attention layer applies
// them (encoder: symmetric |distance|, decoder: causal distance). Cross-attention never does:
// a source position and a target position are in different sentences, so their "distance"
// means nothing (as in T5, which puts relative biases only in self-attention).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/feed_forward.h"
#include "nn/module.h"
#include "nn/recurrent.h"

namespace sf::nn {

// The architecture (nn/model.h): which stacks a model has and how they connect.
// Rnn: the recurrent encoder-decoder that came before the Transformer (nn/rnn_seq2seq.h).
enum class Arch { EncoderDecoder, DecoderOnly, EncoderOnly, Rnn };
// How an encoder-only classifier turns its outputs into one sentence vector (nn/encoder_only.h).
enum class Pooling { Mean, Cls };
enum class NormKind { LayerNorm, RMSNorm };
enum class NormPosition { Pre, Post };
enum class PositionalKind { Sinusoidal, Learned, RoPE, ALiBi, None };  // None: no positions at all (order-blind)

// Strings (as in the TOML config) <-> enums; an unknown name throws, listing the accepted ones.
NormKind parse_norm(const std::string& name);                 // "layernorm" | "rmsnorm"
NormPosition parse_norm_position(const std::string& name);    // "pre" | "post"
PositionalKind parse_positional(const std::string& name);     // "sinusoidal" | "learned" | "rope" | "alibi" | "none"
AttentionKernel parse_attention(const std::string& name);     // "plain" | "tiled"
const char* norm_name(NormKind kind);
const char* norm_position_name(NormPosition position);
const char* positional_name(PositionalKind kind);
const char* attention_name(AttentionKernel kernel);

// The shape of the encoder-decoder Transformer. The defaults are a small model for a
// Multi30k-sized corpus; the 2017 paper's base model is d_model 512, n_heads 8, d_ff 2048,
// 6 + 6 layers, dropout 0.1, post-norm, sinusoidal.
struct ModelConfig {
  Arch arch = Arch::EncoderDecoder;  // encoder-decoder (translation), decoder-only, encoder-only, rnn; nn/model.h
  std::int64_t src_vocab = 0;        // source vocabulary size V_src (set from the tokenizer), e.g. 8000
  std::int64_t tgt_vocab = 0;        // target vocabulary size V_tgt (set from the tokenizer), e.g. 8000
  std::int64_t d_model = 256;        // model width D, e.g. 256 or 512
  std::int64_t n_heads = 4;          // attention heads H; D % H == 0, e.g. 8
  std::int64_t n_kv_heads = 0;       // key/value heads Hkv; 0 = n_heads (MHA), 1 = MQA, else GQA; H % Hkv == 0
  std::int64_t d_ff = 1024;          // feed-forward hidden width F, typically 4 D
  std::int64_t encoder_layers = 3;   // encoder layers, e.g. 6
  std::int64_t decoder_layers = 3;   // decoder layers, e.g. 6
  double dropout = 0.1;              // on embeddings, sublayer outputs and the FFN hidden layer, in [0, 1)
  double attention_dropout = 0.0;    // on the attention weights, in [0, 1)
  Activation activation = Activation::ReLU;        // feed-forward activation
  NormKind norm = NormKind::LayerNorm;             // LayerNorm or RMSNorm
  NormPosition norm_position = NormPosition::Pre;  // pre-norm (stable) or post-norm (the paper)
  PositionalKind positional = PositionalKind::Sinusoidal;  // how positions enter the model
  // How every attention layer computes softmax(q k^T / sqrt(Dh)) v: Plain (the composed ops,
  // (B,H,T,T) weights kept for backward) or Tiled (the online-softmax op, O(T) memory, needs
  // attention_dropout == 0). Same parameters and, to rounding, the same outputs and gradients.
  AttentionKernel attention = AttentionKernel::Plain;
  // Sliding-window self-attention: a query at position p reads keys j with |p - j| < W only
  // (causal: the W keys p-W+1..p); decoding keeps W positions per layer (a ring buffer). 0 = full.
  // Cross-attention is never windowed. 0 <= W <= max_len.
  std::int64_t attention_window = 0;
  RopeScaling rope_scaling = RopeScaling::None;  // positional RoPE only: interpolation or NTK-aware base
  double rope_factor = 1.0;                      // the scaling's factor s >= 1 (nn/relative_positions.h)
  bool share_embeddings = false;     // one table for source and target tokens (needs src_vocab == tgt_vocab)
  bool tie_output = false;           // the output projection reuses the target embedding matrix
  std::int64_t max_len = 256;        // longest sequence (rows of the sinusoidal / learned tables)
  std::int64_t pad_id = 0;           // padding token id (masked in attention, zero embedding row)
  std::int64_t bos_id = 2;           // the token decoding starts from (encoder-decoder)
  // encoder-only: 0 = the masked-LM head (logits over the vocabulary at every position); C > 0 =
  // the classification head (C classes) on a pooled sentence vector
  std::int64_t num_classes = 0;
  Pooling pooling = Pooling::Mean;   // encoder-only classifier: mean over non-padding tokens, or the first (CLS) token
  // arch rnn: the recurrent cell of encoder and decoder, and how the decoder attends (nn/recurrent.h)
  CellKind rnn_cell = CellKind::lstm;
  RnnAttention rnn_attention = RnnAttention::Additive;

  // Throws std::invalid_argument with one line naming the field and its value, e.g.
  // "ModelConfig: d_model 250 is not divisible by n_heads 8". For arch rnn only the fields the
  // recurrent model reads are checked, by validate_rnn().
  void validate() const;
  // Arch rnn (nn/model.cpp): vocabularies, d_model even (D/2 units per encoder direction), layers,
  // max_len, pad_id, dropout; the Transformer's fields are ignored, so they cannot fail it.
  void validate_rnn() const;
  std::int64_t kv_heads() const { return n_kv_heads == 0 ? n_heads : n_kv_heads; }  // Hkv
  std::int64_t head_dim() const { return d_model / n_heads; }                         // Dh
};

// The layers and stacks below read the sizes they need from a ModelConfig but do not call
// validate() (a layer needs no vocabulary); their submodules check what they use, and
// Seq2SeqTransformer validates the whole config.

// A LayerNorm or RMSNorm module over D, as the config says (so its parameters are named
// "weight" [and "bias"] directly under the name it is registered with).
std::shared_ptr<Module> make_norm(NormKind kind, std::int64_t dim, Dtype dtype);
// x: (..., D) -> (..., D) through a module made by make_norm.
Tensor apply_norm(const Module& norm, const Tensor& x);

class EncoderLayer : public Module {
 public:
  // init_gen initialises the weights; dropout_gen (not owned, must outlive the layer) draws
  // every dropout mask.
  EncoderLayer(const ModelConfig& cfg, Generator& init_gen, Generator& dropout_gen, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "EncoderLayer"; }

  // x: (B,S,D), src_mask: bool (B,1,1,S) TRUE = padding (or undefined) -> (B,S,D)
  // As a decoder-only block (nn/decoder_only.h) the mask is causal_mask(S, S_keys) instead,
  // causal = true (ALiBi then uses the signed distance, as DecoderLayer's self-attention), and
  // during generation cache holds the keys/values of positions 0..start_pos-1: x holds only
  // the new positions start_pos..start_pos+S-1, whose keys/values the self-attention appends.
  // The defaults (no cache, not causal) are the encoder's bidirectional layer.
  Tensor forward(const Tensor& x, const Tensor& src_mask, KVCache* cache = nullptr, std::int64_t start_pos = 0,
                 bool causal = false) const;

  NormPosition norm_position;
  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<FeedForward> ffn;
  std::shared_ptr<Module> norm1;      // before/after self-attention (LayerNorm or RMSNorm)
  std::shared_ptr<Module> norm2;      // before/after the feed-forward block
  std::shared_ptr<Dropout> dropout;   // on each sublayer's output, before the residual add
};

// The keys and values one decoder layer keeps between decoding steps.
struct LayerCache {
  KVCache self;   // masked self-attention: grows by one position per step
  KVCache cross;  // cross-attention: the projected encoder output, filled by start_decoding (the prefill)
                  // or else on the first step
  LayerCache() { cross.is_static = true; }
};

class DecoderLayer : public Module {
 public:
  DecoderLayer(const ModelConfig& cfg, Generator& init_gen, Generator& dropout_gen, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "DecoderLayer"; }

  // y: (B,T,D), memory: (B,S,D) (the encoder output) -> (B,T,D)
  // self_mask: bool broadcastable to (B,H,T,T_keys), usually causal_mask(T,T) (T_keys counts
  // the cached keys too; undefined = see every key). memory_mask: bool (B,1,1,S) or undefined.
  // With a cache, y holds only the new positions start_pos .. start_pos+T-1: self-attention
  // appends their keys/values; cross-attention fills its static cache on the first call and
  // afterwards does not read memory (it may then be undefined).
  Tensor forward(const Tensor& y, const Tensor& memory, const Tensor& self_mask, const Tensor& memory_mask,
                 LayerCache* cache = nullptr, std::int64_t start_pos = 0) const;

  NormPosition norm_position;
  std::shared_ptr<MultiHeadAttention> self_attn;   // masked (causal) self-attention
  std::shared_ptr<MultiHeadAttention> cross_attn;  // queries from y, keys/values from memory
  std::shared_ptr<FeedForward> ffn;
  std::shared_ptr<Module> norm1, norm2, norm3;     // one per sublayer
  std::shared_ptr<Dropout> dropout;                // on each sublayer's output
};

// The stack of encoder layers, plus the final norm under pre-norm.
class Encoder : public Module {
 public:
  Encoder(const ModelConfig& cfg, Generator& init_gen, Generator& dropout_gen, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "Encoder"; }

  // x: (B,S,D) embedded source, src_mask: bool (B,1,1,S) -> memory (B,S,D)
  Tensor forward(const Tensor& x, const Tensor& src_mask) const;

  std::shared_ptr<ModuleList<EncoderLayer>> layers;
  std::shared_ptr<Module> norm;  // pre-norm only (null under post-norm)
};

// The stack of decoder layers, plus the final norm under pre-norm.
class Decoder : public Module {
 public:
  Decoder(const ModelConfig& cfg, Generator& init_gen, Generator& dropout_gen, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "Decoder"; }

  // y: (B,T,D) embedded target, memory: (B,S,D) -> (B,T,D). Masks as DecoderLayer::forward.
  // caches: one LayerCache per layer (or null for no cache); y then holds positions
  // start_pos .. start_pos+T-1.
  Tensor forward(const Tensor& y, const Tensor& memory, const Tensor& self_mask, const Tensor& memory_mask,
                 std::vector<LayerCache>* caches = nullptr, std::int64_t start_pos = 0) const;

  std::shared_ptr<ModuleList<DecoderLayer>> layers;
  std::shared_ptr<Module> norm;  // pre-norm only (null under post-norm)
};

}  // namespace sf::nn
