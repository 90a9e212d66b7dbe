// Sliding-window self-attention as a model option (model.attention_window = W) and the ring
// buffer that bounds its KV cache; RoPE's frequency scaling (model.rope_scaling):
//   window_mask: which keys a query may read (|q_pos - k_pos| < W);
//   what a window means for a model: with one layer, the token W positions back no longer
//     changes a causal position's logits, the one W - 1 back still does (encoder-only: on both
//     sides); W = max_len is full attention, bit for bit;
//   the ring: prefill + decode steps over a ring of W slots equal the full forward under the
//     window mask, for every position kind, GQA, plain and tiled kernels, the encoder-decoder's
//     decoder, and beam search's reorder; the cache holds W positions however long it runs;
//   a float64 gradient check of a windowed attention layer (ALiBi);
//   rope_frequencies: interpolation at position s p turns as the unscaled p; NTK keeps the fastest
//     pair and slows the slowest by exactly s;
// (The config errors, a window past max_len or negative, rope_scaling without RoPE: test_config.cpp.)
//
// Letters: B batch, T sequence length, P prompt length, W window, D d_model, V vocabulary.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "nn/attention.h"
#include "nn/decoder_only.h"
#include "nn/encoder_only.h"
#include "nn/model.h"
#include "nn/relative_positions.h"
#include "nn/seq2seq.h"
#include "test_util.h"

using namespace sf;
using namespace sf::nn;
using Catch::Contains;
using sf::test::ids;
using sf::test::max_abs_diff;

namespace {

// float64 throughout: prefill + decode against the whole forward differ only by summation order
// (~1e-16 per op), so 1e-12 catches a wrong key or position (~1e-1).
constexpr double kTol = sf::test::kFloat64Tol;
// A token that must matter moves a logit by O(0.1); "must change" asks for more than 1e-3.
constexpr double kMustChange = 1e-3;

// D 16, H 4 (Dh 4), F 32, vocabulary 11, max_len 24, no dropout; one layer unless told.
ModelConfig windowed(Arch arch, PositionalKind pos, std::int64_t window, std::int64_t layers = 1) {
  ModelConfig c;
  c.arch = arch;
  c.src_vocab = 11;
  c.tgt_vocab = 11;
  c.d_model = 16;
  c.n_heads = 4;
  c.d_ff = 32;
  c.encoder_layers = layers;
  c.decoder_layers = layers;
  c.dropout = 0.0;
  c.max_len = 24;
  c.positional = pos;
  c.attention_window = window;
  return c;
}

std::unique_ptr<Model> build(const ModelConfig& c, std::uint64_t seed = 7) {
  Generator gen(seed);
  auto m = make_model(c, gen, Dtype::Float64);
  m->eval();
  return m;
}

// A (B,T) batch of non-pad ids in [3, V).
Tensor tokens_of(std::int64_t B, std::int64_t T, std::uint64_t seed) {
  Generator gen(seed);
  std::vector<std::int64_t> v(static_cast<std::size_t>(B * T));
  for (auto& id : v) id = 3 + static_cast<std::int64_t>(gen.randint(8));
  return ids(v, {B, T});
}

// tokens with position t replaced by another non-pad id.
Tensor changed_at(const Tensor& tokens, std::int64_t t) {
  Tensor out = tokens.clone();
  for (std::int64_t b = 0; b < tokens.size(0); ++b)
    out.set({b, t}, static_cast<double>(3 + (static_cast<std::int64_t>(tokens.at({b, t})) - 2) % 8));
  return out;
}

// (B,T,V) at position t -> (B,V)
Tensor at(const Tensor& logits, std::int64_t t) { return reshape(narrow(logits, 1, t, 1), {logits.size(0), -1}); }

// Prefill the first P tokens of `tokens` (B,T), then decode the rest one by one; returns the largest
// gap between each step's logits and the full forward's at that position, and checks the cache size.
double decode_gap(const Model& model, const Tensor& tokens, std::int64_t P, std::int64_t max_cache_bytes) {
  NoGradGuard no_grad;
  const Tensor full = model.forward(Tensor(), tokens);  // (B,T,V)
  auto state = model.start_decoding(tokens.narrow(1, 0, P));
  double gap = 0;
  for (std::int64_t t = P - 1; t < tokens.size(1); ++t) {
    const Tensor step = model.decode_step(tokens.narrow(1, t, 1).clone(), *state);  // (B,V), position t
    gap = std::max(gap, max_abs_diff(step, at(full, t)));
    REQUIRE(state->length() == t + 1);
    REQUIRE(state->cache_bytes() <= max_cache_bytes);
  }
  return gap;
}

}  // namespace

TEST_CASE("window_mask blocks the keys W or more positions away", "[window][mask]") {
  // query positions 2..4 (q_start 2), keys 0..5, W = 2: |q - k| < 2 open.
  const Tensor m = window_mask(3, 6, 2, 2);
  const std::vector<bool> expected = {1, 0, 0, 0, 1, 1,   // q 2: keys 1, 2, 3
                                      1, 1, 0, 0, 0, 1,   // q 3: keys 2, 3, 4
                                      1, 1, 1, 0, 0, 0};  // q 4: keys 3, 4, 5
  REQUIRE(m.shape() == Shape{3, 6});
  for (std::int64_t i = 0; i < 18; ++i) REQUIRE(m.to_vector<bool>()[i] == expected[i]);
  // keys starting at position 3 (a cache's tail): key j sits at 3 + j.
  REQUIRE(window_mask(1, 3, 2, 5, 3).to_vector<bool>() == std::vector<bool>{1, 0, 0});
  REQUIRE_THROWS_WITH(window_mask(2, 2, 0), Contains("window >= 1"));
}

TEST_CASE("a causal window of W: the token W back no longer counts, W - 1 back still does", "[window][causal][model]") {
  const std::int64_t W = 4, T = 12, t = 10;
  for (PositionalKind pos : {PositionalKind::Sinusoidal, PositionalKind::RoPE, PositionalKind::ALiBi}) {
    INFO(positional_name(pos));
    const auto model = build(windowed(Arch::DecoderOnly, pos, W));  // one layer: no path around the window
    NoGradGuard no_grad;
    const Tensor tokens = tokens_of(2, T, 3);
    const Tensor base = at(model->forward(Tensor(), tokens), t);
    REQUIRE(max_abs_diff(at(model->forward(Tensor(), changed_at(tokens, t - W)), t), base) == 0.0);
    REQUIRE(max_abs_diff(at(model->forward(Tensor(), changed_at(tokens, t - W + 1)), t), base) > kMustChange);
  }
  // Two layers see 2 (W - 1) back: a window limits each layer, not the stack.
  const auto deep = build(windowed(Arch::DecoderOnly, PositionalKind::RoPE, W, 2));
  NoGradGuard no_grad;
  const Tensor tokens = tokens_of(2, T, 3);
  const Tensor base = at(deep->forward(Tensor(), tokens), t);
  REQUIRE(max_abs_diff(at(deep->forward(Tensor(), changed_at(tokens, t - 2 * (W - 1))), t), base) > kMustChange);
  REQUIRE(max_abs_diff(at(deep->forward(Tensor(), changed_at(tokens, t - 2 * (W - 1) - 1)), t), base) == 0.0);
}

TEST_CASE("a bidirectional window reads W - 1 positions on each side", "[window][encoder][model]") {
  ModelConfig c = windowed(Arch::EncoderOnly, PositionalKind::Sinusoidal, 3);
  const auto model = build(c);
  NoGradGuard no_grad;
  const Tensor tokens = tokens_of(2, 10, 5);
  const Tensor base = at(model->forward(tokens, Tensor()), 5);
  for (std::int64_t t : {2, 8}) REQUIRE(max_abs_diff(at(model->forward(changed_at(tokens, t), Tensor()), 5), base) == 0.0);
  for (std::int64_t t : {3, 7})
    REQUIRE(max_abs_diff(at(model->forward(changed_at(tokens, t), Tensor()), 5), base) > kMustChange);
}

TEST_CASE("a window of max_len is full attention", "[window][model]") {
  const Tensor tokens = tokens_of(2, 24, 9);
  NoGradGuard no_grad;
  const Tensor full = build(windowed(Arch::DecoderOnly, PositionalKind::ALiBi, 0))->forward(Tensor(), tokens);
  const Tensor whole = build(windowed(Arch::DecoderOnly, PositionalKind::ALiBi, 24))->forward(Tensor(), tokens);
  REQUIRE(max_abs_diff(full, whole) == 0.0);
  const Tensor narrow_window = build(windowed(Arch::DecoderOnly, PositionalKind::ALiBi, 3))->forward(Tensor(), tokens);
  REQUIRE(max_abs_diff(full, narrow_window) > kMustChange);
}

TEST_CASE("decoding over a ring of W slots equals the whole forward under the window", "[window][cache][model]") {
  const std::int64_t W = 5, T = 22;
  const Tensor tokens = tokens_of(3, T, 11);
  // 2 layers, Hkv 2: each layer's ring is 2 (k, v) * B 3 * Hkv 2 * W 5 * Dh 4 float64 values.
  const std::int64_t ring_bytes = 2 * 2 * (2 * 3 * 2 * W * 4 * 8);
  for (PositionalKind pos : {PositionalKind::Sinusoidal, PositionalKind::Learned, PositionalKind::RoPE,
                             PositionalKind::ALiBi, PositionalKind::None})
    for (AttentionKernel kernel : {AttentionKernel::Plain, AttentionKernel::Tiled})
      for (std::int64_t P : {1, 3, 9}) {  // a prompt shorter than the window, and one that wraps the ring
        INFO(positional_name(pos) << " " << attention_name(kernel) << " prompt " << P);
        ModelConfig c = windowed(Arch::DecoderOnly, pos, W, 2);
        c.n_kv_heads = 2;
        c.attention = kernel;
        REQUIRE(decode_gap(*build(c), tokens, P, ring_bytes) < kTol);
      }
}

TEST_CASE("the encoder-decoder's decoder decodes over a ring too", "[window][cache][decoder]") {
  ModelConfig c = windowed(Arch::EncoderDecoder, PositionalKind::RoPE, 4, 2);
  const auto model = build(c);
  NoGradGuard no_grad;
  const Tensor src = tokens_of(2, 9, 1), tgt = tokens_of(2, 14, 2);
  const Tensor full = model->forward(src, tgt);  // (B,T,V)
  auto state = model->start_decoding(src);
  double gap = 0;
  for (std::int64_t t = 0; t < tgt.size(1); ++t)
    gap = std::max(gap, max_abs_diff(model->decode_step(tgt.narrow(1, t, 1).clone(), *state), at(full, t)));
  REQUIRE(gap < kTol);
}

TEST_CASE("beam search's reorder moves whole rings", "[window][cache][model]") {
  const auto model = build(windowed(Arch::DecoderOnly, PositionalKind::ALiBi, 3, 2));
  NoGradGuard no_grad;
  const Tensor tokens = tokens_of(2, 12, 4);
  auto state = model->start_decoding(tokens.narrow(1, 0, 2));
  for (std::int64_t t = 1; t < 7; ++t) model->decode_step(tokens.narrow(1, t, 1).clone(), *state);  // ring wrapped
  state->reorder(ids({1, 0}, {2}));  // swap the rows
  const Tensor swapped = index_select(tokens, 0, ids({1, 0}, {2}));
  const Tensor full = model->forward(Tensor(), swapped);
  double gap = 0;
  for (std::int64_t t = 7; t < 12; ++t)
    gap = std::max(gap, max_abs_diff(model->decode_step(swapped.narrow(1, t, 1).clone(), *state), at(full, t)));
  REQUIRE(gap < kTol);
}

TEST_CASE("a windowed attention layer passes the float64 gradient check", "[window][grad][attention]") {
  Generator gen(3), drop(4);
  MultiHeadAttention attn(8, 2, 1, 0.0, PositionInAttention::ALiBi, gen, drop, Dtype::Float64);
  attn.window = 2;
  const Tensor x = randn({2, 5, 8}, gen, Dtype::Float64).requires_grad_(true);
  sf::test::require_gradcheck(
      [&](const std::vector<Tensor>& in) { return attn.forward(in[0], in[0], causal_mask(5, 5), nullptr, 0, true); },
      {x});
}

TEST_CASE("rope_scaling: interpolation turns position s p as p, NTK slows only the slow pairs", "[window][rope]") {
  Generator gen(1);
  const Tensor x = randn({1, 1, 1, 8}, gen, Dtype::Float64);
  const RopeFrequencies pi = rope_frequencies(RopeScaling::Interpolation, 4.0, 8);
  REQUIRE(max_abs_diff(apply_rope(x, 12, pi.base, pi.position_scale), apply_rope(x, 3)) < kTol);
  REQUIRE(max_abs_diff(apply_rope(x, 12), apply_rope(x, 3)) > kMustChange);

  const RopeFrequencies ntk = rope_frequencies(RopeScaling::Ntk, 4.0, 8);
  REQUIRE(ntk.position_scale == 1.0);
  const auto theta = [](double base, int k) { return std::pow(base, -2.0 * k / 8.0); };
  REQUIRE(theta(ntk.base, 0) == theta(10000.0, 0));                          // the fastest pair keeps its speed
  REQUIRE(std::abs(theta(ntk.base, 3) * 4.0 - theta(10000.0, 3)) < 1e-15);   // the slowest turns 4x slower
  REQUIRE(rope_frequencies(RopeScaling::None, 1.0, 8).base == 10000.0);
  REQUIRE_THROWS_WITH(rope_frequencies(RopeScaling::Ntk, 0.5, 8), Contains("factor >= 1"));
}

TEST_CASE("a full ring takes the next key in place: no copy of the cache per step", "[window][cache]") {
  KVCache cache;
  cache.window = 3;
  Generator gen(2);
  const auto fresh = [&] { return randn({1, 2, 1, 4}, gen, Dtype::Float64); };
  std::vector<Tensor> keys;
  for (int t = 0; t < 3; ++t) {
    keys.push_back(fresh());
    append_to_cache(cache, keys.back(), keys.back());
  }
  const void* storage = cache.k.raw_data();
  keys.push_back(fresh());
  append_to_cache(cache, keys.back(), keys.back());  // position 3 -> slot 0
  REQUIRE(cache.k.raw_data() == storage);
  REQUIRE(cache.length() == 4);
  REQUIRE(cache.slots() == 3);
  REQUIRE(cache.position_of_slot(0) == 3);
  REQUIRE(cache.position_of_slot(1) == 1);
  // In position order the ring reads keys 1, 2, 3.
  const Tensor ordered = cache_in_position_order(cache).first;
  for (int i = 0; i < 3; ++i) REQUIRE(max_abs_diff(ordered.narrow(2, i, 1), keys[i + 1]) == 0.0);
}
