#include "train/setup.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <system_error>
#include <vector>

#include "nn/feed_forward.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/safetensors.h"
#include "train/task.h"

namespace sf::train {

namespace fs = std::filesystem;

nn::ModelConfig model_config_from(const ModelSection& m, std::int64_t src_vocab, std::int64_t tgt_vocab,
                                  std::int64_t num_classes) {
  nn::ModelConfig c;
  c.num_classes = num_classes;
  c.pooling = m.pooling == "cls" ? nn::Pooling::Cls : nn::Pooling::Mean;
  c.rnn_cell = nn::parse_cell_kind(m.rnn_cell);
  c.rnn_attention = nn::parse_rnn_attention(m.rnn_attention);
  c.src_vocab = src_vocab;
  c.tgt_vocab = tgt_vocab;
  c.d_model = m.d_model;
  c.n_heads = m.n_heads;
  c.n_kv_heads = m.n_kv_heads;
  c.d_ff = m.d_ff;
  c.encoder_layers = m.encoder_layers;
  c.decoder_layers = m.decoder_layers;
  c.dropout = m.dropout;
  c.attention_dropout = m.attention_dropout;
  c.activation = nn::parse_activation(m.activation);
  c.norm = nn::parse_norm(m.norm);
  c.arch = nn::parse_arch(m.arch);
  c.norm_position = nn::parse_norm_position(m.norm_position);
  c.positional = nn::parse_positional(m.positional);
  c.attention = nn::parse_attention(m.attention);
  c.attention_window = m.attention_window;
  c.rope_scaling = nn::parse_rope_scaling(m.rope_scaling);
  c.rope_factor = m.rope_factor;
  c.share_embeddings = m.share_embeddings;
  c.tie_output = m.tie_output;
  c.max_len = m.max_len;
  c.pad_id = data::kPadId;
  c.validate();
  return c;
}

nn::ModelConfig model_config_from(const Config& cfg, std::int64_t src_vocab, std::int64_t tgt_vocab) {
  const auto classes = cfg.data.task == "classify" ? static_cast<std::int64_t>(class_labels(cfg.data).size()) : 0;
  return model_config_from(cfg.model, src_vocab, tgt_vocab, classes);
}

Tokenizers load_or_train_tokenizers(const Config& cfg, std::uint64_t seed) {
  const fs::path dir(cfg.run.dir);
  const int vocab = static_cast<int>(cfg.data.tokenizer_vocab_size);
  const std::vector<std::string> symbols = task_symbols(cfg);
  if (cfg.data.task != "translation") {
    const std::string model = (dir / "spm.model").string();
    if (fs::exists(model)) {
      const data::Tokenizer t = data::Tokenizer::load(model);  // one model for both sides
      return {t, t};
    }
    const std::string text = tokenizer_text_file(cfg);  // classify: the text columns of the TSV
    const auto remove_temporary = [&] {
      std::error_code ignored;
      if (text != cfg.data.train_file) fs::remove(text, ignored);
    };
    try {
      auto t = data::Tokenizer::train({text}, model, vocab, cfg.data.tokenizer_type, seed, symbols);
      remove_temporary();
      return {t, t};
    } catch (...) {
      remove_temporary();  // nothing left behind in run.dir
      throw;
    }
  }
  if (cfg.data.joint_tokenizer) {
    auto t = data::Tokenizer::load_or_train({cfg.data.train_src, cfg.data.train_tgt}, (dir / "spm.model").string(), vocab,
                                            cfg.data.tokenizer_type, seed, symbols);
    return {t, t};
  }
  return {data::Tokenizer::load_or_train({cfg.data.train_src}, (dir / "spm.src.model").string(), vocab,
                                         cfg.data.tokenizer_type, seed),
          data::Tokenizer::load_or_train({cfg.data.train_tgt}, (dir / "spm.tgt.model").string(), vocab,
                                         cfg.data.tokenizer_type, seed)};
}

bool tokenizers_exist(const Config& cfg, const std::string& dir) {
  const fs::path d(dir);
  if (cfg.data.joint_tokenizer || cfg.data.task != "translation") return fs::exists(d / "spm.model");
  return fs::exists(d / "spm.src.model") && fs::exists(d / "spm.tgt.model");
}

namespace {

// FNV-1a, 64 bits: the same value on every machine and every run (std::hash promises neither).
std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// A training file as the cache key sees it: its absolute path, size and modification time.
std::string file_identity(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::absolute(path, ec);
  const auto size = fs::file_size(p, ec);
  const auto time = fs::last_write_time(p, ec).time_since_epoch().count();
  return p.string() + "|" + std::to_string(ec ? 0 : size) + "|" + std::to_string(ec ? 0 : time);
}

}  // namespace

std::string tokenizer_cache_dir(const Config& cfg, std::uint64_t seed) {
  std::string key = cfg.data.task + "|" + (cfg.data.joint_tokenizer ? "joint" : "separate") + "|" +
                    std::to_string(cfg.data.tokenizer_vocab_size) + "|" + cfg.data.tokenizer_type + "|" + std::to_string(seed);
  for (const std::string& symbol : task_symbols(cfg)) key += "|" + symbol;
  const std::vector<std::string> files = cfg.data.task == "translation" ? std::vector<std::string>{cfg.data.train_src, cfg.data.train_tgt}
                                                                        : std::vector<std::string>{cfg.data.train_file};
  for (const std::string& f : files) key += "|" + file_identity(f);
  char hex[20];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path base = xdg && *xdg ? fs::path(xdg) : home && *home ? fs::path(home) / ".cache" : fs::temp_directory_path();
  return (base / "scratchformer" / "tokenizers" / hex).string();
}

Tokenizers load_or_train_tokenizers_outside_run(const Config& cfg, std::uint64_t seed, std::ostream& log) {
  if (tokenizers_exist(cfg, cfg.run.dir)) return load_or_train_tokenizers(cfg, seed);  // the run's own: nothing written
  Config cached = cfg;
  cached.run.dir = tokenizer_cache_dir(cfg, seed);
  const bool trained = !tokenizers_exist(cached, cached.run.dir);
  log << "scratchformer: no tokenizer in " << cfg.run.dir << "; "
      << (trained ? "training one on the training corpus (as `train` would) into " : "using the one trained before in ")
      << cached.run.dir << " (run.dir is left untouched)\n";
  fs::create_directories(cached.run.dir);
  return load_or_train_tokenizers(cached, seed);
}

Tokenizers load_tokenizers(const Config& cfg, const std::string& run_dir) {
  const fs::path dir(run_dir);
  if (cfg.data.joint_tokenizer || cfg.data.task != "translation") {
    auto t = data::Tokenizer::load((dir / "spm.model").string());
    return {t, t};
  }
  return {data::Tokenizer::load((dir / "spm.src.model").string()), data::Tokenizer::load((dir / "spm.tgt.model").string())};
}

Config config_from_string(const std::string& toml_text, const std::string& origin) {
  // load_config reads files; give it one (paths inside are already absolute).
  std::string tmpl = (fs::temp_directory_path() / "scratchformer-config-XXXXXX").string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) throw std::runtime_error("cannot create a temporary file to read the config of " + origin);
  close(fd);
  {
    std::ofstream out(tmpl);
    out << toml_text;
  }
  try {
    Config c = load_config(tmpl);
    fs::remove(tmpl);
    c.source_path = origin;
    return c;
  } catch (const ConfigError& e) {
    fs::remove(tmpl);
    throw CheckpointError(origin + ": the config stored in the checkpoint is invalid: " + e.what());
  }
}

InferenceModel load_inference_model(const std::string& checkpoint_path) {
  if (!fs::exists(checkpoint_path)) throw CheckpointError(checkpoint_path + ": no such checkpoint file");
  ModelCheckpoint ck = load_model_checkpoint(checkpoint_path);
  InferenceModel im;
  im.config = config_from_string(ck.config_toml, checkpoint_path);
  im.step = ck.step;
  const std::string run_dir = fs::absolute(checkpoint_path).parent_path().string();
  im.tokenizers = std::make_unique<Tokenizers>(load_tokenizers(im.config, run_dir));
  const std::int64_t src_vocab = im.tokenizers->src.vocab_size(), tgt_vocab = im.tokenizers->tgt.vocab_size();
  // the vocabulary sizes are checked when the file records them; the weights' shapes are always
  if ((ck.src_vocab != 0 && ck.src_vocab != src_vocab) || (ck.tgt_vocab != 0 && ck.tgt_vocab != tgt_vocab))
    throw CheckpointError(checkpoint_path + ": the tokenizer beside it has vocabulary " + std::to_string(src_vocab) + "/" +
                          std::to_string(tgt_vocab) + " but the checkpoint was trained with " + std::to_string(ck.src_vocab) +
                          "/" + std::to_string(ck.tgt_vocab));
  im.init_gen = std::make_unique<Generator>(0);
  im.model = nn::make_model(model_config_from(im.config, src_vocab, tgt_vocab), *im.init_gen);
  try {
    check_weight_dtypes(ck.model, *im.model, checkpoint_path);
    im.model->load_state_dict(ck.model);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(checkpoint_path + ": " + e.what());
  }
  im.model->eval();
  return im;
}

std::int64_t max_source_tokens(const InferenceModel& im) {
  const std::int64_t max_len = im.config.model.max_len;
  return im.config.model.arch == "decoder-only" ? max_len / 2 - 1 : max_len;
}

}  // namespace sf::train
