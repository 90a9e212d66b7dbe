// The recurrent layers (nn/recurrent.h): backpropagation through time checked by finite
// differences, padding that changes nothing, one step at a time against the whole sequence, and
// bad input. (The cells' ops: tests/test_recurrent_ops.cpp; against torch.nn.RNN / GRU / LSTM:
// tests/test_reference.cpp.)
#include "test_util.h"

#include <vector>

#include "autograd/ops.h"
#include "nn/recurrent.h"

using Catch::Contains;
using namespace sf;
using sf::test::max_abs;
using sf::test::max_abs_diff;

namespace {

const std::vector<nn::CellKind> kKinds = {nn::CellKind::rnn, nn::CellKind::gru, nn::CellKind::lstm};

// (B, T) bool, true where t >= lengths[b].
Tensor pad_mask(const std::vector<std::int64_t>& lengths, std::int64_t T) {
  std::vector<bool> pad;
  for (const std::int64_t n : lengths)
    for (std::int64_t t = 0; t < T; ++t) pad.push_back(t >= n);
  return from_vector(pad, {static_cast<std::int64_t>(lengths.size()), T});
}

// Every output and final state, summed with fixed random weights: one number that depends on all of them.
Tensor weighted_total(const nn::Recurrent::Output& out, Generator& gen) {
  Tensor total = sum(mul(out.outputs, randn(out.outputs.shape(), gen, out.outputs.dtype())));
  for (const nn::RecurrentState& s : out.final) {
    total = add(total, sum(mul(s.h, randn(s.h.shape(), gen, s.h.dtype()))));
    if (s.c.defined()) total = add(total, sum(mul(s.c, randn(s.c.shape(), gen, s.c.dtype()))));
  }
  return total;
}

}  // namespace

TEST_CASE("Recurrent: backpropagation through time gradchecks, every cell, padded, bidirectional",
          "[recurrent][grad]") {
  for (const nn::CellKind kind : kKinds) {
    INFO("cell " << nn::cell_kind_name(kind));
    Generator gen(3);
    nn::Recurrent layer(kind, 3, 2, 2, true, gen, Dtype::Float64);
    const Tensor x = test::grad_input({2, 4, 3}, gen);
    const Tensor pad = pad_mask({4, 2}, 4);
    test::require_gradcheck(
        [&](const std::vector<Tensor>& in) {
          Generator weights(7);  // the same weights on every call
          return weighted_total(layer.forward(in[0], pad), weights);
        },
        test::with_parameters({x}, layer));
  }
}

TEST_CASE("Recurrent: a padded row gives what the row alone gives", "[recurrent]") {
  for (const nn::CellKind kind : kKinds) {
    INFO("cell " << nn::cell_kind_name(kind));
    Generator gen(5);
    nn::Recurrent layer(kind, 3, 4, 1, true, gen, Dtype::Float64);
    const Tensor x = randn({2, 6, 3}, gen, Dtype::Float64);
    const nn::Recurrent::Output batch = layer.forward(x, pad_mask({6, 4}, 6));
    const nn::Recurrent::Output alone = layer.forward(narrow(narrow(x, 0, 1, 1), 1, 0, 4));  // row 1, its 4 tokens
    CHECK(max_abs_diff(narrow(narrow(batch.outputs, 0, 1, 1), 1, 0, 4), alone.outputs) < 1e-14);
    CHECK(max_abs(narrow(narrow(batch.outputs, 0, 1, 1), 1, 4, 2)) == 0);  // padded steps output zeros
    for (std::size_t d = 0; d < 2; ++d) {  // forward: after token 4; reverse: after reading back to token 1
      CHECK(max_abs_diff(narrow(batch.final[d].h, 0, 1, 1), alone.final[d].h) < 1e-14);
      if (kind == nn::CellKind::lstm) CHECK(max_abs_diff(narrow(batch.final[d].c, 0, 1, 1), alone.final[d].c) < 1e-14);
    }
  }
}

TEST_CASE("Recurrent::step, one token at a time, is forward over the whole sequence", "[recurrent]") {
  for (const nn::CellKind kind : kKinds) {
    INFO("cell " << nn::cell_kind_name(kind));
    Generator gen(9);
    nn::Recurrent layer(kind, 3, 4, 2, false, gen, Dtype::Float64);
    const Tensor x = randn({2, 5, 3}, gen, Dtype::Float64);
    const nn::Recurrent::Output whole = layer.forward(x);
    std::vector<nn::RecurrentState> states = layer.zero_states(2);
    for (std::int64_t t = 0; t < 5; ++t) {
      states = layer.step(squeeze(narrow(x, 1, t, 1), 1), states);
      CHECK(max_abs_diff(states.back().h, squeeze(narrow(whole.outputs, 1, t, 1), 1)) < 1e-14);
    }
    for (std::size_t k = 0; k < states.size(); ++k) CHECK(max_abs_diff(states[k].h, whole.final[k].h) < 1e-14);
  }
}

TEST_CASE("Recurrent: PyTorch's parameter names and shapes", "[recurrent]") {
  Generator gen(1);
  nn::Recurrent lstm(nn::CellKind::lstm, 5, 3, 2, true, gen);
  const nn::NamedParameters named = lstm.named_parameters();
  REQUIRE(named.size() == 16);  // 2 layers x 2 directions x 4 tensors
  CHECK(named[0].first == "weight_ih_l0");
  CHECK(named[0].second.shape() == Shape{12, 5});
  CHECK(named[4].first == "weight_ih_l0_reverse");
  CHECK(named[8].first == "weight_ih_l1");
  CHECK(named[8].second.shape() == Shape{12, 6});  // the layer below's two directions side by side
  CHECK(named[9].second.shape() == Shape{12, 3});
  // every weight in U(−1/√H, 1/√H)
  for (const auto& [name, p] : named) CHECK(max_abs(p) <= 1 / std::sqrt(3.0));
  // parameters: L·D·G·H·(I_l + H + 2)
  CHECK(lstm.parameter_count() == 2 * 4 * 3 * (5 + 3 + 2) + 2 * 4 * 3 * (6 + 3 + 2));
}

TEST_CASE("Recurrent: bad input is one clear error", "[recurrent][errors]") {
  Generator gen(1);
  nn::Recurrent gru(nn::CellKind::gru, 3, 4, 1, true, gen);
  CHECK_THROWS_WITH(nn::parse_cell_kind("transformer"), Contains("expected rnn, gru or lstm") && Contains("transformer"));
  CHECK_THROWS_WITH(gru.forward(zeros({2, 5, 4})), Contains("expected input (B, T, 3)") && Contains("(2, 5, 4)"));
  CHECK_THROWS_WITH(gru.forward(zeros({2, 5, 3}), zeros({2, 4}, Dtype::Bool)), Contains("pad_mask") && Contains("(2, 4)"));
  CHECK_THROWS_WITH(gru.step(zeros({2, 3}), gru.zero_states(2)), Contains("bidirectional"));
  CHECK_THROWS_WITH(nn::Recurrent(nn::CellKind::rnn, 0, 4, 1, false, gen), Contains("must be positive"));
}
