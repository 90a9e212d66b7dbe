// The fused recurrent steps (autograd/ops_recurrent.cpp): lstm_cell_state, lstm_cell_output and
// gru_cell. Gradient checks of every input, also on non-contiguous views and with only some inputs
// requiring grad; the fused ops against the same formulas composed from narrow, sigmoid, tanh, mul,
// add and sub (values and every gradient, float64 and float32); an LSTM and a GRU unrolled over five
// steps, gradchecked end to end (backpropagation through time); bad inputs.
//
// Letters: B batch, H hidden width, T time steps, In input width.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "test_util.h"

using namespace sf;
using sf::test::grad_input;
using sf::test::max_abs;
using sf::test::max_abs_diff;
using sf::test::require_gradcheck;

namespace {

constexpr std::int64_t kB = 3, kH = 4;  // the batch and hidden width of every test here
constexpr std::int64_t kT = 5, kIn = 3;  // the unrolled layers: time steps and input width

// Fused vs composed in float64, relative to the reference's largest element: the same formulas in
// another order, each op rounding at ~1e-16 on O(1) values; 1e-12 hides no wrong term.
using sf::test::kFloat64Tol;  // 1e-12, tests/test_util.h
// Fused vs composed, both in float32, the same measure: a unit is under ten operations, each
// rounding at ~6e-8, so the two agree to ~1e-6; a wrong term is off by 1e-2 and more.
using sf::test::kFloat32Tol;  // 1e-5, tests/test_util.h

// max |a - b| / max |b|: the difference relative to the reference's scale (not element by element,
// where a gradient that happens to be near 0 would turn rounding into a large ratio).
double rel_diff(const Tensor& a, const Tensor& b) {
  const double scale = max_abs(b);
  return scale > 0 ? max_abs_diff(a, b) / scale : max_abs_diff(a, b);
}

// A float64 leaf of N(0, scale²) values that requires grad (weights small enough that the gates
// do not saturate over the unrolled steps).
Tensor scaled_grad_input(const Shape& shape, Generator& gen, double scale) {
  Tensor t = mul(randn(shape, gen, Dtype::Float64), scale);
  t.requires_grad_();
  return t;
}

// A (rows, cols) view with non-unit row stride: time step 1 of a leaf (rows, 3, cols), the way a
// layer takes one step of x W_ih^T + b_ih computed for every step at once.
Tensor time_step_view(const Tensor& base) { return squeeze(narrow(base, 1, 1, 1), 1); }

// ---- the same formulas composed from primitives, each op with its own autograd node ----------

// gates: (B, 4H) = [i | f | g | o], c_prev: (B, H) -> c = σ(f) c_prev + σ(i) tanh(g): (B, H)
Tensor lstm_cell_state_composed(const Tensor& gates, const Tensor& c_prev) {
  const std::int64_t H = c_prev.size(1);
  const Tensor i = narrow(gates, 1, 0, H), f = narrow(gates, 1, H, H), g = narrow(gates, 1, 2 * H, H);
  return add(mul(sigmoid(f), c_prev), mul(sigmoid(i), tanh(g)));
}

// gates: (B, 4H), c: (B, H) -> h = σ(o) tanh(c): (B, H)
Tensor lstm_cell_output_composed(const Tensor& gates, const Tensor& c) {
  const std::int64_t H = c.size(1);
  return mul(sigmoid(narrow(gates, 1, 3 * H, H)), tanh(c));
}

// gx, gh: (B, 3H) = [r | z | n], h_prev: (B, H) -> h = (1 - z) n + z h_prev: (B, H)
Tensor gru_cell_composed(const Tensor& gx, const Tensor& gh, const Tensor& h_prev) {
  const std::int64_t H = h_prev.size(1);
  const Tensor r = sigmoid(add(narrow(gx, 1, 0, H), narrow(gh, 1, 0, H)));
  const Tensor z = sigmoid(add(narrow(gx, 1, H, H), narrow(gh, 1, H, H)));
  const Tensor n = tanh(add(narrow(gx, 1, 2 * H, H), mul(r, narrow(gh, 1, 2 * H, H))));
  return add(mul(sub(ones_like(z), z), n), mul(z, h_prev));
}

// The op's output and every input's gradient after backward of sum(v * f(inputs)).
struct Result {
  Tensor y;
  std::vector<Tensor> grads;
};

Result run(const GradcheckFn& f, std::vector<Tensor> inputs, const Tensor& v) {
  for (Tensor& t : inputs) t.zero_grad();
  Tensor y = f(inputs);
  y.backward(v);
  Result r{y.detach(), {}};
  for (const Tensor& t : inputs) r.grads.push_back(t.grad());
  return r;
}

// Runs `fused` and `composed` on the same random inputs of `shapes` (dtype) and requires the
// outputs and every input gradient to agree within `tol`, relative (rel_diff). Both give (B, H).
void require_fused_matches_composed(const GradcheckFn& fused, const GradcheckFn& composed,
                                    const std::vector<Shape>& shapes, Dtype dtype, double tol, std::uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> inputs;
  for (const Shape& shape : shapes) {
    Tensor t = randn(shape, gen, dtype);
    t.requires_grad_();
    inputs.push_back(t);
  }
  const Tensor v = randn({kB, kH}, gen, dtype);  // upstream gradient, non-uniform
  const Result a = run(fused, inputs, v), b = run(composed, inputs, v);
  INFO(dtype_name(dtype));
  REQUIRE(a.y.dtype() == dtype);
  CHECK(rel_diff(a.y, b.y) <= tol);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("gradient of input " << i);
    REQUIRE(a.grads[i].defined());
    REQUIRE(a.grads[i].shape() == inputs[i].shape());
    CHECK(rel_diff(a.grads[i], b.grads[i]) <= tol);
  }
}

// ---- unrolled layers: backpropagation through time ---------------------------------------------

// One LSTM layer over T steps, as torch.nn.LSTM computes it: the input half of the gates for every
// step at once, the recurrent half step by step; h and c carried from step to step.
// in: x (B, T, In), w_ih (4H, In), b_ih (4H), w_hh (4H, H), b_hh (4H), h0, c0 (B, H)
// -> every step's h, stacked: (B, T, H)
Tensor lstm_unrolled(const std::vector<Tensor>& in, bool fused) {
  const Tensor gx = linear(in[0], in[1], in[2]);  // (B, T, 4H)
  Tensor h = in[5], c = in[6];
  std::vector<Tensor> hs;
  for (std::int64_t t = 0; t < in[0].size(1); ++t) {
    const Tensor gates = add(squeeze(narrow(gx, 1, t, 1), 1), linear(h, in[3], in[4]));  // (B, 4H)
    c = fused ? lstm_cell_state(gates, c) : lstm_cell_state_composed(gates, c);
    h = fused ? lstm_cell_output(gates, c) : lstm_cell_output_composed(gates, c);
    hs.push_back(h);
  }
  return stack(hs, 1);
}

// One GRU layer over T steps, as torch.nn.GRU computes it; each step's gx is a (B, 3H) view of the
// (B, T, 3H) products, passed to gru_cell as it is (not contiguous).
// in: x (B, T, In), w_ih (3H, In), b_ih (3H), w_hh (3H, H), b_hh (3H), h0 (B, H) -> (B, T, H)
Tensor gru_unrolled(const std::vector<Tensor>& in, bool fused) {
  const Tensor gx = linear(in[0], in[1], in[2]);  // (B, T, 3H)
  Tensor h = in[5];
  std::vector<Tensor> hs;
  for (std::int64_t t = 0; t < in[0].size(1); ++t) {
    const Tensor gx_t = squeeze(narrow(gx, 1, t, 1), 1);  // (B, 3H), row stride T * 3H
    const Tensor gh = linear(h, in[3], in[4]);             // (B, 3H)
    h = fused ? gru_cell(gx_t, gh, h) : gru_cell_composed(gx_t, gh, h);
    hs.push_back(h);
  }
  return stack(hs, 1);
}

// The unrolled layers' inputs: x, w_ih, b_ih, w_hh, b_hh, h0 (and c0 for the LSTM); `gates` blocks.
std::vector<Tensor> unrolled_inputs(std::int64_t gates, bool with_c0, Generator& gen) {
  const double w_scale = 0.5;  // pre-activations ~N(0, 1): the gates neither saturate nor vanish
  std::vector<Tensor> in = {grad_input({kB, kT, kIn}, gen), scaled_grad_input({gates * kH, kIn}, gen, w_scale),
                            scaled_grad_input({gates * kH}, gen, w_scale),
                            scaled_grad_input({gates * kH, kH}, gen, w_scale),
                            scaled_grad_input({gates * kH}, gen, w_scale), grad_input({kB, kH}, gen)};
  if (with_c0) in.push_back(grad_input({kB, kH}, gen));
  return in;
}

}  // namespace

// ------------------------------------------------------------------------------- gradchecks

TEST_CASE("lstm_cell_state gradcheck of gates and c_prev", "[recurrent][lstm_cell][grad]") {
  Generator gen(1);
  auto f = [](const std::vector<Tensor>& in) { return lstm_cell_state(in[0], in[1]); };
  SECTION("contiguous inputs") { require_gradcheck(f, {grad_input({kB, 4 * kH}, gen), grad_input({kB, kH}, gen)}); }
  SECTION("gates a time step of (B, T, 4H), c_prev transposed") {
    Tensor gates_base = grad_input({kB, 3, 4 * kH}, gen), c_base = grad_input({kH, kB}, gen);
    REQUIRE_FALSE(time_step_view(gates_base).is_contiguous());
    require_gradcheck([](const std::vector<Tensor>& in) {
                        return lstm_cell_state(time_step_view(in[0]), transpose(in[1], 0, 1));
                      },
                      {gates_base, c_base});
  }
  SECTION("only gates require grad") {
    require_gradcheck(f, {grad_input({kB, 4 * kH}, gen), randn({kB, kH}, gen, Dtype::Float64)});
  }
  SECTION("only c_prev requires grad") {
    require_gradcheck(f, {randn({kB, 4 * kH}, gen, Dtype::Float64), grad_input({kB, kH}, gen)});
  }
}

TEST_CASE("lstm_cell_output gradcheck of gates and c", "[recurrent][lstm_cell][grad]") {
  Generator gen(2);
  auto f = [](const std::vector<Tensor>& in) { return lstm_cell_output(in[0], in[1]); };
  SECTION("contiguous inputs") { require_gradcheck(f, {grad_input({kB, 4 * kH}, gen), grad_input({kB, kH}, gen)}); }
  SECTION("gates a time step of (B, T, 4H), c transposed") {
    Tensor gates_base = grad_input({kB, 3, 4 * kH}, gen), c_base = grad_input({kH, kB}, gen);
    require_gradcheck([](const std::vector<Tensor>& in) {
                        return lstm_cell_output(time_step_view(in[0]), transpose(in[1], 0, 1));
                      },
                      {gates_base, c_base});
  }
  SECTION("only gates require grad") {
    require_gradcheck(f, {grad_input({kB, 4 * kH}, gen), randn({kB, kH}, gen, Dtype::Float64)});
  }
  SECTION("only c requires grad") {
    require_gradcheck(f, {randn({kB, 4 * kH}, gen, Dtype::Float64), grad_input({kB, kH}, gen)});
  }
}

TEST_CASE("gru_cell gradcheck of gx gh and h_prev", "[recurrent][grad]") {
  Generator gen(3);
  auto f = [](const std::vector<Tensor>& in) { return gru_cell(in[0], in[1], in[2]); };
  SECTION("contiguous inputs") {
    require_gradcheck(f, {grad_input({kB, 3 * kH}, gen), grad_input({kB, 3 * kH}, gen), grad_input({kB, kH}, gen)});
  }
  SECTION("gx a time step of (B, T, 3H), gh and h_prev transposed") {
    Tensor gx_base = grad_input({kB, 3, 3 * kH}, gen), gh_base = grad_input({3 * kH, kB}, gen),
           h_base = grad_input({kH, kB}, gen);
    require_gradcheck([](const std::vector<Tensor>& in) {
                        return gru_cell(time_step_view(in[0]), transpose(in[1], 0, 1), transpose(in[2], 0, 1));
                      },
                      {gx_base, gh_base, h_base});
  }
  SECTION("only gh requires grad") {
    require_gradcheck(f, {randn({kB, 3 * kH}, gen, Dtype::Float64), grad_input({kB, 3 * kH}, gen),
                          randn({kB, kH}, gen, Dtype::Float64)});
  }
  SECTION("only h_prev requires grad") {
    require_gradcheck(f, {randn({kB, 3 * kH}, gen, Dtype::Float64), randn({kB, 3 * kH}, gen, Dtype::Float64),
                          grad_input({kB, kH}, gen)});
  }
}

// ------------------------------------------------------------------------------- fused vs composed

TEST_CASE("lstm_cell_state fused matches composed in values and gradients", "[recurrent][lstm_cell][fused][grad]") {
  auto fused = [](const std::vector<Tensor>& in) { return lstm_cell_state(in[0], in[1]); };
  auto composed = [](const std::vector<Tensor>& in) { return lstm_cell_state_composed(in[0], in[1]); };
  const std::vector<Shape> shapes = {{kB, 4 * kH}, {kB, kH}};
  SECTION("float64") { require_fused_matches_composed(fused, composed, shapes, Dtype::Float64, kFloat64Tol, 11); }
  SECTION("float32") { require_fused_matches_composed(fused, composed, shapes, Dtype::Float32, kFloat32Tol, 12); }
}

TEST_CASE("lstm_cell_output fused matches composed in values and gradients", "[recurrent][lstm_cell][fused][grad]") {
  auto fused = [](const std::vector<Tensor>& in) { return lstm_cell_output(in[0], in[1]); };
  auto composed = [](const std::vector<Tensor>& in) { return lstm_cell_output_composed(in[0], in[1]); };
  const std::vector<Shape> shapes = {{kB, 4 * kH}, {kB, kH}};
  SECTION("float64") { require_fused_matches_composed(fused, composed, shapes, Dtype::Float64, kFloat64Tol, 13); }
  SECTION("float32") { require_fused_matches_composed(fused, composed, shapes, Dtype::Float32, kFloat32Tol, 14); }
}

TEST_CASE("gru_cell fused matches composed in values and gradients", "[recurrent][fused][grad]") {
  auto fused = [](const std::vector<Tensor>& in) { return gru_cell(in[0], in[1], in[2]); };
  auto composed = [](const std::vector<Tensor>& in) { return gru_cell_composed(in[0], in[1], in[2]); };
  const std::vector<Shape> shapes = {{kB, 3 * kH}, {kB, 3 * kH}, {kB, kH}};
  SECTION("float64") { require_fused_matches_composed(fused, composed, shapes, Dtype::Float64, kFloat64Tol, 15); }
  SECTION("float32") { require_fused_matches_composed(fused, composed, shapes, Dtype::Float32, kFloat32Tol, 16); }
}

TEST_CASE("each fused step is one graph node, and the gates it does not read get a zero gradient",
          "[recurrent][grad]") {
  Generator gen(17);
  Tensor gates = grad_input({kB, 4 * kH}, gen), c_prev = grad_input({kB, kH}, gen);
  Tensor c = lstm_cell_state(gates, c_prev);
  REQUIRE(std::string(c.grad_fn()->name()) == "LSTMCellState");
  REQUIRE(c.grad_fn()->inputs.size() == 2);
  Tensor h = lstm_cell_output(gates, c);
  REQUIRE(std::string(h.grad_fn()->name()) == "LSTMCellOutput");

  SECTION("lstm_cell_state: no gradient for o") {
    c.backward(ones({kB, kH}, Dtype::Float64));
    CHECK(max_abs(narrow(gates.grad(), 1, 3 * kH, kH)) == 0);
    CHECK(max_abs(narrow(gates.grad(), 1, 0, 3 * kH)) > 0);
  }
  SECTION("lstm_cell_output: no gradient for i, f, g (c is a leaf here)") {
    Tensor c_leaf = grad_input({kB, kH}, gen);
    lstm_cell_output(gates, c_leaf).backward(ones({kB, kH}, Dtype::Float64));
    CHECK(max_abs(narrow(gates.grad(), 1, 0, 3 * kH)) == 0);
    CHECK(max_abs(narrow(gates.grad(), 1, 3 * kH, kH)) > 0);
  }
  SECTION("gru_cell") {
    Tensor h_gru = gru_cell(grad_input({kB, 3 * kH}, gen), grad_input({kB, 3 * kH}, gen), c_prev);
    REQUIRE(std::string(h_gru.grad_fn()->name()) == "GRUCell");
    REQUIRE(h_gru.grad_fn()->inputs.size() == 3);
  }
}

// ------------------------------------------------------------------------------- through time

TEST_CASE("an LSTM unrolled over five steps gradchecks end to end", "[recurrent][lstm_cell][grad]") {
  Generator gen(21);
  const std::vector<Tensor> in = unrolled_inputs(4, /*with_c0=*/true, gen);
  SECTION("gradcheck of x, every weight and bias, h0 and c0") {
    require_gradcheck([](const std::vector<Tensor>& x) { return lstm_unrolled(x, /*fused=*/true); }, in);
  }
  SECTION("the same loop on the composed step gives the same values and gradients") {
    const Tensor v = randn({kB, kT, kH}, gen, Dtype::Float64);
    const Result a = run([](const std::vector<Tensor>& x) { return lstm_unrolled(x, true); }, in, v);
    const Result b = run([](const std::vector<Tensor>& x) { return lstm_unrolled(x, false); }, in, v);
    CHECK(rel_diff(a.y, b.y) <= kFloat64Tol);
    for (std::size_t i = 0; i < in.size(); ++i) {
      INFO("gradient of input " << i);
      CHECK(rel_diff(a.grads[i], b.grads[i]) <= kFloat64Tol);
    }
  }
}

TEST_CASE("a GRU unrolled over five steps gradchecks end to end", "[recurrent][grad]") {
  Generator gen(22);
  const std::vector<Tensor> in = unrolled_inputs(3, /*with_c0=*/false, gen);
  SECTION("gradcheck of x, every weight and bias, and h0") {
    require_gradcheck([](const std::vector<Tensor>& x) { return gru_unrolled(x, /*fused=*/true); }, in);
  }
  SECTION("the same loop on the composed step gives the same values and gradients") {
    const Tensor v = randn({kB, kT, kH}, gen, Dtype::Float64);
    const Result a = run([](const std::vector<Tensor>& x) { return gru_unrolled(x, true); }, in, v);
    const Result b = run([](const std::vector<Tensor>& x) { return gru_unrolled(x, false); }, in, v);
    CHECK(rel_diff(a.y, b.y) <= kFloat64Tol);
    for (std::size_t i = 0; i < in.size(); ++i) {
      INFO("gradient of input " << i);
      CHECK(rel_diff(a.grads[i], b.grads[i]) <= kFloat64Tol);
    }
  }
}

// ------------------------------------------------------------------------------- bad inputs

TEST_CASE("lstm_cell_state and lstm_cell_output reject bad shapes and dtypes naming the op and the shapes",
          "[recurrent][errors]") {
  using Catch::Contains;
  const Tensor gates = zeros({3, 16}), c = zeros({3, 4});
  SECTION("gates of the wrong width") {
    CHECK_THROWS_AS(lstm_cell_state(zeros({3, 12}), c), std::invalid_argument);
    CHECK_THROWS_WITH(lstm_cell_state(zeros({3, 12}), c), Contains("lstm_cell_state") && Contains("(B, 4H) = (3, 16)") &&
                                                               Contains("(3, 4)") && Contains("(3, 12)"));
    CHECK_THROWS_AS(lstm_cell_output(gates, zeros({3, 5})), std::invalid_argument);
    CHECK_THROWS_WITH(lstm_cell_output(gates, zeros({3, 5})),
                      Contains("lstm_cell_output") && Contains("(3, 5)") && Contains("(3, 16)"));
  }
  SECTION("a batch that does not match") {
    CHECK_THROWS_AS(lstm_cell_state(zeros({2, 16}), c), std::invalid_argument);
    CHECK_THROWS_WITH(lstm_cell_state(zeros({2, 16}), c),
                      Contains("lstm_cell_state") && Contains("batch") && Contains("(2, 16)") && Contains("(3, 4)"));
    CHECK_THROWS_AS(lstm_cell_output(gates, zeros({2, 4})), std::invalid_argument);
    CHECK_THROWS_WITH(lstm_cell_output(gates, zeros({2, 4})),
                      Contains("lstm_cell_output") && Contains("batch") && Contains("(3, 16)") && Contains("(2, 4)"));
  }
  SECTION("1-D inputs") {
    CHECK_THROWS_AS(lstm_cell_state(zeros({16}), c), std::invalid_argument);
    CHECK_THROWS_WITH(lstm_cell_state(zeros({16}), c),
                      Contains("lstm_cell_state") && Contains("gates of shape (B, 4H)") && Contains("(16,)"));
    CHECK_THROWS_AS(lstm_cell_state(gates, zeros({4})), std::invalid_argument);
    CHECK_THROWS_WITH(lstm_cell_state(gates, zeros({4})),
                      Contains("lstm_cell_state") && Contains("c_prev of shape (B, H)") && Contains("(4,)"));
    CHECK_THROWS_AS(lstm_cell_output(gates, zeros({4})), std::invalid_argument);
    CHECK_THROWS_WITH(lstm_cell_output(gates, zeros({4})), Contains("lstm_cell_output") && Contains("(4,)"));
  }
  SECTION("dtypes") {
    CHECK_THROWS_AS(lstm_cell_state(gates, zeros({3, 4}, Dtype::Float64)), std::invalid_argument);
    CHECK_THROWS_WITH(lstm_cell_state(gates, zeros({3, 4}, Dtype::Float64)),
                      Contains("lstm_cell_state") && Contains("dtypes differ"));
    CHECK_THROWS_AS(lstm_cell_output(zeros({3, 16}, Dtype::Int64), zeros({3, 4}, Dtype::Int64)),
                    std::invalid_argument);
    CHECK_THROWS_WITH(lstm_cell_output(zeros({3, 16}, Dtype::Int64), zeros({3, 4}, Dtype::Int64)),
                      Contains("lstm_cell_output") && Contains("float32 or float64"));
  }
}

TEST_CASE("gru_cell rejects bad shapes and dtypes naming the op and the shapes", "[recurrent][errors]") {
  using Catch::Contains;
  const Tensor g = zeros({3, 12}), h = zeros({3, 4});
  SECTION("gx or gh of the wrong width") {
    CHECK_THROWS_AS(gru_cell(zeros({3, 16}), g, h), std::invalid_argument);
    CHECK_THROWS_WITH(gru_cell(zeros({3, 16}), g, h), Contains("gru_cell") && Contains("gx of shape (B, 3H) = (3, 12)") &&
                                                          Contains("(3, 4)") && Contains("(3, 16)"));
    CHECK_THROWS_AS(gru_cell(g, zeros({3, 9}), h), std::invalid_argument);
    CHECK_THROWS_WITH(gru_cell(g, zeros({3, 9}), h),
                      Contains("gru_cell") && Contains("gh of shape (B, 3H) = (3, 12)") && Contains("(3, 9)"));
  }
  SECTION("a batch that does not match") {
    CHECK_THROWS_AS(gru_cell(g, zeros({2, 12}), h), std::invalid_argument);
    CHECK_THROWS_WITH(gru_cell(g, zeros({2, 12}), h),
                      Contains("gru_cell") && Contains("batch") && Contains("(2, 12)") && Contains("(3, 4)"));
    CHECK_THROWS_AS(gru_cell(g, g, zeros({2, 4})), std::invalid_argument);
    CHECK_THROWS_WITH(gru_cell(g, g, zeros({2, 4})),
                      Contains("gru_cell") && Contains("batch") && Contains("(3, 12)") && Contains("(2, 4)"));
  }
  SECTION("1-D inputs") {
    CHECK_THROWS_AS(gru_cell(zeros({12}), g, h), std::invalid_argument);
    CHECK_THROWS_WITH(gru_cell(zeros({12}), g, h), Contains("gru_cell") && Contains("gx") && Contains("(12,)"));
    CHECK_THROWS_AS(gru_cell(g, g, zeros({4})), std::invalid_argument);
    CHECK_THROWS_WITH(gru_cell(g, g, zeros({4})), Contains("gru_cell") && Contains("h_prev") && Contains("(4,)"));
  }
  SECTION("dtypes") {
    CHECK_THROWS_AS(gru_cell(g, zeros({3, 12}, Dtype::Float64), h), std::invalid_argument);
    CHECK_THROWS_WITH(gru_cell(g, zeros({3, 12}, Dtype::Float64), h),
                      Contains("gru_cell") && Contains("dtypes differ"));
  }
}
