// Tests for data/corpus: UTF-8 validation, reading parallel files with every error a student can
// meet (missing file, misaligned files, invalid UTF-8, empty corpus), filtering pairs, and reading
// the shipped corpora.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "test_util.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using sf::data::CorpusError;

namespace {

using sf::test::TempDir;  // tests/test_util.h

const std::string kCorpora = SCRATCHFORMER_CORPORA;

}  // namespace

TEST_CASE("valid_utf8 accepts well formed text", "[data][corpus]") {
  CHECK(sf::data::valid_utf8(""));
  CHECK(sf::data::valid_utf8("Two young men."));
  CHECK(sf::data::valid_utf8("Zwei junge weiße Männer"));      // 2-byte sequences
  CHECK(sf::data::valid_utf8("我喜欢猫。"));                     // 3-byte sequences
  CHECK(sf::data::valid_utf8("\xF0\x9F\x98\x80 smile"));        // U+1F600, 4 bytes
  CHECK(sf::data::valid_utf8("\xF4\x8F\xBF\xBF"));              // U+10FFFF, the largest
  CHECK(sf::data::valid_utf8("\xEF\xBF\xBD"));                  // U+FFFD
}

TEST_CASE("valid_utf8 finds the first bad byte", "[data][corpus][errors]") {
  struct Case {
    std::string text;
    std::size_t bad_offset;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"ab\xFF", 2, "0xFF never occurs in UTF-8"},
      {"\x80x", 0, "a continuation byte cannot start a character"},
      {"M\xC3", 1, "a 2-byte sequence cut short by the end"},
      {"M\xC3x", 1, "a 2-byte sequence whose second byte is not a continuation"},
      {"ok \xC0\x80", 3, "overlong encoding of U+0000"},
      {"\xE0\x80\xAF", 0, "overlong 3-byte encoding of '/'"},
      {"中\xED\xA0\x80", 3, "a UTF-16 surrogate (U+D800)"},
      {"\xF4\x90\x80\x80", 0, "above U+10FFFF"},
      {"\xF8\x88\x80\x80\x80", 0, "5-byte forms are not UTF-8"},
      {"\xE4\xB8\xAD\xE6\x96", 3, "the second character cut short"},
  };
  for (const Case& c : cases) {
    INFO(c.why);
    std::size_t offset = 12345;
    CHECK_FALSE(sf::data::valid_utf8(c.text, &offset));
    CHECK(offset == c.bad_offset);
  }
}

TEST_CASE("read_parallel reads aligned files and strips line endings", "[data][corpus]") {
  TempDir dir("corpus-read");
  // CRLF endings, a UTF-8 byte-order mark, and a last line without a newline.
  const std::string de = dir.write("a.de", "\xEF\xBB\xBFZwei Männer.\r\nEin Hund.\r\n\r\nDrei");
  const std::string en = dir.write("a.en", "Two men.\nA dog.\n\nThree\n");
  const sf::data::ParallelCorpus corpus = sf::data::read_parallel(de, en);
  CHECK(corpus.src == std::vector<std::string>{"Zwei Männer.", "Ein Hund.", "", "Drei"});
  CHECK(corpus.tgt == std::vector<std::string>{"Two men.", "A dog.", "", "Three"});
  CHECK(corpus.size() == 4);
  CHECK(corpus.src_path == de);
  CHECK(corpus.tgt_path == en);
}

TEST_CASE("read_parallel names a missing file", "[data][corpus][errors]") {
  TempDir dir("corpus-missing");
  const std::string en = dir.write("a.en", "A dog.\n");
  const std::string missing = (dir.path / "no-such-file.de").string();
  REQUIRE_THROWS_AS(sf::data::read_parallel(missing, en), CorpusError);
  REQUIRE_THROWS_WITH(sf::data::read_parallel(missing, en),
                      Contains("not found") && Contains(missing));
  REQUIRE_THROWS_WITH(sf::data::read_parallel(en, missing), Contains(missing));
  REQUIRE_THROWS_WITH(sf::data::read_parallel(dir.path.string(), en),
                      Contains("is a directory"));
}

TEST_CASE("read_parallel reports unequal line counts with both paths and counts",
          "[data][corpus][errors]") {
  TempDir dir("corpus-unequal");
  const std::string de = dir.write("train.de", "Eins.\nZwei.\nDrei.\n");
  const std::string en = dir.write("train.en", "One.\nTwo.\n");
  REQUIRE_THROWS_AS(sf::data::read_parallel(de, en), CorpusError);
  REQUIRE_THROWS_WITH(sf::data::read_parallel(de, en),
                      Contains(de + " has 3 lines but " + en + " has 2"));
}

TEST_CASE("read_parallel reports invalid UTF-8 with file line and byte", "[data][corpus][errors]") {
  TempDir dir("corpus-utf8");
  // Line 3 is "Mänär." with its second ä in Latin-1 (0xE4). Bytes of the line, counted from 1:
  // M=1, ä=2-3 (C3 A4, valid UTF-8), n=4, 0xE4=5. UTF-8 reads 0xE4 as the start of a 3-byte
  // sequence, but "r" is not a continuation byte, so byte 5 is where the line goes wrong.
  const std::string de = dir.write("train.de", "Eins.\nZwei.\nM\xC3\xA4n\xE4r.\n");
  const std::string en = dir.write("train.en", "One.\nTwo.\nMen.\n");
  REQUIRE_THROWS_AS(sf::data::read_parallel(de, en), CorpusError);
  REQUIRE_THROWS_WITH(sf::data::read_parallel(de, en),
                      Contains(de + " line 3: invalid UTF-8 at byte 5 (0xe4)"));
  // The target file is checked too.
  REQUIRE_THROWS_WITH(sf::data::read_parallel(en, de), Contains(de + " line 3"));
}

TEST_CASE("read_parallel rejects an empty corpus", "[data][corpus][errors]") {
  TempDir dir("corpus-empty");
  const std::string de = dir.write("train.de", "");
  const std::string en = dir.write("train.en", "");
  REQUIRE_THROWS_AS(sf::data::read_parallel(de, en), CorpusError);
  REQUIRE_THROWS_WITH(sf::data::read_parallel(de, en),
                      Contains("empty corpus") && Contains(de) && Contains(en));
  // One empty side is a misalignment, reported with both counts.
  const std::string en1 = dir.write("one.en", "One.\n");
  REQUIRE_THROWS_WITH(sf::data::read_parallel(de, en1),
                      Contains(de + " has 0 lines but " + en1 + " has 1"));
}

TEST_CASE("filter_pairs drops empty and over long pairs and keeps alignment", "[data][corpus]") {
  sf::data::ParallelCorpus corpus;
  corpus.src = {"a", "", "c c c c", "d", "e", "f f", "g"};
  corpus.tgt = {"A", "B", "C", "", "E E E E", "F", ""};
  corpus.src_path = "x.de";
  corpus.tgt_path = "x.en";
  // Token ids stand in for an encoding: one id per word, the pair index times 10 plus position.
  std::vector<std::vector<std::int64_t>> src = {{10}, {}, {20, 21, 22, 23}, {30}, {40}, {50, 51}, {60}};
  std::vector<std::vector<std::int64_t>> tgt = {{11}, {12}, {25}, {}, {41, 42, 43, 44}, {55}, {}};
  const sf::data::FilterReport report = sf::data::filter_pairs(corpus, src, tgt, 3);
  // Kept: pairs 0 and 5. Empty: 1 (src), 3 (tgt), 6 (tgt). Too long: 2 (src 4 > 3), 4 (tgt 4 > 3).
  CHECK(report.kept == 2);
  CHECK(report.empty == 3);
  CHECK(report.too_long == 2);
  CHECK(report.total() == 7);
  CHECK(corpus.src == std::vector<std::string>{"a", "f f"});
  CHECK(corpus.tgt == std::vector<std::string>{"A", "F"});
  CHECK(src == std::vector<std::vector<std::int64_t>>{{10}, {50, 51}});
  CHECK(tgt == std::vector<std::vector<std::int64_t>>{{11}, {55}});
  CHECK(report.summary(3) == "kept 2 of 7 pairs (3 with an empty side, 2 longer than 3 tokens)");
}

TEST_CASE("filter_pairs counts a pair that is empty and too long as empty", "[data][corpus]") {
  sf::data::ParallelCorpus corpus;
  corpus.src = {"x x x", "y"};
  corpus.tgt = {"", "Y"};
  std::vector<std::vector<std::int64_t>> src = {{4, 4, 4}, {5}}, tgt = {{}, {6}};
  const sf::data::FilterReport report = sf::data::filter_pairs(corpus, src, tgt, 2);
  CHECK(report.kept == 1);
  CHECK(report.empty == 1);
  CHECK(report.too_long == 0);
}

TEST_CASE("filter_pairs rejects bad arguments and an all filtered corpus", "[data][corpus][errors]") {
  sf::data::ParallelCorpus corpus;
  corpus.src = {"", "b"};
  corpus.tgt = {"A", "B B B"};
  corpus.src_path = "x.de";
  corpus.tgt_path = "x.en";
  std::vector<std::vector<std::int64_t>> src = {{}, {7}}, tgt = {{8}, {9, 9, 9}};
  std::vector<std::vector<std::int64_t>> short_src = {{7}};
  REQUIRE_THROWS_AS(sf::data::filter_pairs(corpus, short_src, tgt, 5), std::invalid_argument);
  REQUIRE_THROWS_AS(sf::data::filter_pairs(corpus, src, tgt, 0), std::invalid_argument);
  REQUIRE_THROWS_WITH(sf::data::filter_pairs(corpus, src, tgt, 2),
                      Contains("x.de") && Contains("x.en") &&
                          Contains("kept 0 of 2 pairs (1 with an empty side, 1 longer than 2 tokens)"));
}

TEST_CASE("the shipped Multi30k and Tatoeba corpora read with the expected sizes", "[data][corpus]") {
  const sf::data::ParallelCorpus train =
      sf::data::read_parallel(kCorpora + "/multi30k/train.de", kCorpora + "/multi30k/train.en");
  CHECK(train.size() == 29000);
  CHECK(train.src.front() == "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.");
  CHECK(train.tgt.front() == "Two young, White males are outside near many bushes.");
  const sf::data::ParallelCorpus valid =
      sf::data::read_parallel(kCorpora + "/multi30k/valid.de", kCorpora + "/multi30k/valid.en");
  CHECK(valid.size() == 1014);
  const sf::data::ParallelCorpus test =
      sf::data::read_parallel(kCorpora + "/multi30k/test.de", kCorpora + "/multi30k/test.en");
  CHECK(test.size() == 1000);
  const sf::data::ParallelCorpus zh = sf::data::read_parallel(
      kCorpora + "/tatoeba-cmn-eng/train.zh", kCorpora + "/tatoeba-cmn-eng/train.en");
  CHECK(zh.size() == 27155);
  CHECK(zh.src.front() == "嗨。");
}
