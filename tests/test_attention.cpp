// Attention (nn/attention.h) and the positions inside it (nn/relative_positions.h):
//   masks: causal and padding masks, TRUE = BLOCKED;
//   scaled_dot_product_attention against a naive per-(b,h,i,j) loop, its weights (rows sum to
//     1, blocked entries exactly 0, an all-blocked row gives zeros), a float64 gradient check of
//     q, k, v with an ALiBi bias (no mask, padding and causal masks: the gradcheck suite);
//   MultiHeadAttention against a naive loop (MHA, GQA, MQA), gradient checks w.r.t. the inputs
//     and every parameter (self and cross, ALiBi; RoPE: the gradcheck suite), causality, padding
//     invariance, errors;
//   RoPE: scores depend only on i - j, norms are kept, the pair convention; ALiBi slopes/bias;
//   the KV cache: step-by-step decoding equals the full sequence; a static cross cache equals
//     recomputing k/v from the encoder output.
//
// Letters: B batch, S source length, T target length, Tq query length, Tk key length,
// D d_model, H heads, Hkv key/value heads, Dh head width.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "nn/attention.h"
#include "nn/relative_positions.h"
#include "test_util.h"

using namespace sf;
using namespace sf::nn;
using sf::test::grad_input;
using sf::test::max_abs_diff;
using sf::test::require_gradcheck;
using sf::test::with_parameters;
using Catch::Contains;

namespace {

// Naive float64 loops vs the composed ops in float64: the same sums of a few O(1) terms in
// another order; rounding is ~1e-16 per op, so 1e-12 has room without hiding a wrong term.
constexpr double kNaiveTol = 1e-12;
// Softmax rows sum to 1: each row is normalised by one float64 division; 1e-6 is the bound the
// contract promises (and far above the ~1e-16 we get).
constexpr double kRowSumTol = 1e-6;
// float32 step-by-step decoding vs the whole sequence at once: the same math over differently
// shaped matmuls (other summation order, other BLAS kernels); float32 rounds at ~6e-8 relative
// and the outputs here are O(1), so 1e-5 leaves a wide margin and still catches any real error
// (a wrong position or a missing key changes outputs by ~1e-1).
constexpr double kCacheTol = 1e-5;
// RoPE in float64: angles up to ~100 rad carry ~1e-14 absolute error in cos/sin; a dot
// product of Dh = 8 such terms stays below 1e-12.
constexpr double kRopeTol = 1e-12;

// True when mask (bool, broadcastable to (B,H,Tq,Tk), possibly undefined) blocks (b,h,i,j):
// reads the mask with NumPy broadcasting written out (size-1 dims read index 0).
bool blocked(const Tensor& mask, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  if (!mask.defined()) return false;
  const std::int64_t full[4] = {b, h, i, j};
  Shape idx(mask.dim());
  for (std::int64_t d = 0; d < mask.dim(); ++d) {
    const std::int64_t src = 4 - mask.dim() + d;
    idx[d] = mask.size(d) == 1 ? 0 : full[src];
  }
  return mask.at(idx) != 0;
}

// The values of a bool tensor, row-major (read through int64: Tensor::to_vector<bool> has no
// instantiation in tensor.cpp).
std::vector<bool> as_bools(const Tensor& t) {
  std::vector<bool> out;
  for (std::int64_t x : t.to_vector<std::int64_t>()) out.push_back(x != 0);
  return out;
}

// bias (H,Tq,Tk) or undefined, read at (h,i,j).
double bias_at(const Tensor& bias, std::int64_t h, std::int64_t i, std::int64_t j) {
  return bias.defined() ? bias.at({h, i, j}) : 0.0;
}

// Naive attention, one (b,h,i) row at a time, by definition. q: (B,H,Tq,Dh), k, v:
// (B,Hkv,Tk,Dh) with H a multiple of Hkv (query head h reads k/v head h / (H/Hkv)).
// Returns out (B,H,Tq,Dh) and, through weights, (B,H,Tq,Tk). Shares no code with the ops.
Tensor naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& bias,
                       Tensor* weights = nullptr) {
  const std::int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Dh = q.size(3);
  const std::int64_t Hkv = k.size(1), Tk = k.size(2), G = H / Hkv;
  Tensor out = zeros({B, H, Tq, Dh}, Dtype::Float64);
  Tensor w_all = zeros({B, H, Tq, Tk}, Dtype::Float64);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < Tq; ++i) {
        std::vector<double> s(Tk);
        double m = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < Tk; ++j) {
          if (blocked(mask, b, h, i, j)) {
            s[j] = -std::numeric_limits<double>::infinity();
            continue;
          }
          double dot = 0;
          for (std::int64_t d = 0; d < Dh; ++d) dot += q.at({b, h, i, d}) * k.at({b, h / G, j, d});
          s[j] = dot / std::sqrt(static_cast<double>(Dh)) + bias_at(bias, h, i, j);
          m = std::max(m, s[j]);
        }
        if (m == -std::numeric_limits<double>::infinity()) continue;  // all blocked: zeros
        double total = 0;
        for (std::int64_t j = 0; j < Tk; ++j) total += std::exp(s[j] - m);
        for (std::int64_t j = 0; j < Tk; ++j) {
          const double w = std::exp(s[j] - m) / total;
          w_all.set({b, h, i, j}, w);
          for (std::int64_t d = 0; d < Dh; ++d) out.set({b, h, i, d}, out.at({b, h, i, d}) + w * v.at({b, h / G, j, d}));
        }
      }
  if (weights) *weights = w_all;
  return out;
}

// x: (B,T,n*Dh) -> (B,n,T,Dh) by loops (the head split, written out).
Tensor split_heads_naive(const Tensor& x, std::int64_t n) {
  const std::int64_t B = x.size(0), T = x.size(1), Dh = x.size(2) / n;
  Tensor out = zeros({B, n, T, Dh}, Dtype::Float64);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < n; ++h)
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t d = 0; d < Dh; ++d) out.set({b, h, t, d}, x.at({b, t, h * Dh + d}));
  return out;
}

// MultiHeadAttention (no positions, no cache) recomputed with the naive loop: project with the
// module's own Linear layers, split heads by loops, attend naively, merge, out_proj.
Tensor naive_mha(const MultiHeadAttention& m, const Tensor& x_q, const Tensor& x_kv, const Tensor& mask) {
  NoGradGuard no_grad;
  const Tensor q = split_heads_naive(m.q_proj->forward(x_q), m.n_heads);
  const Tensor k = split_heads_naive(m.k_proj->forward(x_kv), m.n_kv_heads);
  const Tensor v = split_heads_naive(m.v_proj->forward(x_kv), m.n_kv_heads);
  const Tensor heads = naive_attention(q, k, v, mask, Tensor());  // (B,H,Tq,Dh)
  const std::int64_t B = x_q.size(0), Tq = x_q.size(1), H = m.n_heads, Dh = m.head_dim;
  Tensor merged = zeros({B, Tq, H * Dh}, Dtype::Float64);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t t = 0; t < Tq; ++t)
        for (std::int64_t d = 0; d < Dh; ++d) merged.set({b, t, h * Dh + d}, heads.at({b, h, t, d}));
  return m.out_proj->forward(merged);
}

// A padding mask (B,1,1,S) for lengths {S, S-2}: the second sequence ends with two pads.
Tensor two_pads_mask(std::int64_t batch, std::int64_t s) {
  Tensor ids = ones({batch, s}, Dtype::Int64);
  ids.set({batch - 1, s - 1}, 0);
  ids.set({batch - 1, s - 2}, 0);
  return padding_mask(ids, 0);
}

}  // namespace

// ---- masks -------------------------------------------------------------------------------

TEST_CASE("causal_mask blocks exactly the future keys", "[attention][mask][causal]") {
  const Tensor m = causal_mask(3, 3);
  REQUIRE(m.dtype() == Dtype::Bool);
  REQUIRE(m.shape() == Shape{3, 3});
  const std::vector<bool> want{false, true, true, false, false, true, false, false, false};
  REQUIRE(as_bools(m) == want);
  // Decoding with a cache: 2 queries at positions 3 and 4 over keys 0..4.
  const Tensor step = causal_mask(2, 5, 3);
  REQUIRE(step.shape() == Shape{2, 5});
  const std::vector<bool> want_step{false, false, false, false, true, false, false, false, false, false};
  REQUIRE(as_bools(step) == want_step);
}

TEST_CASE("padding_mask marks pad ids as blocked with shape B 1 1 S", "[attention][mask][padding]") {
  const Tensor ids = from_vector<std::int64_t>({5, 7, 0, 0, 3, 0, 9, 1}, {2, 4});
  const Tensor m = padding_mask(ids, 0);
  REQUIRE(m.dtype() == Dtype::Bool);
  REQUIRE(m.shape() == Shape{2, 1, 1, 4});
  const std::vector<bool> want{false, false, true, true, false, true, false, false};
  REQUIRE(as_bools(m) == want);
  REQUIRE_THROWS_WITH(padding_mask(zeros({2, 4}), 0), Contains("int64") && Contains("float32"));
}

// ---- scaled dot-product attention --------------------------------------------------------

TEST_CASE("scaled_dot_product_attention matches a naive loop", "[attention][mask][padding][causal][alibi]") {
  Generator gen(101);
  const std::int64_t B = 2, H = 3, Tq = 4, Tk = 5, Dh = 4;
  const Tensor q = randn({B, H, Tq, Dh}, gen, Dtype::Float64);
  const Tensor k = randn({B, H, Tk, Dh}, gen, Dtype::Float64);
  const Tensor v = randn({B, H, Tk, Dh}, gen, Dtype::Float64);
  const Tensor bias = alibi_bias(H, Tq, Tk, 1, false, Dtype::Float64);
  struct Case {
    const char* what;
    Tensor mask, bias;
  };
  const std::vector<Case> cases{{"no mask", Tensor(), Tensor()},
                                {"padding", two_pads_mask(B, Tk), Tensor()},
                                {"causal", causal_mask(Tq, Tk, 1), Tensor()},
                                {"alibi", Tensor(), bias},
                                {"padding and alibi", two_pads_mask(B, Tk), bias}};
  for (const Case& c : cases) {
    INFO(c.what);
    Tensor weights, want_weights;
    const Tensor out = scaled_dot_product_attention(q, k, v, c.mask, c.bias, &weights);
    const Tensor want = naive_attention(q, k, v, c.mask, c.bias, &want_weights);
    REQUIRE(out.shape() == Shape{B, H, Tq, Dh});
    REQUIRE(weights.shape() == Shape{B, H, Tq, Tk});
    REQUIRE(max_abs_diff(out, want) <= kNaiveTol);
    REQUIRE(max_abs_diff(weights, want_weights) <= kNaiveTol);
  }
}

TEST_CASE("attention weights rows sum to one and blocked entries are exactly zero", "[attention][mask][padding][causal]") {
  Generator gen(102);
  const std::int64_t B = 2, H = 2, T = 5, Dh = 4;
  const Tensor q = randn({B, H, T, Dh}, gen, Dtype::Float64);
  const Tensor k = randn({B, H, T, Dh}, gen, Dtype::Float64);
  const Tensor v = randn({B, H, T, Dh}, gen, Dtype::Float64);
  const Tensor pad = two_pads_mask(B, T);
  const Tensor causal = causal_mask(T, T);
  for (const Tensor& mask : {pad, causal}) {
    Tensor w;
    scaled_dot_product_attention(q, k, v, mask, Tensor(), &w);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < T; ++i) {
          double row = 0;
          for (std::int64_t j = 0; j < T; ++j) {
            if (blocked(mask, b, h, i, j)) REQUIRE(w.at({b, h, i, j}) == 0.0);
            else REQUIRE(w.at({b, h, i, j}) > 0.0);
            row += w.at({b, h, i, j});
          }
          REQUIRE(std::abs(row - 1.0) <= kRowSumTol);
        }
  }
}

TEST_CASE("a fully masked query row gives zeros and zero gradients not NaN", "[attention][mask][padding]") {
  Generator gen(103);
  const std::int64_t Tq = 3, Tk = 4, Dh = 2;
  Tensor q = grad_input({1, 1, Tq, Dh}, gen), k = grad_input({1, 1, Tk, Dh}, gen), v = grad_input({1, 1, Tk, Dh}, gen);
  // Query 1 may see no key at all; the others see every key.
  std::vector<bool> m(Tq * Tk, false);
  for (std::int64_t j = 0; j < Tk; ++j) m[1 * Tk + j] = true;
  const Tensor mask = from_vector<bool>(m, {Tq, Tk});
  Tensor w;
  Tensor out = scaled_dot_product_attention(q, k, v, mask, Tensor(), &w);
  for (std::int64_t d = 0; d < Dh; ++d) REQUIRE(out.at({0, 0, 1, d}) == 0.0);
  for (std::int64_t j = 0; j < Tk; ++j) REQUIRE(w.at({0, 0, 1, j}) == 0.0);
  sum(out).backward();
  for (const Tensor& t : {q, k, v})
    for (double g : t.grad().to_vector<double>()) REQUIRE(std::isfinite(g));
  for (std::int64_t d = 0; d < Dh; ++d) REQUIRE(q.grad().at({0, 0, 1, d}) == 0.0);
}

// The gradient checks of scaled_dot_product_attention without a mask (on transposed views), with a
// padding mask and with a causal mask, and of MultiHeadAttention with RoPE, are entries of the
// gradcheck suite (attention_no_mask, attention_padding_mask, attention_causal_mask,
// relative_attention in train/classroom/gradcheck_suite.cpp), run by tests/test_gradcheck_suite.cpp
// with the same labels. The checks below use other shapes and settings than the suite's.

TEST_CASE("scaled_dot_product_attention gradcheck with an ALiBi bias", "[attention][grad][alibi]") {
  Generator gen(107);
  Tensor q = grad_input({1, 4, 3, 2}, gen), k = grad_input({1, 4, 3, 2}, gen), v = grad_input({1, 4, 3, 2}, gen);
  const Tensor bias = alibi_bias(4, 3, 3, 0, true, Dtype::Float64);
  const Tensor mask = causal_mask(3, 3);
  require_gradcheck(
      [&](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], mask, bias); },
      {q, k, v});
}

// ---- MultiHeadAttention ------------------------------------------------------------------

TEST_CASE("MultiHeadAttention matches a naive loop for MHA GQA and MQA", "[attention][gqa][padding]") {
  const std::int64_t D = 8, B = 2, T = 3, S = 4;
  for (std::int64_t kv : {4, 2, 1}) {
    INFO("n_heads 4, n_kv_heads " << kv);
    Generator init(200 + kv), drop(1), gen(300 + kv);
    MultiHeadAttention m(D, 4, kv, 0.0, PositionInAttention::None, init, drop, Dtype::Float64);
    REQUIRE(m.k_proj->weight.shape() == Shape{kv * 2, D});
    const Tensor x = randn({B, T, D}, gen, Dtype::Float64), enc = randn({B, S, D}, gen, Dtype::Float64);
    const Tensor causal = causal_mask(T, T), pad = two_pads_mask(B, S);
    REQUIRE(max_abs_diff(m.forward(x, x, causal), naive_mha(m, x, x, causal)) <= kNaiveTol);
    m.capture_weights = true;
    const Tensor cross = m.forward(x, enc, pad);
    REQUIRE(max_abs_diff(cross, naive_mha(m, x, enc, pad)) <= kNaiveTol);
    REQUIRE(m.last_weights.shape() == Shape{B, 4, T, S});
    REQUIRE(m.last_weights.at({1, 0, 0, S - 1}) == 0.0);  // a padded key
  }
}

TEST_CASE("MultiHeadAttention self-attention gradcheck of input and every parameter", "[attention][grad][causal]") {
  Generator init(210), drop(1), gen(211);
  MultiHeadAttention m(4, 2, 2, 0.0, PositionInAttention::None, init, drop, Dtype::Float64);
  Tensor x = grad_input({2, 3, 4}, gen);
  const Tensor mask = causal_mask(3, 3);
  require_gradcheck([&](const std::vector<Tensor>& in) { return m.forward(in[0], in[0], mask); },
                    with_parameters({x}, m));
}

TEST_CASE("MultiHeadAttention cross-attention gradcheck of both inputs and every parameter", "[attention][grad][padding]") {
  Generator init(212), drop(1), gen(213);
  MultiHeadAttention m(4, 2, 2, 0.0, PositionInAttention::None, init, drop, Dtype::Float64);
  Tensor x = grad_input({2, 2, 4}, gen), enc = grad_input({2, 4, 4}, gen);
  const Tensor mask = two_pads_mask(2, 4);
  require_gradcheck([&](const std::vector<Tensor>& in) { return m.forward(in[0], in[1], mask); },
                    with_parameters({x, enc}, m));
}

namespace {

// Gradient checks of grouped k/v heads: 4 query heads over n_kv_heads k/v heads, self-attention
// (causal) and cross-attention, w.r.t. the inputs and every parameter.
void check_grouped_heads_gradients(std::int64_t n_kv_heads, std::uint64_t seed) {
  Generator init(seed), drop(1), gen(seed + 1);
  MultiHeadAttention m(8, 4, n_kv_heads, 0.0, PositionInAttention::None, init, drop, Dtype::Float64);
  Tensor x = grad_input({1, 3, 8}, gen), enc = grad_input({1, 2, 8}, gen);
  const Tensor mask = causal_mask(3, 3);
  require_gradcheck([&](const std::vector<Tensor>& in) { return m.forward(in[0], in[0], mask); },
                    with_parameters({x}, m));
  require_gradcheck([&](const std::vector<Tensor>& in) { return m.forward(in[0], in[1], Tensor()); },
                    with_parameters({x, enc}, m));
}

}  // namespace

TEST_CASE("MultiHeadAttention GQA gradcheck of inputs and every parameter", "[attention][grad][gqa]") {
  check_grouped_heads_gradients(2, 214);  // 2 query heads per k/v head
}

TEST_CASE("MultiHeadAttention MQA gradcheck of inputs and every parameter", "[attention][grad][gqa]") {
  check_grouped_heads_gradients(1, 216);  // every query head shares one k/v head
}

TEST_CASE("MultiHeadAttention with ALiBi gradcheck of inputs and every parameter", "[attention][grad][alibi]") {
  Generator init(222), drop(1), gen(223);
  MultiHeadAttention m(4, 2, 2, 0.0, PositionInAttention::ALiBi, init, drop, Dtype::Float64);
  Tensor x = grad_input({1, 3, 4}, gen);
  const Tensor mask = causal_mask(3, 3);
  require_gradcheck([&](const std::vector<Tensor>& in) { return m.forward(in[0], in[0], mask, nullptr, 0, true); },
                    with_parameters({x}, m));
}

TEST_CASE("causal self-attention outputs up to t ignore inputs after t", "[attention][causal][rope][alibi][gqa]") {
  const std::int64_t D = 8, T = 6, t = 2;
  for (PositionInAttention pos : {PositionInAttention::None, PositionInAttention::RoPE, PositionInAttention::ALiBi}) {
    INFO("position mode " << static_cast<int>(pos));
    Generator init(230), drop(1), gen(231);
    MultiHeadAttention m(D, 4, 2, 0.0, pos, init, drop);
    const Tensor x = randn({2, T, D}, gen);
    Tensor changed = x.clone();
    changed.narrow(1, t + 1, T - t - 1).copy_(randn({2, T - t - 1, D}, gen));
    const Tensor mask = causal_mask(T, T);
    const Tensor a = m.forward(x, x, mask, nullptr, 0, true), b = m.forward(changed, changed, mask, nullptr, 0, true);
    // Blocked keys get weight exactly 0, so the outputs up to t are bit-for-bit the same...
    REQUIRE(max_abs_diff(a.narrow(1, 0, t + 1), b.narrow(1, 0, t + 1)) == 0.0);
    // ...and the test can fail: the later outputs did change.
    REQUIRE(max_abs_diff(a.narrow(1, t + 1, T - t - 1), b.narrow(1, t + 1, T - t - 1)) > 1e-3);
  }
}

TEST_CASE("changing padded key positions leaves the outputs unchanged", "[attention][padding][mask]") {
  const std::int64_t D = 8, B = 2, T = 3, S = 5;
  Generator init(240), drop(1), gen(241);
  MultiHeadAttention m(D, 2, 2, 0.0, PositionInAttention::None, init, drop);
  const Tensor x = randn({B, T, D}, gen), enc = randn({B, S, D}, gen);
  const Tensor mask = two_pads_mask(B, S);  // batch 1, positions S-2 and S-1
  Tensor changed = enc.clone();
  changed.narrow(0, 1, 1).narrow(1, S - 2, 2).copy_(randn({1, 2, D}, gen));
  REQUIRE(max_abs_diff(m.forward(x, enc, mask), m.forward(x, changed, mask)) == 0.0);
  // without the mask the same change is visible
  REQUIRE(max_abs_diff(m.forward(x, enc, Tensor()), m.forward(x, changed, Tensor())) > 1e-3);
}

TEST_CASE("attention dropout acts only in training mode", "[attention]") {
  const std::int64_t D = 8;
  Generator init(250), drop(2), gen(251);
  MultiHeadAttention m(D, 2, 2, 0.5, PositionInAttention::None, init, drop);
  const Tensor x = randn({1, 4, D}, gen);
  m.eval();
  const Tensor a = m.forward(x, x, Tensor()), b = m.forward(x, x, Tensor());
  REQUIRE(max_abs_diff(a, b) == 0.0);
  m.train();
  REQUIRE(max_abs_diff(m.forward(x, x, Tensor()), a) > 1e-3);
}

TEST_CASE("MultiHeadAttention errors name the numbers", "[attention][rope]") {
  Generator init(260), drop(1);
  REQUIRE_THROWS_WITH(MultiHeadAttention(250, 8, 8, 0.0, PositionInAttention::None, init, drop),
                      Contains("d_model 250") && Contains("n_heads 8"));
  REQUIRE_THROWS_WITH(MultiHeadAttention(24, 8, 3, 0.0, PositionInAttention::None, init, drop),
                      Contains("n_heads 8") && Contains("n_kv_heads 3"));
  REQUIRE_THROWS_WITH(MultiHeadAttention(12, 4, 4, 0.0, PositionInAttention::RoPE, init, drop),
                      Contains("RoPE") && Contains("Dh = 3") && Contains("d_model 12"));
  REQUIRE_NOTHROW(MultiHeadAttention(12, 4, 4, 0.0, PositionInAttention::None, init, drop));
  REQUIRE_THROWS_WITH(apply_rope(zeros({1, 1, 2, 5}), 0), Contains("Dh = 5"));

  MultiHeadAttention m(8, 2, 1, 0.0, PositionInAttention::None, init, drop);
  REQUIRE_THROWS_WITH(m.forward(zeros({2, 3, 6}), zeros({2, 3, 6}), Tensor()),
                      Contains("MultiHeadAttention") && Contains("(2, 3, 6)"));
  REQUIRE_THROWS_WITH(m.forward(zeros({2, 3, 8}), zeros({1, 3, 8}), Tensor()), Contains("(1, 3, 8)"));
  REQUIRE_THROWS_WITH(m.forward(zeros({2, 3, 8}), zeros({2, 3, 8}), zeros({3, 3})),
                      Contains("bool mask") && Contains("float32"));
  REQUIRE_THROWS_WITH(m.forward(zeros({2, 3, 8}), zeros({2, 3, 8}), causal_mask(3, 4)),
                      Contains("(3, 4)") && Contains("(2, 2, 3, 3)"));
}

// ---- RoPE --------------------------------------------------------------------------------

TEST_CASE("RoPE scores depend only on the distance i - j", "[rope]") {
  Generator gen(300);
  const std::int64_t Dh = 8;
  const Tensor q = randn({1, 1, 1, Dh}, gen, Dtype::Float64), k = randn({1, 1, 1, Dh}, gen, Dtype::Float64);
  // <R_i q, R_j k>, each vector rotated on its own at its absolute position.
  auto score = [&](std::int64_t i, std::int64_t j) { return sum(mul(apply_rope(q, i), apply_rope(k, j))).item(); };
  for (std::int64_t diff : {-3, 0, 2, 5}) {
    INFO("i - j = " << diff);
    const std::int64_t j0 = diff < 0 ? -diff : 0;
    const double first = score(j0 + diff, j0);
    for (std::int64_t j : {j0 + 1, j0 + 7, j0 + 40, j0 + 97}) REQUIRE(std::abs(score(j + diff, j) - first) <= kRopeTol);
  }
  // ...and does depend on it: distance 1 and distance 2 differ.
  REQUIRE(std::abs(score(1, 0) - score(2, 0)) > 1e-3);
}

TEST_CASE("RoPE keeps vector norms and rotates interleaved pairs", "[rope]") {
  Generator gen(301);
  const std::int64_t Dh = 4;
  const Tensor x = randn({2, 3, 5, Dh}, gen, Dtype::Float64);
  const Tensor y = apply_rope(x, 11);
  REQUIRE(y.shape() == x.shape());
  const Tensor norm_x = sqrt(sum(mul(x, x), {-1})), norm_y = sqrt(sum(mul(y, y), {-1}));
  REQUIRE(max_abs_diff(norm_x, norm_y) <= kRopeTol);
  // The pair convention, by hand: pair 0 = (x0, x1) turns by p * 1, pair 1 = (x2, x3) by
  // p * 10000^(-2/4) = p / 100, at p = 11 + t.
  for (std::int64_t t = 0; t < 5; ++t) {
    const double p = 11.0 + static_cast<double>(t);
    const double x0 = x.at({1, 2, t, 0}), x1 = x.at({1, 2, t, 1}), x2 = x.at({1, 2, t, 2}), x3 = x.at({1, 2, t, 3});
    REQUIRE(std::abs(y.at({1, 2, t, 0}) - (x0 * std::cos(p) - x1 * std::sin(p))) <= kRopeTol);
    REQUIRE(std::abs(y.at({1, 2, t, 1}) - (x0 * std::sin(p) + x1 * std::cos(p))) <= kRopeTol);
    REQUIRE(std::abs(y.at({1, 2, t, 2}) - (x2 * std::cos(p / 100) - x3 * std::sin(p / 100))) <= kRopeTol);
    REQUIRE(std::abs(y.at({1, 2, t, 3}) - (x2 * std::sin(p / 100) + x3 * std::cos(p / 100))) <= kRopeTol);
  }
  // Position 0 is the identity; a row rotated alone at start_pos t matches row t of the whole.
  REQUIRE(max_abs_diff(apply_rope(x.narrow(2, 0, 1), 0), x.narrow(2, 0, 1)) == 0.0);
  REQUIRE(max_abs_diff(apply_rope(x.narrow(2, 3, 1), 14), y.narrow(2, 3, 1)) <= kRopeTol);
}

TEST_CASE("apply_rope gradcheck on a transposed view", "[rope][grad]") {
  Generator gen(302);
  Tensor x = grad_input({2, 3, 2, 4}, gen);  // (B,T,H,Dh), seen as (B,H,T,Dh)
  require_gradcheck([](const std::vector<Tensor>& in) { return apply_rope(transpose(in[0], 1, 2), 5); }, {x});
}

// ---- ALiBi -------------------------------------------------------------------------------

TEST_CASE("ALiBi slopes for 8 heads are 1/2 to 1/256 and the bias is minus slope times distance", "[alibi]") {
  const std::vector<double> slopes = alibi_slopes(8);
  REQUIRE(slopes.size() == 8);
  for (std::size_t h = 0; h < 8; ++h) REQUIRE(slopes[h] == 1.0 / std::pow(2.0, static_cast<double>(h + 1)));
  const std::int64_t H = 8, Tq = 2, Tk = 6, q_start = 3;
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    const Tensor bias = alibi_bias(H, Tq, Tk, q_start, causal, Dtype::Float64);
    REQUIRE(bias.shape() == Shape{H, Tq, Tk});
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < Tq; ++i)
        for (std::int64_t j = 0; j < Tk; ++j) {
          const double d = static_cast<double>(q_start + i - j);
          const double want = -slopes[h] * (causal ? d : std::abs(d));
          REQUIRE(bias.at({h, i, j}) == want);
        }
  }
  REQUIRE(alibi_bias(2, 1, 1, 0, true, Dtype::Float32).dtype() == Dtype::Float32);
}

// ---- KV cache ----------------------------------------------------------------------------

TEST_CASE("decoding step by step with a KV cache equals the whole sequence", "[attention][cache][causal][rope][gqa][alibi]") {
  const std::int64_t D = 16, B = 2, T = 6;
  struct Case {
    const char* what;
    std::int64_t kv;
    PositionInAttention pos;
  };
  for (const Case& c : {Case{"MHA", 4, PositionInAttention::None}, Case{"MHA RoPE", 4, PositionInAttention::RoPE},
                        Case{"GQA", 2, PositionInAttention::None}, Case{"GQA RoPE", 2, PositionInAttention::RoPE},
                        Case{"MQA ALiBi", 1, PositionInAttention::ALiBi}}) {
    INFO(c.what);
    Generator init(400), drop(1), gen(401);
    MultiHeadAttention m(D, 4, c.kv, 0.1, c.pos, init, drop);
    m.eval();
    const Tensor x = randn({B, T, D}, gen);
    NoGradGuard no_grad;
    const Tensor full = m.forward(x, x, causal_mask(T, T), nullptr, 0, true);  // (B,T,D)

    // One query position at a time: q_start = step, the cache grows by one each step.
    KVCache cache;
    std::vector<Tensor> steps;
    for (std::int64_t t = 0; t < T; ++t) {
      const Tensor xt = x.narrow(1, t, 1);  // (B,1,D)
      steps.push_back(m.forward(xt, xt, causal_mask(1, t + 1, t), &cache, t, true));
      REQUIRE(cache.length() == t + 1);
      REQUIRE(cache.k.shape() == Shape{B, c.kv, t + 1, D / 4});
    }
    REQUIRE(max_abs_diff(cat(steps, 1), full) <= kCacheTol);

    // A prefill of 4 positions, then single steps.
    cache.reset();
    REQUIRE(cache.length() == 0);
    const Tensor prefix = x.narrow(1, 0, 4);
    std::vector<Tensor> chunks{m.forward(prefix, prefix, causal_mask(4, 4), &cache, 0, true)};
    for (std::int64_t t = 4; t < T; ++t) {
      const Tensor xt = x.narrow(1, t, 1);
      chunks.push_back(m.forward(xt, xt, causal_mask(1, t + 1, t), &cache, t, true));
    }
    REQUIRE(max_abs_diff(cat(chunks, 1), full) <= kCacheTol);
  }
}

TEST_CASE("a static cross-attention cache equals recomputing k and v from the encoder output", "[attention][cache][padding][rope]") {
  const std::int64_t D = 8, B = 2, T = 4, S = 5;
  for (PositionInAttention pos : {PositionInAttention::None, PositionInAttention::RoPE}) {
    INFO("position mode " << static_cast<int>(pos));
    Generator init(410), drop(1), gen(411);
    MultiHeadAttention m(D, 2, 1, 0.0, pos, init, drop);
    const Tensor x = randn({B, T, D}, gen), enc = randn({B, S, D}, gen);
    const Tensor mask = two_pads_mask(B, S);
    NoGradGuard no_grad;
    KVCache cache;
    cache.is_static = true;
    for (std::int64_t t = 0; t < T; ++t) {
      const Tensor xt = x.narrow(1, t, 1);
      const Tensor recomputed = m.forward(xt, enc, mask, nullptr, t);
      // After the first step (the prefill) the encoder output is not needed any more.
      const Tensor cached = m.forward(xt, t == 0 ? enc : Tensor(), mask, &cache, t);
      REQUIRE(cache.length() == S);
      REQUIRE(max_abs_diff(cached, recomputed) <= kCacheTol);
    }
    // The whole target at once agrees too.
    REQUIRE(max_abs_diff(m.forward(x, Tensor(), mask, &cache), m.forward(x, enc, mask)) <= kCacheTol);
  }
}

TEST_CASE("inference GQA reads each k/v head in place and gives the expanded heads' numbers", "[attention][gqa]") {
  // Under NoGradGuard a grouped module multiplies its query groups with the Hkv-head keys directly
  // (grouped_query_attention); with gradients on it expands the heads (repeat_kv_heads). Same math.
  for (std::int64_t kv_heads : {1, 2}) {
    for (PositionInAttention pos : {PositionInAttention::None, PositionInAttention::ALiBi, PositionInAttention::RoPE}) {
      Generator gen(5), drop(6);
      MultiHeadAttention attn(16, 4, kv_heads, 0.0, pos, gen, drop, Dtype::Float64);
      const Tensor x = randn({2, 6, 16}, gen, Dtype::Float64);
      const Tensor mask = causal_mask(6, 6);
      const Tensor expanded = attn.forward(x, x, mask);  // grad mode on: the expanded path
      NoGradGuard no_grad;
      INFO("Hkv " << kv_heads);
      REQUIRE(max_abs_diff(attn.forward(x, x, mask), expanded) < sf::test::kFloat64Tol);
    }
  }
}
