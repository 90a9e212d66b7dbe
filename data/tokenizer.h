// Tokenizer: subword tokenisation with SentencePiece (Kudo & Richardson, 2018).
//
// A sentence becomes a list of integer ids the model can embed:
//   "Zwei Männer stehen."  ->  pieces {"▁Zwei", "▁Männer", "▁steh", "en", "."}
//                          ->  ids    {417, 1093, 802, 15, 5}
// "▁" (U+2581) marks the start of a word, so decoding is just concatenating the pieces and
// turning "▁" back into spaces: no language-specific detokeniser is needed.
//
// The model is trained here, from C++, on the training corpus (SentencePieceTrainer), with either
// the unigram language model (Kudo, 2018) or byte-pair encoding (Sennrich et al., 2016). A joint
// vocabulary is one model trained on both sides of the corpus; separate vocabularies are two
// models, one per language: call train() once with both files or twice with one file each.
//
// The four special ids are fixed in every model this file trains, and load() refuses a model
// whose special ids differ, so the rest of the code can use the constants below:
//   id 0  <pad>  padding in a batch; never produced by encode(), ignored by the loss
//   id 1  <unk>  a character never seen in training (decodes to " ⁇ ")
//   id 2  <s>    BOS, the first decoder input (the decoder starts every sentence from it)
//   id 3  </s>   EOS, the last decoder target (the model learns to stop by predicting it)
// encode() adds neither BOS nor EOS: the batcher places them (data/batcher.h).
//
// Training settings, chosen for translation and for reproducible runs:
//   character_coverage 1.0     every character of the training text gets a piece (Chinese
//                              needs this: the default 0.9995 would map rare characters to <unk>)
//   normalization identity     the text is kept as it is: NFKC (SentencePiece's default) would
//                              turn the full-width punctuation of Chinese ("，" "！" "？") into
//                              ASCII, and a model translating into Chinese would then never
//                              produce the punctuation of its references. Runs of spaces are
//                              still collapsed and the ends trimmed.
//   input_sentence_size 200000 at most this many training sentences (a random sample, drawn
//                              with the given seed, when the files hold more)
//   num_threads 1              the EM statistics are summed in one fixed order, so the same
//                              files and seed give the same model, byte for byte
//   minloglevel 2              quiet: SentencePiece's progress log would bury the training log
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace sf::data {

constexpr std::int64_t kPadId = 0;  // <pad>
constexpr std::int64_t kUnkId = 1;  // <unk>
constexpr std::int64_t kBosId = 2;  // <s>, begin of sentence
constexpr std::int64_t kEosId = 3;  // </s>, end of sentence

// At most this many training sentences are used; when the files hold more, SentencePiece draws a
// random sample of this size (with the seed given to train()).
constexpr std::int64_t kMaxTrainingSentences = 200000;

class Tokenizer {
 public:
  // Trains a model on the lines of `text_files` (one sentence per line) and writes it to
  // `model_path` (e.g. "runs/quickstart/spm.model"); the vocabulary with each piece's score is
  // written beside it as a text file for reading (spm.vocab). The model file appears
  // atomically: it is written under a temporary name and renamed, so an interrupted training
  // never leaves a half-written spm.model behind. Missing parent directories are created.
  //   vocab_size  pieces in the vocabulary including the four special ones, e.g. 8000
  //   model_type  "unigram" or "bpe"
  //   seed        seeds SentencePiece's sampling of training sentences (the run's seed)
  //   symbols     task symbols after the four fixed ones, e.g. {"<sep>"} (ids 4, 5, ... in this
  //               order): SentencePiece control symbols, so encode() never produces them from
  //               text (a sentence that contains "<sep>" stays words) and decode() drops them.
  //               Only the tasks that need them add them (train/task.h), so a translation
  //               vocabulary stays what it always was.
  // Throws std::invalid_argument for a bad vocab_size or model_type and std::runtime_error with
  // SentencePiece's message when training fails (e.g. a vocabulary larger than the text allows).
  static Tokenizer train(const std::vector<std::string>& text_files, const std::string& model_path,
                         int vocab_size, const std::string& model_type,
                         std::uint64_t seed = 0, const std::vector<std::string>& symbols = {});

  // Loads a model written by train(). Throws std::runtime_error naming the path when the file is
  // missing or is not a SentencePiece model, or when its special ids are not the fixed ones.
  static Tokenizer load(const std::string& model_path);

  // The model at `model_path` if the file exists (a resumed run reuses its tokenizer, so the ids
  // in its checkpoint keep their meaning), otherwise a new one trained as train() does.
  static Tokenizer load_or_train(const std::vector<std::string>& text_files,
                                 const std::string& model_path, int vocab_size,
                                 const std::string& model_type, std::uint64_t seed = 0,
                                 const std::vector<std::string>& symbols = {});

  // text -> ids, without BOS or EOS. An empty or all-space line gives {}.
  std::vector<std::int64_t> encode(const std::string& text) const;
  // encode() applied to every line.
  std::vector<std::vector<std::int64_t>> encode_all(const std::vector<std::string>& lines) const;
  // ids -> text. Pad, BOS and EOS are skipped (so a decoder's output can be passed as it is);
  // throws std::invalid_argument for an id outside [0, vocab_size).
  std::string decode(const std::vector<std::int64_t>& ids) const;
  // text -> pieces, e.g. {"▁Zwei", "▁Männer", ...}: what encode() returns, as strings.
  std::vector<std::string> pieces(const std::string& text) const;
  // The piece of one id, e.g. id_to_piece(kEosId) == "</s>".
  std::string id_to_piece(std::int64_t id) const;
  std::int64_t vocab_size() const;
  const std::string& model_path() const { return model_path_; }
  // The id of a task symbol given to train(), e.g. symbol_id("<sep>") == 4. Throws
  // std::runtime_error naming the model and the symbol when it has none (a tokenizer trained
  // for another task).
  std::int64_t symbol_id(const std::string& symbol) const;
  // The first id of an ordinary piece: ids below it are padding, <unk>, <s>, </s> and the task
  // symbols (4 + the number of symbols). Masked-LM never chooses them.
  std::int64_t first_ordinary_id() const;

 private:
  Tokenizer(std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor,
            std::string model_path);
  void check_id(std::int64_t id, const char* caller) const;

  // Shared and const: copies of a Tokenizer share one model, and encoding is thread-safe.
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_;
  std::string model_path_;
};

// The tokenizers of a run: one joint model (spm.model) or one per side (spm.src.model,
// spm.tgt.model), in the run directory (train/setup.h loads or trains them). With a joint
// model both hold the same vocabulary.
struct Tokenizers {
  Tokenizer src;
  Tokenizer tgt;
};

}  // namespace sf::data
