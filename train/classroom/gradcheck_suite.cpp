#include "train/classroom/gradcheck_suite.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "autograd/generator.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/decoder_only.h"
#include "nn/embedding.h"
#include "nn/encoder_only.h"
#include "nn/feed_forward.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "nn/positional.h"
#include "nn/relative_positions.h"
#include "nn/seq2seq.h"
#include "nn/transformer_layers.h"

// Letters: B batch, S source length, T target length, D d_model, H heads, Hkv key/value heads,
// Dh head width, F d_ff, V vocabulary. Every check is tiny (D <= 8, lengths 3-4) and float64.

namespace sf::train {

namespace {

using nn::Module;

// ---- building one run -------------------------------------------------------------------------

// The inputs of one gradcheck run, each with the name the table shows.
struct NamedInputs {
  std::vector<Tensor> tensors;
  std::vector<std::string> names;

  void add(const std::string& name, const Tensor& t) {
    tensors.push_back(t);
    names.push_back(name);
  }
  // Every parameter of `m`, named by its dotted path ("self_attn.q_proj.weight").
  void add_parameters(const Module& m) {
    for (const auto& [name, p] : m.named_parameters()) add(name, p);
  }
};

GradcheckCase run_case(const std::string& variant, const GradcheckFn& f, const NamedInputs& in,
                       const GradcheckOptions& options) {
  GradcheckCase c;
  c.variant = variant;
  c.input_names = in.names;
  for (const Tensor& t : in.tensors) c.input_shapes.push_back(t.shape());
  c.result = gradcheck(f, in.tensors, options);
  return c;
}

// A float64 leaf with N(0,1) values that requires grad.
Tensor grad_input(const Shape& shape, Generator& gen) {
  Tensor t = randn(shape, gen, Dtype::Float64);
  t.requires_grad_();
  return t;
}

// Overwrites every parameter of `m` with N(0,1) values, so that zero biases and unit norm
// weights (their initial values) cannot hide a wrong gradient term.
void randomise_parameters(const Module& m, Generator& gen) {
  NoGradGuard no_grad;
  for (const Tensor& p : m.parameters()) const_cast<Tensor&>(p).copy_(randn(p.shape(), gen, p.dtype()));
}

Tensor ids(const std::vector<std::int64_t>& values, const Shape& shape) {
  return from_vector<std::int64_t>(values, shape);
}

// The source batch of the attention, layer and model checks: (2,4), the second row ends with two pads (id 0).
Tensor padded_source() { return ids({3, 5, 2, 6, 4, 1, 0, 0}, {2, 4}); }

// The tiny model of the model checks: D 8, H 2 (Dh 4), F 16, one layer each,
// vocabulary 7 (pad 0), no dropout.
nn::ModelConfig tiny_config() {
  nn::ModelConfig c;
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

// The layer checks' config: D 4, H 2 (Dh 2), F 8, about 170 parameters in an encoder layer and
// 260 in a decoder layer, each checked element by element (two forward passes per element).
nn::ModelConfig layer_config() {
  nn::ModelConfig c = tiny_config();
  c.d_model = 4;
  c.d_ff = 8;
  return c;
}

// ---- the entries ------------------------------------------------------------------------------

// One run of a two-operand function a (shape_a), b (shape_b), from a fresh Generator(seed).
GradcheckCase check_pair(const std::string& variant, const Shape& shape_a, const Shape& shape_b, std::uint64_t seed,
                         const GradcheckFn& f, const GradcheckOptions& o) {
  Generator gen(seed);
  NamedInputs in;
  in.add("a", grad_input(shape_a, gen));
  in.add("b", grad_input(shape_b, gen));
  return run_case(variant, f, in, o);
}

// MatMul: c = a @ b for 2-D, batched, broadcast and mixed operands, and on strided views
// (a transposed pair, and a narrowed one whose layout matmul must copy).
std::vector<GradcheckCase> check_matmul(const GradcheckOptions& o) {
  const GradcheckFn product = [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); };
  const GradcheckFn transposed = [](const std::vector<Tensor>& t) {
    return matmul(transpose(t[0], -2, -1), transpose(t[1], -2, -1));  // (2,3,4) @ (4,5)
  };
  const GradcheckFn narrowed = [](const std::vector<Tensor>& t) {
    const Tensor a = narrow(t[0], 1, 1, 4);               // (3,4), strides (6,1)
    const Tensor b = squeeze(narrow(t[1], 2, 1, 1), 2);  // (4,2), strides (4,2)
    return matmul(a, b);
  };
  return {check_pair("2-D", {3, 4}, {4, 5}, 7, product, o),
          check_pair("batched", {2, 3, 4}, {2, 4, 2}, 7, product, o),
          check_pair("broadcast batch dims", {2, 1, 3, 4}, {3, 4, 2}, 7, product, o),
          check_pair("2-D @ batched", {3, 4}, {2, 4, 5}, 7, product, o),
          check_pair("batched @ 2-D", {2, 3, 4}, {4, 5}, 7, product, o),  // the folded gemm; grad_b in one gemm
          check_pair("both transposed", {2, 4, 3}, {5, 4}, 8, transposed, o),
          check_pair("narrowed, layout copied", {3, 6}, {4, 2, 2}, 8, narrowed, o)};
}

// Softmax along the first, middle and last dim of a (5,3,4) view with reversed strides (no dim
// contiguous).
std::vector<GradcheckCase> check_softmax(const GradcheckOptions& o) {
  Generator gen(13);
  NamedInputs in;
  in.add("x (transposed view)", grad_input({4, 3, 5}, gen));
  std::vector<GradcheckCase> cases;
  for (const std::int64_t d : {0, 1, -1})
    cases.push_back(run_case("dim " + std::to_string(d),
                             [d](const std::vector<Tensor>& t) { return softmax(transpose(t[0], 0, 2), d); }, in, o));
  return cases;
}

// Relu: y = max(0, x) on a transposed view; the gradient is 1 where x > 0 and 0 elsewhere (N(0,1)
// values are never within eps of the kink at 0).
std::vector<GradcheckCase> check_relu(const GradcheckOptions& o) {
  Generator gen(9);
  NamedInputs in;
  in.add("x (transposed view)", grad_input({4, 3}, gen));
  return {run_case("", [](const std::vector<Tensor>& t) { return relu(transpose(t[0], 0, 1)); }, in, o)};
}

// Embedding: y = E[ids]; the gradient scatter-adds into the rows read (repeated ids accumulate).
std::vector<GradcheckCase> check_embedding(const GradcheckOptions& o) {
  Generator gen(4);
  nn::Embedding emb(5, 3, gen, /*padding_idx=*/0, Dtype::Float64);
  // No padding id among them: the padding row is deliberately not differentiated (its gradient
  // is 0 by design while the forward still reads it).
  const Tensor x = ids({1, 3, 3, 4, 1, 2, 4, 4}, {2, 4});
  NamedInputs in;
  in.add_parameters(emb);
  return {run_case("", [&](const std::vector<Tensor>&) { return emb.forward(x); }, in, o)};
}

// Linear: y = x W^T + b.
std::vector<GradcheckCase> check_linear(const GradcheckOptions& o) {
  Generator gen(5);
  nn::Linear lin(4, 3, gen, true, Dtype::Float64);
  randomise_parameters(lin, gen);
  NamedInputs in;
  in.add("x", grad_input({2, 3, 4}, gen));  // (B,T,in)
  in.add_parameters(lin);
  return {run_case("", [&](const std::vector<Tensor>& t) { return lin.forward(t[0]); }, in, o)};
}

// scaled_dot_product_attention(q, k, v, mask, bias) on q: (2,2,Tq,3), k, v: (2,2,Tk,3).
GradcheckCase check_sdpa(const std::string& variant, std::int64_t t_q, std::int64_t t_k, const Tensor& mask,
                         const Tensor& bias, std::uint64_t seed, const GradcheckOptions& o) {
  Generator gen(seed);
  NamedInputs in;
  in.add("q", grad_input({2, 2, t_q, 3}, gen));
  in.add("k", grad_input({2, 2, t_k, 3}, gen));
  in.add("v", grad_input({2, 2, t_k, 3}, gen));
  return run_case(
      variant, [&](const std::vector<Tensor>& t) { return nn::scaled_dot_product_attention(t[0], t[1], t[2], mask, bias); },
      in, o);
}

std::vector<GradcheckCase> check_attention_no_mask(const GradcheckOptions& o) {
  // q, k, v made as (B,T,H,Dh) and seen as (B,H,T,Dh) through a transpose: non-contiguous views.
  Generator gen(104);
  NamedInputs in;
  in.add("q (transposed view)", grad_input({2, 3, 2, 3}, gen));
  in.add("k (transposed view)", grad_input({2, 4, 2, 3}, gen));
  in.add("v (transposed view)", grad_input({2, 4, 2, 3}, gen));
  return {run_case(
      "",
      [](const std::vector<Tensor>& t) {
        return nn::scaled_dot_product_attention(transpose(t[0], 1, 2), transpose(t[1], 1, 2), transpose(t[2], 1, 2));
      },
      in, o)};
}

std::vector<GradcheckCase> check_attention_padding_mask(const GradcheckOptions& o) {
  // keys: row 2 of the batch ends with two padding positions
  const Tensor mask = nn::padding_mask(ids({5, 6, 7, 8, 5, 6, 0, 0}, {2, 4}), 0);  // (2,1,1,4)
  return {check_sdpa("", 3, 4, mask, Tensor(), 105, o)};
}

std::vector<GradcheckCase> check_attention_causal_mask(const GradcheckOptions& o) {
  return {check_sdpa("", 4, 4, nn::causal_mask(4, 4), Tensor(), 106, o)};
}

std::vector<GradcheckCase> check_attention_alibi(const GradcheckOptions& o) {
  const Tensor bias = nn::alibi_bias(2, 3, 3, 0, /*causal=*/true, Dtype::Float64);  // (H,Tq,Tk)
  return {check_sdpa("", 3, 3, nn::causal_mask(3, 3), bias, 107, o)};
}

// MultiHeadAttention (D 8, H 4, n_kv_heads k/v heads): causal self-attention and padded
// cross-attention, w.r.t. the inputs and every projection.
std::vector<GradcheckCase> check_heads(std::int64_t n_kv_heads, std::uint64_t seed, const GradcheckOptions& o) {
  Generator init(seed), drop(1), gen(seed + 1);
  nn::MultiHeadAttention m(8, 4, n_kv_heads, 0.0, nn::PositionInAttention::None, init, drop, Dtype::Float64);
  const Tensor causal = nn::causal_mask(3, 3);
  const Tensor pad = nn::padding_mask(padded_source(), 0);  // (2,1,1,4)
  NamedInputs self_in;
  self_in.add("x", grad_input({2, 3, 8}, gen));
  self_in.add_parameters(m);
  NamedInputs cross_in;
  cross_in.add("x", grad_input({2, 3, 8}, gen));
  cross_in.add("memory", grad_input({2, 4, 8}, gen));
  cross_in.add_parameters(m);
  return {run_case("self, causal", [&](const std::vector<Tensor>& t) { return m.forward(t[0], t[0], causal); }, self_in, o),
          run_case("cross, padding", [&](const std::vector<Tensor>& t) { return m.forward(t[0], t[1], pad); }, cross_in, o)};
}

std::vector<GradcheckCase> check_multi_head(const GradcheckOptions& o) { return check_heads(4, 210, o); }
std::vector<GradcheckCase> check_gqa(const GradcheckOptions& o) { return check_heads(2, 214, o); }
std::vector<GradcheckCase> check_mqa(const GradcheckOptions& o) { return check_heads(1, 216, o); }

// Self-attention with positions inside attention: RoPE (rotated q, k) or ALiBi (a score bias).
std::vector<GradcheckCase> check_relative_attention(const GradcheckOptions& o) {
  std::vector<GradcheckCase> cases;
  for (const auto pos : {nn::PositionInAttention::RoPE, nn::PositionInAttention::ALiBi}) {
    Generator init(220), drop(1), gen(221);
    nn::MultiHeadAttention m(8, 2, 1, 0.0, pos, init, drop, Dtype::Float64);
    const Tensor causal = nn::causal_mask(3, 3);
    NamedInputs in;
    in.add("x", grad_input({1, 3, 8}, gen));
    in.add_parameters(m);
    cases.push_back(run_case(pos == nn::PositionInAttention::RoPE ? "rope, mqa" : "alibi, mqa",
                             [&](const std::vector<Tensor>& t) { return m.forward(t[0], t[0], causal, nullptr, 0, true); },
                             in, o));
  }
  return cases;
}

// FeedForward with each activation, dropout on (the same mask every call: the generator is
// reseeded), random biases.
std::vector<GradcheckCase> check_feed_forward(const GradcheckOptions& o) {
  std::vector<GradcheckCase> cases;
  for (const auto act : {nn::Activation::ReLU, nn::Activation::GELU, nn::Activation::SwiGLU}) {
    Generator init(22), drop(23), gen(24);
    nn::FeedForward ff(3, 5, act, 0.25, init, drop, Dtype::Float64);
    randomise_parameters(ff, gen);
    NamedInputs in;
    in.add("x", grad_input({2, 2, 3}, gen));
    in.add_parameters(ff);
    cases.push_back(run_case(
        nn::activation_name(act),
        [&](const std::vector<Tensor>& t) {
          drop.manual_seed(99);
          return ff.forward(t[0]);
        },
        in, o));
  }
  return cases;
}

std::vector<GradcheckCase> check_layer_norm(const GradcheckOptions& o) {
  Generator gen(6);
  nn::LayerNorm ln(5, 1e-5, Dtype::Float64);
  randomise_parameters(ln, gen);
  NamedInputs in;
  in.add("x", grad_input({2, 3, 5}, gen));
  in.add_parameters(ln);
  return {run_case("", [&](const std::vector<Tensor>& t) { return ln.forward(t[0]); }, in, o)};
}

std::vector<GradcheckCase> check_rms_norm(const GradcheckOptions& o) {
  Generator gen(7);
  nn::RMSNorm rn(5, 1e-6, Dtype::Float64);
  randomise_parameters(rn, gen);
  NamedInputs in;
  in.add("x", grad_input({2, 3, 5}, gen));
  in.add_parameters(rn);
  return {run_case("", [&](const std::vector<Tensor>& t) { return rn.forward(t[0]); }, in, o)};
}

// Sinusoidal and learned tables added to x (from position 2), and RoPE's rotation of x.
std::vector<GradcheckCase> check_positions(const GradcheckOptions& o) {
  Generator gen(8);
  nn::SinusoidalPositional sinusoidal(10, 4, Dtype::Float64);
  nn::LearnedPositional learned(7, 4, gen, Dtype::Float64);
  NamedInputs sin_in, learned_in, rope_in;
  sin_in.add("x", grad_input({2, 3, 4}, gen));
  learned_in.add("x", grad_input({2, 3, 4}, gen));
  learned_in.add_parameters(learned);
  rope_in.add("x", grad_input({1, 2, 3, 4}, gen));  // (B,H,T,Dh)
  return {run_case("sinusoidal", [&](const std::vector<Tensor>& t) { return sinusoidal.forward(t[0], 2); }, sin_in, o),
          run_case("learned", [&](const std::vector<Tensor>& t) { return learned.forward(t[0], 2); }, learned_in, o),
          run_case("rope", [](const std::vector<Tensor>& t) { return nn::apply_rope(t[0], 2); }, rope_in, o)};
}

std::string norm_variant(nn::NormPosition position, nn::NormKind kind) {
  return std::string(nn::norm_position_name(position)) + "-norm " + nn::norm_name(kind);
}

const std::pair<nn::NormPosition, nn::NormKind> kNormChoices[] = {
    {nn::NormPosition::Pre, nn::NormKind::LayerNorm},
    {nn::NormPosition::Pre, nn::NormKind::RMSNorm},
    {nn::NormPosition::Post, nn::NormKind::LayerNorm},
    {nn::NormPosition::Post, nn::NormKind::RMSNorm}};

// EncoderLayer with a padded source, for pre/post x LayerNorm/RMSNorm.
std::vector<GradcheckCase> check_encoder_layer(const GradcheckOptions& o) {
  std::vector<GradcheckCase> cases;
  std::uint64_t seed = 21;
  for (const auto& [position, kind] : kNormChoices) {
    nn::ModelConfig cfg = layer_config();
    cfg.norm_position = position;
    cfg.norm = kind;
    Generator init(seed), drop(1), gen(seed + 1);
    seed += 2;
    nn::EncoderLayer layer(cfg, init, drop, Dtype::Float64);
    layer.eval();
    const Tensor mask = nn::padding_mask(ids({3, 5, 2, 4, 1, 0}, {2, 3}), 0);  // row 2: one pad
    NamedInputs in;
    in.add("x", grad_input({2, 3, 4}, gen));  // (B,S,D)
    in.add_parameters(layer);
    cases.push_back(run_case(norm_variant(position, kind),
                             [&](const std::vector<Tensor>& t) { return layer.forward(t[0], mask); }, in, o));
  }
  return cases;
}

// DecoderLayer (causal self-attention, cross-attention over a padded memory, feed-forward),
// for pre/post x LayerNorm/RMSNorm.
std::vector<GradcheckCase> check_decoder_layer(const GradcheckOptions& o) {
  std::vector<GradcheckCase> cases;
  std::uint64_t seed = 31;
  for (const auto& [position, kind] : kNormChoices) {
    nn::ModelConfig cfg = layer_config();
    cfg.norm_position = position;
    cfg.norm = kind;
    Generator init(seed), drop(1), gen(seed + 1);
    seed += 2;
    nn::DecoderLayer layer(cfg, init, drop, Dtype::Float64);
    layer.eval();
    const Tensor self_mask = nn::causal_mask(3, 3), memory_mask = nn::padding_mask(padded_source(), 0);
    NamedInputs in;
    in.add("y", grad_input({2, 3, 4}, gen));       // (B,T,D)
    in.add("memory", grad_input({2, 4, 4}, gen));  // (B,S,D)
    in.add_parameters(layer);
    cases.push_back(run_case(
        norm_variant(position, kind),
        [&](const std::vector<Tensor>& t) { return layer.forward(t[0], t[1], self_mask, memory_mask); }, in, o));
  }
  return cases;
}

// logits (B,T,V) vs targets (B,T) -> mean label-smoothed cross-entropy over non-pad targets.
Tensor smoothed_loss(const Tensor& logits, const Tensor& targets, double smoothing) {
  const std::int64_t n = logits.size(0) * logits.size(1);
  return cross_entropy(reshape(logits, {n, logits.size(2)}), reshape(targets, {n}), 0, smoothing);
}

// The whole Seq2SeqTransformer: the label-smoothed loss w.r.t. every parameter, in fast mode
// (4 random directions per parameter tensor: element-wise would take ~3400 forward passes).
std::vector<GradcheckCase> check_model(const GradcheckOptions& tolerances) {
  GradcheckOptions o = tolerances;
  o.fast_mode = true;
  nn::ModelConfig paper = tiny_config();
  paper.norm_position = nn::NormPosition::Post;
  nn::ModelConfig modern = tiny_config();
  modern.n_heads = 4;
  modern.n_kv_heads = 2;
  modern.norm = nn::NormKind::RMSNorm;
  modern.positional = nn::PositionalKind::RoPE;
  modern.activation = nn::Activation::SwiGLU;
  modern.share_embeddings = true;
  modern.tie_output = true;
  const std::pair<const char*, nn::ModelConfig> configs[] = {
      {"post-norm sinusoidal, fast", paper},
      {"pre rmsnorm rope gqa swiglu, fast", modern}};
  const Tensor src = padded_source();
  const Tensor tgt_in = ids({2, 4, 5, 2, 6, 3}, {2, 3});
  const Tensor tgt_out = ids({4, 5, 6, 6, 3, 0}, {2, 3});  // the last target of row 2 is padding
  std::vector<GradcheckCase> cases;
  std::uint64_t seed = 41;
  for (const auto& [variant, cfg] : configs) {
    Generator init(seed++);
    nn::Seq2SeqTransformer model(cfg, init, Dtype::Float64);
    model.eval();
    NamedInputs in;
    in.add_parameters(model);
    cases.push_back(run_case(
        variant, [&](const std::vector<Tensor>&) { return smoothed_loss(model.forward(src, tgt_in), tgt_out, 0.1); },
        in, o));
  }
  return cases;
}

// The decoder-only model (GPT's shape: causal encoder layers, the LM head tied to the embedding):
// the label-smoothed next-token loss w.r.t. every parameter, in fast mode as check_model. Row 2
// of the sequence ends with a pad, and its targets with two (not scored).
std::vector<GradcheckCase> check_decoder_only(const GradcheckOptions& tolerances) {
  GradcheckOptions o = tolerances;
  o.fast_mode = true;
  nn::ModelConfig gpt = tiny_config();
  gpt.arch = nn::Arch::DecoderOnly;
  gpt.src_vocab = 0;  // one vocabulary, tgt_vocab
  gpt.decoder_layers = 2;
  nn::ModelConfig modern = gpt;
  modern.n_heads = 4;
  modern.n_kv_heads = 2;
  modern.norm_position = nn::NormPosition::Post;
  modern.norm = nn::NormKind::RMSNorm;
  modern.positional = nn::PositionalKind::RoPE;
  modern.activation = nn::Activation::SwiGLU;
  const std::pair<const char*, nn::ModelConfig> configs[] = {
      {"pre layernorm sinusoidal, fast", gpt},
      {"post rmsnorm rope gqa swiglu, fast", modern}};
  const Tensor tokens = ids({2, 4, 5, 6, 3, 5, 1, 0}, {2, 4});   // (B,T)
  const Tensor targets = ids({4, 5, 6, 3, 5, 1, 0, 0}, {2, 4});  // tokens shifted left
  std::vector<GradcheckCase> cases;
  std::uint64_t seed = 45;
  for (const auto& [variant, cfg] : configs) {
    Generator init(seed++);
    nn::DecoderOnlyTransformer model(cfg, init, Dtype::Float64);
    model.eval();
    NamedInputs in;
    in.add_parameters(model);
    cases.push_back(run_case(
        variant, [&](const std::vector<Tensor>&) { return smoothed_loss(model.lm_logits(tokens), targets, 0.1); },
        in, o));
  }
  return cases;
}

// CrossEntropy: mean -log softmax(logits)[target] over the rows whose target is not -100, plain
// and with label smoothing 0.2, on contiguous, transposed and narrowed logits (N 4, V 5).
std::vector<GradcheckCase> check_cross_entropy(const GradcheckOptions& o) {
  const Tensor targets = ids({1, -100, 4, 0}, {4});  // row 2 is ignored
  std::vector<GradcheckCase> cases;
  for (const double smoothing : {0.0, 0.2}) {
    const std::string s = smoothing == 0 ? "" : ", smoothing 0.2";
    const struct {
      const char* layout;
      const char* input;
      Shape shape;                   // of the input; the logits are (4,5): view(input)
      Tensor (*view)(const Tensor&);
    } layouts[] = {{"contiguous", "logits", {4, 5}, [](const Tensor& x) { return x; }},
                   {"transposed", "logits (transposed view)", {5, 4}, [](const Tensor& x) { return transpose(x, 0, 1); }},
                   {"narrowed", "logits (narrowed view)", {4, 8}, [](const Tensor& x) { return narrow(x, 1, 2, 5); }}};
    for (const auto& l : layouts) {
      Generator gen(21);
      NamedInputs in;
      in.add(l.input, grad_input(l.shape, gen));
      const auto view = l.view;
      cases.push_back(run_case(
          l.layout + s,
          [&, view, smoothing](const std::vector<Tensor>& t) { return cross_entropy(view(t[0]), targets, -100, smoothing); },
          in, o));
    }
  }
  return cases;
}

// The encoder-only model (BERT's shape): its training loss w.r.t. every parameter, in fast mode
// (element-wise would take ~1400 forward passes per variant). The masked-LM head (cross-entropy
// at three predicted positions, the rest target 0: not scored) and the classifier on the mean-
// and the cls-pooled sentence vector (C 3, one label per row); padded_source() pads row 2.
std::vector<GradcheckCase> check_encoder_only(const GradcheckOptions& tolerances) {
  GradcheckOptions o = tolerances;
  o.fast_mode = true;
  nn::ModelConfig mlm = tiny_config();
  mlm.arch = nn::Arch::EncoderOnly;
  nn::ModelConfig mean = mlm;
  mean.num_classes = 3;
  mean.norm_position = nn::NormPosition::Post;
  mean.norm = nn::NormKind::RMSNorm;
  mean.positional = nn::PositionalKind::RoPE;
  mean.n_heads = 4;
  mean.n_kv_heads = 2;
  nn::ModelConfig cls = mlm;
  cls.num_classes = 3;
  cls.pooling = nn::Pooling::Cls;
  cls.positional = nn::PositionalKind::Learned;
  const std::pair<const char*, nn::ModelConfig> configs[] = {
      {"masked-LM pre-norm layernorm sinusoidal, fast", mlm},
      {"classifier mean pooling post rmsnorm rope gqa, fast", mean},
      {"classifier cls pooling learned positions, fast", cls}};
  const Tensor src = padded_source();                             // (2,4)
  const Tensor mlm_targets = ids({0, 4, 0, 1, 6, 0, 0, 0}, {8});  // (B*S), 0 = not predicted
  const Tensor labels = ids({2, 0}, {2});                         // (B)
  std::vector<GradcheckCase> cases;
  std::uint64_t seed = 61;
  for (const auto& [variant, cfg] : configs) {
    Generator init(seed++);
    nn::EncoderOnlyTransformer model(cfg, init, Dtype::Float64);
    model.eval();
    NamedInputs in;
    in.add_parameters(model);
    cases.push_back(run_case(
        variant,
        [&](const std::vector<Tensor>&) {
          const Tensor logits = model.forward(src, Tensor());  // (B,S,V) or (B,C)
          if (model.classifier) return cross_entropy(logits, labels);
          return cross_entropy(reshape(logits, {8, logits.size(2)}), mlm_targets, 0);
        },
        in, o));
  }
  return cases;
}

// cross_entropy with label smoothing 0.1 and an ignored (padding) target.
std::vector<GradcheckCase> check_label_smoothed_loss(const GradcheckOptions& o) {
  Generator gen(21);
  const Tensor targets = ids({1, 0, 4, 2}, {4});  // row 2 is padding (ignore_index 0)
  NamedInputs in;
  in.add("logits", grad_input({4, 5}, gen));  // (N,V)
  return {run_case("smoothing 0.1",
                   [&](const std::vector<Tensor>& t) { return cross_entropy(t[0], targets, 0, 0.1); }, in, o)};
}

std::vector<GradcheckEntry> make_suite() {
  return {
      {"matmul", "ops", "matrix product a @ b: 2-D, batched, broadcast, and on transposed and narrowed views",
       check_matmul},
      {"softmax", "ops", "softmax along each dim of a view with no contiguous dim", check_softmax},
      {"relu", "ops", "Relu max(0, x) on a transposed view", check_relu},
      {"embedding", "embeddings", "Embedding lookup E[ids]: repeated ids accumulate into one row's gradient",
       check_embedding},
      {"linear", "linear", "Linear layer y = x W^T + b: input, weight and bias", check_linear},
      {"attention_no_mask", "attention", "scaled dot-product attention softmax(q k^T / sqrt(Dh)) v, no mask, on transposed views",
       check_attention_no_mask},
      {"attention_padding_mask", "attention", "scaled dot-product attention with a padding mask (padded keys get weight 0)",
       check_attention_padding_mask},
      {"attention_causal_mask", "attention", "scaled dot-product attention with a causal mask (no query sees the future)",
       check_attention_causal_mask},
      {"attention_alibi", "attention", "scaled dot-product attention with an ALiBi distance bias and a causal mask",
       check_attention_alibi},
      {"multi_head", "attention", "MultiHeadAttention, 4 query and 4 k/v heads: causal self- and padded cross-attention",
       check_multi_head},
      {"gqa", "attention", "grouped-query attention: 4 query heads share 2 k/v heads", check_gqa},
      {"mqa", "attention", "multi-query attention: 4 query heads share 1 k/v head", check_mqa},
      {"relative_attention", "attention", "self-attention with RoPE-rotated q, k and with an ALiBi bias",
       check_relative_attention},
      {"positions", "positions", "sinusoidal and learned position tables added to x, and RoPE's rotation", check_positions},
      {"feed_forward", "feed-forward", "position-wise feed-forward block with ReLU, GELU and SwiGLU (dropout on)",
       check_feed_forward},
      {"layer_norm", "norms", "LayerNorm (x - mean) / sqrt(var + eps) * weight + bias", check_layer_norm},
      {"rms_norm", "norms", "RMSNorm x / sqrt(mean(x^2) + eps) * weight", check_rms_norm},
      {"encoder_layer", "layers", "encoder layer (self-attention + FFN, residuals), pre/post x LayerNorm/RMSNorm",
       check_encoder_layer},
      {"decoder_layer", "layers",
       "decoder layer (causal self-attention, cross-attention, FFN), pre/post x LayerNorm/RMSNorm", check_decoder_layer},
      {"model", "model", "the whole Seq2SeqTransformer's loss w.r.t. every parameter (fast mode: random directions)",
       check_model},
      {"decoder_only", "model", "the whole DecoderOnlyTransformer's next-token loss w.r.t. every parameter (fast mode)",
       check_decoder_only},
      {"cross_entropy", "loss", "cross-entropy of logits, plain and smoothed, contiguous, transposed and narrowed, one row ignored",
       check_cross_entropy},
      {"encoder_only", "model",
       "the encoder-only model's loss w.r.t. every parameter: masked-LM head, mean and cls pooling (fast mode)",
       check_encoder_only},
      {"label_smoothed_loss", "loss", "cross-entropy with label smoothing 0.1 and an ignored padding target",
       check_label_smoothed_loss},
  };
}

// A number in the table: 1.2e-11, or 0 exactly.
std::string sci(double v) {
  if (v == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

std::string pad_right(const std::string& s, std::size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

// Columns padded to the widest cell (header included), two spaces apart.
std::string format_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], r[c].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) line += c + 1 == r.size() ? r[c] : pad_right(r[c], width[c] + 1) + " ";
    out += line + "\n";
  }
  return out;
}

}  // namespace

const std::vector<GradcheckEntry>& gradcheck_suite() {
  static const std::vector<GradcheckEntry> suite = [] {
    std::vector<GradcheckEntry> all = make_suite();
    for (GradcheckEntry& e : exercise_gradcheck_entries()) all.push_back(std::move(e));
    return all;
  }();
  return suite;
}

const GradcheckEntry* find_gradcheck(const std::string& name) {
  for (const GradcheckEntry& e : gradcheck_suite())
    if (e.name == name) return &e;
  return nullptr;
}

std::string gradcheck_names() {
  std::string out;
  for (const GradcheckEntry& e : gradcheck_suite()) out += (out.empty() ? "" : ", ") + e.name;
  return out;
}

std::vector<GradcheckRow> gradcheck_rows(const GradcheckEntry& entry, const std::vector<GradcheckCase>& cases) {
  std::vector<GradcheckRow> rows;
  for (const GradcheckCase& c : cases) {
    if (c.result.inputs.size() != c.input_names.size())
      throw std::logic_error("gradcheck " + entry.name + ": " + std::to_string(c.input_names.size()) +
                             " input names but " + std::to_string(c.result.inputs.size()) + " checked inputs");
    for (std::size_t i = 0; i < c.input_names.size(); ++i) {
      const GradcheckInputReport& r = c.result.inputs[i];
      GradcheckRow row;
      row.module = c.variant.empty() ? entry.name : entry.name + " (" + c.variant + ")";
      row.input = c.input_names[i];
      row.shape = i < c.input_shapes.size() ? c.input_shapes[i] : Shape{};
      row.max_abs_error = r.max_abs_error;
      row.max_rel_error = r.max_rel_error;
      row.ok = r.ok;
      rows.push_back(row);
    }
  }
  return rows;
}

bool run_gradcheck_table(const std::vector<const GradcheckEntry*>& entries, std::ostream& out,
                         const GradcheckOptions& tolerances) {
  std::vector<std::vector<std::string>> table = {
      {"module", "parameter or input", "shape", "max abs error", "max rel error", "result"}};
  std::size_t runs = 0, failed = 0;
  std::vector<std::string> messages;
  for (const GradcheckEntry* e : entries) {
    std::vector<GradcheckCase> cases;
    try {
      cases = e->run(tolerances);
    } catch (const std::exception& ex) {  // e.g. exercise mode: "exercise: implement Softmax::backward ..."
      ++runs, ++failed;
      table.push_back({e->name, "-", "-", "-", "-", "FAIL"});
      messages.push_back(e->name + ": " + ex.what());
      continue;
    }
    runs += cases.size();
    for (const GradcheckRow& row : gradcheck_rows(*e, cases)) {
      if (!row.ok) ++failed;
      table.push_back({row.module, row.input, shape_str(row.shape), sci(row.max_abs_error), sci(row.max_rel_error),
                       row.ok ? "pass" : "FAIL"});
    }
    for (const GradcheckCase& c : cases)
      if (!c.result.ok)
        messages.push_back(e->name + (c.variant.empty() ? "" : " (" + c.variant + ")") + ": " + c.result.message);
  }
  out << "float64 gradient checks: central finite differences (eps " << tolerances.eps
      << ") against autograd's backward.\nAn input passes if |analytic - numeric| <= " << tolerances.atol << " + "
      << tolerances.rtol << " * |numeric| at every element.\n"
      << "max rel error divides by |numeric|, so it is ~1 where the true gradient is 0: e.g. k_proj.bias, which adds\n"
      << "q.b to every score of a row, and softmax ignores a constant added to a whole row.\n\n"
      << format_table(table);
  out << "\n" << entries.size() << " checks, " << runs << " runs, " << table.size() - 1 << " inputs: ";
  if (failed == 0) {
    out << "all passed\n";
    return true;
  }
  out << failed << " FAILED\n";
  for (const std::string& m : messages) out << m << (m.empty() || m.back() != '\n' ? "\n" : "");
  return false;
}

std::string format_gradcheck_list(const std::vector<GradcheckEntry>& entries) {
  std::size_t name_w = 0, topic_w = 0;
  for (const GradcheckEntry& e : entries) {
    name_w = std::max(name_w, e.name.size());
    topic_w = std::max(topic_w, e.topic.size());
  }
  std::ostringstream os;
  for (const GradcheckEntry& e : entries)
    os << pad_right(e.name, name_w + 1) << " " << pad_right(e.topic, topic_w + 1) << " " << e.description << "\n";
  return os.str();
}

}  // namespace sf::train
