// Turning a config (and a run directory) into the objects a command needs: the model's
// hyper-parameters, the tokenizers, a model loaded from a checkpoint for translation.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>

#include "data/tokenizer.h"
#include "nn/model.h"
#include "train/config.h"

namespace sf::train {

// [model] section + vocabulary sizes -> the nn layer's ModelConfig (validated). num_classes: the
// classifier's classes (data.task = "classify"), 0 for every other head.
nn::ModelConfig model_config_from(const ModelSection& m, std::int64_t src_vocab, std::int64_t tgt_vocab,
                                  std::int64_t num_classes = 0);
// The same for a whole config: the classes are data.labels' when the task classifies.
nn::ModelConfig model_config_from(const Config& cfg, std::int64_t src_vocab, std::int64_t tgt_vocab);

using data::Tokenizers;  // the run's source and target tokenizers (data/tokenizer.h)
// Loads the run's tokenizers, training them on the training corpus first if they do not exist
// (with the symbols the task needs, train/task.h). lm, mlm and classify have one (spm.model),
// held in both fields.
Tokenizers load_or_train_tokenizers(const Config& cfg, std::uint64_t seed);
// True when `dir` holds the tokenizer files of cfg (spm.model, or spm.src.model and spm.tgt.model).
bool tokenizers_exist(const Config& cfg, const std::string& dir);
// The directory outside the project where a classroom command (explain-batch) keeps the
// tokenizers it has to train for a run that has none yet, so that it never writes into run.dir
// unasked: $XDG_CACHE_HOME/scratchformer/tokenizers/KEY ($HOME/.cache when XDG_CACHE_HOME is unset,
// the system temp directory when HOME is too). KEY is a hash of everything the tokenizer depends
// on (task, training files with their sizes and times, vocabulary size and type, symbols, seed),
// so a changed corpus or config gets a new one. A cache rather than a temp directory removed
// afterwards: SentencePiece takes seconds to minutes on a real corpus, and a class runs the
// command again and again (--batch 0, 1, 2, ...). `rm -rf ~/.cache/scratchformer` clears it.
std::string tokenizer_cache_dir(const Config& cfg, std::uint64_t seed);
// run.dir's tokenizers when they exist (nothing written); otherwise those in
// tokenizer_cache_dir, trained there first if needed. One line on `log` says which and where.
Tokenizers load_or_train_tokenizers_outside_run(const Config& cfg, std::uint64_t seed, std::ostream& log);
// Loads the tokenizers that sit beside a checkpoint (its directory is the run directory).
Tokenizers load_tokenizers(const Config& cfg, const std::string& run_dir);

// A trained model ready to translate: the config it was trained with, its tokenizers, weights.
struct InferenceModel {
  Config config;
  std::unique_ptr<Generator> init_gen;  // only used to build the modules before loading weights
  std::unique_ptr<nn::Model> model;  // the architecture of the checkpoint's model.arch
  std::unique_ptr<Tokenizers> tokenizers;
  std::int64_t step = 0;  // training steps behind the weights
};
InferenceModel load_inference_model(const std::string& checkpoint_path);

// The longest source the model translates, in tokens: max_len for the encoder-decoder (the source
// carries no <s> or </s>: its positions are 0 .. max_len - 1); max_len / 2 - 1 for a decoder-only
// model, whose prompt <s> source <sep> and translation share the positions.
std::int64_t max_source_tokens(const InferenceModel& im);

// Parses a config held in a string (a checkpoint's metadata), naming `origin` in errors.
Config config_from_string(const std::string& toml_text, const std::string& origin);

}  // namespace sf::train
