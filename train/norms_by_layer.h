// Weight and gradient sizes layer by layer, for the explorer's "over training" page: at every
// log step the trainer appends one row per layer to the run's layer_norms.tsv,
//
//   step  layer             weight_norm  grad_norm
//   100   encoder.layers.0  18.31        0.2104
//
// where a layer's norm is the L2 norm of all its parameters as one vector (and grad_norm that of
// their gradients, before clipping: the same gradients metrics.tsv's grad_norm sums over all
// layers). A post-LN stack shows its gradients shrinking with depth, a pre-LN one does not.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nn/module.h"

namespace sf::train {

// The layer a parameter belongs to: its dotted path up to the first number (the index in a
// list of layers), or its first component when there is none.
//   "encoder.layers.0.self_attn.q_proj.weight" -> "encoder.layers.0"
//   "src_embedding.weight"                     -> "src_embedding"
//   "decoder.norm.weight"                      -> "decoder"
std::string layer_of(const std::string& parameter_name);

struct LayerNorms {
  std::string layer;
  double weight_norm = 0;
  double grad_norm = 0;  // 0 when no parameter of the layer has a gradient
};

// One entry per layer, in the order the layers' first parameters come in named_parameters().
std::vector<LayerNorms> norms_by_layer(const nn::NamedParameters& params);

// layer_norms.tsv: appends rows (writing the header into a new or empty file); enabled false
// (data-parallel ranks other than 0) writes nothing.
class LayerNormsFile {
 public:
  static constexpr const char* kHeader = "step\tlayer\tweight_norm\tgrad_norm";
  explicit LayerNormsFile(const std::filesystem::path& path, bool enabled = true);
  void rows(std::int64_t step, const std::vector<LayerNorms>& norms);

 private:
  std::ofstream out_;
};

}  // namespace sf::train
