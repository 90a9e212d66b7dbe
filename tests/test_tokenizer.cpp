// Tests for data/tokenizer: training SentencePiece models from C++ on slices of the shipped corpora
// (German+English and Chinese+English), the fixed special ids, encode/decode round trips, saving and
// loading, determinism, and the errors for bad files and settings.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/tokenizer.h"
#include "test_util.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using sf::data::kBosId;
using sf::data::kEosId;
using sf::data::kPadId;
using sf::data::kUnkId;
using sf::data::Tokenizer;

namespace {

const std::string kCorpora = SCRATCHFORMER_CORPORA;

// Sizes of the training slices: big enough for a 500-piece vocabulary, small enough to train in
// well under a second.
constexpr std::size_t kSliceLines = 1000;
constexpr int kVocabSize = 500;
// Chinese has thousands of distinct characters and character_coverage 1.0 gives each its own
// piece, so the Chinese slice is smaller and its vocabulary larger than the characters it holds.
constexpr std::size_t kChineseSliceLines = 500;
constexpr int kChineseVocabSize = 1000;

using sf::test::read_file;  // tests/test_util.h
using sf::test::TempDir;

std::vector<std::string> first_lines(const std::string& path, std::size_t n) {
  std::vector<std::string> lines = sf::data::read_lines(path);
  lines.resize(std::min(n, lines.size()));
  return lines;
}

// Writes the first n lines of a corpus file to dir/name; returns the new file's path.
std::string write_slice(const TempDir& dir, const std::string& name, const std::string& source,
                        std::size_t n) {
  const std::string path = dir / name;
  std::ofstream out(path, std::ios::binary);
  for (const std::string& line : first_lines(source, n)) out << line << '\n';
  return path;
}

std::vector<std::string> german_english_slice(const TempDir& dir) {
  return {write_slice(dir, "train.de", kCorpora + "/multi30k/train.de", kSliceLines),
          write_slice(dir, "train.en", kCorpora + "/multi30k/train.en", kSliceLines)};
}

// Every line of `lines` whose encoding has no <unk> must decode to itself. Returns how many lines
// had no <unk> (lines with a character the model never saw cannot round-trip, by design).
std::size_t check_round_trips(const Tokenizer& tok, const std::vector<std::string>& lines) {
  std::size_t clean = 0;
  for (const std::string& line : lines) {
    const std::vector<std::int64_t> ids = tok.encode(line);
    if (std::find(ids.begin(), ids.end(), kUnkId) != ids.end()) continue;
    ++clean;
    INFO("line: " << line);
    CHECK(tok.decode(ids) == line);
  }
  return clean;
}

}  // namespace

TEST_CASE("a trained tokenizer has the fixed special ids", "[data][tokenizer]") {
  TempDir dir("tok-special");
  const Tokenizer tok =
      Tokenizer::train(german_english_slice(dir), dir / "spm.model", kVocabSize, "unigram");
  CHECK(tok.vocab_size() == kVocabSize);
  CHECK(tok.id_to_piece(kPadId) == "<pad>");
  CHECK(tok.id_to_piece(kUnkId) == "<unk>");
  CHECK(tok.id_to_piece(kBosId) == "<s>");
  CHECK(tok.id_to_piece(kEosId) == "</s>");
  // encode never produces pad, BOS or EOS: the batcher adds BOS/EOS itself.
  for (const std::string& line : first_lines(kCorpora + "/multi30k/valid.en", 100))
    for (const std::int64_t id : tok.encode(line)) {
      CHECK(id != kPadId);
      CHECK(id != kBosId);
      CHECK(id != kEosId);
      CHECK(id < kVocabSize);
    }
  CHECK(tok.encode("").empty());
  CHECK(tok.encode("   ").empty());
}

TEST_CASE("German and English sentences round trip through encode and decode", "[data][tokenizer]") {
  TempDir dir("tok-roundtrip");
  const Tokenizer tok =
      Tokenizer::train(german_english_slice(dir), dir / "spm.model", kVocabSize, "unigram");
  // Pieces are subwords: they concatenate back to the sentence with "▁" for the spaces.
  const std::string sentence = "Zwei junge Männer spielen Fußball.";
  const std::vector<std::string> pieces = tok.pieces(sentence);
  const std::vector<std::int64_t> ids = tok.encode(sentence);
  REQUIRE(pieces.size() == ids.size());
  std::string joined;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    CHECK(tok.id_to_piece(ids[i]) == pieces[i]);
    joined += pieces[i];
  }
  CHECK(joined == "▁Zwei▁junge▁Männer▁spielen▁Fußball.");
  CHECK(tok.decode(ids) == sentence);

  // Sentences the model was not trained on (the validation sets) round-trip too, except those
  // with a character that never occurs in the slice.
  for (const char* file : {"/multi30k/valid.de", "/multi30k/valid.en"}) {
    INFO(file);
    const std::vector<std::string> lines = first_lines(kCorpora + file, 300);
    const std::size_t clean = check_round_trips(tok, lines);
    // Nearly every validation line uses only characters of the training slice.
    CHECK(clean >= lines.size() * 9 / 10);
  }
}

TEST_CASE("decode skips pad and BOS and EOS and rejects unknown ids", "[data][tokenizer][errors]") {
  TempDir dir("tok-decode");
  const Tokenizer tok =
      Tokenizer::train(german_english_slice(dir), dir / "spm.model", kVocabSize, "unigram");
  const std::vector<std::int64_t> ids = tok.encode("Ein Hund rennt.");
  std::vector<std::int64_t> decorated = {kBosId};
  decorated.insert(decorated.end(), ids.begin(), ids.end());
  decorated.insert(decorated.end(), {kEosId, kPadId, kPadId});
  CHECK(tok.decode(decorated) == "Ein Hund rennt.");
  CHECK(tok.decode({}).empty());
  REQUIRE_THROWS_WITH(tok.decode({5, kVocabSize}), Contains("id 500 is outside the vocabulary [0, 500)"));
  REQUIRE_THROWS_WITH(tok.decode({-1}), Contains("outside the vocabulary"));
  REQUIRE_THROWS_AS(tok.id_to_piece(kVocabSize), std::invalid_argument);
}

TEST_CASE("a saved tokenizer loads and gives identical ids", "[data][tokenizer]") {
  TempDir dir("tok-load");
  const std::string model = dir / "run/spm.model";  // run/ does not exist yet
  const Tokenizer trained = Tokenizer::train(german_english_slice(dir), model, kVocabSize, "unigram");
  // Only the model and its readable vocabulary are left in the run directory: no temporary files.
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir.path / "run"))
    files.insert(entry.path().filename().string());
  CHECK(files == std::set<std::string>{"spm.model", "spm.vocab"});

  const Tokenizer loaded = Tokenizer::load(model);
  CHECK(loaded.vocab_size() == trained.vocab_size());
  CHECK(loaded.model_path() == model);
  for (const std::string& line : first_lines(kCorpora + "/multi30k/test.de", 50)) {
    INFO(line);
    CHECK(loaded.encode(line) == trained.encode(line));
  }
}

TEST_CASE("training is deterministic for a given seed", "[data][tokenizer]") {
  TempDir dir("tok-determinism");
  const std::vector<std::string> files = german_english_slice(dir);
  // Two runs with the same training files, settings and seed (each in its own run directory).
  Tokenizer::train(files, dir / "a/spm.model", kVocabSize, "unigram", 7);
  Tokenizer::train(files, dir / "b/spm.model", kVocabSize, "unigram", 7);
  const std::string a = read_file(dir / "a/spm.model"), b = read_file(dir / "b/spm.model");
  REQUIRE(!a.empty());
  CHECK((a == b));  // parenthesised: on failure Catch prints "false", not two binary files
  CHECK(read_file(dir / "a/spm.vocab") == read_file(dir / "b/spm.vocab"));
}

TEST_CASE("load_or_train reuses the model already in the run directory", "[data][tokenizer]") {
  TempDir dir("tok-reuse");
  const std::vector<std::string> files = german_english_slice(dir);
  const std::string model = dir / "spm.model";
  Tokenizer::train(files, model, kVocabSize, "unigram");
  const std::string before = read_file(model);
  // A different vocabulary size would train a different model: the existing one must be used.
  const Tokenizer resumed = Tokenizer::load_or_train(files, model, 2 * kVocabSize, "unigram");
  CHECK(resumed.vocab_size() == kVocabSize);
  CHECK(read_file(model) == before);
  // Without a model, load_or_train trains one (BPE here only because it trains faster).
  const Tokenizer fresh = Tokenizer::load_or_train(files, dir / "new.model", 300, "bpe");
  CHECK(fresh.vocab_size() == 300);
}

TEST_CASE("a BPE tokenizer round trips too", "[data][tokenizer]") {
  TempDir dir("tok-bpe");
  const Tokenizer tok =
      Tokenizer::train(german_english_slice(dir), dir / "spm.model", kVocabSize, "bpe");
  CHECK(tok.vocab_size() == kVocabSize);
  CHECK(tok.id_to_piece(kEosId) == "</s>");
  const std::vector<std::string> lines = first_lines(kCorpora + "/multi30k/valid.en", 200);
  CHECK(check_round_trips(tok, lines) >= lines.size() * 9 / 10);
}

TEST_CASE("Chinese sentences round trip with their full width punctuation", "[data][tokenizer]") {
  TempDir dir("tok-chinese");
  const std::vector<std::string> files = {
      write_slice(dir, "train.zh", kCorpora + "/tatoeba-cmn-eng/train.zh", kChineseSliceLines),
      write_slice(dir, "train.en", kCorpora + "/tatoeba-cmn-eng/train.en", kChineseSliceLines)};
  const Tokenizer tok = Tokenizer::train(files, dir / "spm.model", kChineseVocabSize, "unigram");
  // Every training line round-trips: character_coverage 1.0 keeps every character, and the
  // identity normalisation keeps "！" and "？" (NFKC would make them "!" and "?").
  const std::vector<std::string> lines = first_lines(files[0], kChineseSliceLines);
  CHECK(check_round_trips(tok, lines) == lines.size());
  CHECK(tok.decode(tok.encode("你好！你好吗？")) == "你好！你好吗？");
  // A character outside the training slice becomes <unk>.
  const std::vector<std::int64_t> ids = tok.encode("龘");
  CHECK(std::find(ids.begin(), ids.end(), kUnkId) != ids.end());
}

TEST_CASE("Tokenizer load names a missing or corrupt model file", "[data][tokenizer][errors]") {
  TempDir dir("tok-load-errors");
  const std::string missing = dir / "spm.model";
  REQUIRE_THROWS_AS(Tokenizer::load(missing), std::runtime_error);
  REQUIRE_THROWS_WITH(Tokenizer::load(missing), Contains("not found") && Contains(missing));
  const std::string corrupt = dir / "corrupt.model";
  std::ofstream(corrupt, std::ios::binary) << "this is not a sentencepiece model";
  REQUIRE_THROWS_WITH(Tokenizer::load(corrupt),
                      Contains(corrupt) && Contains("not a valid SentencePiece model"));
}

TEST_CASE("Tokenizer train rejects bad settings with a clear message", "[data][tokenizer][errors]") {
  TempDir dir("tok-train-errors");
  const std::vector<std::string> files = german_english_slice(dir);
  const std::string model = dir / "spm.model";
  REQUIRE_THROWS_WITH(Tokenizer::train(files, model, kVocabSize, "wordpiece"),
                      Contains("model_type must be \"unigram\" or \"bpe\", got \"wordpiece\""));
  REQUIRE_THROWS_WITH(Tokenizer::train(files, model, 3, "unigram"), Contains("vocab_size"));
  const std::string missing = dir / "missing.txt";
  REQUIRE_THROWS_WITH(Tokenizer::train({missing}, model, kVocabSize, "unigram"),
                      Contains("not found") && Contains(missing));
  // More pieces than the text can supply: SentencePiece's own message is passed on, and no model
  // (nor a temporary file) is left behind.
  const std::string tiny = dir / "tiny.txt";
  std::ofstream(tiny) << "ab ab ab\nba ba\n";
  REQUIRE_THROWS_WITH(Tokenizer::train({tiny}, model, kVocabSize, "unigram"),
                      Contains("SentencePiece failed to train") && Contains(model));
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    const std::string name = entry.path().filename().string();
    INFO(name);
    CHECK((name == "train.de" || name == "train.en" || name == "tiny.txt"));
  }
}
