// `scratchformer train --config FILE`: trains a translation model (the loop: train/trainer.h),
// optionally under a trace (--trace, --trace-steps, --trace-file, --dump-graph:
// train/classroom/trace.h), and with run.attention_snapshots the attention of a fixed sentence
// at every validation (train/explorer/snapshots.h).
#include <memory>
#include <string>
#include <vector>

#include "train/classroom/trace.h"
#include "train/cli/cli_util.h"
#include "train/cli/commands.h"
#include "train/config.h"
#include "train/explorer/snapshots.h"
#include "train/trainer.h"

namespace sf::cli {

namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;  // --set section.key=value
  bool resume = false;
  bool trace = false;                  // --trace: trace the first step
  train::TraceOptions trace_options;   // --trace-steps, --trace-file, --dump-graph
};

int run_train(TrainArgs& a) {
  const train::Config cfg = train::load_config(a.config, a.overrides);
  train::require_data_files(cfg);  // a corpus found neither beside the config nor in the data folder
  // --trace and --trace-file without --trace-steps trace one step
  if (a.trace_options.trace_steps == 0 && (a.trace || !a.trace_options.trace_file.empty())) a.trace_options.trace_steps = 1;
  // Only the hooks asked for are installed: an ordinary step calls none.
  train::TraceHooks trace(a.trace_options);
  explorer::AttentionSnapshots snapshots(cfg);
  std::vector<train::StepHooks*> asked;
  if (a.trace_options.trace_steps > 0 || !a.trace_options.dump_graph.empty()) asked.push_back(&trace);
  if (cfg.run.attention_snapshots) asked.push_back(&snapshots);
  train::HookList both(asked);
  train::StepHooks* hooks = asked.empty() ? nullptr : asked.size() == 1 ? asked[0] : &both;
  return train::train(cfg, {a.resume, hooks});
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a translation model from a TOML config");
  cmd->add_option("--config", a->config, "Config file (TOML), or the name of a shipped one (`scratchformer configs`): configs/quickstart.toml or quickstart")->required();
  cmd->add_option("--set", a->overrides, "Override a config key: section.key=value (repeatable)");
  cmd->add_flag("--resume", a->resume, "Continue the run in run.dir from checkpoint-last.safetensors");
  cmd->add_flag("--trace", a->trace, "Print each module's output and gradient statistics for the first step");
  cmd->add_option("--trace-steps", a->trace_options.trace_steps, "Trace the first N steps (implies --trace)")
      ->check(at_least_one("a number of steps"));
  cmd->add_option("--trace-file", a->trace_options.trace_file,
                  "Write the trace to this file instead of stderr (implies --trace)");
  cmd->add_option("--dump-graph", a->trace_options.dump_graph,
                  "Write the first step's autograd graph as Graphviz DOT (and FILE.svg if `dot` is installed)");
  return {cmd, [a] { return run_train(*a); }};
}

}  // namespace sf::cli
