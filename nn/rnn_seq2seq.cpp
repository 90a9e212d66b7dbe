#include "nn/rnn_seq2seq.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <tuple>

#include "autograd/check.h"
#include "autograd/exercise.h"
#include "autograd/ops.h"
#include "nn/init.h"

namespace sf::nn {

struct RnnSeq2Seq::Step {
  std::vector<RecurrentState> states;  // after the step, one per decoder layer
  Tensor output;                       // o (B, D), before the output projection
  Tensor weights;                      // (B, S), α over the source; undefined for none
};

namespace {

// validate() checks what an rnn config needs (ModelConfig::validate_rnn: an even d_model, ...);
// the architecture is checked here.
const ModelConfig& validated_rnn(const ModelConfig& cfg) {
  cfg.validate();
  SF_EXPECT(cfg.arch == Arch::Rnn, "RnnSeq2Seq: expected model.arch rnn, got ", arch_name(cfg.arch));
  return cfg;
}

// Rows `index` (int64 (B')) of every state of a stack.
std::vector<RecurrentState> rows_of(const std::vector<RecurrentState>& states, const Tensor& index) {
  std::vector<RecurrentState> out;
  for (const RecurrentState& s : states)
    out.push_back({index_select(s.h, 0, index), s.c.defined() ? index_select(s.c, 0, index) : Tensor()});
  return out;
}

std::int64_t bytes_of(const Tensor& t) {
  return t.defined() ? t.numel() * static_cast<std::int64_t>(dtype_size(t.dtype())) : 0;
}

// What a recurrent decoder carries from step to step: its states, and what it reads of the source
// (the encoder's states, the keys scored against, the padding).
struct RnnDecodeState : DecodeState {
  Tensor enc, keys, src_pad;               // (B,S,D), (B,S,D), bool (B,S)
  bool own_keys = false;                   // keys projected (additive, general), not enc itself (dot)
  std::vector<RecurrentState> initial;     // s_0 per decoder layer (decode_prefix starts again from it)
  std::vector<RecurrentState> states;      // after the steps so far
  Tensor bos;                              // (B,1) int64
  std::int64_t steps = 0;
  std::vector<std::int64_t> row_source;    // the source sentence each row reads

  std::int64_t length() const override { return steps; }
  Tensor first_tokens() const override { return bos; }

  void repeat_rows(std::int64_t times) override {
    SF_EXPECT(times >= 1, "RnnDecodeState::repeat_rows: expected times >= 1, got ", times);
    const std::int64_t B = enc.size(0);
    std::vector<std::int64_t> idx, source;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t k = 0; k < times; ++k) idx.push_back(b), source.push_back(row_source.at(b));
    const Tensor index = from_vector<std::int64_t>(idx, {B * times});
    enc = index_select(enc, 0, index), keys = index_select(keys, 0, index), src_pad = index_select(src_pad, 0, index);
    bos = index_select(bos, 0, index);
    initial = rows_of(initial, index), states = rows_of(states, index);
    row_source = std::move(source);
  }

  // The states' rows batch_indices, each from a row reading the same sentence (its beams).
  void reorder(const Tensor& batch_indices) override {
    check_batch_indices(batch_indices, "RnnDecodeState::reorder");
    const auto rows = static_cast<std::int64_t>(row_source.size());
    SF_EXPECT(batch_indices.size(0) == rows, "RnnDecodeState::reorder: expected ", rows,
              " batch indices (one per row), got ", batch_indices.size(0));
    const auto from = batch_indices.contiguous().to_vector<std::int64_t>();
    for (std::int64_t r = 0; r < rows; ++r) {
      SF_EXPECT(from[r] >= 0 && from[r] < rows, "RnnDecodeState::reorder: row ", r, " would take row ", from[r],
                ", expected a row in [0, ", rows, ")");
      SF_EXPECT(row_source[from[r]] == row_source[r], "RnnDecodeState::reorder: row ", r, " reads source sentence ",
                row_source[r], " but would take the state of row ", from[r], ", which reads sentence ",
                row_source[from[r]], "; only the rows of one sentence (its beams) may be exchanged");
    }
    states = rows_of(states, batch_indices);
  }

  // The states, and the encoder's states and keys that every step reads.
  std::int64_t cache_bytes() const override {
    std::int64_t bytes = bytes_of(enc) + (own_keys ? bytes_of(keys) : 0);
    for (const RecurrentState& s : states) bytes += bytes_of(s.h) + bytes_of(s.c);
    return bytes;
  }
};

RnnDecodeState& own_state(DecodeState& state) {
  auto* s = dynamic_cast<RnnDecodeState*>(&state);
  SF_EXPECT(s != nullptr, "RnnSeq2Seq: expected the state its own start_decoding made");
  return *s;
}

}  // namespace

RnnSeq2Seq::RnnSeq2Seq(const ModelConfig& cfg, Generator& init_gen, Dtype dtype)
    : cfg_(validated_rnn(cfg)), dropout_gen_(init_gen.next_u64()) {
  const std::int64_t D = cfg.d_model, L = cfg.decoder_layers;
  const bool additive = cfg.rnn_attention == RnnAttention::Additive;
  // Parameters are drawn in this order: embeddings, encoder, bridge, decoder, attention, output.
  src_embed = register_module("src_embed", std::make_shared<Embedding>(cfg.src_vocab, D, init_gen, cfg.pad_id, dtype));
  tgt_embed = register_module("tgt_embed", std::make_shared<Embedding>(cfg.tgt_vocab, D, init_gen, cfg.pad_id, dtype));
  encoder = register_module("encoder",
                            std::make_shared<Recurrent>(cfg.rnn_cell, D, D / 2, cfg.encoder_layers, true, init_gen, dtype));
  bridge = register_module("bridge", std::make_shared<Linear>(D, D * L, init_gen, true, dtype));
  // Bahdanau's decoder reads the context with the previous word: input [y_{t-1}; c_t] (2D).
  decoder = register_module("decoder",
                            std::make_shared<Recurrent>(cfg.rnn_cell, additive ? 2 * D : D, D, L, false, init_gen, dtype));
  if (additive) {
    query_proj = register_module("query_proj", std::make_shared<Linear>(D, D, init_gen, false, dtype));
    key_proj = register_module("key_proj", std::make_shared<Linear>(D, D, init_gen, false, dtype));
    score_v = register_parameter("score_v", normal({D}, 1.0 / std::sqrt(static_cast<double>(D)), init_gen, dtype));
  } else if (cfg.rnn_attention == RnnAttention::General) {
    key_proj = register_module("key_proj", std::make_shared<Linear>(D, D, init_gen, false, dtype));
  }
  combine = register_module(
      "combine", std::make_shared<Linear>(cfg.rnn_attention == RnnAttention::None ? D : 2 * D, D, init_gen, true, dtype));
  out_proj = register_module("out_proj", std::make_shared<Linear>(D, cfg.tgt_vocab, init_gen, true, dtype));
  dropout = register_module("dropout", std::make_shared<Dropout>(cfg.dropout, dropout_gen_));
}

std::string RnnSeq2Seq::summary() const { return module_tree_summary(*this); }

// src (B,S) -> enc (B,S,D): both directions' states side by side at every source position.
RnnSeq2Seq::Source RnnSeq2Seq::read_source(const Tensor& src) const {
  SF_EXPECT(src.dim() == 2 && src.dtype() == Dtype::Int64, "RnnSeq2Seq: expected src (B, S) int64, got ",
            src.shape(), " ", dtype_name(src.dtype()));
  // A row with no real token has nothing to encode and nothing to attend to (its weights would
  // be 0/0): refused, as PyTorch's pack_padded_sequence refuses a length of 0.
  const std::vector<std::int64_t> ids = contiguous(src).to_vector<std::int64_t>();
  const std::int64_t S = src.size(1);
  for (std::int64_t b = 0; b < src.size(0); ++b)
    SF_EXPECT(std::any_of(ids.begin() + b * S, ids.begin() + (b + 1) * S, [&](std::int64_t id) { return id != cfg_.pad_id; }),
              "RnnSeq2Seq: source row ", b, " is all padding (pad_id ", cfg_.pad_id,
              "); expected at least one real token per row");
  Source source;
  source.pad = eq(src, static_cast<double>(cfg_.pad_id));  // (B,S) true at padding
  const Tensor x = mul(src_embed->forward(src), std::sqrt(static_cast<double>(cfg_.d_model)));  // E[src] √D
  Recurrent::Output out = encoder->forward(dropout->forward(x), source.pad);
  source.enc = out.outputs;
  source.final = std::move(out.final);
  return source;
}

Tensor RnnSeq2Seq::encode(const Tensor& src, std::vector<RecurrentState>* final) const {
  Source source = read_source(src);
  if (final) *final = std::move(source.final);
  return source.enc;
}

// s_0 = tanh(W_b [h→_S; h←_1] + b_b), the top encoder layer's two last states, split into one
// state per decoder layer; an LSTM's memory cell starts at zero.
std::vector<RecurrentState> RnnSeq2Seq::initial_states(const std::vector<RecurrentState>& enc_final) const {
  const std::size_t top = enc_final.size() - 2;  // the last layer's forward, then its reverse state
  const Tensor last = cat({enc_final[top].h, enc_final[top + 1].h}, 1);  // (B, D)
  const Tensor s0 = tanh(bridge->forward(last));                         // (B, D * layers)
  const std::int64_t D = cfg_.d_model;
  std::vector<RecurrentState> states;
  for (std::int64_t l = 0; l < cfg_.decoder_layers; ++l) {
    const Tensor h = contiguous(narrow(s0, 1, l * D, D));
    states.push_back({h, cfg_.rnn_cell == CellKind::lstm ? zeros_like(h) : Tensor()});
  }
  return states;
}

Tensor RnnSeq2Seq::keys_of(const Tensor& enc) const {
  if (cfg_.rnn_attention == RnnAttention::Additive || cfg_.rnn_attention == RnnAttention::General)
    return key_proj->forward(enc);  // W_k enc or W_a enc, once per sentence
  return enc;
}

// Bahdanau's score: e_i = vᵀ tanh(W_q q + W_k enc_i). q (B,D), keys = W_k enc (B,S,D) -> e (B,S).
Tensor RnnSeq2Seq::additive_scores(const Tensor& q, const Tensor& keys) const {
  // EXERCISE(additive_attention): e (B,S) = vᵀ tanh(W_q q + keys_i) for every source position i:
  // query_proj is W_q, score_v is v (D); broadcast the projected query (B,1,D) over the S keys.
  // BEGIN SOLUTION
  const Tensor mixed = tanh(add(unsqueeze(query_proj->forward(q), 1), keys));  // (B,1,D) + (B,S,D)
  return squeeze(matmul(mixed, unsqueeze(score_v, 1)), 2);                     // (B,S,D)(D,1) -> (B,S)
  // END SOLUTION
}

// q (B,D) against keys (B,S,D) -> (α (B,S), c (B,D)).
std::pair<Tensor, Tensor> RnnSeq2Seq::attend(const Tensor& q, const Tensor& enc, const Tensor& keys,
                                             const Tensor& src_pad) const {
  // e (B,S); dot: e_i = q · enc_i; general: e_i = q · (W_a enc_i)
  const Tensor scores = cfg_.rnn_attention == RnnAttention::Additive ? additive_scores(q, keys)
                                                                    : squeeze(matmul(keys, unsqueeze(q, 2)), 2);
  const Tensor weights = softmax(masked_fill(scores, src_pad, -std::numeric_limits<double>::infinity()), -1);
  const Tensor context = squeeze(matmul(unsqueeze(weights, 1), enc), 1);  // Σ_i α_i enc_i: (B,1,S)(B,S,D) -> (B,D)
  return {weights, context};
}

RnnSeq2Seq::Step RnnSeq2Seq::decoder_step(const Tensor& y_prev, const std::vector<RecurrentState>& states,
                                          const Tensor& enc, const Tensor& keys, const Tensor& src_pad) const {
  const Tensor y = dropout->forward(mul(tgt_embed->forward(y_prev), std::sqrt(static_cast<double>(cfg_.d_model))));  // (B, D)
  Step step;
  Tensor context;
  switch (cfg_.rnn_attention) {
    case RnnAttention::Additive: {  // the previous state asks, the answer is read with y
      std::tie(step.weights, context) = attend(states.back().h, enc, keys, src_pad);
      step.states = decoder->step(cat({y, context}, 1), states);
      break;
    }
    case RnnAttention::Dot:
    case RnnAttention::General:  // the new state asks
      step.states = decoder->step(y, states);
      std::tie(step.weights, context) = attend(step.states.back().h, enc, keys, src_pad);
      break;
    case RnnAttention::None:  // only s_0 knows the source
      step.states = decoder->step(y, states);
      break;
  }
  const Tensor& s = step.states.back().h;
  step.output = tanh(combine->forward(context.defined() ? cat({s, context}, 1) : s));  // o (B, D)
  return step;
}

Tensor RnnSeq2Seq::run_decoder(const Tensor& tgt_in, std::vector<RecurrentState> states, const Tensor& enc,
                               const Tensor& keys, const Tensor& src_pad, Tensor* weights) const {
  SF_EXPECT(tgt_in.dim() == 2 && tgt_in.dtype() == Dtype::Int64, "RnnSeq2Seq: expected tgt_in (B, T) int64, got ",
            tgt_in.shape(), " ", dtype_name(tgt_in.dtype()));
  SF_EXPECT(tgt_in.size(0) == enc.size(0), "RnnSeq2Seq: src has ", enc.size(0), " rows, tgt_in ", tgt_in.size(0));
  std::vector<Tensor> outputs, alphas;
  for (std::int64_t t = 0; t < tgt_in.size(1); ++t) {  // teacher forcing: y_{t-1} is the gold word
    Step step = decoder_step(squeeze(narrow(tgt_in, 1, t, 1), 1), states, enc, keys, src_pad);
    outputs.push_back(step.output);
    if (weights) alphas.push_back(step.weights);
    states = std::move(step.states);
  }
  if (weights) *weights = stack(alphas, 1);  // (B,T,S)
  // The output projection does not feed the recurrence: one product for all T positions.
  return out_proj->forward(dropout->forward(stack(outputs, 1)));  // (B,T,D) -> (B,T,V)
}

Tensor RnnSeq2Seq::forward(const Tensor& src, const Tensor& tgt_in) const {
  const Source source = read_source(src);
  return run_forward_hooks(
      run_decoder(tgt_in, initial_states(source.final), source.enc, keys_of(source.enc), source.pad, nullptr));
}

Tensor RnnSeq2Seq::alignment(const Tensor& src, const Tensor& tgt_in) const {
  SF_EXPECT(cfg_.rnn_attention != RnnAttention::None,
            "RnnSeq2Seq::alignment: model.rnn_attention is none, so there is no alignment; expected additive, dot or general");
  const Source source = read_source(src);
  Tensor weights;
  run_decoder(tgt_in, initial_states(source.final), source.enc, keys_of(source.enc), source.pad, &weights);
  return weights;
}

std::unique_ptr<DecodeState> RnnSeq2Seq::start_decoding(const Tensor& src) const {
  auto state = std::make_unique<RnnDecodeState>();
  Source source = read_source(src);
  state->enc = source.enc;
  state->keys = keys_of(state->enc);
  state->own_keys = cfg_.rnn_attention == RnnAttention::Additive || cfg_.rnn_attention == RnnAttention::General;
  state->src_pad = source.pad;
  state->initial = state->states = initial_states(source.final);
  state->bos = full({src.size(0), 1}, static_cast<double>(cfg_.bos_id), Dtype::Int64);
  for (std::int64_t b = 0; b < src.size(0); ++b) state->row_source.push_back(b);
  return state;
}

// tokens (B,1) -> logits (B,V); the state moves one step on.
Tensor RnnSeq2Seq::decode_step(const Tensor& tokens, DecodeState& state) const {
  RnnDecodeState& s = own_state(state);
  SF_EXPECT(tokens.dim() == 2 && tokens.size(1) == 1 && tokens.size(0) == s.enc.size(0),
            "RnnSeq2Seq::decode_step: expected tokens (", s.enc.size(0), ", 1), got ", tokens.shape());
  Step step = decoder_step(squeeze(tokens, 1), s.states, s.enc, s.keys, s.src_pad);
  s.states = std::move(step.states);
  ++s.steps;
  return out_proj->forward(dropout->forward(step.output));  // (B, V)
}

// prefix (B,T) -> logits (B,T,V), from the first state again (no state is changed).
Tensor RnnSeq2Seq::decode_prefix(const Tensor& prefix, const DecodeState& state) const {
  const RnnDecodeState& s = own_state(const_cast<DecodeState&>(state));
  return run_decoder(prefix, s.initial, s.enc, s.keys, s.src_pad, nullptr);
}

}  // namespace sf::nn
