// Weight and gradient L2 norms per layer (see norms_by_layer.h).
#include "train/norms_by_layer.h"

#include <cctype>
#include <cmath>
#include <iomanip>
#include <map>

#include "train/optim/optim.h"  // squared_norm
#include "train/run_log.h"  // open_table_for_append

namespace sf::train {

std::string layer_of(const std::string& parameter_name) {
  // walk the dotted components; stop after the first one that is a number
  std::size_t begin = 0;
  while (begin < parameter_name.size()) {
    const std::size_t dot = parameter_name.find('.', begin);
    const std::string part = parameter_name.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    const bool number = !part.empty() && std::isdigit(static_cast<unsigned char>(part[0]));
    if (number) return parameter_name.substr(0, dot);
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  return parameter_name.substr(0, parameter_name.find('.'));
}

std::vector<LayerNorms> norms_by_layer(const nn::NamedParameters& params) {
  std::vector<LayerNorms> out;
  std::map<std::string, std::size_t> index;  // layer -> position in out
  std::vector<double> weight_sq, grad_sq;
  for (const auto& [name, p] : params) {
    const std::string layer = layer_of(name);
    auto [it, added] = index.emplace(layer, out.size());
    if (added) out.push_back({layer}), weight_sq.push_back(0), grad_sq.push_back(0);
    weight_sq[it->second] += squared_norm(p);
    if (p.grad().defined()) grad_sq[it->second] += squared_norm(p.grad());
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].weight_norm = std::sqrt(weight_sq[i]);
    out[i].grad_norm = std::sqrt(grad_sq[i]);
  }
  return out;
}

LayerNormsFile::LayerNormsFile(const std::filesystem::path& path, bool enabled) {
  if (enabled) out_ = open_table_for_append(path, kHeader);
}

void LayerNormsFile::rows(std::int64_t step, const std::vector<LayerNorms>& norms) {
  if (!out_.is_open()) return;
  for (const LayerNorms& n : norms)
    out_ << step << '\t' << n.layer << '\t' << std::setprecision(6) << n.weight_norm << '\t' << n.grad_norm << '\n';
  out_ << std::flush;  // the explorer reads the file while training runs
}

}  // namespace sf::train
