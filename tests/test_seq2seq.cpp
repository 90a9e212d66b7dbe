// The Transformer layers and the Seq2Seq model (nn/transformer_layers.h, nn/seq2seq.h):
//   EncoderLayer / DecoderLayer: the pre- and post-norm residual formulas, float64 gradient
//     checks w.r.t. the inputs and every parameter for pre/post x layernorm/rmsnorm, a decoder
//     layer run step by step with a LayerCache against the whole target;
//   Seq2SeqTransformer: gradient checks of the loss w.r.t. every parameter (each positional
//     kind, MHA/GQA/MQA, shared and tied embeddings, post-norm RMSNorm SwiGLU); causality
//     (later target tokens never change earlier logits); padding (pad tokens in the source
//     change nothing); the KV cache (decode_step equals decode on the prefix, reorder equals
//     running the permuted batch); parameter names and counts against the formula; dropout
//     in train vs eval; ModelConfig::validate and the input errors.
//
// Every gradient check is tiny (D 8, H 2, d_ff 16, one layer each, vocabulary 7, lengths 3-4,
// float64, dropout 0, eval mode) to stay fast under AddressSanitizer.
//
// Letters: B batch, S source length, T target length, D d_model, H heads, Hkv key/value heads,
// Dh head width, F d_ff, V vocabulary.
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "nn/attention.h"
#include "nn/positional.h"
#include "nn/rnn_seq2seq.h"
#include "nn/seq2seq.h"
#include "nn/transformer_layers.h"
#include "test_util.h"

using namespace sf;
using namespace sf::nn;
using Catch::Contains;
using sf::test::grad_input;
using sf::test::max_abs_diff;
using sf::test::require_gradcheck;

namespace {

// float64 runs that differ only in things the math says cannot matter (later target tokens,
// padded source positions, a batch padded to a longer length): masked keys get weight exactly
// 0, so the only differences are rounding from other summation orders, ~1e-16 per op on O(1)
// values; 1e-12 has room for that and still catches any leak (which moves logits by ~1e-1).
constexpr double kInvarianceTol = 1e-12;
// float32 step-by-step decoding (decode_step with the KV cache) vs decode() on the whole
// prefix: the same math through differently shaped matmuls (other summation orders, other
// BLAS kernels). float32 rounds at ~6e-8 relative; the logits here are O(1) and pass through
// ~10 ops per layer, so 1e-5 leaves a wide margin and still catches a wrong position or a
// missing key (which changes logits by ~1e-1).
constexpr double kCacheTol = 1e-5;
// A float64 layer recomputed from its own submodules in the same order: bit-identical in
// practice; 1e-14 allows for nothing but rounding.
constexpr double kSameMathTol = 1e-14;

// The tiny model of the gradient checks: D 8, H 2 (Dh 4), d_ff 16, one encoder and one
// decoder layer, vocabulary 7 (pad 0), no dropout.
ModelConfig tiny_config() {
  ModelConfig c;
  c.src_vocab = 7;
  c.tgt_vocab = 7;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 16;
  c.encoder_layers = 1;
  c.decoder_layers = 1;
  c.dropout = 0.0;
  c.max_len = 8;
  c.pad_id = 0;
  return c;
}

// A larger float32 model for the cache tests: D 16, H 4 (Dh 4), two layers each, vocabulary 11.
ModelConfig small_config() {
  ModelConfig c = tiny_config();
  c.src_vocab = 11;
  c.tgt_vocab = 11;
  c.d_model = 16;
  c.n_heads = 4;
  c.d_ff = 32;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.max_len = 16;
  return c;
}

using sf::test::ids;              // tests/test_util.h
using sf::test::with_parameters;

// The source batch of most tests: (2,4), the second row ends with two pads (pad_id 0).
Tensor padded_source() { return ids({3, 5, 2, 6, 4, 1, 0, 0}, {2, 4}); }

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

// x narrowed to positions [0, len) along dim 1 (for (B,T,V) logits).
Tensor first_positions(const Tensor& x, std::int64_t len) { return narrow(x, 1, 0, len); }

// Gradient check of the loss of a whole float64 model w.r.t. every parameter. Element-wise
// checking needs two forward passes per parameter element (~1700 of them, ~3400 passes), too
// slow under AddressSanitizer, so this uses gradcheck's fast mode: per parameter tensor, the
// directional derivative along 4 random directions u (numeric: two passes) against
// sum(analytic * u), same eps/atol/rtol. A wrong gradient in any element of a tensor changes
// sum(analytic * u) for almost every u, so the check still catches it. The layer gradchecks
// below check every element. To check every element of the whole model too (quick in an
// optimised build, slow under the sanitizers), run with the
// environment variable SCRATCHFORMER_ELEMENTWISE_GRADCHECK=1.
void require_model_gradcheck(const ModelConfig& cfg, std::uint64_t seed) {
  Generator init(seed);
  Seq2SeqTransformer model(cfg, init, Dtype::Float64);
  model.eval();
  const Tensor src = padded_source();
  const Tensor tgt_in = ids({1, 4, 2, 1, 6, 3}, {2, 3});
  const Tensor tgt_out = ids({4, 2, 5, 6, 3, 0}, {2, 3});  // the last target of row 2 is padding
  GradcheckOptions fast;
  fast.fast_mode = std::getenv("SCRATCHFORMER_ELEMENTWISE_GRADCHECK") == nullptr;
  require_gradcheck([&](const std::vector<Tensor>&) { return loss_of(model.forward(src, tgt_in), tgt_out, 0); },
                    model.parameters(), fast);
  // Every parameter is reached by the backward pass.
  model.zero_grad();
  loss_of(model.forward(src, tgt_in), tgt_out, 0).backward();
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
  }
}

// The parameter count from the lecture's formula, written independently of the modules:
//   attention  q, out: D*D + D each; k, v: D*(Hkv*Dh) + Hkv*Dh each
//              (MHA, Hkv*Dh = D: 4 D^2 + 4 D)
//   FFN        fc1 D*F + F, fc2 F*D + D (2 D F + F + D); SwiGLU adds gate D*F + F
//   norm       2 D (LayerNorm: weight, bias) or D (RMSNorm: weight)
//   encoder layer: attention + FFN + 2 norms; decoder layer: 2 attentions + FFN + 3 norms;
//   pre-norm: one final norm per stack
//   embeddings V_src*D + V_tgt*D (shared: once); output D*V_tgt (tied: none);
//   learned positions max_len*D per side (source and target tables)
std::int64_t formula_parameter_count(const ModelConfig& c) {
  const std::int64_t D = c.d_model, F = c.d_ff, kv = (c.n_kv_heads == 0 ? c.n_heads : c.n_kv_heads) * (D / c.n_heads);
  const std::int64_t attention = 2 * (D * D + D) + 2 * (D * kv + kv);
  std::int64_t ffn = 2 * D * F + F + D;
  if (c.activation == Activation::SwiGLU) ffn += D * F + F;
  const std::int64_t norm = c.norm == NormKind::LayerNorm ? 2 * D : D;
  const std::int64_t encoder_layer = attention + ffn + 2 * norm;
  const std::int64_t decoder_layer = 2 * attention + ffn + 3 * norm;
  const std::int64_t final_norms = c.norm_position == NormPosition::Pre ? 2 * norm : 0;
  const std::int64_t embeddings = c.src_vocab * D + (c.share_embeddings ? 0 : c.tgt_vocab * D);
  const std::int64_t output = c.tie_output ? 0 : D * c.tgt_vocab;
  const std::int64_t positions = c.positional == PositionalKind::Learned ? 2 * c.max_len * D : 0;
  return c.encoder_layers * encoder_layer + c.decoder_layers * decoder_layer + final_norms + embeddings + output +
         positions;
}

// The four layer options of the gradient checks.
struct NormOption {
  NormPosition position;
  NormKind kind;
};
const std::vector<NormOption> kNormOptions{{NormPosition::Pre, NormKind::LayerNorm},
                                           {NormPosition::Pre, NormKind::RMSNorm},
                                           {NormPosition::Post, NormKind::LayerNorm},
                                           {NormPosition::Post, NormKind::RMSNorm}};

std::string describe(const NormOption& o) {
  return std::string(norm_position_name(o.position)) + " " + norm_name(o.kind);
}

// enc with rows batch_indices (the memory and its mask), as beam search reorders hypotheses.
Encoded select_rows(const Encoded& enc, const Tensor& batch_indices) {
  return Encoded{index_select(enc.memory, 0, batch_indices), index_select(enc.src_mask, 0, batch_indices)};
}

// Row-wise argmax of logits (B,V) -> ids (B,1).
Tensor greedy_tokens(const Tensor& logits) {
  const std::int64_t B = logits.size(0), V = logits.size(1);
  std::vector<std::int64_t> best(B, 0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t v = 1; v < V; ++v)
      if (logits.at({b, v}) > logits.at({b, best[b]})) best[b] = v;
  return ids(best, {B, 1});
}

}  // namespace

// ---- ModelConfig -------------------------------------------------------------------------

TEST_CASE("ModelConfig parse functions accept the documented names", "[model][errors]") {
  REQUIRE(parse_norm("layernorm") == NormKind::LayerNorm);
  REQUIRE(parse_norm("rmsnorm") == NormKind::RMSNorm);
  REQUIRE(parse_norm_position("pre") == NormPosition::Pre);
  REQUIRE(parse_norm_position("post") == NormPosition::Post);
  REQUIRE(parse_positional("sinusoidal") == PositionalKind::Sinusoidal);
  REQUIRE(parse_positional("learned") == PositionalKind::Learned);
  REQUIRE(parse_positional("rope") == PositionalKind::RoPE);
  REQUIRE(parse_positional("alibi") == PositionalKind::ALiBi);
  for (PositionalKind k : {PositionalKind::Sinusoidal, PositionalKind::Learned, PositionalKind::RoPE,
                           PositionalKind::ALiBi})
    REQUIRE(parse_positional(positional_name(k)) == k);
  REQUIRE_THROWS_WITH(parse_norm("batchnorm"), Contains("batchnorm") && Contains("layernorm") && Contains("rmsnorm"));
  REQUIRE_THROWS_WITH(parse_norm_position("middle"), Contains("middle") && Contains("pre") && Contains("post"));
  REQUIRE_THROWS_WITH(parse_positional("relative"), Contains("relative") && Contains("sinusoidal") &&
                                                        Contains("learned") && Contains("rope") && Contains("alibi"));
}

TEST_CASE("ModelConfig validate names the offending numbers", "[model][errors]") {
  REQUIRE_NOTHROW(tiny_config().validate());
  ModelConfig c = tiny_config();
  SECTION("vocabulary not set") {
    c.src_vocab = 0;
    REQUIRE_THROWS_WITH(c.validate(), Contains("src_vocab") && Contains("got 0"));
  }
  SECTION("negative d_ff") {
    c.d_ff = -3;
    REQUIRE_THROWS_WITH(c.validate(), Contains("d_ff") && Contains("-3"));
  }
  SECTION("zero decoder layers") {
    c.decoder_layers = 0;
    REQUIRE_THROWS_WITH(c.validate(), Contains("decoder_layers") && Contains("got 0"));
  }
  SECTION("d_model not divisible by n_heads") {
    c.d_model = 250;
    c.n_heads = 8;
    REQUIRE_THROWS_WITH(c.validate(), Contains("d_model 250 is not divisible by n_heads 8"));
  }
  SECTION("n_heads not divisible by n_kv_heads") {
    c.n_heads = 4;
    c.n_kv_heads = 3;
    REQUIRE_THROWS_WITH(c.validate(), Contains("n_heads 4 is not divisible by n_kv_heads 3"));
  }
  SECTION("negative n_kv_heads") {
    c.n_kv_heads = -1;
    REQUIRE_THROWS_WITH(c.validate(), Contains("n_kv_heads") && Contains("-1"));
  }
  SECTION("odd head width with RoPE") {
    c.d_model = 18;
    c.n_heads = 2;
    c.positional = PositionalKind::RoPE;
    REQUIRE_THROWS_WITH(c.validate(), Contains("rope") && Contains("d_model 18") && Contains("n_heads 2") &&
                                          Contains("= 9"));
    c.positional = PositionalKind::ALiBi;  // an odd head width is fine without rotation
    REQUIRE_NOTHROW(c.validate());
  }
  SECTION("shared embeddings with different vocabularies") {
    c.share_embeddings = true;
    c.tgt_vocab = 9;
    REQUIRE_THROWS_WITH(c.validate(), Contains("share_embeddings") && Contains("src_vocab 7") &&
                                          Contains("tgt_vocab 9"));
  }
  SECTION("dropout out of range") {
    c.dropout = 1.5;
    REQUIRE_THROWS_WITH(c.validate(), Contains("dropout") && Contains("1.5"));
    c.dropout = 0.1;
    c.attention_dropout = -0.25;
    REQUIRE_THROWS_WITH(c.validate(), Contains("attention_dropout") && Contains("-0.25"));
  }
  SECTION("pad_id outside the vocabulary") {
    c.pad_id = 7;
    REQUIRE_THROWS_WITH(c.validate(), Contains("pad_id 7") && Contains("src_vocab 7"));
  }
  SECTION("the model constructor validates") {
    c.d_model = 250;
    c.n_heads = 8;
    Generator gen(1);
    REQUIRE_THROWS_WITH(Seq2SeqTransformer(c, gen), Contains("d_model 250 is not divisible by n_heads 8"));
  }
  SECTION("kv_heads and head_dim") {
    c.n_heads = 4;
    c.n_kv_heads = 0;
    REQUIRE(c.kv_heads() == 4);
    c.n_kv_heads = 2;
    REQUIRE(c.kv_heads() == 2);
    REQUIRE(c.head_dim() == 2);
  }
}

// ---- EncoderLayer and DecoderLayer ---------------------------------------------------------

TEST_CASE("EncoderLayer follows the pre-norm and post-norm residual formulas", "[model][encoder]") {
  for (const NormOption& o : kNormOptions) {
    INFO(describe(o));
    ModelConfig cfg = tiny_config();
    cfg.norm_position = o.position;
    cfg.norm = o.kind;
    Generator init(11), drop(1), gen(12);
    EncoderLayer layer(cfg, init, drop, Dtype::Float64);
    layer.eval();
    const Tensor x = randn({2, 4, 8}, gen, Dtype::Float64);
    const Tensor mask = padding_mask(padded_source(), 0);
    // The formulas written out with the layer's own submodules.
    auto attn = [&](const Tensor& h) { return layer.self_attn->forward(h, h, mask); };
    auto ffn = [&](const Tensor& h) { return layer.ffn->forward(h); };
    auto n1 = [&](const Tensor& h) { return apply_norm(*layer.norm1, h); };
    auto n2 = [&](const Tensor& h) { return apply_norm(*layer.norm2, h); };
    Tensor want;
    if (o.position == NormPosition::Pre) {
      const Tensor a = x + attn(n1(x));
      want = a + ffn(n2(a));
    } else {
      const Tensor a = n1(x + attn(x));
      want = n2(a + ffn(a));
    }
    REQUIRE(max_abs_diff(layer.forward(x, mask), want) <= kSameMathTol);
    REQUIRE(std::string(layer.norm1->type_name()) == (o.kind == NormKind::LayerNorm ? "LayerNorm" : "RMSNorm"));
  }
}

namespace {

// Element-wise gradient check of an EncoderLayer w.r.t. its input and every parameter
// (~600 parameter elements + 48 input elements, two passes each).
void require_encoder_layer_gradcheck(NormPosition position, NormKind kind, std::uint64_t seed) {
  ModelConfig cfg = tiny_config();
  cfg.norm_position = position;
  cfg.norm = kind;
  Generator init(seed), drop(1), gen(seed + 1);
  EncoderLayer layer(cfg, init, drop, Dtype::Float64);
  layer.eval();
  Tensor x = grad_input({2, 3, 8}, gen);
  const Tensor mask = padding_mask(ids({3, 5, 2, 4, 1, 0}, {2, 3}), 0);  // row 2: one pad
  require_gradcheck([&](const std::vector<Tensor>& in) { return layer.forward(in[0], mask); },
                    with_parameters({x}, layer));
}

// Element-wise gradient check of a DecoderLayer w.r.t. both inputs and every parameter
// (~900 parameter elements + 56 input elements), causal self-mask and a padded memory.
void require_decoder_layer_gradcheck(NormPosition position, NormKind kind, std::uint64_t seed) {
  ModelConfig cfg = tiny_config();
  cfg.norm_position = position;
  cfg.norm = kind;
  Generator init(seed), drop(1), gen(seed + 1);
  DecoderLayer layer(cfg, init, drop, Dtype::Float64);
  layer.eval();
  Tensor y = grad_input({2, 3, 8}, gen), memory = grad_input({2, 4, 8}, gen);
  const Tensor self_mask = causal_mask(3, 3), memory_mask = padding_mask(padded_source(), 0);
  require_gradcheck(
      [&](const std::vector<Tensor>& in) { return layer.forward(in[0], in[1], self_mask, memory_mask); },
      with_parameters({y, memory}, layer));
}

}  // namespace

TEST_CASE("EncoderLayer gradcheck pre-norm layernorm", "[model][encoder][grad][padding]") {
  require_encoder_layer_gradcheck(NormPosition::Pre, NormKind::LayerNorm, 21);
}

TEST_CASE("EncoderLayer gradcheck pre-norm rmsnorm", "[model][encoder][grad][padding]") {
  require_encoder_layer_gradcheck(NormPosition::Pre, NormKind::RMSNorm, 23);
}

TEST_CASE("EncoderLayer gradcheck post-norm layernorm", "[model][encoder][grad][padding]") {
  require_encoder_layer_gradcheck(NormPosition::Post, NormKind::LayerNorm, 25);
}

TEST_CASE("EncoderLayer gradcheck post-norm rmsnorm", "[model][encoder][grad][padding]") {
  require_encoder_layer_gradcheck(NormPosition::Post, NormKind::RMSNorm, 27);
}

TEST_CASE("DecoderLayer gradcheck pre-norm layernorm", "[model][decoder][grad][causal][padding]") {
  require_decoder_layer_gradcheck(NormPosition::Pre, NormKind::LayerNorm, 31);
}

TEST_CASE("DecoderLayer gradcheck pre-norm rmsnorm", "[model][decoder][grad][causal][padding]") {
  require_decoder_layer_gradcheck(NormPosition::Pre, NormKind::RMSNorm, 33);
}

TEST_CASE("DecoderLayer gradcheck post-norm layernorm", "[model][decoder][grad][causal][padding]") {
  require_decoder_layer_gradcheck(NormPosition::Post, NormKind::LayerNorm, 35);
}

TEST_CASE("DecoderLayer gradcheck post-norm rmsnorm", "[model][decoder][grad][causal][padding]") {
  require_decoder_layer_gradcheck(NormPosition::Post, NormKind::RMSNorm, 37);
}

TEST_CASE("DecoderLayer step by step with a LayerCache equals the whole target", "[model][decoder][cache][causal]") {
  for (PositionalKind pos : {PositionalKind::Sinusoidal, PositionalKind::RoPE, PositionalKind::ALiBi}) {
    INFO(positional_name(pos));
    ModelConfig cfg = tiny_config();
    cfg.positional = pos;
    Generator init(41), drop(1), gen(42);
    DecoderLayer layer(cfg, init, drop, Dtype::Float64);
    layer.eval();
    const std::int64_t T = 4;
    const Tensor y = randn({2, T, 8}, gen, Dtype::Float64), memory = randn({2, 4, 8}, gen, Dtype::Float64);
    const Tensor memory_mask = padding_mask(padded_source(), 0);
    const Tensor whole = layer.forward(y, memory, causal_mask(T, T), memory_mask);  // (B,T,D)
    LayerCache cache;
    for (std::int64_t t = 0; t < T; ++t) {
      const Tensor step = layer.forward(narrow(y, 1, t, 1), t == 0 ? memory : Tensor(), Tensor(), memory_mask,
                                        &cache, t);  // (B,1,D)
      REQUIRE(cache.self.length() == t + 1);
      REQUIRE(cache.cross.length() == 4);
      REQUIRE(max_abs_diff(step, narrow(whole, 1, t, 1)) <= kInvarianceTol);
    }
  }
}

TEST_CASE("Encoder and Decoder end with a final norm only under pre-norm", "[model][encoder][decoder]") {
  for (NormPosition position : {NormPosition::Pre, NormPosition::Post}) {
    INFO(norm_position_name(position));
    ModelConfig cfg = tiny_config();
    cfg.norm_position = position;
    cfg.encoder_layers = 2;
    Generator init(51), drop(1), gen(52);
    Encoder encoder(cfg, init, drop, Dtype::Float64);
    encoder.eval();
    REQUIRE(encoder.layers->size() == 2);
    REQUIRE(has_parameter(encoder, "norm.weight") == (position == NormPosition::Pre));
    const Tensor x = randn({2, 4, 8}, gen, Dtype::Float64);
    const Tensor mask = padding_mask(padded_source(), 0);
    Tensor want = (*encoder.layers)[1].forward((*encoder.layers)[0].forward(x, mask), mask);
    if (position == NormPosition::Pre) want = apply_norm(*encoder.norm, want);
    REQUIRE(max_abs_diff(encoder.forward(x, mask), want) <= kSameMathTol);
    Decoder decoder(cfg, init, drop, Dtype::Float64);
    REQUIRE(has_parameter(decoder, "norm.weight") == (position == NormPosition::Pre));
    REQUIRE(has_parameter(decoder, "layers.0.norm3.weight"));
  }
}

// ---- the whole model: gradients ----------------------------------------------------------

TEST_CASE("Seq2SeqTransformer loss gradcheck with sinusoidal positions", "[model][grad]") {
  require_model_gradcheck(tiny_config(), 61);
}

TEST_CASE("Seq2SeqTransformer loss gradcheck with learned positions", "[model][grad]") {
  ModelConfig cfg = tiny_config();
  cfg.positional = PositionalKind::Learned;
  require_model_gradcheck(cfg, 62);
}

TEST_CASE("Seq2SeqTransformer loss gradcheck with RoPE", "[model][grad]") {
  ModelConfig cfg = tiny_config();
  cfg.positional = PositionalKind::RoPE;
  require_model_gradcheck(cfg, 63);
}

TEST_CASE("Seq2SeqTransformer loss gradcheck with ALiBi", "[model][grad]") {
  ModelConfig cfg = tiny_config();
  cfg.positional = PositionalKind::ALiBi;
  require_model_gradcheck(cfg, 64);
}

TEST_CASE("Seq2SeqTransformer loss gradcheck with GQA and MQA", "[model][grad]") {
  ModelConfig cfg = tiny_config();
  SECTION("GQA: 4 query heads over 2 k/v heads") {
    cfg.n_heads = 4;  // Dh 2
    cfg.n_kv_heads = 2;
    require_model_gradcheck(cfg, 65);
  }
  SECTION("MQA: 2 query heads over 1 k/v head") {
    cfg.n_kv_heads = 1;
    require_model_gradcheck(cfg, 66);
  }
}

TEST_CASE("Seq2SeqTransformer loss gradcheck with shared and tied embeddings", "[model][grad]") {
  ModelConfig cfg = tiny_config();
  cfg.share_embeddings = true;
  cfg.tie_output = true;
  require_model_gradcheck(cfg, 67);
}

TEST_CASE("Seq2SeqTransformer loss gradcheck post-norm with RMSNorm and SwiGLU", "[model][grad]") {
  ModelConfig cfg = tiny_config();
  cfg.norm_position = NormPosition::Post;
  cfg.norm = NormKind::RMSNorm;
  cfg.activation = Activation::SwiGLU;
  require_model_gradcheck(cfg, 68);
}

// ---- the whole model: masks ----------------------------------------------------------------

TEST_CASE("Seq2SeqTransformer later target tokens never change earlier logits", "[model][causal][mask]") {
  for (PositionalKind pos : {PositionalKind::Sinusoidal, PositionalKind::Learned, PositionalKind::RoPE,
                             PositionalKind::ALiBi}) {
    for (NormPosition position : {NormPosition::Pre, NormPosition::Post}) {
      INFO(positional_name(pos) << " " << norm_position_name(position));
      ModelConfig cfg = tiny_config();
      cfg.positional = pos;
      cfg.norm_position = position;
      Generator init(71);
      Seq2SeqTransformer model(cfg, init, Dtype::Float64);
      model.eval();
      const Tensor src = padded_source();
      const Tensor tgt = ids({1, 4, 2, 5, 6, 1, 6, 3, 2, 4}, {2, 5});
      const Tensor logits = model.forward(src, tgt);  // (2,5,7)
      REQUIRE(logits.shape() == Shape{2, 5, 7});
      for (std::int64_t t = 0; t + 1 < 5; ++t) {
        // Replace every token after position t (by (id + 1) mod 6 + 1: always a different non-pad id).
        Tensor changed = tgt.clone();
        for (std::int64_t b = 0; b < 2; ++b)
          for (std::int64_t u = t + 1; u < 5; ++u) changed.set({b, u}, static_cast<double>(
                                                                           (static_cast<std::int64_t>(tgt.at({b, u})) % 6) + 1));
        const Tensor other = model.forward(src, changed);
        INFO("positions after " << t << " changed");
        REQUIRE(max_abs_diff(first_positions(other, t + 1), first_positions(logits, t + 1)) <= kInvarianceTol);
        // ... while the changed positions themselves do change (the test can fail).
        REQUIRE(max_abs_diff(narrow(other, 1, t + 1, 1), narrow(logits, 1, t + 1, 1)) > 1e-3);
      }
    }
  }
}

TEST_CASE("Seq2SeqTransformer padded source positions change nothing", "[model][padding][mask]") {
  for (PositionalKind pos : {PositionalKind::Sinusoidal, PositionalKind::Learned, PositionalKind::RoPE,
                             PositionalKind::ALiBi}) {
    for (NormPosition position : {NormPosition::Pre, NormPosition::Post}) {
      INFO(positional_name(pos) << " " << norm_position_name(position));
      ModelConfig cfg = tiny_config();
      cfg.positional = pos;
      cfg.norm_position = position;
      Generator init(81), gen(82);
      Seq2SeqTransformer model(cfg, init, Dtype::Float64);
      model.eval();
      const Tensor tgt = ids({1, 4, 2}, {1, 3});
      // One sentence alone, then padded with one and three pads: the same logits.
      const Tensor alone = model.forward(ids({3, 5, 2}, {1, 3}), tgt);
      REQUIRE(max_abs_diff(model.forward(ids({3, 5, 2, 0}, {1, 4}), tgt), alone) <= kInvarianceTol);
      REQUIRE(max_abs_diff(model.forward(ids({3, 5, 2, 0, 0, 0}, {1, 6}), tgt), alone) <= kInvarianceTol);
      // Whatever the encoder output holds at the padded positions, the decoder ignores it.
      const Tensor src = padded_source();  // row 2: positions 2 and 3 are pads
      const Tensor tgt2 = ids({1, 4, 2, 1, 6, 3}, {2, 3});
      const Encoded enc = model.encode(src);
      Tensor noise = zeros({2, 4, 8}, Dtype::Float64);
      noise.narrow(0, 1, 1).narrow(1, 2, 2).copy_(mul(randn({1, 2, 8}, gen, Dtype::Float64), 100.0));
      const Encoded noisy{add(enc.memory, noise), enc.src_mask};
      REQUIRE(max_abs_diff(model.decode(tgt2, noisy), model.decode(tgt2, enc)) <= kInvarianceTol);
      // ... while noise at a real position does change the logits (the test can fail).
      Tensor real_noise = zeros({2, 4, 8}, Dtype::Float64);
      real_noise.narrow(0, 1, 1).narrow(1, 1, 1).fill_(1.0);
      const Encoded moved{add(enc.memory, real_noise), enc.src_mask};
      REQUIRE(max_abs_diff(model.decode(tgt2, moved), model.decode(tgt2, enc)) > 1e-3);
    }
  }
}

// ---- the whole model: the KV cache -------------------------------------------------------

TEST_CASE("Seq2SeqTransformer greedy decode_step with the cache equals decode on the prefix",
          "[model][cache][causal]") {
  struct Case {
    PositionalKind pos;
    std::int64_t kv_heads;
  };
  for (const Case& c : {Case{PositionalKind::Sinusoidal, 0}, Case{PositionalKind::Learned, 0},
                        Case{PositionalKind::RoPE, 0}, Case{PositionalKind::ALiBi, 0}, Case{PositionalKind::RoPE, 2},
                        Case{PositionalKind::ALiBi, 1}}) {
    INFO(positional_name(c.pos) << " n_kv_heads " << c.kv_heads);
    ModelConfig cfg = small_config();
    cfg.positional = c.pos;
    cfg.n_kv_heads = c.kv_heads;
    Generator init(91);
    Seq2SeqTransformer model(cfg, init);  // float32
    model.eval();
    NoGradGuard no_grad;
    const Tensor src = ids({3, 5, 2, 6, 9, 4, 1, 10, 0, 0}, {2, 5});
    const Encoded enc = model.encode(src);
    DecoderCache cache = model.new_cache();
    REQUIRE(cache.layers.size() == 2);
    REQUIRE(cache.length() == 0);
    std::vector<std::int64_t> prefix{1, 1};  // BOS = 1 for both rows, (B,t) row-major per step
    Tensor next = ids({1, 1}, {2, 1});
    Tensor first_cross_k;
    const std::int64_t steps = 6;
    for (std::int64_t t = 0; t < steps; ++t) {
      const Tensor step_logits = model.decode_step(next, enc, cache);  // (2,V)
      REQUIRE(step_logits.shape() == Shape{2, 11});
      REQUIRE(cache.length() == t + 1);
      REQUIRE(cache.layers[1].cross.length() == 5);
      if (t == 0) first_cross_k = cache.layers[0].cross.k;
      REQUIRE(cache.layers[0].cross.k.impl() == first_cross_k.impl());  // computed once, reused
      // decode() on the whole prefix (B,t+1): its last position must give the same logits.
      std::vector<std::int64_t> rows;
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t u = 0; u <= t; ++u) rows.push_back(prefix[u * 2 + b]);
      const Tensor full = model.decode(ids(rows, {2, t + 1}), enc);  // (2,t+1,V)
      const Tensor last = reshape(narrow(full, 1, t, 1), {2, 11});
      INFO("step " << t);
      REQUIRE(max_abs_diff(step_logits, last) <= kCacheTol);
      next = greedy_tokens(step_logits);
      prefix.push_back(static_cast<std::int64_t>(next.at({0, 0})));
      prefix.push_back(static_cast<std::int64_t>(next.at({1, 0})));
    }
  }
}

TEST_CASE("DecoderCache reorder equals running the permuted batch", "[model][cache]") {
  for (PositionalKind pos : {PositionalKind::Sinusoidal, PositionalKind::RoPE, PositionalKind::ALiBi}) {
    INFO(positional_name(pos));
    ModelConfig cfg = small_config();
    cfg.positional = pos;
    cfg.n_kv_heads = 2;
    Generator init(101);
    Seq2SeqTransformer model(cfg, init);
    model.eval();
    NoGradGuard no_grad;
    const Tensor src = ids({3, 5, 2, 6, 9, 4, 1, 10, 0, 0, 7, 8, 0, 0, 0}, {3, 5});
    const std::vector<Tensor> steps{ids({1, 1, 1}, {3, 1}), ids({4, 7, 2}, {3, 1}), ids({9, 3, 5}, {3, 1})};
    // Permutation and a beam-search style selection (row 0 kept twice, row 1 dropped).
    for (const std::vector<std::int64_t>& order : {std::vector<std::int64_t>{2, 0, 1}, {0, 2, 0}}) {
      const Tensor perm = ids(order, {3});
      // Two steps on the original batch, reorder, then the third step.
      const Encoded enc = model.encode(src);
      DecoderCache cache = model.new_cache();
      model.decode_step(steps[0], enc, cache);
      model.decode_step(steps[1], enc, cache);
      cache.reorder(perm);
      REQUIRE(cache.length() == 2);
      const Tensor reordered = model.decode_step(index_select(steps[2], 0, perm), select_rows(enc, perm), cache);
      // The permuted batch from the start.
      const Encoded enc_p = model.encode(index_select(src, 0, perm));
      DecoderCache fresh = model.new_cache();
      Tensor want;
      for (const Tensor& s : steps) want = model.decode_step(index_select(s, 0, perm), enc_p, fresh);
      REQUIRE(max_abs_diff(reordered, want) <= kCacheTol);
    }
  }
}

// ---- the Model interface (nn/model.h) ------------------------------------------------------------

TEST_CASE("make_model builds the encoder-decoder of model.arch and parse_arch names the choices", "[model][errors]") {
  ModelConfig cfg = tiny_config();
  Generator init(121);
  const std::unique_ptr<Model> model = make_model(cfg, init);
  REQUIRE(dynamic_cast<Seq2SeqTransformer*>(model.get()) != nullptr);
  CHECK(model->config().arch == Arch::EncoderDecoder);
  CHECK(std::string(arch_name(Arch::EncoderDecoder)) == "encoder-decoder");
  CHECK(parse_arch("encoder-decoder") == Arch::EncoderDecoder);
  CHECK_THROWS_WITH(parse_arch("decoder_only"), Contains("expected encoder-decoder, decoder-only, encoder-only or rnn") && Contains("decoder_only"));
  // the same seed, the same parameters as building the class directly
  Generator again(121);
  Seq2SeqTransformer direct(cfg, again);
  const auto a = model->named_parameters(), b = direct.named_parameters();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(max_abs_diff(a[i].second, b[i].second) == 0.0);
}

TEST_CASE("make_model builds an RnnSeq2Seq for arch rnn, whose config is checked only for what it reads", "[model][errors]") {
  ModelConfig cfg = tiny_config();
  cfg.arch = Arch::Rnn;
  cfg.d_model = 6;   // not divisible by n_heads 4: the Transformer's relation, which an rnn is not asked
  cfg.n_heads = 4;
  cfg.d_ff = 0;      // nor its feed-forward width
  cfg.share_embeddings = true;
  cfg.src_vocab = 9;  // share_embeddings with two vocabularies: ignored too
  CHECK_NOTHROW(cfg.validate());
  Generator init(121);
  const std::unique_ptr<Model> model = make_model(cfg, init);
  REQUIRE(dynamic_cast<RnnSeq2Seq*>(model.get()) != nullptr);
  CHECK(model->config().arch == Arch::Rnn);
  CHECK(std::string(arch_name(Arch::Rnn)) == "rnn");
  CHECK(parse_arch("rnn") == Arch::Rnn);
  CHECK(is_transformer(Arch::EncoderOnly));
  CHECK_FALSE(is_transformer(Arch::Rnn));
  CHECK_THROWS_WITH(require_transformer(Arch::Rnn, "attention"),
                    "attention: needs a Transformer (arch encoder-decoder, decoder-only or encoder-only), got arch rnn");
  CHECK_NOTHROW(require_transformer(Arch::DecoderOnly, "attention"));
  // what it reads is checked: an even width (D/2 units per encoder direction), layers, pad_id
  ModelConfig odd = cfg;
  odd.d_model = 7;
  CHECK_THROWS_WITH(odd.validate(), "ModelConfig: arch rnn needs an even d_model (D/2 units per encoder direction), got 7");
  ModelConfig no_layers = cfg;
  no_layers.decoder_layers = 0;
  CHECK_THROWS_WITH(no_layers.validate(), "ModelConfig: decoder_layers must be positive, got 0");
  ModelConfig pad = cfg;
  pad.pad_id = 7;
  CHECK_THROWS_WITH(pad.validate(), Contains("pad_id 7 is not a token of both vocabularies"));
}

TEST_CASE("generation through the Model interface equals the encoder-decoder's own calls", "[model][cache][decode]") {
  ModelConfig cfg = small_config();
  cfg.n_kv_heads = 2;
  Generator init(131);
  const std::unique_ptr<Model> model = make_model(cfg, init);
  const auto& s2s = dynamic_cast<const Seq2SeqTransformer&>(*model);
  model->eval();
  NoGradGuard no_grad;
  const Tensor src = ids({3, 5, 2, 6, 9, 4, 1, 10, 0, 0}, {2, 5});
  const std::vector<Tensor> steps{ids({1, 1}, {2, 1}), ids({4, 7}, {2, 1}), ids({9, 3}, {2, 1})};
  // prefill + decode steps through the interface, against encode + decode_step with a cache
  const auto state = model->start_decoding(src);
  CHECK(state->length() == 0);
  const Encoded enc = s2s.encode(src);
  DecoderCache cache = s2s.new_cache();
  Tensor last_step;
  for (const Tensor& t : steps) {
    last_step = model->decode_step(t, *state);              // (2,V)
    const Tensor direct = s2s.decode_step(t, enc, cache);  // (2,V)
    CHECK(max_abs_diff(last_step, direct) == 0.0);
  }
  CHECK(state->length() == 3);
  // decode_prefix: the whole prefix without a cache, its last row equal to the last step's
  const Tensor prefix = cat({steps[0], steps[1], steps[2]}, 1);  // (2,3)
  const Tensor all = model->decode_prefix(prefix, *state);      // (2,3,V)
  REQUIRE(all.size(1) == 3);
  CHECK(max_abs_diff(all.narrow(1, 2, 1).squeeze(1), last_step) <= kCacheTol);
  const Tensor want = s2s.decode(prefix, enc);
  CHECK(max_abs_diff(all, want) == 0.0);
  // repeat_rows: row b*K + k decodes as row b
  const auto repeated = model->start_decoding(src);
  repeated->repeat_rows(3);
  const Tensor r = model->decode_step(ids({1, 1, 1, 1, 1, 1}, {6, 1}), *repeated);  // (6,V)
  const auto fresh = model->start_decoding(src);
  const Tensor one = model->decode_step(steps[0], *fresh);  // (2,V)
  for (std::int64_t row = 0; row < 6; ++row)
    CHECK(max_abs_diff(r.narrow(0, row, 1), one.narrow(0, row / 3, 1)) <= kCacheTol);
}

TEST_CASE("reorder_kv moves a cache's rows in place, and copies a cache another tensor shares",
          "[model][cache][beam]") {
  Generator gen(139);
  const std::vector<std::int64_t> order{2, 0, 0, 5, 5, 3, 6};  // swaps, repeats, a row that stays
  const Tensor index = ids(order, {7});
  NoGradGuard no_grad;
  KVCache cache;
  cache.k = randn({7, 2, 3, 4}, gen);  // (B,Hkv,T,Dh)
  cache.v = randn({7, 2, 3, 4}, gen);
  const Tensor want_k = index_select(cache.k, 0, index), want_v = index_select(cache.v, 0, index);
  const TensorImpl* k_before = cache.k.impl();
  reorder_kv(cache, index);
  CHECK(cache.k.impl() == k_before);  // the same tensor: its rows moved in place
  CHECK(cache.k.to_vector<float>() == want_k.to_vector<float>());
  CHECK(cache.v.to_vector<float>() == want_v.to_vector<float>());
  // another tensor (here a view) sees the memory: the rows are copied, the view keeps its values
  const Tensor view = cache.k.narrow(0, 0, 1);
  const auto view_values = view.to_vector<float>();
  const Tensor want_k2 = index_select(cache.k, 0, index);
  reorder_kv(cache, index);
  CHECK(cache.k.impl() != k_before);
  CHECK(cache.k.to_vector<float>() == want_k2.to_vector<float>());
  CHECK(view.to_vector<float>() == view_values);
  // fewer or more rows than the cache holds: a new tensor of B' rows
  reorder_kv(cache, ids({1, 1}, {2}));
  CHECK(cache.k.size(0) == 2);
  CHECK_THROWS_WITH(reorder_kv(cache, ids({0, 2}, {2})), Contains("index value 2"));  // row 2 of 2
}

TEST_CASE("EncoderDecoderState::reorder exchanges the beams of one sentence and leaves the cross cache alone",
          "[model][cache][decode][beam]") {
  ModelConfig cfg = small_config();
  Generator init(137);
  const std::unique_ptr<Model> model = make_model(cfg, init);
  model->eval();
  NoGradGuard no_grad;
  const Tensor src = ids({3, 5, 2, 6, 9, 4, 1, 10, 0, 0}, {2, 5});
  // Two sentences, 3 beams each: rows 0-2 read sentence 0, rows 3-5 sentence 1. Each beam has
  // its own history: BOS, then a token of its own.
  const Tensor bos = ids({1, 1, 1, 1, 1, 1}, {6, 1});
  const std::vector<std::int64_t> second{4, 7, 2, 9, 3, 5};
  const std::vector<std::int64_t> order{2, 0, 0, 5, 5, 3};  // within each sentence, rows repeat
  const auto state = model->start_decoding(src);
  state->repeat_rows(3);
  auto& s = dynamic_cast<EncoderDecoderState&>(*state);
  CHECK(s.row_source == std::vector<std::int64_t>{0, 0, 0, 1, 1, 1});
  model->decode_step(bos, *state);
  model->decode_step(ids(second, {6, 1}), *state);
  const auto cross_k = s.cache.layers[0].cross.k.impl();
  state->reorder(ids(order, {6}));
  CHECK(s.cache.layers[0].cross.k.impl() == cross_k);  // not copied: every beam's is the same
  CHECK(state->length() == 2);
  const Tensor third = ids({8, 6, 4, 2, 3, 7}, {6, 1});
  const Tensor got = model->decode_step(third, *state);  // (6,V)
  // The same histories decoded from the start, each row the beam it took the cache of.
  std::vector<std::int64_t> second_taken;
  for (std::int64_t from : order) second_taken.push_back(second[from]);
  const auto fresh = model->start_decoding(src);
  fresh->repeat_rows(3);
  model->decode_step(bos, *fresh);
  model->decode_step(ids(second_taken, {6, 1}), *fresh);
  const Tensor want = model->decode_step(third, *fresh);
  CHECK(max_abs_diff(got, want) <= kCacheTol);  // a row's place in the batch may change the summation blocks
  // A row may not take the cache of another sentence's row: its cross-attention reads that source.
  CHECK_THROWS_WITH(state->reorder(ids({0, 1, 2, 0, 4, 5}, {6})),
                    Contains("row 3 reads source sentence 1") && Contains("row 0, which reads sentence 0") &&
                        Contains("only the rows of one sentence"));
  CHECK_THROWS_WITH(state->reorder(ids({0, 1, 2}, {3})), Contains("expected 6 batch indices") && Contains("got 3"));
  CHECK_THROWS_WITH(state->reorder(ids({0, 1, 2, 3, 4, 6}, {6})), Contains("row 5 would take row 6"));
  CHECK_THROWS_WITH(state->repeat_rows(0), Contains("times >= 1"));
}

// ---- parameters ------------------------------------------------------------------------------

TEST_CASE("Seq2SeqTransformer parameter names follow the module tree", "[model][params]") {
  ModelConfig cfg = tiny_config();
  Generator init(111);
  {
    Seq2SeqTransformer model(cfg, init);
    for (const char* name : {"src_embed.weight", "tgt_embed.weight", "encoder.layers.0.self_attn.q_proj.weight",
                             "encoder.layers.0.self_attn.out_proj.bias", "encoder.layers.0.ffn.fc1.weight",
                             "encoder.layers.0.norm1.weight", "encoder.layers.0.norm1.bias",
                             "encoder.layers.0.norm2.weight", "encoder.norm.weight",
                             "decoder.layers.0.self_attn.v_proj.weight", "decoder.layers.0.cross_attn.k_proj.weight",
                             "decoder.layers.0.norm3.bias", "decoder.norm.weight", "decoder.norm.bias",
                             "output_proj.weight"}) {
      INFO(name);
      REQUIRE(has_parameter(model, name));
    }
    REQUIRE_FALSE(has_parameter(model, "output_proj.bias"));  // the output projection has no bias
    REQUIRE_FALSE(has_parameter(model, "src_pos.weight"));    // sinusoidal: a constant table
    // The summary lists the tree with parameter counts.
    const std::string summary = model.summary();
    REQUIRE_THAT(summary, Contains("model (Seq2SeqTransformer): " + std::to_string(model.parameter_count())));
    REQUIRE_THAT(summary, Contains("encoder (Encoder): ") && Contains("cross_attn (MultiHeadAttention): 288"));
    // Every name is unique, and no parameter is listed twice.
    std::set<std::string> names;
    for (const auto& [n, _] : model.named_parameters()) names.insert(n);
    REQUIRE(names.size() == model.named_parameters().size());
  }
  SECTION("shared and tied embeddings") {
    cfg.share_embeddings = true;
    cfg.tie_output = true;
    Seq2SeqTransformer model(cfg, init);
    REQUIRE(model.tgt_embed->weight.impl() == model.src_embed->weight.impl());
    REQUIRE(has_parameter(model, "src_embed.weight"));
    REQUIRE_FALSE(has_parameter(model, "tgt_embed.weight"));  // the same tensor, listed once
    REQUIRE_FALSE(has_parameter(model, "output_proj.weight"));
    REQUIRE(model.output_proj == nullptr);
  }
  SECTION("post-norm rmsnorm learned positions") {
    cfg.norm_position = NormPosition::Post;
    cfg.norm = NormKind::RMSNorm;
    cfg.positional = PositionalKind::Learned;
    Seq2SeqTransformer model(cfg, init);
    REQUIRE(has_parameter(model, "src_pos.weight"));
    REQUIRE(has_parameter(model, "tgt_pos.weight"));
    REQUIRE(has_parameter(model, "encoder.layers.0.norm1.weight"));
    REQUIRE_FALSE(has_parameter(model, "encoder.layers.0.norm1.bias"));  // RMSNorm has no bias
    REQUIRE_FALSE(has_parameter(model, "encoder.norm.weight"));          // post-norm: no final norm
    REQUIRE_FALSE(has_parameter(model, "decoder.norm.weight"));
  }
}

TEST_CASE("Seq2SeqTransformer tied output uses the target embedding as the output matrix", "[model][params]") {
  ModelConfig cfg = tiny_config();
  cfg.tie_output = true;
  Generator init(115);
  Seq2SeqTransformer model(cfg, init, Dtype::Float64);
  model.eval();
  const Tensor src = padded_source(), tgt = ids({1, 4, 2, 1, 6, 3}, {2, 3});
  const Encoded enc = model.encode(src);
  // The decoder's output h, through the model's own pieces, times E_tgt^T.
  const Tensor y = mul(model.tgt_embed->forward(tgt), std::sqrt(8.0));
  const Tensor pe = SinusoidalPositional(8, 8, Dtype::Float64).table().narrow(0, 0, 3);
  const Tensor h = model.decoder->forward(add(y, pe), enc.memory, causal_mask(3, 3), enc.src_mask);
  const Tensor want = matmul(h, transpose(model.tgt_embed->weight, 0, 1));
  REQUIRE(max_abs_diff(model.decode(tgt, enc), want) <= kSameMathTol);
}

TEST_CASE("Seq2SeqTransformer parameter count matches the formula", "[model][params]") {
  // The tiny model by hand: attention 4*64 + 4*8 = 288, FFN 2*8*16 + 16 + 8 = 280,
  // LayerNorm 16; encoder layer 288 + 280 + 32 = 600, decoder layer 576 + 280 + 48 = 904,
  // final norms 32, embeddings 2 * 7*8 = 112, output 56: 1704.
  {
    Generator init(121);
    REQUIRE(Seq2SeqTransformer(tiny_config(), init).parameter_count() == 1704);
    REQUIRE(formula_parameter_count(tiny_config()) == 1704);
  }
  // Every option value, in 12 models: all norm position x norm x k/v head combinations, with
  // the positional kind, activation and embedding option cycling alongside.
  ModelConfig base = small_config();
  base.src_vocab = 13;  // different vocabularies: the two tables differ in size
  base.tgt_vocab = 11;
  base.encoder_layers = 2;
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
        const int embeddings = (i / 3) % 3;  // 0 separate, 1 tied output, 2 shared and tied
        c.tie_output = embeddings >= 1;
        c.share_embeddings = embeddings == 2;
        if (c.share_embeddings) c.src_vocab = c.tgt_vocab;
        ++i;
        INFO(norm_position_name(position) << " " << norm_name(norm) << " n_kv_heads " << kv << " "
                                          << positional_name(c.positional) << " " << activation_name(c.activation)
                                          << " embeddings option " << embeddings);
        Generator init(122);
        REQUIRE(Seq2SeqTransformer(c, init).parameter_count() == formula_parameter_count(c));
      }
}

// ---- dropout and generators ----------------------------------------------------------------

TEST_CASE("Seq2SeqTransformer dropout differs run to run in train mode and not in eval mode", "[model][dropout]") {
  ModelConfig cfg = tiny_config();
  cfg.dropout = 0.1;
  cfg.attention_dropout = 0.1;
  Generator init(131);
  Seq2SeqTransformer model(cfg, init);
  const Tensor src = padded_source(), tgt = ids({1, 4, 2, 1, 6, 3}, {2, 3});
  NoGradGuard no_grad;
  model.train();
  REQUIRE(model.is_training());
  REQUIRE(max_abs_diff(model.forward(src, tgt), model.forward(src, tgt)) > 1e-4);
  model.eval();
  REQUIRE(max_abs_diff(model.forward(src, tgt), model.forward(src, tgt)) == 0.0);
  // Reproducible: the same init seed gives the same parameters and the same dropout masks.
  Generator a(132), b(132);
  Seq2SeqTransformer m1(cfg, a), m2(cfg, b);
  REQUIRE(max_abs_diff(m1.forward(src, tgt), m2.forward(src, tgt)) == 0.0);
  REQUIRE(m1.dropout_generator().state() == m2.dropout_generator().state());
}

// ---- input errors ----------------------------------------------------------------------------

TEST_CASE("Seq2SeqTransformer rejects malformed inputs with clear messages", "[model][errors]") {
  Generator init(141);
  ModelConfig cfg = tiny_config();
  Seq2SeqTransformer model(cfg, init);
  model.eval();
  const Tensor src = padded_source(), tgt = ids({1, 4, 2, 1, 6, 3}, {2, 3});
  REQUIRE_THROWS_WITH(model.forward(zeros({2, 4}), tgt), Contains("source") && Contains("int64") &&
                                                             Contains("float32"));
  REQUIRE_THROWS_WITH(model.forward(src, ids({1, 2, 3}, {3})), Contains("target") && Contains("(3,)"));
  REQUIRE_THROWS_WITH(model.forward(src, ids({1, 2, 3}, {1, 3})), Contains("target batch 1") && Contains("(2, 4, 8)"));
  REQUIRE_THROWS(model.forward(ids({3, 9, 2, 6, 4, 1, 0, 0}, {2, 4}), tgt));  // token 9 >= vocabulary 7
  REQUIRE_THROWS_WITH(model.forward(ids(std::vector<std::int64_t>(9, 2), {1, 9}), ids({1}, {1, 1})),
                      Contains("max_len 8"));
  const Encoded enc = model.encode(src);
  DecoderCache cache = model.new_cache();
  REQUIRE_THROWS_WITH(model.decode_step(ids({1, 1, 1, 1}, {2, 2}), enc, cache), Contains("(B,1)") &&
                                                                                    Contains("(2, 2)"));
  REQUIRE_THROWS_WITH(model.decode_step(ids({1, 1, 1}, {3, 1}), enc, cache), Contains("token batch 3"));
  REQUIRE_THROWS_WITH(cache.reorder(ids({0, 1}, {1, 2})), Contains("reorder") && Contains("(1, 2)"));
}
