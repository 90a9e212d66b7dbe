// The maps a newcomer reads first name what really exists: docs/concepts.md (both languages)
// names files, the functions in them, test cases and ctest labels; the README's "Layout"
// section names the folders of the tree, its "Presets" table the presets of CMakePresets.json. A
// rename that forgets the docs fails here. The README stays a guide (at most 300 lines, no
// machines, dates or sessions: those are logged in docs/results.md and docs/speed.md). Each
// Chinese page (README.zh-CN.md and the docs/*.zh-CN.md pages) gives the same commands as its
// English page and links to it, so the two languages cannot drift apart. Every relative link of
// the README and the docs/ pages leads to a file of the repository.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
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

namespace {

// The folders listed in the code block under `heading` ("## Layout") of a README: the first word
// of each line that starts with "folder/"; none when the heading or its block is missing.
std::set<std::string> layout_folders(const std::string& readme, const std::string& heading) {
  std::set<std::string> listed;
  const auto start = readme.find("\n" + heading + "\n");
  if (start == std::string::npos) return listed;
  const auto block = readme.find("```", start);
  const auto block_end = block == std::string::npos ? block : readme.find("```", block + 3);
  if (block_end == std::string::npos) return listed;
  std::istringstream in(readme.substr(block + 3, block_end - block - 3));
  const std::regex folder(R"(^([a-z_]+(?:/[a-z_]+)*)/\s)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, folder)) listed.insert(m[1]);
  return listed;
}

}  // namespace

TEST_CASE("README layout section names every folder of the tree and only those", "[docs]") {
  const std::set<std::string> listed = layout_folders(read_file((kRoot / "README.md").string()), "## Layout");
  REQUIRE(!listed.empty());
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

// ---- docs/debugging.md: the gdb walkthrough quotes code that is still there ---------------------

namespace {

// The lines of a file, or none if it cannot be read.
std::vector<std::string> lines_of(const fs::path& path) {
  std::vector<std::string> out;
  if (!fs::exists(path)) return out;
  std::istringstream in(read_file(path.string()));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string trimmed(const std::string& s) {
  const auto a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// A repository path inside a gdb line ("at /home/you/scratchformer/nn/attention.cpp:12",
// "file nn/attention.cpp, line 12") without what comes before the top folder.
const std::regex kSourcePath(R"(((?:autograd|nn|data|train|tests|tools)/[A-Za-z0-9_/.-]+\.(?:cpp|h|py|sh)))");

// Whether some source file of the library or the tests holds `pattern` (and `also`, if given).
bool source_holds(const std::regex& pattern, const std::optional<std::regex>& also = std::nullopt) {
  for (const char* top : {"autograd", "nn", "data", "train", "tests"})
    for (const auto& entry : fs::recursive_directory_iterator(kRoot / top)) {
      const auto ext = entry.path().extension();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
      const std::string text = read_file(entry.path().string());
      if (std::regex_search(text, pattern) && (!also || std::regex_search(text, *also))) return true;
    }
  return false;
}

}  // namespace

TEST_CASE("docs debugging walkthrough names functions, files and source lines that exist", "[docs][gdb]") {
  // the English page and its Chinese translation (the same transcripts, the prose translated)
  const std::string page = GENERATE(as<std::string>{}, "debugging.md", "debugging.zh-CN.md");
  const std::vector<std::string> doc = lines_of(kRoot / "docs" / page);
  REQUIRE(doc.size() > 100);
  const std::regex file_line(R"(((?:autograd|nn|data|train|tests|tools)/[A-Za-z0-9_/.-]+\.(?:cpp|h)):([0-9]+))");
  const std::regex listing(R"(^(?:[0-9]+|…)\t(.*)$)");  // gdb's "LINE<TAB>source" ("…" where the number is left out)
  const std::regex breakpoint(R"(^\(gdb\) (?:break|tbreak|advance) ([A-Za-z_:][A-Za-z0-9_:]*)\s*$)");
  const std::regex backticked(R"(`((?:autograd|nn|data|train|tests|tools|configs|docs)/[A-Za-z0-9_/.-]+\.(?:cpp|h|py|sh|toml|md))`)");
  std::string current_file;  // the file of the last frame or breakpoint line above
  std::size_t quoted = 0, functions = 0;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const std::string& line = doc[i];
    INFO("docs/" << page << ":" << i + 1 << ": " << line);
    std::smatch m;
    for (std::sregex_iterator it(line.begin(), line.end(), file_line), end; it != end; ++it) {
      // a FILE:LINE left in the doc must land on the line it shows (the listing below it, if any)
      const auto file = lines_of(kRoot / std::string((*it)[1]));
      const std::size_t n = std::stoul((*it)[2]);
      CHECK(n <= file.size());
      std::smatch next;
      if (i + 1 < doc.size() && std::regex_match(doc[i + 1], next, listing) && n <= file.size())
        CHECK(trimmed(file[n - 1]) == trimmed(next[1]));
    }
    for (std::sregex_iterator it(line.begin(), line.end(), backticked), end; it != end; ++it)
      CHECK(fs::exists(kRoot / std::string((*it)[1])));
    if (std::regex_search(line, m, kSourcePath) && line.rfind("(gdb)", 0) != 0) current_file = m[1];
    if (std::regex_match(line, m, listing) && !current_file.empty()) {
      // a source line gdb listed is still in that file
      const auto file = lines_of(kRoot / current_file);
      const std::string code = trimmed(m[1]);
      INFO("expected in " << current_file << ": " << code);
      CHECK(std::any_of(file.begin(), file.end(), [&](const std::string& l) { return trimmed(l) == code; }));
      ++quoted;
    }
    if (std::regex_match(line, m, breakpoint)) {
      // `break sf::nn::MultiHeadAttention::forward` -> "MultiHeadAttention::forward" is defined
      // somewhere; `break weights_of` -> "weights_of(" is
      std::string name = m[1];
      const auto last = name.rfind("::");
      const auto previous = last == std::string::npos ? std::string::npos : name.rfind("::", last - 1);
      const std::string tail = previous == std::string::npos ? name : name.substr(previous + 2);
      INFO("the function `" << name << "` a breakpoint names");
      const auto sep = tail.find("::");
      // defined out of class (Class::method(...)), or in the class body (struct Class ... method(...))
      CHECK((source_holds(std::regex("\\b" + tail + "\\s*\\(")) ||
             (sep != std::string::npos &&
              source_holds(std::regex("(?:struct|class)\\s+" + tail.substr(0, sep) + "\\b"),
                           std::regex("\\b" + tail.substr(sep + 2) + "\\s*\\(")))));
      ++functions;
    }
  }
  CHECK(quoted > 10);
  CHECK(functions >= 5);
  // the gdb commands the page uses are defined by the printers
  const std::string printers = read_file((kRoot / "tools" / "gdb" / "scratchformer_printers.py").string());
  for (const char* command : {"sf-print", "sf-graph", "sf-grad"}) {
    INFO("docs/" << page << " uses " << command);
    CHECK(printers.find("\"" + std::string(command) + "\", gdb.COMMAND_DATA") != std::string::npos);
  }
}

// ---- README.zh-CN.md and docs/debugging.zh-CN.md: the same commands, linked both ways -----------

namespace {

// The first line inside the code block that follows the line holding `marker`, found the way
// .ci/run's awk finds the README's test command; "" when there is none.
std::string command_after_marker(const std::vector<std::string>& lines, const std::string& marker) {
  bool found = false, inside = false;
  for (const std::string& line : lines) {
    if (line.find(marker) != std::string::npos) {
      found = true;
    } else if (found && line.rfind("```", 0) == 0) {
      if (inside) return "";
      inside = true;
    } else if (inside) {
      return line;
    }
  }
  return "";
}

// The command lines of a page's fenced code blocks: lines (backslash continuations joined, a
// trailing "  # comment" cut off, so a translated comment changes nothing) that run a program of
// the build tree (build/release/scratchformer, build/debug/tests/...) or a script in tools/.
std::set<std::string> command_lines(const std::vector<std::string>& lines) {
  static const std::regex comment(R"(\s+#\s.*$)");
  static const std::regex command(R"((?:^|[\s|])(?:build/[a-z]+/|tools/)\S)");
  std::set<std::string> commands;
  bool inside = false;
  std::string joined;
  for (const std::string& line : lines) {
    if (line.rfind("```", 0) == 0) {
      inside = !inside;
      joined.clear();
      continue;
    }
    if (!inside) continue;
    joined += trimmed(line);
    if (!joined.empty() && joined.back() == '\\') {
      joined.back() = ' ';
      continue;
    }
    const std::string cmd = trimmed(std::regex_replace(joined, comment, ""));
    joined.clear();
    if (cmd.rfind("#", 0) != 0 && std::regex_search(cmd, command)) commands.insert(cmd);
  }
  return commands;
}

// Whether one of the first five lines of a page links to `target`: "[...](target)".
bool links_at_top(const std::vector<std::string>& lines, const std::string& target) {
  for (std::size_t i = 0; i < lines.size() && i < 5; ++i)
    if (lines[i].find("](" + target + ")") != std::string::npos) return true;
  return false;
}

// Each English page and its Chinese translation.
const std::vector<std::pair<fs::path, fs::path>> kTranslatedPages = {
    {"README.md", "README.zh-CN.md"},
    {fs::path("docs") / "debugging.md", fs::path("docs") / "debugging.zh-CN.md"},
    {fs::path("docs") / "guide.md", fs::path("docs") / "guide.zh-CN.md"},
    {fs::path("docs") / "architectures.md", fs::path("docs") / "architectures.zh-CN.md"},
    {fs::path("docs") / "classroom.md", fs::path("docs") / "classroom.zh-CN.md"},
    {fs::path("docs") / "results.md", fs::path("docs") / "results.zh-CN.md"},
    {fs::path("docs") / "speed.md", fs::path("docs") / "speed.zh-CN.md"},
    {fs::path("docs") / "install.md", fs::path("docs") / "install.zh-CN.md"}};

// Every command line of one page is on the other, both ways.
void check_same_commands(const fs::path& english, const fs::path& chinese) {
  const std::set<std::string> en = command_lines(lines_of(kRoot / english)), zh = command_lines(lines_of(kRoot / chinese));
  for (const std::string& c : en) {
    INFO(english.string() << " runs a command that " << chinese.string() << " does not: " << c);
    CHECK(zh.count(c) == 1);
  }
  for (const std::string& c : zh) {
    INFO(chinese.string() << " runs a command that " << english.string() << " does not: " << c);
    CHECK(en.count(c) == 1);
  }
}

}  // namespace

TEST_CASE("README.zh-CN.md gives the main and test commands exactly as README.md does", "[docs]") {
  const auto en = lines_of(kRoot / "README.md"), zh = lines_of(kRoot / "README.zh-CN.md");
  REQUIRE(zh.size() > 100);
  for (const char* marker : {"<!-- main-command -->", "<!-- test-command -->"}) {
    const std::string english = command_after_marker(en, marker), chinese = command_after_marker(zh, marker);
    INFO("the first line of the code block after " << marker << ": README.md has \"" << english
         << "\", README.zh-CN.md has \"" << chinese << "\"");
    CHECK(english.rfind("tools/install-deps.sh && ", 0) == 0);
    CHECK(chinese == english);
  }
}

TEST_CASE("README.zh-CN.md and the docs/*.zh-CN.md pages run the same command lines as the English pages", "[docs]") {
  const auto readme = command_lines(lines_of(kRoot / "README.md"));
  CHECK(readme.size() >= 10);  // the ten-minute tour
  CHECK(readme.count("build/release/scratchformer train --config configs/reverse.toml") == 1);
  CHECK(command_lines(lines_of(kRoot / "docs" / "debugging.md")).size() >= 4);
  // the README with the guide pages its long sections moved to: together they run as many
  // command lines as the README alone used to (more than 30), so the comparison is not vacuous
  std::size_t guide_commands = readme.size();
  for (const auto& [english, chinese] : kTranslatedPages) {
    check_same_commands(english, chinese);
    if (english.parent_path() == fs::path("docs") && english.filename() != fs::path("debugging.md"))
      guide_commands += command_lines(lines_of(kRoot / english)).size();
  }
  CHECK(guide_commands > 50);
  // the Chinese README's Layout section lists the same folders
  const auto en_layout = layout_folders(read_file((kRoot / "README.md").string()), "## Layout");
  const auto zh_layout = layout_folders(read_file((kRoot / "README.zh-CN.md").string()), "## 目录结构");
  INFO("the folders of README.md's Layout section and of README.zh-CN.md's 目录结构 section differ");
  CHECK(!zh_layout.empty());
  CHECK(zh_layout == en_layout);
}

TEST_CASE("the English and Chinese README and docs pages link to each other at the top", "[docs]") {
  std::vector<std::pair<fs::path, fs::path>> links;  // (page, the page it should link to)
  for (const auto& [english, chinese] : kTranslatedPages) {
    links.emplace_back(english, chinese);
    links.emplace_back(chinese, english);
  }
  for (const auto& [page, target] : links) {
    const std::string name = target.filename().string();
    INFO(page.string() << " should link to " << name << " in its first five lines: [...](" << name << ")");
    CHECK(fs::exists(kRoot / page));
    CHECK(links_at_top(lines_of(kRoot / page), name));
  }
}

// ---- the README is a guide, not a log -------------------------------------------------------------

namespace {

// The configure presets of CMakePresets.json that a user can pick (the ones with a displayName).
std::set<std::string> configure_presets() {
  std::set<std::string> names;
  const std::string text = read_file((kRoot / "CMakePresets.json").string());
  const std::regex preset(R"rx("name"\s*:\s*"([a-z0-9_-]+)"\s*,\s*"displayName")rx");
  for (std::sregex_iterator it(text.begin(), text.end(), preset), end; it != end; ++it) names.insert((*it)[1]);
  return names;
}

// The first cells ("| `debug` | ...") of the table under `heading` of a README, up to the next heading.
std::set<std::string> table_names(const std::string& readme, const std::string& heading) {
  std::set<std::string> names;
  const auto start = readme.find("\n" + heading + "\n");
  if (start == std::string::npos) return names;
  const auto next = readme.find("\n## ", start + 1);
  std::istringstream in(readme.substr(start, next == std::string::npos ? std::string::npos : next - start));
  const std::regex row(R"(^\| `([a-z0-9_-]+)` \|)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, row)) names.insert(m[1]);
  return names;
}

}  // namespace

TEST_CASE("README is a guide: short, every preset named, no machines, dates or sessions", "[docs]") {
  // STYLE.md habit 20: what it is, two commands, a ten-minute tour, where to read, one results
  // table. Measurements with their machine and date belong in docs/results.md and docs/speed.md.
  const std::set<std::string> presets = configure_presets();
  REQUIRE(presets.count("reference") == 1);
  const std::regex lab_note(R"((EPYC|Xeon|Zen \d|Sapphire Rapids|\b20\d\d-\d\d-\d\d\b|[Ss]ession \d|第 ?\d+ ?次会话|#\d))");
  const std::vector<std::pair<std::string, std::string>> readmes = {{"README.md", "## Presets"}, {"README.zh-CN.md", "## 预设"}};
  for (const auto& [page, heading] : readmes) {
    const auto lines = lines_of(kRoot / page);
    INFO(page << " has " << lines.size() << " lines; a guide reads top to bottom in ten minutes: move long sections to docs/");
    CHECK(lines.size() <= 300);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      INFO(page << ":" << i + 1 << " names a machine, a date, a session or an issue (log it in docs/results.md or docs/speed.md): " << lines[i]);
      CHECK_FALSE(std::regex_search(lines[i], lab_note));
    }
    INFO("the presets of " << page << "'s " << heading << " table and of CMakePresets.json differ");
    CHECK(table_names(read_file((kRoot / page).string()), heading) == presets);
  }
}

// ---- every relative link in the README and docs/ pages leads to a file ---------------------------

namespace {

// The targets of the Markdown links "[text](target)" and images "![alt](target)" in `text` that
// point inside the repository: web addresses and links within the same page ("#...") are left out,
// and a target's "#section" part is cut off.
std::vector<std::string> relative_link_targets(const std::string& text) {
  std::vector<std::string> targets;
  const std::regex link(R"rx(\]\(([^()\s]+)\))rx");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
    std::string target = (*it)[1];
    if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0 || target.rfind('#', 0) == 0) continue;
    targets.push_back(target.substr(0, target.find('#')));
  }
  return targets;
}

}  // namespace

TEST_CASE("README and docs pages link only to files that exist", "[docs]") {
  std::vector<fs::path> pages = {kRoot / "README.md", kRoot / "README.zh-CN.md"};
  for (const auto& entry : fs::directory_iterator(kRoot / "docs"))
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  std::size_t links = 0;
  for (const auto& page : pages)
    for (const auto& target : relative_link_targets(read_file(page.string()))) {
      ++links;
      INFO(fs::relative(page, kRoot).string() << " links to " << target << ", which is not a file of the repository");
      CHECK(fs::exists(page.parent_path() / target));
    }
  CHECK(links >= 10);  // the pages' links really were found (the regex did not silently match nothing)
}

TEST_CASE("no test name holds a semicolon, which would cut it short in ctest", "[docs]") {
  // catch_discover_tests hands each name to CMake as a list element: a ';' splits it, ctest then
  // asks Catch2 for the first part, no test matches, and the entry "passes" with nothing run.
  for (const std::string& name : test_case_names()) {
    INFO(name);
    CHECK(name.find(';') == std::string::npos);
  }
}
