// `scratchformer handout --out-dir DIR [--exercises a,b,...|all] [--source ROOT]`: a copy of the
// source tree with the solutions of the chosen exercises cut out (train/classroom/handout.h),
// plus HANDOUT.md (the student's instructions) and handout.json (what `grade` reads).
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "train/classroom/exercises.h"
#include "train/classroom/handout.h"
#include "train/cli/commands.h"

namespace sf::cli {

namespace {

struct HandoutArgs {
  std::string out_dir;
  std::string exercises = "all";              // "all" or a ","-separated list of words
  std::string source = SCRATCHFORMER_SOURCE_DIR;  // the teacher's tree
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
  std::cout << "next / 下一步:\n  cd " << out_dir << " && cmake --preset release && cmake --build --preset release\n"
            << "  build/release/scratchformer grade      # every exercise fails until written / 未实现的练习都不通过\n"
            << "hand out the directory (it has no .git: the history holds the solutions) / 分发该目录（不含 .git）\n";
}

int run_handout(const HandoutArgs& a) {
  train::require_scratchformer_tree(a.source);
  const train::Handout h = train::make_handout(a.source, chosen_words(a.exercises));
  train::write_handout(h, a.source, a.out_dir);
  print_summary(h, a.out_dir);
  return 0;
}

}  // namespace

Command add_handout_command(CLI::App& app) {
  auto a = std::make_shared<HandoutArgs>();
  CLI::App* cmd = app.add_subcommand(
      "handout", "Copy the source tree with the solutions of chosen exercises cut out, for students (docs/exercises.md)");
  cmd->add_option("--out-dir", a->out_dir, "Where to write the handout: a new or empty directory outside the source tree")
      ->required();
  cmd->add_option("--exercises", a->exercises,
                  "Comma-separated exercises to cut out, or all (default): " + train::exercise_words());
  cmd->add_option("--source", a->source, "The teacher's source tree (default: the one this program was built from)");
  return {cmd, [a] { return run_handout(*a); }};
}

}  // namespace sf::cli
