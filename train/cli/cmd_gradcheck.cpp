// `scratchformer gradcheck [--module NAME] [--list]`: float64 gradient checks of the ops and
// modules and float32 fast paths against their float64 reference (the suite:
// train/classroom/gradcheck_suite.h) as a table; exit status 1 on a failure. An entry that
// throws (an exercise stub: "exercise: implement ...") is a FAIL row with its message, and the
// entries after it still run. --lang zh prints the rule, the headings and the summary in Chinese.
#include <algorithm>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/classroom/gradcheck_suite.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"

namespace sf::cli {

namespace {

struct GradcheckArgs {
  std::string module = "all";  // an entry, a topic or "all"
  bool list = false;
  std::string lang = "auto";  // en | zh | auto (LANG)
};

// The suite's entries named by `module` (an entry, a topic or "all") as a table.
int run_gradcheck(const GradcheckArgs& a) {
  const auto& suite = train::gradcheck_suite();
  if (a.list) {
    std::cout << train::format_gradcheck_list(suite);
    return 0;
  }
  std::vector<const train::GradcheckEntry*> entries;
  for (const auto& e : suite)
    if (a.module == "all" || e.name == a.module || e.topic == a.module) entries.push_back(&e);
  if (entries.empty()) {
    std::vector<std::string> topics;
    for (const auto& e : suite)
      if (std::find(topics.begin(), topics.end(), e.topic) == topics.end()) topics.push_back(e.topic);
    std::string topic_list;
    for (const auto& t : topics) topic_list += (topic_list.empty() ? "" : ", ") + t;
    throw std::invalid_argument("gradcheck: unknown module '" + a.module + "'; valid: all, " + train::gradcheck_names() +
                                " (or a topic: " + topic_list + ")");
  }
  const train::Lang lang = chinese_output(a.lang) ? train::Lang::Zh : train::Lang::En;
  return train::run_gradcheck_table(entries, std::cout, {}, lang) ? 0 : 1;
}

}  // namespace

Command add_gradcheck_command(CLI::App& app) {
  auto a = std::make_shared<GradcheckArgs>();
  CLI::App* cmd = app.add_subcommand(
      "gradcheck", "Float64 gradient checks of every op and module, and float32 fast paths against float64, as a table (exit "
      "status 1 on a failure)");
  cmd->add_option("--module", a->module, "A check (see --list), a topic such as attention, or all (default)");
  cmd->add_flag("--list", a->list, "List the checks with a one-line description each");
  add_lang_option(*cmd, a->lang);
  return {cmd, [a] { return run_gradcheck(*a); }};
}

}  // namespace sf::cli
