// The lecture's claims as demos (train/lessons/): each claim asserted on the numbers the demo's
// compute function returns (the numbers `scratchformer demo NAME` prints), every demo of this
// file run end to end into a temporary folder (its SVG well formed), the registry, and the
// command line (unknown names, --out that is not an .svg file). Also model.positional = none:
// the encoder-only, decoder-only and encoder-decoder models build and run without any position
// module, and a trained step of an encoder-only model keeps its encoder permutation-equivariant.
// (rope, gqa and pooling: tests/test_demos_rope_gqa_pooling.cpp.)
//
// Letters: B batch, S sequence length, D d_model, V vocabulary.
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/ops.h"
#include "nn/encoder_only.h"
#include "nn/model.h"
#include "run_util.h"
#include "test_util.h"
#include "train/lessons/demo.h"
#include "train/lessons/demo_collapse.h"
#include "train/lessons/demo_label_smoothing.h"
#include "train/lessons/demo_lookup.h"
#include "train/lessons/demo_permutation.h"
#include "train/lessons/demo_scaling.h"
#include "train/optim/optim.h"

using namespace sf;
using namespace sf::lessons;
using Catch::Contains;
using sf::test::TempDir;

namespace {

// Without positions f(P x) and P f(x) are the same float64 sums in another order (~1e-16 per op);
// a real dependence on position moves O(1) outputs by 1e-2 or more. Between the two:
constexpr double kEquivariantF64 = 1e-12;  // as tests/test_util.h's kFloat64Tol
constexpr double kEquivariantF32 = 1e-5;   // float32 rounding, as kFloat32Tol
constexpr double kBrokenAtLeast = 1e-2;
// The same float64 formula computed two ways on O(1) values.
constexpr double kSameTol = 1e-12;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs the demo `name` with its SVG in `dir`: status 0 (the claim held), the SVG well formed
// (an <svg> element closed at the end), the path printed.
void run_demo_end_to_end(const std::string& name, const TempDir& dir) {
  const Demo* demo = find_demo(name);
  REQUIRE(demo != nullptr);
  DemoOptions options;
  options.out = dir / (name + ".svg");
  std::ostringstream out;
  CHECK(demo->run(options, out) == 0);
  INFO(out.str());
  CHECK_THAT(out.str(), Contains("claim holds / 结论成立"));
  CHECK_THAT(out.str(), Contains(options.out));
  std::string svg = read_all(options.out);
  while (!svg.empty() && std::isspace(static_cast<unsigned char>(svg.back()))) svg.pop_back();
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("<svg") < 100);
  CHECK(svg.size() > 6);
  CHECK(svg.substr(svg.size() - 6) == "</svg>");
}

// The tiny encoder-only masked-LM model: D 16, H 2, d_ff 32, 2 layers, V 12 (pad 0), float64,
// no dropout, positions as `positional` says.
nn::ModelConfig tiny_config(nn::Arch arch, const std::string& positional) {
  nn::ModelConfig c;
  c.arch = arch;
  c.src_vocab = c.tgt_vocab = 12;
  c.d_model = 16;
  c.n_heads = 2;
  c.d_ff = 32;
  c.encoder_layers = c.decoder_layers = 2;
  c.dropout = 0.0;
  c.max_len = 16;
  c.pad_id = 0;
  c.positional = nn::parse_positional(positional);
  return c;
}

}  // namespace

// ---- the registry and the command line ---------------------------------------------------

TEST_CASE("demo registry lists every demo in course order with a one-line claim", "[demo]") {
  std::vector<std::string> names;
  for (const Demo& d : demos()) {
    names.push_back(d.name);
    CHECK(!d.claim.empty());
    CHECK(d.claim.find('\n') == std::string::npos);
    CHECK(d.run);
    CHECK(d.report);
    CHECK(find_demo(d.name) == &d);
  }
  CHECK(names == std::vector<std::string>{"path-length", "parallel", "bottleneck", "alignment", "autograd", "worked-example",
                                          "positions", "masks", "permutation", "collapse", "scaling", "lookup", "rope", "gqa",
                                          "crossover", "extrapolation", "kv-bandwidth", "attribution", "pooling",
                                          "label-smoothing", "schedule"});
  CHECK(find_demo("label_smoothing") == nullptr);
  CHECK(demo_svg_path({}, "lookup") == "demo-lookup.svg");
}

TEST_CASE("demo --out must be an .svg file, not a directory", "[demo][errors]") {
  TempDir dir;
  CHECK_THROWS_WITH(check_demo_svg_path(dir.path.string()), Contains("is a directory"));
  CHECK_THROWS_WITH(check_demo_svg_path(dir / "picture.png"), Contains("does not end in .svg"));
  CHECK_NOTHROW(check_demo_svg_path(dir / "picture.svg"));
}

TEST_CASE("scratchformer demo: list, unknown names and bad --out are one-line errors", "[demo][cli][errors]") {
  const test::CliResult list = test::run_cli(std::vector<std::string>{"demo"});
  CHECK(list.status == 0);
  for (const Demo& d : demos()) CHECK_THAT(list.out, Contains(d.name) && Contains(d.claim));
  const test::CliResult help = test::run_cli(std::vector<std::string>{"demo", "--help"});
  CHECK(help.status == 0);
  CHECK_THAT(help.out, Contains("label-smoothing") && Contains("--out") && Contains("--seed"));
  test::check_one_line_error(test::run_cli(std::vector<std::string>{"demo", "nope"}),
                             {"unknown demo 'nope'", "autograd, worked-example, positions, masks, permutation, collapse"});
  test::check_one_line_error(test::run_cli(std::vector<std::string>{"demo", "scaling", "--text", "hallo"}),
                             {"--text is read by worked-example only", "hallo"});
  test::check_one_line_error(test::run_cli(std::vector<std::string>{"demo", "worked-example", "--text", "a b c d e f g h i j k l m"}),
                             {"1 to 12 words", "got 13"});
  TempDir dir;
  test::check_one_line_error(test::run_cli(std::vector<std::string>{"demo", "lookup", "--out", dir.path.string()}),
                             {"is a directory"});
  test::check_one_line_error(test::run_cli(std::vector<std::string>{"demo", "lookup", "--out", dir / "x.png"}),
                             {"does not end in .svg"});
  const test::CliResult ok = test::run_cli(std::vector<std::string>{"demo", "lookup", "--out", dir / "sub/l.svg"});
  CHECK(ok.status == 0);
  CHECK(std::filesystem::exists(dir / "sub/l.svg"));
}

TEST_CASE("demos autograd permutation collapse scaling lookup label-smoothing run end to end", "[demo][plots]") {
  TempDir dir;
  for (const char* name : {"autograd", "permutation", "collapse", "scaling", "lookup", "label-smoothing"}) {
    INFO(name);
    run_demo_end_to_end(name, dir);
  }
}

// ---- permutation and model.positional = none ---------------------------------------------

TEST_CASE("demo permutation: attention without positions is permutation-equivariant, with them not",
          "[demo][attention][positional]") {
  const PermutationResult r = compute_permutation(0);
  for (std::size_t i = 0; i < r.permutation.size(); ++i) CHECK(r.permutation[i] != static_cast<std::int64_t>(i));
  REQUIRE(r.cases.size() == 7);
  for (const PermutationCase& c : r.cases) {
    INFO(c.module << ", " << c.positions << ", " << c.dtype << ": " << c.max_diff);
    CHECK(c.output_scale > 0.1);  // outputs are O(1): the differences mean something
    if (c.positions_used())
      CHECK(c.max_diff > kBrokenAtLeast);
    else
      CHECK(c.max_diff < (c.dtype == "float32" ? kEquivariantF32 : kEquivariantF64));
  }
}

TEST_CASE("positional none: every architecture builds with no position module and runs", "[model][positional]") {
  for (nn::Arch arch : {nn::Arch::EncoderDecoder, nn::Arch::DecoderOnly, nn::Arch::EncoderOnly}) {
    INFO(nn::arch_name(arch));
    Generator gen(1);
    const auto model = nn::make_model(tiny_config(arch, "none"), gen, Dtype::Float64);
    for (const auto& [name, p] : model->named_parameters()) CHECK(name.find("pos") != 0);
    const Tensor ids = test::ids({3, 4, 5, 6, 7, 8}, {2, 3});
    const Tensor logits = model->forward(arch == nn::Arch::DecoderOnly ? Tensor() : ids, ids);  // decoder-only: no src
    CHECK(logits.size(0) == 2);
    for (double v : logits.to_vector<double>()) CHECK(std::isfinite(v));
  }
  CHECK(std::string(nn::positional_name(nn::parse_positional("none"))) == "none");
  CHECK_THROWS_WITH(nn::parse_positional("nope"), Contains("\"none\""));
}

TEST_CASE("positional none: a trained encoder-only model's encoder stays permutation-equivariant",
          "[model][positional][encoder]") {
  Generator gen(3);
  nn::EncoderOnlyTransformer model(tiny_config(nn::Arch::EncoderOnly, "none"), gen, Dtype::Float64);
  // Row 1 ends with two pads; p permutes positions 0..3 and leaves the pads where they are.
  const Tensor ids = test::ids({3, 4, 5, 6, 7, 8, 9, 10, 11, 2, 0, 0}, {2, 6});
  const std::vector<std::int64_t> p{2, 0, 3, 1, 4, 5};
  // One training step of the masked-LM head (targets = the ids, pads ignored): the loss falls.
  model.train();
  train::Adam adam(model.named_parameters());
  const Tensor targets = test::ids({3, 4, 5, 6, 7, 8, 9, 10, 11, 2, -100, -100}, {12});
  auto loss_of = [&] { return cross_entropy(reshape(model.forward(ids, Tensor()), {12, 12}), targets); };
  const Tensor before = loss_of();
  adam.zero_grad();
  before.backward();
  adam.step(1e-2);
  CHECK(loss_of().item() < before.item());
  model.eval();
  const Tensor h = model.encode(ids), h_p = model.encode(permute_rows(ids, p));  // (2,6,D)
  CHECK(permutation_error(h_p, h, p, {0, 1, 2, 3}) < kEquivariantF64);
  // The same model with sinusoidal positions is not equivariant (the control).
  Generator gen2(3);
  nn::EncoderOnlyTransformer sinusoidal(tiny_config(nn::Arch::EncoderOnly, "sinusoidal"), gen2, Dtype::Float64);
  sinusoidal.eval();
  CHECK(permutation_error(sinusoidal.encode(permute_rows(ids, p)), sinusoidal.encode(ids), p, {0, 1, 2, 3}) >
        kBrokenAtLeast);
}

// ---- collapse, scaling, lookup, label smoothing -----------------------------------------

TEST_CASE("demo collapse: two frozen attention layers are one, unless a ReLU sits between", "[demo][attention]") {
  const CollapseResult r = compute_collapse(0);
  CHECK(r.stacked_vs_single < kSameTol);
  CHECK(r.a21_row_sum_error < kSameTol);
  CHECK(r.a21_min >= 0);
  CHECK(r.linearity_defect_linear < kSameTol);
  CHECK(r.fit_residual_linear < kSameTol);
  // With the ReLU: clearly nonlinear, and the best single layer with weights A2 A1 misses it.
  CHECK(r.linearity_defect_relu > 0.05);
  CHECK(r.fit_residual_relu > 0.05);
  CHECK(r.relu_vs_single > kBrokenAtLeast);
  CHECK(collapse_held(r));
}

TEST_CASE("demo scaling: without 1/sqrt(d_k) softmax saturates and the gradient vanishes", "[demo][attention][softmax]") {
  const ScalingResult r = compute_scaling(0);
  REQUIRE(r.rows.size() == 5);
  for (const ScalingRow& row : r.rows) {
    INFO("d_k " << row.d_k);
    CHECK(row.var_raw / row.d_k == Approx(1.0).margin(0.5));  // var(q.k) ~ d_k
    CHECK(row.var_scaled == Approx(1.0).margin(0.5));         // ~ 1 once scaled
    CHECK(row.entropy_scaled > 0.6 * r.max_entropy);           // spread at every width
  }
  const ScalingRow& widest = r.rows.back();  // d_k 1024
  CHECK(widest.entropy_raw < 0.1 * r.max_entropy);
  CHECK(widest.max_raw > 0.9);
  CHECK(widest.max_scaled < 0.5);
  CHECK(widest.grad_raw < widest.grad_scaled / 10);
  // Saturation grows with d_k: the raw entropy falls from the narrowest to the widest.
  CHECK(r.rows.front().entropy_raw > widest.entropy_raw + 1.0);
  CHECK(scaling_held(r));
}

TEST_CASE("demo lookup: a sharp query returns its value, a blunt one blends, weights are a distribution",
          "[demo][attention]") {
  const LookupResult r = compute_lookup();
  CHECK(r.lookup_error.back() < kSameTol);        // beta 40: the dictionary's answer
  CHECK(r.lookup_error.front() > kBrokenAtLeast);  // beta 1: clearly a blend
  CHECK(r.between_error < kSameTol);               // the midpoint of k1 and k2: (v1 + v2) / 2
  CHECK(r.min_weight >= 0);
  CHECK(r.sum_error < kSameTol);
  CHECK(r.attention_op_diff < kSameTol);
  // q = beta k2 at lambda 0 and beta k1 at lambda 1: the other key gets 1 / (e^beta + 3).
  const double other = 1 / (std::exp(r.beta_mix) + 3);
  CHECK(r.weight_k1.front() == Approx(other).margin(kSameTol));
  CHECK(r.weight_k2.back() == Approx(other).margin(kSameTol));
  CHECK(r.weight_k1.back() == Approx(std::exp(r.beta_mix) * other).margin(kSameTol));
  CHECK(r.queries.back().weights[0] == Approx(0.25));  // the zero query: uniform
  CHECK(lookup_held(r));
}

TEST_CASE("demo label-smoothing: the smoothed loss bottoms out at H(q), the NLL at 0",
          "[demo][loss][label_smoothing]") {
  const LabelSmoothingResult r = compute_label_smoothing();
  // eps / V on every class (autograd/ops_loss.cpp): gold 1 - 0.1 + 0.02, others 0.02.
  REQUIRE(r.target.size() == 5);
  for (std::int64_t j = 0; j < 5; ++j) CHECK(r.target[j] == Approx(j == r.gold ? 0.92 : 0.02).margin(1e-15));
  const double h = -(0.92 * std::log(0.92) + 4 * 0.02 * std::log(0.02));
  CHECK(r.entropy == Approx(h).margin(kSameTol));
  CHECK(r.loss_at_optimum == Approx(h).margin(kSameTol));
  CHECK(r.nll_at_optimum == Approx(-std::log(0.92)).margin(kSameTol));
  CHECK(r.min_gap > -kSameTol);                             // never below H(q)
  CHECK(r.smoothed_run_loss.back() - h < 1e-3);             // and it gets there
  CHECK(r.smoothed_run_p[r.gold] == Approx(0.92).margin(1e-3));
  CHECK(r.nll_run_nll.back() < 0.01);                       // the plain NLL heads for 0
  CHECK(r.nll_run_smoothed.back() > r.smoothed_run_loss.back());  // its logits are bad for the smoothed loss
  CHECK(label_smoothing_held(r));
}

TEST_CASE("demo autograd: backward gives dy/dw = x^T [x w > 0]", "[demo][engine]") {
  TempDir dir;
  DemoOptions options;
  options.out = dir / "a.svg";
  std::ostringstream out;
  CHECK(run_autograd_demo(options, out) == 0);
  CHECK_THAT(out.str(), Contains("dy/dw") && Contains("max |dy/dw - x^T [h > 0]|"));
}
