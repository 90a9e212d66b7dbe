// Model: the one interface through which everything above nn/ (training, decoding, evaluation,
// the classroom commands, the bench) reaches a model. model.arch in the config chooses the
// architecture, make_model() builds it:
//
//   encoder-decoder  Seq2SeqTransformer (nn/seq2seq.h): a bidirectional encoder reads the
//                    source, a causal decoder cross-attends to it (translation)
//   decoder-only     DecoderOnlyTransformer (nn/decoder_only.h): one causal stack, no
//                    cross-attention; a prompt and its continuation are one sequence
//   encoder-only     EncoderOnlyTransformer (nn/encoder_only.h): one bidirectional stack with
//                    a masked-LM head or a classification head; it does not generate
//   rnn              RnnSeq2Seq (nn/rnn_seq2seq.h): the recurrent encoder-decoder that came
//                    before the Transformer (LSTM/GRU/RNN cells, optional attention; translation)
//
// Letters: B batch, S source length, T target length, V vocabulary.
//
// Training and teacher-forced evaluation call forward(src, tgt_in): logits for the next token
// at every target position, scored against tgt_out by cross-entropy. Generation has two phases
// (the lecture's prefill and decode):
//
//   auto state = model.start_decoding(src);   // prefill: read the source once (B rows)
//   Tensor tokens = state->first_tokens();     // (B,1): BOS, or a prompt's last token
//   Tensor logits = model.decode_step(tokens, *state);   // decode: (B,1) -> (B,V), one new
//                                                         // position, keys/values cached
//
// A DecodeState holds what the steps reuse: the encoder output and every layer's KV cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "autograd/generator.h"
#include "autograd/tensor.h"
#include "nn/module.h"
#include "nn/transformer_layers.h"

namespace sf::nn {

// What generation keeps from one step to the next, for B rows (sentences or beams).
class DecodeState {
 public:
  virtual ~DecodeState() = default;
  // Positions cached so far (right after start_decoding: 0 for the encoder-decoder, P - 1 for
  // a decoder-only model's prompt of P tokens).
  virtual std::int64_t length() const = 0;
  // (B,1) int64: the token each row's first decode_step reads (the encoder-decoder's BOS; the
  // last token of a decoder-only prompt, whose logits choose the first new token).
  virtual Tensor first_tokens() const = 0;
  // Before the first step: every row becomes `times` rows, row b*times + k a copy of row b (the
  // beams of sentence b). (B, ...) -> (B*times, ...).
  virtual void repeat_rows(std::int64_t times) = 0;
  // After a step: the cached keys and values of rows batch_indices (int64 (B')) replace the
  // cache, in order; rows may repeat. Beam search calls it once it chose which hypotheses go
  // on. Only rows that read the same source may be exchanged (the beams of one sentence): what
  // was computed from the source once per row stays where it is.
  virtual void reorder(const Tensor& batch_indices) = 0;
  // Bytes of every cached key and value (self-attention, and cross-attention's projected
  // encoder output): the memory decoding holds and each step reads.
  virtual std::int64_t cache_bytes() const = 0;
};

class Model : public Module {
 public:
  // The validated hyper-parameters the model was built from (sizes, pad id, max_len).
  virtual const ModelConfig& config() const = 0;
  // The generator of the model's dropout masks (checkpoints save and restore its state).
  virtual Generator& dropout_generator() = 0;
  // The module tree, one line per module: name, type and parameter count.
  virtual std::string summary() const = 0;

  // src: (B,S) int64, tgt_in: (B,T) int64 (the target shifted right, starting with BOS)
  // -> logits (B,T,V) for the next token at every target position (teacher forcing).
  virtual Tensor forward(const Tensor& src, const Tensor& tgt_in) const = 0;

  // Prefill. src: (B,S) int64, padded with pad_id -> the state for decoding B rows.
  virtual std::unique_ptr<DecodeState> start_decoding(const Tensor& src) const = 0;
  // Decode. tokens: (B,1) int64, each row's newest token, at position state.length()
  // -> logits (B,V) for the token after it; appends the step's keys and values to the state.
  virtual Tensor decode_step(const Tensor& tokens, DecodeState& state) const = 0;
  // Without a cache: prefix (B,T) int64, the whole target so far -> logits (B,T,V). The last
  // row equals decode_step's on the same prefix (slower; for teaching and tests).
  virtual Tensor decode_prefix(const Tensor& prefix, const DecodeState& state) const = 0;
};

// ---- parts every architecture is built from (nn/model.cpp) ------------------------------------

// The absolute positional table of cfg.positional (SinusoidalPositional or LearnedPositional),
// or null for rope/alibi, which act inside self-attention, and for none (no positions anywhere:
// the model cannot tell the order of its tokens; `scratchformer demo permutation`).
std::shared_ptr<Module> make_positions(const ModelConfig& cfg, Generator& init_gen, Dtype dtype);
// x: (B,T,D) -> x + PE[start_pos .. start_pos+T-1] through a module made by make_positions.
Tensor add_positions(const Module& positions, const Tensor& x, std::int64_t start_pos);
// k/v: (B,Hkv,T,Dh) -> (B',Hkv,T,Dh), the rows batch_indices (int64 (B')); an empty cache stays empty.
void reorder_kv(KVCache& cache, const Tensor& batch_indices);
// Throws, naming `who`, unless batch_indices is a defined int64 tensor of shape (B').
void check_batch_indices(const Tensor& batch_indices, const char* who);
// The module tree, one line per module indented by depth: "encoder (Encoder): 1234 parameters".
std::string module_tree_summary(const Module& model, const std::string& root_name = "model");

// The model of cfg.arch, its parameters drawn from init_gen (validates cfg).
std::unique_ptr<Model> make_model(const ModelConfig& cfg, Generator& init_gen, Dtype dtype = Dtype::Float32);

// "encoder-decoder": the config spelling of an architecture, and back (std::invalid_argument
// naming the value and the choices for an unknown one).
const char* arch_name(Arch arch);
Arch parse_arch(const std::string& name);

// Whether `arch` is one of the Transformers (encoder-decoder, decoder-only, encoder-only), not the
// recurrent rnn. What is built on their heads and layers (attention figures, FLOP and parameter
// formulas of attention layers, the explorer's head views) needs one.
bool is_transformer(Arch arch);
// Throws std::invalid_argument, one line naming `who`, unless is_transformer(arch):
// "attention: needs a Transformer (arch encoder-decoder, decoder-only or encoder-only), got arch rnn".
void require_transformer(Arch arch, const std::string& who);

}  // namespace sf::nn
