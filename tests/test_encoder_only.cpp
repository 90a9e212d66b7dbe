// The encoder-only Transformer (nn/encoder_only.h):
//   it sees both ways (a later token changes the masked-LM logits at every earlier position, for
//     each positional kind) and padding changes nothing (appending pads, or batching with a
//     longer row, leaves the non-padding positions, the mean-pooled vector and the class logits
//     as they were); the model is the encoder-decoder's pieces (embedding * sqrt(D) + positions,
//     the Encoder with a padding mask, the head h E^T); mean pooling against a hand average of
//     the non-padding rows, a row of only padding an error, Cls pooling h[:, 0, :];
//   float64 gradient checks of the loss w.r.t. every parameter (masked-LM head: pre-norm
//     LayerNorm sinusoidal, post-norm RMSNorm RoPE GQA; classifier: mean and cls pooling), and
//     the mutation control: a mean pooling whose backward averages over the padding too is caught;
//   parameter names and counts against the formula, the summary; the errors: wrong arch,
//     negative num_classes, ids outside the vocabulary, a sequence longer than max_len, and
//     generation, which an encoder-only model does not do.
//
// Everything is tiny (D 8, H 2, d_ff 16, one layer, vocabulary 7, lengths 3-5, float64,
// dropout 0, eval mode) to stay fast under AddressSanitizer.
//
// Letters: B batch, S sequence length, D d_model, H heads, Hkv key/value heads, F d_ff,
// V vocabulary, C classes.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "nn/attention.h"
#include "nn/encoder_only.h"
#include "nn/positional.h"
#include "nn/seq2seq.h"
#include "test_util.h"

using namespace sf;
using namespace sf::nn;
using Catch::Contains;
using Catch::Equals;
using sf::test::grad_input;
using sf::test::ids;
using sf::test::max_abs_diff;
using sf::test::require_gradcheck;

namespace {

// float64 runs that differ only in what the math says cannot matter (padding appended, a batch
// padded to a longer row): padded keys get weight exactly 0, so what is left is rounding from
// other summation orders, ~1e-16 per op on O(1) values; 1e-12 has room for that and still
// catches a leak (which moves outputs by ~1e-2 and more).
constexpr double kInvarianceTol = 1e-12;
// The same float64 math computed twice, by the model and by hand from its own pieces (sums of
// at most 4 terms in another order): ~1e-16 rounding, 1e-14 allows for nothing else.
constexpr double kSameMathTol = 1e-14;
// A position that depends on a changed token moves by ~1e-2 or more in these tiny models;
// rounding alone moves it by ~1e-16. 1e-6 lies far from both.
constexpr double kDependsAtLeast = 1e-6;

const std::vector<PositionalKind> kPositionalKinds{PositionalKind::Sinusoidal, PositionalKind::Learned,
                                                   PositionalKind::RoPE, PositionalKind::ALiBi};

// The tiny encoder-only model: D 8, H 2 (Dh 4), d_ff 16, one layer, vocabulary 7 (pad 0),
// no dropout. tgt_vocab and decoder_layers are unused but ModelConfig::validate wants them set.
ModelConfig tiny_config(std::int64_t num_classes = 0, Pooling pooling = Pooling::Mean) {
  ModelConfig c;
  c.arch = Arch::EncoderOnly;
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
  c.num_classes = num_classes;
  c.pooling = pooling;
  return c;
}

// The batch of most tests: (2,4), the second row ends with two pads (pad_id 0).
Tensor padded_source() { return ids({3, 5, 2, 6, 4, 1, 0, 0}, {2, 4}); }

bool has_parameter(const Module& m, const std::string& name) {
  for (const auto& [n, _] : m.named_parameters())
    if (n == name) return true;
  return false;
}

// The masked-LM loss: logits (B,S,V) vs targets (B,S) -> the mean cross-entropy over the
// positions whose target is not 0 (the masked positions; 0 = not predicted).
Tensor mlm_loss(const Tensor& logits, const Tensor& targets) {
  const std::int64_t n = logits.size(0) * logits.size(1);
  return cross_entropy(reshape(logits, {n, logits.size(2)}), reshape(targets, {n}), 0);
}

// The targets of the masked-LM checks for padded_source(): positions 1 and 3 of row 1 and
// position 0 of row 2 are predicted; the rest (and the padding) are 0, not scored.
Tensor mlm_targets() { return ids({0, 4, 0, 1, 6, 0, 0, 0}, {2, 4}); }
// The labels of the classifier checks (C = 3), one per row of padded_source().
Tensor class_labels() { return ids({2, 0}, {2}); }

// The loss the model's head is trained with on padded_source().
Tensor loss_of(const EncoderOnlyTransformer& model) {
  const Tensor logits = model.forward(padded_source(), Tensor());
  if (model.config().num_classes > 0) return cross_entropy(logits, class_labels());
  return mlm_loss(logits, mlm_targets());
}

// Gradient check of the loss of a whole float64 model w.r.t. every parameter. As in
// test_seq2seq.cpp, in gradcheck's fast mode (per parameter tensor, 4 random directions: a
// wrong element changes sum(analytic * u) for almost every u); set
// SCRATCHFORMER_ELEMENTWISE_GRADCHECK=1 to check every element (~1400 forward passes).
void require_model_gradcheck(const ModelConfig& cfg, std::uint64_t seed) {
  Generator init(seed);
  EncoderOnlyTransformer model(cfg, init, Dtype::Float64);
  model.eval();
  GradcheckOptions fast;
  fast.fast_mode = std::getenv("SCRATCHFORMER_ELEMENTWISE_GRADCHECK") == nullptr;
  require_gradcheck([&](const std::vector<Tensor>&) { return loss_of(model); }, model.parameters(), fast);
  // Every parameter is reached by the backward pass.
  model.zero_grad();
  loss_of(model).backward();
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
  }
}

// The parameter count from the lecture's formula, written independently of the modules:
//   attention  q, out: D*D + D each; k, v: D*(Hkv*Dh) + Hkv*Dh each
//   FFN        fc1 D*F + F, fc2 F*D + D; SwiGLU adds gate D*F + F
//   norm       2 D (LayerNorm) or D (RMSNorm); an encoder layer has 2, pre-norm adds a final one
//   embedding  V*D (also the masked-LM head: tied, no output matrix)
//   positions  max_len*D (learned only); classifier D*C + C (num_classes C > 0)
std::int64_t formula_parameter_count(const ModelConfig& c) {
  const std::int64_t D = c.d_model, F = c.d_ff, kv = c.kv_heads() * (D / c.n_heads);
  const std::int64_t attention = 2 * (D * D + D) + 2 * (D * kv + kv);
  std::int64_t ffn = 2 * D * F + F + D;
  if (c.activation == Activation::SwiGLU) ffn += D * F + F;
  const std::int64_t norm = c.norm == NormKind::LayerNorm ? 2 * D : D;
  const std::int64_t layer = attention + ffn + 2 * norm;
  const std::int64_t final_norm = c.norm_position == NormPosition::Pre ? norm : 0;
  const std::int64_t positions = c.positional == PositionalKind::Learned ? c.max_len * D : 0;
  const std::int64_t classifier = c.num_classes > 0 ? D * c.num_classes + c.num_classes : 0;
  return c.encoder_layers * layer + final_norm + c.src_vocab * D + positions + classifier;
}

// ---- the mutation control ---------------------------------------------------------------------

// Mean pooling with a WRONG backward, on purpose: the forward is the correct average over the
// non-padding positions, but the backward spreads dL/dpooled evenly over all S positions
// (grad_output / S), padding included: the backward of a mean over the padded length. The
// gradient checks above must reject it, or their passing would prove nothing.
struct BadMeanPool final : Node {
  std::int64_t S = 0;
  const char* name() const override { return "BadMeanPool"; }
  // h: (B,S,D), keep: (B,S) 1 = token -> (B,D)
  static Tensor forward(const Tensor& h, const Tensor& keep) {
    Tensor out;
    {
      NoGradGuard g;
      out = div(sum(mul(h, unsqueeze(keep, 2)), {1}), sum(keep, {1}, true));  // correct
    }
    if (any_requires_grad({&h})) {
      auto node = std::make_shared<BadMeanPool>();
      node->S = h.size(1);
      connect(node, {&h}, out);
    }
    return out;
  }
  // grad_output: (B,D) -> (B,S,D)
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const std::int64_t B = grad_output.size(0), D = grad_output.size(1);
    // WRONG on purpose: should be keep[b,s] * grad_output[b] / count[b]
    return {contiguous(expand(unsqueeze(div(grad_output, static_cast<double>(S)), 1), {B, S, D}))};
  }
};

// src (B,S) -> (B,S) float of h's dtype, 1 where src is not padding.
Tensor keep_of(const Tensor& src, std::int64_t pad_id, Dtype dtype) {
  return to_dtype(ne(src, static_cast<double>(pad_id)), dtype);
}

}  // namespace

// ---- what it sees --------------------------------------------------------------------------------

TEST_CASE("EncoderOnlyTransformer sees both ways: a later token changes earlier positions",
          "[model][encoder][positional]") {
  for (PositionalKind pos : kPositionalKinds) {
    for (NormPosition position : {NormPosition::Pre, NormPosition::Post}) {
      INFO(positional_name(pos) << " " << norm_position_name(position));
      ModelConfig cfg = tiny_config();
      cfg.positional = pos;
      cfg.norm_position = position;
      Generator init(11);
      EncoderOnlyTransformer model(cfg, init, Dtype::Float64);
      model.eval();
      const Tensor src = ids({3, 5, 2, 6, 4}, {1, 5});
      const Tensor logits = model.forward(src, Tensor());  // (1,5,V)
      REQUIRE(logits.shape() == Shape{1, 5, 7});
      Tensor changed = src.clone();
      changed.set({0, 4}, 1.0);  // the LAST token, 4 -> 1
      const Tensor other = model.forward(changed, Tensor());
      for (std::int64_t s = 0; s < 4; ++s) {
        INFO("position " << s);
        REQUIRE(max_abs_diff(narrow(other, 1, s, 1), narrow(logits, 1, s, 1)) > kDependsAtLeast);
      }
    }
  }
}

TEST_CASE("EncoderOnlyTransformer padding changes no non-padding output, pooled vector or class",
          "[model][padding][mask]") {
  const Tensor alone = ids({3, 5, 2}, {1, 3});
  const Tensor appended = ids({3, 5, 2, 0, 0}, {1, 5});                 // two pads appended
  const Tensor batched = ids({3, 5, 2, 0, 0, 0, 4, 1, 6, 2, 5, 3}, {2, 6});  // padded to a longer row
  for (PositionalKind pos : kPositionalKinds) {
    for (NormPosition position : {NormPosition::Pre, NormPosition::Post}) {
      INFO(positional_name(pos) << " " << norm_position_name(position));
      ModelConfig cfg = tiny_config();
      cfg.positional = pos;
      cfg.norm_position = position;
      Generator init(21);
      EncoderOnlyTransformer mlm(cfg, init, Dtype::Float64);
      mlm.eval();
      const Tensor want = mlm.forward(alone, Tensor());  // (1,3,V)
      REQUIRE(max_abs_diff(narrow(mlm.forward(appended, Tensor()), 1, 0, 3), want) <= kInvarianceTol);
      REQUIRE(max_abs_diff(narrow(narrow(mlm.forward(batched, Tensor()), 0, 0, 1), 1, 0, 3), want) <=
              kInvarianceTol);
      for (Pooling pooling : {Pooling::Mean, Pooling::Cls}) {
        INFO((pooling == Pooling::Mean ? "mean" : "cls") << " pooling");
        ModelConfig c = cfg;
        c.num_classes = 3;
        c.pooling = pooling;
        Generator init2(22);
        EncoderOnlyTransformer classifier(c, init2, Dtype::Float64);
        classifier.eval();
        const Tensor pooled = classifier.pool(classifier.encode(alone), alone);  // (1,D)
        REQUIRE(max_abs_diff(classifier.pool(classifier.encode(appended), appended), pooled) <= kInvarianceTol);
        const Tensor classes = classifier.forward(alone, Tensor());  // (1,C)
        REQUIRE(classes.shape() == Shape{1, 3});
        REQUIRE(max_abs_diff(classifier.forward(appended, Tensor()), classes) <= kInvarianceTol);
        REQUIRE(max_abs_diff(narrow(classifier.forward(batched, Tensor()), 0, 0, 1), classes) <= kInvarianceTol);
      }
    }
  }
}

TEST_CASE("EncoderOnlyTransformer is the encoder-decoder's embedding, Encoder and tied head", "[model][encoder]") {
  for (PositionalKind pos : {PositionalKind::Sinusoidal, PositionalKind::Learned}) {
    INFO(positional_name(pos));
    ModelConfig cfg = tiny_config();
    cfg.positional = pos;
    Generator init(31);
    EncoderOnlyTransformer model(cfg, init, Dtype::Float64);
    model.eval();
    const Tensor src = padded_source();
    // E[ids] * sqrt(D) + PE[0..S-1], through the Encoder with the padding mask, times E^T.
    const Tensor x = mul(model.embed->forward(src), std::sqrt(8.0));  // (B,S,D)
    const Tensor pe = pos == PositionalKind::Learned
                          ? dynamic_cast<const LearnedPositional&>(*model.pos).weight.narrow(0, 0, 4)
                          : SinusoidalPositional(8, 8, Dtype::Float64).table().narrow(0, 0, 4);  // (S,D)
    const Tensor h = model.encoder->forward(add(x, pe), padding_mask(src, 0));                   // (B,S,D)
    REQUIRE(max_abs_diff(model.encode(src), h) <= kSameMathTol);
    const Tensor want = matmul(h, transpose(model.embed->weight, 0, 1));  // (B,S,V)
    REQUIRE(max_abs_diff(model.forward(src, Tensor()), want) <= kSameMathTol);
  }
}

// ---- pooling -------------------------------------------------------------------------------------

TEST_CASE("EncoderOnlyTransformer mean pooling averages the non-padding rows of h", "[model][padding]") {
  Generator init(41);
  EncoderOnlyTransformer model(tiny_config(3, Pooling::Mean), init, Dtype::Float64);
  model.eval();
  const Tensor src = padded_source();  // row 0: 4 tokens, row 1: 2 tokens and 2 pads
  const Tensor h = model.encode(src);   // (2,4,8)
  const Tensor pooled = model.pool(h, src);  // (2,8)
  REQUIRE(pooled.shape() == Shape{2, 8});
  const std::int64_t tokens[] = {4, 2};
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t d = 0; d < 8; ++d) {
      double total = 0;
      for (std::int64_t s = 0; s < tokens[b]; ++s) total += h.at({b, s, d});
      INFO("row " << b << ", dim " << d);
      REQUIRE(std::abs(pooled.at({b, d}) - total / static_cast<double>(tokens[b])) <= kSameMathTol);
    }
  // The classifier reads the pooled vector.
  REQUIRE(max_abs_diff(model.forward(src, Tensor()), model.classifier->forward(pooled)) <= kSameMathTol);
}

TEST_CASE("EncoderOnlyTransformer mean pooling of a row of only padding is an error", "[model][padding][errors]") {
  Generator init(43);
  EncoderOnlyTransformer model(tiny_config(3, Pooling::Mean), init, Dtype::Float64);
  model.eval();
  const Tensor src = ids({3, 5, 2, 0, 0, 0}, {2, 3});  // row 1 is all padding
  REQUIRE_THROWS_AS(model.forward(src, Tensor()), std::invalid_argument);
  REQUIRE_THROWS_WITH(model.forward(src, Tensor()),
                      Contains("EncoderOnlyTransformer::pool: row 1 is all padding") && Contains("pad_id 0"));
  // Cls pooling reads position 0 whatever stands there, and h and ids must agree in shape.
  Generator init2(44);
  EncoderOnlyTransformer cls(tiny_config(3, Pooling::Cls), init2, Dtype::Float64);
  REQUIRE_NOTHROW(cls.forward(src, Tensor()));
  REQUIRE_THROWS_WITH(cls.pool(cls.encode(src), ids({3, 5}, {2, 1})),
                      Contains("EncoderOnlyTransformer::pool") && Contains("(2, 3, 8)") && Contains("(2, 1)"));
}

TEST_CASE("EncoderOnlyTransformer cls pooling is h at position 0", "[model]") {
  Generator init(45);
  EncoderOnlyTransformer model(tiny_config(3, Pooling::Cls), init, Dtype::Float64);
  model.eval();
  const Tensor src = padded_source();
  const Tensor h = model.encode(src);        // (2,4,8)
  const Tensor pooled = model.pool(h, src);  // (2,8)
  REQUIRE(pooled.shape() == Shape{2, 8});
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t d = 0; d < 8; ++d) REQUIRE(pooled.at({b, d}) == h.at({b, 0, d}));
  REQUIRE(max_abs_diff(model.forward(src, Tensor()), model.classifier->forward(pooled)) <= kSameMathTol);
}

// ---- gradients -----------------------------------------------------------------------------------

TEST_CASE("EncoderOnlyTransformer masked-LM gradcheck pre-norm layernorm sinusoidal", "[model][grad]") {
  require_model_gradcheck(tiny_config(), 51);
}

TEST_CASE("EncoderOnlyTransformer masked-LM gradcheck post-norm rmsnorm rope gqa", "[model][grad][gqa][rope]") {
  ModelConfig cfg = tiny_config();
  cfg.norm_position = NormPosition::Post;
  cfg.norm = NormKind::RMSNorm;
  cfg.positional = PositionalKind::RoPE;
  cfg.n_heads = 4;  // Dh 2
  cfg.n_kv_heads = 2;
  require_model_gradcheck(cfg, 52);
}

TEST_CASE("EncoderOnlyTransformer classifier gradcheck with mean pooling", "[model][grad][padding]") {
  require_model_gradcheck(tiny_config(3, Pooling::Mean), 53);
}

TEST_CASE("EncoderOnlyTransformer classifier gradcheck with cls pooling", "[model][grad]") {
  ModelConfig cfg = tiny_config(3, Pooling::Cls);
  cfg.positional = PositionalKind::Learned;
  require_model_gradcheck(cfg, 54);
}

TEST_CASE("gradcheck catches a mean pooling whose backward averages over the padding",
          "[model][grad][mutation][padding]") {
  Generator init(55), gen(56);
  EncoderOnlyTransformer model(tiny_config(3, Pooling::Mean), init, Dtype::Float64);
  model.eval();
  const Tensor src = padded_source();  // row 1 has two pads: there the wrong backward differs
  const Tensor keep = keep_of(src, 0, Dtype::Float64);
  // The op alone, every element of h: the wrong backward fails, the model's pool passes.
  Tensor h = grad_input({2, 4, 8}, gen);
  const GradcheckResult bad = gradcheck([&](const std::vector<Tensor>& in) { return BadMeanPool::forward(in[0], keep); },
                                        {h});
  INFO(bad.message);
  REQUIRE_FALSE(bad.ok);
  REQUIRE_THAT(bad.message, Contains("input 0") && Contains("numeric") && Contains("analytic"));
  require_gradcheck([&](const std::vector<Tensor>& in) { return model.pool(in[0], src); }, {h});
  // The whole classifier in fast mode, as the model checks above run: caught too.
  GradcheckOptions fast;
  fast.fast_mode = true;
  const GradcheckResult whole = gradcheck(
      [&](const std::vector<Tensor>&) {
        const Tensor logits = model.classifier->forward(BadMeanPool::forward(model.encode(src), keep));  // (B,C)
        return cross_entropy(logits, class_labels());
      },
      model.parameters(), fast);
  REQUIRE_FALSE(whole.ok);
}

// ---- parameters and summary --------------------------------------------------------------------

TEST_CASE("EncoderOnlyTransformer parameter names follow the module tree", "[model][params]") {
  SECTION("masked-LM head") {
    Generator init(61);
    EncoderOnlyTransformer model(tiny_config(), init);
    for (const char* name : {"embed.weight", "encoder.layers.0.self_attn.q_proj.weight",
                             "encoder.layers.0.self_attn.k_proj.weight", "encoder.layers.0.self_attn.v_proj.weight",
                             "encoder.layers.0.self_attn.out_proj.bias", "encoder.layers.0.ffn.fc1.weight",
                             "encoder.layers.0.ffn.fc2.bias", "encoder.layers.0.norm1.weight",
                             "encoder.layers.0.norm2.bias", "encoder.norm.weight", "encoder.norm.bias"}) {
      INFO(name);
      REQUIRE(has_parameter(model, name));
    }
    REQUIRE(model.classifier == nullptr);
    REQUIRE(model.pos != nullptr);  // sinusoidal: a module without parameters
    for (const auto& [n, _] : model.named_parameters()) {
      INFO(n);
      REQUIRE((n == "embed.weight" || n.rfind("encoder.", 0) == 0));  // no classifier, decoder or pos table
    }
    std::set<std::string> names;
    for (const auto& [n, _] : model.named_parameters()) names.insert(n);
    REQUIRE(names.size() == model.named_parameters().size());
  }
  SECTION("classifier, learned positions, post-norm rmsnorm") {
    ModelConfig cfg = tiny_config(3);
    cfg.positional = PositionalKind::Learned;
    cfg.norm_position = NormPosition::Post;
    cfg.norm = NormKind::RMSNorm;
    Generator init(62);
    EncoderOnlyTransformer model(cfg, init);
    REQUIRE(has_parameter(model, "classifier.weight"));
    REQUIRE(has_parameter(model, "classifier.bias"));
    REQUIRE(model.classifier->weight.shape() == Shape{3, 8});
    REQUIRE(has_parameter(model, "pos.weight"));
    REQUIRE_FALSE(has_parameter(model, "encoder.layers.0.norm1.bias"));  // RMSNorm has no bias
    REQUIRE_FALSE(has_parameter(model, "encoder.norm.weight"));          // post-norm: no final norm
  }
  SECTION("rope: no position module") {
    ModelConfig cfg = tiny_config();
    cfg.positional = PositionalKind::RoPE;
    Generator init(63);
    REQUIRE(EncoderOnlyTransformer(cfg, init).pos == nullptr);
  }
}

TEST_CASE("EncoderOnlyTransformer parameter count matches the formula", "[model][params]") {
  // The tiny model by hand: attention 4*64 + 4*8 = 288, FFN 2*8*16 + 16 + 8 = 280, LayerNorm
  // 16; one layer 288 + 280 + 32 = 600, final norm 16, embedding 7*8 = 56: 672. The classifier
  // of 3 classes adds 8*3 + 3 = 27: 699.
  {
    Generator init(71);
    EncoderOnlyTransformer mlm(tiny_config(), init);
    REQUIRE(mlm.parameter_count() == 672);
    REQUIRE(formula_parameter_count(tiny_config()) == 672);
    EncoderOnlyTransformer classes(tiny_config(3), init);
    REQUIRE(classes.parameter_count() == 699);
    REQUIRE(formula_parameter_count(tiny_config(3)) == 699);
    // The summary prints the tree as the encoder-decoder's does.
    const std::string summary = classes.summary();
    REQUIRE_THAT(summary, Contains("model (EncoderOnlyTransformer): 699 parameters\n") &&
                              Contains("\n  embed (Embedding): 56 parameters\n") &&
                              Contains("\n  encoder (Encoder): 616 parameters\n") &&
                              Contains("\n        self_attn (MultiHeadAttention): 288 parameters\n") &&
                              Contains("\n  classifier (Linear): 27 parameters\n"));
  }
  // Every norm position x norm x k/v heads, the positional kind, activation and head cycling.
  const PositionalKind kinds[] = {PositionalKind::Sinusoidal, PositionalKind::Learned, PositionalKind::RoPE,
                                  PositionalKind::ALiBi};
  const Activation activations[] = {Activation::ReLU, Activation::GELU, Activation::SwiGLU};
  int i = 0;
  for (NormPosition position : {NormPosition::Pre, NormPosition::Post})
    for (NormKind norm : {NormKind::LayerNorm, NormKind::RMSNorm})
      for (std::int64_t kv : {0, 2, 1}) {
        ModelConfig c = tiny_config(i % 2 == 0 ? 0 : 5);
        c.src_vocab = 13;
        c.tgt_vocab = 13;
        c.d_model = 16;
        c.n_heads = 4;
        c.d_ff = 32;
        c.encoder_layers = 2;
        c.max_len = 20;
        c.norm_position = position;
        c.norm = norm;
        c.n_kv_heads = kv;
        c.positional = kinds[i % 4];
        c.activation = activations[i % 3];
        ++i;
        INFO(norm_position_name(position) << " " << norm_name(norm) << " n_kv_heads " << kv << " "
                                          << positional_name(c.positional) << " " << activation_name(c.activation)
                                          << " num_classes " << c.num_classes);
        Generator init(72);
        REQUIRE(EncoderOnlyTransformer(c, init).parameter_count() == formula_parameter_count(c));
      }
}

// ---- errors --------------------------------------------------------------------------------------

TEST_CASE("EncoderOnlyTransformer rejects bad configs and inputs with one-line messages", "[model][errors]") {
  SECTION("the architecture must be encoder-only") {
    ModelConfig cfg = tiny_config();
    cfg.arch = Arch::EncoderDecoder;
    Generator init(81);
    REQUIRE_THROWS_AS(EncoderOnlyTransformer(cfg, init), std::invalid_argument);
    REQUIRE_THROWS_WITH(EncoderOnlyTransformer(cfg, init),
                        Equals("EncoderOnlyTransformer: expected model.arch encoder-only, got encoder-decoder"));
  }
  SECTION("num_classes must be >= 0") {
    ModelConfig cfg = tiny_config(-2);
    Generator init(82);
    REQUIRE_THROWS_WITH(EncoderOnlyTransformer(cfg, init),
                        Equals("EncoderOnlyTransformer: num_classes must be >= 0 (0 = the masked-LM head), got -2"));
  }
  SECTION("the config is validated") {
    ModelConfig cfg = tiny_config();
    cfg.d_model = 250;
    cfg.n_heads = 8;
    Generator init(83);
    REQUIRE_THROWS_WITH(EncoderOnlyTransformer(cfg, init), Contains("d_model 250 is not divisible by n_heads 8"));
  }
  Generator init(84);
  EncoderOnlyTransformer model(tiny_config(), init);
  model.eval();
  SECTION("ids outside the vocabulary") {
    REQUIRE_THROWS_AS(model.forward(ids({3, 9, 2, 6}, {1, 4}), Tensor()), std::invalid_argument);
    REQUIRE_THROWS_WITH(model.forward(ids({3, 5, 2, 6, 4, 1, 9, 0}, {2, 4}), Tensor()),
                        Equals("EncoderOnlyTransformer: token id 9 at (1, 2) is outside the vocabulary [0, 7)"));
    REQUIRE_THROWS_WITH(model.encode(ids({-1}, {1, 1})), Contains("token id -1 at (0, 0)"));
  }
  SECTION("a sequence longer than max_len") {
    REQUIRE_THROWS_WITH(model.forward(ids(std::vector<std::int64_t>(9, 2), {1, 9}), Tensor()),
                        Equals("EncoderOnlyTransformer: sequence length 9 is outside 1 .. max_len 8"));
    REQUIRE_NOTHROW(model.forward(ids(std::vector<std::int64_t>(8, 2), {1, 8}), Tensor()));
  }
  SECTION("ids of the wrong shape or dtype") {
    REQUIRE_THROWS_WITH(model.forward(zeros({2, 4}), Tensor()),
                        Contains("EncoderOnlyTransformer: expected token ids of shape (B,S) and dtype int64") &&
                            Contains("float32"));
    REQUIRE_THROWS_WITH(model.forward(ids({1, 2, 3}), Tensor()), Contains("(3,)"));
  }
  SECTION("it does not generate") {
    const std::string msg =
        "EncoderOnlyTransformer: an encoder-only model does not generate (architecture encoder-only; generation "
        "needs decoder-only or encoder-decoder)";
    const Model& as_model = model;  // through the interface the decoding code calls
    REQUIRE_THROWS_AS(as_model.start_decoding(padded_source()), std::invalid_argument);
    REQUIRE_THROWS_WITH(as_model.start_decoding(padded_source()), Equals(msg));
    EncoderDecoderState other;  // any state: the model refuses before looking at it
    REQUIRE_THROWS_WITH(as_model.decode_step(ids({1, 1}, {2, 1}), other), Equals(msg));
    REQUIRE_THROWS_WITH(as_model.decode_prefix(ids({1, 1}, {2, 1}), other), Equals(msg));
  }
}
