// Tiled attention (autograd/ops_attention.cpp) against its plain reference attention_naive:
// values and gradients for no mask, padding and causal masks, an ALiBi-like bias, Tq != Tk,
// lengths that are not multiples of the block, block 1 and a block larger than T, fully masked
// rows; float64 gradient checks (broadcast bias, non-contiguous inputs); attention_naive itself
// against a plain loop; the memory argument at T = 2048; error messages.
//
// Letters: B batch, H heads, Tq query length, Tk key length, Dh head width.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "autograd/node.h"
#include "test_util.h"

using namespace sf;
using sf::test::grad_input;
using sf::test::require_gradcheck;

namespace {

// Tiled vs naive in float64: the same sums in another order (online softmax rescaling, tile by
// tile gemms), each step rounding at ~1e-16 relative; values and gradients here are at most
// O(10), so 1e-12 (relative to max(1, |reference|)) leaves room without hiding a wrong term.
using sf::test::kFloat64Tol;  // 1e-12, tests/test_util.h
// Tiled vs naive in float32: float32 rounds at ~6e-8 relative; a row sums up to ~40 terms and
// the gradients go through exp and two products: the measured agreement is under 4e-7 (float64:
// under 1e-15). 1e-5 (relative to max(1, |reference|)) is float32 rounding with margin, and far
// below what a wrong term does (a missing rescale or D moves results by O(1e-2) or more).
using sf::test::kFloat32Tol;  // 1e-5, tests/test_util.h
// The scratch memory of one call at T = 2048 must be tiles, not a (Tq,Tk) matrix: at most a
// hundredth of one float32 (2048, 2048) score matrix (16 MB), i.e. 168 KB. By design it is one
// thread's two (64,64) tiles plus Tq numbers, ~40 KB (see ops_attention.cpp).
constexpr double kScratchFractionOfScores = 0.01;

constexpr double kInf = std::numeric_limits<double>::infinity();

// The inputs of one comparison; mask and bias may be undefined.
struct Inputs {
  Tensor q, k, v, mask, bias;
  double scale = 1;
};

// Random float64 leaves q (B,H,Tq,Dh), k, v (B,H,Tk,Dh) requiring grad, scale 1/sqrt(Dh).
Inputs random_inputs(std::int64_t B, std::int64_t H, std::int64_t Tq, std::int64_t Tk, std::int64_t Dh,
                     Generator& gen) {
  Inputs in;
  in.q = grad_input({B, H, Tq, Dh}, gen);
  in.k = grad_input({B, H, Tk, Dh}, gen);
  in.v = grad_input({B, H, Tk, Dh}, gen);
  in.scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  return in;
}

// The same inputs as fresh leaves of `dtype` (the mask is shared: it is never differentiated).
Inputs converted(const Inputs& in, Dtype dtype) {
  auto leaf = [&](const Tensor& t) {
    if (!t.defined()) return Tensor();
    Tensor c = to_dtype(t.detach(), dtype);
    if (t.requires_grad()) c.requires_grad_();
    return c;
  };
  return {leaf(in.q), leaf(in.k), leaf(in.v), in.mask, leaf(in.bias), in.scale};
}

// (B,1,1,Tk), true (blocked) at key j >= lengths[b]: the padding mask of a batch.
Tensor padding_mask(const std::vector<std::int64_t>& lengths, std::int64_t Tk) {
  std::vector<bool> blocked;
  for (std::int64_t len : lengths)
    for (std::int64_t j = 0; j < Tk; ++j) blocked.push_back(j >= len);
  return from_vector<bool>(blocked, {static_cast<std::int64_t>(lengths.size()), 1, 1, Tk});
}

// (Tq,Tk), true at key j > i + (Tk - Tq): the last query sees every key (decoding with a cache).
Tensor causal(std::int64_t Tq, std::int64_t Tk) {
  std::vector<bool> blocked;
  for (std::int64_t i = 0; i < Tq; ++i)
    for (std::int64_t j = 0; j < Tk; ++j) blocked.push_back(j > i + (Tk - Tq));
  return from_vector<bool>(blocked, {Tq, Tk});
}

// (H,Tq,Tk) float64 leaf requiring grad: -slope_h |i - j| with slope_h = 2^-(h+1), ALiBi-like.
Tensor alibi_like(std::int64_t H, std::int64_t Tq, std::int64_t Tk) {
  std::vector<double> values;
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t i = 0; i < Tq; ++i)
      for (std::int64_t j = 0; j < Tk; ++j) values.push_back(-std::ldexp(1.0, -(h + 1)) * std::abs(double(i - j)));
  Tensor t = from_vector(values, {H, Tq, Tk}, Dtype::Float64);
  t.requires_grad_();
  return t;
}

// The output and every gradient after backward of sum(up * attention(inputs)).
struct Result {
  Tensor out, dq, dk, dv, dbias;
};

Result run(const Inputs& in, const Tensor& up, bool tiled, std::int64_t block) {
  for (Tensor t : {in.q, in.k, in.v, in.bias})
    if (t.defined()) t.zero_grad();
  Tensor out = tiled ? tiled_attention(in.q, in.k, in.v, in.mask, in.bias, in.scale, block)
                     : attention_naive(in.q, in.k, in.v, in.mask, in.bias, in.scale);
  out.backward(up);
  return {out.detach(), in.q.grad(), in.k.grad(), in.v.grad(), in.bias.defined() ? in.bias.grad() : Tensor()};
}

// max |a - b| / max(1, max |b|): the error relative to the reference's magnitude.
double scaled_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.defined() == b.defined());
  if (!a.defined()) return 0;
  double largest = 1;
  for (double x : b.to_vector<double>()) largest = std::max(largest, std::abs(x));
  return test::max_abs_diff(a, b) / largest;
}

// Tiled (at `block`) and naive agree on the output and every gradient, in float64 and float32.
void require_matches_naive(const Inputs& in64, std::int64_t block) {
  Generator gen(7);
  const Tensor up64 = randn({in64.q.size(0), in64.q.size(1), in64.q.size(2), in64.q.size(3)}, gen, Dtype::Float64);
  const struct {
    Dtype dtype;
    double tol;
  } runs[] = {{Dtype::Float64, kFloat64Tol}, {Dtype::Float32, kFloat32Tol}};
  for (const auto& r : runs) {
    INFO(dtype_name(r.dtype) << ", block " << block);
    const Inputs in = converted(in64, r.dtype);
    const Tensor up = to_dtype(up64, r.dtype);
    const Result tiled = run(in, up, true, block);
    const Result naive = run(in, up, false, block);
    CHECK(scaled_diff(tiled.out, naive.out) <= r.tol);
    CHECK(scaled_diff(tiled.dq, naive.dq) <= r.tol);
    CHECK(scaled_diff(tiled.dk, naive.dk) <= r.tol);
    CHECK(scaled_diff(tiled.dv, naive.dv) <= r.tol);
    CHECK(scaled_diff(tiled.dbias, naive.dbias) <= r.tol);
  }
}

// Attention by its definition, one query at a time through Tensor::at (shares no code with
// either op): out[b,h,i] = sum_j softmax_j(scale q_i.k_j + bias_ij, blocked -> -inf) v_j.
// mask: (Tq,Tk) or undefined; bias: (H,Tq,Tk) or undefined. -> float64 (B,H,Tq,Dh)
Tensor attention_by_loops(const Inputs& in) {
  const std::int64_t B = in.q.size(0), H = in.q.size(1), Tq = in.q.size(2), Tk = in.k.size(2), Dh = in.q.size(3);
  Tensor out = zeros({B, H, Tq, Dh}, Dtype::Float64);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < Tq; ++i) {
        std::vector<double> s(Tk);
        double m = -kInf;
        for (std::int64_t j = 0; j < Tk; ++j) {
          double dot = 0;
          for (std::int64_t d = 0; d < Dh; ++d) dot += in.q.at({b, h, i, d}) * in.k.at({b, h, j, d});
          s[j] = in.scale * dot + (in.bias.defined() ? in.bias.at({h, i, j}) : 0.0);
          if (in.mask.defined() && in.mask.at({i, j}) != 0) s[j] = -kInf;
          m = std::max(m, s[j]);
        }
        if (m == -kInf) continue;  // every key blocked: zeros
        double total = 0;
        for (std::int64_t j = 0; j < Tk; ++j) total += std::exp(s[j] - m);
        for (std::int64_t d = 0; d < Dh; ++d) {
          double acc = 0;
          for (std::int64_t j = 0; j < Tk; ++j) acc += std::exp(s[j] - m) / total * in.v.at({b, h, j, d});
          out.set({b, h, i, d}, acc);
        }
      }
  return out;
}

}  // namespace

// ------------------------------------------------------------------------- values and gradients

TEST_CASE("tiled_attention matches attention_naive in values and gradients", "[attention][tiled][reference]") {
  Generator gen(3);
  SECTION("no mask") {
    require_matches_naive(random_inputs(2, 3, 20, 20, 8, gen), 8);
  }
  SECTION("padding mask (B,1,1,Tk)") {
    Inputs in = random_inputs(3, 2, 19, 19, 8, gen);
    in.mask = padding_mask({19, 11, 4}, 19);
    require_matches_naive(in, 8);
  }
  SECTION("causal mask (Tq,Tk)") {
    Inputs in = random_inputs(2, 2, 21, 21, 8, gen);
    in.mask = causal(21, 21);
    require_matches_naive(in, 8);
  }
  SECTION("ALiBi-like bias (H,Tq,Tk) with its gradient") {
    Inputs in = random_inputs(2, 3, 18, 18, 8, gen);
    in.bias = alibi_like(3, 18, 18);
    in.mask = causal(18, 18);
    require_matches_naive(in, 8);
  }
  SECTION("bias (Tk) broadcast over every pair and query row") {
    Inputs in = random_inputs(2, 3, 9, 13, 4, gen);
    in.bias = grad_input({13}, gen);
    require_matches_naive(in, 4);
  }
  SECTION("Tq != Tk") {
    Inputs in = random_inputs(2, 2, 7, 30, 8, gen);
    in.mask = causal(7, 30);
    require_matches_naive(in, 8);
    require_matches_naive(random_inputs(1, 2, 30, 7, 8, gen), 8);
  }
  SECTION("lengths that are not multiples of the block") {
    Inputs in = random_inputs(2, 2, 37, 37, 8, gen);
    in.mask = causal(37, 37);
    require_matches_naive(in, 16);
  }
  SECTION("block 1 and a block larger than T") {
    Inputs in = random_inputs(2, 2, 11, 13, 4, gen);
    in.mask = padding_mask({13, 6}, 13);
    require_matches_naive(in, 1);
    require_matches_naive(in, 100);
  }
  SECTION("a fully masked row") {
    // Query 2 of every pair sees no key; the others see a random half (at least key 0).
    Inputs in = random_inputs(2, 2, 6, 10, 4, gen);
    std::vector<bool> blocked;
    const std::vector<double> coin = rand({6, 10}, gen, Dtype::Float64).to_vector<double>();
    for (std::int64_t i = 0; i < 6; ++i)
      for (std::int64_t j = 0; j < 10; ++j) blocked.push_back(i == 2 || (j > 0 && coin[i * 10 + j] < 0.5));
    in.mask = from_vector<bool>(blocked, {6, 10});
    in.bias = alibi_like(2, 6, 10);
    require_matches_naive(in, 4);
  }
}

TEST_CASE("tiled_attention gives a fully masked row zero output and zero gradients", "[attention][tiled][grad]") {
  Generator gen(4);
  Inputs in = random_inputs(1, 2, 5, 9, 4, gen);
  Tensor mask = zeros({5, 9}, Dtype::Bool);
  for (std::int64_t j = 0; j < 9; ++j) mask.set({3, j}, 1.0);  // only query 3 fully blocked
  in.mask = mask;
  const Tensor up = randn({1, 2, 5, 4}, gen, Dtype::Float64);
  const Result r = run(in, up, true, 4);
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t d = 0; d < 4; ++d) {
      CHECK(r.out.at({0, h, 3, d}) == 0.0);
      CHECK(r.dq.at({0, h, 3, d}) == 0.0);
    }
  // Every key blocked everywhere: all outputs and all gradients are exactly zero.
  in.mask = ones({1, 1, 1, 9}, Dtype::Bool);
  const Result none = run(in, up, true, 4);
  for (const Tensor& t : {none.out, none.dq, none.dk, none.dv})
    for (double x : t.to_vector<double>()) CHECK(x == 0.0);
}

TEST_CASE("attention_naive and tiled_attention match attention by its definition", "[attention][tiled][reference]") {
  Generator gen(5);
  Inputs in = random_inputs(2, 2, 5, 7, 3, gen);
  in.mask = causal(5, 7);
  in.bias = alibi_like(2, 5, 7);
  const Tensor expected = attention_by_loops(in);
  CHECK(test::max_abs_diff(attention_naive(in.q, in.k, in.v, in.mask, in.bias, in.scale), expected) <= kFloat64Tol);
  CHECK(test::max_abs_diff(tiled_attention(in.q, in.k, in.v, in.mask, in.bias, in.scale, 3), expected) <=
        kFloat64Tol);
}

// ------------------------------------------------------------------------------ gradient checks

TEST_CASE("tiled_attention gradcheck with causal mask and ALiBi-like bias", "[attention][tiled][grad]") {
  Generator gen(6);
  const Tensor mask = causal(3, 5);
  auto f = [&](const std::vector<Tensor>& in) { return tiled_attention(in[0], in[1], in[2], mask, in[3], 0.5, 2); };
  require_gradcheck(f, {grad_input({2, 2, 3, 4}, gen), grad_input({2, 2, 5, 4}, gen), grad_input({2, 2, 5, 4}, gen),
                        grad_input({2, 3, 5}, gen)});
}

TEST_CASE("tiled_attention gradcheck with broadcast bias and non-contiguous inputs", "[attention][tiled][grad]") {
  Generator gen(8);
  const Tensor mask = padding_mask({5, 3}, 5);  // (B,1,1,Tk)
  // q, k, v as the attention layer makes them: (B,T,H,Dh) transposed to (B,H,T,Dh), a view;
  // v additionally narrowed along Dh. The bias (1,Tk) is shared by every pair and query.
  auto f = [&](const std::vector<Tensor>& in) {
    return tiled_attention(transpose(in[0], 1, 2), transpose(in[1], 1, 2), narrow(transpose(in[2], 1, 2), 3, 1, 3),
                           mask, in[3], 0.7, 2);
  };
  require_gradcheck(f, {grad_input({2, 4, 2, 3}, gen), grad_input({2, 5, 2, 3}, gen), grad_input({2, 5, 2, 4}, gen),
                        grad_input({1, 5}, gen)});
}

TEST_CASE("tiled_attention gradcheck with a fully masked row and block 1", "[attention][tiled][grad]") {
  Generator gen(9);
  Tensor mask = zeros({4, 4}, Dtype::Bool);
  for (std::int64_t j = 0; j < 4; ++j) mask.set({1, j}, 1.0);
  mask.set({2, 0}, 1.0);
  for (std::int64_t block : {1, 3}) {
    INFO("block " << block);
    auto f = [&](const std::vector<Tensor>& in) {
      return tiled_attention(in[0], in[1], in[2], mask, Tensor(), 0.5, block);
    };
    require_gradcheck(f, {grad_input({1, 2, 4, 3}, gen), grad_input({1, 2, 4, 3}, gen), grad_input({1, 2, 4, 3}, gen)});
  }
}

TEST_CASE("tiled_attention records a graph only when an input requires grad", "[attention][tiled][grad]") {
  Generator gen(10);
  const Tensor q = randn({1, 2, 3, 4}, gen, Dtype::Float64), k = randn({1, 2, 5, 4}, gen, Dtype::Float64);
  const Tensor v = randn({1, 2, 5, 4}, gen, Dtype::Float64);
  CHECK_FALSE(tiled_attention(q, k, v, Tensor(), Tensor(), 0.5, 2).requires_grad());
  // Only the bias requires grad: q, k, v get none, the bias gets the naive one's.
  Inputs in{q, k, v, causal(3, 5), grad_input({2, 3, 5}, gen), 0.5};
  const Tensor up = randn({1, 2, 3, 4}, gen, Dtype::Float64);
  const Result tiled = run(in, up, true, 2), naive = run(in, up, false, 2);
  CHECK_FALSE(tiled.dq.defined());
  CHECK(scaled_diff(tiled.dbias, naive.dbias) <= kFloat64Tol);
}

// ------------------------------------------------------------------------------------- memory

// The memory argument. Naive attention at Tq = Tk = 2048 keeps (B,H,Tq,Tk) scores and weights
// (16 MB each in float32 for one pair); tiled attention's scratch is a few (block,block) tiles
// and Tq numbers per thread, read back through tiled_attention_peak_scratch_bytes, and what it
// saves for backward is q, k, v, out and L: O(T). It must still be exact: the sampled query rows
// (a row's output and dq depend on that row alone) match the naive op run on those rows only.
TEST_CASE("tiled_attention at T 2048 uses tile-sized scratch and matches naive on sampled rows",
          "[attention][tiled][memory]") {
  constexpr std::int64_t T = 2048, Dh = 16, block = 64;
  Generator gen(11);
  Tensor q = randn({1, 1, T, Dh}, gen).requires_grad_(), k = randn({1, 1, T, Dh}, gen).requires_grad_();
  Tensor v = randn({1, 1, T, Dh}, gen).requires_grad_();
  const Tensor mask = causal(T, T), up = randn({1, 1, T, Dh}, gen);
  const double scale = 0.25;

  tiled_attention_peak_scratch_bytes(/*reset=*/true);
  const Tensor out = tiled_attention(q, k, v, mask, Tensor(), scale, block);
  out.backward(up);
  const std::int64_t scratch = tiled_attention_peak_scratch_bytes();
  const double one_score_matrix = static_cast<double>(T * T * sizeof(float));
  INFO("peak scratch " << scratch << " bytes; one (T,T) float32 score matrix " << one_score_matrix << " bytes");
  CHECK(scratch >= static_cast<std::int64_t>(block * block * sizeof(float)));  // the counter sees the tiles
  CHECK(static_cast<double>(scratch) <= kScratchFractionOfScores * one_score_matrix);

  const Tensor rows = from_vector<std::int64_t>({0, 1, 63, 64, 777, 1500, 2047}, {7});
  Tensor q_rows = index_select(q.detach(), 2, rows).requires_grad_();
  const Tensor naive = attention_naive(q_rows, k.detach(), v.detach(), index_select(mask, 0, rows), Tensor(), scale);
  naive.backward(index_select(up, 2, rows));
  CHECK(scaled_diff(index_select(out.detach(), 2, rows), naive.detach()) <= kFloat32Tol);
  CHECK(scaled_diff(index_select(q.grad(), 2, rows), q_rows.grad()) <= kFloat32Tol);
}

// ------------------------------------------------------------------------------------- errors

TEST_CASE("tiled_attention and attention_naive reject bad inputs with a message", "[attention][tiled]") {
  Generator gen(12);
  const Tensor q = randn({1, 2, 3, 4}, gen), k = randn({1, 2, 5, 4}, gen), v = randn({1, 2, 5, 4}, gen);
  using Catch::Matchers::Contains;
  REQUIRE_THROWS_WITH(tiled_attention(reshape(q, {2, 3, 4}), k, v, Tensor(), Tensor(), 1.0),
                      Contains("tiled_attention") && Contains("expected q (B,H,Tq,Dh)"));
  REQUIRE_THROWS_WITH(attention_naive(q, k, narrow(v, 2, 0, 4), Tensor(), Tensor(), 1.0),
                      Contains("attention_naive") && Contains("(1, 2, 4, 4)"));
  REQUIRE_THROWS_WITH(tiled_attention(q, k, v, zeros({3, 5}), Tensor(), 1.0), Contains("bool mask"));
  REQUIRE_THROWS_WITH(tiled_attention(q, k, v, zeros({4, 5}, Dtype::Bool), Tensor(), 1.0),
                      Contains("mask of shape (4, 5) does not broadcast") && Contains("(1, 2, 3, 5)"));
  REQUIRE_THROWS_WITH(tiled_attention(q, k, v, Tensor(), zeros({2, 3, 6}), 1.0),
                      Contains("bias of shape (2, 3, 6) does not broadcast"));
  REQUIRE_THROWS_WITH(tiled_attention(q, k, v, Tensor(), zeros({3, 5}, Dtype::Float64), 1.0),
                      Contains("tiled_attention"));
  REQUIRE_THROWS_WITH(tiled_attention(q, k, v, Tensor(), Tensor(), 1.0, 0), Contains("block >= 1"));
}
