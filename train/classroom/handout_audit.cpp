// The handout audit (handout_audit.h).
#include "train/classroom/handout_audit.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "train/classroom/exercises.h"

namespace sf::train {

namespace fs = std::filesystem;

namespace {

constexpr std::uintmax_t kMaxAuditedBytes = 2 * 1024 * 1024;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

std::string normalise_code_line(const std::string& line) {
  static const std::regex token(R"([A-Za-z_][A-Za-z0-9_]*|[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?f?|\+\+|--|->|::|[^\s])");
  std::string code = line;
  const std::size_t first = code.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  if (code[first] == '#' && code.compare(first, 8, "#include") != 0 && code.compare(first, 7, "#pragma") != 0)
    return "";  // a Python or shell comment
  if (code.compare(first, 2, "* ") == 0 || code.compare(first, 2, "/*") == 0) return "";  // a block comment line
  bool in_string = false;
  for (std::size_t i = 0; i + 1 < code.size(); ++i) {  // drop a // comment outside string literals
    if (code[i] == '"' && (i == 0 || code[i - 1] != '\\')) in_string = !in_string;
    if (!in_string && code[i] == '/' && code[i + 1] == '/') {
      code.resize(i);
      break;
    }
  }
  std::string out;
  for (std::sregex_iterator it(code.begin(), code.end(), token), end; it != end; ++it) {
    if (!out.empty()) out += ' ';
    out += it->str();
  }
  return out;
}

bool worth_auditing(const std::string& normalised) {
  std::size_t tokens = 0;
  std::istringstream in(normalised);
  for (std::string t; in >> t;) ++tokens;
  if (tokens < kMinAuditTokens) return false;
  // A loop header alone is the scaffolding every kernel shares: for ( ... ; ... ; ... ) [{]
  static const std::regex loop_header(R"(^for \( [^;]* ; [^;]* ; [^;{}]* \)( \{)?$)");
  return !std::regex_match(normalised, loop_header);
}

std::vector<HarmlessLine> read_harmless(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path.string() + ": cannot read");
  std::vector<HarmlessLine> out;
  int no = 0;
  for (std::string line; std::getline(in, line);) {
    ++no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, '\t');) fields.push_back(cell);
    const std::string where = path.string() + ":" + std::to_string(no);
    if (fields.size() != 3 || fields[2].empty())
      throw std::invalid_argument(where + ": expected three tab-separated fields (exercise, normalised line, why it "
                                  "is harmless), got " + std::to_string(fields.size()));
    if (fields[0] != "*") require_exercise(fields[0], where);
    out.push_back({fields[0], fields[1], fields[2]});
  }
  return out;
}

std::vector<AuditMatch> audit_handout(const Handout& h, const fs::path& root, const std::vector<HarmlessLine>& harmless) {
  // The searched lines: normalised solution line -> (word, where it is written).
  std::map<std::string, std::pair<std::string, std::string>> searched;
  for (const HandoutFile& f : h.files) {
    if (!may_hold_regions(f.path) || f.stubbed.empty()) continue;
    for (const SolutionRegion& r : find_solution_regions(f.path, read_text(root / f.path))) {
      if (std::find(h.words.begin(), h.words.end(), r.word) == h.words.end()) continue;
      for (std::size_t i = 0; i < r.solution.size(); ++i) {
        const std::string n = normalise_code_line(r.solution[i]);
        if (worth_auditing(n))
          searched.try_emplace(n, r.word, f.path + ":" + std::to_string(r.begin_line + 1 + static_cast<int>(i)));
      }
    }
  }
  std::map<std::pair<std::string, std::string>, std::string> declared;
  for (const HarmlessLine& d : harmless) declared[{d.word, d.line}] = d.reason;

  std::vector<AuditMatch> matches;
  for (const HandoutFile& f : h.files) {
    if (!f.changed && fs::file_size(root / f.path) > kMaxAuditedBytes) continue;
    const std::string text = f.changed ? f.text : read_text(root / f.path);
    if (text.find('\0') != std::string::npos) continue;  // binary
    const std::vector<std::string> lines = lines_of(text);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const auto it = searched.find(normalise_code_line(lines[i]));
      if (it == searched.end()) continue;
      const auto& [word, solution_at] = it->second;
      auto d = declared.find({word, it->first});
      if (d == declared.end()) d = declared.find({"*", it->first});
      matches.push_back({word, solution_at, f.path + ":" + std::to_string(i + 1), it->first,
                         d == declared.end() ? "" : d->second});
    }
  }
  return matches;
}

}  // namespace sf::train
