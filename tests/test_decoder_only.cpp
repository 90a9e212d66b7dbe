// The decoder-only Transformer (nn/decoder_only.h) and the EncoderLayer it is built from, run
// causally with a KV cache (nn/transformer_layers.h):
//   EncoderLayer as a decoder-only block: step by step with a KVCache equals the whole causal
//     sequence;
//   causality: later tokens never change earlier logits (bit for bit), for every positional kind
//     and MHA/GQA/MQA, while a changed token does change its own position's logits;
//   generation: prefill + decode steps equal the full forward (every positional kind, pre and
//     post norm, GQA/MQA), first_tokens, length(), the caches' shapes, decode_prefix, make_model;
//     repeat_rows / reorder equal running the permuted batch;
//   float64 gradient checks of the loss w.r.t. every parameter, and the mutation control (a tied
//     LM head that forgets the head's gradient path into the embedding must fail);
//   parameter names, counts against the formula, the summary; the input and config errors.
//
// The gradient checks use a tiny model (D 8, H 2, d_ff 16, two layers, vocabulary 7, length 4,
// float64, dropout 0, eval mode) to stay fast under AddressSanitizer; the others a small
// float32 one (D 16, H 4, two layers, vocabulary 11).
//
// Letters: B batch, T sequence length, P prompt length, D d_model, H heads, Hkv key/value heads,
// Dh head width, F d_ff, V vocabulary.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "nn/attention.h"
#include "nn/decoder_only.h"
#include "nn/model.h"
#include "nn/positional.h"
#include "nn/seq2seq.h"
#include "nn/transformer_layers.h"
#include "test_util.h"

using namespace sf;
using namespace sf::nn;
using Catch::Contains;
using sf::test::ids;
using sf::test::max_abs_diff;
using sf::test::require_gradcheck;

namespace {

// float32 prefill + decode steps (KV cache) against the full forward over the whole sequence:
// the same math through differently shaped matmuls (one query against the cached keys instead
// of T queries at once: other summation orders, other BLAS kernels). float32 rounds at ~6e-8
// relative; the logits are O(1) and pass through ~10 ops per layer, so 1e-5 (kFloat32Tol)
// leaves a wide margin and still catches a wrong position or a missing key (~1e-1).
constexpr double kCacheTol = sf::test::kFloat32Tol;
// float64 layer run step by step with its cache against the whole sequence: only rounding from
// other summation orders, ~1e-16 per op on O(1) values; 1e-12 still catches any wrong key.
constexpr double kLayerCacheTol = sf::test::kFloat64Tol;
// A changed token moves its own position's logits by O(0.1-1); a position that must change is
// required to move by more than 1e-3, far above rounding, so a test of "nothing leaks" can fail.
constexpr double kMustChange = 1e-3;

// The tiny float64 model of the gradient checks: D 8, H 2 (Dh 4), F 16, two layers,
// vocabulary 7 (pad 0), max_len 8, no dropout.
ModelConfig tiny_config() {
  ModelConfig c;
  c.arch = Arch::DecoderOnly;
  c.src_vocab = 0;  // one vocabulary: tgt_vocab
  c.tgt_vocab = 7;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 16;
  c.decoder_layers = 2;
  c.dropout = 0.0;
  c.max_len = 8;
  c.pad_id = 0;
  return c;
}

// The float32 model of the causality and cache tests: D 16, H 4 (Dh 4), F 32, two layers,
// vocabulary 11, max_len 16.
ModelConfig small_config() {
  ModelConfig c = tiny_config();
  c.tgt_vocab = 11;
  c.d_model = 16;
  c.n_heads = 4;
  c.d_ff = 32;
  c.max_len = 16;
  return c;
}

// A (B,T) batch of random non-pad ids in [1, V).
Tensor random_tokens(std::int64_t B, std::int64_t T, std::int64_t V, Generator& gen) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(B * T));
  for (auto& id : v) id = 1 + static_cast<std::int64_t>(gen.randint(static_cast<std::uint64_t>(V - 1)));
  return ids(v, {B, T});
}

// tokens with every id at positions [from, to) replaced by another non-pad id.
Tensor changed_tokens(const Tensor& tokens, std::int64_t from, std::int64_t to, std::int64_t V) {
  Tensor out = tokens.clone();
  for (std::int64_t b = 0; b < tokens.size(0); ++b)
    for (std::int64_t t = from; t < to; ++t)
      out.set({b, t}, static_cast<double>(static_cast<std::int64_t>(tokens.at({b, t})) % (V - 1) + 1));
  return out;
}

bool has_parameter(const Module& m, const std::string& name) {
  for (const auto& [n, _] : m.named_parameters())
    if (n == name) return true;
  return false;
}

// logits (B,T,V) vs targets (B,T) -> the mean cross-entropy over non-pad targets (0-d).
Tensor loss_of(const Tensor& logits, const Tensor& targets, std::int64_t pad_id) {
  const std::int64_t n = logits.size(0) * logits.size(1);
  return cross_entropy(reshape(logits, {n, logits.size(2)}), reshape(targets, {n}), pad_id);
}

// (B,T,V) at position t -> (B,V)
Tensor at_position(const Tensor& logits, std::int64_t t) { return reshape(narrow(logits, 1, t, 1), {logits.size(0), -1}); }

std::string describe(const ModelConfig& c) {
  return std::string(positional_name(c.positional)) + " " + norm_position_name(c.norm_position) + " " +
         norm_name(c.norm) + " n_heads " + std::to_string(c.n_heads) + " n_kv_heads " + std::to_string(c.kv_heads());
}

// The configurations of the causality and cache tests: every positional kind under pre- and
// post-norm with MHA, then GQA and MQA with the relative kinds and the learned table.
std::vector<ModelConfig> cache_configs() {
  std::vector<ModelConfig> out;
  for (PositionalKind pos : {PositionalKind::Sinusoidal, PositionalKind::Learned, PositionalKind::RoPE,
                             PositionalKind::ALiBi})
    for (NormPosition position : {NormPosition::Pre, NormPosition::Post}) {
      ModelConfig c = small_config();
      c.positional = pos;
      c.norm_position = position;
      c.norm = position == NormPosition::Pre ? NormKind::LayerNorm : NormKind::RMSNorm;
      out.push_back(c);
    }
  const struct {
    PositionalKind pos;
    std::int64_t kv_heads;
  } grouped[] = {{PositionalKind::RoPE, 2}, {PositionalKind::ALiBi, 1}, {PositionalKind::Learned, 2},
                 {PositionalKind::Sinusoidal, 1}};
  for (const auto& g : grouped) {
    ModelConfig c = small_config();
    c.positional = g.pos;
    c.n_kv_heads = g.kv_heads;
    out.push_back(c);
  }
  return out;
}

// Gradient check of the loss of the whole float64 model w.r.t. every parameter, in gradcheck's
// fast mode as the encoder-decoder's model check (tests/test_seq2seq.cpp): per parameter tensor,
// the directional derivative along 4 random directions against sum(analytic * u). Element-wise
// (~2500 parameter elements, two passes each) with SCRATCHFORMER_ELEMENTWISE_GRADCHECK=1.
void require_model_gradcheck(const ModelConfig& cfg, std::uint64_t seed) {
  Generator init(seed);
  DecoderOnlyTransformer model(cfg, init, Dtype::Float64);
  model.eval();
  const Tensor tokens = ids({1, 4, 2, 5, 6, 3, 2, 0}, {2, 4});   // row 2 ends with a pad
  const Tensor targets = ids({4, 2, 5, 6, 3, 2, 0, 0}, {2, 4});  // its last two targets are padding
  GradcheckOptions fast;
  fast.fast_mode = std::getenv("SCRATCHFORMER_ELEMENTWISE_GRADCHECK") == nullptr;
  require_gradcheck([&](const std::vector<Tensor>&) { return loss_of(model.lm_logits(tokens), targets, 0); },
                    model.parameters(), fast);
  // Every parameter is reached by the backward pass.
  model.zero_grad();
  loss_of(model.lm_logits(tokens), targets, 0).backward();
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
  }
}

// The parameter count from the lecture's formula, written independently of the modules:
//   attention  q, out: D*D + D each; k, v: D*(Hkv*Dh) + Hkv*Dh each
//   FFN        fc1 D*F + F, fc2 F*D + D; SwiGLU adds gate D*F + F
//   norm       2 D (LayerNorm) or D (RMSNorm)
//   block = an encoder layer: attention + FFN + 2 norms (no cross-attention); pre-norm: one
//   final norm; the embedding V*D once (the LM head is tied to it); learned positions max_len*D.
std::int64_t formula_parameter_count(const ModelConfig& c) {
  const std::int64_t D = c.d_model, F = c.d_ff, kv = c.kv_heads() * (D / c.n_heads);
  const std::int64_t attention = 2 * (D * D + D) + 2 * (D * kv + kv);
  std::int64_t ffn = 2 * D * F + F + D;
  if (c.activation == Activation::SwiGLU) ffn += D * F + F;
  const std::int64_t norm = c.norm == NormKind::LayerNorm ? 2 * D : D;
  const std::int64_t block = attention + ffn + 2 * norm;
  const std::int64_t final_norm = c.norm_position == NormPosition::Pre ? norm : 0;
  const std::int64_t positions = c.positional == PositionalKind::Learned ? c.max_len * D : 0;
  return c.tgt_vocab * D + c.decoder_layers * block + final_norm + positions;
}

// Requires f() to throw std::invalid_argument with a one-line message that starts with
// "DecoderOnlyTransformer: " and contains every one of parts.
template <class F>
void require_model_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.rfind("DecoderOnlyTransformer: ", 0) == 0);
    CHECK(message.find('\n') == std::string::npos);
    for (const std::string& part : parts) CHECK_THAT(message, Contains(part));
    return;
  }
  FAIL("expected std::invalid_argument");
}

}  // namespace

// ---- the block: an EncoderLayer run causally with a KV cache -----------------------------------

TEST_CASE("EncoderLayer as a causal block step by step with a KVCache equals the whole sequence",
          "[model][encoder][cache][causal][rope][alibi]") {
  for (PositionalKind pos : {PositionalKind::Sinusoidal, PositionalKind::RoPE, PositionalKind::ALiBi}) {
    for (NormPosition position : {NormPosition::Pre, NormPosition::Post}) {
      INFO(positional_name(pos) << " " << norm_position_name(position));
      ModelConfig cfg = tiny_config();
      cfg.positional = pos;
      cfg.norm_position = position;
      Generator init(11), drop(1), gen(12);
      EncoderLayer layer(cfg, init, drop, Dtype::Float64);
      layer.eval();
      const std::int64_t T = 5;
      const Tensor x = randn({2, T, 8}, gen, Dtype::Float64);
      const Tensor whole = layer.forward(x, causal_mask(T, T), nullptr, 0, /*causal=*/true);  // (B,T,D)
      // A prefill of two positions at once, then one position per call.
      KVCache cache;
      const Tensor first_two = layer.forward(narrow(x, 1, 0, 2), causal_mask(2, 2), &cache, 0, true);
      REQUIRE(cache.length() == 2);
      REQUIRE(max_abs_diff(first_two, narrow(whole, 1, 0, 2)) <= kLayerCacheTol);
      for (std::int64_t t = 2; t < T; ++t) {
        const Tensor step = layer.forward(narrow(x, 1, t, 1), Tensor(), &cache, t, true);  // (B,1,D)
        REQUIRE(cache.length() == t + 1);
        REQUIRE(max_abs_diff(step, narrow(whole, 1, t, 1)) <= kLayerCacheTol);
      }
      // Without a mask and a cache it is the encoder's bidirectional layer: position 0 sees the future.
      REQUIRE(max_abs_diff(narrow(layer.forward(x, Tensor()), 1, 0, 1), narrow(whole, 1, 0, 1)) > kMustChange);
    }
  }
}

// ---- causality -------------------------------------------------------------------------------

TEST_CASE("DecoderOnlyTransformer later tokens never change earlier logits",
          "[model][causal][mask][rope][alibi][gqa]") {
  const std::int64_t T = 6;
  for (const ModelConfig& cfg : cache_configs()) {
    INFO(describe(cfg));
    Generator init(21), gen(22);
    DecoderOnlyTransformer model(cfg, init);  // float32
    model.eval();
    NoGradGuard no_grad;
    const Tensor tokens = random_tokens(2, T, cfg.tgt_vocab, gen);
    const Tensor logits = model.forward(Tensor(), tokens);  // (2,T,V)
    REQUIRE(logits.shape() == Shape{2, T, 11});
    for (std::int64_t t = 0; t + 1 < T; ++t) {
      INFO("tokens after position " << t << " changed");
      const Tensor later = model.forward(Tensor(), changed_tokens(tokens, t + 1, T, cfg.tgt_vocab));
      // Bit for bit: a blocked key has weight exactly 0, and 0 * v adds nothing.
      REQUIRE(max_abs_diff(narrow(later, 1, 0, t + 1), narrow(logits, 1, 0, t + 1)) == 0.0);
      // The token at t itself does change position t's logits (so the test can fail).
      const Tensor own = model.forward(Tensor(), changed_tokens(tokens, t, t + 1, cfg.tgt_vocab));
      REQUIRE(max_abs_diff(narrow(own, 1, 0, t), narrow(logits, 1, 0, t)) == 0.0);
      REQUIRE(max_abs_diff(at_position(own, t), at_position(logits, t)) > kMustChange);
    }
  }
}

// ---- generation: prefill and decode --------------------------------------------------------------

TEST_CASE("DecoderOnlyTransformer prefill and decode steps equal the full forward",
          "[model][cache][causal][rope][alibi][gqa]") {
  const std::int64_t B = 2, T = 7;
  for (const ModelConfig& cfg : cache_configs()) {
    Generator init(31), gen(32);
    DecoderOnlyTransformer model(cfg, init);  // float32
    model.eval();
    NoGradGuard no_grad;
    const Tensor tokens = random_tokens(B, T, cfg.tgt_vocab, gen);
    const Tensor full = model.lm_logits(tokens);  // (B,T,V)
    for (std::int64_t P : {1, 2, 4}) {
      INFO(describe(cfg) << ", prompt of " << P);
      const auto state_ptr = model.start_decoding(narrow(tokens, 1, 0, P));
      auto& state = dynamic_cast<DecoderOnlyState&>(*state_ptr);
      // The prefill filled every layer's cache with positions 0..P-2 (nothing when P == 1).
      REQUIRE(state.length() == P - 1);
      REQUIRE(state.layers.size() == 2);
      for (const KVCache& layer : state.layers) {
        REQUIRE(layer.length() == P - 1);
        if (P > 1) REQUIRE(layer.k.shape() == Shape{B, cfg.kv_heads(), P - 1, cfg.head_dim()});
        if (P == 1) REQUIRE_FALSE(layer.k.defined());
      }
      REQUIRE(max_abs_diff(state.first_tokens(), narrow(tokens, 1, P - 1, 1)) == 0.0);
      // Decode: each step reads the token at position length() and predicts the next one.
      Tensor step;
      for (std::int64_t t = P - 1; t < T; ++t) {
        step = model.decode_step(narrow(tokens, 1, t, 1), state);  // (B,V)
        REQUIRE(step.shape() == Shape{B, 11});
        REQUIRE(state.length() == t + 1);
        INFO("position " << t);
        REQUIRE(max_abs_diff(step, at_position(full, t)) <= kCacheTol);
      }
      // decode_prefix: the full forward over the sequence so far, no cache.
      const Tensor prefix = model.decode_prefix(tokens, state);
      REQUIRE(max_abs_diff(prefix, full) == 0.0);
      REQUIRE(max_abs_diff(at_position(prefix, T - 1), step) <= kCacheTol);
    }
  }
}

TEST_CASE("make_model builds the decoder-only model of model.arch", "[model][cache]") {
  ModelConfig cfg = small_config();
  Generator init(41), again(41), gen(42);
  const std::unique_ptr<Model> model = make_model(cfg, init);
  REQUIRE(dynamic_cast<DecoderOnlyTransformer*>(model.get()) != nullptr);
  CHECK(model->config().arch == Arch::DecoderOnly);
  // the same seed, the same parameters as building the class directly
  DecoderOnlyTransformer direct(cfg, again);
  const auto a = model->named_parameters(), b = direct.named_parameters();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(max_abs_diff(a[i].second, b[i].second) == 0.0);
  // Through the interface: a prompt, its first_tokens, one step.
  model->eval();
  NoGradGuard no_grad;
  const Tensor prompt = random_tokens(3, 4, cfg.tgt_vocab, gen);
  const auto state = model->start_decoding(prompt);
  CHECK(state->length() == 3);
  const Tensor first = state->first_tokens();
  REQUIRE(first.shape() == Shape{3, 1});
  const Tensor step = model->decode_step(first, *state);
  CHECK(max_abs_diff(step, at_position(direct.forward(Tensor(), prompt), 3)) <= kCacheTol);
}

TEST_CASE("DecoderOnlyState repeat_rows and reorder equal running the permuted batch",
          "[model][cache][rope][alibi][gqa]") {
  for (PositionalKind pos : {PositionalKind::Sinusoidal, PositionalKind::RoPE, PositionalKind::ALiBi}) {
    INFO(positional_name(pos));
    ModelConfig cfg = small_config();
    cfg.positional = pos;
    cfg.n_kv_heads = 2;
    Generator init(51), gen(52);
    DecoderOnlyTransformer model(cfg, init);
    model.eval();
    NoGradGuard no_grad;
    const Tensor prompt = random_tokens(3, 3, cfg.tgt_vocab, gen);  // (3,3)
    const std::vector<Tensor> steps{random_tokens(3, 1, cfg.tgt_vocab, gen), random_tokens(3, 1, cfg.tgt_vocab, gen)};
    // A permutation and a beam-search style selection (row 0 kept twice, row 1 dropped).
    for (const std::vector<std::int64_t>& order : {std::vector<std::int64_t>{2, 0, 1}, {0, 2, 0}}) {
      INFO("order " << order[0] << order[1] << order[2]);
      const Tensor perm = ids(order, {3});
      // The prompt's last token and one step on the original batch, reorder, then one more step.
      const auto state = model.start_decoding(prompt);
      model.decode_step(state->first_tokens(), *state);
      model.decode_step(steps[0], *state);
      state->reorder(perm);
      REQUIRE(state->length() == 4);
      REQUIRE(max_abs_diff(state->first_tokens(), index_select(narrow(prompt, 1, 2, 1), 0, perm)) == 0.0);
      const Tensor reordered = model.decode_step(index_select(steps[1], 0, perm), *state);
      // The permuted batch from the start.
      const auto fresh = model.start_decoding(index_select(prompt, 0, perm));
      model.decode_step(fresh->first_tokens(), *fresh);
      model.decode_step(index_select(steps[0], 0, perm), *fresh);
      const Tensor want = model.decode_step(index_select(steps[1], 0, perm), *fresh);
      REQUIRE(max_abs_diff(reordered, want) <= kCacheTol);
    }
    // repeat_rows: row b*K + k decodes as row b, after a prefill and with an empty cache (P = 1).
    for (std::int64_t P : {3, 1}) {
      INFO("prompt of " << P);
      const Tensor p = narrow(prompt, 1, 0, P);
      const auto repeated = model.start_decoding(p);
      repeated->repeat_rows(2);
      REQUIRE(repeated->length() == P - 1);
      const Tensor first = repeated->first_tokens();  // (6,1)
      REQUIRE(first.shape() == Shape{6, 1});
      const Tensor r = model.decode_step(first, *repeated);  // (6,V)
      const auto once = model.start_decoding(p);
      const Tensor one = model.decode_step(once->first_tokens(), *once);  // (3,V)
      for (std::int64_t row = 0; row < 6; ++row) {
        CHECK(first.at({row, 0}) == once->first_tokens().at({row / 2, 0}));
        CHECK(max_abs_diff(r.narrow(0, row, 1), one.narrow(0, row / 2, 1)) <= kCacheTol);
      }
    }
  }
}

// ---- gradients ------------------------------------------------------------------------------------

TEST_CASE("DecoderOnlyTransformer loss gradcheck pre-norm layernorm sinusoidal", "[model][grad][sinusoidal]") {
  require_model_gradcheck(tiny_config(), 61);
}

TEST_CASE("DecoderOnlyTransformer loss gradcheck post-norm rmsnorm rope gqa", "[model][grad][rope][gqa]") {
  ModelConfig cfg = tiny_config();
  cfg.norm_position = NormPosition::Post;
  cfg.norm = NormKind::RMSNorm;
  cfg.positional = PositionalKind::RoPE;
  cfg.n_heads = 4;  // Dh 2
  cfg.n_kv_heads = 2;
  require_model_gradcheck(cfg, 62);
}

TEST_CASE("DecoderOnlyTransformer loss gradcheck with learned positions", "[model][grad][learned]") {
  ModelConfig cfg = tiny_config();
  cfg.positional = PositionalKind::Learned;
  cfg.activation = Activation::SwiGLU;
  require_model_gradcheck(cfg, 63);
}

TEST_CASE("DecoderOnlyTransformer loss gradcheck alibi mqa", "[model][grad][alibi][gqa]") {
  ModelConfig cfg = tiny_config();
  cfg.positional = PositionalKind::ALiBi;
  cfg.n_kv_heads = 1;
  require_model_gradcheck(cfg, 64);
}

TEST_CASE("gradcheck catches a tied LM head that forgets the head's gradient into the embedding",
          "[model][grad][mutation]") {
  // The model written out from its parts (nn/decoder_only.h's picture); first with the tied head
  // h E^T as the model computes it (the same logits, bit for bit), then with E detached in the
  // head: the forward is unchanged but embed.weight loses the gradient of its second use, the
  // classic bug of tied weights (their gradient is the sum over both uses).
  Generator init(71);
  DecoderOnlyTransformer model(tiny_config(), init, Dtype::Float64);
  model.eval();
  const Tensor tokens = ids({1, 4, 2, 5, 6, 3, 2, 1}, {2, 4});
  const Tensor targets = ids({4, 2, 5, 6, 3, 2, 1, 5}, {2, 4});
  auto logits_from_parts = [&](bool detach_head) {
    const auto& positions = dynamic_cast<const SinusoidalPositional&>(*model.pos);
    Tensor h = positions.forward(mul(model.embed->forward(tokens), std::sqrt(8.0)), 0);  // (B,T,D)
    for (const auto& layer : *model.layers) h = layer->forward(h, causal_mask(4, 4), nullptr, 0, true);
    h = apply_norm(*model.norm, h);
    return linear(h, detach_head ? model.embed->weight.detach() : model.embed->weight);  // (B,T,V)
  };
  REQUIRE(max_abs_diff(logits_from_parts(false), model.lm_logits(tokens)) == 0.0);
  GradcheckOptions fast;
  fast.fast_mode = true;
  const auto loss = [&](bool detach_head) {
    return [&, detach_head](const std::vector<Tensor>&) { return loss_of(logits_from_parts(detach_head), targets, 0); };
  };
  require_gradcheck(loss(false), model.parameters(), fast);
  const GradcheckResult broken = gradcheck(loss(true), model.parameters(), fast);
  INFO(broken.message);
  REQUIRE_FALSE(broken.ok);
  // Exactly embed.weight (input 0, named_parameters order) fails; every other gradient is right.
  REQUIRE(model.named_parameters()[0].first == "embed.weight");
  REQUIRE(broken.inputs.size() == model.parameters().size());
  REQUIRE_FALSE(broken.inputs[0].ok);
  for (std::size_t i = 1; i < broken.inputs.size(); ++i) {
    INFO(model.named_parameters()[i].first);
    REQUIRE(broken.inputs[i].ok);
  }
}

// ---- parameters ------------------------------------------------------------------------------------

TEST_CASE("DecoderOnlyTransformer parameter names follow the module tree", "[model][params]") {
  ModelConfig cfg = tiny_config();
  Generator init(81);
  {
    DecoderOnlyTransformer model(cfg, init);
    for (const char* name : {"embed.weight", "layers.0.self_attn.q_proj.weight", "layers.0.self_attn.k_proj.bias",
                             "layers.0.self_attn.out_proj.weight", "layers.0.ffn.fc1.weight", "layers.0.ffn.fc2.bias",
                             "layers.0.norm1.weight", "layers.0.norm1.bias", "layers.1.norm2.weight",
                             "layers.1.self_attn.v_proj.weight", "norm.weight", "norm.bias"}) {
      INFO(name);
      REQUIRE(has_parameter(model, name));
    }
    REQUIRE_FALSE(has_parameter(model, "pos.weight"));  // sinusoidal: a constant table
    REQUIRE_FALSE(has_parameter(model, "layers.2.norm1.weight"));
    std::set<std::string> names;
    for (const auto& [n, _] : model.named_parameters()) {
      INFO(n);
      REQUIRE(n.find("cross_attn") == std::string::npos);  // no cross-attention
      REQUIRE(n.find("output_proj") == std::string::npos);  // the head is the embedding
      names.insert(n);
    }
    REQUIRE(names.size() == model.named_parameters().size());  // unique
    // The summary lists the tree with parameter counts (by hand: 600 per block, see below).
    const std::string summary = model.summary();
    INFO(summary);
    CHECK_THAT(summary, Contains("model (DecoderOnlyTransformer): 1272 parameters\n"));
    CHECK_THAT(summary, Contains("\n  embed (Embedding): 56 parameters\n"));
    CHECK_THAT(summary, Contains("\n  layers (ModuleList): 1200 parameters\n    0 (EncoderLayer): 600 parameters\n"));
    CHECK_THAT(summary, Contains("\n      self_attn (MultiHeadAttention): 288 parameters\n"));
    CHECK_THAT(summary, Contains("\n  norm (LayerNorm): 16 parameters\n"));
  }
  SECTION("post-norm rmsnorm learned positions") {
    cfg.norm_position = NormPosition::Post;
    cfg.norm = NormKind::RMSNorm;
    cfg.positional = PositionalKind::Learned;
    DecoderOnlyTransformer model(cfg, init);
    REQUIRE(has_parameter(model, "pos.weight"));
    REQUIRE(has_parameter(model, "layers.0.norm1.weight"));
    REQUIRE_FALSE(has_parameter(model, "layers.0.norm1.bias"));  // RMSNorm has no bias
    REQUIRE_FALSE(has_parameter(model, "norm.weight"));          // post-norm: no final norm
    REQUIRE(model.norm == nullptr);
  }
}

TEST_CASE("DecoderOnlyTransformer parameter count matches the formula", "[model][params]") {
  // The tiny model by hand: attention 4*64 + 4*8 = 288, FFN 2*8*16 + 16 + 8 = 280, LayerNorm 16;
  // block 288 + 280 + 32 = 600, two blocks 1200, final norm 16, embedding 7*8 = 56: 1272.
  {
    Generator init(91);
    REQUIRE(DecoderOnlyTransformer(tiny_config(), init).parameter_count() == 1272);
    REQUIRE(formula_parameter_count(tiny_config()) == 1272);
  }
  // Every norm position x norm x k/v head combination, positional kind and activation cycling.
  ModelConfig base = small_config();
  base.decoder_layers = 3;
  base.max_len = 20;
  const PositionalKind kinds[] = {PositionalKind::Sinusoidal, PositionalKind::Learned, PositionalKind::RoPE,
                                  PositionalKind::ALiBi};
  const Activation activations[] = {Activation::ReLU, Activation::GELU, Activation::SwiGLU};
  int i = 0;
  for (NormPosition position : {NormPosition::Pre, NormPosition::Post})
    for (NormKind norm : {NormKind::LayerNorm, NormKind::RMSNorm})
      for (std::int64_t kv : {0, 2, 1}) {
        ModelConfig c = base;
        c.norm_position = position;
        c.norm = norm;
        c.n_kv_heads = kv;
        c.positional = kinds[i % 4];
        c.activation = activations[i % 3];
        c.src_vocab = i % 2 == 0 ? 0 : c.tgt_vocab;  // both spellings of one vocabulary
        ++i;
        INFO(describe(c) << " " << activation_name(c.activation));
        Generator init(92);
        REQUIRE(DecoderOnlyTransformer(c, init).parameter_count() == formula_parameter_count(c));
      }
}

// ---- errors -----------------------------------------------------------------------------------------

TEST_CASE("DecoderOnlyTransformer rejects a config of another architecture or vocabulary", "[model][errors]") {
  ModelConfig cfg = tiny_config();
  Generator init(101);
  SECTION("arch") {
    cfg.arch = Arch::EncoderDecoder;
    require_model_error([&] { DecoderOnlyTransformer m(cfg, init); },
                        {"expected model.arch decoder-only", "got encoder-decoder"});
  }
  SECTION("src_vocab") {
    cfg.src_vocab = 9;
    require_model_error([&] { DecoderOnlyTransformer m(cfg, init); },
                        {"src_vocab 0 or equal to tgt_vocab 7", "got src_vocab 9"});
    cfg.src_vocab = 7;  // the same vocabulary written twice is fine
    REQUIRE_NOTHROW(DecoderOnlyTransformer(cfg, init));
  }
  SECTION("the rest of the config is validated") {
    cfg.d_model = 10;
    cfg.n_heads = 4;
    REQUIRE_THROWS_WITH(DecoderOnlyTransformer(cfg, init), Contains("d_model 10 is not divisible by n_heads 4"));
  }
}

TEST_CASE("DecoderOnlyTransformer rejects malformed inputs with clear messages", "[model][errors]") {
  Generator init(111);
  const ModelConfig cfg = tiny_config();  // V 7, max_len 8
  DecoderOnlyTransformer model(cfg, init);
  model.eval();
  NoGradGuard no_grad;
  const Tensor tokens = ids({1, 4, 2, 5, 6, 3}, {2, 3});
  SECTION("a source with columns") {
    require_model_error([&] { model.forward(ids({3, 5, 2, 6}, {2, 2}), tokens); },
                        {"expected no source", "got src of shape (2, 2)"});
    REQUIRE(max_abs_diff(model.forward(ids({}, {2, 0}), tokens), model.forward(Tensor(), tokens)) == 0.0);
  }
  SECTION("token ids out of range, of another dtype or shape") {
    require_model_error([&] { model.forward(Tensor(), ids({1, 4, 2, 5, 6, 7}, {2, 3})); },
                        {"token ids in [0, 7)", "got 7 at row 1, position 2"});
    require_model_error([&] { model.start_decoding(ids({1, -1}, {1, 2})); },
                        {"prompt token ids in [0, 7)", "got -1 at row 0, position 1"});
    require_model_error([&] { model.forward(Tensor(), zeros({2, 3})); }, {"(B,T)", "int64", "float32"});
    require_model_error([&] { model.forward(Tensor(), ids({1, 2, 3})); }, {"(B,T)", "(3,)"});
  }
  SECTION("a sequence or prompt longer than max_len") {
    require_model_error([&] { model.forward(Tensor(), ids(std::vector<std::int64_t>(9, 2), {1, 9})); },
                        {"at most max_len 8", "(1, 9)"});
    require_model_error([&] { model.start_decoding(ids(std::vector<std::int64_t>(9, 2), {1, 9})); },
                        {"at most max_len 8", "prompt", "(1, 9)"});
    require_model_error([&] { model.start_decoding(ids({}, {2, 0})); }, {"at least one token", "(2, 0)"});
  }
  SECTION("a step past max_len") {
    // A prompt of max_len tokens fits: its last token's step is at position 7 ...
    const auto state = model.start_decoding(ids(std::vector<std::int64_t>(8, 2), {1, 8}));
    REQUIRE(state->length() == 7);
    model.decode_step(ids({3}, {1, 1}), *state);
    REQUIRE(state->length() == 8);
    // ... and no position comes after it.
    require_model_error([&] { model.decode_step(ids({3}, {1, 1}), *state); },
                        {"below max_len 8", "got position 8"});
  }
  SECTION("decode_step arguments") {
    const auto state = model.start_decoding(tokens);
    require_model_error([&] { model.decode_step(tokens, *state); }, {"(B,1)", "(2, 3)"});
    require_model_error([&] { model.decode_step(ids({1, 2, 3}, {3, 1}), *state); }, {"batch of 2", "(3, 1)"});
    EncoderDecoderState other;
    require_model_error([&] { model.decode_step(ids({1, 2}, {2, 1}), other); }, {"DecodeState", "start_decoding"});
    REQUIRE_THROWS_WITH(state->reorder(ids({0, 1}, {1, 2})), Contains("reorder") && Contains("(1, 2)"));
    REQUIRE_THROWS_WITH(state->repeat_rows(0), Contains("repeat_rows") && Contains("got 0"));
  }
}
