// The autograd graph as Graphviz DOT (autograd/graph_dot.h, `scratchformer train --dump-graph`).
#include "test_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <unistd.h>

#include "autograd/graph_dot.h"
#include "autograd/ops.h"

using namespace sf;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

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
  namespace fs = std::filesystem;
  const std::string source = SCRATCHFORMER_SOURCE_DIR;
  const fs::path dir = fs::temp_directory_path() / ("sf-graph-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto head = [](const std::string& from, const fs::path& to, int n) {
    std::ifstream in(from);
    std::ofstream out(to);
    std::string line;
    for (int i = 0; i < n && std::getline(in, line); ++i) out << line << "\n";
  };
  const std::string data = source + "/data/corpora/reverse/";
  for (const char* f : {"train.src", "train.tgt"}) head(data + f, dir / f, 120);
  for (const char* f : {"valid.src", "valid.tgt"}) head(data + f, dir / f, 4);
  std::string cmd = std::string("'") + SCRATCHFORMER_BINARY + "' train --config '" + source + "/configs/reverse.toml'";
  for (const std::string& o :
       {"run.dir=" + (dir / "run").string(), "data.train_src=" + (dir / "train.src").string(),
        "data.train_tgt=" + (dir / "train.tgt").string(), "data.valid_src=" + (dir / "valid.src").string(),
        "data.valid_tgt=" + (dir / "valid.tgt").string(), std::string("data.test_src=\"\""),
        std::string("data.test_tgt=\"\""), std::string("data.batch_tokens=256"), std::string("model.d_model=32"),
        std::string("model.d_ff=64"), std::string("model.encoder_layers=1"), std::string("model.decoder_layers=1"),
        std::string("run.threads=1"), std::string("train.max_steps=1")})
    cmd += " --set '" + o + "'";
  cmd += " --dump-graph '" + (dir / "step.dot").string() + "' >'" + (dir / "out.txt").string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream log_in(dir / "out.txt"), dot_in(dir / "step.dot");
  std::stringstream log, dot;
  log << log_in.rdbuf();
  dot << dot_in.rdbuf();
  INFO(log.str());
  REQUIRE(rc == 0);
  require_valid_looking_dot(dot.str());
  CHECK_THAT(dot.str(), Contains("label=\"CrossEntropy\\n() float32\""));  // the loss, a scalar
  CHECK_THAT(dot.str(), Contains("label=\"MatMul\\n"));
  CHECK_THAT(dot.str(), Contains("label=\"encoder.layers.0.self_attn.q_proj.weight\\n(32, 32) float32\""));
  CHECK_THAT(log.str(), Contains("graph: wrote " + (dir / "step.dot").string()));
  // rendered when Graphviz is installed, otherwise the command to do it is printed
  CHECK_THAT(log.str(), Contains(fs::exists(dir / "step.svg") ? "graph: rendered" : "dot -Tsvg"));
  fs::remove_all(dir);
}
