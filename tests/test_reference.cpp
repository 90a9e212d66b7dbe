// Scratchformer against PyTorch: modules built with the same weights in PyTorch (Debian's
// python3-torch) by tools/make_reference.py, whose inputs, weights, outputs, losses and gradients
// are committed under tests/data/reference/*.safetensors. Running these tests needs no Python;
// regenerate the files with `/usr/bin/python3 tools/make_reference.py`.
//
//   attention_self / _cross / _causal   MultiHeadAttention vs torch.nn.MultiheadAttention
//                                       (output, attention weights, input and weight gradients)
//   layer_norm                          LayerNorm vs torch.nn.LayerNorm
//   seq2seq_pre_ln / _post_ln           Seq2SeqTransformer vs a model built from
//                                       torch.nn.TransformerEncoderLayer / DecoderLayer: logits,
//                                       label-smoothed cross-entropy, every parameter gradient
//   recurrent_rnn / _gru / _lstm        Recurrent vs torch.nn.RNN / GRU / LSTM: two layers,
//                                       bidirectional, packed padding; outputs, final states,
//                                       every gradient
//   decoder_only_lm                     DecoderOnlyTransformer (pre-LN, grouped-query attention,
//                                       GELU, tied LM head) vs pre-LN causal blocks on torch's
//                                       multi-head attention: the same three, on make_lm_batch's
//                                       rows with padding
//   rnn_seq2seq_additive / _dot /       RnnSeq2Seq vs tools/torch_model.py's RnnSeq2Seq on
//   _general / _none                    torch.nn.LSTM / GRU (encoder read packed, decoder stepped):
//                                       logits, label-smoothed cross-entropy, every parameter
//                                       gradient; Bahdanau's additive (LSTM), Luong's dot (GRU) and
//                                       general (LSTM) attention, and none (LSTM, the bottleneck)
//
// PyTorch computed the references in float64 from float32 weights and inputs, so they are the
// exact answer to float64 rounding. Each case runs here twice: in float64 (must agree to
// rounding: any difference in the math shows up) and in float32 (the required bound, relative
// error <= 1e-4). Each run reports its largest relative error with WARN, so
// `build/release/tests/reference_tests` prints the numbers.
//
// Letters: B batch, S source length, T target length, Tq/Tk query/key length, D d_model,
// H heads, V vocabulary.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/decoder_only.h"
#include "nn/norm.h"
#include "nn/recurrent.h"
#include "nn/rnn_seq2seq.h"
#include "nn/seq2seq.h"
#include "test_util.h"
#include "train/checkpoint/safetensors.h"

namespace {

using namespace sf;

// ---- tolerances ----

// The required bound for float32 against PyTorch. float32 rounds at 6e-8; the deepest value here
// (a first-layer weight gradient of the 2+2-layer model) passes through ~100 ops, each adding a
// few roundings of the size of its operands, so agreement is ~1e-6; 1e-4 leaves room for
// cancellation and is still far below what any wrong formula gives (1e-2 or worse).
constexpr double kFloat32RelTol = 1e-4;
// float64 against PyTorch's float64: the same math summed in a different order differs by about
// 1e-15 relative to the operands (measured here: <= 1e-12 with the floor below). A real
// difference in the model (a missing scale, a wrong mask, a swapped norm) is many orders larger.
constexpr double kFloat64RelTol = 1e-10;
// The relative error of an element is |got - ref| / max(|ref|, floor), floor = kFloorFraction *
// the largest |ref| in its tensor. An element far smaller than its tensor's largest is the
// result of cancellation (a sum of terms of the tensor's size that nearly cancel); its rounding
// error is set by the size of those terms, not by its own size, so measuring it relative to
// itself reports noise. Measured: float32 errors here are <= ~1e-6 of the tensor's largest
// |value|, in Scratchformer and in PyTorch alike; so elements above 1% of it are held to 1e-4 of
// themselves, smaller ones to 1e-6 of the largest. PyTorch's own float32 run of the same models,
// measured this way, reaches 6.6e-5 (tools/make_reference.py prints it); with a 1e-3 floor it
// would reach 3e-4 and fail the required bound itself.
constexpr double kFloorFraction = 1e-2;
// A reference tensor whose largest |value| is below this fraction of the case's largest
// gradient is zero in exact arithmetic, float64 rounding aside: the gradient of k_proj.bias
// (adding q.b_k shifts all scores of a query's row by the same amount, which softmax ignores).
// Such a tensor has no scale of its own, so its floor uses the case's largest gradient.
constexpr double kExactZeroFraction = 1e-12;

std::string reference_path(const std::string& name) {
  return std::string(SCRATCHFORMER_TEST_DATA) + "/reference/" + name + ".safetensors";
}

using sf::test::max_abs;  // tests/test_util.h

// One reference file: tensors by name and the configuration in its metadata.
struct Reference {
  std::string name;
  train::SafetensorsFile file;

  explicit Reference(const std::string& case_name)
      : name(case_name), file(train::load_safetensors(reference_path(case_name))) {}

  const Tensor& tensor(const std::string& key) const {
    auto it = file.tensors.find(key);
    INFO(name << ": tensor " << key);
    REQUIRE(it != file.tensors.end());
    return it->second;
  }
  // A fresh leaf of the given dtype holding the tensor's values (for inputs).
  Tensor input(const std::string& key, Dtype dtype) const { return clone(tensor(key).to(dtype)); }

  std::string meta(const std::string& key) const {
    auto it = file.metadata.find(key);
    INFO(name << ": metadata " << key);
    REQUIRE(it != file.metadata.end());
    return it->second;
  }
  std::int64_t meta_int(const std::string& key) const { return std::stoll(meta(key)); }
  double meta_double(const std::string& key) const { return std::stod(meta(key)); }
  bool meta_bool(const std::string& key) const {
    const std::string v = meta(key);
    INFO(name << ": metadata " << key << " = " << v);
    REQUIRE((v == "true" || v == "false"));
    return v == "true";
  }

  // The largest |value| over all "grad.*" tensors: the scale for gradients that are exactly zero.
  double gradient_scale() const {
    double m = 0;
    for (const auto& [key, t] : file.tensors)
      if (key.rfind("grad.", 0) == 0) m = std::max(m, max_abs(t));
    return m;
  }
};

// Copies the reference weights into every parameter of `module` (converted to its dtype).
void load_weights(nn::Module& module, const Reference& ref) {
  std::map<std::string, Tensor> state;
  for (const auto& [name, p] : module.named_parameters()) state[name] = ref.tensor(name);
  module.load_state_dict(state);
}

// Compares computed tensors with a reference file's and keeps the worst relative error.
class Comparison {
 public:
  Comparison(const Reference& ref, Dtype dtype)
      : ref_(ref), dtype_(dtype), tol_(dtype == Dtype::Float32 ? kFloat32RelTol : kFloat64RelTol),
        gradient_scale_(ref.gradient_scale()) {}

  // got: computed here; compared with the reference tensor `key`, element by element.
  void check(const std::string& key, const Tensor& got) {
    const Tensor& ref = ref_.tensor(key);
    INFO(ref_.name << " " << dtype_name(dtype_) << ": " << key);
    REQUIRE(got.defined());
    REQUIRE(got.dtype() == dtype_);
    REQUIRE(got.shape() == ref.shape());
    double scale = max_abs(ref);
    const bool grad = key.rfind("grad.", 0) == 0;
    if (grad && scale < kExactZeroFraction * gradient_scale_) scale = gradient_scale_;
    const double floor = std::max(kFloorFraction * scale, std::numeric_limits<double>::min());
    const double err = test::max_rel_diff(got, ref, floor);
    INFO("largest relative error " << err << ", tolerance " << tol_ << " (floor " << floor << ")");
    CHECK(err <= tol_);
    if (err >= worst_) {
      worst_ = err;
      worst_key_ = key;
    }
    checked_.insert(key);
  }

  // Every parameter's gradient "grad.<name>".
  void check_parameter_grads(const nn::Module& module) {
    for (const auto& [name, p] : module.named_parameters()) check("grad." + name, p.grad());
  }

  // Fails unless the file holds a weight and a gradient for every parameter of `module` and no
  // gradient of a parameter the module lacks: no parameter is left unchecked, none is extra.
  void require_names_every_parameter(const nn::Module& module) const {
    std::set<std::string> grads_in_file;
    for (const std::string& key : ref_.file.order)
      if (key.rfind("grad.", 0) == 0) grads_in_file.insert(key);
    const auto params = module.named_parameters();
    for (const auto& [name, p] : params) {
      INFO(ref_.name << ": the module has parameter " << name << " but the reference lacks it or its gradient");
      CHECK(ref_.file.tensors.count(name) == 1);
      CHECK(grads_in_file.count("grad." + name) == 1);
    }
    INFO(ref_.name << ": the module has " << params.size() << " parameters, the reference " << grads_in_file.size()
                   << " parameter gradients");
    CHECK(grads_in_file.size() == params.size());
  }

  // Fails if the file holds a gradient that was not compared (a parameter the module lacks).
  void require_all_grads_checked() const {
    for (const std::string& key : ref_.file.order)
      if (key.rfind("grad.", 0) == 0) {
        INFO(ref_.name << ": the reference has " << key << " but nothing here was compared with it");
        CHECK(checked_.count(key) == 1);
      }
  }

  // The number to quote: the largest relative error of this run.
  void report() const {
    char line[256];
    std::snprintf(line, sizeof line, "%s %s: largest relative error %.3g (%s) over %zu tensors, tolerance %.0e",
                  ref_.name.c_str(), dtype_name(dtype_), worst_, worst_key_.c_str(), checked_.size(), tol_);
    WARN(line);
  }

 private:
  const Reference& ref_;
  Dtype dtype_;
  double tol_;
  double gradient_scale_;
  double worst_ = 0;
  std::string worst_key_;
  std::set<std::string> checked_;
};

constexpr Dtype kDtypes[] = {Dtype::Float64, Dtype::Float32};

// ---- MultiHeadAttention vs torch.nn.MultiheadAttention ----

// x_q: (B,Tq,D), x_kv: (B,Tk,D) (self-attention: x_kv is x_q), mask: int64 (B,1,Tq,Tk), 1 = blocked.
// PyTorch's in_proj_weight (3D, D) was split into q_proj, k_proj, v_proj by the script.
void run_attention_case(const std::string& case_name, Dtype dtype) {
  const Reference ref(case_name);
  const std::int64_t D = ref.meta_int("d_model"), H = ref.meta_int("n_heads");
  const bool cross = ref.meta_int("cross") == 1;
  Generator gen(0);  // initial weights are overwritten by the reference's
  nn::MultiHeadAttention mha(D, H, H, 0.0, nn::PositionInAttention::None, gen, gen, dtype);
  load_weights(mha, ref);
  mha.capture_weights = true;

  Tensor x_q = ref.input("x_q", dtype).requires_grad_();                        // (B,Tq,D)
  Tensor x_kv = cross ? ref.input("x_kv", dtype).requires_grad_() : x_q;         // (B,Tk,D)
  const Tensor mask = ne(ref.tensor("mask"), 0.0);                               // bool, TRUE = BLOCKED
  const Tensor out = mha.forward(x_q, x_kv, mask);                               // (B,Tq,D)
  out.backward(ref.input("grad_out", dtype));  // the loss sum(out * grad_out)

  Comparison cmp(ref, dtype);
  cmp.check("out", out);
  cmp.check("weights", mha.last_weights);  // (B,H,Tq,Tk), torch's average_attn_weights=False
  cmp.check("grad.x_q", x_q.grad());
  if (cross) cmp.check("grad.x_kv", x_kv.grad());
  cmp.check_parameter_grads(mha);
  cmp.require_all_grads_checked();
  cmp.report();
}

TEST_CASE("MultiHeadAttention self-attention with padding matches torch MultiheadAttention",
          "[reference][attention]") {
  for (Dtype dtype : kDtypes) run_attention_case("attention_self", dtype);
}

TEST_CASE("MultiHeadAttention cross-attention matches torch MultiheadAttention", "[reference][attention]") {
  for (Dtype dtype : kDtypes) run_attention_case("attention_cross", dtype);
}

TEST_CASE("MultiHeadAttention causal self-attention matches torch MultiheadAttention",
          "[reference][attention][causal]") {
  for (Dtype dtype : kDtypes) run_attention_case("attention_causal", dtype);
}

// ---- LayerNorm vs torch.nn.LayerNorm ----

TEST_CASE("LayerNorm matches torch LayerNorm", "[reference][layer_norm]") {
  for (Dtype dtype : kDtypes) {
    const Reference ref("layer_norm");
    nn::LayerNorm ln(ref.meta_int("dim"), ref.meta_double("eps"), dtype);
    load_weights(ln, ref);
    Tensor x = ref.input("x", dtype).requires_grad_();  // (B,T,D), one row nearly constant
    const Tensor out = ln.forward(x);
    out.backward(ref.input("grad_out", dtype));

    Comparison cmp(ref, dtype);
    cmp.check("out", out);
    cmp.check("grad.x", x.grad());
    cmp.check_parameter_grads(ln);
    cmp.require_all_grads_checked();
    cmp.report();
  }
}

// ---- the recurrent layers vs torch.nn.RNN / GRU / LSTM ----

// Two layers, bidirectional, a padded batch (PyTorch read it packed): outputs, final states and
// every gradient, through T steps of backpropagation through time.
void check_recurrent(const std::string& case_name) {
  for (Dtype dtype : kDtypes) {
    const Reference ref(case_name);
    const nn::CellKind kind = nn::parse_cell_kind(ref.meta("cell"));
    Generator gen(0);  // the weights are the file's
    nn::Recurrent layer(kind, ref.meta_int("input_size"), ref.meta_int("hidden_size"), ref.meta_int("num_layers"),
                        ref.meta_int("bidirectional") == 1, gen, dtype);
    load_weights(layer, ref);
    Tensor x = ref.input("x", dtype).requires_grad_();                      // (B,T,I)
    const Tensor pad = ne(ref.input("pad", Dtype::Int64), 0.0);             // (B,T), true at padding
    const nn::Recurrent::Output out = layer.forward(x, pad);
    // h_n, c_n as PyTorch stacks them: (layers * directions, B, H)
    std::vector<Tensor> hs, cs;
    for (const nn::RecurrentState& st : out.final) hs.push_back(st.h), cs.push_back(st.c);
    const Tensor h_n = stack(hs, 0);
    Tensor loss = sum(mul(out.outputs, ref.input("grad_out", dtype))) + sum(mul(h_n, ref.input("grad_h", dtype)));
    Tensor c_n;
    if (kind == nn::CellKind::lstm) c_n = stack(cs, 0), loss = loss + sum(mul(c_n, ref.input("grad_c", dtype)));
    loss.backward();

    Comparison cmp(ref, dtype);
    cmp.check("out", out.outputs);
    cmp.check("h_n", h_n);
    if (c_n.defined()) cmp.check("c_n", c_n);
    cmp.check("grad.x", x.grad());
    cmp.check_parameter_grads(layer);
    cmp.require_all_grads_checked();
    cmp.report();
  }
}

TEST_CASE("RNN (tanh) matches torch.nn.RNN: two layers, bidirectional, packed padding", "[reference][recurrent]") {
  check_recurrent("recurrent_rnn");
}

TEST_CASE("GRU matches torch.nn.GRU: two layers, bidirectional, packed padding", "[reference][recurrent]") {
  check_recurrent("recurrent_gru");
}

TEST_CASE("LSTM matches torch.nn.LSTM: two layers, bidirectional, packed padding", "[reference][recurrent]") {
  check_recurrent("recurrent_lstm");
}

// ---- Seq2SeqTransformer vs a model of torch.nn Transformer layers ----

// The fields every architecture reads (one stack of decoder_layers, tgt_vocab).
nn::ModelConfig shared_config_from(const Reference& ref) {
  nn::ModelConfig cfg;
  cfg.tgt_vocab = ref.meta_int("tgt_vocab");
  cfg.d_model = ref.meta_int("d_model");
  cfg.n_heads = ref.meta_int("n_heads");
  cfg.n_kv_heads = ref.meta_int("n_kv_heads");
  cfg.d_ff = ref.meta_int("d_ff");
  cfg.decoder_layers = ref.meta_int("decoder_layers");
  cfg.dropout = ref.meta_double("dropout");
  cfg.attention_dropout = ref.meta_double("attention_dropout");
  cfg.activation = nn::parse_activation(ref.meta("activation"));
  cfg.norm = nn::parse_norm(ref.meta("norm"));
  cfg.norm_position = nn::parse_norm_position(ref.meta("norm_position"));
  cfg.positional = nn::parse_positional(ref.meta("positional"));
  cfg.max_len = ref.meta_int("max_len");
  cfg.pad_id = ref.meta_int("pad_id");
  return cfg;
}

// The encoder-decoder's config (the seq2seq files name no arch: encoder-decoder, the default).
nn::ModelConfig config_from(const Reference& ref) {
  nn::ModelConfig cfg = shared_config_from(ref);
  cfg.src_vocab = ref.meta_int("src_vocab");
  cfg.encoder_layers = ref.meta_int("encoder_layers");
  cfg.share_embeddings = ref.meta_bool("share_embeddings");
  cfg.tie_output = ref.meta_bool("tie_output");
  return cfg;
}

// src: (B,S), tgt_in, tgt_out: (B,T) int64 -> logits (B,T,V), loss, every parameter gradient.
void run_seq2seq_case(const std::string& case_name, Dtype dtype) {
  const Reference ref(case_name);
  const nn::ModelConfig cfg = config_from(ref);
  Generator gen(0);  // initial weights are overwritten by the reference's
  nn::Seq2SeqTransformer model(cfg, gen, dtype);
  load_weights(model, ref);

  const Tensor& src = ref.tensor("src");          // (B,S), row 1 padded
  const Tensor& tgt_in = ref.tensor("tgt_in");    // (B,T), BOS first
  const Tensor& tgt_out = ref.tensor("tgt_out");  // (B,T), pad where the loss ignores it
  const Tensor logits = model.forward(src, tgt_in);  // (B,T,V)
  const std::int64_t V = logits.size(-1);
  const Tensor loss = cross_entropy(reshape(logits, {-1, V}), reshape(tgt_out, {-1}), cfg.pad_id,
                                    ref.meta_double("label_smoothing"));  // 0-d
  loss.backward();

  Comparison cmp(ref, dtype);
  cmp.check("logits", logits);
  cmp.check("loss", loss);
  cmp.check_parameter_grads(model);
  cmp.require_all_grads_checked();
  cmp.report();
}

TEST_CASE("Seq2SeqTransformer pre-LN with tied embeddings matches PyTorch logits loss and gradients",
          "[reference][model]") {
  for (Dtype dtype : kDtypes) run_seq2seq_case("seq2seq_pre_ln", dtype);
}

TEST_CASE("Seq2SeqTransformer post-LN with GELU matches PyTorch logits loss and gradients", "[reference][model]") {
  for (Dtype dtype : kDtypes) run_seq2seq_case("seq2seq_post_ln", dtype);
}

// ---- DecoderOnlyTransformer vs pre-LN causal blocks on torch's multi-head attention ----

// The decoder-only config: one vocabulary (src_vocab 0), the LM head always tied.
nn::ModelConfig decoder_only_config_from(const Reference& ref) {
  nn::ModelConfig cfg = shared_config_from(ref);
  cfg.arch = nn::parse_arch(ref.meta("arch"));
  INFO(ref.name << ": metadata arch " << ref.meta("arch"));
  REQUIRE(cfg.arch == nn::Arch::DecoderOnly);
  cfg.bos_id = ref.meta_int("bos_id");
  return cfg;
}

// tgt_in, tgt_out: (B,T) int64 (make_lm_batch's rows) -> logits (B,T,V), loss, every parameter gradient.
void run_decoder_only_case(const std::string& case_name, Dtype dtype) {
  const Reference ref(case_name);
  const nn::ModelConfig cfg = decoder_only_config_from(ref);
  Generator gen(0);  // initial weights are overwritten by the reference's
  nn::DecoderOnlyTransformer model(cfg, gen, dtype);
  Comparison cmp(ref, dtype);
  cmp.require_names_every_parameter(model);
  load_weights(model, ref);

  const Tensor& tgt_in = ref.tensor("tgt_in");    // (B,T), <s> x.., rows 1 and 2 padded at the end
  const Tensor& tgt_out = ref.tensor("tgt_out");  // (B,T), x.. </s>, pad where the loss ignores it
  const Tensor logits = model.forward(Tensor(), tgt_in);  // (B,T,V); no source
  const std::int64_t V = logits.size(-1);
  const Tensor loss = cross_entropy(reshape(logits, {-1, V}), reshape(tgt_out, {-1}), cfg.pad_id,
                                    ref.meta_double("label_smoothing"));  // 0-d
  loss.backward();

  cmp.check("logits", logits);
  cmp.check("loss", loss);
  cmp.check_parameter_grads(model);
  cmp.require_all_grads_checked();
  cmp.report();
}

TEST_CASE("DecoderOnlyTransformer pre-LN with GQA and a tied LM head matches PyTorch logits loss and gradients",
          "[reference][model]") {
  for (Dtype dtype : kDtypes) run_decoder_only_case("decoder_only_lm", dtype);
}

// ---- RnnSeq2Seq vs tools/torch_model.py's RnnSeq2Seq on torch.nn.LSTM / GRU ----

// The recurrent model's config: only the fields it reads (the Transformer's keep their defaults).
nn::ModelConfig rnn_config_from(const Reference& ref) {
  nn::ModelConfig cfg;
  cfg.arch = nn::parse_arch(ref.meta("arch"));
  INFO(ref.name << ": metadata arch " << ref.meta("arch"));
  REQUIRE(cfg.arch == nn::Arch::Rnn);
  cfg.src_vocab = ref.meta_int("src_vocab");
  cfg.tgt_vocab = ref.meta_int("tgt_vocab");
  cfg.d_model = ref.meta_int("d_model");
  cfg.encoder_layers = ref.meta_int("encoder_layers");
  cfg.decoder_layers = ref.meta_int("decoder_layers");
  cfg.dropout = ref.meta_double("dropout");
  cfg.max_len = ref.meta_int("max_len");
  cfg.pad_id = ref.meta_int("pad_id");
  cfg.bos_id = ref.meta_int("bos_id");
  cfg.rnn_cell = nn::parse_cell_kind(ref.meta("rnn_cell"));
  cfg.rnn_attention = nn::parse_rnn_attention(ref.meta("rnn_attention"));
  return cfg;
}

// src (B,S), three rows of different lengths; tgt_in, tgt_out (B,T) -> logits (B,T,V), loss, every
// parameter gradient, through the encoder's two directions and T decoder steps.
void run_rnn_seq2seq_case(const std::string& case_name, Dtype dtype) {
  const Reference ref(case_name);
  const nn::ModelConfig cfg = rnn_config_from(ref);
  Generator gen(0);  // initial weights are overwritten by the reference's
  const std::unique_ptr<nn::Model> model = nn::make_model(cfg, gen, dtype);  // an RnnSeq2Seq
  Comparison cmp(ref, dtype);
  cmp.require_names_every_parameter(*model);
  load_weights(*model, ref);

  const Tensor& src = ref.tensor("src");          // (B,S), rows 1 and 2 padded
  const Tensor& tgt_in = ref.tensor("tgt_in");    // (B,T), <s> y, rows 1 and 2 padded
  const Tensor& tgt_out = ref.tensor("tgt_out");  // (B,T), y </s>, pad where the loss ignores it
  const Tensor logits = model->forward(src, tgt_in);  // (B,T,V)
  const std::int64_t V = logits.size(-1);
  const Tensor loss = cross_entropy(reshape(logits, {-1, V}), reshape(tgt_out, {-1}), cfg.pad_id,
                                    ref.meta_double("label_smoothing"));  // 0-d
  loss.backward();

  cmp.check("logits", logits);
  cmp.check("loss", loss);
  cmp.check_parameter_grads(*model);
  cmp.require_all_grads_checked();
  cmp.report();
}

TEST_CASE("RnnSeq2Seq LSTM with additive attention matches PyTorch logits loss and gradients",
          "[reference][recurrent][model]") {
  for (Dtype dtype : kDtypes) run_rnn_seq2seq_case("rnn_seq2seq_additive", dtype);
}

TEST_CASE("RnnSeq2Seq GRU with dot attention matches PyTorch logits loss and gradients",
          "[reference][recurrent][model]") {
  for (Dtype dtype : kDtypes) run_rnn_seq2seq_case("rnn_seq2seq_dot", dtype);
}

TEST_CASE("RnnSeq2Seq LSTM with general attention matches PyTorch logits loss and gradients",
          "[reference][recurrent][model]") {
  for (Dtype dtype : kDtypes) run_rnn_seq2seq_case("rnn_seq2seq_general", dtype);
}

TEST_CASE("RnnSeq2Seq LSTM without attention matches PyTorch logits loss and gradients",
          "[reference][recurrent][model]") {
  for (Dtype dtype : kDtypes) run_rnn_seq2seq_case("rnn_seq2seq_none", dtype);
}

// The comparison itself must be able to fail: one weight of the model changed by 1% (the size of
// a small bug, e.g. a wrong epsilon or scale in one place) must be caught by the float32 tolerance.
TEST_CASE("Reference comparison detects a perturbed weight", "[reference][model]") {
  const Reference ref("seq2seq_pre_ln");
  Generator gen(0);
  nn::Seq2SeqTransformer model(config_from(ref), gen, Dtype::Float32);
  load_weights(model, ref);
  {
    NoGradGuard no_grad;
    Tensor w = (*model.decoder->layers)[1].ffn->fc2->weight;  // (D,F)
    w.set({0, 0}, w.at({0, 0}) * (1 + 1e-2));
  }
  const Tensor logits = model.forward(ref.tensor("src"), ref.tensor("tgt_in"));
  const double err = test::max_rel_diff(logits, ref.tensor("logits"), kFloorFraction * max_abs(ref.tensor("logits")));
  INFO("relative error of the perturbed model's logits: " << err);
  CHECK(err > kFloat32RelTol);
}

}  // namespace
