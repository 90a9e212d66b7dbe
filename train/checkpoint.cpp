#include "train/checkpoint.h"

#include <cstdio>
#include <sstream>

#include "train/safetensors.h"

namespace sf::train {

namespace {
constexpr const char* kFormat = "1";
constexpr const char* kOptimizerPrefix = "optimizer.";

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

const std::string& need(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  if (it == meta.end()) throw CheckpointError(path + ": metadata key '" + key + "' is missing (not a Scratchformer checkpoint?)");
  return it->second;
}

std::int64_t need_int(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  const std::string& v = need(meta, key, path);
  try {
    std::size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used != v.size()) throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    throw CheckpointError(path + ": metadata '" + key + "' should be an integer, got '" + v + "'");
  }
}

double need_double(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  const std::string& v = need(meta, key, path);
  try {
    return std::stod(v);
  } catch (const std::exception&) {
    throw CheckpointError(path + ": metadata '" + key + "' should be a number, got '" + v + "'");
  }
}
}  // namespace

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

LoadedCheckpoint load_checkpoint(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  const auto& m = f.metadata;
  if (need(m, "scratchformer.format", path) != kFormat)
    throw CheckpointError(path + ": checkpoint format " + m.at("scratchformer.format") + ", this build reads format " + kFormat);
  LoadedCheckpoint c;
  for (auto& [name, t] : f.tensors) {
    if (name.rfind(kOptimizerPrefix, 0) == 0)
      c.optimizer.emplace(name.substr(std::string(kOptimizerPrefix).size()), t);
    else
      c.model.emplace(name, t);
  }
  c.config_toml = need(m, "config", path);
  c.optimizer_steps = need_int(m, "optimizer_steps", path);
  c.state.step = need_int(m, "step", path);
  c.state.epoch = need_int(m, "epoch", path);
  c.state.batch_in_epoch = need_int(m, "batch_in_epoch", path);
  c.state.dropout_rng = rng_from_hex(need(m, "dropout_rng", path), path);
  c.state.best_metric = need_double(m, "best_metric", path);
  c.state.has_best = need_int(m, "has_best", path) != 0;
  c.state.bad_validations = need_int(m, "bad_validations", path);
  c.state.nonfinite_streak = need_int(m, "nonfinite_streak", path);
  c.state.tokens_seen = need_int(m, "tokens_seen", path);
  c.state.elapsed_seconds = need_double(m, "elapsed_seconds", path);
  c.src_vocab = need_int(m, "src_vocab", path);
  c.tgt_vocab = need_int(m, "tgt_vocab", path);
  if (c.state.step < 0 || c.src_vocab <= 0 || c.tgt_vocab <= 0)
    throw CheckpointError(path + ": metadata has a negative step or a non-positive vocabulary size");
  return c;
}

}  // namespace sf::train
