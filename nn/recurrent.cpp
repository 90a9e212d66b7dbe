#include "nn/recurrent.h"

#include <cmath>
#include <stdexcept>

#include "autograd/check.h"
#include "autograd/ops.h"

namespace sf::nn {

CellKind parse_cell_kind(const std::string& name) {
  if (name == "rnn") return CellKind::rnn;
  if (name == "gru") return CellKind::gru;
  if (name == "lstm") return CellKind::lstm;
  throw std::invalid_argument("recurrent cell: expected rnn, gru or lstm, got '" + name + "'");
}

const char* cell_kind_name(CellKind kind) {
  return kind == CellKind::rnn ? "rnn" : kind == CellKind::gru ? "gru" : "lstm";
}

std::int64_t gates_per_cell(CellKind kind) { return kind == CellKind::rnn ? 1 : kind == CellKind::gru ? 3 : 4; }

RnnAttention parse_rnn_attention(const std::string& name) {
  if (name == "none") return RnnAttention::None;
  if (name == "additive") return RnnAttention::Additive;
  if (name == "dot") return RnnAttention::Dot;
  if (name == "general") return RnnAttention::General;
  throw std::invalid_argument("rnn attention: expected none, additive, dot or general, got '" + name + "'");
}

const char* rnn_attention_name(RnnAttention kind) {
  switch (kind) {
    case RnnAttention::None: return "none";
    case RnnAttention::Additive: return "additive";
    case RnnAttention::Dot: return "dot";
    case RnnAttention::General: return "general";
  }
  return "?";
}

Recurrent::Recurrent(CellKind kind_, std::int64_t input, std::int64_t hidden, std::int64_t layers, bool both,
                     Generator& gen, Dtype dtype)
    : kind(kind_), input_size(input), hidden_size(hidden), num_layers(layers), bidirectional(both) {
  SF_EXPECT(input > 0 && hidden > 0 && layers > 0, "Recurrent: input_size, hidden_size and num_layers must be positive, got ",
            input, ", ", hidden, ", ", layers);
  const std::int64_t G = gates_per_cell(kind), H = hidden, D = both ? 2 : 1;
  const double a = 1.0 / std::sqrt(static_cast<double>(H));  // PyTorch's U(−1/√H, 1/√H) for every weight
  const auto uniform = [&](const Shape& shape) { return sub(mul(rand(shape, gen, dtype), 2 * a), a); };
  for (std::int64_t layer = 0; layer < layers; ++layer)
    for (std::int64_t dir = 0; dir < D; ++dir) {
      const std::string suffix = "_l" + std::to_string(layer) + (dir == 1 ? "_reverse" : "");
      const std::int64_t in = layer == 0 ? input : D * H;
      Weights w;
      w.weight_ih = register_parameter("weight_ih" + suffix, uniform({G * H, in}));
      w.weight_hh = register_parameter("weight_hh" + suffix, uniform({G * H, H}));
      w.bias_ih = register_parameter("bias_ih" + suffix, uniform({G * H}));
      w.bias_hh = register_parameter("bias_hh" + suffix, uniform({G * H}));
      weights_.push_back(w);
    }
}

const Recurrent::Weights& Recurrent::weights(std::int64_t layer, std::int64_t dir) const {
  return weights_.at(static_cast<std::size_t>(layer * (bidirectional ? 2 : 1) + dir));
}

std::vector<RecurrentState> Recurrent::zero_states(std::int64_t batch) const {
  const Dtype dtype = weights_.front().weight_hh.dtype();
  std::vector<RecurrentState> states;
  for (std::size_t k = 0; k < weights_.size(); ++k)
    states.push_back({zeros({batch, hidden_size}, dtype),
                      kind == CellKind::lstm ? zeros({batch, hidden_size}, dtype) : Tensor()});
  return states;
}

RecurrentState Recurrent::cell_step(const Weights& w, const Tensor& gx_t, const RecurrentState& state) const {
  const Tensor gh = linear(state.h, w.weight_hh, w.bias_hh);  // (B, G*H): the product that waits for h_{t-1}
  switch (kind) {
    case CellKind::rnn:
      return {tanh(add(gx_t, gh)), Tensor()};
    case CellKind::gru:
      return {gru_cell(gx_t, gh, state.h), Tensor()};
    case CellKind::lstm: {
      const Tensor gates = add(gx_t, gh);             // (B, 4H) = [i | f | g | o]
      const Tensor c = lstm_cell_state(gates, state.c);  // c_t = σ(f) ⊙ c_{t-1} + σ(i) ⊙ tanh(g)
      return {lstm_cell_output(gates, c), c};           // h_t = σ(o) ⊙ tanh(c_t)
    }
  }
  throw std::logic_error("Recurrent: unknown cell kind");
}

std::pair<Tensor, RecurrentState> Recurrent::run_direction(const Weights& w, const Tensor& x, const Tensor& pad,
                                                           bool reverse, const RecurrentState& initial) const {
  const std::int64_t T = x.size(1);
  // x_t W_ihᵀ + b_ih for every step in one product: (B, T, I) -> (B, T, G*H)
  const Tensor gx = linear(x, w.weight_ih, w.bias_ih);
  // Which steps have padding in some row (only those pay for the masking).
  std::vector<bool> padded(static_cast<std::size_t>(T), false);
  if (pad.defined()) {
    const std::vector<bool> p = pad.to_vector<bool>();
    const std::int64_t B = x.size(0);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < T; ++t) padded[t] = padded[t] || p[b * T + t];
  }
  RecurrentState state = initial;
  std::vector<Tensor> outputs(static_cast<std::size_t>(T));
  for (std::int64_t step = 0; step < T; ++step) {
    const std::int64_t t = reverse ? T - 1 - step : step;
    RecurrentState next = cell_step(w, squeeze(narrow(gx, 1, t, 1), 1), state);
    if (padded[t]) {  // a padded row keeps its state and outputs zeros
      const Tensor pad_t = narrow(pad, 1, t, 1);  // (B, 1), broadcast over H
      next.h = where(pad_t, state.h, next.h);
      if (next.c.defined()) next.c = where(pad_t, state.c, next.c);
      outputs[t] = masked_fill(next.h, pad_t, 0.0);
    } else {
      outputs[t] = next.h;
    }
    state = next;
  }
  return {stack(outputs, 1), state};  // (B, T, H)
}

Recurrent::Output Recurrent::forward(const Tensor& x, const Tensor& pad_mask,
                                     const std::vector<RecurrentState>& initial) const {
  SF_EXPECT(x.dim() == 3 && x.size(2) == input_size, "Recurrent: expected input (B, T, ", input_size, "), got ",
            x.shape());
  SF_EXPECT(!pad_mask.defined() || (pad_mask.dtype() == Dtype::Bool && pad_mask.shape() == Shape{x.size(0), x.size(1)}),
            "Recurrent: expected pad_mask bool (B, T) = ", Shape{x.size(0), x.size(1)}, ", got ",
            pad_mask.defined() ? pad_mask.shape() : Shape{});
  SF_EXPECT(initial.empty() || initial.size() == weights_.size(), "Recurrent: expected ", weights_.size(),
            " initial states (one per layer and direction), got ", initial.size());
  const std::vector<RecurrentState> start = initial.empty() ? zero_states(x.size(0)) : initial;
  const std::int64_t D = bidirectional ? 2 : 1;
  Output out;
  Tensor layer_input = x;
  for (std::int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<Tensor> directions;
    for (std::int64_t dir = 0; dir < D; ++dir) {
      const std::size_t k = static_cast<std::size_t>(layer * D + dir);
      auto [outputs, final_state] = run_direction(weights_[k], layer_input, pad_mask, dir == 1, start[k]);
      directions.push_back(outputs);
      out.final.push_back(final_state);
    }
    layer_input = D == 1 ? directions[0] : cat(directions, 2);  // (B, T, D*H)
  }
  out.outputs = run_forward_hooks(layer_input);  // trace mode sees the outputs (nn/module.h)
  return out;
}

std::vector<RecurrentState> Recurrent::step(const Tensor& x_t, const std::vector<RecurrentState>& states) const {
  SF_EXPECT(!bidirectional, "Recurrent::step: a bidirectional layer reads the whole sequence; step is for one direction");
  SF_EXPECT(x_t.dim() == 2 && x_t.size(1) == input_size, "Recurrent::step: expected x_t (B, ", input_size, "), got ",
            x_t.shape());
  SF_EXPECT(states.size() == weights_.size(), "Recurrent::step: expected ", weights_.size(), " states, got ",
            states.size());
  std::vector<RecurrentState> next;
  Tensor input = x_t;
  for (std::size_t k = 0; k < weights_.size(); ++k) {
    next.push_back(cell_step(weights_[k], linear(input, weights_[k].weight_ih, weights_[k].bias_ih), states[k]));
    input = next.back().h;
  }
  return next;
}

}  // namespace sf::nn
