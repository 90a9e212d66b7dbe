// Per-layer weight and gradient norms (train/norms_by_layer.h): which layer a parameter belongs
// to, the norms against a hand computation, and the layer_norms.tsv a training run writes at
// every log step (what the explorer's "over training" page draws).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "run_util.h"
#include "test_util.h"
#include "train/config.h"
#include "train/norms_by_layer.h"
#include "train/trainer.h"

using namespace sf;
using namespace sf::test;

TEST_CASE("layer_of cuts a parameter name after its layer index", "[training]") {
  CHECK(train::layer_of("encoder.layers.0.self_attn.q_proj.weight") == "encoder.layers.0");
  CHECK(train::layer_of("decoder.layers.11.norm3.bias") == "decoder.layers.11");
  CHECK(train::layer_of("src_embedding.weight") == "src_embedding");
  CHECK(train::layer_of("decoder.norm.weight") == "decoder");
  CHECK(train::layer_of("bias") == "bias");
}

TEST_CASE("norms_by_layer: the L2 norm of each layer's parameters and of their gradients", "[training]") {
  using V = std::vector<double>;
  Tensor a = from_vector(V{3.0, 4.0}, {2});  // layer x.layers.0
  Tensor b = from_vector(V{12.0}, {1});      // the same layer
  Tensor c = from_vector(V{1.0, 1.0}, {2});  // layer emb, no gradient
  a.impl()->grad = from_vector(V{0.0, 2.0}, {2}).impl_ptr();
  b.impl()->grad = from_vector(V{1.0}, {1}).impl_ptr();
  const nn::NamedParameters params = {{"x.layers.0.w", a}, {"emb.weight", c}, {"x.layers.0.b", b}};
  const auto norms = train::norms_by_layer(params);
  REQUIRE(norms.size() == 2);
  CHECK(norms[0].layer == "x.layers.0");
  CHECK(norms[0].weight_norm == Approx(13.0));            // sqrt(9 + 16 + 144)
  CHECK(norms[0].grad_norm == Approx(std::sqrt(5.0)));    // sqrt(4 + 1)
  CHECK(norms[1].layer == "emb");
  CHECK(norms[1].weight_norm == Approx(std::sqrt(2.0)));
  CHECK(norms[1].grad_norm == 0.0);
}

TEST_CASE("training writes layer_norms.tsv: every layer at every log step", "[training]") {
  TempDir tmp;
  const std::string run_dir = (tmp.path / "run").string();
  const auto overrides = small_reverse_run(tmp, run_dir, {"train.max_steps=10", "train.valid_every=10"});
  REQUIRE(train::train(train::load_config(kReverseConfig, overrides), train::TrainOptions{}) == 0);
  std::ifstream in(run_dir + "/layer_norms.tsv");
  REQUIRE(in);
  std::string line;
  std::getline(in, line);
  CHECK(line == train::LayerNormsFile::kHeader);
  std::set<std::string> steps, layers;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string step, layer;
    double weight = -1, grad = -1;
    row >> step >> layer >> weight >> grad;
    steps.insert(step);
    layers.insert(layer);
    CHECK(weight > 0);
    CHECK(grad > 0);  // every layer of this model gets a gradient
    CHECK(std::isfinite(grad));
  }
  CHECK(steps == std::set<std::string>{"1", "5", "10"});  // the first step, then every train.log_every = 5
  CHECK(layers.count("encoder.layers.0") == 1);
  CHECK(layers.count("decoder.layers.0") == 1);
}
