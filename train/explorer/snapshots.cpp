// Attention snapshots at validation time (see snapshots.h).
#include "train/explorer/snapshots.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "data/corpus.h"
#include "train/explorer/data.h"

namespace sf::explorer {

namespace fs = std::filesystem;

AttentionSnapshots::AttentionSnapshots(const train::Config& cfg) : cfg_(cfg) {
  if (!cfg.run.attention_snapshots || cfg.data.task != "translation") return;
  for (const std::string& line : data::read_lines(cfg.data.valid_src)) {
    if (line.empty()) continue;
    sentence_ = line;
    break;
  }
}

void AttentionSnapshots::prepare(const nn::Model& model) {
  im_ = std::make_unique<train::InferenceModel>();
  im_->config = cfg_;
  im_->tokenizers = std::make_unique<train::Tokenizers>(train::load_tokenizers(cfg_, cfg_.run.dir));
  im_->init_gen = std::make_unique<Generator>(0);
  im_->model = nn::make_model(model.config(), *im_->init_gen);
  im_->model->eval();
}

void AttentionSnapshots::after_validation(const nn::Model& model, std::int64_t step) {
  if (sentence_.empty()) return;
  if (!im_) prepare(model);
  im_->model->load_state_dict(model.state_dict());  // the trainer's weights now, copied
  Json line;
  try {
    line = attention(*im_, sentence_, std::nullopt);
  } catch (const std::invalid_argument& e) {  // a sentence the model cannot take: say so, keep training
    line = {{"text", sentence_}, {"error", e.what()}};
  }
  line["step"] = step;
  const fs::path path = fs::path(cfg_.run.dir) / kSnapshotsFile;
  std::ofstream out(path, std::ios::app);
  out << line.dump() << "\n";
  if (!out) throw std::runtime_error("attention snapshots: cannot append to " + path.string());
}

}  // namespace sf::explorer
