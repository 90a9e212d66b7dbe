// `scratchformer plot RUN_DIR` draws a run's training curves from its metrics.tsv;
// `scratchformer plot --config FILE --what positions|schedule` a config's sinusoidal positions or
// learning-rate schedule. Each writes one SVG file (train/classroom/plots.h) and prints its path:
// --out FILE names it (one file, as everywhere in the project; several files would be --out-dir).
// --lang zh writes the titles, axis labels and legends in Chinese.
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "train/classroom/plots.h"
#include "train/classroom/svg.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/config.h"

namespace sf::cli {

namespace {

namespace fs = std::filesystem;

struct PlotArgs {
  std::string run_dir, config, what, out;  // what: positions | schedule; out: "" = the default file
  std::vector<std::string> overrides;      // --set section.key=value
  std::string lang = "auto";               // en | zh | auto (LANG)
};

int run_plot(const PlotArgs& a) {
  if (!a.run_dir.empty() && !a.config.empty())
    throw std::invalid_argument("plot: give either a run directory or --config, not both");
  if (a.run_dir.empty() && a.config.empty())
    throw std::invalid_argument("plot: expected a run directory (training curves) or --config FILE --what positions|schedule");
  if (!a.out.empty()) train::check_output_file(a.out, ".svg", "plot");  // before the work: a typo costs nothing
  const train::Lang lang = chinese_output(a.lang) ? train::Lang::Zh : train::Lang::En;
  std::string svg;
  fs::path out = a.out;
  if (!a.run_dir.empty()) {
    if (!a.what.empty() || !a.overrides.empty())
      throw std::invalid_argument("plot: --what and --set go with --config, not with a run directory");
    if (!fs::is_directory(a.run_dir)) throw std::invalid_argument("plot: " + a.run_dir + " is not a directory");
    svg = train::training_curves_svg((fs::path(a.run_dir) / "metrics.tsv").string(), lang);
    if (out.empty()) out = fs::path(a.run_dir) / "curves.svg";
  } else {
    if (a.what.empty()) throw std::invalid_argument("plot: --config needs --what positions or --what schedule");
    const train::Config cfg = train::load_config(a.config, a.overrides);
    svg = a.what == "positions" ? train::positions_svg(cfg, lang) : train::schedule_svg(cfg, lang);
    if (out.empty()) out = fs::path(cfg.run.dir) / (a.what + ".svg");
  }
  std::error_code ec;
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  if (ec) throw std::runtime_error("plot: cannot create the directory of " + out.string() + ": " + ec.message());
  train::write_file_atomically(out.string(), svg);
  std::cout << out.string() << "\n";
  return 0;
}

}  // namespace

Command add_plot_command(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plot", "Draw a run's training curves (RUN_DIR/metrics.tsv), or a config's positional encodings or LR schedule (SVG)");
  cmd->add_option("run_dir", a->run_dir, "Run directory holding metrics.tsv (writes RUN_DIR/curves.svg)");
  cmd->add_option("--config", a->config, "Config file (TOML), with --what");
  cmd->add_option("--what", a->what, "With --config: positions (sinusoidal table) or schedule (learning rate per step)")
      ->check(CLI::IsMember({"positions", "schedule"}));
  cmd->add_option("--out", a->out, "Output SVG file, ending in .svg (default: RUN_DIR/curves.svg or run.dir/WHAT.svg)");
  cmd->add_option("--set", a->overrides, "Override a config key: section.key=value (repeatable)");
  add_lang_option(*cmd, a->lang);
  return {cmd, [a] { return run_plot(*a); }};
}

}  // namespace sf::cli
