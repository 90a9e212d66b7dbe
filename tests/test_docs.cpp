// The maps a newcomer reads first name what really exists: docs/concepts.md (both languages)
// names files, the functions in them, test cases and ctest labels; the README's "Layout"
// section names the folders of the tree. A rename that forgets the docs fails here.
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace fs = std::filesystem;
using sf::test::read_file;

namespace {

const fs::path kRoot = SCRATCHFORMER_SOURCE_DIR;

// Every TEST_CASE / SCENARIO name in tests/*.cpp.
std::set<std::string> test_case_names() {
  std::set<std::string> names;
  const std::regex test_case(R"rx((?:TEST_CASE|SCENARIO)\s*\(\s*"((?:[^"\\]|\\.)*)")rx");
  for (const auto& entry : fs::directory_iterator(kRoot / "tests")) {
    if (entry.path().extension() != ".cpp") continue;
    const std::string text = read_file(entry.path().string());
    for (std::sregex_iterator it(text.begin(), text.end(), test_case), end; it != end; ++it) names.insert((*it)[1]);
  }
  return names;
}

// The declared test topics (tests/TAGS.txt): the first word of each non-comment line.
std::set<std::string> declared_tags() {
  std::set<std::string> tags;
  const std::regex word(R"(^([a-z0-9_]+))");
  const std::string text = read_file((kRoot / "tests" / "TAGS.txt").string());
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, word)) tags.insert(m[1]);
  return tags;
}

// The table rows of docs/concepts.md (lines starting with "| " that are not the header rule).
std::vector<std::string> concept_rows() {
  std::vector<std::string> rows;
  std::istringstream in(read_file((kRoot / "docs" / "concepts.md").string()));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("| ", 0) == 0 && line.find("---") == std::string::npos) rows.push_back(line);
  return rows;
}

// "`nn/attention.cpp`: `attention_weights`, `scaled_dot_product_attention`" -> the file and the
// names after it (English ": " and ", ", or Chinese "：" and "、").
struct FileAndNames {
  std::string file;
  std::vector<std::string> names;
};
std::vector<FileAndNames> files_with_functions(const std::string& row) {
  std::vector<FileAndNames> out;
  const std::regex group(R"(`([a-z_]+/[A-Za-z0-9_/.]+\.(?:cpp|h))`(?:: |：)((?:`[^`]+`(?:, |、)?)+))");
  const std::regex name(R"(`([^`]+)`)");
  for (std::sregex_iterator it(row.begin(), row.end(), group), end; it != end; ++it) {
    FileAndNames f{(*it)[1], {}};
    const std::string list = (*it)[2];
    for (std::sregex_iterator n(list.begin(), list.end(), name); n != end; ++n) f.names.push_back((*n)[1]);
    out.push_back(f);
  }
  return out;
}

// The identifier a name refers to: "Embedding::forward" -> "forward", "DecoderCache::reorder" ->
// "reorder"; names that are not identifiers (formulas such as `E[ids] * sqrt(D)`) -> "".
std::string identifier_of(const std::string& name) {
  static const std::regex ident(R"(^(?:[A-Za-z_][A-Za-z0-9_]*::)*([A-Za-z_][A-Za-z0-9_]*)$)");
  std::smatch m;
  return std::regex_match(name, m, ident) ? std::string(m[1]) : std::string();
}

}  // namespace

TEST_CASE("docs concepts map names files and functions that exist", "[docs]") {
  const auto rows = concept_rows();
  REQUIRE(rows.size() > 40);  // both languages' tables
  std::size_t checked = 0;
  const std::regex any_path(R"(`((?:autograd|nn|data|train|tests|tools|configs|docs)/[A-Za-z0-9_/.-]+\.(?:cpp|h|py|toml|md))`)");
  for (const std::string& row : rows) {
    for (std::sregex_iterator it(row.begin(), row.end(), any_path), end; it != end; ++it) {
      INFO(row);
      CHECK(fs::exists(kRoot / std::string((*it)[1])));
    }
    for (const FileAndNames& f : files_with_functions(row)) {
      if (!fs::exists(kRoot / f.file)) continue;  // reported above
      const std::string text = read_file((kRoot / f.file).string());
      for (const std::string& n : f.names) {
        const std::string id = identifier_of(n);
        if (id.empty()) continue;
        INFO(f.file << " should hold `" << n << "` (named in docs/concepts.md)");
        CHECK(std::regex_search(text, std::regex("\\b" + id + "\\b")));
        ++checked;
      }
    }
  }
  CHECK(checked > 50);
}

TEST_CASE("docs concepts map quotes test cases that exist and labels that are declared", "[docs]") {
  const auto names = test_case_names();
  const auto tags = declared_tags();
  const std::regex quoted(R"rx("([^"]+)")rx");
  const std::regex last_cell(R"(\|\s*`([a-z0-9_]+)`\s*\|\s*$)");
  std::size_t tests = 0, labels = 0;
  for (const std::string& row : concept_rows()) {
    for (std::sregex_iterator it(row.begin(), row.end(), quoted), end; it != end; ++it) {
      INFO("docs/concepts.md quotes the test \"" << (*it)[1] << "\"");
      CHECK(names.count((*it)[1]) == 1);
      ++tests;
    }
    std::smatch m;
    if (std::regex_search(row, m, last_cell)) {
      INFO("docs/concepts.md gives the ctest label " << m[1]);
      CHECK(tags.count(m[1]) == 1);
      ++labels;
    }
  }
  CHECK(tests > 50);
  CHECK(labels > 40);
}

TEST_CASE("README layout section names every folder of the tree and only those", "[docs]") {
  const std::string readme = read_file((kRoot / "README.md").string());
  const auto start = readme.find("\n## Layout");
  REQUIRE(start != std::string::npos);
  const auto block = readme.find("```", start);
  const auto block_end = readme.find("```", block + 3);
  REQUIRE(block_end != std::string::npos);
  std::istringstream in(readme.substr(block + 3, block_end - block - 3));
  std::set<std::string> listed;
  std::string line;
  const std::regex folder(R"(^([a-z_]+(?:/[a-z_]+)*)/\s)");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, folder)) listed.insert(m[1]);
  for (const std::string& f : listed) {
    INFO("README Layout lists " << f << "/");
    CHECK(fs::is_directory(kRoot / f));
  }
  // every folder of the library code (autograd, nn, data, train and their subfolders) is listed
  for (const std::string top : {"autograd", "nn", "data", "train"}) {
    CHECK(listed.count(top) == 1);
    for (const auto& entry : fs::directory_iterator(kRoot / top)) {
      if (!entry.is_directory() || entry.path().filename() == "corpora") continue;
      const std::string rel = top + "/" + entry.path().filename().string();
      INFO("folder " << rel << "/ is missing from the README's Layout section");
      CHECK(listed.count(rel) == 1);
    }
  }
}
