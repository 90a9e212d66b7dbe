// Checkpoint averaging (see checkpoint_average.h): read each checkpoint once, check it against the
// first, add its weights into float64 sums, and write sums / K with the first one's metadata.
#include "train/checkpoint/checkpoint_average.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "train/checkpoint/checkpoint.h"
#include "train/config.h"
#include "train/checkpoint/safetensors.h"
#include "train/setup.h"

namespace sf::train {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOptimizerPrefix = "optimizer.";  // checkpoint.h: the optimizer's state
constexpr const char* kDifferentModels = " (only checkpoints of one model can be averaged)";
// [data] keys that decide what the embedding rows mean, compared besides every [model] key.
const std::vector<std::string> kVocabularyKeys = {"data.task", "data.labels", "data.tokenizer_vocab_size",
                                                  "data.tokenizer_type", "data.joint_tokenizer"};

using Settings = std::vector<std::pair<std::string, std::string>>;  // ("model.d_model", "256"), ...

// One input checkpoint: its weights (the optimizer's state dropped) and what identifies its model.
struct Input {
  std::string path;
  std::map<std::string, Tensor> weights;        // name -> tensor
  std::vector<std::string> order;               // weight names in the file's order
  std::map<std::string, std::string> metadata;  // the file's, as it is
  Settings settings;                            // the model config (model_settings)
  std::int64_t step = 0;                        // training steps behind the weights
};

// The settings that must agree for two checkpoints' weights to mean the same: every [model] key and
// kVocabularyKeys of the stored config, as the effective config writes them, and the vocabulary sizes.
Settings model_settings(const Input& in) {
  const Config config = config_from_string(metadata_value(in.metadata, "config", in.path), in.path);
  Settings out;
  std::istringstream lines(to_toml(config));
  std::string line, section;
  while (std::getline(lines, line)) {
    if (line.size() > 2 && line.front() == '[') section = line.substr(1, line.size() - 2);
    const auto eq = line.find(" = ");
    if (line.empty() || line.front() == '#' || eq == std::string::npos) continue;
    const std::string key = section + "." + line.substr(0, eq);
    if (section == "model" || std::find(kVocabularyKeys.begin(), kVocabularyKeys.end(), key) != kVocabularyKeys.end())
      out.emplace_back(key, line.substr(eq + 3));
  }
  for (const char* key : {"src_vocab", "tgt_vocab"}) out.emplace_back(key, std::to_string(metadata_int(in.metadata, key, in.path)));
  return out;
}

Input read_input(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  Input in;
  in.path = path;
  in.metadata = std::move(file.metadata);
  const std::string& format = metadata_value(in.metadata, "scratchformer.format", path);
  if (format != "1") throw CheckpointError(path + ": checkpoint format " + format + ", this build reads format 1");
  for (const std::string& name : file.order) {
    if (name.rfind(kOptimizerPrefix, 0) == 0) continue;
    const Tensor& t = file.tensors.at(name);
    if (!is_floating(t.dtype()))
      throw CheckpointError(path + ": tensor '" + name + "' is " + dtype_name(t.dtype()) + "; only float weights can be averaged");
    in.weights.emplace(name, t);
    in.order.push_back(name);
  }
  in.step = metadata_int(in.metadata, "step", path);
  in.settings = model_settings(in);
  return in;
}

// Same tensor names, shapes and dtypes as `first`, and the same model settings; else one line.
void check_same_model(const Input& first, const Input& other) {
  for (const auto& [name, t] : first.weights) {
    const auto it = other.weights.find(name);
    if (it == other.weights.end())
      throw CheckpointError(other.path + ": has no tensor '" + name + "', which " + first.path + " has" + kDifferentModels);
    if (it->second.shape() != t.shape() || it->second.dtype() != t.dtype())
      throw CheckpointError(other.path + ": tensor '" + name + "' is " + dtype_name(it->second.dtype()) + " " +
                            shape_str(it->second.shape()) + " but " + dtype_name(t.dtype()) + " " + shape_str(t.shape()) +
                            " in " + first.path + kDifferentModels);
  }
  for (const auto& [name, t] : other.weights)
    if (first.weights.count(name) == 0)
      throw CheckpointError(other.path + ": has a tensor '" + name + "', which " + first.path + " has not" + kDifferentModels);
  for (std::size_t i = 0; i < first.settings.size(); ++i) {
    const auto& [key, value] = first.settings[i];
    const std::string theirs = i < other.settings.size() ? other.settings[i].second : "(missing)";
    if (theirs != value)
      throw CheckpointError(other.path + ": " + key + " = " + theirs + " but " + key + " = " + value + " in " +
                            first.path + kDifferentModels);
  }
}

using Sums = std::map<std::string, std::vector<double>>;  // weight name -> float64 sum, row-major

void add_weights(Sums& sums, const Input& in) {
  for (const auto& [name, t] : in.weights) {
    const std::vector<double> values = t.to_vector<double>();
    std::vector<double>& sum = sums[name];
    if (sum.empty()) sum.assign(values.size(), 0.0);
    for (std::size_t i = 0; i < values.size(); ++i) sum[i] += values[i];
  }
}

// "checkpoint-last.safetensors (step 2000), checkpoint-step-001800.safetensors (step 1800)"
std::string averaged_from(const std::vector<std::string>& paths, const std::vector<std::int64_t>& steps) {
  std::string out;
  for (std::size_t i = 0; i < paths.size(); ++i)
    out += (i ? ", " : "") + fs::path(paths[i]).filename().string() + " (step " + std::to_string(steps[i]) + ")";
  return out;
}

}  // namespace

AverageSummary average_checkpoints(const std::vector<std::string>& paths, const std::string& out_path) {
  if (paths.empty()) throw std::invalid_argument("average: expected at least one checkpoint to average, got none");
  AverageSummary summary;
  const Input first = read_input(paths[0]);
  Sums sums;
  add_weights(sums, first);
  summary.steps.push_back(first.step);
  for (std::size_t k = 1; k < paths.size(); ++k) {  // one file in memory at a time besides the first
    const Input other = read_input(paths[k]);
    check_same_model(first, other);
    add_weights(sums, other);
    summary.steps.push_back(other.step);
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  const double count = static_cast<double>(paths.size());
  for (const std::string& name : first.order) {
    std::vector<double>& sum = sums.at(name);
    for (double& v : sum) v /= count;  // the mean, rounded once to the dtype below
    const Tensor& like = first.weights.at(name);
    tensors.emplace_back(name, from_vector(sum, like.shape(), like.dtype()));
    summary.values += like.numel();
  }
  std::map<std::string, std::string> metadata = first.metadata;
  metadata["averaged_from"] = averaged_from(paths, summary.steps);
  save_safetensors(out_path, tensors, std::move(metadata));
  summary.tensors = static_cast<std::int64_t>(tensors.size());
  summary.config_toml = metadata_value(first.metadata, "config", first.path);
  return summary;
}

std::vector<std::string> last_kept_checkpoints(const std::string& dir, std::int64_t k) {
  std::vector<std::string> out;
  const fs::path last = fs::path(dir) / kLastCheckpointName;
  if (k <= 0 || !fs::exists(last)) return out;
  out.push_back(last.string());
  for (const auto& [step, path] : list_step_checkpoints(dir)) {  // newest first
    if (static_cast<std::int64_t>(out.size()) >= k) break;
    out.push_back(path);
  }
  return out;
}

std::string describe_average(const AverageSummary& s, const std::string& out_path) {
  std::string steps;
  for (std::size_t i = 0; i < s.steps.size(); ++i) steps += (i ? ", " : "") + std::to_string(s.steps[i]);
  return "averaged " + std::to_string(s.steps.size()) + (s.steps.size() == 1 ? " checkpoint" : " checkpoints") +
         " (step" + (s.steps.size() == 1 ? " " : "s ") + steps + "; " + std::to_string(s.tensors) + " tensors of " +
         std::to_string(s.values) + " weights) into " + out_path;
}

}  // namespace sf::train
