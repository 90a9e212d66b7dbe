// `scratchformer handout --out-dir DIR [--exercises a,b,...|all | --lecture L] [--source ROOT]`: a
// copy of the source tree with the solutions of the chosen exercises cut out
// (train/classroom/handout.h), plus HANDOUT.md (the student's instructions) and handout.json (what
// `grade` reads). `handout --list` prints the exercises; `handout --solutions` the teacher's key.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "train/classroom/exercises.h"
#include "train/classroom/handout.h"
#include "train/classroom/handout_audit.h"
#include "train/cli/commands.h"

namespace sf::cli {

namespace {

struct HandoutArgs {
  std::string out_dir;
  std::string exercises = "all";              // "all" or a ","-separated list of words
  std::string lecture;                        // or the exercises of one lecture
  std::string source;                         // the teacher's tree (empty: this program's checkout)
  bool list = false;                          // print the exercises and stop
  bool solutions = false;                     // print the chosen exercises' solutions (the key) and stop
  bool audit = false;                         // look for the chosen solutions' lines elsewhere in the handout
};

// "a,b" -> {"a","b"}; "all" -> {} (all of them). Unknown words throw, listing the valid ones.
std::vector<std::string> chosen_words(const std::string& list) {
  if (list == "all") return {};
  std::vector<std::string> words;
  std::istringstream in(list);
  for (std::string w; std::getline(in, w, ',');) {
    if (w.empty()) continue;
    train::require_exercise(w, "handout --exercises");
    words.push_back(w);
  }
  if (words.empty()) throw std::invalid_argument("handout --exercises: expected 'all' or words such as masks,softmax; got '" + list + "'");
  return words;
}

void print_summary(const train::Handout& h, const std::string& out_dir) {
  int changed = 0;
  for (const train::HandoutFile& f : h.files) changed += f.changed;
  std::cout << "wrote " << out_dir << ": " << h.files.size() << " files (" << changed
            << " with solutions cut out or markers dropped), HANDOUT.md and handout.json\n";
  std::cout << "exercises / 练习 (regions stubbed / 删去的答案段数):\n";
  for (const std::string& w : h.words) {
    const train::Exercise& e = train::require_exercise(w, "handout");
    std::cout << "  " << w << std::string(w.size() < 20 ? 20 - w.size() : 1, ' ') << h.stubs.at(w) << "  " << e.title << " / "
              << e.title_zh << "\n";
  }
  std::cout << "files with stubs / 含待实现部分的文件:\n";
  for (const train::HandoutFile& f : h.files)
    if (!f.stubbed.empty()) std::cout << "  " << f.path << " (" << f.stubbed.size() << ")\n";
  std::cout << "next / 下一步:\n  cd " << out_dir << " && cmake --preset student && cmake --build --preset student\n"
            << "  build/student/scratchformer grade --build   # rebuild what changed, then grade; every exercise fails until written / 未实现的练习都不通过\n"
            << "hand out the directory (it has no .git: the history holds the solutions) / 分发该目录（不含 .git）\n";
}

// Every exercise (or those of one lecture) with its lecture and files, in both languages.
void print_list(const std::string& lecture) {
  if (!lecture.empty()) train::lecture_exercises(lecture);  // an unknown lecture is an error
  for (const train::Lecture& l : train::lectures()) {
    if (!lecture.empty() && l.word != lecture) continue;
    std::cout << l.word << ": " << l.title << " / " << l.title_zh << "\n";
    for (const train::Exercise& e : train::exercises()) {
      if (e.lecture != l.word) continue;
      std::string where, functions;
      for (const std::string& f : e.where) where += (where.empty() ? "" : ", ") + f;
      for (const std::string& f : e.functions) functions += (functions.empty() ? "" : ", ") + f;
      std::cout << "  " << e.word << std::string(e.word.size() < 20 ? 20 - e.word.size() : 1, ' ') << e.title << " / "
                << e.title_zh << "\n  " << std::string(20, ' ') << where << ": " << functions << "\n";
    }
  }
  std::cout << "handout --exercises a,b or --lecture L chooses them / 用 --exercises a,b 或 --lecture L 选择练习\n";
}

// The teacher's key: each chosen exercise's regions, where they are, the task and the solution.
void print_solutions(const std::string& source, const std::vector<std::string>& chosen) {
  for (const train::Exercise& e : train::exercises()) {
    if (!chosen.empty() && std::find(chosen.begin(), chosen.end(), e.word) == chosen.end()) continue;
    std::cout << "## " << e.word << ": " << e.title << " / " << e.title_zh << "\n";
    for (const std::string& path : e.where)
      for (const train::SolutionRegion& r : train::find_solution_regions(path, train::read_text(source + "/" + path))) {
        if (r.word != e.word) continue;
        std::cout << "\n" << path << ":" << r.begin_line + 1 << "\n```cpp\n";
        for (const std::string& line : r.solution) std::cout << line << "\n";
        std::cout << "```\n";
      }
    std::cout << "\n";
  }
}

// Every place the handout of `words` still holds a line of their solutions; 1 when one is not
// declared harmless in train/classroom/audit_harmless.tsv.
int run_audit(const std::string& source, const std::vector<std::string>& words) {
  const train::Handout h = train::make_handout(source, words);
  const std::filesystem::path declared = std::filesystem::path(source) / train::kAuditHarmless;
  const std::vector<train::HarmlessLine> harmless =
      std::filesystem::exists(declared) ? train::read_harmless(declared) : std::vector<train::HarmlessLine>{};
  const std::vector<train::AuditMatch> matches = train::audit_handout(h, source, harmless);
  int undeclared = 0;
  for (const train::AuditMatch& m : matches) {
    undeclared += m.harmless.empty();
    std::cout << (m.harmless.empty() ? "MATCH    " : "harmless ") << m.word << "  " << m.found_at << "  (solution "
              << m.solution_at << ")\n    " << m.line << "\n";
    if (!m.harmless.empty()) std::cout << "    declared harmless / 已声明无害: " << m.harmless << "\n";
  }
  std::cout << "audit / 审查: " << h.words.size() << " exercises, " << matches.size() << " matches, " << undeclared
            << " not declared harmless / 个练习，" << matches.size() << " 处相同，" << undeclared << " 处未声明无害\n";
  return undeclared > 0 ? 1 : 0;
}

int run_handout(HandoutArgs a) {
  if (a.list) return print_list(a.lecture), 0;
  if (a.source.empty()) a.source = checkout_folder("handout");
  train::require_scratchformer_tree(a.source);
  const std::vector<std::string> words =
      a.lecture.empty() ? chosen_words(a.exercises) : train::lecture_exercises(a.lecture);
  if (a.solutions) return print_solutions(a.source, words), 0;
  if (a.audit) return run_audit(a.source, words);
  if (a.out_dir.empty())
    throw std::invalid_argument("handout: expected --out-dir DIR (where to write the handout), or --list, --solutions or "
                                "--audit");
  const train::Handout h = train::make_handout(a.source, words);
  train::write_handout(h, a.source, a.out_dir);
  print_summary(h, a.out_dir);
  return 0;
}

}  // namespace

Command add_handout_command(CLI::App& app) {
  auto a = std::make_shared<HandoutArgs>();
  CLI::App* cmd = app.add_subcommand(
      "handout", "Copy the source tree with the solutions of chosen exercises cut out, for students (docs/exercises.md)");
  cmd->add_option("--out-dir", a->out_dir, "Where to write the handout: a new or empty directory outside the source tree");
  CLI::Option* exercises = cmd->add_option(
      "--exercises", a->exercises, "Comma-separated exercises to cut out, or all (default): " + train::exercise_words());
  std::string lectures;
  for (const train::Lecture& l : train::lectures()) lectures += (lectures.empty() ? "" : ", ") + l.word;
  cmd->add_option("--lecture", a->lecture, "Cut out the exercises of one lecture: " + lectures)->excludes(exercises);
  cmd->add_flag("--list", a->list, "Print the exercises with their lecture and files, and stop");
  cmd->add_flag("--solutions", a->solutions,
                "Print the chosen exercises' solutions (the teacher's key, Markdown) instead of writing a handout");
  cmd->add_flag("--audit", a->audit,
                "Look for the chosen solutions' lines elsewhere in the handout; exit 1 on a match not declared harmless "
                "in " + std::string(train::kAuditHarmless));
  cmd->add_option("--source", a->source, "The teacher's source tree (default: the checkout this program runs from)");
  return {cmd, [a] { return run_handout(*a); }};
}

}  // namespace sf::cli
