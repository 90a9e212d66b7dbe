// `scratchformer demo NAME [--out FILE.svg] [--seed N] [--json]`: runs one of the lecture's claims
// as a demo (train/lessons/demo.h): it prints its numbers, writes an SVG and exits 0 when the
// claim held, 1 when it did not. With --json it prints the report the explorer's Lessons page
// draws instead (the same numbers as JSON, no SVG). `demo` alone or `demo --list` lists the demos.
#include <algorithm>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "train/cli/commands.h"
#include "train/lessons/demo.h"

namespace sf::cli {

namespace {

struct DemoArgs {
  std::string name;
  bool list = false;
  bool json = false;
  lessons::DemoOptions options;
};

// "  autograd         tensors and autograd at work: ..." one line per demo, in course order.
std::string demo_list() {
  std::string text;
  for (const lessons::Demo& d : lessons::demos()) {
    std::string line = "  " + d.name;
    line.resize(std::max<std::size_t>(line.size() + 1, 19), ' ');
    text += line + d.claim + "\n";
  }
  return text;
}

std::string demo_names() {
  std::string names;
  for (const lessons::Demo& d : lessons::demos()) names += (names.empty() ? "" : ", ") + d.name;
  return names;
}

int run_demo(const DemoArgs& a) {
  if (a.list || a.name.empty()) {
    std::cout << "The lecture's claims as demos / 课堂结论演示 (scratchformer demo NAME):\n" << demo_list();
    return 0;
  }
  const lessons::Demo* demo = lessons::find_demo(a.name);
  if (!demo) throw std::invalid_argument("demo: unknown demo '" + a.name + "', expected one of " + demo_names());
  if (!a.options.out.empty()) lessons::check_demo_svg_path(a.options.out);
  if (!a.options.checkpoint.empty() && demo->name != "attribution")
    throw std::invalid_argument("demo " + demo->name + ": --checkpoint is read by attribution only, got --checkpoint " +
                                a.options.checkpoint);
  if (!a.options.text.empty() && demo->name != "worked-example")
    throw std::invalid_argument("demo " + demo->name + ": --text is read by worked-example only, got --text \"" +
                                a.options.text + "\"");
  if (a.json) {
    if (!a.options.out.empty()) throw std::invalid_argument("demo: --json prints the report and writes no SVG; drop --out " + a.options.out);
    const lessons::Json report = lessons::demo_report(*demo, a.options);
    std::cout << report.dump(1) << "\n";
    return report.at("held").get<bool>() ? 0 : 1;
  }
  std::cout << "demo " << demo->name << ": " << demo->claim << "\n";
  return demo->run(a.options, std::cout);
}

}  // namespace

Command add_demo_command(CLI::App& app) {
  auto a = std::make_shared<DemoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "demo", "Run one of the lecture's claims as a demo: its numbers, an SVG, exit 0 if the claim held (1 if not)");
  cmd->add_option("name", a->name, "The demo to run (see the list below; none: list them)");
  cmd->add_flag("--list", a->list, "List the demos with their claims");
  cmd->add_option("--out", a->options.out, "The SVG file to write (must end in .svg; default demo-NAME.svg here)");
  cmd->add_flag("--json", a->json, "Print the report the explorer's Lessons page draws (JSON: claim, verdict, numbers, figures) instead of text and SVG");
  cmd->add_option("--seed", a->options.seed, "Where every random draw starts (default 0; lookup and label-smoothing draw nothing)");
  cmd->add_option("--text", a->options.text, "The sentence a demo reads (worked-example; default 我 喜欢 学 注意力 机制)");
  cmd->add_option("--checkpoint", a->options.checkpoint,
                  "A trained Multi30k de-en encoder-decoder checkpoint (attribution: scores it against hand alignments)");
  cmd->add_option("--corpora", a->options.corpora, "Where the shipped corpora are (default: the project's data/corpora; pooling reads them)");
  cmd->footer("Demos, in course order (every one writes an SVG):\n" + demo_list());
  return {cmd, [a] { return run_demo(*a); }};
}

}  // namespace sf::cli
