#include "train/checkpoint/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "train/checkpoint/safetensors.h"

namespace sf::train {

namespace {
constexpr const char* kFormat = "1";
constexpr const char* kOptimizerPrefix = "optimizer.";
constexpr const char* kStepPrefix = "checkpoint-step-";
constexpr const char* kStepSuffix = ".safetensors";

namespace fs = std::filesystem;

std::string rng_to_hex(const Generator::State& s) {
  std::string out;
  char buf[17];
  for (auto w : s) {
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(w));
    out += buf;
  }
  return out;
}

Generator::State rng_from_hex(const std::string& hex, const std::string& path) {
  if (hex.size() != 64) throw CheckpointError(path + ": metadata dropout_rng must be 64 hex digits, got '" + hex + "'");
  Generator::State s{};
  for (int i = 0; i < 4; ++i) {
    try {
      s[i] = std::stoull(hex.substr(i * 16, 16), nullptr, 16);
    } catch (const std::exception&) {
      throw CheckpointError(path + ": metadata dropout_rng is not hexadecimal: '" + hex + "'");
    }
  }
  return s;
}

std::string format_double(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

double need_double(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  const std::string& v = metadata_value(meta, key, path);
  try {
    return std::stod(v);
  } catch (const std::exception&) {
    throw CheckpointError(path + ": metadata '" + key + "' should be a number, got '" + v + "'");
  }
}
}  // namespace

const std::string& metadata_value(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  if (it == meta.end()) throw CheckpointError(path + ": metadata key '" + key + "' is missing (not a Scratchformer checkpoint?)");
  return it->second;
}

std::int64_t metadata_int(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  const std::string& v = metadata_value(meta, key, path);
  try {
    std::size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used != v.size()) throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    throw CheckpointError(path + ": metadata '" + key + "' should be an integer, got '" + v + "'");
  }
}

void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer* optimizer,
                     const TrainingState& s, const std::string& config_toml, std::int64_t src_vocab,
                     std::int64_t tgt_vocab) {
  std::vector<std::pair<std::string, Tensor>> tensors = model.named_parameters();
  std::int64_t optimizer_steps = 0;
  if (optimizer) {
    for (auto& [key, t] : optimizer->state()) tensors.emplace_back(kOptimizerPrefix + key, t);
    optimizer_steps = optimizer->steps();
  }
  std::map<std::string, std::string> meta{
      {"scratchformer.format", kFormat},
      {"config", config_toml},
      {"step", std::to_string(s.step)},
      {"epoch", std::to_string(s.epoch)},
      {"batch_in_epoch", std::to_string(s.batch_in_epoch)},
      {"optimizer_steps", std::to_string(optimizer_steps)},
      {"dropout_rng", rng_to_hex(s.dropout_rng)},
      {"best_metric", format_double(s.best_metric)},
      {"has_best", s.has_best ? "1" : "0"},
      {"bad_validations", std::to_string(s.bad_validations)},
      {"nonfinite_streak", std::to_string(s.nonfinite_streak)},
      {"tokens_seen", std::to_string(s.tokens_seen)},
      {"elapsed_seconds", format_double(s.elapsed_seconds)},
      {"src_vocab", std::to_string(src_vocab)},
      {"tgt_vocab", std::to_string(tgt_vocab)},
  };
  save_safetensors(path, tensors, std::move(meta));
}

namespace {
// Every metadata key --resume needs (save_checkpoint writes them all).
constexpr const char* kResumeKeys[] = {"scratchformer.format", "config",          "optimizer_steps", "step",
                                       "epoch",                "batch_in_epoch",  "dropout_rng",     "best_metric",
                                       "has_best",             "bad_validations", "nonfinite_streak", "tokens_seen",
                                       "elapsed_seconds",      "src_vocab",       "tgt_vocab"};

void check_format(const std::map<std::string, std::string>& meta, const std::string& path) {
  const auto it = meta.find("scratchformer.format");
  if (it != meta.end() && it->second != kFormat)
    throw CheckpointError(path + ": checkpoint format " + it->second + ", this build reads format " + kFormat);
}

// An optional integer key: its value, or 0 when the file does not record it.
std::int64_t optional_int(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  return meta.count(key) != 0 ? metadata_int(meta, key, path) : 0;
}

// The one line an external file without a checksum gets (safetensors.h kOriginKey).
void say_if_unverified(const SafetensorsFile& f, const std::string& path) {
  if (!f.checksum_verified)
    std::fprintf(stderr, "note: %s has no checksum (%s = \"%s\"): its data is loaded unverified\n", path.c_str(), kOriginKey,
                 kExternalOrigin);
}
}  // namespace

LoadedCheckpoint load_checkpoint(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  const auto& m = f.metadata;
  for (const char* key : kResumeKeys)
    if (m.count(key) == 0)
      throw CheckpointError(path + ": metadata key '" + key + "' is missing: --resume needs the whole training state " +
                            "(a weights-only checkpoint is for translate and eval; docs/checkpoint-format.md)");
  check_format(m, path);
  say_if_unverified(f, path);
  LoadedCheckpoint c;
  for (auto& [name, t] : f.tensors) {
    if (name.rfind(kOptimizerPrefix, 0) == 0)
      c.optimizer.emplace(name.substr(std::string(kOptimizerPrefix).size()), t);
    else
      c.model.emplace(name, t);
  }
  c.config_toml = metadata_value(m, "config", path);
  c.optimizer_steps = metadata_int(m, "optimizer_steps", path);
  c.state.step = metadata_int(m, "step", path);
  c.state.epoch = metadata_int(m, "epoch", path);
  c.state.batch_in_epoch = metadata_int(m, "batch_in_epoch", path);
  c.state.dropout_rng = rng_from_hex(metadata_value(m, "dropout_rng", path), path);
  c.state.best_metric = need_double(m, "best_metric", path);
  c.state.has_best = metadata_int(m, "has_best", path) != 0;
  c.state.bad_validations = metadata_int(m, "bad_validations", path);
  c.state.nonfinite_streak = metadata_int(m, "nonfinite_streak", path);
  c.state.tokens_seen = metadata_int(m, "tokens_seen", path);
  c.state.elapsed_seconds = need_double(m, "elapsed_seconds", path);
  c.src_vocab = metadata_int(m, "src_vocab", path);
  c.tgt_vocab = metadata_int(m, "tgt_vocab", path);
  if (c.state.step < 0 || c.src_vocab <= 0 || c.tgt_vocab <= 0)
    throw CheckpointError(path + ": metadata has a negative step or a non-positive vocabulary size");
  return c;
}

ModelCheckpoint load_model_checkpoint(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  const auto& m = f.metadata;
  check_format(m, path);
  if (m.count("config") == 0)
    throw CheckpointError(path + ": metadata key 'config' is missing (the model's config as TOML, which inference " +
                          "needs; docs/checkpoint-format.md)");
  say_if_unverified(f, path);
  ModelCheckpoint c;
  c.config_toml = m.at("config");
  c.src_vocab = optional_int(m, "src_vocab", path);
  c.tgt_vocab = optional_int(m, "tgt_vocab", path);
  c.step = optional_int(m, "step", path);
  if (c.step < 0 || c.src_vocab < 0 || c.tgt_vocab < 0)
    throw CheckpointError(path + ": metadata has a negative step or vocabulary size");
  for (auto& [name, t] : f.tensors)
    if (name.rfind(kOptimizerPrefix, 0) != 0) c.model.emplace(name, t);
  return c;
}

namespace {
// Tensor `key` of the file at `path` holds values of the parameter `param` (if the model has it):
// their dtypes must agree.
void check_dtype(const std::string& key, const Tensor& t, const std::string& param, const std::map<std::string, Tensor>& params,
                 const std::string& path) {
  const auto it = params.find(param);
  if (it != params.end() && t.dtype() != it->second.dtype())
    throw CheckpointError(path + ": tensor '" + key + "' is " + dtype_name(t.dtype()) + " but the model's parameter is " +
                          dtype_name(it->second.dtype()) + " (a checkpoint of another model?)");
}

std::map<std::string, Tensor> params_by_name(const nn::Module& model) {
  std::map<std::string, Tensor> params;
  for (const auto& [name, param] : model.named_parameters()) params.emplace(name, param);
  return params;
}
}  // namespace

void check_weight_dtypes(const std::map<std::string, Tensor>& weights, const nn::Module& model, const std::string& path) {
  const auto params = params_by_name(model);
  for (const auto& [name, t] : weights) check_dtype(name, t, name, params, path);
}

void check_checkpoint_dtypes(const LoadedCheckpoint& c, const nn::Module& model, const std::string& path) {
  const auto params = params_by_name(model);
  for (const auto& [name, t] : c.model) check_dtype(name, t, name, params, path);
  // the optimizer's state is "<optimizer>.<slot>.<parameter>": "adam.m.<name>", "sgd.momentum.<name>"
  for (const auto& [key, t] : c.optimizer) {
    const auto first = key.find('.');
    const auto second = first == std::string::npos ? first : key.find('.', first + 1);
    if (second != std::string::npos) check_dtype(kOptimizerPrefix + key, t, key.substr(second + 1), params, path);
  }
}

std::string step_checkpoint_name(std::int64_t step) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%06lld", static_cast<long long>(step));
  return std::string(kStepPrefix) + digits + kStepSuffix;
}

std::vector<std::pair<std::int64_t, std::string>> list_step_checkpoints(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    // exactly "checkpoint-step-<digits>.safetensors": not a ".tmp", not someone's other file
    const std::string name = entry.path().filename().string();
    const std::string prefix = kStepPrefix, suffix = kStepSuffix;
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    found.emplace_back(std::stoll(digits), entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return found;
}

namespace {
// Keeps `last` (checkpoint-last, saved at `step`) as checkpoint-step-<step> in `dir`: a hard link
// to the same bytes, or a copy if the file system cannot link. An existing one is left alone (a
// run killed between this and the next save has already made it).
void keep_as_step_checkpoint(const fs::path& dir, const fs::path& last, std::int64_t step) {
  const fs::path kept = dir / step_checkpoint_name(step);
  if (fs::exists(kept) || !fs::exists(last)) return;
  std::error_code ec;
  fs::create_hard_link(last, kept, ec);
  if (!ec) return;
  const fs::path tmp = kept.string() + ".tmp";  // copy atomically: never a half step file
  fs::copy_file(last, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(tmp, kept, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw CheckpointError(kept.string() + ": cannot keep the previous checkpoint-last here: " + ec.message());
  }
}
}  // namespace

void save_last_checkpoint(const std::string& dir, std::int64_t keep, std::int64_t previous_step, const nn::Module& model,
                          const Optimizer* optimizer, const TrainingState& state, const std::string& config_toml,
                          std::int64_t src_vocab, std::int64_t tgt_vocab) {
  if (keep < 1) throw std::invalid_argument("save_last_checkpoint: keep must be >= 1, got " + std::to_string(keep));
  const fs::path last = fs::path(dir) / kLastCheckpointName;
  // 1. the current checkpoint-last becomes a step checkpoint (its bytes stay where they are)
  if (keep > 1 && previous_step >= 0 && previous_step != state.step) keep_as_step_checkpoint(dir, last, previous_step);
  // 2. the new checkpoint-last, atomically: on failure the old one is still in place
  save_checkpoint(last.string(), model, optimizer, state, config_toml, src_vocab, tgt_vocab);
  // 3. the new one is safe: delete the step checkpoints beyond the newest keep - 1
  const auto steps = list_step_checkpoints(dir);
  for (std::size_t i = static_cast<std::size_t>(keep - 1); i < steps.size(); ++i) {
    std::error_code ec;
    fs::remove(steps[i].second, ec);  // best effort: an undeletable old file does not stop training
  }
}

}  // namespace sf::train
