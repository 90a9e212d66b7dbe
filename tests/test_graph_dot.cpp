// The autograd graph as Graphviz DOT (autograd/graph_dot.h, `scratchformer train --dump-graph`).
#include "run_util.h"

#include <filesystem>
#include <regex>
#include <sstream>

#include "autograd/graph_dot.h"
#include "autograd/ops.h"

using namespace sf;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

using sf::test::count_of;  // tests/test_util.h

// Well-formed enough for Graphviz: one digraph, balanced braces and quotes, every statement
// line ends with ';'.
void require_valid_looking_dot(const std::string& dot) {
  REQUIRE(std::regex_search(dot, std::regex("(^|\n)digraph autograd \\{\n")));
  REQUIRE(dot.size() >= 2);
  REQUIRE(dot.substr(dot.size() - 2) == "}\n");
  REQUIRE(count_of(dot, "{") == count_of(dot, "}"));
  std::size_t quotes = 0;  // unescaped ones
  for (std::size_t i = 0; i < dot.size(); ++i) quotes += dot[i] == '"' && (i == 0 || dot[i - 1] != '\\');
  REQUIRE(quotes % 2 == 0);
  std::istringstream lines(dot);
  std::string line;
  bool inside = false;
  while (std::getline(lines, line)) {
    if (line.rfind("digraph", 0) == 0) inside = true;
    else if (line == "}") inside = false;
    else if (inside) {
      INFO(line);
      CHECK(line.back() == ';');
    }
  }
}

}  // namespace

TEST_CASE("write_dot draws one node per op and per parameter with edges from inputs to ops", "[graph]") {
  Generator gen(1);
  Tensor a = randn({2, 3}, gen).requires_grad_();  // (2,3)
  Tensor b = randn({3, 4}, gen).requires_grad_();  // (3,4)
  Tensor c = randn({2, 4}, gen);                   // needs no gradient: not in the graph
  a.set_name("a");
  Tensor y = sum(mul(relu(matmul(a, b)), c));  // MatMul -> Relu -> Mul -> Sum
  std::ostringstream out;
  const GraphDotCounts counts = write_dot(y, out, {{"layer.weight", b}});
  const std::string dot = out.str();
  INFO(dot);
  require_valid_looking_dot(dot);
  CHECK(counts.ops == 4);
  CHECK(counts.leaves == 2);
  CHECK(counts.edges == 5);  // a, b -> MatMul -> Relu -> Mul -> Sum (c has no edge)
  CHECK(count_of(dot, " -> ") == 5);
  CHECK(count_of(dot, "shape=ellipse") == 4);
  CHECK(count_of(dot, "shape=box") == 2);
  // ops numbered in the order forward made them, leaves by name ("a" < "layer.weight")
  CHECK_THAT(dot, Contains("n0 [shape=ellipse, label=\"MatMul\\n(2, 4) float32\"]"));
  CHECK_THAT(dot, Contains("n1 [shape=ellipse, label=\"Relu\\n(2, 4) float32\"]"));
  CHECK_THAT(dot, Contains("n2 [shape=ellipse, label=\"Mul\\n(2, 4) float32\"]"));
  CHECK_THAT(dot, Contains("n3 [shape=ellipse, label=\"Sum\\n() float32\", style=filled"));  // the root, highlighted
  CHECK_THAT(dot, Contains("p0 [shape=box, style=filled, fillcolor=lightblue, label=\"a\\n(2, 3) float32\"]"));
  CHECK_THAT(dot, Contains("label=\"layer.weight\\n(3, 4) float32\""));  // named by `names`
  for (const char* edge : {"p0 -> n0;", "p1 -> n0;", "n0 -> n1;", "n1 -> n2;", "n2 -> n3;"}) CHECK_THAT(dot, Contains(edge));
}

TEST_CASE("write_dot draws a parameter used twice once with two edges", "[graph]") {
  Generator gen(2);
  Tensor w = randn({3}, gen).requires_grad_();
  Tensor y = sum(add(mul(w, w), w));  // w used three times: three AccumulateGrad nodes, one leaf
  std::ostringstream out;
  const GraphDotCounts counts = write_dot(y, out, {{"w", w}});
  const std::string dot = out.str();
  INFO(dot);
  require_valid_looking_dot(dot);
  CHECK(counts.leaves == 1);
  CHECK(counts.ops == 3);  // Mul, Add, Sum
  CHECK(count_of(dot, "p0 -> n0;") == 2);  // w * w
  CHECK(count_of(dot, "p0 -> n1;") == 1);  // ... + w
  CHECK(counts.edges == 5);
}

TEST_CASE("write_dot still draws the graph after backward freed the saved tensors", "[graph]") {
  Generator gen(3);
  Tensor x = randn({2, 5}, gen).requires_grad_();
  Tensor y = sum(softmax(x, -1));
  std::ostringstream before, after;
  write_dot(y, before, {{"x", x}});
  y.backward();
  write_dot(y, after, {{"x", x}});
  CHECK(before.str() == after.str());
  CHECK_THAT(after.str(), Contains("Softmax"));
}

TEST_CASE("scratchformer train --dump-graph writes the step's graph as DOT", "[graph][cli]") {
  const sf::test::TempDir tmp;
  const sf::test::CliResult r = sf::test::run_cli(
      sf::test::train_args(sf::test::one_step_reverse_run(tmp, tmp / "run")) + " --dump-graph " +
          sf::test::quoted(tmp / "step.dot"),
      tmp);
  const std::string log = r.out + r.err, dot = sf::test::read_file(tmp / "step.dot");
  INFO(log);
  REQUIRE(r.status == 0);
  require_valid_looking_dot(dot);
  CHECK_THAT(dot, Contains("label=\"CrossEntropy\\n() float32\""));  // the loss, a scalar
  CHECK_THAT(dot, Contains("label=\"MatMul\\n"));
  CHECK_THAT(dot, Contains("label=\"encoder.layers.0.self_attn.q_proj.weight\\n(32, 32) float32\""));
  CHECK_THAT(log, Contains("graph: wrote " + tmp / "step.dot"));
  // rendered when Graphviz is installed, otherwise the command to do it is printed
  CHECK_THAT(log, Contains(std::filesystem::exists(tmp / "step.svg") ? "graph: rendered" : "dot -Tsvg"));
}
