// Recurrent layers: what came before the Transformer. A recurrent network reads a sequence one
// token at a time, carrying a state from each step to the next:
//
//   h_t = cell(x_t, h_{t-1})
//
// Letters: B batch, T sequence length, I input width, H hidden width, G gates per cell.
//
//   rnn   (G = 1)  h_t = tanh(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh)               (Elman)
//   gru   (G = 3)  r, z gates and a candidate n; h_t = (1 − z) ⊙ n + z ⊙ h_{t-1}    (Cho et al. 2014)
//   lstm  (G = 4)  i, f, g, o; c_t = σ(f) ⊙ c_{t-1} + σ(i) ⊙ tanh(g), h_t = σ(o) ⊙ tanh(c_t)
//                                                                                (Hochreiter & Schmidhuber)
//
// Each step's gates come from two matrix products: x_t W_ihᵀ, done for every step at once before
// the loop (the inputs are all known), and h_{t-1} W_hhᵀ, which must wait for the step before:
// that wait is why a recurrent network cannot be parallel across positions, where attention's
// products are. The rest of a step is one fused op (autograd/ops_recurrent.cpp: lstm_cell_state,
// lstm_cell_output, gru_cell; rnn's is add + tanh). Training backpropagates through time through
// the autograd: the unrolled loop is an ordinary graph, T steps deep.
//
// Weights are laid out and named as PyTorch's torch.nn.RNN / GRU / LSTM (batch_first=True), so a
// state dict moves between the two unchanged (docs/checkpoint-format.md):
//   weight_ih_l{k}[_reverse]  (G*H, I) for layer 0, (G*H, D*H) above it (D = 2 when bidirectional)
//   weight_hh_l{k}[_reverse]  (G*H, H)
//   bias_ih_l{k}[_reverse], bias_hh_l{k}[_reverse]  (G*H)
// with the gate blocks stacked in PyTorch's order (LSTM i, f, g, o; GRU r, z, n), every one drawn
// from U(−1/√H, 1/√H) as PyTorch does.
//
// Padding: rows of a batch have different lengths, padded on the right (pad_mask true at padding).
// At a padded step a row's state does not change and its output is zero, so the forward
// direction's final state is the one after the row's last real token and the reverse direction
// starts at that token: the same numbers as PyTorch's packed sequences.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "nn/module.h"

namespace sf::nn {

enum class CellKind { rnn, gru, lstm };

// "rnn" | "gru" | "lstm" -> CellKind; any other name throws, listing the valid ones.
CellKind parse_cell_kind(const std::string& name);
const char* cell_kind_name(CellKind kind);
// Gates per cell: rnn 1, gru 3, lstm 4.
std::int64_t gates_per_cell(CellKind kind);

// How a recurrent decoder looks at the encoder's states (nn/rnn_seq2seq.h): not at all (the last
// state is all it gets: the fixed-vector bottleneck), or by an alignment score, Bahdanau's
// additive one or Luong's dot / general.
enum class RnnAttention { None, Additive, Dot, General };
// "none" | "additive" | "dot" | "general" -> RnnAttention; any other name throws, listing them.
RnnAttention parse_rnn_attention(const std::string& name);
const char* rnn_attention_name(RnnAttention kind);

// The state a cell carries between steps: h (B, H); c (B, H) for an LSTM, undefined otherwise.
struct RecurrentState {
  Tensor h;
  Tensor c;
};

class Recurrent : public Module {
 public:
  Recurrent(CellKind kind, std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers,
            bool bidirectional, Generator& gen, Dtype dtype = Dtype::Float32);
  const char* type_name() const override { return "Recurrent"; }

  struct Output {
    Tensor outputs;                     // (B, T, D*H): the last layer's h_t, both directions side by side
    std::vector<RecurrentState> final;  // per layer and direction (layer-major, forward first), as PyTorch's h_n
  };
  // x: (B, T, I); pad_mask: (B, T) bool, true at padding, or undefined (no padding); initial: the
  // states to start from, one per layer and direction, or empty (zeros).
  Output forward(const Tensor& x, const Tensor& pad_mask = Tensor(),
                 const std::vector<RecurrentState>& initial = {}) const;

  // One step of a one-direction stack, for decoding: x_t (B, I), one state per layer -> the new
  // states (the last one's h is the output).
  std::vector<RecurrentState> step(const Tensor& x_t, const std::vector<RecurrentState>& states) const;

  // Zero states for a batch of B rows, one per layer and direction.
  std::vector<RecurrentState> zero_states(std::int64_t batch) const;

  CellKind kind;
  std::int64_t input_size, hidden_size, num_layers;
  bool bidirectional;

  // The weights of layer `layer`, direction `dir` (0 forward, 1 reverse).
  struct Weights {
    Tensor weight_ih, weight_hh, bias_ih, bias_hh;
  };
  const Weights& weights(std::int64_t layer, std::int64_t dir) const;

 private:
  std::vector<Weights> weights_;  // layer-major, forward first
  // One step of one cell: gx_t = x_t W_ihᵀ + b_ih (B, G*H), the state before -> the state after.
  RecurrentState cell_step(const Weights& w, const Tensor& gx_t, const RecurrentState& state) const;
  // One direction of one layer over the whole sequence -> (its outputs (B, T, H), its final state).
  std::pair<Tensor, RecurrentState> run_direction(const Weights& w, const Tensor& x, const Tensor& keep,
                                                  bool reverse, const RecurrentState& initial) const;
};

}  // namespace sf::nn
