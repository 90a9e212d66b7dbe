// RnnSeq2Seq: the recurrent encoder-decoder that the Transformer replaced (model.arch = "rnn"), on
// the same Model interface, so training, decoding, evaluation and the explorer run it unchanged.
//
// Letters: B batch, S source length, T target length, D d_model, V vocabulary.
//
// Embeddings are scaled by √D, as in the Transformer: the table starts at N(0, 1/D) (nn/init.h),
// so the cells read unit-variance inputs from the first step (unscaled, their gates start nearly
// constant and the first few hundred steps learn little).
//
//   encoder   src embedding (D) -> a bidirectional recurrent stack, D/2 units per direction:
//             enc (B,S,D), one state h_s per source position that has read the sentence both ways
//   bridge    the decoder's first state, from the encoder's last ones: s_0 = tanh(W_b [h→_S; h←_1] + b_b)
//   decoder   one direction, D units, one token at a time:
//               additive (Bahdanau 2014): the previous state asks first,
//                 c_t = attend(s_{t-1}),  s_t = cell([y_{t-1}; c_t], s_{t-1})
//               dot, general (Luong 2015): the new state asks,
//                 s_t = cell(y_{t-1}, s_{t-1}),  c_t = attend(s_t)
//               none: no c_t at all; s_0 is everything the decoder knows of the source (the
//                 fixed-length vector that must carry the whole sentence: the bottleneck)
//   output    o_t = tanh(W_c [s_t; c_t]) (W_c s_t for none), logits_t = W_out o_t
//
// attend(q): e_i = score(q, enc_i) over the source positions i (padding blocked), α = softmax(e),
// c = Σ_i α_i enc_i: a soft alignment of the target word to the source words.
//   additive   e_i = vᵀ tanh(W_q q + W_k enc_i)
//   dot        e_i = q · enc_i
//   general    e_i = q · (W_a enc_i)
// The keys W_k enc_i and W_a enc_i are computed once per sentence, in start_decoding: the recurrent
// decoder's state plays the KV cache's part, and what it caches of the source is these keys.
//
// Training runs the same decoder step T times (teacher forcing): the recurrence makes position t
// wait for t − 1 even when every target token is known, where the Transformer's decoder computes
// all T positions in one pass.
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
#include "nn/recurrent.h"

namespace sf::nn {

class RnnSeq2Seq : public Model {
 public:
  // cfg.arch must be Arch::Rnn; init_gen draws the weights.
  RnnSeq2Seq(const ModelConfig& cfg, Generator& init_gen, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "RnnSeq2Seq"; }

  const ModelConfig& config() const override { return cfg_; }
  Generator& dropout_generator() override { return dropout_gen_; }
  std::string summary() const override;

  // src (B,S), tgt_in (B,T) int64 -> logits (B,T,V), one decoder step per target position.
  Tensor forward(const Tensor& src, const Tensor& tgt_in) const override;
  std::unique_ptr<DecodeState> start_decoding(const Tensor& src) const override;
  Tensor decode_step(const Tensor& tokens, DecodeState& state) const override;
  Tensor decode_prefix(const Tensor& prefix, const DecodeState& state) const override;

  // The alignment: for every target position, its attention weights over the source
  // (teacher-forced). src (B,S), tgt_in (B,T) -> (B,T,S), each row summing to 1 over the real
  // source tokens. Throws for rnn_attention = none (there is no alignment).
  Tensor alignment(const Tensor& src, const Tensor& tgt_in) const;

  // The encoder. src (B,S) -> (B,S,D); final: its last states, per layer and direction. A row of
  // src that is all padding is refused (std::invalid_argument, one line).
  Tensor encode(const Tensor& src, std::vector<RecurrentState>* final = nullptr) const;

  std::shared_ptr<Embedding> src_embed, tgt_embed;
  std::shared_ptr<Recurrent> encoder;  // bidirectional, D/2 units per direction
  std::shared_ptr<Linear> bridge;      // [h→_S; h←_1] (D) -> s_0 (D), one per decoder layer (D * layers)
  std::shared_ptr<Recurrent> decoder;  // one direction, D units
  std::shared_ptr<Linear> query_proj;  // additive: W_q (D -> D, no bias)
  std::shared_ptr<Linear> key_proj;    // additive: W_k; general: W_a (D -> D, no bias)
  Tensor score_v;                      // additive: v (D)
  std::shared_ptr<Linear> combine;     // W_c: [s; c] (2D) -> D, or s (D) -> D for none
  std::shared_ptr<Linear> out_proj;    // D -> V
  std::shared_ptr<Dropout> dropout;

 private:
  ModelConfig cfg_;
  mutable Generator dropout_gen_;

  // The source read once: the encoder's states, the padding mask, the last states per layer and
  // direction. Throws for a row that is all padding.
  struct Source {
    Tensor enc;                          // (B,S,D)
    Tensor pad;                          // (B,S) bool, true at padding
    std::vector<RecurrentState> final;   // the encoder's last states
  };
  Source read_source(const Tensor& src) const;

  struct Step;  // one decoder step's result (rnn_seq2seq.cpp)
  // One decoder step for B rows: y_prev (B) ids, the states before -> the states after, the
  // output vector o (B,D) (the logits are out_proj(o)) and the attention weights (B,S) (undefined for none).
  Step decoder_step(const Tensor& y_prev, const std::vector<RecurrentState>& states, const Tensor& enc,
                    const Tensor& keys, const Tensor& src_pad) const;
  // Bahdanau's e_i = vᵀ tanh(W_q q + W_k enc_i): q (B,D), keys = W_k enc (B,S,D) -> e (B,S).
  Tensor additive_scores(const Tensor& q, const Tensor& keys) const;
  // e = score(q, keys): q (B,D), keys (B,S,D) -> α (B,S), padding blocked; c = α enc (B,D).
  std::pair<Tensor, Tensor> attend(const Tensor& q, const Tensor& enc, const Tensor& keys, const Tensor& src_pad) const;
  // The keys the decoder scores against: W_k enc (additive), W_a enc (general), enc (dot).
  Tensor keys_of(const Tensor& enc) const;
  // s_0 for every decoder layer, from the encoder's final states.
  std::vector<RecurrentState> initial_states(const std::vector<RecurrentState>& enc_final) const;
  // Teacher-forced decoding from the initial states: logits (B,T,V), and the weights (B,T,S) when asked.
  Tensor run_decoder(const Tensor& tgt_in, std::vector<RecurrentState> states, const Tensor& enc, const Tensor& keys,
                     const Tensor& src_pad, Tensor* weights) const;
};

}  // namespace sf::nn
