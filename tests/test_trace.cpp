// Forward hooks on modules (nn/module.h) and trace mode (train/classroom/trace.h, `--trace`).
#include "run_util.h"

#include <cmath>
#include <limits>
#include <map>
#include <regex>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/feed_forward.h"
#include "nn/linear.h"
#include "nn/seq2seq.h"
#include "train/classroom/trace.h"

using namespace sf;
using namespace sf::nn;
using Catch::Matchers::Contains;

namespace {

// Statistics are computed in double from float32 values, here and in tensor_stats, in a
// different order: they agree to double rounding of sums of ~100 terms.
constexpr double kStatsTol = 1e-12;

struct Call {
  std::string path, type;
  Shape shape;
};

// A hook that records every call.
ForwardHook recorder(std::vector<Call>& calls) {
  return [&calls](const Module& m, const std::string& path, const Tensor& out) {
    calls.push_back({path, m.type_name(), out.shape()});
  };
}

// Every module path under `m` (parents first), as register_forward_hook_recursive walks them.
void all_paths(const Module& m, const std::string& path, std::vector<std::pair<std::string, const Module*>>& out) {
  for (const auto& [_, seen] : out)
    if (seen == &m) return;
  out.emplace_back(path, &m);
  for (const auto& [name, child] : m.children()) all_paths(*child, path.empty() ? name : path + "." + name, out);
}

ModelConfig tiny_config() {
  ModelConfig cfg;
  cfg.src_vocab = 11;
  cfg.tgt_vocab = 13;
  cfg.d_model = 8;
  cfg.n_heads = 2;
  cfg.d_ff = 16;
  cfg.encoder_layers = 1;
  cfg.decoder_layers = 2;
  cfg.dropout = 0.0;
  cfg.max_len = 16;
  return cfg;
}

// Independent statistics of a tensor's values (all finite).
void require_stats_of(const train::TensorStats& s, const Tensor& t) {
  const std::vector<double> v = t.detach().to_vector<double>();
  double sum = 0, lo = v.at(0), hi = v.at(0);
  for (double x : v) sum += x, lo = std::min(lo, x), hi = std::max(hi, x);
  const double mean = sum / static_cast<double>(v.size());
  double sq = 0;
  for (double x : v) sq += (x - mean) * (x - mean);
  REQUIRE(s.count == static_cast<std::int64_t>(v.size()));
  REQUIRE(s.nan == 0);
  REQUIRE(s.inf == 0);
  REQUIRE(s.mean == Approx(mean).epsilon(0).margin(kStatsTol));
  REQUIRE(s.std == Approx(std::sqrt(sq / static_cast<double>(v.size()))).epsilon(0).margin(kStatsTol));
  REQUIRE(s.min == lo);
  REQUIRE(s.max == hi);
}

}  // namespace

TEST_CASE("forward hooks fire once per module in forward order with dotted paths and shapes", "[trace][hooks]") {
  Generator gen(3), drop_gen(4);
  FeedForward ffn(4, 6, Activation::ReLU, 0.0, gen, drop_gen);
  std::vector<Call> calls;
  HookHandle handle = ffn.register_forward_hook_recursive(recorder(calls), "ffn");
  REQUIRE(handle.size() == 4);  // ffn, fc1, fc2, dropout
  ffn.forward(randn({2, 3, 4}, gen));  // (B=2, T=3, D=4)
  // Each hook runs as its module's forward returns: children before the parent.
  REQUIRE(calls.size() == 4);
  CHECK(calls[0].path == "ffn.fc1");
  CHECK(calls[0].type == "Linear");
  CHECK(calls[0].shape == Shape{2, 3, 6});
  CHECK(calls[1].path == "ffn.dropout");
  CHECK(calls[1].type == "Dropout");
  CHECK(calls[1].shape == Shape{2, 3, 6});
  CHECK(calls[2].path == "ffn.fc2");
  CHECK(calls[2].shape == Shape{2, 3, 4});
  CHECK(calls[3].path == "ffn");
  CHECK(calls[3].type == "FeedForward");
  CHECK(calls[3].shape == Shape{2, 3, 4});
}

TEST_CASE("forward hooks reach every module of the Seq2Seq model", "[trace][hooks]") {
  Generator gen(5);
  Seq2SeqTransformer model(tiny_config(), gen);
  std::vector<Call> calls;
  HookHandle handle = model.register_forward_hook_recursive(recorder(calls));
  const Tensor src = from_vector<std::int64_t>({4, 5, 6, 7, 8, 9}, {2, 3});  // (B=2, S=3)
  const Tensor tgt = from_vector<std::int64_t>({2, 5, 6, 7, 2, 8, 9, 10}, {2, 4});  // (B=2, T=4)
  model.forward(src, tgt);

  std::map<std::string, int> times;
  for (const Call& c : calls) ++times[c.path];
  std::vector<std::pair<std::string, const Module*>> paths;
  all_paths(model, "", paths);
  for (const auto& [path, m] : paths) {
    INFO("module '" << path << "' (" << m->type_name() << ")");
    if (std::string(m->type_name()) == "ModuleList") CHECK(times.count(path) == 0);  // a container: no forward
    else CHECK(times[path] >= 1);
  }
  CHECK(times["encoder.layers.0.self_attn"] == 1);
  CHECK(times["decoder.layers.1.cross_attn"] == 1);
  CHECK(times["encoder.layers.0.dropout"] == 2);  // one dropout module after both sublayers
  CHECK(times[""] == 1);                          // the model itself, last
  REQUIRE(calls.back().path.empty());
  CHECK(calls.back().shape == Shape{2, 4, 13});  // logits (B,T,V)
  for (const Call& c : calls) {
    if (c.path == "encoder.layers.0.self_attn") CHECK(c.shape == Shape{2, 3, 8});  // (B,S,D)
    if (c.path == "decoder.layers.1.cross_attn.k_proj") CHECK(c.shape == Shape{2, 3, 8});  // keys from memory
    if (c.path == "decoder.layers.1.cross_attn.q_proj") CHECK(c.shape == Shape{2, 4, 8});  // queries from target
  }
}

TEST_CASE("a removed forward hook no longer fires", "[trace][hooks]") {
  Generator gen(6);
  Linear lin(3, 2, gen);
  int a = 0, b = 0;
  HookHandle ha = lin.register_forward_hook([&a](const Module&, const std::string&, const Tensor&) { ++a; });
  HookHandle hb = lin.register_forward_hook([&b](const Module&, const std::string& path, const Tensor&) {
    CHECK(path == "proj");
    ++b;
  }, "proj");
  const Tensor x = randn({4, 3}, gen);
  lin.forward(x);
  REQUIRE((a == 1 && b == 1));
  ha.remove();
  lin.forward(x);
  CHECK(a == 1);  // removed
  CHECK(b == 2);  // the other one stays
  hb.remove();
  hb.remove();  // twice is harmless
  lin.forward(x);
  CHECK(b == 2);

  // a recursive handle removes its hook from every module; a handle may outlive its modules
  HookHandle outlived;
  {
    Generator g(7), d(8);
    FeedForward ffn(2, 3, Activation::GELU, 0.0, g, d);
    std::vector<Call> calls;
    HookHandle all = ffn.register_forward_hook_recursive(recorder(calls));
    all.remove();
    ffn.forward(randn({1, 2}, g));
    CHECK(calls.empty());
    outlived = ffn.register_forward_hook_recursive(recorder(calls));
  }
  outlived.remove();  // the modules are gone: nothing to do, no crash
}

TEST_CASE("tensor_stats gives mean std min max over finite values and counts NaN and Inf", "[trace]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor t = from_vector({1.0, 2.0, nan, 3.0, inf, 4.0, -inf}, {7}, Dtype::Float64);
  const train::TensorStats s = train::tensor_stats(t);
  CHECK(s.count == 7);
  CHECK(s.nan == 1);
  CHECK(s.inf == 2);
  CHECK(s.mean == 2.5);                   // (1 + 2 + 3 + 4) / 4
  CHECK(s.std == Approx(std::sqrt(1.25)).epsilon(0).margin(kStatsTol));  // population: (2.25 + 0.25 + 0.25 + 2.25) / 4
  CHECK(s.min == 1.0);
  CHECK(s.max == 4.0);
  const train::TensorStats none = train::tensor_stats(from_vector({nan, inf}, {2}, Dtype::Float64));
  CHECK(std::isnan(none.mean));
  CHECK(none.nan == 1);
  CHECK(none.inf == 1);
}

TEST_CASE("a module trace records output and gradient statistics that match the tensors", "[trace]") {
  Generator gen(9), drop_gen(10);
  FeedForward ffn(4, 5, Activation::ReLU, 0.0, gen, drop_gen);
  const Tensor x = randn({3, 4}, gen).requires_grad_();  // (N=3, D=4)
  std::map<std::string, Tensor> outputs;  // what each module returned, seen by a second hook
  HookHandle keep = ffn.register_forward_hook_recursive(
      [&outputs](const Module&, const std::string& path, const Tensor& out) { outputs[path] = out; });
  train::ModuleTrace trace(ffn, /*gradients=*/true);
  const Tensor y = ffn.forward(x);  // (3,4)
  const Tensor loss = sum(mul(y, y));  // dL/dy = 2y
  loss.backward();
  trace.stop();
  keep.remove();

  const auto& rows = trace.forward_rows();
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].path == "fc1");
  CHECK(rows[3].path == "(model)");
  CHECK(rows[3].type == "FeedForward");
  CHECK(rows[3].shape == Shape{3, 4});
  for (const auto& r : rows) {
    INFO(r.path);
    require_stats_of(r.stats, outputs.at(r.path == "(model)" ? "" : r.path));
  }

  // backward rows: reverse order, dL/d(output); for the model's output that is 2y
  const auto grads = trace.gradient_rows();
  REQUIRE(grads.size() == 4);
  CHECK(grads[0].path == "(model)");
  CHECK(grads[3].path == "fc1");
  require_stats_of(grads[0].stats, mul(y, 2.0));
  CHECK(grads[3].shape == Shape{3, 5});
  const auto params = trace.parameter_gradient_rows();
  REQUIRE(params.size() == 4);  // fc1.weight, fc1.bias, fc2.weight, fc2.bias
  CHECK(params[0].path == "fc1.weight");
  require_stats_of(params[0].stats, ffn.fc1->weight.grad());

  // the table is aligned: every row as long as the header or shorter, columns in order
  const std::string table = train::format_trace_table("title", rows);
  CHECK_THAT(table, Contains("module"));
  CHECK_THAT(table, Contains("fc1"));
  CHECK_THAT(table, Contains("(3, 5)"));
}

TEST_CASE("a NaN in a weight is counted in the outputs that depend on it", "[trace]") {
  Generator gen(11), drop_gen(12);
  FeedForward ffn(4, 5, Activation::GELU, 0.0, gen, drop_gen);  // GELU(NaN) is NaN (ReLU would make it 0)
  {
    NoGradGuard no_grad;
    ffn.fc1->weight.set({2, 1}, std::numeric_limits<double>::quiet_NaN());  // hidden unit 2 reads input 1
  }
  train::ModuleTrace trace(ffn, false);
  ffn.forward(randn({3, 4}, gen));  // (N=3, D=4)
  trace.stop();
  const auto& rows = trace.forward_rows();
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].path == "fc1");
  CHECK(rows[0].stats.nan == 3);   // column 2 of (3,5): one per row
  CHECK(rows[0].stats.inf == 0);
  CHECK(rows[1].stats.nan == 3);   // the GELU output, as the dropout module returned it
  CHECK(rows[2].path == "fc2");
  CHECK(rows[2].stats.nan == 12);  // every output of fc2 reads hidden unit 2
  const std::string table = train::format_trace_table("t", rows);
  CHECK(std::regex_search(table, std::regex("\nfc2 +Linear +\\(3, 4\\) .* 12 +0\n")));  // nan 12, inf 0
}

// ---- the command line ----------------------------------------------------------------------

namespace {

// tests/test_util.h and tests/run_util.h
using sf::test::CliResult;
using sf::test::one_step_reverse_run;
using sf::test::quoted;
using sf::test::read_file;
using sf::test::run_cli;
using sf::test::TempDir;
using sf::test::train_args;
using sf::test::write_file;

// The shape column of the first row of `path` (a regex) and `type` in a trace table, or "".
std::string find_row(const std::string& text, const std::string& path, const std::string& type) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + std::regex_replace(path, std::regex("\\."), "\\.") + " +" + type +
                                             " +(\\([0-9, ]*\\))")))
    return "";
  return m[1].str();
}

}  // namespace

TEST_CASE("scratchformer train --trace prints forward and backward rows per module", "[trace][cli]") {
  TempDir tmp;
  const CliResult r = run_cli(train_args(one_step_reverse_run(tmp, tmp / "run")) + " --trace", tmp);
  const std::string& err = r.err;
  INFO(err);
  REQUIRE(r.status == 0);
  const std::size_t forward = err.find("trace step 1 forward");
  const std::size_t backward = err.find("trace step 1 backward: dL/d(module output)");
  REQUIRE(forward != std::string::npos);
  REQUIRE(backward != std::string::npos);
  const std::string fwd = err.substr(forward, backward - forward), bwd = err.substr(backward);
  // encoder self-attention: (B,S,32), with B and S those of the source embedding
  const std::string attn = find_row(fwd, "encoder.layers.0.self_attn", "MultiHeadAttention");
  const std::string embed = find_row(fwd, "src_embed", "Embedding");
  REQUIRE(!attn.empty());
  REQUIRE(!embed.empty());
  CHECK(attn == embed);
  CHECK_THAT(attn, Contains(", 32)"));
  CHECK(!find_row(fwd, "decoder.layers.0.cross_attn.out_proj", "Linear").empty());
  CHECK(!find_row(fwd, "\\(model\\)", "Seq2SeqTransformer").empty());
  // the same module in the backward table, with the same shape (a gradient is shaped like its tensor)
  const std::string attn_grad = find_row(bwd, "encoder.layers.0.self_attn", "MultiHeadAttention");
  REQUIRE(!attn_grad.empty());
  CHECK(attn_grad == attn);
  CHECK_THAT(bwd, Contains("encoder.layers.0.self_attn.q_proj.weight"));  // parameter gradients
}

TEST_CASE("scratchformer translate --trace writes the first sentence's trace to a file", "[trace][cli]") {
  TempDir tmp;
  REQUIRE(run_cli(train_args(one_step_reverse_run(tmp, tmp / "run")), tmp).status == 0);
  write_file(tmp / "in.txt", "a b c\nd e\n");
  const CliResult r = run_cli("translate --checkpoint " + quoted(tmp / "run/checkpoint-last.safetensors") + " --input " +
                                  quoted(tmp / "in.txt") + " --beam 1 --trace-steps 2 --trace-file " +
                                  quoted(tmp / "trace.txt"),
                              tmp);
  REQUIRE(r.status == 0);
  const std::string trace = read_file(tmp / "trace.txt");
  INFO(trace);
  const std::size_t step1 = trace.find("decoding step 1");
  REQUIRE(step1 != std::string::npos);
  const std::string encoder = trace.substr(0, step1);
  const std::string attn = find_row(encoder, "encoder.layers.0.self_attn", "MultiHeadAttention");
  REQUIRE(!attn.empty());
  CHECK(std::regex_match(attn, std::regex("\\(1, [0-9]+, 32\\)")));  // one sentence
  // a decoding step: one new position through the decoder
  const std::string dec = find_row(trace.substr(step1), "decoder.layers.0.self_attn", "MultiHeadAttention");
  REQUIRE(!dec.empty());
  CHECK(dec == "(1, 1, 32)");
  // the translations themselves are still written, one per input line
  const std::string& out = r.out;
  CHECK(std::count(out.begin(), out.end(), '\n') == 2);
}
