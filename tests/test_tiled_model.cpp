// model.attention = "tiled" against "plain" through the whole Seq2SeqTransformer: the same
// weights give the same logits and the same gradient for every parameter (float64 and float32),
// on a batch with padded sources and targets (padding masks in the encoder and cross-attention,
// the causal mask in the decoder), for multi-head and grouped-query attention, with sinusoidal,
// RoPE and ALiBi positions; greedy and beam decoding with the KV cache give the same tokens;
// capture_weights still yields the weights; the config key and its errors.
//
// The op itself (tiled_attention vs attention_naive, gradchecks, memory) is tested in
// test_tiled_attention.cpp; this file checks that MultiHeadAttention wires it in correctly.
//
// Letters: B batch, S source length, T target length, D d_model, H heads, V vocabulary.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "nn/seq2seq.h"
#include "test_util.h"
#include "train/config.h"
#include "train/eval/decode.h"
#include "train/setup.h"

using namespace sf;
using Catch::Contains;

namespace {

// Plain vs tiled in float64, relative to the largest |value| of the tensor compared: the two
// sum each softmax row in a different order (online rescaling, tiles), rounding at ~1e-16;
// two encoder and two decoder layers, layer norms and the loss amplify that to the measured
// 2.7e-15 at most (logits and every gradient, all six models). 1e-12 leaves a factor ~400
// without hiding a wrong term (a missing mask or scale changes results at 1e-2 or more).
constexpr double kModelFloat64Tol = 1e-12;
// The same in float32, rounding at ~6e-8: measured at most 1.8e-6. 5e-5 is float32 rounding
// through the model with a factor ~25 of margin, still far below what a wrong term does.
constexpr double kModelFloat32Tol = 5e-5;

constexpr std::int64_t kPad = 0;
constexpr std::int64_t kVocab = 20;
constexpr std::uint64_t kSeed = 5;

// D 16, H 4 (Dh 4), F 32, 2 + 2 layers, V 20, no dropout (so the two models see the same
// numbers in training mode), pre-norm, separate embeddings and output matrix.
nn::ModelConfig small_model(std::int64_t kv_heads, nn::PositionalKind positional, nn::AttentionKernel attention) {
  nn::ModelConfig m;
  m.src_vocab = m.tgt_vocab = kVocab;
  m.d_model = 16;
  m.n_heads = 4;
  m.n_kv_heads = kv_heads;
  m.d_ff = 32;
  m.encoder_layers = 2;
  m.decoder_layers = 2;
  m.dropout = 0.0;
  m.attention_dropout = 0.0;
  m.norm_position = nn::NormPosition::Pre;
  m.positional = positional;
  m.attention = attention;
  m.max_len = 32;
  m.pad_id = kPad;
  return m;
}

// Rows of token ids in [4, V), padded with kPad to the longest: (B, max length) int64.
Tensor padded(const std::vector<std::vector<std::int64_t>>& rows) {
  std::size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.size());
  std::vector<std::int64_t> flat;
  for (const auto& r : rows) {
    flat.insert(flat.end(), r.begin(), r.end());
    flat.insert(flat.end(), width - r.size(), kPad);
  }
  return from_vector<std::int64_t>(flat, {static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(width)});
}

// B 3: sources of 7, 5, 3 tokens (S 7), targets of 6, 4, 2 (T 6), the rest padding.
struct Batch {
  Tensor src = padded({{4, 5, 6, 7, 8, 9, 10}, {11, 12, 13, 14, 15}, {16, 17, 18}});
  Tensor tgt_in = padded({{2, 5, 7, 9, 11, 13}, {2, 6, 8, 10}, {2, 19}});
  Tensor tgt_out = padded({{5, 7, 9, 11, 13, 3}, {6, 8, 10, 3}, {19, 3}});
};

// The logits and every parameter's gradient after one label-smoothed loss (padding ignored).
struct Result {
  Tensor logits;                                       // (B,T,V)
  std::vector<std::pair<std::string, Tensor>> grads;  // by parameter name
  int tiled_modules = 0;                               // attention modules built with the tiled kernel
};

// How many of the model's attention modules use the tiled kernel (so a test cannot pass by
// comparing plain with plain).
int count_tiled(const nn::Seq2SeqTransformer& model) {
  int n = 0;
  for (const auto& layer : *model.encoder->layers) n += layer->self_attn->kernel == nn::AttentionKernel::Tiled;
  for (const auto& layer : *model.decoder->layers)
    n += (layer->self_attn->kernel == nn::AttentionKernel::Tiled) + (layer->cross_attn->kernel == nn::AttentionKernel::Tiled);
  return n;
}

Result forward_backward(const nn::ModelConfig& cfg, Dtype dtype) {
  Generator init(kSeed);  // the same seed: both models get the same weights
  nn::Seq2SeqTransformer model(cfg, init, dtype);
  model.train();
  const Batch b;
  Result r;
  r.logits = model.forward(b.src, b.tgt_in);  // (B,T,V)
  Tensor loss = cross_entropy(reshape(r.logits, {-1, kVocab}), reshape(b.tgt_out, {-1}), kPad, 0.1);
  loss.backward();
  for (const auto& [name, p] : model.named_parameters()) r.grads.emplace_back(name, p.grad());
  r.tiled_modules = count_tiled(model);
  return r;
}

using sf::test::max_abs;  // tests/test_util.h

// max |a - b| / scale, by default the reference tensor's own scale max |b|.
double scaled_diff(const Tensor& a, const Tensor& b, double scale = 0) {
  if (scale == 0) scale = max_abs(b);
  return sf::test::max_abs_diff(a, b) / std::max(scale, 1e-300);
}

// The key bias's gradient is exactly 0 in exact arithmetic: adding a vector c to every key adds
// the same q . c to all of a query's scores, which softmax ignores. Both paths return rounding
// noise there, so it is measured against the largest gradient of the whole model instead.
bool has_zero_gradient(const std::string& name) {
  const std::string suffix = "k_proj.bias";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void require_plain_equals_tiled(std::int64_t kv_heads, nn::PositionalKind positional, Dtype dtype, double tol) {
  INFO("n_kv_heads " << kv_heads << ", positional " << nn::positional_name(positional) << ", " << dtype_name(dtype));
  const Result plain = forward_backward(small_model(kv_heads, positional, nn::AttentionKernel::Plain), dtype);
  const Result tiled = forward_backward(small_model(kv_heads, positional, nn::AttentionKernel::Tiled), dtype);
  REQUIRE(plain.tiled_modules == 0);
  REQUIRE(tiled.tiled_modules == 6);  // 2 encoder self-attentions, 2 x (self + cross) in the decoder
  CHECK(scaled_diff(tiled.logits, plain.logits) <= tol);
  REQUIRE(plain.grads.size() == tiled.grads.size());
  double model_scale = 0;  // the largest gradient entry of any parameter
  for (const auto& [name, g] : plain.grads) model_scale = std::max(model_scale, max_abs(g));
  REQUIRE(model_scale > 0);
  for (std::size_t i = 0; i < plain.grads.size(); ++i) {
    const std::string& name = plain.grads[i].first;
    INFO("gradient of " << name);
    REQUIRE(name == tiled.grads[i].first);
    REQUIRE(plain.grads[i].second.defined());
    REQUIRE(tiled.grads[i].second.defined());
    const double scale = has_zero_gradient(name) ? model_scale : 0;
    CHECK(scaled_diff(tiled.grads[i].second, plain.grads[i].second, scale) <= tol);
  }
}

const std::vector<nn::PositionalKind> kPositionals{nn::PositionalKind::Sinusoidal, nn::PositionalKind::RoPE,
                                                   nn::PositionalKind::ALiBi};
constexpr std::int64_t kMha = 4;  // n_kv_heads = n_heads
constexpr std::int64_t kGqa = 2;  // two query heads per k/v head

}  // namespace

TEST_CASE("tiled model equals plain in logits and every gradient in float64", "[tiled][attention][grad]") {
  for (std::int64_t kv : {kMha, kGqa})
    for (nn::PositionalKind pos : kPositionals) require_plain_equals_tiled(kv, pos, Dtype::Float64, kModelFloat64Tol);
}

TEST_CASE("tiled model equals plain in logits and every gradient in float32", "[tiled][attention][grad]") {
  for (std::int64_t kv : {kMha, kGqa})
    for (nn::PositionalKind pos : kPositionals) require_plain_equals_tiled(kv, pos, Dtype::Float32, kModelFloat32Tol);
}

TEST_CASE("tiled model decodes the same tokens as plain with the KV cache", "[tiled][attention][decode]") {
  const Batch b;
  for (std::int64_t kv : {kMha, kGqa}) {
    Generator init_plain(kSeed), init_tiled(kSeed);
    nn::Seq2SeqTransformer plain(small_model(kv, nn::PositionalKind::Sinusoidal, nn::AttentionKernel::Plain), init_plain);
    nn::Seq2SeqTransformer tiled(small_model(kv, nn::PositionalKind::Sinusoidal, nn::AttentionKernel::Tiled), init_tiled);
    plain.eval();
    tiled.eval();
    NoGradGuard no_grad;
    for (std::int64_t beam : {1, 3}) {
      INFO("n_kv_heads " << kv << ", beam " << beam);
      train::DecodeOptions opt;
      opt.beam = beam;
      opt.use_cache = true;
      const auto from_plain = train::translate_batch(plain, b.src, opt);
      const auto from_tiled = train::translate_batch(tiled, b.src, opt);
      CHECK(from_tiled == from_plain);
      opt.use_cache = false;  // and the cache changes nothing under tiled attention either
      CHECK(train::translate_batch(tiled, b.src, opt) == from_tiled);
      for (const auto& ids : from_tiled) CHECK(!ids.empty());  // a real comparison, not of empty outputs
    }
  }
}

TEST_CASE("tiled model with capture_weights still records the attention weights", "[tiled][attention]") {
  const Batch b;
  Generator init(kSeed);
  nn::Seq2SeqTransformer model(small_model(kGqa, nn::PositionalKind::Sinusoidal, nn::AttentionKernel::Tiled), init,
                               Dtype::Float64);
  model.eval();
  const Tensor tiled_logits = model.forward(b.src, b.tgt_in);
  auto& cross = *(*model.decoder->layers)[0].cross_attn;
  cross.capture_weights = true;  // heatmaps need the weights: this layer falls back to plain
  const Tensor captured_logits = model.forward(b.src, b.tgt_in);
  REQUIRE(cross.last_weights.defined());
  CHECK(cross.last_weights.shape() == Shape{3, 4, 6, 7});  // (B,H,T,S)
  // each row sums to 1; padded sources (row 1 from key 5, row 2 from key 3) get weight 0
  const auto w = cross.last_weights.to_vector<double>();
  for (std::int64_t h = 0; h < 4; ++h) {
    double sum = 0;
    for (std::int64_t j = 0; j < 7; ++j) sum += w[((2 * 4 + h) * 6 + 0) * 7 + j];
    CHECK(sum == Approx(1.0).epsilon(kModelFloat64Tol));
    CHECK(w[((2 * 4 + h) * 6 + 0) * 7 + 3] == 0.0);
  }
  CHECK(scaled_diff(captured_logits, tiled_logits) <= kModelFloat64Tol);
}

TEST_CASE("tiled attention is a model config key with clear errors", "[tiled][attention][config]") {
  const std::string reverse = std::string(SCRATCHFORMER_SOURCE_DIR) + "/configs/reverse.toml";
  const train::Config plain = train::load_config(reverse);
  CHECK(plain.model.attention == "plain");  // the default
  const train::Config tiled = train::load_config(reverse, {"model.attention=tiled"});
  CHECK(tiled.model.attention == "tiled");
  CHECK(train::model_config_from(tiled.model, kVocab, kVocab).attention == nn::AttentionKernel::Tiled);
  CHECK_THAT(train::to_toml(tiled), Contains("attention = \"tiled\""));

  CHECK_THROWS_WITH(train::load_config(reverse, {"model.attention=flash"}),
                    Contains("plain, tiled") && Contains("\"flash\""));
  CHECK_THROWS_WITH(train::load_config(reverse, {"model.attention=tiled", "model.attention_dropout=0.1"}),
                    Contains("model.attention") && Contains("attention_dropout"));

  nn::ModelConfig m = small_model(kMha, nn::PositionalKind::Sinusoidal, nn::AttentionKernel::Tiled);
  m.attention_dropout = 0.1;
  CHECK_THROWS_WITH(m.validate(), Contains("tiled") && Contains("attention_dropout 0.1"));
  CHECK_THROWS_WITH(nn::parse_attention("flash"), Contains("flash") && Contains("\"plain\", \"tiled\""));
  CHECK(nn::parse_attention(nn::attention_name(nn::AttentionKernel::Tiled)) == nn::AttentionKernel::Tiled);
  Generator init(1), drop(2);
  CHECK_THROWS_WITH(nn::MultiHeadAttention(16, 4, 4, 0.1, nn::PositionInAttention::None, init, drop,
                                           Dtype::Float32, nn::AttentionKernel::Tiled),
                    Contains("tiled attention has no dropout"));
}
