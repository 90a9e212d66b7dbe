// The gradient-check suite (train/classroom/gradcheck_suite.h), the one list of the course's
// named float64 gradient checks: `scratchformer gradcheck` prints them as a table, and here each
// entry is one test case carrying the ctest labels of what it checks (`ctest -L attention`,
// `ctest -L matmul`, ...; every one of them also `grad`), so the op and layer tests do not
// repeat these checks. An entry named like an exercise (matmul, linear, softmax, layer_norm,
// embedding, cross_entropy, relu) checks that op's backward.
//   each entry passes (a failure names the entry, the variant and gradcheck's report: the input,
//     the worst index, numeric against analytic); the registry is complete and every entry is
//     tested; the table reports a broken entry (a forgotten gradient path) and a too-strict
//     tolerance as FAIL.
// The `scratchformer gradcheck` command itself: tests/test_classroom.cpp.
#include "test_util.h"
#include "planted_softmax.h"

#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "train/classroom/gradcheck_suite.h"

using Catch::Contains;
using namespace sf;
using namespace sf::train;
using sf::test::count_lines;
using sf::test::SoftmaxMissingTerm;
using sf::test::count_of;

namespace {

// Runs the entry `name` and requires each input of each of its runs to pass.
void require_entry_passes(const std::string& name) {
  INFO("gradcheck entry " << name);
  const GradcheckEntry* e = find_gradcheck(name);
  REQUIRE(e != nullptr);
  const std::vector<GradcheckCase> cases = e->run(GradcheckOptions{});
  REQUIRE_FALSE(cases.empty());
  for (const GradcheckCase& c : cases) {
    INFO(e->name << " (" << c.variant << "): " << c.result.message);
    REQUIRE(c.result.ok);
    REQUIRE_FALSE(c.result.inputs.empty());
    REQUIRE(c.result.inputs.size() == c.input_names.size());
  }
}

// The entries the test cases below run: a new entry needs a test case here (and its labels).
const std::set<std::string> kTestedEntries = {
    "matmul", "softmax", "log_softmax", "relu", "masked_fill", "where", "index_select", "dropout", "elementwise",
    "unary", "reduce", "shape", "attention_tiled", "embedding", "linear", "attention_no_mask", "attention_padding_mask",
    "attention_causal_mask", "attention_alibi", "multi_head", "gqa", "mqa", "relative_attention", "positions",
    "feed_forward", "layer_norm", "rms_norm", "encoder_layer", "decoder_layer", "model", "cross_entropy",
    "label_smoothed_loss", "encoder_only", "decoder_only", "lstm_cell", "additive_attention",
    // the exercise entries of train/classroom/exercise_checks.cpp, run by tests/test_exercises.cpp
    "scaled_dot_product", "masks", "sinusoidal", "rope", "kv_cache", "greedy"};
// The topics `--module` takes besides the entry names.
const std::set<std::string> kTopics = {"ops", "embeddings", "linear", "attention", "positions", "feed-forward",
                                       "norms", "layers", "model", "loss", "decoding"};

}  // namespace

// ---- one test case per entry, in the suite's order -------------------------------------------

TEST_CASE("gradcheck suite matmul passes", "[classroom][grad][matmul][broadcast][views][float32]") {
  require_entry_passes("matmul");
}

TEST_CASE("gradcheck suite softmax passes", "[classroom][grad][softmax][fast_exp][float32]") {
  require_entry_passes("softmax");
}

TEST_CASE("gradcheck suite log_softmax passes", "[classroom][grad][softmax][fast_exp][float32]") {
  require_entry_passes("log_softmax");
}

TEST_CASE("gradcheck suite relu passes", "[classroom][grad][relu][unary]") { require_entry_passes("relu"); }

TEST_CASE("gradcheck suite lstm_cell passes", "[classroom][grad][lstm_cell][recurrent]") { require_entry_passes("lstm_cell"); }

TEST_CASE("gradcheck suite additive_attention passes", "[classroom][grad][additive_attention][recurrent]") {
  require_entry_passes("additive_attention");
}

TEST_CASE("gradcheck suite masked_fill passes", "[classroom][grad][index][mask]") { require_entry_passes("masked_fill"); }

TEST_CASE("gradcheck suite where passes", "[classroom][grad][index][broadcast]") { require_entry_passes("where"); }

TEST_CASE("gradcheck suite index_select passes", "[classroom][grad][index]") { require_entry_passes("index_select"); }

TEST_CASE("gradcheck suite dropout passes", "[classroom][grad][dropout]") { require_entry_passes("dropout"); }

TEST_CASE("gradcheck suite elementwise passes", "[classroom][grad][elementwise][broadcast]") {
  require_entry_passes("elementwise");
}

TEST_CASE("gradcheck suite unary passes", "[classroom][grad][unary]") { require_entry_passes("unary"); }

TEST_CASE("gradcheck suite reduce passes", "[classroom][grad][reduce]") { require_entry_passes("reduce"); }

TEST_CASE("gradcheck suite shape passes", "[classroom][grad][shape][views]") { require_entry_passes("shape"); }

TEST_CASE("gradcheck suite attention_tiled passes", "[classroom][grad][attention][tiled][mask][padding][causal][float32]") {
  require_entry_passes("attention_tiled");
}

TEST_CASE("gradcheck suite embedding passes", "[classroom][grad][embedding][padding]") { require_entry_passes("embedding"); }

TEST_CASE("gradcheck suite linear passes", "[classroom][grad][linear][float32]") { require_entry_passes("linear"); }

TEST_CASE("gradcheck suite attention_no_mask passes on transposed views", "[classroom][grad][attention][views]") {
  require_entry_passes("attention_no_mask");
}

TEST_CASE("gradcheck suite attention_padding_mask passes", "[classroom][grad][attention][mask][padding]") {
  require_entry_passes("attention_padding_mask");
}

TEST_CASE("gradcheck suite attention_causal_mask passes", "[classroom][grad][attention][mask][causal]") {
  require_entry_passes("attention_causal_mask");
}

TEST_CASE("gradcheck suite attention_alibi passes", "[classroom][grad][attention][alibi][causal]") {
  require_entry_passes("attention_alibi");
}

TEST_CASE("gradcheck suite multi_head passes", "[classroom][grad][attention][causal][padding]") {
  require_entry_passes("multi_head");
}

TEST_CASE("gradcheck suite gqa passes", "[classroom][grad][attention][gqa][causal][padding]") {
  require_entry_passes("gqa");
}

TEST_CASE("gradcheck suite mqa passes", "[classroom][grad][attention][gqa][causal][padding]") {
  require_entry_passes("mqa");
}

TEST_CASE("gradcheck suite relative_attention passes with RoPE and ALiBi",
          "[classroom][grad][attention][rope][alibi][gqa][causal]") {
  require_entry_passes("relative_attention");
}

TEST_CASE("gradcheck suite positions passes", "[classroom][grad][positional][sinusoidal][learned][rope]") {
  require_entry_passes("positions");
}

TEST_CASE("gradcheck suite feed_forward passes for ReLU GELU and SwiGLU", "[classroom][grad][feed_forward][relu][dropout]") {
  require_entry_passes("feed_forward");
}

TEST_CASE("gradcheck suite layer_norm passes", "[classroom][grad][norm][layer_norm][float32]") { require_entry_passes("layer_norm"); }

TEST_CASE("gradcheck suite rms_norm passes", "[classroom][grad][norm][rms_norm][float32]") { require_entry_passes("rms_norm"); }

TEST_CASE("gradcheck suite encoder_layer passes", "[classroom][grad][encoder][padding]") {
  require_entry_passes("encoder_layer");
}

TEST_CASE("gradcheck suite decoder_layer passes", "[classroom][grad][decoder][causal][padding]") {
  require_entry_passes("decoder_layer");
}

TEST_CASE("gradcheck suite model passes in fast mode", "[classroom][grad][model]") { require_entry_passes("model"); }

TEST_CASE("gradcheck suite decoder_only passes in fast mode", "[classroom][grad][model][causal]") {
  require_entry_passes("decoder_only");
}

TEST_CASE("gradcheck suite cross_entropy passes", "[classroom][grad][loss][cross_entropy][label_smoothing][fast_exp][float32]") {
  require_entry_passes("cross_entropy");
}

TEST_CASE("gradcheck suite label_smoothed_loss passes", "[classroom][grad][loss][cross_entropy][label_smoothing]") {
  require_entry_passes("label_smoothed_loss");
}

TEST_CASE("gradcheck suite encoder_only passes in fast mode", "[classroom][grad][model][padding]") {
  require_entry_passes("encoder_only");
}

// ---- the registry and the table ---------------------------------------------------------------

TEST_CASE("gradcheck suite covers the course and every entry is tested", "[classroom][grad]") {
  std::set<std::string> names, topics;
  for (const GradcheckEntry& e : gradcheck_suite()) {
    INFO(e.name);
    REQUIRE(names.insert(e.name).second);  // unique
    REQUIRE_FALSE(e.description.empty());
    REQUIRE(e.description.find('\n') == std::string::npos);
    REQUIRE(e.run);
    REQUIRE(find_gradcheck(e.name) == &e);
    topics.insert(e.topic);
  }
  REQUIRE(topics == kTopics);
  REQUIRE(names == kTestedEntries);  // every entry has its test case above
  for (const char* required : {"embedding", "attention_no_mask", "attention_padding_mask", "attention_causal_mask",
                               "multi_head", "gqa", "mqa", "feed_forward", "layer_norm", "rms_norm", "positions",
                               "encoder_layer", "decoder_layer", "model", "label_smoothed_loss",
                               // one per exercise word: --module takes each exercise's own name
                               "matmul", "linear", "softmax", "cross_entropy", "relu"}) {
    INFO(required);
    REQUIRE(names.count(required) == 1);
  }
  REQUIRE(find_gradcheck("no_such_check") == nullptr);
  const std::string list = format_gradcheck_list(gradcheck_suite());
  REQUIRE(count_lines(list) == gradcheck_suite().size());
  for (const GradcheckEntry& e : gradcheck_suite()) REQUIRE_THAT(list, Contains(e.name) && Contains(e.description));
}

TEST_CASE("gradcheck table reports a forgotten gradient path as FAIL", "[classroom][grad][mutation]") {
  // y = x * detach(x): the forward is x^2, but autograd sees only one factor, so the analytic
  // gradient is x instead of 2x, the classic bug of a tensor cut out of the graph.
  const GradcheckEntry broken{
      "broken_square", "test", "x * detach(x): one gradient path forgotten", [](const GradcheckOptions& o) {
        Generator gen(1);
        Tensor x = randn({3}, gen, Dtype::Float64).requires_grad_();
        GradcheckCase c;
        c.input_names = {"x"};
        c.input_shapes = {x.shape()};
        c.result = gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[0].detach()); }, {x}, o);
        return std::vector<GradcheckCase>{c};
      }};
  std::ostringstream out;
  REQUIRE_FALSE(run_gradcheck_table({find_gradcheck("layer_norm"), &broken}, out));
  const std::string table = out.str();
  INFO(table);
  REQUIRE_THAT(table, Contains("broken_square") && Contains("FAIL") && Contains("1 FAILED"));
  REQUIRE_THAT(table, Contains("gradcheck failed for input 0"));  // gradcheck's own message, with the index
  // the correct entry beside it still passes
  const GradcheckEntry& layer_norm = *find_gradcheck("layer_norm");
  REQUIRE(count_of(table, "pass\n") == gradcheck_rows(layer_norm, layer_norm.run(GradcheckOptions{})).size());
  const std::vector<GradcheckRow> rows = gradcheck_rows(broken, broken.run(GradcheckOptions{}));
  REQUIRE(rows.size() == 1);
  REQUIRE_FALSE(rows[0].ok);
  REQUIRE(rows[0].input == "x");
}

TEST_CASE("gradcheck table fails a correct entry under an impossible tolerance", "[classroom][grad][mutation]") {
  // Central differences carry truncation and rounding errors of ~1e-10 here (see the table of
  // `scratchformer gradcheck`); a tolerance of 1e-30 leaves no room for them.
  constexpr double kImpossibleTol = 1e-30;
  GradcheckOptions strict;
  strict.atol = kImpossibleTol;
  strict.rtol = kImpossibleTol;
  std::ostringstream out;
  REQUIRE_FALSE(run_gradcheck_table({find_gradcheck("feed_forward")}, out, strict));
  REQUIRE_THAT(out.str(), Contains("FAIL"));
  std::ostringstream normal;
  REQUIRE(run_gradcheck_table({find_gradcheck("feed_forward")}, normal));
  REQUIRE_THAT(normal.str(), Contains("all passed"));
}


// ---- a run that throws -----------------------------------------------------------------------

TEST_CASE("gradcheck table shows a throwing entry as FAIL with its message and goes on", "[classroom][grad][exercise]") {
  // As in exercise mode: a backward left as a stub throws "exercise: implement ..."; once from
  // the entry itself (before any run), once from inside one run (gradcheck calls backward).
  const GradcheckEntry stub{"stub_entry", "test", "throws before running", [](const GradcheckOptions&) {
                              throw std::runtime_error("exercise: implement Stub::backward (autograd/ops_stub.cpp)");
                              return std::vector<GradcheckCase>{};
                            }};
  const GradcheckEntry stub_run{
      "stub_run", "test", "the second of two runs throws", [](const GradcheckOptions& o) {
        Generator gen(2);
        Tensor x = randn({3}, gen, Dtype::Float64).requires_grad_();
        std::vector<GradcheckCase> cases(2);
        for (GradcheckCase& c : cases) c.input_names = {"x"}, c.input_shapes = {x.shape()};
        cases[0].result = gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[0]); }, {x}, o);
        cases[1] = float32_vs_float64(
            "stubbed", [](const std::vector<Tensor>&) -> Tensor { throw std::runtime_error("exercise: implement Run"); },
            [](const std::vector<Tensor>& in) { return in[0]; }, {"x"}, {x});
        return cases;
      }};
  std::ostringstream out;
  REQUIRE_FALSE(run_gradcheck_table({&stub, &stub_run, find_gradcheck("relu")}, out));
  const std::string table = out.str();
  INFO(table);
  REQUIRE_THAT(table, Contains("stub_entry: exercise: implement Stub::backward (autograd/ops_stub.cpp)"));
  REQUIRE_THAT(table, Contains("stub_run (stubbed, float32 vs float64): threw: exercise: implement Run"));
  // the entry's FAIL row, the stubbed run's two FAIL rows (output, grad x) and nothing else failed
  REQUIRE(count_of(table, "FAIL\n") == 3);
  REQUIRE_THAT(table, Contains("3 FAILED"));
  // the runs after it still ran: stub_run's first run and relu pass
  REQUIRE(count_of(table, "pass\n") == 2);
  REQUIRE(table.find("relu") != std::string::npos);
}

// ---- mutation controls: the suite's own checks catch a deliberately wrong backward -------------

namespace {

// masked_fill with the backward a new user might write: the gradient passes everywhere, the
// filled cells too (forward correct). Inside attention softmax's zeros hide it.
struct LeakyMaskedFill final : Node {
  const char* name() const override { return "LeakyMaskedFill"; }
  static Tensor forward(const Tensor& x, const Tensor& mask, double value) {
    Tensor out;
    {
      NoGradGuard g;
      out = masked_fill(x, mask, value);
    }
    if (any_requires_grad({&x})) connect(std::make_shared<LeakyMaskedFill>(), {&x}, out);
    return out;
  }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {grad_output};  // WRONG on purpose: should be 0 where mask is true
  }
};


}  // namespace

TEST_CASE("masked_fill's check catches a backward that lets gradient through filled cells",
          "[classroom][grad][mutation][index][mask]") {
  const std::vector<GradcheckCase> good = masked_fill_cases(masked_fill, GradcheckOptions{});
  for (const GradcheckCase& c : good) REQUIRE(c.result.ok);
  const std::vector<GradcheckCase> leaky = masked_fill_cases(LeakyMaskedFill::forward, GradcheckOptions{});
  REQUIRE(leaky.size() == good.size());
  for (const GradcheckCase& c : leaky) {
    INFO(c.variant << ": " << c.result.message);
    REQUIRE_FALSE(c.result.ok);
    // a filled cell: numeric gradient 0, analytic = the upstream weight there
    REQUIRE(c.result.inputs[0].numeric_at_worst == 0.0);
    REQUIRE(c.result.inputs[0].analytic_at_worst != 0.0);
  }
}

TEST_CASE("the float32 vs float64 check catches a wrong float32 backward and passes the real one",
          "[classroom][grad][mutation][softmax][float32]") {
  Generator gen(3);
  const Tensor x = randn({3, 37}, gen, Dtype::Float64);
  const GradcheckFn reference = [](const std::vector<Tensor>& t) { return softmax(t[0], -1); };
  const GradcheckCase good = float32_vs_float64("softmax", reference, reference, {"x"}, {x});
  INFO(good.result.message);
  REQUIRE(good.result.ok);
  REQUIRE(good.result.inputs.size() == 2);  // output, grad x
  REQUIRE(good.input_names == std::vector<std::string>{"output", "grad x"});
  REQUIRE(good.result.inputs[1].max_abs_error > 0);  // float32 really differs from float64 a little
  const GradcheckCase bad = float32_vs_float64(
      "softmax missing a term", [](const std::vector<Tensor>& t) { return SoftmaxMissingTerm::forward(t[0]); },
      reference, {"x"}, {x});
  INFO(bad.result.message);
  REQUIRE_FALSE(bad.result.ok);
  REQUIRE(bad.result.inputs[0].ok);  // the forward is right
  REQUIRE_FALSE(bad.result.inputs[1].ok);
  REQUIRE_THAT(bad.result.message, Contains("grad x at index (") && Contains("(float64), got"));
  // shown in the table like any failed run
  const GradcheckEntry entry{"softmax_missing_term", "test", "float32 backward missing a term",
                             [bad](const GradcheckOptions&) { return std::vector<GradcheckCase>{bad}; }};
  std::ostringstream out;
  REQUIRE_FALSE(run_gradcheck_table({&entry}, out));
  REQUIRE_THAT(out.str(), Contains("softmax_missing_term (softmax missing a term, float32 vs float64)") &&
                              Contains("grad x") && Contains("1 FAILED"));
}
