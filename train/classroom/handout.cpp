// Handouts (handout.h): the marker parser, the per-file transformation, the file list and the
// all-or-nothing writer.
#include "train/classroom/handout.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "train/classroom/exercises.h"
#include "train/classroom/shell.h"

namespace sf::train {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kBegin = "// BEGIN SOLUTION";
constexpr std::string_view kEnd = "// END SOLUTION";
constexpr std::string_view kExercise = "// EXERCISE(";
constexpr std::string_view kRelated = "BEGIN RELATED(";  // after the file's comment mark
constexpr std::string_view kInstead = "HANDOUT INSTEAD:";
constexpr std::string_view kEndRelated = "END RELATED";

// One line of a file: its text without "\n" and whether a "\n" ended it.
struct Line {
  std::string text;
  bool newline = true;
};

std::vector<Line> split_lines(const std::string& text) {
  std::vector<Line> lines;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    if (end == std::string::npos) {
      lines.push_back({text.substr(at), false});
      break;
    }
    lines.push_back({text.substr(at, end - at), true});
    at = end + 1;
  }
  return lines;
}

std::string_view trimmed(std::string_view s) {
  const std::size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const std::size_t last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::string indentation(const std::string& s) { return s.substr(0, s.find_first_not_of(" \t")); }

enum class Marker { none, begin, end, exercise };

// What the line is; throws on a near miss ("// BEGIN SOLUTION here"), which would otherwise
// leave a solution in the handout.
Marker marker_of(const std::string& path, int line_no, const std::string& line) {
  const std::string_view t = trimmed(line);
  if (t == kBegin) return Marker::begin;
  if (t == kEnd) return Marker::end;
  if (t.starts_with(kBegin) || t.starts_with(kEnd))
    throw std::invalid_argument(path + ":" + std::to_string(line_no) + ": '" + std::string(t) + "': a marker stands alone on its line ('" +
                                std::string(kBegin) + "' or '" + std::string(kEnd) + "')");
  if (t.starts_with(kExercise)) return Marker::exercise;
  return Marker::none;
}

// The word of an `// EXERCISE(word): ...` line, checked against the registry.
std::string exercise_word(const std::string& path, int line_no, const std::string& line) {
  const std::string_view t = trimmed(line);
  const std::size_t close = t.find("):");
  const std::string where = path + ":" + std::to_string(line_no);
  if (close == std::string_view::npos)
    throw std::invalid_argument(where + ": '" + std::string(t.substr(0, 40)) + "': expected // EXERCISE(word): what to implement");
  const std::string word(t.substr(kExercise.size(), close - kExercise.size()));
  if (!find_exercise(word)) require_exercise(word, where + ": EXERCISE(" + word + ")");  // throws, naming the closest
  return word;
}

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error(p.string() + ": cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error(p.string() + ": cannot write");
}

std::vector<std::string> git_files(const fs::path& root) {
  const auto [out, status] =
      run_shell("git -C " + shell_quote(root.string()) + " ls-files -z --cached --others --exclude-standard", Stderr::dropped);
  if (status != 0) throw std::runtime_error(root.string() + ": `git ls-files` failed (exit status " + std::to_string(status) + ")");
  std::vector<std::string> files;
  std::size_t at = 0;
  while (at < out.size()) {
    const std::size_t end = out.find('\0', at);
    const std::string f = out.substr(at, end - at);
    // Tracked but deleted in the working tree: not part of the tree as it is.
    if (!f.empty() && fs::is_regular_file(root / f)) files.push_back(f);
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return files;
}

bool skipped_in_walk(const fs::path& name) {
  const std::string n = name.string();
  return n == ".git" || n == "runs" || n.starts_with("build");
}

std::vector<std::string> walked_files(const fs::path& root) {
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (skipped_in_walk(it->path().filename())) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(fs::relative(it->path(), root).generic_string());
  }
  return files;
}

}  // namespace

std::string read_text(const fs::path& path) { return read_file(path); }

std::vector<SolutionRegion> find_solution_regions(const std::string& path, const std::string& text) {
  std::vector<SolutionRegion> regions;
  std::string word;
  int exercise_line = 0;
  std::optional<SolutionRegion> open;
  const std::vector<Line> lines = split_lines(text);
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    const int no = i + 1;
    const std::string where = path + ":" + std::to_string(no);
    const std::string& line = lines[i].text;
    switch (marker_of(path, no, line)) {
      case Marker::exercise:
        if (open) throw std::invalid_argument(where + ": EXERCISE comment inside the solution region opened at line " + std::to_string(open->begin_line));
        word = exercise_word(path, no, line), exercise_line = no;
        break;
      case Marker::begin:
        if (open) throw std::invalid_argument(where + ": // BEGIN SOLUTION inside the region opened at line " + std::to_string(open->begin_line) + " (regions do not nest)");
        if (word.empty()) throw std::invalid_argument(where + ": // BEGIN SOLUTION with no // EXERCISE(word): comment above it in this file");
        open = SolutionRegion{word, exercise_line, no, 0, {}};
        break;
      case Marker::end:
        if (!open) throw std::invalid_argument(where + ": // END SOLUTION without a // BEGIN SOLUTION above it");
        open->end_line = no;
        regions.push_back(std::move(*open));
        open.reset();
        break;
      case Marker::none:
        if (open) open->solution.push_back(line);
        break;
    }
  }
  if (open) throw std::invalid_argument(path + ":" + std::to_string(open->begin_line) + ": // BEGIN SOLUTION has no // END SOLUTION below it");
  return regions;
}

namespace {
// "//" for C++, "#" for Python: the comment mark of a related region's lines.
std::string comment_mark(const std::string& path) { return fs::path(path).extension() == ".py" ? "#" : "//"; }

// The text after the comment mark and one space, when the trimmed line starts with the mark.
std::optional<std::string> comment_text(const std::string& line, const std::string& mark) {
  const std::string_view t = trimmed(line);
  if (!t.starts_with(mark)) return std::nullopt;
  std::string_view rest = t.substr(mark.size());
  if (rest.starts_with(" ")) rest.remove_prefix(1);
  return std::string(rest);
}
}  // namespace

std::vector<RelatedRegion> find_related_regions(const std::string& path, const std::string& text) {
  std::vector<RelatedRegion> regions;
  std::optional<RelatedRegion> open;
  const std::string mark = comment_mark(path);
  const std::vector<Line> lines = split_lines(text);
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    const int no = i + 1;
    const std::string where = path + ":" + std::to_string(no);
    const std::optional<std::string> c = comment_text(lines[i].text, mark);
    if (c && c->starts_with(kRelated)) {
      if (open) throw std::invalid_argument(where + ": BEGIN RELATED inside the region opened at line " + std::to_string(open->begin_line));
      const std::size_t close = c->find(')');
      if (close == std::string::npos) throw std::invalid_argument(where + ": expected " + mark + " BEGIN RELATED(word): why");
      const std::string word = c->substr(kRelated.size(), close - kRelated.size());
      require_exercise(word, where + ": BEGIN RELATED(" + word + ")");
      open = RelatedRegion{word, no, 0, 0};
    } else if (c && *c == kInstead) {
      if (!open || open->instead_line) throw std::invalid_argument(where + ": HANDOUT INSTEAD outside a related region, or twice in one");
      open->instead_line = no;
    } else if (c && *c == kEndRelated) {
      if (!open) throw std::invalid_argument(where + ": END RELATED without a BEGIN RELATED above it");
      open->end_line = no;
      regions.push_back(*open);
      open.reset();
    } else if (open && open->instead_line && !c && !trimmed(lines[i].text).empty()) {
      throw std::invalid_argument(where + ": the lines after HANDOUT INSTEAD are comments (" + mark + " code), up to END RELATED");
    }
  }
  if (open) throw std::invalid_argument(path + ":" + std::to_string(open->begin_line) + ": BEGIN RELATED has no END RELATED below it");
  return regions;
}

std::string resolve_related(const std::string& path, const std::string& text, const std::vector<std::string>& chosen) {
  const std::vector<RelatedRegion> regions = find_related_regions(path, text);
  if (regions.empty()) return text;
  const std::string mark = comment_mark(path);
  const std::vector<Line> lines = split_lines(text);
  std::string out;
  std::size_t next = 0;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    const int no = i + 1;
    while (next < regions.size() && no > regions[next].end_line) ++next;
    const bool inside = next < regions.size() && no >= regions[next].begin_line;
    std::string line = lines[i].text;
    if (inside) {
      const RelatedRegion& r = regions[next];
      if (no == r.begin_line || no == r.instead_line || no == r.end_line) continue;
      const bool in_instead = r.instead_line && no > r.instead_line;
      if (contains(chosen, r.word) != in_instead) continue;  // hidden code, or an unused INSTEAD line
      if (in_instead) {  // "    // code" -> "    code"
        const std::size_t at = line.find(mark);
        std::size_t cut = at + mark.size();
        if (cut < line.size() && line[cut] == ' ') ++cut;
        line = line.substr(0, at) + line.substr(cut);
        if (trimmed(line).empty()) line.clear();  // "  //" stands for an empty line
      }
    }
    out += line + (lines[i].newline ? "\n" : "");
  }
  return out;
}

std::string region_function(const std::vector<std::string>& lines, int exercise_line) {
  const auto indent = [](const std::string& l) { return l.find_first_not_of(" \t"); };
  const std::size_t inner = indent(lines.at(exercise_line - 1));
  int at = exercise_line - 2;
  while (at >= 0 && (trimmed(lines[at]).empty() || trimmed(lines[at]).starts_with("//") || indent(lines[at]) >= inner)) --at;
  while (at > 0 && lines[at].find('(') == std::string::npos) --at;
  static const std::regex name_re(R"(([A-Za-z_][A-Za-z0-9_]*)\s*\()"), struct_re(R"(^struct ([A-Za-z_][A-Za-z0-9_]*))");
  std::smatch m;
  if (at < 0 || !std::regex_search(lines[at], m, name_re)) return "";
  const std::string name = m[1];
  if (indent(lines[at]) > 0)  // a member: the struct it is in
    for (int s = at; s >= 0; --s)
      if (std::regex_search(lines[s], m, struct_re)) return m[1].str() + "::" + name;
  return name;
}

std::string handout_text(const std::string& path, const std::string& text, const std::vector<std::string>& chosen,
                         std::vector<std::string>* stubbed) {
  const std::vector<SolutionRegion> regions = find_solution_regions(path, text);  // checks every marker
  const std::vector<Line> lines = split_lines(text);
  std::string out;
  std::size_t next = 0;  // the next region
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    const int no = i + 1;
    if (next < regions.size() && no == regions[next].begin_line) {
      const SolutionRegion& r = regions[next++];
      if (contains(chosen, r.word)) {
        out += indentation(lines[i].text) + "sf::exercise::not_implemented(\"" + r.word + "\", __func__, __FILE__);\n";
        if (stubbed) stubbed->push_back(r.word);
        i = r.end_line - 1;  // skip the solution and the END line
      }
      continue;  // an unchosen region: drop the BEGIN line, keep the solution
    }
    if (next > 0 && no == regions[next - 1].end_line) continue;  // an unchosen region's END line
    out += lines[i].text + (lines[i].newline ? "\n" : "");
  }
  return out;
}

bool may_hold_related(const std::string& path) {
  return may_hold_regions(path) || (!path.starts_with("tests/data/") && fs::path(path).extension() == ".py");
}

bool may_hold_regions(const std::string& path) {
  if (path.starts_with("tests/data/")) return false;
  const std::string ext = fs::path(path).extension().string();
  return ext == ".h" || ext == ".hpp" || ext == ".cpp" || ext == ".cc";
}

std::vector<std::string> source_files(const fs::path& root) {
  std::vector<std::string> files = fs::exists(root / ".git") ? git_files(root) : walked_files(root);
  std::erase_if(files, [](const std::string& f) { return f == ".git" || f.starts_with(".git/"); });
  std::sort(files.begin(), files.end());
  return files;
}

void require_scratchformer_tree(const fs::path& root) {
  const fs::path cmake = root / "CMakeLists.txt";
  const bool ok = fs::is_regular_file(cmake) && read_file(cmake).find("project(scratchformer") != std::string::npos &&
                  fs::is_regular_file(root / "autograd" / "exercise.h");
  if (!ok)
    throw std::invalid_argument(root.string() + ": not a Scratchformer source tree (expected CMakeLists.txt with " +
                                "project(scratchformer ...) and autograd/exercise.h)");
}

Handout make_handout(const fs::path& root, const std::vector<std::string>& words) {
  Handout h;
  for (const Exercise& e : exercises())
    if (words.empty() || contains(words, e.word)) h.words.push_back(e.word);
  for (const std::string& w : words) require_exercise(w, "handout");
  for (const std::string& w : h.words) h.stubs[w] = 0;
  for (const std::string& path : source_files(root)) {
    HandoutFile f{path, false, "", {}};
    if (may_hold_related(path)) {
      const std::string text = read_file(root / path);
      std::string out = text.find(kRelated) != std::string::npos ? resolve_related(path, text, h.words) : text;
      if (may_hold_regions(path) && (text.find(kBegin) != std::string::npos || text.find(kEnd) != std::string::npos ||
                                     text.find(kExercise) != std::string::npos))
        out = handout_text(path, out, h.words, &f.stubbed);
      f.changed = out != text;
      if (f.changed) f.text = std::move(out);
    }
    for (const std::string& w : f.stubbed) ++h.stubs[w];
    h.files.push_back(std::move(f));
  }
  for (const auto& [w, n] : h.stubs)
    if (n == 0) throw std::invalid_argument("handout: exercise '" + w + "' has no solution region (// BEGIN SOLUTION) in " + root.string());
  return h;
}

std::string handout_manifest_json(const Handout& h) {
  nlohmann::json j;
  j["scratchformer_handout"] = 1;
  j["exercises"] = h.words;
  // Each exercise's parts (the functions its regions are in) and their weights in the teacher's grade.
  j["parts"] = nlohmann::json::object();
  for (const std::string& w : h.words) {
    const Exercise& e = require_exercise(w, "handout");
    for (std::size_t i = 0; i < e.functions.size(); ++i)
      j["parts"][w].push_back({{"function", e.functions[i]}, {"weight", part_weight(e, i)}});
  }
  return j.dump(2) + "\n";
}

std::string handout_readme(const Handout& h) {
  std::ostringstream s;
  s << "# Scratchformer handout / 作业\n\n"
    << "This copy of Scratchformer has the solutions of the exercises below cut out: each is a line\n"
    << "`sf::exercise::not_implemented(\"word\", ...)` under an `// EXERCISE(word):` comment that says what to write.\n\n"
    << "本副本删去了下列练习的答案：每处是 `// EXERCISE(word):` 注释下的一行 `sf::exercise::not_implemented(\"word\", ...)`，\n"
    << "注释说明要实现什么。\n\n"
    << "## Build / 编译\n\n```\ncmake --preset student && cmake --build --preset student\n```\n\n"
    << "The `student` preset builds the libraries, the exercises' tests and `scratchformer` with every\n"
    << "kernel plain (your code is what runs), in a few minutes. The `release` preset builds everything.\n\n"
    << "`student` 预设只构建库、练习的测试和 `scratchformer`，所有内核都用朴素版本（运行的就是你的代码），几分钟即可；\n"
    << "`release` 预设构建全部。\n\n"
    << "## Check your work / 检查\n\n```\nbuild/student/scratchformer grade --build              # rebuild what you changed, grade every exercise / 重新构建改动部分并评分\n"
    << "build/student/scratchformer grade --build --exercise WORD  # one exercise / 单个练习\n"
    << "ctest --preset student -L WORD                         # its tests / 它的测试\n"
    << "build/student/scratchformer gradcheck --module WORD    # its gradient check / 它的梯度检查\n```\n\n"
    << "## Exercises / 练习\n\n| exercise | what to write | 要实现的内容 | files |\n|---|---|---|---|\n";
  for (const std::string& w : h.words) {
    const Exercise& e = require_exercise(w, "handout");
    std::string where;
    for (const std::string& f : e.where) where += (where.empty() ? "" : ", ") + ("`" + f + "`");
    s << "| `" << e.word << "` | " << e.title << " | " << e.title_zh << " | " << where << " |\n";
  }
  s << "\nSee docs/exercises.md. / 详见 docs/exercises.md。\n";
  return s.str();
}

void write_handout(const Handout& h, const fs::path& root, const fs::path& out_dir) {
  const fs::path out = fs::absolute(out_dir).lexically_normal();
  const fs::path src = fs::weakly_canonical(root);
  const std::string rel = fs::weakly_canonical(out).lexically_relative(src).generic_string();
  if (rel.empty() || rel == "." || !rel.starts_with(".."))
    throw std::invalid_argument("handout: --out-dir " + out.string() + " lies inside the source tree " + src.string() + "; choose a directory outside it");
  if (fs::exists(out) && !(fs::is_directory(out) && fs::is_empty(out)))
    throw std::invalid_argument("handout: " + out.string() + " exists and is not an empty directory");
  fs::create_directories(out.parent_path());
  std::string tmpl = out.string() + ".tmp-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("handout: cannot create " + tmpl);
  const fs::path tmp = tmpl;
  try {
    for (const HandoutFile& f : h.files) {
      if (f.changed) {
        write_file(tmp / f.path, f.text);
      } else {
        fs::create_directories((tmp / f.path).parent_path());
        fs::copy_file(root / f.path, tmp / f.path);
        fs::permissions(tmp / f.path, fs::status(root / f.path).permissions());
      }
    }
    write_file(tmp / kHandoutManifest, handout_manifest_json(h));
    write_file(tmp / kHandoutReadme, handout_readme(h));
    if (fs::exists(out)) fs::remove(out);  // the empty directory
    fs::rename(tmp, out);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
}

std::optional<std::vector<std::string>> read_handout_manifest(const fs::path& source_root) {
  const fs::path p = source_root / kHandoutManifest;
  if (!fs::exists(p)) return std::nullopt;
  std::vector<std::string> words;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(p));
    if (j.value("scratchformer_handout", 0) != 1) throw std::invalid_argument("not a handout manifest");
    words = j.at("exercises").get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    throw std::invalid_argument(p.string() + ": expected {\"scratchformer_handout\": 1, \"exercises\": [...]}: " + e.what());
  }
  for (const std::string& w : words) require_exercise(w, p.string());
  return words;
}

}  // namespace sf::train
