#include "data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <unordered_map>
#include <utility>

namespace sf::data {

namespace fs = std::filesystem;

namespace {

// SentencePiece's seed is an unsigned int, and its value UINT_MAX is reserved ("seed from
// std::random_device"), so the 64-bit run seed is folded into [0, UINT_MAX - 1].
unsigned int sentencepiece_seed(std::uint64_t seed) {
  return static_cast<unsigned int>(seed % 0xFFFFFFFFULL);
}

// Writes `bytes` to `path` so that a reader sees either the old file or the complete new one:
// they go to a temporary file beside it first, which is then renamed over it.
void write_atomically(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw std::runtime_error("Tokenizer::train: cannot write " + tmp.string());
    }
  }
  fs::rename(tmp, path);
}

// "runs/q/spm.model" -> "runs/q/spm.vocab"; a path not ending in ".model" gets ".vocab" appended.
fs::path vocab_path_for(const fs::path& model_path) {
  if (model_path.extension() == ".model") return fs::path(model_path).replace_extension(".vocab");
  return fs::path(model_path.string() + ".vocab");
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor,
                     std::string model_path)
    : processor_(std::move(processor)), model_path_(std::move(model_path)) {}

Tokenizer Tokenizer::train(const std::vector<std::string>& text_files, const std::string& model_path,
                           int vocab_size, const std::string& model_type, std::uint64_t seed,
                           const std::vector<std::string>& symbols) {
  if (text_files.empty())
    throw std::invalid_argument("Tokenizer::train: no training files given");
  if (vocab_size <= kEosId + 1)
    throw std::invalid_argument("Tokenizer::train: vocab_size must be larger than the " +
                                std::to_string(kEosId + 1) + " special pieces, got " +
                                std::to_string(vocab_size));
  if (model_type != "unigram" && model_type != "bpe")
    throw std::invalid_argument("Tokenizer::train: model_type must be \"unigram\" or \"bpe\", got \"" +
                                model_type + "\"");
  // SentencePiece takes its input files as one comma-separated list.
  std::string input;
  for (const std::string& file : text_files) {
    if (!fs::is_regular_file(file))
      throw std::runtime_error("Tokenizer::train: training file not found: " + file);
    if (file.find(',') != std::string::npos)
      throw std::invalid_argument("Tokenizer::train: SentencePiece cannot read a path containing "
                                  "a comma: " + file);
    input += (input.empty() ? "" : ",") + file;
  }

  // SentencePiece hands the trained model back as bytes (serialized_model_proto), which are written
  // under a temporary name in the destination directory and renamed: the rename is atomic, so
  // model_path holds either nothing or a complete model. (So there is no model_prefix, the flag
  // that tells SentencePiece where to write files itself.)
  const fs::path final_model = model_path;
  if (final_model.has_parent_path()) fs::create_directories(final_model.parent_path());

  // The key=value form of SentencePiece's command-line flags. (The map rather than one flag string,
  // because the string form splits on spaces and would break a path containing one.)
  std::string control_symbols;  // "<sep>,<mask>": SentencePiece's list form
  for (const std::string& symbol : symbols) {
    if (symbol.empty() || symbol.find(',') != std::string::npos)
      throw std::invalid_argument("Tokenizer::train: a task symbol must be non-empty without a comma, got \"" + symbol + "\"");
    control_symbols += (control_symbols.empty() ? "" : ",") + symbol;
  }
  std::unordered_map<std::string, std::string> flags = {
      {"input", input},
      {"vocab_size", std::to_string(vocab_size)},
      {"model_type", model_type},
      {"character_coverage", "1.0"},
      {"normalization_rule_name", "identity"},
      {"pad_id", std::to_string(kPadId)},
      {"unk_id", std::to_string(kUnkId)},
      {"bos_id", std::to_string(kBosId)},
      {"eos_id", std::to_string(kEosId)},
      {"input_sentence_size", std::to_string(kMaxTrainingSentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", "1"},
      {"minloglevel", "2"},  // errors only (0 info, 1 warning, 2 error)
  };
  if (!control_symbols.empty()) flags["control_symbols"] = control_symbols;
  // The seed is global state inside SentencePiece: set it right before training.
  sentencepiece::SetRandomGeneratorSeed(sentencepiece_seed(seed));
  std::string model_bytes;
  const sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(flags, nullptr, &model_bytes);
  if (!status.ok())
    throw std::runtime_error("Tokenizer::train: SentencePiece failed to train " + model_path +
                             ": " + status.ToString());

  auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const sentencepiece::util::Status loaded = processor->LoadFromSerializedProto(model_bytes);
  if (!loaded.ok())
    throw std::runtime_error("Tokenizer::train: SentencePiece returned an unreadable model: " +
                             loaded.ToString());
  // The vocabulary first, so that once the model file exists everything is in place.
  std::string vocab;
  for (int id = 0; id < processor->GetPieceSize(); ++id)
    vocab += processor->IdToPiece(id) + "\t" + std::to_string(processor->GetScore(id)) + "\n";
  write_atomically(vocab_path_for(final_model), vocab);
  write_atomically(final_model, model_bytes);
  return load(model_path);
}

Tokenizer Tokenizer::load(const std::string& model_path) {
  if (!fs::exists(model_path))
    throw std::runtime_error("Tokenizer::load: tokenizer model not found: " + model_path);
  if (!fs::is_regular_file(model_path))
    throw std::runtime_error("Tokenizer::load: " + model_path + " is not a file");
  auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const sentencepiece::util::Status status = processor->Load(model_path);
  if (!status.ok())
    throw std::runtime_error("Tokenizer::load: " + model_path +
                             " is not a valid SentencePiece model: " + status.ToString());
  // The rest of Scratchformer hard-codes these ids (kPadId, ...), so a model with others is refused.
  const std::pair<const char*, std::pair<int, std::int64_t>> specials[] = {
      {"pad", {processor->pad_id(), kPadId}},
      {"unk", {processor->unk_id(), kUnkId}},
      {"bos", {processor->bos_id(), kBosId}},
      {"eos", {processor->eos_id(), kEosId}},
  };
  for (const auto& [name, ids] : specials)
    if (ids.first != ids.second)
      throw std::runtime_error("Tokenizer::load: " + model_path + " has " + name + " id " +
                               std::to_string(ids.first) + ", expected " +
                               std::to_string(ids.second) +
                               " (train the model with Tokenizer::train)");
  return Tokenizer(std::move(processor), model_path);
}

Tokenizer Tokenizer::load_or_train(const std::vector<std::string>& text_files,
                                   const std::string& model_path, int vocab_size,
                                   const std::string& model_type, std::uint64_t seed,
                                   const std::vector<std::string>& symbols) {
  if (fs::exists(model_path)) return load(model_path);
  return train(text_files, model_path, vocab_size, model_type, seed, symbols);
}

std::int64_t Tokenizer::symbol_id(const std::string& symbol) const {
  const int id = processor_->PieceToId(symbol);
  if (id <= kEosId || !processor_->IsControl(id))
    throw std::runtime_error("the tokenizer " + model_path_ + " has no " + symbol +
                             " symbol (it was trained for another task; train a new run with this data.task)");
  return id;
}

std::int64_t Tokenizer::first_ordinary_id() const {
  std::int64_t id = kEosId + 1;
  while (id < vocab_size() && processor_->IsControl(static_cast<int>(id))) ++id;
  return id;
}

std::vector<std::int64_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const sentencepiece::util::Status status = processor_->Encode(text, &ids);
  if (!status.ok())
    throw std::runtime_error("Tokenizer::encode: " + status.ToString());
  return std::vector<std::int64_t>(ids.begin(), ids.end());
}

std::vector<std::vector<std::int64_t>> Tokenizer::encode_all(
    const std::vector<std::string>& lines) const {
  std::vector<std::vector<std::int64_t>> ids;
  ids.reserve(lines.size());
  for (const std::string& line : lines) ids.push_back(encode(line));
  return ids;
}

std::string Tokenizer::decode(const std::vector<std::int64_t>& ids) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (const std::int64_t id : ids) {
    check_id(id, "Tokenizer::decode");
    if (id == kPadId || id == kBosId || id == kEosId) continue;
    kept.push_back(static_cast<int>(id));
  }
  std::string text;
  const sentencepiece::util::Status status = processor_->Decode(kept, &text);
  if (!status.ok())
    throw std::runtime_error("Tokenizer::decode: " + status.ToString());
  return text;
}

std::vector<std::string> Tokenizer::pieces(const std::string& text) const {
  std::vector<std::string> result;
  const sentencepiece::util::Status status = processor_->Encode(text, &result);
  if (!status.ok())
    throw std::runtime_error("Tokenizer::pieces: " + status.ToString());
  return result;
}

std::string Tokenizer::id_to_piece(std::int64_t id) const {
  check_id(id, "Tokenizer::id_to_piece");
  return processor_->IdToPiece(static_cast<int>(id));
}

std::int64_t Tokenizer::vocab_size() const { return processor_->GetPieceSize(); }

void Tokenizer::check_id(std::int64_t id, const char* caller) const {
  if (id < 0 || id >= vocab_size())
    throw std::invalid_argument(std::string(caller) + ": id " + std::to_string(id) +
                                " is outside the vocabulary [0, " + std::to_string(vocab_size()) +
                                ")");
}

}  // namespace sf::data
