// `scratchformer report --run DIR --out report.html [--checkpoint FILE] [--sentences FILE]`: the
// explorer's views that need no live model (curves, per-layer norms, attention over training,
// the translations and attention of a few sentences) as one self-contained HTML file
// (train/explorer/report.h). Open it in any browser, with no server and no network.
#include <iostream>
#include <memory>
#include <string>

#include "train/cli/commands.h"
#include "train/explorer/report.h"

#ifndef SCRATCHFORMER_VERSION
#define SCRATCHFORMER_VERSION "unknown"
#endif

namespace sf::cli {

namespace {

int run_report(const explorer::ReportOptions& o) {
  explorer::write_report(o);
  std::cout << "Report written to " << o.out << " (open it in a browser; it fetches nothing)\n"
            << "报告已写入 " << o.out << "（用浏览器打开即可，无需联网）\n";
  return 0;
}

}  // namespace

Command add_report_command(CLI::App& app) {
  auto o = std::make_shared<explorer::ReportOptions>();
  o->version = SCRATCHFORMER_VERSION;
  CLI::App* cmd = app.add_subcommand("report", "One self-contained HTML file of a run's explorer views (curves, attention, sentences)");
  cmd->add_option("--run", o->run_dir, "Run directory (metrics.tsv, layer_norms.tsv, snapshots.jsonl, checkpoints)")->required();
  cmd->add_option("--out", o->out, "HTML file to write, e.g. report.html")->required();
  cmd->add_option("--checkpoint", o->checkpoint,
                  "Model for the sentences (default: the run's checkpoint-best, else checkpoint-last; none: no sentences)");
  cmd->add_option("--sentences", o->sentences_file,
                  "Sentences to translate, one a line, at most 50 (default: the first 5 of the config's validation source)");
  return {cmd, [o] { return run_report(*o); }};
}

}  // namespace sf::cli
